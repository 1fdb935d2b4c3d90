/* SPDX-License-Identifier: MIT */
/* bench_rps: requests per second against one server, N clients with one
 * request in flight each, for a fixed time.  One load generator for two
 * servers, so that both are driven by the same kind of client:
 *
 *   gfxgraph  gg_client_replay() of a 1-node program (one `scale` on
 *             [1, D] f32, D = 64 by default: tiny tensors) in shm buffers,
 *             always a cache hit (prepared and warmed up before the clock
 *             starts).  The client library picks the path: the fast path
 *             when the daemon offers it, the socket with GFXGRAPH_FASTPATH=0
 *             in this process's environment.
 *   redis     "PING\r\n" -> "+PONG\r\n" over a Unix socket (an inline
 *             command: the smallest request Redis answers).
 *
 *   bench_rps --target gfxgraph|redis --socket PATH [--clients N]
 *             [--procs] [--seconds S] [--warmup N] [--d D]
 *             [--alloc-daemon FILE] [--json FILE] [--label TEXT]
 *             [--commit SHA] [--server-version TEXT]
 *
 * Clients are threads of this process (each its own connection: for
 * gfxgraph its own gg_client, so its own session), or with --procs
 * processes.  Each sets up, makes --warmup requests, and waits; then all
 * start at once and run until the time is up, timing every request with
 * CLOCK_MONOTONIC into a histogram (1/64-octave bins: percentiles within
 * about 1.6%).  requests/s is every completed request over the time from
 * start to stop.
 *
 * Allocations (the LD_PRELOAD shim tests/alloc_count.c): when this process
 * runs under it ($GG_ALLOC_COUNT_FILE), its own allocations during the timed
 * window are reported per request ("client"); --alloc-daemon names the
 * server's counter file, read at start and stop ("daemon").  Both include
 * whatever else the process did meanwhile (nothing, for this program's
 * coordinator; the server's background work).
 *
 * The last line of output is a table row starting with "RESULT".  It
 * measures; nothing is asserted.  Exit status: 0; 1 when a client failed;
 * 2 when the server cannot be reached; 64 usage. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gfxgraph/client.h>

#define MAX_CLIENTS 512
#define NBINS 2560     /* 128 exact ns bins, then 64 per octave up to 2^40 ns */

typedef enum { T_GFXGRAPH, T_REDIS } target_kind;

typedef struct {
    target_kind target;
    const char *socket;
    int clients, warmup, d;
    bool procs;
    double seconds;
    const char *alloc_daemon, *json, *label, *commit, *server_version;
} options;

/* one client's results, in memory shared with the coordinator */
typedef struct {
    int ok;
    char err[256];
    uint64_t n;                       /* timed requests */
    double sum_ns;
    uint64_t max_ns;
    uint64_t graph, eager, captured, fallback;   /* gfxgraph: the replays' paths */
    double device_us_sum;
    char fastpath[128];               /* gfxgraph: gg_client_fastpath_status() after warm-up */
    uint64_t hist[NBINS];
} client_out;

typedef struct {
    _Atomic uint32_t ready, failed;
    _Atomic uint32_t go;              /* futex word: 1 = start */
    _Atomic uint32_t stop;
    client_out out[];
} shared_ctl;

static shared_ctl *ctl;
static options opt;

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int bin_of(uint64_t v)
{
    if (v < 128)
        return (int)v;
    int top = 63 - __builtin_clzll(v);       /* >= 7 */
    int shift = top - 6;                     /* v >> shift in [64, 128) */
    int b = 128 + (shift - 1) * 64 + (int)((v >> shift) - 64);
    return b < NBINS ? b : NBINS - 1;
}

