/* SPDX-License-Identifier: MIT */
/* A define never stalls the loop.  A legal program.define
 * of N nodes (N = 1,024, 10,240 and 102,400: 25 branches of 4,096 nodes)
 * (copy ops) over 1,536 named tensors is checked while a second connection sends
 * health requests back to back; the time of each define and the longest
 * wait of a health answer are noted (the figures for the note), and the
 * test asserts counts only: every define is accepted, every health request
 * is answered, and health requests are answered while the large define is
 * on its way (before and after it at least).
 *
 * Off the loop: a large define is checked on a pool thread.  Proved by the
 * daemon's own state, not by a clock: while the 102,400-node define is in
 * progress, another connection's `stats` is answered with
 * defines_checking 1 (a loop busy with the define could not answer it);
 * the defining connection's next request, sent in the same write, is
 * answered after the define and sees the program (its requests stay in
 * order); large defines that fail (another session's buffer, an unknown
 * key, an unknown tensor, a malformed envelope) give the messages the
 * loop gives; a connection that closes while its define is checked leaves
 * the daemon serving and the count back at 0.
 *
 * GG_DEFINE_SCALE_BENCH=1 repeats each size 5 times and notes the best. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

#define NT 1536   /* 102,400 unary nodes and these fit the 1 Mi values of one message */
#define TBYTES 16   /* f32 [4] */

static const char *g_sock;
static atomic_int g_stop;
static atomic_int g_probe_sent, g_probe_ok;
static atomic_llong g_probe_max_us;

static void tname(char *b, size_t n, int i)
{
    snprintf(b, n, "layer.activation.%05d", i);
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

/* params of a define with nnodes nodes over NT tensors of buffer bid;
 * extra: one more key (value true), or NULL; bad_node: a node that names
 * an unknown tensor, or -1; call: node 0 calls this program instead, or 0 */
static void pack_define_xc(msgpack_sbuffer *sb, uint64_t bid, int nnodes, const char *name,
                           const char *extra, int bad_node, uint64_t call)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, extra ? 4 : 3);
    if (extra) {
        pack_str(&pk, extra);
        msgpack_pack_true(&pk);
    }
    pack_str(&pk, "name");
    pack_str(&pk, name);
    pack_str(&pk, "tensors");
    msgpack_pack_map(&pk, NT);
    char b[64];
    for (int i = 0; i < NT; i++) {
        tname(b, sizeof b, i);
        pack_str(&pk, b);
        msgpack_pack_map(&pk, 4);
        pack_str(&pk, "buffer");
        msgpack_pack_uint64(&pk, bid);
        pack_str(&pk, "offset");
        msgpack_pack_uint64(&pk, (uint64_t)i * TBYTES);
        pack_str(&pk, "dtype");
        pack_str(&pk, "f32");
        pack_str(&pk, "shape");
        msgpack_pack_array(&pk, 1);
        msgpack_pack_int(&pk, 4);
    }
    int per = 4096, nbr = (nnodes + per - 1) / per;
    if (nbr > 1) {
        pack_str(&pk, "branches");
        msgpack_pack_array(&pk, (size_t)nbr);
    } else {
        pack_str(&pk, "nodes");
    }
    int j = 0;
    for (int br = 0; br < nbr; br++) {
        int n = nnodes - br * per < per ? nnodes - br * per : per;
        msgpack_pack_array(&pk, (size_t)n);
        for (int k = 0; k < n; k++, j++) {
            if (j == 0 && call) {
                msgpack_pack_map(&pk, 2);
                pack_str(&pk, "op");
                pack_str(&pk, "call");
                pack_str(&pk, "program");
                msgpack_pack_uint64(&pk, call);
                continue;
            }
            msgpack_pack_map(&pk, 3);
            pack_str(&pk, "op");
            pack_str(&pk, "copy");
            pack_str(&pk, "inputs");
            msgpack_pack_array(&pk, 1);
            tname(b, sizeof b, (j * 7) % NT);
            pack_str(&pk, j == bad_node ? "no.such.tensor" : b);
            pack_str(&pk, "outputs");
            msgpack_pack_array(&pk, 1);
            tname(b, sizeof b, (j * 7 + 3) % NT);
            pack_str(&pk, b);
        }
    }
}

