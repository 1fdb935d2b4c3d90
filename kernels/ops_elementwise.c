/* The elementwise family: rows and rules (CPU references of the older ops in
 * ops_cpu.c). */
#include "ops_rules.h"

/* y has the shape of x: copy, scale, gelu, silu */
static int ew_check_unary(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                          const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                          char *err, size_t errlen)
{
    GG_RULE_COMMON();
    return gg_rule_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

/* add, mul: b has a's shape or is a row vector of a's last dim */
static int ew_check_bcast(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                          const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                          char *err, size_t errlen)
{
    GG_RULE_COMMON();
    if (!gg_rule_same_shape(&in[1], &in[0]) &&
        !gg_rule_is_vec(&in[1], gg_rule_last_dim(&in[0]))) {
        gg_shape_buf a, b;
        return gg_rule_fail(err, errlen,
                            "%s: b must have the shape of a %s or be 1-D of length %lld (the "
                            "last dim of a), got %s",
                            op->name, gg_rule_shape_str(&in[0], &a),
                            (long long)gg_rule_last_dim(&in[0]), gg_rule_shape_str(&in[1], &b));
    }
    return gg_rule_out(op, &out[0], &in[0], "the shape of a", err, errlen);
}

static int ew_check_silu_mul(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                             const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                             char *err, size_t errlen)
{
    GG_RULE_COMMON();
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
GG_OP_ROW(ADD, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"a", "b"},
          .out_names = {"y"}, .check = ew_check_bcast, .cpu = gg_cpu_add, .inplace = 1);
GG_OP_ROW(MUL, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"a", "b"},
          .out_names = {"y"}, .check = ew_check_bcast, .cpu = gg_cpu_mul, .inplace = 1);
GG_OP_ROW(SCALE, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"}, .out_names = {"y"},
          .nattrs = 1, .attrs = {{.name = "scale", .kind = GG_ATTR_FLOAT, .def = 1.0}},
          .check = ew_check_unary, .cpu = gg_cpu_scale, .inplace = 1);
GG_OP_ROW(GELU, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"}, .out_names = {"y"},
          .nattrs = 1,
          .attrs = {{.name = "approximate", .kind = GG_ATTR_CHOICE, .def = 0,
                     .choices = ew_gelu_choices}},
          .check = ew_check_unary, .cpu = gg_cpu_gelu, .inplace = 1);
EW_UNARY(SILU, gg_cpu_silu);
GG_OP_ROW(SILU_MUL, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"a", "b"},
          .out_names = {"y"}, .check = ew_check_silu_mul, .cpu = gg_cpu_silu_mul,
          .inplace = 1);
