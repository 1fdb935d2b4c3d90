/* SPDX-License-Identifier: MIT */
/* replay-mode adaptive: for each cache entry (program, branch, bucket),
 * whether its replays run as one graph launch or as eager launches.
 *
 * An entry starts by measuring: its replays alternate between the two
 * paths until each has `adaptive-samples` timed runs (after one warm-up run
 * of each, not counted); the path with the lower median device time wins
 * (a tie keeps the graph).  Every `adaptive-recheck` replays after that the
 * entry measures again, in case the device's load or the program's buffers
 * changed which is faster.  Each decision is also remembered by the
 * program's structural signature (program.c's sig, the one parking uses)
 * and uid, so a client that defines the same program again starts from the
 * decision instead of measuring.
 *
 * Everything here runs under the core lock.  The functions on gg_adapt are
 * pure bookkeeping over the times they are given, so tests drive them with
 * made-up timings; where the times come from is gg_adapt_clock's choice
 * (the measured device time, or adaptive-timing's fixed figures). */
#ifndef GG_ADAPT_H
#define GG_ADAPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/config.h"

typedef enum { GG_ADAPT_MEASURING = 0, GG_ADAPT_GRAPH, GG_ADAPT_EAGER } gg_adapt_choice;
/* A job's pick: none (not adaptive), or the path it was told to take. */
enum { GG_ADAPT_RUN_NONE = 0, GG_ADAPT_RUN_GRAPH, GG_ADAPT_RUN_EAGER };

#define GG_ADAPT_MAX_SAMPLES 32

typedef struct gg_adapt {
    uint8_t choice;                 /* gg_adapt_choice */
    bool from_memo;                 /* the choice was remembered, not measured here */
    uint32_t round;                 /* measuring rounds begun before this one */
    uint16_t seen[2];               /* runs timed this round, warm-ups included: [graph, eager] */
    uint16_t n[2];                  /* samples kept this round */
    uint16_t inflight[2];           /* runs of this round picked and not yet ended */
    float samples[2][GG_ADAPT_MAX_SAMPLES];
    double us[2];                   /* medians behind the choice (0: none yet) */
    uint64_t since;                 /* replays since the choice */
    uint32_t decisions;             /* choices made by measuring */
} gg_adapt;

/* The path for the next replay of the entry: GG_ADAPT_RUN_GRAPH or
 * GG_ADAPT_RUN_EAGER.  While measuring, the run is counted as in flight
 * (gg_adapt_end undoes that) and *round says which round it belongs to. */
int gg_adapt_pick(gg_adapt *a, unsigned samples, uint32_t *round);
/* A picked run ended, answered or not. */
void gg_adapt_end(gg_adapt *a, uint32_t round, int run);
/* A replay of the entry ran on path `run` and took us microseconds by the
 * timing source; timed false when its time says nothing about the path (a
 * validated run does the work twice; a run that fell back to eager; a fast
 * path hit, which is not timed by the executor).  Returns true when this
 * made a choice (the caller remembers it: gg_adapt_memo_put). */
bool gg_adapt_record(gg_adapt *a, uint32_t round, int run, bool timed, double us,
                     unsigned samples, unsigned recheck);
/* Start from a remembered choice. */
void gg_adapt_seed(gg_adapt *a, gg_adapt_choice choice, double graph_us, double eager_us);
const char *gg_adapt_choice_name(gg_adapt_choice c);

/* The time a finished run is charged: the measured device time, or the
 * fixed figures of adaptive-timing (for testing). */
double gg_adapt_clock(const gg_config *cfg, int run, double measured_us);

/* Remembered choices, by (uid, program signature): one slot per (branch,
 * bucket) of the program.  Bounded: GG_ADAPT_MEMO_MAX records in all and
 * GG_ADAPT_MEMO_PER_UID per uid, the least recently used going first. */
#define GG_ADAPT_MEMO_MAX 1024
#define GG_ADAPT_MEMO_PER_UID 256

typedef struct gg_adapt_slot {
    uint8_t choice;                 /* GG_ADAPT_MEASURING: nothing remembered */
    float us[2];
} gg_adapt_slot;

typedef struct gg_adapt_memo gg_adapt_memo;

gg_adapt_memo *gg_adapt_memo_new(void);
void gg_adapt_memo_free(gg_adapt_memo *m);
/* A copy of the slots remembered for (uid, sig) (nslots of them), for a
 * program being defined; NULL when none (or out of memory: it measures). */
gg_adapt_slot *gg_adapt_memo_get(gg_adapt_memo *m, uid_t uid, const uint8_t *sig, size_t siglen,
                                 int nslots);
/* Remember slot's choice for (uid, sig); out of memory forgets it. */
void gg_adapt_memo_put(gg_adapt_memo *m, uid_t uid, const uint8_t *sig, size_t siglen,
                       int nslots, int slot, const gg_adapt *a);
unsigned gg_adapt_memo_count(const gg_adapt_memo *m);

#endif
