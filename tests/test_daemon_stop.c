/* SPDX-License-Identifier: MIT */
/* gfxgraphd stopping with device work in flight: SIGTERM answers a slow
 * replay and exits 0; a second SIGTERM/SIGINT exits at once with status 4;
 * device work still running after shutdown-timeout-ms and its grace ends the
 * daemon with status 4 and a record naming the unfinished job.
 *
 * The slow work is a chain of identity linear layers (w = I) on the cpu
 * backend, its length calibrated on this machine (ASan and load make it
 * slower), so the answer is the input exactly. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"

#define SLOW_D 512
#define SLOW_ROWS 64

typedef struct {
    h_daemon d;
    gg_client *c, *watch;          /* the slow session; one that reads stats */
    char nx[64], ny[64], nw[64];
    float *x, *y, *w;
    size_t xb, wb;
    uint64_t bx, by, bw, prog;
    int layers;
    /* the replay on its own thread */
    pthread_t th;
    bool started;
    int rc;
    gg_replay_result res;
} slow_fx;

/* y = x through n identity layers, alternating two scratch tensors. */
static int define_chain(slow_fx *f, int n)
{
    gg_program_def *d = gg_program_def_new("slow");
    int64_t xs[2] = {GG_BATCH, SLOW_D}, ws[2] = {SLOW_D, SLOW_D};
    int buckets[1] = {SLOW_ROWS};
    gg_program_def_buckets(d, 1, buckets);
    gg_program_def_tensor(d, "x", f->bx, 0, "f32", 2, xs);
    gg_program_def_tensor(d, "y", f->by, 0, "f32", 2, xs);
    gg_program_def_tensor(d, "w", f->bw, 0, "f32", 2, ws);
    gg_program_def_scratch(d, "s0", "f32", 2, xs);
    gg_program_def_scratch(d, "s1", "f32", 2, xs);
    static const char *const s[2] = {"s0", "s1"};
    for (int i = 0; i < n; i++) {
        char in[16];
        snprintf(in, sizeof in, "%s, w", i == 0 ? "x" : s[(i - 1) % 2]);
        gg_program_def_op(d, "linear", in, i == n - 1 ? "y" : s[i % 2]);
    }
    int rc = gg_client_program_define(f->c, d, &f->prog);
    if (rc < 0)
        printf("   define: %s (%s)\n", gg_client_last_error(f->c), gg_program_def_error(d));
    gg_program_def_free(d);
    return rc;
}

/* A daemon started with args, and a program whose replay takes about
 * target_s seconds here, already captured. */
static bool slow_setup(slow_fx *f, const char *const *args, double target_s)
{
    memset(f, 0, sizeof *f);
    if (h_daemon_start(&f->d, args, NULL) < 0)
        return false;
    f->c = gg_client_new();
    f->watch = gg_client_new();
    h_unique(f->nx, sizeof f->nx, "/ggtest-stop-x");
    h_unique(f->ny, sizeof f->ny, "/ggtest-stop-y");
    h_unique(f->nw, sizeof f->nw, "/ggtest-stop-w");
    f->xb = (size_t)SLOW_ROWS * SLOW_D * 4;
    f->wb = (size_t)SLOW_D * SLOW_D * 4;
    bool ok = CHECK(gg_client_connect(f->c, f->d.sock, "slow") == 0) &&
              CHECK(gg_client_connect(f->watch, f->d.sock, "watcher") == 0) &&
              CHECK(gg_client_shm_create(f->nx, f->xb, (void **)&f->x) == 0) &&
              CHECK(gg_client_shm_create(f->ny, f->xb, (void **)&f->y) == 0) &&
              CHECK(gg_client_shm_create(f->nw, f->wb, (void **)&f->w) == 0);
    if (!ok)
        return false;
    for (int i = 0; i < SLOW_ROWS * SLOW_D; i++)
        f->x[i] = (float)((i * 37) % 101) - 50.0f;
    for (int i = 0; i < SLOW_D; i++)
        f->w[i * SLOW_D + i] = 1.0f;
    ok = CHECK(gg_client_buffer_register_shm(f->c, f->nx, 0, f->xb, &f->bx) == 0) &&
         CHECK(gg_client_buffer_register_shm(f->c, f->ny, 0, f->xb, &f->by) == 0) &&
         CHECK(gg_client_buffer_register_shm(f->c, f->nw, 0, f->wb, &f->bw) == 0);
    /* calibrate: the fastest of three runs of 8 layers (load only slows) */
    int n = 8;
    gg_replay_result res;
    if (!ok || !CHECK(define_chain(f, n) == 0))
        return false;
    double us = 1e9;
    for (int i = 0; i < 3; i++)
        if (CHECK(gg_client_replay(f->c, f->prog, SLOW_ROWS, -1, &res) == 0) && res.device_us < us)
            us = res.device_us;
    gg_client_program_release(f->c, f->prog);
    double per = us / n > 1 ? us / n : 1;
    n = (int)(target_s * 1e6 / per);
    n = n < 8 ? 8 : n > 4000 ? 4000 : n;
    f->layers = n;
    h_note("one %dx%d layer at %d rows: %.0f us; using %d layers (%.1f s)", SLOW_D, SLOW_D,
           SLOW_ROWS, per, n, n * per / 1e6);
    return CHECK(define_chain(f, n) == 0) &&
           CHECK(gg_client_replay(f->c, f->prog, SLOW_ROWS, -1, &res) == 0);   /* captures */
}

