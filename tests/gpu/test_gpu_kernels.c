/* SPDX-License-Identifier: MIT */
/* GPU kernels against the CPU references: every row-wise and linear op of
 * the table in every floating dtype (the decode-step ops, with their i32
 * operands and shapes of their own, are test_gpu_decode.c's), on fresh random inputs with odd sizes and misaligned operands, launched
 * eagerly and inside a captured graph (replayed twice, the second time on new
 * inputs).  Outputs are poisoned with NaN before each run.  Needs a device:
 * without one it prints SKIP and returns 77 (ctest SKIP_RETURN_CODE).
 *
 * Tolerance, rel-L2 of the output against the reference: f32 1e-5 (linear
 * through cuBLAS runs pedantic f32, no TF32), f16 2e-3, bf16 1e-2. */
#include "gg_hip.h"
#include "gpu_compare.h"
#include "gpu_ops.h"
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static gg_gpu_ctx *g_ctx;
static hipStream_t g_stream;
static int g_sms = 132; /* the device's multiprocessors, when it says */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void failf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    g_fail++;
}

#define HIP_OK(call)                                                                    \
    do {                                                                                \
        hipError_t e_ = (call);                                                         \
        if (e_ != hipSuccess) {                                                         \
            failf("%s:%d: %s: %s", __FILE__, __LINE__, #call, hipGetErrorString(e_));  \
            goto out;                                                                   \
        }                                                                               \
    } while (0)

static float frand(float lo, float hi)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 40) * (1.0 / 16777216.0));
}

static double tolerance(gg_dtype dt)
{
    return dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 2e-3 : 1e-2;
}

/* ---- one case ------------------------------------------------------------- */

typedef struct {
    const gg_op_def *op;
    gg_dtype dt;
    int nin;
    gg_tensor_desc in[GG_MAX_OPERANDS];
    gg_tensor_desc out;
    gg_op_attrs attrs;
    int misalign;             /* offset every device operand by one element */
    gg_gpu_linear_mode lmode; /* linear only */
    float lo, hi;             /* input range */
    char label[128];
} tcase;

static gg_tensor_desc mkdesc(gg_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    gg_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = dt;
    d.ndim = ndim;
    d.dims[0] = d0;
    d.dims[1] = d1;
    d.dims[2] = d2;
    return d;
}

static void fill_random(void *h, gg_dtype dt, int64_t n, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++)
        gg_store(h, dt, i, frand(lo, hi));
}

static int compare(const tcase *c, const char *phase, const void *got, const void *ref)
{
    int64_t n = gg_desc_numel(&c->out), bad;
    double err = gt_rel_l2(got, ref, c->dt, n, &bad);
    if (err <= tolerance(c->dt)) {
        g_pass++;
        return 0;
    }
    char d[192];
    if (bad >= 0)
        failf("%s [%s]: non-finite output at %lld (%g, reference %g)", c->label, phase,
              (long long)bad, gg_load(got, c->dt, bad), gg_load(ref, c->dt, bad));
    else
        failf("%s [%s]: rel-L2 %.3g > %.1g; the farthest at %s", c->label, phase, err,
              tolerance(c->dt),
              gt_diff_str(d, sizeof d, got, ref, c->dt, gt_farthest(got, ref, c->dt, n)));
    return -1;
}

