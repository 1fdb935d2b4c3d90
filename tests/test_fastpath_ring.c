/* SPDX-License-Identifier: MIT */
/* The fast path's ring as a client that does not play by the rules sees it
 * (PROTOCOL.md section 15), through fpr, a raw region client that writes the
 * bytes itself (test_fastpath_util.h).
 *
 * descriptors: the region's header as the spec lays it out; a good
 * descriptor's record (status 0, flags, bucket, batch, user_data, outputs),
 * a hit, ASYNC and TIMED; then each error completes its record with the
 * spec's status and a reason: wrong seq (EPROTO, the record carries the
 * expected seq), unknown flag, reserved bytes, batch 0 and > 65536, branch
 * out of range (EINVAL), another session's program (EACCES), an unknown
 * program or event (ENOENT), a batch above max_batch (ERANGE); a full ring
 * pipelined, the ring wrapping; stats counts the errors; then a broken ring
 * (sq_tail more than entries ahead): the region closes (state 2), the
 * session goes on over the socket, and the daemon says why in its log.
 *
 * scribbler: a child process opens a region and, for about 1.5 s, writes
 * random bytes over all of it (header, rings, records, futex words), writes
 * garbage descriptors (some with its own or another session's program, some
 * with the right seq), moves sq_tail anywhere, rings the doorbell, and opens
 * a new region when the daemon has closed its old one; meanwhile a normal
 * client replays and checks every result.  Afterwards the daemon is alive
 * and answers, the normal client saw no error and only right values, the
 * scribbler's session saw errors or closed regions, and the daemon's log
 * shows no crash. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_fastpath_util.h"

#define D 8
#define ROWS 4

/* shm buffers for a raw session */
typedef struct {
    char nx[64], ny[64];
    float *x, *y;
    size_t bytes;
} rbufs;

static bool rbufs_new(rbufs *b, size_t floats)
{
    memset(b, 0, sizeof *b);
    b->bytes = floats * sizeof(float);
    h_unique(b->nx, sizeof b->nx, "/ggtest-fpring-x");
    h_unique(b->ny, sizeof b->ny, "/ggtest-fpring-y");
    return CHECK(gg_client_shm_create(b->nx, b->bytes, (void **)&b->x) == 0) &&
           CHECK(gg_client_shm_create(b->ny, b->bytes, (void **)&b->y) == 0);
}

static void rbufs_free(rbufs *b)
{
    if (b->x)
        gg_client_shm_destroy(b->nx, b->x, b->bytes);
    if (b->y)
        gg_client_shm_destroy(b->ny, b->y, b->bytes);
    b->x = b->y = NULL;
}

/* A raw session with y = 2x (buckets 1, 2, 4; max_batch 4). */
static uint64_t raw_session(fpr *f, const char *sock, const char *name, rbufs *b)
{
    if (!fpr_connect(f, sock, name) || !rbufs_new(b, ROWS * D))
        return 0;
    uint64_t bx = fpr_register(f, b->nx, b->bytes), by = fpr_register(f, b->ny, b->bytes);
    if (!bx || !by)
        return 0;
    return fpr_define_scale(f, "double", bx, by, D, 2.0);
}

static gg_fp_sqe sqe(uint64_t prog, uint32_t batch, uint64_t user)
{
    gg_fp_sqe d;
    memset(&d, 0, sizeof d);
    d.program = prog;
    d.batch = batch;
    d.user_data = user;
    return d;
}

/* Submit one descriptor and wait for its record (5 s); false after a failed
 * check. */
static bool one(fpr *f, const gg_fp_sqe *d, uint64_t seq_override, gg_fp_cqe *q, uint64_t *seq)
{
    uint64_t s = fpr_submit(f, d, seq_override);
    if (seq)
        *seq = s;
    int rc = fpr_wait(f, s, 60000, q);
    return CHECKF(rc == 1, "the record of descriptor %llu completes (%d)", (unsigned long long)s,
                  rc);
}