static const msgpack_object *session_entry(const msgpack_object *stats, uint64_t id)
{
    const msgpack_object *ss = h_get(stats, "sessions");
    for (uint32_t i = 0; ss && ss->type == MSGPACK_OBJECT_ARRAY && i < ss->via.array.size; i++)
        if (h_getu(&ss->via.array.ptr[i], "id") == id)
            return &ss->via.array.ptr[i];
    return NULL;
}

/* Wait (up to 60 s) for the daemon's log to contain needle. */
static bool log_has(const h_daemon *d, const char *needle)
{
    for (int64_t end = h_now_ms() + 60000;; h_sleep_ms(5)) {
        char *log = h_read_file(d->log);
        bool found = strstr(log, needle) != NULL;
        free(log);
        if (found || h_now_ms() > end)
            return found;
    }
}

static void *slow_replay(void *p)
{
    slow_fx *f = p;
    f->rc = gg_client_replay(f->c, f->prog, SLOW_ROWS, -1, &f->res);
    return NULL;
}

/* Start the slow replay on a thread; true once the daemon has the request
 * and it is still running.  The watcher connection is closed then, so the
 * slow session is the only one left. */
static bool slow_start(slow_fx *f)
{
    memset(f->y, 0, f->xb);
    const msgpack_object *st;
    uint64_t sid = gg_client_session_id(f->c), req0 = 0, rep0 = 0;
    if (CHECK(gg_client_call(f->watch, "stats", NULL, 0, &st) == 0)) {
        const msgpack_object *e = session_entry(st, sid);
        req0 = h_getu(e, "requests");
        rep0 = h_getu(e, "replays");
    }
    f->rc = 1;
    if (!CHECK(pthread_create(&f->th, NULL, slow_replay, f) == 0))
        return false;
    f->started = true;
    bool seen = false, running = false;
    for (int64_t end = h_now_ms() + 60000; !seen && h_now_ms() < end;) {
        if (gg_client_call(f->watch, "stats", NULL, 0, &st) == 0) {
            const msgpack_object *e = session_entry(st, sid);
            if (h_getu(e, "requests") == req0 + 1) {
                seen = true;
                running = h_getu(e, "replays") == rep0;
            }
        }
        if (!seen)
            h_sleep_ms(5);
    }
    CHECK(seen);
    CHECKF(running, "the replay is still running when the test goes on");
    gg_client_close(f->watch);
    f->watch = NULL;
    return seen && running;
}

static void slow_teardown(slow_fx *f)
{
    if (f->started)
        pthread_join(f->th, NULL);
    gg_client_close(f->c);
    gg_client_close(f->watch);
    gg_client_shm_destroy(f->nx, f->x, f->xb);
    gg_client_shm_destroy(f->ny, f->y, f->xb);
    gg_client_shm_destroy(f->nw, f->w, f->wb);
    if (f->d.pid > 0)
        h_daemon_stop(&f->d);
    else {
        unlink(f->d.log);
        rmdir(f->d.dir);
    }
}

/* ---- the normal stop ----------------------------------------------------- */

