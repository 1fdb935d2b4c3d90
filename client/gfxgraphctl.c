/* SPDX-License-Identifier: MIT */
/* gfxgraphctl: ask a running gfxgraphd for its stats or health.
 *
 *   gfxgraphctl stats    [--json] [--socket PATH] [--timeout SECONDS]
 *   gfxgraphctl health   [--json] [--socket PATH] [--timeout SECONDS]
 *   gfxgraphctl sessions [--json] ...          the sessions table of stats
 *   gfxgraphctl cache    [--json] ...          the cache, by program, branch, bucket
 *   gfxgraphctl top      [--once] [--interval SECONDS] ...   a live view
 *   gfxgraphctl metrics  [--output FILE] ...    Prometheus text (docs/metrics.md)
 *   gfxgraphctl config   [--json] ...          the running settings, each with its source
 *   gfxgraphctl call METHOD [JSON] ...         any method; the answer as JSON
 *   gfxgraphctl evict PROGRAM|--id ID|--all ... drop cached graphs (admin)
 *   gfxgraphctl kill-session ID ...            close a client's session (admin)
 *   gfxgraphctl help [COMMAND], COMMAND --help
 *
 * Exit status, the same for every command: 0 ok; 1 unhealthy (health ok is
 * false) or the daemon answered an error; 2 the daemon could not be reached
 * or gave no answer; 64 usage. */
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

/* Each command's synopsis and help; gfxgraphctl COMMAND --help prints it,
 * gfxgraphctl --help the list. */
typedef struct {
    const char *name;
    const char *args;      /* after the command */
    const char *brief;     /* the global list */
    const char *help;      /* COMMAND --help */
} ctl_cmd;

static const ctl_cmd ctl_cmds[] = {
    {"stats", "[--json]", "counters, then the sessions and the graph cache",
     "The daemon's counters (requests, errors, replay, capture, eager and fallback\n"
     "counts, average replay time, cache use), then a table of the sessions and a\n"
     "table of the graph cache.  --json: the daemon's answer as it is (the counters\n"
     "are top-level keys: jq .replay_count).  A user who is not root, the daemon's\n"
     "user or in admin-group sees the sessions and programs of their own uid only.\n"},
    {"health", "[--json]", "device and daemon health (exit status 1: unhealthy)",
     "Runs the daemon's capture-and-replay smoke test and shows the device, its\n"
     "memory and the result.  Exit status 1 when the daemon says it is unhealthy.\n"},
    {"sessions", "[--json]", "the sessions, one row each",
     "The sessions table of stats: one row per connected client.  --json: the\n"
     "list alone.\n"},
    {"cache", "[--json]", "the graph cache, sorted by program, branch and bucket",
     "The graph cache table of stats, sorted by program, branch and bucket.\n"
     "--json: the list alone, in the daemon's order.\n"},
    {"top", "[--once] [--interval SECONDS]",
     "a live view: replays/s, latency percentiles, cache",
     "A live view, refreshed every --interval seconds (default 1): sessions,\n"
     "replays per second, the replay round trip's p50/p90/p99 over the last\n"
     "interval (from the daemon's latency histograms, as Prometheus's\n"
     "histogram_quantile computes them), the cache and the problems, then the\n"
     "sessions and the cache.  --once: one frame (rates and percentiles over one\n"
     "interval), then exit.\n"},
    {"metrics", "[--output FILE]", "counters, gauges and histograms as Prometheus text",
     "The daemon's metrics as Prometheus text (docs/metrics.md).  --output FILE\n"
     "writes FILE atomically (a temporary file in its folder, then renamed over\n"
     "it) instead of standard output.\n"},
    {"config", "[--json]", "the running settings and where each came from",
     "The daemon's settings as it runs with them now (after any reload): each\n"
     "key, its value, where it came from (default, the config file and line, an\n"
     "environment variable, a flag) and whether a reload (SIGHUP) can change it.\n"},
    {"call", "METHOD [JSON]", "any method; the answer as JSON",
     "Calls METHOD (proto/PROTOCOL.md; hello lists them) with JSON, an object of\n"
     "its params (none when left out), and prints the answer as JSON.  For\n"
     "example: gfxgraphctl call stats; gfxgraphctl call admin.evict '{\"all\": true}'.\n"
     "A daemon error goes to standard error with its code (exit status 1).\n"},
    {"evict", "PROGRAM|--id ID|--all", "drop cached graphs (admin)",
     "Drops the cached graphs of the programs named PROGRAM (a name, even when it\n"
     "is all digits), of the program whose id is ID (--id, as in the PROGRAM\n"
     "column of cache), or every graph (--all).  Graphs in use go when their\n"
     "replays end; each is captured again on its next replay.  For root, the\n"
     "daemon's user and members of admin-group.\n"},
    {"kill-session", "ID", "close a client's session (admin)",
     "Closes session ID's connection and fast path as if its client had\n"
     "disconnected (ID as in the ID column of sessions).  The client is told\n"
     "why, with the code ECONNABORTED.  For root, the daemon's user and members\n"
     "of admin-group.\n"},
    {"help", "[COMMAND]", "this help, or a command's", "The help of COMMAND, or the list.\n"},
};
#define NCMDS ((int)(sizeof(ctl_cmds) / sizeof(ctl_cmds[0])))

