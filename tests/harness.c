/* SPDX-License-Identifier: MIT */
/* Test harness: checks, daemons on temporary sockets, raw connections.
 * See harness.h. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sockios.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef GG_DAEMON_PATH
#error "GG_DAEMON_PATH must name the gfxgraphd binary"
#endif

extern char **environ;

int h_pass, h_fail;
static bool h_verbose;
static const char *h_name = "test";
static const char *h_cur_section = "";

/* daemons to kill when the test ends or times out */
#define H_MAX_DAEMONS 32
static h_daemon *h_daemons[H_MAX_DAEMONS];

static void h_track(h_daemon *d)
{
    for (int i = 0; i < H_MAX_DAEMONS; i++)
        if (!h_daemons[i]) {
            h_daemons[i] = d;
            return;
        }
}

static void h_untrack(h_daemon *d)
{
    for (int i = 0; i < H_MAX_DAEMONS; i++)
        if (h_daemons[i] == d)
            h_daemons[i] = NULL;
}

static void h_on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "\nFAIL: test ran past its time limit; killing its daemons\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    for (int i = 0; i < H_MAX_DAEMONS; i++)
        if (h_daemons[i] && h_daemons[i]->pid > 0)
            kill(h_daemons[i]->pid, SIGKILL);
    char line[96];
    int n = snprintf(line, sizeof line, "%d passed, %d failed\n", h_pass, h_fail + 1);
    w = write(1, line, (size_t)n);
    (void)w;
    _exit(1);
}

void h_init(const char *name, int timeout_s)
{
    /* A forked child calling h_init is a test of its own: its counts start
     * at zero, and its parent's daemons are not its to kill at the end. */
    h_pass = 0;
    h_fail = 0;
    memset(h_daemons, 0, sizeof h_daemons);
    h_name = name;
    const char *v = getenv("GG_TEST_VERBOSE");
    h_verbose = v && *v && strcmp(v, "0") != 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, h_on_alarm);
    if (timeout_s > 0)
        alarm((unsigned)timeout_s);
    printf("== %s\n", name);
}

void h_section(const char *name)
{
    h_cur_section = name;
    if (h_verbose)
        printf("-- %s\n", name);
}

void h_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("   note: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

bool h_check(bool ok, const char *file, int line, const char *fmt, ...)
{
    if (ok)
        h_pass++;
    else
        h_fail++;
    if (ok && !h_verbose)
        return ok;
    const char *base = strrchr(file, '/');
    printf("%s: %s:%d [%s]: ", ok ? "ok" : "FAIL", base ? base + 1 : file, line, h_cur_section);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    return ok;
}

int h_finish(void)
{
    alarm(0);
    for (int i = 0; i < H_MAX_DAEMONS; i++)
        if (h_daemons[i] && h_daemons[i]->pid > 0) {
            h_check(false, __FILE__, __LINE__, "a daemon (pid %d) was still running at the end",
                    (int)h_daemons[i]->pid);
            h_daemon_kill(h_daemons[i]);
        }
    printf("%s: %d passed, %d failed\n", h_name, h_pass, h_fail);
    printf("%d passed, %d failed\n", h_pass, h_fail);
    return h_fail ? 1 : 0;
}

/* ---- JSON output checked by python3 ------------------------------------------ */

bool h_have_python(void)
{
    static int have = -1;
    if (have < 0) {
        const char *argv[] = {"python3", "-c", "import json", NULL};
        have = h_run(argv, NULL, NULL, NULL, NULL, 60000) == 0;
    }
    return have;
}

bool h_py_json_check(const char *json, const char *code)
{
    char prog[2048];
    snprintf(prog, sizeof prog, "import json, sys\nd = json.load(sys.stdin)\n%s\nprint('ok')\n",
             code);
    const char *argv[] = {"python3", "-c", prog, NULL};
    char *out = NULL, *err = NULL;
    int rc = h_run(argv, NULL, json, &out, &err, 60000);
    bool ok = rc == 0 && out && strstr(out, "ok");
    if (!ok)
        printf("   python3 (exit %d): %s%s\n", rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
    return ok;
}

/* ---- as an unprivileged user ------------------------------------------------ */

#define H_AS_USER_SKIP 77

static int h_become_nobody(void)
{
    if (geteuid() != 0)
        return 0;
    struct passwd *pw = getpwnam("nobody");
    uid_t uid = pw ? pw->pw_uid : 65534;
    gid_t gid = pw ? pw->pw_gid : 65534;
    if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
        return -errno;
    return 0;
}

void h_as_user(const char *name, void (*fn)(void *), void *arg, const char *const *need)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = h_become_nobody();
        h_init(name, 300);
        if (rc < 0) {
            h_note("cannot become nobody (%s): skipped", strerror(-rc));
            _exit(H_AS_USER_SKIP);
        }
        for (int i = 0; need && need[i]; i++)
            if (access(need[i], X_OK) < 0) {
                h_note("uid %d cannot run %s: skipped", (int)getuid(), need[i]);
                _exit(H_AS_USER_SKIP);
            }
        fn(arg);
        _exit(h_finish());
    }
    if (!CHECK(pid > 0))
        return;
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == H_AS_USER_SKIP) {
        h_note("the checks as a user were skipped (see above)");
        return;
    }
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the checks as a user passed (status 0x%x)",
           name, st);
}

