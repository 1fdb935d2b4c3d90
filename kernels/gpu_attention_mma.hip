/* SPDX-License-Identifier: MIT */
/* attention_decode on tensor cores (NVIDIA sm_80+, f16/bf16, Dh 32, 64 or
 * 128): k_attention_mma, for gpu_attention.hip's launcher, which splits
 * the row's len into chunks the same way for this kernel and its CUDA-core
 * one (gg_gpu_attention_pick) and falls back to that one for every shape
 * this file does not take. */
#include "gpu_internal.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>

/* Why tensor cores: the CUDA-core kernel (gpu_attention.hip) spends ~100 instructions a position and thread on
 * f32 dot products, shuffles and conversions (ncu, H100, context 32768: an
 * instruction every ~9.5 cycles a warp with 4 warps a scheduler, 37% of the
 * copy rate).  Here a warp takes 16 positions at a time and does the
 * products on tensor cores: S[16 heads x 16 positions] = Q K^T (the block's
 * q heads are the 16 rows, padded with zero rows), then P V with the
 * probabilities as the A operand straight from S's registers (the
 * FlashAttention register layout).  Both operands of both products are
 * loaded from global memory into fragment registers with 16-byte loads
 * that take whole 32-byte sectors a warp instruction (at_load): for Q K^T
 * the head dim is the contracted one, read by each lane in pieces in a
 * permuted order that Q and K share; for P V a lane reads Dh / 8 dims of
 * its 4 positions and output column n of the t-th mma is dim at_vdim(n, t),
 * undone when the result is written.  K and V bypass L1 (gg_ld_stream16).
 * Scores, the running max and sums are f32, in base 2 (the scale times
 * log2(e) folded in, every exponential one exp2); P enters the f16/bf16 mma
 * as a hi + lo pair (two mma), so the weights keep ~22 (f16) or ~16 (bf16)
 * bits.  Each warp keeps its own running max and sums over its tiles,
 * rescaled only when a tile's max passes the kept one by GG_AT_SLACK; with
 * at most 8 q heads a block (GQA groups up to 8) the rows 8-15 are zeros
 * and skipped outside the mma.  The 4 warps merge in shared memory (rows
 * padded against bank conflicts), then the chunks merge: in a cluster
 * through shared memory, else by the last block (at_merge: one L2 round
 * trip for up to 32 chunks at Dh <= 64, 16 at Dh 128).  At Dh <= 64 a
 * warp's tiles pass through a ring of three in registers, two loading while
 * one is computed; at Dh 128 a warp holds one tile and the next one's K,
 * in blocks of 8 warps where at most 8 q heads share them.
 *
 * At batch 1 the launch is one chain of dependent steps with 4 warps a
 * multiprocessor (ncu, H100, context 512: ~1300 instructions a warp at ~10
 * cycles each, stalled on barriers, the merge's fence, instruction fetch
 * and memory): what shortened it was fewer instructions on that chain (the
 * conflict-free block sum, 32-bit positions, a grid without divisions,
 * exp2f) and fewer round trips after the loads (the cluster merge).  Past
 * L2 (ncu, batch 16, context 2048) half a warp's cycles wait on memory:
 * loads that skip L1 took it from 74-80% of the copy rate to 81-85%.
 * Tried on the H100 and dropped: a cp.async ring in shared memory (3 or 5
 * stages, fragment- or row-ordered; 5-50% slower past L2), at Dh 128 the
 * next tile staged through cp.async (9.9 us against 9.4), prefetching the
 * chunk into L2 before lens is read (no gain) or a warp's tiles 2-16 ahead
 * (5-20% slower past L2), 8 warps a block at Dh 64 (clusters of 16 such
 * blocks wait for whole GPCs), three blocks a multiprocessor (168
 * registers: spills, 10-20% slower), a second register tile at Dh 128 (it
 * spills), rows 8-15
 * of the mma dropped from the accumulators (more registers, 1% slower), Q
 * K^T in two chains of k-slices (1% slower past L2), __ldg or an L2
 * evict-first policy for K and V (no gain or slower). */
#define GG_AT_WARPS 4
/* A block's warps, and the rows of the mma a warp keeps for the block's sum
 * (8 when heads gid + 8 are not in use).  Dh 128 with at most 8 q heads a
 * block: 8 warps, one block a multiprocessor, so that at batch 1 a warp's
 * share of a chunk is one tile (H100, context 2048: 8.4 us; 4 warps took
 * their two tiles one after the other, 8.9). */
#define GG_AT_NW(dh, hi) ((dh) == 128 && !(hi) ? 8 : GG_AT_WARPS)
template <int DH, bool HI> struct at_geo {
    enum { NW = GG_AT_NW(DH, HI), RW = HI ? 16 : 8 };
};
#define GG_AT_GMAX 16
#define GG_AT_CLMAX 8 /* blocks a cluster at most */

