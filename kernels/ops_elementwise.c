/* SPDX-License-Identifier: MIT */
/* The elementwise family: rows, rules and CPU references (those of copy,
 * scale, gelu, silu, silu_mul and the older forms of add and mul are in
 * ops_cpu.c). */

/* a*b+c stays two roundings (ops_cpu.c says why) */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "ops_rules.h"

#include <math.h>
#include <string.h>

/* y has the shape of x: copy, scale, gelu, silu */
static int ew_check_unary(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                          const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                          char *err, size_t errlen)
{
    GG_RULE_COMMON();
    return gg_rule_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

static int ew_check_silu_mul(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                             const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                             char *err, size_t errlen)
{
    GG_RULE_COMMON();
    const double round_act = gg_rule_attr(op, attrs, 0);
    if (round_act != 0 && round_act != 1)
        return gg_rule_fail(err, errlen, "%s: round_act must be 0 or 1, got %g", op->name,
                            round_act);
    if (!gg_rule_same_shape(&in[1], &in[0])) {
        gg_shape_buf a, b;
        return gg_rule_fail(err, errlen, "%s: b must have the shape of a %s, got %s", op->name,
                            gg_rule_shape_str(&in[0], &a), gg_rule_shape_str(&in[1], &b));
    }
    return gg_rule_out(op, &out[0], &in[0], "the shape of a", err, errlen);
}

static const char *const ew_gelu_choices[] = {"none", "tanh", NULL};

#define EW_UNARY(ID, cpu_)                                                               \
    GG_OP_ROW(ID, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"},               \
              .out_names = {"y"}, .check = ew_check_unary, .cpu = cpu_, .inplace = 1)

EW_UNARY(COPY, gg_cpu_copy);
GG_OP_ROW(SCALE, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"}, .out_names = {"y"},
          .nattrs = 1, .attrs = {{.name = "scale", .kind = GG_ATTR_FLOAT, .def = 1.0}},
          .check = ew_check_unary, .cpu = gg_cpu_scale, .inplace = 1);
GG_OP_ROW(GELU, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"}, .out_names = {"y"},
          .nattrs = 1,
          .attrs = {{.name = "approximate", .kind = GG_ATTR_CHOICE, .def = 0,
                     .choices = ew_gelu_choices}},
          .check = ew_check_unary, .cpu = gg_cpu_gelu, .inplace = 1);
EW_UNARY(SILU, gg_cpu_silu);
/* round_act 1: silu(a) is rounded to y's dtype before the multiply, as
 * PyTorch's act_fn(gate(x)) * up(x) stores it between its two ops. */
GG_OP_ROW(SILU_MUL, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"a", "b"},
          .out_names = {"y"}, .nattrs = 1,
          .attrs = {{.name = "round_act", .kind = GG_ATTR_FLOAT, .def = 0}}, .check = ew_check_silu_mul, .cpu = gg_cpu_silu_mul,
          .inplace = 1);

/* ==== the general elementwise ops ============================================
 *
 * Broadcasting: each input's shape right-aligned against y's, each of its
 * dims y's or 1; y's shape is exactly the broadcast shape.  A binary op
 * with one input takes attr `scalar` as the other operand (`reverse` 1:
 * scalar OP x).  Floating operands compute in f32 and round to the storage
 * dtype; i32 and i64 compute exactly in int64 with two's-complement wrap. */

enum { EW_SCALAR = 0, EW_REVERSE = 1 };

static int ew_is_arith(int id)
{
    return id == GG_OP_ADD || id == GG_OP_SUB || id == GG_OP_MUL || id == GG_OP_DIV ||
           id == GG_OP_POW || id == GG_OP_MAXIMUM || id == GG_OP_MINIMUM;
}

static int ew_is_cmp(int id)
{
    return id == GG_OP_EQ || id == GG_OP_NE || id == GG_OP_LT || id == GG_OP_LE ||
           id == GG_OP_GT || id == GG_OP_GE;
}

static int ew_is_bitwise2(int id)
{
    return id == GG_OP_BITWISE_AND || id == GG_OP_BITWISE_OR || id == GG_OP_BITWISE_XOR;
}

/* ---- rules ------------------------------------------------------------------- */

/* The inputs broadcast to y's shape, and y's shape is their broadcast. */
static int ew_rule_bcast(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                         const gg_tensor_desc *y, char *err, size_t errlen)
{
    int nd = 0;
    for (int i = 0; i < nin; i++)
        nd = in[i].ndim > nd ? in[i].ndim : nd;
    gg_tensor_desc want = {.dtype = y->dtype, .ndim = nd};
    for (int k = 0; k < nd; k++) {
        int64_t d = 1;
        for (int i = 0; i < nin; i++) {
            int j = k - (nd - in[i].ndim);
            int64_t di = j < 0 ? 1 : in[i].dims[j];
            if (di == 1)
                continue;
            if (d != 1 && d != di) {
                gg_shape_buf a;
                return gg_rule_fail(err, errlen,
                                    "%s: %s %s does not broadcast with the other inputs (dim %d "
                                    "counted from the end is %lld there, %lld here; dims must be "
                                    "equal or 1)",
                                    op->name, op->in_names[i], gg_rule_shape_str(&in[i], &a),
                                    nd - k, (long long)d, (long long)di);
            }
            d = di;
        }
        want.dims[k] = d;
    }
    return gg_rule_out(op, y, &want, "the broadcast shape of the inputs", err, errlen);
}

/* Every input of dtype dt (y too when same_out). */
static int ew_rule_one_dtype(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                             const gg_tensor_desc *y, int same_out, char *err, size_t errlen)
{
    gg_dtype dt = in[0].dtype;
    for (int i = 1; i < nin; i++) {
        int rc = gg_rule_same_dtype(op, op->in_names[i], &in[i], op->in_names[0], dt, err, errlen);
        if (rc)
            return rc;
    }
    if (same_out)
        return gg_rule_same_dtype(op, "y", y, op->in_names[0], dt, err, errlen);
    return 0;
}

/* An integer dtype's range, for a scalar, fill's value and arange's ends. */
static int ew_fits(gg_dtype dt, double v)
{
    if (dt == GG_DT_I32)
        return v == floor(v) && v >= -2147483648.0 && v <= 2147483647.0;
    if (dt == GG_DT_I64)
        return v == floor(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    return 1;
}

/* The scalar of a one-input binary op fits the operands' dtype. */
static int ew_rule_scalar(const gg_op_def *op, gg_dtype dt, const gg_op_attrs *attrs, char *err,
                          size_t errlen)
{
    double s = gg_rule_attr(op, attrs, EW_SCALAR), r = gg_rule_attr(op, attrs, EW_REVERSE);
    if (r != 0 && r != 1)
        return gg_rule_fail(err, errlen, "%s: reverse must be 0 or 1, got %g", op->name, r);
    if (dt == GG_DT_BOOL && s != 0 && s != 1)
        return gg_rule_fail(err, errlen, "%s: scalar must be 0 or 1 for bool operands, got %g",
                            op->name, s);
    if (gg_dtype_is_int(dt)) {
        if (!ew_fits(dt, s))
            return gg_rule_fail(err, errlen,
                                "%s: scalar must be an integer within %s's range for %s "
                                "operands, got %g",
                                op->name, gg_dtype_name(dt), gg_dtype_name(dt), s);
    }
    return 0;
}

/* add, sub, mul, div, pow, maximum, minimum; eq .. ge; bitwise_and/or/xor */
static int ew_check_binary(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                           const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                           char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    const int id = op->id;
    const gg_dtype dt = in[0].dtype;
    int rc = ew_rule_one_dtype(op, in, nin, &out[0], !ew_is_cmp(id), err, errlen);
    if (rc)
        return rc;
    if (ew_is_arith(id)) {
        if (dt == GG_DT_BOOL)
            return gg_rule_fail(err, errlen, "%s: takes f32, f16, bf16, i32 or i64, got bool",
                                op->name);
        if ((id == GG_OP_DIV || id == GG_OP_POW) && !gg_dtype_is_float(dt))
            return gg_rule_fail(err, errlen,
                                "%s: takes f32, f16 or bf16 (integer operands: cast them to a "
                                "floating dtype first), got %s",
                                op->name, gg_dtype_name(dt));
    } else if (ew_is_cmp(id)) {
        if (dt == GG_DT_BOOL && id != GG_OP_EQ && id != GG_OP_NE)
            return gg_rule_fail(err, errlen, "%s: bool operands are compared by eq and ne only",
                                op->name);
        if (out[0].dtype != GG_DT_BOOL)
            return gg_rule_fail(err, errlen, "%s: y must be bool, got %s", op->name,
                                gg_dtype_name(out[0].dtype));
    } else if (gg_dtype_is_float(dt)) {
        return gg_rule_fail(err, errlen, "%s: takes bool, i32 or i64, got %s", op->name,
                            gg_dtype_name(dt));
    }
    if (nin == 1 && (rc = ew_rule_scalar(op, dt, attrs, err, errlen)))
        return rc;
    return ew_rule_bcast(op, in, nin, &out[0], err, errlen);
}

/* neg, abs (floating, i32, i64); bitwise_not (bool, i32, i64); the rest
 * floating only.  y: x's dtype and shape. */
static int ew_check_unary_x(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                            const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                            char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    const gg_dtype dt = in[0].dtype;
    int rc = gg_rule_same_dtype(op, "y", &out[0], "x", dt, err, errlen);
    if (rc)
        return rc;
    if (op->id == GG_OP_BITWISE_NOT) {
        if (gg_dtype_is_float(dt))
            return gg_rule_fail(err, errlen, "%s: takes bool, i32 or i64, got %s", op->name,
                                gg_dtype_name(dt));
    } else if (op->id == GG_OP_NEG || op->id == GG_OP_ABS) {
        if (dt == GG_DT_BOOL)
            return gg_rule_fail(err, errlen, "%s: takes f32, f16, bf16, i32 or i64, got bool",
                                op->name);
    } else if (!gg_dtype_is_float(dt)) {
        return gg_rule_fail(err, errlen,
                            "%s: takes f32, f16 or bf16 (cast integers first), got %s", op->name,
                            gg_dtype_name(dt));
    }
    return gg_rule_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

static int ew_check_where(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                          const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                          char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    int rc;
    if (in[0].dtype != GG_DT_BOOL)
        return gg_rule_fail(err, errlen, "%s: cond must be bool, got %s", op->name,
                            gg_dtype_name(in[0].dtype));
    if ((rc = gg_rule_same_dtype(op, "b", &in[2], "a", in[1].dtype, err, errlen)) ||
        (rc = gg_rule_same_dtype(op, "y", &out[0], "a", in[1].dtype, err, errlen)))
        return rc;
    return ew_rule_bcast(op, in, nin, &out[0], err, errlen);
}

static int ew_check_fill(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                         const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                         char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    (void)in;
    double v = gg_rule_attr(op, attrs, 0);
    if (!ew_fits(out[0].dtype, v))
        return gg_rule_fail(err, errlen, "%s: value must be an integer within %s's range, got %g",
                            op->name, gg_dtype_name(out[0].dtype), v);
    return 0;
}

static int ew_check_arange(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                           const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                           char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    (void)in;
    const gg_tensor_desc *y = &out[0];
    int rc;
    if ((rc = gg_rule_ndim(op, "y", y, 1, "[N]", err, errlen)))
        return rc;
    if (y->dtype == GG_DT_BOOL)
        return gg_rule_fail(err, errlen, "%s: y must be f32, f16, bf16, i32 or i64, got bool",
                            op->name);
    double start = gg_rule_attr(op, attrs, 0), step = gg_rule_attr(op, attrs, 1);
    if (gg_dtype_is_int(y->dtype)) {
        double last = start + (double)(y->dims[0] - 1) * step;
        if (!ew_fits(y->dtype, start) || !ew_fits(y->dtype, step) || !ew_fits(y->dtype, last))
            return gg_rule_fail(err, errlen,
                                "%s: start and step must be integers and every value within "
                                "%s's range (start %g, step %g, last %g)",
                                op->name, gg_dtype_name(y->dtype), start, step, last);
    }
    return 0;
}

static int ew_check_cast(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                         const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                         char *err, size_t errlen)
{
    GG_RULE_COMMON_NODT();
    return gg_rule_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

/* add and mul: the broadcasting rule; their older forms (b of a's shape or a
 * row vector of a's last dim) are cases of it. */
static int ew_check_addmul(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                           const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                           char *err, size_t errlen)
{
    return ew_check_binary(op, in, nin, out, nout, attrs, err, errlen);
}

/* ---- CPU reference ------------------------------------------------------------ */

/* y's dims and each input's element strides over them, padded to 4 dims
 * (stride 0 where the input broadcasts). */
typedef struct {
    int64_t dims[4];
    int64_t st[3][4];
} ew_geo;

static void ew_geo_make(ew_geo *g, const gg_tensor *in, int nin, const gg_tensor_desc *y)
{
    for (int k = 0; k < 4; k++) {
        int j = k - (4 - y->ndim);
        g->dims[k] = j < 0 ? 1 : y->dims[j];
    }
    for (int i = 0; i < 3; i++) {
        int64_t s = 1;
        for (int k = 3; k >= 0; k--) {
            g->st[i][k] = 0;
            if (i >= nin)
                continue;
            int j = k - (4 - in[i].desc.ndim);
            int64_t d = j < 0 ? 1 : in[i].desc.dims[j];
            g->st[i][k] = d == 1 ? 0 : s;
            s *= d;
        }
    }
}

static inline float ew_ldf(const void *p, gg_dtype dt, int64_t i)
{
    switch (dt) {
    case GG_DT_F32:
        return ((const float *)p)[i];
    case GG_DT_F16:
        return gg_f16_to_f32_inl(((const uint16_t *)p)[i]);
    default:
        return gg_bf16_to_f32_inl(((const uint16_t *)p)[i]);
    }
}

static inline void ew_stf(void *p, gg_dtype dt, int64_t i, float v)
{
    switch (dt) {
    case GG_DT_F32:
        ((float *)p)[i] = v;
        break;
    case GG_DT_F16:
        ((uint16_t *)p)[i] = gg_f32_to_f16_inl(v);
        break;
    default:
        ((uint16_t *)p)[i] = gg_f32_to_bf16_inl(v);
        break;
    }
}

static inline int64_t ew_ldi(const void *p, gg_dtype dt, int64_t i)
{
    switch (dt) {
    case GG_DT_I32:
        return ((const int32_t *)p)[i];
    case GG_DT_I64:
        return ((const int64_t *)p)[i];
    default:
        return ((const uint8_t *)p)[i] != 0;
    }
}

static inline void ew_sti(void *p, gg_dtype dt, int64_t i, int64_t v)
{
    switch (dt) {
    case GG_DT_I32:
        ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v;
        break;
    case GG_DT_I64:
        ((int64_t *)p)[i] = v;
        break;
    default:
        ((uint8_t *)p)[i] = v != 0;
        break;
    }
}

/* maximum and minimum propagate NaN (torch.maximum). */
static inline float ew_arith_f(int id, float a, float b)
{
    switch (id) {
    case GG_OP_ADD:
        return a + b;
    case GG_OP_SUB:
        return a - b;
    case GG_OP_MUL:
        return a * b;
    case GG_OP_DIV:
        return a / b;
    case GG_OP_POW:
        return powf(a, b);
    case GG_OP_MAXIMUM:
        return a != a || b != b ? a + b : a > b ? a : b;
    default: /* GG_OP_MINIMUM */
        return a != a || b != b ? a + b : a < b ? a : b;
    }
}

/* Wrapping integer arithmetic through uint64 (no signed overflow). */
static inline int64_t ew_arith_i(int id, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (id) {
    case GG_OP_ADD:
        return (int64_t)(ua + ub);
    case GG_OP_SUB:
        return (int64_t)(ua - ub);
    case GG_OP_MUL:
        return (int64_t)(ua * ub);
    case GG_OP_MAXIMUM:
        return a > b ? a : b;
    case GG_OP_MINIMUM:
        return a < b ? a : b;
    case GG_OP_BITWISE_AND:
        return a & b;
    case GG_OP_BITWISE_OR:
        return a | b;
    default: /* GG_OP_BITWISE_XOR */
        return a ^ b;
    }
}

#define EW_CMP(id_, a_, b_)                                                              \
    ((id_) == GG_OP_EQ ? (a_) == (b_) : (id_) == GG_OP_NE ? (a_) != (b_)                  \
     : (id_) == GG_OP_LT ? (a_) < (b_) : (id_) == GG_OP_LE ? (a_) <= (b_)                 \
     : (id_) == GG_OP_GT ? (a_) > (b_) : (a_) >= (b_))

static inline float ew_unary_f(int id, float x)
{
    switch (id) {
    case GG_OP_NEG:
        return -x;
    case GG_OP_ABS:
        return fabsf(x);
    case GG_OP_RSQRT:
        return 1.0f / sqrtf(x);
    case GG_OP_SQRT:
        return sqrtf(x);
    case GG_OP_EXP:
        return expf(x);
    case GG_OP_LOG:
        return logf(x);
    case GG_OP_TANH:
        return tanhf(x);
    case GG_OP_SIN:
        return sinf(x);
    case GG_OP_COS:
        return cosf(x);
    case GG_OP_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    default: /* GG_OP_RECIP */
        return 1.0f / x;
    }
}

static inline int64_t ew_unary_i(int id, int64_t x, gg_dtype dt)
{
    switch (id) {
    case GG_OP_NEG:
        return (int64_t)(0 - (uint64_t)x);
    case GG_OP_ABS:
        return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    default: /* GG_OP_BITWISE_NOT */
        return dt == GG_DT_BOOL ? !x : ~x;
    }
}

/* The broadcasting ops: binary (1 or 2 inputs), where, the unary ones. */
static void ew_run(int id, const gg_tensor *in, int nin, const gg_tensor *y,
                   const gg_op_attrs *at)
{
    const int is_where = id == GG_OP_WHERE;
    const gg_dtype dt = in[is_where ? 1 : 0].desc.dtype, ydt = y->desc.dtype;
    const int isf = gg_dtype_is_float(dt);
    const int binary = ew_is_arith(id) || ew_is_cmp(id) || ew_is_bitwise2(id);
    const int rev = binary && nin == 1 && at->v[EW_REVERSE] != 0;
    const double sc = at->v[EW_SCALAR];
    const float scf = (float)sc;
    const int64_t sci = binary && nin == 1 && !isf ? (int64_t)sc : 0;
    const size_t es = gg_dtype_size(dt);
    ew_geo g;
    ew_geo_make(&g, in, nin, &y->desc);
    int64_t yi = 0;
    for (int64_t i0 = 0; i0 < g.dims[0]; i0++)
        for (int64_t i1 = 0; i1 < g.dims[1]; i1++)
            for (int64_t i2 = 0; i2 < g.dims[2]; i2++)
                for (int64_t i3 = 0; i3 < g.dims[3]; i3++, yi++) {
                    int64_t o[3];
                    for (int k = 0; k < 3; k++)
                        o[k] = i0 * g.st[k][0] + i1 * g.st[k][1] + i2 * g.st[k][2] +
                               i3 * g.st[k][3];
                    if (is_where) {
                        const int c = ((const uint8_t *)in[0].data)[o[0]] != 0;
                        memcpy((char *)y->data + (size_t)yi * es,
                               (const char *)in[c ? 1 : 2].data + (size_t)o[c ? 1 : 2] * es, es);
                    } else if (!binary) {
                        if (isf)
                            ew_stf(y->data, ydt, yi, ew_unary_f(id, ew_ldf(in[0].data, dt, o[0])));
                        else
                            ew_sti(y->data, ydt, yi,
                                   ew_unary_i(id, ew_ldi(in[0].data, dt, o[0]), dt));
                    } else if (isf) {
                        float a = ew_ldf(in[0].data, dt, o[0]);
                        float b = nin == 2 ? ew_ldf(in[1].data, dt, o[1]) : scf;
                        if (rev) {
                            float t = a;
                            a = b;
                            b = t;
                        }
                        if (ew_is_cmp(id))
                            ((uint8_t *)y->data)[yi] = (uint8_t)EW_CMP(id, a, b);
                        else
                            ew_stf(y->data, ydt, yi, ew_arith_f(id, a, b));
                    } else {
                        int64_t a = ew_ldi(in[0].data, dt, o[0]);
                        int64_t b = nin == 2 ? ew_ldi(in[1].data, dt, o[1]) : sci;
                        if (rev) {
                            int64_t t = a;
                            a = b;
                            b = t;
                        }
                        if (ew_is_cmp(id))
                            ((uint8_t *)y->data)[yi] = (uint8_t)EW_CMP(id, a, b);
                        else
                            ew_sti(y->data, ydt, yi, ew_arith_i(id, a, b));
                    }
                }
}

#define EW_CPU(ID)                                                                       \
    static void ew_cpu_##ID(const gg_tensor *in, int nin, const gg_tensor *out, int nout,   \
                            const gg_op_attrs *attrs)                                     \
    {                                                                                     \
        (void)nout;                                                                       \
        ew_run(GG_OP_##ID, in, nin, &out[0], attrs);                                      \
    }
EW_CPU(SUB)
EW_CPU(DIV)
EW_CPU(POW)
EW_CPU(MAXIMUM)
EW_CPU(MINIMUM)
EW_CPU(EQ)
EW_CPU(NE)
EW_CPU(LT)
EW_CPU(LE)
EW_CPU(GT)
EW_CPU(GE)
EW_CPU(BITWISE_AND)
EW_CPU(BITWISE_OR)
EW_CPU(BITWISE_XOR)
EW_CPU(BITWISE_NOT)
EW_CPU(WHERE)
EW_CPU(NEG)
EW_CPU(ABS)
EW_CPU(RSQRT)
EW_CPU(SQRT)
EW_CPU(EXP)
EW_CPU(LOG)
EW_CPU(TANH)
EW_CPU(SIN)
EW_CPU(COS)
EW_CPU(SIGMOID)
EW_CPU(RECIP)

/* add and mul in their older forms (floating, a of y's size, b of y's size
 * or a row vector of y's last dim) keep the row-wise reference of ops_cpu.c
 * that the fused chains share. */
int gg_ew_legacy_form(const gg_tensor_desc *in, int nin, const gg_tensor_desc *y)
{
    if (nin != 2 || !gg_dtype_is_float(in[0].dtype))
        return 0;
    int64_t n = gg_desc_numel(y), nb = gg_desc_numel(&in[1]);
    return gg_desc_numel(&in[0]) == n &&
           (nb == n || (in[1].ndim == 1 && in[1].dims[0] == y->dims[y->ndim - 1]));
}

static void ew_cpu_add(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                       const gg_op_attrs *attrs)
{
    const gg_tensor_desc d[2] = {in[0].desc, nin == 2 ? in[1].desc : in[0].desc};
    if (gg_ew_legacy_form(d, nin, &out[0].desc))
        gg_cpu_add(in, nin, out, nout, attrs);
    else
        ew_run(GG_OP_ADD, in, nin, &out[0], attrs);
}

static void ew_cpu_mul(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                       const gg_op_attrs *attrs)
{
    const gg_tensor_desc d[2] = {in[0].desc, nin == 2 ? in[1].desc : in[0].desc};
    if (gg_ew_legacy_form(d, nin, &out[0].desc))
        gg_cpu_mul(in, nin, out, nout, attrs);
    else
        ew_run(GG_OP_MUL, in, nin, &out[0], attrs);
}

static void ew_cpu_fill(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                        const gg_op_attrs *attrs)
{
    (void)in, (void)nin, (void)nout;
    const gg_tensor *y = &out[0];
    const int64_t n = gg_desc_numel(&y->desc);
    const double v = attrs->v[0];
    for (int64_t i = 0; i < n; i++) {
        if (gg_dtype_is_float(y->desc.dtype))
            ew_stf(y->data, y->desc.dtype, i, (float)v);
        else if (y->desc.dtype == GG_DT_BOOL)
            ((uint8_t *)y->data)[i] = v != 0;
        else
            ew_sti(y->data, y->desc.dtype, i, (int64_t)v);
    }
}

/* Floating: start + i * step in double, rounded to f32 and then to the
 * storage dtype; integers exactly in int64. */
static void ew_cpu_arange(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                          const gg_op_attrs *attrs)
{
    (void)in, (void)nin, (void)nout;
    const gg_tensor *y = &out[0];
    const int64_t n = y->desc.dims[0];
    const double start = attrs->v[0], step = attrs->v[1];
    for (int64_t i = 0; i < n; i++) {
        if (gg_dtype_is_float(y->desc.dtype))
            ew_stf(y->data, y->desc.dtype, i, (float)(start + (double)i * step));
        else
            ew_sti(y->data, y->desc.dtype, i, (int64_t)start + i * (int64_t)step);
    }
}

/* Every pair of dtypes: float -> int toward zero (NaN 0, saturating), int ->
 * float to nearest even in one rounding, anything -> bool x != 0, bool -> 0
 * or 1, int -> int wrapping; floating pairs through f32 (ops_cpu.c). */
static void ew_cpu_cast(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                        const gg_op_attrs *attrs)
{
    const gg_dtype xd = in[0].desc.dtype, yd = out[0].desc.dtype;
    if (gg_dtype_is_float(xd) && gg_dtype_is_float(yd)) {
        gg_cpu_cast(in, nin, out, nout, attrs);
        return;
    }
    const int64_t n = gg_desc_numel(&in[0].desc);
    const void *x = in[0].data;
    void *y = out[0].data;
    for (int64_t i = 0; i < n; i++) {
        if (gg_dtype_is_float(xd)) {
            const float v = ew_ldf(x, xd, i);
            if (yd == GG_DT_BOOL)
                ((uint8_t *)y)[i] = v != 0.0f;
            else if (yd == GG_DT_I32)
                ((int32_t *)y)[i] = gg_f_to_i32_inl(v);
            else
                ((int64_t *)y)[i] = gg_f_to_i64_inl(v);
        } else {
            gg_store_i64(y, yd, i, ew_ldi(x, xd, i));
        }
    }
}

/* ---- rows ------------------------------------------------------------------------ */

#define EW_SCALAR_ATTRS                                                                  \
    .nattrs = 2, .attrs = {                                                               \
        {.name = "scalar", .kind = GG_ATTR_FLOAT, .def = 0, .nonfinite = 1},              \
        {.name = "reverse", .kind = GG_ATTR_FLOAT, .def = 0},                             \
    }

#define EW_BINARY(ID, check_, cpu_)                                                      \
    GG_OP_ROW(ID, .nin_min = 1, .nin_max = 2, .nout = 1, .in_names = {"a", "b"},          \
              .out_names = {"y"}, EW_SCALAR_ATTRS, .check = check_, .cpu = cpu_,          \
              .inplace = 1)

#define EW_UNARY_X(ID)                                                                   \
    GG_OP_ROW(ID, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"},               \
              .out_names = {"y"}, .check = ew_check_unary_x, .cpu = ew_cpu_##ID,          \
              .inplace = 1)

GG_OP_ROW(ADD, .nin_min = 1, .nin_max = 2, .nout = 1, .in_names = {"a", "b"},
          .out_names = {"y"}, EW_SCALAR_ATTRS, .check = ew_check_addmul, .cpu = ew_cpu_add,
          .inplace = 1);
GG_OP_ROW(MUL, .nin_min = 1, .nin_max = 2, .nout = 1, .in_names = {"a", "b"},
          .out_names = {"y"}, EW_SCALAR_ATTRS, .check = ew_check_addmul, .cpu = ew_cpu_mul,
          .inplace = 1);
EW_BINARY(SUB, ew_check_binary, ew_cpu_SUB);
EW_BINARY(DIV, ew_check_binary, ew_cpu_DIV);
EW_BINARY(POW, ew_check_binary, ew_cpu_POW);
EW_BINARY(MAXIMUM, ew_check_binary, ew_cpu_MAXIMUM);
EW_BINARY(MINIMUM, ew_check_binary, ew_cpu_MINIMUM);
EW_BINARY(EQ, ew_check_binary, ew_cpu_EQ);
EW_BINARY(NE, ew_check_binary, ew_cpu_NE);
EW_BINARY(LT, ew_check_binary, ew_cpu_LT);
EW_BINARY(LE, ew_check_binary, ew_cpu_LE);
EW_BINARY(GT, ew_check_binary, ew_cpu_GT);
EW_BINARY(GE, ew_check_binary, ew_cpu_GE);
EW_BINARY(BITWISE_AND, ew_check_binary, ew_cpu_BITWISE_AND);
EW_BINARY(BITWISE_OR, ew_check_binary, ew_cpu_BITWISE_OR);
EW_BINARY(BITWISE_XOR, ew_check_binary, ew_cpu_BITWISE_XOR);
EW_UNARY_X(BITWISE_NOT);
GG_OP_ROW(WHERE, .nin_min = 3, .nin_max = 3, .nout = 1, .in_names = {"cond", "a", "b"},
          .out_names = {"y"}, .check = ew_check_where, .cpu = ew_cpu_WHERE, .inplace = 1);
EW_UNARY_X(NEG);
EW_UNARY_X(ABS);
EW_UNARY_X(RSQRT);
EW_UNARY_X(SQRT);
EW_UNARY_X(EXP);
EW_UNARY_X(LOG);
EW_UNARY_X(TANH);
EW_UNARY_X(SIN);
EW_UNARY_X(COS);
EW_UNARY_X(SIGMOID);
EW_UNARY_X(RECIP);
GG_OP_ROW(FILL, .nin_min = 0, .nin_max = 0, .nout = 1, .out_names = {"y"}, .nattrs = 1,
          .attrs = {{.name = "value", .kind = GG_ATTR_FLOAT, .def = 0, .nonfinite = 1}},
          .check = ew_check_fill, .cpu = ew_cpu_fill);
GG_OP_ROW(ARANGE, .nin_min = 0, .nin_max = 0, .nout = 1, .out_names = {"y"}, .nattrs = 2,
          .attrs = {{.name = "start", .kind = GG_ATTR_FLOAT, .def = 0},
                    {.name = "step", .kind = GG_ATTR_FLOAT, .def = 1}},
          .check = ew_check_arange, .cpu = ew_cpu_arange);
GG_OP_ROW(CAST, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"}, .out_names = {"y"},
          .check = ew_check_cast, .cpu = ew_cpu_cast);
