/* SPDX-License-Identifier: MIT */
/* Client connections.
 *
 * Happy path: accept, read into a growing buffer, frame complete messages
 * with proto_frame_scan (header checked before body), unpack each into the
 * connection's zone (emptied, not freed, between messages), dispatch by
 * method name, pack the response into the connection's buffer and write it
 * with uv_try_write; only what the socket does not take at once is copied
 * into a pooled write request and queued with uv_write.  A connection
 * carries one session.  Once warm, a request allocates nothing here.
 *
 * Failure modes: a message over max-message-size, or bytes that are not
 * MessagePack-RPC (anything but an array at the start of a message: an
 * HTTP request or a line of text is refused at its first byte, not once
 * per byte) get one "error" notification and the connection is closed
 * after its queued writes flush.  An array of the wrong shape is answered
 * with EPROTO and the connection stays usable.  With max-inflight requests
 * in flight the connection is not read until one is answered
 * (backpressure: what the client sent waits in the socket).  A peer that stops reading its
 * responses is cut off once its write queue passes a bound.  A request
 * whose first byte has arrived must be whole within request-timeout-ms, or
 * the connection gets an ETIMEDOUT notification and is closed, so a stalled
 * sender cannot hold a slot (or its buffer) for ever; a connection with no
 * partial request may stay idle as long as it likes.  A uid past
 * max-connections-per-uid is refused at accept, so one user cannot take
 * every slot.  Nothing a client sends touches another connection.
 *
 * Lifetime: the conn is freed when both its handles (the pipe and the
 * request timer) have closed; jobs in flight hold the session, not the
 * conn, so a close never waits on the device.
 *
 * A large request of a method with a gg_offload (program.define) is not
 * unpacked here: the read buffer holding it goes to a thread of libuv's
 * pool (conn_job), which unpacks and checks it; the connection reads and
 * handles nothing else until its answer is sent from the loop.
 *
 * The pipe is an IPC one, so descriptors a client sends (SCM_RIGHTS, for
 * buffer.register with fd: true) are kept, each with the stream offset
 * where the read that brought it ended: a request takes the oldest one not
 * wholly before it (gg_conn_take_fd); one whose bytes were all handled
 * without a request taking it is closed and the client told (EBADF);
 * conn_fd.c holds that part.  Writing the answers and the queue's limit
 * are in conn_write.c. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/conn.h"
#include "rpc/conn_int.h"

#include "base/log.h"
#include "core/exec.h"
#include "core/session.h"
#include "proto.h"
#include "rpc/dispatch.h"


/* A request worked on by a pool thread (gg_offload): it owns the bytes of
 * the message (the read buffer they were in, taken over) and unpacks them
 * in its own zone there.  It counts as one of the connection's handles, so
 * the connection outlives it, and as a request in flight. */
typedef struct conn_job {
    uv_work_t work;
    gg_conn *c;
    const gg_method *method;
    uint32_t msgid;
    uint8_t *buf;                   /* owned; the message is data[0 .. len) */
    const uint8_t *data;
    size_t len;
    void *state;                    /* the method's (gg_offload.begin) */
    msgpack_zone zone;
    int unpack_rc;                  /* 0, -ENOMEM or -EPROTO: unpacking failed */
    bool decode_failed, msgid_ok;   /* the envelope's shape (proto_msg_decode) */
    int rc;                         /* the method's work */
    char errmsg[512];
} conn_job;

/* A job for method's request msgid, its bytes not yet given; NULL when out
 * of memory. */
static conn_job *conn_job_new(gg_conn *c, const gg_method *method, uint32_t msgid)
{
    conn_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    if (!msgpack_zone_init(&j->zone, CONN_ZONE_CHUNK)) {
        free(j);
        return NULL;
    }
    j->c = c;
    j->method = method;
    j->msgid = msgid;
    return j;
}

static void conn_job_free(conn_job *j)
{
    msgpack_zone_destroy(&j->zone);
    free(j->buf);
    free(j);
}

void gg_rpc_init(gg_rpc *rpc, gg_core *core)
{
    rpc->core = core;
    rpc->conns = NULL;
    rpc->nconns = 0;
    rpc->devinfo_ms = 0;            /* the first hello reads it afresh */
}

static void conn_list_del(gg_conn *c)
{
    gg_rpc *rpc = c->rpc;
    if (c->prev)
        c->prev->next = c->next;
    else
        rpc->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    rpc->nconns--;
}

