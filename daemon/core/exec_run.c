/* SPDX-License-Identifier: MIT */
/* What an executor thread does with one job (exec_run.h): capture (with
 * warm-up and fault injection), launch the graph or the eager nodes,
 * validate against eager in GFXGRAPH=validate mode, then hand the device
 * the completion its caller gave.  Also the launch of a plain cache hit,
 * shared by the loop and the fast path's threads.  Nothing here writes
 * shared state or calls back into the executor: findings go into the job
 * (gg_job_result) and exec.c applies them under the core lock. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exec_run.h"

#include "base/clock.h"
#include "base/log.h"
#include "core/arena.h"
#include "core/core.h"
#include "core/fuse.h"

static int exec_fault(const gg_core *core, unsigned step, gg_job_result *r, const char *name)
{
    if (!(core->cfg->fault & step))
        return 0;
    snprintf(r->reason, sizeof(r->reason), "%s failed: injected by GFXGRAPH_FAULT", name);
    return -EIO;
}

int gg_exec_write_batch(gg_core *core, gg_dev_stream *s, const gg_program *p, int rows,
                        uint8_t *scratch, int batch)
{
    int32_t *w = gg_program_batch_word(p, rows, scratch);
    if (!w)
        return 0;
    return core->dev->ops->stream_write_u32(core->dev, s, w, (uint32_t)batch);
}

#define EXEC_MEMORY_FAULT "a fault in the client's memory (injected by GFXGRAPH_FAULT=memory)"

int gg_exec_launch_graph(gg_core *core, gg_dev_stream *s, const gg_program *p, int rows,
                         uint8_t *scratch, int batch, gg_dev_exec *graph)
{
    int rc = gg_exec_write_batch(core, s, p, rows, scratch, batch);
    if (rc == 0)
        rc = core->dev->ops->graph_launch(core->dev, graph, s);
    /* as a kernel touching a bad address would: after the graph ran */
    if (rc == 0 && (core->cfg->fault & GG_FAULT_MEMORY))
        rc = -EFAULT;
    return rc;
}

const char *gg_exec_launch_error(gg_core *core, int rc)
{
    if (rc == -EFAULT && (core->cfg->fault & GG_FAULT_MEMORY))
        return EXEC_MEMORY_FAULT;
    return core->dev->ops->last_error(core->dev);
}

int gg_exec_launch_hit(gg_core *core, gg_dev_stream *s, const gg_hit *h, uint64_t *t_start_us,
                       int *rc, char *why, size_t whylen)
{
    gg_device *dev = core->dev;
    /* a stream wait done twice (here, then by the executor) waits for
     * nothing more */
    if (h->wait_ev && (*rc = dev->ops->stream_wait_event(dev, s, h->wait_ev->dev)) < 0) {
        snprintf(why, whylen, "cannot wait for event %llu: %s",
                 (unsigned long long)h->wait_ev->id, dev->ops->last_error(dev));
        return GG_HIT_NOT_RUN;
    }
    *t_start_us = gg_now_us();
    *rc = gg_exec_launch_graph(core, s, h->prog, h->rows, h->scratch, h->batch, h->graph);
    if (*rc == -ENODEV || *rc == -EFAULT) {
        /* as gg_exec_run: the graph may have run in part, so it is not run
         * again; a lost device ends the daemon */
        snprintf(why, whylen, "%s", gg_exec_launch_error(core, *rc));
        return GG_HIT_FAILED;
    }
    if (*rc < 0) {
        snprintf(why, whylen, "launch failed: %s", dev->ops->last_error(dev));
        return GG_HIT_NOT_RUN;
    }
    if (h->signal_ev && (*rc = dev->ops->event_record(dev, h->signal_ev->dev, s)) < 0) {
        snprintf(why, whylen, "cannot record event %llu: %s",
                 (unsigned long long)h->signal_ev->id, dev->ops->last_error(dev));
        return GG_HIT_FAILED;
    }
    return GG_HIT_LAUNCHED;
}

