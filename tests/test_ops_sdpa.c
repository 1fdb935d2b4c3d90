/* SPDX-License-Identifier: MIT */
/* sdpa through the op table's CPU reference against attention computed here
 * in double from the stored (rounded) operands: every floating dtype, odd
 * sizes, MHA, GQA and MQA head maps, one and several query rows, causal
 * (L < S and L > S, where the first rows have no key), bool masks and
 * additive ones (with -inf) broadcast from 1 to 4 dims, a fully masked row
 * (zeros), the scale attribute, and the rule's refusals with their
 * messages. */
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static uint64_t g_rng = 0xa4093822299f31d0ull;

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

enum { MASK_NONE, MASK_BOOL, MASK_ADD };

typedef struct {
    int64_t B, Hq, Hkv, L, S, D;
    int causal, mask, mnd;
    int64_t mdims[4];
    double scale;   /* 0: 1/sqrt(D) */
    int dead_row;   /* mask out every key of (b 0, h 0, l 0) */
} sd_case;

/* The mask element for (b, h, l, j) of a mask of dims md (right-aligned). */
static int64_t mask_index(const sd_case *c, int64_t b, int64_t h, int64_t l, int64_t j)
{
    const int64_t full[4] = {b, h, l, j};
    int64_t o = 0;
    for (int i = 0; i < c->mnd; i++) {
        const int64_t d = c->mdims[i], at = full[4 - c->mnd + i];
        o = o * d + (d == 1 ? 0 : at);
    }
    return o;
}

