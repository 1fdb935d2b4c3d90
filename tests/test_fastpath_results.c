/* SPDX-License-Identifier: MIT */
/* Fast-path replays (PROTOCOL.md section 15) give what the socket gives.
 *
 * results: on a daemon without faults and on daemons with GFXGRAPH_FAULT=
 * launch and =capture (eager fallback), a fast-path client and a socket-only
 * client (GFXGRAPH_FASTPATH=0) each define the same two-branch program and
 * run the same sequence of (batch, branch): every bucket, captures and
 * hits, both branches, batches above the largest bucket (eager, bucket 0),
 * and two errors (ERANGE, EINVAL).  The outputs are checked against a CPU
 * reference computed here (and rows past the bucket against a sentinel),
 * and the result fields (path, bucket, batch, branch, captured, fallback,
 * reason; the error code and message) must be identical on both paths.
 * gg_client_fastpath_status says active / off; stats counts the fast-path
 * replays (fastpath_replays), one region, and sessions[].fastpath says which
 * session has one.  Then submit/wait/poll on the ring: 8 outstanding waited
 * in reverse order, the ring's limit (-EBUSY past 64), -ENOENT for a ticket
 * already waited for.
 *
 * ordering: two programs on one buffer whose effects do not commute
 * (x = x + 1, x = 2x) alternated over fast-path replays, socket replays of
 * the same session (gg_client_call "replay") and pipelined fast-path
 * submissions: the buffer ends equal to the sequential result.  Then
 * program.rebind between fast-path replays: the next one reads the new
 * buffer (and captures again), on either path.
 *
 * memory fault: with GFXGRAPH_FAULT=memory a captured graph's launch reports
 * a fault in the client's memory after its kernels ran.  Every replay of
 * x = x + 1 (in place) fails with EFAULT naming the fault, fast path (the
 * first through the executor, which captures; the rest cache hits on the
 * region's thread) and socket alike, and x grows by exactly one per replay:
 * a failing hit is answered as it failed, never run again elsewhere (a hit
 * handed to the executor after its launch would add two).  Nothing is
 * counted as a graph or eager replay, each failure once as an error; the
 * daemon stays up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_fastpath_util.h"

#define D 16
#define ROWS 16            /* rows the buffers hold: max_batch 16 */
#define SENTINEL 777.0f

/* ---- the two-branch program ------------------------------------------------ */

typedef struct {
    gg_client *c;
    tbuf x, y;
    uint64_t prog;
} side;

/* branch 0: y = 2 silu(x) + x (two scratch tensors); branch 1: y = -0.5 x.
 * buckets 1, 2, 4, 8. */
static bool side_setup(side *s, const char *name)
{
    if (!tbuf_new(s->c, &s->x, ROWS * D) || !tbuf_new(s->c, &s->y, ROWS * D))
        return false;
    gg_program_def *p = gg_program_def_new(name);
    int64_t sh[2] = {GG_BATCH, D};
    static const int b[] = {1, 2, 4, 8};
    gg_program_def_buckets(p, 4, b);
    gg_program_def_tensor(p, "x", s->x.id, 0, "f32", 2, sh);
    gg_program_def_tensor(p, "y", s->y.id, 0, "f32", 2, sh);
    gg_program_def_scratch(p, "a", "f32", 2, sh);
    gg_program_def_scratch(p, "b", "f32", 2, sh);
    gg_program_def_op(p, "silu", "x", "a");
    gg_program_def_op(p, "scale", "a", "b");
    gg_program_def_attr_f(p, "scale", 2.0);
    gg_program_def_op(p, "add", "b, x", "y");
    gg_program_def_branch(p);
    gg_program_def_op(p, "scale", "x", "y");
    gg_program_def_attr_f(p, "scale", -0.5);
    int rc = gg_client_program_define(s->c, p, &s->prog);
    gg_program_def_free(p);
    return CHECKF(rc == 0, "define %s: %s", name, gg_client_last_error(s->c));
}

static void side_free(side *s)
{
    tbuf_free(&s->x);
    tbuf_free(&s->y);
    gg_client_close(s->c);
    s->c = NULL;
}

static double ref(int branch, double v)
{
    return branch == 0 ? t_silu2x_ref(v) : -0.5 * v;
}

