/* SPDX-License-Identifier: MIT */
/* attention_decode split along S (flash-decoding), for gpu_ops.hip's
 * launcher.  One source for both vendors, like gpu_ops.hip.
 *
 * Grid: one block of 256 threads per (row, kv head, group of up to
 * GG_AS_GMAX q heads of that kv head, chunk of the row's len).  A block reads
 * each K/V position of its chunk once for all its q heads (GQA sharing), 16
 * bytes a lane, a whole sub-chunk of positions in flight at once and the
 * next one fetched while this one is computed (k_attention_split says how).
 * With one chunk the block writes y; otherwise it writes its partial (max,
 * sum, unnormalised weighted V) to the context's scratch and the last block
 * of its (row, kv head, q group) to arrive (a counter it resets, so every
 * launch, captured or not, starts from zero) merges the chunks in one pass
 * and writes y.
 *
 * On NVIDIA sm_80+ in f16/bf16 with Dh 32, 64 or 128 the block is 4 warps
 * (8 at Dh 128 with GQA groups up to 8) doing the products on tensor cores
 * (k_attention_mma, gpu_attention_mma.hip), the same chunking, partials and
 * merge; elsewhere the CUDA-core kernel here (k_attention_split).
 * On sm_90 the tensor-core kernel's chunks of a group run as one thread-block
 * cluster where the cluster holds every chunk (up to 8: batch 1 at short
 * contexts, batch 16 at 2048 with Dh 64): the blocks merge through each
 * other's shared memory, with no partials, fence or counter in global
 * memory.
 *
 * Chunks split the row's len (read on the device, clamped to [0, S]), not S:
 * every chunk gets the same share whatever len is.  The chunk count is picked
 * on the host from S, the block count and the device's multiprocessor count
 * so the blocks make whole waves (pick_split); short S stays one pass.  The scratch is allocated once
 * per context at its creation (never at launch: capture-safe); a shape whose
 * partials do not fit it runs in one pass.  Shapes the kernel does not take
 * (Dh not 4..32 lanes of 16 bytes, a power of two; unaligned operands) go
 * back to gpu_ops.hip's one-block-per-head kernel, as every shape does when
 * GFXGRAPH_ATTN_SPLIT=0 is in the environment at context creation (for
 * comparisons). */
#include "gpu_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GG_AS_THREADS 256
#define GG_AS_GMAX 8         /* q heads a block serves */
#define GG_AS_MIN_CHUNK 64   /* positions: below 2 chunks of this, one pass */
#define GG_AS_MAX_SPLIT 256  /* chunks of a row (the merge: 8 a lane) */
#define GG_AS_PART_FLOATS ((size_t)1 << 20) /* 4 MiB of partials per context */
#define GG_AS_COUNTERS ((size_t)16384)


/* A small non-negative integer from the environment, else def. */
static int env_small(const char *name, int def, int max)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return def;
    char *end = NULL;
    const long v = strtol(e, &end, 10);
    if (*end || v < 0)
        return def;
    return v > max ? max : (int)v;
}

