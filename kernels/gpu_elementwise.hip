/* SPDX-License-Identifier: MIT */
/* The elementwise family's general kernels (ops_elementwise.c has the rules
 * and the CPU reference they match): the broadcasting binary ops with their
 * scalar form, comparisons, bitwise ops, where, the unary ops, fill, arange
 * and cast between every pair of dtypes.  copy, scale, gelu, silu, silu_mul
 * and add/mul in their older forms run on gpu_ops.hip's vector kernels.
 *
 * One grid-stride kernel per (operand dtype, output dtype), the op a
 * runtime argument: floating operands compute in f32, integers in int64
 * with two's-complement wrap.  Operands of y's exact shape index by y's
 * element index; broadcast ones through per-dim strides (0 where the input
 * has 1) over y's dims padded to 4. */
#include "gpu_internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* ---- dtype access: a floating dtype loads as float, the others as int64 ---- */

template <int DT> struct ewt;
template <> struct ewt<GG_DT_F32> {
    typedef float T;
    typedef float V;
    enum { F = 1 };
    static __device__ __forceinline__ V ld(const T *p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v) { p[i] = v; }
};
template <> struct ewt<GG_DT_F16> {
    typedef uint16_t T;
    typedef float V;
    enum { F = 1 };
    static __device__ __forceinline__ V ld(const T *p, int64_t i)
    {
        return gg_f16_bits_to_f32(p[i]);
    }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v)
    {
        p[i] = gg_f32_to_f16_bits(v);
    }
};
template <> struct ewt<GG_DT_BF16> {
    typedef uint16_t T;
    typedef float V;
    enum { F = 1 };
    static __device__ __forceinline__ V ld(const T *p, int64_t i)
    {
        return gg_bf16_bits_to_f32(p[i]);
    }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v)
    {
        p[i] = gg_f32_to_bf16_bits(v);
    }
};
template <> struct ewt<GG_DT_I32> {
    typedef int32_t T;
    typedef int64_t V;
    enum { F = 0 };
    static __device__ __forceinline__ V ld(const T *p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v)
    {
        p[i] = (int32_t)(uint32_t)(uint64_t)v; /* the low 32 bits */
    }
};
template <> struct ewt<GG_DT_I64> {
    typedef int64_t T;
    typedef int64_t V;
    enum { F = 0 };
    static __device__ __forceinline__ V ld(const T *p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v) { p[i] = v; }
};
template <> struct ewt<GG_DT_BOOL> {
    typedef uint8_t T;
    typedef int64_t V;
    enum { F = 0 };
    static __device__ __forceinline__ V ld(const T *p, int64_t i) { return p[i] != 0; }
    static __device__ __forceinline__ void st(T *p, int64_t i, V v) { p[i] = v != 0; }
};

/* ---- the math (as ops_elementwise.c) --------------------------------------- */

static __device__ __forceinline__ float ewm_arith(int id, float a, float b)
{
    switch (id) {
    case GG_OP_ADD: return __fadd_rn(a, b);
    case GG_OP_SUB: return __fsub_rn(a, b);
    case GG_OP_MUL: return __fmul_rn(a, b);
    case GG_OP_DIV: return __fdiv_rn(a, b);
    case GG_OP_POW: return powf(a, b);
    case GG_OP_MAXIMUM: return a != a || b != b ? a + b : a > b ? a : b;
    default: return a != a || b != b ? a + b : a < b ? a : b; /* GG_OP_MINIMUM */
    }
}

static __device__ __forceinline__ int64_t ewm_arith(int id, int64_t a, int64_t b)
{
    const uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (id) {
    case GG_OP_ADD: return (int64_t)(ua + ub);
    case GG_OP_SUB: return (int64_t)(ua - ub);
    case GG_OP_MUL: return (int64_t)(ua * ub);
    case GG_OP_MAXIMUM: return a > b ? a : b;
    case GG_OP_MINIMUM: return a < b ? a : b;
    case GG_OP_BITWISE_AND: return a & b;
    case GG_OP_BITWISE_OR: return a | b;
    default: return a ^ b; /* GG_OP_BITWISE_XOR */
    }
}

template <typename V> static __device__ __forceinline__ bool ewm_cmp(int id, V a, V b)
{
    switch (id) {
    case GG_OP_EQ: return a == b;
    case GG_OP_NE: return a != b;
    case GG_OP_LT: return a < b;
    case GG_OP_LE: return a <= b;
    case GG_OP_GT: return a > b;
    default: return a >= b; /* GG_OP_GE */
    }
}

