/* SPDX-License-Identifier: MIT */
/* gfxgraph-demo: define two programs on a running gfxgraphd (cpu backend),
 * replay them for batch 1..40 and check every answer against a reference
 * computed here in double precision.
 *
 *   gfxgraph-demo [-v] [SOCKET]
 *
 * (a) "chain": a decode-like stack, layernorm -> gelu(tanh) x 8 at d = 1024;
 *     the intermediates are daemon scratch, the final output is ours.
 * (b) "mlp": linear(1024 -> 4096) -> gelu -> linear(4096 -> 1024), biases.
 *
 * Tensors have a "batch" leading dim.  The programs use buckets 1..32, so
 * batches 33..40 exercise the eager path; our buffers hold 40 rows.  Before
 * each replay the output rows are poisoned with NaN, so a replay that does
 * not write them cannot pass.
 *
 * Exit status: 0 all results match, 1 a mismatch or a failed call,
 * 2 cannot connect. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gfxgraph/client.h>

#define D 1024            /* model dim */
#define F 4096            /* MLP hidden dim */
#define LAYERS 8
#define MAX_BATCH 40
#define TOL 1e-4          /* rel-L2, f32 */
#define LN_EPS 1e-5

static const int demo_buckets[] = {1, 2, 4, 8, 16, 32};
#define NBUCKETS ((int)(sizeof demo_buckets / sizeof demo_buckets[0]))

static bool verbose;

/* ---- small helpers ------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float rnd(void)   /* uniform in [-1, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545f4914f6cdd1dull;
    return (float)((double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* A buffer carved into tensors by a bump allocator: POSIX shared memory for
 * the cpu backend; for the hip backend a host copy plus device memory that
 * is registered by pointer and kept in step with it. */
typedef struct {
    char name[64];
    void *base;             /* host view */
    void *dev;              /* hip backend: the device allocation */
    size_t size, used;
    uint64_t id;
    bool registered;
} shmbuf;

static bool on_gpu;         /* the daemon runs the hip backend */

#ifdef GFXGRAPH_HAVE_GPU
#include "gg_hip.h"
static int dev_copy(void *dst, const void *src, size_t n, hipMemcpyKind k)
{
    hipError_t e = hipMemcpy(dst, src, n, k);
    if (e != hipSuccess) {
        fprintf(stderr, "demo: hipMemcpy: %s\n", hipGetErrorString(e));
        return -EIO;
    }
    return 0;
}
#endif

/* Host -> device for [off, off+n) of b (no-op on the cpu backend). */
static int buf_upload(shmbuf *b, size_t off, size_t n)
{
#ifdef GFXGRAPH_HAVE_GPU
    if (on_gpu)
        return dev_copy((char *)b->dev + off, (char *)b->base + off, n, hipMemcpyHostToDevice);
#endif
    (void)b, (void)off, (void)n;
    return 0;
}

static int buf_download(shmbuf *b, size_t off, size_t n)
{
#ifdef GFXGRAPH_HAVE_GPU
    if (on_gpu)
        return dev_copy((char *)b->base + off, (char *)b->dev + off, n, hipMemcpyDeviceToHost);
#endif
    (void)b, (void)off, (void)n;
    return 0;
}

static size_t carve(shmbuf *b, size_t bytes)
{
    size_t off = (b->used + 255) & ~(size_t)255;
    b->used = off + bytes;
    return off;
}

static float *at(const shmbuf *b, size_t off)
{
    return (float *)((char *)b->base + off);
}