int gg_gpu_attention_ctx_init(gg_gpu_ctx *c)
{
    gg_gpu_attention_mma_init(c);
    /* GFXGRAPH_ATTN_CLUSTER=n: clusters of at most n blocks (0: none), for
     * comparisons */
    const int cl = env_small("GFXGRAPH_ATTN_CLUSTER", c->attn_cluster, c->attn_cluster);
    c->attn_cluster = cl >= 2 ? cl : 0;
    c->attn_ns_force = env_small("GFXGRAPH_ATTN_CHUNKS", 0, GG_AS_MAX_SPLIT);
    memset(c->attn_occ, 0, sizeof c->attn_occ);
    c->attn_part = NULL;
    c->attn_cnt = NULL;
    c->attn_part_floats = 0;
    c->attn_cnt_n = 0;
    memset(c->attn_pick_key, 0, sizeof c->attn_pick_key);
    c->attn_pick_ns = 0;
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

/* Sum over aligned groups of 2^TL lanes; every lane of the warp calls it. */
template <int TL> static __device__ __forceinline__ float group_sum(float v)
{
#pragma unroll
    for (int off = (1 << TL) / 2; off > 0; off >>= 1)
        v += gg_shfl_xor(v, off);
    return v;
}


/* After a block has written its chunk's partial (max, sum, unnormalised
 * weighted V per head, W = Dh + 2 floats, at part[(row * nsplit + s) * W]):
 * the last block of its (row, kv head, q group) to get here merges the
 * chunks and writes y.  A counter per group, reset by that block, so every
 * launch (captured or not) starts from zero.  sm: at least G * (nsplit + 1)
 * floats of shared memory the caller no longer needs.  Every thread of the
 * block calls it. */
template <int DT>
static __device__ __forceinline__ void merge_chunks(const float *part, unsigned *cnt, int grpid,
                                                    typename dt<DT>::T *y, float *sm, int64_t b,
                                                    int Hq, int h0, int Ga, int Dh, int W,
                                                    int nsplit, int64_t len)
{
    __shared__ int s_last;
    const int tid = threadIdx.x, lane = tid % warpSize, wid = tid / warpSize;
    const int nw = blockDim.x / warpSize;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const unsigned old = atomicAdd(&cnt[grpid], 1u);
        s_last = old == (unsigned)nsplit - 1;
        if (s_last)
            atomicExch(&cnt[grpid], 0u);
    }
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    /* per head, one warp: the chunks' weights exp(m_i - M) and the sum L
     * into shared memory, lanes over the chunks; then every output element
     * sums its chunks with up to 16 loads in flight.  A serial walk over the
     * chunks costs an L2 round trip per chunk: ~7 us at 32 chunks. */
    const int WS = nsplit + 1;
    for (int g = wid; g < Ga; g += nw) {
        /* a lane's chunks (nsplit <= GG_AS_MAX_SPLIT = 8 warps of 32): max
         * and sum loaded together, one round trip */
        const float *e = part + (b * Hq + h0 + g) * nsplit * W;
        float mv[8], lv[8], M = -INFINITY;
#pragma unroll
        for (int r = 0; r < 8; r++) {
            const int i = lane + r * warpSize;
            mv[r] = i < nsplit ? gg_ld_cg(e + (int64_t)i * W + Dh) : -INFINITY;
            lv[r] = i < nsplit ? gg_ld_cg(e + (int64_t)i * W + Dh + 1) : 0.0f;
            M = fmaxf(M, mv[r]);
        }
        M = gg_warp_max(M);
        float L = 0.0f;
#pragma unroll
        for (int r = 0; r < 8; r++) {
            const int i = lane + r * warpSize;
            /* an empty chunk has max -inf: weight 0 */
            const float w = mv[r] == -INFINITY ? 0.0f : expf(mv[r] - M);
            if (i < nsplit)
                sm[g * WS + i] = w;
            L += w == 0.0f ? 0.0f : w * lv[r];
        }
        L = gg_warp_sum(L);
        if (lane == 0)
            sm[g * WS + nsplit] = L;
    }
    __syncthreads();
    for (int o = tid; o < Ga * Dh; o += blockDim.x) {
        const int g = o / Dh, d = o % Dh;
        const int64_t row = b * Hq + h0 + g;
        const float *e = part + row * nsplit * W + d;
        const float *wg = sm + g * WS;
        float O = 0.0f;
#pragma unroll 32
        for (int i = 0; i < nsplit; i++)
            O += gg_ld_cg(e + (int64_t)i * W) * wg[i];
        y[row * Dh + d] = dt<DT>::st(len > 0 ? O / wg[nsplit] : 0.0f);
    }
}

