/* SPDX-License-Identifier: MIT */
/* buffer.register, buffer.release, buffer.list.
 *
 * A buffer is named by a handle (a shm name on the cpu backend, an IPC
 * memory handle on hip) or passed as a file descriptor (fd: true) with the
 * request's own bytes: then holding the descriptor is the permission, so
 * a client of any uid can share memory with a daemon running as a service
 * user, and a language without shm_open can pass a memfd. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buffer.h"
#include "rpc/dispatch.h"
#include "base/log.h"
#include "core/core.h"
#include "core/quota.h"
#include "rpc/conn.h"

/* What buffer.list shows for a descriptor: "fd:" and what the kernel
 * calls the file ("/memfd:name (deleted)", "/dev/shm/name"). */
static void buffer_fd_name(int fd, char *out, size_t cap)
{
    char path[32], target[200];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) {
        snprintf(out, cap, "fd");
        return;
    }
    snprintf(out, cap, "fd:");
    proto_utf8_clean(out + 3, cap - 3, target, (size_t)n);
}

int gg_method_buffer_register(gg_call *c)
{
    gg_core *core = c->core;
    const void *handle = NULL;
    size_t hlen = 0;
    uint64_t offset = 0, size;
    bool by_fd = false;
    int rc;
    if ((rc = proto_get_bool(c->params, "fd", false, &by_fd, &c->err)) < 0 && rc != -ENOENT)
        return rc;
    if ((rc = proto_get_bin(c->params, "handle", !by_fd, &handle, &hlen, &c->err)) < 0 &&
        (by_fd ? rc != -ENOENT : true))
        return rc;
    if (by_fd && handle)
        return proto_fail(&c->err, -EINVAL, "give either 'handle' or 'fd: true', not both");
    if ((rc = proto_get_u64(c->params, "offset", false, UINT64_MAX, &offset, &c->err)) < 0 &&
        rc != -ENOENT)
        return rc;
    if ((rc = proto_get_u64(c->params, "size", true, UINT64_MAX, &size, &c->err)) < 0)
        return rc;
    if (size == 0)
        return proto_fail(&c->err, -EINVAL, "argument 'size' must be at least 1 byte");
    if (offset > UINT64_MAX - size)
        return proto_fail(&c->err, -EINVAL, "offset + size overflows");
    if (!by_fd && (hlen == 0 || hlen > 256))
        return proto_fail(&c->err, -EINVAL, "argument 'handle' must be 1 to 256 bytes");
    int fd = -1;
    if (by_fd && (fd = gg_conn_take_fd(c->sess->transport)) < 0)
        return gg_conn_fd_fail(c->sess->transport, fd, &c->err);

    /* per-uid quotas (core/quota.h), before anything is mapped */
    gg_buffer *b = NULL;
    if ((rc = gg_quota_buffer(core, c->sess->uid, offset, size, &c->err)) < 0)
        goto out_fd;
    if (!(b = calloc(1, sizeof(*b)))) {
        rc = proto_fail(&c->err, -ENOMEM, "out of memory");
        goto out_fd;
    }
    gg_import_desc d = {
        .handle = handle, .handle_len = hlen, .by_fd = by_fd, .fd = fd, .offset = offset,
        .size = size, .peer_uid = c->sess->uid, .peer_pid = c->sess->pid,
    };
    char why[256] = "";
    void *ptr;
    rc = core->dev->ops->buffer_import(core->dev, &d, &b->dev, &ptr, why, sizeof(why));
    if (rc < 0) {
        free(b);
        rc = proto_fail(&c->err, rc, "%s%s", by_fd ? "fd: " : "", why[0] ? why : strerror(-rc));
        goto out_fd;
    }
    b->id = core->next_id++;
    b->sess = c->sess;
    b->has_obj = core->dev->ops->buffer_object &&
                 core->dev->ops->buffer_object(core->dev, b->dev, b->obj, &b->obj_off) == 0;
    b->ptr = ptr;
    b->offset = offset;
    b->size = size;
    if (by_fd) {
        /* the mapping holds the object: the descriptor is not kept */
        buffer_fd_name(fd, b->handle, sizeof(b->handle) - 1);
        close(fd);
        fd = -1;
    } else if (core->dev->ops->name[0] == 'c') {
        /* the shm name is the client's bytes; buffer.list shows it */
        proto_utf8_clean(b->handle, 71, handle, hlen);
    } else {
        const uint8_t *h = handle;
        for (size_t i = 0; i < hlen && i < 16; i++)
            snprintf(b->handle + 2 * i, 3, "%02x", h[i]);
    }
    if ((rc = gg_idmap_put(&core->buffers, b->id, b)) < 0) {
        core->dev->ops->buffer_release(core->dev, b->dev);
        free(b);
        return proto_fail(&c->err, rc, "out of memory");
    }
    gg_list_add_tail(&c->sess->buffers, &b->sess_link);
    gg_log_fields f = {.session = c->sess->id};
    GG_LOG(GG_LOG_DEBUG, &f, "buffer %llu registered: %s +%llu, %llu bytes",
           (unsigned long long)b->id, b->handle, (unsigned long long)offset,
           (unsigned long long)size);
    msgpack_pack_map(c->pk, 2);
    proto_pack_kv_u64(c->pk, "id", b->id);
    proto_pack_kv_u64(c->pk, "size", b->size);
    return 0;

out_fd:
    if (fd >= 0)
        close(fd);
    return rc;
}

int gg_method_buffer_release(gg_call *c)
{
    uint64_t id;
    gg_buffer *b;
    int rc;
    if ((rc = proto_get_u64(c->params, "id", true, UINT64_MAX, &id, &c->err)) < 0)
        return rc;
    if ((rc = gg_buffer_lookup(c->core, c->sess, id, &b, &c->err)) < 0)
        return rc;
    if (b->users)
        return proto_fail(&c->err, -EBUSY,
                          "buffer %llu is used by %d tensor(s) of programs (live ones, or "
                          "released ones whose replays are still running); release the "
                          "programs first, or retry once their replays are answered",
                          (unsigned long long)id, b->users);
    gg_buffer_free(c->core, b);
    msgpack_pack_map(c->pk, 1);
    proto_pack_kv_u64(c->pk, "id", id);
    return 0;
}

int gg_method_buffer_list(gg_call *c)
{
    gg_session *s = c->sess;
    unsigned n = 0;
    for (gg_list *l = s->buffers.next; l != &s->buffers; l = l->next)
        n++;
    msgpack_pack_map(c->pk, 1);
    proto_pack_key(c->pk, "buffers");
    msgpack_pack_array(c->pk, n);
    for (gg_list *l = s->buffers.next; l != &s->buffers; l = l->next) {
        gg_buffer *b = gg_container_of(l, gg_buffer, sess_link);
        msgpack_pack_map(c->pk, 5);
        proto_pack_kv_u64(c->pk, "id", b->id);
        proto_pack_kv_u64(c->pk, "size", b->size);
        proto_pack_kv_u64(c->pk, "offset", b->offset);
        proto_pack_kv_str(c->pk, "handle", b->handle);
        proto_pack_kv_i64(c->pk, "users", b->users);
    }
    return 0;
}