static void pack_define_x(msgpack_sbuffer *sb, uint64_t bid, int nnodes, const char *name,
                          const char *extra, int bad_node)
{
    pack_define_xc(sb, bid, nnodes, name, extra, bad_node, 0);
}

static void pack_define(msgpack_sbuffer *sb, uint64_t bid, int nnodes, const char *name)
{
    pack_define_x(sb, bid, nnodes, name, NULL, -1);
}

static char g_shm[64];      /* the shm object every connection registers */

static void *probe(void *arg)
{
    (void)arg;
    h_conn c;
    if (h_conn_open(&c, g_sock) != 0)
        return NULL;
    for (uint32_t id = 1; !atomic_load(&g_stop); id++) {
        const msgpack_object *r, *err;
        int64_t t0 = h_now_ms();
        struct timespec a, z;
        clock_gettime(CLOCK_MONOTONIC, &a);
        atomic_fetch_add(&g_probe_sent, 1);
        int rc = h_conn_call(&c, id, "health", NULL, 0, &r, &err);
        clock_gettime(CLOCK_MONOTONIC, &z);
        (void)t0;
        if (rc == 1 && !err)
            atomic_fetch_add(&g_probe_ok, 1);
        long long us = (z.tv_sec - a.tv_sec) * 1000000LL + (z.tv_nsec - a.tv_nsec) / 1000;
        if (us > atomic_load(&g_probe_max_us))
            atomic_store(&g_probe_max_us, us);
        usleep(200);
    }
    h_conn_close(&c);
    return NULL;
}

static atomic_int g_stats_ok, g_seen_checking;

/* Another client asking for stats back to back: how often the daemon said
 * a define was being checked while it answered. */
static void *stats_probe(void *arg)
{
    (void)arg;
    h_conn c;
    if (h_conn_open(&c, g_sock) != 0)
        return NULL;
    for (uint32_t id = 1; !atomic_load(&g_stop); id++) {
        const msgpack_object *r, *err;
        if (h_conn_call(&c, id, "stats", NULL, 0, &r, &err) != 1 || err)
            break;
        atomic_fetch_add(&g_stats_ok, 1);
        uint64_t n = h_getu(r, "defines_checking");
        if (n != UINT64_MAX && n >= 1)
            atomic_fetch_add(&g_seen_checking, 1);
        usleep(200);    /* a steady client, not one taking a core from the define */
    }
    h_conn_close(&c);
    return NULL;
}

/* [1, msgid, error, result] of a response; false when o is not one. */
static bool response(const msgpack_object *o, uint32_t *msgid, const msgpack_object **err,
                     const msgpack_object **res)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 4 ||
        o->via.array.ptr[0].via.u64 != 1)
        return false;
    *msgid = (uint32_t)o->via.array.ptr[1].via.u64;
    *err = o->via.array.ptr[2].type == MSGPACK_OBJECT_NIL ? NULL : &o->via.array.ptr[2];
    *res = &o->via.array.ptr[3];
    return true;
}

/* A large define that fails: its code, and its message containing want. */
static void large_fails(h_conn *c, const msgpack_sbuffer *params, const char *code,
                        const char *want)
{
    const msgpack_object *r, *err;
    char got[32] = "", msg[600] = "";
    int rc = h_conn_call(c, 900, "program.define", params->data, params->size, &r, &err);
    CHECKF(rc == 1 && err, "a large define that must fail: rc %d", rc);
    if (rc != 1 || !err)
        return;
    CHECK_STR(h_err_code(err, got, sizeof got), code);
    CHECK_CONTAINS(h_gets(err, "message", msg, sizeof msg), want);
}

