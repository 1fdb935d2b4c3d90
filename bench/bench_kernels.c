/* SPDX-License-Identifier: MIT */
/* Per-op device time and achieved bandwidth of the project's kernels, beside
 * the device-to-device copy ceiling measured in the same run.
 *
 *   bench_kernels [--json PATH] [--only SUBSTR[|SUBSTR...]] [--trials N] [--commit SHA]
 *
 * Every case is one op at one shape (f16 unless named): the memory-bound ops
 * at sizes past the L2 cache, linear at decode batches (1..16 rows) for
 * 4096x4096 and 11008x4096 weights, linear in f32 at 8..64 rows for the MLP
 * weights (1024 <-> 4096, 2048 <-> 8192; AUTO beside cuBLAS), attention_decode
 * at the 1B-class decode shape and past L2, each beside a read_ceiling row:
 * one plain kernel (gg_gpu_read_probe) reading the same K and V bytes,
 * rotated the same way, the least any kernel reading them takes here.  A case
 * whose operands fit in twice the L2 cache gets
 * several copies of them and the launches rotate over the copies, so each
 * launch reads cold memory as a real decode step does (one layer's weights or
 * cache after the others').  R launches are captured in one graph; each of
 * --trials graph replays is timed with events and the case's time is the
 * median replay over R.  GB/s counts the fewest bytes the op must move (each
 * input read once, each output written once; linear: the weights, as the
 * target is stated; attention_decode: K and V over lens).  The ceiling: a
 * 256 MiB hipMemcpyAsync device to device, read + write bytes.
 *
 * bench/bench_kernels.py runs this program and PyTorch's kernels for the
 * same cases in the same device command and writes the combined JSON.
 * Measures only; nothing is asserted.  Without a device: SKIP, exit 0. */
#include "gg_hip.h"
#include "gpu_ops.h"
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#define MAX_SETS 16
#define MAX_CASES 192

typedef enum { I_RAND, I_IDS, I_POS, I_LENS } fill_kind;

typedef struct {
    char name[48];    /* op name plus variant */
    char shape[96];   /* human-readable shape */
    const gg_op_def *op;
    int nin;
    gg_tensor_desc in[GG_MAX_OPERANDS];
    fill_kind fill[GG_MAX_OPERANDS];
    int64_t fill_max[GG_MAX_OPERANDS]; /* ids: V; positions: S; lens: the value */
    gg_tensor_desc out;
    gg_op_attrs attrs;
    int linear_mode;  /* linear: gg_gpu_linear_mode */
    int probe;        /* the read ceiling: in[0] and in[1] read by gg_gpu_read_probe */
    double bytes;     /* counted bytes per launch */
    const char *counted;
    /* results */
    int nsets, reps;
    double us, us_min, gbs;
    int rc;
    char err[160];
} bcase;

static bcase g_cases[MAX_CASES];
static int g_ncases;
static hipStream_t g_stream;
static gg_gpu_ctx *g_ctx;
static size_t g_l2;
static const char *g_only;

static gg_tensor_desc D(gg_dtype dt, int nd, int64_t a, int64_t b, int64_t c, int64_t d)
{
    gg_tensor_desc x;
    memset(&x, 0, sizeof x);
    x.dtype = dt;
    x.ndim = nd;
    x.dims[0] = a;
    x.dims[1] = b;
    x.dims[2] = c;
    x.dims[3] = d;
    return x;
}

/* --only: a case runs when its name or shape holds one of the '|'-separated
 * substrings (shapes hold commas, so '|'). */
static int only_match(const char *name, const char *shape)
{
    for (const char *s = g_only; *s;) {
        const char *e = strchr(s, '|');
        const size_t len = e ? (size_t)(e - s) : strlen(s);
        char sub[96];
        if (len > 0 && len < sizeof sub) {
            memcpy(sub, s, len);
            sub[len] = '\0';
            if (strstr(name, sub) || strstr(shape, sub))
                return 1;
        }
        if (!e)
            break;
        s = e + 1;
    }
    return 0;
}

