/* SPDX-License-Identifier: MIT */
/* A region's submission thread: take descriptors, run cache hits, complete.
 *
 * Happy path (a cache hit): the thread sees sq_tail move, copies the
 * descriptor out of shared memory once, checks the copy and looks the
 * program and its graph up under the core lock, pins them, launches the
 * graph on the session's stream, writes the completion record's fields,
 * queues the device write of its seq word behind the graph and publishes
 * sq_head.  The client, spinning on that word, sees the device's write; no
 * daemon thread waits for the GPU.  The device's completion callback then
 * unpins and counts.  No socket, no MessagePack, no allocation.
 *
 * Failure modes: a descriptor that is malformed or names what is not the
 * session's gets an error record (never touching another session's state);
 * a ring whose indices make no sense ends the region (state closed) and
 * leaves the session on its socket; anything that is not a plain hit
 * (capture, eager, validation, oversize, a launch that failed) goes to the
 * executor, whose answer fills the same record; a device error reported for
 * a hit's work becomes that record's status.  An idle thread sleeps on a
 * futex after fastpath-spin-us; a client that bumps sq_wake without
 * submitting cannot make it spin. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "core/account.h"
#include "core/arena.h"
#include "core/replay.h"
#include "fp_internal.h"

int gg_fp_futex_wait(uint32_t *word, uint32_t val, const struct timespec *timeout)
{
    return (int)syscall(SYS_futex, word, FUTEX_WAIT, val, timeout, NULL, 0);
}

void gg_fp_futex_wake(uint32_t *word, int n)
{
    syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* How long a ring thread keeps spinning while its device work runs: a
 * decode step's graph is done well inside it; longer work (a prefill)
 * is then waited for asleep, in fp_idle's short futex naps. */
#define FP_PENDING_SPIN_MAX_US 2000
/* A ring waiting for a busy slot sleeps between looks, from the first to
 * the second: the first is about a wake-up's cost, the second bounds how
 * late a freed slot is seen. */
#define FP_BUSY_SLEEP_MIN_US 20
#define FP_BUSY_SLEEP_MAX_US 1000
/* A device-written completion this late makes the ring thread ask the
 * stream whether the work failed (fp_check_stuck). */
#define FP_GPU_CHECK_US 200000

/* fastpath-spin-us, which a reload may change under the thread */
#define fp_spin_us(r) gg_load_relaxed(&(r)->m->set.spin_us)

/* ---- completion records ------------------------------------------------- */

static gg_fp_cqe *fp_cqe(gg_fp_slot *sl)
{
    return &sl->r->cq[sl->index];
}

/* Every field but seq, in plain stores: seq's release store (by this
 * thread, or the device's write queued after the launch) publishes them. */
static void fp_fill(gg_fp_slot *sl, int status, uint32_t flags, uint32_t bucket, double us,
                    const char *reason)
{
    gg_fp_cqe *c = fp_cqe(sl);
    char why[sizeof(c->reason)];
    size_t n = reason ? proto_utf8_clean(why, sizeof(why), reason, strlen(reason)) : 0;
    why[n] = '\0';
    c->status = status;
    c->flags = flags;
    c->bucket = bucket;
    c->batch = sl->batch;
    c->branch = sl->branch;
    c->reserved0 = 0;
    c->device_us = us;
    c->user_data = sl->user_data;
    memset(c->reserved1, 0, sizeof(c->reserved1));
    memcpy(c->reason, why, n + 1);
}

static void fp_publish(gg_fp_slot *sl)
{
    gg_store_release(&fp_cqe(sl)->seq, sl->seq);
}

/* Wake client threads asleep on cq_wake, if any said they would sleep. */
static void fp_wake_client(gg_fp_region *r)
{
    gg_smp_mb();
    if (gg_load_relaxed(&r->hdr->cq_waiters)) {
        gg_fetch_add_seq_cst(&r->hdr->cq_wake, 1);
        gg_fp_futex_wake(&r->hdr->cq_wake, INT_MAX);
    }
}

