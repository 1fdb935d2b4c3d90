/* SPDX-License-Identifier: MIT */
/* Program-level fusion (daemon/core/fuse.c) against two real daemons, one
 * planning fused launches (the default) and one with GFXGRAPH_FUSE=0: per
 * pattern, in every float dtype, at odd sizes and a batch that runs padded
 * in its bucket, on random data, the buffers after a replay must be
 *   - the same bytes fused and unfused (the cpu backend's fused references
 *     run the same per-op references with the same roundings), and
 *   - within the dtype's tolerance of this file's own run of the client's
 *     nodes through the op table's CPU references;
 * every buffer tensor is compared, so an intermediate the client can read
 * must still be written.  program.list's `kernels` says what was fused;
 * nodes that round an intermediate to the dtype (rmsnorm's round_x,
 * silu_mul's round_act, as Hugging Face's f16/bf16 models compute) fuse
 * like the others and round where the nodes do: in f16 and bf16 the same
 * reference without the roundings must differ from the fused bytes, so the
 * byte equality with the unfused daemon sees the rounding;
 * cases where fusing would be wrong (an intermediate read later, a buffer
 * intermediate, outputs overlapping inputs a later step reads, separate
 * branches) must keep their launches apart and still give the same
 * results. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "test_client_util.h"

/* the case tables below leave trailing fields (alias, attr) to zero */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define ROWS 4           /* the largest bucket: buffers hold this many batch rows */
#define BATCH 3          /* replayed: runs at bucket 4 with a padding row */
#define MAXT 72          /* a row chain of GG_ROWCHAIN_MAX_STAGES + 1 layers */
#define MAXN 36
#define ALIGN 256

typedef struct {
    const char *name;
    int kind;            /* T_IN (random input), T_OUT (buffer, written), T_SCR (scratch) */
    bool batch;          /* a leading "batch" dim */
    int ndim;            /* dims after the batch dim */
    int64_t d[2];
    const char *alias;   /* lies exactly where this (earlier) buffer tensor lies */
} tdef;
enum { T_IN, T_OUT, T_SCR };

typedef struct {
    const char *op, *in, *out;
    const char *attr;    /* one attribute, or NULL */
    double av;           /* its value (a choice: index) */
} ndef;

typedef struct {
    const char *label;
    tdef t[MAXT];
    ndef n[MAXN];
    int branch_at;       /* first node of branch 1, or 0: one branch */
    int want_kernels;    /* launches per replay over all branches, fused */
    bool rounds;         /* round_x/round_act nodes whose rounding must show in f16/bf16 */
} pcase;

#define D 37             /* odd: no 16-byte vectors */
#define F 29

