/* gfxgraphctl: ask a running gfxgraphd for its stats or health.
 *
 *   gfxgraphctl stats    [--json] [--socket PATH] [--timeout SECONDS]
 *   gfxgraphctl health   [--json] [--socket PATH] [--timeout SECONDS]
 *   gfxgraphctl sessions [--json] ...          the sessions table of stats
 *   gfxgraphctl cache    [--json] ...          the cache, by program, branch, bucket
 *   gfxgraphctl top      [--once] [--interval SECONDS] ...   a live view
 *   gfxgraphctl metrics  [--output FILE] ...    Prometheus text (docs/metrics.md)
 *   gfxgraphctl evict PROGRAM|--id ID|--all ... drop cached graphs (admin)
 *   gfxgraphctl kill-session ID ...            close a client's session (admin)
 *
 * Exit status: 0 ok; 1 unhealthy (health ok is false) or the daemon answered
 * an error; 2 the daemon could not be reached or gave no answer; 64 usage. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_json.h"
#include "internal.h"
#include "proto.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_NOCONN = 2, EXIT_USAGE = 64 };

#define CELL 256

static int ctl_usage_error(void)
{
    fprintf(stderr, "usage: gfxgraphctl [--json] [--socket PATH] [--timeout SECONDS] "
                    "stats|health|sessions|cache|top|metrics|evict|kill-session\n"
                    "(gfxgraphctl --help for more)\n");
    return EXIT_USAGE;
}

static void ctl_usage(FILE *f)
{
    char paths[2][GG_CLIENT_PATH_MAX], sock[2 * GG_CLIENT_PATH_MAX + 48];
    int n = gg_client_default_sockets(paths, 2);
    if (n < 0)
        snprintf(sock, sizeof sock, "(too long)");
    else if (n == 1)
        snprintf(sock, sizeof sock, "%s", paths[0]);
    else
        snprintf(sock, sizeof sock, "%s,\n                     then %s", paths[0], paths[1]);
    fprintf(f,
            "usage: gfxgraphctl [--json] [--socket PATH] [--timeout SECONDS] COMMAND\n"
            "\n"
            "Ask a running gfxgraphd for its state (or, admin commands, act on it).\n"
            "\n"
            "commands:\n"
            "  stats    counters, then the sessions and the graph cache\n"
            "  health   device and daemon health (exit status 1 when unhealthy)\n"
            "  sessions the sessions, one row each\n"
            "  cache    the graph cache, sorted by program, branch and bucket\n"
            "  top      a live view: sessions, replays/s, latency, cache, fallbacks\n"
            "  metrics  counters, gauges and latency histograms as Prometheus text\n"
            "\n"
            "admin commands (root, the daemon's user and admin-group only):\n"
            "  evict PROGRAM|--id ID|--all\n"
            "                        drop the cached graphs of the programs named PROGRAM\n"
            "                        (a name, even when it is all digits), of the program\n"
            "                        whose id is ID, or every graph; graphs in use go when\n"
            "                        their replays end; each is captured again on its next\n"
            "                        replay\n"
            "  kill-session ID       close session ID's connection and fast path, as if\n"
            "                        its client had disconnected\n"
            "\n"
            "options:\n"
            "  --json             print the daemon's answer as JSON\n"
            "  --socket PATH      the daemon's socket (default: %s;\n"
            "                     $GFXGRAPH_SOCKET overrides the default)\n"
            "  --timeout SECONDS  wait at most this long for the answer (default 10; 0: "
            "forever)\n"
            "  --interval SECONDS top: the refresh period (default 1)\n"
            "  --once             top: one frame (replays/s over one interval), then exit\n"
            "  --all              evict: every cached graph\n"
            "  --id ID            evict: the program whose id is ID (a number, as in the\n"
            "                     PROGRAM column of cache)\n"
            "  --output FILE      metrics: write FILE atomically (a temporary file in its\n"
            "                     folder, then renamed over it) instead of standard output\n"
            "  -h, --help         this help\n"
            "  --version          gfxgraphctl's version\n"
            "\n"
            "exit status: 0 ok, 1 unhealthy or the daemon answered an error,\n"
            "             2 cannot connect (or no answer), 64 usage error\n",
            sock);
}

/* ---- text output --------------------------------------------------------- */

