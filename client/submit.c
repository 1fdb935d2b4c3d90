/* SPDX-License-Identifier: MIT */
/* Replays: gg_client_replay(_ex) and the asynchronous gg_client_submit /
 * gg_client_wait / gg_client_poll, on the fast path (fastpath.c) when it is
 * active, else over the socket.
 *
 * Happy path (socket): a replay packs its request into the client's reusable
 * sbuffer, sends it and reads until its answer; a submit only sends and
 * records the msgid under a ticket, and the answer is read by the wait, or by
 * whichever call meets it first on the stream (io.c hands it to
 * client_sticket_offer, which keeps it parsed in the ticket's entry).  Tickets
 * may be waited for in any order.  No allocation per replay once the buffers
 * are warm: the ticket table is allocated once per client.
 *
 * Failure modes: more outstanding socket tickets than the daemon's
 * max_inflight allows (less one, left for a synchronous call) is -EBUSY;
 * a wait that times out forgets its ticket (the late answer is dropped, as
 * for any call); connection loss forgets every ticket (later waits:
 * -ENOTCONN). */
#include "priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUBMIT_MAX_SOCKET_TICKETS 256
#define SUBMIT_DEFAULT_INFLIGHT 64

/* ---- the replay result ---------------------------------------------------- */

static int submit_obj_int(const msgpack_object *map, const char *key)
{
    int64_t v;
    const msgpack_object *o = proto_map_get(map, key);
    if (!o || !proto_obj_i64(o, &v) || v < INT32_MIN || v > INT32_MAX)
        return 0;
    return (int)v;
}

static bool submit_obj_bool(const msgpack_object *map, const char *key)
{
    const msgpack_object *o = proto_map_get(map, key);
    return o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
}

int client_replay_parse(const msgpack_object *r, gg_replay_result *res)
{
    gg_replay_result tmp;
    if (!res)
        res = &tmp;   /* still checked: a bad answer is an error either way */
    memset(res, 0, sizeof *res);
    const msgpack_object *path = proto_map_get(r, "path");
    if (path && proto_str_eq(path, "graph"))
        res->path = GG_PATH_GRAPH;
    else if (path && proto_str_eq(path, "eager"))
        res->path = GG_PATH_EAGER;
    else
        return -EPROTO;
    res->bucket = submit_obj_int(r, "bucket");
    res->batch = submit_obj_int(r, "batch");
    res->branch = submit_obj_int(r, "branch");
    res->fallback = submit_obj_bool(r, "fallback");
    res->captured = submit_obj_bool(r, "captured");
    double us = 0;
    const msgpack_object *o = proto_map_get(r, "device_us");
    if (o && proto_obj_f64(o, &us))
        res->device_us = us;
    client_copy_str(proto_map_get(r, "reason"), res->reason, sizeof res->reason);
    return 0;
}

/* client_replay_parse's reading of an answer proto_replay_ans_scan took. */
static void submit_ans_result(const proto_replay_ans *a, gg_replay_result *res)
{
    if (!res)
        return;
    memset(res, 0, sizeof *res);
    res->path = a->graph ? GG_PATH_GRAPH : GG_PATH_EAGER;
    if (a->has_bucket && a->bucket >= INT32_MIN && a->bucket <= INT32_MAX)
        res->bucket = (int)a->bucket;
    if (a->has_batch && a->batch >= INT32_MIN && a->batch <= INT32_MAX)
        res->batch = (int)a->batch;
    if (a->has_branch && a->branch >= INT32_MIN && a->branch <= INT32_MAX)
        res->branch = (int)a->branch;
    res->fallback = a->fallback;
    res->captured = a->captured;
    if (a->has_device_us)
        res->device_us = a->device_us;
}

#define SUBMIT_BAD_PATH "gfxgraphd answered replay with a path that is not \"graph\" or \"eager\""

/* ---- socket tickets --------------------------------------------------------- */

void client_sticket_reset(gg_client *c)
{
    if (c->st)
        memset(c->st, 0, (size_t)c->st_cap * sizeof c->st[0]);
}

