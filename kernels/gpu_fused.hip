/* SPDX-License-Identifier: MIT */
/* Kernels for the fused ops (ops.h, "fused ops"; planned by the daemon's
 * core/fuse.c).  Each computes what its node sequence computes, in one
 * pass where the sequence made several, and rounds every intermediate to
 * the storage dtype where the sequence stored it, so that a fused result
 * differs from the unfused one by reduction order only, with one exception:
 * the BLASLt GELU_BIAS epilogue (linear with its own bias, then the tanh
 * GELU, from the BLAS row count on) applies the GELU to the unrounded sum
 * with the library's own GELU, within the ops' tolerances of the sequence.
 *
 *   norm_act, add_rmsnorm: one row kernel (k_fnorm): an optional residual
 *     add first (its sum written), layernorm or rmsnorm, an optional
 *     activation; the row stays in registers up to 4 units a thread.
 *   linear_act: the small-M kernel with the bias and activation in its
 *     epilogue; from the BLAS row count on, a BLASLt matmul with its BIAS or
 *     GELU_BIAS epilogue (cuBLASLt on NVIDIA, hipBLASLt on AMD where the
 *     build found it; one source in hipBLASLt's names, gg_hip.h maps them;
 *     the tanh GELU is the only one either has), otherwise the linear as it
 *     would run plus one epilogue kernel.  f32 at 8..32 rows on NVIDIA sm_90
 *     (AUTO and OWN modes): gpu_linear.hip's clustered split-K kernel, bias
 *     and any activation in its own f32 epilogue, ahead of both.
 *   gate_up: at decode sizes one pass over x computing both dot products
 *     and silu(g) * u; above them the two linears and silu_mul as they
 *     would run (g and u are the program's scratch).
 *   ew_chain: one elementwise kernel interpreting up to six steps.
 *
 * Launches only (capture-safe), like every kernel of gpu_ops.hip. */
#include "gpu_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(GFXGRAPH_HAVE_BLASLT)
#include <pthread.h> /* the Lt handle's one-time creation */
#endif

/* ---- shared device helpers ----------------------------------------------------- */

template <int DT> static __device__ __forceinline__ float fz_rnd(float v)
{
    if constexpr (DT == GG_DT_F32)
        return v;
    else
        return dt<DT>::ld(dt<DT>::st(v));
}

static __device__ __forceinline__ float fz_act(int act, float v, float p)
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

static __device__ __forceinline__ float fz_block_sum(float v, float *sh)
{
    v = gg_warp_sum(v);
    const int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize;
    __syncthreads();
    if (lane == 0)
        sh[wid] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < nw; i++)
        t += sh[i];
    return t;
}

/* ---- norm rows: [residual add ->] layernorm/rmsnorm [-> activation] ------------- */

typedef struct {
    const void *x, *r, *w, *b; /* r: residual (add_rmsnorm), b: layernorm bias */
    void *s, *h, *y;           /* s: the sum; h: the normed value kept */
    int64_t rows;
    int cols;
    float eps, p;
    int rms, act;
    int round_x;               /* rmsnorm's: x * rstd rounded before the weight */
} fz_norm_args;

/* One block a row.  R > 0: a thread's R units of the row stay in registers
 * from load to store; R == 0: every pass re-reads them (long rows).  Each
 * thread touches the same units in every pass, so y over x, or s over x,
 * is safe. */
#define FZ_UNITS(...)                                                                   \
    do {                                                                                \
        if constexpr (R > 0) {                                                          \
            _Pragma("unroll") for (int j = 0; j < (R > 0 ? R : 1); j++)                 \
            {                                                                           \
                const int i = threadIdx.x + j * width;                                  \
                if (i < nu) {                                                           \
                    float *vv = v[j];                                                   \
                    __VA_ARGS__                                                         \
                }                                                                       \
            }                                                                           \
        } else {                                                                        \
            for (int i = threadIdx.x; i < nu; i += width) {                             \
                const int j = 0;                                                        \
                (void)j;                                                                \
                float *vv = v[0];                                                       \
                __VA_ARGS__                                                             \
            }                                                                           \
        }                                                                               \
    } while (0)

template <int DT, bool VEC, int R>
__global__ void __launch_bounds__(1024) k_fnorm(fz_norm_args a)
{
    typedef typename dt<DT>::T T;
    typedef unit<DT, VEC> U;
    __shared__ float sh[32];
    const int nu = a.cols / U::N, width = blockDim.x;
    /* with the row in registers a thread keeps its columns for every row: w
     * and b are loaded once, and before the reductions, so their latency
     * hides behind the row's (at decode sizes a kernel is mostly latency) */
    typename U::raw wr[R > 0 ? R : 1], br[R > 0 ? R : 1];
    if constexpr (R > 0) {
#pragma unroll
        for (int j = 0; j < R; j++) {
            const int i = threadIdx.x + j * width;
            if (i < nu) {
                wr[j] = U::load_raw((const T *)a.w, i);
                br[j] = a.rms ? wr[j] : U::load_raw((const T *)a.b, i);
            }
        }
    }
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const T *xr = (const T *)a.x + row * a.cols;
        const T *rr = a.r ? (const T *)a.r + row * a.cols : NULL;
        T *sr = a.s ? (T *)a.s + row * a.cols : NULL;
        T *hr = a.h ? (T *)a.h + row * a.cols : NULL;
        T *yr = (T *)a.y + row * a.cols;
        const T *src = rr ? (const T *)sr : xr; /* what the norm reads */
        float v[R > 0 ? R : 1][U::N];
        float sum = 0.0f;
        /* pass 1: the values (the residual sum rounded and written), their sum */
        FZ_UNITS({
            U::load(xr, i, vv);
            if (rr) {
                float rv[U::N];
                U::load(rr, i, rv);
_Pragma("unroll")
                for (int k = 0; k < U::N; k++)
                    vv[k] = fz_rnd<DT>(vv[k] + rv[k]);
                U::store(sr, i, vv);
            }
_Pragma("unroll")
            for (int k = 0; k < U::N; k++)
                sum += vv[k];
        });
        const float mean = a.rms ? 0.0f : fz_block_sum(sum, sh) / (float)a.cols;
        float q = 0.0f;
        FZ_UNITS({
            if (R == 0)
                U::load(src, i, vv);
_Pragma("unroll")
            for (int k = 0; k < U::N; k++) {
                const float d = vv[k] - mean;
                q += d * d;
            }
        });
        const float rstd = 1.0f / sqrtf(fz_block_sum(q, sh) / (float)a.cols + a.eps);
        FZ_UNITS({
            if (R == 0)
                U::load(src, i, vv);
            float wv[U::N], bv[U::N], o[U::N];
            if constexpr (R > 0) {
                U::cvt(wr[j], wv);
                U::cvt(br[j], bv);
            } else {
                U::load((const T *)a.w, i, wv);
                if (!a.rms)
                    U::load((const T *)a.b, i, bv);
            }
_Pragma("unroll")
            for (int k = 0; k < U::N; k++) {
                const float t = !a.rms     ? (vv[k] - mean) * rstd * wv[k] + bv[k]
                                : a.round_x ? fz_rnd<DT>(vv[k] * rstd) * wv[k]
                                            : vv[k] * rstd * wv[k];
                o[k] = a.act ? fz_rnd<DT>(t) : t;
            }
            if (hr)
                U::store(hr, i, o);
            if (a.act) {
_Pragma("unroll")
                for (int k = 0; k < U::N; k++)
                    o[k] = fz_act(a.act, o[k], a.p);
            }
            U::store(yr, i, o);
        });
    }
}
#undef FZ_UNITS

