/* SPDX-License-Identifier: MIT */
/* The data-movement, matmul and attention kernels (gpu_movement.hip,
 * gpu_matmul.hip, gpu_sdpa.hip) and embedding with i32/i64 ids of 1 to 3
 * dims (gpu_decode.hip) against the CPU references, on the same random
 * inputs: strided_copy, cat and index_copy in every dtype, bit-exact, on
 * layouts that take the 16-byte units and layouts that do not (odd rows, an
 * offset view); embedding bit-exact; bmm and sdpa in every floating dtype
 * within the dtype's tolerance (GQA, masks bool and additive, causal, a
 * fully masked row, keys past one tile, M past one 64-row tile).  SKIP (77)
 * without a device. */
#include "gg_hip.h"
#include "gpu_compare.h"
#include "gpu_ops.h"
#include "ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static hipStream_t g_stream;
static gg_gpu_ctx *g_ctx;
static uint64_t g_rng = 0x452821e638d01377ull;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* n random elements of dt: bit patterns for the moves (exact compare), values
 * in [-amp, amp) for the arithmetic (amp > 0). */
static void *fill(gg_dtype dt, int64_t n, double amp)
{
    const size_t es = gg_dtype_size(dt);
    unsigned char *p = malloc((size_t)n * es + 16);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        if (amp > 0) {
            gg_store(p, dt, i, (float)(((double)(r >> 11) / 4503599627370496.0 * 2 - 1) * amp));
            continue;
        }
        if (dt == GG_DT_BOOL)
            r &= 1;
        memcpy(p + (size_t)i * es, &r, es);
    }
    return p;
}

static gg_tensor T(void *p, gg_dtype dt, int nd, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    gg_tensor t = {.data = p, .desc = {.dtype = dt, .ndim = nd, .dims = {d0, d1, d2, d3}}};
    return t;
}

/* Run op on the GPU and on the CPU from the same inputs and the same initial
 * output (index_copy writes into it), and compare: bytes when exact, else
 * the relative L2 of the GPU's values against the CPU's.  A failure names
 * an element: under exact the first that differs, else the first that fails
 * the NaN and zero checks or, with none, the farthest from the reference.
 *
 * Every copy and memset of a case is queued on the context's stream, the
 * one the kernel runs on: that stream is non-blocking, so a plain hipMemcpy
 * or hipMemset (the legacy default stream) is not ordered before the
 * kernel: a pageable hipMemcpy may return with its last DMA still in flight
 * and hipMemset returns at once.  An op that writes all of y gets y as 0xff
 * bytes on the device (NaN in the floating dtypes, no bool), so an element
 * it left unwritten fails either compare; index_copy, which writes rows
 * into y, starts from y's values as the CPU does. */