static bcase *add_case(const char *op, const char *variant, const char *shape)
{
    if (g_ncases >= MAX_CASES)
        return NULL;
    char name[48];
    snprintf(name, sizeof name, "%s%s%s", op, variant ? ":" : "", variant ? variant : "");
    if (g_only && !only_match(name, shape))
        return NULL;
    bcase *c = &g_cases[g_ncases++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->shape, sizeof c->shape, "%s", shape);
    c->op = gg_ops_find(op);
    if (c->op)
        gg_ops_attr_defaults(c->op, &c->attrs);
    c->counted = "inputs read + outputs written";
    return c;
}

static double bytes_of(const gg_tensor_desc *d)
{
    return (double)gg_desc_bytes(d);
}

/* y = f(x) or f(a, b) on [rows, cols] of dt */
static void ew_case(const char *op, const char *variant, int nin, int64_t rows, int64_t cols,
                    int attr_gelu_tanh, gg_dtype dt)
{
    char shape[96];
    snprintf(shape, sizeof shape, "[%lld, %lld] %s", (long long)rows, (long long)cols,
             gg_dtype_name(dt));
    bcase *c = add_case(op, variant, shape);
    if (!c)
        return;
    c->nin = nin;
    for (int i = 0; i < nin; i++)
        c->in[i] = D(dt, 2, rows, cols, 0, 0);
    c->out = D(dt, 2, rows, cols, 0, 0);
    if (attr_gelu_tanh)
        c->attrs.v[gg_ops_attr_index(c->op, "approximate")] = 1;
    c->bytes = (nin + 1) * bytes_of(&c->out);
}

static void norm_case(const char *op, int64_t rows, int64_t cols)
{
    char shape[96];
    snprintf(shape, sizeof shape, "[%lld, %lld] f16", (long long)rows, (long long)cols);
    bcase *c = add_case(op, NULL, shape);
    if (!c)
        return;
    const int ln = strcmp(op, "layernorm") == 0;
    c->nin = ln ? 3 : 2;
    c->in[0] = D(GG_DT_F16, 2, rows, cols, 0, 0);
    c->in[1] = D(GG_DT_F16, 1, cols, 0, 0, 0);
    c->in[2] = D(GG_DT_F16, 1, cols, 0, 0, 0);
    c->out = c->in[0];
    c->bytes = 2 * bytes_of(&c->out) + (c->nin - 1) * bytes_of(&c->in[1]);
}

static void softmax_case(int64_t rows, int64_t cols)
{
    char shape[96];
    snprintf(shape, sizeof shape, "[%lld, %lld] f16", (long long)rows, (long long)cols);
    bcase *c = add_case("softmax", NULL, shape);
    if (!c)
        return;
    c->nin = 1;
    c->in[0] = D(GG_DT_F16, 2, rows, cols, 0, 0);
    c->out = c->in[0];
    c->bytes = 2 * bytes_of(&c->out);
}

static void linear_case_dt(gg_dtype dt, int64_t m, int64_t n, int64_t k, int mode,
                           const char *variant)
{
    char shape[96];
    snprintf(shape, sizeof shape, "M %lld, N %lld, K %lld %s", (long long)m, (long long)n,
             (long long)k, gg_dtype_name(dt));
    bcase *c = add_case("linear", variant, shape);
    if (!c)
        return;
    c->nin = 2;
    c->in[0] = D(dt, 2, m, k, 0, 0);
    c->in[1] = D(dt, 2, n, k, 0, 0);
    c->out = D(dt, 2, m, n, 0, 0);
    c->linear_mode = mode;
    c->bytes = bytes_of(&c->in[1]);
    c->counted = "weights read";
}

static void linear_case(int64_t m, int64_t n, int64_t k, int mode, const char *variant)
{
    linear_case_dt(GG_DT_F16, m, n, k, mode, variant);
}

