/* SPDX-License-Identifier: MIT */
/* Private to the GPU kernels (gpu_ops.hip, gpu_linear.hip): what the two
 * translation units share.  HIP/CUDA C++ only; never included from C.
 *
 *   - the vendor BLAS selection (cuBLAS on NVIDIA, rocBLAS on AMD when
 *     configured, else none) and the context struct that holds its handle;
 *   - what an op kind is (its table id);
 *   - error reporting (gg_gpu_fail sets gg_gpu_last_error()'s message) and
 *     the launch check;
 *   - dtype traits: f32 accumulation, f16/bf16 as raw 16-bit storage
 *     converted in registers, 16-byte vector units;
 *   - the entry points of gpu_linear.hip. */
#ifndef GG_GPU_INTERNAL_H
#define GG_GPU_INTERNAL_H

#include "gg_hip.h"
#include "gpu_ops.h"

#include <stddef.h>
#include <stdint.h>

/* ---- vendor BLAS ------------------------------------------------------------ */

#if defined(GFXGRAPH_HIP_CUDA)
#include <cublas_v2.h>
#define GG_BLAS_CUBLAS 1
#define GG_BLAS_NAME "cublas"
#elif defined(GFXGRAPH_HAVE_ROCBLAS)
#include <rocblas/rocblas.h>
#define GG_BLAS_ROCBLAS 1
#define GG_BLAS_NAME "rocblas"
#else
#define GG_BLAS_NAME "none"
#endif
/* The BLASLt behind the fused linear's epilogues: gg_hip.h includes it and
 * names it where the build has one (GFXGRAPH_HAVE_BLASLT). */
#if !defined(GFXGRAPH_HAVE_BLASLT)
#define GG_BLASLT_NAME "none"
#endif

/* ---- op kinds --------------------------------------------------------------- */

/* An op's kind is its table id (ops.h: gg_op_id, from ops_list.h);
 * gg_gpu_op_launch hands each op to its family's launcher, which switches on
 * the id.  Nothing here depends on the order of the ids. */

/* ---- context ---------------------------------------------------------------- */

struct gg_gpu_ctx {
    hipStream_t stream;
    int device;
    int warp;        /* wave/warp size of the device */
    int sms;         /* compute units / multiprocessors */
    int max_threads; /* per block */
    gg_gpu_linear_mode linear_mode;
    void *ws;
    size_t ws_bytes;
    /* attention_decode's split partials and merge counters (gpu_attention.hip);
     * NULL when they could not be allocated (one pass then) */
    float *attn_part;
    unsigned *attn_cnt;
    size_t attn_part_floats, attn_cnt_n;
    int attn_split_off; /* GFXGRAPH_ATTN_SPLIT=0: the one-block-per-head kernel */
    /* the last chunk-count pick (a scan of up to 256 counts, ~1.3 us on the
     * host at long contexts) and what it was picked for */
    int64_t attn_pick_key[6];
    int attn_pick_ns;
    /* the largest thread-block cluster the tensor-core attention kernel
     * launches with (0: no clusters) */
    int attn_cluster;
    int attn_ns_force; /* GFXGRAPH_ATTN_CHUNKS=n: n chunks a row, for comparisons */
    /* blocks of the tensor-core attention kernel a multiprocessor holds,
     * [bf16][Dh 32/64/128][more than 8 q heads a block]; 0 until asked */
    int attn_occ[2][3][2];
    int mma;            /* mma.sync runs here (NVIDIA sm_80+): linear's and attention's
                         * tensor-core kernels */
    /* f32 linear from 8 rows (gpu_linear.hip): the largest cluster it may
     * launch (0: not here, NVIDIA sm_90+ only, or GFXGRAPH_LINEAR_MID=0);
     * the split and slice depth GFXGRAPH_LINEAR_MID forces (0: the pick) */
    int lmid_smax, lmid_s, lmid_bk;
#if defined(GG_BLAS_CUBLAS)
    cublasHandle_t blas;
#elif defined(GG_BLAS_ROCBLAS)
    rocblas_handle blas;
#endif
};

/* ---- errors (gpu_ops.hip) ---------------------------------------------------- */

/* Sets this thread's gg_gpu_last_error() message; returns rc. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int gg_gpu_fail(int rc, const char *fmt, ...);

/* After a launch: 0, or -EIO with the runtime's error for op. */
int gg_gpu_launched(const gg_op_def *op);

