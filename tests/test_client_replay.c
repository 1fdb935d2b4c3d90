/* SPDX-License-Identifier: MIT */
/* The client library against a real daemon: register, define, replay with
 * the numbers checked against a double-precision reference computed here;
 * buckets and padding rows; batches above the largest bucket; the graph
 * cache as stats shows it (prepare, branches, LRU and idle eviction); and
 * the GFXGRAPH=0 / GFXGRAPH=validate modes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_client_util.h"

#define K 8          /* linear in */
#define N 4          /* linear out */
#define ROWS 16      /* rows the buffers hold */
#define SENTINEL 12345.0f
#define EPS 1e-5

/* y = rmsnorm(0.5 * linear(x, w, b) + r, g) */
typedef struct {
    tbuf x, w, b, r, g, y;
    uint64_t prog;
    float xs[ROWS * K], rs[ROWS * N];   /* the inputs; copied in before each replay */
} model;

static bool model_buffers(gg_client *c, model *m, int seed)
{
    memset(m, 0, sizeof *m);
    if (!tbuf_new(c, &m->x, ROWS * K) || !tbuf_new(c, &m->w, N * K) || !tbuf_new(c, &m->b, N) ||
        !tbuf_new(c, &m->r, ROWS * N) || !tbuf_new(c, &m->g, N) || !tbuf_new(c, &m->y, ROWS * N))
        return false;
    for (int i = 0; i < ROWS; i++)
        for (int k = 0; k < K; k++)
            m->xs[i * K + k] = (float)((i * 7 + k * 3 + seed) % 11) - 5.0f;
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++)
            m->w.f[n * K + k] = (float)((n * 5 + k + seed) % 7) - 3.0f;
        m->b.f[n] = (float)n - 1.5f;
        m->g.f[n] = 1.0f + 0.5f * (float)n;
    }
    for (int i = 0; i < ROWS; i++)
        for (int n = 0; n < N; n++)
            m->rs[i * N + n] = 0.25f * (float)(i - n + seed);
    return true;
}

static void model_free(model *m)
{
    tbuf_free(&m->x);
    tbuf_free(&m->w);
    tbuf_free(&m->b);
    tbuf_free(&m->r);
    tbuf_free(&m->g);
    tbuf_free(&m->y);
}

static int model_define(gg_client *c, model *m, const char *name, int nb, const int *buckets)
{
    gg_program_def *d = gg_program_def_new(name);
    int64_t xs[2] = {GG_BATCH, K}, ws[2] = {N, K}, vs[1] = {N}, ys[2] = {GG_BATCH, N};
    if (nb)
        gg_program_def_buckets(d, nb, buckets);
    gg_program_def_tensor(d, "x", m->x.id, 0, "f32", 2, xs);
    gg_program_def_tensor(d, "w", m->w.id, 0, "f32", 2, ws);
    gg_program_def_tensor(d, "b", m->b.id, 0, "f32", 1, vs);
    gg_program_def_tensor(d, "r", m->r.id, 0, "f32", 2, ys);
    gg_program_def_tensor(d, "g", m->g.id, 0, "f32", 1, vs);
    gg_program_def_tensor(d, "y", m->y.id, 0, "f32", 2, ys);
    gg_program_def_scratch(d, "h", "f32", 2, ys);
    gg_program_def_scratch(d, "s", "f32", 2, ys);
    gg_program_def_scratch(d, "t", "f32", 2, ys);
    gg_program_def_op(d, "linear", "x, w, b", "h");
    gg_program_def_op(d, "scale", "h", "s");
    gg_program_def_attr_f(d, "scale", 0.5);
    gg_program_def_op(d, "add", "s, r", "t");
    gg_program_def_op(d, "rmsnorm", "t, g", "y");
    gg_program_def_attr_f(d, "eps", EPS);
    int rc = gg_client_program_define(c, d, &m->prog);
    CHECKF(rc == 0, "define %s: %s", name, gg_client_last_error(c));
    gg_program_def_free(d);
    return rc;
}

static void model_expect(const model *m, int row, double out[N])
{
    double t[N], ss = 0;
    for (int n = 0; n < N; n++) {
        double h = m->b.f[n];
        for (int k = 0; k < K; k++)
            h += (double)m->x.f[row * K + k] * m->w.f[n * K + k];
        t[n] = 0.5 * h + m->r.f[row * N + n];
        ss += t[n] * t[n];
    }
    double inv = 1.0 / sqrt(ss / N + EPS);
    for (int n = 0; n < N; n++)
        out[n] = t[n] * inv * m->g.f[n];
}

/* Poison what must not matter (input rows >= batch) and what must not be
 * touched (output rows >= batch). */
