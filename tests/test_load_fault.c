/* SPDX-License-Identifier: MIT */
/* Load and faults together, every result checked.
 *
 * Each client is a forked process with its own gg_client, its own shm
 * buffers x, c, y ([4, 64] f32) and its own program y = x*2 + c (scale, add;
 * buckets 1, 2, 4).  Before every replay the client rewrites x (values that
 * depend on the client and the replay number) and poisons y with NaN; after
 * it, every row of the batch is compared with 2x + c exactly (small
 * integers: exact in f32), so a wrong, stale or missing result is caught.
 * Half the clients use the fast path, half connect with GFXGRAPH_FASTPATH=0
 * (the socket); the fast half is checked to have its region active.
 *
 *   load     a warm-up round (32 clients x 200), then the main round (32 x
 *            GG_LOAD_REPLAYS, 2,000 by default): all replays answered, none
 *            wrong; sessions_active, fastpath_regions and the daemon's open
 *            descriptors back to where they were after each round; the
 *            daemon's VmRSS after the main round within 10 % of the one
 *            after the warm-up.
 *   kill     6 rounds of 8 clients SIGKILLed in the middle of their replay
 *            streams (staggered, after a few good replays): sessions,
 *            regions and descriptors back; a new client works.
 *   restart  8 clients (at least 1,000 replays each) while the daemon is
 *            SIGKILLed and started again on the same socket, 3 times: each client reconnects
 *            (gg_client_connect again), registers its buffers and defines
 *            its program again and finishes its replays: 0 lost, 0 wrong.
 *   term     32 clients replaying when the daemon gets SIGTERM: each replay
 *            either answered right or failed cleanly (-ECONNRESET /
 *            -ESHUTDOWN), never wrong, never a hang; the daemon exits 0 and
 *            logs no unfinished work.
 *
 * Environment: GG_LOAD_CLIENTS (32), GG_LOAD_REPLAYS (2000), GG_LOAD_WARMUP
 * (2000), GG_LOAD_DURATION_S (0: the main round repeats until that long).  bench/soak.sh runs this binary with larger figures. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_fastpath_util.h"

#define ROWS 4
#define D 64
#define NEL (ROWS * D)
#define MAXK 256

enum { MODE_COUNT, MODE_KILL, MODE_RESTART, MODE_TERM };

/* One client's figures, in memory shared with the parent. */
typedef struct {
    atomic_int progress;     /* good replays so far */
    atomic_int ok, wrong, fails, reconnects;
    int first_err;           /* the first failing rc (0: none) */
    int fast_active;         /* 1 the region was active, 0 not, -1 unknown */
    int lost;                /* replays it never got answered */
    int hung;                /* a call or the loop ran past its limit */
    int done;
    char err[200];
} kid_res;

typedef struct {
    int idx, fast, mode, n;
    const char *sock;
    char nx[64], ny[64], nc[64];
} kid_job;

static kid_res *g_res;   /* MAXK entries, MAP_SHARED */
/* room for every client and the watcher (the default limit is 64 per uid) */
/* Every round's clients are new sessions whose graphs are parked when they
 * leave (kept warm for a returning client, PROTOCOL.md section 6): a small
 * cache evicts the last round's, so RSS compares like with like. */
static const char *const g_args[] = {"--set", "max-connections-per-uid=300",
                                     "--set", "cache-entries=40", NULL};
static atomic_int *g_stop;   /* MODE_RESTART: finish once set (MAP_SHARED) */

static int env_int(const char *k, int def)
{
    const char *v = getenv(k);
    return v && *v ? atoi(v) : def;
}

/* ---- the client process ---------------------------------------------------------- */

typedef struct {
    gg_client *c;
    float *x, *y, *cc;
    uint64_t prog;
} kid_state;

static void kid_note(kid_res *r, const char *what, gg_client *c, int rc)
{
    if (!r->err[0])
        snprintf(r->err, sizeof r->err, "%s: %d (%s: %s)", what, rc, gg_client_last_error_code(c),
                 gg_client_last_error(c));
}

