/* SPDX-License-Identifier: MIT */
/* The fused ops' GPU kernels (kernels/gpu_fused.hip) against their CPU
 * references (kernels/ops_fused.c: the node sequences they stand for), in
 * every float dtype, at odd and aligned sizes, on random inputs: launched
 * eagerly, then captured into a graph and replayed on new inputs.  Every
 * output is poisoned with NaN first and compared, but gate_up's g and u,
 * which are staging the kernel may skip.  Covers each path a launch may
 * take: register-resident and streamed norm rows, the small-M epilogue
 * kernel, the BLASLt epilogues (cuBLASLt on NVIDIA, hipBLASLt on AMD where
 * built) with and without a kept pre-activation, f32 linear's split-K kernel
 * with its own epilogue (NVIDIA sm_90), gate_up's one-pass kernel and its
 * split above decode sizes, chains with broadcast rows, and row
 * chains (gg_gpu_rowchain_launch) of up to 16 mixed norm stages.  Without a
 * device: SKIP (77).
 *
 * Rounding attributes (rmsnorm's round_x, silu_mul's round_act: Hugging
 * Face's f16/bf16 models round there), carried by add_rmsnorm, norm_act,
 * gate_up, ew_chain and row-chain stages: against the CPU references as
 * above, and against the unfused GPU ops run node by node on the same
 * device data.  There, in f16 and bf16, at most 1 value in 20 may differ in
 * its bits from the unfused ops (what differs is summation order and silu's
 * exp, which flip a rounding rarely), while the same ops without the
 * rounding must differ in at least 1 in 8 (a double rounding changes about
 * a quarter of the values): so a kernel that skipped the rounding fails.
 *
 * Tolerance, rel-L2 against the reference: f32 1e-5, f16 3e-3, bf16 1.5e-2
 * (the references round each intermediate as the unfused nodes do; the
 * kernels keep the same roundings, so what differs is summation order).  A
 * failure names the element farthest from the reference (the first that
 * differs in its bits, against the unfused ops), with both values.
 *
 * Every copy and memset is queued on the context's stream, the one the
 * kernels run on: that stream is non-blocking, so a plain hipMemcpy or
 * hipMemset (the legacy default stream) is not ordered before the kernels
 * (a pageable hipMemcpy may return with its last DMA still in flight,
 * hipMemset returns at once). */
#include "gg_hip.h"
#include "gpu_compare.h"
#include "gpu_ops.h"
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static gg_gpu_ctx *g_ctx;
static hipStream_t g_stream;
static uint64_t g_rng = 0x243f6a8885a308d3ull;

static float frand(float lo, float hi)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 40) * (1.0 / 16777216.0));
}

static double tolerance(gg_dtype dt)
{
    return dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 3e-3 : 1.5e-2;
}

typedef struct {
    char label[160];
    gg_fused_kind kind;
    gg_dtype dt;
    int nin, nout, ncheck;      /* outputs compared: the first ncheck */
    gg_tensor_desc in[4], out[4];
    gg_op_attrs attrs;
} fcase;

static gg_tensor_desc d2(gg_dtype dt, int64_t a, int64_t b)
{
    gg_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = dt;
    d.ndim = b ? 2 : 1;
    d.dims[0] = a;
    d.dims[1] = b;
    return d;
}

#define OK(call, what)                                                                      \
    do {                                                                                    \
        hipError_t e_ = (call);                                                             \
        if (e_ != hipSuccess) {                                                             \
            printf("FAIL: %s: %s: %s\n", c->label, what, hipGetErrorString(e_));            \
            g_fail++;                                                                       \
            goto out;                                                                       \
        }                                                                                   \
    } while (0)