void client_sticket_offer(gg_client *c, const proto_msg *m)
{
    for (int i = 0; i < c->st_cap; i++) {
        client_sticket *e = &c->st[i];
        if (!e->ticket || e->done || e->msgid != m->msgid)
            continue;
        e->done = true;
        e->code[0] = e->msg[0] = '\0';
        if (m->error) {
            const msgpack_object *code = proto_map_get(m->error, "code");
            const msgpack_object *msg = proto_map_get(m->error, "message");
            if (!code || code->type != MSGPACK_OBJECT_STR) {
                e->rc = -EIO;
                snprintf(e->code, sizeof e->code, "EIO");
                snprintf(e->msg, sizeof e->msg,
                         "gfxgraphd answered 'replay' with an error without a code");
            } else {
                client_copy_str(code, e->code, sizeof e->code);
                client_copy_str(msg, e->msg, sizeof e->msg);
                e->rc = proto_errno_from_code(code->via.str.ptr, code->via.str.size);
                if (!e->msg[0])
                    snprintf(e->msg, sizeof e->msg, "gfxgraphd refused 'replay' (%s)", e->code);
            }
        } else if (!m->result || m->result->type != MSGPACK_OBJECT_MAP) {
            e->rc = -EPROTO;
            snprintf(e->code, sizeof e->code, "EPROTO");
            snprintf(e->msg, sizeof e->msg,
                     "gfxgraphd answered 'replay' with a result that is not a map");
        } else if ((e->rc = client_replay_parse(m->result, &e->res)) < 0) {
            snprintf(e->code, sizeof e->code, "EPROTO");
            snprintf(e->msg, sizeof e->msg, "%s", SUBMIT_BAD_PATH);
        }
        return;
    }
    /* no ticket waits for it: the late answer to a call that timed out */
}

/* How many socket tickets may be outstanding: one less than the daemon's
 * in-flight limit, so a synchronous call still fits beside them (one more
 * would make the daemon close the connection). */
static int submit_socket_cap(const gg_client *c)
{
    long n = c->max_inflight ? (long)c->max_inflight - 1 : SUBMIT_DEFAULT_INFLIGHT - 1;
    if (n < 1)
        n = 1;
    return n > SUBMIT_MAX_SOCKET_TICKETS ? SUBMIT_MAX_SOCKET_TICKETS : (int)n;
}

static uint32_t submit_pack_slow(gg_client *c, uint64_t program, int batch, int branch,
                                 const gg_replay_opts *opts);


/* The replay request at most: head 13 bytes, params 2, six keys and values
 * 85. */
#define SUBMIT_REQ_MAX 128

/* Pack [0, msgid, "replay", [{...}]] into c->sb (no allocation once warm):
 * the bytes the packer calls of submit_pack_slow give, written directly. */
static uint32_t submit_pack(gg_client *c, uint64_t program, int batch, int branch,
                            const gg_replay_opts *opts)
{
    uint32_t msgid;
    uint8_t *p0 = client_req_raw(c, SUBMIT_REQ_MAX, &msgid);
    if (!p0) {
        /* out of memory: the packer's way, which fails the same way as before */
        c->next_msgid = msgid;
        return submit_pack_slow(c, program, batch, branch, opts);
    }
    uint8_t *p = p0;
    *p++ = 0x94;
    *p++ = GG_MSG_REQUEST;
    p = proto_w_uint(p, msgid);
    p = PROTO_W_KEY(p, "replay");
    *p++ = 0x91;
    *p++ = (uint8_t)(0x80 | (2 + (branch >= 0) + !!opts->wait_event + !!opts->signal_event +
                            !!opts->async));
    p = PROTO_W_KEY(p, "program");
    p = proto_w_uint(p, program);
    p = PROTO_W_KEY(p, "batch");
    p = proto_w_int(p, batch);
    if (branch >= 0) {
        p = PROTO_W_KEY(p, "branch");
        p = proto_w_int(p, branch);
    }
    if (opts->wait_event) {
        p = PROTO_W_KEY(p, "wait_event");
        p = proto_w_uint(p, opts->wait_event);
    }
    if (opts->signal_event) {
        p = PROTO_W_KEY(p, "signal_event");
        p = proto_w_uint(p, opts->signal_event);
    }
    if (opts->async) {
        p = PROTO_W_KEY(p, "async");
        p = proto_w_bool(p, true);
    }
    c->sb.size += (size_t)(p - p0);
    return msgid;
}