/* One block: (row b, kv head kh, q heads h0 .. h0 + G - 1 of that kv head,
 * chunk s of the row's len).  Threads: 2^TL lanes per cache position, one
 * 16-byte unit of Dh each; P = 256 >> TL positions side by side, KPT
 * positions per lane group, so a sub-chunk of CB = P * KPT positions is in
 * flight at once (and the next one is fetched while this one is computed).
 * Per sub-chunk: the scores of all G heads (one K read for the whole GQA
 * group), a barrier, the sub-chunk's max and exponentials per head (one warp
 * a head), a barrier, then P.V into per-thread accumulators rescaled by the
 * running max.  The accumulators are summed over the block once, at the end.
 *
 * Why this shape: the previous kernel kept an online-softmax state per
 * position group and merged them with exponentials in shared memory, then
 * merged the chunks in three dependent passes; with 220 registers a thread
 * an SM held one 4-warp block, so that serial work (~3300 instructions a
 * warp, ~7 cycles each, nothing to hide them) cost ~13 us whatever the
 * context (ncu, H100: 24k active cycles of 35k, an instruction issued every
 * 3.7 cycles).  Here a thread's serial work is a few dot products, shuffles
 * and FMAs per position, and the merge is one pass. */
/* two blocks a multiprocessor up to 4 heads a block (128 registers), so one
 * block's barriers and merge overlap another's loads */
template <int DT, int TL, int G>
__global__ void __launch_bounds__(GG_AS_THREADS, G <= 4 ? 2 : 1)
    k_attention_split(const typename dt<DT>::T *q, const typename dt<DT>::T *k,
                      const typename dt<DT>::T *v, gg_gpu_index lens, typename dt<DT>::T *y,
                      float *part, unsigned *cnt, int Hq, int Hkv, int64_t S, gg_gpu_kv kv,
                      int nqg, int nsplit, float scale)
{
    typedef dt<DT> D;
    typedef unit<DT, true> U;
    typedef typename U::raw R;
    enum { N = U::N, T = 1 << TL, P = GG_AS_THREADS >> TL };
    enum { KPT = T / 4 < 4 ? T / 4 : 4, CB = P * KPT };
    static_assert(KPT >= 1, "at least 4 lanes a position");
    __shared__ float sc[2][G][CB];
    __shared__ float st_m[G], st_l[G], st_c[G];
    extern __shared__ float red[]; /* [warps][G][Dh] */

    const int Dh = T * N;
    const int tid = threadIdx.x, t = tid & (T - 1), pg = tid >> TL;
    const int lane = tid % warpSize, wid = tid / warpSize, nw = blockDim.x / warpSize;
    /* 32-bit index arithmetic: the launcher keeps the grid within INT_MAX */
    const int s = (int)blockIdx.x % nsplit;
    const int grpid = (int)blockIdx.x / nsplit; /* (b, kh, qg) */
    const int qg = grpid % nqg;
    const int bk = grpid / nqg;
    const int kh = bk % Hkv;
    const int64_t b = bk / Hkv;
    const int grp = Hq / Hkv, h0 = kh * grp + qg * G;
    const int Ga = grp - qg * G < G ? grp - qg * G : G; /* heads of this block */

    int64_t len = gg_gpu_index_at(lens, b);
    len = len < 0 ? 0 : len > S ? S : len;
    const int64_t chunk = (len + nsplit - 1) / nsplit;
    const int64_t j0 = s * chunk < len ? s * chunk : len;
    const int64_t j1 = j0 + chunk < len ? j0 + chunk : len;

    if (tid < G) {
        st_m[tid] = -INFINITY;
        st_l[tid] = 0.0f;
    }
    const int64_t ld = kv.sp; /* elements between positions */
    const typename D::T *kb = k + b * kv.sb + kh * kv.sh, *vb = v + b * kv.sb + kh * kv.sh;
    /* positions past the chunk hold zeros: their weight is 0, and 0 * a
     * stale NaN would not be */
    R kr[KPT], vr[KPT];
#pragma unroll
    for (int i = 0; i < KPT; i++) {
        const int64_t j = j0 + pg + P * i;
        kr[i] = vr[i] = R{};
        if (j < j1) {
            kr[i] = U::load_raw(kb + j * ld, t);
            vr[i] = U::load_raw(vb + j * ld, t);
        }
    }
    float qf[G][N], acc[G][N];
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (g < Ga) {
            U::load(q + (b * Hq + h0 + g) * Dh, t, qf[g]);
#pragma unroll
            for (int n = 0; n < N; n++)
                qf[g][n] *= scale;
        } else {
#pragma unroll
            for (int n = 0; n < N; n++)
                qf[g][n] = 0.0f;
        }
#pragma unroll
        for (int n = 0; n < N; n++)
            acc[g][n] = 0.0f;
    }

    int buf = 0;
    for (int64_t jb = j0; jb < j1; jb += CB, buf ^= 1) {
        R kn[KPT], vn[KPT];
        const int64_t jn = jb + CB;
#pragma unroll
        for (int i = 0; i < KPT; i++) {
            const int64_t j = jn + pg + P * i;
            kn[i] = vn[i] = R{};
            if (j < j1) {
                kn[i] = U::load_raw(kb + j * ld, t);
                vn[i] = U::load_raw(vb + j * ld, t);
            }
        }
#pragma unroll
        for (int i = 0; i < KPT; i++) {
            const bool ok = jb + pg + P * i < j1;
            float kf[N];
            U::cvt(kr[i], kf);
#pragma unroll
            for (int g = 0; g < G; g++) {
                float p = 0.0f;
#pragma unroll
                for (int n = 0; n < N; n++)
                    p += qf[g][n] * kf[n];
                p = group_sum<TL>(p);
                if (t == 0)
                    sc[buf][g][pg + P * i] = ok ? p : -INFINITY;
            }
        }
        __syncthreads();
        for (int g = wid; g < G; g += nw) {
            float mx = -INFINITY;
            for (int jj = lane; jj < CB; jj += warpSize)
                mx = fmaxf(mx, sc[buf][g][jj]);
            mx = gg_warp_max(mx);
            const float mo = st_m[g], mn = fmaxf(mo, mx);
            float sum = 0.0f;
            for (int jj = lane; jj < CB; jj += warpSize) {
                const float e = expf(sc[buf][g][jj] - mn);
                sc[buf][g][jj] = e;
                sum += e;
            }
            sum = gg_warp_sum(sum);
            if (lane == 0) {
                const float c = expf(mo - mn);
                st_c[g] = c;
                st_l[g] = st_l[g] * c + sum;
                st_m[g] = mn;
            }
        }
        __syncthreads();
#pragma unroll
        for (int g = 0; g < G; g++) {
            const float c = st_c[g];
#pragma unroll
            for (int n = 0; n < N; n++)
                acc[g][n] *= c;
        }
#pragma unroll
        for (int i = 0; i < KPT; i++) {
            float vf[N];
            U::cvt(vr[i], vf);
#pragma unroll
            for (int g = 0; g < G; g++) {
                const float pj = sc[buf][g][pg + P * i];
#pragma unroll
                for (int n = 0; n < N; n++)
                    acc[g][n] += pj * vf[n];
            }
            kr[i] = kn[i];
            vr[i] = vn[i];
        }
    }

    /* the block's sum: lane groups of a warp by shuffles, warps in shared
     * memory */
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int n = 0; n < N; n++)
            for (int off = T; off < warpSize; off <<= 1)
                acc[g][n] += gg_shfl_xor(acc[g][n], off);
    if (lane < T)