/* the bin's midpoint, ns */
static double bin_value(int b)
{
    if (b < 128)
        return b;
    int shift = (b - 128) / 64 + 1;
    uint64_t lo = (uint64_t)(64 + (b - 128) % 64) << shift;
    return (double)lo + (double)((1ull << shift) - 1) / 2.0;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
    struct timespec ts = {0, 50 * 1000 * 1000};
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* ---- redis ------------------------------------------------------------------ */

static int unix_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int redis_ping(int fd)
{
    static const char req[] = "PING\r\n", rep[] = "+PONG\r\n";
    size_t off = 0;
    while (off < sizeof req - 1) {
        ssize_t w = write(fd, req + off, sizeof req - 1 - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -EIO;
        off += (size_t)w;
    }
    char buf[16];
    off = 0;
    while (off < sizeof rep - 1) {
        ssize_t r = read(fd, buf + off, sizeof rep - 1 - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -EIO;
        off += (size_t)r;
    }
    return memcmp(buf, rep, sizeof rep - 1) == 0 ? 0 : -EPROTO;
}

/* ---- gfxgraph ------------------------------------------------------------------ */

typedef struct {
    gg_client *c;
    char shm[64];
    void *host;
    size_t size;
    uint64_t buf, prog;
} gg_state;

static int gg_fail(client_out *o, const char *what, gg_client *c)
{
    snprintf(o->err, sizeof o->err, "%s: %s (%s)", what, c ? gg_client_last_error(c) : "",
             c ? gg_client_last_error_code(c) : "");
    return -1;
}

static int gg_setup(int idx, gg_state *s, client_out *o)
{
    memset(s, 0, sizeof *s);
    s->c = gg_client_new();
    if (!s->c) {
        snprintf(o->err, sizeof o->err, "out of memory");
        return -1;
    }
    gg_client_set_timeout(s->c, 60000);
    char name[48];
    snprintf(name, sizeof name, "bench_rps/%d", idx);
    if (gg_client_connect(s->c, opt.socket, name) < 0)
        return gg_fail(o, "connect", s->c);
    s->size = 2 * (size_t)opt.d * sizeof(float);
    snprintf(s->shm, sizeof s->shm, "/gg-rps-%ld-%d", (long)getpid(), idx);
    int rc = gg_client_shm_create(s->shm, s->size, &s->host);
    if (rc < 0) {
        snprintf(o->err, sizeof o->err, "shm %s: %s", s->shm, strerror(-rc));
        s->host = NULL;
        return -1;
    }
    float *x = s->host;
    for (int i = 0; i < opt.d; i++)
        x[i] = (float)i;
    rc = gg_client_buffer_register_shm(s->c, s->shm, 0, s->size, &s->buf);
    gg_client_shm_destroy(s->shm, NULL, 0);      /* the daemon keeps its mapping */
    if (rc < 0)
        return gg_fail(o, "buffer.register", s->c);
    const int64_t dims[] = {GG_BATCH, opt.d};
    const int buckets[] = {1};
    gg_program_def *pd = gg_program_def_new("rps-onenode");
    if (!pd) {
        snprintf(o->err, sizeof o->err, "out of memory");
        return -1;
    }
    gg_program_def_buckets(pd, 1, buckets);
    gg_program_def_tensor(pd, "x", s->buf, 0, "f32", 2, dims);
    gg_program_def_tensor(pd, "y", s->buf, (uint64_t)opt.d * sizeof(float), "f32", 2, dims);
    gg_program_def_op(pd, "scale", "x", "y");
    gg_program_def_attr_f(pd, "scale", 0.5);
    rc = gg_client_program_define(s->c, pd, &s->prog);
    gg_program_def_free(pd);
    if (rc < 0)
        return gg_fail(o, "program.define", s->c);
    int bucket = 1;
    rc = gg_client_program_prepare(s->c, s->prog, 1, &bucket, 0, NULL, NULL);
    if (rc < 0 && rc != -EPERM)
        return gg_fail(o, "program.prepare", s->c);
    return 0;
}

static void gg_teardown(gg_state *s)
{
    if (s->c && gg_client_connected(s->c)) {
        if (s->prog)
            gg_client_program_release(s->c, s->prog);
        if (s->buf)
            gg_client_buffer_release(s->c, s->buf);
    }
    if (s->host)
        gg_client_shm_destroy(NULL, s->host, s->size);
    gg_client_close(s->c);
}

/* ---- one client --------------------------------------------------------------- */

static void wait_go(void)
{
    while (atomic_load(&ctl->go) == 0)
        futex_wait(&ctl->go, 0);
}

static void client_run(int idx)
{
    client_out *o = &ctl->out[idx];
    gg_state gs;
    int fd = -1;
    int rc;
    memset(&gs, 0, sizeof gs);
    if (opt.target == T_GFXGRAPH) {
        rc = gg_setup(idx, &gs, o);
        for (int i = 0; rc == 0 && i < opt.warmup; i++)
            if (gg_client_replay(gs.c, gs.prog, 1, 0, NULL) < 0)
                rc = gg_fail(o, "warm-up replay", gs.c);
        if (gs.c)
            snprintf(o->fastpath, sizeof o->fastpath, "%s", gg_client_fastpath_status(gs.c));
    } else {
        fd = unix_connect(opt.socket);
        rc = fd < 0 ? -1 : 0;
        if (fd < 0)
            snprintf(o->err, sizeof o->err, "connect %s: %s", opt.socket, strerror(-fd));
        for (int i = 0; rc == 0 && i < opt.warmup; i++)
            if ((rc = redis_ping(fd)) < 0)
                snprintf(o->err, sizeof o->err, "warm-up PING: %s", strerror(-rc));
    }
    if (rc < 0)
        atomic_fetch_add(&ctl->failed, 1);
    else
        atomic_fetch_add(&ctl->ready, 1);
    wait_go();
    if (rc == 0 && atomic_load(&ctl->go) == 1) {
        o->ok = 1;
        while (!atomic_load_explicit(&ctl->stop, memory_order_relaxed)) {
            uint64_t t0 = now_ns();
            if (opt.target == T_GFXGRAPH) {
                gg_replay_result r;
                if (gg_client_replay(gs.c, gs.prog, 1, 0, &r) < 0) {
                    gg_fail(o, "replay", gs.c);
                    o->ok = 0;
                    break;
                }
                o->graph += r.path == GG_PATH_GRAPH;
                o->eager += r.path == GG_PATH_EAGER;
                o->captured += r.captured;
                o->fallback += r.fallback;
                o->device_us_sum += r.device_us;
            } else if ((rc = redis_ping(fd)) < 0) {
                snprintf(o->err, sizeof o->err, "PING: %s", strerror(-rc));
                o->ok = 0;
                break;
            }
            uint64_t dt = now_ns() - t0;
            o->n++;
            o->sum_ns += (double)dt;
            if (dt > o->max_ns)
                o->max_ns = dt;
            o->hist[bin_of(dt)]++;
        }
    }
    if (opt.target == T_GFXGRAPH)
        gg_teardown(&gs);
    if (fd >= 0)
        close(fd);
}

static void *client_thread(void *arg)
{
    client_run((int)(intptr_t)arg);
    return NULL;
}

/* ---- the coordinator ---------------------------------------------------------------- */

static const volatile uint64_t *map_counter(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    if (memcmp(p, "GGALLOC1", 8) != 0) {
        munmap(p, 4096);
        return NULL;
    }
    return p;
}

static uint64_t counter_total(const volatile uint64_t *c)
{
    return c ? atomic_load((_Atomic uint64_t *)&c[1]) : 0;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.3f", v);
    else
        fputs("null", f);
}

static void cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, len, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

/* "0-1" or "0" or "0,2" */
static void affinity_str(char *buf, size_t len)
{
    cpu_set_t set;
    buf[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        snprintf(buf, len, "?");
        return;
    }
    size_t o = 0;
    for (int i = 0; i < CPU_SETSIZE && o + 16 < len; i++) {
        if (!CPU_ISSET(i, &set))
            continue;
        int j = i;
        while (j + 1 < CPU_SETSIZE && CPU_ISSET(j + 1, &set))
            j++;
        o += (size_t)snprintf(buf + o, len - o, o ? ",%d" : "%d", i);
        if (j > i)
            o += (size_t)snprintf(buf + o, len - o, "-%d", j);
        i = j;
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_rps --target gfxgraph|redis --socket PATH [--clients N] [--procs]\n"
            "                 [--seconds S] [--warmup N] [--d D] [--alloc-daemon FILE]\n"
            "                 [--json FILE] [--label TEXT] [--commit SHA] [--server-version TEXT]\n"
            "\n"
            "  --target T         gfxgraph: 1-node replay (cache hit); redis: PING\n"
            "  --socket PATH      the server's Unix socket (required for redis)\n"
            "  --clients N        clients, one request in flight each (1)\n"
            "  --procs            clients are processes (default: threads of this process)\n"
            "  --seconds S        timed run length (2)\n"
            "  --warmup N         untimed requests per client first (200)\n"
            "  --d D              gfxgraph: the tensor's width, [1, D] f32 (64)\n"
            "  --alloc-daemon F   the server's alloc_count file: its allocations per request\n"
            "  --json FILE        write the result with provenance\n"
            "  --label TEXT       a name for this run\n"
            "  --commit SHA       the source's git commit ($GFXGRAPH_GIT_COMMIT)\n"
            "  --server-version T recorded as the server's version (redis)\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    opt = (options){T_GFXGRAPH, NULL, 1, 200, 64, false, 2.0, NULL, NULL, NULL, NULL, NULL};
    bool have_target = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool bad = false;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--procs")) {
            opt.procs = true;
            continue;
        }
        if (!v) {
            bad = true;
        } else if (!strcmp(a, "--target")) {
            have_target = true;
            if (!strcmp(v, "gfxgraph")) opt.target = T_GFXGRAPH;
            else if (!strcmp(v, "redis")) opt.target = T_REDIS;
            else bad = true;
        } else if (!strcmp(a, "--socket")) {
            opt.socket = v;
        } else if (!strcmp(a, "--clients")) {
            bad = parse_int(v, 1, MAX_CLIENTS, &opt.clients) < 0;
        } else if (!strcmp(a, "--warmup")) {
            bad = parse_int(v, 0, 10000000, &opt.warmup) < 0;
        } else if (!strcmp(a, "--d")) {
            bad = parse_int(v, 1, 1 << 20, &opt.d) < 0;
        } else if (!strcmp(a, "--seconds")) {
            char *end;
            opt.seconds = strtod(v, &end);
            bad = end == v || *end || !(opt.seconds > 0 && opt.seconds <= 3600);
        } else if (!strcmp(a, "--alloc-daemon")) {
            opt.alloc_daemon = v;
        } else if (!strcmp(a, "--json")) {
            opt.json = v;
        } else if (!strcmp(a, "--label")) {
            opt.label = v;
        } else if (!strcmp(a, "--commit")) {
            opt.commit = v;
        } else if (!strcmp(a, "--server-version")) {
            opt.server_version = v;
        } else {
            bad = true;
        }
        if (bad) {
            fprintf(stderr, "bench_rps: bad or incomplete option '%s%s%s'\n", a, v ? " " : "",
                    v ? v : "");
            usage(stderr);
            return 64;
        }
        i++;
    }
    if (!have_target || (opt.target == T_REDIS && !opt.socket)) {
        usage(stderr);
        return 64;
    }
    if (!opt.commit)
        opt.commit = getenv("GFXGRAPH_GIT_COMMIT");
    signal(SIGPIPE, SIG_IGN);

    /* what the server is, for the provenance */
    char backend[16] = "", version[64] = "", device[128] = "", arch[64] = "", sock[256] = "";
    const char *fp_env = getenv("GFXGRAPH_FASTPATH");
    if (opt.target == T_GFXGRAPH) {
        gg_client *c = gg_client_new();
        if (!c || gg_client_connect(c, opt.socket, "bench_rps") < 0) {
            fprintf(stderr, "bench_rps: %s\n", c ? gg_client_last_error(c) : "out of memory");
            gg_client_close(c);
            return 2;
        }
        snprintf(backend, sizeof backend, "%s", gg_client_backend(c));
        snprintf(version, sizeof version, "%s", gg_client_server_version(c));
        snprintf(device, sizeof device, "%s", gg_client_device_name(c));
        snprintf(arch, sizeof arch, "%s", gg_client_device_arch(c));
        snprintf(sock, sizeof sock, "%s", gg_client_socket_path(c));
        gg_client_close(c);
    } else {
        int fd = unix_connect(opt.socket);
        if (fd < 0 || redis_ping(fd) < 0) {
            fprintf(stderr, "bench_rps: no PONG from %s: %s\n", opt.socket,
                    fd < 0 ? strerror(-fd) : "bad answer");
            if (fd >= 0)
                close(fd);
            return 2;
        }
        close(fd);
        snprintf(sock, sizeof sock, "%s", opt.socket);
        snprintf(version, sizeof version, "%s", opt.server_version ? opt.server_version : "");
    }

    size_t shsize = sizeof(shared_ctl) + (size_t)opt.clients * sizeof(client_out);
    ctl = mmap(NULL, shsize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ctl == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    const volatile uint64_t *dcount = NULL, *ccount = NULL;
    if (opt.alloc_daemon && !(dcount = map_counter(opt.alloc_daemon)))
        fprintf(stderr, "bench_rps: %s: no alloc_count file (is the server under the shim?)\n",
                opt.alloc_daemon);
    const char *cf = getenv("GG_ALLOC_COUNT_FILE");
    if (cf && *cf && !(ccount = map_counter(cf)))
        fprintf(stderr, "bench_rps: GG_ALLOC_COUNT_FILE=%s: not written by the shim\n", cf);

    /* start the clients */
    pthread_t th[MAX_CLIENTS];
    pid_t pids[MAX_CLIENTS];
    int n = 0;
    for (; n < opt.clients; n++) {
        if (opt.procs) {
            fflush(stdout);
            pid_t p = fork();
            if (p < 0) {
                perror("fork");
                break;
            }
            if (p == 0) {
                client_run(n);
                _exit(0);
            }
            pids[n] = p;
        } else if (pthread_create(&th[n], NULL, client_thread, (void *)(intptr_t)n) != 0) {
            perror("pthread_create");
            break;
        }
    }
    uint64_t wait_until = now_ns() + 300ull * 1000000000ull;
    while (atomic_load(&ctl->ready) + atomic_load(&ctl->failed) < (uint32_t)n &&
           now_ns() < wait_until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    bool start = n == opt.clients && atomic_load(&ctl->ready) == (uint32_t)n;

    /* the timed window */
    uint64_t d0 = counter_total(dcount), c0 = counter_total(ccount);
    uint64_t t0 = now_ns();
    atomic_store(&ctl->go, start ? 1 : 2);
    futex_wake_all(&ctl->go);
    if (start) {
        uint64_t end = t0 + (uint64_t)(opt.seconds * 1e9);
        for (uint64_t t = now_ns(); t < end; t = now_ns()) {
            uint64_t left = end - t;
            struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
            nanosleep(&ts, NULL);
        }
    }
    atomic_store(&ctl->stop, 1);
    uint64_t t1 = now_ns();
    uint64_t d1 = counter_total(dcount), c1 = counter_total(ccount);
    for (int k = 0; k < n; k++) {
        if (opt.procs)
            waitpid(pids[k], NULL, 0);
        else
            pthread_join(th[k], NULL);
    }

    /* results: the path is what the clients' library said it used */
    const char *path_name = "ping";
    bool mixed = false;
    if (opt.target == T_GFXGRAPH) {
        path_name = strncmp(ctl->out[0].fastpath, "active", 6) == 0 ? "fast" : "socket";
        for (int k = 1; k < n; k++)
            mixed |= (strncmp(ctl->out[k].fastpath, "active", 6) == 0) !=
                     (strcmp(path_name, "fast") == 0);
        if (mixed) {
            path_name = "mixed";
            fprintf(stderr, "bench_rps: some clients used the fast path and some did not\n");
        }
    }
    char label[128];
    if (opt.label)
        snprintf(label, sizeof label, "%s", opt.label);
    else
        snprintf(label, sizeof label, "%s-%s-c%d", opt.target == T_REDIS ? "redis" : "gfxgraph",
                 path_name, opt.clients);
    int failed = n < opt.clients ? opt.clients - n : 0;
    uint64_t total = 0, maxns = 0, graph = 0, eager = 0, captured = 0, fallback = 0;
    double sum = 0, devsum = 0, cmin = INFINITY, cmax = 0;
    static uint64_t hist[NBINS];
    double wall = (double)(t1 - t0) * 1e-9;
    for (int k = 0; k < n; k++) {
        client_out *o = &ctl->out[k];
        if (!o->ok) {
            failed++;
            fprintf(stderr, "bench_rps: client %d: %s\n", k,
                    o->err[0] ? o->err : "did not start (another client failed)");
        }
        total += o->n;
        sum += o->sum_ns;
        if (o->max_ns > maxns)
            maxns = o->max_ns;
        graph += o->graph;
        eager += o->eager;
        captured += o->captured;
        fallback += o->fallback;
        devsum += o->device_us_sum;
        double r = (double)o->n / wall;
        if (r < cmin)
            cmin = r;
        if (r > cmax)
            cmax = r;
        for (int b = 0; b < NBINS; b++)
            hist[b] += o->hist[b];
    }
    if (total == 0) {
        fprintf(stderr, "bench_rps: no requests were timed\n");
        return 1;
    }
    double pv[3] = {50, 90, 99}, pr[3];
    for (int q = 0; q < 3; q++) {
        uint64_t rank = (uint64_t)ceil(pv[q] / 100.0 * (double)total), acc = 0;
        if (rank < 1)
            rank = 1;
        pr[q] = NAN;
        for (int b = 0; b < NBINS; b++) {
            acc += hist[b];
            if (acc >= rank) {
                pr[q] = bin_value(b) / 1000.0;
                break;
            }
        }
    }
    double rps = (double)total / wall, mean = sum / (double)total / 1000.0;
    double dalloc = dcount ? (double)(d1 - d0) / (double)total : NAN;
    double calloc_ = ccount ? (double)(c1 - c0) / (double)total : NAN;
    char aff[128], model[256];
    affinity_str(aff, sizeof aff);
    cpu_model(model, sizeof model);

    printf("bench_rps %s: %s%s%s, %d client %s, %.1f s on cpus %s\n", label,
           opt.target == T_REDIS ? "redis PING" : "gfxgraph 1-node replay, fast path: ",
           opt.target == T_REDIS ? "" : ctl->out[0].fastpath,
           opt.target == T_GFXGRAPH && fp_env && !strcmp(fp_env, "0") ? " (GFXGRAPH_FASTPATH=0)"
                                                                       : "",
           opt.clients, opt.procs ? "processes" : "threads", wall, aff);
    printf("  %.0f requests/s (%llu requests; per client %.0f .. %.0f/s)\n", rps,
           (unsigned long long)total, cmin, cmax);
    printf("  latency us: p50 %.2f  p90 %.2f  p99 %.2f  mean %.2f  max %.1f\n", pr[0], pr[1],
           pr[2], mean, (double)maxns / 1000.0);
    if (opt.target == T_GFXGRAPH)
        printf("  path: %llu graph, %llu eager (%llu fallback), %llu captured; device_us mean "
               "%.2f\n", (unsigned long long)graph, (unsigned long long)eager,
               (unsigned long long)fallback, (unsigned long long)captured, devsum / (double)total);
    if (dcount || ccount)
        printf("  allocations per request: server %.3f, client %.3f\n", dalloc, calloc_);

    int rc = failed ? 1 : 0;
    if (opt.json) {
        FILE *f = fopen(opt.json, "w");
        if (!f) {
            perror(opt.json);
            rc = 1;
        } else {
            struct utsname un;
            if (uname(&un) != 0)
                memset(&un, 0, sizeof un);
            char date[32];
            time_t now = time(NULL);
            struct tm tm;
            gmtime_r(&now, &tm);
            strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
            fprintf(f, "{\n  \"bench\": \"bench_rps\",\n  \"label\": ");
            json_str(f, label);
            fprintf(f, ",\n  \"date\": ");
            json_str(f, date);
            fprintf(f, ",\n  \"host\": {\"nodename\": ");
            json_str(f, un.nodename);
            fprintf(f, ", \"release\": ");
            json_str(f, un.release);
            fprintf(f, ", \"machine\": ");
            json_str(f, un.machine);
            fprintf(f, ", \"cpus\": %ld, \"cpu_model\": ", sysconf(_SC_NPROCESSORS_ONLN));
            json_str(f, model);
            fprintf(f, "},\n  \"git_commit\": ");
            if (opt.commit && *opt.commit)
                json_str(f, opt.commit);
            else
                fputs("null", f);
            fprintf(f, ",\n  \"server\": {\"kind\": \"%s\", \"socket\": ",
                    opt.target == T_REDIS ? "redis" : "gfxgraphd");
            json_str(f, sock);
            fprintf(f, ", \"version\": ");
            json_str(f, version);
            if (opt.target == T_GFXGRAPH) {
                fprintf(f, ", \"backend\": ");
                json_str(f, backend);
                fprintf(f, ", \"device\": ");
                json_str(f, device);
                fprintf(f, ", \"arch\": ");
                json_str(f, arch);
                fprintf(f, ", \"fastpath_status\": ");
                json_str(f, ctl->out[0].fastpath);
            }
            fprintf(f, "},\n  \"options\": {\"request\": \"%s\", \"path\": \"%s\", "
                    "\"GFXGRAPH_FASTPATH\": ",
                    opt.target == T_REDIS ? "PING" : "replay onenode scale [1, d] f32", path_name);
            if (fp_env)
                json_str(f, fp_env);
            else
                fputs("null", f);
            fprintf(f, ", \"d\": %d, \"clients\": %d, \"client_kind\": \"%s\", "
                    "\"in_flight_per_client\": 1, \"seconds\": ",
                    opt.target == T_GFXGRAPH ? opt.d : 0, opt.clients,
                    opt.procs ? "processes" : "threads");
            json_num(f, opt.seconds);
            fprintf(f, ", \"warmup\": %d, \"loadgen_cpus\": ", opt.warmup);
            json_str(f, aff);
            fprintf(f, "},\n  \"requests\": %llu,\n  \"failed_clients\": %d,\n  \"wall_s\": ",
                    (unsigned long long)total, failed);
            json_num(f, wall);
            fprintf(f, ",\n  \"requests_per_s\": ");
            json_num(f, rps);
            fprintf(f, ",\n  \"per_client_requests_per_s\": {\"min\": ");
            json_num(f, cmin);
            fprintf(f, ", \"max\": ");
            json_num(f, cmax);
            fprintf(f, "},\n  \"latency_us\": {\"p50\": ");
            json_num(f, pr[0]);
            fprintf(f, ", \"p90\": ");
            json_num(f, pr[1]);
            fprintf(f, ", \"p99\": ");
            json_num(f, pr[2]);
            fprintf(f, ", \"mean\": ");
            json_num(f, mean);
            fprintf(f, ", \"max\": ");
            json_num(f, (double)maxns / 1000.0);
            fprintf(f, "}");
            if (opt.target == T_GFXGRAPH) {
                fprintf(f, ",\n  \"path\": {\"graph\": %llu, \"eager\": %llu, \"fallback\": %llu, "
                        "\"captured\": %llu},\n  \"device_us_mean\": ",
                        (unsigned long long)graph, (unsigned long long)eager,
                        (unsigned long long)fallback, (unsigned long long)captured);
                json_num(f, devsum / (double)total);
            }
            if (dcount || ccount) {
                fprintf(f, ",\n  \"allocations_per_request\": {\"server\": ");
                json_num(f, dalloc);
                fprintf(f, ", \"client\": ");
                json_num(f, calloc_);
                fprintf(f, "}");
            }
            fprintf(f, "\n}\n");
            if (fclose(f) != 0) {
                perror(opt.json);
                rc = 1;
            }
        }
    }
    /* label target path clients requests/s p50 p99 mean allocs(server) allocs(client) */
    printf("RESULT %-28s %-8s %-7s %4d %10.0f %8.2f %8.2f %8.2f %7.3f %7.3f\n", label,
           opt.target == T_REDIS ? "redis" : "gfxgraph", path_name, opt.clients, rps, pr[0], pr[2],
           mean, dalloc, calloc_);
    return rc;
}