/* A lane's NW words of a row that L lanes share: 16-byte pieces (8-byte
 * ones where NW is 2), piece i of lane l at element (i L + l) times the
 * piece, so that each load instruction of the warp takes whole 32-byte
 * sectors of the rows (a lane's contiguous 32 bytes took each sector in two
 * halves, one instruction after the other).  STREAM: K and V, read once,
 * not kept in L1 (gg_ld_stream16 says why). */
template <int NW, int L, bool STREAM>
static __device__ __forceinline__ void at_load(uint32_t (&w)[NW], const uint16_t *row, int l,
                                               bool ok)
{
    if constexpr (NW >= 4) {
#pragma unroll
        for (int i = 0; i < NW / 4; i++) {
            uint4 u = make_uint4(0u, 0u, 0u, 0u);
            const uint4 *p = (const uint4 *)(row + (i * L + l) * 8);
            if (ok)
                u = STREAM ? gg_ld_stream16(p) : *p;
            w[4 * i] = u.x, w[4 * i + 1] = u.y, w[4 * i + 2] = u.z, w[4 * i + 3] = u.w;
        }
    } else {
        uint2 u = make_uint2(0u, 0u);
        if (ok)
            u = *(const uint2 *)(row + l * 4);
        w[0] = u.x, w[1] = u.y;
    }
}

/* The head dim that V's t-th dim of lane n (at_load's order, DPL of them)
 * is, and so column n of the t-th P V mma. */
template <int DPL> static __device__ __forceinline__ int at_vdim(int n, int t)
{
    enum { P = DPL < 8 ? DPL : 8 };
    return ((t / P) * 8 + n) * P + t % P;
}

/* (a, b) rounded into one register (a in the low half), and what rounding
 * left over, rounded again */
template <int DT>
static __device__ __forceinline__ void at_split(float a, float b, uint32_t &hi, uint32_t &lo)
{
    typedef dt<DT> D;
    const uint16_t ah = D::st(a), bh = D::st(b);
    hi = (uint32_t)ah | ((uint32_t)bh << 16);
    lo = (uint32_t)D::st(a - D::ld(ah)) | ((uint32_t)D::st(b - D::ld(bh)) << 16);
}

/* A warp's running state over its tiles: O for heads gid and gid + 8 (the
 * mma accumulator layout), their max and sum. */
template <int DH> struct at_state {
    float o[DH / 8][4];
    float m0, m1, l0, l1;
};

/* One tile's K (two 8-position halves) and V (4 positions a lane) in
 * fragment order. */
template <int DH> struct at_tile_regs {
    uint32_t kw[2][DH / 8], vw[4][DH / 16];
};

template <int DH>
static __device__ __forceinline__ void at_fetch_k(uint32_t (&kw)[2][DH / 8], const uint16_t *kl,
                                                  int64_t ld, int p0, int j1, int gid, int tig)
{
    const int64_t o = (int64_t)p0 * ld;
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
        at_load<DH / 8, 4, true>(kw[nt], kl + o + 8 * nt * ld, tig, p0 + 8 * nt + gid < j1);
}

template <int DH>
static __device__ __forceinline__ void at_fetch_v(at_tile_regs<DH> &r, const uint16_t *vl,
                                                  int64_t ld, int p0, int j1, int gid, int tig)
{
    const int64_t o = (int64_t)p0 * ld;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int d = (e & 1) + 8 * (e >> 1);
        at_load<DH / 16, 8, true>(r.vw[e], vl + o + d * ld, gid, p0 + 2 * tig + d < j1);
    }
}

/* Lane pointers for at_fetch: the rows of K at position gid (the first
 * 8-position half) and of V at position 2 tig; a tile at p0 adds p0 * ld.
 * A lane takes its share of a K row as the tig-th of 4 lanes, of a V row as
 * the gid-th of 8 (at_load). */
template <int DH>
static __device__ __forceinline__ void at_fetch(at_tile_regs<DH> &r, const uint16_t *kl,
                                                const uint16_t *vl, int64_t ld, int p0, int j1,
                                                int gid, int tig)
{
    at_fetch_k<DH>(r.kw, kl, ld, p0, j1, gid, tig);
    at_fetch_v<DH>(r, vl, ld, p0, j1, gid, tig);
}

/* How far (base 2) a row's scores may pass the max its sums are kept
 * against before the warp rescales them: exponentials up to 2^8 fit f16's
 * and bf16's range and keep their relative precision, and a max that grows
 * by less (most tiles after the first) costs no rescale. */
#define GG_AT_SLACK 8.0f