static void model_poison(model *m, int batch)
{
    memcpy(m->x.f, m->xs, sizeof m->xs);
    memcpy(m->r.f, m->rs, sizeof m->rs);
    for (int i = batch; i < ROWS; i++) {
        for (int k = 0; k < K; k++)
            m->x.f[i * K + k] = NAN;
        for (int n = 0; n < N; n++) {
            m->r.f[i * N + n] = NAN;
            m->y.f[i * N + n] = SENTINEL;
        }
    }
    for (int i = 0; i < batch; i++)
        for (int n = 0; n < N; n++)
            m->y.f[i * N + n] = -999.0f;
}

/* Wrong real rows; and output rows in [from, ROWS) that changed. */
static int model_wrong(const model *m, int batch, int untouched_from, int *touched)
{
    int bad = 0;
    for (int i = 0; i < batch; i++) {
        double want[N];
        model_expect(m, i, want);
        for (int n = 0; n < N; n++)
            if (!t_close(m->y.f[i * N + n], want[n], 1e-5)) {
                if (bad < 3)
                    printf("   row %d col %d: got %.7g want %.7g\n", i, n, m->y.f[i * N + n],
                           want[n]);
                bad++;
            }
    }
    *touched = 0;
    for (int i = untouched_from; i < ROWS; i++)
        for (int n = 0; n < N; n++)
            *touched += m->y.f[i * N + n] != SENTINEL;
    return bad;
}

/* Replay and check the numbers; the result in *res. */
static bool model_replay(gg_client *c, model *m, int batch, gg_replay_result *res)
{
    model_poison(m, batch);
    int rc = gg_client_replay(c, m->prog, batch, -1, res);
    if (!CHECKF(rc == 0, "replay batch %d: %s", batch, gg_client_last_error(c)))
        return false;
    int touched;
    int from = res->bucket > 0 ? res->bucket : batch;
    int bad = model_wrong(m, batch, from, &touched);
    CHECKF(bad == 0, "batch %d: real rows right (%d wrong)", batch, bad);
    CHECKF(touched == 0, "batch %d: output rows from %d on untouched (%d changed)", batch, from,
           touched);
    return bad == 0 && touched == 0;
}

/* ---- round trip, buckets, oversize --------------------------------------- */

static void test_round_trip(const h_daemon *d)
{
    h_section("round trip and buckets");
    gg_client *c = t_connect(d, "replay-test");
    if (!c)
        return;
    CHECK_STR(gg_client_backend(c), "cpu");
    CHECK(gg_client_session_id(c) > 0);
    CHECK_EQ(gg_client_max_batch(c), 65536);
    model m;
    static const int buckets[] = {1, 2, 4, 8};
    if (model_buffers(c, &m, 0) && model_define(c, &m, "model", 4, buckets) == 0) {
        gg_replay_result res;
        /* batch 3 runs at bucket 4; the first replay captures */
        if (model_replay(c, &m, 3, &res)) {
            CHECK(res.path == GG_PATH_GRAPH);
            CHECK_EQ(res.bucket, 4);
            CHECK_EQ(res.batch, 3);
            CHECK_EQ(res.branch, 0);
            CHECK(res.captured);
            CHECK(!res.fallback);
            /* the device time answered is the one the daemon counted: this
             * session's only replay so far */
            uint64_t n = 0;
            double sum = -1;
            CHECK(t_session_replays(c, 1, &n, &sum));
            CHECKF(n == 1 && sum == res.device_us, "device_us %.1f is the session's replay time "
                   "in stats (%llu replays, %.1f us)", res.device_us, (unsigned long long)n, sum);
        }
        if (model_replay(c, &m, 3, &res)) {
            CHECK(res.path == GG_PATH_GRAPH);
            CHECK(!res.captured);
            CHECK_EQ(res.bucket, 4);
        }
        /* batch 4 reuses the same graph; 1 and 5 have their own buckets */
        if (model_replay(c, &m, 4, &res))
            CHECK(res.bucket == 4 && !res.captured);
        if (model_replay(c, &m, 1, &res))
            CHECK(res.bucket == 1 && res.captured);
        if (model_replay(c, &m, 5, &res))
            CHECK(res.bucket == 8 && res.captured && res.path == GG_PATH_GRAPH);
        if (model_replay(c, &m, 8, &res))
            CHECK(res.bucket == 8 && !res.captured);
        /* the inputs change between replays: the graph reads them afresh */
        for (int i = 0; i < ROWS * K; i++)
            m.xs[i] = (float)(i % 5) - 2.0f;
        if (model_replay(c, &m, 2, &res))
            CHECK(res.bucket == 2 && res.captured);
        for (int i = 0; i < ROWS * K; i++)
            m.xs[i] = (float)(i % 3) * 2.0f;
        model_replay(c, &m, 2, &res);

        /* stats: the cache entries and the counters */
        const msgpack_object *st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "capture_count"), 4);
            CHECK_EQ(h_getu(st, "replay_count"), 8);
            CHECK_EQ(h_getu(st, "eager_count"), 0);
            CHECK_EQ(h_getu(st, "fallback_count"), 0);
            CHECK_EQ(h_getu(st, "graphs_cached"), 4);
            CHECK(h_getf(st, "avg_replay_us") > 0);
            CHECK_EQ(t_entries_of(st, m.prog), 4);
            const msgpack_object *e = t_entry(st, m.prog, 0, 4);
            char s[32];
            if (CHECK(e != NULL)) {
                CHECK_STR(h_gets(e, "state", s, sizeof s), "ready");
                CHECK_EQ(h_getu(e, "captures"), 1);
                CHECK_EQ(h_getu(e, "replays"), 3);
                CHECK_EQ(h_getu(e, "fallbacks"), 0);
                CHECK_STR(h_gets(e, "program_name", s, sizeof s), "model");
                CHECK_EQ(h_getu(e, "session"), gg_client_session_id(c));
            }
            e = t_entry(st, m.prog, 0, 2);
            CHECK(e && h_getu(e, "replays") == 2 && h_getu(e, "captures") == 1);
            e = t_entry(st, m.prog, 0, 1);
            CHECK(e && h_getu(e, "replays") == 1);
            e = t_entry(st, m.prog, 0, 8);
            CHECK(e && h_getu(e, "replays") == 2);
            CHECK(t_entry(st, m.prog, 0, 16) == NULL);
            /* our session's figures */
            const msgpack_object *ss = h_get(st, "sessions");
            bool found = false;
            for (uint32_t i = 0; ss && i < ss->via.array.size; i++) {
                const msgpack_object *se = &ss->via.array.ptr[i];
                if (h_getu(se, "id") != gg_client_session_id(c))
                    continue;
                found = true;
                CHECK_EQ(h_getu(se, "replays"), 8);
                CHECK_EQ(h_getu(se, "graph_replays"), 8);
                CHECK_EQ(h_getu(se, "buffers"), 6);
                CHECK_EQ(h_getu(se, "programs"), 1);
                CHECK_STR(h_gets(se, "client", s, sizeof s), "replay-test");
            }
            CHECK(found);
        }

        /* releasing the program drops its cache entries */
        CHECK(gg_client_program_release(c, m.prog) == 0);
        st = t_stats(c);
        if (st) {
            CHECK_EQ(t_entries_of(st, m.prog), 0);
            CHECK_EQ(h_getu(st, "graphs_cached"), 0);
        }
    }
    model_free(&m);
    gg_client_close(c);
}

