/* attention_decode split along S (flash-decoding), for gpu_ops.hip's
 * launcher.  One source for both vendors, like gpu_ops.hip.
 *
 * Grid: one block per (row, kv head, group of up to GG_AS_GMAX q heads of that
 * kv head, chunk of the row's len).  A block loads each K/V position of its
 * chunk once for all its q heads (GQA sharing): T = Dh / VEC threads take one
 * position, 16 bytes each, and reduce the dot product by shuffles inside the
 * T lanes; the block's position groups keep online softmax states (f32) that
 * the block merges in shared memory.  With one chunk the block writes y;
 * otherwise it writes its partial (max, sum, unnormalised weighted V) to the
 * context's scratch and the last block of its (row, kv head, q group) to
 * arrive (a counter it resets, so every launch, captured or not, starts from
 * zero) merges the chunks and writes y.
 *
 * Chunks split the row's len (read on the device, clamped to [0, S]), not S:
 * every chunk gets the same share whatever len is.  The chunk count is picked
 * on the host from S and the device's multiprocessor count so the grid fills
 * the GPU at batch 1; short S stays one pass.  The scratch is allocated once
 * per context at its creation (never at launch: capture-safe); a shape whose
 * partials do not fit it runs in one pass.  Shapes the kernel does not take
 * (Dh not T * VEC with T a power of two up to the warp, unaligned operands)
 * go back to gpu_ops.hip's one-block-per-head kernel, as every shape does
 * when GFXGRAPH_ATTN_SPLIT=0 is in the environment at context creation (for
 * comparisons). */
#include "gpu_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GG_AS_THREADS 128
#define GG_AS_GMAX 8         /* q heads a block serves */
#define GG_AS_MIN_CHUNK 64   /* positions: below 2 chunks of this, one pass */
#define GG_AS_MAX_SPLIT 256  /* chunks of a row (the merge's shared memory) */
#define GG_AS_PART_FLOATS ((size_t)1 << 20) /* 4 MiB of partials per context */
#define GG_AS_COUNTERS ((size_t)16384)

int gg_gpu_attention_ctx_init(gg_gpu_ctx *c)
{
    c->attn_part = NULL;
    c->attn_cnt = NULL;
    c->attn_part_floats = 0;
    c->attn_cnt_n = 0;
    const char *env = getenv("GFXGRAPH_ATTN_SPLIT");
    c->attn_split_off = env && strcmp(env, "0") == 0;
    if (c->attn_split_off)
        return 0;
    void *p = NULL, *n = NULL;
    if (hipMalloc(&p, GG_AS_PART_FLOATS * sizeof(float)) != hipSuccess ||
        hipMalloc(&n, GG_AS_COUNTERS * sizeof(unsigned)) != hipSuccess ||
        hipMemsetAsync(n, 0, GG_AS_COUNTERS * sizeof(unsigned), c->stream) != hipSuccess ||
        hipStreamSynchronize(c->stream) != hipSuccess) {
        /* no scratch: attention_decode runs in one pass */
        (void)hipGetLastError();
        if (p)
            (void)hipFree(p);
        if (n)
            (void)hipFree(n);
        return 0;
    }
    c->attn_part = (float *)p;
    c->attn_cnt = (unsigned *)n;
    c->attn_part_floats = GG_AS_PART_FLOATS;
    c->attn_cnt_n = GG_AS_COUNTERS;
    return 0;
}

void gg_gpu_attention_ctx_fini(gg_gpu_ctx *c)
{
    if (c->attn_part)
        (void)hipFree(c->attn_part);
    if (c->attn_cnt)
        (void)hipFree(c->attn_cnt);
    c->attn_part = NULL;
    c->attn_cnt = NULL;
}

/* Sum over aligned groups of T lanes (T a power of two up to warpSize); every
 * lane of the warp must call it. */
static __device__ __forceinline__ float group_sum(float v, int T)
{
    for (int off = T / 2; off > 0; off >>= 1)
        v += gg_shfl_xor(v, off);
    return v;
}