static void fill_inputs(side *s, int k)
{
    for (int i = 0; i < ROWS * D; i++)
        s->x.f[i] = (float)((i * 13 + k * 7) % 17) * 0.25f - 2.0f;
    tbuf_fill(&s->y, SENTINEL);
}

/* Rows < batch right, rows past what ran untouched; the count of wrong
 * values. */
static int wrong_values(const side *s, int batch, int branch, int bucket)
{
    int bad = 0;
    int ran = bucket ? bucket : batch;
    for (int i = 0; i < batch * D; i++)
        bad += !t_close(s->y.f[i], ref(branch, s->x.f[i]), 1e-5);
    for (int i = ran * D; i < ROWS * D; i++)
        bad += s->y.f[i] != SENTINEL;
    return bad;
}

static int bucket_of(int batch)
{
    static const int b[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++)
        if (batch <= b[i])
            return b[i];
    return 0;
}

/* msg with "program <from>" written as "program <to>", into out. */
static void subst_id(char *out, size_t len, const char *msg, uint64_t from, uint64_t to)
{
    char pat[40], rep[40];
    snprintf(pat, sizeof pat, "program %llu", (unsigned long long)from);
    snprintf(rep, sizeof rep, "program %llu", (unsigned long long)to);
    size_t o = 0;
    for (const char *p = msg; *p && o + 1 < len;) {
        if (strncmp(p, pat, strlen(pat)) == 0 && !(p[strlen(pat)] >= '0' && p[strlen(pat)] <= '9')) {
            o += (size_t)snprintf(out + o, len - o, "%s", rep);
            p += strlen(pat);
        } else {
            out[o++] = *p++;
        }
    }
    out[o < len ? o : len - 1] = '\0';
}

typedef struct {
    int batch, branch;
    const char *err;       /* expected error code, NULL: success */
} step;

static const step steps[] = {
    {1, 0, NULL},  {1, 0, NULL},  {2, 0, NULL},      {3, 0, NULL},  {4, 0, NULL},
    {4, 0, NULL},  {5, 0, NULL},  {8, 0, NULL},      {8, 0, NULL},  {1, 1, NULL},
    {1, 1, NULL},  {6, 1, NULL},  {6, 1, NULL},      {11, 0, NULL}, {16, 1, NULL},
    {3, 1, NULL},  {3, 1, NULL},  {17, 0, "ERANGE"}, {2, 2, "EINVAL"}, {2, 0, NULL},
    {12, 1, NULL}, {7, 0, NULL},
};
#define NSTEPS ((int)(sizeof steps / sizeof steps[0]))

/* ---- results on one daemon -------------------------------------------------- */

