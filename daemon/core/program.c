/* SPDX-License-Identifier: MIT */
/* Programs once built (program_build.c builds and checks a define): their
 * lifetime, the scratch layout and the binding of tensors for a launch, the
 * commit of a define into the core, and program.rebind. */
#include "core/program_int.h"
#include "core/quota.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/cache.h"
#include "core/fuse.h"
#include "base/log.h"
#include "core/core.h"

#define PROG_ALIGN 256

int gg_program_lookup(gg_core *core, gg_session *s, uint64_t id, gg_program **out,
                      proto_errbuf *e)
{
    gg_program *p = gg_idmap_get(&core->programs, id);
    if (!p)
        return proto_fail(e, -ENOENT, "no program with id %llu (released, or never defined)",
                          (unsigned long long)id);
    if (p->sess != s)
        return proto_fail(e, -EACCES, "program %llu belongs to another session",
                          (unsigned long long)id);
    *out = p;
    return 0;
}

static void program_free(gg_program *p)
{
    gg_core *core = p->sess->core;
    if (p->entries) {
        for (int i = 0; i < p->nbranches * p->nbuckets; i++)
            if (p->entries[i])
                gg_cache_drop(core->cache, p->entries[i]);
        free(p->entries);
    }
    gg_arena_unref(core, p->arena);
    free(p->adapt_seed);
    for (int i = 0; i < p->ntensors && p->counted; i++)
        if (p->tensors[i].buf)
            p->tensors[i].buf->users--;
    for (int b = 0; b < p->nbranches; b++) {
        free(p->branches[b].nodes);
        free(p->branches[b].plan);
        free(p->branches[b].stages);
    }
    free(p->branches);
    free(p->tensors);
    free(p->tindex);
    free(p->sig);
    free(p);
}

void gg_program_release(gg_program *p)
{
    if (p->released)
        return;
    p->released = true;
    gg_idmap_del(&p->sess->core->programs, p->id);
    gg_list_del(&p->sess_link);
    if (p->pins == 0)
        program_free(p);
}

void gg_program_unpin(gg_program *p)
{
    if (--p->pins == 0 && p->released)
        program_free(p);
}

void gg_program_park_all(gg_session *s)
{
    while (!gg_list_empty(&s->programs)) {
        gg_program *p = gg_container_of(s->programs.next, gg_program, sess_link);
        if (p->pins == 0 && p->sig && p->entries)
            gg_cache_park(s->core->cache, p, s->uid);
        gg_program_release(p);
    }
}

int gg_program_bucket_index(const gg_program *p, int batch)
{
    for (int i = 0; i < p->nbuckets; i++)
        if (p->buckets[i] >= batch)
            return i;
    return -1;
}

gg_tensor_desc gg_program_desc_at(const gg_ptensor *t, int rows)
{
    gg_tensor_desc d = t->desc;
    if (t->batch_dim >= 0)
        d.dims[t->batch_dim] = rows;
    return d;
}

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

