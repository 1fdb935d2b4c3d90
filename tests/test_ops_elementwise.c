/* SPDX-License-Identifier: MIT */
/* The elementwise family through the op table's CPU references against
 * values computed here in double (floating) or in uint64 (integers, wrapping
 * to the dtype's width): every binary op on every dtype it takes, broadcast
 * patterns and the scalar form both ways, comparisons with NaN and inf, i64
 * and i32 extremes (with scalars at the ends of the range, both ways), bool, where, the unary ops, fill, arange, cast between
 * every pair of dtypes, and the rules' refusals. */
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass, g_fail;
static uint64_t g_rng = 0x243f6a8885a308d3ull;

static void check(int ok, const char *fmt, const char *a, const char *b)
{
    if (ok) {
        g_pass++;
        return;
    }
    if (g_fail++ < 40) {
        printf("FAIL: ");
        printf(fmt, a, b);
        printf("\n");
    }
}

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static double unit(void)
{
    return (double)(rnd() >> 11) / 4503599627370496.0 * 2.0 - 1.0;
}

static const gg_dtype ALL[6] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16, GG_DT_I32, GG_DT_I64,
                                GG_DT_BOOL};

static int is_f(gg_dtype dt)
{
    return dt == GG_DT_F32 || dt == GG_DT_F16 || dt == GG_DT_BF16;
}

/* Random operands: floating in [-4, 4) with some specials, integers mixing
 * small values with the type's extremes, bool 0/1. */
static void fill_rand(void *p, gg_dtype dt, int64_t n, int positive)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        switch (dt) {
        case GG_DT_I32: {
            static const int32_t ext[] = {INT32_MIN, INT32_MAX, -1, 0, 1, INT32_MIN + 1};
            int32_t v = (r & 7) == 0 ? ext[(r >> 8) % 6] : (int32_t)(r >> 40) % 1000;
            ((int32_t *)p)[i] = v;
            break;
        }
        case GG_DT_I64: {
            static const int64_t ext[] = {INT64_MIN, INT64_MAX, -1, 0, 1, INT64_MIN + 1};
            int64_t v = (r & 7) == 0 ? ext[(r >> 8) % 6] : (int64_t)(r >> 20) - (1ll << 43);
            ((int64_t *)p)[i] = v;
            break;
        }
        case GG_DT_BOOL:
            ((uint8_t *)p)[i] = (uint8_t)(r >> 33) & 1;
            break;
        default: {
            double v = unit() * 4.0;
            if (positive)
                v = fabs(v) + 0.0625;
            gg_store(p, dt, i, (float)v);
            break;
        }
        }
    }
}

static double tol_of(gg_dtype dt)
{
    return dt == GG_DT_F32 ? 4e-6 : dt == GG_DT_F16 ? 2e-3 : 1.6e-2;
}

/* got (stored) against a double reference: NaN matches NaN, infs match
 * exactly, else a relative tolerance of the dtype. */
static int close_f(double got, double ref, gg_dtype dt)
{
    if (isnan(ref))
        return isnan(got);
    if (isinf(ref) || isinf(got))
        return got == ref || fabs(ref) > 6e4; /* f16 overflow of a large finite ref */
    return fabs(got - ref) <= tol_of(dt) * (fabs(ref) + 1e-3);
}

static int64_t wrap(gg_dtype dt, uint64_t v)
{
    if (dt == GG_DT_I32)
        return (int32_t)(uint32_t)v;
    if (dt == GG_DT_BOOL)
        return v != 0;
    return (int64_t)v;
}

/* ---- broadcasting geometry, written out independently of the library ---- */

typedef struct {
    int nd;
    int64_t d[4];
} shape;

static int64_t numel(const shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->nd; i++)
        n *= s->d[i];
    return n;
}

