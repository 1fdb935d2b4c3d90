/* SPDX-License-Identifier: MIT */
/* The attention family: sdpa, torch's scaled_dot_product_attention for the
 * shapes a decode step (or a short prefill) hands it.  Rule and CPU
 * reference.  attention_decode (the decode family) reads a cache in the
 * daemon's own layout with per-row lengths; sdpa takes q, k, v as torch
 * has them and an optional mask.
 *
 *   sdpa   in q [B, Hq, L, D], k [B, Hkv, S, D], v [B, Hkv, S, D][, mask]
 *          out y [B, Hq, L, D]          attrs scale, causal
 *   q, k, v and y share one floating dtype; Hq a multiple of Hkv (q head h
 *   reads kv head h / (Hq / Hkv)).  mask: bool (true = attend) or q's dtype
 *   (added to the scores), broadcast to [B, Hq, L, S] (right-aligned, each
 *   dim equal or 1).  scale 0: 1/sqrt(D).  causal 1: query i attends keys
 *   j <= i + S - L.  round_p 1: each weight exp(score - max) is rounded to
 *   y's dtype before it weighs v, the sum it is divided by is not (what
 *   the fused attention kernels PyTorch runs for f16/bf16 do).  Scores, softmax and the weighted sum in f32; a row with
 *   no key left (masked out, or every score -inf) gives zeros. */

/* a*b+c stays two roundings (ops_cpu.c says why) */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "ops_rules.h"

#include <math.h>
#include <stdlib.h>

/* ---- rule -------------------------------------------------------------------- */

static int at_check_sdpa(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                         const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                         char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    const gg_tensor_desc *q = &in[0], *k = &in[1], *v = &in[2], *y = &out[0];
    gg_shape_buf sa, sb;
    if ((rc = gg_rule_dtype(op, "q", q, 1, err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "k", k, "q", q->dtype, err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "v", v, "q", q->dtype, err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "y", y, "q", q->dtype, err, errlen)) ||
        (rc = gg_rule_ndim(op, "q", q, 4, "[B, Hq, L, D]", err, errlen)) ||
        (rc = gg_rule_ndim(op, "k", k, 4, "[B, Hkv, S, D]", err, errlen)))
        return rc;
    if (k->dims[0] != q->dims[0] || k->dims[3] != q->dims[3] || q->dims[1] % k->dims[1] != 0)
        return gg_rule_fail(err, errlen, "%s: k must be [B, Hkv, S, D] with B and D of q %s and "
                            "Hq a multiple of Hkv, got %s", op->name, gg_rule_shape_str(q, &sa),
                            gg_rule_shape_str(k, &sb));
    if (!gg_rule_same_shape(v, k))
        return gg_rule_fail(err, errlen, "%s: v must have the shape of k %s, got %s", op->name,
                            gg_rule_shape_str(k, &sa), gg_rule_shape_str(v, &sb));
    const double causal = gg_rule_attr(op, attrs, 1);
    if (causal != 0 && causal != 1)
        return gg_rule_fail(err, errlen, "%s: causal must be 0 or 1, got %g", op->name, causal);
    const double round_p = gg_rule_attr(op, attrs, 2);
    if (round_p != 0 && round_p != 1)
        return gg_rule_fail(err, errlen, "%s: round_p must be 0 or 1, got %g", op->name,
                            round_p);
    if (nin == 4) {
        const gg_tensor_desc *m = &in[3];
        if (m->dtype != GG_DT_BOOL && m->dtype != q->dtype)
            return gg_rule_fail(err, errlen, "%s: mask must be bool (true: attend) or %s (q's "
                                "dtype, added to the scores), got %s", op->name,
                                gg_dtype_name(q->dtype), gg_dtype_name(m->dtype));
        const int64_t full[4] = {q->dims[0], q->dims[1], q->dims[2], k->dims[2]};
        for (int i = 0; i < m->ndim; i++) {
            const int64_t f = full[4 - m->ndim + i];
            if (m->dims[i] != f && m->dims[i] != 1) {
                gg_tensor_desc fd = {.dtype = m->dtype, .ndim = 4,
                                     .dims = {full[0], full[1], full[2], full[3]}};
                return gg_rule_fail(err, errlen, "%s: mask %s does not broadcast to [B, Hq, L, "
                                    "S] = %s (right-aligned, each dim equal or 1)", op->name,
                                    gg_rule_shape_str(m, &sa), gg_rule_shape_str(&fd, &sb));
            }
        }
    }
    return gg_rule_out(op, y, q, "the shape of q", err, errlen);
}

/* ---- CPU reference ------------------------------------------------------------ */