static void off_the_loop(h_conn *c, uint64_t bid)
{
    h_section("a large define is checked off the loop");
    msgpack_sbuffer def, req;
    msgpack_sbuffer_init(&def);
    msgpack_sbuffer_init(&req);
    pack_define(&def, bid, 102400, "offloop");
    int seen = 0, rounds = 0;
    /* a round is enough unless the define ends before the other client is
     * scheduled at all; on a loaded machine, a few */
    for (; rounds < 5 && !seen; rounds++) {
        atomic_store(&g_stop, 0);
        atomic_store(&g_stats_ok, 0);
        atomic_store(&g_seen_checking, 0);
        pthread_t th;
        pthread_create(&th, NULL, stats_probe, NULL);
        for (int i = 0; i < 2000 && atomic_load(&g_stats_ok) == 0; i++)
            h_sleep_ms(5);
        /* one write: the define, then a request that must see it */
        h_pack_request(&req, 501, "program.define", def.data, def.size);
        h_pack_request(&req, 502, "program.list", NULL, 0);
        CHECK(h_conn_send_sb(c, &req) == 0);
        const msgpack_object *o, *err, *res;
        uint32_t id = 0;
        uint64_t pid = 0;
        int rc = h_conn_recv(c, 120000, &o);
        if (CHECKF(rc == 1 && response(o, &id, &err, &res), "the define's answer: rc %d", rc)) {
            CHECKF(id == 501, "the define is answered first (got msgid %u)", id);
            CHECK(err == NULL);
            pid = h_getu(res, "id");
            CHECK_EQ(h_getu(res, "nodes"), 102400);
        }
        rc = h_conn_recv(c, 60000, &o);
        if (CHECKF(rc == 1 && response(o, &id, &err, &res), "program.list's answer: rc %d", rc)) {
            CHECKF(id == 502, "program.list is answered after the define (got msgid %u)", id);
            const msgpack_object *progs = h_get(res, "programs");
            bool listed = false;
            for (uint32_t i = 0; progs && progs->type == MSGPACK_OBJECT_ARRAY &&
                                 i < progs->via.array.size; i++)
                listed |= h_getu(&progs->via.array.ptr[i], "id") == pid;
            CHECKF(listed, "program.list, sent right behind the define, lists it (id %llu)",
                   (unsigned long long)pid);
        }
        atomic_store(&g_stop, 1);
        pthread_join(th, NULL);
        seen = atomic_load(&g_seen_checking);
        h_note("round %d: another client's stats answered %d times during the round, %d of "
               "them with the define in progress", rounds + 1, atomic_load(&g_stats_ok), seen);
        if (pid) {
            msgpack_sbuffer rs;
            msgpack_sbuffer_init(&rs);
            msgpack_packer rp;
            msgpack_packer_init(&rp, &rs, msgpack_sbuffer_write);
            msgpack_pack_map(&rp, 1);
            pack_str(&rp, "id");
            msgpack_pack_uint64(&rp, pid);
            const msgpack_object *r;
            CHECK(h_conn_call(c, 503, "program.release", rs.data, rs.size, &r, &err) == 1 && !err);
            msgpack_sbuffer_destroy(&rs);
        }
    }
    CHECKF(seen > 0, "another connection's stats was answered while the define was checked "
           "(defines_checking 1), in %d round(s)", rounds);

    h_section("large defines that fail say why, as on the loop");
    msgpack_sbuffer p;
    msgpack_sbuffer_init(&p);
    pack_define_x(&p, bid, 1024, "bad", "bucket", -1);
    CHECK(p.size > 65536);
    large_fails(c, &p, "EINVAL", "unknown key 'bucket'");
    msgpack_sbuffer_clear(&p);
    pack_define_x(&p, bid, 1024, "bad", NULL, 700);
    large_fails(c, &p, "EINVAL", "node 700 (copy): unknown tensor 'no.such.tensor' in inputs");
    h_conn other;
    if (CHECK(h_conn_open(&other, g_sock) == 0)) {
        msgpack_sbuffer_clear(&p);
        pack_define(&p, bid, 1024, "notmine");
        large_fails(&other, &p, "EACCES", "belongs to another session");
        h_conn_close(&other);
    }
    /* params a map, not [map]: the envelope's EPROTO, to its msgid */
    msgpack_sbuffer_clear(&p);
    pack_define(&p, bid, 1024, "shape");
    msgpack_packer pk;
    msgpack_packer_init(&pk, &req, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint32(&pk, 0);
    msgpack_pack_uint32(&pk, 777);
    pack_str(&pk, "program.define");
    msgpack_sbuffer_write(&req, p.data, p.size);
    CHECK(h_conn_send_sb(c, &req) == 0);
    const msgpack_object *o, *err, *res;
    uint32_t id = 0;
    if (CHECK(h_conn_recv(c, 60000, &o) == 1 && response(o, &id, &err, &res))) {
        char code[32] = "";
        CHECK_EQ(id, 777);
        CHECK_STR(err ? h_err_code(err, code, sizeof code) : "", "EPROTO");
    }

    h_section("a large define that calls a program");
    msgpack_sbuffer_clear(&p);
    pack_define(&p, bid, 4, "callee");
    const msgpack_object *cr;
    uint64_t callee = 0;
    if (CHECK(h_conn_call(c, 950, "program.define", p.data, p.size, &cr, &err) == 1 && !err))
        callee = h_getu(cr, "id");
    msgpack_sbuffer_clear(&p);
    pack_define_xc(&p, bid, 1024, "caller", NULL, -1, callee);
    CHECK(p.size > 65536);
    if (CHECK(h_conn_call(c, 951, "program.define", p.data, p.size, &cr, &err) == 1 && !err))
        CHECK_EQ(h_getu(cr, "nodes"), 1023 + 4);
    if (CHECK(h_conn_open(&other, g_sock) == 0)) {
        large_fails(&other, &p, "EACCES", "node 0 (call): program");
        h_conn_close(&other);
    }

    h_section("connections that go while their define is checked");
    /* Each with a buffer of its own, so that its define is valid and only
     * the connection's end can stop it: the client hanging up (seen once
     * the check ends, as the daemon reads nothing else of that connection
     * meanwhile), then admin.kill_session while the check runs. */
    for (int mode = 0, tries = 0; mode < 2; tries++) {
        h_conn g;
        if (!CHECK(h_conn_open(&g, g_sock) == 0))
            break;
        const msgpack_object *gr;
        uint64_t gsid = 0, gbid = 0;
        msgpack_sbuffer_clear(&p);
        msgpack_packer hp;
        msgpack_packer_init(&hp, &p, msgpack_sbuffer_write);
        msgpack_pack_map(&hp, 1);
        pack_str(&hp, "protocol");
        msgpack_pack_uint64(&hp, 1);
        if (CHECK(h_conn_call(&g, 1, "hello", p.data, p.size, &gr, &err) == 1 && !err))
            gsid = h_getu(gr, "session");
        msgpack_sbuffer_clear(&p);
        msgpack_pack_map(&hp, 2);
        pack_str(&hp, "handle");
        msgpack_pack_bin(&hp, strlen(g_shm));
        msgpack_pack_bin_body(&hp, g_shm, strlen(g_shm));
        pack_str(&hp, "size");
        msgpack_pack_uint64(&hp, (uint64_t)NT * TBYTES);
        if (CHECK(h_conn_call(&g, 2, "buffer.register", p.data, p.size, &gr, &err) == 1 && !err))
            gbid = h_getu(gr, "id");
        msgpack_sbuffer_clear(&p);
        pack_define(&p, gbid, 102400, "gone");
        msgpack_sbuffer_clear(&req);
        h_pack_request(&req, 3, "program.define", p.data, p.size);
        CHECK(h_conn_send_sb(&g, &req) == 0);
        uint64_t checking = 0;
        bool ended = false;
        const msgpack_object *m;
        for (uint32_t i = 0; checking != 1 && !ended && i < 60000; i++) {
            if (h_conn_call(c, 700 + i, "stats", NULL, 0, &gr, &err) == 1 && !err)
                checking = h_getu(gr, "defines_checking");
            /* answered already: the check ran between two looks */
            ended = checking != 1 && h_conn_recv(&g, 1, &m) == 1;
            if (checking != 1 && !ended)
                h_sleep_ms(1);
        }
        if (checking != 1)
            h_note("mode %d: the define %s before stats saw it checked", mode,
                   ended ? "was answered" : "did not start");
        if (mode == 1 && ended) {
            /* a kill now would not land while the check runs: again */
            h_conn_close(&g);
            if (!CHECKF(tries < 5, "admin.kill_session landed while a define was checked"))
                break;
            continue;
        }
        if (mode == 0) {
            h_conn_close(&g);
        } else {
            msgpack_sbuffer_clear(&p);
            msgpack_pack_map(&hp, 1);
            pack_str(&hp, "id");
            msgpack_pack_uint64(&hp, gsid);
            if (CHECK(h_conn_call(c, 698, "admin.kill_session", p.data, p.size, &gr, &err) == 1 &&
                      !err))
                CHECK_EQ(h_getu(gr, "session"), gsid);
            int rc, nmsg = 0;
            /* the killed connection is told why (an ECONNABORTED error
             * notification), its define is never answered, then the end of
             * the stream */
            while ((rc = h_conn_recv(&g, 30000, &m)) == 1) {
                proto_msg pm;
                bool idok;
                char why[128], code[32] = "";
                if (proto_msg_decode(m, &pm, &idok, why, sizeof why) == 0 &&
                    pm.type == GG_MSG_NOTIFY)
                    h_gets(pm.params, "code", code, sizeof code);
                nmsg++;
                CHECKF(nmsg == 1 && strcmp(code, "ECONNABORTED") == 0,
                       "the killed connection's message %d is the ECONNABORTED notification "
                       "(got code '%s'), not an answer to its define", nmsg, code);
            }
            CHECKF(nmsg == 1, "the killed connection got the notification (%d messages)", nmsg);
            CHECK_EQ(rc, 0);
            h_conn_close(&g);
        }
        uint64_t left = UINT64_MAX;
        for (int i = 0; i < 600 && left != 0; i++) {   /* up to 60 s */
            if (h_conn_call(c, 800 + (uint32_t)i, "stats", NULL, 0, &gr, &err) == 1 && !err)
                left = h_getu(gr, "defines_checking");
            if (left != 0)
                h_sleep_ms(100);
        }
        CHECKF(left == 0, "mode %d: no define left checking (%llu)", mode,
               (unsigned long long)left);
        mode++;
    }
    const msgpack_object *r;
    CHECK(h_conn_call(c, 899, "program.list", NULL, 0, &r, &err) == 1 && !err &&
          h_get(r, "programs") && h_get(r, "programs")->via.array.size == 2);
    msgpack_sbuffer_destroy(&p);
    msgpack_sbuffer_destroy(&def);
    msgpack_sbuffer_destroy(&req);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(void)
{
    h_init("test_define_scale", 240);
    const char *bench = getenv("GG_DEFINE_SCALE_BENCH");
    int reps = bench && *bench == '1' ? 5 : 1;
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, NULL, NULL) == 0))
        return h_finish();
    g_sock = d.sock;

    char *shm = g_shm;
    h_unique(g_shm, sizeof g_shm, "/gg-defscale");
    int fd = shm_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)NT * TBYTES) == 0);
    if (fd >= 0)
        close(fd);

    h_conn c;
    if (!CHECK(h_conn_open(&c, d.sock) == 0))
        goto out;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    pack_str(&pk, "handle");
    msgpack_pack_bin(&pk, strlen(shm));
    msgpack_pack_bin_body(&pk, shm, strlen(shm));
    pack_str(&pk, "size");
    msgpack_pack_uint64(&pk, (uint64_t)NT * TBYTES);
    const msgpack_object *r, *err;
    uint64_t bid = 0;
    if (CHECK(h_conn_call(&c, 1, "buffer.register", sb.data, sb.size, &r, &err) == 1 && !err))
        bid = h_getu(r, "id");
    msgpack_sbuffer_clear(&sb);

    static const int sizes[] = {1024, 10240, 102400};
    uint32_t msgid = 10;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        char name[32];
        snprintf(name, sizeof name, "scale%d", sizes[si]);
        msgpack_sbuffer_clear(&sb);
        pack_define(&sb, bid, sizes[si], name);
        double best = 1e30;
        long long max_wait = 0;
        int during = 0;
        for (int rep = 0; rep < reps; rep++) {
            atomic_store(&g_stop, 0);
            atomic_store(&g_probe_sent, 0);
            atomic_store(&g_probe_ok, 0);
            atomic_store(&g_probe_max_us, 0);
            pthread_t th;
            pthread_create(&th, NULL, probe, NULL);
            /* health runs a smoke capture on a worker: on a loaded machine
             * its first answer can take a second */
            for (int i = 0; i < 6000 && atomic_load(&g_probe_ok) == 0; i++)
                h_sleep_ms(5);
            int before = atomic_load(&g_probe_ok);
            double t0 = now_ms();
            int rc = h_conn_call(&c, msgid++, "program.define", sb.data, sb.size, &r, &err);
            double t1 = now_ms();
            char code[32] = "";
            if (!CHECKF(rc == 1 && !err, "define of %d nodes: rc %d %s", sizes[si], rc,
                       err ? h_err_code(err, code, sizeof code) : "")) {
                if (err) {
                    char m[512];
                    h_note("%s", h_gets(err, "message", m, sizeof m));
                }
            }
            uint64_t pid = rc == 1 && !err ? h_getu(r, "id") : 0;
            /* and a health answer after the define's */
            int at_end = atomic_load(&g_probe_ok);
            for (int i = 0; i < 12000 && atomic_load(&g_probe_ok) == at_end; i++)
                h_sleep_ms(5);
            CHECKF(atomic_load(&g_probe_ok) > at_end, "health answered after the define");
            atomic_store(&g_stop, 1);
            pthread_join(th, NULL);
            CHECKF(before > 0, "health answered before the define");
            CHECK_EQ(atomic_load(&g_probe_ok), atomic_load(&g_probe_sent));
            during += atomic_load(&g_probe_ok) - before;
            if (t1 - t0 < best)
                best = t1 - t0;
            if (atomic_load(&g_probe_max_us) > max_wait)
                max_wait = atomic_load(&g_probe_max_us);
            if (pid) {
                msgpack_sbuffer rs;
                msgpack_sbuffer_init(&rs);
                msgpack_packer rp;
                msgpack_packer_init(&rp, &rs, msgpack_sbuffer_write);
                msgpack_pack_map(&rp, 1);
                pack_str(&rp, "id");
                msgpack_pack_uint64(&rp, pid);
                CHECK(h_conn_call(&c, msgid++, "program.release", rs.data, rs.size, &r, &err) == 1
                      && !err);
                msgpack_sbuffer_destroy(&rs);
            }
        }
        h_note("define of %6d nodes (%d tensors, %zu bytes): %.1f ms (define call round trip, "
               "best of %d); longest health wait meanwhile %.2f ms; %d health answers after it "
               "began", sizes[si], NT, sb.size, best, reps, max_wait / 1000.0, during);
    }
    msgpack_sbuffer_destroy(&sb);
    off_the_loop(&c, bid);
    h_conn_close(&c);
out:
    shm_unlink(shm);
    h_daemon_stop(&d);
    return h_finish();
}