static __device__ __forceinline__ float ewm_unary(int id, float x, bool)
{
    switch (id) {
    case GG_OP_NEG: return -x;
    case GG_OP_ABS: return fabsf(x);
    case GG_OP_RSQRT: return __fdiv_rn(1.0f, sqrtf(x));
    case GG_OP_SQRT: return sqrtf(x);
    case GG_OP_EXP: return expf(x);
    case GG_OP_LOG: return logf(x);
    case GG_OP_TANH: return tanhf(x);
    case GG_OP_SIN: return sinf(x);
    case GG_OP_COS: return cosf(x);
    case GG_OP_SIGMOID: return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
    default: return __fdiv_rn(1.0f, x); /* GG_OP_RECIP */
    }
}

static __device__ __forceinline__ int64_t ewm_unary(int id, int64_t x, bool is_bool)
{
    switch (id) {
    case GG_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case GG_OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    default: return is_bool ? !x : ~x; /* GG_OP_BITWISE_NOT */
    }
}

/* ---- geometry ------------------------------------------------------------------ */

struct ew_geo4 {
    int64_t d[4];
    int64_t st[3][4];
};

static __device__ __forceinline__ void ew_offsets(const ew_geo4 &g, int64_t i, int nin, int64_t *o)
{
    const int64_t i3 = i % g.d[3], r3 = i / g.d[3];
    const int64_t i2 = r3 % g.d[2], r2 = r3 / g.d[2];
    const int64_t i1 = r2 % g.d[1], i0 = r2 / g.d[1];
    for (int k = 0; k < 3; k++)
        o[k] = k < nin ? i0 * g.st[k][0] + i1 * g.st[k][1] + i2 * g.st[k][2] + i3 * g.st[k][3] : 0;
}

enum { EWK_UNARY = 0, EWK_BINARY = 1, EWK_CMP = 2 };

/* y = op(a[, b]) for operand dtype DT and y dtype DTY (DT, or bool for a
 * comparison).  nin 1 for a binary op: b is the scalar (swapped when rev). */
template <int DT, int DTY>
__global__ void __launch_bounds__(256)
    k_ew_gen(int id, int kind, int nin, const void *pa, const void *pb, void *py, ew_geo4 g,
             int64_t n, bool bcast, double sc, int rev)
{
    typedef ewt<DT> A;
    typedef ewt<DTY> Y;
    typedef typename A::V V;
    const typename A::T *a = (const typename A::T *)pa, *b = (const typename A::T *)pb;
    typename Y::T *y = (typename Y::T *)py;
    const V s = (V)sc;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int64_t o[3] = {i, i, i};
        if (bcast)
            ew_offsets(g, i, nin, o);
        V x = A::ld(a, o[0]);
        if (kind == EWK_UNARY) {
            if constexpr (DT == DTY)
                Y::st(y, i, ewm_unary(id, x, DT == GG_DT_BOOL));
            continue;
        }
        V z = nin == 2 ? A::ld(b, o[1]) : s;
        if (rev) {
            V t = x;
            x = z;
            z = t;
        }
        if (kind == EWK_CMP)
            ((uint8_t *)py)[i] = ewm_cmp(id, x, z);
        else if constexpr (DT == DTY)
            Y::st(y, i, ewm_arith(id, x, z));
    }
}

/* where: raw elements of ES bytes. */
template <typename E>
__global__ void __launch_bounds__(256)
    k_ew_where(const uint8_t *cond, const E *a, const E *b, E *y, ew_geo4 g, int64_t n, bool bcast)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int64_t o[3] = {i, i, i};
        if (bcast)
            ew_offsets(g, i, 3, o);
        y[i] = cond[o[0]] ? a[o[1]] : b[o[2]];
    }
}

template <typename E> __global__ void __launch_bounds__(256) k_ew_fill(E *y, E v, int64_t n)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = v;
}

/* Floating: start + i * step in double, then f32, then the storage dtype
 * (the reference's order); integers exactly. */
template <int DT>
__global__ void __launch_bounds__(256)
    k_ew_arange(typename ewt<DT>::T *y, double start, double step, int64_t istart, int64_t istep,
                int64_t n)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if constexpr (ewt<DT>::F)
            ewt<DT>::st(y, i, (float)(start + (double)i * step));
        else
            ewt<DT>::st(y, i, istart + i * istep);
    }
}

/* ---- cast ---------------------------------------------------------------------- */

static __device__ __forceinline__ int64_t ewc_f_to_i64(float v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0f)
        return INT64_MAX;
    if (v < -9223372036854775808.0f)
        return INT64_MIN;
    return (int64_t)v;
}

