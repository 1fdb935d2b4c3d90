/* SPDX-License-Identifier: MIT */
/* Fixed-bucket histograms and the Prometheus text (metrics.h). */
#include "core/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

const double gg_metrics_bounds_us[GG_METRICS_NBOUNDS] = {
    1,   2,   5,   10,  20,  50,  100, 200, 500, 1e3, 2e3,
    5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7,
};

static void metrics_observe(gg_metrics_hist *h, double us)
{
    if (!(us >= 0))
        us = 0;     /* NaN or a clock step: counted in the first bucket */
    int i = 0;
    while (i < GG_METRICS_NBOUNDS && us > gg_metrics_bounds_us[i])
        i++;
    h->counts[i]++;
    h->count++;
    h->sum_us += us;
}

static gg_metrics_series *metrics_other(gg_metrics *m, int bucket)
{
    for (unsigned i = 0; i < m->nother; i++)
        if (m->other[i].bucket == bucket)
            return &m->other[i];
    if (m->nother + 1 < GG_METRICS_MAX_OTHER) {
        gg_metrics_series *s = &m->other[m->nother++];
        snprintf(s->program, sizeof(s->program), "other");
        s->bucket = bucket;
        return s;
    }
    /* the last row takes every bucket beyond (cannot happen with the
     * configured buckets plus oversize, but stays bounded if it did) */
    gg_metrics_series *s = &m->other[GG_METRICS_MAX_OTHER - 1];
    if (!s->program[0]) {
        snprintf(s->program, sizeof(s->program), "other");
        s->bucket = -1;
    }
    return s;
}

static gg_metrics_series *metrics_find(gg_metrics *m, const char *program, int bucket)
{
    if (strcmp(program, "other") == 0)
        return metrics_other(m, bucket);
    for (unsigned i = 0; i < m->nseries; i++)
        if (m->series[i].bucket == bucket && strcmp(m->series[i].program, program) == 0)
            return &m->series[i];
    if (m->nseries < GG_METRICS_MAX_SERIES) {
        gg_metrics_series *s = &m->series[m->nseries++];
        snprintf(s->program, sizeof(s->program), "%s", program);
        s->bucket = bucket;
        return s;
    }
    return metrics_other(m, bucket);
}

void gg_metrics_replay(gg_metrics *m, gg_metrics_path path, const char *program, int bucket,
                       double rtt_us, double dev_us)
{
    m->replays[path]++;
    gg_metrics_series *s = metrics_find(m, program ? program : "", bucket);
    metrics_observe(&s->rtt, rtt_us);
    metrics_observe(&s->dev, dev_us);
}

void gg_metrics_error(gg_metrics *m, int neg_errno)
{
    int e = neg_errno < 0 ? -neg_errno : neg_errno;
    if (e <= 0 || e >= GG_METRICS_MAX_ERRNO)
        e = EIO;
    m->errors[e]++;
}

/* ---- text ------------------------------------------------------------------ */

static void metrics_grow(gg_metrics_buf *b, size_t more)
{
    if (b->oom || b->len + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 16384;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->oom = 1;
        return;
    }
    b->data = d;
    b->cap = cap;
}

void gg_metrics_printf(gg_metrics_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    metrics_grow(b, (size_t)n);
    if (b->oom)
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void gg_metrics_escape(gg_metrics_buf *b, const char *value)
{
    for (const char *p = value; *p; p++) {
        if (*p == '\\')
            gg_metrics_printf(b, "\\\\");
        else if (*p == '"')
            gg_metrics_printf(b, "\\\"");
        else if (*p == '\n')
            gg_metrics_printf(b, "\\n");
        else
            gg_metrics_printf(b, "%c", *p);
    }
}

void gg_metrics_head(gg_metrics_buf *b, const char *name, const char *type, const char *help)
{
    gg_metrics_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metrics_value(gg_metrics_buf *b, double v)
{
    if (isinf(v))
        gg_metrics_printf(b, " %s\n", v > 0 ? "+Inf" : "-Inf");
    else if (isnan(v))
        gg_metrics_printf(b, " NaN\n");
    else if (v == floor(v) && fabs(v) < 1e15)
        gg_metrics_printf(b, " %.0f\n", v);
    else {
        /* the shortest form that reads back as the same double */
        char t[40];
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v);
            if (strtod(t, NULL) == v)
                break;
        }
        gg_metrics_printf(b, " %s\n", t);
    }
}

