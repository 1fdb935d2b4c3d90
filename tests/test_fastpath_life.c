/* SPDX-License-Identifier: MIT */
/* Lifetimes around the fast path (PROTOCOL.md section 15 "Lifetime", section
 * 9):
 *
 * killed: a client process opens its region, submits a slow replay (a chain
 * of identity linear layers, about 300 ms here, calibrated as in
 * test_daemon_stop.c) and is SIGKILLed while it waits: once spinning
 * (GFXGRAPH_SPIN_US=1000000), once asleep on the futex (GFXGRAPH_SPIN_US=0).
 * The descriptor is seen taken and still running before the kill.  Then the
 * session goes (sessions_active back), the region goes (fastpath_regions 0),
 * the daemon holds no more descriptors than before (/proc/PID/fd) and maps
 * neither the region ("gfxgraph-fastpath") nor the client's buffers
 * (/proc/PID/maps), and a new client's fast-path replay works.
 *
 * many: 16 threads, each its own client, buffers and program, 200 fast-path
 * replays each with every result checked; fastpath_regions is 16 while they
 * are all connected, 0 after.
 *
 * stop: SIGTERM with three regions open and idle: exit 0, and each client's
 * next replay fails cleanly (-ECONNRESET, -ENOTCONN or -ESHUTDOWN) without
 * hanging.  SIGTERM with a slow fast-path replay in flight (and an idle
 * region beside it): the replay is answered with the right output, a replay
 * submitted after that answer fails cleanly, the daemon exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_fastpath_util.h"

/* CHECK_EQ as an expression */
#define CHECK_EQ_B(a, b) CHECKF((long long)(a) == (long long)(b), "%s == %s (%lld vs %lld)", #a, #b, \
                                (long long)(a), (long long)(b))

/* ---- a slow program ------------------------------------------------------------ */

#define SLOW_D 512
#define SLOW_ROWS 16

typedef struct {
    gg_client *c;
    char nx[64], ny[64], nw[64];
    float *x, *y, *w;
    size_t xb, wb;
    uint64_t bx, by, bw, prog;
    int layers;
} slow_prog;

static int slow_define(slow_prog *s, int n)
{
    gg_program_def *d = gg_program_def_new("slow");
    int64_t xs[2] = {GG_BATCH, SLOW_D}, ws[2] = {SLOW_D, SLOW_D};
    int buckets[1] = {SLOW_ROWS};
    gg_program_def_buckets(d, 1, buckets);
    gg_program_def_tensor(d, "x", s->bx, 0, "f32", 2, xs);
    gg_program_def_tensor(d, "y", s->by, 0, "f32", 2, xs);
    gg_program_def_tensor(d, "w", s->bw, 0, "f32", 2, ws);
    gg_program_def_scratch(d, "s0", "f32", 2, xs);
    gg_program_def_scratch(d, "s1", "f32", 2, xs);
    static const char *const sc[2] = {"s0", "s1"};
    for (int i = 0; i < n; i++) {
        char in[16];
        snprintf(in, sizeof in, "%s, w", i == 0 ? "x" : sc[(i - 1) % 2]);
        gg_program_def_op(d, "linear", in, i == n - 1 ? "y" : sc[i % 2]);
    }
    int rc = gg_client_program_define(s->c, d, &s->prog);
    if (rc < 0)
        h_note("define slow: %s (%s)", gg_client_last_error(s->c), gg_program_def_error(d));
    gg_program_def_free(d);
    return rc;
}

/* Names first (so a parent can clean up after a killed child). */
static void slow_names(slow_prog *s, const char *prefix)
{
    memset(s, 0, sizeof *s);
    char p[64];
    snprintf(p, sizeof p, "/%s-x", prefix);
    h_unique(s->nx, sizeof s->nx, p);
    snprintf(p, sizeof p, "/%s-y", prefix);
    h_unique(s->ny, sizeof s->ny, p);
    snprintf(p, sizeof p, "/%s-w", prefix);
    h_unique(s->nw, sizeof s->nw, p);
    s->xb = (size_t)SLOW_ROWS * SLOW_D * 4;
    s->wb = (size_t)SLOW_D * SLOW_D * 4;
}

/* Buffers, and a program of y = x through identity layers that takes about
 * target_ms on this machine, its graph already captured (prepare). */
