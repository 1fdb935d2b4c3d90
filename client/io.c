/* SPDX-License-Identifier: MIT */
/* Requests and responses over a Unix socket.
 *
 * Happy path: pack [0, msgid, method, [params]], write all of it, read until
 * a whole message is framed, unpack it in place, and return the result of the
 * response whose msgid is ours.  Requests may be pipelined (gg_client_submit
 * on the socket path): a response met while waiting for another is kept when
 * it answers an outstanding ticket (submit.c).  Reads go through recvmsg with
 * room for one descriptor, since the answer to fastpath.open carries the
 * region's memfd (SCM_RIGHTS) on its first byte.
 *
 * Failure modes: partial reads and writes and EINTR are retried; a response
 * with another msgid that no ticket waits for (the late answer to a call that
 * timed out) is dropped; a descriptor received when none is expected is
 * closed at once;
 * an "error" notification is recorded (the daemon sends one before closing a
 * connection it cannot continue); end of stream or a reset drops the
 * connection and reports -ECONNRESET with the daemon's last word if any;
 * bytes that are not a MessagePack-RPC message drop the connection (-EPROTO),
 * since the stream cannot be resynchronised. */
#include "priv.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define IO_RBUF_MIN (64u << 10)

int64_t client_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until deadline (ms, monotonic; < 0: forever).
 * 0 when ready, -ETIMEDOUT, or a negative errno. */
static int io_wait(int fd, short events, int64_t deadline)
{
    for (;;) {
        int tmo = -1;
        if (deadline >= 0) {
            int64_t left = deadline - client_now_ms();
            if (left <= 0)
                return -ETIMEDOUT;
            tmo = left > INT32_MAX ? INT32_MAX : (int)left;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, tmo);
        if (r > 0)
            return 0;
        if (r == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

/* The socket is tried first; poll only when it would block (a request
 * nearly always fits at once: one syscall). */
static int io_write_all(gg_client *c, const void *buf, size_t len, int64_t deadline)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = io_wait(c->fd, POLLOUT, deadline);
                if (rc < 0)
                    return rc;
                continue;
            }
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The daemon's "error" notification, remembered for when it closes. */
static void io_note_notify(gg_client *c, const proto_msg *m)
{
    if (m->method_len != 5 || memcmp(m->method, "error", 5) != 0 || !m->params)
        return;
    const msgpack_object *code = proto_map_get(m->params, "code");
    const msgpack_object *msg = proto_map_get(m->params, "message");
    client_copy_str(code, c->notify_code, sizeof c->notify_code);
    client_copy_str(msg, c->notify_msg, sizeof c->notify_msg);
    if (!c->notify_code[0])
        snprintf(c->notify_code, sizeof c->notify_code, "EIO");
    c->notified = true;
    client_set_error(c, c->notify_code, strlen(c->notify_code), c->notify_msg,
                     strlen(c->notify_msg));
}

void client_io_drop(gg_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->rlen = 0;
    c->msg_len = 0;
    proto_frame_reset(&c->frame);
    if (c->fd_received >= 0)
        close(c->fd_received);
    c->fd_received = -1;
    c->fd_wanted = false;
    c->io_ev->lost(c);
}

/* The connection is gone (EOF, reset or a failed write). */
static int io_lost(gg_client *c, int err, const char *method)
{
    client_io_drop(c);
    if (c->notified) {
        client_fail(c, -ECONNRESET, "gfxgraphd closed the connection: %s", c->notify_msg);
        /* the daemon's reason is the more useful code */
        snprintf(c->err_code, sizeof c->err_code, "%s", c->notify_code);
        return -ECONNRESET;
    }
    if (err == 0)
        return client_fail(c, -ECONNRESET,
                           "gfxgraphd closed the connection during '%s' (was it stopped or "
                           "restarted?)", method);
    return client_fail(c, -ECONNRESET, "connection to gfxgraphd lost during '%s': %s", method,
                       strerror(err));
}

/* recv with room for one descriptor.  The one fastpath.open's answer carries
 * is kept for it; anything else is closed, so a daemon (or a peer posing as
 * one) cannot make the client leak descriptors. */
static ssize_t io_recv(gg_client *c, void *buf, size_t len)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return n;
    /* MSG_CTRUNC: the kernel closed what did not fit; what fit is here */
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof fd, sizeof fd);
            if (c->fd_wanted && c->fd_received < 0)
                c->fd_received = fd;
            else
                close(fd);
        }
    }
    return n;
}

/* Drop the message returned last, keep the bytes after it. */
static void io_consume(gg_client *c)
{
    if (!c->msg_len)
        return;
    memmove(c->rbuf, c->rbuf + c->msg_len, c->rlen - c->msg_len);
    c->rlen -= c->msg_len;
    c->msg_len = 0;
}