/* The flat index into s of y's element yi (y's shape ys), right-aligned. */
static int64_t src_index(const shape *s, const shape *ys, int64_t yi)
{
    int64_t idx[4] = {0}, r = yi;
    for (int k = ys->nd - 1; k >= 0; k--) {
        idx[k] = r % ys->d[k];
        r /= ys->d[k];
    }
    int64_t off = 0;
    for (int k = 0; k < s->nd; k++) {
        int yk = k + ys->nd - s->nd;
        off = off * s->d[k] + (s->d[k] == 1 ? 0 : idx[yk]);
    }
    return off;
}

static gg_tensor_desc desc(gg_dtype dt, const shape *s)
{
    gg_tensor_desc d = {.dtype = dt, .ndim = s->nd};
    for (int i = 0; i < s->nd; i++)
        d.dims[i] = s->d[i];
    return d;
}

/* Runs op after its rule accepts the operands; 0 when the rule refused. */
static int run(const char *name, gg_tensor *in, int nin, gg_tensor *y, const gg_op_attrs *at)
{
    const gg_op_def *op = gg_ops_find(name);
    gg_tensor_desc din[4], dy = y->desc;
    for (int i = 0; i < nin; i++)
        din[i] = in[i].desc;
    char err[256] = "";
    int rc = op ? op->check(op, din, nin, &dy, 1, at, err, sizeof err) : -EINVAL;
    check(rc == 0, "%s accepted: %s", name, err);
    if (rc)
        return 0;
    gg_ops_run_cpu(op, in, nin, y, 1, at);
    return 1;
}

static int refused(const char *name, const gg_tensor_desc *in, int nin, const gg_tensor_desc *y,
                   const gg_op_attrs *at, const char *want)
{
    const gg_op_def *op = gg_ops_find(name);
    char err[256] = "";
    int rc = op->check(op, in, nin, y, 1, at, err, sizeof err);
    int ok = rc == -EINVAL && strstr(err, want) != NULL;
    check(ok, "%s refused (%s)", name, err[0] ? err : "accepted");
    return ok;
}

/* ---- binary ops --------------------------------------------------------------- */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE,
       B_AND, B_OR, B_XOR, B_N };
static const char *const bname[B_N] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                       "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and",
                                       "bitwise_or", "bitwise_xor"};

static int takes(int b, gg_dtype dt)
{
    if (b <= B_MIN)
        return dt != GG_DT_BOOL && (is_f(dt) || (b != B_DIV && b != B_POW));
    if (b <= B_GE)
        return dt != GG_DT_BOOL || b == B_EQ || b == B_NE;
    return !is_f(dt);
}

static double ref_f(int b, double x, double z)
{
    switch (b) {
    case B_ADD: return x + z;
    case B_SUB: return x - z;
    case B_MUL: return x * z;
    case B_DIV: return x / z;
    case B_POW: return pow(x, z);
    case B_MAX: return isnan(x) || isnan(z) ? NAN : x > z ? x : z;
    case B_MIN: return isnan(x) || isnan(z) ? NAN : x < z ? x : z;
    case B_EQ: return x == z;
    case B_NE: return x != z;
    case B_LT: return x < z;
    case B_LE: return x <= z;
    case B_GT: return x > z;
    default: return x >= z;
    }
}

static uint64_t ref_i(int b, int64_t x, int64_t z)
{
    switch (b) {
    case B_ADD: return (uint64_t)x + (uint64_t)z;
    case B_SUB: return (uint64_t)x - (uint64_t)z;
    case B_MUL: return (uint64_t)x * (uint64_t)z;
    case B_MAX: return (uint64_t)(x > z ? x : z);
    case B_MIN: return (uint64_t)(x < z ? x : z);
    case B_EQ: return x == z;
    case B_NE: return x != z;
    case B_LT: return x < z;
    case B_LE: return x <= z;
    case B_GT: return x > z;
    case B_GE: return x >= z;
    case B_AND: return (uint64_t)(x & z);
    case B_OR: return (uint64_t)(x | z);
    default: return (uint64_t)(x ^ z);
    }
}