static uint32_t submit_pack_slow(gg_client *c, uint64_t program, int batch, int branch,
                                 const gg_replay_opts *opts)
{
    msgpack_packer pk;
    uint32_t msgid = client_req_begin(c, &pk, "replay");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_map(&pk, 2 + (branch >= 0) + !!opts->wait_event + !!opts->signal_event +
                              !!opts->async);
    proto_pack_kv_u64(&pk, "program", program);
    proto_pack_kv_i64(&pk, "batch", batch);
    if (branch >= 0)
        proto_pack_kv_i64(&pk, "branch", branch);
    if (opts->wait_event)
        proto_pack_kv_u64(&pk, "wait_event", opts->wait_event);
    if (opts->signal_event)
        proto_pack_kv_u64(&pk, "signal_event", opts->signal_event);
    if (opts->async)
        proto_pack_kv_bool(&pk, "async", true);
    return msgid;
}

static int submit_sock_result(gg_client *c, const msgpack_object *r, gg_replay_result *res)
{
    if (client_replay_parse(r, res) < 0)
        return client_fail(c, -EPROTO, SUBMIT_BAD_PATH);
    return 0;
}

/* A synchronous replay over the socket: no ticket needed. */
static int submit_sock_replay(gg_client *c, uint64_t program, int batch, int branch,
                              const gg_replay_opts *opts, gg_replay_result *res)
{
    int64_t deadline = client_deadline(c);
    uint32_t msgid = submit_pack(c, program, batch, branch, opts);
    int rc = client_req_send(c, "replay", deadline);
    if (rc < 0)
        return rc;
    /* The answer in its plain form is read from its bytes; any other
     * message first (a notification, a ticket's answer) or another form
     * goes the general way, as does an answer still arriving when the
     * general scan has begun on it (c->frame). */
    while (c->frame.pos == 0) {
        proto_replay_ans a;
        long n = c->rlen ? proto_replay_ans_scan(c->rbuf, c->rlen, &a) : 0;
        if (n > 0 && a.msgid == msgid) {
            c->msg_len = (size_t)n;
            submit_ans_result(&a, res);
            return 0;
        }
        if (n != 0)
            break;
        if ((rc = client_read_some(c, "replay", deadline)) < 0)
            return rc;
    }
    const msgpack_object *r;
    rc = client_req_await(c, msgid, "replay", deadline, &r);
    return rc < 0 ? rc : submit_sock_result(c, r, res);
}

static int submit_sock(gg_client *c, uint64_t program, int batch, int branch,
                       const gg_replay_opts *opts, uint64_t *ticket)
{
    int cap = submit_socket_cap(c);
    if (cap > c->st_cap) {
        /* once per client (or when a daemon allows more): not per call */
        client_sticket *st = realloc(c->st, (size_t)cap * sizeof *st);
        if (!st)
            return client_fail(c, -ENOMEM, "out of memory for the submission table");
        memset(st + c->st_cap, 0, (size_t)(cap - c->st_cap) * sizeof *st);
        c->st = st;
        c->st_cap = cap;
    }
    client_sticket *e = NULL;
    int used = 0;
    for (int i = 0; i < c->st_cap; i++) {
        if (c->st[i].ticket)
            used++;
        else if (!e)
            e = &c->st[i];
    }
    if (!e || used >= cap)
        return client_fail(c, -EBUSY, "%d submissions are outstanding, as many as gfxgraphd's "
                           "in-flight limit allows over the socket: wait for one first", used);
    uint32_t msgid = submit_pack(c, program, batch, branch, opts);
    int rc = client_req_send(c, "replay", client_deadline(c));
    if (rc < 0)
        return rc;
    memset(e, 0, sizeof *e);
    e->msgid = msgid;
    c->st_next = (c->st_next + 1) & CLIENT_TICKET_NUM_MASK;
    if (!c->st_next)
        c->st_next = 1;
    e->ticket = client_ticket_make(c, false, c->st_next);
    *ticket = e->ticket;
    return 0;
}

static client_sticket *submit_sock_find(gg_client *c, uint64_t ticket)
{
    for (int i = 0; i < c->st_cap; i++)
        if (c->st[i].ticket == ticket)
            return &c->st[i];
    return NULL;
}

static int submit_sock_wait(gg_client *c, uint64_t ticket, gg_replay_result *res)
{
    client_sticket *e = submit_sock_find(c, ticket);
    if (!e)
        return client_fail(c, -ENOENT, "ticket %#llx is not outstanding (already waited for, "
                           "timed out, or from another connection)",
                           (unsigned long long)ticket);
    if (e->done) {
        int rc = e->rc;
        if (rc < 0)
            client_set_error(c, e->code, strlen(e->code), e->msg, strlen(e->msg));
        else if (res)
            *res = e->res;
        e->ticket = 0;
        return rc;
    }
    const msgpack_object *r;
    uint32_t msgid = e->msgid;
    /* forgotten whatever happens: on a timeout its late answer is dropped,
     * on connection loss the table is cleared anyway */
    e->ticket = 0;
    int rc = client_req_await(c, msgid, "replay", client_deadline(c), &r);
    return rc < 0 ? rc : submit_sock_result(c, r, res);
}