template <int DT, bool VEC>
static void fz_norm_launch_v(gg_gpu_ctx *c, const fz_norm_args &a)
{
    const int nu = a.cols / unit<DT, VEC>::N;
    const int cap = c->max_threads < 1024 ? c->max_threads : 1024;
    int t = 64;
    while (t < nu && t * 2 <= cap)
        t *= 2;
    const unsigned grid = (unsigned)(a.rows < (1 << 20) ? a.rows : (1 << 20));
    const int per = (nu + t - 1) / t;
    if (per <= 1)
        k_fnorm<DT, VEC, 1><<<grid, t, 0, c->stream>>>(a);
    else if (per <= 2)
        k_fnorm<DT, VEC, 2><<<grid, t, 0, c->stream>>>(a);
    else if (per <= 4)
        k_fnorm<DT, VEC, 4><<<grid, t, 0, c->stream>>>(a);
    else
        k_fnorm<DT, VEC, 0><<<grid, t, 0, c->stream>>>(a);
}

template <int DT> static void fz_norm_launch(gg_gpu_ctx *c, const fz_norm_args &a)
{
    const void *p[] = {a.x, a.r, a.w, a.b, a.s, a.h, a.y};
    bool vec = a.cols % dt<DT>::VEC == 0;
    for (int i = 0; i < 7; i++)
        vec = vec && (!p[i] || gg_gpu_aligned16(p[i]));
    if (vec)
        fz_norm_launch_v<DT, true>(c, a);
    else
        fz_norm_launch_v<DT, false>(c, a);
}

/* ---- row chains: up to 16 norm(-> activation) stages, the row in registers ---------- */

typedef struct {
    const void *w, *b;         /* b NULL: rmsnorm */
    void *h, *y;               /* NULL: not written */
    float eps, p;
    int rms, act, round_x;
} fz_rc_stage;

typedef struct {
    const void *x;
    int64_t rows;
    int cols, n;
    fz_rc_stage st[GG_ROWCHAIN_MAX_STAGES];
} fz_rc_args;

/* A warp's sum, for every lane.  On NVIDIA the width is 32 on every device,
 * so the butterfly unrolls and a warp's index is a shift; warpSize is a
 * run-time value there, which made each reduction a loop and an integer
 * division on the stage's critical path.  Same additions in the same order
 * as gg_warp_sum. */
#if defined(GFXGRAPH_HIP_CUDA)
#define FZ_RC_WARP 32
#else
#define FZ_RC_WARP warpSize
#endif
static __device__ __forceinline__ float fz_rc_warp_sum(float v)
{
#if defined(GFXGRAPH_HIP_CUDA)
#pragma unroll
    for (int off = FZ_RC_WARP / 2; off > 0; off >>= 1)
        v += gg_shfl_xor(v, off);
    return v;
#else
    return gg_warp_sum(v);
#endif
}

/* The sum of v over the block, for every thread.  Two shared slots used in
 * turn: a slot is written again only two reductions later, after a barrier
 * every reader of its last use has passed, so one barrier a reduction does
 * (a chain's stages are mostly these barriers at decode sizes). */
template <int B>
static __device__ __forceinline__ float fz_rc_sum(float v, float (*sh)[32], int &slot, int nw)
{
    v = fz_rc_warp_sum(v);
    const int lane = threadIdx.x % FZ_RC_WARP, wid = threadIdx.x / FZ_RC_WARP;
    if (lane == 0)
        sh[slot][wid] = v;
    __syncthreads();
    /* B / 32 bounds the warps of a block of at most B threads: the loop
     * unrolls and its reads issue together, a slot past the block's warps
     * read but counted as 0 (t + 0 is t: the sum is that of the nw slots) */
    float t = 0.0f;
#pragma unroll
    for (int i = 0; i < B / 32; i++) {
        const float x = sh[slot][i];
        t += i < nw ? x : 0.0f;
    }
    slot ^= 1;
    return t;
}

/* s / n, exactly as the division rounds: a power of two's reciprocal is
 * exact, so the product is the same float, without the division's
 * refinement and slow-path test on the critical path. */
static __device__ __forceinline__ float fz_rc_div(float s, float n, float inv)
{
    return inv != 0.0f ? s * inv : s / n;
}

/* The activation on a whole register row: one branch a stage rather than a
 * switch per value, so the values' independent chains (tanh's exp and
 * reciprocal) interleave instead of running one basic block at a time. */
template <int DT, int ACT, int M>
static __device__ __forceinline__ void fz_rc_act(float (&o)[M], float p)
{
#pragma unroll
    for (int e = 0; e < M; e++)
        o[e] = fz_rnd<DT>(fz_act(ACT, o[e], p));
}

/* One block a row; a thread holds the same R units of the row through every
 * stage, so a stage's input is the previous stage's output as rounded to the
 * storage dtype (what the unfused nodes would read back), never re-read.
 * The next stage's w and b are loaded before this stage's reductions, which
 * hides their latency.  A stage's fields are read once into registers, and
 * the per-value work branches once a stage (layernorm or rmsnorm, the
 * activation), never per value.  Each thread writes only the units it read,
 * so an output over x (exactly) is safe. */