static bool ctl_num(const msgpack_object *o, double *v)
{
    return o && proto_obj_f64(o, v);
}

static void ctl_duration(char *buf, size_t len, double s)
{
    if (!(s >= 0) || !isfinite(s)) {
        snprintf(buf, len, "-");
        return;
    }
    unsigned long long t = (unsigned long long)s;
    unsigned long long d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;
    if (d)
        snprintf(buf, len, "%llud %02lluh %02llum %02llus", d, h, m, sec);
    else if (h)
        snprintf(buf, len, "%lluh %02llum %02llus", h, m, sec);
    else if (m)
        snprintf(buf, len, "%llum %02llus", m, sec);
    else
        snprintf(buf, len, "%llus", sec);
}

/* enabled_at (Unix time, or nil while graphs are off) as local time */
static void ctl_enabled_at(char *buf, size_t len, const msgpack_object *o)
{
    double v;
    struct tm tm;
    time_t t;
    if (!o || !proto_obj_f64(o, &v) || !isfinite(v)) {
        snprintf(buf, len, "never (graphs are off)");
        return;
    }
    t = (time_t)v;
    if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S %Z", &tm))
        snprintf(buf, len, "%.0f", v);
}

static bool ctl_in(const char *const *list, const msgpack_object *key)
{
    for (int i = 0; list[i]; i++)
        if (proto_str_eq(key, list[i]))
            return true;
    return false;
}

/* "  key:   value" lines: the known keys in order, then any others that are
 * not in skip. */
static void ctl_kv_lines(const msgpack_object *map, const char *const *order,
                         const char *const *skip, int indent, int width)
{
    char cell[CELL];
    for (int i = 0; order[i]; i++) {
        const msgpack_object *v = proto_map_get(map, order[i]);
        if (!v)
            continue;
        ctl_cell(cell, sizeof cell, v, 1);
        printf("%*s%-*s %s\n", indent, "", width, order[i], cell);
    }
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (ctl_in(order, k) || ctl_in(skip, k))
            continue;
        char key[CELL];
        ctl_cell(key, sizeof key, k, 1);
        ctl_cell(cell, sizeof cell, &map->via.map.ptr[i].val, 1);
        printf("%*s%-*s %s\n", indent, "", width, key, cell);
    }
}

typedef struct {
    const char *head;
    const char *key;
    bool left;          /* text: left-aligned */
} ctl_col;

/* One cell, after two spaces: padded to width columns (no trailing spaces
 * on a left-aligned last column). */
static void ctl_pad(const char *text, int width, bool left, bool last)
{
    int pad = width - (int)ctl_width(text);
    if (pad < 0)
        pad = 0;
    printf("  ");
    if (!left)
        printf("%*s", pad, "");
    fputs(text, stdout);
    if (left && !last)
        printf("%*s", pad, "");
}

static void ctl_table(const char *title, const msgpack_object *arr, const ctl_col *cols,
                      int ncols)
{
    if (*title)
        printf("\n%s\n", title);
    if (!arr || arr->type != MSGPACK_OBJECT_ARRAY || arr->via.array.size == 0) {
        printf("  (none)\n");
        return;
    }
    uint32_t nrows = arr->via.array.size;
    char(*cells)[CELL] = calloc((size_t)nrows * (size_t)ncols, CELL);
    int width[32] = {0};
    if (!cells || ncols > 32) {
        free(cells);
        printf("  (out of memory)\n");
        return;
    }
    for (int j = 0; j < ncols; j++)
        width[j] = (int)ctl_width(cols[j].head);
    for (uint32_t i = 0; i < nrows; i++) {
        const msgpack_object *row = &arr->via.array.ptr[i];
        for (int j = 0; j < ncols; j++) {
            char *c = cells[(size_t)i * (size_t)ncols + (size_t)j];
            ctl_cell(c, CELL, proto_map_get(row, cols[j].key), 1);
            int w = (int)ctl_width(c);
            if (w > width[j])
                width[j] = w;
        }
    }
    for (int j = 0; j < ncols; j++)
        ctl_pad(cols[j].head, width[j], cols[j].left, j == ncols - 1);
    printf("\n");
    for (uint32_t i = 0; i < nrows; i++) {
        for (int j = 0; j < ncols; j++)
            ctl_pad(cells[(size_t)i * (size_t)ncols + (size_t)j], width[j], cols[j].left,
                    j == ncols - 1);
        printf("\n");
    }
    free(cells);
}

