/* SPDX-License-Identifier: MIT */
/* The daemon's configured limits over raw sockets, each on its own daemon:
 * max-message-size, max-inflight, max-connections; and work queued behind
 * a released program or a closed connection.  Requests are built as bytes
 * here, like test_daemon_proto_methods.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "test_daemon_proto_util.h"

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
            /* 64 replays in one write: more than 4 would be in flight.  The
             * daemon stops reading the connection at 4 (backpressure) and
             * takes the rest as answers go out: every replay is answered
             * and the connection stays open. */
            msgpack_sbuffer_clear(&many.sb);
            for (uint32_t i = 0; i < 64; i++)
                h_pack_request(&many.sb, 1000 + i, "replay", p.sb.data, p.sb.size);
            CHECK(h_conn_send(&c, many.sb.data, many.sb.size) == 0);
            int ok = 0, bad = 0;
            bool seen[64] = {false};
            for (uint32_t i = 0; i < 64; i++) {
                const msgpack_object *o;
                proto_msg m;
                bool idok;
                char why[64];
                if (h_conn_recv(&c, T_RECV_MS, &o) != 1 ||
                    proto_msg_decode(o, &m, &idok, why, sizeof why) < 0 ||
                    m.type != GG_MSG_RESPONSE || m.error || m.msgid < 1000 || m.msgid >= 1064 ||
                    seen[m.msgid - 1000]) {
                    char e[200] = "";
                    if (m.error)
                        h_gets(m.error, "message", e, sizeof e);
                    h_note("answer %u: type %d msgid %u %s", i, m.type, m.msgid, e);
                    bad++;
                    break;
                }
                seen[m.msgid - 1000] = true;
                ok++;
            }
            CHECKF(ok == 64 && bad == 0, "all 64 replays answered, each once, none refused "
                   "(%d answered)", ok);
            /* the same connection still serves */
            CHECK(stats_ok(&c, 2000));
            /* and the pause was taken: the daemon says so, once */
            /* the log is written by a thread of its own: wait for the record */
            bool paused = false;
            for (int64_t end = h_now_ms() + 60000; !paused && h_now_ms() < end;) {
                char *log = h_read_file(d.log);
                paused = strstr(log, "requests in flight (max-inflight): its connection is not "
                                     "read until one is answered") != NULL;
                free(log);
                if (!paused)
                    h_sleep_ms(20);
            }
            CHECKF(paused, "the daemon logged that it paused reading at max-inflight");
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
            for (uint32_t i = 0; i < 3000 && !freed; i++) {   /* up to 60 s */
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
        for (uint32_t i = 0; i < 3000 && !alone; i++) {   /* up to 60 s */
            const msgpack_object *r;
            /* the closed session's ready graphs may stay, parked for a
             * restarted client to adopt; nothing may stay attached */
            alone = call_ok(&c, 10 + i, "stats", NULL, &r) &&
                    h_getu(r, "sessions_active") == 1 && h_get(r, "cache") &&
                    h_get(r, "cache")->type == MSGPACK_OBJECT_ARRAY;
            for (uint32_t k = 0; alone && k < h_get(r, "cache")->via.array.size; k++) {
                const msgpack_object *e = &h_get(r, "cache")->via.array.ptr[k];
                alone = h_get(e, "parked") && h_get(e, "parked")->via.boolean;
            }
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
    for (uint32_t i = 0; i < 3000 && !alone; i++) {   /* up to 60 s */
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
    for (int i = 0; i < 3000 && !in; i++) {   /* up to 60 s */
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
    h_init("test_daemon_proto_limits", 600);
    test_max_message();
    test_max_inflight();
    test_max_connections();
    test_queued_work();
    return h_finish();
}
