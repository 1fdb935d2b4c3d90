/* SPDX-License-Identifier: MIT */
/* Scoped, bounded stats.  Each case is a regression test:
 *  - a caller (nobody) sees only its own uid's sessions and cache rows
 *    (scope "uid"): not root's client name, pid or program names;
 *  - root sees every uid's (scope "all"); so does a member of admin-group;
 *  - the cache list is capped at stats-max-cache-entries (the most recently
 *    used rows), with cache_total and cache_truncated;
 *  - the stats answer does not grow with the cache: 81,920 rows were past
 *    16 MiB (EMSGSIZE); 10,240 and 20,480 rows (programs of 64 branches x
 *    32 buckets) give answers of the same size, with every row counted. */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_quota_util.h"

static const char *g_sock;
static bool g_want_all;

/* hello with a client name, for finding it in the sessions list */
static bool hello_as(h_conn *c, const char *client)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "protocol", 1);
    proto_pack_kv_str(&p.pk, "client", client);
    const msgpack_object *r;
    bool ok = call_ok(c, q_id++, "hello", &p, &r);
    mp_free(&p);
    return ok;
}

static bool has_session(const msgpack_object *r, const char *client)
{
    const msgpack_object *s = h_get(r, "sessions");
    char b[64];
    for (uint32_t i = 0; s && s->type == MSGPACK_OBJECT_ARRAY && i < s->via.array.size; i++)
        if (strcmp(h_gets(&s->via.array.ptr[i], "client", b, sizeof b), client) == 0)
            return true;
    return false;
}

static unsigned rows_named(const msgpack_object *r, const char *prog)
{
    const msgpack_object *s = h_get(r, "cache");
    char b[64];
    unsigned n = 0;
    for (uint32_t i = 0; s && s->type == MSGPACK_OBJECT_ARRAY && i < s->via.array.size; i++)
        n += strcmp(h_gets(&s->via.array.ptr[i], "program_name", b, sizeof b), prog) == 0;
    return n;
}

static void user_view(void *arg)
{
    (void)arg;
    char shm[64], code[32], msg[512];
    if (!CHECK(q_shm(shm, sizeof shm, 1 << 20)))
        return;
    h_conn c;
    if (CHECK(h_conn_open(&c, g_sock) == 0) && hello_as(&c, "user-client")) {
        uint64_t b = q_register(&c, shm, 0, 64 << 10, code, sizeof code, msg, sizeof msg);
        shm_unlink(shm);   /* mapped by now; gone even if this test is killed */
        uint64_t p = b ? q_define(&c, b, "user-prog", 1, code, sizeof code, msg, sizeof msg) : 0;
        CHECK(p && q_prepare(&c, p, 1));
        const msgpack_object *r;
        if (call_ok(&c, q_id++, "stats", NULL, &r)) {
            char scope[16];
            CHECK_STR(h_gets(r, "scope", scope, sizeof scope), g_want_all ? "all" : "uid");
            CHECK(has_session(r, "user-client"));
            CHECK_EQ(has_session(r, "root-client"), g_want_all);
            CHECK_EQ(rows_named(r, "user-prog"), 4);
            CHECK_EQ(rows_named(r, "root-prog") != 0, g_want_all);
            if (!g_want_all) {
                const msgpack_object *s = h_get(r, "sessions");
                for (uint32_t i = 0; s && i < s->via.array.size; i++)
                    CHECK_EQ(h_geti(&s->via.array.ptr[i], "uid"), (int64_t)getuid());
                CHECK_EQ(h_getu(r, "cache_total"), 4);
            }
        }
        h_conn_close(&c);
    }
    shm_unlink(shm);
}

