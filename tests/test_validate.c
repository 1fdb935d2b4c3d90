/* SPDX-License-Identifier: MIT */
/* GFXGRAPH=validate on the cpu backend:
 *  - equal values agree, +-inf and NaN in the same places included: an
 *    output holding them validates (it failed before, disabling the graph),
 *    and so does an f16 output that overflows to inf (60000 x 2);
 *  - a validation failure (GFXGRAPH_FAULT=validate) answers what
 *    PROTOCOL.md section 13 says: path eager, fallback true, the reason;
 *    the eager result is the one in the buffer; later replays of the entry
 *    are eager fallbacks without validating again; a non-finite value
 *    facing a finite one is named in the reason;
 *  - replay-mode standard validates the first trusted-replay-threshold
 *    replays of each graph, then every trusted-replay-sample-interval-th;
 *    hot only the first of each graph; without mode validate neither
 *    validates anything. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_client_util.h"

/* y = op(x) over [batch, 8] of dtype, buckets 1 and 4 */
static uint64_t define_unary(gg_client *c, const char *name, const char *dtype, const char *op,
                             double scale, uint64_t x, uint64_t y)
{
    gg_program_def *p = gg_program_def_new(name);
    int64_t s[2] = {GG_BATCH, 8};
    gg_program_def_buckets(p, 2, (int[]){1, 4});
    gg_program_def_tensor(p, "x", x, 0, dtype, 2, s);
    gg_program_def_tensor(p, "y", y, 0, dtype, 2, s);
    gg_program_def_op(p, op, "x", "y");
    if (scale != 0)
        gg_program_def_attr_f(p, "scale", scale);
    uint64_t id = 0;
    if (!CHECKF(gg_client_program_define(c, p, &id) == 0, "define %s: %s", name,
                gg_client_last_error(c)))
        id = 0;
    gg_program_def_free(p);
    return id;
}

static void test_nonfinite_agree(void)
{
    h_section("validate: +-inf and NaN in the same places agree");
    const char *env[] = {"GFXGRAPH=validate", NULL};
    h_daemon d;
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    gg_client *c = t_connect(&d, "nonfinite");
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    if (c && tbuf_new(c, &x, 4 * 8) && tbuf_new(c, &y, 4 * 8)) {
        for (int i = 0; i < 4 * 8; i++)
            x.f[i] = (float)i - 3.5f;
        x.f[0] = INFINITY;
        x.f[3] = -INFINITY;
        x.f[5] = NAN;
        x.f[9] = INFINITY;
        uint64_t prog = define_unary(c, "copy-inf", "f32", "copy", 0, x.id, y.id);
        gg_replay_result res;
        for (int i = 0; prog && i < 3; i++)
            if (CHECK(gg_client_replay(c, prog, 2, -1, &res) == 0))
                CHECKF(res.path == GG_PATH_GRAPH && !res.fallback, "replay %d: path %d, "
                       "fallback %d (%s)", i, (int)res.path, (int)res.fallback, res.reason);
        CHECK(y.f[0] == INFINITY && y.f[3] == -INFINITY && isnan(y.f[5]) && y.f[9] == INFINITY);
        CHECK(y.f[1] == -2.5f);
        const msgpack_object *st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "validations"), 3);
            CHECK_EQ(h_getu(st, "validation_failures"), 0);
            CHECK_EQ(h_getu(st, "fallback_count"), 0);
            CHECK_EQ(h_getu(st, "replay_count"), 3);
        }

        h_section("validate: an f16 output that overflows to inf (60000 x 2) agrees");
        tbuf x16, y16;
        memset(&x16, 0, sizeof x16);
        memset(&y16, 0, sizeof y16);
        if (tbuf_new(c, &x16, 4 * 8 / 2) && tbuf_new(c, &y16, 4 * 8 / 2)) {
            uint16_t *h = (uint16_t *)x16.f, *o = (uint16_t *)y16.f;
            for (int i = 0; i < 4 * 8; i++)
                h[i] = i % 2 ? 0x7b53 /* 60000 */ : 0x3c00 /* 1 */;
            uint64_t p16 = define_unary(c, "scale-f16", "f16", "scale", 2.0, x16.id, y16.id);
            for (int i = 0; p16 && i < 2; i++)
                if (CHECK(gg_client_replay(c, p16, 4, -1, &res) == 0))
                    CHECKF(res.path == GG_PATH_GRAPH && !res.fallback, "f16 replay %d: path %d,"
                           " fallback %d (%s)", i, (int)res.path, (int)res.fallback, res.reason);
            CHECKF(o[1] == 0x7c00 && o[0] == 0x4000, "y = [2, inf, ...] in f16 (0x%04x 0x%04x)",
                   o[0], o[1]);
            st = t_stats(c);
            if (st) {
                CHECK_EQ(h_getu(st, "validations"), 5);
                CHECK_EQ(h_getu(st, "validation_failures"), 0);
            }
        }
        tbuf_free(&x16);
        tbuf_free(&y16);
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    h_daemon_stop(&d);
}

