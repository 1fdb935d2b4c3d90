/* SPDX-License-Identifier: MIT */
/* The reduction family over the last dim (sum, mean, amax, amin; rules and
 * CPU reference in ops_reduce.c): a block a row, each thread a strided share
 * of the row, then a tree over the block in shared memory.  Floating rows
 * accumulate in f32 (the order differs from the reference's: results agree
 * within the f32 sum's rounding), amax/amin propagate NaN; integer rows are
 * exact in int64 (sum wraps). */
#include "gpu_internal.h"

#include <errno.h>
#include <math.h>

#define RED_THREADS 256

template <typename V> struct red_ops;
template <> struct red_ops<float> {
    static __device__ __forceinline__ float init(int id)
    {
        return id == GG_OP_AMAX ? -INFINITY : id == GG_OP_AMIN ? INFINITY : 0.0f;
    }
    static __device__ __forceinline__ float comb(int id, float a, float b)
    {
        if (id == GG_OP_SUM || id == GG_OP_MEAN)
            return a + b;
        if (a != a || b != b)
            return a != a ? a : b;
        return id == GG_OP_AMAX ? (a > b ? a : b) : (a < b ? a : b);
    }
};
template <> struct red_ops<int64_t> {
    static __device__ __forceinline__ int64_t init(int id)
    {
        return id == GG_OP_AMAX ? INT64_MIN : id == GG_OP_AMIN ? INT64_MAX : 0;
    }
    static __device__ __forceinline__ int64_t comb(int id, int64_t a, int64_t b)
    {
        if (id == GG_OP_SUM)
            return (int64_t)((uint64_t)a + (uint64_t)b);
        return id == GG_OP_AMAX ? (a > b ? a : b) : (a < b ? a : b);
    }
};

template <int DT> struct red_io;
template <> struct red_io<GG_DT_F32> {
    typedef float T;
    typedef float V;
    static __device__ __forceinline__ V ld(const T *p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v) { p[i] = v; }
};
template <> struct red_io<GG_DT_F16> {
    typedef uint16_t T;
    typedef float V;
    static __device__ __forceinline__ V ld(const T *p, int64_t i)
    {
        return gg_f16_bits_to_f32(p[i]);
    }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v)
    {
        p[i] = gg_f32_to_f16_bits(v);
    }
};
template <> struct red_io<GG_DT_BF16> {
    typedef uint16_t T;
    typedef float V;
    static __device__ __forceinline__ V ld(const T *p, int64_t i)
    {
        return gg_bf16_bits_to_f32(p[i]);
    }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v)
    {
        p[i] = gg_f32_to_bf16_bits(v);
    }
};
template <> struct red_io<GG_DT_I32> {
    typedef int32_t T;
    typedef int64_t V;
    static __device__ __forceinline__ V ld(const T *p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v)
    {
        p[i] = (int32_t)(uint32_t)(uint64_t)v;
    }
};
template <> struct red_io<GG_DT_I64> {
    typedef int64_t T;
    typedef int64_t V;
    static __device__ __forceinline__ V ld(const T *p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v) { p[i] = v; }
};

template <int DT>
__global__ void __launch_bounds__(RED_THREADS)
    k_reduce(int id, const typename red_io<DT>::T *x, typename red_io<DT>::T *y, int64_t rows,
             int64_t n)
{
    typedef red_io<DT> IO;
    typedef typename IO::V V;
    typedef red_ops<V> R;
    __shared__ V sh[RED_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        V acc = R::init(id);
        for (int64_t i = threadIdx.x; i < n; i += RED_THREADS)
            acc = R::comb(id, acc, IO::ld(x, r * n + i));
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int w = RED_THREADS / 2; w > 0; w /= 2) {
            if ((int)threadIdx.x < w)
                sh[threadIdx.x] = R::comb(id, sh[threadIdx.x], sh[threadIdx.x + w]);
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            V v = sh[0];
            if constexpr (sizeof(V) == 4) { /* floating */
                if (id == GG_OP_MEAN)
                    v = v / (float)n;
            }
            IO::st(y, r, v);
        }
        __syncthreads(); /* sh is reused by the next row */
    }
}

template <int DT>
static void red_launch(gg_gpu_ctx *c, int id, const void *x, void *y, int64_t rows, int64_t n)
{
    const unsigned grid = (unsigned)(rows < (1 << 20) ? rows : (1 << 20));
    k_reduce<DT><<<grid, RED_THREADS, 0, c->stream>>>(id, (const typename red_io<DT>::T *)x,
                                                      (typename red_io<DT>::T *)y, rows, n);
}

int gg_gpu_reduce_launch(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                         int nin, const gg_tensor *out, const gg_op_attrs *attrs)
{
    (void)attrs;
    if (nin != 1 || !in[0].data || !out[0].data)
        return gg_gpu_fail(-EINVAL, "%s: takes one input with data", op->name);
    const gg_tensor_desc *xd = &in[0].desc;
    const gg_dtype dt = xd->dtype;
    const int64_t n = xd->dims[xd->ndim - 1], numel = gg_desc_numel(xd);
    if (n < 1 || numel < 1 || out[0].desc.dtype != dt || gg_desc_numel(&out[0].desc) != numel / n)
        return gg_gpu_fail(-EINVAL, "%s: y must be x's dtype with one element per row", op->name);
    const int64_t rows = numel / n;
    switch (dt) {
    case GG_DT_F32: red_launch<GG_DT_F32>(c, kind, in[0].data, out[0].data, rows, n); break;
    case GG_DT_F16: red_launch<GG_DT_F16>(c, kind, in[0].data, out[0].data, rows, n); break;
    case GG_DT_BF16: red_launch<GG_DT_BF16>(c, kind, in[0].data, out[0].data, rows, n); break;
    case GG_DT_I32:
    case GG_DT_I64:
        if (kind == GG_OP_MEAN)
            return gg_gpu_fail(-EINVAL, "%s: takes floating x", op->name);
        if (dt == GG_DT_I32)
            red_launch<GG_DT_I32>(c, kind, in[0].data, out[0].data, rows, n);
        else
            red_launch<GG_DT_I64>(c, kind, in[0].data, out[0].data, rows, n);
        break;
    default:
        return gg_gpu_fail(-EINVAL, "%s: unsupported dtype %s", op->name, gg_dtype_name(dt));
    }
    return gg_gpu_launched(op);
}
