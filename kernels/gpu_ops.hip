/* SPDX-License-Identifier: MIT */
/* HIP kernels for every op of the table (ops.h) and their C launcher
 * (gpu_ops.h).  One source for both vendors: hipcc builds it for AMD, nvcc
 * builds it as CUDA through gg_hip.h.
 *
 * Rules the kernels keep:
 *   - wave-size agnostic: block sizes are multiples of 64 (so of 32 and 64),
 *     reductions go through warpSize-wide shuffles and then shared memory,
 *     never a hard-coded 32 or 64;
 *   - f32 accumulation whatever the storage dtype; f16/bf16 are raw 16-bit
 *     storage converted in registers (round to nearest even on store);
 *   - 16-byte vector loads/stores when every pointer involved is 16-byte
 *     aligned and the row length is a multiple of the vector width, scalar
 *     code otherwise;
 *   - each thread touches the same elements in every pass of a row kernel, so
 *     in-place launches (y == x) are fine for every op but linear;
 *   - launches only: no allocation, synchronisation or copies (capture-safe).
 *
 * This file: errors, the context, the elementwise and row kernels and the
 * dispatch of gg_gpu_op_launch.  The decode-step ops are in gpu_decode.hip,
 * `linear` (its kernels, the vendor BLAS and the choice between them) in
 * gpu_linear.hip; what they share is in gpu_internal.h. */
#include "gpu_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors --------------------------------------------------------------- */

static thread_local char g_err[256];

int gg_gpu_fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return rc;
}

extern "C" const char *gg_gpu_last_error(void)
{
    return g_err;
}

extern "C" const char *gg_gpu_platform(void)
{
    return GG_HIP_PLATFORM_NAME;
}

/* ---- completion words -------------------------------------------------------- */

/* The fallback when stream memory operations are refused: one thread makes
 * the kernel's earlier writes, then the word, visible to the host. */
__global__ void gg_signal_kernel(volatile unsigned long long *p, unsigned long long v)
{
    __threadfence_system();
    *p = v;
    __threadfence_system();
}

/* 0 untried, 1 stream write works, 2 use the kernel: decided on first use. */
static int g_signal_mode;

extern "C" int gg_gpu_signal_u64(void *stream, void *dev_addr, uint64_t value, const char **how)
{
    hipStream_t s = (hipStream_t)stream;
    if (__atomic_load_n(&g_signal_mode, __ATOMIC_RELAXED) != 2) {
        hipError_t e = hipStreamWriteValue64(s, dev_addr, (unsigned long long)value, 0);
        if (e == hipSuccess) {
            __atomic_store_n(&g_signal_mode, 1, __ATOMIC_RELAXED);
            if (how)
                *how = "stream-write";
            return 0;
        }
        if (e != hipErrorNotSupported && e != hipErrorInvalidValue)
            return gg_gpu_fail(-EIO, "hipStreamWriteValue64: %s", hipGetErrorString(e));
        (void)hipGetLastError();
        __atomic_store_n(&g_signal_mode, 2, __ATOMIC_RELAXED);
    }
    gg_signal_kernel<<<1, 1, 0, s>>>((volatile unsigned long long *)dev_addr,
                                     (unsigned long long)value);
    hipError_t e = hipGetLastError();
    if (e != hipSuccess)
        return gg_gpu_fail(-EIO, "signal kernel: %s", hipGetErrorString(e));
    if (how)
        *how = "kernel";
    return 0;
}

__global__ void gg_write_u32_kernel(unsigned int *p, unsigned int v)
{
    *p = v;
}

static int g_write32_mode;

extern "C" int gg_gpu_write_u32(void *stream, void *dev_addr, uint32_t value, const char **how)
{
    hipStream_t s = (hipStream_t)stream;
    if (__atomic_load_n(&g_write32_mode, __ATOMIC_RELAXED) != 2) {
        hipError_t e = hipStreamWriteValue32(s, dev_addr, (unsigned int)value, 0);
        if (e == hipSuccess) {
            __atomic_store_n(&g_write32_mode, 1, __ATOMIC_RELAXED);
            if (how)
                *how = "stream-write";
            return 0;
        }
        if (e != hipErrorNotSupported && e != hipErrorInvalidValue)
            return gg_gpu_fail(-EIO, "hipStreamWriteValue32: %s", hipGetErrorString(e));
        (void)hipGetLastError();
        __atomic_store_n(&g_write32_mode, 2, __ATOMIC_RELAXED);
    }
    gg_write_u32_kernel<<<1, 1, 0, s>>>((unsigned int *)dev_addr, (unsigned int)value);
    hipError_t e = hipGetLastError();
    if (e != hipSuccess)
        return gg_gpu_fail(-EIO, "batch word kernel: %s", hipGetErrorString(e));
    if (how)
        *how = "kernel";
    return 0;
}

/* ---- context ---------------------------------------------------------------- */

