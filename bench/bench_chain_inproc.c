/* SPDX-License-Identifier: MIT */
/* In-process launch-overhead benchmark: a 64-node decode chain
 * (layernorm -> gelu, 32 times; batch 1, d = 1024, f16) launched on one stream
 * eagerly (64 launches per iteration) and as one captured graph (one
 * hipGraphLaunch per iteration).  Each iteration is timed with events on the
 * stream and waited for the same way in both modes (hipEventSynchronize),
 * after a warm-up; the two modes run in --blocks interleaved blocks (default
 * 10) so that drift falls on both.  Before the timing one iteration of each,
 * from the same input, must leave the same bytes: the JSON's `work` says
 * "equal" only then.  The table gives median and p90 (and min, mean).
 *
 *   bench_chain_inproc [--iters N] [--warmup N] [--blocks N] [--d D] [--floor]
 *                      [--json PATH | PATH]
 *
 * --floor also times the same 64-node chain made of `copy` nodes (near-empty
 * kernels): the runtime's own per-node cost, to read the chain's numbers
 * against.
 *
 * This is the daemon's best case: no IPC, no request handling.  It measures;
 * nothing here is asserted.  Without a device it prints SKIP and exits 0. */
#include "gg_hip.h"
#include "gpu_ops.h"
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#define CHAIN_PAIRS 32