/* ---- time ---------------------------------------------------------------- */

int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- daemons ------------------------------------------------------------- */

static bool h_env_cleaned(const char *e)
{
    return strncmp(e, "GFXGRAPH", 8) == 0 || strncmp(e, "HGB_", 4) == 0;
}

static void h_child_env(const char *const *env)
{
    /* collect first: unsetenv changes environ */
    char *names[256];
    int n = 0;
    for (char **e = environ; *e && n < 256; e++)
        if (h_env_cleaned(*e)) {
            const char *eq = strchr(*e, '=');
            names[n++] = strndup(*e, eq ? (size_t)(eq - *e) : strlen(*e));
        }
    for (int i = 0; i < n; i++)
        if (names[i])
            unsetenv(names[i]);
    setenv("GFXGRAPH_CONFIG", "/dev/null", 1);
    /* GG_TEST_DAEMON_ENV="K=V;K2=V2": settings every daemon of this test
     * gets (ctest runs one test under another daemon setting with it) */
    const char *extra = getenv("GG_TEST_DAEMON_ENV");
    char *list = extra ? strdup(extra) : NULL;
    for (char *save = NULL, *kv = list ? strtok_r(list, ";", &save) : NULL; kv;
         kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        if (eq) {
            *eq = '\0';
            setenv(kv, eq + 1, 1);
        }
    }
    free(list);
    for (int i = 0; env && env[i]; i++) {
        char *kv = strdup(env[i]);
        char *eq = kv ? strchr(kv, '=') : NULL;
        if (!eq)
            continue;
        *eq = '\0';
        setenv(kv, eq + 1, 1);
    }
}

/* Fork and exec argv (argv[0] the daemon) with the log and environment of
 * h_daemon_spawn. */
static int h_spawn_argv(h_daemon *d, const char *const *argv, const char *const *env)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int lf = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int nf = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (lf < 0 || nf < 0)
            _exit(127);
        dup2(nf, 0);
        dup2(lf, 1);
        dup2(lf, 2);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGALRM, SIG_DFL);
        h_child_env(env);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    d->pid = pid;
    d->status = 0;
    h_track(d);
    return 0;
}

static void h_spawn_paths(h_daemon *d, const char *sock)
{
    if (sock != d->sock)
        snprintf(d->sock, sizeof d->sock, "%s", sock);
    if (!d->log[0])
        snprintf(d->log, sizeof d->log, "%s.log", sock);
}

