/* SPDX-License-Identifier: MIT */
/* The fast path: replays through a ring in memory shared with gfxgraphd
 * (PROTOCOL.md section 15, proto/fastpath.h).
 *
 * Happy path: hello offers it (fastpath.available).  The first replay or
 * submit sends fastpath.open, takes the memfd that came with the answer (io.c
 * keeps it), checks the header against the answer and the file's size, maps
 * it shared and closes the descriptor.  A submission then writes a descriptor
 * into its slot, publishes sq_tail with release ordering and, after a full
 * fence, rings the daemon's doorbell only when its thread sleeps.  A wait
 * spins on the record's seq for GFXGRAPH_SPIN_US (so a cache hit is picked up
 * within a cache miss of its completion), then sleeps on cq_wake in short
 * futex waits.  No socket I/O, no MessagePack and no allocation on the way.
 *
 * Failure modes: GFXGRAPH_FASTPATH=0, no offer in hello, an open the daemon
 * refuses (EBUSY, ENOTSUP, ...), an answer without a descriptor, or a header
 * that does not match what the library expects: the connection silently
 * keeps the socket path and gg_client_fastpath_status() says why.  While
 * waiting: the region's state closed (2) ends the wait with -ECONNRESET (the
 * record will never complete) and sends later replays to the socket; a socket
 * that hung up (a daemon that died without closing the region) is noticed at
 * every sleep, at most FP_SLEEP_MS apart, so a dead daemon never hangs the
 * client; the client's timeout gives -ETIMEDOUT and the slot stays reserved
 * until its late completion shows up, so that completion is never taken for
 * a later submission's.  A disconnect from another thread marks the region
 * dead; the memory stays mapped until the last waiter lets go of it. */
#include "priv.h"
#include "gg_barrier.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FP_DEFAULT_SPIN_US 200
#define FP_MAX_SPIN_US 1000000
#define FP_SLEEP_MS 20          /* longest futex wait: how soon a dead daemon is noticed */
#define FP_DRAIN_MS 500         /* longest wait for the daemon to take submissions (client_fp_drain) */
#define FP_CLOCK_EVERY 64       /* spins between clock reads */
#define FP_YIELD_EVERY 512      /* spins between sched_yield: a 2-core box is not starved */

/* ---- small helpers ------------------------------------------------------- */

/* Not FUTEX_PRIVATE: the word is shared with another process. */
static long fp_futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

static int64_t fp_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static bool fp_seq_done(const gg_fp_cqe *q, uint64_t seq)
{
    return gg_load_acquire(&q->seq) == seq;
}

static uint32_t fp_state(const client_fp_region *r)
{
    return gg_load_acquire(&r->hdr->state);
}

static void fp_unref(client_fp_region *r)
{
    if (--r->refs > 0)
        return;
    munmap(r->hdr, r->size);
    free(r);
}

static void fp_status(gg_client *c, int mode, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fp_status(gg_client *c, int mode, const char *fmt, ...)
{
    c->fp_mode = mode;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fp_status, sizeof c->fp_status, fmt, ap);
    va_end(ap);
}

/* A decimal environment value in lo..hi, else def (unset, junk, out of range). */
static long fp_env_long(const char *name, long lo, long hi, long def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return def;
    return v;
}

/* ---- connection life ------------------------------------------------------ */

void client_fp_env(gg_client *c)
{
    const char *e = getenv("GFXGRAPH_FASTPATH");
    c->fp_env_off = e && (strcmp(e, "0") == 0 || strcmp(e, "off") == 0);
    /* any count is passed on: the daemon's EINVAL then names what is wrong
     * with it in gg_client_fastpath_status() */
    c->fp_want_entries =
        (uint32_t)fp_env_long("GFXGRAPH_FASTPATH_ENTRIES", 1, 1 << 20, GG_FP_DEFAULT_ENTRIES);
    /* With one CPU to run on, spinning only keeps the daemon from the work
     * being waited for: sleep at once unless told otherwise. */
    long spin = FP_DEFAULT_SPIN_US;
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) < 2)
        spin = 0;
    c->fp_spin_us = (int)fp_env_long("GFXGRAPH_SPIN_US", 0, FP_MAX_SPIN_US, spin);
}

