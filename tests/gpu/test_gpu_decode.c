/* SPDX-License-Identifier: MIT */
/* The decode-step GPU kernels (embedding, rope, cache_write with and without
 * the batch word, attention_decode at GQA 1/4/8 and long contexts, argmax,
 * cast; attention_decode split along S at contexts 512 to 16384, replayed from a
 * graph) against the CPU references, on random data with odd sizes, every
 * floating dtype; the batch word written by gg_gpu_write_u32 on the stream.
 * SKIP (77) without a device.  --time: attention_decode alone at the 1B-class
 * decode shape, split and one-pass, in us/launch and GB/s of K+V read. */
#include "gg_hip.h"
#include "gpu_ops.h"
#include "ops.h"
#include "../decode_refs.h"
#include "gpu_compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static hipStream_t g_stream;
static gg_gpu_ctx *g_ctx;

/* Why a case failed: under exact the first element that differs, else the
 * farthest from the reference, with both values and the count that differ. */
static void print_diff(const char *label, const void *h_gpu, const void *h_cpu, gg_dtype dt,
                       int64_t n, int exact, double e)
{
    const size_t es = gg_dtype_size(dt);
    int64_t nbad = 0;
    for (int64_t i = 0; i < n; i++)
        nbad += memcmp((const char *)h_gpu + (size_t)i * es, (const char *)h_cpu + (size_t)i * es,
                       es) != 0;
    const int64_t at =
        exact ? gt_first_diff(h_gpu, h_cpu, dt, n) : gt_farthest(h_gpu, h_cpu, dt, n);
    char d[192];
    printf("FAIL: %s: differs (rel err %g): %lld of %lld elements differ in their bits; %s %s\n",
           label, e, (long long)nbad, (long long)n, exact ? "the first at" : "the farthest at",
           at < 0 ? "none" : gt_diff_str(d, sizeof d, h_gpu, h_cpu, dt, at));
}

/* Run op on the GPU and on the CPU from the same inputs (and the same
 * initial output, for in-place cache_write) and compare.
 *
 * Every copy and memset of a case is queued on the context's stream, the
 * one the kernel runs on: that stream is non-blocking, so a plain hipMemcpy
 * or hipMemset (the legacy default stream) is not ordered before the kernel
 * (a pageable hipMemcpy may return with its last DMA in flight, hipMemset
 * returns at once).  An op that writes all of y gets y as 0xff bytes (NaN
 * in every floating dtype, -1 in argmax's i32), not the host's zeros, so an
 * element it left unwritten fails the exact and the rel-L2 compare alike. */
static void run_case(const char *label, const gg_op_def *op, gg_tensor *in, int nin,
                     gg_tensor *out, const gg_op_attrs *attrs, int exact, int32_t word)
{
    void *d_in[GG_MAX_OPERANDS] = {0}, *d_out = NULL, *h_gpu = NULL, *h_cpu = NULL;
    gg_tensor din[GG_MAX_OPERANDS], dout = *out;
    size_t ob = gg_desc_bytes(&out->desc);
    const int update = op->id == GG_OP_CACHE_WRITE; /* y holds the cache it writes rows into */
    int ok = 1;
    for (int i = 0; i < nin; i++) {
        size_t b = gg_desc_bytes(&in[i].desc);
        din[i] = in[i];
        if (hipMalloc(&d_in[i], b) != hipSuccess ||
            hipMemcpyAsync(d_in[i], in[i].data, b, hipMemcpyHostToDevice, g_stream) != hipSuccess)
            ok = 0;
        din[i].data = d_in[i];
    }
    h_gpu = malloc(ob);
    h_cpu = malloc(ob);
    if (hipMalloc(&d_out, ob) != hipSuccess ||
        (update ? hipMemcpyAsync(d_out, out->data, ob, hipMemcpyHostToDevice, g_stream)
                : hipMemsetAsync(d_out, 0xff, ob, g_stream)) != hipSuccess)
        ok = 0;
    dout.data = d_out;
    int rc = -1;
    if (ok && word >= 0 && nin == 3)
        rc = gg_gpu_write_u32(g_stream, d_in[2], (uint32_t)word, NULL);
    if (ok)
        rc = gg_gpu_op_launch(g_ctx, op, din, nin, &dout, 1, attrs);
    if (rc == 0 &&
        (hipMemcpyAsync(h_gpu, d_out, ob, hipMemcpyDeviceToHost, g_stream) != hipSuccess ||
         hipStreamSynchronize(g_stream) != hipSuccess))
        rc = -1;
    memcpy(h_cpu, out->data, ob);
    gg_tensor cout = *out;
    cout.data = h_cpu;
    if (word >= 0 && nin == 3)
        *(int32_t *)in[2].data = word;
    gg_ops_run_cpu(op, in, nin, &cout, 1, attrs);
    double e = 0;
    if (rc == 0) {
        if (exact || out->desc.dtype == GG_DT_I32) {
            ok = !memcmp(h_gpu, h_cpu, ob);
        } else {
            int64_t n = gg_desc_numel(&out->desc);
            double *ref = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                ref[i] = gg_load(h_cpu, out->desc.dtype, i);
            e = dref_rel(h_gpu, out->desc.dtype, ref, n);
            ok = e <= dref_tol(out->desc.dtype);
            free(ref);
        }
    }
    if (rc == 0 && ok) {
        g_pass++;
    } else if (rc != 0) {
        g_fail++;
        printf("FAIL: %s: %s\n", label, gg_gpu_last_error());
    } else {
        g_fail++;
        print_diff(label, h_gpu, h_cpu, out->desc.dtype, gg_desc_numel(&out->desc),
                   exact || out->desc.dtype == GG_DT_I32, e);
    }
    for (int i = 0; i < nin; i++)
        hipFree(d_in[i]);
    hipFree(d_out);
    free(h_gpu);
    free(h_cpu);
}

