/* SPDX-License-Identifier: MIT */
/* One user cannot take the daemon from the others (cpu backend, one worker,
 * fast path off so that every replay goes through the socket):
 *
 * - departed sessions leave nothing: a session's replay that no worker
 *   has taken when its client closes is dropped (stats jobs_dropped), and
 *   a uid's count of jobs (uid_jobs) comes back to what it really runs;
 * - the executor is fair between uids: with another uid's 24 sessions
 *   each waiting with one slow replay, root's replay is answered after at
 *   most two of them (the one running and the one next in turn), not
 *   after the backlog;
 * - max-jobs-per-uid: past it a replay answers EDQUOT naming the setting,
 *   and the uid's other replays are answered as ever;
 * - a define of a few bytes whose calls copy in thousands of nodes runs
 *   off the loop: while a pipeline of them is worked on, another client's
 *   stats is answered and says a define is being checked.
 *
 * Every assertion is on counts and states the daemon reports; the slow
 * replays are sized from a measurement here only so that the states last
 * long enough to be seen, and a run where one did not (a machine too busy)
 * is noted, not failed, where the order could not be controlled. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "test_client_util.h"
#include "test_quota_util.h"

#define SLOW_D 512
#define SLOW_ROWS 16

/* A session with a chain of identity layers: y = x after `layers` linear
 * layers of SLOW_D x SLOW_D (w = I), its buffers its own. */
typedef struct {
    gg_client *c;
    tbuf x, y, w;
    uint64_t prog;
} slow_sess;

static bool slow_open(slow_sess *s, const char *sock, const char *name, int layers)
{
    memset(s, 0, sizeof *s);
    s->c = gg_client_new();
    if (!s->c || gg_client_connect(s->c, sock, name) < 0)
        return false;
    if (!tbuf_new(s->c, &s->x, SLOW_ROWS * SLOW_D) || !tbuf_new(s->c, &s->y, SLOW_ROWS * SLOW_D) ||
        !tbuf_new(s->c, &s->w, SLOW_D * SLOW_D))
        return false;
    for (int i = 0; i < SLOW_ROWS * SLOW_D; i++)
        s->x.f[i] = (float)(i % 13) - 6.0f;
    memset(s->w.f, 0, s->w.size);
    for (int i = 0; i < SLOW_D; i++)
        s->w.f[i * SLOW_D + i] = 1.0f;
    gg_program_def *d = gg_program_def_new("slow");
    int64_t xs[2] = {GG_BATCH, SLOW_D}, ws[2] = {SLOW_D, SLOW_D};
    gg_program_def_buckets(d, 1, (int[]){SLOW_ROWS});
    gg_program_def_tensor(d, "x", s->x.id, 0, "f32", 2, xs);
    gg_program_def_tensor(d, "y", s->y.id, 0, "f32", 2, xs);
    gg_program_def_tensor(d, "w", s->w.id, 0, "f32", 2, ws);
    gg_program_def_scratch(d, "s0", "f32", 2, xs);
    gg_program_def_scratch(d, "s1", "f32", 2, xs);
    static const char *const sc[2] = {"s0", "s1"};
    for (int i = 0; i < layers; i++) {
        char in[16];
        snprintf(in, sizeof in, "%s, w", i == 0 ? "x" : sc[(i - 1) % 2]);
        gg_program_def_op(d, "linear", in, i == layers - 1 ? "y" : sc[i % 2]);
    }
    int rc = gg_client_program_define(s->c, d, &s->prog);
    if (rc < 0)
        printf("   define: %s (%s)\n", gg_client_last_error(s->c), gg_program_def_error(d));
    gg_program_def_free(d);
    return rc == 0;
}

static void slow_close(slow_sess *s)
{
    gg_client_close(s->c);
    s->c = NULL;
    tbuf_free(&s->x);
    tbuf_free(&s->y);
    tbuf_free(&s->w);
}

/* y == x: the layers ran. */
static bool slow_right(const slow_sess *s)
{
    return memcmp(s->x.f, s->y.f, s->x.size) == 0;
}

/* Layers for a replay of about target_s here: from the fastest of three
 * replays of 8 layers (load only slows). */
