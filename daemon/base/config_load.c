/* Where the settings come from, applied in this order so that each later
 * layer overrides the one before: defaults (config.c), the config file, the
 * environment, the command line.  --check-config lists every problem of
 * every layer instead of stopping at the first. */
#include "base/config.h"
#include "base/config_int.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --check-config: report every problem here and go on, instead of
 * stopping at the first. */
static FILE *cfg_report;
static int cfg_problems;

static void cfg_source(gg_config *c, const char *key, const char *fmt, const char *a, int n)
{
    int i = cfg_key_index(key);
    if (i < 0)
        return;
    if (n > 0)
        snprintf(c->sources[i], sizeof(c->sources[i]), "%s %s:%d", fmt, a, n);
    else
        snprintf(c->sources[i], sizeof(c->sources[i]), "%s%s", fmt, a ? a : "");
}

/* A problem found while loading: with --check-config it is listed and
 * loading goes on (0); otherwise it stops the load (-EINVAL). */
static int cfg_problem(const char *msg)
{
    if (!cfg_report)
        return -EINVAL;
    fprintf(cfg_report, "%s\n", msg);
    cfg_problems++;
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
        int e = errno;
        snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(e));
        if (cfg_report) {
            cfg_problem(err);
            return 0;
        }
        return -e;
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
            snprintf(err, errlen, "%s:%d: expected 'key = value', got '%s'", path, lineno, s);
            if ((rc = cfg_problem(err)) < 0)
                break;
            continue;
        }
        *eq = '\0';
        char sub[400];
        const char *key = cfg_trim(s);
        if (gg_config_set(c, key, cfg_trim(eq + 1), sub, sizeof(sub)) < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, sub);
            if ((rc = cfg_problem(err)) < 0)
                break;
            continue;
        }
        cfg_source(c, key, "file", path, lineno);
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
    /* the seed's name first, so GFXGRAPH_LOG_LEVEL wins when both are set */
    {"HGB_LOG_LEVEL", "log-level"},
    {"GFXGRAPH_LOG_LEVEL", "log-level"},
    {"GFXGRAPH_LOG_TARGET", "log-target"},
    {"GFXGRAPH", "mode"},
    {"GFXGRAPH_VRAM_CAP", "vram-cap"},
    {"GFXGRAPH_REPLAY_MODE", "replay-mode"},
    {"GFXGRAPH_TRUSTED_REPLAY_THRESHOLD", "trusted-replay-threshold"},
    {"GFXGRAPH_TRUSTED_REPLAY_SAMPLE_INTERVAL", "trusted-replay-sample-interval"},
    {"GFXGRAPH_ADAPTIVE_SAMPLES", "adaptive-samples"},
    {"GFXGRAPH_ADAPTIVE_RECHECK", "adaptive-recheck"},
    {"GFXGRAPH_FAULT", "fault"},
    {"GFXGRAPH_BUCKETS", "buckets"},
    {"GFXGRAPH_MAX_MESSAGE", "max-message-size"},
    {"GFXGRAPH_CACHE_ENTRIES", "cache-entries"},
    {"GFXGRAPH_DEVICE", "device"},
    {"GFXGRAPH_COMPLETION", "completion"},
    {"GFXGRAPH_FASTPATH_SPIN_US", "fastpath-spin-us"},
    {"GFXGRAPH_FASTPATH_COMPLETION", "fastpath-completion"},
    {"GFXGRAPH_REQUEST_TIMEOUT_MS", "request-timeout-ms"},
    {"GFXGRAPH_MAX_CONNECTIONS_PER_UID", "max-connections-per-uid"},
    {"GFXGRAPH_MAX_QUEUED_BYTES", "max-queued-bytes"},
    {"GFXGRAPH_FUSE", "fuse"},
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
            if (cfg_problem(err) < 0)
                return -EINVAL;
            continue;
        }
        cfg_source(c, cfg_env[i].key, "environment ", cfg_env[i].env, 0);
    }
    /* The older switch for hot replay. */
    const char *hot = getenv("GFXGRAPH_REPLAY_HOT_MODE");
    if (hot && strcmp(hot, "1") == 0 && !getenv("GFXGRAPH_REPLAY_MODE")) {
        c->replay_mode = GG_REPLAY_HOT;
        cfg_source(c, "replay-mode", "environment ", "GFXGRAPH_REPLAY_HOT_MODE", 0);
    }
    return 0;
}