static void run(fcase *c)
{
    const gg_op_def *op = gg_ops_fused(c->kind);
    void *hin[4] = {0}, *din[4] = {0}, *href[4] = {0}, *hout[4] = {0}, *dout[4] = {0};
    gg_tensor ti[4], to[4], gi[4], go[4];
    hipGraph_t graph = NULL;
    hipGraphExec_t exec = NULL;
    for (int i = 0; i < c->nin; i++) {
        size_t b = gg_desc_bytes(&c->in[i]);
        hin[i] = malloc(b);
        OK(hipMalloc(&din[i], b), "hipMalloc");
        ti[i] = (gg_tensor){hin[i], c->in[i]};
        gi[i] = (gg_tensor){din[i], c->in[i]};
    }
    for (int o = 0; o < c->nout; o++) {
        size_t b = gg_desc_bytes(&c->out[o]);
        href[o] = malloc(b);
        hout[o] = malloc(b);
        OK(hipMalloc(&dout[o], b), "hipMalloc");
        to[o] = (gg_tensor){href[o], c->out[o]};
        go[o] = (gg_tensor){dout[o], c->out[o]};
    }
    for (int r = 0; r < 3; r++) {
        if (r != 1) {
            for (int i = 0; i < c->nin; i++) {
                for (int64_t k = 0; k < gg_desc_numel(&c->in[i]); k++)
                    gg_store(hin[i], c->dt, k, frand(-1.5f, 1.5f));
                OK(hipMemcpyAsync(din[i], hin[i], gg_desc_bytes(&c->in[i]),
                                  hipMemcpyHostToDevice, g_stream),
                   "copy in");
            }
            gg_ops_run_cpu(op, ti, c->nin, to, c->nout, &c->attrs);
        }
        for (int o = 0; o < c->nout; o++)
            OK(hipMemsetAsync(dout[o], 0xff, gg_desc_bytes(&c->out[o]), g_stream), "poison");
        if (r == 1) /* done before the capture begins: the graph holds only the op */
            OK(hipStreamSynchronize(g_stream), "sync");
        if (r == 0) {
            int rc = gg_gpu_op_launch(g_ctx, op, gi, c->nin, go, c->nout, &c->attrs);
            if (rc) {
                printf("FAIL: %s [eager]: %d %s\n", c->label, rc, gg_gpu_last_error());
                g_fail++;
                goto out;
            }
        } else {
            if (r == 1) {
                OK(hipStreamBeginCapture(g_stream, hipStreamCaptureModeThreadLocal), "capture");
                int rc = gg_gpu_op_launch(g_ctx, op, gi, c->nin, go, c->nout, &c->attrs);
                hipError_t e = hipStreamEndCapture(g_stream, &graph);
                if (rc || e != hipSuccess) {
                    printf("FAIL: %s [capture]: %d %s / %s\n", c->label, rc, gg_gpu_last_error(),
                           hipGetErrorString(e));
                    g_fail++;
                    goto out;
                }
                OK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0), "instantiate");
            }
            OK(hipGraphLaunch(exec, g_stream), "graph launch");
        }
        for (int o = 0; o < c->ncheck; o++)
            OK(hipMemcpyAsync(hout[o], dout[o], gg_desc_bytes(&c->out[o]),
                              hipMemcpyDeviceToHost, g_stream),
               "copy out");
        OK(hipStreamSynchronize(g_stream), "sync");
        for (int o = 0; o < c->ncheck; o++) {
            const int64_t n = gg_desc_numel(&c->out[o]);
            int64_t bad;
            double err = gt_rel_l2(hout[o], href[o], c->dt, n, &bad);
            static const char *const ph[3] = {"eager", "graph", "graph, new inputs"};
            if (err <= tolerance(c->dt)) {
                g_pass++;
            } else {
                char d[192];
                printf("FAIL: %s [%s] output %d: rel-L2 %.3g (first non-finite %lld); the "
                       "farthest at %s\n",
                       c->label, ph[r], o, err, (long long)bad,
                       gt_diff_str(d, sizeof d, hout[o], href[o], c->dt,
                                   gt_farthest(hout[o], href[o], c->dt, n)));
                g_fail++;
            }
        }
    }
out:
    (void)hipStreamSynchronize(g_stream); /* no copy left on the host buffers freed here */
    if (exec)
        (void)hipGraphExecDestroy(exec);
    if (graph)
        (void)hipGraphDestroy(graph);
    for (int i = 0; i < 4; i++) {
        free(hin[i]);
        free(href[i]);
        free(hout[i]);
        if (din[i])
            (void)hipFree(din[i]);
        if (dout[i])
            (void)hipFree(dout[i]);
    }
}

static const char *dtn(gg_dtype dt)
{
    return gg_dtype_name(dt);
}

static void norm_cases(gg_dtype dt)
{
    /* cols: warp-sized, decode d, register rows of 2-4 units, streamed */
    static const int64_t cols[] = {37, 1024, 4096, 3000, 20011};
    static const int64_t rows[] = {1, 3, 5, 2, 1};
    for (int i = 0; i < 5; i++)
        for (int v = 0; v < 6; v++) {
            fcase c;
            memset(&c, 0, sizeof c);
            c.dt = dt;
            int64_t R = rows[i], C = cols[i];
            if (v < 3 || v == 4) {
                bool rms = v == 1 || v == 4;   /* v 4: rmsnorm with round_x */
                c.kind = GG_FUSED_NORM_ACT;
                c.nin = rms ? 2 : 3;
                c.in[0] = d2(dt, R, C);
                c.in[1] = c.in[2] = d2(dt, C, 0);
                c.nout = c.ncheck = v == 2 ? 2 : 1;   /* v 2: h kept */
                c.out[0] = c.out[1] = d2(dt, R, C);
                c.attrs.v[0] = 1e-5;
                c.attrs.v[1] = v == 4 ? 2 : rms;
                c.attrs.v[2] = v == 0 ? GG_ACT_GELU_TANH : v == 2 ? GG_ACT_GELU_ERF : GG_ACT_SILU;
                c.attrs.v[3] = 0;
                snprintf(c.label, sizeof c.label, "norm_act %s [%lld, %lld] %s%s", rms ? "rms" : "ln",
                         (long long)R, (long long)C, dtn(dt),
                         v == 2 ? " h kept" : v == 4 ? " round_x" : "");
            } else {
                c.kind = GG_FUSED_ADD_RMSNORM;
                c.nin = 3;
                c.in[0] = c.in[1] = d2(dt, R, C);
                c.in[2] = d2(dt, C, 0);
                c.nout = c.ncheck = 2;
                c.out[0] = c.out[1] = d2(dt, R, C);
                c.attrs.v[0] = 1e-6;
                c.attrs.v[1] = v == 5;   /* round_x */
                snprintf(c.label, sizeof c.label, "add_rmsnorm [%lld, %lld] %s%s", (long long)R,
                         (long long)C, dtn(dt), v == 5 ? " round_x" : "");
            }
            run(&c);
        }
}