static void run_case(const gg_op_def *op, gg_dtype dt, const sd_case *c, const char *label)
{
    const int64_t nq = c->B * c->Hq * c->L * c->D, nk = c->B * c->Hkv * c->S * c->D;
    int64_t nm = 1;
    for (int i = 0; i < c->mnd; i++)
        nm *= c->mdims[i];
    void *q = malloc((size_t)nq * 4), *k = malloc((size_t)nk * 4), *v = malloc((size_t)nk * 4),
         *y = malloc((size_t)nq * 4), *m = malloc((size_t)nm * 4);
    double *qd = malloc(sizeof(double) * (size_t)nq), *kd = malloc(sizeof(double) * (size_t)nk),
           *vd = malloc(sizeof(double) * (size_t)nk), *md = malloc(sizeof(double) * (size_t)nm),
           *yd = malloc(sizeof(double) * (size_t)nq), *sc = malloc(sizeof(double) * (size_t)c->S);
    for (int64_t i = 0; i < nq; i++) {
        gg_store(q, dt, i, (float)(2 * unit()));
        qd[i] = gg_load(q, dt, i);
    }
    for (int64_t i = 0; i < nk; i++) {
        gg_store(k, dt, i, (float)(2 * unit()));
        kd[i] = gg_load(k, dt, i);
        gg_store(v, dt, i, (float)unit());
        vd[i] = gg_load(v, dt, i);
    }
    for (int64_t i = 0; i < nm; i++) {
        if (c->mask == MASK_BOOL) {
            ((uint8_t *)m)[i] = (unit() > -0.4);
            md[i] = ((uint8_t *)m)[i];
        } else if (c->mask == MASK_ADD) {
            const double u = unit();
            gg_store(m, dt, i, u < -0.7 ? -INFINITY : (float)(3 * u));
            md[i] = gg_load(m, dt, i);
        }
    }
    if (c->dead_row)
        for (int64_t j = 0; j < c->S; j++) {
            const int64_t mi = mask_index(c, 0, 0, 0, j);
            if (c->mask == MASK_BOOL)
                ((uint8_t *)m)[mi] = 0;
            else
                gg_store(m, dt, mi, -INFINITY);
            md[mi] = c->mask == MASK_BOOL ? 0 : -INFINITY;
        }
    /* the reference */
    const double scale = c->scale != 0 ? (double)(float)c->scale : 1.0 / sqrt((double)c->D);
    int dead_zero = 1;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t l = 0; l < c->L; l++) {
                const int64_t kv = (b * c->Hkv + h / (c->Hq / c->Hkv)) * c->S * c->D;
                const double *qq = qd + ((b * c->Hq + h) * c->L + l) * c->D;
                double mx = -INFINITY;
                for (int64_t j = 0; j < c->S; j++) {
                    sc[j] = -INFINITY;
                    if (c->causal && j > l + c->S - c->L)
                        continue;
                    const int64_t mi = mask_index(c, b, h, l, j);
                    if (c->mask == MASK_BOOL && md[mi] == 0)
                        continue;
                    double s = 0;
                    for (int64_t d = 0; d < c->D; d++)
                        s += qq[d] * kd[kv + j * c->D + d];
                    s *= scale;
                    if (c->mask == MASK_ADD)
                        s += md[mi];
                    sc[j] = s;
                    if (s > mx)
                        mx = s;
                }
                double *yy = yd + ((b * c->Hq + h) * c->L + l) * c->D;
                double tot = 0;
                for (int64_t d = 0; d < c->D; d++)
                    yy[d] = 0;
                if (mx == -INFINITY)
                    continue; /* no key: zeros */
                for (int64_t j = 0; j < c->S; j++) {
                    if (sc[j] == -INFINITY)
                        continue;
                    const double p = exp(sc[j] - mx);
                    tot += p;
                    for (int64_t d = 0; d < c->D; d++)
                        yy[d] += p * vd[kv + j * c->D + d];
                }
                for (int64_t d = 0; d < c->D; d++)
                    yy[d] /= tot;
            }
    gg_tensor in[4] = {
        {q, {dt, 4, {c->B, c->Hq, c->L, c->D}}},
        {k, {dt, 4, {c->B, c->Hkv, c->S, c->D}}},
        {v, {dt, 4, {c->B, c->Hkv, c->S, c->D}}},
        {m, {c->mask == MASK_BOOL ? GG_DT_BOOL : dt, c->mnd, {0}}},
    };
    memcpy(in[3].desc.dims, c->mdims, sizeof c->mdims);
    gg_tensor out = {y, {dt, 4, {c->B, c->Hq, c->L, c->D}}};
    const int nin = c->mask == MASK_NONE ? 3 : 4;
    gg_op_attrs at;
    gg_ops_attr_defaults(op, &at);
    at.v[0] = c->scale;
    at.v[1] = c->causal;
    gg_tensor_desc ind[4] = {in[0].desc, in[1].desc, in[2].desc, in[3].desc};
    char err[256] = "", what[200], detail[120];
    snprintf(what, sizeof what, "sdpa %s %s", gg_dtype_name(dt), label);
    check(op->check(op, ind, nin, &out.desc, 1, &at, err, sizeof err) == 0, what, err);
    gg_ops_run_cpu(op, in, nin, &out, 1, &at);
    double num = 0, den = 0;
    for (int64_t i = 0; i < nq; i++) {
        const double d = gg_load(y, dt, i) - yd[i];
        num += d * d;
        den += yd[i] * yd[i];
    }
    const double rel = sqrt(num / (den > 0 ? den : 1));
    const double tol = dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 2e-3 : 1e-2;
    snprintf(detail, sizeof detail, "rel L2 %g above %g", rel, tol);
    check(rel <= tol, what, detail);
    /* rows with no key are exactly zero */
    for (int64_t i = 0; i < nq; i++)
        if (yd[i] == 0 && gg_load(y, dt, i) != 0.0f)
            dead_zero = 0;
    check(dead_zero, what, "a row with no key is not exactly zero");
    free(q), free(k), free(v), free(y), free(m);
    free(qd), free(kd), free(vd), free(md), free(yd), free(sc);
}

static void test_values(void)
{
    const gg_op_def *op = gg_ops_find("sdpa");
    check(op != NULL, "sdpa is in the table", "");
    if (!op)
        return;
    const struct {
        const char *label;
        sd_case c;
    } cases[] = {
        {"MHA, one row, no mask", {2, 4, 4, 1, 37, 24, 0, MASK_NONE, 0, {0}, 0, 0}},
        {"GQA 3, causal, 3 rows", {2, 6, 2, 3, 37, 24, 1, MASK_NONE, 0, {0}, 0, 0}},
        {"MQA, 70 keys, scale 0.3", {1, 8, 1, 1, 70, 40, 0, MASK_NONE, 0, {0}, 0.3, 0}},
        {"bool mask [B, 1, L, S] with a dead row",
         {2, 4, 2, 2, 37, 24, 0, MASK_BOOL, 4, {2, 1, 2, 37}, 0, 1}},
        {"bool mask [S]", {2, 4, 4, 1, 37, 24, 0, MASK_BOOL, 1, {37}, 0, 0}},
        {"additive mask [1, 1, L, S] with -inf, causal",
         {2, 4, 2, 3, 37, 24, 1, MASK_ADD, 4, {1, 1, 3, 37}, 0, 0}},
        {"additive mask [B, Hq, L, S] with a dead row",
         {2, 6, 3, 2, 67, 16, 0, MASK_ADD, 4, {2, 6, 2, 67}, 0, 1}},
        {"additive mask [Hq, 1, S] (3-D)", {2, 4, 2, 2, 37, 24, 0, MASK_ADD, 3, {4, 1, 37}, 0, 0}},
        {"causal with L > S: the first rows have no key",
         {1, 2, 2, 5, 3, 8, 1, MASK_NONE, 0, {0}, 0, 0}},
        {"D 1, one key", {1, 1, 1, 1, 1, 1, 0, MASK_NONE, 0, {0}, 0, 0}},
    };
    const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    for (int di = 0; di < 3; di++)
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
            run_case(op, dts[di], &cases[ci].c, cases[ci].label);
}