static void test_failure_answer(void)
{
    h_section("a validation failure: path eager, fallback true (PROTOCOL.md section 13)");
    const char *env[] = {"GFXGRAPH=validate", "GFXGRAPH_FAULT=validate", NULL};
    h_daemon d;
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    gg_client *c = t_connect(&d, "mismatch");
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    if (c && tbuf_new(c, &x, 4 * 16) && tbuf_new(c, &y, 4 * 16)) {
        for (int i = 0; i < 4 * 16; i++)
            x.f[i] = (float)(i % 5) * 0.5f;
        uint64_t prog = t_define_silu2x(c, "mismatch", x.id, y.id, 16);
        gg_replay_result res;
        if (prog && CHECK(gg_client_replay(c, prog, 2, -1, &res) == 0)) {
            CHECK(res.path == GG_PATH_EAGER && res.fallback);
            CHECK_CONTAINS(res.reason, "validation failed: graph output differs from eager");
        }
        bool right = true;
        for (int i = 0; i < 2 * 16; i++)
            right = right && t_close(y.f[i], t_silu2x_ref(x.f[i]), 1e-5);
        CHECKF(right, "the eager result is the one left in y");
        if (prog && CHECK(gg_client_replay(c, prog, 2, -1, &res) == 0)) {
            CHECK(res.path == GG_PATH_EAGER && res.fallback && !res.captured);
            CHECK_CONTAINS(res.reason, "validation failed");
        }
        const msgpack_object *st = t_stats(c);
        if (st) {
            CHECK_EQ(h_getu(st, "validations"), 1);
            CHECK_EQ(h_getu(st, "validation_failures"), 1);
            CHECK_EQ(h_getu(st, "fallback_count"), 2);
            CHECK_EQ(h_getu(st, "eager_count"), 2);
            CHECK_EQ(h_getu(st, "replay_count"), 0);
            const msgpack_object *e = t_entry(st, prog, 0, 2);
            char b[32];
            CHECK(e && strcmp(h_gets(e, "state", b, sizeof b), "failed") == 0);
        }

        h_section("a non-finite value facing a finite one is named in the reason");
        /* the fault makes the graph's first value NaN: against the eager
         * run's +inf (NaN only agrees with NaN) */
        x.f[0] = INFINITY;
        uint64_t p2 = define_unary(c, "nan-vs-inf", "f32", "copy", 0, x.id, y.id);
        if (p2 && CHECK(gg_client_replay(c, p2, 1, -1, &res) == 0)) {
            CHECK(res.path == GG_PATH_EAGER && res.fallback);
            CHECK_CONTAINS(res.reason, "'y'[0]: graph nan, eager inf");
        }
        CHECK(y.f[0] == INFINITY);
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    h_daemon_stop(&d);
}

/* n replays of batch 2 (one graph) and then of batch 4 (another): the
 * validations counted. */
static uint64_t mode_run(const char *const *args, const char *const *env, int n)
{
    h_daemon d;
    if (h_daemon_start(&d, args, env) < 0)
        return UINT64_MAX;
    gg_client *c = t_connect(&d, "modes");
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t v = UINT64_MAX;
    if (c && tbuf_new(c, &x, 4 * 16) && tbuf_new(c, &y, 4 * 16)) {
        for (int i = 0; i < 4 * 16; i++)
            x.f[i] = (float)(i % 9) * 0.25f - 1.0f;
        uint64_t prog = t_define_silu2x(c, "modes", x.id, y.id, 16);
        gg_replay_result res;
        bool ok = prog != 0;
        for (int b = 2; b <= 4 && ok; b += 2)
            for (int i = 0; i < n && ok; i++) {
                memset(y.f, 0, y.size);
                ok = CHECK(gg_client_replay(c, prog, b, -1, &res) == 0) &&
                     CHECK(res.path == GG_PATH_GRAPH && !res.fallback);
                for (int k = 0; ok && k < b * 16; k++)
                    ok = CHECK(t_close(y.f[k], t_silu2x_ref(x.f[k]), 1e-5));
            }
        const msgpack_object *st = ok ? t_stats(c) : NULL;
        if (st) {
            CHECK_EQ(h_getu(st, "replay_count"), 2 * (uint64_t)n);
            CHECK_EQ(h_getu(st, "validation_failures"), 0);
            v = h_getu(st, "validations");
        }
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    h_daemon_stop(&d);
    return v;
}

static void test_modes(void)
{
    h_section("replay-mode standard, the defaults (16, 16): replays 0-15, then 16 and 32");
    const char *std_env[] = {"GFXGRAPH=validate", "GFXGRAPH_REPLAY_MODE=standard", NULL};
    CHECK_EQ(mode_run(NULL, std_env, 40), 2 * 18);

    h_section("replay-mode standard, threshold 3 and interval 4: replays 0, 1, 2, 3, 7, 11");
    const char *std_args[] = {"--set", "replay-mode=standard", "--set",
                              "trusted-replay-threshold=3", "--set",
                              "trusted-replay-sample-interval=4", NULL};
    const char *val_env[] = {"GFXGRAPH=validate", NULL};
    CHECK_EQ(mode_run(std_args, val_env, 12), 2 * 6);

    h_section("replay-mode standard, threshold 0 and interval 1: every replay");
    const char *all_args[] = {"--set", "trusted-replay-threshold=0", "--set",
                              "trusted-replay-sample-interval=1", NULL};
    CHECK_EQ(mode_run(all_args, val_env, 7), 2 * 7);

    h_section("replay-mode hot: the first replay of each graph only");
    const char *hot_env[] = {"GFXGRAPH=validate", "GFXGRAPH_REPLAY_MODE=hot", NULL};
    CHECK_EQ(mode_run(NULL, hot_env, 20), 2);

    h_section("GFXGRAPH_REPLAY_HOT_MODE=1 selects hot (replay-mode unset)");
    const char *hot2_env[] = {"GFXGRAPH=validate", "GFXGRAPH_REPLAY_HOT_MODE=1", NULL};
    CHECK_EQ(mode_run(NULL, hot2_env, 20), 2);

    h_section("replay-mode hot with trusted-replay settings: they do not apply");
    const char *hot_args[] = {"--set", "trusted-replay-threshold=5", NULL};
    CHECK_EQ(mode_run(hot_args, hot_env, 8), 2);

    h_section("without mode validate, no replay mode validates");
    const char *hot_off[] = {"GFXGRAPH_REPLAY_MODE=hot", NULL};
    CHECK_EQ(mode_run(NULL, hot_off, 5), 0);
    const char *std_off[] = {"GFXGRAPH_REPLAY_MODE=standard", NULL};
    CHECK_EQ(mode_run(NULL, std_off, 5), 0);
}

int main(void)
{
    h_init("test_validate", 280);
    test_nonfinite_agree();
    test_failure_answer();
    test_modes();
    return h_finish();
}