/* a (shape sa) OP b (shape sb, or the scalar when sb is NULL) into y (ys). */
static void binary_case(int b, gg_dtype dt, const shape *sa, const shape *sb, const shape *ys,
                        double scalar, int reverse)
{
    const int cmp = b >= B_EQ && b <= B_GE;
    const gg_dtype ydt = cmp ? GG_DT_BOOL : dt;
    const int64_t na = numel(sa), nb = sb ? numel(sb) : 1, ny = numel(ys);
    const size_t es = gg_dtype_size(dt);
    void *pa = calloc((size_t)na, es), *pb = calloc((size_t)nb, es),
         *py = calloc((size_t)ny, gg_dtype_size(ydt));
    fill_rand(pa, dt, na, b == B_POW);
    fill_rand(pb, dt, nb, 0);
    if (b == B_POW && sb) /* small integer exponents and halves keep pow finite */
        for (int64_t i = 0; i < nb; i++)
            gg_store(pb, dt, i, (float)((int)(unit() * 6) / 2.0));
    gg_tensor in[2] = {{pa, desc(dt, sa)}, {pb, sb ? desc(dt, sb) : desc(dt, sa)}};
    gg_tensor y = {py, desc(ydt, ys)};
    gg_op_attrs at;
    gg_ops_attr_defaults(gg_ops_find(bname[b]), &at);
    at.v[0] = scalar;
    at.v[1] = reverse;
    char what[96];
    snprintf(what, sizeof what, "%s %s %s", bname[b], gg_dtype_name(dt),
             sb ? "tensors" : reverse ? "scalar-reversed" : "scalar");
    if (!run(bname[b], in, sb ? 2 : 1, &y, &at))
        goto out;
    int bad = 0;
    for (int64_t i = 0; i < ny && bad < 3; i++) {
        int64_t ia = src_index(sa, ys, i), ib = sb ? src_index(sb, ys, i) : 0;
        int ok;
        if (is_f(dt)) {
            double x = gg_load_f64(pa, dt, ia), z = sb ? gg_load_f64(pb, dt, ib) : (float)scalar;
            if (reverse) {
                double t = x;
                x = z;
                z = t;
            }
            double r = ref_f(b, x, z), got = gg_load_f64(py, ydt, i);
            ok = cmp ? got == r : close_f(got, r, dt);
        } else {
            int64_t x = gg_load_i64(pa, dt, ia), z = sb ? gg_load_i64(pb, dt, ib) : (int64_t)scalar;
            if (reverse) {
                int64_t t = x;
                x = z;
                z = t;
            }
            ok = gg_load_i64(py, ydt, i) == wrap(ydt, ref_i(b, x, z));
        }
        if (!ok)
            bad++;
    }
    check(bad == 0, "%s%s: values", what, "");
out:
    free(pa);
    free(pb);
    free(py);
}

static void test_binary(void)
{
    static const shape S[][3] = {
        {{1, {1}}, {1, {1}}, {1, {1}}},
        {{2, {3, 7}}, {2, {3, 7}}, {2, {3, 7}}},
        {{2, {3, 7}}, {1, {7}}, {2, {3, 7}}},
        {{1, {7}}, {2, {3, 7}}, {2, {3, 7}}},
        {{2, {33, 1}}, {2, {1, 9}}, {2, {33, 9}}},
        {{3, {2, 1, 5}}, {2, {3, 1}}, {3, {2, 3, 5}}},
        {{1, {1}}, {3, {2, 3, 5}}, {3, {2, 3, 5}}},
        {{4, {2, 3, 1, 7}}, {4, {1, 1, 5, 1}}, {4, {2, 3, 5, 7}}},
        {{1, {257}}, {1, {257}}, {1, {257}}},
    };
    for (int b = 0; b < B_N; b++)
        for (int k = 0; k < 6; k++) {
            gg_dtype dt = ALL[k];
            if (!takes(b, dt))
                continue;
            for (size_t s = 0; s < sizeof S / sizeof S[0]; s++)
                binary_case(b, dt, &S[s][0], &S[s][1], &S[s][2], 0, 0);
            double sc = dt == GG_DT_BOOL ? 1 : is_f(dt) ? (b == B_POW ? 2.0 : 1.5) : -3;
            binary_case(b, dt, &S[1][0], NULL, &S[1][0], sc, 0);
            binary_case(b, dt, &S[5][2], NULL, &S[5][2], sc, 1);
        }
}

