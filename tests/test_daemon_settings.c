/* SPDX-License-Identifier: MIT */
/* gfxgraphd's settings that choose where it listens and what it logs, with
 * the daemon started as it would be by hand (no --socket or --log-level of
 * the harness's own where the case is about them).
 *
 * Socket: GFXGRAPH_SOCKET is honoured; --socket and --set socket= win over
 * it; it wins over the config file.  As a user (a forked child drops to
 * nobody when the test runs as root): $XDG_RUNTIME_DIR/gfxgraph/gfxgraphd.sock
 * by default; without XDG_RUNTIME_DIR the system path; a default too long
 * for sun_path stops the start instead of serving on its truncated start.
 * The root default (/run/gfxgraph) is not bound here: it may belong to a
 * real service.
 *
 * Log level: debug records ("client connected", on each accept) appear with
 * HGB_LOG_LEVEL=debug, GFXGRAPH=debug, --log-level debug, --set
 * log-level=debug or a config file, and not by default; warn and error hide
 * info; flags beat the environment, the environment beats the file,
 * GFXGRAPH=debug beats HGB_LOG_LEVEL (it is applied after it), GFXGRAPH=1
 * leaves the level alone; bad values stop the start with exit 2 naming
 * their source. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define GG_PATH_MAX_TEST 108   /* sun_path: a longer path is cut here */

static char tmp[64];   /* this test's directory */

static void path_in(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmp, name);
}

/* The socket the daemon at sock reports in health (details.socket), or "". */
static const char *served_socket(const char *sock, char *buf, size_t len)
{
    buf[0] = '\0';
    h_conn c;
    if (h_conn_open(&c, sock) < 0)
        return buf;
    const msgpack_object *r, *e;
    if (h_conn_call(&c, 1, "health", NULL, 0, &r, &e) == 1 && !e)
        h_gets(r, "details.socket", buf, len);
    h_conn_close(&c);
    return buf;
}

static bool start_bare(h_daemon *d, const char *sock, const char *log,
                       const char *const *args, const char *const *env)
{
    memset(d, 0, sizeof *d);
    snprintf(d->log, sizeof d->log, "%s", log);
    if (!CHECKF(h_daemon_spawn_bare(d, sock, args, env) == 0, "spawn gfxgraphd"))
        return false;
    if (!CHECKF(h_daemon_wait_ready(d, 60000) == 0, "gfxgraphd answers on %s", sock)) {
        h_daemon_dump_log(d);
        h_daemon_kill(d);
        return false;
    }
    return true;
}

/* Start with args/env, expect it to serve on want (and nowhere in absent). */
static void socket_case(const char *what, const char *want, const char *absent,
                        const char *const *args, const char *const *env)
{
    h_section(what);
    char log[160], got[160];
    path_in(log, sizeof log, "socket.log");
    h_daemon d;
    if (!start_bare(&d, want, log, args, env))
        return;
    CHECKF(strcmp(served_socket(want, got, sizeof got), want) == 0,
           "%s: health reports socket %s (got \"%s\")", what, want, got);
    if (absent)
        CHECKF(access(absent, F_OK) < 0, "%s: nothing at %s", what, absent);
    /* stopped first: its exit waits until the log's writer thread has
     * written every record */
    h_daemon_stop(&d);
    char *l = h_read_file(log);
    char line[200];
    snprintf(line, sizeof line, "serving on %s", want);
    CHECK_CONTAINS(l, line);
    free(l);
    unlink(log);
}