static const ctl_cmd *ctl_find_cmd(const char *name)
{
    for (int i = 0; i < NCMDS; i++)
        if (strcmp(ctl_cmds[i].name, name) == 0)
            return &ctl_cmds[i];
    return NULL;
}

static int ctl_usage_error(void)
{
    fprintf(stderr, "usage: gfxgraphctl [--json] [--socket PATH] [--timeout SECONDS] COMMAND "
                    "[ARGS]\n(gfxgraphctl --help for the commands, gfxgraphctl COMMAND --help "
                    "for one)\n");
    return EXIT_USAGE;
}

static void ctl_cmd_help(FILE *f, const ctl_cmd *cmd)
{
    fprintf(f, "usage: gfxgraphctl [--socket PATH] [--timeout SECONDS] %s%s%s\n\n%s", cmd->name,
            *cmd->args ? " " : "", cmd->args, cmd->help);
    fprintf(f, "\nexit status: 0 ok, 1 the daemon answered an error%s,\n"
               "             2 cannot connect (or no answer), 64 usage error\n",
            strcmp(cmd->name, "health") == 0 ? " or is unhealthy" : "");
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
    char list[4096];
    size_t o = 0;
    for (int i = 0; i < NCMDS && o < sizeof list; i++) {
        char head[96];
        snprintf(head, sizeof head, "%s %s", ctl_cmds[i].name, ctl_cmds[i].args);
        if (strlen(head) > 22)   /* the description on a line of its own */
            o += (size_t)snprintf(list + o, sizeof list - o, "  %s\n%26s%s\n", head, "",
                                  ctl_cmds[i].brief);
        else
            o += (size_t)snprintf(list + o, sizeof list - o, "  %-22s  %s\n", head,
                                  ctl_cmds[i].brief);
    }
    fprintf(f,
            "usage: gfxgraphctl [--json] [--socket PATH] [--timeout SECONDS] COMMAND\n"
            "\n"
            "Ask a running gfxgraphd for its state (or, admin commands, act on it).\n"
            "\n"
            "commands (gfxgraphctl COMMAND --help for each):\n"
            "%s"
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
            list, sock);
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

static const ctl_col ctl_cfgcols[] = {
    {"KEY", "key", true}, {"VALUE", "value", true}, {"RELOAD", "reload", true},
    {"SOURCE", "source", true},
};

/* The config answer: KEY VALUE RELOAD SOURCE, RELOAD saying whether SIGHUP
 * changes it ("live") or it needs a restart. */
static int ctl_print_config(const msgpack_object *r)
{
    const msgpack_object *set = proto_map_get(r, "settings");
    char file[CELL];
    ctl_cell(file, sizeof file, proto_map_get(r, "file"), 1);
    if (!set || set->type != MSGPACK_OBJECT_ARRAY) {
        fprintf(stderr, "gfxgraphctl: the config answer has no settings list\n");
        return EXIT_FAIL;
    }
    /* a copy of each row with the live flag as a word */
    msgpack_zone zone;
    msgpack_zone_init(&zone, 4096);
    msgpack_object rows = {.type = MSGPACK_OBJECT_ARRAY};
    rows.via.array.size = set->via.array.size;
    rows.via.array.ptr = msgpack_zone_malloc(&zone, sizeof(msgpack_object) * (set->via.array.size + 1));
    for (uint32_t i = 0; rows.via.array.ptr && i < set->via.array.size; i++) {
        const msgpack_object *row = &set->via.array.ptr[i];
        msgpack_object *o = &rows.via.array.ptr[i];
        o->type = MSGPACK_OBJECT_MAP;
        o->via.map.size = 4;
        o->via.map.ptr = msgpack_zone_malloc(&zone, 4 * sizeof(msgpack_object_kv));
        if (!o->via.map.ptr) {
            rows.via.array.size = i;
            break;
        }
        static const char *const keys[] = {"key", "value", "source", "reload"};
        for (int k = 0; k < 4; k++) {
            msgpack_object_kv *kv = &o->via.map.ptr[k];
            kv->key.type = MSGPACK_OBJECT_STR;
            kv->key.via.str.ptr = keys[k];
            kv->key.via.str.size = (uint32_t)strlen(keys[k]);
            if (k < 3) {
                const msgpack_object *v = proto_map_get(row, keys[k]);
                if (v)
                    kv->val = *v;
                else
                    kv->val.type = MSGPACK_OBJECT_NIL;
                continue;
            }
            const msgpack_object *live = proto_map_get(row, "live");
            const char *w = live && live->type == MSGPACK_OBJECT_BOOLEAN
                                ? (live->via.boolean ? "live" : "restart")
                                : "-";
            kv->val.type = MSGPACK_OBJECT_STR;
            kv->val.via.str.ptr = w;
            kv->val.via.str.size = (uint32_t)strlen(w);
        }
    }
    printf("gfxgraphd config: %u settings, config file %s\n", set->via.array.size, file);
    ctl_table("", rows.via.array.ptr ? &rows : set, ctl_cfgcols, NCOLS(ctl_cfgcols));
    msgpack_zone_destroy(&zone);
    return EXIT_OK;
}

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

/* ---- latency percentiles from the daemon's histograms -------------------- */

#define CTL_HIST_MAX 64
#define CTL_HIST_NAME "gfxgraph_replay_round_trip_seconds_bucket{"

/* One histogram summed over its series (program, bucket): cumulative counts
 * by upper bound, ascending; the +Inf bound is INFINITY. */
typedef struct {
    int n;
    double le[CTL_HIST_MAX];
    double count[CTL_HIST_MAX];
} ctl_hist;

static void ctl_hist_add(ctl_hist *h, double le, double v)
{
    int i = 0;
    while (i < h->n && h->le[i] < le)
        i++;
    if (i < h->n && h->le[i] == le) {
        h->count[i] += v;
        return;
    }
    if (h->n == CTL_HIST_MAX)
        return;
    memmove(h->le + i + 1, h->le + i, (size_t)(h->n - i) * sizeof(double));
    memmove(h->count + i + 1, h->count + i, (size_t)(h->n - i) * sizeof(double));
    h->le[i] = le;
    h->count[i] = v;
    h->n++;
}

/* The round-trip histogram's bucket lines of the metrics text. */
static void ctl_hist_parse(ctl_hist *h, const char *text, size_t len)
{
    h->n = 0;
    const char *p = text, *end = text + len;
    size_t nl = strlen(CTL_HIST_NAME);
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if ((size_t)(eol - p) > nl && memcmp(p, CTL_HIST_NAME, nl) == 0) {
            char line[512];
            size_t ll = (size_t)(eol - p) < sizeof line - 1 ? (size_t)(eol - p) : sizeof line - 1;
            memcpy(line, p, ll);
            line[ll] = '\0';
            char *le = strstr(line, "le=\"");
            char *close = strrchr(line, '}');
            if (le && close) {
                le += 4;
                double bound = strncmp(le, "+Inf", 4) == 0 ? INFINITY : strtod(le, NULL);
                double v = strtod(close + 1, NULL);
                ctl_hist_add(h, bound, v);
            }
        }
        p = eol + 1;
    }
}

