/* SPDX-License-Identifier: MIT */
/* The row-normalizing family (layernorm, rmsnorm, softmax): rows and rules
 * (CPU references in ops_cpu.c). */
#include "ops_rules.h"

static int norm_check(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                      const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                      size_t errlen)
{
    GG_RULE_COMMON();
    int rc = gg_rule_eps(op, attrs, err, errlen);
    if (!rc && op->id == GG_OP_RMSNORM) {
        const double round_x = gg_rule_attr(op, attrs, 1);
        if (round_x != 0 && round_x != 1)
            return gg_rule_fail(err, errlen, "%s: round_x must be 0 or 1, got %g", op->name,
                                round_x);
    }
    int64_t d = gg_rule_last_dim(&in[0]);
    for (int i = 1; i < nin && !rc; i++)
        rc = gg_rule_vec(op, op->in_names[i], &in[i], d, "the last dim of x", err, errlen);
    if (rc)
        return rc;
    return gg_rule_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

static int norm_check_softmax(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                              const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                              char *err, size_t errlen)
{
    GG_RULE_COMMON();
    return gg_rule_out(op, &out[0], &in[0], "the shape of x", err, errlen);
}

GG_OP_ROW(LAYERNORM, .nin_min = 3, .nin_max = 3, .nout = 1, .in_names = {"x", "w", "b"},
          .out_names = {"y"}, .nattrs = 1,
          .attrs = {{.name = "eps", .kind = GG_ATTR_FLOAT, .def = 1e-5}}, .check = norm_check,
          .cpu = gg_cpu_layernorm);
/* round_x 1: x * rstd is rounded to y's dtype before the weight multiply,
 * as HF's `weight * hidden.to(input_dtype)` stores it. */
GG_OP_ROW(RMSNORM, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"x", "w"},
          .out_names = {"y"}, .nattrs = 2,
          .attrs = {{.name = "eps", .kind = GG_ATTR_FLOAT, .def = 1e-6},
                    {.name = "round_x", .kind = GG_ATTR_FLOAT, .def = 0}}, .check = norm_check,
          .cpu = gg_cpu_rmsnorm);
GG_OP_ROW(SOFTMAX, .nin_min = 1, .nin_max = 1, .nout = 1, .in_names = {"x"}, .out_names = {"y"},
          .check = norm_check_softmax, .cpu = gg_cpu_softmax);
