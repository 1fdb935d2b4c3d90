/* SPDX-License-Identifier: MIT */
/* The loop: listen (or adopt systemd's socket), accept, tick, stop.
 *
 * Happy path: gg_server_init checks that no other daemon serves the socket
 * path, opens the device, then binds the socket; run says READY=1 and
 * serves; SIGTERM/SIGINT stop accepting, let in-flight requests finish and
 * flush, close every handle, and uv_run returns 0.
 *
 * Failure modes: another daemon answering on the socket path, a path that
 * exists and is not a socket, or a device that will not open stop start-up
 * with one line saying so.  A stop that outlasts shutdown-timeout-ms closes
 * what is left by force; device work still running then gets a bounded
 * grace, after which the daemon exits (GG_EXIT_STOP_FORCED) naming it: a
 * job the device never finishes cannot hold the stop for ever.  A second
 * SIGTERM/SIGINT during a stop exits at once, the same way.  A lost device
 * ends the daemon with GG_EXIT_DEVICE_LOST so the service manager restarts
 * it. */
#include "app/server.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "core/cache.h"
#include "core/exec.h"
#include "core/lifecycle.h"
#include "core/session.h"
#include "fastpath/fp.h"


static int server_mkdirs(const char *dir)
{
    char tmp[GG_PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    /* the socket's own directory: private unless it already exists */
    if (mkdir(tmp, 0750) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Is a daemon answering at path?  1 yes, 0 stale or absent, <0 not a socket. */
static int server_probe(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode))
        return -EEXIST;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    close(fd);
    if (r == 0)
        return 1;
    return (e == ECONNREFUSED || e == ENOENT) ? 0 : -e;
}

/* Descriptors in use and the limit (RLIMIT_NOFILE's soft value). */
static void server_fd_usage(unsigned *used, unsigned *limit)
{
    struct rlimit rl;
    *limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                 ? (unsigned)rl.rlim_cur : 0;
    *used = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        if (errno == EMFILE || errno == ENFILE)
            *used = *limit;   /* not even one left to look with */
        return;
    }
    for (struct dirent *e; (e = readdir(d));)
        *used += e->d_name[0] != '.';
    closedir(d);
}

/* Out of descriptors, or close to it: libuv then accepts and closes new
 * connections at once (its reserve-descriptor trick), which the clients
 * see as a refusal and the daemon would not otherwise mention.  Said at
 * most once a minute, with the numbers and the setting to change. */
static void server_warn_fds(gg_server *srv, bool refused)
{
    uint64_t now = gg_now_ms();
    if (srv->fd_warned_ms && now - srv->fd_warned_ms < 60000)
        return;
    unsigned used, limit;
    if (!refused) {
        /* the tick's look: counted only once connections alone fill half */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
            (uint64_t)srv->rpc.nconns * 2 < rl.rlim_cur)
            return;
    }
    server_fd_usage(&used, &limit);
    if (!refused && (limit == 0 || used * 10 < limit * 9))
        return;
    srv->fd_warned_ms = now;
    gg_warn("%s: %u file descriptors open of a limit of %u (LimitNOFILE= in the unit, "
            "ulimit -n); new connections are refused until some close", refused
            ? "out of file descriptors accepting a connection" : "nearly out of file descriptors",
            used, limit);
}

static void server_on_connection(uv_stream_t *l, int status)
{
    gg_server *srv = l->data;
    if (status == UV_EMFILE || status == UV_ENFILE) {
        server_warn_fds(srv, true);
        return;
    }
    if (status < 0) {
        gg_warn("accept failed: %s", uv_strerror(status));
        return;
    }
    if (srv->core.stopping)
        return;
    gg_core_lock(&srv->core);
    int rc = gg_conn_accept(&srv->rpc, (uv_stream_t *)&srv->listener);
    gg_core_unlock(&srv->core);
    if (rc == -EMFILE || rc == -ENFILE)
        server_warn_fds(srv, true);
    else if (rc < 0)
        gg_warn("accept failed: %s", strerror(-rc));
}

/* Refuse a path that another daemon serves or that is not a socket.  1: a
 * stale socket is there; 0: nothing is. */
