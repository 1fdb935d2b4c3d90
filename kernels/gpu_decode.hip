/* SPDX-License-Identifier: MIT */
/* The decode-step ops of the table (ops.h: embedding, rope, cache_write,
 * attention_decode, argmax, cast) for gpu_ops.hip's dispatch, which has
 * checked the operand counts.  One source for both vendors, under the rules
 * gpu_ops.hip states.  attention_decode goes to gpu_attention.hip's split
 * kernels where the shape allows; the one-block-per-head kernel here takes
 * the rest. */
#include "gpu_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

/* ---- decode-step ops --------------------------------------------------------------
 * Every index read at run time (ids, positions, lens, the batch word) is
 * bounds-checked before it addresses memory. */

/* The row copies (embedding, cache_write) move 16-byte units where the row
 * length and both pointers allow it: one scalar 2-byte access per thread left
 * embedding at ~60% of the copy rate past L2. */
template <int DT, bool VEC, typename ID>
__global__ void __launch_bounds__(256)
    k_embedding(const ID *ids, const typename dt<DT>::T *tab, typename dt<DT>::T *y,
                int64_t rows, int64_t V, int64_t D)
{
    typedef unit<DT, VEC> U;
    typedef typename U::raw R;
    const int64_t nu = D / U::N;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t id = ids[r];
        const bool ok = id >= 0 && id < V;
        const R *src = (const R *)(tab + (ok ? id : 0) * D);
        R *dst = (R *)(y + r * D);
        for (int64_t i = threadIdx.x; i < nu; i += blockDim.x)
            dst[i] = ok ? src[i] : R{};
    }
}

/* The inverse frequency of pair i: the inv_freq operand's (any floating
 * dtype: HF keeps the model's in the model's dtype) or theta's. */
static __device__ __forceinline__ float rope_inv(const void *inv, int inv_dt, float theta, int i,
                                                 int rd)
{
    if (!inv)
        return 1.0f / powf(theta, (float)(2 * i) / (float)rd);
    if (inv_dt == GG_DT_F16)
        return dt<GG_DT_F16>::ld(((const typename dt<GG_DT_F16>::T *)inv)[i]);
    if (inv_dt == GG_DT_BF16)
        return dt<GG_DT_BF16>::ld(((const typename dt<GG_DT_BF16>::T *)inv)[i]);
    return ((const float *)inv)[i];
}

/* rope: one block per row; the row's cos/sin per pair are computed once into
 * shared memory (not once per head), then every head's pairs are rotated,
 * 16-byte units at a time where the layout allows (VEC: Dh and the rotated
 * span multiples of the unit, pointers aligned). */
