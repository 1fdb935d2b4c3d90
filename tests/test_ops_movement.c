/* SPDX-License-Identifier: MIT */
/* The data-movement ops (strided_copy, cat, index_copy) and embedding with
 * i32/i64 ids of 1 to 3 dims, through the op table's CPU references, against
 * references computed here from the index arithmetic alone: every dtype (the
 * copies must be bit-exact, so the operands are random bit patterns, NaN
 * payloads included), odd sizes, transposes, permutes, 0 strides
 * (expand), slices with an offset and a step, cat along every dim with 2 to
 * 4 inputs, index_copy along the first, a middle and the last dim with
 * indices in and out of range (i64 ones past 2^32 too, which must not wrap
 * into range), and the rules' refusals with their messages. */
#include "ops.h"

#include <errno.h>
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
    g_fail++;
    printf("FAIL: ");
    printf(fmt, a, b);
    printf("\n");
}

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static const gg_dtype all_dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16,
                                   GG_DT_I32, GG_DT_I64, GG_DT_BOOL};
#define NDTS ((int)(sizeof all_dts / sizeof all_dts[0]))

/* n elements of dt: random bit patterns (bool: 0 or 1). */
static void *rnd_fill(gg_dtype dt, int64_t n)
{
    size_t es = gg_dtype_size(dt);
    unsigned char *p = malloc((size_t)n * es + 16);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        if (dt == GG_DT_BOOL)
            r &= 1;
        memcpy(p + (size_t)i * es, &r, es);
    }
    return p;
}

static gg_tensor T(void *p, gg_dtype dt, int nd, const int64_t *dims)
{
    gg_tensor t = {.data = p, .desc = {.dtype = dt, .ndim = nd}};
    for (int i = 0; i < nd; i++)
        t.desc.dims[i] = dims[i];
    return t;
}

static int64_t prod(const int64_t *d, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= d[i];
    return p;
}

/* ---- strided_copy ------------------------------------------------------------ */

typedef struct {
    const char *what;
    int nd;
    int64_t dims[4], strides[4], offset, storage;
} sc_case;

static void test_strided_copy(void)
{
    const gg_op_def *op = gg_ops_find("strided_copy");
    check(op != NULL, "%s%s", "strided_copy is in the table", "");
    if (!op)
        return;
    const sc_case cases[] = {
        {"transpose [5, 7] -> [7, 5]", 2, {7, 5}, {1, 7}, 0, 35},
        {"permute (0, 2, 1, 3) of [3, 5, 7, 2] at offset 3", 4, {3, 7, 5, 2}, {70, 2, 14, 1}, 3,
         213},
        {"expand [6] -> [4, 3, 6]", 3, {4, 3, 6}, {0, 0, 1}, 0, 6},
        {"expand [4, 1] -> [4, 9]", 2, {4, 9}, {1, 0}, 0, 4},
        {"slice [1::2, 2:6] of [7, 9]", 2, {3, 4}, {18, 1}, 11, 63},
        {"every third element, 1-D", 1, {13}, {3}, 2, 41},
        {"HF rotate-half slice x[..., 4:] of [2, 3, 1, 8]", 4, {2, 3, 1, 4}, {24, 8, 8, 1}, 4,
         48},
        {"transpose of a [2, 3, 5, 4] view's middle dims", 4, {2, 5, 3, 4}, {60, 4, 20, 1}, 0,
         120},
        {"contiguous 3-D", 3, {3, 5, 7}, {35, 7, 1}, 0, 105},
    };
    char what[200];
    for (int di = 0; di < NDTS; di++) {
        const gg_dtype dt = all_dts[di];
        const size_t es = gg_dtype_size(dt);
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const sc_case *c = &cases[ci];
            unsigned char *store = rnd_fill(dt, c->storage);
            const int64_t n = c->storage - c->offset, ny = prod(c->dims, c->nd);
            unsigned char *y = rnd_fill(dt, ny), *want = malloc((size_t)ny * es);
            gg_op_attrs a;
            gg_ops_attr_defaults(op, &a);
            for (int i = 0; i < c->nd; i++)
                a.v[i] = (double)c->strides[i];
            int64_t xd[1] = {n};
            gg_tensor in = T(store + c->offset * es, dt, 1, xd), out = T(y, dt, c->nd, c->dims);
            char err[256] = "";
            int rc = op->check(op, &in.desc, 1, &out.desc, 1, &a, err, sizeof err);
            snprintf(what, sizeof what, "strided_copy %s %s", gg_dtype_name(dt), c->what);
            check(rc == 0, "%s: the rule refused it: %s", what, err);
            gg_ops_run_cpu(op, &in, 1, &out, 1, &a);
            /* the reference: each y element's multi-index, dotted with the strides */
            for (int64_t e = 0; e < ny; e++) {
                int64_t r = e, off = c->offset;
                for (int d = c->nd - 1; d >= 0; d--) {
                    off += (r % c->dims[d]) * c->strides[d];
                    r /= c->dims[d];
                }
                memcpy(want + e * es, store + off * es, es);
            }
            check(memcmp(y, want, (size_t)ny * es) == 0, "%s%s: the elements differ", what, "");
            free(store), free(y), free(want);
        }
    }
}

