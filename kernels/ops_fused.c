/* SPDX-License-Identifier: MIT */
/* The fused ops (ops.h, "fused ops"): their table, shape rule and CPU
 * references.  A reference runs the node sequence the op stands for, with
 * the same per-op references and the same roundings to the storage dtype
 * between steps, so a fused run on the cpu backend is bit-identical to the
 * unfused one; where an intermediate is dropped its values pass through the
 * final output's memory (every op involved but linear runs in place, and the
 * planner never lets an output alias an input a later step still reads).
 * Nothing here allocates: the cpu backend replays with no allocation. */
#define GG_OPS_IMPL
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fz_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int fz_check(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                    const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, char *err,
                    size_t errlen)
{
    (void)attrs;
    if (nin < op->nin_min || nin > op->nin_max || nout < 1 || nout > op->nout)
        return fz_fail(err, errlen, "%s: %d inputs and %d outputs do not fit the op", op->name,
                       nin, nout);
    gg_dtype dt = in[0].dtype;
    if (!gg_dtype_is_float(dt))
        return fz_fail(err, errlen, "%s: takes f32, f16 or bf16", op->name);
    for (int i = 0; i < nin + nout; i++) {
        const gg_tensor_desc *d = i < nin ? &in[i] : &out[i - nin];
        if (d->dtype != dt || d->ndim < 1 || d->ndim > GG_MAX_DIMS)
            return fz_fail(err, errlen, "%s: operand %d does not share x's dtype or has no "
                           "shape", op->name, i);
    }
    return 0;
}

static gg_op_attrs fz_attrs1(double v)
{
    gg_op_attrs a;
    memset(&a, 0, sizeof a);
    a.v[0] = v;
    return a;
}

/* act on src into dst (may be the same memory). */
static void fz_act(int act, double p, const gg_tensor *src, const gg_tensor *dst)
{
    gg_op_attrs a;
    switch (act) {
    case GG_ACT_GELU_ERF:
    case GG_ACT_GELU_TANH:
        a = fz_attrs1(act == GG_ACT_GELU_TANH ? 1.0 : 0.0);
        gg_cpu_gelu(src, 1, dst, 1, &a);
        break;
    case GG_ACT_SILU:
        a = fz_attrs1(0);
        gg_cpu_silu(src, 1, dst, 1, &a);
        break;
    case GG_ACT_SCALE:
        a = fz_attrs1(p);
        gg_cpu_scale(src, 1, dst, 1, &a);
        break;
    default:
        if (src->data != dst->data) {
            a = fz_attrs1(0);
            gg_cpu_copy(src, 1, dst, 1, &a);
        }
        break;
    }
}

static void fz_norm_act(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                        const gg_op_attrs *attrs)
{
    const gg_tensor *mid = nout > 1 ? &out[1] : &out[0];
    gg_op_attrs na = fz_attrs1(attrs->v[0]);
    na.v[1] = attrs->v[1] == 2.0;   /* rmsnorm's round_x */
    if (attrs->v[1] >= 1.0)
        gg_cpu_rmsnorm(in, 2, mid, 1, &na);
    else
        gg_cpu_layernorm(in, nin, mid, 1, &na);
    fz_act((int)attrs->v[2], attrs->v[3], mid, &out[0]);
}

static void fz_add_rmsnorm(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                           const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    gg_op_attrs none = fz_attrs1(0), na = fz_attrs1(attrs->v[0]);
    na.v[1] = attrs->v[1] != 0.0;
    gg_cpu_add(in, 2, &out[0], 1, &none);
    gg_tensor rin[2] = {out[0], in[2]};
    gg_cpu_rmsnorm(rin, 2, &out[1], 1, &na);
}

static void fz_linear_act(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                          const gg_op_attrs *attrs)
{
    const gg_tensor *mid = nout > 1 ? &out[1] : &out[0];
    gg_op_attrs none = fz_attrs1(0);
    bool sep = attrs->v[2] == 1.0 && nin == 3;
    gg_cpu_linear(in, sep ? 2 : nin, mid, 1, &none);
    if (sep) {
        gg_tensor ain[2] = {*mid, in[2]};
        gg_cpu_add(ain, 2, mid, 1, &none);
    }
    fz_act((int)attrs->v[0], attrs->v[1], mid, &out[0]);
}

static void fz_gate_up(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                       const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    gg_op_attrs none = fz_attrs1(0), rnd = fz_attrs1(attrs->v[1] != 0.0);
    gg_tensor gin[2] = {in[0], in[1]}, uin[2] = {in[0], in[2]};
    gg_cpu_linear(gin, 2, &out[1], 1, &none);
    gg_cpu_linear(uin, 2, &out[2], 1, &none);
    gg_tensor sin[2] = {out[1], out[2]};
    gg_cpu_silu_mul(sin, 2, &out[0], 1, &rnd);
}