template <int DT, bool VEC, int R, int B>
__global__ void __launch_bounds__(B) k_rowchain(fz_rc_args a)
{
    typedef typename dt<DT>::T T;
    typedef unit<DT, VEC> U;
    enum { M = R * U::N };
    __shared__ float sh[2][32];
    int slot = 0;
    const int nu = a.cols / U::N, width = blockDim.x;
    const int nw = (width + FZ_RC_WARP - 1) / FZ_RC_WARP;
    const float n = (float)a.cols;
    const float inv = (a.cols & (a.cols - 1)) == 0 ? 1.0f / n : 0.0f;
    bool in[R];
#pragma unroll
    for (int j = 0; j < R; j++)
        in[j] = (int)threadIdx.x + j * width < nu;
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const int64_t base = row * a.cols;
        /* the row as [R * U::N]: unit j's values at j * U::N; values of
         * units past the row stay 0 and are neither summed nor stored */
        float v[M];
        typename U::raw wc[R] = {}, bc[R] = {};
#pragma unroll
        for (int e = 0; e < M; e++)
            v[e] = 0.0f;
#pragma unroll
        for (int j = 0; j < R; j++) {
            const int i = threadIdx.x + j * width;
            if (in[j]) {
                U::load((const T *)a.x + base, i, v + j * U::N);
                wc[j] = U::load_raw((const T *)a.st[0].w, i);
                bc[j] = a.st[0].rms ? wc[j] : U::load_raw((const T *)a.st[0].b, i);
            }
        }
        for (int k = 0; k < a.n; k++) {
            const fz_rc_stage &s = a.st[k];
            const int rms = s.rms;
            typename U::raw wn[R] = {}, bn[R] = {};
            if (k + 1 < a.n) {
                const T *tw = (const T *)a.st[k + 1].w, *tb = (const T *)a.st[k + 1].b;
                const bool trms = a.st[k + 1].rms;
#pragma unroll
                for (int j = 0; j < R; j++) {
                    const int i = threadIdx.x + j * width;
                    if (in[j]) {
                        wn[j] = U::load_raw(tw, i);
                        bn[j] = trms ? wn[j] : U::load_raw(tb, i);
                    }
                }
            }
            float mean = 0.0f;
            if (!rms) {
                float sum = 0.0f;
#pragma unroll
                for (int e = 0; e < M; e++)
                    sum += v[e];
                mean = fz_rc_div(fz_rc_sum<B>(sum, sh, slot, nw), n, inv);
            }
            float q = 0.0f;
#pragma unroll
            for (int j = 0; j < R; j++)
                if (in[j]) {
#pragma unroll
                    for (int e = 0; e < U::N; e++) {
                        const float d = v[j * U::N + e] - mean;
                        q += d * d;
                    }
                }
            const float rstd = 1.0f / sqrtf(fz_rc_div(fz_rc_sum<B>(q, sh, slot, nw), n, inv) + s.eps);
            float wv[M], bv[M];
#pragma unroll
            for (int j = 0; j < R; j++) {
                U::cvt(wc[j], wv + j * U::N);
                U::cvt(bc[j], bv + j * U::N);
            }
            if (rms && s.round_x) {
#pragma unroll
                for (int e = 0; e < M; e++)
                    v[e] = fz_rnd<DT>(fz_rnd<DT>(v[e] * rstd) * wv[e]);
            } else if (rms) {
#pragma unroll
                for (int e = 0; e < M; e++)
                    v[e] = fz_rnd<DT>(v[e] * rstd * wv[e]);
            } else {
#pragma unroll
                for (int e = 0; e < M; e++)
                    v[e] = fz_rnd<DT>((v[e] - mean) * rstd * wv[e] + bv[e]);
            }
            if (s.h) {
#pragma unroll
                for (int j = 0; j < R; j++)
                    if (in[j])
                        U::store((T *)s.h + base, threadIdx.x + j * width, v + j * U::N);
            }
            const float p = s.p;
            switch (s.act) {
            case GG_ACT_GELU_ERF:
                fz_rc_act<DT, GG_ACT_GELU_ERF>(v, p);
                break;
            case GG_ACT_GELU_TANH:
                fz_rc_act<DT, GG_ACT_GELU_TANH>(v, p);
                break;
            case GG_ACT_SILU:
                fz_rc_act<DT, GG_ACT_SILU>(v, p);
                break;
            case GG_ACT_SCALE:
                fz_rc_act<DT, GG_ACT_SCALE>(v, p);
                break;
            }
            if (s.y) {
#pragma unroll
                for (int j = 0; j < R; j++)
                    if (in[j])
                        U::store((T *)s.y + base, threadIdx.x + j * width, v + j * U::N);
            }
            /* units past the row: back to 0, whatever the stage made of them */
#pragma unroll
            for (int j = 0; j < R; j++)
                if (!in[j]) {
#pragma unroll
                    for (int e = 0; e < U::N; e++)
                        v[j * U::N + e] = 0.0f;
                }
            if (k + 1 < a.n) {
#pragma unroll
                for (int j = 0; j < R; j++) {
                    wc[j] = wn[j];
                    bc[j] = bn[j];
                }
            }
        }
    }
}

template <int DT, bool VEC> static bool fz_rc_launch_v(gg_gpu_ctx *c, const fz_rc_args &a)
{
    const int nu = a.cols / unit<DT, VEC>::N;
    const int cap = c->max_threads < 1024 ? c->max_threads : 1024;
    int t = 64;
    while (t < nu && t * 2 <= cap)
        t *= 2;
    const unsigned grid = (unsigned)(a.rows < (1 << 20) ? a.rows : (1 << 20));
    const int per = (nu + t - 1) / t;
    /* B: the block size the kernel is built for.  Under 1024 threads a
     * thread may use 64 registers, which the row, its weights, the next
     * stage's and eight interleaved activations overflow (spilled on f16);
     * short rows (decode) get a build for 256 threads and the room. */
    if (per <= 1 && t <= 256)
        k_rowchain<DT, VEC, 1, 256><<<grid, t, 0, c->stream>>>(a);
    else if (per <= 1)
        k_rowchain<DT, VEC, 1, 1024><<<grid, t, 0, c->stream>>>(a);
    else if (per <= 2)
        k_rowchain<DT, VEC, 2, 1024><<<grid, t, 0, c->stream>>>(a);
    else if (per <= 4)
        k_rowchain<DT, VEC, 4, 1024><<<grid, t, 0, c->stream>>>(a);
    else
        return false;
    return true;
}