#pragma unroll
        for (int g = 0; g < G; g++)
#pragma unroll
            for (int n = 0; n < N; n++)
                red[(wid * G + g) * Dh + t * N + n] = acc[g][n];
    __syncthreads();
    const int W = Dh + 2;
    for (int o = tid; o < Ga * Dh; o += blockDim.x) {
        const int g = o / Dh, d = o % Dh;
        float O = 0.0f;
        for (int w = 0; w < nw; w++)
            O += red[(w * G + g) * Dh + d];
        const int64_t row = b * Hq + h0 + g;
        if (nsplit == 1) {
            y[row * Dh + d] = D::st(len > 0 ? O / st_l[g] : 0.0f);
        } else {
            float *e = part + (row * nsplit + s) * W;
            e[d] = O;
            if (d == 0) {
                e[Dh] = st_m[g];
                e[Dh + 1] = st_l[g];
            }
        }
    }
    if (nsplit == 1)
        return;
    merge_chunks<DT>(part, cnt, grpid, y, red, b, Hq, h0, Ga, Dh, Dh + 2, nsplit, len);
}

/* The chunk count for a launch.  Time is modelled as the waves of blocks
 * (per_sm resident a multiprocessor) times a block's positions plus a fixed
 * cost of min_chunk positions a block (its start, the partial, the merge):
 * the count that minimises it, chunks of at least min_chunk positions,
 * partials within the scratch, and as much again for each merge pass past
 * the first where the merge takes merge_ch chunks a pass (0: one pass for
 * any count); 1 (one pass) when nothing beats that.  A
 * count picked only to reach a block count (H100, batch 16, context 2048:
 * 3 chunks, 384 blocks on 264 resident) left a second wave under half full. */
