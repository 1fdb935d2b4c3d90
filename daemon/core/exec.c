/* SPDX-License-Identifier: MIT */
/* The executor.
 *
 * Happy path: the loop submits a replay; a worker thread captures the
 * (program, branch, bucket) graph if the entry is empty, launches it on the
 * session's stream, and asks the device to call back when the stream has
 * drained; then, under the core lock, it applies its findings to the cache
 * and starts the session's next job itself (stream order keeps the two in
 * sequence on the device), with no loop round trip between them (when the
 * lock is busy and no job waits, the loop does both instead).  The
 * callback queues the job for the loop and wakes it with uv_async_send; the
 * loop counts and answers the client (an async replay's answer goes once
 * its work is enqueued).  A plain cache hit that is cheap to launch skips
 * the worker: the loop launches it itself (gg_exec_hit) and, when the
 * device completes it synchronously (cpu), answers before it next polls.
 * Jobs come from a free list, so a replay allocates nothing.
 *
 * Failure modes: a failed (or injected, GFXGRAPH_FAULT) capture,
 * instantiate or launch runs the same nodes eagerly instead, so the answer
 * is still right; the entry is marked FAILED with its reason so the next
 * request goes straight to eager instead of failing again.  -ENODEV from
 * the device ends the daemon (sticky device error).  A session whose
 * client leaves has its queued jobs dropped; a running one finishes first,
 * holding the session (and so its imported buffers) until it does.
 *
 * Cache entries, programs, sessions and counters change only under the core
 * lock (the loop, a worker applying its findings, the fast path); while a
 * job runs, its worker reads the pinned entry and writes its findings into
 * the job. */
#include "core/exec.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "core/account.h"
#include "core/arena.h"
#include "core/core.h"

typedef struct {
    gg_list link;
    gg_dev_exec *graph;
    uint8_t *scratch;
    gg_dev_stream *stream;
} exec_release;

/* Free jobs kept for reuse: enough for max-inflight pipelined replays of a
 * few busy sessions; a burst beyond it is freed as it drains. */
#define EXEC_JOB_POOL_MAX 256

/* One uid's share of the executor.  The workers serve the uids with jobs
 * waiting in turn, one job each, so another user's replay waits for about
 * one job of each busy uid, not for the backlog of one that opens many
 * sessions.  A lane lives as long as the executor: a uid is a user of this
 * host, and a lane made per job would cost an allocation per replay. */
typedef struct gg_exec_lane {
    gg_list link;                /* x->lanes (core lock) */
    gg_list ready_link;          /* x->ready while queue has jobs (x->lock) */
    gg_list queue;               /* this uid's jobs for the workers (x->lock) */
    uid_t uid;
    unsigned live;               /* submitted, not yet ended (core lock) */
} gg_exec_lane;

struct gg_exec {
    gg_core *core;
    uv_async_t async;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    gg_list lanes;               /* every uid's lane, most recently used first */
    gg_list ready;               /* lanes with jobs for the workers, in turn */
    unsigned nqueued;            /* jobs in the lanes' queues */
    uint64_t dropped;            /* jobs of departed sessions never run */
    gg_list releases;            /* graphs and scratch to free */
    gg_list live;                /* submitted, not yet ended (loop-side) */
    gg_job *enqueued;            /* work on the stream, for the loop */
    gg_job *done;                /* finished, for the loop */
    pthread_t *threads;
    int nthreads;
    bool quit;
    bool closed;
    unsigned pending;            /* submitted and not yet finished (loop-side) */
    gg_job *pool;                /* free jobs (core lock), linked by done_next */
    unsigned npool;
};

static void exec_on_async(uv_async_t *h);

void gg_job_free(gg_job *job)
{
    if (!job)
        return;
    bool small = job->entries == &job->one && job->results == &job->one_result;
    gg_exec *x = job->sess ? job->sess->core->exec : NULL;
    if (small && x && x->npool < EXEC_JOB_POOL_MAX) {
        job->done_next = x->pool;
        x->pool = job;
        x->npool++;
        return;
    }
    free(job->entries != &job->one ? job->entries : NULL);
    free(job->results != &job->one_result ? job->results : NULL);
    free(job);
}