/* Connect, register the three buffers and define y = x*2 + c.  0 or rc. */
static int kid_session(const kid_job *j, kid_state *s, kid_res *r)
{
    if (!j->fast)
        setenv("GFXGRAPH_FASTPATH", "0", 1);
    int rc = gg_client_connect(s->c, j->sock, j->fast ? "load-fast" : "load-sock");
    if (rc < 0)
        return rc;
    gg_client_set_timeout(s->c, 30000);
    size_t sz = NEL * sizeof(float);
    uint64_t bx, by, bc;
    if ((rc = gg_client_buffer_register_shm(s->c, j->nx, 0, sz, &bx)) < 0 ||
        (rc = gg_client_buffer_register_shm(s->c, j->ny, 0, sz, &by)) < 0 ||
        (rc = gg_client_buffer_register_shm(s->c, j->nc, 0, sz, &bc)) < 0) {
        kid_note(r, "register", s->c, rc);
        return rc;
    }
    gg_program_def *p = gg_program_def_new("load");
    int64_t sh[2] = {GG_BATCH, D};
    static const int b[] = {1, 2, 4};
    gg_program_def_buckets(p, 3, b);
    gg_program_def_tensor(p, "x", bx, 0, "f32", 2, sh);
    gg_program_def_tensor(p, "c", bc, 0, "f32", 2, sh);
    gg_program_def_tensor(p, "y", by, 0, "f32", 2, sh);
    gg_program_def_scratch(p, "t", "f32", 2, sh);
    gg_program_def_op(p, "scale", "x", "t");
    gg_program_def_attr_f(p, "scale", 2.0);
    gg_program_def_op(p, "add", "t, c", "y");
    rc = gg_client_program_define(s->c, p, &s->prog);
    if (rc < 0)
        kid_note(r, "define", s->c, rc);
    gg_program_def_free(p);
    return rc;
}

static bool lost_conn(int rc)
{
    return rc == -ECONNRESET || rc == -ESHUTDOWN || rc == -ENOTCONN || rc == -EPIPE;
}

/* One replay with fresh x; 1 right, 0 wrong, rc < 0 failed. */
static int kid_replay(const kid_job *j, kid_state *s, unsigned k)
{
    int batch = 1 + (int)(k % ROWS);
    for (int i = 0; i < batch * D; i++) {
        s->x[i] = (float)((int)((k * 7919u + (unsigned)i * 31u + (unsigned)j->idx * 104729u) %
                                2048u) - 1024);
        s->y[i] = NAN;
    }
    if (k % 64 == 0)   /* c changes too, now and then */
        for (int i = 0; i < NEL; i++)
            s->cc[i] = (float)((i % 17) + j->idx + (int)(k % 5));
    gg_replay_result res;
    int rc = gg_client_replay(s->c, s->prog, batch, -1, &res);
    if (rc < 0)
        return rc;
    if (res.batch != batch)
        return 0;
    for (int i = 0; i < batch * D; i++)
        if (s->y[i] != 2.0f * s->x[i] + s->cc[i])
            return 0;
    return 1;
}