template <int DT, bool VEC>
__global__ void __launch_bounds__(256)
    k_rope(const typename dt<DT>::T *x, gg_gpu_index pos, const void *inv, int inv_dt,
           typename dt<DT>::T *y, int64_t rows, int H, int Dh, int rd, float theta, float amp,
           int gptj)
{
    typedef dt<DT> D;
    typedef unit<DT, VEC> U;
    enum { N = U::N };
    extern __shared__ float cs[]; /* [half] cos, then [half] sin */
    const int half = rd / 2;
    for (int64_t b = blockIdx.x; b < rows; b += gridDim.x) {
        __syncthreads(); /* the previous row's table is no longer read */
        const float p = (float)gg_gpu_index_at(pos, b);
        for (int i = threadIdx.x; i < half; i += blockDim.x) {
            const float ang = p * rope_inv(inv, inv_dt, theta, i, rd);
            cs[i] = cosf(ang) * amp;
            cs[half + i] = sinf(ang) * amp;
        }
        __syncthreads();
        const typename D::T *xb = x + b * H * Dh;
        typename D::T *yb = y + b * H * Dh;
        /* rotated units: neox pairs unit u of the first half with unit u of
         * the second; gptj holds N/2 adjacent pairs in a unit */
        const int ru = gptj ? (VEC ? rd / N : half) : half / N, du = Dh / N;
        for (int w = threadIdx.x; w < H * ru; w += blockDim.x) {
            const int h = w / ru, u = w % ru;
            const typename D::T *xh = xb + (int64_t)h * Dh;
            typename D::T *yh = yb + (int64_t)h * Dh;
            if (gptj && !VEC) { /* unit u: the pair (2u, 2u + 1) */
                const float a0 = D::ld(xh[2 * u]), a1 = D::ld(xh[2 * u + 1]);
                const float c = cs[u], sn = cs[half + u];
                yh[2 * u] = D::st(a0 * c - a1 * sn);
                yh[2 * u + 1] = D::st(a1 * c + a0 * sn);
            } else if (gptj) {
                if constexpr (N >= 2) {
                    float v[N], o[N];
                    U::load(xh, u, v);
#pragma unroll
                    for (int k = 0; k < N; k += 2) {
                        const int i = (u * N + k) / 2;
                        const float c = cs[i], sn = cs[half + i];
                        o[k] = v[k] * c - v[k + 1] * sn;
                        o[k + 1] = v[k + 1] * c + v[k] * sn;
                    }
                    U::store(yh, u, o);
                }
            } else {
                float va[N], vb[N], oa[N], ob[N];
                U::load(xh, u, va);
                U::load(xh + half, u, vb);
#pragma unroll
                for (int k = 0; k < N; k++) {
                    const int i = u * N + k;
                    const float c = cs[i], sn = cs[half + i];
                    oa[k] = va[k] * c - vb[k] * sn;
                    ob[k] = vb[k] * c + va[k] * sn;
                }
                U::store(yh, u, oa);
                U::store(yh + half, u, ob);
            }
        }
        if (x != y) { /* dims past rotary_dim pass through */
            const int pu = du - rd / N;
            for (int w = threadIdx.x; w < H * pu; w += blockDim.x) {
                const int h = w / pu, u = rd / N + w % pu;
                ((typename U::raw *)(yb + (int64_t)h * Dh))[u] =
                    ((const typename U::raw *)(xb + (int64_t)h * Dh))[u];
            }
        }
    }
}

/* cache_write: one block per row; bshd writes the row's Hkv * Dh values as
 * one run at its position, bhsd (HF's StaticCache) one run of Dh a kv head
 * (rows of `run` elements `hs` apart in the cache). */
template <int DT, bool VEC>
__global__ void __launch_bounds__(256)
    k_cache_write(const typename dt<DT>::T *x, gg_gpu_index pos, const int32_t *batch,
                  typename dt<DT>::T *cache, int64_t rows, int64_t S, int64_t row, int64_t run,
                  int64_t hs, int64_t ps)
{
    typedef unit<DT, VEC> U;
    typedef typename U::raw R;
    int64_t n = rows;
    if (batch) {
        const int64_t b = *batch;
        n = b < 0 ? 0 : b > rows ? rows : b;
    }
    const int64_t nu = row / U::N, ru = run / U::N;
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const int64_t p = gg_gpu_index_at(pos, r);
        if (p < 0 || p >= S)
            continue;
        const R *src = (const R *)(x + r * row);
        typename dt<DT>::T *dst = cache + r * S * row + p * ps;
        for (int64_t i = threadIdx.x; i < nu; i += blockDim.x) {
            const int64_t h = i / ru;
            ((R *)(dst + h * hs))[i - h * ru] = src[i];
        }
    }
}

#define GG_ATTN_MAXL 8 /* Dh up to 8 * warp size */

/* One block per (row, query head): the block's warps take the cache
 * positions in turn, each with an online softmax, then merge. */