int h_daemon_spawn(h_daemon *d, const char *sock, const char *const *args,
                   const char *const *env)
{
    h_spawn_paths(d, sock);
    const char *argv[64];
    int n = 0;
    argv[n++] = GG_DAEMON_PATH;
    argv[n++] = "--socket";
    argv[n++] = d->sock;
    argv[n++] = "--log-target";
    argv[n++] = "stderr";
    /* These tests drive shared-memory buffers: the cpu backend, even in a
     * GPU build on a GPU machine.  A test's own --backend comes later and
     * wins. */
    argv[n++] = "--backend";
    argv[n++] = "cpu";
    for (int i = 0; args && args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return h_spawn_argv(d, argv, env);
}

int h_daemon_spawn_bare(h_daemon *d, const char *sock, const char *const *args,
                        const char *const *env)
{
    h_spawn_paths(d, sock);
    const char *argv[64];
    int n = 0;
    argv[n++] = GG_DAEMON_PATH;
    for (int i = 0; args && args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return h_spawn_argv(d, argv, env);
}

static int h_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

int h_daemon_wait_exit(h_daemon *d, int timeout_ms)
{
    if (d->pid <= 0)
        return h_code(d->status);
    int64_t end = h_now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(d->pid, &st, WNOHANG);
        if (r == d->pid) {
            d->status = st;
            d->pid = 0;
            h_untrack(d);
            return h_code(st);
        }
        if (r < 0 && errno != EINTR) {
            d->pid = 0;
            h_untrack(d);
            return -1;
        }
        if (h_now_ms() >= end)
            return -ETIMEDOUT;
        h_sleep_ms(10);
    }
}

static int h_sun(struct sockaddr_un *sa, const char *path)
{
    size_t n = strlen(path);
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (n >= sizeof sa->sun_path)
        return -ENAMETOOLONG;
    memcpy(sa->sun_path, path, n + 1);
    return 0;
}

static int h_try_connect(const char *path)
{
    struct sockaddr_un sa;
    if (h_sun(&sa, path) < 0)
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    close(fd);
    return r == 0 ? 0 : -e;
}

int h_daemon_wait_ready(h_daemon *d, int timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    for (;;) {
        if (d->pid <= 0 || h_daemon_wait_exit(d, 0) != -ETIMEDOUT)
            return -1;
        if (h_try_connect(d->sock) == 0)
            return 0;
        if (h_now_ms() >= end)
            return -ETIMEDOUT;
        h_sleep_ms(20);
    }
}

/* quiet: a daemon that does not come up is no failure (the caller skips) */
static int h_daemon_launch(h_daemon *d, const char *const *args, const char *const *env,
                           bool quiet)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/ggtest.XXXXXX");
    if (!mkdtemp(d->dir)) {
        h_check(false, __FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    d->own_dir = true;
    snprintf(d->sock, sizeof d->sock, "%s/gfxgraphd.sock", d->dir);
    snprintf(d->log, sizeof d->log, "%s/gfxgraphd.log", d->dir);
    int rc = h_daemon_spawn(d, d->sock, args, env);
    if (rc < 0) {
        h_check(false, __FILE__, __LINE__, "cannot start gfxgraphd: %s", strerror(-rc));
        return -1;
    }
    rc = h_daemon_wait_ready(d, 60000);
    if (rc < 0 && quiet) {
        char *log = h_read_file(d->log);
        printf("SKIP: gfxgraphd did not start (no GPU?): %s\n", log ? log : "");
        free(log);
        h_daemon_kill(d);
        return -1;
    }
    if (rc < 0) {
        h_check(false, __FILE__, __LINE__, "gfxgraphd did not come up on %s (%s)", d->sock,
                rc == -ETIMEDOUT ? "timed out" : "it exited");
        h_daemon_dump_log(d);
        h_daemon_kill(d);
        return -1;
    }
    return 0;
}

int h_daemon_start(h_daemon *d, const char *const *args, const char *const *env)
{
    return h_daemon_launch(d, args, env, false);
}

int h_daemon_start_hip(h_daemon *d, const char *const *args, const char *const *env)
{
    const char *all[32] = {"--backend", "hip"};
    int n = 2;
    for (int i = 0; args && args[i] && n < 31; i++)
        all[n++] = args[i];
    all[n] = NULL;
    return h_daemon_launch(d, all, env, true);
}

void h_in_child(const char *name, void (*fn)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        h_init(name, 120);
        fn();
        _exit(h_finish());
    }
    int st = 0;
    if (CHECK(pid > 0))
        waitpid(pid, &st, 0);
    CHECKF(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: its checks passed (status 0x%x)",
           name, st);
}

void h_daemon_kill(h_daemon *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGKILL);
        h_daemon_wait_exit(d, 30000);
    }
    h_untrack(d);
}

static void h_daemon_cleanup(h_daemon *d)
{
    if (!d->own_dir)
        return;
    unlink(d->log);
    unlink(d->sock);
    rmdir(d->dir);
    d->own_dir = false;
}

int h_daemon_stop(h_daemon *d)
{
    if (d->pid <= 0) {
        h_check(false, __FILE__, __LINE__, "stop: the daemon is not running (it ended with %d)",
                h_code(d->status));
        h_daemon_dump_log(d);
        h_daemon_cleanup(d);
        return -1;
    }
    kill(d->pid, SIGTERM);
    int code = h_daemon_wait_exit(d, 60000);
    if (code == -ETIMEDOUT) {
        h_check(false, __FILE__, __LINE__, "the daemon did not stop within 60 s of SIGTERM");
        h_daemon_kill(d);
        code = h_code(d->status);
    }
    if (!h_check(code == 0, __FILE__, __LINE__, "daemon exit status after SIGTERM is 0 (got %d)",
                 code))
        h_daemon_dump_log(d);
    h_daemon_cleanup(d);
    return code;
}

char *h_read_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return strdup("");
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return strdup("");
    buf[n] = '\0';
    return buf;
}

