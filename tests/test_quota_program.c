/* SPDX-License-Identifier: MIT */
/* max-program-bytes-per-uid: the memory a program's expansion holds.
 *  - a define of a few hundred bytes whose two branches call a 1,023-node,
 *    1,024-tensor program holds the callee's nodes and tensors twice over;
 *    repeated, it is refused EDQUOT naming the setting well before 600
 *    (the daemon used to accept them up to max-programs-per-uid), each refusal giving the
 *    same figures; the define's answer says the expansion happened (its
 *    node count is the callees'); releasing one makes room for exactly one;
 *    another uid still defines; the scratch quota is not what refused it;
 *  - the default, auto, is an eighth of RAM: the daemon logs the figure it
 *    came to, and it is the machine's. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_quota_util.h"

#define NT 1024          /* the callee's tensors, t0000 .. t1023 */
#define ROWB 16          /* a row of [batch, 4] f32 */
#define TOP 8            /* the largest bucket */
#define TBYTES (ROWB * TOP)
#define LIMIT (8ULL << 20)

static const char *g_sock;

static void pack_buckets(msgpack_packer *pk)
{
    q_str(pk, "buckets");
    msgpack_pack_array(pk, 4);
    for (int b = 1; b <= TOP; b *= 2)
        msgpack_pack_int(pk, b);
}

static void pack_tensor(msgpack_packer *pk, const char *name, uint64_t bid, uint64_t off)
{
    q_str(pk, name);
    msgpack_pack_map(pk, 4);
    proto_pack_kv_u64(pk, "buffer", bid);
    proto_pack_kv_u64(pk, "offset", off);
    proto_pack_kv_str(pk, "dtype", "f32");
    q_str(pk, "shape");
    msgpack_pack_array(pk, 2);
    q_str(pk, "batch");
    msgpack_pack_int(pk, 4);
}

/* program.define of params p: the id and the result's node count, or 0
 * with the error code and message. */
static uint64_t define(h_conn *c, mp *p, uint64_t *nodes, char *code, size_t clen, char *msg,
                       size_t mlen)
{
    const msgpack_object *r = NULL, *err = NULL;
    uint64_t id = 0;
    code[0] = msg[0] = '\0';
    if (call(c, q_id++, "program.define", p, &r, &err) == 1) {
        if (!err && r) {
            id = h_getu(r, "id");
            if (nodes)
                *nodes = h_getu(r, "nodes");
        } else if (err) {
            h_err_code(err, code, clen);
            h_gets(err, "message", msg, mlen);
        }
    }
    return id;
}

/* The callee: a chain of NT - 1 copies through NT buffer tensors. */
static uint64_t define_callee(h_conn *c, uint64_t bid, char *code, size_t clen, char *msg,
                              size_t mlen)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 4);
    q_str(&p.pk, "name");
    q_str(&p.pk, "layer");
    pack_buckets(&p.pk);
    q_str(&p.pk, "tensors");
    msgpack_pack_map(&p.pk, NT);
    char n[16], m[16];
    for (int t = 0; t < NT; t++) {
        snprintf(n, sizeof n, "t%04d", t);
        pack_tensor(&p.pk, n, bid, (uint64_t)t * TBYTES);
    }
    q_str(&p.pk, "nodes");
    msgpack_pack_array(&p.pk, NT - 1);
    for (int i = 0; i + 1 < NT; i++) {
        snprintf(n, sizeof n, "t%04d", i);
        snprintf(m, sizeof m, "t%04d", i + 1);
        msgpack_pack_map(&p.pk, 3);
        proto_pack_kv_str(&p.pk, "op", "copy");
        q_str(&p.pk, "inputs");
        msgpack_pack_array(&p.pk, 1);
        q_str(&p.pk, n);
        q_str(&p.pk, "outputs");
        msgpack_pack_array(&p.pk, 1);
        q_str(&p.pk, m);
    }
    uint64_t nodes = 0, id = define(c, &p, &nodes, code, clen, msg, mlen);
    mp_free(&p);
    CHECKF(!id || nodes == NT - 1, "the callee has %d nodes (got %" PRIu64 ")", NT - 1, nodes);
    return id;
}