static void attention_case(int64_t b, int64_t hq, int64_t hkv, int64_t s, int64_t dh)
{
    char shape[96];
    snprintf(shape, sizeof shape, "B %lld, Hq %lld, Hkv %lld, S %lld, Dh %lld f16",
             (long long)b, (long long)hq, (long long)hkv, (long long)s, (long long)dh);
    bcase *c = add_case("attention_decode", NULL, shape);
    if (!c)
        return;
    c->nin = 4;
    c->in[0] = D(GG_DT_F16, 3, b, hq, dh, 0);
    c->in[1] = D(GG_DT_F16, 4, b, s, hkv, dh);
    c->in[2] = c->in[1];
    c->in[3] = D(GG_DT_I32, 1, b, 0, 0, 0);
    c->fill[3] = I_LENS;
    c->fill_max[3] = s;
    c->out = c->in[0];
    c->bytes = 2 * bytes_of(&c->in[1]);
    c->counted = "K and V read (lens = S)";
}

/* the elementwise ops on [rows, cols] of dt */
static void ew_cases(int64_t rows, int64_t cols, gg_dtype dt)
{
    ew_case("copy", NULL, 1, rows, cols, 0, dt);
    ew_case("add", NULL, 2, rows, cols, 0, dt);
    ew_case("mul", NULL, 2, rows, cols, 0, dt);
    ew_case("scale", NULL, 1, rows, cols, 0, dt);
    ew_case("gelu", "erf", 1, rows, cols, 0, dt);
    ew_case("gelu", "tanh", 1, rows, cols, 1, dt);
    ew_case("silu", NULL, 1, rows, cols, 0, dt);
    ew_case("silu_mul", NULL, 2, rows, cols, 0, dt);
}

/* The read ceiling beside an attention case: one plain kernel reading the
 * same K and V bytes (same sets, same rotation, same launches a graph), the
 * least any kernel reading them takes here (launch, DRAM latency, bytes). */
static void read_ceiling_case(int64_t b, int64_t hkv, int64_t s, int64_t dh)
{
    char shape[96];
    snprintf(shape, sizeof shape, "K+V of B %lld, Hkv %lld, S %lld, Dh %lld f16", (long long)b,
             (long long)hkv, (long long)s, (long long)dh);
    bcase *c = add_case("read_ceiling", NULL, shape);
    if (!c)
        return;
    c->probe = 1;
    c->nin = 2;
    c->in[0] = D(GG_DT_F16, 4, b, s, hkv, dh);
    c->in[1] = c->in[0];
    c->out = D(GG_DT_I32, 1, gg_gpu_read_probe_blocks(gg_desc_bytes(&c->in[0])), 0, 0, 0);
    c->bytes = 2 * bytes_of(&c->in[0]);
    c->counted = "K and V read";
}

