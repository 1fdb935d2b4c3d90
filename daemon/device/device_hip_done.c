/* SPDX-License-Identifier: MIT */
/* The hip backend's completion: how the loop learns that a stream's work is
 * done, without ever blocking it.
 *
 * Happy path: notify() records an event behind the work (or, with
 * completion = hostfn, enqueues a host function), and the polling thread
 * calls the job's done function from off the loop once the event has
 * completed; the executor hands it to the loop (exec.c).
 *
 * Failure modes: a failed stream shows as an error from hipEventQuery, which
 * is passed to the done function (a sticky one marks the device lost,
 * hipdev_fail); a host function behind a faulted stream may never run,
 * which is one reason polling is the default. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "device/device_hip.h"

/* ---- completion ------------------------------------------------------------
 * Two ways to learn that a stream has drained, measured against each other
 * on the H100 (bench/bench_replay, see the README): a host function enqueued
 * behind the work, or an event recorded behind it and watched by a polling
 * thread.  Polling is the default: it is faster there, and it sees a failed
 * stream as an error from hipEventQuery, where a host function behind a
 * faulted stream may never run. */

static void hip_hostfn_done(void *arg)
{
    hip_wait *w = arg;
    w->fn(w->arg, 0);
    free(w);
}

/* While work is in flight the poller yields between passes for this long
 * after the last completion or new work (a decode step finishes well inside
 * it, and its completion is seen at once), then sleeps briefly between
 * passes, so that a long job (a prefill, a large batch) does not keep a host
 * core busy; the sleep adds at most about its length to such a job.  The
 * first bounds the CPU a poll costs, the second how late a long job's end
 * is seen (bench/bench_replay measures both). */
#define HIP_POLL_SPIN_US 1000
#define HIP_POLL_SLEEP_US 20

static void *hip_poller_main(void *arg)
{
    gg_device *dev = arg;
    hip_priv *p = hip_p(dev);
    hipdev_bind(dev);
    uint64_t last_progress = 0;
    int kept = 0;   /* waits still pending after the last pass */
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->waits && !p->quit)
            pthread_cond_wait(&p->poll_cond, &p->lock);
        if (!p->waits && p->quit)
            break;
        /* take the list, query without the lock */
        hip_wait *list = p->waits;
        p->waits = NULL;
        pthread_mutex_unlock(&p->lock);
        hip_wait *keep = NULL, **tail = &keep;
        int taken = 0, pending = 0;
        bool any = false;
        while (list) {
            hip_wait *w = list;
            list = w->next;
            taken++;
            hipError_t e = hipEventQuery(w->ev);
            if (e == hipErrorNotReady) {
                w->next = NULL;
                *tail = w;
                tail = &w->next;
                pending++;
                continue;
            }
            any = true;
            int status = 0;
            if (e != hipSuccess)
                status = hipdev_fail(dev, e, "stream work");
            w->fn(w->arg, status);
            pthread_mutex_lock(&p->lock);
            w->next = p->free_waits;
            p->free_waits = w;
            pthread_mutex_unlock(&p->lock);
        }
        /* new work or a completion restarts the spinning phase */
        uint64_t now = gg_now_us();
        if (any || taken > kept)
            last_progress = now;
        kept = pending;
        if (pending && now - last_progress < HIP_POLL_SPIN_US)
            sched_yield();
        else if (pending)
            usleep(HIP_POLL_SLEEP_US);
        pthread_mutex_lock(&p->lock);
        /* put the unfinished ones back in front of newcomers */
        if (keep) {
            *tail = p->waits;
            p->waits = keep;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int hipdev_notify(gg_device *dev, gg_dev_stream *s, gg_done_fn fn, void *arg)
{
    hip_priv *p = hip_p(dev);
    hip_wait *w = NULL;
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    if (p->notify == HIP_NOTIFY_HOSTFN) {
        w = malloc(sizeof(*w));
        if (!w)
            return -ENOMEM;
        w->fn = fn;
        w->arg = arg;
        hipError_t e = hipLaunchHostFunc(s->s, hip_hostfn_done, w);
        if (e != hipSuccess) {
            free(w);
            return hipdev_fail(dev, e, "hipLaunchHostFunc");
        }
        return 0;
    }
    pthread_mutex_lock(&p->lock);
    if (p->free_waits) {
        w = p->free_waits;
        p->free_waits = w->next;
    }
    pthread_mutex_unlock(&p->lock);
    if (!w) {
        w = calloc(1, sizeof(*w));
        if (!w)
            return -ENOMEM;
        hipError_t e = hipEventCreateWithFlags(&w->ev, hipEventDisableTiming);
        if (e != hipSuccess) {
            free(w);
            return hipdev_fail(dev, e, "hipEventCreateWithFlags");
        }
    }
    w->fn = fn;
    w->arg = arg;
    hipError_t e = hipEventRecord(w->ev, s->s);
    if (e != hipSuccess) {
        hipEventDestroy(w->ev);
        free(w);
        return hipdev_fail(dev, e, "hipEventRecord");
    }
    pthread_mutex_lock(&p->lock);
    w->next = p->waits;
    p->waits = w;
    pthread_mutex_unlock(&p->lock);
    pthread_cond_signal(&p->poll_cond);   /* after unlocking: the poller need not wait for it */
    return 0;
}

int hipdev_completion_start(gg_device *dev)
{
    hip_priv *p = hip_p(dev);
    if (p->notify != HIP_NOTIFY_POLL)
        return 0;
    if (pthread_create(&p->poller, NULL, hip_poller_main, dev) != 0)
        return -EAGAIN;
    p->poller_started = true;
    return 0;
}

void hipdev_completion_stop(gg_device *dev)
{
    hip_priv *p = hip_p(dev);
    if (p->poller_started) {
        pthread_mutex_lock(&p->lock);
        p->quit = true;
        pthread_cond_signal(&p->poll_cond);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->poller, NULL);
        p->poller_started = false;
    }
    hipdev_bind(dev);
    while (p->free_waits) {
        hip_wait *w = p->free_waits;
        p->free_waits = w->next;
        hipEventDestroy(w->ev);
        free(w);
    }
}