/* ---- the public calls ------------------------------------------------------------ */

/* opts NULL: no events, not async, not timed: a cache hit on the fast path
 * is then completed by the device itself, the quickest way back (device_us
 * is 0 for such a hit on a GPU; the cpu backend always measures it). */
static const gg_replay_opts submit_default_opts = {.timed = false};

static int submit_check(gg_client *c, int batch, const char *what)
{
    if (batch < 1)
        return client_fail_locked(c, -EINVAL, "%s: batch is %d; it must be >= 1", what, batch);
    return 0;
}

int gg_client_replay_ex(gg_client *c, uint64_t program, int batch, int branch,
                        const gg_replay_opts *opts, gg_replay_result *res)
{
    if (!c)
        return -EINVAL;
    int rc = submit_check(c, batch, "replay");
    if (rc < 0)
        return rc;
    if (!opts)
        opts = &submit_default_opts;
    pthread_mutex_lock(&c->mu);
    client_clear_error(c);
    rc = client_check_connected(c);
    if (rc == 0)
        rc = client_fp_usable(c);
    if (rc > 0) {
        uint64_t t;
        rc = client_fp_submit(c, program, batch, branch, opts, opts->timed, &t);
        if (rc == 0)
            rc = client_fp_wait(c, t, res);
    } else if (rc == 0) {
        rc = submit_sock_replay(c, program, batch, branch, opts, res);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int gg_client_replay(gg_client *c, uint64_t program, int batch, int branch,
                     gg_replay_result *res)
{
    return gg_client_replay_ex(c, program, batch, branch, NULL, res);
}

int gg_client_submit(gg_client *c, uint64_t program, int batch, int branch,
                     const gg_replay_opts *opts, uint64_t *ticket)
{
    if (!c)
        return -EINVAL;
    if (!ticket)
        return client_fail_locked(c, -EINVAL, "submit: ticket is required");
    *ticket = 0;
    int rc = submit_check(c, batch, "submit");
    if (rc < 0)
        return rc;
    if (!opts)
        opts = &submit_default_opts;
    pthread_mutex_lock(&c->mu);
    client_clear_error(c);
    rc = client_check_connected(c);
    if (rc == 0)
        rc = client_fp_usable(c);
    if (rc > 0)
        rc = client_fp_submit(c, program, batch, branch, opts, opts->timed, ticket);
    else if (rc == 0)
        rc = submit_sock(c, program, batch, branch, opts, ticket);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Mutex held: connected, and a ticket of this connection. */
static int submit_ticket_check(gg_client *c, uint64_t ticket)
{
    int rc = client_check_connected(c);
    if (rc < 0)
        return rc;
    if (!ticket || !client_ticket_ours(c, ticket))
        return client_fail(c, -ENOENT, "ticket %#llx is not outstanding (already waited for, "
                           "timed out, or from another connection)",
                           (unsigned long long)ticket);
    return 0;
}

int gg_client_wait(gg_client *c, uint64_t ticket, gg_replay_result *res)
{
    if (!c)
        return -EINVAL;
    pthread_mutex_lock(&c->mu);
    client_clear_error(c);
    int rc = submit_ticket_check(c, ticket);
    if (rc == 0)
        rc = ticket & CLIENT_TICKET_FP ? client_fp_wait(c, ticket, res)
                                       : submit_sock_wait(c, ticket, res);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int gg_client_poll(gg_client *c, uint64_t ticket)
{
    if (!c)
        return -EINVAL;
    pthread_mutex_lock(&c->mu);
    client_clear_error(c);
    int rc = submit_ticket_check(c, ticket);
    if (rc == 0) {
        if (ticket & CLIENT_TICKET_FP) {
            rc = client_fp_poll(c, ticket);
        } else {
            rc = client_pump(c, "replay");
            if (rc == 0) {
                client_sticket *e = submit_sock_find(c, ticket);
                rc = !e ? client_fail(c, -ENOENT, "ticket %#llx is not outstanding (already "
                                      "waited for, timed out, or from another connection)",
                                      (unsigned long long)ticket)
                        : e->done;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}