extern "C" int gg_gpu_ctx_create(void *stream, gg_gpu_ctx **out)
{
    g_err[0] = '\0';
    if (!out)
        return gg_gpu_fail(-EINVAL, "gg_gpu_ctx_create: out is NULL");
    *out = NULL;
    hipStream_t s = (hipStream_t)stream;
    int dev = 0, n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n < 1)
        return gg_gpu_fail(-ENODEV, "no GPU device (hipGetDeviceCount: %s)",
                           e != hipSuccess ? hipGetErrorString(e) : "0 devices");
    if ((e = hipGetDevice(&dev)) != hipSuccess)
        return gg_gpu_fail(-ENODEV, "hipGetDevice: %s", hipGetErrorString(e));
    hipStreamCaptureStatus cs = hipStreamCaptureStatusNone;
    if (s && hipStreamIsCapturing(s, &cs) == hipSuccess && cs != hipStreamCaptureStatusNone)
        return gg_gpu_fail(-EBUSY, "gg_gpu_ctx_create: the stream is capturing; create the context "
                                   "before capture");

    gg_gpu_ctx *c = (gg_gpu_ctx *)calloc(1, sizeof *c);
    if (!c)
        return gg_gpu_fail(-ENOMEM, "gg_gpu_ctx_create: out of host memory");
    c->stream = s;
    c->device = dev;
    c->linear_mode = GG_GPU_LINEAR_AUTO;
    int cc_major = 0;
    if ((e = hipDeviceGetAttribute(&c->warp, hipDeviceAttributeWarpSize, dev)) != hipSuccess ||
        (e = hipDeviceGetAttribute(&c->sms, hipDeviceAttributeMultiprocessorCount, dev)) !=
            hipSuccess ||
        (e = hipDeviceGetAttribute(&c->max_threads, hipDeviceAttributeMaxThreadsPerBlock, dev)) !=
            hipSuccess ||
        (e = hipDeviceGetAttribute(&cc_major, hipDeviceAttributeComputeCapabilityMajor, dev)) !=
            hipSuccess) {
        free(c);
        return gg_gpu_fail(-EIO, "hipDeviceGetAttribute: %s", hipGetErrorString(e));
    }
    if (c->warp < 1 || c->warp > 64 || 64 % c->warp != 0 || c->max_threads < 256) {
        int w = c->warp, t = c->max_threads;
        free(c);
        return gg_gpu_fail(-ENODEV, "unsupported device: warp size %d, %d threads per block", w, t);
    }
    if (c->sms < 1)
        c->sms = 1;

    /* the vendor BLAS handle and its workspace (gpu_linear.hip) */
    int rc = gg_gpu_linear_ctx_init(c, cc_major);
    if (rc) {
        free(c);
        return rc;
    }
    /* attention_decode's split scratch (gpu_attention.hip): none is fine */
    gg_gpu_attention_ctx_init(c);
    *out = c;
    return 0;
}

extern "C" void gg_gpu_ctx_destroy(gg_gpu_ctx *c)
{
    if (!c)
        return;
    gg_gpu_attention_ctx_fini(c);
    gg_gpu_linear_ctx_fini(c);
    free(c);
}

extern "C" void *gg_gpu_ctx_stream(const gg_gpu_ctx *c)
{
    return c ? (void *)c->stream : NULL;
}

/* The table row op is (itself, or the row of its name for a copy of one);
 * NULL for anything else. */
static const gg_op_def *gpu_row_of(const gg_op_def *op)
{
    if (!op || !op->name)
        return NULL;
    if (gg_ops_at(op->id) == op)
        return op;
    return gg_ops_find(op->name);
}

extern "C" int gg_gpu_op_supported(const gg_op_def *op, gg_dtype dt)
{
    const gg_op_def *row = gpu_row_of(op);
    if (!row)
        return 0;
    switch (row->family) {
    case GG_FAM_ELEMENTWISE:
        switch (row->id) {
        case GG_OP_COPY:
        case GG_OP_SCALE:
        case GG_OP_GELU:
        case GG_OP_SILU:
        case GG_OP_SILU_MUL:
            return gg_dtype_is_float(dt);
        default: /* gpu_elementwise.hip: every dtype the op's rule takes */
            return (int)dt >= 0 && dt < GG_DT_COUNT;
        }
    case GG_FAM_REDUCE:
        return gg_dtype_is_float(dt) || gg_dtype_is_int(dt);
    case GG_FAM_NORM:
    case GG_FAM_LINEAR:
    case GG_FAM_DECODE:
    case GG_FAM_MATMUL:
    case GG_FAM_ATTENTION:
        return gg_dtype_is_float(dt);
    case GG_FAM_MOVEMENT: /* moves elements of any size */
        return gg_dtype_size(dt) != 0;
    default:
        return 0;
    }
}

extern "C" int gg_gpu_op_needs_warmup(const gg_op_def *op)
{
#if defined(GG_BLAS_CUBLAS) || defined(GG_BLAS_ROCBLAS)
    const gg_op_def *row = gpu_row_of(op);
    return op && ((row && row->id == GG_OP_LINEAR) || gg_gpu_fused_needs_warmup(op));
#else
    (void)op;
    return 0;
#endif
}

/* ---- reductions ------------------------------------------------------------- */

/* Sum over the block; every thread gets the result.  blockDim.x is a multiple
 * of warpSize (the launchers use multiples of 64).  sh holds one float per
 * warp: 32 covers 1024 threads at warpSize 32. */
static __device__ __forceinline__ float block_sum(float v, float *sh)
{
    v = gg_warp_sum(v);
    const int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize;
    __syncthreads(); /* sh may still be read from the previous reduction */
    if (lane == 0)
        sh[wid] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < nw; i++)
        t += sh[i];
    return t;
}

static __device__ __forceinline__ float block_max(float v, float *sh)
{
    v = gg_warp_max(v);
    const int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize;
    __syncthreads();
    if (lane == 0)
        sh[wid] = v;
    __syncthreads();
    float t = sh[0];
    for (int i = 1; i < nw; i++)
        t = fmaxf(t, sh[i]);
    return t;
}

/* ---- elementwise ------------------------------------------------------------ */

enum { E_COPY, E_ADD, E_MUL, E_SCALE, E_GELU_ERF, E_GELU_TANH, E_SILU, E_SILU_MUL, E_SILU_MUL_RND };

template <int E> struct ew_has_b {
    enum { value = (E == E_ADD || E == E_MUL || E == E_SILU_MUL || E == E_SILU_MUL_RND) };
};

/* The hardware reciprocal, one MUFU instruction (gg_ex2 likewise for exp2):
 * the forms with denormal handling (__expf, __fdividef) add a range test and
 * two multiplies around each, and at the copy rate silu and gelu tanh then
 * spent ~1.5% more time than copy.  The reciprocal's input is >= 1. */
static __device__ __forceinline__ float ew_rcp(float x)
{
#if defined(GFXGRAPH_HIP_CUDA)
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    return __frcp_rn(x);
#endif
}

