/* SPDX-License-Identifier: MIT */
/* bench_replay: the round trip of one replay through a running gfxgraphd, as
 * a client sees it.
 *
 *   bench_replay [--socket PATH] [--clients N] [--iters N] [--warmup N]
 *                [--program onenode|chain64] [--memory auto|shm|gpu]
 *                [--batch B] [--json FILE] [--label TEXT] [--commit SHA]
 *                [--socket-b PATH [--label-b TEXT] [--json-b FILE] [--blocks N]]
 *
 * N client processes (fork; each its own connection and session) define the
 * program on their own buffers, prepare its bucket (so no capture falls in
 * the timing), warm up, wait at a barrier, then all start together and time
 * every gg_client_replay() round trip with CLOCK_MONOTONIC.
 *
 *   onenode  one `scale` node on [batch, 1024] f32: the daemon's fixed cost
 *            per request (socket, decode, queue, launch, completion, reply)
 *   chain64  layernorm -> gelu, 32 times, d = 1024, f16: 64 dependent nodes,
 *            the decode-like chain of bench_chain_inproc, through the daemon
 *
 * Memory: shm (POSIX shared memory, the cpu backend) or gpu (hipMalloc +
 * gg_client_buffer_register_device, the hip backend; GPU builds only);
 * auto picks by the backend the daemon reports in hello.
 *
 * Reported over all clients' timed replays: round trip p50/p90/p99/mean
 * (us), the daemon's device_us mean, aggregate replays/s (all replays over
 * the wall time from the first start to the last end) and the path counts.
 * --json writes the same with provenance (date, host, daemon backend and
 * device, options, git commit from --commit or $GFXGRAPH_GIT_COMMIT).  The
 * last line of output is a table row starting with "RESULT".
 *
 * --socket-b PATH: a second daemon (another configuration: GFXGRAPH=0,
 * GFXGRAPH_FUSE=0, ...).  Each client then defines the same program, on the
 * same input, on both and times them in --blocks alternating blocks (default
 * 10; A first in even blocks, B first in odd ones), each replay waited for the
 * same way, so that drift falls on both rows; two rows (--label / --label-b,
 * --json / --json-b), each naming the other, with the ratio between them and
 * `work`: "equal" when both daemons planned the same launches per replay and
 * left the same output bytes, else "differs: ..." (fused against unfused).
 *
 * It measures; nothing is asserted.  Exit status: 0, 1 when a replay or a
 * client failed, 2 when the daemon cannot be reached, 64 usage. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gfxgraph/client.h>

#include "internal.h"   /* gg_client_call: program.list's `kernels` */

#ifdef GFXGRAPH_HAVE_GPU
#include "gg_hip.h"
#endif

#define D 1024
#define CHAIN_PAIRS 32
#define MAX_CLIENTS 256

typedef enum { PROG_ONENODE, PROG_CHAIN64 } prog_kind;
typedef enum { MEM_AUTO, MEM_SHM, MEM_GPU } mem_kind;

typedef struct {
    const char *socket;
    int clients, iters, warmup, batch;
    prog_kind prog;
    mem_kind mem;
    const char *json, *label, *commit;
    /* a second daemon timed in the same clients, in alternating blocks */
    const char *socket_b, *json_b, *label_b;
    int blocks;
} options;

/* What a client sends back: this header, then n doubles (round trips, us). */
typedef struct {
    int ok;
    int n;
    int graph, eager, fallback, captured, errors;
    int kernels;                  /* the daemon's launches per replay (program.list), -1 unknown */
    int outputs_equal;            /* with a second daemon: both left the same output bytes */
    double device_us_sum;
    double t_start, t_end;        /* CLOCK_MONOTONIC seconds, first start / last end */
    char err[256];
} client_report;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *prog_name(prog_kind p)
{
    return p == PROG_ONENODE ? "onenode" : "chain64";
}

static const char *mem_name(mem_kind m)
{
    return m == MEM_SHM ? "shm" : m == MEM_GPU ? "gpu" : "auto";
}

static int bucket_of(int batch)
{
    int b = 1;
    while (b < batch)
        b *= 2;
    return b;
}

/* The launches a replay of prog makes as the daemon planned them
 * (program.list `kernels`: 64 for chain64 with fusion off, fewer with it on),
 * or -1: which work a row measured. */
