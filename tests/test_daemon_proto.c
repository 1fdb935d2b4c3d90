/* The daemon's protocol over raw sockets: what hello, stats and health
 * answer, and how malformed, oversized, garbage and pipelined input is
 * handled.  Everything is sent as bytes built here (proto helpers and
 * msgpack), so shapes the client library never produces can be tried. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

#define T_RECV_MS 60000

typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} mp;

static void mp_init(mp *m)
{
    msgpack_sbuffer_init(&m->sb);
    msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
}

static void mp_free(mp *m)
{
    msgpack_sbuffer_destroy(&m->sb);
}

/* Send a request with params given as a packed map (or NULL for []), and
 * return the response's result / error. */
static int call(h_conn *c, uint32_t msgid, const char *method, const mp *params,
                const msgpack_object **res, const msgpack_object **err)
{
    int rc = h_conn_call(c, msgid, method, params ? params->sb.data : NULL,
                         params ? params->sb.size : 0, res, err);
    CHECKF(rc == 1, "%s (msgid %u): got a response (rc %d)", method, msgid, rc);
    return rc;
}

static bool call_ok(h_conn *c, uint32_t msgid, const char *method, const mp *params,
                    const msgpack_object **res)
{
    const msgpack_object *err = NULL;
    *res = NULL;
    if (call(c, msgid, method, params, res, &err) != 1)
        return false;
    char code[32], msg[256];
    return CHECKF(err == NULL && *res && (*res)->type == MSGPACK_OBJECT_MAP,
                  "%s (msgid %u) succeeds (error %s: %s)", method, msgid,
                  h_err_code(err, code, sizeof code), err ? h_gets(err, "message", msg, sizeof msg) : "");
}