static bool slow_setup(slow_prog *s, gg_client *c, double target_ms)
{
    s->c = c;
    bool ok = CHECK(gg_client_shm_create(s->nx, s->xb, (void **)&s->x) == 0) &&
              CHECK(gg_client_shm_create(s->ny, s->xb, (void **)&s->y) == 0) &&
              CHECK(gg_client_shm_create(s->nw, s->wb, (void **)&s->w) == 0);
    if (!ok)
        return false;
    for (int i = 0; i < SLOW_ROWS * SLOW_D; i++)
        s->x[i] = (float)((i * 37) % 101) - 50.0f;
    for (int i = 0; i < SLOW_D; i++)
        s->w[i * SLOW_D + i] = 1.0f;
    ok = CHECK(gg_client_buffer_register_shm(c, s->nx, 0, s->xb, &s->bx) == 0) &&
         CHECK(gg_client_buffer_register_shm(c, s->ny, 0, s->xb, &s->by) == 0) &&
         CHECK(gg_client_buffer_register_shm(c, s->nw, 0, s->wb, &s->bw) == 0);
    int n = 8;
    if (!ok || !CHECK(slow_define(s, n) == 0))
        return false;
    double us = 1e12;
    gg_replay_result r;
    for (int i = 0; i < 3; i++)
        if (CHECK(gg_client_replay(c, s->prog, SLOW_ROWS, -1, &r) == 0) && r.device_us > 0 &&
            r.device_us < us)
            us = r.device_us;
    gg_client_program_release(c, s->prog);
    double per = us < 1e12 && us / n > 1 ? us / n : 1000;
    n = (int)(target_ms * 1e3 / per);
    n = n < 8 ? 8 : n > 4000 ? 4000 : n;
    s->layers = n;
    h_note("one %dx%d layer at %d rows: %.0f us; %d layers (%.0f ms)", SLOW_D, SLOW_D, SLOW_ROWS,
           per, n, n * per / 1e3);
    int ready = 0;
    return CHECK(slow_define(s, n) == 0) &&
           CHECK(gg_client_program_prepare(c, s->prog, 0, NULL, -1, &ready, NULL) == 0) &&
           CHECK_EQ_B(ready, 1);
}

static int slow_wrong(const slow_prog *s)
{
    int bad = 0;
    for (int i = 0; i < SLOW_ROWS * SLOW_D; i++)
        bad += s->y[i] != s->x[i];
    return bad;
}

static void slow_unlink(slow_prog *s, bool mapped)
{
    if (mapped) {
        gg_client_shm_destroy(s->nx, s->x, s->xb);
        gg_client_shm_destroy(s->ny, s->y, s->xb);
        gg_client_shm_destroy(s->nw, s->w, s->wb);
    } else {
        shm_unlink(s->nx);
        shm_unlink(s->ny);
        shm_unlink(s->nw);
    }
}

/* Wait (through the watcher w) until session sid has one more request than
 * req0 and still no more replays than rep0: the descriptor is taken and
 * running.  1 yes; 0 it ran already; -1 never seen. */
static int wait_taken(gg_client *w, uint64_t sid, uint64_t req0, uint64_t rep0)
{
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end;) {
        const msgpack_object *st = NULL;
        if (gg_client_call(w, "stats", NULL, 0, &st) == 0) {
            const msgpack_object *e = fp_session_of(st, sid);
            if (e && h_getu(e, "requests") >= req0 + 1)
                return h_getu(e, "replays") == rep0 ? 1 : 0;
        }
        h_sleep_ms(2);
    }
    return -1;
}

/* ---- killed while waiting -------------------------------------------------------- */

typedef struct {
    uint64_t sid, req0, rep0;
    int layers;
} kid_msg;

/* The process state letter of pid ('R', 'S', ...; '?' when unreadable). */
static char proc_state(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    char *st = h_read_file(p);
    const char *e = st ? strrchr(st, ')') : NULL;
    char c = e && e[1] == ' ' && e[2] ? e[2] : '?';
    free(st);
    return c;
}