static void add_cases(void)
{
    /* memory-bound ops past L2 (64 MiB and more per operand) */
    const int64_t R = 8192, C = 8192;
    ew_cases(R, C, GG_DT_F16);
    norm_case("rmsnorm", 16384, 4096);
    norm_case("layernorm", 16384, 4096);
    norm_case("rmsnorm", 65536, 1024);
    norm_case("layernorm", 65536, 1024);
    softmax_case(16384, 4096);
    softmax_case(2048, 32000);
    { /* embedding: 16384 ids into a [32000, 4096] table */
        bcase *c = add_case("embedding", NULL, "ids [16384], table [32000, 4096] f16");
        if (c) {
            c->nin = 2;
            c->in[0] = D(GG_DT_I32, 1, 16384, 0, 0, 0);
            c->fill[0] = I_IDS;
            c->fill_max[0] = 32000;
            c->in[1] = D(GG_DT_F16, 2, 32000, 4096, 0, 0);
            c->out = D(GG_DT_F16, 2, 16384, 4096, 0, 0);
            c->bytes = 2 * bytes_of(&c->out);
            c->counted = "rows read + written";
        }
    }
    { /* rope, neox, in place allowed but timed out of place */
        bcase *c = add_case("rope", NULL, "x [8192, 32, 128] f16");
        if (c) {
            c->nin = 2;
            c->in[0] = D(GG_DT_F16, 3, 8192, 32, 128, 0);
            c->in[1] = D(GG_DT_I32, 1, 8192, 0, 0, 0);
            c->fill[1] = I_POS;
            c->fill_max[1] = 4096;
            c->out = c->in[0];
            c->bytes = 2 * bytes_of(&c->out);
        }
    }
    { /* cache_write: 16384 rows of [8, 128] into a [16384, 4, 8, 128] cache */
        bcase *c = add_case("cache_write", NULL, "x [16384, 8, 128], cache S 4 f16");
        if (c) {
            c->nin = 2;
            c->in[0] = D(GG_DT_F16, 3, 16384, 8, 128, 0);
            c->in[1] = D(GG_DT_I32, 1, 16384, 0, 0, 0);
            c->fill[1] = I_POS;
            c->fill_max[1] = 4;
            c->out = D(GG_DT_F16, 4, 16384, 4, 8, 128);
            c->bytes = 2 * bytes_of(&c->in[0]);
            c->counted = "x read + its cache rows written";
        }
    }
    { /* argmax over a vocabulary */
        bcase *c = add_case("argmax", NULL, "[2048, 32000] f16");
        if (c) {
            c->nin = 1;
            c->in[0] = D(GG_DT_F16, 2, 2048, 32000, 0, 0);
            c->out = D(GG_DT_I32, 1, 2048, 0, 0, 0);
            c->bytes = bytes_of(&c->in[0]) + bytes_of(&c->out);
        }
    }
    { /* cast f16 -> f32 */
        bcase *c = add_case("cast", "f16->f32", "[8192, 8192]");
        if (c) {
            c->nin = 1;
            c->in[0] = D(GG_DT_F16, 2, R, C, 0, 0);
            c->out = D(GG_DT_F32, 2, R, C, 0, 0);
            c->bytes = bytes_of(&c->in[0]) + bytes_of(&c->out);
        }
    }
    /* attention_decode: the 1B-class decode shape (4 MiB of K+V at 2048: in
     * L2, so rotated over copies), and past L2 */
    attention_case(1, 32, 8, 512, 64);
    read_ceiling_case(1, 8, 512, 64);
    attention_case(1, 32, 8, 2048, 64);
    read_ceiling_case(1, 8, 2048, 64);
    attention_case(1, 32, 8, 32768, 64);
    read_ceiling_case(1, 8, 32768, 64);
    attention_case(16, 32, 8, 2048, 64);
    read_ceiling_case(16, 8, 2048, 64);
    attention_case(1, 32, 8, 2048, 128);
    read_ceiling_case(1, 8, 2048, 128);
    /* linear at decode batches */
    static const int64_t ms[] = {1, 2, 4, 8, 16};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        linear_case(ms[i], 4096, 4096, GG_GPU_LINEAR_AUTO, NULL);
        linear_case(ms[i], 11008, 4096, GG_GPU_LINEAR_AUTO, NULL);
    }
    /* the two ways AUTO chooses between, side by side */
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        linear_case(ms[i], 4096, 4096, GG_GPU_LINEAR_OWN, "own");
        linear_case(ms[i], 4096, 4096, GG_GPU_LINEAR_BLAS, "blas");
    }
    /* the elementwise ops in the other dtypes, and at an odd size (a scalar
     * tail past the last whole vector) */
    ew_cases(R, C, GG_DT_F32);
    ew_cases(R, C, GG_DT_BF16);
    ew_cases(R - 1, C + 1, GG_DT_F16);
    /* f32 (no TF32) at 8..64 rows, the MLP shapes (d 1024 and 2048, 4x
     * hidden): AUTO (the clustered split-K kernel from 8 to 32 rows) beside
     * cuBLAS */
    static const int64_t m32[] = {8, 12, 16, 17, 24, 32, 33, 48, 64};
    static const int64_t kn32[][2] = {{1024, 4096}, {4096, 1024}, {2048, 8192}, {8192, 2048}};
    for (size_t si = 0; si < sizeof kn32 / sizeof kn32[0]; si++)
        for (size_t i = 0; i < sizeof m32 / sizeof m32[0]; i++) {
            linear_case_dt(GG_DT_F32, m32[i], kn32[si][1], kn32[si][0], GG_GPU_LINEAR_AUTO,
                           "lin32-auto");
            linear_case_dt(GG_DT_F32, m32[i], kn32[si][1], kn32[si][0], GG_GPU_LINEAR_BLAS,
                           "lin32-blas");
        }
}

