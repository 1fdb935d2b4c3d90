/* SPDX-License-Identifier: MIT */
/* The reduction family: sum, mean, amax, amin over the last dim.  Rows,
 * rules and CPU references.
 *
 *   in x [..., N] (floating; sum, amax, amin also i32, i64)
 *   out y: x's dims with the last one 1 (keepdim), or without it (a 1-D x
 *   gives [1]); x's dtype.
 * Floating rows accumulate in f32 in a fixed order that depends on N only
 * (8 lanes, then the tail: rmsnorm's order), so a row gives the same bits
 * at any batch; amax and amin propagate NaN.  Integer rows are exact
 * (int64, wrapping for sum). */

/* a*b+c stays two roundings (ops_cpu.c says why) */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "ops_rules.h"

#include <math.h>

static int red_check(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                     const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                     size_t errlen)
{
    GG_RULE_COMMON_NODT();
    const gg_tensor_desc *x = &in[0], *y = &out[0];
    int rc = gg_rule_same_dtype(op, "y", y, "x", x->dtype, err, errlen);
    if (rc)
        return rc;
    if (x->dtype == GG_DT_BOOL || (op->id == GG_OP_MEAN && !gg_dtype_is_float(x->dtype)))
        return gg_rule_fail(err, errlen, "%s: x must be %s, got %s", op->name,
                            op->id == GG_OP_MEAN ? "f32, f16 or bf16"
                                                 : "f32, f16, bf16, i32 or i64",
                            gg_dtype_name(x->dtype));
    gg_tensor_desc keep = *x, drop = *x;
    keep.dims[x->ndim - 1] = 1;
    if (x->ndim > 1)
        drop.ndim--;
    if (gg_rule_same_shape(y, &keep) || gg_rule_same_shape(y, &drop))
        return 0;
    gg_shape_buf a, b, c;
    return gg_rule_fail(err, errlen, "%s: y must have shape %s or %s (x's dims with the last one "
                        "1, or without it), got %s",
                        op->name, gg_rule_shape_str(&keep, &a), gg_rule_shape_str(&drop, &b),
                        gg_rule_shape_str(y, &c));
}

static inline float red_ldf(const void *p, gg_dtype dt, int64_t i)
{
    switch (dt) {
    case GG_DT_F32:
        return ((const float *)p)[i];
    case GG_DT_F16:
        return gg_f16_to_f32_inl(((const uint16_t *)p)[i]);
    default:
        return gg_bf16_to_f32_inl(((const uint16_t *)p)[i]);
    }
}

/* One floating row: lane j of 8 takes elements j, j + 8, ...; the lanes
 * combine pairwise ((0+4)+(1+5))+((2+6)+(3+7)), then the tail in order.
 * max/min: a NaN anywhere makes the row NaN. */
static float red_row_f(int id, const void *x, gg_dtype dt, int64_t base, int64_t n)
{
    const int is_sum = id == GG_OP_SUM || id == GG_OP_MEAN, is_max = id == GG_OP_AMAX;
    float acc[8];
    int nan = 0;
    for (int j = 0; j < 8; j++)
        acc[j] = is_sum ? 0.0f : is_max ? -INFINITY : INFINITY;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float v = red_ldf(x, dt, base + i + j);
            nan |= v != v;
            acc[j] = is_sum ? acc[j] + v : is_max ? (v > acc[j] ? v : acc[j])
                                                  : (v < acc[j] ? v : acc[j]);
        }
    float s;
    if (is_sum) {
        s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    } else {
        s = acc[0];
        for (int j = 1; j < 8; j++)
            s = is_max ? (acc[j] > s ? acc[j] : s) : (acc[j] < s ? acc[j] : s);
    }
    for (; i < n; i++) {
        float v = red_ldf(x, dt, base + i);
        nan |= v != v;
        s = is_sum ? s + v : is_max ? (v > s ? v : s) : (v < s ? v : s);
    }
    if (!is_sum && nan)
        return NAN;
    if (id == GG_OP_MEAN)
        s = s / (float)n;
    return s;
}

static void red_run(int id, const gg_tensor *in, const gg_tensor *out)
{
    const gg_tensor *x = &in[0], *y = &out[0];
    const gg_dtype dt = x->desc.dtype;
    const int64_t n = x->desc.dims[x->desc.ndim - 1], rows = gg_desc_numel(&x->desc) / n;
    for (int64_t r = 0; r < rows; r++) {
        if (gg_dtype_is_float(dt)) {
            float v = red_row_f(id, x->data, dt, r * n, n);
            if (dt == GG_DT_F32)
                ((float *)y->data)[r] = v;
            else if (dt == GG_DT_F16)
                ((uint16_t *)y->data)[r] = gg_f32_to_f16_inl(v);
            else
                ((uint16_t *)y->data)[r] = gg_f32_to_bf16_inl(v);
            continue;
        }
        uint64_t s = 0;
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = dt == GG_DT_I32 ? ((const int32_t *)x->data)[r * n + i]
                                        : ((const int64_t *)x->data)[r * n + i];
            s += (uint64_t)v;
            if (i == 0 || (id == GG_OP_AMAX ? v > m : v < m))
                m = v;
        }
        int64_t v = id == GG_OP_SUM ? (int64_t)s : m;
        if (dt == GG_DT_I32)
            ((int32_t *)y->data)[r] = (int32_t)(uint32_t)(uint64_t)v;
        else
            ((int64_t *)y->data)[r] = v;
    }
}

#define RED_CPU(ID)                                                                      \
    static void red_cpu_##ID(const gg_tensor *in, int nin, const gg_tensor *out, int nout, \
                             const gg_op_attrs *attrs)                                    \
    {                                                                                     \
        (void)nin, (void)nout, (void)attrs;                                               \
        red_run(GG_OP_##ID, in, out);                                                     \
    }                                                                                     \
    GG_OP_ROW(ID, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"},               \
              .out_names = {"y"}, .check = red_check, .cpu = red_cpu_##ID)

RED_CPU(SUM);
RED_CPU(MEAN);
RED_CPU(AMAX);
RED_CPU(AMIN);
