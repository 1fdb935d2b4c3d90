/* SPDX-License-Identifier: MIT */
/* systemd glue: readiness, status, watchdog, socket activation.  Every call
 * is a no-op outside systemd (sd_notify without NOTIFY_SOCKET does nothing). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "core/cache.h"
#include "base/clock.h"
#include "base/log.h"
#include "app/server.h"

void gg_notify_ready(gg_server *srv)
{
    /* Called once the socket listens and the device is open. */
    char status[512];
    snprintf(status, sizeof(status), "READY=1\nSTATUS=serving on %s (backend %s, %s)",
             srv->cfg.socket_path, srv->core.backend, srv->core.devinfo.name);
    sd_notify(0, status);
    srv->last_status_ms = gg_now_ms();
    srv->replays_at_last_status = 0;
}

/* Called from the loop's tick (every second, or every half watchdog
 * interval when that is shorter).  The rate is measured over windows of at
 * least a second, and a STATUS= line is sent only when its text changed, so
 * an idle daemon with a fast watchdog does not flood the service manager. */
#define GG_NOTIFY_STATUS_MIN_MS 1000

void gg_notify_status(gg_server *srv)
{
    static char last[256];
    uint64_t now = gg_now_ms();
    if (now - srv->last_status_ms < GG_NOTIFY_STATUS_MIN_MS)
        return;
    uint64_t replays = srv->core.stats.replay_count + srv->core.stats.eager_count;
    double secs = (double)(now - srv->last_status_ms) / 1000.0;
    double rate = secs > 0 ? (double)(replays - srv->replays_at_last_status) / secs : 0.0;
    char status[256];
    snprintf(status, sizeof(status),
             "STATUS=%s: %u session(s), %u graph(s) cached, %.1f replays/s, %llu fallback(s)",
             srv->core.stopping ? "stopping" : "serving", srv->rpc.nconns, gg_cache_count(srv->core.cache),
             rate, (unsigned long long)srv->core.stats.fallback_count);
    srv->last_status_ms = now;
    srv->replays_at_last_status = replays;
    if (strcmp(status, last) == 0)
        return;
    snprintf(last, sizeof(last), "%s", status);
    sd_notify(0, status);
}

void gg_notify_stopping(gg_server *srv)
{
    (void)srv;
    sd_notify(0, "STOPPING=1\nSTATUS=stopping: finishing requests in flight");
}

/* WATCHDOG_USEC, when WATCHDOG_PID is unset or names this process; the
 * server pings from its tick timer, whose period is at most half of it. */
uint64_t gg_notify_watchdog_usec(void)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
        return 0;
    uint64_t half_ms = usec / 2000;
    gg_info("watchdog enabled: interval %llu ms, WATCHDOG=1 at least every %llu ms",
            (unsigned long long)(usec / 1000),
            (unsigned long long)(half_ms == 0 ? 1 : half_ms < 1000 ? half_ms : 1000));
    return usec;
}

void gg_notify_watchdog(gg_server *srv)
{
    (void)srv;
    /* Sent from the loop's own timer: a wedged loop stops the pings. */
    sd_notify(0, "WATCHDOG=1");
}

int gg_notify_listen_fd(char *err, size_t errlen)
{
    int n = sd_listen_fds(1);
    if (n <= 0)
        return -1;
    if (n > 1) {
        snprintf(err, errlen, "systemd passed %d sockets; gfxgraphd serves exactly one", n);
        return -2;
    }
    int fd = SD_LISTEN_FDS_START;
    if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
        snprintf(err, errlen, "the socket passed by systemd is not a listening Unix stream socket");
        return -2;
    }
    return fd;
}
