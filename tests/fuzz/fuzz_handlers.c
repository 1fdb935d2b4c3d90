/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the daemon's request handling:
 * the real server (gg_server_init: core, rpc, fast path module, listener)
 * on the cpu backend, in this process, and each input a client connection.
 * Every method of the dispatch table is reached through the same path a
 * client's bytes take (conn.c: framing, dispatch, handler, answer), and
 * replays are executed on the executor thread.
 *
 * Input: a stream of MessagePack values.  Each one that is a request
 * [0, msgid, method, params] is sent alone and its answer awaited, so that
 * ids handed out earlier in the input can be used: a non-negative integer
 * below 16 under a key "id", "buffer", "program" or "event" (at any depth
 * of params) is replaced by the n-th id this connection got back (n = the
 * value; unchanged when fewer came back).  Anything else (notifications,
 * garbage, the undecodable tail) is sent as bytes.  Then the client shuts
 * its side and reads to the end; a connection that is not closed within
 * 10 s, or an answer that is not a well-formed response, aborts.
 *
 * Two shm objects, /ggfuzz-a (1 MiB) and /ggfuzz-b (4 KiB), exist for
 * buffer.register.  GG_FUZZ_WRITE_SEEDS=dir writes the seed corpus
 * (tests/fuzz/corpus/fuzz_handlers/) and exits. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "app/server.h"
#include "base/log.h"
#include "proto.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static gg_server g_srv;
static char g_sock[108];

static double fz_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- seeds ---------------------------------------------------------------- */

typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    uint32_t id;
} seed;

static void s_str(seed *s, const char *v)
{
    msgpack_pack_str(&s->pk, strlen(v));
    msgpack_pack_str_body(&s->pk, v, strlen(v));
}

/* [0, id, method, [map of n]]: the caller packs the n pairs */
static void s_req(seed *s, const char *method, int n)
{
    msgpack_pack_array(&s->pk, 4);
    msgpack_pack_int(&s->pk, 0);
    msgpack_pack_uint32(&s->pk, ++s->id);
    s_str(s, method);
    if (n < 0) {
        msgpack_pack_array(&s->pk, 0);
        return;
    }
    msgpack_pack_array(&s->pk, 1);
    msgpack_pack_map(&s->pk, (size_t)n);
}

static void s_kv_u(seed *s, const char *k, uint64_t v)
{
    s_str(s, k);
    msgpack_pack_uint64(&s->pk, v);
}

static void s_kv_s(seed *s, const char *k, const char *v)
{
    s_str(s, k);
    s_str(s, v);
}

static void s_register(seed *s, const char *shm, uint64_t size)
{
    s_req(s, "buffer.register", 2);
    s_str(s, "handle");
    msgpack_pack_bin(&s->pk, strlen(shm));
    msgpack_pack_bin_body(&s->pk, shm, strlen(shm));
    s_kv_u(s, "size", size);
}

/* {name: {buffer, offset, dtype f32, shape [batch, cols]}} */
static void s_tensor(seed *s, const char *name, int buf, uint64_t off, int cols, bool batch)
{
    s_str(s, name);
    msgpack_pack_map(&s->pk, 4);
    s_kv_u(s, "buffer", (uint64_t)buf);
    s_kv_u(s, "offset", off);
    s_kv_s(s, "dtype", "f32");
    s_str(s, "shape");
    msgpack_pack_array(&s->pk, batch ? 2 : 1);
    if (batch)
        s_str(s, "batch");
    msgpack_pack_int(&s->pk, cols);
}

static void s_node(seed *s, const char *op, const char *a, const char *b, const char *out)
{
    msgpack_pack_map(&s->pk, 3);
    s_kv_s(s, "op", op);
    s_str(s, "inputs");
    msgpack_pack_array(&s->pk, b ? 2 : 1);
    s_str(s, a);
    if (b)
        s_str(s, b);
    s_str(s, "outputs");
    msgpack_pack_array(&s->pk, 1);
    s_str(s, out);
}

