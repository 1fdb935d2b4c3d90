/* SPDX-License-Identifier: MIT */
/* The elementwise and reduction kernels (gpu_elementwise.hip, gpu_reduce.hip)
 * against the CPU references on the same random inputs: every op of the two
 * families on every dtype its rule takes, broadcast patterns and the scalar
 * form both ways, odd sizes and one past a grid's worth, NaN and inf.
 * Integer and bool results, where, fill, arange, cast and the correctly
 * rounded arithmetic (+ - * /, maximum, minimum) compare bit-exact (any NaN
 * matching a NaN);
 * floating arithmetic elementwise within the dtype's tolerance (the
 * transcendental functions differ by ulps between the device and libm), the
 * reductions by relative L2 (another summation order).  A failure names the
 * first element that differs, both values and the operands there.  SKIP (77)
 * without a device.
 *
 * Every copy and memset of a case is queued on the context's stream, the
 * one the kernel runs on: that stream is non-blocking, so a plain hipMemcpy
 * or hipMemset (the legacy default stream) is not ordered before the
 * kernel.  A pageable hipMemcpy may return with its last DMA still in
 * flight and hipMemset returns at once: the kernel could read part of an
 * input before it landed, or the zeroing of y land after the kernel wrote
 * it (the large i64 cases, whose inputs take longest to land, failed so on
 * an NVIDIA device while their arithmetic matches the reference). */
#include "gg_hip.h"
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
static uint64_t g_rng = 0x3f84d5b5b5470917ull;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int is_f(gg_dtype dt)
{
    return dt == GG_DT_F32 || dt == GG_DT_F16 || dt == GG_DT_BF16;
}

/* n random elements: floating in [-4, 4) (positive: (0.0625, 4]) with a NaN
 * and an inf among the first when specials; integers small or extreme; bool
 * 0/1. */
static void *fill(gg_dtype dt, int64_t n, int positive, int specials)
{
    unsigned char *p = calloc((size_t)n + 2, 8);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        if (is_f(dt)) {
            double v = ((double)(r >> 11) / 4503599627370496.0 * 2 - 1) * 4;
            gg_store(p, dt, i, (float)(positive ? fabs(v) + 0.0625 : v));
        } else if (dt == GG_DT_BOOL) {
            p[i] = (uint8_t)(r >> 40) & 1;
        } else {
            int64_t v = (r & 7) == 0 ? ((r & 8) ? INT64_MAX : INT64_MIN) : (int64_t)(r >> 50) - 4000;
            gg_store_i64(p, dt, i, v);
        }
    }
    if (specials && is_f(dt) && n > 2) {
        gg_store(p, dt, 0, NAN);
        gg_store(p, dt, 1, INFINITY);
    }
    return p;
}

static gg_tensor T(void *p, gg_dtype dt, int nd, const int64_t *d)
{
    gg_tensor t = {.data = p, .desc = {.dtype = dt, .ndim = nd}};
    for (int i = 0; i < nd; i++)
        t.desc.dims[i] = d[i];
    return t;
}

enum { CMP_EXACT, CMP_ELEM, CMP_L2 };

/* element i of p as text: integers exactly, floating values with their bits */
static const char *elem_str(char *buf, size_t len, const void *p, gg_dtype dt, int64_t i)
{
    if (!is_f(dt)) {
        snprintf(buf, len, "%lld", (long long)gg_load_i64(p, dt, i));
    } else {
        const size_t es = gg_dtype_size(dt);
        uint32_t bits = 0;
        memcpy(&bits, (const char *)p + (size_t)i * es, es);
        snprintf(buf, len, "%.9g (0x%0*x)", gg_load_f64(p, dt, i), (int)es * 2, bits);
    }
    return buf;
}

/* The element of an input (shape x) that y's element yi (shape y) reads:
 * right-aligned broadcasting. */