void client_fp_hello(gg_client *c, const msgpack_object *hello)
{
    const msgpack_object *fp = proto_map_get(hello, "fastpath");
    const msgpack_object *av = proto_map_get(fp, "available");
    uint64_t v;
    const msgpack_object *o = proto_map_get(fp, "max_entries");
    c->fp_max_entries = o && proto_obj_u64(o, &v) && v <= UINT32_MAX ? (uint32_t)v : 0;
    if (c->fp_env_off)
        fp_status(c, CLIENT_FP_OFF, "off (GFXGRAPH_FASTPATH=0)");
    else if (!av || av->type != MSGPACK_OBJECT_BOOLEAN)
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: gfxgraphd does not offer it (no "
                  "fastpath in hello)");
    else if (!av->via.boolean)
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: off in gfxgraphd (fastpath = off)");
    else
        fp_status(c, CLIENT_FP_PENDING, "not yet opened");
}

void client_fp_drop(gg_client *c)
{
    client_fp_region *r = c->fp;
    c->fp = NULL;
    if (r) {
        r->dead = true;   /* for waiters still holding it */
        fp_unref(r);
    }
    fp_status(c, CLIENT_FP_NONE, "not connected");
}

/* ---- opening ---------------------------------------------------------------- */

static bool fp_ans_u64(const msgpack_object *ans, const char *key, uint64_t *v)
{
    const msgpack_object *o = proto_map_get(ans, key);
    return o && proto_obj_u64(o, v);
}

/* The header (and the answer's copy of it) as this library expects it, or
 * why not in why. */
static bool fp_check(const gg_client *c, const gg_fp_header *h, uint64_t fsize,
                     const msgpack_object *ans, char *why, size_t len)
{
    uint32_t n = h->entries;
    if (memcmp(h->magic, GG_FP_MAGIC, 8) != 0) {
        snprintf(why, len, "the region's magic is not %s", GG_FP_MAGIC);
        return false;
    }
    if (h->version != GG_FP_VERSION) {
        snprintf(why, len, "region version %u; this library knows %u", h->version,
                 GG_FP_VERSION);
        return false;
    }
    if (n < GG_FP_MIN_ENTRIES || n > GG_FP_MAX_ENTRIES || (n & (n - 1))) {
        snprintf(why, len, "entries %u is not a power of two in %u..%u", n, GG_FP_MIN_ENTRIES,
                 GG_FP_MAX_ENTRIES);
        return false;
    }
    if (h->sqe_size != GG_FP_SQE_SIZE || h->cqe_size != GG_FP_CQE_SIZE ||
        h->sq_offset != GG_FP_RING_OFFSET || h->cq_offset != GG_FP_RING_OFFSET + n * GG_FP_SQE_SIZE) {
        snprintf(why, len, "unexpected ring layout (sqe %u, cqe %u, sq at %u, cq at %u)",
                 h->sqe_size, h->cqe_size, h->sq_offset, h->cq_offset);
        return false;
    }
    if (h->region_size != fsize || fsize < gg_fp_region_size(n)) {
        snprintf(why, len, "region_size %llu, the memfd has %llu bytes, %u entries need %llu",
                 (unsigned long long)h->region_size, (unsigned long long)fsize, n,
                 (unsigned long long)gg_fp_region_size(n));
        return false;
    }
    /* the answer repeats the header: both must say the same */
    static const char *const keys[] = {"entries", "region_size", "sq_offset", "cq_offset",
                                       "sqe_size", "cqe_size"};
    const uint64_t vals[] = {n, h->region_size, h->sq_offset, h->cq_offset, h->sqe_size,
                             h->cqe_size};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint64_t v;
        if (!fp_ans_u64(ans, keys[i], &v) || v != vals[i]) {
            snprintf(why, len, "the answer's %s does not match the region's header", keys[i]);
            return false;
        }
    }
    if (c->session && h->session && h->session != c->session) {
        snprintf(why, len, "the region is session %llu's, this is session %llu",
                 (unsigned long long)h->session, (unsigned long long)c->session);
        return false;
    }
    if (gg_load_acquire(&h->state) != GG_FP_STATE_OPEN) {
        snprintf(why, len, "the region is not open (state %u)", h->state);
        return false;
    }
    return true;
}

