/* SPDX-License-Identifier: MIT */
/* The data-movement family: strided_copy, cat, index_copy.  Rules (shape,
 * dtype, attrs) and CPU references.  They move elements without looking at
 * them, so every dtype is taken and the references copy bytes: results are
 * bit-exact whatever the dtype (a NaN's payload included).
 *
 *   strided_copy  in x ([n] elements in row-major order, any dims: a view of
 *                 a batch-major [batch, r] tensor in a bucketed program;
 *                 element 0 the view's first element)
 *                 out y (contiguous, 1..4 dims)    attrs s0..s3
 *                 y[i0, .., ik] = x[sum(i_d * s_d)]: how a frontend
 *                 materializes a transposed, expanded, sliced or otherwise
 *                 non-contiguous view.
 *   cat           in 2..4 tensors of one dtype and ndim    out y    attr dim
 *   index_copy    in src, index (i32/i64 [n])    out self (written in place)
 *                 attr dim: self[.., index[i], ..] = src[.., i, ..]; an
 *                 index outside [0, size) writes nothing.
 *
 * The daemon refuses any overlap between a node's output and its inputs for
 * these ops (only elementwise ops may run in place), so the references never
 * see one. */
#include "ops_rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- rules ----------------------------------------------------------------- */

/* An integer attribute in [lo, hi], or -EINVAL naming it. */
static int mv_int_attr(const gg_op_def *op, const gg_op_attrs *attrs, int i, double lo, double hi,
                       int64_t *out, char *err, size_t errlen)
{
    const double v = gg_rule_attr(op, attrs, i);
    if (!(v == floor(v)) || v < lo || v > hi)
        return gg_rule_fail(err, errlen, "%s: %s must be an integer from %.0f to %.0f, got %g",
                           op->name, op->attrs[i].name, lo, hi, v);
    *out = (int64_t)v;
    return 0;
}

/* attr `dim` as an index into nd dims (negative counts from the end). */
static int mv_dim_attr(const gg_op_def *op, const gg_op_attrs *attrs, int nd, int *dim, char *err,
                       size_t errlen)
{
    int64_t d;
    int rc = mv_int_attr(op, attrs, 0, -nd, nd - 1, &d, err, errlen);
    if (rc)
        return rc;
    *dim = (int)(d < 0 ? d + nd : d);
    return 0;
}

static int mv_check_strided_copy(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                                 const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                                 char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    const gg_tensor_desc *x = &in[0], *y = &out[0];
    gg_shape_buf a, b;
    /* x is read as its elements: a graph runner's merged program declares
     * the view of a [bs * r] intermediate as ["batch", r], the only way its
     * element count follows the bucket */
    const int64_t n = gg_desc_numel(x);
    if ((rc = gg_rule_same_dtype(op, "y", y, "x", x->dtype, err, errlen)))
        return rc;
    /* the furthest element the view reaches, without int64 overflow */
    int64_t last = 0;
    for (int i = 0; i < GG_MAX_DIMS; i++) {
        const double v = gg_rule_attr(op, attrs, i);
        if (i >= y->ndim) {
            if (v != 0)
                return gg_rule_fail(err, errlen, "%s: %s must be 0 (y has %d dims), got %g",
                                    op->name, op->attrs[i].name, y->ndim, v);
            continue;
        }
        int64_t s;
        if ((rc = mv_int_attr(op, attrs, i, 0, 9007199254740992.0, &s, err, errlen)))
            return rc;
        const int64_t span = y->dims[i] - 1;
        if (span > 0 && s > (INT64_MAX - last) / span)
            return gg_rule_fail(err, errlen, "%s: the strides reach past x %s", op->name,
                                gg_rule_shape_str(x, &a));
        last += span * s;
    }
    if (last >= n)
        return gg_rule_fail(err, errlen,
                            "%s: y %s with strides (%g, %g, %g, %g) reaches element %lld of x, "
                            "which has %lld",
                            op->name, gg_rule_shape_str(y, &b), gg_rule_attr(op, attrs, 0),
                            gg_rule_attr(op, attrs, 1), gg_rule_attr(op, attrs, 2),
                            gg_rule_attr(op, attrs, 3), (long long)last, (long long)n);
    return 0;
}