static void expect_error(fpr *f, const char *what, const gg_fp_sqe *d, uint64_t seq_override,
                         int status, const char *reason_part)
{
    gg_fp_cqe q;
    uint64_t seq;
    if (!one(f, d, seq_override, &q, &seq))
        return;
    CHECKF(q.status == status && q.seq == seq && q.user_data == d->user_data,
           "%s: status %d (%s), seq %llu, user_data echoed (got status %d, seq %llu, user_data "
           "%#llx, reason \"%s\")", what, status, proto_errno_code(status),
           (unsigned long long)seq, q.status, (unsigned long long)q.seq,
           (unsigned long long)q.user_data, q.reason);
    CHECKF(q.flags == 0 && q.bucket == 0, "%s: an error record has no flags and bucket 0 (%#x, "
           "%u)", what, q.flags, q.bucket);
    CHECKF(reason_part && strstr(q.reason, reason_part), "%s: the reason says why (\"%s\", want "
           "\"%s\" in it)", what, q.reason, reason_part ? reason_part : "");
}

static bool header_zero_elsewhere(const uint8_t *h)
{
    /* the fields of the spec's header table; every other byte is 0 */
    static const struct {
        unsigned off, len;
    } fields[] = {{0, 8}, {8, 4}, {12, 4}, {16, 4}, {20, 4}, {24, 8}, {32, 4}, {36, 4},
                  {40, 8}, {64, 4}, {128, 4}, {192, 4}, {196, 4}, {256, 4}, {320, 4}, {324, 4}};
    for (unsigned i = 0; i < 512; i++) {
        bool known = false;
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
            known |= i >= fields[k].off && i < fields[k].off + fields[k].len;
        if (!known && h[i] != 0) {
            h_note("header byte %u is %#x", i, h[i]);
            return false;
        }
    }
    return true;
}

/* ---- the error records ----------------------------------------------------- */