static const ctl_col ctl_scols[] = {
    {"ID", "id", false},          {"CLIENT", "client", true},
    {"PID", "pid", false},        {"UID", "uid", false},
    {"REQUESTS", "requests", false}, {"ERRORS", "errors", false},
    {"REPLAYS", "replays", false}, {"GRAPH", "graph_replays", false},
    {"EAGER", "eager_replays", false}, {"AVG_US", "avg_replay_us", false},
    {"BUFFERS", "buffers", false}, {"PROGRAMS", "programs", false},
};
static const ctl_col ctl_ccols[] = {
    {"PROGRAM", "program", false},  {"NAME", "program_name", true},
    {"SESSION", "session", false},  {"BRANCH", "branch", false},
    {"BUCKET", "bucket", false},    {"STATE", "state", true},
    {"PARKED", "parked", true},     {"CAPTURES", "captures", false}, {"REPLAYS", "replays", false},
    {"FALLBACKS", "fallbacks", false}, {"AVG_US", "avg_replay_us", false},
    {"IDLE_S", "idle_s", false},    {"REASON", "reason", true},
};
/* replay-mode adaptive: each row's choice and both timings as well */
static const ctl_col ctl_ccols_adaptive[] = {
    {"PROGRAM", "program", false},  {"NAME", "program_name", true},
    {"SESSION", "session", false},  {"BRANCH", "branch", false},
    {"BUCKET", "bucket", false},    {"STATE", "state", true},
    {"PARKED", "parked", true},     {"CAPTURES", "captures", false}, {"REPLAYS", "replays", false},
    {"FALLBACKS", "fallbacks", false}, {"AVG_US", "avg_replay_us", false},
    {"IDLE_S", "idle_s", false},    {"CHOICE", "choice", true}, {"FROM", "choice_from", true},
    {"GRAPH_US", "graph_us", false}, {"EAGER_US", "eager_us", false},
    {"REASON", "reason", true},
};
#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The cache table (the stats answer's cache list), with the adaptive
 * columns when the daemon sends them. */
static void ctl_cache_rows(const char *title, const msgpack_object *c)
{
    bool adaptive = c && c->type == MSGPACK_OBJECT_ARRAY && c->via.array.size &&
                    proto_map_get(&c->via.array.ptr[0], "choice");
    if (adaptive)
        ctl_table(title, c, ctl_ccols_adaptive, NCOLS(ctl_ccols_adaptive));
    else
        ctl_table(title, c, ctl_ccols, NCOLS(ctl_ccols));
}

static void ctl_cache_table(const msgpack_object *r)
{
    ctl_cache_rows("CACHE", proto_map_get(r, "cache"));
}

static double ctl_key_num(const msgpack_object *row, const char *key)
{
    double v;
    return ctl_num(proto_map_get(row, key), &v) ? v : -1;
}