template <int DT, int E> static __device__ __forceinline__ float ew(float a, float b, float p)
{
    switch (E) {
    case E_COPY:
        return a;
    case E_ADD:
        return a + b;
    case E_MUL:
        return a * b;
    case E_SCALE:
        return a * p;
    case E_GELU_ERF:
        return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f));
    case E_GELU_TANH: {
        /* 0.5 a (1 + tanh u) = a / (1 + e^-2u), e^-2u = 2^(-a (c1 + c2 a^2)):
         * tanhf's polynomial made the kernel compute-bound past L2.  This
         * form has no cancellation (a - a t lost the digits for a < -4.5)
         * and keeps gelu(+inf) = +inf, as PyTorch and the cpu reference. */
        const float c1 = 2.0f * 0.79788456080286536f * 1.4426950408889634f; /* 2 sqrt(2/pi) log2 e */
        const float c2 = c1 * 0.044715f;
        return a * ew_rcp(1.0f + gg_ex2(-a * fmaf(c2, a * a, c1)));
    }
    case E_SILU:
        return a * ew_rcp(1.0f + gg_ex2(a * -1.4426950408889634f));
    case E_SILU_MUL:
        return a * ew_rcp(1.0f + gg_ex2(a * -1.4426950408889634f)) * b;
    case E_SILU_MUL_RND: /* silu_mul's round_act: silu(a) as the dtype holds it */
        return dt<DT>::ld(dt<DT>::st(a * ew_rcp(1.0f + gg_ex2(a * -1.4426950408889634f)))) * b;
    }
    return a;
}

/* 16 bytes of a (and b) to 16 bytes of y; 16-bit types convert packed pairs
 * both ways. */
template <int DT, int E> static __device__ __forceinline__ uint4 ew_vec16(uint4 a, uint4 b, float p)
{
    typedef dt<DT> D;
    const uint32_t A[4] = {a.x, a.y, a.z, a.w}, B[4] = {b.x, b.y, b.z, b.w};
    uint32_t Y[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if constexpr (sizeof(typename D::T) == 4) {
            Y[k] = __float_as_uint(ew<DT, E>(__uint_as_float(A[k]), __uint_as_float(B[k]), p));
        } else {
            float x[2], z[2] = {0.0f, 0.0f};
            D::ld2(A[k], x);
            if (ew_has_b<E>::value)
                D::ld2(B[k], z);
            Y[k] = D::st2(ew<DT, E>(x[0], z[0], p), ew<DT, E>(x[1], z[1], p));
        }
    }
    return make_uint4(Y[0], Y[1], Y[2], Y[3]);
}

/* y[i] = f(a[i], b[i % bn]) by 16-byte vectors: bn == n for same-shape
 * operands, else the last dim (a multiple of the vector width) for a row
 * vector broadcast over rows.  A thread takes UN vectors TH apart, all loads
 * before the first store (ew_geometry says why these sizes); the last block
 * also does the elements past the last whole vector (fewer than a vector),
 * so an odd size costs no second launch. */
template <int DT, int E, int TH, int UN>
__global__ void __launch_bounds__(TH)
    k_ew_vec(const typename dt<DT>::T *a, const typename dt<DT>::T *b, typename dt<DT>::T *y,
             int64_t n, int64_t bn, float p)
{
    typedef dt<DT> D;
    const bool has_b = ew_has_b<E>::value;
    const int V = D::VEC;
    const int64_t nv = n / V, bnv = bn / V;
    const uint4 *av = (const uint4 *)a, *bv = (const uint4 *)b;
    uint4 *yv = (uint4 *)y;
    const int64_t tile = (int64_t)TH * UN;
    for (int64_t i0 = (int64_t)blockIdx.x * tile + threadIdx.x; i0 < nv;
         i0 += (int64_t)gridDim.x * tile) {
        uint4 va[UN], vb[UN];
#pragma unroll
        for (int u = 0; u < UN; u++) {
            const int64_t i = i0 + (int64_t)u * TH;
            vb[u] = make_uint4(0, 0, 0, 0);
            if (i < nv) {
                va[u] = av[i];
                if (has_b)
                    vb[u] = bv[bn == n ? i : i % bnv];
            }
        }
#pragma unroll
        for (int u = 0; u < UN; u++) {
            const int64_t i = i0 + (int64_t)u * TH;
            if (i < nv)
                yv[i] = ew_vec16<DT, E>(va[u], vb[u], p);
        }
    }
    if (blockIdx.x == gridDim.x - 1) {
        const int64_t i = nv * V + threadIdx.x;
        if (i < n) {
            const float x2 = has_b ? D::ld(b[bn == n ? i : i % bn]) : 0.0f;
            y[i] = D::st(ew<DT, E>(D::ld(a[i]), x2, p));
        }
    }
}

/* Operands not all 16-byte aligned: element by element. */
template <int DT, int E>
__global__ void __launch_bounds__(256)
    k_ew_scalar(const typename dt<DT>::T *a, const typename dt<DT>::T *b, typename dt<DT>::T *y,
                int64_t n, int64_t bn, float p)
{
    typedef dt<DT> D;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float bv = ew_has_b<E>::value ? D::ld(b[bn == n ? i : i % bn]) : 0.0f;
        y[i] = D::st(ew<DT, E>(D::ld(a[i]), bv, p));
    }
}

/* ---- row kernels: layernorm, rmsnorm, softmax ---------------------------------- */

/* Two geometries, picked by the launcher from the row length in units (a
 * unit is a 16-byte vector, or one element when unaligned):
 *   WARP, R = 2:  rows of up to 2 units per lane: one row per warp, several
 *                 rows per block, the units (and w, b) in registers,
 *                 reductions by shuffles only (no shared memory, no
 *                 __syncthreads);
 *   block, R = 0: longer rows: one row per block, one unit per thread where
 *                 the row allows (up to 1024 threads), every pass re-reads
 *                 the row (from L1).
 * Measured on an H100 (bench_chain_inproc, layernorm -> gelu chain, graph):
 * the warp geometry is ~6% faster at d = 256 f16; for d >= 1024, keeping the
 * row in registers with up to 4 units a thread (or a warp a row) was 4-8%
 * slower than re-reading it, so longer rows are streamed.  A short serial
 * chain per thread is what keeps a decode-sized row fast. */