/* The q-quantile of now - before (the replays between two samples), found
 * as Prometheus's histogram_quantile does: linear within the bucket it
 * falls in, the highest finite bound when it falls in +Inf.  NAN when no
 * replay came between them. */
static double ctl_hist_quantile(const ctl_hist *now, const ctl_hist *before, double q)
{
    double d[CTL_HIST_MAX];
    for (int i = 0; i < now->n; i++) {
        d[i] = now->count[i];
        for (int k = 0; k < before->n; k++)
            if (before->le[k] == now->le[i])
                d[i] -= before->count[k];
    }
    if (now->n == 0 || !(d[now->n - 1] > 0))
        return NAN;
    double rank = q * d[now->n - 1];
    for (int i = 0; i < now->n; i++) {
        if (d[i] < rank)
            continue;
        if (isinf(now->le[i]))
            return i > 0 ? now->le[i - 1] : NAN;
        double lo = i > 0 ? now->le[i - 1] : 0, prev = i > 0 ? d[i - 1] : 0;
        double in = d[i] - prev;
        return in > 0 ? lo + (now->le[i] - lo) * (rank - prev) / in : now->le[i];
    }
    return NAN;
}

/* The latency line of top: percentiles when the histograms could be read,
 * else the averages of stats. */
static void ctl_top_latency(const msgpack_object *r, const ctl_hist *now, const ctl_hist *before)
{
    char a[64], b[64], c[64];
    if (now && before) {
        double p50 = ctl_hist_quantile(now, before, 0.50);
        double p90 = ctl_hist_quantile(now, before, 0.90);
        double p99 = ctl_hist_quantile(now, before, 0.99);
        if (isnan(p50)) {
            printf("  %-12s no replays in the last interval\n", "latency");
            return;
        }
        ctl_fmt(a, sizeof a, p50 * 1e6, 1);
        ctl_fmt(b, sizeof b, p90 * 1e6, 1);
        ctl_fmt(c, sizeof c, p99 * 1e6, 1);
        printf("  %-12s p50 %s us  p90 %s us  p99 %s us  (round trip, last interval)\n",
               "latency", a, b, c);
        return;
    }
    ctl_fmt(a, sizeof a, ctl_get(r, "avg_replay_us"), 1);
    ctl_fmt(b, sizeof b, ctl_get(r, "avg_eager_us"), 1);
    printf("  %-12s avg %s us (graph), avg %s us (eager)\n", "latency", a, b);
}