template <int DT>
__global__ void k_attention(const typename dt<DT>::T *q, const typename dt<DT>::T *k,
                            const typename dt<DT>::T *v, gg_gpu_index lens,
                            typename dt<DT>::T *y, int64_t rows, int Hq, int Hkv, int64_t S,
                            gg_gpu_kv kv, int Dh, float scale)
{
    typedef dt<DT> D;
    extern __shared__ float sm[];
    const int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize, grp = Hq / Hkv;
    for (int64_t bh = blockIdx.x; bh < rows * Hq; bh += gridDim.x) {
        const int64_t b = bh / Hq;
        const int h = (int)(bh % Hq), kh = h / grp;
        int64_t len = gg_gpu_index_at(lens, b);
        len = len < 0 ? 0 : len > S ? S : len;
        float qf[GG_ATTN_MAXL], acc[GG_ATTN_MAXL];
#pragma unroll
        for (int i = 0; i < GG_ATTN_MAXL; i++) {
            const int d = lane + i * warpSize;
            qf[i] = d < Dh ? D::ld(q[bh * Dh + d]) : 0.0f;
            acc[i] = 0.0f;
        }
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = wid; j < len; j += nw) {
            const int64_t o = b * kv.sb + kh * kv.sh + j * kv.sp;
            float part = 0.0f;
#pragma unroll
            for (int i = 0; i < GG_ATTN_MAXL; i++) {
                const int d = lane + i * warpSize;
                if (d < Dh)
                    part += qf[i] * D::ld(k[o + d]);
            }
            const float sc = gg_warp_sum(part) * scale;
            const float mn = fmaxf(m, sc);
            const float corr = expf(m - mn), pj = expf(sc - mn);
            l = l * corr + pj;
#pragma unroll
            for (int i = 0; i < GG_ATTN_MAXL; i++) {
                const int d = lane + i * warpSize;
                if (d < Dh)
                    acc[i] = acc[i] * corr + pj * D::ld(v[o + d]);
            }
            m = mn;
        }
        float *mine = sm + wid * (Dh + 2);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < GG_ATTN_MAXL; i++) {
            const int d = lane + i * warpSize;
            if (d < Dh)
                mine[d] = acc[i];
        }
        if (lane == 0) {
            mine[Dh] = m;
            mine[Dh + 1] = l;
        }
        __syncthreads();
        float M = -INFINITY;
        for (int w = 0; w < nw; w++)
            M = fmaxf(M, sm[w * (Dh + 2) + Dh]);
        float L = 0.0f;
        for (int w = 0; w < nw; w++) {
            const float mw = sm[w * (Dh + 2) + Dh];
            L += mw == -INFINITY ? 0.0f : sm[w * (Dh + 2) + Dh + 1] * expf(mw - M);
        }
        for (int d = threadIdx.x; d < Dh; d += blockDim.x) {
            float o = 0.0f;
            for (int w = 0; w < nw; w++) {
                const float mw = sm[w * (Dh + 2) + Dh];
                if (mw != -INFINITY)
                    o += sm[w * (Dh + 2) + d] * expf(mw - M);
            }
            y[bh * Dh + d] = D::st(len > 0 ? o / L : 0.0f);
        }
    }
}

/* (v, i) beats (bv, bi): NaN is the largest value, ties go to the lower index. */
static __device__ __forceinline__ bool amax_better(float v, int i, float bv, int bi)
{
    const bool vn = v != v, bn = bv != bv;
    if (vn != bn)
        return vn;
    if (!vn && v != bv)
        return v > bv;
    return i < bi;
}

/* One block per row: 16-byte loads where the row allows, each thread's best
 * (value, index), then shuffles and one value per warp in shared memory. */
template <int DT, bool VEC>
__global__ void __launch_bounds__(256)
    k_argmax(const typename dt<DT>::T *x, int32_t *y, int64_t rows, int cols)
{
    typedef unit<DT, VEC> U;
    enum { N = U::N };
    __shared__ float sv[64];
    __shared__ int si[64];
    const int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    const int nw = blockDim.x / warpSize, nu = cols / N;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const typename dt<DT>::T *xr = x + r * cols;
        float bv = -INFINITY;
        int bi = INT_MAX;
#pragma unroll 4
        for (int u = threadIdx.x; u < nu; u += blockDim.x) {
            float f[N];
            U::load(xr, u, f);
#pragma unroll
            for (int k = 0; k < N; k++)
                if (amax_better(f[k], u * N + k, bv, bi)) {
                    bv = f[k];
                    bi = u * N + k;
                }
        }
        for (int i = nu * N + threadIdx.x; i < cols; i += blockDim.x) {
            const float v = dt<DT>::ld(xr[i]);
            if (amax_better(v, i, bv, bi)) {
                bv = v;
                bi = i;
            }
        }
        for (int off = warpSize / 2; off > 0; off >>= 1) {
            const float ov = gg_shfl_xor(bv, off);
            const int oi = __float_as_int(gg_shfl_xor(__int_as_float(bi), off));
            if (amax_better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        __syncthreads(); /* the previous row's values are read */
        if (lane == 0) {
            sv[wid] = bv;
            si[wid] = bi;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < nw; w++)
                if (amax_better(sv[w], si[w], bv, bi)) {
                    bv = sv[w];
                    bi = si[w];
                }
            y[r] = bi == INT_MAX ? 0 : bi;
        }
    }
}

