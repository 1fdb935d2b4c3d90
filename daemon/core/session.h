/* SPDX-License-Identifier: MIT */
/* A session is one client connection's state: who it is, what it registered
 * and defined, its device stream and its queue of replays.  It is
 * reference-counted: the connection holds one reference and every job in
 * flight holds one, so a client that disconnects mid-replay leaves its
 * buffers mapped until the device is done with them. */
#ifndef GG_SESSION_H
#define GG_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/list.h"
#include "device/device.h"

struct gg_core;
struct gg_job;

typedef struct gg_session {
    uint64_t id;
    int refs;
    struct gg_core *core;
    /* The transport's handle for this client (rpc: its gg_conn), opaque to
     * the core; NULL once the client has gone. */
    void *transport;
    char client[64];                /* from hello */
    bool said_hello;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    uint64_t connected_ms;

    gg_list buffers;                /* gg_buffer.sess_link */
    gg_list programs;               /* gg_program.sess_link */
    gg_list events;                 /* gg_event.sess_link */
    gg_dev_stream *stream;          /* created on first use */
    /* The stream takes the session's work in the order its requests were
     * taken: one holder at a time puts work on it (gg_session_stream_held),
     * the job `running` from its start until its work is enqueued (a
     * worker's run or the loop's hit), or a transport's own thread while it
     * launches a cache hit (`launching`); what comes meanwhile waits in
     * `jobs`, started in order as the holder lets go (core lock, all). */
    gg_list jobs;                   /* queued, not yet running (gg_job.link) */
    struct gg_job *running;
    /* A cache hit is being launched on the stream outside the executor
     * (by a transport's own thread): jobs queue behind it (core lock). */
    bool launching;
    /* Requests taken off the loop (a ring thread's descriptors) and not
     * yet answered (atomic): a stop waits for them as for the
     * connection's own (gg_session_busy). */
    unsigned inflight;

    uint64_t requests, errors, replays, graph_replays, eager_replays;
    double replay_us_sum;
} gg_session;

gg_session *gg_session_new(struct gg_core *core, void *transport, pid_t pid, uid_t uid,
                           gid_t gid);
/* Someone is putting work on s's stream now (core lock). */
static inline bool gg_session_stream_held(const gg_session *s)
{
    return s->running || s->launching;
}

/* s has requests in flight off the loop (any thread, no lock). */
static inline bool gg_session_busy(const gg_session *s)
{
    return __atomic_load_n(&s->inflight, __ATOMIC_ACQUIRE) != 0;
}

void gg_session_ref(gg_session *s);
void gg_session_unref(gg_session *s);
int gg_session_stream(gg_session *s, gg_dev_stream **out);

#endif
