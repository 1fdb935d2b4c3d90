/* event.register, event.release. */
#include <errno.h>
#include <stdlib.h>

#include "dispatch.h"
#include "event.h"
#include "log.h"
#include "server.h"

int gg_event_lookup(gg_server *srv, gg_session *s, uint64_t id, gg_event **out, proto_errbuf *e)
{
    gg_event *ev = gg_idmap_get(&srv->events, id);
    if (!ev)
        return proto_fail(e, -ENOENT, "no event with id %llu (released, or never registered)",
                          (unsigned long long)id);
    if (ev->sess != s)
        return proto_fail(e, -EACCES, "event %llu belongs to another session",
                          (unsigned long long)id);
    *out = ev;
    return 0;
}

static void event_free(gg_server *srv, gg_event *ev)
{
    gg_idmap_del(&srv->events, ev->id);
    gg_list_del(&ev->sess_link);
    srv->dev->ops->event_destroy(srv->dev, ev->dev);
    free(ev);
}

void gg_event_release_all(gg_session *s)
{
    while (!gg_list_empty(&s->events))
        event_free(s->srv, gg_container_of(s->events.next, gg_event, sess_link));
}

int gg_method_event_register(gg_call *c)
{
    gg_server *srv = c->srv;
    const void *handle;
    size_t hlen;
    int rc = proto_get_bin(c->params, "handle", true, &handle, &hlen, &c->err);
    if (rc < 0)
        return rc;
    gg_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return proto_fail(&c->err, -ENOMEM, "out of memory");
    char why[256] = "";
    rc = srv->dev->ops->event_import(srv->dev, handle, hlen, &ev->dev, why, sizeof(why));
    if (rc < 0) {
        free(ev);
        return proto_fail(&c->err, rc, "%s", why);
    }
    ev->id = srv->next_id++;
    ev->sess = c->sess;
    if ((rc = gg_idmap_put(&srv->events, ev->id, ev)) < 0) {
        srv->dev->ops->event_destroy(srv->dev, ev->dev);
        free(ev);
        return proto_fail(&c->err, rc, "out of memory");
    }
    gg_list_add_tail(&c->sess->events, &ev->sess_link);
    msgpack_pack_map(c->pk, 1);
    proto_pack_kv_u64(c->pk, "id", ev->id);
    return 0;
}

int gg_method_event_release(gg_call *c)
{
    uint64_t id;
    gg_event *ev;
    int rc = proto_get_u64(c->params, "id", true, UINT64_MAX, &id, &c->err);
    if (rc < 0)
        return rc;
    if ((rc = gg_event_lookup(c->srv, c->sess, id, &ev, &c->err)) < 0)
        return rc;
    if (ev->users)
        return proto_fail(&c->err, -EBUSY, "event %llu is used by %d replay(s) in flight",
                          (unsigned long long)id, ev->users);
    event_free(c->srv, ev);
    msgpack_pack_map(c->pk, 1);
    proto_pack_kv_u64(c->pk, "id", id);
    return 0;
}