/* Read what the socket has into rbuf (growing it when full): 0 when bytes
 * came; -ETIMEDOUT (connection kept) or -ECONNRESET (dropped), recorded;
 * with nonblock, -EAGAIN when none can be read right now.  The read is
 * tried before any poll: an answer is often there already. */
static int io_fill(gg_client *c, const char *method, int64_t deadline, bool nonblock)
{
    if (c->rlen == c->rcap) {
        size_t cap = c->rcap ? c->rcap * 2 : IO_RBUF_MIN;
        if (cap > c->max_recv + 64)
            cap = c->max_recv + 64;
        if (cap <= c->rcap)   /* the scanner refuses bigger messages first */
            cap = c->rcap + IO_RBUF_MIN;
        uint8_t *nb = realloc(c->rbuf, cap);
        if (!nb)
            return client_fail(c, -ENOMEM, "out of memory reading an answer of "
                               "gfxgraphd");
        c->rbuf = nb;
        c->rcap = cap;
    }
    for (;;) {
        ssize_t r = io_recv(c, c->rbuf + c->rlen, c->rcap - c->rlen);
        if (r > 0) {
            c->rlen += (size_t)r;
            return 0;
        }
        if (r == 0)
            return io_lost(c, 0, method);
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return io_lost(c, errno, method);
        if (nonblock)
            return -EAGAIN;
        int rc = io_wait(c->fd, POLLIN, deadline);
        if (rc == -ETIMEDOUT)
            return client_fail(c, -ETIMEDOUT, "no answer from gfxgraphd to '%s' within "
                               "%d ms", method, c->timeout_ms);
        if (rc < 0)
            return io_lost(c, -rc, method);
    }
}

int client_read_some(gg_client *c, const char *method, int64_t deadline)
{
    return io_fill(c, method, deadline, false);
}

/* The next whole message, unpacked into c->obj.  0; -ETIMEDOUT (connection
 * kept); -EPROTO / -EMSGSIZE (connection dropped, error recorded);
 * -ECONNRESET (dropped, recorded); or with nonblock, -EAGAIN when no whole
 * message is buffered and none can be read right now. */
static int io_next(gg_client *c, const char *method, int64_t deadline, bool nonblock,
                   const msgpack_object **out)
{
    io_consume(c);
    for (;;) {
        long n = proto_frame_scan(&c->frame, c->rbuf, c->rlen);
        if (n > 0) {
            proto_frame_reset(&c->frame);
            size_t off = 0;
            /* cleared, not freed: the zone keeps its first chunk */
            msgpack_zone_clear(&c->zone);
            msgpack_unpack_return ur =
                msgpack_unpack((const char *)c->rbuf, (size_t)n, &off, &c->zone, &c->obj);
            if (ur != MSGPACK_UNPACK_SUCCESS || off != (size_t)n) {
                client_io_drop(c);
                return client_fail(c, -EPROTO, "gfxgraphd sent a message that does not "
                                   "unpack (during '%s'); connection closed", method);
            }
            c->msg_len = (size_t)n;
            *out = &c->obj;
            return 0;
        }
        if (n < 0) {
            client_io_drop(c);
            if (n == -EMSGSIZE)
                return client_fail(c, -EMSGSIZE, "gfxgraphd sent a message over %zu bytes "
                                   "(during '%s'); connection closed", c->max_recv, method);
            return client_fail(c, -EPROTO, "gfxgraphd sent bytes that are not MessagePack "
                               "(during '%s'); connection closed", method);
        }
        int rc = io_fill(c, method, deadline, nonblock);
        if (rc < 0)
            return rc;
    }
}

/* After a failed write: the daemon may have said why before closing.  Read
 * what is already there, without waiting, to find its notification. */
static void io_drain(gg_client *c, const char *method)
{
    for (int i = 0; i < 64 && c->fd >= 0; i++) {
        const msgpack_object *o;
        if (io_next(c, method, -1, true, &o) < 0)
            return;
        proto_msg m;
        bool idok;
        char why[128];
        if (proto_msg_decode(o, &m, &idok, why, sizeof why) == 0 && m.type == GG_MSG_NOTIFY)
            io_note_notify(c, &m);
    }
}

static int io_response_error(gg_client *c, const msgpack_object *e, const char *method)
{
    const msgpack_object *code = proto_map_get(e, "code");
    const msgpack_object *msg = proto_map_get(e, "message");
    if (!code || code->type != MSGPACK_OBJECT_STR) {
        client_fail(c, -EIO, "gfxgraphd answered '%s' with an error without a code", method);
    } else {
        const char *m = msg && msg->type == MSGPACK_OBJECT_STR ? msg->via.str.ptr : "";
        size_t ml = msg && msg->type == MSGPACK_OBJECT_STR ? msg->via.str.size : 0;
        client_set_error(c, code->via.str.ptr, code->via.str.size, m, ml);
        if (!ml)
            snprintf(c->err, sizeof c->err, "gfxgraphd refused '%s' (%s)", method, c->err_code);
    }
    return code && code->type == MSGPACK_OBJECT_STR
               ? proto_errno_from_code(code->via.str.ptr, code->via.str.size)
               : -EIO;
}

