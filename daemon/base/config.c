/* SPDX-License-Identifier: MIT */
/* Settings: the table of keys, their defaults, how each value is checked,
 * set and printed.  Where they come from (config file, environment, flags,
 * in that order over the defaults) is config_load.c. */
#include "base/config.h"
#include "base/config_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int default_buckets[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256};

/* Every setting; live ones change on a reload (SIGHUP), the others need a
 * restart (they shape the socket, the device, threads or the cache keys). */
static const struct {
    const char *name;
    bool live;
} cfg_keys[GG_CFG_NKEYS] = {
    {"socket", false},
    {"backend", false},
    {"log-level", true},
    {"log-target", false},
    {"max-message-size", false},
    {"max-inflight", true},
    {"max-connections", true},
    {"max-connections-per-uid", true},
    {"request-timeout-ms", true},
    {"max-queued-bytes", true},
    {"shutdown-timeout-ms", true},
    {"buckets", false},
    {"cache-entries", true},
    {"cache-idle-s", true},
    {"vram-cap", true},
    {"mode", false},
    {"replay-mode", false},
    {"trusted-replay-threshold", false},
    {"trusted-replay-sample-interval", false},
    {"adaptive-samples", false},
    {"adaptive-recheck", false},
    {"adaptive-timing", false},
    {"fault", false},
    {"exec-update-limit", false},
    {"workers", false},
    {"completion", false},
    {"fastpath", false},
    {"fastpath-spin-us", true},
    {"fastpath-max-regions", false},
    {"fastpath-completion", false},
    {"device", false},
    {"max-buffers-per-uid", true},
    {"max-mapped-bytes-per-uid", true},
    {"max-programs-per-uid", true},
    {"max-scratch-bytes-per-uid", true},
    {"max-program-bytes-per-uid", true},
    {"max-parked-graphs-per-uid", true},
    {"max-parked-bytes-per-uid", true},
    {"max-fastpath-regions-per-uid", true},
    {"max-jobs-per-uid", true},
    {"admin-group", true},
    {"stats-max-cache-entries", true},
    {"fuse", false},
};

/* The per-uid quotas: key and field (core/quota.c reads them). */
static uint64_t *cfg_quota_field(gg_config *c, int i)
{
    uint64_t *f[] = {&c->quota_buffers, &c->quota_mapped_bytes, &c->quota_programs,
                     &c->quota_scratch_bytes, &c->quota_program_bytes, &c->quota_parked,
                     &c->quota_parked_bytes, &c->quota_fp_regions, &c->quota_jobs};
    return f[i];
}
#define CFG_QUOTA(c, i) (*cfg_quota_field((gg_config *)(c), i))
static const char *const cfg_quota_keys[] = {
    "max-buffers-per-uid", "max-mapped-bytes-per-uid", "max-programs-per-uid",
    "max-scratch-bytes-per-uid", "max-program-bytes-per-uid", "max-parked-graphs-per-uid",
    "max-parked-bytes-per-uid", "max-fastpath-regions-per-uid", "max-jobs-per-uid",
};
#define CFG_NQUOTA 9

/* The quotas whose default, "auto", is sized from the machine. */
static bool cfg_quota_has_auto(const char *key)
{
    return strcmp(key, "max-scratch-bytes-per-uid") == 0 ||
           strcmp(key, "max-program-bytes-per-uid") == 0;
}

static int cfg_quota_index(const char *key)
{
    for (int i = 0; i < CFG_NQUOTA; i++)
        if (strcmp(cfg_quota_keys[i], key) == 0)
            return i;
    return -1;
}

int cfg_key_index(const char *key)
{
    for (int i = 0; i < GG_CFG_NKEYS; i++)
        if (strcmp(cfg_keys[i].name, key) == 0)
            return i;
    return -1;
}

const char *gg_config_key_name(int i)
{
    return i >= 0 && i < GG_CFG_NKEYS ? cfg_keys[i].name : NULL;
}

bool gg_config_key_live(int i)
{
    return i >= 0 && i < GG_CFG_NKEYS && cfg_keys[i].live;
}

/* Edit distance (insertions, deletions, substitutions, transpositions) for
 * "did you mean". */
static size_t cfg_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return SIZE_MAX;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ||
                          ((a[i - 1] == '_' || a[i - 1] == '-') && b[j - 1] == '-') ? 0 : 1;
            size_t v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* The nearest setting name when it is close enough to be a misspelling. */
