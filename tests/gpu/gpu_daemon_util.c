/* SPDX-License-Identifier: MIT */
/* Harness of the gfxgraphd GPU tests: see gpu_daemon_util.h. */
#include "gpu_daemon_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef GG_DAEMON_PATH
#error "GG_DAEMON_PATH must name the gfxgraphd binary (tests/cmake/gpu_daemon.cmake sets it)"
#endif

extern char **environ;

/* ---- checks ---------------------------------------------------------------- */

int gd_pass, gd_fail;
bool gd_verbose;
static char g_scn_buf[96] = "main";
const char *gd_scn = g_scn_buf;

void gd_set_scn(const char *name)
{
    snprintf(g_scn_buf, sizeof g_scn_buf, "%s", name);
    gd_scn = g_scn_buf;
}

static void gd_vreport(const char *tag, const char *fmt, va_list ap)
{
    printf("%s [%s]: ", tag, gd_scn);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
}

void gd_failf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gd_vreport("FAIL", fmt, ap);
    va_end(ap);
    gd_fail++;
}

bool gd_check(bool ok, const char *fmt, ...)
{
    if (ok)
        gd_pass++;
    else
        gd_fail++;
    if (ok && !gd_verbose)
        return true;
    va_list ap;
    va_start(ap, fmt);
    gd_vreport(ok ? "ok  " : "FAIL", fmt, ap);
    va_end(ap);
    return ok;
}

double gd_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void gd_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- the daemon (parent process only) -------------------------------------- */

daemon_t gd_daemon;

void gd_daemon_print_log(void)
{
    FILE *f = fopen(gd_daemon.log, "r");
    if (!f) {
        printf("  (no daemon log at %s)\n", gd_daemon.log);
        return;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    long from = n > 8192 ? n - 8192 : 0;
    fseek(f, from, SEEK_SET);
    printf("---- daemon log (%s)%s ----\n", gd_daemon.log, from ? ", last 8 KiB" : "");
    char line[1024];
    while (fgets(line, sizeof line, f))
        printf("  | %s", line);
    printf("---- end of daemon log ----\n");
    fclose(f);
}

static void env_clean(void)
{
    for (;;) {
        bool again = false;
        for (char **e = environ; *e; e++)
            if (strncmp(*e, "GFXGRAPH", 8) == 0 || strncmp(*e, "HGB_", 4) == 0) {
                char name[256];
                size_t n = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)(n < 255 ? n : 255), *e);
                unsetenv(name);
                again = true;
                break;
            }
        if (!again)
            return;
    }
}

static bool socket_answers(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int gd_daemon_start(const char *const *env, const char *what)
{
    snprintf(gd_daemon.what, sizeof gd_daemon.what, "%s", what);
    unlink(gd_daemon.sock);
    FILE *lf = fopen(gd_daemon.log, "a");
    if (lf) {
        fprintf(lf, "==== gfxgraphd --backend %s (%s) ====\n", GG_TEST_BACKEND, what);
        fclose(lf);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        gd_failf("fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(gd_daemon.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        env_clean();
        setenv("GFXGRAPH_CONFIG", "/dev/null", 1);
        for (int i = 0; env && env[i]; i++) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            }
        }
        execl(GG_DAEMON_PATH, "gfxgraphd", "--backend", GG_TEST_BACKEND, "--socket", gd_daemon.sock,
              "--log-target", "stderr", (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", GG_DAEMON_PATH, strerror(errno));
        _exit(127);
    }
    gd_daemon.pid = pid;
    double t0 = gd_now_s();
    while (gd_now_s() - t0 < 90) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            gd_daemon.pid = 0;
            gd_failf("gfxgraphd (%s) exited during start-up (status %d)", what,
                     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            gd_daemon_print_log();
            return -1;
        }
        if (socket_answers(gd_daemon.sock)) {
            printf("# gfxgraphd (%s) pid %d ready after %.1f s\n", what, (int)pid, gd_now_s() - t0);
            return 0;
        }
        gd_sleep_ms(50);
    }
    gd_failf("gfxgraphd (%s) did not answer on %s within 90 s", what, gd_daemon.sock);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    gd_daemon.pid = 0;
    gd_daemon_print_log();
    return -1;
}

bool gd_daemon_alive(void)
{
    return gd_daemon.pid > 0 && waitpid(gd_daemon.pid, NULL, WNOHANG) == 0;
}

void gd_daemon_stop(void)
{
    if (gd_daemon.pid <= 0)
        return;
    kill(gd_daemon.pid, SIGTERM);
    int st = 0;
    double t0 = gd_now_s();
    pid_t r = 0;
    while ((r = waitpid(gd_daemon.pid, &st, WNOHANG)) == 0 && gd_now_s() - t0 < 20)
        gd_sleep_ms(20);
    if (r == 0) {
        kill(gd_daemon.pid, SIGKILL);
        waitpid(gd_daemon.pid, &st, 0);
        gd_failf("gfxgraphd (%s) did not stop within 20 s of SIGTERM", gd_daemon.what);
        gd_daemon_print_log();
    } else if (!gd_check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                         "gfxgraphd (%s) exits 0 on SIGTERM (status %d)", gd_daemon.what,
                         WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st))) {
        gd_daemon_print_log();
    }
    gd_daemon.pid = 0;
}

