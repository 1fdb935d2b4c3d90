/* SPDX-License-Identifier: MIT */
/* The operators' verbs: gfxgraphctl evict PROGRAM|--all and kill-session ID
 * (admin.evict, admin.kill_session), on the cpu backend.
 *  - a caller that is not root, the daemon's uid or in admin-group is
 *    refused (EPERM naming who may) and nothing changes; a member of
 *    admin-group may;
 *  - evict by name drops that program's graphs only; each is captured again
 *    on its next replay (and the answer is still right); --all drops every
 *    graph; an unknown name is ENOENT; --id ID selects one program by id,
 *    and a bare operand stays a name even when it is all digits;
 *  - a graph in use by a running replay is not pulled from under it: the
 *    answer counts it deferred, the replay completes on its graph, and the
 *    graph goes when the replay ends;
 *  - kill-session closes that client's connection and fast path (its next
 *    replay fails with a connection error, a raw socket reads end of
 *    stream), and other clients go on unaffected. */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_client_util.h"

#ifndef GG_CTL_PATH
#error "GG_CTL_PATH must name the gfxgraphctl binary"
#endif

static const char *g_sock;

static int ctl(const char *const *args, char **out, char **err)
{
    const char *argv[16];
    int n = 0;
    argv[n++] = GG_CTL_PATH;
    argv[n++] = "--socket";
    argv[n++] = g_sock;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return h_run(argv, NULL, NULL, out, err, 60000);
}

static gg_client *client(const char *name)
{
    gg_client *c = gg_client_new();
    if (!CHECKF(c && gg_client_connect(c, g_sock, name) == 0, "connect %s: %s", name,
                c ? gg_client_last_error(c) : "no memory")) {
        gg_client_close(c);
        return NULL;
    }
    return c;
}

/* A call with a packed params map: 0, or the negative errno (code in c). */
static int call_map(gg_client *c, const char *method, msgpack_sbuffer *sb,
                    const msgpack_object **r)
{
    int rc = gg_client_call(c, method, sb->data, sb->size, r);
    msgpack_sbuffer_clear(sb);
    return rc;
}

static int evict_name(gg_client *c, const char *name, const msgpack_object **r)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    proto_pack_kv_str(&pk, "program", name);
    int rc = call_map(c, "admin.evict", &sb, r);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static int kill_session(gg_client *c, uint64_t id, const msgpack_object **r)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    proto_pack_kv_u64(&pk, "id", id);
    int rc = call_map(c, "admin.kill_session", &sb, r);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static const char *entry_state(const msgpack_object *st, uint64_t prog, int bucket, char *b,
                               size_t len)
{
    const msgpack_object *e = t_entry(st, prog, 0, bucket);
    return e ? h_gets(e, "state", b, len) : "(none)";
}

static bool has_session(const msgpack_object *st, uint64_t id)
{
    const msgpack_object *s = h_get(st, "sessions");
    for (uint32_t i = 0; s && s->type == MSGPACK_OBJECT_ARRAY && i < s->via.array.size; i++)
        if (h_getu(&s->via.array.ptr[i], "id") == id)
            return true;
    return false;
}

/* Session id's counter key in st (UINT64_MAX when absent). */
static uint64_t session_stat(const msgpack_object *st, uint64_t id, const char *key)
{
    const msgpack_object *s = h_get(st, "sessions");
    for (uint32_t i = 0; s && s->type == MSGPACK_OBJECT_ARRAY && i < s->via.array.size; i++)
        if (h_getu(&s->via.array.ptr[i], "id") == id)
            return h_getu(&s->via.array.ptr[i], key);
    return UINT64_MAX;
}

/* ---- as a user ----------------------------------------------------------- */

static uint64_t g_victim;      /* a session the user tries to kill */
static bool g_user_admin;      /* the user is in admin-group */