template <bool WARP> struct rowgeo {
    static __device__ __forceinline__ int lane()
    {
        return WARP ? threadIdx.x % warpSize : threadIdx.x;
    }
    static __device__ __forceinline__ int width() { return WARP ? warpSize : blockDim.x; }
    static __device__ __forceinline__ int64_t first()
    {
        return WARP ? (int64_t)blockIdx.x * (blockDim.x / warpSize) + threadIdx.x / warpSize
                    : (int64_t)blockIdx.x;
    }
    static __device__ __forceinline__ int64_t step()
    {
        return WARP ? (int64_t)gridDim.x * (blockDim.x / warpSize) : (int64_t)gridDim.x;
    }
    static __device__ __forceinline__ float sum(float v, float *sh)
    {
        if constexpr (WARP)
            return gg_warp_sum(v);
        else
            return block_sum(v, sh);
    }
    static __device__ __forceinline__ float max(float v, float *sh)
    {
        if constexpr (WARP)
            return gg_warp_max(v);
        else
            return block_max(v, sh);
    }
};

/* layernorm: y = (x - mean) / sqrt(var + eps) * w + b, var the biased variance
 * (two passes over the values, no E[x^2] - mean^2 cancellation).
 * rmsnorm:   y = x / sqrt(mean(x^2) + eps) * w; round_x: x / sqrt(..) rounded
 *            to the dtype before the multiply by w. */
template <int DT, bool RMS, bool VEC>
static __device__ __forceinline__ void norm_emit(typename dt<DT>::T *yr, int i, const float *xs,
                                                 const typename unit<DT, VEC>::raw &wr,
                                                 const typename unit<DT, VEC>::raw &br,
                                                 float mean, float rstd, bool round_x)
{
    typedef unit<DT, VEC> U;
    float wv[U::N], bv[U::N], o[U::N];
    U::cvt(wr, wv);
    if (!RMS)
        U::cvt(br, bv);
#pragma unroll
    for (int k = 0; k < U::N; k++) {
        float t = (xs[k] - mean) * rstd;
        if (RMS && round_x)
            t = dt<DT>::ld(dt<DT>::st(t));
        o[k] = t * wv[k];
        if (!RMS)
            o[k] += bv[k];
    }
    U::store(yr, i, o);
}

template <int DT, bool RMS, bool VEC, bool WARP, int R, int LB>
__global__ void __launch_bounds__(LB)
    k_norm(const typename dt<DT>::T *x, const typename dt<DT>::T *w,
           const typename dt<DT>::T *bias, typename dt<DT>::T *y, int64_t rows, int cols,
           float eps, bool round_x)
{
    typedef typename dt<DT>::T T;
    typedef unit<DT, VEC> U;
    typedef rowgeo<WARP> G;
    __shared__ float sh[32];
    const int nu = cols / U::N, lane = G::lane(), width = G::width();
    float xv[R > 0 ? R : 1][U::N];
    /* a warp a row keeps the same columns for every row: w and b are loaded
     * once, ahead of the first row's reductions (a block a row has one row,
     * and loads them when it writes, keeping registers for the row) */
    typename U::raw wr[R > 0 ? R : 1], br[R > 0 ? R : 1];
    if constexpr (R > 0 && WARP) {
#pragma unroll
        for (int j = 0; j < R; j++)
            if (lane + j * width < nu) {
                wr[j] = U::load_raw(w, lane + j * width);
                br[j] = RMS ? wr[j] : U::load_raw(bias, lane + j * width);
            }
    }
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        if constexpr (R > 0) {
#pragma unroll
            for (int j = 0; j < R; j++)
                if (lane + j * width < nu)
                    U::load(xr, lane + j * width, xv[j]);
        }
        float mean = 0.0f;
        if (!RMS) {
            float s = 0.0f;
            if constexpr (R > 0) {
#pragma unroll
                for (int j = 0; j < R; j++)
                    if (lane + j * width < nu)
#pragma unroll
                        for (int k = 0; k < U::N; k++)
                            s += xv[j][k];
            } else {
                for (int i = lane; i < nu; i += width) {
                    U::load(xr, i, xv[0]);
#pragma unroll
                    for (int k = 0; k < U::N; k++)
                        s += xv[0][k];
                }
            }
            mean = G::sum(s, sh) / (float)cols;
        }
        float q = 0.0f;
        if constexpr (R > 0) {
#pragma unroll
            for (int j = 0; j < R; j++)
                if (lane + j * width < nu)
#pragma unroll
                    for (int k = 0; k < U::N; k++) {
                        const float d = xv[j][k] - mean;
                        q += d * d;
                    }
        } else {
            for (int i = lane; i < nu; i += width) {
                U::load(xr, i, xv[0]);
#pragma unroll
                for (int k = 0; k < U::N; k++) {
                    const float d = xv[0][k] - mean;
                    q += d * d;
                }
            }
        }
        const float rstd = 1.0f / sqrtf(G::sum(q, sh) / (float)cols + eps);
        if constexpr (R > 0) {
#pragma unroll
            for (int j = 0; j < R; j++)
                if (lane + j * width < nu) {
                    if constexpr (!WARP) {
                        wr[j] = U::load_raw(w, lane + j * width);
                        br[j] = RMS ? wr[j] : U::load_raw(bias, lane + j * width);
                    }
                    norm_emit<DT, RMS, VEC>(yr, lane + j * width, xv[j], wr[j], br[j], mean, rstd,
                                            round_x);
                }
        } else {
            for (int i = lane; i < nu; i += width) {
                U::load(xr, i, xv[0]);
                wr[0] = U::load_raw(w, i);
                br[0] = RMS ? wr[0] : U::load_raw(bias, i);
                norm_emit<DT, RMS, VEC>(yr, i, xv[0], wr[0], br[0], mean, rstd, round_x);
            }
        }
    }
}

/* softmax over the last dim, max-subtracted; the geometries of k_norm (with
 * registers the exponentials are computed once) but R = 4 on a block, which
 * is k_softmax_held below. */