static int ctl_cache_cmp(const void *a, const void *b)
{
    static const char *const keys[] = {"program", "branch", "bucket", "session"};
    for (int i = 0; i < 4; i++) {
        double x = ctl_key_num(a, keys[i]), y = ctl_key_num(b, keys[i]);
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0;
}

/* The cache rows in place, by program, branch, bucket (then session). */
static void ctl_sort_cache(const msgpack_object *r)
{
    const msgpack_object *c = proto_map_get(r, "cache");
    if (c && c->type == MSGPACK_OBJECT_ARRAY && c->via.array.size > 1)
        qsort(c->via.array.ptr, c->via.array.size, sizeof(msgpack_object), ctl_cache_cmp);
}

static int ctl_print_stats(const msgpack_object *r)
{
    static const char *const order[] = {
        "requests", "errors", "replay_count", "capture_count", "instantiation_count",
        "exec_updates", "eager_count",
        "fallback_count", "oversize_count", "validation_failures", "avg_replay_us",
        "avg_eager_us", "graphs_cached", "cache_capacity", "evictions", "sessions_active",
        "sessions_total", NULL};
    static const char *const skip[] = {"backend", "uptime_s", "sessions", "cache", "enabled_at",
                                       NULL};
    char backend[64], up[64], since[64];
    double u;
    ctl_cell(backend, sizeof backend, proto_map_get(r, "backend"), 1);
    if (ctl_num(proto_map_get(r, "uptime_s"), &u))
        ctl_duration(up, sizeof up, u);
    else
        snprintf(up, sizeof up, "-");
    ctl_enabled_at(since, sizeof since, proto_map_get(r, "enabled_at"));
    printf("gfxgraphd stats: backend %s, up %s, graphs enabled %s\n\n", backend, up, since);
    ctl_kv_lines(r, order, skip, 2, 20);
    ctl_table("SESSIONS", proto_map_get(r, "sessions"), ctl_scols, NCOLS(ctl_scols));
    ctl_cache_table(r);
    return EXIT_OK;
}

static int ctl_exit_for(int rc);

/* ---- top ----------------------------------------------------------------- */

static double ctl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double ctl_get(const msgpack_object *r, const char *key)
{
    double v;
    return ctl_num(proto_map_get(r, key), &v) ? v : NAN;
}

static void ctl_fmt(char *buf, size_t len, double v, int decimals)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.*f", decimals, v);
}

/* One frame of top; rate: replays/s since the last sample (NAN: none). */
static void ctl_top_frame(const msgpack_object *r, double rate, double interval)
{
    char backend[64], up[64], a[64], b[64], c[64], d[64];
    ctl_cell(backend, sizeof backend, proto_map_get(r, "backend"), 1);
    ctl_duration(up, sizeof up, ctl_get(r, "uptime_s"));
    time_t now = time(NULL);
    struct tm tm;
    char clock[16];
    strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&now, &tm));
    printf("gfxgraphd top - %s  backend %s  up %s  (every %gs)\n\n", clock, backend, up, interval);
    ctl_fmt(a, sizeof a, ctl_get(r, "sessions_active"), 0);
    ctl_fmt(b, sizeof b, ctl_get(r, "sessions_total"), 0);
    printf("  %-12s %s active, %s since start\n", "sessions", a, b);
    ctl_fmt(a, sizeof a, rate, 1);
    ctl_fmt(b, sizeof b, ctl_get(r, "replay_count"), 0);
    ctl_fmt(c, sizeof c, ctl_get(r, "eager_count"), 0);
    printf("  %-12s %s/s  (%s graph replays, %s eager in all)\n", "replays", a, b, c);
    double p50 = ctl_get(r, "p50_replay_us"), p99 = ctl_get(r, "p99_replay_us");
    if (!isnan(p50) || !isnan(p99)) {
        ctl_fmt(a, sizeof a, p50, 1);
        ctl_fmt(b, sizeof b, p99, 1);
        printf("  %-12s p50 %s us  p99 %s us\n", "latency", a, b);
    } else {
        ctl_fmt(a, sizeof a, ctl_get(r, "avg_replay_us"), 1);
        ctl_fmt(b, sizeof b, ctl_get(r, "avg_eager_us"), 1);
        printf("  %-12s avg %s us (graph), avg %s us (eager)\n", "latency", a, b);
    }
    ctl_fmt(a, sizeof a, ctl_get(r, "graphs_cached"), 0);
    ctl_fmt(b, sizeof b, ctl_get(r, "cache_capacity"), 0);
    ctl_fmt(c, sizeof c, ctl_get(r, "evictions"), 0);
    ctl_fmt(d, sizeof d, ctl_get(r, "capture_count"), 0);
    printf("  %-12s %s of %s graphs, %s evictions, %s captures\n", "cache", a, b, c, d);
    ctl_fmt(a, sizeof a, ctl_get(r, "fallback_count"), 0);
    ctl_fmt(b, sizeof b, ctl_get(r, "validation_failures"), 0);
    ctl_fmt(c, sizeof c, ctl_get(r, "errors"), 0);
    printf("  %-12s %s fallbacks, %s validation failures, %s errors\n", "problems", a, b, c);
    ctl_table("SESSIONS", proto_map_get(r, "sessions"), ctl_scols, NCOLS(ctl_scols));
    ctl_sort_cache(r);
    ctl_cache_table(r);
}

