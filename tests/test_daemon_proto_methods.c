/* SPDX-License-Identifier: MIT */
/* The daemon's protocol over raw sockets, on one daemon with the default
 * limits: what hello, stats and health answer, and how malformed, garbage
 * and pipelined input is handled.  Everything is sent as bytes built here
 * (proto helpers and msgpack), so shapes the client library never produces
 * can be tried.  Configured limits and queued work:
 * test_daemon_proto_limits.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "test_daemon_proto_util.h"

static bool has_str(const msgpack_object *arr, const char *s)
{
    if (!arr || arr->type != MSGPACK_OBJECT_ARRAY)
        return false;
    for (uint32_t i = 0; i < arr->via.array.size; i++)
        if (proto_str_eq(&arr->via.array.ptr[i], s))
            return true;
    return false;
}

/* ---- hello, stats, health ------------------------------------------------ */

static void test_hello(h_daemon *d)
{
    h_section("hello");
    h_conn c;
    if (!CHECK(h_conn_open(&c, d->sock) == 0))
        return;
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "protocol", 1);
    proto_pack_kv_str(&p.pk, "client", "test_daemon_proto");
    const msgpack_object *r;
    char s[128];
    if (call_ok(&c, 1, "hello", &p, &r)) {
        CHECK_EQ(h_getu(r, "protocol"), 1);
        CHECK_STR(h_gets(r, "version", s, sizeof s), GG_VERSION);
        CHECK_STR(h_gets(r, "backend", s, sizeof s), "cpu");
        CHECK(h_getu(r, "session") >= 1 && h_getu(r, "session") != UINT64_MAX);
        CHECK(h_is(r, "device", MSGPACK_OBJECT_MAP));
        CHECK(strlen(h_gets(r, "device.name", s, sizeof s)) > 0);
        CHECK_CONTAINS(s, "cpu");
        CHECK(strlen(h_gets(r, "device.arch", s, sizeof s)) > 0);
        CHECK(strlen(h_gets(r, "device.runtime", s, sizeof s)) > 0);
        CHECK(h_getu(r, "device.vram_total_mb") > 0 &&
              h_getu(r, "device.vram_total_mb") != UINT64_MAX);
        CHECK(h_getu(r, "device.vram_free_mb") <= h_getu(r, "device.vram_total_mb"));
        CHECK(h_is(r, "limits", MSGPACK_OBJECT_MAP));
        CHECK_EQ(h_getu(r, "limits.max_message_size"), 16u << 20);
        CHECK_EQ(h_getu(r, "limits.max_inflight"), 64);
        CHECK_EQ(h_getu(r, "limits.max_batch"), 65536);
        CHECK(h_getu(r, "limits.max_buckets") >= 1);
        CHECK(h_getu(r, "limits.max_dims") >= 2);
        static const int defb[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256};
        const msgpack_object *b = h_get(r, "limits.buckets");
        bool bok = b && b->type == MSGPACK_OBJECT_ARRAY && b->via.array.size == 13;
        for (uint32_t i = 0; bok && i < 13; i++)
            bok = b->via.array.ptr[i].via.u64 == (uint64_t)defb[i];
        CHECKF(bok, "limits.buckets are the defaults 1..256");
        const msgpack_object *m = h_get(r, "methods");
        static const char *const methods[] = {"hello", "stats", "health", "buffer.register",
                                              "buffer.release", "buffer.list", "program.define",
                                              "program.release", "program.list",
                                              "program.prepare", "replay", NULL};
        for (int i = 0; methods[i]; i++)
            CHECKF(has_str(m, methods[i]), "methods lists %s", methods[i]);
        const msgpack_object *ops = h_get(r, "ops");
        static const char *const opn[] = {"copy", "add", "mul", "scale", "gelu", "silu",
                                          "silu_mul", "layernorm", "rmsnorm", "linear",
                                          "softmax", NULL};
        for (int i = 0; opn[i]; i++)
            CHECKF(has_str(ops, opn[i]), "ops lists %s", opn[i]);
    }
    mp_free(&p);

    char msg[256];
    /* another protocol */
    mp_init(&p);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_u64(&p.pk, "protocol", 2);
    call_fails(&c, 2, "hello", &p, "EPROTO", msg, sizeof msg);
    CHECK_CONTAINS(msg, "protocol 2");
    mp_free(&p);
    /* protocol missing, or of the wrong type */
    call_fails(&c, 3, "hello", NULL, "EINVAL", msg, sizeof msg);
    CHECK_CONTAINS(msg, "protocol");
    mp_init(&p);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_str(&p.pk, "protocol", "1");
    call_fails(&c, 4, "hello", &p, "EINVAL", msg, sizeof msg);
    mp_free(&p);
    /* still usable */
    CHECK(hello(&c, 5));
    h_conn_close(&c);
}