template <int DT, bool VEC, bool WARP, int R, int LB>
__global__ void __launch_bounds__(LB)
    k_softmax(const typename dt<DT>::T *x, typename dt<DT>::T *y, int64_t rows, int cols)
{
    typedef typename dt<DT>::T T;
    typedef unit<DT, VEC> U;
    typedef rowgeo<WARP> G;
    __shared__ float sh[32];
    const int nu = cols / U::N, lane = G::lane(), width = G::width();
    float xv[R > 0 ? R : 1][U::N];
    for (int64_t r = G::first(); r < rows; r += G::step()) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        float m = -INFINITY;
        if constexpr (R > 0) {
#pragma unroll
            for (int j = 0; j < R; j++)
                if (lane + j * width < nu) {
                    U::load(xr, lane + j * width, xv[j]);
#pragma unroll
                    for (int k = 0; k < U::N; k++)
                        m = fmaxf(m, xv[j][k]);
                }
        } else {
            for (int i = lane; i < nu; i += width) {
                U::load(xr, i, xv[0]);
#pragma unroll
                for (int k = 0; k < U::N; k++)
                    m = fmaxf(m, xv[0][k]);
            }
        }
        m = G::max(m, sh);
        float s = 0.0f;
        if constexpr (R > 0) {
#pragma unroll
            for (int j = 0; j < R; j++)
                if (lane + j * width < nu)
#pragma unroll
                    for (int k = 0; k < U::N; k++) {
                        xv[j][k] = expf(xv[j][k] - m);
                        s += xv[j][k];
                    }
        } else {
            for (int i = lane; i < nu; i += width) {
                U::load(xr, i, xv[0]);
#pragma unroll
                for (int k = 0; k < U::N; k++)
                    s += expf(xv[0][k] - m);
            }
        }
        const float inv = 1.0f / G::sum(s, sh);
        if constexpr (R > 0) {
#pragma unroll
            for (int j = 0; j < R; j++)
                if (lane + j * width < nu) {
#pragma unroll
                    for (int k = 0; k < U::N; k++)
                        xv[j][k] *= inv;
                    U::store(yr, lane + j * width, xv[j]);
                }
        } else {
            for (int i = lane; i < nu; i += width) {
                U::load(xr, i, xv[0]);
#pragma unroll
                for (int k = 0; k < U::N; k++)
                    xv[0][k] = expf(xv[0][k] - m) * inv;
                U::store(yr, i, xv[0]);
            }
        }
    }
}

/* softmax of a row held in registers as stored (R units a thread, a block a
 * row): one read, one write, two barriers.  Each thread takes the
 * exponentials of its own values against its own maximum before any block
 * result is known, so that work overlaps the loads and the other resident
 * row's reductions; the block then reduces the maximum, rescales each
 * thread's sum to it and reduces the sums.  exp(x - m) is
 * exp2(x * log2(e) - m * log2(e)): one fma and the hardware exp2 instead of
 * expf's range reduction (the rounding of m * log2(e) is the same for every
 * element of the row and cancels in the normalisation).  The write pass
 * computes the exponentials again: keeping them (as stored) needed 61
 * registers and spilled.  At 1024 threads two rows share an NVIDIA
 * multiprocessor only at <= 32 registers, hence the minimum of 2 blocks.
 * H100, [2048, 32000] f16: 128.9 -> 93.7 us (70% -> 97.5% of the copy rate);
 * the three-phase kernel it replaces held 48 registers, one row at a time,
 * and spent its time in expf and four barriers. */
#if defined(GFXGRAPH_HIP_CUDA)
#define GG_LAUNCH_BOUNDS_MIN(t, b) __launch_bounds__(t, b)
#else
/* HIP's second argument is a count of waves per execution unit, not blocks */
#define GG_LAUNCH_BOUNDS_MIN(t, b) __launch_bounds__(t)
#endif
template <int DT, bool VEC, int R>
__global__ void GG_LAUNCH_BOUNDS_MIN(1024, 2)
    k_softmax_held(const typename dt<DT>::T *x, typename dt<DT>::T *y, int64_t rows, int cols)
{
    typedef typename dt<DT>::T T;
    typedef unit<DT, VEC> U;
    const float L2E = 1.4426950408889634f;
    /* two arrays: a warp may write the next row's maximum while another still
     * reads this row's sums (the barriers order every other reuse) */
    __shared__ float shm[32], shs[32];
    const int nu = cols / U::N, lane = threadIdx.x, width = blockDim.x;
    const int wl = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize;
    typename U::raw raw[R];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
#pragma unroll
        for (int j = 0; j < R; j++)
            if (lane + j * width < nu)
                raw[j] = U::load_raw(xr, lane + j * width);
        float m = -INFINITY;
#pragma unroll
        for (int j = 0; j < R; j++)
            if (lane + j * width < nu) {
                float v[U::N];
                U::cvt(raw[j], v);
#pragma unroll
                for (int k = 0; k < U::N; k++)
                    m = fmaxf(m, v[k]);
            }
        /* a thread whose values are all -inf adds zeros (not -inf - -inf) */
        const float ml = m == -INFINITY ? 0.0f : m * L2E;
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < R; j++)
            if (lane + j * width < nu) {
                float v[U::N];
                U::cvt(raw[j], v);
#pragma unroll
                for (int k = 0; k < U::N; k++)
                    s += exp2f(fmaf(v[k], L2E, -ml));
            }
        float t = gg_warp_max(m);
        if (wl == 0)
            shm[wid] = t;
        __syncthreads();
        t = gg_warp_max(wl < nw ? shm[wl] : -INFINITY);
        const float ML = t == -INFINITY ? 0.0f : t * L2E;
        /* ml <= ML: the factor is at most 1; s == 0 (no values, or all
         * -inf) stays 0 whatever ML is, a NaN stays NaN */
        const float f = exp2f(ml - ML);
        s = s > 0.0f ? s * f : s;
        t = gg_warp_sum(s);
        if (wl == 0)
            shs[wid] = t;
        __syncthreads();
        const float inv = 1.0f / gg_warp_sum(wl < nw ? shs[wl] : 0.0f);
#pragma unroll
        for (int j = 0; j < R; j++)
            if (lane + j * width < nu) {
                float v[U::N];
                U::cvt(raw[j], v);
#pragma unroll
                for (int k = 0; k < U::N; k++)
                    v[k] = exp2f(fmaf(v[k], L2E, -ML)) * inv;
                U::store(yr, lane + j * width, v);
            }
    }
}

/* ---- launchers ---------------------------------------------------------------- */

/* Smallest multiple-of-64 power of two >= work, within [64, cap]. */
static int row_threads(int64_t work, int cap)
{
    int t = 64;
    while (t < work && t * 2 <= cap)
        t *= 2;
    return t;
}

int gg_gpu_launched(const gg_op_def *op)
{
    hipError_t e = hipGetLastError();
    if (e != hipSuccess)
        return gg_gpu_fail(-EIO, "%s: kernel launch failed: %s (%s)", op->name, hipGetErrorName(e),
                           hipGetErrorString(e));
    return 0;
}

