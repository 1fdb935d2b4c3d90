/* SPDX-License-Identifier: MIT */
/* Client buffers: lookup and release (buffer.h); importing one is the
 * transport's buffer.register. */
#include "core/buffer.h"

#include <errno.h>
#include <stdlib.h>

#include "core/core.h"

int gg_buffer_lookup(gg_core *core, gg_session *s, uint64_t id, gg_buffer **out,
                     proto_errbuf *e)
{
    gg_buffer *b = gg_idmap_get(&core->buffers, id);
    if (!b)
        return proto_fail(e, -ENOENT, "no buffer with id %llu (released, or never registered)",
                          (unsigned long long)id);
    if (b->sess != s)
        return proto_fail(e, -EACCES, "buffer %llu belongs to another session",
                          (unsigned long long)id);
    *out = b;
    return 0;
}

void gg_buffer_free(gg_core *core, gg_buffer *b)
{
    gg_idmap_del(&core->buffers, b->id);
    gg_list_del(&b->sess_link);
    core->dev->ops->buffer_release(core->dev, b->dev);
    free(b);
}

void gg_buffer_release_all(gg_session *s)
{
    while (!gg_list_empty(&s->buffers)) {
        gg_buffer *b = gg_container_of(s->buffers.next, gg_buffer, sess_link);
        gg_buffer_free(s->core, b);
    }
}