static void cfg_usage(FILE *out)
{
    fprintf(out,
            "usage: gfxgraphd [--socket PATH] [--backend auto|cpu|hip] [--config FILE]\n"
            "                 [--log-level debug|info|warn|error] [--log-target auto|stderr|journal]\n"
            "                 [--set KEY=VALUE]... [--help] [--version]\n"
            "       gfxgraphd --check-config [FILE]   list every problem in the settings (exit 0 or 2)\n"
            "       gfxgraphd --print-config          each effective setting and where it came from\n"
            "\n"
            "Serves capture-and-replay of GPU graphs over a Unix socket.\n"
            "Settings: flags over environment over config file (default %s) over defaults.\n"
            "SIGHUP re-reads the config file.  gfxgraphd.conf(5) lists every KEY.\n",
            GG_DEFAULT_CONFIG);
}

static int cfg_load_args(gg_config *c, int argc, char **argv, const char *check_file, char *err,
                         size_t errlen)
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
            if (cfg_problem(err) < 0)
                return -EINVAL;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        if (cfg_problem(err) < 0)
            return -EINVAL;
    }
    if (check_file) {
        file = check_file;
        explicit_file = true;
    }
    if (cfg_report && !explicit_file && access(GG_DEFAULT_CONFIG, F_OK) != 0)
        fprintf(cfg_report, "note: no config file at %s: defaults apply\n", GG_DEFAULT_CONFIG);
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
                if (cfg_problem(err) < 0)
                    return -EINVAL;
                continue;
            }
            *eq = '\0';
            char sub[400];
            if (gg_config_set(c, kv, eq + 1, sub, sizeof(sub)) < 0) {
                snprintf(err, errlen, "--set %s: %s", optarg, sub);
                if (cfg_problem(err) < 0)
                    return -EINVAL;
                continue;
            }
            cfg_source(c, kv, "--set ", optarg, 0);
            continue;
        }
        default:
            continue;
        }
        char sub[400];
        if (gg_config_set(c, key, optarg, sub, sizeof(sub)) < 0) {
            snprintf(err, errlen, "--%s: %s", key, sub);
            if (cfg_problem(err) < 0)
                return -EINVAL;
            continue;
        }
        cfg_source(c, key, "--", key, 0);
    }
    /* whatever layer set max-connections */
    if (!c->max_conn_per_uid_set) {
        c->max_conn_per_uid = cfg_per_uid_default(c->max_connections);
        int i = cfg_key_index("max-connections");
        if (strcmp(c->sources[i], "default") != 0)
            snprintf(c->sources[cfg_key_index("max-connections-per-uid")], sizeof(c->sources[0]),
                     "default (from max-connections)");
    }
    /* a default path that did not fit stays empty: the server refuses to
     * bind it, unless systemd passed the socket (gg_server_init) */
    return 0;
}

int gg_config_load(gg_config *c, int argc, char **argv, char *err, size_t errlen)
{
    bool check = false, print = false;
    const char *check_file = NULL;
    char **av = calloc((size_t)argc + 1, sizeof(*av));
    if (!av) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && strcmp(argv[i], "--check-config") == 0) {
            check = true;
            if (i + 1 < argc && argv[i + 1][0] != '-')
                check_file = argv[++i];
        } else if (i > 0 && strncmp(argv[i], "--check-config=", 15) == 0) {
            check = true;
            check_file = argv[i] + 15;
        } else if (i > 0 && strcmp(argv[i], "--print-config") == 0) {
            print = true;
        } else {
            av[n++] = argv[i];
        }
    }
    int rc;
    if (!check) {
        rc = cfg_load_args(c, n, av, NULL, err, errlen);
        if (rc == 0 && print) {
            gg_config_print(c, stdout);
            rc = 1;
        }
        free(av);
        return rc;
    }
    cfg_report = stdout;
    cfg_problems = 0;
    rc = cfg_load_args(c, n, av, check_file, err, errlen);
    cfg_report = NULL;
    free(av);
    if (rc == 1)
        return 1;
    if (rc < 0) {
        printf("%s\n", err);
        cfg_problems++;
    }
    const char *path = check_file ? check_file : gg_config_file_path(c);
    /* The level and where it came from: an environment variable of another
     * spelling is otherwise easy to believe in while it does nothing. */
    if (rc == 0) {
        int li = cfg_key_index("log-level");
        char lv[32];
        gg_config_value(c, li, lv, sizeof(lv));
        printf("log-level %s (%s)\n", lv, c->sources[li]);
    }
    if (cfg_problems) {
        printf("%s: %d problem(s)\n", path, cfg_problems);
        fflush(stdout);
        return 2;
    }
    printf("%s: OK\n", path);
    if (print)
        gg_config_print(c, stdout);
    fflush(stdout);
    return 1;
}