/* Core lock held: uid's lane, made on its first job. */
static gg_exec_lane *exec_lane(gg_exec *x, uid_t uid)
{
    for (gg_list *l = x->lanes.next; l != &x->lanes; l = l->next) {
        gg_exec_lane *ln = gg_container_of(l, gg_exec_lane, link);
        if (ln->uid == uid) {
            if (l != x->lanes.next) {   /* most recently used first */
                gg_list_del(l);
                gg_list_add_tail(x->lanes.next, l);
            }
            return ln;
        }
    }
    gg_exec_lane *ln = calloc(1, sizeof(*ln));
    if (!ln)
        return NULL;
    ln->uid = uid;
    gg_list_init(&ln->ready_link);
    gg_list_init(&ln->queue);
    gg_list_add_tail(x->lanes.next, &ln->link);
    return ln;
}

unsigned gg_exec_uid_jobs(const gg_exec *x, uid_t uid)
{
    for (const gg_list *l = x->lanes.next; l != &x->lanes; l = l->next) {
        const gg_exec_lane *ln = gg_container_of(l, gg_exec_lane, link);
        if (ln->uid == uid)
            return ln->live;
    }
    return 0;
}

uint64_t gg_exec_dropped(const gg_exec *x)
{
    return x->dropped;
}

gg_job *gg_job_new(gg_job_kind kind, gg_session *s, const gg_job_ops *ops, uint64_t tag,
                   gg_program *p, int nentries)
{
    gg_exec *x = s->core->exec;
    gg_exec_lane *lane = exec_lane(x, s->uid);
    if (!lane)
        return NULL;
    gg_job *j;
    if (nentries <= 1 && x->pool) {
        j = x->pool;
        x->pool = j->done_next;
        x->npool--;
        memset(j, 0, sizeof(*j));
    } else if (!(j = calloc(1, sizeof(*j)))) {
        return NULL;
    }
    gg_list_init(&j->link);
    gg_list_init(&j->live_link);
    j->kind = kind;
    j->lane = lane;
    j->t_new_us = gg_now_us();
    j->sess = s;
    j->ops = ops;
    j->tag = tag;
    j->prog = p;
    j->gen = p ? p->gen : 0;
    j->entries = nentries > 1 ? calloc((size_t)nentries, sizeof(*j->entries)) : &j->one;
    j->results = nentries > 1 ? calloc((size_t)nentries, sizeof(*j->results)) : &j->one_result;
    if (!j->entries || !j->results) {
        gg_job_free(j);
        return NULL;
    }
    return j;
}

/* Core lock held: what a job holds is counted here, and released when it
 * ends (exec_job_end). */
static void exec_hold(gg_core *core, gg_job *j)
{
    if (j->prog)
        j->prog->pins++;
    if (j->wait_ev)
        j->wait_ev->users++;
    if (j->signal_ev)
        j->signal_ev->users++;
    for (int i = 0; i < j->nentries; i++)
        gg_cache_pin(core->cache, j->entries[i]);
}

/* Core lock held: the executor owns j from here until exec_job_end. */
static void exec_adopt(gg_exec *x, gg_job *j)
{
    x->pending++;
    j->lane->live++;
    gg_list_add_tail(&x->live, &j->live_link);
    gg_session_ref(j->sess);
}

void gg_exec_queue(gg_core *core, gg_job *j)
{
    /* Nothing below can fail.  The session's stream is made by the worker
     * that first needs it (exec_run.c): making one creates a BLAS handle
     * and allocates its workspace, too slow for the loop. */
    exec_hold(core, j);
    gg_exec_submit(core->exec, j);
}

static void exec_apply(gg_exec *x, gg_job *j, gg_cache_entry *e, gg_job_result *r);
static void exec_start_next(gg_exec *x, gg_job *j, bool on_worker);

/* Core lock held: what j's worker found out goes into the program's arena
 * and the cache (once per job), before the session's next job starts. */
static void exec_apply_job(gg_exec *x, gg_job *j)
{
    if (j->applied)
        return;
    if (j->arena_new) {
        gg_cache_arena_attach(x->core->cache, j->prog->arena, j->arena_new);
        j->arena_new = NULL;
    }
    for (int i = 0; i < j->nentries; i++)
        exec_apply(x, j, j->entries[i], &j->results[i]);
    j->applied = true;
}

