/* SPDX-License-Identifier: MIT */
/* Snapshots of the ids a define reads (snapshot.h). */
#include "core/snapshot.h"

#include <errno.h>

#include "core/core.h"

/* Stands for another session's buffer or program: never dereferenced. */
static char snapshot_foreign;

int gg_snapshot_take(gg_core *core, const gg_session *s, gg_snapshot *out)
{
    gg_idmap_init(&out->buffers);
    gg_idmap_init(&out->programs);
    size_t pos = 0;
    uint64_t id;
    gg_buffer *b;
    while ((b = gg_idmap_next(&core->buffers, &pos, &id)) != NULL)
        if (gg_idmap_put(&out->buffers, id, b->sess == s ? (void *)b : &snapshot_foreign) < 0)
            goto oom;
    pos = 0;
    gg_program *p;
    while ((p = gg_idmap_next(&core->programs, &pos, &id)) != NULL)
        if (gg_idmap_put(&out->programs, id, p->sess == s ? (void *)p : &snapshot_foreign) < 0)
            goto oom;
    return 0;
oom:
    gg_snapshot_free(out);
    return -ENOMEM;
}

int gg_snapshot_buffer(const gg_snapshot *snap, uint64_t id, gg_buffer **out, proto_errbuf *e)
{
    void *v = gg_idmap_get(&snap->buffers, id);
    if (!v)
        return proto_fail(e, -ENOENT, "no buffer with id %llu (released, or never registered)",
                          (unsigned long long)id);
    if (v == &snapshot_foreign)
        return proto_fail(e, -EACCES, "buffer %llu belongs to another session",
                          (unsigned long long)id);
    *out = v;
    return 0;
}

int gg_snapshot_program(const gg_snapshot *snap, uint64_t id, gg_program **out,
                        proto_errbuf *e)
{
    void *v = gg_idmap_get(&snap->programs, id);
    if (!v)
        return proto_fail(e, -ENOENT, "no program with id %llu (released, or never defined)",
                          (unsigned long long)id);
    if (v == &snapshot_foreign)
        return proto_fail(e, -EACCES, "program %llu belongs to another session",
                          (unsigned long long)id);
    *out = v;
    return 0;
}

void gg_snapshot_free(gg_snapshot *snap)
{
    gg_idmap_fini(&snap->buffers);
    gg_idmap_fini(&snap->programs);
}
