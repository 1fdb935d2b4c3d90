/* SPDX-License-Identifier: MIT */
/* The decode-step ops' CPU references (kernels/ops_cpu.c) against the double
 * references in decode_refs.h on random data with odd sizes: embedding with
 * ids in and out of range; rope neox/gptj, full and partial rotary_dim, in
 * place; cache_write at positions 0, S-1, S and -1, with and without the
 * daemon's batch word; attention_decode at GQA ratios 1, 4 and 8 with lens
 * 0, S, past S and negative; argmax with a repeated maximum; cast between
 * every pair of floating dtypes.  Also the define-time rules of the new ops. */
#include <stdio.h>

#include "decode_refs.h"

static int g_pass, g_fail;

static void check(int ok, const char *what, double err)
{
    if (ok)
        g_pass++;
    else {
        g_fail++;
        printf("FAIL: %s (err %g)\n", what, err);
    }
}

static gg_tensor T(void *p, gg_dtype dt, int nd, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    gg_tensor t = {.data = p, .desc = {.dtype = dt, .ndim = nd, .dims = {d0, d1, d2, d3}}};
    return t;
}

static void attrs_of(const gg_op_def *op, gg_op_attrs *a)
{
    gg_ops_attr_defaults(op, a);
}

int main(void)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    const gg_op_def *emb = gg_ops_find("embedding"), *rope = gg_ops_find("rope"),
                    *cw = gg_ops_find("cache_write"), *att = gg_ops_find("attention_decode"),
                    *am = gg_ops_find("argmax"), *cast = gg_ops_find("cast");
    if (!emb || !rope || !cw || !att || !am || !cast) {
        printf("FAIL: the decode ops are not in the table\n");
        return 1;
    }
    char what[160];
    for (int di = 0; di < 3; di++) {
        gg_dtype dt = dts[di];
        const char *dn = gg_dtype_name(dt);
        double tol = dref_tol(dt);
        /* embedding */
        {
            const int64_t B = 5, V = 53, D = 41;
            int32_t ids[5] = {0, 52, 53, -1, 17};
            void *tab = malloc(V * D * 4), *y = malloc(B * D * 4);
            double *td = malloc(sizeof(double) * V * D), *yd = malloc(sizeof(double) * B * D);
            dref_fill(tab, td, dt, V * D, &seed, 1.0);
            gg_tensor in[2] = {T(ids, GG_DT_I32, 1, B, 0, 0, 0), T(tab, dt, 2, V, D, 0, 0)};
            gg_tensor out = T(y, dt, 2, B, D, 0, 0);
            gg_ops_run_cpu(emb, in, 2, &out, 1, NULL);
            dref_embedding(ids, td, yd, B, V, D);
            double e = dref_rel(y, dt, yd, B * D);
            snprintf(what, sizeof what, "embedding %s", dn);
            check(e == 0.0, what, e);
            free(tab), free(y), free(td), free(yd);
        }
        /* rope */
        for (int style = 0; style < 2; style++)
            for (int rdi = 0; rdi < 2; rdi++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    const int64_t B = 3, H = 5, Dh = 24;
                    const int rd = rdi ? 16 : 24;
                    int32_t pos[3] = {0, 36, 200};
                    void *x = malloc(B * H * Dh * 4), *y = malloc(B * H * Dh * 4);
                    double *xd = malloc(sizeof(double) * B * H * Dh),
                           *yd = malloc(sizeof(double) * B * H * Dh);
                    dref_fill(x, xd, dt, B * H * Dh, &seed, 1.0);
                    gg_op_attrs a;
                    attrs_of(rope, &a);
                    a.v[1] = style;
                    a.v[2] = rdi ? 16 : 0;
                    gg_tensor in[2] = {T(x, dt, 3, B, H, Dh, 0), T(pos, GG_DT_I32, 1, B, 0, 0, 0)};
                    gg_tensor out = T(inplace ? x : y, dt, 3, B, H, Dh, 0);
                    gg_ops_run_cpu(rope, in, 2, &out, 1, &a);
                    dref_rope(xd, pos, yd, B, H, Dh, rd, 10000.0, style);
                    double e = dref_rel(out.data, dt, yd, B * H * Dh);
                    snprintf(what, sizeof what, "rope %s %s rotary_dim %d%s", dn,
                             style ? "gptj" : "neox", rd, inplace ? " in place" : "");
                    check(e <= tol, what, e);
                    free(x), free(y), free(xd), free(yd);
                }
        /* cache_write */
        for (int bw = -1; bw <= 2; bw++) {
            const int64_t B = 4, S = 37, Hkv = 3, Dh = 24, row = Hkv * Dh;
            int32_t pos[4] = {0, 36, 37, -1}, word = bw;
            if (bw == 2) {
                pos[2] = 5;   /* real rows 0, 1; row 2 in range but padding */
                pos[3] = 7;
            }
            void *x = malloc(B * row * 4), *c = malloc(B * S * row * 4);
            double *xd = malloc(sizeof(double) * B * row), *cd = malloc(sizeof(double) * B * S * row);
            dref_fill(x, xd, dt, B * row, &seed, 1.0);
            dref_fill(c, cd, dt, B * S * row, &seed, 1.0);
            gg_tensor in[3] = {T(x, dt, 3, B, Hkv, Dh, 0), T(pos, GG_DT_I32, 1, B, 0, 0, 0),
                               T(&word, GG_DT_I32, 1, 1, 0, 0, 0)};
            gg_tensor out = T(c, dt, 4, B, S, Hkv, Dh);
            gg_ops_run_cpu(cw, in, bw < 0 ? 2 : 3, &out, 1, NULL);
            dref_cache_write(xd, pos, cd, B, bw < 0 ? B : bw, S, row);
            double e = dref_rel(c, dt, cd, B * S * row);
            snprintf(what, sizeof what, "cache_write %s batch word %d", dn, bw);
            check(e == 0.0, what, e);
            free(x), free(c), free(xd), free(cd);
        }
        /* attention_decode: GQA 1, 4, 8 */
        const int hcfg[3][2] = {{4, 4}, {8, 2}, {8, 1}};
        for (int hc = 0; hc < 3; hc++)
            for (int lc = 0; lc < 2; lc++) {
                const int64_t B = 3, S = 37, Dh = 24, Hq = hcfg[hc][0], Hkv = hcfg[hc][1];
                int32_t lens[2][3] = {{0, 37, 17}, {42, -3, 1}};
                void *q = malloc(B * Hq * Dh * 4), *k = malloc(B * S * Hkv * Dh * 4),
                     *v = malloc(B * S * Hkv * Dh * 4), *y = malloc(B * Hq * Dh * 4);
                double *qd = malloc(sizeof(double) * B * Hq * Dh),
                       *kd = malloc(sizeof(double) * B * S * Hkv * Dh),
                       *vd = malloc(sizeof(double) * B * S * Hkv * Dh),
                       *yd = malloc(sizeof(double) * B * Hq * Dh);
                dref_fill(q, qd, dt, B * Hq * Dh, &seed, 2.0);
                dref_fill(k, kd, dt, B * S * Hkv * Dh, &seed, 2.0);
                dref_fill(v, vd, dt, B * S * Hkv * Dh, &seed, 1.0);
                gg_op_attrs a;
                attrs_of(att, &a);
                double scale = 1.0 / sqrt((double)Dh);
                if (lc) {
                    a.v[0] = 0.3;
                    scale = (double)(float)0.3;
                }
                gg_tensor in[4] = {T(q, dt, 3, B, Hq, Dh, 0), T(k, dt, 4, B, S, Hkv, Dh),
                                   T(v, dt, 4, B, S, Hkv, Dh), T(lens[lc], GG_DT_I32, 1, B, 0, 0, 0)};
                gg_tensor out = T(y, dt, 3, B, Hq, Dh, 0);
                gg_ops_run_cpu(att, in, 4, &out, 1, &a);
                dref_attention(qd, kd, vd, lens[lc], yd, B, Hq, Hkv, S, Dh, scale);
                double e = dref_rel(y, dt, yd, B * Hq * Dh);
                snprintf(what, sizeof what, "attention_decode %s Hq %lld Hkv %lld lens %d,%d,%d",
                         dn, (long long)Hq, (long long)Hkv, lens[lc][0], lens[lc][1], lens[lc][2]);
                check(e <= tol, what, e);
                /* lens 0 gives zeros */
                if (lc == 0) {
                    int zero = 1;
                    for (int64_t i = 0; i < Hq * Dh; i++)
                        zero &= gg_load(y, dt, i) == 0.0f;
                    snprintf(what, sizeof what, "attention_decode %s lens 0 gives zeros", dn);
                    check(zero, what, 0);
                }
                free(q), free(k), free(v), free(y), free(qd), free(kd), free(vd), free(yd);
            }
        /* HF's forms: rope with an inv_freq operand (f16 like a half model's
         * buffer), attention_scaling and one i64 position for every row;
         * cache_write and attention_decode in the bhsd layout with i64 [1]
         * positions/lens, against the bshd double references on the
         * permuted cache */
        {
            const int64_t B = 3, H = 4, Dh = 16, half = 8;
            int64_t pos1 = 29;
            int32_t posr[3] = {29, 29, 29};
            uint16_t inv[8];
            void *x = malloc(B * H * Dh * 4), *y = malloc(B * H * Dh * 4);
            double *xd = malloc(sizeof(double) * B * H * Dh), *yd = malloc(sizeof(double) * B * H * Dh);
            dref_fill(x, xd, dt, B * H * Dh, &seed, 1.0);
            for (int i = 0; i < half; i++) /* theta's frequencies, exact in f16 as stored */
                gg_store(inv, GG_DT_F16, i, 1.0f / powf(10000.0f, (float)(2 * i) / (float)Dh));
            gg_op_attrs a;
            attrs_of(rope, &a);
            a.v[0] = 500.0; /* ignored: inv_freq decides */
            a.v[3] = 1.25;
            gg_tensor in[3] = {T(x, dt, 3, B, H, Dh, 0), T(&pos1, GG_DT_I64, 1, 1, 0, 0, 0),
                               T(inv, GG_DT_F16, 1, half, 0, 0, 0)};
            gg_tensor out = T(y, dt, 3, B, H, Dh, 0);
            gg_ops_run_cpu(rope, in, 3, &out, 1, &a);
            /* the reference with the stored frequencies: theta chosen per pair */
            for (int64_t i = 0; i < B * H * Dh; i++)
                yd[i] = xd[i];
            for (int64_t r = 0; r < B; r++)
                for (int64_t hh = 0; hh < H; hh++)
                    for (int i = 0; i < half; i++) {
                        double ang = (double)((float)posr[r] * gg_load(inv, GG_DT_F16, i));
                        int64_t b0 = (r * H + hh) * Dh, i0 = b0 + i, i1 = b0 + i + half;
                        yd[i0] = 1.25 * (xd[i0] * cos(ang) - xd[i1] * sin(ang));
                        yd[i1] = 1.25 * (xd[i1] * cos(ang) + xd[i0] * sin(ang));
                    }
            double e = dref_rel(y, dt, yd, B * H * Dh);
            snprintf(what, sizeof what, "rope %s inv_freq f16, attention_scaling, i64 [1]", dn);
            check(e <= tol, what, e);
            free(x), free(y), free(xd), free(yd);
        }
        for (int hc = 0; hc < 2; hc++) {
            const int64_t B = 2, S = 19, Dh = 24, Hkv = hc ? 2 : 3, Hq = hc ? 8 : 3;
            int64_t p64 = 11, len64 = 12;
            int32_t pr[2] = {11, 11}, lr[2] = {12, 12};
            const int64_t n = B * S * Hkv * Dh;
            void *x = malloc(B * Hkv * Dh * 4), *kc = malloc(n * 4), *vc = malloc(n * 4),
                 *q = malloc(B * Hq * Dh * 4), *y = malloc(B * Hq * Dh * 4);
            double *xd = malloc(sizeof(double) * B * Hkv * Dh), *kd = malloc(sizeof(double) * n),
                   *vd = malloc(sizeof(double) * n), *qd = malloc(sizeof(double) * B * Hq * Dh),
                   *yd = malloc(sizeof(double) * B * Hq * Dh), *kp = malloc(sizeof(double) * n),
                   *vp = malloc(sizeof(double) * n);
            dref_fill(x, xd, dt, B * Hkv * Dh, &seed, 1.0);
            dref_fill(kc, kd, dt, n, &seed, 2.0);
            dref_fill(vc, vd, dt, n, &seed, 1.0);
            dref_fill(q, qd, dt, B * Hq * Dh, &seed, 2.0);
            gg_op_attrs ca, aa;
            attrs_of(cw, &ca);
            attrs_of(att, &aa);
            ca.v[0] = 1.0;
            aa.v[1] = 1.0;
            gg_tensor cin[2] = {T(x, dt, 3, B, Hkv, Dh, 0), T(&p64, GG_DT_I64, 1, 1, 0, 0, 0)};
            gg_tensor cout_ = T(kc, dt, 4, B, Hkv, S, Dh);
            gg_ops_run_cpu(cw, cin, 2, &cout_, 1, &ca);
            /* the bhsd cache [b][h][s] as bshd [b][s][h] for the references */
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < Hkv; h++)
                    for (int64_t j = 0; j < S; j++)
                        for (int64_t d = 0; d < Dh; d++) {
                            kp[((b * S + j) * Hkv + h) * Dh + d] = kd[((b * Hkv + h) * S + j) * Dh + d];
                            vp[((b * S + j) * Hkv + h) * Dh + d] = vd[((b * Hkv + h) * S + j) * Dh + d];
                        }
            dref_cache_write(xd, pr, kp, B, B, S, Hkv * Dh);
            double e = 0;
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < Hkv; h++)
                    for (int64_t j = 0; j < S; j++)
                        for (int64_t d = 0; d < Dh; d++) {
                            double g = gg_load(kc, dt, ((b * Hkv + h) * S + j) * Dh + d);
                            double w = kp[((b * S + j) * Hkv + h) * Dh + d];
                            e = fmax(e, fabs(g - w));
                        }
            snprintf(what, sizeof what, "cache_write %s bhsd, i64 [1] position", dn);
            check(e == 0.0, what, e);
            gg_tensor ain[4] = {T(q, dt, 3, B, Hq, Dh, 0), T(kc, dt, 4, B, Hkv, S, Dh),
                                T(vc, dt, 4, B, Hkv, S, Dh), T(&len64, GG_DT_I64, 1, 1, 0, 0, 0)};
            gg_tensor aout = T(y, dt, 3, B, Hq, Dh, 0);
            gg_ops_run_cpu(att, ain, 4, &aout, 1, &aa);
            dref_attention(qd, kp, vp, lr, yd, B, Hq, Hkv, S, Dh, 1.0 / sqrt((double)Dh));
            e = dref_rel(y, dt, yd, B * Hq * Dh);
            snprintf(what, sizeof what, "attention_decode %s bhsd Hq %lld Hkv %lld, i64 [1] lens",
                     dn, (long long)Hq, (long long)Hkv);
            check(e <= tol, what, e);
            free(x), free(kc), free(vc), free(q), free(y), free(xd), free(kd), free(vd), free(qd);
            free(yd), free(kp), free(vp);
        }
        /* argmax */
        {
            const int64_t B = 5, V = 257;
            void *x = malloc(B * V * 4);
            double *xd = malloc(sizeof(double) * B * V);
            int32_t y[5], yr[5];
            dref_fill(x, xd, dt, B * V, &seed, 1.0);
            gg_store(x, dt, 1 * V + 100, 5.0f), gg_store(x, dt, 1 * V + 30, 5.0f);
            gg_store(x, dt, 2 * V + 256, 5.0f), gg_store(x, dt, 3 * V, 5.0f);
            for (int64_t i = 0; i < B * V; i++)
                xd[i] = gg_load(x, dt, i);
            gg_tensor in = T(x, dt, 2, B, V, 0, 0), out = T(y, GG_DT_I32, 1, B, 0, 0, 0);
            gg_ops_run_cpu(am, &in, 1, &out, 1, NULL);
            dref_argmax(xd, yr, B, V);
            snprintf(what, sizeof what, "argmax %s (first index of a repeated maximum: %d)", dn, y[1]);
            check(!memcmp(y, yr, sizeof y) && y[1] == 30 && y[2] == 256 && y[3] == 0, what, 0);
            free(x), free(xd);
        }
        /* cast to every floating dtype */
        for (int oi = 0; oi < 3; oi++) {
            const int64_t n = 333;
            void *x = malloc(n * 4), *y = malloc(n * 4), *want = malloc(n * 4);
            dref_fill(x, NULL, dt, n, &seed, 100.0);
            for (int64_t i = 0; i < n; i++)
                gg_store(want, dts[oi], i, (float)gg_load(x, dt, i));
            gg_tensor in = T(x, dt, 2, 9, 37, 0, 0), out = T(y, dts[oi], 2, 9, 37, 0, 0);
            gg_ops_run_cpu(cast, &in, 1, &out, 1, NULL);
            snprintf(what, sizeof what, "cast %s -> %s", dn, gg_dtype_name(dts[oi]));
            check(!memcmp(y, want, (size_t)n * gg_dtype_size(dts[oi])), what, 0);
            free(x), free(y), free(want);
        }
    }
    /* rules */
    {
        char err[256];
        gg_tensor_desc ids = {GG_DT_I32, 1, {3}}, tab = {GG_DT_F16, 2, {50, 8}},
                       y = {GG_DT_F16, 2, {3, 8}}, yf = {GG_DT_F32, 2, {3, 8}};
        gg_tensor_desc in[2] = {ids, tab};
        check(emb->check(emb, in, 2, &y, 1, NULL, err, sizeof err) == 0, "embedding rule ok", 0);
        check(emb->check(emb, in, 2, &yf, 1, NULL, err, sizeof err) < 0, "embedding y dtype refused", 0);
        gg_tensor_desc add_in[2] = {ids, ids};
        const gg_op_def *add = gg_ops_find("div");
        check(add->check(add, add_in, 2, &ids, 1, NULL, err, sizeof err) < 0,
              "div refuses i32", 0);
        gg_tensor_desc x = {GG_DT_F32, 3, {3, 4, 10}}, pos = {GG_DT_I32, 1, {3}};
        gg_tensor_desc rin[2] = {x, pos};
        gg_op_attrs a;
        gg_ops_attr_defaults(rope, &a);
        a.v[2] = 12;
        check(rope->check(rope, rin, 2, &x, 1, &a, err, sizeof err) < 0, "rope rotary_dim > Dh refused", 0);
        a.v[2] = 5;
        check(rope->check(rope, rin, 2, &x, 1, &a, err, sizeof err) < 0, "rope odd rotary_dim refused", 0);
        gg_tensor_desc q = {GG_DT_F32, 3, {3, 6, 10}}, kc = {GG_DT_F32, 4, {3, 20, 4, 10}};
        gg_tensor_desc ain[4] = {q, kc, kc, pos};
        check(att->check(att, ain, 4, &q, 1, NULL, err, sizeof err) < 0,
              "attention_decode Hq not a multiple of Hkv refused", 0);
        gg_tensor_desc kh = {GG_DT_F32, 4, {3, 4, 20, 10}}, q4 = {GG_DT_F32, 3, {3, 8, 10}},
                       l2 = {GG_DT_I64, 1, {2}}, l1 = {GG_DT_I64, 1, {1}};
        gg_tensor_desc hin[4] = {q4, kh, kh, l1};
        gg_op_attrs ha;
        gg_ops_attr_defaults(att, &ha);
        ha.v[1] = 1.0;
        check(att->check(att, hin, 4, &q4, 1, &ha, err, sizeof err) == 0,
              "attention_decode bhsd with i64 [1] lens ok", 0);
        hin[3] = l2;
        check(att->check(att, hin, 4, &q4, 1, &ha, err, sizeof err) < 0,
              "attention_decode lens of 2 for 3 rows refused", 0);
        gg_tensor_desc inv_bad = {GG_DT_F32, 1, {4}};
        gg_tensor_desc rin3[3] = {x, pos, inv_bad};
        gg_ops_attr_defaults(rope, &a);
        check(rope->check(rope, rin3, 3, &x, 1, &a, err, sizeof err) < 0,
              "rope inv_freq of 4 for Dh 10 refused", 0);
        rin3[2].dims[0] = 5;
        check(rope->check(rope, rin3, 3, &x, 1, &a, err, sizeof err) == 0, "rope inv_freq [Dh/2] ok", 0);
        gg_tensor_desc lx = {GG_DT_F32, 2, {3, 9}}, li = {GG_DT_I32, 1, {3}};
        check(am->check(am, &lx, 1, &li, 1, NULL, err, sizeof err) == 0, "argmax rule ok", 0);
    }
    printf("test_ops_decode: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