/* Core lock held (a worker, or the loop after its own launch): j's work is
 * on the stream.  Its findings go into the cache now, so the session's next
 * job, started here, already sees the graph this one captured. */
static void exec_enqueued_locked(gg_exec *x, gg_job *j, bool on_worker)
{
    exec_apply_job(x, j);
    exec_start_next(x, j, on_worker);
}

/* Worker: j's work is on the stream and its completion is being watched.
 * Called only after notify(): from here the session's next job may start
 * on the same stream, and nothing of j's may be put on that stream after
 * the next job has begun (a capture would take it in).  The worker starts
 * that job itself, under the core lock, so consecutive jobs of a session
 * do not wait for the loop.  It waits for the lock only when a job is
 * known to be queued: otherwise a busy lock (the loop handling a request)
 * is not worth a sleep and a wake-up, and the loop takes the news instead.
 * The loop hears of it then, or when it has an answer to give now (an
 * async replay).  A completion that came first was held back
 * (exec_job_done) and goes now, after the enqueued news, so the loop
 * sees the two in order. */
static void exec_job_enqueued(gg_job *j)
{
    gg_core *core = j->sess->core;
    gg_exec *x = core->exec;
    bool locked = true;
    if (atomic_load_explicit(&j->next_waiting, memory_order_relaxed))
        gg_core_lock(core);
    else
        locked = gg_core_trylock(core);
    if (locked) {
        exec_enqueued_locked(x, j, true);
        gg_core_unlock(core);
    }
    bool wake = false;
    pthread_mutex_lock(&x->lock);
    j->enq_pushed = true;
    /* the loop's exec_enqueued applies what is left, and answers an async
     * replay unless its completion failed */
    if (!locked || j->async) {
        j->enq_next = x->enqueued;
        x->enqueued = j;
        wake = true;
    }
    if (j->done_deferred) {
        j->done_next = x->done;
        x->done = j;
        wake = true;
    }
    pthread_mutex_unlock(&x->lock);
    if (wake)
        uv_async_send(&x->async);
}

/* Worker: the next step asks for a completion callback; until the enqueued
 * news is pushed, a completion is held back.  want false: no callback is
 * coming after all (notify failed). */
static void exec_job_await(gg_job *j, bool want)
{
    gg_exec *x = j->sess->core->exec;
    pthread_mutex_lock(&x->lock);
    j->await_enq = want;
    pthread_mutex_unlock(&x->lock);
}

/* The device is done with j (any thread), or its run ended without device
 * work (the worker): the loop hears it, after j's enqueued news. */
static void exec_job_done(void *arg, int status)
{
    gg_job *j = arg;
    gg_exec *x = j->sess->core->exec;
    uint64_t now = gg_now_us();
    /* under the lock: the thread that enqueued j may be reading rc */
    pthread_mutex_lock(&x->lock);
    j->t_done_us = now;
    if (status < 0 && j->rc == 0) {
        j->rc = status;
        snprintf(j->reason, sizeof(j->reason), "the device reported an error while running");
    }
    if (j->await_enq && !j->enq_pushed) {
        j->done_deferred = true;   /* exec_job_enqueued pushes it */
        pthread_mutex_unlock(&x->lock);
        return;
    }
    j->done_next = x->done;
    x->done = j;
    pthread_mutex_unlock(&x->lock);
    uv_async_send(&x->async);
}