/* The tile at p0 (its first position valid) into the warp's state.  qs:
 * the scale times log2(e): scores, maxima and sums are kept in base 2, so
 * every exponential is one exp2.  HI: heads gid + 8 (rows 8-15 of the mma)
 * are in use; a block of at most 8 q heads (GQA groups of up to 8) leaves
 * them zero and skips their scores, exponentials and rescales, half of the
 * tile's work outside the mma.
 *
 * A row's running max m is raised only when a tile's max passes it by
 * GG_AT_SLACK (on any row of the warp: one branch for all lanes), so the
 * sums and O are rescaled a few times a chunk instead of every tile; they
 * stay exact against whatever m they were kept for, which the block's and
 * the chunks' merges take as it is. */
template <int DT, int DH, bool HI>
static __device__ __forceinline__ void at_tile(at_state<DH> &st, const at_tile_regs<DH> &r,
                                               const uint32_t (&qa)[DH / 8],
                                               const uint32_t (&qb)[DH / 8], int p0, int j1,
                                               int tig, float qs)
{
    enum { KT = DH / 16, DPL = DH / 8, NE = HI ? 4 : 2 };
    float sc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
        for (int j = 0; j < KT; j++) {
            const uint32_t a[4] = {qa[2 * j], HI ? qb[2 * j] : 0u, qa[2 * j + 1],
                                   HI ? qb[2 * j + 1] : 0u};
            const uint32_t bb[2] = {r.kw[nt][2 * j], r.kw[nt][2 * j + 1]};
            mma_op<DT>::run(sc[nt], a, bb);
        }
    }
    /* sc[nt][e]: head gid (e < 2) or gid + 8, position p0 + 8 nt + 2 tig +
     * (e & 1); a tile's first position is valid, so every row's max over
     * the quad is finite.  Only a chunk's last tile can run past it. */
    const bool part = p0 + 16 > j1;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < NE; e++) {
            float x = sc[nt][e] * qs;
            if (part && p0 + 8 * nt + 2 * tig + (e & 1) >= j1)
                x = -INFINITY;
            sc[nt][e] = x;
            if (e < 2)
                mx0 = fmaxf(mx0, x);
            else
                mx1 = fmaxf(mx1, x);
        }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        mx0 = fmaxf(mx0, gg_shfl_xor(mx0, off));
        if (HI)
            mx1 = fmaxf(mx1, gg_shfl_xor(mx1, off));
    }
    /* the difference, not m + slack: near 2^27 and past it m + 8 rounds to
     * m + 16 in f32, and an f16 weight of 2^16 is inf (at the first tile m
     * is -inf: the difference +inf) */
    bool grow = mx0 - st.m0 > GG_AT_SLACK;
    if (HI)
        grow = grow || mx1 - st.m1 > GG_AT_SLACK;
    if (gg_warp_any(grow)) {
        const float n0 = fmaxf(st.m0, mx0), n1 = HI ? fmaxf(st.m1, mx1) : st.m1;
        const float c0 = gg_ex2(st.m0 - n0), c1 = HI ? gg_ex2(st.m1 - n1) : 1.0f;
        st.m0 = n0;
        st.m1 = n1;
        st.l0 *= c0;
        if (HI)
            st.l1 *= c1;
#pragma unroll
        for (int t = 0; t < DPL; t++) {
            st.o[t][0] *= c0;
            st.o[t][1] *= c0;
            if (HI) {
                st.o[t][2] *= c1;
                st.o[t][3] *= c1;
            }
        }
    }
    float r0 = 0.0f, r1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < NE; e++) {
            sc[nt][e] = gg_ex2(sc[nt][e] - (e < 2 ? st.m0 : st.m1));
            if (e < 2)
                r0 += sc[nt][e];
            else
                r1 += sc[nt][e];
        }
    st.l0 += r0;
    if (HI)
        st.l1 += r1;
    uint32_t ph[4] = {0u, 0u, 0u, 0u}, pl[4] = {0u, 0u, 0u, 0u};
    at_split<DT>(sc[0][0], sc[0][1], ph[0], pl[0]);
    at_split<DT>(sc[1][0], sc[1][1], ph[2], pl[2]);
    if (HI) {
        at_split<DT>(sc[0][2], sc[0][3], ph[1], pl[1]);
        at_split<DT>(sc[1][2], sc[1][3], ph[3], pl[3]);
    }
#pragma unroll
    for (int t = 0; t < DPL; t++) {
        /* positions 2 tig, 2 tig + 1 (and + 8) of dim gid * DPL + t */
        const unsigned sel = (t & 1) ? 0x7632u : 0x5410u;
        const uint32_t bb[2] = {__byte_perm(r.vw[0][t / 2], r.vw[1][t / 2], sel),
                                __byte_perm(r.vw[2][t / 2], r.vw[3][t / 2], sel)};
        mma_op<DT>::run(st.o[t], ph, bb);
        mma_op<DT>::run(st.o[t], pl, bb);
    }
}

/* Partials of the tensor-core kernel: Dh floats of unnormalised O, then the
 * chunk's max (base 2) and sum, padded to a 16-byte multiple so that the
 * merge reads a lane's dims and a chunk's (max, sum) with vector loads. */
