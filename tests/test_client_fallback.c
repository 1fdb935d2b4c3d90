/* SPDX-License-Identifier: MIT */
/* Eager fallback: a daemon with GFXGRAPH_FAULT injecting a failed capture,
 * instantiate or launch must still give the right answer on every replay,
 * eagerly, say so (path eager, fallback true, a reason), count it, mark the
 * cache entry failed with its reason instead of trying again on every
 * request, and stay up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_client_util.h"

#define ROWS 8
#define D 16

typedef struct {
    const char *fault;
    uint64_t captures;     /* captures the first replay makes before failing */
} fault_case;

static int wrong_rows(const tbuf *x, const tbuf *y, int batch)
{
    int bad = 0;
    for (int i = 0; i < batch * D; i++) {
        double v = x->f[i];
        bad += !t_close(y->f[i], t_silu2x_ref(v), 1e-5);
    }
    for (int i = batch * D; i < ROWS * D; i++)
        bad += y->f[i] != 777.0f && i >= 4 * D;   /* rows past the bucket untouched */
    return bad;
}

static void run_case(const fault_case *fc)
{
    char title[96];
    snprintf(title, sizeof title, "GFXGRAPH_FAULT=%s", fc->fault);
    h_section(title);
    char env_fault[64];
    snprintf(env_fault, sizeof env_fault, "GFXGRAPH_FAULT=%s", fc->fault);
    const char *env[] = {env_fault, NULL};
    h_daemon d;
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    gg_client *c = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    if (CHECK(gg_client_connect(c, d.sock, "fallback") == 0) && tbuf_new(c, &x, ROWS * D) &&
        tbuf_new(c, &y, ROWS * D)) {
        uint64_t prog = t_define_silu2x(c, "faulty", x.id, y.id, D);
        uint64_t cap_after_first = 0;
        int n = 6;
        for (int k = 0; k < n; k++) {
            for (int i = 0; i < ROWS * D; i++)
                x.f[i] = (float)((i * 13 + k * 7) % 17) * 0.25f - 2.0f;
            tbuf_fill(&y, 777.0f);
            gg_replay_result res;
            int rc = gg_client_replay(c, prog, 3, -1, &res);
            if (!CHECKF(rc == 0, "replay %d: %s", k, gg_client_last_error(c)))
                continue;
            CHECKF(wrong_rows(&x, &y, 3) == 0, "replay %d: the right answer", k);
            CHECK(res.path == GG_PATH_EAGER);
            CHECK(res.fallback);
            CHECK_EQ(res.bucket, 4);
            CHECK_CONTAINS(res.reason, "GFXGRAPH_FAULT");
            if (k == 0)
                cap_after_first = t_stat(c, "capture_count");
        }
        CHECK_EQ(cap_after_first, fc->captures);
        const msgpack_object *st = t_stats(c);
        char s[200];
        if (st) {
            CHECKF(h_getu(st, "capture_count") == cap_after_first,
                   "the failed entry is not captured again (capture_count %llu)",
                   (unsigned long long)h_getu(st, "capture_count"));
            CHECK_EQ(h_getu(st, "fallback_count"), n);
            CHECK_EQ(h_getu(st, "eager_count"), n);
            CHECK_EQ(h_getu(st, "replay_count"), 0);
            CHECK_EQ(h_getu(st, "graphs_cached"), 0);
            const msgpack_object *e = t_entry(st, prog, 0, 4);
            if (CHECK(e != NULL)) {
                CHECK_STR(h_gets(e, "state", s, sizeof s), "failed");
                CHECK_CONTAINS(h_gets(e, "reason", s, sizeof s), "injected by GFXGRAPH_FAULT");
                CHECK_EQ(h_getu(e, "fallbacks"), n);
                CHECK_EQ(h_getu(e, "replays"), 0);
                CHECK_EQ(h_getu(e, "captures"), fc->captures);
            }
        }
        /* another bucket fails on its own, once */
        gg_replay_result res;
        tbuf_fill(&y, 777.0f);
        if (CHECK(gg_client_replay(c, prog, 1, -1, &res) == 0)) {
            CHECK(res.path == GG_PATH_EAGER && res.fallback && res.bucket == 1);
            CHECK(wrong_rows(&x, &y, 1) == 0);
        }
        /* above the buckets: eager, but not a fallback */
        if (CHECK(gg_client_replay(c, prog, ROWS, -1, &res) == 0)) {
            CHECK(res.path == GG_PATH_EAGER && !res.fallback && res.bucket == 0);
            int bad = 0;
            for (int i = 0; i < ROWS * D; i++) {
                double v = x.f[i];
                bad += !t_close(y.f[i], t_silu2x_ref(v), 1e-5);
            }
            CHECK_EQ(bad, 0);
        }
        st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "fallback_count"), n + 1);
            CHECK_EQ(h_getu(st, "oversize_count"), 1);
            CHECK(t_entry(st, prog, 0, 1) &&
                  strcmp(h_gets(t_entry(st, prog, 0, 1), "state", s, sizeof s), "failed") == 0);
        }
        /* prepare reports the failure (and the entry still works after) */
        int ready = -1, failed = -1;
        static const int b4[] = {4};
        if (CHECK(gg_client_program_prepare(c, prog, 1, b4, -1, &ready, &failed) == 0)) {
            if (strstr(fc->fault, "capture") || strstr(fc->fault, "instantiate"))
                CHECK(ready == 0 && failed == 1);
            else
                CHECK(ready + failed == 1);
        }
        tbuf_fill(&y, 777.0f);
        if (CHECK(gg_client_replay(c, prog, 3, -1, &res) == 0)) {
            CHECK(res.path == GG_PATH_EAGER && res.fallback);
            CHECK(wrong_rows(&x, &y, 3) == 0);
        }
        /* the daemon is healthy */
        const msgpack_object *hr;
        if (CHECK(gg_client_call(c, "health", NULL, 0, &hr) == 0))
            CHECK(h_get(hr, "ok") && h_get(hr, "ok")->via.boolean);
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    h_daemon_stop(&d);
}

int main(void)
{
    h_init("test_client_fallback", 600);
    static const fault_case cases[] = {
        {"capture", 0},
        {"instantiate", 0},
        {"launch", 1},           /* captured and instantiated, then the launch fails */
        {"capture,launch", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    return h_finish();
}