static int mv_check_cat(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                        const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                        size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    const gg_tensor_desc *y = &out[0];
    int dim;
    if ((rc = mv_dim_attr(op, attrs, in[0].ndim, &dim, err, errlen)))
        return rc;
    gg_tensor_desc want = in[0];
    gg_shape_buf a, b;
    for (int i = 1; i < nin; i++) {
        if ((rc = gg_rule_same_dtype(op, op->in_names[i], &in[i], "x0", in[0].dtype, err,
                                     errlen)))
            return rc;
        int same = in[i].ndim == in[0].ndim;
        for (int d = 0; same && d < in[0].ndim; d++)
            same = d == dim || in[i].dims[d] == in[0].dims[d];
        if (!same)
            return gg_rule_fail(err, errlen, "%s: x%d %s must have the shape of x0 %s but along "
                               "dim %d", op->name, i, gg_rule_shape_str(&in[i], &a),
                               gg_rule_shape_str(&in[0], &b), dim);
        want.dims[dim] += in[i].dims[dim];
    }
    if ((rc = gg_rule_same_dtype(op, "y", y, "x0", in[0].dtype, err, errlen)))
        return rc;
    return gg_rule_out(op, y, &want, "the inputs' shape, their sizes along dim added up", err,
                       errlen);
}

static int mv_check_index_copy(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                               const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                               char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    const gg_tensor_desc *src = &in[0], *idx = &in[1], *self = &out[0];
    gg_shape_buf a;
    if (idx->ndim != 1 || (idx->dtype != GG_DT_I32 && idx->dtype != GG_DT_I64))
        return gg_rule_fail(err, errlen, "%s: index must be 1-D i32 or i64, got %s %s", op->name,
                           gg_dtype_name(idx->dtype), gg_rule_shape_str(idx, &a));
    if ((rc = gg_rule_same_dtype(op, "src", src, "self", self->dtype, err, errlen)))
        return rc;
    int dim;
    if ((rc = mv_dim_attr(op, attrs, self->ndim, &dim, err, errlen)))
        return rc;
    gg_tensor_desc want = *self;
    want.dims[dim] = idx->dims[0];
    if (gg_rule_same_shape(src, &want))
        return 0;
    gg_shape_buf b, c;
    return gg_rule_fail(err, errlen, "%s: src must have shape %s (the shape of self %s with the "
                        "index's length along dim %d), got %s", op->name,
                        gg_rule_shape_str(&want, &a), gg_rule_shape_str(self, &b), dim,
                        gg_rule_shape_str(src, &c));
}

/* ---- CPU references ------------------------------------------------------- */

static void mv_cpu_strided_copy(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                                const gg_op_attrs *attrs);
static void mv_cpu_cat(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                       const gg_op_attrs *attrs);
static void mv_cpu_index_copy(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                              const gg_op_attrs *attrs);

static void mv_cpu_strided_copy(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                                const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    const gg_tensor *y = &out[0];
    const size_t es = gg_dtype_size(y->desc.dtype);
    const char *x = in[0].data;
    char *dst = y->data;
    /* y's dims right-aligned into four, the missing leading ones of size 1 */
    int64_t n[GG_MAX_DIMS], s[GG_MAX_DIMS];
    const int pad = GG_MAX_DIMS - y->desc.ndim;
    for (int i = 0; i < GG_MAX_DIMS; i++) {
        n[i] = i < pad ? 1 : y->desc.dims[i - pad];
        s[i] = i < pad ? 0 : (int64_t)attrs->v[i - pad];
    }
    const size_t row = (size_t)n[3] * es;
    for (int64_t i0 = 0; i0 < n[0]; i0++)
        for (int64_t i1 = 0; i1 < n[1]; i1++)
            for (int64_t i2 = 0; i2 < n[2]; i2++) {
                const char *src = x + (size_t)(i0 * s[0] + i1 * s[1] + i2 * s[2]) * es;
                if (s[3] == 1) {
                    memcpy(dst, src, row);
                    dst += row;
                    continue;
                }
                for (int64_t i3 = 0; i3 < n[3]; i3++, dst += es)
                    memcpy(dst, src + (size_t)(i3 * s[3]) * es, es);
            }
}