static void *exec_worker(void *arg)
{
    gg_exec *x = arg;
    gg_device *dev = x->core->dev;
    pthread_mutex_lock(&x->lock);
    for (;;) {
        if (!gg_list_empty(&x->releases)) {
            exec_release *rel = gg_container_of(x->releases.next, exec_release, link);
            gg_list_del(&rel->link);
            pthread_mutex_unlock(&x->lock);
            gg_device_free(dev, rel->graph, rel->scratch, rel->stream);
            free(rel);
            pthread_mutex_lock(&x->lock);
            continue;
        }
        if (x->nqueued) {
            /* the first uid in turn gives one job, then waits its next turn */
            gg_exec_lane *ln = gg_container_of(x->ready.next, gg_exec_lane, ready_link);
            gg_job *j = gg_container_of(ln->queue.next, gg_job, link);
            gg_list_del(&j->link);
            x->nqueued--;
            gg_list_del(&ln->ready_link);
            if (!gg_list_empty(&ln->queue))
                gg_list_add_tail(&x->ready, &ln->ready_link);
            /* a completion the device gives before this thread has handled
             * the enqueued news waits for it */
            j->await_enq = true;
            pthread_mutex_unlock(&x->lock);
            if (gg_exec_run(x->core, j, exec_job_done) == GG_RUN_ENQUEUED) {
                exec_job_enqueued(j);
            } else {
                /* nothing is left on the device for it */
                exec_job_await(j, false);
                exec_job_done(j, j->rc);
            }
            pthread_mutex_lock(&x->lock);
            continue;
        }
        if (x->quit)
            break;
        pthread_cond_wait(&x->cond, &x->lock);
    }
    pthread_mutex_unlock(&x->lock);
    return NULL;
}

/* ---- loop side ---------------------------------------------------------- */

/* Device frees can wait for the whole device (a free synchronises): they
 * go to a worker so the loop never blocks on them. */
static void exec_release_push(gg_exec *x, gg_dev_exec *g, uint8_t *scratch, gg_dev_stream *st)
{
    if (!g && !scratch && !st)
        return;
    exec_release *rel = malloc(sizeof(*rel));
    if (!rel || x->closed) {
        /* no worker left (shutting down): free here */
        gg_device_free(x->core->dev, g, scratch, st);
        free(rel);
        return;
    }
    rel->graph = g;
    rel->scratch = scratch;
    rel->stream = st;
    pthread_mutex_lock(&x->lock);
    gg_list_add_tail(&x->releases, &rel->link);
    pthread_mutex_unlock(&x->lock);
    /* after unlocking, so the woken worker does not block on the mutex */
    pthread_cond_signal(&x->cond);
}

void gg_exec_release(gg_exec *x, gg_dev_exec *g, uint8_t *scratch, gg_dev_stream *s)
{
    exec_release_push(x, g, scratch, s);
}

int gg_exec_new(gg_core *core, gg_exec **out)
{
    gg_exec *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->core = core;
    gg_list_init(&x->lanes);
    gg_list_init(&x->ready);
    gg_list_init(&x->releases);
    gg_list_init(&x->live);
    pthread_mutex_init(&x->lock, NULL);
    pthread_cond_init(&x->cond, NULL);
    int rc = uv_async_init(core->loop, &x->async, exec_on_async);
    if (rc < 0)
        goto undo_sync;
    x->async.data = x;
    int n = (int)core->cfg->workers;
    if (n == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        /* cpu: the kernels run on these threads; hip: they only enqueue */
        n = strcmp(core->backend, "cpu") == 0 ? (int)(cpus < 2 ? 2 : cpus > 8 ? 8 : cpus) : 2;
    }
    x->threads = calloc((size_t)n, sizeof(pthread_t));
    if (!x->threads) {
        rc = -ENOMEM;
        goto undo_async;
    }
    for (; x->nthreads < n; x->nthreads++)
        if ((rc = -pthread_create(&x->threads[x->nthreads], NULL, exec_worker, x)) < 0)
            goto undo_threads;
    *out = x;
    return 0;

undo_threads:
    pthread_mutex_lock(&x->lock);
    x->quit = true;
    pthread_mutex_unlock(&x->lock);
    pthread_cond_broadcast(&x->cond);
    for (int i = 0; i < x->nthreads; i++)
        pthread_join(x->threads[i], NULL);
    free(x->threads);
undo_async:
    uv_close((uv_handle_t *)&x->async, NULL);
    uv_run(core->loop, UV_RUN_NOWAIT);
undo_sync:
    pthread_mutex_destroy(&x->lock);
    pthread_cond_destroy(&x->cond);
    free(x);
    return rc;
}

void gg_exec_close(gg_exec *x)
{
    if (x->closed)
        return;
    pthread_mutex_lock(&x->lock);
    x->quit = true;
    pthread_mutex_unlock(&x->lock);
    pthread_cond_broadcast(&x->cond);
    for (int i = 0; i < x->nthreads; i++)
        pthread_join(x->threads[i], NULL);
    x->nthreads = 0;
    x->closed = true;
    uv_close((uv_handle_t *)&x->async, NULL);
}

