/* SPDX-License-Identifier: MIT */
/* Helpers shared by the fast-path tests (test_fastpath_*.c, PROTOCOL.md
 * section 15):
 *
 *   - a socket-only client (GFXGRAPH_FASTPATH=0 set around its connect);
 *   - stats lookups by session;
 *   - fpr: a raw region client that speaks the protocol itself (h_conn for
 *     MessagePack-RPC, recvmsg for the memfd that rides on fastpath.open's
 *     answer, mmap) and writes descriptors into the ring byte by byte as the
 *     spec says, so tests can send what the library never would;
 *   - the daemon's open descriptors and fast-path mappings (/proc/PID). */
#ifndef GG_TEST_FASTPATH_UTIL_H
#define GG_TEST_FASTPATH_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fastpath.h"
#include "test_client_util.h"

/* ---- clients ------------------------------------------------------------- */

/* A client connected with GFXGRAPH_FASTPATH=0 (read at connect): every
 * replay goes over the socket.  NULL after a failed check. */
static inline gg_client *fp_socket_client(const char *sock, const char *name)
{
    gg_client *c = gg_client_new();
    setenv("GFXGRAPH_FASTPATH", "0", 1);
    int rc = gg_client_connect(c, sock, name);
    unsetenv("GFXGRAPH_FASTPATH");
    if (!CHECKF(rc == 0, "connect %s (socket only): %s", name, gg_client_last_error(c))) {
        gg_client_close(c);
        return NULL;
    }
    return c;
}

static inline gg_client *fp_client(const char *sock, const char *name)
{
    gg_client *c = gg_client_new();
    int rc = gg_client_connect(c, sock, name);
    if (!CHECKF(rc == 0, "connect %s: %s", name, gg_client_last_error(c))) {
        gg_client_close(c);
        return NULL;
    }
    return c;
}

/* The sessions[] entry with id in a stats result, NULL when absent. */
static inline const msgpack_object *fp_session_of(const msgpack_object *stats, uint64_t id)
{
    const msgpack_object *ss = h_get(stats, "sessions");
    for (uint32_t i = 0; ss && ss->type == MSGPACK_OBJECT_ARRAY && i < ss->via.array.size; i++)
        if (h_getu(&ss->via.array.ptr[i], "id") == id)
            return &ss->via.array.ptr[i];
    return NULL;
}

/* sessions[id].fastpath: 1 true, 0 false, -1 absent / not a bool. */
static inline int fp_session_fastpath(const msgpack_object *stats, uint64_t id)
{
    const msgpack_object *e = fp_session_of(stats, id);
    const msgpack_object *f = e ? h_get(e, "fastpath") : NULL;
    if (!f || f->type != MSGPACK_OBJECT_BOOLEAN)
        return -1;
    return f->via.boolean ? 1 : 0;
}

/* ---- the daemon's process ------------------------------------------------ */

static inline int fp_count_fds(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(p);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Lines of /proc/PID/maps containing needle. */
static inline int fp_count_maps(pid_t pid, const char *needle)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
    char *m = h_read_file(p);
    int n = 0;
    for (char *s = m; s && (s = strstr(s, needle)); s += strlen(needle))
        n++;
    free(m);
    return n;
}

/* Poll stats (through c) until key == want or timeout_ms passes; the last
 * value seen. */
static inline uint64_t fp_wait_stat(gg_client *c, const char *key, uint64_t want, int timeout_ms)
{
    uint64_t v = UINT64_MAX;
    for (int64_t end = h_now_ms() + timeout_ms;;) {
        const msgpack_object *r = NULL;
        if (gg_client_call(c, "stats", NULL, 0, &r) == 0)
            v = h_getu(r, key);
        if (v == want || h_now_ms() >= end)
            return v;
        h_sleep_ms(10);
    }
}

/* Poll stats until sessions[sid].key == want or timeout_ms passes; the last
 * value seen.  A fast-path hit's completion can be visible before the
 * daemon has counted the replay (it counts once it learns the device is
 * done), so tests that check counters wait for them. */
static inline uint64_t fp_wait_session(gg_client *c, uint64_t sid, const char *key, uint64_t want,
                                       int timeout_ms)
{
    uint64_t v = UINT64_MAX;
    for (int64_t end = h_now_ms() + timeout_ms;;) {
        const msgpack_object *r = NULL;
        if (gg_client_call(c, "stats", NULL, 0, &r) == 0)
            v = h_getu(fp_session_of(r, sid), key);
        if (v == want || h_now_ms() >= end)
            return v;
        h_sleep_ms(5);
    }
}

/* ---- fpr: a raw region client -------------------------------------------- */

typedef struct {
    h_conn hc;
    uint32_t msgid;
    uint64_t session;
    char code[32];              /* the last call's error code, "" when none */
    /* the region */
    uint8_t *base;
    size_t size;
    gg_fp_header *hdr;
    gg_fp_sqe *sq;
    gg_fp_cqe *cq;
    uint32_t entries, mask;
    uint64_t next_seq;
} fpr;