#define GG_AT_W(dh) ((dh) + 4)
/* chunks at_merge takes in one L2 round trip; the pick counts each further
 * one as a chunk's start (H100, batch 1, context 32768: 33 chunks took
 * 32.0 us, 32 chunks 30.7) */
#define GG_AT_MERGE_CH(dh) ((dh) <= 64 ? 32 : 16)

template <int N> struct at_fvec;
template <> struct at_fvec<1> {
    static __device__ __forceinline__ void ld(const float *p, float *o) { o[0] = gg_ld_cg(p); }
};
template <> struct at_fvec<2> {
    static __device__ __forceinline__ void ld(const float *p, float *o)
    {
#if defined(GFXGRAPH_HIP_CUDA)
        const float2 u = __ldcg((const float2 *)p);
        o[0] = u.x, o[1] = u.y;
#else
        o[0] = gg_ld_cg(p), o[1] = gg_ld_cg(p + 1);
#endif
    }
};
template <> struct at_fvec<4> {
    static __device__ __forceinline__ void ld(const float *p, float *o)
    {
#if defined(GFXGRAPH_HIP_CUDA)
        const float4 u = __ldcg((const float4 *)p);
        o[0] = u.x, o[1] = u.y, o[2] = u.z, o[3] = u.w;
#else
        o[0] = gg_ld_cg(p), o[1] = gg_ld_cg(p + 1), o[2] = gg_ld_cg(p + 2), o[3] = gg_ld_cg(p + 3);
#endif
    }
};

/* The chunks' merge through global memory, by the last block of its (row,
 * kv head, q group) to finish (as gpu_attention.hip's merge_chunks): a warp
 * a head, a lane DH / 32 dims, every chunk's (max, sum) and dims loaded
 * together, CH chunks at a time, so that up to CH chunks cost one L2 round
 * trip after the counter (merge_chunks needs two, and more at Dh 128, where
 * its threads walk the outputs one after another). */
template <int DT, int DH, int NW>
static __device__ __forceinline__ void at_merge(const float *part, unsigned *cnt, int grpid,
                                                uint16_t *y, int64_t row0, int Ga, int nsplit,
                                                int len)
{
    enum { VPL = DH / 32, W = GG_AT_W(DH), CH = GG_AT_MERGE_CH(DH) };
    typedef dt<DT> D;
    __shared__ int s_last;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
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
    for (int g = wid; g < Ga; g += NW) {
        const int64_t row = row0 + g;
        const float *e = part + row * nsplit * W;
        float M = -INFINITY, L = 0.0f, O[VPL];
#pragma unroll
        for (int v = 0; v < VPL; v++)
            O[v] = 0.0f;
        for (int i0 = 0; i0 < nsplit; i0 += CH) {
            float ml[CH][2], oi[CH][VPL];
#pragma unroll
            for (int k = 0; k < CH; k++) {
                ml[k][0] = -INFINITY, ml[k][1] = 0.0f;
#pragma unroll
                for (int v = 0; v < VPL; v++)
                    oi[k][v] = 0.0f;
                if (i0 + k < nsplit) {
                    at_fvec<2>::ld(e + (int64_t)(i0 + k) * W + DH, ml[k]);
                    at_fvec<VPL>::ld(e + (int64_t)(i0 + k) * W + lane * VPL, oi[k]);
                }
            }
            float Mn = M;
#pragma unroll
            for (int k = 0; k < CH; k++)
                Mn = fmaxf(Mn, ml[k][0]);
            /* an empty chunk has max -inf: weight 0 (and so has every
             * chunk while Mn is -inf) */
            const float c = M == Mn ? 1.0f : exp2f(M - Mn);
            L *= c;
#pragma unroll
            for (int v = 0; v < VPL; v++)
                O[v] *= c;
#pragma unroll
            for (int k = 0; k < CH; k++) {
                const float w = ml[k][0] == -INFINITY ? 0.0f : exp2f(ml[k][0] - Mn);
                L += w * ml[k][1];
#pragma unroll
                for (int v = 0; v < VPL; v++)
                    O[v] += w * oi[k][v];
            }
            M = Mn;
        }
#pragma unroll
        for (int v = 0; v < VPL; v++)
            y[row * DH + lane * VPL + v] = D::st(len > 0 ? O[v] / L : 0.0f);
    }
}

/* The block's sum in shared memory: a row of DH floats plus one after every
 * 32, so that the stores of the mma layout (lane (gid, tig) writes dims
 * tig * DH / 4 + ...: every tig on one bank without the pad) spread over
 * all 32 banks (H100: the 32-way conflicts of Dh 128 cost ~7 us a launch,
 * the 16-way ones of Dh 64 ~1.5 us). */
#define GG_AT_SROW(dh) ((dh) + (dh) / 32)