static void test_socket(void)
{
    char env_sock[128], flag_sock[128], set_sock[128], file_sock[128], conf[128];
    char e1[160], e2[160];
    path_in(env_sock, sizeof env_sock, "env.sock");
    path_in(flag_sock, sizeof flag_sock, "flag.sock");
    path_in(set_sock, sizeof set_sock, "set.sock");
    path_in(file_sock, sizeof file_sock, "file.sock");
    path_in(conf, sizeof conf, "socket.conf");
    snprintf(e1, sizeof e1, "GFXGRAPH_SOCKET=%s", env_sock);
    snprintf(e2, sizeof e2, "GFXGRAPH_CONFIG=%s", conf);
    const char *base[] = {"--backend", "cpu", "--log-target", "stderr", NULL};

    const char *env[] = {e1, NULL};
    socket_case("GFXGRAPH_SOCKET", env_sock, NULL, base, env);

    const char *a_flag[] = {"--backend", "cpu", "--log-target", "stderr", "--socket",
                            flag_sock, NULL};
    socket_case("--socket over GFXGRAPH_SOCKET", flag_sock, env_sock, a_flag, env);

    char set_kv[160];
    snprintf(set_kv, sizeof set_kv, "socket=%s", set_sock);
    const char *a_set[] = {"--backend", "cpu", "--log-target", "stderr", "--set", set_kv, NULL};
    socket_case("--set socket= over GFXGRAPH_SOCKET", set_sock, env_sock, a_set, env);

    FILE *f = fopen(conf, "we");
    if (CHECK(f != NULL)) {
        fprintf(f, "[gfxgraphd]\nsocket = %s\n", file_sock);
        fclose(f);
        const char *env_file[] = {e2, NULL};
        socket_case("the config file's socket", file_sock, NULL, base, env_file);
        const char *env_both[] = {e2, e1, NULL};
        socket_case("GFXGRAPH_SOCKET over the config file", env_sock, file_sock, base,
                    env_both);
    }
    unlink(conf);

    h_section("GFXGRAPH_SOCKET too long");
    char longp[160], e3[200], log[160];
    memset(longp, 'x', 120);
    longp[0] = '/';
    longp[120] = '\0';
    snprintf(e3, sizeof e3, "GFXGRAPH_SOCKET=%s", longp);
    const char *env_long[] = {e3, NULL};
    path_in(log, sizeof log, "long.log");
    h_daemon d;
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s", log);
    if (CHECK(h_daemon_spawn_bare(&d, env_sock, base, env_long) == 0)) {
        int code = h_daemon_wait_exit(&d, 60000);
        CHECKF(code == 2, "exit 2 (got %d)", code);
        char *l = h_read_file(log);
        CHECK_CONTAINS(l, "environment GFXGRAPH_SOCKET");
        free(l);
    }
    unlink(log);
}

/* ---- as a user ----------------------------------------------------------- */

static void user_checks(const char *xdg)
{
    const char *base[] = {"--backend", "cpu", "--log-target", "stderr", NULL};
    char want[160], e_xdg[160], log[160];
    snprintf(want, sizeof want, "%s/gfxgraph/gfxgraphd.sock", xdg);
    snprintf(e_xdg, sizeof e_xdg, "XDG_RUNTIME_DIR=%s", xdg);
    snprintf(log, sizeof log, "%s/user.log", xdg);

    h_section("a user: $XDG_RUNTIME_DIR/gfxgraph/gfxgraphd.sock");
    const char *env[] = {e_xdg, NULL};
    h_daemon d;
    char got[160], dir[160];
    if (start_bare(&d, want, log, base, env)) {
        CHECK_STR(served_socket(want, got, sizeof got), want);
        snprintf(dir, sizeof dir, "%s/gfxgraph", xdg);
        struct stat st;
        CHECKF(stat(dir, &st) == 0 && (st.st_mode & 0777 & ~0750u) == 0,
               "the socket's directory was created at most 0750 (mode %o)",
               st.st_mode & 07777);
        CHECKF(stat(want, &st) == 0 && (st.st_mode & 0777) == 0660, "the socket is 0660");
        h_daemon_stop(&d);
        rmdir(dir);
    }
    unlink(log);

    h_section("a user with GFXGRAPH_SOCKET");
    char env_sock[160], e_sock[200];
    snprintf(env_sock, sizeof env_sock, "%s/env.sock", xdg);
    snprintf(e_sock, sizeof e_sock, "GFXGRAPH_SOCKET=%s", env_sock);
    const char *env2[] = {e_xdg, e_sock, NULL};
    if (start_bare(&d, env_sock, log, base, env2)) {
        CHECK_STR(served_socket(env_sock, got, sizeof got), env_sock);
        CHECKF(access(want, F_OK) < 0, "nothing at the per-user default");
        h_daemon_stop(&d);
    }
    unlink(log);

    h_section("a user with a default too long for a socket path");
    char longx[128], e_long[160];
    memset(longx, 'x', 100);
    memcpy(longx, "/tmp/", 5);
    longx[100] = '\0';
    snprintf(e_long, sizeof e_long, "XDG_RUNTIME_DIR=%s", longx);
    const char *env3[] = {e_long, NULL};
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s", log);
    if (CHECK(h_daemon_spawn_bare(&d, want, base, env3) == 0)) {
        int code = h_daemon_wait_exit(&d, 60000);
        CHECKF(code == 1, "the start stops: exit 1 (got %d)", code);
        if (code == -ETIMEDOUT)
            h_daemon_kill(&d);
        char *l = h_read_file(log);
        CHECK_CONTAINS(l, "--socket or GFXGRAPH_SOCKET");
        CHECKF(!strstr(l, "serving on"), "it does not serve on a truncated path");
        free(l);
        CHECKF(access(longx, F_OK) < 0, "nothing created under the long directory");
        /* what a daemon that served on the truncated path would leave */
        char cut[256];
        snprintf(cut, sizeof cut, "%s/gfxgraph/gfxgraphd.sock", longx);
        cut[GG_PATH_MAX_TEST - 1] = '\0';
        unlink(cut);
        rmdir(longx);
    }
    unlink(log);
    const char *env4[] = {e_long, e_sock, NULL};
    if (start_bare(&d, env_sock, log, base, env4)) {
        CHECK_STR(served_socket(env_sock, got, sizeof got), env_sock);
        h_daemon_stop(&d);
    }
    unlink(log);

    h_section("a user without XDG_RUNTIME_DIR: the system path");
    struct stat st;
    if (stat("/run/gfxgraph", &st) < 0 && errno == ENOENT && access("/run", W_OK) < 0) {
        const char *env5[] = {NULL};
        /* the harness does not clear XDG_RUNTIME_DIR: this process does */
        unsetenv("XDG_RUNTIME_DIR");
        memset(&d, 0, sizeof d);
        snprintf(d.log, sizeof d.log, "%s", log);
        if (CHECK(h_daemon_spawn_bare(&d, "/run/gfxgraph/gfxgraphd.sock", base, env5) == 0)) {
            int code = h_daemon_wait_exit(&d, 60000);
            CHECKF(code == 1, "a user cannot create /run/gfxgraph: exit 1 (got %d)", code);
            char *l = h_read_file(log);
            CHECK_CONTAINS(l, "/run/gfxgraph/gfxgraphd.sock");
            free(l);
        }
        unlink(log);
    } else {
        h_note("/run/gfxgraph exists or /run is writable: the system default is not tried");
    }
}