/* 8 elements a thread-step: 16 bytes of f16/bf16, 32 of f32, each side */
template <int DI, int DO, bool VEC>
__global__ void __launch_bounds__(256)
    k_cast(const typename dt<DI>::T *x, typename dt<DO>::T *y, int64_t n)
{
    typedef vec_t<typename dt<DI>::T, 8> VI;
    typedef vec_t<typename dt<DO>::T, 8> VO;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t done = 0;
    if (VEC) {
        const int64_t nv = n / 8;
        for (int64_t i = tid; i < nv; i += stride) {
            const VI a = ((const VI *)x)[i];
            VO o;
#pragma unroll
            for (int k = 0; k < 8; k++)
                o.v[k] = dt<DO>::st(dt<DI>::ld(a.v[k]));
            ((VO *)y)[i] = o;
        }
        done = nv * 8;
    }
    for (int64_t i = done + tid; i < n; i += stride)
        y[i] = dt<DO>::st(dt<DI>::ld(x[i]));
}

template <int DI, int DO>
static void launch_cast_pair(gg_gpu_ctx *c, const void *x, void *y, int64_t n)
{
    typedef typename dt<DI>::T TI;
    typedef typename dt<DO>::T TO;
    if (gg_gpu_aligned16(x) && gg_gpu_aligned16(y) && n >= 8)
        k_cast<DI, DO, true><<<gg_gpu_grid_for(n / 8, 256, 1 << 20), 256, 0, c->stream>>>(
            (const TI *)x, (TO *)y, n);
    else
        k_cast<DI, DO, false><<<gg_gpu_grid_for(n, 256, (int64_t)c->sms * 16), 256, 0,
                                c->stream>>>((const TI *)x, (TO *)y, n);
}

template <int DI>
static int launch_cast_to(gg_gpu_ctx *c, const void *x, void *y, gg_dtype to, int64_t n)
{
    switch (to) {
    case GG_DT_F32:
        launch_cast_pair<DI, GG_DT_F32>(c, x, y, n);
        return 0;
    case GG_DT_F16:
        launch_cast_pair<DI, GG_DT_F16>(c, x, y, n);
        return 0;
    case GG_DT_BF16:
        launch_cast_pair<DI, GG_DT_BF16>(c, x, y, n);
        return 0;
    default:
        return -EINVAL;
    }
}

/* Threads for a row of nu units: a multiple of 64 up to 256. */
static int unit_threads(int64_t nu)
{
    return nu >= 256 ? 256 : nu <= 64 ? 64 : (int)((nu + 63) / 64 * 64);
}

static unsigned grid_rows(int64_t rows)
{
    return (unsigned)(rows < (1 << 20) ? (rows < 1 ? 1 : rows) : (1 << 20));
}

template <int DT, typename ID>
static void launch_embedding(gg_gpu_ctx *c, const gg_tensor *in, const gg_tensor *out,
                             int64_t rows, int64_t V, int64_t D)
{
    typedef typename dt<DT>::T T;
    if (D % dt<DT>::VEC == 0 && gg_gpu_aligned16(in[1].data) && gg_gpu_aligned16(out[0].data))
        k_embedding<DT, true, ID><<<grid_rows(rows), unit_threads(D / dt<DT>::VEC), 0,
                                    c->stream>>>((const ID *)in[0].data, (const T *)in[1].data,
                                                 (T *)out[0].data, rows, V, D);
    else
        k_embedding<DT, false, ID><<<grid_rows(rows), unit_threads(D), 0, c->stream>>>(
            (const ID *)in[0].data, (const T *)in[1].data, (T *)out[0].data, rows, V, D);
}

/* A positions/lens operand: one a row of x, or one for every row. */
static bool index_fits(const gg_tensor *t, const gg_tensor_desc *xd)
{
    const int64_t n = gg_desc_numel(&t->desc);
    return n == xd->dims[0] || n == 1;
}

