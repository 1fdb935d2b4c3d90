/* The daemon's event loop: the listening socket, connections, signals and
 * orderly shutdown.  Everything here runs on the loop thread. */
#ifndef GG_SERVER_H
#define GG_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <msgpack.h>
#include <uv.h>

#include "config.h"
#include "device.h"
#include "idmap.h"
#include "stats.h"

struct gg_conn;
struct gg_session;
struct gg_exec;
struct gg_cache;

/* Exit codes of gfxgraphd. */
enum {
    GG_EXIT_OK = 0,
    GG_EXIT_FAILURE = 1,      /* could not start: socket, device, another daemon */
    GG_EXIT_USAGE = 2,        /* bad flag, environment or config value */
    GG_EXIT_DEVICE_LOST = 3,  /* sticky device error while serving */
    GG_EXIT_STOP_FORCED = 4,  /* a second SIGTERM/SIGINT, or device work that
                                 outlasted the stop's time limit */
};

/* After shutdown-timeout-ms, device work still running gets this long
 * again, at most this much, before the daemon exits without it. */
#define GG_STOP_GRACE_MAX_MS 5000

typedef struct gg_server {
    uv_loop_t *loop;
    gg_config cfg;
    gg_device *dev;
    gg_device_info devinfo;
    char backend[8];                /* "cpu" | "hip" */

    uv_pipe_t listener;
    bool listening;
    bool activated;                 /* the socket came from systemd */
    bool bound;                     /* we bound socket_path: ours to unlink */
    uv_signal_t sigterm, sigint;
    uv_timer_t shutdown_timer;
    uv_timer_t tick;                /* cache idle eviction, STATUS=, watchdog */
    uint64_t watchdog_usec;

    struct gg_conn *conns;          /* list */
    unsigned nconns;
    uint64_t sessions_total;
    uint64_t next_id;               /* buffer / program ids, unique daemon-wide */
    gg_idmap buffers;               /* id -> gg_buffer */
    gg_idmap programs;              /* id -> gg_program */
    gg_idmap events;                /* id -> gg_event */

    struct gg_exec *exec;
    struct gg_cache *cache;
    gg_stats stats;
    uint64_t started_ms;
    uint64_t replays_at_last_status;
    uint64_t last_status_ms;

    bool stopping;
    bool device_lost;
    int exit_code;
    char unhealthy_reason[256];
} gg_server;

int gg_server_init(gg_server *srv, const gg_config *cfg, char *err, size_t errlen);
/* Serve until SIGTERM/SIGINT or a lost device; returns the exit code. */
int gg_server_run(gg_server *srv);
void gg_server_fini(gg_server *srv);
/* Begin an orderly stop: stop accepting, finish in-flight work, close. */
void gg_server_stop(gg_server *srv, int exit_code);
/* A sticky device error: mark unhealthy, log, and stop with
 * GG_EXIT_DEVICE_LOST. */
void gg_server_device_lost(gg_server *srv, const char *why);
uint64_t gg_now_ms(void);
uint64_t gg_now_us(void);

/* ---- connections (conn.c) ---- */
int gg_conn_accept(gg_server *srv);
/* Graceful close: flush what is queued, then close. */
void gg_conn_close(struct gg_conn *c);
/* Queue bytes taken from sb (sb is reset); false if the connection is gone. */
bool gg_conn_send(struct gg_conn *c, msgpack_sbuffer *sb);
/* A request finished (replied to or dropped). */
void gg_conn_request_done(struct gg_conn *c);
/* Close every connection as part of a stop; idle ones at once. */
void gg_conn_stop_all(gg_server *srv);
void gg_conn_force_close_all(gg_server *srv);
struct gg_session *gg_conn_session(struct gg_conn *c);
struct gg_conn *gg_conn_next(struct gg_conn *c);

/* ---- systemd glue (notify.c) ---- */
void gg_notify_ready(gg_server *srv);
void gg_notify_status(gg_server *srv);
void gg_notify_stopping(gg_server *srv);
/* Watchdog interval from WATCHDOG_USEC (for this pid); 0 when disabled. */
uint64_t gg_notify_watchdog_usec(void);
void gg_notify_watchdog(gg_server *srv);
/* A listening socket passed by systemd (LISTEN_FDS), or -1. */
int gg_notify_listen_fd(char *err, size_t errlen);

#endif
