/* SPDX-License-Identifier: MIT */
/* linear: its row and rule (CPU reference in ops_cpu.c). */
#include "ops_rules.h"

static int linear_check(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                        const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs,
                        char *err, size_t errlen)
{
    GG_RULE_COMMON();
    const gg_tensor_desc *x = &in[0], *w = &in[1];
    int64_t k = gg_rule_last_dim(x);
    if (w->ndim != 2 || w->dims[1] != k) {
        gg_shape_buf sb;
        return gg_rule_fail(err, errlen,
                            "%s: w must be 2-D [out, in] with in = %lld (the last dim of x), "
                            "got %s",
                            op->name, (long long)k, gg_rule_shape_str(w, &sb));
    }
    int64_t n = w->dims[0];
    if (nin == 3) {
        int rc = gg_rule_vec(op, "b", &in[2], n, "dim 0 of w", err, errlen);
        if (rc)
            return rc;
    }
    gg_tensor_desc want = *x;
    want.dims[want.ndim - 1] = n;
    return gg_rule_out(op, &out[0], &want, "the leading dims of x, then dim 0 of w", err, errlen);
}

GG_OP_ROW(LINEAR, .nin_min = 2, .nin_max = 3, .nout = 1, .in_names = {"x", "w", "b"},
          .out_names = {"y"}, .check = linear_check, .cpu = gg_cpu_linear);