void h_daemon_dump_log(const h_daemon *d)
{
    char *s = h_read_file(d->log);
    printf("---- gfxgraphd log (%s) ----\n", d->log);
    char *save = NULL;
    for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        printf("  daemon: %s\n", l);
    printf("---- end of log ----\n");
    free(s);
}

/* ---- raw connections ----------------------------------------------------- */

int h_conn_open(h_conn *c, const char *sock)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    msgpack_unpacked_init(&c->up);
    proto_frame_init(&c->frame, 64u << 20);
    struct sockaddr_un sa;
    if (h_sun(&sa, sock) < 0)
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    c->fd = fd;
    return 0;
}

void h_conn_close(h_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    msgpack_unpacked_destroy(&c->up);
    msgpack_unpacked_init(&c->up);
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = c->msg_len = 0;
}

int h_conn_send(h_conn *c, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int h_conn_send_sb(h_conn *c, msgpack_sbuffer *sb)
{
    int rc = h_conn_send(c, sb->data, sb->size);
    msgpack_sbuffer_clear(sb);
    return rc;
}

int h_conn_drained(const h_conn *c, int timeout_ms)
{
    for (int64_t end = h_now_ms() + timeout_ms;; h_sleep_ms(1)) {
        int q = -1;
        if (ioctl(c->fd, SIOCOUTQ, &q) < 0)
            return -errno;
        if (q == 0)
            return 0;
        if (h_now_ms() > end)
            return -ETIMEDOUT;
    }
}

int h_conn_recv(h_conn *c, int timeout_ms, const msgpack_object **out)
{
    if (c->msg_len) {
        memmove(c->buf, c->buf + c->msg_len, c->len - c->msg_len);
        c->len -= c->msg_len;
        c->msg_len = 0;
    }
    int64_t end = h_now_ms() + timeout_ms;
    for (;;) {
        long n = proto_frame_scan(&c->frame, c->buf, c->len);
        if (n < 0)
            return (int)n;
        if (n > 0) {
            proto_frame_reset(&c->frame);
            size_t off = 0;
            if (msgpack_unpack_next(&c->up, (const char *)c->buf, (size_t)n, &off) !=
                    MSGPACK_UNPACK_SUCCESS ||
                off != (size_t)n)
                return -EPROTO;
            c->msg_len = (size_t)n;
            *out = &c->up.data;
            return 1;
        }
        if (c->fd < 0)
            return 0;
        if (c->cap - c->len < 65536) {
            size_t ncap = c->cap ? c->cap * 2 : 131072;
            uint8_t *nb = realloc(c->buf, ncap);
            if (!nb)
                return -ENOMEM;
            c->buf = nb;
            c->cap = ncap;
        }
        int64_t left = end - h_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
        ssize_t got = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == ECONNRESET)
            return 0;
        if (got < 0)
            return -errno;
        if (got == 0)
            return 0;
        c->len += (size_t)got;
    }
}

void h_pack_request(msgpack_sbuffer *sb, uint32_t msgid, const char *method, const void *params,
                    size_t params_len)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    proto_pack_request_head(&pk, msgid, method);
    if (params) {
        msgpack_pack_array(&pk, 1);
        msgpack_sbuffer_write(sb, params, params_len);
    } else {
        msgpack_pack_array(&pk, 0);
    }
}

int h_conn_call(h_conn *c, uint32_t msgid, const char *method, const void *params,
                size_t params_len, const msgpack_object **result, const msgpack_object **error)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    h_pack_request(&sb, msgid, method, params, params_len);
    int rc = h_conn_send_sb(c, &sb);
    msgpack_sbuffer_destroy(&sb);
    if (rc < 0)
        return rc;
    for (;;) {
        const msgpack_object *o;
        rc = h_conn_recv(c, 60000, &o);
        if (rc <= 0)
            return rc;
        proto_msg m;
        bool idok;
        char why[128];
        if (proto_msg_decode(o, &m, &idok, why, sizeof why) < 0)
            return -EPROTO;
        if (m.type != GG_MSG_RESPONSE || m.msgid != msgid)
            continue;
        *result = m.result;
        *error = m.error;
        return 1;
    }
}

/* ---- reading results ----------------------------------------------------- */

const msgpack_object *h_get(const msgpack_object *o, const char *path)
{
    char tok[128];
    const char *p = path;
    while (o && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof tok)
            return NULL;
        memcpy(tok, p, n);
        tok[n] = '\0';
        p += n + (dot ? 1 : 0);
        if (o->type == MSGPACK_OBJECT_MAP) {
            o = proto_map_get(o, tok);
        } else if (o->type == MSGPACK_OBJECT_ARRAY) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            if (*end || i >= o->via.array.size)
                return NULL;
            o = &o->via.array.ptr[i];
        } else {
            return NULL;
        }
    }
    return o;
}

