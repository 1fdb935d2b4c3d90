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
 *   - launches only: no allocation, synchronisation or copies (capture-safe). */
#include "gg_hip.h"
#include "gpu_ops.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GG_LINEAR_BLAS_MIN_ROWS: rows from which AUTO hands linear to the vendor
 * BLAS.  cuBLAS: measured on an H100 (K = 4096, N = 4096 and 11008, all three
 * dtypes), the small-M kernel beats or ties cuBLAS at 1 row and loses from 2-4
 * rows on.  rocBLAS: not measured on RDNA2 yet; kept at 16. */
#if defined(GFXGRAPH_HIP_CUDA)
#include <cublas_v2.h>
#define GG_BLAS_CUBLAS 1
#define GG_BLAS_NAME "cublas"
#define GG_LINEAR_BLAS_MIN_ROWS 2
#elif defined(GFXGRAPH_HAVE_ROCBLAS)
#include <rocblas/rocblas.h>
#define GG_BLAS_ROCBLAS 1
#define GG_BLAS_NAME "rocblas"
#define GG_LINEAR_BLAS_MIN_ROWS 16
#else
#define GG_BLAS_NAME "none"
#endif

/* ---- errors --------------------------------------------------------------- */

static thread_local char g_err[256];

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(int rc, const char *fmt, ...)
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

extern "C" const char *gg_gpu_blas(void)
{
    return GG_BLAS_NAME;
}

/* ---- op kinds --------------------------------------------------------------- */

enum {
    K_COPY,
    K_ADD,
    K_MUL,
    K_SCALE,
    K_GELU,
    K_SILU,
    K_SILU_MUL,
    K_LAYERNORM,
    K_RMSNORM,
    K_LINEAR,
    K_SOFTMAX,
    K_COUNT
};

static const struct {
    const char *name;
    int nin_min, nin_max;
    const char *attr; /* the one attribute the kernel reads, or NULL */
} kinds[K_COUNT] = {
    {"copy", 1, 1, NULL},          {"add", 2, 2, NULL},
    {"mul", 2, 2, NULL},           {"scale", 1, 1, "scale"},
    {"gelu", 1, 1, "approximate"}, {"silu", 1, 1, NULL},
    {"silu_mul", 2, 2, NULL},      {"layernorm", 3, 3, "eps"},
    {"rmsnorm", 2, 2, "eps"},      {"linear", 2, 3, NULL},
    {"softmax", 1, 1, NULL},
};

static int kind_by_name(const char *name)
{
    for (int k = 0; name && k < K_COUNT; k++)
        if (strcmp(kinds[k].name, name) == 0)
            return k;
    return -1;
}

/* ---- context ---------------------------------------------------------------- */

struct gg_gpu_ctx {
    hipStream_t stream;
    int device;
    int warp;        /* wave/warp size of the device */
    int sms;         /* compute units / multiprocessors */
    int max_threads; /* per block */
    gg_gpu_linear_mode linear_mode;
    const gg_op_def *ops[K_COUNT]; /* the table's entries, for a pointer lookup */
    int attr_idx[K_COUNT];
    void *ws;
    size_t ws_bytes;
#if defined(GG_BLAS_CUBLAS)
    cublasHandle_t blas;
#elif defined(GG_BLAS_ROCBLAS)
    rocblas_handle blas;
#endif
};

extern "C" int gg_gpu_ctx_create(void *stream, gg_gpu_ctx **out)
{
    g_err[0] = '\0';
    if (!out)
        return fail(-EINVAL, "gg_gpu_ctx_create: out is NULL");
    *out = NULL;
    hipStream_t s = (hipStream_t)stream;
    int dev = 0, n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n < 1)
        return fail(-ENODEV, "no GPU device (hipGetDeviceCount: %s)",
                    e != hipSuccess ? hipGetErrorString(e) : "0 devices");
    if ((e = hipGetDevice(&dev)) != hipSuccess)
        return fail(-ENODEV, "hipGetDevice: %s", hipGetErrorString(e));
    hipStreamCaptureStatus cs = hipStreamCaptureStatusNone;
    if (s && hipStreamIsCapturing(s, &cs) == hipSuccess && cs != hipStreamCaptureStatusNone)
        return fail(-EBUSY, "gg_gpu_ctx_create: the stream is capturing; create the context "
                            "before capture");

    gg_gpu_ctx *c = (gg_gpu_ctx *)calloc(1, sizeof *c);
    if (!c)
        return fail(-ENOMEM, "gg_gpu_ctx_create: out of host memory");
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
        return fail(-EIO, "hipDeviceGetAttribute: %s", hipGetErrorString(e));
    }
    if (c->warp < 1 || c->warp > 64 || 64 % c->warp != 0 || c->max_threads < 256) {
        int w = c->warp, t = c->max_threads;
        free(c);
        return fail(-ENODEV, "unsupported device: warp size %d, %d threads per block", w, t);
    }
    if (c->sms < 1)
        c->sms = 1;
    for (int k = 0; k < K_COUNT; k++) {
        c->ops[k] = gg_ops_find(kinds[k].name);
        c->attr_idx[k] = kinds[k].attr && c->ops[k] ? gg_ops_attr_index(c->ops[k], kinds[k].attr)
                                                    : -1;
    }