/* Vectors a thread (UN) and threads a block for the elementwise kernels.
 * Past L2 on the H100 ([8192, 8192], each choice beside PyTorch in one run),
 * one 16-byte vector a thread in blocks of 512 came closest to the memory
 * floor (copy 0.99x PyTorch's copy_, silu and gelu tanh 0.99x): blocks of
 * 256 threads taking 4 vectors each were 1.0-1.5% slower, a strided grid of
 * one wave of resident blocks 6-9% slower, and evict-first (.cs) loads and
 * stores 2% slower for two operands.  The erf GELU is the exception: its
 * erff is long enough that a thread with one vector leaves the loads too few
 * (1.05x PyTorch); two vectors a thread in blocks of 128 give 0.97x.  f32
 * takes two vectors a thread (8 elements, as 16-bit types take in one), in
 * blocks of 256.  Tensors too small for 4 large blocks a multiprocessor get
 * blocks of 128, spread over more multiprocessors. */
template <int DT, int E> struct ew_geometry {
    enum {
        UN = (sizeof(typename dt<DT>::T) == 4 || E == E_GELU_ERF) ? 2 : 1,
        TH = sizeof(typename dt<DT>::T) == 4 ? 256 : E == E_GELU_ERF ? 128 : 512,
        TH_SMALL = 128
    };
};

template <int DT, int E>
static void launch_ew(gg_gpu_ctx *c, const void *a, const void *b, void *y, int64_t n, int64_t bn,
                      float p)
{
    typedef typename dt<DT>::T T;
    typedef ew_geometry<DT, E> G;
    const int V = dt<DT>::VEC;
    /* a broadcast b must start every vector on a vector boundary of b */
    const bool vec = gg_gpu_aligned16(a) && gg_gpu_aligned16(y) &&
                     (!ew_has_b<E>::value || gg_gpu_aligned16(b)) && (bn == n || bn % V == 0) &&
                     n >= V;
    if (!vec) {
        k_ew_scalar<DT, E><<<gg_gpu_grid_for(n, 256, (int64_t)c->sms * 16), 256, 0, c->stream>>>(
            (const T *)a, (const T *)b, (T *)y, n, bn, p);
        return;
    }
    const int64_t nv = n / V, cap = (int64_t)1 << 20;
    /* too few large blocks for 4 on every multiprocessor: the small ones */
    if (nv < (int64_t)c->sms * 4 * G::TH * G::UN)
        k_ew_vec<DT, E, G::TH_SMALL, G::UN>
            <<<gg_gpu_grid_for(nv, G::TH_SMALL * G::UN, cap), G::TH_SMALL, 0, c->stream>>>(
                (const T *)a, (const T *)b, (T *)y, n, bn, p);
    else
        k_ew_vec<DT, E, G::TH, G::UN><<<gg_gpu_grid_for(nv, G::TH * G::UN, cap), G::TH, 0,
                                         c->stream>>>((const T *)a, (const T *)b, (T *)y, n, bn,
                                                      p);
}

/* Row-kernel geometry for a row of nu units (see k_norm):
 *   ROW_WARP:   up to 2 units a lane, a row a warp;
 *   ROW_BLOCK:  a row a block with the row in registers, R = 1, 2 or 4 units
 *               a thread, so the row is read from memory once;
 *   ROW_STREAM: longer rows, re-read from cache for each pass.
 * Past L2 (H100, [16384, 4096] f16) the streamed rows left layernorm at 72%
 * and softmax at 64% of the copy rate: the re-reads miss L1. */
enum { ROW_WARP, ROW_BLOCK, ROW_STREAM };
#define GG_ROW_WARP_R 2
#define GG_ROW_WARP_THREADS 256

typedef struct {
    int kind;
    int threads;
    int r; /* ROW_BLOCK: units a thread */
    unsigned grid;
} row_geometry;

static row_geometry row_geometry_for(const gg_gpu_ctx *c, int64_t rows, int nu, int rmax)
{
    row_geometry g;
    const int cap = c->max_threads < 1024 ? c->max_threads : 1024;
    const int64_t gcap = 1 << 20;
    g.r = 0;
    if (nu <= GG_ROW_WARP_R * c->warp) {
        g.kind = ROW_WARP;
        g.threads = GG_ROW_WARP_THREADS;
        const int64_t per_block = GG_ROW_WARP_THREADS / c->warp;
        const int64_t blocks = (rows + per_block - 1) / per_block;
        g.grid = (unsigned)(blocks < gcap ? blocks : gcap);
        return g;
    }
    g.grid = (unsigned)(rows < gcap ? rows : gcap);
    /* as many units a thread as the row allows (up to rmax): more bytes in
     * flight a thread, and more rows a multiprocessor whose reductions
     * overlap each other's loads (one unit a thread left layernorm at 57% of
     * the copy rate on [16384, 4096] f16) */
    if (nu <= (int64_t)rmax * cap) {
        g.kind = ROW_BLOCK;
        g.threads = row_threads((nu + rmax - 1) / rmax, cap);
        g.r = 1;
        while (g.r < rmax && (int64_t)g.r * g.threads < nu)
            g.r *= 2;
        return g;
    }
    g.kind = ROW_STREAM;
    g.threads = row_threads(nu, cap);
    return g;
}

template <int DT, bool RMS, bool VEC>
static void launch_norm_v(gg_gpu_ctx *c, const void *x, const void *w, const void *b, void *y,
                          int64_t rows, int cols, float eps, bool round_x)
{
    typedef typename dt<DT>::T T;
    const T *xp = (const T *)x, *wp = (const T *)w, *bp = (const T *)b;
    T *yp = (T *)y;
    const row_geometry g = row_geometry_for(c, rows, cols / unit<DT, VEC>::N, 4);
    if (g.kind == ROW_WARP)
        k_norm<DT, RMS, VEC, true, GG_ROW_WARP_R, GG_ROW_WARP_THREADS>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, wp, bp, yp, rows, cols, eps, round_x);
    else if (g.kind == ROW_BLOCK && g.r == 1)
        k_norm<DT, RMS, VEC, false, 1, 1024>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, wp, bp, yp, rows, cols, eps, round_x);
    else if (g.kind == ROW_BLOCK && g.r == 2)
        k_norm<DT, RMS, VEC, false, 2, 1024>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, wp, bp, yp, rows, cols, eps, round_x);
    else if (g.kind == ROW_BLOCK)
        k_norm<DT, RMS, VEC, false, 4, 1024>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, wp, bp, yp, rows, cols, eps, round_x);
    else
        k_norm<DT, RMS, VEC, false, 0, 1024>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, wp, bp, yp, rows, cols, eps, round_x);
}

