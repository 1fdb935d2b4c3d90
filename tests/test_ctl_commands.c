/* SPDX-License-Identifier: MIT */
/* gfxgraphctl's commands against a real daemon: COMMAND --help prints that
 * command's help (not the list), help COMMAND the same; call METHOD [JSON]
 * passes any method through (its answer as JSON, a daemon error with its
 * code and exit status 1, params that are not a JSON object exit 64); config
 * shows the running settings with their sources (GFXGRAPH_LOG_LEVEL seen as
 * the log level's source, HGB_LOG_LEVEL still honoured); top --once shows
 * the round trip's percentiles from the daemon's histograms; a session
 * closed by kill-session is told why with ECONNABORTED. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "test_client_util.h"

#ifndef GG_CTL_PATH
#error "GG_CTL_PATH must name the gfxgraphctl binary"
#endif

static int ctl(const char *const *args, const char *const *env, char **out, char **err)
{
    const char *argv[16];
    int n = 0;
    argv[n++] = GG_CTL_PATH;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    free(*out);
    free(*err);
    *out = *err = NULL;
    return h_run(argv, env, NULL, out, err, 60000);
}

/* The value of KEY's row in config's table: "  KEY  VALUE  RELOAD  SOURCE". */
static bool config_row(const char *out, const char *key, char *row, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\n  %s ", key);
    const char *l = strstr(out, pat);
    if (!l)
        return false;
    l += 3;
    size_t n = strcspn(l, "\n");
    snprintf(row, len, "%.*s", (int)(n < len ? n : len - 1), l);
    return true;
}

static void test_help(void)
{
    h_section("COMMAND --help and help COMMAND");
    char *out = NULL, *err = NULL;
    static const char *const cmds[] = {"stats", "health", "sessions", "cache", "top",
                                       "metrics", "config", "call", "evict", "kill-session"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *a[] = {cmds[i], "--help", NULL};
        int code = ctl(a, NULL, &out, &err);
        char want[64];
        snprintf(want, sizeof want, "usage: gfxgraphctl [--socket PATH] [--timeout SECONDS] %s",
                 cmds[i]);
        CHECKF(code == 0, "%s --help exits 0 (got %d)", cmds[i], code);
        CHECKF(out && strncmp(out, want, strlen(want)) == 0, "%s --help starts \"%s\"", cmds[i],
               want);
        CHECKF(out && !strstr(out, "commands ("), "%s --help is not the global list", cmds[i]);
        char *first = out ? strdup(out) : NULL;
        const char *b[] = {"help", cmds[i], NULL};
        code = ctl(b, NULL, &out, &err);
        CHECKF(code == 0 && first && out && strcmp(first, out) == 0,
               "help %s prints the same as %s --help", cmds[i], cmds[i]);
        free(first);
    }
    const char *g[] = {"--help", NULL};
    CHECK(ctl(g, NULL, &out, &err) == 0);
    CHECK_CONTAINS(out, "commands (gfxgraphctl COMMAND --help for each)");
    CHECK_CONTAINS(out, "  call METHOD [JSON]");
    CHECK_CONTAINS(out, "  config [--json]");
    const char *u[] = {"help", "nosuch", NULL};
    CHECK_EQ(ctl(u, NULL, &out, &err), 64);
    const char *v[] = {"frobnicate", NULL};
    CHECK_EQ(ctl(v, NULL, &out, &err), 64);
    CHECK_CONTAINS(err, "unknown command 'frobnicate'");
    free(out);
    free(err);
}

