/* SPDX-License-Identifier: MIT */
/* bench_scratch: the scratch memory a program holds in a running gfxgraphd
 * once every (branch, bucket) graph is captured.
 *
 *   bench_scratch [--socket PATH] [--program chain64|mlp] [--branches N]
 *                 [--json FILE] [--label TEXT] [--commit SHA]
 *
 * Defines the program with the daemon's default buckets (13 of them by
 * default: 1, 2, 4, ... 256) and N branches (default 2, the same nodes in
 * each), prepares every (branch, bucket), replays one batch per bucket and
 * branch, and reads what the daemon says it holds:
 *
 *   scratch_bytes   the `metrics` gauge gfxgraph_scratch_bytes, which every
 *                   version reports (the per-entry sum before the arenas,
 *                   the arenas after), and stats' scratch_bytes /
 *                   scratch_arenas where the daemon has them (else -1)
 *   cache_bytes     stats' bytes charged to the VRAM cap
 *   expected        what one block per entry would take (the sum over the
 *                   buckets of a run's scratch, times the branches) and
 *                   what one arena takes (the largest bucket's), from the
 *                   program's shapes
 *
 *   chain64  (layernorm -> gelu) x 32, d = 1024, f16, two scratch tensors
 *            [batch, 1024] reused along the chain (bench_replay's chain64)
 *   mlp      linear(1024 -> 4096) -> gelu -> linear(4096 -> 1024), f16,
 *            scratch h and g [batch, 4096]
 *
 * --json writes the figures with provenance (date, host, daemon version,
 * backend and device, git commit from --commit or $GFXGRAPH_GIT_COMMIT).
 * It measures; nothing is asserted.  Exit status: 0, 1 when a step failed,
 * 2 when the daemon cannot be reached, 64 usage. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

enum { D = 1024, H = 4096, PAIRS = 32, MAXB = 32, ALIGN = 256 };

typedef struct {
    const char *socket, *json, *label, *commit, *prog;
    int branches;
} opts;

static int usage(FILE *f)
{
    fprintf(f, "usage: bench_scratch [--socket PATH] [--program chain64|mlp] [--branches N]\n"
               "                     [--json FILE] [--label TEXT] [--commit SHA]\n");
    return 64;
}

static int fail(gg_client *c, const char *what)
{
    fprintf(stderr, "bench_scratch: %s: %s\n", what, gg_client_last_error(c));
    return 1;
}

static uint64_t align_up(uint64_t n)
{
    return (n + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
}

/* One run's scratch at `rows`: the program's scratch tensors, each aligned. */
static uint64_t run_scratch(const char *prog, int rows)
{
    if (strcmp(prog, "mlp") == 0)
        return 2 * align_up((uint64_t)rows * H * 2);
    return 2 * align_up((uint64_t)rows * D * 2);
}

static const msgpack_object *map_get(const msgpack_object *m, const char *key)
{
    if (!m || m->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object *k = &m->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
            memcmp(k->via.str.ptr, key, k->via.str.size) == 0)
            return &m->via.map.ptr[i].val;
    }
    return NULL;
}

