/* SPDX-License-Identifier: MIT */
/* bench_fastpath: what the fast path (PROTOCOL.md section 15) buys, in one
 * run: the same replays through the fast path, through the socket
 * (GFXGRAPH_FASTPATH=0), and launched in this process without the daemon,
 * every comparison between the same kernels.
 *
 *   bench_fastpath [--socket PATH] [--socket-unfused PATH] [--iters N]
 *                  [--warmup N] [--clients N] [--tput-iters N]
 *                  [--memory auto|shm|gpu] [--no-inproc] [--json FILE]
 *                  [--commit SHA]
 *
 * 1. Latency, one process (a child: the GPU runtime is never started in the
 *    parent, whose forks must start clean), for each row:
 *      onenode          one `scale` on [1, 1024] f32 (one launch)
 *      chain64_fused    (layernorm -> gelu) x 32, batch 1, d = 1024, f16, the
 *                       decode chain of bench_chain_inproc and bench_replay,
 *                       through the daemon at --socket, which fuses it
 *                       (core/fuse.h: two row-chain kernels); in process,
 *                       the same two row chains (gg_gpu_rowchain_launch)
 *      chain64_unfused  the same program through the daemon at
 *                       --socket-unfused, started with GFXGRAPH_FUSE=0 (64
 *                       launches); in process, the 64 kernels (without
 *                       --socket-unfused the row is not measured)
 *    Each row's launches per replay are the daemon's own count (program.list
 *    `kernels`) beside the in-process graph's; the JSON's `work` says
 *    "equal" only when they match, and `outputs_equal` whether the daemon's
 *    output bytes are the in-process graph's.
 *    - fast:    a client connected with the default environment (the fast
 *               path when the daemon offers it; gg_client_fastpath_status()
 *               is recorded and the run says so when it is not in use);
 *    - socket:  a second client, connected with GFXGRAPH_FASTPATH=0 set (the
 *               environment is read at connect);
 *    - inproc:  GPU builds with the daemon on device memory: the row's graph
 *               captured here (the project's kernels on a stream of this
 *               process), each launch followed by a device write of a
 *               host-mapped word that the host spins on: the completion wait
 *               of a fast-path replay, whose record the device writes too;
 *    - inproc_sync: the same launch waited for with hipStreamSynchronize (the
 *               wait a program using its own graphs would write);
 *    - device:  the same graph launch between two events: the GPU's own time.
 *    All paths are timed in interleaved blocks (fast, socket, inproc,
 *    inproc_sync, device; --iters each in all, in 10 blocks) so that drift
 *    falls on all of them; every round trip is timed with CLOCK_MONOTONIC.
 *    The daemon's device_us: socket replays report it; fast replays with the
 *    TIMED flag (gg_replay_opts.timed) measure it, in a separate untimed
 *    pass.  Derived: each path's p50 minus the device p50 (the cost of
 *    getting the work there and the answer back), and the ratios
 *    fast / inproc (target <= 1.0), fast / inproc_sync, fast / socket.
 * 2. Throughput: --clients client processes (16) at once, each its own
 *    session, onenode, --tput-iters replays each after a barrier: aggregate
 *    replays/s (all replays over first start to last end), on the fast path
 *    and then on the socket path.
 *
 * Memory: shm (the cpu backend), gpu (hipMalloc +
 * gg_client_buffer_register_device; the hip backend, GPU builds), auto (by
 * the backend hello reports).  The in-process paths need a GPU build and gpu
 * memory; otherwise they are reported as null.
 *
 * It measures; nothing is asserted.  The last lines are rows starting with
 * "FASTPATH".  Exit
 * status: 0; 1 when a client or a replay failed; 2 when the daemon cannot be
 * reached; 64 usage. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gfxgraph/client.h>

#include "internal.h"   /* gg_client_call: program.list's `kernels` */

#ifdef GFXGRAPH_HAVE_GPU
#include "gg_hip.h"
#include "gpu_ops.h"
#include "ops.h"
#endif

#define D 1024
#define CHAIN_PAIRS 32
#define MAX_CLIENTS 128
#define MAX_ITERS 1000000
#define BLOCKS 10

typedef enum { PROG_ONENODE = 0, PROG_CHAIN_FUSED, PROG_CHAIN_UNFUSED, NPROG } prog_kind;
typedef enum { MEM_AUTO, MEM_SHM, MEM_GPU } mem_kind;
enum { P_FAST = 0, P_SOCKET, P_INPROC, P_INPROC_SYNC, P_DEVICE, NPATH };
static const char *const path_names[NPATH] = {"fast", "socket", "inproc", "inproc_sync",
                                              "device"};

typedef struct {
    const char *socket, *socket_unfused;
    int iters, warmup, clients, tput_iters;
    mem_kind mem;
    bool no_inproc;
    const char *json, *commit;
} options;

typedef struct {
    bool have;
    int n;
    double p50, p90, p99, mean, min, max;
} lat_stats;

typedef struct {
    lat_stats lat[NPATH];
    double daemon_device_us_socket;   /* mean of the socket replays' device_us */
    double daemon_device_us_fast;     /* mean of TIMED fast replays' device_us, NAN without */
    int graph, eager, captured;       /* over the timed daemon replays */
    bool measured;                    /* the daemon rows ran (chain64_unfused needs a socket) */
    char skipped[96];                 /* why not */
    int daemon_kernels;               /* program.list `kernels`: launches per replay; -1 unknown */
    int inproc_kernels;               /* launches in the in-process graph; -1 none */
    int outputs_equal;                /* daemon's y bytes == the in-process y: 1, 0, -1 unknown */
} prog_result;

/* everything the children send back, in shared memory */
typedef struct {
    /* latency child */
    int lat_ok;
    char lat_err[256];
    char fp_status_fast[128], fp_status_socket[128];
    prog_result prog[NPROG];
    char gpu_name[256], gpu_arch[64], gpu_runtime[96], gpu_platform[64];
    int gpu_driver;
    /* throughput: per mode (0 fast, 1 socket) */
    int tput_ok[2];
    int tput_clients_fast[2];         /* clients whose status was "active" */
    double tput_rps[2], tput_wall[2], tput_p50[2], tput_p99[2];
    long tput_replays[2];
} shared_res;

static shared_res *res;
static options o;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, int n, double p)
{
    if (n <= 0)
        return NAN;
    int r = (int)ceil(p / 100.0 * n) - 1;
    return v[r < 0 ? 0 : r >= n ? n - 1 : r];
}

static lat_stats summarize(double *v, int n)
{
    lat_stats s = {0};
    if (n <= 0)
        return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    s.have = true;
    s.n = n;
    s.p50 = pct(v, n, 50);
    s.p90 = pct(v, n, 90);
    s.p99 = pct(v, n, 99);
    s.mean = sum / n;
    s.min = v[0];
    s.max = v[n - 1];
    return s;
}

static const char *prog_name(prog_kind p)
{
    return p == PROG_ONENODE ? "onenode" : p == PROG_CHAIN_FUSED ? "chain64_fused"
                                                                 : "chain64_unfused";
}

/* the daemon program of a row: the two chain rows define the same 64 nodes */
static bool prog_is_chain(prog_kind p)
{
    return p != PROG_ONENODE;
}

/* Whether a row compares the same launches: the daemon's own count against
 * the in-process graph's; the text goes into the JSON as `work`. */