static void test_call(const h_daemon *d)
{
    h_section("call METHOD [JSON]");
    char *out = NULL, *err = NULL;
    const char *a[] = {"--socket", d->sock, "call", "stats", NULL};
    int code = ctl(a, NULL, &out, &err);
    CHECKF(code == 0, "call stats exits 0 (got %d: %s)", code, err ? err : "");
    if (out && h_have_python())
        CHECK(h_py_json_check(out, "assert d['backend'] == 'cpu', d['backend']\n"
                                   "assert d['requests'] >= 1\n"
                                   "assert isinstance(d['sessions'], list)\n"));
    /* params as JSON: an admin verb (this test runs as the daemon's uid) */
    const char *b[] = {"--socket", d->sock, "call", "admin.evict", "{\"all\": true}", NULL};
    code = ctl(b, NULL, &out, &err);
    CHECKF(code == 0, "call admin.evict {\"all\": true} exits 0 (got %d: %s)", code,
           err ? err : "");
    if (out && h_have_python())
        CHECK(h_py_json_check(out, "assert d['graphs_cached'] == 0 and 'evicted' in d, d\n"));
    /* the daemon's error: its code, exit 1 */
    const char *c[] = {"--socket", d->sock, "call", "admin.evict", "{\"al\": true}", NULL};
    CHECK_EQ(ctl(c, NULL, &out, &err), 1);
    CHECK_CONTAINS(err, "(EINVAL)");
    CHECK_CONTAINS(err, "unknown key 'al'");
    const char *e[] = {"--socket", d->sock, "call", "no.such", NULL};
    CHECK_EQ(ctl(e, NULL, &out, &err), 1);
    CHECK_CONTAINS(err, "(ENOSYS)");
    /* not JSON, or not an object: a usage error, found before sending */
    const char *f[] = {"--socket", d->sock, "call", "admin.evict", "{all: true}", NULL};
    CHECK_EQ(ctl(f, NULL, &out, &err), 64);
    CHECK_CONTAINS(err, "JSON at offset 1");
    const char *g[] = {"--socket", d->sock, "call", "stats", "[1]", NULL};
    CHECK_EQ(ctl(g, NULL, &out, &err), 64);
    CHECK_CONTAINS(err, "must be a JSON object");
    const char *h[] = {"--socket", d->sock, "call", NULL};
    CHECK_EQ(ctl(h, NULL, &out, &err), 64);
    /* no daemon: 2 */
    const char *n[] = {"--socket", "/nonexistent/gg.sock", "call", "stats", NULL};
    CHECK_EQ(ctl(n, NULL, &out, &err), 2);
    free(out);
    free(err);
}

/* The generic call of the library itself: JSON params with escapes and
 * numbers of each kind reach the daemon intact. */
static void test_call_json(const h_daemon *d)
{
    h_section("gg_client_call_json");
    gg_client *c = gg_client_new();
    if (!CHECK(gg_client_connect(c, d->sock, "call-json") == 0)) {
        gg_client_close(c);
        return;
    }
    char *out = NULL;
    /* a name with an escaped quote and a non-ASCII character: ENOENT names it */
    int rc = gg_client_call_json(c, "admin.evict", "{\"program\": \"a\\\"b\\u00e9\"}", &out);
    CHECK_EQ(rc, -ENOENT);
    CHECK(out == NULL);
    CHECK_CONTAINS(gg_client_last_error(c), "no program named 'a\"b\xc3\xa9'");
    CHECK_STR(gg_client_last_error_code(c), "ENOENT");
    rc = gg_client_call_json(c, "admin.evict", "{\"program\": 12345}", &out);
    CHECK_EQ(rc, -ENOENT);
    CHECK_CONTAINS(gg_client_last_error(c), "no program 12345");
    rc = gg_client_call_json(c, "admin.evict", "{\"program\": -1.5}", &out);
    CHECK_EQ(rc, -EINVAL);
    CHECK_CONTAINS(gg_client_last_error(c), "program: wants a program name");
    rc = gg_client_call_json(c, "config", "  {}  ", &out);
    CHECK_EQ(rc, 0);
    CHECK(out && strstr(out, "\"settings\": [") != NULL);
    gg_client_free_json(out);
    out = NULL;
    rc = gg_client_call_json(c, "config", "{\"a\": [1, 2", &out);
    CHECK_EQ(rc, -EINVAL);
    CHECK_CONTAINS(gg_client_last_error(c), "JSON at offset");
    /* the connection is still good */
    CHECK_EQ(gg_client_call_json(c, "buffer.list", NULL, &out), 0);
    gg_client_free_json(out);
    gg_client_close(c);
}