static int64_t src_index(const gg_tensor_desc *x, const gg_tensor_desc *y, int64_t yi)
{
    int64_t idx[GG_MAX_DIMS] = {0}, r = yi, off = 0;
    for (int k = y->ndim - 1; k >= 0; k--) {
        idx[k] = r % y->dims[k];
        r /= y->dims[k];
    }
    for (int k = 0; k < x->ndim; k++)
        off = off * x->dims[k] + (x->dims[k] == 1 ? 0 : idx[k + y->ndim - x->ndim]);
    return off;
}

/* x broadcasts to y: y's element reads one element of x */
static int bcasts_to(const gg_tensor_desc *x, const gg_tensor_desc *y)
{
    if (x->ndim > y->ndim)
        return 0;
    for (int k = 0; k < x->ndim; k++)
        if (x->dims[k] != 1 && x->dims[k] != y->dims[k + y->ndim - x->ndim])
            return 0;
    return 1;
}

/* Why a case failed: the element at (the first that differs, or under L2
 * the farthest), both values and the operands it read (and the scalar with
 * its side for the scalar form). */
static void print_diff(const char *label, const gg_tensor *in, int nin, const gg_tensor *out,
                       const gg_op_attrs *attrs, const void *h_gpu, const void *h_cpu,
                       int64_t at, int64_t nbad, double e)
{
    const gg_dtype dt = out->desc.dtype;
    char g[64], c[64], x[64];
    printf("FAIL: %s: %lld of %lld elements differ (rel L2 err %g); %s %lld: device %s, "
           "reference %s",
           label, (long long)nbad, (long long)gg_desc_numel(&out->desc), e,
           nbad ? "the first at" : "the farthest at", (long long)at,
           elem_str(g, sizeof g, h_gpu, dt, at), elem_str(c, sizeof c, h_cpu, dt, at));
    for (int i = 0; i < nin; i++) {
        if (!bcasts_to(&in[i].desc, &out->desc))
            continue; /* a reduction's input: many elements make y's one */
        const int64_t k = src_index(&in[i].desc, &out->desc, at);
        printf("%s in[%d][%lld] = %s", i ? "," : "; operands:", i, (long long)k,
               elem_str(x, sizeof x, in[i].data, in[i].desc.dtype, k));
    }
    if (nin == 1 && attrs) /* only the binary ops' scalar form passes attrs with one input */
        printf(", scalar %.17g%s", attrs->v[0], attrs->v[1] != 0 ? " (reversed)" : "");
    printf("\n");
}