static const char *cfg_did_you_mean(const char *key)
{
    const char *best = NULL;
    size_t bestd = SIZE_MAX;
    for (int i = 0; i < GG_CFG_NKEYS; i++) {
        size_t dd = cfg_distance(key, cfg_keys[i].name);
        if (dd < bestd) {
            bestd = dd;
            best = cfg_keys[i].name;
        }
    }
    size_t len = strlen(key);
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    return bestd <= limit ? best : NULL;
}

int gg_config_default_socket(char *buf, size_t len)
{
    const char *env = getenv("GFXGRAPH_SOCKET");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (env && *env)
        n = snprintf(buf, len, "%s", env);
    else if (geteuid() == 0 || !xdg || !*xdg)
        n = snprintf(buf, len, "/run/gfxgraph/gfxgraphd.sock");
    else
        n = snprintf(buf, len, "%s/gfxgraph/gfxgraphd.sock", xdg);
    if (n < 0 || (size_t)n >= len) {
        /* a cut path would name another socket: never use one */
        if (len)
            buf[0] = '\0';
        return -ENAMETOOLONG;
    }
    return 0;
}

/* A quarter of the connections, so that one user (a client stuck in a
 * reconnect loop, say) leaves room for at least three others; but at least
 * 16, so that small limits do not get smaller still for a single user. */
unsigned cfg_per_uid_default(unsigned max_connections)
{
    unsigned n = max_connections / 4 < 16 ? 16 : max_connections / 4;
    return n < max_connections ? n : max_connections;
}

void gg_config_defaults(gg_config *c)
{
    memset(c, 0, sizeof(*c));
    /* A default that does not fit is no default: its truncated start would
     * be a socket where no client looks.  Left empty, it stops the start
     * unless a layer gives a path (or systemd passes the socket). */
    if (gg_config_default_socket(c->socket_path, sizeof(c->socket_path)) < 0)
        c->socket_path[0] = '\0';
    c->backend = GG_BACKEND_AUTO;
    c->log_level = GG_LOG_INFO;
    c->log_target = GG_LOG_TARGET_AUTO;
    c->max_message = 16u << 20;
    c->max_inflight = 64;
    c->max_connections = 256;
    c->max_conn_per_uid = cfg_per_uid_default(c->max_connections);
    c->request_timeout_ms = 10000;
    c->max_queued_bytes = 8u << 20;
    c->shutdown_timeout_ms = 10000;
    memcpy(c->buckets, default_buckets, sizeof(default_buckets));
    c->nbuckets = (int)(sizeof(default_buckets) / sizeof(default_buckets[0]));
    c->cache_entries = 1024;
    c->cache_idle_s = 3600;
    c->vram_cap = 0.80;
    c->graphs_enabled = true;
    c->fuse = true;
    c->replay_mode = GG_REPLAY_STANDARD;
    c->trusted_replay_threshold = 16;
    c->trusted_replay_sample_interval = 16;
    c->adaptive_samples = 8;
    /* Re-measuring costs 2 x (samples + 1) replays, half of them on the
     * slower path: about 0.2 % of replays at these defaults. */
    c->adaptive_recheck = 10000;
    c->exec_update_limit = 64;
    c->workers = 0;
    c->fastpath = true;
    /* A decode loop's next step comes within tens of microseconds of the
     * last one's completion; spinning that long keeps the pickup under a
     * microsecond, and an idle ring sleeps after it (bench/README.md). */
    c->fastpath_spin_us = 100;
    c->fastpath_max_regions = 256;
    /* Generous for one inference server per uid; each stops one user from
     * taking what every other user needs (docs/configuration.md). */
    c->quota_buffers = 16384;
    c->quota_mapped_bytes = 4ULL << 40;
    c->quota_programs = 4096;
    /* sized from the machine: a fixed figure protects no host of another size */
    c->quota_scratch_bytes = GG_QUOTA_AUTO;
    c->quota_program_bytes = GG_QUOTA_AUTO;
    c->quota_parked = 1024;
    c->quota_parked_bytes = 16ULL << 30;
    c->quota_fp_regions = 64;
    /* what max-connections-per-uid connections can have in flight at the
     * default max-inflight; work of a uid's departed sessions counts too */
    c->quota_jobs = 4096;
    c->stats_max_cache = 1024;
    for (int i = 0; i < GG_CFG_NKEYS; i++)
        snprintf(c->sources[i], sizeof(c->sources[i]), "default");
}

