/* SPDX-License-Identifier: MIT */
/* The elementwise and reduction ops through the daemon (cpu backend): one
 * program builds a causal mask from a position the way a HF decode step
 * does (arange of i64 key positions, le against the i64 query positions
 * broadcast, where between two fills: 0 and -inf), runs the decomposed
 * RMSNorm (pow with a scalar, mean, add of the scalar eps, rsqrt, a
 * broadcast mul, cast to f16 and back), sums and maxima, a reversed scalar
 * sub and an i64 add that wraps.  Every result checked against values
 * computed here in double; replayed twice with other positions and inputs,
 * the first replay capturing the graph and the second a graph hit that must
 * see the new inputs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_client_util.h"

#define L 3   /* query rows */
#define S 7   /* key positions */
#define R 5   /* rows of x */
#define N 33  /* row length */

static void test_chain(const h_daemon *d)
{
    gg_client *c = t_connect(d, "ops-ew");
    if (!c)
        return;
    tbuf qp = {0}, mask = {0}, bias = {0}, x = {0}, yn = {0}, sm = {0}, mx = {0}, rs = {0},
         iw = {0};
    bool ok = tbuf_new(c, &qp, 2 * L) && tbuf_new(c, &mask, (L * S + 3) / 4) &&
              tbuf_new(c, &bias, L * S) && tbuf_new(c, &x, R * N) && tbuf_new(c, &yn, R * N) &&
              tbuf_new(c, &sm, R) && tbuf_new(c, &mx, R) && tbuf_new(c, &rs, R * N) &&
              tbuf_new(c, &iw, 2 * L);
    if (!ok)
        goto out;
    gg_program_def *pd = gg_program_def_new("ops-ew");
    int64_t d_qp[] = {L, 1}, d_kv[] = {S}, d_m[] = {L, S}, d_one[] = {1}, d_x[] = {R, N},
            d_r[] = {R, 1}, d_rv[] = {R}, d_l[] = {L};
    gg_program_def_tensor(pd, "qpos", qp.id, 0, "i64", 2, d_qp);
    gg_program_def_scratch(pd, "kv", "i64", 1, d_kv);
    gg_program_def_tensor(pd, "mask", mask.id, 0, "bool", 2, d_m);
    gg_program_def_scratch(pd, "zero", "f32", 1, d_one);
    gg_program_def_scratch(pd, "ninf", "f32", 1, d_one);
    gg_program_def_tensor(pd, "bias", bias.id, 0, "f32", 2, d_m);
    gg_program_def_tensor(pd, "x", x.id, 0, "f32", 2, d_x);
    gg_program_def_scratch(pd, "sq", "f32", 2, d_x);
    gg_program_def_scratch(pd, "ms", "f32", 2, d_r);
    gg_program_def_scratch(pd, "inv", "f32", 2, d_r);
    gg_program_def_scratch(pd, "xn", "f32", 2, d_x);
    gg_program_def_scratch(pd, "xh", "f16", 2, d_x);
    gg_program_def_tensor(pd, "yn", yn.id, 0, "f32", 2, d_x);
    gg_program_def_tensor(pd, "sum", sm.id, 0, "f32", 1, d_rv);
    gg_program_def_tensor(pd, "max", mx.id, 0, "f32", 2, d_r);
    gg_program_def_tensor(pd, "rsub", rs.id, 0, "f32", 2, d_x);
    gg_program_def_view(pd, "qflat", "qpos", 1, d_l);
    gg_program_def_tensor(pd, "iw", iw.id, 0, "i64", 1, d_l);
    /* the mask: key j visible from query i when j <= qpos[i] */
    gg_program_def_op(pd, "arange", "", "kv");
    gg_program_def_op(pd, "le", "kv,qpos", "mask");
    gg_program_def_op(pd, "fill", "", "zero");
    gg_program_def_op(pd, "fill", "", "ninf");
    gg_program_def_attr_f(pd, "value", -INFINITY);
    gg_program_def_op(pd, "where", "mask,zero,ninf", "bias");
    /* RMSNorm spelled out, eps 1e-5, through f16 */
    gg_program_def_op(pd, "pow", "x", "sq");
    gg_program_def_attr_f(pd, "scalar", 2);
    gg_program_def_op(pd, "mean", "sq", "ms");
    gg_program_def_op(pd, "add", "ms", "ms");
    gg_program_def_attr_f(pd, "scalar", 1e-5);
    gg_program_def_op(pd, "rsqrt", "ms", "inv");
    gg_program_def_op(pd, "mul", "x,inv", "xn");
    gg_program_def_op(pd, "cast", "xn", "xh");
    gg_program_def_op(pd, "cast", "xh", "yn");
    gg_program_def_op(pd, "sum", "x", "sum");
    gg_program_def_op(pd, "amax", "x", "max");
    gg_program_def_op(pd, "sub", "x", "rsub");   /* 1 - x */
    gg_program_def_attr_f(pd, "scalar", 1);
    gg_program_def_attr_f(pd, "reverse", 1);
    gg_program_def_op(pd, "add", "qflat", "iw");   /* wraps past INT64_MAX */
    gg_program_def_attr_f(pd, "scalar", 1);
    uint64_t prog = 0;
    int rc = gg_client_program_define(c, pd, &prog);
    gg_program_def_free(pd);
    if (!CHECKF(rc == 0, "define: %s", gg_client_last_error(c)))
        goto out;
    int64_t *q = (int64_t *)qp.f, *w = (int64_t *)iw.f;
    const uint8_t *m = (const uint8_t *)mask.f;
    for (int step = 0; step < 2; step++) {
        const int64_t q_at[2][L] = {{0, 3, INT64_MAX}, {6, -1, 2}};
        memcpy(q, q_at[step], sizeof q_at[step]);
        for (int i = 0; i < R * N; i++)
            x.f[i] = (float)(0.125 * ((i * (step + 5)) % 29) - 1.75);
        gg_replay_result res;
        rc = gg_client_replay(c, prog, 1, 0, &res);
        if (!CHECKF(rc == 0, "replay %d: %s", step, gg_client_last_error(c)))
            goto out;
        if (step == 0)
            CHECKF(res.captured && !res.fallback, "replay 0 captured the graph (captured %d, "
                   "fallback %d: %s)", res.captured, res.fallback, res.reason);
        else
            CHECKF(res.path == GG_PATH_GRAPH && !res.captured && !res.fallback,
                   "replay 1 is a graph hit (path %d, captured %d, fallback %d: %s)", res.path,
                   res.captured, res.fallback, res.reason);
        bool mask_ok = true, bias_ok = true;
        for (int i = 0; i < L; i++)
            for (int j = 0; j < S; j++) {
                const int vis = (int64_t)j <= q[i];
                mask_ok &= m[i * S + j] == vis;
                bias_ok &= bias.f[i * S + j] == (vis ? 0.0f : -INFINITY);
            }
        CHECKF(mask_ok, "replay %d: arange + le (broadcast i64)", step);
        CHECKF(bias_ok, "replay %d: where between fills 0 and -inf", step);
        double nerr = 0, serr = 0;
        bool max_ok = true, rs_ok = true;
        for (int r = 0; r < R; r++) {
            double ss = 0, s = 0, mxv = -INFINITY;
            for (int k = 0; k < N; k++) {
                const double v = x.f[r * N + k];
                ss += v * v;
                s += v;
                mxv = v > mxv ? v : mxv;
                rs_ok &= rs.f[r * N + k] == (float)(1.0 - v);
            }
            const double inv = 1.0 / sqrt(ss / N + 1e-5);
            for (int k = 0; k < N; k++) {
                const double want = x.f[r * N + k] * inv;
                const double e = fabs(yn.f[r * N + k] - want) / (fabs(want) + 1e-3);
                nerr = e > nerr ? e : nerr;
            }
            serr = fabs(sm.f[r] - s) > serr ? fabs(sm.f[r] - s) : serr;
            max_ok &= mx.f[r] == (float)mxv;
        }
        CHECKF(nerr < 2e-3, "replay %d: rmsnorm spelled out through f16 (max rel err %g)", step,
               nerr);
        CHECKF(serr < 1e-4, "replay %d: sum over the last dim (err %g)", step, serr);
        CHECKF(max_ok, "replay %d: amax keepdim", step);
        CHECKF(rs_ok, "replay %d: sub with a reversed scalar", step);
        bool iw_ok = true;
        for (int i = 0; i < L; i++)
            iw_ok &= w[i] == (int64_t)((uint64_t)q[i] + 1u);
        CHECKF(iw_ok, "replay %d: i64 add of a scalar, wrapping", step);
    }
    /* a node the rules refuse is refused at define time, with the reason */
    pd = gg_program_def_new("ops-ew-bad");
    gg_program_def_tensor(pd, "qpos", qp.id, 0, "i64", 2, d_qp);
    gg_program_def_tensor(pd, "iw", iw.id, 0, "i64", 2, d_qp);
    gg_program_def_op(pd, "div", "qpos,qpos", "iw");
    rc = gg_client_program_define(c, pd, &prog);
    gg_program_def_free(pd);
    CHECKF(rc == -EINVAL && strstr(gg_client_last_error(c), "div: takes f32, f16 or bf16"),
           "div of i64 is refused: %s", gg_client_last_error(c));
out:
    tbuf_free(&qp), tbuf_free(&mask), tbuf_free(&bias), tbuf_free(&x), tbuf_free(&yn);
    tbuf_free(&sm), tbuf_free(&mx), tbuf_free(&rs), tbuf_free(&iw);
    gg_client_close(c);
}

int main(void)
{
    h_init("test_ops_ew_daemon", 300);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_chain(&d);
        h_daemon_stop(&d);
    }
    return h_finish();
}
