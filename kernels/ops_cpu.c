/* SPDX-License-Identifier: MIT */
/* CPU references.  All arithmetic is f32 whatever the storage dtype: f16/bf16
 * operands are converted chunk by chunk into small stack buffers, f32
 * operands are used in place.  Shapes were validated by the op's check at
 * define time and are not re-checked here.
 *
 * Every op works row by row (a row = the last dim; linear's rows are x's
 * rows) and a row's result depends only on that row's data and its position
 * inside the row, never on other rows or on the batch size: the summation
 * order of every reduction is a function of the row length alone.  Padding
 * rows full of NaN/Inf are therefore harmless to real rows, and row r of a
 * batch is bit-identical to the same row run on its own.
 *
 * All ops but linear may run in place (y over x, or over a). */

/* a*b+c stays two roundings everywhere in this file (GNU C dialects let the
 * compiler fuse it into an FMA wherever it likes, which could make a row's
 * bits depend on which code path computed it, i.e. on the batch size). */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define GG_OPS_IMPL
#include "ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 1024 /* floats per conversion buffer: a d=1024 row converts once */

/* ---- element access ----------------------------------------------------- */

static inline int64_t t_numel(const gg_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->desc.ndim; i++)
        n *= t->desc.dims[i];
    return n;
}

static inline int64_t t_last(const gg_tensor *t)
{
    return t->desc.dims[t->desc.ndim - 1];
}

/* Bulk conversions, 4 lanes at a time with GNU vector extensions (GCC and
 * Clang; plain SSE2 on x86-64, NEON on arm64), the tail through the scalar
 * helpers.  Bit-for-bit the same results as gg_f16_to_f32_inl() etc.; the
 * tests compare the two on every f16 / bf16 pattern. */
#if defined(__GNUC__) || defined(__clang__)
#define GG_VEC4 1
typedef uint16_t v4u16 __attribute__((vector_size(8)));
typedef uint32_t v4u32 __attribute__((vector_size(16)));
typedef int32_t v4i32 __attribute__((vector_size(16)));
typedef float v4f32 __attribute__((vector_size(16)));

/* lanes of a where mask is set, else b */
#define VSEL(mask, a, b) (((v4u32)(mask) & (a)) | (~(v4u32)(mask) & (b)))
#endif

static inline void load_f16(const uint16_t *p, float *dst, int64_t n)
{
    int64_t i = 0;
#ifdef GG_VEC4
    for (; i + 4 <= n; i += 4) {
        v4u16 hv;
        memcpy(&hv, p + i, sizeof hv);
        v4u32 h = __builtin_convertvector(hv, v4u32);
        v4u32 em = h & 0x7fffu;
        v4u32 normal = (em << 13) + 0x38000000u;   /* rebias 15 -> 127 */
        v4u32 infnan = (em << 13) + 0x70000000u;   /* exponent 31 -> 255 */
        v4f32 subf = __builtin_convertvector((v4i32)em, v4f32) * 0x1p-24f;
        v4u32 r = VSEL((v4i32)em >= 0x400, normal, (v4u32)subf);
        r = VSEL((v4i32)em >= 0x7c00, infnan, r);
        r |= (h & 0x8000u) << 16;
        memcpy(dst + i, &r, sizeof r);
    }
#endif
    for (; i < n; i++)
        dst[i] = gg_f16_to_f32_inl(p[i]);
}

static inline void store_f16(uint16_t *p, const float *src, int64_t n)
{
    int64_t i = 0;
#ifdef GG_VEC4
    for (; i + 4 <= n; i += 4) {
        v4u32 x;
        memcpy(&x, src + i, sizeof x);
        v4u32 ax = x & 0x7fffffffu;
        v4i32 iax = (v4i32)ax;
        v4u32 m = (ax >> 13) & 0x3ffu;
        v4u32 nanv = 0x7c00u | m | ((v4u32)(m == 0) & 0x200u);
        v4u32 sub = (v4u32)((v4f32)ax + 0.5f) - 0x3f000000u;
        v4u32 r = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
        r = VSEL(iax < 0x38800000, sub, r);
        const v4u32 inf = {0x7c00u, 0x7c00u, 0x7c00u, 0x7c00u};
        r = VSEL(iax >= 0x477ff000, inf, r);
        r = VSEL(iax > 0x7f800000, nanv, r);
        r |= (x >> 16) & 0x8000u;
        v4u16 out = __builtin_convertvector(r, v4u16);
        memcpy(p + i, &out, sizeof out);
    }
#endif
    for (; i < n; i++)
        p[i] = gg_f32_to_f16_inl(src[i]);
}