const char *gg_config_file_path(const gg_config *c)
{
    return c->config_file[0] ? c->config_file : GG_DEFAULT_CONFIG;
}

static void cfg_join_buckets(const gg_config *c, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->nbuckets && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? "," : "", c->buckets[i]);
}

/* GG_FAULT_* by bit: bit i is cfg_fault_names[i]. */
static const char *const cfg_fault_names[] = {"capture", "instantiate", "launch", "device",
                                              "validate", "memory"};
#define CFG_NFAULTS (sizeof(cfg_fault_names) / sizeof(cfg_fault_names[0]))

static void cfg_fault_name(unsigned f, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < CFG_NFAULTS && o < len; i++)
        if (f & (1u << i))
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? "," : "", cfg_fault_names[i]);
    if (!f)
        snprintf(buf, len, "none");
}

void gg_config_value(const gg_config *c, int i, char *buf, size_t len)
{
    const char *k = gg_config_key_name(i);
    buf[0] = '\0';
    if (!k) return;
#define V(...) snprintf(buf, len, __VA_ARGS__)
    if (!strcmp(k, "socket")) V("%s", c->socket_path);
    else if (!strcmp(k, "backend")) V("%s", gg_backend_name(c->backend));
    else if (!strcmp(k, "log-level")) V("%s", gg_log_level_name(c->log_level));
    else if (!strcmp(k, "log-target"))
        V("%s", c->log_target == GG_LOG_TARGET_STDERR ? "stderr"
                : c->log_target == GG_LOG_TARGET_JOURNAL ? "journal" : "auto");
    else if (!strcmp(k, "max-message-size")) V("%zu", c->max_message);
    else if (!strcmp(k, "max-inflight")) V("%u", c->max_inflight);
    else if (!strcmp(k, "max-connections")) V("%u", c->max_connections);
    else if (!strcmp(k, "max-connections-per-uid")) V("%u", c->max_conn_per_uid);
    else if (!strcmp(k, "request-timeout-ms")) V("%u", c->request_timeout_ms);
    else if (!strcmp(k, "max-queued-bytes")) V("%zu", c->max_queued_bytes);
    else if (!strcmp(k, "shutdown-timeout-ms")) V("%u", c->shutdown_timeout_ms);
    else if (!strcmp(k, "buckets")) cfg_join_buckets(c, buf, len);
    else if (!strcmp(k, "cache-entries")) V("%u", c->cache_entries);
    else if (!strcmp(k, "cache-idle-s")) V("%u", c->cache_idle_s);
    else if (!strcmp(k, "vram-cap")) V("%g", c->vram_cap);
    else if (!strcmp(k, "mode")) V("%s", !c->graphs_enabled ? "0" : c->validate ? "validate" : "1");
    else if (!strcmp(k, "replay-mode")) V("%s", gg_replay_mode_name(c->replay_mode));
    else if (!strcmp(k, "trusted-replay-threshold")) V("%u", c->trusted_replay_threshold);
    else if (!strcmp(k, "trusted-replay-sample-interval")) V("%u", c->trusted_replay_sample_interval);
    else if (!strcmp(k, "adaptive-samples")) V("%u", c->adaptive_samples);
    else if (!strcmp(k, "adaptive-recheck")) V("%u", c->adaptive_recheck);
    else if (!strcmp(k, "adaptive-timing")) {
        if (c->adaptive_fixed)
            V("%g,%g", c->adaptive_graph_us, c->adaptive_eager_us);
        else
            V("measured");
    }
    else if (!strcmp(k, "fault")) cfg_fault_name(c->fault, buf, len);
    else if (!strcmp(k, "exec-update-limit")) V("%u", c->exec_update_limit);
    else if (!strcmp(k, "workers")) V("%u", c->workers);
    else if (!strcmp(k, "completion")) V("%s", c->completion_hostfn ? "hostfn" : "poll");
    else if (!strcmp(k, "fastpath")) V("%s", c->fastpath ? "on" : "off");
    else if (!strcmp(k, "fastpath-spin-us")) V("%u", c->fastpath_spin_us);
    else if (!strcmp(k, "fastpath-max-regions")) V("%u", c->fastpath_max_regions);
    else if (!strcmp(k, "fastpath-completion"))
        V("%s", c->fastpath_completion == 1 ? "device" : c->fastpath_completion == 2 ? "daemon" : "auto");
    else if (!strcmp(k, "device")) V("%d", c->device_index);
    else if (cfg_quota_index(k) >= 0 && CFG_QUOTA(c, cfg_quota_index(k)) == GG_QUOTA_AUTO) V("auto");
    else if (cfg_quota_index(k) >= 0) V("%llu", (unsigned long long)CFG_QUOTA(c, cfg_quota_index(k)));
    else if (!strcmp(k, "admin-group")) V("%s", c->admin_group[0] ? c->admin_group : "none");
    else if (!strcmp(k, "stats-max-cache-entries")) V("%u", c->stats_max_cache);
    else if (!strcmp(k, "fuse")) V("%d", c->fuse ? 1 : 0);
#undef V
}

