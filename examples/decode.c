/* SPDX-License-Identifier: MIT */
/* gfxgraph-decode: greedy decode of a random Llama-shaped model through
 * gfxgraphd, the whole step (all layers, lm_head, argmax) as ONE program
 * replayed once per token.
 *
 *   gfxgraph-decode [options] [SOCKET]
 *
 *   --layers N (2)  --hidden D (256)  --heads Hq (8)  --kv-heads Hkv (4)
 *   --inter F (512)  --vocab V (1024)  --dtype f32|f16 (f32)
 *   --steps N (32)  --batch B (1)  --context S (256: cache positions)
 *   --start P (0: decode from position P; positions 0..P-1 of the cache hold
 *              random k/v, a stand-in for a prefilled prompt)
 *   --seed N  --quiet (no token lists)  --json (one JSON line of results)
 *
 * Step program: embedding -> L x (rmsnorm -> q/k/v linear -> rope(q), rope(k)
 * -> cache_write(k), cache_write(v) -> attention_decode -> o linear -> add ->
 * rmsnorm -> gate/up linear -> silu_mul -> down linear -> add) -> rmsnorm ->
 * lm_head -> argmax.  [B, H*Dh] linear outputs are read as [B, H, Dh]
 * through views.  Each step writes ids/positions/lens (i32) into a buffer,
 * replays, and reads the next tokens back: one captured graph serves every
 * step.  Buffers: POSIX shared memory on the cpu backend; device memory
 * registered by pointer on the hip backend (as gfxgraph-demo).
 *
 * Prints the tokens, tokens/s and per-token latency (p50/p99, round trip:
 * write inputs + replay + read tokens).  Exit: 0 ok, 1 a failed call, 2
 * cannot connect, 64 usage. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gfxgraph/client.h>

typedef struct {
    int layers, hidden, heads, kv_heads, inter, vocab, steps, batch, context, start;
    bool f16, quiet, json;
    uint64_t seed;
} config;

static uint64_t rng_state;

static float rnd(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545f4914f6cdd1dull;
    return (float)((double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* float -> IEEE half, round to nearest even */
static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) /* rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* subnormal half or zero */
        float a;
        memcpy(&a, &ax, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    uint32_t r = ax + 0xc8000fffu + ((ax >> 13) & 1u); /* rebias + round */
    return (uint16_t)(sign | (r >> 13));
}

/* ---- buffers (as gfxgraph-demo) ------------------------------------------ */

typedef struct {
    char name[64];
    void *base;  /* host view */
    void *dev;   /* hip backend */
    size_t size, used;
    uint64_t id;
    bool registered;
} gbuf;

static bool on_gpu;

#ifdef GFXGRAPH_HAVE_GPU
#include "gg_hip.h"
static int dev_copy(void *dst, const void *src, size_t n, hipMemcpyKind k)
{
    hipError_t e = hipMemcpy(dst, src, n, k);
    if (e != hipSuccess) {
        fprintf(stderr, "decode: hipMemcpy: %s\n", hipGetErrorString(e));
        return -EIO;
    }
    return 0;
}
#endif

static int buf_upload(gbuf *b, size_t off, size_t n)
{
#ifdef GFXGRAPH_HAVE_GPU
    if (on_gpu)
        return dev_copy((char *)b->dev + off, (char *)b->base + off, n, hipMemcpyHostToDevice);
#endif
    (void)b, (void)off, (void)n;
    return 0;
}

static int buf_download(gbuf *b, size_t off, size_t n)
{
#ifdef GFXGRAPH_HAVE_GPU
    if (on_gpu)
        return dev_copy((char *)b->base + off, (char *)b->dev + off, n, hipMemcpyDeviceToHost);
#endif
    (void)b, (void)off, (void)n;
    return 0;
}

static size_t carve(gbuf *b, size_t bytes)
{
    size_t off = (b->used + 255) & ~(size_t)255;
    b->used = off + bytes;
    return off;
}

