/* SPDX-License-Identifier: MIT */
/* The read ceiling for benches: a plain streaming read of two buffers, the
 * least any one kernel reading those bytes takes on this device (its launch,
 * one DRAM round trip, the bytes at the read rate), to stand beside a kernel
 * that reads the same bytes (bench_kernels: attention_decode's K and V). */
#include "gpu_internal.h"

#include <errno.h>

#define GG_PROBE_THREADS 256
#define GG_PROBE_UNITS 4 /* 16-byte loads a thread, all in flight at once */

/* Block bk reads units [bk * 1024, bk * 1024 + 1024) of a then b (n units
 * each) and writes the sum of their 32-bit words to out[bk], so nothing the
 * loads feed can be dropped and no block waits for another. */
__global__ void __launch_bounds__(GG_PROBE_THREADS)
    k_read_probe(const uint4 *a, const uint4 *b, int64_t n, unsigned *out)
{
    __shared__ unsigned tot;
    if (threadIdx.x == 0)
        tot = 0;
    const int64_t base = (int64_t)blockIdx.x * GG_PROBE_THREADS * GG_PROBE_UNITS + threadIdx.x;
    uint4 u[GG_PROBE_UNITS];
#pragma unroll
    for (int i = 0; i < GG_PROBE_UNITS; i++) {
        const int64_t j = base + (int64_t)i * GG_PROBE_THREADS;
        u[i] = make_uint4(0u, 0u, 0u, 0u);
        if (j < n)
            u[i] = a[j];
        else if (j < 2 * n)
            u[i] = b[j - n];
    }
    unsigned s = 0;
#pragma unroll
    for (int i = 0; i < GG_PROBE_UNITS; i++)
        s += u[i].x + u[i].y + u[i].z + u[i].w;
    __syncthreads();
    atomicAdd(&tot, s);
    __syncthreads();
    if (threadIdx.x == 0)
        out[blockIdx.x] = tot;
}

extern "C" int64_t gg_gpu_read_probe_blocks(size_t bytes)
{
    const int64_t per = (int64_t)GG_PROBE_THREADS * GG_PROBE_UNITS * 16;
    return (2 * (int64_t)bytes + per - 1) / per;
}

extern "C" int gg_gpu_read_probe(gg_gpu_ctx *c, const void *a, const void *b, size_t bytes,
                                 void *out)
{
    if (!c || !a || !b || !out || bytes == 0 || bytes % 16 != 0 || !gg_gpu_aligned16(a) ||
        !gg_gpu_aligned16(b))
        return gg_gpu_fail(-EINVAL, "read probe: two 16-byte aligned buffers of a nonzero "
                                    "multiple of 16 bytes and an output are needed");
    const int64_t blocks = gg_gpu_read_probe_blocks(bytes);
    if (blocks > 0x7fffffff)
        return gg_gpu_fail(-EINVAL, "read probe: %zu bytes is too many", bytes);
    k_read_probe<<<(unsigned)blocks, GG_PROBE_THREADS, 0, c->stream>>>(
        (const uint4 *)a, (const uint4 *)b, (int64_t)(bytes / 16), (unsigned *)out);
    const hipError_t e = hipGetLastError();
    if (e != hipSuccess)
        return gg_gpu_fail(-EIO, "read probe: %s", hipGetErrorString(e));
    return 0;
}