/* ---- device data ------------------------------------------------------------ */

static void *g_pool[GG_DT_NFLOAT]; /* random values of each floating dtype */
static size_t g_pool_bytes;

static int make_pools(void)
{
    const int64_t n = (int64_t)16 << 20; /* elements */
    uint64_t s = 0x243f6a8885a308d3ull;
    g_pool_bytes = (size_t)n * 4;
    void *h = malloc(g_pool_bytes);
    if (!h)
        return -1;
    for (int dt = 0; dt < GG_DT_NFLOAT; dt++) {
        for (int64_t i = 0; i < n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            const float v = -2.0f + 4.0f * (float)((s >> 40) * (1.0 / 16777216.0));
            gg_store(h, (gg_dtype)dt, i, v);
        }
        const size_t b = (size_t)n * gg_dtype_size((gg_dtype)dt);
        if (hipMalloc(&g_pool[dt], b) != hipSuccess ||
            hipMemcpy(g_pool[dt], h, b, hipMemcpyHostToDevice) != hipSuccess) {
            free(h);
            return -1;
        }
    }
    free(h);
    return 0;
}

static int fill_float(void *dst, gg_dtype dt, size_t bytes)
{
    const size_t pb = (size_t)(16 << 20) * gg_dtype_size(dt);
    for (size_t o = 0; o < bytes; o += pb) {
        const size_t n = bytes - o < pb ? bytes - o : pb;
        if (hipMemcpyAsync((char *)dst + o, g_pool[dt], n, hipMemcpyDeviceToDevice, g_stream) !=
            hipSuccess)
            return -1;
    }
    return 0;
}

static int fill_i32(void *dst, fill_kind k, int64_t max, int64_t n, uint64_t *s)
{
    int32_t *h = malloc(sizeof(int32_t) * (size_t)n);
    if (!h)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        h[i] = k == I_LENS ? (int32_t)max : (int32_t)((*s >> 33) % (uint64_t)max);
    }
    int rc = hipMemcpy(dst, h, sizeof(int32_t) * (size_t)n, hipMemcpyHostToDevice) == hipSuccess
                 ? 0
                 : -1;
    free(h);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- one case ---------------------------------------------------------------- */

static int launch(const bcase *c, const gg_tensor *in, const gg_tensor *out)
{
    if (c->probe)
        return gg_gpu_read_probe(g_ctx, in[0].data, in[1].data, gg_desc_bytes(&in[0].desc),
                                 out->data);
    return gg_gpu_op_launch(g_ctx, c->op, in, c->nin, out, 1, &c->attrs);
}