static void linear_cases(gg_dtype dt)
{
    /* M: the small-M kernel (1), the BLAS / own GEMM (3, 32); K odd and aligned;
     * f32 at 8..32 rows: the clustered split-K kernel on sm_90 with its own
     * epilogue (odd K and N, a K tail), from 33 rows the BLAS again */
    static const struct { int64_t M, K, N; } sh[] = {
        {1, 1024, 4096}, {1, 37, 29},   {3, 64, 40},    {32, 1024, 4096}, {32, 37, 29},
        {17, 1000, 300}, {31, 77, 45},  {9, 200, 70},   {33, 513, 129},   {64, 4096, 1024},
        {80, 64, 40}};
    for (int i = 0; i < (int)(sizeof sh / sizeof sh[0]); i++)
        for (int v = 0; v < 5; v++) {
            fcase c;
            memset(&c, 0, sizeof c);
            c.dt = dt;
            c.kind = GG_FUSED_LINEAR_ACT;
            int64_t M = sh[i].M, K = sh[i].K, N = sh[i].N;
            c.in[0] = d2(dt, M, K);
            c.in[1] = d2(dt, N, K);
            c.in[2] = d2(dt, N, 0);
            c.nin = v == 4 ? 2 : 3;
            c.out[0] = c.out[1] = d2(dt, M, N);
            /* v: 0 gelu erf, 1 gelu tanh, 2 bias only, 3 separate bias + silu with h kept,
             * 4 no bias + scale */
            static const int acts[] = {GG_ACT_GELU_ERF, GG_ACT_GELU_TANH, GG_ACT_NONE, GG_ACT_SILU,
                                       GG_ACT_SCALE};
            c.attrs.v[0] = acts[v];
            c.attrs.v[1] = v == 4 ? 0.25 : 0;
            c.attrs.v[2] = v == 3;
            c.nout = c.ncheck = v == 3 ? 2 : 1;
            snprintf(c.label, sizeof c.label, "linear_act M%lld K%lld N%lld %s variant %d",
                     (long long)M, (long long)K, (long long)N, dtn(dt), v);
            run(&c);
        }
    static const struct { int64_t M, K, N; } gu[] = {{1, 1024, 2816}, {1, 37, 29}, {3, 64, 40},
                                                     {16, 256, 96}};
    for (int i = 0; i < 8; i++) {
        fcase c;
        memset(&c, 0, sizeof c);
        c.dt = dt;
        c.kind = GG_FUSED_GATE_UP;
        c.attrs.v[1] = i >= 4;   /* silu_mul's round_act */
        c.nin = 3;
        const int g = i % 4;
        c.in[0] = d2(dt, gu[g].M, gu[g].K);
        c.in[1] = c.in[2] = d2(dt, gu[g].N, gu[g].K);
        c.nout = 3;
        c.ncheck = 1;
        c.out[0] = c.out[1] = c.out[2] = d2(dt, gu[g].M, gu[g].N);
        snprintf(c.label, sizeof c.label, "gate_up M%lld K%lld N%lld %s%s", (long long)gu[g].M,
                 (long long)gu[g].K, (long long)gu[g].N, dtn(dt), i >= 4 ? " round_act" : "");
        run(&c);
    }
}

static void chain_cases(gg_dtype dt)
{
    static const int64_t R[] = {1, 7, 1, 7}, C[] = {1024, 37, 1024, 37};
    for (int i = 0; i < 4; i++) {
        fcase c;
        memset(&c, 0, sizeof c);
        c.dt = dt;
        c.kind = GG_FUSED_EW_CHAIN;
        c.nin = 4;
        c.in[0] = c.in[1] = c.in[3] = d2(dt, R[i], C[i]);
        c.in[2] = d2(dt, C[i], 0);   /* a row vector */
        c.nout = c.ncheck = 1;
        c.out[0] = d2(dt, R[i], C[i]);
        /* i >= 2: the silu_mul steps with round_act */
        const bool rnd = i >= 2;
        gg_ew_steps st = {6,
                          {GG_EW_ADD, GG_EW_GELU_ERF, GG_EW_MUL, GG_EW_SCALE,
                           rnd ? GG_EW_SILU_MUL_R_RND : GG_EW_SILU_MUL_R,
                           rnd ? GG_EW_SILU_MUL_RND : GG_EW_SILU_MUL},
                          {1, 0, 2, 0, 3, 1}};
        c.attrs.v[0] = gg_ew_pack(&st);
        c.attrs.v[1] = -0.75;
        snprintf(c.label, sizeof c.label, "ew_chain [%lld, %lld] %s%s", (long long)R[i],
                 (long long)C[i], dtn(dt), rnd ? " round_act" : "");
        run(&c);
    }
}

/* Row chains (gg_gpu_rowchain_launch) against gg_rowchain_run_cpu: stages
 * mixing layernorm and rmsnorm (some with round_x) with every activation,
 * some keeping h and some not writing y (nothing reads it: the reference passes it through the
 * last y, the kernel keeps it in registers), eager and captured. */