/* Blocks for work items at threads a block, at least 1 and at most cap. */
static inline unsigned gg_gpu_grid_for(int64_t work, int threads, int64_t cap)
{
    int64_t g = (work + threads - 1) / threads;
    if (g < 1)
        g = 1;
    if (g > cap)
        g = cap;
    return (unsigned)g;
}

/* ---- dtype traits ---------------------------------------------------------- */

template <int DT> struct dt;

template <> struct dt<GG_DT_F32> {
    typedef float T;
    enum { VEC = 4 };
    static __device__ __forceinline__ float ld(T v) { return v; }
    static __device__ __forceinline__ T st(float f) { return f; }
};

/* 16-bit types also convert a packed pair (element 2i in the low half), both
 * ways. */
template <> struct dt<GG_DT_F16> {
    typedef uint16_t T;
    enum { VEC = 8 };
    static __device__ __forceinline__ float ld(T v) { return gg_f16_bits_to_f32(v); }
    static __device__ __forceinline__ T st(float f) { return gg_f32_to_f16_bits(f); }
    static __device__ __forceinline__ void ld2(uint32_t u, float *out)
    {
        out[0] = gg_f16_bits_to_f32((uint16_t)(u & 0xffffu));
        out[1] = gg_f16_bits_to_f32((uint16_t)(u >> 16));
    }
    static __device__ __forceinline__ uint32_t st2(float lo, float hi)
    {
        return gg_f32x2_to_f16x2_bits(lo, hi);
    }
};

template <> struct dt<GG_DT_BF16> {
    typedef uint16_t T;
    enum { VEC = 8 };
    static __device__ __forceinline__ float ld(T v) { return gg_bf16_bits_to_f32(v); }
    static __device__ __forceinline__ T st(float f) { return gg_f32_to_bf16_bits(f); }
    static __device__ __forceinline__ void ld2(uint32_t u, float *out)
    {
        out[0] = __uint_as_float(u << 16);
        out[1] = __uint_as_float(u & 0xffff0000u);
    }
    static __device__ __forceinline__ uint32_t st2(float lo, float hi)
    {
        return gg_f32x2_to_bf16x2_bits(lo, hi);
    }
};

/* 16 bytes: one global load/store instruction. */
template <typename T, int N> struct alignas(16) vec_t {
    T v[N];
};

static inline bool gg_gpu_aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}


/* Unit i of a row (a 16-byte vector when VEC, else one element) as floats. */
template <bool C, typename A, typename B> struct pick {
    typedef A type;
};
template <typename A, typename B> struct pick<false, A, B> {
    typedef B type;
};

template <int DT, bool VEC> struct unit {
    typedef dt<DT> D;
    typedef typename D::T T;
    enum { N = VEC ? (int)D::VEC : 1 };
    typedef vec_t<T, D::VEC> VT;
    typedef typename pick<VEC, VT, T>::type raw; /* a unit as stored */
    static __device__ __forceinline__ raw load_raw(const T *p, int i)
    {
        return ((const raw *)p)[i];
    }
    static __device__ __forceinline__ void cvt(const raw &r, float *out)
    {
        if constexpr (VEC) {
#pragma unroll
            for (int k = 0; k < N; k++)
                out[k] = D::ld(r.v[k]);
        } else {
            out[0] = D::ld(r);
        }
    }
    static __device__ __forceinline__ void load(const T *p, int i, float *out)
    {
        if constexpr (VEC && sizeof(T) == 2) { /* 16 bytes as 4 packed pairs */
            const uint4 v = ((const uint4 *)p)[i];
            D::ld2(v.x, out);
            D::ld2(v.y, out + 2);
            D::ld2(v.z, out + 4);
            D::ld2(v.w, out + 6);
        } else if constexpr (VEC) {
            VT v = ((const VT *)p)[i];
#pragma unroll
            for (int k = 0; k < N; k++)
                out[k] = D::ld(v.v[k]);
        } else {
            out[0] = D::ld(p[i]);
        }
    }
    static __device__ __forceinline__ void store(T *p, int i, const float *in)
    {
        if constexpr (VEC) {
            VT v;
#pragma unroll
            for (int k = 0; k < N; k++)
                v.v[k] = D::st(in[k]);
            ((VT *)p)[i] = v;
        } else {
            p[i] = D::st(in[0]);
        }
    }
};


/* ---- tensor cores (NVIDIA sm_80+) ------------------------------------------------ */

