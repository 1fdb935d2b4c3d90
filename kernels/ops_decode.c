/* SPDX-License-Identifier: MIT */
/* The decode-step family (embedding, rope, cache_write, attention_decode,
 * argmax): rows and rules, each op stating its own dtypes (CPU
 * references in ops_cpu.c). */
#include "ops_rules.h"

#include <math.h>

/* ids: i32 or i64 of any shape of 1 to 3 dims (torch's input_ids [B, L]
 * among them); y: ids' dims, then D. */
static int dec_check_embedding(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                               const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                               char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    const gg_tensor_desc *ids = &in[0];
    if ((ids->dtype != GG_DT_I32 && ids->dtype != GG_DT_I64) || ids->ndim > 3) {
        gg_shape_buf sb;
        return gg_rule_fail(err, errlen, "%s: ids must be i32 or i64 with 1 to 3 dims, got %s %s",
                            op->name, gg_dtype_name(ids->dtype), gg_rule_shape_str(ids, &sb));
    }
    if ((rc = gg_rule_dtype(op, "table", &in[1], 1, err, errlen)) ||
        (rc = gg_rule_ndim(op, "table", &in[1], 2, "[V, D]", err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "y", &out[0], "table", in[1].dtype, err, errlen)))
        return rc;
    gg_tensor_desc want = *ids;
    want.dtype = in[1].dtype;
    want.dims[want.ndim++] = in[1].dims[1];
    return gg_rule_out(op, &out[0], &want, "the dims of ids, then dim 1 of table", err, errlen);
}

/* A runtime index vector (rope's and cache_write's positions, attention's
 * lens): i32 or i64, one per row of dim 0 or one for every row (HF's
 * cache_position is shared by the batch). */
static int dec_rule_index(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                          int64_t rows, char *err, size_t errlen)
{
    if ((d->dtype != GG_DT_I32 && d->dtype != GG_DT_I64) || d->ndim != 1 ||
        (d->dims[0] != rows && d->dims[0] != 1)) {
        gg_shape_buf sb;
        return gg_rule_fail(err, errlen,
                            "%s: %s must be i32 or i64 [%lld] (one per row) or [1] (every row), "
                            "got %s %s",
                            op->name, what, (long long)rows, gg_dtype_name(d->dtype),
                            gg_rule_shape_str(d, &sb));
    }
    return 0;
}

