/* SPDX-License-Identifier: MIT */
/* How the GPU tests compare a result with its CPU reference: the relative L2
 * error over n elements of one dtype (kernels/ops.h loads them as float). */
#ifndef GG_TEST_GPU_COMPARE_H
#define GG_TEST_GPU_COMPARE_H

#include <math.h>
#include <stdint.h>

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

#endif