static gg_tensor T(void *p, gg_dtype dt, int nd, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    gg_tensor t = {.data = p, .desc = {.dtype = dt, .ndim = nd, .dims = {d0, d1, d2, d3}}};
    return t;
}

/* attention_decode at one shape: q, k, v random, lens as given (B of them),
 * scale 0 for the default 1/sqrt(Dh). */
/* ramp: 0 random scores; 1 scores that rise along the positions by ~46 in
 * base 2 (q's elements all positive, K's shifted by 4 p / S), so that the
 * kernels' running max is raised again and again; -1 the same falling (the
 * max in the first tile); 2 a sawtooth rising by as much within every 128
 * positions, so that a warp's next tile (64 positions on) passes its max by
 * ~23 and the max is raised at nearly every tile of every chunk. */
static void attn_case_ramp(gg_dtype dt, int64_t B, int64_t Hq, int64_t Hkv, int64_t S,
                           int64_t Dh, const int32_t *lens_in, double scale, int ramp,
                           uint64_t *seed)
{
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)B);
    memcpy(lens, lens_in, sizeof(int32_t) * (size_t)B);
    void *q = malloc(B * Hq * Dh * 4), *k = malloc(B * S * Hkv * Dh * 4),
         *v = malloc(B * S * Hkv * Dh * 4), *y = calloc(B * Hq * Dh, 4);
    dref_fill(q, NULL, dt, B * Hq * Dh, seed, 2.0);
    dref_fill(k, NULL, dt, B * S * Hkv * Dh, seed, ramp ? 0.5 : 2.0);
    dref_fill(v, NULL, dt, B * S * Hkv * Dh, seed, 1.0);
    if (ramp) {
        for (int64_t i = 0; i < B * Hq * Dh; i++)
            gg_store(q, dt, i, fabsf(gg_load(q, dt, i)));
        for (int64_t b = 0; b < B; b++)
            for (int64_t p = 0; p < S; p++) {
                const float sh = ramp == 2  ? 4.0f * (float)(p % 128) / 128.0f
                                 : ramp > 0 ? 4.0f * (float)p / (float)S
                                            : 4.0f * (float)(S - 1 - p) / (float)S;
                for (int64_t i = ((b * S + p) * Hkv) * Dh; i < ((b * S + p + 1) * Hkv) * Dh; i++)
                    gg_store(k, dt, i, gg_load(k, dt, i) + sh);
            }
    }
    gg_tensor in[4] = {T(q, dt, 3, B, Hq, Dh, 0), T(k, dt, 4, B, S, Hkv, Dh),
                       T(v, dt, 4, B, S, Hkv, Dh), T(lens, GG_DT_I32, 1, B, 0, 0, 0)};
    gg_tensor out = T(y, dt, 3, B, Hq, Dh, 0);
    const gg_op_def *op = gg_ops_find("attention_decode");
    gg_op_attrs a;
    gg_ops_attr_defaults(op, &a);
    if (scale != 0.0)
        a.v[0] = scale;
    char label[200];
    int o = snprintf(label, sizeof label,
                     "attention_decode %s B %lld Hq %lld Hkv %lld S %lld Dh %lld%s%s lens",
                     gg_dtype_name(dt), (long long)B, (long long)Hq, (long long)Hkv, (long long)S,
                     (long long)Dh, scale != 0.0 ? " scale" : "",
                     ramp == 2 ? " sawtooth" : ramp > 0 ? " rising" : ramp < 0 ? " falling" : "");
    for (int64_t i = 0; i < B && o > 0 && o < (int)sizeof label - 12; i++)
        o += snprintf(label + o, sizeof label - (size_t)o, " %d", (int)lens[i]);
    run_case(label, op, in, 4, &out, scale != 0.0 ? &a : NULL, 0, -1);
    free(q), free(k), free(v), free(y), free(lens);
}