static void run_case(const char *label, const gg_op_def *op, const gg_tensor *in, int nin,
                     const gg_tensor *out, const gg_op_attrs *attrs, int how)
{
    void *d_in[GG_MAX_OPERANDS] = {0}, *d_out = NULL;
    gg_tensor din[GG_MAX_OPERANDS], dout = *out;
    const size_t ob = gg_desc_bytes(&out->desc);
    void *h_gpu = calloc(ob, 1), *h_cpu = calloc(ob, 1);
    int ok = 1;
    char err[256] = "";
    gg_tensor_desc dd[GG_MAX_OPERANDS];
    for (int i = 0; i < nin; i++)
        dd[i] = in[i].desc;
    if (op->check(op, dd, nin, &out->desc, 1, attrs, err, sizeof err) != 0) {
        g_fail++;
        printf("FAIL: %s: the rule refused: %s\n", label, err);
        free(h_gpu);
        free(h_cpu);
        return;
    }
    for (int i = 0; i < nin; i++) {
        const size_t b = gg_desc_bytes(&in[i].desc);
        din[i] = in[i];
        if (hipMalloc(&d_in[i], b) != hipSuccess ||
            hipMemcpyAsync(d_in[i], in[i].data, b, hipMemcpyHostToDevice, g_stream) != hipSuccess)
            ok = 0;
        din[i].data = d_in[i];
    }
    /* y starts as 0xa5 bytes, not zeros (a false comparison, a zero sum):
     * an element the kernel left unwritten differs from the reference */
    if (hipMalloc(&d_out, ob) != hipSuccess ||
        hipMemsetAsync(d_out, 0xa5, ob, g_stream) != hipSuccess)
        ok = 0;
    dout.data = d_out;
    int rc = ok ? gg_gpu_op_launch(g_ctx, op, din, nin, &dout, 1, attrs) : -1;
    if (rc == 0 &&
        (hipMemcpyAsync(h_gpu, d_out, ob, hipMemcpyDeviceToHost, g_stream) != hipSuccess ||
         hipStreamSynchronize(g_stream) != hipSuccess))
        rc = -1;
    gg_tensor cout = *out;
    cout.data = h_cpu;
    gg_ops_run_cpu(op, in, nin, &cout, 1, attrs);
    const gg_dtype dt = out->desc.dtype;
    const double tol = dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 2e-3 : 1e-2;
    const size_t es = gg_dtype_size(dt);
    double e = 0, worst = -1;
    int64_t first = -1, nbad = 0;
    if (rc == 0) {
        const int64_t n = gg_desc_numel(&out->desc);
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            const char *pg = (const char *)h_gpu + (size_t)i * es,
                       *pc = (const char *)h_cpu + (size_t)i * es;
            int same;
            if (!is_f(dt)) {
                same = !memcmp(pg, pc, es);
            } else if (how == CMP_EXACT) {
                /* the same bits, but any NaN for a NaN: NVIDIA's arithmetic
                 * returns its canonical NaN where x86 keeps the operand's */
                same = (isnan(gg_load_f64(h_gpu, dt, i)) && isnan(gg_load_f64(h_cpu, dt, i))) ||
                       !memcmp(pg, pc, es);
            } else {
                const double g = gg_load_f64(h_gpu, dt, i), c = gg_load_f64(h_cpu, dt, i);
                if (isnan(c) || isnan(g) || isinf(c) || isinf(g)) {
                    same = (isnan(c) && isnan(g)) || g == c;
                } else {
                    same = how != CMP_ELEM || fabs(g - c) <= tol * (fabs(c) + 1e-6);
                    num += (g - c) * (g - c);
                    den += c * c;
                    /* under L2 no element fails alone: name the farthest */
                    if (how == CMP_L2 && fabs(g - c) > worst) {
                        worst = fabs(g - c);
                        if (nbad == 0)
                            first = i;
                    }
                }
            }
            if (!same) {
                if (nbad == 0)
                    first = i;
                nbad++;
            }
        }
        e = sqrt(num / (den > 0 ? den : 1));
        ok = nbad == 0 && (how != CMP_L2 || e <= tol);
    }
    if (rc == 0 && ok) {
        g_pass++;
    } else if (rc != 0) {
        g_fail++;
        printf("FAIL: %s: %s\n", label, gg_gpu_last_error());
    } else {
        g_fail++;
        print_diff(label, in, nin, out, attrs, h_gpu, h_cpu, first < 0 ? 0 : first, nbad, e);
    }
    for (int i = 0; i < nin; i++)
        hipFree(d_in[i]);
    hipFree(d_out);
    free(h_gpu);
    free(h_cpu);
}

static const gg_dtype ALL[6] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16, GG_DT_I32, GG_DT_I64,
                                GG_DT_BOOL};

/* 1 when op's rule takes operands of dt (and y of ydt). */
static int takes(const gg_op_def *op, const gg_tensor *in, int nin, const gg_tensor *y,
                 const gg_op_attrs *at)
{
    gg_tensor_desc d[GG_MAX_OPERANDS];
    for (int i = 0; i < nin; i++)
        d[i] = in[i].desc;
    char err[8];
    return op->check(op, d, nin, &y->desc, 1, at, err, sizeof err) == 0;
}