static void run_case(tcase *c)
{
    const size_t es = gg_dtype_size(c->dt);
    const size_t off = c->misalign ? es : 0;
    void *h_in[GG_MAX_OPERANDS] = {0}, *d_buf[GG_MAX_OPERANDS] = {0};
    void *h_ref = NULL, *h_out = NULL, *d_out = NULL;
    gg_tensor hin[GG_MAX_OPERANDS], hout, din[GG_MAX_OPERANDS], dout;
    hipGraph_t graph = NULL;
    hipGraphExec_t exec = NULL;
    char err[256];
    const size_t out_bytes = gg_desc_bytes(&c->out);

    for (int i = 0; i < c->nin; i++)
        c->in[i].dtype = c->dt;
    c->out.dtype = c->dt;
    if (c->op->check(c->op, c->in, c->nin, &c->out, 1, &c->attrs, err, sizeof err) != 0) {
        failf("%s: the op table refuses the test's shapes: %s", c->label, err);
        return;
    }

    for (int i = 0; i < c->nin; i++) {
        size_t bytes = gg_desc_bytes(&c->in[i]);
        h_in[i] = malloc(bytes);
        if (!h_in[i]) {
            failf("%s: out of host memory", c->label);
            goto out;
        }
        HIP_OK(hipMalloc(&d_buf[i], bytes + 16));
        hin[i].data = h_in[i];
        hin[i].desc = c->in[i];
        din[i].data = (char *)d_buf[i] + off;
        din[i].desc = c->in[i];
    }
    h_ref = malloc(out_bytes);
    h_out = malloc(out_bytes);
    if (!h_ref || !h_out) {
        failf("%s: out of host memory", c->label);
        goto out;
    }
    HIP_OK(hipMalloc(&d_out, out_bytes + 16));
    hout.data = h_ref;
    hout.desc = c->out;
    dout.data = (char *)d_out + off;
    dout.desc = c->out;

    /* Three runs: eager, graph replay, graph replay on new inputs.  Every
     * copy and memset is queued on the context's stream, the one the kernel
     * runs on: that stream is non-blocking, so a plain hipMemcpy or hipMemset
     * (the legacy default stream) is not ordered before the kernel, and a
     * pageable hipMemcpy may return with its last DMA still in flight.  The
     * host inputs are refilled only after the previous run's synchronize. */
    for (int run = 0; run < 3; run++) {
        if (run != 1) { /* fresh inputs and their reference */
            for (int i = 0; i < c->nin; i++) {
                fill_random(h_in[i], c->dt, gg_desc_numel(&c->in[i]), c->lo, c->hi);
                HIP_OK(hipMemcpyAsync(din[i].data, h_in[i], gg_desc_bytes(&c->in[i]),
                                      hipMemcpyHostToDevice, g_stream));
            }
            gg_ops_run_cpu(c->op, hin, c->nin, &hout, 1, &c->attrs);
        }
        HIP_OK(hipMemsetAsync(d_out, 0xff, out_bytes + 16, g_stream)); /* NaN in every dtype */
        if (run == 1) /* done before the capture begins: the graph holds only the op */
            HIP_OK(hipStreamSynchronize(g_stream));
        if (run == 0) {
            int rc = gg_gpu_op_launch(g_ctx, c->op, din, c->nin, &dout, 1, &c->attrs);
            if (rc) {
                failf("%s [eager]: launch: %d %s", c->label, rc, gg_gpu_last_error());
                goto out;
            }
        } else {
            if (run == 1) {
                HIP_OK(hipStreamBeginCapture(g_stream, hipStreamCaptureModeThreadLocal));
                int rc = gg_gpu_op_launch(g_ctx, c->op, din, c->nin, &dout, 1, &c->attrs);
                hipError_t e = hipStreamEndCapture(g_stream, &graph);
                if (rc || e != hipSuccess) {
                    failf("%s [capture]: launch %d (%s), end capture %s", c->label, rc,
                          gg_gpu_last_error(), hipGetErrorString(e));
                    goto out;
                }
                size_t nodes = 0;
                HIP_OK(hipGraphGetNodes(graph, NULL, &nodes));
                if (nodes < 1) {
                    failf("%s [capture]: the graph is empty", c->label);
                    goto out;
                }
                HIP_OK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0));
            }
            HIP_OK(hipGraphLaunch(exec, g_stream));
        }
        HIP_OK(hipMemcpyAsync(h_out, dout.data, out_bytes, hipMemcpyDeviceToHost, g_stream));
        HIP_OK(hipStreamSynchronize(g_stream));
        static const char *const phase[3] = {"eager", "graph", "graph, new inputs"};
        if (compare(c, phase[run], h_out, h_ref))
            break;
    }