static void attn_case(gg_dtype dt, int64_t B, int64_t Hq, int64_t Hkv, int64_t S, int64_t Dh,
                      const int32_t *lens_in, double scale, uint64_t *seed)
{
    attn_case_ramp(dt, B, Hq, Hkv, S, Dh, lens_in, scale, 0, seed);
}

/* attention_decode captured once into a graph and replayed with other lens
 * each time (the split's counters must reset and its chunks follow len). */
static void attn_graph_case(gg_dtype dt, uint64_t *seed)
{
    const int64_t B = 2, Hq = 32, Hkv = 8, S = 2048, Dh = 64;
    const int32_t lens_run[4][2] = {{2048, 1}, {0, 777}, {1999, 2048}, {65, 64}};
    int32_t lens[2] = {1, 1};
    void *q = malloc(B * Hq * Dh * 4), *k = malloc(B * S * Hkv * Dh * 4),
         *v = malloc(B * S * Hkv * Dh * 4), *y = calloc(B * Hq * Dh, 4), *yc = calloc(B * Hq * Dh, 4);
    dref_fill(q, NULL, dt, B * Hq * Dh, seed, 2.0);
    dref_fill(k, NULL, dt, B * S * Hkv * Dh, seed, 2.0);
    dref_fill(v, NULL, dt, B * S * Hkv * Dh, seed, 1.0);
    gg_tensor in[4] = {T(q, dt, 3, B, Hq, Dh, 0), T(k, dt, 4, B, S, Hkv, Dh),
                       T(v, dt, 4, B, S, Hkv, Dh), T(lens, GG_DT_I32, 1, B, 0, 0, 0)};
    gg_tensor out = T(y, dt, 3, B, Hq, Dh, 0), din[4], dout = out;
    const gg_op_def *op = gg_ops_find("attention_decode");
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        size_t b = gg_desc_bytes(&in[i].desc);
        din[i] = in[i];
        din[i].data = NULL;
        if (hipMalloc(&din[i].data, b) != hipSuccess ||
            hipMemcpyAsync(din[i].data, in[i].data, b, hipMemcpyHostToDevice, g_stream) !=
                hipSuccess)
            ok = 0;
    }
    size_t ob = gg_desc_bytes(&out.desc);
    dout.data = NULL;
    if (hipMalloc(&dout.data, ob) != hipSuccess)
        ok = 0;
    hipGraph_t g = NULL;
    hipGraphExec_t ge = NULL;
    int rc = -1;
    /* the copies done before the capture begins: the graph holds only the
     * kernel, and nothing queued ahead of it is left to the capture */
    if (ok && hipStreamSynchronize(g_stream) == hipSuccess &&
        hipStreamBeginCapture(g_stream, hipStreamCaptureModeThreadLocal) == hipSuccess) {
        rc = gg_gpu_op_launch(g_ctx, op, din, 4, &dout, 1, NULL);
        if (hipStreamEndCapture(g_stream, &g) != hipSuccess ||
            hipGraphInstantiate(&ge, g, NULL, NULL, 0) != hipSuccess)
            rc = -1;
    }
    char label[160];
    for (int r = 0; r < 4; r++) {
        memcpy(lens, lens_run[r], sizeof lens);
        int rr = rc;
        /* lens and y's NaN poison on the graph's stream, ahead of the replay
         * (the last one synchronized: lens is free to change) */
        if (rr == 0 &&
            (hipMemcpyAsync(din[3].data, lens, sizeof lens, hipMemcpyHostToDevice, g_stream) !=
                 hipSuccess ||
             hipMemsetAsync(dout.data, 0xff, ob, g_stream) != hipSuccess ||
             hipGraphLaunch(ge, g_stream) != hipSuccess ||
             hipMemcpyAsync(y, dout.data, ob, hipMemcpyDeviceToHost, g_stream) != hipSuccess ||
             hipStreamSynchronize(g_stream) != hipSuccess))
            rr = -1;
        gg_tensor cout = out;
        cout.data = yc;
        gg_ops_run_cpu(op, in, 4, &cout, 1, NULL);
        double e = 0;
        const int64_t n = gg_desc_numel(&out.desc);
        if (rr == 0) {
            double *ref = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                ref[i] = gg_load(yc, dt, i);
            e = dref_rel(y, dt, ref, n);
            free(ref);
        }
        snprintf(label, sizeof label, "attention_decode %s graph replay %d lens %d %d",
                 gg_dtype_name(dt), r, (int)lens[0], (int)lens[1]);
        if (rr == 0 && e <= dref_tol(dt)) {
            g_pass++;
        } else if (rr != 0) {
            g_fail++;
            printf("FAIL: %s: %s\n", label, gg_gpu_last_error());
        } else {
            g_fail++;
            print_diff(label, y, yc, dt, n, 0, e);
        }
    }
    if (ge)
        hipGraphExecDestroy(ge);
    if (g)
        hipGraphDestroy(g);
    for (int i = 0; i < 4; i++)
        hipFree(din[i].data);
    hipFree(dout.data);
    free(q), free(k), free(v), free(y), free(yc);
}