static void fp_slot_free(gg_fp_slot *sl)
{
    gg_fp_region *r = sl->r;
    gg_store_release(&sl->busy, 0);
    gg_fetch_sub_release(&r->sess->inflight, 1);
    /* a stop keeps the connection open until this work is answered */
    if (gg_load_relaxed(&r->core->stopping))
        uv_async_send(&r->m->async);
}

/* An error for the descriptor in sl: written by this thread, at once. */
static void fp_fail(gg_fp_slot *sl, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fp_fail(gg_fp_slot *sl, int status, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fp_fill(sl, status, 0, 0, 0.0, msg);
    fp_publish(sl);
    fp_slot_free(sl);
    fp_wake_client(sl->r);
}

/* ---- the executor's answer (loop thread, core lock held) ----------------- */

static void fp_job_done(gg_job *j, const gg_replay_outcome *o)
{
    gg_fp_slot *sl = j->ctx;
    uint32_t flags = 0;
    if (o->rc < 0) {
        /* counted as a socket replay's failure is (rpc/reply.c) */
        sl->r->core->stats.errors++;
        sl->r->sess->errors++;
        gg_metrics_error(&sl->r->core->stats.metrics, o->rc);
    }
    if (o->rc == 0) {
        flags |= o->graph ? 0 : GG_FP_CQE_EAGER;
        flags |= o->fallback ? GG_FP_CQE_FALLBACK : 0;
        flags |= o->captured ? GG_FP_CQE_CAPTURED : 0;
        flags |= o->async ? GG_FP_CQE_ASYNC : GG_FP_CQE_TIMED;
    }
    fp_fill(sl, o->rc, flags, o->rc == 0 ? (uint32_t)o->bucket : 0,
            o->rc == 0 && !o->async ? o->device_us : 0, o->rc < 0 || o->has_reason ? o->reason : NULL);
    fp_publish(sl);
    fp_slot_free(sl);
    fp_wake_client(sl->r);
}

/* A job dropped without an answer (its session's connection closed). */
static void fp_job_ended(gg_job *j, bool answered)
{
    if (!answered)
        fp_slot_free(j->ctx);
}

static const gg_job_ops fp_job_ops = {
    .done = fp_job_done,
    .ended = fp_job_ended,
};

/* Core lock held: queue the descriptor as a job, as a socket replay. */
static void fp_to_executor(gg_fp_slot *sl, const gg_replay_target *t)
{
    gg_fp_region *r = sl->r;
    char msg[256] = "";
    proto_errbuf e = {msg, sizeof(msg)};
    int rc;
    gg_job *j = gg_replay_job(r->core, r->sess, t, &fp_job_ops, sl->seq, sl, &rc, &e);
    if (!j) {
        fp_fail(sl, rc, "%s", msg);
        return;
    }
    gg_exec_queue(r->core, j);
}

/* ---- cache hits ------------------------------------------------------------ */

/* Core lock held.  Undo what a hit pinned and count it. */
static void fp_hit_release(gg_fp_slot *sl, bool ran, double us)
{
    gg_fp_region *r = sl->r;
    gg_core *core = r->core;
    gg_session *s = r->sess;
    if (ran) {
        /* round trip: taken to done, the lookup before the launch included;
         * a hit is not a timed sample of adaptive's measurement */
        gg_replay_ran done = {.path = GG_PATH_FASTPATH, .graph = true, .device_us = us,
                              .round_trip_us = us + (double)(sl->t_launch_us - sl->t_take_us)};
        gg_account_replay(core, s, sl->prog, sl->entry, &done);
    }
    gg_cache_unpin(core->cache, sl->entry);
    if (sl->wait_ev)
        sl->wait_ev->users--;
    if (sl->signal_ev)
        sl->signal_ev->users--;
    gg_program_unpin(sl->prog);
    sl->entry = NULL;
    sl->prog = NULL;
    sl->wait_ev = sl->signal_ev = NULL;
}

/* The device is done with a hit's work (any thread). */
static void fp_hit_done(void *arg, int status)
{
    gg_fp_slot *sl = arg;
    gg_fp_region *r = sl->r;
    double us = (double)(gg_now_us() - sl->t_launch_us);
    /* Unpinned and counted before the record this callback writes says
     * done, so a request the client sends on seeing it finds the replay
     * finished (device-written records are gg_fp_reap's). */
    if (!gg_exchange_seq_cst(&sl->released, 1)) {
        gg_core_lock(r->core);
        fp_hit_release(sl, status == 0, us);
        if (status < 0)
            gg_metrics_error(&r->core->stats.metrics, status);
        gg_core_unlock(r->core);
    }
    if (status < 0) {
        /* the stream failed: the device may never have written seq */
        fp_fill(sl, status, 0, 0, 0.0, "the device reported an error while running");
        fp_publish(sl);
    } else if (!(sl->sqe_flags & GG_FP_SQE_ASYNC) && !sl->gpu_writes_seq) {
        /* asked for (TIMED), or free: the cpu backend ran the work on this
         * thread, so its time is known when the record is written */
        fp_fill(sl, 0, GG_FP_CQE_TIMED, sl->bucket, us, NULL);
        fp_publish(sl);
    }
    if (status == -ENODEV)
        uv_async_send(&r->m->async);   /* the loop reports the device lost */
    fp_slot_free(sl);
    fp_wake_client(r);
}

/* Launch the pinned hit in sl (no lock held): gg_exec_launch_hit, then the
 * completion the descriptor asked for.  GG_HIT_LAUNCHED, or (nothing
 * written to the completion record) GG_HIT_NOT_RUN / GG_HIT_FAILED with rc
 * and why. */
static int fp_hit_launch(gg_fp_slot *sl, gg_dev_stream *st, gg_dev_exec *x, int *rc, char *why,
                         size_t whylen)
{
    gg_fp_region *r = sl->r;
    gg_device *dev = r->core->dev;
    gg_hit h = {.prog = sl->prog, .rows = sl->entry->bucket, .scratch = sl->prog->arena->base,
                .batch = (int)sl->batch, .graph = x, .wait_ev = sl->wait_ev,
                .signal_ev = sl->signal_ev};
    int how = gg_exec_launch_hit(r->core, st, &h, &sl->t_launch_us, rc, why, whylen);
    if (how != GG_HIT_LAUNCHED)
        return how;
    sl->gpu_writes_seq = false;
    if (sl->sqe_flags & GG_FP_SQE_ASYNC) {
        fp_fill(sl, 0, GG_FP_CQE_ASYNC, sl->bucket, 0.0, NULL);
        fp_publish(sl);
        fp_wake_client(r);
    } else if (!(sl->sqe_flags & GG_FP_SQE_TIMED) && r->m->gpu_completion) {
        fp_fill(sl, 0, GG_FP_CQE_GPU, sl->bucket, 0.0, NULL);
        size_t off = (size_t)((uint8_t *)&fp_cqe(sl)->seq - r->base);
        sl->gpu_writes_seq = dev->ops->stream_write_u64(dev, st, r->dev_base + off,
                                                        &fp_cqe(sl)->seq, sl->seq) == 0;
        /* else the completion callback writes it */
    }
    if (sl->gpu_writes_seq) {
        /* No callback: this thread sees the word the device writes, wakes a
         * sleeping client, releases the hit and frees the slot itself
         * (gg_fp_reap), so nothing but the launch and the write is enqueued
         * per hit. */
        gg_store_seq_cst(&sl->gpu_pending, 1);
        gg_fetch_add_seq_cst(&r->gpu_pending, 1);
        return GG_HIT_LAUNCHED;
    }
    if (dev->ops->notify(dev, st, fp_hit_done, sl) < 0) {
        /* no callback is coming: drain here, so the pins can go */
        int rc2 = dev->ops->stream_sync(dev, st);
        fp_hit_done(sl, rc2 < 0 ? rc2 : 0);
    }
    return GG_HIT_LAUNCHED;
}

/* ---- one descriptor ---------------------------------------------------------- */

static void fp_take(gg_fp_region *r, gg_fp_slot *sl, const gg_fp_sqe *d)
{
    gg_core *core = r->core;
    gg_session *s = r->sess;
    sl->user_data = d->user_data;
    sl->sqe_flags = d->flags;
    sl->batch = d->batch;
    sl->branch = d->branch;
    sl->bucket = 0;
    sl->t_take_us = gg_now_us();
    gg_replay_target t = {.batch = (int)d->batch, .async = (d->flags & GG_FP_SQE_ASYNC) != 0};
    char msg[256] = "";
    proto_errbuf err = {msg, sizeof(msg)};
    int rc = 0;

    gg_core_lock(core);
    /* a descriptor is a request like a socket message, counted the same */
    core->stats.requests++;
    s->requests++;
    gg_fetch_add_relaxed(&s->inflight, 1);
    if (core->stopping)
        rc = proto_fail(&err, -ESHUTDOWN, "the daemon is shutting down");
    else if (d->seq != sl->seq)
        rc = proto_fail(&err, -EPROTO, "descriptor in slot %u has seq %llu, expected %llu",
                        sl->index, (unsigned long long)d->seq, (unsigned long long)sl->seq);
    else if (d->flags & ~GG_FP_SQE_FLAGS_KNOWN)
        rc = proto_fail(&err, -EINVAL, "unknown flags 0x%x", d->flags & ~GG_FP_SQE_FLAGS_KNOWN);
    else if (d->reserved0 || d->reserved1)
        rc = proto_fail(&err, -EINVAL, "reserved descriptor fields must be 0");
    else if (d->batch == 0 || d->batch > GG_MAX_BATCH)
        rc = proto_fail(&err, -EINVAL, "batch %u is not in 1..%d", d->batch, GG_MAX_BATCH);
    if (rc == 0)
        rc = gg_program_lookup(core, s, d->program, &t.prog, &err);
    if (rc == 0)
        rc = gg_replay_target_check(&t, d->branch, &err);
    if (rc == 0 && d->wait_event)
        rc = gg_event_lookup(core, s, d->wait_event, &t.wait_ev, &err);
    if (rc == 0 && d->signal_event)
        rc = gg_event_lookup(core, s, d->signal_event, &t.signal_ev, &err);
    if (rc < 0) {
        core->stats.errors++;
        s->errors++;
        gg_metrics_error(&core->stats.metrics, rc);
        gg_core_unlock(core);
        fp_fail(sl, rc, "%s", msg);
        return;
    }
    core->stats.fastpath_replays++;
    gg_cache_entry *e = gg_replay_hit(core, s, &t);
    if (!e) {
        fp_to_executor(sl, &t);
        gg_core_unlock(core);
        return;
    }
    /* Pinned until the device is done; the session's stream is ours until
     * the launch is enqueued (a socket job queues behind s->launching). */
    gg_store_seq_cst(&sl->released, 0);
    sl->entry = e;
    sl->prog = t.prog;
    sl->wait_ev = t.wait_ev;
    sl->signal_ev = t.signal_ev;
    sl->bucket = (uint32_t)e->bucket;
    gg_cache_pin(core->cache, e);
    t.prog->pins++;
    if (t.wait_ev)
        t.wait_ev->users++;
    if (t.signal_ev)
        t.signal_ev->users++;
    s->launching = true;
    gg_dev_stream *st = s->stream;
    gg_dev_exec *x = e->exec;
    gg_core_unlock(core);

    char why[160];
    int how = fp_hit_launch(sl, st, x, &rc, why, sizeof(why));

    gg_core_lock(core);
    s->launching = false;
    if (how != GG_HIT_LAUNCHED) {
        gg_store_seq_cst(&sl->released, 1);
        fp_hit_release(sl, false, 0.0);
        /* Nothing of the graph ran: the executor takes it from here, with
         * its eager fallback.  Else it may have run in part: it fails, as a
         * socket replay's would, and is not run again. */
        if (how == GG_HIT_NOT_RUN) {
            fp_to_executor(sl, &t);
        } else {
            core->stats.errors++;
            s->errors++;
            gg_metrics_error(&core->stats.metrics, rc);
        }
    }
    gg_exec_kick(core->exec, s);
    gg_core_unlock(core);
    if (how == GG_HIT_FAILED) {
        fp_fail(sl, rc, "%s", why);
        if (rc == -ENODEV)
            uv_async_send(&r->m->async);   /* the loop reports the device lost */
    }
}

/* ---- the thread ------------------------------------------------------------ */

/* Core lock held: release the hits of r whose completion word the device
 * has written; their callbacks then only free the slots. */
static void fp_collect_region(gg_fp_region *r)
{
    if (!gg_load_acquire(&r->gpu_pending))
        return;
    uint64_t now = gg_now_us();
    for (uint32_t i = 0; i < r->entries; i++) {
        gg_fp_slot *sl = &r->slots[i];
        if (!gg_load_acquire(&sl->gpu_pending) ||
            gg_load_relaxed(&sl->released))
            continue;
        uint64_t seq = gg_load_acquire(&fp_cqe(sl)->seq);
        if (seq == sl->seq && !gg_exchange_seq_cst(&sl->released, 1))
            fp_hit_release(sl, true, (double)(now - sl->t_launch_us));
    }
}

/* A device-written completion the device never wrote: the slot's work is
 * past FP_GPU_CHECK_US.  Ask the stream (only while no other thread may use
 * it: no job of the session running, under the core lock): still busy is a
 * long graph; an error or an idle stream without the word fails the record. */
static void fp_check_stuck(gg_fp_region *r)
{
    gg_core *core = r->core;
    gg_device *dev = core->dev;
    gg_session *s = r->sess;
    gg_core_lock(core);
    if (gg_session_stream_held(s) || !s->stream) {
        gg_core_unlock(core);
        return;
    }
    int rc = dev->ops->stream_query(dev, s->stream);
    gg_core_unlock(core);
    if (rc == -EBUSY)
        return;
    const char *why = rc < 0 ? dev->ops->last_error(dev)
                             : "the device finished the work but wrote no completion";
    for (uint32_t i = 0; i < r->entries; i++) {
        gg_fp_slot *sl = &r->slots[i];
        if (!gg_load_acquire(&sl->gpu_pending))
            continue;
        uint64_t seq = gg_load_acquire(&fp_cqe(sl)->seq);
        if (seq == sl->seq)
            continue;   /* landed meanwhile: fp_reap's next pass */
        gg_core_lock(core);
        if (!gg_exchange_seq_cst(&sl->released, 1))
            fp_hit_release(sl, false, 0.0);
        gg_metrics_error(&core->stats.metrics, rc < 0 ? rc : -EIO);
        gg_core_unlock(core);
        fp_fill(sl, rc < 0 ? rc : -EIO, 0, 0, 0.0, why);
        fp_publish(sl);
        gg_store_seq_cst(&sl->gpu_pending, 0);
        gg_fetch_sub_seq_cst(&r->gpu_pending, 1);
        fp_slot_free(sl);
    }
    fp_wake_client(r);
    if (rc == -ENODEV)
        uv_async_send(&r->m->async);   /* the loop reports the device lost */
}

/* Device-written completions: wake the client if it sleeps, release their
 * hits (unpin, count) and free their slots.  Returns whether any was new,
 * which counts as activity: the client's next descriptor usually follows
 * its completion within microseconds. */
bool gg_fp_reap(gg_fp_region *r)
{
    if (!gg_load_relaxed(&r->gpu_pending))
        return false;
    bool any = false, late = false;
    uint64_t now = 0;
    for (uint32_t i = 0; i < r->entries; i++) {
        gg_fp_slot *sl = &r->slots[i];
        if (!gg_load_acquire(&sl->gpu_pending))
            continue;
        uint64_t seq = gg_load_acquire(&fp_cqe(sl)->seq);
        if (seq == sl->seq) {
            any = true;
        } else {
            if (!now)
                now = gg_now_us();
            late |= now - sl->t_launch_us > FP_GPU_CHECK_US;
        }
    }
    if (any) {
        fp_wake_client(r);
        gg_core_lock(r->core);
        fp_collect_region(r);
        gg_core_unlock(r->core);
        for (uint32_t i = 0; i < r->entries; i++) {
            gg_fp_slot *sl = &r->slots[i];
            if (!gg_load_acquire(&sl->gpu_pending) ||
                !gg_load_acquire(&sl->released))
                continue;
            gg_store_seq_cst(&sl->gpu_pending, 0);
            gg_fetch_sub_seq_cst(&r->gpu_pending, 1);
            fp_slot_free(sl);
        }
    }
    if (late && now - r->checked_us > FP_GPU_CHECK_US) {
        r->checked_us = now;
        fp_check_stuck(r);
    }
    return any;
}

void gg_fp_collect(gg_fp_module *m, gg_session *s)
{
    for (gg_fp_region *r = m ? m->regions : NULL; r; r = r->next)
        if (!s || r->sess == s)
            fp_collect_region(r);
}

/* Copy a descriptor out of shared memory once, word by word: the client may
 * be rewriting it; only the copy is looked at. */
static void fp_copy_sqe(gg_fp_sqe *dst, const gg_fp_sqe *src)
{
    uint64_t w[GG_FP_SQE_SIZE / 8];
    const uint64_t *p = (const uint64_t *)src;
    for (size_t i = 0; i < GG_FP_SQE_SIZE / 8; i++)
        w[i] = gg_load_relaxed(&p[i]);
    memcpy(dst, w, sizeof(*dst));
}

/* Nothing to take: spin for spin_us after the last activity, then sleep on
 * sq_wake.  *last is the time of the last activity. */
static void fp_idle(gg_fp_region *r, uint64_t *last, unsigned *empty_wakes)
{
    gg_fp_header *h = r->hdr;
    uint64_t now = gg_now_us();
    /* While the device runs this ring's work, keep watching (up to a cap):
     * the client's next descriptor comes right after the completion, and a
     * thread asleep by then costs it a futex wake and a wake-up. */
    bool running = fp_spin_us(r) &&
                   gg_load_relaxed(&r->gpu_pending) &&
                   now - *last < FP_PENDING_SPIN_MAX_US;
    bool want = running || now - *last < fp_spin_us(r);
    if (want && !r->spinning) {
        if (gg_fetch_add_seq_cst(&r->m->spinners, 1) < r->m->max_spinners)
            r->spinning = true;
        else
            gg_fetch_sub_seq_cst(&r->m->spinners, 1);
    }
    if (want && r->spinning) {
        /* Spin, but give the CPU away every few microseconds: where the
         * client (or another ring) needs this core, it gets it at once
         * instead of after our whole spin; on an idle core the yield
         * returns at once. */
        /* One pause per look at sq_tail: a pause is ~140 cycles on recent
         * Xeons, so a longer burst between looks would delay the pickup by
         * microseconds.  A yield every 256 looks (~15 us) shares the core. */
        gg_cpu_pause();
        if (++r->spins % 256 == 0)
            sched_yield();
        return;
    }
    if (r->spinning) {
        r->spinning = false;
        gg_fetch_sub_seq_cst(&r->m->spinners, 1);
    }
    gg_store_seq_cst(&h->sq_sleeping, 1);
    uint32_t w = gg_load_seq_cst(&h->sq_wake);
    uint32_t tail = gg_load_seq_cst(&h->sq_tail);
    bool timed_out = false;
    if (tail == (uint32_t)r->head && !gg_load_seq_cst(&r->quit)) {
        /* a timeout bounds how long a quit that races the sleep waits; with
         * device-written completions in flight, how late a sleeping client
         * is woken (gg_fp_reap) */
        struct timespec tmo = {.tv_sec = 1};
        if (gg_load_relaxed(&r->gpu_pending))
            tmo = (struct timespec){.tv_nsec = 50000};
        timed_out = gg_fp_futex_wait(&h->sq_wake, w, &tmo) < 0 && errno == ETIMEDOUT;
    }
    gg_store_relaxed(&h->sq_sleeping, 0);
    tail = gg_load_acquire(&h->sq_tail);
    if (timed_out && tail == (uint32_t)r->head) {
        *last = 0;   /* nothing new: straight back to sleep */
    } else if (tail == (uint32_t)r->head) {
        /* woken with nothing to do: go straight back to sleep next time,
         * and after a few in a row pause, so a client that keeps bumping
         * sq_wake burns none of the daemon's CPU */
        if (++*empty_wakes > 2) {
            struct timespec pause = {.tv_nsec = 200000};
            nanosleep(&pause, NULL);
        }
        *last = 0;
    } else {
        *empty_wakes = 0;
        *last = gg_now_us();
    }
}

/* The next slot is still busy (its last run in flight, or done by the
 * device and not reaped): nothing wakes us when it frees, so look again
 * after a pause.  Within fastpath-spin-us of activity, pause the CPU only;
 * after it, sleep, each sleep twice the last up to FP_BUSY_SLEEP_MAX_US, so
 * a long run costs a few wake-ups a millisecond, not a core. */
static void fp_busy_wait(gg_fp_region *r, uint64_t last, unsigned *sleep_us)
{
    if (gg_now_us() - last <= fp_spin_us(r)) {
        gg_cpu_pause();
        return;
    }
    *sleep_us = *sleep_us ? *sleep_us * 2 : FP_BUSY_SLEEP_MIN_US;
    if (*sleep_us > FP_BUSY_SLEEP_MAX_US)
        *sleep_us = FP_BUSY_SLEEP_MAX_US;
    struct timespec ts = {.tv_nsec = (long)*sleep_us * 1000};
    nanosleep(&ts, NULL);
}

/* The ring is beyond use: closed, the session stays on its socket. */
static void fp_broken(gg_fp_region *r, const char *why, uint32_t tail)
{
    gg_log_fields f = {.session = r->sess->id};
    GG_LOG(GG_LOG_WARN, &f, "fast path closed: %s (sq_tail %u, sq_head %u, %u entries)", why,
           tail, (uint32_t)r->head, r->entries);
    gg_store_seq_cst(&r->quit, 1);
}

void *gg_fp_thread_main(void *arg)
{
    gg_fp_region *r = arg;
    gg_fp_header *h = r->hdr;
    uint64_t last = gg_now_us();
    unsigned empty_wakes = 0, busy_sleep_us = 0;
    while (!gg_load_relaxed(&r->quit)) {
        uint32_t tail = gg_load_acquire(&h->sq_tail);
        uint32_t avail = tail - (uint32_t)r->head;
        if (avail == 0) {
            /* Bookkeeping only when there is nothing to take: a client's
             * next descriptor follows its completion within a microsecond,
             * and the launch is what it waits for. */
            if (gg_fp_reap(r))
                last = gg_now_us();
            else
                fp_idle(r, &last, &empty_wakes);
            continue;
        }
        if (avail > r->entries) {
            fp_broken(r, "sq_tail is more than entries ahead of sq_head", tail);
            break;
        }
        uint64_t seq = r->head + 1;
        gg_fp_slot *sl = &r->slots[(seq - 1) & r->mask];
        if (gg_load_acquire(&sl->busy)) {
            /* the slot's last descriptor is in flight, or done by the
             * device and not yet reaped */
            if (gg_fp_reap(r)) {
                busy_sleep_us = 0;
                continue;
            }
            fp_busy_wait(r, last, &busy_sleep_us);
            continue;
        }
        busy_sleep_us = 0;
        gg_fp_sqe d;
        fp_copy_sqe(&d, &r->sq[sl->index]);
        r->head = seq;
        sl->seq = seq;
        gg_store_relaxed(&sl->busy, 1);
        fp_take(r, sl, &d);
        /* after fp_take: the descriptor now has its place in the session's
         * order (launched, queued or answered), so a client that sees
         * sq_head pass it knows a socket request it sends next comes after */
        gg_store_release(&h->sq_head, (uint32_t)seq);
        last = gg_now_us();
        empty_wakes = 0;
    }
    if (r->spinning) {
        r->spinning = false;
        gg_fetch_sub_seq_cst(&r->m->spinners, 1);
    }
    gg_fp_region_end(r);
    return NULL;
}