/* fastpath.open and the mapping.  0 with the mode ACTIVE or UNAVAILABLE (the
 * socket path then serves this connection), or a negative errno when the
 * connection itself was lost on the way. */
static int fp_open(gg_client *c)
{
    uint32_t want = c->fp_want_entries;
    if (c->fp_max_entries && want > c->fp_max_entries)
        want = c->fp_max_entries;
    client_params p;
    client_params_init(&p);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_u64(&p.pk, "entries", want);
    if (c->fd_received >= 0)
        close(c->fd_received);
    c->fd_received = -1;
    c->fd_wanted = true;
    const msgpack_object *ans;
    int rc = client_call_locked(c, "fastpath.open", p.sb.data, p.sb.size, &ans);
    client_params_free(&p);
    c->fd_wanted = false;
    int fd = c->fd_received;
    c->fd_received = -1;
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        if (c->fd < 0)
            return rc;   /* the connection is gone: that is the replay's error */
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: %s%s%s", c->err_code,
                  c->err[0] ? ": " : "", c->err);
        client_clear_error(c);
        return 0;
    }
    char why[192];
    const char *comp = "";
    const msgpack_object *co = proto_map_get(ans, "completion");
    bool gpu = co && proto_str_eq(co, "gpu");
    comp = gpu ? "gpu" : co && proto_str_eq(co, "cpu") ? "cpu" : "unknown";
    if (fd < 0) {
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: the answer to fastpath.open carried "
                  "no descriptor");
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: fstat of the region: %s",
                  strerror(errno));
        close(fd);
        return 0;
    }
    uint64_t fsize = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    if (fsize < sizeof(gg_fp_header) || fsize > gg_fp_region_size(GG_FP_MAX_ENTRIES)) {
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: the region's memfd has %llu bytes",
                  (unsigned long long)fsize);
        close(fd);
        return 0;
    }
    void *m = mmap(NULL, (size_t)fsize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int merr = errno;
    close(fd);   /* the mapping keeps the memory */
    if (m == MAP_FAILED) {
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: mmap of the region: %s",
                  strerror(merr));
        return 0;
    }
    gg_fp_header *h = m;
    if (!fp_check(c, h, fsize, ans, why, sizeof why)) {
        munmap(m, (size_t)fsize);
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: %s", why);
        return 0;
    }
    uint32_t n = h->entries;
    client_fp_region *r = calloc(1, sizeof *r + n * sizeof r->slots[0]);
    if (!r) {
        munmap(m, (size_t)fsize);
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: out of memory");
        return 0;
    }
    r->refs = 1;
    r->hdr = h;
    r->size = (size_t)fsize;
    r->sq = (gg_fp_sqe *)((uint8_t *)m + h->sq_offset);
    r->cq = (gg_fp_cqe *)((uint8_t *)m + h->cq_offset);
    r->entries = n;
    r->mask = n - 1;
    r->gpu = gpu;
    r->next_seq = 1;
    c->fp = r;
    fp_status(c, CLIENT_FP_ACTIVE, "active (%u entries, %s completion)", n, comp);
    return 0;
}

int client_fp_usable(gg_client *c)
{
    if (c->fp_mode == CLIENT_FP_PENDING && c->fd >= 0) {
        int rc = fp_open(c);
        if (rc < 0)
            return rc;
    }
    if (c->fp_mode == CLIENT_FP_ACTIVE && fp_state(c->fp) != GG_FP_STATE_OPEN)
        /* the daemon ended the region (a ring it found broken); the session
         * goes on over the socket.  The region stays mapped for tickets
         * still outstanding. */
        fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: gfxgraphd closed the region");
    return c->fp_mode == CLIENT_FP_ACTIVE;
}

