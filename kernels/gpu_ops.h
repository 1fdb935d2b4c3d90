/* SPDX-License-Identifier: MIT */
/* GPU kernels for the op table (ops.h): one launcher for every op, HIP source
 * built by hipcc for AMD and by nvcc (through gg_hip.h) for NVIDIA.
 *
 * Plain C API.  Every launch is enqueued on the stream of a context and is
 * capture-safe: no allocation, no synchronisation, no host<->device copy, so
 * it can be recorded into a HIP graph.  Create the context (which allocates
 * the BLAS handle and its workspace) before capturing on its stream.
 *
 * Semantics are those of the CPU references (gg_ops_run_cpu): contiguous
 * row-major operands of one dtype, f32 accumulation, every op independent
 * across rows.  Shapes are not re-checked beyond what a launch needs to stay
 * in bounds: validate programs with the op's check function first. */
#ifndef GG_GPU_OPS_H
#define GG_GPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gg_gpu_ctx gg_gpu_ctx;

/* A context for one stream (a hipStream_t, passed as void * so that C code
 * needs no vendor header; NULL is the legacy default stream, which cannot be
 * captured).  Uses the current device (hipSetDevice first).  0, or -ENOMEM,
 * -ENODEV (no usable device), -EIO (runtime or BLAS failure, see
 * gg_gpu_last_error()). */
int gg_gpu_ctx_create(void *stream, gg_gpu_ctx **out);
void gg_gpu_ctx_destroy(gg_gpu_ctx *ctx);
void *gg_gpu_ctx_stream(const gg_gpu_ctx *ctx);

/* Enqueue one op on ctx's stream (or record it while the stream captures).
 * attrs may be NULL (the op's defaults).  0, or -EINVAL (operands that do not
 * fit the op, unknown op or dtype), -ENOTSUP, -EIO (the launch failed; the
 * message says why).  Thread-safe across contexts; one thread per context. */
int gg_gpu_op_launch(gg_gpu_ctx *ctx, const gg_op_def *op, const gg_tensor *in, int nin,
                     const gg_tensor *out, int nout, const gg_op_attrs *attrs);

/* Enqueue a row chain (ops.h, gg_rowchain) as one kernel: a block a row,
 * the row in registers through every stage (rows too long for that run the
 * stages one by one).  0, or -EINVAL (with the reason), -EIO. */
int gg_gpu_rowchain_launch(gg_gpu_ctx *ctx, const gg_rowchain *chain);

/* 1 when this build has a kernel for op in dtype dt. */
int gg_gpu_op_supported(const gg_op_def *op, gg_dtype dt);

/* 1 when the op's first launch on a context may do one-time setup that is
 * best not captured (vendor BLAS picks and loads its kernels on first use):
 * launch it once eagerly on the context before capturing it.  Harmless to
 * ignore for the project's own kernels. */
int gg_gpu_op_needs_warmup(const gg_op_def *op);

/* How `linear` is computed (rows = x's rows).
 *   AUTO: f16/bf16 up to 16 rows on an NVIDIA device of sm_80 or later: the
 *         tensor-core small-M kernel.  Otherwise the vendor BLAS from a
 *         build-specific row count on (cuBLAS: 2 rows; rocBLAS, when found at
 *         configure time: 16); below it, or without a BLAS, the project's
 *         kernels: the small-M kernel (a warp per output column, rows in
 *         groups of up to 16) up to 16 rows in f32 and 64 in f16/bf16, a
 *         tiled GEMM above.  The crossovers were measured on an H100
 *         (docs/gpu-build.md).
 *   OWN:  never BLAS (the project's kernels as above, the tensor-core one
 *         included).
 *   BLAS: always BLAS (-ENOTSUP without one).
 * For tests and benchmarks; 0 or -EINVAL / -ENOTSUP. */
typedef enum {
    GG_GPU_LINEAR_AUTO = 0,
    GG_GPU_LINEAR_OWN = 1,
    GG_GPU_LINEAR_BLAS = 2
} gg_gpu_linear_mode;
int gg_gpu_ctx_set_linear_mode(gg_gpu_ctx *ctx, gg_gpu_linear_mode mode);

/* "hip-amd" or "hip-cuda"; the BLAS behind linear: "cublas", "rocblas" or
 * "none"; the BLASLt behind the fused linear's bias/GELU epilogues on the
 * current device: "cublaslt", "hipblaslt" (AMD builds that found it, on a
 * device it has kernels for) or "none" (the first call makes the Lt handle
 * and checks it: call it outside capture, like a warm-up). */
const char *gg_gpu_platform(void);
const char *gg_gpu_blas(void);
const char *gg_gpu_blas_lt(void);

/* Enqueue on stream (a hipStream_t) a write of value to the 8-byte word at
 * dev_addr (device-visible: e.g. mapped pinned host memory), done once the
 * stream's earlier work is.  The fast path's completion: the device, not a
 * host thread, tells the client its replay is done.  Uses the stream memory
 * operation (hipStreamWriteValue64 / cuStreamWriteValue64) where the device
 * supports it and a one-thread kernel otherwise; *how (may be NULL) gets
 * "stream-write" or "kernel".  0 or -EIO (gg_gpu_last_error()). */
int gg_gpu_signal_u64(void *stream, void *dev_addr, uint64_t value, const char **how);

/* Enqueue on stream a write of value to the 4-byte device word at dev_addr
 * (device memory: the batch word in a program's scratch), ordered with the
 * stream's work before and after it.  hipStreamWriteValue32 /
 * cuStreamWriteValue32 where supported, a one-thread kernel otherwise; *how
 * as gg_gpu_signal_u64.  0 or -EIO. */
int gg_gpu_write_u32(void *stream, void *dev_addr, uint32_t value, const char **how);

/* Message for the last failure on this thread ("" when none). */
const char *gg_gpu_last_error(void);

/* For benches: read `bytes` of a and then of b (16-byte aligned, a multiple
 * of 16) in one kernel on ctx's stream, as any kernel must that reads them,
 * writing one word a block to out (gg_gpu_read_probe_blocks(bytes) words).
 * 0, -EINVAL, -EIO. */
int gg_gpu_read_probe(gg_gpu_ctx *ctx, const void *a, const void *b, size_t bytes, void *out);
int64_t gg_gpu_read_probe_blocks(size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
