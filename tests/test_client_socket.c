/* SPDX-License-Identifier: MIT */
/* The client's default socket.
 *
 * The rule itself, through the candidate list (gg_client_socket_candidates):
 * $GFXGRAPH_SOCKET alone; the system service's socket alone for root or
 * without $XDG_RUNTIME_DIR; for a user the per-user socket, then the system
 * one.
 *
 * Then for real, as an unprivileged user (a forked child drops to nobody
 * when the test runs as root, since root never looks at the per-user path):
 * a connect with no path reaches a daemon on
 * $XDG_RUNTIME_DIR/gfxgraph/gfxgraphd.sock; with that socket missing or
 * stale it reaches the "system" daemon, whose socket the test moves into a
 * temporary directory through gg_client_test_set_system_socket (the seam
 * for tests in internal.h: CI cannot bind /run/gfxgraph); a per-user socket
 * that refuses the user is the answer, not a reason to go on; and a connect
 * that finds neither names both paths and how to start a daemon, in the
 * library's message and in gfxgraphctl's (exit 2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"

#ifndef GG_CTL_PATH
#error "GG_CTL_PATH must name the gfxgraphctl binary"
#endif


typedef char path_t[GG_CLIENT_PATH_MAX];

static void test_candidates(void)
{
    h_section("candidate list");
    path_t p[2];
    memset(p, 0, sizeof p);
    int n = gg_client_socket_candidates(NULL, "/run/user/1000", false, p, 2);
    CHECK_EQ(n, 2);
    CHECK_STR(p[0], "/run/user/1000/gfxgraph/gfxgraphd.sock");
    CHECK_STR(p[1], GG_CLIENT_SYSTEM_SOCKET);
    n = gg_client_socket_candidates("", "/run/user/1000", false, p, 2);
    CHECKF(n == 2, "an empty GFXGRAPH_SOCKET counts as unset (%d paths)", n);
    n = gg_client_socket_candidates(NULL, "/run/user/1000", false, p, 1);
    CHECK_EQ(n, 1);
    CHECK_STR(p[0], "/run/user/1000/gfxgraph/gfxgraphd.sock");

    n = gg_client_socket_candidates("/tmp/e.sock", "/run/user/1000", false, p, 2);
    CHECKF(n == 1, "GFXGRAPH_SOCKET is the only path for a user (%d)", n);
    CHECK_STR(p[0], "/tmp/e.sock");
    n = gg_client_socket_candidates("/tmp/e.sock", NULL, true, p, 2);
    CHECKF(n == 1, "GFXGRAPH_SOCKET is the only path for root (%d)", n);
    CHECK_STR(p[0], "/tmp/e.sock");

    n = gg_client_socket_candidates(NULL, "/run/user/0", true, p, 2);
    CHECKF(n == 1, "root: the system socket alone (%d)", n);
    CHECK_STR(p[0], GG_CLIENT_SYSTEM_SOCKET);
    n = gg_client_socket_candidates(NULL, NULL, false, p, 2);
    CHECKF(n == 1, "no XDG_RUNTIME_DIR: the system socket alone (%d)", n);
    CHECK_STR(p[0], GG_CLIENT_SYSTEM_SOCKET);
    n = gg_client_socket_candidates(NULL, "", false, p, 2);
    CHECKF(n == 1, "empty XDG_RUNTIME_DIR: the system socket alone (%d)", n);
    CHECK_STR(p[0], GG_CLIENT_SYSTEM_SOCKET);

    char longp[200];
    memset(longp, 'x', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    CHECK_EQ(gg_client_socket_candidates(NULL, longp, false, p, 2), -ENAMETOOLONG);
    CHECK_EQ(gg_client_socket_candidates(longp, NULL, false, p, 2), -ENAMETOOLONG);
    CHECK_EQ(gg_client_socket_candidates(NULL, "/x", false, p, 0), -EINVAL);

    h_section("the test seam for the system socket");
    CHECK(gg_client_test_set_system_socket("/tmp/gg-system.sock") == 0);
    n = gg_client_socket_candidates(NULL, "/run/user/1000", false, p, 2);
    CHECK(n == 2 && strcmp(p[1], "/tmp/gg-system.sock") == 0);
    CHECK(gg_client_test_set_system_socket(NULL) == 0);
    n = gg_client_socket_candidates(NULL, NULL, true, p, 2);
    CHECK(n == 1 && strcmp(p[0], GG_CLIENT_SYSTEM_SOCKET) == 0);

    h_section("gg_client_default_socket: the first path tried");
    char buf[GG_CLIENT_PATH_MAX];
    setenv("GFXGRAPH_SOCKET", "/tmp/from-env.sock", 1);
    CHECK_EQ(gg_client_default_socket(buf, sizeof buf), (int)strlen("/tmp/from-env.sock"));
    CHECK_STR(buf, "/tmp/from-env.sock");
    CHECK_EQ(gg_client_default_socket(buf, 4), -ENAMETOOLONG);
    unsetenv("GFXGRAPH_SOCKET");
}

/* ---- as a user ----------------------------------------------------------- */