/* The caller: one tensor of its own past the callee's, and two branches,
 * each one call of the callee.  *wire: its params' size in bytes. */
static uint64_t define_caller(h_conn *c, uint64_t bid, uint64_t callee, uint64_t *nodes,
                              size_t *wire, char *code, size_t clen, char *msg, size_t mlen)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 4);
    q_str(&p.pk, "name");
    q_str(&p.pk, "caller");
    pack_buckets(&p.pk);
    q_str(&p.pk, "tensors");
    msgpack_pack_map(&p.pk, 1);
    pack_tensor(&p.pk, "own", bid, (uint64_t)NT * TBYTES);
    q_str(&p.pk, "branches");
    msgpack_pack_array(&p.pk, 2);
    for (int b = 0; b < 2; b++) {
        msgpack_pack_array(&p.pk, 1);
        msgpack_pack_map(&p.pk, 2);
        proto_pack_kv_str(&p.pk, "op", "call");
        proto_pack_kv_u64(&p.pk, "program", callee);
    }
    if (wire)
        *wire = p.sb.size;
    uint64_t id = define(c, &p, nodes, code, clen, msg, mlen);
    mp_free(&p);
    return id;
}

/* "... : HAVE held + ADD more is past the limit of LIMIT ..." */
static bool parse_quota(const char *msg, uint64_t *have, uint64_t *add, uint64_t *limit)
{
    const char *s = strstr(msg, ": ");
    unsigned long long h, a, l;
    while (s) {
        if (sscanf(s, ": %llu held + %llu more is past the limit of %llu", &h, &a, &l) == 3) {
            *have = h;
            *add = a;
            *limit = l;
            return true;
        }
        s = strstr(s + 1, ": ");
    }
    return false;
}

static void user_defines(void *arg)
{
    (void)arg;
    char shm[64], code[32], msg[512];
    if (!CHECK(q_shm(shm, sizeof shm, 1 << 20)))
        return;
    h_conn c;
    if (CHECK(h_conn_open(&c, g_sock) == 0) && hello(&c, 1)) {
        uint64_t b = q_register(&c, shm, 0, 64 << 10, code, sizeof code, msg, sizeof msg);
        CHECKF(b != 0, "another uid registers (%s %s)", code, msg);
        CHECKF(b && q_define(&c, b, "user", 1, code, sizeof code, msg, sizeof msg) != 0,
               "another uid defines while root is at its program bytes (%s %s)", code, msg);
        h_conn_close(&c);
    }
    shm_unlink(shm);
}

static void release(h_conn *c, uint64_t id)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_u64(&p.pk, "id", id);
    const msgpack_object *r;
    CHECK(call_ok(c, q_id++, "program.release", &p, &r));
    mp_free(&p);
}

