/* SPDX-License-Identifier: MIT */
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
 * Scenarios of this file, on one daemon with the default settings:
 *   hello/health   backend hip, device name, arch (sm_NN / gfxNNNN), VRAM
 *                  totals, smoke test "passed"
 *   programs       chain layernorm->gelu (x2), MLP linear->gelu->linear with
 *                  bias, rmsnorm + silu_mul, softmax, add with a broadcast
 *                  row; each in f32, f16 and bf16; the chain is prepared
 *                  (no replay captures), the others capture on first use
 *   branches       two branches, each cached on its own
 *   calls          a program whose one node calls the MLP ({op: "call"})
 *   memfd          a sealed memfd registered by fd (host memory the GPU
 *                  reads and writes through the daemon's pinned mapping):
 *                  rmsnorm, silu_mul, add over it, checked in the client's
 *                  mapping across buckets and new inputs; an unsealed memfd
 *                  refused EINVAL (f32, f16)
 *   killed client  SIGKILL in the middle of a stream of replays: the daemon
 *                  stays up and healthy, the session goes away, a new
 *                  client works (three times, at different moments)
 * The daemon started in other modes (host-function completion, fault
 * injection): test_gpu_daemon_modes.c.  The harness: gpu_daemon_util.h; the
 * programs and the replay checks: gpu_daemon_prog.h.
 *
 * Tolerance, rel-L2 over the real rows: f32 1e-4, f16 3e-3, bf16 2e-2
 * (linear may run through cuBLAS/rocBLAS; f32 is pedantic f32, no TF32).
 *
 * Without a device (hipGetDeviceCount fails or finds none) it prints SKIP
 * and returns 77.  GG_TEST_VERBOSE=1 prints every replay.  Ends with
 * "N passed, M failed". */
#include "gpu_compare.h"
#include "gpu_daemon_prog.h"
#include "gpu_daemon_util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- scenarios (each runs in its own client process) ----------------------- */

static void scn_hello_health(const void *arg)
{
    (void)arg;
    if (gd_dev_init() < 0)
        return;
    gg_client *c = gd_connect("test_gpu_daemon/hello");
    if (!c)
        return;
    gd_check(strcmp(gg_client_backend(c), GG_TEST_BACKEND) == 0, "hello: backend %s (got \"%s\")",
             GG_TEST_BACKEND, gg_client_backend(c));
    gd_check(gg_client_device_name(c)[0] != '\0', "hello: device name \"%s\"",
             gg_client_device_name(c));
    gd_check(gd_arch_ok(gg_client_device_arch(c)), "hello: device arch \"%s\"",
             gg_client_device_arch(c));
    printf("#   device: %s (%s), daemon %s\n", gg_client_device_name(c), gg_client_device_arch(c),
           gg_client_server_version(c));
    gd_check_health(c, "fresh daemon");
    double n = gd_wait_sessions(c, 1, 15);
    gd_check(n == 1, "stats: sessions_active is 1, this client's (got %g)", n);

    /* A pointer that is not device memory is refused by the library with a
     * message, and a size past the allocation too. */
    uint64_t id;
    int host_word = 0;
    gd_check(gg_client_buffer_register_device(c, &host_word, sizeof host_word, &id) < 0,
             "register_device refuses host memory");
    void *d = NULL;
    if (hipMalloc(&d, 4096) == hipSuccess) {
        gd_check(gg_client_buffer_register_device(c, (uint8_t *)d + 1024, 4096, &id) < 0,
                 "register_device refuses a size past the end of the allocation");
        int rc = gg_client_buffer_register_device(c, (uint8_t *)d + 1024, 3072, &id);
        gd_check(rc == 0, "register_device takes the rest of the allocation from an offset: %s",
                 rc ? gg_client_last_error(c) : "ok");
        if (rc == 0)
            gd_check(gg_client_buffer_release(c, id) == 0, "buffer.release");
        hipFree(d);
    }
    gg_client_close(c);
}

static void scn_programs(const void *arg)
{
    gg_dtype dt = *(const gg_dtype *)arg;
    if (gd_dev_init() < 0)
        return;
    gg_client *c = gd_connect("test_gpu_daemon/programs");
    if (!c)
        return;
    const pspec *specs[] = {&P_CHAIN, &P_MLP, &P_RMS_SILU, &P_SOFTMAX, &P_ADD};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        prog_t p;
        bool prepare = specs[i] == &P_CHAIN;
        if (gd_prog_setup(c, &p, specs[i], dt, prepare) == 0) {
            run_counts rc = {0, 0, 0, 0};
            if (gd_prog_run(c, &p, EXPECT_NORMAL, prepare, &rc, NULL) < 0) {
                gd_prog_free(c, &p);
                break;
            }
            gd_check(rc.graph == TOP && rc.eager == MAXR - TOP && rc.fallback == 0,
                     "%s-%s: %d graph, %d eager, %d fallback (want %d, %d, 0)", specs[i]->name,
                     gg_dtype_name(dt), rc.graph, rc.eager, rc.fallback, TOP, MAXR - TOP);
        }
        gd_prog_free(c, &p);
    }
    gg_client_close(c);
}

