/* SPDX-License-Identifier: MIT */
/* The launch planner (fuse.h): fused ops found in a branch's nodes.
 *
 * Each pattern looks at the nodes from i on and, when they may run as one
 * fused op, fills that op's node and says how many nodes it replaces.  A
 * pattern only ever takes consecutive nodes, so the order of every read
 * and write outside the run is kept.  The planner reads the program only
 * through its layout (program_layout.c): the builder and program.rebind
 * call it, it calls neither. */
#include "core/fuse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const gg_program *p;
    const gg_branch *br;
    const int *last_read;   /* per scratch root: the last node reading it, or -1 */
    int top;
} fz_ctx;

/* n runs the table's op `id` (ops_list.h); the planner's own fused nodes
 * never match. */
static bool fz_is(const gg_pnode *n, gg_op_id id)
{
    return n->op == gg_ops_at(id);
}

/* n rounds an intermediate to its dtype (rmsnorm's round_x, silu_mul's
 * round_act, as Hugging Face's f16/bf16 models do): every fused op that
 * takes such a node carries the flag and rounds where the node does. */
static bool fz_rounds(const gg_pnode *n)
{
    return (fz_is(n, GG_OP_RMSNORM) && n->attrs.v[1] != 0.0) ||
           (fz_is(n, GG_OP_SILU_MUL) && n->attrs.v[0] != 0.0);
}

static const gg_ptensor *fz_t(const fz_ctx *c, int t)
{
    return &c->p->tensors[t];
}

static bool fz_same_shape(const fz_ctx *c, int a, int b)
{
    const gg_ptensor *ta = fz_t(c, a), *tb = fz_t(c, b);
    if (ta->batch_dim != tb->batch_dim || ta->desc.ndim != tb->desc.ndim ||
        ta->desc.dtype != tb->desc.dtype)
        return false;
    for (int i = 0; i < ta->desc.ndim; i++)
        if (ta->desc.dims[i] != tb->desc.dims[i])
            return false;
    return true;
}

/* Whether anything after node `end` may read t's values: a buffer (the
 * client reads it, and so may a later replay), or scratch read (through any
 * view of its bytes) by a node after end. */
static bool fz_needed_after(const fz_ctx *c, int t, int end)
{
    if (fz_t(c, t)->buf)
        return true;
    return c->last_read[gg_program_root(c->p, t)] > end;
}

/* The run's safety: no tensor it writes (kept or not) may overlap a tensor
 * it reads from outside the run, except, when alias_ok, an exact in-place
 * alias of `main` (the run's first input, read once, same shape); and the
 * tensors it writes overlap each other only by being the same tensor. */
static bool fz_safe(const fz_ctx *c, const int *wr, int nw, const int *ext, int ne, int main,
                    bool alias_ok)
{
    int main_reads = 0;
    for (int e = 0; e < ne; e++)
        main_reads += ext[e] == main;
    for (int w = 0; w < nw; w++) {
        for (int e = 0; e < ne; e++) {
            int ov = gg_program_overlap(c->p, wr[w], ext[e], c->top);
            if (ov == 0)
                continue;
            if (alias_ok && ov == 2 && ext[e] == main && main_reads == 1 &&
                fz_same_shape(c, wr[w], main))
                continue;
            return false;
        }
        for (int v = w + 1; v < nw; v++)
            if (wr[v] != wr[w] && gg_program_overlap(c->p, wr[w], wr[v], c->top) != 0)
                return false;
    }
    return true;
}

static void fz_node(gg_pnode *f, gg_fused_kind k, const int *in, int nin, const int *out,
                    int nout)
{
    memset(f, 0, sizeof(*f));
    f->op = gg_ops_fused(k);
    f->nin = nin;
    f->nout = nout;
    memcpy(f->in, in, sizeof(int) * (size_t)nin);
    memcpy(f->out, out, sizeof(int) * (size_t)nout);
}

/* ---- add -> rmsnorm --------------------------------------------------------- */