typedef struct {
    double median, p90, min, mean;
} stats;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static stats summarize(double *v, int n)
{
    stats s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.min = v[0];
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    /* nearest-rank p90 */
    int r = (int)ceil(0.9 * n) - 1;
    s.p90 = v[r < 0 ? 0 : r];
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    s.mean = sum / n;
    return s;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

#define CK(call)                                                                        \
    do {                                                                                \
        hipError_t e_ = (call);                                                         \
        if (e_ != hipSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                    hipGetErrorString(e_));                                             \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

typedef struct {
    gg_gpu_ctx *ctx;
    const gg_op_def *ln, *gelu, *copy;
    gg_tensor x, t, w, b;
    int floor; /* 64 copies instead: the per-node cost of a near-empty kernel */
} chain;

/* 64 launches: x -> layernorm -> t -> gelu -> x, 32 times */
static void chain_enqueue(const chain *c)
{
    for (int i = 0; i < CHAIN_PAIRS; i++) {
        gg_tensor in[3] = {c->x, c->w, c->b};
        int rc = c->floor ? gg_gpu_op_launch(c->ctx, c->copy, &c->x, 1, &c->t, 1, NULL)
                          : gg_gpu_op_launch(c->ctx, c->ln, in, 3, &c->t, 1, NULL);
        if (!rc)
            rc = c->floor ? gg_gpu_op_launch(c->ctx, c->copy, &c->t, 1, &c->x, 1, NULL)
                          : gg_gpu_op_launch(c->ctx, c->gelu, &c->t, 1, &c->x, 1, NULL);
        if (rc) {
            fprintf(stderr, "launch failed: %d %s\n", rc, gg_gpu_last_error());
            exit(1);
        }
    }
}

/* One iteration of each mode, timed with the same events and the same wait
 * (hipEventSynchronize on the event behind it). */
static double time_eager(chain *c, hipStream_t s, hipEvent_t e0, hipEvent_t e1)
{
    float ms = 0;
    CK(hipEventRecord(e0, s));
    chain_enqueue(c);
    CK(hipEventRecord(e1, s));
    CK(hipEventSynchronize(e1));
    CK(hipEventElapsedTime(&ms, e0, e1));
    return ms * 1000.0;
}

static double time_graph(hipGraphExec_t x, hipStream_t s, hipEvent_t e0, hipEvent_t e1)
{
    float ms = 0;
    CK(hipEventRecord(e0, s));
    CK(hipGraphLaunch(x, s));
    CK(hipEventRecord(e1, s));
    CK(hipEventSynchronize(e1));
    CK(hipEventElapsedTime(&ms, e0, e1));
    return ms * 1000.0;
}

/* The chain's x from x0, then one iteration eagerly and one through the
 * graph from the same x: the graph must leave the same bytes as the eager
 * launches, else the two rows did not do the same work. */
static int same_output(chain *c, hipGraphExec_t x, hipStream_t s, const void *x0, void *out_e,
                       void *out_g, size_t bytes)
{
    CK(hipMemcpy(c->x.data, x0, bytes, hipMemcpyHostToDevice));
    chain_enqueue(c);
    CK(hipStreamSynchronize(s));
    CK(hipMemcpy(out_e, c->x.data, bytes, hipMemcpyDeviceToHost));
    CK(hipMemcpy(c->x.data, x0, bytes, hipMemcpyHostToDevice));
    CK(hipGraphLaunch(x, s));
    CK(hipStreamSynchronize(s));
    CK(hipMemcpy(out_g, c->x.data, bytes, hipMemcpyDeviceToHost));
    return memcmp(out_e, out_g, bytes) == 0;
}

/* Times iters iterations of the chain eagerly (64 launches each) and as one
 * captured graph (one launch each) in `blocks` interleaved blocks (eager
 * first in even blocks, graph first in odd ones), so that drift of the
 * clocks or of the host falls on both modes.  *equal: whether one iteration
 * of each leaves the same bytes (checked before the timing, from x0). */
static void measure(chain *c, hipStream_t s, hipEvent_t e0, hipEvent_t e1, int iters, int warmup,
                    int blocks, const void *x0, size_t bytes, double *eager_us, double *graph_us,
                    size_t *nodes, int *equal)
{
    hipGraph_t g;
    hipGraphExec_t x;
    CK(hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal));
    chain_enqueue(c);
    CK(hipStreamEndCapture(s, &g));
    CK(hipGraphGetNodes(g, NULL, nodes));
    CK(hipGraphInstantiate(&x, g, NULL, NULL, 0));

    void *oe = malloc(bytes), *og = malloc(bytes);
    if (!oe || !og) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    *equal = same_output(c, x, s, x0, oe, og, bytes);
    free(oe);
    free(og);

    for (int i = 0; i < warmup; i++) {
        chain_enqueue(c);
        CK(hipGraphLaunch(x, s));
    }
    CK(hipStreamSynchronize(s));
    int done = 0;
    for (int b = 0; b < blocks; b++) {
        int n = (iters - done) / (blocks - b);
        for (int k = 0; k < 2; k++) {
            if ((k == 0) == (b % 2 == 0))
                for (int i = 0; i < n; i++)
                    eager_us[done + i] = time_eager(c, s, e0, e1);
            else
                for (int i = 0; i < n; i++)
                    graph_us[done + i] = time_graph(x, s, e0, e1);
        }
        done += n;
    }
    CK(hipGraphExecDestroy(x));
    CK(hipGraphDestroy(g));
}

int main(int argc, char **argv)
{
    int iters = 200, warmup = 20, blocks = 10;
    int64_t d = 1024;
    const char *json = NULL;
    int floor_too = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            blocks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--d") && i + 1 < argc)
            d = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--floor"))
            floor_too = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (argv[i][0] != '-')
            json = argv[i];
        else {
            fprintf(stderr,
                    "usage: %s [--iters N] [--warmup N] [--blocks N] [--d D] [--floor] "
                    "[--json PATH | PATH]\n",
                    argv[0]);
            return 2;
        }
    }
    if (iters < 1 || warmup < 0 || d < 1 || blocks < 1 || blocks > iters) {
        fprintf(stderr, "bad --iters, --warmup, --blocks or --d\n");
        return 2;
    }

    int ndev = 0;
    hipError_t e = hipGetDeviceCount(&ndev);
    if (e != hipSuccess || ndev < 1) {
        printf("SKIP: no GPU device (hipGetDeviceCount: %s)\n",
               e != hipSuccess ? hipGetErrorString(e) : "0 devices");
        return 0;
    }

    hipDeviceProp_t prop;
    CK(hipGetDeviceProperties(&prop, 0));
    char arch[32], runtime[64];
    int driver = 0;
    gg_hip_arch_name(0, arch, sizeof arch);
    gg_hip_runtime_string(runtime, sizeof runtime);
    CK(hipDriverGetVersion(&driver));

    hipStream_t s;
    CK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    chain c;
    memset(&c, 0, sizeof c);
    if (gg_gpu_ctx_create(s, &c.ctx)) {
        fprintf(stderr, "gg_gpu_ctx_create: %s\n", gg_gpu_last_error());
        return 1;
    }
    c.ln = gg_ops_find("layernorm");
    c.gelu = gg_ops_find("gelu");
    if (!c.ln || !c.gelu) {
        fprintf(stderr, "op table lacks layernorm or gelu\n");
        return 1;
    }

    const gg_dtype dt = GG_DT_F16;
    gg_tensor_desc row = {.dtype = dt, .ndim = 2, .dims = {1, d}};
    gg_tensor_desc vec = {.dtype = dt, .ndim = 1, .dims = {d}};
    size_t bytes = gg_desc_bytes(&row);
    uint16_t *h = malloc(bytes), *x0 = malloc(bytes);
    if (!h || !x0)
        return 1;
    void *px, *pt, *pw, *pb;
    CK(hipMalloc(&px, bytes));
    CK(hipMalloc(&pt, bytes));
    CK(hipMalloc(&pw, bytes));
    CK(hipMalloc(&pb, bytes));
    for (int64_t i = 0; i < d; i++)
        h[i] = gg_f32_to_f16((float)((i * 37) % 101) / 50.0f - 1.0f);
    CK(hipMemcpy(px, h, bytes, hipMemcpyHostToDevice));
    memcpy(x0, h, bytes);
    for (int64_t i = 0; i < d; i++)
        h[i] = gg_f32_to_f16(1.0f + (float)(i % 7) / 70.0f);
    CK(hipMemcpy(pw, h, bytes, hipMemcpyHostToDevice));
    for (int64_t i = 0; i < d; i++)
        h[i] = gg_f32_to_f16((float)(i % 5) / 50.0f);
    CK(hipMemcpy(pb, h, bytes, hipMemcpyHostToDevice));
    c.x = (gg_tensor){.data = px, .desc = row};
    c.t = (gg_tensor){.data = pt, .desc = row};
    c.w = (gg_tensor){.data = pw, .desc = vec};
    c.b = (gg_tensor){.data = pb, .desc = vec};

    hipEvent_t e0, e1;
    CK(hipEventCreate(&e0));
    CK(hipEventCreate(&e1));
    double *eager_us = malloc(sizeof(double) * (size_t)iters);
    double *graph_us = malloc(sizeof(double) * (size_t)iters);
    if (!eager_us || !graph_us)
        return 1;
    size_t nodes = 0;
    c.copy = gg_ops_find("copy");
    stats fe = {0}, fg = {0};
    int equal = 0, floor_equal = 0;
    if (floor_too && c.copy) {
        c.floor = 1;
        measure(&c, s, e0, e1, iters, warmup, blocks, x0, bytes, eager_us, graph_us, &nodes,
                &floor_equal);
        fe = summarize(eager_us, iters);
        fg = summarize(graph_us, iters);
        c.floor = 0;
    }
    measure(&c, s, e0, e1, iters, warmup, blocks, x0, bytes, eager_us, graph_us, &nodes, &equal);
    /* the same 64 launches either way, checked by their output */
    char work[96];
    if (equal && nodes == 2 * CHAIN_PAIRS)
        snprintf(work, sizeof work, "equal");
    else
        snprintf(work, sizeof work, "differs: %zu graph nodes for %d launches, outputs %s", nodes,
                 2 * CHAIN_PAIRS, equal ? "the same" : "NOT the same");

    /* the chain's output must at least be finite */
    CK(hipMemcpy(h, px, bytes, hipMemcpyDeviceToHost));
    int finite = 1;
    for (int64_t i = 0; i < d; i++)
        if (!isfinite(gg_f16_to_f32(h[i])))
            finite = 0;

    stats se = summarize(eager_us, iters), sg = summarize(graph_us, iters);
    printf("chain: %d nodes (layernorm -> gelu x %d), batch 1, d = %lld, f16; %d iterations "
           "of each mode after %d warm-up, in %d interleaved blocks; work: %s\n",
           2 * CHAIN_PAIRS, CHAIN_PAIRS, (long long)d, iters, warmup, blocks, work);
    printf("device: %s (%s), %s, driver %d, %s\n", prop.name, arch, runtime, driver,
           gg_gpu_platform());
    printf("%-8s %12s %12s %12s %12s %14s\n", "mode", "median us", "p90 us", "min us", "mean us",
           "us per node");
    printf("%-8s %12.1f %12.1f %12.1f %12.1f %14.2f\n", "eager", se.median, se.p90, se.min,
           se.mean, se.median / (2 * CHAIN_PAIRS));
    printf("%-8s %12.1f %12.1f %12.1f %12.1f %14.2f\n", "graph", sg.median, sg.p90, sg.min,
           sg.mean, sg.median / (2 * CHAIN_PAIRS));
    if (fe.median > 0) {
        printf("%-8s %12.1f %12.1f %12.1f %12.1f %14.2f   (64 copy nodes: floor)\n", "eager",
               fe.median, fe.p90, fe.min, fe.mean, fe.median / (2 * CHAIN_PAIRS));
        printf("%-8s %12.1f %12.1f %12.1f %12.1f %14.2f   (64 copy nodes: floor)\n", "graph",
               fg.median, fg.p90, fg.min, fg.mean, fg.median / (2 * CHAIN_PAIRS));
    }
    printf("graph nodes: %zu; speed-up (median): %.2fx%s\n", nodes, se.median / sg.median,
           finite ? "" : "; WARNING: non-finite output");

    int rc = 0;
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            perror(json);
            rc = 1;
        } else {
            char date[32];
            time_t now = time(NULL);
            struct tm tm;
            gmtime_r(&now, &tm);
            strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
            struct utsname un;
            if (uname(&un) != 0)
                strcpy(un.nodename, "?");
            fprintf(f, "{\n  \"bench\": \"chain_inproc\",\n");
            fprintf(f, "  \"chain\": {\"nodes\": %d, \"pattern\": \"layernorm->gelu\", "
                       "\"batch\": 1, \"d\": %lld, \"dtype\": \"f16\"},\n",
                    2 * CHAIN_PAIRS, (long long)d);
            fprintf(f, "  \"iterations\": %d,\n  \"warmup\": %d,\n  \"blocks\": %d,\n"
                       "  \"order\": \"interleaved blocks, eager and graph alternating first\",\n"
                       "  \"timer\": \"events\",\n  \"wait\": \"hipEventSynchronize, both modes\",\n",
                    iters, warmup, blocks);
            fprintf(f, "  \"work\": ");
            json_string(f, work);
            fprintf(f, ",\n  \"outputs_equal\": %s,\n", equal ? "true" : "false");
            fprintf(f, "  \"results_us\": {\n");
            fprintf(f, "    \"eager\": {\"median\": %.3f, \"p90\": %.3f, \"min\": %.3f, "
                       "\"mean\": %.3f},\n",
                    se.median, se.p90, se.min, se.mean);
            fprintf(f, "    \"graph\": {\"median\": %.3f, \"p90\": %.3f, \"min\": %.3f, "
                       "\"mean\": %.3f}\n  },\n",
                    sg.median, sg.p90, sg.min, sg.mean);
            if (fe.median > 0)
                fprintf(f,
                        "  \"floor_copy_chain_us\": {\"eager\": {\"median\": %.3f, "
                        "\"p90\": %.3f}, \"graph\": {\"median\": %.3f, \"p90\": %.3f}, "
                        "\"outputs_equal\": %s},\n",
                        fe.median, fe.p90, fg.median, fg.p90, floor_equal ? "true" : "false");
            fprintf(f, "  \"speedup_median\": %.3f,\n  \"graph_nodes\": %zu,\n",
                    se.median / sg.median, nodes);
            fprintf(f, "  \"output_finite\": %s,\n", finite ? "true" : "false");
            fprintf(f, "  \"provenance\": {\n    \"device\": ");
            json_string(f, prop.name);
            fprintf(f, ",\n    \"arch\": ");
            json_string(f, arch);
            fprintf(f, ",\n    \"platform\": ");
            json_string(f, gg_gpu_platform());
            fprintf(f, ",\n    \"runtime\": ");
            json_string(f, runtime);
            fprintf(f, ",\n    \"driver_version\": %d,\n    \"blas\": ", driver);
            json_string(f, gg_gpu_blas());
            fprintf(f, ",\n    \"host\": ");
            json_string(f, un.nodename);
            fprintf(f, ",\n    \"date\": ");
            json_string(f, date);
            fprintf(f, "\n  }\n}\n");
            if (fclose(f) != 0) {
                perror(json);
                rc = 1;
            } else {
                printf("wrote %s\n", json);
            }
        }
    }

    CK(hipEventDestroy(e0));
    CK(hipEventDestroy(e1));
    CK(hipFree(px));
    CK(hipFree(pt));
    CK(hipFree(pw));
    CK(hipFree(pb));
    gg_gpu_ctx_destroy(c.ctx);
    CK(hipStreamDestroy(s));
    free(h);
    free(x0);
    free(eager_us);
    free(graph_us);
    return rc;
}
