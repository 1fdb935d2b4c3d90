/* SPDX-License-Identifier: MIT */
/* gfxgraphctl against a real daemon: the stats and health tables carry the
 * key figures, --json is valid JSON with the right keys and values (checked
 * with python3's json module), the exit status is 0 on a healthy daemon, and
 * 2 with a message naming the socket and how to start the daemon when
 * nothing listens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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
    int code = h_run(argv, env, NULL, out, err, 60000);
    return code;
}

static void test_healthy(const h_daemon *d)
{
    /* some activity, so the tables have rows */
    gg_client *c = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    uint64_t prog = 0;
    if (!CHECK(gg_client_connect(c, d->sock, "ctl-test") == 0) || !tbuf_new(c, &x, 32) ||
        !tbuf_new(c, &y, 32)) {
        gg_client_close(c);
        return;
    }
    gg_program_def *p = gg_program_def_new("ctl-prog");
    int64_t s[2] = {GG_BATCH, 4};
    gg_program_def_buckets(p, 2, (int[]){2, 8});
    gg_program_def_tensor(p, "x", x.id, 0, "f32", 2, s);
    gg_program_def_tensor(p, "y", y.id, 0, "f32", 2, s);
    gg_program_def_op(p, "silu", "x", "y");
    CHECK(gg_client_program_define(c, p, &prog) == 0);
    gg_program_def_free(p);
    for (int i = 0; i < 3; i++)
        CHECK(gg_client_replay(c, prog, 5, -1, NULL) == 0);
    CHECK(gg_client_replay(c, prog, 2, -1, NULL) == 0);

    h_section("gfxgraphctl stats");
    char *out = NULL, *err = NULL;
    const char *a1[] = {"stats", "--socket", d->sock, NULL};
    int code = ctl(a1, NULL, &out, &err);
    CHECKF(code == 0, "stats exits 0 (got %d; %s)", code, err ? err : "");
    if (out) {
        CHECK_CONTAINS(out, "gfxgraphd stats: backend cpu");
        CHECK_CONTAINS(out, "replay_count");
        CHECK_CONTAINS(out, "capture_count");
        CHECK_CONTAINS(out, "fallback_count");
        CHECK_CONTAINS(out, "validation_failures");
        CHECK_CONTAINS(out, "avg_replay_us");
        CHECK_CONTAINS(out, "SESSIONS");
        CHECK_CONTAINS(out, "CACHE");
        CHECK_CONTAINS(out, "ctl-test");
        CHECK_CONTAINS(out, "ctl-prog");
        CHECK_CONTAINS(out, "ready");
        /* the figures: "  replay_count   4" */
        const char *l = strstr(out, "replay_count");
        CHECKF(l && strtoul(l + strlen("replay_count"), NULL, 10) == 4,
               "replay_count shows 4");
        l = strstr(out, "capture_count");
        CHECKF(l && strtoul(l + strlen("capture_count"), NULL, 10) == 2,
               "capture_count shows 2");
        l = strstr(out, "fallback_count");
        CHECKF(l && strtoul(l + strlen("fallback_count"), NULL, 10) == 0,
               "fallback_count shows 0");
        /* the cache table: one row per entry with its own figures */
        CHECK_CONTAINS(out, "PARKED");
        bool row8 = false;
        for (l = strstr(out, "ctl-prog"); l && !row8; l = strstr(l + 1, "ctl-prog")) {
            unsigned long sess, branch, bucket, captures, replays, fallbacks;
            char state[16], parked[8];
            row8 = sscanf(l, "ctl-prog %lu %lu %lu %15s %7s %lu %lu %lu", &sess, &branch,
                          &bucket, state, parked, &captures, &replays, &fallbacks) == 8 &&
                   bucket == 8 && strcmp(state, "ready") == 0 && strcmp(parked, "no") == 0 &&
                   captures == 1 && replays == 3 && fallbacks == 0;
        }
        CHECKF(row8, "the bucket-8 row: ready, not parked, 1 capture, 3 replays, 0 fallbacks");
    }
    free(out);
    free(err);

    h_section("gfxgraphctl stats --json");
    const char *a2[] = {"--json", "stats", "--socket", d->sock, NULL};
    code = ctl(a2, NULL, &out, &err);
    CHECK_EQ(code, 0);
    if (h_have_python() && out) {
        char check[1024];
        snprintf(check, sizeof check,
                 "assert d['replay_count'] == 4, d['replay_count']\n"
                 "assert d['capture_count'] == 2\n"
                 "assert d['fallback_count'] == 0\n"
                 "assert d['validation_failures'] == 0\n"
                 "assert isinstance(d['avg_replay_us'], (int, float)) and d['avg_replay_us'] > 0\n"
                 "assert d['backend'] == 'cpu'\n"
                 "s = [x for x in d['sessions'] if x['client'] == 'ctl-test']\n"
                 "assert len(s) == 1 and s[0]['replays'] == 4 and s[0]['id'] == %llu\n"
                 "e = [x for x in d['cache'] if x['program'] == %llu]\n"
                 "assert sorted(x['bucket'] for x in e) == [2, 8], e\n"
                 "assert all(x['state'] == 'ready' for x in e)\n"
                 "assert [x['replays'] for x in e if x['bucket'] == 8] == [3]\n",
                 (unsigned long long)gg_client_session_id(c), (unsigned long long)prog);
        CHECKF(h_py_json_check(out, check), "stats --json parses with the right keys and values");
    }
    free(out);
    free(err);

    h_section("gfxgraphctl health");
    const char *a3[] = {"health", "--socket", d->sock, NULL};
    code = ctl(a3, NULL, &out, &err);
    CHECKF(code == 0, "health exits 0 on a healthy daemon (got %d)", code);
    if (out) {
        CHECK_CONTAINS(out, "ok");
        CHECK_CONTAINS(out, "yes");
        CHECK_CONTAINS(out, "gpu");
        CHECK_CONTAINS(out, "cpu");
        CHECK_CONTAINS(out, "vram");
        CHECK_CONTAINS(out, "MiB");
        CHECK_CONTAINS(out, "smoke_test");
        CHECK_CONTAINS(out, "passed");
    }
    free(out);
    free(err);
    const char *a4[] = {"health", "--json", "--socket", d->sock, NULL};
    code = ctl(a4, NULL, &out, &err);
    CHECK_EQ(code, 0);
    if (h_have_python() && out) {
        char check[1024];
        snprintf(check, sizeof check,
                 "assert d['ok'] is True\n"
                 "assert isinstance(d['gpu'], str) and d['gpu']\n"
                 "assert isinstance(d['arch'], str) and d['arch']\n"
                 "assert d['vram_total_mb'] > 0 and 0 <= d['vram_free_mb'] <= d['vram_total_mb']\n"
                 "assert d['details']['smoke_test'] == 'passed'\n"
                 "assert d['details']['backend'] == 'cpu'\n"
                 "assert d['details']['socket'] == %s%s%s\n",
                 "'", d->sock, "'");
        CHECKF(h_py_json_check(out, check), "health --json parses with the right keys and values");
    }
    free(out);
    free(err);

    h_section("gfxgraphctl with GFXGRAPH_SOCKET");
    char envs[200];
    snprintf(envs, sizeof envs, "GFXGRAPH_SOCKET=%s", d->sock);
    const char *env[] = {envs, NULL};
    const char *a5[] = {"health", NULL};
    code = ctl(a5, env, &out, &err);
    CHECKF(code == 0, "health finds the daemon through GFXGRAPH_SOCKET (got %d: %s)", code,
           err ? err : "");
    free(out);
    free(err);

    h_section("gfxgraphctl usage");
    const char *a6[] = {NULL};
    code = ctl(a6, NULL, &out, &err);
    CHECK_EQ(code, 64);
    free(out);
    free(err);
    const char *a7[] = {"restart", "--socket", d->sock, NULL};
    code = ctl(a7, NULL, &out, &err);
    CHECK_EQ(code, 64);
    CHECK_CONTAINS(err, "restart");
    free(out);
    free(err);
    const char *a8[] = {"stats", "--bogus", NULL};
    code = ctl(a8, NULL, &out, &err);
    CHECK_EQ(code, 64);
    free(out);
    free(err);

    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
}