static void test_stats_health(h_daemon *d)
{
    h_section("stats and health");
    h_conn c;
    if (!CHECK(h_conn_open(&c, d->sock) == 0))
        return;
    CHECK(hello(&c, 1));
    const msgpack_object *r;
    char s[128];
    if (call_ok(&c, 2, "stats", NULL, &r)) {
        static const char *const counters[] = {"capture_count", "replay_count",
                                               "fallback_count", "validation_failures",
                                               "eager_count", "oversize_count", "requests",
                                               "errors", "evictions", "sessions_active",
                                               "sessions_total", "graphs_cached", NULL};
        for (int i = 0; counters[i]; i++)
            CHECKF(h_getu(r, counters[i]) != UINT64_MAX, "stats has %s (an unsigned integer)",
                   counters[i]);
        CHECK(h_is(r, "avg_replay_us", MSGPACK_OBJECT_FLOAT64) ||
              h_is(r, "avg_replay_us", MSGPACK_OBJECT_FLOAT32));
        CHECK(h_getf(r, "avg_replay_us") == 0.0);
        CHECK_EQ(h_getu(r, "capture_count"), 0);
        CHECK_EQ(h_getu(r, "replay_count"), 0);
        CHECK(h_getu(r, "sessions_active") >= 1);
        CHECK_STR(h_gets(r, "backend", s, sizeof s), "cpu");
        CHECK(h_is(r, "sessions", MSGPACK_OBJECT_ARRAY));
        CHECK(h_is(r, "cache", MSGPACK_OBJECT_ARRAY));
        /* our own session is listed, with the name from hello */
        const msgpack_object *ss = h_get(r, "sessions");
        bool found = false;
        for (uint32_t i = 0; ss && i < ss->via.array.size; i++) {
            const msgpack_object *e = &ss->via.array.ptr[i];
            if (strcmp(h_gets(e, "client", s, sizeof s), "test_daemon_proto") == 0) {
                found = true;
                CHECK_EQ(h_geti(e, "pid"), getpid());
                CHECK_EQ(h_geti(e, "uid"), getuid());
                CHECK(h_getu(e, "requests") >= 2);
            }
        }
        CHECK(found);
    }
    if (call_ok(&c, 3, "health", NULL, &r)) {
        CHECK(h_is(r, "ok", MSGPACK_OBJECT_BOOLEAN) && h_get(r, "ok")->via.boolean);
        CHECK(strlen(h_gets(r, "gpu", s, sizeof s)) > 0);
        CHECK(strlen(h_gets(r, "arch", s, sizeof s)) > 0);
        CHECK(h_getu(r, "vram_total_mb") > 0 && h_getu(r, "vram_total_mb") != UINT64_MAX);
        CHECK(h_getu(r, "vram_free_mb") != UINT64_MAX);
        CHECK(h_is(r, "details", MSGPACK_OBJECT_MAP));
        CHECK_STR(h_gets(r, "details.smoke_test", s, sizeof s), "passed");
        CHECK_STR(h_gets(r, "details.backend", s, sizeof s), "cpu");
        CHECK_STR(h_gets(r, "details.socket", s, sizeof s), d->sock);
    }
    h_conn_close(&c);
}