/* A call that must fail with code; the message is returned in msg. */
static void call_fails(h_conn *c, uint32_t msgid, const char *method, const mp *params,
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
static void expect_notify(h_conn *c, const char *code, char *msg, size_t msglen)
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

static void expect_eof(h_conn *c)
{
    const msgpack_object *o;
    int rc;
    int extra = 0;
    while ((rc = h_conn_recv(c, T_RECV_MS, &o)) == 1)
        extra++;
    CHECKF(rc == 0, "the daemon closes the connection (rc %d)", rc);
    CHECKF(extra == 0, "nothing more before the close (%d more messages)", extra);
}

static bool hello(h_conn *c, uint32_t msgid)
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

static bool stats_ok(h_conn *c, uint32_t msgid)
{
    const msgpack_object *r;
    return call_ok(c, msgid, "stats", NULL, &r) && h_getu(r, "replay_count") != UINT64_MAX;
}

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

    /* no msgid to answer: an error notification, and the connection stays */
    static const struct {
        const char *what;
        const char *bytes;
        size_t len;
    } nomsgid[] = {
        {"an int", "\x2a", 1},
        {"a map", "\x81\xa1k\x01", 4},
        {"a string", "\xa5hello", 6},
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
    for (int i = 0; i < 300 && !gone; i++) {
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
    for (size_t i = 0; i < p.sb.size; i++) {
        CHECK(h_conn_send(&c, p.sb.data + i, 1) == 0);
        if (i % 3 == 0)
            h_sleep_ms(2);   /* give the daemon a chance to read a partial message */
    }
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
        CHECK(h_conn_send(&c, p.sb.data + at, cut[i] - at) == 0);
        at = cut[i];
        h_sleep_ms(5);
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

/* ---- limits: message size, requests in flight ---------------------------- */

static void test_max_message(void)
{
    h_section("max-message-size");
    h_daemon d;
    const char *args[] = {"--set", "max-message-size=65536", NULL};
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    h_conn c;
    const msgpack_object *r;
    char msg[256];
    /* hello reports the limit; a message just under it is fine */
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        mp p;
        mp_init(&p);
        msgpack_pack_map(&p.pk, 2);
        proto_pack_kv_u64(&p.pk, "protocol", 1);
        char *big = malloc(60000);
        memset(big, 'b', 60000);
        proto_pack_key(&p.pk, "client");
        proto_pack_strn(&p.pk, big, 60000);
        if (call_ok(&c, 1, "hello", &p, &r))
            CHECK_EQ(h_getu(r, "limits.max_message_size"), 65536);
        mp_free(&p);
        CHECK(stats_ok(&c, 2));

        /* a header declaring more than the limit: refused before the body */
        static const uint8_t head[] = {0x94, 0x00, 0x03, 0xa5, 's', 't', 'a', 't', 's', 0x91,
                                       0x81, 0xa1, 'x', 0xdb, 0x00, 0x01, 0x86, 0xa0};
        CHECK(h_conn_send(&c, head, sizeof head) == 0);
        expect_notify(&c, "EMSGSIZE", msg, sizeof msg);
        CHECK_CONTAINS(msg, "65536");
        expect_eof(&c);
        h_conn_close(&c);

        /* a whole message over the limit */
        if (CHECK(h_conn_open(&c, d.sock) == 0)) {
            CHECK(hello(&c, 1));
            mp_init(&p);
            msgpack_pack_map(&p.pk, 1);
            big = realloc(big, 70000);
            memset(big, 'c', 70000);
            proto_pack_key(&p.pk, "x");
            msgpack_pack_bin(&p.pk, 70000);
            msgpack_pack_bin_body(&p.pk, big, 70000);
            mp req;
            mp_init(&req);
            h_pack_request(&req.sb, 2, "stats", p.sb.data, p.sb.size);
            /* the daemon may close before all of it is taken: ignore EPIPE */
            (void)h_conn_send(&c, req.sb.data, req.sb.size);
            expect_notify(&c, "EMSGSIZE", msg, sizeof msg);
            expect_eof(&c);
            mp_free(&req);
            mp_free(&p);
            h_conn_close(&c);
        }
        free(big);
    }
    /* the daemon is fine */
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        CHECK(hello(&c, 1));
        CHECK(stats_ok(&c, 2));
        h_conn_close(&c);
    }
    h_daemon_stop(&d);
}

/* A registered shm buffer and a one-node program, over raw requests. */
static uint64_t last_buffer;

static bool define_scale_program(h_conn *c, const char *shm, uint64_t *prog)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_str(&p.pk, "handle", shm);
    proto_pack_kv_u64(&p.pk, "size", 4096);
    const msgpack_object *r;
    bool ok = call_ok(c, 2, "buffer.register", &p, &r);
    uint64_t buf = ok ? h_getu(r, "id") : 0;
    last_buffer = buf;
    mp_free(&p);
    if (!ok)
        return false;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 4);
    proto_pack_kv_str(&p.pk, "name", "raw");
    proto_pack_key(&p.pk, "tensors");
    msgpack_pack_map(&p.pk, 2);
    for (int t = 0; t < 2; t++) {
        proto_pack_key(&p.pk, t ? "y" : "x");
        msgpack_pack_map(&p.pk, 4);
        proto_pack_kv_u64(&p.pk, "buffer", buf);
        proto_pack_kv_u64(&p.pk, "offset", t ? 2048 : 0);
        proto_pack_kv_str(&p.pk, "dtype", "f32");
        proto_pack_key(&p.pk, "shape");
        msgpack_pack_array(&p.pk, 2);
        proto_pack_str(&p.pk, "batch");
        msgpack_pack_int(&p.pk, 4);
    }
    proto_pack_key(&p.pk, "nodes");
    msgpack_pack_array(&p.pk, 1);
    msgpack_pack_map(&p.pk, 4);
    proto_pack_kv_str(&p.pk, "op", "scale");
    proto_pack_key(&p.pk, "inputs");
    msgpack_pack_array(&p.pk, 1);
    proto_pack_str(&p.pk, "x");
    proto_pack_key(&p.pk, "outputs");
    msgpack_pack_array(&p.pk, 1);
    proto_pack_str(&p.pk, "y");
    proto_pack_key(&p.pk, "attrs");
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_f64(&p.pk, "scale", 2.0);
    proto_pack_key(&p.pk, "buckets");
    msgpack_pack_array(&p.pk, 3);
    msgpack_pack_int(&p.pk, 1);
    msgpack_pack_int(&p.pk, 2);
    msgpack_pack_int(&p.pk, 4);
    ok = call_ok(c, 3, "program.define", &p, &r);
    if (ok)
        *prog = h_getu(r, "id");
    mp_free(&p);
    return ok;
}