/* buffer 0 registered; program over it: y = silu(x + w) via scratch t */
static void s_define(seed *s, bool branches)
{
    s_req(s, "program.define", 4);
    s_kv_s(s, "name", "fz");
    s_str(s, "buckets");
    msgpack_pack_array(&s->pk, 3);
    msgpack_pack_int(&s->pk, 1);
    msgpack_pack_int(&s->pk, 4);
    msgpack_pack_int(&s->pk, 8);
    s_str(s, "tensors");
    msgpack_pack_map(&s->pk, 4);
    s_tensor(s, "x", 0, 0, 16, true);
    s_tensor(s, "w", 0, 8192, 16, false);
    s_tensor(s, "y", 0, 16384, 16, true);
    s_str(s, "t");
    msgpack_pack_map(&s->pk, 3);
    s_str(s, "scratch");
    msgpack_pack_true(&s->pk);
    s_kv_s(s, "dtype", "f32");
    s_str(s, "shape");
    msgpack_pack_array(&s->pk, 2);
    s_str(s, "batch");
    msgpack_pack_int(&s->pk, 16);
    if (branches) {
        s_str(s, "branches");
        msgpack_pack_array(&s->pk, 2);
    } else {
        s_str(s, "nodes");
    }
    for (int b = 0; b < (branches ? 2 : 1); b++) {
        msgpack_pack_array(&s->pk, 2);
        s_node(s, b ? "mul" : "add", "x", "w", "t");
        s_node(s, "silu", "t", NULL, "y");
    }
}

static void s_write(const char *dir, const char *name, seed *s)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(s->sb.data, 1, s->sb.size, f) != s->sb.size)
        perror(path);
    if (f)
        fclose(f);
    msgpack_sbuffer_clear(&s->sb);
    s->id = 0;
}

