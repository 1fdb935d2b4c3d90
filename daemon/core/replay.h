/* SPDX-License-Identifier: MIT */
/* One replay's target, checked once for every transport: the program's
 * branch and bucket for a batch, its events, and whether it can run as a
 * plain cache hit without the executor. */
#ifndef GG_REPLAY_H
#define GG_REPLAY_H

#include <stdbool.h>

#include "core/cache.h"
#include "core/core.h"
#include "core/event.h"
#include "core/exec.h"
#include "core/program.h"

typedef struct gg_replay_target {
    gg_program *prog;
    int batch;                      /* 1 .. GG_MAX_BATCH, checked by the transport */
    int branch;
    int bi;                         /* bucket index; -1 above the largest bucket */
    int rows;                       /* rows run: the bucket, or batch when oversize */
    gg_event *wait_ev, *signal_ev;  /* NULL: none */
    bool async;
} gg_replay_target;

/* prog, batch and branch set: check the branch exists and the batch fits
 * (a bucket, or the buffers and shape rules when above the largest), and
 * fill bi and rows.  0, or -EINVAL / -ERANGE with a message. */
int gg_replay_target_check(gg_replay_target *t, uint64_t branch, proto_errbuf *err);

/* The job that runs t through the executor, answered through ops with tag
 * and ctx; NULL with *rc and err set (-ENOMEM, or -EDQUOT past
 * max-jobs-per-uid).  Queue it with
 * gg_exec_queue.  Under replay-mode adaptive it carries its entry's pick of
 * graph or eager (core/adapt.h). */
gg_job *gg_replay_job(gg_core *core, gg_session *s, const gg_replay_target *t,
                      const gg_job_ops *ops, uint64_t tag, void *ctx, int *rc,
                      proto_errbuf *err);

/* The entry to launch when t can run as a plain graph launch on the
 * session's stream right now, without the executor: its graph is ready and
 * current, no validation sample or injected fault is due, the session has
 * a stream and no job queued or running, and (replay-mode adaptive) the
 * entry has chosen the graph.  NULL otherwise (the executor then captures,
 * falls back, validates, measures...).  Core lock held. */
gg_cache_entry *gg_replay_hit(gg_core *core, gg_session *s, const gg_replay_target *t);

#endif