static void expansion_case(void)
{
    h_section("small defines that expand to large programs: EDQUOT past max-program-bytes-per-uid");
    const char *args[] = {"--set", "max-program-bytes-per-uid=8M", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, NULL) == 0))
        return;
    q_open_socket(&d);
    g_sock = d.sock;
    char shm[64], code[32], msg[600];
    if (!CHECK(q_shm(shm, sizeof shm, 1 << 20))) {
        h_daemon_stop(&d);
        return;
    }
    h_conn c;
    if (CHECK(h_conn_open(&c, d.sock) == 0) && hello(&c, 1)) {
        uint64_t bid = q_register(&c, shm, 0, 1 << 20, code, sizeof code, msg, sizeof msg);
        uint64_t callee = bid ? define_callee(&c, bid, code, sizeof code, msg, sizeof msg) : 0;
        CHECKF(callee != 0, "the callee is defined (%s %s)", code, msg);
        static uint64_t ids[600];
        int ok = 0;
        size_t wire = 0;
        uint64_t nodes = 0;
        bool refused = false;
        /* the daemon used to take them up to max-programs-per-uid (4096): a
         * limit on their memory must stop it well before */
        while (callee && ok < 600 && !refused) {
            uint64_t n = 0;
            ids[ok] = define_caller(&c, bid, callee, &n, &wire, code, sizeof code, msg,
                                    sizeof msg);
            if (ids[ok]) {
                nodes = n;
                ok++;
            } else {
                refused = true;
            }
        }
        CHECKF(refused, "a caller refused after %d accepted", ok);
        CHECK_STR(code, "EDQUOT");
        CHECK_CONTAINS(msg, "max-program-bytes-per-uid");
        CHECK(strstr(msg, "max-scratch-bytes-per-uid") == NULL);
        CHECKF(ok >= 2 && ok < 600, "%d callers accepted before EDQUOT", ok);
        /* the expansion happened: each caller holds both calls' nodes */
        CHECKF(nodes == 2 * (NT - 1), "a caller has %d nodes (got %" PRIu64 ")", 2 * (NT - 1),
               nodes);
        uint64_t have = 0, add = 0, limit = 0;
        CHECKF(parse_quota(msg, &have, &add, &limit), "figures in: %s", msg);
        CHECK_EQ(limit, LIMIT);
        CHECKF(have <= limit && have + add > limit, "%" PRIu64 " held + %" PRIu64 " past %" PRIu64,
               have, add, limit);
        /* what a caller holds is its expansion, not its few bytes on the wire */
        CHECKF(add > 1000 * (uint64_t)wire, "a %zu-byte define counted %" PRIu64 " bytes", wire,
               add);
        /* every caller is counted alike: held is the callee plus ok of them,
         * and the callee (one chain, not two) holds less than a caller */
        CHECKF(have > (uint64_t)ok * add && have < (uint64_t)(ok + 1) * add,
               "%" PRIu64 " held for %d callers of %" PRIu64 " and the callee", have, ok, add);
        h_note("a %zu-byte define holds %" PRIu64 " bytes; %d accepted under 8 MiB", wire, add,
               ok);

        h_section("another uid is not affected");
        static const char *const need[] = {NULL};
        h_as_user("test_quota_program (as a user)", user_defines, NULL, need);

        h_section("releasing one caller makes room for one");
        if (ok >= 1) {
            release(&c, ids[ok - 1]);
            uint64_t again = define_caller(&c, bid, callee, NULL, NULL, code, sizeof code, msg,
                                           sizeof msg);
            CHECKF(again != 0, "a caller fits again (%s %s)", code, msg);
            define_caller(&c, bid, callee, NULL, NULL, code, sizeof code, msg, sizeof msg);
            CHECK_STR(code, "EDQUOT");
            uint64_t have2 = 0, add2 = 0, limit2 = 0;
            CHECK(parse_quota(msg, &have2, &add2, &limit2));
            CHECKF(have2 == have && add2 == add, "the same figures (%" PRIu64 " + %" PRIu64 ")",
                   have2, add2);
        }
        CHECK(stats_ok(&c, q_id++));
        h_conn_close(&c);
    }
    shm_unlink(shm);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

static void auto_case(void)
{
    h_section("max-program-bytes-per-uid auto: an eighth of RAM");
    long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    if (!CHECK(pages > 0 && pg > 0))
        return;
    uint64_t want = (uint64_t)pages * (uint64_t)pg / 8;
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, NULL, NULL) == 0))
        return;
    /* the log is written by a thread of its own: wait for the line */
    char line[128];
    snprintf(line, sizeof line, "max-program-bytes-per-uid auto: %" PRIu64 " bytes", want);
    bool seen = false;
    for (int64_t end = h_now_ms() + 60000; !seen && h_now_ms() < end;) {
        char *log = h_read_file(d.log);
        seen = log && strstr(log, "max-program-bytes-per-uid auto: ");
        if (seen)
            CHECKF(strstr(log, line) != NULL, "logged: %s (want %" PRIu64 ")",
                   strstr(log, "max-program-bytes-per-uid auto: "), want);
        free(log);
        if (!seen)
            h_sleep_ms(20);
    }
    CHECKF(seen, "the daemon logs the figure auto came to");
    CHECK_EQ(h_daemon_stop(&d), 0);
}

int main(void)
{
    h_init("test_quota_program", 280);
    expansion_case();
    auto_case();
    return h_finish();
}