/* ---- cat ------------------------------------------------------------------- */

static void test_cat(void)
{
    const gg_op_def *op = gg_ops_find("cat");
    check(op != NULL, "%s%s", "cat is in the table", "");
    if (!op)
        return;
    /* inputs' shapes are base's with dims[dim] taken from sizes */
    const struct {
        int nd, dim, nin;
        int64_t base[4], sizes[4];
    } cases[] = {
        {2, 0, 2, {0, 7}, {3, 5}},
        {2, 1, 3, {5, 0}, {1, 4, 2}},
        {3, -1, 2, {2, 3, 0}, {4, 4}},         /* rotate-half: cat(-x2, x1) */
        {4, 2, 4, {2, 3, 0, 5}, {1, 6, 2, 3}}, /* along a middle dim */
        {4, -4, 3, {0, 2, 3, 3}, {1, 2, 1}},
        {1, 0, 4, {0}, {3, 1, 7, 2}},
    };
    char what[200];
    for (int di = 0; di < NDTS; di++) {
        const gg_dtype dt = all_dts[di];
        const size_t es = gg_dtype_size(dt);
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const int nd = cases[ci].nd, nin = cases[ci].nin;
            const int dim = cases[ci].dim < 0 ? cases[ci].dim + nd : cases[ci].dim;
            gg_tensor in[4];
            int64_t ydims[4], total = 0;
            memcpy(ydims, cases[ci].base, sizeof ydims);
            for (int k = 0; k < nin; k++) {
                int64_t d[4];
                memcpy(d, cases[ci].base, sizeof d);
                d[dim] = cases[ci].sizes[k];
                in[k] = T(rnd_fill(dt, prod(d, nd)), dt, nd, d);
                total += d[dim];
            }
            ydims[dim] = total;
            const int64_t ny = prod(ydims, nd);
            unsigned char *y = rnd_fill(dt, ny), *want = malloc((size_t)ny * es);
            gg_tensor out = T(y, dt, nd, ydims);
            gg_op_attrs a;
            gg_ops_attr_defaults(op, &a);
            a.v[0] = cases[ci].dim;
            char err[256] = "";
            snprintf(what, sizeof what, "cat %s of %d along dim %d (nd %d)", gg_dtype_name(dt),
                     nin, cases[ci].dim, nd);
            gg_tensor_desc ind[4];
            for (int k = 0; k < nin; k++)
                ind[k] = in[k].desc;
            int rc = op->check(op, ind, nin, &out.desc, 1, &a, err, sizeof err);
            check(rc == 0, "%s: the rule refused it: %s", what, err);
            gg_ops_run_cpu(op, in, nin, &out, 1, &a);
            /* the reference: y's multi-index, its index along dim walked back
             * through the inputs */
            for (int64_t e = 0; e < ny; e++) {
                int64_t idx[4] = {0, 0, 0, 0}, r = e;
                for (int d = nd - 1; d >= 0; d--) {
                    idx[d] = r % ydims[d];
                    r /= ydims[d];
                }
                int k = 0;
                while (idx[dim] >= in[k].desc.dims[dim])
                    idx[dim] -= in[k++].desc.dims[dim];
                int64_t off = 0;
                for (int d = 0; d < nd; d++)
                    off = off * in[k].desc.dims[d] + idx[d];
                memcpy(want + e * es, (unsigned char *)in[k].data + off * es, es);
            }
            check(memcmp(y, want, (size_t)ny * es) == 0, "%s%s: the elements differ", what, "");
            for (int k = 0; k < nin; k++)
                free(in[k].data);
            free(y), free(want);
        }
    }
}