static void fz_ew_chain(const gg_tensor *in, int nin, const gg_tensor *out, int nout,
                        const gg_op_attrs *attrs)
{
    (void)nin, (void)nout;
    gg_ew_steps st;
    if (gg_ew_unpack(attrs->v[0], &st) < 0)
        return;   /* the planner packs them; never met */
    const gg_tensor *y = &out[0];
    int nscale = 0;
    for (int k = 0; k < st.n; k++) {
        const gg_tensor *v = k == 0 ? &in[0] : y;
        const gg_tensor *e = &in[st.arg[k] < nin ? st.arg[k] : 0];
        gg_tensor two[2] = {*v, *e};
        gg_op_attrs a = fz_attrs1(0);
        switch (st.op[k]) {
        case GG_EW_ADD:
            gg_cpu_add(two, 2, y, 1, &a);
            break;
        case GG_EW_MUL:
            gg_cpu_mul(two, 2, y, 1, &a);
            break;
        case GG_EW_SCALE:
            a.v[0] = attrs->v[1 + (nscale < GG_EW_MAX_SCALES ? nscale : 0)];
            nscale++;
            gg_cpu_scale(v, 1, y, 1, &a);
            break;
        case GG_EW_GELU_ERF:
        case GG_EW_GELU_TANH:
            a.v[0] = st.op[k] == GG_EW_GELU_TANH ? 1.0 : 0.0;
            gg_cpu_gelu(v, 1, y, 1, &a);
            break;
        case GG_EW_SILU:
            gg_cpu_silu(v, 1, y, 1, &a);
            break;
        case GG_EW_SILU_MUL:
        case GG_EW_SILU_MUL_RND:
            a.v[0] = st.op[k] == GG_EW_SILU_MUL_RND;   /* silu_mul's round_act */
            gg_cpu_silu_mul(two, 2, y, 1, &a);
            break;
        case GG_EW_SILU_MUL_R:
        case GG_EW_SILU_MUL_R_RND: {
            gg_tensor r[2] = {*e, *v};
            a.v[0] = st.op[k] == GG_EW_SILU_MUL_R_RND;
            gg_cpu_silu_mul(r, 2, y, 1, &a);
            break;
        }
        default:
            if (v->data != y->data)
                gg_cpu_copy(v, 1, y, 1, &a);
            break;
        }
    }
}

#define FZ(kind_, name_, nmin_, nmax_, nout_, cpu_)                                      \
    [kind_] = {.name = name_, .id = GG_OP_FUSED_BASE + kind_, .nin_min = nmin_,             \
               .nin_max = nmax_, .nout = nout_, .nattrs = 4,                                \
               .attrs = {{.name = "a0", .kind = GG_ATTR_FLOAT},                             \
                         {.name = "a1", .kind = GG_ATTR_FLOAT},                             \
                         {.name = "a2", .kind = GG_ATTR_FLOAT},                             \
                         {.name = "a3", .kind = GG_ATTR_FLOAT}},                            \
               .check = fz_check, .cpu = cpu_}

static const gg_op_def fz_table[GG_FUSED_COUNT] = {
    FZ(GG_FUSED_NORM_ACT, "fused.norm_act", 2, 3, 2, fz_norm_act),
    FZ(GG_FUSED_ADD_RMSNORM, "fused.add_rmsnorm", 3, 3, 2, fz_add_rmsnorm),
    FZ(GG_FUSED_LINEAR_ACT, "fused.linear_act", 2, 3, 2, fz_linear_act),
    FZ(GG_FUSED_GATE_UP, "fused.gate_up", 3, 3, 3, fz_gate_up),
    FZ(GG_FUSED_EW_CHAIN, "fused.ew_chain", 1, 4, 1, fz_ew_chain),
};

const gg_op_def *gg_ops_fused(gg_fused_kind k)
{
    return (int)k >= 0 && k < GG_FUSED_COUNT ? &fz_table[k] : NULL;
}

int gg_ops_fused_kind(const gg_op_def *op)
{
    if (!op)
        return -1;
    for (int k = 0; k < GG_FUSED_COUNT; k++)
        if (op == &fz_table[k])
            return k;
    return -1;
}

/* Packed: bits 0-3 the step count, then 8 bits a step (4: op, 4: input). */
double gg_ew_pack(const gg_ew_steps *s)
{
    uint64_t v = (uint64_t)(s->n & 0xf);
    for (int k = 0; k < s->n && k < GG_EW_MAX_STEPS; k++)
        v |= (uint64_t)((s->op[k] & 0xf) | ((s->arg[k] & 0xf) << 4)) << (4 + 8 * k);
    return (double)v;
}

