/* SPDX-License-Identifier: MIT */
/* Fixed-bucket histograms and labelled counters for the `metrics` method
 * (Prometheus text, docs/metrics.md).
 *
 * Everything is preallocated inside the core's stats (stats.h): recording a
 * replay finds or inserts its (program name, bucket) series in a fixed
 * table and adds to two histograms, without allocating.  The table holds
 * GG_METRICS_MAX_SERIES named series; replays of any further (program,
 * bucket) pair are aggregated under program="other" (one series per
 * bucket), so the label cardinality stays bounded whatever clients name
 * their programs.  A program actually named "other" lands there too.
 *
 * Every function here is called with the core lock held. */
#ifndef GG_METRICS_H
#define GG_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

/* upper bounds in microseconds, 1-2-5 steps from 1 us to 10 s: a fast-path
 * hit and a replay stuck behind a long capture or a slow device both land
 * in a bucket of their own.  The last bucket (+Inf) is implicit. */
#define GG_METRICS_NBOUNDS 22
#define GG_METRICS_MAX_SERIES 64
/* "other" series: one per bucket value seen, then one catch-all */
#define GG_METRICS_MAX_OTHER (GG_MAX_BUCKETS + 2)
/* errno values counted one by one; larger ones are counted as EIO */
#define GG_METRICS_MAX_ERRNO 160

extern const double gg_metrics_bounds_us[GG_METRICS_NBOUNDS];

typedef enum {
    GG_PATH_GRAPH = 0,      /* a graph replay run by the executor (socket, or a
                             * fast-path descriptor handed to it) */
    GG_PATH_EAGER,          /* run as eager launches (any reason) */
    GG_PATH_FASTPATH,       /* a fast-path cache hit launched by the ring thread */
    GG_PATH_COUNT
} gg_metrics_path;

typedef struct {
    uint64_t counts[GG_METRICS_NBOUNDS + 1];  /* per bucket, not cumulative; last +Inf */
    uint64_t count;
    double sum_us;
} gg_metrics_hist;

typedef struct {
    char program[64];
    int bucket;             /* 0: oversize (eager beyond the largest bucket); -1: any */
    gg_metrics_hist rtt;    /* round trip as the daemon sees it */
    gg_metrics_hist dev;    /* device time */
} gg_metrics_series;

typedef struct gg_metrics {
    uint64_t replays[GG_PATH_COUNT];
    uint64_t errors[GG_METRICS_MAX_ERRNO];  /* by errno */
    unsigned nseries, nother;
    gg_metrics_series series[GG_METRICS_MAX_SERIES];
    gg_metrics_series other[GG_METRICS_MAX_OTHER];
} gg_metrics;

/* A replay that completed: its path, program name, bucket (0: oversize),
 * round trip and device time in microseconds. */
void gg_metrics_replay(gg_metrics *m, gg_metrics_path path, const char *program, int bucket,
                       double rtt_us, double dev_us);
/* A request answered with an error (a negative errno). */
void gg_metrics_error(gg_metrics *m, int neg_errno);

/* The text of everything above, in the Prometheus text format 0.0.4
 * (which OpenMetrics parsers read too), appended to *buf (grown with
 * realloc).  The caller adds the counters and gauges it owns through
 * gg_metrics_put_* first.  0, or -ENOMEM. */
typedef struct {
    char *data;
    size_t len, cap;
    int oom;
} gg_metrics_buf;

void gg_metrics_printf(gg_metrics_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "# HELP name help\n# TYPE name type\n" */
void gg_metrics_head(gg_metrics_buf *b, const char *name, const char *type, const char *help);
/* name{label="value"} n, or name n when label is NULL; value escaped */
void gg_metrics_sample(gg_metrics_buf *b, const char *name, const char *label, const char *value,
                       double v);
/* A label value with \, " and newline escaped (the exposition format's rule). */
void gg_metrics_escape(gg_metrics_buf *b, const char *value);
/* The replay counters, the errors by code (every code the wire names, at
 * zero until it happens, so rate() and increase() see the first error) and
 * the two histogram families. */
void gg_metrics_render(const gg_metrics *m, gg_metrics_buf *b);
/* The standard process_* metrics of the calling process (the names and
 * meanings of Prometheus' client libraries), read from /proc: CPU seconds,
 * start time (Unix seconds), resident and virtual memory, open and maximum
 * file descriptors.  A figure /proc does not give is left out. */
void gg_metrics_process(gg_metrics_buf *b);

#endif