static int fz_add_rmsnorm(const fz_ctx *c, int i, gg_pnode *f)
{
    const gg_branch *br = c->br;
    if (i + 1 >= br->nnodes)
        return 0;
    const gg_pnode *a = &br->nodes[i], *r = &br->nodes[i + 1];
    if (!fz_is(a, GG_OP_ADD) || a->nin != 2 || !fz_is(r, GG_OP_RMSNORM) ||
        r->in[0] != a->out[0] || !fz_same_shape(c, a->in[0], a->in[1]) ||
        r->in[1] == a->out[0])
        return 0;
    int in[3] = {a->in[0], a->in[1], r->in[1]}, out[2] = {a->out[0], r->out[0]};
    if (!fz_safe(c, out, 2, in, 3, a->in[0], true))
        return 0;
    fz_node(f, GG_FUSED_ADD_RMSNORM, in, 3, out, 2);
    f->attrs.v[0] = r->attrs.v[0];
    f->attrs.v[1] = fz_rounds(r);
    return 2;
}

/* ---- gate and up linears -> silu_mul --------------------------------------------- */

static int fz_gate_up(const fz_ctx *c, int i, gg_pnode *f)
{
    const gg_branch *br = c->br;
    if (i + 2 >= br->nnodes)
        return 0;
    const gg_pnode *l0 = &br->nodes[i], *l1 = &br->nodes[i + 1], *m = &br->nodes[i + 2];
    if (!fz_is(l0, GG_OP_LINEAR) || !fz_is(l1, GG_OP_LINEAR) || !fz_is(m, GG_OP_SILU_MUL) ||
        l0->nin != 2 || l1->nin != 2 || l0->in[0] != l1->in[0] || l0->out[0] == l1->out[0])
        return 0;
    const gg_pnode *g, *u;
    if (m->in[0] == l0->out[0] && m->in[1] == l1->out[0]) {
        g = l0;
        u = l1;
    } else if (m->in[0] == l1->out[0] && m->in[1] == l0->out[0]) {
        g = l1;
        u = l0;
    } else {
        return 0;
    }
    if (!fz_same_shape(c, g->in[1], u->in[1]) || l1->in[1] == l0->out[0])
        return 0;
    /* g and u are staging the kernel may skip: only when nothing reads them */
    int y = m->out[0];
    if ((g->out[0] != y && fz_needed_after(c, g->out[0], i + 2)) ||
        (u->out[0] != y && fz_needed_after(c, u->out[0], i + 2)))
        return 0;
    int in[3] = {g->in[0], g->in[1], u->in[1]}, out[3] = {y, g->out[0], u->out[0]};
    if (!fz_safe(c, out, 3, in, 3, -1, false))
        return 0;
    fz_node(f, GG_FUSED_GATE_UP, in, 3, out, 3);
    f->attrs.v[1] = fz_rounds(m);
    return 3;
}

/* ---- activations ------------------------------------------------------------ */

/* n as an activation of norm_act / linear_act, or GG_ACT_NONE. */
static int fz_act_of(const gg_pnode *n, double *param)
{
    *param = 0;
    if (n->nin != 1)
        return GG_ACT_NONE;
    if (fz_is(n, GG_OP_GELU))
        return n->attrs.v[0] == 1.0 ? GG_ACT_GELU_TANH : GG_ACT_GELU_ERF;
    if (fz_is(n, GG_OP_SILU))
        return GG_ACT_SILU;
    if (fz_is(n, GG_OP_SCALE)) {
        *param = n->attrs.v[0];
        return GG_ACT_SCALE;
    }
    return GG_ACT_NONE;
}

/* ---- norm -> activation ---------------------------------------------------------- */

static int fz_norm_act(const fz_ctx *c, int i, gg_pnode *f)
{
    const gg_branch *br = c->br;
    if (i + 1 >= br->nnodes)
        return 0;
    const gg_pnode *n = &br->nodes[i], *a = &br->nodes[i + 1];
    bool rms = fz_is(n, GG_OP_RMSNORM);
    if (!rms && !fz_is(n, GG_OP_LAYERNORM))
        return 0;
    double param;
    int act = fz_act_of(a, &param);
    if (act == GG_ACT_NONE || a->in[0] != n->out[0])
        return 0;
    int h = n->out[0], y = a->out[0];
    bool keep = h != y && fz_needed_after(c, h, i + 1);
    int out[2] = {y, h};
    if (!fz_safe(c, out, 2, n->in, n->nin, n->in[0], true))
        return 0;
    fz_node(f, GG_FUSED_NORM_ACT, n->in, n->nin, out, keep ? 2 : 1);
    f->attrs.v[0] = n->attrs.v[0];
    f->attrs.v[1] = rms ? (fz_rounds(n) ? 2.0 : 1.0) : 0.0;
    f->attrs.v[2] = act;
    f->attrs.v[3] = param;
    return 2;
}

