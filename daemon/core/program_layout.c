/* SPDX-License-Identifier: MIT */
/* Program layout (program_layout.h): what a built program's tensors and
 * nodes occupy, read by the builder, the launch planner and the executor. */
#include "core/program_layout.h"

#include <errno.h>

#include "core/program.h"

#define PROG_ALIGN 256

gg_tensor_desc gg_program_desc_at(const gg_ptensor *t, int rows)
{
    gg_tensor_desc d = t->desc;
    if (t->batch_dim >= 0)
        d.dims[t->batch_dim] = rows;
    return d;
}

/* Rows this buffer tensor can hold (INT32_MAX without a batch dim), or
 * -EINVAL when it does not fit even at one row. */
int64_t gg_program_tensor_rows(const gg_ptensor *t)
{
    gg_tensor_desc d = gg_program_desc_at(t, 1);
    uint64_t unit = gg_desc_bytes(&d);
    if (t->offset > t->buf->size || unit > t->buf->size - t->offset)
        return -EINVAL;
    if (t->batch_dim < 0)
        return INT32_MAX;
    return (int64_t)((t->buf->size - t->offset) / unit);
}

/* Above the largest bucket a batch runs eager with the buffers laid out as
 * the client placed them: the rows it may use stop where two buffer tensors
 * that are apart at the largest bucket would start to overlap. */
int gg_program_layout_rows(const gg_program *p, int rows)
{
    int top = p->buckets[p->nbuckets - 1];
    for (int a = 0; a < p->ntensors; a++) {
        const gg_ptensor *ta = &p->tensors[a];
        if (!ta->buf || ta->batch_dim < 0)
            continue;
        gg_tensor_desc d1 = gg_program_desc_at(ta, 1), dt = gg_program_desc_at(ta, top);
        uint64_t unit = gg_desc_bytes(&d1), a1 = ta->offset + gg_desc_bytes(&dt);
        for (int b = 0; b < p->ntensors; b++) {
            const gg_ptensor *tb = &p->tensors[b];
            if (b == a || tb->buf != ta->buf || tb->offset < a1)
                continue;   /* other buffer, or already overlapping by design */
            uint64_t room = (tb->offset - ta->offset) / unit;
            if (room < (uint64_t)rows)
                rows = (int)room;
        }
    }
    return rows;
}

int gg_program_bucket_index(const gg_program *p, int batch)
{
    for (int i = 0; i < p->nbuckets; i++)
        if (p->buckets[i] >= batch)
            return i;
    return -1;
}

/* ---- memory: spans and overlaps ------------------------------------------ */

bool gg_program_span(const gg_ptensor *t, int rows, uint64_t obj[2], uint64_t *lo, uint64_t *hi)
{
    gg_tensor_desc d = gg_program_desc_at(t, rows);
    if (t->buf->has_obj) {
        obj[0] = t->buf->obj[0];
        obj[1] = t->buf->obj[1];
        *lo = t->buf->obj_off + t->offset;
    } else {
        obj[0] = obj[1] = 0;
        *lo = (uint64_t)(uintptr_t)t->buf->ptr + t->offset;
    }
    *hi = *lo + gg_desc_bytes(&d);
    return t->buf->has_obj;
}

static int prog_root(const gg_program *p, int t)
{
    return p->tensors[t].view_of >= 0 ? p->tensors[t].view_of : t;
}

/* By the memory, not by the buffer id: one object registered twice is one
 * memory (PROTOCOL.md, program.define rule 6), and the planner (fuse.c)
 * keeps apart what this calls apart. */
static int prog_overlap(const gg_program *p, int a, int b, int rows)
{
    const gg_ptensor *ta = &p->tensors[a], *tb = &p->tensors[b];
    if (a == b)
        return 2;
    if (!ta->buf && !tb->buf)   /* scratch: apart, or views of one tensor (same bytes) */
        return prog_root(p, a) == prog_root(p, b) ? 2 : 0;
    if (!ta->buf || !tb->buf)
        return 0;
    uint64_t oa[2], ob[2], a0, a1, b0, b1;
    bool ka = gg_program_span(ta, rows, oa, &a0, &a1), kb = gg_program_span(tb, rows, ob, &b0, &b1);
    if (ka != kb || oa[0] != ob[0] || oa[1] != ob[1])
        return 0;
    if (a1 <= b0 || b1 <= a0)
        return 0;
    return (a0 == b0 && a1 == b1) ? 2 : 1;
}