static void scn_branches(const void *arg)
{
    gg_dtype dt = *(const gg_dtype *)arg;
    if (gd_dev_init() < 0)
        return;
    gg_client *c = gd_connect("test_gpu_daemon/branches");
    if (!c)
        return;
    prog_t p;
    gd_wait_sessions(c, 1, 15);     /* the cache counts below are daemon-wide */
    if (gd_prog_setup(c, &p, &P_BRANCHES, dt, false) == 0) {
        stats_t s0, s1;
        int printed = 0;
        if (gd_get_stats(c, &s0) == 0) {
            /* batch 5: bucket 8; each branch captures its own graph once */
            gg_replay_result r0, r1, r2, r3;
            gd_replay_check(c, &p, 5, 0, EXPECT_NORMAL, true, &printed, &r0);
            gd_replay_check(c, &p, 5, 1, EXPECT_NORMAL, true, &printed, &r1);
            gd_replay_check(c, &p, 6, 0, EXPECT_NORMAL, false, &printed, &r2);
            gd_replay_check(c, &p, 7, 1, EXPECT_NORMAL, false, &printed, &r3);
            if (gd_get_stats(c, &s1) == 0) {
                gd_check(s1.capture_count - s0.capture_count == 2,
                         "branches: two captures for two branches at one bucket (got %g)",
                         s1.capture_count - s0.capture_count);
                gd_check(s1.graphs_cached - s0.graphs_cached == 2,
                         "branches: two cache entries (got %g more)",
                         s1.graphs_cached - s0.graphs_cached);
            }
            /* and the whole sweep on both branches (bucket 8 is cached) */
            bool seen[2][NBK];
            memset(seen, 0, sizeof seen);
            seen[0][gd_bucket_slot(8)] = seen[1][gd_bucket_slot(8)] = true;
            gd_prog_run(c, &p, EXPECT_NORMAL, false, NULL, (const bool (*)[NBK])seen);
        }
    }
    gd_prog_free(c, &p);
    gg_client_close(c);
}

/* A program that calls another ({op: "call"}): the MLP, then a caller whose
 * one node calls it, over the MLP's output buffer; the caller is replayed
 * for batch 1..40 through the same checks, its graphs holding the MLP's
 * kernels. */
static void scn_calls(const void *arg)
{
    gg_dtype dt = *(const gg_dtype *)arg;
    if (gd_dev_init() < 0)
        return;
    gg_client *c = gd_connect("test_gpu_daemon/calls");
    if (!c)
        return;
    prog_t p;
    if (gd_prog_setup(c, &p, &P_MLP, dt, false) == 0) {
        int y = 0;
        while (P_MLP.t[y].kind != T_OUT)
            y++;
        static const int bk[NBK] = {1, 2, 4, 8, 16, 32};
        int64_t dims[2] = {GG_BATCH, P_MLP.t[y].d1};
        gg_program_def *d = gg_program_def_new("mlp-caller");
        gg_program_def_buckets(d, NBK, bk);
        gg_program_def_tensor(d, "out", p.id_out, p.off[y], gg_dtype_name(dt), 2, dims);
        gg_program_def_call(d, p.prog, 0);
        uint64_t caller = 0, callee = p.prog;
        int rc = gg_client_program_define(c, d, &caller);
        gg_program_def_free(d);
        gd_check(rc == 0, "calls-%s: a caller of the MLP is defined: %s", gg_dtype_name(dt),
                 rc ? gg_client_last_error(c) : "ok");
        if (rc == 0) {
            run_counts n = {0, 0, 0, 0};
            p.prog = caller;
            gd_prog_run(c, &p, EXPECT_NORMAL, false, &n, NULL);
            p.prog = callee;
            gd_check(n.graph == TOP && n.eager == MAXR - TOP && n.fallback == 0,
                     "calls-%s: %d graph, %d eager, %d fallback (want %d, %d, 0)",
                     gg_dtype_name(dt), n.graph, n.eager, n.fallback, TOP, MAXR - TOP);
        }
    }
    gd_prog_free(c, &p);
    gg_client_close(c);
}