out:
    (void)hipStreamSynchronize(g_stream); /* no copy left reading the host buffers freed here */
    (void)hipGetLastError();
    if (exec)
        (void)hipGraphExecDestroy(exec);
    if (graph)
        (void)hipGraphDestroy(graph);
    for (int i = 0; i < c->nin; i++) {
        free(h_in[i]);
        if (d_buf[i])
            (void)hipFree(d_buf[i]);
    }
    free(h_ref);
    free(h_out);
    if (d_out)
        (void)hipFree(d_out);
}

/* ---- cases per op ---------------------------------------------------------- */

typedef struct {
    int64_t rows, cols;
} shape2;

/* odd and even, 1-D and 2-D, rows that span several blocks, rows longer than
 * one block can cover in a pass; between them every geometry of the row
 * kernels (a row per warp, per block with registers, streamed) with one and
 * several units per thread */
static const shape2 row_shapes[] = {
    {0, 1}, {0, 1000}, {1, 1024}, {3, 7}, {17, 33}, {5, 4099}, {64, 256}, {2, 20000}, {3, 12288},
    {9, 40}, {4, 32000}, {3, 4096},
};
#define NSHAPES (sizeof row_shapes / sizeof row_shapes[0])

static void set_label(tcase *c, const char *extra)
{
    char shp[64];
    size_t n = 0;
    const gg_tensor_desc *d = &c->in[0];
    for (int i = 0; i < d->ndim; i++)
        n += (size_t)snprintf(shp + n, sizeof shp - n, "%s%lld", i ? "x" : "",
                              (long long)d->dims[i]);
    snprintf(c->label, sizeof c->label, "%s %s [%s]%s%s", c->op->name, gg_dtype_name(c->dt), shp,
             c->misalign ? " misaligned" : "", extra ? extra : "");
}

static gg_tensor_desc row_desc(gg_dtype dt, shape2 s)
{
    return s.rows == 0 ? mkdesc(dt, 1, s.cols, 0, 0) : mkdesc(dt, 2, s.rows, s.cols, 0);
}

static void cases_rowwise(const gg_op_def *op, gg_dtype dt)
{
    const char *name = op->name;
    for (size_t si = 0; si < NSHAPES; si++) {
        for (int mis = 0; mis < 2; mis++) {
            shape2 s = row_shapes[si];
            if (mis && si % 2 == 0) /* misaligned on half the shapes */
                continue;
            tcase c;
            memset(&c, 0, sizeof c);
            c.op = op;
            c.dt = dt;
            c.misalign = mis;
            c.lo = -2.0f;
            c.hi = 2.0f;
            gg_ops_attr_defaults(op, &c.attrs);
            gg_tensor_desc x = row_desc(dt, s);
            c.in[0] = x;
            c.out = x;
            c.nin = op->nin_min;
            const char *extra = NULL;
            if (!strcmp(name, "add") || !strcmp(name, "mul") || !strcmp(name, "silu_mul")) {
                c.in[1] = x;
                /* add/mul: row-vector broadcast on every other shape */
                if (strcmp(name, "silu_mul") != 0 && si % 2 == 1) {
                    c.in[1] = mkdesc(dt, 1, s.cols, 0, 0);
                    extra = " broadcast";
                }
            } else if (!strcmp(name, "layernorm") || !strcmp(name, "rmsnorm")) {
                c.in[1] = mkdesc(dt, 1, s.cols, 0, 0);
                c.in[2] = mkdesc(dt, 1, s.cols, 0, 0);
                c.attrs.v[gg_ops_attr_index(op, "eps")] = si % 2 ? 1e-5 : 1e-3;
            } else if (!strcmp(name, "scale")) {
                c.attrs.v[gg_ops_attr_index(op, "scale")] = 0.37 + (double)si;
            } else if (!strcmp(name, "softmax")) {
                c.lo = -6.0f;
                c.hi = 6.0f;
            }
            set_label(&c, extra);
            if (!strcmp(name, "gelu")) {
                int ai = gg_ops_attr_index(op, "approximate");
                for (int a = 0; a < 2; a++) {
                    c.attrs.v[ai] = a;
                    set_label(&c, a ? " tanh" : " erf");
                    run_case(&c);
                }
            } else {
                run_case(&c);
            }
            if (!strcmp(name, "softmax")) {
                /* far from 0: the row maximum times log2(e) is rounded in
                 * the exp2 form, the same for every element of a row */
                c.lo = 1000.0f;
                c.hi = 1012.0f;
                set_label(&c, " offset 1000");
                run_case(&c);
            }
        }
    }
}

