/* SPDX-License-Identifier: MIT */
/* The data-movement family on the GPU (ops_movement.c has the rules and the
 * CPU references): strided_copy, cat, index_copy.  They move elements
 * without looking at them, so a kernel is templated on the element's size,
 * not its dtype: every dtype, bit-exact.  One thread an element (a unit);
 * where the layout allows, a unit is 16 bytes (a uint4) instead of one
 * element: the rows in bytes and every pointer and stride then multiples of
 * 16.  Launches only, under the rules gpu_ops.hip states. */
#include "gpu_internal.h"

#include <errno.h>
#include <stdint.h>

/* A unit of B bytes. */
template <int B> struct mv_unit;
template <> struct mv_unit<1> {
    typedef uint8_t T;
};
template <> struct mv_unit<2> {
    typedef uint16_t T;
};
template <> struct mv_unit<4> {
    typedef uint32_t T;
};
template <> struct mv_unit<8> {
    typedef uint64_t T;
};
template <> struct mv_unit<16> {
    typedef uint4 T;
};

static const int MV_THREADS = 256;

static unsigned mv_grid(int64_t n)
{
    return gg_gpu_grid_for(n, MV_THREADS, (int64_t)1 << 20);
}

static double mv_attr(const gg_op_def *op, const gg_op_attrs *attrs, int i)
{
    return attrs ? attrs->v[i] : op->attrs[i].def;
}

/* ---- strided_copy ------------------------------------------------------------ */

/* y's dims right-aligned into four (n), x's strides for them (s), in units. */
struct mv_view {
    int64_t n[4], s[4];
};

template <typename T>
__global__ void __launch_bounds__(256) k_strided_copy(const T *x, T *y, mv_view v, int64_t total)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        int64_t r = i, o = 0;
#pragma unroll
        for (int d = 3; d >= 0; d--) {
            o += (r % v.n[d]) * v.s[d];
            r /= v.n[d];
        }
        y[i] = x[o];
    }
}

template <int B>
static void mv_launch_strided(gg_gpu_ctx *c, const void *x, void *y, const mv_view &v)
{
    typedef typename mv_unit<B>::T T;
    const int64_t total = v.n[0] * v.n[1] * v.n[2] * v.n[3];
    k_strided_copy<T><<<mv_grid(total), MV_THREADS, 0, c->stream>>>((const T *)x, (T *)y, v,
                                                                     total);
}

static int mv_strided_copy(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in,
                           const gg_tensor *out, const gg_op_attrs *attrs)
{
    const gg_tensor_desc *yd = &out[0].desc;
    const int es = (int)gg_dtype_size(yd->dtype), pad = 4 - yd->ndim;
    if (yd->ndim < 1 || yd->ndim > 4 || in[0].desc.dtype != yd->dtype)
        return gg_gpu_fail(-EINVAL, "%s: operands do not fit", op->name);
    mv_view v;
    int64_t last = 0;
    for (int i = 0; i < 4; i++) {
        v.n[i] = i < pad ? 1 : yd->dims[i - pad];
        const double s = i < pad ? 0 : mv_attr(op, attrs, i - pad);
        if (!(s >= 0) || s > 9007199254740992.0)
            return gg_gpu_fail(-EINVAL, "%s: stride %g is not one the op takes", op->name, s);
        v.s[i] = (int64_t)s;
        last += (v.n[i] - 1) * v.s[i];
    }
    if (last >= gg_desc_numel(&in[0].desc))
        return gg_gpu_fail(-EINVAL, "%s: the view reaches past x", op->name);
    /* 16-byte units: the last dim contiguous, rows and strides in whole
     * units, both pointers aligned */
    const int per = 16 / (es > 0 && es <= 16 ? es : 16);
    bool vec = v.s[3] == 1 && es < 16 && v.n[3] % per == 0 && gg_gpu_aligned16(in[0].data) &&
               gg_gpu_aligned16(out[0].data);
    for (int i = 0; i < 3 && vec; i++)
        vec = v.s[i] % per == 0;
    if (vec) {
        mv_view u = v;
        u.n[3] = v.n[3] / per;
        for (int i = 0; i < 3; i++)
            u.s[i] = v.s[i] / per;
        mv_launch_strided<16>(c, in[0].data, out[0].data, u);
        return gg_gpu_launched(op);
    }
    switch (es) {
    case 1:
        mv_launch_strided<1>(c, in[0].data, out[0].data, v);
        break;
    case 2:
        mv_launch_strided<2>(c, in[0].data, out[0].data, v);
        break;
    case 4:
        mv_launch_strided<4>(c, in[0].data, out[0].data, v);
        break;
    case 8:
        mv_launch_strided<8>(c, in[0].data, out[0].data, v);
        break;
    default:
        return gg_gpu_fail(-EINVAL, "%s: dtype %s has no kernel", op->name,
                           gg_dtype_name(yd->dtype));
    }
    return gg_gpu_launched(op);
}