const char *gg_client_fastpath_status(const gg_client *c)
{
    return c ? c->fp_status : "no client (NULL)";
}

/* ---- waiting ------------------------------------------------------------------ */

/* Mutex held: is the connection still there?  A socket that hung up, or
 * holds a notification, is read now; 0 or -ECONNRESET with the error set. */
static int fp_alive(gg_client *c, client_fp_region *r)
{
    if (r->dead || c->fp != r || c->fd < 0)
        return client_fail(c, -ECONNRESET, "the connection to gfxgraphd was closed while "
                           "waiting for a replay");
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        int rc = client_pump(c, "replay");
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Wait for record seq of r to complete.  Mutex held on entry and on return,
 * dropped while spinning and sleeping; the caller holds a reference on r.
 * 0 when complete; -ETIMEDOUT; -EPIPE when the region was closed first;
 * -ECONNRESET (error set) when the connection is gone. */
static int fp_await(gg_client *c, client_fp_region *r, uint64_t seq, int64_t deadline_ms)
{
    const gg_fp_cqe *q = &r->cq[(seq - 1) & r->mask];
    if (fp_seq_done(q, seq))
        return 0;
    gg_fp_header *h = r->hdr;
    int spin_us = c->fp_spin_us;
    pthread_mutex_unlock(&c->mu);

    int rc = 1;
    if (spin_us > 0) {
        int64_t end = fp_now_us() + spin_us;
        for (unsigned i = 1;; i++) {
            if (fp_seq_done(q, seq)) {
                rc = 0;
                break;
            }
            gg_cpu_pause();
            if (i % FP_CLOCK_EVERY == 0 && fp_now_us() >= end)
                break;
            if (i % FP_YIELD_EVERY == 0)
                sched_yield();
        }
    }
    if (rc) {
        /* announce the sleeper before reading the doorbell, and read the
         * doorbell before the last look at the record: a completion after
         * that look changes cq_wake, so the futex wait returns at once */
        gg_fetch_add_seq_cst(&h->cq_waiters, 1);
        for (;;) {
            uint32_t w = gg_load_seq_cst(&h->cq_wake);
            if (fp_seq_done(q, seq)) {
                rc = 0;
                break;
            }
            bool closed = fp_state(r) == GG_FP_STATE_CLOSED;
            /* a daemon that closes the connection closes the region too:
             * the lost connection is then the better error */
            pthread_mutex_lock(&c->mu);
            int alive = fp_alive(c, r);
            pthread_mutex_unlock(&c->mu);
            if (alive < 0 || closed) {
                rc = fp_seq_done(q, seq) ? 0 : alive < 0 ? alive : -EPIPE;
                break;
            }
            int64_t ms = FP_SLEEP_MS;
            if (deadline_ms >= 0) {
                int64_t left = deadline_ms - client_now_ms();
                if (left <= 0) {
                    rc = -ETIMEDOUT;
                    break;
                }
                if (left < ms)
                    ms = left;
            }
            struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000};
            fp_futex(&h->cq_wake, FUTEX_WAIT, w, &ts);
        }
        gg_fetch_sub_seq_cst(&h->cq_waiters, 1);
    }
    pthread_mutex_lock(&c->mu);
    return rc;
}

/* The error of an fp_await that did not complete (mutex held). */
static int fp_await_fail(gg_client *c, client_fp_region *r, int rc)
{
    if (rc == -ETIMEDOUT)
        return client_fail(c, -ETIMEDOUT, "no completion from gfxgraphd for the replay within "
                           "%d ms (fast path); its late completion will be ignored",
                           c->timeout_ms);
    if (rc == -EPIPE) {
        if (c->fp == r && c->fp_mode == CLIENT_FP_ACTIVE)
            fp_status(c, CLIENT_FP_UNAVAILABLE, "unavailable: gfxgraphd closed the region");
        return client_fail(c, -ECONNRESET, "gfxgraphd closed the fast path's region: this "
                           "replay will never complete (later replays use the socket)");
    }
    return rc;   /* -ECONNRESET: the message is set */
}