void gg_config_copy_key(gg_config *d, const gg_config *s, int i)
{
    const char *k = gg_config_key_name(i);
    if (!k) return;
    if (!strcmp(k, "log-level")) d->log_level = s->log_level;
    else if (!strcmp(k, "max-inflight")) d->max_inflight = s->max_inflight;
    else if (!strcmp(k, "max-connections")) d->max_connections = s->max_connections;
    else if (!strcmp(k, "max-connections-per-uid")) {
        d->max_conn_per_uid = s->max_conn_per_uid;
        d->max_conn_per_uid_set = s->max_conn_per_uid_set;
    }
    else if (!strcmp(k, "request-timeout-ms")) d->request_timeout_ms = s->request_timeout_ms;
    else if (!strcmp(k, "max-queued-bytes")) d->max_queued_bytes = s->max_queued_bytes;
    else if (!strcmp(k, "shutdown-timeout-ms")) d->shutdown_timeout_ms = s->shutdown_timeout_ms;
    else if (!strcmp(k, "cache-entries")) d->cache_entries = s->cache_entries;
    else if (!strcmp(k, "cache-idle-s")) d->cache_idle_s = s->cache_idle_s;
    else if (!strcmp(k, "vram-cap")) d->vram_cap = s->vram_cap;
    else if (!strcmp(k, "fastpath-spin-us")) d->fastpath_spin_us = s->fastpath_spin_us;
    else if (cfg_quota_index(k) >= 0) CFG_QUOTA(d, cfg_quota_index(k)) = CFG_QUOTA(s, cfg_quota_index(k));
    else if (!strcmp(k, "admin-group")) memcpy(d->admin_group, s->admin_group, sizeof(d->admin_group));
    else if (!strcmp(k, "stats-max-cache-entries")) d->stats_max_cache = s->stats_max_cache;
    else return;
    memcpy(d->sources[i], s->sources[i], sizeof(d->sources[i]));
}

void gg_config_print(const gg_config *c, FILE *out)
{
    char v[512];
    fprintf(out, "# gfxgraphd settings (config file %s)\n", gg_config_file_path(c));
    fprintf(out, "%-31s %-24s %s\n", "# KEY", "VALUE", "SOURCE");
    for (int i = 0; i < GG_CFG_NKEYS; i++) {
        gg_config_value(c, i, v, sizeof(v));
        fprintf(out, "%-31s %-24s %s\n", cfg_keys[i].name, v, c->sources[i]);
    }
}

const char *gg_backend_name(gg_backend_kind k)
{
    return k == GG_BACKEND_CPU ? "cpu" : k == GG_BACKEND_HIP ? "hip" : "auto";
}

const char *gg_replay_mode_name(gg_replay_mode m)
{
    return m == GG_REPLAY_ADAPTIVE ? "adaptive" : m == GG_REPLAY_HOT ? "hot" : "standard";
}

static int cfg_bad(char *err, size_t errlen, const char *key, const char *value,
                   const char *want)
{
    snprintf(err, errlen, "invalid value '%s' for %s: expected %s", value, key, want);
    return -EINVAL;
}