static int ctl_top(gg_client *c, bool once, double interval)
{
    bool tty = !once && isatty(STDOUT_FILENO);
    double last_n = NAN, last_t = 0;
    for (int frame = 0;; frame++) {
        const msgpack_object *r;
        int rc = gg_client_call(c, "stats", NULL, 0, &r);
        if (rc < 0) {
            fprintf(stderr, "gfxgraphctl: stats failed: %s\n", gg_client_last_error(c));
            return ctl_exit_for(rc);
        }
        double t = ctl_now();
        double n = ctl_get(r, "replay_count") + (isnan(ctl_get(r, "eager_count")) ? 0 : ctl_get(r, "eager_count"));
        double rate = isnan(last_n) || t <= last_t ? NAN : (n - last_n) / (t - last_t);
        last_n = n;
        last_t = t;
        if (once && frame == 0) {
            /* the rate needs two samples */
            usleep((useconds_t)(interval * 1e6));
            continue;
        }
        if (tty)
            fputs("\033[H\033[2J", stdout);
        ctl_top_frame(r, rate, interval);
        if (fflush(stdout) != 0)
            return EXIT_FAIL;
        if (once)
            return EXIT_OK;
        usleep((useconds_t)(interval * 1e6));
    }
}

static int ctl_print_health(const msgpack_object *r, bool ok)
{
    static const char *const order[] = {"gpu", "arch", "summary", NULL};
    static const char *const skip[] = {"ok", "vram_total_mb", "vram_free_mb", "details",
                                       "enabled_at", NULL};
    static const char *const dorder[] = {"backend",    "runtime",  "driver", "smoke_test",
                                         "uptime_s",   "sessions", "reason", NULL};
    static const char *const none[] = {NULL};
    printf("%-14s %s\n", "ok", ok ? "yes" : "NO");
    ctl_kv_lines(r, order, skip, 0, 14);
    if (proto_map_get(r, "enabled_at")) {
        char since[64];
        ctl_enabled_at(since, sizeof since, proto_map_get(r, "enabled_at"));
        printf("%-14s %s\n", "enabled_at", since);
    }
    double tot, fr;
    bool ht = ctl_num(proto_map_get(r, "vram_total_mb"), &tot);
    bool hf = ctl_num(proto_map_get(r, "vram_free_mb"), &fr);
    if (ht && hf)
        printf("%-14s %.0f MiB free of %.0f MiB (%.0f%% used)\n", "vram", fr, tot,
               tot > 0 ? 100.0 * (tot - fr) / tot : 0.0);
    else if (ht || hf)
        printf("%-14s %.0f MiB %s\n", "vram", ht ? tot : fr, ht ? "total" : "free");
    const msgpack_object *d = proto_map_get(r, "details");
    if (d && d->type == MSGPACK_OBJECT_MAP) {
        printf("details:\n");
        ctl_kv_lines(d, dorder, none, 2, 12);
    }
    return ok ? EXIT_OK : EXIT_FAIL;
}

/* ---- metrics -------------------------------------------------------------- */

/* The daemon's text as it is, to standard output or atomically to path: a
 * temporary file beside it, flushed to disk, then renamed over it, so a
 * reader (node_exporter's textfile collector) never sees half a file. */
