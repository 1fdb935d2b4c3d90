/* SPDX-License-Identifier: MIT */
/* Shared by the op-library unit tests (test_ops.c and the files it links:
 * test_ops_rules.c, test_ops_accuracy.c): pass/fail counting, the base seed
 * and per-case seeds, an independent f16/bf16 decoder, tensor descriptors. */
#ifndef GG_TEST_OPS_UTIL_H
#define GG_TEST_OPS_UTIL_H

#include "ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* test_ops.c: checks passed and failed, GG_TEST_VERBOSE, the last case
 * number, the base seed (GG_TEST_SEED) */
extern int g_pass, g_fail, g_verbose, g_case;
extern uint64_t g_seed;

/* The entry points, run by main in this order. */
void test_ops_table(void);        /* test_ops_rules.c */
void test_ops_conversions(void);  /* test_ops_rules.c */
void test_ops_checks(void);       /* test_ops_rules.c */
void test_ops_accuracy(void);     /* test_ops_accuracy.c */
void test_ops_independence(void); /* test_ops_accuracy.c */

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline void result(int ok, const char *fmt, ...)
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

static inline void *xmalloc(size_t n)
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

static inline uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rng_u64(rng *r)
{
    return splitmix(&r->s);
}

static inline double rng_uniform(rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(rng_u64(r) >> 11) * 0x1p-53);
}

/* A fresh seed for the next case. */
static inline uint64_t next_seed(void)
{
    uint64_t s = g_seed ^ ((uint64_t)++g_case * 0xd1b54a32d192ed03ull);
    return splitmix(&s);
}

/* ---- independent decoding ---------------------------------------------- */

static inline double dec_f16(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static inline double dec_bf16(uint16_t b)
{
    int e = (b >> 7) & 255, m = b & 127;
    double v = e == 255 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (b & 0x8000) ? -v : v;
}

static inline double dec(const void *p, gg_dtype dt, int64_t i)
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

/* ---- descs and tensors -------------------------------------------------- */

static inline gg_tensor_desc dsc(gg_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2,
                                 int64_t d3)
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

static inline int64_t numel(const gg_tensor_desc *d)
{
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++)
        n *= d->dims[i];
    return n;
}

#endif