static void run_case(const char *label, const gg_op_def *op, const gg_tensor *in, int nin,
                     const gg_tensor *out, const gg_op_attrs *attrs, int exact)
{
    void *d_in[GG_MAX_OPERANDS] = {0}, *d_out = NULL;
    gg_tensor din[GG_MAX_OPERANDS], dout = *out;
    const size_t ob = gg_desc_bytes(&out->desc);
    void *h_gpu = malloc(ob), *h_cpu = malloc(ob);
    int ok = 1;
    for (int i = 0; i < nin; i++) {
        const size_t b = gg_desc_bytes(&in[i].desc);
        din[i] = in[i];
        if (hipMalloc(&d_in[i], b) != hipSuccess ||
            hipMemcpyAsync(d_in[i], in[i].data, b, hipMemcpyHostToDevice, g_stream) != hipSuccess)
            ok = 0;
        din[i].data = d_in[i];
    }
    const int update = op->id == GG_OP_INDEX_COPY;
    if (hipMalloc(&d_out, ob) != hipSuccess ||
        (update ? hipMemcpyAsync(d_out, out->data, ob, hipMemcpyHostToDevice, g_stream)
                : hipMemsetAsync(d_out, 0xff, ob, g_stream)) != hipSuccess)
        ok = 0;
    dout.data = d_out;
    int rc = ok ? gg_gpu_op_launch(g_ctx, op, din, nin, &dout, 1, attrs) : -1;
    if (rc == 0 &&
        (hipMemcpyAsync(h_gpu, d_out, ob, hipMemcpyDeviceToHost, g_stream) != hipSuccess ||
         hipStreamSynchronize(g_stream) != hipSuccess))
        rc = -1;
    memcpy(h_cpu, out->data, ob);
    gg_tensor cout = *out;
    cout.data = h_cpu;
    gg_ops_run_cpu(op, in, nin, &cout, 1, attrs);
    const gg_dtype dt = out->desc.dtype;
    const int64_t n = gg_desc_numel(&out->desc);
    double e = 0;
    int64_t at = -1;
    if (rc == 0) {
        if (exact) {
            ok = !memcmp(h_gpu, h_cpu, ob);
            at = gt_first_diff(h_gpu, h_cpu, dt, n);
        } else {
            double num = 0, den = 0;
            int nan_ok = 1;
            for (int64_t i = 0; i < n; i++) {
                const double g = gg_load(h_gpu, dt, i), c = gg_load(h_cpu, dt, i);
                if (isnan(c) || isnan(g)) {
                    nan_ok &= isnan(c) && isnan(g);
                    if (!nan_ok && at < 0)
                        at = i;
                    continue;
                }
                nan_ok &= (c == 0) == (g == 0) || fabs(c - g) < 1e-6;
                if (!nan_ok && at < 0)
                    at = i;
                num += (g - c) * (g - c);
                den += c * c;
            }
            e = sqrt(num / (den > 0 ? den : 1));
            ok = nan_ok && e <= (dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 2e-3 : 1e-2);
            if (at < 0)
                at = gt_farthest(h_gpu, h_cpu, dt, n);
        }
    }
    if (rc == 0 && ok) {
        g_pass++;
    } else if (rc != 0) {
        g_fail++;
        printf("FAIL: %s: %s\n", label, gg_gpu_last_error());
    } else {
        char d[192];
        g_fail++;
        printf("FAIL: %s: differs (rel err %g); %s\n", label, e,
               at < 0 ? "no element differs" : gt_diff_str(d, sizeof d, h_gpu, h_cpu, dt, at));
    }
    for (int i = 0; i < nin; i++)
        hipFree(d_in[i]);
    hipFree(d_out);
    free(h_gpu);
    free(h_cpu);
}

static const gg_dtype all_dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16,
                                   GG_DT_I32, GG_DT_I64, GG_DT_BOOL};
static const gg_dtype f_dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};

static void movement_cases(gg_dtype dt)
{
    const char *dn = gg_dtype_name(dt);
    char label[200];
    const gg_op_def *sc = gg_ops_find("strided_copy"), *cat = gg_ops_find("cat"),
                    *ic = gg_ops_find("index_copy");
    /* strided_copy: n, y dims, strides */
    const struct {
        const char *what;
        int64_t n;
        int nd;
        int64_t d[4], s[4];
    } sv[] = {
        {"transpose [33, 17]", 33 * 17, 2, {17, 33}, {1, 17}},
        {"permute (0, 2, 1, 3) [2, 5, 3, 64]", 2 * 5 * 3 * 64, 4, {2, 3, 5, 64}, {960, 64, 192, 1}},
        {"expand [1, 64] -> [7, 64]", 64, 2, {7, 64}, {0, 1}},
        {"slice [:, 8:72] of [9, 80] (16-byte rows)", 9 * 80 - 8, 2, {9, 64}, {80, 1}},
        {"slice [1::2, 3:10] of [11, 13]", 11 * 13 - 16, 2, {5, 7}, {26, 1}},
        {"contiguous [4099]", 4099, 1, {4099}, {1}},
    };
    for (size_t i = 0; i < sizeof sv / sizeof sv[0]; i++) {
        int64_t ny = 1;
        for (int d = 0; d < sv[i].nd; d++)
            ny *= sv[i].d[d];
        void *x = fill(dt, sv[i].n, 0), *y = fill(dt, ny, 0);
        gg_op_attrs a;
        gg_ops_attr_defaults(sc, &a);
        for (int d = 0; d < sv[i].nd; d++)
            a.v[d] = (double)sv[i].s[d];
        gg_tensor in = T(x, dt, 1, sv[i].n, 0, 0, 0);
        gg_tensor out = T(y, dt, sv[i].nd, sv[i].d[0], sv[i].d[1], sv[i].d[2], sv[i].d[3]);
        snprintf(label, sizeof label, "strided_copy %s %s", dn, sv[i].what);
        run_case(label, sc, &in, 1, &out, &a, 1);
        free(x), free(y);
    }
    /* cat: [2, a_k, 64] along 1 (16-byte rows) and [3, 5, b_k] along -1 (odd) */
    for (int v = 0; v < 2; v++) {
        const int64_t sz[3] = {3, 1, 5};
        gg_tensor in[3];
        int64_t tot = 0;
        for (int k = 0; k < 3; k++) {
            in[k] = v ? T(fill(dt, 15 * sz[k], 0), dt, 3, 3, 5, sz[k], 0)
                      : T(fill(dt, 2 * sz[k] * 64, 0), dt, 3, 2, sz[k], 64, 0);
            tot += sz[k];
        }
        void *y = fill(dt, v ? 15 * tot : 2 * tot * 64, 0);
        gg_tensor out = v ? T(y, dt, 3, 3, 5, tot, 0) : T(y, dt, 3, 2, tot, 64, 0);
        gg_op_attrs a;
        gg_ops_attr_defaults(cat, &a);
        a.v[0] = v ? -1 : 1;
        snprintf(label, sizeof label, "cat %s of 3 along %s", dn, v ? "-1 (odd rows)" : "1");
        run_case(label, cat, in, 3, &out, &a, 1);
        for (int k = 0; k < 3; k++)
            free(in[k].data);
        free(y);
    }
    /* index_copy: a StaticCache [2, 4, 37, Dh] along 2, Dh 64 (units) and 5 */
    for (int v = 0; v < 4; v++) {
        const int64_t Dh = v & 1 ? 5 : 64;
        const gg_dtype idt = v & 2 ? GG_DT_I64 : GG_DT_I32;
        int64_t i64[3] = {36, -1, 4};
        int32_t i32[3] = {36, 37, 0};
        void *self = fill(dt, 2 * 4 * 37 * Dh, 0), *src = fill(dt, 2 * 4 * 3 * Dh, 0);
        gg_tensor in[2] = {T(src, dt, 4, 2, 4, 3, Dh),
                           T(v & 2 ? (void *)i64 : (void *)i32, idt, 1, 3, 0, 0, 0)};
        gg_tensor out = T(self, dt, 4, 2, 4, 37, Dh);
        gg_op_attrs a;
        gg_ops_attr_defaults(ic, &a);
        a.v[0] = 2;
        snprintf(label, sizeof label, "index_copy %s %s index, Dh %lld", dn,
                 gg_dtype_name(idt), (long long)Dh);
        run_case(label, ic, in, 2, &out, &a, 1);
        free(self), free(src);
    }
}