uint64_t h_getu(const msgpack_object *o, const char *path)
{
    const msgpack_object *v = h_get(o, path);
    uint64_t x;
    return v && proto_obj_u64(v, &x) ? x : UINT64_MAX;
}

int64_t h_geti(const msgpack_object *o, const char *path)
{
    const msgpack_object *v = h_get(o, path);
    int64_t x;
    return v && proto_obj_i64(v, &x) ? x : INT64_MIN;
}

double h_getf(const msgpack_object *o, const char *path)
{
    const msgpack_object *v = h_get(o, path);
    double x;
    return v && proto_obj_f64(v, &x) ? x : NAN;
}

const char *h_gets(const msgpack_object *o, const char *path, char *buf, size_t len)
{
    const msgpack_object *v = h_get(o, path);
    buf[0] = '\0';
    if (v && v->type == MSGPACK_OBJECT_STR) {
        size_t n = v->via.str.size < len - 1 ? v->via.str.size : len - 1;
        memcpy(buf, v->via.str.ptr, n);
        buf[n] = '\0';
    }
    return buf;
}

bool h_is(const msgpack_object *o, const char *path, msgpack_object_type t)
{
    const msgpack_object *v = h_get(o, path);
    return v && v->type == t;
}

const char *h_err_code(const msgpack_object *err, char *buf, size_t len)
{
    if (!err)
        return snprintf(buf, len, "(none)"), buf;
    return h_gets(err, "code", buf, len);
}

/* ---- misc ---------------------------------------------------------------- */

/* pid and a count alone repeat across runs: a run killed before its cleanup
 * leaves /dev/shm names that a later process with the same pid would collide
 * with (EEXIST), so the start time of this process goes in too. */
void h_unique(char *buf, size_t len, const char *prefix)
{
    static unsigned n;
    static unsigned long long epoch;
    if (!epoch) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        epoch = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    }
    snprintf(buf, len, "%s-%d-%llx-%u", prefix, (int)getpid(), epoch, ++n);
}

static void h_drain(int fd, char **buf, size_t *len, size_t *cap, bool *open)
{
    if (*cap - *len < 4096) {
        size_t nc = *cap ? *cap * 2 : 8192;
        char *nb = realloc(*buf, nc);
        if (!nb) {
            *open = false;
            return;
        }
        *buf = nb;
        *cap = nc;
    }
    ssize_t r = read(fd, *buf + *len, *cap - *len - 1);
    if (r > 0)
        *len += (size_t)r;
    else if (r == 0 || errno != EINTR)
        *open = false;
    (*buf)[*len] = '\0';
}

int h_run(const char *const *argv, const char *const *env, const char *stdin_text, char **out,
          char **err, int timeout_ms)
{
    int po[2], pe[2], pi[2];
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || pipe2(pi, O_CLOEXEC) < 0)
        return -errno;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        dup2(pi[0], 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGALRM, SIG_DFL);
        for (int i = 0; env && env[i]; i++) {
            char *kv = strdup(env[i]);
            char *eq = kv ? strchr(kv, '=') : NULL;
            if (eq) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            }
        }
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    close(pi[0]);
    if (stdin_text) {
        size_t n = strlen(stdin_text);
        const char *p = stdin_text;
        while (n) {
            ssize_t w = write(pi[1], p, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            p += w;
            n -= (size_t)w;
        }
    }
    close(pi[1]);
    size_t ol = 0, oc = 8192, el = 0, ec = 8192;
    char *ob = calloc(1, oc), *eb = calloc(1, ec);
    bool oo = ob != NULL, eo = eb != NULL;
    int64_t end = h_now_ms() + timeout_ms;
    while ((oo || eo) && h_now_ms() < end) {
        struct pollfd p[2] = {{.fd = oo ? po[0] : -1, .events = POLLIN},
                              {.fd = eo ? pe[0] : -1, .events = POLLIN}};
        int r = poll(p, 2, 100);
        if (r < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            h_drain(po[0], &ob, &ol, &oc, &oo);
        if (p[1].revents)
            h_drain(pe[0], &eb, &el, &ec, &eo);
    }
    close(po[0]);
    close(pe[0]);
    int st = 0, code;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && h_now_ms() < end)
        h_sleep_ms(10);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        code = -ETIMEDOUT;
    } else {
        code = h_code(st);
    }
    if (out)
        *out = ob;
    else
        free(ob);
    if (err)
        *err = eb;
    else
        free(eb);
    return code;
}