void gg_metrics_sample(gg_metrics_buf *b, const char *name, const char *label, const char *value,
                       double v)
{
    gg_metrics_printf(b, "%s", name);
    if (label) {
        gg_metrics_printf(b, "{%s=\"", label);
        gg_metrics_escape(b, value);
        gg_metrics_printf(b, "\"}");
    }
    metrics_value(b, v);
}

static void metrics_bucket_label(char *buf, size_t len, int bucket)
{
    if (bucket == 0)
        snprintf(buf, len, "oversize");
    else if (bucket < 0)
        snprintf(buf, len, "other");
    else
        snprintf(buf, len, "%d", bucket);
}

static void metrics_hist(gg_metrics_buf *b, const char *name, const gg_metrics_series *s,
                         const gg_metrics_hist *h)
{
    char bucket[16];
    metrics_bucket_label(bucket, sizeof(bucket), s->bucket);
    uint64_t cum = 0;
    for (int i = 0; i <= GG_METRICS_NBOUNDS; i++) {
        cum += h->counts[i];
        gg_metrics_printf(b, "%s_bucket{program=\"", name);
        gg_metrics_escape(b, s->program);
        if (i < GG_METRICS_NBOUNDS)
            gg_metrics_printf(b, "\",bucket=\"%s\",le=\"%g\"} %llu\n", bucket,
                              gg_metrics_bounds_us[i] / 1e6, (unsigned long long)cum);
        else
            gg_metrics_printf(b, "\",bucket=\"%s\",le=\"+Inf\"} %llu\n", bucket,
                              (unsigned long long)cum);
    }
    gg_metrics_printf(b, "%s_sum{program=\"", name);
    gg_metrics_escape(b, s->program);
    gg_metrics_printf(b, "\",bucket=\"%s\"} %.9g\n", bucket, h->sum_us / 1e6);
    gg_metrics_printf(b, "%s_count{program=\"", name);
    gg_metrics_escape(b, s->program);
    gg_metrics_printf(b, "\",bucket=\"%s\"} %llu\n", bucket, (unsigned long long)h->count);
}

static void metrics_hist_family(gg_metrics_buf *b, const gg_metrics *m, const char *name,
                                const char *help, bool dev)
{
    gg_metrics_head(b, name, "histogram", help);
    for (unsigned i = 0; i < m->nseries; i++)
        metrics_hist(b, name, &m->series[i], dev ? &m->series[i].dev : &m->series[i].rtt);
    for (unsigned i = 0; i < GG_METRICS_MAX_OTHER; i++) {
        const gg_metrics_series *s = &m->other[i];
        if (s->program[0])
            metrics_hist(b, name, s, dev ? &s->dev : &s->rtt);
    }
}

void gg_metrics_render(const gg_metrics *m, gg_metrics_buf *b)
{
    static const char *const paths[GG_PATH_COUNT] = {"graph", "eager", "fastpath"};
    gg_metrics_head(b, "gfxgraph_replays_total", "counter",
                    "Replays completed, by path: graph (a graph run by the executor), eager "
                    "(eager launches), fastpath (a fast-path cache hit).");
    for (int p = 0; p < GG_PATH_COUNT; p++)
        gg_metrics_sample(b, "gfxgraph_replays_total", "path", paths[p], (double)m->replays[p]);

    /* by code name: errnos the wire has no name for are EIO there too.
     * Every errno below the cap is visited, counted or not, so each code the
     * wire names gets its series from the start. */
    const char *names[GG_METRICS_MAX_ERRNO];
    uint64_t counts[GG_METRICS_MAX_ERRNO];
    int n = 0;
    for (int e = 1; e < GG_METRICS_MAX_ERRNO; e++) {
        const char *code = proto_errno_code(-e);
        int k = 0;
        while (k < n && strcmp(names[k], code) != 0)
            k++;
        if (k == n) {
            names[n] = code;
            counts[n++] = 0;
        }
        counts[k] += m->errors[e];
    }
    gg_metrics_head(b, "gfxgraph_errors_total", "counter",
                    "Requests (socket messages and fast-path descriptors) answered with an "
                    "error, by its code.");
    for (int k = 0; k < n; k++)
        gg_metrics_sample(b, "gfxgraph_errors_total", "code", names[k], (double)counts[k]);

    metrics_hist_family(b, m, "gfxgraph_replay_round_trip_seconds",
                        "Replay round trip inside the daemon (request taken to completion seen), "
                        "by program name and bucket; program=\"other\" aggregates the series "
                        "beyond the cap.", false);
    metrics_hist_family(b, m, "gfxgraph_replay_device_seconds",
                        "Replay device time, by program name and bucket.", true);
}