/* ---- malformed messages -------------------------------------------------- */

static void test_malformed(h_daemon *d)
{
    h_section("malformed messages keep the connection");
    h_conn c;
    if (!CHECK(h_conn_open(&c, d->sock) == 0))
        return;
    CHECK(hello(&c, 1));
    char msg[256];

    /* unknown method */
    call_fails(&c, 2, "no.such.method", NULL, "ENOSYS", msg, sizeof msg);
    CHECK_CONTAINS(msg, "no.such.method");
    CHECK(stats_ok(&c, 3));

    const msgpack_object *res, *err;
    char code[32];
    /* params not an array: [0, 7, "stats", {}] */
    static const uint8_t p_map[] = {0x94, 0x00, 0x07, 0xa5, 's', 't', 'a', 't', 's', 0x80};
    CHECK(h_conn_send(&c, p_map, sizeof p_map) == 0);
    const msgpack_object *o;
    proto_msg m;
    bool idok;
    char why[128];
#define NEXT_RESPONSE(id, want_code)                                                          \
    do {                                                                                      \
        int rc_ = h_conn_recv(&c, T_RECV_MS, &o);                                             \
        if (CHECKF(rc_ == 1, "a response arrives (rc %d)", rc_)) {                            \
            CHECK(proto_msg_decode(o, &m, &idok, why, sizeof why) == 0);                      \
            CHECKF(m.type == GG_MSG_RESPONSE && m.msgid == (id),                              \
                   "response to msgid %u (type %d, msgid %u)", (unsigned)(id), m.type,        \
                   m.msgid);                                                                  \
            CHECK_STR(h_err_code(m.error, code, sizeof code), want_code);                     \
        }                                                                                     \
    } while (0)
    NEXT_RESPONSE(7, "EPROTO");
    CHECK(stats_ok(&c, 8));
    /* params [5] */
    static const uint8_t p_int[] = {0x94, 0x00, 0x09, 0xa5, 's', 't', 'a', 't', 's', 0x91, 0x05};
    CHECK(h_conn_send(&c, p_int, sizeof p_int) == 0);
    NEXT_RESPONSE(9, "EPROTO");
    /* params [{}, {}] */
    static const uint8_t p_two[] = {0x94, 0x00, 0x0a, 0xa5, 's', 't', 'a', 't', 's',
                                    0x92, 0x80, 0x80};
    CHECK(h_conn_send(&c, p_two, sizeof p_two) == 0);
    NEXT_RESPONSE(10, "EPROTO");
    /* method an int */
    static const uint8_t m_int[] = {0x94, 0x00, 0x0b, 0x05, 0x90};
    CHECK(h_conn_send(&c, m_int, sizeof m_int) == 0);
    NEXT_RESPONSE(11, "EPROTO");
    /* a request of three elements: answered to its msgid */
    static const uint8_t three[] = {0x93, 0x00, 0x0c, 0xa5, 's', 't', 'a', 't', 's'};
    CHECK(h_conn_send(&c, three, sizeof three) == 0);
    NEXT_RESPONSE(12, "EPROTO");
    CHECK(stats_ok(&c, 13));

    /* an array with no msgid to answer: an error notification, and the
     * connection stays */
    static const struct {
        const char *what;
        const char *bytes;
        size_t len;
    } nomsgid[] = {
        {"msgid a string", "\x94\x00\xa1x\xa5stats\x90", 11},
        {"msgid negative", "\x94\x00\xff\xa5stats\x90", 10},
        {"type 7", "\x94\x07\x01\xa5stats\x90", 10},
        {"empty array", "\x90", 1},
    };
    for (size_t i = 0; i < sizeof nomsgid / sizeof nomsgid[0]; i++) {
        CHECK(h_conn_send(&c, nomsgid[i].bytes, nomsgid[i].len) == 0);
        expect_notify(&c, "EPROTO", msg, sizeof msg);
        CHECKF(stats_ok(&c, 100 + (uint32_t)i), "after %s the connection still works",
               nomsgid[i].what);
    }
    /* Not an array: not MessagePack-RPC at all.  One error notification
     * (at the first byte, not one per byte of text), then the connection
     * closes; the daemon serves the next one. */
    static const struct {
        const char *what;
        const char *bytes;
        size_t len;
        const char *says;
    } notrpc[] = {
        {"an int", "\x2a", 1, "starts with byte 0x2a (text"},
        {"a map", "\x81\xa1k\x01", 4, "starts with byte 0x81"},
        {"a string", "\xa5hello", 6, "starts with byte 0xa5"},
        {"an HTTP request", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34,
         "starts with byte 0x47 (text: is this an HTTP request"},
    };
    for (size_t i = 0; i < sizeof notrpc / sizeof notrpc[0]; i++) {
        h_conn t;
        if (!CHECK(h_conn_open(&t, d->sock) == 0))
            continue;
        CHECK(hello(&t, 1));
        CHECK(h_conn_send(&t, notrpc[i].bytes, notrpc[i].len) == 0);
        expect_notify(&t, "EPROTO", msg, sizeof msg);
        CHECKF(strstr(msg, notrpc[i].says) != NULL, "%s: the message says \"%s\" (got \"%s\")",
               notrpc[i].what, notrpc[i].says, msg);
        /* nothing more: the connection ends after the one error */
        expect_eof(&t);
        h_conn_close(&t);
    }
    CHECK(stats_ok(&c, 150));

    /* a response and a notification from the client are ignored */
    static const uint8_t resp[] = {0x94, 0x01, 0x05, 0xc0, 0x80};
    static const uint8_t note[] = {0x93, 0x02, 0xa4, 'p', 'i', 'n', 'g', 0x90};
    CHECK(h_conn_send(&c, resp, sizeof resp) == 0);
    CHECK(h_conn_send(&c, note, sizeof note) == 0);
    int rc = call(&c, 200, "stats", NULL, &res, &err);
    CHECK(rc == 1 && err == NULL);
    h_conn_close(&c);

    /* a truncated message, then close: the daemon is fine */
    h_conn t;
    if (CHECK(h_conn_open(&t, d->sock) == 0)) {
        mp p;
        mp_init(&p);
        h_pack_request(&p.sb, 1, "stats", NULL, 0);
        CHECK(h_conn_send(&t, p.sb.data, p.sb.size - 3) == 0);
        mp_free(&p);
        static const uint8_t half[] = {0xdb, 0x00, 0x00, 0x10, 0x00, 'a', 'b'};
        CHECK(h_conn_send(&t, half, sizeof half) == 0);
        h_conn_close(&t);
    }
    if (CHECK(h_conn_open(&c, d->sock) == 0)) {
        CHECK(hello(&c, 1));
        if (call_ok(&c, 2, "health", NULL, &res))
            CHECK(h_get(res, "ok") && h_get(res, "ok")->via.boolean);
        h_conn_close(&c);
    }
#undef NEXT_RESPONSE
}