static void test_descriptors(void)
{
    h_section("descriptors: good ones, each error's record, a broken ring");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    fpr f;
    rbufs b;
    memset(&b, 0, sizeof b);
    gg_client *other = fp_client(d.sock, "fp-other");
    tbuf ox = {0}, oy = {0};
    uint64_t oprog = 0;
    if (other && tbuf_new(other, &ox, ROWS * D) && tbuf_new(other, &oy, ROWS * D))
        oprog = t_define_silu2x(other, "others", ox.id, oy.id, D);
    uint64_t prog = raw_session(&f, d.sock, "fp-raw", &b);
    if (!prog || !oprog || !CHECK(fpr_open_region(&f, 8) == 1))
        goto out;

    /* the header */
    gg_fp_header *h = f.hdr;
    CHECK(memcmp(h->magic, "GGFPATH1", 8) == 0);
    CHECK_EQ(h->version, 1);
    CHECK_EQ(h->entries, 8);
    CHECK_EQ(h->sqe_size, 64);
    CHECK_EQ(h->cqe_size, 256);
    CHECK_EQ(h->sq_offset, 512);
    CHECK_EQ(h->cq_offset, 512 + 8 * 64);
    CHECK_EQ(h->region_size, 4096);
    CHECK_EQ(h->session, f.session);
    CHECK_EQ(h->state, 1);
    CHECK_EQ(h->sq_tail, 0);
    CHECK_EQ(h->sq_head, 0);
    CHECK(header_zero_elsewhere(f.base));
    int nz = 0;
    for (size_t i = 512; i < f.size; i++)
        nz += f.base[i] != 0;
    CHECKF(nz == 0, "the rings start zeroed (%d bytes not)", nz);
    /* a second open on the session */
    CHECK(fpr_open_region(&f, 8) == 0 && strcmp(f.code, "EEXIST") == 0);
    uint64_t err0 = 0, fpr0 = 0;
    const msgpack_object *st = NULL;
    if (CHECK(fpr_call(&f, "stats", NULL, &st) == 1)) {
        err0 = h_getu(fp_session_of(st, f.session), "errors");
        fpr0 = h_getu(st, "fastpath_replays");
    }

    /* good descriptors */
    for (int i = 0; i < ROWS * D; i++) {
        b.x[i] = (float)i - 7.5f;
        b.y[i] = -99.0f;
    }
    gg_fp_cqe q;
    gg_fp_sqe g = sqe(prog, 3, 0xabcdef01);
    if (one(&f, &g, 0, &q, NULL)) {
        CHECKF(q.status == 0 && q.bucket == 4 && q.batch == 3 && q.branch == 0 &&
                   q.user_data == 0xabcdef01 && q.reason[0] == '\0',
               "first replay: status 0, bucket 4, batch 3, user_data (%d, %u, %u, %#llx, \"%s\")",
               q.status, q.bucket, q.batch, (unsigned long long)q.user_data, q.reason);
        CHECKF((q.flags & (GG_FP_CQE_EAGER | GG_FP_CQE_FALLBACK | GG_FP_CQE_CAPTURED |
                           GG_FP_CQE_GPU | GG_FP_CQE_ASYNC)) == GG_FP_CQE_CAPTURED,
               "first replay: graph, captured, not GPU (flags %#x)", q.flags);
        int bad = 0;
        for (int i = 0; i < ROWS * D; i++)
            bad += b.y[i] != (i < 3 * D ? 2.0f * b.x[i] : i < 4 * D ? b.y[i] : -99.0f);
        CHECKF(bad == 0 && b.y[0] == -15.0f, "y = 2x for the batch's rows (%d wrong)", bad);
    }
    g.user_data = 7;
    if (one(&f, &g, 0, &q, NULL))
        CHECKF(q.status == 0 && q.bucket == 4 &&
                   (q.flags & ~GG_FP_CQE_TIMED) == 0 && q.user_data == 7,
               "a hit: graph, not captured, completed by the daemon's thread on cpu (flags %#x)",
               q.flags);
    g.flags = GG_FP_SQE_TIMED;
    if (one(&f, &g, 0, &q, NULL))
        CHECKF(q.status == 0 && (q.flags & GG_FP_CQE_TIMED) && !(q.flags & GG_FP_CQE_GPU),
               "TIMED: the record says TIMED (flags %#x)", q.flags);
    g.flags = GG_FP_SQE_ASYNC;
    if (one(&f, &g, 0, &q, NULL))
        CHECKF(q.status == 0 && (q.flags & GG_FP_CQE_ASYNC) && q.device_us == 0.0,
               "ASYNC: the record says ASYNC, device_us 0 (flags %#x, %g)", q.flags, q.device_us);
    g.flags = 0;

    /* errors; each record's status, reason and user_data */
    int nerr = 0;
    gg_fp_sqe e = sqe(prog, 1, 0x1001);
    expect_error(&f, "wrong seq", &e, 1000, -EPROTO, "seq"), nerr++;
    e = sqe(prog, 1, 0x1002);
    e.flags = 0x4;
    expect_error(&f, "unknown flag 0x4", &e, 0, -EINVAL, "flags"), nerr++;
    e.flags = 0x80000000u;
    expect_error(&f, "unknown flag 0x80000000", &e, 0, -EINVAL, "flags"), nerr++;
    e = sqe(prog, 1, 0x1003);
    e.reserved0 = 1;
    expect_error(&f, "reserved0 nonzero", &e, 0, -EINVAL, "reserved"), nerr++;
    e = sqe(prog, 1, 0x1004);
    e.reserved1 = 1ull << 63;
    expect_error(&f, "reserved1 nonzero", &e, 0, -EINVAL, "reserved"), nerr++;
    e = sqe(oprog, 1, 0x1005);
    expect_error(&f, "another session's program", &e, 0, -EACCES, "session"), nerr++;
    e = sqe(987654, 1, 0x1006);
    expect_error(&f, "unknown program", &e, 0, -ENOENT, "987654"), nerr++;
    e = sqe(0, 1, 0x1007);
    expect_error(&f, "program 0", &e, 0, -ENOENT, "0"), nerr++;
    e = sqe(prog, 0, 0x1008);
    expect_error(&f, "batch 0", &e, 0, -EINVAL, "batch"), nerr++;
    e = sqe(prog, 65537, 0x1009);
    expect_error(&f, "batch 65537", &e, 0, -EINVAL, "batch"), nerr++;
    e = sqe(prog, 1, 0x100a);
    e.branch = 1;
    expect_error(&f, "branch 1 of a one-branch program", &e, 0, -EINVAL, "branch"), nerr++;
    e = sqe(prog, 5, 0x100b);
    expect_error(&f, "batch 5 above max_batch 4", &e, 0, -ERANGE, "5"), nerr++;
    e = sqe(prog, 1, 0x100c);
    e.wait_event = 424242;
    expect_error(&f, "unknown wait_event", &e, 0, -ENOENT, "424242"), nerr++;
    e = sqe(prog, 1, 0x100d);
    e.signal_event = 434343;
    expect_error(&f, "unknown signal_event", &e, 0, -ENOENT, "434343"), nerr++;

    /* after all that a good one still works, and a full ring pipelined */
    tbuf_fill(&(tbuf){.f = b.y, .size = b.bytes}, -99.0f);
    g.user_data = 0x2000;
    if (one(&f, &g, 0, &q, NULL))
        CHECKF(q.status == 0 && b.y[2 * D + 1] == 2.0f * b.x[2 * D + 1],
               "a good descriptor after the errors works (status %d)", q.status);
    uint64_t seqs[8];
    for (int i = 0; i < 8; i++) {
        gg_fp_sqe p = sqe(prog, (uint32_t)(1 + i % 4), 0x3000 + (uint64_t)i);
        seqs[i] = fpr_submit(&f, &p, 0);
    }
    int okp = 0;
    for (int i = 0; i < 8; i++)
        okp += fpr_wait(&f, seqs[i], 60000, &q) == 1 && q.status == 0 &&
               q.user_data == 0x3000 + (uint64_t)i && q.batch == (uint32_t)(1 + i % 4);
    CHECKF(okp == 8, "8 descriptors in flight at once (a full ring) all complete (%d)", okp);
    CHECK_EQ(__atomic_load_n(&h->sq_head, __ATOMIC_ACQUIRE), (uint32_t)(f.next_seq - 1));
    int good = 4 + 1 + 8;
    /* the last hit may be counted just after its completion */
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end; h_sleep_ms(5))
        if (fpr_call(&f, "stats", NULL, &st) == 1 &&
            h_getu(fp_session_of(st, f.session), "replays") == (uint64_t)good)
            break;
    if (CHECK(fpr_call(&f, "stats", NULL, &st) == 1)) {
        const msgpack_object *se = fp_session_of(st, f.session);
        CHECKF(h_getu(se, "errors") - err0 == (uint64_t)nerr,
               "the session counts each error record (%llu, want %d)",
               (unsigned long long)(h_getu(se, "errors") - err0), nerr);
        CHECK_EQ(h_getu(se, "replays"), good);
        CHECK_EQ(fp_session_fastpath(st, f.session), 1);
        h_note("fastpath_replays counted %llu of %d good and %d failed descriptors",
               (unsigned long long)(h_getu(st, "fastpath_replays") - fpr0), good, nerr);
        CHECK(h_getu(st, "fastpath_replays") - fpr0 >= (uint64_t)good);
    }

    /* a broken ring: sq_tail more than entries ahead of sq_head */
    uint32_t head = __atomic_load_n(&h->sq_head, __ATOMIC_ACQUIRE);
    __atomic_store_n(&h->sq_tail, head + f.entries + 3, __ATOMIC_RELEASE);
    __atomic_fetch_add(&h->sq_wake, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &h->sq_wake, FUTEX_WAKE, 1, NULL, NULL, 0);
    uint32_t state = 0;
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end;) {
        state = __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
        if (state == GG_FP_STATE_CLOSED)
            break;
        h_sleep_ms(2);
    }
    CHECKF(state == GG_FP_STATE_CLOSED, "a broken ring is closed: state 2 (%u)", state);
    if (CHECK(fpr_call(&f, "stats", NULL, &st) == 1)) {
        CHECKF(fp_session_of(st, f.session) != NULL, "the session goes on over the socket");
        uint64_t regions = h_getu(st, "fastpath_regions");
        for (int64_t end = h_now_ms() + 60000; regions != 0 && h_now_ms() < end;) {
            h_sleep_ms(5);
            if (fpr_call(&f, "stats", NULL, &st) == 1)
                regions = h_getu(st, "fastpath_regions");
        }
        CHECK_EQ(regions, 0);
        CHECK_EQ(fp_session_fastpath(st, f.session), 0);
    }
    /* the log is written by a thread of its own: wait for the record */
    bool closed = false;
    for (int64_t end = h_now_ms() + 60000; !closed && h_now_ms() < end;) {
        char *log = h_read_file(d.log);
        closed = strstr(log, "fast path closed") != NULL;
        free(log);
        if (!closed)
            h_sleep_ms(20);
    }
    CHECKF(closed, "the daemon logged \"fast path closed\"");
    /* the session still works over the socket; a new region may be asked for
     * (the spec does not say): note what happens */
    munmap(f.base, f.size);
    f.base = NULL;
    int re = fpr_open_region(&f, 8);
    h_note("fastpath.open after the daemon closed the session's region: %s",
           re == 1 ? "a new region" : re == 0 ? f.code : "failed");
    if (re == 1) {
        g.user_data = 0x4000;
        if (one(&f, &g, 0, &q, NULL))
            CHECKF(q.status == 0 && q.user_data == 0x4000, "the new region works (%d)", q.status);
    }