/* One of the connection's handles (or a job) has ended: the last frees it. */
static void conn_put(gg_conn *c)
{
    gg_core *core = c->rpc->core;
    if (--c->handles > 0)
        return;
    gg_core_lock(core);
    if (c->sess) {
        gg_log_fields f = {.session = c->sess->id};
        GG_LOG(GG_LOG_DEBUG, &f, "connection closed");
        gg_exec_detach_session(core->exec, c->sess);
    }
    conn_list_del(c);
    for (unsigned i = 0; i < c->nfds; i++)
        close(c->fds[i].fd);
    free(c->rbuf);
    msgpack_zone_destroy(&c->zone);
    msgpack_sbuffer_destroy(&c->out);
    msgpack_sbuffer_destroy(&c->reply);
    while (c->wfree) {
        conn_write *w = c->wfree;
        c->wfree = w->next;
        free(w->data);
        free(w);
    }
    size_t peak = c->queued_peak;
    free(c);
#ifdef __GLIBC__
    /* a peer that made us queue a lot: give the freed pages back */
    if (peak > (1u << 20))
        malloc_trim(0);
#endif
    gg_core_maybe_stopped(core);  /* re-check whether the loop can end */
    gg_core_unlock(core);
}

static void conn_on_close(uv_handle_t *h)
{
    conn_put(h->data);
}

void conn_close_now(gg_conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->pipe))
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->pipe, conn_on_close);
    uv_close((uv_handle_t *)&c->req_timer, conn_on_close);
}

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    conn_close_now(req->data);
}

static void conn_on_close_timeout(uv_timer_t *t)
{
    gg_conn *c = t->data;
    gg_log_fields f = {.session = c->sess ? c->sess->id : 0};
    GG_LOG(GG_LOG_INFO, &f, "closing connection: its peer did not take its last answers "
           "(%zu bytes) within %u ms; cut off", c->queued, CONN_CLOSE_TIMEOUT_MS);
    conn_close_now(c);
}

static void conn_drain_stopping(gg_conn *c);

void gg_conn_close(gg_conn *c)
{
    if (c->closing)
        return;
    /* Whole requests already read (a paused connection's, or those after
     * the one that ended the stop) are answered ESHUTDOWN, not dropped. */
    if (c->rpc->core->stopping && !c->in_read)
        conn_drain_stopping(c);
    if (c->closing)
        return;
    c->closing = true;
    uv_read_stop((uv_stream_t *)&c->pipe);
    uv_timer_stop(&c->req_timer);
    c->shutdown_req.data = c;
    /* shutdown waits for queued writes, so the last error reaches the peer;
     * a peer that never reads them is cut off after CONN_CLOSE_TIMEOUT_MS */
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->pipe, conn_on_shutdown) < 0)
        conn_close_now(c);
    else
        uv_timer_start(&c->req_timer, conn_on_close_timeout, CONN_CLOSE_TIMEOUT_MS, 0);
}

void gg_conn_request_done(gg_conn *c)
{
    if (!c)
        return;
    if (c->inflight)
        c->inflight--;
    /* inside the read loop, the loop closes it once the rest is answered */
    if (c->rpc->core->stopping && c->inflight == 0 && !c->in_read)
        gg_conn_close(c);
    /* a place is free: take what the client sent meanwhile (inside the
     * read loop, the loop itself goes on) */
    if (c->full && !c->closing && !c->in_read &&
        c->inflight < c->rpc->core->cfg->max_inflight) {
        c->full = false;
        conn_read_resume(c);
    }
}

void gg_conn_close_error(gg_conn *c, int err, const char *msg)
{
    if (c->closing)
        return;
    conn_buf_reset(&c->out);
    proto_pack_error_notify(&c->out_pk, err, msg);
    gg_conn_send(c, c->out.data, c->out.size);
    conn_buf_reset(&c->out);
    gg_conn_close(c);
}

/* Send an error for a message that cannot be answered by msgid, then close. */
static void conn_fatal(gg_conn *c, int err, const char *msg)
{
    gg_log_fields f = {.session = c->sess ? c->sess->id : 0};
    GG_LOG(GG_LOG_INFO, &f, "closing connection: %s", msg);
    gg_conn_close_error(c, err, msg);
}

static void conn_on_request_timeout(uv_timer_t *t)
{
    gg_conn *c = t->data;
    char msg[200];
    snprintf(msg, sizeof(msg),
             "a request was not complete within %u ms (request-timeout-ms): %zu bytes of it "
             "arrived", c->rpc->core->cfg->request_timeout_ms, c->rlen);
    gg_core_lock(c->rpc->core);
    c->rpc->core->stats.errors++;
    gg_metrics_error(&c->rpc->core->stats.metrics, -ETIMEDOUT);
    conn_fatal(c, -ETIMEDOUT, msg);
    gg_core_unlock(c->rpc->core);
}