static void test_unreachable(void)
{
    h_section("nothing listening");
    char dir[64], sock[128];
    snprintf(dir, sizeof dir, "/tmp/ggtest.XXXXXX");
    if (!CHECK(mkdtemp(dir) != NULL))
        return;
    snprintf(sock, sizeof sock, "%s/nobody.sock", dir);
    for (int stale = 0; stale < 2; stale++) {
        if (stale) {
            /* a socket file without a listener */
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
            memcpy(sa.sun_path, sock, strlen(sock) + 1);
            CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
            close(fd);
        }
        for (int cmd = 0; cmd < 2; cmd++) {
            char *out = NULL, *err = NULL;
            const char *a[] = {cmd ? "health" : "stats", "--socket", sock, NULL};
            int code = ctl(a, NULL, &out, &err);
            CHECKF(code == 2, "%s with %s: exit 2 (got %d)", a[0],
                   stale ? "a stale socket" : "no socket", code);
            CHECK_CONTAINS(err, sock);
            CHECK_CONTAINS(err, "gfxgraphd --socket");
            CHECK_CONTAINS(err, "systemctl start gfxgraphd");
            CHECKF(out && out[0] == '\0', "nothing on stdout");
            free(out);
            free(err);
        }
        const char *aj[] = {"--json", "stats", "--socket", sock, NULL};
        char *out = NULL, *err = NULL;
        CHECK_EQ(ctl(aj, NULL, &out, &err), 2);
        free(out);
        free(err);
    }
    unlink(sock);
    rmdir(dir);
}

int main(void)
{
    h_init("test_ctl", 600);
    if (!h_have_python())
        h_note("python3 not found: the --json output is not parsed");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_healthy(&d);
        h_daemon_stop(&d);
    }
    test_unreachable();
    return h_finish();
}