int64_t client_deadline(const gg_client *c)
{
    return c->timeout_ms > 0 ? client_now_ms() + c->timeout_ms : -1;
}

int client_check_connected(gg_client *c)
{
    if (c->fd >= 0)
        return 0;
    if (c->notified)
        return client_fail(c, -ENOTCONN, "not connected to gfxgraphd (it closed the "
                           "connection: %s)", c->notify_msg);
    return client_fail(c, -ENOTCONN, "not connected to gfxgraphd");
}

uint8_t *client_req_raw(gg_client *c, size_t room, uint32_t *msgid)
{
    io_consume(c);   /* the previous result is no longer needed */
    *msgid = c->next_msgid++;
    if (c->next_msgid == 0)
        c->next_msgid = 1;
    msgpack_sbuffer_clear(&c->sb);
    return proto_sbuffer_room(&c->sb, room);
}

uint32_t client_req_begin(gg_client *c, msgpack_packer *pk, const char *method)
{
    io_consume(c);   /* the previous result is no longer needed */
    uint32_t msgid = c->next_msgid++;
    if (c->next_msgid == 0)
        c->next_msgid = 1;
    msgpack_sbuffer_clear(&c->sb);
    msgpack_packer_init(pk, &c->sb, msgpack_sbuffer_write);
    proto_pack_request_head(pk, msgid, method);
    return msgid;
}

int client_req_send(gg_client *c, const char *method, int64_t deadline)
{
    if (c->sb.size > c->max_send)
        return client_fail(c, -EMSGSIZE, "the '%s' request is %zu bytes; gfxgraphd accepts "
                           "at most %zu", method, c->sb.size, c->max_send);

    int rc = io_write_all(c, c->sb.data, c->sb.size, deadline);
    if (c->sb.alloc > (1u << 20)) {   /* do not keep a big request's memory */
        msgpack_sbuffer_destroy(&c->sb);
        msgpack_sbuffer_init(&c->sb);
    }
    if (rc == -ETIMEDOUT) {
        /* part of a request may be on the wire: the stream is unusable */
        client_io_drop(c);
        return client_fail(c, -ETIMEDOUT, "gfxgraphd did not take the '%s' request within "
                           "%d ms; connection closed", method, c->timeout_ms);
    }
    if (rc < 0) {
        io_drain(c, method);
        return io_lost(c, -rc, method);
    }
    return 0;
}

/* A message just read: a notification is noted, an answer to an outstanding
 * ticket kept.  1 when it is the response to msgid (0: none wanted), 0 when
 * not, or -EPROTO when malformed (connection dropped). */
static int io_dispatch(gg_client *c, const msgpack_object *o, uint32_t msgid, proto_msg *m)
{
    bool idok;
    char why[160];
    if (proto_msg_decode(o, m, &idok, why, sizeof why) < 0) {
        client_io_drop(c);
        return client_fail(c, -EPROTO, "gfxgraphd sent a malformed message (%s); "
                           "connection closed", why);
    }
    if (m->type == GG_MSG_NOTIFY) {
        io_note_notify(c, m);
        return 0;
    }
    if (m->type != GG_MSG_RESPONSE)
        return 0;   /* a request to us: nothing asks the client anything */
    if (msgid && m->msgid == msgid)
        return 1;
    c->io_ev->response(c, m);
    return 0;
}

int client_req_await(gg_client *c, uint32_t msgid, const char *method, int64_t deadline,
                     const msgpack_object **result)
{
    for (;;) {
        const msgpack_object *o;
        int rc = io_next(c, method, deadline, false, &o);
        if (rc < 0)
            return rc;
        proto_msg m;
        rc = io_dispatch(c, o, msgid, &m);
        if (rc < 0)
            return rc;
        if (rc == 0)
            continue;
        if (m.error)
            return io_response_error(c, m.error, method);
        if (!m.result || m.result->type != MSGPACK_OBJECT_MAP) {
            return client_fail(c, -EPROTO, "gfxgraphd answered '%s' with a result that is "
                               "not a map", method);
        }
        *result = m.result;
        return 0;
    }
}

