/* The op table: operands, attributes and the shape/dtype rule of each op.
 * The daemon validates every program against these rules at define time, so
 * the check functions are the single place shapes are enforced. */
#define GG_OPS_IMPL
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum {
    OP_COPY,
    OP_ADD,
    OP_MUL,
    OP_SCALE,
    OP_GELU,
    OP_SILU,
    OP_SILU_MUL,
    OP_LAYERNORM,
    OP_RMSNORM,
    OP_LINEAR,
    OP_SOFTMAX,
    OP_EMBEDDING,
    OP_ROPE,
    OP_CACHE_WRITE,
    OP_ATTENTION_DECODE,
    OP_ARGMAX,
    OP_CAST,
    OP_COUNT
};

/* ---- messages ----------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

typedef struct {
    char s[96];
} shape_buf;

/* "[5, 1024]" */
static const char *shape_str(const gg_tensor_desc *d, shape_buf *b)
{
    size_t n = 0;
    int nd = d->ndim < 0 ? 0 : d->ndim > GG_MAX_DIMS ? GG_MAX_DIMS : d->ndim;
    b->s[n++] = '[';
    for (int i = 0; i < nd; i++)
        n += (size_t)snprintf(b->s + n, sizeof b->s - n, "%s%lld", i ? ", " : "",
                              (long long)d->dims[i]);
    snprintf(b->s + n, sizeof b->s - n, "]");
    return b->s;
}

/* ---- operand names ------------------------------------------------------ */

typedef struct {
    const char *in[GG_MAX_OPERANDS];
    const char *out[GG_MAX_OPERANDS];
} op_names;

static const op_names names[OP_COUNT] = {
    [OP_COPY] = {{"x"}, {"y"}},
    [OP_ADD] = {{"a", "b"}, {"y"}},
    [OP_MUL] = {{"a", "b"}, {"y"}},
    [OP_SCALE] = {{"x"}, {"y"}},
    [OP_GELU] = {{"x"}, {"y"}},
    [OP_SILU] = {{"x"}, {"y"}},
    [OP_SILU_MUL] = {{"a", "b"}, {"y"}},
    [OP_LAYERNORM] = {{"x", "w", "b"}, {"y"}},
    [OP_RMSNORM] = {{"x", "w"}, {"y"}},
    [OP_LINEAR] = {{"x", "w", "b"}, {"y"}},
    [OP_SOFTMAX] = {{"x"}, {"y"}},
    [OP_EMBEDDING] = {{"ids", "table"}, {"y"}},
    [OP_ROPE] = {{"x", "positions"}, {"y"}},
    [OP_CACHE_WRITE] = {{"x", "positions"}, {"cache"}},
    [OP_ATTENTION_DECODE] = {{"q", "cache_k", "cache_v", "lens"}, {"y"}},
    [OP_ARGMAX] = {{"x"}, {"y"}},
    [OP_CAST] = {{"x"}, {"y"}},
};

static int op_index(const gg_op_def *op);

const char *gg_ops_in_name(const gg_op_def *op, int i)
{
    int k = op_index(op);
    if (k < 0 || i < 0 || i >= op->nin_max)
        return NULL;
    return names[k].in[i];
}

const char *gg_ops_out_name(const gg_op_def *op, int i)
{
    int k = op_index(op);
    if (k < 0 || i < 0 || i >= op->nout)
        return NULL;
    return names[k].out[i];
}

/* ---- common rules ------------------------------------------------------- */