static void test_oversize(const h_daemon *d)
{
    h_section("batch above the largest bucket");
    gg_client *c = t_connect(d, "oversize-test");
    if (!c)
        return;
    const msgpack_object *st = t_stats(c);
    uint64_t over0 = st ? h_getu(st, "oversize_count") : 0;
    uint64_t eager0 = st ? h_getu(st, "eager_count") : 0;
    uint64_t fb0 = st ? h_getu(st, "fallback_count") : 0;
    model m;
    static const int buckets[] = {1, 2, 4};
    if (model_buffers(c, &m, 3) && model_define(c, &m, "small-buckets", 3, buckets) == 0) {
        gg_replay_result res;
        if (model_replay(c, &m, 10, &res)) {
            CHECK(res.path == GG_PATH_EAGER);
            CHECK_EQ(res.bucket, 0);
            CHECK_EQ(res.batch, 10);
            CHECK(!res.fallback);
            CHECK(!res.captured);
            CHECK_CONTAINS(res.reason, "largest bucket");
        }
        /* exactly what the buffers hold */
        if (model_replay(c, &m, ROWS, &res))
            CHECK(res.path == GG_PATH_EAGER && res.bucket == 0);
        /* more than the buffers hold */
        CHECK_FAILS(gg_client_replay(c, m.prog, ROWS + 1, -1, NULL), c, "ERANGE");
        CHECK_CONTAINS(gg_client_last_error(c), "16");
        /* still fine at a bucket */
        if (model_replay(c, &m, 3, &res))
            CHECK(res.path == GG_PATH_GRAPH && res.bucket == 4);
        st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "oversize_count") - over0, 2);
            CHECK_EQ(h_getu(st, "eager_count") - eager0, 2);
            CHECK_EQ(h_getu(st, "fallback_count") - fb0, 0);
            /* no cache entry for an oversize batch */
            CHECK_EQ(t_entries_of(st, m.prog), 1);
        }
    }
    model_free(&m);

    /* two tensors in one buffer: the rows above the largest bucket stop
     * where they would overlap (x rows 0..7, y after them) */
    tbuf one;
    uint64_t prog = 0;
    if (tbuf_new(c, &one, 2 * 8 * 4 + 64)) {
        gg_program_def *p = gg_program_def_new("shared-buffer");
        int64_t s4[2] = {GG_BATCH, 4};
        static const int b2[] = {1, 2};
        gg_program_def_buckets(p, 2, b2);
        gg_program_def_tensor(p, "x", one.id, 0, "f32", 2, s4);
        gg_program_def_tensor(p, "y", one.id, 8 * 4 * sizeof(float), "f32", 2, s4);
        gg_program_def_op(p, "scale", "x", "y");
        gg_program_def_attr_f(p, "scale", 3.0);
        CHECKF(gg_client_program_define(c, p, &prog) == 0, "define: %s",
               gg_client_last_error(c));
        gg_program_def_free(p);
        for (int i = 0; i < 8 * 4; i++)
            one.f[i] = (float)i;
        gg_replay_result res;
        if (CHECK(gg_client_replay(c, prog, 8, -1, &res) == 0)) {
            CHECK(res.path == GG_PATH_EAGER);
            int bad = 0;
            for (int i = 0; i < 8 * 4; i++)
                bad += one.f[32 + i] != 3.0f * (float)i;
            CHECK_EQ(bad, 0);
        }
        CHECK_FAILS(gg_client_replay(c, prog, 9, -1, NULL), c, "ERANGE");
    }
    tbuf_free(&one);
    gg_client_close(c);
}