/* After a read: time the partial request left in the buffer, if any.
 * started: a message was taken out, so what is left began in this read. */
static void conn_time_request(gg_conn *c, bool started)
{
    unsigned ms = c->rpc->core->cfg->request_timeout_ms;
    if (ms == 0 || c->closing)
        return;
    if (c->rlen == 0)
        uv_timer_stop(&c->req_timer);
    else if (started || !uv_is_active((uv_handle_t *)&c->req_timer))
        uv_timer_start(&c->req_timer, conn_on_request_timeout, ms, 0);
}

static void conn_send_error(gg_conn *c, uint32_t msgid, int err, const char *msg)
{
    conn_buf_reset(&c->out);
    proto_pack_error_response(&c->out_pk, msgid, err, msg);
    gg_conn_send(c, c->out.data, c->out.size);
    conn_buf_reset(&c->out);
}

/* Count a request.  The read loop takes no request while max-inflight are
 * in flight, so there is always a place for it. */
static void conn_admit(gg_conn *c)
{
    c->rpc->core->stats.requests++;
    c->sess->requests++;
}

/* A method's error: counted, logged, packed in place of its result. */
static void conn_method_failed(gg_conn *c, uint32_t msgid, const char *method, size_t mlen,
                               int rc, char *errmsg, size_t errlen)
{
    gg_core *core = c->rpc->core;
    gg_session *s = c->sess;
    core->stats.errors++;
    s->errors++;
    gg_metrics_error(&core->stats.metrics, rc);
    if (!errmsg[0])
        snprintf(errmsg, errlen, "%s", strerror(-rc));
    gg_log_fields f = {.session = s->id};
    GG_LOG(GG_LOG_DEBUG, &f, "%.*s refused: %s: %s", (int)mlen, method, proto_errno_code(rc),
           errmsg);
    c->out.size = 0;
    proto_pack_error_response(&c->out_pk, msgid, rc, errmsg);
}

static bool conn_offload_costly(gg_conn *c, const gg_method *method, uint32_t msgid,
                                const uint8_t *data, size_t len);

/* rq: a replay read straight from its bytes (m has no params then); else
 * data, len: the message's bytes. */
static void conn_handle_request(gg_conn *c, const proto_msg *m, const proto_replay_req *rq,
                                const uint8_t *data, size_t len)
{
    gg_core *core = c->rpc->core;
    gg_session *s = c->sess;
    char errmsg[512] = "";
    conn_admit(c);
    static const gg_method *replay_method;
    if (rq && !replay_method)
        replay_method = gg_dispatch_find("replay", 6);
    const gg_method *method = rq ? replay_method : gg_dispatch_find(m->method, m->method_len);
    if (!method) {
        /* the name is the client's bytes: at most 64 of them, cleaned */
        char name[65];
        proto_utf8_clean(name, sizeof(name), m->method, m->method_len);
        snprintf(errmsg, sizeof(errmsg), "unknown method '%s'", name);
        core->stats.errors++;
        s->errors++;
        gg_metrics_error(&core->stats.metrics, -ENOSYS);
        conn_send_error(c, m->msgid, -ENOSYS, errmsg);
        return;
    }
    if (core->stopping) {
        conn_send_error(c, m->msgid, -ESHUTDOWN, "the daemon is shutting down");
        return;
    }

    /* The head goes in first (a handler packs its result map after it);
     * an async handler's is dropped, at the cost of a few bytes' packing. */
    msgpack_sbuffer *sb = &c->out;
    msgpack_packer *pk = &c->out_pk;
    conn_buf_reset(sb);
    /* (a replay answers later or with an error, never with a head) */
    if (!rq)
        proto_pack_response_head(pk, m->msgid);
    gg_call call = {
        .core = core, .rpc = c->rpc, .sess = s, .msgid = m->msgid, .params = m->params, .pk = pk,
        .err = {errmsg, sizeof(errmsg)}, .send_fd = -1, .rq = rq,
    };
    c->inflight++;
    /* what the client was told is finished, by any transport, is */
    gg_core_settle(core, s);
    /* params' keys first, so a misspelt one never silently means its default
     * (a replay read from its bytes has only known keys) */
    int rc = rq ? 0 : gg_dispatch_check(method, m->params, &call.err);
    /* what the request costs, known before it runs: past the loop's share,
     * off the loop (the request leaves the count of those in flight here,
     * and is counted again there) */
    if (rc == 0 && method->offload && method->offload->cost &&
        method->offload->cost(&call) > CONN_OFFLOAD_UNITS) {
        c->inflight--;
        if (conn_offload_costly(c, method, m->msgid, data, len))
            return;
        c->inflight++;
    }
    if (rc == 0)
        rc = method->fn(&call);
    /* an import or a stream made on this thread may have found the device gone */
    gg_core_check_device(core);
    if (rc == GG_CALL_ASYNC)
        return;
    if (rc < 0)
        conn_method_failed(c, m->msgid, m->method, m->method_len, rc, errmsg, sizeof(errmsg));
    if (call.send_fd >= 0) {
        bool sent = conn_send_fd(c, sb->data, sb->size, call.send_fd);
        close(call.send_fd);
        if (!sent) {
            /* the region is no use to a client that never got it */
            if (c->rpc->fp)
                c->rpc->fp->revoke(c->rpc->fp->ctx, s);
            sb->size = 0;
            proto_pack_error_response(pk, m->msgid, -EAGAIN, "the socket would not take the "
                                      "answer carrying the region; ask again");
        } else {
            conn_buf_reset(sb);
            gg_conn_request_done(c);
            return;
        }
    }
    gg_conn_send(c, sb->data, sb->size);
    conn_buf_reset(sb);
    gg_conn_request_done(c);
}