template <int DT> static int fz_rowchain(gg_gpu_ctx *c, const gg_rowchain *ch)
{
    const gg_tensor_desc *xd = &ch->x.desc;
    const int64_t cols = xd->dims[xd->ndim - 1];
    if (cols > INT_MAX)
        return gg_gpu_fail(-EINVAL, "fused.row_chain: rows of %lld values", (long long)cols);
    fz_rc_args a;
    memset(&a, 0, sizeof a);
    a.x = ch->x.data;
    a.cols = (int)cols;
    a.rows = gg_desc_numel(xd) / cols;
    a.n = ch->n;
    bool vec = cols % dt<DT>::VEC == 0 && gg_gpu_aligned16(a.x);
    for (int k = 0; k < ch->n; k++) {
        const gg_rowchain_stage *s = &ch->st[k];
        fz_rc_stage *d = &a.st[k];
        d->w = s->w.data;
        d->b = s->rms ? NULL : s->b.data;
        d->h = s->h.data;
        d->y = s->y.data;
        d->eps = (float)s->eps;
        d->p = (float)s->p;
        d->rms = s->rms;
        d->act = s->act;
        d->round_x = s->round_x;
        const void *p[] = {d->w, d->b, d->h, d->y};
        for (int i = 0; i < 4; i++)
            vec = vec && (!p[i] || gg_gpu_aligned16(p[i]));
    }
    const gg_op_def *op = gg_ops_rowchain();
    if (vec ? fz_rc_launch_v<DT, true>(c, a) : fz_rc_launch_v<DT, false>(c, a))
        return gg_gpu_launched(op);
    /* a row longer than registers hold: the stages one by one, as norm_act
     * kernels, a dropped output passing through the last y (gg_rowchain) */
    for (int k = 0; k < ch->n; k++) {
        gg_tensor in[3], out[2];
        gg_op_attrs at;
        int nout;
        gg_rowchain_stage_launch(ch, k, in, out, &nout, &at);
        fz_norm_args n;
        memset(&n, 0, sizeof n);
        n.x = in[0].data;
        n.w = ch->st[k].w.data;
        n.b = ch->st[k].rms ? NULL : ch->st[k].b.data;
        n.h = nout > 1 ? out[1].data : NULL;
        n.y = out[0].data;
        n.rows = a.rows;
        n.cols = a.cols;
        n.eps = a.st[k].eps;
        n.p = a.st[k].p;
        n.rms = a.st[k].rms;
        n.act = a.st[k].act;
        n.round_x = a.st[k].round_x;
        fz_norm_launch<DT>(c, n);
        int rc = gg_gpu_launched(op);
        if (rc < 0)
            return rc;
    }
    return 0;
}

extern "C" int gg_gpu_rowchain_launch(gg_gpu_ctx *c, const gg_rowchain *ch)
{
    char why[160];
    if (!c || !ch)
        return gg_gpu_fail(-EINVAL, "gg_gpu_rowchain_launch: NULL argument");
    if (gg_rowchain_check(ch, why, sizeof why) < 0)
        return gg_gpu_fail(-EINVAL, "%s", why);
    switch (ch->x.desc.dtype) {
    case GG_DT_F32:
        return fz_rowchain<GG_DT_F32>(c, ch);
    case GG_DT_F16:
        return fz_rowchain<GG_DT_F16>(c, ch);
    case GG_DT_BF16:
        return fz_rowchain<GG_DT_BF16>(c, ch);
    default:
        return gg_gpu_fail(-EINVAL, "fused.row_chain: dtype %d", (int)ch->x.desc.dtype);
    }
}

/* ---- elementwise: epilogues and chains ------------------------------------------ */

typedef struct {
    int n;
    int op[GG_EW_MAX_STEPS];
    int arg[GG_EW_MAX_STEPS];
    float p[GG_EW_MAX_STEPS];      /* each scale step's factor */
} fz_steps;

typedef struct {
    const void *x;
    const void *e[4];              /* e[1..3]; e[0] unused */
    int64_t en[4];                 /* their element counts (a row vector broadcasts) */
    void *y;
    int64_t n;
    fz_steps st;
} fz_chain_args;

template <int DT>
static __device__ __forceinline__ float fz_step(const fz_chain_args &a, int k, float v, int64_t i)
{
    typedef typename dt<DT>::T T;
    const int op = a.st.op[k], g = a.st.arg[k];
    float e = 0.0f;
    if (op == GG_EW_ADD || op == GG_EW_MUL || op == GG_EW_SILU_MUL || op == GG_EW_SILU_MUL_R ||
        op == GG_EW_SILU_MUL_RND || op == GG_EW_SILU_MUL_R_RND)
        e = dt<DT>::ld(((const T *)a.e[g])[a.en[g] == a.n ? i : i % a.en[g]]);
    float r = v;
    switch (op) {
    case GG_EW_ADD:
        r = v + e;
        break;
    case GG_EW_MUL:
        r = v * e;
        break;
    case GG_EW_SCALE:
        r = v * a.st.p[k];
        break;
    case GG_EW_GELU_ERF:
        r = fz_act(GG_ACT_GELU_ERF, v, 0.0f);
        break;
    case GG_EW_GELU_TANH:
        r = fz_act(GG_ACT_GELU_TANH, v, 0.0f);
        break;
    case GG_EW_SILU:
        r = fz_act(GG_ACT_SILU, v, 0.0f);
        break;
    case GG_EW_SILU_MUL:
        r = v / (1.0f + expf(-v)) * e;
        break;
    case GG_EW_SILU_MUL_R:
        r = e / (1.0f + expf(-e)) * v;
        break;
    case GG_EW_SILU_MUL_RND: /* round_act: silu as the dtype holds it, as gpu_ops.hip's E_SILU_MUL_RND */
        r = fz_rnd<DT>(v / (1.0f + expf(-v))) * e;
        break;
    case GG_EW_SILU_MUL_R_RND:
        r = fz_rnd<DT>(e / (1.0f + expf(-e))) * v;
        break;
    }
    return r;
}

template <int DT>
__global__ void __launch_bounds__(256) k_ew_chain(fz_chain_args a)
{
    typedef typename dt<DT>::T T;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
        float v = dt<DT>::ld(((const T *)a.x)[i]);
        for (int k = 0; k < a.st.n; k++)
            v = fz_rnd<DT>(fz_step<DT>(a, k, v, i));
        ((T *)a.y)[i] = dt<DT>::st(v);
    }
}

/* linear_act's epilogue when the GEMM could not take it: mid holds the
 * linear's result; v = [round(mid + b)]; h (may be mid) gets v; y = act(v). */
template <int DT>
__global__ void __launch_bounds__(256)
    k_lin_epi(const typename dt<DT>::T *mid, const typename dt<DT>::T *b,
              typename dt<DT>::T *h, typename dt<DT>::T *y, int64_t total, int N, int act,
              float p)
{
    typedef dt<DT> D;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        float v = D::ld(mid[i]);
        if (b)
            v = fz_rnd<DT>(v + D::ld(b[i % N]));
        if (h)
            h[i] = D::st(v);
        y[i] = D::st(act ? fz_act(act, v, p) : v);
    }
}