static void run_results(const char *fault)
{
    char title[128];
    snprintf(title, sizeof title, "fast path vs socket, %s%s", fault ? "GFXGRAPH_FAULT=" : "no faults",
             fault ? fault : "");
    h_section(title);
    char envf[64];
    snprintf(envf, sizeof envf, "GFXGRAPH_FAULT=%s", fault ? fault : "");
    const char *env[] = {fault ? envf : NULL, NULL};
    h_daemon d;
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    side f = {0}, s = {0};
    f.c = fp_client(d.sock, "fp-fast");
    s.c = fp_socket_client(d.sock, "fp-socket");
    if (!f.c || !s.c || !side_setup(&f, "twobranch") || !side_setup(&s, "twobranch"))
        goto out;
    CHECK_STR(gg_client_fastpath_status(f.c), "not yet opened");
    CHECK_CONTAINS(gg_client_fastpath_status(s.c), "off");

    int nf_ok = 0, ns_ok = 0, diffs = 0, wrong_f = 0, wrong_s = 0;
    for (int k = 0; k < NSTEPS; k++) {
        const step *st = &steps[k];
        gg_replay_result rf, rs;
        memset(&rf, 0x5a, sizeof rf);
        memset(&rs, 0x5a, sizeof rs);
        fill_inputs(&f, k);
        int rcf = gg_client_replay(f.c, f.prog, st->batch, st->branch, &rf);
        char codef[32], msgf[256];
        snprintf(codef, sizeof codef, "%s", gg_client_last_error_code(f.c));
        snprintf(msgf, sizeof msgf, "%s", gg_client_last_error(f.c));
        fill_inputs(&s, k);
        int rcs = gg_client_replay(s.c, s.prog, st->batch, st->branch, &rs);
        const char *codes = gg_client_last_error_code(s.c), *msgs = gg_client_last_error(s.c);
        if (k == 0)
            CHECK_CONTAINS(gg_client_fastpath_status(f.c), "active");
        if (st->err) {
            CHECKF(rcf < 0 && strcmp(codef, st->err) == 0, "step %d (batch %d, branch %d): fast "
                   "path fails with %s (rc %d, %s: %s)", k, st->batch, st->branch, st->err, rcf,
                   codef, msgf);
            CHECKF(rcs < 0 && strcmp(codes, st->err) == 0, "step %d: socket fails with %s (rc %d,"
                   " %s: %s)", k, st->err, rcs, codes, msgs);
            CHECKF(rcf == rcs, "step %d: same errno on both paths (%d vs %d)", k, rcf, rcs);
            /* the messages name each session's own program id */
            char want[300];
            subst_id(want, sizeof want, msgs, s.prog, f.prog);
            CHECKF(strcmp(msgf, want) == 0, "step %d: same error message on both paths (fast "
                   "\"%s\", socket \"%s\")", k, msgf, msgs);
            continue;
        }
        if (!CHECKF(rcf == 0, "step %d (batch %d, branch %d): fast-path replay: %s", k, st->batch,
                    st->branch, msgf) ||
            !CHECKF(rcs == 0, "step %d: socket replay: %s", k, msgs))
            continue;
        nf_ok++;
        ns_ok++;
        int bucket = bucket_of(st->batch);
        int wf = wrong_values(&f, st->batch, st->branch, bucket);
        int ws = wrong_values(&s, st->batch, st->branch, bucket);
        wrong_f += wf;
        wrong_s += ws;
        CHECKF(wf == 0, "step %d (batch %d, branch %d): fast-path output right (%d wrong)", k,
               st->batch, st->branch, wf);
        CHECKF(ws == 0, "step %d: socket output right (%d wrong)", k, ws);
        bool same = rf.path == rs.path && rf.bucket == rs.bucket && rf.batch == rs.batch &&
                    rf.branch == rs.branch && rf.captured == rs.captured &&
                    rf.fallback == rs.fallback && strcmp(rf.reason, rs.reason) == 0;
        diffs += !same;
        CHECKF(same, "step %d (batch %d, branch %d): the same result on both paths: fast {path "
               "%d, bucket %d, batch %d, branch %d, captured %d, fallback %d, reason \"%s\"} "
               "socket {%d, %d, %d, %d, %d, %d, \"%s\"}", k, st->batch, st->branch, (int)rf.path,
               rf.bucket, rf.batch, rf.branch, rf.captured, rf.fallback, rf.reason, (int)rs.path,
               rs.bucket, rs.batch, rs.branch, rs.captured, rs.fallback, rs.reason);
        CHECK_EQ(rf.bucket, bucket);
        CHECK_EQ(rf.batch, st->batch);
        CHECK_EQ(rf.branch, st->branch);
        if (bucket == 0) {
            CHECKF(rf.path == GG_PATH_EAGER && !rf.fallback && !rf.captured,
                   "step %d: above the largest bucket: eager, no fallback", k);
            CHECK_STR(rf.reason, "batch is above the largest bucket");
        } else if (fault) {
            CHECKF(rf.path == GG_PATH_EAGER && rf.fallback, "step %d: eager fallback", k);
            CHECK_CONTAINS(rf.reason, "GFXGRAPH_FAULT");
        } else {
            /* the first use of an entry captures; the later ones are hits */
            bool first = true;
            for (int j = 0; j < k; j++)
                first &= !(steps[j].err == NULL && steps[j].branch == st->branch &&
                           bucket_of(steps[j].batch) == bucket);
            CHECKF(rf.path == GG_PATH_GRAPH && !rf.fallback && rf.captured == first,
                   "step %d (bucket %d, branch %d): graph, captured %d (want %d)", k, bucket,
                   st->branch, rf.captured, first);
            CHECK_STR(rf.reason, "");
        }
    }
    h_note("%d steps: %d fast-path and %d socket replays; %d result differences, %d / %d wrong "
           "values", NSTEPS, nf_ok, ns_ok, diffs, wrong_f, wrong_s);
    CHECK_CONTAINS(gg_client_fastpath_status(f.c), "active");
    /* fastpath-completion = device (ctest's *_device run): hits complete
     * the way a GPU's do */
    const char *dm = getenv("GG_TEST_DAEMON_ENV");
    CHECK_CONTAINS(gg_client_fastpath_status(f.c), dm && strstr(dm, "COMPLETION=device")
                                                       ? "gpu completion" : "cpu completion");
    CHECK_CONTAINS(gg_client_fastpath_status(s.c), "off");

    /* the counters of the last hit may land just after its completion */
    fp_wait_session(s.c, gg_client_session_id(f.c), "replays", (uint64_t)nf_ok, 60000);
    const msgpack_object *st = t_stats(s.c);
    if (st) {
        CHECK_EQ(h_getu(st, "fastpath_replays"), nf_ok);
        CHECK_EQ(h_getu(st, "fastpath_regions"), 1);
        CHECK_EQ(fp_session_fastpath(st, gg_client_session_id(f.c)), 1);
        CHECK_EQ(fp_session_fastpath(st, gg_client_session_id(s.c)), 0);
        CHECK_EQ(h_getu(st, "replay_count") + h_getu(st, "eager_count"), nf_ok + ns_ok);
        CHECK_EQ(h_getu(st, "oversize_count"), 2 * 3);
        const msgpack_object *ef = fp_session_of(st, gg_client_session_id(f.c));
        const msgpack_object *es = fp_session_of(st, gg_client_session_id(s.c));
        if (CHECK(ef && es)) {
            CHECK_EQ(h_getu(ef, "replays"), nf_ok);
            CHECK_EQ(h_getu(es, "replays"), ns_ok);
            CHECKF(h_getu(ef, "errors") == h_getu(es, "errors"),
                   "the same errors counted on both paths (%llu vs %llu)",
                   (unsigned long long)h_getu(ef, "errors"),
                   (unsigned long long)h_getu(es, "errors"));
            CHECK_EQ(h_getu(ef, "graph_replays"), h_getu(es, "graph_replays"));
            CHECK_EQ(h_getu(ef, "eager_replays"), h_getu(es, "eager_replays"));
        }
        if (fault) {
            CHECK_EQ(h_getu(st, "replay_count"), 0);
            CHECK_EQ(h_getu(st, "fallback_count"), h_getu(st, "eager_count") - 6);
        }
    }

    /* ---- submit / wait / poll on the ring ---- */
    if (!fault) {
        fill_inputs(&f, 99);
        uint64_t t[8];
        int subs = 0;
        for (int i = 0; i < 8; i++)
            subs += CHECKF(gg_client_submit(f.c, f.prog, i + 1, 1, NULL, &t[i]) == 0,
                           "submit %d: %s", i, gg_client_last_error(f.c));
        if (subs == 8) {
            int polled = 0;
            for (int64_t end = h_now_ms() + 60000; polled != 1 && h_now_ms() < end;) {
                polled = gg_client_poll(f.c, t[7]);
                if (polled == 0)
                    h_sleep_ms(1);
            }
            CHECKF(polled == 1, "poll says the last submission completes (%d)", polled);
            int okw = 0;
            for (int i = 7; i >= 0; i--) {
                gg_replay_result r;
                int rc = gg_client_wait(f.c, t[i], &r);
                okw += CHECKF(rc == 0 && r.batch == i + 1 && r.branch == 1 &&
                                  r.bucket == bucket_of(i + 1) && r.path == GG_PATH_GRAPH,
                              "wait %d (reverse order): rc %d batch %d bucket %d path %d (%s)", i,
                              rc, r.batch, r.bucket, (int)r.path, gg_client_last_error(f.c));
            }
            CHECK_EQ(okw, 8);
            int bad = 0;
            for (int i = 0; i < 8 * D; i++)
                bad += f.y.f[i] != -0.5f * f.x.f[i];
            CHECK_EQ(bad, 0);
            CHECK_EQ(gg_client_poll(f.c, t[3]), -ENOENT);
            CHECK_EQ(gg_client_wait(f.c, t[3], NULL), -ENOENT);
        }
        /* the ring holds 64: the 65th outstanding submission is refused */
        uint64_t many[65];
        int n = 0, rc = 0;
        for (; n < 65; n++)
            if ((rc = gg_client_submit(f.c, f.prog, 1, 1, NULL, &many[n])) < 0)
                break;
        CHECKF(n == 64 && rc == -EBUSY, "64 outstanding fast-path submissions, then -EBUSY (%d, "
               "rc %d)", n, rc);
        int okw = 0;
        for (int i = 0; i < n; i++)
            okw += gg_client_wait(f.c, many[i], NULL) == 0;
        CHECK_EQ(okw, n);
        /* and the ring goes on */
        gg_replay_result r;
        CHECK(gg_client_replay(f.c, f.prog, 2, 0, &r) == 0 && r.path == GG_PATH_GRAPH &&
              !r.captured);
        CHECK_CONTAINS(gg_client_fastpath_status(f.c), "active");
    }
out:
    side_free(&f);
    side_free(&s);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* ---- ordering with the socket ------------------------------------------------ */

static int socket_replay(gg_client *c, uint64_t prog, int batch)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    proto_pack_kv_u64(&pk, "program", prog);
    proto_pack_kv_u64(&pk, "batch", (uint64_t)batch);
    const msgpack_object *r = NULL;
    int rc = gg_client_call(c, "replay", sb.data, sb.size, &r);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

#define OD 64
#define OROWS 4

/* x = x + one, in place, on OROWS x OD f32 buffers: the program id, 0 when
 * refused (checked). */
static uint64_t define_plus_one(gg_client *c, const tbuf *x, const tbuf *ones)
{
    int64_t sh[2] = {GG_BATCH, OD};
    static const int bk[] = {OROWS};
    uint64_t id = 0;
    gg_program_def *p = gg_program_def_new("plus-one");
    gg_program_def_buckets(p, 1, bk);
    gg_program_def_tensor(p, "x", x->id, 0, "f32", 2, sh);
    gg_program_def_tensor(p, "one", ones->id, 0, "f32", 2, sh);
    gg_program_def_op(p, "add", "x, one", "x");
    CHECKF(gg_client_program_define(c, p, &id) == 0, "define plus-one: %s",
           gg_client_last_error(c));
    gg_program_def_free(p);
    return id;
}

static void test_ordering(void)
{
    h_section("ordering: fast-path and socket replays of one session, non-commuting programs");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    gg_client *c = fp_client(d.sock, "fp-order");
    tbuf x = {0}, ones = {0}, a = {0}, b = {0}, y = {0};
    if (!c || !tbuf_new(c, &x, OROWS * OD) || !tbuf_new(c, &ones, OROWS * OD))
        goto out;
    int64_t sh[2] = {GG_BATCH, OD};
    static const int bk[] = {OROWS};
    uint64_t p_add = define_plus_one(c, &x, &ones), p_dbl = 0;
    gg_program_def *p = gg_program_def_new("times-two");
    gg_program_def_buckets(p, 1, bk);
    gg_program_def_tensor(p, "x", x.id, 0, "f32", 2, sh);
    gg_program_def_op(p, "scale", "x", "x");
    gg_program_def_attr_f(p, "scale", 2.0);
    CHECKF(gg_client_program_define(c, p, &p_dbl) == 0, "define times-two: %s",
           gg_client_last_error(c));
    gg_program_def_free(p);
    if (!p_add || !p_dbl)
        goto out;
    float refv[OROWS * OD];
    for (int i = 0; i < OROWS * OD; i++) {
        x.f[i] = refv[i] = (float)(i % 7) - 3.0f;
        ones.f[i] = 1.0f;
    }
    uint64_t fp0 = t_stat(c, "fastpath_replays");
    unsigned seed = 12345;
    int n_fast = 0, n_sock = 0, n_sub = 0, errors = 0, bad_after = -1;
    for (int k = 0; k < 80; k++) {
        seed = seed * 1103515245u + 12345u;
        int how = (int)((seed >> 16) % 3);
        /* a few descriptors in flight at once (how == 2), else one */
        int nops = how == 2 ? 2 + (int)((seed >> 8) % 4) : 1;
        uint64_t tickets[8];
        for (int j = 0; j < nops; j++) {
            seed = seed * 1103515245u + 12345u;
            bool dbl = (seed >> 16) % 3 == 0;
            uint64_t prog = dbl ? p_dbl : p_add;
            int rc;
            if (how == 0) {
                rc = gg_client_replay(c, prog, OROWS, -1, NULL);
                n_fast++;
            } else if (how == 1) {
                rc = socket_replay(c, prog, OROWS);
                n_sock++;
            } else {
                rc = gg_client_submit(c, prog, OROWS, -1, NULL, &tickets[j]);
                n_sub++;
            }
            if (rc < 0) {
                errors++;
                h_note("step %d.%d: %s", k, j, gg_client_last_error(c));
            }
            for (int i = 0; i < OROWS * OD; i++)
                refv[i] = dbl ? refv[i] * 2.0f : refv[i] + 1.0f;
        }
        if (how == 2)
            for (int j = 0; j < nops; j++)
                if (gg_client_wait(c, tickets[j], NULL) < 0) {
                    errors++;
                    h_note("wait %d.%d: %s", k, j, gg_client_last_error(c));
                }
        if (bad_after < 0 && memcmp(x.f, refv, sizeof refv) != 0)
            bad_after = k;
    }
    CHECK_EQ(errors, 0);
    CHECKF(bad_after < 0, "the buffer equals the sequential result after every step (first "
           "difference after step %d)", bad_after);
    int bad = 0;
    for (int i = 0; i < OROWS * OD; i++)
        bad += x.f[i] != refv[i];
    CHECKF(bad == 0, "final x equals the sequential result (%d of %d differ; x[1] %g want %g)",
           bad, OROWS * OD, x.f[1], refv[1]);
    CHECK_CONTAINS(gg_client_fastpath_status(c), "active");
    h_note("%d fast-path replays, %d socket replays, %d pipelined submissions", n_fast, n_sock,
           n_sub);
    fp_wait_session(c, gg_client_session_id(c), "replays", (uint64_t)(n_fast + n_sock + n_sub),
                    5000);
    const msgpack_object *st = t_stats(c);
    if (st) {
        CHECK_EQ(h_getu(st, "fastpath_replays") - fp0, n_fast + n_sub);
        const msgpack_object *e = fp_session_of(st, gg_client_session_id(c));
        CHECK(e && h_getu(e, "replays") == (uint64_t)(n_fast + n_sock + n_sub));
    }

    /* ---- program.rebind between fast-path replays ---- */
    h_section("program.rebind between fast-path replays");
    if (!tbuf_new(c, &a, OROWS * OD) || !tbuf_new(c, &b, OROWS * OD) ||
        !tbuf_new(c, &y, OROWS * OD))
        goto out;
    for (int i = 0; i < OROWS * OD; i++) {
        a.f[i] = (float)i;
        b.f[i] = 1000.0f - (float)i;
    }
    uint64_t p3 = 0;
    p = gg_program_def_new("triple");
    gg_program_def_buckets(p, 1, bk);
    gg_program_def_tensor(p, "x", a.id, 0, "f32", 2, sh);
    gg_program_def_tensor(p, "y", y.id, 0, "f32", 2, sh);
    gg_program_def_op(p, "scale", "x", "y");
    gg_program_def_attr_f(p, "scale", 3.0);
    CHECKF(gg_client_program_define(c, p, &p3) == 0, "define triple: %s", gg_client_last_error(c));
    gg_program_def_free(p);
    if (!p3)
        goto out;
    uint64_t upd0 = t_stat(c, "exec_updates");
    /* {buffer bound, path: 0 fast 1 socket, want captured} */
    static const struct {
        int buf;        /* 0: a, 1: b; a rebind first when it changes */
        int socket;
        int captured;   /* 1 yes, 0 no, -1 not checked (socket) */
    } seq[] = {
        {0, 0, 1}, {0, 0, 0}, {1, 0, 1}, {1, 0, 0}, {1, 1, -1}, {0, 0, 1}, {0, 0, 0},
        {1, 1, -1}, {1, 0, 0}, {0, 0, 1},
    };
    int cur = 0, rebinds = 0;
    for (size_t k = 0; k < sizeof seq / sizeof seq[0]; k++) {
        if (seq[k].buf != cur) {
            cur = seq[k].buf;
            rebinds++;
            if (!CHECKF(gg_client_program_rebind(c, p3, "x", cur ? b.id : a.id, 0) == 0,
                        "rebind %zu: %s", k, gg_client_last_error(c)))
                continue;
        }
        tbuf_fill(&y, -1.0f);
        gg_replay_result r;
        int rc = seq[k].socket ? socket_replay(c, p3, OROWS) : gg_client_replay(c, p3, OROWS, -1, &r);
        if (!CHECKF(rc == 0, "replay %zu: %s", k, gg_client_last_error(c)))
            continue;
        const tbuf *src = cur ? &b : &a;
        int wrong = 0;
        for (int i = 0; i < OROWS * OD; i++)
            wrong += y.f[i] != 3.0f * src->f[i];
        CHECKF(wrong == 0, "replay %zu (%s, x bound to %s): y = 3 x of the bound buffer (%d "
               "wrong; y[0] %g)", k, seq[k].socket ? "socket" : "fast path", cur ? "b" : "a",
               wrong, y.f[0]);
        if (seq[k].captured >= 0)
            CHECKF(r.path == GG_PATH_GRAPH && r.captured == (seq[k].captured == 1),
                   "replay %zu: graph, captured %d (want %d)", k, r.captured, seq[k].captured);
    }
    uint64_t upd1 = t_stat(c, "exec_updates");
    CHECKF(upd1 != UINT64_MAX && upd1 - upd0 == (uint64_t)rebinds,
           "each rebind updated the graph in place once (exec_updates %llu -> %llu, %d rebinds)",
           (unsigned long long)upd0, (unsigned long long)upd1, rebinds);
out:
    tbuf_free(&x);
    tbuf_free(&ones);
    tbuf_free(&a);
    tbuf_free(&b);
    tbuf_free(&y);
    gg_client_close(c);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

static void test_memory_fault(void)
{
    h_section("GFXGRAPH_FAULT=memory: a replay that fails after its graph ran runs once");
    const char *env[] = {"GFXGRAPH_FAULT=memory", NULL};
    h_daemon d;
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    gg_client *c = fp_client(d.sock, "fp-memfault");
    tbuf x = {0}, ones = {0};
    uint64_t p_add = 0;
    if (!c || !tbuf_new(c, &x, OROWS * OD) || !tbuf_new(c, &ones, OROWS * OD))
        goto out;
    if (!(p_add = define_plus_one(c, &x, &ones)))
        goto out;
    tbuf_fill(&x, 0.0f);
    tbuf_fill(&ones, 1.0f);
    uint64_t fp0 = t_stat(c, "fastpath_replays"), g0 = t_stat(c, "replay_count");
    uint64_t e0 = t_stat(c, "eager_count"), err0 = t_stat(c, "errors");
    int n_fast = 0;
    for (int k = 0; k < 8; k++) {
        bool sock = k % 4 == 3;
        int rc = sock ? socket_replay(c, p_add, OROWS) : gg_client_replay(c, p_add, OROWS, -1, NULL);
        n_fast += !sock;
        CHECKF(rc < 0 && strcmp(gg_client_last_error_code(c), "EFAULT") == 0,
               "replay %d (%s) fails with EFAULT (rc %d, %s: %s)", k, sock ? "socket" : "fast path",
               rc, gg_client_last_error_code(c), gg_client_last_error(c));
        CHECK_CONTAINS(gg_client_last_error(c), "GFXGRAPH_FAULT=memory");
        int wrong = 0;
        for (int i = 0; i < OROWS * OD; i++)
            wrong += x.f[i] != (float)(k + 1);
        CHECKF(wrong == 0, "after replay %d (%s) x is %d everywhere: its graph ran once (%d "
               "wrong; x[0] %g)", k, sock ? "socket" : "fast path", k + 1, wrong, x.f[0]);
    }
    CHECK_CONTAINS(gg_client_fastpath_status(c), "active");
    CHECK_EQ(t_stat(c, "fastpath_replays") - fp0, (uint64_t)n_fast);
    CHECK_EQ(t_stat(c, "replay_count") - g0, 0);
    CHECK_EQ(t_stat(c, "eager_count") - e0, 0);
    /* each failure counted once, whichever path answered it */
    CHECK_EQ(t_stat(c, "errors") - err0, 8);
out:
    tbuf_free(&x);
    tbuf_free(&ones);
    gg_client_close(c);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

int main(void)
{
    h_init("test_fastpath_results", 300);
    unsetenv("GFXGRAPH_FASTPATH");
    run_results(NULL);
    run_results("launch");
    run_results("capture");
    test_ordering();
    test_memory_fault();
    return h_finish();
}