static void conn_handle_message(gg_conn *c, const uint8_t *data, size_t len)
{
    /* Strings in the objects point into data (rbuf), untouched until the
     * message has been handled; maps and arrays go in the zone, whose first
     * chunk is kept from one message to the next. */
    msgpack_object obj;
    msgpack_zone_clear(&c->zone);
    msgpack_unpack_return r = proto_unpack(data, len, &c->zone, &obj);
    if (r != MSGPACK_UNPACK_SUCCESS) {
        conn_fatal(c, r == MSGPACK_UNPACK_NOMEM_ERROR ? -ENOMEM : -EPROTO,
                   r == MSGPACK_UNPACK_NOMEM_ERROR ? "out of memory unpacking the message"
                                                   : "malformed MessagePack");
        return;
    }
    proto_msg m;
    bool msgid_ok;
    char why[256];
    if (proto_msg_decode(&obj, &m, &msgid_ok, why, sizeof(why)) < 0) {
        c->rpc->core->stats.errors++;
        /* Well framed but the wrong shape: answer and keep the connection. */
        if (msgid_ok) {
            conn_send_error(c, m.msgid, -EPROTO, why);
        } else {
            conn_buf_reset(&c->out);
            proto_pack_error_notify(&c->out_pk, -EPROTO, why);
            gg_conn_send(c, c->out.data, c->out.size);
            conn_buf_reset(&c->out);
        }
    } else if (m.type == GG_MSG_REQUEST) {
        conn_handle_request(c, &m, NULL, data, len);
    } else {
        gg_debug("ignoring a %s from the client", m.type == GG_MSG_RESPONSE ? "response" : "notification");
    }
}

