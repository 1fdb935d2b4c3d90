/* SPDX-License-Identifier: MIT */
/* The attention family on the GPU (ops_attention.c has the rule and the CPU
 * reference): sdpa.  One block a query row (b, h, l), looping over the keys
 * in tiles of SD_TILE with an online softmax in f32:
 *   1. each warp takes keys of the tile, its lanes split D, a shuffle sum:
 *      the scores (scale, then the additive mask) into shared memory; a key
 *      the causal limit or a bool mask removes scores -inf;
 *   2. every thread reads the tile's maximum from shared memory (NaN wins:
 *      a NaN score makes the row NaN, as the reference);
 *   3. one thread a key turns its score into exp(score - max) (round_p: the
 *      copy that weighs v rounded to the dtype, the running max the one up
 *      to this tile, as PyTorch's fused kernels have it; the sum is not);
 *   4. each thread rescales and adds its own output dims (D split across the
 *      block, so the reads of v are coalesced).
 * A row whose maximum stays -inf (no key left) writes zeros.  q's row is
 * converted to f32 once, in shared memory.  Launches only, under the rules
 * gpu_ops.hip states. */
#include "gpu_internal.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>

enum { SD_THREADS = 128, SD_TILE = 64 };

/* mask kinds */
enum { SD_NONE = 0, SD_BOOL, SD_ADD };

struct sd_shape {
    int64_t B, Hq, L, D, Hkv, S;
    int64_t ms[4];   /* the mask's strides over [B, Hq, L, S] (0: broadcast) */
    float scale;
    int causal;
    int round_p;     /* the weights rounded to the dtype before they weigh v */
};

static __device__ __forceinline__ float sd_max(float a, float b)
{
    return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
}

