/* SPDX-License-Identifier: MIT */
/* A job: one piece of a session's work for the executor (a replay, a
 * prepare, a smoke test), what its run found out, and the answer its
 * submitter gets.  Made and freed by the executor (exec.h), run by
 * exec_run.h. */
#ifndef GG_JOB_H
#define GG_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/cache.h"
#include "core/event.h"
#include "core/list.h"
#include "core/program.h"
#include "core/session.h"

typedef enum { GG_JOB_REPLAY = 0, GG_JOB_PREPARE, GG_JOB_SMOKE } gg_job_kind;

/* What a worker found out about one cache entry. */
typedef struct gg_job_result {
    int rc;
    bool captured;
    bool updated;                   /* rebound by exec update, not re-instantiated */
    bool warmed;                    /* warm-up ran on this session's stream */
    gg_dev_exec *replaced;          /* the stale graph a new one replaces */
    bool failed;
    bool validated;
    bool validation_failed;
    gg_dev_exec *exec;
    size_t footprint;
    uint64_t over_cap;              /* not captured: bytes past vram-cap it would take */
    char reason[160];
} gg_job_result;

/* A replay's answer, as the core sees it; the transport puts it on its own
 * wire.  rc < 0: failed, reason says why.  Else reason, when has_reason,
 * says why the replay ran eager. */
typedef struct gg_replay_outcome {
    int rc;
    bool has_reason;
    char reason[192];
    bool graph;                     /* ran as a graph (else eager) */
    bool fallback;
    bool captured;
    bool async;                     /* answered once enqueued, device_us 0 */
    int bucket;                     /* 0: oversize */
    int batch;
    int branch;
    double device_us;
} gg_replay_outcome;

struct gg_job;

/* Set by whoever submits a job: the executor calls done on the loop thread
 * once per job when its answer is due (an async replay's once its work is
 * on the stream, else when it has ended).  out is filled for every kind; a
 * prepare's answer is in j->entries, a smoke test's in j->results[0] and
 * j->t_start_us/t_done_us.  The job is freed after done returns. */
typedef struct gg_job_ops {
    void (*done)(struct gg_job *j, const gg_replay_outcome *out);
    /* Optional: the job is about to be freed, answered or not (a queued job
     * of a session whose client left is dropped unanswered). */
    void (*ended)(struct gg_job *j, bool answered);
} gg_job_ops;

typedef struct gg_job {
    gg_list link;
    gg_list live_link;              /* the executor's jobs not yet ended */
    gg_job_kind kind;
    gg_session *sess;
    const gg_job_ops *ops;
    uint64_t tag;                   /* the submitter's (rpc: the request's msgid) */
    void *ctx;                      /* the submitter's, for ops->done */
    gg_program *prog;
    int branch;
    int batch;
    int rows;                       /* rows run: the bucket, or batch when oversize */
    uint64_t gen;                   /* the program's binding generation at submit */
    gg_cache_entry **entries;       /* replay: 1 (or 0 when oversize); prepare: many */
    int nentries;
    gg_cache_entry *one;            /* storage for the single replay entry */
    /* results, written by the worker */
    int rc;
    char reason[192];
    bool graph;                     /* ran as a graph */
    bool fallback;
    bool captured;
    bool eager_oversize;
    /* replay-mode adaptive: the path its entry picked (GG_ADAPT_RUN_*),
     * whether the entry was measuring then, and in which round */
    uint8_t adapt_run;
    bool adapt_measuring;
    uint32_t adapt_round;
    gg_job_result *results;         /* one per entry (at least one) */
    gg_job_result one_result;       /* storage for results when there is one */
    uint64_t t_start_us, t_done_us;
    uint64_t t_new_us;              /* made (the request taken): the round trip's start */
    uint8_t *scratch;               /* what its runs use: the program's arena, or tmp_scratch */
    uint8_t *arena_new;             /* the arena's memory, allocated by this job (the worker):
                                     * recorded in the arena when its findings are applied */
    uint8_t *tmp_scratch;           /* eager runs beyond the buckets that the arena cannot hold */
    struct gg_job *done_next;       /* also the executor's free list of jobs */
    struct gg_job *enq_next;
    /* under the executor's lock: notify() is called before the enqueued
     * news is pushed, so a completion that comes first waits for it */
    bool await_enq, enq_pushed, done_deferred;
    bool applied;                   /* results are in the cache */
    /* A job of the session is queued behind this one (set under the core
     * lock, read by the worker running this one without it). */
    atomic_bool next_waiting;
    bool replied;
    bool async;                     /* answer once enqueued, not once done */
    struct gg_event *wait_ev;       /* the stream waits for it before the work */
    struct gg_event *signal_ev;     /* recorded after the work */
    struct gg_exec_lane *lane;      /* its uid's, in the executor (gg_job_new) */
} gg_job;

#endif