/* ---- prepare, branches ---------------------------------------------------- */

static void test_prepare(const h_daemon *d)
{
    h_section("program.prepare");
    gg_client *c = t_connect(d, "prepare-test");
    if (!c)
        return;
    model m;
    static const int buckets[] = {1, 2, 4, 8};
    if (model_buffers(c, &m, 5) && model_define(c, &m, "prepared", 4, buckets) == 0) {
        uint64_t cap0 = t_stat(c, "capture_count");
        int ready = -1, failed = -1;
        static const int want[] = {1, 4};
        CHECK(gg_client_program_prepare(c, m.prog, 2, want, -1, &ready, &failed) == 0);
        CHECK_EQ(ready, 2);
        CHECK_EQ(failed, 0);
        CHECK_EQ(t_stat(c, "capture_count") - cap0, 2);
        const msgpack_object *st = t_stats(c);
        if (st) {
            const msgpack_object *e = t_entry(st, m.prog, 0, 4);
            char s[32];
            CHECK(e && strcmp(h_gets(e, "state", s, sizeof s), "ready") == 0);
            CHECK(e && h_getu(e, "captures") == 1 && h_getu(e, "replays") == 0);
        }
        gg_replay_result res;
        if (model_replay(c, &m, 3, &res))
            CHECK(res.path == GG_PATH_GRAPH && res.bucket == 4 && !res.captured);
        if (model_replay(c, &m, 1, &res))
            CHECK(res.bucket == 1 && !res.captured);
        if (model_replay(c, &m, 2, &res))
            CHECK(res.bucket == 2 && res.captured);
        /* preparing what is ready captures nothing */
        uint64_t cap1 = t_stat(c, "capture_count");
        CHECK(gg_client_program_prepare(c, m.prog, 0, NULL, -1, &ready, &failed) == 0);
        CHECK_EQ(ready, 4);
        CHECK_EQ(t_stat(c, "capture_count") - cap1, 1);   /* only bucket 8 was missing */
        /* a bucket the program does not have */
        static const int bad[] = {3};
        CHECK_FAILS(gg_client_program_prepare(c, m.prog, 1, bad, -1, NULL, NULL), c, "EINVAL");
        CHECK_FAILS(gg_client_program_prepare(c, m.prog, 0, NULL, 5, NULL, NULL), c, "EINVAL");
        CHECK_FAILS(gg_client_program_prepare(c, 999999, 0, NULL, -1, NULL, NULL), c, "ENOENT");
    }
    model_free(&m);
    gg_client_close(c);
}

