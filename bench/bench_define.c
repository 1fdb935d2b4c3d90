/* SPDX-License-Identifier: MIT */
/* bench_define: does a large program.define hold up other clients?
 *
 * Against a running gfxgraphd (cpu backend is enough): one client defines
 * a legal program of --nodes copy nodes (branches of 4,096) over 1,536
 * named tensors, --reps times; meanwhile a second client sends buffer.list
 * (answered on the daemon's loop) one after the other.  Reported: the define's
 * round trip, and the second client's round trips while the define was in
 * flight (count, p50, p99, max) next to the same probe's while nothing else
 * runs, in an idle window before each define (idle and loaded probes
 * alternate in the run, so that drift falls on both).  A loop busy checking the define shows as a max near the define's
 * own time; a define checked off the loop leaves the max near the idle one.
 *
 *   bench_define --socket PATH [--nodes N] [--reps N] [--label L]
 *                [--commit C] [--json FILE] [--pause-us N]
 *
 * The probing client pauses --pause-us (default 100) between requests, a
 * steady client rather than a flood competing for the cores.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "internal.h"

#define NT 1536
#define IDLE_WINDOW_US 60000   /* before each define: the idle probes' window */
#define TBYTES 16

static const char *g_sock;
static atomic_int g_stop;
static int g_pause_us = 100;        /* between probes: a steady client, not a flood */

typedef struct {
    double *v;
    size_t n, cap;
} samples;

