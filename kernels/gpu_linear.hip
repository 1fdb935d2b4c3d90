/* SPDX-License-Identifier: MIT */
/* `linear` on the GPU: y[M,N] = x[M,K] . w[N,K]^T + b[N], f32 accumulation.
 * Four ways to compute it, picked per launch by the context's linear mode
 * (gpu_ops.h: gg_gpu_linear_mode) and the row count M:
 *   - the small-M kernel (decode-sized M: a warp per output column);
 *   - in f32 from 8 rows (to 32 in AUTO, 64 in OWN) on NVIDIA sm_90, a
 *     split-K kernel over a thread-block cluster (also fused.linear_act's,
 *     with its epilogue);
 *   - a tiled GEMM (any M, no vendor BLAS);
 *   - the vendor BLAS (cuBLAS on NVIDIA, rocBLAS on AMD when configured),
 *     whose handle and workspace live on the context.
 * y must not alias an input.  Launches only, like every kernel of
 * gpu_ops.hip: no allocation, synchronisation or copies (capture-safe). */
#include "gpu_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(GFXGRAPH_HIP_CUDA)
static void lmid_ctx_init(gg_gpu_ctx *c, int cc_major);
#endif

/* GG_LINEAR_BLAS_MIN_ROWS: rows from which AUTO hands linear to the vendor
 * BLAS.  cuBLAS: measured on an H100 (K = 4096, N = 4096 and 11008, all three
 * dtypes), the small-M kernel beats or ties cuBLAS at 1 row and loses from 2-4
 * rows on.  rocBLAS: not measured on RDNA2 yet; kept at 16. */
#if defined(GG_BLAS_CUBLAS)
#define GG_LINEAR_BLAS_MIN_ROWS 2
#elif defined(GG_BLAS_ROCBLAS)
#define GG_LINEAR_BLAS_MIN_ROWS 16
#endif

/* ---- the vendor BLAS on a context ------------------------------------------------ */

int gg_gpu_linear_ctx_init(gg_gpu_ctx *c, int cc_major)
{
#if defined(GFXGRAPH_HIP_CUDA)
    c->mma = cc_major >= 8;
    lmid_ctx_init(c, cc_major);
#else
    c->mma = 0;
    c->lmid_smax = 0;
#endif
#if defined(GG_BLAS_CUBLAS)
    /* cuBLAS recommends a 32 MiB workspace on Hopper and later, 4 MiB before.
     * Setting it explicitly keeps cuBLAS from allocating during capture.
     * cublasSetStream resets the workspace, so it comes first. */
    const size_t ws_bytes = (size_t)(cc_major >= 9 ? 32 : 4) << 20;
    c->ws_bytes = ws_bytes;
    cublasStatus_t st = cublasCreate(&c->blas);
    if (st != CUBLAS_STATUS_SUCCESS)
        return gg_gpu_fail(-EIO, "cublasCreate: %s", cublasGetStatusString(st));
    hipError_t e = hipMalloc(&c->ws, c->ws_bytes);
    if (e != hipSuccess) {
        c->ws = NULL;
        cublasDestroy(c->blas);
        return gg_gpu_fail(-ENOMEM, "cuBLAS workspace (%zu bytes): %s", ws_bytes,
                           hipGetErrorString(e));
    }
    if ((st = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasSetWorkspace(c->blas, c->ws, c->ws_bytes)) != CUBLAS_STATUS_SUCCESS) {
        (void)hipFree(c->ws);
        c->ws = NULL;
        cublasDestroy(c->blas);
        return gg_gpu_fail(-EIO, "cuBLAS setup: %s", cublasGetStatusString(st));
    }
#elif defined(GG_BLAS_ROCBLAS)
    (void)cc_major;
    const size_t ws_bytes = (size_t)32 << 20;
    c->ws_bytes = ws_bytes;
    if (rocblas_create_handle(&c->blas) != rocblas_status_success)
        return gg_gpu_fail(-EIO, "rocblas_create_handle failed");
    hipError_t e = hipMalloc(&c->ws, c->ws_bytes);
    if (e != hipSuccess) {
        c->ws = NULL;
        rocblas_destroy_handle(c->blas);
        return gg_gpu_fail(-ENOMEM, "rocBLAS workspace (%zu bytes): %s", ws_bytes,
                           hipGetErrorString(e));
    }
    if (rocblas_set_stream(c->blas, c->stream) != rocblas_status_success ||
        rocblas_set_workspace(c->blas, c->ws, c->ws_bytes) != rocblas_status_success) {
        (void)hipFree(c->ws);
        c->ws = NULL;
        rocblas_destroy_handle(c->blas);
        return gg_gpu_fail(-EIO, "rocBLAS setup failed");
    }
#elif defined(GFXGRAPH_HAVE_BLASLT)
    /* hipBLASLt without rocBLAS: the fused linear's Lt matmuls still want
     * a workspace, allocated here, never during capture; none on a device
     * hipBLASLt has no kernels for, where nothing would use it. */
    (void)cc_major;
    if (!gg_gpu_fused_lt_usable())
        return 0;
    const size_t ws_bytes = (size_t)32 << 20;
    hipError_t e = hipMalloc(&c->ws, ws_bytes);
    if (e != hipSuccess) {
        c->ws = NULL;
        return gg_gpu_fail(-ENOMEM, "%s workspace (%zu bytes): %s", GG_BLASLT_NAME, ws_bytes,
                           hipGetErrorString(e));
    }
    c->ws_bytes = ws_bytes;
#else
    (void)c;
    (void)cc_major;
#endif
    return 0;
}