/* c += a . b, one mma.sync m16n8k16 with f32 accumulation: a the 4 registers
 * of a 16x16 f16/bf16 A fragment, b the 2 of a 16x8 B fragment, c the 4
 * floats of the 16x8 C fragment (PTX ISA, "Matrix Fragments for
 * mma.m16n8k16").  Elsewhere (AMD, older NVIDIA) it does nothing: launchers
 * check gg_gpu_ctx.mma first. */
template <int DT> struct mma_op;
template <> struct mma_op<GG_DT_F16> {
    static __device__ __forceinline__ void run(float *c, const uint32_t *a, const uint32_t *b)
    {
#if defined(GFXGRAPH_HIP_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
        (void)c, (void)a, (void)b;
#endif
    }
};
template <> struct mma_op<GG_DT_BF16> {
    static __device__ __forceinline__ void run(float *c, const uint32_t *a, const uint32_t *b)
    {
#if defined(GFXGRAPH_HIP_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
        (void)c, (void)a, (void)b;
#endif
    }
};


/* ---- linear (gpu_linear.hip) -------------------------------------------------- */

/* The vendor BLAS handle and its workspace on a new context (nothing without
 * a BLAS): 0, or -ENOMEM / -EIO with the message set and nothing left
 * allocated.  cc_major: the device's compute capability major (CUDA). */
int gg_gpu_linear_ctx_init(gg_gpu_ctx *c, int cc_major);
void gg_gpu_linear_ctx_fini(gg_gpu_ctx *c);

/* linear on in[0] (x), in[1] (w), in[2] (b, when nin == 3) into out[0]: the
 * shape checks, then the vendor BLAS, the small-M kernel or the tiled GEMM
 * as the context's linear mode picks.  Operands share one dtype and have
 * data (gg_gpu_op_launch checked). */
int gg_gpu_linear_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                         const gg_tensor *out);

/* f32 linear from 8 rows (to 32 in AUTO mode, 64 in OWN) with an epilogue
 * (fused.linear_act), on gpu_linear.hip's clustered split-K kernel: y[M,N] =
 * act(x[M,K] w[N,K]^T + b), h (when not NULL) the value before act (b NULL:
 * none; act GG_ACT_*, p the scale's factor), all in f32.  0 when launched
 * (the caller checks the launch), 1 when not this kernel's (another dtype
 * or row count, no cluster launch here, the BLAS linear mode), < 0 with the
 * message set. */
int gg_gpu_linear_mid_launch(gg_gpu_ctx *c, gg_dtype dtype, const void *x, const void *w,
                             const void *b, void *h, void *y, int M, int K, int N, int act,
                             float p);

/* ---- attention_decode split along S (gpu_attention.hip, gpu_attention_mma.hip) - */

/* The context's scratch for the split (allocated here, at context creation,
 * never at launch); a failed allocation leaves it NULL and returns 0. */
int gg_gpu_attention_ctx_init(gg_gpu_ctx *c);
void gg_gpu_attention_ctx_fini(gg_gpu_ctx *c);

/* A runtime index vector of the decode ops (positions, lens) as the kernels
 * read it: i32 or i64, one a row or one for every row (HF's cache_position
 * is shared by the batch). */
typedef struct {
    const void *p;
    int wide, all;
} gg_gpu_index;

static inline gg_gpu_index gg_gpu_index_of(const gg_tensor *t)
{
    gg_gpu_index x = {t->data, t->desc.dtype == GG_DT_I64, gg_desc_numel(&t->desc) == 1};
    return x;
}

static __device__ __forceinline__ int64_t gg_gpu_index_at(gg_gpu_index x, int64_t r)
{
    const int64_t i = x.all ? 0 : r;
    return x.wide ? ((const int64_t *)x.p)[i] : (int64_t)((const int32_t *)x.p)[i];
}

/* attention_decode's cache addressing: element strides of a batch row, a kv
 * head and a position (bshd [B, S, Hkv, Dh] or bhsd [B, Hkv, S, Dh]). */
typedef struct {
    int64_t sb, sh, sp;
} gg_gpu_kv;

static inline gg_gpu_kv gg_gpu_kv_of(int bhsd, int64_t S, int64_t Hkv, int64_t Dh)
{
    gg_gpu_kv kv = {S * Hkv * Dh, bhsd ? S * Dh : Dh, bhsd ? Dh : Hkv * Dh};
    return kv;
}