static bool start_on(h_daemon *d, const char *sock, const char *log)
{
    memset(d, 0, sizeof *d);
    snprintf(d->log, sizeof d->log, "%s", log);
    if (!CHECKF(h_daemon_spawn(d, sock, NULL, NULL) == 0, "spawn gfxgraphd on %s", sock))
        return false;
    if (!CHECKF(h_daemon_wait_ready(d, 60000) == 0, "gfxgraphd comes up on %s", sock)) {
        h_daemon_dump_log(d);
        h_daemon_kill(d);
        return false;
    }
    return true;
}

/* Connect with no path; the path it reached (or "" on failure) into got and
 * the socket the daemon there reports (health details.socket) into served. */
static int connect_default(gg_client *c, char *got, char *served, char *err, size_t errlen)
{
    gg_client_disconnect(c);
    got[0] = served[0] = '\0';
    int rc = gg_client_connect(c, NULL, "socket-test");
    snprintf(err, errlen, "%s", gg_client_last_error(c));
    if (rc < 0)
        return rc;
    snprintf(got, GG_CLIENT_PATH_MAX, "%s", gg_client_socket_path(c));
    const msgpack_object *r;
    if (gg_client_call(c, "health", NULL, 0, &r) == 0)
        h_gets(r, "details.socket", served, GG_CLIENT_PATH_MAX);
    return 0;
}

static void stale_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    CHECKF(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0,
           "a stale socket at %s", path);
    if (fd >= 0)
        close(fd);
}

static int ctl_health(char **out, char **err)
{
    const char *argv[] = {GG_CTL_PATH, "health", NULL};
    return h_run(argv, NULL, NULL, out, err, 60000);
}