#if defined(GG_BLAS_CUBLAS)
    /* cuBLAS recommends a 32 MiB workspace on Hopper and later, 4 MiB before.
     * Setting it explicitly keeps cuBLAS from allocating during capture.
     * cublasSetStream resets the workspace, so it comes first. */
    const size_t ws_bytes = (size_t)(cc_major >= 9 ? 32 : 4) << 20;
    c->ws_bytes = ws_bytes;
    cublasStatus_t st = cublasCreate(&c->blas);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return fail(-EIO, "cublasCreate: %s", cublasGetStatusString(st));
    }
    if ((e = hipMalloc(&c->ws, c->ws_bytes)) != hipSuccess) {
        cublasDestroy(c->blas);
        free(c);
        return fail(-ENOMEM, "cuBLAS workspace (%zu bytes): %s", ws_bytes, hipGetErrorString(e));
    }
    if ((st = cublasSetStream(c->blas, s)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasSetWorkspace(c->blas, c->ws, c->ws_bytes)) != CUBLAS_STATUS_SUCCESS) {
        (void)hipFree(c->ws);
        cublasDestroy(c->blas);
        free(c);
        return fail(-EIO, "cuBLAS setup: %s", cublasGetStatusString(st));
    }
#elif defined(GG_BLAS_ROCBLAS)
    (void)cc_major;
    const size_t ws_bytes = (size_t)32 << 20;
    c->ws_bytes = ws_bytes;
    if (rocblas_create_handle(&c->blas) != rocblas_status_success) {
        free(c);
        return fail(-EIO, "rocblas_create_handle failed");
    }
    if ((e = hipMalloc(&c->ws, c->ws_bytes)) != hipSuccess) {
        rocblas_destroy_handle(c->blas);
        free(c);
        return fail(-ENOMEM, "rocBLAS workspace (%zu bytes): %s", ws_bytes,
                    hipGetErrorString(e));
    }
    if (rocblas_set_stream(c->blas, s) != rocblas_status_success ||
        rocblas_set_workspace(c->blas, c->ws, c->ws_bytes) != rocblas_status_success) {
        (void)hipFree(c->ws);
        rocblas_destroy_handle(c->blas);
        free(c);
        return fail(-EIO, "rocBLAS setup failed");
    }
#else
    (void)cc_major;
#endif
    *out = c;
    return 0;
}

extern "C" void gg_gpu_ctx_destroy(gg_gpu_ctx *c)
{
    if (!c)
        return;
#if defined(GG_BLAS_CUBLAS)
    cublasDestroy(c->blas);
#elif defined(GG_BLAS_ROCBLAS)
    rocblas_destroy_handle(c->blas);
#endif
    if (c->ws)
        (void)hipFree(c->ws);
    free(c);
}

extern "C" void *gg_gpu_ctx_stream(const gg_gpu_ctx *c)
{
    return c ? (void *)c->stream : NULL;
}

extern "C" int gg_gpu_ctx_set_linear_mode(gg_gpu_ctx *c, gg_gpu_linear_mode mode)
{
    if (!c || (mode != GG_GPU_LINEAR_AUTO && mode != GG_GPU_LINEAR_OWN &&
               mode != GG_GPU_LINEAR_BLAS))
        return fail(-EINVAL, "gg_gpu_ctx_set_linear_mode: bad arguments");
#if !defined(GG_BLAS_CUBLAS) && !defined(GG_BLAS_ROCBLAS)
    if (mode == GG_GPU_LINEAR_BLAS)
        return fail(-ENOTSUP, "this build has no vendor BLAS");
#endif
    c->linear_mode = mode;
    return 0;
}

extern "C" int gg_gpu_op_supported(const gg_op_def *op, gg_dtype dt)
{
    return op && kind_by_name(op->name) >= 0 && (int)dt >= 0 && dt < GG_DT_COUNT;
}

extern "C" int gg_gpu_op_needs_warmup(const gg_op_def *op)
{
#if defined(GG_BLAS_CUBLAS) || defined(GG_BLAS_ROCBLAS)
    return op && kind_by_name(op->name) == K_LINEAR;
#else
    (void)op;
    return 0;
#endif
}

/* ---- dtype traits ---------------------------------------------------------- */

template <int DT> struct dt;

template <> struct dt<GG_DT_F32> {
    typedef float T;
    enum { VEC = 4 };
    static __device__ __forceinline__ float ld(T v) { return v; }
    static __device__ __forceinline__ T st(float f) { return f; }
};

/* 16-bit types also convert a packed pair (element 2i in the low half). */
template <> struct dt<GG_DT_F16> {
    typedef uint16_t T;
    enum { VEC = 8 };
    static __device__ __forceinline__ float ld(T v) { return gg_f16_bits_to_f32(v); }
    static __device__ __forceinline__ T st(float f) { return gg_f32_to_f16_bits(f); }
    static __device__ __forceinline__ void ld2(uint32_t u, float *out)
    {
        out[0] = gg_f16_bits_to_f32((uint16_t)(u & 0xffffu));
        out[1] = gg_f16_bits_to_f32((uint16_t)(u >> 16));
    }
};

template <> struct dt<GG_DT_BF16> {
    typedef uint16_t T;
    enum { VEC = 8 };
    static __device__ __forceinline__ float ld(T v) { return gg_bf16_bits_to_f32(v); }
    static __device__ __forceinline__ T st(float f) { return gg_f32_to_bf16_bits(f); }
    static __device__ __forceinline__ void ld2(uint32_t u, float *out)
    {
        out[0] = __uint_as_float(u << 16);
        out[1] = __uint_as_float(u & 0xffff0000u);
    }
};

