/* Unit tests for the op library: table, dtype conversions, check rules and
 * the CPU references (against refs_double.c, computed from the quantized
 * inputs).
 *
 * Environment: GG_TEST_SEED=<n> picks the base seed (printed at start; every
 * case derives its own seed from it and prints that seed if it fails),
 * GG_TEST_VERBOSE=1 prints every case and every check message. */
#include "ops.h"
#include "refs_double.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail, g_verbose, g_case;
static uint64_t g_seed = 0x67667261706800ull;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void result(int ok, const char *fmt, ...)
{
    va_list ap;
    if (ok)
        g_pass++;
    else
        g_fail++;
    if (ok && !g_verbose)
        return;
    printf("%s: ", ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- random numbers ----------------------------------------------------- */

typedef struct {
    uint64_t s;
} rng;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_u64(rng *r)
{
    return splitmix(&r->s);
}

static double rng_uniform(rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(rng_u64(r) >> 11) * 0x1p-53);
}

/* A fresh seed for the next case. */
static uint64_t next_seed(void)
{
    uint64_t s = g_seed ^ ((uint64_t)++g_case * 0xd1b54a32d192ed03ull);
    return splitmix(&s);
}

/* ---- independent decoding ---------------------------------------------- */

static double dec_f16(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double dec_bf16(uint16_t b)
{
    int e = (b >> 7) & 255, m = b & 127;
    double v = e == 255 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (b & 0x8000) ? -v : v;
}

static double dec(const void *p, gg_dtype dt, int64_t i)
{
    switch (dt) {
    case GG_DT_F16:
        return dec_f16(((const uint16_t *)p)[i]);
    case GG_DT_BF16:
        return dec_bf16(((const uint16_t *)p)[i]);
    default:
        return ((const float *)p)[i];
    }
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to f16 / bf16 with double arithmetic (nearbyint: ties to even). */
static uint16_t ref_to_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (isnan(f))
        return 0xffff;
    if (a >= 65520.0)
        return sign | 0x7c00;
    if (a < 0x1p-14)
        return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p24));
    int e;
    frexp(a, &e);
    int E = e - 1;
    double q = nearbyint(ldexp(a, 10 - E));
    if (q == 2048) {
        q = 1024;
        E++;
    }
    return (uint16_t)(sign | ((E + 15) << 10) | ((int)q - 1024));
}

static uint16_t ref_to_bf16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (isnan(f))
        return 0xffff;
    if (isinf(f))
        return sign | 0x7f80;
    if (a < 0x1p-126)
        return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p133));
    int e;
    frexp(a, &e);
    int E = e - 1;
    double q = nearbyint(ldexp(a, 7 - E));
    if (q == 256) {
        q = 128;
        E++;
    }
    if (E + 127 >= 255)
        return sign | 0x7f80;
    return (uint16_t)(sign | ((E + 127) << 7) | ((int)q - 128));
}

/* ---- descs and tensors -------------------------------------------------- */

static gg_tensor_desc dsc(gg_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    gg_tensor_desc d = {.dtype = dt, .ndim = ndim, .dims = {d0, d1, d2, d3}};
    for (int i = ndim < 0 ? 0 : ndim; i < GG_MAX_DIMS; i++)
        d.dims[i] = 0;
    return d;
}
#define D1(dt, a) dsc(dt, 1, a, 0, 0, 0)
#define D2(dt, a, b) dsc(dt, 2, a, b, 0, 0)
#define D3(dt, a, b, c) dsc(dt, 3, a, b, c, 0)
#define D4(dt, a, b, c, e) dsc(dt, 4, a, b, c, e)

static int64_t numel(const gg_tensor_desc *d)
{
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++)
        n *= d->dims[i];
    return n;
}

static const char *shp(const gg_tensor_desc *d, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < d->ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "", (long long)d->dims[i]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
    return buf;
}

#define CANARY 64

static const uint8_t canary_byte = 0xa5;

static void poison(void *p, gg_dtype dt, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == GG_DT_F32)
            ((uint32_t *)p)[i] = 0x7fa5a5a5u;
        else if (dt == GG_DT_F16)
            ((uint16_t *)p)[i] = 0x7e5au;
        else
            ((uint16_t *)p)[i] = 0x7fa5u;
    }
}

/* An output buffer with CANARY guard bytes after it. */
static void *out_alloc(const gg_tensor_desc *d)
{
    size_t bytes = gg_desc_bytes(d);
    uint8_t *p = xmalloc(bytes + CANARY);
    poison(p, d->dtype, numel(d));
    memset(p + bytes, canary_byte, CANARY);
    return p;
}

static int canary_ok(const void *p, const gg_tensor_desc *d)
{
    const uint8_t *c = (const uint8_t *)p + gg_desc_bytes(d);
    for (int i = 0; i < CANARY; i++)
        if (c[i] != canary_byte)
            return 0;
    return 1;
}

/* ---- op instances ------------------------------------------------------- */

typedef struct {
    const char *op;
    gg_dtype dt;
    int nin;
    gg_tensor_desc in[3];
    gg_tensor_desc out;
    int nattr;                  /* overrides of the defaults */
    const char *attr_name[2];
    double attr_val[2];
    double shift;               /* added to input 0 */
} opcase;

typedef struct {
    const gg_op_def *op;
    int nin;
    gg_tensor in[3];
    gg_tensor out;
    gg_op_attrs attrs;
} inst;

static void input_range(const char *op, int i, double *lo, double *hi)
{
    *lo = -2, *hi = 2;
    if (i == 0 && !strcmp(op, "softmax"))
        *lo = -8, *hi = 8;
    else if (i == 0 && !strcmp(op, "layernorm"))
        *lo = -1, *hi = 3; /* a mean well away from 0 */
    else if (i == 1 && (!strcmp(op, "layernorm") || !strcmp(op, "rmsnorm")))
        *lo = 0.5, *hi = 1.5;
    else if (i > 0 && !strcmp(op, "layernorm"))
        *lo = -0.5, *hi = 0.5;
    else if (!strcmp(op, "linear"))
        *lo = -1, *hi = 1;
}