static int buf_open(gg_client *c, gbuf *b, const char *tag, size_t size)
{
    snprintf(b->name, sizeof b->name, "/gg-decode-%ld-%s", (long)getpid(), tag);
    b->size = size;
    int rc;
#ifdef GFXGRAPH_HAVE_GPU
    if (on_gpu) {
        b->base = calloc(1, size);
        hipError_t e = hipMalloc(&b->dev, size);
        if (!b->base || e != hipSuccess) {
            fprintf(stderr, "decode: cannot allocate %zu bytes on the GPU: %s\n", size,
                    hipGetErrorString(e));
            b->dev = NULL;
            return -ENOMEM;
        }
        rc = gg_client_buffer_register_device(c, b->dev, size, &b->id);
        if (rc < 0) {
            fprintf(stderr, "decode: buffer.register (device memory): %s (%s)\n",
                    gg_client_last_error(c), gg_client_last_error_code(c));
            return rc;
        }
        b->registered = true;
        return 0;
    }
#endif
    rc = gg_client_shm_create(b->name, size, &b->base);
    if (rc < 0) {
        fprintf(stderr, "decode: cannot create shared memory %s (%zu bytes): %s\n", b->name,
                size, strerror(-rc));
        b->base = NULL;
        return rc;
    }
    rc = gg_client_buffer_register_shm(c, b->name, 0, size, &b->id);
    if (rc < 0) {
        fprintf(stderr, "decode: buffer.register %s: %s (%s)\n", b->name,
                gg_client_last_error(c), gg_client_last_error_code(c));
        return rc;
    }
    b->registered = true;
    return 0;
}

static void buf_close(gg_client *c, gbuf *b)
{
    if (b->registered && gg_client_connected(c))
        gg_client_buffer_release(c, b->id);
#ifdef GFXGRAPH_HAVE_GPU
    if (on_gpu) {
        if (b->dev)
            hipFree(b->dev);
        free(b->base);
        b->base = b->dev = NULL;
        b->registered = false;
        return;
    }
#endif
    if (b->base)
        gg_client_shm_destroy(b->name, b->base, b->size);
    b->base = NULL;
    b->registered = false;
}

/* ---- the model ------------------------------------------------------------ */

enum { W_N1, W_Q, W_K, W_V, W_O, W_N2, W_G, W_U, W_D, W_PER_LAYER };
static const char *const w_names[W_PER_LAYER] = {"n1", "wq", "wk", "wv", "wo",
                                                 "n2", "wg", "wu", "wd"};

typedef struct {
    config cf;
    int dh, esz, top;
    int nbuckets, buckets[17];
    gbuf w, io, cache;
    size_t emb, nf, lm, *lw;  /* weight offsets (bytes); lw[l * W_PER_LAYER + i] */
    size_t cache_one;         /* bytes of one [top, S, Hkv, Dh] cache */
    size_t ids, pos, lens, next;  /* io offsets (bytes) */
    uint64_t prog;
} model;

static void put_in(const model *m, gbuf *b, size_t off, size_t n, double scale, double bias)
{
    char *p = (char *)b->base + off;
    for (size_t i = 0; i < n; i++) {
        float v = (float)(bias + scale * rnd());
        if (m->cf.f16) {
            uint16_t h = to_half(v);
            memcpy(p + 2 * i, &h, 2);
        } else {
            memcpy(p + 4 * i, &v, 4);
        }
    }
}

static void put(model *m, size_t off, size_t n, double scale, double bias)
{
    put_in(m, &m->w, off, n, scale, bias);
}