static int cfg_uint(const char *key, const char *v, unsigned long long lo, unsigned long long hi,
                    unsigned long long *out, char *err, size_t errlen)
{
    char *end;
    char want[96];
    snprintf(want, sizeof(want), "an integer from %llu to %llu", lo, hi);
    if (!*v || !isdigit((unsigned char)*v))
        return cfg_bad(err, errlen, key, v, want);
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    /* size suffixes for byte counts */
    int shift = 0;
    if (*end == 'K' || *end == 'k') { shift = 10; end++; }
    else if (*end == 'M') { shift = 20; end++; }
    else if (*end == 'G') { shift = 30; end++; }
    else if (*end == 'T') { shift = 40; end++; }
    if (x > ULLONG_MAX >> shift)   /* would wrap into the valid range */
        errno = ERANGE;
    x <<= shift;
    if (errno || *end || x < lo || x > hi)
        return cfg_bad(err, errlen, key, v, want);
    *out = x;
    return 0;
}

int gg_config_parse_buckets(const char *s, int *out, int *n, char *err, size_t errlen)
{
    int count = 0, prev = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '[' || *p == ']')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 65536) {
            snprintf(err, errlen, "invalid bucket list '%s': buckets are integers from 1 to 65536", s);
            return -EINVAL;
        }
        if (v <= prev) {
            snprintf(err, errlen, "invalid bucket list '%s': buckets must be strictly increasing", s);
            return -EINVAL;
        }
        if (count == GG_MAX_BUCKETS) {
            snprintf(err, errlen, "invalid bucket list '%s': at most %d buckets", s, GG_MAX_BUCKETS);
            return -EINVAL;
        }
        out[count++] = (int)v;
        prev = (int)v;
        p = end;
    }
    if (count == 0) {
        snprintf(err, errlen, "invalid bucket list '%s': at least one bucket is needed", s);
        return -EINVAL;
    }
    *n = count;
    return 0;
}

static int cfg_fault(const char *v, unsigned *out, char *err, size_t errlen)
{
    unsigned mask = 0;
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", v);
    for (char *save, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        unsigned i = 0;
        while (i < CFG_NFAULTS && strcmp(t, cfg_fault_names[i]) != 0)
            i++;
        if (i < CFG_NFAULTS)
            mask |= 1u << i;
        else if (strcmp(t, "none") != 0)
            return cfg_bad(err, errlen, "fault", v, "a comma list of capture, instantiate, "
                           "launch, device, validate, memory");
    }
    *out = mask;
    return 0;
}

/* "measured", or "G,E": microseconds charged to every graph and eager run
 * instead of what they took (tests drive the adaptive choice with it). */
static int cfg_adaptive_timing(gg_config *c, const char *v, char *err, size_t errlen)
{
    static const char want[] = "measured, or GRAPH_US,EAGER_US (two numbers >= 0)";
    if (strcmp(v, "measured") == 0) {
        c->adaptive_fixed = false;
        return 0;
    }
    char *end;
    errno = 0;
    double g = strtod(v, &end);
    if (end == v || *end != ',' || errno || !(g >= 0 && g <= 1e9))
        return cfg_bad(err, errlen, "adaptive-timing", v, want);
    const char *e0 = end + 1;
    double e = strtod(e0, &end);
    if (end == e0 || *end || errno || !(e >= 0 && e <= 1e9))
        return cfg_bad(err, errlen, "adaptive-timing", v, want);
    c->adaptive_fixed = true;
    c->adaptive_graph_us = g;
    c->adaptive_eager_us = e;
    return 0;
}

