/* SPDX-License-Identifier: MIT */
/* The matmul family on the GPU (ops_matmul.c has the rule and the CPU
 * reference): bmm, a tiled kernel.  A block computes a BM x 64 tile of one
 * batch's y with 256 threads, each BM/16 rows by 4 columns (16 apart, so a
 * warp's reads of the b tile are distinct banks), stepping through K 16 at
 * a time through shared memory, f32 accumulation in k order.  BM is 64, or
 * 16 for the few-row products a decode step has (rotary's inv_freq @
 * positions, one query row against the keys).  Batch dims broadcast by a
 * zero stride.  Launches only, under the rules gpu_ops.hip states. */
#include "gpu_internal.h"

#include <errno.h>
#include <stdint.h>

enum { MM_BN = 64, MM_BK = 16, MM_THREADS = 256 };

/* y's batch dims (at most two: y has at most 4 dims), each operand's stride
 * along them in elements (0: broadcast). */
struct mm_batch {
    int64_t n1;            /* y's second batch dim (1 without) */
    int64_t a[2], b[2];    /* strides for batch index (i0, i1) */
    int64_t count;         /* y's matrices */
};

template <int DT, int BM, bool TB>
__global__ void __launch_bounds__(MM_THREADS)
    k_bmm(const typename dt<DT>::T *a, const typename dt<DT>::T *b, typename dt<DT>::T *y,
          int M, int N, int K, mm_batch bt)
{
    typedef dt<DT> D;
    enum { RM = BM / 16 };
    __shared__ float as[MM_BK][BM + 1];
    __shared__ float bs[MM_BK][MM_BN + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * MM_BN;
    for (int64_t z = blockIdx.z; z < bt.count; z += gridDim.z) {
        const int64_t i0 = z / bt.n1, i1 = z % bt.n1;
        const typename D::T *az = a + i0 * bt.a[0] + i1 * bt.a[1];
        const typename D::T *bz = b + i0 * bt.b[0] + i1 * bt.b[1];
        float acc[RM][4];
#pragma unroll
        for (int r = 0; r < RM; r++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[r][j] = 0.0f;
        for (int k0 = 0; k0 < K; k0 += MM_BK) {
            /* a tile: BM x 16, read along k */
            for (int e = threadIdx.x; e < BM * MM_BK; e += MM_THREADS) {
                const int r = e / MM_BK, kk = e % MM_BK;
                const int m = m0 + r, k = k0 + kk;
                as[kk][r] = m < M && k < K ? D::ld(az[(int64_t)m * K + k]) : 0.0f;
            }
            /* b tile: 16 x 64, read along n ([K, N]) or along k ([N, K]) */
            for (int e = threadIdx.x; e < MM_BK * MM_BN; e += MM_THREADS) {
                int kk, c;
                if (TB) {
                    c = e / MM_BK;
                    kk = e % MM_BK;
                } else {
                    kk = e / MM_BN;
                    c = e % MM_BN;
                }
                const int n = n0 + c, k = k0 + kk;
                float v = 0.0f;
                if (n < N && k < K)
                    v = D::ld(TB ? bz[(int64_t)n * K + k] : bz[(int64_t)k * N + n]);
                bs[kk][c] = v;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < MM_BK; kk++) {
                float bv[4];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
                for (int r = 0; r < RM; r++) {
                    const float av = as[kk][ty * RM + r];
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        acc[r][j] += av * bv[j];
                }
            }
            __syncthreads();
        }
        typename D::T *yz = y + z * (int64_t)M * N;
#pragma unroll
        for (int r = 0; r < RM; r++) {
            const int m = m0 + ty * RM + r;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int n = n0 + tx + 16 * j;
                if (m < M && n < N)
                    yz[(int64_t)m * N + n] = D::st(acc[r][j]);
            }
        }
    }
}

/* t's stride along y's batch dim i of nb (right-aligned; 0 where t has no
 * such dim or has it as 1). */
static int64_t mm_bstride(const gg_tensor_desc *t, int nb, int i)
{
    const int tb = t->ndim - 2, k = i - (nb - tb);
    if (k < 0 || t->dims[k] == 1)
        return 0;
    int64_t s = t->dims[t->ndim - 2] * t->dims[t->ndim - 1];
    for (int j = k + 1; j < tb; j++)
        s *= t->dims[j];
    return s;
}

template <int DT, int BM>
static void mm_launch(gg_gpu_ctx *c, const gg_tensor *in, const gg_tensor *out, int M, int N,
                      int K, const mm_batch &bt, bool tb)
{
    typedef typename dt<DT>::T T;
    dim3 grid((unsigned)((N + MM_BN - 1) / MM_BN), (unsigned)((M + BM - 1) / BM),
              (unsigned)(bt.count < 65535 ? bt.count : 65535));
    if (tb)
        k_bmm<DT, BM, true><<<grid, MM_THREADS, 0, c->stream>>>(
            (const T *)in[0].data, (const T *)in[1].data, (T *)out[0].data, M, N, K, bt);
    else
        k_bmm<DT, BM, false><<<grid, MM_THREADS, 0, c->stream>>>(
            (const T *)in[0].data, (const T *)in[1].data, (T *)out[0].data, M, N, K, bt);
}

template <int DT>
static void mm_launch_dt(gg_gpu_ctx *c, const gg_tensor *in, const gg_tensor *out, int M, int N,
                         int K, const mm_batch &bt, bool tb)
{
    if (M <= 16)
        mm_launch<DT, 16>(c, in, out, M, N, K, bt, tb);
    else
        mm_launch<DT, 64>(c, in, out, M, N, K, bt, tb);
}

int gg_gpu_matmul_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                         const gg_tensor *out, int nout, const gg_op_attrs *attrs)
{
    if (op->id != GG_OP_BMM)
        return gg_gpu_fail(-ENOTSUP, "%s: not a matmul op", op->name);
    if (nin != 2 || nout != 1)
        return gg_gpu_fail(-EINVAL, "%s: %d inputs and %d outputs do not fit the op", op->name,
                           nin, nout);
    const gg_tensor_desc *ad = &in[0].desc, *bd = &in[1].desc, *yd = &out[0].desc;
    const gg_dtype dtype = yd->dtype;
    for (int i = 0; i < 3; i++) {
        const gg_tensor *t = i < 2 ? &in[i] : &out[0];
        if (!t->data || gg_desc_numel(&t->desc) < 1 || t->desc.dtype != dtype ||
            t->desc.ndim < 2)
            return gg_gpu_fail(-EINVAL, "%s: operand %d is empty, has no data or another dtype",
                               op->name, i);
    }
    const bool tb = (attrs ? attrs->v[0] : op->attrs[0].def) != 0;
    const int nb = yd->ndim - 2;
    const int64_t M = yd->dims[nb], N = yd->dims[nb + 1], K = ad->dims[ad->ndim - 1];
    if (ad->dims[ad->ndim - 2] != M || bd->dims[bd->ndim - (tb ? 1 : 2)] != K ||
        bd->dims[bd->ndim - (tb ? 2 : 1)] != N || ad->ndim > yd->ndim || bd->ndim > yd->ndim)
        return gg_gpu_fail(-EINVAL, "%s: operand shapes do not fit", op->name);
    if ((M + 15) / 16 > 65535 || N > INT32_MAX / 2 || K > INT32_MAX / 2)
        return gg_gpu_fail(-ENOTSUP, "%s: a %lld x %lld x %lld product is larger than the kernel's "
                           "grid", op->name, (long long)M, (long long)K, (long long)N);
    mm_batch bt;
    bt.n1 = nb == 2 ? yd->dims[1] : 1;
    bt.count = 1;
    for (int i = 0; i < nb; i++)
        bt.count *= yd->dims[i];
    /* batch index (i0, i1): y's two batch dims, or (i0, 0) with one, or (0, 0) */
    for (int j = 0; j < 2; j++) {
        const int i = nb == 2 ? j : nb == 1 ? (j == 0 ? 0 : -1) : -1;
        bt.a[j] = i < 0 ? 0 : mm_bstride(ad, nb, i);
        bt.b[j] = i < 0 ? 0 : mm_bstride(bd, nb, i);
    }
    switch (dtype) {
    case GG_DT_F32:
        mm_launch_dt<GG_DT_F32>(c, in, out, (int)M, (int)N, (int)K, bt, tb);
        break;
    case GG_DT_F16:
        mm_launch_dt<GG_DT_F16>(c, in, out, (int)M, (int)N, (int)K, bt, tb);
        break;
    case GG_DT_BF16:
        mm_launch_dt<GG_DT_BF16>(c, in, out, (int)M, (int)N, (int)K, bt, tb);
        break;
    default:
        return gg_gpu_fail(-EINVAL, "%s: dtype %s is not floating", op->name,
                           gg_dtype_name(dtype));
    }
    return gg_gpu_launched(op);
}