template <int DT>
static int launch_decode_dt(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                            int nin, const gg_tensor *out, const gg_op_attrs *attrs)
{
    typedef typename dt<DT>::T T;
    const gg_tensor_desc *xd = &in[0].desc, *yd = &out[0].desc;
    switch (kind) {
    case GG_OP_EMBEDDING: {
        /* ids (i32 or i64) of any shape: a row of y for each */
        const gg_tensor_desc *td = &in[1].desc;
        const int64_t rows = gg_desc_numel(xd), D = td->dims[1];
        if (td->ndim != 2 || yd->ndim != xd->ndim + 1 || yd->dims[xd->ndim] != D ||
            gg_desc_numel(yd) != rows * D)
            return gg_gpu_fail(-EINVAL, "%s: operand shapes do not fit", op->name);
        if (xd->dtype == GG_DT_I64)
            launch_embedding<DT, int64_t>(c, in, out, rows, td->dims[0], D);
        else
            launch_embedding<DT, int32_t>(c, in, out, rows, td->dims[0], D);
        return gg_gpu_launched(op);
    }
    case GG_OP_ROPE: {
        if (xd->ndim != 3 || gg_desc_numel(yd) != gg_desc_numel(xd) || !index_fits(&in[1], xd) ||
            xd->dims[2] > INT_MAX || xd->dims[1] > INT_MAX)
            return gg_gpu_fail(-EINVAL, "%s: operand shapes do not fit", op->name);
        const int dh = (int)xd->dims[2];
        const double rdv = attrs ? attrs->v[2] : 0.0;
        const int rd = rdv > 0 ? (int)rdv : dh;
        if (rd > dh || (rd & 1))
            return gg_gpu_fail(-EINVAL, "%s: rotary_dim %d does not fit Dh %d", op->name, rd, dh);
        const void *inv = nin > 2 ? in[2].data : NULL;
        if (inv && (!gg_dtype_is_float(in[2].desc.dtype) || gg_desc_numel(&in[2].desc) != rd / 2))
            return gg_gpu_fail(-EINVAL, "%s: inv_freq must be floating [rotary_dim / 2]", op->name);
        const int inv_dt = inv ? (int)in[2].desc.dtype : 0;
        const float theta = (float)(attrs ? attrs->v[0] : 10000.0);
        const float amp = (float)(attrs ? attrs->v[3] : 1.0);
        const int gptj = attrs && attrs->v[1] == 1.0;
        const int V = dt<DT>::VEC, H = (int)xd->dims[1];
        const bool vec = dh % V == 0 && (gptj ? rd % V == 0 : (rd / 2) % V == 0) &&
                         gg_gpu_aligned16(in[0].data) && gg_gpu_aligned16(out[0].data);
        const int64_t work = (int64_t)H * (vec ? dh / V : dh);
        const size_t shm = sizeof(float) * (size_t)rd;
        if (vec)
            k_rope<DT, true><<<grid_rows(xd->dims[0]), unit_threads(work), shm, c->stream>>>(
                (const T *)in[0].data, gg_gpu_index_of(&in[1]), inv, inv_dt, (T *)out[0].data,
                xd->dims[0], H, dh, rd, theta, amp, gptj);
        else
            k_rope<DT, false><<<grid_rows(xd->dims[0]), unit_threads(work), shm, c->stream>>>(
                (const T *)in[0].data, gg_gpu_index_of(&in[1]), inv, inv_dt, (T *)out[0].data,
                xd->dims[0], H, dh, rd, theta, amp, gptj);
        return gg_gpu_launched(op);
    }
    case GG_OP_CACHE_WRITE: {
        const int bhsd = attrs && attrs->v[0] == 1.0;
        const int si = bhsd ? 2 : 1, hi = bhsd ? 1 : 2;
        if (xd->ndim != 3 || yd->ndim != 4 || yd->dims[0] != xd->dims[0] ||
            yd->dims[hi] != xd->dims[1] || yd->dims[3] != xd->dims[2] || !index_fits(&in[1], xd) ||
            (nin == 3 && (in[2].desc.dtype != GG_DT_I32 || gg_desc_numel(&in[2].desc) < 1)))
            return gg_gpu_fail(-EINVAL, "%s: operand shapes do not fit", op->name);
        const int64_t row = xd->dims[1] * xd->dims[2], S = yd->dims[si], dh = xd->dims[2];
        /* bshd: the row is one run at its position; bhsd: a run of Dh a kv head */
        const int64_t run = bhsd ? dh : row, hs = bhsd ? S * dh : row, ps = bhsd ? dh : row;
        const int32_t *bw = nin == 3 ? (const int32_t *)in[2].data : NULL;
        if (run % dt<DT>::VEC == 0 && gg_gpu_aligned16(in[0].data) &&
            gg_gpu_aligned16(out[0].data))
            k_cache_write<DT, true><<<grid_rows(xd->dims[0]), unit_threads(row / dt<DT>::VEC), 0,
                                      c->stream>>>((const T *)in[0].data, gg_gpu_index_of(&in[1]),
                                                   bw, (T *)out[0].data, xd->dims[0], S, row, run,
                                                   hs, ps);
        else
            k_cache_write<DT, false><<<grid_rows(xd->dims[0]), unit_threads(row), 0, c->stream>>>(
                (const T *)in[0].data, gg_gpu_index_of(&in[1]), bw, (T *)out[0].data,
                xd->dims[0], S, row, run, hs, ps);
        return gg_gpu_launched(op);
    }
    case GG_OP_ATTENTION_DECODE: {
        const gg_tensor_desc *kd = &in[1].desc;
        const int bhsd = attrs && attrs->v[1] == 1.0;
        const int64_t S = kd->dims[bhsd ? 2 : 1], Hkv = kd->dims[bhsd ? 1 : 2];
        if (xd->ndim != 3 || kd->ndim != 4 || kd->dims[0] != xd->dims[0] ||
            kd->dims[3] != xd->dims[2] || xd->dims[1] % Hkv != 0 ||
            gg_desc_numel(&in[2].desc) != gg_desc_numel(kd) || !index_fits(&in[3], xd) ||
            gg_desc_numel(yd) != gg_desc_numel(xd))
            return gg_gpu_fail(-EINVAL, "%s: operand shapes do not fit", op->name);
        const int dh = (int)xd->dims[2];
        if (dh > GG_ATTN_MAXL * c->warp)
            return gg_gpu_fail(-ENOTSUP, "%s: head dim %d is above %d", op->name, dh,
                               GG_ATTN_MAXL * c->warp);
        const double sv = attrs ? attrs->v[0] : 0.0;
        const float scale = sv != 0.0 ? (float)sv : 1.0f / sqrtf((float)dh);
        /* split along S (gpu_attention.hip) where the shape allows, else one
         * block per (row, head) */
        const gg_gpu_kv kv = gg_gpu_kv_of(bhsd, S, Hkv, dh);
        if (xd->dims[1] <= INT_MAX && Hkv <= INT_MAX &&
            gg_gpu_attention_split_launch(c, (gg_dtype)DT, in, out, xd->dims[0],
                                          (int)xd->dims[1], (int)Hkv, S, dh, scale, kv) == 0)
            return gg_gpu_launched(op);
        const int threads = 256, nw = threads / c->warp;
        const size_t shm = sizeof(float) * (size_t)nw * (size_t)(dh + 2);
        k_attention<DT><<<grid_rows(xd->dims[0] * xd->dims[1]), threads, shm, c->stream>>>(
            (const T *)in[0].data, (const T *)in[1].data, (const T *)in[2].data,
            gg_gpu_index_of(&in[3]), (T *)out[0].data, xd->dims[0], (int)xd->dims[1], (int)Hkv, S,
            kv, dh, scale);
        return gg_gpu_launched(op);
    }
    case GG_OP_ARGMAX: {
        const int64_t cols = xd->dims[xd->ndim - 1], rows = gg_desc_numel(xd) / cols;
        if (out[0].desc.dtype != GG_DT_I32 || gg_desc_numel(yd) != rows)
            return gg_gpu_fail(-EINVAL, "%s: y must be i32 with one element per row", op->name);
        if (cols > INT_MAX)
            return gg_gpu_fail(-EINVAL, "%s: rows of %lld values do not fit an i32 index",
                               op->name, (long long)cols);
        if (cols % dt<DT>::VEC == 0 && gg_gpu_aligned16(in[0].data))
            k_argmax<DT, true><<<grid_rows(rows), 256, 0, c->stream>>>(
                (const T *)in[0].data, (int32_t *)out[0].data, rows, (int)cols);
        else
            k_argmax<DT, false><<<grid_rows(rows), 256, 0, c->stream>>>(
                (const T *)in[0].data, (int32_t *)out[0].data, rows, (int)cols);
        return gg_gpu_launched(op);
    }
    case GG_OP_CAST: {
        const int64_t n = gg_desc_numel(xd);
        if (gg_desc_numel(yd) != n || launch_cast_to<DT>(c, in[0].data, out[0].data, yd->dtype, n))
            return gg_gpu_fail(-EINVAL, "%s: y must be a floating tensor of x's size", op->name);
        return gg_gpu_launched(op);
    }
    }
    return gg_gpu_fail(-ENOTSUP, "%s: no GPU kernel", op->name);
}