/* Comparisons and maximum with NaN and inf; integer wrap and extremes. */
static void test_specials(void)
{
    float a[6] = {NAN, 1.0f, INFINITY, -INFINITY, 0.0f, NAN}, b[6] = {1.0f, NAN, INFINITY, 0.0f,
                                                                     -0.0f, NAN};
    uint8_t y[6];
    float yf[6];
    shape s = {1, {6}};
    gg_tensor in[2] = {{a, desc(GG_DT_F32, &s)}, {b, desc(GG_DT_F32, &s)}};
    gg_tensor ty = {y, desc(GG_DT_BOOL, &s)}, tf = {yf, desc(GG_DT_F32, &s)};
    const uint8_t want_eq[6] = {0, 0, 1, 0, 1, 0}, want_ne[6] = {1, 1, 0, 1, 0, 1},
                  want_lt[6] = {0, 0, 0, 1, 0, 0};
    if (run("eq", in, 2, &ty, NULL))
        check(!memcmp(y, want_eq, 6), "eq with NaN, inf, -0%s%s", "", "");
    if (run("ne", in, 2, &ty, NULL))
        check(!memcmp(y, want_ne, 6), "ne with NaN is true%s%s", "", "");
    if (run("lt", in, 2, &ty, NULL))
        check(!memcmp(y, want_lt, 6), "lt with NaN is false%s%s", "", "");
    if (run("maximum", in, 2, &tf, NULL))
        check(isnan(yf[0]) && isnan(yf[1]) && yf[2] == INFINITY && yf[3] == 0.0f && isnan(yf[5]),
              "maximum propagates NaN%s%s", "", "");
    int64_t ia[3] = {INT64_MAX, INT64_MIN, INT64_MIN}, ib[3] = {1, -1, 0}, iy[3];
    shape s3 = {1, {3}};
    gg_tensor ii[2] = {{ia, desc(GG_DT_I64, &s3)}, {ib, desc(GG_DT_I64, &s3)}};
    gg_tensor iyt = {iy, desc(GG_DT_I64, &s3)};
    if (run("add", ii, 2, &iyt, NULL))
        check(iy[0] == INT64_MIN && iy[1] == INT64_MAX && iy[2] == INT64_MIN,
              "i64 add wraps at the extremes%s%s", "", "");
    gg_tensor one = {ia, desc(GG_DT_I64, &s3)};
    if (run("neg", &one, 1, &iyt, NULL))
        check(iy[0] == -INT64_MAX && iy[1] == INT64_MIN, "i64 neg of INT64_MIN wraps%s%s", "", "");
    /* an i64 scalar past 2^53 is refused only when not an integer value */
    gg_op_attrs at;
    gg_ops_attr_defaults(gg_ops_find("add"), &at);
    at.v[0] = 9007199254740992.0; /* 2^53, exact */
    if (run("add", ii, 1, &iyt, &at))
        check(iy[2] == INT64_MIN + 9007199254740992ll, "i64 scalar 2^53 exact%s%s", "", "");
}

/* Every integer binary op with a scalar, both ways, over each dtype's
 * extremes and the values next to them: the scalar (a double attribute)
 * against the same integer written here as an integer, so that a reference
 * converting it wrongly (through a float, saturating, off by one at 2^63)
 * differs. */
