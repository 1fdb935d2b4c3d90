/* SPDX-License-Identifier: MIT */
/* How the GPU tests compare a result with its CPU reference: the relative L2
 * error over n elements of one dtype (kernels/ops.h loads them as float),
 * and the element a failure names (the first that differs, or under L2 the
 * farthest) with both values. */
#ifndef GG_TEST_GPU_COMPARE_H
#define GG_TEST_GPU_COMPARE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

/* ||got - ref|| / ||ref|| (the plain norm when ref is all zeros); INFINITY,
 * with *bad the first such index, when got is not finite where ref is, so
 * a NaN never passes.  *bad is -1 otherwise. */
static inline double gt_rel_l2(const void *got, const void *ref, gg_dtype dt, int64_t n,
                               int64_t *bad)
{
    double num = 0, den = 0;
    *bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double g = gg_load(got, dt, i), r = gg_load(ref, dt, i);
        if (!isfinite(g) && isfinite(r)) {
            *bad = i;
            return INFINITY;
        }
        num += (g - r) * (g - r);
        den += r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The first of n elements of dt whose bytes differ between got and ref, or
 * -1: what a bit-exact comparison names when it fails. */
static inline int64_t gt_first_diff(const void *got, const void *ref, gg_dtype dt, int64_t n)
{
    const size_t es = gg_dtype_size(dt);
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)got + (size_t)i * es, (const char *)ref + (size_t)i * es, es))
            return i;
    return -1;
}

/* The element of got farthest from ref, or -1 when n is 0: under a rel-L2
 * tolerance no element fails alone, so a failure names the one that weighs
 * most.  A NaN against a number, or an infinity against anything else, is
 * farther than any finite difference; the first of equals wins. */
static inline int64_t gt_farthest(const void *got, const void *ref, gg_dtype dt, int64_t n)
{
    int64_t at = -1;
    double worst = -1;
    for (int64_t i = 0; i < n; i++) {
        const double g = gg_load_f64(got, dt, i), r = gg_load_f64(ref, dt, i);
        double d;
        if (isnan(g) || isnan(r))
            d = isnan(g) && isnan(r) ? 0 : INFINITY;
        else if (isinf(g) || isinf(r))
            d = g == r ? 0 : INFINITY;
        else
            d = fabs(g - r);
        if (d > worst) {
            worst = d;
            at = i;
        }
    }
    return at;
}

/* Element i of p as text: integers exactly, a bool as its byte (a poison
 * byte is no 0 or 1), floating values with their bits (a NaN's payload, a
 * value off by one ulp). */
static inline const char *gt_elem_str(char *buf, size_t len, const void *p, gg_dtype dt,
                                      int64_t i)
{
    if (dt == GG_DT_BOOL) {
        snprintf(buf, len, "%u", (unsigned)((const unsigned char *)p)[i]);
    } else if (!gg_dtype_is_float(dt)) {
        snprintf(buf, len, "%lld", (long long)gg_load_i64(p, dt, i));
    } else {
        const size_t es = gg_dtype_size(dt);
        uint32_t bits = 0;
        memcpy(&bits, (const char *)p + (size_t)i * es, es);
        snprintf(buf, len, "%.9g (0x%0*x)", gg_load_f64(p, dt, i), (int)es * 2, (unsigned)bits);
    }
    return buf;
}

/* "element i: device <got[i]>, reference <ref[i]>" into buf, for a failure
 * message. */
static inline const char *gt_diff_str(char *buf, size_t len, const void *got, const void *ref,
                                      gg_dtype dt, int64_t i)
{
    char g[48], r[48];
    snprintf(buf, len, "element %lld: device %s, reference %s", (long long)i,
             gt_elem_str(g, sizeof g, got, dt, i), gt_elem_str(r, sizeof r, ref, dt, i));
    return buf;
}

#endif
