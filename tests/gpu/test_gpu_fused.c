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
 * Tolerance, rel-L2 against the reference: f32 1e-5, f16 3e-3, bf16 1.5e-2
 * (the references round each intermediate as the unfused nodes do; the
 * kernels keep the same roundings, so what differs is summation order). */
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
                OK(hipMemcpy(din[i], hin[i], gg_desc_bytes(&c->in[i]), hipMemcpyHostToDevice),
                   "copy in");
            }
            gg_ops_run_cpu(op, ti, c->nin, to, c->nout, &c->attrs);
        }
        for (int o = 0; o < c->nout; o++)
            OK(hipMemset(dout[o], 0xff, gg_desc_bytes(&c->out[o])), "poison");
        OK(hipDeviceSynchronize(), "sync");
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
        OK(hipStreamSynchronize(g_stream), "sync");
        for (int o = 0; o < c->ncheck; o++) {
            OK(hipMemcpy(hout[o], dout[o], gg_desc_bytes(&c->out[o]), hipMemcpyDeviceToHost),
               "copy out");
            int64_t bad;
            double err = gt_rel_l2(hout[o], href[o], c->dt, gg_desc_numel(&c->out[o]), &bad);
            static const char *const ph[3] = {"eager", "graph", "graph, new inputs"};
            if (err <= tolerance(c->dt)) {
                g_pass++;
            } else {
                printf("FAIL: %s [%s] output %d: rel-L2 %.3g (first non-finite %lld)\n",
                       c->label, ph[r], o, err, (long long)bad);
                g_fail++;
            }
        }
    }
out:
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
        for (int v = 0; v < 4; v++) {
            fcase c;
            memset(&c, 0, sizeof c);
            c.dt = dt;
            int64_t R = rows[i], C = cols[i];
            if (v < 3) {
                bool rms = v == 1;
                c.kind = GG_FUSED_NORM_ACT;
                c.nin = rms ? 2 : 3;
                c.in[0] = d2(dt, R, C);
                c.in[1] = c.in[2] = d2(dt, C, 0);
                c.nout = c.ncheck = v == 2 ? 2 : 1;   /* v 2: h kept */
                c.out[0] = c.out[1] = d2(dt, R, C);
                c.attrs.v[0] = 1e-5;
                c.attrs.v[1] = rms;
                c.attrs.v[2] = v == 0 ? GG_ACT_GELU_TANH : v == 1 ? GG_ACT_SILU : GG_ACT_GELU_ERF;
                c.attrs.v[3] = 0;
                snprintf(c.label, sizeof c.label, "norm_act %s [%lld, %lld] %s%s", rms ? "rms" : "ln",
                         (long long)R, (long long)C, dtn(dt), v == 2 ? " h kept" : "");
            } else {
                c.kind = GG_FUSED_ADD_RMSNORM;
                c.nin = 3;
                c.in[0] = c.in[1] = d2(dt, R, C);
                c.in[2] = d2(dt, C, 0);
                c.nout = c.ncheck = 2;
                c.out[0] = c.out[1] = d2(dt, R, C);
                c.attrs.v[0] = 1e-6;
                snprintf(c.label, sizeof c.label, "add_rmsnorm [%lld, %lld] %s", (long long)R,
                         (long long)C, dtn(dt));
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
    for (int i = 0; i < 4; i++) {
        fcase c;
        memset(&c, 0, sizeof c);
        c.dt = dt;
        c.kind = GG_FUSED_GATE_UP;
        c.nin = 3;
        c.in[0] = d2(dt, gu[i].M, gu[i].K);
        c.in[1] = c.in[2] = d2(dt, gu[i].N, gu[i].K);
        c.nout = 3;
        c.ncheck = 1;
        c.out[0] = c.out[1] = c.out[2] = d2(dt, gu[i].M, gu[i].N);
        snprintf(c.label, sizeof c.label, "gate_up M%lld K%lld N%lld %s", (long long)gu[i].M,
                 (long long)gu[i].K, (long long)gu[i].N, dtn(dt));
        run(&c);
    }
}

static void chain_cases(gg_dtype dt)
{
    static const int64_t R[] = {1, 7}, C[] = {1024, 37};
    for (int i = 0; i < 2; i++) {
        fcase c;
        memset(&c, 0, sizeof c);
        c.dt = dt;
        c.kind = GG_FUSED_EW_CHAIN;
        c.nin = 4;
        c.in[0] = c.in[1] = c.in[3] = d2(dt, R[i], C[i]);
        c.in[2] = d2(dt, C[i], 0);   /* a row vector */
        c.nout = c.ncheck = 1;
        c.out[0] = d2(dt, R[i], C[i]);
        gg_ew_steps st = {6,
                          {GG_EW_ADD, GG_EW_GELU_ERF, GG_EW_MUL, GG_EW_SCALE, GG_EW_SILU_MUL_R,
                           GG_EW_SILU_MUL},
                          {1, 0, 2, 0, 3, 1}};
        c.attrs.v[0] = gg_ew_pack(&st);
        c.attrs.v[1] = -0.75;
        snprintf(c.label, sizeof c.label, "ew_chain [%lld, %lld] %s", (long long)R[i],
                 (long long)C[i], dtn(dt));
        run(&c);
    }
}

/* Row chains (gg_gpu_rowchain_launch) against gg_rowchain_run_cpu: stages
 * mixing layernorm and rmsnorm with every activation, some keeping h and
 * some not writing y (nothing reads it: the reference passes it through the
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
                if (hipMemcpy(dev[i], host[i], gg_desc_bytes(&ht[i]->desc),
                              hipMemcpyHostToDevice) != hipSuccess)
                    goto hip_fail;
            }
            gg_rowchain_run_cpu(&hc);
        }
        for (int i = 0; i < nb; i++)
            if (out[i] && hipMemset(dev[i], 0xff, gg_desc_bytes(&ht[i]->desc)) != hipSuccess)
                goto hip_fail;
        if (hipDeviceSynchronize() != hipSuccess)
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
            if (hipMemcpy(got, dev[i], gg_desc_bytes(&xd), hipMemcpyDeviceToHost) != hipSuccess)
                goto hip_fail;
            int64_t bad;
            double err = gt_rel_l2(got, host[i], dt, gg_desc_numel(&xd), &bad);
            if (err <= tolerance(dt)) {
                g_pass++;
            } else {
                printf("FAIL: %s [%s] output buffer %d: rel-L2 %.3g (first non-finite %lld)\n",
                       label, ph[r], i, err, (long long)bad);
                g_fail++;
            }
        }
    }
    goto out;
hip_fail:
    printf("FAIL: %s: HIP call failed\n", label);
    g_fail++;
out:
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
    }
    gg_gpu_ctx_destroy(g_ctx);
    (void)hipStreamDestroy(g_stream);
    printf("test_gpu_fused: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