static void write_seeds(const char *dir)
{
    seed s = {0};
    msgpack_sbuffer_init(&s.sb);
    msgpack_packer_init(&s.pk, &s.sb, msgpack_sbuffer_write);

    s_req(&s, "hello", 2);
    s_kv_u(&s, "protocol", 1);
    s_kv_s(&s, "client", "fuzz");
    s_req(&s, "stats", -1);
    s_req(&s, "health", -1);
    s_req(&s, "buffer.list", -1);
    s_req(&s, "program.list", -1);
    s_req(&s, "no.such.method", -1);
    s_write(dir, "info", &s);

    s_register(&s, "/ggfuzz-a", 1 << 20);
    s_register(&s, "/ggfuzz-b", 4096);
    s_req(&s, "buffer.list", -1);
    s_req(&s, "buffer.release", 1);
    s_kv_u(&s, "id", 1);
    s_req(&s, "event.register", 1);
    s_str(&s, "handle");
    msgpack_pack_bin(&s.pk, 0);
    /* by descriptor, with none sent (EBADF), and with a handle too (EINVAL) */
    s_req(&s, "buffer.register", 2);
    s_str(&s, "fd");
    msgpack_pack_true(&s.pk);
    s_kv_u(&s, "size", 64);
    s_req(&s, "buffer.register", 3);
    s_str(&s, "fd");
    msgpack_pack_true(&s.pk);
    s_str(&s, "handle");
    msgpack_pack_bin(&s.pk, 9);
    msgpack_pack_bin_body(&s.pk, "/ggfuzz-b", 9);
    s_kv_u(&s, "size", 64);
    s_write(dir, "buffers", &s);

    for (int v = 0; v < 4; v++) {
        s_register(&s, "/ggfuzz-a", 1 << 20);
        s_define(&s, v == 3);
        s_req(&s, "program.prepare", 1);
        s_kv_u(&s, "id", 1);
        static const int batches[] = {1, 3, 8, 12};
        for (int k = 0; k < 3; k++) {
            s_req(&s, "replay", v == 1 ? 3 : 2 + (v == 3));
            s_kv_u(&s, "program", 1);
            s_kv_u(&s, "batch", (uint64_t)batches[(v + k) % 4]);
            if (v == 1) {
                s_str(&s, "async");
                msgpack_pack_true(&s.pk);
            }
            if (v == 3)
                s_kv_u(&s, "branch", (uint64_t)k % 2);
        }
        if (v == 2) {
            s_register(&s, "/ggfuzz-a", 1 << 20);
            s_req(&s, "program.rebind", 2);
            s_kv_u(&s, "id", 1);
            s_str(&s, "tensors");
            msgpack_pack_map(&s.pk, 1);
            s_str(&s, "x");
            msgpack_pack_map(&s.pk, 2);
            s_kv_u(&s, "buffer", 2);
            s_kv_u(&s, "offset", 4096);
            s_req(&s, "replay", 2);
            s_kv_u(&s, "program", 1);
            s_kv_u(&s, "batch", 2);
        }
        s_req(&s, "program.list", -1);
        s_req(&s, "stats", -1);
        s_req(&s, "program.release", 1);
        s_kv_u(&s, "id", 1);
        char name[32];
        snprintf(name, sizeof name, "program%d", v);
        s_write(dir, name, &s);
    }
    /* a caller of fz: {op: call, program: fz} then silu in place */
    s_register(&s, "/ggfuzz-a", 1 << 20);
    s_define(&s, true);
    s_req(&s, "program.define", 4);
    s_kv_s(&s, "name", "caller");
    s_str(&s, "buckets");
    msgpack_pack_array(&s.pk, 3);
    msgpack_pack_int(&s.pk, 1);
    msgpack_pack_int(&s.pk, 4);
    msgpack_pack_int(&s.pk, 8);
    s_str(&s, "tensors");
    msgpack_pack_map(&s.pk, 1);
    s_tensor(&s, "y", 0, 16384, 16, true);
    s_str(&s, "nodes");
    msgpack_pack_array(&s.pk, 2);
    msgpack_pack_map(&s.pk, 3);
    s_kv_s(&s, "op", "call");
    s_kv_u(&s, "program", 1);
    s_kv_u(&s, "branch", 1);
    s_node(&s, "silu", "y", NULL, "y");
    for (int k = 0; k < 2; k++) {
        s_req(&s, "replay", 2);
        s_kv_u(&s, "program", 2);
        s_kv_u(&s, "batch", (uint64_t)(3 + 5 * k));
    }
    s_req(&s, "program.release", 1);
    s_kv_u(&s, "id", 1);
    s_req(&s, "replay", 2);
    s_kv_u(&s, "program", 2);
    s_kv_u(&s, "batch", 1);
    s_write(dir, "call", &s);

    /* the operators' verbs (the fuzzer's connection is root's): evict by
     * name, by id and all around replays; kill-session of its own session
     * (refused) and of an id it got back */
    s_register(&s, "/ggfuzz-a", 1 << 20);
    s_define(&s, false);
    s_req(&s, "program.prepare", 1);
    s_kv_u(&s, "id", 1);
    s_req(&s, "admin.evict", 1);
    s_kv_s(&s, "program", "fz");
    s_req(&s, "replay", 2);
    s_kv_u(&s, "program", 1);
    s_kv_u(&s, "batch", 3);
    s_req(&s, "admin.evict", 1);
    s_kv_u(&s, "program", 1);
    s_req(&s, "admin.evict", 1);
    s_str(&s, "all");
    msgpack_pack_true(&s.pk);
    s_req(&s, "replay", 2);
    s_kv_u(&s, "program", 1);
    s_kv_u(&s, "batch", 8);
    s_req(&s, "admin.kill_session", 1);
    s_kv_u(&s, "id", 1);
    s_req(&s, "admin.kill_session", 1);
    s_kv_u(&s, "id", 99);
    s_req(&s, "stats", -1);
    s_write(dir, "admin", &s);

    s_req(&s, "fastpath.open", 1);
    s_kv_u(&s, "entries", 64);
    s_write(dir, "fastpath", &s);
    msgpack_sbuffer_destroy(&s.sb);
}

/* ---- the server ----------------------------------------------------------- */