static void run_case(bcase *c, int trials)
{
    void *bufs[MAX_SETS][GG_MAX_OPERANDS + 1];
    memset(bufs, 0, sizeof bufs);
    hipGraph_t g = NULL;
    hipGraphExec_t ge = NULL;
    hipEvent_t e0 = NULL, e1 = NULL;
    double *t = NULL;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    c->rc = -1;
    if (!c->op && !c->probe) {
        snprintf(c->err, sizeof c->err, "no such op");
        return;
    }
    double foot = bytes_of(&c->out);
    for (int i = 0; i < c->nin; i++)
        foot += bytes_of(&c->in[i]);
    int nsets = (int)ceil(2.0 * (double)g_l2 / foot);
    if (nsets < 1)
        nsets = 1;
    if (nsets > MAX_SETS)
        nsets = MAX_SETS;
    c->nsets = nsets;
    int reps = c->bytes >= 64e6 ? 10 : c->bytes >= 4e6 ? 40 : 100;
    reps = (reps + nsets - 1) / nsets * nsets;
    c->reps = reps;
    if (gg_gpu_ctx_set_linear_mode(g_ctx, (gg_gpu_linear_mode)c->linear_mode) != 0) {
        snprintf(c->err, sizeof c->err, "linear mode: %s", gg_gpu_last_error());
        c->rc = 1;
        return;
    }
    for (int s = 0; s < nsets; s++) {
        for (int i = 0; i <= c->nin; i++) {
            const gg_tensor_desc *d = i < c->nin ? &c->in[i] : &c->out;
            if (hipMalloc(&bufs[s][i], gg_desc_bytes(d)) != hipSuccess) {
                snprintf(c->err, sizeof c->err, "hipMalloc %zu bytes", gg_desc_bytes(d));
                goto out;
            }
            int rc;
            if (d->dtype == GG_DT_I32)
                rc = i < c->nin ? fill_i32(bufs[s][i], c->fill[i], c->fill_max[i],
                                           gg_desc_numel(d), &seed)
                                : hipMemset(bufs[s][i], 0, gg_desc_bytes(d)) == hipSuccess ? 0 : -1;
            else
                rc = fill_float(bufs[s][i], d->dtype, gg_desc_bytes(d));
            if (rc) {
                snprintf(c->err, sizeof c->err, "filling operand %d", i);
                goto out;
            }
        }
    }
    if (hipStreamSynchronize(g_stream) != hipSuccess) {
        snprintf(c->err, sizeof c->err, "fill: %s", hipGetErrorString(hipGetLastError()));
        goto out;
    }
    /* eager once per set (cuBLAS picks its kernels outside capture) */
    for (int s = 0; s < nsets; s++) {
        gg_tensor in[GG_MAX_OPERANDS], out;
        for (int i = 0; i < c->nin; i++) {
            in[i].data = bufs[s][i];
            in[i].desc = c->in[i];
        }
        out.data = bufs[s][c->nin];
        out.desc = c->out;
        if (launch(c, in, &out) != 0) {
            snprintf(c->err, sizeof c->err, "launch: %s", gg_gpu_last_error());
            goto out;
        }
    }
    if (hipStreamSynchronize(g_stream) != hipSuccess) {
        snprintf(c->err, sizeof c->err, "eager run: %s", hipGetErrorString(hipGetLastError()));
        goto out;
    }
    if (hipStreamBeginCapture(g_stream, hipStreamCaptureModeThreadLocal) != hipSuccess) {
        snprintf(c->err, sizeof c->err, "begin capture");
        goto out;
    }
    int lrc = 0;
    for (int r = 0; r < reps && lrc == 0; r++) {
        const int s = r % nsets;
        gg_tensor in[GG_MAX_OPERANDS], out;
        for (int i = 0; i < c->nin; i++) {
            in[i].data = bufs[s][i];
            in[i].desc = c->in[i];
        }
        out.data = bufs[s][c->nin];
        out.desc = c->out;
        lrc = launch(c, in, &out);
    }
    if (hipStreamEndCapture(g_stream, &g) != hipSuccess || lrc ||
        hipGraphInstantiate(&ge, g, NULL, NULL, 0) != hipSuccess) {
        snprintf(c->err, sizeof c->err, "capture: %s", lrc ? gg_gpu_last_error() : "runtime");
        goto out;
    }
    t = malloc(sizeof(double) * (size_t)trials);
    if (!t || hipEventCreate(&e0) != hipSuccess || hipEventCreate(&e1) != hipSuccess)
        goto out;
    for (int w = 0; w < 2; w++) /* warm */
        (void)hipGraphLaunch(ge, g_stream);
    for (int i = 0; i < trials; i++) {
        float ms = 0;
        if (hipEventRecord(e0, g_stream) != hipSuccess || hipGraphLaunch(ge, g_stream) != hipSuccess ||
            hipEventRecord(e1, g_stream) != hipSuccess || hipEventSynchronize(e1) != hipSuccess ||
            hipEventElapsedTime(&ms, e0, e1) != hipSuccess) {
            snprintf(c->err, sizeof c->err, "timing: %s", hipGetErrorString(hipGetLastError()));
            goto out;
        }
        t[i] = ms * 1000.0 / reps;
    }
    qsort(t, (size_t)trials, sizeof *t, cmp_double);
    c->us = trials % 2 ? t[trials / 2] : 0.5 * (t[trials / 2 - 1] + t[trials / 2]);
    c->us_min = t[0];
    c->gbs = c->bytes / (c->us * 1e3);
    c->rc = 0;
out:
    (void)hipGetLastError();
    free(t);
    if (e0)
        (void)hipEventDestroy(e0);
    if (e1)
        (void)hipEventDestroy(e1);
    if (ge)
        (void)hipGraphExecDestroy(ge);
    if (g)
        (void)hipGraphDestroy(g);
    (void)hipStreamSynchronize(g_stream);
    for (int s = 0; s < MAX_SETS; s++)
        for (int i = 0; i <= GG_MAX_OPERANDS; i++)
            if (bufs[s][i])
                (void)hipFree(bufs[s][i]);
    gg_gpu_ctx_set_linear_mode(g_ctx, GG_GPU_LINEAR_AUTO);
}