static void rowchain_run(gg_dtype dt, int64_t R, int64_t C, int n)
{
    char label[160];
    snprintf(label, sizeof label, "row_chain %d stages [%lld, %lld] %s", n, (long long)R,
             (long long)C, dtn(dt));
    gg_rowchain hc, dc;   /* host (reference) and device */
    memset(&hc, 0, sizeof hc);
    memset(&dc, 0, sizeof dc);
    enum { NB = 1 + 4 * GG_ROWCHAIN_MAX_STAGES };
    void *host[NB] = {0}, *dev[NB] = {0}, *got = NULL;
    gg_tensor *ht[NB] = {0}, *dv[NB] = {0};
    bool out[NB] = {0};
    int nb = 0;
    const gg_tensor_desc xd = d2(dt, R, C), rd = d2(dt, C, 0);
    hipGraph_t graph = NULL;
    hipGraphExec_t exec = NULL;
    ht[nb] = &hc.x, dv[nb] = &dc.x, hc.x.desc = dc.x.desc = xd, nb++;
    hc.n = dc.n = n;
    for (int k = 0; k < n; k++) {
        gg_rowchain_stage *h = &hc.st[k], *d = &dc.st[k];
        h->rms = d->rms = k % 3 == 1;
        h->round_x = d->round_x = h->rms && k % 2 == 1;   /* stages 1, 7, 13 */
        static const int acts[] = {GG_ACT_GELU_TANH, GG_ACT_SILU, GG_ACT_NONE,
                                   GG_ACT_GELU_ERF, GG_ACT_SCALE};
        h->act = d->act = acts[k % 5];
        h->p = d->p = -1.25;
        h->eps = d->eps = k % 2 ? 1e-6 : 1e-5;
        ht[nb] = &h->w, dv[nb] = &d->w, h->w.desc = d->w.desc = rd, nb++;
        if (!h->rms)
            ht[nb] = &h->b, dv[nb] = &d->b, h->b.desc = d->b.desc = rd, nb++;
        if (k % 4 == 2)
            out[nb] = true, ht[nb] = &h->h, dv[nb] = &d->h, h->h.desc = d->h.desc = xd, nb++;
        if (k % 3 != 0 || k == n - 1)
            out[nb] = true, ht[nb] = &h->y, dv[nb] = &d->y, h->y.desc = d->y.desc = xd, nb++;
    }
    for (int i = 0; i < nb; i++) {
        size_t b = gg_desc_bytes(&ht[i]->desc);
        host[i] = malloc(b);
        if (!host[i] || hipMalloc(&dev[i], b) != hipSuccess) {
            printf("FAIL: %s: allocation\n", label);
            g_fail++;
            goto out;
        }
        ht[i]->data = host[i];
        dv[i]->data = dev[i];
    }
    got = malloc(gg_desc_bytes(&xd));
    for (int r = 0; r < 3 && got; r++) {
        if (r != 1) {
            for (int i = 0; i < nb; i++) {
                if (out[i])
                    continue;
                for (int64_t k = 0; k < gg_desc_numel(&ht[i]->desc); k++)
                    gg_store(host[i], dt, k, frand(-1.5f, 1.5f));
                if (hipMemcpyAsync(dev[i], host[i], gg_desc_bytes(&ht[i]->desc),
                                   hipMemcpyHostToDevice, g_stream) != hipSuccess)
                    goto hip_fail;
            }
            gg_rowchain_run_cpu(&hc);
        }
        for (int i = 0; i < nb; i++)
            if (out[i] &&
                hipMemsetAsync(dev[i], 0xff, gg_desc_bytes(&ht[i]->desc), g_stream) != hipSuccess)
                goto hip_fail;
        /* before a capture: done, so the graph holds only the chain */
        if (r == 1 && hipStreamSynchronize(g_stream) != hipSuccess)
            goto hip_fail;
        int rc = 0;
        if (r == 0) {
            rc = gg_gpu_rowchain_launch(g_ctx, &dc);
        } else if (r == 1) {
            if (hipStreamBeginCapture(g_stream, hipStreamCaptureModeThreadLocal) != hipSuccess)
                goto hip_fail;
            rc = gg_gpu_rowchain_launch(g_ctx, &dc);
            if (hipStreamEndCapture(g_stream, &graph) != hipSuccess || rc ||
                hipGraphInstantiate(&exec, graph, NULL, NULL, 0) != hipSuccess) {
                printf("FAIL: %s [capture]: %d %s\n", label, rc, gg_gpu_last_error());
                g_fail++;
                goto out;
            }
        }
        if (rc) {
            printf("FAIL: %s [eager]: %d %s\n", label, rc, gg_gpu_last_error());
            g_fail++;
            goto out;
        }
        if ((r > 0 && hipGraphLaunch(exec, g_stream) != hipSuccess) ||
            hipStreamSynchronize(g_stream) != hipSuccess)
            goto hip_fail;
        static const char *const ph[3] = {"eager", "graph", "graph, new inputs"};
        for (int i = 0; i < nb; i++) {
            if (!out[i])
                continue;
            if (hipMemcpyAsync(got, dev[i], gg_desc_bytes(&xd), hipMemcpyDeviceToHost,
                               g_stream) != hipSuccess ||
                hipStreamSynchronize(g_stream) != hipSuccess)
                goto hip_fail;
            const int64_t n = gg_desc_numel(&xd);
            int64_t bad;
            double err = gt_rel_l2(got, host[i], dt, n, &bad);
            if (err <= tolerance(dt)) {
                g_pass++;
            } else {
                char d[192];
                printf("FAIL: %s [%s] output buffer %d: rel-L2 %.3g (first non-finite %lld); "
                       "the farthest at %s\n",
                       label, ph[r], i, err, (long long)bad,
                       gt_diff_str(d, sizeof d, got, host[i], dt,
                                   gt_farthest(got, host[i], dt, n)));
                g_fail++;
            }
        }
    }
    goto out;
hip_fail:
    printf("FAIL: %s: HIP call failed\n", label);
    g_fail++;
out:
    (void)hipStreamSynchronize(g_stream); /* no copy left on the host buffers freed here */
    if (exec)
        (void)hipGraphExecDestroy(exec);
    if (graph)
        (void)hipGraphDestroy(graph);
    free(got);
    for (int i = 0; i < nb; i++) {
        free(host[i]);
        if (dev[i])
            (void)hipFree(dev[i]);
    }
}