/* 16 bytes: one global load/store instruction. */
template <typename T, int N> struct alignas(16) vec_t {
    T v[N];
};

static inline bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
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

enum { E_COPY, E_ADD, E_MUL, E_SCALE, E_GELU_ERF, E_GELU_TANH, E_SILU, E_SILU_MUL };

template <int E> struct ew_has_b {
    enum { value = (E == E_ADD || E == E_MUL || E == E_SILU_MUL) };
};

template <int E> static __device__ __forceinline__ float ew(float a, float b, float p)
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
        const float k0 = 0.79788456080286536f; /* sqrt(2/pi) */
        return 0.5f * a * (1.0f + tanhf(k0 * (a + 0.044715f * a * a * a)));
    }
    case E_SILU:
        return a / (1.0f + expf(-a));
    case E_SILU_MUL:
        return a / (1.0f + expf(-a)) * b;
    }
    return a;
}

/* y[i] = f(a[i], b[i % bn]); bn == n for same-shape operands, the last dim for
 * a row vector broadcast over rows.  VEC: all pointers 16-byte aligned and bn
 * a multiple of the vector width; the tail past the last full vector is done
 * scalar. */
template <int DT, int E, bool VEC>
__global__ void __launch_bounds__(256)
    k_eltwise(const typename dt<DT>::T *a, const typename dt<DT>::T *b, typename dt<DT>::T *y,
              int64_t n, int64_t bn, float p)
{
    typedef dt<DT> D;
    typedef typename D::T T;
    const bool has_b = ew_has_b<E>::value;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t done = 0;
    if (VEC) {
        const int V = D::VEC;
        typedef vec_t<T, V> VT;
        const int64_t nv = n / V, bnv = bn / V;
        for (int64_t i = tid; i < nv; i += stride) {
            VT va = ((const VT *)a)[i], vb, vy;
            if (has_b)
                vb = ((const VT *)b)[bn == n ? i : i % bnv];
#pragma unroll
            for (int k = 0; k < V; k++)
                vy.v[k] = D::st(ew<E>(D::ld(va.v[k]), has_b ? D::ld(vb.v[k]) : 0.0f, p));
            ((VT *)y)[i] = vy;
        }
        done = nv * V;
    }
    for (int64_t i = done + tid; i < n; i += stride) {
        float bv = has_b ? D::ld(b[bn == n ? i : i % bn]) : 0.0f;
        y[i] = D::st(ew<E>(D::ld(a[i]), bv, p));
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

/* Unit i of a row (a 16-byte vector when VEC, else one element) as floats. */
template <bool C, typename A, typename B> struct pick {
    typedef A type;
};
template <typename A, typename B> struct pick<false, A, B> {
    typedef B type;
};

template <int DT, bool VEC> struct unit {
    typedef dt<DT> D;
    typedef typename D::T T;
    enum { N = VEC ? (int)D::VEC : 1 };
    typedef vec_t<T, D::VEC> VT;
    typedef typename pick<VEC, VT, T>::type raw; /* a unit as stored */
    static __device__ __forceinline__ raw load_raw(const T *p, int i)
    {
        return ((const raw *)p)[i];
    }
    static __device__ __forceinline__ void cvt(const raw &r, float *out)
    {
        if constexpr (VEC) {
#pragma unroll
            for (int k = 0; k < N; k++)
                out[k] = D::ld(r.v[k]);
        } else {
            out[0] = D::ld(r);
        }
    }
    static __device__ __forceinline__ void load(const T *p, int i, float *out)
    {
        if constexpr (VEC && sizeof(T) == 2) { /* 16 bytes as 4 packed pairs */
            const uint4 v = ((const uint4 *)p)[i];
            D::ld2(v.x, out);
            D::ld2(v.y, out + 2);
            D::ld2(v.z, out + 4);
            D::ld2(v.w, out + 6);
        } else if constexpr (VEC) {
            VT v = ((const VT *)p)[i];
#pragma unroll
            for (int k = 0; k < N; k++)
                out[k] = D::ld(v.v[k]);
        } else {
            out[0] = D::ld(p[i]);
        }
    }
    static __device__ __forceinline__ void store(T *p, int i, const float *in)
    {
        if constexpr (VEC) {
            VT v;
#pragma unroll
            for (int k = 0; k < N; k++)
                v.v[k] = D::st(in[k]);
            ((VT *)p)[i] = v;
        } else {
            p[i] = D::st(in[0]);
        }
    }
};

/* layernorm: y = (x - mean) / sqrt(var + eps) * w + b, var the biased variance
 * (two passes over the values, no E[x^2] - mean^2 cancellation).
 * rmsnorm:   y = x / sqrt(mean(x^2) + eps) * w. */
template <int DT, bool RMS, bool VEC>
static __device__ __forceinline__ void norm_emit(typename dt<DT>::T *yr, int i, const float *xs,
                                                 const typename unit<DT, VEC>::raw &wr,
                                                 const typename unit<DT, VEC>::raw &br,
                                                 float mean, float rstd)
{
    typedef unit<DT, VEC> U;
    float wv[U::N], bv[U::N], o[U::N];
    U::cvt(wr, wv);
    if (!RMS)
        U::cvt(br, bv);
#pragma unroll
    for (int k = 0; k < U::N; k++) {
        o[k] = (xs[k] - mean) * rstd * wv[k];
        if (!RMS)
            o[k] += bv[k];
    }
    U::store(yr, i, o);
}

template <int DT, bool RMS, bool VEC, bool WARP, int R, int LB>
__global__ void __launch_bounds__(LB)
    k_norm(const typename dt<DT>::T *x, const typename dt<DT>::T *w,
           const typename dt<DT>::T *bias, typename dt<DT>::T *y, int64_t rows, int cols,
           float eps)
{
    typedef typename dt<DT>::T T;
    typedef unit<DT, VEC> U;
    typedef rowgeo<WARP> G;
    __shared__ float sh[32];
    const int nu = cols / U::N, lane = G::lane(), width = G::width();
    float xv[R > 0 ? R : 1][U::N];
    /* with registers a thread keeps the same columns for every row: w and b
     * are loaded once, ahead of the first row's reductions */
    typename U::raw wr[R > 0 ? R : 1], br[R > 0 ? R : 1];
    if constexpr (R > 0) {
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
                if (lane + j * width < nu)
                    norm_emit<DT, RMS, VEC>(yr, lane + j * width, xv[j], wr[j], br[j], mean, rstd);
        } else {
            for (int i = lane; i < nu; i += width) {
                U::load(xr, i, xv[0]);
                wr[0] = U::load_raw(w, i);
                br[0] = RMS ? wr[0] : U::load_raw(bias, i);
                norm_emit<DT, RMS, VEC>(yr, i, xv[0], wr[0], br[0], mean, rstd);
            }
        }
    }
}

/* softmax over the last dim, max-subtracted; same geometries as k_norm (with
 * registers the exponentials are computed once). */
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

/* ---- linear: y[M,N] = x[M,K] . w[N,K]^T + b[N] ------------------------------------ */

/* Decode-sized M: one warp per output column n and rows in groups of MAXM
 * (blockIdx.y).  The warp streams w's row n once per group (the GEMV bound;
 * groups of one column run close together, so later groups mostly hit L2)
 * and keeps MAXM accumulators in registers; x's few rows come from cache.
 * Measured on an H100, one column per warp beat 2-4 columns per warp (which
 * reuse each x load) at every M: keeping more warps streaming w matters
 * more. */
template <int DT, int MAXM, bool VEC>
__global__ void __launch_bounds__(256)
    k_linear_small(const typename dt<DT>::T *x, const typename dt<DT>::T *w,
                   const typename dt<DT>::T *bias, typename dt<DT>::T *y, int M, int K, int N)
{
    typedef dt<DT> D;
    typedef typename D::T T;
    typedef unit<DT, VEC> U;
    const int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize;
    const int ku = K / U::N;
    const int m0 = blockIdx.y * MAXM;
    const int mg = M - m0 < MAXM ? M - m0 : MAXM; /* rows in this group */
    x += (int64_t)m0 * K;
    y += (int64_t)m0 * N;
    for (int n = blockIdx.x * nw + wid; n < N; n += gridDim.x * nw) {
        float acc[MAXM];
#pragma unroll
        for (int m = 0; m < MAXM; m++)
            acc[m] = 0.0f;
        const T *wr = w + (int64_t)n * K;
        for (int k = lane; k < ku; k += warpSize) {
            float wf[U::N];
            U::load(wr, k, wf);
#pragma unroll
            for (int m = 0; m < MAXM; m++) {
                if (m < mg) {
                    float xf[U::N];
                    U::load(x + (int64_t)m * K, k, xf);
#pragma unroll
                    for (int j = 0; j < U::N; j++)
                        acc[m] += wf[j] * xf[j];
                }
            }
        }
        const float bv = bias ? D::ld(bias[n]) : 0.0f;
#pragma unroll
        for (int m = 0; m < MAXM; m++) {
            if (m < mg) { /* the same for the whole warp */
                const float s = gg_warp_sum(acc[m]);
                if (lane == 0)
                    y[(int64_t)m * N + n] = D::st(s + bv);
            }
        }
    }
}

/* Any M, no vendor BLAS: 64 x 64 output tiles over 32-deep k slices staged in
 * shared memory as f32; 256 threads with 4 x 4 outputs each.  Global loads are
 * 16-byte vectors where aligned, and the next slice is fetched into
 * registers while the current one is multiplied. */
#define GG_TILE 64
#define GG_TILE_K 32
template <int DT, bool VEC> struct tile_io {
    typedef unit<DT, VEC> U;
    typedef typename dt<DT>::T T;
    enum { PER = GG_TILE * GG_TILE_K / (256 * U::N) }; /* units per thread per operand */
    enum { UPR = GG_TILE_K / U::N };                   /* units per tile row */
    /* rows r0.. of a [rows, K] operand, k slice k0..: into regs */
    static __device__ __forceinline__ void fetch(const T *p, int r0, int rows, int k0, int K,
                                                 float (&regs)[PER][U::N])
    {
#pragma unroll
        for (int q = 0; q < PER; q++) {
            const int u = threadIdx.x + q * 256, row = u / UPR, kc = (u % UPR) * U::N;
            const int gr = r0 + row, gk = k0 + kc;
            if (gr < rows && gk < K) /* VEC: K is a multiple of the unit */
                U::load(p + (int64_t)gr * K, gk / U::N, regs[q]);
            else
#pragma unroll
                for (int e = 0; e < U::N; e++)
                    regs[q][e] = 0.0f;
        }
    }
    static __device__ __forceinline__ void stash(float (*sm)[GG_TILE + 1],
                                                 const float (&regs)[PER][U::N])
    {
#pragma unroll
        for (int q = 0; q < PER; q++) {
            const int u = threadIdx.x + q * 256, row = u / UPR, kc = (u % UPR) * U::N;
#pragma unroll
            for (int e = 0; e < U::N; e++)
                sm[kc + e][row] = regs[q][e];
        }
    }
};

template <int DT, bool VEC>
__global__ void __launch_bounds__(256)
    k_linear_tiled(const typename dt<DT>::T *x, const typename dt<DT>::T *w,
                   const typename dt<DT>::T *bias, typename dt<DT>::T *y, int M, int K, int N)
{
    typedef dt<DT> D;
    typedef tile_io<DT, VEC> IO;
    __shared__ float As[GG_TILE_K][GG_TILE + 1];
    __shared__ float Bs[GG_TILE_K][GG_TILE + 1];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int n0 = blockIdx.x * GG_TILE;
    for (int m0 = blockIdx.y * GG_TILE; m0 < M; m0 += gridDim.y * GG_TILE) {
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[i][j] = 0.0f;
        float xa[IO::PER][IO::U::N], wb[IO::PER][IO::U::N];
        IO::fetch(x, m0, M, 0, K, xa);
        IO::fetch(w, n0, N, 0, K, wb);
        for (int k0 = 0; k0 < K; k0 += GG_TILE_K) {
            __syncthreads(); /* the previous slice is no longer read */
            IO::stash(As, xa);
            IO::stash(Bs, wb);
            __syncthreads();
            if (k0 + GG_TILE_K < K) { /* in flight while this slice is multiplied */
                IO::fetch(x, m0, M, k0 + GG_TILE_K, K, xa);
                IO::fetch(w, n0, N, k0 + GG_TILE_K, K, wb);
            }
#pragma unroll 8
            for (int kk = 0; kk < GG_TILE_K; kk++) {
                float av[4], bv[4];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    av[i] = As[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        acc[i][j] += av[i] * bv[j];
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int gm = m0 + ty + 16 * i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int gn = n0 + tx + 16 * j;
                if (gm < M && gn < N)
                    y[(int64_t)gm * N + gn] =
                        D::st(acc[i][j] + (bias ? D::ld(bias[gn]) : 0.0f));
            }
        }
    }
}

/* y[m, n] = b[n]: the C operand of a BLAS call with beta = 1, so the bias is
 * added inside the GEMM's f32 epilogue and y rounded once. */
template <int DT>
__global__ void __launch_bounds__(256)
    k_bias_fill(const typename dt<DT>::T *bias, typename dt<DT>::T *y, int64_t total, int N)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride)
        y[i] = bias[i % N];
}