/* Buffers by file descriptor (PROTOCOL.md section 11): the client's own host
 * memory, a sealed memfd from gg_client_memfd_create, registered by fd from
 * a non-page-aligned offset.  The daemon maps it and registers the mapping
 * as mapped pinned host memory, so the GPU reads the inputs and writes the
 * outputs over the bus; the client reads them in its own mapping, no copy.
 * The program: h = rmsnorm(x, w) (scratch), y = silu_mul(h, gate),
 * z = add(y, x), every buffer tensor in the memfd.  Replayed over buckets
 * (graph, captured once per bucket) and above the largest (eager), twice:
 * the second pass after new inputs are written through the mapping, so a
 * right answer means the GPU read the live pages, not a copy taken at
 * register time.  Rows past the bucket stay as poisoned.  Before that, a
 * memfd not sealed against shrinking is refused EINVAL, and the session
 * goes on. */
#define FD_D 256
#define FD_REG_OFF 4608     /* past one page, not page-aligned */

enum { FX, FG, FW, FY, FZ, FNT };

typedef struct {
    gg_dtype dt;
    size_t es, off[FNT], bytes[FNT], size;
    uint8_t *reg;                   /* the registered range in this process's mapping */
    void *host[FNT], *h;            /* reference: inputs copied out, outputs computed */
} fdprog;

static int fd_bucket_for(int batch)
{
    static const int bk[NBK] = {1, 2, 4, 8, 16, 32};
    for (int i = 0; i < NBK; i++)
        if (bk[i] >= batch)
            return bk[i];
    return 0;
}

static void fd_ref_node(const char *name, gg_tensor *in, int nin, gg_tensor *out,
                        const char *akey, double aval)
{
    const gg_op_def *op = gg_ops_find(name);
    gg_op_attrs a;
    gg_ops_attr_defaults(op, &a);
    if (akey)
        a.v[gg_ops_attr_index(op, akey)] = aval;
    gg_ops_run_cpu(op, in, nin, out, 1, &a);
}

/* Fill x and gate (and w on the first call) in the mapping with fresh
 * values, then the CPU reference of y and z over all MAXR rows from host
 * copies of what the mapping now holds. */
static void fd_fill(fdprog *p, uint64_t *rng, bool weights)
{
    for (int t = FX; t <= FW; t++) {
        if (t == FW && !weights)
            continue;
        int64_t n = (int64_t)(p->bytes[t] / p->es);
        for (int64_t k = 0; k < n; k++) {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            float u = (float)((double)(*rng >> 40) * (1.0 / 16777216.0));
            gg_store(p->reg + p->off[t], p->dt, k, t == FW ? 0.5f + u : -2.0f + 4.0f * u);
        }
        memcpy(p->host[t], p->reg + p->off[t], p->bytes[t]);
    }
    gg_tensor_desc row = {p->dt, 2, {MAXR, FD_D}}, vec = {p->dt, 1, {FD_D}};
    gg_tensor x = {p->host[FX], row}, g = {p->host[FG], row}, w = {p->host[FW], vec};
    gg_tensor h = {p->h, row}, y = {p->host[FY], row}, z = {p->host[FZ], row};
    gg_tensor in[2];
    in[0] = x, in[1] = w;
    fd_ref_node("rmsnorm", in, 2, &h, "eps", 1e-6);
    in[0] = h, in[1] = g;
    fd_ref_node("silu_mul", in, 2, &y, NULL, 0);
    in[0] = y, in[1] = x;
    fd_ref_node("add", in, 2, &z, NULL, 0);
}

