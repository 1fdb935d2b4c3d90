/* SPDX-License-Identifier: MIT */
/* sum, mean, amax, amin over the last dim through the CPU references against
 * sums and extrema computed here in double (integers exactly, sum wrapping):
 * odd row lengths, one and many rows, both output shapes (keepdim and not),
 * every dtype each takes, NaN and inf, i64 extremes, and the refusals. */
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static uint64_t g_rng = 0x452821e638d01377ull;

static void check(int ok, const char *what, const char *a, const char *b)
{
    if (ok) {
        g_pass++;
        return;
    }
    g_fail++;
    printf("FAIL: %s %s %s\n", what, a, b);
}

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static const char *const NAMES[4] = {"sum", "mean", "amax", "amin"};

static void red_case(int op, gg_dtype dt, int nd, const int64_t *dims, int keep, int special)
{
    int64_t n = dims[nd - 1], rows = 1;
    for (int i = 0; i < nd - 1; i++)
        rows *= dims[i];
    const size_t es = gg_dtype_size(dt);
    unsigned char *x = calloc((size_t)(rows * n), es), *y = calloc((size_t)rows, 8);
    for (int64_t i = 0; i < rows * n; i++) {
        uint64_t r = rnd();
        if (dt == GG_DT_I64)
            gg_store_i64(x, dt, i, (r & 15) == 0 ? ((r & 16) ? INT64_MAX : INT64_MIN)
                                                 : (int64_t)(r >> 24) - (1ll << 39));
        else if (dt == GG_DT_I32)
            gg_store_i64(x, dt, i, (r & 15) == 0 ? ((r & 16) ? INT32_MAX : INT32_MIN)
                                                 : (int32_t)(r >> 44) - (1 << 19));
        else
            gg_store(x, dt, i, (float)((double)(r >> 11) / 9007199254740992.0 * 8.0 - 4.0));
    }
    if (special && rows * n >= 3) { /* a NaN in row 0, +inf in the last row */
        gg_store(x, dt, 1, NAN);
        gg_store(x, dt, rows * n - 1, INFINITY);
    }
    gg_tensor_desc xd = {.dtype = dt, .ndim = nd}, yd = {.dtype = dt};
    for (int i = 0; i < nd; i++)
        xd.dims[i] = dims[i];
    yd = xd;
    if (keep || nd == 1)
        yd.dims[nd - 1] = 1;
    else
        yd.ndim--;
    const gg_op_def *o = gg_ops_find(NAMES[op]);
    char err[256] = "";
    int rc = o->check(o, &xd, 1, &yd, 1, NULL, err, sizeof err);
    check(rc == 0, NAMES[op], "accepted", err);
    if (rc)
        goto out;
    gg_tensor tx = {x, xd}, ty = {y, yd};
    gg_ops_run_cpu(o, &tx, 1, &ty, 1, NULL);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (dt == GG_DT_I32 || dt == GG_DT_I64) {
            uint64_t s = 0;
            int64_t mx = INT64_MIN, mn = INT64_MAX;
            for (int64_t i = 0; i < n; i++) {
                int64_t v = gg_load_i64(x, dt, r * n + i);
                s += (uint64_t)v;
                mx = v > mx ? v : mx;
                mn = v < mn ? v : mn;
            }
            int64_t want = op == 0 ? (dt == GG_DT_I32 ? (int32_t)(uint32_t)s : (int64_t)s)
                           : op == 2 ? mx : mn;
            bad += gg_load_i64(y, dt, r) != want;
            continue;
        }
        double s = 0, sa = 0, mx = -INFINITY, mn = INFINITY;
        int nan = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = gg_load_f64(x, dt, r * n + i);
            nan |= isnan(v);
            s += v;
            sa += fabs(v);
            mx = v > mx ? v : mx;
            mn = v < mn ? v : mn;
        }
        double want = op == 0 ? s : op == 1 ? s / (double)n : nan ? NAN : op == 2 ? mx : mn;
        double got = gg_load_f64(y, dt, r);
        double tol = (dt == GG_DT_F32 ? 1e-6 : dt == GG_DT_F16 ? 1e-3 : 8e-3) *
                     (op <= 1 ? (op == 1 ? sa / (double)n : sa) + 1e-6 : fabs(want) + 1e-6);
        if (isnan(want))
            bad += !isnan(got);
        else if (isinf(want))
            bad += got != want;
        else
            bad += !(fabs(got - want) <= tol);
    }
    check(bad == 0, NAMES[op], gg_dtype_name(dt), special ? "with NaN/inf" : "");
out:
    free(x);
    free(y);
}

int main(void)
{
    static const gg_dtype dts[5] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16, GG_DT_I32, GG_DT_I64};
    static const int64_t shapes[][4] = {{1}, {3}, {7, 33}, {2, 3, 257}, {1, 1, 1, 7}, {5, 8}};
    static const int nds[] = {1, 1, 2, 3, 4, 2};
    for (int op = 0; op < 4; op++)
        for (int d = 0; d < 5; d++) {
            if (op == 1 && d >= 3)
                continue;
            for (int s = 0; s < 6; s++)
                for (int keep = 0; keep < 2; keep++)
                    red_case(op, dts[d], nds[s], shapes[s], keep, 0);
            if (d < 3)
                red_case(op, dts[d], 2, shapes[2], 1, 1);
        }
    /* refusals */
    const gg_op_def *mean = gg_ops_find("mean"), *sum = gg_ops_find("sum");
    char err[256] = "";
    gg_tensor_desc xi = {GG_DT_I32, 2, {3, 5}}, yi = {GG_DT_I32, 1, {3}};
    gg_tensor_desc xb = {GG_DT_BOOL, 2, {3, 5}}, yb = {GG_DT_BOOL, 1, {3}};
    gg_tensor_desc xf = {GG_DT_F32, 2, {3, 5}}, yw = {GG_DT_F32, 1, {5}};
    check(mean->check(mean, &xi, 1, &yi, 1, NULL, err, sizeof err) == -EINVAL &&
              strstr(err, "f32, f16 or bf16"), "mean refuses i32", err, "");
    check(sum->check(sum, &xb, 1, &yb, 1, NULL, err, sizeof err) == -EINVAL,
          "sum refuses bool", err, "");
    check(sum->check(sum, &xf, 1, &yw, 1, NULL, err, sizeof err) == -EINVAL &&
              strstr(err, "[3, 1] or [3]"), "sum refuses a y of the wrong shape", err, "");
    printf("test_ops_reduce: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