static int model_setup(gg_client *c, model *m)
{
    const config *cf = &m->cf;
    int D = cf->hidden, QD = cf->heads * m->dh, KD = cf->kv_heads * m->dh, F = cf->inter,
        V = cf->vocab, L = cf->layers;
    size_t e = (size_t)m->esz;
    m->lw = calloc((size_t)L * W_PER_LAYER, sizeof *m->lw);
    if (!m->lw)
        return -ENOMEM;
    size_t sizes[W_PER_LAYER] = {
        (size_t)D, (size_t)QD * D, (size_t)KD * D, (size_t)KD * D, (size_t)D * QD,
        (size_t)D, (size_t)F * D,  (size_t)F * D,  (size_t)D * F};
    /* pass 1: offsets */
    m->emb = carve(&m->w, (size_t)V * D * e);
    for (int l = 0; l < L; l++)
        for (int i = 0; i < W_PER_LAYER; i++)
            m->lw[l * W_PER_LAYER + i] = carve(&m->w, sizes[i] * e);
    m->nf = carve(&m->w, (size_t)D * e);
    m->lm = carve(&m->w, (size_t)V * D * e);
    size_t wsize = m->w.used;
    m->w.used = 0;
    int rc = buf_open(c, &m->w, "w", wsize);
    if (rc < 0)
        return rc;
    double t0 = now_us();
    put(m, m->emb, (size_t)V * D, 1.0, 0);
    for (int l = 0; l < L; l++) {
        const size_t *o = m->lw + l * W_PER_LAYER;
        put(m, o[W_N1], (size_t)D, 0.1, 1.0);
        put(m, o[W_Q], sizes[W_Q], 1.7 / sqrt(D), 0);
        put(m, o[W_K], sizes[W_K], 1.7 / sqrt(D), 0);
        put(m, o[W_V], sizes[W_V], 1.7 / sqrt(D), 0);
        put(m, o[W_O], sizes[W_O], 1.7 / sqrt(QD) / sqrt(2.0 * L), 0);
        put(m, o[W_N2], (size_t)D, 0.1, 1.0);
        put(m, o[W_G], sizes[W_G], 1.7 / sqrt(D), 0);
        put(m, o[W_U], sizes[W_U], 1.7 / sqrt(D), 0);
        put(m, o[W_D], sizes[W_D], 1.7 / sqrt(F) / sqrt(2.0 * L), 0);
    }
    put(m, m->nf, (size_t)D, 0.1, 1.0);
    put(m, m->lm, (size_t)V * D, 3.0 / sqrt(D), 0);
    if ((rc = buf_upload(&m->w, 0, wsize)) < 0)
        return rc;
    if (!cf->json)
        printf("weights: %.1f MiB %s, random, ready in %.0f ms\n", wsize / 1048576.0,
               cf->f16 ? "f16" : "f32", (now_us() - t0) / 1e3);

    /* io: ids, pos, lens, next (i32 [top] each) */
    size_t iob = (size_t)m->top * 4;
    m->ids = carve(&m->io, iob);
    m->pos = carve(&m->io, iob);
    m->lens = carve(&m->io, iob);
    m->next = carve(&m->io, iob);
    size_t iosize = m->io.used;
    m->io.used = 0;
    if ((rc = buf_open(c, &m->io, "io", iosize)) < 0)
        return rc;

    /* caches: per layer k then v, [top, S, Hkv, Dh]; random (the "prompt") */
    m->cache_one = (size_t)m->top * cf->context * KD * e;
    if ((rc = buf_open(c, &m->cache, "kv", 2 * (size_t)L * m->cache_one)) < 0)
        return rc;
    put_in(m, &m->cache, 0, 2 * (size_t)L * m->cache_one / e, 1.0, 0);
    if ((rc = buf_upload(&m->cache, 0, m->cache.size)) < 0)
        return rc;

    /* the program */
    const char *dt = cf->f16 ? "f16" : "f32";
    gg_program_def *p = gg_program_def_new("llama-decode");
    gg_program_def_buckets(p, m->nbuckets, m->buckets);
    int64_t db[] = {GG_BATCH}, dD[] = {GG_BATCH, D}, dV[] = {GG_BATCH, V}, dQ[] = {GG_BATCH, QD},
            dK[] = {GG_BATCH, KD}, dF[] = {GG_BATCH, F}, dQ3[] = {GG_BATCH, cf->heads, m->dh},
            dK3[] = {GG_BATCH, cf->kv_heads, m->dh},
            dC[] = {GG_BATCH, cf->context, cf->kv_heads, m->dh};
    gg_program_def_tensor(p, "ids", m->io.id, m->ids, "i32", 1, db);
    gg_program_def_tensor(p, "pos", m->io.id, m->pos, "i32", 1, db);
    gg_program_def_tensor(p, "lens", m->io.id, m->lens, "i32", 1, db);
    gg_program_def_tensor(p, "next", m->io.id, m->next, "i32", 1, db);
    int64_t demb[] = {V, D}, dvec[] = {D};
    gg_program_def_tensor(p, "emb", m->w.id, m->emb, dt, 2, demb);
    gg_program_def_tensor(p, "nf", m->w.id, m->nf, dt, 1, dvec);
    gg_program_def_tensor(p, "lm", m->w.id, m->lm, dt, 2, demb);
    int64_t wd[W_PER_LAYER][2] = {{D, 0}, {QD, D}, {KD, D}, {KD, D}, {D, QD},
                                  {D, 0}, {F, D},  {F, D},  {D, F}};
    char name[32], in[160], kc[32], vc[32];
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < W_PER_LAYER; i++) {
            snprintf(name, sizeof name, "%s_%d", w_names[i], l);
            gg_program_def_tensor(p, name, m->w.id, m->lw[l * W_PER_LAYER + i], dt,
                                  wd[i][1] ? 2 : 1, wd[i]);
        }
        snprintf(kc, sizeof kc, "kc_%d", l);
        snprintf(vc, sizeof vc, "vc_%d", l);
        gg_program_def_tensor(p, kc, m->cache.id, (2 * (size_t)l) * m->cache_one, dt, 4, dC);
        gg_program_def_tensor(p, vc, m->cache.id, (2 * (size_t)l + 1) * m->cache_one, dt, 4, dC);
    }
    gg_program_def_scratch(p, "h", dt, 2, dD);
    gg_program_def_scratch(p, "hn", dt, 2, dD);
    gg_program_def_scratch(p, "q", dt, 2, dQ);
    gg_program_def_scratch(p, "k", dt, 2, dK);
    gg_program_def_scratch(p, "v", dt, 2, dK);
    gg_program_def_scratch(p, "a3", dt, 3, dQ3);
    gg_program_def_scratch(p, "o", dt, 2, dD);
    gg_program_def_scratch(p, "g", dt, 2, dF);
    gg_program_def_scratch(p, "u", dt, 2, dF);
    gg_program_def_scratch(p, "m", dt, 2, dF);
    gg_program_def_scratch(p, "f", dt, 2, dD);
    gg_program_def_scratch(p, "logits", dt, 2, dV);
    gg_program_def_view(p, "q3", "q", 3, dQ3);
    gg_program_def_view(p, "k3", "k", 3, dK3);
    gg_program_def_view(p, "v3", "v", 3, dK3);
    gg_program_def_view(p, "a2", "a3", 2, dQ);

    gg_program_def_op(p, "embedding", "ids,emb", "h");
    for (int l = 0; l < L; l++) {
        snprintf(kc, sizeof kc, "kc_%d", l);
        snprintf(vc, sizeof vc, "vc_%d", l);
        snprintf(in, sizeof in, "h,n1_%d", l);
        gg_program_def_op(p, "rmsnorm", in, "hn");
        gg_program_def_attr_f(p, "eps", 1e-5);
        snprintf(in, sizeof in, "hn,wq_%d", l);
        gg_program_def_op(p, "linear", in, "q");
        snprintf(in, sizeof in, "hn,wk_%d", l);
        gg_program_def_op(p, "linear", in, "k");
        snprintf(in, sizeof in, "hn,wv_%d", l);
        gg_program_def_op(p, "linear", in, "v");
        gg_program_def_op(p, "rope", "q3,pos", "q3");
        gg_program_def_op(p, "rope", "k3,pos", "k3");
        gg_program_def_op(p, "cache_write", "k3,pos", kc);
        gg_program_def_op(p, "cache_write", "v3,pos", vc);
        snprintf(in, sizeof in, "q3,%s,%s,lens", kc, vc);
        gg_program_def_op(p, "attention_decode", in, "a3");
        snprintf(in, sizeof in, "a2,wo_%d", l);
        gg_program_def_op(p, "linear", in, "o");
        gg_program_def_op(p, "add", "h,o", "h");
        snprintf(in, sizeof in, "h,n2_%d", l);
        gg_program_def_op(p, "rmsnorm", in, "hn");
        gg_program_def_attr_f(p, "eps", 1e-5);
        snprintf(in, sizeof in, "hn,wg_%d", l);
        gg_program_def_op(p, "linear", in, "g");
        snprintf(in, sizeof in, "hn,wu_%d", l);
        gg_program_def_op(p, "linear", in, "u");
        gg_program_def_op(p, "silu_mul", "g,u", "m");
        snprintf(in, sizeof in, "m,wd_%d", l);
        gg_program_def_op(p, "linear", in, "f");
        gg_program_def_op(p, "add", "h,f", "h");
    }
    gg_program_def_op(p, "rmsnorm", "h,nf", "hn");
    gg_program_def_attr_f(p, "eps", 1e-5);
    gg_program_def_op(p, "linear", "hn,lm", "logits");
    gg_program_def_op(p, "argmax", "logits", "next");
    rc = gg_client_program_define(c, p, &m->prog);
    if (rc < 0)
        fprintf(stderr, "decode: program.define: %s (%s)\n", gg_client_last_error(c),
                gg_client_last_error_code(c));
    gg_program_def_free(p);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gfxgraph-decode [--layers N] [--hidden D] [--heads H] [--kv-heads H]\n"
               "         [--inter F] [--vocab V] [--dtype f32|f16] [--steps N] [--batch B]\n"
               "         [--context S] [--start P] [--seed N] [--quiet] [--json] [SOCKET]\n");
}