/* ---- client processes ------------------------------------------------------- */

static ssize_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

void gd_run_child(const char *name, scn_fn fn, const void *arg, int timeout_s)
{
    int fd[2];
    gd_set_scn(name);
    if (pipe2(fd, O_CLOEXEC) < 0) {
        gd_failf("pipe: %s", strerror(errno));
        return;
    }
    printf("# %s\n", name);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        gd_failf("fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        alarm((unsigned)timeout_s);
        gd_pass = gd_fail = 0;
        gd_daemon.pid = 0;      /* not ours to manage */
        fn(arg);
        int cnt[2] = {gd_pass, gd_fail};
        fflush(stdout);
        if (write(fd[1], cnt, sizeof cnt) != (ssize_t)sizeof cnt)
            _exit(3);
        _exit(0);
    }
    close(fd[1]);
    int cnt[2] = {0, 0};
    ssize_t n = read_full(fd[0], cnt, sizeof cnt);
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    gd_set_scn(name);
    if (n == (ssize_t)sizeof cnt) {
        gd_pass += cnt[0];
        gd_fail += cnt[1];
        printf("# %s: %d passed, %d failed\n", name, cnt[0], cnt[1]);
    }
    if (n != (ssize_t)sizeof cnt || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            gd_failf("client process ended by signal %d%s", WTERMSIG(st),
                     WTERMSIG(st) == SIGALRM ? " (timed out)" : "");
        else
            gd_failf("client process ended abnormally (exit %d)", WEXITSTATUS(st));
        if (!gd_daemon_alive())
            gd_daemon_print_log();
    }
}

gg_client *gd_connect(const char *name)
{
    gg_client *c = gg_client_new();
    if (!c) {
        gd_failf("gg_client_new: out of memory");
        return NULL;
    }
    gg_client_set_timeout(c, 60000);
    if (gg_client_connect(c, gd_daemon.sock, name) < 0) {
        gd_failf("connect %s: %s (%s)", gd_daemon.sock, gg_client_last_error(c),
                 gg_client_last_error_code(c));
        gg_client_close(c);
        return NULL;
    }
    return c;
}

int gd_dev_init(void)
{
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n < 1) {
        gd_failf("no device in the client process (%s)",
                 e != hipSuccess ? hipGetErrorString(e) : "0 devices");
        return -1;
    }
    e = hipSetDevice(0);
    if (e != hipSuccess) {
        gd_failf("hipSetDevice(0): %s", hipGetErrorString(e));
        return -1;
    }
    return 0;
}

/* ---- stats and health through the raw call --------------------------------- */

static const msgpack_object *mp_get(const msgpack_object *m, const char *key)
{
    if (!m || m->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object_kv *kv = &m->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == kl &&
            memcmp(kv->key.via.str.ptr, key, kl) == 0)
            return &kv->val;
    }
    return NULL;
}

static double mp_num(const msgpack_object *m, const char *key)
{
    const msgpack_object *o = mp_get(m, key);
    if (!o)
        return NAN;
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
    case MSGPACK_OBJECT_BOOLEAN: return o->via.boolean ? 1 : 0;
    default: return NAN;
    }
}

static void mp_str(const msgpack_object *m, const char *key, char *buf, size_t cap)
{
    const msgpack_object *o = mp_get(m, key);
    buf[0] = '\0';
    if (o && o->type == MSGPACK_OBJECT_STR)
        snprintf(buf, cap, "%.*s", (int)o->via.str.size, o->via.str.ptr);
}

int gd_get_stats(gg_client *c, stats_t *s)
{
    const msgpack_object *r = NULL;
    int rc = gg_client_call(c, "stats", NULL, 0, &r);
    if (rc < 0) {
        gd_failf("stats: %s (%s)", gg_client_last_error(c), gg_client_last_error_code(c));
        return rc;
    }
    s->capture_count = mp_num(r, "capture_count");
    s->replay_count = mp_num(r, "replay_count");
    s->eager_count = mp_num(r, "eager_count");
    s->fallback_count = mp_num(r, "fallback_count");
    s->sessions_active = mp_num(r, "sessions_active");
    s->graphs_cached = mp_num(r, "graphs_cached");
    return 0;
}

int gd_get_health(gg_client *c, health_t *h)
{
    const msgpack_object *r = NULL;
    memset(h, 0, sizeof *h);
    int rc = gg_client_call(c, "health", NULL, 0, &r);
    if (rc < 0) {
        gd_failf("health: %s (%s)", gg_client_last_error(c), gg_client_last_error_code(c));
        return rc;
    }
    const msgpack_object *ok = mp_get(r, "ok");
    h->ok = ok && ok->type == MSGPACK_OBJECT_BOOLEAN && ok->via.boolean;
    mp_str(r, "gpu", h->gpu, sizeof h->gpu);
    mp_str(r, "arch", h->arch, sizeof h->arch);
    h->vram_total_mb = mp_num(r, "vram_total_mb");
    h->vram_free_mb = mp_num(r, "vram_free_mb");
    const msgpack_object *d = mp_get(r, "details");
    mp_str(d, "smoke_test", h->smoke, sizeof h->smoke);
    mp_str(d, "reason", h->reason, sizeof h->reason);
    mp_str(d, "backend", h->backend, sizeof h->backend);
    return 0;
}