void gg_exec_free(gg_exec *x)
{
    gg_exec_close(x);
    for (gg_job *j; (j = x->pool);) {
        x->pool = j->done_next;
        free(j);
    }
    while (!gg_list_empty(&x->lanes)) {
        gg_exec_lane *ln = gg_container_of(x->lanes.next, gg_exec_lane, link);
        gg_list_del(&ln->link);
        free(ln);
    }
    pthread_mutex_destroy(&x->lock);
    pthread_cond_destroy(&x->cond);
    free(x->threads);
    free(x);
}

bool gg_exec_idle(const gg_exec *x)
{
    return x->pending == 0;
}

unsigned gg_exec_describe(const gg_exec *x, char *buf, size_t len)
{
    static const char *const kinds[] = {"replay", "prepare", "health smoke test"};
    unsigned n = 0;
    size_t off = 0;
    buf[0] = '\0';
    for (const gg_list *l = x->live.next; l != &x->live; l = l->next, n++) {
        const gg_job *j = gg_container_of(l, gg_job, live_link);
        const gg_session *s = j->sess;
        char what[100] = "", batch[24] = "", one[320];
        if (j->prog)
            snprintf(what, sizeof(what), " of program %llu '%s'",
                     (unsigned long long)j->prog->id, j->prog->name);
        if (j->kind == GG_JOB_REPLAY)
            snprintf(batch, sizeof(batch), "batch %d, ", j->batch);
        /* past its enqueued news a job is on the device, even when the
         * session has started its next one */
        bool running = s->running == j || j->applied;
        snprintf(one, sizeof(one), "%s%s (%s%s) for session %llu (pid %d, client '%s')",
                 kinds[j->kind], what, batch, running ? "running" : "queued",
                 (unsigned long long)s->id, (int)s->pid, s->client);
        if (off + 1 < len) {
            int w = snprintf(buf + off, len - off, "%s%s", n ? "; " : "", one);
            off += w < 0 ? 0 : (size_t)w < len - off ? (size_t)w : len - off - 1;
        }
    }
    return n;
}

/* Core lock held.  on_worker: called by a worker that goes back to the
 * queue right after, and takes j itself when nothing is ahead of it, so no
 * other worker needs waking (and no futex call is made). */
static void exec_start(gg_exec *x, gg_job *j, bool on_worker)
{
    j->sess->running = j;
    pthread_mutex_lock(&x->lock);
    bool wake = !on_worker || x->nqueued || !gg_list_empty(&x->releases);
    gg_list_add_tail(&j->lane->queue, &j->link);
    if (gg_list_empty(&j->lane->ready_link))
        gg_list_add_tail(&x->ready, &j->lane->ready_link);
    x->nqueued++;
    pthread_mutex_unlock(&x->lock);
    /* after unlocking, so the woken worker does not block on the mutex */
    if (wake)
        pthread_cond_signal(&x->cond);
}

void gg_exec_submit(gg_exec *x, gg_job *j)
{
    exec_adopt(x, j);
    gg_session *s = j->sess;
    /* the fast path may be launching on the session's stream right now */
    if (gg_session_stream_held(s)) {
        if (s->running)
            atomic_store_explicit(&s->running->next_waiting, true, memory_order_relaxed);
        gg_list_add_tail(&s->jobs, &j->link);
    } else
        exec_start(x, j, false);
}

void gg_exec_kick(gg_exec *x, gg_session *s)
{
    if (gg_session_stream_held(s) || gg_list_empty(&s->jobs))
        return;
    gg_job *next = gg_container_of(s->jobs.next, gg_job, link);
    gg_list_del(&next->link);
    exec_start(x, next, false);
}