static void float_cases(gg_dtype dt)
{
    const char *dn = gg_dtype_name(dt);
    char label[200];
    const gg_op_def *emb = gg_ops_find("embedding"), *bmm = gg_ops_find("bmm"),
                    *sdpa = gg_ops_find("sdpa");
    /* embedding: i32 / i64 ids [2, 3], D 64 and 41 */
    for (int v = 0; v < 4; v++) {
        const int64_t V = 53, D = v & 1 ? 41 : 64;
        int32_t i32[6] = {0, 52, 53, -1, 17, 3};
        int64_t i64[6] = {0, 52, 4294967299ll, -1, 17, 3};
        void *tab = fill(dt, V * D, 1.0), *y = fill(dt, 6 * D, 1.0);
        gg_tensor in[2] = {T(v & 2 ? (void *)i64 : (void *)i32, v & 2 ? GG_DT_I64 : GG_DT_I32, 2,
                             2, 3, 0, 0),
                           T(tab, dt, 2, V, D, 0, 0)};
        gg_tensor out = T(y, dt, 3, 2, 3, D, 0);
        snprintf(label, sizeof label, "embedding %s %s ids [2, 3], D %lld", dn,
                 v & 2 ? "i64" : "i32", (long long)D);
        run_case(label, emb, in, 2, &out, NULL, 1);
        free(tab), free(y);
    }
    /* bmm */
    const struct {
        int na, nb, tb;
        int64_t a[4], b[4], y[4];
    } mv[] = {
        {3, 3, 0, {3, 5, 17}, {3, 17, 6}, {3, 5, 6}},
        {3, 3, 0, {2, 64, 1}, {2, 1, 7}, {2, 64, 7}},
        {4, 4, 0, {2, 1, 70, 33}, {1, 3, 33, 67}, {2, 3, 70, 67}},
        {4, 4, 1, {1, 8, 1, 64}, {1, 8, 300, 64}, {1, 8, 1, 300}},
        {2, 4, 0, {5, 8}, {2, 3, 8, 4}, {2, 3, 5, 4}},
    };
    for (size_t i = 0; i < sizeof mv / sizeof mv[0]; i++) {
        const int ny = mv[i].na > mv[i].nb ? mv[i].na : mv[i].nb;
        int64_t na = 1, nb = 1, nyel = 1;
        for (int d = 0; d < mv[i].na; d++)
            na *= mv[i].a[d];
        for (int d = 0; d < mv[i].nb; d++)
            nb *= mv[i].b[d];
        for (int d = 0; d < ny; d++)
            nyel *= mv[i].y[d];
        void *a = fill(dt, na, 1.0), *b = fill(dt, nb, 1.0), *y = fill(dt, nyel, 1.0);
        gg_tensor in[2] = {T(a, dt, mv[i].na, mv[i].a[0], mv[i].a[1], mv[i].a[2], mv[i].a[3]),
                           T(b, dt, mv[i].nb, mv[i].b[0], mv[i].b[1], mv[i].b[2], mv[i].b[3])};
        gg_tensor out = T(y, dt, ny, mv[i].y[0], mv[i].y[1], mv[i].y[2], mv[i].y[3]);
        gg_op_attrs at;
        gg_ops_attr_defaults(bmm, &at);
        at.v[0] = mv[i].tb;
        snprintf(label, sizeof label, "bmm %s case %zu", dn, i);
        run_case(label, bmm, in, 2, &out, &at, 0);
        free(a), free(b), free(y);
    }
    /* sdpa: B, Hq, Hkv, L, S, D, causal, mask kind (0 none, 1 bool, 2 add), mask dims */
    const struct {
        int64_t B, Hq, Hkv, L, S, D;
        int causal, mk, mnd;
        int64_t md[4];
    } sv[] = {
        {1, 8, 2, 1, 1000, 64, 0, 0, 0, {0}},
        {2, 6, 2, 3, 130, 128, 1, 0, 0, {0}},
        {2, 4, 4, 2, 70, 40, 0, 1, 4, {2, 1, 2, 70}},
        {2, 4, 1, 1, 67, 256, 0, 2, 4, {1, 1, 1, 67}},
        {1, 2, 2, 5, 3, 8, 1, 2, 2, {5, 3}},
    };
    for (size_t i = 0; i < sizeof sv / sizeof sv[0]; i++) {
        const int64_t nq = sv[i].B * sv[i].Hq * sv[i].L * sv[i].D,
                      nk = sv[i].B * sv[i].Hkv * sv[i].S * sv[i].D;
        int64_t nm = 1;
        for (int d = 0; d < sv[i].mnd; d++)
            nm *= sv[i].md[d];
        const gg_dtype mdt = sv[i].mk == 1 ? GG_DT_BOOL : dt;
        void *q = fill(dt, nq, 2.0), *k = fill(dt, nk, 2.0), *v = fill(dt, nk, 1.0),
             *y = fill(dt, nq, 1.0), *m = fill(mdt, nm, sv[i].mk == 2 ? 3.0 : 0);
        if (sv[i].mk)   /* every key of the first mask row off: a row of zeros */
            for (int64_t j = 0; j < sv[i].md[sv[i].mnd - 1]; j++) {
                if (sv[i].mk == 1)
                    ((uint8_t *)m)[j] = 0;
                else
                    gg_store(m, dt, j, -INFINITY);
            }
        gg_tensor in[4] = {T(q, dt, 4, sv[i].B, sv[i].Hq, sv[i].L, sv[i].D),
                           T(k, dt, 4, sv[i].B, sv[i].Hkv, sv[i].S, sv[i].D),
                           T(v, dt, 4, sv[i].B, sv[i].Hkv, sv[i].S, sv[i].D),
                           T(m, mdt, sv[i].mnd, sv[i].md[0], sv[i].md[1], sv[i].md[2],
                             sv[i].md[3])};
        gg_tensor out = T(y, dt, 4, sv[i].B, sv[i].Hq, sv[i].L, sv[i].D);
        gg_op_attrs at;
        gg_ops_attr_defaults(sdpa, &at);
        at.v[1] = sv[i].causal;
        snprintf(label, sizeof label, "sdpa %s case %zu (S %lld, D %lld)", dn, i,
                 (long long)sv[i].S, (long long)sv[i].D);
        run_case(label, sdpa, in, sv[i].mk ? 4 : 3, &out, &at, 0);
        free(q), free(k), free(v), free(y), free(m);
    }
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
    for (size_t i = 0; i < sizeof all_dts / sizeof all_dts[0]; i++)
        movement_cases(all_dts[i]);
    for (size_t i = 0; i < sizeof f_dts / sizeof f_dts[0]; i++)
        float_cases(f_dts[i]);
    gg_gpu_ctx_destroy(g_ctx);
    (void)hipStreamDestroy(g_stream);
    printf("test_gpu_movement: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