static void rowchain_cases(gg_dtype dt)
{
    /* decode d (16-byte units), odd d (one element a unit), a row past what
     * registers hold (the stages one by one); then the wider builds: 4096
     * (one unit a thread, 512 threads), 12000 (two units, the second past
     * the row on part of the block), 3001 (four units of one element, the
     * last past the row everywhere) */
    static const int64_t R[] = {1, 6, 1, 5, 3, 2, 3, 2};
    static const int64_t C[] = {1024, 1024, 37, 37, 20011, 4096, 12000, 3001};
    static const int S[] = {GG_ROWCHAIN_MAX_STAGES, 3, GG_ROWCHAIN_MAX_STAGES, 2, 5, 3, 4, 5};
    for (int i = 0; i < (int)(sizeof R / sizeof R[0]); i++)
        rowchain_run(dt, R[i], C[i], S[i]);
    /* a refused descriptor: a clear error, nothing launched */
    gg_rowchain bad;
    memset(&bad, 0, sizeof bad);
    bad.n = GG_ROWCHAIN_MAX_STAGES + 1;
    int rc = gg_gpu_rowchain_launch(g_ctx, &bad);
    if (rc == -EINVAL && strstr(gg_gpu_last_error(), "stages")) {
        g_pass++;
    } else {
        printf("FAIL: row_chain of %d stages: %d %s\n", bad.n, rc, gg_gpu_last_error());
        g_fail++;
    }
}

/* ---- rounding variants against the unfused GPU ops ------------------------------ */

#define RT_MAX 24
typedef struct {
    gg_dtype dt;
    int n;
    gg_tensor t[RT_MAX];     /* device data */
    void *host;              /* one tensor's bytes, for filling and reading back */
    size_t host_bytes;
    bool failed;
} rt_pool;

static int rt_fail(rt_pool *p, const char *what)
{
    if (!p->failed) {
        printf("FAIL: rounding cases: %s\n", what);
        g_fail++;
    }
    p->failed = true;
    return -1;
}

/* A device tensor of d, random values in [-1.5, 1.5) when input; -1 on
 * failure (then every later step of the pool does nothing). */
static int rt_new(rt_pool *p, gg_tensor_desc d, bool input)
{
    size_t b = gg_desc_bytes(&d);
    if (p->failed)
        return -1;
    if (p->n == RT_MAX)
        return rt_fail(p, "pool full");
    if (b > p->host_bytes) {
        void *h = realloc(p->host, b);
        if (!h)
            return rt_fail(p, "host allocation");
        p->host = h;
        p->host_bytes = b;
    }
    void *dev = NULL;
    if (hipMalloc(&dev, b) != hipSuccess)
        return rt_fail(p, "hipMalloc");
    if (input) {
        for (int64_t k = 0; k < gg_desc_numel(&d); k++)
            gg_store(p->host, p->dt, k, frand(-1.5f, 1.5f));
    } else {
        memset(p->host, 0xff, b);   /* NaN in every float dtype */
    }
    /* on the kernels' stream, and landed before p->host is refilled for the
     * next tensor */
    if (hipMemcpyAsync(dev, p->host, b, hipMemcpyHostToDevice, g_stream) != hipSuccess ||
        hipStreamSynchronize(g_stream) != hipSuccess) {
        (void)hipFree(dev);
        return rt_fail(p, "copy in");
    }
    p->t[p->n] = (gg_tensor){dev, d};
    return p->n++;
}

static void rt_free(rt_pool *p)
{
    for (int i = 0; i < p->n; i++)
        (void)hipFree(p->t[i].data);
    free(p->host);
}

/* One unfused node: op `id` on pool tensors in[0..nin) into out, its
 * attributes the defaults but `attr` (NULL: none) set to v, and eps for
 * rmsnorm. */