static void make_shm(const char *name, size_t size)
{
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
        perror(name);
        exit(1);
    }
    close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *seeds = getenv("GG_FUZZ_WRITE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    signal(SIGPIPE, SIG_IGN);
    make_shm("/ggfuzz-a", 1 << 20);
    make_shm("/ggfuzz-b", 4096);
    gg_log_init(getenv("GG_FUZZ_LOG") ? GG_LOG_DEBUG : GG_LOG_ERROR, GG_LOG_TARGET_STDERR);
    gg_config cfg;
    gg_config_defaults(&cfg);
    char err[512];
    snprintf(g_sock, sizeof g_sock, "/tmp/ggfuzz-%d.sock", (int)getpid());
    unlink(g_sock);
    /* replay-mode adaptive, re-measuring every few replays: replays of one
     * bucket then take the graph (hits included) and the eager path in
     * turn, and remembered choices seed programs defined again */
    if (gg_config_set(&cfg, "socket", g_sock, err, sizeof err) < 0 ||
        gg_config_set(&cfg, "backend", "cpu", err, sizeof err) < 0 ||
        gg_config_set(&cfg, "replay-mode", "adaptive", err, sizeof err) < 0 ||
        gg_config_set(&cfg, "adaptive-samples", "1", err, sizeof err) < 0 ||
        gg_config_set(&cfg, "adaptive-recheck", "4", err, sizeof err) < 0) {
        fprintf(stderr, "fuzz_handlers: config: %s\n", err);
        exit(1);
    }
    if (gg_server_init(&g_srv, &cfg, err, sizeof err) < 0) {
        fprintf(stderr, "fuzz_handlers: server: %s\n", err);
        exit(1);
    }
    return 0;
}

/* ---- one input ------------------------------------------------------------ */

typedef struct {
    int fd;
    uint8_t *in;
    size_t len, cap;
    msgpack_unpacked up;
    uint64_t ids[16];
    int nids;
    bool eof;
} fz_client;

/* Run the loop a little and read what came back; answers are checked. */
static void fz_pump(fz_client *c, int wait_ms)
{
    uv_run(g_srv.loop, UV_RUN_NOWAIT);
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, wait_ms) <= 0)
        return;
    for (;;) {
        if (c->cap - c->len < 65536) {
            c->cap = c->cap ? c->cap * 2 : 262144;
            c->in = realloc(c->in, c->cap);
        }
        ssize_t n = recv(c->fd, c->in + c->len, c->cap - c->len, MSG_DONTWAIT);
        if (n == 0) {
            c->eof = true;
            return;
        }
        if (n < 0)
            return;
        c->len += (size_t)n;
    }
}

/* The next whole answer in what was read: its msgid (ids it carried are
 * recorded), or -1 when none is whole yet. */
static int64_t fz_answer(fz_client *c)
{
    size_t off = 0;
    msgpack_unpack_return r = msgpack_unpack_next(&c->up, (const char *)c->in, c->len, &off);
    if (r == MSGPACK_UNPACK_CONTINUE)
        return -1;
    if (r != MSGPACK_UNPACK_SUCCESS) {
        fprintf(stderr, "fuzz_handlers: the daemon sent bytes that are not MessagePack\n");
        abort();
    }
    const msgpack_object *o = &c->up.data;
    bool note = o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 3 &&
                o->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                o->via.array.ptr[0].via.u64 == 2;   /* [2, "error", [...]]: a protocol error */
    if (!note && (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 4 ||
                  o->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
                  o->via.array.ptr[0].via.u64 != 1)) {
        fprintf(stderr, "fuzz_handlers: an answer that is not [1, msgid, error, result]: ");
        msgpack_object_print(stderr, *o);
        fprintf(stderr, "\n");
        abort();
    }
    /* (an answer to bytes with no readable msgid carries nil) */
    int64_t id = !note && o->via.array.ptr[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER
                     ? (int64_t)o->via.array.ptr[1].via.u64 : -2;
    const msgpack_object *res = &o->via.array.ptr[note ? 2 : 3];
    if (!note && res->type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < res->via.map.size; i++) {
            const msgpack_object *k = &res->via.map.ptr[i].key, *v = &res->via.map.ptr[i].val;
            if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == 2 &&
                memcmp(k->via.str.ptr, "id", 2) == 0 && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                && c->nids < 16)
                c->ids[c->nids++] = v->via.u64;
        }
    memmove(c->in, c->in + off, c->len - off);
    c->len -= off;
    return id;
}

static bool id_key(const msgpack_object *k)
{
    static const char *const keys[] = {"id", "buffer", "program", "event", NULL};
    if (k->type != MSGPACK_OBJECT_STR)
        return false;
    for (int i = 0; keys[i]; i++)
        if (k->via.str.size == strlen(keys[i]) && memcmp(k->via.str.ptr, keys[i], k->via.str.size) == 0)
            return true;
    return false;
}