static void work_label(const prog_result *pr, char *buf, size_t len)
{
    if (pr->inproc_kernels < 0)
        snprintf(buf, len, "no in-process graph (daemon: %d launches per replay)",
                 pr->daemon_kernels);
    else if (pr->daemon_kernels < 0)
        snprintf(buf, len, "unknown: the daemon's launches per replay were not read");
    else if (pr->daemon_kernels == pr->inproc_kernels && pr->outputs_equal == 1)
        snprintf(buf, len, "equal");
    else if (pr->daemon_kernels == pr->inproc_kernels && pr->outputs_equal < 0)
        snprintf(buf, len, "equal launches (%d), outputs not compared", pr->daemon_kernels);
    else if (pr->daemon_kernels != pr->inproc_kernels)
        snprintf(buf, len, "differs: daemon %d launches per replay, in-process graph %d",
                 pr->daemon_kernels, pr->inproc_kernels);
    else
        snprintf(buf, len, "differs: %d launches each, but the outputs differ",
                 pr->daemon_kernels);
}

/* ---- a client of the daemon: buffers and the program ------------------------ */

typedef struct {
    gg_client *c;
    mem_kind mem;
    void *host;
    char shm_name[64];
    void *dev;
    size_t size;
    uint64_t buf, prog;
} dclient;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* the buffer image: x, y, w, b; f32 x in [-1, 1) for onenode; f16 x of
 * magnitude 0.5..1 with w = 1, b = 0 for chain64.  The same bytes for every
 * client of a row and for the in-process graph, so their outputs compare. */
static uint8_t *make_image(prog_kind pk, size_t *size, size_t off[4])
{
    rng = 0x9e3779b97f4a7c15ull ^ (prog_is_chain(pk) ? 0x2545f4914f6cdd1dull : 0);
    const size_t es = pk == PROG_ONENODE ? 4 : 2, act = (size_t)D * es;
    off[0] = 0;
    off[1] = act;
    off[2] = 2 * act;
    off[3] = 2 * act + D * es;
    *size = 2 * act + 2 * D * es;
    uint8_t *img = calloc(1, *size);
    if (!img)
        return NULL;
    if (pk == PROG_ONENODE) {
        float *x = (float *)img;
        for (int i = 0; i < D; i++)
            x[i] = (float)((double)rnd32() / 2147483648.0 - 1.0);
    } else {
        uint16_t *x = (uint16_t *)img, *w = (uint16_t *)(img + off[2]);
        for (int i = 0; i < D; i++) {
            uint32_t r = rnd32();
            x[i] = (uint16_t)(((r >> 31) << 15) | (14u << 10) | (r & 0x3ffu));
            w[i] = 0x3c00;
        }
    }
    return img;
}

static int dfail(char *err, size_t len, const char *what, gg_client *c)
{
    snprintf(err, len, "%s: %s (%s)", what, c ? gg_client_last_error(c) : "",
             c ? gg_client_last_error_code(c) : "");
    return -1;
}

/* Connect (with GFXGRAPH_FASTPATH=0 when socket_only), register buffers,
 * define and prepare the program, warm up. */
static int dclient_open(dclient *dc, const char *sock, prog_kind pk, mem_kind mem,
                        bool socket_only, int idx, char *err, size_t elen)
{
    memset(dc, 0, sizeof *dc);
    dc->mem = mem;
    dc->c = gg_client_new();
    if (!dc->c) {
        snprintf(err, elen, "out of memory");
        return -1;
    }
    gg_client_set_timeout(dc->c, 120000);
    /* the library reads GFXGRAPH_FASTPATH at connect */
    char *saved = getenv("GFXGRAPH_FASTPATH") ? strdup(getenv("GFXGRAPH_FASTPATH")) : NULL;
    if (socket_only)
        setenv("GFXGRAPH_FASTPATH", "0", 1);
    else
        unsetenv("GFXGRAPH_FASTPATH");
    char name[64];
    snprintf(name, sizeof name, "bench_fastpath/%s/%s/%d", prog_name(pk),
             socket_only ? "socket" : "fast", idx);
    int rc = gg_client_connect(dc->c, sock, name);
    if (saved) {
        setenv("GFXGRAPH_FASTPATH", saved, 1);
        free(saved);
    } else {
        unsetenv("GFXGRAPH_FASTPATH");
    }
    if (rc < 0)
        return dfail(err, elen, "connect", dc->c);

    size_t off[4];
    uint8_t *img = make_image(pk, &dc->size, off);
    if (!img) {
        snprintf(err, elen, "out of memory");
        return -1;
    }
    if (mem == MEM_SHM) {
        snprintf(dc->shm_name, sizeof dc->shm_name, "/gg-fp-%ld-%d-%d", (long)getpid(), (int)pk,
                 idx * 2 + socket_only);
        if ((rc = gg_client_shm_create(dc->shm_name, dc->size, &dc->host)) < 0) {
            snprintf(err, elen, "shm %s: %s", dc->shm_name, strerror(-rc));
            dc->host = NULL;
            free(img);
            return -1;
        }
        memcpy(dc->host, img, dc->size);
        free(img);
        rc = gg_client_buffer_register_shm(dc->c, dc->shm_name, 0, dc->size, &dc->buf);
        gg_client_shm_destroy(dc->shm_name, NULL, 0);
        if (rc < 0)
            return dfail(err, elen, "buffer.register (shm)", dc->c);
    } else {
#ifdef GFXGRAPH_HAVE_GPU
        hipError_t e = hipMalloc(&dc->dev, dc->size);
        if (e == hipSuccess)
            e = hipMemcpy(dc->dev, img, dc->size, hipMemcpyHostToDevice);
        free(img);
        if (e != hipSuccess) {
            snprintf(err, elen, "hipMalloc/hipMemcpy: %s", hipGetErrorString(e));
            return -1;
        }
        if (gg_client_buffer_register_device(dc->c, dc->dev, dc->size, &dc->buf) < 0)
            return dfail(err, elen, "buffer.register (device)", dc->c);
#else
        free(img);
        snprintf(err, elen, "--memory gpu needs a GPU build");
        return -1;
#endif
    }

    const int64_t adims[] = {GG_BATCH, D}, vdims[] = {D};
    const int buckets[] = {1};
    gg_program_def *pd = gg_program_def_new(prog_name(pk));
    if (!pd) {
        snprintf(err, elen, "out of memory");
        return -1;
    }
    gg_program_def_buckets(pd, 1, buckets);
    if (pk == PROG_ONENODE) {
        gg_program_def_tensor(pd, "x", dc->buf, off[0], "f32", 2, adims);
        gg_program_def_tensor(pd, "y", dc->buf, off[1], "f32", 2, adims);
        gg_program_def_op(pd, "scale", "x", "y");
        gg_program_def_attr_f(pd, "scale", 0.5);
    } else {
        gg_program_def_tensor(pd, "x", dc->buf, off[0], "f16", 2, adims);
        gg_program_def_tensor(pd, "y", dc->buf, off[1], "f16", 2, adims);
        gg_program_def_tensor(pd, "w", dc->buf, off[2], "f16", 1, vdims);
        gg_program_def_tensor(pd, "b", dc->buf, off[3], "f16", 1, vdims);
        gg_program_def_scratch(pd, "t", "f16", 2, adims);
        gg_program_def_scratch(pd, "a", "f16", 2, adims);
        for (int i = 0; i < CHAIN_PAIRS; i++) {
            gg_program_def_op(pd, "layernorm", i == 0 ? "x,w,b" : "a,w,b", "t");
            gg_program_def_op(pd, "gelu", "t", i == CHAIN_PAIRS - 1 ? "y" : "a");
        }
    }
    rc = gg_client_program_define(dc->c, pd, &dc->prog);
    gg_program_def_free(pd);
    if (rc < 0)
        return dfail(err, elen, "program.define", dc->c);
    int bucket = 1;
    rc = gg_client_program_prepare(dc->c, dc->prog, 1, &bucket, 0, NULL, NULL);
    if (rc < 0 && rc != -EPERM)
        return dfail(err, elen, "program.prepare", dc->c);
    for (int i = 0; i < o.warmup; i++)
        if (gg_client_replay(dc->c, dc->prog, 1, 0, NULL) < 0)
            return dfail(err, elen, "warm-up replay", dc->c);
    return 0;
}