static void test_config(void)
{
    h_section("config: the running settings and their sources");
    h_daemon d;
    const char *env[] = {"GFXGRAPH_LOG_LEVEL=debug", "HGB_LOG_LEVEL=error",
                         "GFXGRAPH_CACHE_ENTRIES=77", NULL};
    const char *args[] = {"--set", "workers=2", NULL};
    if (h_daemon_start(&d, args, env) < 0)
        return;
    char *out = NULL, *err = NULL, row[256];
    const char *a[] = {"--socket", d.sock, "config", NULL};
    int code = ctl(a, NULL, &out, &err);
    CHECKF(code == 0, "config exits 0 (got %d: %s)", code, err ? err : "");
    if (out) {
        CHECK_CONTAINS(out, "gfxgraphd config: ");
        /* GFXGRAPH_LOG_LEVEL wins over the seed's HGB_LOG_LEVEL */
        CHECK(config_row(out, "log-level", row, sizeof row));
        CHECKF(strstr(row, "debug") && strstr(row, "live") &&
                   strstr(row, "environment GFXGRAPH_LOG_LEVEL"),
               "log-level debug, live, from GFXGRAPH_LOG_LEVEL: \"%s\"", row);
        CHECK(config_row(out, "cache-entries", row, sizeof row));
        CHECKF(strstr(row, "77") && strstr(row, "environment GFXGRAPH_CACHE_ENTRIES"),
               "cache-entries 77 from the environment: \"%s\"", row);
        CHECK(config_row(out, "workers", row, sizeof row));
        CHECKF(strstr(row, "2") && strstr(row, "--set workers=2") && strstr(row, "restart"),
               "workers 2 from --set, needs a restart: \"%s\"", row);
        CHECK(config_row(out, "max-inflight", row, sizeof row));
        CHECKF(strstr(row, "64") && strstr(row, "default"), "max-inflight default: \"%s\"", row);
    }
    /* the level really is debug: the daemon logs debug records (written by
     * a thread of its own: wait for one) */
    bool dbg = false;
    for (int64_t end = h_now_ms() + 60000; !dbg && h_now_ms() < end;) {
        char *log = h_read_file(d.log);
        dbg = strstr(log, "debug: ") != NULL;
        free(log);
        if (!dbg)
            h_sleep_ms(20);
    }
    CHECKF(dbg, "GFXGRAPH_LOG_LEVEL=debug gives debug records");
    const char *j[] = {"--socket", d.sock, "config", "--json", NULL};
    code = ctl(j, NULL, &out, &err);
    CHECK_EQ(code, 0);
    if (out && h_have_python())
        CHECK(h_py_json_check(out, "s = {r['key']: r for r in d['settings']}\n"
                                   "assert s['log-level']['value'] == 'debug'\n"
                                   "assert s['log-level']['source'] == "
                                   "'environment GFXGRAPH_LOG_LEVEL'\n"
                                   "assert s['log-level']['live'] is True\n"
                                   "assert s['socket']['live'] is False\n"
                                   "assert 'file' in d\n"));
    h_daemon_stop(&d);

    /* HGB_LOG_LEVEL alone still works, and --check-config names the source */
    const char *hgb[] = {"HGB_LOG_LEVEL=warn", NULL};
    const char *chk[] = {GG_DAEMON_PATH, "--check-config", "/dev/null", NULL};
    free(out);
    free(err);
    code = h_run(chk, hgb, NULL, &out, &err, 60000);
    CHECK_EQ(code, 0);
    CHECK_CONTAINS(out, "log-level warn (environment HGB_LOG_LEVEL)");
    const char *gfx[] = {"GFXGRAPH_LOG_LEVEL=error", NULL};
    free(out);
    free(err);
    code = h_run(chk, gfx, NULL, &out, &err, 60000);
    CHECK_EQ(code, 0);
    CHECK_CONTAINS(out, "log-level error (environment GFXGRAPH_LOG_LEVEL)");
    /* a bad value there is a problem --check-config lists, not silence */
    const char *bad[] = {"GFXGRAPH_LOG_LEVEL=loud", NULL};
    free(out);
    free(err);
    code = h_run(chk, bad, NULL, &out, &err, 60000);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(out, "environment GFXGRAPH_LOG_LEVEL: invalid value 'loud'");
    free(out);
    free(err);
}