static void user_tries(void *arg)
{
    (void)arg;
    char *out = NULL, *err = NULL;
    const char *ev[] = {"evict", "--all", NULL};
    int code = ctl(ev, &out, &err);
    if (g_user_admin) {
        CHECKF(code == 0, "evict --all as an admin-group member: exit %d (%s)", code,
               err ? err : "");
        CHECK_CONTAINS(out ? out : "", "evicted");
    } else {
        CHECKF(code == 1, "evict --all as uid %d: exit %d, want 1", (int)getuid(), code);
        CHECK_CONTAINS(err ? err : "", "EPERM");
        CHECK_CONTAINS(err ? err : "", "admin-group");
        CHECK_CONTAINS(err ? err : "", "root");
    }
    free(out);
    free(err);
    out = err = NULL;
    if (!g_user_admin) {
        char id[32];
        snprintf(id, sizeof id, "%llu", (unsigned long long)g_victim);
        const char *ks[] = {"kill-session", id, NULL};
        code = ctl(ks, &out, &err);
        CHECKF(code == 1, "kill-session as uid %d: exit %d, want 1", (int)getuid(), code);
        CHECK_CONTAINS(err ? err : "", "EPERM");
        free(out);
        free(err);
        /* the library sees the code too */
        gg_client *c = client("user");
        const msgpack_object *r;
        if (c) {
            CHECK_FAILS(kill_session(c, g_victim, &r), c, "EPERM");
            CHECK_FAILS(evict_name(c, "alpha", &r), c, "EPERM");
            gg_client_close(c);
        }
    }
}

/* ---- the programs ----------------------------------------------------------- */

typedef struct {
    tbuf x, y;
    uint64_t alpha, beta;
} progs;

static bool progs_define(gg_client *c, progs *p)
{
    memset(p, 0, sizeof *p);
    if (!tbuf_new(c, &p->x, 4 * 16) || !tbuf_new(c, &p->y, 4 * 16))
        return false;
    for (int i = 0; i < 4 * 16; i++)
        p->x.f[i] = (float)(i % 7) * 0.25f - 0.5f;
    p->alpha = t_define_silu2x(c, "alpha", p->x.id, p->y.id, 16);
    p->beta = t_define_silu2x(c, "beta", p->x.id, p->y.id, 16);
    int ready = 0;
    CHECK(p->alpha && gg_client_program_prepare(c, p->alpha, 0, NULL, -1, &ready, NULL) == 0 &&
          ready == 3);
    CHECK(p->beta && gg_client_program_prepare(c, p->beta, 0, NULL, -1, &ready, NULL) == 0 &&
          ready == 3);
    return p->alpha && p->beta;
}

static bool y_right(const progs *p, int rows)
{
    for (int i = 0; i < rows * 16; i++)
        if (!t_close(p->y.f[i], t_silu2x_ref(p->x.f[i]), 1e-5))
            return false;
    return true;
}

static void test_refused(gg_client *own, const progs *p)
{
    h_section("a caller outside root, the daemon's uid and admin-group is refused");
    g_victim = gg_client_session_id(own);
    g_user_admin = false;
    static const char *const need[] = {GG_CTL_PATH, NULL};
    h_as_user("test_admin (as a user)", user_tries, NULL, need);
    const msgpack_object *st = t_stats(own);
    if (st) {
        CHECK_EQ(h_getu(st, "graphs_cached"), 6);
        CHECK_EQ(h_getu(st, "evictions"), 0);
        CHECK(has_session(st, g_victim));
    }
    gg_replay_result res;
    CHECK(gg_client_replay(own, p->alpha, 4, -1, &res) == 0 && res.path == GG_PATH_GRAPH &&
          !res.captured);
}