static void test_max_inflight(void)
{
    h_section("max-inflight");
    h_daemon d;
    const char *args[] = {"--set", "max-inflight=4", NULL};
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    char shm[64];
    h_unique(shm, sizeof shm, "/ggtest-raw");
    int fd = shm_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0 && ftruncate(fd, 4096) == 0);
    if (fd >= 0)
        close(fd);
    h_conn c;
    uint64_t prog = 0;
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        CHECK(hello(&c, 1));
        if (define_scale_program(&c, shm, &prog)) {
            /* a replay works one at a time */
            mp p;
            mp_init(&p);
            msgpack_pack_map(&p.pk, 2);
            proto_pack_kv_u64(&p.pk, "program", prog);
            proto_pack_kv_u64(&p.pk, "batch", 3);
            const msgpack_object *r;
            if (call_ok(&c, 4, "replay", &p, &r)) {
                char s[32];
                CHECK_STR(h_gets(r, "path", s, sizeof s), "graph");
                CHECK_EQ(h_geti(r, "bucket"), 4);
            }
            /* synchronous requests never pile up: 64 stats in one write */
            mp many;
            mp_init(&many);
            for (uint32_t i = 0; i < 64; i++)
                h_pack_request(&many.sb, 100 + i, "stats", NULL, 0);
            CHECK(h_conn_send(&c, many.sb.data, many.sb.size) == 0);
            int got = 0;
            for (uint32_t i = 0; i < 64; i++) {
                const msgpack_object *o;
                proto_msg m;
                bool idok;
                char why[64];
                if (h_conn_recv(&c, T_RECV_MS, &o) == 1 &&
                    proto_msg_decode(o, &m, &idok, why, sizeof why) == 0 &&
                    m.msgid == 100 + i && !m.error)
                    got++;
            }
            CHECK_EQ(got, 64);
            /* 64 replays in one write: more than 4 in flight */
            msgpack_sbuffer_clear(&many.sb);
            for (uint32_t i = 0; i < 64; i++)
                h_pack_request(&many.sb, 1000 + i, "replay", p.sb.data, p.sb.size);
            CHECK(h_conn_send(&c, many.sb.data, many.sb.size) == 0);
            int ok = 0, busy = 0, other = 0, rc;
            uint32_t last_ok = 0, busy_id = 0;
            const msgpack_object *o;
            while ((rc = h_conn_recv(&c, T_RECV_MS, &o)) == 1) {
                proto_msg m;
                bool idok;
                char why[64], code[32];
                if (proto_msg_decode(o, &m, &idok, why, sizeof why) < 0 ||
                    m.type != GG_MSG_RESPONSE) {
                    other++;
                    continue;
                }
                if (!m.error) {
                    ok++;
                    last_ok = m.msgid;
                } else if (strcmp(h_err_code(m.error, code, sizeof code), "EBUSY") == 0) {
                    busy++;
                    busy_id = m.msgid;
                    char msg[256];
                    CHECK_CONTAINS(h_gets(m.error, "message", msg, sizeof msg), "4");
                } else {
                    other++;
                }
            }
            CHECKF(rc == 0, "the connection is closed after EBUSY (rc %d)", rc);
            CHECK_EQ(busy, 1);
            CHECK_EQ(other, 0);
            CHECKF(ok < 64, "not every replay was answered (%d were)", ok);
            CHECKF(busy_id >= 1004, "EBUSY came for a request past the fourth (msgid %u)",
                   busy_id);
            CHECKF(ok == 0 || last_ok < busy_id, "answers before EBUSY only (last %u, EBUSY %u)",
                   last_ok, busy_id);
            mp_free(&many);
            mp_free(&p);
        }
        h_conn_close(&c);
    }
    /* the daemon stays healthy; a new connection replays fine */
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        CHECK(hello(&c, 1));
        const msgpack_object *r;
        if (call_ok(&c, 2, "health", NULL, &r))
            CHECK(h_get(r, "ok") && h_get(r, "ok")->via.boolean);
        if (define_scale_program(&c, shm, &prog)) {
            mp p;
            mp_init(&p);
            msgpack_pack_map(&p.pk, 2);
            proto_pack_kv_u64(&p.pk, "program", prog);
            proto_pack_kv_u64(&p.pk, "batch", 1);
            CHECK(call_ok(&c, 4, "replay", &p, &r));
            mp_free(&p);
        }
        h_conn_close(&c);
    }
    shm_unlink(shm);
    h_daemon_stop(&d);
}