out:
    fpr_close(&f);
    rbufs_free(&b);
    tbuf_free(&ox);
    tbuf_free(&oy);
    gg_client_close(other);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

/* ---- the scribbler ------------------------------------------------------------ */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

typedef struct {
    int regions;         /* regions opened */
    int socket_ok;       /* socket calls that worked after scribbling */
    uint64_t errors;     /* the session's errors per stats at the end */
    uint64_t requests;
    int closed_seen;     /* stats said the session's region was gone */
} scrib_report;

/* The child: runs for ms milliseconds, then writes its report to wfd. */
/* Whether the parent has said "enough" on rfd (or is gone). */
static bool parent_done(int rfd)
{
    struct pollfd p = {.fd = rfd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

/* Scribbles for at least ms, and on until the parent has had its replays
 * beside it (a byte on rfd). */
static void scribbler(const char *sock, uint64_t other_prog, int ms, int wfd, int rfd)
{
    h_init("scribbler", 120);
    scrib_report rep = {0};
    fpr f;
    rbufs b;
    memset(&b, 0, sizeof b);
    rng_state ^= (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
    uint64_t prog = raw_session(&f, sock, "scribbler", &b);
    if (prog && fpr_open_region(&f, 16) == 1)
        rep.regions++;
    int64_t end = h_now_ms() + ms, next_check = h_now_ms() + 100;
    int64_t opened = h_now_ms();
    while (f.base && (h_now_ms() < end || !parent_done(rfd))) {
        uint64_t *w = (uint64_t *)f.base;
        size_t nw = f.size / 8;
        /* for its first 60 ms a region gets garbage that keeps the ring's
         * indices in range (so descriptors are taken and fail); then
         * anything */
        bool wild = h_now_ms() - opened > 60;
        uint64_t r = rnd() % 64;
        if (r < 40) { /* a garbage descriptor, often nearly right */
            gg_fp_sqe d;
            uint64_t *dw = (uint64_t *)&d;
            for (int i = 0; i < 8; i++)
                dw[i] = rnd();
            uint64_t k = rnd();
            if (k % 3) {
                d.program = k % 4 == 1 ? prog : k % 4 == 2 ? other_prog : d.program % 64;
                d.batch = (uint32_t)(rnd() % 6);
                d.branch = (uint32_t)(rnd() % 2);
                d.flags = (uint32_t)(rnd() % 8);
                d.reserved0 = rnd() % 4 == 0;
                d.reserved1 = 0;
                d.wait_event = rnd() % 4 == 0 ? rnd() % 64 : 0;
                d.signal_event = 0;
            }
            uint32_t head = __atomic_load_n(&f.hdr->sq_head, __ATOMIC_RELAXED);
            uint64_t seq = (uint64_t)head + 1 + rnd() % 4;
            if (k % 5)
                d.seq = seq;
            uint32_t tail = wild && k % 7 == 0 ? (uint32_t)rnd() : (uint32_t)(seq + rnd() % 3);
            fpr_put(&f, seq, &d, tail);
        } else if (r < 50) { /* random words in the rings */
            for (int i = 0; i < 16; i++)
                __atomic_store_n(&w[64 + rnd() % (nw - 64)], rnd(), __ATOMIC_RELAXED);
        } else if (r < 52) { /* random words in the header but sq_tail's */
            for (int i = 0; i < 8; i++) {
                size_t at = rnd() % 64;
                /* tame: not sq_tail, sq_head, sq_sleeping/sq_wake */
                if (wild || (at != 8 && at != 16 && at != 24))
                    __atomic_store_n(&w[at], rnd(), __ATOMIC_RELAXED);
            }
        } else if (r < 54 && wild) { /* the daemon's words */
            __atomic_store_n(&f.hdr->state, (uint32_t)rnd(), __ATOMIC_RELAXED);
            __atomic_store_n(&f.hdr->sq_head, (uint32_t)rnd(), __ATOMIC_RELAXED);
            __atomic_store_n(&f.hdr->sq_sleeping, (uint32_t)rnd(), __ATOMIC_RELAXED);
            __atomic_store_n(&f.hdr->cq_waiters, (uint32_t)rnd(), __ATOMIC_RELAXED);
            __atomic_store_n(&f.hdr->cq_wake, (uint32_t)rnd(), __ATOMIC_RELAXED);
        } else if (r < 58) { /* the doorbell, without submitting */
            __atomic_fetch_add(&f.hdr->sq_wake, 1, __ATOMIC_SEQ_CST);
            syscall(SYS_futex, &f.hdr->sq_wake, FUTEX_WAKE, 1, NULL, NULL, 0);
        } else if (r < 60 && wild) {
            if (r == 58) /* sq_tail anywhere */
                __atomic_store_n(&f.hdr->sq_tail, (uint32_t)rnd(), __ATOMIC_RELEASE);
            else if (rnd() % 8 == 0) /* the whole region */
                for (size_t i = 0; i < nw; i++)
                    __atomic_store_n(&w[i], rnd(), __ATOMIC_RELAXED);
        } else {
            sched_yield();
        }
        if (h_now_ms() >= next_check) {
            /* a closed region: ask for another one and scribble on that */
            next_check = h_now_ms() + 100;
            const msgpack_object *st = NULL;
            if (fpr_call(&f, "stats", NULL, &st) == 1 && fp_session_fastpath(st, f.session) == 0) {
                rep.closed_seen++;
                munmap(f.base, f.size);
                f.base = NULL;
                int rc = fpr_open_region(&f, 16);
                if (rc == 1) {
                    rep.regions++;
                    opened = h_now_ms();
                }
                else if (rc == 0 && strcmp(f.code, "EEXIST") == 0)
                    /* not gone yet */
                    f.base = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
                    f.size = 4096, f.hdr = (gg_fp_header *)f.base,
                    f.sq = (gg_fp_sqe *)(f.base + 512), f.cq = (gg_fp_cqe *)(f.base + 1024),
                    f.mask = 0;
            }
        }
    }
    /* the socket still answers */
    const msgpack_object *st = NULL;
    for (int i = 0; i < 3; i++)
        if (fpr_call(&f, "stats", NULL, &st) == 1) {
            rep.socket_ok++;
            rep.errors = h_getu(fp_session_of(st, f.session), "errors");
            rep.requests = h_getu(fp_session_of(st, f.session), "requests");
            if (fp_session_fastpath(st, f.session) == 0)
                rep.closed_seen++;
        }
    if (write(wfd, &rep, sizeof rep) != (ssize_t)sizeof rep)
        _exit(3);
    fpr_close(&f);
    rbufs_free(&b);
    _exit(h_fail ? 1 : 0);
}

static void test_scribbler(void)
{
    h_section("a client scribbling over its whole region while another replays");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    gg_client *c = fp_client(d.sock, "fp-normal");
    tbuf x = {0}, y = {0};
    uint64_t prog = 0;
    if (c && tbuf_new(c, &x, ROWS * D) && tbuf_new(c, &y, ROWS * D))
        prog = t_define_silu2x(c, "normal", x.id, y.id, D);
    if (!prog)
        goto out;
    int pfd[2], gfd[2];
    if (!CHECK(pipe(pfd) == 0))
        goto out;
    if (!CHECK(pipe(gfd) == 0)) {
        close(pfd[0]);
        close(pfd[1]);
        goto out;
    }
    fflush(stdout);
    pid_t kid = fork();
    if (kid == 0) {
        close(pfd[0]);
        close(gfd[1]);
        scribbler(d.sock, prog, 1500, pfd[1], gfd[0]);
    }
    close(pfd[1]);
    close(gfd[0]);
    if (!CHECK(kid > 0))
        goto out;
    /* replays until the scribbler reports, each checked */
    int n = 0, errors = 0, wrong = 0;
    scrib_report rep;
    memset(&rep, 0, sizeof rep);
    ssize_t got = 0;
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end; n++) {
        int batch = 1 + n % ROWS;
        for (int i = 0; i < ROWS * D; i++)
            x.f[i] = (float)((i * 5 + n) % 23) * 0.125f - 1.0f;
        tbuf_fill(&y, 555.0f);
        gg_replay_result r;
        int rc = gg_client_replay(c, prog, batch, -1, &r);
        if (rc < 0) {
            if (errors++ < 5)
                h_note("replay %d: %s", n, gg_client_last_error(c));
        } else {
            for (int i = 0; i < batch * D; i++)
                wrong += !t_close(y.f[i], t_silu2x_ref(x.f[i]), 1e-5);
            wrong += r.batch != batch;
        }
        /* the scribbler goes on until this client has had its replays */
        if (n == 20 && write(gfd[1], "d", 1) != 1)
            h_note("the scribbler is gone");
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        if (poll(&p, 1, 0) == 1) {
            got = read(pfd[0], &rep, sizeof rep);
            n++;
            break;
        }
    }
    close(pfd[0]);
    close(gfd[1]);
    int status = 0;
    waitpid(kid, &status, 0);
    CHECKF(got == (ssize_t)sizeof rep, "the scribbler reported (%zd)", got);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the scribbler's own checks passed "
           "(status %#x)", status);
    h_note("normal client: %d replays; scribbler: %d region(s) opened, %d closed seen, %llu "
           "errors in %llu requests", n, rep.regions, rep.closed_seen,
           (unsigned long long)rep.errors, (unsigned long long)rep.requests);
    CHECK(n > 10);
    CHECK_EQ(errors, 0);
    CHECK_EQ(wrong, 0);
    CHECK_CONTAINS(gg_client_fastpath_status(c), "active");
    CHECK(rep.regions >= 1);
    CHECKF(rep.socket_ok == 3, "the scribbler's socket still answered (%d of 3)", rep.socket_ok);
    CHECKF(rep.errors > 0 || rep.closed_seen > 0, "the scribbler's session got errors or a "
           "closed region (%llu errors, %d closed)", (unsigned long long)rep.errors,
           rep.closed_seen);
    /* the daemon lives and is sane */
    CHECK(kill(d.pid, 0) == 0);
    const msgpack_object *hr = NULL;
    if (CHECK(gg_client_call(c, "health", NULL, 0, &hr) == 0))
        CHECK(h_get(hr, "ok") && h_get(hr, "ok")->via.boolean);
    CHECK_EQ(fp_wait_stat(c, "sessions_active", 1, 60000), 1);
    CHECK_EQ(fp_wait_stat(c, "fastpath_regions", 1, 60000), 1);
    gg_replay_result r;
    tbuf_fill(&y, 0.0f);
    CHECK(gg_client_replay(c, prog, ROWS, -1, &r) == 0 &&
          t_close(y.f[ROWS * D - 1], t_silu2x_ref(x.f[ROWS * D - 1]), 1e-5));
    char *log = h_read_file(d.log);
    static const char *const bad[] = {"AddressSanitizer", "runtime error", "SIGSEGV", "SIGBUS",
                                      "Segmentation", "Assertion", "panic", "crash"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(!strstr(log, bad[i]), "the daemon's log has no \"%s\"", bad[i]);
    free(log);
out:
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    CHECK_EQ(h_daemon_stop(&d), 0);
}

int main(void)
{
    h_init("test_fastpath_ring", 240);
    unsetenv("GFXGRAPH_FASTPATH");
    signal(SIGPIPE, SIG_IGN);
    test_descriptors();
    test_scribbler();
    return h_finish();
}