static __device__ __forceinline__ int64_t ewc_f_to_i32(float v)
{
    if (v != v)
        return 0;
    if (v >= 2147483647.0f)
        return INT32_MAX;
    if (v <= -2147483648.0f)
        return INT32_MIN;
    return (int32_t)v;
}

/* v to `bits` significant bits, nearest even, as a float (one rounding:
 * the reference's gg_i64_round_inl). */
static __device__ __forceinline__ float ewc_i64_round(int64_t v, int bits)
{
    uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    const int nb = m ? 64 - __clzll((long long)m) : 0;
    float r;
    if (nb <= bits) {
        r = (float)m;
    } else {
        const int sh = nb - bits;
        uint64_t q = m >> sh, rem = m & ((1ull << sh) - 1), half = 1ull << (sh - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        r = ldexpf((float)q, sh);
    }
    return v < 0 ? -r : r;
}

template <int DI, int DO>
__global__ void __launch_bounds__(256)
    k_ew_cast(const typename ewt<DI>::T *x, typename ewt<DO>::T *y, int64_t n)
{
    typedef ewt<DI> I;
    typedef ewt<DO> O;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const typename I::V v = I::ld(x, i);
        if constexpr (I::F && O::F) {
            O::st(y, i, v);
        } else if constexpr (I::F) {
            if (DO == GG_DT_BOOL)
                O::st(y, i, v != 0.0f);
            else if (DO == GG_DT_I32)
                O::st(y, i, ewc_f_to_i32(v));
            else
                O::st(y, i, ewc_f_to_i64(v));
        } else if constexpr (O::F) {
            O::st(y, i, ewc_i64_round(v, DO == GG_DT_F32 ? 24 : DO == GG_DT_F16 ? 11 : 8));
        } else {
            O::st(y, i, v);
        }
    }
}

/* ---- launchers ---------------------------------------------------------------- */

static unsigned ew_grid(gg_gpu_ctx *c, int64_t n)
{
    return gg_gpu_grid_for(n, 256, (int64_t)c->sms * 32);
}

template <int DI, int DO>
static void ew_cast_to(gg_gpu_ctx *c, const void *x, void *y, int64_t n)
{
    k_ew_cast<DI, DO><<<ew_grid(c, n), 256, 0, c->stream>>>((const typename ewt<DI>::T *)x,
                                                            (typename ewt<DO>::T *)y, n);
}

template <int DI>
static int ew_cast_from(gg_gpu_ctx *c, gg_dtype to, const void *x, void *y, int64_t n)
{
    switch (to) {
    case GG_DT_F32: ew_cast_to<DI, GG_DT_F32>(c, x, y, n); return 0;
    case GG_DT_F16: ew_cast_to<DI, GG_DT_F16>(c, x, y, n); return 0;
    case GG_DT_BF16: ew_cast_to<DI, GG_DT_BF16>(c, x, y, n); return 0;
    case GG_DT_I32: ew_cast_to<DI, GG_DT_I32>(c, x, y, n); return 0;
    case GG_DT_I64: ew_cast_to<DI, GG_DT_I64>(c, x, y, n); return 0;
    case GG_DT_BOOL: ew_cast_to<DI, GG_DT_BOOL>(c, x, y, n); return 0;
    default: return -EINVAL;
    }
}

static int ew_cast(gg_gpu_ctx *c, gg_dtype from, gg_dtype to, const void *x, void *y, int64_t n)
{
    switch (from) {
    case GG_DT_F32: return ew_cast_from<GG_DT_F32>(c, to, x, y, n);
    case GG_DT_F16: return ew_cast_from<GG_DT_F16>(c, to, x, y, n);
    case GG_DT_BF16: return ew_cast_from<GG_DT_BF16>(c, to, x, y, n);
    case GG_DT_I32: return ew_cast_from<GG_DT_I32>(c, to, x, y, n);
    case GG_DT_I64: return ew_cast_from<GG_DT_I64>(c, to, x, y, n);
    case GG_DT_BOOL: return ew_cast_from<GG_DT_BOOL>(c, to, x, y, n);
    default: return -EINVAL;
    }
}

/* y's dims padded to 4 and each input's strides over them; *bcast set when
 * an input is not y's exact shape (by element count). */