static int slow_layers(const char *sock, double target_s)
{
    slow_sess s;
    int n = 8;
    double us = 1e12;
    if (slow_open(&s, sock, "calibrate", n)) {
        gg_replay_result r;
        for (int i = 0; i < 3; i++)
            if (gg_client_replay(s.c, s.prog, SLOW_ROWS, -1, &r) == 0 && r.device_us < us)
                us = r.device_us;
    }
    slow_close(&s);
    double per = us / n > 1 ? us / n : 1;
    n = (int)(target_s * 1e6 / per);
    n = n < 8 ? 8 : n > 4000 ? 4000 : n;
    h_note("one %dx%d layer at %d rows: %.0f us; %d layers for %.2f s", SLOW_D, SLOW_D,
           SLOW_ROWS, per, n, target_s);
    return n;
}

static uint64_t stat_of(gg_client *c, const char *key)
{
    return t_stat(c, key);
}

/* ---- departed sessions --------------------------------------------------- */

static void test_departed(const char *const *args)
{
    h_section("a departed session's replay that no worker took is dropped");
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    int layers = slow_layers(d.sock, 1.5);
    gg_client *w = t_connect(&d, "watch");
    slow_sess h;
    uint64_t th = 0;
    const int churn = 10;
    if (w && CHECK(slow_open(&h, d.sock, "holder", layers)) &&
        CHECK(gg_client_submit(h.c, h.prog, SLOW_ROWS, -1, NULL, &th) == 0)) {
        /* the holder's replay holds the one worker: each churner's waits */
        for (int i = 0; i < churn; i++) {
            slow_sess s;
            uint64_t t;
            if (CHECK(slow_open(&s, d.sock, "churn", 8)) &&
                CHECK(gg_client_submit(s.c, s.prog, SLOW_ROWS, -1, NULL, &t) == 0))
                /* the daemon takes a connection's requests in order: the
                 * replay is in the executor once this is answered */
                CHECK(t_stats(s.c) != NULL);
            slow_close(&s);
        }
        /* every churner's connection gone */
        for (int k = 0; k < 6000 && stat_of(w, "sessions_active") != 2; k++)
            h_sleep_ms(10);
        bool holder_busy = gg_client_poll(h.c, th) == 0;
        uint64_t dropped = stat_of(w, "jobs_dropped");
        if (holder_busy) {
            CHECKF(dropped == (uint64_t)churn, "all %d churners' replays dropped (%llu)", churn,
                   (unsigned long long)dropped);
            CHECK_EQ(stat_of(w, "uid_jobs"), 1);   /* the holder's alone */
        } else {
            h_note("the holder's replay ended before the churners left (a busy machine): "
                   "%llu of %d dropped", (unsigned long long)dropped, churn);
            CHECK(dropped <= (uint64_t)churn);
        }
        gg_replay_result r;
        CHECK(gg_client_wait(h.c, th, &r) == 0);
        CHECK(slow_right(&h));
        for (int k = 0; k < 6000 && stat_of(w, "uid_jobs") != 0; k++)
            h_sleep_ms(10);
        CHECK_EQ(stat_of(w, "uid_jobs"), 0);
    }
    slow_close(&h);
    gg_client_close(w);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* ---- fairness between uids ----------------------------------------------- */

#define ATK_SESSIONS 24

typedef struct {
    const char *sock;
    int layers;
    atomic_int ready;       /* every attacker replay is in the daemon */
    atomic_int done;        /* attacker replays answered */
    atomic_int wrong;
    atomic_int failed;
} fair_shared;

static void attacker(void *arg)
{
    fair_shared *f = arg;
    static slow_sess s[ATK_SESSIONS];
    uint64_t t[ATK_SESSIONS];
    int n = 0;
    for (; n < ATK_SESSIONS; n++)
        if (!CHECK(slow_open(&s[n], f->sock, "attacker", f->layers)))
            break;
    /* each in the executor once its session's next request is answered
     * (the daemon takes a connection's requests in order) */
    for (int i = 0; i < n; i++)
        if (CHECK(gg_client_submit(s[i].c, s[i].prog, SLOW_ROWS, -1, NULL, &t[i]) == 0))
            CHECK(t_stats(s[i].c) != NULL);
    atomic_store(&f->ready, 1);
    for (int i = 0; i < n; i++) {
        gg_replay_result r;
        if (gg_client_wait(s[i].c, t[i], &r) != 0)
            atomic_fetch_add(&f->failed, 1);
        else if (!slow_right(&s[i]))
            atomic_fetch_add(&f->wrong, 1);
        atomic_fetch_add(&f->done, 1);
    }
    for (int i = 0; i < n; i++)
        slow_close(&s[i]);
}

/* Root's side, on a thread while the attacker runs as another uid: once
 * every attacker replay is in the daemon, one replay of root's, and how
 * many attacker replays were answered before and after it. */
typedef struct {
    fair_shared *f;
    slow_sess *me;
    int before, after, rc;
    bool ready, right;
} fair_root;

static void *fair_root_side(void *arg)
{
    fair_root *fr = arg;
    for (int k = 0; k < 12000 && !atomic_load(&fr->f->ready); k++)
        h_sleep_ms(10);
    fr->ready = atomic_load(&fr->f->ready);
    if (!fr->ready)
        return NULL;
    fr->before = atomic_load(&fr->f->done);
    gg_replay_result r;
    fr->rc = gg_client_replay(fr->me->c, fr->me->prog, SLOW_ROWS, -1, &r);
    fr->after = atomic_load(&fr->f->done);
    fr->right = slow_right(fr->me);
    return NULL;
}

static void test_fair(const char *const *args)
{
    h_section("uids served in turn: another uid's backlog of sessions does not hold root up");
    if (getuid() != 0) {
        h_note("not root: no other uid to attack from; skipped");
        return;
    }
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    q_open_socket(&d);
    fair_shared *f = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
    if (!CHECK(f != MAP_FAILED)) {
        h_daemon_stop(&d);
        return;
    }
    memset(f, 0, sizeof *f);
    f->sock = d.sock;
    f->layers = slow_layers(d.sock, 0.08);
    /* root's own program, defined before the attack; a fresh one, so its
     * replay goes to the worker (not launched by the loop as a known hit) */
    slow_sess me;
    fair_root fr = {.f = f, .me = &me};
    pthread_t th;
    if (CHECK(slow_open(&me, d.sock, "root", 8)) &&
        CHECK(pthread_create(&th, NULL, fair_root_side, &fr) == 0)) {
        static const char *const need[] = {NULL};
        h_as_user("attacker (as another uid)", attacker, f, need);
        atomic_store(&f->ready, 1);   /* the attacker could not run: let root go */
        pthread_join(th, NULL);
        CHECK(fr.ready);
        CHECKF(fr.rc == 0 && fr.right, "root's replay answered and right (%d)", fr.rc);
        h_note("attacker replays answered: %d when root's was sent, %d when it came back "
               "(of %d)", fr.before, fr.after, ATK_SESSIONS);
        if (fr.before + 4 >= ATK_SESSIONS)
            h_note("the attacker's replays were nearly all done before root's was sent (a busy "
                   "machine): nothing to compare");
        else
            CHECKF(fr.after - fr.before <= 4, "root waited for at most a few of the other uid's "
                   "replays, not its backlog (%d)", fr.after - fr.before);
        CHECK_EQ(atomic_load(&f->failed), 0);
        CHECK_EQ(atomic_load(&f->wrong), 0);
        CHECK_EQ(atomic_load(&f->done), ATK_SESSIONS);
    }
    slow_close(&me);
    munmap(f, sizeof *f);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* ---- max-jobs-per-uid ----------------------------------------------------- */

static void test_quota(void)
{
    h_section("max-jobs-per-uid: the fourth replay in the executor answers EDQUOT");
    const char *args[] = {"--set", "workers=1", "--set", "fastpath=off", "--set",
                          "max-jobs-per-uid=3", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    int layers = slow_layers(d.sock, 0.5);
    slow_sess s;
    if (CHECK(slow_open(&s, d.sock, "quota", layers))) {
        uint64_t t[4];
        for (int i = 0; i < 4; i++)
            CHECK(gg_client_submit(s.c, s.prog, SLOW_ROWS, -1, NULL, &t[i]) == 0);
        gg_replay_result r;
        for (int i = 0; i < 3; i++)
            CHECK(gg_client_wait(s.c, t[i], &r) == 0);
        int rc = gg_client_wait(s.c, t[3], &r);
        CHECKF(rc == -EDQUOT, "the fourth: EDQUOT (got %d)", rc);
        CHECK_STR(gg_client_last_error_code(s.c), "EDQUOT");
        CHECK_CONTAINS(gg_client_last_error(s.c), "max-jobs-per-uid");
        /* room again once they have ended */
        CHECK(gg_client_replay(s.c, s.prog, SLOW_ROWS, -1, &r) == 0);
        CHECK(slow_right(&s));
    }
    slow_close(&s);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* ---- call-expanding defines ------------------------------------------------ */

#define BIG_T 1000
#define BIG_N 2000

static void pstr(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* The callee, on raw connection c over buffer bid: BIG_T tensors and
 * BIG_N silu nodes; its id, or 0. */
static uint64_t big_define(h_conn *c, uint64_t bid)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 4);
    pstr(&p.pk, "name");
    pstr(&p.pk, "big");
    pstr(&p.pk, "buckets");
    msgpack_pack_array(&p.pk, 1);
    msgpack_pack_int(&p.pk, 1);
    pstr(&p.pk, "tensors");
    msgpack_pack_map(&p.pk, BIG_T);
    for (int i = 0; i < BIG_T; i++) {
        char n[16];
        snprintf(n, sizeof n, "t%d", i);
        pstr(&p.pk, n);
        msgpack_pack_map(&p.pk, 4);
        proto_pack_kv_u64(&p.pk, "buffer", bid);
        proto_pack_kv_u64(&p.pk, "offset", (uint64_t)i * 16);
        proto_pack_kv_str(&p.pk, "dtype", "f32");
        pstr(&p.pk, "shape");
        msgpack_pack_array(&p.pk, 2);
        pstr(&p.pk, "batch");
        msgpack_pack_int(&p.pk, 4);
    }
    pstr(&p.pk, "nodes");
    msgpack_pack_array(&p.pk, BIG_N);
    for (int i = 0; i < BIG_N; i++) {
        char in[16], out[16];
        snprintf(in, sizeof in, "t%d", i % (BIG_T - 1));
        snprintf(out, sizeof out, "t%d", i % (BIG_T - 1) + 1);
        msgpack_pack_map(&p.pk, 3);
        proto_pack_kv_str(&p.pk, "op", "silu");
        pstr(&p.pk, "inputs");
        msgpack_pack_array(&p.pk, 1);
        pstr(&p.pk, in);
        pstr(&p.pk, "outputs");
        msgpack_pack_array(&p.pk, 1);
        pstr(&p.pk, out);
    }
    const msgpack_object *r = NULL;
    uint64_t id = call_ok(c, q_id++, "program.define", &p, &r) ? h_getu(r, "id") : 0;
    mp_free(&p);
    return id == UINT64_MAX ? 0 : id;
}

static void test_costly_defines(void)
{
    h_section("small defines that copy in thousands of nodes run off the loop");
    const char *args[] = {"--set", "fastpath=off", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    char shm[64], code[32], msg[512];
    const int K = 40;
    h_conn a, w;
    uint64_t bid = 0, big = 0;
    if (CHECK(q_shm(shm, sizeof shm, BIG_T * 16)) && CHECK(h_conn_open(&a, d.sock) == 0)) {
        if (CHECK(hello(&a, q_id++)))
            bid = q_register(&a, shm, 0, BIG_T * 16, code, sizeof code, msg, sizeof msg);
        shm_unlink(shm);   /* mapped by now */
        CHECKF(bid, "buffer.register: %s %s", code, msg);
        big = bid ? big_define(&a, bid) : 0;
        CHECK(big != 0);
    }
    if (big) {
        /* K defines in one write, each two branches calling the callee
         * (and one tensor of its own) */
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        for (int i = 0; i < K; i++) {
            msgpack_pack_array(&pk, 4);
            msgpack_pack_int(&pk, 0);
            msgpack_pack_uint32(&pk, 1000 + (uint32_t)i);
            pstr(&pk, "program.define");
            msgpack_pack_array(&pk, 1);
            msgpack_pack_map(&pk, 4);
            pstr(&pk, "name");
            pstr(&pk, "expands");
            pstr(&pk, "buckets");
            msgpack_pack_array(&pk, 1);
            msgpack_pack_int(&pk, 1);
            pstr(&pk, "tensors");
            msgpack_pack_map(&pk, 1);
            pstr(&pk, "own");
            msgpack_pack_map(&pk, 4);
            proto_pack_kv_u64(&pk, "buffer", bid);
            proto_pack_kv_u64(&pk, "offset", 0);
            proto_pack_kv_str(&pk, "dtype", "f32");
            pstr(&pk, "shape");
            msgpack_pack_array(&pk, 2);
            pstr(&pk, "batch");
            msgpack_pack_int(&pk, 4);
            pstr(&pk, "branches");
            msgpack_pack_array(&pk, 2);
            for (int br = 0; br < 2; br++) {
                msgpack_pack_array(&pk, 1);
                msgpack_pack_map(&pk, 2);
                pstr(&pk, "op");
                pstr(&pk, "call");
                pstr(&pk, "program");
                msgpack_pack_uint64(&pk, big);
            }
        }
        h_note("%d defines of %zu bytes each, each holding %d tensors and %d nodes", K,
               sb.size / (size_t)K, 2 * BIG_T + 1, 2 * BIG_N);
        CHECK(h_conn_send_sb(&a, &sb) == 0);
        msgpack_sbuffer_destroy(&sb);
        CHECK(t_sent_read(&a));
        /* another client, meanwhile: answered while a define is worked on
         * (a loop doing the defines itself answers it only after them) */
        bool seen = false;
        int ok = 0, answered = 0;
        if (CHECK(h_conn_open(&w, d.sock) == 0)) {
            for (uint32_t id = 1; !seen && answered < K; id++) {
                const msgpack_object *r, *err;
                if (h_conn_call(&w, id, "stats", NULL, 0, &r, &err) != 1 || err)
                    break;
                seen = h_getu(r, "defines_checking") == 1;
                const msgpack_object *m;
                while (answered < K && h_conn_recv(&a, 1, &m) == 1) {
                    if (answered++ == 0 && m->type == MSGPACK_OBJECT_ARRAY &&
                        m->via.array.size == 4 && m->via.array.ptr[2].type != MSGPACK_OBJECT_NIL) {
                        h_err_code(&m->via.array.ptr[2], code, sizeof code);
                        h_gets(&m->via.array.ptr[2], "message", msg, sizeof msg);
                        h_note("define refused: %s %s", code, msg);
                    }
                    ok += m->type == MSGPACK_OBJECT_ARRAY && m->via.array.size == 4 &&
                          m->via.array.ptr[2].type == MSGPACK_OBJECT_NIL;
                }
            }
            h_conn_close(&w);
        }
        CHECKF(seen, "another client's stats said a define was being checked off the loop "
               "(%d of %d defines answered by then)", answered, K);
        for (; answered < K; answered++) {
            const msgpack_object *m;
            if (h_conn_recv(&a, T_RECV_MS, &m) != 1)
                break;
            ok += m->type == MSGPACK_OBJECT_ARRAY && m->via.array.size == 4 &&
                  m->via.array.ptr[2].type == MSGPACK_OBJECT_NIL;
        }
        CHECKF(ok == K, "every define answered without error (%d of %d)", ok, K);
    }
    if (bid)
        h_conn_close(&a);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* ---- a mixed load beside an attacker ------------------------------------- */

#define MIX_VICTIMS 4
#define MIX_D 64

typedef struct {
    atomic_int attacking;      /* the attacker's first session is up */
    atomic_int stop;           /* the victims are done */
    atomic_int cycles, expands;
    const char *sock;
    int layers;
} mix_shared;

/* Another uid: sessions that define a slow program and a call-expanding
 * one, submit two slow replays and close without waiting, until told to
 * stop. */
static void mix_attacker(void *arg)
{
    mix_shared *m = arg;
    while (!atomic_load(&m->stop)) {
        slow_sess s;
        if (!slow_open(&s, m->sock, "churn", m->layers)) {
            slow_close(&s);
            break;
        }
        atomic_store(&m->attacking, 1);
        uint64_t t;
        gg_client_submit(s.c, s.prog, SLOW_ROWS, -1, NULL, &t);
        gg_client_submit(s.c, s.prog, SLOW_ROWS, -1, NULL, &t);
        /* a define of a few bytes that copies the slow program in 16 times */
        gg_program_def *d = gg_program_def_new("expands");
        int64_t xs[2] = {GG_BATCH, SLOW_D};
        gg_program_def_buckets(d, 1, (int[]){SLOW_ROWS});
        gg_program_def_tensor(d, "own", s.x.id, 0, "f32", 2, xs);
        for (int b = 0; b < 16; b++) {
            if (b)
                gg_program_def_branch(d);
            gg_program_def_call(d, s.prog, 0);
        }
        uint64_t id;
        if (gg_client_program_define(s.c, d, &id) == 0)
            atomic_fetch_add(&m->expands, 1);
        gg_program_def_free(d);
        slow_close(&s);   /* its replays left behind */
        atomic_fetch_add(&m->cycles, 1);
    }
}

typedef struct {
    gg_client *c;
    tbuf x, y;
    uint64_t prog;
    int replays, wrong, failed;
    double *us;                /* round trips, replays of them */
    unsigned seed;
} mix_victim;

static void *mix_victim_run(void *arg)
{
    mix_victim *v = arg;
    for (int i = 0; i < v->replays; i++) {
        float k = (float)((v->seed + (unsigned)i) % 17) - 8.0f;
        for (int j = 0; j < 4 * MIX_D; j++)
            v->x.f[j] = k + (float)j / 64.0f;
        struct timespec a, z;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int rc = gg_client_replay(v->c, v->prog, 4, -1, NULL);
        clock_gettime(CLOCK_MONOTONIC, &z);
        v->us[i] = (double)(z.tv_sec - a.tv_sec) * 1e6 + (double)(z.tv_nsec - a.tv_nsec) / 1e3;
        if (rc != 0) {
            v->failed++;
            continue;
        }
        for (int j = 0; j < 4 * MIX_D; j++) {
            float xv = v->x.f[j], want = xv / (1.0f + expf(-xv));
            if (fabsf(v->y.f[j] - want) > 1e-4f * (1.0f + fabsf(want))) {
                v->wrong++;
                break;
            }
        }
    }
    return NULL;
}

static int mix_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Every victim's replays, once; their round trips pooled into all. */
static void mix_round(mix_victim *v, int replays, double *all, int *nall)
{
    pthread_t th[MIX_VICTIMS];
    for (int i = 0; i < MIX_VICTIMS; i++) {
        v[i].replays = replays;
        v[i].wrong = v[i].failed = 0;
        pthread_create(&th[i], NULL, mix_victim_run, &v[i]);
    }
    *nall = 0;
    for (int i = 0; i < MIX_VICTIMS; i++) {
        pthread_join(th[i], NULL);
        memcpy(all + *nall, v[i].us, sizeof(double) * (size_t)replays);
        *nall += replays;
    }
    qsort(all, (size_t)*nall, sizeof(double), mix_cmp);
}

static void mix_note(const char *what, const double *all, int n)
{
    h_note("latency %s: p50 %.0f us, p99 %.0f us, max %.0f us (%d replays)", what,
           all[n / 2], all[(n * 99) / 100], all[n - 1], n);
}

typedef struct {
    mix_shared *m;
} mix_attack_arg;

static void *mix_attack_thread(void *arg)
{
    static const char *const need[] = {NULL};
    h_as_user("mixed-load attacker (as another uid)", mix_attacker, arg, need);
    return NULL;
}

static void test_mixed(void)
{
    h_section("mixed load beside an attacker of another uid: 0 lost, 0 wrong");
    if (getuid() != 0) {
        h_note("not root: no other uid to attack from; skipped");
        return;
    }
    const char *args[] = {"--set", "max-connections-per-uid=300", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    q_open_socket(&d);
    const char *e = getenv("GG_ATTACK_REPLAYS");
    int replays = e && atoi(e) > 0 ? atoi(e) : 200;
    mix_shared *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         -1, 0);
    if (!CHECK(m != MAP_FAILED)) {
        h_daemon_stop(&d);
        return;
    }
    memset(m, 0, sizeof *m);
    m->sock = d.sock;
    m->layers = slow_layers(d.sock, 0.02);
    mix_victim v[MIX_VICTIMS];
    memset(v, 0, sizeof v);
    double *all = calloc((size_t)MIX_VICTIMS * (size_t)replays, sizeof(double));
    bool ok = all != NULL;
    /* half the victims on the socket, half on the fast path */
    for (int i = 0; ok && i < MIX_VICTIMS; i++) {
        if (i % 2 == 0)
            setenv("GFXGRAPH_FASTPATH", "0", 1);
        else
            unsetenv("GFXGRAPH_FASTPATH");
        v[i].c = gg_client_new();
        v[i].seed = (unsigned)i * 5;
        v[i].us = calloc((size_t)replays, sizeof(double));
        ok = CHECK(v[i].c && gg_client_connect(v[i].c, d.sock, "victim") == 0) && v[i].us &&
             tbuf_new(v[i].c, &v[i].x, 4 * MIX_D) && tbuf_new(v[i].c, &v[i].y, 4 * MIX_D);
        if (!ok)
            break;
        gg_program_def *p = gg_program_def_new("victim");
        int64_t sh[2] = {GG_BATCH, MIX_D};
        gg_program_def_buckets(p, 1, (int[]){4});
        gg_program_def_tensor(p, "x", v[i].x.id, 0, "f32", 2, sh);
        gg_program_def_tensor(p, "y", v[i].y.id, 0, "f32", 2, sh);
        gg_program_def_op(p, "silu", "x", "y");
        ok = CHECK(gg_client_program_define(v[i].c, p, &v[i].prog) == 0);
        gg_program_def_free(p);
    }
    unsetenv("GFXGRAPH_FASTPATH");
    int n = 0;
    if (ok) {
        mix_round(v, replays, all, &n);
        mix_note("alone", all, n);
        pthread_t at;
        if (CHECK(pthread_create(&at, NULL, mix_attack_thread, m) == 0)) {
            for (int k = 0; k < 6000 && !atomic_load(&m->attacking); k++)
                h_sleep_ms(10);
            CHECK(atomic_load(&m->attacking));
            mix_round(v, replays, all, &n);
            atomic_store(&m->stop, 1);
            pthread_join(at, NULL);
            mix_note("beside the attacker", all, n);
            h_note("attacker: %d sessions closed with 2 slow replays each left behind, %d "
                   "defines copying a program in 16 times", atomic_load(&m->cycles),
                   atomic_load(&m->expands));
            int wrong = 0, failed = 0;
            for (int i = 0; i < MIX_VICTIMS; i++) {
                wrong += v[i].wrong;
                failed += v[i].failed;
            }
            CHECKF(failed == 0 && wrong == 0, "the victims' %d replays: %d failed, %d wrong", n,
                   failed, wrong);
            CHECKF(atomic_load(&m->cycles) > 0, "the attacker ran (%d cycles)",
                   atomic_load(&m->cycles));
        }
    }
    for (int i = 0; i < MIX_VICTIMS; i++) {
        gg_client_close(v[i].c);
        tbuf_free(&v[i].x);
        tbuf_free(&v[i].y);
        free(v[i].us);
    }
    free(all);
    munmap(m, sizeof *m);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* argv: the parts to run (departed, fair, quota, defines); none: all */
static bool want(int argc, char **argv, const char *part)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], part) == 0)
            return true;
    return argc < 2;
}

int main(int argc, char **argv)
{
    h_init("test_attack_fair", 580);
    const char *args[] = {"--set", "workers=1", "--set", "fastpath=off", NULL};
    if (want(argc, argv, "departed"))
        test_departed(args);
    if (want(argc, argv, "fair"))
        test_fair(args);
    if (want(argc, argv, "quota"))
        test_quota();
    if (want(argc, argv, "defines"))
        test_costly_defines();
    if (want(argc, argv, "mixed"))
        test_mixed();
    return h_finish();
}