/* attention_decode on checked operands (q [rows, Hq, Dh], k/v in kv's
 * layout, lens in[3] (gg_gpu_index), y like q, all of dtype): 0 when
 * launched (the caller checks the launch), 1 when the shape is not one the
 * split kernel takes. */
int gg_gpu_attention_split_launch(gg_gpu_ctx *c, gg_dtype dtype, const gg_tensor *in,
                                  const gg_tensor *out, int64_t rows, int Hq, int Hkv, int64_t S,
                                  int Dh, float scale, gg_gpu_kv kv);

/* The chunk count for a split launch of `groups` (row, kv head, q group)
 * blocks a chunk, per_sm of them resident a multiprocessor, chunks of at
 * least min_chunk positions, a merge taking merge_ch chunks a pass (0: any
 * number), partials of W floats a q head; 1 is one pass.  Kept for the next
 * launch of the same shape. */
int gg_gpu_attention_pick(gg_gpu_ctx *c, int64_t rows, int Hq, int64_t S, int W, int64_t groups,
                          int per_sm, int min_chunk, int merge_ch);

/* The tensor-core kernel (gpu_attention_mma.hip): its cluster size and
 * occupancy at context creation, and its launch, with the arguments of
 * gg_gpu_attention_split_launch: 0 launched, 1 not a shape, dtype or
 * device it takes. */
void gg_gpu_attention_mma_init(gg_gpu_ctx *c);
int gg_gpu_attention_mma_launch(gg_gpu_ctx *c, gg_dtype dtype, const gg_tensor *in,
                                const gg_tensor *out, int64_t rows, int Hq, int Hkv, int64_t S,
                                int Dh, float scale, gg_gpu_kv kv);

/* ---- decode-step ops (gpu_decode.hip) ---------------------------------------------- */

/* Decode-step op `op` (family GG_FAM_DECODE) of kind `kind` (its table id)
 * on in/out, the operand counts already checked: 0, or a negative errno with the message
 * set. */
int gg_gpu_decode_launch(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                         int nin, const gg_tensor *out, const gg_op_attrs *attrs);

/* ---- data movement, matmul, attention (gpu_movement.hip, gpu_matmul.hip,
 * gpu_sdpa.hip) ---------------------------------------------------------------- */

/* Op `op` of family GG_FAM_MOVEMENT (strided_copy, cat, index_copy; any
 * dtype), GG_FAM_MATMUL (bmm) or GG_FAM_ATTENTION (sdpa) on in/out: 0, or a
 * negative errno with the message set.  Each checks what its kernels need
 * to stay in bounds. */
int gg_gpu_movement_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                           const gg_tensor *out, int nout, const gg_op_attrs *attrs);
int gg_gpu_matmul_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                         const gg_tensor *out, int nout, const gg_op_attrs *attrs);
int gg_gpu_attention_launch(gg_gpu_ctx *c, const gg_op_def *op, const gg_tensor *in, int nin,
                            const gg_tensor *out, int nout, const gg_op_attrs *attrs);

/* ---- elementwise and reductions (gpu_elementwise.hip, gpu_reduce.hip) ------------- */

/* The elementwise family's general forms (every op of GG_FAM_ELEMENTWISE
 * but copy, scale, gelu, silu, silu_mul and add/mul in gg_ew_legacy_form)
 * and the reductions, on checked operands: 0, or a negative errno with the
 * message set. */
int gg_gpu_elementwise_launch(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                              int nin, const gg_tensor *out, const gg_op_attrs *attrs);
int gg_gpu_reduce_launch(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                         int nin, const gg_tensor *out, const gg_op_attrs *attrs);

/* ---- fused ops (gpu_fused.hip) ---------------------------------------------------- */

/* Fused op `op` of kind `kind` (ops.h: gg_fused_kind) on in/out: 0, or a
 * negative errno with the message set. */
int gg_gpu_fused_launch(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                        int nin, const gg_tensor *out, int nout, const gg_op_attrs *attrs);
/* 1 when the fused op may call the vendor BLAS (warm it up before capture). */
int gg_gpu_fused_needs_warmup(const gg_op_def *op);
#if defined(GFXGRAPH_HAVE_BLASLT)
/* 1 when the process's BLASLt handle exists and the device has kernels for
 * it (made on the first call). */
int gg_gpu_fused_lt_usable(void);
#endif

#endif