static void test_evict_name(gg_client *own, progs *p)
{
    h_section("gfxgraphctl evict PROGRAM: that program's graphs, captured again on next use");
    char *out = NULL, *err = NULL, b[32];
    const char *args[] = {"evict", "alpha", NULL};
    int code = ctl(args, &out, &err);
    CHECKF(code == 0, "evict alpha: exit %d (%s)", code, err ? err : "");
    CHECK_CONTAINS(out ? out : "", "evicted 3 graph(s) of program 'alpha'");
    free(out);
    free(err);
    const msgpack_object *st = t_stats(own);
    if (st) {
        CHECK_EQ(h_getu(st, "graphs_cached"), 3);
        CHECK_EQ(h_getu(st, "evictions"), 3);
        for (int bk = 1; bk <= 4; bk *= 2) {
            CHECK_STR(entry_state(st, p->alpha, bk, b, sizeof b), "empty");
            CHECK_STR(entry_state(st, p->beta, bk, b, sizeof b), "ready");
        }
    }
    uint64_t captures = t_stat(own, "capture_count");
    gg_replay_result res;
    memset(p->y.f, 0, p->y.size);
    CHECK(gg_client_replay(own, p->alpha, 2, -1, &res) == 0 && res.path == GG_PATH_GRAPH &&
          res.captured && res.bucket == 2);
    CHECK(y_right(p, 2));
    CHECK(gg_client_replay(own, p->alpha, 2, -1, &res) == 0 && res.path == GG_PATH_GRAPH &&
          !res.captured);
    CHECK(gg_client_replay(own, p->beta, 2, -1, &res) == 0 && res.path == GG_PATH_GRAPH &&
          !res.captured);
    CHECK_EQ(t_stat(own, "capture_count"), captures + 1);

    h_section("evict of a name nobody defined: ENOENT; bad operands: EINVAL");
    const char *none[] = {"evict", "no-such-program", NULL};
    code = ctl(none, &out, &err);
    CHECKF(code == 1, "evict no-such-program: exit %d", code);
    CHECK_CONTAINS(err ? err : "", "ENOENT");
    CHECK_CONTAINS(err ? err : "", "no-such-program");
    free(out);
    free(err);
    const char *both[] = {"evict", "alpha", "--all", NULL};
    CHECK_EQ(ctl(both, NULL, NULL), 64);
    const char *neither[] = {"evict", NULL};
    CHECK_EQ(ctl(neither, NULL, NULL), 64);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    proto_pack_kv_str(&pk, "program", "alpha");
    proto_pack_kv_bool(&pk, "all", true);
    const msgpack_object *r;
    CHECK_FAILS(call_map(own, "admin.evict", &sb, &r), own, "EINVAL");
    msgpack_sbuffer_destroy(&sb);

    h_section("gfxgraphctl evict --id ID: that program only, whatever its name");
    char id[24], want[80];
    snprintf(id, sizeof id, "%llu", (unsigned long long)p->beta);
    /* a bare number is a name: nobody named a program after beta's id */
    const char *bare[] = {"evict", id, NULL};
    code = ctl(bare, &out, &err);
    CHECKF(code == 1, "evict %s (a name): exit %d", id, code);
    snprintf(want, sizeof want, "no program named '%s'", id);
    CHECK_CONTAINS(err ? err : "", want);
    free(out);
    free(err);
    CHECK_EQ(t_stat(own, "graphs_cached"), 4);
    const char *by_id[] = {"evict", "--id", id, NULL};
    code = ctl(by_id, &out, &err);
    CHECKF(code == 0, "evict --id %s: exit %d (%s)", id, code, err ? err : "");
    snprintf(want, sizeof want, "evicted 3 graph(s) of program id %s", id);
    CHECK_CONTAINS(out ? out : "", want);
    free(out);
    free(err);
    st = t_stats(own);
    if (st) {
        CHECK_EQ(h_getu(st, "graphs_cached"), 1);
        CHECK_STR(entry_state(st, p->alpha, 2, b, sizeof b), "ready");
        for (int bk = 1; bk <= 4; bk *= 2)
            CHECK_STR(entry_state(st, p->beta, bk, b, sizeof b), "empty");
    }
    const char *gone[] = {"evict", "--id", "987654321", NULL};
    code = ctl(gone, &out, &err);
    CHECKF(code == 1, "evict --id 987654321: exit %d", code);
    CHECK_CONTAINS(err ? err : "", "ENOENT");
    CHECK_CONTAINS(err ? err : "", "no program 987654321");
    free(out);
    free(err);
    const char *bad_ids[][5] = {
        {"evict", "--id", "0", NULL},          {"evict", "--id", "-3", NULL},
        {"evict", "--id", "3x", NULL},         {"evict", "--id", "", NULL},
        {"evict", "--id", id, "alpha", NULL},  {"evict", "--id", id, "--all", NULL},
        {"stats", "--id", id, NULL},           {"evict", "--id", NULL},
    };
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        code = ctl(bad_ids[i], NULL, &err);
        CHECKF(code == 64, "%s %s %s: exit %d, want 64", bad_ids[i][0], bad_ids[i][1],
               bad_ids[i][2] ? bad_ids[i][2] : "", code);
        CHECK(err && strstr(err, "gfxgraphctl: "));
        free(err);
    }
    CHECK_EQ(t_stat(own, "graphs_cached"), 1);

    h_section("gfxgraphctl --json evict --all: every graph");
    const char *all[] = {"--json", "evict", "--all", NULL};
    code = ctl(all, &out, &err);
    CHECKF(code == 0, "evict --all: exit %d (%s)", code, err ? err : "");
    CHECK(out && h_py_json_check(out, "assert d['evicted'] == 1 and d['deferred'] == 0 and "
                                      "d['graphs_cached'] == 0, d\n"));
    free(out);
    free(err);
    CHECK_EQ(t_stat(own, "graphs_cached"), 0);
    CHECK(gg_client_replay(own, p->beta, 3, -1, &res) == 0 && res.path == GG_PATH_GRAPH &&
          res.captured && res.bucket == 4);
    CHECK(y_right(p, 3));
}