static void test_int_scalar_extremes(void)
{
    static const int64_t v64[] = {INT64_MIN, INT64_MIN + 1, -4, -3, -2, -1, 0, 1, 2, 3,
                                  INT64_MAX - 1, INT64_MAX};
    static const int32_t v32[] = {INT32_MIN, INT32_MIN + 1, -4, -3, -2, -1, 0, 1, 2, 3,
                                  INT32_MAX - 1, INT32_MAX};
    /* each exactly a double: -2^63, the largest double below 2^63, 2^62 */
    static const struct {
        double d;
        int64_t i;
    } sc64[] = {{-3, -3}, {0, 0}, {-1, -1}, {-9223372036854775808.0, INT64_MIN},
                {9223372036854774784.0, 9223372036854774784ll}, {4611686018427387904.0,
                                                                4611686018427387904ll}},
      sc32[] = {{-3, -3}, {0, 0}, {-2147483648.0, INT32_MIN}, {2147483647.0, INT32_MAX}};
    static const int ops[] = {B_ADD, B_SUB, B_MUL, B_MAX, B_MIN, B_EQ, B_NE, B_LT, B_LE,
                              B_GT, B_GE, B_AND, B_OR, B_XOR};
    const int64_t n = 12;
    for (int k = 0; k < 2; k++) {
        const gg_dtype dt = k ? GG_DT_I32 : GG_DT_I64;
        const int nsc = k ? 4 : 6;
        int64_t a64[12];
        int32_t a32[12];
        for (int i = 0; i < n; i++) {
            a64[i] = v64[i];
            a32[i] = v32[i];
        }
        shape sa = {1, {n}};
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            const int b = ops[o], cmp = b >= B_EQ && b <= B_GE;
            const gg_dtype ydt = cmp ? GG_DT_BOOL : dt;
            for (int j = 0; j < nsc; j++)
                for (int rev = 0; rev < 2; rev++) {
                    const double sd = k ? sc32[j].d : sc64[j].d;
                    const int64_t si = k ? sc32[j].i : sc64[j].i;
                    int64_t y[12];
                    memset(y, 0x5a, sizeof y);
                    gg_tensor in = {k ? (void *)a32 : (void *)a64, desc(dt, &sa)};
                    gg_tensor ty = {y, desc(ydt, &sa)};
                    gg_op_attrs at;
                    gg_ops_attr_defaults(gg_ops_find(bname[b]), &at);
                    at.v[0] = sd;
                    at.v[1] = rev;
                    char what[96];
                    snprintf(what, sizeof what, "%s %s scalar %lld%s", bname[b],
                             gg_dtype_name(dt), (long long)si, rev ? " reversed" : "");
                    if (!run(bname[b], &in, 1, &ty, &at))
                        continue;
                    int bad = -1;
                    for (int i = 0; i < n && bad < 0; i++) {
                        const int64_t x = k ? (int64_t)a32[i] : a64[i];
                        const uint64_t r = rev ? ref_i(b, si, x) : ref_i(b, x, si);
                        if (gg_load_i64(y, ydt, i) != wrap(ydt, r))
                            bad = i;
                    }
                    char at_s[64] = "";
                    if (bad >= 0)
                        snprintf(at_s, sizeof at_s, "first wrong at element %d", bad);
                    check(bad < 0, "%s: %s", what, at_s);
                }
        }
    }
}

/* ---- unary ------------------------------------------------------------------- */

static void test_unary(void)
{
    static const char *const names[] = {"neg", "abs", "rsqrt", "sqrt", "exp", "log", "tanh",
                                        "sin", "cos", "sigmoid", "recip", "bitwise_not"};
    static const int64_t sizes[] = {1, 3, 7, 33, 257};
    for (size_t u = 0; u < sizeof names / sizeof names[0]; u++)
        for (int k = 0; k < 6; k++) {
            gg_dtype dt = ALL[k];
            int ints_ok = u <= 1 || u == 11, floats_ok = u != 11;
            if ((is_f(dt) && !floats_ok) || (!is_f(dt) && !ints_ok) ||
                (dt == GG_DT_BOOL && u != 11))
                continue;
            for (size_t z = 0; z < 5; z++) {
                shape s = {2, {2, sizes[z]}};
                int64_t n = numel(&s);
                void *x = calloc((size_t)n, 8), *y = calloc((size_t)n, 8);
                fill_rand(x, dt, n, u >= 2 && u <= 5);
                gg_tensor tx = {x, desc(dt, &s)}, ty = {y, desc(dt, &s)};
                int bad = 0;
                if (run(names[u], &tx, 1, &ty, NULL))
                    for (int64_t i = 0; i < n; i++) {
                        if (is_f(dt)) {
                            double v = gg_load_f64(x, dt, i), r;
                            switch (u) {
                            case 0: r = -v; break;
                            case 1: r = fabs(v); break;
                            case 2: r = 1 / sqrt(v); break;
                            case 3: r = sqrt(v); break;
                            case 4: r = exp(v); break;
                            case 5: r = log(v); break;
                            case 6: r = tanh(v); break;
                            case 7: r = sin(v); break;
                            case 8: r = cos(v); break;
                            case 9: r = 1 / (1 + exp(-v)); break;
                            default: r = 1 / v; break;
                            }
                            bad += !close_f(gg_load_f64(y, dt, i), r, dt);
                        } else {
                            int64_t v = gg_load_i64(x, dt, i);
                            uint64_t r = u == 0 ? 0 - (uint64_t)v
                                         : u == 1 ? (v < 0 ? 0 - (uint64_t)v : (uint64_t)v)
                                         : dt == GG_DT_BOOL ? (uint64_t)!v : ~(uint64_t)v;
                            bad += gg_load_i64(y, dt, i) != wrap(dt, r);
                        }
                    }
                check(bad == 0, "%s %s: values", names[u], gg_dtype_name(dt));
                free(x);
                free(y);
            }
        }
}