template <int DT>
__global__ void __launch_bounds__(GG_AS_THREADS)
    k_attention_split(const typename dt<DT>::T *q, const typename dt<DT>::T *k,
                      const typename dt<DT>::T *v, const int32_t *lens, typename dt<DT>::T *y,
                      float *part, unsigned *cnt, int Hq, int Hkv, int64_t S, int Dh, int TL,
                      int nqg, int nsplit, float scale)
{
    typedef dt<DT> D;
    typedef unit<DT, true> U;
    enum { N = U::N };
    extern __shared__ float sm[];
    __shared__ int s_last;

    const int T = 1 << TL, t = threadIdx.x & (T - 1), pg = threadIdx.x >> TL;
    const int P = blockDim.x >> TL;
    const int s = blockIdx.x % nsplit;
    const int64_t grpid = blockIdx.x / nsplit; /* (b, kh, qg) */
    const int qg = (int)(grpid % nqg);
    const int64_t bk = grpid / nqg;
    const int kh = (int)(bk % Hkv);
    const int64_t b = bk / Hkv;
    const int grp = Hq / Hkv, h0 = kh * grp + qg * GG_AS_GMAX;
    const int G = grp - qg * GG_AS_GMAX < GG_AS_GMAX ? grp - qg * GG_AS_GMAX : GG_AS_GMAX;

    int64_t len = lens[b];
    len = len < 0 ? 0 : len > S ? S : len;
    const int64_t chunk = (len + nsplit - 1) / nsplit;
    const int64_t j0 = s * chunk < len ? s * chunk : len;
    const int64_t j1 = j0 + chunk < len ? j0 + chunk : len;

    float qf[GG_AS_GMAX][N], acc[GG_AS_GMAX][N], m[GG_AS_GMAX], l[GG_AS_GMAX];
#pragma unroll
    for (int g = 0; g < GG_AS_GMAX; g++) {
        if (g < G)
            U::load(q + (b * Hq + h0 + g) * Dh, t, qf[g]);
        else
#pragma unroll
            for (int n = 0; n < N; n++)
                qf[g][n] = 0.0f;
#pragma unroll
        for (int n = 0; n < N; n++)
            acc[g][n] = 0.0f;
        m[g] = -INFINITY;
        l[g] = 0.0f;
    }

    /* positions j0 + pg, + P, ...: two in flight per group; the trip count is
     * the block's, so the shuffles see whole warps */
    for (int64_t jb = j0; jb < j1; jb += 2 * P) {
        float kf[2][N], vf[2][N];
        bool ok[2];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int64_t j = jb + u * P + pg;
            ok[u] = j < j1;
            if (ok[u]) {
                const int64_t o = ((b * S + j) * Hkv + kh) * Dh;
                U::load(k + o, t, kf[u]);
                U::load(v + o, t, vf[u]);
            } else {
#pragma unroll
                for (int n = 0; n < N; n++)
                    kf[u][n] = vf[u][n] = 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < 2; u++) {
#pragma unroll
            for (int g = 0; g < GG_AS_GMAX; g++) {
                float p = 0.0f;
#pragma unroll
                for (int n = 0; n < N; n++)
                    p += qf[g][n] * kf[u][n];
                /* g < G is block-uniform: whole warps shuffle */
                const float sc = g < G ? group_sum(p, T) * scale : 0.0f;
                if (g < G && ok[u]) {
                    const float mn = fmaxf(m[g], sc);
                    const float corr = expf(m[g] - mn), pj = expf(sc - mn);
                    l[g] = l[g] * corr + pj;
#pragma unroll
                    for (int n = 0; n < N; n++)
                        acc[g][n] = acc[g][n] * corr + pj * vf[u][n];
                    m[g] = mn;
                }
            }
        }
    }

    /* the block's groups: sm[(pg * G + g) * (Dh + 2) + d], then max, sum */
    const int W = Dh + 2;
#pragma unroll
    for (int g = 0; g < GG_AS_GMAX; g++) {
        if (g < G) {
            float *mine = sm + (pg * G + g) * W;
#pragma unroll
            for (int n = 0; n < N; n++)
                mine[t * N + n] = acc[g][n];
            if (t == 0) {
                mine[Dh] = m[g];
                mine[Dh + 1] = l[g];
            }
        }
    }
    __syncthreads();
    for (int o = threadIdx.x; o < G * Dh; o += blockDim.x) {
        const int g = o / Dh, d = o % Dh;
        float M = -INFINITY;
        for (int p = 0; p < P; p++)
            M = fmaxf(M, sm[(p * G + g) * W + Dh]);
        float L = 0.0f, O = 0.0f;
        for (int p = 0; p < P; p++) {
            const float *e = sm + (p * G + g) * W;
            const float mw = e[Dh];
            if (mw != -INFINITY) {
                const float w = expf(mw - M);
                L += e[Dh + 1] * w;
                O += e[d] * w;
            }
        }
        const int64_t row = b * Hq + h0 + g;
        if (nsplit == 1) {
            y[row * Dh + d] = D::st(len > 0 ? O / L : 0.0f);
        } else {
            float *e = part + (row * nsplit + s) * W;
            e[d] = O;
            if (d == 0) {
                e[Dh] = M;
                e[Dh + 1] = L;
            }
        }
    }
    if (nsplit == 1)
        return;

    /* the last block of (b, kh, qg) merges the chunks */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned old = atomicAdd(&cnt[grpid], 1u);
        s_last = old == (unsigned)nsplit - 1;
        if (s_last)
            atomicExch(&cnt[grpid], 0u);
    }
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    /* plain loads: this block never read these partials before they were
     * written, and the fence after the counter orders them after the other
     * blocks' writes */
    const float *vp = part;
    /* weights: sm[g * (nsplit + 1) + s] = exp(m_s - M), sm[... + nsplit] = 1 / L */
    const int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize, WS = nsplit + 1;
    for (int g = wid; g < G; g += nw) {
        const int64_t row = b * Hq + h0 + g;
        float M = -INFINITY;
        for (int i = lane; i < nsplit; i += warpSize)
            M = fmaxf(M, vp[(row * nsplit + i) * W + Dh]);
        M = gg_warp_max(M);
        float L = 0.0f;
        for (int i = lane; i < nsplit; i += warpSize) {
            const float mw = vp[(row * nsplit + i) * W + Dh];
            const float w = mw == -INFINITY ? 0.0f : expf(mw - M);
            sm[g * WS + i] = w;
            L += w == 0.0f ? 0.0f : vp[(row * nsplit + i) * W + Dh + 1] * w;
        }
        L = gg_warp_sum(L);
        if (lane == 0)
            sm[g * WS + nsplit] = L;
    }
    __syncthreads();
    for (int o = threadIdx.x; o < G * Dh; o += blockDim.x) {
        const int g = o / Dh, d = o % Dh;
        const int64_t row = b * Hq + h0 + g;
        /* an empty or all -inf chunk has weight 0 and O 0: no branch, so
         * the loads of several chunks are in flight together */
        const float *e = vp + row * nsplit * W + d;
        float O = 0.0f;
#pragma unroll 8
        for (int i = 0; i < nsplit; i++)
            O += e[(int64_t)i * W] * sm[g * WS + i];
        y[row * Dh + d] = D::st(len > 0 ? O / sm[g * WS + nsplit] : 0.0f);
    }
}