/* Replays queued behind each other while the program is released, and a
 * connection closed with replays queued. */
static void test_queued_work(void)
{
    h_section("release and close with replays queued");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    char shm[64];
    h_unique(shm, sizeof shm, "/ggtest-queue");
    int fd = shm_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0 && ftruncate(fd, 4096) == 0);
    float *mem = fd >= 0 ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
    if (fd >= 0)
        close(fd);
    h_conn c;
    uint64_t prog = 0;
    if (mem && mem != MAP_FAILED && CHECK(h_conn_open(&c, d.sock) == 0)) {
        CHECK(hello(&c, 1));
        if (define_scale_program(&c, shm, &prog)) {
            for (int i = 0; i < 16; i++)
                mem[i] = (float)i;
            uint64_t buf = last_buffer;
            mp rp, rel, brel, all;
            mp_init(&rp);
            msgpack_pack_map(&rp.pk, 2);
            proto_pack_kv_u64(&rp.pk, "program", prog);
            proto_pack_kv_u64(&rp.pk, "batch", 4);
            mp_init(&rel);
            msgpack_pack_map(&rel.pk, 1);
            proto_pack_kv_u64(&rel.pk, "id", prog);
            mp_init(&brel);
            msgpack_pack_map(&brel.pk, 1);
            proto_pack_kv_u64(&brel.pk, "id", buf);
            mp_init(&all);
            for (uint32_t i = 0; i < 20; i++)
                h_pack_request(&all.sb, 100 + i, "replay", rp.sb.data, rp.sb.size);
            h_pack_request(&all.sb, 200, "program.release", rel.sb.data, rel.sb.size);
            h_pack_request(&all.sb, 201, "replay", rp.sb.data, rp.sb.size);
            CHECK(h_conn_send(&c, all.sb.data, all.sb.size) == 0);
            int ok_replays = 0, released = 0, gone = 0;
            for (int i = 0; i < 22; i++) {
                const msgpack_object *o;
                if (h_conn_recv(&c, T_RECV_MS, &o) != 1)
                    break;
                proto_msg m;
                bool idok;
                char why[64], code[32];
                if (proto_msg_decode(o, &m, &idok, why, sizeof why) < 0)
                    continue;
                if (m.msgid >= 100 && m.msgid < 120 && !m.error)
                    ok_replays++;
                else if (m.msgid == 200 && !m.error)
                    released++;
                else if (m.msgid == 201 && m.error &&
                         strcmp(h_err_code(m.error, code, sizeof code), "ENOENT") == 0)
                    gone++;
            }
            CHECKF(ok_replays == 20, "the queued replays all ran (%d)", ok_replays);
            CHECK_EQ(released, 1);
            CHECKF(gone == 1, "a replay after the release is refused with ENOENT");
            CHECK(mem[512 + 3 * 4 + 3] == 2.0f * mem[15]);   /* y at byte 2048 */
            /* once the queued work is done the buffer is free to go */
            const msgpack_object *r;
            bool freed = false;
            for (uint32_t i = 0; i < 200 && !freed; i++) {
                const msgpack_object *e;
                freed = h_conn_call(&c, 300 + i, "buffer.release", brel.sb.data, brel.sb.size, &r,
                                    &e) == 1 &&
                        !e;
                if (!freed)
                    h_sleep_ms(20);
            }
            CHECK(freed);
            /* a connection closed with many replays queued */
            if (define_scale_program(&c, shm, &prog)) {
                msgpack_sbuffer_clear(&rp.sb);
                msgpack_pack_map(&rp.pk, 2);
                proto_pack_kv_u64(&rp.pk, "program", prog);
                proto_pack_kv_u64(&rp.pk, "batch", 3);
                msgpack_sbuffer_clear(&all.sb);
                for (uint32_t i = 0; i < 60; i++)
                    h_pack_request(&all.sb, 1000 + i, "replay", rp.sb.data, rp.sb.size);
                h_pack_request(&all.sb, 2000, "health", NULL, 0);
                CHECK(h_conn_send(&c, all.sb.data, all.sb.size) == 0);
            }
            h_conn_close(&c);
            mp_free(&rp);
            mp_free(&rel);
            mp_free(&brel);
            mp_free(&all);
        }
    }
    /* the daemon is fine and the session goes */
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        CHECK(hello(&c, 1));
        bool alone = false;
        for (uint32_t i = 0; i < 500 && !alone; i++) {
            const msgpack_object *r;
            alone = call_ok(&c, 10 + i, "stats", NULL, &r) &&
                    h_getu(r, "sessions_active") == 1 && h_getu(r, "graphs_cached") == 0;
            if (!alone)
                h_sleep_ms(20);
        }
        CHECK(alone);
        const msgpack_object *r;
        if (call_ok(&c, 9999, "health", NULL, &r))
            CHECK(h_get(r, "ok") && h_get(r, "ok")->via.boolean);
        h_conn_close(&c);
    }
    if (mem && mem != MAP_FAILED)
        munmap(mem, 4096);
    shm_unlink(shm);
    h_daemon_stop(&d);
}