extern "C" const char *gg_gpu_blas(void)
{
    return GG_BLAS_NAME;
}

void gg_gpu_linear_ctx_fini(gg_gpu_ctx *c)
{
#if defined(GG_BLAS_CUBLAS)
    cublasDestroy(c->blas);
#elif defined(GG_BLAS_ROCBLAS)
    rocblas_destroy_handle(c->blas);
#endif
    if (c->ws)
        (void)hipFree(c->ws);
    c->ws = NULL;
}

extern "C" int gg_gpu_ctx_set_linear_mode(gg_gpu_ctx *c, gg_gpu_linear_mode mode)
{
    if (!c || (mode != GG_GPU_LINEAR_AUTO && mode != GG_GPU_LINEAR_OWN &&
               mode != GG_GPU_LINEAR_BLAS))
        return gg_gpu_fail(-EINVAL, "gg_gpu_ctx_set_linear_mode: bad arguments");
#if !defined(GG_BLAS_CUBLAS) && !defined(GG_BLAS_ROCBLAS)
    if (mode == GG_GPU_LINEAR_BLAS)
        return gg_gpu_fail(-ENOTSUP, "this build has no vendor BLAS");
#endif
    c->linear_mode = mode;
    return 0;
}

/* ---- kernels ------------------------------------------------------------------------ */

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

/* Decode-sized M in f16/bf16 on NVIDIA tensor cores (mma.sync m16n8k16,
 * f32 accumulation: the products are exact and the sums f32, as in the CPU
 * reference).  A block of 8 warps owns 16 output columns (w rows); warp i
 * takes the i-th eighth of K (split-K inside the block, summed in shared
 * memory at the end), so w is streamed exactly once with 8x the warps a
 * column-per-block kernel would have in flight.  A step is 64 k: every lane
 * loads 32 contiguous bytes of two w rows and of one or two x rows, and the
 * four mma k-slices of the step read those registers in a permuted k order,
 * the same for w and x, which a dot product does not see.  No shared-memory
 * staging, no ldmatrix: 16-byte global loads straight into the fragments.
 * M <= 8: one mma per k-slice (x rows 0..7, the missing ones zero); M <= 16:
 * two.  K a multiple of 8 and 16-byte aligned operands (the launcher checks). */
#define GG_LMMA_WARPS 8
#define GG_LMMA_UNROLL 2
/* 32 bytes (16 elements) of row r at k, or zeros past K (K a multiple of 8:
 * each 16-byte half is all in or all out) or for a row not in [0, rows). */
static __device__ __forceinline__ void lmma_load(uint32_t (&w)[8], const uint16_t *p, int64_t r,
                                                 int rows, int k, int K)
{
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 lo = z, hi = z;
    if (r < rows) {
        const uint16_t *q = p + r * (int64_t)K + k;
        if (k < K)
            lo = *(const uint4 *)q;
        if (k + 8 < K)
            hi = *(const uint4 *)(q + 8);
    }
    w[0] = lo.x, w[1] = lo.y, w[2] = lo.z, w[3] = lo.w;
    w[4] = hi.x, w[5] = hi.y, w[6] = hi.z, w[7] = hi.w;
}