static int program_kernels(gg_client *c, uint64_t prog)
{
    const msgpack_object *r = NULL;
    if (gg_client_call(c, "program.list", NULL, 0, &r) < 0 || r->type != MSGPACK_OBJECT_MAP)
        return -1;
    for (uint32_t i = 0; i < r->via.map.size; i++) {
        const msgpack_object_kv *kv = &r->via.map.ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR || kv->key.via.str.size != 8 ||
            memcmp(kv->key.via.str.ptr, "programs", 8) != 0 || kv->val.type != MSGPACK_OBJECT_ARRAY)
            continue;
        for (uint32_t j = 0; j < kv->val.via.array.size; j++) {
            const msgpack_object *p = &kv->val.via.array.ptr[j];
            int64_t id = -1, k = -1;
            for (uint32_t m = 0; p->type == MSGPACK_OBJECT_MAP && m < p->via.map.size; m++) {
                const msgpack_object_kv *e = &p->via.map.ptr[m];
                if (e->key.type != MSGPACK_OBJECT_STR ||
                    e->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                    continue;
                if (e->key.via.str.size == 2 && memcmp(e->key.via.str.ptr, "id", 2) == 0)
                    id = (int64_t)e->val.via.u64;
                else if (e->key.via.str.size == 7 && memcmp(e->key.via.str.ptr, "kernels", 7) == 0)
                    k = (int64_t)e->val.via.u64;
            }
            if (id == (int64_t)prog)
                return (int)k;
        }
    }
    return -1;
}

/* ---- one client ----------------------------------------------------------- */

typedef struct {
    gg_client *c;
    mem_kind mem;
    void *host;                   /* shm mapping */
    char shm_name[64];
    void *dev;                    /* gpu allocation */
    size_t size, off_y, ylen;     /* the output: where and how many bytes */
    uint64_t buf, prog;
    bool have_buf, have_prog;
} client_state;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* Fill the buffer image: f32 x in [-1, 1); f16 x of magnitude 0.5..1 with a
 * random sign, w = 1, b = 0 (built from bits; no conversion library). */
static void fill_image(uint8_t *img, prog_kind pk, int rows, size_t off_x, size_t off_w,
                       size_t off_b)
{
    if (pk == PROG_ONENODE) {
        float *x = (float *)(img + off_x);
        for (size_t i = 0; i < (size_t)rows * D; i++)
            x[i] = (float)((double)rnd32() / 2147483648.0 - 1.0);
        return;
    }
    uint16_t *x = (uint16_t *)(img + off_x), *w = (uint16_t *)(img + off_w),
             *b = (uint16_t *)(img + off_b);
    for (size_t i = 0; i < (size_t)rows * D; i++) {
        uint32_t r = rnd32();
        x[i] = (uint16_t)(((r >> 31) << 15) | (14u << 10) | (r & 0x3ffu));
    }
    for (int i = 0; i < D; i++) {
        w[i] = 0x3c00;
        b[i] = 0;
    }
}

static int bench_fail(client_report *rep, const char *what, gg_client *c)
{
    snprintf(rep->err, sizeof rep->err, "%s: %s (%s)", what, c ? gg_client_last_error(c) : "",
             c ? gg_client_last_error_code(c) : "");
    return -1;
}