/* ---- where, fill, arange ------------------------------------------------------- */

static void test_where_fill_arange(void)
{
    shape sc = {2, {3, 1}}, sa = {1, {7}}, sb = {2, {3, 7}};
    for (int k = 0; k < 6; k++) {
        gg_dtype dt = ALL[k];
        uint8_t cond[3];
        fill_rand(cond, GG_DT_BOOL, 3, 0);
        void *a = calloc(7, 8), *b = calloc(21, 8), *y = calloc(30, 8);
        fill_rand(a, dt, 7, 0);
        fill_rand(b, dt, 21, 0);
        gg_tensor in[3] = {{cond, desc(GG_DT_BOOL, &sc)}, {a, desc(dt, &sa)}, {b, desc(dt, &sb)}};
        gg_tensor ty = {y, desc(dt, &sb)};
        int bad = 0;
        size_t es = gg_dtype_size(dt);
        if (run("where", in, 3, &ty, NULL))
            for (int i = 0; i < 21; i++) {
                const void *src = cond[i / 7] ? (char *)a + (size_t)(i % 7) * es
                                              : (char *)b + (size_t)i * es;
                bad += memcmp((char *)y + (size_t)i * es, src, es) != 0;
            }
        check(bad == 0, "where %s%s", gg_dtype_name(dt), "");

        /* fill */
        static const double vals[] = {0, 1, -7, 2147483647.0};
        for (int v = 0; v < 4; v++) {
            shape sy = {3, {2, 3, 5}};
            gg_op_attrs at = {{vals[v]}};
            if (dt == GG_DT_I64 && v == 3)
                at.v[0] = -9223372036854775808.0;
            gg_tensor tf = {y, desc(dt, &sy)};
            bad = 0;
            if (run("fill", NULL, 0, &tf, &at))
                for (int i = 0; i < 30; i++)
                    bad += is_f(dt) ? !close_f(gg_load_f64(y, dt, i), at.v[0], dt)
                           : dt == GG_DT_BOOL ? gg_load_i64(y, dt, i) != (at.v[0] != 0)
                                              : gg_load_i64(y, dt, i) != (int64_t)at.v[0];
            check(bad == 0, "fill %s%s", gg_dtype_name(dt), "");
        }
        if (dt == GG_DT_F32) {
            gg_op_attrs at = {{-INFINITY}};
            shape sy = {1, {3}};
            gg_tensor tf = {y, desc(dt, &sy)};
            if (run("fill", NULL, 0, &tf, &at))
                check(((float *)y)[2] == -INFINITY, "fill f32 -inf%s%s", "", "");
        }

        /* arange */
        if (dt != GG_DT_BOOL) {
            const int64_t n = 257;
            void *r = calloc((size_t)n, 8);
            gg_op_attrs at = {{is_f(dt) ? 0.5 : -100, is_f(dt) ? 0.25 : 3}};
            shape sy = {1, {n}};
            gg_tensor tr = {r, desc(dt, &sy)};
            bad = 0;
            if (run("arange", NULL, 0, &tr, &at))
                for (int64_t i = 0; i < n; i++) {
                    double want = at.v[0] + (double)i * at.v[1];
                    bad += is_f(dt) ? !close_f(gg_load_f64(r, dt, i), want, dt)
                                    : gg_load_i64(r, dt, i) != (int64_t)want;
                }
            check(bad == 0, "arange %s%s", gg_dtype_name(dt), "");
            free(r);
        }
        free(a);
        free(b);
        free(y);
    }
    /* i64 arange at the top of the range, exact */
    int64_t r[3];
    gg_op_attrs at = {{9007199254740990.0, 1}};
    shape s3 = {1, {3}};
    gg_tensor tr = {r, desc(GG_DT_I64, &s3)};
    if (run("arange", NULL, 0, &tr, &at))
        check(r[2] == 9007199254740992ll, "arange i64 near 2^53%s%s", "", "");
}