/* ---- cat ----------------------------------------------------------------------- */

/* Up to GG_MAX_OPERANDS inputs: their rows (a row: everything from the cat
 * dim on) in units, and where each starts in y's row. */
struct mv_cat {
    const void *x[GG_MAX_OPERANDS];
    int64_t row[GG_MAX_OPERANDS], at[GG_MAX_OPERANDS];
    int n;
};

template <typename T>
__global__ void __launch_bounds__(256) k_cat(mv_cat a, T *y, int64_t yrow, int64_t total)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t o = i / yrow, r = i - o * yrow;
        int k = 0;
        while (k + 1 < a.n && r >= a.at[k + 1])
            k++;
        y[i] = ((const T *)a.x[k])[o * a.row[k] + r - a.at[k]];
    }
}

template <int B>
static void mv_launch_cat(gg_gpu_ctx *c, const mv_cat &a, void *y, int64_t yrow, int64_t total)
{
    typedef typename mv_unit<B>::T T;
    k_cat<T><<<mv_grid(total), MV_THREADS, 0, c->stream>>>(a, (T *)y, yrow, total);
}

static int mv_cat_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                         const gg_tensor *out, const gg_op_attrs *attrs)
{
    const gg_tensor_desc *yd = &out[0].desc;
    const int nd = yd->ndim, es = (int)gg_dtype_size(yd->dtype);
    const double dv = mv_attr(op, attrs, 0);
    const int dim = dv < 0 ? (int)dv + nd : (int)dv;
    if (nin < 2 || nin > GG_MAX_OPERANDS || dim < 0 || dim >= nd)
        return gg_gpu_fail(-EINVAL, "%s: operands do not fit", op->name);
    int64_t inner = 1, outer = 1, sum = 0;
    for (int i = dim + 1; i < nd; i++)
        inner *= yd->dims[i];
    for (int i = 0; i < dim; i++)
        outer *= yd->dims[i];
    mv_cat a;
    a.n = nin;
    bool vec = es < 16 && gg_gpu_aligned16(out[0].data);
    for (int k = 0; k < nin; k++) {
        const gg_tensor_desc *xd = &in[k].desc;
        if (xd->ndim != nd || xd->dtype != yd->dtype ||
            gg_desc_numel(xd) != outer * xd->dims[dim] * inner)
            return gg_gpu_fail(-EINVAL, "%s: input %d does not fit y", op->name, k);
        a.x[k] = in[k].data;
        a.row[k] = xd->dims[dim] * inner;
        a.at[k] = sum;
        sum += a.row[k];
        vec = vec && (a.row[k] * es) % 16 == 0 && gg_gpu_aligned16(in[k].data);
    }
    if (sum != yd->dims[dim] * inner)
        return gg_gpu_fail(-EINVAL, "%s: the inputs do not add up to y along dim %d", op->name,
                           dim);
    int64_t total = outer * sum;
    if (vec) {
        const int per = 16 / es;
        for (int k = 0; k < nin; k++) {
            a.row[k] /= per;
            a.at[k] /= per;
        }
        sum /= per;
        total /= per;
        mv_launch_cat<16>(c, a, out[0].data, sum, total);
        return gg_gpu_launched(op);
    }
    switch (es) {
    case 1:
        mv_launch_cat<1>(c, a, out[0].data, sum, total);
        break;
    case 2:
        mv_launch_cat<2>(c, a, out[0].data, sum, total);
        break;
    case 4:
        mv_launch_cat<4>(c, a, out[0].data, sum, total);
        break;
    case 8:
        mv_launch_cat<8>(c, a, out[0].data, sum, total);
        break;
    default:
        return gg_gpu_fail(-EINVAL, "%s: dtype %s has no kernel", op->name,
                           gg_dtype_name(yd->dtype));
    }
    return gg_gpu_launched(op);
}

/* ---- index_copy ---------------------------------------------------------------- */

/* One thread a unit of src: src [outer, n, inner] lands in self [outer, size,
 * inner] at row index[i]; an index outside [0, size) writes nothing.  A
 * repeated index: whichever write lands last (torch leaves it unspecified). */
template <typename T, typename I>
__global__ void __launch_bounds__(256)
    k_index_copy(const T *src, const I *index, T *self, int64_t n, int64_t size, int64_t inner,
                 int64_t total)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        const int64_t r = e % inner, oi = e / inner, i = oi % n, o = oi / n;
        const int64_t at = (int64_t)index[i];
        if (at >= 0 && at < size)
            self[(o * size + at) * inner + r] = src[e];
    }
}