/* ---- launchers ---------------------------------------------------------------- */

static unsigned grid_for(int64_t work, int threads, int64_t cap)
{
    int64_t g = (work + threads - 1) / threads;
    if (g < 1)
        g = 1;
    if (g > cap)
        g = cap;
    return (unsigned)g;
}

/* Smallest multiple-of-64 power of two >= work, within [64, cap]. */
static int row_threads(int64_t work, int cap)
{
    int t = 64;
    while (t < work && t * 2 <= cap)
        t *= 2;
    return t;
}

static int launched(const gg_op_def *op)
{
    hipError_t e = hipGetLastError();
    if (e != hipSuccess)
        return fail(-EIO, "%s: kernel launch failed: %s (%s)", op->name, hipGetErrorName(e),
                    hipGetErrorString(e));
    return 0;
}

template <int DT, int E>
static void launch_ew(gg_gpu_ctx *c, const void *a, const void *b, void *y, int64_t n, int64_t bn,
                      float p)
{
    typedef typename dt<DT>::T T;
    const int V = dt<DT>::VEC;
    /* a broadcast b must start every vector on a vector boundary of b */
    const bool vec = aligned16(a) && aligned16(y) && (!ew_has_b<E>::value || aligned16(b)) &&
                     (bn == n || bn % V == 0) && n >= V;
    const int threads = 256;
    const int64_t cap = (int64_t)c->sms * 16;
    if (vec)
        k_eltwise<DT, E, true><<<grid_for(n / V, threads, cap), threads, 0, c->stream>>>(
            (const T *)a, (const T *)b, (T *)y, n, bn, p);
    else
        k_eltwise<DT, E, false><<<grid_for(n, threads, cap), threads, 0, c->stream>>>(
            (const T *)a, (const T *)b, (T *)y, n, bn, p);
}