/* ---- linear with its epilogue, decode sizes ------------------------------------- */

/* k_linear_small's scheme (gpu_linear.hip): a warp per output column, rows
 * in groups of MAXM; then bias and activation on the sums.  GATE: w is the
 * gate weight and w2 the up weight, y = silu(round(x.w)) * round(x.w2), the
 * silu rounded too when rnd (silu_mul's round_act). */
template <int DT, int MAXM, bool VEC, bool GATE>
__global__ void __launch_bounds__(256)
    k_fz_small(const typename dt<DT>::T *x, const typename dt<DT>::T *w,
               const typename dt<DT>::T *w2, const typename dt<DT>::T *bias, int sep,
               typename dt<DT>::T *h, typename dt<DT>::T *y, int M, int K, int N, int act,
               float p, int rnd)
{
    typedef dt<DT> D;
    typedef typename D::T T;
    typedef unit<DT, VEC> U;
    const int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize;
    const int ku = K / U::N;
    const int m0 = blockIdx.y * MAXM;
    const int mg = M - m0 < MAXM ? M - m0 : MAXM;
    x += (int64_t)m0 * K;
    y += (int64_t)m0 * N;
    if (h)
        h += (int64_t)m0 * N;
    for (int n = blockIdx.x * nw + wid; n < N; n += gridDim.x * nw) {
        float acc[MAXM], acc2[GATE ? MAXM : 1];
#pragma unroll
        for (int m = 0; m < MAXM; m++)
            acc[m] = 0.0f;
        if (GATE)
#pragma unroll
            for (int m = 0; m < MAXM; m++)
                acc2[GATE ? m : 0] = 0.0f;
        const T *wr = w + (int64_t)n * K;
        const T *wr2 = GATE ? w2 + (int64_t)n * K : NULL;
        for (int k = lane; k < ku; k += warpSize) {
            float wf[U::N], wf2[U::N];
            U::load(wr, k, wf);
            if (GATE)
                U::load(wr2, k, wf2);
#pragma unroll
            for (int m = 0; m < MAXM; m++) {
                if (m < mg) {
                    float xf[U::N];
                    U::load(x + (int64_t)m * K, k, xf);
#pragma unroll
                    for (int j = 0; j < U::N; j++) {
                        acc[m] += wf[j] * xf[j];
                        if (GATE)
                            acc2[GATE ? m : 0] += wf2[j] * xf[j];
                    }
                }
            }
        }
        const float bv = bias ? D::ld(bias[n]) : 0.0f;
#pragma unroll
        for (int m = 0; m < MAXM; m++) {
            if (m < mg) {
                const float s = gg_warp_sum(acc[m]);
                float s2 = 0.0f;
                if (GATE)
                    s2 = gg_warp_sum(acc2[GATE ? m : 0]);
                if (lane == 0) {
                    float v;
                    if (GATE) {
                        const float g = fz_rnd<DT>(s), u = fz_rnd<DT>(s2);
                        const float sg = g / (1.0f + expf(-g));
                        v = (rnd ? fz_rnd<DT>(sg) : sg) * u;
                    } else {
                        v = sep ? fz_rnd<DT>(fz_rnd<DT>(s) + bv) : fz_rnd<DT>(s + bv);
                        if (h)
                            h[(int64_t)m * N + n] = D::st(v);
                        v = act ? fz_act(act, v, p) : v;
                    }
                    y[(int64_t)m * N + n] = D::st(v);
                }
            }
        }
    }
}

template <int DT, int MAXM, bool GATE>
static void fz_small_m(gg_gpu_ctx *c, const void *x, const void *w, const void *w2,
                       const void *b, int sep, void *h, void *y, int M, int K, int N, int act,
                       float p, int rnd)
{
    typedef typename dt<DT>::T T;
    const int threads = 256, warps = threads / c->warp;
    const bool vec = K % dt<DT>::VEC == 0 && gg_gpu_aligned16(x) && gg_gpu_aligned16(w) &&
                     (!GATE || gg_gpu_aligned16(w2));
    const dim3 grid(gg_gpu_grid_for(N, warps, 1 << 20), (unsigned)((M + MAXM - 1) / MAXM));
    if (vec)
        k_fz_small<DT, MAXM, true, GATE><<<grid, threads, 0, c->stream>>>(
            (const T *)x, (const T *)w, (const T *)w2, (const T *)b, sep, (T *)h, (T *)y, M, K,
            N, act, p, rnd);
    else
        k_fz_small<DT, MAXM, false, GATE><<<grid, threads, 0, c->stream>>>(
            (const T *)x, (const T *)w, (const T *)w2, (const T *)b, sep, (T *)h, (T *)y, M, K,
            N, act, p, rnd);
}

template <int DT, bool GATE>
static void fz_small(gg_gpu_ctx *c, const void *x, const void *w, const void *w2, const void *b,
                     int sep, void *h, void *y, int M, int K, int N, int act, float p,
                     int rnd = 0)
{
    if (M == 1)
        fz_small_m<DT, 1, GATE>(c, x, w, w2, b, sep, h, y, M, K, N, act, p, rnd);
    else if (M <= 4)
        fz_small_m<DT, 4, GATE>(c, x, w, w2, b, sep, h, y, M, K, N, act, p, rnd);
    else if (M <= 8)
        fz_small_m<DT, 8, GATE>(c, x, w, w2, b, sep, h, y, M, K, N, act, p, rnd);
    else
        fz_small_m<DT, 16, GATE>(c, x, w, w2, b, sep, h, y, M, K, N, act, p, rnd);
}

/* Rows up to which the fused small-M kernels run: where gpu_linear.hip's
 * AUTO mode keeps its own small-M kernel (1 row before cuBLAS, 16 before
 * rocBLAS), and with no BLAS up to its own crossover to the tiled GEMM
 * (hipBLASLt without rocBLAS takes over from there). */
static int fz_small_rows(int dtype)
{
#if defined(GG_BLAS_CUBLAS)
    (void)dtype;
    return 1;
#elif defined(GG_BLAS_ROCBLAS)
    (void)dtype;
    return 16;
#else
    return dtype == GG_DT_F32 ? 16 : 64;
#endif
}

/* ---- BLASLt with an epilogue ------------------------------------------------------- */

