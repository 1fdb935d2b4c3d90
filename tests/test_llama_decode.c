/* SPDX-License-Identifier: MIT */
/* A tiny random Llama decoded through the daemon (cpu backend) as ONE
 * program, against a double-precision reference written here.
 *
 * Model: L = 2 layers, D = 64, Hq = 4, Hkv = 2 (GQA 2), Dh = 16, F = 128,
 * V = 256, f32, RMSNorm eps 1e-5, RoPE neox theta 10000, SwiGLU MLP, no
 * biases.  The program: embedding -> L x (rmsnorm -> q/k/v linear ->
 * rope(q), rope(k) -> cache_write(k), cache_write(v) -> attention_decode ->
 * o linear -> add residual -> rmsnorm -> gate/up linear -> silu_mul -> down
 * linear -> add residual) -> rmsnorm -> lm_head linear -> argmax; q/k/v/attn
 * [B, H*Dh] are read as [B, H, Dh] through views.
 *
 * Decode: 16 steps at batch 3 in bucket 4 (buckets 1, 2, 4), prompt lengths
 * 1, 5 and 9 per row: at step t every row is at position t; its id is the
 * prompt token while t < its prompt length, then the token the daemon chose
 * at step t-1 (read back from the program's argmax output).  ids/pos/lens
 * are i32 buffers written before each replay of the same program.
 *
 * Checks, per step: the replay ran in bucket 4; each row's token equals the
 * reference's argmax (the reference decodes on its own tokens); the logits
 * and the final normed hidden state of rows 0..2 are within rel-L2 1e-4 of
 * the reference.  At the end: cache rows 0..2 positions 0..15 hold the
 * reference's k/v (rel-L2 1e-5), positions 16.. and the whole of cache row 3
 * (padding of bucket 4, fed a valid position every step) still hold the
 * sentinel in every layer's k and v cache. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_client_util.h"

#define NL 2
#define D 64
#define HQ 4
#define HKV 2
#define DH 16
#define QD (HQ * DH)
#define KD (HKV * DH)
#define F 128
#define V 256
#define S 24
#define NB 3        /* real batch */
#define TOP 4       /* bucket */
#define STEPS 16
#define EPS 1e-5
#define THETA 10000.0
#define SENT -7.0f
#define TOL_LOGITS 1e-4
#define TOL_CACHE 1e-5

/* offsets (floats) of the weights in one buffer */
typedef struct {
    size_t n1, wq, wk, wv, wo, n2, wg, wu, wd;
} layer_off;
typedef struct {
    size_t emb, nf, lm, total;
    layer_off l[NL];
} weights_off;

static uint64_t rs = 0x243f6a8885a308d3ull;
static float rnd(void) /* uniform [-1, 1) */
{
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    uint64_t r = rs * 0x2545f4914f6cdd1dull;
    return (float)((double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static size_t take(size_t *at, size_t n)
{
    size_t o = *at;
    *at += (n + 63) & ~(size_t)63;
    return o;
}

static weights_off layout(void)
{
    weights_off w;
    size_t at = 0;
    w.emb = take(&at, (size_t)V * D);
    for (int l = 0; l < NL; l++) {
        layer_off *o = &w.l[l];
        o->n1 = take(&at, D);
        o->wq = take(&at, (size_t)QD * D);
        o->wk = take(&at, (size_t)KD * D);
        o->wv = take(&at, (size_t)KD * D);
        o->wo = take(&at, (size_t)D * QD);
        o->n2 = take(&at, D);
        o->wg = take(&at, (size_t)F * D);
        o->wu = take(&at, (size_t)F * D);
        o->wd = take(&at, (size_t)D * F);
    }
    w.nf = take(&at, D);
    w.lm = take(&at, (size_t)V * D);
    w.total = at;
    return w;
}

static void fill(float *p, size_t n, double scale, double bias)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(bias + scale * rnd());
}

static void init_weights(float *W, const weights_off *w)
{
    fill(W + w->emb, (size_t)V * D, 1.0, 0);
    for (int l = 0; l < NL; l++) {
        const layer_off *o = &w->l[l];
        fill(W + o->n1, D, 0.2, 1.0);
        fill(W + o->wq, (size_t)QD * D, 2.0 / sqrt(D), 0);
        fill(W + o->wk, (size_t)KD * D, 2.0 / sqrt(D), 0);
        fill(W + o->wv, (size_t)KD * D, 1.5 / sqrt(D), 0);
        fill(W + o->wo, (size_t)D * QD, 1.5 / sqrt(QD), 0);
        fill(W + o->n2, D, 0.2, 1.0);
        fill(W + o->wg, (size_t)F * D, 1.5 / sqrt(D), 0);
        fill(W + o->wu, (size_t)F * D, 1.5 / sqrt(D), 0);
        fill(W + o->wd, (size_t)D * F, 1.5 / sqrt(F), 0);
    }
    fill(W + w->nf, D, 0.2, 1.0);
    /* a wide logit spread keeps the top-2 gaps far above f32 rounding */
    fill(W + w->lm, (size_t)V * D, 4.0 / sqrt(D), 0);
}

/* ---- reference: double precision, straightforward loops ----------------- */

typedef struct {
    double k[NL][S][KD], v[NL][S][KD];
} ref_cache;

static void r_rms(const double *x, const float *w, double *y, int n)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + EPS);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * r * w[i];
}