/* ---- index_copy ------------------------------------------------------------- */

static void test_index_copy(void)
{
    const gg_op_def *op = gg_ops_find("index_copy");
    check(op != NULL, "%s%s", "index_copy is in the table", "");
    if (!op)
        return;
    const struct {
        int nd, dim;
        int64_t self[4];
        int n;
        int64_t index[5];
    } cases[] = {
        /* HF StaticCache: k_cache.index_copy_(2, cache_position, k) */
        {4, 2, {2, 3, 11, 5}, 3, {4, 10, 0}},
        {4, 2, {2, 3, 11, 5}, 4, {-1, 11, 7, 4294967303ll}}, /* only 7 is in range */
        {3, 0, {6, 3, 2}, 2, {5, 1}},
        {3, -1, {2, 4, 9}, 5, {8, 0, 3, -9, 9}},
        {1, 0, {13}, 3, {12, 2, 6}},
    };
    char what[200];
    for (int di = 0; di < NDTS; di++) {
        const gg_dtype dt = all_dts[di];
        const size_t es = gg_dtype_size(dt);
        for (int it = 0; it < 2; it++) {
            const gg_dtype idt = it ? GG_DT_I64 : GG_DT_I32;
            for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
                const int nd = cases[ci].nd, n = cases[ci].n;
                const int dim = cases[ci].dim < 0 ? cases[ci].dim + nd : cases[ci].dim;
                int64_t sdims[4];
                memcpy(sdims, cases[ci].self, sizeof sdims);
                sdims[dim] = n;
                const int64_t ns = prod(cases[ci].self, nd), nsrc = prod(sdims, nd);
                unsigned char *self = rnd_fill(dt, ns), *src = rnd_fill(dt, nsrc);
                unsigned char *want = malloc((size_t)ns * es);
                memcpy(want, self, (size_t)ns * es);
                int64_t ix64[5];
                int32_t ix32[5];
                for (int i = 0; i < n; i++) {
                    ix64[i] = cases[ci].index[i];
                    /* an i32 index cannot hold 2^32 + 7: -3 stands for it */
                    ix32[i] = cases[ci].index[i] > INT32_MAX ? -3 : (int32_t)cases[ci].index[i];
                }
                int64_t nidx[1] = {n};
                gg_tensor in[2] = {T(src, dt, nd, sdims),
                                   T(it ? (void *)ix64 : (void *)ix32, idt, 1, nidx)};
                gg_tensor out = T(self, dt, nd, cases[ci].self);
                gg_op_attrs a;
                gg_ops_attr_defaults(op, &a);
                a.v[0] = cases[ci].dim;
                char err[256] = "";
                snprintf(what, sizeof what, "index_copy %s, %s index, self nd %d along dim %d",
                         gg_dtype_name(dt), gg_dtype_name(idt), nd, cases[ci].dim);
                gg_tensor_desc ind[2] = {in[0].desc, in[1].desc};
                int rc = op->check(op, ind, 2, &out.desc, 1, &a, err, sizeof err);
                check(rc == 0, "%s: the rule refused it: %s", what, err);
                gg_ops_run_cpu(op, in, 2, &out, 1, &a);
                /* the reference: every src element to its place, in range only */
                for (int64_t e = 0; e < nsrc; e++) {
                    int64_t idx[4] = {0, 0, 0, 0}, r = e;
                    for (int d = nd - 1; d >= 0; d--) {
                        idx[d] = r % sdims[d];
                        r /= sdims[d];
                    }
                    const int64_t at = it ? ix64[idx[dim]] : ix32[idx[dim]];
                    if (at < 0 || at >= cases[ci].self[dim])
                        continue;
                    idx[dim] = at;
                    int64_t off = 0;
                    for (int d = 0; d < nd; d++)
                        off = off * cases[ci].self[d] + idx[d];
                    memcpy(want + off * es, src + e * es, es);
                }
                check(memcmp(self, want, (size_t)ns * es) == 0,
                      "%s%s: self differs (written where it must not be, or not written)", what,
                      "");
                free(self), free(src), free(want);
            }
        }
    }
    /* a repeated index: the reference keeps the last of its rows */
    {
        float self[4] = {0, 0, 0, 0}, src[3] = {1, 2, 3};
        int32_t ix[3] = {2, 0, 2};
        int64_t ds[1] = {4}, dn[1] = {3};
        gg_tensor in[2] = {T(src, GG_DT_F32, 1, dn), T(ix, GG_DT_I32, 1, dn)};
        gg_tensor out = T(self, GG_DT_F32, 1, ds);
        gg_ops_run_cpu(op, in, 2, &out, 1, NULL);
        check(self[0] == 2 && self[1] == 0 && self[2] == 3 && self[3] == 0,
              "%s%s", "index_copy: a repeated index keeps the last row", "");
    }
}