static inline void load_bf16(const uint16_t *p, float *dst, int64_t n)
{
    int64_t i = 0;
#ifdef GG_VEC4
    for (; i + 4 <= n; i += 4) {
        v4u16 hv;
        memcpy(&hv, p + i, sizeof hv);
        v4u32 r = __builtin_convertvector(hv, v4u32) << 16;
        memcpy(dst + i, &r, sizeof r);
    }
#endif
    for (; i < n; i++)
        dst[i] = gg_bf16_to_f32_inl(p[i]);
}

static inline void store_bf16(uint16_t *p, const float *src, int64_t n)
{
    int64_t i = 0;
#ifdef GG_VEC4
    for (; i + 4 <= n; i += 4) {
        v4u32 x;
        memcpy(&x, src + i, sizeof x);
        v4u32 rne = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
        v4u32 q = x >> 16;
        q |= (v4u32)((q & 0x7fu) == 0) & 0x40u;
        v4u32 r = VSEL((v4i32)(x & 0x7fffffffu) > 0x7f800000, q, rne);
        v4u16 out = __builtin_convertvector(r, v4u16);
        memcpy(p + i, &out, sizeof out);
    }
#endif
    for (; i < n; i++)
        p[i] = gg_f32_to_bf16_inl(src[i]);
}

static inline void load_f32(const void *base, gg_dtype dt, int64_t off, int64_t n, float *dst)
{
    if (dt == GG_DT_F16)
        load_f16((const uint16_t *)base + off, dst, n);
    else if (dt == GG_DT_BF16)
        load_bf16((const uint16_t *)base + off, dst, n);
    else
        memcpy(dst, (const float *)base + off, (size_t)n * sizeof(float));
}

static inline void store_f32(void *base, gg_dtype dt, int64_t off, int64_t n, const float *src)
{
    if (dt == GG_DT_F16)
        store_f16((uint16_t *)base + off, src, n);
    else if (dt == GG_DT_BF16)
        store_bf16((uint16_t *)base + off, src, n);
    else
        memmove((float *)base + off, src, (size_t)n * sizeof(float));
}

/* n elements from off as f32: in place for f32, else converted into buf. */
static inline const float *view_in(const void *base, gg_dtype dt, int64_t off, int64_t n,
                                   float *buf)
{
    if (dt == GG_DT_F32)
        return (const float *)base + off;
    load_f32(base, dt, off, n, buf);
    return buf;
}

/* Where to compute n outputs from off: in place for f32, else buf (then
 * commit() converts it out). */
static inline float *view_out(void *base, gg_dtype dt, int64_t off, float *buf)
{
    return dt == GG_DT_F32 ? (float *)base + off : buf;
}

static inline void commit(void *base, gg_dtype dt, int64_t off, int64_t n, const float *src)
{
    if (dt != GG_DT_F32)
        store_f32(base, dt, off, n, src);
}

/* A source read a chunk at a time along rows of length d.  When a row fits
 * in one chunk, a converted row is kept and reused by the next pass. */
typedef struct {
    const void *base;
    gg_dtype dt;
    int64_t d;
    int64_t cached;       /* row held in buf, or -1 */
    float buf[CHUNK];
} rowsrc;

static inline void rs_init(rowsrc *s, const gg_tensor *t, int64_t d)
{
    s->base = t->data;
    s->dt = t->desc.dtype;
    s->d = d;
    s->cached = -1;
}

static inline const float *rs_get(rowsrc *s, int64_t row, int64_t c0, int64_t m)
{
    int64_t off = row * s->d + c0;
    if (s->dt == GG_DT_F32)
        return (const float *)s->base + off;
    if (s->d <= CHUNK) {
        if (s->cached != row) {
            load_f32(s->base, s->dt, off, m, s->buf);
            s->cached = row;
        }
        return s->buf;
    }
    load_f32(s->base, s->dt, off, m, s->buf);
    return s->buf;
}

static inline double attr_or(const gg_op_attrs *a, int i, double def)
{
    return a ? a->v[i] : def;
}

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* ---- reductions (fixed 8-lane order: a function of n only) -------------- */

static inline float lanes_sum8(const float *acc)
{
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static inline float sum_f32(const float *x, int64_t n)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += x[i + j];
    float s = lanes_sum8(acc);
    for (; i < n; i++)
        s += x[i];
    return s;
}

