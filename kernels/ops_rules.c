/* SPDX-License-Identifier: MIT */
/* The checks every family's rules are made of (ops_rules.h). */
#include "ops_rules.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gg_rule_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

const char *gg_rule_shape_str(const gg_tensor_desc *d, gg_shape_buf *b)
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

int gg_rule_same_shape(const gg_tensor_desc *a, const gg_tensor_desc *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

int64_t gg_rule_last_dim(const gg_tensor_desc *d)
{
    return d->dims[d->ndim - 1];
}

int gg_rule_is_vec(const gg_tensor_desc *d, int64_t len)
{
    return d->ndim == 1 && d->dims[0] == len;
}

static int rule_desc(const gg_op_def *op, const char *what, const gg_tensor_desc *d, char *err,
                     size_t errlen)
{
    if ((int)d->dtype < 0 || d->dtype >= GG_DT_COUNT)
        return gg_rule_fail(err, errlen,
                            "%s: %s has an unknown dtype (%d); expected f32, f16, bf16, i32, "
                            "i64 or bool",
                            op->name, what, (int)d->dtype);
    if (d->ndim < 1 || d->ndim > GG_MAX_DIMS)
        return gg_rule_fail(err, errlen, "%s: %s must have 1 to %d dims, got %d", op->name, what,
                            GG_MAX_DIMS, d->ndim);
    for (int i = 0; i < d->ndim; i++)
        if (d->dims[i] < 1)
            return gg_rule_fail(err, errlen,
                                "%s: %s has dim %d of size %lld; every dim must be >= 1",
                                op->name, what, i, (long long)d->dims[i]);
    if (gg_desc_bytes(d) == 0) {
        gg_shape_buf sb;
        return gg_rule_fail(err, errlen, "%s: %s of shape %s is too large", op->name, what,
                            gg_rule_shape_str(d, &sb));
    }
    return 0;
}

double gg_rule_attr(const gg_op_def *op, const gg_op_attrs *attrs, int i)
{
    return attrs ? attrs->v[i] : op->attrs[i].def;
}

static int rule_attrs(const gg_op_def *op, const gg_op_attrs *attrs, char *err, size_t errlen)
{
    for (int i = 0; i < op->nattrs; i++) {
        const gg_attr_spec *s = &op->attrs[i];
        double v = gg_rule_attr(op, attrs, i);
        if (s->kind == GG_ATTR_FLOAT) {
            if (!s->nonfinite && (!isfinite(v) || !isfinite((float)v)))
                return gg_rule_fail(err, errlen, "%s: %s must be a finite f32 number, got %g",
                                    op->name, s->name, v);
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
                return gg_rule_fail(err, errlen,
                                    "%s: %s must be the index of one of %s (0 to %d), got %g",
                                    op->name, s->name, list, n - 1, v);
        }
    }
    return 0;
}

int gg_rule_common(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                   const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, int dtypes,
                   char *err, size_t errlen)
{
    if (!op || gg_ops_at(op->id) != op)
        return gg_rule_fail(err, errlen, "unknown op");
    const char *const *inm = op->in_names, *const *outm = op->out_names;
    if (nin < op->nin_min || nin > op->nin_max) {
        char list[64];
        size_t len = 0;
        list[0] = '\0';
        for (int i = 0; i < op->nin_max && len < sizeof list; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s%s%s",
                                    i == op->nin_min ? "[" : "", i ? ", " : "", inm[i],
                                    i == op->nin_max - 1 && op->nin_max > op->nin_min ? "]" : "");
        if (op->nin_min == op->nin_max)
            return gg_rule_fail(err, errlen, "%s: expected %d input%s (%s), got %d", op->name,
                                op->nin_min, op->nin_min == 1 ? "" : "s", list, nin);
        return gg_rule_fail(err, errlen, "%s: expected %d to %d inputs (%s), got %d", op->name,
                            op->nin_min, op->nin_max, list, nin);
    }
    if (nout != op->nout)
        return gg_rule_fail(err, errlen, "%s: expected %d output%s, got %d", op->name, op->nout,
                            op->nout == 1 ? "" : "s", nout);
    if ((nin > 0 && !in) || !out)
        return gg_rule_fail(err, errlen, "%s: operand descriptions missing", op->name);
    for (int i = 0; i < nin; i++) {
        int rc = rule_desc(op, inm[i], &in[i], err, errlen);
        if (rc)
            return rc;
    }
    for (int i = 0; i < nout; i++) {
        int rc = rule_desc(op, outm[i], &out[i], err, errlen);
        if (rc)
            return rc;
    }
    if (dtypes && nin > 0) {
        gg_dtype dt = in[0].dtype;
        if (!gg_dtype_is_float(dt))
            return gg_rule_fail(err, errlen,
                                "%s: %s is %s; this op takes f32, f16 or bf16 (i32 is for "
                                "embedding ids, rope and cache_write positions, "
                                "attention_decode lens and argmax's output)",
                                op->name, inm[0], gg_dtype_name(dt));
        for (int i = 1; i < nin + nout; i++) {
            const gg_tensor_desc *d = i < nin ? &in[i] : &out[i - nin];
            const char *what = i < nin ? inm[i] : outm[i - nin];
            if (d->dtype != dt)
                return gg_rule_fail(
                    err, errlen, "%s: %s is %s but %s is %s; all operands of an op share one dtype",
                    op->name, what, gg_dtype_name(d->dtype), inm[0], gg_dtype_name(dt));
        }
    }
    return rule_attrs(op, attrs, err, errlen);
}

int gg_rule_out(const gg_op_def *op, const gg_tensor_desc *out, const gg_tensor_desc *want,
                const char *why, char *err, size_t errlen)
{
    if (gg_rule_same_shape(out, want))
        return 0;
    gg_shape_buf a, b;
    return gg_rule_fail(err, errlen, "%s: %s must have shape %s (%s), got %s", op->name,
                        op->out_names[0], gg_rule_shape_str(want, &a), why,
                        gg_rule_shape_str(out, &b));
}

int gg_rule_vec(const gg_op_def *op, const char *what, const gg_tensor_desc *d, int64_t len,
                const char *why, char *err, size_t errlen)
{
    if (gg_rule_is_vec(d, len))
        return 0;
    gg_shape_buf sb;
    return gg_rule_fail(err, errlen, "%s: %s must be 1-D of length %lld (%s), got %s", op->name,
                        what, (long long)len, why, gg_rule_shape_str(d, &sb));
}

int gg_rule_eps(const gg_op_def *op, const gg_op_attrs *attrs, char *err, size_t errlen)
{
    double eps = gg_rule_attr(op, attrs, gg_ops_attr_index(op, "eps"));
    if (!(eps > 0) || !isfinite(eps) || !((float)eps > 0) || !isfinite((float)eps))
        return gg_rule_fail(err, errlen, "%s: eps must be > 0 and finite in f32, got %g",
                            op->name, eps);
    return 0;
}

int gg_rule_dtype(const gg_op_def *op, const char *what, const gg_tensor_desc *d, int isfloat,
                  char *err, size_t errlen)
{
    if (isfloat ? gg_dtype_is_float(d->dtype) : d->dtype == GG_DT_I32)
        return 0;
    return gg_rule_fail(err, errlen, "%s: %s must be %s, got %s", op->name, what,
                        isfloat ? "f32, f16 or bf16" : "i32", gg_dtype_name(d->dtype));
}

int gg_rule_same_dtype(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                       const char *ref, gg_dtype dt, char *err, size_t errlen)
{
    if (d->dtype == dt)
        return 0;
    return gg_rule_fail(err, errlen, "%s: %s is %s but %s is %s; they share one dtype", op->name,
                        what, gg_dtype_name(d->dtype), ref, gg_dtype_name(dt));
}

int gg_rule_ndim(const gg_op_def *op, const char *what, const gg_tensor_desc *d, int nd,
                 const char *layout, char *err, size_t errlen)
{
    if (d->ndim == nd)
        return 0;
    gg_shape_buf sb;
    return gg_rule_fail(err, errlen, "%s: %s must be %d-D %s, got %s", op->name, what, nd, layout,
                        gg_rule_shape_str(d, &sb));
}

int gg_rule_rows_i32(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                     int64_t rows, char *err, size_t errlen)
{
    int rc = gg_rule_dtype(op, what, d, 0, err, errlen);
    if (rc)
        return rc;
    return gg_rule_vec(op, what, d, rows, "one per row of dim 0", err, errlen);
}