static void binary_cases(void)
{
    static const char *const names[] = {"add", "sub", "mul", "div", "pow", "maximum",
                                        "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                                        "bitwise_and", "bitwise_or", "bitwise_xor"};
    static const struct {
        int na, nb, ny;
        int64_t a[4], b[4], y[4];
    } S[] = {
        {1, 1, 1, {7}, {7}, {7}},
        {2, 1, 2, {33, 65}, {65}, {33, 65}},
        {2, 2, 2, {33, 1}, {1, 9}, {33, 9}},
        {3, 2, 3, {2, 1, 5}, {3, 1}, {2, 3, 5}},
        {4, 4, 4, {2, 3, 1, 7}, {1, 1, 5, 1}, {2, 3, 5, 7}},
        {1, 1, 1, {100003}, {100003}, {100003}},
        {2, 1, 2, {257, 129}, {1}, {257, 129}},
    };
    char label[160];
    for (size_t o = 0; o < sizeof names / sizeof names[0]; o++) {
        const gg_op_def *op = gg_ops_find(names[o]);
        const int cmp = o >= 7 && o <= 12;
        for (int k = 0; k < 6; k++) {
            const gg_dtype dt = ALL[k], ydt = cmp ? GG_DT_BOOL : dt;
            const int how = !strcmp(names[o], "pow") ? CMP_ELEM : CMP_EXACT;
            for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
                int64_t na = 1, nb = 1, ny = 1;
                for (int i = 0; i < S[s].na; i++)
                    na *= S[s].a[i];
                for (int i = 0; i < S[s].nb; i++)
                    nb *= S[s].b[i];
                for (int i = 0; i < S[s].ny; i++)
                    ny *= S[s].y[i];
                void *a = fill(dt, na, o == 4, 1), *b = fill(dt, nb, 0, 0);
                void *y = calloc((size_t)ny, 8);
                gg_tensor in[2] = {T(a, dt, S[s].na, S[s].a), T(b, dt, S[s].nb, S[s].b)};
                gg_tensor ty = T(y, ydt, S[s].ny, S[s].y);
                if (takes(op, in, 2, &ty, NULL)) {
                    snprintf(label, sizeof label, "%s %s shape %zu", names[o],
                             gg_dtype_name(dt), s);
                    run_case(label, op, in, 2, &ty, NULL, how);
                    /* the scalar form, both ways, on a's shape */
                    gg_op_attrs at;
                    gg_ops_attr_defaults(op, &at);
                    at.v[0] = dt == GG_DT_BOOL ? 1 : is_f(dt) ? 2.0 : -3;
                    gg_tensor ys = T(y, ydt, S[s].na, S[s].a);
                    for (int rev = 0; rev < 2 && takes(op, in, 1, &ys, &at); rev++) {
                        at.v[1] = rev;
                        snprintf(label, sizeof label, "%s %s scalar%s shape %zu", names[o],
                                 gg_dtype_name(dt), rev ? " reversed" : "", s);
                        run_case(label, op, in, 1, &ys, &at, how);
                    }
                }
                free(a);
                free(b);
                free(y);
            }
        }
    }
}

static void unary_cases(void)
{
    static const char *const names[] = {"neg", "abs", "rsqrt", "sqrt", "exp", "log", "tanh",
                                        "sin", "cos", "sigmoid", "recip", "bitwise_not"};
    static const int64_t sizes[] = {1, 3, 7, 33, 257, 100003};
    char label[160];
    for (size_t u = 0; u < sizeof names / sizeof names[0]; u++)
        for (int k = 0; k < 6; k++)
            for (size_t z = 0; z < 6; z++) {
                const gg_dtype dt = ALL[k];
                const gg_op_def *op = gg_ops_find(names[u]);
                void *x = fill(dt, sizes[z], u >= 2 && u <= 5, 1), *y = calloc((size_t)sizes[z], 8);
                gg_tensor tx = T(x, dt, 1, &sizes[z]), ty = T(y, dt, 1, &sizes[z]);
                if (takes(op, &tx, 1, &ty, NULL)) {
                    snprintf(label, sizeof label, "%s %s n=%lld", names[u], gg_dtype_name(dt),
                             (long long)sizes[z]);
                    run_case(label, op, &tx, 1, &ty, NULL, u <= 1 || u == 11 ? CMP_EXACT : CMP_ELEM);
                }
                free(x);
                free(y);
            }
}