static int ctl_metrics(const msgpack_object *r, const char *path)
{
    const msgpack_object *t = proto_map_get(r, "text");
    if (!t || t->type != MSGPACK_OBJECT_STR) {
        fprintf(stderr, "gfxgraphctl: the metrics answer has no text\n");
        return EXIT_FAIL;
    }
    if (!path) {
        fwrite(t->via.str.ptr, 1, t->via.str.size, stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "gfxgraphctl: cannot write the output: %s\n", strerror(errno));
            return EXIT_FAIL;
        }
        return EXIT_OK;
    }
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp) {
        fprintf(stderr, "gfxgraphctl: out of memory\n");
        return EXIT_FAIL;
    }
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    bool ok = f && fwrite(t->via.str.ptr, 1, t->via.str.size, f) == t->via.str.size &&
              fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        fprintf(stderr, "gfxgraphctl: cannot write %s: %s\n", f ? path : tmp, strerror(err));
        unlink(tmp);
    }
    free(tmp);
    return ok ? EXIT_OK : EXIT_FAIL;
}

/* ---- admin --------------------------------------------------------------- */

/* The params map of evict or kill-session, packed into sb. */
static int ctl_admin_params(msgpack_sbuffer *sb, const char *cmd, const char *arg, bool all,
                            uint64_t prog_id)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    if (strcmp(cmd, "evict") == 0) {
        if (all) {
            proto_pack_kv_bool(&pk, "all", true);
        } else if (prog_id) {
            proto_pack_kv_u64(&pk, "program", prog_id);
        } else {
            proto_pack_kv_str(&pk, "program", arg);
        }
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long id = strtoull(arg, &end, 10);
    if (errno || end == arg || *end || *arg == '-' || id == 0) {
        fprintf(stderr, "gfxgraphctl: kill-session wants a session id (a number, as in "
                        "gfxgraphctl sessions), got '%s'\n", arg);
        return -EINVAL;
    }
    proto_pack_kv_u64(&pk, "id", id);
    return 0;
}

static int ctl_print_admin(const char *cmd, const char *arg, uint64_t prog_id,
                           const msgpack_object *r)
{
    if (strcmp(cmd, "evict") == 0) {
        double ev = ctl_get(r, "evicted"), de = ctl_get(r, "deferred"), left = ctl_get(r, "graphs_cached");
        if (arg)
            printf("evicted %.0f graph(s) of program '%s'", ev, arg);
        else if (prog_id)
            printf("evicted %.0f graph(s) of program id %llu", ev, (unsigned long long)prog_id);
        else
            printf("evicted %.0f graph(s)", ev);
        if (de > 0)
            printf("; %.0f in use go when their replays end", de);
        printf(" (%.0f cached now)\n", left);
        return EXIT_OK;
    }
    char client[CELL];
    ctl_cell(client, sizeof client, proto_map_get(r, "client"), 1);
    printf("killed session %.0f (client '%s', pid %.0f, uid %.0f): %.0f buffer(s), %.0f "
           "program(s)%s\n", ctl_get(r, "session"), client, ctl_get(r, "pid"), ctl_get(r, "uid"),
           ctl_get(r, "buffers"), ctl_get(r, "programs"),
           proto_map_get(r, "fastpath") && proto_map_get(r, "fastpath")->type == MSGPACK_OBJECT_BOOLEAN &&
                   proto_map_get(r, "fastpath")->via.boolean
               ? ", fast path closed"
               : "");
    return EXIT_OK;
}

/* ---- main ---------------------------------------------------------------- */

/* An answer we could not get: 2 when the daemon never answered (unreachable,
 * gone, silent), 1 when it answered with an error. */