static int client_setup(const options *o, int idx, client_state *st, client_report *rep)
{
    gg_client *c = st->c;
    const int rows = bucket_of(o->batch);
    const size_t es = o->prog == PROG_ONENODE ? 4 : 2;
    const size_t act = (size_t)rows * D * es;
    const size_t off_x = 0, off_y = act, off_w = 2 * act, off_b = 2 * act + D * es;
    st->size = 2 * act + 2 * D * es;
    st->off_y = off_y;
    st->ylen = (size_t)o->batch * D * es;

    uint8_t *img = calloc(1, st->size);
    if (!img) {
        snprintf(rep->err, sizeof rep->err, "out of memory");
        return -1;
    }
    /* the same input for a client's program on either daemon */
    rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(idx + 1) * 0x2545f4914f6cdd1dull;
    fill_image(img, o->prog, rows, off_x, off_w, off_b);

    int rc;
    if (st->mem == MEM_SHM) {
        snprintf(st->shm_name, sizeof st->shm_name, "/gg-bench-%ld-%d", (long)getpid(), idx);
        if ((rc = gg_client_shm_create(st->shm_name, st->size, &st->host)) < 0) {
            snprintf(rep->err, sizeof rep->err, "shm %s: %s", st->shm_name, strerror(-rc));
            st->host = NULL;
            free(img);
            return -1;
        }
        memcpy(st->host, img, st->size);
        free(img);
        rc = gg_client_buffer_register_shm(c, st->shm_name, 0, st->size, &st->buf);
        /* the daemon keeps its own mapping: the name can go now; this one
         * stays, to read the output */
        gg_client_shm_destroy(st->shm_name, NULL, 0);
        st->shm_name[0] = '\0';
        if (rc < 0)
            return bench_fail(rep, "buffer.register (shm)", c);
    } else {
#ifdef GFXGRAPH_HAVE_GPU
        hipError_t e = hipMalloc(&st->dev, st->size);
        if (e == hipSuccess)
            e = hipMemcpy(st->dev, img, st->size, hipMemcpyHostToDevice);
        free(img);
        if (e != hipSuccess) {
            snprintf(rep->err, sizeof rep->err, "hipMalloc/hipMemcpy of %zu bytes: %s", st->size,
                     hipGetErrorString(e));
            return -1;
        }
        if (gg_client_buffer_register_device(c, st->dev, st->size, &st->buf) < 0)
            return bench_fail(rep, "buffer.register (device)", c);
#else
        free(img);
        snprintf(rep->err, sizeof rep->err, "--memory gpu needs a GPU build");
        return -1;
#endif
    }
    st->have_buf = true;

    int buckets[17], nb = 0;
    for (int b = 1; b <= rows; b *= 2)
        buckets[nb++] = b;
    const int64_t adims[] = {GG_BATCH, D}, vdims[] = {D};
    gg_program_def *d = gg_program_def_new(prog_name(o->prog));
    if (!d) {
        snprintf(rep->err, sizeof rep->err, "out of memory");
        return -1;
    }
    if (o->prog == PROG_ONENODE) {
        gg_program_def_tensor(d, "x", st->buf, off_x, "f32", 2, adims);
        gg_program_def_tensor(d, "y", st->buf, off_y, "f32", 2, adims);
        gg_program_def_op(d, "scale", "x", "y");
        gg_program_def_attr_f(d, "scale", 0.5);
    } else {
        gg_program_def_tensor(d, "x", st->buf, off_x, "f16", 2, adims);
        gg_program_def_tensor(d, "y", st->buf, off_y, "f16", 2, adims);
        gg_program_def_tensor(d, "w", st->buf, off_w, "f16", 1, vdims);
        gg_program_def_tensor(d, "b", st->buf, off_b, "f16", 1, vdims);
        gg_program_def_scratch(d, "t", "f16", 2, adims);
        gg_program_def_scratch(d, "a", "f16", 2, adims);
        for (int i = 0; i < CHAIN_PAIRS; i++) {
            gg_program_def_op(d, "layernorm", i == 0 ? "x,w,b" : "a,w,b", "t");
            gg_program_def_op(d, "gelu", "t", i == CHAIN_PAIRS - 1 ? "y" : "a");
        }
    }
    gg_program_def_buckets(d, nb, buckets);
    rc = gg_client_program_define(c, d, &st->prog);
    gg_program_def_free(d);
    if (rc < 0)
        return bench_fail(rep, "program.define", c);
    st->have_prog = true;
    rep->kernels = program_kernels(c, st->prog);

    int bucket = rows, ready = 0, failed = 0;
    rc = gg_client_program_prepare(c, st->prog, 1, &bucket, 0, &ready, &failed);
    if (rc == -EPERM && idx == 0)       /* GFXGRAPH=0: graphs are off, every replay is eager */
        fprintf(stderr, "bench_replay: %s: replays run eagerly\n", gg_client_last_error(c));
    else if (rc < 0 && rc != -EPERM)
        return bench_fail(rep, "program.prepare", c);
    if (failed)
        fprintf(stderr, "bench_replay: client %d: the capture of bucket %d failed; its replays "
                "run eagerly (fallback)\n", idx, bucket);
    for (int i = 0; i < o->warmup; i++)
        if (gg_client_replay(c, st->prog, o->batch, 0, NULL) < 0)
            return bench_fail(rep, "warm-up replay", c);
    return 0;
}

static void client_teardown(client_state *st)
{
    if (st->c && gg_client_connected(st->c)) {
        if (st->have_prog)
            gg_client_program_release(st->c, st->prog);
        if (st->have_buf)
            gg_client_buffer_release(st->c, st->buf);
    }
    if (st->host)
        gg_client_shm_destroy(st->shm_name[0] ? st->shm_name : NULL, st->host, st->size);
#ifdef GFXGRAPH_HAVE_GPU
    if (st->dev)
        hipFree(st->dev);
#endif
    gg_client_close(st->c);
}

static bool write_full(int fd, const void *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p = (const char *)p + w;
        n -= (size_t)w;
    }
    return true;
}

static bool read_full(int fd, void *p, size_t n)
{
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p = (char *)p + r;
        n -= (size_t)r;
    }
    return true;
}

/* The output bytes of a client's program (after its replays), into out. */
static int read_output(const client_state *st, void *out)
{
    if (st->host) {
        memcpy(out, (const char *)st->host + st->off_y, st->ylen);
        return 0;
    }
#ifdef GFXGRAPH_HAVE_GPU
    if (st->dev &&
        hipMemcpy(out, (char *)st->dev + st->off_y, st->ylen, hipMemcpyDeviceToHost) == hipSuccess)
        return 0;
#endif
    return -1;
}

/* n timed replays of one side's program into rep/rt */
static void timed_replays(const options *o, client_state *st, client_report *rep, double *rt,
                          int n)
{
    for (int i = 0; i < n && rep->ok; i++) {
        gg_replay_result r;
        double t0 = now_s();
        int rc = gg_client_replay(st->c, st->prog, o->batch, 0, &r);
        double t1 = now_s();
        if (rc < 0) {
            rep->errors++;
            bench_fail(rep, "replay", st->c);
            rep->ok = 0;
            break;
        }
        rt[rep->n++] = (t1 - t0) * 1e6;
        rep->device_us_sum += r.device_us;
        rep->graph += r.path == GG_PATH_GRAPH;
        rep->eager += r.path == GG_PATH_EAGER;
        rep->fallback += r.fallback;
        rep->captured += r.captured;
    }
}