static int dec_check_rope(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                          const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                          char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    if ((rc = gg_rule_dtype(op, "x", &in[0], 1, err, errlen)) ||
        (rc = gg_rule_ndim(op, "x", &in[0], 3, "[B, H, Dh]", err, errlen)) ||
        (rc = dec_rule_index(op, "positions", &in[1], in[0].dims[0], err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "y", &out[0], "x", in[0].dtype, err, errlen)))
        return rc;
    const double theta = gg_rule_attr(op, attrs, 0), rd = gg_rule_attr(op, attrs, 2);
    const int64_t dh = in[0].dims[2];
    if (!(theta > 0))
        return gg_rule_fail(err, errlen, "%s: theta must be > 0, got %g", op->name, theta);
    if (rd != floor(rd) || rd < 0 || rd > (double)dh || ((int64_t)rd & 1) ||
        (rd == 0 && (dh & 1)))
        return gg_rule_fail(err, errlen,
                            "%s: rotary_dim must be an even integer from 2 to Dh = %lld "
                            "(0 or omitted: Dh), got %g",
                            op->name, (long long)dh, rd);
    if (nin == 3) {
        const int64_t half = (rd > 0 ? (int64_t)rd : dh) / 2;
        if ((rc = gg_rule_dtype(op, "inv_freq", &in[2], 1, err, errlen)) ||
            (rc = gg_rule_vec(op, "inv_freq", &in[2], half, "rotary_dim / 2", err, errlen)))
            return rc;
    }
    return gg_rule_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

/* The cache's dims for a layout attr: bshd [B, S, Hkv, Dh], bhsd [B, Hkv, S, Dh]
 * (HF's StaticCache). */
static gg_tensor_desc dec_cache_shape(gg_dtype dt, int64_t b, int64_t s, int64_t hkv, int64_t dh,
                                      int bhsd)
{
    gg_tensor_desc d = {.dtype = dt, .ndim = 4, .dims = {b, bhsd ? hkv : s, bhsd ? s : hkv, dh}};
    return d;
}

static int dec_check_cache_write(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                                 const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                                 char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    const gg_tensor_desc *x = &in[0], *c = &out[0];
    const int bhsd = gg_rule_attr(op, attrs, 0) == 1.0;
    if ((rc = gg_rule_dtype(op, "x", x, 1, err, errlen)) ||
        (rc = gg_rule_ndim(op, "x", x, 3, "[B, Hkv, Dh]", err, errlen)) ||
        (rc = dec_rule_index(op, "positions", &in[1], x->dims[0], err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "cache", c, "x", x->dtype, err, errlen)) ||
        (rc = gg_rule_ndim(op, "cache", c, 4, bhsd ? "[B, Hkv, S, Dh]" : "[B, S, Hkv, Dh]", err,
                           errlen)))
        return rc;
    gg_tensor_desc want =
        dec_cache_shape(x->dtype, x->dims[0], c->dims[bhsd ? 2 : 1], x->dims[1], x->dims[2], bhsd);
    return gg_rule_out(op, c, &want,
                       bhsd ? "[B, Hkv, S, Dh] with B, Hkv, Dh of x"
                            : "[B, S, Hkv, Dh] with B, Hkv, Dh of x",
                       err, errlen);
}

static int dec_check_attention(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                               const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                               char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    const gg_tensor_desc *q = &in[0], *k = &in[1], *v = &in[2];
    const int bhsd = gg_rule_attr(op, attrs, 1) == 1.0;
    const char *lay = bhsd ? "[B, Hkv, S, Dh]" : "[B, S, Hkv, Dh]";
    if ((rc = gg_rule_dtype(op, "q", q, 1, err, errlen)) ||
        (rc = gg_rule_ndim(op, "q", q, 3, "[B, Hq, Dh]", err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "cache_k", k, "q", q->dtype, err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "cache_v", v, "q", q->dtype, err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "y", &out[0], "q", q->dtype, err, errlen)) ||
        (rc = gg_rule_ndim(op, "cache_k", k, 4, lay, err, errlen)) ||
        (rc = dec_rule_index(op, "lens", &in[3], q->dims[0], err, errlen)))
        return rc;
    const int64_t hkv = k->dims[bhsd ? 1 : 2];
    if (k->dims[0] != q->dims[0] || k->dims[3] != q->dims[2] || q->dims[1] % hkv != 0) {
        gg_shape_buf a, b;
        return gg_rule_fail(err, errlen,
                            "%s: cache_k must be %s with B and Dh of q %s and "
                            "Hq a multiple of Hkv, got %s",
                            op->name, lay, gg_rule_shape_str(q, &a), gg_rule_shape_str(k, &b));
    }
    if (!gg_rule_same_shape(v, k)) {
        gg_shape_buf a, b;
        return gg_rule_fail(err, errlen, "%s: cache_v must have the shape of cache_k %s, got %s",
                            op->name, gg_rule_shape_str(k, &a), gg_rule_shape_str(v, &b));
    }
    return gg_rule_out(op, &out[0], q, "the shape of q", err, errlen);
}

static int dec_check_argmax(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                            const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                            char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    if ((rc = gg_rule_dtype(op, "x", &in[0], 1, err, errlen)) ||
        (rc = gg_rule_dtype(op, "y", &out[0], 0, err, errlen)))
        return rc;
    if (in[0].ndim < 2) {
        gg_shape_buf sb;
        return gg_rule_fail(err, errlen, "%s: x must have 2 to 4 dims [..., V], got %s", op->name,
                            gg_rule_shape_str(&in[0], &sb));
    }
    gg_tensor_desc want = in[0];
    want.dtype = GG_DT_I32;
    want.ndim--;
    return gg_rule_out(op, &out[0], &want, "the leading dims of x", err, errlen);
}

static const char *const dec_rope_styles[] = {"neox", "gptj", NULL};
static const char *const dec_layouts[] = {"bshd", "bhsd", NULL};

GG_OP_ROW(EMBEDDING, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"ids", "table"},
          .out_names = {"y"}, .check = dec_check_embedding, .cpu = gg_cpu_embedding);
GG_OP_ROW(ROPE, .nin_min = 2, .nin_max = 3, .nout = 1,
          .in_names = {"x", "positions", "inv_freq"}, .out_names = {"y"}, .nattrs = 4,
          .attrs = {{.name = "theta", .kind = GG_ATTR_FLOAT, .def = 10000.0},
                    {.name = "style", .kind = GG_ATTR_CHOICE, .def = 0,
                     .choices = dec_rope_styles},
                    {.name = "rotary_dim", .kind = GG_ATTR_FLOAT, .def = 0},
                    {.name = "attention_scaling", .kind = GG_ATTR_FLOAT, .def = 1.0}},
          .check = dec_check_rope, .cpu = gg_cpu_rope, .inplace = 1);
GG_OP_ROW(CACHE_WRITE, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"x", "positions"},
          .out_names = {"cache"}, .nattrs = 1,
          .attrs = {{.name = "layout", .kind = GG_ATTR_CHOICE, .def = 0, .choices = dec_layouts}},
          .check = dec_check_cache_write, .cpu = gg_cpu_cache_write, .wants_batch = 1);
GG_OP_ROW(ATTENTION_DECODE, .nin_min = 4, .nin_max = 4, .nout = 1,
          .in_names = {"q", "cache_k", "cache_v", "lens"}, .out_names = {"y"}, .nattrs = 2,
          .attrs = {{.name = "scale", .kind = GG_ATTR_FLOAT, .def = 0},
                    {.name = "layout", .kind = GG_ATTR_CHOICE, .def = 0, .choices = dec_layouts}},
          .check = dec_check_attention, .cpu = gg_cpu_attention_decode);
GG_OP_ROW(ARGMAX, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"}, .out_names = {"y"},
          .check = dec_check_argmax, .cpu = gg_cpu_argmax);