static void user_checks(const char *xdg, const char *sys_dir)
{
    char usock[256], udir[200], ssock[256];
    char ulog[160], slog[160], got[GG_CLIENT_PATH_MAX], served[GG_CLIENT_PATH_MAX];
    char err[1024];
    snprintf(udir, sizeof udir, "%s/gfxgraph", xdg);
    snprintf(usock, sizeof usock, "%s/gfxgraphd.sock", udir);
    snprintf(ssock, sizeof ssock, "%s/gfxgraphd.sock", sys_dir);
    /* the logs sit outside the socket directories the daemons create */
    snprintf(ulog, sizeof ulog, "%s/user.log", xdg);
    snprintf(slog, sizeof slog, "%s/system.log", sys_dir);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    unsetenv("GFXGRAPH_SOCKET");
    CHECK(gg_client_test_set_system_socket(ssock) == 0);
    gg_client *c = gg_client_new();
    h_daemon u, s;

    h_section("the per-user daemon");
    if (!start_on(&u, usock, ulog))
        goto done;
    CHECKF(connect_default(c, got, served, err, sizeof err) == 0, "connect with no path: %s",
           err);
    CHECK_STR(got, usock);
    CHECK_STR(served, usock);
    char *out = NULL, *cerr = NULL;
    int code = ctl_health(&out, &cerr);
    CHECKF(code == 0, "gfxgraphctl health with no --socket finds it (exit %d: %s)", code,
           cerr ? cerr : "");
    free(out);
    free(cerr);

    h_section("both running: the per-user daemon first");
    if (!start_on(&s, ssock, slog)) {
        h_daemon_stop(&u);
        goto done;
    }
    CHECK(connect_default(c, got, served, err, sizeof err) == 0);
    CHECK_STR(served, usock);

    h_section("no per-user socket: the system service");
    gg_client_disconnect(c);
    h_daemon_stop(&u);
    CHECKF(access(usock, F_OK) < 0, "the per-user socket is gone");
    CHECKF(connect_default(c, got, served, err, sizeof err) == 0,
           "connect with no path falls back: %s", err);
    CHECK_STR(got, ssock);
    CHECK_STR(served, ssock);

    h_section("a stale per-user socket: the system service");
    stale_socket(usock);
    CHECKF(connect_default(c, got, served, err, sizeof err) == 0,
           "connect past a stale socket: %s", err);
    CHECK_STR(served, ssock);
    unlink(usock);

    h_section("a per-user socket that refuses the user is the answer");
    char xdg2[128], d2[160];
    snprintf(xdg2, sizeof xdg2, "%s/locked", xdg);
    snprintf(d2, sizeof d2, "%s/gfxgraph", xdg2);
    if (CHECK(mkdir(xdg2, 0700) == 0 && mkdir(d2, 0) == 0)) {
        setenv("XDG_RUNTIME_DIR", xdg2, 1);
        int rc = connect_default(c, got, served, err, sizeof err);
        CHECKF(rc == -EACCES, "EACCES, not the system socket (rc %d: %s)", rc, err);
        CHECK_CONTAINS(err, d2);
        CHECKF(!strstr(err, ssock), "the message names only the path tried: %s", err);
        setenv("XDG_RUNTIME_DIR", xdg, 1);
    }
    rmdir(d2);
    rmdir(xdg2);

    h_section("GFXGRAPH_SOCKET: that path alone");
    char env_sock[128];
    snprintf(env_sock, sizeof env_sock, "%s/nobody-here.sock", xdg);
    setenv("GFXGRAPH_SOCKET", env_sock, 1);
    int rc = connect_default(c, got, served, err, sizeof err);
    CHECKF(rc == -ENOENT, "no fallback from GFXGRAPH_SOCKET (rc %d: %s)", rc, err);
    CHECK_CONTAINS(err, env_sock);
    CHECKF(!strstr(err, ssock), "the system socket is not tried: %s", err);
    unsetenv("GFXGRAPH_SOCKET");

    h_section("neither socket");
    h_daemon_stop(&s);
    rc = connect_default(c, got, served, err, sizeof err);
    CHECKF(rc == -ENOENT, "ENOENT when neither is there (rc %d)", rc);
    CHECK(!gg_client_socket_reached(c));
    CHECK_CONTAINS(err, usock);
    CHECK_CONTAINS(err, ssock);
    CHECK_CONTAINS(err, "systemctl start gfxgraphd");
    CHECK_CONTAINS(err, "gfxgraphd --socket");
    /* gfxgraphctl has no seam: its second path is the real one, which only
     * says what this test expects where no system service runs here */
    if (access(GG_CLIENT_SYSTEM_SOCKET, F_OK) < 0 && errno == ENOENT) {
        code = ctl_health(&out, &cerr);
        CHECKF(code == 2, "gfxgraphctl health: exit 2 (got %d)", code);
        CHECK_CONTAINS(cerr, usock);
        CHECK_CONTAINS(cerr, GG_CLIENT_SYSTEM_SOCKET);
        CHECK_CONTAINS(cerr, "systemctl start gfxgraphd");
        CHECK_CONTAINS(cerr, "gfxgraphd --socket");
        free(out);
        free(cerr);
    } else {
        h_note("%s exists here: gfxgraphctl's fallback message is not checked",
               GG_CLIENT_SYSTEM_SOCKET);
    }
done:
    gg_client_close(c);
    unlink(ulog);
    unlink(slog);
    rmdir(udir);
    rmdir(sys_dir);
    rmdir(xdg);
}

/* as the user: two temporary directories, the per-user and the system one */
static void user_run(void *arg)
{
    (void)arg;
    char xdg[64] = "/tmp/ggxdg.XXXXXX", sys_dir[64] = "/tmp/ggsys.XXXXXX";
    if (CHECK(mkdtemp(xdg) && mkdtemp(sys_dir)))
        user_checks(xdg, sys_dir);
}

static void test_as_user(void)
{
    h_section("as a user");
    static const char *const need[] = {GG_DAEMON_PATH, GG_CTL_PATH, NULL};
    h_as_user("test_client_socket (as a user)", user_run, NULL, need);
}

int main(void)
{
    h_init("test_client_socket", 300);
    test_candidates();
    test_as_user();
    return h_finish();
}
