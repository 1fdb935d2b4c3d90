/* SPDX-License-Identifier: MIT */
/* The matmul family: bmm, the product of two activations (HF rotary's
 * inv_freq @ positions, attention written out by hand), where linear is an
 * activation times a weight.  Rule and CPU reference.
 *
 *   bmm   in a [..., M, K], b [..., K, N] (trans_b 1: [..., N, K])
 *         out y [..., M, N]      attr trans_b (0 or 1)
 *   2 to 4 dims each; the batch dims (all but the last two) are right-aligned
 *   and broadcast (equal or 1; y has the broadcast ones, as torch.matmul);
 *   one floating dtype, f32 accumulation in k order. */

/* a*b+c stays two roundings (ops_cpu.c says why) */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "ops_rules.h"

#include <stdlib.h>

/* ---- rule -------------------------------------------------------------------- */

/* a's batch dim i of y's nb batch dims (right-aligned), 1 where a has none. */
static int64_t mm_bdim(const gg_tensor_desc *a, int nb, int i)
{
    const int k = i - (nb - (a->ndim - 2));
    return k < 0 ? 1 : a->dims[k];
}

static int mm_check_bmm(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                        const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                        size_t errlen)
{
    GG_RULE_COMMON();
    const gg_tensor_desc *a = &in[0], *b = &in[1], *y = &out[0];
    gg_shape_buf sa, sb;
    const double tb = gg_rule_attr(op, attrs, 0);
    if (tb != 0 && tb != 1)
        return gg_rule_fail(err, errlen, "%s: trans_b must be 0 or 1, got %g", op->name, tb);
    if (a->ndim < 2 || b->ndim < 2)
        return gg_rule_fail(err, errlen, "%s: a and b must have 2 to 4 dims [..., M, K] and "
                            "[..., K, N], got %s and %s", op->name, gg_rule_shape_str(a, &sa),
                            gg_rule_shape_str(b, &sb));
    const int64_t M = a->dims[a->ndim - 2], K = a->dims[a->ndim - 1];
    const int64_t bk = b->dims[b->ndim - (tb ? 1 : 2)], N = b->dims[b->ndim - (tb ? 2 : 1)];
    if (bk != K)
        return gg_rule_fail(err, errlen, "%s: b %s must be %s with K = %lld (the last dim of a "
                            "%s)", op->name, gg_rule_shape_str(b, &sb),
                            tb ? "[..., N, K] (trans_b 1)" : "[..., K, N]", (long long)K,
                            gg_rule_shape_str(a, &sa));
    const int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
    gg_tensor_desc want = {.dtype = a->dtype, .ndim = nb + 2};
    for (int i = 0; i < nb; i++) {
        const int64_t da = mm_bdim(a, nb, i), db = mm_bdim(b, nb, i);
        if (da != db && da != 1 && db != 1)
            return gg_rule_fail(err, errlen, "%s: the batch dims of a %s and b %s do not "
                                "broadcast (each pair right-aligned must be equal or 1)",
                                op->name, gg_rule_shape_str(a, &sa), gg_rule_shape_str(b, &sb));
        want.dims[i] = da > db ? da : db;
    }
    want.dims[nb] = M;
    want.dims[nb + 1] = N;
    return gg_rule_out(op, y, &want, "the broadcast batch dims of a and b, then M of a, N of b",
                       err, errlen);
}

/* ---- CPU reference ------------------------------------------------------------ */

/* The offset (in elements) of t's matrix for y's batch index idx (the batch
 * dims flattened, row-major). */
static int64_t mm_batch_offset(const gg_tensor_desc *t, const gg_tensor_desc *y, int64_t idx)
{
    const int nb = y->ndim - 2;
    int64_t o = 0, stride = t->dims[t->ndim - 2] * t->dims[t->ndim - 1];
    for (int i = nb - 1; i >= 0; i--) {
        const int64_t yi = idx % y->dims[i], ti = mm_bdim(t, nb, i);
        idx /= y->dims[i];
        if (ti != 1)
            o += yi * stride;
        stride *= ti;
    }
    return o;
}

static void mm_cpu_bmm(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                       const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    const gg_tensor *a = &in[0], *b = &in[1], *y = &out[0];
    const gg_dtype dt = y->desc.dtype;
    const int tb = attrs->v[0] != 0;
    const int nb = y->desc.ndim - 2;
    const int64_t M = y->desc.dims[nb], N = y->desc.dims[nb + 1];
    const int64_t K = a->desc.dims[a->desc.ndim - 1];
    int64_t nbatch = 1;
    for (int i = 0; i < nb; i++)
        nbatch *= y->desc.dims[i];
    /* a's rows and b's columns as f32 rows of K; without the scratch the same
     * sums in the same order straight from storage */
    float *af = malloc(sizeof(float) * (size_t)(M + N) * (size_t)K);
    float *bf = af ? af + M * K : NULL;
    for (int64_t bi = 0; bi < nbatch; bi++) {
        const int64_t a0 = mm_batch_offset(&a->desc, &y->desc, bi);
        const int64_t b0 = mm_batch_offset(&b->desc, &y->desc, bi);
        if (af) {
            for (int64_t i = 0; i < M * K; i++)
                af[i] = gg_load(a->data, dt, a0 + i);
            for (int64_t n = 0; n < N; n++)
                for (int64_t k = 0; k < K; k++)
                    bf[n * K + k] = gg_load(b->data, dt, b0 + (tb ? n * K + k : k * N + n));
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                float acc = 0.0f;
                if (af) {
                    const float *ar = af + m * K, *br = bf + n * K;
                    for (int64_t k = 0; k < K; k++)
                        acc += ar[k] * br[k];
                } else {
                    for (int64_t k = 0; k < K; k++)
                        acc += gg_load(a->data, dt, a0 + m * K + k) *
                               gg_load(b->data, dt, b0 + (tb ? n * K + k : k * N + n));
                }
                gg_store(y->data, dt, (bi * M + m) * N + n, acc);
            }
    }
    free(af);
}

/* ---- row ------------------------------------------------------------------------ */

GG_OP_ROW(BMM, .nin_min = 2, .nin_max = 2, .nout = 1, .in_names = {"a", "b"},
          .out_names = {"y"}, .nattrs = 1,
          .attrs = {{.name = "trans_b", .kind = GG_ATTR_FLOAT, .def = 0}},
          .check = mm_check_bmm, .cpu = mm_cpu_bmm);