/* ---- garbage ------------------------------------------------------------- */

static uint64_t session_id(h_conn *c, uint32_t msgid)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "protocol", 1);
    proto_pack_kv_str(&p.pk, "client", "test_daemon_proto");
    const msgpack_object *r;
    uint64_t id = 0;
    if (call_ok(c, msgid, "hello", &p, &r))
        id = h_getu(r, "session");
    mp_free(&p);
    return id;
}

static bool session_listed(h_conn *c, uint32_t msgid, uint64_t id)
{
    const msgpack_object *r;
    if (!call_ok(c, msgid, "stats", NULL, &r))
        return false;
    const msgpack_object *ss = h_get(r, "sessions");
    for (uint32_t i = 0; ss && i < ss->via.array.size; i++)
        if (h_getu(&ss->via.array.ptr[i], "id") == id)
            return true;
    return false;
}

static void test_garbage(h_daemon *d)
{
    h_section("garbage closes that connection only");
    h_conn a, b;
    if (!CHECK(h_conn_open(&a, d->sock) == 0) || !CHECK(h_conn_open(&b, d->sock) == 0))
        return;
    uint64_t sa = session_id(&a, 1), sb = session_id(&b, 1);
    CHECK(sa && sb && sa != sb);
    static const uint8_t junk[] = {0xc1, 0xc1, 0xde, 0xad, 0xbe, 0xef, 0xc1};
    CHECK(h_conn_send(&a, junk, sizeof junk) == 0);
    char msg[256];
    expect_notify(&a, "EPROTO", msg, sizeof msg);
    expect_eof(&a);
    h_conn_close(&a);
    CHECK(stats_ok(&b, 2));
    CHECK(session_listed(&b, 3, sb));
    /* the closed session goes away (polled: the close is asynchronous) */
    bool gone = false;
    for (int i = 0; i < 3000 && !gone; i++) {   /* up to 60 s */
        gone = !session_listed(&b, 10 + (uint32_t)i, sa);
        if (!gone)
            h_sleep_ms(20);
    }
    CHECK(gone);

    /* garbage after good requests: the good ones are answered first */
    if (CHECK(h_conn_open(&a, d->sock) == 0)) {
        mp p;
        mp_init(&p);
        h_pack_request(&p.sb, 41, "stats", NULL, 0);
        h_pack_request(&p.sb, 42, "stats", NULL, 0);
        msgpack_sbuffer_write(&p.sb, "\x91\xc1", 2);
        CHECK(h_conn_send(&a, p.sb.data, p.sb.size) == 0);
        mp_free(&p);
        const msgpack_object *o;
        proto_msg m;
        bool idok;
        char why[64];
        for (uint32_t id = 41; id <= 42; id++) {
            if (CHECK(h_conn_recv(&a, T_RECV_MS, &o) == 1)) {
                CHECK(proto_msg_decode(o, &m, &idok, why, sizeof why) == 0);
                CHECKF(m.type == GG_MSG_RESPONSE && m.msgid == id && !m.error,
                       "response %u before the garbage is answered", id);
            }
        }
        expect_notify(&a, "EPROTO", msg, sizeof msg);
        expect_eof(&a);
        h_conn_close(&a);
    }
    CHECK(stats_ok(&b, 1000));
    h_conn_close(&b);
}