static void fill(void *p, gg_dtype dt, int64_t n, rng *r, double lo, double hi, double shift)
{
    for (int64_t i = 0; i < n; i++)
        gg_store(p, dt, i, (float)(rng_uniform(r, lo, hi) + shift));
}

/* 0, or -1 with a failure reported */
static int inst_make(inst *t, const opcase *c, uint64_t seed, const char *label)
{
    memset(t, 0, sizeof *t);
    t->op = gg_ops_find(c->op);
    if (!t->op) {
        result(0, "%s: op not found", label);
        return -1;
    }
    t->nin = c->nin;
    gg_ops_attr_defaults(t->op, &t->attrs);
    for (int i = 0; i < c->nattr; i++) {
        int k = gg_ops_attr_index(t->op, c->attr_name[i]);
        if (k < 0) {
            result(0, "%s: no attribute %s", label, c->attr_name[i]);
            return -1;
        }
        t->attrs.v[k] = c->attr_val[i];
    }
    char err[256] = "";
    int rc = t->op->check(t->op, c->in, c->nin, &c->out, 1, &t->attrs, err, sizeof err);
    if (rc != 0) {
        result(0, "%s: check rejected a valid case: %s", label, err);
        return -1;
    }
    rng r = {seed};
    for (int i = 0; i < c->nin; i++) {
        double lo, hi;
        input_range(c->op, i, &lo, &hi);
        t->in[i].desc = c->in[i];
        t->in[i].data = xmalloc(gg_desc_bytes(&c->in[i]));
        fill(t->in[i].data, c->dt, numel(&c->in[i]), &r, lo, hi, i == 0 ? c->shift : 0.0);
    }
    t->out.desc = c->out;
    t->out.data = out_alloc(&c->out);
    return 0;
}

static void inst_free(inst *t)
{
    for (int i = 0; i < t->nin; i++)
        free(t->in[i].data);
    free(t->out.data);
}

static void inst_run(inst *t)
{
    poison(t->out.data, t->out.desc.dtype, numel(&t->out.desc));
    gg_ops_run_cpu(t->op, t->in, t->nin, &t->out, 1, &t->attrs);
}

static double *decode_all(const gg_tensor *t)
{
    int64_t n = numel(&t->desc);
    double *v = xmalloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = dec(t->data, t->desc.dtype, i);
    return v;
}

/* The double reference on the (quantized) inputs of t. */
static double *reference(const inst *t)
{
    const char *op = t->op->name;
    double *x[3] = {0};
    for (int i = 0; i < t->nin; i++)
        x[i] = decode_all(&t->in[i]);
    const gg_tensor_desc *d0 = &t->in[0].desc;
    int64_t n = numel(d0), d = d0->dims[d0->ndim - 1], rows = n / d;
    double *y = xmalloc((size_t)numel(&t->out.desc) * sizeof(double));
    const double *v = t->attrs.v;
    if (!strcmp(op, "copy"))
        refd_scale(x[0], y, n, 1.0);
    else if (!strcmp(op, "scale"))
        refd_scale(x[0], y, n, v[0]);
    else if (!strcmp(op, "gelu"))
        refd_gelu(x[0], y, n, v[0] == 1.0);
    else if (!strcmp(op, "silu"))
        refd_silu(x[0], y, n);
    else if (!strcmp(op, "add"))
        refd_add(x[0], x[1], y, n, d, numel(&t->in[1].desc) != n);
    else if (!strcmp(op, "mul"))
        refd_mul(x[0], x[1], y, n, d, numel(&t->in[1].desc) != n);
    else if (!strcmp(op, "silu_mul"))
        refd_silu_mul(x[0], x[1], y, n);
    else if (!strcmp(op, "layernorm"))
        refd_layernorm(x[0], x[1], x[2], y, rows, d, v[0]);
    else if (!strcmp(op, "rmsnorm"))
        refd_rmsnorm(x[0], x[1], y, rows, d, v[0]);
    else if (!strcmp(op, "linear"))
        refd_linear(x[0], x[1], t->nin > 2 ? x[2] : NULL, y, rows, d, t->in[1].desc.dims[0]);
    else if (!strcmp(op, "softmax"))
        refd_softmax(x[0], y, rows, d);
    else
        fprintf(stderr, "no reference for %s\n", op);
    for (int i = 0; i < t->nin; i++)
        free(x[i]);
    return y;
}

static double tolerance(gg_dtype dt)
{
    return dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 2e-3 : 1e-2;
}

static void case_label(const opcase *c, char *buf, size_t len)
{
    char s[64];
    size_t n = (size_t)snprintf(buf, len, "%s %s", c->op, gg_dtype_name(c->dt));
    for (int i = 0; i < c->nin && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, " %s", shp(&c->in[i], s, sizeof s));
    for (int i = 0; i < c->nattr && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, " %s=%g", c->attr_name[i], c->attr_val[i]);
    if (c->shift != 0 && n < len)
        snprintf(buf + n, len - n, " shift=%g", c->shift);
}

/* Run one case against the double reference. */
static void accuracy_case(const opcase *c)
{
    char label[256];
    case_label(c, label, sizeof label);
    uint64_t seed = next_seed();
    inst t;
    if (inst_make(&t, c, seed, label))
        return;
    inst_run(&t);
    double *ref = reference(&t);
    int64_t n = numel(&t.out.desc), unwritten = 0;
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double o = dec(t.out.data, c->dt, i);
        if (!isfinite(o)) {
            unwritten++;
            continue;
        }
        num += (o - ref[i]) * (o - ref[i]);
        den += ref[i] * ref[i];
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    int guard = canary_ok(t.out.data, &t.out.desc);
    int ok = unwritten == 0 && guard && rel < tolerance(c->dt);
    result(ok, "%s: rel-L2 %.3g (tol %g), %lld of %lld outputs not written/finite%s, seed 0x%" PRIx64,
           label, rel, tolerance(c->dt), (long long)unwritten, (long long)n,
           guard ? "" : ", WROTE PAST THE END", seed);
    free(ref);
    inst_free(&t);
}