/* Call method with params (packed map bytes, or NULL).  1 with *result on
 * success; 0 with f->code set on an error response; < 0 on a lost
 * connection. */
static inline int fpr_call(fpr *f, const char *method, const msgpack_sbuffer *params,
                           const msgpack_object **result)
{
    const msgpack_object *r = NULL, *e = NULL;
    f->code[0] = '\0';
    int rc = h_conn_call(&f->hc, ++f->msgid, method, params ? params->data : NULL,
                         params ? params->size : 0, &r, &e);
    if (rc <= 0)
        return rc < 0 ? rc : -ECONNRESET;
    if (e && e->type != MSGPACK_OBJECT_NIL) {
        h_err_code(e, f->code, sizeof f->code);
        return 0;
    }
    if (result)
        *result = r;
    return 1;
}

static inline bool fpr_connect(fpr *f, const char *sock, const char *name)
{
    memset(f, 0, sizeof *f);
    f->hc.fd = -1;
    if (!CHECKF(h_conn_open(&f->hc, sock) == 0, "raw connect to %s", sock))
        return false;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    proto_pack_kv_u64(&pk, "protocol", 1);
    proto_pack_kv_str(&pk, "client", name);
    const msgpack_object *r = NULL;
    int rc = fpr_call(f, "hello", &sb, &r);
    msgpack_sbuffer_destroy(&sb);
    if (!CHECKF(rc == 1, "raw hello: %d %s", rc, f->code))
        return false;
    f->session = h_getu(r, "session");
    return true;
}

static inline void fpr_close(fpr *f)
{
    if (f->base)
        munmap(f->base, f->size);
    f->base = NULL;
    h_conn_close(&f->hc);
}

/* buffer.register of shm object name; the buffer id, 0 after a failed
 * check. */
static inline uint64_t fpr_register(fpr *f, const char *name, size_t size)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    proto_pack_kv_str(&pk, "handle", name);
    proto_pack_kv_u64(&pk, "size", size);
    const msgpack_object *r = NULL;
    int rc = fpr_call(f, "buffer.register", &sb, &r);
    msgpack_sbuffer_destroy(&sb);
    if (!CHECKF(rc == 1, "raw buffer.register %s: %d %s", name, rc, f->code))
        return 0;
    return h_getu(r, "id");
}

static inline void fpr_pack_tensor(msgpack_packer *pk, const char *name, uint64_t buf, int64_t d)
{
    proto_pack_key(pk, name);
    msgpack_pack_map(pk, 3);
    proto_pack_kv_str(pk, "dtype", "f32");
    proto_pack_key(pk, "shape");
    msgpack_pack_array(pk, 2);
    proto_pack_str(pk, "batch");
    msgpack_pack_uint64(pk, (uint64_t)d);
    proto_pack_kv_u64(pk, "buffer", buf);
}

/* program.define of y = scale(x, s) over [batch, d] f32, buckets 1, 2, 4;
 * the program id, 0 after a failed check. */
static inline uint64_t fpr_define_scale(fpr *f, const char *name, uint64_t x, uint64_t y,
                                        int64_t d, double s)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    proto_pack_kv_str(&pk, "name", name);
    proto_pack_key(&pk, "tensors");
    msgpack_pack_map(&pk, 2);
    fpr_pack_tensor(&pk, "x", x, d);
    fpr_pack_tensor(&pk, "y", y, d);
    proto_pack_key(&pk, "nodes");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_map(&pk, 4);
    proto_pack_kv_str(&pk, "op", "scale");
    proto_pack_key(&pk, "inputs");
    msgpack_pack_array(&pk, 1);
    proto_pack_str(&pk, "x");
    proto_pack_key(&pk, "outputs");
    msgpack_pack_array(&pk, 1);
    proto_pack_str(&pk, "y");
    proto_pack_key(&pk, "attrs");
    msgpack_pack_map(&pk, 1);
    proto_pack_kv_f64(&pk, "scale", s);
    proto_pack_key(&pk, "buckets");
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_uint64(&pk, 2);
    msgpack_pack_uint64(&pk, 4);
    const msgpack_object *r = NULL;
    int rc = fpr_call(f, "program.define", &sb, &r);
    msgpack_sbuffer_destroy(&sb);
    if (!CHECKF(rc == 1, "raw program.define %s: %d %s", name, rc, f->code))
        return 0;
    return h_getu(r, "id");
}

/* fastpath.open with recvmsg for the memfd, then mmap.  1 on success; 0
 * with f->code set when the daemon refused; -1 on anything else (a failed
 * check). */