static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    gg_conn *c = h->data;
    if (c->rcap - c->rlen < CONN_READ_CHUNK) {
        size_t ncap = c->rcap ? c->rcap * 2 : CONN_READ_CHUNK * 2;
        while (ncap - c->rlen < CONN_READ_CHUNK)
            ncap *= 2;
        uint8_t *n = realloc(c->rbuf, ncap);
        if (!n) {
            *buf = uv_buf_init(NULL, 0);   /* libuv reports UV_ENOBUFS */
            return;
        }
        c->rbuf = n;
        c->rcap = ncap;
    }
    *buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void conn_on_read_locked(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

static void conn_job_work(uv_work_t *w)
{
    conn_job *j = gg_container_of(w, conn_job, work);
    msgpack_object obj;
    msgpack_unpack_return r = proto_unpack(j->data, j->len, &j->zone, &obj);
    if (r != MSGPACK_UNPACK_SUCCESS) {
        j->unpack_rc = r == MSGPACK_UNPACK_NOMEM_ERROR ? -ENOMEM : -EPROTO;
        return;
    }
    proto_msg m;
    if (proto_msg_decode(&obj, &m, &j->msgid_ok, j->errmsg, sizeof(j->errmsg)) < 0 ||
        m.type != GG_MSG_REQUEST) {
        j->decode_failed = true;
        return;
    }
    proto_errbuf e = {j->errmsg, sizeof(j->errmsg)};
    j->rc = gg_dispatch_check(j->method, m.params, &e);
    if (j->rc == 0)
        j->rc = j->method->offload->work(j->state, m.params, &e);
}

/* Back on the loop: finish the method and answer, then take up what the
 * connection sent meanwhile. */
static void conn_job_done(uv_work_t *w, int status)
{
    conn_job *j = gg_container_of(w, conn_job, work);
    gg_conn *c = j->c;
    gg_core *core = c->rpc->core;
    gg_core_lock(core);
    c->held = false;
    if (status < 0 && !j->unpack_rc && !j->decode_failed)
        j->rc = proto_fail(&(proto_errbuf){j->errmsg, sizeof(j->errmsg)}, -EIO,
                           "the request could not be worked on: %s", uv_strerror(status));
    if (c->closing) {
        j->method->offload->end(NULL, j->state, -ECANCELED);
    } else if (j->unpack_rc) {
        j->method->offload->end(NULL, j->state, j->unpack_rc);
        core->stats.errors++;
        conn_fatal(c, j->unpack_rc, j->unpack_rc == -ENOMEM ? "out of memory unpacking the message"
                                                             : "malformed MessagePack");
    } else if (j->decode_failed) {
        /* the shape proto_msg_peek saw, but not a request proto_msg_decode takes */
        j->method->offload->end(NULL, j->state, -EPROTO);
        core->stats.errors++;
        conn_buf_reset(&c->out);
        if (j->msgid_ok)
            proto_pack_error_response(&c->out_pk, j->msgid, -EPROTO, j->errmsg);
        else
            proto_pack_error_notify(&c->out_pk, -EPROTO, j->errmsg);
        gg_conn_send(c, c->out.data, c->out.size);
        conn_buf_reset(&c->out);
    } else {
        conn_buf_reset(&c->out);
        proto_pack_response_head(&c->out_pk, j->msgid);
        gg_call call = {
            .core = core, .rpc = c->rpc, .sess = c->sess, .msgid = j->msgid, .pk = &c->out_pk,
            .err = {j->errmsg, sizeof(j->errmsg)}, .send_fd = -1,
        };
        int rc = j->method->offload->end(&call, j->state, j->rc);
        if (rc < 0)
            conn_method_failed(c, j->msgid, j->method->name, j->method->len, rc, j->errmsg,
                               sizeof(j->errmsg));
        gg_conn_send(c, c->out.data, c->out.size);
        conn_buf_reset(&c->out);
    }
    conn_job_free(j);
    gg_conn_request_done(c);
    if (!c->closing)
        conn_read_resume(c);   /* what came meanwhile */
    gg_core_unlock(core);
    conn_put(c);
}

/* The request in j (counted, its bytes j's own) goes to a pool thread; the
 * connection handles nothing else until it is answered.  Refused at begin
 * (or by a stop): answered here. */
static void conn_job_start(gg_conn *c, conn_job *j)
{
    gg_core *core = c->rpc->core;
    char errmsg[512] = "";
    gg_call call = {
        .core = core, .rpc = c->rpc, .sess = c->sess, .msgid = j->msgid, .pk = &c->out_pk,
        .err = {errmsg, sizeof(errmsg)}, .send_fd = -1,
    };
    int rc;
    if (core->stopping) {
        conn_send_error(c, j->msgid, -ESHUTDOWN, "the daemon is shutting down");
        conn_job_free(j);
        return;
    }
    if ((rc = j->method->offload->begin(&call, &j->state)) < 0) {
        conn_method_failed(c, j->msgid, j->method->name, j->method->len, rc, errmsg,
                           sizeof(errmsg));
        gg_conn_send(c, c->out.data, c->out.size);
        conn_buf_reset(&c->out);
        conn_job_free(j);
        return;
    }
    c->inflight++;
    c->handles++;
    c->held = true;
    uv_read_stop((uv_stream_t *)&c->pipe);
    uv_timer_stop(&c->req_timer);
    if ((rc = uv_queue_work(core->loop, &j->work, conn_job_work, conn_job_done)) < 0) {
        /* libuv refuses only a NULL work callback: a broken build, not
         * anything a client can cause; and the core lock held here rules
         * out finishing the job inline */
        gg_error("uv_queue_work: %s", uv_strerror(rc));
        abort();
    }
}

/* The whole message at rbuf[off .. off + len): a large request of a method
 * with a gg_offload goes to a pool thread, taking the read buffer with it
 * (what follows the message is copied to a new one), before anything of it
 * is unpacked here.  false: not such a request, or no memory to set it up;
 * the caller handles it on the loop. */
static bool conn_offload(gg_conn *c, size_t off, size_t len)
{
    uint32_t msgid;
    const char *name;
    size_t nlen;
    if (len < CONN_OFFLOAD_BYTES || !proto_msg_peek(c->rbuf + off, len, &msgid, &name, &nlen))
        return false;
    const gg_method *method = gg_dispatch_find(name, nlen);
    if (!method || !method->offload)
        return false;
    size_t rest = c->rlen - off - len;
    size_t ncap = CONN_READ_CHUNK * 2;
    while (ncap < rest + CONN_READ_CHUNK)
        ncap *= 2;
    conn_job *j = conn_job_new(c, method, msgid);
    uint8_t *nbuf = j ? malloc(ncap) : NULL;
    if (!nbuf) {
        if (j)
            conn_job_free(j);
        return false;
    }
    /* the message is consumed from here on, whatever its answer */
    memcpy(nbuf, c->rbuf + off + len, rest);
    j->buf = c->rbuf;
    j->data = c->rbuf + off;
    j->len = len;
    c->rbuf = nbuf;
    c->rcap = ncap;
    c->rlen = rest;
    conn_admit(c);
    conn_job_start(c, j);
    return true;
}

/* A request small in bytes whose work the method finds past
 * CONN_OFFLOAD_UNITS (a define whose calls copy in large programs): a copy
 * of its bytes goes to a pool thread, which unpacks and works on it as a
 * large one.  false: no memory for it; the caller handles it on the loop. */
static bool conn_offload_costly(gg_conn *c, const gg_method *method, uint32_t msgid,
                                const uint8_t *data, size_t len)
{
    conn_job *j = conn_job_new(c, method, msgid);
    uint8_t *buf = j ? malloc(len) : NULL;
    if (!buf) {
        if (j)
            conn_job_free(j);
        return false;
    }
    memcpy(buf, data, len);
    j->buf = buf;
    j->data = buf;
    j->len = len;
    conn_job_start(c, j);
    return true;
}

static void conn_on_yield_end(uv_timer_t *t)
{
    gg_conn *c = t->data;
    gg_core *core = c->rpc->core;
    gg_core_lock(core);
    c->yielded = false;
    if (!c->closing)
        conn_read_resume(c);
    gg_core_unlock(core);
}

/* The connection's slice of the loop is spent: the loop polls, everyone
 * else's events are handled, and at its next turn (a timer of 0 ms, which
 * also keeps the poll from sleeping) this one goes on where it stopped. */
static void conn_yield(gg_conn *c)
{
    c->yielded = true;
    uv_read_stop((uv_stream_t *)&c->pipe);
    uv_timer_start(&c->req_timer, conn_on_yield_end, 0, 0);
}

/* fixarray, array 16, array 32 */
static bool conn_starts_array(uint8_t b)
{
    return (b >= 0x90 && b <= 0x9f) || b == 0xdc || b == 0xdd;
}

static void conn_on_read_locked(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    gg_conn *c = st->data;
    if (n < 0) {
        if (n != UV_EOF)
            gg_debug("read failed: %s", uv_strerror((int)n));
        /* The peer has gone or half-closed: answers in flight have nowhere to
         * go, so close now rather than wait for them. */
        conn_close_now(c);
        return;
    }
    c->rlen += (size_t)n;
    c->rx += (size_t)n;
    if (n > 0)
        conn_collect_fds(c);
    size_t off = 0;
    bool was_in_read = c->in_read;
    c->in_read = true;
    uint64_t t0 = uv_hrtime();
    bool handled = false;
    /* paused: the rest stays in rbuf until the peer reads (conn_on_write);
     * a stop answers it all (ESHUTDOWN) */
    unsigned max_inflight = c->rpc->core->cfg->max_inflight;
    /* a stop answers what was read even when the slice was spent */
    while (!c->closing && !c->held && (!c->yielded || c->rpc->core->stopping) &&
           off < c->rlen &&
           ((!c->paused && c->inflight < max_inflight) || c->rpc->core->stopping)) {
        if (handled && !c->rpc->core->stopping && uv_hrtime() - t0 > CONN_SLICE_NS) {
            conn_yield(c);
            break;
        }
        handled = true;
        /* The common request, a plain replay, is read from its bytes with
         * no unpacking; the general path below takes everything else, and
         * a replay whose bytes have not all come (its scan is then under
         * way in c->frame). */
        if (c->frame.pos == 0) {
            proto_replay_req rq;
            long r = proto_replay_req_scan(c->rbuf + off, c->rlen - off, &rq);
            if (r > 0 && (size_t)r <= c->frame.max_msg && gg_replay_req_plain(&rq)) {
                proto_msg m = {.type = GG_MSG_REQUEST, .msgid = rq.msgid, .method = "replay",
                               .method_len = 6};
                c->req_start = c->rx - c->rlen + off;
                conn_handle_request(c, &m, &rq, NULL, 0);
                off += (size_t)r;
                continue;
            }
        }
        /* A message is an array: text (an HTTP request, a typed line) would
         * otherwise read as one positive fixint per byte, each a message of
         * the wrong shape */
        if (c->frame.pos == 0 && !conn_starts_array(c->rbuf[off])) {
            uint8_t b = c->rbuf[off];
            char msg[200];
            snprintf(msg, sizeof(msg), "the byte stream is not MessagePack-RPC: a message is an "
                     "array, this one starts with byte 0x%02x%s", b,
                     b >= 0x20 && b < 0x7f ? " (text: is this an HTTP request or a line typed "
                                             "at the socket?)" : "");
            c->rpc->core->stats.errors++;
            gg_metrics_error(&c->rpc->core->stats.metrics, -EPROTO);
            conn_fatal(c, -EPROTO, msg);
            return;
        }
        long r = proto_frame_scan(&c->frame, c->rbuf + off, c->rlen - off);
        if (r == 0)
            break;
        if (r < 0) {
            char msg[160];
            if (r == -EMSGSIZE)
                snprintf(msg, sizeof(msg),
                         "message larger than the limit of %zu bytes (max-message-size)",
                         c->frame.max_msg);
            else
                snprintf(msg, sizeof(msg), "the byte stream is not MessagePack-RPC");
            c->rpc->core->stats.errors++;
            conn_fatal(c, (int)r, msg);
            return;
        }
        proto_frame_reset(&c->frame);
        if (conn_offload(c, off, (size_t)r)) {
            off = 0;                /* the read buffer is a new one, holding what followed */
            break;
        }
        c->req_start = c->rx - c->rlen + off;
        conn_handle_message(c, c->rbuf + off, (size_t)r);
        off += (size_t)r;
    }
    c->in_read = was_in_read;
    if (c->closing)
        return;
    if (off) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    if (c->nfds)
        conn_drop_fds_before(c, c->rx - c->rlen);
    if (c->rpc->core->stopping && !c->in_read) {
        if (c->inflight == 0 && !(c->sess && gg_session_busy(c->sess)))
            gg_conn_close(c);
        return;
    }
    if (c->inflight >= max_inflight && !c->rpc->core->stopping && !c->full) {
        /* backpressure: the client waits for an answer, not for an error */
        c->full = true;
        uv_read_stop((uv_stream_t *)&c->pipe);
        uv_timer_stop(&c->req_timer);   /* a partial request waits for us, not the peer */
        if (!c->full_logged) {
            c->full_logged = true;
            gg_log_fields f = {.session = c->sess ? c->sess->id : 0};
            GG_LOG(GG_LOG_INFO, &f, "client pid %d has %u requests in flight (max-inflight): "
                   "its connection is not read until one is answered (logged once per "
                   "connection)", c->sess ? (int)c->sess->pid : -1, c->inflight);
        }
    }
    if (!c->paused && !c->held && !c->full && !c->yielded)
        conn_time_request(c, off > 0);
    /* Keep an idle connection's buffer small. */
    if (c->rlen == 0 && c->rcap > 4 * CONN_READ_CHUNK) {
        free(c->rbuf);
        c->rbuf = NULL;
        c->rcap = 0;
    }
}

/* Everything a request does touches core state: under the core lock, which
 * the fast path's threads take too. */
static void conn_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    gg_conn *c = st->data;
    gg_core *core = c->rpc->core;
    gg_core_lock(core);
    conn_on_read_locked(st, n, buf);
    gg_core_unlock(core);
}