/* ---- op cases ----------------------------------------------------------- */

static const int64_t last_dims[] = {1, 3, 37, 1000, 1024, 2051}; /* 2051: rows of 3 chunks */
#define NDIMS 6
#define NSHAPES 5

/* Shape s of the row-wise test set for last dim d: rows 1, 1, 5, 17, 6. */
static gg_tensor_desc shape_of(gg_dtype dt, int s, int64_t d)
{
    switch (s) {
    case 0:
        return D1(dt, d);
    case 1:
        return D2(dt, 1, d);
    case 2:
        return D2(dt, 5, d);
    case 3:
        return D3(dt, 17, 1, d);
    default:
        return D4(dt, 2, 3, 1, d);
    }
}

static opcase mk1(const char *op, gg_dtype dt, gg_tensor_desc x)
{
    opcase c = {.op = op, .dt = dt, .nin = 1, .in = {x}, .out = x};
    return c;
}

static opcase with_attr(opcase c, const char *name, double v)
{
    c.attr_name[c.nattr] = name;
    c.attr_val[c.nattr++] = v;
    return c;
}

static void accuracy_tests(void)
{
    static const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    for (int di = 0; di < 3; di++) {
        gg_dtype dt = dts[di];
        for (int li = 0; li < NDIMS; li++) {
            int64_t d = last_dims[li];
            for (int s = 0; s < NSHAPES; s++) {
                gg_tensor_desc x = shape_of(dt, s, d);
                gg_tensor_desc row = D1(dt, d);
                accuracy_case(&(opcase){.op = "copy", .dt = dt, .nin = 1, .in = {x}, .out = x});
                accuracy_case(&(opcase){.op = "scale", .dt = dt, .nin = 1, .in = {x}, .out = x});
                opcase c = with_attr(mk1("scale", dt, x), "scale", 0.37);
                accuracy_case(&c);
                c = with_attr(mk1("scale", dt, x), "scale", -2.5);
                accuracy_case(&c);
                accuracy_case(&(opcase){.op = "gelu", .dt = dt, .nin = 1, .in = {x}, .out = x});
                c = with_attr(mk1("gelu", dt, x), "approximate", 1);
                accuracy_case(&c);
                accuracy_case(&(opcase){.op = "silu", .dt = dt, .nin = 1, .in = {x}, .out = x});
                accuracy_case(&(opcase){.op = "softmax", .dt = dt, .nin = 1, .in = {x}, .out = x});
                c = mk1("softmax", dt, x);
                c.shift = 200; /* exp overflows unless the row max is subtracted */
                accuracy_case(&c);
                accuracy_case(&(opcase){.op = "add", .dt = dt, .nin = 2, .in = {x, x}, .out = x});
                accuracy_case(&(opcase){.op = "add", .dt = dt, .nin = 2, .in = {x, row}, .out = x});
                accuracy_case(&(opcase){.op = "mul", .dt = dt, .nin = 2, .in = {x, x}, .out = x});
                accuracy_case(&(opcase){.op = "mul", .dt = dt, .nin = 2, .in = {x, row}, .out = x});
                accuracy_case(
                    &(opcase){.op = "silu_mul", .dt = dt, .nin = 2, .in = {x, x}, .out = x});
                c = (opcase){.op = "layernorm", .dt = dt, .nin = 3, .in = {x, row, row}, .out = x};
                accuracy_case(&c);
                c = with_attr(c, "eps", 0.25);
                accuracy_case(&c);
                c = (opcase){.op = "rmsnorm", .dt = dt, .nin = 2, .in = {x, row}, .out = x};
                accuracy_case(&c);
                c = with_attr(c, "eps", 0.25);
                accuracy_case(&c);
                /* linear: k = d, a few output widths */
                static const int64_t outs[] = {1, 7, 64, 5, 33};
                int64_t no = outs[(s + li) % 5];
                gg_tensor_desc y = x;
                y.dims[y.ndim - 1] = no;
                gg_tensor_desc w = D2(dt, no, d), b = D1(dt, no);
                accuracy_case(&(opcase){.op = "linear", .dt = dt, .nin = 2, .in = {x, w}, .out = y});
                accuracy_case(
                    &(opcase){.op = "linear", .dt = dt, .nin = 3, .in = {x, w, b}, .out = y});
            }
        }
        /* decode-sized linear: w [4096, 1024] */
        gg_tensor_desc w = D2(dt, 4096, 1024), b = D1(dt, 4096);
        accuracy_case(&(opcase){.op = "linear", .dt = dt, .nin = 3,
                                .in = {D2(dt, 33, 1024), w, b}, .out = D2(dt, 33, 4096)});
        accuracy_case(&(opcase){.op = "linear", .dt = dt, .nin = 2, .in = {D1(dt, 1024), w},
                                .out = D1(dt, 4096)});
    }
}

/* ---- row independence, batch invariance, in place ---------------------- */

/* Inputs indexed by row (the rest are per-column vectors or weights). */
static int is_row_input(const opcase *c, int i)
{
    if (i == 0)
        return 1;
    if (!strcmp(c->op, "linear") || !strcmp(c->op, "layernorm") || !strcmp(c->op, "rmsnorm"))
        return 0;
    return numel(&c->in[i]) == numel(&c->in[0]); /* same-shape binary */
}

static size_t row_bytes(const gg_tensor_desc *d)
{
    return (size_t)d->dims[d->ndim - 1] * gg_dtype_size(d->dtype);
}