/* as the user: a temporary $XDG_RUNTIME_DIR */
static void user_run(void *arg)
{
    (void)arg;
    char xdg[64] = "/tmp/ggxdg.XXXXXX";
    if (CHECK(mkdtemp(xdg) != NULL)) {
        user_checks(xdg);
        rmdir(xdg);
    }
}

static void test_as_user(void)
{
    h_section("as a user");
    static const char *const need[] = {GG_DAEMON_PATH, NULL};
    h_as_user("test_daemon_settings (as a user)", user_run, NULL, need);
}

/* ---- log level ----------------------------------------------------------- */

#define DEBUG_LINE " gfxgraphd debug: "
#define INFO_LINE " gfxgraphd info: "

/* The daemon's whole log: stopped first, so that every record it queued
 * has been written (a writer thread of its own writes them, and the exit
 * waits for it); read through a descriptor opened before, as the stop
 * removes the file. */
static char *log_after_stop(h_daemon *d)
{
    int fd = open(d->log, O_RDONLY | O_CLOEXEC);
    h_daemon_stop(d);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while (buf && fd >= 0 && (r = read(fd, buf + n, cap - n - 1)) > 0)
        if ((n += (size_t)r) + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                break;
            buf = nb;
        }
    if (fd >= 0)
        close(fd);
    if (buf)
        buf[n] = '\0';
    return buf ? buf : strdup("");
}

/* Start (harness: --socket, --log-target stderr), connect once so a debug
 * record is due, stop, and look at the log. */
static void level_case(const char *what, const char *const *args, const char *const *env,
                       bool want_debug, bool want_info)
{
    h_section(what);
    h_daemon d;
    if (h_daemon_start(&d, args, env) < 0)
        return;
    h_conn c;
    const msgpack_object *r, *e;
    /* the accept is logged before the request is read, so the record is
     * queued by the time the answer comes */
    CHECK(h_conn_open(&c, d.sock) == 0 && h_conn_call(&c, 1, "stats", NULL, 0, &r, &e) == 1);
    h_conn_close(&c);
    char *l = log_after_stop(&d);
    bool dbg = strstr(l, DEBUG_LINE) != NULL, inf = strstr(l, INFO_LINE) != NULL;
    CHECKF(dbg == want_debug, "%s: debug records %s", what, want_debug ? "shown" : "hidden");
    CHECKF(inf == want_info, "%s: info records %s", what, want_info ? "shown" : "hidden");
    if (want_debug)
        CHECK_CONTAINS(l, "client connected: pid");
    if (dbg != want_debug || inf != want_info)
        printf("---- gfxgraphd log ----\n%s---- end ----\n", l);
    free(l);
}