/* The product of d's dims in [lo, hi). */
static int64_t mv_span(const gg_tensor_desc *d, int lo, int hi)
{
    int64_t n = 1;
    for (int i = lo; i < hi; i++)
        n *= d->dims[i];
    return n;
}

static void mv_cpu_cat(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                       const gg_op_attrs *attrs)
{
    (void)nout;
    const gg_tensor_desc *yd = &out[0].desc;
    const int nd = yd->ndim;
    const int dim = attrs->v[0] < 0 ? (int)attrs->v[0] + nd : (int)attrs->v[0];
    const size_t es = gg_dtype_size(yd->dtype);
    const int64_t outer = mv_span(yd, 0, dim), inner = mv_span(yd, dim + 1, nd);
    const size_t yrow = (size_t)(yd->dims[dim] * inner) * es;
    size_t off = 0;
    for (int k = 0; k < nin; k++) {
        const size_t xrow = (size_t)(in[k].desc.dims[dim] * inner) * es;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out[0].data + (size_t)o * yrow + off,
                   (const char *)in[k].data + (size_t)o * xrow, xrow);
        off += xrow;
    }
}

/* Element i of an i32 or i64 index vector. */
static int64_t mv_index_at(const gg_tensor *t, int64_t i)
{
    return t->desc.dtype == GG_DT_I64 ? ((const int64_t *)t->data)[i]
                                      : (int64_t)((const int32_t *)t->data)[i];
}

static void mv_cpu_index_copy(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                              const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    const gg_tensor *src = &in[0], *idx = &in[1], *self = &out[0];
    const gg_tensor_desc *sd = &self->desc;
    const int nd = sd->ndim;
    const int dim = attrs->v[0] < 0 ? (int)attrs->v[0] + nd : (int)attrs->v[0];
    const size_t es = gg_dtype_size(sd->dtype);
    const int64_t outer = mv_span(sd, 0, dim), inner = mv_span(sd, dim + 1, nd);
    const int64_t size = sd->dims[dim], n = idx->desc.dims[0];
    const size_t row = (size_t)inner * es;
    /* in index order: a repeated index keeps the last of its rows (torch
     * leaves the pick unspecified; the GPU kernel may keep another) */
    for (int64_t i = 0; i < n; i++) {
        const int64_t at = mv_index_at(idx, i);
        if (at < 0 || at >= size)
            continue;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)self->data + (size_t)(o * size + at) * row,
                   (const char *)src->data + (size_t)(o * n + i) * row, row);
    }
}

/* ---- rows ------------------------------------------------------------------ */

#define MV_STRIDE(n_) {.name = n_, .kind = GG_ATTR_FLOAT, .def = 0}
GG_OP_ROW(STRIDED_COPY, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"},
          .out_names = {"y"}, .nattrs = 4,
          .attrs = {MV_STRIDE("s0"), MV_STRIDE("s1"), MV_STRIDE("s2"), MV_STRIDE("s3")},
          .check = mv_check_strided_copy, .cpu = mv_cpu_strided_copy);
GG_OP_ROW(CAT, .nin_min = 2, .nin_max = 4, .nout = 1, .in_names = {"x0", "x1", "x2", "x3"},
          .out_names = {"y"}, .nattrs = 1,
          .attrs = {{.name = "dim", .kind = GG_ATTR_FLOAT, .def = 0}},
          .check = mv_check_cat, .cpu = mv_cpu_cat);
GG_OP_ROW(INDEX_COPY, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"src", "index"},
          .out_names = {"self"}, .nattrs = 1,
          .attrs = {{.name = "dim", .kind = GG_ATTR_FLOAT, .def = 0}},
          .check = mv_check_index_copy, .cpu = mv_cpu_index_copy);
