/* SPDX-License-Identifier: MIT */
/* The one place a replay that ran is counted, whichever transport took it
 * and whichever thread ran it (the executor's completion on the loop, a
 * fast-path hit's release): the daemon's, the session's and the cache
 * entry's counters, the metrics, replay-mode adaptive's record. */
#ifndef GG_ACCOUNT_H
#define GG_ACCOUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/cache.h"
#include "core/core.h"
#include "core/metrics.h"
#include "core/program.h"
#include "core/session.h"

/* What a replay that ran tells the counters. */
typedef struct gg_replay_ran {
    gg_metrics_path path;   /* GG_PATH_GRAPH, GG_PATH_EAGER or GG_PATH_FASTPATH */
    bool graph;             /* the entry's graph ran (else eager launches) */
    bool fallback;          /* eager because the graph could not run */
    bool validated;         /* the graph and eager both ran (a validation sample) */
    /* replay-mode adaptive: the run the entry picked for this replay and
     * its round (GG_ADAPT_RUN_NONE: a plain hit, which picked nothing) */
    int adapt_run;
    uint32_t adapt_round;
    double device_us;       /* its work on the device */
    double round_trip_us;   /* the request taken to its completion seen */
} gg_replay_ran;

/* Count a replay that ran, whichever transport and thread ran it: the
 * daemon's, the session's and the entry's counters, the metrics, and
 * replay-mode adaptive's record of the entry.  e: NULL above the largest
 * bucket.  Core lock held. */
void gg_account_replay(gg_core *core, gg_session *s, const gg_program *p, gg_cache_entry *e,
                       const gg_replay_ran *r);

#endif