static const msgpack_object *mp_get(const msgpack_object *m, const char *key)
{
    if (!m || m->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object *k = &m->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == kl &&
            memcmp(k->via.str.ptr, key, kl) == 0)
            return &m->via.map.ptr[i].val;
    }
    return NULL;
}

/* The launches a replay of dc's program makes, as the daemon planned them
 * (program.list `kernels`: fewer than the nodes where it fuses), or -1. */
static int dclient_kernels(dclient *dc)
{
    const msgpack_object *r = NULL;
    if (gg_client_call(dc->c, "program.list", NULL, 0, &r) < 0)
        return -1;
    const msgpack_object *ps = mp_get(r, "programs");
    for (uint32_t i = 0; ps && ps->type == MSGPACK_OBJECT_ARRAY && i < ps->via.array.size; i++) {
        const msgpack_object *id = mp_get(&ps->via.array.ptr[i], "id");
        const msgpack_object *k = mp_get(&ps->via.array.ptr[i], "kernels");
        if (id && id->type == MSGPACK_OBJECT_POSITIVE_INTEGER && id->via.u64 == dc->prog && k &&
            k->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            return (int)k->via.u64;
    }
    return -1;
}

#ifdef GFXGRAPH_HAVE_GPU
/* The bytes of dc's output y into out (len: the row's y size): 0 or -1. */
static int dclient_read_y(const dclient *dc, prog_kind pk, void *out, size_t len)
{
    const size_t yoff = (size_t)D * (prog_is_chain(pk) ? 2 : 4);
    if (yoff + len > dc->size)
        return -1;
    if (dc->host) {
        memcpy(out, (const uint8_t *)dc->host + yoff, len);
        return 0;
    }
    if (dc->dev)
        return hipMemcpy(out, (const uint8_t *)dc->dev + yoff, len, hipMemcpyDeviceToHost) ==
                       hipSuccess ? 0 : -1;
    return -1;
}
#endif

static void dclient_close(dclient *dc)
{
    if (dc->c && gg_client_connected(dc->c)) {
        if (dc->prog)
            gg_client_program_release(dc->c, dc->prog);
        if (dc->buf)
            gg_client_buffer_release(dc->c, dc->buf);
    }
    if (dc->host)
        gg_client_shm_destroy(NULL, dc->host, dc->size);
#ifdef GFXGRAPH_HAVE_GPU
    if (dc->dev)
        hipFree(dc->dev);
#endif
    gg_client_close(dc->c);
    memset(dc, 0, sizeof *dc);
}

/* ---- in process (GPU builds) ------------------------------------------------------- */

#ifdef GFXGRAPH_HAVE_GPU
#define HCK(call)                                                                         \
    do {                                                                                  \
        hipError_t e_ = (call);                                                           \
        if (e_ != hipSuccess) {                                                           \
            snprintf(err, elen, "%s:%d: %s: %s", __FILE__, __LINE__, #call,              \
                     hipGetErrorString(e_));                                              \
            goto out;                                                                     \
        }                                                                                 \
    } while (0)

/* A row's graph captured on a stream of this process, with a host-mapped
 * word the device writes behind each launch. */
typedef struct {
    hipStream_t s;
    gg_gpu_ctx *ctx;
    hipGraph_t g;
    hipGraphExec_t x;
    hipEvent_t e0, e1;
    void *p[6];                /* x y w b t a */
    uint64_t *word;            /* host page, registered mapped */
    void *dword;               /* the device's address of it */
    bool registered;
    uint64_t seq;
    int kernels;               /* launches the graph holds */
} inproc_graph;

/* One chain's stages as the daemon's planner binds them for this program
 * (core/fuse.c): each layernorm -> gelu pair is a norm_act stage; its normed
 * value (scratch t) is still written while a later node of the program reads
 * t, i.e. by every pair but the last; a stage's y (scratch a) is written only
 * when something after the chain reads it: in the first chain always (the
 * second reads a), in the second only its last stage (y).  first: the pair
 * the chain starts at. */
static void inproc_chain(gg_rowchain *c, int first, int n, const gg_tensor *x,
                         const gg_tensor *y, const gg_tensor *w, const gg_tensor *b,
                         const gg_tensor *t, const gg_tensor *a)
{
    memset(c, 0, sizeof *c);
    c->x = *x;
    c->n = n;
    for (int k = 0; k < n; k++) {
        int pair = first + k;
        gg_rowchain_stage *st = &c->st[k];
        st->w = *w;
        st->b = *b;
        st->eps = 1e-5;
        st->act = GG_ACT_GELU_ERF;
        if (pair < CHAIN_PAIRS - 1)
            st->h = *t;
        if (pair == CHAIN_PAIRS - 1)
            st->y = *y;
        else if (first == 0 || k == n - 1)
            st->y = *a;
    }
}

static void inproc_close(inproc_graph *ig)
{
    if (ig->x)
        hipGraphExecDestroy(ig->x);
    if (ig->g)
        hipGraphDestroy(ig->g);
    if (ig->e0)
        hipEventDestroy(ig->e0);
    if (ig->e1)
        hipEventDestroy(ig->e1);
    if (ig->ctx)
        gg_gpu_ctx_destroy(ig->ctx);
    if (ig->s)
        hipStreamDestroy(ig->s);
    for (int i = 0; i < 6; i++)
        if (ig->p[i])
            hipFree(ig->p[i]);
    if (ig->registered)
        hipHostUnregister(ig->word);
    free(ig->word);
    memset(ig, 0, sizeof *ig);
}

/* Capture row pk's graph: onenode one scale; chain64_fused the two row
 * chains of the daemon's fused plan; chain64_unfused the 64 kernels. */
static int inproc_open(inproc_graph *ig, prog_kind pk, char *err, size_t elen)
{
    memset(ig, 0, sizeof *ig);
    const gg_dtype dt = pk == PROG_ONENODE ? GG_DT_F32 : GG_DT_F16;
    gg_tensor_desc row = {.dtype = dt, .ndim = 2, .dims = {1, D}};
    gg_tensor_desc vec = {.dtype = dt, .ndim = 1, .dims = {D}};
    size_t off[4], size;
    uint8_t *img = make_image(pk, &size, off);
    if (!img) {
        snprintf(err, elen, "out of memory");
        return -1;
    }
    if (posix_memalign((void **)&ig->word, 4096, 4096) != 0) {
        ig->word = NULL;
        snprintf(err, elen, "out of memory");
        free(img);
        return -1;
    }
    memset(ig->word, 0, 4096);
    size_t rb = gg_desc_bytes(&row), vb = gg_desc_bytes(&vec);
    for (int i = 0; i < 6; i++)
        HCK(hipMalloc(&ig->p[i], rb));
    HCK(hipMemcpy(ig->p[0], img + off[0], rb, hipMemcpyHostToDevice));
    HCK(hipMemcpy(ig->p[2], img + off[2], vb, hipMemcpyHostToDevice));
    HCK(hipMemcpy(ig->p[3], img + off[3], vb, hipMemcpyHostToDevice));
    HCK(hipHostRegister(ig->word, 4096, hipHostRegisterMapped | hipHostRegisterPortable));
    ig->registered = true;
    HCK(hipHostGetDevicePointer(&ig->dword, ig->word, 0));
    HCK(hipStreamCreateWithFlags(&ig->s, hipStreamNonBlocking));
    if (gg_gpu_ctx_create(ig->s, &ig->ctx)) {
        snprintf(err, elen, "gg_gpu_ctx_create: %s", gg_gpu_last_error());
        goto out;
    }
    gg_tensor tx = {.data = ig->p[0], .desc = row}, ty = {.data = ig->p[1], .desc = row},
              tw = {.data = ig->p[2], .desc = vec}, tb = {.data = ig->p[3], .desc = vec},
              tt = {.data = ig->p[4], .desc = row}, ta = {.data = ig->p[5], .desc = row};
    const gg_op_def *scale = gg_ops_find("scale"), *ln = gg_ops_find("layernorm"),
                    *gelu = gg_ops_find("gelu");
    if (!scale || !ln || !gelu) {
        snprintf(err, elen, "the op table lacks scale, layernorm or gelu");
        goto out;
    }
    gg_rowchain ch[2];
    if (pk == PROG_CHAIN_FUSED) {
        inproc_chain(&ch[0], 0, GG_ROWCHAIN_MAX_STAGES, &tx, &ty, &tw, &tb, &tt, &ta);
        inproc_chain(&ch[1], GG_ROWCHAIN_MAX_STAGES, CHAIN_PAIRS - GG_ROWCHAIN_MAX_STAGES, &ta,
                     &ty, &tw, &tb, &tt, &ta);
        for (int k = 0; k < 2; k++)
            if (gg_rowchain_check(&ch[k], err, elen) != 0)
                goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: one eager run (first-use setup outside the capture);
         * pass 1: the capture */
        if (pass == 1)
            HCK(hipStreamBeginCapture(ig->s, hipStreamCaptureModeThreadLocal));
        int lrc = 0, n = 0;
        if (pk == PROG_ONENODE) {
            gg_op_attrs at = {{0}};
            at.v[0] = 0.5;
            lrc = gg_gpu_op_launch(ig->ctx, scale, &tx, 1, &ty, 1, &at);
            n = 1;
        } else if (pk == PROG_CHAIN_FUSED) {
            for (int k = 0; k < 2 && !lrc; k++, n++)
                lrc = gg_gpu_rowchain_launch(ig->ctx, &ch[k]);
        } else {
            for (int i = 0; i < CHAIN_PAIRS && !lrc; i++) {
                gg_tensor in[3] = {i == 0 ? tx : ta, tw, tb};
                lrc = gg_gpu_op_launch(ig->ctx, ln, in, 3, &tt, 1, NULL);
                if (!lrc)
                    lrc = gg_gpu_op_launch(ig->ctx, gelu, &tt, 1,
                                           i == CHAIN_PAIRS - 1 ? &ty : &ta, 1, NULL);
                n += 2;
            }
        }
        ig->kernels = n;
        if (pass == 1) {
            hipError_t ce = hipStreamEndCapture(ig->s, &ig->g);
            if (lrc || ce != hipSuccess) {
                snprintf(err, elen, "capture: launch %d (%s), end capture %s", lrc,
                         gg_gpu_last_error(), hipGetErrorString(ce));
                goto out;
            }
        } else if (lrc) {
            snprintf(err, elen, "launch: %d %s", lrc, gg_gpu_last_error());
            goto out;
        }
        HCK(hipStreamSynchronize(ig->s));
    }
    HCK(hipGraphInstantiate(&ig->x, ig->g, NULL, NULL, 0));
    HCK(hipEventCreate(&ig->e0));
    HCK(hipEventCreate(&ig->e1));
    for (int i = 0; i < o.warmup; i++)
        HCK(hipGraphLaunch(ig->x, ig->s));
    HCK(hipStreamSynchronize(ig->s));
    free(img);
    return 0;
out:
    free(img);
    inproc_close(ig);
    return -1;
}

/* n launches of each in-process kind: spin (the device writes the next
 * sequence number into the mapped word behind the graph; the host spins on
 * it), sync (hipStreamSynchronize), dev (between two events). */
static int inproc_block(inproc_graph *ig, int n, double *spin, double *sync, double *dev,
                        char *err, size_t elen)
{
    for (int i = 0; i < n; i++) {
        uint64_t want = ++ig->seq;
        double t0 = now_s();
        HCK(hipGraphLaunch(ig->x, ig->s));
        HCK(hipStreamWriteValue64(ig->s, ig->dword, want, 0));
        while (__atomic_load_n(ig->word, __ATOMIC_ACQUIRE) < want)
            ;
        spin[i] = (now_s() - t0) * 1e6;
    }
    for (int i = 0; i < n; i++) {
        double t0 = now_s();
        HCK(hipGraphLaunch(ig->x, ig->s));
        HCK(hipStreamSynchronize(ig->s));
        sync[i] = (now_s() - t0) * 1e6;
    }
    for (int i = 0; i < n; i++) {
        float ms = 0;
        HCK(hipEventRecord(ig->e0, ig->s));
        HCK(hipGraphLaunch(ig->x, ig->s));
        HCK(hipEventRecord(ig->e1, ig->s));
        HCK(hipEventSynchronize(ig->e1));
        HCK(hipEventElapsedTime(&ms, ig->e0, ig->e1));
        dev[i] = ms * 1000.0;
    }
    return 0;
out:
    return -1;
}

/* y of the in-process graph, after the launches above */
static int inproc_read_y(inproc_graph *ig, void *out, size_t len)
{
    return hipStreamSynchronize(ig->s) == hipSuccess &&
                   hipMemcpy(out, ig->p[1], len, hipMemcpyDeviceToHost) == hipSuccess
               ? 0 : -1;
}
#endif

/* ---- 1. latency (a child process) ---------------------------------------------------- */

static int timed_block(dclient *dc, int n, double *out, prog_result *pr, bool socket_path,
                       double *dev_sum, char *err, size_t elen)
{
    for (int i = 0; i < n; i++) {
        gg_replay_result r;
        double t0 = now_s();
        int rc = gg_client_replay(dc->c, dc->prog, 1, 0, &r);
        double t1 = now_s();
        if (rc < 0)
            return dfail(err, elen, socket_path ? "replay (socket)" : "replay (fast)", dc->c);
        out[i] = (t1 - t0) * 1e6;
        pr->graph += r.path == GG_PATH_GRAPH;
        pr->eager += r.path == GG_PATH_EAGER;
        pr->captured += r.captured;
        if (socket_path)
            *dev_sum += r.device_us;
    }
    return 0;
}

static int latency_child(mem_kind mem, bool inproc)
{
    double *v[NPATH];
    for (int k = 0; k < NPATH; k++)
        v[k] = calloc((size_t)o.iters, sizeof(double));
    char *err = res->lat_err;
    const size_t elen = sizeof res->lat_err;
    for (int k = 0; k < NPATH; k++)
        if (!v[k]) {
            snprintf(err, elen, "out of memory");
            return 1;
        }
#ifdef GFXGRAPH_HAVE_GPU
    if (mem == MEM_GPU) {
        hipDeviceProp_t prop;
        if (hipGetDeviceProperties(&prop, 0) == hipSuccess)
            snprintf(res->gpu_name, sizeof res->gpu_name, "%s", prop.name);
        gg_hip_arch_name(0, res->gpu_arch, sizeof res->gpu_arch);
        gg_hip_runtime_string(res->gpu_runtime, sizeof res->gpu_runtime);
        hipDriverGetVersion(&res->gpu_driver);
        snprintf(res->gpu_platform, sizeof res->gpu_platform, "%s", gg_gpu_platform());
    }
#endif
    for (int pk = 0; pk < NPROG; pk++) {
        prog_result *pr = &res->prog[pk];
        pr->daemon_device_us_fast = NAN;
        pr->daemon_kernels = pr->inproc_kernels = pr->outputs_equal = -1;
        const char *sock = pk == PROG_CHAIN_UNFUSED ? o.socket_unfused : o.socket;
        if (pk == PROG_CHAIN_UNFUSED && !sock) {
            snprintf(pr->skipped, sizeof pr->skipped, "no --socket-unfused (a daemon started "
                     "with GFXGRAPH_FUSE=0)");
            continue;
        }
        dclient f, s;
        if (dclient_open(&f, sock, (prog_kind)pk, mem, false, 0, err, elen) < 0 ||
            dclient_open(&s, sock, (prog_kind)pk, mem, true, 0, err, elen) < 0)
            return 1;
        pr->measured = true;
        pr->daemon_kernels = dclient_kernels(&f);
        if (pk != PROG_CHAIN_UNFUSED) {
            snprintf(res->fp_status_fast, sizeof res->fp_status_fast, "%s",
                     gg_client_fastpath_status(f.c));
            snprintf(res->fp_status_socket, sizeof res->fp_status_socket, "%s",
                     gg_client_fastpath_status(s.c));
        }
        bool ip = false;
#ifdef GFXGRAPH_HAVE_GPU
        inproc_graph ig;
        if (inproc) {
            char ierr[256] = "";
            ip = inproc_open(&ig, (prog_kind)pk, ierr, sizeof ierr) == 0;
            if (ip)
                pr->inproc_kernels = ig.kernels;
            else
                fprintf(stderr, "bench_fastpath: in-process %s: %s\n", prog_name((prog_kind)pk),
                        ierr);
        }
#else
        (void)inproc;
        (void)ip;
#endif
        /* interleaved blocks: every path sees the same drift */
        double dev_sum = 0;
        int done = 0;
        for (int b = 0; b < BLOCKS; b++) {
            int n = (o.iters - done) / (BLOCKS - b);
            if (timed_block(&f, n, v[P_FAST] + done, pr, false, NULL, err, elen) < 0 ||
                timed_block(&s, n, v[P_SOCKET] + done, pr, true, &dev_sum, err, elen) < 0)
                return 1;
#ifdef GFXGRAPH_HAVE_GPU
            if (ip && inproc_block(&ig, n, v[P_INPROC] + done, v[P_INPROC_SYNC] + done,
                                   v[P_DEVICE] + done, err, elen) < 0)
                return 1;
#endif
            done += n;
        }
        pr->daemon_device_us_socket = dev_sum / o.iters;
        pr->lat[P_FAST] = summarize(v[P_FAST], o.iters);
        pr->lat[P_SOCKET] = summarize(v[P_SOCKET], o.iters);
#ifdef GFXGRAPH_HAVE_GPU
        if (ip) {
            pr->lat[P_INPROC] = summarize(v[P_INPROC], o.iters);
            pr->lat[P_INPROC_SYNC] = summarize(v[P_INPROC_SYNC], o.iters);
            pr->lat[P_DEVICE] = summarize(v[P_DEVICE], o.iters);
            /* the same input bytes on both sides: the same kernels leave the
             * same output */
            const size_t yb = (size_t)D * (prog_is_chain((prog_kind)pk) ? 2 : 4);
            uint8_t *a = malloc(yb), *bb = malloc(yb);
            if (a && bb && dclient_read_y(&f, (prog_kind)pk, a, yb) == 0 &&
                inproc_read_y(&ig, bb, yb) == 0)
                pr->outputs_equal = memcmp(a, bb, yb) == 0;
            free(a);
            free(bb);
            inproc_close(&ig);
        }
#endif
        /* the daemon's device time on the fast path: TIMED replays, untimed here */
        gg_replay_opts opts = {0};
        opts.timed = true;
        double fsum = 0;
        int fn = 0, nt = o.iters / 4 > 0 ? o.iters / 4 : 1;
        for (int i = 0; i < nt; i++) {
            gg_replay_result r;
            if (gg_client_replay_ex(f.c, f.prog, 1, 0, &opts, &r) < 0)
                break;
            if (r.device_us > 0) {
                fsum += r.device_us;
                fn++;
            }
        }
        if (fn)
            pr->daemon_device_us_fast = fsum / fn;
        dclient_close(&f);
        dclient_close(&s);
    }
    for (int k = 0; k < NPATH; k++)
        free(v[k]);
    res->lat_ok = 1;
    return 0;
}

/* ---- 2. throughput: client processes ------------------------------------------------- */

typedef struct {
    int ok, active, n;
    double t0, t1;
    char err[200];
} tput_report;

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

static int tput_client(int idx, mem_kind mem, bool socket_only, int ready_fd, int go_fd,
                       int out_fd)
{
    tput_report rep;
    memset(&rep, 0, sizeof rep);
    double *rt = calloc((size_t)o.tput_iters, sizeof(double));
    dclient dc;
    memset(&dc, 0, sizeof dc);
    int setup = rt ? dclient_open(&dc, o.socket, PROG_ONENODE, mem, socket_only, idx + 1,
                                  rep.err, sizeof rep.err)
                   : -1;
    if (setup == 0)
        rep.active = strncmp(gg_client_fastpath_status(dc.c), "active", 6) == 0;
    char ch = setup == 0 ? 'r' : 'e';
    bool go = write_full(ready_fd, &ch, 1) && setup == 0 && read_full(go_fd, &ch, 1) && ch == 'g';
    if (go) {
        rep.ok = 1;
        rep.t0 = now_s();
        for (int i = 0; i < o.tput_iters; i++) {
            double t0 = now_s();
            if (gg_client_replay(dc.c, dc.prog, 1, 0, NULL) < 0) {
                dfail(rep.err, sizeof rep.err, "replay", dc.c);
                rep.ok = 0;
                break;
            }
            rt[rep.n++] = (now_s() - t0) * 1e6;
        }
        rep.t1 = now_s();
    }
    dclient_close(&dc);
    bool sent = write_full(out_fd, &rep, sizeof rep) &&
                write_full(out_fd, rt, sizeof(double) * (size_t)rep.n);
    free(rt);
    return sent && rep.ok ? 0 : 1;
}

static int throughput(int mode, mem_kind mem)
{
    const bool socket_only = mode == 1;
    int ready[2], go[2];
    if (pipe(ready) < 0 || pipe(go) < 0)
        return -1;
    pid_t pids[MAX_CLIENTS];
    int outs[MAX_CLIENTS];
    int n = 0;
    for (; n < o.clients; n++) {
        int p[2];
        if (pipe(p) < 0)
            break;
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
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
            _exit(tput_client(n, mem, socket_only, ready[1], go[0], p[1]));
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
    double *all = calloc((size_t)n * (size_t)o.tput_iters + 1, sizeof(double));
    double t0 = INFINITY, t1 = -INFINITY;
    long total = 0;
    int failed = 0, active = 0;
    for (int k = 0; k < n; k++) {
        tput_report rep;
        bool got = read_full(outs[k], &rep, sizeof rep) && rep.n >= 0 && rep.n <= o.tput_iters &&
                   all && read_full(outs[k], all + total, sizeof(double) * (size_t)rep.n);
        close(outs[k]);
        waitpid(pids[k], NULL, 0);
        if (!got || !rep.ok) {
            failed++;
            fprintf(stderr, "bench_fastpath: throughput client %d (%s): %s\n", k,
                    socket_only ? "socket" : "fast", got && rep.err[0] ? rep.err : "failed");
        }
        if (!got)
            continue;
        active += rep.active;
        if (rep.n > 0) {
            if (rep.t0 < t0)
                t0 = rep.t0;
            if (rep.t1 > t1)
                t1 = rep.t1;
        }
        total += rep.n;
    }
    res->tput_ok[mode] = start && !failed && total > 0;
    res->tput_clients_fast[mode] = active;
    res->tput_replays[mode] = total;
    res->tput_wall[mode] = t1 - t0;
    res->tput_rps[mode] = t1 > t0 ? (double)total / (t1 - t0) : NAN;
    if (total > 0 && all) {
        qsort(all, (size_t)total, sizeof(double), cmp_double);
        res->tput_p50[mode] = pct(all, (int)total, 50);
        res->tput_p99[mode] = pct(all, (int)total, 99);
    }
    free(all);
    return res->tput_ok[mode] ? 0 : -1;
}

/* ---- output ------------------------------------------------------------------------------ */

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

static double ratio(double a, double b)
{
    return isfinite(a) && isfinite(b) && b > 0 ? a / b : NAN;
}

static double p50_of(const prog_result *pr, int k)
{
    return pr->lat[k].have ? pr->lat[k].p50 : NAN;
}

static double p99_of(const prog_result *pr, int k)
{
    return pr->lat[k].have ? pr->lat[k].p99 : NAN;
}

/* device time for the subtraction: the event-timed graph when there is one,
 * else the daemon's device_us (TIMED fast replays, else socket replays) */
static double device_time(const prog_result *pr, const char **src)
{
    if (pr->lat[P_DEVICE].have) {
        *src = "events around the in-process graph launch (p50)";
        return pr->lat[P_DEVICE].p50;
    }
    if (isfinite(pr->daemon_device_us_fast) && pr->daemon_device_us_fast > 0) {
        *src = "daemon device_us of TIMED fast-path replays (mean)";
        return pr->daemon_device_us_fast;
    }
    *src = "daemon device_us of socket replays (mean)";
    return pr->daemon_device_us_socket;
}

static void read_first_line(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(buf, (int)len, f))
        buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

static void cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && c) {
            c++;
            while (*c == ' ' || *c == '\t')
                c++;
            c[strcspn(c, "\n")] = '\0';
            snprintf(buf, len, "%s", c);
            break;
        }
    }
    fclose(f);
}