/* ---- embedding ------------------------------------------------------------ */

static void test_embedding(void)
{
    const gg_op_def *op = gg_ops_find("embedding");
    const gg_dtype tds[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    const int64_t V = 29, D = 13;
    /* 12 ids: in range, -1, V, and 2^32 + 3 (i64 only; an i32 stand-in of -5) */
    const int64_t raw[12] = {0, 28, 29, -1, 17, 4294967299ll, 3, 3, 11, 28, 0, 5};
    const struct {
        int nd;
        int64_t dims[3];
    } shapes[] = {{1, {12}}, {2, {3, 4}}, {3, {2, 3, 2}}, {2, {1, 12}}};
    char what[200];
    for (int ti = 0; ti < 3; ti++) {
        const gg_dtype dt = tds[ti];
        const size_t es = gg_dtype_size(dt);
        unsigned char *tab = rnd_fill(dt, V * D);
        for (int it = 0; it < 2; it++) {
            int64_t i64[12];
            int32_t i32[12];
            for (int i = 0; i < 12; i++) {
                i64[i] = raw[i];
                i32[i] = raw[i] > INT32_MAX ? -5 : (int32_t)raw[i];
            }
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                const int nd = shapes[si].nd;
                int64_t yd[4];
                memcpy(yd, shapes[si].dims, sizeof(int64_t) * 3);
                yd[nd] = D;
                unsigned char *y = rnd_fill(dt, 12 * D), *want = calloc(12 * D, es);
                int64_t tdims[2] = {V, D};
                gg_tensor in[2] = {T(it ? (void *)i64 : (void *)i32, it ? GG_DT_I64 : GG_DT_I32,
                                     nd, shapes[si].dims),
                                   T(tab, dt, 2, tdims)};
                gg_tensor out = T(y, dt, nd + 1, yd);
                char err[256] = "";
                snprintf(what, sizeof what, "embedding %s table, %s ids of %d dims",
                         gg_dtype_name(dt), it ? "i64" : "i32", nd);
                gg_tensor_desc ind[2] = {in[0].desc, in[1].desc};
                int rc = op->check(op, ind, 2, &out.desc, 1, NULL, err, sizeof err);
                check(rc == 0, "%s: the rule refused it: %s", what, err);
                gg_ops_run_cpu(op, in, 2, &out, 1, NULL);
                /* an id out of range gives a row of zeros (+0.0 in every dtype) */
                for (int r = 0; r < 12; r++) {
                    const int64_t id = it ? i64[r] : i32[r];
                    if (id >= 0 && id < V)
                        memcpy(want + r * D * es, tab + id * D * es, D * es);
                }
                check(memcmp(y, want, 12 * D * es) == 0, "%s%s: rows differ", what, "");
                free(y), free(want);
            }
        }
        free(tab);
    }
}