static const pcase cases[] = {
    {"layernorm -> gelu(tanh), h scratch",
     {{"x", T_IN, true, 1, {D}}, {"w", T_IN, false, 1, {D}}, {"b", T_IN, false, 1, {D}},
      {"h", T_SCR, true, 1, {D}}, {"y", T_OUT, true, 1, {D}}},
     {{"layernorm", "x,w,b", "h", "eps", 1e-5}, {"gelu", "h", "y", "approximate", 1}}, 0, 1},
    {"rmsnorm -> silu, h a buffer (still written)",
     {{"x", T_IN, true, 1, {D}}, {"w", T_IN, false, 1, {D}}, {"h", T_OUT, true, 1, {D}},
      {"y", T_OUT, true, 1, {D}}},
     {{"rmsnorm", "x,w", "h", "eps", 1e-6}, {"silu", "h", "y", NULL, 0}}, 0, 1},
    {"layernorm -> scale in place over x",
     {{"x", T_IN, true, 1, {D}}, {"w", T_IN, false, 1, {D}}, {"b", T_IN, false, 1, {D}},
      {"h", T_SCR, true, 1, {D}}},
     {{"layernorm", "x,w,b", "h", NULL, 0}, {"scale", "h", "x", "scale", 0.375}}, 0, 1},
    {"add -> rmsnorm (two results)",
     {{"x", T_IN, true, 1, {D}}, {"r", T_IN, true, 1, {D}}, {"w", T_IN, false, 1, {D}},
      {"s", T_OUT, true, 1, {D}}, {"y", T_OUT, true, 1, {D}}},
     {{"add", "x,r", "s", NULL, 0}, {"rmsnorm", "s,w", "y", "eps", 1e-5}}, 0, 1},
    {"residual add in place -> rmsnorm",
     {{"x", T_IN, true, 1, {D}}, {"r", T_IN, true, 1, {D}}, {"w", T_IN, false, 1, {D}},
      {"y", T_OUT, true, 1, {D}}},
     {{"add", "x,r", "x", NULL, 0}, {"rmsnorm", "x,w", "y", NULL, 0}}, 0, 1},
    {"linear+bias -> gelu(erf)",
     {{"x", T_IN, true, 1, {D}}, {"w", T_IN, false, 2, {F, D}}, {"b", T_IN, false, 1, {F}},
      {"h", T_SCR, true, 1, {F}}, {"y", T_OUT, true, 1, {F}}},
     {{"linear", "x,w,b", "h", NULL, 0}, {"gelu", "h", "y", NULL, 0}}, 0, 1},
    {"linear -> add bias -> silu, pre-activation a buffer",
     {{"x", T_IN, true, 1, {D}}, {"w", T_IN, false, 2, {F, D}}, {"b", T_IN, false, 1, {F}},
      {"h", T_SCR, true, 1, {F}}, {"h2", T_OUT, true, 1, {F}}, {"y", T_OUT, true, 1, {F}}},
     {{"linear", "x,w", "h", NULL, 0}, {"add", "h,b", "h2", NULL, 0},
      {"silu", "h2", "y", NULL, 0}}, 0, 1},
    {"mlp: linear -> gelu -> linear (buffers throughout)",
     {{"x", T_IN, true, 1, {D}}, {"w1", T_IN, false, 2, {F, D}}, {"b1", T_IN, false, 1, {F}},
      {"w2", T_IN, false, 2, {D, F}}, {"b2", T_IN, false, 1, {D}}, {"h", T_OUT, true, 1, {F}},
      {"g", T_OUT, true, 1, {F}}, {"y", T_OUT, true, 1, {D}}},
     {{"linear", "x,w1,b1", "h", NULL, 0}, {"gelu", "h", "g", NULL, 0},
      {"linear", "g,w2,b2", "y", NULL, 0}}, 0, 2},
    {"gate and up linears -> silu_mul",
     {{"x", T_IN, true, 1, {D}}, {"wg", T_IN, false, 2, {F, D}}, {"wu", T_IN, false, 2, {F, D}},
      {"g", T_SCR, true, 1, {F}}, {"u", T_SCR, true, 1, {F}}, {"y", T_OUT, true, 1, {F}}},
     {{"linear", "x,wu", "u", NULL, 0}, {"linear", "x,wg", "g", NULL, 0},
      {"silu_mul", "g,u", "y", NULL, 0}}, 0, 1},
    {"elementwise chain of 4 (broadcast row, scale)",
     {{"x", T_IN, true, 1, {D}}, {"r", T_IN, true, 1, {D}}, {"m", T_IN, false, 1, {D}},
      {"t1", T_SCR, true, 1, {D}}, {"t2", T_SCR, true, 1, {D}}, {"t3", T_SCR, true, 1, {D}},
      {"y", T_OUT, true, 1, {D}}},
     {{"add", "x,r", "t1", NULL, 0}, {"gelu", "t1", "t2", NULL, 0},
      {"mul", "t2,m", "t3", NULL, 0}, {"scale", "t3", "y", "scale", -1.5}}, 0, 1},
    {"elementwise chain, value on the right: silu_mul(e, v), add(e, v)",
     {{"x", T_IN, true, 1, {D}}, {"e", T_IN, true, 1, {D}}, {"t1", T_SCR, true, 1, {D}},
      {"t2", T_SCR, true, 1, {D}}, {"y", T_OUT, true, 1, {D}}},
     {{"silu", "x", "t1", NULL, 0}, {"silu_mul", "e,t1", "t2", NULL, 0},
      {"add", "e,t2", "y", NULL, 0}}, 0, 1},
    /* ---- rounding attributes (HF f16/bf16): fused, rounding where the nodes do ---- */
    {"HF block: rmsnorm(round_x) -> gate/up -> silu_mul(round_act) -> down -> residual add "
     "-> rmsnorm(round_x)",
     {{"x", T_IN, true, 1, {D}}, {"w1", T_IN, false, 1, {D}}, {"h", T_SCR, true, 1, {D}},
      {"wg", T_IN, false, 2, {F, D}}, {"wu", T_IN, false, 2, {F, D}},
      {"g", T_SCR, true, 1, {F}}, {"u", T_SCR, true, 1, {F}}, {"m", T_SCR, true, 1, {F}},
      {"wd", T_IN, false, 2, {D, F}}, {"d", T_SCR, true, 1, {D}}, {"s", T_OUT, true, 1, {D}},
      {"w2", T_IN, false, 1, {D}}, {"y", T_OUT, true, 1, {D}}},
     {{"rmsnorm", "x,w1", "h", "round_x", 1}, {"linear", "h,wg", "g", NULL, 0},
      {"linear", "h,wu", "u", NULL, 0}, {"silu_mul", "g,u", "m", "round_act", 1},
      {"linear", "m,wd", "d", NULL, 0}, {"add", "x,d", "s", NULL, 0},
      {"rmsnorm", "s,w2", "y", "round_x", 1}}, 0, 4, true},
    {"rmsnorm(round_x) -> gelu, h a buffer",
     {{"x", T_IN, true, 1, {D}}, {"w", T_IN, false, 1, {D}}, {"h", T_OUT, true, 1, {D}},
      {"y", T_OUT, true, 1, {D}}},
     {{"rmsnorm", "x,w", "h", "round_x", 1}, {"gelu", "h", "y", NULL, 0}}, 0, 1, true},
    {"row chain of 3 with round_x: rmsnorm(round_x) -> silu, rmsnorm(round_x), rmsnorm",
     {{"x", T_IN, true, 1, {D}}, {"w1", T_IN, false, 1, {D}}, {"w2", T_IN, false, 1, {D}},
      {"w3", T_IN, false, 1, {D}}, {"h1", T_SCR, true, 1, {D}}, {"y1", T_SCR, true, 1, {D}},
      {"y2", T_OUT, true, 1, {D}}, {"y3", T_OUT, true, 1, {D}}},
     {{"rmsnorm", "x,w1", "h1", "round_x", 1}, {"silu", "h1", "y1", NULL, 0},
      {"rmsnorm", "y1,w2", "y2", "round_x", 1}, {"rmsnorm", "y2,w3", "y3", NULL, 0}}, 0, 1,
     true},
    {"elementwise chain: silu_mul(round_act) both ways, then mul",
     {{"x", T_IN, true, 1, {D}}, {"e", T_IN, true, 1, {D}}, {"m", T_IN, false, 1, {D}},
      {"t1", T_SCR, true, 1, {D}}, {"t2", T_SCR, true, 1, {D}}, {"y", T_OUT, true, 1, {D}}},
     {{"silu_mul", "x,e", "t1", "round_act", 1}, {"silu_mul", "e,t1", "t2", "round_act", 1},
      {"mul", "t2,m", "y", NULL, 0}}, 0, 1, true},
    /* ---- must not fuse (entirely) ---- */
    {"no: an intermediate read later ends the chain",
     {{"x", T_IN, true, 1, {D}}, {"r", T_IN, true, 1, {D}}, {"t1", T_SCR, true, 1, {D}},
      {"t2", T_SCR, true, 1, {D}}, {"y", T_OUT, true, 1, {D}}},
     {{"add", "x,r", "t1", NULL, 0}, {"gelu", "t1", "t2", NULL, 0},
      {"mul", "t2,t1", "y", NULL, 0}}, 0, 2},
    {"no: a buffer intermediate in a chain is its end",
     {{"x", T_IN, true, 1, {D}}, {"t1", T_OUT, true, 1, {D}}, {"y", T_OUT, true, 1, {D}}},
     {{"silu", "x", "t1", NULL, 0}, {"scale", "t1", "y", "scale", 3.0}}, 0, 2},
    {"no: the output is x, which a later step reads again",
     {{"x", T_IN, true, 1, {D}}, {"r", T_IN, true, 1, {D}}, {"t", T_SCR, true, 1, {D}}},
     {{"add", "x,r", "t", NULL, 0}, {"mul", "t,x", "x", NULL, 0}}, 0, 2},
    {"no: linear -> gelu back over the linear's input",
     {{"x", T_IN, true, 1, {D}}, {"w", T_IN, false, 2, {D, D}}, {"b", T_IN, false, 1, {D}},
      {"h", T_SCR, true, 1, {D}}},
     {{"linear", "x,w,b", "h", NULL, 0}, {"gelu", "h", "x", NULL, 0}}, 0, 2},
    {"no: the gelu output aliases the norm's weight buffer",
     {{"x", T_IN, false, 1, {D}}, {"w", T_IN, false, 1, {D}}, {"h", T_SCR, false, 1, {D}},
      {"y", T_OUT, false, 1, {D}, "w"}},
     {{"rmsnorm", "x,w", "h", NULL, 0}, {"gelu", "h", "y", NULL, 0}}, 0, 2},
    /* ---- row chains (ops.h, gg_rowchain) ---- */
    {"row chain of 2: rmsnorm -> rmsnorm, no activation",
     {{"x", T_IN, true, 1, {D}}, {"w1", T_IN, false, 1, {D}}, {"w2", T_IN, false, 1, {D}},
      {"t", T_SCR, true, 1, {D}}, {"y", T_OUT, true, 1, {D}}},
     {{"rmsnorm", "x,w1", "t", "eps", 1e-5}, {"rmsnorm", "t,w2", "y", "eps", 1e-6}}, 0, 1},
    {"row chain of 3 mixed: rmsnorm -> silu in place over x, layernorm, rmsnorm -> scale "
     "with h a buffer",
     {{"x", T_IN, true, 1, {D}}, {"w1", T_IN, false, 1, {D}}, {"w2", T_IN, false, 1, {D}},
      {"b2", T_IN, false, 1, {D}}, {"w3", T_IN, false, 1, {D}}, {"h1", T_SCR, true, 1, {D}},
      {"y2", T_OUT, true, 1, {D}}, {"h3", T_OUT, true, 1, {D}}, {"y3", T_OUT, true, 1, {D}}},
     {{"rmsnorm", "x,w1", "h1", NULL, 0}, {"silu", "h1", "x", NULL, 0},
      {"layernorm", "x,w2,b2", "y2", "eps", 1e-3}, {"rmsnorm", "y2,w3", "h3", NULL, 0},
      {"scale", "h3", "y3", "scale", -0.75}}, 0, 1},
    {"row chain: a later stage's output lies exactly over an earlier one's (one w for all)",
     {{"x", T_IN, true, 1, {D}}, {"w", T_IN, false, 1, {D}}, {"h0", T_SCR, true, 1, {D}},
      {"y0", T_OUT, true, 1, {D}}, {"h1", T_SCR, true, 1, {D}}, {"y1", T_OUT, true, 1, {D}},
      {"h2", T_SCR, true, 1, {D}}, {"y2", T_OUT, true, 1, {D}, "y0"}},
     {{"rmsnorm", "x,w", "h0", NULL, 0}, {"silu", "h0", "y0", NULL, 0},
      {"rmsnorm", "y0,w", "h1", NULL, 0}, {"silu", "h1", "y1", NULL, 0},
      {"rmsnorm", "y1,w", "h2", NULL, 0}, {"silu", "h2", "y2", NULL, 0}}, 0, 1},
    {"row chain: a scratch stage output read after the chain is still written",
     {{"x", T_IN, true, 1, {D}}, {"w1", T_IN, false, 1, {D}}, {"b1", T_IN, false, 1, {D}},
      {"w2", T_IN, false, 1, {D}}, {"h1", T_SCR, true, 1, {D}}, {"t1", T_SCR, true, 1, {D}},
      {"h2", T_SCR, true, 1, {D}}, {"y2", T_SCR, true, 1, {D}}, {"z", T_OUT, true, 1, {D}}},
     {{"layernorm", "x,w1,b1", "h1", NULL, 0}, {"gelu", "h1", "t1", NULL, 0},
      {"rmsnorm", "t1,w2", "h2", NULL, 0}, {"silu", "h2", "y2", NULL, 0},
      {"add", "t1,y2", "z", NULL, 0}}, 0, 2},
    {"branches plan apart: norm+act | add, rmsnorm split by the branch",
     {{"x", T_IN, true, 1, {D}}, {"r", T_IN, true, 1, {D}}, {"w", T_IN, false, 1, {D}},
      {"h", T_SCR, true, 1, {D}}, {"y", T_OUT, true, 1, {D}}, {"s", T_OUT, true, 1, {D}}},
     {{"rmsnorm", "x,w", "h", NULL, 0}, {"silu", "h", "y", NULL, 0},
      {"add", "x,r", "s", NULL, 0}, {"rmsnorm", "s,w", "y", NULL, 0}}, 2, 2},
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static const gg_dtype dtypes[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};

/* Decode-like chains, generated: `layers` x (layernorm -> gelu(tanh)), each
 * layer's own w and b; the intermediates buffers (the client may read every
 * one, as torch's capture makes them) or scratch.  hazard: one row (no batch
 * dim), layer 2's w lies where layer 0's output does, so the chain must
 * break before layer 2 (it reads what layer 0 wrote). */
#define NGEN 5
static pcase gen[NGEN];
static char gen_names[NGEN][MAXT][16];
static char gen_lists[NGEN][MAXN][2][48];

static void gen_chain(int g, const char *label, int layers, bool buffers, bool hazard,
                      int want_kernels)
{
    pcase *pc = &gen[g];
    memset(pc, 0, sizeof *pc);
    pc->label = label;
    pc->want_kernels = want_kernels;
    int nt = 0, nn = 0;
    const bool batch = !hazard;
    pc->t[nt++] = (tdef){"x", T_IN, batch, 1, {D}};
    for (int l = 0; l < layers; l++) {
        const char *pre[4] = {"w", "b", "h", "y"};
        for (int k = 0; k < 4; k++) {
            char *nm = gen_names[g][nt];
            snprintf(nm, sizeof gen_names[g][nt], "%s%d", pre[k], l);
            int kind = k < 2 ? T_IN
                       : k == 2 ? (buffers ? T_OUT : T_SCR)
                                : (buffers || l == layers - 1 ? T_OUT : T_SCR);
            pc->t[nt] = (tdef){nm, kind, k < 2 ? false : batch, 1, {D}};
            if (hazard && l == 2 && k == 0)
                pc->t[nt].alias = "y0";
            nt++;
        }
        char *in0 = gen_lists[g][nn][0], *out0 = gen_lists[g][nn][1];
        if (l == 0)
            snprintf(in0, 48, "x,w0,b0");
        else
            snprintf(in0, 48, "y%d,w%d,b%d", l - 1, l, l);
        snprintf(out0, 48, "h%d", l);
        pc->n[nn++] = (ndef){"layernorm", in0, out0, "eps", 1e-5};
        char *in1 = gen_lists[g][nn][0], *out1 = gen_lists[g][nn][1];
        snprintf(in1, 48, "h%d", l);
        snprintf(out1, 48, "y%d", l);
        pc->n[nn++] = (ndef){"gelu", in1, out1, "approximate", 1};
    }
}

static void gen_cases(void)
{
    const int N = GG_ROWCHAIN_MAX_STAGES;
    gen_chain(0, "row chain of 2 layers, intermediates scratch", 2, false, false, 1);
    gen_chain(1, "row chain of N layers, every output a buffer (the decode chain)", N, true,
              false, 1);
    gen_chain(2, "row chain of N + 1 layers: two launches", N + 1, true, false, 2);
    gen_chain(3, "row chain of N + 1 layers, intermediates scratch", N + 1, false, false, 2);
    gen_chain(4, "row chain broken by a hazard: layer 2's w is layer 0's output", 4, true, true,
              2);
}

static int ntensors(const pcase *pc)
{
    int n = 0;
    while (n < MAXT && pc->t[n].name)
        n++;
    return n;
}

static int nnodes(const pcase *pc)
{
    int n = 0;
    while (n < MAXN && pc->n[n].op)
        n++;
    return n;
}

static int64_t t_elems(const tdef *t, int rows)
{
    int64_t n = t->batch ? rows : 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->d[i];
    return n;
}

static int t_find(const pcase *pc, const char *name, size_t len)
{
    for (int i = 0; i < ntensors(pc); i++)
        if (strlen(pc->t[i].name) == len && memcmp(pc->t[i].name, name, len) == 0)
            return i;
    return -1;
}

/* Byte offsets of the buffer tensors in one buffer (aliases share). */
static size_t layout(const pcase *pc, gg_dtype dt, size_t *off)
{
    size_t end = 0;
    for (int i = 0; i < ntensors(pc); i++) {
        const tdef *t = &pc->t[i];
        off[i] = SIZE_MAX;
        if (t->kind == T_SCR)
            continue;
        if (t->alias) {
            off[i] = off[t_find(pc, t->alias, strlen(t->alias))];
            continue;
        }
        off[i] = end;
        end += ((size_t)t_elems(t, ROWS) * gg_dtype_size(dt) + ALIGN - 1) / ALIGN * ALIGN;
    }
    return end;
}

static uint64_t g_rng;

static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* The inputs of a case, the same for every run of it. */
static void fill_inputs(const pcase *pc, gg_dtype dt, uint8_t *base, const size_t *off,
                        uint64_t seed)
{
    g_rng = seed;
    for (int i = 0; i < ntensors(pc); i++) {
        const tdef *t = &pc->t[i];
        if (t->kind == T_SCR || t->alias)
            continue;
        int64_t n = t_elems(t, ROWS);
        for (int64_t k = 0; k < n; k++)
            gg_store(base + off[i], dt, k, t->kind == T_IN ? 1.5f * frand() : 777.0f);
    }
}

static void node_operands(const pcase *pc, const ndef *nd, int *in, int *nin, int *out,
                          int *nout)
{
    const char *lists[2] = {nd->in, nd->out};
    int *idx[2] = {in, out}, *cnt[2] = {nin, nout};
    for (int l = 0; l < 2; l++) {
        *cnt[l] = 0;
        for (const char *p = lists[l]; *p;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            idx[l][(*cnt[l])++] = t_find(pc, p, len);
            p += len + (e ? 1 : 0);
        }
    }
}

/* This file's reference: the client's nodes through the op table's CPU
 * references, on host copies (aliases share memory), at BATCH rows;
 * no_round: without the round_x/round_act attributes. */
static void reference(const pcase *pc, gg_dtype dt, int branch, uint8_t *base, const size_t *off,
                      bool no_round)
{
    uint8_t *scr[MAXT] = {0};
    void *data[MAXT];
    for (int i = 0; i < ntensors(pc); i++) {
        if (pc->t[i].kind == T_SCR) {
            scr[i] = calloc((size_t)t_elems(&pc->t[i], ROWS), gg_dtype_size(dt));
            data[i] = scr[i];
        } else {
            data[i] = base + off[i];
        }
    }
    int n0 = branch == 1 ? pc->branch_at : 0;
    int n1 = branch == 0 && pc->branch_at ? pc->branch_at : nnodes(pc);
    for (int k = n0; k < n1; k++) {
        const ndef *nd = &pc->n[k];
        const gg_op_def *op = gg_ops_find(nd->op);
        int in[4], out[4], nin, nout;
        node_operands(pc, nd, in, &nin, out, &nout);
        gg_tensor ti[4], to[4];
        for (int s = 0; s < nin + nout; s++) {
            int t = s < nin ? in[s] : out[s - nin];
            gg_tensor *g = s < nin ? &ti[s] : &to[s - nin];
            const tdef *td = &pc->t[t];
            memset(g, 0, sizeof *g);
            g->data = data[t];
            g->desc.dtype = dt;
            g->desc.ndim = td->ndim + (td->batch ? 1 : 0);
            int d0 = 0;
            if (td->batch)
                g->desc.dims[d0++] = BATCH;
            for (int i = 0; i < td->ndim; i++)
                g->desc.dims[d0++] = td->d[i];
        }
        gg_op_attrs a;
        gg_ops_attr_defaults(op, &a);
        if (nd->attr && !(no_round && strncmp(nd->attr, "round_", 6) == 0))
            a.v[gg_ops_attr_index(op, nd->attr)] = nd->av;
        gg_ops_run_cpu(op, ti, nin, to, nout, &a);
    }
    for (int i = 0; i < ntensors(pc); i++)
        free(scr[i]);
}

/* Define the case on c, replay each branch at BATCH from fresh inputs, and
 * leave each branch's buffer in out[branch]; *kernels from program.list. */
static bool run_daemon(gg_client *c, const pcase *pc, gg_dtype dt, uint64_t seed,
                       uint8_t **out, size_t bytes, int64_t *kernels)
{
    size_t off[MAXT];
    layout(pc, dt, off);
    tbuf b;
    if (!tbuf_new(c, &b, bytes / sizeof(float) + 1))
        return false;
    gg_program_def *d = gg_program_def_new("fuse-test");
    const int buckets[] = {1, 2, ROWS};
    gg_program_def_buckets(d, 3, buckets);
    for (int i = 0; i < ntensors(pc); i++) {
        const tdef *t = &pc->t[i];
        int64_t dims[3];
        int nd = 0;
        if (t->batch)
            dims[nd++] = GG_BATCH;
        for (int k = 0; k < t->ndim; k++)
            dims[nd++] = t->d[k];
        if (t->kind == T_SCR)
            gg_program_def_scratch(d, t->name, gg_dtype_name(dt), nd, dims);
        else
            gg_program_def_tensor(d, t->name, b.id, off[i], gg_dtype_name(dt), nd, dims);
    }
    for (int k = 0; k < nnodes(pc); k++) {
        const ndef *nd = &pc->n[k];
        if (pc->branch_at && k == pc->branch_at)
            gg_program_def_branch(d);
        gg_program_def_op(d, nd->op, nd->in, nd->out);
        if (nd->attr && strcmp(nd->attr, "approximate") == 0)
            gg_program_def_attr_s(d, nd->attr, nd->av == 1 ? "tanh" : "none");
        else if (nd->attr)
            gg_program_def_attr_f(d, nd->attr, nd->av);
    }
    uint64_t prog = 0;
    bool ok = CHECKF(gg_client_program_define(c, d, &prog) == 0, "%s: define: %s", pc->label,
                     gg_client_last_error(c));
    gg_program_def_free(d);
    *kernels = -1;
    const msgpack_object *r = NULL;
    if (ok && CHECKF(gg_client_call(c, "program.list", NULL, 0, &r) == 0, "program.list")) {
        const msgpack_object *ps = h_get(r, "programs");
        for (uint32_t i = 0; ps && ps->type == MSGPACK_OBJECT_ARRAY && i < ps->via.array.size; i++)
            if (h_getu(&ps->via.array.ptr[i], "id") == prog)
                *kernels = h_geti(&ps->via.array.ptr[i], "kernels");
    }
    for (int br = 0; ok && br < (pc->branch_at ? 2 : 1); br++) {
        fill_inputs(pc, dt, (uint8_t *)b.f, off, seed);
        gg_replay_result res;
        ok = CHECKF(gg_client_replay(c, prog, BATCH, br, &res) == 0, "%s: replay branch %d: %s",
                    pc->label, br, gg_client_last_error(c));
        if (ok)
            memcpy(out[br], b.f, bytes);
    }
    if (prog)
        gg_client_program_release(c, prog);
    gg_client_buffer_release(c, b.id);
    tbuf_free(&b);
    return ok;
}

static double tol(gg_dtype dt)
{
    return dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 4e-3 : 2e-2;
}

static void run_case(gg_client *fused, gg_client *plain, const pcase *pc, gg_dtype dt,
                     uint64_t seed)
{
    size_t off[MAXT];
    size_t bytes = layout(pc, dt, off);
    int nbr = pc->branch_at ? 2 : 1;
    uint8_t *fo[2], *po[2], *ref = malloc(bytes);
    for (int i = 0; i < 2; i++) {
        fo[i] = calloc(1, bytes);
        po[i] = calloc(1, bytes);
    }
    int64_t kf = -1, kp = -1;
    char what[160];
    snprintf(what, sizeof what, "%s [%s]", pc->label, gg_dtype_name(dt));
    if (run_daemon(fused, pc, dt, seed, fo, bytes, &kf) &&
        run_daemon(plain, pc, dt, seed, po, bytes, &kp)) {
        CHECKF(kf == pc->want_kernels, "%s: %lld kernels fused, want %d", what, (long long)kf,
               pc->want_kernels);
        CHECKF(kp == nnodes(pc), "%s: %lld kernels with GFXGRAPH_FUSE=0, want %d", what,
               (long long)kp, nnodes(pc));
        for (int br = 0; br < nbr; br++) {
            if (pc->rounds && dt != GG_DT_F32) {
                /* the roundings change the last output here, so the equality
                 * below with the unfused daemon's bytes checks them */
                const tdef *t = &pc->t[ntensors(pc) - 1];
                size_t nb = (size_t)t_elems(t, t->batch ? BATCH : 1) * gg_dtype_size(dt);
                const size_t o = off[ntensors(pc) - 1];
                fill_inputs(pc, dt, ref, off, seed);
                reference(pc, dt, br, ref, off, true);
                CHECKF(t->kind == T_OUT && memcmp(fo[br] + o, ref + o, nb) != 0,
                       "%s branch %d: '%s' is not what the nodes give without their rounding",
                       what, br, t->name);
            }
            fill_inputs(pc, dt, ref, off, seed);
            reference(pc, dt, br, ref, off, false);
            for (int i = 0; i < ntensors(pc); i++) {
                const tdef *t = &pc->t[i];
                if (t->kind == T_SCR || t->alias)
                    continue;
                /* the real rows only: the padding row is the daemon's */
                int64_t n = t_elems(t, t->batch ? BATCH : 1);
                size_t nb = (size_t)n * gg_dtype_size(dt);
                CHECKF(memcmp(fo[br] + off[i], po[br] + off[i], nb) == 0,
                       "%s branch %d: '%s' differs fused and unfused", what, br, t->name);
                double num = 0, den = 0;
                for (int64_t k = 0; k < n; k++) {
                    double a = gg_load(fo[br] + off[i], dt, k), e = gg_load(ref + off[i], dt, k);
                    num += (a - e) * (a - e);
                    den += e * e;
                }
                double rel = den > 0 ? sqrt(num / den) : sqrt(num);
                CHECKF(rel <= tol(dt), "%s branch %d: '%s' rel err %.3g vs the reference", what,
                       br, t->name, rel);
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        free(fo[i]);
        free(po[i]);
    }
    free(ref);
}

/* stats' cache rows and program.define's answer name the launches too. */
static void test_visible(gg_client *c)
{
    h_section("kernels in program.define's answer and in stats");
    const pcase *pc = &cases[0];
    size_t off[MAXT];
    size_t bytes = layout(pc, GG_DT_F32, off);
    uint8_t *o[2] = {calloc(1, bytes), calloc(1, bytes)};
    int64_t k = -1;
    /* run_daemon releases its program; define one more and look at it */
    run_daemon(c, pc, GG_DT_F32, 7, o, bytes, &k);
    CHECKF(k == 1, "kernels %lld", (long long)k);
    tbuf b;
    if (tbuf_new(c, &b, 4096)) {
        int64_t xs[2] = {GG_BATCH, 8}, vs[1] = {8};
        gg_program_def *d = gg_program_def_new("visible");
        gg_program_def_tensor(d, "x", b.id, 0, "f32", 2, xs);
        gg_program_def_tensor(d, "w", b.id, 4096, "f32", 1, vs);
        gg_program_def_tensor(d, "y", b.id, 8192, "f32", 2, xs);
        gg_program_def_scratch(d, "h", "f32", 2, xs);
        gg_program_def_op(d, "rmsnorm", "x,w", "h");
        gg_program_def_op(d, "gelu", "h", "y");
        const int bk[] = {1, 4};
        gg_program_def_buckets(d, 2, bk);
        uint64_t prog;
        if (CHECKF(gg_client_program_define(c, d, &prog) == 0, "define: %s",
                   gg_client_last_error(c))) {
            gg_replay_result r;
            CHECKF(gg_client_replay(c, prog, 1, -1, &r) == 0, "replay");
            const msgpack_object *st = t_stats(c);
            const msgpack_object *e = st ? t_entry(st, prog, 0, 1) : NULL;
            CHECKF(e && h_geti(e, "nodes") == 2 && h_geti(e, "kernels") == 1,
                   "stats cache row: nodes %lld kernels %lld", e ? (long long)h_geti(e, "nodes") : -1,
                   e ? (long long)h_geti(e, "kernels") : -1);
        }
        gg_program_def_free(d);
        tbuf_free(&b);
    }
    free(o[0]);
    free(o[1]);
}

/* One shm object registered twice: y in the second registration lies over
 * x in the first.  Node by node that is legal (gelu writes y after linear
 * has read x), so the program is accepted; fused into one linear+gelu
 * kernel it would write y while still reading x.  The planner must see one
 * memory through two buffer ids and keep the two launches. */
static void test_double_registration(gg_client *c)
{
    h_section("one object registered twice: no fusion across the alias");
    enum { K = 8, N = 8 };
    char name[64];
    h_unique(name, sizeof name, "/ggtest-fuse-dbl");
    size_t bytes = 4096 * 3;
    float *m = NULL;
    uint64_t b1 = 0, b2 = 0;
    if (!CHECK(gg_client_shm_create(name, bytes, (void **)&m) == 0))
        return;
    if (!CHECK(gg_client_buffer_register_shm(c, name, 0, bytes, &b1) == 0) ||
        !CHECK(gg_client_buffer_register_shm(c, name, 0, bytes, &b2) == 0))
        goto out;
    float *x = m, *w = m + 1024;
    float xs[ROWS * K];
    for (int i = 0; i < ROWS * K; i++)
        xs[i] = x[i] = 0.25f * (float)((i * 7) % 9) - 1.0f;
    for (int i = 0; i < N * K; i++)
        w[i] = 0.125f * (float)((i * 5) % 7) - 0.375f;
    int64_t xd[2] = {GG_BATCH, K}, wd[2] = {N, K}, yd[2] = {GG_BATCH, N};
    gg_program_def *d = gg_program_def_new("dbl");
    gg_program_def_tensor(d, "x", b1, 0, "f32", 2, xd);
    gg_program_def_tensor(d, "w", b1, 4096, "f32", 2, wd);
    gg_program_def_tensor(d, "y", b2, 0, "f32", 2, yd);   /* the bytes of x */
    gg_program_def_scratch(d, "h", "f32", 2, yd);
    gg_program_def_op(d, "linear", "x,w", "h");
    gg_program_def_op(d, "gelu", "h", "y");
    const int bk[] = {ROWS};
    gg_program_def_buckets(d, 1, bk);
    uint64_t prog = 0;
    int rc = gg_client_program_define(c, d, &prog);
    gg_program_def_free(d);
    if (!CHECKF(rc == 0, "define: %s", gg_client_last_error(c)))
        goto out;
    gg_replay_result r;
    if (CHECK(gg_client_replay(c, prog, ROWS, -1, &r) == 0)) {
        double worst = 0;
        for (int i = 0; i < ROWS; i++)
            for (int n = 0; n < N; n++) {
                double h = 0;
                for (int k = 0; k < K; k++)
                    h += (double)xs[i * K + k] * w[n * K + k];
                double g = 0.5 * h * (1.0 + erf(h / sqrt(2.0)));
                double e = fabs(x[i * N + n] - g);
                worst = e > worst ? e : worst;
            }
        CHECKF(worst < 1e-5, "y = gelu(x w^T) in place of x: worst error %g", worst);
    }
    const msgpack_object *st = t_stats(c);
    const msgpack_object *e = st ? t_entry(st, prog, 0, ROWS) : NULL;
    CHECKF(e && h_geti(e, "kernels") == 2, "two launches (kernels %lld)",
           e ? (long long)h_geti(e, "kernels") : -1);
out:
    gg_client_shm_destroy(name, m, bytes);
}

int main(void)
{
    h_init("test_fuse", 600);
    h_daemon fd, pd;
    const char *const off_env[] = {"GFXGRAPH_FUSE=0", NULL};
    if (h_daemon_start(&fd, NULL, NULL) != 0)
        return h_finish();
    if (h_daemon_start(&pd, NULL, off_env) != 0) {
        h_daemon_stop(&fd);
        return h_finish();
    }
    gg_client *cf = gg_client_new(), *cp = gg_client_new();
    if (CHECKF(cf && gg_client_connect(cf, fd.sock, "test_fuse") == 0, "connect (fused)") &&
        CHECKF(cp && gg_client_connect(cp, pd.sock, "test_fuse") == 0, "connect (unfused)")) {
        for (int i = 0; i < NCASES; i++) {
            h_section(cases[i].label);
            for (int t = 0; t < 3; t++)
                run_case(cf, cp, &cases[i], dtypes[t], 0x9e3779b97f4a7c15ull + (uint64_t)(i * 3 + t));
        }
        gen_cases();
        for (int i = 0; i < NGEN; i++) {
            h_section(gen[i].label);
            for (int t = 0; t < 3; t++)
                run_case(cf, cp, &gen[i], dtypes[t], 0x51ed27a3u + (uint64_t)(i * 3 + t));
        }
        test_visible(cf);
        test_double_registration(cf);
    }
    gg_client_close(cf);
    gg_client_close(cp);
    h_daemon_stop(&fd);
    h_daemon_stop(&pd);
    return h_finish();
}