static void json_lat(FILE *f, const lat_stats *s)
{
    if (!s->have) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"n\": %d, \"p50\": ", s->n);
    json_num(f, s->p50);
    fprintf(f, ", \"p90\": ");
    json_num(f, s->p90);
    fprintf(f, ", \"p99\": ");
    json_num(f, s->p99);
    fprintf(f, ", \"mean\": ");
    json_num(f, s->mean);
    fprintf(f, ", \"min\": ");
    json_num(f, s->min);
    fprintf(f, ", \"max\": ");
    json_num(f, s->max);
    fputc('}', f);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_fastpath [--socket PATH] [--socket-unfused PATH] [--iters N]\n"
            "                      [--warmup N] [--clients N] [--tput-iters N]\n"
            "                      [--memory auto|shm|gpu] [--no-inproc] [--json FILE]\n"
            "                      [--commit SHA]\n"
            "\n"
            "  --socket PATH    the daemon's socket (default: the client library's default)\n"
            "  --socket-unfused PATH  a second daemon, started with GFXGRAPH_FUSE=0: the\n"
            "                   chain64_unfused row (not measured without it)\n"
            "  --iters N        timed replays per path and program (2000)\n"
            "  --warmup N       untimed replays first, per client and in process (200)\n"
            "  --clients N      client processes of the throughput runs (16)\n"
            "  --tput-iters N   replays per throughput client (2000)\n"
            "  --memory M       shm (cpu backend), gpu (hip backend), auto (by the backend)\n"
            "  --no-inproc      skip the in-process graph (GPU builds)\n"
            "  --json FILE      write the results with provenance\n"
            "  --commit SHA     the source's git commit ($GFXGRAPH_GIT_COMMIT)\n");
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
    o = (options){NULL, NULL, 2000, 200, 16, 2000, MEM_AUTO, false, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool bad = false;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-inproc")) {
            o.no_inproc = true;
            continue;
        }
        if (!v) {
            bad = true;
        } else if (!strcmp(a, "--socket")) {
            o.socket = v;
        } else if (!strcmp(a, "--socket-unfused")) {
            o.socket_unfused = v;
        } else if (!strcmp(a, "--iters")) {
            bad = parse_int(v, BLOCKS, MAX_ITERS, &o.iters) < 0;
        } else if (!strcmp(a, "--warmup")) {
            bad = parse_int(v, 0, MAX_ITERS, &o.warmup) < 0;
        } else if (!strcmp(a, "--clients")) {
            bad = parse_int(v, 1, MAX_CLIENTS, &o.clients) < 0;
        } else if (!strcmp(a, "--tput-iters")) {
            bad = parse_int(v, 1, MAX_ITERS, &o.tput_iters) < 0;
        } else if (!strcmp(a, "--memory")) {
            if (!strcmp(v, "auto")) o.mem = MEM_AUTO;
            else if (!strcmp(v, "shm")) o.mem = MEM_SHM;
            else if (!strcmp(v, "gpu")) o.mem = MEM_GPU;
            else bad = true;
        } else if (!strcmp(a, "--json")) {
            o.json = v;
        } else if (!strcmp(a, "--commit")) {
            o.commit = v;
        } else {
            bad = true;
        }
        if (bad) {
            fprintf(stderr, "bench_fastpath: bad or incomplete option '%s%s%s'\n", a,
                    v ? " " : "", v ? v : "");
            usage(stderr);
            return 64;
        }
        i++;
    }
    if (!o.commit)
        o.commit = getenv("GFXGRAPH_GIT_COMMIT");
    signal(SIGPIPE, SIG_IGN);

    /* hello, for the provenance and the memory kind (no GPU runtime here) */
    char backend[16], version[32], device[128], arch[64], sock[256];
    gg_client *c = gg_client_new();
    if (!c || gg_client_connect(c, o.socket, "bench_fastpath") < 0) {
        fprintf(stderr, "bench_fastpath: %s\n", c ? gg_client_last_error(c) : "out of memory");
        gg_client_close(c);
        return 2;
    }
    snprintf(backend, sizeof backend, "%s", gg_client_backend(c));
    snprintf(version, sizeof version, "%s", gg_client_server_version(c));
    snprintf(device, sizeof device, "%s", gg_client_device_name(c));
    snprintf(arch, sizeof arch, "%s", gg_client_device_arch(c));
    snprintf(sock, sizeof sock, "%s", gg_client_socket_path(c));
    gg_client_close(c);
    mem_kind mem = o.mem;
    if (mem == MEM_AUTO)
        mem = strcmp(backend, "cpu") == 0 ? MEM_SHM : MEM_GPU;