/* Row-kernel geometry for a row of nu units (see k_norm). */
enum { ROW_WARP, ROW_STREAM };
#define GG_ROW_WARP_R 2
#define GG_ROW_WARP_THREADS 256

typedef struct {
    int kind;
    int threads;
    unsigned grid;
} row_geometry;

static row_geometry row_geometry_for(const gg_gpu_ctx *c, int64_t rows, int nu)
{
    row_geometry g;
    const int cap = c->max_threads < 1024 ? c->max_threads : 1024;
    const int64_t gcap = 1 << 20;
    if (nu <= GG_ROW_WARP_R * c->warp) {
        g.kind = ROW_WARP;
        g.threads = GG_ROW_WARP_THREADS;
        const int64_t per_block = GG_ROW_WARP_THREADS / c->warp;
        const int64_t blocks = (rows + per_block - 1) / per_block;
        g.grid = (unsigned)(blocks < gcap ? blocks : gcap);
        return g;
    }
    g.kind = ROW_STREAM;
    g.threads = row_threads(nu, cap);
    g.grid = (unsigned)(rows < gcap ? rows : gcap);
    return g;
}

template <int DT, bool RMS, bool VEC>
static void launch_norm_v(gg_gpu_ctx *c, const void *x, const void *w, const void *b, void *y,
                          int64_t rows, int cols, float eps)
{
    typedef typename dt<DT>::T T;
    const T *xp = (const T *)x, *wp = (const T *)w, *bp = (const T *)b;
    T *yp = (T *)y;
    const row_geometry g = row_geometry_for(c, rows, cols / unit<DT, VEC>::N);
    if (g.kind == ROW_WARP)
        k_norm<DT, RMS, VEC, true, GG_ROW_WARP_R, GG_ROW_WARP_THREADS>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, wp, bp, yp, rows, cols, eps);
    else
        k_norm<DT, RMS, VEC, false, 0, 1024>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, wp, bp, yp, rows, cols, eps);
}