/* One replay of batch rows: path, bucket, capture, the real rows of y and z
 * against the reference, and the rows past what the replay may write still
 * poisoned.  0, 1 on a mismatch, -1 when the connection is gone. */
static int fd_replay(gg_client *c, fdprog *p, uint64_t prog, int batch, bool *seen)
{
    const char *dn = gg_dtype_name(p->dt);
    memset(p->reg + p->off[FY], 0xff, p->bytes[FY]);
    memset(p->reg + p->off[FZ], 0xff, p->bytes[FZ]);
    gg_replay_result r;
    memset(&r, 0, sizeof r);
    if (gg_client_replay(c, prog, batch, 0, &r) < 0) {
        gd_failf("memfd-%s batch %d: replay: %s (%s)", dn, batch, gg_client_last_error(c),
                 gg_client_last_error_code(c));
        return gg_client_connected(c) ? 1 : -1;
    }
    int bucket = fd_bucket_for(batch), slot = bucket ? gd_bucket_slot(bucket) : -1;
    bool want_cap = slot >= 0 && !seen[slot];
    if (slot >= 0)
        seen[slot] = true;
    bool ok = gd_check(r.path == (bucket ? GG_PATH_GRAPH : GG_PATH_EAGER) && r.bucket == bucket &&
                           !r.fallback && (bucket == 0 || r.captured == want_cap),
                       "memfd-%s batch %d: %s bucket %d captured %d fallback %d (want %s bucket "
                       "%d captured %d; %s)", dn, batch, r.path == GG_PATH_GRAPH ? "graph" : "eager",
                       r.bucket, r.captured, r.fallback, bucket ? "graph" : "eager", bucket,
                       want_cap, r.reason[0] ? r.reason : "-");
    double tol = p->dt == GG_DT_F32 ? 1e-4 : p->dt == GG_DT_F16 ? 3e-3 : 2e-2;
    int written = bucket > batch ? bucket : batch;
    for (int t = FY; t <= FZ; t++) {
        int64_t bad;
        double err = gt_rel_l2(p->reg + p->off[t], p->host[t], p->dt, (int64_t)batch * FD_D, &bad);
        ok &= gd_check(bad < 0 && err <= tol, "memfd-%s batch %d: %s in the mapping: rel-L2 %.3g "
                       "(tolerance %.0e)%s", dn, batch, t == FY ? "y" : "z", err, tol,
                       bad >= 0 ? ", not finite" : "");
        size_t from = (size_t)written * FD_D * p->es, untouched = 0;
        for (size_t k = from; k < p->bytes[t]; k++)
            untouched += p->reg[p->off[t] + k] == 0xff;
        ok &= gd_check(untouched == p->bytes[t] - from, "memfd-%s batch %d: %s rows %d.. are "
                       "not written (%zu of %zu bytes still poisoned)", dn, batch,
                       t == FY ? "y" : "z", written, untouched, p->bytes[t] - from);
    }
    return ok ? 0 : 1;
}