static int ctl_exit_for(int rc)
{
    switch (-rc) {
    case ECONNRESET:
    case ENOTCONN:
    case ETIMEDOUT:
    case EPIPE:
        return EXIT_NOCONN;
    default:
        return EXIT_FAIL;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},      {"socket", required_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},   {"once", no_argument, NULL, 'o'},
        {"interval", required_argument, NULL, 'i'}, {"output", required_argument, NULL, 'O'},
        {"all", no_argument, NULL, 'a'},       {"id", required_argument, NULL, 'I'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, once = false, all = false;
    double interval = 1;
    const char *sock = NULL, *output = NULL;
    double timeout_s = 10;
    uint64_t prog_id = 0;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":hs:t:", opts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            json = true;
            break;
        case 's':
            sock = optarg;
            break;
        case 't': {
            char *end;
            errno = 0;
            timeout_s = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(timeout_s >= 0) || timeout_s > 86400) {
                fprintf(stderr, "gfxgraphctl: --timeout wants seconds (0..86400), got '%s'\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        }
        case 'o':
            once = true;
            break;
        case 'a':
            all = true;
            break;
        case 'O':
            output = optarg;
            break;
        case 'I': {
            /* an id only through --id: a program name may be all digits */
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || *optarg == '-' || *optarg == '+' || v == 0) {
                fprintf(stderr, "gfxgraphctl: --id wants a program id (a number from 1, as in "
                                "gfxgraphctl cache), got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            prog_id = v;
            break;
        }
        case 'i': {
            char *end;
            errno = 0;
            interval = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(interval >= 0.05) || interval > 3600) {
                fprintf(stderr, "gfxgraphctl: --interval wants seconds (0.05..3600), got '%s'\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        }
        case 'h':
            ctl_usage(stdout);
            return EXIT_OK;
        case 'V':
            printf("gfxgraphctl %s\n", GG_VERSION);
            return EXIT_OK;
        case ':':
            fprintf(stderr, "gfxgraphctl: %s needs a value\n", argv[optind - 1]);
            return ctl_usage_error();
        default:
            fprintf(stderr, "gfxgraphctl: unknown option '%s'\n", argv[optind - 1]);
            return ctl_usage_error();
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "gfxgraphctl: which command? (stats, health, sessions, cache, top, "
                        "metrics, evict or kill-session)\n");
        return ctl_usage_error();
    }
    const char *cmd = argv[optind];
    static const char *const cmds[] = {"stats", "health", "sessions", "cache", "top", "metrics",
                                       "evict", "kill-session", NULL};
    bool known = false;
    for (int i = 0; cmds[i]; i++)
        known = known || strcmp(cmd, cmds[i]) == 0;
    if (!known) {
        fprintf(stderr, "gfxgraphctl: unknown command '%s' (stats, health, sessions, cache, "
                        "top, metrics, evict or kill-session)\n", cmd);
        return ctl_usage_error();
    }
    bool evict = strcmp(cmd, "evict") == 0, kill = strcmp(cmd, "kill-session") == 0;
    /* evict takes PROGRAM, --id ID or --all, kill-session an ID; the rest nothing */
    int operands = argc - optind - 1;
    const char *arg = operands == 1 ? argv[optind + 1] : NULL;
    if (evict && (operands > 1 || (operands == 1) + (prog_id != 0) + all != 1)) {
        fprintf(stderr, "gfxgraphctl: evict wants a program name, --id ID or --all (one of "
                        "them)\n");
        return ctl_usage_error();
    }
    if (prog_id && !evict) {
        fprintf(stderr, "gfxgraphctl: --id is for evict only\n");
        return ctl_usage_error();
    }
    if (kill && operands != 1) {
        fprintf(stderr, "gfxgraphctl: kill-session wants one session id\n");
        return ctl_usage_error();
    }
    if (!evict && !kill && operands) {
        fprintf(stderr, "gfxgraphctl: one command at a time\n");
        return ctl_usage_error();
    }
    if (all && !evict) {
        fprintf(stderr, "gfxgraphctl: --all is for evict only\n");
        return ctl_usage_error();
    }
    msgpack_sbuffer admin;
    msgpack_sbuffer_init(&admin);
    if ((evict || kill) && ctl_admin_params(&admin, cmd, arg, all, prog_id) < 0) {
        msgpack_sbuffer_destroy(&admin);
        return ctl_usage_error();
    }
    if (strcmp(cmd, "top") == 0 && json) {
        fprintf(stderr, "gfxgraphctl: top has no --json (use stats --json)\n");
        return ctl_usage_error();
    }
    if (output && strcmp(cmd, "metrics") != 0) {
        fprintf(stderr, "gfxgraphctl: --output is for metrics only\n");
        return ctl_usage_error();
    }
    /* sessions and cache are parts of the stats answer */
    const char *method = strcmp(cmd, "health") == 0    ? "health"
                         : strcmp(cmd, "metrics") == 0 ? "metrics"
                         : evict                       ? "admin.evict"
                         : kill                        ? "admin.kill_session"
                                                       : "stats";

    gg_client *c = gg_client_new();
    if (!c) {
        fprintf(stderr, "gfxgraphctl: out of memory\n");
        msgpack_sbuffer_destroy(&admin);
        return EXIT_FAIL;
    }
    gg_client_set_timeout(c, (int)(timeout_s * 1000));
    int rc = gg_client_connect(c, sock, "gfxgraphctl");
    if (rc < 0) {
        fprintf(stderr, "gfxgraphctl: %s\n", gg_client_last_error(c));
        int code = gg_client_socket_reached(c) ? ctl_exit_for(rc) : EXIT_NOCONN;
        gg_client_close(c);
        msgpack_sbuffer_destroy(&admin);
        return code;
    }
    if (strcmp(cmd, "top") == 0) {
        int ex = ctl_top(c, once, interval);
        gg_client_close(c);
        return ex;
    }
    const msgpack_object *r;
    rc = gg_client_call(c, method, admin.size ? admin.data : NULL, admin.size, &r);
    msgpack_sbuffer_destroy(&admin);
    if (rc < 0) {
        const char *code = gg_client_last_error_code(c);
        fprintf(stderr, "gfxgraphctl: %s failed: %s%s%s%s\n", cmd, gg_client_last_error(c),
                *code ? " (" : "", code, *code ? ")" : "");
        int ex = ctl_exit_for(rc);
        gg_client_close(c);
        return ex;
    }
    int ex = EXIT_OK;
    bool ok = true;
    if (strcmp(cmd, "health") == 0) {
        const msgpack_object *o = proto_map_get(r, "ok");
        ok = o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
        if (!o || o->type != MSGPACK_OBJECT_BOOLEAN)
            fprintf(stderr, "gfxgraphctl: the health answer has no ok flag; counting it as "
                            "unhealthy\n");
        ex = ok ? EXIT_OK : EXIT_FAIL;
    }
    if (strcmp(cmd, "metrics") == 0 && !json) {
        ex = ctl_metrics(r, output);
        gg_client_close(c);
        return ex;
    }
    if (strcmp(cmd, "cache") == 0)
        ctl_sort_cache(r);
    const msgpack_object *part = NULL;
    if (strcmp(cmd, "sessions") == 0 || strcmp(cmd, "cache") == 0) {
        part = proto_map_get(r, cmd);
        if (!part || part->type != MSGPACK_OBJECT_ARRAY) {
            fprintf(stderr, "gfxgraphctl: the stats answer has no %s list\n", cmd);
            gg_client_close(c);
            return EXIT_FAIL;
        }
    }
    if (json)
        ctl_json_print(stdout, part ? part : r);
    else if (evict || kill)
        ex = ctl_print_admin(cmd, arg, prog_id, r);
    else if (strcmp(cmd, "sessions") == 0) {
        printf("SESSIONS: %u\n", part->via.array.size);
        ctl_table("", part, ctl_scols, NCOLS(ctl_scols));
    } else if (strcmp(cmd, "cache") == 0) {
        printf("CACHE: %u graph(s), by program, branch, bucket\n", part->via.array.size);
        ctl_cache_rows("", part);
    } else if (strcmp(cmd, "stats") == 0)
        ex = ctl_print_stats(r);
    else
        ex = ctl_print_health(r, ok);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "gfxgraphctl: cannot write the output: %s\n", strerror(errno));
        ex = EXIT_FAIL;
    }
    gg_client_close(c);
    return ex;
}