/* A program slow enough on the cpu backend that an evict arrives while its
 * replay runs: 160 linear nodes of 512 x 512 at bucket 8 (the evict is tried
 * again when the replay ended before it came). */
static void test_evict_in_use(gg_client *own)
{
    h_section("a graph in use is evicted when its replay ends, not under it");
    enum { D = 512, NODES = 160 };
    tbuf x, y, w;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    memset(&w, 0, sizeof w);
    if (!tbuf_new(own, &x, 8 * D) || !tbuf_new(own, &y, 8 * D) || !tbuf_new(own, &w, D * D))
        goto out;
    tbuf_fill(&x, 1.0f);
    for (int i = 0; i < D * D; i++)
        w.f[i] = i % (D + 1) == 0 ? 1.0f : 0.0f;   /* identity: y stays 1 */
    gg_program_def *pd = gg_program_def_new("slow");
    int64_t s[2] = {GG_BATCH, D}, ws[2] = {D, D};
    gg_program_def_buckets(pd, 1, (int[]){8});
    gg_program_def_tensor(pd, "x", x.id, 0, "f32", 2, s);
    gg_program_def_tensor(pd, "y", y.id, 0, "f32", 2, s);
    gg_program_def_tensor(pd, "w", w.id, 0, "f32", 2, ws);
    for (int i = 0; i < NODES; i++)
        gg_program_def_op(pd, "linear", i % 2 ? "y, w" : "x, w", i % 2 ? "x" : "y");
    uint64_t prog = 0;
    CHECKF(gg_client_program_define(own, pd, &prog) == 0, "define slow: %s",
           gg_client_last_error(own));
    gg_program_def_free(pd);
    int ready = 0;
    if (!prog || !CHECK(gg_client_program_prepare(own, prog, 0, NULL, -1, &ready, NULL) == 0 &&
                        ready == 1))
        goto out;
    int64_t t0 = h_now_ms();
    gg_replay_result res;
    CHECK(gg_client_replay(own, prog, 8, -1, &res) == 0 && res.path == GG_PATH_GRAPH);
    int64_t one = h_now_ms() - t0;
    h_note("one replay of 'slow' takes %lld ms", (long long)one);
    gg_client *admin = client("admin");
    if (!admin)
        goto out;
    uint64_t before = t_stat(admin, "evictions");
    /* The evict lands while the replay runs (it pins its graph): sent once
     * stats shows the submission taken and not yet done.  On a loaded
     * machine the replay may end between that look and the evict: then the
     * graph goes at once, and the round is tried again the same way. */
    uint64_t ticket = 0, sid = gg_client_session_id(own);
    const msgpack_object *r;
    bool deferred = false;
    for (int round = 0; round < 20 && !deferred; round++) {
        if (round && !CHECK(gg_client_program_prepare(own, prog, 0, NULL, -1, &ready, NULL) == 0))
            break;
        const msgpack_object *s0 = t_stats(admin);
        uint64_t req0 = s0 ? session_stat(s0, sid, "requests") : UINT64_MAX;
        uint64_t rep0 = s0 ? session_stat(s0, sid, "replays") : UINT64_MAX;
        if (!CHECK(req0 != UINT64_MAX && rep0 != UINT64_MAX) ||
            !CHECK(gg_client_submit(own, prog, 8, -1, NULL, &ticket) == 0))
            break;
        bool taken = false;
        for (int64_t end = h_now_ms() + 60000; !taken && h_now_ms() < end;) {
            const msgpack_object *sn = t_stats(admin);
            taken = sn && session_stat(sn, sid, "requests") > req0;
            if (!taken)
                h_sleep_ms(1);
        }
        if (!CHECKF(taken, "the daemon takes the submission"))
            break;
        if (!CHECK(evict_name(admin, "slow", &r) == 0))
            break;
        CHECK_EQ(h_getu(r, "matched"), 1);
        CHECK_EQ(h_getu(r, "evicted") + h_getu(r, "deferred"), 1);
        deferred = h_getu(r, "deferred") == 1;
        if (!deferred) {
            h_note("round %d: the replay had not begun when the evict came", round);
            CHECK(gg_client_wait(own, ticket, &res) == 0 && res.path == GG_PATH_GRAPH);
            before++;
        }
    }
    if (!CHECK(deferred))
        goto out2;
    const msgpack_object *st = t_stats(admin);
    char b[32];
    if (st)
        CHECK_STR(entry_state(st, prog, 8, b, sizeof b), "ready");
    CHECK(gg_client_wait(own, ticket, &res) == 0 && res.path == GG_PATH_GRAPH &&
          !res.captured);
    bool ones = true;
    for (int i = 0; i < 8 * D; i++)
        ones = ones && x.f[i] == 1.0f && y.f[i] == 1.0f;
    CHECK(ones);
    /* the last unpin (in the loop, after the answers) evicts it */
    bool gone = false;
    for (int i = 0; i < 6000 && !gone; i++) {   /* up to 60 s */
        st = t_stats(admin);
        gone = st && strcmp(entry_state(st, prog, 8, b, sizeof b), "empty") == 0;
        if (!gone)
            h_sleep_ms(10);
    }
    CHECK(gone);
    CHECK_EQ(t_stat(admin, "evictions"), before + 1);
    CHECK(gg_client_replay(own, prog, 8, -1, &res) == 0 && res.path == GG_PATH_GRAPH &&
          res.captured);
out2:
    gg_client_close(admin);
out:
    tbuf_free(&x);
    tbuf_free(&y);
    tbuf_free(&w);
}

