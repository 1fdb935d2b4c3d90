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
#include "core/exec_run.h"
#include "core/job.h"
#include "core/program.h"
#include "core/session.h"


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

/* Free a graph, scratch memory and a session's stream (and its kernel
 * context) on a worker (any may be NULL): a device free may wait for the
 * whole device, and the loop must not.  Once closed: here, at once. */
void gg_exec_release(gg_exec *x, gg_dev_exec *g, uint8_t *scratch, gg_dev_stream *s);

#endif
