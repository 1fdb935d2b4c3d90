/* SPDX-License-Identifier: MIT */
/* Op-library unit tests of the CPU references: every op x dtype x shape
 * against refs_double.c (computed from the quantized inputs), and per row:
 * NaN/Inf in one row leaves the others unchanged, every row alone matches
 * the batch bit for bit, in place matches out of place. */
#include "refs_double.h"
#include "test_ops_util.h"

#include <inttypes.h>

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

void test_ops_accuracy(void)
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

void test_ops_independence(void)
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