static void test_top_and_kill(const h_daemon *d)
{
    h_section("top --once: percentiles; kill-session: ECONNABORTED");
    gg_client *c = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t prog = 0;
    if (!CHECK(gg_client_connect(c, d->sock, "top-test") == 0) || !tbuf_new(c, &x, 32) ||
        !tbuf_new(c, &y, 32)) {
        gg_client_close(c);
        return;
    }
    gg_program_def *p = gg_program_def_new("top-prog");
    int64_t s[2] = {GG_BATCH, 4};
    gg_program_def_buckets(p, 1, (int[]){8});
    gg_program_def_tensor(p, "x", x.id, 0, "f32", 2, s);
    gg_program_def_tensor(p, "y", y.id, 0, "f32", 2, s);
    gg_program_def_op(p, "silu", "x", "y");
    CHECK(gg_client_program_define(c, p, &prog) == 0);
    gg_program_def_free(p);

    /* replays keep coming from a child while top samples twice */
    pid_t kid = fork();
    if (kid == 0) {
        gg_client *k = gg_client_new();
        tbuf kx, ky;
        memset(&kx, 0, sizeof kx);
        memset(&ky, 0, sizeof ky);
        if (gg_client_connect(k, d->sock, "top-load") < 0 || !tbuf_new(k, &kx, 32) ||
            !tbuf_new(k, &ky, 32))
            _exit(1);
        /* this child dies by SIGKILL: its names go now (the daemon has its
         * mappings), not at an exit it never reaches */
        shm_unlink(kx.name);
        shm_unlink(ky.name);
        gg_program_def *q = gg_program_def_new("top-load");
        gg_program_def_buckets(q, 1, (int[]){8});
        gg_program_def_tensor(q, "x", kx.id, 0, "f32", 2, s);
        gg_program_def_tensor(q, "y", ky.id, 0, "f32", 2, s);
        gg_program_def_op(q, "silu", "x", "y");
        uint64_t kp;
        if (gg_client_program_define(k, q, &kp) < 0)
            _exit(1);
        for (;;)
            if (gg_client_replay(k, kp, 3, -1, NULL) < 0)
                _exit(0);
    }
    char *out = NULL, *err = NULL;
    const char *a[] = {"--socket", d->sock, "top", "--once", "--interval", "0.5", NULL};
    int code = ctl(a, NULL, &out, &err);
    CHECKF(code == 0, "top --once exits 0 (got %d: %s)", code, err ? err : "");
    if (out) {
        const char *l = strstr(out, "  latency ");
        CHECKF(l && strstr(l, " p50 ") && strstr(l, " p90 ") && strstr(l, " p99 ") &&
                   strstr(l, "(round trip, last interval)"),
               "top's latency line has p50, p90, p99 from the histograms:\n%s", out);
        double p50 = l && strstr(l, " p50 ") ? strtod(strstr(l, " p50 ") + 5, NULL) : 0;
        double p99 = l && strstr(l, " p99 ") ? strtod(strstr(l, " p99 ") + 5, NULL) : 0;
        CHECKF(p50 > 0 && p99 >= p50, "0 < p50 <= p99 (%g, %g us)", p50, p99);
        CHECK_CONTAINS(out, "top-load");
    }
    if (kid > 0) {
        kill(kid, SIGKILL);
        waitpid(kid, NULL, 0);
    }

    /* kill-session: the client learns why, with its own code */
    char sid[32];
    snprintf(sid, sizeof sid, "%llu", (unsigned long long)gg_client_session_id(c));
    const char *k[] = {"--socket", d->sock, "kill-session", sid, NULL};
    code = ctl(k, NULL, &out, &err);
    CHECKF(code == 0, "kill-session exits 0 (got %d: %s)", code, err ? err : "");
    CHECK_CONTAINS(out, "killed session");
    int rc = gg_client_replay(c, prog, 1, -1, NULL);
    CHECKF(rc == -ECONNRESET, "the killed client's next call fails ECONNRESET (got %d)", rc);
    CHECK_STR(gg_client_last_error_code(c), "ECONNABORTED");
    CHECK_CONTAINS(gg_client_last_error(c), "was closed by an operator");
    CHECK_CONTAINS(gg_client_last_error(c), "kill-session");
    rc = gg_client_replay(c, prog, 1, -1, NULL);
    CHECK_EQ(rc, -ENOTCONN);
    CHECK_CONTAINS(gg_client_last_error(c), "was closed by an operator");
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    free(out);
    free(err);
}

int main(void)
{
    h_init("test_ctl_commands", 300);
    test_help();
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_call(&d);
        test_call_json(&d);
        test_top_and_kill(&d);
        h_daemon_stop(&d);
    }
    test_config();
    return h_finish();
}