/* The completed record into res, or its error as a socket error would look. */
static int fp_fill(gg_client *c, const gg_fp_cqe *q, gg_replay_result *res)
{
    gg_fp_cqe e;
    memcpy(&e, q, sizeof e);   /* stable: the slot is not reused before this */
    e.reason[sizeof e.reason - 1] = '\0';
    if (e.status != 0) {
        int err = e.status < 0 ? e.status : -EPROTO;
        const char *code = proto_errno_code(err);
        int rc = proto_errno_from_code(code, strlen(code));
        if (e.reason[0])
            client_set_error(c, code, strlen(code), e.reason, strlen(e.reason));
        else {
            client_set_error(c, code, strlen(code), "", 0);
            snprintf(c->err, sizeof c->err, "gfxgraphd refused 'replay' (%s)", code);
        }
        return rc;
    }
    if (res) {
        memset(res, 0, sizeof *res);
        res->path = e.flags & GG_FP_CQE_EAGER ? GG_PATH_EAGER : GG_PATH_GRAPH;
        res->bucket = (int)e.bucket;
        res->batch = (int)e.batch;
        res->branch = (int)e.branch;
        res->fallback = e.flags & GG_FP_CQE_FALLBACK;
        res->captured = e.flags & GG_FP_CQE_CAPTURED;
        res->device_us = e.flags & GG_FP_CQE_TIMED ? e.device_us : 0;
        memcpy(res->reason, e.reason, strlen(e.reason) + 1);
    }
    return 0;
}

/* ---- submit, wait, poll -------------------------------------------------------- */

int client_fp_submit(gg_client *c, uint64_t program, int batch, int branch,
                     const gg_replay_opts *opts, bool timed, uint64_t *ticket)
{
    client_fp_region *r = c->fp;
    client_fp_slot *s;
    for (;;) {
        s = &r->slots[(r->next_seq - 1) & r->mask];
        if (s->state == CLIENT_FP_SLOT_FREE)
            break;
        if (s->state != CLIENT_FP_SLOT_ABANDONED)
            return client_fail(c, -EBUSY, "%u submissions are outstanding, as many as the fast "
                               "path's ring holds: wait for one first", r->entries);
        /* the slot's last descriptor timed out: its completion must be seen
         * before the slot is used again */
        uint64_t old = s->seq;
        if (!fp_seq_done(&r->cq[(old - 1) & r->mask], old)) {
            r->refs++;
            int rc = fp_await(c, r, old, client_deadline(c));
            if (rc < 0)
                rc = fp_await_fail(c, r, rc);
            else if (r->dead || c->fp != r)
                rc = client_fail(c, -ECONNRESET, "the connection to gfxgraphd was closed "
                                 "while waiting for a ring slot");
            else if (c->fp_mode != CLIENT_FP_ACTIVE)
                rc = client_fail(c, -ECONNRESET, "gfxgraphd closed the fast path's region");
            fp_unref(r);
            if (rc < 0)
                return rc;
        }
        /* another thread may have taken or freed it meanwhile: look again */
        if (s->state == CLIENT_FP_SLOT_ABANDONED && s->seq == old)
            s->state = CLIENT_FP_SLOT_FREE;
    }
    uint64_t seq = r->next_seq++;
    gg_fp_sqe *d = &r->sq[(seq - 1) & r->mask];
    d->seq = seq;
    d->program = program;
    d->wait_event = opts->wait_event;
    d->signal_event = opts->signal_event;
    d->batch = (uint32_t)batch;
    d->branch = branch < 0 ? 0 : (uint32_t)branch;
    d->flags = (opts->async ? GG_FP_SQE_ASYNC : 0) | (timed ? GG_FP_SQE_TIMED : 0);
    d->reserved0 = 0;
    d->user_data = seq;
    d->reserved1 = 0;
    s->seq = seq;
    s->state = CLIENT_FP_SLOT_OUT;
    gg_fp_header *h = r->hdr;
    gg_store_release(&h->sq_tail, (uint32_t)seq);
    /* the store of sq_tail before the load of sq_sleeping: with the daemon's
     * set-then-recheck this cannot miss both */
    gg_smp_mb();
    if (gg_load_seq_cst(&h->sq_sleeping)) {
        gg_fetch_add_seq_cst(&h->sq_wake, 1);
        fp_futex(&h->sq_wake, FUTEX_WAKE, 1, NULL);
    }
    *ticket = client_ticket_make(c, true, seq);
    return 0;
}