/* The client's nodes one by one: what validation compares the graph with,
 * and what a fallback runs, so that neither depends on the fusion it is
 * there to check or to get round. */
static int exec_launch_unfused(gg_core *core, gg_dev_stream *s, const gg_program *p,
                               const gg_branch *br, int rows, uint8_t *scratch, char *why,
                               size_t whylen)
{
    gg_device *dev = core->dev;
    for (int i = 0; i < br->nnodes; i++) {
        const gg_pnode *n = &br->nodes[i];
        gg_tensor in[GG_MAX_OPERANDS], out[GG_MAX_OPERANDS];
        int nin = gg_program_bind(p, n, rows, scratch, in, out);
        int rc = dev->ops->op_launch(dev, s, n->op, in, nin, out, n->nout, &n->attrs);
        if (rc < 0) {
            snprintf(why, whylen, "node %d of %d (%s): %s", i, br->nnodes, n->op->name,
                     dev->ops->last_error(dev));
            return rc;
        }
    }
    return 0;
}

static int exec_launch_nodes(gg_core *core, gg_dev_stream *s, const gg_program *p,
                             const gg_branch *br, int rows, uint8_t *scratch, char *why,
                             size_t whylen)
{
    gg_device *dev = core->dev;
    /* the launch plan (core/fuse.h): the nodes, some fused */
    for (int i = 0; i < br->nplan; i++) {
        const gg_pnode *n = &br->plan[i];
        int rc;
        if (n->op == gg_ops_rowchain()) {
            /* its stages do not fit an op's operands: their own launch */
            gg_rowchain ch;
            rc = gg_fuse_bind_chain(p, br, n, rows, scratch, &ch);
            if (rc == 0)
                rc = dev->ops->rowchain_launch(dev, s, &ch);
        } else {
            gg_tensor in[GG_MAX_OPERANDS], out[GG_MAX_OPERANDS];
            int nin = gg_program_bind(p, n, rows, scratch, in, out);
            rc = dev->ops->op_launch(dev, s, n->op, in, nin, out, n->nout, &n->attrs);
        }
        if (rc < 0) {
            snprintf(why, whylen, "launch %d of %d (%s): %s", i, br->nplan, n->op->name,
                     dev->ops->last_error(dev));
            return rc;
        }
    }
    return 0;
}

/* Before an entry's first capture on a session's stream (its first ever, or
 * the first after a restarted client adopted it, with a new stream and BLAS
 * handle): run each op that asks for it once on the stream, with its outputs
 * in throw-away memory so the client's buffers are untouched (an in-place or
 * re-read tensor stays as it was). */
static int exec_warmup(gg_core *core, gg_job *j, gg_cache_entry *e, gg_dev_stream *s,
                       uint8_t *scratch)
{
    gg_device *dev = core->dev;
    const gg_branch *br = &j->prog->branches[e->branch];
    int rc = 0;
    for (int i = 0; i < br->nplan && rc == 0; i++) {
        const gg_pnode *n = &br->plan[i];
        if (n->op == gg_ops_rowchain() || !dev->ops->op_needs_warmup(dev, n->op))
            continue;
        gg_tensor in[GG_MAX_OPERANDS], out[GG_MAX_OPERANDS];
        void *tmp[GG_MAX_OPERANDS] = {NULL};
        int nin = gg_program_bind(j->prog, n, e->bucket, scratch, in, out);
        for (int o = 0; o < n->nout && rc == 0; o++)
            if ((rc = dev->ops->scratch_alloc(dev, gg_desc_bytes(&out[o].desc), &tmp[o])) == 0)
                out[o].data = tmp[o];
        if (rc == 0)
            rc = dev->ops->op_launch(dev, s, n->op, in, nin, out, n->nout, &n->attrs);
        if (rc == 0)
            rc = dev->ops->stream_sync(dev, s);
        for (int o = 0; o < n->nout; o++)
            if (tmp[o])
                dev->ops->scratch_free(dev, tmp[o]);
    }
    return rc;
}

