/* SPDX-License-Identifier: MIT */
/* Per-uid quotas.  Each case is a regression test:
 *  - 200 registrations of 4 KiB of a sparse 1 TiB shm object all succeed
 *    (the cpu backend mapped the whole object: ENOMEM after ~126);
 *  - max-buffers-per-uid, max-mapped-bytes-per-uid, max-programs-per-uid,
 *    max-scratch-bytes-per-uid, max-parked-graphs-per-uid and
 *    max-fastpath-regions-per-uid: past each, EDQUOT naming the setting;
 *    another uid (nobody) is not affected by root being at its limits;
 *    releasing makes room again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_quota_util.h"

static const char *g_sock;

static void sparse_case(void)
{
    h_section("sparse 1 TiB object: 200 registrations map 4 KiB each");
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, NULL, NULL) == 0))
        return;
    char shm[64];
    if (!q_shm(shm, sizeof shm, 1ULL << 40)) {
        h_note("cannot make a 1 TiB sparse shm object here: skipped");
        h_daemon_stop(&d);
        return;
    }
    h_conn c;
    if (CHECK(h_conn_open(&c, d.sock) == 0) && hello(&c, 1)) {
        int ok = 0;
        char code[32], msg[512];
        for (int i = 0; i < 200; i++) {
            /* spread over the object, at offsets that are not page-aligned */
            uint64_t off = (uint64_t)i * (5ULL << 30) + 100;
            if (q_register(&c, shm, off, 4096, code, sizeof code, msg, sizeof msg))
                ok++;
            else if (ok == i)
                h_note("registration %d failed: %s %s", i, code, msg);
        }
        CHECK_EQ(ok, 200);
        CHECK(stats_ok(&c, 2));
        h_conn_close(&c);
    }
    shm_unlink(shm);
    h_daemon_stop(&d);
}

static void user_registers(void *arg)
{
    (void)arg;
    char shm[64], code[32], msg[512];
    if (!CHECK(q_shm(shm, sizeof shm, 1 << 20)))
        return;
    h_conn c;
    if (CHECK(h_conn_open(&c, g_sock) == 0) && hello(&c, 1)) {
        uint64_t b = q_register(&c, shm, 0, 64 << 10, code, sizeof code, msg, sizeof msg);
        CHECKF(b != 0, "another uid registers while root is at its limits (%s %s)", code, msg);
        char n[32];
        for (int i = 0; i < 2 && b; i++) {
            snprintf(n, sizeof n, "user%d", i);
            CHECKF(q_define(&c, b, n, 1, code, sizeof code, msg, sizeof msg) != 0,
                   "another uid defines program %d (%s %s)", i, code, msg);
        }
        h_conn_close(&c);
    }
    shm_unlink(shm);
}

