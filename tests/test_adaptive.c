/* SPDX-License-Identifier: MIT */
/* GFXGRAPH_REPLAY_MODE=adaptive against a real daemon (cpu backend), its
 * timings injected with adaptive-timing so the choice is known: an entry's
 * first replays alternate graph and eager, then it keeps the faster (stats:
 * choice, graph_us, eager_us); eager answers say why; it measures again
 * after adaptive-recheck replays (fast-path hits count); the choice is
 * remembered by the program's structure, so the same program defined again
 * (after a release, or by a client that reconnects) starts from it without
 * measuring; answers are right on either path; with measured timings a
 * choice is made (which one is the machine's business); standard mode
 * shows no choice. */
#include <math.h>
#include <stdlib.h>

#include "test_client_util.h"

#ifndef GG_CTL_PATH
#error "GG_CTL_PATH must name the gfxgraphctl binary"
#endif

enum { D = 64, ROWS = 4 };

static int salt;

static bool replay_ok(gg_client *c, uint64_t p, tbuf *x, tbuf *y, int batch,
                      gg_replay_result *r)
{
    salt++;
    for (int i = 0; i < ROWS * D; i++)
        x->f[i] = (float)((i * 5 + salt * 3) % 19) / 4.0f - 2.0f;
    tbuf_fill(y, NAN);
    if (!CHECKF(gg_client_replay(c, p, batch, -1, r) == 0, "replay batch %d: %s", batch,
                gg_client_last_error(c)))
        return false;
    int bad = 0;
    for (int i = 0; i < batch * D; i++)
        bad += !t_close(y->f[i], t_silu2x_ref(x->f[i]), 1e-5);
    return CHECKF(bad == 0, "batch %d (%s): %d wrong values", batch,
                  r->path == GG_PATH_GRAPH ? "graph" : "eager", bad);
}

static const char *row_str(const msgpack_object *row, const char *key, char *buf, size_t len)
{
    buf[0] = '\0';
    return row ? h_gets(row, key, buf, len) : buf;
}

/* The stats row of (p, branch 0, bucket), checked for its choice. */
static bool row_is(gg_client *w, uint64_t p, int bucket, const char *choice, const char *from)
{
    const msgpack_object *st = t_stats(w);
    const msgpack_object *row = st ? t_entry(st, p, 0, bucket) : NULL;
    char c[32], f[32];
    row_str(row, "choice", c, sizeof c);
    row_str(row, "choice_from", f, sizeof f);
    return CHECKF(row && strcmp(c, choice) == 0 && (!from || strcmp(f, from) == 0),
                  "program %llu bucket %d: choice '%s' from '%s', expected '%s' from '%s'",
                  (unsigned long long)p, bucket, c, f, choice, from ? from : "any");
}

