/* SPDX-License-Identifier: MIT */
/* event.register, event.release. */
#include <errno.h>
#include <stdlib.h>

#include "rpc/dispatch.h"
#include "core/event.h"
#include "base/log.h"
#include "core/core.h"
#include "rpc/conn.h"

int gg_method_event_register(gg_call *c)
{
    gg_core *core = c->core;
    const void *handle;
    size_t hlen;
    int rc = proto_get_bin(c->params, "handle", true, &handle, &hlen, &c->err);
    if (rc < 0)
        return rc;
    /* refused here, so every backend says the same (the cpu one ignores the bytes) */
    if (hlen == 0 || hlen > 256)
        return proto_fail(&c->err, -EINVAL, "argument 'handle' must be 1 to 256 bytes (an "
                          "IPC event handle), got %zu", hlen);
    gg_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return proto_fail(&c->err, -ENOMEM, "out of memory");
    char why[256] = "";
    rc = core->dev->ops->event_import(core->dev, handle, hlen, &ev->dev, why, sizeof(why));
    if (rc < 0) {
        free(ev);
        return proto_fail(&c->err, rc, "%s", why);
    }
    ev->id = core->next_id++;
    ev->sess = c->sess;
    if ((rc = gg_idmap_put(&core->events, ev->id, ev)) < 0) {
        core->dev->ops->event_destroy(core->dev, ev->dev);
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
    if ((rc = gg_event_lookup(c->core, c->sess, id, &ev, &c->err)) < 0)
        return rc;
    if (ev->users)
        return proto_fail(&c->err, -EBUSY, "event %llu is used by %d replay(s) in flight",
                          (unsigned long long)id, ev->users);
    gg_event_free(c->core, ev);
    msgpack_pack_map(c->pk, 1);
    proto_pack_kv_u64(c->pk, "id", id);
    return 0;
}