/* Written once in hipBLASLt's dialect: hipBLASLt on AMD where the build found
 * it, cuBLASLt on NVIDIA through gg_hip.h's mapping (same calls, same
 * epilogues).  Without GFXGRAPH_HAVE_BLASLT (an AMD build without hipBLASLt)
 * the fused linear goes the way the linear alone goes, plus one epilogue
 * kernel. */
#if defined(GFXGRAPH_HAVE_BLASLT)
/* One matmul's descriptors and the heuristic's pick. */
typedef struct {
    hipblasLtMatmulDesc_t op;
    hipblasLtMatrixLayout_t la, lb, lc;
    hipblasLtMatmulPreference_t pref;
    hipblasLtMatmulHeuristicResult_t heur;
} fz_lt_plan;

static void fz_lt_plan_free(fz_lt_plan *p)
{
    if (p->pref)
        hipblasLtMatmulPreferenceDestroy(p->pref);
    if (p->lc)
        hipblasLtMatrixLayoutDestroy(p->lc);
    if (p->lb)
        hipblasLtMatrixLayoutDestroy(p->lb);
    if (p->la)
        hipblasLtMatrixLayoutDestroy(p->la);
    if (p->op)
        hipblasLtMatmulDescDestroy(p->op);
}

/* The descriptors of y[M,N] = epi(x[M,K] w[N,K]^T [+ b]) in ty with f32
 * compute, and the heuristic's first algorithm within ws workspace bytes:
 * 0, or 1 when a descriptor could not be made or no algorithm fits (p is
 * freed by the caller either way).  Column-major, as both libraries see
 * it: y^T [N, M] = (w as K x N)^T . (x as K x M).  The bias type is left
 * unset: both then read the bias in the output's dtype (cuBLASLt documents
 * it; hipBLASLt's matmul takes the D type for every non-fp8 input). */