static void kid_main(const kid_job *j)
{
    kid_res *r = &g_res[j->idx];
    alarm(j->mode == MODE_KILL ? 120 : 280);   /* never outlive the test */
    kid_state s = {0};
    size_t sz = NEL * sizeof(float);
    if (gg_client_shm_create(j->nx, sz, (void **)&s.x) < 0 ||
        gg_client_shm_create(j->ny, sz, (void **)&s.y) < 0 ||
        gg_client_shm_create(j->nc, sz, (void **)&s.cc) < 0) {
        snprintf(r->err, sizeof r->err, "shm_create failed");
        _exit(3);
    }
    s.c = gg_client_new();
    r->fast_active = -1;
    int rc = kid_session(j, &s, r);
    if (rc < 0) {
        kid_note(r, "session", s.c, rc);
        r->first_err = rc;
        r->lost = j->n;
        r->done = 1;
        _exit(4);
    }
    int64_t end = h_now_ms() + 240000;
    unsigned k = 0;
    for (;;) {
        if (j->mode != MODE_KILL && j->mode != MODE_TERM && (int)k >= j->n &&
            (j->mode != MODE_RESTART || atomic_load(g_stop)))
            break;
        if (h_now_ms() > end) {
            r->hung = 1;
            break;
        }
        int64_t t0 = h_now_ms();
        int v = kid_replay(j, &s, k);
        if (h_now_ms() - t0 > 60000)   /* a hang, not a busy machine */
            r->hung = 1;
        if (k == 0 && v >= 0)
            r->fast_active = strncmp(gg_client_fastpath_status(s.c), "active", 6) == 0;
        if (v == 1) {
            atomic_fetch_add(&r->ok, 1);
            atomic_fetch_add(&r->progress, 1);
            k++;
            continue;
        }
        if (v == 0) {
            atomic_fetch_add(&r->wrong, 1);
            if (!r->err[0])
                snprintf(r->err, sizeof r->err, "replay %u: wrong result", k);
            k++;
            continue;
        }
        /* failed */
        if (!r->first_err)
            r->first_err = v;
        if (j->mode == MODE_TERM) {
            kid_note(r, "replay after SIGTERM", s.c, v);
            /* and the next one fails at once too, without hanging */
            t0 = h_now_ms();
            int v2 = gg_client_replay(s.c, s.prog, 1, -1, NULL);
            if (v2 >= 0 || h_now_ms() - t0 > 60000)
                r->hung = 1;
            break;
        }
        if (j->mode == MODE_RESTART && lost_conn(v)) {
            /* the daemon went away: connect again and set everything up
             * again; the replay k is done again (not lost) */
            atomic_fetch_add(&r->reconnects, 1);
            gg_client_disconnect(s.c);
            int64_t give_up = h_now_ms() + 60000;
            while ((rc = kid_session(j, &s, r)) < 0 && h_now_ms() < give_up) {
                gg_client_disconnect(s.c);
                h_sleep_ms(20);
            }
            if (rc < 0) {
                kid_note(r, "reconnect", s.c, rc);
                break;
            }
            continue;
        }
        atomic_fetch_add(&r->fails, 1);
        kid_note(r, "replay", s.c, v);
        if (j->mode == MODE_KILL)
            h_sleep_ms(10);
        else
            k++;
    }
    if (j->mode == MODE_COUNT)
        r->lost = j->n - atomic_load(&r->ok) - atomic_load(&r->wrong);
    else if (j->mode == MODE_RESTART)   /* replay k was never answered */
        r->lost = (int)k < j->n ? j->n - (int)k : 0;
    r->done = 1;
    gg_client_close(s.c);
    gg_client_shm_destroy(j->nx, s.x, sz);
    gg_client_shm_destroy(j->ny, s.y, sz);
    gg_client_shm_destroy(j->nc, s.cc, sz);
    _exit(0);
}

/* ---- the parent's side ------------------------------------------------------------ */

typedef struct {
    int n;
    pid_t pid[MAXK];
    kid_job job[MAXK];
} kids;

/* Fork n clients, the first half on the fast path. */
static void kids_start(kids *ks, const char *sock, int n, int mode, int replays)
{
    memset(ks, 0, sizeof *ks);
    memset(g_res, 0, sizeof(kid_res) * MAXK);
    atomic_store(g_stop, 0);
    ks->n = n;
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        kid_job *j = &ks->job[i];
        *j = (kid_job){.idx = i, .fast = i < n / 2, .mode = mode, .n = replays, .sock = sock};
        h_unique(j->nx, sizeof j->nx, "/ggtest-load-x");
        h_unique(j->ny, sizeof j->ny, "/ggtest-load-y");
        h_unique(j->nc, sizeof j->nc, "/ggtest-load-c");
        pid_t pid = fork();
        if (pid == 0)
            kid_main(j);
        ks->pid[i] = pid;
        CHECKF(pid > 0, "fork client %d", i);
    }
}

/* Wait until every client has at least want good replays more than its
 * entry in base (NULL: 0), or has ended. */
static bool kids_progress_from(kids *ks, const int *base, int want, int timeout_ms)
{
    for (int64_t end = h_now_ms() + timeout_ms; h_now_ms() < end; h_sleep_ms(2)) {
        int behind = 0;
        for (int i = 0; i < ks->n; i++)
            behind += atomic_load(&g_res[i].progress) < (base ? base[i] : 0) + want &&
                      !g_res[i].done;
        if (!behind)
            return true;
    }
    return false;
}

static bool kids_progress(kids *ks, int want, int timeout_ms)
{
    return kids_progress_from(ks, NULL, want, timeout_ms);
}

/* Reap them all (SIGKILL after timeout_ms); how many had to be killed. */
static int kids_reap(kids *ks, int timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    int left = 0, killed = 0;
    for (int i = 0; i < ks->n; i++)
        left += ks->pid[i] > 0;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < ks->n; i++)
                if (ks->pid[i] == p) {
                    ks->pid[i] = 0;
                    left--;
                }
            continue;
        }
        if (h_now_ms() > end) {
            for (int i = 0; i < ks->n; i++)
                if (ks->pid[i] > 0) {
                    kill(ks->pid[i], SIGKILL);
                    killed++;
                    g_res[i].hung = 1;
                }
            end = h_now_ms() + 60000;
        }
        h_sleep_ms(5);
    }
    /* the buffers of clients that could not remove them */
    for (int i = 0; i < ks->n; i++) {
        shm_unlink(ks->job[i].nx);
        shm_unlink(ks->job[i].ny);
        shm_unlink(ks->job[i].nc);
    }
    return killed;
}