static int pick_split_scan(const gg_gpu_ctx *c, int64_t per, int64_t S, int64_t groups,
                           int per_sm, int min_chunk, int merge_ch)
{
    const int64_t slots = per_sm * (int64_t)(c->sms > 0 ? c->sms : 1);
    int64_t nmax = S / min_chunk;
    if (nmax > GG_AS_MAX_SPLIT)
        nmax = GG_AS_MAX_SPLIT;
    if (nmax < 2)
        return 1;
    if (!c->attn_part || !c->attn_cnt || (size_t)groups > c->attn_cnt_n)
        return 1;
    if (groups < 1 || per < 1)
        return 1;
    const int64_t fit = (int64_t)c->attn_part_floats / per;
    if (nmax > fit)
        nmax = fit;
    if (nmax > INT_MAX / groups)
        nmax = INT_MAX / groups;
    if (c->attn_ns_force > 0)
        return (int)(c->attn_ns_force < nmax ? c->attn_ns_force : nmax);
    int64_t best = 1, best_cost = ((groups + slots - 1) / slots) * (S + min_chunk);
    for (int64_t ns = 2; ns <= nmax; ns++) {
        const int64_t waves = (groups * ns + slots - 1) / slots;
        int64_t cost = waves * ((S + ns - 1) / ns + min_chunk);
        if (merge_ch > 0)
            cost += (ns - 1) / merge_ch * min_chunk;
        if (cost < best_cost) {
            best = ns;
            best_cost = cost;
        }
    }
    return (int)best;
}

/* pick_split_scan's answer, kept for the next launch of the same shape
 * (the scan is ~1.3 us of host time at 256 candidate counts). */
int gg_gpu_attention_pick(gg_gpu_ctx *c, int64_t rows, int Hq, int64_t S, int W, int64_t groups,
                          int per_sm, int min_chunk, int merge_ch)
{
    const int64_t key[6] = {rows * Hq * (int64_t)W, S, groups, per_sm, min_chunk, merge_ch};
    if (c->attn_pick_ns > 0 && memcmp(key, c->attn_pick_key, sizeof key) == 0)
        return c->attn_pick_ns;
    const int ns = pick_split_scan(c, key[0], S, groups, per_sm, min_chunk, merge_ch);
    memcpy(c->attn_pick_key, key, sizeof key);
    c->attn_pick_ns = ns;
    return ns;
}

template <int DT, int TL, int G>
static void launch_split_g(gg_gpu_ctx *c, const gg_tensor *in, const gg_tensor *out, int Hq,
                           int Hkv, int64_t S, gg_gpu_kv kv, int nqg, int64_t groups, int ns,
                           size_t shm, float scale)
{
    typedef typename dt<DT>::T T;
    k_attention_split<DT, TL, G><<<(unsigned)(groups * ns), GG_AS_THREADS, shm, c->stream>>>(
        (const T *)in[0].data, (const T *)in[1].data, (const T *)in[2].data,
        gg_gpu_index_of(&in[3]), (T *)out[0].data, c->attn_part, c->attn_cnt, Hq, Hkv, S, kv,
        nqg, ns, scale);
}

template <int DT, int TL>
static void launch_split_tl(gg_gpu_ctx *c, int G, const gg_tensor *in, const gg_tensor *out,
                            int Hq, int Hkv, int64_t S, gg_gpu_kv kv, int nqg, int64_t groups, int ns,
                            size_t shm, float scale)
{
    switch (G) {
    case 1:
        launch_split_g<DT, TL, 1>(c, in, out, Hq, Hkv, S, kv, nqg, groups, ns, shm, scale);
        break;
    case 2:
        launch_split_g<DT, TL, 2>(c, in, out, Hq, Hkv, S, kv, nqg, groups, ns, shm, scale);
        break;
    case 4:
        launch_split_g<DT, TL, 4>(c, in, out, Hq, Hkv, S, kv, nqg, groups, ns, shm, scale);
        break;
    default:
        launch_split_g<DT, TL, 8>(c, in, out, Hq, Hkv, S, kv, nqg, groups, ns, shm, scale);
        break;
    }
}