/* The child's whole life.  ready_fd: one byte when set up ('r') or failed
 * ('e'); go_fd: one 'g' each to start (EOF: give up); out_fd: the report of
 * each side (one; two with --socket-b), each followed by its round trips.
 * With a second daemon the client times the same program on both in
 * alternating blocks (A first in even blocks, B first in odd ones), so
 * that drift on the host or the device falls on both rows. */
static int client_main(const options *o, int idx, mem_kind mem, int ready_fd, int go_fd,
                       int out_fd)
{
    const int sides = o->socket_b ? 2 : 1;
    client_report rep[2];
    client_state st[2];
    double *rt[2] = {NULL, NULL};
    memset(rep, 0, sizeof rep);
    memset(st, 0, sizeof st);
    int setup = 0;
    for (int k = 0; k < sides; k++) {
        rep[k].kernels = -1;
        rep[k].outputs_equal = -1;
        rt[k] = calloc((size_t)o->iters, sizeof(double));
        st[k].mem = mem;
        st[k].c = gg_client_new();
        if (!rt[k] || !st[k].c) {
            snprintf(rep[k].err, sizeof rep[k].err, "out of memory");
            setup = -1;
            continue;
        }
        char name[48];
        snprintf(name, sizeof name, "bench_replay/%d%s", idx, k ? "b" : "");
        gg_client_set_timeout(st[k].c, 120000);
        if (setup == 0 && gg_client_connect(st[k].c, k ? o->socket_b : o->socket, name) < 0)
            setup = bench_fail(&rep[k], "connect", st[k].c);
        else if (setup == 0)
            setup = client_setup(o, idx, &st[k], &rep[k]);
    }
    char ch = setup == 0 ? 'r' : 'e';
    bool go = write_full(ready_fd, &ch, 1) && setup == 0 && read_full(go_fd, &ch, 1) && ch == 'g';
    if (go) {
        for (int k = 0; k < sides; k++) {
            rep[k].ok = 1;
            rep[k].t_start = now_s();
        }
        int blocks = sides == 2 ? o->blocks : 1, done = 0;
        for (int b = 0; b < blocks && rep[0].ok && rep[sides - 1].ok; b++) {
            int n = (o->iters - done) / (blocks - b);
            for (int j = 0; j < sides; j++) {
                int k = b % 2 ? sides - 1 - j : j;
                timed_replays(o, &st[k], &rep[k], rt[k], n);
            }
            done += n;
        }
        for (int k = 0; k < sides; k++)
            rep[k].t_end = now_s();
        if (sides == 2 && rep[0].ok && rep[1].ok) {
            void *ya = malloc(st[0].ylen), *yb = malloc(st[1].ylen);
            if (ya && yb && read_output(&st[0], ya) == 0 && read_output(&st[1], yb) == 0)
                rep[0].outputs_equal = rep[1].outputs_equal =
                    st[0].ylen == st[1].ylen && memcmp(ya, yb, st[0].ylen) == 0;
            free(ya);
            free(yb);
        }
    }
    bool sent = true;
    for (int k = 0; k < sides; k++) {
        if (!go && k > 0 && !rep[k].err[0])
            snprintf(rep[k].err, sizeof rep[k].err, "%s", rep[0].err);
        client_teardown(&st[k]);
        sent = sent && write_full(out_fd, &rep[k], sizeof rep[k]) &&
               (rep[k].n == 0 || write_full(out_fd, rt[k], sizeof(double) * (size_t)rep[k].n));
    }
    bool ok = rep[0].ok && rep[sides - 1].ok;
    free(rt[0]);
    free(rt[1]);
    return sent && ok ? 0 : 1;
}

/* ---- the parent: statistics and output ------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* nearest rank on sorted v */
static double pct(const double *v, int n, double p)
{
    if (n <= 0)
        return NAN;
    int r = (int)ceil(p / 100.0 * n) - 1;
    return v[r < 0 ? 0 : r >= n ? n - 1 : r];
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.3f", v);
    else
        fputs("null", f);
}

/* One row: one daemon's replays over all clients. */
typedef struct {
    char label[128], backend[16], version[32], device[128], arch[64], sock[256];
    char work[512];
    double *all, *p50s;
    int total, graph, eager, fallback, captured, failed, np50, kernels;
    int outputs_equal;            /* -1 unknown (one daemon, or not read) */
    double dev_sum, t0, t1;
    double p50, p90, p99, mean, dev_mean, wall, rps;
} side_row;

static void row_finish(side_row *w)
{
    qsort(w->all, (size_t)w->total, sizeof(double), cmp_double);
    qsort(w->p50s, (size_t)w->np50, sizeof(double), cmp_double);
    double sum = 0;
    for (int i = 0; i < w->total; i++)
        sum += w->all[i];
    w->p50 = pct(w->all, w->total, 50);
    w->p90 = pct(w->all, w->total, 90);
    w->p99 = pct(w->all, w->total, 99);
    w->mean = sum / w->total;
    w->dev_mean = w->dev_sum / w->total;
    w->wall = w->t1 - w->t0;
    w->rps = w->wall > 0 ? w->total / w->wall : NAN;
}