template <int DT, bool RMS>
static void launch_norm(gg_gpu_ctx *c, const void *x, const void *w, const void *b, void *y,
                        int64_t rows, int cols, float eps)
{
    const bool vec = cols % dt<DT>::VEC == 0 && aligned16(x) && aligned16(w) && aligned16(y) &&
                     (RMS || aligned16(b));
    if (vec)
        launch_norm_v<DT, RMS, true>(c, x, w, b, y, rows, cols, eps);
    else
        launch_norm_v<DT, RMS, false>(c, x, w, b, y, rows, cols, eps);
}

template <int DT, bool VEC>
static void launch_softmax_v(gg_gpu_ctx *c, const void *x, void *y, int64_t rows, int cols)
{
    typedef typename dt<DT>::T T;
    const T *xp = (const T *)x;
    T *yp = (T *)y;
    const row_geometry g = row_geometry_for(c, rows, cols / unit<DT, VEC>::N);
    if (g.kind == ROW_WARP)
        k_softmax<DT, VEC, true, GG_ROW_WARP_R, GG_ROW_WARP_THREADS>
            <<<g.grid, g.threads, 0, c->stream>>>(xp, yp, rows, cols);
    else
        k_softmax<DT, VEC, false, 0, 1024><<<g.grid, g.threads, 0, c->stream>>>(xp, yp, rows, cols);
}

template <int DT>
static void launch_softmax(gg_gpu_ctx *c, const void *x, void *y, int64_t rows, int cols)
{
    if (cols % dt<DT>::VEC == 0 && aligned16(x) && aligned16(y))
        launch_softmax_v<DT, true>(c, x, y, rows, cols);
    else
        launch_softmax_v<DT, false>(c, x, y, rows, cols);
}

template <int DT, int MAXM>
static void launch_linear_small_m(gg_gpu_ctx *c, const void *x, const void *w, const void *b,
                                  void *y, int M, int K, int N)
{
    typedef typename dt<DT>::T T;
    const int threads = 256, warps = threads / c->warp;
    const bool vec = K % dt<DT>::VEC == 0 && aligned16(x) && aligned16(w);
    const dim3 grid(grid_for(N, warps, 1 << 20), (unsigned)((M + MAXM - 1) / MAXM));
    if (vec)
        k_linear_small<DT, MAXM, true><<<grid, threads, 0, c->stream>>>(
            (const T *)x, (const T *)w, (const T *)b, (T *)y, M, K, N);
    else
        k_linear_small<DT, MAXM, false><<<grid, threads, 0, c->stream>>>(
            (const T *)x, (const T *)w, (const T *)b, (T *)y, M, K, N);
}

template <int DT>
static void launch_linear_small(gg_gpu_ctx *c, const void *x, const void *w, const void *b,
                                void *y, int M, int K, int N)
{
    if (M == 1)
        launch_linear_small_m<DT, 1>(c, x, w, b, y, M, K, N);
    else if (M <= 4)
        launch_linear_small_m<DT, 4>(c, x, w, b, y, M, K, N);
    else if (M <= 8)
        launch_linear_small_m<DT, 8>(c, x, w, b, y, M, K, N);
    else
        launch_linear_small_m<DT, 16>(c, x, w, b, y, M, K, N);
}

template <int DT>
static void launch_linear_tiled(gg_gpu_ctx *c, const void *x, const void *w, const void *b,
                                void *y, int M, int K, int N)
{
    typedef typename dt<DT>::T T;
    const int64_t mt = (M + GG_TILE - 1) / GG_TILE;
    dim3 grid((unsigned)((N + GG_TILE - 1) / GG_TILE), (unsigned)(mt < 65535 ? mt : 65535));
    if (K % dt<DT>::VEC == 0 && aligned16(x) && aligned16(w))
        k_linear_tiled<DT, true><<<grid, 256, 0, c->stream>>>((const T *)x, (const T *)w,
                                                              (const T *)b, (T *)y, M, K, N);
    else
        k_linear_tiled<DT, false><<<grid, 256, 0, c->stream>>>((const T *)x, (const T *)w,
                                                               (const T *)b, (T *)y, M, K, N);
}