typedef struct {
    long ok, wrong, fails, lost, reconnects, hung, fast, fast_active, errs;
} totals;

static totals kids_sum(kids *ks)
{
    totals t = {0};
    for (int i = 0; i < ks->n; i++) {
        kid_res *r = &g_res[i];
        t.ok += r->ok;
        t.wrong += r->wrong;
        t.fails += r->fails;
        t.lost += r->lost;
        t.reconnects += r->reconnects;
        t.hung += r->hung;
        t.fast += ks->job[i].fast;
        t.fast_active += ks->job[i].fast && r->fast_active == 1;
        if (r->err[0] && t.errs++ < 5)
            h_note("client %d (%s): %s", i, ks->job[i].fast ? "fast" : "socket", r->err);
    }
    return t;
}

static long rss_kb(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    char *s = h_read_file(p);
    char *v = strstr(s, "VmRSS:");
    long kb = v ? strtol(v + 6, NULL, 10) : -1;
    free(s);
    return kb;
}

/* sessions_active, fastpath_regions and the fd count back to where they were. */
static void check_back(h_daemon *d, gg_client *w, uint64_t sess0, int fds0)
{
    CHECK_EQ(fp_wait_stat(w, "sessions_active", sess0, 60000), sess0);
    CHECK_EQ(fp_wait_stat(w, "fastpath_regions", 0, 15000), 0);
    int fds = -1;
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end; h_sleep_ms(10))
        if ((fds = fp_count_fds(d->pid)) == fds0)
            break;
    CHECKF(fds == fds0, "the daemon's descriptors are back (%d before, %d after)", fds0, fds);
}

/* One round of n clients x replays; its figures. */
static totals load_round(h_daemon *d, gg_client *w, int n, int replays, const char *what)
{
    uint64_t sess0 = t_stat(w, "sessions_active");
    uint64_t fpr0 = t_stat(w, "fastpath_replays");
    int fds0 = fp_count_fds(d->pid);
    kids ks;
    int64_t t0 = h_now_ms();
    kids_start(&ks, d->sock, n, MODE_COUNT, replays);
    int killed = kids_reap(&ks, 200000);
    int64_t ms = h_now_ms() - t0;
    totals t = kids_sum(&ks);
    h_note("%s: %d clients x %d replays in %lld ms (%.0f replays/s): %ld right, %ld wrong, "
           "%ld failed, %ld lost", what, n, replays, (long long)ms,
           ms > 0 ? t.ok * 1000.0 / ms : 0.0, t.ok, t.wrong, t.fails, t.lost);
    CHECK_EQ(killed, 0);
    CHECK_EQ(t.ok, (long)n * replays);
    CHECK_EQ(t.wrong, 0);
    CHECK_EQ(t.fails, 0);
    CHECK_EQ(t.lost, 0);
    CHECK_EQ(t.hung, 0);
    CHECKF(t.fast_active == t.fast, "the fast half had its region active (%ld of %ld)",
           t.fast_active, t.fast);
    /* the daemon counted the fast half's replays as fast-path ones */
    uint64_t want = (uint64_t)(n / 2) * (uint64_t)replays;
    CHECK_EQ(fp_wait_stat(w, "fastpath_replays", fpr0 + want, 60000) - fpr0, want);
    check_back(d, w, sess0, fds0);
    return t;
}