static void test_sigterm_inflight(void)
{
    h_section("SIGTERM while a slow replay is in flight: answered, then exit 0");
    /* a stop that waits as long as any busy machine needs: the replay is
     * what ends it here, not shutdown-timeout-ms (test_stop_grace's) */
    const char *args[] = {"--set", "shutdown-timeout-ms=600000", NULL};
    slow_fx f;
    if (slow_setup(&f, args, 1.5) && slow_start(&f)) {
        kill(f.d.pid, SIGTERM);
        pthread_join(f.th, NULL);
        f.started = false;
        CHECKF(f.rc == 0, "the in-flight replay is answered after SIGTERM (rc %d: %s)", f.rc,
               gg_client_last_error(f.c));
        CHECK(f.res.path == GG_PATH_GRAPH);
        int bad = 0;
        for (int i = 0; i < SLOW_ROWS * SLOW_D; i++)
            bad += f.y[i] != f.x[i];
        CHECKF(bad == 0, "the answer is right: y == x through %d identity layers (%d wrong)",
               f.layers, bad);
        /* then the daemon stops by itself, exit 0 */
        int code = h_daemon_wait_exit(&f.d, 60000);
        CHECKF(code == 0, "exit status 0 after the last answer (got %d)", code);
        if (code != 0)
            h_daemon_dump_log(&f.d);
        struct stat sst;
        CHECK(lstat(f.d.sock, &sst) < 0);
        /* the connection is closed: a later call fails, the daemon is gone */
        CHECK(gg_client_replay(f.c, f.prog, 1, -1, NULL) < 0);
    }
    slow_teardown(&f);
}

/* ---- stops that do not wait ---------------------------------------------- */

static void test_second_signal(void)
{
    h_section("a second SIGTERM/SIGINT during the stop exits at once, status 4");
    slow_fx f;
    if (slow_setup(&f, NULL, 4.0) && slow_start(&f)) {
        int64_t t0 = h_now_ms();
        kill(f.d.pid, SIGTERM);
        /* the second signal only once the first has been taken */
        CHECKF(log_has(&f.d, "received SIGTERM: stopping"), "the first SIGTERM is logged");
        CHECKF(h_daemon_wait_exit(&f.d, 0) == -ETIMEDOUT,
               "after the first SIGTERM the daemon waits for the replay");
        int64_t t1 = h_now_ms();
        kill(f.d.pid, SIGINT);
        int code = h_daemon_wait_exit(&f.d, 60000);
        int64_t now = h_now_ms();
        CHECKF(code == 4, "exit status 4 (got %d)", code);
        /* "at once" is the replay left unanswered (below), not a time: a busy
         * machine may take a while to run the exit */
        h_note("exit %lld ms after the second signal, which came %lld ms into a replay of %d "
               "layers", (long long)(now - t1), (long long)(t1 - t0), f.layers);
        char *log = h_read_file(f.d.log);
        CHECK_CONTAINS(log, "received SIGINT again while stopping");
        CHECK_CONTAINS(log, "replay of program");
        CHECK_CONTAINS(log, "'slow'");
        if (code != 4)
            h_daemon_dump_log(&f.d);
        free(log);
        pthread_join(f.th, NULL);
        f.started = false;
        CHECKF(f.rc < 0, "the replay is not answered (rc %d)", f.rc);
    }
    slow_teardown(&f);
}

static void test_stop_grace(void)
{
    h_section("device work outlasting shutdown-timeout-ms and its grace: exit 4, named");
    const char *args[] = {"--set", "shutdown-timeout-ms=300", NULL};
    slow_fx f;
    if (slow_setup(&f, args, 4.0) && slow_start(&f)) {
        int64_t t0 = h_now_ms();
        kill(f.d.pid, SIGTERM);
        int code = h_daemon_wait_exit(&f.d, 60000);
        int64_t took = h_now_ms() - t0;
        CHECKF(code == 4, "exit status 4 (got %d)", code);
        /* not before the deadline; no upper bound: the exit itself can be
         * slow on a busy machine, and status 4 says the replay was not
         * waited for */
        CHECKF(took >= 550, "not before 300 ms and a grace of 300 ms (%lld ms)",
               (long long)took);
        char *log = h_read_file(f.d.log);
        CHECK_CONTAINS(log, "device work still running 600 ms after the stop began");
        CHECK_CONTAINS(log, "1 job(s) unfinished: replay of program");
        CHECK_CONTAINS(log, "'slow' (batch 64, running) for session");
        CHECK_CONTAINS(log, "client 'slow'");
        if (code != 4)
            h_daemon_dump_log(&f.d);
        free(log);
    }
    slow_teardown(&f);
}

int main(void)
{
    h_init("test_daemon_stop", 1140);
    test_sigterm_inflight();
    test_second_signal();
    test_stop_grace();
    return h_finish();
}