static int shm_open_buf(gg_client *c, shmbuf *b, const char *tag, size_t size)
{
    snprintf(b->name, sizeof b->name, "/gg-demo-%ld-%s", (long)getpid(), tag);
    b->size = size;
    int rc;
#ifdef GFXGRAPH_HAVE_GPU
    if (on_gpu) {
        b->base = calloc(1, size);
        hipError_t e = hipMalloc(&b->dev, size);
        if (!b->base || e != hipSuccess) {
            fprintf(stderr, "demo: cannot allocate %zu bytes on the GPU: %s\n", size,
                    hipGetErrorString(e));
            b->dev = NULL;
            return -ENOMEM;
        }
        rc = gg_client_buffer_register_device(c, b->dev, size, &b->id);
        if (rc < 0) {
            fprintf(stderr, "demo: buffer.register (device memory): %s (%s)\n",
                    gg_client_last_error(c), gg_client_last_error_code(c));
            return rc;
        }
        b->registered = true;
        return 0;
    }
#endif
    rc = gg_client_shm_create(b->name, size, &b->base);
    if (rc < 0) {
        fprintf(stderr, "demo: cannot create shared memory %s (%zu bytes): %s\n", b->name,
                size, strerror(-rc));
        b->base = NULL;
        return rc;
    }
    rc = gg_client_buffer_register_shm(c, b->name, 0, size, &b->id);
    if (rc < 0) {
        fprintf(stderr, "demo: buffer.register %s: %s (%s)\n", b->name, gg_client_last_error(c),
                gg_client_last_error_code(c));
        return rc;
    }
    b->registered = true;
    return 0;
}

static void shm_close_buf(gg_client *c, shmbuf *b)
{
    if (b->registered && gg_client_connected(c))
        gg_client_buffer_release(c, b->id);
#ifdef GFXGRAPH_HAVE_GPU
    if (on_gpu) {
        if (b->dev)
            hipFree(b->dev);
        free(b->base);
        b->base = b->dev = NULL;
        b->registered = false;
        return;
    }
#endif
    if (b->base)
        gg_client_shm_destroy(b->name, b->base, b->size);
    b->base = NULL;
    b->registered = false;
}

/* ---- reference (double precision, written for this demo) ----------------- */

