/* Settings: defaults, config file, environment, flags — applied in that
 * order so that each later layer overrides the one before. */
#include "base/config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The build sets it from the configured sysconfdir, so that the daemon
 * reads the file `make install` wrote; this is only for other builds. */
#ifndef GG_DEFAULT_CONFIG
#define GG_DEFAULT_CONFIG "/etc/gfxgraph/gfxgraphd.conf"
#endif

static const int default_buckets[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256};

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
static unsigned cfg_per_uid_default(unsigned max_connections)
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
    c->shutdown_timeout_ms = 10000;
    memcpy(c->buckets, default_buckets, sizeof(default_buckets));
    c->nbuckets = (int)(sizeof(default_buckets) / sizeof(default_buckets[0]));
    c->cache_entries = 1024;
    c->cache_idle_s = 3600;
    c->vram_cap = 0.80;
    c->graphs_enabled = true;
    c->replay_mode = GG_REPLAY_STANDARD;
    c->trusted_replay_threshold = 16;
    c->trusted_replay_sample_interval = 16;
    c->exec_update_limit = 64;
    c->workers = 0;
    c->fastpath = true;
    /* A decode loop's next step comes within tens of microseconds of the
     * last one's completion; spinning that long keeps the pickup under a
     * microsecond, and an idle ring sleeps after it (bench/README.md). */
    c->fastpath_spin_us = 100;
    c->fastpath_max_regions = 256;
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
        if (strcmp(t, "capture") == 0) mask |= GG_FAULT_CAPTURE;
        else if (strcmp(t, "instantiate") == 0) mask |= GG_FAULT_INSTANTIATE;
        else if (strcmp(t, "launch") == 0) mask |= GG_FAULT_LAUNCH;
        else if (strcmp(t, "device") == 0) mask |= GG_FAULT_DEVICE;
        else if (strcmp(t, "none") == 0) ;
        else return cfg_bad(err, errlen, "fault", v,
                            "a comma list of capture, instantiate, launch, device");
    }
    *out = mask;
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
    } else if (strcmp(key, "fastpath-max-regions") == 0) {
        if ((rc = cfg_uint(key, v, 0, 65536, &u, err, errlen)) < 0) return rc;
        c->fastpath_max_regions = (unsigned)u;
    } else if (strcmp(key, "device") == 0) {
        if ((rc = cfg_uint(key, v, 0, 255, &u, err, errlen)) < 0) return rc;
        c->device_index = (int)u;
    } else {
        snprintf(err, errlen, "unknown setting '%s'", key);
        return -EINVAL;
    }
    return 0;
}

static char *cfg_trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* key = value lines; '#' or ';' starts a comment; an optional [gfxgraphd]
 * section header is accepted so the file reads like other INI files. */
static int cfg_load_file(gg_config *c, const char *path, bool must_exist, char *err,
                         size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        if (!must_exist && errno == ENOENT)
            return 0;
        snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
        return -errno;
    }
    char line[512];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *h = strpbrk(line, "#;");
        if (h)
            *h = '\0';
        char *s = cfg_trim(line);
        if (!*s || (s[0] == '[' && s[strlen(s) - 1] == ']'))
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected 'key = value'", path, lineno);
            rc = -EINVAL;
            break;
        }
        *eq = '\0';
        char sub[400];
        if ((rc = gg_config_set(c, cfg_trim(s), cfg_trim(eq + 1), sub, sizeof(sub))) < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, sub);
            break;
        }
    }
    fclose(f);
    return rc;
}

static const struct {
    const char *env;
    const char *key;
} cfg_env[] = {
    {"GFXGRAPH_SOCKET", "socket"},
    {"GFXGRAPH_BACKEND", "backend"},
    {"HGB_LOG_LEVEL", "log-level"},
    {"GFXGRAPH_LOG_TARGET", "log-target"},
    {"GFXGRAPH", "mode"},
    {"GFXGRAPH_VRAM_CAP", "vram-cap"},
    {"GFXGRAPH_REPLAY_MODE", "replay-mode"},
    {"GFXGRAPH_TRUSTED_REPLAY_THRESHOLD", "trusted-replay-threshold"},
    {"GFXGRAPH_TRUSTED_REPLAY_SAMPLE_INTERVAL", "trusted-replay-sample-interval"},
    {"GFXGRAPH_FAULT", "fault"},
    {"GFXGRAPH_BUCKETS", "buckets"},
    {"GFXGRAPH_MAX_MESSAGE", "max-message-size"},
    {"GFXGRAPH_CACHE_ENTRIES", "cache-entries"},
    {"GFXGRAPH_DEVICE", "device"},
    {"GFXGRAPH_COMPLETION", "completion"},
    {"GFXGRAPH_FASTPATH_SPIN_US", "fastpath-spin-us"},
    {"GFXGRAPH_REQUEST_TIMEOUT_MS", "request-timeout-ms"},
    {"GFXGRAPH_MAX_CONNECTIONS_PER_UID", "max-connections-per-uid"},
};