int main(int argc, char **argv)
{
    config cf = {.layers = 2, .hidden = 256, .heads = 8, .kv_heads = 4, .inter = 512,
                 .vocab = 1024, .steps = 32, .batch = 1, .context = 256, .start = 0,
                 .seed = 1};
    const char *sock = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int *ip = NULL;
        if (!strcmp(a, "--layers")) ip = &cf.layers;
        else if (!strcmp(a, "--hidden")) ip = &cf.hidden;
        else if (!strcmp(a, "--heads")) ip = &cf.heads;
        else if (!strcmp(a, "--kv-heads")) ip = &cf.kv_heads;
        else if (!strcmp(a, "--inter")) ip = &cf.inter;
        else if (!strcmp(a, "--vocab")) ip = &cf.vocab;
        else if (!strcmp(a, "--steps")) ip = &cf.steps;
        else if (!strcmp(a, "--batch")) ip = &cf.batch;
        else if (!strcmp(a, "--context")) ip = &cf.context;
        else if (!strcmp(a, "--start")) ip = &cf.start;
        if (ip) {
            if (i + 1 >= argc) {
                usage(stderr);
                return 64;
            }
            *ip = atoi(argv[++i]);
        } else if (!strcmp(a, "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            if (strcmp(d, "f32") && strcmp(d, "f16")) {
                usage(stderr);
                return 64;
            }
            cf.f16 = !strcmp(d, "f16");
        } else if (!strcmp(a, "--seed") && i + 1 < argc) {
            cf.seed = strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(a, "--quiet")) {
            cf.quiet = true;
        } else if (!strcmp(a, "--json")) {
            cf.json = cf.quiet = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!sock && a[0] != '-') {
            sock = a;
        } else {
            usage(stderr);
            return 64;
        }
    }
    if (cf.layers < 1 || cf.hidden < 1 || cf.heads < 1 || cf.kv_heads < 1 ||
        cf.heads % cf.kv_heads || cf.hidden % cf.heads || (cf.hidden / cf.heads) % 2 ||
        cf.inter < 1 || cf.vocab < 1 || cf.steps < 1 || cf.batch < 1 || cf.batch > 65536 ||
        cf.start < 0 || cf.start + cf.steps > cf.context) {
        fprintf(stderr, "decode: need heads | hidden with an even head dim, kv-heads | heads, "
                        "start + steps <= context, all sizes >= 1\n");
        return 64;
    }
    rng_state = 0x9e3779b97f4a7c15ull ^ (cf.seed * 0xbf58476d1ce4e5b9ull);
    if (!rng_state)
        rng_state = 1;

    model m;
    memset(&m, 0, sizeof m);
    m.cf = cf;
    m.dh = cf.hidden / cf.heads;
    m.esz = cf.f16 ? 2 : 4;
    for (int b = 1;; b *= 2) {
        m.buckets[m.nbuckets++] = b;
        if (b >= cf.batch || m.nbuckets == 17)
            break;
    }
    m.top = m.buckets[m.nbuckets - 1];

    gg_client *c = gg_client_new();
    if (!c)
        return 1;
    if (gg_client_connect(c, sock, "gfxgraph-decode") < 0) {
        fprintf(stderr, "decode: %s\n", gg_client_last_error(c));
        gg_client_close(c);
        return 2;
    }
    on_gpu = strcmp(gg_client_backend(c), "hip") == 0;
    if (!cf.json)
        printf("connected to %s: gfxgraphd %s, backend %s, device %s\n",
               gg_client_socket_path(c), gg_client_server_version(c), gg_client_backend(c),
               gg_client_device_name(c));
