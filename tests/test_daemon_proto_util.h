/* SPDX-License-Identifier: MIT */
/* Helpers shared by the daemon protocol tests over raw sockets
 * (test_daemon_proto_methods.c, test_daemon_proto_limits.c,
 * test_daemon_conn.c): a msgpack buffer, calls with their expected outcome,
 * error notifications, the connection's end, hello and stats, the daemon
 * having read what was sent. */
#ifndef GG_TEST_DAEMON_PROTO_UTIL_H
#define GG_TEST_DAEMON_PROTO_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"

#define T_RECV_MS 60000

/* The daemon has read all that was sent on c (waited for up to 60 s). */
static inline bool t_sent_read(const h_conn *c)
{
    int rc = h_conn_drained(c, 60000);
    return CHECKF(rc == 0, "the daemon read what was sent (%s)", strerror(-rc));
}

typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} mp;

static inline void mp_init(mp *m)
{
    msgpack_sbuffer_init(&m->sb);
    msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
}

static inline void mp_free(mp *m)
{
    msgpack_sbuffer_destroy(&m->sb);
}

/* Send a request with params given as a packed map (or NULL for []), and
 * return the response's result / error. */
static inline int call(h_conn *c, uint32_t msgid, const char *method, const mp *params,
                       const msgpack_object **res, const msgpack_object **err)
{
    int rc = h_conn_call(c, msgid, method, params ? params->sb.data : NULL,
                         params ? params->sb.size : 0, res, err);
    CHECKF(rc == 1, "%s (msgid %u): got a response (rc %d)", method, msgid, rc);
    return rc;
}

static inline bool call_ok(h_conn *c, uint32_t msgid, const char *method, const mp *params,
                           const msgpack_object **res)
{
    const msgpack_object *err = NULL;
    *res = NULL;
    if (call(c, msgid, method, params, res, &err) != 1)
        return false;
    char code[32], msg[256];
    return CHECKF(err == NULL && *res && (*res)->type == MSGPACK_OBJECT_MAP,
                  "%s (msgid %u) succeeds (error %s: %s)", method, msgid,
                  h_err_code(err, code, sizeof code),
                  err ? h_gets(err, "message", msg, sizeof msg) : "");
}

/* A call that must fail with code; the message is returned in msg. */
static inline void call_fails(h_conn *c, uint32_t msgid, const char *method, const mp *params,
                              const char *code, char *msg, size_t msglen)
{
    const msgpack_object *res = NULL, *err = NULL;
    msg[0] = '\0';
    if (call(c, msgid, method, params, &res, &err) != 1)
        return;
    char got[32];
    h_err_code(err, got, sizeof got);
    CHECKF(err && strcmp(got, code) == 0, "%s (msgid %u) fails with %s (got %s)", method, msgid,
           code, got);
    if (err)
        h_gets(err, "message", msg, msglen);
    CHECKF(!err || msg[0], "%s: the error has a message", method);
}

/* The next message is an "error" notification with code; its message to msg. */
static inline void expect_notify(h_conn *c, const char *code, char *msg, size_t msglen)
{
    const msgpack_object *o;
    int rc = h_conn_recv(c, T_RECV_MS, &o);
    msg[0] = '\0';
    if (!CHECKF(rc == 1, "an error notification arrives (rc %d)", rc))
        return;
    proto_msg m;
    bool idok;
    char why[128];
    CHECK(proto_msg_decode(o, &m, &idok, why, sizeof why) == 0);
    CHECKF(m.type == GG_MSG_NOTIFY && m.method_len == 5 && memcmp(m.method, "error", 5) == 0,
           "it is [2, \"error\", ...] (type %d)", m.type);
    char got[32];
    h_gets(m.params, "code", got, sizeof got);
    CHECKF(strcmp(got, code) == 0, "notification code %s (got %s)", code, got);
    h_gets(m.params, "message", msg, msglen);
    CHECK(msg[0] != '\0');
}

static inline void expect_eof(h_conn *c)
{
    const msgpack_object *o;
    int rc;
    int extra = 0;
    while ((rc = h_conn_recv(c, T_RECV_MS, &o)) == 1)
        extra++;
    CHECKF(rc == 0, "the daemon closes the connection (rc %d)", rc);
    CHECKF(extra == 0, "nothing more before the close (%d more messages)", extra);
}

static inline bool hello(h_conn *c, uint32_t msgid)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "protocol", 1);
    proto_pack_kv_str(&p.pk, "client", "test_daemon_proto");
    const msgpack_object *r;
    bool ok = call_ok(c, msgid, "hello", &p, &r);
    mp_free(&p);
    return ok;
}

static inline bool stats_ok(h_conn *c, uint32_t msgid)
{
    const msgpack_object *r;
    return call_ok(c, msgid, "stats", NULL, &r) && h_getu(r, "replay_count") != UINT64_MAX;
}

#endif