template <int DT, int MT>
__global__ void __launch_bounds__(GG_LMMA_WARPS * 32)
    k_linear_mma(const uint16_t *x, const uint16_t *w, const uint16_t *bias, uint16_t *y, int M,
                 int K, int N)
{
    typedef dt<DT> D;
    __shared__ float red[GG_LMMA_WARPS][16][16 * MT + 1];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int gid = lane >> 2, tig = lane & 3;
    const int64_t n0 = (int64_t)blockIdx.x * 16;
    /* this warp's k range, in 64-k steps */
    const int steps = (K + 63) / 64;
    const int per = (steps + GG_LMMA_WARPS - 1) / GG_LMMA_WARPS;
    const int s0 = wid * per, s1 = s0 + per < steps ? s0 + per : steps;
    float c[MT][4];
#pragma unroll
    for (int t = 0; t < MT; t++)
        c[t][0] = c[t][1] = c[t][2] = c[t][3] = 0.0f;
    for (int st = s0; st < s1; st += GG_LMMA_UNROLL) {
        uint32_t wa[GG_LMMA_UNROLL][8], wb[GG_LMMA_UNROLL][8], xa[GG_LMMA_UNROLL][MT][8];
#pragma unroll
        for (int u = 0; u < GG_LMMA_UNROLL; u++) {
            const int k = (st + u) * 64 + tig * 16;
            const bool in = st + u < s1;
            lmma_load(wa[u], w, n0 + gid, in ? N : 0, k, K);
            lmma_load(wb[u], w, n0 + gid + 8, in ? N : 0, k, K);
#pragma unroll
            for (int t = 0; t < MT; t++)
                lmma_load(xa[u][t], x, gid + 8 * t, in ? M : 0, k, K);
        }
#pragma unroll
        for (int u = 0; u < GG_LMMA_UNROLL; u++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t a[4] = {wa[u][2 * j], wb[u][2 * j], wa[u][2 * j + 1],
                                       wb[u][2 * j + 1]};
#pragma unroll
                for (int t = 0; t < MT; t++) {
                    const uint32_t bb[2] = {xa[u][t][2 * j], xa[u][t][2 * j + 1]};
                    mma_op<DT>::run(c[t], a, bb);
                }
            }
    }
    /* c[t]: (n gid, m 8t + 2 tig, +1), (n gid + 8, same m) */
#pragma unroll
    for (int t = 0; t < MT; t++) {
        red[wid][gid][8 * t + 2 * tig] = c[t][0];
        red[wid][gid][8 * t + 2 * tig + 1] = c[t][1];
        red[wid][gid + 8][8 * t + 2 * tig] = c[t][2];
        red[wid][gid + 8][8 * t + 2 * tig + 1] = c[t][3];
    }
    __syncthreads();
    for (int o = threadIdx.x; o < 16 * 8 * MT; o += blockDim.x) {
        const int m = o / 16, nn = o % 16;
        const int64_t n = n0 + nn;
        if (m >= M || n >= N)
            continue;
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < GG_LMMA_WARPS; i++)
            sum += red[i][nn][m];
        if (bias)
            sum += D::ld(bias[n]);
        y[(int64_t)m * N + n] = D::st(sum);
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

/* f32 at 8..64 rows (NVIDIA sm_90).  32 rows of x against a 64-column tile
 * of w, the K range split over the S blocks of a thread-block cluster (so
 * the grid fills the chip at N = 1024..8192 without a second launch or a
 * workspace), summed through distributed shared memory in rank order (the
 * same bits for every row count from 8 to 32, and for every one from 33 to 64),
 * then bias, an optional copy of the value (fused.linear_act's h) and the
 * activation, all in f32.  cuBLAS gives these shapes few blocks (32 rows x N
 * / its tile) and runs them as a SIMT GEMM far under the f32 FMA rate.
 *
 * A block is 4 warps over the same 32 x 64 outputs, warp i taking the i-th
 * quarter of each BK-deep k slice (summed in shared memory at the end); a
 * lane holds 8 rows x 8 columns (rows ty + 4i, columns tx + 8j), so a 4-k
 * step is 16 16-byte shared loads, one wavefront each without conflicts, for
 * 256 FMAs (a 4 x 4 tile a lane, one load per 8 FMAs, ran at a quarter of
 * the FMA rate).  x and w slices are copied into shared memory with cp.async,
 * GG_LMID_STAGES deep, k-contiguous (16-byte copies when K % 4 == 0 and x, w
 * are 16-byte aligned, else 4-byte ones); a thread's copies are rows a fixed
 * stride apart at one column, so a slice's addresses are its base plus
 * constants (per-copy index arithmetic and branches had cost a third of the
 * instructions).  Rows past M and columns past N are zero-filled, never
 * stored.  More than 32 rows: groups of 32 (blockIdx.z), w re-read from L2. */
#if defined(GFXGRAPH_HIP_CUDA)
#define GG_LMID_ROWS 32
#define GG_LMID_COLS 64
#define GG_LMID_THREADS 128
#define GG_LMID_STAGES 3
/* shared memory of the kernel for BK-deep slices */
#define GG_LMID_SMEM(BK) ((size_t)GG_LMID_STAGES * (GG_LMID_ROWS + GG_LMID_COLS) * ((BK) + 4) * 4)

typedef struct {
    const float *x, *w, *b;
    float *h, *y;
    int M, K, N, act;
    float p;
} lmid_args;

/* gpu_fused.hip's activations (fz_act), the same formulas, so that the
 * fused op gives the same values at every row count */
static __device__ __forceinline__ float lmid_act(int act, float v, float p)
{
    switch (act) {
    case GG_ACT_GELU_ERF:
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case GG_ACT_GELU_TANH: {
        const float k0 = 0.79788456080286536f;
        return 0.5f * v * (1.0f + tanhf(k0 * (v + 0.044715f * v * v * v)));
    }
    case GG_ACT_SILU:
        return v / (1.0f + expf(-v));
    case GG_ACT_SCALE:
        return v * p;
    }
    return v;
}

/* n bytes (16 or 4) from src to shared dst, or zeros when !in (src is then
 * not read) */
template <int NB>
static __device__ __forceinline__ void lmid_cp(float *dst, const float *src, bool in)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    if constexpr (NB == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                     "r"(in ? 16 : 0)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
                     "r"(in ? 4 : 0)
                     : "memory");
#else
    (void)dst, (void)src, (void)in;
#endif
}