/* c has 2-D operands [rows, d]. */
static void row_tests(const opcase *c)
{
    char label[256];
    case_label(c, label, sizeof label);
    uint64_t seed = next_seed();
    inst t;
    if (inst_make(&t, c, seed, label))
        return;
    int64_t rows = c->in[0].dims[0];
    size_t ob = gg_desc_bytes(&c->out), orow = row_bytes(&c->out);
    inst_run(&t);
    uint8_t *a = xmalloc(ob);
    memcpy(a, t.out.data, ob);

    /* 1. a padding row of NaN / Inf leaves the other rows bit-identical */
    static const int64_t pads[] = {-1, 0, 2};
    for (int pi = 0; pi < 3; pi++) {
        int64_t p = pads[pi] < 0 ? rows - 1 : pads[pi];
        void *saved[3] = {0};
        for (int i = 0; i < t.nin; i++) {
            if (!is_row_input(c, i))
                continue;
            size_t rb = row_bytes(&c->in[i]);
            saved[i] = xmalloc(rb);
            memcpy(saved[i], (uint8_t *)t.in[i].data + p * rb, rb);
            int64_t d = c->in[i].dims[1];
            for (int64_t j = 0; j < d; j++)
                gg_store(t.in[i].data, c->dt, p * d + j,
                         j % 3 == 0 ? NAN : j % 3 == 1 ? INFINITY : -INFINITY);
        }
        inst_run(&t);
        int same = 1;
        for (int64_t r = 0; r < rows; r++)
            if (r != p && memcmp(a + r * orow, (uint8_t *)t.out.data + r * orow, orow))
                same = 0;
        result(same && canary_ok(t.out.data, &t.out.desc),
               "%s: NaN/Inf in row %lld leaves the other rows unchanged, seed 0x%" PRIx64, label,
               (long long)p, seed);
        for (int i = 0; i < t.nin; i++) {
            if (saved[i]) {
                size_t rb = row_bytes(&c->in[i]);
                memcpy((uint8_t *)t.in[i].data + p * rb, saved[i], rb);
                free(saved[i]);
            }
        }
    }

    /* 2. each row run on its own gives the same bits as inside the batch */
    int same = 1;
    for (int64_t r = 0; r < rows; r++) {
        inst one = t;
        for (int i = 0; i < t.nin; i++) {
            if (!is_row_input(c, i))
                continue;
            one.in[i].desc.dims[0] = 1;
            one.in[i].data = (uint8_t *)t.in[i].data + r * row_bytes(&c->in[i]);
        }
        one.out.desc.dims[0] = 1;
        one.out.data = xmalloc(orow);
        inst_run(&one);
        if (memcmp(a + r * orow, one.out.data, orow))
            same = 0;
        free(one.out.data);
    }
    result(same, "%s: every row alone matches the batch bit for bit, seed 0x%" PRIx64, label,
           seed);

    /* 3. in place (y over x) matches out of place; not for linear */
    if (strcmp(c->op, "linear") != 0) {
        inst ip = t;
        size_t xb = gg_desc_bytes(&c->in[0]);
        uint8_t *buf = xmalloc(xb);
        memcpy(buf, t.in[0].data, xb);
        ip.in[0].data = buf;
        ip.out.data = buf;
        gg_ops_run_cpu(ip.op, ip.in, ip.nin, &ip.out, 1, &ip.attrs);
        result(memcmp(buf, a, ob) == 0, "%s: in place (y = x) matches, seed 0x%" PRIx64, label,
               seed);
        free(buf);
    }
    free(a);
    inst_free(&t);
}

static void independence_tests(void)
{
    static const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    static const int64_t ds[] = {37, 1000, 2500};
    for (int di = 0; di < 3; di++)
        for (int k = 0; k < 3; k++) {
            gg_dtype dt = dts[di];
            int64_t d = ds[k];
            gg_tensor_desc x = D2(dt, 6, d), row = D1(dt, d);
            row_tests(&(opcase){.op = "copy", .dt = dt, .nin = 1, .in = {x}, .out = x});
            opcase c = with_attr(mk1("scale", dt, x), "scale", 3.0);
            row_tests(&c);
            row_tests(&(opcase){.op = "gelu", .dt = dt, .nin = 1, .in = {x}, .out = x});
            c = with_attr(mk1("gelu", dt, x), "approximate", 1);
            row_tests(&c);
            row_tests(&(opcase){.op = "silu", .dt = dt, .nin = 1, .in = {x}, .out = x});
            row_tests(&(opcase){.op = "softmax", .dt = dt, .nin = 1, .in = {x}, .out = x});
            row_tests(&(opcase){.op = "add", .dt = dt, .nin = 2, .in = {x, x}, .out = x});
            row_tests(&(opcase){.op = "add", .dt = dt, .nin = 2, .in = {x, row}, .out = x});
            row_tests(&(opcase){.op = "mul", .dt = dt, .nin = 2, .in = {x, x}, .out = x});
            row_tests(&(opcase){.op = "mul", .dt = dt, .nin = 2, .in = {x, row}, .out = x});
            row_tests(&(opcase){.op = "silu_mul", .dt = dt, .nin = 2, .in = {x, x}, .out = x});
            row_tests(
                &(opcase){.op = "layernorm", .dt = dt, .nin = 3, .in = {x, row, row}, .out = x});
            row_tests(&(opcase){.op = "rmsnorm", .dt = dt, .nin = 2, .in = {x, row}, .out = x});
            row_tests(&(opcase){.op = "linear", .dt = dt, .nin = 3,
                                .in = {x, D2(dt, 9, d), D1(dt, 9)}, .out = D2(dt, 6, 9)});
            row_tests(&(opcase){.op = "linear", .dt = dt, .nin = 2, .in = {x, D2(dt, 9, d)},
                                .out = D2(dt, 6, 9)});
        }
}

/* ---- conversions -------------------------------------------------------- */

