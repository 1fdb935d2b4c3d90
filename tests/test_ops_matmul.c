/* SPDX-License-Identifier: MIT */
/* bmm through the op table's CPU reference against a product computed here
 * in double from the stored (rounded) operands: every floating dtype, odd
 * sizes, K of 1 (HF rotary's inv_freq @ positions), one row (a query against
 * the keys), trans_b, batch dims broadcast both ways and operands of
 * different ndim (right-aligned, as torch.matmul), and the rule's
 * refusals with their messages. */
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static uint64_t g_rng = 0x13198a2e03707344ull;

static void check(int ok, const char *what, const char *detail)
{
    if (ok) {
        g_pass++;
        return;
    }
    g_fail++;
    printf("FAIL: %s %s\n", what, detail);
}

static double unit(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

static int64_t prod(const int64_t *d, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= d[i];
    return p;
}

typedef struct {
    int na, nb, tb;
    int64_t a[4], b[4], y[4];
} mm_case;

static void test_values(void)
{
    const gg_op_def *op = gg_ops_find("bmm");
    check(op != NULL, "bmm is in the table", "");
    if (!op)
        return;
    const mm_case cases[] = {
        {2, 2, 0, {7, 13}, {13, 9}, {7, 9}},
        {2, 2, 1, {7, 13}, {9, 13}, {7, 9}},
        {3, 3, 0, {3, 5, 17}, {3, 17, 6}, {3, 5, 6}},
        {3, 3, 0, {2, 16, 1}, {2, 1, 5}, {2, 16, 5}},           /* K = 1 */
        {4, 4, 0, {2, 1, 5, 8}, {1, 3, 8, 4}, {2, 3, 5, 4}},    /* both broadcast */
        {2, 4, 0, {5, 8}, {2, 3, 8, 4}, {2, 3, 5, 4}},          /* a of fewer dims */
        {4, 3, 1, {2, 3, 1, 24}, {3, 37, 24}, {2, 3, 1, 37}},   /* q @ k^T, one row */
        {4, 4, 0, {1, 2, 37, 19}, {1, 2, 19, 70}, {1, 2, 37, 70}}, /* past one 64 x 64 tile */
        {3, 2, 1, {4, 3, 11}, {6, 11}, {4, 3, 6}},               /* b of fewer dims */
    };
    const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    char what[200], detail[160];
    for (int di = 0; di < 3; di++) {
        const gg_dtype dt = dts[di];
        const double tol = dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 2e-3 : 1e-2;
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const mm_case *c = &cases[ci];
            const int ny = c->na > c->nb ? c->na : c->nb;
            const int64_t na = prod(c->a, c->na), nb = prod(c->b, c->nb), nyel = prod(c->y, ny);
            void *a = malloc((size_t)na * 4), *b = malloc((size_t)nb * 4),
                 *y = malloc((size_t)nyel * 4);
            double *ad = malloc(sizeof(double) * (size_t)na),
                   *bd = malloc(sizeof(double) * (size_t)nb),
                   *yd = malloc(sizeof(double) * (size_t)nyel);
            for (int64_t i = 0; i < na; i++) {
                gg_store(a, dt, i, (float)unit());
                ad[i] = gg_load(a, dt, i);
            }
            for (int64_t i = 0; i < nb; i++) {
                gg_store(b, dt, i, (float)unit());
                bd[i] = gg_load(b, dt, i);
            }
            gg_tensor in[2] = {{a, {dt, c->na, {0}}}, {b, {dt, c->nb, {0}}}};
            gg_tensor out = {y, {dt, ny, {0}}};
            memcpy(in[0].desc.dims, c->a, sizeof c->a);
            memcpy(in[1].desc.dims, c->b, sizeof c->b);
            memcpy(out.desc.dims, c->y, sizeof c->y);
            gg_op_attrs at;
            gg_ops_attr_defaults(op, &at);
            at.v[0] = c->tb;
            char err[256] = "";
            gg_tensor_desc ind[2] = {in[0].desc, in[1].desc};
            snprintf(what, sizeof what, "bmm %s case %zu (a %dD, b %dD, trans_b %d)",
                     gg_dtype_name(dt), ci, c->na, c->nb, c->tb);
            check(op->check(op, ind, 2, &out.desc, 1, &at, err, sizeof err) == 0, what, err);
            gg_ops_run_cpu(op, in, 2, &out, 1, &at);
            /* the reference: y's batch index mapped into each operand by
             * right-aligned broadcasting, then the sum over k in double */
            const int64_t M = c->y[ny - 2], N = c->y[ny - 1], K = c->a[c->na - 1];
            const int nbd = ny - 2;
            for (int64_t e = 0; e < nyel; e++) {
                int64_t idx[4] = {0, 0, 0, 0}, r = e;
                for (int d = ny - 1; d >= 0; d--) {
                    idx[d] = r % c->y[d];
                    r /= c->y[d];
                }
                int64_t ao = 0, bo = 0;
                for (int d = 0; d < nbd; d++) {
                    const int ka = d - (nbd - (c->na - 2)), kb = d - (nbd - (c->nb - 2));
                    if (ka >= 0)
                        ao = ao * c->a[ka] + (c->a[ka] == 1 ? 0 : idx[d]);
                    if (kb >= 0)
                        bo = bo * c->b[kb] + (c->b[kb] == 1 ? 0 : idx[d]);
                }
                const int64_t m = idx[ny - 2], n = idx[ny - 1];
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += ad[ao * M * K + m * K + k] *
                         bd[bo * K * N + (c->tb ? n * K + k : k * N + n)];
                yd[e] = s;
            }
            double num = 0, den = 0;
            for (int64_t i = 0; i < nyel; i++) {
                const double d = gg_load(y, dt, i) - yd[i];
                num += d * d;
                den += yd[i] * yd[i];
            }
            const double rel = sqrt(num / (den > 0 ? den : 1));
            snprintf(detail, sizeof detail, "rel L2 %g above %g", rel, tol);
            check(rel <= tol, what, detail);
            free(a), free(b), free(y), free(ad), free(bd), free(yd);
        }
    }
}