template <int B, typename I>
static void mv_launch_index_copy(gg_gpu_ctx *c, const void *src, const void *index, void *self,
                                 int64_t n, int64_t size, int64_t inner, int64_t total)
{
    typedef typename mv_unit<B>::T T;
    k_index_copy<T, I><<<mv_grid(total), MV_THREADS, 0, c->stream>>>(
        (const T *)src, (const I *)index, (T *)self, n, size, inner, total);
}

template <typename I>
static int mv_index_copy_i(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in,
                           const gg_tensor *out, int es, int64_t n, int64_t size, int64_t inner,
                           int64_t outer)
{
    const void *src = in[0].data, *idx = in[1].data;
    void *self = out[0].data;
    if (es < 16 && (inner * es) % 16 == 0 && gg_gpu_aligned16(src) && gg_gpu_aligned16(self)) {
        const int64_t u = inner * es / 16;
        mv_launch_index_copy<16, I>(c, src, idx, self, n, size, u, outer * n * u);
        return gg_gpu_launched(op);
    }
    const int64_t total = outer * n * inner;
    switch (es) {
    case 1:
        mv_launch_index_copy<1, I>(c, src, idx, self, n, size, inner, total);
        break;
    case 2:
        mv_launch_index_copy<2, I>(c, src, idx, self, n, size, inner, total);
        break;
    case 4:
        mv_launch_index_copy<4, I>(c, src, idx, self, n, size, inner, total);
        break;
    case 8:
        mv_launch_index_copy<8, I>(c, src, idx, self, n, size, inner, total);
        break;
    default:
        return gg_gpu_fail(-EINVAL, "%s: dtype %s has no kernel", op->name,
                           gg_dtype_name(out[0].desc.dtype));
    }
    return gg_gpu_launched(op);
}

static int mv_index_copy(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in,
                         const gg_tensor *out, const gg_op_attrs *attrs)
{
    const gg_tensor_desc *sd = &out[0].desc, *src = &in[0].desc, *id = &in[1].desc;
    const int nd = sd->ndim, es = (int)gg_dtype_size(sd->dtype);
    const double dv = mv_attr(op, attrs, 0);
    const int dim = dv < 0 ? (int)dv + nd : (int)dv;
    if (dim < 0 || dim >= nd || id->ndim != 1 || src->dtype != sd->dtype)
        return gg_gpu_fail(-EINVAL, "%s: operands do not fit", op->name);
    int64_t inner = 1, outer = 1;
    for (int i = dim + 1; i < nd; i++)
        inner *= sd->dims[i];
    for (int i = 0; i < dim; i++)
        outer *= sd->dims[i];
    const int64_t n = id->dims[0], size = sd->dims[dim];
    if (gg_desc_numel(src) != outer * n * inner)
        return gg_gpu_fail(-EINVAL, "%s: src does not fit self and the index", op->name);
    if (id->dtype == GG_DT_I64)
        return mv_index_copy_i<int64_t>(c, op, in, out, es, n, size, inner, outer);
    if (id->dtype == GG_DT_I32)
        return mv_index_copy_i<int32_t>(c, op, in, out, es, n, size, inner, outer);
    return gg_gpu_fail(-EINVAL, "%s: index must be i32 or i64, got %s", op->name,
                       gg_dtype_name(id->dtype));
}

/* ---- launcher ------------------------------------------------------------------ */

int gg_gpu_movement_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                           const gg_tensor *out, int nout, const gg_op_attrs *attrs)
{
    if (nout != 1)
        return gg_gpu_fail(-EINVAL, "%s: one output expected, got %d", op->name, nout);
    for (int i = 0; i < nin + nout; i++) {
        const gg_tensor *t = i < nin ? &in[i] : &out[i - nin];
        if (!t->data || gg_desc_numel(&t->desc) < 1)
            return gg_gpu_fail(-EINVAL, "%s: operand %d is empty or has no data", op->name, i);
    }
    switch (op->id) {
    case GG_OP_STRIDED_COPY:
        if (nin != 1)
            break;
        return mv_strided_copy(c, op, in, out, attrs);
    case GG_OP_CAT:
        return mv_cat_launch(c, op, in, nin, out, attrs);
    case GG_OP_INDEX_COPY:
        if (nin != 2)
            break;
        return mv_index_copy(c, op, in, out, attrs);
    default:
        return gg_gpu_fail(-ENOTSUP, "%s: not a data-movement op", op->name);
    }
    return gg_gpu_fail(-EINVAL, "%s: %d inputs do not fit the op", op->name, nin);
}