/* ---- linear (-> bias) (-> activation) ------------------------------------------------ */

static int fz_linear_act(const fz_ctx *c, int i, gg_pnode *f)
{
    const gg_branch *br = c->br;
    const gg_pnode *l = &br->nodes[i];
    if (!fz_is(l, GG_OP_LINEAR))
        return 0;
    int in[3] = {l->in[0], l->in[1], l->nin == 3 ? l->in[2] : -1}, nin = l->nin;
    int cur = l->out[0], used = 1, sep = 0, act = GG_ACT_NONE;
    double param = 0;
    int wr[3] = {cur}, nw = 1;
    /* a separate bias: add(h, b) with b a row vector of h's last dim */
    if (nin == 2 && i + used < br->nnodes) {
        const gg_pnode *a = &br->nodes[i + used];
        const gg_ptensor *b = a->nin == 2 ? fz_t(c, a->in[1]) : NULL;
        const gg_ptensor *h = fz_t(c, cur);
        if (fz_is(a, GG_OP_ADD) && b && a->in[0] == cur && a->in[1] != cur &&
            b->desc.ndim == 1 &&
            b->batch_dim < 0 && b->desc.dims[0] == h->desc.dims[h->desc.ndim - 1] &&
            (a->out[0] == cur || !fz_needed_after(c, cur, i + used))) {
            in[2] = a->in[1];
            nin = 3;
            sep = 1;
            cur = a->out[0];
            wr[nw++] = cur;
            used++;
        }
    }
    if (i + used < br->nnodes) {
        const gg_pnode *a = &br->nodes[i + used];
        double pa;
        int ac = fz_act_of(a, &pa);
        if (ac != GG_ACT_NONE && a->in[0] == cur) {
            act = ac;
            param = pa;
            wr[nw++] = a->out[0];
            used++;
        }
    }
    /* a lone linear without bias is already one kernel */
    if (used == 1 && nin == 2)
        return 0;
    int y = wr[nw - 1], pre = act != GG_ACT_NONE ? wr[nw - 2] : -1;
    bool keep = pre >= 0 && pre != y && fz_needed_after(c, pre, i + used - 1);
    if (!fz_safe(c, wr, nw, in, nin, -1, false))
        return 0;
    int out[2] = {y, pre};
    fz_node(f, GG_FUSED_LINEAR_ACT, in, nin, out, keep ? 2 : 1);
    f->attrs.v[0] = act;
    f->attrs.v[1] = param;
    f->attrs.v[2] = sep;
    return used;
}

/* ---- elementwise chains -------------------------------------------------------- */

/* e may be the other operand of a chain step on x: the forms the fused
 * kernels take (x's shape, or for add and mul a row vector of x's last dim),
 * on a floating x.  add and mul broadcast more generally, take one input and
 * a scalar, and take integers: such a node ends the chain instead. */
static bool fz_ew_operand_ok(const fz_ctx *c, int code, int e, int x)
{
    const gg_ptensor *te = fz_t(c, e), *tx = fz_t(c, x);
    if (!gg_dtype_is_float(tx->desc.dtype))
        return false;
    if (fz_same_shape(c, e, x))
        return true;
    return (code == GG_EW_ADD || code == GG_EW_MUL) && te->desc.dtype == tx->desc.dtype &&
           te->desc.ndim == 1 && te->batch_dim < 0 &&
           te->desc.dims[0] == tx->desc.dims[tx->desc.ndim - 1];
}