/* Undo what submitting pinned; free the job. */
static void exec_job_end(gg_exec *x, gg_job *j)
{
    /* before the unpins: the last one may free the entry (a released
     * program, an evicted graph) */
    if (j->adapt_run && j->nentries)
        gg_adapt_end(&j->entries[0]->adapt, j->adapt_round, j->adapt_run);
    for (int i = 0; i < j->nentries; i++)
        gg_cache_unpin(x->core->cache, j->entries[i]);
    if (j->prog)
        gg_program_unpin(j->prog);
    if (j->wait_ev)
        j->wait_ev->users--;
    if (j->signal_ev)
        j->signal_ev->users--;
    if (j->tmp_scratch)
        exec_release_push(x, NULL, j->tmp_scratch, NULL);
    gg_session *s = j->sess;
    gg_list_del(&j->live_link);
    j->lane->live--;
    if (j->ops->ended)
        j->ops->ended(j, j->replied);
    gg_job_free(j);
    x->pending--;
    gg_session_unref(s);
}

void gg_exec_cancel_session(gg_exec *x, gg_session *s)
{
    while (!gg_list_empty(&s->jobs)) {
        gg_job *j = gg_container_of(s->jobs.next, gg_job, link);
        gg_list_del(&j->link);
        x->dropped++;
        exec_job_end(x, j);
    }
    /* The job the session is running may still wait for a worker: nothing
     * of it is on the device yet, so it goes too.  A worker takes a job
     * off its lane under x->lock: linked there means not taken. */
    gg_job *j = s->running;
    if (!j)
        return;
    pthread_mutex_lock(&x->lock);
    bool queued = !gg_list_empty(&j->link);
    if (queued) {
        gg_list_del(&j->link);
        x->nqueued--;
        if (gg_list_empty(&j->lane->queue))
            gg_list_del(&j->lane->ready_link);
    }
    pthread_mutex_unlock(&x->lock);
    if (!queued)
        return;
    s->running = NULL;
    x->dropped++;
    exec_job_end(x, j);
}

void gg_exec_detach_session(gg_exec *x, gg_session *s)
{
    gg_core_session_closing(x->core, s);
    s->transport = NULL;
    gg_exec_cancel_session(x, s);
    gg_session_unref(s);
}

/* Apply a worker's findings to the entry (loop thread only). */
static void exec_apply(gg_exec *x, gg_job *j, gg_cache_entry *e, gg_job_result *r)
{
    gg_core *core = x->core;
    if (r->warmed)
        e->warm_sess = j->sess->id;
    if (r->captured && r->updated) {
        e->captures++;
        e->updates++;
        e->gen = j->gen;
        core->stats.capture_count++;
        core->stats.exec_updates++;
    } else if (r->captured) {
        e->reason[0] = '\0';
        e->captures++;
        e->instantiations++;
        e->gen = j->gen;
        core->stats.capture_count++;
        core->stats.instantiations++;
        if (r->replaced) {
            gg_cache_unready(core->cache, e);
            exec_release_push(x, r->replaced, NULL, NULL);
        }
        e->exec = r->exec;
        e->footprint = r->footprint;
        e->updates = 0;
        if (!gg_cache_reserve(core->cache, e, e->footprint)) {
            r->failed = true;
            snprintf(r->reason, sizeof(r->reason),
                     "graph of %zu bytes is larger than the whole VRAM cap (%.0f%% of device "
                     "memory)", e->footprint, core->cfg->vram_cap * 100);
        } else if (!r->failed) {
            gg_cache_ready(core->cache, e);
        }
    }
    if (r->validated) {
        e->validations++;
        core->stats.validations++;
    }
    if (r->validation_failed)
        core->stats.validation_failures++;
    if (r->over_cap && r->failed && e->state != GG_ENTRY_FAILED &&
        gg_cache_evict_bytes(core->cache, e, r->over_cap) >= r->over_cap) {
        /* Room made: this replay ran eager (and says why), the next use
         * captures again instead of the entry failing for good. */
        gg_log_fields f = {.session = j->sess->id, .program = j->prog->id, .bucket = e->bucket};
        GG_LOG(GG_LOG_INFO, &f, "%s: cached graphs evicted to make room, captured on next use",
               r->reason);
        snprintf(e->reason, sizeof(e->reason), "%s", r->reason);
        r->failed = false;
    }
    if (r->failed && e->state != GG_ENTRY_FAILED) {
        gg_log_fields f = {.session = j->sess->id, .program = j->prog->id, .bucket = e->bucket};
        GG_LOG(GG_LOG_WARN, &f, "graph for branch %d disabled, running eager: %s", e->branch,
               r->reason);
        gg_cache_fail(core->cache, e, r->reason);
    }
}