static void scope_case(const char *what, const char *const *args, bool user_sees_all)
{
    h_section(what);
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
    h_conn c;
    if (CHECK(h_conn_open(&c, d.sock) == 0) && hello_as(&c, "root-client")) {
        uint64_t b = q_register(&c, shm, 0, 64 << 10, code, sizeof code, msg, sizeof msg);
        shm_unlink(shm);   /* mapped by now; gone even if this test is killed */
        uint64_t p = b ? q_define(&c, b, "root-prog", 1, code, sizeof code, msg, sizeof msg) : 0;
        CHECK(p && q_prepare(&c, p, 1));
        g_want_all = user_sees_all;
        static const char *const need[] = {NULL};
        h_as_user("test_stats_scope (as a user)", user_view, NULL, need);
        const msgpack_object *r;
        if (call_ok(&c, q_id++, "stats", NULL, &r)) {
            char scope[16];
            CHECK_STR(h_gets(r, "scope", scope, sizeof scope), "all");
            CHECK(has_session(r, "root-client"));
            CHECK_EQ(rows_named(r, "root-prog"), 4);
            const msgpack_object *t = h_get(r, "cache_truncated");
            CHECK(t && t->type == MSGPACK_OBJECT_BOOLEAN && !t->via.boolean);
        }
        h_conn_close(&c);
    }
    shm_unlink(shm);
    h_daemon_stop(&d);
}

