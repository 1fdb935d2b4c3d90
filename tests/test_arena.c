/* SPDX-License-Identifier: MIT */
/* One scratch arena per program: a program with the default 13 buckets and
 * two branches holds one block of scratch sized for its largest bucket
 * (stats: scratch_bytes, scratch_arenas), allocated on first use, shared by
 * every (branch, bucket) graph and eager run, with the right answers when
 * replays move between buckets and branches; a run above the largest bucket
 * gets its own block; a parked program keeps its arena, a client that
 * adopts the graphs takes it over (no second arena), and it goes when the
 * last graph or program using it goes; validation (graph then eager on the
 * same arena) agrees; the parked-bytes quota counts the arena once. */
#include <math.h>
#include <stdlib.h>

#include "test_client_util.h"

enum { D = 256, ROWS = 300, TOP = 256 };

/* The arena: two [batch, D] f32 scratch tensors at the largest bucket. */
#define ARENA_BYTES ((uint64_t)2 * TOP * D * 4)

/* y = silu(x) * 2 + x (branch 0) or y = 3x + x (branch 1), both through
 * two scratch tensors; default buckets. */
static uint64_t define_two_branches(gg_client *c, const char *name, uint64_t x, uint64_t y)
{
    gg_program_def *p = gg_program_def_new(name);
    int64_t s[2] = {GG_BATCH, D};
    gg_program_def_tensor(p, "x", x, 0, "f32", 2, s);
    gg_program_def_tensor(p, "y", y, 0, "f32", 2, s);
    gg_program_def_scratch(p, "a", "f32", 2, s);
    gg_program_def_scratch(p, "b", "f32", 2, s);
    gg_program_def_op(p, "silu", "x", "a");
    gg_program_def_op(p, "scale", "a", "b");
    gg_program_def_attr_f(p, "scale", 2.0);
    gg_program_def_op(p, "add", "b, x", "y");
    gg_program_def_branch(p);
    gg_program_def_op(p, "scale", "x", "a");
    gg_program_def_attr_f(p, "scale", 3.0);
    gg_program_def_op(p, "copy", "a", "b");
    gg_program_def_op(p, "add", "b, x", "y");
    uint64_t prog = 0;
    if (!CHECKF(gg_client_program_define(c, p, &prog) == 0, "define %s: %s", name,
                gg_client_last_error(c)))
        prog = 0;
    gg_program_def_free(p);
    return prog;
}

static double want(int branch, double v)
{
    return branch ? 4.0 * v : t_silu2x_ref(v);
}

static void fill(tbuf *x, tbuf *y, int salt)
{
    for (int i = 0; i < ROWS * D; i++)
        x->f[i] = (float)((i * 7 + salt * 13) % 23) / 5.0f - 2.0f;
    tbuf_fill(y, NAN);
}

static int wrong_rows(const tbuf *x, const tbuf *y, int branch, int batch)
{
    int bad = 0;
    for (int i = 0; i < batch * D; i++)
        bad += !t_close(y->f[i], want(branch, x->f[i]), 1e-5);
    return bad;
}

/* Replay (program, batch, branch) on fresh inputs and check every real row. */
static bool run_check(gg_client *c, uint64_t prog, tbuf *x, tbuf *y, int batch, int branch,
                      int salt, gg_replay_result *r)
{
    fill(x, y, salt);
    if (!CHECKF(gg_client_replay(c, prog, batch, branch, r) == 0, "replay batch %d branch %d: %s",
                batch, branch, gg_client_last_error(c)))
        return false;
    int bad = wrong_rows(x, y, branch, batch);
    return CHECKF(bad == 0, "batch %d branch %d (bucket %d, %s): %d wrong values", batch, branch,
                  r->bucket, r->path == GG_PATH_GRAPH ? "graph" : "eager", bad);
}

static int parked_rows(const msgpack_object *st)
{
    const msgpack_object *cache = h_get(st, "cache");
    int n = 0;
    for (uint32_t i = 0; cache && i < cache->via.array.size; i++) {
        const msgpack_object *pk = h_get(&cache->via.array.ptr[i], "parked");
        n += pk && pk->type == MSGPACK_OBJECT_BOOLEAN && pk->via.boolean;
    }
    return n;
}

/* Wait (up to 60 s) until stats key reaches v (the loop applies releases as
 * it goes). */
static bool wait_stat(gg_client *w, const char *key, uint64_t v)
{
    uint64_t got = UINT64_MAX;
    for (int i = 0; i < 6000 && (got = t_stat(w, key)) != v; i++)
        h_sleep_ms(10);
    return CHECKF(got == v, "%s: %llu, expected %llu", key, (unsigned long long)got,
                  (unsigned long long)v);
}

static const int batches[] = {256, 1, 100, 3, 200, 17, 256, 2, 64, 5, 129, 1};