/* ---- rules ------------------------------------------------------------------ */

/* op's check on these operands refuses them with -EINVAL and a message
 * holding `needle`. */
static void refused(const char *opname, const gg_tensor_desc *in, int nin,
                    const gg_tensor_desc *out, const double *attrs, int nattrs,
                    const char *needle, const char *what)
{
    const gg_op_def *op = gg_ops_find(opname);
    gg_op_attrs a;
    gg_ops_attr_defaults(op, &a);
    for (int i = 0; i < nattrs; i++)
        a.v[i] = attrs[i];
    char err[256] = "", label[160];
    int rc = op->check(op, in, nin, out, 1, &a, err, sizeof err);
    snprintf(label, sizeof label, "%s: %s", opname, what);
    check(rc == -EINVAL && strstr(err, needle) != NULL, "%s refused with a clear message: '%s'",
          label, err);
}

static gg_tensor_desc DS(gg_dtype dt, int nd, int64_t a, int64_t b, int64_t c, int64_t d)
{
    gg_tensor_desc t = {.dtype = dt, .ndim = nd, .dims = {a, b, c, d}};
    for (int i = nd; i < 4; i++)
        t.dims[i] = 0;
    return t;
}

static void test_rules(void)
{
    const gg_tensor_desc x35 = DS(GG_DT_F16, 1, 35, 0, 0, 0), y75 = DS(GG_DT_F16, 2, 7, 5, 0, 0);
    double s_ok[2] = {1, 7}, s_far[2] = {1, 8}, s_neg[2] = {-1, 7}, s_frac[2] = {1, 6.5};
    double s_past[3] = {1, 7, 2};
    refused("strided_copy", &x35, 1, &y75, s_far, 2, "reaches element", "a view past x");
    refused("strided_copy", &x35, 1, &y75, s_neg, 2, "integer", "a negative stride");
    refused("strided_copy", &x35, 1, &y75, s_frac, 2, "integer", "a fractional stride");
    refused("strided_copy", &x35, 1, &y75, s_past, 3, "must be 0", "a stride past y's dims");
    gg_tensor_desc x2 = DS(GG_DT_F16, 2, 5, 7, 0, 0), yf = DS(GG_DT_F32, 2, 7, 5, 0, 0);
    gg_tensor_desc x56 = DS(GG_DT_F16, 2, 5, 6, 0, 0);
    refused("strided_copy", &x56, 1, &y75, s_ok, 2, "reaches element 34 of x, which has 30",
            "a 2-D x of fewer elements than the view reaches");
    refused("strided_copy", &x35, 1, &yf, s_ok, 2, "dtype", "y of another dtype");
    {
        const gg_op_def *op = gg_ops_find("strided_copy");
        gg_op_attrs a;
        gg_ops_attr_defaults(op, &a);
        a.v[0] = 1, a.v[1] = 7;
        char err[256] = "";
        check(op->check(op, &x35, 1, &y75, 1, &a, err, sizeof err) == 0,
              "strided_copy: the transpose's rule holds%s%s", err, "");
        /* a bucketed program's view of a [batch, r] intermediate */
        check(op->check(op, &x2, 1, &y75, 1, &a, err, sizeof err) == 0,
              "strided_copy: a 2-D x is read as its 35 elements%s%s", err, "");
    }

    gg_tensor_desc c0 = DS(GG_DT_I64, 3, 2, 3, 4, 0), c1 = DS(GG_DT_I64, 3, 2, 5, 4, 0),
                   cy = DS(GG_DT_I64, 3, 2, 8, 4, 0), cbad = DS(GG_DT_I64, 3, 3, 5, 4, 0),
                   c32 = DS(GG_DT_I32, 3, 2, 5, 4, 0), c2d = DS(GG_DT_I64, 2, 2, 5, 0, 0);
    gg_tensor_desc in_ok[2] = {c0, c1}, in_bad[2] = {c0, cbad}, in_dt[2] = {c0, c32},
                   in_nd[2] = {c0, c2d};
    double d1 = 1, d3 = 3, dm4 = -4, dfrac = 0.5;
    refused("cat", in_bad, 2, &cy, &d1, 1, "but along dim 1", "inputs differing off dim");
    refused("cat", in_ok, 2, &cy, &d3, 1, "integer from -3 to 2", "dim 3 of 3-D inputs");
    refused("cat", in_ok, 2, &cy, &dm4, 1, "integer from -3 to 2", "dim -4 of 3-D inputs");
    refused("cat", in_ok, 2, &cy, &dfrac, 1, "integer", "a fractional dim");
    refused("cat", in_dt, 2, &cy, &d1, 1, "dtype", "inputs of two dtypes");
    refused("cat", in_nd, 2, &cy, &d1, 1, "shape of x0", "inputs of two ndims");
    gg_tensor_desc cy_wrong = DS(GG_DT_I64, 3, 2, 9, 4, 0);
    refused("cat", in_ok, 2, &cy_wrong, &d1, 1, "must have shape [2, 8, 4]", "y of a wrong size");
    refused("cat", in_ok, 1, &cy, &d1, 1, "expected 2 to 4 inputs", "one input");
    gg_tensor_desc five[5] = {c0, c0, c0, c0, c0};
    refused("cat", five, 5, &cy, &d1, 1, "expected 2 to 4 inputs", "five inputs");

    gg_tensor_desc self = DS(GG_DT_BF16, 4, 2, 3, 11, 5), src = DS(GG_DT_BF16, 4, 2, 3, 2, 5),
                   ix = DS(GG_DT_I64, 1, 2, 0, 0, 0), ixf = DS(GG_DT_F32, 1, 2, 0, 0, 0),
                   ix2 = DS(GG_DT_I32, 2, 1, 2, 0, 0), srcw = DS(GG_DT_BF16, 4, 2, 3, 3, 5),
                   srcd = DS(GG_DT_F16, 4, 2, 3, 2, 5);
    double d2 = 2, d4 = 4;
    gg_tensor_desc i_ok[2] = {src, ix}, i_f[2] = {src, ixf}, i_2d[2] = {src, ix2},
                   i_w[2] = {srcw, ix}, i_dt[2] = {srcd, ix};
    refused("index_copy", i_f, 2, &self, &d2, 1, "i32 or i64", "a f32 index");
    refused("index_copy", i_2d, 2, &self, &d2, 1, "1-D", "a 2-D index");
    refused("index_copy", i_w, 2, &self, &d2, 1, "src must have shape [2, 3, 2, 5]",
            "src longer than the index");
    refused("index_copy", i_dt, 2, &self, &d2, 1, "dtype", "src of another dtype");
    refused("index_copy", i_ok, 2, &self, &d4, 1, "integer from -4 to 3", "dim 4 of 4-D self");

    gg_tensor_desc ids3 = DS(GG_DT_I64, 3, 2, 3, 4, 0), ids4 = DS(GG_DT_I64, 4, 2, 3, 4, 1),
                   idsf = DS(GG_DT_F32, 2, 2, 3, 0, 0), tab = DS(GG_DT_F16, 2, 50, 8, 0, 0),
                   ey = DS(GG_DT_F16, 4, 2, 3, 4, 8), ey_bad = DS(GG_DT_F16, 3, 6, 4, 8, 0),
                   ey4 = DS(GG_DT_F16, 4, 2, 3, 4, 1);
    gg_tensor_desc e_ok[2] = {ids3, tab}, e_4[2] = {ids4, tab}, e_f[2] = {idsf, tab};
    refused("embedding", e_4, 2, &ey4, NULL, 0, "1 to 3 dims", "ids of 4 dims");
    refused("embedding", e_f, 2, &ey, NULL, 0, "i32 or i64", "f32 ids");
    refused("embedding", e_ok, 2, &ey_bad, NULL, 0, "[2, 3, 4, 8]", "y not ids' dims + [D]");
}

int main(void)
{
    test_strided_copy();
    test_cat();
    test_index_copy();
    test_embedding();
    test_rules();
    printf("test_ops_movement: %d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
