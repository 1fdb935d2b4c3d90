/* SPDX-License-Identifier: MIT */
/* Answers leaving a connection.
 *
 * Happy path: an answer is packed into the connection's buffer and written
 * with uv_try_write straight from it; only what the socket does not take
 * at once is copied into a write request from the connection's small pool
 * and queued with uv_write, in order behind what is already queued.  Once
 * warm, an answer allocates nothing.
 *
 * Failure modes: a write that fails closes the connection at once.  Past
 * max-queued-bytes of queued answers (counted as the memory they hold)
 * reading stops until the peer has taken half of them back (logged once a
 * connection); a libuv write queue past CONN_MAX_WRITE_QUEUE bytes closes
 * the connection, and no memory for a write request does too. */
#include <stdlib.h>
#include <string.h>

#include "rpc/conn.h"
#include "rpc/conn_int.h"

#include "base/log.h"
#include "core/session.h"

static size_t conn_write_cost(const conn_write *w)
{
    return sizeof(*w) + w->cap + 2 * CONN_MALLOC_OVERHEAD;
}

/* A write request from the pool, with room for len bytes; NULL when out
 * of memory. */
static conn_write *conn_write_get(gg_conn *c, size_t len)
{
    conn_write *w = c->wfree;
    if (w) {
        c->wfree = w->next;
        c->nwfree--;
    } else if (!(w = calloc(1, sizeof(*w)))) {
        return NULL;
    }
    if (w->cap < len) {
        free(w->data);
        w->cap = 0;
        if (!(w->data = malloc(len))) {
            free(w);
            return NULL;
        }
        w->cap = len;
    }
    return w;
}

static void conn_write_put(gg_conn *c, conn_write *w)
{
    if (c->nwfree >= CONN_WRITE_POOL || w->cap > CONN_KEEP_BYTES) {
        free(w->data);
        free(w);
        return;
    }
    w->next = c->wfree;
    c->wfree = w;
    c->nwfree++;
}

/* Empty a response buffer for the next answer, freeing it when an answer
 * made it large. */
void conn_buf_reset(msgpack_sbuffer *sb)
{
    if (sb->alloc > CONN_KEEP_BYTES) {
        msgpack_sbuffer_destroy(sb);
        msgpack_sbuffer_init(sb);
    }
    sb->size = 0;
}

static void conn_on_write(uv_write_t *req, int status)
{
    conn_write *w = gg_container_of(req, conn_write, req);
    gg_conn *c = req->handle->data;
    size_t cost = conn_write_cost(w);
    c->queued = c->queued > cost ? c->queued - cost : 0;
    conn_write_put(c, w);
    if (status < 0 && status != UV_ECANCELED && !c->closing) {
        gg_debug("write failed: %s", uv_strerror(status));
        conn_close_now(c);
        return;
    }
    /* Drained to half the limit: take the requests already read, then read
     * again (hysteresis, so a reader at the margin is not toggled per answer). */
    if (c->paused && !c->closing && c->queued <= c->rpc->core->cfg->max_queued_bytes / 2) {
        c->paused = false;
        gg_log_fields f = {.session = c->sess ? c->sess->id : 0};
        GG_LOG(GG_LOG_DEBUG, &f, "queued answers drained (%zu bytes); reading again", c->queued);
        gg_core_lock(c->rpc->core);
        conn_read_resume(c);
        gg_core_unlock(c->rpc->core);
    }
}

/* Past max-queued-bytes: stop reading until the peer takes its answers. */
static void conn_check_queue(gg_conn *c)
{
    size_t max = c->rpc->core->cfg->max_queued_bytes;
    if (c->paused || c->closing || c->queued <= max)
        return;
    c->paused = true;
    uv_read_stop((uv_stream_t *)&c->pipe);
    uv_timer_stop(&c->req_timer);   /* a partial request waits for us, not the peer */
    if (!c->pause_logged) {
        c->pause_logged = true;
        gg_log_fields f = {.session = c->sess ? c->sess->id : 0};
        GG_LOG(GG_LOG_WARN, &f, "client pid %d is not reading its responses: %zu bytes of "
               "answers queued, over the limit of %zu (max-queued-bytes); its requests wait "
               "until it reads (logged once per connection)",
               c->sess ? (int)c->sess->pid : -1, c->queued, max);
    }
}

bool gg_conn_send(gg_conn *c, const char *data, size_t len)
{
    if (!c || c->closing || uv_is_closing((uv_handle_t *)&c->pipe))
        return false;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > CONN_MAX_WRITE_QUEUE) {
        gg_log_fields f = {.session = c->sess ? c->sess->id : 0};
        GG_LOG(GG_LOG_WARN, &f, "client pid %d is not reading its responses; closing its "
               "connection", c->sess ? (int)c->sess->pid : -1);
        conn_close_now(c);
        return false;
    }
    /* Straight to the socket when nothing is queued before it (libuv
     * refuses with EAGAIN otherwise, which keeps answers in order); the
     * common answer leaves in this one call, from the caller's buffer. */
    uv_buf_t buf = uv_buf_init((char *)data, (unsigned)len);
    int n = uv_try_write((uv_stream_t *)&c->pipe, &buf, 1);
    if (n >= 0 && (size_t)n == len)
        return true;
    if (n < 0 && n != UV_EAGAIN) {
        gg_debug("write failed: %s", uv_strerror(n));
        conn_close_now(c);
        return false;
    }
    size_t off = n > 0 ? (size_t)n : 0;
    conn_write *w = conn_write_get(c, len - off);
    if (!w) {
        conn_close_now(c);
        return false;
    }
    memcpy(w->data, data + off, len - off);
    buf = uv_buf_init(w->data, (unsigned)(len - off));
    int rc = uv_write(&w->req, (uv_stream_t *)&c->pipe, &buf, 1, conn_on_write);
    if (rc < 0) {
        conn_write_put(c, w);
        conn_close_now(c);
        return false;
    }
    c->queued += conn_write_cost(w);
    if (c->queued > c->queued_peak)
        c->queued_peak = c->queued;
    conn_check_queue(c);
    return true;
}

msgpack_packer *gg_conn_reply_begin(gg_conn *c)
{
    conn_buf_reset(&c->reply);
    return &c->reply_pk;
}

msgpack_sbuffer *gg_conn_reply_sbuffer(gg_conn *c)
{
    return &c->reply;
}

void gg_conn_reply_end(gg_conn *c)
{
    gg_conn_send(c, c->reply.data, c->reply.size);
    conn_buf_reset(&c->reply);
    gg_conn_request_done(c);
}