static void test_branches(const h_daemon *d)
{
    h_section("branches");
    gg_client *c = t_connect(d, "branch-test");
    if (!c)
        return;
    tbuf x, y;
    if (tbuf_new(c, &x, 8 * 4) && tbuf_new(c, &y, 8 * 4)) {
        gg_program_def *p = gg_program_def_new("branchy");
        int64_t s4[2] = {GG_BATCH, 4};
        static const int b[] = {2, 4, 8};
        gg_program_def_buckets(p, 3, b);
        gg_program_def_tensor(p, "x", x.id, 0, "f32", 2, s4);
        gg_program_def_tensor(p, "y", y.id, 0, "f32", 2, s4);
        gg_program_def_op(p, "scale", "x", "y");
        gg_program_def_attr_f(p, "scale", 2.0);
        CHECK_EQ(gg_program_def_branch(p), 1);
        gg_program_def_op(p, "scale", "x", "y");
        gg_program_def_attr_f(p, "scale", -3.0);
        CHECK_EQ(gg_program_def_branch(p), 2);
        gg_program_def_op(p, "add", "x, x", "y");
        uint64_t prog = 0;
        CHECKF(gg_client_program_define(c, p, &prog) == 0, "define: %s", gg_client_last_error(c));
        gg_program_def_free(p);
        for (int i = 0; i < 32; i++)
            x.f[i] = (float)i - 10.0f;
        static const float mult[3] = {2.0f, -3.0f, 2.0f};
        static const int order[] = {0, 1, 0, 2, 1, 1};
        for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
            int br = order[k];
            tbuf_fill(&y, SENTINEL);
            gg_replay_result res;
            if (!CHECK(gg_client_replay(c, prog, 3, br, &res) == 0))
                continue;
            CHECK_EQ(res.branch, br);
            CHECK_EQ(res.bucket, 4);
            CHECK(res.path == GG_PATH_GRAPH);
            /* first use of each branch captures, later ones do not */
            bool first = true;
            for (size_t q = 0; q < k; q++)
                first &= order[q] != br;
            CHECKF(res.captured == first, "branch %d replay %zu: captured %d", br, k,
                   res.captured);
            int bad = 0;
            for (int i = 0; i < 12; i++)
                bad += y.f[i] != mult[br] * x.f[i];
            CHECKF(bad == 0, "branch %d computes its own nodes", br);
        }
        /* the default branch is 0 */
        gg_replay_result res;
        if (CHECK(gg_client_replay(c, prog, 2, -1, &res) == 0))
            CHECK(res.branch == 0 && y.f[0] == 2.0f * x.f[0]);
        CHECK_FAILS(gg_client_replay(c, prog, 2, 3, NULL), c, "EINVAL");
        const msgpack_object *st = t_stats(c);
        if (st) {
            for (int br = 0; br < 3; br++) {
                const msgpack_object *e = t_entry(st, prog, br, 4);
                CHECKF(e && h_getu(e, "captures") == 1, "branch %d has its own entry", br);
            }
            CHECK(h_getu(t_entry(st, prog, 0, 4), "replays") == 2);
            CHECK(h_getu(t_entry(st, prog, 1, 4), "replays") == 3);
            CHECK(h_getu(t_entry(st, prog, 2, 4), "replays") == 1);
            CHECK(h_getu(t_entry(st, prog, 0, 2), "replays") == 1);
        }
        /* prepare one branch only */
        int ready = 0, failed = 0;
        CHECK(gg_client_program_prepare(c, prog, 0, NULL, 2, &ready, &failed) == 0);
        CHECK_EQ(ready, 3);
        CHECK_EQ(failed, 0);
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
}

/* ---- program.rebind ------------------------------------------------------- */