/* The elementwise kernels take larger blocks once every multiprocessor gets
 * four of them (16384 f16 elements a multiprocessor, 8192 in f32 and for
 * the erf GELU: 2.2M f16 elements on 132): 5/4 of that for this device and
 * at least 3M elements, odd, so the last block also does a tail past the
 * last whole vector (left unwritten it stays the NaN the output was
 * poisoned with). */
static void cases_elementwise_large(const gg_op_def *op, gg_dtype dt)
{
    static const char *const ew[] = {"copy", "add", "mul", "scale", "gelu", "silu", "silu_mul"};
    int is_ew = 0;
    for (size_t i = 0; i < sizeof ew / sizeof ew[0]; i++)
        is_ew |= !strcmp(op->name, ew[i]);
    if (!is_ew)
        return;
    int64_t large_cols = (int64_t)g_sms * 16384 * 5 / 4 / 3;
    if (large_cols < 1000001)
        large_cols = 1000001;
    large_cols |= 1;
    tcase c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.dt = dt;
    c.lo = -2.0f;
    c.hi = 2.0f;
    gg_ops_attr_defaults(op, &c.attrs);
    c.nin = op->nin_min;
    for (int i = 0; i < c.nin; i++)
        c.in[i] = mkdesc(dt, 2, 3, large_cols, 0);
    c.out = c.in[0];
    if (!strcmp(op->name, "scale"))
        c.attrs.v[gg_ops_attr_index(op, "scale")] = -1.37;
    if (!strcmp(op->name, "gelu")) {
        for (int a = 0; a < 2; a++) {
            c.attrs.v[gg_ops_attr_index(op, "approximate")] = a;
            set_label(&c, a ? " tanh" : " erf");
            run_case(&c);
        }
    } else {
        set_label(&c, NULL);
        run_case(&c);
    }
}