static int is_nan16(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static int is_nanbf(uint16_t b)
{
    return (b & 0x7f80) == 0x7f80 && (b & 0x7f);
}

static void conversion_tests(void)
{
    /* every f16 / bf16 bit pattern: decode exactly, round-trip exactly */
    long bad_dec = 0, bad_rt = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = gg_f16_to_f32((uint16_t)h);
        double want = dec_f16((uint16_t)h);
        if (isnan(want) ? !isnan(f) : ((double)f != want || !signbit(f) != !signbit(want)))
            bad_dec++;
        uint16_t back = gg_f32_to_f16(f);
        if (is_nan16((uint16_t)h) ? !(is_nan16(back) && (back & 0x8000) == (h & 0x8000))
                                  : back != h)
            bad_rt++;
    }
    result(bad_dec == 0, "f16 -> f32 matches an exact decode on all 65536 patterns (%ld wrong)",
           bad_dec);
    result(bad_rt == 0, "f16 -> f32 -> f16 is the identity on all 65536 patterns (%ld wrong)",
           bad_rt);
    bad_dec = bad_rt = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = gg_bf16_to_f32((uint16_t)b);
        double want = dec_bf16((uint16_t)b);
        if (isnan(want) ? !isnan(f) : ((double)f != want || !signbit(f) != !signbit(want)))
            bad_dec++;
        uint16_t back = gg_f32_to_bf16(f);
        if (is_nanbf((uint16_t)b) ? !(is_nanbf(back) && (back & 0x8000) == (b & 0x8000))
                                  : back != b)
            bad_rt++;
    }
    result(bad_dec == 0, "bf16 -> f32 matches an exact decode on all 65536 patterns (%ld wrong)",
           bad_dec);
    result(bad_rt == 0, "bf16 -> f32 -> bf16 is the identity on all 65536 patterns (%ld wrong)",
           bad_rt);

    /* f32 -> f16 / bf16 rounding: midpoints (ties), their neighbours, random
     * bit patterns, specials */
    long n16 = 0, bad16 = 0, nbf = 0, badbf = 0;
    uint32_t first16 = 0, firstbf = 0;
#define CHECK16(f)                                                                 \
    do {                                                                           \
        float f_ = (f);                                                            \
        uint16_t got_ = gg_f32_to_f16(f_), want_ = ref_to_f16(f_);                 \
        int ok_ = isnan(f_) ? is_nan16(got_) && !!(got_ & 0x8000) == !!signbit(f_) \
                            : got_ == want_;                                       \
        n16++;                                                                     \
        if (!ok_ && !bad16++)                                                      \
            first16 = fbits(f_);                                                   \
    } while (0)
#define CHECKBF(f)                                                                 \
    do {                                                                           \
        float f_ = (f);                                                            \
        uint16_t got_ = gg_f32_to_bf16(f_), want_ = ref_to_bf16(f_);               \
        int ok_ = isnan(f_) ? is_nanbf(got_) && !!(got_ & 0x8000) == !!signbit(f_) \
                            : got_ == want_;                                       \
        nbf++;                                                                     \
        if (!ok_ && !badbf++)                                                      \
            firstbf = fbits(f_);                                                   \
    } while (0)
    for (uint32_t h = 0; h < 0x7c00; h++) {
        for (int s = 0; s < 2; s++) {
            float sg = s ? -1.0f : 1.0f;
            float lo = (float)dec_f16((uint16_t)h), hi = (float)dec_f16((uint16_t)(h + 1));
            float mid = (lo + hi) / 2; /* exact: 12 significant bits */
            CHECK16(sg * lo);
            CHECK16(sg * mid);
            CHECK16(sg * nextafterf(mid, 0));
            CHECK16(sg * nextafterf(mid, INFINITY));
        }
    }
    for (uint32_t b = 0; b < 0x7f80; b++) {
        for (int s = 0; s < 2; s++) {
            float sg = s ? -1.0f : 1.0f;
            float lo = (float)dec_bf16((uint16_t)b), hi = (float)dec_bf16((uint16_t)(b + 1));
            float mid = b == 0x7f7f ? bitsf(0x7f7f8000u) : (lo + hi) / 2;
            CHECKBF(sg * lo);
            CHECKBF(sg * mid);
            CHECKBF(sg * nextafterf(mid, 0));
            CHECKBF(sg * nextafterf(mid, INFINITY));
        }
    }
    rng r = {next_seed()};
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng_u64(&r);
        CHECK16(bitsf(u));
        CHECKBF(bitsf(u));
        /* concentrate on the f16 range, subnormals included */
        uint32_t v = (u & 0x80000000u) | (0x33000000u + (u & 0x0fffffffu) % 0x14800000u);
        CHECK16(bitsf(v));
    }
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f,
                                     65519.996f, 65520.0f, 65536.0f, 1e10f, 0x1p-24f,
                                     0x1p-25f, 0x1.000002p-25f, 0x1p-26f, 3.0e38f, 3.4028235e38f,
                                     0x1p-149f, 0x1p-126f, 1.0f, -1.0f, 1.00048828125f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        CHECK16(specials[i]);
        CHECKBF(specials[i]);
    }
    result(bad16 == 0, "f32 -> f16 rounds to nearest even (%ld of %ld wrong, first 0x%08x)", bad16,
           n16, first16);
    result(badbf == 0, "f32 -> bf16 rounds to nearest even (%ld of %ld wrong, first 0x%08x)",
           badbf, nbf, firstbf);

    /* NaN payloads: quiet and signalling stay NaN */
    result(is_nan16(gg_f32_to_f16(bitsf(0x7f800001u))) && is_nan16(gg_f32_to_f16(bitsf(0xffc00000u))) &&
               is_nanbf(gg_f32_to_bf16(bitsf(0x7f800001u))) &&
               is_nanbf(gg_f32_to_bf16(bitsf(0xff800001u))),
           "f32 NaNs with low payload bits stay NaN in f16 and bf16");

    /* gg_load / gg_store agree with the scalar functions */
    uint16_t h[2];
    float f[1];
    gg_store(h, GG_DT_F16, 1, 1.5f);
    gg_store(h, GG_DT_BF16, 0, -2.25f);
    gg_store(f, GG_DT_F32, 0, 3.5f);
    result(h[1] == 0x3e00 && h[0] == 0xc010 && f[0] == 3.5f &&
               gg_load(h, GG_DT_F16, 1) == 1.5f && gg_load(h, GG_DT_BF16, 0) == -2.25f &&
               gg_load(f, GG_DT_F32, 0) == 3.5f,
           "gg_load / gg_store");

    /* The references convert in bulk (vector code); scale over every pattern
     * must give exactly the scalar conversions' result. */
    static const float factors[] = {1.0f, 0.5f, 3.0f, 1.0f / 3.0f, 1e-3f, -7.0f};
    for (int k = 1; k < 3; k++) {
        gg_dtype dt = (gg_dtype)k;
        uint16_t *src = xmalloc(65536 * 2), *dst = xmalloc(65536 * 2);
        for (uint32_t i = 0; i < 65536; i++)
            src[i] = (uint16_t)i;
        long bad = 0;
        for (size_t fi = 0; fi < sizeof factors / sizeof factors[0]; fi++) {
            gg_tensor x = {src, D2(dt, 256, 256)}, y = {dst, D2(dt, 256, 256)};
            gg_op_attrs at = {{factors[fi]}};
            gg_ops_run_cpu(gg_ops_find("scale"), &x, 1, &y, 1, &at);
            for (uint32_t i = 0; i < 65536; i++) {
                uint16_t want = k == 1 ? gg_f32_to_f16(gg_f16_to_f32((uint16_t)i) * factors[fi])
                                       : gg_f32_to_bf16(gg_bf16_to_f32((uint16_t)i) * factors[fi]);
                int wnan = k == 1 ? is_nan16(want) : is_nanbf(want);
                int gnan = k == 1 ? is_nan16(dst[i]) : is_nanbf(dst[i]);
                if (wnan ? !(gnan && (dst[i] & 0x8000) == (want & 0x8000)) : dst[i] != want)
                    bad++;
            }
        }
        result(bad == 0, "bulk %s conversions match the scalar ones on all patterns (%ld wrong)",
               gg_dtype_name(dt), bad);
        free(src);
        free(dst);
    }

    /* copy moves every bit pattern unchanged */
    for (int k = 1; k < 3; k++) {
        gg_dtype dt = (gg_dtype)k;
        uint16_t *src = xmalloc(65536 * 2), *dst = xmalloc(65536 * 2);
        for (uint32_t i = 0; i < 65536; i++)
            src[i] = (uint16_t)i;
        gg_tensor x = {src, D2(dt, 256, 256)}, y = {dst, D2(dt, 256, 256)};
        gg_ops_run_cpu(gg_ops_find("copy"), &x, 1, &y, 1, NULL);
        result(memcmp(src, dst, 65536 * 2) == 0, "copy keeps all 65536 %s patterns",
               gg_dtype_name(dt));
        free(src);
        free(dst);
    }
}

