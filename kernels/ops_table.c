/* SPDX-License-Identifier: MIT */
/* The op table: the rows of every family file (ops_<family>.c), gathered in
 * the order of ops_list.h, and the lookups on it.  The daemon validates
 * every program against the rows' rules at define time, so the check
 * functions are the single place shapes are enforced. */
#include "ops_rules.h"

#include <string.h>

#define GG_OP_NAME_DEF_(id_, name_, fam_) const char gg_op_name_##id_[] = name_;
GG_OPS_LIST(GG_OP_NAME_DEF_)
#undef GG_OP_NAME_DEF_

#define GG_OP_PTR_(id_, name_, fam_) [GG_OP_##id_] = &gg_op_row_##id_,
static const gg_op_def *const table[GG_OP_COUNT] = {GG_OPS_LIST(GG_OP_PTR_)};
#undef GG_OP_PTR_

const char *gg_ops_in_name(const gg_op_def *op, int i)
{
    if (!op || gg_ops_at(op->id) != op || i < 0 || i >= op->nin_max || i >= GG_MAX_OPERANDS)
        return NULL;
    return op->in_names[i];
}

const char *gg_ops_out_name(const gg_op_def *op, int i)
{
    if (!op || gg_ops_at(op->id) != op || i < 0 || i >= op->nout || i >= GG_MAX_OPERANDS)
        return NULL;
    return op->out_names[i];
}

int gg_ops_count(void)
{
    return GG_OP_COUNT;
}

const gg_op_def *gg_ops_at(int i)
{
    return i >= 0 && i < GG_OP_COUNT ? table[i] : NULL;
}

const gg_op_def *gg_ops_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < GG_OP_COUNT; i++)
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    return NULL;
}

int gg_ops_attr_index(const gg_op_def *op, const char *name)
{
    if (!op || !name)
        return -1;
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return i;
    return -1;
}

void gg_ops_attr_defaults(const gg_op_def *op, gg_op_attrs *attrs)
{
    if (!attrs)
        return;
    memset(attrs, 0, sizeof *attrs);
    for (int i = 0; op && i < op->nattrs; i++)
        attrs->v[i] = op->attrs[i].def;
}

void gg_ops_run_cpu(const gg_op_def *op, const gg_tensor *in, int nin, const gg_tensor *out,
                    int nout, const gg_op_attrs *attrs)
{
    gg_op_attrs defs;
    if (!attrs) {
        gg_ops_attr_defaults(op, &defs);
        attrs = &defs;
    }
    op->cpu(in, nin, out, nout, attrs);
}