/* ---- cast -------------------------------------------------------------------------- */

/* The expected bits of v (a double holding the source value exactly) in dt. */
static int cast_ok(const void *y, gg_dtype yd, int64_t i, double v, int64_t iv, int src_int)
{
    if (yd == GG_DT_BOOL)
        return gg_load_i64(y, yd, i) == (src_int ? iv != 0 : v != 0);
    if (is_f(yd)) {
        double want = src_int ? (double)iv : v;
        double got = gg_load_f64(y, yd, i);
        if (isnan(want))
            return isnan(got);
        /* one rounding from the exact value: compare with the nearest stored
         * neighbours of a direct conversion from long double arithmetic */
        if (!src_int) {
            unsigned char b[4];
            gg_store(b, yd, 0, (float)want);
            return got == gg_load_f64(b, yd, 0) || (isinf(got) && fabs(want) > 6e4);
        }
        return close_f(got, want, yd);
    }
    int64_t want;
    if (src_int) {
        want = wrap(yd, (uint64_t)iv);
    } else if (isnan(v)) {
        want = 0;
    } else {
        double t = trunc(v), lo = yd == GG_DT_I32 ? -2147483648.0 : -9223372036854775808.0,
               hi = yd == GG_DT_I32 ? 2147483647.0 : 9223372036854775807.0;
        want = t <= lo ? (yd == GG_DT_I32 ? INT32_MIN : INT64_MIN)
               : t >= hi ? (yd == GG_DT_I32 ? INT32_MAX : INT64_MAX) : (int64_t)t;
    }
    return gg_load_i64(y, yd, i) == want;
}

static void test_cast(void)
{
    static const double fv[] = {NAN, INFINITY, -INFINITY, 1e10, -1e10, 2.5, -2.5, 0.0, -0.0,
                                65519.0, 3e9, -3e9, 1.0, 16777217.0};
    static const int64_t iv[] = {INT64_MIN, INT64_MAX, -1, 0, 1, 16777217, 2147483648ll,
                                 -2147483649ll, (1ll << 53) + 1, 65520, 255, 256, 257, 4097};
    const int64_t n = 14;
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            gg_dtype xd = ALL[a], yd = ALL[b];
            unsigned char x[14 * 8], y[14 * 8];
            for (int64_t i = 0; i < n; i++) {
                if (is_f(xd))
                    gg_store(x, xd, i, (float)fv[i]);
                else
                    gg_store_i64(x, xd, i, iv[i]);
            }
            shape s = {1, {n}};
            gg_tensor tx = {x, desc(xd, &s)}, ty = {y, desc(yd, &s)};
            int bad = 0;
            if (run("cast", &tx, 1, &ty, NULL))
                for (int64_t i = 0; i < n; i++)
                    bad += !cast_ok(y, yd, i, is_f(xd) ? gg_load_f64(x, xd, i) : 0,
                                    is_f(xd) ? 0 : gg_load_i64(x, xd, i), !is_f(xd));
            check(bad == 0, "cast %s -> %s", gg_dtype_name(xd), gg_dtype_name(yd));
        }
    /* integers to f32 / bf16 round once, to nearest even */
    int64_t big[3] = {16777217, 16777219, (1ll << 40) + (1ll << 32) + 1};
    float fy[3];
    uint16_t by[3];
    shape s3 = {1, {3}};
    gg_tensor tx = {big, desc(GG_DT_I64, &s3)}, tf = {fy, desc(GG_DT_F32, &s3)},
              tb = {by, desc(GG_DT_BF16, &s3)};
    if (run("cast", &tx, 1, &tf, NULL))
        check(fy[0] == 16777216.0f && fy[1] == 16777220.0f, "i64 -> f32 ties to even%s%s", "", "");
    if (run("cast", &tx, 1, &tb, NULL))
        check(gg_bf16_to_f32(by[2]) == (float)((1ll << 40) + (1ll << 33)),
              "i64 -> bf16 in one rounding (not through f32)%s%s", "", "");
}