int gg_gpu_decode_launch(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                         int nin, const gg_tensor *out, const gg_op_attrs *attrs)
{
    const int nout = 1;
    for (int i = 0; i < nin + nout; i++) {
        const gg_tensor *t = i < nin ? &in[i] : &out[i - nin];
        if (!t->data || gg_desc_numel(&t->desc) < 1)
            return gg_gpu_fail(-EINVAL, "%s: operand %d is empty or has no data", op->name, i);
    }
    /* the floating operand that fixes the kernel's type; the i32 ones must be i32 */
    const gg_tensor *f = kind == GG_OP_EMBEDDING ? &in[1] : &in[0];
    const gg_dtype dtype = f->desc.dtype;
    /* which operands are i32 (inputs..., output): 1 i32 (or i64: an index),
     * 0 the kernel's floating dtype, 2 any floating dtype, -1 none */
    static const signed char i32_embedding[5] = {1, 0, -1, -1, 0},
                             i32_rope[5] = {0, 1, 2, -1, 0},
                             i32_cache_write[5] = {0, 1, 1, -1, 0},
                             i32_attention[5] = {0, 0, 0, 1, 0},
                             i32_argmax[5] = {0, -1, -1, -1, 1},
                             i32_cast[5] = {0, -1, -1, -1, 0};
    const signed char *want;
    switch (kind) {
    case GG_OP_EMBEDDING: want = i32_embedding; break;
    case GG_OP_ROPE: want = i32_rope; break;
    case GG_OP_CACHE_WRITE: want = i32_cache_write; break;
    case GG_OP_ATTENTION_DECODE: want = i32_attention; break;
    case GG_OP_ARGMAX: want = i32_argmax; break;
    case GG_OP_CAST: want = i32_cast; break;
    default: return gg_gpu_fail(-ENOTSUP, "%s: no GPU kernel", op->name);
    }
    for (int i = 0; i < nin + nout; i++) {
        const gg_tensor *t = i < nin ? &in[i] : &out[0];
        const int w = i < nin ? want[i] : want[4];
        /* ids, positions and lens may be i64 as well; the batch word is i32 */
        const bool wide = t->desc.dtype == GG_DT_I64 &&
                          !(kind == GG_OP_CACHE_WRITE && i == 2);
        if (w == 1   ? t->desc.dtype != GG_DT_I32 && !wide
            : w == 2 ? !gg_dtype_is_float(t->desc.dtype)
                     : (kind == GG_OP_CAST ? !gg_dtype_is_float(t->desc.dtype) : t->desc.dtype != dtype))
            return gg_gpu_fail(-EINVAL, "%s: operand %d has dtype %s", op->name, i,
                               gg_dtype_name(t->desc.dtype));
    }
    switch (dtype) {
    case GG_DT_F32:
        return launch_decode_dt<GG_DT_F32>(c, op, kind, in, nin, out, attrs);
    case GG_DT_F16:
        return launch_decode_dt<GG_DT_F16>(c, op, kind, in, nin, out, attrs);
    case GG_DT_BF16:
        return launch_decode_dt<GG_DT_BF16>(c, op, kind, in, nin, out, attrs);
    default:
        return gg_gpu_fail(-EINVAL, "%s: unsupported dtype %s", op->name, gg_dtype_name(dtype));
    }
}