/* The main round repeats until duration_s has passed (at least once). */
static void test_load(h_daemon *d, gg_client *w, int n, int replays, int warm, int duration_s)
{
    h_section("load: both transports, every result checked; RSS flat after warm-up");
    load_round(d, w, n, warm, "warm-up");
    long rss0 = rss_kb(d->pid);
    totals all = {0};
    int rounds = 0;
    int64_t t0 = h_now_ms();
    do {
        totals t = load_round(d, w, n, replays, "main round");
        all.ok += t.ok;
        all.wrong += t.wrong;
        all.lost += t.lost + t.fails;
        rounds++;
    } while (h_now_ms() - t0 < duration_s * 1000LL);
    int64_t ms = h_now_ms() - t0;
    long rss1 = rss_kb(d->pid);
    h_note("load total: %d round(s), %ld replays in %lld ms: %.0f replays/s, %ld lost, %ld wrong",
           rounds, all.ok, (long long)ms, ms > 0 ? all.ok * 1000.0 / ms : 0.0, all.lost,
           all.wrong);
    h_note("daemon VmRSS: %ld kB after the warm-up, %ld kB after the main round (%+.1f %%)", rss0,
           rss1, rss0 > 0 ? (rss1 - rss0) * 100.0 / rss0 : 0.0);
#if defined(__SANITIZE_ADDRESS__)
    /* ASan keeps freed memory in its quarantine: RSS says nothing here */
    h_note("VmRSS not checked under AddressSanitizer");
#else
    CHECKF(rss0 > 0 && rss1 > 0 && labs(rss1 - rss0) * 10 <= rss0,
           "VmRSS within 10 %% (%ld -> %ld kB)", rss0, rss1);
#endif
}

static void test_kill_clients(h_daemon *d, gg_client *w)
{
    h_section("clients SIGKILLed mid-replay: sessions, regions and descriptors back");
    uint64_t sess0 = t_stat(w, "sessions_active");
    int fds0 = fp_count_fds(d->pid);
    for (int round = 0; round < 6; round++) {
        kids ks;
        kids_start(&ks, d->sock, 8, MODE_KILL, 0);
        CHECKF(kids_progress(&ks, 3 + round * 5, 60000), "round %d: every client replaying",
               round);
        for (int i = 0; i < ks.n; i++) {
            kill(ks.pid[i], SIGKILL);
            if (i % 3 == round % 3)
                usleep(300 + 500 * (unsigned)i);   /* land at different points */
        }
        kids_reap(&ks, 30000);
        totals t = kids_sum(&ks);
        CHECK_EQ(t.wrong, 0);
        CHECK_EQ(t.fails, 0);
        CHECKF(t.fast_active == t.fast, "the fast half had its region active (%ld of %ld)",
               t.fast_active, t.fast);
        check_back(d, w, sess0, fds0);
    }
    /* a new client works on both transports */
    kids ks;
    kids_start(&ks, d->sock, 2, MODE_COUNT, 50);
    kids_reap(&ks, 60000);
    totals t = kids_sum(&ks);
    CHECKF(t.ok == 100 && t.wrong == 0, "new clients afterwards: %ld right, %ld wrong", t.ok,
           t.wrong);
}

static void test_restart(h_daemon *d, gg_client **w)
{
    h_section("daemon SIGKILLed and restarted on the same socket: clients reconnect, 0 lost");
    const int n = 8, replays = 1000, kills = 3;
    kids ks;
    kids_start(&ks, d->sock, n, MODE_RESTART, replays);
    gg_client_close(*w);
    *w = NULL;
    int base[MAXK] = {0};
    for (int r = 0; r < kills; r++) {
        /* every client replaying (again, since the last restart) */
        CHECKF(kids_progress_from(&ks, base, 100, 60000), "kill %d: every client replaying", r);
        h_daemon_kill(d);
        int64_t t0 = h_now_ms();
        h_sleep_ms(50);   /* clients meet the closed socket for a while */
        if (!CHECK(h_daemon_spawn(d, d->sock, g_args, NULL) == 0) ||
            !CHECK(h_daemon_wait_ready(d, 60000) == 0)) {
            h_daemon_dump_log(d);
            kids_reap(&ks, 1000);
            return;
        }
        h_note("kill %d: restarted in %lld ms", r, (long long)(h_now_ms() - t0));
        for (int i = 0; i < n; i++)   /* the next kill waits for replays after this */
            base[i] = atomic_load(&g_res[i].progress);
    }
    CHECK(kids_progress_from(&ks, base, 100, 60000));
    atomic_store(g_stop, 1);
    int killed = kids_reap(&ks, 120000);
    totals t = kids_sum(&ks);
    h_note("restart: %ld right, %ld wrong, %ld lost, %ld reconnects", t.ok, t.wrong, t.lost,
           t.reconnects);
    CHECK_EQ(killed, 0);
    CHECKF(t.ok >= (long)n * replays, "every client got its %d replays answered (%ld in all)",
           replays, t.ok);
    CHECK_EQ(t.wrong, 0);
    CHECK_EQ(t.lost, 0);
    CHECK_EQ(t.fails, 0);
    CHECK_EQ(t.hung, 0);
    CHECKF(t.fast_active == t.fast, "the fast half had its region active (%ld of %ld)",
           t.fast_active, t.fast);
    /* A client still setting itself up again after one kill can meet the
     * next one there and reconnect once for both: every client must have
     * reconnected, and none lost or got wrong a replay (above). */
    int all = 0;
    for (int i = 0; i < n; i++)
        all += g_res[i].reconnects >= 1;
    CHECKF(all == n, "every client reconnected after the %d kills (%d of %d)", kills, all, n);
    *w = fp_socket_client(d->sock, "load-watch");
    if (*w)
        CHECK_EQ(fp_wait_stat(*w, "sessions_active", 1, 60000), 1);
}