static inline float sumsq_dev_f32(const float *x, int64_t n, float mean)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float t = x[i + j] - mean;
            acc[j] += t * t;
        }
    float s = lanes_sum8(acc);
    for (; i < n; i++) {
        float t = x[i] - mean;
        s += t * t;
    }
    return s;
}

static inline float max_f32(const float *x, int64_t n)
{
    float acc[8];
    for (int j = 0; j < 8; j++)
        acc[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    float m = acc[0];
    for (int j = 1; j < 8; j++)
        m = acc[j] > m ? acc[j] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/* ---- scalar math -------------------------------------------------------- */

#define GG_SQRT1_2 0.70710678118654752440f
#define GG_SQRT_2_OVER_PI 0.79788456080286535588f

static inline float silu_f(float x)
{
    return x / (1.0f + expf(-x));
}

/* v as a tensor of dtype dt holds it: the ops whose round attrs follow a
 * PyTorch spelling that stores an intermediate in the tensor's dtype round
 * there too. */
static inline float round_to(gg_dtype dt, float v)
{
    switch (dt) {
    case GG_DT_F16:
        return gg_f16_to_f32_inl(gg_f32_to_f16_inl(v));
    case GG_DT_BF16:
        return gg_bf16_to_f32_inl(gg_f32_to_bf16_inl(v));
    default:
        return v;
    }
}

static inline float gelu_erf_f(float x)
{
    return 0.5f * x * (1.0f + erff(x * GG_SQRT1_2));
}

static inline float gelu_tanh_f(float x)
{
    float inner = GG_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

/* ---- elementwise -------------------------------------------------------- */

enum { U_SCALE, U_GELU_ERF, U_GELU_TANH, U_SILU };

static void unary(const gg_tensor *x, const gg_tensor *y, int kind, float s)
{
    gg_dtype dt = x->desc.dtype;
    int64_t n = t_numel(x);
    float xb[CHUNK], yb[CHUNK];
    for (int64_t off = 0; off < n; off += CHUNK) {
        int64_t m = min64(CHUNK, n - off);
        const float *xs = view_in(x->data, dt, off, m, xb);
        float *ys = view_out(y->data, dt, off, yb);
        switch (kind) {
        case U_SCALE:
            for (int64_t i = 0; i < m; i++)
                ys[i] = xs[i] * s;
            break;
        case U_GELU_ERF:
            for (int64_t i = 0; i < m; i++)
                ys[i] = gelu_erf_f(xs[i]);
            break;
        case U_GELU_TANH:
            for (int64_t i = 0; i < m; i++)
                ys[i] = gelu_tanh_f(xs[i]);
            break;
        default:
            for (int64_t i = 0; i < m; i++)
                ys[i] = silu_f(xs[i]);
            break;
        }
        commit(y->data, dt, off, m, ys);
    }
}

enum { B_ADD, B_MUL, B_SILU_MUL, B_SILU_MUL_ROUND };

/* b has a's shape, or (add/mul) is a 1-D row of a's last dim. */
static void binary(const gg_tensor *a, const gg_tensor *b, const gg_tensor *y, int kind)
{
    gg_dtype dt = a->desc.dtype;
    int64_t n = t_numel(a), nb = t_numel(b);
    int bcast = nb != n;
    int64_t cols = bcast ? nb : n, rows = n / cols;
    float ab[CHUNK], bb[CHUNK], yb[CHUNK];
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c0 = 0; c0 < cols; c0 += CHUNK) {
            int64_t m = min64(CHUNK, cols - c0);
            int64_t off = r * cols + c0;
            const float *as = view_in(a->data, dt, off, m, ab);
            const float *bs = view_in(b->data, dt, bcast ? c0 : off, m, bb);
            float *ys = view_out(y->data, dt, off, yb);
            switch (kind) {
            case B_ADD:
                for (int64_t i = 0; i < m; i++)
                    ys[i] = as[i] + bs[i];
                break;
            case B_MUL:
                for (int64_t i = 0; i < m; i++)
                    ys[i] = as[i] * bs[i];
                break;
            case B_SILU_MUL:
                for (int64_t i = 0; i < m; i++)
                    ys[i] = silu_f(as[i]) * bs[i];
                break;
            default:
                for (int64_t i = 0; i < m; i++)
                    ys[i] = round_to(dt, silu_f(as[i])) * bs[i];
                break;
            }
            commit(y->data, dt, off, m, ys);
        }
    }
}

void gg_cpu_copy(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs)
{
    (void)nin, (void)nout, (void)attrs;
    /* one dtype for all operands: a copy is the bytes */
    memmove(out[0].data, in[0].data, (size_t)t_numel(&in[0]) * gg_dtype_size(in[0].desc.dtype));
}

void gg_cpu_add(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                const gg_op_attrs *attrs)
{
    (void)nin, (void)nout, (void)attrs;
    binary(&in[0], &in[1], &out[0], B_ADD);
}

void gg_cpu_mul(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                const gg_op_attrs *attrs)
{
    (void)nin, (void)nout, (void)attrs;
    binary(&in[0], &in[1], &out[0], B_MUL);
}

void gg_cpu_silu_mul(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                     const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    binary(&in[0], &in[1], &out[0], attr_or(attrs, 0, 0.0) != 0.0 ? B_SILU_MUL_ROUND : B_SILU_MUL);
}

void gg_cpu_scale(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                  const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    unary(&in[0], &out[0], U_SCALE, (float)attr_or(attrs, 0, 1.0));
}

void gg_cpu_gelu(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    int tanh_form = attr_or(attrs, 0, 0.0) == 1.0;
    unary(&in[0], &out[0], tanh_form ? U_GELU_TANH : U_GELU_ERF, 0.0f);
}

void gg_cpu_silu(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs)
{
    (void)nin, (void)nout, (void)attrs;
    unary(&in[0], &out[0], U_SILU, 0.0f);
}

/* ---- row-wise ----------------------------------------------------------- */

void gg_cpu_layernorm(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                      const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    const gg_tensor *y = &out[0];
    gg_dtype dt = in[0].desc.dtype;
    int64_t d = t_last(&in[0]), rows = t_numel(&in[0]) / d;
    float eps = (float)attr_or(attrs, 0, 1e-5);
    rowsrc xs, ws, bs;
    float yb[CHUNK];
    rs_init(&xs, &in[0], d);
    rs_init(&ws, &in[1], d);
    rs_init(&bs, &in[2], d);
    for (int64_t r = 0; r < rows; r++) {
        float sum = 0.0f;
        for (int64_t c0 = 0; c0 < d; c0 += CHUNK) {
            int64_t m = min64(CHUNK, d - c0);
            sum += sum_f32(rs_get(&xs, r, c0, m), m);
        }
        float mean = sum / (float)d;
        float sq = 0.0f;
        for (int64_t c0 = 0; c0 < d; c0 += CHUNK) {
            int64_t m = min64(CHUNK, d - c0);
            sq += sumsq_dev_f32(rs_get(&xs, r, c0, m), m, mean);
        }
        float rstd = 1.0f / sqrtf(sq / (float)d + eps);
        for (int64_t c0 = 0; c0 < d; c0 += CHUNK) {
            int64_t m = min64(CHUNK, d - c0);
            const float *xv = rs_get(&xs, r, c0, m);
            const float *wv = rs_get(&ws, 0, c0, m);
            const float *bv = rs_get(&bs, 0, c0, m);
            float *yv = view_out(y->data, dt, r * d + c0, yb);
            for (int64_t i = 0; i < m; i++)
                yv[i] = (xv[i] - mean) * rstd * wv[i] + bv[i];
            commit(y->data, dt, r * d + c0, m, yv);
        }
    }
}

void gg_cpu_rmsnorm(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                    const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    const gg_tensor *y = &out[0];
    gg_dtype dt = in[0].desc.dtype;
    int64_t d = t_last(&in[0]), rows = t_numel(&in[0]) / d;
    float eps = (float)attr_or(attrs, 0, 1e-6);
    int round_x = attr_or(attrs, 1, 0.0) != 0.0;
    rowsrc xs, ws;
    float yb[CHUNK];
    rs_init(&xs, &in[0], d);
    rs_init(&ws, &in[1], d);
    for (int64_t r = 0; r < rows; r++) {
        float sq = 0.0f;
        for (int64_t c0 = 0; c0 < d; c0 += CHUNK) {
            int64_t m = min64(CHUNK, d - c0);
            sq += sumsq_dev_f32(rs_get(&xs, r, c0, m), m, 0.0f);
        }
        float rr = 1.0f / sqrtf(sq / (float)d + eps);
        for (int64_t c0 = 0; c0 < d; c0 += CHUNK) {
            int64_t m = min64(CHUNK, d - c0);
            const float *xv = rs_get(&xs, r, c0, m);
            const float *wv = rs_get(&ws, 0, c0, m);
            float *yv = view_out(y->data, dt, r * d + c0, yb);
            if (round_x)
                for (int64_t i = 0; i < m; i++)
                    yv[i] = round_to(dt, xv[i] * rr) * wv[i];
            else
                for (int64_t i = 0; i < m; i++)
                    yv[i] = xv[i] * rr * wv[i];
            commit(y->data, dt, r * d + c0, m, yv);
        }
    }
}

void gg_cpu_softmax(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                    const gg_op_attrs *attrs)
{
    (void)nin, (void)nout, (void)attrs;
    const gg_tensor *y = &out[0];
    gg_dtype dt = in[0].desc.dtype;
    int64_t d = t_last(&in[0]), rows = t_numel(&in[0]) / d;
    /* The exponentials survive to the last pass in y itself (f32) or in yb
     * (a row that fits one chunk); otherwise they are recomputed. */
    int keep = dt == GG_DT_F32 || d <= CHUNK;
    rowsrc xs;
    float yb[CHUNK];
    rs_init(&xs, &in[0], d);
    for (int64_t r = 0; r < rows; r++) {
        float mx = -INFINITY;
        for (int64_t c0 = 0; c0 < d; c0 += CHUNK) {
            int64_t m = min64(CHUNK, d - c0);
            float cm = max_f32(rs_get(&xs, r, c0, m), m);
            mx = cm > mx ? cm : mx;
        }
        float sum = 0.0f;
        for (int64_t c0 = 0; c0 < d; c0 += CHUNK) {
            int64_t m = min64(CHUNK, d - c0);
            const float *xv = rs_get(&xs, r, c0, m);
            float *ev = view_out(y->data, dt, r * d + c0, yb);
            for (int64_t i = 0; i < m; i++)
                ev[i] = expf(xv[i] - mx);
            sum += sum_f32(ev, m);
        }
        float inv = 1.0f / sum;
        for (int64_t c0 = 0; c0 < d; c0 += CHUNK) {
            int64_t m = min64(CHUNK, d - c0);
            float *yv = view_out(y->data, dt, r * d + c0, yb);
            if (!keep) {
                const float *xv = rs_get(&xs, r, c0, m);
                for (int64_t i = 0; i < m; i++)
                    yv[i] = expf(xv[i] - mx);
            }
            for (int64_t i = 0; i < m; i++)
                yv[i] *= inv;
            commit(y->data, dt, r * d + c0, m, yv);
        }
    }
}

/* ---- linear ------------------------------------------------------------- */

/* One kernel computes every dot product, 2 rows of x against 4 rows of w at a
 * time; a lone last row is paired with itself and a short output block
 * repeats its last w row, the extra results being dropped.  Each dot product
 * sums four lanes over k < k4 (lane l takes k = l mod 4), reduces them as
 * (l0 + l2) + (l1 + l3) and adds the k4..k-1 tail in order: the same code
 * and order for every row whatever the batch size, so a row's result is
 * bit-identical in any batch (even where the compiler contracts a*b+c into
 * FMAs, as it treats the kernel's dot products alike). */

#define RB 2 /* x rows per kernel call */
#define OB 4 /* w rows (outputs) per kernel call */

static inline float dot_finish(const float *acc, const float *x, const float *w, int64_t k4,
                               int64_t k)
{
    float s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
    for (int64_t i = k4; i < k; i++)
        s += x[i] * w[i];
    return s;
}

static inline void kern_2x4(const float *x0, const float *x1, const float *const *w, int64_t k,
                            float out[RB][OB])
{
    float a00[4] = {0}, a01[4] = {0}, a02[4] = {0}, a03[4] = {0};
    float a10[4] = {0}, a11[4] = {0}, a12[4] = {0}, a13[4] = {0};
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    int64_t k4 = k & ~(int64_t)3;
    for (int64_t i = 0; i < k4; i += 4) {
        for (int l = 0; l < 4; l++) {
            a00[l] += x0[i + l] * w0[i + l];
            a01[l] += x0[i + l] * w1[i + l];
            a02[l] += x0[i + l] * w2[i + l];
            a03[l] += x0[i + l] * w3[i + l];
            a10[l] += x1[i + l] * w0[i + l];
            a11[l] += x1[i + l] * w1[i + l];
            a12[l] += x1[i + l] * w2[i + l];
            a13[l] += x1[i + l] * w3[i + l];
        }
    }
    out[0][0] = dot_finish(a00, x0, w0, k4, k);
    out[0][1] = dot_finish(a01, x0, w1, k4, k);
    out[0][2] = dot_finish(a02, x0, w2, k4, k);
    out[0][3] = dot_finish(a03, x0, w3, k4, k);
    out[1][0] = dot_finish(a10, x1, w0, k4, k);
    out[1][1] = dot_finish(a11, x1, w1, k4, k);
    out[1][2] = dot_finish(a12, x1, w2, k4, k);
    out[1][3] = dot_finish(a13, x1, w3, k4, k);
}

static inline void put_y(void *y, gg_dtype dt, int64_t idx, float v)
{
    if (dt == GG_DT_F32)
        ((float *)y)[idx] = v;
    else if (dt == GG_DT_F16)
        ((uint16_t *)y)[idx] = gg_f32_to_f16_inl(v);
    else
        ((uint16_t *)y)[idx] = gg_f32_to_bf16_inl(v);
}

/* Without scratch memory (malloc failed): one dot at a time, in the same
 * order as the kernel. */
static void linear_lowmem(const gg_tensor *x, const gg_tensor *w, const gg_tensor *b,
                          const gg_tensor *y, int64_t rows, int64_t k, int64_t n)
{
    gg_dtype dt = x->desc.dtype;
    int64_t k4 = k & ~(int64_t)3;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < n; o++) {
            float acc[4] = {0};
            for (int64_t i = 0; i < k4; i++)
                acc[i & 3] += gg_load(x->data, dt, r * k + i) * gg_load(w->data, dt, o * k + i);
            float s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
            for (int64_t i = k4; i < k; i++)
                s += gg_load(x->data, dt, r * k + i) * gg_load(w->data, dt, o * k + i);
            if (b)
                s += gg_load(b->data, dt, o);
            put_y(y->data, dt, r * n + o, s);
        }
}