/* ---- refusals ------------------------------------------------------------------ */

static void test_refusals(void)
{
    shape s = {2, {3, 7}}, r = {1, {5}};
    gg_tensor_desc f = desc(GG_DT_F32, &s), i32 = desc(GG_DT_I32, &s), bl = desc(GG_DT_BOOL, &s),
                   f5 = desc(GG_DT_F32, &r), h = desc(GG_DT_F16, &s);
    gg_op_attrs at;
    refused("div", (gg_tensor_desc[]){i32, i32}, 2, &i32, NULL, "takes f32, f16 or bf16");
    refused("add", (gg_tensor_desc[]){bl, bl}, 2, &bl, NULL, "got bool");
    refused("lt", (gg_tensor_desc[]){bl, bl}, 2, &bl, NULL, "eq and ne only");
    refused("eq", (gg_tensor_desc[]){f, f}, 2, &f, NULL, "y must be bool");
    refused("bitwise_and", (gg_tensor_desc[]){f, f}, 2, &f, NULL, "takes bool, i32 or i64");
    refused("add", (gg_tensor_desc[]){f, f5}, 2, &f, NULL, "does not broadcast");
    refused("add", (gg_tensor_desc[]){f, h}, 2, &f, NULL, "share one dtype");
    refused("exp", (gg_tensor_desc[]){i32}, 1, &i32, NULL, "takes f32, f16 or bf16");
    refused("where", (gg_tensor_desc[]){f, f, f}, 3, &f, NULL, "cond must be bool");
    gg_ops_attr_defaults(gg_ops_find("add"), &at);
    at.v[0] = 1.5;
    refused("add", (gg_tensor_desc[]){i32}, 1, &i32, &at, "must be an integer");
    at.v[0] = 1;
    at.v[1] = 2;
    refused("sub", (gg_tensor_desc[]){f}, 1, &f, &at, "reverse must be 0 or 1");
    at.v[0] = 1.5;
    refused("fill", NULL, 0, &i32, &at, "must be an integer");
    shape s3 = {1, {3}};
    gg_tensor_desc b3 = desc(GG_DT_BOOL, &s3);
    gg_ops_attr_defaults(gg_ops_find("arange"), &at);
    refused("arange", NULL, 0, &b3, &at, "got bool");
    refused("arange", NULL, 0, &f, &at, "must be 1-D");
    at.v[0] = 2147483600.0;
    at.v[1] = 100;
    gg_tensor_desc i3 = desc(GG_DT_I32, &s3);
    refused("arange", NULL, 0, &i3, &at, "range");
    shape wide = {2, {3, 8}};
    gg_tensor_desc fw = desc(GG_DT_F32, &wide);
    refused("mul", (gg_tensor_desc[]){f, f}, 2, &fw, NULL, "broadcast shape");
}

int main(void)
{
    test_binary();
    test_specials();
    test_int_scalar_extremes();
    test_unary();
    test_where_fill_arange();
    test_cast();
    test_refusals();
    printf("test_ops_elementwise: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