#if defined(GG_BLAS_CUBLAS) || defined(GG_BLAS_ROCBLAS)
template <int DT>
static int launch_linear_blas(gg_gpu_ctx *c, const gg_op_def *op, const void *x, const void *w,
                              const void *b, void *y, int M, int K, int N)
{
    typedef typename dt<DT>::T T;
    const float alpha = 1.0f, beta = b ? 1.0f : 0.0f;
    if (b) {
        k_bias_fill<DT><<<grid_for((int64_t)M * N, 256, (int64_t)c->sms * 16), 256, 0,
                          c->stream>>>((const T *)b, (T *)y, (int64_t)M * N, N);
        int rc = launched(op);
        if (rc)
            return rc;
    }
    /* Row-major y[M,N] = x[M,K] w[N,K]^T is column-major y^T[N,M] =
     * op_T(w as K x N) . (x as K x M). */
#if defined(GG_BLAS_CUBLAS)
    const cudaDataType_t ty = DT == GG_DT_F32 ? CUDA_R_32F : DT == GG_DT_F16 ? CUDA_R_16F
                                                                             : CUDA_R_16BF;
    /* f32: pedantic f32 (no TF32 whatever the math mode or NVIDIA_TF32_OVERRIDE);
     * f16/bf16: tensor cores with f32 accumulation. */
    const cublasComputeType_t ct = DT == GG_DT_F32 ? CUBLAS_COMPUTE_32F_PEDANTIC
                                                   : CUBLAS_COMPUTE_32F;
    cublasStatus_t st = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, ty, K,
                                     x, ty, K, &beta, y, ty, N, ct, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        return fail(-EIO, "%s: cublasGemmEx (M=%d K=%d N=%d): %s", op->name, M, K, N,
                    cublasGetStatusString(st));
#else
    const rocblas_datatype ty = DT == GG_DT_F32   ? rocblas_datatype_f32_r
                                : DT == GG_DT_F16 ? rocblas_datatype_f16_r
                                                  : rocblas_datatype_bf16_r;
    rocblas_status st = rocblas_gemm_ex(c->blas, rocblas_operation_transpose,
                                        rocblas_operation_none, N, M, K, &alpha, w, ty, K, x, ty,
                                        K, &beta, y, ty, N, y, ty, N, rocblas_datatype_f32_r,
                                        rocblas_gemm_algo_standard, 0, 0);
    if (st != rocblas_status_success)
        return fail(-EIO, "%s: rocblas_gemm_ex (M=%d K=%d N=%d): status %d", op->name, M, K, N,
                    (int)st);
#endif
    return launched(op);
}
#endif

/* ---- dispatch ------------------------------------------------------------------ */

static float attr_value(const gg_op_def *op, const gg_op_attrs *attrs, int idx, double def)
{
    if (idx < 0 || idx >= op->nattrs)
        return (float)def;
    return (float)(attrs ? attrs->v[idx] : op->attrs[idx].def);
}

