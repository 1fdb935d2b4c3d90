/* SPDX-License-Identifier: MIT */
/* The executor: runs replays off the loop thread.  Each session's jobs run
 * one at a time in order on that session's stream; different sessions run
 * in parallel on the worker threads.  Completion comes back to the loop
 * through a uv_async handle.  A plain cache hit that is cheap to launch may
 * instead be launched by the loop itself (gg_exec_hit): the same job, the
 * same ordering and counting, without a worker round trip. */
#ifndef GG_EXEC_H
#define GG_EXEC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/cache.h"
#include "core/core.h"
#include "core/event.h"
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

typedef struct gg_exec gg_exec;

int gg_exec_new(gg_core *core, gg_exec **out);
void gg_exec_close(gg_exec *x);     /* stop workers, close the async handle */
void gg_exec_free(gg_exec *x);
bool gg_exec_idle(const gg_exec *x);
/* The jobs not yet ended, for a stop that will not wait for them: "replay
 * of program 3 'slow' (batch 64, running) for session 2 (pid 41, client
 * 'app'); ...".  Returns the number of jobs. */
unsigned gg_exec_describe(const gg_exec *x, char *buf, size_t len);
/* Queue a job; the session's next job starts when its current one is done. */
void gg_exec_submit(gg_exec *x, gg_job *job);
/* The session's stream is free again after a launch made outside the
 * executor (the fast path's cache hits): start its next queued job. */
void gg_exec_kick(gg_exec *x, gg_session *s);
/* Whether this replay of e is a validation sample (GFXGRAPH=validate). */
bool gg_exec_should_validate(const gg_core *core, const gg_cache_entry *e);
/* Drop a session's jobs that no worker has taken yet: its client has
 * gone.  One that has started runs to its end, counted to the uid. */
void gg_exec_cancel_session(gg_exec *x, gg_session *s);
/* The client is going: every transport stops taking its requests
 * (gg_core_session_closing), the session is detached from its transport,
 * its queued jobs dropped (gg_exec_cancel_session) and the transport's
 * reference with them. */
void gg_exec_detach_session(gg_exec *x, gg_session *s);
/* Jobs of uid submitted and not yet ended, its departed sessions' too
 * (max-jobs-per-uid).  Core lock. */
unsigned gg_exec_uid_jobs(const gg_exec *x, uid_t uid);
/* Jobs dropped because their session's client had gone. */
uint64_t gg_exec_dropped(const gg_exec *x);
/* A job for session s, answered through ops with tag; NULL when out of
 * memory.  Jobs of at most one entry come from a free list, so a replay
 * allocates nothing once the daemon is warm.  Core lock held (both). */
gg_job *gg_job_new(gg_job_kind kind, gg_session *s, const gg_job_ops *ops, uint64_t tag,
                   gg_program *p, int nentries);
void gg_job_free(gg_job *job);
/* Transport side: pin what the job uses and queue it.  Cannot fail: from
 * here the job is the executor's, and its answer comes through j->ops. */
void gg_exec_queue(gg_core *core, gg_job *j);
/* Loop thread, core lock held: j replays e, a plain cache hit
 * (gg_replay_hit said so just now, under the same lock hold) that
 * gg_exec_hit_cheap allows here.  Pins as gg_exec_queue does, launches
 * the graph on the session's stream from this thread with the core lock
 * released meanwhile (the session counts as running, so its jobs and
 * fast-path hits queue behind it), and answers as the executor would: at
 * once when the device completed it synchronously (the cpu backend), else
 * through the executor's hand-back.  A launch that did not start goes to a
 * worker as an ordinary job.  Cannot fail. */
void gg_exec_hit(gg_core *core, gg_job *j);
/* Whether launching e's ready graph on the loop thread is cheap enough:
 * always where a launch only enqueues (hip); on the cpu backend, where
 * the launch runs the kernels, only while e's measured mean run time is
 * short.  Core lock held. */
bool gg_exec_hit_cheap(const gg_core *core, const gg_cache_entry *e);

/* Executor threads (exec_run.c): run one job.  A job whose work went on
 * the stream ends with gg_exec_job_await(j, true), the device's notify(),
 * then gg_exec_job_enqueued; gg_exec_job_done comes from any thread once the
 * device has finished it (or at once from the worker when the job failed
 * before its work was enqueued). */
void gg_exec_run(gg_core *core, gg_job *j);
/* gg_exec_hit's launch (exec_run.c, no lock held, await already set):
 * GG_HIT_NOT_RUN when nothing was put on the stream and a worker should
 * run j; else j's completion has come or is coming through
 * gg_exec_job_done: GG_HIT_FAILED when the launch failed (j->rc says why),
 * GG_HIT_LAUNCHED when the work is on the stream. */
enum { GG_HIT_NOT_RUN = 0, GG_HIT_LAUNCHED, GG_HIT_FAILED };
int gg_exec_run_hit(gg_core *core, gg_job *j, gg_dev_stream *s);
/* Before a launch at `rows` with scratch at base (graph or eager): enqueue on
 * s the store of the request's real batch into the program's batch word, so
 * that padding rows have no side effects (nothing when the program has no
 * node that reads it).  0 or the device's error. */
int gg_exec_write_batch(gg_core *core, gg_dev_stream *s, const gg_program *p, int rows,
                        uint8_t *scratch, int batch);
/* A ready graph's launch: its real batch, then the graph.  0, or the
 * device's error (-ENODEV, -EFAULT: the graph may have run in part). */
int gg_exec_launch_graph(gg_core *core, gg_dev_stream *s, const gg_program *p, int rows,
                         uint8_t *scratch, int batch, gg_dev_exec *graph);
/* What a launch that failed with rc says to the client: the device's
 * message, or an injected fault's. */
const char *gg_exec_launch_error(gg_core *core, int rc);

/* A cache hit: a ready graph launched as it is, on the session's stream. */
typedef struct gg_hit {
    const gg_program *prog;
    int rows;                       /* its bucket */
    uint8_t *scratch;               /* the program's arena */
    int batch;
    gg_dev_exec *graph;
    gg_event *wait_ev, *signal_ev;  /* the client's; NULL: none */
} gg_hit;

/* The launch of every cache hit, whichever thread makes it (the loop's
 * gg_exec_hit, a fast-path ring thread): the client's event waited for, the
 * graph (gg_exec_launch_graph), the client's event recorded; *t_start_us
 * when the batch and the graph were queued.  GG_HIT_LAUNCHED;
 * GG_HIT_NOT_RUN when nothing of the graph is on the stream (the caller may
 * run it another way: the executor, with its eager fallback); GG_HIT_FAILED
 * when the graph may have run in part (a lost device, a fault in a client's
 * memory) or ran without its event recorded: the replay fails with *rc,
 * why says it. */
int gg_exec_launch_hit(gg_core *core, gg_dev_stream *s, const gg_hit *h, uint64_t *t_start_us,
                       int *rc, char *why, size_t whylen);
/* Worker: j's work is on the stream (takes the core lock). */
void gg_exec_job_enqueued(gg_job *j);
void gg_exec_job_await(gg_job *j, bool want);
/* Free a graph, scratch memory and a session's stream (and its kernel
 * context) on a worker (any may be NULL): a device free may wait for the
 * whole device, and the loop must not.  Once closed: here, at once. */
void gg_exec_release(gg_exec *x, gg_dev_exec *g, uint8_t *scratch, gg_dev_stream *s);
void gg_exec_job_done(void *job, int status);

#endif