static void test_kill(const progs *p0)
{
    h_section("gfxgraphctl kill-session ID: that client's connection and fast path close");
    gg_client *victim = client("victim"), *other = client("other");
    h_conn raw;
    bool raw_ok = CHECK(h_conn_open(&raw, g_sock) == 0);
    if (!victim || !other || !raw_ok)
        goto out;
    progs pv, po;
    if (!progs_define(victim, &pv) || !progs_define(other, &po))
        goto out2;
    gg_replay_result res;
    CHECK(gg_client_replay(victim, pv.alpha, 2, -1, &res) == 0);
    CHECK(gg_client_replay(other, po.alpha, 2, -1, &res) == 0);
    const char *fp = gg_client_fastpath_status(victim);
    h_note("victim's fast path: %s", fp);
    uint64_t vid = gg_client_session_id(victim), oid = gg_client_session_id(other);
    const msgpack_object *st = t_stats(other);
    uint64_t regions = st ? h_getu(st, "fastpath_regions") : 0;
    char id[32], *out = NULL, *err = NULL;
    snprintf(id, sizeof id, "%llu", (unsigned long long)vid);
    const char *args[] = {"kill-session", id, NULL};
    int code = ctl(args, &out, &err);
    CHECKF(code == 0, "kill-session %s: exit %d (%s)", id, code, err ? err : "");
    char want[64];
    snprintf(want, sizeof want, "killed session %s (client 'victim'", id);
    CHECK_CONTAINS(out ? out : "", want);
    CHECK_CONTAINS(out ? out : "", "2 buffer(s), 2 program(s)");
    free(out);
    free(err);
    int rc = gg_client_replay(victim, pv.alpha, 2, -1, &res);
    const char *vcode = gg_client_last_error_code(victim);
    /* told why, with a code of its own, not a bare reset */
    CHECKF(rc == -ECONNRESET && !strcmp(vcode, "ECONNABORTED") &&
               strstr(gg_client_last_error(victim), "closed by an operator"),
           "the killed client's next replay fails ECONNABORTED, saying an operator closed it "
           "(rc %d, %s: %s)", rc, vcode, gg_client_last_error(victim));
    CHECK(gg_client_replay(victim, pv.alpha, 2, -1, &res) == -ENOTCONN);
    bool gone = false;
    for (int i = 0; i < 6000 && !gone; i++) {   /* up to 60 s */
        st = t_stats(other);
        gone = st && !has_session(st, vid);
        if (!gone)
            h_sleep_ms(10);
    }
    CHECK(gone);
    if (st) {
        CHECK(has_session(st, oid));
        if (strncmp(fp, "active", 6) == 0)
            CHECK_EQ(h_getu(st, "fastpath_regions"), regions - 1);
    }
    memset(po.y.f, 0, po.y.size);
    CHECK(gg_client_replay(other, po.alpha, 4, -1, &res) == 0 && res.path == GG_PATH_GRAPH);
    CHECK(y_right(&po, 4));

    h_section("a raw connection killed reads ECONNABORTED, then end of stream");
    const msgpack_object *r;
    {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        proto_pack_kv_u64(&pk, "protocol", 1);
        const msgpack_object *err2 = NULL;
        uint64_t rid = 0;
        if (CHECK(h_conn_call(&raw, 1, "hello", sb.data, sb.size, &r, &err2) == 1 && !err2))
            rid = h_getu(r, "session");
        msgpack_sbuffer_destroy(&sb);
        if (rid && CHECK(kill_session(other, rid, &r) == 0)) {
            CHECK_EQ(h_getu(r, "session"), rid);
            CHECK_EQ(h_getu(r, "programs"), 0);
            CHECK_EQ(h_geti(r, "uid"), (int64_t)getuid());
            const msgpack_object *m;
            if (CHECK(h_conn_recv(&raw, 5000, &m) == 1)) {
                proto_msg pm;
                bool idok;
                char why[128], code[32] = "";
                if (CHECK(proto_msg_decode(m, &pm, &idok, why, sizeof why) == 0 &&
                          pm.type == GG_MSG_NOTIFY))
                    h_gets(pm.params, "code", code, sizeof code);
                CHECK_STR(code, "ECONNABORTED");
            }
            CHECK_EQ(h_conn_recv(&raw, 5000, &m), 0);
        }
    }

    h_section("kill-session: its own session EINVAL, an unknown one ENOENT");
    CHECK_FAILS(kill_session(other, oid, &r), other, "EINVAL");
    CHECK_FAILS(kill_session(other, 999999, &r), other, "ENOENT");
    CHECK_FAILS(kill_session(other, vid, &r), other, "ENOENT");
    const char *bad[] = {"kill-session", "x1", NULL};
    CHECK_EQ(ctl(bad, NULL, NULL), 64);
    CHECK(gg_client_replay(other, po.beta, 1, -1, &res) == 0);
    (void)p0;
out2:
    tbuf_free(&pv.x);
    tbuf_free(&pv.y);
    tbuf_free(&po.x);
    tbuf_free(&po.y);
out:
    if (raw_ok)
        h_conn_close(&raw);
    gg_client_close(victim);
    gg_client_close(other);
}

static void test_admin_group(void)
{
    h_section("admin-group: its members may evict");
    const char *args[] = {"--set", "admin-group=65534", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    chmod(d.dir, 0755);
    chmod(d.sock, 0666);
    g_sock = d.sock;
    g_user_admin = true;
    static const char *const need[] = {GG_CTL_PATH, NULL};
    h_as_user("test_admin (as an admin-group member)", user_tries, NULL, need);
    h_daemon_stop(&d);
}

int main(void)
{
    h_init("test_admin", 280);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        chmod(d.dir, 0755);
        chmod(d.sock, 0666);
        g_sock = d.sock;
        gg_client *own = client("owner");
        progs p;
        memset(&p, 0, sizeof p);
        if (own && progs_define(own, &p)) {
            test_refused(own, &p);
            test_evict_name(own, &p);
            test_evict_in_use(own);
            test_kill(&p);
        }
        tbuf_free(&p.x);
        tbuf_free(&p.y);
        gg_client_close(own);
        h_daemon_stop(&d);
    }
    test_admin_group();
    return h_finish();
}