static void eager_wins_case(void)
{
    h_section("eager timed faster: measured, kept, re-checked, remembered");
    const char *args[] = {"--set", "replay-mode=adaptive", "--set", "adaptive-timing=50,10",
                          "--set", "adaptive-samples=3", "--set", "adaptive-recheck=30", NULL};
    h_daemon d;
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    gg_client *w = gg_client_new(), *a = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t p = 0;
    CHECK(gg_client_connect(w, d.sock, "watcher") == 0);
    if (!CHECK(gg_client_connect(a, d.sock, "first") == 0) || !tbuf_new(a, &x, ROWS * D) ||
        !tbuf_new(a, &y, ROWS * D) || !(p = t_define_silu2x(a, "adapt", x.id, y.id, D)))
        goto out;
    gg_replay_result r;
    /* 3 samples and a warm-up of each path, alternating from the graph */
    for (int i = 0; i < 8; i++)
        if (replay_ok(a, p, &x, &y, 2, &r)) {
            CHECKF(r.path == (i % 2 ? GG_PATH_EAGER : GG_PATH_GRAPH), "measuring replay %d: %s",
                   i, r.path == GG_PATH_GRAPH ? "graph" : "eager");
            CHECK(!r.fallback);
            if (i % 2)
                CHECK_CONTAINS(r.reason, "adaptive: timing eager runs");
            if (i < 7)
                row_is(w, p, 2, "measuring", "measured");
        }
    const msgpack_object *st = t_stats(w);
    const msgpack_object *row = st ? t_entry(st, p, 0, 2) : NULL;
    if (CHECK(row != NULL)) {
        char c[32];
        CHECK_STR(row_str(row, "choice", c, sizeof c), "eager");
        CHECK_STR(row_str(row, "choice_from", c, sizeof c), "measured");
        CHECK(h_getf(row, "graph_us") == 50.0);
        CHECK(h_getf(row, "eager_us") == 10.0);
        CHECK_EQ(h_getu(row, "decisions"), 1);
        CHECK_EQ(h_getu(row, "replays"), 4);   /* graph replays */
    }
    for (int i = 0; i < 5; i++)
        if (replay_ok(a, p, &x, &y, 2, &r)) {
            CHECK(r.path == GG_PATH_EAGER && !r.fallback);
            CHECK_CONTAINS(r.reason, "adaptive: eager runs measured faster (10.0 us against "
                                     "50.0 us for the graph)");
        }
    /* gfxgraphctl shows the choice and both timings */
    const char *argv[] = {GG_CTL_PATH, "--socket", d.sock, "cache", NULL};
    char *out = NULL, *err = NULL;
    if (CHECK(h_run(argv, NULL, NULL, &out, &err, 60000) == 0)) {
        CHECK_CONTAINS(out, "CHOICE");
        CHECK_CONTAINS(out, "GRAPH_US");
        const char *row = out ? strstr(out, "  adapt ") : NULL;
        CHECKF(row && strstr(row, " eager ") && strstr(row, " measured ") &&
                   strstr(row, " 50.0 ") && strstr(row, " 10.0 "),
               "the row shows eager, measured, 50.0 and 10.0: %s", out ? out : "");
    }
    free(out);
    free(err);
    /* another bucket measures on its own */
    if (replay_ok(a, p, &x, &y, 3, &r))
        CHECK(r.path == GG_PATH_GRAPH);
    row_is(w, p, 4, "measuring", NULL);
    st = t_stats(w);
    if (st) {
        CHECK_EQ(h_getu(st, "fallback_count"), 0);
        row = t_entry(st, p, 0, 1);
        CHECK(row == NULL);   /* bucket 1 never used */
    }

    h_section("after adaptive-recheck replays it measures again");
    for (int i = 0; i < 25; i++)
        if (replay_ok(a, p, &x, &y, 2, &r))
            CHECK(r.path == GG_PATH_EAGER);
    row_is(w, p, 2, "measuring", "measured");
    for (int i = 0; i < 8; i++)
        if (replay_ok(a, p, &x, &y, 2, &r))
            CHECKF(r.path == (i % 2 ? GG_PATH_EAGER : GG_PATH_GRAPH), "re-measuring replay %d", i);
    st = t_stats(w);
    row = st ? t_entry(st, p, 0, 2) : NULL;
    if (CHECK(row != NULL)) {
        CHECK_EQ(h_getu(row, "decisions"), 2);
        row_is(w, p, 2, "eager", "measured");
    }

    h_section("the same program defined again starts from the choice");
    uint64_t cap0 = t_stat(w, "capture_count");
    CHECK(gg_client_program_release(a, p) == 0);
    uint64_t p2 = t_define_silu2x(a, "adapt", x.id, y.id, D);
    if (p2 && replay_ok(a, p2, &x, &y, 2, &r)) {
        CHECK(r.path == GG_PATH_EAGER && !r.fallback && !r.captured);
        CHECK_CONTAINS(r.reason, "remembered for this program");
        row_is(w, p2, 2, "eager", "signature");
        st = t_stats(w);
        row = st ? t_entry(st, p2, 0, 2) : NULL;
        if (row) {
            CHECK(h_getf(row, "graph_us") == 50.0 && h_getf(row, "eager_us") == 10.0);
            CHECK_EQ(h_getu(row, "captures"), 0);
            CHECK_EQ(h_getu(row, "decisions"), 0);
        }
        CHECK_EQ(t_stat(w, "capture_count"), cap0);
        /* bucket 4 never decided: it measures */
        if (replay_ok(a, p2, &x, &y, 4, &r))
            CHECK(r.path == GG_PATH_GRAPH && r.captured);
        row_is(w, p2, 4, "measuring", "measured");
    }
    /* a program of another structure remembers nothing */
    gg_program_def *pd = gg_program_def_new("adapt");
    int64_t s[2] = {GG_BATCH, D};
    static const int bk[] = {1, 2, 4};
    gg_program_def_buckets(pd, 3, bk);
    gg_program_def_tensor(pd, "x", x.id, 0, "f32", 2, s);
    gg_program_def_tensor(pd, "y", y.id, 0, "f32", 2, s);
    gg_program_def_op(pd, "silu", "x", "y");
    uint64_t p3 = 0;
    if (CHECK(gg_client_program_define(a, pd, &p3) == 0) &&
        CHECK(gg_client_replay(a, p3, 2, -1, &r) == 0)) {
        CHECK(r.path == GG_PATH_GRAPH);
        row_is(w, p3, 2, "measuring", "measured");
        gg_client_program_release(a, p3);
    }
    gg_program_def_free(pd);

    h_section("a client that reconnects gets the choice without measuring");
    gg_client_close(a);   /* p2 not released */
    a = NULL;
    for (int i = 0; i < 6000 && t_stat(w, "sessions_active") != 1; i++)   /* up to 60 s */
        h_sleep_ms(10);
    gg_client *b = gg_client_new();
    tbuf bx, by;
    memset(&bx, 0, sizeof bx);
    memset(&by, 0, sizeof by);
    uint64_t pb = 0;
    if (CHECK(gg_client_connect(b, d.sock, "second") == 0) && tbuf_new(b, &bx, ROWS * D) &&
        tbuf_new(b, &by, ROWS * D) && (pb = t_define_silu2x(b, "adapt", bx.id, by.id, D))) {
        for (int i = 0; i < 3; i++)
            if (replay_ok(b, pb, &bx, &by, 2, &r))
                CHECK(r.path == GG_PATH_EAGER && !r.captured);
        row_is(w, pb, 2, "eager", "signature");
        st = t_stats(w);
        row = st ? t_entry(st, pb, 0, 2) : NULL;
        if (row)
            CHECK_EQ(h_getu(row, "captures"), 0);
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

static void graph_wins_case(void)
{
    h_section("graph timed faster: kept, hits (fast path) count towards the re-check");
    const char *args[] = {"--set", "replay-mode=adaptive", "--set", "adaptive-timing=10,50",
                          "--set", "adaptive-samples=2", "--set", "adaptive-recheck=10", NULL};
    h_daemon d;
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    gg_client *a = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t p = 0;
    if (CHECK(gg_client_connect(a, d.sock, "graphs") == 0) && tbuf_new(a, &x, ROWS * D) &&
        tbuf_new(a, &y, ROWS * D) && (p = t_define_silu2x(a, "adaptg", x.id, y.id, D))) {
        gg_replay_result r;
        for (int i = 0; i < 6; i++)
            replay_ok(a, p, &x, &y, 1, &r);
        row_is(a, p, 1, "graph", "measured");
        uint64_t fp0 = t_stat(a, "fastpath_replays");
        /* 10 replays on the choice, the 11th starts a round with a graph
         * run and the 12th is eager */
        int eager_at = -1;
        for (int i = 0; i < 12; i++)
            if (replay_ok(a, p, &x, &y, 1, &r) && r.path == GG_PATH_EAGER && eager_at < 0)
                eager_at = i;
        CHECKF(eager_at == 11, "the re-check's first eager run is replay 12 (got %d)",
               eager_at + 1);
        h_note("fast-path replays in this stretch: %llu",
               (unsigned long long)(t_stat(a, "fastpath_replays") - fp0));
        const msgpack_object *st = t_stats(a);
        if (st)
            CHECK_EQ(h_getu(st, "eager_count"), 3 + 1);
    }
    gg_client_close(a);
    tbuf_free(&x);
    tbuf_free(&y);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

static void measured_case(void)
{
    h_section("measured timings: a choice is made, both timings shown");
    const char *args[] = {"--set", "replay-mode=adaptive", "--set", "adaptive-samples=2", NULL};
    h_daemon d;
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    gg_client *a = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t p = 0;
    if (CHECK(gg_client_connect(a, d.sock, "measured") == 0) && tbuf_new(a, &x, ROWS * D) &&
        tbuf_new(a, &y, ROWS * D) && (p = t_define_silu2x(a, "adaptm", x.id, y.id, D))) {
        gg_replay_result r;
        for (int i = 0; i < 10; i++)
            replay_ok(a, p, &x, &y, 4, &r);
        const msgpack_object *st = t_stats(a);
        const msgpack_object *row = st ? t_entry(st, p, 0, 4) : NULL;
        if (CHECK(row != NULL)) {
            char c[32];
            row_str(row, "choice", c, sizeof c);
            CHECKF(strcmp(c, "graph") == 0 || strcmp(c, "eager") == 0, "choice '%s'", c);
            CHECK(h_getf(row, "graph_us") > 0 && h_getf(row, "eager_us") > 0);
            h_note("cpu backend, bucket 4: graph %.1f us, eager %.1f us: %s",
                   h_getf(row, "graph_us"), h_getf(row, "eager_us"), c);
        }
    }
    gg_client_close(a);
    tbuf_free(&x);
    tbuf_free(&y);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* A program released while its replays are still queued: each queued
 * replay still runs (the library sends the release after the daemon has
 * taken every submission), and the last job's end frees the entry it
 * measured, which must be the last thing it does with it (the daemon stays
 * up and answers; the sanitizer build catches a use after free). */
static void release_queued_case(void)
{
    h_section("a program released with its timed replays queued");
    const char *args[] = {"--set", "replay-mode=adaptive", "--set", "adaptive-samples=3",
                          "--set", "adaptive-recheck=4", NULL};
    h_daemon d;
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    gg_client *a = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t p = 0;
    if (CHECK(gg_client_connect(a, d.sock, "release-queued") == 0) &&
        tbuf_new(a, &x, ROWS * D) && tbuf_new(a, &y, ROWS * D)) {
        for (int round = 0; round < 6; round++) {
            if (!(p = t_define_silu2x(a, "adaptr", x.id, y.id, D)))
                break;
            uint64_t t[8];
            int n = 0;
            for (int i = 0; i < 8; i++)
                if (gg_client_submit(a, p, 1 + (i + round) % 4, 0, NULL, &t[n]) == 0)
                    n++;
            CHECKF(n == 8, "round %d: 8 replays submitted (%d)", round, n);
            CHECKF(gg_client_program_release(a, p) == 0, "round %d: release: %s", round,
                   gg_client_last_error(a));
            int ok = 0;
            for (int i = 0; i < n; i++) {
                gg_replay_result r;
                int wr = gg_client_wait(a, t[i], &r);
                if (!CHECKF(wr == 0, "round %d: replay %d: %s", round, i,
                            gg_client_last_error(a)))
                    break;
                ok++;
            }
            CHECKF(ok == n, "round %d: every queued replay answered (%d of %d)", round, ok, n);
        }
        /* still serving */
        uint64_t q = t_define_silu2x(a, "after", x.id, y.id, D);
        gg_replay_result r;
        if (CHECK(q != 0))
            replay_ok(a, q, &x, &y, 3, &r);
    }
    gg_client_close(a);
    tbuf_free(&x);
    tbuf_free(&y);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

static void standard_case(void)
{
    h_section("replay-mode standard: always the graph, no choice in stats");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    gg_client *a = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t p = 0;
    if (CHECK(gg_client_connect(a, d.sock, "standard") == 0) && tbuf_new(a, &x, ROWS * D) &&
        tbuf_new(a, &y, ROWS * D) && (p = t_define_silu2x(a, "std", x.id, y.id, D))) {
        gg_replay_result r;
        for (int i = 0; i < 4; i++)
            if (replay_ok(a, p, &x, &y, 2, &r))
                CHECK(r.path == GG_PATH_GRAPH);
        const msgpack_object *st = t_stats(a);
        const msgpack_object *row = st ? t_entry(st, p, 0, 2) : NULL;
        if (CHECK(row != NULL))
            CHECK(h_get(row, "choice") == NULL && h_get(row, "graph_us") == NULL);
    }
    gg_client_close(a);
    tbuf_free(&x);
    tbuf_free(&y);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

int main(void)
{
    h_init("test_adaptive", 300);
    eager_wins_case();
    graph_wins_case();
    measured_case();
    release_queued_case();
    standard_case();
    return h_finish();
}