static void limits_case(void)
{
    h_section("buffers, mapped bytes, programs, scratch: EDQUOT naming the setting");
    /* scratch of one program: one arena, its scratch tensor at the largest
     * bucket (aligned to 256 B), whatever its branches and other buckets:
     * 64 rows x 16 B = 1 KiB; 8 rows: 256 B */
    const char *args[] = {"--set", "max-buffers-per-uid=3", "--set",
                          "max-mapped-bytes-per-uid=192K", "--set", "max-programs-per-uid=3",
                          "--set", "max-scratch-bytes-per-uid=2560", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    q_open_socket(&d);
    g_sock = d.sock;
    char shm[64], code[32], msg[512];
    if (!CHECK(q_shm(shm, sizeof shm, 1 << 20))) {
        h_daemon_stop(&d);
        return;
    }
    h_conn c, c2;
    if (CHECK(h_conn_open(&c, d.sock) == 0) && hello(&c, 1) &&
        CHECK(h_conn_open(&c2, d.sock) == 0) && hello(&c2, 2)) {
        uint64_t b1 = q_register(&c, shm, 0, 64 << 10, code, sizeof code, msg, sizeof msg);
        /* a second connection of the same uid counts against the same quota */
        uint64_t b2 = q_register(&c2, shm, 64 << 10, 64 << 10, code, sizeof code, msg, sizeof msg);
        CHECK(b1 && b2);
        /* 64 KiB + 1 byte at an unaligned offset maps 3 more pages than 64 KiB */
        q_register(&c, shm, (128 << 10) + 100, 64 << 10, code, sizeof code, msg, sizeof msg);
        CHECK_STR(code, "EDQUOT");
        CHECK_CONTAINS(msg, "max-mapped-bytes-per-uid");
        CHECK_CONTAINS(msg, "196608");
        uint64_t b3 = q_register(&c, shm, 128 << 10, 4096, code, sizeof code, msg, sizeof msg);
        CHECK(b3 != 0);
        q_register(&c, shm, 0, 4096, code, sizeof code, msg, sizeof msg);
        CHECK_STR(code, "EDQUOT");
        CHECK_CONTAINS(msg, "max-buffers-per-uid");
        CHECK_CONTAINS(msg, "limit of 3");

        /* programs and scratch */
        uint64_t p1 = q_define_b(&c, b1, "p1", 2, 64, code, sizeof code, msg, sizeof msg);
        uint64_t p2 = q_define_b(&c2, b2, "p2", 1, 64, code, sizeof code, msg, sizeof msg);
        CHECK(p1 && p2);
        q_define_b(&c, b1, "p3", 1, 64, code, sizeof code, msg, sizeof msg);
        CHECK_STR(code, "EDQUOT");
        CHECK_CONTAINS(msg, "max-scratch-bytes-per-uid");
        CHECK_CONTAINS(msg, "2048 held + 1024 more");
        /* two branches and four buckets still hold one 256-byte arena */
        uint64_t p3 = q_define(&c, b1, "p3", 2, code, sizeof code, msg, sizeof msg);
        CHECKF(p3 != 0, "a smaller program still fits (%s)", msg);
        q_define(&c, b1, "p4", 1, code, sizeof code, msg, sizeof msg);
        CHECK_STR(code, "EDQUOT");
        CHECK_CONTAINS(msg, "max-programs-per-uid");

        h_section("another uid is not affected");
        static const char *const need[] = {NULL};
        h_as_user("test_quota (as a user)", user_registers, NULL, need);

        h_section("releasing makes room");
        mp p;
        mp_init(&p);
        msgpack_pack_map(&p.pk, 1);
        proto_pack_kv_u64(&p.pk, "id", p3);
        const msgpack_object *r;
        CHECK(call_ok(&c, 50, "program.release", &p, &r));
        mp_free(&p);
        CHECK(q_define(&c, b1, "p5", 1, code, sizeof code, msg, sizeof msg) != 0);
        mp_init(&p);
        msgpack_pack_map(&p.pk, 1);
        proto_pack_kv_u64(&p.pk, "id", b3);
        CHECK(call_ok(&c, 51, "buffer.release", &p, &r));
        mp_free(&p);
        CHECK(q_register(&c, shm, 0, 4096, code, sizeof code, msg, sizeof msg) != 0);
        h_conn_close(&c2);
        h_conn_close(&c);
    }
    shm_unlink(shm);
    h_daemon_stop(&d);
}

static unsigned parked_rows(h_conn *c)
{
    const msgpack_object *r;
    if (!call_ok(c, q_id++, "stats", NULL, &r))
        return 0;
    const msgpack_object *cache = h_get(r, "cache");
    unsigned n = 0;
    for (uint32_t i = 0; cache && cache->type == MSGPACK_OBJECT_ARRAY && i < cache->via.array.size;
         i++) {
        const msgpack_object *pk = h_get(&cache->via.array.ptr[i], "parked");
        n += pk && pk->type == MSGPACK_OBJECT_BOOLEAN && pk->via.boolean;
    }
    return n;
}

static void parked_case(void)
{
    h_section("parked graphs: max-parked-graphs-per-uid");
    const char *args[] = {"--set", "max-parked-graphs-per-uid=3", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    char shm[64], code[32], msg[512];
    if (!CHECK(q_shm(shm, sizeof shm, 1 << 20))) {
        h_daemon_stop(&d);
        return;
    }
    h_conn c, w;
    if (CHECK(h_conn_open(&c, d.sock) == 0) && hello(&c, 1)) {
        uint64_t b = q_register(&c, shm, 0, 64 << 10, code, sizeof code, msg, sizeof msg);
        shm_unlink(shm);   /* mapped by now; gone even if this test is killed */
        uint64_t p = b ? q_define(&c, b, "parkme", 2, code, sizeof code, msg, sizeof msg) : 0;
        CHECK(p && q_prepare(&c, p, 2));   /* 8 graphs */
        h_conn_close(&c);
        if (CHECK(h_conn_open(&w, d.sock) == 0) && hello(&w, 1)) {
            /* the program's graphs are parked in one pass, which logs the
             * ones past the quota before it hands the rest to the cache:
             * both seen, the count is final */
            unsigned n = 0;
            for (int64_t end = h_now_ms() + 60000; h_now_ms() < end; h_sleep_ms(20)) {
                char *log = h_read_file(d.log);
                bool logged = strstr(log, "max-parked-graphs-per-uid") != NULL;
                free(log);
                if ((n = parked_rows(&w)) > 0 && logged)
                    break;
            }
            CHECKF(n == 3, "3 of the 8 graphs parked (got %u)", n);
            h_conn_close(&w);
        }
    }
    char *log = h_read_file(d.log);
    CHECK_CONTAINS(log, "max-parked-graphs-per-uid");
    free(log);
    shm_unlink(shm);
    h_daemon_stop(&d);
}

static void regions_case(void)
{
    h_section("fast-path regions: max-fastpath-regions-per-uid");
    const char *args[] = {"--set", "max-fastpath-regions-per-uid=1", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    h_conn a, b;
    if (CHECK(h_conn_open(&a, d.sock) == 0) && hello(&a, 1) &&
        CHECK(h_conn_open(&b, d.sock) == 0) && hello(&b, 1)) {
        const msgpack_object *r;
        CHECK(call_ok(&a, 2, "fastpath.open", NULL, &r));
        char msg[512];
        call_fails(&b, 3, "fastpath.open", NULL, "EDQUOT", msg, sizeof msg);
        CHECK_CONTAINS(msg, "max-fastpath-regions-per-uid");
        h_conn_close(&b);
        h_conn_close(&a);
    }
    h_daemon_stop(&d);
}

int main(void)
{
    h_init("test_quota", 280);
    sparse_case();
    limits_case();
    parked_case();
    regions_case();
    return h_finish();
}