int gg_config_set(gg_config *c, const char *key, const char *v, char *err, size_t errlen)
{
    unsigned long long u;
    int rc;
    if (strcmp(key, "socket") == 0) {
        if (!*v || strlen(v) >= sizeof(c->socket_path))
            return cfg_bad(err, errlen, key, v, "a path shorter than 108 bytes");
        snprintf(c->socket_path, sizeof(c->socket_path), "%s", v);
    } else if (strcmp(key, "backend") == 0) {
        if (strcmp(v, "auto") == 0) c->backend = GG_BACKEND_AUTO;
        else if (strcmp(v, "cpu") == 0) c->backend = GG_BACKEND_CPU;
        else if (strcmp(v, "hip") == 0) c->backend = GG_BACKEND_HIP;
        else return cfg_bad(err, errlen, key, v, "auto, cpu or hip");
    } else if (strcmp(key, "log-level") == 0) {
        if (gg_log_level_parse(v, &c->log_level) < 0)
            return cfg_bad(err, errlen, key, v, "debug, info, warn or error");
    } else if (strcmp(key, "log-target") == 0) {
        if (gg_log_target_parse(v, &c->log_target) < 0)
            return cfg_bad(err, errlen, key, v, "auto, stderr or journal");
    } else if (strcmp(key, "max-message-size") == 0) {
        if ((rc = cfg_uint(key, v, 1024, 1u << 30, &u, err, errlen)) < 0) return rc;
        c->max_message = (size_t)u;
    } else if (strcmp(key, "max-inflight") == 0) {
        if ((rc = cfg_uint(key, v, 1, 65536, &u, err, errlen)) < 0) return rc;
        c->max_inflight = (unsigned)u;
    } else if (strcmp(key, "max-connections") == 0) {
        if ((rc = cfg_uint(key, v, 1, 65536, &u, err, errlen)) < 0) return rc;
        c->max_connections = (unsigned)u;
    } else if (strcmp(key, "max-connections-per-uid") == 0) {
        if ((rc = cfg_uint(key, v, 0, 65536, &u, err, errlen)) < 0) return rc;
        c->max_conn_per_uid = (unsigned)u;
        c->max_conn_per_uid_set = true;
    } else if (strcmp(key, "request-timeout-ms") == 0) {
        if ((rc = cfg_uint(key, v, 0, 3600000, &u, err, errlen)) < 0) return rc;
        c->request_timeout_ms = (unsigned)u;
    } else if (strcmp(key, "max-queued-bytes") == 0) {
        if ((rc = cfg_uint(key, v, 65536, 1u << 30, &u, err, errlen)) < 0) return rc;
        c->max_queued_bytes = (size_t)u;
    } else if (strcmp(key, "shutdown-timeout-ms") == 0) {
        if ((rc = cfg_uint(key, v, 0, 3600000, &u, err, errlen)) < 0) return rc;
        c->shutdown_timeout_ms = (unsigned)u;
    } else if (strcmp(key, "buckets") == 0) {
        return gg_config_parse_buckets(v, c->buckets, &c->nbuckets, err, errlen);
    } else if (strcmp(key, "cache-entries") == 0) {
        if ((rc = cfg_uint(key, v, 1, 1u << 20, &u, err, errlen)) < 0) return rc;
        c->cache_entries = (unsigned)u;
    } else if (strcmp(key, "cache-idle-s") == 0) {
        if ((rc = cfg_uint(key, v, 0, 1u << 30, &u, err, errlen)) < 0) return rc;
        c->cache_idle_s = (unsigned)u;
    } else if (strcmp(key, "vram-cap") == 0) {
        char *end;
        double d = strtod(v, &end);
        if (end == v || *end || !(d > 0.0 && d <= 1.0))
            return cfg_bad(err, errlen, key, v, "a fraction in (0, 1]");
        c->vram_cap = d;
    } else if (strcmp(key, "mode") == 0) {
        /* GFXGRAPH=0|1|debug|validate */
        if (strcmp(v, "0") == 0) c->graphs_enabled = false;
        else if (strcmp(v, "1") == 0) c->graphs_enabled = true;
        else if (strcmp(v, "debug") == 0) c->log_level = GG_LOG_DEBUG;
        else if (strcmp(v, "validate") == 0) c->validate = true;
        else return cfg_bad(err, errlen, key, v, "0, 1, debug or validate");
    } else if (strcmp(key, "fuse") == 0) {
        if (strcmp(v, "1") == 0 || strcmp(v, "on") == 0) c->fuse = true;
        else if (strcmp(v, "0") == 0 || strcmp(v, "off") == 0) c->fuse = false;
        else return cfg_bad(err, errlen, key, v, "0 or 1");
    } else if (strcmp(key, "replay-mode") == 0) {
        if (strcmp(v, "standard") == 0) c->replay_mode = GG_REPLAY_STANDARD;
        else if (strcmp(v, "adaptive") == 0) c->replay_mode = GG_REPLAY_ADAPTIVE;
        else if (strcmp(v, "hot") == 0) c->replay_mode = GG_REPLAY_HOT;
        else return cfg_bad(err, errlen, key, v, "standard, adaptive or hot");
    } else if (strcmp(key, "trusted-replay-threshold") == 0) {
        if ((rc = cfg_uint(key, v, 0, 1u << 30, &u, err, errlen)) < 0) return rc;
        c->trusted_replay_threshold = (unsigned)u;
    } else if (strcmp(key, "trusted-replay-sample-interval") == 0) {
        if ((rc = cfg_uint(key, v, 1, 1u << 30, &u, err, errlen)) < 0) return rc;
        c->trusted_replay_sample_interval = (unsigned)u;
    } else if (strcmp(key, "adaptive-samples") == 0) {
        if ((rc = cfg_uint(key, v, 1, 32, &u, err, errlen)) < 0) return rc;
        c->adaptive_samples = (unsigned)u;
    } else if (strcmp(key, "adaptive-recheck") == 0) {
        if ((rc = cfg_uint(key, v, 0, 1u << 30, &u, err, errlen)) < 0) return rc;
        c->adaptive_recheck = (unsigned)u;
    } else if (strcmp(key, "adaptive-timing") == 0) {
        return cfg_adaptive_timing(c, v, err, errlen);
    } else if (strcmp(key, "fault") == 0) {
        return cfg_fault(v, &c->fault, err, errlen);
    } else if (strcmp(key, "exec-update-limit") == 0) {
        if ((rc = cfg_uint(key, v, 1, 1u << 20, &u, err, errlen)) < 0) return rc;
        c->exec_update_limit = (unsigned)u;
    } else if (strcmp(key, "workers") == 0) {
        if ((rc = cfg_uint(key, v, 0, 256, &u, err, errlen)) < 0) return rc;
        c->workers = (unsigned)u;
    } else if (strcmp(key, "completion") == 0) {
        if (strcmp(v, "poll") == 0) c->completion_hostfn = false;
        else if (strcmp(v, "hostfn") == 0) c->completion_hostfn = true;
        else return cfg_bad(err, errlen, key, v, "poll or hostfn");
    } else if (strcmp(key, "fastpath") == 0) {
        if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0) c->fastpath = true;
        else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) c->fastpath = false;
        else return cfg_bad(err, errlen, key, v, "on or off");
    } else if (strcmp(key, "fastpath-spin-us") == 0) {
        if ((rc = cfg_uint(key, v, 0, 1000000, &u, err, errlen)) < 0) return rc;
        c->fastpath_spin_us = (unsigned)u;
    } else if (strcmp(key, "fastpath-completion") == 0) {
        if (strcmp(v, "auto") == 0) c->fastpath_completion = 0;
        else if (strcmp(v, "device") == 0) c->fastpath_completion = 1;
        else if (strcmp(v, "daemon") == 0) c->fastpath_completion = 2;
        else return cfg_bad(err, errlen, key, v, "auto, device or daemon");
    } else if (strcmp(key, "fastpath-max-regions") == 0) {
        if ((rc = cfg_uint(key, v, 0, 65536, &u, err, errlen)) < 0) return rc;
        c->fastpath_max_regions = (unsigned)u;
    } else if (strcmp(key, "device") == 0) {
        if ((rc = cfg_uint(key, v, 0, 255, &u, err, errlen)) < 0) return rc;
        c->device_index = (int)u;
    } else if (cfg_quota_has_auto(key) && strcmp(v, "auto") == 0) {
        CFG_QUOTA(c, cfg_quota_index(key)) = GG_QUOTA_AUTO;
    } else if (cfg_quota_index(key) >= 0) {
        if ((rc = cfg_uint(key, v, 0, 1ULL << 56, &u, err, errlen)) < 0) {
            if (cfg_quota_has_auto(key))
                snprintf(err, errlen, "invalid value '%s' for %s: expected auto or an integer "
                         "from 0 to %llu", v, key, 1ULL << 56);
            return rc;
        }
        CFG_QUOTA(c, cfg_quota_index(key)) = u;
    } else if (strcmp(key, "admin-group") == 0) {
        /* a group name or number, resolved at each stats call (core/quota.c) */
        if (strlen(v) >= sizeof(c->admin_group) || strpbrk(v, " \t:,"))
            return cfg_bad(err, errlen, key, v, "a group name or number, or none");
        snprintf(c->admin_group, sizeof(c->admin_group), "%s", strcmp(v, "none") ? v : "");
    } else if (strcmp(key, "stats-max-cache-entries") == 0) {
        if ((rc = cfg_uint(key, v, 1, 16384, &u, err, errlen)) < 0) return rc;
        c->stats_max_cache = (unsigned)u;
    } else {
        const char *near = cfg_did_you_mean(key);
        if (near)
            snprintf(err, errlen, "unknown setting '%s' (did you mean '%s'?)", key, near);
        else
            snprintf(err, errlen, "unknown setting '%s' (gfxgraphd.conf(5) lists them)", key);
        return -EINVAL;
    }
    return 0;
}