/* One block: (chunk blockIdx.x, q group blockIdx.y, row and kv head
 * blockIdx.z), at_geo's warps.  RING 3: a warp's tiles pass through a
 * ring of three in registers (Dh <= 64); 1: one tile and the next one's K.
 * HI: more than 8 q heads a block (at_tile).  ncl > 0: the
 * launch is a cluster of ncl blocks, the chunks of one group (nsplit ==
 * ncl), merged through shared memory. */
template <int DT, int DH, int RING, bool HI>
__global__ void __launch_bounds__(GG_AT_NW(DH, HI) * 32) /* HIP's macro splits at<a, b> */
    k_attention_mma(const uint16_t *q, const uint16_t *k, const uint16_t *v, gg_gpu_index lens,
                    uint16_t *y, float *part, unsigned *cnt, int Hq, int Hkv, int S, gg_gpu_kv kv,
                    int G, int nsplit, float qs, int ncl)
{
    typedef dt<DT> D;
    /* KC: K elements a lane reads a position (KW words), KT: mma k-slices
     * over Dh; DPL: V dims a lane reads a position (VW words) = P V mmas */
    enum { KC = DH / 4, KW = KC / 2, KT = DH / 16, DPL = DH / 8, VW = DPL / 2 };
    enum { NW = at_geo<DH, HI>::NW, RW = at_geo<DH, HI>::RW };
    extern __shared__ float smf[]; /* [NW][RW][SROW], m, l [NW][RW], partial */
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int gid = lane >> 2, tig = lane & 3;
    /* the grid's three dims: no division for the block's place but one */
    const int s = (int)blockIdx.x, qg = (int)blockIdx.y, bk = (int)blockIdx.z;
    const int b = bk / Hkv, kh = bk - b * Hkv;
    const int grp = Hq / Hkv, h0 = kh * grp + qg * G;
    const int Ga = grp - qg * G < G ? grp - qg * G : G;
    const int64_t row0 = (int64_t)b * Hq + h0;

    uint32_t qa[KW], qb[KW]; /* heads gid and gid + 8 */
    at_load<KW, 4, false>(qa, q + (row0 + gid) * DH, tig, gid < Ga);
    if (HI)
        at_load<KW, 4, false>(qb, q + (row0 + gid + 8) * DH, tig, gid + 8 < Ga);
    else
        for (int i = 0; i < KW; i++)
            qb[i] = 0u;

    const int64_t len64 = gg_gpu_index_at(lens, b);
    const int len = len64 < 0 ? 0 : len64 > S ? S : (int)len64;
    const int chunk = (int)(((unsigned)len + (unsigned)nsplit - 1u) / (unsigned)nsplit);
    const int j0 = s * chunk < len ? s * chunk : len;
    const int j1 = j0 + chunk < len ? j0 + chunk : len;

    const int64_t ld = kv.sp;
    const uint16_t *kb = k + (int64_t)b * kv.sb + (int64_t)kh * kv.sh,
                   *vb = v + (int64_t)b * kv.sb + (int64_t)kh * kv.sh;
    const uint16_t *kl = kb + gid * ld, *vl = vb + 2 * tig * ld;
    const int ntile = (j1 - j0 + 15) / 16;
    at_state<DH> st;
#pragma unroll
    for (int t = 0; t < DPL; t++)
        st.o[t][0] = st.o[t][1] = st.o[t][2] = st.o[t][3] = 0.0f;
    st.m0 = st.m1 = -INFINITY;
    st.l0 = st.l1 = 0.0f;
    if constexpr (RING == 3) {
        /* three tiles of registers in a ring: two in flight while the third
         * is computed, so a warp's loads never stop for its arithmetic (the
         * tiles past the chunk are not fetched) */
        at_tile_regs<DH> r0, r1, r2;
        int tl = wid;
        at_fetch<DH>(r0, kl, vl, ld, j0 + tl * 16, j1, gid, tig);
        if (tl + NW < ntile)
            at_fetch<DH>(r1, kl, vl, ld, j0 + (tl + NW) * 16, j1, gid, tig);
        for (; tl < ntile; tl += 3 * NW) {
            if (tl + 2 * NW < ntile)
                at_fetch<DH>(r2, kl, vl, ld, j0 + (tl + 2 * NW) * 16, j1, gid, tig);
            at_tile<DT, DH, HI>(st, r0, qa, qb, j0 + tl * 16, j1, tig, qs);
            if (tl + NW >= ntile)
                break;
            if (tl + 3 * NW < ntile)
                at_fetch<DH>(r0, kl, vl, ld, j0 + (tl + 3 * NW) * 16, j1, gid, tig);
            at_tile<DT, DH, HI>(st, r1, qa, qb, j0 + (tl + NW) * 16, j1, tig, qs);
            if (tl + 2 * NW >= ntile)
                break;
            if (tl + 4 * NW < ntile)
                at_fetch<DH>(r1, kl, vl, ld, j0 + (tl + 4 * NW) * 16, j1, gid, tig);
            at_tile<DT, DH, HI>(st, r2, qa, qb, j0 + (tl + 2 * NW) * 16, j1, tig, qs);
        }
    } else {
        /* one tile in registers (a second one spills at Dh 128: 255
         * registers; H100, batch 1, context 2048: 11.1 us against 9.5), and
         * the next tile's K: its loads wait for no arithmetic, and its V's
         * overlap the next tile's Q K^T */
        at_tile_regs<DH> r;
        uint32_t kn[2][KW];
        int tl = wid;
        at_fetch<DH>(r, kl, vl, ld, j0 + tl * 16, j1, gid, tig);
        if (tl + NW < ntile)
            at_fetch_k<DH>(kn, kl, ld, j0 + (tl + NW) * 16, j1, gid, tig);
        while (tl < ntile) {
            at_tile<DT, DH, HI>(st, r, qa, qb, j0 + tl * 16, j1, tig, qs);
            tl += NW;
            if (tl >= ntile)
                break;
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int i = 0; i < KW; i++)
                    r.kw[nt][i] = kn[nt][i];
            at_fetch_v<DH>(r, vl, ld, j0 + tl * 16, j1, gid, tig);
            if (tl + NW < ntile)
                at_fetch_k<DH>(kn, kl, ld, j0 + (tl + NW) * 16, j1, gid, tig);
        }
    }
    float(&o)[DPL][4] = st.o;
    float m0 = st.m0, m1 = st.m1, l0 = st.l0, l1 = st.l1;

    /* the block's warps: each wrote its rows, then one pass merges them */
    enum { SR = GG_AT_SROW(DH) };
    float *so = smf, *sm = smf + NW * RW * SR, *sl = sm + NW * RW;
    /* in a cluster the block's partial stays here: [G][DH], max [G], sum [G] */
    float *cp = sl + NW * RW;
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        l0 += gg_shfl_xor(l0, off);
        l1 += gg_shfl_xor(l1, off);
    }