int gg_ew_unpack(double d, gg_ew_steps *s)
{
    if (!(d >= 0 && d < 0x1p52) || d != floor(d))
        return -EINVAL;
    uint64_t v = (uint64_t)d;
    s->n = (int)(v & 0xf);
    if (s->n < 1 || s->n > GG_EW_MAX_STEPS)
        return -EINVAL;
    for (int k = 0; k < s->n; k++) {
        uint8_t b = (uint8_t)(v >> (4 + 8 * k));
        s->op[k] = b & 0xf;
        s->arg[k] = b >> 4;
        if (s->op[k] < GG_EW_ADD || s->op[k] > GG_EW_SILU_MUL_R_RND || s->arg[k] > 3)
            return -EINVAL;
    }
    return 0;
}

/* ---- row chains ------------------------------------------------------------------ */

static const gg_op_def rc_def = {.name = "fused.row_chain", .id = GG_OP_FUSED_BASE + 100,
                                 .nin_min = 1, .nin_max = 1, .nout = 1};

const gg_op_def *gg_ops_rowchain(void)
{
    return &rc_def;
}

static bool rc_same(const gg_tensor_desc *a, const gg_tensor_desc *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

int gg_rowchain_check(const gg_rowchain *c, char *err, size_t errlen)
{
    if (!c || c->n < 1 || c->n > GG_ROWCHAIN_MAX_STAGES)
        return fz_fail(err, errlen, "row chain: %d stages (1..%d)", c ? c->n : 0,
                       GG_ROWCHAIN_MAX_STAGES);
    const gg_tensor_desc *x = &c->x.desc;
    if (!c->x.data || !gg_dtype_is_float(x->dtype) || x->ndim < 1 || x->ndim > GG_MAX_DIMS ||
        gg_desc_numel(x) < 1)
        return fz_fail(err, errlen, "row chain: x must be a non-empty f32, f16 or bf16 tensor");
    const int64_t cols = x->dims[x->ndim - 1];
    for (int k = 0; k < c->n; k++) {
        const gg_rowchain_stage *s = &c->st[k];
        if (!s->y.data && k == c->n - 1)
            return fz_fail(err, errlen, "row chain: the last stage's y has no data");
        if ((s->y.data && !rc_same(&s->y.desc, x)) || (s->h.data && !rc_same(&s->h.desc, x)))
            return fz_fail(err, errlen, "row chain: stage %d's outputs do not have x's shape",
                           k);
        const gg_tensor *wb[2] = {&s->w, &s->b};
        for (int i = 0; i < (s->rms ? 1 : 2); i++)
            if (!wb[i]->data || wb[i]->desc.dtype != x->dtype ||
                gg_desc_numel(&wb[i]->desc) != cols)
                return fz_fail(err, errlen, "row chain: stage %d's %s must be %lld values of "
                               "x's dtype", k, i ? "b" : "w", (long long)cols);
        if (s->act < GG_ACT_NONE || s->act > GG_ACT_SCALE)
            return fz_fail(err, errlen, "row chain: stage %d: unknown activation %d", k,
                           s->act);
        if (s->round_x && !s->rms)
            return fz_fail(err, errlen, "row chain: stage %d: round_x on a layernorm stage", k);
    }
    return 0;
}

int gg_rowchain_stage_launch(const gg_rowchain *c, int k, gg_tensor *in, gg_tensor *out,
                             int *nout, gg_op_attrs *attrs)
{
    const gg_rowchain_stage *s = &c->st[k], *last = &c->st[c->n - 1];
    if (k == 0)
        in[0] = c->x;
    else
        in[0] = c->st[k - 1].y.data ? c->st[k - 1].y : last->y;
    in[1] = s->w;
    int nin = 2;
    if (!s->rms)
        in[nin++] = s->b;
    out[0] = s->y.data ? s->y : last->y;
    *nout = 1;
    if (s->h.data)
        out[(*nout)++] = s->h;
    memset(attrs, 0, sizeof *attrs);
    attrs->v[0] = s->eps;
    attrs->v[1] = s->rms ? (s->round_x ? 2.0 : 1.0) : 0.0;
    attrs->v[2] = s->act;
    attrs->v[3] = s->p;
    return nin;
}

void gg_rowchain_run_cpu(const gg_rowchain *c)
{
    for (int k = 0; k < c->n; k++) {
        gg_tensor in[3], out[2];
        gg_op_attrs a;
        int nout, nin = gg_rowchain_stage_launch(c, k, in, out, &nout, &a);
        fz_norm_act(in, nin, out, nout, &a);
    }
}