static void scn_memfd(const void *arg)
{
    gg_dtype dt = *(const gg_dtype *)arg;
    const char *dn = gg_dtype_name(dt);
    if (gd_dev_init() < 0)
        return;
    gg_client *c = gd_connect("test_gpu_daemon/memfd");
    if (!c)
        return;
    fdprog p;
    memset(&p, 0, sizeof p);
    p.dt = dt;
    p.es = gg_dtype_size(dt);
    void *map = NULL;
    int fd = -1;
    uint64_t buf = 0, prog = 0;

    /* Not sealed against shrinking: refused on hip, as documented. */
    const size_t usz = 65536;
    int ufd = memfd_create("gg-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (gd_check(ufd >= 0 && ftruncate(ufd, (off_t)usz) == 0, "memfd_create: %s",
                 strerror(errno))) {
        for (int round = 0; round < 2; round++) {
            /* round 1: sealed against growing only, still not against shrinking */
            if (round == 1 && !gd_check(fcntl(ufd, F_ADD_SEALS, F_SEAL_GROW) == 0,
                                        "F_SEAL_GROW: %s", strerror(errno)))
                break;
            uint64_t id = 0;
            int rc = gg_client_buffer_register_fd(c, ufd, 0, usz, &id);
            gd_check(rc == -EINVAL && strcmp(gg_client_last_error_code(c), "EINVAL") == 0 &&
                         strstr(gg_client_last_error(c), "not sealed against shrinking"),
                     "register_fd of a memfd %s: EINVAL naming the missing seal (got %d %s: %s)",
                     round ? "sealed F_SEAL_GROW only" : "without seals", rc,
                     gg_client_last_error_code(c), rc ? gg_client_last_error(c) : "registered");
            if (rc == 0)
                gg_client_buffer_release(c, id);
        }
    }
    if (ufd >= 0)
        close(ufd);

    size_t used = 0;
    for (int t = 0; t < FNT; t++) {
        p.bytes[t] = (size_t)(t == FW ? 1 : MAXR) * FD_D * p.es;
        p.off[t] = used;
        used = (used + p.bytes[t] + 255) & ~(size_t)255;
        if (!(p.host[t] = calloc(1, p.bytes[t]))) {
            gd_failf("out of memory");
            goto out;
        }
    }
    p.size = used;
    if (!(p.h = calloc(1, p.bytes[FX]))) {
        gd_failf("out of memory");
        goto out;
    }
    int rc = gg_client_memfd_create("gg-gpu-memfd", FD_REG_OFF + p.size, &map, &fd);
    if (!gd_check(rc == 0, "gg_client_memfd_create: %s", strerror(-rc)))
        goto out;
    p.reg = (uint8_t *)map + FD_REG_OFF;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    fd_fill(&p, &rng, true);
    rc = gg_client_buffer_register_fd(c, fd, FD_REG_OFF, p.size, &buf);
    if (!gd_check(rc == 0, "memfd-%s: register_fd at offset %d: %s", dn, FD_REG_OFF,
                  rc ? gg_client_last_error(c) : "ok"))
        goto out;

    static const int bk[NBK] = {1, 2, 4, 8, 16, 32};
    static const char *const names[FNT] = {"x", "gate", "norm.w", "y", "z"};
    int64_t rows[2] = {GG_BATCH, FD_D}, vec[1] = {FD_D};
    gg_program_def *d = gg_program_def_new("memfd-rms-silu-add");
    gg_program_def_buckets(d, NBK, bk);
    for (int t = 0; t < FNT; t++)
        gg_program_def_tensor(d, names[t], buf, p.off[t], dn, t == FW ? 1 : 2,
                              t == FW ? vec : rows);
    gg_program_def_scratch(d, "h", dn, 2, rows);
    gg_program_def_op(d, "rmsnorm", "x,norm.w", "h");
    gg_program_def_attr_f(d, "eps", 1e-6);
    gg_program_def_op(d, "silu_mul", "h,gate", "y");
    gg_program_def_op(d, "add", "y,x", "z");
    rc = gg_client_program_define(c, d, &prog);
    gd_check(rc == 0, "memfd-%s: define over the memfd buffer: %s", dn,
             rc ? gg_client_last_error(c) : "ok");
    gg_program_def_free(d);
    if (rc < 0)
        goto out;

    static const int pass0[] = {1, 3, 4, 7, 16, 20, 32, 40}, pass1[] = {2, 3, 9, 32, 33, 40};
    bool seen[NBK] = {false};
    int graph = 0, eager = 0;
    for (int pass = 0; pass < 2; pass++) {
        const int *b = pass ? pass1 : pass0;
        int n = pass ? (int)(sizeof pass1 / sizeof *pass1) : (int)(sizeof pass0 / sizeof *pass0);
        if (pass)
            fd_fill(&p, &rng, false);   /* new x and gate, written through the mapping */
        for (int i = 0; i < n; i++) {
            int r = fd_replay(c, &p, prog, b[i], seen);
            if (r < 0)
                goto out;
            graph += fd_bucket_for(b[i]) != 0;
            eager += fd_bucket_for(b[i]) == 0;
        }
    }
    stats_t s;
    if (gd_get_stats(c, &s) == 0)
        gd_check(s.graphs_cached >= 6, "memfd-%s: graphs cached for the 6 buckets (%g)", dn,
                 s.graphs_cached);
    printf("#   memfd-%s: %d graph and %d eager replays over a host-registered memfd\n", dn,
           graph, eager);
    rc = gg_client_program_release(c, prog);
    gd_check(rc == 0, "memfd-%s: program.release: %s", dn, rc ? gg_client_last_error(c) : "ok");
    prog = 0;
    rc = gg_client_buffer_release(c, buf);
    gd_check(rc == 0, "memfd-%s: buffer.release: %s", dn, rc ? gg_client_last_error(c) : "ok");
    buf = 0;