#pragma unroll
    for (int t = 0; t < DPL; t++)
#pragma unroll
        for (int e = 0; e < (HI ? 4 : 2); e++) {
            const int row = e < 2 ? gid : gid + 8, d = at_vdim<DPL>(2 * tig + (e & 1), t);
            so[(wid * RW + row) * SR + d + d / 32] = o[t][e];
        }
    if (tig == 0) {
        sm[wid * RW + gid] = m0;
        sl[wid * RW + gid] = l0;
        if (HI) {
            sm[wid * RW + gid + 8] = m1;
            sl[wid * RW + gid + 8] = l1;
        }
    }
    __syncthreads();
    enum { W = GG_AT_W(DH) };
    for (int oi = tid; oi < Ga * DH; oi += NW * 32) {
        const int g = oi / DH, d = oi % DH;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; w++)
            M = fmaxf(M, sm[w * RW + g]);
        float O = 0.0f, L = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float mw = sm[w * RW + g];
            const float x = mw == -INFINITY ? 0.0f : exp2f(mw - M);
            O += so[(w * RW + g) * SR + d + d / 32] * x;
            L += sl[w * RW + g] * x;
        }
        if (nsplit == 1) {
            y[(row0 + g) * DH + d] = D::st(len > 0 ? O / L : 0.0f);
        } else if (ncl > 0) {
            cp[g * DH + d] = O;
            if (d == 0) {
                cp[G * DH + g] = M;
                cp[G * DH + G + g] = L;
            }
        } else {
            float *e = part + ((row0 + g) * nsplit + s) * W;
            e[d] = O;
            if (d == 0) {
                e[DH] = M;
                e[DH + 1] = L;
            }
        }
    }
    if (nsplit == 1)
        return;
    if (ncl == 0) {
        at_merge<DT, DH, NW>(part, cnt, (bk * (int)gridDim.y + qg), y, row0, Ga, nsplit, len);
        return;
    }
    /* the chunks merged through the cluster's shared memory: no partials in
     * global memory, no fence, no counter.  The cluster's threads share the
     * outputs, each reading every block's max, sum and its dim (block rank
     * = chunk s). */
    gg_cluster_sync();
    for (int oi = s * NW * 32 + tid; oi < Ga * DH; oi += ncl * NW * 32) {
        const int g = oi / DH, d = oi % DH;
        float mr[GG_AT_CLMAX], lr[GG_AT_CLMAX], orr[GG_AT_CLMAX], M = -INFINITY;
#pragma unroll
        for (int r = 0; r < GG_AT_CLMAX; r++) {
            mr[r] = -INFINITY, lr[r] = 0.0f, orr[r] = 0.0f;
            if (r < ncl) {
                mr[r] = gg_cluster_ld(cp + G * DH + g, (unsigned)r);
                lr[r] = gg_cluster_ld(cp + G * DH + G + g, (unsigned)r);
                orr[r] = gg_cluster_ld(cp + g * DH + d, (unsigned)r);
            }
        }
#pragma unroll
        for (int r = 0; r < GG_AT_CLMAX; r++)
            M = fmaxf(M, mr[r]);
        float O = 0.0f, L = 0.0f;
#pragma unroll
        for (int r = 0; r < GG_AT_CLMAX; r++) {
            const float w = mr[r] == -INFINITY ? 0.0f : exp2f(mr[r] - M);
            O += w * orr[r];
            L += w * lr[r];
        }
        y[(row0 + g) * DH + d] = D::st(len > 0 ? O / L : 0.0f);
    }
    /* no block leaves while another may still read its memory */
    gg_cluster_sync();
}