double gd_wait_sessions(gg_client *c, double want, double timeout_s)
{
    stats_t s;
    double t0 = gd_now_s();
    for (;;) {
        if (gd_get_stats(c, &s) < 0)
            return NAN;
        if (s.sessions_active == want || gd_now_s() - t0 > timeout_s)
            return s.sessions_active;
        gd_sleep_ms(20);
    }
}

bool gd_arch_ok(const char *a)
{
    if (strncmp(a, "sm_", 3) == 0) {
        a += 3;
        if (!*a)
            return false;
        for (; *a; a++)
            if (!(*a >= '0' && *a <= '9') && !(a[1] == '\0' && *a >= 'a' && *a <= 'z'))
                return false;
        return true;
    }
    if (strncmp(a, "gfx", 3) == 0) {
        a += 3;
        if (!*a)
            return false;
        for (; *a; a++)
            if (!((*a >= '0' && *a <= '9') || (*a >= 'a' && *a <= 'f')))
                return false;
        return true;
    }
    return false;
}

void gd_check_health(gg_client *c, const char *when)
{
    health_t h;
    if (gd_get_health(c, &h) < 0)
        return;
    gd_check(h.ok, "%s: health ok (reason: %s)", when, h.reason[0] ? h.reason : "-");
    gd_check(h.gpu[0] != '\0', "%s: health gpu name non-empty", when);
    gd_check(gd_arch_ok(h.arch), "%s: health arch '%s' looks like sm_NN or gfxNNNN", when, h.arch);
    gd_check(h.vram_total_mb > 0 && h.vram_free_mb > 0 && h.vram_free_mb <= h.vram_total_mb,
             "%s: VRAM totals (total %.0f MiB, free %.0f MiB)", when, h.vram_total_mb,
             h.vram_free_mb);
    gd_check(strcmp(h.smoke, "passed") == 0, "%s: details.smoke_test is \"passed\" (got \"%s\")",
             when, h.smoke);
    gd_check(strcmp(h.backend, GG_TEST_BACKEND) == 0, "%s: details.backend is %s (got \"%s\")",
             when, GG_TEST_BACKEND, h.backend);
}

/* ---- main ---------------------------------------------------------------------- */

/* In a child: is there a device?  0 yes, 77 no (the parent never touches the
 * runtime, so the scenario processes start clean). */
static void probe_device(void)
{
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n < 1) {
        printf("SKIP: no GPU device (hipGetDeviceCount: %s)\n",
               e != hipSuccess ? hipGetErrorString(e) : "0 devices");
        fflush(stdout);
        _exit(77);
    }
    hipDeviceProp_t prop;
    char arch[64] = "";
    if (hipGetDeviceProperties(&prop, 0) == hipSuccess) {
        gg_hip_arch_name(0, arch, sizeof arch);
        printf("# device 0 of %d: %s (%s)\n", n, prop.name, arch);
    }
    fflush(stdout);
    _exit(0);
}

static double g_t0;

int gd_begin(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *v = getenv("GG_TEST_VERBOSE");
    gd_verbose = v && *v && strcmp(v, "0") != 0;
    signal(SIGPIPE, SIG_IGN);

    fflush(stdout);
    pid_t probe = fork();
    if (probe < 0) {
        perror("fork");
        return 1;
    }
    if (probe == 0)
        probe_device();
    int st = 0;
    waitpid(probe, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        return 77;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("FAIL: the device probe process failed (status %d)\n",
               WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        printf("0 passed, 1 failed\n");
        return 1;
    }

    snprintf(gd_daemon.dir, sizeof gd_daemon.dir, "/tmp/gg-gpu-daemon-XXXXXX");
    if (!mkdtemp(gd_daemon.dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(gd_daemon.sock, sizeof gd_daemon.sock, "%s/gfxgraphd.sock", gd_daemon.dir);
    snprintf(gd_daemon.log, sizeof gd_daemon.log, "%s/gfxgraphd.log", gd_daemon.dir);
    printf("# daemon %s, socket %s\n", GG_DAEMON_PATH, gd_daemon.sock);
    g_t0 = gd_now_s();
    return 0;
}

int gd_end(void)
{
    if (gd_fail == 0) {
        unlink(gd_daemon.log);
        unlink(gd_daemon.sock);
        rmdir(gd_daemon.dir);
    } else {
        printf("# daemon log kept in %s\n", gd_daemon.log);
    }
    printf("# %.1f s\n", gd_now_s() - g_t0);
    printf("%d passed, %d failed\n", gd_pass, gd_fail);
    return gd_fail ? 1 : 0;
}