static void killed_child(const char *sock, slow_prog *s, const char *spin, double target_ms,
                         int wfd, int rfd)
{
    h_init("killed client", 300);
    setenv("GFXGRAPH_SPIN_US", spin, 1);
    gg_client *c = fp_client(sock, "fp-killed");
    kid_msg m = {0};
    if (c && slow_setup(s, c, target_ms)) {
        m.sid = gg_client_session_id(c);
        m.layers = s->layers;
        const msgpack_object *st = NULL;
        if (gg_client_call(c, "stats", NULL, 0, &st) == 0) {
            const msgpack_object *e = fp_session_of(st, m.sid);
            m.req0 = h_getu(e, "requests");
            m.rep0 = h_getu(e, "replays");
        }
        if (strncmp(gg_client_fastpath_status(c), "active", 6) != 0)
            m.sid = 0;   /* not on the fast path: the parent fails it */
    }
    uint64_t ticket = 0;
    if (m.sid && gg_client_submit(c, s->prog, SLOW_ROWS, -1, NULL, &ticket) < 0)
        m.sid = 0;
    if (write(wfd, &m, sizeof m) != (ssize_t)sizeof m || !m.sid)
        _exit(2);
    char go;
    if (read(rfd, &go, 1) != 1)   /* the parent saw the descriptor taken */
        _exit(2);
    /* nothing between this and the wait blocks: the parent kills once the
     * wait is reached (asleep on the futex: the process state says so) */
    if (write(wfd, "w", 1) != 1)
        _exit(2);
    gg_client_wait(c, ticket, NULL);
    _exit(3);   /* the replay finished before the kill: the parent tries a longer one */
}

/* One try at a client killed while it waits on a replay of about target_ms.
 * 1: the kill landed with the replay still running; 0: the replay ended
 * first (a busy machine: the caller tries a longer one); -1: a check failed
 * before the kill.  What must go once the client is gone is checked either
 * way. */