static double gelu_tanh(double x)
{
    const double k = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double gelu_erf(double x)
{
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static void ref_layernorm(const double *x, const float *w, const float *b, double *y, int d)
{
    double mean = 0, var = 0;
    for (int i = 0; i < d; i++)
        mean += x[i];
    mean /= d;
    for (int i = 0; i < d; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= d;
    double rstd = 1.0 / sqrt(var + LN_EPS);
    for (int i = 0; i < d; i++)
        y[i] = (x[i] - mean) * rstd * w[i] + b[i];
}

/* y[n] = x[k] . w[n][k] + b[n] */
static void ref_linear(const double *x, const float *w, const float *b, double *y, int k, int n)
{
    for (int o = 0; o < n; o++) {
        const float *wr = w + (size_t)o * (size_t)k;
        double s = 0;
        for (int i = 0; i < k; i++)
            s += x[i] * wr[i];
        y[o] = s + b[o];
    }
}

/* ---- checking one replay ------------------------------------------------- */

typedef struct {
    const char *name;
    int batches, replays, graph, eager, fallback, captured, failures;
    bool bucket_used[65];
    double max_rel, max_abs;
    /* per replay, for the medians printed: device time per row of the batch,
     * and the round trip's time beyond the device's */
    double row_us[MAX_BATCH], over_us[MAX_BATCH];
    int timed;
} summary;

/* rel-L2 of y against ref over rows [0, batch) of width n */
static double compare(const float *y, const double *ref, int batch, int n, double *max_abs)
{
    double num = 0, den = 0, ma = 0;
    for (size_t i = 0; i < (size_t)batch * (size_t)n; i++) {
        double e = (double)y[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
        if (!(fabs(e) <= ma))
            ma = fabs(e);    /* NaN sticks */
    }
    *max_abs = ma;
    return sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
}

static int run_program(gg_client *c, summary *s, uint64_t prog, shmbuf *buf, size_t yoff,
                       const double *ref, int n, int max_batch)
{
    int bad = 0;
    float *y = at(buf, yoff);
    size_t ybytes = (size_t)MAX_BATCH * (size_t)n * sizeof(float);
    s->batches = max_batch;
    for (int batch = 1; batch <= max_batch; batch++) {
        for (size_t i = 0; i < (size_t)MAX_BATCH * (size_t)n; i++)
            y[i] = NAN;
        if (buf_upload(buf, yoff, ybytes) < 0)
            return bad + 1;
        gg_replay_result r;
        double t0 = now_us();
        int rc = gg_client_replay(c, prog, batch, -1, &r);
        double t1 = now_us();
        if (rc == 0 && buf_download(buf, yoff, ybytes) < 0)
            return bad + 1;
        if (rc < 0) {
            fprintf(stderr, "demo: %s: replay batch %d: %s (%s)\n", s->name, batch,
                    gg_client_last_error(c), gg_client_last_error_code(c));
            s->failures++;
            bad++;
            if (!gg_client_connected(c))
                return bad;
            continue;
        }
        double mabs;
        double rel = compare(y, ref, batch, n, &mabs);
        bool ok = rel < TOL;
        if (r.bucket != 0 && r.bucket < batch) {
            fprintf(stderr, "demo: %s: batch %d ran in bucket %d, smaller than the batch\n",
                    s->name, batch, r.bucket);
            ok = false;
        }
        s->replays++;
        if (r.path == GG_PATH_GRAPH)
            s->graph++;
        else
            s->eager++;
        s->fallback += r.fallback;
        s->captured += r.captured;
        if (r.bucket > 0 && r.bucket <= 64)
            s->bucket_used[r.bucket] = true;
        else if (r.bucket == 0)
            s->bucket_used[0] = true;
        if (!isnan(s->max_rel) && !(rel <= s->max_rel))   /* NaN sticks */
            s->max_rel = rel;
        if (!isnan(s->max_abs) && !(mabs <= s->max_abs))
            s->max_abs = mabs;
        if (s->timed < MAX_BATCH) {
            s->row_us[s->timed] = r.device_us / batch;
            s->over_us[s->timed] = (t1 - t0) - r.device_us;
            s->timed++;
        }
        if (verbose || !ok)
            fprintf(ok ? stdout : stderr,
                    "  %s batch %2d: %-5s bucket %2d%s%s  rel-L2 %.2e  max|err| %.2e  "
                    "device %.1f us%s%s%s\n",
                    s->name, batch, r.path == GG_PATH_GRAPH ? "graph" : "eager", r.bucket,
                    r.captured ? " (captured)" : "", r.fallback ? " (fallback)" : "", rel, mabs,
                    r.device_us, r.reason[0] ? "  [" : "", r.reason, r.reason[0] ? "]" : "");
        if (!ok) {
            s->failures++;
            bad++;
        }
    }
    return bad;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median, so that one cold replay (the first touch of a program's
 * buffers in the daemon) does not read as the steady cost. */
static double median(const double *v, int n)
{
    double tmp[MAX_BATCH];
    memcpy(tmp, v, (size_t)n * sizeof *v);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static void print_summary(const summary *s, const char *what)
{
    printf("%s: %s\n", s->name, what);
    printf("  replays   %d (batch 1..%d): %d graph, %d eager, %d fallback, %d captured\n",
           s->replays, s->batches, s->graph, s->eager,
           s->fallback, s->captured);
    printf("  buckets  ");
    for (int b = 1; b <= 64; b++)
        if (s->bucket_used[b])
            printf(" %d", b);
    if (s->bucket_used[0])
        printf(" (none: above the largest bucket, eager)");
    printf("\n");
    printf("  max rel-L2 error %.3e (tolerance %.0e), max |error| %.3e\n", s->max_rel, TOL,
           s->max_abs);
    if (s->timed)
        printf("  median over the %d replays: device %.1f us per row of the batch, "
               "round trip %.1f us beyond the device time\n",
               s->timed, median(s->row_us, s->timed), median(s->over_us, s->timed));
    if (s->failures)
        printf("  MISMATCH: %d of %d batches failed\n", s->failures, s->batches);
    else
        printf("  ok\n");
}

/* ---- the programs -------------------------------------------------------- */

typedef struct {
    shmbuf buf;
    size_t x, y, w[LAYERS], b[LAYERS];
    double *ref;
    uint64_t id;
    bool defined;
} chain_prog;

typedef struct {
    shmbuf buf;
    size_t x, y, w1, b1, w2, b2;
    double *ref;
    uint64_t id;
    bool defined;
} mlp_prog;

static int chain_setup(gg_client *c, chain_prog *p)
{
    /* layout */
    p->buf.used = 0;
    p->x = carve(&p->buf, (size_t)MAX_BATCH * D * 4);
    p->y = carve(&p->buf, (size_t)MAX_BATCH * D * 4);
    for (int l = 0; l < LAYERS; l++) {
        p->w[l] = carve(&p->buf, D * 4);
        p->b[l] = carve(&p->buf, D * 4);
    }
    int rc = shm_open_buf(c, &p->buf, "chain", p->buf.used);
    if (rc < 0)
        return rc;
    float *x = at(&p->buf, p->x);
    for (size_t i = 0; i < (size_t)MAX_BATCH * D; i++)
        x[i] = 2.0f * rnd();
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < D; i++) {
            at(&p->buf, p->w[l])[i] = 1.0f + 0.1f * rnd();
            at(&p->buf, p->b[l])[i] = 0.1f * rnd();
        }

    /* reference */
    p->ref = malloc((size_t)MAX_BATCH * D * sizeof(double));
    double *t = malloc(2 * D * sizeof(double));
    if (!p->ref || !t) {
        free(t);
        fprintf(stderr, "demo: out of memory\n");
        return -ENOMEM;
    }
    for (int r = 0; r < MAX_BATCH; r++) {
        double *h = p->ref + (size_t)r * D;
        for (int i = 0; i < D; i++)
            h[i] = x[(size_t)r * D + i];
        for (int l = 0; l < LAYERS; l++) {
            ref_layernorm(h, at(&p->buf, p->w[l]), at(&p->buf, p->b[l]), t, D);
            for (int i = 0; i < D; i++)
                h[i] = gelu_tanh(t[i]);
        }
    }
    free(t);

    /* definition */
    const int64_t act[] = {GG_BATCH, D}, vec[] = {D};
    gg_program_def *d = gg_program_def_new("demo-chain");
    if (!d)
        return -ENOMEM;
    gg_program_def_tensor(d, "x", p->buf.id, p->x, "f32", 2, act);
    gg_program_def_tensor(d, "y", p->buf.id, p->y, "f32", 2, act);
    char in[32], n[32], w[32], b[32], out[32], list[128];
    snprintf(in, sizeof in, "x");
    for (int l = 0; l < LAYERS; l++) {
        snprintf(w, sizeof w, "ln%d.w", l);
        snprintf(b, sizeof b, "ln%d.b", l);
        snprintf(n, sizeof n, "ln%d.out", l);
        if (l == LAYERS - 1)
            snprintf(out, sizeof out, "y");
        else
            snprintf(out, sizeof out, "gelu%d.out", l);
        gg_program_def_tensor(d, w, p->buf.id, p->w[l], "f32", 1, vec);
        gg_program_def_tensor(d, b, p->buf.id, p->b[l], "f32", 1, vec);
        gg_program_def_scratch(d, n, "f32", 2, act);
        if (l != LAYERS - 1)
            gg_program_def_scratch(d, out, "f32", 2, act);
        snprintf(list, sizeof list, "%s,%s,%s", in, w, b);
        gg_program_def_op(d, "layernorm", list, n);
        gg_program_def_attr_f(d, "eps", LN_EPS);
        gg_program_def_op(d, "gelu", n, out);
        gg_program_def_attr_s(d, "approximate", "tanh");
        snprintf(in, sizeof in, "%s", out);
    }
    gg_program_def_buckets(d, NBUCKETS, demo_buckets);
    rc = gg_client_program_define(c, d, &p->id);
    gg_program_def_free(d);
    if (rc < 0) {
        fprintf(stderr, "demo: program.define demo-chain: %s (%s)\n", gg_client_last_error(c),
                gg_client_last_error_code(c));
        return rc;
    }
    p->defined = true;
    return 0;
}

static int mlp_setup(gg_client *c, mlp_prog *p)
{
    p->buf.used = 0;
    p->x = carve(&p->buf, (size_t)MAX_BATCH * D * 4);
    p->y = carve(&p->buf, (size_t)MAX_BATCH * D * 4);
    p->w1 = carve(&p->buf, (size_t)F * D * 4);
    p->b1 = carve(&p->buf, (size_t)F * 4);
    p->w2 = carve(&p->buf, (size_t)D * F * 4);
    p->b2 = carve(&p->buf, (size_t)D * 4);
    int rc = shm_open_buf(c, &p->buf, "mlp", p->buf.used);
    if (rc < 0)
        return rc;
    float *x = at(&p->buf, p->x), *w1 = at(&p->buf, p->w1), *b1 = at(&p->buf, p->b1);
    float *w2 = at(&p->buf, p->w2), *b2 = at(&p->buf, p->b2);
    for (size_t i = 0; i < (size_t)MAX_BATCH * D; i++)
        x[i] = rnd();
    for (size_t i = 0; i < (size_t)F * D; i++)
        w1[i] = rnd() * (float)(1.0 / 32.0);      /* 1/sqrt(1024) */
    for (int i = 0; i < F; i++)
        b1[i] = 0.1f * rnd();
    for (size_t i = 0; i < (size_t)D * F; i++)
        w2[i] = rnd() * (float)(1.0 / 64.0);      /* 1/sqrt(4096) */
    for (int i = 0; i < D; i++)
        b2[i] = 0.1f * rnd();

    p->ref = malloc((size_t)MAX_BATCH * D * sizeof(double));
    double *xr = malloc(D * sizeof(double)), *h = malloc(F * sizeof(double));
    if (!p->ref || !xr || !h) {
        free(xr);
        free(h);
        fprintf(stderr, "demo: out of memory\n");
        return -ENOMEM;
    }
    for (int r = 0; r < MAX_BATCH; r++) {
        for (int i = 0; i < D; i++)
            xr[i] = x[(size_t)r * D + i];
        ref_linear(xr, w1, b1, h, D, F);
        for (int i = 0; i < F; i++)
            h[i] = gelu_erf(h[i]);
        ref_linear(h, w2, b2, p->ref + (size_t)r * D, F, D);
    }
    free(xr);
    free(h);

    const int64_t act[] = {GG_BATCH, D}, hid[] = {GG_BATCH, F};
    const int64_t w1d[] = {F, D}, w2d[] = {D, F}, b1d[] = {F}, b2d[] = {D};
    gg_program_def *d = gg_program_def_new("demo-mlp");
    if (!d)
        return -ENOMEM;
    gg_program_def_tensor(d, "x", p->buf.id, p->x, "f32", 2, act);
    gg_program_def_tensor(d, "y", p->buf.id, p->y, "f32", 2, act);
    gg_program_def_tensor(d, "up.w", p->buf.id, p->w1, "f32", 2, w1d);
    gg_program_def_tensor(d, "up.b", p->buf.id, p->b1, "f32", 1, b1d);
    gg_program_def_tensor(d, "down.w", p->buf.id, p->w2, "f32", 2, w2d);
    gg_program_def_tensor(d, "down.b", p->buf.id, p->b2, "f32", 1, b2d);
    gg_program_def_scratch(d, "h", "f32", 2, hid);
    gg_program_def_scratch(d, "g", "f32", 2, hid);
    gg_program_def_op(d, "linear", "x, up.w, up.b", "h");
    gg_program_def_op(d, "gelu", "h", "g");
    gg_program_def_attr_s(d, "approximate", "none");
    gg_program_def_op(d, "linear", "g, down.w, down.b", "y");
    gg_program_def_buckets(d, NBUCKETS, demo_buckets);
    rc = gg_client_program_define(c, d, &p->id);
    gg_program_def_free(d);
    if (rc < 0) {
        fprintf(stderr, "demo: program.define demo-mlp: %s (%s)\n", gg_client_last_error(c),
                gg_client_last_error_code(c));
        return rc;
    }
    p->defined = true;
    return 0;
}

static void prepare(gg_client *c, const char *name, uint64_t id)
{
    int ready = 0, failed = 0;
    double t0 = now_us();
    int rc = gg_client_program_prepare(c, id, 0, NULL, -1, &ready, &failed);
    if (rc < 0)
        printf("%s: prepare failed (%s: %s); replays will capture on demand\n", name,
               gg_client_last_error_code(c), gg_client_last_error(c));
    else
        printf("%s: prepared %d graphs (%d failed) in %.1f ms\n", name, ready, failed,
               (now_us() - t0) / 1e3);
}

int main(int argc, char **argv)
{
    const char *sock = NULL;
    bool keep = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) {
            verbose = true;
        } else if (strcmp(argv[i], "--keep") == 0) {
            keep = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: gfxgraph-demo [-v] [--keep] [SOCKET]\n"
                   "Replays two programs on gfxgraphd (shared memory on the cpu backend,\n"
                   "device memory on the hip backend) for batch 1..%d and\n"
                   "checks them against a double-precision reference.\n"
                   "--keep: leave without releasing the programs, so their graphs stay\n"
                   "parked in the daemon's cache (gfxgraphctl stats shows them, and a\n"
                   "second run adopts them instead of capturing again).\n", MAX_BATCH);
            return 0;
        } else if (!sock && argv[i][0] != '-') {
            sock = argv[i];
        } else {
            fprintf(stderr, "usage: gfxgraph-demo [-v] [--keep] [SOCKET]\n");
            return 64;
        }
    }

    gg_client *c = gg_client_new();
    if (!c) {
        fprintf(stderr, "demo: out of memory\n");
        return 1;
    }
    if (gg_client_connect(c, sock, "gfxgraph-demo") < 0) {
        fprintf(stderr, "demo: %s\n", gg_client_last_error(c));
        gg_client_close(c);
        return 2;
    }
    printf("connected to %s: gfxgraphd %s, backend %s, device %s, session %llu\n",
           gg_client_socket_path(c), gg_client_server_version(c), gg_client_backend(c),
           gg_client_device_name(c), (unsigned long long)gg_client_session_id(c));
    on_gpu = strcmp(gg_client_backend(c), "hip") == 0;
#ifndef GFXGRAPH_HAVE_GPU
    if (on_gpu) {
        fprintf(stderr, "demo: the daemon runs the hip backend, but this demo was built "
                        "without GPU support (GFXGRAPH_GPU=off)\n");
        gg_client_close(c);
        return 1;
    }
#endif
    int max_batch = MAX_BATCH;
    if (gg_client_max_batch(c) > 0 && gg_client_max_batch(c) < max_batch)
        max_batch = gg_client_max_batch(c);

    int status = 1;
    chain_prog chain;
    mlp_prog mlp;
    memset(&chain, 0, sizeof chain);
    memset(&mlp, 0, sizeof mlp);
    summary sc = {.name = "chain"}, sm = {.name = "mlp"};

    double t0 = now_us();
    if (chain_setup(c, &chain) < 0 || mlp_setup(c, &mlp) < 0)
        goto out;
    if (buf_upload(&chain.buf, 0, chain.buf.size) < 0 || buf_upload(&mlp.buf, 0, mlp.buf.size) < 0)
        goto out;
    printf("set up (buffers, references, define) in %.0f ms\n", (now_us() - t0) / 1e3);
    prepare(c, "chain", chain.id);
    prepare(c, "mlp", mlp.id);

    int bad = run_program(c, &sc, chain.id, &chain.buf, chain.y, chain.ref, D, max_batch);
    if (gg_client_connected(c))
        bad += run_program(c, &sm, mlp.id, &mlp.buf, mlp.y, mlp.ref, D, max_batch);
    print_summary(&sc, "layernorm -> gelu(tanh) x 8, d 1024, f32");
    print_summary(&sm, "linear 1024->4096 -> gelu -> linear 4096->1024, f32");
    if (!on_gpu)
        printf("(backend cpu: the daemon runs every op as a reference kernel in plain C on\n"
               " the CPU, written to check results against, not for speed: these times are\n"
               " not what a GPU does.  The round trip beyond the device time is the\n"
               " daemon's own cost: request, graph lookup, reply.)\n");
    status = bad ? 1 : 0;
    printf("%s\n", bad ? "FAILED" : "all results match the reference");

out:
    if (chain.defined && gg_client_connected(c) && !keep)
        gg_client_program_release(c, chain.id);
    if (mlp.defined && gg_client_connected(c) && !keep)
        gg_client_program_release(c, mlp.id);
    /* keep: the programs stay defined and use the buffers, so releasing
     * them would be refused (EBUSY): leave instead; the session's end parks
     * the graphs and releases the buffers, before this process frees them */
    if (keep)
        gg_client_disconnect(c);
    shm_close_buf(c, &chain.buf);
    shm_close_buf(c, &mlp.buf);
    free(chain.ref);
    free(mlp.ref);
    gg_client_close(c);
    return status;
}
