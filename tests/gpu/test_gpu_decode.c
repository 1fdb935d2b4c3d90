/* The decode-step GPU kernels (embedding, rope, cache_write with and without
 * the batch word, attention_decode at GQA 1/4/8 and long contexts, argmax,
 * cast) against the CPU references, on random data with odd sizes, every
 * floating dtype; the batch word written by gg_gpu_write_u32 on the stream.
 * SKIP (77) without a device. */
#include "gg_hip.h"
#include "gpu_ops.h"
#include "ops.h"
#include "../decode_refs.h"

#include <stdio.h>

static int g_pass, g_fail;
static hipStream_t g_stream;
static gg_gpu_ctx *g_ctx;

/* Run op on the GPU and on the CPU from the same inputs (and the same
 * initial output, for in-place cache_write) and compare. */
static void run_case(const char *label, const gg_op_def *op, gg_tensor *in, int nin,
                     gg_tensor *out, const gg_op_attrs *attrs, int exact, int32_t word)
{
    void *d_in[GG_MAX_OPERANDS] = {0}, *d_out = NULL, *h_gpu = NULL, *h_cpu = NULL;
    gg_tensor din[GG_MAX_OPERANDS], dout = *out;
    size_t ob = gg_desc_bytes(&out->desc);
    int ok = 1;
    for (int i = 0; i < nin; i++) {
        size_t b = gg_desc_bytes(&in[i].desc);
        din[i] = in[i];
        if (hipMalloc(&d_in[i], b) != hipSuccess ||
            hipMemcpy(d_in[i], in[i].data, b, hipMemcpyHostToDevice) != hipSuccess)
            ok = 0;
        din[i].data = d_in[i];
    }
    h_gpu = malloc(ob);
    h_cpu = malloc(ob);
    if (hipMalloc(&d_out, ob) != hipSuccess ||
        hipMemcpy(d_out, out->data, ob, hipMemcpyHostToDevice) != hipSuccess)
        ok = 0;
    dout.data = d_out;
    int rc = -1;
    if (ok && word >= 0 && nin == 3)
        rc = gg_gpu_write_u32(g_stream, d_in[2], (uint32_t)word, NULL);
    if (ok)
        rc = gg_gpu_op_launch(g_ctx, op, din, nin, &dout, 1, attrs);
    if (rc == 0 && (hipStreamSynchronize(g_stream) != hipSuccess ||
                    hipMemcpy(h_gpu, d_out, ob, hipMemcpyDeviceToHost) != hipSuccess))
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
    if (rc == 0 && ok)
        g_pass++;
    else {
        g_fail++;
        printf("FAIL: %s: %s (rel err %g)\n", label, rc ? gg_gpu_last_error() : "differs", e);
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

int main(void)
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
    uint64_t seed = 12345;
    const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    char label[160];
    for (int di = 0; di < 3; di++) {
        gg_dtype dt = dts[di];
        const char *dn = gg_dtype_name(dt);
        { /* embedding */
            const int64_t B = 5, V = 53, D = 41;
            int32_t ids[5] = {0, 52, 53, -1, 17};
            void *tab = malloc(V * D * 4), *y = calloc(B * D, 4);
            dref_fill(tab, NULL, dt, V * D, &seed, 1.0);
            gg_tensor in[2] = {T(ids, GG_DT_I32, 1, B, 0, 0, 0), T(tab, dt, 2, V, D, 0, 0)};
            gg_tensor out = T(y, dt, 2, B, D, 0, 0);
            snprintf(label, sizeof label, "embedding %s", dn);
            run_case(label, gg_ops_find("embedding"), in, 2, &out, NULL, 1, -1);
            free(tab), free(y);
        }
        for (int style = 0; style < 2; style++) { /* rope */
            const int64_t B = 3, H = 5, Dh = 24;
            int32_t pos[3] = {0, 36, 200};
            void *x = malloc(B * H * Dh * 4), *y = calloc(B * H * Dh, 4);
            dref_fill(x, NULL, dt, B * H * Dh, &seed, 1.0);
            gg_op_attrs a;
            gg_ops_attr_defaults(gg_ops_find("rope"), &a);
            a.v[1] = style;
            a.v[2] = style ? 16 : 0;
            gg_tensor in[2] = {T(x, dt, 3, B, H, Dh, 0), T(pos, GG_DT_I32, 1, B, 0, 0, 0)};
            gg_tensor out = T(y, dt, 3, B, H, Dh, 0);
            snprintf(label, sizeof label, "rope %s %s", dn, style ? "gptj rotary_dim 16" : "neox");
            run_case(label, gg_ops_find("rope"), in, 2, &out, &a, 0, -1);
            free(x), free(y);
        }
        for (int bw = -1; bw <= 3; bw++) { /* cache_write; word 3 of bucket 4 */
            const int64_t B = 4, S = 37, Hkv = 3, Dh = 24, row = Hkv * Dh;
            int32_t pos[4] = {0, 36, bw == 3 ? 5 : 37, bw == 3 ? 6 : -1}, word = 0;
            void *x = malloc(B * row * 4), *c = malloc(B * S * row * 4);
            dref_fill(x, NULL, dt, B * row, &seed, 1.0);
            dref_fill(c, NULL, dt, B * S * row, &seed, 1.0);
            gg_tensor in[3] = {T(x, dt, 3, B, Hkv, Dh, 0), T(pos, GG_DT_I32, 1, B, 0, 0, 0),
                               T(&word, GG_DT_I32, 1, 1, 0, 0, 0)};
            gg_tensor out = T(c, dt, 4, B, S, Hkv, Dh);
            snprintf(label, sizeof label, "cache_write %s batch word %d", dn, bw);
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
        { /* argmax */
            const int64_t B = 5, V = 32001;
            void *x = malloc(B * V * 4);
            int32_t y[5] = {0};
            dref_fill(x, NULL, dt, B * V, &seed, 1.0);
            gg_store(x, dt, V + 100, 5.0f), gg_store(x, dt, V + 30000, 5.0f);
            gg_tensor in = T(x, dt, 2, B, V, 0, 0), out = T(y, GG_DT_I32, 1, B, 0, 0, 0);
            snprintf(label, sizeof label, "argmax %s", dn);
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