static ew_geo4 ew_geo_of(const gg_tensor *in, int nin, const gg_tensor_desc *y, bool *bcast,
                         bool *fits)
{
    ew_geo4 g;
    memset(&g, 0, sizeof g);
    const int64_t n = gg_desc_numel(y);
    *bcast = false;
    *fits = true;
    for (int k = 0; k < 4; k++) {
        const int j = k - (4 - y->ndim);
        g.d[k] = j < 0 ? 1 : y->dims[j];
    }
    for (int i = 0; i < nin && i < 3; i++) {
        *bcast |= gg_desc_numel(&in[i].desc) != n;
        int64_t s = 1;
        for (int k = 3; k >= 0; k--) {
            const int j = k - (4 - in[i].desc.ndim);
            const int64_t d = j < 0 ? 1 : in[i].desc.dims[j];
            /* a direct launch is not checked against the op's rules: an
             * input that does not broadcast to y would be read past its end */
            if (in[i].desc.ndim > y->ndim || (d != 1 && d != g.d[k]))
                *fits = false;
            g.st[i][k] = d == 1 ? 0 : s;
            s *= d;
        }
    }
    return g;
}

template <int DT>
static void ew_gen_dt(gg_gpu_ctx *c, int id, int kind, int nin, const gg_tensor *in,
                      const gg_tensor *out, const ew_geo4 &g, int64_t n, bool bcast, double sc,
                      int rev)
{
    const void *b = nin == 2 ? in[1].data : NULL;
    if (kind == EWK_CMP)
        k_ew_gen<DT, GG_DT_BOOL><<<ew_grid(c, n), 256, 0, c->stream>>>(
            id, kind, nin, in[0].data, b, out[0].data, g, n, bcast, sc, rev);
    else
        k_ew_gen<DT, DT><<<ew_grid(c, n), 256, 0, c->stream>>>(id, kind, nin, in[0].data, b,
                                                              out[0].data, g, n, bcast, sc, rev);
}

static int ew_is_unary(int id)
{
    switch (id) {
    case GG_OP_NEG: case GG_OP_ABS: case GG_OP_RSQRT: case GG_OP_SQRT: case GG_OP_EXP:
    case GG_OP_LOG: case GG_OP_TANH: case GG_OP_SIN: case GG_OP_COS: case GG_OP_SIGMOID:
    case GG_OP_RECIP: case GG_OP_BITWISE_NOT:
        return 1;
    default:
        return 0;
    }
}

static int ew_is_cmp(int id)
{
    return id == GG_OP_EQ || id == GG_OP_NE || id == GG_OP_LT || id == GG_OP_LE ||
           id == GG_OP_GT || id == GG_OP_GE;
}

template <typename E> static void ew_fill_bytes(gg_gpu_ctx *c, void *y, const void *bits, int64_t n)
{
    E v;
    memcpy(&v, bits, sizeof v);
    k_ew_fill<E><<<ew_grid(c, n), 256, 0, c->stream>>>((E *)y, v, n);
}

template <int DT>
static void ew_arange(gg_gpu_ctx *c, void *y, double start, double step, int64_t n)
{
    k_ew_arange<DT><<<ew_grid(c, n), 256, 0, c->stream>>>((typename ewt<DT>::T *)y, start, step,
                                                          (int64_t)start, (int64_t)step, n);
}

template <typename E>
static void ew_where(gg_gpu_ctx *c, const gg_tensor *in, void *y, const ew_geo4 &g, int64_t n,
                     bool bcast)
{
    k_ew_where<E><<<ew_grid(c, n), 256, 0, c->stream>>>(
        (const uint8_t *)in[0].data, (const E *)in[1].data, (const E *)in[2].data, (E *)y, g, n,
        bcast);
}