static void test_rebind(const h_daemon *d)
{
    h_section("program.rebind");
    gg_client *c = t_connect(d, "rebind-test");
    gg_client *other = t_connect(d, "rebind-other");
    if (!c || !other) {
        gg_client_close(c);
        gg_client_close(other);
        return;
    }
    tbuf x1, x2, y, tiny, foreign;
    memset(&foreign, 0, sizeof foreign);
    if (tbuf_new(c, &x1, 32) && tbuf_new(c, &x2, 64) && tbuf_new(c, &y, 64) &&
        tbuf_new(c, &tiny, 4) && tbuf_new(other, &foreign, 32)) {
        gg_program_def *p = gg_program_def_new("rebound");
        int64_t s4[2] = {GG_BATCH, 4};
        gg_program_def_buckets(p, 2, (int[]){4, 8});
        gg_program_def_tensor(p, "x", x1.id, 0, "f32", 2, s4);
        gg_program_def_tensor(p, "y", y.id, 0, "f32", 2, s4);
        gg_program_def_scratch(p, "t", "f32", 2, s4);
        gg_program_def_op(p, "scale", "x", "t");
        gg_program_def_attr_f(p, "scale", 2.0);
        gg_program_def_op(p, "add", "t, x", "y");   /* y = 3x */
        uint64_t prog = 0;
        CHECKF(gg_client_program_define(c, p, &prog) == 0, "define: %s", gg_client_last_error(c));
        gg_program_def_free(p);
        for (int i = 0; i < 32; i++)
            x1.f[i] = (float)i;
        for (int i = 0; i < 64; i++)
            x2.f[i] = 100.0f + (float)i;
        gg_replay_result res;
        if (CHECK(gg_client_replay(c, prog, 4, -1, &res) == 0))
            CHECK(res.captured && y.f[15] == 45.0f);
        uint64_t cap0 = t_stat(c, "capture_count");
        /* point x at the second buffer, 16 floats in */
        CHECK(gg_client_program_rebind(c, prog, "x", x2.id, 64) == 0);
        tbuf_fill(&y, SENTINEL);
        if (CHECK(gg_client_replay(c, prog, 4, -1, &res) == 0)) {
            CHECK(res.path == GG_PATH_GRAPH);
            int bad = 0;
            for (int i = 0; i < 16; i++)
                bad += y.f[i] != 3.0f * x2.f[16 + i];
            CHECKF(bad == 0, "the graph reads the rebound tensor (%d wrong)", bad);
        }
        const msgpack_object *st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "exec_updates"), 1);
            CHECK_EQ(h_getu(st, "capture_count") - cap0, 1);
        }
        /* the old buffer is free, the new one is in use */
        CHECK(gg_client_buffer_release(c, x1.id) == 0);
        CHECK_FAILS(gg_client_buffer_release(c, x2.id), c, "EBUSY");
        /* another bucket captures fresh against the new binding */
        tbuf_fill(&y, SENTINEL);
        if (CHECK(gg_client_replay(c, prog, 6, -1, &res) == 0))
            CHECK(res.bucket == 8 && y.f[23] == 3.0f * x2.f[16 + 23]);
        /* refusals leave the binding as it was */
        CHECK_FAILS(gg_client_program_rebind(c, prog, "x", tiny.id, 0), c, "ERANGE");
        CHECK_FAILS(gg_client_program_rebind(c, prog, "x", x2.id, 2), c, "ERANGE");
        CHECK_FAILS(gg_client_program_rebind(c, prog, "nope", x2.id, 0), c, "EINVAL");
        CHECK_FAILS(gg_client_program_rebind(c, prog, "t", x2.id, 0), c, "EINVAL");
        CHECK_FAILS(gg_client_program_rebind(c, prog, "x", foreign.id, 0), c, "EACCES");
        CHECK_FAILS(gg_client_program_rebind(c, prog, "x", 987654321, 0), c, "ENOENT");
        /* x onto y, shifted: a partial overlap of an output with an input */
        CHECK_FAILS(gg_client_program_rebind(c, prog, "x", y.id, 16), c, "EINVAL");
        CHECK_FAILS(gg_client_program_rebind(other, prog, "x", x2.id, 0), other, "EACCES");
        tbuf_fill(&y, SENTINEL);
        if (CHECK(gg_client_replay(c, prog, 4, -1, &res) == 0))
            CHECK(y.f[15] == 3.0f * x2.f[16 + 15] && res.path == GG_PATH_GRAPH && !res.captured);
        CHECK_FAILS(gg_client_buffer_release(c, y.id), c, "EBUSY");
    }
    tbuf_free(&x1);
    tbuf_free(&x2);
    tbuf_free(&y);
    tbuf_free(&tiny);
    tbuf_free(&foreign);
    gg_client_close(c);
    gg_client_close(other);
}

/* ---- eviction ------------------------------------------------------------ */

/* y = scale(x, k), one bucket. */
static uint64_t define_scale(gg_client *c, const tbuf *x, const tbuf *y, double k,
                             const char *name)
{
    gg_program_def *p = gg_program_def_new(name);
    int64_t s4[2] = {GG_BATCH, 4};
    static const int b[] = {4};
    gg_program_def_buckets(p, 1, b);
    gg_program_def_tensor(p, "x", x->id, 0, "f32", 2, s4);
    gg_program_def_tensor(p, "y", y->id, 0, "f32", 2, s4);
    gg_program_def_op(p, "scale", "x", "y");
    gg_program_def_attr_f(p, "scale", k);
    uint64_t prog = 0;
    CHECKF(gg_client_program_define(c, p, &prog) == 0, "define %s: %s", name,
           gg_client_last_error(c));
    gg_program_def_free(p);
    return prog;
}

static bool scale_replay(gg_client *c, uint64_t prog, const tbuf *x, tbuf *y, float k,
                         bool *captured)
{
    tbuf_fill(y, SENTINEL);
    gg_replay_result res;
    if (!CHECK(gg_client_replay(c, prog, 4, -1, &res) == 0))
        return false;
    *captured = res.captured;
    int bad = 0;
    for (int i = 0; i < 16; i++)
        bad += y->f[i] != k * x->f[i];
    return CHECKF(bad == 0 && res.path == GG_PATH_GRAPH, "scale %g: right on the graph path", k);
}