template <int DT, bool RMS>
static void launch_norm(gg_gpu_ctx *c, const void *x, const void *w, const void *b, void *y,
                        int64_t rows, int cols, float eps, bool round_x)
{
    const bool vec = cols % dt<DT>::VEC == 0 && gg_gpu_aligned16(x) && gg_gpu_aligned16(w) &&
                     gg_gpu_aligned16(y) && (RMS || gg_gpu_aligned16(b));
    if (vec)
        launch_norm_v<DT, RMS, true>(c, x, w, b, y, rows, cols, eps, round_x);
    else
        launch_norm_v<DT, RMS, false>(c, x, w, b, y, rows, cols, eps, round_x);
}

template <int DT, bool VEC>
static void launch_softmax_v(gg_gpu_ctx *c, const void *x, void *y, int64_t rows, int cols)
{
    typedef typename dt<DT>::T T;
    const T *xp = (const T *)x;
    T *yp = (T *)y;
    const row_geometry g = row_geometry_for(c, rows, cols / unit<DT, VEC>::N, 4);
    if (g.kind == ROW_WARP)
        k_softmax<DT, VEC, true, GG_ROW_WARP_R, GG_ROW_WARP_THREADS>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, yp, rows, cols);
    else if (g.kind == ROW_BLOCK && g.r == 1)
        k_softmax<DT, VEC, false, 1, 1024><<<g.grid, g.threads, 0, c->stream>>>(xp, yp, rows, cols);
    else if (g.kind == ROW_BLOCK && g.r == 2)
        k_softmax<DT, VEC, false, 2, 1024><<<g.grid, g.threads, 0, c->stream>>>(xp, yp, rows, cols);
    else if (g.kind == ROW_BLOCK)
        k_softmax_held<DT, VEC, 4><<<g.grid, g.threads, 0, c->stream>>>(xp, yp, rows, cols);
    else
        k_softmax<DT, VEC, false, 0, 1024><<<g.grid, g.threads, 0, c->stream>>>(xp, yp, rows, cols);
}

template <int DT>
static void launch_softmax(gg_gpu_ctx *c, const void *x, void *y, int64_t rows, int cols)
{
    if (cols % dt<DT>::VEC == 0 && gg_gpu_aligned16(x) && gg_gpu_aligned16(y))
        launch_softmax_v<DT, true>(c, x, y, rows, cols);
    else
        launch_softmax_v<DT, false>(c, x, y, rows, cols);
}

/* ---- dispatch ------------------------------------------------------------------ */

static float attr_value(const gg_op_def *op, const gg_op_attrs *attrs, int idx, double def)
{
    if (idx < 0 || idx >= op->nattrs)
        return (float)def;
    return (float)(attrs ? attrs->v[idx] : op->attrs[idx].def);
}

template <int DT>
static int launch_dt(gg_gpu_ctx *c, const gg_op_def *op, int kind,
                     const gg_tensor *in, int nin, const gg_tensor *out,
                     const gg_op_attrs *attrs)
{
    const gg_tensor_desc *xd = &in[0].desc, *yd = &out[0].desc;
    const int64_t n = gg_desc_numel(yd), nx = gg_desc_numel(xd);
    const int64_t cols = xd->dims[xd->ndim - 1];
    void *y = out[0].data;
    const void *x = in[0].data;

    switch (kind) {
    case GG_OP_COPY:
    case GG_OP_SCALE:
    case GG_OP_GELU:
    case GG_OP_SILU: {
        if (nx != n)
            return gg_gpu_fail(-EINVAL, "%s: x has %lld elements, y %lld", op->name, (long long)nx,
                               (long long)n);
        if (kind == GG_OP_COPY)
            launch_ew<DT, E_COPY>(c, x, NULL, y, n, n, 0.0f);
        else if (kind == GG_OP_SCALE)
            launch_ew<DT, E_SCALE>(c, x, NULL, y, n, n, attr_value(op, attrs, 0, 1.0));
        else if (kind == GG_OP_SILU)
            launch_ew<DT, E_SILU>(c, x, NULL, y, n, n, 0.0f);
        else if (attr_value(op, attrs, 0, 0.0) == 1.0f) /* choice 1: "tanh" */
            launch_ew<DT, E_GELU_TANH>(c, x, NULL, y, n, n, 0.0f);
        else
            launch_ew<DT, E_GELU_ERF>(c, x, NULL, y, n, n, 0.0f);
        return gg_gpu_launched(op);
    }
    case GG_OP_ADD:
    case GG_OP_MUL:
    case GG_OP_SILU_MUL: {
        const int64_t bn = gg_desc_numel(&in[1].desc);
        if (nx != n || bn < 1 || n % bn != 0 || (bn != n && (kind == GG_OP_SILU_MUL || bn != cols)))
            return gg_gpu_fail(-EINVAL,
                               "%s: operand sizes do not fit (a %lld, b %lld, y %lld elements)",
                               op->name, (long long)nx, (long long)bn, (long long)n);
        const void *b = in[1].data;
        if (kind == GG_OP_ADD)
            launch_ew<DT, E_ADD>(c, x, b, y, n, bn, 0.0f);
        else if (kind == GG_OP_MUL)
            launch_ew<DT, E_MUL>(c, x, b, y, n, bn, 0.0f);
        else if (attr_value(op, attrs, 0, 0.0) != 0.0f)
            launch_ew<DT, E_SILU_MUL_RND>(c, x, b, y, n, bn, 0.0f);
        else
            launch_ew<DT, E_SILU_MUL>(c, x, b, y, n, bn, 0.0f);
        return gg_gpu_launched(op);
    }
    case GG_OP_LAYERNORM:
    case GG_OP_RMSNORM: {
        const int need = kind == GG_OP_LAYERNORM ? 3 : 2;
        if (nx != n || cols > INT_MAX)
            return gg_gpu_fail(-EINVAL, "%s: x and y differ or the last dim is too large",
                               op->name);
        for (int i = 1; i < need; i++)
            if (gg_desc_numel(&in[i].desc) != cols)
                return gg_gpu_fail(-EINVAL, "%s: input %d must have %lld elements", op->name, i,
                                   (long long)cols);
        const float eps = attr_value(op, attrs, 0, kind == GG_OP_LAYERNORM ? 1e-5 : 1e-6);
        if (kind == GG_OP_LAYERNORM)
            launch_norm<DT, false>(c, x, in[1].data, in[2].data, y, n / cols, (int)cols, eps,
                                   false);
        else
            launch_norm<DT, true>(c, x, in[1].data, NULL, y, n / cols, (int)cols, eps,
                                  attr_value(op, attrs, 1, 0.0) != 0.0f);
        return gg_gpu_launched(op);
    }
    case GG_OP_SOFTMAX: {
        if (nx != n || cols > INT_MAX)
            return gg_gpu_fail(-EINVAL, "%s: x and y differ or the last dim is too large",
                               op->name);
        launch_softmax<DT>(c, x, y, n / cols, (int)cols);
        return gg_gpu_launched(op);
    }
    case GG_OP_LINEAR:
        return gg_gpu_linear_launch(c, op, in, nin, out);
    }
    return gg_gpu_fail(-ENOTSUP, "%s: no GPU kernel", op->name);
}

