/* SPDX-License-Identifier: MIT */
/* The daemon's event loop: the listening socket, connections, signals and
 * orderly shutdown.  Everything here runs on the loop thread. */
#ifndef GG_SERVER_H
#define GG_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/config.h"
#include "core/core.h"
#include "rpc/conn.h"

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

/* Owns the core and the transports and wires them together: the core's
 * hooks land here, and a stop waits for every transport and the core. */
typedef struct gg_server {
    uv_loop_t *loop;
    gg_config cfg;
    gg_core core;
    gg_rpc rpc;
    struct gg_fp_module *fp;        /* the shared-memory transport */
    gg_rpc_fastpath rpc_fp;         /* how rpc/ reaches it */

    uv_pipe_t listener;
    bool listening;
    bool activated;                 /* the socket came from systemd */
    bool bound;                     /* we bound socket_path: ours to unlink */
    uv_signal_t sigterm, sigint, sighup;
    gg_config loaded;               /* as last loaded (socket before systemd's name) */
    uv_timer_t shutdown_timer;
    uv_timer_t tick;                /* cache idle eviction, STATUS=, watchdog */
    uint64_t watchdog_usec;

    uint64_t replays_at_last_status;
    uint64_t last_status_ms;
    uint64_t fd_warned_ms;          /* last "out of descriptors" warning */
    int exit_code;
} gg_server;

/* The command line a reload (SIGHUP) loads the settings from again. */
void gg_server_set_args(int argc, char **argv);
int gg_server_init(gg_server *srv, const gg_config *cfg, char *err, size_t errlen);
/* Serve until SIGTERM/SIGINT or a lost device; returns the exit code. */
int gg_server_run(gg_server *srv);
void gg_server_fini(gg_server *srv);
/* Begin an orderly stop: stop accepting, finish in-flight work, close. */
void gg_server_stop(gg_server *srv, int exit_code);

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