/* One frame of top; rate: replays/s since the last sample (NAN: none);
 * hist/hist_before: the latency histograms now and at the last sample
 * (NULL: the daemon gave none). */
static void ctl_top_frame(const msgpack_object *r, double rate, double interval,
                          const ctl_hist *hist, const ctl_hist *hist_before)
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
    ctl_top_latency(r, hist, hist_before);
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
    static ctl_hist hist[2];
    bool have_hist = false, had_hist = false;
    for (int frame = 0;; frame++) {
        const msgpack_object *r;
        /* the histograms first: an answer lives until the next call */
        ctl_hist *now = &hist[frame & 1], *before = &hist[(frame + 1) & 1];
        had_hist = have_hist;
        have_hist = false;
        int rc = gg_client_call(c, "metrics", NULL, 0, &r);
        if (rc == 0) {
            const msgpack_object *t = proto_map_get(r, "text");
            if (t && t->type == MSGPACK_OBJECT_STR) {
                ctl_hist_parse(now, t->via.str.ptr, t->via.str.size);
                have_hist = true;   /* empty (no replay yet) is a baseline too */
            }
        } else if (!gg_client_connected(c)) {
            fprintf(stderr, "gfxgraphctl: metrics failed: %s\n", gg_client_last_error(c));
            return ctl_exit_for(rc);
        }
        rc = gg_client_call(c, "stats", NULL, 0, &r);
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
        ctl_top_frame(r, rate, interval, have_hist ? now : NULL,
                      have_hist && had_hist ? before : NULL);
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
    bool json = false, once = false, all = false, help = false;
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
            help = true;   /* COMMAND --help: the command's own, found below */
            break;
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
    char names[256];
    size_t no = 0;
    for (int i = 0; i < NCMDS && no < sizeof names; i++)
        no += (size_t)snprintf(names + no, sizeof names - no, "%s%s",
                               i ? (i == NCMDS - 1 ? " or " : ", ") : "", ctl_cmds[i].name);
    if (optind >= argc) {
        if (help) {
            ctl_usage(stdout);
            return EXIT_OK;
        }
        fprintf(stderr, "gfxgraphctl: which command? (%s)\n", names);
        return ctl_usage_error();
    }
    const char *cmd = argv[optind];
    const ctl_cmd *known = ctl_find_cmd(cmd);
    if (!known) {
        fprintf(stderr, "gfxgraphctl: unknown command '%s' (%s)\n", cmd, names);
        return ctl_usage_error();
    }
    int operands = argc - optind - 1;
    if (strcmp(cmd, "help") == 0) {
        const ctl_cmd *of = operands >= 1 ? ctl_find_cmd(argv[optind + 1]) : NULL;
        if (operands > 1 || (operands == 1 && !of)) {
            fprintf(stderr, "gfxgraphctl: help wants one command (%s)\n", names);
            return ctl_usage_error();
        }
        if (of && strcmp(of->name, "help") != 0)
            ctl_cmd_help(stdout, of);
        else
            ctl_usage(stdout);
        return EXIT_OK;
    }
    if (help) {
        ctl_cmd_help(stdout, known);
        return EXIT_OK;
    }
    bool evict = strcmp(cmd, "evict") == 0, kill = strcmp(cmd, "kill-session") == 0;
    bool call = strcmp(cmd, "call") == 0;
    /* evict takes PROGRAM, --id ID or --all, kill-session an ID, call METHOD
     * [JSON]; the rest nothing */
    const char *arg = operands == 1 ? argv[optind + 1] : NULL;
    if (call && (operands < 1 || operands > 2 || !*argv[optind + 1])) {
        fprintf(stderr, "gfxgraphctl: call wants a method and, if it takes params, a JSON "
                        "object of them: call METHOD ['{\"key\": value}']\n");
        return ctl_usage_error();
    }
    if (call && json) {
        fprintf(stderr, "gfxgraphctl: call always prints JSON (no --json)\n");
        return ctl_usage_error();
    }
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
    if (!evict && !kill && !call && operands) {
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
                         : strcmp(cmd, "config") == 0  ? "config"
                         : call                        ? argv[optind + 1]
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
    if (call) {
        char *out = NULL;
        rc = gg_client_call_json(c, method, operands == 2 ? argv[optind + 2] : NULL, &out);
        int ex = EXIT_OK;
        if (rc < 0) {
            const char *code = gg_client_last_error_code(c);
            fprintf(stderr, "gfxgraphctl: %s failed: %s%s%s%s\n", method,
                    gg_client_last_error(c), *code ? " (" : "", code, *code ? ")" : "");
            /* params that are not JSON are a usage error, found before sending */
            ex = rc == -EINVAL && strncmp(gg_client_last_error(c), "gg_client_call_json", 19) == 0
                     ? EXIT_USAGE
                     : ctl_exit_for(rc);
        } else {
            fputs(out, stdout);
            if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "gfxgraphctl: cannot write the output: %s\n", strerror(errno));
                ex = EXIT_FAIL;
            }
        }
        gg_client_free_json(out);
        msgpack_sbuffer_destroy(&admin);
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
    else if (strcmp(cmd, "config") == 0)
        ex = ctl_print_config(r);
    else
        ex = ctl_print_health(r, ok);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "gfxgraphctl: cannot write the output: %s\n", strerror(errno));
        ex = EXIT_FAIL;
    }
    gg_client_close(c);
    return ex;
}