/* v as a tensor of dtype dt holds it (round_p). */
static float at_round(gg_dtype dt, float v)
{
    switch (dt) {
    case GG_DT_F16:
        return gg_f16_to_f32_inl(gg_f32_to_f16_inl(v));
    case GG_DT_BF16:
        return gg_bf16_to_f32_inl(gg_f32_to_bf16_inl(v));
    default:
        return v;
    }
}

/* Strides (in elements) of a mask broadcast over [B, Hq, L, S]: 0 on the
 * dims it does not have or has as 1. */
static void at_mask_strides(const gg_tensor_desc *m, int64_t st[4])
{
    int64_t s = 1;
    for (int i = 3; i >= 0; i--) {
        const int k = i - (4 - m->ndim);
        const int64_t d = k < 0 ? 1 : m->dims[k];
        st[i] = d == 1 ? 0 : s;
        s *= d;
    }
}

static void at_cpu_sdpa(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                        const gg_op_attrs *attrs)
{
    (void)nout;
    const gg_tensor *q = &in[0], *k = &in[1], *v = &in[2], *y = &out[0];
    const gg_tensor *mask = nin == 4 ? &in[3] : NULL;
    const gg_dtype dt = q->desc.dtype;
    const int64_t B = q->desc.dims[0], Hq = q->desc.dims[1], L = q->desc.dims[2],
                  D = q->desc.dims[3], Hkv = k->desc.dims[1], S = k->desc.dims[2];
    const int64_t grp = Hq / Hkv;
    const float scale = attrs->v[0] != 0.0 ? (float)attrs->v[0] : 1.0f / sqrtf((float)D);
    const int causal = attrs->v[1] != 0, round_p = attrs->v[2] != 0;
    int64_t ms[4] = {0, 0, 0, 0};
    if (mask)
        at_mask_strides(&mask->desc, ms);
    const int mbool = mask && mask->desc.dtype == GG_DT_BOOL;
    float *qf = malloc(sizeof(float) * (size_t)(2 * D + S));
    if (!qf) {
        /* no memory for the row: NaN, which no caller takes for a result */
        for (int64_t i = 0; i < B * Hq * L * D; i++)
            gg_store(y->data, dt, i, NAN);
        return;
    }
    float *acc = qf + D, *sc = acc + D;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t kv = (b * Hkv + h / grp) * S * D;
            for (int64_t l = 0; l < L; l++) {
                const int64_t qo = ((b * Hq + h) * L + l) * D;
                const int64_t jend = causal ? (l + S - L + 1 < S ? l + S - L + 1 : S) : S;
                for (int64_t d = 0; d < D; d++) {
                    qf[d] = gg_load(q->data, dt, qo + d);
                    acc[d] = 0.0f;
                }
                float m = -INFINITY;
                for (int64_t j = 0; j < jend; j++) {
                    const int64_t mo = b * ms[0] + h * ms[1] + l * ms[2] + j * ms[3];
                    if (mbool && !((const uint8_t *)mask->data)[mo]) {
                        sc[j] = -INFINITY;
                        continue;
                    }
                    float dot = 0.0f;
                    for (int64_t d = 0; d < D; d++)
                        dot += qf[d] * gg_load(k->data, dt, kv + j * D + d);
                    sc[j] = dot * scale;
                    if (mask && !mbool)
                        sc[j] += gg_load(mask->data, dt, mo);
                    if (sc[j] > m || isnan(sc[j]))   /* a NaN score makes the row NaN */
                        m = isnan(m) ? m : sc[j];
                }
                float l_sum = 0.0f;
                if (m != -INFINITY)
                    for (int64_t j = 0; j < jend; j++) {
                        if (sc[j] == -INFINITY)
                            continue;
                        const float p = expf(sc[j] - m);
                        l_sum += p;
                        const float pv = round_p ? at_round(dt, p) : p;
                        for (int64_t d = 0; d < D; d++)
                            acc[d] += pv * gg_load(v->data, dt, kv + j * D + d);
                    }
                for (int64_t d = 0; d < D; d++)
                    gg_store(y->data, dt, qo + d, m != -INFINITY ? acc[d] / l_sum : 0.0f);
            }
        }
    free(qf);
}

/* ---- row ------------------------------------------------------------------------ */

GG_OP_ROW(SDPA, .nin_min = 3, .nin_max = 4, .nout = 1, .in_names = {"q", "k", "v", "mask"},
          .out_names = {"y"}, .nattrs = 3,
          .attrs = {{.name = "scale", .kind = GG_ATTR_FLOAT, .def = 0},
                    {.name = "causal", .kind = GG_ATTR_FLOAT, .def = 0},
                    {.name = "round_p", .kind = GG_ATTR_FLOAT, .def = 0}},
          .check = at_check_sdpa, .cpu = at_cpu_sdpa);