/* A graph's own device memory before it exists: the hip backend's count,
 * a kilobyte a node (device_hip.c, hip_exec_footprint). */
#define EXEC_GRAPH_NODE_BYTES 1024

/* vram-cap, held against the device's memory as its runtime counts it now
 * (every process's allocations, this daemon's graphs and scratch
 * included): need more bytes must keep what is in use within vram-cap of
 * the total.  Else -ENOSPC with r->over_cap (the loop evicts cached graphs
 * for it, exec.c).  A device that cannot say lets it through. */
static int exec_vram_check(gg_core *core, size_t need, gg_job_result *r)
{
    gg_device *dev = core->dev;
    uint64_t free_b, total_b;
    if (!need || !dev->ops->mem_info || dev->ops->mem_info(dev, &free_b, &total_b) < 0 ||
        total_b == 0)
        return 0;
    uint64_t used = total_b - (free_b < total_b ? free_b : total_b);
    uint64_t limit = (uint64_t)(core->cfg->vram_cap * (double)total_b);
    if (used + need <= limit)
        return 0;
    r->over_cap = used + need - limit;
    snprintf(r->reason, sizeof(r->reason), "VRAM cap: %.1f MiB of %.1f MiB of device memory in "
             "use and this graph needs %.1f KiB more: past vram-cap %.2f (%.1f MiB)",
             (double)used / 1048576, (double)total_b / 1048576, (double)need / 1024,
             core->cfg->vram_cap, (double)limit / 1048576);
    return -ENOSPC;
}

/* Capture and instantiate e's graph into r.  On failure r->reason says
 * which step failed and nothing has run on the device. */
static int exec_capture(gg_core *core, gg_job *j, gg_cache_entry *e, gg_dev_stream *s,
                        gg_job_result *r)
{
    gg_device *dev = core->dev;
    const gg_program *p = j->prog;
    const gg_branch *br = &p->branches[e->branch];
    int rc;
    char why[160] = "";

    /* what this capture adds to the device's memory (the program's arena,
     * allocated by now, is in use already): a graph, unless the one held is
     * updated in place */
    bool update = e->state == GG_ENTRY_READY && e->exec &&
                  e->updates < core->cfg->exec_update_limit;
    if (!update && (rc = exec_vram_check(core, (size_t)br->nnodes * EXEC_GRAPH_NODE_BYTES,
                                         r)) < 0)
        return rc;
    if ((rc = exec_fault(core, GG_FAULT_CAPTURE, r, "capture")) < 0)
        return rc;
    if (e->warm_sess != j->sess->id) {
        if ((rc = exec_warmup(core, j, e, s, j->scratch)) < 0) {
            snprintf(r->reason, sizeof(r->reason), "warm-up before capture failed: %s",
                     dev->ops->last_error(dev));
            return rc;
        }
        r->warmed = true;
    }
    if ((rc = dev->ops->capture_begin(dev, s)) < 0) {
        snprintf(r->reason, sizeof(r->reason), "capture failed: %s", dev->ops->last_error(dev));
        return rc;
    }
    rc = exec_launch_nodes(core, s, p, br, e->bucket, j->scratch, why, sizeof(why));
    gg_dev_graph *g = NULL;
    int rc2 = dev->ops->capture_end(dev, s, &g);
    if (rc < 0 || rc2 < 0) {
        if (g)
            dev->ops->graph_destroy(dev, g);
        snprintf(r->reason, sizeof(r->reason), "capture failed: %.140s",
                 rc < 0 ? why : dev->ops->last_error(dev));
        return rc < 0 ? rc : rc2;
    }
    /* A rebound program: update the graph we have in place of building a
     * new one, up to exec-update-limit times (ROCm leaks an argument slot
     * per update, so the count is bounded and then we start afresh). */
    if (e->state == GG_ENTRY_READY && e->exec &&
        e->updates < core->cfg->exec_update_limit &&
        dev->ops->exec_update(dev, e->exec, g) == 0) {
        dev->ops->graph_destroy(dev, g);
        r->exec = e->exec;
        r->updated = true;
        r->captured = true;
        r->footprint = e->footprint;
        return 0;
    }
    if ((rc = exec_fault(core, GG_FAULT_INSTANTIATE, r, "instantiate")) < 0) {
        dev->ops->graph_destroy(dev, g);
        return rc;
    }
    gg_dev_exec *nx = NULL;
    rc = dev->ops->instantiate(dev, g, &nx);
    dev->ops->graph_destroy(dev, g);
    if (rc < 0) {
        snprintf(r->reason, sizeof(r->reason), "instantiate failed: %s", dev->ops->last_error(dev));
        return rc;
    }
    if (e->state == GG_ENTRY_READY && e->exec)
        r->replaced = e->exec;
    r->exec = nx;
    r->captured = true;
    r->footprint = dev->ops->exec_footprint(dev, r->exec);   /* the scratch is the arena's */
    return 0;
}