static gg_tensor_desc DS(gg_dtype dt, int nd, int64_t a, int64_t b, int64_t c, int64_t d)
{
    gg_tensor_desc t = {.dtype = dt, .ndim = nd, .dims = {a, b, c, d}};
    for (int i = nd; i < 4; i++)
        t.dims[i] = 0;
    return t;
}

static void refused(const gg_tensor_desc *a, const gg_tensor_desc *b, const gg_tensor_desc *y,
                    double tb, const char *needle, const char *what)
{
    const gg_op_def *op = gg_ops_find("bmm");
    gg_op_attrs at;
    gg_ops_attr_defaults(op, &at);
    at.v[0] = tb;
    gg_tensor_desc in[2] = {*a, *b};
    char err[256] = "";
    int rc = op->check(op, in, 2, y, 1, &at, err, sizeof err);
    char label[200];
    snprintf(label, sizeof label, "bmm refuses %s with a clear message:", what);
    check(rc == -EINVAL && strstr(err, needle) != NULL, label, err);
}

static void test_rules(void)
{
    const gg_dtype f = GG_DT_F16;
    gg_tensor_desc a = DS(f, 3, 2, 5, 8, 0), b = DS(f, 3, 2, 8, 4, 0), y = DS(f, 3, 2, 5, 4, 0);
    gg_tensor_desc bk = DS(f, 3, 2, 7, 4, 0), bbat = DS(f, 3, 3, 8, 4, 0),
                   bdt = DS(GG_DT_F32, 3, 2, 8, 4, 0), a1 = DS(f, 1, 8, 0, 0, 0),
                   yw = DS(f, 3, 2, 5, 5, 0), ai = DS(GG_DT_I32, 3, 2, 5, 8, 0),
                   yi = DS(GG_DT_I32, 3, 2, 5, 4, 0), bi = DS(GG_DT_I32, 3, 2, 8, 4, 0);
    refused(&a, &bk, &y, 0, "K = 8", "K that differs");
    refused(&a, &bbat, &y, 0, "do not broadcast", "batch dims 2 and 3");
    refused(&a, &bdt, &y, 0, "dtype", "operands of two dtypes");
    refused(&a1, &b, &y, 0, "2 to 4 dims", "a 1-D operand");
    refused(&a, &b, &yw, 0, "must have shape [2, 5, 4]", "y of a wrong shape");
    refused(&a, &b, &y, 2, "trans_b must be 0 or 1", "trans_b 2");
    refused(&a, &b, &y, 1, "[..., N, K] (trans_b 1)", "b not transposed under trans_b 1");
    refused(&ai, &bi, &yi, 0, "f32, f16 or bf16", "i32 operands");
}

int main(void)
{
    test_values();
    test_rules();
    printf("test_ops_matmul: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
