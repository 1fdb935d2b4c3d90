/* SPDX-License-Identifier: MIT */
#include "refs_double.h"

#include <math.h>
#include <stddef.h>

void refd_scale(const double *x, double *y, int64_t n, double s)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * s;
}

void refd_gelu(const double *x, double *y, int64_t n, int tanh_form)
{
    const double pi = 3.14159265358979323846;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        if (tanh_form)
            y[i] = 0.5 * v * (1.0 + tanh(sqrt(2.0 / pi) * (v + 0.044715 * pow(v, 3.0))));
        else
            y[i] = v * 0.5 * erfc(-v / sqrt(2.0)); /* = v * Phi(v) */
    }
}

static double sigmoid(double v)
{
    return v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
}

void refd_silu(const double *x, double *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * sigmoid(x[i]);
}

void refd_add(const double *a, const double *b, double *y, int64_t n, int64_t cols, int bcast)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + (bcast ? b[i % cols] : b[i]);
}

void refd_mul(const double *a, const double *b, double *y, int64_t n, int64_t cols, int bcast)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] * (bcast ? b[i % cols] : b[i]);
}

void refd_silu_mul(const double *a, const double *b, double *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] * sigmoid(a[i]) * b[i];
}

void refd_layernorm(const double *x, const double *w, const double *b, double *y, int64_t rows,
                    int64_t d, double eps)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * d;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++)
            mean += xr[i];
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)d; /* biased, like torch */
        double den = sqrt(var + eps);
        for (int64_t i = 0; i < d; i++)
            y[r * d + i] = (xr[i] - mean) / den * w[i] + b[i];
    }
}

void refd_rmsnorm(const double *x, const double *w, double *y, int64_t rows, int64_t d,
                  double eps)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * d;
        double ms = 0;
        for (int64_t i = 0; i < d; i++)
            ms += xr[i] * xr[i];
        ms /= (double)d;
        double den = sqrt(ms + eps);
        for (int64_t i = 0; i < d; i++)
            y[r * d + i] = xr[i] / den * w[i];
    }
}

void refd_linear(const double *x, const double *w, const double *b, double *y, int64_t rows,
                 int64_t k, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < n; o++) {
            double s = b ? b[o] : 0.0;
            for (int64_t i = 0; i < k; i++)
                s += x[r * k + i] * w[o * k + i];
            y[r * n + o] = s;
        }
}

void refd_softmax(const double *x, double *y, int64_t rows, int64_t d)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * d;
        double mx = -INFINITY, s = 0;
        for (int64_t i = 0; i < d; i++)
            mx = fmax(mx, xr[i]);
        for (int64_t i = 0; i < d; i++)
            s += exp(xr[i] - mx);
        for (int64_t i = 0; i < d; i++)
            y[r * d + i] = exp(xr[i] - mx) / s;
    }
}