/* The device-to-device copy rate: 256 MiB, read + write bytes, median of
 * trials. */
static double copy_ceiling(int trials, double *best)
{
    const size_t nb = (size_t)256 << 20;
    void *a = NULL, *b = NULL;
    double r = 0;
    hipEvent_t e0 = NULL, e1 = NULL;
    double *t = malloc(sizeof(double) * (size_t)trials);
    if (!t || hipMalloc(&a, nb) != hipSuccess || hipMalloc(&b, nb) != hipSuccess ||
        hipEventCreate(&e0) != hipSuccess || hipEventCreate(&e1) != hipSuccess ||
        fill_float(a, GG_DT_F32, nb) != 0)
        goto out;
    for (int w = 0; w < 3; w++)
        (void)hipMemcpyAsync(b, a, nb, hipMemcpyDeviceToDevice, g_stream);
    for (int i = 0; i < trials; i++) {
        float ms = 0;
        hipEventRecord(e0, g_stream);
        hipMemcpyAsync(b, a, nb, hipMemcpyDeviceToDevice, g_stream);
        hipEventRecord(e1, g_stream);
        hipEventSynchronize(e1);
        hipEventElapsedTime(&ms, e0, e1);
        t[i] = 2.0 * (double)nb / (ms * 1e6);
    }
    qsort(t, (size_t)trials, sizeof *t, cmp_double);
    r = t[trials / 2];
    *best = t[trials - 1];
out:
    free(t);
    if (e0)
        hipEventDestroy(e0);
    if (e1)
        hipEventDestroy(e1);
    if (a)
        hipFree(a);
    if (b)
        hipFree(b);
    return r;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void json_desc(FILE *f, const gg_tensor_desc *d)
{
    fprintf(f, "{\"dtype\": \"%s\", \"dims\": [", gg_dtype_name(d->dtype));
    for (int i = 0; i < d->ndim; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)d->dims[i]);
    fprintf(f, "]}");
}

