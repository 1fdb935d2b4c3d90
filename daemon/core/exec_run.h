/* SPDX-License-Identifier: MIT */
/* Running a job on the session's stream (exec_run.c): the launch of a
 * cache hit shared by every thread that makes one, a worker's whole run of
 * a job (capture, validation, graph or eager), and the batch word.  A run
 * reports how it ended to its caller, the executor (exec.h), which gives
 * every completion. */
#ifndef GG_EXEC_RUN_H
#define GG_EXEC_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/job.h"

/* Whether this replay of e is a validation sample (GFXGRAPH=validate). */
bool gg_exec_should_validate(const gg_core *core, const gg_cache_entry *e);
/* Run one job on a worker (no lock held): its captures, validation, graph
 * or eager launches on the session's stream.  GG_RUN_ENQUEUED: its work is
 * on the stream and the device calls done(j, status) from any thread once
 * it has finished it (the caller holds that completion back until it has
 * handled the enqueued news: it sets that up before the run);
 * GG_RUN_DONE: nothing is left on the device for it (a prepare, a smoke
 * test, or a failure, j->rc and j->reason set): the caller gives the
 * completion itself.  The run never calls back into the executor. */
enum { GG_RUN_DONE = 0, GG_RUN_ENQUEUED };
int gg_exec_run(gg_core *core, gg_job *j, gg_done_fn done);
/* gg_exec_hit's launch (no lock held): GG_HIT_NOT_RUN when nothing was put
 * on the stream and a worker should run j; GG_HIT_FAILED when the replay
 * fails (j->rc and j->reason say why; the caller gives the completion);
 * GG_HIT_LAUNCHED when the work is on the stream and done(j, status) is
 * coming from the device. */
enum { GG_HIT_NOT_RUN = 0, GG_HIT_LAUNCHED, GG_HIT_FAILED };
int gg_exec_run_hit(gg_core *core, gg_job *j, gg_dev_stream *s, gg_done_fn done);
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
#endif
