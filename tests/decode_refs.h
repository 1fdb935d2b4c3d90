/* SPDX-License-Identifier: MIT */
/* Double-precision references for the decode-step ops (embedding, rope,
 * cache_write, attention_decode, argmax, cast), independent of the CPU
 * references in kernels/ops_cpu.c, and random operand helpers; shared by
 * tests/test_ops_decode.c (cpu) and tests/gpu/test_gpu_decode.c. */
#ifndef GG_DECODE_REFS_H
#define GG_DECODE_REFS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static inline uint64_t dref_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline double dref_unit(uint64_t *s) /* [-1, 1) */
{
    return (double)(dref_rng(s) >> 11) / 4503599627370496.0 - 1.0;
}

/* n random values stored in dt at p (already rounded), and as doubles in d. */
static inline void dref_fill(void *p, double *d, gg_dtype dt, int64_t n, uint64_t *s, double amp)
{
    for (int64_t i = 0; i < n; i++) {
        gg_store(p, dt, i, (float)(dref_unit(s) * amp));
        if (d)
            d[i] = gg_load(p, dt, i);
    }
}

static inline void dref_embedding(const int32_t *ids, const double *tab, double *y, int64_t rows,
                                  int64_t v, int64_t d)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < d; i++)
            y[r * d + i] = ids[r] >= 0 && ids[r] < v ? tab[ids[r] * d + i] : 0.0;
}

/* The angle is the contract's f32 value; its cos and sin in double. */
static inline void dref_rope(const double *x, const int32_t *pos, double *y, int64_t rows,
                             int64_t h, int64_t dh, int rd, double theta, int gptj)
{
    memcpy(y, x, sizeof(double) * (size_t)(rows * h * dh));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t hh = 0; hh < h; hh++)
            for (int i = 0; i < rd / 2; i++) {
                float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)rd);
                double ang = (double)((float)pos[r] * inv);
                int64_t b = (r * h + hh) * dh;
                int64_t i0 = b + (gptj ? 2 * i : i), i1 = b + (gptj ? 2 * i + 1 : i + rd / 2);
                y[i0] = x[i0] * cos(ang) - x[i1] * sin(ang);
                y[i1] = x[i1] * cos(ang) + x[i0] * sin(ang);
            }
}

static inline void dref_cache_write(const double *x, const int32_t *pos, double *cache,
                                    int64_t rows, int64_t real, int64_t s, int64_t row)
{
    for (int64_t r = 0; r < rows && r < real; r++)
        if (pos[r] >= 0 && pos[r] < s)
            memcpy(cache + (r * s + pos[r]) * row, x + r * row, sizeof(double) * (size_t)row);
}

static inline void dref_attention(const double *q, const double *k, const double *v,
                                  const int32_t *lens, double *y, int64_t rows, int64_t hq,
                                  int64_t hkv, int64_t s, int64_t dh, double scale)
{
    double *sc = malloc(sizeof(double) * (size_t)(s + 1));
    for (int64_t r = 0; r < rows; r++) {
        int64_t len = lens[r] < 0 ? 0 : lens[r] > s ? s : lens[r];
        for (int64_t h = 0; h < hq; h++) {
            int64_t kh = h / (hq / hkv);
            const double *qq = q + (r * hq + h) * dh;
            double m = -INFINITY, l = 0;
            for (int64_t j = 0; j < len; j++) {
                const double *kk = k + ((r * s + j) * hkv + kh) * dh;
                double dot = 0;
                for (int64_t d = 0; d < dh; d++)
                    dot += qq[d] * kk[d];
                sc[j] = dot * scale;
                m = sc[j] > m ? sc[j] : m;
            }
            for (int64_t d = 0; d < dh; d++)
                y[(r * hq + h) * dh + d] = 0;
            for (int64_t j = 0; j < len; j++) {
                double p = exp(sc[j] - m);
                l += p;
                const double *vv = v + ((r * s + j) * hkv + kh) * dh;
                for (int64_t d = 0; d < dh; d++)
                    y[(r * hq + h) * dh + d] += p * vv[d];
            }
            for (int64_t d = 0; d < dh && len; d++)
                y[(r * hq + h) * dh + d] /= l;
        }
    }
    free(sc);
}

static inline void dref_argmax(const double *x, int32_t *y, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        int64_t b = 0;
        for (int64_t i = 1; i < cols; i++)
            if (x[r * cols + i] > x[r * cols + b])
                b = i;
        y[r] = (int32_t)b;
    }
}

/* relative L2 of the stored tensor against a double reference */
static inline double dref_rel(const void *p, gg_dtype dt, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)gg_load(p, dt, i) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static inline double dref_tol(gg_dtype dt)
{
    return dt == GG_DT_F32 ? 1e-5 : dt == GG_DT_F16 ? 2e-3 : 1e-2;
}

#endif