/* ---- dtype helpers and the table ---------------------------------------- */

static void table_tests(void)
{
    gg_dtype dt = GG_DT_COUNT;
    result(!strcmp(gg_dtype_name(GG_DT_F32), "f32") && !strcmp(gg_dtype_name(GG_DT_F16), "f16") &&
               !strcmp(gg_dtype_name(GG_DT_BF16), "bf16") &&
               gg_dtype_name(GG_DT_COUNT) != NULL,
           "dtype names");
    result(gg_dtype_parse("bf16", 4, &dt) == 0 && dt == GG_DT_BF16 &&
               gg_dtype_parse("f16xx", 3, &dt) == 0 && dt == GG_DT_F16 &&
               gg_dtype_parse("f32", 3, &dt) == 0 && dt == GG_DT_F32 &&
               gg_dtype_parse("f3", 2, &dt) == -EINVAL && gg_dtype_parse("f64", 3, &dt) == -EINVAL &&
               gg_dtype_parse("", 0, &dt) == -EINVAL,
           "dtype parse");
    gg_tensor_desc d = D3(GG_DT_F16, 2, 3, 5), bad = D2(GG_DT_F32, 3, 0);
    gg_tensor_desc huge = D4(GG_DT_F32, INT64_MAX / 2, 4, 1, 1);
    result(gg_dtype_size(GG_DT_F32) == 4 && gg_dtype_size(GG_DT_F16) == 2 &&
               gg_dtype_size(GG_DT_BF16) == 2 && gg_desc_numel(&d) == 30 &&
               gg_desc_bytes(&d) == 60 && gg_desc_numel(&bad) == 0 && gg_desc_bytes(&huge) == 0,
           "dtype sizes, numel, bytes");

    static const char *const want[] = {"copy", "add", "mul", "scale", "gelu", "silu",
                                       "silu_mul", "layernorm", "rmsnorm", "linear", "softmax"};
    int n = (int)(sizeof want / sizeof want[0]), ok = gg_ops_count() == n;
    for (int i = 0; i < n; i++) {
        const gg_op_def *op = gg_ops_find(want[i]);
        ok = ok && op && gg_ops_at(op->id) == op && op->check && op->cpu && op->nout == 1 &&
             gg_ops_in_name(op, 0) && gg_ops_out_name(op, 0) && !gg_ops_out_name(op, 1) &&
             !gg_ops_in_name(op, op->nin_max);
    }
    result(ok && !gg_ops_find("nope") && !gg_ops_at(-1) && !gg_ops_at(n),
           "table has the %d ops, ids are indices", n);
    const gg_op_def *lin = gg_ops_find("linear"), *gelu = gg_ops_find("gelu");
    const gg_op_def *ln = gg_ops_find("layernorm"), *rms = gg_ops_find("rmsnorm");
    const gg_op_def *sc = gg_ops_find("scale");
    gg_op_attrs a;
    gg_ops_attr_defaults(ln, &a);
    int okd = a.v[0] == 1e-5;
    gg_ops_attr_defaults(rms, &a);
    okd = okd && a.v[0] == 1e-6;
    gg_ops_attr_defaults(sc, &a);
    okd = okd && a.v[0] == 1.0;
    gg_ops_attr_defaults(gelu, &a);
    okd = okd && a.v[0] == 0 && !strcmp(gelu->attrs[0].choices[0], "none") &&
          !strcmp(gelu->attrs[0].choices[1], "tanh") && !gelu->attrs[0].choices[2];
    result(okd && lin->nin_min == 2 && lin->nin_max == 3 && !strcmp(gg_ops_in_name(lin, 2), "b") &&
               gg_ops_attr_index(ln, "eps") == 0 && gg_ops_attr_index(ln, "nope") == -1 &&
               gg_ops_attr_index(gelu, "approximate") == 0 && gg_ops_attr_index(lin, "eps") == -1,
           "attribute specs, defaults and lookup");
}