/* What a replay's (or any job's) answer says, for the submitter's done. */
static void exec_outcome(gg_exec *x, const gg_job *j, double us, gg_replay_outcome *o)
{
    memset(o, 0, sizeof(*o));
    o->rc = j->rc;
    if (j->rc < 0) {
        o->has_reason = true;
        snprintf(o->reason, sizeof(o->reason), "%s", j->reason);
        return;
    }
    if (j->kind != GG_JOB_REPLAY)
        return;
    gg_cache_entry *e = j->nentries ? j->entries[0] : NULL;
    const char *reason = NULL;
    char why[160];
    if (!j->graph && e && j->adapt_run == GG_ADAPT_RUN_EAGER && !j->fallback) {
        if (j->adapt_measuring)
            snprintf(why, sizeof(why), "adaptive: timing eager runs against the graph");
        else
            snprintf(why, sizeof(why), "adaptive: eager runs measured faster (%.1f us against "
                     "%.1f us for the graph%s)", e->adapt.us[1], e->adapt.us[0],
                     e->adapt.from_memo ? ", remembered for this program" : "");
        reason = why;
    } else if (!j->graph) {
        reason = !e ? "batch is above the largest bucket"
                 : !x->core->cfg->graphs_enabled ? "graphs are disabled (GFXGRAPH=0)"
                 : e->reason;
    }
    if (reason) {
        o->has_reason = true;
        snprintf(o->reason, sizeof(o->reason), "%s", reason);
    }
    o->graph = j->graph;
    o->fallback = j->fallback;
    o->captured = j->nentries && j->results[0].captured;
    o->async = j->async;
    o->bucket = e ? e->bucket : 0;
    o->batch = j->batch;
    o->branch = j->branch;
    o->device_us = us;
}

static void exec_answer(gg_exec *x, gg_job *j, double us)
{
    gg_replay_outcome o;
    exec_outcome(x, j, us, &o);
    j->replied = true;
    j->ops->done(j, &o);
}

/* Core lock held.  The session's next job may go as soon as this one's
 * work is on the stream: stream order keeps them in sequence on the
 * device. */
static void exec_start_next(gg_exec *x, gg_job *j, bool on_worker)
{
    gg_session *s = j->sess;
    if (s->running != j)
        return;
    s->running = NULL;
    if (!s->launching && !gg_list_empty(&s->jobs)) {
        gg_job *next = gg_container_of(s->jobs.next, gg_job, link);
        gg_list_del(&next->link);
        exec_start(x, next, on_worker);
    }
}

/* Loop: a job's work is enqueued.  Its findings and the session's next
 * job, unless its worker saw to them; an async replay's answer. */
static void exec_enqueued(gg_exec *x, gg_job *j)
{
    if (!j->applied)
        exec_enqueued_locked(x, j, false);
    if (j->async && j->rc == 0)
        exec_answer(x, j, 0.0);
}

/* Loop: the device is done with j (or it never started). */
static void exec_finish(gg_exec *x, gg_job *j)
{
    gg_core *core = x->core;
    gg_session *s = j->sess;
    double us = (double)(j->t_done_us - j->t_start_us);

    if (j->rc == -ENODEV)
        gg_core_device_lost(core, j->reason);
    exec_apply_job(x, j);
    if (j->kind == GG_JOB_REPLAY && j->rc == 0) {
        gg_replay_ran ran = {
            .path = j->graph ? GG_PATH_GRAPH : GG_PATH_EAGER,
            .graph = j->graph,
            .fallback = j->fallback,
            .validated = j->nentries && j->results[0].validated,
            .adapt_run = j->adapt_run,
            .adapt_round = j->adapt_round,
            .device_us = us,
            .round_trip_us = (double)(j->t_done_us - j->t_new_us),
        };
        gg_account_replay(core, s, j->prog, j->nentries ? j->entries[0] : NULL, &ran);
    }
    if (!j->replied)
        exec_answer(x, j, us);
    exec_start_next(x, j, false);
    exec_job_end(x, j);
}