static int killed_try(h_daemon *d, gg_client *w, const char *spin, double target_ms)
{
    uint64_t sess0 = t_stat(w, "sessions_active");
    int fds0 = fp_count_fds(d->pid), maps0 = fp_count_maps(d->pid, "gfxgraph-fastpath");
    CHECK(fds0 > 0);
    CHECK_EQ(maps0, 0);
    slow_prog s;
    slow_names(&s, "ggtest-fpkill");
    int up[2], down[2];
    if (!CHECK(pipe(up) == 0 && pipe(down) == 0))
        return -1;
    fflush(stdout);
    pid_t kid = fork();
    if (kid == 0) {
        close(up[0]);
        close(down[1]);
        killed_child(d->sock, &s, spin, target_ms, up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    kid_msg m = {0};
    bool got = read(up[0], &m, sizeof m) == (ssize_t)sizeof m && m.sid;
    int during_maps = 0, taken = -1, res = -1;
    char state = '?';
    if (CHECKF(got, "the child set up, opened its region and submitted")) {
        during_maps = fp_count_maps(d->pid, "gfxgraph-fastpath");
        taken = wait_taken(w, m.sid, m.req0, m.rep0);
        CHECKF(taken >= 0, "the descriptor is seen taken (%d)", taken);
        char wt = 0;
        if (write(down[1], "g", 1) != 1 || read(up[0], &wt, 1) != 1)
            h_note("the child did not reach its wait");
        /* asleep on the futex: wait for the state itself (a child that
         * exits, its replay done, is no longer 'R' or 'S') */
        for (int64_t end = h_now_ms() + 60000; strcmp(spin, "0") == 0 && h_now_ms() < end;
             h_sleep_ms(1)) {
            state = proc_state(kid);
            if (state != 'R')
                break;
        }
        res = taken == 1 ? 1 : taken == 0 ? 0 : -1;
    }
    kill(kid, SIGKILL);
    int status = 0;
    waitpid(kid, &status, 0);
    close(up[0]);
    close(down[1]);
    if (res == 1 && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
        h_note("the child's replay (%d layers) ended before the kill (status %#x): a longer "
               "one", m.layers, status);
        res = WIFEXITED(status) && WEXITSTATUS(status) == 3 ? 0 : -1;
    }
    if (res == 1 && strcmp(spin, "0") == 0)
        CHECKF(state == 'S', "the child was asleep in its wait when killed (state %c)", state);
    if (got)
        CHECKF(during_maps >= 1, "the daemon maps the region while the client lives (%d)",
               during_maps);
    /* everything goes once the work in flight ends */
    CHECK_EQ(fp_wait_stat(w, "sessions_active", sess0, 60000), sess0);
    CHECK_EQ(fp_wait_stat(w, "fastpath_regions", 0, 60000), 0);
    int fds1 = -1, maps1 = -1, bufs1 = -1;
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end; h_sleep_ms(10)) {
        fds1 = fp_count_fds(d->pid);
        maps1 = fp_count_maps(d->pid, "gfxgraph-fastpath");
        bufs1 = fp_count_maps(d->pid, "ggtest-fpkill");
        if (fds1 == fds0 && maps1 == 0 && bufs1 == 0)
            break;
    }
    CHECKF(fds1 == fds0, "no descriptor left in the daemon (%d before, %d after)", fds0, fds1);
    CHECKF(maps1 == 0, "no region left mapped (%d)", maps1);
    CHECKF(bufs1 == 0, "no client buffer left mapped (%d)", bufs1);
    slow_unlink(&s, false);
    return res;
}

static void test_killed(h_daemon *d, gg_client *w, const char *spin)
{
    char title[96];
    snprintf(title, sizeof title, "a client SIGKILLed while it waits (GFXGRAPH_SPIN_US=%s)", spin);
    h_section(title);
    /* a replay that ends before the kill (a busy machine) proves nothing:
     * again, twice as long */
    int res = 0, tries = 0;
    for (double ms = 300; res == 0 && tries < 4; ms *= 2, tries++)
        res = killed_try(d, w, spin, ms);
    CHECKF(res == 1, "the descriptor is taken and still running when the waiting child is "
           "SIGKILLed (%d, %d tries)", res, tries);

    /* a new client works */
    gg_client *c = fp_client(d->sock, "fp-after-kill");
    tbuf x = {0}, y = {0};
    if (c && tbuf_new(c, &x, 4 * 8) && tbuf_new(c, &y, 4 * 8)) {
        uint64_t prog = t_define_silu2x(c, "after", x.id, y.id, 8);
        for (int i = 0; i < 32; i++)
            x.f[i] = (float)i / 8.0f - 2.0f;
        gg_replay_result r;
        if (prog && CHECK(gg_client_replay(c, prog, 4, -1, &r) == 0))
            CHECK(t_close(y.f[31], t_silu2x_ref(x.f[31]), 1e-5) &&
                  t_close(y.f[0], t_silu2x_ref(x.f[0]), 1e-5));
        CHECK_CONTAINS(gg_client_fastpath_status(c), "active");
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    CHECK_EQ(fp_wait_stat(w, "fastpath_regions", 0, 60000), 0);
}

/* ---- program.release and buffer.release around fast-path work --------------------- */

/* One try: a replay of about target_ms submitted, seen taken and still
 * running (stats), then its program released and its input buffer.  The
 * buffer stays busy while the replay runs; on a busy machine the replay can
 * end between the look at stats and the buffer.release, and then the
 * daemon must have counted it before it let the buffer go.  1: EBUSY seen;
 * 0: the replay ended first; -1: a check failed. */
static int release_try(gg_client *c, gg_client *w, double target_ms)
{
    slow_prog s;
    slow_names(&s, "ggtest-fprel");
    bool mapped = slow_setup(&s, c, target_ms);
    int res = -1;
    uint64_t t = 0, sid = gg_client_session_id(c);
    if (!mapped)
        goto out;
    memset(s.y, 0, s.xb);
    const msgpack_object *st = t_stats(w);
    uint64_t req0 = st ? h_getu(fp_session_of(st, sid), "requests") : UINT64_MAX;
    uint64_t rep0 = st ? h_getu(fp_session_of(st, sid), "replays") : UINT64_MAX;
    if (!CHECK(st) || !CHECK(gg_client_submit(c, s.prog, SLOW_ROWS, -1, NULL, &t) == 0))
        goto out;
    int taken = wait_taken(w, sid, req0, rep0);
    CHECKF(taken >= 0, "the descriptor is seen taken (%d)", taken);
    /* the program goes from the list at once; its buffers stay busy until
     * the replay is done */
    CHECK(gg_client_program_release(c, s.prog) == 0);
    int rc = gg_client_buffer_release(c, s.bx);
    if (rc == 0) {
        st = t_stats(w);
        uint64_t rep = st ? h_getu(fp_session_of(st, sid), "replays") : UINT64_MAX;
        CHECKF(rep == rep0 + 1, "buffer.release let the buffer go only once the replay was "
               "done and counted (%llu replays, %llu before)", (unsigned long long)rep,
               (unsigned long long)rep0);
        h_note("the replay (%d layers) ended before buffer.release: a longer one", s.layers);
    } else {
        CHECKF(rc == -EBUSY, "buffer.release while the released program's replay runs: "
               "EBUSY (%d: %s)", rc, gg_client_last_error(c));
    }
    gg_replay_result r;
    CHECKF(gg_client_wait(c, t, &r) == 0, "the replay of the released program completes "
           "(%s)", gg_client_last_error(c));
    CHECKF(slow_wrong(&s) == 0, "with the right output (%d wrong)", slow_wrong(&s));
    if (rc != 0) {
        int rc2 = gg_client_buffer_release(c, s.bx);
        CHECKF(rc2 == 0, "buffer.release right after the completion (%d: %s)", rc2,
               gg_client_last_error(c));
    }
    CHECK(gg_client_buffer_release(c, s.by) == 0 && gg_client_buffer_release(c, s.bw) == 0);
    res = rc == -EBUSY && taken == 1 ? 1 : rc == 0 || taken == 0 ? 0 : -1;
out:
    slow_unlink(&s, mapped);
    return res;
}

static void test_release(h_daemon *d, gg_client *w)
{
    h_section("program.release with a fast-path replay in flight; buffer.release after the "
              "completion");
    gg_client *c = fp_client(d->sock, "fp-release");
    int res = 0, tries = 0;
    for (double ms = 300; c && res == 0 && tries < 4; ms *= 2, tries++)
        res = release_try(c, w, ms);
    CHECKF(res == 1, "buffer.release met a released program's running replay: EBUSY (%d, %d "
           "tries)", res, tries);
    /* many times over: a hit's completion is seen, then the program and its
     * buffers are released at once */
    tbuf x = {0}, y = {0};
    int busy = 0, fails = 0, n = 0;
    if (c && tbuf_new(c, &x, 4 * 8) && tbuf_new(c, &y, 4 * 8)) {
        for (; n < 200; n++) {
            uint64_t bx = 0, by = 0, prog = 0;
            if (gg_client_buffer_register_shm(c, x.name, 0, x.size, &bx) < 0 ||
                gg_client_buffer_register_shm(c, y.name, 0, y.size, &by) < 0 ||
                !(prog = t_define_silu2x(c, "rel", bx, by, 8)) ||
                gg_client_replay(c, prog, 2, -1, NULL) < 0 ||
                gg_client_replay(c, prog, 2, -1, NULL) < 0 ||
                gg_client_program_release(c, prog) < 0) {
                if (!fails++)
                    h_note("iteration %d: %s", n, gg_client_last_error(c));
                continue;
            }
            int rc1 = gg_client_buffer_release(c, bx), rc2 = gg_client_buffer_release(c, by);
            if (rc1 == -EBUSY || rc2 == -EBUSY) {
                if (!busy++)
                    h_note("iteration %d: %s", n, gg_client_last_error(c));
                for (int k = 0; k < 1000 && gg_client_buffer_release(c, bx) == -EBUSY; k++)
                    h_sleep_ms(1);
                for (int k = 0; k < 1000 && gg_client_buffer_release(c, by) == -EBUSY; k++)
                    h_sleep_ms(1);
            } else if (rc1 < 0 || rc2 < 0) {
                fails++;
            }
        }
    }
    CHECK_EQ(fails, 0);
    CHECKF(busy == 0, "buffer.release straight after a released program's last fast-path "
           "completion never says EBUSY (%d of %d)", busy, n);
    CHECK_CONTAINS(gg_client_fastpath_status(c), "active");
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
}


/* ---- many sessions ------------------------------------------------------------------ */

#define NCLIENTS 16
#define NREPLAYS 200
#define MD 32

typedef struct {
    const char *sock;
    int idx;
    pthread_barrier_t *bar;
    int ok, wrong, fails, fastpath;
    char err[256];
} worker;

/* tbuf_new with a name of its own: h_unique is not for several threads */
static bool named_tbuf(gg_client *c, tbuf *b, size_t floats, int idx, char what)
{
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "/ggtest-fpmany-%d-%d-%c", (int)getpid(), idx, what);
    b->size = floats * sizeof(float);
    if (gg_client_shm_create(b->name, b->size, (void **)&b->f) < 0) {
        b->f = NULL;
        return false;
    }
    return gg_client_buffer_register_shm(c, b->name, 0, b->size, &b->id) == 0;
}

static void *worker_main(void *p)
{
    worker *wk = p;
    char name[32];
    snprintf(name, sizeof name, "fp-many-%d", wk->idx);
    gg_client *c = gg_client_new();
    tbuf x = {0}, y = {0};
    uint64_t prog = 0;
    float k = (float)(wk->idx + 1);
    if (gg_client_connect(c, wk->sock, name) == 0 && named_tbuf(c, &x, 4 * MD, wk->idx, 'x') &&
        named_tbuf(c, &y, 4 * MD, wk->idx, 'y')) {
        gg_program_def *d = gg_program_def_new(name);
        int64_t sh[2] = {GG_BATCH, MD};
        static const int b[] = {1, 2, 4};
        gg_program_def_buckets(d, 3, b);
        gg_program_def_tensor(d, "x", x.id, 0, "f32", 2, sh);
        gg_program_def_tensor(d, "y", y.id, 0, "f32", 2, sh);
        gg_program_def_op(d, "scale", "x", "y");
        gg_program_def_attr_f(d, "scale", k);
        if (gg_client_program_define(c, d, &prog) < 0)
            prog = 0;
        gg_program_def_free(d);
    }
    if (!prog)
        snprintf(wk->err, sizeof wk->err, "setup: %s", gg_client_last_error(c));
    for (int n = 0; n < NREPLAYS; n++) {
        if (!prog) {
            wk->fails++;
            goto sync;
        }
        int batch = 1 + (n + wk->idx) % 4;
        for (int i = 0; i < 4 * MD; i++) {
            x.f[i] = (float)((i + n * 3 + wk->idx * 7) % 29) - 14.0f;
            y.f[i] = 0.5f;
        }
        gg_replay_result r;
        if (gg_client_replay(c, prog, batch, -1, &r) < 0) {
            if (!wk->fails++)
                snprintf(wk->err, sizeof wk->err, "replay %d: %s", n, gg_client_last_error(c));
        } else {
            int bad = r.batch != batch;
            for (int i = 0; i < batch * MD; i++)
                bad += y.f[i] != k * x.f[i];
            wk->wrong += bad != 0;
            wk->ok++;
        }
    sync:
        if (n == 0) {
            wk->fastpath = strncmp(gg_client_fastpath_status(c), "active", 6) == 0;
            pthread_barrier_wait(wk->bar);   /* all connected with regions */
            pthread_barrier_wait(wk->bar);   /* the main thread looked at stats */
        }
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    return NULL;
}

static void test_many(h_daemon *d, gg_client *w)
{
    h_section("16 sessions with regions at once, 200 fast-path replays each");
    uint64_t fp0 = t_stat(w, "fastpath_replays"), sess0 = t_stat(w, "sessions_active");
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NCLIENTS + 1);
    worker wk[NCLIENTS];
    pthread_t th[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
        wk[i] = (worker){.sock = d->sock, .idx = i, .bar = &bar};
        if (pthread_create(&th[i], NULL, worker_main, &wk[i]) != 0) {
            CHECK(!"pthread_create");
            exit(1);
        }
    }
    pthread_barrier_wait(&bar);
    const msgpack_object *st = t_stats(w);
    if (st) {
        CHECK_EQ(h_getu(st, "fastpath_regions"), NCLIENTS);
        CHECK_EQ(h_getu(st, "sessions_active"), sess0 + NCLIENTS);
        int with = 0;
        const msgpack_object *ss = h_get(st, "sessions");
        for (uint32_t i = 0; ss && ss->type == MSGPACK_OBJECT_ARRAY && i < ss->via.array.size; i++) {
            const msgpack_object *f = h_get(&ss->via.array.ptr[i], "fastpath");
            with += f && f->type == MSGPACK_OBJECT_BOOLEAN && f->via.boolean;
        }
        CHECK_EQ(with, NCLIENTS);
    }
    pthread_barrier_wait(&bar);
    int ok = 0, wrong = 0, fails = 0, fast = 0;
    for (int i = 0; i < NCLIENTS; i++) {
        pthread_join(th[i], NULL);
        ok += wk[i].ok;
        wrong += wk[i].wrong;
        fails += wk[i].fails;
        fast += wk[i].fastpath;
        if (wk[i].err[0])
            h_note("client %d: %s", i, wk[i].err);
    }
    pthread_barrier_destroy(&bar);
    CHECK_EQ(fast, NCLIENTS);
    CHECK_EQ(ok, NCLIENTS * NREPLAYS);
    CHECK_EQ(fails, 0);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(t_stat(w, "fastpath_replays") - fp0, NCLIENTS * NREPLAYS);
    CHECK_EQ(fp_wait_stat(w, "fastpath_regions", 0, 60000), 0);
    CHECK_EQ(fp_wait_stat(w, "sessions_active", sess0, 60000), sess0);
}

/* ---- a daemon stop ------------------------------------------------------------------ */

static bool clean_loss(int rc)
{
    return rc == -ECONNRESET || rc == -ENOTCONN || rc == -ESHUTDOWN;
}

/* A client with its region open (one replay done) and a program: 0 after a
 * failed check. */
static uint64_t idle_region(gg_client *c, tbuf *x, tbuf *y)
{
    if (!c || !tbuf_new(c, x, 4 * 8) || !tbuf_new(c, y, 4 * 8))
        return 0;
    uint64_t prog = t_define_silu2x(c, "idle", x->id, y->id, 8);
    if (!prog || !CHECK(gg_client_replay(c, prog, 2, -1, NULL) == 0))
        return 0;
    CHECK_CONTAINS(gg_client_fastpath_status(c), "active");
    gg_client_set_timeout(c, 20000);
    return prog;
}

static void test_stop_idle(void)
{
    h_section("SIGTERM with three regions open and idle");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    gg_client *c[3];
    tbuf x[3], y[3];
    uint64_t prog[3];
    memset(x, 0, sizeof x);
    memset(y, 0, sizeof y);
    for (int i = 0; i < 3; i++) {
        c[i] = fp_client(d.sock, "fp-idle");
        prog[i] = idle_region(c[i], &x[i], &y[i]);
    }
    CHECK_EQ(t_stat(c[0], "fastpath_regions"), 3);
    kill(d.pid, SIGTERM);
    int code = h_daemon_wait_exit(&d, 30000);
    CHECKF(code == 0, "exit status 0 (%d)", code);
    if (code != 0)
        h_daemon_dump_log(&d);
    for (int i = 0; i < 3; i++) {
        int64_t t0 = h_now_ms();
        int rc = prog[i] ? gg_client_replay(c[i], prog[i], 1, -1, NULL) : -ENOTCONN;
        CHECKF(clean_loss(rc), "client %d: the next replay fails cleanly (%d: %s)", i, rc,
               gg_client_last_error(c[i]));
        CHECKF(h_now_ms() - t0 < 15000, "client %d: no hang", i);
        rc = prog[i] ? gg_client_submit(c[i], prog[i], 1, -1, NULL, &(uint64_t){0}) : -ENOTCONN;
        CHECKF(clean_loss(rc), "client %d: a submit after that fails cleanly too (%d)", i, rc);
        tbuf_free(&x[i]);
        tbuf_free(&y[i]);
        gg_client_close(c[i]);
    }
    if (d.pid > 0)
        h_daemon_stop(&d);
    else {
        unlink(d.log);
        rmdir(d.dir);
    }
}

/* A daemon that dies with a descriptor it never took: the library's wait
 * for sq_head before a socket request must see the connection gone and
 * answer, not wait for ever (no timeout is set). */
static void test_dead_untaken(void)
{
    h_section("the daemon killed with a submission it never took: socket calls still return");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    gg_client *c = fp_client(d.sock, "fp-dead");
    uint64_t prog = c ? idle_region(c, &x, &y) : 0;
    if (prog) {
        kill(d.pid, SIGSTOP);
        uint64_t t = 0;
        CHECK(gg_client_submit(c, prog, 1, -1, NULL, &t) == 0);
        kill(d.pid, SIGKILL);
        h_daemon_wait_exit(&d, 30000);
        int64_t t0 = h_now_ms();
        int rc = gg_client_program_release(c, prog);
        CHECKF(clean_loss(rc), "program.release fails cleanly (%d: %s)", rc,
               gg_client_last_error(c));
        CHECKF(h_now_ms() - t0 < 5000, "and at once (%lld ms)", (long long)(h_now_ms() - t0));
    }
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    unlink(d.log);
    unlink(d.sock);
    rmdir(d.dir);
}

typedef struct {
    slow_prog *s;
    gg_client *c;
    uint64_t small;
    int rc, rc_after;
    gg_replay_result res;
} inflight;

static void *inflight_main(void *p)
{
    inflight *f = p;
    f->rc = gg_client_replay(f->c, f->s->prog, SLOW_ROWS, -1, &f->res);
    /* straight after the answer: the daemon is stopping */
    f->rc_after = gg_client_replay(f->c, f->small, 1, -1, NULL);
    return NULL;
}

static void test_stop_inflight(void)
{
    h_section("SIGTERM with a fast-path replay in flight and an idle region");
    /* a stop that waits as long as any busy machine needs: the replay is
     * what ends it here, not shutdown-timeout-ms */
    const char *args[] = {"--set", "shutdown-timeout-ms=600000", NULL};
    h_daemon d;
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    gg_client *w = fp_socket_client(d.sock, "fp-watch");
    gg_client *c = fp_client(d.sock, "fp-slow");
    gg_client *idle = fp_client(d.sock, "fp-idle");
    tbuf ix = {0}, iy = {0}, sx = {0}, sy = {0};
    slow_prog s;
    slow_names(&s, "ggtest-fpstop");
    bool mapped = false;
    uint64_t iprog = idle_region(idle, &ix, &iy);
    uint64_t small = 0;
    if (!w || !c || !iprog)
        goto out;
    mapped = slow_setup(&s, c, 1000);
    if (!mapped || !tbuf_new(c, &sx, 4 * 8) || !tbuf_new(c, &sy, 4 * 8) ||
        !(small = t_define_silu2x(c, "small", sx.id, sy.id, 8)))
        goto out;
    gg_client_set_timeout(c, 30000);
    memset(s.y, 0, s.xb);
    CHECK_CONTAINS(gg_client_fastpath_status(c), "active");
    uint64_t sid = gg_client_session_id(c);
    const msgpack_object *st = t_stats(w);
    uint64_t req0 = st ? h_getu(fp_session_of(st, sid), "requests") : 0;
    uint64_t rep0 = st ? h_getu(fp_session_of(st, sid), "replays") : 0;
    inflight f = {.s = &s, .c = c, .small = small, .rc = 1, .rc_after = 1};
    pthread_t th;
    if (!CHECK(pthread_create(&th, NULL, inflight_main, &f) == 0))
        goto out;
    int taken = wait_taken(w, sid, req0, rep0);
    CHECKF(taken == 1, "the descriptor is taken and still running at the SIGTERM (%d)", taken);
    gg_client_close(w);
    w = NULL;
    int64_t t0 = h_now_ms();
    kill(d.pid, SIGTERM);
    pthread_join(th, NULL);
    CHECKF(f.rc == 0, "the in-flight fast-path replay is answered (rc %d: %s)", f.rc,
           gg_client_last_error(c));
    CHECKF(f.rc == 0 && f.res.path == GG_PATH_GRAPH && slow_wrong(&s) == 0,
           "with the right output through %d identity layers (%d wrong)", s.layers,
           slow_wrong(&s));
    CHECKF(clean_loss(f.rc_after), "a replay after the stop began fails cleanly (%d: %s)",
           f.rc_after, gg_client_last_error(c));
    h_note("a replay after the stop began: %d (%s: %s)", f.rc_after, gg_client_last_error_code(c),
           gg_client_last_error(c));
    int code = h_daemon_wait_exit(&d, 300000);
    CHECKF(code == 0, "exit status 0 (%d)", code);
    CHECKF(h_now_ms() - t0 < 300000, "no hang");
    int rc = gg_client_replay(idle, iprog, 1, -1, NULL);
    CHECKF(clean_loss(rc), "the idle region's client fails cleanly (%d: %s)", rc,
           gg_client_last_error(idle));
    char *log = h_read_file(d.log);
    CHECK(!strstr(log, "unfinished"));
    free(log);
out:
    gg_client_close(w);
    gg_client_close(c);
    gg_client_close(idle);
    tbuf_free(&ix);
    tbuf_free(&iy);
    tbuf_free(&sx);
    tbuf_free(&sy);
    slow_unlink(&s, mapped);
    if (d.pid > 0)
        h_daemon_stop(&d);
    else {
        unlink(d.log);
        rmdir(d.dir);
    }
}

int main(void)
{
    h_init("test_fastpath_life", 540);
    unsetenv("GFXGRAPH_FASTPATH");
    unsetenv("GFXGRAPH_SPIN_US");
    signal(SIGPIPE, SIG_IGN);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        gg_client *w = fp_socket_client(d.sock, "fp-watch");
        if (w) {
            test_killed(&d, w, "1000000");
            test_killed(&d, w, "0");
            test_many(&d, w);
            test_release(&d, w);
        }
        gg_client_close(w);
        CHECK_EQ(h_daemon_stop(&d), 0);
    }
    test_stop_idle();
    test_stop_inflight();
    test_dead_untaken();
    return h_finish();
}