static void test_lru(void)
{
    h_section("LRU eviction (cache-entries=2)");
    h_daemon d;
    const char *args[] = {"--set", "cache-entries=2", NULL};
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    gg_client *c = t_connect(&d, "lru");
    tbuf x, y;
    if (c && tbuf_new(c, &x, 16) && tbuf_new(c, &y, 16)) {
        for (int i = 0; i < 16; i++)
            x.f[i] = (float)i + 1.0f;
        uint64_t a = define_scale(c, &x, &y, 2, "a"), b = define_scale(c, &x, &y, 3, "b"),
                 p3 = define_scale(c, &x, &y, 5, "c");
        bool cap;
        CHECK(scale_replay(c, a, &x, &y, 2, &cap) && cap);
        CHECK(scale_replay(c, b, &x, &y, 3, &cap) && cap);
        CHECK_EQ(t_stat(c, "evictions"), 0);
        CHECK(scale_replay(c, p3, &x, &y, 5, &cap) && cap);
        const msgpack_object *st = t_stats(c);
        char s[32];
        if (st) {
            CHECK_EQ(h_getu(st, "evictions"), 1);
            CHECK_EQ(h_getu(st, "graphs_cached"), 2);
            CHECK_EQ(h_getu(st, "cache_capacity"), 2);
            /* a, the least recently used, went; its figures stay */
            const msgpack_object *e = t_entry(st, a, 0, 4);
            CHECK(e && strcmp(h_gets(e, "state", s, sizeof s), "empty") == 0);
            CHECK(e && h_getu(e, "captures") == 1 && h_getu(e, "replays") == 1);
            e = t_entry(st, b, 0, 4);
            CHECK(e && strcmp(h_gets(e, "state", s, sizeof s), "ready") == 0);
        }
        /* b used again: now a would be re-captured and c is the LRU */
        CHECK(scale_replay(c, b, &x, &y, 3, &cap) && !cap);
        CHECK(scale_replay(c, a, &x, &y, 2, &cap) && cap);
        st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "evictions"), 2);
            CHECK_EQ(h_getu(st, "graphs_cached"), 2);
            CHECK_EQ(h_getu(st, "capture_count"), 4);
            const msgpack_object *e = t_entry(st, a, 0, 4);
            CHECK(e && h_getu(e, "captures") == 2 &&
                  strcmp(h_gets(e, "state", s, sizeof s), "ready") == 0);
            e = t_entry(st, p3, 0, 4);
            CHECK(e && strcmp(h_gets(e, "state", s, sizeof s), "empty") == 0);
        }
        CHECK(scale_replay(c, b, &x, &y, 3, &cap) && !cap);

        /* a prepare pins every graph it captures: three buckets into a cache
         * of two are all captured, none is failed, and the cache is back at
         * two once the prepare is done */
        tbuf x3, y3;
        uint64_t p3b = 0;
        if (tbuf_new(c, &x3, 4 * 16) && tbuf_new(c, &y3, 4 * 16))
            p3b = t_define_silu2x(c, "three-buckets", x3.id, y3.id, 16);
        int ready = -1, failed = -1;
        if (p3b && CHECK(gg_client_program_prepare(c, p3b, 0, NULL, -1, &ready, &failed) == 0)) {
            CHECK_EQ(ready, 3);
            CHECK_EQ(failed, 0);
            bool two = false;
            for (int i = 0; i < 3000 && !two; i++) {   /* up to 60 s */
                two = t_stat(c, "graphs_cached") == 2;
                if (!two)
                    h_sleep_ms(20);
            }
            CHECKF(two, "back to the cache's capacity after the prepare");
            for (int batch = 1; batch <= 4; batch++) {
                for (int i = 0; i < 4 * 16; i++)
                    x3.f[i] = (float)(i % 7) - 3.0f + (float)batch;
                gg_replay_result res;
                if (!CHECK(gg_client_replay(c, p3b, batch, -1, &res) == 0))
                    continue;
                CHECKF(res.path == GG_PATH_GRAPH && !res.fallback,
                       "batch %d: graph path, no fallback", batch);
                int bad = 0;
                for (int i = 0; i < batch * 16; i++)
                    bad += !t_close(y3.f[i], t_silu2x_ref(x3.f[i]), 1e-5);
                CHECKF(bad == 0, "batch %d: right (%d wrong)", batch, bad);
            }
            CHECK_EQ(t_stat(c, "fallback_count"), 0);
        }
        tbuf_free(&x3);
        tbuf_free(&y3);
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    h_daemon_stop(&d);
}