void conn_read_resume(gg_conn *c)
{
    conn_on_read_locked((uv_stream_t *)&c->pipe, 0, NULL);
    if (!c->closing && !c->paused && !c->held && !c->full && !c->yielded &&
        !c->rpc->core->stopping &&
        uv_read_start((uv_stream_t *)&c->pipe, conn_alloc, conn_on_read) < 0)
        conn_close_now(c);
}

/* A stop has begun: answer each whole request rbuf holds (ESHUTDOWN, by
 * conn_handle_request), dropping only a partial one. */
static void conn_drain_stopping(gg_conn *c)
{
    if (c->rlen == 0 || c->closing || uv_is_closing((uv_handle_t *)&c->pipe))
        return;
    bool was = c->in_read;
    c->in_read = true;
    conn_on_read_locked((uv_stream_t *)&c->pipe, 0, NULL);
    c->in_read = was;
}

/* Connections of uid, the new one included: those being closed count too
 * (a peer that never reads keeps one in shutdown until
 * CONN_CLOSE_TIMEOUT_MS cuts it off); those refused at accept do not. */
static unsigned conn_count_uid(gg_rpc *rpc, uid_t uid)
{
    unsigned n = 0;
    for (gg_conn *c = rpc->conns; c; c = c->next)
        n += !c->refused && c->sess && c->sess->uid == uid;
    return n;
}