static int prog_root(const gg_program *p, int t)
{
    return p->tensors[t].view_of >= 0 ? p->tensors[t].view_of : t;
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

int gg_program_commit(gg_core *core, gg_program *p, proto_errbuf *e)
{
    gg_session *s = p->sess;
    /* per-uid quotas: programs and the scratch their graphs can hold */
    int rc = gg_quota_program(core, s->uid, p, e);
    if (rc < 0)
        goto fail;
    p->id = core->next_id++;
    if ((rc = gg_idmap_put(&core->programs, p->id, p)) < 0) {
        rc = proto_fail(e, rc, "out of memory");
        goto fail;
    }
    for (int i = 0; i < p->ntensors; i++)
        if (p->tensors[i].buf)
            p->tensors[i].buf->users++;
    p->counted = true;
    gg_list_add_tail(&s->programs, &p->sess_link);
    p->warm = gg_cache_adopt(core->cache, p, s->uid);
    p->adapt_seed = gg_cache_adapt_seed(core->cache, p);
    return 0;

fail:
    program_free(p);
    return rc;
}

void gg_program_discard(gg_program *p)
{
    program_free(p);
}

static int prog_core_lookup(const gg_define_env *env, uint64_t id, gg_buffer **out,
                            proto_errbuf *e)
{
    return gg_buffer_lookup(env->ctx, env->s, id, out, e);
}

static int prog_core_program(const gg_define_env *env, uint64_t id, gg_program **out,
                             proto_errbuf *e)
{
    return gg_program_lookup(env->ctx, env->s, id, out, e);
}

int gg_program_define(gg_core *core, gg_session *s, const gg_program_spec *spec,
                      gg_program **out, proto_errbuf *e)
{
    gg_define_env env = {.s = s, .buckets = core->cfg->buckets, .nbuckets = core->cfg->nbuckets,
                         .fuse = core->cfg->fuse,
                         .lookup = prog_core_lookup, .program = prog_core_program,
                         .ctx = core};
    int rc = gg_program_build(&env, spec, out, e);
    return rc < 0 ? rc : gg_program_commit(core, *out, e);
}

int gg_program_rebind(gg_core *core, gg_program *p, const gg_rebind_spec *spec, int *count,
                      proto_errbuf *e)
{
    if (p->pins)
        return proto_fail(e, -EBUSY, "program %llu has replays in flight; rebind once they are "
                          "answered", (unsigned long long)p->id);
    const gg_spec_val *tensors = &spec->tensors;
    if (tensors->kind != GG_SPEC_MAP || tensors->len == 0)
        return proto_fail(e, -EINVAL, "argument 'tensors' must be a non-empty map of "
                          "name: {buffer, offset}");
    gg_ptensor *nt = malloc(sizeof(*nt) * (size_t)p->ntensors);
    if (!nt)
        return proto_fail(e, -ENOMEM, "out of memory");
    memcpy(nt, p->tensors, sizeof(*nt) * (size_t)p->ntensors);
    int top = p->buckets[p->nbuckets - 1], rc = 0;
    for (uint32_t i = 0; i < tensors->len && rc == 0; i++) {
        const gg_rebind_tensor *kv = &spec->tensor[tensors->u + i];
        int t = gg_program_find_tensor(p, &kv->name);
        if (t < 0) {
            rc = proto_fail(e, -EINVAL, "tensors: no tensor of that name in program %llu",
                            (unsigned long long)p->id);
            break;
        }
        if (!nt[t].buf) {
            rc = proto_fail(e, -EINVAL, "tensor '%s' is scratch: only buffer tensors can be "
                            "rebound", nt[t].name);
            break;
        }
        if (nt[t].view_of >= 0) {
            rc = proto_fail(e, -EINVAL, "tensor '%s' is a view of '%s': rebind '%s' and its "
                            "views follow", nt[t].name, nt[nt[t].view_of].name,
                            nt[nt[t].view_of].name);
            break;
        }
        char sub[160] = "";
        proto_errbuf se = {sub, sizeof(sub)};
        uint64_t bid, off = 0;
        if (!kv->is_map || (rc = gg_spec_u64(&kv->buffer, "buffer", true, &bid, &se)) < 0 ||
            ((rc = gg_spec_u64(&kv->offset, "offset", false, &off, &se)) < 0 && rc != -ENOENT) ||
            (rc = gg_buffer_lookup(core, p->sess, bid, &nt[t].buf, &se)) < 0) {
            rc = proto_fail(e, rc < 0 ? rc : -EINVAL, "tensor '%s': %s", nt[t].name,
                            sub[0] ? sub : "give {buffer, offset}");
            break;
        }
        rc = 0;
        nt[t].offset = off;
        int64_t rows = off % gg_dtype_size(nt[t].desc.dtype) ? -1 : gg_program_tensor_rows(&nt[t]);
        if (rows < top)
            rc = proto_fail(e, -ERANGE, "tensor '%s' does not fit in buffer %llu at offset %llu "
                            "for batch %d (or the offset is not element-aligned)", nt[t].name,
                            (unsigned long long)bid, (unsigned long long)off, top);
    }
    for (int t = 0; t < p->ntensors; t++)
        if (nt[t].view_of >= 0) {
            nt[t].buf = nt[nt[t].view_of].buf;
            nt[t].offset = nt[nt[t].view_of].offset;
        }
    gg_ptensor *old = p->tensors;
    p->tensors = nt;
    for (int b = 0; b < p->nbranches && rc == 0; b++)
        for (int ni = 0; ni < p->branches[b].nnodes && rc == 0; ni++)
            rc = gg_program_node_overlaps(p, &p->branches[b].nodes[ni], ni, e);
    if (rc == 0)
        rc = gg_program_padding_overlaps(p, e);
    if (rc < 0) {
        p->tensors = old;
        free(nt);
        return rc;
    }
    int changed = 0, max_batch = GG_MAX_BATCH;
    for (int t = 0; t < p->ntensors; t++) {
        if (!nt[t].buf)
            continue;
        if (nt[t].buf != old[t].buf || nt[t].offset != old[t].offset) {
            changed++;
            old[t].buf->users--;
            nt[t].buf->users++;
        }
        int64_t rows = gg_program_tensor_rows(&nt[t]);
        if (rows < max_batch)
            max_batch = (int)rows;
    }
    free(old);
    p->max_batch = gg_program_layout_rows(p, max_batch);
    /* overlaps between buffer tensors decide what may fuse; the plan has
     * room for every node, so an unfused one is always there to fall to */
    for (int b = 0; b < p->nbranches && changed; b++)
        gg_fuse_plan(p, &p->branches[b], core->cfg->fuse);
    if (changed)
        p->gen++;
    *count = changed;
    return 0;
}