static int same_shape(const gg_tensor_desc *a, const gg_tensor_desc *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

static int64_t last_dim(const gg_tensor_desc *d)
{
    return d->dims[d->ndim - 1];
}

static int is_vec(const gg_tensor_desc *d, int64_t len)
{
    return d->ndim == 1 && d->dims[0] == len;
}

static int check_desc(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                      char *err, size_t errlen)
{
    if ((int)d->dtype < 0 || d->dtype >= GG_DT_COUNT)
        return fail(err, errlen, "%s: %s has an unknown dtype (%d); expected f32, f16, bf16 or i32",
                    op->name, what, (int)d->dtype);
    if (d->ndim < 1 || d->ndim > GG_MAX_DIMS)
        return fail(err, errlen, "%s: %s must have 1 to %d dims, got %d", op->name, what,
                    GG_MAX_DIMS, d->ndim);
    for (int i = 0; i < d->ndim; i++)
        if (d->dims[i] < 1)
            return fail(err, errlen, "%s: %s has dim %d of size %lld; every dim must be >= 1",
                        op->name, what, i, (long long)d->dims[i]);
    if (gg_desc_bytes(d) == 0) {
        shape_buf sb;
        return fail(err, errlen, "%s: %s of shape %s is too large", op->name, what,
                    shape_str(d, &sb));
    }
    return 0;
}

static double attr_val(const gg_op_def *op, const gg_op_attrs *attrs, int i)
{
    return attrs ? attrs->v[i] : op->attrs[i].def;
}

static int check_attrs(const gg_op_def *op, const gg_op_attrs *attrs, char *err, size_t errlen)
{
    for (int i = 0; i < op->nattrs; i++) {
        const gg_attr_spec *s = &op->attrs[i];
        double v = attr_val(op, attrs, i);
        if (s->kind == GG_ATTR_FLOAT) {
            if (!isfinite(v) || !isfinite((float)v))
                return fail(err, errlen, "%s: %s must be a finite f32 number, got %g", op->name,
                            s->name, v);
        } else {
            int n = 0;
            char list[128];
            size_t len = 0;
            list[0] = '\0';
            for (; s->choices[n]; n++)
                if (len < sizeof list)
                    len += (size_t)snprintf(list + len, sizeof list - len, "%s\"%s\"",
                                            n ? ", " : "", s->choices[n]);
            if (!(v >= 0 && v < n && v == floor(v)))
                return fail(err, errlen,
                            "%s: %s must be the index of one of %s (0 to %d), got %g",
                            op->name, s->name, list, n - 1, v);
        }
    }
    return 0;
}

/* Counts, descs, attribute kinds; with `dtypes`, one shared floating dtype
 * (every op but the decode-step ops, which state their own). */
static int check_common_dt(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                           const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                           int dtypes, char *err, size_t errlen)
{
    if (op_index(op) < 0)
        return fail(err, errlen, "unknown op");
    const op_names *nm = &names[op->id];
    if (nin < op->nin_min || nin > op->nin_max) {
        char list[64];
        size_t len = 0;
        for (int i = 0; i < op->nin_max && len < sizeof list; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s%s%s",
                                    i == op->nin_min ? "[" : "", i ? ", " : "", nm->in[i],
                                    i == op->nin_max - 1 && op->nin_max > op->nin_min ? "]" : "");
        if (op->nin_min == op->nin_max)
            return fail(err, errlen, "%s: expected %d input%s (%s), got %d", op->name,
                        op->nin_min, op->nin_min == 1 ? "" : "s", list, nin);
        return fail(err, errlen, "%s: expected %d to %d inputs (%s), got %d", op->name,
                    op->nin_min, op->nin_max, list, nin);
    }
    if (nout != op->nout)
        return fail(err, errlen, "%s: expected %d output%s, got %d", op->name, op->nout,
                    op->nout == 1 ? "" : "s", nout);
    if (!in || !out)
        return fail(err, errlen, "%s: operand descriptions missing", op->name);
    for (int i = 0; i < nin; i++) {
        int rc = check_desc(op, nm->in[i], &in[i], err, errlen);
        if (rc)
            return rc;
    }
    for (int i = 0; i < nout; i++) {
        int rc = check_desc(op, nm->out[i], &out[i], err, errlen);
        if (rc)
            return rc;
    }
    gg_dtype dt = in[0].dtype;
    if (dtypes && !gg_dtype_is_float(dt))
        return fail(err, errlen, "%s: %s is %s; this op takes f32, f16 or bf16 (i32 is for "
                    "embedding ids, rope and cache_write positions, attention_decode lens and "
                    "argmax's output)", op->name, nm->in[0], gg_dtype_name(dt));
    for (int i = 1; i < nin + nout && dtypes; i++) {
        const gg_tensor_desc *d = i < nin ? &in[i] : &out[i - nin];
        const char *what = i < nin ? nm->in[i] : nm->out[i - nin];
        if (d->dtype != dt)
            return fail(err, errlen,
                        "%s: %s is %s but %s is %s; all operands of an op share one dtype",
                        op->name, what, gg_dtype_name(d->dtype), nm->in[0], gg_dtype_name(dt));
    }
    return check_attrs(op, attrs, err, errlen);
}

static int check_common(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                        const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                        char *err, size_t errlen)
{
    return check_common_dt(op, in, nin, out, nout, attrs, 1, err, errlen);
}

static int check_out(const gg_op_def *op, const gg_tensor_desc *out, const gg_tensor_desc *want,
                     const char *why, char *err, size_t errlen)
{
    if (same_shape(out, want))
        return 0;
    shape_buf a, b;
    return fail(err, errlen, "%s: %s must have shape %s (%s), got %s", op->name,
                names[op->id].out[0], shape_str(want, &a), why, shape_str(out, &b));
}

static int check_vec(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                     int64_t len, const char *why, char *err, size_t errlen)
{
    if (is_vec(d, len))
        return 0;
    shape_buf sb;
    return fail(err, errlen, "%s: %s must be 1-D of length %lld (%s), got %s", op->name, what,
                (long long)len, why, shape_str(d, &sb));
}

static int check_eps(const gg_op_def *op, const gg_op_attrs *attrs, char *err, size_t errlen)
{
    double eps = attr_val(op, attrs, gg_ops_attr_index(op, "eps"));
    if (!(eps > 0) || !isfinite(eps) || !((float)eps > 0) || !isfinite((float)eps))
        return fail(err, errlen, "%s: eps must be > 0 and finite in f32, got %g", op->name, eps);
    return 0;
}

/* ---- per-op rules ------------------------------------------------------- */

#define COMMON()                                                                     \
    do {                                                                             \
        int rc_ = check_common(op, in, nin, out, nout, attrs, err, errlen);          \
        if (rc_)                                                                     \
            return rc_;                                                              \
    } while (0)

/* y has the shape of x: copy, scale, gelu, silu, softmax */
static int check_unary(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                       const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                       size_t errlen)
{
    COMMON();
    return check_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

/* add, mul: b has a's shape or is a row vector of a's last dim */
static int check_bcast(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                       const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                       size_t errlen)
{
    COMMON();
    if (!same_shape(&in[1], &in[0]) && !is_vec(&in[1], last_dim(&in[0]))) {
        shape_buf a, b;
        return fail(err, errlen,
                    "%s: b must have the shape of a %s or be 1-D of length %lld (the last dim "
                    "of a), got %s",
                    op->name, shape_str(&in[0], &a), (long long)last_dim(&in[0]),
                    shape_str(&in[1], &b));
    }
    return check_out(op, &out[0], &in[0], "the shape of a", err, errlen);
}

static int check_silu_mul(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                          const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                          char *err, size_t errlen)
{
    COMMON();
    if (!same_shape(&in[1], &in[0])) {
        shape_buf a, b;
        return fail(err, errlen, "%s: b must have the shape of a %s, got %s", op->name,
                    shape_str(&in[0], &a), shape_str(&in[1], &b));
    }
    return check_out(op, &out[0], &in[0], "the shape of a", err, errlen);
}

static int check_layernorm(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                           const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                           char *err, size_t errlen)
{
    COMMON();
    int rc = check_eps(op, attrs, err, errlen);
    int64_t d = last_dim(&in[0]);
    for (int i = 1; i < nin && !rc; i++)
        rc = check_vec(op, names[op->id].in[i], &in[i], d, "the last dim of x", err, errlen);
    if (rc)
        return rc;
    return check_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

static int check_linear(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                        const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                        char *err, size_t errlen)
{
    COMMON();
    const gg_tensor_desc *x = &in[0], *w = &in[1];
    int64_t k = last_dim(x);
    if (w->ndim != 2 || w->dims[1] != k) {
        shape_buf sb;
        return fail(err, errlen,
                    "%s: w must be 2-D [out, in] with in = %lld (the last dim of x), got %s",
                    op->name, (long long)k, shape_str(w, &sb));
    }
    int64_t n = w->dims[0];
    if (nin == 3) {
        int rc = check_vec(op, "b", &in[2], n, "dim 0 of w", err, errlen);
        if (rc)
            return rc;
    }
    gg_tensor_desc want = *x;
    want.dims[want.ndim - 1] = n;
    return check_out(op, &out[0], &want, "the leading dims of x, then dim 0 of w", err, errlen);
}


/* ---- decode-step ops -------------------------------------------------------- */

#define COMMON_NODT()                                                                 \
    do {                                                                              \
        int rc_ = check_common_dt(op, in, nin, out, nout, attrs, 0, err, errlen);      \
        if (rc_)                                                                      \
            return rc_;                                                               \
    } while (0)

static int want_dtype(const gg_op_def *op, const char *what, const gg_tensor_desc *d, int isfloat,
                      char *err, size_t errlen)
{
    if (isfloat ? gg_dtype_is_float(d->dtype) : d->dtype == GG_DT_I32)
        return 0;
    return fail(err, errlen, "%s: %s must be %s, got %s", op->name, what,
                isfloat ? "f32, f16 or bf16" : "i32", gg_dtype_name(d->dtype));
}

static int same_dtype(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                      const char *ref, gg_dtype dt, char *err, size_t errlen)
{
    if (d->dtype == dt)
        return 0;
    return fail(err, errlen, "%s: %s is %s but %s is %s; they share one dtype", op->name, what,
                gg_dtype_name(d->dtype), ref, gg_dtype_name(dt));
}

static int want_ndim(const gg_op_def *op, const char *what, const gg_tensor_desc *d, int nd,
                     const char *layout, char *err, size_t errlen)
{
    if (d->ndim == nd)
        return 0;
    shape_buf sb;
    return fail(err, errlen, "%s: %s must be %d-D %s, got %s", op->name, what, nd, layout,
                shape_str(d, &sb));
}

/* A per-row i32 vector [B] for x's B rows. */
static int want_rows_i32(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                         int64_t rows, char *err, size_t errlen)
{
    int rc = want_dtype(op, what, d, 0, err, errlen);
    if (rc)
        return rc;
    return check_vec(op, what, d, rows, "one per row of dim 0", err, errlen);
}

static int check_embedding(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                           const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                           char *err, size_t errlen)
{
    COMMON_NODT();
    int rc;
    if ((rc = want_dtype(op, "ids", &in[0], 0, err, errlen)) ||
        (rc = want_ndim(op, "ids", &in[0], 1, "[B]", err, errlen)) ||
        (rc = want_dtype(op, "table", &in[1], 1, err, errlen)) ||
        (rc = want_ndim(op, "table", &in[1], 2, "[V, D]", err, errlen)) ||
        (rc = same_dtype(op, "y", &out[0], "table", in[1].dtype, err, errlen)))
        return rc;
    gg_tensor_desc want = {.dtype = in[1].dtype, .ndim = 2, .dims = {in[0].dims[0], in[1].dims[1]}};
    return check_out(op, &out[0], &want, "[B, D]: dim 0 of ids, dim 1 of table", err, errlen);
}

static int check_rope(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                      const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                      size_t errlen)
{
    COMMON_NODT();
    int rc;
    if ((rc = want_dtype(op, "x", &in[0], 1, err, errlen)) ||
        (rc = want_ndim(op, "x", &in[0], 3, "[B, H, Dh]", err, errlen)) ||
        (rc = want_rows_i32(op, "positions", &in[1], in[0].dims[0], err, errlen)) ||
        (rc = same_dtype(op, "y", &out[0], "x", in[0].dtype, err, errlen)))
        return rc;
    const double theta = attr_val(op, attrs, 0), rd = attr_val(op, attrs, 2);
    const int64_t dh = in[0].dims[2];
    if (!(theta > 0))
        return fail(err, errlen, "%s: theta must be > 0, got %g", op->name, theta);
    if (rd != floor(rd) || rd < 0 || rd > (double)dh || ((int64_t)rd & 1) ||
        (rd == 0 && (dh & 1)))
        return fail(err, errlen, "%s: rotary_dim must be an even integer from 2 to Dh = %lld "
                    "(0 or omitted: Dh), got %g", op->name, (long long)dh, rd);
    return check_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

static int check_cache_write(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                             const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                             char *err, size_t errlen)
{
    COMMON_NODT();
    int rc;
    const gg_tensor_desc *x = &in[0], *c = &out[0];
    if ((rc = want_dtype(op, "x", x, 1, err, errlen)) ||
        (rc = want_ndim(op, "x", x, 3, "[B, Hkv, Dh]", err, errlen)) ||
        (rc = want_rows_i32(op, "positions", &in[1], x->dims[0], err, errlen)) ||
        (rc = same_dtype(op, "cache", c, "x", x->dtype, err, errlen)) ||
        (rc = want_ndim(op, "cache", c, 4, "[B, S, Hkv, Dh]", err, errlen)))
        return rc;
    gg_tensor_desc want = {.dtype = x->dtype, .ndim = 4,
                           .dims = {x->dims[0], c->dims[1], x->dims[1], x->dims[2]}};
    return check_out(op, c, &want, "[B, S, Hkv, Dh] with B, Hkv, Dh of x", err, errlen);
}

static int check_attention(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                           const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                           char *err, size_t errlen)
{
    COMMON_NODT();
    int rc;
    const gg_tensor_desc *q = &in[0], *k = &in[1], *v = &in[2];
    if ((rc = want_dtype(op, "q", q, 1, err, errlen)) ||
        (rc = want_ndim(op, "q", q, 3, "[B, Hq, Dh]", err, errlen)) ||
        (rc = same_dtype(op, "cache_k", k, "q", q->dtype, err, errlen)) ||
        (rc = same_dtype(op, "cache_v", v, "q", q->dtype, err, errlen)) ||
        (rc = same_dtype(op, "y", &out[0], "q", q->dtype, err, errlen)) ||
        (rc = want_ndim(op, "cache_k", k, 4, "[B, S, Hkv, Dh]", err, errlen)) ||
        (rc = want_rows_i32(op, "lens", &in[3], q->dims[0], err, errlen)))
        return rc;
    if (k->dims[0] != q->dims[0] || k->dims[3] != q->dims[2] || q->dims[1] % k->dims[2] != 0) {
        shape_buf a, b;
        return fail(err, errlen, "%s: cache_k must be [B, S, Hkv, Dh] with B and Dh of q %s and "
                    "Hq a multiple of Hkv, got %s", op->name, shape_str(q, &a), shape_str(k, &b));
    }
    if (!same_shape(v, k)) {
        shape_buf a, b;
        return fail(err, errlen, "%s: cache_v must have the shape of cache_k %s, got %s",
                    op->name, shape_str(k, &a), shape_str(v, &b));
    }
    return check_out(op, &out[0], q, "the shape of q", err, errlen);
}

static int check_argmax(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                        const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                        size_t errlen)
{
    COMMON_NODT();
    int rc;
    if ((rc = want_dtype(op, "x", &in[0], 1, err, errlen)) ||
        (rc = want_dtype(op, "y", &out[0], 0, err, errlen)))
        return rc;
    if (in[0].ndim < 2) {
        shape_buf sb;
        return fail(err, errlen, "%s: x must have 2 to 4 dims [..., V], got %s", op->name,
                    shape_str(&in[0], &sb));
    }
    gg_tensor_desc want = in[0];
    want.dtype = GG_DT_I32;
    want.ndim--;
    return check_out(op, &out[0], &want, "the leading dims of x", err, errlen);
}

static int check_cast(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                      const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                      size_t errlen)
{
    COMMON_NODT();
    int rc;
    if ((rc = want_dtype(op, "x", &in[0], 1, err, errlen)) ||
        (rc = want_dtype(op, "y", &out[0], 1, err, errlen)))
        return rc;
    return check_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

/* ---- the table ---------------------------------------------------------- */

static const char *const rope_styles[] = {"neox", "gptj", NULL};

static const char *const gelu_choices[] = {"none", "tanh", NULL};

#define UNARY(id_, name_, cpu_) \
    [id_] = {.name = name_, .id = id_, .nin_min = 1, .nin_max = 1, .nout = 1, \
             .check = check_unary, .cpu = cpu_}

static const gg_op_def table[OP_COUNT] = {
    UNARY(OP_COPY, "copy", gg_cpu_copy),
    [OP_ADD] = {.name = "add", .id = OP_ADD, .nin_min = 2, .nin_max = 2, .nout = 1,
                .check = check_bcast, .cpu = gg_cpu_add},
    [OP_MUL] = {.name = "mul", .id = OP_MUL, .nin_min = 2, .nin_max = 2, .nout = 1,
                .check = check_bcast, .cpu = gg_cpu_mul},
    [OP_SCALE] = {.name = "scale", .id = OP_SCALE, .nin_min = 1, .nin_max = 1, .nout = 1,
                  .nattrs = 1, .attrs = {{.name = "scale", .kind = GG_ATTR_FLOAT, .def = 1.0}},
                  .check = check_unary, .cpu = gg_cpu_scale},
    [OP_GELU] = {.name = "gelu", .id = OP_GELU, .nin_min = 1, .nin_max = 1, .nout = 1,
                 .nattrs = 1,
                 .attrs = {{.name = "approximate", .kind = GG_ATTR_CHOICE, .def = 0,
                            .choices = gelu_choices}},
                 .check = check_unary, .cpu = gg_cpu_gelu},
    UNARY(OP_SILU, "silu", gg_cpu_silu),
    [OP_SILU_MUL] = {.name = "silu_mul", .id = OP_SILU_MUL, .nin_min = 2, .nin_max = 2,
                     .nout = 1, .check = check_silu_mul, .cpu = gg_cpu_silu_mul},
    [OP_LAYERNORM] = {.name = "layernorm", .id = OP_LAYERNORM, .nin_min = 3, .nin_max = 3,
                      .nout = 1, .nattrs = 1,
                      .attrs = {{.name = "eps", .kind = GG_ATTR_FLOAT, .def = 1e-5}},
                      .check = check_layernorm, .cpu = gg_cpu_layernorm},
    [OP_RMSNORM] = {.name = "rmsnorm", .id = OP_RMSNORM, .nin_min = 2, .nin_max = 2, .nout = 1,
                    .nattrs = 1, .attrs = {{.name = "eps", .kind = GG_ATTR_FLOAT, .def = 1e-6}},
                    .check = check_layernorm, .cpu = gg_cpu_rmsnorm},
    [OP_LINEAR] = {.name = "linear", .id = OP_LINEAR, .nin_min = 2, .nin_max = 3, .nout = 1,
                   .check = check_linear, .cpu = gg_cpu_linear},
    UNARY(OP_SOFTMAX, "softmax", gg_cpu_softmax),
    [OP_EMBEDDING] = {.name = "embedding", .id = OP_EMBEDDING, .nin_min = 2, .nin_max = 2,
                      .nout = 1, .check = check_embedding, .cpu = gg_cpu_embedding},
    [OP_ROPE] = {.name = "rope", .id = OP_ROPE, .nin_min = 2, .nin_max = 2, .nout = 1,
                 .nattrs = 3,
                 .attrs = {{.name = "theta", .kind = GG_ATTR_FLOAT, .def = 10000.0},
                           {.name = "style", .kind = GG_ATTR_CHOICE, .def = 0,
                            .choices = rope_styles},
                           {.name = "rotary_dim", .kind = GG_ATTR_FLOAT, .def = 0}},
                 .check = check_rope, .cpu = gg_cpu_rope},
    [OP_CACHE_WRITE] = {.name = "cache_write", .id = OP_CACHE_WRITE, .nin_min = 2, .nin_max = 2,
                        .nout = 1, .check = check_cache_write, .cpu = gg_cpu_cache_write,
                        .wants_batch = 1},
    [OP_ATTENTION_DECODE] = {.name = "attention_decode", .id = OP_ATTENTION_DECODE,
                             .nin_min = 4, .nin_max = 4, .nout = 1, .nattrs = 1,
                             .attrs = {{.name = "scale", .kind = GG_ATTR_FLOAT, .def = 0}},
                             .check = check_attention, .cpu = gg_cpu_attention_decode},
    [OP_ARGMAX] = {.name = "argmax", .id = OP_ARGMAX, .nin_min = 1, .nin_max = 1, .nout = 1,
                   .check = check_argmax, .cpu = gg_cpu_argmax},
    [OP_CAST] = {.name = "cast", .id = OP_CAST, .nin_min = 1, .nin_max = 1, .nout = 1,
                 .check = check_cast, .cpu = gg_cpu_cast},
};

/* The op's table slot, or -1 for something that is not one of ours. */
static int op_index(const gg_op_def *op)
{
    if (!op || op->id < 0 || op->id >= OP_COUNT || !op->name ||
        strcmp(op->name, table[op->id].name) != 0)
        return -1;
    return op->id;
}

int gg_ops_count(void)
{
    return OP_COUNT;
}

const gg_op_def *gg_ops_at(int i)
{
    return i >= 0 && i < OP_COUNT ? &table[i] : NULL;
}

const gg_op_def *gg_ops_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

int gg_ops_attr_index(const gg_op_def *op, const char *name)
{
    if (!op || !name)
        return -1;
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return i;
    return -1;
}

void gg_ops_attr_defaults(const gg_op_def *op, gg_op_attrs *attrs)
{
    if (!attrs)
        return;
    memset(attrs, 0, sizeof *attrs);
    for (int i = 0; op && i < op->nattrs; i++)
        attrs->v[i] = op->attrs[i].def;
}

void gg_ops_run_cpu(const gg_op_def *op, const gg_tensor *in, int nin, const gg_tensor *out,
                    int nout, const gg_op_attrs *attrs)
{
    gg_op_attrs defs;
    if (!attrs) {
        gg_ops_attr_defaults(op, &defs);
        attrs = &defs;
    }
    op->cpu(in, nin, out, nout, attrs);
}
