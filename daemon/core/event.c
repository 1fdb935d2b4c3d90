/* SPDX-License-Identifier: MIT */
/* Client events: lookup and release (event.h); importing one is the
 * transport's event.register. */
#include "core/event.h"

#include <errno.h>
#include <stdlib.h>

#include "core/core.h"

int gg_event_lookup(gg_core *core, gg_session *s, uint64_t id, gg_event **out, proto_errbuf *e)
{
    gg_event *ev = gg_idmap_get(&core->events, id);
    if (!ev)
        return proto_fail(e, -ENOENT, "no event with id %llu (released, or never registered)",
                          (unsigned long long)id);
    if (ev->sess != s)
        return proto_fail(e, -EACCES, "event %llu belongs to another session",
                          (unsigned long long)id);
    *out = ev;
    return 0;
}

void gg_event_free(gg_core *core, gg_event *ev)
{
    gg_idmap_del(&core->events, ev->id);
    gg_list_del(&ev->sess_link);
    core->dev->ops->event_destroy(core->dev, ev->dev);
    free(ev);
}

void gg_event_release_all(gg_session *s)
{
    while (!gg_list_empty(&s->events))
        gg_event_free(s->core, gg_container_of(s->events.next, gg_event, sess_link));
}