static void fz_subst(fz_client *c, msgpack_object *o, int depth)
{
    if (depth > 8)
        return;
    if (o->type == MSGPACK_OBJECT_MAP) {
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            msgpack_object *v = &o->via.map.ptr[i].val;
            if (id_key(&o->via.map.ptr[i].key) && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                v->via.u64 < 16 && (int)v->via.u64 < c->nids)
                v->via.u64 = c->ids[v->via.u64];
            else
                fz_subst(c, v, depth + 1);
        }
    } else if (o->type == MSGPACK_OBJECT_ARRAY) {
        for (uint32_t i = 0; i < o->via.array.size; i++)
            fz_subst(c, &o->via.array.ptr[i], depth + 1);
    }
}

static void fz_send(fz_client *c, const char *p, size_t n)
{
    double t0 = fz_now();
    while (n > 0) {
        ssize_t k = send(c->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return;   /* the daemon closed us: fine */
        fz_pump(c, 1);
        while (fz_answer(c) != -1)
            ;
        if (fz_now() - t0 > 10) {
            fprintf(stderr, "fuzz_handlers: the daemon stopped reading for 10 s\n");
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_client c = {.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", g_sock);
    if (c.fd < 0 || connect(c.fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("fuzz_handlers: connect");
        abort();
    }
    msgpack_unpacked_init(&c.up);
    msgpack_unpacked req;
    msgpack_unpacked_init(&req);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);

    size_t off = 0;
    while (off < size && !c.eof) {
        size_t at = off;
        /* the daemon's own scanner first: msgpack-c allocates what a header
         * claims (an array of 2^32 values) before it sees the bytes */
        proto_frame f;
        proto_frame_init(&f, 1 << 20);
        long whole = proto_frame_scan(&f, data + off, size - off);
        msgpack_unpack_return r = whole > 0
            ? msgpack_unpack_next(&req, (const char *)data, off + (size_t)whole, &off)
            : MSGPACK_UNPACK_PARSE_ERROR;
        if (r != MSGPACK_UNPACK_SUCCESS) {
            fz_send(&c, (const char *)data + at, size - at);   /* the tail as it is */
            break;
        }
        msgpack_object *o = &req.data;
        bool is_req = o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 4 &&
                      o->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                      o->via.array.ptr[0].via.u64 == 0 &&
                      o->via.array.ptr[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                      o->via.array.ptr[1].via.u64 <= UINT32_MAX;
        if (!is_req) {
            fz_send(&c, (const char *)data + at, off - at);
            continue;
        }
        fz_subst(&c, &o->via.array.ptr[3], 0);
        msgpack_sbuffer_clear(&sb);
        msgpack_pack_object(&pk, *o);
        int64_t want = (int64_t)o->via.array.ptr[1].via.u64;
        fz_send(&c, sb.data, sb.size);
        /* its answer (an async replay's may come later: at most 2 s) */
        double t0 = fz_now();
        for (bool got = false; !got && !c.eof && fz_now() - t0 < 2;) {
            int64_t id;
            while (!got && (id = fz_answer(&c)) != -1)
                got = id == want;
            if (!got)
                fz_pump(&c, 1);
        }
    }
    shutdown(c.fd, SHUT_WR);
    double t0 = fz_now();
    while (!c.eof) {
        fz_pump(&c, 1);
        while (fz_answer(&c) != -1)
            ;
        if (fz_now() - t0 > 10) {
            fprintf(stderr, "fuzz_handlers: the connection was not closed 10 s after the "
                    "client's end\n");
            abort();
        }
    }
    while (fz_answer(&c) != -1)
        ;
    close(c.fd);
    /* let the daemon see the close and end the session */
    for (int i = 0; i < 3; i++)
        uv_run(g_srv.loop, UV_RUN_NOWAIT);
    free(c.in);
    msgpack_unpacked_destroy(&c.up);
    msgpack_unpacked_destroy(&req);
    msgpack_sbuffer_destroy(&sb);
    return 0;
}