/* Two daemons' rows did the same work when the daemons planned the same
 * launches per replay and left the same output bytes; else the label says
 * how they differ (a graph against eager is the same work launched two
 * ways; fused against unfused is not). */
static void work_label(const options *o, const side_row *r, char *buf, size_t len)
{
    (void)o;
    if (r[0].kernels >= 0 && r[0].kernels == r[1].kernels && r[0].outputs_equal == 1)
        snprintf(buf, len, "equal");
    else if (r[0].kernels != r[1].kernels)
        snprintf(buf, len, "differs: %d launches per replay (%s) against %d (%s); outputs %s",
                 r[0].kernels, r[0].label, r[1].kernels, r[1].label,
                 r[0].outputs_equal == 1 ? "the same bytes"
                 : r[0].outputs_equal == 0 ? "not the same bytes" : "not compared");
    else
        snprintf(buf, len, "differs: the same %d launches per replay, but outputs %s",
                 r[0].kernels, r[0].outputs_equal == 0 ? "not the same bytes" : "not compared");
}

static int nodes_of(const options *o)
{
    return o->prog == PROG_ONENODE ? 1 : 2 * CHAIN_PAIRS;
}

static void row_print(const options *o, mem_kind mem, const side_row *w, const side_row *other)
{
    (void)mem;
    printf("%s:\n", w->label);
    printf("  round trip us: p50 %.1f  p90 %.1f  p99 %.1f  mean %.1f  (min %.1f, max %.1f)\n",
           w->p50, w->p90, w->p99, w->mean, w->all[0], w->all[w->total - 1]);
    if (w->np50 > 1)
        printf("  per-client p50 us: %.1f .. %.1f\n", w->p50s[0], w->p50s[w->np50 - 1]);
    printf("  daemon device_us mean %.1f; %d replays in %.3f s = %.0f replays/s%s\n", w->dev_mean,
           w->total, w->wall, w->rps, other ? " (wall time shared with the other row's blocks)" : "");
    printf("  path: %d graph, %d eager (%d fallback), %d captured in the timing%s\n", w->graph,
           w->eager, w->fallback, w->captured, w->failed ? "; SOME CLIENTS FAILED" : "");
    printf("  launches per replay (the daemon's plan): %d of %d nodes%s\n", w->kernels,
           nodes_of(o), w->kernels >= 0 && w->kernels < nodes_of(o) ? " (fused)" : "");
    if (other)
        printf("  against %s, interleaved: p50 x%.3f, p99 x%.3f; work: %s%s\n", other->label,
               w->p50 / other->p50, w->p99 / other->p99, w->work,
               strncmp(w->work, "differs", 7) == 0 ? "  (NOT EQUAL WORK)" : "");
}