static int fz_ew_code(const gg_pnode *n, bool value_right)
{
    if ((fz_is(n, GG_OP_ADD) || fz_is(n, GG_OP_MUL)) && n->nin != 2)
        return 0;
    if (fz_is(n, GG_OP_ADD))
        return GG_EW_ADD;
    if (fz_is(n, GG_OP_MUL))
        return GG_EW_MUL;
    if (fz_is(n, GG_OP_SILU_MUL) && fz_rounds(n))
        return value_right ? GG_EW_SILU_MUL_R_RND : GG_EW_SILU_MUL_RND;
    if (fz_is(n, GG_OP_SILU_MUL))
        return value_right ? GG_EW_SILU_MUL_R : GG_EW_SILU_MUL;
    if (n->nin != 1)
        return 0;
    if (fz_is(n, GG_OP_SCALE))
        return GG_EW_SCALE;
    if (fz_is(n, GG_OP_GELU))
        return n->attrs.v[0] == 1.0 ? GG_EW_GELU_TANH : GG_EW_GELU_ERF;
    if (fz_is(n, GG_OP_SILU))
        return GG_EW_SILU;
    if (fz_is(n, GG_OP_COPY))
        return GG_EW_COPY;
    return 0;
}

static int fz_ew_chain(const fz_ctx *c, int i, gg_pnode *f)
{
    const gg_branch *br = c->br;
    if (br->nodes[i].nin < 1)   /* fill, arange: nothing to chain onto */
        return 0;
    gg_ew_steps st = {0};
    int ext[1 + 3] = {br->nodes[i].in[0]}, next = 1;   /* x, then e1..e3 */
    int reads[2 * GG_EW_MAX_STEPS], nreads = 0;        /* every outside read, for fz_safe */
    int wr[GG_EW_MAX_STEPS], nw = 0, nscale = 0;
    double scales[GG_EW_MAX_SCALES] = {0};
    int x = br->nodes[i].in[0], cur = -1;
    for (int k = i; k < br->nnodes && st.n < GG_EW_MAX_STEPS; k++) {
        const gg_pnode *n = &br->nodes[k];
        int e = -1;
        bool right = false;
        if (st.n == 0) {
            e = n->nin == 2 ? n->in[1] : -1;
        } else if (fz_needed_after(c, cur, k)) {
            break;   /* the value so far is read past this node: it is the output */
        } else if (n->in[0] == cur && (n->nin == 1 || n->in[1] != cur)) {
            e = n->nin == 2 ? n->in[1] : -1;
        } else if (n->nin == 2 && n->in[1] == cur && n->in[0] != cur) {
            e = n->in[0];
            right = true;
        } else {
            break;
        }
        int code = fz_ew_code(n, right);
        if (!code || !fz_same_shape(c, n->out[0], x) ||
            !gg_dtype_is_float(fz_t(c, x)->desc.dtype) ||
            (e >= 0 && !fz_ew_operand_ok(c, code, e, x)))
            break;
        int slot = 0;
        if (e >= 0) {
            for (int s = 1; s < next; s++)
                if (ext[s] == e)
                    slot = s;
            if (!slot) {
                if (next == 4)
                    break;
                ext[next] = e;
                slot = next++;
            }
        }
        if (code == GG_EW_SCALE) {
            if (nscale == GG_EW_MAX_SCALES)
                break;
            scales[nscale++] = n->attrs.v[0];
        }
        st.op[st.n] = (uint8_t)code;
        st.arg[st.n] = (uint8_t)slot;
        st.n++;
        if (st.n == 1)
            reads[nreads++] = x;
        if (e >= 0)
            reads[nreads++] = e;
        wr[nw++] = n->out[0];
        cur = n->out[0];
    }
    if (st.n < 2)
        return 0;
    if (!fz_safe(c, wr, nw, reads, nreads, x, true))
        return 0;
    fz_node(f, GG_FUSED_EW_CHAIN, ext, next, &cur, 1);
    f->attrs.v[0] = gg_ew_pack(&st);
    for (int s = 0; s < GG_EW_MAX_SCALES; s++)
        f->attrs.v[1 + s] = scales[s];
    return st.n;
}

/* ---- row chains ------------------------------------------------------------------ */