static void rt_op(rt_pool *p, const char *label, int id, const int *in, int nin, int out,
                  const char *attr, double v)
{
    const gg_op_def *op = gg_ops_at(id);
    gg_tensor ti[3];
    gg_op_attrs a;
    if (p->failed)
        return;
    gg_ops_attr_defaults(op, &a);
    if (id == GG_OP_RMSNORM)
        a.v[gg_ops_attr_index(op, "eps")] = 1e-6;
    if (attr)
        a.v[gg_ops_attr_index(op, attr)] = v;
    for (int i = 0; i < nin; i++)
        ti[i] = p->t[in[i]];
    int rc = gg_gpu_op_launch(g_ctx, op, ti, nin, &p->t[out], 1, &a);
    if (rc) {
        printf("FAIL: %s: unfused %s: %d %s\n", label, op->name, rc, gg_gpu_last_error());
        g_fail++;
        p->failed = true;
    }
}

/* Pool tensor i's values, on the host (malloc'd; NULL on failure). */
static void *rt_get(rt_pool *p, int i)
{
    size_t b = gg_desc_bytes(&p->t[i].desc);
    void *h = malloc(b);
    if (h && (hipMemcpyAsync(h, p->t[i].data, b, hipMemcpyDeviceToHost, g_stream) != hipSuccess ||
              hipStreamSynchronize(g_stream) != hipSuccess)) {
        free(h);
        h = NULL;
    }
    return h;
}

static int64_t rt_bits_differ(const void *a, const void *b, gg_dtype dt, int64_t n)
{
    const size_t es = gg_dtype_size(dt);
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += memcmp((const uint8_t *)a + i * es, (const uint8_t *)b + i * es, es) != 0;
    return d;
}

/* The fused result f against the unfused ops' u (same roundings) and q (the
 * same ops without them). */
static void rt_check(rt_pool *p, const char *label, const char *what, int f, int u, int q)
{
    if (p->failed)
        return;   /* counted where it failed */
    if (hipStreamSynchronize(g_stream) != hipSuccess) {
        printf("FAIL: %s: HIP call failed\n", label);
        rt_fail(p, "sync");
        return;
    }
    const gg_dtype dt = p->dt;
    const int64_t n = gg_desc_numel(&p->t[f].desc);
    void *hf = rt_get(p, f), *hu = rt_get(p, u), *hq = rt_get(p, q);
    if (!hf || !hu || !hq) {
        printf("FAIL: %s: read back\n", label);
        g_fail++;
    } else {
        int64_t bad;
        const double err = gt_rel_l2(hf, hu, dt, n, &bad);
        const int64_t df = rt_bits_differ(hf, hu, dt, n), dq = rt_bits_differ(hq, hu, dt, n);
        const bool half = dt != GG_DT_F32;
        if (err <= tolerance(dt) && (!half || (df * 20 <= n && dq * 8 >= n))) {
            g_pass++;
        } else {
            const int64_t at = gt_first_diff(hf, hu, dt, n);
            char gf[48] = "-", gu[48] = "-";
            if (at >= 0) {
                gt_elem_str(gf, sizeof gf, hf, dt, at);
                gt_elem_str(gu, sizeof gu, hu, dt, at);
            }
            printf("FAIL: %s: %s against the unfused GPU ops: rel-L2 %.3g (first non-finite "
                   "%lld), %lld of %lld values differ in their bits (at most 1 in 20), the "
                   "first at %lld: fused %s, unfused %s; without the rounding %lld differ (at "
                   "least 1 in 8)\n",
                   label, what, err, (long long)bad, (long long)df, (long long)n,
                   (long long)at, gf, gu, (long long)dq);
            g_fail++;
        }
    }
    free(hf);
    free(hu);
    free(hq);
}

static int rt_fused(rt_pool *p, const char *label, gg_fused_kind k, const int *in, int nin,
                    const int *out, int nout, const gg_op_attrs *a)
{
    gg_tensor ti[4], to[3];
    if (p->failed)
        return -1;
    for (int i = 0; i < nin; i++)
        ti[i] = p->t[in[i]];
    for (int i = 0; i < nout; i++)
        to[i] = p->t[out[i]];
    int rc = gg_gpu_op_launch(g_ctx, gg_ops_fused(k), ti, nin, to, nout, a);
    if (rc) {
        printf("FAIL: %s: %d %s\n", label, rc, gg_gpu_last_error());
        g_fail++;
        p->failed = true;
    }
    return rc;
}