int gg_conn_accept(gg_rpc *rpc, uv_stream_t *listener)
{
    gg_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    gg_core *core = rpc->core;
    c->rpc = rpc;
    proto_frame_init(&c->frame, core->cfg->max_message);
    if (!msgpack_zone_init(&c->zone, CONN_ZONE_CHUNK)) {
        free(c);
        return -ENOMEM;
    }
    msgpack_sbuffer_init(&c->out);
    msgpack_sbuffer_init(&c->reply);
    msgpack_packer_init(&c->out_pk, &c->out, msgpack_sbuffer_write);
    msgpack_packer_init(&c->reply_pk, &c->reply, msgpack_sbuffer_write);
    /* an IPC pipe: libuv reads with recvmsg and keeps the descriptors a
     * client sends (buffer.register by fd) for us to take */
    int rc = uv_pipe_init(core->loop, &c->pipe, 1);
    if (rc < 0) {
        msgpack_zone_destroy(&c->zone);
        free(c);
        return rc;
    }
    c->pipe.data = c;
    uv_timer_init(core->loop, &c->req_timer);   /* cannot fail */
    c->req_timer.data = c;
    c->handles = 2;
    c->next = rpc->conns;
    if (rpc->conns)
        rpc->conns->prev = c;
    rpc->conns = c;
    rpc->nconns++;
    rc = uv_accept(listener, (uv_stream_t *)&c->pipe);
    if (rc < 0) {
        conn_close_now(c);
        return rc;
    }
    struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t len = sizeof(cred);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0)
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
    c->sess = gg_session_new(core, c, cred.pid, cred.uid, cred.gid);
    if (!c->sess) {
        conn_close_now(c);
        return -ENOMEM;
    }
    if (rpc->nconns > core->cfg->max_connections) {
        c->refused = true;
        conn_fatal(c, -EBUSY, "too many connections (max-connections); try again later");
        return 0;
    }
    unsigned same = conn_count_uid(rpc, cred.uid);
    if (core->cfg->max_conn_per_uid && same > core->cfg->max_conn_per_uid) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "too many connections from uid %d: %u open, the limit is %u "
                 "(max-connections-per-uid); close some and try again",
                 (int)cred.uid, same - 1, core->cfg->max_conn_per_uid);
        c->refused = true;
        conn_fatal(c, -EBUSY, msg);
        return 0;
    }
    gg_log_fields f = {.session = c->sess->id};
    GG_LOG(GG_LOG_DEBUG, &f, "client connected: pid %d uid %d", (int)cred.pid, (int)cred.uid);
    rc = uv_read_start((uv_stream_t *)&c->pipe, conn_alloc, conn_on_read);
    if (rc < 0)
        conn_close_now(c);
    return 0;
}

void gg_conn_stop_all(gg_rpc *rpc)
{
    for (gg_conn *c = rpc->conns, *n; c; c = n) {
        n = c->next;
        if (c->closing)
            continue;
        bool busy = c->sess && gg_session_busy(c->sess);
        if (c->inflight == 0 && !busy)
            gg_conn_close(c);
        else {
            /* stop reading; the last reply closes it (gg_conn_request_done).
             * A partial request will not be read now: no timeout for it. */
            uv_read_stop((uv_stream_t *)&c->pipe);
            uv_timer_stop(&c->req_timer);
        }
    }
}

void gg_conn_force_close_all(gg_rpc *rpc)
{
    for (gg_conn *c = rpc->conns; c; c = c->next)
        conn_close_now(c);
}

gg_session *gg_conn_session(gg_conn *c)
{
    return c->sess;
}

gg_conn *gg_conn_next(gg_conn *c)
{
    return c->next;
}

bool gg_conn_closing(const gg_conn *c)
{
    return c->closing;
}

bool gg_conn_writes_idle(gg_conn *c)
{
    return c && !c->closing && uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0;
}
