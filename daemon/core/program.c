/* SPDX-License-Identifier: MIT */
/* The program registry: define and commit, lookup, release and parking,
 * and program.rebind.
 *
 * The top of the program layers (program.h): it calls the builder
 * (program_build.c), the planner (fuse.c) and the layout queries
 * (program_layout.c), and is called by none of them. */
#include "core/program.h"
#include "core/quota.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/cache.h"
#include "core/fuse.h"
#include "base/log.h"
#include "core/core.h"

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

/* Undo the commit (the cache's entries, the remembered choices, the
 * buffers' user counts), then the build. */
static void program_free(gg_program *p)
{
    gg_core *core = p->sess->core;
    if (p->entries)
        for (int i = 0; i < p->nbranches * p->nbuckets; i++)
            if (p->entries[i])
                gg_cache_drop(core->cache, p->entries[i]);
    free(p->adapt_seed);
    for (int i = 0; i < p->ntensors && p->counted; i++)
        if (p->tensors[i].buf)
            p->tensors[i].buf->users--;
    gg_program_discard(p);
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
