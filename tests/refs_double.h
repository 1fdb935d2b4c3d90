/* SPDX-License-Identifier: MIT */
/* Double-precision references for the op tests.  Written independently of
 * kernels/ops_cpu.c (plain loops, double everywhere, textbook formulas) so a
 * shared mistake is unlikely. */
#ifndef GG_TEST_REFS_DOUBLE_H
#define GG_TEST_REFS_DOUBLE_H

#include <stdint.h>

void refd_scale(const double *x, double *y, int64_t n, double s);
void refd_gelu(const double *x, double *y, int64_t n, int tanh_form);
void refd_silu(const double *x, double *y, int64_t n);
/* b is [n] (bcast == 0) or [cols] broadcast over n / cols rows */
void refd_add(const double *a, const double *b, double *y, int64_t n, int64_t cols, int bcast);
void refd_mul(const double *a, const double *b, double *y, int64_t n, int64_t cols, int bcast);
void refd_silu_mul(const double *a, const double *b, double *y, int64_t n);
void refd_layernorm(const double *x, const double *w, const double *b, double *y, int64_t rows,
                    int64_t d, double eps);
void refd_rmsnorm(const double *x, const double *w, double *y, int64_t rows, int64_t d,
                  double eps);
/* x [rows, k], w [n, k], b [n] or NULL -> y [rows, n] */
void refd_linear(const double *x, const double *w, const double *b, double *y, int64_t rows,
                 int64_t k, int64_t n);
void refd_softmax(const double *x, double *y, int64_t rows, int64_t d);

#endif
