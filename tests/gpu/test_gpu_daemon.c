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
#include "gpu_daemon_prog.h"
#include "gpu_daemon_util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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
        kill_round(1, 0);
        kill_round(2, 3);
        kill_round(3, 25);
        gd_run_child("health at the end", scn_hello_health, NULL, 120);
        gd_daemon_stop();
    }
    return gd_end();
}