/* ---- many messages per write, one message over many writes ------------- */

static void test_pipelining(h_daemon *d)
{
    h_section("many messages in one write");
    h_conn c;
    if (!CHECK(h_conn_open(&c, d->sock) == 0))
        return;
    mp p, hp;
    mp_init(&p);
    mp_init(&hp);
    msgpack_pack_map(&hp.pk, 1);
    proto_pack_kv_u64(&hp.pk, "protocol", 1);
    /* synchronous methods only: they are answered in request order */
    static const char *const meth[] = {"hello", "stats", "buffer.list", "nope"};
    for (uint32_t i = 0; i < 100; i++) {
        const char *mth = meth[i % 4];
        h_pack_request(&p.sb, 1000 + i, mth, i % 4 == 0 ? hp.sb.data : NULL,
                       i % 4 == 0 ? hp.sb.size : 0);
    }
    CHECK(h_conn_send(&c, p.sb.data, p.sb.size) == 0);
    int in_order = 0, right = 0;
    for (uint32_t i = 0; i < 100; i++) {
        const msgpack_object *o;
        if (h_conn_recv(&c, T_RECV_MS, &o) != 1)
            break;
        proto_msg m;
        bool idok;
        char why[64];
        if (proto_msg_decode(o, &m, &idok, why, sizeof why) == 0 && m.type == GG_MSG_RESPONSE &&
            m.msgid == 1000 + i)
            in_order++;
        bool want_err = i % 4 == 3;
        char code[32];
        if (want_err ? (m.error && strcmp(h_err_code(m.error, code, sizeof code), "ENOSYS") == 0)
                     : (!m.error && m.result && m.result->type == MSGPACK_OBJECT_MAP))
            right++;
    }
    CHECK_EQ(in_order, 100);
    CHECK_EQ(right, 100);
    mp_free(&p);

    /* health runs on an executor thread: answered by msgid, maybe later */
    mp_init(&p);
    for (uint32_t i = 0; i < 20; i++)
        h_pack_request(&p.sb, 2000 + i, i % 2 ? "health" : "stats", NULL, 0);
    CHECK(h_conn_send(&c, p.sb.data, p.sb.size) == 0);
    bool seen[20] = {false};
    int nseen = 0;
    for (int i = 0; i < 20; i++) {
        const msgpack_object *o;
        if (h_conn_recv(&c, T_RECV_MS, &o) != 1)
            break;
        proto_msg m;
        bool idok;
        char why[64];
        if (proto_msg_decode(o, &m, &idok, why, sizeof why) == 0 && m.type == GG_MSG_RESPONSE &&
            m.msgid >= 2000 && m.msgid < 2020 && !seen[m.msgid - 2000] && !m.error) {
            seen[m.msgid - 2000] = true;
            nseen++;
            if (m.msgid % 2)
                CHECK(h_get(m.result, "ok") && h_get(m.result, "ok")->via.boolean);
        }
    }
    CHECK_EQ(nseen, 20);
    mp_free(&p);

    h_section("one message over many writes");
    mp_init(&p);
    h_pack_request(&p.sb, 77, "hello", hp.sb.data, hp.sb.size);
    h_pack_request(&p.sb, 78, "stats", NULL, 0);
    /* every third byte, the daemon reads the partial message before more comes */
    for (size_t i = 0; i < p.sb.size; i++)
        CHECK(h_conn_send(&c, p.sb.data + i, 1) == 0 && (i % 3 != 0 || t_sent_read(&c)));
    for (uint32_t id = 77; id <= 78; id++) {
        const msgpack_object *o;
        if (CHECK(h_conn_recv(&c, T_RECV_MS, &o) == 1)) {
            proto_msg m;
            bool idok;
            char why[64];
            CHECK(proto_msg_decode(o, &m, &idok, why, sizeof why) == 0);
            CHECKF(m.type == GG_MSG_RESPONSE && m.msgid == id && !m.error,
                   "byte-by-byte request %u answered", id);
        }
    }
    /* a message split right inside a long string header */
    mp_free(&p);
    mp_init(&p);
    char name[300];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    mp q;
    mp_init(&q);
    msgpack_pack_map(&q.pk, 2);
    proto_pack_kv_u64(&q.pk, "protocol", 1);
    proto_pack_kv_str(&q.pk, "client", name);
    h_pack_request(&p.sb, 79, "hello", q.sb.data, q.sb.size);
    size_t cut[] = {1, 2, 15, 16, 17, 18, 40, p.sb.size};
    size_t at = 0;
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        CHECK(h_conn_send(&c, p.sb.data + at, cut[i] - at) == 0 && t_sent_read(&c));
        at = cut[i];
    }
    const msgpack_object *res, *err;
    int rc = h_conn_recv(&c, T_RECV_MS, &res);
    proto_msg m;
    bool idok;
    char why[64];
    CHECK(rc == 1 && proto_msg_decode(res, &m, &idok, why, sizeof why) == 0 && m.msgid == 79 &&
          !m.error);
    (void)err;
    mp_free(&q);
    mp_free(&p);
    mp_free(&hp);
    h_conn_close(&c);
}

int main(void)
{
    h_init("test_daemon_proto_methods", 600);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_hello(&d);
        test_stats_health(&d);
        test_malformed(&d);
        test_garbage(&d);
        test_pipelining(&d);
        h_daemon_stop(&d);
    }
    return h_finish();
}
