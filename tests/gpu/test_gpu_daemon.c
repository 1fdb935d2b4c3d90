/* The real gfxgraphd on the hip backend, end to end: the daemon runs as its
 * own process on a temporary socket; every scenario runs in a separate
 * client process (forked from this one; an IPC memory handle cannot be
 * opened by the process that allocated it, and this process never touches
 * the GPU runtime itself, so each child starts with a clean runtime).
 *
 * A client process hipMallocs its inputs, weights and outputs, registers
 * them with gg_client_buffer_register_device (the inputs through a pointer
 * into the middle of their allocation, so the daemon sees a non-zero
 * offset), defines a program, replays it for batch 1..40 with buckets
 * {1,2,4,8,16,32} (graph up to 32, eager above) and compares the real rows
 * of every output with the CPU reference (gg_ops_run_cpu on host copies of
 * the inputs, intermediates rounded to the storage dtype like the GPU's).
 * Outputs are poisoned with NaN (0xff bytes) before every replay.
 *
 * Scenarios:
 *   hello/health   backend hip, device name, arch (sm_NN / gfxNNNN), VRAM
 *                  totals, smoke test "passed"
 *   programs       chain layernorm->gelu (x2), MLP linear->gelu->linear with
 *                  bias, rmsnorm + silu_mul, softmax, add with a broadcast
 *                  row; each in f32, f16 and bf16; the chain is prepared
 *                  (no replay captures), the others capture on first use
 *   branches       two branches, each cached on its own
 *   killed client  SIGKILL in the middle of a stream of replays: the daemon
 *                  stays up and healthy, the session goes away, a new
 *                  client works (three times, at different moments)
 *   hostfn         completion by host functions (GFXGRAPH_COMPLETION=hostfn)
 *   faults         GFXGRAPH_FAULT=capture, instantiate, launch: every replay
 *                  is still right, path eager, fallback true, and the stats
 *                  count the fallbacks
 *
 * Tolerance, rel-L2 over the real rows: f32 1e-4, f16 3e-3, bf16 2e-2
 * (linear may run through cuBLAS/rocBLAS; f32 is pedantic f32, no TF32).
 *
 * Without a device (hipGetDeviceCount fails or finds none) it prints SKIP
 * and returns 77.  GG_TEST_VERBOSE=1 prints every replay.  Ends with
 * "N passed, M failed". */
#include "gg_hip.h"
#include "internal.h"
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
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
#ifndef GG_TEST_BACKEND
#define GG_TEST_BACKEND "hip"
#endif

#define MAXR 40                         /* rows of every batch tensor */
#define TOP 32                          /* largest bucket */
static const int k_buckets[] = {1, 2, 4, 8, 16, 32};
#define NBK ((int)(sizeof k_buckets / sizeof k_buckets[0]))
#define MAX_FAIL_PRINTS 8               /* per program run */

extern char **environ;

/* ---- checks ---------------------------------------------------------------- */

static int g_pass, g_fail;
static bool g_verbose;
static char g_scn_buf[96] = "main";
static const char *g_scn = g_scn_buf;

static void set_scn(const char *name)
{
    snprintf(g_scn_buf, sizeof g_scn_buf, "%s", name);
    g_scn = g_scn_buf;
}

__attribute__((format(printf, 1, 2))) static void failf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL [%s]: ", g_scn);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    g_fail++;
}

__attribute__((format(printf, 2, 3))) static bool check(bool ok, const char *fmt, ...)
{
    if (ok) {
        g_pass++;
        if (g_verbose) {
            va_list ap;
            va_start(ap, fmt);
            printf("ok   [%s]: ", g_scn);
            vprintf(fmt, ap);
            printf("\n");
            va_end(ap);
        }
        return true;
    }
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL [%s]: ", g_scn);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    g_fail++;
    return false;
}