#ifndef GFXGRAPH_HAVE_GPU
    if (on_gpu) {
        fprintf(stderr, "decode: the daemon runs the hip backend, but this example was built "
                        "without GPU support (GFXGRAPH_GPU=off)\n");
        gg_client_close(c);
        return 1;
    }
#endif
    int status = 1;
    int *tokens = calloc((size_t)cf.batch * (cf.steps + 1), sizeof *tokens);
    double *lat = calloc((size_t)cf.steps, sizeof *lat);
    if (!tokens || !lat)
        goto out;
    double t0 = now_us();
    if (model_setup(c, &m) < 0)
        goto out;
    int ready = 0, failed = 0;
    int bucket = m.buckets[0];
    for (int i = 0; i < m.nbuckets; i++)
        if (m.buckets[i] >= cf.batch) {
            bucket = m.buckets[i];
            break;
        }
    gg_client_program_prepare(c, m.prog, 1, &bucket, 0, &ready, &failed);
    if (!cf.json)
        printf("model: %d layers, hidden %d, heads %d/%d (head dim %d), inter %d, vocab %d, %s; "
               "batch %d (bucket %d), context %d, start %d; set up in %.0f ms, graph %s\n",
               cf.layers, cf.hidden, cf.heads, cf.kv_heads, m.dh, cf.inter, cf.vocab,
               cf.f16 ? "f16" : "f32", cf.batch, bucket, cf.context, cf.start,
               (now_us() - t0) / 1e3, ready ? "ready" : failed ? "failed (eager)" : "not prepared");

    int32_t *ids = (int32_t *)((char *)m.io.base + m.ids),
            *pos = (int32_t *)((char *)m.io.base + m.pos),
            *lens = (int32_t *)((char *)m.io.base + m.lens),
            *next = (int32_t *)((char *)m.io.base + m.next);
    for (int r = 0; r < cf.batch; r++)
        tokens[r * (cf.steps + 1)] = (int)((rnd() + 1.0f) * 0.5f * cf.vocab) % cf.vocab;
    int graph = 0, eager = 0;
    double dev_us = 0, t_start = now_us();
    for (int s = 0; s < cf.steps; s++) {
        double a = now_us();
        for (int r = 0; r < cf.batch; r++) {
            ids[r] = tokens[r * (cf.steps + 1) + s];
            pos[r] = cf.start + s;
            lens[r] = cf.start + s + 1;
        }
        if (buf_upload(&m.io, m.ids, m.next - m.ids) < 0)
            goto out;
        gg_replay_result res;
        if (gg_client_replay(c, m.prog, cf.batch, 0, &res) < 0) {
            fprintf(stderr, "decode: replay step %d: %s (%s)\n", s, gg_client_last_error(c),
                    gg_client_last_error_code(c));
            goto out;
        }
        if (buf_download(&m.io, m.next, (size_t)cf.batch * 4) < 0)
            goto out;
        for (int r = 0; r < cf.batch; r++)
            tokens[r * (cf.steps + 1) + s + 1] = next[r];
        lat[s] = now_us() - a;
        dev_us += res.device_us;
        graph += res.path == GG_PATH_GRAPH;
        eager += res.path != GG_PATH_GRAPH;
    }
    double total = now_us() - t_start;
    if (!cf.quiet)
        for (int r = 0; r < cf.batch; r++) {
            printf("row %d:", r);
            for (int s = 0; s <= cf.steps; s++)
                printf(" %d", tokens[r * (cf.steps + 1) + s]);
            printf("\n");
        }
    double first = lat[0];
    qsort(lat, (size_t)cf.steps, sizeof *lat, cmp_double);
    double p50 = lat[(cf.steps - 1) / 2], p99 = lat[(int)ceil(0.99 * cf.steps) - 1];
    double tps = (double)cf.batch * cf.steps / (total / 1e6);
    if (cf.json)
        printf("{\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"kv_heads\":%d,\"inter\":%d,"
               "\"vocab\":%d,\"dtype\":\"%s\",\"batch\":%d,\"bucket\":%d,\"context\":%d,"
               "\"start\":%d,\"steps\":%d,\"backend\":\"%s\",\"device\":\"%s\","
               "\"graph\":%d,\"eager\":%d,\"first_us\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
               "\"tokens_per_s\":%.1f,\"device_us_mean\":%.1f}\n",
               cf.layers, cf.hidden, cf.heads, cf.kv_heads, cf.inter, cf.vocab,
               cf.f16 ? "f16" : "f32", cf.batch, bucket, cf.context, cf.start, cf.steps,
               gg_client_backend(c), gg_client_device_name(c), graph, eager, first, p50, p99,
               tps, dev_us / cf.steps);
    else
        printf("%d steps x batch %d: %d graph, %d eager replays; %.1f tokens/s; per token: "
               "p50 %.1f us, p99 %.1f us (first %.1f us)\n",
               cf.steps, cf.batch, graph, eager, tps, p50, p99, first);
    status = 0;
out:
    if (m.prog && gg_client_connected(c))
        gg_client_program_release(c, m.prog);
    buf_close(c, &m.w);
    buf_close(c, &m.io);
    buf_close(c, &m.cache);
    free(m.lw);
    free(tokens);
    free(lat);
    gg_client_close(c);
    return status;
}