/* Dynamic shared memory of a k_attention_mma<., DH, ., HI> launch: the
 * block's sum, the warps' max and sum, the block's partial (clusters). */
template <int DH, bool HI> static size_t at_shm(int G)
{
    enum { NW = at_geo<DH, HI>::NW, RW = at_geo<DH, HI>::RW };
    return ((size_t)NW * RW * GG_AT_SROW(DH) + 2 * NW * RW + (size_t)G * (DH + 2)) *
           sizeof(float);
}

/* Blocks of k_attention_mma<DT, DH, RING, HI> a multiprocessor holds (2 when
 * the runtime does not say), asked once a context. */
template <int DT, int DH, int RING, bool HI>
static int at_per_sm(gg_gpu_ctx *c)
{
    int *slot = &c->attn_occ[DT == GG_DT_BF16][DH == 32 ? 0 : DH == 64 ? 1 : 2][HI];
    if (*slot == 0) {
        int n = 0;
        if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&n, k_attention_mma<DT, DH, RING, HI>,
                                                         at_geo<DH, HI>::NW * 32,
                                                         at_shm<DH, HI>(HI ? GG_AT_GMAX : 8)) !=
                hipSuccess ||
            n < 1) {
            (void)hipGetLastError();
            n = 2;
        }
        *slot = n;
    }
    return *slot;
}

/* ncl > 0: a cluster of ncl blocks, one a chunk (ns == ncl).  hipSuccess, or
 * the cluster launch's error (nothing launched). */
template <int DT, int DH, int RING, bool HI>
static hipError_t at_launch(gg_gpu_ctx *c, dim3 grid, const gg_tensor *in, const gg_tensor *out,
                            int Hq, int Hkv, int S, gg_gpu_kv kv, int G, int ns, float qs, int ncl)
{
    const uint16_t *qp = (const uint16_t *)in[0].data, *kp = (const uint16_t *)in[1].data,
                   *vp = (const uint16_t *)in[2].data;
    const gg_gpu_index lp = gg_gpu_index_of(&in[3]);
    uint16_t *yp = (uint16_t *)out[0].data;
    const size_t shm = at_shm<DH, HI>(G);
    const dim3 block(at_geo<DH, HI>::NW * 32);
    if (ncl > 0)
        return gg_hip_launch_cluster(k_attention_mma<DT, DH, RING, HI>, grid, block, shm,
                                     c->stream, (unsigned)ncl, qp, kp, vp, lp, yp, c->attn_part,
                                     c->attn_cnt, Hq, Hkv, S, kv, G, ns, qs, ncl);
    k_attention_mma<DT, DH, RING, HI><<<grid, block, shm, c->stream>>>(
        qp, kp, vp, lp, yp, c->attn_part, c->attn_cnt, Hq, Hkv, S, kv, G, ns, qs, 0);
    return hipSuccess;
}

/* Whether every tensor-core instantiation of DT carries the sm_90 cluster
 * code (gg_hip_func_ptx_arch says why a device check is not enough). */
template <int DT>
static bool at_cluster_code(void)
{
    return gg_hip_func_ptx_arch((const void *)k_attention_mma<DT, 32, 3, false>) >= 90 &&
           gg_hip_func_ptx_arch((const void *)k_attention_mma<DT, 32, 3, true>) >= 90 &&
           gg_hip_func_ptx_arch((const void *)k_attention_mma<DT, 64, 3, false>) >= 90 &&
           gg_hip_func_ptx_arch((const void *)k_attention_mma<DT, 64, 3, true>) >= 90 &&
           gg_hip_func_ptx_arch((const void *)k_attention_mma<DT, 128, 1, false>) >= 90 &&
           gg_hip_func_ptx_arch((const void *)k_attention_mma<DT, 128, 1, true>) >= 90;
}

void gg_gpu_attention_mma_init(gg_gpu_ctx *c)
{
    c->attn_cluster = GG_AT_CLMAX;
    int major = 0;
    if (!c->mma ||
        hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, c->device) !=
            hipSuccess ||
        major < 9 || !at_cluster_code<GG_DT_F16>() || !at_cluster_code<GG_DT_BF16>())
        c->attn_cluster = 0;
    (void)hipGetLastError();
}