int client_pump(gg_client *c, const char *method)
{
    while (c->fd >= 0) {
        const msgpack_object *o;
        int rc = io_next(c, method, -1, true, &o);
        if (rc == -EAGAIN)
            return 0;
        if (rc < 0)
            return rc;
        proto_msg m;
        rc = io_dispatch(c, o, 0, &m);
        if (rc < 0)
            return rc;
    }
    return client_check_connected(c);
}

/* The first bytes of c->sb with fd on them (SCM_RIGHTS), then the rest:
 * the daemon takes a descriptor for the request whose bytes it came with. */
static int io_write_fd(gg_client *c, int fd, int64_t deadline)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = c->sb.data, .iov_len = c->sb.size};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    for (;;) {
        ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = io_wait(c->fd, POLLOUT, deadline);
                if (rc < 0)
                    return rc;
                continue;
            }
            return -errno;
        }
        return io_write_all(c, c->sb.data + n, c->sb.size - (size_t)n, deadline);
    }
}

int client_call_locked_fd(gg_client *c, const char *method, const void *params, size_t len,
                          int fd, const msgpack_object **result)
{
    client_clear_error(c);
    int rc = client_check_connected(c);
    if (rc < 0)
        return rc;
    int64_t deadline = client_deadline(c);
    c->io_ev->before_call(c, deadline);
    msgpack_packer pk;
    uint32_t msgid = client_req_begin(c, &pk, method);
    msgpack_pack_array(&pk, 1);
    if (msgpack_sbuffer_write(&c->sb, params, len) != 0)
        return client_fail(c, -ENOMEM, "out of memory packing '%s'", method);
    rc = io_write_fd(c, fd, deadline);
    if (rc == -ETIMEDOUT) {
        client_io_drop(c);
        return client_fail(c, -ETIMEDOUT, "gfxgraphd did not take the '%s' request within "
                           "%d ms; connection closed", method, c->timeout_ms);
    }
    if (rc < 0) {
        io_drain(c, method);
        return io_lost(c, -rc, method);
    }
    return client_req_await(c, msgid, method, deadline, result);
}

int client_call_locked(gg_client *c, const char *method, const void *params, size_t len,
                       const msgpack_object **result)
{
    client_clear_error(c);
    int rc = client_check_connected(c);
    if (rc < 0)
        return rc;
    int64_t deadline = client_deadline(c);
    c->io_ev->before_call(c, deadline);
    msgpack_packer pk;
    uint32_t msgid = client_req_begin(c, &pk, method);
    if (params && len) {
        msgpack_pack_array(&pk, 1);
        if (msgpack_sbuffer_write(&c->sb, params, len) != 0)
            return client_fail(c, -ENOMEM, "out of memory packing '%s'", method);
    } else {
        msgpack_pack_array(&pk, 0);
    }
    rc = client_req_send(c, method, deadline);
    if (rc < 0)
        return rc;
    return client_req_await(c, msgid, method, deadline, result);
}

/* Exactly one MessagePack map, nothing after it. */
static bool io_params_are_map(const void *params, size_t len)
{
    const uint8_t *p = params;
    if (!len)
        return false;
    if (!((p[0] >= 0x80 && p[0] <= 0x8f) || p[0] == 0xde || p[0] == 0xdf))
        return false;
    proto_frame f;
    proto_frame_init(&f, len + 1);
    f.max_objects = len + 1;   /* every value takes a byte: no count limit of our own */
    return proto_frame_scan(&f, p, len) == (long)len;
}

int gg_client_call(gg_client *c, const char *method, const void *params, size_t params_len,
                   const msgpack_object **result)
{
    if (!c || !method || !*method || !result)
        return c ? client_fail(c, -EINVAL, "gg_client_call: method and result are required")
                 : -EINVAL;
    pthread_mutex_lock(&c->mu);
    int rc;
    if (params && params_len && !io_params_are_map(params, params_len))
        rc = client_fail(c, -EINVAL, "gg_client_call: params must be one packed "
                         "MessagePack map");
    else
        rc = client_call_locked(c, method, params, params_len, result);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void client_copy_str(const msgpack_object *o, char *dst, size_t cap)
{
    if (!cap)
        return;
    if (!o || o->type != MSGPACK_OBJECT_STR) {
        dst[0] = '\0';
        return;
    }
    size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
    memcpy(dst, o->via.str.ptr, n);
    dst[n] = '\0';
}

void client_params_init(client_params *p)
{
    msgpack_sbuffer_init(&p->sb);
    msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

void client_params_free(client_params *p)
{
    msgpack_sbuffer_destroy(&p->sb);
}

int client_call_params(gg_client *c, const char *method, client_params *p, client_read_fn read,
                       void *arg)
{
    const msgpack_object *r;
    pthread_mutex_lock(&c->mu);
    int rc = client_call_locked(c, method, p->sb.data, p->sb.size, &r);
    if (rc == 0 && read)
        rc = read(c, r, arg);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