template <int DT>
static int launch_dt(gg_gpu_ctx *c, const gg_op_def *op, int kind, int attr_idx,
                     const gg_tensor *in, int nin, const gg_tensor *out,
                     const gg_op_attrs *attrs)
{
    const gg_tensor_desc *xd = &in[0].desc, *yd = &out[0].desc;
    const int64_t n = gg_desc_numel(yd), nx = gg_desc_numel(xd);
    const int64_t cols = xd->dims[xd->ndim - 1];
    void *y = out[0].data;
    const void *x = in[0].data;

    switch (kind) {
    case K_COPY:
    case K_SCALE:
    case K_GELU:
    case K_SILU: {
        if (nx != n)
            return fail(-EINVAL, "%s: x has %lld elements, y %lld", op->name, (long long)nx,
                        (long long)n);
        if (kind == K_COPY)
            launch_ew<DT, E_COPY>(c, x, NULL, y, n, n, 0.0f);
        else if (kind == K_SCALE)
            launch_ew<DT, E_SCALE>(c, x, NULL, y, n, n, attr_value(op, attrs, attr_idx, 1.0));
        else if (kind == K_SILU)
            launch_ew<DT, E_SILU>(c, x, NULL, y, n, n, 0.0f);
        else if (attr_value(op, attrs, attr_idx, 0.0) == 1.0f) /* choice 1: "tanh" */
            launch_ew<DT, E_GELU_TANH>(c, x, NULL, y, n, n, 0.0f);
        else
            launch_ew<DT, E_GELU_ERF>(c, x, NULL, y, n, n, 0.0f);
        return launched(op);
    }
    case K_ADD:
    case K_MUL:
    case K_SILU_MUL: {
        const int64_t bn = gg_desc_numel(&in[1].desc);
        if (nx != n || bn < 1 || n % bn != 0 || (bn != n && (kind == K_SILU_MUL || bn != cols)))
            return fail(-EINVAL, "%s: operand sizes do not fit (a %lld, b %lld, y %lld elements)",
                        op->name, (long long)nx, (long long)bn, (long long)n);
        const void *b = in[1].data;
        if (kind == K_ADD)
            launch_ew<DT, E_ADD>(c, x, b, y, n, bn, 0.0f);
        else if (kind == K_MUL)
            launch_ew<DT, E_MUL>(c, x, b, y, n, bn, 0.0f);
        else
            launch_ew<DT, E_SILU_MUL>(c, x, b, y, n, bn, 0.0f);
        return launched(op);
    }
    case K_LAYERNORM:
    case K_RMSNORM: {
        const int need = kind == K_LAYERNORM ? 3 : 2;
        if (nx != n || cols > INT_MAX)
            return fail(-EINVAL, "%s: x and y differ or the last dim is too large", op->name);
        for (int i = 1; i < need; i++)
            if (gg_desc_numel(&in[i].desc) != cols)
                return fail(-EINVAL, "%s: input %d must have %lld elements", op->name, i,
                            (long long)cols);
        const float eps = attr_value(op, attrs, attr_idx, kind == K_LAYERNORM ? 1e-5 : 1e-6);
        if (kind == K_LAYERNORM)
            launch_norm<DT, false>(c, x, in[1].data, in[2].data, y, n / cols, (int)cols, eps);
        else
            launch_norm<DT, true>(c, x, in[1].data, NULL, y, n / cols, (int)cols, eps);
        return launched(op);
    }
    case K_SOFTMAX: {
        if (nx != n || cols > INT_MAX)
            return fail(-EINVAL, "%s: x and y differ or the last dim is too large", op->name);
        launch_softmax<DT>(c, x, y, n / cols, (int)cols);
        return launched(op);
    }
    case K_LINEAR: {
        const gg_tensor_desc *wd = &in[1].desc;
        if (wd->ndim != 2 || wd->dims[1] != cols)
            return fail(-EINVAL, "%s: w must be [out, %lld]", op->name, (long long)cols);
        const int64_t K = cols, N = wd->dims[0], M = nx / K;
        if (M * N != n || (nin == 3 && gg_desc_numel(&in[2].desc) != N))
            return fail(-EINVAL, "%s: y or b does not fit x [%lld, %lld] and w [%lld, %lld]",
                        op->name, (long long)M, (long long)K, (long long)N, (long long)K);
        if (M > INT_MAX || K > INT_MAX || N > INT_MAX)
            return fail(-EINVAL, "%s: dims above 2^31 are not supported", op->name);
        const void *w = in[1].data, *b = nin == 3 ? in[2].data : NULL;
        if (y == x || y == w || (b && y == b))
            return fail(-EINVAL, "%s: y must not alias an input", op->name);
        const int Mi = (int)M, Ki = (int)K, Ni = (int)N;
#if defined(GG_BLAS_CUBLAS) || defined(GG_BLAS_ROCBLAS)
        if (c->linear_mode == GG_GPU_LINEAR_BLAS ||
            (c->linear_mode == GG_GPU_LINEAR_AUTO && M >= GG_LINEAR_BLAS_MIN_ROWS))
            return launch_linear_blas<DT>(c, op, x, w, b, y, Mi, Ki, Ni);
#endif
        /* small-M kernel vs tiled GEMM, measured on an H100 (K = 4096): the
         * small-M kernel wins up to 64 rows in f16/bf16 and up to ~24 in f32 */
        if (M <= (DT == GG_DT_F32 ? 16 : 64))
            launch_linear_small<DT>(c, x, w, b, y, Mi, Ki, Ni);
        else
            launch_linear_tiled<DT>(c, x, w, b, y, Mi, Ki, Ni);
        return launched(op);
    }
    }
    return fail(-ENOTSUP, "%s: no GPU kernel", op->name);
}

extern "C" int gg_gpu_op_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                                const gg_tensor *out, int nout, const gg_op_attrs *attrs)
{
    g_err[0] = '\0';
    if (!c || !op || !op->name || !in || !out)
        return fail(-EINVAL, "gg_gpu_op_launch: NULL argument");
    int kind = -1, attr_idx = -1;
    for (int k = 0; k < K_COUNT; k++) /* the table's own entries: a pointer compare */
        if (op == c->ops[k]) {
            kind = k;
            attr_idx = c->attr_idx[k];
            break;
        }
    if (kind < 0) {
        kind = kind_by_name(op->name);
        if (kind < 0)
            return fail(-ENOTSUP, "%s: no GPU kernel for this op", op->name);
        attr_idx = kinds[kind].attr ? gg_ops_attr_index(op, kinds[kind].attr) : -1;
    }
    if (nin < kinds[kind].nin_min || nin > kinds[kind].nin_max || nout != 1)
        return fail(-EINVAL, "%s: %d inputs and %d outputs do not fit the op", op->name, nin,
                    nout);
    const gg_dtype dtype = in[0].desc.dtype;
    for (int i = 0; i < nin + nout; i++) {
        const gg_tensor *t = i < nin ? &in[i] : &out[i - nin];
        if (t->desc.dtype != dtype)
            return fail(-EINVAL, "%s: operands must share one dtype", op->name);
        if (!t->data || gg_desc_numel(&t->desc) < 1)
            return fail(-EINVAL, "%s: operand %d is empty or has no data", op->name, i);
    }
    switch (dtype) {
    case GG_DT_F32:
        return launch_dt<GG_DT_F32>(c, op, kind, attr_idx, in, nin, out, attrs);
    case GG_DT_F16:
        return launch_dt<GG_DT_F16>(c, op, kind, attr_idx, in, nin, out, attrs);
    case GG_DT_BF16:
        return launch_dt<GG_DT_BF16>(c, op, kind, attr_idx, in, nin, out, attrs);
    default:
        return fail(-EINVAL, "%s: unknown dtype %d", op->name, (int)dtype);
    }
}
