/* SPDX-License-Identifier: MIT */
/* The op library: one table of ops with their operand, attribute, shape and
 * dtype rules, and a CPU reference for each.  The daemon validates programs
 * against this table at define time, so nothing downstream (CPU reference,
 * HIP kernels) re-checks shapes: a launch that reaches a kernel is valid.
 *
 * Plain C11 so that the daemon, the tests and the HIP launchers share it. */
#ifndef GG_OPS_H
#define GG_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ops_list.h"

#ifdef __cplusplus
extern "C" {
#endif

/* f32, f16 and bf16 are the floating dtypes every floating op computes in;
 * i32 holds token ids, positions and lengths; i64 (two's complement) and
 * bool (one byte, 0 or 1) are what PyTorch gives for indices and masks.
 * Each op says which it takes (docs/ops.md); integer arithmetic is exact,
 * never through f32. */
typedef enum {
    GG_DT_F32 = 0,
    GG_DT_F16 = 1,
    GG_DT_BF16 = 2,
    GG_DT_I32 = 3,
    GG_DT_I64 = 4,
    GG_DT_BOOL = 5,
    GG_DT_COUNT
} gg_dtype;
#define GG_DT_NFLOAT 3           /* the floating dtypes are 0 .. GG_DT_NFLOAT-1 */

static inline int gg_dtype_is_float(gg_dtype dt)
{
    return (int)dt >= 0 && (int)dt < GG_DT_NFLOAT;
}

static inline int gg_dtype_is_int(gg_dtype dt)
{
    return dt == GG_DT_I32 || dt == GG_DT_I64;
}

#define GG_MAX_DIMS 4
#define GG_MAX_OPERANDS 4
#define GG_MAX_ATTRS 4

typedef struct {
    gg_dtype dtype;
    int ndim;                       /* 1..GG_MAX_DIMS */
    int64_t dims[GG_MAX_DIMS];
} gg_tensor_desc;

typedef struct {
    void *data;                     /* first element */
    gg_tensor_desc desc;            /* contiguous, row-major */
} gg_tensor;

typedef enum { GG_ATTR_FLOAT, GG_ATTR_CHOICE } gg_attr_kind;

typedef struct {
    const char *name;
    gg_attr_kind kind;
    double def;                     /* default value (choice: index) */
    const char *const *choices;     /* GG_ATTR_CHOICE: NULL-terminated names */
    int nonfinite;                  /* GG_ATTR_FLOAT: 1 when +-inf and NaN are values too
                                     * (fill's value, a binary op's scalar) */
} gg_attr_spec;

/* Attribute values in the order of the op's attr specs; a choice holds the
 * index of the chosen name. */
typedef struct {
    double v[GG_MAX_ATTRS];
} gg_op_attrs;

typedef struct gg_op_def gg_op_def;

/* Op ids (an op's index in the table) and families, from ops_list.h. */
#define GG_OP_ENUM_(id_, name_, fam_) GG_OP_##id_,
typedef enum { GG_OPS_LIST(GG_OP_ENUM_) GG_OP_COUNT } gg_op_id;
#undef GG_OP_ENUM_
#define GG_FAM_ENUM_(f_) GG_FAM_##f_,
typedef enum { GG_FAMILY_LIST(GG_FAM_ENUM_) GG_FAM_COUNT } gg_op_family;
#undef GG_FAM_ENUM_

/* Shape and dtype rule: 0 if the operands fit the op, else -EINVAL with a
 * message a person can act on written to err. */
typedef int (*gg_op_check_fn)(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                              const gg_tensor_desc *out, int nout,
                              const gg_op_attrs *attrs, char *err, size_t errlen);

/* CPU reference: f32 accumulation whatever the storage dtype. */
typedef void (*gg_op_cpu_fn)(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                             const gg_op_attrs *attrs);

struct gg_op_def {
    const char *name;
    int id;                         /* index in the table (gg_op_id), stable per build */
    int family;                     /* gg_op_family */
    const char *in_names[GG_MAX_OPERANDS];  /* operand names for messages */
    const char *out_names[GG_MAX_OPERANDS];
    int nin_min, nin_max;           /* optional trailing inputs (linear's bias) */
    int nout;
    int nattrs;
    gg_attr_spec attrs[GG_MAX_ATTRS];
    gg_op_check_fn check;
    gg_op_cpu_fn cpu;
    /* 1: the daemon passes one more input after the node's own, an i32 [1]
     * holding the request's real batch (rows at and past it are padding,
     * whose side effects the op skips: cache_write).  Without it (a direct
     * call with the node's own inputs only) every row is real. */
    int wants_batch;
    /* 1: y may be exactly x (or a) in memory: each output element reads only
     * its own position of the inputs (the elementwise ops, rope). */
    int inplace;
    /* Every op in this library is independent across rows of dim 0 (the batch
     * rows), which is what makes padding rows harmless. */
};

/* Table access.  gg_ops_at(GG_OP_ADD) is add's row; an op pointer p is the
 * table's own when gg_ops_at(p->id) == p. */
int gg_ops_count(void);
const gg_op_def *gg_ops_at(int i);
const gg_op_def *gg_ops_find(const char *name);
/* Index of attribute `name` in op's attrs, or -1. */
int gg_ops_attr_index(const gg_op_def *op, const char *name);
/* Fill attrs with op's defaults. */
void gg_ops_attr_defaults(const gg_op_def *op, gg_op_attrs *attrs);

/* dtype helpers */
const char *gg_dtype_name(gg_dtype dt);
int gg_dtype_parse(const char *name, size_t len, gg_dtype *out);   /* 0 or -EINVAL */
size_t gg_dtype_size(gg_dtype dt);
int64_t gg_desc_numel(const gg_tensor_desc *d);
size_t gg_desc_bytes(const gg_tensor_desc *d);

/* f16 / bf16 conversion (round to nearest even), shared by references and
 * tests. */
float gg_f16_to_f32(uint16_t h);
uint16_t gg_f32_to_f16(float f);
float gg_bf16_to_f32(uint16_t b);
uint16_t gg_f32_to_bf16(float f);
/* Element access on a typed buffer, as f32 (an integer rounds to nearest;
 * a store to an integer dtype converts as cast does: toward zero, NaN to 0,
 * saturating; to bool: v != 0). */
float gg_load(const void *p, gg_dtype dt, int64_t i);
void gg_store(void *p, gg_dtype dt, int64_t i, float v);
/* The same, exact for every dtype: a double holds every f32/f16/bf16 and
 * i32 value; i64 is read and written as int64_t. */
double gg_load_f64(const void *p, gg_dtype dt, int64_t i);
int64_t gg_load_i64(const void *p, gg_dtype dt, int64_t i);   /* floating: as cast */
void gg_store_i64(void *p, gg_dtype dt, int64_t i, int64_t v); /* as cast from i64 */

/* Run op's CPU reference (attrs NULL: the op's defaults).  Every op but
 * linear may run in place (out[0].data == in[0].data); linear's y must not
 * overlap its inputs. */
void gg_ops_run_cpu(const gg_op_def *op, const gg_tensor *in, int nin, const gg_tensor *out,
                    int nout, const gg_op_attrs *attrs);

/* 1 when add or mul operands (checked) are in the forms older than
 * broadcasting: two floating inputs, a of y's size, b of y's size or a row
 * vector of y's last dim.  The references and kernels of those forms are
 * the ones the planner's fused chains share. */
int gg_ew_legacy_form(const gg_tensor_desc *in, int nin, const gg_tensor_desc *y);

/* Operand names as used in check messages ("x", "w", "b", "y", ...), or NULL
 * when i is out of range (inputs: 0..nin_max-1, outputs: 0..nout-1). */
const char *gg_ops_in_name(const gg_op_def *op, int i);
const char *gg_ops_out_name(const gg_op_def *op, int i);

/* ---- fused ops (ops_fused.c) ---------------------------------------------
 * The daemon's planner (daemon/core/fuse.c) may run a run of a program's
 * nodes as one of these.  They are not in the table above: gg_ops_find()
 * never returns them, hello does not list them, so no client can name one.
 * Each means exactly the node sequence it replaces (its CPU reference runs
 * that sequence, with the final output as the intermediates' storage where
 * they are dropped), so a fused run gives the unfused results within the
 * op tolerances (bit-identical on the cpu backend).
 *
 *   fused.norm_act     in x, w[, b]  out y[, h]   y = act(norm(x)); h, when
 *                      given, receives norm(x) (an intermediate the client
 *                      may read).  attrs: eps, norm (0 layernorm, 1
 *                      rmsnorm, 2 rmsnorm with its round_x), act (GG_ACT_*),
 *                      p (scale's factor)
 *   fused.add_rmsnorm  in a, b, w    out s, y     s = a + b; y = rmsnorm(s, w)
 *                      attrs: eps, round_x (rmsnorm's)
 *   fused.linear_act   in x, w[, b]  out y[, h]   y = act(x w^T + b); h, when
 *                      given, receives the value before act.  attrs: act,
 *                      p, bias (0: b is linear's own, 1: a separate add of
 *                      a row vector after the linear)
 *   fused.gate_up      in x, wg, wu  out y, g, u  g = x wg^T; u = x wu^T;
 *                      y = silu(g) * u.  attrs: keep (bit 0: g, bit 1: u
 *                      must be written; otherwise they are staging a kernel
 *                      may use or skip), round_act (silu_mul's)
 *   fused.ew_chain     in x[, e1..e3] out y       up to GG_EW_MAX_STEPS
 *                      elementwise steps on x; attrs: v[0] the steps packed
 *                      (gg_ew_pack), v[1..3] the scale steps' factors */
typedef enum {
    GG_FUSED_NORM_ACT = 0,
    GG_FUSED_ADD_RMSNORM,
    GG_FUSED_LINEAR_ACT,
    GG_FUSED_GATE_UP,
    GG_FUSED_EW_CHAIN,
    GG_FUSED_COUNT
} gg_fused_kind;
#define GG_OP_FUSED_BASE 1000    /* op->id of fused kind k: GG_OP_FUSED_BASE + k */

/* activations of norm_act and linear_act */
enum { GG_ACT_NONE = 0, GG_ACT_GELU_ERF, GG_ACT_GELU_TANH, GG_ACT_SILU, GG_ACT_SCALE };

/* elementwise chain steps: v = f(v[, e]) */
enum {
    GG_EW_ADD = 1,       /* v + e */
    GG_EW_MUL,           /* v * e */
    GG_EW_SCALE,         /* v * p */
    GG_EW_GELU_ERF,
    GG_EW_GELU_TANH,
    GG_EW_SILU,
    GG_EW_SILU_MUL,      /* silu(v) * e */
    GG_EW_SILU_MUL_R,    /* silu(e) * v */
    GG_EW_COPY,
    GG_EW_SILU_MUL_RND,  /* the two silu_mul steps with round_act: silu rounded */
    GG_EW_SILU_MUL_R_RND /* to the dtype before the multiply */
};
#define GG_EW_MAX_STEPS 6
#define GG_EW_MAX_SCALES 3

typedef struct {
    int n;
    uint8_t op[GG_EW_MAX_STEPS];
    uint8_t arg[GG_EW_MAX_STEPS];    /* binary steps: the input (1..3) e is */
} gg_ew_steps;

/* The fused op of kind k (NULL when out of range). */
const gg_op_def *gg_ops_fused(gg_fused_kind k);
/* op's fused kind, or -1 for an op of the public table (or anything else). */
int gg_ops_fused_kind(const gg_op_def *op);
/* ew_chain's steps <-> attrs v[0] (exact in a double: 52 bits). */
double gg_ew_pack(const gg_ew_steps *s);
int gg_ew_unpack(double v, gg_ew_steps *s);   /* 0, or -EINVAL */

/* ---- row chains (ops_fused.c; the planner's "fused.row_chain") -------------
 * A run of up to GG_ROWCHAIN_MAX_STAGES row-local stages, each a layernorm or
 * rmsnorm with an optional activation (what fused.norm_act computes), stage
 * k + 1 normalizing stage k's output; every stage has x's shape and the rows
 * are x's leading dims.  Its operands do not fit an op's GG_MAX_OPERANDS, so
 * a chain is this descriptor, launched by the device's rowchain_launch.
 * A stage's y.data may be NULL (for any stage but the last): nothing after
 * the chain reads it, so a kernel keeping the row in registers need not
 * write it (a reference passes it through the last y's memory instead).
 * h.data, when set, receives the normed value before the activation.
 * round_x (rmsnorm's attribute, rms stages only): x * rstd is rounded to the
 * dtype before the weight multiply, where the unfused rmsnorm rounds it. */
#define GG_ROWCHAIN_MAX_STAGES 16
typedef struct {
    gg_tensor w, b;              /* b.data NULL: no bias (rmsnorm) */
    gg_tensor h, y;
    double eps, p;               /* the node attributes; p: the scale activation's factor */
    int rms, act;                /* act: GG_ACT_* */
    int round_x;
} gg_rowchain_stage;
typedef struct {
    gg_tensor x;
    int n;
    gg_rowchain_stage st[GG_ROWCHAIN_MAX_STAGES];
} gg_rowchain;
/* The op that names a chain's launch in a plan (messages, program.list); it
 * runs only through gg_rowchain_*: its cpu and check are NULL. */
const gg_op_def *gg_ops_rowchain(void);
/* 0 when c is a chain a backend may run: 1..GG_ROWCHAIN_MAX_STAGES stages of
 * float tensors of one dtype, every h and y x's shape, w and b a row, the last
 * y set; else -EINVAL with the reason in err. */
int gg_rowchain_check(const gg_rowchain *c, char *err, size_t errlen);
/* Stage k as a fused.norm_act launch (inputs prev, w[, b]; outputs y[, h]),
 * prev being stage k - 1's output (x for stage 0) and a NULL y the last
 * stage's: running the stages in order through the references gives the
 * unfused node sequence's bytes.  Returns nin; *nout set. */
int gg_rowchain_stage_launch(const gg_rowchain *c, int k, gg_tensor *in, gg_tensor *out,
                             int *nout, gg_op_attrs *attrs);
/* The chain through the CPU references, stage by stage. */
void gg_rowchain_run_cpu(const gg_rowchain *c);

/* Internal to the op library (ops_*.c define GG_OPS_IMPL before including
 * this header): inline conversions for the hot loops, and the per-op CPU
 * references the table points at.  The exported gg_f16_to_f32() etc. are the
 * same code. */
#ifdef GG_OPS_IMPL
#include <string.h>

static inline uint32_t gg_f32_bits_(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float gg_f32_from_bits_(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float gg_f16_to_f32_inl(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu)                       /* inf / NaN, payload kept */
        return gg_f32_from_bits_(sign | 0x7f800000u | (man << 13));
    if (exp != 0)                           /* normal: rebias 15 -> 127 */
        return gg_f32_from_bits_(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in f32 */
    return gg_f32_from_bits_(sign | gg_f32_bits_((float)man * 0x1p-24f));
}

static inline uint16_t gg_f32_to_f16_inl(float f)
{
    uint32_t x = gg_f32_bits_(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {                 /* NaN: keep the top payload bits */
        uint32_t m = (ax >> 13) & 0x3ffu;
        return (uint16_t)(sign | 0x7c00u | (m ? m : 0x200u));
    }
    if (ax >= 0x477ff000u)                  /* >= 65520 rounds to inf (and inf) */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {                 /* below 2^-14: f16 subnormal or 0 */
        /* Adding 0.5 makes the FPU round |f| to a multiple of 2^-24 (RNE). */
        float v = gg_f32_from_bits_(ax) + 0.5f;
        return (uint16_t)(sign | (gg_f32_bits_(v) - 0x3f000000u));
    }
    /* normal: rebias 127 -> 15 and round to nearest even on bit 13 */
    ax += 0xc8000fffu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | (ax >> 13));
}

static inline float gg_bf16_to_f32_inl(uint16_t b)
{
    return gg_f32_from_bits_((uint32_t)b << 16);
}

static inline uint16_t gg_f32_to_bf16_inl(float f)
{
    uint32_t x = gg_f32_bits_(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {  /* NaN: truncate, keep it a NaN */
        uint16_t r = (uint16_t)(x >> 16);
        return (r & 0x7fu) ? r : (uint16_t)(r | 0x40u);
    }
    x += 0x7fffu + ((x >> 16) & 1u);        /* RNE; overflow carries into inf */
    return (uint16_t)(x >> 16);
}

/* Casts (cast's rules, shared by every op that converts).  A float to an
 * integer: toward zero, NaN to 0, saturating at the type's range. */
static inline int64_t gg_f_to_i64_inl(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;                      /* C truncates toward zero */
}

static inline int32_t gg_f_to_i32_inl(double v)
{
    if (v != v)
        return 0;
    if (v >= 2147483647.0)
        return INT32_MAX;
    if (v <= -2147483648.0)
        return INT32_MIN;
    return (int32_t)v;
}

/* v rounded to `bits` significant bits, to nearest even, as a double (exact:
 * at most 53 bits).  An integer to f32 (24 bits), bf16 (8) or f16 (11) in
 * one rounding: through f32 first would round twice. */
static inline double gg_i64_round_inl(int64_t v, int bits)
{
    uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int nb = 0;
    for (uint64_t t = m; t; t >>= 1)
        nb++;
    double r;
    if (nb <= bits) {
        r = (double)m;
    } else {
        int sh = nb - bits;
        uint64_t q = m >> sh, rem = m & (((uint64_t)1 << sh) - 1), half = (uint64_t)1 << (sh - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        r = (double)q;
        for (int i = 0; i < sh; i++)
            r *= 2.0;
    }
    return v < 0 ? -r : r;
}

/* An integer into a floating dtype's storage bits (f32: the float's). */
static inline uint32_t gg_i64_to_fbits_inl(int64_t v, gg_dtype dt)
{
    if (dt == GG_DT_F16)
        return gg_f32_to_f16_inl((float)gg_i64_round_inl(v, 11));
    if (dt == GG_DT_BF16)
        return gg_f32_to_bf16_inl((float)gg_i64_round_inl(v, 8));
    return gg_f32_bits_((float)gg_i64_round_inl(v, 24));
}

/* CPU references (ops_cpu.c), in table order. */
void gg_cpu_copy(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs);
void gg_cpu_add(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                const gg_op_attrs *attrs);
void gg_cpu_mul(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                const gg_op_attrs *attrs);
void gg_cpu_scale(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                  const gg_op_attrs *attrs);
void gg_cpu_gelu(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs);
void gg_cpu_silu(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs);
void gg_cpu_silu_mul(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                     const gg_op_attrs *attrs);
void gg_cpu_layernorm(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                      const gg_op_attrs *attrs);
void gg_cpu_rmsnorm(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                    const gg_op_attrs *attrs);
void gg_cpu_linear(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                   const gg_op_attrs *attrs);
void gg_cpu_softmax(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                    const gg_op_attrs *attrs);
void gg_cpu_embedding(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                      const gg_op_attrs *attrs);
void gg_cpu_rope(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs);
void gg_cpu_cache_write(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                        const gg_op_attrs *attrs);
void gg_cpu_attention_decode(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                             const gg_op_attrs *attrs);
void gg_cpu_argmax(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                   const gg_op_attrs *attrs);
void gg_cpu_cast(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs);
#endif /* GG_OPS_IMPL */

#ifdef __cplusplus
}
#endif
#endif