static void cap_case(void)
{
    h_section("the cache list capped: stats-max-cache-entries, cache_total, cache_truncated");
    const char *args[] = {"--set", "stats-max-cache-entries=5", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    char shm[64], code[32], msg[512];
    h_conn c;
    if (CHECK(q_shm(shm, sizeof shm, 1 << 20)) && CHECK(h_conn_open(&c, d.sock) == 0) &&
        hello(&c, 1)) {
        uint64_t b = q_register(&c, shm, 0, 64 << 10, code, sizeof code, msg, sizeof msg);
        shm_unlink(shm);   /* mapped by now; gone even if this test is killed */
        uint64_t p = b ? q_define(&c, b, "capped", 2, code, sizeof code, msg, sizeof msg) : 0;
        CHECK(p && q_prepare(&c, p, 2));
        const msgpack_object *r;
        if (call_ok(&c, q_id++, "stats", NULL, &r)) {
            const msgpack_object *cache = h_get(r, "cache");
            CHECK(cache && cache->type == MSGPACK_OBJECT_ARRAY && cache->via.array.size == 5);
            CHECK_EQ(h_getu(r, "cache_total"), 8);
            const msgpack_object *t = h_get(r, "cache_truncated");
            CHECK(t && t->type == MSGPACK_OBJECT_BOOLEAN && t->via.boolean);
        }
        h_conn_close(&c);
    }
    h_daemon_stop(&d);
}

/* The stats answer's size, and its cache_total; 0 when it fails. */
static size_t stats_size(h_conn *c, uint64_t *total)
{
    const msgpack_object *r;
    if (!call_ok(c, q_id++, "stats", NULL, &r))
        return 0;
    *total = h_getu(r, "cache_total");
    const msgpack_object *cache = h_get(r, "cache");
    CHECKF(cache && cache->type == MSGPACK_OBJECT_ARRAY && cache->via.array.size == 1024,
           "the cache list holds stats-max-cache-entries rows (%d)",
           cache && cache->type == MSGPACK_OBJECT_ARRAY ? (int)cache->via.array.size : -1);
    return c->msg_len;
}

/* Programs of 64 branches x 32 buckets of cache rows: the answer does not
 * grow with them.  (The case once made 81,920 rows, 40 programs, to pass
 * 16 MiB; an answer of the same size at 10,240 and 20,480 rows says the
 * same at a quarter of the work.) */
static void big_case(void)
{
    h_section("20,480 cache rows: the stats answer does not grow with the cache");
    const char *args[] = {"--set", "max-parked-graphs-per-uid=0", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    char shm[64], code[32], msg[512];
    h_conn c;
    if (CHECK(q_shm(shm, sizeof shm, 1 << 20)) && CHECK(h_conn_open(&c, d.sock) == 0) &&
        hello(&c, 1)) {
        uint64_t b = q_register(&c, shm, 0, 64 << 10, code, sizeof code, msg, sizeof msg);
        shm_unlink(shm);   /* mapped by now; gone even if this test is killed */
        /* replays create the rows (EMPTY entries count as rows too): each
         * (branch, bucket) once, for 40 programs with 64 branches and 32
         * buckets would be 81,920 replays; rows of a program come from
         * gg_cache_get, which program.prepare calls for every bucket. */
        unsigned made = 0;
        size_t half_size = 0;
        uint64_t half_total = 0;
        for (int i = 0; i < 10 && b; i++) {
            if (i == 5) {
                half_size = stats_size(&c, &half_total);
                CHECK_EQ(half_total, made);
            }
            mp p;
            mp_init(&p);
            char name[64];
            snprintf(name, sizeof name, "program-with-a-long-enough-name-%02d", i);
            msgpack_pack_map(&p.pk, 4);
            q_str(&p.pk, "name");
            q_str(&p.pk, name);
            q_str(&p.pk, "buckets");
            msgpack_pack_array(&p.pk, 32);
            for (int k = 1; k <= 32; k++)
                msgpack_pack_int(&p.pk, k);
            q_str(&p.pk, "tensors");
            msgpack_pack_map(&p.pk, 2);
            for (int t = 0; t < 2; t++) {
                q_str(&p.pk, t ? "y" : "x");
                msgpack_pack_map(&p.pk, 4);
                proto_pack_kv_u64(&p.pk, "buffer", b);
                proto_pack_kv_u64(&p.pk, "offset", t ? 4096 : 0);
                proto_pack_kv_str(&p.pk, "dtype", "f32");
                q_str(&p.pk, "shape");
                msgpack_pack_array(&p.pk, 2);
                q_str(&p.pk, "batch");
                msgpack_pack_int(&p.pk, 4);
            }
            q_str(&p.pk, "branches");
            msgpack_pack_array(&p.pk, 64);
            for (int br = 0; br < 64; br++) {
                msgpack_pack_array(&p.pk, 1);
                msgpack_pack_map(&p.pk, 3);
                proto_pack_kv_str(&p.pk, "op", "copy");
                q_str(&p.pk, "inputs");
                msgpack_pack_array(&p.pk, 1);
                q_str(&p.pk, "x");
                q_str(&p.pk, "outputs");
                msgpack_pack_array(&p.pk, 1);
                q_str(&p.pk, "y");
            }
            const msgpack_object *r;
            uint64_t id = call_ok(&c, q_id++, "program.define", &p, &r) ? h_getu(r, "id") : 0;
            mp_free(&p);
            if (id && q_prepare(&c, id, 64))
                made += 64 * 32;
        }
        CHECK_EQ(made, 10 * 64 * 32);
        uint64_t total = 0;
        size_t size = stats_size(&c, &total);
        CHECK_EQ(total, made);
        /* twice the rows: the same answer but for the figures in it (the
         * rows listed are the most recently used, their names alike) */
        h_note("stats answer: %zu bytes at %llu cache rows, %zu at %llu", half_size,
               (unsigned long long)half_total, size, (unsigned long long)total);
        CHECKF(half_size > 0 && size > 0 && size < half_size + half_size / 16,
               "the answer at %llu rows (%zu bytes) is within 1/16 of the one at %llu (%zu bytes)",
               (unsigned long long)total, size, (unsigned long long)half_total, half_size);
        h_conn_close(&c);
    }
    h_daemon_stop(&d);
}

int main(void)
{
    h_init("test_stats_scope", 280);
    scope_case("a user sees its own uid's sessions and programs; root sees all", NULL, false);
    const char *admin[] = {"--set", "admin-group=nogroup", NULL};
    if (getgrnam("nogroup"))
        scope_case("admin-group: its members see all", admin, true);
    const char *admin_gid[] = {"--set", "admin-group=65534", NULL};
    scope_case("admin-group by number", admin_gid, true);
    cap_case();
    big_case();
    return h_finish();
}