static void push(samples *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->v = realloc(s->v, s->cap * sizeof(double));
        if (!s->v)
            abort();
    }
    s->v[s->n++] = x;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(samples *s, double p)
{
    if (!s->n)
        return 0;
    qsort(s->v, s->n, sizeof(double), cmpd);
    size_t i = (size_t)(p * (double)(s->n - 1) + 0.5);
    return s->v[i];
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* every probe: when it was sent and its round trip (ms) */
static samples g_t0, g_rt;

static void *probe(void *arg)
{
    (void)arg;
    gg_client *c = gg_client_new();
    if (!c || gg_client_connect(c, g_sock, "bench_define-probe") < 0) {
        fprintf(stderr, "bench_define: probe connect: %s\n", c ? gg_client_last_error(c) : "");
        exit(1);
    }
    while (!atomic_load(&g_stop)) {
        const msgpack_object *r;
        double t0 = now_ms();
        if (gg_client_call(c, "buffer.list", NULL, 0, &r) < 0) {
            fprintf(stderr, "bench_define: probe: %s\n", gg_client_last_error(c));
            exit(1);
        }
        push(&g_t0, t0);
        push(&g_rt, now_ms() - t0);
        usleep((useconds_t)g_pause_us);
    }
    gg_client_close(c);
    return NULL;
}

static void pstr(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

static void tname(char *b, size_t n, int i)
{
    snprintf(b, n, "layer.activation.%05d", i);
}

static void pack_define(msgpack_sbuffer *sb, uint64_t bid, int nnodes, const char *name)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    pstr(&pk, "name");
    pstr(&pk, name);
    pstr(&pk, "tensors");
    msgpack_pack_map(&pk, NT);
    char b[64];
    for (int i = 0; i < NT; i++) {
        tname(b, sizeof b, i);
        pstr(&pk, b);
        msgpack_pack_map(&pk, 4);
        pstr(&pk, "buffer");
        msgpack_pack_uint64(&pk, bid);
        pstr(&pk, "offset");
        msgpack_pack_uint64(&pk, (uint64_t)i * TBYTES);
        pstr(&pk, "dtype");
        pstr(&pk, "f32");
        pstr(&pk, "shape");
        msgpack_pack_array(&pk, 1);
        msgpack_pack_int(&pk, 4);
    }
    int per = 4096, nbr = (nnodes + per - 1) / per;
    pstr(&pk, nbr > 1 ? "branches" : "nodes");
    if (nbr > 1)
        msgpack_pack_array(&pk, (size_t)nbr);
    for (int br = 0, j = 0; br < nbr; br++) {
        int n = nnodes - br * per < per ? nnodes - br * per : per;
        msgpack_pack_array(&pk, (size_t)n);
        for (int k = 0; k < n; k++, j++) {
            msgpack_pack_map(&pk, 3);
            pstr(&pk, "op");
            pstr(&pk, "copy");
            pstr(&pk, "inputs");
            msgpack_pack_array(&pk, 1);
            tname(b, sizeof b, (j * 7) % NT);
            pstr(&pk, b);
            pstr(&pk, "outputs");
            msgpack_pack_array(&pk, 1);
            tname(b, sizeof b, (j * 7 + 3) % NT);
            pstr(&pk, b);
        }
    }
}

int main(int argc, char **argv)
{
    int nodes = 102400, reps = 5;
    const char *label = "run", *commit = "unknown", *json = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--socket") && v)
            g_sock = v, i++;
        else if (!strcmp(a, "--nodes") && v)
            nodes = atoi(v), i++;
        else if (!strcmp(a, "--reps") && v)
            reps = atoi(v), i++;
        else if (!strcmp(a, "--label") && v)
            label = v, i++;
        else if (!strcmp(a, "--commit") && v)
            commit = v, i++;
        else if (!strcmp(a, "--json") && v)
            json = v, i++;
        else if (!strcmp(a, "--pause-us") && v)
            g_pause_us = atoi(v), i++;
        else {
            fprintf(stderr, "usage: bench_define --socket PATH [--nodes N] [--reps N] "
                    "[--label L] [--commit C] [--json FILE]\n");
            return 64;
        }
    }
    if (!g_sock || nodes < 1 || reps < 1) {
        fprintf(stderr, "bench_define: --socket is required\n");
        return 64;
    }
    gg_client *c = gg_client_new();
    if (!c || gg_client_connect(c, g_sock, "bench_define") < 0) {
        fprintf(stderr, "bench_define: connect: %s\n", c ? gg_client_last_error(c) : "");
        return 1;
    }
    char shm[64];
    snprintf(shm, sizeof shm, "/bench-define-%d", (int)getpid());
    void *mem;
    uint64_t bid;
    if (gg_client_shm_create(shm, NT * TBYTES, &mem) < 0 ||
        gg_client_buffer_register_shm(c, shm, 0, NT * TBYTES, &bid) < 0) {
        fprintf(stderr, "bench_define: buffer: %s\n", gg_client_last_error(c));
        return 1;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_define(&sb, bid, nodes, "bench-define");

    pthread_t th;
    pthread_create(&th, NULL, probe, NULL);
    double *def = calloc((size_t)reps, sizeof(double));
    double *def_t0 = calloc((size_t)reps, sizeof(double));
    double *idle_t0 = calloc((size_t)reps, sizeof(double));
    if (!def || !def_t0 || !idle_t0)
        return 1;
    for (int r = 0; r < reps; r++) {
        const msgpack_object *res;
        /* an idle window before each define (after the last one's release
         * was answered), so idle and loaded probes alternate in one run */
        idle_t0[r] = now_ms();
        usleep(IDLE_WINDOW_US);
        double t0 = now_ms();
        int rc = gg_client_call(c, "program.define", sb.data, sb.size, &res);
        def[r] = now_ms() - t0;
        def_t0[r] = t0;
        if (rc < 0) {
            fprintf(stderr, "bench_define: define: %s\n", gg_client_last_error(c));
            return 1;
        }
        const msgpack_object *id = NULL;
        for (uint32_t k = 0; k < res->via.map.size; k++)
            if (res->via.map.ptr[k].key.via.str.size == 2 &&
                !memcmp(res->via.map.ptr[k].key.via.str.ptr, "id", 2))
                id = &res->via.map.ptr[k].val;
        if (id)
            gg_client_program_release(c, id->via.u64);
    }
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);
    /* idle: a probe sent and answered inside an idle window; during: a
     * probe whose round trip overlaps a define's */
    samples g_idle = {0}, g_during = {0};
    for (size_t i = 0; i < g_t0.n; i++) {
        double a = g_t0.v[i], z = a + g_rt.v[i];
        for (int r = 0; r < reps; r++) {
            if (a >= idle_t0[r] && z < def_t0[r]) {
                push(&g_idle, g_rt.v[i]);
                break;
            }
            if (a < def_t0[r] + def[r] && z > def_t0[r]) {
                push(&g_during, g_rt.v[i]);
                break;
            }
        }
    }

    samples ds = {def, (size_t)reps, (size_t)reps};
    double def_p50 = pct(&ds, 0.5);
    size_t nidle = g_idle.n, ndur = g_during.n;
    double i50 = pct(&g_idle, 0.5), i99 = pct(&g_idle, 0.99), imax = pct(&g_idle, 1.0);
    double d50 = pct(&g_during, 0.5), d99 = pct(&g_during, 0.99), dmax = pct(&g_during, 1.0);
    char ver[64], backend[16], device[128];
    snprintf(ver, sizeof ver, "%s", gg_client_server_version(c));
    snprintf(device, sizeof device, "%s", gg_client_device_name(c));
    snprintf(backend, sizeof backend, "%s", gg_client_backend(c));
    printf("RESULT %s nodes %d bytes %zu: define %.1f ms (median of %d); other client's "
           "buffer.list during the define: %zu answers, p50 %.3f p99 %.3f max %.2f ms; idle: "
           "p50 %.3f p99 %.3f max %.3f ms\n", label, nodes, sb.size, def_p50, reps, ndur, d50,
           d99, dmax, i50, i99, imax);
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            perror(json);
            return 1;
        }
        struct utsname u;
        uname(&u);
        char date[32];
        time_t t = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
        fprintf(f, "{\n  \"bench\": \"bench_define\",\n  \"label\": \"%s\",\n  \"date\": \"%s\",\n"
                "  \"host\": {\"nodename\": \"%s\", \"release\": \"%s\", \"machine\": \"%s\"},\n"
                "  \"git_commit\": \"%s\",\n"
                "  \"daemon\": {\"version\": \"%s\", \"backend\": \"%s\", \"device\": \"%s\"},\n"
                "  \"nodes\": %d, \"tensors\": %d, \"request_bytes\": %zu, \"reps\": %d, "
                "\"probe_pause_us\": %d,\n"
                "  \"define_ms_p50\": %.3f,\n"
                "  \"probe_during\": {\"count\": %zu, \"p50_ms\": %.4f, \"p99_ms\": %.4f, "
                "\"max_ms\": %.4f},\n"
                "  \"probe_idle\": {\"count\": %zu, \"p50_ms\": %.4f, \"p99_ms\": %.4f, "
                "\"max_ms\": %.4f},\n"
                "  \"max_during_over_define\": %.4f,\n"
                "  \"order\": \"an idle window before each define: idle and loaded probes "
                "alternate\",\n  \"work\": \"equal: the same buffer.list probe, idle and "
                "during\"\n}\n",
                label, date, u.nodename, u.release, u.machine, commit, ver, backend, device,
                nodes, NT, sb.size, reps, g_pause_us, def_p50, ndur, d50, d99, dmax, nidle, i50, i99, imax,
                def_p50 > 0 ? dmax / def_p50 : 0);
        fclose(f);
    }
    gg_client_buffer_release(c, bid);
    gg_client_shm_destroy(shm, mem, NT * TBYTES);
    gg_client_close(c);
    return 0;
}