void gg_cpu_linear(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                   const gg_op_attrs *attrs)
{
    (void)nout, (void)attrs;
    const gg_tensor *x = &in[0], *w = &in[1], *b = nin > 2 ? &in[2] : NULL;
    const gg_tensor *y = &out[0];
    gg_dtype dt = x->desc.dtype;
    int64_t k = t_last(x), rows = t_numel(x) / k, n = w->desc.dims[0];

    /* f32 operands in place; f16/bf16: x converted once, w OB rows at a time */
    const float *xf = (const float *)x->data;
    float *wblk = NULL, *scratch = NULL;
    if (dt != GG_DT_F32) {
        scratch = malloc((size_t)(rows + OB) * (size_t)k * sizeof(float));
        if (!scratch) {
            linear_lowmem(x, w, b, y, rows, k, n);
            return;
        }
        load_f32(x->data, dt, 0, rows * k, scratch);
        xf = scratch;
        wblk = scratch + rows * k;
    }

    for (int64_t o0 = 0; o0 < n; o0 += OB) {
        int64_t on = min64(OB, n - o0);
        const float *wr[OB];
        float bias[OB];
        for (int j = 0; j < OB; j++) {
            int64_t jj = j < on ? j : on - 1; /* short block: repeat the last row */
            if (dt == GG_DT_F32) {
                wr[j] = (const float *)w->data + (o0 + jj) * k;
            } else {
                if (j < on)
                    load_f32(w->data, dt, (o0 + j) * k, k, wblk + j * k);
                wr[j] = wblk + jj * k;
            }
            bias[j] = b ? gg_load(b->data, dt, o0 + jj) : 0.0f;
        }
        for (int64_t r = 0; r < rows; r += RB) {
            int64_t rn = min64(RB, rows - r);
            float acc[RB][OB];
            kern_2x4(xf + r * k, xf + (r + rn - 1) * k, wr, k, acc);
            for (int i = 0; i < rn; i++)
                for (int j = 0; j < on; j++)
                    put_y(y->data, dt, (r + i) * n + o0 + j, acc[i][j] + bias[j]);
        }
    }
    free(scratch);
}