static __device__ __forceinline__ void lmid_commit(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N> static __device__ __forceinline__ void lmid_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

template <int S, bool VEC, int BK>
__global__ void __launch_bounds__(GG_LMID_THREADS, 2) k_linear_mid(lmid_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    enum { T = GG_LMID_THREADS, R = GG_LMID_ROWS, BN = GG_LMID_COLS, NW = T / 32 };
    enum { LD = BK + 4 /* 16-byte rows, conflict-free reads */, KW = BK / NW /* k a warp takes */ };
    enum { STAGE = (R + BN) * LD, RLD = BN + 8 /* a warp's 4 rows 8 banks apart */ };
    /* copies: a thread's units are rows row0 + q RS, all at column kc */
    enum { E = VEC ? 4 : 1, PR = BK / E, RS = T / PR, QX = R / RS, QW = BN / RS };
    static_assert(NW * R * RLD <= GG_LMID_STAGES * STAGE, "partials fit the pipeline's memory");
    static_assert((R * BN) % (S * T) == 0, "each rank reduces whole passes");
    static_assert(T % PR == 0 && R % RS == 0 && BN % RS == 0, "whole passes of copies");
    extern __shared__ __align__(16) float sm[];
    const int rank = (int)gg_cluster_rank();
    const int tid = threadIdx.x, wk = tid / 32, lane = tid % 32, tx = lane % 8, ty = lane / 8;
    const int n0 = blockIdx.y * BN, m0 = blockIdx.z * R;
    const int M = a.M, K = a.K, N = a.N;
    const int nch = (K + BK - 1) / BK, per = (nch + S - 1) / S;
    const int c0 = rank * per, c1 = c0 + per < nch ? c0 + per : nch;
    const int row0 = tid / PR, kc = (tid % PR) * E;
    /* rows past M or N read row 0 (never used: zero-filled) */
    const float *xb = a.x + (int64_t)(m0 + row0 < M ? m0 + row0 : 0) * K + kc;
    const float *wb = a.w + (int64_t)(n0 + row0 < N ? n0 + row0 : 0) * K + kc;
    const int64_t rsk = (int64_t)RS * K;
    auto load = [&](int ch, int st) {
        float *dst = sm + st * STAGE + row0 * LD + kc;
        const int k0 = ch * BK;
        const bool kin = k0 + kc < K;
#pragma unroll
        for (int q = 0; q < QX; q++) {
            const bool in = kin && m0 + row0 + q * RS < M;
            lmid_cp<4 * E>(dst + q * RS * LD, in ? xb + q * rsk + k0 : a.x, in);
        }
#pragma unroll
        for (int q = 0; q < QW; q++) {
            const bool in = kin && n0 + row0 + q * RS < N;
            lmid_cp<4 * E>(dst + (R + q * RS) * LD, in ? wb + q * rsk + k0 : a.w, in);
        }
    };
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc[i][j] = 0.0f;
#pragma unroll
    for (int s = 0; s < GG_LMID_STAGES - 1; s++) {
        if (c0 + s < c1)
            load(c0 + s, s);
        lmid_commit(); /* empty groups too: the wait counts stay uniform */
    }
    int st = 0;
    for (int ch = c0; ch < c1; ch++) {
        lmid_wait<GG_LMID_STAGES - 2>();
        __syncthreads(); /* slice ch is in; the stage read last is free */
        const int nx = ch + GG_LMID_STAGES - 1;
        if (nx < c1)
            load(nx, st == 0 ? GG_LMID_STAGES - 1 : st - 1);
        lmid_commit();
        const float *xs = sm + st * STAGE + wk * KW;
        const float *ws = xs + R * LD;
        st = st + 1 == GG_LMID_STAGES ? 0 : st + 1;
#pragma unroll
        for (int kk = 0; kk < KW; kk += 4) {
            float4 bv[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                bv[j] = *(const float4 *)(ws + (tx + 8 * j) * LD + kk);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float4 av = *(const float4 *)(xs + (ty + 4 * i) * LD + kk);
                /* k component outermost: 8 independent FMAs between two
                 * that update the same sum */
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = fmaf(av.x, bv[j].x, acc[i][j]);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = fmaf(av.y, bv[j].y, acc[i][j]);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = fmaf(av.z, bv[j].z, acc[i][j]);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = fmaf(av.w, bv[j].w, acc[i][j]);
            }
        }
    }
    lmid_wait<0>();
    __syncthreads(); /* every read of the pipeline's memory is done */
    /* the four warps' partials, then their sum (warp order) over warp 0's */
    float *red = sm;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            red[(wk * R + ty + 4 * i) * RLD + tx + 8 * j] = acc[i][j];
    __syncthreads();
#pragma unroll
    for (int q = 0; q < R * BN / T; q++) {
        const int o = q * T + tid, at = (o / BN) * RLD + o % BN;
        float v = red[at];
#pragma unroll
        for (int w = 1; w < NW; w++)
            v += red[w * R * RLD + at];
        red[at] = v; /* only this thread reads or writes at */
    }
    gg_cluster_sync(); /* every rank's block sums are visible to the cluster */
    /* rank r: the r-th S-th of the tile, consecutive columns a warp */
    enum { SHARE = R * BN / S };
#pragma unroll
    for (int q = 0; q < SHARE / T; q++) {
        const int o = rank * SHARE + q * T + tid, row = o / BN, col = o % BN;
        float v = 0.0f;
#pragma unroll
        for (int r = 0; r < S; r++)
            v += gg_cluster_ld(red + row * RLD + col, (unsigned)r);
        const int m = m0 + row, n = n0 + col;
        if (m < M && n < N) {
            if (a.b)
                v += a.b[n];
            const int64_t at = (int64_t)m * N + n;
            if (a.h)
                a.h[at] = v;
            a.y[at] = a.act ? lmid_act(a.act, v, a.p) : v;
        }
    }
    gg_cluster_sync(); /* no block leaves while another still reads its sums */
#else
    (void)a;
#endif
}
#endif

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

/* ---- launchers ---------------------------------------------------------------------- */

template <int DT, int MAXM>
static void launch_linear_small_m(gg_gpu_ctx *c, const void *x, const void *w, const void *b,
                                  void *y, int M, int K, int N)
{
    typedef typename dt<DT>::T T;
    const int threads = 256, warps = threads / c->warp;
    const bool vec = K % dt<DT>::VEC == 0 && gg_gpu_aligned16(x) && gg_gpu_aligned16(w);
    const dim3 grid(gg_gpu_grid_for(N, warps, 1 << 20), (unsigned)((M + MAXM - 1) / MAXM));
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

/* 1 when launched (f16/bf16, M <= 16, K a multiple of 8, 16-byte aligned x
 * and w, a device that has the kernel), 0 when the shape is not its. */
template <int DT>
static int launch_linear_mma(gg_gpu_ctx *c, const void *x, const void *w, const void *b, void *y,
                             int M, int K, int N)
{
    if constexpr (DT == GG_DT_F32) {
        (void)c, (void)x, (void)w, (void)b, (void)y, (void)M, (void)K, (void)N;
        return 0;
    } else {
        if (!c->mma || M > 16 || K % 8 != 0 || !gg_gpu_aligned16(x) ||
            !gg_gpu_aligned16(w))
            return 0;
        const unsigned grid = (unsigned)((N + 15) / 16);
        if (M <= 8)
            k_linear_mma<DT, 1><<<grid, GG_LMMA_WARPS * 32, 0, c->stream>>>(
                (const uint16_t *)x, (const uint16_t *)w, (const uint16_t *)b, (uint16_t *)y, M,
                K, N);
        else
            k_linear_mma<DT, 2><<<grid, GG_LMMA_WARPS * 32, 0, c->stream>>>(
                (const uint16_t *)x, (const uint16_t *)w, (const uint16_t *)b, (uint16_t *)y, M,
                K, N);
        return 1;
    }
}

template <int DT>
static void launch_linear_tiled(gg_gpu_ctx *c, const void *x, const void *w, const void *b,
                                void *y, int M, int K, int N)
{
    typedef typename dt<DT>::T T;
    const int64_t mt = (M + GG_TILE - 1) / GG_TILE;
    dim3 grid((unsigned)((N + GG_TILE - 1) / GG_TILE), (unsigned)(mt < 65535 ? mt : 65535));
    if (K % dt<DT>::VEC == 0 && gg_gpu_aligned16(x) && gg_gpu_aligned16(w))
        k_linear_tiled<DT, true><<<grid, 256, 0, c->stream>>>((const T *)x, (const T *)w,
                                                              (const T *)b, (T *)y, M, K, N);
    else
        k_linear_tiled<DT, false><<<grid, 256, 0, c->stream>>>((const T *)x, (const T *)w,
                                                               (const T *)b, (T *)y, M, K, N);
}

/* ---- f32 from 8 rows: the clustered split-K kernel -------------------------------- */

/* Rows of f32 linear from which the clustered kernel runs, and up to which:
 * measured on an H100 at the four MLP shapes (bench_kernels, results
 * h100-linear-f32*.json), it costs what 32 rows cost from 2 rows on and
 * beats cuBLAS from 8 (at 8 it wins three by 0.57-0.81x; below 8 cuBLAS's
 * GEMV-like kernels win two of four); in AUTO (and the fused linear_act) up
 * to 32, where it wins all four; from 33 rows it reads w twice and only
 * ties, so cuBLAS keeps them.  OWN mode (no BLAS) takes it to 64 rather than
 * the tiled GEMM.  At 8 rows and K up to GG_LMID_K8_BLAS cuBLAS keeps the
 * shape in AUTO unless GFXGRAPH_LINEAR_MID forces a split: its 8-row kernel
 * took 13.9 us at K 1024 x N 4096, this one 14.5-21.5 with each split and
 * slice depth. */
#define GG_LMID_MIN_ROWS 8
#define GG_LMID_K8_BLAS 1024
#define GG_LMID_AUTO_ROWS 32
#define GG_LMID_OWN_ROWS 64

#if defined(GFXGRAPH_HIP_CUDA)
template <int S, bool VEC, int BK>
static int lmid_launch_t(gg_gpu_ctx *c, const lmid_args &a)
{
    const dim3 grid(S, (unsigned)((a.N + GG_LMID_COLS - 1) / GG_LMID_COLS),
                    (unsigned)((a.M + GG_LMID_ROWS - 1) / GG_LMID_ROWS));
    const cudaError_t e = gg_hip_launch_cluster(k_linear_mid<S, VEC, BK>, grid,
                                                dim3(GG_LMID_THREADS), GG_LMID_SMEM(BK),
                                                c->stream, (unsigned)S, a);
    if (e == cudaErrorInvalidClusterSize || e == cudaErrorLaunchOutOfResources ||
        e == cudaErrorInvalidConfiguration) {
        /* a cluster this device (or its MPS or MIG share) cannot place:
         * nothing was enqueued, and the linear goes the way it went before */
        (void)cudaGetLastError();
        return 1;
    }
    if (e != cudaSuccess)
        return gg_gpu_fail(-EIO, "linear (f32, %d rows): cluster launch (split %d): %s", a.M, S,
                           cudaGetErrorString(e));
    return 0;
}

template <bool VEC, int BK> static int lmid_launch_s(gg_gpu_ctx *c, const lmid_args &a, int s)
{
    switch (s) {
    case 2:
        return lmid_launch_t<2, VEC, BK>(c, a);
    case 4:
        return lmid_launch_t<4, VEC, BK>(c, a);
    case 8:
        return lmid_launch_t<8, VEC, BK>(c, a);
    default:
        return lmid_launch_t<16, VEC, BK>(c, a);
    }
}

/* Each instance's shared memory past the 48 KiB default, and 16-block
 * clusters (past the portable size): 0, or the first failure. */
template <int S, bool VEC, int BK> static cudaError_t lmid_attr_one(bool s16)
{
    cudaError_t e = cudaFuncSetAttribute(k_linear_mid<S, VEC, BK>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)GG_LMID_SMEM(BK));
    if (e == cudaSuccess && s16)
        e = gg_hip_allow_big_cluster((const void *)k_linear_mid<S, VEC, BK>);
    return e;
}

template <bool VEC, int BK> static cudaError_t lmid_attr_bk(void)
{
    cudaError_t e = lmid_attr_one<2, VEC, BK>(false);
    if (e == cudaSuccess)
        e = lmid_attr_one<4, VEC, BK>(false);
    if (e == cudaSuccess)
        e = lmid_attr_one<8, VEC, BK>(false);
    if (e == cudaSuccess)
        e = lmid_attr_one<16, VEC, BK>(true);
    return e;
}

/* GFXGRAPH_LINEAR_MID, read at context creation: unset, the pick below; 0,
 * never (f32 goes the way it went before this kernel); S or S:BK (S 2, 4,
 * 8 or 16; BK 32 or 64), that split and slice depth for every shape, for
 * benchmarks. */
static void lmid_ctx_init(gg_gpu_ctx *c, int cc_major)
{
    c->lmid_smax = 0;
    c->lmid_s = c->lmid_bk = 0;
    if (cc_major < 9)
        return;
    const char *e = getenv("GFXGRAPH_LINEAR_MID");
    if (e && !strcmp(e, "0"))
        return;
    int k = 0, bk = 0;
    if (e && sscanf(e, "%d:%d", &k, &bk) >= 1) {
        if (k == 2 || k == 4 || k == 8 || k == 16)
            c->lmid_s = k;
        if (bk == 32 || bk == 64)
            c->lmid_bk = bk;
    }
    /* built from compute_90 on, not JIT-compiled from older PTX whose
     * cluster code is empty (gg_hip_func_ptx_arch) */
    if (gg_hip_func_ptx_arch((const void *)k_linear_mid<2, true, 32>) < 90 ||
        gg_hip_func_ptx_arch((const void *)k_linear_mid<2, true, 64>) < 90)
        return;
    if (lmid_attr_bk<true, 32>() != cudaSuccess || lmid_attr_bk<false, 32>() != cudaSuccess ||
        lmid_attr_bk<true, 64>() != cudaSuccess || lmid_attr_bk<false, 64>() != cudaSuccess) {
        (void)cudaGetLastError();
        return; /* not launchable as built: f32 goes the way it went before */
    }
    c->lmid_smax = 16;
}

/* Split and slice depth for N columns, K and M, as measured on an H100
 * (bench_kernels, every split and depth at the MLP shapes, M 32): a grid of
 * about one block a multiprocessor runs best with 2-block clusters and
 * 64-k slices (N 4096 and 8192: 14.6 and 35.6 us against cuBLAS's 18.4 and
 * 45.8); narrower N needs wide clusters for blocks, and 8- or 16-block
 * clusters place evenly only at about two blocks a multiprocessor, which
 * 32-k slices allow (three fit; N 1024 and 2048: 16.5 and 47.6 us against
 * 20.7 and 49.4).  At least two slices a block. */
static void lmid_pick(const gg_gpu_ctx *c, int M, int K, int N, int *s, int *bk)
{
    const int64_t sms = c->sms > 0 ? c->sms : 1;
    const int64_t tiles = (int64_t)((N + GG_LMID_COLS - 1) / GG_LMID_COLS) *
                          ((M + GG_LMID_ROWS - 1) / GG_LMID_ROWS);
    int k = 2, d = 64;
    if (tiles * 2 * 10 < sms * 9) {
        d = 32;
        while (k < c->lmid_smax && tiles * k * 10 < sms * 19)
            k *= 2;
    }
    while (k > 2 && 2 * k * d > K)
        k /= 2;
    *s = k;
    *bk = d;
}
#endif

/* 0 launched, 1 not this kernel's (dtype, rows, device, mode, env), < 0 failed. */
static int lmid_launch(gg_gpu_ctx *c, gg_dtype dtype, const void *x, const void *w,
                       const void *b, void *h, void *y, int M, int K, int N, int act, float p)
{
#if defined(GFXGRAPH_HIP_CUDA)
    if (dtype != GG_DT_F32 || !c->lmid_smax || c->linear_mode == GG_GPU_LINEAR_BLAS ||
        M < GG_LMID_MIN_ROWS || N > 65535 * GG_LMID_COLS ||
        M > (c->linear_mode == GG_GPU_LINEAR_OWN ? GG_LMID_OWN_ROWS : GG_LMID_AUTO_ROWS) ||
        (c->linear_mode != GG_GPU_LINEAR_OWN && !c->lmid_s && M <= GG_LMID_MIN_ROWS &&
         K <= GG_LMID_K8_BLAS))
        return 1;
    int s, bk;
    lmid_pick(c, M, K, N, &s, &bk);
    if (c->lmid_s)
        s = c->lmid_s;
    if (c->lmid_bk)
        bk = c->lmid_bk;
    if (s > c->lmid_smax)
        s = c->lmid_smax;
    lmid_args a;
    a.x = (const float *)x;
    a.w = (const float *)w;
    a.b = (const float *)b;
    a.h = (float *)h;
    a.y = (float *)y;
    a.M = M;
    a.K = K;
    a.N = N;
    a.act = act;
    a.p = p;
    const bool vec = K % 4 == 0 && gg_gpu_aligned16(x) && gg_gpu_aligned16(w);
    if (bk == 32)
        return vec ? lmid_launch_s<true, 32>(c, a, s) : lmid_launch_s<false, 32>(c, a, s);
    return vec ? lmid_launch_s<true, 64>(c, a, s) : lmid_launch_s<false, 64>(c, a, s);
#else
    (void)c, (void)dtype, (void)x, (void)w, (void)b, (void)h, (void)y;
    (void)M, (void)K, (void)N, (void)act, (void)p;
    return 1;
#endif
}

int gg_gpu_linear_mid_launch(gg_gpu_ctx *c, gg_dtype dtype, const void *x, const void *w,
                             const void *b, void *h, void *y, int M, int K, int N, int act,
                             float p)
{
    if (!c || !x || !w || !y || M < 1 || K < 1 || N < 1)
        return gg_gpu_fail(-EINVAL, "linear (mid rows): bad arguments");
    return lmid_launch(c, dtype, x, w, b, h, y, M, K, N, act, p);
}

#if defined(GG_BLAS_CUBLAS) || defined(GG_BLAS_ROCBLAS)
template <int DT>
static int launch_linear_blas(gg_gpu_ctx *c, const gg_op_def *op, const void *x, const void *w,
                              const void *b, void *y, int M, int K, int N)
{
    typedef typename dt<DT>::T T;
    const float alpha = 1.0f, beta = b ? 1.0f : 0.0f;
    if (b) {
        k_bias_fill<DT>
            <<<gg_gpu_grid_for((int64_t)M * N, 256, (int64_t)c->sms * 16), 256, 0, c->stream>>>(
                (const T *)b, (T *)y, (int64_t)M * N, N);
        int rc = gg_gpu_launched(op);
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
        return gg_gpu_fail(-EIO, "%s: cublasGemmEx (M=%d K=%d N=%d): %s", op->name, M, K, N,
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
        return gg_gpu_fail(-EIO, "%s: rocblas_gemm_ex (M=%d K=%d N=%d): status %d", op->name, M, K,
                           N, (int)st);
#endif
    return gg_gpu_launched(op);
}
#endif

/* ---- dispatch: checks, then BLAS, small-M kernel or tiled GEMM --------------------- */

template <int DT>
static int linear_launch_dt(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                            const gg_tensor *out)
{
    const gg_tensor_desc *xd = &in[0].desc, *yd = &out[0].desc;
    const int64_t n = gg_desc_numel(yd), nx = gg_desc_numel(xd);
    const int64_t cols = xd->dims[xd->ndim - 1];
    void *y = out[0].data;
    const void *x = in[0].data;
    const gg_tensor_desc *wd = &in[1].desc;
    if (wd->ndim != 2 || wd->dims[1] != cols)
        return gg_gpu_fail(-EINVAL, "%s: w must be [out, %lld]", op->name, (long long)cols);
    const int64_t K = cols, N = wd->dims[0], M = nx / K;
    if (M * N != n || (nin == 3 && gg_desc_numel(&in[2].desc) != N))
        return gg_gpu_fail(-EINVAL, "%s: y or b does not fit x [%lld, %lld] and w [%lld, %lld]",
                           op->name, (long long)M, (long long)K, (long long)N, (long long)K);
    if (M > INT_MAX || K > INT_MAX || N > INT_MAX)
        return gg_gpu_fail(-EINVAL, "%s: dims above 2^31 are not supported", op->name);
    const void *w = in[1].data, *b = nin == 3 ? in[2].data : NULL;
    if (y == x || y == w || (b && y == b))
        return gg_gpu_fail(-EINVAL, "%s: y must not alias an input", op->name);
    const int Mi = (int)M, Ki = (int)K, Ni = (int)N;
    /* the tensor-core small-M kernel streams w at the copy rate up to 16
     * rows (bench_kernels, H100), where cuBLAS reaches ~75% at 4096 x 4096 */
    if (c->linear_mode != GG_GPU_LINEAR_BLAS && M <= 16 &&
        launch_linear_mma<DT>(c, x, w, b, y, Mi, Ki, Ni))
        return gg_gpu_launched(op);
    /* f32 from 8 rows: the clustered split-K kernel (bench_kernels, H100) */
    const int mrc = lmid_launch(c, (gg_dtype)DT, x, w, b, NULL, y, Mi, Ki, Ni, GG_ACT_NONE, 0.0f);
    if (mrc <= 0)
        return mrc < 0 ? mrc : gg_gpu_launched(op);
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
    return gg_gpu_launched(op);
}

int gg_gpu_linear_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                         const gg_tensor *out)
{
    switch (in[0].desc.dtype) {
    case GG_DT_F32:
        return linear_launch_dt<GG_DT_F32>(c, op, in, nin, out);
    case GG_DT_F16:
        return linear_launch_dt<GG_DT_F16>(c, op, in, nin, out);
    case GG_DT_BF16:
        return linear_launch_dt<GG_DT_BF16>(c, op, in, nin, out);
    default:
        return gg_gpu_fail(-EINVAL, "%s: unknown dtype %d", op->name, (int)in[0].desc.dtype);
    }
}