#ifndef GFXGRAPH_HAVE_GPU
    if (mem == MEM_GPU) {
        fprintf(stderr, "bench_fastpath: the daemon's backend is %s; --memory gpu needs a build "
                "with GPU support\n", backend);
        return 64;
    }
    const bool inproc = false;
    const char *inproc_why = "not a GPU build";
#else
    const bool inproc = mem == MEM_GPU && !o.no_inproc;
    const char *inproc_why = o.no_inproc ? "--no-inproc" : mem != MEM_GPU ? "shm memory (cpu "
                             "backend): no GPU graph to compare with" : "";
#endif
    res = mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    printf("bench_fastpath: gfxgraphd %s, backend %s (%s%s%s), memory %s; %d replays per path "
           "and program (warm-up %d); throughput %d clients x %d\n",
           version, backend, device, arch[0] ? ", " : "", arch, mem == MEM_GPU ? "gpu" : "shm",
           o.iters, o.warmup, o.clients, o.tput_iters);
    fflush(stdout);

    /* 1. latency, in a child */
    int rc = 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(latency_child(mem, inproc));
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        !res->lat_ok) {
        fprintf(stderr, "bench_fastpath: latency run failed: %s%s\n",
                res->lat_err[0] ? res->lat_err : "",
                pid > 0 && WIFSIGNALED(st) ? " (killed by a signal)" : "");
        rc = 1;
    }
    /* 2. throughput */
    for (int mode = 0; mode < 2; mode++)
        if (throughput(mode, mem) < 0)
            rc = 1;

    /* report */
    bool fast_used = strncmp(res->fp_status_fast, "active", 6) == 0;
    printf("fast path: %s%s\nsocket client: %s\n", res->fp_status_fast,
           fast_used ? "" : "  (NOT IN USE: the \"fast\" rows are socket replays)",
           res->fp_status_socket);
    if (!inproc)
        printf("in process: not measured (%s)\n", inproc_why);
    for (int pk = 0; pk < NPROG && res->lat_ok; pk++) {
        const prog_result *pr = &res->prog[pk];
        if (!pr->measured) {
            printf("\n%s: not measured (%s)\n", prog_name((prog_kind)pk), pr->skipped);
            continue;
        }
        const char *src;
        double dt = device_time(pr, &src);
        char work[128];
        work_label(pr, work, sizeof work);
        printf("\n%s (%s): round trip us (%d each; %d graph, %d eager, %d captured in the "
               "timing)\n  launches: daemon %d per replay, in-process graph %d; outputs equal: "
               "%s; work: %s\n",
               prog_name((prog_kind)pk), pk == PROG_ONENODE ? "scale [1, 1024] f32"
               : "(layernorm -> gelu) x 32, [1, 1024] f16", o.iters, pr->graph, pr->eager,
               pr->captured, pr->daemon_kernels, pr->inproc_kernels,
               pr->outputs_equal < 0 ? "unknown" : pr->outputs_equal ? "yes" : "NO", work);
        printf("  %-11s %9s %9s %9s %9s %9s\n", "path", "p50", "p90", "p99", "mean", "p50-dev");
        for (int k = 0; k < NPATH; k++) {
            const lat_stats *s = &pr->lat[k];
            if (!s->have) {
                printf("  %-11s %9s\n", path_names[k], "-");
                continue;
            }
            char extra[32] = "";
            if (k != P_DEVICE && isfinite(dt))
                snprintf(extra, sizeof extra, "%9.1f", s->p50 - dt);
            printf("  %-11s %9.1f %9.1f %9.1f %9.1f %9s\n", path_names[k], s->p50, s->p90, s->p99,
                   s->mean, extra);
        }
        printf("  device time %.2f us from %s; daemon device_us: socket %.2f, fast TIMED %.2f\n",
               dt, src, pr->daemon_device_us_socket, pr->daemon_device_us_fast);
        printf("  ratios (p50): fast/inproc %.2f (target <= 1.0), fast/inproc_sync %.2f, "
               "fast/socket %.2f;  (p99): fast/inproc %.2f, fast/socket %.2f%s\n",
               ratio(p50_of(pr, P_FAST), p50_of(pr, P_INPROC)),
               ratio(p50_of(pr, P_FAST), p50_of(pr, P_INPROC_SYNC)),
               ratio(p50_of(pr, P_FAST), p50_of(pr, P_SOCKET)),
               ratio(p99_of(pr, P_FAST), p99_of(pr, P_INPROC)),
               ratio(p99_of(pr, P_FAST), p99_of(pr, P_SOCKET)),
               strncmp(work, "differs", 7) == 0 ? "  (NOT EQUAL WORK: the in-process ratios do not compare "
               "the same launches)" : "");
    }
    printf("\nthroughput, onenode, %d client processes x %d replays:\n", o.clients, o.tput_iters);
    for (int mode = 0; mode < 2; mode++)
        printf("  %-7s %10.0f replays/s  (p50 %.1f us, p99 %.1f us; %d/%d clients on the fast "
               "path)%s\n", mode ? "socket" : "fast", res->tput_rps[mode], res->tput_p50[mode],
               res->tput_p99[mode], res->tput_clients_fast[mode], o.clients,
               res->tput_ok[mode] ? "" : "  FAILED");
    printf("  fast/socket %.2f\n", ratio(res->tput_rps[0], res->tput_rps[1]));

    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            perror(o.json);
            rc = 1;
        } else {
            struct utsname un;
            if (uname(&un) != 0)
                memset(&un, 0, sizeof un);
            char date[32], model[256], nvdrv[256];
            time_t now = time(NULL);
            struct tm tm;
            gmtime_r(&now, &tm);
            strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
            cpu_model(model, sizeof model);
            read_first_line("/proc/driver/nvidia/version", nvdrv, sizeof nvdrv);
            fprintf(f, "{\n  \"bench\": \"bench_fastpath\",\n  \"date\": ");
            json_str(f, date);
            fprintf(f, ",\n  \"git_commit\": ");
            if (o.commit && *o.commit)
                json_str(f, o.commit);
            else
                fputs("null", f);
            fprintf(f, ",\n  \"host\": {\"nodename\": ");
            json_str(f, un.nodename);
            fprintf(f, ", \"release\": ");
            json_str(f, un.release);
            fprintf(f, ", \"cpus\": %ld, \"cpu_model\": ", sysconf(_SC_NPROCESSORS_ONLN));
            json_str(f, model);
            fprintf(f, "},\n  \"device\": {\"name\": ");
            json_str(f, res->gpu_name[0] ? res->gpu_name : device);
            fprintf(f, ", \"arch\": ");
            json_str(f, res->gpu_arch[0] ? res->gpu_arch : arch);
            fprintf(f, ", \"platform\": ");
            json_str(f, res->gpu_platform);
            fprintf(f, ", \"runtime\": ");
            json_str(f, res->gpu_runtime);
            fprintf(f, ", \"driver_api_version\": %d, \"kernel_driver\": ", res->gpu_driver);
            json_str(f, nvdrv);
            fprintf(f, "},\n  \"daemon\": {\"socket\": ");
            json_str(f, sock);
            fprintf(f, ", \"version\": ");
            json_str(f, version);
            fprintf(f, ", \"backend\": ");
            json_str(f, backend);
            fprintf(f, ", \"device\": ");
            json_str(f, device);
            fprintf(f, "},\n  \"fastpath_status\": {\"fast\": ");
            json_str(f, res->fp_status_fast);
            fprintf(f, ", \"socket\": ");
            json_str(f, res->fp_status_socket);
            fprintf(f, ", \"fast_in_use\": %s},\n", fast_used ? "true" : "false");
            fprintf(f, "  \"options\": {\"iters\": %d, \"warmup\": %d, \"blocks\": %d, "
                    "\"interleaved\": true, \"memory\": \"%s\", \"batch\": 1, \"d\": %d, "
                    "\"inproc\": %s, \"inproc_wait\": \"host spin on a word the device writes "
                    "behind the graph (as the fast path's completion record)\", "
                    "\"inproc_sync_wait\": \"hipStreamSynchronize\", \"socket_unfused\": ",
                    o.iters, o.warmup, BLOCKS, mem == MEM_GPU ? "gpu" : "shm", D,
                    inproc ? "true" : "false");
            if (o.socket_unfused)
                json_str(f, o.socket_unfused);
            else
                fputs("null", f);
            fprintf(f, ", \"clients\": %d, \"tput_iters\": %d},\n", o.clients, o.tput_iters);
            fprintf(f, "  \"latency_us\": {");
            for (int pk = 0; pk < NPROG; pk++) {
                const prog_result *pr = &res->prog[pk];
                const char *src;
                double dt = device_time(pr, &src);
                char work[128];
                work_label(pr, work, sizeof work);
                fprintf(f, "%s\n    \"%s\": {\"nodes\": %d, \"measured\": %s", pk ? "," : "",
                        prog_name((prog_kind)pk), pk == PROG_ONENODE ? 1 : 2 * CHAIN_PAIRS,
                        pr->measured ? "true" : "false");
                if (!pr->measured) {
                    fprintf(f, ", \"skipped\": ");
                    json_str(f, pr->skipped);
                    fputc('}', f);
                    continue;
                }
                fprintf(f, ", \"daemon_kernels\": %d, \"inproc_kernels\": %d, "
                        "\"outputs_equal\": %s, \"work\": ", pr->daemon_kernels,
                        pr->inproc_kernels, pr->outputs_equal < 0 ? "null"
                        : pr->outputs_equal ? "true" : "false");
                json_str(f, work);
                for (int k = 0; k < NPATH; k++) {
                    fprintf(f, ",\n      \"%s\": ", path_names[k]);
                    json_lat(f, &pr->lat[k]);
                }
                fprintf(f, ",\n      \"daemon_device_us\": {\"socket_mean\": ");
                json_num(f, pr->daemon_device_us_socket);
                fprintf(f, ", \"fast_timed_mean\": ");
                json_num(f, pr->daemon_device_us_fast);
                fprintf(f, "},\n      \"device_time_us\": ");
                json_num(f, dt);
                fprintf(f, ", \"device_time_source\": ");
                json_str(f, src);
                fprintf(f, ",\n      \"p50_minus_device_us\": {\"fast\": ");
                json_num(f, p50_of(pr, P_FAST) - dt);
                fprintf(f, ", \"socket\": ");
                json_num(f, p50_of(pr, P_SOCKET) - dt);
                fprintf(f, ", \"inproc\": ");
                json_num(f, p50_of(pr, P_INPROC) - dt);
                fprintf(f, ", \"inproc_sync\": ");
                json_num(f, p50_of(pr, P_INPROC_SYNC) - dt);
                fprintf(f, "},\n      \"ratios\": {\"fast_over_inproc_p50\": ");
                json_num(f, ratio(p50_of(pr, P_FAST), p50_of(pr, P_INPROC)));
                fprintf(f, ", \"fast_over_inproc_p99\": ");
                json_num(f, ratio(p99_of(pr, P_FAST), p99_of(pr, P_INPROC)));
                fprintf(f, ", \"fast_over_inproc_sync_p50\": ");
                json_num(f, ratio(p50_of(pr, P_FAST), p50_of(pr, P_INPROC_SYNC)));
                fprintf(f, ", \"fast_over_socket_p50\": ");
                json_num(f, ratio(p50_of(pr, P_FAST), p50_of(pr, P_SOCKET)));
                fprintf(f, ", \"fast_over_socket_p99\": ");
                json_num(f, ratio(p99_of(pr, P_FAST), p99_of(pr, P_SOCKET)));
                fprintf(f, "},\n      \"path\": {\"graph\": %d, \"eager\": %d, \"captured\": %d}}",
                        pr->graph, pr->eager, pr->captured);
            }
            fprintf(f, "\n  },\n  \"throughput\": {\"program\": \"onenode\", \"clients\": %d, "
                    "\"client_kind\": \"processes\", \"replays_per_client\": %d",
                    o.clients, o.tput_iters);
            for (int mode = 0; mode < 2; mode++) {
                fprintf(f, ",\n    \"%s\": {\"ok\": %s, \"clients_on_fast_path\": %d, "
                        "\"replays\": %ld, \"wall_s\": ", mode ? "socket" : "fast",
                        res->tput_ok[mode] ? "true" : "false", res->tput_clients_fast[mode],
                        res->tput_replays[mode]);
                json_num(f, res->tput_wall[mode]);
                fprintf(f, ", \"replays_per_s\": ");
                json_num(f, res->tput_rps[mode]);
                fprintf(f, ", \"p50_us\": ");
                json_num(f, res->tput_p50[mode]);
                fprintf(f, ", \"p99_us\": ");
                json_num(f, res->tput_p99[mode]);
                fputc('}', f);
            }
            fprintf(f, ",\n    \"fast_over_socket\": ");
            json_num(f, ratio(res->tput_rps[0], res->tput_rps[1]));
            fprintf(f, "\n  }\n}\n");
            if (fclose(f) != 0) {
                perror(o.json);
                rc = 1;
            }
        }
    }
    /* FASTPATH program path p50 p99 mean (us): not "RESULT ", which the device
     * run's summary reads as bench_replay rows */
    for (int pk = 0; pk < NPROG && res->lat_ok; pk++)
        for (int k = 0; k < NPATH; k++)
            if (res->prog[pk].lat[k].have)
                printf("FASTPATH %-15s %-11s %9.1f %9.1f %9.1f\n", prog_name((prog_kind)pk),
                       path_names[k], res->prog[pk].lat[k].p50, res->prog[pk].lat[k].p99,
                       res->prog[pk].lat[k].mean);
    for (int mode = 0; mode < 2; mode++)
        printf("FASTPATH tput-c%d %-7s %10.0f replays/s\n", o.clients,
               mode ? "socket" : "fast", res->tput_rps[mode]);
    return rc;
}