/* copy, scale, gelu, silu, silu_mul on floats, and add/mul in their older
 * forms: the vector kernels of this file. */
static bool ew_vector_form(int kind, const gg_tensor *in, int nin, const gg_tensor *out)
{
    switch (kind) {
    case GG_OP_COPY:
    case GG_OP_SCALE:
    case GG_OP_GELU:
    case GG_OP_SILU:
    case GG_OP_SILU_MUL:
        return nin >= 1 && gg_dtype_is_float(in[0].desc.dtype);
    case GG_OP_ADD:
    case GG_OP_MUL: {
        if (nin != 2)
            return false;
        const gg_tensor_desc d[2] = {in[0].desc, in[1].desc};
        return gg_ew_legacy_form(d, nin, &out[0].desc) != 0;
    }
    default:
        return false;
    }
}

extern "C" int gg_gpu_op_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                                const gg_tensor *out, int nout, const gg_op_attrs *attrs)
{
    g_err[0] = '\0';
    if (!c || !op || !op->name || (!in && nin > 0) || !out)
        return gg_gpu_fail(-EINVAL, "gg_gpu_op_launch: NULL argument");
    if (gg_ops_at(op->id) != op && gg_ops_fused_kind(op) >= 0) /* the planner's: gpu_fused.hip */
        return gg_gpu_fused_launch(c, op, gg_ops_fused_kind(op), in, nin, out, nout, attrs);
    const gg_op_def *row = gpu_row_of(op);
    if (!row)
        return gg_gpu_fail(-ENOTSUP, "%s: no GPU kernel for this op", op->name);
    const int kind = row->id;
    /* an op that wants the batch gets one more input than its node's */
    if (nin < row->nin_min || nin > row->nin_max + row->wants_batch || nout != row->nout)
        return gg_gpu_fail(-EINVAL, "%s: %d inputs and %d outputs do not fit the op", op->name, nin,
                           nout);
    switch (row->family) {
    case GG_FAM_DECODE: /* gpu_decode.hip */
        return gg_gpu_decode_launch(c, op, kind, in, nin, out, attrs);
    case GG_FAM_MOVEMENT: /* gpu_movement.hip */
        return gg_gpu_movement_launch(c, op, in, nin, out, nout, attrs);
    case GG_FAM_MATMUL: /* gpu_matmul.hip */
        return gg_gpu_matmul_launch(c, op, in, nin, out, nout, attrs);
    case GG_FAM_ATTENTION: /* gpu_sdpa.hip */
        return gg_gpu_attention_launch(c, op, in, nin, out, nout, attrs);
    case GG_FAM_REDUCE: /* gpu_reduce.hip */
        return gg_gpu_reduce_launch(c, op, kind, in, nin, out, attrs);
    case GG_FAM_ELEMENTWISE:
        /* a cast between floating dtypes: gpu_decode.hip's vector kernel */
        if (kind == GG_OP_CAST && nin == 1 && gg_dtype_is_float(in[0].desc.dtype) &&
            gg_dtype_is_float(out[0].desc.dtype))
            return gg_gpu_decode_launch(c, op, kind, in, nin, out, attrs);
        /* the vector kernels below take the older ops on one floating dtype;
         * everything else is gpu_elementwise.hip's */
        if (!ew_vector_form(kind, in, nin, out))
            return gg_gpu_elementwise_launch(c, op, kind, in, nin, out, attrs);
        break;
    case GG_FAM_NORM:
    case GG_FAM_LINEAR:
        break;
    default:
        return gg_gpu_fail(-ENOTSUP, "%s: no GPU kernel for this op", op->name);
    }
    const gg_dtype dtype = in[0].desc.dtype;
    for (int i = 0; i < nin + nout; i++) {
        const gg_tensor *t = i < nin ? &in[i] : &out[i - nin];
        if (t->desc.dtype != dtype)
            return gg_gpu_fail(-EINVAL, "%s: operands must share one dtype", op->name);
        if (!t->data || gg_desc_numel(&t->desc) < 1)
            return gg_gpu_fail(-EINVAL, "%s: operand %d is empty or has no data", op->name, i);
    }
    switch (dtype) {
    case GG_DT_F32:
        return launch_dt<GG_DT_F32>(c, op, kind, in, nin, out, attrs);
    case GG_DT_F16:
        return launch_dt<GG_DT_F16>(c, op, kind, in, nin, out, attrs);
    case GG_DT_BF16:
        return launch_dt<GG_DT_BF16>(c, op, kind, in, nin, out, attrs);
    default:
        return gg_gpu_fail(-EINVAL, "%s: unknown dtype %d", op->name, (int)dtype);
    }
}