void client_fp_drain(gg_client *c, int64_t deadline_ms)
{
    client_fp_region *r = c->fp;
    if (!r || c->fp_mode != CLIENT_FP_ACTIVE)
        return;
    uint32_t want = (uint32_t)(r->next_seq - 1);
    const gg_fp_header *h = r->hdr;
    /* Bounded on its own: the daemon takes a descriptor in microseconds,
     * so one that has not within FP_DRAIN_MS is stuck or gone, and the
     * request then goes as it is (its own deadline is not spent here). */
    int64_t end = client_now_ms() + FP_DRAIN_MS;
    if (deadline_ms >= 0 && deadline_ms < end)
        end = deadline_ms;
    r->refs++;      /* fp_alive may read answers, and the region go with the connection */
    for (unsigned i = 1; gg_load_acquire(&h->sq_head) != want; i++) {
        if (fp_state(r) == GG_FP_STATE_CLOSED)
            break;
        if (i < FP_YIELD_EVERY) {
            gg_cpu_pause();
            continue;
        }
        /* a dead daemon never moves sq_head: the socket says so */
        if (fp_alive(c, r) < 0 || client_now_ms() >= end)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000};
        nanosleep(&ts, NULL);
    }
    fp_unref(r);
}

/* The slot of an outstanding ticket into *out; 0, or -ENOENT / -EBUSY with
 * the error set. */
static int fp_slot_of(gg_client *c, uint64_t ticket, client_fp_slot **out)
{
    client_fp_region *r = c->fp;
    uint64_t seq = ticket & CLIENT_TICKET_NUM_MASK;
    client_fp_slot *s = r && seq ? &r->slots[(seq - 1) & r->mask] : NULL;
    if (!s || s->seq != seq || s->state == CLIENT_FP_SLOT_FREE ||
        s->state == CLIENT_FP_SLOT_ABANDONED)
        return client_fail(c, -ENOENT, "ticket %#llx is not outstanding (already waited for, "
                           "timed out, or from another connection)",
                           (unsigned long long)ticket);
    if (s->state == CLIENT_FP_SLOT_WAITING)
        return client_fail(c, -EBUSY, "another thread is waiting for ticket %#llx",
                           (unsigned long long)ticket);
    *out = s;
    return 0;
}

int client_fp_wait(gg_client *c, uint64_t ticket, gg_replay_result *res)
{
    client_fp_slot *s;
    int rc = fp_slot_of(c, ticket, &s);
    if (rc < 0)
        return rc;
    client_fp_region *r = c->fp;
    uint64_t seq = s->seq;
    s->state = CLIENT_FP_SLOT_WAITING;   /* no other waiter, no reuse */
    r->refs++;
    rc = fp_await(c, r, seq, client_deadline(c));
    if (rc == 0) {
        rc = fp_fill(c, &r->cq[(seq - 1) & r->mask], res);
        s->state = CLIENT_FP_SLOT_FREE;
    } else {
        s->state = CLIENT_FP_SLOT_ABANDONED;
        rc = fp_await_fail(c, r, rc);
    }
    fp_unref(r);
    return rc;
}

int client_fp_poll(gg_client *c, uint64_t ticket)
{
    client_fp_slot *s;
    int rc = fp_slot_of(c, ticket, &s);
    if (rc < 0)
        return rc;
    client_fp_region *r = c->fp;
    if (fp_seq_done(&r->cq[(s->seq - 1) & r->mask], s->seq))
        return 1;
    /* a wait would not block either: it returns the region's end at once */
    return fp_state(r) == GG_FP_STATE_CLOSED ? 1 : 0;
}
