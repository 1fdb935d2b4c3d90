/* SPDX-License-Identifier: MIT */
/* The core: the state every transport shares (device, ids, sessions'
 * objects, the graph cache, the executor, counters), without knowing how
 * requests arrive or how answers leave.  A transport (rpc/, fastpath/)
 * makes sessions, queues jobs with gg_exec_queue and answers them from the
 * job's ops->done; app/ owns the core and reacts to its hooks.
 *
 * Dependencies: device/, base/ (settings and logging), kernels/ops.h, libuv
 * (the executor's uv_async hand-back to the loop thread) and proto/proto.h,
 * the shared wire vocabulary: error codes and proto_errbuf/proto_fail for the
 * messages a client reads.  Requests arrive as C structs (rpc/ decodes
 * them); nothing here packs a reply or writes to a socket.  Bringing the
 * device, the cache and the executor up and down: lifecycle.h. */
#ifndef GG_CORE_H
#define GG_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/config.h"
#include "core/idmap.h"
#include "core/stats.h"
#include "device/device.h"

struct gg_exec;
struct gg_cache;
typedef struct gg_core gg_core;

/* Set by whoever owns the core (app/server.c): what the process does about
 * events the core cannot handle on its own.  Called on the loop thread. */
typedef struct gg_core_hooks {
    /* A sticky device error (core->device_lost and unhealthy_reason are
     * already set): stop so the service manager restarts the daemon. */
    void (*device_lost)(gg_core *core, const char *why);
    /* While stopping, something the stop waits on ended (a job, a
     * connection): see whether the loop can end now. */
    void (*maybe_stopped)(gg_core *core);
} gg_core_hooks;

struct gg_session;

/* A transport's part in the core's events, so that no transport calls
 * another: each registers one (gg_core_add_transport) and the core calls
 * every one.  Any member may be NULL. */
typedef struct gg_transport_ops {
    void *ctx;
    /* s's (NULL: every session's) replays whose completion the client has
     * already been told without a callback (a record the device wrote):
     * count and unpin them now, so that a request sent on seeing one finds
     * the replay finished.  Core lock held. */
    void (*settle)(void *ctx, struct gg_session *s);
    /* s's client is going: take no more of its requests; what is in flight
     * ends as it would.  Core lock held. */
    void (*session_closing)(void *ctx, struct gg_session *s);
} gg_transport_ops;

#define GG_MAX_TRANSPORTS 4

struct gg_core {
    uv_loop_t *loop;
    const gg_config *cfg;           /* the owner's; outlives the core */
    gg_device *dev;
    gg_device_info devinfo;
    char backend[8];                /* "cpu" | "hip" */

    uint64_t next_id;               /* buffer / program / event ids, unique daemon-wide */
    uint64_t sessions_total;
    unsigned defines_checking;      /* program.define requests being checked off the loop */
    gg_idmap buffers;               /* id -> gg_buffer */
    gg_idmap programs;              /* id -> gg_program */
    gg_idmap events;                /* id -> gg_event */

    struct gg_exec *exec;
    struct gg_cache *cache;
    gg_stats stats;
    uint64_t started_ms;
    double started_unix;            /* the wall clock then (enabled_at), read once */

    /* Frees device objects off the loop (freeing may wait for the whole
     * device): the executor's release queue, set by gg_core_start.  The
     * parts below the executor (the cache, sessions) hand theirs here; any
     * of the three may be NULL. */
    void (*release)(struct gg_core *core, gg_dev_exec *graph, uint8_t *scratch,
                    gg_dev_stream *stream);
    bool stopping;                  /* set by the owner when a stop begins */
    bool device_lost;
    char unhealthy_reason[256];
    gg_core_hooks hooks;
    gg_transport_ops transports[GG_MAX_TRANSPORTS];
    unsigned ntransports;

    /* Whoever holds it owns everything above and the sessions, programs
     * and cache entries: the loop takes it in every callback, the fast
     * path's region threads and the executor's workers to look up, pin,
     * count or start a session's next job.  Device calls are made outside
     * it (docs/architecture.md). */
    pthread_mutex_t lock;
};

/* The state alone: ids, maps, the lock.  Cannot fail, so the owner may
 * refuse to start (another daemon) before touching the device. */
void gg_core_init(gg_core *core, uv_loop_t *loop, const gg_config *cfg);
/* The state's maps and lock, after gg_core_teardown (lifecycle.h). */
void gg_core_fini(gg_core *core);
/* Mark the device lost (once) and tell the owner. */
void gg_core_device_lost(gg_core *core, const char *why);
/* A device error seen on this thread by any entry: the same as above. */
void gg_core_check_device(gg_core *core);
/* While stopping: tell the owner that something it waits on has ended. */
void gg_core_maybe_stopped(gg_core *core);

/* Register a transport's part (before the loop runs); -ENOSPC past
 * GG_MAX_TRANSPORTS. */
int gg_core_add_transport(gg_core *core, const gg_transport_ops *t);
/* The transport registered with ctx goes (before it is freed). */
void gg_core_del_transport(gg_core *core, const void *ctx);
/* Every transport's settle / session_closing (core lock held). */
void gg_core_settle(gg_core *core, struct gg_session *s);
void gg_core_session_closing(gg_core *core, struct gg_session *s);

void gg_core_lock(gg_core *core);
void gg_core_unlock(gg_core *core);
/* true when taken; false at once when another thread holds it */
bool gg_core_trylock(gg_core *core);

#endif