static int fz_lt_plan_make(hipblasLtHandle_t lt, fz_lt_plan *p, hipDataType ty,
                           hipblasLtEpilogue_t epi, const void *b, int M, int K, int N,
                           uint64_t ws)
{
    const hipblasOperation_t ta = HIPBLAS_OP_T, tb = HIPBLAS_OP_N;
    int found = 0;
    if (hipblasLtMatmulDescCreate(&p->op, HIPBLAS_COMPUTE_32F, HIP_R_32F) != HIPBLAS_STATUS_SUCCESS) {
        p->op = NULL;
        return 1;
    }
    if (hipblasLtMatmulDescSetAttribute(p->op, HIPBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
        hipblasLtMatmulDescSetAttribute(p->op, HIPBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
        hipblasLtMatmulDescSetAttribute(p->op, HIPBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ||
        (b && hipblasLtMatmulDescSetAttribute(p->op, HIPBLASLT_MATMUL_DESC_BIAS_POINTER, &b,
                                              sizeof b)))
        return 1;
    if (hipblasLtMatrixLayoutCreate(&p->la, ty, K, N, K) ||
        hipblasLtMatrixLayoutCreate(&p->lb, ty, K, M, K) ||
        hipblasLtMatrixLayoutCreate(&p->lc, ty, N, M, N) ||
        hipblasLtMatmulPreferenceCreate(&p->pref) ||
        hipblasLtMatmulPreferenceSetAttribute(p->pref, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &ws, sizeof ws))
        return 1;
    if (hipblasLtMatmulAlgoGetHeuristic(lt, p->op, p->la, p->lb, p->lc, p->lc, p->pref, 1,
                                        &p->heur, &found) != HIPBLAS_STATUS_SUCCESS ||
        found < 1)
        return 1;
    return 0;
}

static hipblasLtHandle_t fz_lt_h;
static int fz_lt_ok;
static pthread_once_t fz_lt_once = PTHREAD_ONCE_INIT;

static void fz_lt_init(void)
{
    hipblasLtHandle_t h;
    if (hipblasLtCreate(&h) != HIPBLAS_STATUS_SUCCESS)
        return;
    /* On a device hipBLASLt ships no kernels for (RDNA2's gfx1030 among
     * them) a handle may still be made while every heuristic comes back
     * empty: ask once, for a plain f16 matmul, rather than at every launch.
     * cuBLASLt always has one. */
    fz_lt_plan p = {};
    const int usable = fz_lt_plan_make(h, &p, HIP_R_16F, HIPBLASLT_EPILOGUE_DEFAULT, NULL, 64, 64,
                                       64, 0) == 0;
    fz_lt_plan_free(&p);
    if (!usable) {
        hipblasLtDestroy(h);
        return;
    }
    fz_lt_h = h;
    fz_lt_ok = 1;
}

/* One handle for the process: it holds no stream or workspace (those are
 * per call) and the Lt calls are thread-safe on it.  Created on first use,
 * which the executor's warm-up makes happen before any capture; a thread
 * arriving meanwhile sleeps in pthread_once rather than spinning (creating
 * a hipBLASLt handle loads its kernel libraries: it can take a while).
 * NULL when it could not be created or the device has no Lt kernels. */
static hipblasLtHandle_t fz_lt_handle(void)
{
    if (pthread_once(&fz_lt_once, fz_lt_init) != 0)
        return NULL;
    return fz_lt_ok ? fz_lt_h : NULL;
}

int gg_gpu_fused_lt_usable(void)
{
    return fz_lt_handle() != NULL;
}

/* y[M,N] = act(x[M,K] w[N,K]^T + b) through the BLASLt: 0 when launched, 1
 * when it cannot take it (no handle or workspace, an activation it has no
 * epilogue for, no algorithm for the shape on this device: nothing
 * enqueued, the caller goes the other way), -EIO when the launch failed.
 * act is GG_ACT_NONE or GG_ACT_GELU_TANH: the only GELU either library has
 * is the tanh form (gg_hip.h), so the erf GELU never reaches an epilogue. */
template <int DT>
static int fz_lt(gg_gpu_ctx *c, const void *x, const void *w, const void *b, void *y, int M,
                 int K, int N, int act)
{
    hipblasLtHandle_t lt = fz_lt_handle();
    if (!lt || !c->ws)
        return 1;
    const hipDataType ty = DT == GG_DT_F32 ? HIP_R_32F : DT == GG_DT_F16 ? HIP_R_16F : HIP_R_16BF;
    hipblasLtEpilogue_t epi = HIPBLASLT_EPILOGUE_DEFAULT;
    if (act == GG_ACT_GELU_TANH)
        epi = b ? HIPBLASLT_EPILOGUE_GELU_BIAS : HIPBLASLT_EPILOGUE_GELU;
    else if (act != GG_ACT_NONE)
        return 1;
    else if (b)
        epi = HIPBLASLT_EPILOGUE_BIAS;
    fz_lt_plan p = {};
    int rc = fz_lt_plan_make(lt, &p, ty, epi, b, M, K, N, c->ws_bytes);
    if (rc == 0) {
        const float alpha = 1.0f, beta = 0.0f;
        const hipblasStatus_t st =
            hipblasLtMatmul(lt, p.op, &alpha, w, p.la, x, p.lb, &beta, y, p.lc, y, p.lc,
                            &p.heur.algo, c->ws, c->ws_bytes, c->stream);
        if (st != HIPBLAS_STATUS_SUCCESS)
            rc = gg_gpu_fail(-EIO, "fused.linear_act: %s matmul (M=%d K=%d N=%d) failed: status %d",
                             GG_BLASLT_NAME, M, K, N, (int)st);
    }
    fz_lt_plan_free(&p);
    return rc;
}
#endif

extern "C" const char *gg_gpu_blas_lt(void)
{
#if defined(GFXGRAPH_HAVE_BLASLT)
    return fz_lt_handle() ? GG_BLASLT_NAME : "none";
#else
    return GG_BLASLT_NAME;
#endif
}

/* ---- dispatch -------------------------------------------------------------------- */

static int fz_launched(const gg_op_def *op)
{
    return gg_gpu_launched(op);
}

static int64_t fz_numel(const gg_tensor *t)
{
    return gg_desc_numel(&t->desc);
}

template <int DT>
static int fz_linear_act(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                         const gg_tensor *out, int nout, const gg_op_attrs *at)
{
    const int act = (int)at->v[0], sep = at->v[2] == 1.0 && nin == 3;
    const float p = (float)at->v[1];
    const gg_tensor_desc *xd = &in[0].desc, *wd = &in[1].desc;
    const int64_t K = xd->dims[xd->ndim - 1];
    if (wd->ndim != 2 || wd->dims[1] != K || K < 1)
        return gg_gpu_fail(-EINVAL, "%s: w must be [out, %lld]", op->name, (long long)K);
    const int64_t N = wd->dims[0], M = fz_numel(&in[0]) / K;
    if (M * N != fz_numel(&out[0]) || (nout > 1 && fz_numel(&out[1]) != M * N) ||
        (nin == 3 && fz_numel(&in[2]) != N) || M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return gg_gpu_fail(-EINVAL, "%s: operands do not fit x [%lld, %lld] and w [%lld, %lld]",
                           op->name, (long long)M, (long long)K, (long long)N, (long long)K);
    const void *b = nin == 3 ? in[2].data : NULL;
    void *y = out[0].data, *h = nout > 1 ? out[1].data : NULL;
    /* f32 from 8 rows: gpu_linear.hip's split-K kernel, bias and act in its epilogue */
    const int mrc = gg_gpu_linear_mid_launch(c, (gg_dtype)DT, in[0].data, in[1].data, b, h, y,
                                             (int)M, (int)K, (int)N, act, p);
    if (mrc <= 0)
        return mrc < 0 ? mrc : fz_launched(op);
    if (M <= fz_small_rows(DT)) {
        fz_small<DT, false>(c, in[0].data, in[1].data, NULL, b, sep, h, y, (int)M, (int)K, (int)N,
                            act, p);
        return fz_launched(op);
    }
#if defined(GFXGRAPH_HAVE_BLASLT)
    /* The BLASLt adds the bias in its epilogue (and the tanh GELU when nothing
     * needs the value before it); another activation follows in one pass.
     * Not for a bias from a separate add node: the sequence rounds the
     * product before adding it, the epilogue would not. */
    if (c->linear_mode != GG_GPU_LINEAR_OWN && !sep) {
        const bool lt_act = act == GG_ACT_GELU_TANH && !h;
        void *dst = h ? h : y;
        int rc = fz_lt<DT>(c, in[0].data, in[1].data, b, dst, (int)M, (int)K, (int)N,
                           lt_act ? act : GG_ACT_NONE);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            if ((rc = fz_launched(op)) < 0 || lt_act || act == GG_ACT_NONE)
                return rc;
            typedef typename dt<DT>::T T;
            const int64_t total = M * N;
            k_lin_epi<DT><<<gg_gpu_grid_for(total, 256, (int64_t)c->sms * 16), 256, 0,
                            c->stream>>>((const T *)dst, NULL, NULL, (T *)y, total, (int)N, act, p);
            return fz_launched(op);
        }
    }
#endif
    /* the linear as it runs alone, into h (or y), then one epilogue pass */
    void *mid = h ? h : y;
    gg_tensor lo = out[0];
    lo.data = mid;
    int rc = gg_gpu_linear_launch(c, gg_ops_at(GG_OP_LINEAR), in, sep ? 2 : nin, &lo);
    if (rc < 0 || (!sep && act == GG_ACT_NONE))
        return rc;
    typedef typename dt<DT>::T T;
    const int64_t total = M * N;
    k_lin_epi<DT><<<gg_gpu_grid_for(total, 256, (int64_t)c->sms * 16), 256, 0, c->stream>>>(
        (const T *)mid, sep ? (const T *)b : NULL, sep && h ? (T *)h : NULL, (T *)y, total,
        (int)N, act, p);
    return fz_launched(op);
}

template <int DT>
static int fz_gate_up(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in,
                      const gg_tensor *out, int nout, const gg_op_attrs *at)
{
    const gg_tensor_desc *xd = &in[0].desc, *wd = &in[1].desc;
    const int64_t K = xd->dims[xd->ndim - 1];
    if (nout != 3 || wd->ndim != 2 || wd->dims[1] != K || K < 1 ||
        fz_numel(&in[2]) != fz_numel(&in[1]))
        return gg_gpu_fail(-EINVAL, "%s: wg and wu must both be [out, %lld]", op->name,
                           (long long)K);
    const int64_t N = wd->dims[0], M = fz_numel(&in[0]) / K;
    if (M * N != fz_numel(&out[0]) || M * N != fz_numel(&out[1]) || M * N != fz_numel(&out[2]) ||
        M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return gg_gpu_fail(-EINVAL, "%s: y, g, u must be [%lld, %lld]", op->name, (long long)M,
                           (long long)N);
    const int keep = (int)at->v[0], rnd = at->v[1] != 0.0;
    /* one pass over x pays while the GEMV streams the weights: decode rows */
    if (!keep && M <= (fz_small_rows(DT) > 4 ? fz_small_rows(DT) : 4)) {
        fz_small<DT, true>(c, in[0].data, in[1].data, in[2].data, NULL, 0, NULL, out[0].data,
                           (int)M, (int)K, (int)N, GG_ACT_NONE, 0.0f, rnd);
        return fz_launched(op);
    }
    gg_tensor gin[2] = {in[0], in[1]}, uin[2] = {in[0], in[2]}, sin[2] = {out[1], out[2]};
    gg_op_attrs sa;
    memset(&sa, 0, sizeof sa);
    sa.v[0] = rnd;   /* silu_mul's round_act */
    int rc = gg_gpu_linear_launch(c, gg_ops_at(GG_OP_LINEAR), gin, 2, &out[1]);
    if (rc == 0)
        rc = gg_gpu_linear_launch(c, gg_ops_at(GG_OP_LINEAR), uin, 2, &out[2]);
    if (rc == 0)
        rc = gg_gpu_op_launch(c, gg_ops_at(GG_OP_SILU_MUL), sin, 2, &out[0], 1, &sa);
    return rc;
}

template <int DT>
static int fz_dt(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in, int nin,
                 const gg_tensor *out, int nout, const gg_op_attrs *at)
{
    const int64_t n = fz_numel(&out[0]);
    switch (kind) {
    case GG_FUSED_NORM_ACT:
    case GG_FUSED_ADD_RMSNORM: {
        const bool add = kind == GG_FUSED_ADD_RMSNORM;
        const gg_tensor *y = add ? &out[1] : &out[0];
        const int64_t cols = in[0].desc.dims[in[0].desc.ndim - 1];
        const int wi = add ? 2 : 1;
        const bool rms = add || at->v[1] >= 1.0;
        if (cols < 1 || cols > INT_MAX || fz_numel(&in[0]) != fz_numel(y) ||
            fz_numel(&in[wi]) != cols || (!rms && (nin < 3 || fz_numel(&in[2]) != cols)) ||
            (add && fz_numel(&in[1]) != n) || (nout > 1 && fz_numel(&out[1]) != n))
            return gg_gpu_fail(-EINVAL, "%s: operand sizes do not fit", op->name);
        fz_norm_args a;
        memset(&a, 0, sizeof a);
        a.x = in[0].data;
        a.r = add ? in[1].data : NULL;
        a.w = in[wi].data;
        a.b = rms ? NULL : in[2].data;
        a.s = add ? out[0].data : NULL;
        a.h = !add && nout > 1 ? out[1].data : NULL;
        a.y = y->data;
        a.cols = (int)cols;
        a.rows = fz_numel(&in[0]) / cols;
        a.eps = (float)at->v[0];
        a.rms = rms;
        /* add_rmsnorm's v[1] is round_x; norm_act's is the norm, 2 for a rounding rmsnorm */
        a.round_x = add ? at->v[1] != 0.0 : at->v[1] == 2.0;
        a.act = add ? GG_ACT_NONE : (int)at->v[2];
        a.p = add ? 0.0f : (float)at->v[3];
        fz_norm_launch<DT>(c, a);
        return fz_launched(op);
    }
    case GG_FUSED_LINEAR_ACT:
        return fz_linear_act<DT>(c, op, in, nin, out, nout, at);
    case GG_FUSED_GATE_UP:
        return fz_gate_up<DT>(c, op, in, out, nout, at);
    case GG_FUSED_EW_CHAIN: {
        gg_ew_steps st;
        if (gg_ew_unpack(at->v[0], &st) < 0)
            return gg_gpu_fail(-EINVAL, "%s: bad step list", op->name);
        fz_chain_args a;
        memset(&a, 0, sizeof a);
        a.x = in[0].data;
        a.y = out[0].data;
        a.n = n;
        if (fz_numel(&in[0]) != n)
            return gg_gpu_fail(-EINVAL, "%s: x and y differ in size", op->name);
        for (int g = 1; g < nin; g++) {
            a.e[g] = in[g].data;
            a.en[g] = fz_numel(&in[g]);
            if (a.en[g] < 1 || n % a.en[g] != 0)
                return gg_gpu_fail(-EINVAL, "%s: input %d does not broadcast", op->name, g);
        }
        int ns = 0;
        a.st.n = st.n;
        for (int k = 0; k < st.n; k++) {
            a.st.op[k] = st.op[k];
            a.st.arg[k] = st.arg[k];
            if (st.arg[k] >= nin && st.arg[k] != 0)
                return gg_gpu_fail(-EINVAL, "%s: step %d reads a missing input", op->name, k);
            if (st.op[k] == GG_EW_SCALE)
                a.st.p[k] = (float)at->v[1 + (ns < GG_EW_MAX_SCALES ? ns++ : 0)];
        }
        k_ew_chain<DT><<<gg_gpu_grid_for(n, 256, (int64_t)c->sms * 16), 256, 0, c->stream>>>(a);
        return fz_launched(op);
    }
    }
    return gg_gpu_fail(-ENOTSUP, "%s: no GPU kernel", op->name);
}

int gg_gpu_fused_launch(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                        int nin, const gg_tensor *out, int nout, const gg_op_attrs *attrs)
{
    if (nin < op->nin_min || nin > op->nin_max || nout < 1 || nout > op->nout || !attrs)
        return gg_gpu_fail(-EINVAL, "%s: %d inputs and %d outputs do not fit the op", op->name,
                           nin, nout);
    const gg_dtype dtype = in[0].desc.dtype;
    for (int i = 0; i < nin + nout; i++) {
        const gg_tensor *t = i < nin ? &in[i] : &out[i - nin];
        if (t->desc.dtype != dtype || !t->data || fz_numel(t) < 1)
            return gg_gpu_fail(-EINVAL, "%s: operand %d is empty, has no data or another dtype",
                               op->name, i);
    }
    switch (dtype) {
    case GG_DT_F32:
        return fz_dt<GG_DT_F32>(c, op, kind, in, nin, out, nout, attrs);
    case GG_DT_F16:
        return fz_dt<GG_DT_F16>(c, op, kind, in, nin, out, nout, attrs);
    case GG_DT_BF16:
        return fz_dt<GG_DT_BF16>(c, op, kind, in, nin, out, nout, attrs);
    default:
        return gg_gpu_fail(-EINVAL, "%s: unknown dtype %d", op->name, (int)dtype);
    }
}

int gg_gpu_fused_needs_warmup(const gg_op_def *op)
{
#if defined(GG_BLAS_CUBLAS) || defined(GG_BLAS_ROCBLAS) || defined(GFXGRAPH_HAVE_BLASLT)
    const int k = gg_ops_fused_kind(op);
    return k == GG_FUSED_LINEAR_ACT || k == GG_FUSED_GATE_UP;
#else
    (void)op;
    return 0;
#endif
}