static void cases_linear(const gg_op_def *op, gg_dtype dt)
{
    static const struct {
        int64_t m, k, n;
    } shapes[] = {
        /* own kernels: small-M (row groups of 16 from 9 rows) up to 16 rows in
         * f32 and 64 in f16/bf16, tiled GEMM above; cuBLAS from 2 rows in auto
         * mode; f16/bf16 up to 16 rows: the tensor-core kernel on NVIDIA */
        {1, 1024, 1024}, {1, 77, 45},     {3, 64, 130},    {8, 1000, 24},
        {15, 256, 96},   {16, 256, 96},   {33, 100, 70},   {64, 512, 256},
        {130, 72, 200},  {100, 45, 7},    {256, 512, 320},
        /* the tensor-core small-M kernel (f16/bf16, K a multiple of 8): a K
         * tail past the last 64, N not a multiple of 16, K shorter than the
         * block's 8 warps need, 9..16 rows (two mma per k-slice) */
        {12, 4104, 37},  {9, 8, 5},       {2, 520, 2000},  {5, 4096, 48},
        /* f32 on sm_90, the clustered split-K kernel (and above from 8
         * rows): 8..32 rows in auto and own mode, 33..64 in own (two row
         * groups); odd K and N, a K tail, K under one slice a rank, the
         * MLP's shapes */
        {17, 1000, 300}, {31, 77, 45},    {32, 1024, 4096}, {33, 513, 129},
        {48, 20, 2050},  {64, 4096, 1024}, {31, 4095, 33},
    };
    static const gg_gpu_linear_mode modes[] = {GG_GPU_LINEAR_AUTO, GG_GPU_LINEAR_OWN,
                                               GG_GPU_LINEAR_BLAS};
    static const char *const mode_names[] = {"auto", "own", "blas"};
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
        if (gg_gpu_ctx_set_linear_mode(g_ctx, modes[mi]) != 0)
            continue; /* no vendor BLAS in this build */
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            for (int bias = 0; bias < 2; bias++) {
                tcase c;
                memset(&c, 0, sizeof c);
                c.op = op;
                c.dt = dt;
                c.lo = -1.0f;
                c.hi = 1.0f;
                c.misalign = (si + (size_t)bias) % 3 == 2;
                c.nin = bias ? 3 : 2;
                c.in[0] = mkdesc(dt, 2, shapes[si].m, shapes[si].k, 0);
                if (si == 3) /* 3-D x: rows are the leading dims */
                    c.in[0] = mkdesc(dt, 3, 2, 4, shapes[si].k);
                c.in[1] = mkdesc(dt, 2, shapes[si].n, shapes[si].k, 0);
                c.in[2] = mkdesc(dt, 1, shapes[si].n, 0, 0);
                c.out = c.in[0];
                c.out.dims[c.out.ndim - 1] = shapes[si].n;
                gg_ops_attr_defaults(op, &c.attrs);
                char extra[48];
                snprintf(extra, sizeof extra, " n=%lld%s %s", (long long)shapes[si].n,
                         bias ? " +b" : "", mode_names[mi]);
                set_label(&c, extra);
                run_case(&c);
            }
        }
    }
    gg_gpu_ctx_set_linear_mode(g_ctx, GG_GPU_LINEAR_AUTO);
}

/* The launcher refuses what it cannot run in bounds. */
/* The activations at values random inputs in [-2, 2] never reach: +-inf,
 * NaN, huge and far-negative finite values, element by element against the
 * cpu reference in f32 (the kernels' math is f32 in every dtype).  NaN must
 * stay NaN, an infinity the same infinity; a finite result within 1e-3
 * relative or 1e-6 absolute.  The list repeats to past a few thousand
 * elements so the vector path runs, not only the tail. */