#define HIP_OK(call)                                                                       \
    do {                                                                                   \
        hipError_t e_ = (call);                                                            \
        if (e_ != hipSuccess) {                                                            \
            failf("%s:%d: %s: %s", __FILE__, __LINE__, #call, hipGetErrorString(e_));     \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- the daemon (parent process only) -------------------------------------- */

typedef struct {
    pid_t pid;
    char dir[48];
    char sock[96];          /* fits sun_path (108) */
    char log[96];
    char what[96];
} daemon_t;

static daemon_t g_d;

static void daemon_print_log(void)
{
    FILE *f = fopen(g_d.log, "r");
    if (!f) {
        printf("  (no daemon log at %s)\n", g_d.log);
        return;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    long from = n > 8192 ? n - 8192 : 0;
    fseek(f, from, SEEK_SET);
    printf("---- daemon log (%s)%s ----\n", g_d.log, from ? ", last 8 KiB" : "");
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

/* Start gfxgraphd --backend hip on g_d.sock with the environment cleaned
 * of GFXGRAPH* / HGB_* plus env ("KEY=VALUE" strings, NULL-terminated). */
static int daemon_start(const char *const *env, const char *what)
{
    snprintf(g_d.what, sizeof g_d.what, "%s", what);
    unlink(g_d.sock);
    FILE *lf = fopen(g_d.log, "a");
    if (lf) {
        fprintf(lf, "==== gfxgraphd --backend %s (%s) ====\n", GG_TEST_BACKEND, what);
        fclose(lf);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        failf("fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(g_d.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
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
        execl(GG_DAEMON_PATH, "gfxgraphd", "--backend", GG_TEST_BACKEND, "--socket", g_d.sock,
              "--log-target", "stderr", (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", GG_DAEMON_PATH, strerror(errno));
        _exit(127);
    }
    g_d.pid = pid;
    double t0 = now_s();
    while (now_s() - t0 < 90) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            g_d.pid = 0;
            failf("gfxgraphd (%s) exited during start-up (status %d)", what,
                  WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            daemon_print_log();
            return -1;
        }
        if (socket_answers(g_d.sock)) {
            printf("# gfxgraphd (%s) pid %d ready after %.1f s\n", what, (int)pid, now_s() - t0);
            return 0;
        }
        sleep_ms(50);
    }
    failf("gfxgraphd (%s) did not answer on %s within 90 s", what, g_d.sock);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    g_d.pid = 0;
    daemon_print_log();
    return -1;
}

static bool daemon_alive(void)
{
    return g_d.pid > 0 && waitpid(g_d.pid, NULL, WNOHANG) == 0;
}

static void daemon_stop(void)
{
    if (g_d.pid <= 0)
        return;
    kill(g_d.pid, SIGTERM);
    int st = 0;
    double t0 = now_s();
    pid_t r = 0;
    while ((r = waitpid(g_d.pid, &st, WNOHANG)) == 0 && now_s() - t0 < 20)
        sleep_ms(20);
    if (r == 0) {
        kill(g_d.pid, SIGKILL);
        waitpid(g_d.pid, &st, 0);
        failf("gfxgraphd (%s) did not stop within 20 s of SIGTERM", g_d.what);
        daemon_print_log();
    } else if (!check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "gfxgraphd (%s) exits 0 on SIGTERM (status %d)", g_d.what,
                      WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st))) {
        daemon_print_log();
    }
    g_d.pid = 0;
}

/* ---- client processes ------------------------------------------------------- */

typedef void (*scn_fn)(const void *arg);

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

/* Run fn(arg) in a child process; its pass/fail counts come back through a
 * pipe.  A child that dies (crash, SIGALRM after timeout_s) is a failure. */
static void run_child(const char *name, scn_fn fn, const void *arg, int timeout_s)
{
    int fd[2];
    set_scn(name);
    if (pipe2(fd, O_CLOEXEC) < 0) {
        failf("pipe: %s", strerror(errno));
        return;
    }
    printf("# %s\n", name);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        failf("fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        alarm((unsigned)timeout_s);
        g_pass = g_fail = 0;
        g_d.pid = 0;            /* not ours to manage */
        fn(arg);
        int cnt[2] = {g_pass, g_fail};
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
    set_scn(name);
    if (n == (ssize_t)sizeof cnt) {
        g_pass += cnt[0];
        g_fail += cnt[1];
        printf("# %s: %d passed, %d failed\n", name, cnt[0], cnt[1]);
    }
    if (n != (ssize_t)sizeof cnt || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            failf("client process ended by signal %d%s", WTERMSIG(st),
                  WTERMSIG(st) == SIGALRM ? " (timed out)" : "");
        else
            failf("client process ended abnormally (exit %d)", WEXITSTATUS(st));
        if (!daemon_alive())
            daemon_print_log();
    }
}

static gg_client *cl_connect(const char *name)
{
    gg_client *c = gg_client_new();
    if (!c) {
        failf("gg_client_new: out of memory");
        return NULL;
    }
    gg_client_set_timeout(c, 60000);
    if (gg_client_connect(c, g_d.sock, name) < 0) {
        failf("connect %s: %s (%s)", g_d.sock, gg_client_last_error(c),
              gg_client_last_error_code(c));
        gg_client_close(c);
        return NULL;
    }
    return c;
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

typedef struct {
    double capture_count, replay_count, eager_count, fallback_count, sessions_active,
        graphs_cached;
} stats_t;

static int get_stats(gg_client *c, stats_t *s)
{
    const msgpack_object *r = NULL;
    int rc = gg_client_call(c, "stats", NULL, 0, &r);
    if (rc < 0) {
        failf("stats: %s (%s)", gg_client_last_error(c), gg_client_last_error_code(c));
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

typedef struct {
    bool ok;
    char gpu[128], arch[64], smoke[200], reason[200], backend[16];
    double vram_total_mb, vram_free_mb;
} health_t;

static int get_health(gg_client *c, health_t *h)
{
    const msgpack_object *r = NULL;
    memset(h, 0, sizeof *h);
    int rc = gg_client_call(c, "health", NULL, 0, &r);
    if (rc < 0) {
        failf("health: %s (%s)", gg_client_last_error(c), gg_client_last_error_code(c));
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

/* Wait (up to timeout_s) until the daemon counts `want` sessions: a client
 * that just closed its connection may still be being torn down.  Returns the
 * last count seen (NAN when stats failed). */
static double wait_sessions(gg_client *c, double want, double timeout_s)
{
    stats_t s;
    double t0 = now_s();
    for (;;) {
        if (get_stats(c, &s) < 0)
            return NAN;
        if (s.sessions_active == want || now_s() - t0 > timeout_s)
            return s.sessions_active;
        sleep_ms(20);
    }
}

/* sm_90, sm_89, gfx1030, gfx90a ... */
static bool arch_ok(const char *a)
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

static void check_health(gg_client *c, const char *when)
{
    health_t h;
    if (get_health(c, &h) < 0)
        return;
    check(h.ok, "%s: health ok (reason: %s)", when, h.reason[0] ? h.reason : "-");
    check(h.gpu[0] != '\0', "%s: health gpu name non-empty", when);
    check(arch_ok(h.arch), "%s: health arch '%s' looks like sm_NN or gfxNNNN", when, h.arch);
    check(h.vram_total_mb > 0 && h.vram_free_mb > 0 && h.vram_free_mb <= h.vram_total_mb,
          "%s: VRAM totals (total %.0f MiB, free %.0f MiB)", when, h.vram_total_mb,
          h.vram_free_mb);
    check(strcmp(h.smoke, "passed") == 0, "%s: details.smoke_test is \"passed\" (got \"%s\")",
          when, h.smoke);
    check(strcmp(h.backend, GG_TEST_BACKEND) == 0, "%s: details.backend is %s (got \"%s\")",
          when, GG_TEST_BACKEND, h.backend);
}

/* ---- programs ---------------------------------------------------------------- */

typedef enum { T_END = 0, T_IN, T_W, T_OUT, T_SCR } tkind;

typedef struct {
    const char *name;
    tkind kind;
    int64_t d0, d1;     /* T_W: [d1] when d0 == 0, else [d0, d1]; others: [batch, d1] */
    float lo, hi;       /* initial values (T_IN, T_W) */
} tspec;

typedef struct {
    const char *op, *in, *out;  /* comma lists of tensor names */
    const char *akey;           /* a float attribute, or NULL */
    double aval;
    const char *skey, *sval;    /* a choice attribute, or NULL */
    int branch;
} nspec;

#define MAXT 12
#define MAXN 8

typedef struct {
    const char *name;
    tspec t[MAXT];
    nspec n[MAXN];
} pspec;

static const pspec P_CHAIN = {
    "chain",
    {{"x", T_IN, 0, 768, -2.0f, 2.0f},
     {"ln0.w", T_W, 0, 768, 0.8f, 1.2f},
     {"ln0.b", T_W, 0, 768, -0.2f, 0.2f},
     {"ln1.w", T_W, 0, 768, 0.8f, 1.2f},
     {"ln1.b", T_W, 0, 768, -0.2f, 0.2f},
     {"t0", T_SCR, 0, 768, 0, 0},
     {"h0", T_SCR, 0, 768, 0, 0},
     {"t1", T_SCR, 0, 768, 0, 0},
     {"y", T_OUT, 0, 768, 0, 0}},
    {{"layernorm", "x,ln0.w,ln0.b", "t0", "eps", 1e-5, NULL, NULL, 0},
     {"gelu", "t0", "h0", NULL, 0, NULL, NULL, 0},
     {"layernorm", "h0,ln1.w,ln1.b", "t1", "eps", 1e-5, NULL, NULL, 0},
     {"gelu", "t1", "y", NULL, 0, "approximate", "tanh", 0}},
};

static const pspec P_MLP = {
    "mlp",
    {{"x", T_IN, 0, 256, -1.0f, 1.0f},
     {"up.w", T_W, 512, 256, -0.0625f, 0.0625f},
     {"up.b", T_W, 0, 512, -0.1f, 0.1f},
     {"down.w", T_W, 256, 512, -0.044f, 0.044f},
     {"down.b", T_W, 0, 256, -0.1f, 0.1f},
     {"h", T_SCR, 0, 512, 0, 0},
     {"g", T_SCR, 0, 512, 0, 0},
     {"y", T_OUT, 0, 256, 0, 0}},
    {{"linear", "x,up.w,up.b", "h", NULL, 0, NULL, NULL, 0},
     {"gelu", "h", "g", NULL, 0, NULL, NULL, 0},
     {"linear", "g,down.w,down.b", "y", NULL, 0, NULL, NULL, 0}},
};

static const pspec P_RMS_SILU = {
    "rmsnorm+silu_mul",
    {{"x", T_IN, 0, 512, -2.0f, 2.0f},
     {"gate", T_IN, 0, 512, -2.0f, 2.0f},
     {"norm.w", T_W, 0, 512, 0.5f, 1.5f},
     {"h", T_SCR, 0, 512, 0, 0},
     {"y", T_OUT, 0, 512, 0, 0}},
    {{"rmsnorm", "x,norm.w", "h", "eps", 1e-6, NULL, NULL, 0},
     {"silu_mul", "h,gate", "y", NULL, 0, NULL, NULL, 0}},
};

static const pspec P_SOFTMAX = {
    "softmax",
    {{"x", T_IN, 0, 1000, -6.0f, 6.0f}, {"y", T_OUT, 0, 1000, 0, 0}},
    {{"softmax", "x", "y", NULL, 0, NULL, NULL, 0}},
};

static const pspec P_ADD = {
    "add-broadcast",
    {{"a", T_IN, 0, 384, -3.0f, 3.0f}, {"b", T_W, 0, 384, -1.0f, 1.0f},
     {"y", T_OUT, 0, 384, 0, 0}},
    {{"add", "a,b", "y", NULL, 0, NULL, NULL, 0}},
};

static const pspec P_BRANCHES = {
    "branches",
    {{"x", T_IN, 0, 320, -3.0f, 3.0f}, {"t", T_SCR, 0, 320, 0, 0},
     {"y", T_OUT, 0, 320, 0, 0}},
    {{"gelu", "x", "y", NULL, 0, NULL, NULL, 0},
     {"softmax", "x", "t", NULL, 0, NULL, NULL, 1},
     {"scale", "t", "y", "scale", 100.0, NULL, NULL, 1}},
};

typedef struct {
    const pspec *spec;
    gg_dtype dt;
    int nt, nn, nbranch;
    size_t es;
    /* device side */
    void *d_in, *d_w, *d_out;              /* allocations */
    size_t in_bytes, w_bytes, out_bytes;   /* registered sizes */
    uint8_t *in_reg;                       /* registered pointer: d_in + IN_SKEW */
    uint64_t id_in, id_w, id_out, prog;
    bool reg_in, reg_w, reg_out, defined;
    /* host side */
    size_t off[MAXT];                      /* offset in its registered buffer */
    size_t bytes[MAXT];
    void *host[MAXT];                      /* inputs/weights; scratch and outputs for refs */
    void *ref[2][MAXT];                    /* outputs per branch */
    void *got;                             /* output copy-back */
} prog_t;

#define IN_SKEW 768                        /* registered pointer into the input allocation */
#define OUT_BASE 256                       /* first output tensor offset in its buffer */

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static float frand(float lo, float hi)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((double)(g_rng >> 40) * (1.0 / 16777216.0));
}

static double tolerance(gg_dtype dt)
{
    return dt == GG_DT_F32 ? 1e-4 : dt == GG_DT_F16 ? 3e-3 : 2e-2;
}

static int tindex(const prog_t *p, const char *name, size_t len)
{
    for (int i = 0; i < p->nt; i++)
        if (strlen(p->spec->t[i].name) == len && strncmp(p->spec->t[i].name, name, len) == 0)
            return i;
    return -1;
}

/* "a, b,c" -> indices; returns the count or -1 */
static int tlist(const prog_t *p, const char *list, int *idx)
{
    int n = 0;
    const char *s = list;
    while (*s) {
        while (*s == ' ' || *s == ',')
            s++;
        if (!*s)
            break;
        size_t len = strcspn(s, ", ");
        int k = tindex(p, s, len);
        if (k < 0 || n == GG_MAX_OPERANDS)
            return -1;
        idx[n++] = k;
        s += len;
    }
    return n;
}

static gg_tensor_desc tdesc(const prog_t *p, int i, int rows)
{
    const tspec *t = &p->spec->t[i];
    gg_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = p->dt;
    if (t->kind == T_W && t->d0 == 0) {
        d.ndim = 1;
        d.dims[0] = t->d1;
    } else {
        d.ndim = 2;
        d.dims[0] = t->kind == T_W ? t->d0 : rows;
        d.dims[1] = t->d1;
    }
    return d;
}

static size_t align256(size_t v)
{
    return (v + 255) & ~(size_t)255;
}

static void prog_free(gg_client *c, prog_t *p)
{
    if (c && gg_client_connected(c)) {
        if (p->defined)
            gg_client_program_release(c, p->prog);
        if (p->reg_in)
            gg_client_buffer_release(c, p->id_in);
        if (p->reg_w)
            gg_client_buffer_release(c, p->id_w);
        if (p->reg_out)
            gg_client_buffer_release(c, p->id_out);
    }
    if (p->d_in)
        hipFree(p->d_in);
    if (p->d_w)
        hipFree(p->d_w);
    if (p->d_out)
        hipFree(p->d_out);
    for (int i = 0; i < MAXT; i++) {
        free(p->host[i]);
        free(p->ref[0][i]);
        free(p->ref[1][i]);
    }
    free(p->got);
    memset(p, 0, sizeof *p);
}

static void node_attrs(const gg_op_def *op, const nspec *n, gg_op_attrs *a)
{
    gg_ops_attr_defaults(op, a);
    if (n->akey) {
        int k = gg_ops_attr_index(op, n->akey);
        if (k >= 0)
            a->v[k] = n->aval;
    }
    if (n->skey) {
        int k = gg_ops_attr_index(op, n->skey);
        if (k >= 0 && op->attrs[k].choices)
            for (int j = 0; op->attrs[k].choices[j]; j++)
                if (strcmp(op->attrs[k].choices[j], n->sval) == 0)
                    a->v[k] = j;
    }
}

/* CPU reference for every branch over all MAXR rows. */
static int prog_reference(prog_t *p)
{
    for (int b = 0; b < p->nbranch; b++) {
        for (int ni = 0; ni < p->nn; ni++) {
            const nspec *n = &p->spec->n[ni];
            if (n->branch != b)
                continue;
            const gg_op_def *op = gg_ops_find(n->op);
            int ii[GG_MAX_OPERANDS], oi[GG_MAX_OPERANDS];
            int nin = tlist(p, n->in, ii), nout = tlist(p, n->out, oi);
            if (!op || nin < 0 || nout < 0) {
                failf("%s: bad node spec %d", p->spec->name, ni);
                return -1;
            }
            gg_tensor in[GG_MAX_OPERANDS], out[GG_MAX_OPERANDS];
            for (int i = 0; i < nin; i++) {
                in[i].data = p->host[ii[i]];
                in[i].desc = tdesc(p, ii[i], MAXR);
            }
            for (int i = 0; i < nout; i++) {
                out[i].data = p->host[oi[i]];
                out[i].desc = tdesc(p, oi[i], MAXR);
            }
            gg_op_attrs a;
            node_attrs(op, n, &a);
            char why[256] = "";
            gg_tensor_desc din[GG_MAX_OPERANDS], dout[GG_MAX_OPERANDS];
            for (int i = 0; i < nin; i++)
                din[i] = in[i].desc;
            for (int i = 0; i < nout; i++)
                dout[i] = out[i].desc;
            if (op->check(op, din, nin, dout, nout, &a, why, sizeof why) < 0) {
                failf("%s: reference node %d: %s", p->spec->name, ni, why);
                return -1;
            }
            gg_ops_run_cpu(op, in, nin, out, nout, &a);
        }
        for (int i = 0; i < p->nt; i++)
            if (p->spec->t[i].kind == T_OUT) {
                p->ref[b][i] = malloc(p->bytes[i]);
                if (!p->ref[b][i]) {
                    failf("out of memory");
                    return -1;
                }
                memcpy(p->ref[b][i], p->host[i], p->bytes[i]);
            }
    }
    return 0;
}

/* Allocate, fill, register, define (and prepare if asked). */
static int prog_setup(gg_client *c, prog_t *p, const pspec *spec, gg_dtype dt, bool prepare)
{
    memset(p, 0, sizeof *p);
    p->spec = spec;
    p->dt = dt;
    p->es = gg_dtype_size(dt);
    while (p->nt < MAXT && spec->t[p->nt].kind != T_END)
        p->nt++;
    while (p->nn < MAXN && spec->n[p->nn].op)
        p->nn++;
    for (int i = 0; i < p->nn; i++)
        if (spec->n[i].branch + 1 > p->nbranch)
            p->nbranch = spec->n[i].branch + 1;

    size_t in_used = 0, w_used = 0, out_used = OUT_BASE, got_bytes = 0;
    for (int i = 0; i < p->nt; i++) {
        gg_tensor_desc d = tdesc(p, i, MAXR);
        p->bytes[i] = gg_desc_bytes(&d);
        p->host[i] = calloc(1, p->bytes[i]);
        if (!p->host[i]) {
            failf("out of memory");
            return -1;
        }
        size_t *used = spec->t[i].kind == T_IN ? &in_used : spec->t[i].kind == T_W ? &w_used
                       : spec->t[i].kind == T_OUT ? &out_used : NULL;
        if (used) {
            p->off[i] = align256(*used);
            *used = p->off[i] + p->bytes[i];
        }
        if (spec->t[i].kind == T_OUT && p->bytes[i] > got_bytes)
            got_bytes = p->bytes[i];
        if (spec->t[i].kind == T_IN || spec->t[i].kind == T_W) {
            int64_t n = gg_desc_numel(&d);
            for (int64_t k = 0; k < n; k++)
                gg_store(p->host[i], dt, k, frand(spec->t[i].lo, spec->t[i].hi));
        }
    }
    p->got = malloc(got_bytes ? got_bytes : 1);
    if (!p->got) {
        failf("out of memory");
        return -1;
    }
    if (prog_reference(p) < 0)
        return -1;

    p->in_bytes = in_used;
    p->w_bytes = w_used ? w_used : 256;
    p->out_bytes = out_used;
    HIP_OK(hipMalloc(&p->d_in, IN_SKEW + p->in_bytes + 4096));
    HIP_OK(hipMalloc(&p->d_w, p->w_bytes));
    HIP_OK(hipMalloc(&p->d_out, p->out_bytes));
    p->in_reg = (uint8_t *)p->d_in + IN_SKEW;
    for (int i = 0; i < p->nt; i++) {
        if (spec->t[i].kind == T_IN)
            HIP_OK(hipMemcpy(p->in_reg + p->off[i], p->host[i], p->bytes[i],
                             hipMemcpyHostToDevice));
        else if (spec->t[i].kind == T_W)
            HIP_OK(hipMemcpy((uint8_t *)p->d_w + p->off[i], p->host[i], p->bytes[i],
                             hipMemcpyHostToDevice));
    }
    HIP_OK(hipDeviceSynchronize());

    int rc = gg_client_buffer_register_device(c, p->in_reg, p->in_bytes, &p->id_in);
    if (!check(rc == 0, "%s/%s: register inputs by a pointer %d bytes into the allocation: %s",
               spec->name, gg_dtype_name(dt), IN_SKEW, rc ? gg_client_last_error(c) : "ok"))
        return -1;
    p->reg_in = true;
    if ((rc = gg_client_buffer_register_device(c, p->d_w, p->w_bytes, &p->id_w)) < 0) {
        failf("%s: register weights: %s", spec->name, gg_client_last_error(c));
        return -1;
    }
    p->reg_w = true;
    if ((rc = gg_client_buffer_register_device(c, p->d_out, p->out_bytes, &p->id_out)) < 0) {
        failf("%s: register outputs: %s", spec->name, gg_client_last_error(c));
        return -1;
    }
    p->reg_out = true;

    char pname[64];
    snprintf(pname, sizeof pname, "%s-%s", spec->name, gg_dtype_name(dt));
    gg_program_def *d = gg_program_def_new(pname);
    if (!d) {
        failf("out of memory");
        return -1;
    }
    const char *dts = gg_dtype_name(dt);
    for (int i = 0; i < p->nt; i++) {
        const tspec *t = &spec->t[i];
        gg_tensor_desc dd = tdesc(p, i, MAXR);
        int64_t dims[2] = {dd.dims[0], dd.dims[1]};
        if (t->kind != T_W)
            dims[0] = GG_BATCH;
        if (t->kind == T_SCR)
            gg_program_def_scratch(d, t->name, dts, dd.ndim, dims);
        else
            gg_program_def_tensor(d, t->name,
                                  t->kind == T_IN ? p->id_in : t->kind == T_W ? p->id_w : p->id_out,
                                  p->off[i], dts, dd.ndim, dims);
    }
    int cur = 0;
    for (int ni = 0; ni < p->nn; ni++) {
        const nspec *n = &spec->n[ni];
        while (cur < n->branch)
            cur = gg_program_def_branch(d);
        gg_program_def_op(d, n->op, n->in, n->out);
        if (n->akey)
            gg_program_def_attr_f(d, n->akey, n->aval);
        if (n->skey)
            gg_program_def_attr_s(d, n->skey, n->sval);
    }
    gg_program_def_buckets(d, NBK, k_buckets);
    if (gg_program_def_error(d)[0]) {
        failf("%s: program builder: %s", pname, gg_program_def_error(d));
        gg_program_def_free(d);
        return -1;
    }
    rc = gg_client_program_define(c, d, &p->prog);
    gg_program_def_free(d);
    if (!check(rc == 0, "%s: program.define: %s", pname, rc ? gg_client_last_error(c) : "ok"))
        return -1;
    p->defined = true;
    if (prepare) {
        int ready = -1, failed = -1;
        rc = gg_client_program_prepare(c, p->prog, 0, NULL, -1, &ready, &failed);
        if (!check(rc == 0 && ready == NBK * p->nbranch && failed == 0,
                   "%s: prepare every bucket: rc %d, ready %d of %d, failed %d (%s)", pname,
                   rc, ready, NBK * p->nbranch, failed, rc ? gg_client_last_error(c) : "-"))
            return -1;
    }
    return 0;
out:
    return -1;
}

typedef enum { EXPECT_NORMAL, EXPECT_FALLBACK } expect_t;

static int bucket_for(int batch)
{
    for (int i = 0; i < NBK; i++)
        if (k_buckets[i] >= batch)
            return k_buckets[i];
    return 0;
}

static int bucket_slot(int bucket)
{
    for (int i = 0; i < NBK; i++)
        if (k_buckets[i] == bucket)
            return i;
    return -1;
}

/* rel-L2 over n elements; inf when got has a non-finite value where ref has
 * none. */
static double rel_l2(const void *got, const void *ref, gg_dtype dt, int64_t n, int64_t *bad)
{
    double num = 0, den = 0;
    *bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double g = gg_load(got, dt, i), r = gg_load(ref, dt, i);
        if (!isfinite(g) && isfinite(r)) {
            *bad = i;
            return INFINITY;
        }
        num += (g - r) * (g - r);
        den += r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Replay batch rows on branch, check the answer and the outputs.  Returns 0
 * when everything matched, 1 on a mismatch, -1 when the connection is gone. */
static int replay_check(gg_client *c, prog_t *p, int batch, int branch, expect_t ex,
                        bool want_captured, int *printed, gg_replay_result *out_res)
{
    char pname[64], why[512] = "";
    size_t wl = 0;
    snprintf(pname, sizeof pname, "%s-%s", p->spec->name, gg_dtype_name(p->dt));
#define WHY(...)                                                                           \
    do {                                                                                   \
        if (wl < sizeof why)                                                               \
            wl += (size_t)snprintf(why + wl, sizeof why - wl, __VA_ARGS__);                \
    } while (0)
    HIP_OK(hipMemset(p->d_out, 0xff, p->out_bytes));
    HIP_OK(hipDeviceSynchronize());
    gg_replay_result r;
    memset(&r, 0, sizeof r);
    int rc = gg_client_replay(c, p->prog, batch, branch, &r);
    if (out_res)
        *out_res = r;
    if (rc < 0) {
        failf("%s batch %d branch %d: replay: %s (%s)", pname, batch, branch,
              gg_client_last_error(c), gg_client_last_error_code(c));
        return gg_client_connected(c) ? 1 : -1;
    }
    int want_bucket = bucket_for(batch);
    gg_replay_path want_path = (ex == EXPECT_NORMAL && want_bucket) ? GG_PATH_GRAPH : GG_PATH_EAGER;
    bool want_fallback = ex == EXPECT_FALLBACK && want_bucket != 0;
    if (r.path != want_path)
        WHY(" path %s (want %s: %s);", r.path == GG_PATH_GRAPH ? "graph" : "eager",
            want_path == GG_PATH_GRAPH ? "graph" : "eager", r.reason[0] ? r.reason : "-");
    if (r.bucket != want_bucket)
        WHY(" bucket %d (want %d);", r.bucket, want_bucket);
    if (r.fallback != want_fallback)
        WHY(" fallback %d (want %d);", r.fallback, want_fallback);
    if (want_fallback && !r.reason[0])
        WHY(" no reason given for the fallback;");
    if (ex == EXPECT_NORMAL && r.captured != want_captured)
        WHY(" captured %d (want %d);", r.captured, want_captured);
    if (r.batch != batch || r.branch != (branch < 0 ? 0 : branch))
        WHY(" echoed batch %d branch %d;", r.batch, r.branch);
    if (!(r.device_us >= 0))
        WHY(" device_us %g;", r.device_us);
    int b = branch < 0 ? 0 : branch;
    double worst = 0;
    for (int i = 0; i < p->nt; i++) {
        if (p->spec->t[i].kind != T_OUT)
            continue;
        gg_tensor_desc d = tdesc(p, i, batch);
        size_t nb = gg_desc_bytes(&d);
        HIP_OK(hipMemcpy(p->got, (uint8_t *)p->d_out + p->off[i], nb, hipMemcpyDeviceToHost));
        int64_t bad;
        double err = rel_l2(p->got, p->ref[b][i], p->dt, gg_desc_numel(&d), &bad);
        if (bad >= 0)
            WHY(" %s: non-finite at %lld (%g, reference %g);", p->spec->t[i].name,
                (long long)bad, gg_load(p->got, p->dt, bad), gg_load(p->ref[b][i], p->dt, bad));
        else if (!(err <= tolerance(p->dt)))
            WHY(" %s: rel-L2 %.3g > %.0e;", p->spec->t[i].name, err, tolerance(p->dt));
        if (!(err <= worst))
            worst = err;
    }
    bool ok = wl == 0;
    g_pass += ok;
    g_fail += !ok;
    if (!ok && (*printed)++ < MAX_FAIL_PRINTS) {
        printf("FAIL [%s]: %s batch %d branch %d:%s\n", g_scn, pname, batch, branch, why);
        fflush(stdout);
    } else if (ok && g_verbose) {
        printf("ok   [%s]: %s batch %2d branch %d: %s bucket %2d%s%s rel-L2 %.2e device %.1f us\n",
               g_scn, pname, batch, branch, r.path == GG_PATH_GRAPH ? "graph" : "eager", r.bucket,
               r.captured ? " captured" : "", r.fallback ? " fallback" : "", worst, r.device_us);
    }
    return ok ? 0 : 1;
#undef WHY
out:
    return 1;
}

typedef struct {
    int replays, graph, eager, fallback;
} run_counts;

/* Batch 1..MAXR on every branch, with the expectations of ex.  seen0: the
 * (branch, bucket) graphs already captured (NULL: none). */
static int prog_run(gg_client *c, prog_t *p, expect_t ex, bool prepared, run_counts *rcnt,
                    const bool (*seen0)[NBK])
{
    bool seen[2][NBK];
    memset(seen, 0, sizeof seen);
    if (seen0)
        memcpy(seen, seen0, sizeof seen);
    int printed = 0, bad = 0;
    for (int batch = 1; batch <= MAXR; batch++)
        for (int b = 0; b < p->nbranch; b++) {
            int slot = bucket_slot(bucket_for(batch));
            bool want_captured = !prepared && slot >= 0 && !seen[b][slot];
            gg_replay_result r;
            int rc = replay_check(c, p, batch, p->nbranch > 1 ? b : -1, ex, want_captured,
                                  &printed, &r);
            if (rc < 0)
                return -1;
            bad += rc;
            if (slot >= 0)
                seen[b][slot] = true;
            if (rcnt) {
                rcnt->replays++;
                rcnt->graph += r.path == GG_PATH_GRAPH;
                rcnt->eager += r.path == GG_PATH_EAGER;
                rcnt->fallback += r.fallback;
            }
        }
    if (printed > MAX_FAIL_PRINTS)
        printf("FAIL [%s]: %s-%s: %d more mismatches not shown\n", g_scn, p->spec->name,
               gg_dtype_name(p->dt), printed - MAX_FAIL_PRINTS);
    printf("#   %s-%s: %d of %d replays matched\n", p->spec->name, gg_dtype_name(p->dt),
           MAXR * p->nbranch - bad, MAXR * p->nbranch);
    return bad;
}

static int dev_init(void)
{
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n < 1) {
        failf("no device in the client process (%s)", e != hipSuccess ? hipGetErrorString(e)
                                                                       : "0 devices");
        return -1;
    }
    e = hipSetDevice(0);
    if (e != hipSuccess) {
        failf("hipSetDevice(0): %s", hipGetErrorString(e));
        return -1;
    }
    return 0;
}

/* ---- scenarios (each runs in its own client process) ----------------------- */

static void scn_hello_health(const void *arg)
{
    (void)arg;
    if (dev_init() < 0)
        return;
    gg_client *c = cl_connect("test_gpu_daemon/hello");
    if (!c)
        return;
    check(strcmp(gg_client_backend(c), GG_TEST_BACKEND) == 0, "hello: backend %s (got \"%s\")",
          GG_TEST_BACKEND, gg_client_backend(c));
    check(gg_client_device_name(c)[0] != '\0', "hello: device name \"%s\"",
          gg_client_device_name(c));
    check(arch_ok(gg_client_device_arch(c)), "hello: device arch \"%s\"",
          gg_client_device_arch(c));
    printf("#   device: %s (%s), daemon %s\n", gg_client_device_name(c), gg_client_device_arch(c),
           gg_client_server_version(c));
    check_health(c, "fresh daemon");
    double n = wait_sessions(c, 1, 15);
    check(n == 1, "stats: sessions_active is 1, this client's (got %g)", n);

    /* A pointer that is not device memory is refused by the library with a
     * message, and a size past the allocation too. */
    uint64_t id;
    int host_word = 0;
    check(gg_client_buffer_register_device(c, &host_word, sizeof host_word, &id) < 0,
          "register_device refuses host memory");
    void *d = NULL;
    if (hipMalloc(&d, 4096) == hipSuccess) {
        check(gg_client_buffer_register_device(c, (uint8_t *)d + 1024, 4096, &id) < 0,
              "register_device refuses a size past the end of the allocation");
        int rc = gg_client_buffer_register_device(c, (uint8_t *)d + 1024, 3072, &id);
        check(rc == 0, "register_device takes the rest of the allocation from an offset: %s",
              rc ? gg_client_last_error(c) : "ok");
        if (rc == 0)
            check(gg_client_buffer_release(c, id) == 0, "buffer.release");
        hipFree(d);
    }
    gg_client_close(c);
}

static void scn_programs(const void *arg)
{
    gg_dtype dt = *(const gg_dtype *)arg;
    if (dev_init() < 0)
        return;
    gg_client *c = cl_connect("test_gpu_daemon/programs");
    if (!c)
        return;
    const pspec *specs[] = {&P_CHAIN, &P_MLP, &P_RMS_SILU, &P_SOFTMAX, &P_ADD};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        prog_t p;
        bool prepare = specs[i] == &P_CHAIN;
        if (prog_setup(c, &p, specs[i], dt, prepare) == 0) {
            run_counts rc = {0, 0, 0, 0};
            if (prog_run(c, &p, EXPECT_NORMAL, prepare, &rc, NULL) < 0) {
                prog_free(c, &p);
                break;
            }
            check(rc.graph == TOP && rc.eager == MAXR - TOP && rc.fallback == 0,
                  "%s-%s: %d graph, %d eager, %d fallback (want %d, %d, 0)", specs[i]->name,
                  gg_dtype_name(dt), rc.graph, rc.eager, rc.fallback, TOP, MAXR - TOP);
        }
        prog_free(c, &p);
    }
    gg_client_close(c);
}

static void scn_branches(const void *arg)
{
    gg_dtype dt = *(const gg_dtype *)arg;
    if (dev_init() < 0)
        return;
    gg_client *c = cl_connect("test_gpu_daemon/branches");
    if (!c)
        return;
    prog_t p;
    wait_sessions(c, 1, 15);        /* the cache counts below are daemon-wide */
    if (prog_setup(c, &p, &P_BRANCHES, dt, false) == 0) {
        stats_t s0, s1;
        int printed = 0;
        if (get_stats(c, &s0) == 0) {
            /* batch 5: bucket 8; each branch captures its own graph once */
            gg_replay_result r0, r1, r2, r3;
            replay_check(c, &p, 5, 0, EXPECT_NORMAL, true, &printed, &r0);
            replay_check(c, &p, 5, 1, EXPECT_NORMAL, true, &printed, &r1);
            replay_check(c, &p, 6, 0, EXPECT_NORMAL, false, &printed, &r2);
            replay_check(c, &p, 7, 1, EXPECT_NORMAL, false, &printed, &r3);
            if (get_stats(c, &s1) == 0) {
                check(s1.capture_count - s0.capture_count == 2,
                      "branches: two captures for two branches at one bucket (got %g)",
                      s1.capture_count - s0.capture_count);
                check(s1.graphs_cached - s0.graphs_cached == 2,
                      "branches: two cache entries (got %g more)",
                      s1.graphs_cached - s0.graphs_cached);
            }
            /* and the whole sweep on both branches (bucket 8 is cached) */
            bool seen[2][NBK];
            memset(seen, 0, sizeof seen);
            seen[0][bucket_slot(8)] = seen[1][bucket_slot(8)] = true;
            prog_run(c, &p, EXPECT_NORMAL, false, NULL, (const bool (*)[NBK])seen);
        }
    }
    prog_free(c, &p);
    gg_client_close(c);
}

typedef struct {
    const char *fault;
} fault_arg;

static void scn_fault(const void *arg)
{
    const fault_arg *fa = arg;
    if (dev_init() < 0)
        return;
    gg_client *c = cl_connect("test_gpu_daemon/fault");
    if (!c)
        return;
    stats_t s0, s1;
    if (get_stats(c, &s0) < 0) {
        gg_client_close(c);
        return;
    }
    gg_dtype dts[] = {GG_DT_F32, GG_DT_F16};
    run_counts rc = {0, 0, 0, 0};
    for (int k = 0; k < 2; k++) {
        prog_t p;
        const pspec *spec = k == 0 ? &P_CHAIN : &P_MLP;
        if (prog_setup(c, &p, spec, dts[k], false) == 0) {
            /* prepare under a capture/instantiate fault reports failures */
            if (strcmp(fa->fault, "launch") != 0 && k == 0) {
                int ready = -1, failed = -1;
                int r = gg_client_program_prepare(c, p.prog, 0, NULL, -1, &ready, &failed);
                check(r == 0 && ready == 0 && failed == NBK,
                      "GFXGRAPH_FAULT=%s: prepare reports %d failed, %d ready (want %d, 0): %s",
                      fa->fault, failed, ready, NBK, r ? gg_client_last_error(c) : "ok");
            }
            prog_run(c, &p, EXPECT_FALLBACK, false, &rc, NULL);
        }
        prog_free(c, &p);
    }
    if (get_stats(c, &s1) == 0) {
        double fb = s1.fallback_count - s0.fallback_count;
        check(fb == rc.fallback && rc.fallback == 2 * TOP,
              "GFXGRAPH_FAULT=%s: stats fallback_count %g, replies with fallback %d (want %d)",
              fa->fault, fb, rc.fallback, 2 * TOP);
        check(s1.replay_count - s0.replay_count == 0,
              "GFXGRAPH_FAULT=%s: no graph replays counted (got %g)", fa->fault,
              s1.replay_count - s0.replay_count);
        check(s1.eager_count - s0.eager_count == 2 * MAXR,
              "GFXGRAPH_FAULT=%s: eager_count %g (want %d)", fa->fault,
              s1.eager_count - s0.eager_count, 2 * MAXR);
    }
    check_health(c, "after faults");
    gg_client_close(c);
}

static void scn_hostfn(const void *arg)
{
    (void)arg;
    if (dev_init() < 0)
        return;
    gg_client *c = cl_connect("test_gpu_daemon/hostfn");
    if (!c)
        return;
    const pspec *specs[] = {&P_CHAIN, &P_MLP};
    gg_dtype dts[] = {GG_DT_F16, GG_DT_F32};
    for (int i = 0; i < 2; i++) {
        prog_t p;
        if (prog_setup(c, &p, specs[i], dts[i], false) == 0)
            prog_run(c, &p, EXPECT_NORMAL, false, NULL, NULL);
        prog_free(c, &p);
    }
    check_health(c, "hostfn completion");
    gg_client_close(c);
}

/* The victim: replays forever; says so on fd after 20 replays. */
static void scn_victim(int fd)
{
    if (dev_init() < 0)
        _exit(2);
    gg_client *c = cl_connect("test_gpu_daemon/victim");
    if (!c)
        _exit(2);
    prog_t p;
    if (prog_setup(c, &p, &P_MLP, GG_DT_F32, false) < 0)
        _exit(2);
    for (long i = 0;; i++) {
        int rc = gg_client_replay(c, p.prog, 1 + (int)(i % MAXR), -1, NULL);
        if (rc < 0)
            _exit(2);
        if (i == 20) {
            char ch = 'r';
            if (write(fd, &ch, 1) != 1)
                _exit(2);
        }
    }
}

static void scn_after_kill(const void *arg)
{
    const int *round = arg;
    if (dev_init() < 0)
        return;
    gg_client *c = cl_connect("test_gpu_daemon/after-kill");
    if (!c)
        return;
    double t0 = now_s();
    double n = wait_sessions(c, 1, 15);
    check(n == 1, "kill %d: the killed client's session is gone (sessions_active %g after "
          "%.1f s)", *round, n, now_s() - t0);
    check_health(c, "after a killed client");
    prog_t p;
    if (prog_setup(c, &p, &P_SOFTMAX, GG_DT_F32, false) == 0)
        prog_run(c, &p, EXPECT_NORMAL, false, NULL, NULL);
    prog_free(c, &p);
    gg_client_close(c);
}

static void kill_round(int round, int delay_ms)
{
    char name[64];
    snprintf(name, sizeof name, "killed client %d", round);
    set_scn(name);
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0) {
        failf("pipe: %s", strerror(errno));
        return;
    }
    printf("# %s (SIGKILL %d ms into its replays)\n", name, delay_ms);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        failf("fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        alarm(120);
        g_d.pid = 0;
        scn_victim(fd[1]);
        _exit(0);
    }
    close(fd[1]);
    struct pollfd pf = {fd[0], POLLIN, 0};
    char ch = 0;
    bool running = poll(&pf, 1, 90000) == 1 && read(fd[0], &ch, 1) == 1 && ch == 'r';
    close(fd[0]);
    if (running)
        sleep_ms(delay_ms);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    check(running, "%s: the victim was replaying when killed", name);
    sleep_ms(50);
    if (!check(daemon_alive(), "%s: gfxgraphd is still running", name)) {
        daemon_print_log();
        return;
    }
    run_child(name, scn_after_kill, &round, 180);
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

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *v = getenv("GG_TEST_VERBOSE");
    g_verbose = v && *v && strcmp(v, "0") != 0;
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

    snprintf(g_d.dir, sizeof g_d.dir, "/tmp/gg-gpu-daemon-XXXXXX");
    if (!mkdtemp(g_d.dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_d.sock, sizeof g_d.sock, "%s/gfxgraphd.sock", g_d.dir);
    snprintf(g_d.log, sizeof g_d.log, "%s/gfxgraphd.log", g_d.dir);
    printf("# daemon %s, socket %s\n", GG_DAEMON_PATH, g_d.sock);
    double t0 = now_s();

    static const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    if (daemon_start(NULL, "default") == 0) {
        run_child("hello and health", scn_hello_health, NULL, 120);
        for (int i = 0; i < 3; i++) {
            char name[64];
            snprintf(name, sizeof name, "programs %s", gg_dtype_name(dts[i]));
            run_child(name, scn_programs, &dts[i], 300);
        }
        run_child("branches f32", scn_branches, &dts[0], 120);
        run_child("branches bf16", scn_branches, &dts[2], 120);
        kill_round(1, 0);
        kill_round(2, 3);
        kill_round(3, 25);
        run_child("health at the end", scn_hello_health, NULL, 120);
        daemon_stop();
    }

    static const char *const env_hostfn[] = {"GFXGRAPH_COMPLETION=hostfn", NULL};
    if (daemon_start(env_hostfn, "GFXGRAPH_COMPLETION=hostfn") == 0) {
        run_child("completion by host functions", scn_hostfn, NULL, 180);
        daemon_stop();
    }

    static const char *const faults[] = {"capture", "instantiate", "launch"};
    static fault_arg fargs[3];
    for (int i = 0; i < 3; i++) {
        char kv[64], name[96];
        snprintf(kv, sizeof kv, "GFXGRAPH_FAULT=%s", faults[i]);
        const char *env[] = {kv, NULL};
        fargs[i].fault = faults[i];
        snprintf(name, sizeof name, "fault injection: %s", kv);
        if (daemon_start(env, kv) == 0) {
            run_child(name, scn_fault, &fargs[i], 180);
            daemon_stop();
        }
    }

    if (g_fail == 0) {
        unlink(g_d.log);
        unlink(g_d.sock);
        rmdir(g_d.dir);
    } else {
        printf("# daemon log kept in %s\n", g_d.log);
    }
    printf("# %.1f s\n", now_s() - t0);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