template <int DT, int MK, int DPT>
__global__ void __launch_bounds__(SD_THREADS)
    k_sdpa(const typename dt<DT>::T *q, const typename dt<DT>::T *k, const typename dt<DT>::T *v,
           const void *mask, typename dt<DT>::T *y, sd_shape sh)
{
    typedef dt<DT> D;
    extern __shared__ float qs[]; /* [D] */
    __shared__ float ps[SD_TILE];
    __shared__ float pv[SD_TILE]; /* the weights as they weigh v (round_p) */
    const int tid = threadIdx.x, lane = tid % warpSize, warp = tid / warpSize;
    const int nw = SD_THREADS / warpSize;
    const int64_t rows = sh.B * sh.Hq * sh.L, Dd = sh.D, grp = sh.Hq / sh.Hkv;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t l = row % sh.L, bh = row / sh.L, h = bh % sh.Hq, b = bh / sh.Hq;
        const typename D::T *qr = q + row * Dd;
        const typename D::T *kr = k + (b * sh.Hkv + h / grp) * sh.S * Dd;
        const typename D::T *vr = v + (b * sh.Hkv + h / grp) * sh.S * Dd;
        __syncthreads(); /* the previous row's qs and ps are no longer read */
        for (int64_t d = tid; d < Dd; d += SD_THREADS)
            qs[d] = D::ld(qr[d]);
        __syncthreads();
        int64_t jend = sh.S;
        if (sh.causal && l + sh.S - sh.L + 1 < jend)
            jend = l + sh.S - sh.L + 1;
        const int64_t mrow = b * sh.ms[0] + h * sh.ms[1] + l * sh.ms[2];
        float m = -INFINITY, lsum = 0.0f, acc[DPT];
#pragma unroll
        for (int i = 0; i < DPT; i++)
            acc[i] = 0.0f;
        for (int64_t t0 = 0; t0 < jend; t0 += SD_TILE) {
            /* 1. scores */
            for (int jj = warp; jj < SD_TILE; jj += nw) {
                const int64_t j = t0 + jj;
                float s = -INFINITY;
                bool on = j < jend;
                if (on && MK == SD_BOOL)
                    on = ((const uint8_t *)mask)[mrow + j * sh.ms[3]] != 0;
                if (on) {
                    float dot = 0.0f;
                    for (int64_t d = lane; d < Dd; d += warpSize)
                        dot += qs[d] * D::ld(kr[j * Dd + d]);
                    s = gg_warp_sum(dot) * sh.scale;
                    if (MK == SD_ADD)
                        s += D::ld(((const typename D::T *)mask)[mrow + j * sh.ms[3]]);
                }
                if (lane == 0)
                    ps[jj] = s;
            }
            __syncthreads();
            /* 2. the tile's maximum, the same in every thread */
            float tmax = -INFINITY;
            for (int jj = 0; jj < SD_TILE; jj++)
                tmax = sd_max(tmax, ps[jj]);
            const float mnew = sd_max(m, tmax);
            __syncthreads(); /* every thread has read the scores */
            if (mnew == -INFINITY)
                continue; /* nothing allowed yet: no state to update */
            /* 3. weights */
            if (tid < SD_TILE) {
                const float e = expf(ps[tid] - mnew);
                ps[tid] = e;
                pv[tid] = sh.round_p ? D::ld(D::st(e)) : e;
            }
            __syncthreads();
            /* 4. rescale and add; m == -inf only before the first key
             * (acc and lsum 0) */
            const float corr = m == -INFINITY ? 0.0f : expf(m - mnew);
            const int64_t tn = jend - t0 < SD_TILE ? jend - t0 : SD_TILE;
            float tsum = 0.0f;
            for (int jj = 0; jj < tn; jj++)
                tsum += ps[jj];
            lsum = lsum * corr + tsum;
#pragma unroll
            for (int i = 0; i < DPT; i++) {
                const int64_t d = tid + (int64_t)i * SD_THREADS;
                if (d < Dd) {
                    float a = acc[i] * corr;
                    for (int jj = 0; jj < tn; jj++)
                        a += pv[jj] * D::ld(vr[(t0 + jj) * Dd + d]);
                    acc[i] = a;
                }
            }
            m = mnew;
            __syncthreads(); /* the weights are read before the next tile's scores */
        }
        typename D::T *yr = y + row * Dd;
#pragma unroll
        for (int i = 0; i < DPT; i++) {
            const int64_t d = tid + (int64_t)i * SD_THREADS;
            if (d < Dd)
                yr[d] = D::st(m == -INFINITY ? 0.0f : acc[i] / lsum);
        }
    }
}

template <int DT, int MK>
static int sd_launch_mk(gg_gpu_ctx *c, const gg_tensor *in, const gg_tensor *out,
                        const sd_shape &sh)
{
    typedef typename dt<DT>::T T;
    const int64_t rows = sh.B * sh.Hq * sh.L;
    const unsigned grid = gg_gpu_grid_for(rows, 1, (int64_t)1 << 20);
    const size_t shm = sizeof(float) * (size_t)sh.D;
    const T *q = (const T *)in[0].data, *k = (const T *)in[1].data, *v = (const T *)in[2].data;
    const void *mask = MK == SD_NONE ? NULL : in[3].data;
    T *y = (T *)out[0].data;
    if (sh.D <= SD_THREADS)
        k_sdpa<DT, MK, 1><<<grid, SD_THREADS, shm, c->stream>>>(q, k, v, mask, y, sh);
    else if (sh.D <= 2 * SD_THREADS)
        k_sdpa<DT, MK, 2><<<grid, SD_THREADS, shm, c->stream>>>(q, k, v, mask, y, sh);
    else
        k_sdpa<DT, MK, 4><<<grid, SD_THREADS, shm, c->stream>>>(q, k, v, mask, y, sh);
    return 0;
}

template <int DT>
static int sd_launch_dt(gg_gpu_ctx *c, const gg_tensor *in, int nin, const gg_tensor *out,
                        const sd_shape &sh)
{
    if (nin == 3)
        return sd_launch_mk<DT, SD_NONE>(c, in, out, sh);
    if (in[3].desc.dtype == GG_DT_BOOL)
        return sd_launch_mk<DT, SD_BOOL>(c, in, out, sh);
    return sd_launch_mk<DT, SD_ADD>(c, in, out, sh);
}