static int cfg_load_env(gg_config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof(cfg_env) / sizeof(cfg_env[0]); i++) {
        const char *v = getenv(cfg_env[i].env);
        if (!v || !*v)
            continue;
        char sub[400];
        if (gg_config_set(c, cfg_env[i].key, v, sub, sizeof(sub)) < 0) {
            snprintf(err, errlen, "environment %s: %s", cfg_env[i].env, sub);
            return -EINVAL;
        }
    }
    /* The older switch for hot replay. */
    const char *hot = getenv("GFXGRAPH_REPLAY_HOT_MODE");
    if (hot && strcmp(hot, "1") == 0 && !getenv("GFXGRAPH_REPLAY_MODE"))
        c->replay_mode = GG_REPLAY_HOT;
    return 0;
}

static void cfg_usage(FILE *out)
{
    fprintf(out,
            "usage: gfxgraphd [--socket PATH] [--backend auto|cpu|hip] [--config FILE]\n"
            "                 [--log-level debug|info|warn|error] [--log-target auto|stderr|journal]\n"
            "                 [--set KEY=VALUE]... [--help] [--version]\n"
            "\n"
            "Serves capture-and-replay of GPU graphs over a Unix socket.\n"
            "Settings: flags over environment over config file (default %s) over defaults.\n"
            "docs/configuration.md lists every KEY.\n",
            GG_DEFAULT_CONFIG);
}

int gg_config_load(gg_config *c, int argc, char **argv, char *err, size_t errlen)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"backend", required_argument, NULL, 'b'},
        {"config", required_argument, NULL, 'c'},
        {"log-level", required_argument, NULL, 'l'},
        {"log-target", required_argument, NULL, 't'},
        {"set", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    gg_config_defaults(c);

    /* First pass: only find the config file, so the file can sit under env
     * and flags. */
    const char *file = getenv("GFXGRAPH_CONFIG");
    bool explicit_file = file && *file;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'c') {
            file = optarg;
            explicit_file = true;
        } else if (ch == 'h') {
            cfg_usage(stdout);
            return 1;
        } else if (ch == 'V') {
            printf("gfxgraphd %s (protocol %d)\n", GG_VERSION, 1);
            return 1;
        } else if (ch == '?') {
            snprintf(err, errlen, "unknown or incomplete option '%s' (see --help)",
                     argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -EINVAL;
    }
    int rc = cfg_load_file(c, explicit_file ? file : GG_DEFAULT_CONFIG, explicit_file, err, errlen);
    if (rc < 0)
        return rc;
    snprintf(c->config_file, sizeof(c->config_file), "%s", explicit_file ? file : "");
    if ((rc = cfg_load_env(c, err, errlen)) < 0)
        return rc;

    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *key = NULL;
        char kv[512];
        switch (ch) {
        case 's': key = "socket"; break;
        case 'b': key = "backend"; break;
        case 'l': key = "log-level"; break;
        case 't': key = "log-target"; break;
        case 'S': {
            snprintf(kv, sizeof(kv), "%s", optarg);
            char *eq = strchr(kv, '=');
            if (!eq) {
                snprintf(err, errlen, "--set expects KEY=VALUE, got '%s'", optarg);
                return -EINVAL;
            }
            *eq = '\0';
            char sub[400];
            if (gg_config_set(c, kv, eq + 1, sub, sizeof(sub)) < 0) {
                snprintf(err, errlen, "--set %s: %s", optarg, sub);
                return -EINVAL;
            }
            continue;
        }
        default:
            continue;
        }
        char sub[400];
        if (gg_config_set(c, key, optarg, sub, sizeof(sub)) < 0) {
            snprintf(err, errlen, "--%s: %s", key, sub);
            return -EINVAL;
        }
    }
    /* whatever layer set max-connections */
    if (!c->max_conn_per_uid_set)
        c->max_conn_per_uid = cfg_per_uid_default(c->max_connections);
    /* a default path that did not fit stays empty: the server refuses to
     * bind it, unless systemd passed the socket (gg_server_init) */
    return 0;
}