out:
    if (prog)
        gg_client_program_release(c, prog);
    if (buf)
        gg_client_buffer_release(c, buf);
    if (map)
        munmap(map, FD_REG_OFF + p.size);
    if (fd >= 0)
        close(fd);
    for (int t = 0; t < FNT; t++)
        free(p.host[t]);
    free(p.h);
    gg_client_close(c);
}

/* The victim: replays forever; says so on fd after 20 replays. */
static void scn_victim(int fd)
{
    if (gd_dev_init() < 0)
        _exit(2);
    gg_client *c = gd_connect("test_gpu_daemon/victim");
    if (!c)
        _exit(2);
    prog_t p;
    if (gd_prog_setup(c, &p, &P_MLP, GG_DT_F32, false) < 0)
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
    if (gd_dev_init() < 0)
        return;
    gg_client *c = gd_connect("test_gpu_daemon/after-kill");
    if (!c)
        return;
    double t0 = gd_now_s();
    double n = gd_wait_sessions(c, 1, 15);
    gd_check(n == 1, "kill %d: the killed client's session is gone (sessions_active %g after "
             "%.1f s)", *round, n, gd_now_s() - t0);
    gd_check_health(c, "after a killed client");
    prog_t p;
    if (gd_prog_setup(c, &p, &P_SOFTMAX, GG_DT_F32, false) == 0)
        gd_prog_run(c, &p, EXPECT_NORMAL, false, NULL, NULL);
    gd_prog_free(c, &p);
    gg_client_close(c);
}

static void kill_round(int round, int delay_ms)
{
    char name[64];
    snprintf(name, sizeof name, "killed client %d", round);
    gd_set_scn(name);
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0) {
        gd_failf("pipe: %s", strerror(errno));
        return;
    }
    printf("# %s (SIGKILL %d ms into its replays)\n", name, delay_ms);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        gd_failf("fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        alarm(120);
        gd_daemon.pid = 0;
        scn_victim(fd[1]);
        _exit(0);
    }
    close(fd[1]);
    struct pollfd pf = {fd[0], POLLIN, 0};
    char ch = 0;
    bool running = poll(&pf, 1, 90000) == 1 && read(fd[0], &ch, 1) == 1 && ch == 'r';
    close(fd[0]);
    if (running)
        gd_sleep_ms(delay_ms);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    gd_check(running, "%s: the victim was replaying when killed", name);
    gd_sleep_ms(50);
    if (!gd_check(gd_daemon_alive(), "%s: gfxgraphd is still running", name)) {
        gd_daemon_print_log();
        return;
    }
    gd_run_child(name, scn_after_kill, &round, 180);
}

/* ---- main ---------------------------------------------------------------------- */

int main(void)
{
    int rc = gd_begin();
    if (rc)
        return rc;
    static const gg_dtype dts[] = {GG_DT_F32, GG_DT_F16, GG_DT_BF16};
    if (gd_daemon_start(NULL, "default") == 0) {
        gd_run_child("hello and health", scn_hello_health, NULL, 120);
        for (int i = 0; i < 3; i++) {
            char name[64];
            snprintf(name, sizeof name, "programs %s", gg_dtype_name(dts[i]));
            gd_run_child(name, scn_programs, &dts[i], 300);
        }
        gd_run_child("branches f32", scn_branches, &dts[0], 120);
        gd_run_child("branches bf16", scn_branches, &dts[2], 120);
        gd_run_child("calls f32", scn_calls, &dts[0], 120);
        gd_run_child("calls f16", scn_calls, &dts[1], 120);
        gd_run_child("memfd f32", scn_memfd, &dts[0], 120);
        gd_run_child("memfd f16", scn_memfd, &dts[1], 120);
        kill_round(1, 0);
        kill_round(2, 3);
        kill_round(3, 25);
        gd_run_child("health at the end", scn_hello_health, NULL, 120);
        gd_daemon_stop();
    }
    return gd_end();
}