static void test_max_connections(void)
{
    h_section("max-connections");
    h_daemon d;
    const char *args[] = {"--set", "max-connections=2", NULL};
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    h_conn a, b, c;
    CHECK(h_conn_open(&a, d.sock) == 0);
    CHECK(hello(&a, 1));
    /* the harness's readiness probe may not be closed on the daemon's side
     * yet: wait until this is the only connection */
    bool alone = false;
    for (uint32_t i = 0; i < 500 && !alone; i++) {
        const msgpack_object *r;
        alone = call_ok(&a, 1000 + i, "stats", NULL, &r) && h_getu(r, "sessions_active") == 1;
        if (!alone)
            h_sleep_ms(20);
    }
    CHECK(alone);
    CHECK(h_conn_open(&b, d.sock) == 0);
    CHECK(hello(&b, 1));
    /* the third is told why, then closed */
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        char msg[256];
        expect_notify(&c, "EBUSY", msg, sizeof msg);
        CHECK_CONTAINS(msg, "max-connections");
        expect_eof(&c);
        h_conn_close(&c);
    }
    CHECK(stats_ok(&a, 2) && stats_ok(&b, 2));
    /* a slot frees when a connection goes */
    h_conn_close(&b);
    bool in = false;
    for (int i = 0; i < 300 && !in; i++) {
        if (h_conn_open(&c, d.sock) == 0) {
            const msgpack_object *o;
            /* refused connections get a notification at once; an accepted
             * one answers hello */
            mp p;
            mp_init(&p);
            msgpack_pack_map(&p.pk, 1);
            proto_pack_kv_u64(&p.pk, "protocol", 1);
            mp req;
            mp_init(&req);
            h_pack_request(&req.sb, 9, "hello", p.sb.data, p.sb.size);
            (void)h_conn_send(&c, req.sb.data, req.sb.size);
            mp_free(&req);
            mp_free(&p);
            if (h_conn_recv(&c, T_RECV_MS, &o) == 1) {
                proto_msg m;
                bool idok;
                char why[64];
                in = proto_msg_decode(o, &m, &idok, why, sizeof why) == 0 &&
                     m.type == GG_MSG_RESPONSE && m.msgid == 9 && !m.error;
            }
            h_conn_close(&c);
        }
        if (!in)
            h_sleep_ms(20);
    }
    CHECKF(in, "a new connection is accepted once one has closed");
    CHECK(stats_ok(&a, 3));
    h_conn_close(&a);
    h_daemon_stop(&d);
}

int main(void)
{
    h_init("test_daemon_proto", 600);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_hello(&d);
        test_stats_health(&d);
        test_malformed(&d);
        test_garbage(&d);
        test_pipelining(&d);
        h_daemon_stop(&d);
    }
    test_max_message();
    test_max_inflight();
    test_max_connections();
    test_queued_work();
    return h_finish();
}