/* Buffer tensors touched by a branch, for validation snapshots. */
static int exec_branch_tensors(const gg_program *p, const gg_branch *br, int *list, bool outputs_only)
{
    int n = 0;
    for (int i = 0; i < br->nnodes; i++) {
        const gg_pnode *nd = &br->nodes[i];
        for (int k = 0; k < nd->nin + nd->nout; k++) {
            bool is_out = k >= nd->nin;
            int t = is_out ? nd->out[k - nd->nin] : nd->in[k];
            if (!p->tensors[t].buf || (outputs_only && !is_out))
                continue;
            bool seen = false;
            for (int m = 0; m < n; m++)
                seen |= list[m] == t;
            if (!seen)
                list[n++] = t;
        }
    }
    return n;
}

static size_t exec_tensor_bytes(const gg_program *p, int t, int rows, uint8_t **ptr)
{
    const gg_ptensor *pt = &p->tensors[t];
    gg_tensor_desc d = pt->desc;
    if (pt->batch_dim >= 0)
        d.dims[pt->batch_dim] = rows;
    *ptr = pt->buf->ptr + pt->offset;
    return gg_desc_bytes(&d);
}

/* Graph against eager over n values: equal values agree (+-inf included),
 * as do NaNs in the same places; the finite rest is measured by relative
 * L2 error.  A non-finite value facing anything else is a mismatch (its
 * index in *at, the two values in got/want): returns INFINITY then. */