int gg_gpu_elementwise_launch(gg_gpu_ctx *c, const gg_op_def *op, int kind, const gg_tensor *in,
                              int nin, const gg_tensor *out, const gg_op_attrs *attrs)
{
    const gg_tensor *y = &out[0];
    const int64_t n = gg_desc_numel(&y->desc);
    if (!y->data || n < 1)
        return gg_gpu_fail(-EINVAL, "%s: y is empty or has no data", op->name);
    for (int i = 0; i < nin; i++)
        if (!in[i].data || gg_desc_numel(&in[i].desc) < 1)
            return gg_gpu_fail(-EINVAL, "%s: operand %d is empty or has no data", op->name, i);
    gg_op_attrs defs;
    if (!attrs) {
        gg_ops_attr_defaults(op, &defs);
        attrs = &defs;
    }
    const gg_dtype ydt = y->desc.dtype;

    if (kind == GG_OP_FILL) {
        unsigned char bits[8] = {0};
        const double v = attrs->v[0];
        if (gg_dtype_is_float(ydt))
            gg_store(bits, ydt, 0, (float)v);
        else if (ydt == GG_DT_BOOL)
            bits[0] = v != 0;
        else
            gg_store_i64(bits, ydt, 0, (int64_t)v);
        switch (gg_dtype_size(ydt)) {
        case 1: ew_fill_bytes<uint8_t>(c, y->data, bits, n); break;
        case 2: ew_fill_bytes<uint16_t>(c, y->data, bits, n); break;
        case 4: ew_fill_bytes<uint32_t>(c, y->data, bits, n); break;
        case 8: ew_fill_bytes<uint64_t>(c, y->data, bits, n); break;
        default: return gg_gpu_fail(-EINVAL, "%s: unknown dtype", op->name);
        }
        return gg_gpu_launched(op);
    }
    if (kind == GG_OP_ARANGE) {
        const double start = attrs->v[0], step = attrs->v[1];
        switch (ydt) {
        case GG_DT_F32: ew_arange<GG_DT_F32>(c, y->data, start, step, n); break;
        case GG_DT_F16: ew_arange<GG_DT_F16>(c, y->data, start, step, n); break;
        case GG_DT_BF16: ew_arange<GG_DT_BF16>(c, y->data, start, step, n); break;
        case GG_DT_I32: ew_arange<GG_DT_I32>(c, y->data, start, step, n); break;
        case GG_DT_I64: ew_arange<GG_DT_I64>(c, y->data, start, step, n); break;
        default: return gg_gpu_fail(-EINVAL, "%s: y must not be bool", op->name);
        }
        return gg_gpu_launched(op);
    }
    if (nin < 1)
        return gg_gpu_fail(-EINVAL, "%s: no inputs", op->name);
    if (kind == GG_OP_CAST) {
        if (gg_desc_numel(&in[0].desc) != n ||
            ew_cast(c, in[0].desc.dtype, ydt, in[0].data, y->data, n) != 0)
            return gg_gpu_fail(-EINVAL, "%s: x and y must have one size and known dtypes",
                               op->name);
        return gg_gpu_launched(op);
    }
    bool bcast = false, fits = true;
    const ew_geo4 g = ew_geo_of(in, nin, &y->desc, &bcast, &fits);
    if (!fits)
        return gg_gpu_fail(-EINVAL, "%s: an input does not broadcast to y's shape", op->name);
    if (kind == GG_OP_WHERE) {
        if (nin != 3 || in[0].desc.dtype != GG_DT_BOOL || in[1].desc.dtype != ydt ||
            in[2].desc.dtype != ydt)
            return gg_gpu_fail(-EINVAL, "%s: cond must be bool and a, b, y share one dtype",
                               op->name);
        switch (gg_dtype_size(ydt)) {
        case 1: ew_where<uint8_t>(c, in, y->data, g, n, bcast); break;
        case 2: ew_where<uint16_t>(c, in, y->data, g, n, bcast); break;
        case 4: ew_where<uint32_t>(c, in, y->data, g, n, bcast); break;
        default: ew_where<uint64_t>(c, in, y->data, g, n, bcast); break;
        }
        return gg_gpu_launched(op);
    }
    const gg_dtype dt = in[0].desc.dtype;
    const int ek = ew_is_unary(kind) ? EWK_UNARY : ew_is_cmp(kind) ? EWK_CMP : EWK_BINARY;
    if (nin > 2 || (ek == EWK_UNARY && nin != 1) || (nin == 2 && in[1].desc.dtype != dt) ||
        (ek == EWK_CMP ? ydt != GG_DT_BOOL : ydt != dt))
        return gg_gpu_fail(-EINVAL, "%s: operand dtypes or counts do not fit the op", op->name);
    const double sc = ek != EWK_UNARY && nin == 1 ? attrs->v[0] : 0.0;
    const int rev = ek != EWK_UNARY && nin == 1 && attrs->v[1] != 0;
    switch (dt) {
    case GG_DT_F32: ew_gen_dt<GG_DT_F32>(c, kind, ek, nin, in, out, g, n, bcast, sc, rev); break;
    case GG_DT_F16: ew_gen_dt<GG_DT_F16>(c, kind, ek, nin, in, out, g, n, bcast, sc, rev); break;
    case GG_DT_BF16: ew_gen_dt<GG_DT_BF16>(c, kind, ek, nin, in, out, g, n, bcast, sc, rev); break;
    case GG_DT_I32: ew_gen_dt<GG_DT_I32>(c, kind, ek, nin, in, out, g, n, bcast, sc, rev); break;
    case GG_DT_I64: ew_gen_dt<GG_DT_I64>(c, kind, ek, nin, in, out, g, n, bcast, sc, rev); break;
    case GG_DT_BOOL: ew_gen_dt<GG_DT_BOOL>(c, kind, ek, nin, in, out, g, n, bcast, sc, rev); break;
    default: return gg_gpu_fail(-EINVAL, "%s: unknown dtype", op->name);
    }
    return gg_gpu_launched(op);
}