/* ---- check rules -------------------------------------------------------- */

static void expect(int accept, const char *opname, const char *what, int nin,
                   const gg_tensor_desc *in, int nout, const gg_tensor_desc *out,
                   const gg_op_attrs *attrs)
{
    const gg_op_def *op = gg_ops_find(opname);
    char err[256];
    memset(err, 'Z', sizeof err);
    err[0] = '\0';
    int rc = op->check(op, in, nin, out, nout, attrs, err, sizeof err);
    int ok = accept ? rc == 0 : rc == -EINVAL && err[0] && memchr(err, '\0', sizeof err);
    result(ok, "%s %s %s: rc %d%s%s%s", opname, accept ? "accepts" : "rejects", what, rc,
           err[0] ? ", \"" : "", err[0] ? err : "", err[0] ? "\"" : "");
    if (ok && !accept && g_verbose)
        printf("    message: %s\n", err);
}

static void check_tests(void)
{
    const gg_dtype F = GG_DT_F32, H = GG_DT_F16, B = GG_DT_BF16;
    gg_tensor_desc x = D2(F, 4, 1024), v = D1(F, 1024);
    gg_tensor_desc in[4] = {x, x, x, x}, out[2] = {x, x};
    gg_op_attrs at;

    /* valid */
    expect(1, "add", "same shapes", 2, in, 1, out, NULL);
    expect(1, "add", "b broadcast over rows", 2, (gg_tensor_desc[]){x, v}, 1, out, NULL);
    expect(1, "mul", "1-D a and b", 2, (gg_tensor_desc[]){v, v}, 1, &v, NULL);
    expect(1, "linear", "no bias", 2, (gg_tensor_desc[]){x, D2(F, 4096, 1024)}, 1,
           (gg_tensor_desc[]){D2(F, 4, 4096)}, NULL);
    expect(1, "linear", "4-D x with bias", 3,
           (gg_tensor_desc[]){D4(B, 2, 3, 5, 64), D2(B, 7, 64), D1(B, 7)}, 1,
           (gg_tensor_desc[]){D4(B, 2, 3, 5, 7)}, NULL);
    expect(1, "layernorm", "defaults", 3, (gg_tensor_desc[]){D3(H, 2, 2, 8), D1(H, 8), D1(H, 8)},
           1, (gg_tensor_desc[]){D3(H, 2, 2, 8)}, NULL);
    gg_ops_attr_defaults(gg_ops_find("gelu"), &at);
    at.v[0] = 1;
    expect(1, "gelu", "approximate=tanh", 1, in, 1, out, &at);

    /* counts */
    expect(0, "add", "1 input", 1, in, 1, out, NULL);
    expect(0, "add", "3 inputs", 3, in, 1, out, NULL);
    expect(0, "linear", "1 input", 1, in, 1, out, NULL);
    expect(0, "linear", "4 inputs", 4, in, 1, out, NULL);
    expect(0, "softmax", "0 outputs", 1, in, 0, out, NULL);
    expect(0, "softmax", "2 outputs", 1, in, 2, out, NULL);

    /* descs */
    expect(0, "copy", "an unknown dtype", 1, (gg_tensor_desc[]){dsc((gg_dtype)7, 1, 4, 0, 0, 0)},
           1, (gg_tensor_desc[]){dsc((gg_dtype)7, 1, 4, 0, 0, 0)}, NULL);
    expect(0, "copy", "0 dims", 1, (gg_tensor_desc[]){dsc(F, 0, 0, 0, 0, 0)}, 1,
           (gg_tensor_desc[]){dsc(F, 0, 0, 0, 0, 0)}, NULL);
    expect(0, "copy", "5 dims", 1, (gg_tensor_desc[]){dsc(F, 5, 1, 1, 1, 1)}, 1,
           (gg_tensor_desc[]){dsc(F, 5, 1, 1, 1, 1)}, NULL);
    expect(0, "copy", "a zero dim", 1, (gg_tensor_desc[]){D2(F, 0, 8)}, 1,
           (gg_tensor_desc[]){D2(F, 0, 8)}, NULL);
    expect(0, "copy", "a negative dim", 1, (gg_tensor_desc[]){D2(F, 4, -8)}, 1,
           (gg_tensor_desc[]){D2(F, 4, -8)}, NULL);
    gg_tensor_desc huge = D4(F, INT64_MAX / 4, 2, 2, 2);
    expect(0, "copy", "an overflowing size", 1, &huge, 1, &huge, NULL);

    /* dtypes */
    expect(0, "add", "b of another dtype", 2, (gg_tensor_desc[]){x, D2(H, 4, 1024)}, 1, out,
           NULL);
    expect(0, "silu", "y of another dtype", 1, in, 1, (gg_tensor_desc[]){D2(B, 4, 1024)}, NULL);
    expect(0, "linear", "bias of another dtype", 3,
           (gg_tensor_desc[]){x, D2(F, 8, 1024), D1(H, 8)}, 1, (gg_tensor_desc[]){D2(F, 4, 8)},
           NULL);

    /* output shapes */
    const char *unary_ops[] = {"copy", "scale", "gelu", "silu", "softmax"};
    for (int i = 0; i < 5; i++) {
        expect(0, unary_ops[i], "y with another last dim", 1, in, 1,
               (gg_tensor_desc[]){D2(F, 4, 1023)}, NULL);
        expect(0, unary_ops[i], "y with another rank", 1, in, 1,
               (gg_tensor_desc[]){D3(F, 1, 4, 1024)}, NULL);
    }
    expect(0, "add", "y of b's shape", 2, (gg_tensor_desc[]){x, v}, 1, &v, NULL);
    expect(0, "layernorm", "y flattened", 3, (gg_tensor_desc[]){x, v, v}, 1,
           (gg_tensor_desc[]){D1(F, 4096)}, NULL);
    expect(0, "rmsnorm", "y with other rows", 2, (gg_tensor_desc[]){x, v}, 1,
           (gg_tensor_desc[]){D2(F, 5, 1024)}, NULL);
    expect(0, "linear", "y of x's shape", 2, (gg_tensor_desc[]){x, D2(F, 8, 1024)}, 1, out, NULL);
    expect(0, "linear", "y without x's leading dims", 2,
           (gg_tensor_desc[]){D3(F, 2, 2, 1024), D2(F, 8, 1024)}, 1,
           (gg_tensor_desc[]){D2(F, 4, 8)}, NULL);

    /* operand shapes */
    expect(0, "add", "b of the wrong length", 2, (gg_tensor_desc[]){x, D1(F, 1023)}, 1, out, NULL);
    expect(0, "mul", "b with other rows", 2, (gg_tensor_desc[]){x, D2(F, 2, 1024)}, 1, out, NULL);
    expect(0, "mul", "b [1, d] (only 1-D broadcasts)", 2, (gg_tensor_desc[]){x, D2(F, 1, 1024)},
           1, out, NULL);
    expect(0, "add", "a smaller than b", 2, (gg_tensor_desc[]){v, x}, 1, &v, NULL);
    expect(0, "silu_mul", "a broadcast b", 2, (gg_tensor_desc[]){x, v}, 1, out, NULL);
    expect(0, "layernorm", "w of the wrong length", 3, (gg_tensor_desc[]){x, D1(F, 512), v}, 1,
           out, NULL);
    expect(0, "layernorm", "b of the wrong length", 3, (gg_tensor_desc[]){x, v, D1(F, 1)}, 1, out,
           NULL);
    expect(0, "layernorm", "2-D w", 3, (gg_tensor_desc[]){x, D2(F, 1, 1024), v}, 1, out, NULL);
    expect(0, "rmsnorm", "w of the wrong length", 2, (gg_tensor_desc[]){x, D1(F, 4)}, 1, out,
           NULL);
    expect(0, "linear", "1-D w", 2, (gg_tensor_desc[]){x, v}, 1, (gg_tensor_desc[]){D2(F, 4, 1)},
           NULL);
    expect(0, "linear", "w [in, out]", 2, (gg_tensor_desc[]){x, D2(F, 1024, 8)}, 1,
           (gg_tensor_desc[]){D2(F, 4, 1024)}, NULL);
    expect(0, "linear", "3-D w", 2, (gg_tensor_desc[]){x, D3(F, 1, 8, 1024)}, 1,
           (gg_tensor_desc[]){D2(F, 4, 8)}, NULL);
    expect(0, "linear", "b of the wrong length", 3,
           (gg_tensor_desc[]){x, D2(F, 8, 1024), D1(F, 1024)}, 1, (gg_tensor_desc[]){D2(F, 4, 8)},
           NULL);
    expect(0, "linear", "2-D b", 3, (gg_tensor_desc[]){x, D2(F, 8, 1024), D2(F, 1, 8)}, 1,
           (gg_tensor_desc[]){D2(F, 4, 8)}, NULL);

    /* attributes */
    static const double bad_eps[] = {0.0, -1e-5, NAN, INFINITY, 1e-50, 1e300};
    const char *norm_ops[] = {"layernorm", "rmsnorm"};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof bad_eps / sizeof bad_eps[0]; i++) {
            char what[64];
            gg_ops_attr_defaults(gg_ops_find(norm_ops[k]), &at);
            at.v[0] = bad_eps[i];
            snprintf(what, sizeof what, "eps=%g", bad_eps[i]);
            expect(0, norm_ops[k], what, k ? 2 : 3, (gg_tensor_desc[]){x, v, v}, 1, out, &at);
        }
    static const double bad_scale[] = {NAN, INFINITY, -INFINITY, 1e300};
    for (size_t i = 0; i < 4; i++) {
        char what[64];
        at.v[0] = bad_scale[i];
        snprintf(what, sizeof what, "scale=%g", bad_scale[i]);
        expect(0, "scale", what, 1, in, 1, out, &at);
    }
    static const double bad_choice[] = {2, -1, 0.5, NAN};
    for (size_t i = 0; i < 4; i++) {
        char what[64];
        at.v[0] = bad_choice[i];
        snprintf(what, sizeof what, "approximate=%g", bad_choice[i]);
        expect(0, "gelu", what, 1, in, 1, out, &at);
    }

    /* the message names the operand and the fix */
    {
        const gg_op_def *op = gg_ops_find("layernorm");
        char err[256] = "";
        int rc = op->check(op, (gg_tensor_desc[]){x, D1(F, 512), v}, 3, out, 1, NULL, err,
                           sizeof err);
        result(rc == -EINVAL && !strcmp(err, "layernorm: w must be 1-D of length 1024 (the last "
                                             "dim of x), got [512]"),
               "layernorm message reads \"%s\"", err);
        char small[8];
        memset(small, 'Z', sizeof small);
        rc = op->check(op, (gg_tensor_desc[]){x, D1(F, 512), v}, 3, out, 1, NULL, small,
                       sizeof small);
        int ok = rc == -EINVAL && memchr(small, '\0', sizeof small) && strlen(small) == 7;
        rc = op->check(op, (gg_tensor_desc[]){x, D1(F, 512), v}, 3, out, 1, NULL, NULL, 0);
        result(ok && rc == -EINVAL, "a short or missing message buffer is safe");
    }
}

/* ---- main --------------------------------------------------------------- */

int main(void)
{
    const char *s = getenv("GG_TEST_SEED");
    if (s && *s)
        g_seed = strtoull(s, NULL, 0);
    s = getenv("GG_TEST_VERBOSE");
    g_verbose = s && *s && strcmp(s, "0") != 0;
    printf("test_ops: seed 0x%" PRIx64 " (set GG_TEST_SEED to repeat)\n", g_seed);

    table_tests();
    conversion_tests();
    check_tests();
    accuracy_tests();
    independence_tests();

    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