static void other_cases(void)
{
    char label[160];
    const gg_op_def *where = gg_ops_find("where"), *fillop = gg_ops_find("fill"),
                    *arange = gg_ops_find("arange"), *cast = gg_ops_find("cast");
    for (int k = 0; k < 6; k++) {
        const gg_dtype dt = ALL[k];
        const int64_t dc[2] = {33, 1}, da[1] = {65}, db[2] = {33, 65};
        void *c = fill(GG_DT_BOOL, 33, 0, 0), *a = fill(dt, 65, 0, 1), *b = fill(dt, 33 * 65, 0, 0);
        void *y = calloc(33 * 65, 8);
        gg_tensor in[3] = {T(c, GG_DT_BOOL, 2, dc), T(a, dt, 1, da), T(b, dt, 2, db)};
        gg_tensor ty = T(y, dt, 2, db);
        snprintf(label, sizeof label, "where %s", gg_dtype_name(dt));
        run_case(label, where, in, 3, &ty, NULL, CMP_EXACT);
        gg_op_attrs at = {{dt == GG_DT_BOOL ? 1 : is_f(dt) ? -65504.0 : -7}};
        snprintf(label, sizeof label, "fill %s", gg_dtype_name(dt));
        run_case(label, fillop, NULL, 0, &ty, &at, CMP_EXACT);
        if (dt != GG_DT_BOOL) {
            const int64_t n = 100003;
            void *r = calloc((size_t)n, 8);
            gg_op_attrs ar = {{is_f(dt) ? 0.5 : -50000, is_f(dt) ? 0.25 : 3}};
            gg_tensor tr = T(r, dt, 1, &n);
            snprintf(label, sizeof label, "arange %s", gg_dtype_name(dt));
            run_case(label, arange, NULL, 0, &tr, &ar, CMP_EXACT);
            free(r);
        }
        for (int j = 0; j < 6; j++) {
            const int64_t n = 1027;
            void *x = fill(dt, n, 0, 1), *z = calloc((size_t)n, 8);
            if (is_f(dt)) /* large magnitudes too: saturation and rounding */
                for (int64_t i = 2; i < n; i += 5)
                    gg_store(x, dt, i, (float)((double)(int64_t)rnd() / 3.0));
            gg_tensor tx = T(x, dt, 1, &n), tz = T(z, ALL[j], 1, &n);
            snprintf(label, sizeof label, "cast %s -> %s", gg_dtype_name(dt),
                     gg_dtype_name(ALL[j]));
            run_case(label, cast, &tx, 1, &tz, NULL, CMP_EXACT);
            free(x);
            free(z);
        }
        free(c);
        free(a);
        free(b);
        free(y);
    }
}

static void reduce_cases(void)
{
    static const char *const names[] = {"sum", "mean", "amax", "amin"};
    static const int64_t shapes[][3] = {{1, 1, 1}, {1, 1, 3}, {7, 1, 33}, {2, 3, 257},
                                        {3, 1, 4099}, {1, 1, 100003}};
    char label[160];
    for (int o = 0; o < 4; o++)
        for (int k = 0; k < 5; k++)
            for (int s = 0; s < 6; s++) {
                const gg_dtype dt = ALL[k];
                const gg_op_def *op = gg_ops_find(names[o]);
                const int64_t *d = shapes[s], n = d[0] * d[1] * d[2];
                void *x = fill(dt, n, 0, s == 2), *y = calloc((size_t)(n / d[2]), 8);
                const int64_t yd[3] = {d[0], d[1], 1};
                gg_tensor tx = T(x, dt, 3, d), ty = T(y, dt, 3, yd);
                if (takes(op, &tx, 1, &ty, NULL)) {
                    snprintf(label, sizeof label, "%s %s [%lld, %lld, %lld]", names[o],
                             gg_dtype_name(dt), (long long)d[0], (long long)d[1], (long long)d[2]);
                    run_case(label, op, &tx, 1, &ty, NULL, o >= 2 ? CMP_EXACT : CMP_L2);
                }
                free(x);
                free(y);
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
    binary_cases();
    unary_cases();
    other_cases();
    reduce_cases();
    gg_gpu_ctx_destroy(g_ctx);
    (void)hipStreamDestroy(g_stream);
    printf("test_gpu_elementwise: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