/* add_rmsnorm(round_x) and norm_act(rmsnorm round_x -> silu, h kept). */
static void rt_norms(gg_dtype dt, int64_t R, int64_t C)
{
    char label[160];
    rt_pool p = {.dt = dt};
    const gg_tensor_desc xd = d2(dt, R, C), wd = d2(dt, C, 0);
    gg_op_attrs a;
    snprintf(label, sizeof label, "add_rmsnorm round_x [%lld, %lld] %s vs unfused",
             (long long)R, (long long)C, dtn(dt));
    {
        const int x = rt_new(&p, xd, true), r = rt_new(&p, xd, true), w = rt_new(&p, wd, true);
        const int sf = rt_new(&p, xd, false), yf = rt_new(&p, xd, false);
        const int su = rt_new(&p, xd, false), yu = rt_new(&p, xd, false);
        const int yq = rt_new(&p, xd, false);
        memset(&a, 0, sizeof a);
        a.v[0] = 1e-6;
        a.v[1] = 1;
        const int in[3] = {x, r, w}, out[2] = {sf, yf}, xr[2] = {x, r}, sw[2] = {su, w};
        rt_fused(&p, label, GG_FUSED_ADD_RMSNORM, in, 3, out, 2, &a);
        rt_op(&p, label, GG_OP_ADD, xr, 2, su, NULL, 0);
        rt_op(&p, label, GG_OP_RMSNORM, sw, 2, yu, "round_x", 1);
        rt_op(&p, label, GG_OP_RMSNORM, sw, 2, yq, "round_x", 0);
        rt_check(&p, label, "y", yf, yu, yq);
    }
    rt_free(&p);
    memset(&p, 0, sizeof p);
    p.dt = dt;
    snprintf(label, sizeof label, "norm_act rmsnorm round_x -> silu [%lld, %lld] %s vs unfused",
             (long long)R, (long long)C, dtn(dt));
    {
        const int x = rt_new(&p, xd, true), w = rt_new(&p, wd, true);
        const int yf = rt_new(&p, xd, false), hf = rt_new(&p, xd, false);
        const int hu = rt_new(&p, xd, false), yu = rt_new(&p, xd, false);
        const int hq = rt_new(&p, xd, false), yq = rt_new(&p, xd, false);
        memset(&a, 0, sizeof a);
        a.v[0] = 1e-6;
        a.v[1] = 2;   /* rmsnorm with round_x */
        a.v[2] = GG_ACT_SILU;
        const int in[2] = {x, w}, out[2] = {yf, hf};
        rt_fused(&p, label, GG_FUSED_NORM_ACT, in, 2, out, 2, &a);
        rt_op(&p, label, GG_OP_RMSNORM, in, 2, hu, "round_x", 1);
        rt_op(&p, label, GG_OP_SILU, &hu, 1, yu, NULL, 0);
        rt_op(&p, label, GG_OP_RMSNORM, in, 2, hq, "round_x", 0);
        rt_op(&p, label, GG_OP_SILU, &hq, 1, yq, NULL, 0);
        rt_check(&p, label, "h", hf, hu, hq);
        rt_check(&p, label, "y", yf, yu, yq);
    }
    rt_free(&p);
}

/* gate_up(round_act): linear, linear, silu_mul(round_act). */
static void rt_gate_up(gg_dtype dt, int64_t M, int64_t K, int64_t N)
{
    char label[160];
    snprintf(label, sizeof label, "gate_up round_act M%lld K%lld N%lld %s vs unfused",
             (long long)M, (long long)K, (long long)N, dtn(dt));
    rt_pool p = {.dt = dt};
    const gg_tensor_desc xd = d2(dt, M, K), wd = d2(dt, N, K), yd = d2(dt, M, N);
    const int x = rt_new(&p, xd, true), wg = rt_new(&p, wd, true), wu = rt_new(&p, wd, true);
    const int yf = rt_new(&p, yd, false), gf = rt_new(&p, yd, false), uf = rt_new(&p, yd, false);
    const int gu = rt_new(&p, yd, false), uu = rt_new(&p, yd, false);
    const int yu = rt_new(&p, yd, false), yq = rt_new(&p, yd, false);
    gg_op_attrs a;
    memset(&a, 0, sizeof a);
    a.v[1] = 1;   /* round_act */
    const int in[3] = {x, wg, wu}, out[3] = {yf, gf, uf};
    const int lg[2] = {x, wg}, lu[2] = {x, wu}, sm[2] = {gu, uu};
    rt_fused(&p, label, GG_FUSED_GATE_UP, in, 3, out, 3, &a);
    rt_op(&p, label, GG_OP_LINEAR, lg, 2, gu, NULL, 0);
    rt_op(&p, label, GG_OP_LINEAR, lu, 2, uu, NULL, 0);
    rt_op(&p, label, GG_OP_SILU_MUL, sm, 2, yu, "round_act", 1);
    rt_op(&p, label, GG_OP_SILU_MUL, sm, 2, yq, "round_act", 0);
    rt_check(&p, label, "y", yf, yu, yq);
    rt_free(&p);
}

/* ew_chain: silu_mul(x, e) then silu_mul(e, that), both with round_act. */
static void rt_chain(gg_dtype dt, int64_t R, int64_t C)
{
    char label[160];
    snprintf(label, sizeof label, "ew_chain round_act [%lld, %lld] %s vs unfused", (long long)R,
             (long long)C, dtn(dt));
    rt_pool p = {.dt = dt};
    const gg_tensor_desc xd = d2(dt, R, C);
    const int x = rt_new(&p, xd, true), e = rt_new(&p, xd, true), yf = rt_new(&p, xd, false);
    const int tu = rt_new(&p, xd, false), yu = rt_new(&p, xd, false);
    const int tq = rt_new(&p, xd, false), yq = rt_new(&p, xd, false);
    gg_ew_steps st = {2, {GG_EW_SILU_MUL_RND, GG_EW_SILU_MUL_R_RND}, {1, 1}};
    gg_op_attrs a;
    memset(&a, 0, sizeof a);
    a.v[0] = gg_ew_pack(&st);
    const int in[2] = {x, e}, xe[2] = {x, e}, etu[2] = {e, tu}, etq[2] = {e, tq};
    rt_fused(&p, label, GG_FUSED_EW_CHAIN, in, 2, &yf, 1, &a);
    rt_op(&p, label, GG_OP_SILU_MUL, xe, 2, tu, "round_act", 1);
    rt_op(&p, label, GG_OP_SILU_MUL, etu, 2, yu, "round_act", 1);
    rt_op(&p, label, GG_OP_SILU_MUL, xe, 2, tq, "round_act", 0);
    rt_op(&p, label, GG_OP_SILU_MUL, etq, 2, yq, "round_act", 0);
    rt_check(&p, label, "y", yf, yu, yq);
    rt_free(&p);
}