static void check_special_values(void)
{
    static const float vals[] = {INFINITY, -INFINITY, NAN, 1e20f, -1e20f, 88.0f, -88.0f,
                                 -5.0f, -10.0f, -4.5f, 0.0f, -0.0f, 1e-30f, 3.0f, -3.0f, 20.0f};
    const int nv = (int)(sizeof vals / sizeof vals[0]), n = nv * 257;
    static const struct {
        const char *op;
        int approximate; /* gelu: 0 erf, 1 tanh; else -1 */
    } cases[] = {{"gelu", 0}, {"gelu", 1}, {"silu", -1}, {"silu_mul", -1}};
    float *hx = malloc(n * sizeof(float)), *hb = malloc(n * sizeof(float));
    float *href = malloc(n * sizeof(float)), *hy = malloc(n * sizeof(float));
    void *dx = NULL, *db = NULL, *dy = NULL;
    if (!hx || !hb || !href || !hy) {
        failf("special values: out of host memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        hx[i] = vals[i % nv];
        hb[i] = 1.0f;
    }
    /* x and b on the kernels' stream (non-blocking: a plain hipMemcpy is not
     * ordered before them) */
    if (hipMalloc(&dx, n * sizeof(float)) != hipSuccess ||
        hipMalloc(&db, n * sizeof(float)) != hipSuccess ||
        hipMalloc(&dy, n * sizeof(float)) != hipSuccess ||
        hipMemcpyAsync(dx, hx, n * sizeof(float), hipMemcpyHostToDevice, g_stream) != hipSuccess ||
        hipMemcpyAsync(db, hb, n * sizeof(float), hipMemcpyHostToDevice, g_stream) != hipSuccess) {
        failf("special values: device memory");
        goto out;
    }
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const gg_op_def *op = gg_ops_find(cases[k].op);
        gg_op_attrs attrs;
        gg_ops_attr_defaults(op, &attrs);
        if (cases[k].approximate >= 0)
            attrs.v[gg_ops_attr_index(op, "approximate")] = cases[k].approximate;
        gg_tensor hin[2], hout, din[2], dout;
        const int nin = op->nin_min;
        for (int i = 0; i < 2; i++) {
            hin[i].desc = din[i].desc = mkdesc(GG_DT_F32, 1, n, 0, 0);
            hin[i].data = i ? hb : hx;
            din[i].data = i ? db : dx;
        }
        hout.desc = dout.desc = hin[0].desc;
        hout.data = href;
        dout.data = dy;
        gg_ops_run_cpu(op, hin, nin, &hout, 1, &attrs);
        /* y as NaN first: the previous op's output left in it is no result */
        int rc = hipMemsetAsync(dy, 0xff, n * sizeof(float), g_stream) != hipSuccess
                     ? -1
                     : gg_gpu_op_launch(g_ctx, op, din, nin, &dout, 1, &attrs);
        if (rc || hipMemcpyAsync(hy, dy, n * sizeof(float), hipMemcpyDeviceToHost, g_stream) !=
                      hipSuccess ||
            hipStreamSynchronize(g_stream) != hipSuccess) {
            failf("special values %s: launch %d %s", cases[k].op, rc, gg_gpu_last_error());
            continue;
        }
        int bad = 0;
        for (int i = 0; i < n && bad < 4; i++) {
            const float g = hy[i], r = href[i];
            bool ok = isnan(r) ? isnan(g)
                      : isinf(r) ? g == r
                                 : isfinite(g) && fabsf(g - r) <= 1e-3f * fabsf(r) + 1e-6f;
            if (!ok) {
                failf("special values %s%s: x = %g gives %g, the cpu reference %g", cases[k].op,
                      cases[k].approximate == 1 ? " tanh" : "", (double)hx[i], (double)g,
                      (double)r);
                bad++;
            }
        }
        if (!bad)
            g_pass++;
    }
out:
    (void)hipStreamSynchronize(g_stream); /* no copy left reading hx and hb */
    (void)hipFree(dx);
    (void)hipFree(db);
    (void)hipFree(dy);
    free(hx);
    free(hb);
    free(href);
    free(hy);
}