/* ---- decode-step ops ------------------------------------------------------
 * Runtime indices (ids, positions, lengths, the batch word) are read from
 * i32 tensors and bounds-checked here, as in the kernels: nothing outside
 * the operands is ever read or written. */

static inline int32_t i32_at(const gg_tensor *t, int64_t i)
{
    return ((const int32_t *)t->data)[i];
}

/* Rows [0, n) are real: the daemon's batch word when given, else all. */
static int64_t real_rows(const gg_tensor *in, int nin, int nreq, int64_t rows)
{
    if (nin <= nreq || !in[nreq].data)
        return rows;
    int64_t b = i32_at(&in[nreq], 0);
    return b < 0 ? 0 : b > rows ? rows : b;
}

static void copy_row_cvt(const void *src, gg_dtype sdt, int64_t si, void *dst, gg_dtype ddt,
                         int64_t di, int64_t n)
{
    if (sdt == ddt) {
        size_t es = gg_dtype_size(sdt);
        memmove((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es,
                (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        gg_store(dst, ddt, di + i, gg_load(src, sdt, si + i));
}

void gg_cpu_embedding(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                      const gg_op_attrs *attrs)
{
    (void)nin, (void)nout, (void)attrs;
    const gg_tensor *ids = &in[0], *tab = &in[1], *y = &out[0];
    const int64_t rows = t_numel(ids), v = tab->desc.dims[0], d = tab->desc.dims[1];
    const gg_dtype dt = y->desc.dtype;
    const int wide = ids->desc.dtype == GG_DT_I64;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t id = wide ? ((const int64_t *)ids->data)[r] : (int64_t)i32_at(ids, r);
        if (id < 0 || id >= v)
            for (int64_t i = 0; i < d; i++)
                gg_store(y->data, dt, r * d + i, 0.0f);
        else
            copy_row_cvt(tab->data, tab->desc.dtype, id * d, y->data, dt, r * d, d);
    }
}

/* A runtime index (positions, lens) of row r: i32 or i64, [rows] or [1]
 * (one value for every row). */
static inline int64_t index_at(const gg_tensor *t, int64_t r)
{
    const int64_t i = t_numel(t) == 1 ? 0 : r;
    return t->desc.dtype == GG_DT_I64 ? ((const int64_t *)t->data)[i] : (int64_t)i32_at(t, i);
}

/* The inverse frequency of pair i, as the kernels compute it (f32): the
 * inv_freq operand when given (the model's own, any rope scaling in it),
 * else theta's. */
static inline float rope_inv_freq(const gg_tensor *inv, float theta, int i, int rd)
{
    if (inv)
        return gg_load(inv->data, inv->desc.dtype, i);
    return 1.0f / powf(theta, (float)(2 * i) / (float)rd);
}

void gg_cpu_rope(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs)
{
    (void)nout;
    const gg_tensor *x = &in[0], *pos = &in[1], *y = &out[0], *inv = nin > 2 ? &in[2] : NULL;
    const gg_dtype dt = x->desc.dtype;
    const int64_t rows = x->desc.dims[0], h = x->desc.dims[1], dh = x->desc.dims[2];
    const float theta = (float)attrs->v[0], amp = (float)attrs->v[3];
    const int gptj = attrs->v[1] == 1.0;
    const int rd = attrs->v[2] > 0 ? (int)attrs->v[2] : (int)dh;
    const int half = rd / 2;
    float buf[2];
    for (int64_t r = 0; r < rows; r++) {
        const float p = (float)index_at(pos, r);
        for (int64_t hh = 0; hh < h; hh++) {
            const int64_t base = (r * h + hh) * dh;
            for (int i = 0; i < half; i++) {
                const float ang = p * rope_inv_freq(inv, theta, i, rd);
                const float c = cosf(ang) * amp, s = sinf(ang) * amp;
                const int64_t i0 = base + (gptj ? 2 * i : i), i1 = base + (gptj ? 2 * i + 1 : i + half);
                const float a = gg_load(x->data, dt, i0), b = gg_load(x->data, dt, i1);
                buf[0] = a * c - b * s;
                buf[1] = b * c + a * s;
                gg_store(y->data, dt, i0, buf[0]);
                gg_store(y->data, dt, i1, buf[1]);
            }
            if (y->data != x->data)
                copy_row_cvt(x->data, dt, base + rd, y->data, dt, base + rd, dh - rd);
        }
    }
}

void gg_cpu_cache_write(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                        const gg_op_attrs *attrs)
{
    (void)nout;
    const gg_tensor *x = &in[0], *pos = &in[1], *cache = &out[0];
    const int bhsd = attrs && attrs->v[0] == 1.0;
    const int64_t rows = x->desc.dims[0], hkv = x->desc.dims[1], dh = x->desc.dims[2];
    const int64_t s = cache->desc.dims[bhsd ? 2 : 1], row = hkv * dh;
    const int64_t n = real_rows(in, nin, 2, rows);
    for (int64_t r = 0; r < n; r++) {
        const int64_t p = index_at(pos, r);
        if (p < 0 || p >= s)
            continue;
        if (!bhsd) {
            copy_row_cvt(x->data, x->desc.dtype, r * row, cache->data, cache->desc.dtype,
                         (r * s + p) * row, row);
            continue;
        }
        for (int64_t kh = 0; kh < hkv; kh++)
            copy_row_cvt(x->data, x->desc.dtype, r * row + kh * dh, cache->data,
                         cache->desc.dtype, ((r * hkv + kh) * s + p) * dh, dh);
    }
}

void gg_cpu_attention_decode(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                             const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    const gg_tensor *q = &in[0], *k = &in[1], *v = &in[2], *lens = &in[3], *y = &out[0];
    const gg_dtype dt = q->desc.dtype;
    const int bhsd = attrs->v[1] == 1.0;
    const int64_t rows = q->desc.dims[0], hq = q->desc.dims[1], dh = q->desc.dims[2];
    const int64_t s = k->desc.dims[bhsd ? 2 : 1], hkv = k->desc.dims[bhsd ? 1 : 2], grp = hq / hkv;
    /* element strides of a batch row, a kv head and a position */
    const int64_t sb = s * hkv * dh, sh = bhsd ? s * dh : dh, sp = bhsd ? dh : hkv * dh;
    const float scale = attrs->v[0] != 0.0 ? (float)attrs->v[0] : 1.0f / sqrtf((float)dh);
    float *qf = malloc(sizeof(float) * (size_t)dh * 2), *acc = qf + dh;
    float *sc = malloc(sizeof(float) * (size_t)(s > 0 ? s : 1));
    if (!qf || !sc) {
        free(qf);
        free(sc);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t len = index_at(lens, r);
        len = len < 0 ? 0 : len > s ? s : len;
        for (int64_t h = 0; h < hq; h++) {
            const int64_t kh = h / grp, qo = (r * hq + h) * dh;
            for (int64_t d = 0; d < dh; d++) {
                qf[d] = gg_load(q->data, dt, qo + d);
                acc[d] = 0.0f;
            }
            float m = -INFINITY, l = 0.0f;
            for (int64_t j = 0; j < len; j++) {
                const int64_t ko = r * sb + kh * sh + j * sp;
                float dot = 0.0f;
                for (int64_t d = 0; d < dh; d++)
                    dot += qf[d] * gg_load(k->data, dt, ko + d);
                sc[j] = dot * scale;
                if (sc[j] > m)
                    m = sc[j];
            }
            for (int64_t j = 0; j < len; j++) {
                const int64_t vo = r * sb + kh * sh + j * sp;
                const float p = expf(sc[j] - m);
                l += p;
                for (int64_t d = 0; d < dh; d++)
                    acc[d] += p * gg_load(v->data, dt, vo + d);
            }
            for (int64_t d = 0; d < dh; d++)
                gg_store(y->data, dt, qo + d, len ? acc[d] / l : 0.0f);
        }
    }
    free(qf);
    free(sc);
}

void gg_cpu_argmax(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                   const gg_op_attrs *attrs)
{
    (void)nin, (void)nout, (void)attrs;
    const gg_tensor *x = &in[0];
    const int64_t cols = t_last(x), rows = t_numel(x) / cols;
    int32_t *y = out[0].data;
    for (int64_t r = 0; r < rows; r++) {
        int64_t best = 0;
        float bv = gg_load(x->data, x->desc.dtype, r * cols);
        for (int64_t i = 1; i < cols && !isnan(bv); i++) {
            float v = gg_load(x->data, x->desc.dtype, r * cols + i);
            if (v > bv || isnan(v)) {   /* NaN is the maximum, as torch.argmax */
                bv = v;
                best = i;
            }
        }
        y[r] = (int32_t)best;
    }
}

void gg_cpu_cast(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                 const gg_op_attrs *attrs)
{
    (void)nin, (void)nout, (void)attrs;
    copy_row_cvt(in[0].data, in[0].desc.dtype, 0, out[0].data, out[0].desc.dtype, 0,
                 t_numel(&in[0]));
}