/* 0 when launched, 1 when the shape or device is not the tensor-core
 * kernel's. */
template <int DT>
static int launch_mma(gg_gpu_ctx *c, const gg_tensor *in, const gg_tensor *out, int64_t rows,
                      int Hq, int Hkv, int64_t S, int Dh, float scale, gg_gpu_kv kv)
{
    if (!c->mma || c->attn_split_off || (Dh != 32 && Dh != 64 && Dh != 128))
        return 1;
    for (int i = 0; i < 3; i++)
        if (!gg_gpu_aligned16(in[i].data))
            return 1;
    const int grp = Hq / Hkv;
    const int G = grp < GG_AT_GMAX ? grp : GG_AT_GMAX;
    const int nqg = (grp + G - 1) / G;
    const int64_t groups = rows * Hkv * nqg;
    /* positions in 32 bits; the grid's y and z within 65535 */
    if (S > INT_MAX / 2 || rows * Hkv > 65535 || nqg > 65535 || groups > INT_MAX)
        return 1;
    /* the blocks a multiprocessor holds (registers), and chunks of at
     * least a tile a warp (H100, context 2048: chunks of 128 positions,
     * half the blocks, took 14.5 us against 11.2 with 64) */
#define GG_AT_OCC(dh, ring_hi, ring_lo)                                                    \
    (G > 8 ? at_per_sm<DT, dh, ring_hi, true>(c) : at_per_sm<DT, dh, ring_lo, false>(c))
    const int per_sm = Dh == 32 ? GG_AT_OCC(32, 3, 3)
                       : Dh == 64 ? GG_AT_OCC(64, 3, 3)
                                  : GG_AT_OCC(128, 1, 1);
#undef GG_AT_OCC
    const int nw = Dh == 128 ? (G > 8 ? (int)at_geo<128, true>::NW : (int)at_geo<128, false>::NW)
                             : GG_AT_WARPS;
    const int ns = gg_gpu_attention_pick(c, rows, Hq, S, GG_AT_W(Dh), groups, per_sm, 16 * nw,
                                         GG_AT_MERGE_CH(Dh));
    /* the chunks of a group as one cluster that merges through shared
     * memory, where the pick wants at most GG_AT_CLMAX chunks (batch 16
     * at context 2048, Dh 64: 2; batch 1 at context 512: 8): a cluster of
     * exactly that many blocks (any count up to 8, not only powers of
     * two).  H100: a cluster that held fewer, longer chunks than the
     * pick (batch 1, context 2048, Dh 64: 8 of 256 positions) took 7.0
     * us against 6.9 for the pick's 32 merged through global memory;
     * clusters of 16 pack two blocks a multiprocessor on half of them
     * (Dh 128: 9.4 us against 9.0) */
    int ncl = c->attn_cluster >= 2 && ns > 1 && ns <= c->attn_cluster ? ns : 0;
    const float qs = scale * 1.44269504088896341f; /* log2(e) */
    for (;;) {
        const int n = ncl > 0 ? ncl : ns;
        const dim3 grid((unsigned)n, (unsigned)nqg, (unsigned)(rows * Hkv));
        hipError_t e;
#define GG_AT_GO(dh, ring_hi, ring_lo)                                                     \
    e = G > 8                                                                              \
            ? at_launch<DT, dh, ring_hi, true>(c, grid, in, out, Hq, Hkv, (int)S, kv, G, n, qs,  \
                                               ncl)                                        \
            : at_launch<DT, dh, ring_lo, false>(c, grid, in, out, Hq, Hkv, (int)S, kv, G, n, qs, \
                                                ncl)
        if (Dh == 32)
            GG_AT_GO(32, 3, 3);
        else if (Dh == 64)
            GG_AT_GO(64, 3, 3);
        else
            GG_AT_GO(128, 1, 1);
#undef GG_AT_GO
        if (e == hipSuccess || ncl == 0)
            return 0;
        /* the cluster launch was refused (a device or share that cannot
         * place the cluster): the plain one, now and from now on, so a
         * warm-up's refusal keeps a later capture from failing the same
         * launch */
        (void)hipGetLastError();
        c->attn_cluster = 0;
        ncl = 0;
    }
}

int gg_gpu_attention_mma_launch(gg_gpu_ctx *c, gg_dtype dtype, const gg_tensor *in,
                                const gg_tensor *out, int64_t rows, int Hq, int Hkv, int64_t S,
                                int Dh, float scale, gg_gpu_kv kv)
{
    switch (dtype) {
    case GG_DT_F16:
        return launch_mma<GG_DT_F16>(c, in, out, rows, Hq, Hkv, S, Dh, scale, kv);
    case GG_DT_BF16:
        return launch_mma<GG_DT_BF16>(c, in, out, rows, Hq, Hkv, S, Dh, scale, kv);
    default:
        return 1;
    }
}