static int server_check_path(const char *path, char *err, size_t errlen)
{
    int rc = server_probe(path);
    if (rc == 1) {
        snprintf(err, errlen, "another gfxgraphd is already serving on %s", path);
        return -EADDRINUSE;
    }
    if (rc == -EEXIST) {
        snprintf(err, errlen, "%s exists and is not a socket; refusing to replace it", path);
        return rc;
    }
    return rc == 0 && access(path, F_OK) == 0 ? 1 : 0;
}

static int server_listen(gg_server *srv, int fd, char *err, size_t errlen)
{
    const char *path = srv->cfg.socket_path;
    int rc = uv_pipe_init(srv->loop, &srv->listener, 0);
    if (rc < 0)
        return rc;
    srv->listener.data = srv;
    srv->listening = true;

    if (fd >= 0) {
        if ((rc = uv_pipe_open(&srv->listener, fd)) < 0) {
            snprintf(err, errlen, "cannot use the socket passed by systemd: %s", uv_strerror(rc));
            return rc;
        }
        srv->activated = true;
        /* Report the path systemd listens on, not the configured one. */
        char name[GG_PATH_MAX];
        size_t len = sizeof(name) - 1;
        if (uv_pipe_getsockname(&srv->listener, name, &len) == 0 && len > 0 && name[0] == '/') {
            name[len] = '\0';
            snprintf(srv->cfg.socket_path, sizeof(srv->cfg.socket_path), "%s", name);
        }
    } else {
        if (!*path) {
            snprintf(err, errlen, "no socket path: the default, "
                     "$XDG_RUNTIME_DIR/gfxgraph/gfxgraphd.sock, is longer than %d bytes "
                     "here; give one with --socket or GFXGRAPH_SOCKET", GG_PATH_MAX - 1);
            return -ENAMETOOLONG;
        }
        char dir[GG_PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", path);
        if ((rc = server_mkdirs(dirname(dir))) < 0) {
            snprintf(err, errlen, "cannot create the socket directory for %s: %s", path,
                     strerror(-rc));
            return rc;
        }
        /* again: another daemon may have started while the device opened */
        if ((rc = server_check_path(path, err, errlen)) < 0)
            return rc;
        if (rc == 1 && unlink(path) < 0 && errno != ENOENT) {
            snprintf(err, errlen, "cannot remove the stale socket %s: %s", path, strerror(errno));
            return -errno;
        }
        /* umask so the socket is never briefly more open than 0660 */
        mode_t old = umask(0117);
        rc = uv_pipe_bind(&srv->listener, path);
        umask(old);
        if (rc < 0) {
            snprintf(err, errlen, "cannot bind %s: %s", path, uv_strerror(rc));
            return rc;
        }
        srv->bound = true;
        chmod(path, 0660);
    }
    rc = uv_listen((uv_stream_t *)&srv->listener, 128, server_on_connection);
    if (rc < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", path, uv_strerror(rc));
        return rc;
    }
    return 0;
}

/* Exit now, without waiting for what is still running: worker threads may
 * be stuck in the device, so nothing is joined or freed.  The socket was
 * removed when the stop began. */
_Noreturn static void server_exit_now(gg_server *srv, const char *why)
{
    char jobs[768];
    jobs[0] = '\0';
    unsigned n = srv->core.exec ? gg_exec_describe(srv->core.exec, jobs, sizeof(jobs)) : 0;
    n = gg_fp_describe(srv->fp, jobs, sizeof(jobs), n);
    int code = srv->exit_code == GG_EXIT_DEVICE_LOST ? GG_EXIT_DEVICE_LOST : GG_EXIT_STOP_FORCED;
    if (n)
        gg_error("%s: exiting (status %d) with %u job(s) unfinished: %s", why, code, n, jobs);
    else
        gg_error("%s: exiting (status %d) with %u connection(s) open", why, code, srv->rpc.nconns);
    gg_log_flush(GG_LOG_EXIT_FLUSH_MS);   /* the line above says why */
    _exit(code);
}

static void server_on_signal(uv_signal_t *h, int signum)
{
    gg_server *srv = h->data;
    const char *name = signum == SIGTERM ? "SIGTERM" : "SIGINT";
    if (srv->core.stopping) {
        char why[64];
        snprintf(why, sizeof(why), "received %s again while stopping", name);
        server_exit_now(srv, why);
    }
    gg_info("received %s: stopping (a second SIGTERM or SIGINT exits at once)", name);
    gg_core_lock(&srv->core);
    gg_server_stop(srv, GG_EXIT_OK);
    gg_core_unlock(&srv->core);
}

static int server_argc;
static char **server_argv;

void gg_server_set_args(int argc, char **argv)
{
    server_argc = argc;
    server_argv = argv;
}

/* A live change that needs more than the new value in cfg. */
static void server_apply_live(gg_server *srv, const char *key)
{
    if (strcmp(key, "log-level") == 0) {
        gg_log_init(srv->cfg.log_level, gg_log_get_target());
    } else if (strcmp(key, "fastpath-spin-us") == 0 && srv->fp) {
        gg_fp_set_spin_us(srv->fp, srv->cfg.fastpath_spin_us);
    } else if (strcmp(key, "cache-entries") == 0 || strcmp(key, "cache-idle-s") == 0) {
        gg_cache_tick(srv->core.cache, gg_now_ms());
    }
}

/* SIGHUP: load the settings again (file, environment, the same flags) and
 * apply what can change live; what cannot is logged as needing a restart
 * and keeps its running value.  A file with an error changes nothing. */
static void server_on_sighup(uv_signal_t *h, int signum)
{
    (void)signum;
    gg_server *srv = h->data;
    if (srv->core.stopping || !server_argv)
        return;
    static gg_config nc;
    char err[512] = "";
    int rc = gg_config_load(&nc, server_argc, server_argv, err, sizeof(err));
    if (rc != 0) {
        gg_error("reload (SIGHUP): %s; keeping the running settings", err[0] ? err : "failed");
        return;
    }
    const char *file = gg_config_file_path(&nc);
    unsigned applied = 0, restart = 0;
    char names[512] = "";
    size_t no = 0;
    gg_core_lock(&srv->core);
    for (int i = 0; i < GG_CFG_NKEYS; i++) {
        char was[512], now[512];
        const char *key = gg_config_key_name(i);
        gg_config_value(&srv->loaded, i, was, sizeof(was));
        gg_config_value(&nc, i, now, sizeof(now));
        if (strcmp(was, now) == 0)
            continue;
        if (gg_config_key_live(i)) {
            gg_config_copy_key(&srv->cfg, &nc, i);
            gg_config_copy_key(&srv->loaded, &nc, i);
            server_apply_live(srv, key);
            gg_info("reload: %s changed from %s to %s (%s)", key, was, now, nc.sources[i]);
            applied++;
        } else {
            gg_warn("reload: %s changed from %s to %s (%s): needs a restart; "
                    "still running with %s", key, was, now, nc.sources[i], was);
            restart++;
            if (no < sizeof(names))
                no += (size_t)snprintf(names + no, sizeof(names) - no, "%s%s", no ? ", " : "", key);
        }
    }
    gg_core_unlock(&srv->core);
    if (restart)
        gg_warn("reload of %s: %u setting(s) applied; %u need a restart (%s)", file, applied,
                restart, names);
    else
        gg_info("reload of %s: %u setting(s) applied", file, applied);
}

static void server_on_tick(uv_timer_t *t)
{
    gg_server *srv = t->data;
    gg_core_lock(&srv->core);
    gg_cache_tick(srv->core.cache, gg_now_ms());
    gg_notify_status(srv);
    gg_core_unlock(&srv->core);
    server_warn_fds(srv, false);
    if (srv->watchdog_usec)
        gg_notify_watchdog(srv);
}

/* The core's hooks: what the process does about a lost device, and the
 * stop's re-check when a job or a connection it waits on ends. */
static void server_on_device_lost(gg_core *core, const char *why)
{
    (void)why;   /* core->unhealthy_reason says it, with its prefix */
    gg_server *srv = gg_container_of(core, gg_server, core);
    gg_error("%s; stopping so the service manager can restart the daemon",
             core->unhealthy_reason);
    gg_server_stop(srv, GG_EXIT_DEVICE_LOST);
}

static void server_maybe_stopped(gg_core *core)
{
    gg_server *srv = gg_container_of(core, gg_server, core);
    gg_server_stop(srv, srv->exit_code);
}

/* rpc/ negotiates the fast path; these hand its calls to fastpath/. */
static bool server_fp_available(const void *ctx)
{
    return gg_fp_available(ctx);
}

static const char *server_fp_completion(const void *ctx)
{
    return gg_fp_completion(ctx);
}

static unsigned server_fp_regions(const void *ctx)
{
    return gg_fp_live(ctx);
}

static int server_fp_open(void *ctx, gg_session *s, uint32_t entries, int *fd, gg_fp_geom *geom,
                          proto_errbuf *err)
{
    return gg_fp_open(ctx, s, entries, fd, geom, err);
}

static void server_fp_revoke(void *ctx, gg_session *s)
{
    gg_fp_session_closed(ctx, s);
}

static bool server_fp_attached(const void *ctx, const gg_session *s)
{
    return gg_fp_attached(ctx, s);
}

int gg_server_init(gg_server *srv, const gg_config *cfg, char *err, size_t errlen)
{
    memset(srv, 0, sizeof(*srv));
    srv->cfg = *cfg;
    srv->loaded = *cfg;
    srv->loop = uv_default_loop();
    gg_core_init(&srv->core, srv->loop, &srv->cfg);
    srv->core.hooks.device_lost = server_on_device_lost;
    srv->core.hooks.maybe_stopped = server_maybe_stopped;
    gg_rpc_init(&srv->rpc, &srv->core);

    /* An accidental second start is refused before it touches the device:
     * opening a GPU can take seconds and disturb the one in use. */
    int fd = gg_notify_listen_fd(err, errlen);
    if (fd == -2)
        return -EINVAL;
    int rc;
    if (fd < 0 && (rc = server_check_path(srv->cfg.socket_path, err, errlen)) < 0)
        return rc;

    if ((rc = gg_core_start(&srv->core, err, errlen)) < 0)
        return rc;
    gg_fp_settings fps = {.enabled = srv->cfg.fastpath, .spin_us = srv->cfg.fastpath_spin_us,
                          .max_regions = srv->cfg.fastpath_max_regions,
                          .completion = srv->cfg.fastpath_completion};
    if ((rc = gg_fp_module_new(&srv->core, srv->loop, &fps, &srv->fp)) < 0) {
        snprintf(err, errlen, "cannot start the fast path: %s", strerror(-rc));
        return rc;
    }
    srv->rpc_fp = (gg_rpc_fastpath){
        .ctx = srv->fp, .available = server_fp_available, .completion = server_fp_completion,
        .regions = server_fp_regions, .open = server_fp_open,
        .revoke = server_fp_revoke, .attached = server_fp_attached,
    };
    srv->rpc.fp = &srv->rpc_fp;
    if ((rc = server_listen(srv, fd, err, errlen)) < 0)
        return rc;

    uv_signal_init(srv->loop, &srv->sigterm);
    uv_signal_init(srv->loop, &srv->sigint);
    srv->sigterm.data = srv->sigint.data = srv;
    uv_signal_start(&srv->sigterm, server_on_signal, SIGTERM);
    uv_signal_start(&srv->sigint, server_on_signal, SIGINT);
    uv_signal_init(srv->loop, &srv->sighup);
    srv->sighup.data = srv;
    uv_signal_start(&srv->sighup, server_on_sighup, SIGHUP);
    uv_timer_init(srv->loop, &srv->shutdown_timer);
    srv->shutdown_timer.data = srv;

    /* Watchdog pings at half the interval; status and idle eviction ride
     * on the same timer. */
    srv->watchdog_usec = gg_notify_watchdog_usec();
    uint64_t period = 1000;
    if (srv->watchdog_usec && srv->watchdog_usec / 2000 < period)
        period = srv->watchdog_usec / 2000 ? srv->watchdog_usec / 2000 : 1;
    uv_timer_init(srv->loop, &srv->tick);
    srv->tick.data = srv;
    uv_timer_start(&srv->tick, server_on_tick, period, period);
    return 0;
}

static unsigned server_grace_ms(const gg_server *srv)
{
    unsigned t = srv->cfg.shutdown_timeout_ms;
    return t < GG_STOP_GRACE_MAX_MS ? t : GG_STOP_GRACE_MAX_MS;
}

static void server_on_grace_timeout(uv_timer_t *t)
{
    gg_server *srv = t->data;
    char why[160];
    snprintf(why, sizeof(why),
             "device work still running %u ms after the stop began (shutdown-timeout-ms %u "
             "and a grace of %u ms)", srv->cfg.shutdown_timeout_ms + server_grace_ms(srv),
             srv->cfg.shutdown_timeout_ms, server_grace_ms(srv));
    gg_core_lock(&srv->core);
    server_exit_now(srv, why);
}

static void server_on_shutdown_timeout(uv_timer_t *t)
{
    gg_server *srv = t->data;
    gg_warn("stop took longer than %u ms: closing the remaining %u connection(s); device work "
            "still running gets %u ms more", srv->cfg.shutdown_timeout_ms, srv->rpc.nconns,
            server_grace_ms(srv));
    /* a job the device never finishes would keep the loop for ever */
    uv_timer_start(&srv->shutdown_timer, server_on_grace_timeout, server_grace_ms(srv), 0);
    gg_core_lock(&srv->core);
    gg_conn_force_close_all(&srv->rpc);
    gg_core_unlock(&srv->core);
}

static void server_close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void gg_server_stop(gg_server *srv, int exit_code)
{
    if (!srv->core.stopping) {
        srv->core.stopping = true;
        srv->exit_code = exit_code;
        gg_notify_stopping(srv);
        if (srv->listening) {
            server_close_handle((uv_handle_t *)&srv->listener);
            if (srv->bound)
                unlink(srv->cfg.socket_path);
        }
        if (srv->cfg.shutdown_timeout_ms)
            uv_timer_start(&srv->shutdown_timer, server_on_shutdown_timeout,
                           srv->cfg.shutdown_timeout_ms, 0);
        gg_conn_stop_all(&srv->rpc);
    } else {
        if (exit_code > srv->exit_code)
            srv->exit_code = exit_code;
        /* a connection kept open for its fast-path work may be done now */
        gg_conn_stop_all(&srv->rpc);
    }
    /* The loop ends once no connection, no ring and no device work is left. */
    if (srv->rpc.nconns == 0 && gg_fp_live(srv->fp) == 0 && gg_core_idle(&srv->core)) {
        gg_fp_module_close(srv->fp);
        server_close_handle((uv_handle_t *)&srv->sigterm);
        server_close_handle((uv_handle_t *)&srv->sigint);
        server_close_handle((uv_handle_t *)&srv->sighup);
        server_close_handle((uv_handle_t *)&srv->shutdown_timer);
        server_close_handle((uv_handle_t *)&srv->tick);
        gg_core_close(&srv->core);
    }
}

int gg_server_run(gg_server *srv)
{
    gg_info("serving on %s%s (protocol %d, max message %zu bytes)", srv->cfg.socket_path,
            srv->activated ? " (socket from systemd)" : "", 1, srv->cfg.max_message);
    /* The start's records are written before the service manager hears
     * READY=1 (the log has a writer thread of its own), so that the log and
     * the manager's "started" read in the order things happened. */
    gg_log_flush(GG_LOG_EXIT_FLUSH_MS);
    gg_notify_ready(srv);
    uv_run(srv->loop, UV_RUN_DEFAULT);
    gg_info("stopped (exit %d)", srv->exit_code);
    return srv->exit_code;
}

void gg_server_fini(gg_server *srv)
{
    if (srv->listening && !uv_is_closing((uv_handle_t *)&srv->listener)) {
        uv_close((uv_handle_t *)&srv->listener, NULL);
        if (srv->bound)
            unlink(srv->cfg.socket_path);
    }
    if (srv->fp) {
        /* a start that failed after the module was made: its handle is open */
        gg_fp_module_close(srv->fp);
        uv_run(srv->loop, UV_RUN_NOWAIT);
    }
    gg_fp_module_free(srv->fp);
    srv->fp = NULL;
    gg_core_teardown(&srv->core);
    gg_core_fini(&srv->core);
    uv_loop_close(srv->loop);
}