static int row_json(const options *o, mem_kind mem, const side_row *w, const side_row *other,
                    const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    struct utsname un;
    if (uname(&un) != 0)
        memset(&un, 0, sizeof un);
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "{\n  \"bench\": \"bench_replay\",\n  \"label\": ");
    json_str(f, w->label);
    fprintf(f, ",\n  \"date\": ");
    json_str(f, date);
    fprintf(f, ",\n  \"host\": {\"nodename\": ");
    json_str(f, un.nodename);
    fprintf(f, ", \"sysname\": ");
    json_str(f, un.sysname);
    fprintf(f, ", \"release\": ");
    json_str(f, un.release);
    fprintf(f, ", \"machine\": ");
    json_str(f, un.machine);
    fprintf(f, ", \"cpus\": %ld},\n  \"git_commit\": ", sysconf(_SC_NPROCESSORS_ONLN));
    if (o->commit && *o->commit)
        json_str(f, o->commit);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"daemon\": {\"socket\": ");
    json_str(f, w->sock);
    fprintf(f, ", \"version\": ");
    json_str(f, w->version);
    fprintf(f, ", \"backend\": ");
    json_str(f, w->backend);
    fprintf(f, ", \"device\": ");
    json_str(f, w->device);
    fprintf(f, ", \"arch\": ");
    json_str(f, w->arch);
    fprintf(f, "},\n  \"options\": {\"program\": \"%s\", \"nodes\": %d, \"dtype\": \"%s\", "
            "\"d\": %d, \"memory\": \"%s\", \"clients\": %d, \"iters\": %d, "
            "\"warmup\": %d, \"batch\": %d, \"bucket\": %d},\n",
            prog_name(o->prog), nodes_of(o), o->prog == PROG_ONENODE ? "f32" : "f16", D,
            mem_name(mem), o->clients, o->iters, o->warmup, o->batch, bucket_of(o->batch));
    fprintf(f, "  \"daemon_kernels\": %d,\n  \"fused\": %s,\n", w->kernels,
            w->kernels < 0 ? "null" : w->kernels < nodes_of(o) ? "true" : "false");
    if (other) {
        fprintf(f, "  \"interleaved_with\": ");
        json_str(f, other->label);
        fprintf(f, ",\n  \"blocks\": %d,\n  \"work\": ", o->blocks);
        json_str(f, w->work);
        fprintf(f, ",\n  \"outputs_equal\": %s,\n  \"ratio_to_other\": {\"p50\": ",
                w->outputs_equal < 0 ? "null" : w->outputs_equal ? "true" : "false");
        json_num(f, w->p50 / other->p50);
        fprintf(f, ", \"p99\": ");
        json_num(f, w->p99 / other->p99);
        fprintf(f, "},\n");
    } else {
        fprintf(f, "  \"interleaved_with\": null,\n");
    }
    fprintf(f, "  \"replays\": %d,\n  \"failed_clients\": %d,\n  \"round_trip_us\": {",
            w->total, w->failed);
    fprintf(f, "\"p50\": ");
    json_num(f, w->p50);
    fprintf(f, ", \"p90\": ");
    json_num(f, w->p90);
    fprintf(f, ", \"p99\": ");
    json_num(f, w->p99);
    fprintf(f, ", \"mean\": ");
    json_num(f, w->mean);
    fprintf(f, ", \"min\": ");
    json_num(f, w->all[0]);
    fprintf(f, ", \"max\": ");
    json_num(f, w->all[w->total - 1]);
    fprintf(f, "},\n  \"per_client_p50_us\": {\"min\": ");
    json_num(f, w->p50s[0]);
    fprintf(f, ", \"max\": ");
    json_num(f, w->p50s[w->np50 - 1]);
    fprintf(f, "},\n  \"device_us_mean\": ");
    json_num(f, w->dev_mean);
    fprintf(f, ",\n  \"wall_s\": ");
    json_num(f, w->wall);
    fprintf(f, ",\n  \"replays_per_s\": ");
    json_num(f, w->rps);
    fprintf(f, ",\n  \"path\": {\"graph\": %d, \"eager\": %d, \"fallback\": %d, "
            "\"captured\": %d}\n}\n", w->graph, w->eager, w->fallback, w->captured);
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_replay [--socket PATH] [--clients N] [--iters N] [--warmup N]\n"
            "                    [--program onenode|chain64] [--memory auto|shm|gpu]\n"
            "                    [--batch B] [--json FILE] [--label TEXT] [--commit SHA]\n"
            "                    [--socket-b PATH [--label-b TEXT] [--json-b FILE] [--blocks N]]\n"
            "\n"
            "  --socket PATH   the daemon's socket (default: the client library's default)\n"
            "  --clients N     client processes, each its own session (1)\n"
            "  --iters N       timed replays per client (2000)\n"
            "  --warmup N      untimed replays per client first (100)\n"
            "  --program P     onenode: one scale on [batch, 1024] f32 (default);\n"
            "                  chain64: (layernorm -> gelu) x 32, d 1024, f16\n"
            "  --memory M      shm (cpu backend), gpu (hip backend, GPU builds), auto (by backend)\n"
            "  --batch B       rows per replay (1); the program's buckets are 1, 2, 4 .. >= B\n"
            "  --json FILE     write the results with provenance\n"
            "  --label TEXT    a name for this run (default program-memory-cN)\n"
            "  --commit SHA    the source's git commit, for the JSON ($GFXGRAPH_GIT_COMMIT)\n"
            "  --socket-b PATH a second daemon: every client times the same program on both,\n"
            "                  in alternating blocks; two rows, each naming the other\n"
            "  --label-b TEXT  the second row's name (default: the first's with -b)\n"
            "  --json-b FILE   the second row's JSON (as --json's)\n"
            "  --blocks N      alternating blocks with --socket-b (10)\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    options o = {NULL, 1, 2000, 100, 1, PROG_ONENODE, MEM_AUTO, NULL, NULL, NULL,
                 NULL, NULL, NULL, 10};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool bad = false;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            bad = true;
        } else if (!strcmp(a, "--socket")) {
            o.socket = v;
        } else if (!strcmp(a, "--clients")) {
            bad = parse_int(v, 1, MAX_CLIENTS, &o.clients) < 0;
        } else if (!strcmp(a, "--iters")) {
            bad = parse_int(v, 1, 10000000, &o.iters) < 0;
        } else if (!strcmp(a, "--warmup")) {
            bad = parse_int(v, 0, 10000000, &o.warmup) < 0;
        } else if (!strcmp(a, "--batch")) {
            bad = parse_int(v, 1, 65536, &o.batch) < 0;
        } else if (!strcmp(a, "--program")) {
            if (!strcmp(v, "onenode")) o.prog = PROG_ONENODE;
            else if (!strcmp(v, "chain64")) o.prog = PROG_CHAIN64;
            else bad = true;
        } else if (!strcmp(a, "--memory")) {
            if (!strcmp(v, "auto")) o.mem = MEM_AUTO;
            else if (!strcmp(v, "shm")) o.mem = MEM_SHM;
            else if (!strcmp(v, "gpu")) o.mem = MEM_GPU;
            else bad = true;
        } else if (!strcmp(a, "--json")) {
            o.json = v;
        } else if (!strcmp(a, "--label")) {
            o.label = v;
        } else if (!strcmp(a, "--commit")) {
            o.commit = v;
        } else if (!strcmp(a, "--socket-b")) {
            o.socket_b = v;
        } else if (!strcmp(a, "--label-b")) {
            o.label_b = v;
        } else if (!strcmp(a, "--json-b")) {
            o.json_b = v;
        } else if (!strcmp(a, "--blocks")) {
            bad = parse_int(v, 1, 10000, &o.blocks) < 0;
        } else {
            bad = true;
        }
        if (bad) {
            fprintf(stderr, "bench_replay: bad or incomplete option '%s%s%s'\n", a, v ? " " : "",
                    v ? v : "");
            usage(stderr);
            return 64;
        }
        i++;
    }
    if (o.socket_b && o.blocks > o.iters) {
        fprintf(stderr, "bench_replay: --blocks %d exceeds --iters %d\n", o.blocks, o.iters);
        return 64;
    }
    if (!o.commit)
        o.commit = getenv("GFXGRAPH_GIT_COMMIT");
    signal(SIGPIPE, SIG_IGN);

    /* hello, for the provenance and the memory kind (no GPU runtime here:
     * the children must start with a clean one) */
    const int sides = o.socket_b ? 2 : 1;
    side_row rows[2];
    memset(rows, 0, sizeof rows);
    for (int k = 0; k < sides; k++) {
        side_row *w = &rows[k];
        gg_client *c = gg_client_new();
        if (!c || gg_client_connect(c, k ? o.socket_b : o.socket, "bench_replay") < 0) {
            fprintf(stderr, "bench_replay: %s%s\n", k ? "--socket-b: " : "",
                    c ? gg_client_last_error(c) : "out of memory");
            gg_client_close(c);
            return 2;
        }
        snprintf(w->backend, sizeof w->backend, "%s", gg_client_backend(c));
        snprintf(w->version, sizeof w->version, "%s", gg_client_server_version(c));
        snprintf(w->device, sizeof w->device, "%s", gg_client_device_name(c));
        snprintf(w->arch, sizeof w->arch, "%s", gg_client_device_arch(c));
        snprintf(w->sock, sizeof w->sock, "%s", gg_client_socket_path(c));
        gg_client_close(c);
    }
    if (sides == 2 && strcmp(rows[0].backend, rows[1].backend) != 0) {
        fprintf(stderr, "bench_replay: the two daemons run different backends (%s, %s)\n",
                rows[0].backend, rows[1].backend);
        return 64;
    }
    mem_kind mem = o.mem;
    if (mem == MEM_AUTO)
        mem = strcmp(rows[0].backend, "cpu") == 0 ? MEM_SHM : MEM_GPU;
