/* SPDX-License-Identifier: MIT */
/* Replay targets: the checks a socket replay and a fast-path descriptor
 * share, so both refuse the same requests with the same messages. */
#include "core/replay.h"

#include <errno.h>

#include "core/quota.h"

int gg_replay_target_check(gg_replay_target *t, uint64_t branch, proto_errbuf *err)
{
    gg_program *p = t->prog;
    if ((int64_t)branch >= p->nbranches)
        return proto_fail(err, -EINVAL, "branch %llu does not exist: program %llu has %d",
                          (unsigned long long)branch, (unsigned long long)p->id, p->nbranches);
    t->branch = (int)branch;
    t->bi = gg_program_bucket_index(p, t->batch);
    if (t->bi < 0 && t->batch > p->max_batch)
        return proto_fail(err, -ERANGE, "batch %d is past what the program's buffers hold "
                          "(%d rows)", t->batch, p->max_batch);
    int rc;
    if (t->bi < 0 && (rc = gg_program_check_rows(p, t->branch, t->batch, err)) < 0)
        return rc;
    t->rows = t->bi < 0 ? t->batch : p->buckets[t->bi];
    return 0;
}

gg_job *gg_replay_job(gg_core *core, gg_session *s, const gg_replay_target *t,
                      const gg_job_ops *ops, uint64_t tag, void *ctx, int *rc,
                      proto_errbuf *err)
{
    if ((*rc = gg_quota_jobs(core, s->uid, gg_exec_uid_jobs(core->exec, s->uid), err)) < 0)
        return NULL;
    gg_job *j = gg_job_new(GG_JOB_REPLAY, s, ops, tag, t->prog, t->bi < 0 ? 0 : 1);
    if (!j) {
        *rc = proto_fail(err, -ENOMEM, "out of memory");
        return NULL;
    }
    j->ctx = ctx;
    j->async = t->async;
    j->wait_ev = t->wait_ev;     /* counted as users once queued (gg_exec_queue) */
    j->signal_ev = t->signal_ev;
    j->batch = t->batch;
    j->branch = t->branch;
    j->rows = t->rows;
    if (t->bi >= 0) {
        if ((*rc = gg_cache_get(core->cache, t->prog, t->branch, t->bi, &j->entries[0])) < 0) {
            gg_job_free(j);
            *rc = proto_fail(err, *rc, "out of memory");
            return NULL;
        }
        j->nentries = 1;
        gg_cache_entry *e = j->entries[0];
        const gg_config *cfg = core->cfg;
        if (cfg->replay_mode == GG_REPLAY_ADAPTIVE && cfg->graphs_enabled &&
            e->state != GG_ENTRY_FAILED) {
            j->adapt_measuring = e->adapt.choice == GG_ADAPT_MEASURING;
            j->adapt_run = (uint8_t)gg_adapt_pick(&e->adapt, cfg->adaptive_samples,
                                                  &j->adapt_round);
        }
    }
    return j;
}

gg_cache_entry *gg_replay_hit(gg_core *core, gg_session *s, const gg_replay_target *t)
{
    const gg_config *cfg = core->cfg;
    if (t->bi < 0 || !cfg->graphs_enabled || (cfg->fault & (GG_FAULT_LAUNCH | GG_FAULT_DEVICE)))
        return NULL;
    if (gg_session_stream_held(s) || !gg_list_empty(&s->jobs) || !s->stream)
        return NULL;
    gg_cache_entry *e = t->prog->entries[t->branch * t->prog->nbuckets + t->bi];
    if (!e || e->state != GG_ENTRY_READY || !e->exec || e->gen != t->prog->gen)
        return NULL;
    if (cfg->replay_mode == GG_REPLAY_ADAPTIVE && e->adapt.choice != GG_ADAPT_GRAPH)
        return NULL;
    if (gg_exec_should_validate(core, e))
        return NULL;
    return e;
}
