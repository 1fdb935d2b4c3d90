/* SPDX-License-Identifier: MIT */
/* Op-library unit tests without the references: f16/bf16 conversions
 * (every pattern, rounding, NaNs, bulk vs scalar), the dtype helpers and the
 * op table, and the check rules (what each op accepts and rejects). */
#include "test_ops_util.h"

#include <errno.h>
#include <inttypes.h>

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

/* ---- conversions -------------------------------------------------------- */

static int is_nan16(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static int is_nanbf(uint16_t b)
{
    return (b & 0x7f80) == 0x7f80 && (b & 0x7f);
}

void test_ops_conversions(void)
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

void test_ops_table(void)
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
                                       "silu_mul", "layernorm", "rmsnorm", "linear", "softmax",
                                       "embedding", "rope", "cache_write",
                                       "attention_decode", "argmax", "cast",
                                       "strided_copy", "cat", "index_copy", "bmm", "sdpa",
                                       "sub", "div", "pow", "maximum", "minimum", "eq", "ne",
                                       "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or",
                                       "bitwise_xor", "bitwise_not", "where", "neg", "abs",
                                       "rsqrt", "sqrt", "exp", "log", "tanh", "sin", "cos",
                                       "sigmoid", "recip", "fill", "arange", "sum", "mean",
                                       "amax", "amin"};
    int n = (int)(sizeof want / sizeof want[0]), ok = gg_ops_count() == n;
    for (int i = 0; i < n; i++) {
        const gg_op_def *op = gg_ops_find(want[i]);
        ok = ok && op && gg_ops_at(op->id) == op && op->check && op->cpu && op->nout == 1 &&
             (op->nin_max == 0 || gg_ops_in_name(op, 0)) && gg_ops_out_name(op, 0) &&
             !gg_ops_out_name(op, 1) &&
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

void test_ops_checks(void)
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
    expect(0, "where", "2 inputs", 2, in, 1, out, NULL);
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
    expect(0, "mul", "b [1, d] broadcast into a y of another shape", 2,
           (gg_tensor_desc[]){x, D2(F, 1, 1024)}, 1, (gg_tensor_desc[]){D3(F, 1, 4, 1024)}, NULL);
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