static void test_term(h_daemon *d, int n)
{
    h_section("SIGTERM under load: every answer right or a clean error, exit 0");
    kids ks;
    kids_start(&ks, d->sock, n, MODE_TERM, 0);
    CHECK(kids_progress(&ks, 20, 60000));
    int64_t t0 = h_now_ms();
    kill(d->pid, SIGTERM);
    int code = h_daemon_wait_exit(d, 60000);
    CHECKF(code == 0, "exit status 0 (%d) after %lld ms", code, (long long)(h_now_ms() - t0));
    int killed = kids_reap(&ks, 60000);
    totals t = kids_sum(&ks);
    h_note("stop under load: %ld right answers, %ld wrong; the daemon gone %lld ms after the "
           "SIGTERM", t.ok, t.wrong, (long long)(h_now_ms() - t0));
    CHECK_EQ(killed, 0);
    CHECK_EQ(t.wrong, 0);
    CHECK_EQ(t.hung, 0);
    int clean = 0, reset = 0, shut = 0;
    for (int i = 0; i < n; i++) {
        int e = g_res[i].first_err;
        reset += e == -ECONNRESET;
        shut += e == -ESHUTDOWN;
        clean += e == -ECONNRESET || e == -ESHUTDOWN;
    }
    h_note("first failures: %d ECONNRESET, %d ESHUTDOWN, %d other", reset, shut, n - clean);
    CHECKF(clean == n, "every client ended with a clean error (%d of %d)", clean, n);
    char *log = h_read_file(d->log);
    CHECK(!strstr(log, "unfinished"));
    if (code != 0)
        h_daemon_dump_log(d);
    free(log);
}

int main(void)
{
    int duration = env_int("GG_LOAD_DURATION_S", 0);
    h_init("test_load_fault", 290 + duration);
    unsetenv("GFXGRAPH_FASTPATH");
    unsetenv("GFXGRAPH_SPIN_US");
    signal(SIGPIPE, SIG_IGN);
    int n = env_int("GG_LOAD_CLIENTS", 32), replays = env_int("GG_LOAD_REPLAYS", 2000),
        warm = env_int("GG_LOAD_WARMUP", 2000);   /* as the main round: its steady state */
    n = n < 2 ? 2 : n > MAXK - 1 ? MAXK - 1 : n;
    g_res = mmap(NULL, sizeof(kid_res) * MAXK, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
    if (!CHECK(g_res != MAP_FAILED))
        return h_finish();
    g_stop = (atomic_int *)&g_res[MAXK - 1].progress;   /* the last entry is never a client's */
    h_daemon d;
    if (h_daemon_start(&d, g_args, NULL) < 0)
        return h_finish();
    int64_t t0 = h_now_ms();
    gg_client *w = fp_socket_client(d.sock, "load-watch");
    if (w) {
        test_load(&d, w, n, replays, warm, duration);
        int64_t t1 = h_now_ms();
        test_kill_clients(&d, w);
        int64_t t2 = h_now_ms();
        test_restart(&d, &w);
        int64_t t3 = h_now_ms();
        gg_client_close(w);
        if (d.pid > 0)
            test_term(&d, n);
        h_note("times: load %lld ms, kill %lld ms, restart %lld ms, term %lld ms",
               (long long)(t1 - t0), (long long)(t2 - t1), (long long)(t3 - t2),
               (long long)(h_now_ms() - t3));
    }
    if (d.pid > 0)
        h_daemon_stop(&d);
    else {
        unlink(d.log);
        unlink(d.sock);
        rmdir(d.dir);
    }
    return h_finish();
}