static inline int fpr_open_region(fpr *f, uint32_t entries)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    proto_pack_kv_u64(&pk, "entries", entries);
    msgpack_sbuffer req;
    msgpack_sbuffer_init(&req);
    h_pack_request(&req, ++f->msgid, "fastpath.open", sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    uint32_t id = f->msgid;
    int rc = h_conn_send_sb(&f->hc, &req);
    msgpack_sbuffer_destroy(&req);
    if (!CHECKF(rc == 0, "send fastpath.open: %d", rc))
        return -1;
    /* the first bytes of the answer carry the descriptor: read them with
     * recvmsg into the h_conn's buffer, then let h_conn parse */
    h_conn *c = &f->hc;
    if (c->msg_len) {
        memmove(c->buf, c->buf + c->msg_len, c->len - c->msg_len);
        c->len -= c->msg_len;
        c->msg_len = 0;
    }
    if (c->cap - c->len < 65536) {
        size_t ncap = c->cap + 131072;
        uint8_t *nb = realloc(c->buf, ncap);
        if (!CHECK(nb))
            return -1;
        c->buf = nb;
        c->cap = ncap;
    }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (!CHECKF(poll(&p, 1, 30000) == 1, "the answer to fastpath.open arrives"))
        return -1;
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = c->buf + c->len, .iov_len = c->cap - c->len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                        .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
    if (!CHECKF(n > 0, "recvmsg: %zd (%s)", n, strerror(errno)))
        return -1;
    c->len += (size_t)n;
    int fd = -1;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
            memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    const msgpack_object *r = NULL, *e = NULL;
    for (;;) {
        const msgpack_object *o = NULL;
        rc = h_conn_recv(c, 30000, &o);
        if (!CHECKF(rc == 1, "the answer to fastpath.open: %d", rc))
            goto fail;
        proto_msg m;
        bool idok;
        char why[128];
        if (proto_msg_decode(o, &m, &idok, why, sizeof why) == 0 && m.type == GG_MSG_RESPONSE &&
            m.msgid == id) {
            r = m.result;
            e = m.error;
            break;
        }
    }
    f->code[0] = '\0';
    if (e && e->type != MSGPACK_OBJECT_NIL) {
        h_err_code(e, f->code, sizeof f->code);
        CHECKF(fd < 0, "no descriptor with an error answer");
        if (fd >= 0)
            close(fd);
        return 0;
    }
    if (!CHECKF(fd >= 0, "fastpath.open's answer carries a descriptor"))
        goto fail;
    struct stat st;
    if (!CHECK(fstat(fd, &st) == 0))
        goto fail;
    f->size = (size_t)st.st_size;
    CHECK_EQ(f->size, h_getu(r, "region_size"));
    void *m = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    fd = -1;
    if (!CHECKF(m != MAP_FAILED, "mmap the region: %s", strerror(errno)))
        return -1;
    f->base = m;
    f->hdr = m;
    f->entries = f->hdr->entries;
    f->mask = f->entries - 1;
    f->sq = (gg_fp_sqe *)(f->base + h_getu(r, "sq_offset"));
    f->cq = (gg_fp_cqe *)(f->base + h_getu(r, "cq_offset"));
    f->next_seq = 1;
    return 1;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Write d into its slot (d->seq picks the slot unless slot_seq says
 * otherwise), publish sq_tail = tail, and ring the doorbell if the daemon's
 * thread sleeps: PROTOCOL.md section 15, "Client, to submit". */
static inline void fpr_put(fpr *f, uint64_t slot_seq, const gg_fp_sqe *d, uint32_t tail)
{
    gg_fp_sqe *s = &f->sq[(slot_seq - 1) & f->mask];
    memcpy(s, d, sizeof *d);
    __atomic_store_n(&f->hdr->sq_tail, tail, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&f->hdr->sq_sleeping, __ATOMIC_SEQ_CST)) {
        __atomic_fetch_add(&f->hdr->sq_wake, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &f->hdr->sq_wake, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
}

/* Submit the next descriptor with these fields (seq filled in unless
 * seq_override != 0); returns the seq of its slot. */
static inline uint64_t fpr_submit(fpr *f, const gg_fp_sqe *fields, uint64_t seq_override)
{
    uint64_t seq = f->next_seq++;
    gg_fp_sqe d = *fields;
    d.seq = seq_override ? seq_override : seq;
    fpr_put(f, seq, &d, (uint32_t)seq);
    return seq;
}

/* Wait for the record of seq; a copy in *out.  1 complete, 0 timed out,
 * -1 the region closed without it. */
static inline int fpr_wait(fpr *f, uint64_t seq, int timeout_ms, gg_fp_cqe *out)
{
    gg_fp_cqe *q = &f->cq[(seq - 1) & f->mask];
    int64_t end = h_now_ms() + timeout_ms;
    for (unsigned i = 0;; i++) {
        if (__atomic_load_n(&q->seq, __ATOMIC_ACQUIRE) == seq) {
            memcpy(out, q, sizeof *out);
            out->reason[sizeof out->reason - 1] = '\0';
            return 1;
        }
        if (__atomic_load_n(&f->hdr->state, __ATOMIC_ACQUIRE) == GG_FP_STATE_CLOSED)
            return __atomic_load_n(&q->seq, __ATOMIC_ACQUIRE) == seq ? fpr_wait(f, seq, 0, out)
                                                                      : -1;
        if (h_now_ms() >= end)
            return 0;
        if (i > 1000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}

#endif