/* A row chain of three rmsnorm(round_x) stages, the second with silu, only
 * the last y written: against rmsnorm, rmsnorm, silu, rmsnorm node by node. */
static void rt_rowchain(gg_dtype dt, int64_t R, int64_t C)
{
    char label[160];
    snprintf(label, sizeof label, "row_chain 3 rmsnorm round_x stages [%lld, %lld] %s vs unfused",
             (long long)R, (long long)C, dtn(dt));
    rt_pool p = {.dt = dt};
    const gg_tensor_desc xd = d2(dt, R, C), wd = d2(dt, C, 0);
    int w[3], u[4], q[4];
    const int x = rt_new(&p, xd, true), yf = rt_new(&p, xd, false);
    for (int k = 0; k < 3; k++)
        w[k] = rt_new(&p, wd, true);
    for (int k = 0; k < 4; k++) {
        u[k] = rt_new(&p, xd, false);
        q[k] = rt_new(&p, xd, false);
    }
    if (!p.failed) {
        gg_rowchain c;
        memset(&c, 0, sizeof c);
        c.x = p.t[x];
        c.n = 3;
        for (int k = 0; k < 3; k++) {
            c.st[k].w = p.t[w[k]];
            c.st[k].eps = 1e-6;
            c.st[k].rms = 1;
            c.st[k].round_x = 1;
            c.st[k].act = k == 1 ? GG_ACT_SILU : GG_ACT_NONE;
        }
        c.st[2].y = p.t[yf];
        int rc = gg_gpu_rowchain_launch(g_ctx, &c);
        if (rc) {
            printf("FAIL: %s: %d %s\n", label, rc, gg_gpu_last_error());
            g_fail++;
            p.failed = true;
        }
    }
    /* u: with the rounding, q: without; [0] stage 0's y, [1] stage 1's normed
     * value, [2] its silu, [3] stage 2's y */
    for (int r = 0; r < 2; r++) {
        const int *o = r ? q : u;
        const int i0[2] = {x, w[0]}, i1[2] = {o[0], w[1]}, i2[2] = {o[2], w[2]};
        rt_op(&p, label, GG_OP_RMSNORM, i0, 2, o[0], "round_x", r == 0);
        rt_op(&p, label, GG_OP_RMSNORM, i1, 2, o[1], "round_x", r == 0);
        rt_op(&p, label, GG_OP_SILU, &o[1], 1, o[2], NULL, 0);
        rt_op(&p, label, GG_OP_RMSNORM, i2, 2, o[3], "round_x", r == 0);
    }
    rt_check(&p, label, "y", yf, u[3], q[3]);
    rt_free(&p);
}

static void round_cases(gg_dtype dt)
{
    /* decode d in 16-byte units, odd d with enough rows for the counts, a
     * row the norm kernels stream */
    rt_norms(dt, 1, 2048);
    rt_norms(dt, 9, 37);
    rt_norms(dt, 2, 20011);
    /* the one-pass decode kernel, and the split above decode sizes */
    rt_gate_up(dt, 1, 1024, 2816);
    rt_gate_up(dt, 16, 256, 96);
    rt_chain(dt, 3, 1024);
    rt_chain(dt, 7, 37);
    rt_rowchain(dt, 1, 2048);
    rt_rowchain(dt, 9, 37);
    rt_rowchain(dt, 2, 20011);
}

int main(void)
{
    int n = 0;
    if (hipGetDeviceCount(&n) != hipSuccess || n < 1) {
        printf("SKIP: no GPU device\n");
        return 77;
    }
    if (hipStreamCreateWithFlags(&g_stream, hipStreamNonBlocking) != hipSuccess ||
        gg_gpu_ctx_create((void *)g_stream, &g_ctx) != 0) {
        printf("FAIL: context: %s\n", gg_gpu_last_error());
        return 1;
    }
    /* the Lt epilogues are built and usable wherever a BLASLt is: always on
     * NVIDIA */
    printf("test_gpu_fused: %s, blas %s, blas_lt %s\n", gg_gpu_platform(), gg_gpu_blas(),
           gg_gpu_blas_lt());
    if (strcmp(gg_gpu_platform(), "hip-cuda") == 0 && strcmp(gg_gpu_blas_lt(), "cublaslt") != 0) {
        printf("FAIL: no cuBLASLt epilogues on this NVIDIA device (blas_lt %s)\n", gg_gpu_blas_lt());
        g_fail++;
    }
    static const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    for (int i = 0; i < 3; i++) {
        norm_cases(dts[i]);
        linear_cases(dts[i]);
        chain_cases(dts[i]);
        rowchain_cases(dts[i]);
        round_cases(dts[i]);
    }
    gg_gpu_ctx_destroy(g_ctx);
    (void)hipStreamDestroy(g_stream);
    printf("test_gpu_fused: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
