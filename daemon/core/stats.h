/* SPDX-License-Identifier: MIT */
/* Counters served by `stats`, STATUS= lines and the cache entry figures. */
#ifndef GG_STATS_H
#define GG_STATS_H

#include <stdint.h>

#include "core/metrics.h"

typedef struct {
    uint64_t requests;
    uint64_t errors;
    /* Captures and instantiations apart: a capture is either instantiated
     * anew or applied to the graph an entry holds (an exec update: after a
     * rebind, or a parked graph adopted warm), so a warm adoption shows
     * captures and exec updates but no instantiations. */
    uint64_t capture_count;       /* graphs captured */
    uint64_t instantiations;      /* captures instantiated anew */
    uint64_t replay_count;        /* replays served from a graph */
    uint64_t fastpath_replays;    /* descriptors taken from fast-path rings */
    uint64_t eager_count;         /* replays run as eager launches (any reason) */
    uint64_t fallback_count;      /* eager because a capture/instantiate/launch failed */
    uint64_t oversize_count;      /* eager because batch > largest bucket */
    uint64_t validation_failures;
    uint64_t validations;
    uint64_t evictions;
    uint64_t exec_updates;
    double replay_us_sum;         /* over replay_count */
    double eager_us_sum;          /* over eager_count */
    /* replays by path, errors by code, latency histograms (`metrics`) */
    gg_metrics metrics;
} gg_stats;

static inline double gg_stats_avg(double sum, uint64_t n)
{
    return n ? sum / (double)n : 0.0;
}

#endif