int main(int argc, char **argv)
{
    const char *json = NULL, *commit = getenv("GFXGRAPH_GIT_COMMIT");
    int trials = 15;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            g_only = argv[++i];
        else if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc)
            commit = argv[++i];
        else {
            fprintf(stderr,
                    "usage: bench_kernels [--json PATH] [--only SUBSTR[|SUBSTR...]] [--trials N] "
                    "[--commit SHA]\n");
            return 64;
        }
    }
    if (trials < 3)
        trials = 3;
    int n = 0;
    if (hipGetDeviceCount(&n) != hipSuccess || n < 1) {
        printf("SKIP: no GPU device\n");
        return 0;
    }
    hipDeviceProp_t prop;
    int l2 = 0, drv = 0;
    char arch[32], rt[64];
    if (hipGetDeviceProperties(&prop, 0) != hipSuccess)
        strcpy(prop.name, "?");
    hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, 0);
    hipDriverGetVersion(&drv);
    g_l2 = l2 > 0 ? (size_t)l2 : (size_t)50 << 20;
    gg_hip_arch_name(0, arch, sizeof arch);
    gg_hip_runtime_string(rt, sizeof rt);
    if (hipStreamCreateWithFlags(&g_stream, hipStreamNonBlocking) != hipSuccess ||
        gg_gpu_ctx_create(g_stream, &g_ctx) != 0 || make_pools() != 0) {
        fprintf(stderr, "bench_kernels: setup failed: %s\n", gg_gpu_last_error());
        return 1;
    }
    add_cases();
    double copy_best = 0;
    const double copy = copy_ceiling(trials, &copy_best);
    printf("device: %s (%s), %s, driver API %d, %s, BLAS %s, L2 %zu bytes\n", prop.name, arch, rt,
           drv, gg_gpu_platform(), gg_gpu_blas(), g_l2);
    printf("copy ceiling (hipMemcpyAsync D2D 256 MiB, read + write): %.1f GB/s median, %.1f best\n",
           copy, copy_best);
    printf("%-22s %-44s %4s %4s %10s %10s %9s %7s\n", "op", "shape", "sets", "reps", "us",
           "us_min", "GB/s", "%copy");
    for (int i = 0; i < g_ncases; i++) {
        bcase *c = &g_cases[i];
        run_case(c, trials);
        if (c->rc == 0)
            printf("%-22s %-44s %4d %4d %10.2f %10.2f %9.1f %6.1f%%\n", c->name, c->shape,
                   c->nsets, c->reps, c->us, c->us_min, c->gbs, 100.0 * c->gbs / copy);
        else
            printf("%-22s %-44s %s\n", c->name, c->shape, c->rc > 0 ? "skipped" : c->err);
        fflush(stdout);
    }
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            perror(json);
            return 1;
        }
        char date[32];
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        struct utsname u;
        if (uname(&u) != 0)
            strcpy(u.nodename, "?");
        fprintf(f, "{\n  \"bench\": \"bench_kernels\",\n  \"provenance\": {\"date\": \"%s\", ",
                date);
        fprintf(f, "\"host\": ");
        json_str(f, u.nodename);
        fprintf(f, ", \"commit\": ");
        json_str(f, commit ? commit : "unknown");
        fprintf(f, ", \"device\": ");
        json_str(f, prop.name);
        fprintf(f, ", \"arch\": \"%s\", \"runtime\": \"%s\", \"driver_api\": %d, "
                   "\"platform\": \"%s\", \"blas\": \"%s\", \"l2_bytes\": %zu},\n",
                arch, rt, drv, gg_gpu_platform(), gg_gpu_blas(), g_l2);
        fprintf(f, "  \"method\": \"R launches per graph rotating over operand copies (sets) "
                   "so that each launch reads memory outside L2; median of %d graph replays "
                   "timed by events, over R\",\n",
                trials);
        fprintf(f, "  \"copy_ceiling_gbs\": %.2f,\n  \"copy_ceiling_best_gbs\": %.2f,\n", copy,
                copy_best);
        fprintf(f, "  \"cases\": [\n");
        for (int i = 0; i < g_ncases; i++) {
            const bcase *c = &g_cases[i];
            fprintf(f, "    {\"name\": ");
            json_str(f, c->name);
            fprintf(f, ", \"op\": ");
            json_str(f, c->probe ? "read_ceiling" : c->op ? c->op->name : "?");
            fprintf(f, ", \"shape\": ");
            json_str(f, c->shape);
            fprintf(f, ", \"inputs\": [");
            for (int k = 0; k < c->nin; k++) {
                if (k)
                    fprintf(f, ", ");
                json_desc(f, &c->in[k]);
            }
            fprintf(f, "], \"output\": ");
            json_desc(f, &c->out);
            fprintf(f, ", \"linear_mode\": %d, \"bytes\": %.0f, \"counted\": ", c->linear_mode,
                    c->bytes);
            json_str(f, c->counted);
            fprintf(f, ", \"sets\": %d, \"reps\": %d", c->nsets, c->reps);
            if (c->rc == 0)
                fprintf(f, ", \"us\": %.3f, \"us_min\": %.3f, \"gbs\": %.2f, \"pct_copy\": %.2f}",
                        c->us, c->us_min, c->gbs, 100.0 * c->gbs / copy);
            else {
                fprintf(f, ", \"error\": ");
                json_str(f, c->rc > 0 ? "skipped" : c->err);
                fprintf(f, "}");
            }
            fprintf(f, "%s\n", i + 1 < g_ncases ? "," : "");
        }
        fprintf(f, "  ]\n}\n");
        fclose(f);
    }
    gg_gpu_ctx_destroy(g_ctx);
    return 0;
}