/* Plan entry e as a row-chain stage: a fused norm_act, or a lone
 * layernorm/rmsnorm node.  st->rms is the norm as norm_act's attribute
 * says it: 0 layernorm, 1 rmsnorm, 2 rmsnorm with round_x. */
static bool fz_stage_of(const gg_pnode *e, gg_pstage *st)
{
    bool fused = e->op == gg_ops_fused(GG_FUSED_NORM_ACT);
    bool rms = fused ? e->attrs.v[1] >= 1.0 : fz_is(e, GG_OP_RMSNORM);
    if (!fused && !rms && !fz_is(e, GG_OP_LAYERNORM))
        return false;
    if (e->nin != (rms ? 2 : 3))
        return false;
    st->w = e->in[1];
    st->b = rms ? -1 : e->in[2];
    st->h = fused && e->nout > 1 ? e->out[1] : -1;
    st->y = e->out[0];
    st->eps = e->attrs.v[0];
    st->rms = !rms ? 0 : (fused ? e->attrs.v[1] == 2.0 : fz_rounds(e)) ? 2 : 1;
    st->act = fused ? (int)e->attrs.v[2] : GG_ACT_NONE;
    st->p = fused ? e->attrs.v[3] : 0.0;
    return true;
}

/* fz_safe for a row chain, but for its writes among themselves: two may
 * be the same bytes under the same shape (a caching allocator hands a
 * freed layer's memory to a later one), since a thread writes the same
 * units of both, in stage order, so the later stage's values stay as the
 * unfused nodes leave them. */
static bool fz_chain_safe(const fz_ctx *c, const int *wr, int nw, const int *rd, int nr, int x)
{
    for (int w = 0; w < nw; w++) {
        if (!fz_safe(c, &wr[w], 1, rd, nr, x, true))
            return false;
        for (int v = w + 1; v < nw; v++) {
            int ov = gg_program_overlap(c->p, wr[w], wr[v], c->top);
            if (ov == 1 || (ov == 2 && !fz_same_shape(c, wr[w], wr[v])))
                return false;
        }
    }
    return true;
}

/* Merge the stage entries from plan[j] on into one row chain at plan[j]
 * while each stage normalizes the one before's output of x's shape and the
 * whole run stays safe (fz_safe over every stage's writes against every
 * outside read: x, the weights and biases, so no stage reads what another
 * writes but through the row it holds).  A stage output nothing after the
 * run reads is not written.  first[k]: the first node of plan entry k (k
 * up to n).  Returns how many entries it took (0: fewer than two stages). */
static int fz_row_chain(const fz_ctx *c, gg_pnode *plan, int j, int n, const int *first,
                        gg_pstage *st)
{
    int wr[2 * GG_ROWCHAIN_MAX_STAGES], rd[1 + 2 * GG_ROWCHAIN_MAX_STAGES];
    int nw = 0, nr = 1, ns = 0;
    const int x = plan[j].in[0];
    rd[0] = x;
    for (int k = j; k < n && ns < GG_ROWCHAIN_MAX_STAGES; k++) {
        gg_pstage s;
        if (!fz_stage_of(&plan[k], &s) || !fz_same_shape(c, s.y, x) ||
            plan[k].in[0] != (ns ? st[ns - 1].y : x))
            break;
        int w0 = nw, r0 = nr;
        wr[nw++] = s.y;
        if (s.h >= 0)
            wr[nw++] = s.h;
        rd[nr++] = s.w;
        if (s.b >= 0)
            rd[nr++] = s.b;
        if (!fz_chain_safe(c, wr, nw, rd, nr, x)) {
            nw = w0;
            nr = r0;
            break;
        }
        st[ns++] = s;
    }
    if (ns < 2)
        return 0;
    /* the chain's values pass in registers: a stage's y is written only for
     * what reads it after the run (the last one always) */
    const int end = first[j + ns] - 1;
    for (int k = 0; k < ns - 1; k++)
        if (!fz_needed_after(c, st[k].y, end))
            st[k].y = -1;
    return ns;
}

/* ---- the plan ------------------------------------------------------------------ */