template <int DT>
static int launch_split(gg_gpu_ctx *c, const gg_tensor *in, const gg_tensor *out, int64_t rows,
                        int Hq, int Hkv, int64_t S, int Dh, float scale, gg_gpu_kv kv)
{
    const int N = dt<DT>::VEC;
    if (c->attn_split_off || Dh % N != 0)
        return 1;
    const int Tn = Dh / N;
    /* 4 to 32 lanes a position (and no more than a warp) */
    if (Tn < 4 || Tn > 32 || Tn > c->warp || (Tn & (Tn - 1)) != 0)
        return 1;
    for (int i = 0; i < 3; i++)
        if (!gg_gpu_aligned16(in[i].data))
            return 1;
    if (!gg_gpu_aligned16(out[0].data))
        return 1;
    int TL = 0;
    while ((1 << TL) < Tn)
        TL++;
    /* q heads a block serves: the GQA group, in powers of two up to
     * GG_AS_GMAX, fewer when the block's sum would not fit 40 KiB (48 with the static
     * arrays) */
    const int grp = Hq / Hkv, nw = GG_AS_THREADS / c->warp;
    int G = 1;
    while (G < grp && G < GG_AS_GMAX)
        G *= 2;
    while (G > 1 && (size_t)nw * G * Dh * sizeof(float) > 40 * 1024)
        G /= 2;
    const int nqg = (grp + G - 1) / G;
    const int64_t groups = rows * Hkv * nqg;
    if (groups > INT_MAX)
        return 1;
    const int ns = gg_gpu_attention_pick(c, rows, Hq, S, Dh + 2, groups, 2, GG_AS_MIN_CHUNK, 0);
    /* shared memory: the block's sum, then (reused) the merge's weights */
    size_t shm = (size_t)nw * G * Dh;
    if (shm < (size_t)G * (ns + 1))
        shm = (size_t)G * (ns + 1);
    shm *= sizeof(float);
    switch (TL) {
    case 2:
        launch_split_tl<DT, 2>(c, G, in, out, Hq, Hkv, S, kv, nqg, groups, ns, shm, scale);
        break;
    case 3:
        launch_split_tl<DT, 3>(c, G, in, out, Hq, Hkv, S, kv, nqg, groups, ns, shm, scale);
        break;
    case 4:
        launch_split_tl<DT, 4>(c, G, in, out, Hq, Hkv, S, kv, nqg, groups, ns, shm, scale);
        break;
    default:
        launch_split_tl<DT, 5>(c, G, in, out, Hq, Hkv, S, kv, nqg, groups, ns, shm, scale);
        break;
    }
    return 0;
}

int gg_gpu_attention_split_launch(gg_gpu_ctx *c, gg_dtype dtype, const gg_tensor *in,
                                  const gg_tensor *out, int64_t rows, int Hq, int Hkv, int64_t S,
                                  int Dh, float scale, gg_gpu_kv kv)
{
    switch (dtype) {
    case GG_DT_F32:
        return launch_split<GG_DT_F32>(c, in, out, rows, Hq, Hkv, S, Dh, scale, kv);
    case GG_DT_F16:
        return gg_gpu_attention_mma_launch(c, dtype, in, out, rows, Hq, Hkv, S, Dh, scale, kv) == 0
                   ? 0
                   : launch_split<GG_DT_F16>(c, in, out, rows, Hq, Hkv, S, Dh, scale, kv);
    case GG_DT_BF16:
        return gg_gpu_attention_mma_launch(c, dtype, in, out, rows, Hq, Hkv, S, Dh, scale, kv) == 0
                   ? 0
                   : launch_split<GG_DT_BF16>(c, in, out, rows, Hq, Hkv, S, Dh, scale, kv);
    default:
        return 1;
    }
}