/* The chunk count for a launch: enough blocks for about two a
 * multiprocessor, chunks of at least GG_AS_MIN_CHUNK positions, partials
 * within the scratch; 1 (one pass) when any of that leaves less than 2. */
static int pick_split(const gg_gpu_ctx *c, int64_t rows, int Hq, int64_t S, int Dh,
                      int64_t groups)
{
    const int64_t target = 2 * (int64_t)c->sms;
    int64_t ns = (target + groups - 1) / groups;
    const int64_t by_s = S / GG_AS_MIN_CHUNK;
    if (ns > by_s)
        ns = by_s;
    if (ns > GG_AS_MAX_SPLIT)
        ns = GG_AS_MAX_SPLIT;
    if (ns < 2)
        return 1;
    if (!c->attn_part || !c->attn_cnt || (size_t)groups > c->attn_cnt_n)
        return 1;
    const int64_t per = rows * Hq * (int64_t)(Dh + 2);
    const int64_t fit = (int64_t)c->attn_part_floats / per;
    if (ns > fit)
        ns = fit;
    if (ns < 2)
        return 1;
    if (groups * ns > INT_MAX)
        return 1;
    return (int)ns;
}

template <int DT>
static int launch_split(gg_gpu_ctx *c, const gg_tensor *in, const gg_tensor *out, int64_t rows,
                        int Hq, int Hkv, int64_t S, int Dh, float scale)
{
    typedef typename dt<DT>::T T;
    const int N = dt<DT>::VEC;
    if (c->attn_split_off || Dh % N != 0)
        return 1;
    const int Tn = Dh / N;
    if (Tn < 1 || Tn > c->warp || (Tn & (Tn - 1)) != 0)
        return 1;
    for (int i = 0; i < 3; i++)
        if (!gg_gpu_aligned16(in[i].data))
            return 1;
    if (!gg_gpu_aligned16(out[0].data))
        return 1;
    int TL = 0;
    while ((1 << TL) < Tn)
        TL++;
    const int grp = Hq / Hkv, nqg = (grp + GG_AS_GMAX - 1) / GG_AS_GMAX;
    const int G = grp < GG_AS_GMAX ? grp : GG_AS_GMAX;
    const int64_t groups = rows * Hkv * nqg;
    if (groups > INT_MAX)
        return 1;
    const int ns = pick_split(c, rows, Hq, S, Dh, groups);
    const int P = GG_AS_THREADS / Tn;
    const size_t shm = sizeof(float) * (size_t)P * (size_t)G * (size_t)(Dh + 2);
    k_attention_split<DT><<<(unsigned)(groups * ns), GG_AS_THREADS, shm, c->stream>>>(
        (const T *)in[0].data, (const T *)in[1].data, (const T *)in[2].data,
        (const int32_t *)in[3].data, (T *)out[0].data, c->attn_part, c->attn_cnt, Hq, Hkv, S,
        Dh, TL, nqg, ns, scale);
    return 0;
}

int gg_gpu_attention_split_launch(gg_gpu_ctx *c, gg_dtype dtype, const gg_tensor *in,
                                  const gg_tensor *out, int64_t rows, int Hq, int Hkv, int64_t S,
                                  int Dh, float scale)
{
    switch (dtype) {
    case GG_DT_F32:
        return launch_split<GG_DT_F32>(c, in, out, rows, Hq, Hkv, S, Dh, scale);
    case GG_DT_F16:
        return launch_split<GG_DT_F16>(c, in, out, rows, Hq, Hkv, S, Dh, scale);
    case GG_DT_BF16:
        return launch_split<GG_DT_BF16>(c, in, out, rows, Hq, Hkv, S, Dh, scale);
    default:
        return 1;
    }
}