static void test_idle(void)
{
    h_section("idle eviction (cache-idle-s=1)");
    h_daemon d;
    const char *args[] = {"--set", "cache-idle-s=1", NULL};
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    gg_client *c = t_connect(&d, "idle");
    tbuf x, y;
    if (c && tbuf_new(c, &x, 16) && tbuf_new(c, &y, 16)) {
        for (int i = 0; i < 16; i++)
            x.f[i] = (float)i * 0.5f;
        uint64_t a = define_scale(c, &x, &y, 4, "idle");
        bool cap;
        int64_t t0 = h_now_ms();   /* the entry was last used after this */
        CHECK(scale_replay(c, a, &x, &y, 4, &cap) && cap);
        /* evicted within a few ticks of one second */
        bool evicted = false;
        while (!evicted && h_now_ms() - t0 < 60000) {
            const msgpack_object *st = t_stats(c);
            char s[32];
            if (st && h_getu(st, "graphs_cached") == 0 && h_getu(st, "evictions") == 1) {
                const msgpack_object *e = t_entry(st, a, 0, 4);
                evicted = e && strcmp(h_gets(e, "state", s, sizeof s), "empty") == 0;
            }
            if (!evicted)
                h_sleep_ms(100);
        }
        CHECK(evicted);
        CHECKF(h_now_ms() - t0 >= 990, "not evicted before it was idle for 1 s (%lld ms)",
               (long long)(h_now_ms() - t0));
        CHECK(scale_replay(c, a, &x, &y, 4, &cap) && cap);
        CHECK_EQ(t_stat(c, "capture_count"), 2);
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    h_daemon_stop(&d);
}

/* ---- GFXGRAPH=0 and GFXGRAPH=validate ------------------------------------- */

static void test_graphs_off(void)
{
    h_section("GFXGRAPH=0");
    h_daemon d;
    const char *env[] = {"GFXGRAPH=0", NULL};
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    gg_client *c = t_connect(&d, "eager-only");
    model m;
    static const int buckets[] = {1, 2, 4, 8};
    if (c && model_buffers(c, &m, 1) && model_define(c, &m, "off", 4, buckets) == 0) {
        gg_replay_result res;
        for (int b = 1; b <= 8; b++)
            if (model_replay(c, &m, b, &res)) {
                CHECK(res.path == GG_PATH_EAGER);
                CHECK(!res.fallback && !res.captured);
                CHECK_CONTAINS(res.reason, "disabled");
            }
        CHECK_FAILS(gg_client_program_prepare(c, m.prog, 0, NULL, -1, NULL, NULL), c, "EPERM");
        const msgpack_object *st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "capture_count"), 0);
            CHECK_EQ(h_getu(st, "replay_count"), 0);
            CHECK_EQ(h_getu(st, "eager_count"), 8);
            CHECK_EQ(h_getu(st, "fallback_count"), 0);
            CHECK_EQ(h_getu(st, "graphs_cached"), 0);
        }
    }
    model_free(&m);
    gg_client_close(c);
    h_daemon_stop(&d);
}

static void test_validate(void)
{
    h_section("GFXGRAPH=validate");
    h_daemon d;
    const char *env[] = {"GFXGRAPH=validate", NULL};
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    gg_client *c = t_connect(&d, "validate");
    model m;
    static const int buckets[] = {1, 2, 4, 8};
    if (c && model_buffers(c, &m, 2) && model_define(c, &m, "checked", 4, buckets) == 0) {
        gg_replay_result res;
        for (int i = 0; i < 5; i++)
            if (model_replay(c, &m, 3, &res))
                CHECK(res.path == GG_PATH_GRAPH && !res.fallback);
        const msgpack_object *st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "validations"), 5);
            CHECK_EQ(h_getu(st, "validation_failures"), 0);
            CHECK_EQ(h_getu(st, "replay_count"), 5);
            CHECK_EQ(h_getu(st, "fallback_count"), 0);
        }
    }
    model_free(&m);
    gg_client_close(c);
    h_daemon_stop(&d);

    /* trusted after 2 replays, then one in 3 sampled */
    h_section("GFXGRAPH=validate with a trusted threshold");
    const char *env2[] = {"GFXGRAPH=validate", "GFXGRAPH_TRUSTED_REPLAY_THRESHOLD=2",
                          "GFXGRAPH_TRUSTED_REPLAY_SAMPLE_INTERVAL=3", NULL};
    if (h_daemon_start(&d, NULL, env2) < 0)
        return;
    c = t_connect(&d, "validate-sampled");
    if (c && model_buffers(c, &m, 4) && model_define(c, &m, "sampled", 4, buckets) == 0) {
        gg_replay_result res;
        for (int i = 0; i < 9; i++)
            model_replay(c, &m, 4, &res);
        /* replays 0, 1 (untrusted), then 2, 5, 8 (every third) */
        const msgpack_object *st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "validations"), 5);
            CHECK_EQ(h_getu(st, "validation_failures"), 0);
            CHECK_EQ(h_getu(st, "replay_count"), 9);
        }
    }
    model_free(&m);
    gg_client_close(c);
    h_daemon_stop(&d);
}

int main(void)
{
    h_init("test_client_replay", 600);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_round_trip(&d);
        test_oversize(&d);
        test_prepare(&d);
        test_branches(&d);
        test_rebind(&d);
        h_daemon_stop(&d);
    }
    test_lru();
    test_idle();
    test_graphs_off();
    test_validate();
    return h_finish();
}