/* --time: attention_decode alone at the 1B-class decode shape (batch 1, 32 q
 * heads, 8 kv heads, Dh 64, f16, len = S), 200 launches captured in a graph,
 * timed by events; the split kernel and (GFXGRAPH_ATTN_SPLIT=0) the
 * one-block-per-head kernel.  GB/s counts the K and V bytes read. */
static int attn_time(void)
{
    const int64_t B = 1, Hq = 32, Hkv = 8, Dh = 64, S_max = 4096;
    const int64_t Ss[] = {512, 2048, 4096};
    const int reps = 200, graphs = 10;
    const gg_op_def *op = gg_ops_find("attention_decode");
    void *dq = NULL, *dk = NULL, *dv = NULL, *dy = NULL, *dl = NULL;
    if (hipMalloc(&dq, B * Hq * Dh * 2) != hipSuccess ||
        hipMalloc(&dk, B * S_max * Hkv * Dh * 2) != hipSuccess ||
        hipMalloc(&dv, B * S_max * Hkv * Dh * 2) != hipSuccess ||
        hipMalloc(&dy, B * Hq * Dh * 2) != hipSuccess || hipMalloc(&dl, 4) != hipSuccess)
        return 1;
    /* small random-ish values */
    uint16_t *h = malloc(B * S_max * Hkv * Dh * 2);
    uint64_t seed = 99;
    dref_fill(h, NULL, GG_DT_F16, B * S_max * Hkv * Dh, &seed, 1.0);
    /* on the kernels' stream, as in the tests: h is freed once they landed */
    if (hipMemcpyAsync(dk, h, B * S_max * Hkv * Dh * 2, hipMemcpyHostToDevice, g_stream) !=
            hipSuccess ||
        hipMemcpyAsync(dv, h, B * S_max * Hkv * Dh * 2, hipMemcpyHostToDevice, g_stream) !=
            hipSuccess ||
        hipMemcpyAsync(dq, h, B * Hq * Dh * 2, hipMemcpyHostToDevice, g_stream) != hipSuccess ||
        hipStreamSynchronize(g_stream) != hipSuccess) {
        free(h);
        return 1;
    }
    free(h);
    for (int mode = 0; mode < 2; mode++) {
        gg_gpu_ctx *ctx = NULL;
        if (mode == 1)
            setenv("GFXGRAPH_ATTN_SPLIT", "0", 1);
        else
            unsetenv("GFXGRAPH_ATTN_SPLIT");
        if (gg_gpu_ctx_create(g_stream, &ctx) != 0)
            return 1;
        for (size_t si = 0; si < sizeof Ss / sizeof Ss[0]; si++) {
            const int64_t S = Ss[si];
            int32_t len = (int32_t)S;
            if (hipMemcpyAsync(dl, &len, 4, hipMemcpyHostToDevice, g_stream) != hipSuccess ||
                hipStreamSynchronize(g_stream) != hipSuccess)
                return 1;
            gg_tensor in[4] = {T(dq, GG_DT_F16, 3, B, Hq, Dh, 0), T(dk, GG_DT_F16, 4, B, S, Hkv, Dh),
                               T(dv, GG_DT_F16, 4, B, S, Hkv, Dh), T(dl, GG_DT_I32, 1, B, 0, 0, 0)};
            gg_tensor out = T(dy, GG_DT_F16, 3, B, Hq, Dh, 0);
            hipGraph_t g = NULL;
            hipGraphExec_t ge = NULL;
            int rc = 0;
            if (hipStreamBeginCapture(g_stream, hipStreamCaptureModeThreadLocal) != hipSuccess)
                return 1;
            for (int i = 0; i < reps && rc == 0; i++)
                rc = gg_gpu_op_launch(ctx, op, in, 4, &out, 1, NULL);
            if (hipStreamEndCapture(g_stream, &g) != hipSuccess || rc ||
                hipGraphInstantiate(&ge, g, NULL, NULL, 0) != hipSuccess)
                return 1;
            hipEvent_t e0, e1;
            hipEventCreate(&e0);
            hipEventCreate(&e1);
            hipGraphLaunch(ge, g_stream); /* warm */
            hipStreamSynchronize(g_stream);
            hipEventRecord(e0, g_stream);
            for (int i = 0; i < graphs; i++)
                hipGraphLaunch(ge, g_stream);
            hipEventRecord(e1, g_stream);
            hipEventSynchronize(e1);
            float ms = 0;
            hipEventElapsedTime(&ms, e0, e1);
            const double us = ms * 1000.0 / (reps * graphs);
            const double bytes = 2.0 * (double)(B * S * Hkv * Dh * 2);
            printf("time attention_decode %s S %lld: %.2f us/launch, %.1f GB/s (K+V %.2f MiB)\n",
                   mode ? "one-pass(GFXGRAPH_ATTN_SPLIT=0)" : "split", (long long)S, us,
                   bytes / (us * 1e3), bytes / (1 << 20));
            hipEventDestroy(e0);
            hipEventDestroy(e1);
            hipGraphExecDestroy(ge);
            hipGraphDestroy(g);
        }
        gg_gpu_ctx_destroy(ctx);
    }
    unsetenv("GFXGRAPH_ATTN_SPLIT");
    /* the device-to-device copy rate, for scale */
    {
        void *a = NULL, *b = NULL;
        const size_t nb = (size_t)256 << 20;
        if (hipMalloc(&a, nb) == hipSuccess && hipMalloc(&b, nb) == hipSuccess) {
            hipEvent_t e0, e1;
            hipEventCreate(&e0);
            hipEventCreate(&e1);
            hipMemcpyAsync(b, a, nb, hipMemcpyDeviceToDevice, g_stream);
            hipEventRecord(e0, g_stream);
            for (int i = 0; i < 10; i++)
                hipMemcpyAsync(b, a, nb, hipMemcpyDeviceToDevice, g_stream);
            hipEventRecord(e1, g_stream);
            hipEventSynchronize(e1);
            float ms = 0;
            hipEventElapsedTime(&ms, e0, e1);
            printf("time device copy: %.1f GB/s (read + write)\n", 2.0 * 10 * nb / (ms * 1e6));
        }
        hipFree(a);
        hipFree(b);
    }
    hipFree(dq), hipFree(dk), hipFree(dv), hipFree(dy), hipFree(dl);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0;
    if (hipGetDeviceCount(&n) != hipSuccess || n < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    if (hipStreamCreateWithFlags(&g_stream, hipStreamNonBlocking) != hipSuccess ||
        gg_gpu_ctx_create(g_stream, &g_ctx) != 0) {
        printf("FAIL: context: %s\n", gg_gpu_last_error());
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "--time") == 0)
        return attn_time();
    uint64_t seed = 12345;
    const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    char label[160];
    for (int di = 0; di < 3; di++) {
        gg_dtype dt = dts[di];
        const char *dn = gg_dtype_name(dt);
        for (int ev = 0; ev < 2; ev++) { /* embedding: odd D (scalar), D 64 (16-byte units) */
            const int64_t B = 5, V = 53, D = ev ? 64 : 41;
            int32_t ids[5] = {0, 52, 53, -1, 17};
            void *tab = malloc(V * D * 4), *y = calloc(B * D, 4);
            dref_fill(tab, NULL, dt, V * D, &seed, 1.0);
            gg_tensor in[2] = {T(ids, GG_DT_I32, 1, B, 0, 0, 0), T(tab, dt, 2, V, D, 0, 0)};
            gg_tensor out = T(y, dt, 2, B, D, 0, 0);
            snprintf(label, sizeof label, "embedding %s D %lld", dn, (long long)D);
            run_case(label, gg_ops_find("embedding"), in, 2, &out, NULL, 1, -1);
            free(tab), free(y);
        }
        /* rope: Dh 24 (neox scalar in f16/bf16, units in f32; gptj rotary_dim
         * 16 in units with a pass-through unit), Dh 128 (units: whole, and
         * neox rotary_dim 64 with the rest passed through; gptj rotary_dim 40:
         * scalar in f16/bf16) */
        const int rcfg[6][3] = {{24, 0, 0}, {24, 1, 16}, {128, 0, 0}, {128, 0, 64}, {128, 1, 0},
                                {128, 1, 40}};
        for (int rc = 0; rc < 6; rc++) {
            const int style = rcfg[rc][1];
            const int64_t B = 3, H = rc < 2 ? 5 : 8, Dh = rcfg[rc][0];
            int32_t pos[3] = {0, 36, 4000};
            void *x = malloc(B * H * Dh * 4), *y = calloc(B * H * Dh, 4);
            dref_fill(x, NULL, dt, B * H * Dh, &seed, 1.0);
            gg_op_attrs a;
            gg_ops_attr_defaults(gg_ops_find("rope"), &a);
            a.v[1] = style;
            a.v[2] = rcfg[rc][2];
            gg_tensor in[2] = {T(x, dt, 3, B, H, Dh, 0), T(pos, GG_DT_I32, 1, B, 0, 0, 0)};
            gg_tensor out = T(y, dt, 3, B, H, Dh, 0);
            snprintf(label, sizeof label, "rope %s %s Dh %lld rotary_dim %d", dn,
                     style ? "gptj" : "neox", (long long)Dh, rcfg[rc][2]);
            run_case(label, gg_ops_find("rope"), in, 2, &out, &a, 0, -1);
            free(x), free(y);
        }
        for (int bw = -2; bw <= 3; bw++) { /* cache_write; word 3 of bucket 4; -2: Dh 5 */
            const int64_t B = 4, S = 37, Hkv = 3, Dh = bw == -2 ? 5 : 24, row = Hkv * Dh;
            int32_t pos[4] = {0, 36, bw == 3 ? 5 : 37, bw == 3 ? 6 : -1}, word = 0;
            void *x = malloc(B * row * 4), *c = malloc(B * S * row * 4);
            dref_fill(x, NULL, dt, B * row, &seed, 1.0);
            dref_fill(c, NULL, dt, B * S * row, &seed, 1.0);
            gg_tensor in[3] = {T(x, dt, 3, B, Hkv, Dh, 0), T(pos, GG_DT_I32, 1, B, 0, 0, 0),
                               T(&word, GG_DT_I32, 1, 1, 0, 0, 0)};
            gg_tensor out = T(c, dt, 4, B, S, Hkv, Dh);
            snprintf(label, sizeof label, "cache_write %s Dh %lld batch word %d", dn,
                     (long long)Dh, bw);
            run_case(label, gg_ops_find("cache_write"), in, bw < 0 ? 2 : 3, &out, NULL, 1, bw);
            free(x), free(c);
        }
        const int hcfg[4][3] = {{4, 4, 37}, {8, 2, 37}, {8, 1, 37}, {8, 2, 2100}};
        for (int hc = 0; hc < 4; hc++) { /* attention_decode */
            const int64_t B = 3, Dh = hc == 3 ? 64 : 24, Hq = hcfg[hc][0], Hkv = hcfg[hc][1],
                          S = hcfg[hc][2];
            int32_t lens[3] = {0, (int32_t)S, (int32_t)(S / 2 + 1)};
            void *q = malloc(B * Hq * Dh * 4), *k = malloc(B * S * Hkv * Dh * 4),
                 *v = malloc(B * S * Hkv * Dh * 4), *y = calloc(B * Hq * Dh, 4);
            dref_fill(q, NULL, dt, B * Hq * Dh, &seed, 2.0);
            dref_fill(k, NULL, dt, B * S * Hkv * Dh, &seed, 2.0);
            dref_fill(v, NULL, dt, B * S * Hkv * Dh, &seed, 1.0);
            gg_tensor in[4] = {T(q, dt, 3, B, Hq, Dh, 0), T(k, dt, 4, B, S, Hkv, Dh),
                               T(v, dt, 4, B, S, Hkv, Dh), T(lens, GG_DT_I32, 1, B, 0, 0, 0)};
            gg_tensor out = T(y, dt, 3, B, Hq, Dh, 0);
            snprintf(label, sizeof label, "attention_decode %s Hq %lld Hkv %lld S %lld", dn,
                     (long long)Hq, (long long)Hkv, (long long)S);
            run_case(label, gg_ops_find("attention_decode"), in, 4, &out, NULL, 0, -1);
            free(q), free(k), free(v), free(y);
        }
        { /* attention_decode split along S: long contexts, lens 0, 1, S, odd, GQA 1/4/8/12 */
            const int64_t Sl[3] = {512, 2048, 4096};
            const int gq[4] = {1, 4, 8, 12};
            for (int si = 0; si < 3; si++)
                for (int gi = 0; gi < 4; gi++) {
                    const int64_t S = Sl[si], Hkv = gq[gi] == 4 ? 8 : 2, Hq = Hkv * gq[gi];
                    const int32_t l5[5] = {0, 1, (int32_t)S, (int32_t)(S / 3) | 1, (int32_t)S - 1};
                    attn_case(dt, 5, Hq, Hkv, S, 64, l5, 0.0, &seed);
                }
            const int32_t one[1] = {2048}, odd[1] = {1235}, big[1] = {5000}, neg[2] = {-3, 129};
            attn_case(dt, 1, 32, 8, 2048, 64, one, 0.0, &seed); /* the 1B-class step */
            attn_case(dt, 1, 32, 8, 2048, 64, odd, 0.0, &seed);
            attn_case(dt, 1, 32, 8, 512, 64, big, 0.0, &seed); /* len above S: clamped */
            attn_case(dt, 2, 16, 4, 1024, 128, neg, 0.3, &seed); /* Dh 128, scale attr */
            attn_case(dt, 2, 8, 8, 1024, 32, neg, 0.0, &seed);   /* Dh 32 */
            attn_case(dt, 2, 8, 2, 700, 40, neg, 0.0, &seed);    /* Dh 40: one-pass kernel */
            attn_case(dt, 2, 4, 2, 1024, 64, neg, 0.0, &seed);   /* GQA 2 */
            attn_case(dt, 2, 8, 4, 1024, 16, neg, 0.0, &seed);   /* Dh 16 (f32: 4 lanes) */
            attn_case(dt, 2, 16, 2, 1024, 256, neg, 0.0, &seed); /* Dh 256, GQA 8 */
            attn_case(dt, 1, 32, 8, 100, 64, odd, 0.0, &seed);   /* short S: one pass */
            /* batch 16: the chunk count fitted to whole waves (2 at 2048); odd
             * lens leave ragged last tiles in the warps' three-tile rings */
            const int32_t l16[16] = {2048, 1, 0,   2047, 1235, 17,  999,  2048,
                                     64,   65, 1500, 2000, 33,  1024, 1777, 3};
            attn_case(dt, 16, 32, 8, 2048, 64, l16, 0.0, &seed);
            const int32_t l3[3] = {4001, 4096, 77};
            attn_case(dt, 3, 16, 4, 4096, 32, l3, 0.0, &seed); /* Dh 32, many tiles a warp */
            /* Dh 128 at batch 1: 16 chunks of two tiles a warp (the second
             * one's K loaded with the first), merged through global memory;
             * GQA 1, 4, 8 and 16 (all 16 rows of the mma) with lens 0, S and
             * odd */
            attn_case(dt, 1, 32, 8, 2048, 128, one, 0.0, &seed);
            attn_case(dt, 1, 32, 8, 2048, 128, odd, 0.0, &seed);
            const int32_t l3c[3] = {0, 2048, 1999};
            attn_case(dt, 3, 8, 8, 2048, 128, l3c, 0.0, &seed);
            attn_case(dt, 3, 8, 1, 2048, 128, l3c, 0.0, &seed);
            attn_case(dt, 3, 32, 2, 2048, 128, l3c, 0.0, &seed);
            /* more chunks than a cluster holds (context 16384 at batch 1):
             * merged through global memory, two batches of loads */
            const int32_t ll[1] = {16383};
            attn_case(dt, 1, 32, 8, 16384, 64, ll, 0.0, &seed);
            /* scores rising along the chunk (the running max raised tile
             * after tile) and falling (raised once), GQA 4 and 12, Dh 64
             * and 128, one chunk, clusters and the global merge */
            const int32_t lr[2] = {4096, 3001};
            for (int rp = -1; rp <= 2; rp += rp == -1 ? 2 : 1) {
                attn_case_ramp(dt, 2, 32, 8, 4096, 64, lr, 0.0, rp, &seed);
                attn_case_ramp(dt, 2, 24, 2, 4096, 64, lr, 0.0, rp, &seed);
                attn_case_ramp(dt, 2, 32, 8, 4096, 128, lr, 0.0, rp, &seed);
                attn_case_ramp(dt, 2, 32, 2, 4096, 128, lr, 0.0, rp, &seed);
                attn_case_ramp(dt, 1, 32, 8, 2048, 64, lr, 0.0, rp, &seed);
                attn_case_ramp(dt, 1, 32, 8, 100, 64, lr + 1, 0.0, rp, &seed);
                attn_case_ramp(dt, 1, 32, 2, 100, 128, lr + 1, 0.0, rp, &seed);
                attn_case_ramp(dt, 1, 24, 2, 100, 64, lr + 1, 0.0, rp, &seed);
            }
            /* chunks in clusters (sm_90) of every size up to 8: batch 16 at
             * Dh 128 (one pass on an H100) and batch 8 (2 chunks: a cluster
             * of 2 blocks of 8 warps), batch 1 at contexts the pick cuts
             * into 5, 6 and 7 chunks; with the sawtooth */
            attn_case_ramp(dt, 16, 32, 8, 2048, 128, l16, 0.0, 2, &seed);
            attn_case_ramp(dt, 8, 32, 8, 2048, 128, l16 + 8, 0.0, 2, &seed);
            const int32_t l1c[1] = {447};
            attn_case_ramp(dt, 1, 32, 8, 320, 64, l1c, 0.0, 2, &seed);
            attn_case_ramp(dt, 1, 32, 8, 384, 64, l1c, 0.0, 2, &seed);
            attn_case_ramp(dt, 1, 32, 8, 448, 64, l1c, 0.0, 2, &seed);
            attn_case_ramp(dt, 1, 64, 4, 448, 128, l1c, 0.0, 2, &seed);
            attn_graph_case(dt, &seed);
        }
        for (int av = 0; av < 2; av++) { /* argmax: odd V (scalar), V 32000 (units) */
            const int64_t B = 5, V = av ? 32000 : 32001;
            void *x = malloc(B * V * 4);
            int32_t y[5] = {0};
            dref_fill(x, NULL, dt, B * V, &seed, 1.0);
            gg_store(x, dt, V + 100, 5.0f), gg_store(x, dt, V + 30000, 5.0f);
            gg_tensor in = T(x, dt, 2, B, V, 0, 0), out = T(y, GG_DT_I32, 1, B, 0, 0, 0);
            if (av) /* a whole row of -inf: index 0; a NaN beats everything */
                for (int64_t i = 0; i < V; i++) {
                    gg_store(x, dt, 3 * V + i, -INFINITY);
                    if (i == 777)
                        gg_store(x, dt, 4 * V + i, NAN);
                }
            snprintf(label, sizeof label, "argmax %s V %lld", dn, (long long)V);
            run_case(label, gg_ops_find("argmax"), &in, 1, &out, NULL, 1, -1);
            free(x);
        }
        for (int oi = 0; oi < 3; oi++) { /* cast */
            void *x = malloc(333 * 4), *y = calloc(333, 4);
            dref_fill(x, NULL, dt, 333, &seed, 100.0);
            gg_tensor in = T(x, dt, 2, 9, 37, 0, 0), out = T(y, dts[oi], 2, 9, 37, 0, 0);
            snprintf(label, sizeof label, "cast %s -> %s", dn, gg_dtype_name(dts[oi]));
            run_case(label, gg_ops_find("cast"), &in, 1, &out, NULL, 1, -1);
            free(x), free(y);
        }
    }
    printf("test_gpu_decode: %d passed, %d failed\n", g_pass, g_fail);
    gg_gpu_ctx_destroy(g_ctx);
    return g_fail ? 1 : 0;
}