static void r_lin(const double *x, const float *w, double *y, int k, int n)
{
    for (int o = 0; o < n; o++) {
        double s = 0;
        for (int i = 0; i < k; i++)
            s += x[i] * w[(size_t)o * k + i];
        y[o] = s;
    }
}

static void r_rope(double *x, int heads, int pos)
{
    for (int h = 0; h < heads; h++) {
        double *xh = x + h * DH;
        for (int i = 0; i < DH / 2; i++) {
            double ang = pos * pow(THETA, -2.0 * i / DH);
            double c = cos(ang), s = sin(ang), x0 = xh[i], x1 = xh[i + DH / 2];
            xh[i] = x0 * c - x1 * s;
            xh[i + DH / 2] = x1 * c + x0 * s;
        }
    }
}

static int r_argmax(const double *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

/* one decode step of one sequence: token at pos; fills hf[D], logits[V] */
static void ref_step(ref_cache *c, const float *W, const weights_off *w, int tok, int pos,
                     double *hf, double *logits)
{
    double h[D], hn[D], q[QD], k[KD], v[KD], a[QD], o[D], g[F], u[F], m[F], f[D];
    for (int i = 0; i < D; i++)
        h[i] = tok >= 0 && tok < V ? W[w->emb + (size_t)tok * D + i] : 0.0;
    for (int l = 0; l < NL; l++) {
        const layer_off *lo = &w->l[l];
        r_rms(h, W + lo->n1, hn, D);
        r_lin(hn, W + lo->wq, q, D, QD);
        r_lin(hn, W + lo->wk, k, D, KD);
        r_lin(hn, W + lo->wv, v, D, KD);
        r_rope(q, HQ, pos);
        r_rope(k, HKV, pos);
        memcpy(c->k[l][pos], k, sizeof k);
        memcpy(c->v[l][pos], v, sizeof v);
        for (int hh = 0; hh < HQ; hh++) {
            int kv = hh / (HQ / HKV);
            double sc[S], mx = -INFINITY, sum = 0;
            for (int t = 0; t <= pos; t++) {
                double s = 0;
                for (int i = 0; i < DH; i++)
                    s += q[hh * DH + i] * c->k[l][t][kv * DH + i];
                sc[t] = s / sqrt((double)DH);
                if (sc[t] > mx)
                    mx = sc[t];
            }
            for (int t = 0; t <= pos; t++)
                sum += sc[t] = exp(sc[t] - mx);
            for (int i = 0; i < DH; i++) {
                double acc = 0;
                for (int t = 0; t <= pos; t++)
                    acc += sc[t] / sum * c->v[l][t][kv * DH + i];
                a[hh * DH + i] = acc;
            }
        }
        r_lin(a, W + lo->wo, o, QD, D);
        for (int i = 0; i < D; i++)
            h[i] += o[i];
        r_rms(h, W + lo->n2, hn, D);
        r_lin(hn, W + lo->wg, g, D, F);
        r_lin(hn, W + lo->wu, u, D, F);
        for (int i = 0; i < F; i++)
            m[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        r_lin(m, W + lo->wd, f, F, D);
        for (int i = 0; i < D; i++)
            h[i] += f[i];
    }
    r_rms(h, W + w->nf, hf, D);
    r_lin(hf, W + w->lm, logits, D, V);
}

static double rel_l2(const float *got, const double *want, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        double e = got[i] - want[i];
        num += e * e;
        den += want[i] * want[i];
    }
    double r = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
    return r == r ? r : INFINITY;
}

/* ---- the program ---------------------------------------------------------- */

/* io buffer (i32): ids [TOP] at 0, pos at TOP, lens at 2*TOP (elements);
 * out buffer: next (i32) [TOP] at 0, logits [TOP, V] at 64, hf [TOP, D]
 * after; cache buffer: per layer k then v, [TOP, S, Hkv, Dh] each. */
#define OUT_LOGITS 64
#define OUT_HF (OUT_LOGITS + TOP * V)
#define CACHE_ONE ((size_t)TOP * S * KD)

static uint64_t define_llama(gg_client *c, const weights_off *w, uint64_t wbuf, uint64_t io,
                             uint64_t out, uint64_t cache)
{
    gg_program_def *p = gg_program_def_new("llama-tiny");
    static const int buckets[] = {1, 2, TOP};
    gg_program_def_buckets(p, 3, buckets);
    int64_t db[] = {GG_BATCH}, dD[] = {GG_BATCH, D}, dV[] = {GG_BATCH, V},
            dQ[] = {GG_BATCH, QD}, dK[] = {GG_BATCH, KD}, dF[] = {GG_BATCH, F},
            dQ3[] = {GG_BATCH, HQ, DH}, dK3[] = {GG_BATCH, HKV, DH},
            dC[] = {GG_BATCH, S, HKV, DH};
    gg_program_def_tensor(p, "ids", io, 0, "i32", 1, db);
    gg_program_def_tensor(p, "pos", io, TOP * 4, "i32", 1, db);
    gg_program_def_tensor(p, "lens", io, 2 * TOP * 4, "i32", 1, db);
    gg_program_def_tensor(p, "next", out, 0, "i32", 1, db);
    gg_program_def_tensor(p, "logits", out, OUT_LOGITS * 4, "f32", 2, dV);
    gg_program_def_tensor(p, "hf", out, OUT_HF * 4, "f32", 2, dD);
#define WT(name, off, ...)                                                                   \
    do {                                                                                     \
        int64_t d_[] = {__VA_ARGS__};                                                        \
        gg_program_def_tensor(p, name, wbuf, (off) * 4, "f32",                               \
                              (int)(sizeof d_ / sizeof d_[0]), d_);                          \
    } while (0)
    WT("emb", w->emb, V, D);
    WT("nf", w->nf, D);
    WT("lm", w->lm, V, D);
    char n[NL][9][8], kc[NL][8], vc[NL][8];
    static const char *const wn[9] = {"n1", "wq", "wk", "wv", "wo", "n2", "wg", "wu", "wd"};
    for (int l = 0; l < NL; l++) {
        const layer_off *o = &w->l[l];
        for (int i = 0; i < 9; i++)
            snprintf(n[l][i], sizeof n[l][i], "%s_%d", wn[i], l);
        WT(n[l][0], o->n1, D);
        WT(n[l][1], o->wq, QD, D);
        WT(n[l][2], o->wk, KD, D);
        WT(n[l][3], o->wv, KD, D);
        WT(n[l][4], o->wo, D, QD);
        WT(n[l][5], o->n2, D);
        WT(n[l][6], o->wg, F, D);
        WT(n[l][7], o->wu, F, D);
        WT(n[l][8], o->wd, D, F);
        snprintf(kc[l], sizeof kc[l], "kc_%d", l);
        snprintf(vc[l], sizeof vc[l], "vc_%d", l);
        gg_program_def_tensor(p, kc[l], cache, (2 * l) * CACHE_ONE * 4, "f32", 4, dC);
        gg_program_def_tensor(p, vc[l], cache, (2 * l + 1) * CACHE_ONE * 4, "f32", 4, dC);
    }
#undef WT
    gg_program_def_scratch(p, "h", "f32", 2, dD);
    gg_program_def_scratch(p, "hn", "f32", 2, dD);
    gg_program_def_scratch(p, "q", "f32", 2, dQ);
    gg_program_def_scratch(p, "k", "f32", 2, dK);
    gg_program_def_scratch(p, "v", "f32", 2, dK);
    gg_program_def_scratch(p, "a3", "f32", 3, dQ3);
    gg_program_def_scratch(p, "o", "f32", 2, dD);
    gg_program_def_scratch(p, "g", "f32", 2, dF);
    gg_program_def_scratch(p, "u", "f32", 2, dF);
    gg_program_def_scratch(p, "m", "f32", 2, dF);
    gg_program_def_scratch(p, "f", "f32", 2, dD);
    gg_program_def_view(p, "q3", "q", 3, dQ3);
    gg_program_def_view(p, "k3", "k", 3, dK3);
    gg_program_def_view(p, "v3", "v", 3, dK3);
    gg_program_def_view(p, "a2", "a3", 2, dQ);

    char in[256];
    gg_program_def_op(p, "embedding", "ids,emb", "h");
    for (int l = 0; l < NL; l++) {
        snprintf(in, sizeof in, "h,%s", n[l][0]);
        gg_program_def_op(p, "rmsnorm", in, "hn");
        gg_program_def_attr_f(p, "eps", EPS);
        snprintf(in, sizeof in, "hn,%s", n[l][1]);
        gg_program_def_op(p, "linear", in, "q");
        snprintf(in, sizeof in, "hn,%s", n[l][2]);
        gg_program_def_op(p, "linear", in, "k");
        snprintf(in, sizeof in, "hn,%s", n[l][3]);
        gg_program_def_op(p, "linear", in, "v");
        gg_program_def_op(p, "rope", "q3,pos", "q3");
        gg_program_def_attr_f(p, "theta", THETA);
        gg_program_def_attr_s(p, "style", "neox");
        gg_program_def_op(p, "rope", "k3,pos", "k3");
        gg_program_def_attr_f(p, "theta", THETA);
        gg_program_def_attr_s(p, "style", "neox");
        gg_program_def_op(p, "cache_write", "k3,pos", kc[l]);
        gg_program_def_op(p, "cache_write", "v3,pos", vc[l]);
        snprintf(in, sizeof in, "q3,%s,%s,lens", kc[l], vc[l]);
        gg_program_def_op(p, "attention_decode", in, "a3");
        snprintf(in, sizeof in, "a2,%s", n[l][4]);
        gg_program_def_op(p, "linear", in, "o");
        gg_program_def_op(p, "add", "h,o", "h");
        snprintf(in, sizeof in, "h,%s", n[l][5]);
        gg_program_def_op(p, "rmsnorm", in, "hn");
        gg_program_def_attr_f(p, "eps", EPS);
        snprintf(in, sizeof in, "hn,%s", n[l][6]);
        gg_program_def_op(p, "linear", in, "g");
        snprintf(in, sizeof in, "hn,%s", n[l][7]);
        gg_program_def_op(p, "linear", in, "u");
        gg_program_def_op(p, "silu_mul", "g,u", "m");
        snprintf(in, sizeof in, "m,%s", n[l][8]);
        gg_program_def_op(p, "linear", in, "f");
        gg_program_def_op(p, "add", "h,f", "h");
    }
    gg_program_def_op(p, "rmsnorm", "h,nf", "hf");
    gg_program_def_attr_f(p, "eps", EPS);
    gg_program_def_op(p, "linear", "hf,lm", "logits");
    gg_program_def_op(p, "argmax", "logits", "next");

    uint64_t prog = 0;
    int rc = gg_client_program_define(c, p, &prog);
    CHECKF(rc == 0, "define llama-tiny (builder: \"%s\"): %s", gg_program_def_error(p),
           gg_client_last_error(c));
    gg_program_def_free(p);
    return rc == 0 ? prog : 0;
}

/* ---- the test ----------------------------------------------------------- */

static const int prompt_len[NB] = {1, 5, 9};

static void test_decode(const h_daemon *d)
{
    static ref_cache rc_[NB];
    memset(rc_, 0, sizeof rc_);
    weights_off w = layout();
    gg_client *c = gg_client_new();
    if (!CHECKF(gg_client_connect(c, d->sock, "llama-decode") == 0, "connect: %s",
                gg_client_last_error(c)))
        return;
    tbuf wb = {0}, io = {0}, out = {0}, cache = {0};
    if (!tbuf_new(c, &wb, w.total) || !tbuf_new(c, &io, 3 * TOP) ||
        !tbuf_new(c, &out, OUT_HF + TOP * D) || !tbuf_new(c, &cache, 2 * NL * CACHE_ONE))
        goto done;
    init_weights(wb.f, &w);
    tbuf_fill(&cache, SENT);
    uint64_t prog = define_llama(c, &w, wb.id, io.id, out.id, cache.id);
    if (!prog)
        goto done;

    int prompt[NB][STEPS];
    for (int r = 0; r < NB; r++)
        for (int t = 0; t < STEPS; t++)
            prompt[r][t] = (int)((rnd() + 1.0f) * 0.5f * V) % V;
    int32_t *ids = (int32_t *)io.f, *pos = ids + TOP, *lens = ids + 2 * TOP;
    int32_t *next = (int32_t *)out.f;
    const float *logits = out.f + OUT_LOGITS, *hf = out.f + OUT_HF;
    int ref_next[NB], got_prev[NB];
    int tok_bad = 0, bucket_bad = 0, graph = 0;
    double worst_logits = 0, worst_hf = 0, min_gap = INFINITY;
    for (int t = 0; t < STEPS; t++) {
        int ref_in[NB];
        for (int r = 0; r < TOP; r++) {
            int real = r < NB;
            ids[r] = !real ? 0 : t < prompt_len[r] ? prompt[r][t] : got_prev[r];
            pos[r] = t;             /* row 3 (padding) holds a valid position */
            lens[r] = t + 1;
            if (real)
                ref_in[r] = t < prompt_len[r] ? prompt[r][t] : ref_next[r];
        }
        for (int i = 0; i < TOP; i++)
            next[i] = -1;
        for (int i = 0; i < TOP * V; i++)
            out.f[OUT_LOGITS + i] = NAN;
        gg_replay_result res;
        int rc = gg_client_replay(c, prog, NB, 0, &res);
        if (!CHECKF(rc == 0, "replay step %d: %s", t, gg_client_last_error(c)))
            goto done;
        bucket_bad += res.bucket != TOP;
        graph += res.path == GG_PATH_GRAPH;
        if (t == 0)
            h_note("step 0: path %s, bucket %d%s%s", res.path == GG_PATH_GRAPH ? "graph" : "eager",
                   res.bucket, res.captured ? ", captured" : "", res.reason);
        for (int r = 0; r < NB; r++) {
            double hfr[D], lr[V];
            ref_step(&rc_[r], wb.f, &w, ref_in[r], t, hfr, lr);
            ref_next[r] = r_argmax(lr, V);
            double top = lr[ref_next[r]], second = -INFINITY;
            for (int i = 0; i < V; i++)
                if (i != ref_next[r] && lr[i] > second)
                    second = lr[i];
            if (top - second < min_gap)
                min_gap = top - second;
            double el = rel_l2(logits + r * V, lr, V), eh = rel_l2(hf + r * D, hfr, D);
            worst_logits = el > worst_logits ? el : worst_logits;
            worst_hf = eh > worst_hf ? eh : worst_hf;
            if (next[r] != ref_next[r]) {
                tok_bad++;
                h_note("step %d row %d: daemon token %d, reference %d (input %d vs %d)", t, r,
                       next[r], ref_next[r], ids[r], ref_in[r]);
            }
            got_prev[r] = next[r];
        }
    }
    CHECKF(tok_bad == 0, "tokens equal the reference at all %d steps x %d rows (%d differ)",
           STEPS, NB, tok_bad);
    CHECKF(bucket_bad == 0, "every replay ran in bucket %d (%d did not)", TOP, bucket_bad);
    CHECKF(worst_logits <= TOL_LOGITS, "logits rel-L2 %.3e <= %.0e", worst_logits, TOL_LOGITS);
    CHECKF(worst_hf <= TOL_LOGITS, "final hidden rel-L2 %.3e <= %.0e", worst_hf, TOL_LOGITS);
    h_note("%d/%d replays on the graph path; smallest top-2 logit gap %.3g; worst rel-L2 "
           "logits %.2e hidden %.2e",
           graph, STEPS, min_gap, worst_logits, worst_hf);

    /* caches: rows 0..2 hold the reference's k/v at 0..STEPS-1 and the
     * sentinel past it; row 3 (padding) is all sentinel */
    double worst_cache = 0;
    bool untouched = true, pad = true;
    for (int l = 0; l < NL; l++)
        for (int kv = 0; kv < 2; kv++) {
            const float *cb = cache.f + (2 * l + kv) * CACHE_ONE;
            for (int r = 0; r < NB; r++) {
                const double *ref = kv == 0 ? &rc_[r].k[l][0][0] : &rc_[r].v[l][0][0];
                double e = rel_l2(cb + (size_t)r * S * KD, ref, STEPS * KD);
                worst_cache = e > worst_cache ? e : worst_cache;
                for (size_t i = (size_t)STEPS * KD; i < (size_t)S * KD; i++)
                    untouched &= cb[(size_t)r * S * KD + i] == SENT;
            }
            for (size_t i = 0; i < (size_t)S * KD; i++)
                pad &= cb[(size_t)3 * S * KD + i] == SENT;
        }
    CHECKF(worst_cache <= TOL_CACHE, "cache rows 0..2 hold the reference k/v: rel-L2 %.3e",
           worst_cache);
    CHECKF(untouched, "cache positions %d..%d of rows 0..2 never written", STEPS, S - 1);
    CHECKF(pad, "cache row 3 (padding of bucket %d) never written, in every layer's k and v",
           TOP);
done:
    tbuf_free(&wb);
    tbuf_free(&io);
    tbuf_free(&out);
    tbuf_free(&cache);
    gg_client_close(c);
}

int main(void)
{
    h_init("test_llama_decode", 120);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_decode(&d);
        h_daemon_stop(&d);
    }
    return h_finish();
}