static void bad_case(const char *what, const char *const *args, const char *const *env,
                     const char *names)
{
    h_section(what);
    char sock[128], log[128];
    path_in(sock, sizeof sock, "bad.sock");
    path_in(log, sizeof log, "bad.log");
    h_daemon d;
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s", log);
    if (CHECK(h_daemon_spawn(&d, sock, args, env) == 0)) {
        int code = h_daemon_wait_exit(&d, 60000);
        CHECKF(code == 2, "%s: exit 2 (got %d)", what, code);
        char *l = h_read_file(log);
        CHECK_CONTAINS(l, names);
        free(l);
    }
    unlink(log);
}

static void test_log_level(void)
{
    const char *none[] = {NULL};
    const char *a_debug[] = {"--log-level", "debug", NULL};
    const char *a_info[] = {"--log-level", "info", NULL};
    const char *a_warn[] = {"--log-level", "warn", NULL};
    const char *a_set[] = {"--set", "log-level=debug", NULL};
    const char *a_twice[] = {"--log-level", "debug", "--log-level", "info", NULL};
    const char *e_hgb_debug[] = {"HGB_LOG_LEVEL=debug", NULL};
    const char *e_hgb_warning[] = {"HGB_LOG_LEVEL=warning", NULL};
    const char *e_hgb_error[] = {"HGB_LOG_LEVEL=error", NULL};
    const char *e_gfx_debug[] = {"GFXGRAPH=debug", NULL};
    const char *e_warn_gfx[] = {"HGB_LOG_LEVEL=warn", "GFXGRAPH=debug", NULL};
    const char *e_debug_gfx1[] = {"HGB_LOG_LEVEL=debug", "GFXGRAPH=1", NULL};

    level_case("default: info", none, NULL, false, true);
    level_case("HGB_LOG_LEVEL=debug", none, e_hgb_debug, true, true);
    level_case("GFXGRAPH=debug", none, e_gfx_debug, true, true);
    level_case("--log-level debug", a_debug, NULL, true, true);
    level_case("--set log-level=debug", a_set, NULL, true, true);
    level_case("--log-level warn", a_warn, NULL, false, false);
    level_case("HGB_LOG_LEVEL=warning", none, e_hgb_warning, false, false);
    level_case("HGB_LOG_LEVEL=error", none, e_hgb_error, false, false);
    level_case("--log-level info over HGB_LOG_LEVEL=debug", a_info, e_hgb_debug, false, true);
    level_case("--log-level warn over GFXGRAPH=debug", a_warn, e_gfx_debug, false, false);
    level_case("GFXGRAPH=debug over HGB_LOG_LEVEL=warn", none, e_warn_gfx, true, true);
    level_case("GFXGRAPH=1 leaves HGB_LOG_LEVEL=debug", none, e_debug_gfx1, true, true);
    level_case("flags in order: the last --log-level", a_twice, NULL, false, true);

    char conf[128], e_conf[160];
    path_in(conf, sizeof conf, "level.conf");
    snprintf(e_conf, sizeof e_conf, "GFXGRAPH_CONFIG=%s", conf);
    FILE *f = fopen(conf, "we");
    if (CHECK(f != NULL)) {
        fputs("log-level = debug\n", f);
        fclose(f);
        const char *e_file[] = {e_conf, NULL};
        const char *e_file_env[] = {e_conf, "HGB_LOG_LEVEL=info", NULL};
        level_case("the config file's log-level", none, e_file, true, true);
        level_case("HGB_LOG_LEVEL over the config file", none, e_file_env, false, true);
        level_case("--log-level over the config file", a_warn, e_file, false, false);
    }
    unlink(conf);

    const char *e_bad[] = {"HGB_LOG_LEVEL=loud", NULL};
    const char *e_bad_mode[] = {"GFXGRAPH=verbose", NULL};
    const char *a_bad[] = {"--log-level", "loud", NULL};
    bad_case("HGB_LOG_LEVEL=loud", none, e_bad, "environment HGB_LOG_LEVEL");
    bad_case("GFXGRAPH=verbose", none, e_bad_mode, "environment GFXGRAPH");
    bad_case("--log-level loud", a_bad, NULL, "--log-level");
}

int main(void)
{
    h_init("test_daemon_settings", 600);
    snprintf(tmp, sizeof tmp, "/tmp/ggtest.XXXXXX");
    if (!CHECK(mkdtemp(tmp) != NULL))
        return h_finish();
    test_socket();
    test_as_user();
    test_log_level();
    rmdir(tmp);
    return h_finish();
}