int gg_gpu_attention_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                            const gg_tensor *out, int nout, const gg_op_attrs *attrs)
{
    if (op->id != GG_OP_SDPA)
        return gg_gpu_fail(-ENOTSUP, "%s: not an attention op", op->name);
    if (nin < 3 || nin > 4 || nout != 1)
        return gg_gpu_fail(-EINVAL, "%s: %d inputs and %d outputs do not fit the op", op->name,
                           nin, nout);
    for (int i = 0; i < nin + nout; i++) {
        const gg_tensor *t = i < nin ? &in[i] : &out[0];
        if (!t->data || gg_desc_numel(&t->desc) < 1)
            return gg_gpu_fail(-EINVAL, "%s: operand %d is empty or has no data", op->name, i);
    }
    const gg_tensor_desc *qd = &in[0].desc, *kd = &in[1].desc, *yd = &out[0].desc;
    const gg_dtype dtype = qd->dtype;
    if (qd->ndim != 4 || kd->ndim != 4 || kd->dims[0] != qd->dims[0] ||
        kd->dims[3] != qd->dims[3] || qd->dims[1] % kd->dims[1] != 0 ||
        gg_desc_numel(&in[2].desc) != gg_desc_numel(kd) || gg_desc_numel(yd) != gg_desc_numel(qd) ||
        kd->dtype != dtype || in[2].desc.dtype != dtype || yd->dtype != dtype)
        return gg_gpu_fail(-EINVAL, "%s: operand shapes or dtypes do not fit", op->name);
    sd_shape sh;
    sh.B = qd->dims[0], sh.Hq = qd->dims[1], sh.L = qd->dims[2], sh.D = qd->dims[3];
    sh.Hkv = kd->dims[1], sh.S = kd->dims[2];
    if (sh.D > 4 * SD_THREADS)
        return gg_gpu_fail(-ENOTSUP, "%s: head dim %lld is above %d", op->name, (long long)sh.D,
                           4 * SD_THREADS);
    const double sv = attrs ? attrs->v[0] : op->attrs[0].def;
    const double cv = attrs ? attrs->v[1] : op->attrs[1].def;
    sh.scale = sv != 0.0 ? (float)sv : 1.0f / sqrtf((float)sh.D);
    sh.causal = cv != 0.0;
    sh.round_p = (attrs ? attrs->v[2] : op->attrs[2].def) != 0.0;
    for (int i = 0; i < 4; i++)
        sh.ms[i] = 0;
    if (nin == 4) {
        const gg_tensor_desc *md = &in[3].desc;
        if (md->dtype != GG_DT_BOOL && md->dtype != dtype)
            return gg_gpu_fail(-EINVAL, "%s: mask must be bool or %s", op->name,
                               gg_dtype_name(dtype));
        const int64_t full[4] = {sh.B, sh.Hq, sh.L, sh.S};
        int64_t s = 1;
        for (int i = 3; i >= 0; i--) {
            const int kk = i - (4 - md->ndim);
            const int64_t d = kk < 0 ? 1 : md->dims[kk];
            if (d != 1 && d != full[i])
                return gg_gpu_fail(-EINVAL, "%s: the mask does not broadcast", op->name);
            sh.ms[i] = d == 1 ? 0 : s;
            s *= d;
        }
    }
    switch (dtype) {
    case GG_DT_F32:
        sd_launch_dt<GG_DT_F32>(c, in, nin, out, sh);
        break;
    case GG_DT_F16:
        sd_launch_dt<GG_DT_F16>(c, in, nin, out, sh);
        break;
    case GG_DT_BF16:
        sd_launch_dt<GG_DT_BF16>(c, in, nin, out, sh);
        break;
    default:
        return gg_gpu_fail(-EINVAL, "%s: dtype %s is not floating", op->name,
                           gg_dtype_name(dtype));
    }
    return gg_gpu_launched(op);
}