static gg_tensor_desc DS(gg_dtype dt, int nd, int64_t a, int64_t b, int64_t c, int64_t d)
{
    gg_tensor_desc t = {.dtype = dt, .ndim = nd, .dims = {a, b, c, d}};
    for (int i = nd; i < 4; i++)
        t.dims[i] = 0;
    return t;
}

static void refused(const gg_tensor_desc *in, int nin, const gg_tensor_desc *y, double causal,
                    const char *needle, const char *what)
{
    const gg_op_def *op = gg_ops_find("sdpa");
    gg_op_attrs at;
    gg_ops_attr_defaults(op, &at);
    at.v[1] = causal;
    char err[256] = "", label[200];
    int rc = op->check(op, in, nin, y, 1, &at, err, sizeof err);
    snprintf(label, sizeof label, "sdpa refuses %s with a clear message:", what);
    check(rc == -EINVAL && strstr(err, needle) != NULL, label, err);
}

static void test_rules(void)
{
    const gg_dtype f = GG_DT_BF16;
    const gg_tensor_desc q = DS(f, 4, 2, 6, 1, 16), k = DS(f, 4, 2, 4, 30, 16),
                         k2 = DS(f, 4, 2, 2, 30, 16), kD = DS(f, 4, 2, 2, 30, 8),
                         vbad = DS(f, 4, 2, 2, 31, 16), q3 = DS(f, 3, 2, 6, 16, 0),
                         mf = DS(GG_DT_F32, 4, 2, 1, 1, 30), mb = DS(GG_DT_BOOL, 4, 2, 1, 2, 30),
                         mok = DS(GG_DT_BOOL, 2, 1, 30, 0, 0), kf = DS(GG_DT_F32, 4, 2, 2, 30, 16);
    gg_tensor_desc hq[3] = {q, k, k}, d_ok[3] = {q, k2, k2}, d_d[3] = {q, kD, kD},
                   d_v[3] = {q, k2, vbad}, d_q3[3] = {q3, k2, k2}, d_mf[4] = {q, k2, k2, mf},
                   d_mb[4] = {q, k2, k2, mb}, d_mok[4] = {q, k2, k2, mok},
                   d_kf[3] = {q, kf, kf};
    refused(hq, 3, &q, 0, "Hq a multiple of Hkv", "6 q heads over 4 kv heads");
    refused(d_d, 3, &q, 0, "B and D of q", "k with another head dim");
    refused(d_v, 3, &q, 0, "v must have the shape of k", "v longer than k");
    refused(d_q3, 3, &q3, 0, "4-D", "a 3-D q");
    refused(d_mf, 4, &q, 0, "mask must be bool", "an f32 mask on bf16 attention");
    refused(d_mb, 4, &q, 0, "does not broadcast", "a mask with 2 rows for L 1");
    refused(d_ok, 3, &q, 2, "causal must be 0 or 1", "causal 2");
    refused(d_kf, 3, &q, 0, "dtype", "k of another dtype");
    const gg_op_def *op = gg_ops_find("sdpa");
    gg_op_attrs at;
    gg_ops_attr_defaults(op, &at);
    char err[256] = "";
    check(op->check(op, d_mok, 4, &q, 1, &at, err, sizeof err) == 0,
          "sdpa takes a 2-D bool mask [1, S]:", err);
}

int main(void)
{
    test_values();
    test_rules();
    printf("test_ops_sdpa: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