int gg_fuse_plan(const gg_program *p, gg_branch *br, bool enabled)
{
    if (!br->plan) {
        br->plan = calloc((size_t)br->nnodes, sizeof(*br->plan));
        if (!br->plan) {
            br->nplan = 0;
            return -ENOMEM;
        }
    }
    int *last_read = enabled ? malloc(sizeof(int) * (size_t)p->ntensors) : NULL;
    if (!enabled || !last_read) {
        memcpy(br->plan, br->nodes, sizeof(*br->plan) * (size_t)br->nnodes);
        br->nplan = br->nnodes;
        return enabled ? -ENOMEM : 0;
    }
    for (int t = 0; t < p->ntensors; t++)
        last_read[t] = -1;
    for (int i = 0; i < br->nnodes; i++)
        for (int k = 0; k < br->nodes[i].nin; k++)
            last_read[gg_program_root(p, br->nodes[i].in[k])] = i;
    fz_ctx c = {.p = p, .br = br, .last_read = last_read,
                .top = p->buckets[p->nbuckets - 1]};
    int *first = malloc(sizeof(int) * (size_t)(br->nnodes + 1));
    if (!br->stages)
        br->stages = calloc((size_t)br->nnodes, sizeof(*br->stages));
    int n = 0;
    for (int i = 0; i < br->nnodes;) {
        if (first)
            first[n] = i;
        gg_pnode *f = &br->plan[n++];
        int used = fz_add_rmsnorm(&c, i, f);
        if (!used)
            used = fz_gate_up(&c, i, f);
        if (!used)
            used = fz_norm_act(&c, i, f);
        if (!used)
            used = fz_linear_act(&c, i, f);
        if (!used)
            used = fz_ew_chain(&c, i, f);
        if (!used) {
            *f = br->nodes[i];
            used = 1;
        }
        i += used;
    }
    /* then runs of norm(-> activation) entries into row chains, which
     * stay in the plan's room: a chain takes at least two entries */
    if (first && br->stages) {
        first[n] = br->nnodes;
        int m = 0, used_st = 0;
        for (int j = 0; j < n;) {
            int take = fz_row_chain(&c, br->plan, j, n, first, br->stages + used_st);
            if (take) {
                gg_pnode *f = &br->plan[m++];
                int x = br->plan[j].in[0], y = br->stages[used_st + take - 1].y;
                fz_node(f, 0, &x, 1, &y, 1);
                f->op = gg_ops_rowchain();
                f->attrs.v[0] = used_st;
                f->attrs.v[1] = take;
                used_st += take;
                j += take;
            } else {
                br->plan[m++] = br->plan[j++];
            }
        }
        n = m;
    }
    br->nplan = n;
    free(first);
    free(last_read);
    return 0;
}

int gg_fuse_bind_chain(const gg_program *p, const gg_branch *br, const gg_pnode *n, int rows,
                       uint8_t *scratch, gg_rowchain *out)
{
    int s0 = (int)n->attrs.v[0], ns = (int)n->attrs.v[1];
    if (n->op != gg_ops_rowchain() || ns < 1 || ns > GG_ROWCHAIN_MAX_STAGES || s0 < 0 ||
        !br->stages || s0 + ns > br->nnodes)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    gg_program_bind_tensor(p, n->in[0], rows, scratch, &out->x);
    out->n = ns;
    for (int k = 0; k < ns; k++) {
        const gg_pstage *s = &br->stages[s0 + k];
        gg_rowchain_stage *d = &out->st[k];
        gg_program_bind_tensor(p, s->w, rows, scratch, &d->w);
        if (s->b >= 0)
            gg_program_bind_tensor(p, s->b, rows, scratch, &d->b);
        if (s->h >= 0)
            gg_program_bind_tensor(p, s->h, rows, scratch, &d->h);
        if (s->y >= 0)
            gg_program_bind_tensor(p, s->y, rows, scratch, &d->y);
        d->eps = s->eps;
        d->p = s->p;
        d->rms = s->rms != 0;
        d->act = s->act;
        d->round_x = s->rms == 2;
    }
    return 0;
}

int gg_fuse_kernels(const gg_program *p)
{
    int n = 0;
    for (int b = 0; b < p->nbranches; b++)
        n += p->branches[b].nplan;
    return n;
}
