/* SPDX-License-Identifier: MIT */
/* Where the settings come from, applied in this order so that each later
 * layer overrides the one before: defaults (config.c), the config file, the
 * environment, the command line.  --check-config lists every problem of
 * every layer instead of stopping at the first. */
#include "base/config.h"
#include "base/config_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

/* The largest config file read.  The whole file is read at once and then
 * split into lines, so a line may be as long as the file: no line is ever
 * cut, and the tail of a long comment can never become a setting. */
#define CFG_MAX_FILE (1u << 20)

/* The file's bytes, from a regular file only: a device (/dev/zero), a FIFO
 * or a directory is refused with a message instead of being read for ever,
 * blocked on or taken as empty.  0 and *out (NUL-terminated, *len bytes),
 * or -errno with a message in err. */
static int cfg_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    /* /dev/null is the usual way to say "no config file": read as empty */
    if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3) {
        close(fd);
        *out = calloc(1, 1);
        *len = 0;
        if (!*out) {
            snprintf(err, errlen, "out of memory reading config file %s", path);
            return -ENOMEM;
        }
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "config file %s is not a regular file (%s)", path,
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISCHR(st.st_mode) ? "a character device"
                 : S_ISBLK(st.st_mode) ? "a block device" : S_ISFIFO(st.st_mode) ? "a FIFO"
                 : S_ISSOCK(st.st_mode) ? "a socket" : "not a file");
        close(fd);
        return -EINVAL;
    }
    char *buf = malloc(CFG_MAX_FILE + 2);
    if (!buf) {
        close(fd);
        snprintf(err, errlen, "out of memory reading config file %s", path);
        return -ENOMEM;
    }
    size_t n = 0;
    /* one byte past the limit tells a file that is too long (it may have
     * grown since fstat) */
    while (n <= CFG_MAX_FILE) {
        ssize_t r = read(fd, buf + n, CFG_MAX_FILE + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(e));
            free(buf);
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n > CFG_MAX_FILE) {
        snprintf(err, errlen, "config file %s is larger than %u bytes", path, CFG_MAX_FILE);
        free(buf);
        return -EFBIG;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* A load that cannot read the file: listed with --check-config, else the
 * load stops. */
static int cfg_file_failed(int rc, char *err)
{
    if (cfg_report) {
        cfg_problem(err);
        return 0;
    }
    return rc;
}

/* key = value lines; '#' or ';' starts a comment; an optional [gfxgraphd]
 * section header is accepted so the file reads like other INI files. */
static int cfg_load_file(gg_config *c, const char *path, bool must_exist, char *err,
                         size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    err[0] = '\0';
    int rc = cfg_read_file(path, &data, &len, err, errlen);
    if (rc < 0) {
        if (!must_exist && rc == -ENOENT)
            return 0;
        if (!err[0])
            snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(-rc));
        return cfg_file_failed(rc, err);
    }
    int lineno = 0;
    rc = 0;
    for (char *p = data, *end = data + len; p < end && rc == 0;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *line = p;
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        p = nl ? nl + 1 : end;
        lineno++;
        /* a NUL would silently end the line where a reader of the file
         * sees more: the whole line is refused */
        if (memchr(line, '\0', n)) {
            snprintf(err, errlen, "%s:%d: the line holds a NUL byte", path, lineno);
            rc = cfg_problem(err);
            continue;
        }
        line[n] = '\0';
        char *h = strpbrk(line, "#;");
        if (h)
            *h = '\0';
        char *s = cfg_trim(line);
        if (!*s || (s[0] == '[' && s[strlen(s) - 1] == ']'))
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected 'key = value', got '%.200s%s'", path, lineno,
                     s, strlen(s) > 200 ? "..." : "");
            rc = cfg_problem(err);
            continue;
        }
        *eq = '\0';
        char sub[400];
        const char *key = cfg_trim(s);
        if (gg_config_set(c, key, cfg_trim(eq + 1), sub, sizeof(sub)) < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, sub);
            rc = cfg_problem(err);
            continue;
        }
        cfg_source(c, key, "file", path, lineno);
    }
    free(data);
    return rc;
}

int gg_config_group_gid(const char *name, gid_t *out)
{
    char *end;
    unsigned long n = strtoul(name, &end, 10);
    if (*name >= '0' && *name <= '9' && !*end) {
        *out = (gid_t)n;
        return 0;
    }
    long sz = sysconf(_SC_GETGR_R_SIZE_MAX);
    size_t cap = sz > 0 ? (size_t)sz : 16384;
    for (;;) {
        struct group gr, *res = NULL;
        char *buf = malloc(cap);
        if (!buf)
            return -ENOMEM;
        int rc = getgrnam_r(name, &gr, buf, cap, &res);
        if (rc == 0 && res)
            *out = res->gr_gid;
        free(buf);
        if (rc == ERANGE && cap < (1u << 20)) {
            cap *= 2;
            continue;
        }
        if (rc == 0)
            return res ? 0 : -ENOENT;
        return rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM ? -ENOENT : -rc;
    }
}

/* --check-config: an admin-group name the group database does not know
 * admits nobody (core/quota.c), which is never what was meant.  Only here:
 * a daemon that starts while the group database is out of reach must not
 * fail for it. */
static void cfg_check_group(const gg_config *c, char *err, size_t errlen)
{
    const char *name = c->admin_group;
    gid_t gid;
    if (!name[0])
        return;
    int rc = gg_config_group_gid(name, &gid);
    if (rc == 0 || rc == -ENOMEM)
        return;
    if (rc == -ENOENT)
        snprintf(err, errlen, "admin-group '%s': no such group in the group database", name);
    else
        snprintf(err, errlen, "admin-group '%s': cannot look the group up: %s", name,
                 strerror(-rc));
    cfg_problem(err);
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
    if (cfg_report)
        cfg_check_group(c, err, errlen);
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