static void check_refusals(void)
{
    const gg_op_def *add = gg_ops_find("add");
    char dummy[16];
    gg_tensor in[2], out;
    memset(in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in[0].data = in[1].data = out.data = dummy;
    in[0].desc = mkdesc(GG_DT_F32, 1, 4, 0, 0);
    in[1].desc = mkdesc(GG_DT_F16, 1, 4, 0, 0);
    out.desc = mkdesc(GG_DT_F32, 1, 4, 0, 0);
    int rc = gg_gpu_op_launch(g_ctx, add, in, 2, &out, 1, NULL);
    if (rc == -EINVAL)
        g_pass++;
    else
        failf("add with mixed dtypes: expected -EINVAL, got %d", rc);
    in[1].desc = mkdesc(GG_DT_F32, 1, 3, 0, 0);
    rc = gg_gpu_op_launch(g_ctx, add, in, 2, &out, 1, NULL);
    if (rc == -EINVAL)
        g_pass++;
    else
        failf("add with a b that does not broadcast to a: expected -EINVAL, got %d", rc);
}

int main(void)
{
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n < 1) {
        printf("SKIP: no GPU device (hipGetDeviceCount: %s)\n",
               e != hipSuccess ? hipGetErrorString(e) : "0 devices");
        return 77;
    }
    char arch[32], rt[64];
    hipDeviceProp_t prop;
    if (hipGetDeviceProperties(&prop, 0) != hipSuccess)
        strcpy(prop.name, "?");
    else if (prop.multiProcessorCount > 0)
        g_sms = prop.multiProcessorCount;
    gg_hip_arch_name(0, arch, sizeof arch);
    gg_hip_runtime_string(rt, sizeof rt);
    printf("device: %s (%s), %s, %s, BLAS %s\n", prop.name, arch, rt, gg_gpu_platform(),
           gg_gpu_blas());

    if ((e = hipStreamCreateWithFlags(&g_stream, hipStreamNonBlocking)) != hipSuccess) {
        printf("FAIL: hipStreamCreateWithFlags: %s\n0 passed, 1 failed\n", hipGetErrorString(e));
        return 1;
    }
    int rc = gg_gpu_ctx_create(g_stream, &g_ctx);
    if (rc) {
        printf("FAIL: gg_gpu_ctx_create: %d %s\n0 passed, 1 failed\n", rc, gg_gpu_last_error());
        return 1;
    }

    /* ops with their own GPU tests (test_gpu_decode.c, test_gpu_movement.c) */
    static const char *const decode_ops[] = {"embedding", "rope", "cache_write",
                                             "attention_decode", "argmax", "cast",
                                             "strided_copy", "cat", "index_copy", "bmm", "sdpa"};
    for (int i = 0; i < gg_ops_count(); i++) {
        const gg_op_def *op = gg_ops_at(i);
        bool decode = false;
        for (size_t k = 0; k < sizeof(decode_ops) / sizeof(decode_ops[0]); k++)
            decode |= strcmp(op->name, decode_ops[k]) == 0;
        /* the newer elementwise ops and the reductions: test_gpu_elementwise.c */
        const bool older_ew = op->id == GG_OP_COPY || op->id == GG_OP_ADD ||
                              op->id == GG_OP_MUL || op->id == GG_OP_SCALE ||
                              op->id == GG_OP_GELU || op->id == GG_OP_SILU ||
                              op->id == GG_OP_SILU_MUL;
        if (decode || op->family == GG_FAM_REDUCE ||
            (op->family == GG_FAM_ELEMENTWISE && !older_ew))
            continue;
        for (int dt = 0; dt < GG_DT_COUNT; dt++) {
            if (!gg_dtype_is_float((gg_dtype)dt))   /* no row-wise or linear op takes it */
                continue;
            int before_fail = g_fail, before_pass = g_pass;
            if (!gg_gpu_op_supported(op, (gg_dtype)dt)) {
                failf("%s %s: no GPU kernel", op->name, gg_dtype_name((gg_dtype)dt));
                continue;
            }
            if (!strcmp(op->name, "linear"))
                cases_linear(op, (gg_dtype)dt);
            else if (op->nout == 1) {
                cases_rowwise(op, (gg_dtype)dt);
                cases_elementwise_large(op, (gg_dtype)dt);
            }
            if (g_pass == before_pass && g_fail == before_fail)
                failf("%s %s: the test has no cases for this op", op->name,
                      gg_dtype_name((gg_dtype)dt));
            printf("%-10s %-4s %d passed, %d failed\n", op->name, gg_dtype_name((gg_dtype)dt),
                   g_pass - before_pass, g_fail - before_fail);
        }
    }
    check_refusals();
    check_special_values();

    gg_gpu_ctx_destroy(g_ctx);
    (void)hipStreamDestroy(g_stream);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