int gg_program_overlap(const gg_program *p, int a, int b, int rows)
{
    return prog_overlap(p, a, b, rows);
}

int gg_program_root(const gg_program *p, int t)
{
    return prog_root(p, t);
}

/* ---- op rules at a row count ------------------------------------------------ */

/* The op's shape and dtype rule for node n with the batch dims at `rows`. */
int gg_program_node_check_rows(const gg_program *p, const gg_pnode *n, int rows, char *why,
                                size_t whylen)
{
    gg_tensor_desc din[GG_MAX_OPERANDS], dout[GG_MAX_OPERANDS];
    for (int i = 0; i < n->nin; i++)
        din[i] = gg_program_desc_at(&p->tensors[n->in[i]], rows);
    for (int i = 0; i < n->nout; i++)
        dout[i] = gg_program_desc_at(&p->tensors[n->out[i]], rows);
    return n->op->check(n->op, din, n->nin, dout, n->nout, &n->attrs, why, whylen);
}

int gg_program_check_rows(const gg_program *p, int branch, int rows, proto_errbuf *e)
{
    const gg_branch *br = &p->branches[branch];
    for (int ni = 0; ni < br->nnodes; ni++) {
        char why[256] = "";
        if (gg_program_node_check_rows(p, &br->nodes[ni], rows, why, sizeof(why)) < 0)
            return proto_fail(e, -ERANGE, "batch %d is above the largest bucket (%d), and at "
                              "%d rows node %d (%s) does not hold: %s", rows,
                              p->buckets[p->nbuckets - 1], rows, ni, br->nodes[ni].op->name, why);
    }
    return 0;
}

/* ---- scratch and binding ------------------------------------------------------ */

static size_t prog_align(size_t n)
{
    return (n + PROG_ALIGN - 1) & ~(size_t)(PROG_ALIGN - 1);
}

/* Scratch tensors sit one after another, each aligned, in tensor order (a
 * view takes no room of its own); the batch word, when there is one, after
 * them all. */
static size_t prog_scratch_offset(const gg_program *p, int upto, int rows)
{
    size_t off = 0;
    for (int i = 0; i < upto; i++)
        if (!p->tensors[i].buf && p->tensors[i].view_of < 0) {
            gg_tensor_desc d = gg_program_desc_at(&p->tensors[i], rows);
            off += prog_align(gg_desc_bytes(&d));
        }
    return off;
}

size_t gg_program_scratch_bytes(const gg_program *p, int rows)
{
    return prog_scratch_offset(p, p->ntensors, rows) + (p->batch_word ? PROG_ALIGN : 0);
}

int32_t *gg_program_batch_word(const gg_program *p, int rows, uint8_t *scratch)
{
    if (!p->batch_word || !scratch)
        return NULL;
    return (int32_t *)(scratch + prog_scratch_offset(p, p->ntensors, rows));
}

static void prog_bind_one(const gg_program *p, int t, int rows, uint8_t *scratch, gg_tensor *out)
{
    const gg_ptensor *pt = &p->tensors[t];
    out->desc = gg_program_desc_at(pt, rows);
    out->data = pt->buf ? pt->buf->ptr + pt->offset
                        : scratch + prog_scratch_offset(p, prog_root(p, t), rows);
}

void gg_program_bind_tensor(const gg_program *p, int t, int rows, uint8_t *scratch,
                            gg_tensor *out)
{
    prog_bind_one(p, t, rows, scratch, out);
}

int gg_program_bind(const gg_program *p, const gg_pnode *n, int rows, uint8_t *scratch,
                    gg_tensor *in, gg_tensor *out)
{
    for (int i = 0; i < n->nin; i++)
        prog_bind_one(p, n->in[i], rows, scratch, &in[i]);
    for (int i = 0; i < n->nout; i++)
        prog_bind_one(p, n->out[i], rows, scratch, &out[i]);
    if (!n->op->wants_batch || n->nin >= GG_MAX_OPERANDS)
        return n->nin;
    in[n->nin].data = gg_program_batch_word(p, rows, scratch);
    in[n->nin].desc = (gg_tensor_desc){.dtype = GG_DT_I32, .ndim = 1, .dims = {1}};
    return in[n->nin].data ? n->nin + 1 : n->nin;
}