static double exec_compare(const uint8_t *graph, const uint8_t *eager, gg_dtype dt, int64_t n,
                           int64_t *at, float *got, float *want)
{
    double num = 0, den = 0;
    for (int64_t k = 0; k < n; k++) {
        float a = gg_load(graph, dt, k), b = gg_load(eager, dt, k);
        if (a == b || (isnan(a) && isnan(b))) {
            if (isfinite(b))
                den += (double)b * b;
            continue;
        }
        if (!isfinite(a) || !isfinite(b)) {
            *at = k;
            *got = a;
            *want = b;
            return INFINITY;
        }
        num += ((double)a - b) * ((double)a - b);
        den += (double)b * b;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* GFXGRAPH=validate: run the graph and the eager launches from the same
 * inputs and compare every output.  The eager result is the one left in
 * the client's buffers.  Returns 0 when they agree. */
static int exec_validate(gg_core *core, gg_job *j, gg_cache_entry *e, gg_dev_stream *s,
                         gg_job_result *r)
{
    gg_device *dev = core->dev;
    const gg_program *p = j->prog;
    const gg_branch *br = &p->branches[e->branch];
    int *all = malloc(sizeof(int) * (size_t)p->ntensors * 2);
    if (!all)
        return -ENOMEM;
    int *outs = all + p->ntensors;
    int na = exec_branch_tensors(p, br, all, false);
    int no = exec_branch_tensors(p, br, outs, true);
    size_t snap_bytes = 0, out_bytes = 0;
    uint8_t *ptr;
    for (int i = 0; i < na; i++)
        snap_bytes += exec_tensor_bytes(p, all[i], j->rows, &ptr);
    for (int i = 0; i < no; i++)
        out_bytes += exec_tensor_bytes(p, outs[i], j->rows, &ptr);
    uint8_t *snap = malloc(snap_bytes + 1), *graph_out = malloc(out_bytes + 1),
            *eager_out = malloc(out_bytes + 1);
    int rc = (!snap || !graph_out || !eager_out) ? -ENOMEM : 0;
    char why[160];
    size_t off = 0;
    /* The copies below are not ordered with the session's non-blocking
     * stream: drain it first (a client event the stream waits on, an
     * earlier async replay), so the snapshot holds the inputs this replay
     * is meant to read. */
    if (rc == 0)
        rc = dev->ops->stream_sync(dev, s);
    for (int i = 0; i < na && rc == 0; i++) {
        size_t b = exec_tensor_bytes(p, all[i], j->rows, &ptr);
        rc = dev->ops->memcpy_d2h(dev, snap + off, ptr, b);
        off += b;
    }
    if (rc == 0)
        rc = gg_exec_launch_graph(core, s, p, j->rows, j->scratch, j->batch, r->exec);
    if (rc == 0)
        rc = dev->ops->stream_sync(dev, s);
    off = 0;
    for (int i = 0; i < no && rc == 0; i++) {
        size_t b = exec_tensor_bytes(p, outs[i], j->rows, &ptr);
        rc = dev->ops->memcpy_d2h(dev, graph_out + off, ptr, b);
        off += b;
    }
    /* GFXGRAPH_FAULT=validate: the graph's first output value is made one
     * no tolerance takes: NaN against the eager run's number (a flipped top
     * bit could land within tolerance of a large output) */
    if (rc == 0 && no && (core->cfg->fault & GG_FAULT_VALIDATE)) {
        gg_dtype dt = p->tensors[outs[0]].desc.dtype;
        if (gg_dtype_is_float(dt))
            gg_store(graph_out, dt, 0, NAN);
        else
            graph_out[0] ^= 0xff;
    }
    off = 0;
    for (int i = 0; i < na && rc == 0; i++) {
        size_t b = exec_tensor_bytes(p, all[i], j->rows, &ptr);
        rc = dev->ops->memcpy_h2d(dev, ptr, snap + off, b);
        off += b;
    }
    /* the same arena as the graph's run, which has ended (synchronised):
     * the eager run writes each scratch tensor before reading it */
    if (rc == 0)
        rc = exec_launch_unfused(core, s, p, br, j->rows, j->scratch, why, sizeof(why));
    if (rc == 0)
        rc = dev->ops->stream_sync(dev, s);
    off = 0;
    for (int i = 0; i < no && rc == 0; i++) {
        size_t b = exec_tensor_bytes(p, outs[i], j->rows, &ptr);
        rc = dev->ops->memcpy_d2h(dev, eager_out + off, ptr, b);
        off += b;
    }
    /* Compare over the real rows only: padding rows are free to differ. */
    double worst = 0.0;
    int64_t bad_at = -1;
    int bad_out = -1;
    float bad_got = 0, bad_want = 0;
    off = 0;
    for (int i = 0; i < no && rc == 0; i++) {
        const gg_ptensor *pt = &p->tensors[outs[i]];
        size_t b = exec_tensor_bytes(p, outs[i], j->rows, &ptr);
        gg_tensor_desc d = pt->desc;
        if (pt->batch_dim >= 0)
            d.dims[pt->batch_dim] = j->rows;
        int64_t n = gg_desc_numel(&d), real = n;
        if (pt->batch_dim == 0)
            real = n / j->rows * j->batch;
        int64_t at = -1;
        float got = 0, want = 0;
        double rel = exec_compare(graph_out + off, eager_out + off, d.dtype, real, &at, &got,
                                  &want);
        if (at >= 0 && bad_out < 0) {
            bad_out = outs[i];
            bad_at = at;
            bad_got = got;
            bad_want = want;
        }
        if (!(rel <= worst))
            worst = rel;
        off += b;
    }
    free(all);
    free(snap);
    free(graph_out);
    free(eager_out);
    if (rc < 0)
        return rc;
    r->validated = true;
    if (bad_out >= 0) {
        r->validation_failed = true;
        snprintf(r->reason, sizeof(r->reason),
                 "validation failed: graph output differs from eager ('%.40s'[%lld]: graph %g, "
                 "eager %g)", p->tensors[bad_out].name, (long long)bad_at, (double)bad_got,
                 (double)bad_want);
    } else if (!(worst <= 1e-3)) {
        r->validation_failed = true;
        snprintf(r->reason, sizeof(r->reason),
                 "validation failed: graph output differs from eager (rel err %.3g)", worst);
    }
    return 0;
}

/* j's work is on stream s: record its event (unless the hit's launch has)
 * and ask the device to call done(j, status) when it is done.  0, or a
 * negative errno with j->rc and j->reason set: no completion is coming,
 * the caller gives it. */
static int exec_submitted(gg_core *core, gg_job *j, gg_dev_stream *s, bool inline_hit,
                          gg_done_fn done)
{
    gg_device *dev = core->dev;
    int rc;
    if (!inline_hit && j->signal_ev &&
        (rc = dev->ops->event_record(dev, j->signal_ev->dev, s)) < 0) {
        j->rc = rc;
        snprintf(j->reason, sizeof(j->reason), "cannot record event %llu: %s",
                 (unsigned long long)j->signal_ev->id, dev->ops->last_error(dev));
        return rc;
    }
    if ((rc = dev->ops->notify(dev, s, done, j)) < 0) {
        j->rc = rc;
        snprintf(j->reason, sizeof(j->reason), "cannot wait for completion: %s",
                 dev->ops->last_error(dev));
        return rc;
    }
    return 0;
}

bool gg_exec_should_validate(const gg_core *core, const gg_cache_entry *e)
{
    const gg_config *c = core->cfg;
    if (!c->validate)
        return false;
    if (c->replay_mode == GG_REPLAY_HOT)
        return e->replays == 0;
    if (e->replays < c->trusted_replay_threshold)
        return true;
    return (e->replays - c->trusted_replay_threshold) % c->trusted_replay_sample_interval == 0;
}


/* Where j's runs keep their scratch tensors (j->scratch).  A bucketed run
 * (and a prepare) uses the program's arena, allocated here by the first job
 * that needs it: the session's jobs run one at a time, and an earlier job's
 * allocation was recorded in the arena (under the core lock) before this
 * one started, so a->base is read here without the lock.  A run above the
 * largest bucket uses the arena when it has room for it, else memory of its
 * own for the job's lifetime. */
static int exec_scratch(gg_core *core, gg_job *j, char *why, size_t whylen)
{
    gg_device *dev = core->dev;
    gg_arena *a = j->prog ? j->prog->arena : NULL;
    int rc;
    if (!a)
        return 0;
    if (j->kind == GG_JOB_REPLAY && !j->nentries) {
        size_t need = gg_program_scratch_bytes(j->prog, j->rows);
        if (!need)
            return 0;
        if (a->base && need <= a->bytes) {
            j->scratch = a->base;
            return 0;
        }
        if ((rc = dev->ops->scratch_alloc(dev, need, (void **)&j->tmp_scratch)) < 0) {
            snprintf(why, whylen, "scratch allocation of %zu bytes (batch %d) failed: %s", need,
                     j->rows, dev->ops->last_error(dev));
            return rc;
        }
        j->scratch = j->tmp_scratch;
        return 0;
    }
    if (!a->bytes)
        return 0;
    if (!a->base) {
        if ((rc = dev->ops->scratch_alloc(dev, a->bytes, (void **)&j->arena_new)) < 0) {
            snprintf(why, whylen, "scratch allocation of %zu bytes (the program's arena, "
                     "sized for bucket %d) failed: %s", a->bytes, a->rows,
                     dev->ops->last_error(dev));
            return rc;
        }
        j->scratch = j->arena_new;
        return 0;
    }
    j->scratch = a->base;
    return 0;
}

int gg_exec_run(gg_core *core, gg_job *j, gg_done_fn done)
{
    gg_device *dev = core->dev;
    gg_dev_stream *s = NULL;
    gg_job_result *res = j->results;
    char why[160] = "";
    int rc = 0;
    j->t_start_us = gg_now_us();

    if (j->kind == GG_JOB_SMOKE) {
        res[0].rc = gg_device_smoke_test(dev, res[0].reason, sizeof(res[0].reason));
        return GG_RUN_DONE;
    }
    if (j->kind == GG_JOB_REPLAY && (core->cfg->fault & GG_FAULT_DEVICE)) {
        j->rc = -ENODEV;
        snprintf(j->reason, sizeof(j->reason), "device lost (injected by GFXGRAPH_FAULT=device)");
        return GG_RUN_DONE;
    }
    /* The session's jobs run one at a time, so this is never raced. */
    if ((rc = gg_session_stream(j->sess, &s)) < 0) {
        j->rc = rc;
        snprintf(j->reason, sizeof(j->reason), "cannot create a device stream: %s",
                 dev->ops->last_error(dev));
        return GG_RUN_DONE;
    }
    rc = exec_scratch(core, j, why, sizeof(why));
    if (j->kind == GG_JOB_PREPARE) {
        for (int i = 0; i < j->nentries; i++) {
            gg_cache_entry *e = j->entries[i];
            gg_job_result *r = &res[i];
            if (e->state == GG_ENTRY_READY && e->gen == j->gen)
                continue;
            if (rc < 0) {
                r->rc = rc;
                snprintf(r->reason, sizeof(r->reason), "%s", why);
            } else {
                r->rc = exec_capture(core, j, e, s, r);
            }
            if (r->rc < 0)
                r->failed = true;
        }
        return GG_RUN_DONE;
    }

    const gg_branch *br = &j->prog->branches[j->branch];
    gg_cache_entry *e = j->nentries ? j->entries[0] : NULL;
    gg_job_result *r = &res[0];
    if (rc < 0) {
        j->rc = rc;
        snprintf(j->reason, sizeof(j->reason), "%s", why);
        return GG_RUN_DONE;
    }
    /* The client's event orders its writes of the inputs before our reads,
     * on the device, with no host round trip. */
    if (j->wait_ev && (rc = dev->ops->stream_wait_event(dev, s, j->wait_ev->dev)) < 0) {
        j->rc = rc;
        snprintf(j->reason, sizeof(j->reason), "cannot wait for event %llu: %s",
                 (unsigned long long)j->wait_ev->id, dev->ops->last_error(dev));
        return GG_RUN_DONE;
    }
    /* replay-mode adaptive: eager when the entry picked it (measuring, or
     * eager measured faster); nothing is captured for that */
    bool try_graph = e && core->cfg->graphs_enabled && e->state != GG_ENTRY_FAILED &&
                     j->adapt_run != GG_ADAPT_RUN_EAGER;
    if (e)
        r->exec = e->exec;
    bool stale = e && e->state == GG_ENTRY_READY && e->gen != j->gen;
    if (try_graph && (e->state == GG_ENTRY_EMPTY || stale) && exec_capture(core, j, e, s, r) < 0)
        r->failed = true;
    if (try_graph && !r->failed) {
        if (gg_exec_should_validate(core, e)) {
            rc = exec_validate(core, j, e, s, r);
            /* as a plain launch's: the graph may have run in part, and the
             * inputs it read are not restored for an eager run */
            if (rc == -ENODEV || rc == -EFAULT) {
                j->rc = rc;
                snprintf(j->reason, sizeof(j->reason), "%s", gg_exec_launch_error(core, rc));
                return GG_RUN_DONE;
            }
            if (rc == 0 && r->validation_failed) {
                r->failed = true;
                j->fallback = true;   /* the eager result is the one kept */
            }
            j->graph = rc == 0 && !r->validation_failed;
            if (rc == 0)
                goto submitted;
            r->failed = true;
            snprintf(r->reason, sizeof(r->reason), "validation could not run: %s",
                     dev->ops->last_error(dev));
        } else if (exec_fault(core, GG_FAULT_LAUNCH, r, "launch") < 0) {
            r->failed = true;
        } else {
            j->t_start_us = gg_now_us();   /* device time excludes the capture */
            rc = gg_exec_launch_graph(core, s, j->prog, j->rows, j->scratch, j->batch, r->exec);
            /* A lost device ends the daemon; a fault in a client's own
             * memory fails this request only: the graph itself is sound. */
            if (rc == -ENODEV || rc == -EFAULT) {
                j->rc = rc;
                snprintf(j->reason, sizeof(j->reason), "%s", gg_exec_launch_error(core, rc));
                return GG_RUN_DONE;
            }
            if (rc < 0) {
                r->failed = true;
                snprintf(r->reason, sizeof(r->reason), "launch failed: %s",
                         dev->ops->last_error(dev));
            }
            j->graph = rc == 0;
        }
    }
    if (!j->graph) {
        /* eager: the plan's launches; a fallback, the client's nodes */
        rc = 0;
        j->fallback = e && (r->failed || e->state == GG_ENTRY_FAILED) && core->cfg->graphs_enabled;
        j->t_start_us = gg_now_us();   /* device time excludes capture and allocation */
        rc = gg_exec_write_batch(core, s, j->prog, j->rows, j->scratch, j->batch);
        if (rc == 0 && j->fallback)
            rc = exec_launch_unfused(core, s, j->prog, br, j->rows, j->scratch, why, sizeof(why));
        else if (rc == 0)
            rc = exec_launch_nodes(core, s, j->prog, br, j->rows, j->scratch, why, sizeof(why));
        if (rc < 0) {
            j->rc = rc;
            snprintf(j->reason, sizeof(j->reason), "eager launch failed: %s", why[0] ? why : strerror(-rc));
            return GG_RUN_DONE;
        }
    }
submitted:
    return exec_submitted(core, j, s, false, done) == 0 ? GG_RUN_ENQUEUED : GG_RUN_DONE;
}

int gg_exec_run_hit(gg_core *core, gg_job *j, gg_dev_stream *s, gg_done_fn done)
{
    gg_hit h = {.prog = j->prog, .rows = j->rows, .scratch = j->scratch, .batch = j->batch,
                .graph = j->results[0].exec, .wait_ev = j->wait_ev, .signal_ev = j->signal_ev};
    int rc;
    char why[sizeof(j->reason)];
    /* A failure before the graph is on the stream is left to a worker,
     * which gives it the same answer (or the eager fallback) as any job. */
    int how = gg_exec_launch_hit(core, s, &h, &j->t_start_us, &rc, why, sizeof(why));
    if (how == GG_HIT_NOT_RUN)
        return how;
    if (how == GG_HIT_FAILED) {
        j->rc = rc;
        snprintf(j->reason, sizeof(j->reason), "%s", why);
        return how;
    }
    j->graph = true;
    return exec_submitted(core, j, s, true, done) == 0 ? GG_HIT_LAUNCHED : GG_HIT_FAILED;
}