/* The cpu backend runs a graph on the thread that launches it.  Up to this
 * mean run time an entry's replays run on the loop thread itself: about
 * the loop's own cost of one socket replay (~10 us read, decode, answer,
 * write on one core, bench_rps pinned), so an inline launch at most about
 * doubles the time the loop spends on that request, while the worker hand
 * off it replaces costs two thread wake-ups and an eventfd round trip.
 * Longer kernels stay on the workers, where they overlap other sessions and
 * never hold up the loop. */
#define EXEC_HIT_CPU_MAX_US 10.0
/* The mean is trusted from this many runs on: the first ones touch the
 * client's pages and the kernel's code for the first time and can take
 * tens of times longer, so a mean of one or two says little either way.
 * Until then the workers run the entry (and measure it). */
#define EXEC_HIT_CPU_MIN_RUNS 16

bool gg_exec_hit_cheap(const gg_core *core, const gg_cache_entry *e)
{
    if (strcmp(core->backend, "cpu") != 0)
        return true;    /* hip: a launch enqueues, the device runs it */
    return e->replays >= EXEC_HIT_CPU_MIN_RUNS &&
           e->replay_us_sum <= EXEC_HIT_CPU_MAX_US * (double)e->replays;
}

void gg_exec_hit(gg_core *core, gg_job *j)
{
    gg_exec *x = core->exec;
    gg_session *s = j->sess;
    gg_cache_entry *e = j->entries[0];
    exec_hold(core, j);
    exec_adopt(x, j);
    /* The stream is this launch's until its work is enqueued: the
     * session's jobs, socket replays and fast-path hits queue behind a
     * running job, as they would behind a worker's. */
    s->running = j;
    j->scratch = j->prog->arena->base;   /* a ready graph's program has it allocated */
    j->results[0].exec = e->exec;
    /* every completion, error or not, waits for this thread's enqueued
     * news below (no other thread knows j yet: no lock needed) */
    j->await_enq = true;
    gg_dev_stream *st = s->stream;
    /* A cpu launch runs the kernels: the fast path's threads and the
     * workers must not wait for them. */
    gg_core_unlock(core);
    int how = gg_exec_run_hit(core, j, st, exec_job_done);
    /* a failed launch's completion, held back like the device's would be
     * until the enqueued news below is handled */
    if (how == GG_HIT_FAILED)
        exec_job_done(j, j->rc);
    gg_core_lock(core);
    if (how == GG_HIT_NOT_RUN) {
        /* nothing of it is on the stream: a worker runs it, with the eager
         * fallback and error handling of any job */
        j->await_enq = false;
        exec_start(x, j, false);
        return;
    }
    pthread_mutex_lock(&x->lock);
    j->enq_pushed = true;
    bool done = j->done_deferred;
    pthread_mutex_unlock(&x->lock);
    /* a failed launch has nothing to apply; exec_finish answers it */
    if (how == GG_HIT_LAUNCHED)
        exec_enqueued(x, j);
    /* Done already (a synchronous device): answered and ended here, before
     * the loop polls again.  Else the device's callback hands it to the
     * loop like any job's completion. */
    if (done)
        exec_finish(x, j);
}

static gg_job *exec_reverse(gg_job *list, bool enq)
{
    gg_job *rev = NULL;
    while (list) {
        gg_job **next = enq ? &list->enq_next : &list->done_next;
        gg_job *n = *next;
        *next = rev;
        rev = list;
        list = n;
    }
    return rev;
}

static void exec_on_async(uv_async_t *h)
{
    gg_exec *x = h->data;
    /* Both lists in one snapshot: a job's enqueued news is handled before
     * its completion.  They are newest first: reverse to keep order. */
    pthread_mutex_lock(&x->lock);
    gg_job *enq = exec_reverse(x->enqueued, true);
    gg_job *done = exec_reverse(x->done, false);
    x->enqueued = x->done = NULL;
    pthread_mutex_unlock(&x->lock);
    gg_core_lock(x->core);
    for (gg_job *n; enq; enq = n) {
        n = enq->enq_next;
        exec_enqueued(x, enq);
    }
    for (gg_job *n; done; done = n) {
        n = done->done_next;
        exec_finish(x, done);
    }
    /* a prepare or health job, or the completion thread, may have seen the
     * device go without failing a replay with -ENODEV */
    gg_core_check_device(x->core);
    gg_core_maybe_stopped(x->core);
    gg_core_unlock(x->core);
}