static void shared_case(void)
{
    h_section("13 buckets x 2 branches share one arena sized for bucket 256");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    gg_client *w = gg_client_new(), *a = gg_client_new();
    tbuf x, y;
    uint64_t p = 0;
    CHECK(gg_client_connect(w, d.sock, "watcher") == 0);
    if (!CHECK(gg_client_connect(a, d.sock, "first") == 0) || !tbuf_new(a, &x, ROWS * D) ||
        !tbuf_new(a, &y, ROWS * D) || !(p = define_two_branches(a, "arena13", x.id, y.id)))
        goto out;
    CHECK_EQ(t_stat(w, "scratch_arenas"), 0);   /* allocated on first use */
    CHECK_EQ(t_stat(w, "scratch_bytes"), 0);
    int ready = 0, failed = 0;
    CHECK(gg_client_program_prepare(a, p, 0, NULL, -1, &ready, &failed) == 0);
    CHECK_EQ(ready, 26);
    CHECK_EQ(failed, 0);
    const msgpack_object *st = t_stats(w);
    if (st) {
        CHECK_EQ(h_getu(st, "graphs_cached"), 26);
        CHECK_EQ(h_getu(st, "scratch_arenas"), 1);
        /* one entry each before: sum over the 13 buckets of 2 KiB a row,
         * for each branch, was 3567616 bytes */
        CHECK_EQ(h_getu(st, "scratch_bytes"), ARENA_BYTES);
        CHECK(h_getu(st, "cache_bytes") >= ARENA_BYTES);
        h_note("13 buckets x 2 branches: scratch %llu bytes (one entry each: %llu)",
               (unsigned long long)h_getu(st, "scratch_bytes"),
               (unsigned long long)(2ull * 871 * 2 * D * 4));
    }

    h_section("replays moving between buckets and branches are right");
    gg_replay_result r;
    int salt = 0;
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
        for (int br = 0; br < 2; br++) {
            if (run_check(a, p, &x, &y, batches[i], br, ++salt, &r))
                CHECKF(r.path == GG_PATH_GRAPH && !r.fallback, "batch %d: graph (%s)",
                       batches[i], r.reason);
        }

    h_section("above the largest bucket: a block of its own, freed after");
    if (run_check(a, p, &x, &y, ROWS, 1, ++salt, &r)) {
        CHECK(r.path == GG_PATH_EAGER && r.bucket == 0);
        CHECK_CONTAINS(r.reason, "above the largest bucket");
    }
    CHECK(run_check(a, p, &x, &y, 8, 0, ++salt, &r));
    st = t_stats(w);
    if (st) {
        CHECK_EQ(h_getu(st, "scratch_arenas"), 1);
        CHECK_EQ(h_getu(st, "scratch_bytes"), ARENA_BYTES);
        CHECK_EQ(h_getu(st, "fallback_count"), 0);
    }

    h_section("a second program has an arena of its own; release frees it");
    uint64_t q = define_two_branches(a, "other", x.id, y.id);
    if (q && run_check(a, q, &x, &y, 4, 1, ++salt, &r)) {
        CHECK_EQ(t_stat(w, "scratch_arenas"), 2);
        CHECK_EQ(t_stat(w, "scratch_bytes"), 2 * ARENA_BYTES);
        CHECK(gg_client_program_release(a, q) == 0);
        wait_stat(w, "scratch_arenas", 1);
        CHECK_EQ(t_stat(w, "scratch_bytes"), ARENA_BYTES);
    }
    CHECK(run_check(a, p, &x, &y, 4, 1, ++salt, &r));

    h_section("parked: the arena stays with the graphs");
    gg_client_close(a);   /* without release: parked */
    a = NULL;
    int parked = 0;
    for (int i = 0; i < 6000 && parked < 26; i++) {
        st = t_stats(w);
        parked = st ? parked_rows(st) : 0;
        if (parked < 26)
            h_sleep_ms(10);
    }
    CHECK_EQ(parked, 26);
    CHECK_EQ(t_stat(w, "scratch_arenas"), 1);
    CHECK_EQ(t_stat(w, "scratch_bytes"), ARENA_BYTES);

    h_section("a new client adopts the graphs and their arena");
    gg_client *b = gg_client_new();
    tbuf bx, by;
    memset(&bx, 0, sizeof bx);
    memset(&by, 0, sizeof by);
    uint64_t pb = 0;
    if (CHECK(gg_client_connect(b, d.sock, "second") == 0) && tbuf_new(b, &bx, ROWS * D) &&
        tbuf_new(b, &by, ROWS * D) && (pb = define_two_branches(b, "arena13", bx.id, by.id))) {
        st = t_stats(w);
        if (st) {
            CHECK_EQ(parked_rows(st), 0);
            CHECK_EQ(t_entries_of(st, pb), 26);
            CHECK_EQ(h_getu(st, "scratch_arenas"), 1);
        }
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
            for (int br = 0; br < 2; br++)
                if (run_check(b, pb, &bx, &by, batches[i], br, ++salt, &r))
                    CHECK(r.path == GG_PATH_GRAPH);
        st = t_stats(w);
        if (st) {
            CHECK_EQ(h_getu(st, "scratch_arenas"), 1);
            CHECK_EQ(h_getu(st, "scratch_bytes"), ARENA_BYTES);
            CHECK(h_getu(st, "exec_updates") > 0);
            CHECK_EQ(h_getu(st, "fallback_count"), 0);
        }
        CHECK(gg_client_program_release(b, pb) == 0);
        wait_stat(w, "scratch_arenas", 0);
        CHECK_EQ(t_stat(w, "scratch_bytes"), 0);
        CHECK_EQ(t_stat(w, "graphs_cached"), 0);
    }
    gg_client_close(b);
    tbuf_free(&bx);
    tbuf_free(&by);
out:
    if (a)
        gg_client_close(a);
    gg_client_close(w);
    tbuf_free(&x);
    tbuf_free(&y);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

static void validate_case(void)
{
    h_section("GFXGRAPH=validate: graph and eager runs on one arena agree");
    const char *env[] = {"GFXGRAPH=validate", NULL};
    h_daemon d;
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    gg_client *a = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t p = 0;
    if (CHECK(gg_client_connect(a, d.sock, "validate") == 0) && tbuf_new(a, &x, ROWS * D) &&
        tbuf_new(a, &y, ROWS * D) && (p = define_two_branches(a, "arena13v", x.id, y.id))) {
        gg_replay_result r;
        int salt = 0;
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
            for (int br = 0; br < 2; br++)
                if (run_check(a, p, &x, &y, batches[i], br, ++salt, &r))
                    CHECKF(r.path == GG_PATH_GRAPH, "validated (%s)", r.reason);
        const msgpack_object *st = t_stats(a);
        if (st) {
            CHECK(h_getu(st, "validations") >= 2 * 12);
            CHECK_EQ(h_getu(st, "validation_failures"), 0);
            CHECK_EQ(h_getu(st, "scratch_arenas"), 1);
        }
    }
    gg_client_close(a);
    tbuf_free(&x);
    tbuf_free(&y);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* The parked record's bytes are its graphs' footprints and its arena once:
 * a quota below the arena parks nothing; graphs dropped idle free it. */
static void parked_limits_case(void)
{
    static const char *const quota[] = {"--set", "max-parked-bytes-per-uid=400K", NULL};
    static const char *const idle[] = {"--set", "cache-idle-s=1", NULL};
    for (int k = 0; k < 2; k++) {
        h_section(k ? "parked graphs evicted when idle: the arena goes with the last"
                    : "max-parked-bytes-per-uid counts the arena");
        h_daemon d;
        if (h_daemon_start(&d, k ? idle : quota, NULL) < 0)
            return;
        gg_client *w = gg_client_new(), *a = gg_client_new();
        tbuf x, y;
        memset(&x, 0, sizeof x);
        memset(&y, 0, sizeof y);
        uint64_t p = 0;
        CHECK(gg_client_connect(w, d.sock, "watcher") == 0);
        if (CHECK(gg_client_connect(a, d.sock, "parks") == 0) && tbuf_new(a, &x, ROWS * D) &&
            tbuf_new(a, &y, ROWS * D) && (p = define_two_branches(a, "arena13p", x.id, y.id))) {
            gg_replay_result r;
            CHECK(run_check(a, p, &x, &y, 2, 0, 1, &r) && r.path == GG_PATH_GRAPH);
            CHECK_EQ(t_stat(w, "scratch_arenas"), 1);
            gg_client_close(a);
            a = NULL;
            CHECK(wait_stat(w, "sessions_active", 1));
            if (k == 0) {
                /* the session ends (and parks) once its connection and
                 * fast-path region have gone: after sessions_active drops */
                char *log = NULL;
                for (int i = 0; i < 6000; i++) {
                    free(log);
                    log = h_read_file(d.log);
                    if (log && strstr(log, "max-parked-bytes-per-uid"))
                        break;
                    h_sleep_ms(10);
                }
                CHECK_CONTAINS(log, "max-parked-bytes-per-uid");
                free(log);
                const msgpack_object *st = t_stats(w);
                if (st)
                    CHECK_EQ(parked_rows(st), 0);
            }
            /* the idle sweep runs every second */
            for (int i = 0; i < 6000 && t_stat(w, "scratch_arenas") != 0; i++)
                h_sleep_ms(10);
            CHECK_EQ(t_stat(w, "scratch_arenas"), 0);
            CHECK_EQ(t_stat(w, "scratch_bytes"), 0);
        }
        if (a)
            gg_client_close(a);
        gg_client_close(w);
        tbuf_free(&x);
        tbuf_free(&y);
        CHECK_EQ(h_daemon_stop(&d), 0);
    }
}

int main(void)
{
    h_init("test_arena", 300);
    shared_case();
    validate_case();
    parked_limits_case();
    return h_finish();
}