static int64_t map_int(const msgpack_object *m, const char *key)
{
    const msgpack_object *v = map_get(m, key);
    if (v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return (int64_t)v->via.u64;
    return -1;
}

/* A gauge's value in the metrics text, or -1. */
static int64_t metrics_gauge(gg_client *c, const char *name)
{
    const msgpack_object *r = NULL;
    if (gg_client_call(c, "metrics", NULL, 0, &r) < 0)
        return -1;
    const msgpack_object *t = map_get(r, "text");
    if (!t || t->type != MSGPACK_OBJECT_STR)
        return -1;
    size_t n = strlen(name);
    const char *p = t->via.str.ptr, *end = p + t->via.str.size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        if ((size_t)(nl - p) > n + 1 && memcmp(p, name, n) == 0 && p[n] == ' ')
            return (int64_t)strtod(p + n + 1, NULL);
        p = nl + 1;
    }
    return -1;
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

static int define(gg_client *c, const opts *o, uint64_t buf, uint64_t *prog)
{
    const int64_t xd[] = {GG_BATCH, D}, hd[] = {GG_BATCH, H}, vd[] = {D}, hv[] = {H},
                  w1[] = {H, D}, w2[] = {D, H};
    gg_program_def *d = gg_program_def_new(o->prog);
    uint64_t off = 0;
    bool mlp = strcmp(o->prog, "mlp") == 0;
    gg_program_def_tensor(d, "x", buf, off, "f16", 2, xd);
    off += 256 * D * 2;
    gg_program_def_tensor(d, "y", buf, off, "f16", 2, xd);
    off += 256 * D * 2;
    if (mlp) {
        gg_program_def_tensor(d, "w1", buf, off, "f16", 2, w1);
        off += (uint64_t)H * D * 2;
        gg_program_def_tensor(d, "b1", buf, off, "f16", 1, hv);
        off += H * 2;
        gg_program_def_tensor(d, "w2", buf, off, "f16", 2, w2);
        off += (uint64_t)H * D * 2;
        gg_program_def_tensor(d, "b2", buf, off, "f16", 1, vd);
        gg_program_def_scratch(d, "h", "f16", 2, hd);
        gg_program_def_scratch(d, "g", "f16", 2, hd);
    } else {
        gg_program_def_tensor(d, "w", buf, off, "f16", 1, vd);
        off += D * 2;
        gg_program_def_tensor(d, "b", buf, off, "f16", 1, vd);
        gg_program_def_scratch(d, "t", "f16", 2, xd);
        gg_program_def_scratch(d, "a", "f16", 2, xd);
    }
    for (int br = 0; br < o->branches; br++) {
        if (br)
            gg_program_def_branch(d);
        if (mlp) {
            gg_program_def_op(d, "linear", "x,w1,b1", "h");
            gg_program_def_op(d, "gelu", "h", "g");
            gg_program_def_op(d, "linear", "g,w2,b2", "y");
        } else {
            for (int i = 0; i < PAIRS; i++) {
                gg_program_def_op(d, "layernorm", i == 0 ? "x,w,b" : "a,w,b", "t");
                gg_program_def_op(d, "gelu", "t", i == PAIRS - 1 ? "y" : "a");
            }
        }
    }
    int rc = gg_client_program_define(c, d, prog);
    gg_program_def_free(d);
    return rc;
}

int main(int argc, char **argv)
{
    opts o = {.prog = "chain64", .branches = 2};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout), 0;
        if (!v)
            return usage(stderr);
        if (!strcmp(a, "--socket")) o.socket = v;
        else if (!strcmp(a, "--program") && (!strcmp(v, "chain64") || !strcmp(v, "mlp"))) o.prog = v;
        else if (!strcmp(a, "--branches")) o.branches = atoi(v);
        else if (!strcmp(a, "--json")) o.json = v;
        else if (!strcmp(a, "--label")) o.label = v;
        else if (!strcmp(a, "--commit")) o.commit = v;
        else return usage(stderr);
        i++;
    }
    if (o.branches < 1 || o.branches > 64)
        return usage(stderr);
    if (!o.commit)
        o.commit = getenv("GFXGRAPH_GIT_COMMIT");

    gg_client *c = gg_client_new();
    if (!c || gg_client_connect(c, o.socket, "bench_scratch") < 0) {
        fprintf(stderr, "bench_scratch: %s\n", c ? gg_client_last_error(c) : "out of memory");
        return 2;
    }
    if (strcmp(gg_client_backend(c), "cpu") != 0) {
        fprintf(stderr, "bench_scratch: shm buffers need the cpu backend (the daemon runs %s); "
                "the figures are the same on any backend\n", gg_client_backend(c));
        gg_client_close(c);
        return 64;
    }
    char shm[64];
    snprintf(shm, sizeof shm, "/gg-bench-scratch-%d", (int)getpid());
    size_t size = 2 * 256 * D * 2 + 2 * (size_t)H * D * 2 + (H + D) * 2 + 4096;
    void *mem = NULL;
    uint64_t buf = 0, prog = 0;
    int rc = 1;
    if (gg_client_shm_create(shm, size, &mem) < 0) {
        fprintf(stderr, "bench_scratch: cannot create shm %s\n", shm);
        goto out;
    }
    memset(mem, 0, size);
    if (gg_client_buffer_register_shm(c, shm, 0, size, &buf) < 0) {
        rc = fail(c, "buffer.register");
        goto out;
    }
    if (define(c, &o, buf, &prog) < 0) {
        rc = fail(c, "program.define");
        goto out;
    }
    int ready = 0, failed = 0;
    if (gg_client_program_prepare(c, prog, 0, NULL, -1, &ready, &failed) < 0) {
        rc = fail(c, "program.prepare");
        goto out;
    }
    /* the program's buckets, as the daemon reports them */
    const msgpack_object *r = NULL;
    int buckets[MAXB], nb = 0;
    if (gg_client_call(c, "program.list", NULL, 0, &r) == 0) {
        const msgpack_object *ps = map_get(r, "programs");
        for (uint32_t i = 0; ps && ps->type == MSGPACK_OBJECT_ARRAY && i < ps->via.array.size; i++)
            if (map_int(&ps->via.array.ptr[i], "id") == (int64_t)prog) {
                const msgpack_object *bk = map_get(&ps->via.array.ptr[i], "buckets");
                for (uint32_t k = 0; bk && k < bk->via.array.size && nb < MAXB; k++)
                    buckets[nb++] = (int)bk->via.array.ptr[k].via.u64;
            }
    }
    if (nb == 0) {
        fprintf(stderr, "bench_scratch: program.list does not show the program's buckets\n");
        goto out;
    }
    for (int br = 0; br < o.branches; br++)
        for (int i = 0; i < nb; i++)
            if (gg_client_replay(c, prog, buckets[i], br, NULL) < 0) {
                rc = fail(c, "replay");
                goto out;
            }
    int64_t gauge = metrics_gauge(c, "gfxgraph_scratch_bytes");
    int64_t st_scratch = -1, st_arenas = -1, cache_bytes = -1, graphs = -1;
    if (gg_client_call(c, "stats", NULL, 0, &r) == 0) {
        st_scratch = map_int(r, "scratch_bytes");
        st_arenas = map_int(r, "scratch_arenas");
        cache_bytes = map_int(r, "cache_bytes");
        graphs = map_int(r, "graphs_cached");
    }
    uint64_t per_entry = 0;
    for (int i = 0; i < nb; i++)
        per_entry += run_scratch(o.prog, buckets[i]);
    per_entry *= (uint64_t)o.branches;
    uint64_t arena = run_scratch(o.prog, buckets[nb - 1]);

    char label[128];
    snprintf(label, sizeof label, "%s", o.label ? o.label : o.prog);
    printf("bench_scratch %s: %s, %d branch(es) x %d buckets (%d..%d) on %s %s: %d graphs ready, "
           "%d failed\n", label, o.prog, o.branches, nb, buckets[0], buckets[nb - 1],
           gg_client_backend(c), gg_client_server_version(c), ready, failed);
    printf("RESULT %-12s scratch_bytes %lld (stats %lld in %lld arena(s)); cache_bytes %lld; "
           "expected: one block per entry %llu, one arena %llu\n", label, (long long)gauge,
           (long long)st_scratch, (long long)st_arenas, (long long)cache_bytes,
           (unsigned long long)per_entry, (unsigned long long)arena);
    rc = 0;
    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            perror(o.json);
            rc = 1;
            goto out;
        }
        struct utsname u;
        uname(&u);
        char date[32];
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        fprintf(f, "{\n  \"bench\": \"bench_scratch\",\n  \"label\": ");
        json_str(f, label);
        fprintf(f, ",\n  \"date\": ");
        json_str(f, date);
        fprintf(f, ",\n  \"host\": {\"nodename\": ");
        json_str(f, u.nodename);
        fprintf(f, ", \"release\": ");
        json_str(f, u.release);
        fprintf(f, ", \"machine\": ");
        json_str(f, u.machine);
        fprintf(f, "},\n  \"git_commit\": ");
        json_str(f, o.commit ? o.commit : "unknown");
        fprintf(f, ",\n  \"daemon\": {\"version\": ");
        json_str(f, gg_client_server_version(c));
        fprintf(f, ", \"backend\": ");
        json_str(f, gg_client_backend(c));
        fprintf(f, ", \"device\": ");
        json_str(f, gg_client_device_name(c));
        fprintf(f, "},\n  \"program\": ");
        json_str(f, o.prog);
        fprintf(f, ",\n  \"branches\": %d,\n  \"buckets\": [", o.branches);
        for (int i = 0; i < nb; i++)
            fprintf(f, "%s%d", i ? ", " : "", buckets[i]);
        fprintf(f, "],\n  \"graphs_ready\": %d,\n  \"graphs_cached\": %lld,\n", ready,
                (long long)graphs);
        fprintf(f, "  \"scratch_bytes_gauge\": %lld,\n  \"stats_scratch_bytes\": %lld,\n"
                   "  \"stats_scratch_arenas\": %lld,\n  \"cache_bytes\": %lld,\n",
                (long long)gauge, (long long)st_scratch, (long long)st_arenas,
                (long long)cache_bytes);
        fprintf(f, "  \"expected_one_block_per_entry\": %llu,\n  \"expected_one_arena\": %llu\n}\n",
                (unsigned long long)per_entry, (unsigned long long)arena);
        if (fclose(f) != 0)
            rc = 1;
    }
out:
    if (prog)
        gg_client_program_release(c, prog);
    if (buf)
        gg_client_buffer_release(c, buf);
    gg_client_close(c);
    if (mem)
        gg_client_shm_destroy(shm, mem, size);
    return rc;
}