#ifndef GFXGRAPH_HAVE_GPU
    if (mem == MEM_GPU) {
        fprintf(stderr, "bench_replay: the daemon's backend is %s; --memory gpu needs a build "
                "with GPU support (GFXGRAPH_GPU=cuda|hip)\n", rows[0].backend);
        return 64;
    }
#endif
    if (o.label)
        snprintf(rows[0].label, sizeof rows[0].label, "%s", o.label);
    else
        snprintf(rows[0].label, sizeof rows[0].label, "%s-%s-c%d", prog_name(o.prog),
                 mem_name(mem), o.clients);
    if (o.label_b)
        snprintf(rows[1].label, sizeof rows[1].label, "%s", o.label_b);
    else
        snprintf(rows[1].label, sizeof rows[1].label, "%.120s-b", rows[0].label);
    for (int k = 0; k < sides; k++)
        printf("bench_replay %s: %s on %s (%s%s%s), %d client%s x %d replays (warm-up %d), "
               "batch %d, memory %s%s%s%s\n",
               rows[k].label, prog_name(o.prog), rows[k].backend, rows[k].device,
               rows[k].arch[0] ? ", " : "", rows[k].arch, o.clients, o.clients == 1 ? "" : "s",
               o.iters, o.warmup, o.batch, mem_name(mem),
               sides == 2 ? "; in alternating blocks with " : "",
               sides == 2 ? rows[1 - k].label : "", sides == 2 ? "" : "");
    fflush(stdout);

    /* the clients */
    int ready[2], go[2];
    if (pipe(ready) < 0 || pipe(go) < 0) {
        perror("pipe");
        return 1;
    }
    pid_t pids[MAX_CLIENTS];
    int outs[MAX_CLIENTS];
    int n = 0;
    for (; n < o.clients; n++) {
        int p[2];
        if (pipe(p) < 0) {
            perror("pipe");
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            close(p[0]);
            close(p[1]);
            break;
        }
        if (pid == 0) {
            close(ready[0]);
            close(go[1]);
            close(p[0]);
            for (int k = 0; k < n; k++)
                close(outs[k]);
            _exit(client_main(&o, n, mem, ready[1], go[0], p[1]));
        }
        close(p[1]);
        pids[n] = pid;
        outs[n] = p[0];
    }
    close(ready[1]);
    close(go[0]);
    int nready = 0, nbad = 0;
    while (nready + nbad < n) {
        struct pollfd pf = {ready[0], POLLIN, 0};
        char ch;
        if (poll(&pf, 1, 300000) != 1 || read(ready[0], &ch, 1) != 1)
            break;
        if (ch == 'r')
            nready++;
        else
            nbad++;
    }
    bool start = n == o.clients && nready == n;
    if (start) {
        char gos[MAX_CLIENTS];
        memset(gos, 'g', sizeof gos);
        start = write_full(go[1], gos, (size_t)n);
    }
    close(go[1]);
    close(ready[0]);

    /* collect */
    for (int k = 0; k < sides; k++) {
        rows[k].all = calloc((size_t)n * (size_t)o.iters + 1, sizeof(double));
        rows[k].p50s = calloc((size_t)n + 1, sizeof(double));
        rows[k].kernels = -1;
        rows[k].outputs_equal = sides == 2 ? 1 : -1;
        rows[k].t0 = INFINITY;
        rows[k].t1 = -INFINITY;
    }
    for (int c = 0; c < n; c++) {
        for (int k = 0; k < sides; k++) {
            side_row *w = &rows[k];
            client_report rep;
            bool got = read_full(outs[c], &rep, sizeof rep) && rep.n >= 0 && rep.n <= o.iters &&
                       w->all && w->p50s &&
                       read_full(outs[c], w->all + w->total, sizeof(double) * (size_t)rep.n);
            if (!got) {
                w->failed++;
                fprintf(stderr, "bench_replay: client %d sent no report%s\n", c,
                        k ? " for --socket-b" : "");
                continue;
            }
            if (!rep.ok) {
                w->failed++;
                fprintf(stderr, "bench_replay: client %d%s: %s\n", c, k ? " (--socket-b)" : "",
                        rep.err[0] ? rep.err : "did not start (another client failed)");
            }
            if (rep.n > 0) {
                qsort(w->all + w->total, (size_t)rep.n, sizeof(double), cmp_double);
                w->p50s[w->np50++] = pct(w->all + w->total, rep.n, 50);
                if (rep.t_start < w->t0)
                    w->t0 = rep.t_start;
                if (rep.t_end > w->t1)
                    w->t1 = rep.t_end;
            }
            if (c == 0)
                w->kernels = rep.kernels;
            if (sides == 2 && rep.outputs_equal != 1)
                w->outputs_equal = rep.outputs_equal < 0 && w->outputs_equal != 0 ? -1 : 0;
            w->total += rep.n;
            w->graph += rep.graph;
            w->eager += rep.eager;
            w->fallback += rep.fallback;
            w->captured += rep.captured;
            w->dev_sum += rep.device_us_sum;
        }
        close(outs[c]);
        int st = 0;
        waitpid(pids[c], &st, 0);
    }
    int rc = 0;
    for (int k = 0; k < sides; k++) {
        side_row *w = &rows[k];
        if (!start && w->failed == 0)
            w->failed = 1;
        if (w->total == 0 || !w->all || !w->p50s) {
            fprintf(stderr, "bench_replay: no replays were timed%s\n", k ? " on --socket-b" : "");
            for (int j = 0; j < sides; j++) {
                free(rows[j].all);
                free(rows[j].p50s);
            }
            return 1;
        }
        row_finish(w);
    }
    if (sides == 2)
        work_label(&o, rows, rows[0].work, sizeof rows[0].work);
    for (int k = 0; k < sides; k++) {
        side_row *w = &rows[k], *other = sides == 2 ? &rows[1 - k] : NULL;
        if (k > 0)
            memcpy(w->work, rows[0].work, sizeof w->work);
        row_print(&o, mem, w, other);
        const char *jf = k ? o.json_b : o.json;
        if (jf && row_json(&o, mem, w, other, jf) < 0)
            rc = 1;
        if (w->failed)
            rc = 1;
    }
    /* label program memory clients iters p50 p90 p99 mean device_us replays/s graph eager
     * launches-per-replay */
    for (int k = 0; k < sides; k++) {
        side_row *w = &rows[k];
        printf("RESULT %-22s %-8s %-4s %7d %6d %9.1f %9.1f %9.1f %9.1f %9.1f %10.0f %7d %7d %6d\n",
               w->label, prog_name(o.prog), mem_name(mem), o.clients, o.iters, w->p50, w->p90,
               w->p99, w->mean, w->dev_mean, w->rps, w->graph, w->eager, w->kernels);
        free(w->all);
        free(w->p50s);
    }
    return rc;
}
