/* SPDX-License-Identifier: MIT */
/* gfxgraphd start-up: another daemon on the socket, a stale socket, a path
 * that is a regular file, the socket's mode, a backend this build lacks, bad
 * flags and settings, the precedence flags > environment > config file >
 * defaults (the default socket path: test_daemon_settings.c).  Stopping:
 * test_daemon_stop.c. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static void mkdir_tmp(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/ggtest.XXXXXX");
    if (!mkdtemp(dir))
        h_check(false, __FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* hello's limits.buckets as "1,2,4" */
static void hello_buckets(const char *sock, char *out, size_t len)
{
    out[0] = '\0';
    h_conn c;
    if (!CHECK(h_conn_open(&c, sock) == 0))
        return;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    proto_pack_kv_u64(&pk, "protocol", 1);
    const msgpack_object *r, *e;
    if (CHECK(h_conn_call(&c, 1, "hello", sb.data, sb.size, &r, &e) == 1 && !e)) {
        const msgpack_object *b = h_get(r, "limits.buckets");
        size_t n = 0;
        for (uint32_t i = 0; b && b->type == MSGPACK_OBJECT_ARRAY && i < b->via.array.size; i++)
            n += (size_t)snprintf(out + n, len - n, "%s%llu", i ? "," : "",
                                  (unsigned long long)b->via.array.ptr[i].via.u64);
    }
    msgpack_sbuffer_destroy(&sb);
    h_conn_close(&c);
}

static uint64_t hello_limit(const char *sock, const char *key)
{
    h_conn c;
    uint64_t v = UINT64_MAX;
    if (!CHECK(h_conn_open(&c, sock) == 0))
        return v;
    static const uint8_t params[] = {0x81, 0xa8, 'p', 'r', 'o', 't', 'o', 'c', 'o', 'l', 0x01};
    const msgpack_object *r, *e;
    if (CHECK(h_conn_call(&c, 1, "hello", params, sizeof params, &r, &e) == 1 && !e)) {
        char path[64];
        snprintf(path, sizeof path, "limits.%s", key);
        v = h_getu(r, path);
    }
    h_conn_close(&c);
    return v;
}

static bool hello_ok(const char *sock)
{
    char b[256];
    hello_buckets(sock, b, sizeof b);
    return b[0] != '\0';
}

/* ---- the socket path ----------------------------------------------------- */

static void test_another_daemon(void)
{
    h_section("another daemon on the socket");
    h_daemon a, b;
    if (h_daemon_start(&a, NULL, NULL) < 0)
        return;
    memset(&b, 0, sizeof b);
    snprintf(b.log, sizeof b.log, "%s/second.log", a.dir);
    if (CHECK(h_daemon_spawn(&b, a.sock, NULL, NULL) == 0)) {
        int code = h_daemon_wait_exit(&b, 60000);
        CHECK_EQ(code, 1);
        char *log = h_read_file(b.log);
        CHECK_CONTAINS(log, "another gfxgraphd is already serving on");
        CHECK_CONTAINS(log, a.sock);
        /* refused before it touched the device: nothing about one */
        CHECKF(!strstr(log, "device:") && count_lines(log) == 1,
               "the refusal is the only line: no device was opened (\"%s\")", log);
        free(log);
        if (code == -ETIMEDOUT)
            h_daemon_kill(&b);
    }
    unlink(b.log);
    /* the first one is untouched and still answers */
    struct stat st;
    CHECK(lstat(a.sock, &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK(hello_ok(a.sock));
    h_daemon_stop(&a);
}

static void test_stale_socket_and_mode(void)
{
    h_section("stale socket, socket mode");
    char dir[64], sock[128];
    mkdir_tmp(dir, sizeof dir);
    snprintf(sock, sizeof sock, "%s/stale.sock", dir);
    /* a socket file nobody listens on: bound, then closed without unlink */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(fd);
    struct stat st;
    CHECK(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode));

    h_daemon d;
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s/d.log", dir);
    if (CHECK(h_daemon_spawn(&d, sock, NULL, NULL) == 0)) {
        int rc = h_daemon_wait_ready(&d, 60000);
        if (!CHECKF(rc == 0, "the daemon replaces the stale socket and serves (rc %d)", rc))
            h_daemon_dump_log(&d);
        CHECK(hello_ok(sock));
        CHECK(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode));
        CHECKF((st.st_mode & 07777) == 0660, "socket mode is 0660 (got %04o)",
               (unsigned)(st.st_mode & 07777));
        if (d.pid > 0)
            h_daemon_stop(&d);
        CHECKF(lstat(sock, &st) < 0 && errno == ENOENT, "the socket is removed at stop");
    }
    unlink(d.log);

    /* a socket in a directory that does not exist yet: created, private */
    char sub[160];
    snprintf(sub, sizeof sub, "%s/run/sub", dir);
    snprintf(sock, sizeof sock, "%s/run/sub/gfxgraphd.sock", dir);
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s/d2.log", dir);
    if (CHECK(h_daemon_spawn(&d, sock, NULL, NULL) == 0)) {
        CHECK(h_daemon_wait_ready(&d, 60000) == 0);
        CHECK(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode));
        CHECKF((st.st_mode & 0777) == 0750, "the socket's new directory is 0750 (got %04o)",
               (unsigned)(st.st_mode & 0777));
        CHECK(lstat(sock, &st) == 0 && (st.st_mode & 07777) == 0660);
        if (d.pid > 0)
            h_daemon_stop(&d);
    }
    unlink(d.log);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/run", dir);
    rmdir(sub);
    rmdir(dir);
}

static void test_regular_file(void)
{
    h_section("a regular file at the socket path");
    char dir[64], path[128], log[128];
    mkdir_tmp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/not-a-socket", dir);
    snprintf(log, sizeof log, "%s/d.log", dir);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("keep me\n", f) >= 0);
    if (f)
        fclose(f);
    h_daemon d;
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s", log);
    if (CHECK(h_daemon_spawn(&d, path, NULL, NULL) == 0)) {
        int code = h_daemon_wait_exit(&d, 60000);
        CHECK_EQ(code, 1);
        if (code == -ETIMEDOUT)
            h_daemon_kill(&d);
        char *l = h_read_file(log);
        CHECK_CONTAINS(l, "is not a socket");
        CHECK_CONTAINS(l, path);
        free(l);
    }
    char *content = h_read_file(path);
    CHECK_STR(content, "keep me\n");
    free(content);
    unlink(path);
    unlink(log);
    rmdir(dir);
}

/* ---- start-up failures --------------------------------------------------- */

/* Run the daemon with args on a fresh socket; its exit code, log in *log. */
static int run_daemon(const char *const *args, const char *const *env, char **log)
{
    char dir[64], sock[128];
    mkdir_tmp(dir, sizeof dir);
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    h_daemon d;
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s/d.log", dir);
    int code = -1;
    if (h_daemon_spawn(&d, sock, args, env) == 0) {
        code = h_daemon_wait_exit(&d, 60000);
        if (code == -ETIMEDOUT) {
            h_daemon_kill(&d);
            code = -ETIMEDOUT;
        }
    }
    *log = h_read_file(d.log);
    unlink(d.log);
    unlink(sock);
    rmdir(dir);
    return code;
}

static void test_start_failures(void)
{
    h_section("start-up failures");
    char *log;
    const char *hip[] = {"--backend", "hip", NULL};
    int code = run_daemon(hip, NULL, &log);
    if (code == -ETIMEDOUT && strstr(log, "backend hip")) {
        /* a GPU build on a machine with a GPU: the daemon serves */
        printf("SKIP: --backend hip started on this machine (it has a GPU); the no-GPU "
               "refusal is checked where there is none\n");
    } else {
        CHECKF(code != 0 && code > 0 && code < 128, "--backend hip without a usable GPU exits "
               "non-zero (got %d)", code);
        CHECK_EQ(code, 1);
        CHECKF(count_lines(log) == 1, "exactly one line on stderr (got %d: \"%s\")",
               count_lines(log), log);
        CHECK_CONTAINS(log, "hip");
    }
    free(log);

    const char *bad_flag[] = {"--no-such-flag", NULL};
    code = run_daemon(bad_flag, NULL, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, "--no-such-flag");
    free(log);

    const char *stray[] = {"stray-argument", NULL};
    code = run_daemon(stray, NULL, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, "stray-argument");
    free(log);

    const char *bad_set[] = {"--set", "buckets=4,2", NULL};
    code = run_daemon(bad_set, NULL, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, "buckets");
    free(log);

    const char *unknown_set[] = {"--set", "no-such-key=1", NULL};
    code = run_daemon(unknown_set, NULL, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, "no-such-key");
    free(log);

    /* a suffixed value so large it would wrap around to a valid size */
    const char *wrap[] = {"--set", "max-message-size=17592186044417M", NULL};
    code = run_daemon(wrap, NULL, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, "max-message-size");
    free(log);
    const char *small[] = {"--set", "max-message-size=1000", NULL};
    code = run_daemon(small, NULL, &log);
    CHECK_EQ(code, 2);
    free(log);

    const char *no_eq[] = {"--set", "buckets", NULL};
    code = run_daemon(no_eq, NULL, &log);
    CHECK_EQ(code, 2);
    free(log);

    const char *bad_env[] = {"GFXGRAPH_BUCKETS=lots", NULL};
    code = run_daemon(NULL, bad_env, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, "GFXGRAPH_BUCKETS");
    free(log);

    const char *bad_mode[] = {"GFXGRAPH=sometimes", NULL};
    code = run_daemon(NULL, bad_mode, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, "GFXGRAPH");
    free(log);

    const char *missing_cfg[] = {"--config", "/nonexistent/gfxgraphd.conf", NULL};
    code = run_daemon(missing_cfg, NULL, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, "/nonexistent/gfxgraphd.conf");
    free(log);

    const char *version[] = {"--version", NULL};
    code = run_daemon(version, NULL, &log);
    CHECK_EQ(code, 0);
    CHECK_CONTAINS(log, GG_VERSION);
    free(log);
    const char *help[] = {"--help", NULL};
    code = run_daemon(help, NULL, &log);
    CHECK_EQ(code, 0);
    CHECK_CONTAINS(log, "usage");
    free(log);
}

/* ---- settings precedence ------------------------------------------------- */

static void test_precedence(void)
{
    h_section("settings: flags > environment > config file > defaults");
    char dir[64], conf[128], bad[128];
    mkdir_tmp(dir, sizeof dir);
    snprintf(conf, sizeof conf, "%s/gfxgraphd.conf", dir);
    FILE *f = fopen(conf, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("# test configuration\n[gfxgraphd]\nbuckets = 1, 3, 5   ; from the file\n"
              "max-message-size = 100000\n\nmax-inflight = 7\n",
              f);
        fclose(f);
    }
    snprintf(bad, sizeof bad, "%s/bad.conf", dir);
    f = fopen(bad, "w");
    if (f) {
        fputs("buckets = 1\nthis line has no equals sign\n", f);
        fclose(f);
    }
    struct {
        const char *what;
        const char *args[6];
        const char *env[4];
        const char *buckets;
        uint64_t max_msg;
        uint64_t inflight;
    } cases[] = {
        {"defaults", {NULL}, {NULL}, "1,2,4,8,16,24,32,48,64,96,128,192,256", 16u << 20, 64},
        {"file", {"--config", conf, NULL}, {NULL}, "1,3,5", 100000, 7},
        {"file via GFXGRAPH_CONFIG", {NULL}, {"GFXGRAPH_CONFIG=", NULL}, "1,3,5", 100000, 7},
        {"env over file", {"--config", conf, NULL},
         {"GFXGRAPH_BUCKETS=2,4", "GFXGRAPH_MAX_MESSAGE=200000", NULL}, "2,4", 200000, 7},
        {"flag over env over file",
         {"--config", conf, "--set", "buckets=7,9", NULL},
         {"GFXGRAPH_BUCKETS=2,4", "GFXGRAPH_MAX_MESSAGE=200000", NULL}, "7,9", 200000, 7},
        {"flags over env, no file",
         {"--set", "buckets=[6, 12]", "--set", "max-message-size=300000", NULL},
         {"GFXGRAPH_BUCKETS=2,4", "GFXGRAPH_MAX_MESSAGE=200000", NULL}, "6,12", 300000, 64},
        {"the last flag wins", {"--set", "buckets=3", "--set", "buckets=5", NULL}, {NULL}, "5",
         16u << 20, 64},
        {"size suffixes", {"--set", "max-message-size=64K", NULL}, {NULL},
         "1,2,4,8,16,24,32,48,64,96,128,192,256", 65536, 64},
        {"size suffixes (M)", {"--set", "max-message-size=2M", NULL}, {NULL},
         "1,2,4,8,16,24,32,48,64,96,128,192,256", 2u << 20, 64},
    };
    char cfgenv[200];
    snprintf(cfgenv, sizeof cfgenv, "GFXGRAPH_CONFIG=%s", conf);
    cases[2].env[0] = cfgenv;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        h_daemon d;
        if (h_daemon_start(&d, cases[i].args, cases[i].env) < 0) {
            CHECKF(false, "%s: the daemon starts", cases[i].what);
            continue;
        }
        char got[256];
        hello_buckets(d.sock, got, sizeof got);
        CHECKF(strcmp(got, cases[i].buckets) == 0, "%s: buckets %s (got %s)", cases[i].what,
               cases[i].buckets, got);
        uint64_t mm = hello_limit(d.sock, "max_message_size");
        CHECKF(mm == cases[i].max_msg, "%s: max_message_size %llu (got %llu)", cases[i].what,
               (unsigned long long)cases[i].max_msg, (unsigned long long)mm);
        uint64_t mi = hello_limit(d.sock, "max_inflight");
        CHECKF(mi == cases[i].inflight, "%s: max_inflight %llu (got %llu)", cases[i].what,
               (unsigned long long)cases[i].inflight, (unsigned long long)mi);
        h_daemon_stop(&d);
    }
    /* a bad config line names the file and line */
    char *log;
    const char *args[] = {"--config", bad, NULL};
    int code = run_daemon(args, NULL, &log);
    CHECK_EQ(code, 2);
    char where[160];
    snprintf(where, sizeof where, "%s:2", bad);
    CHECK_CONTAINS(log, where);
    free(log);
    /* a bad value in the file is refused even when a flag sets the same key:
     * each layer is checked where it is read */
    f = fopen(bad, "w");
    if (f) {
        fputs("buckets = 5, 1\n", f);
        fclose(f);
    }
    const char *args2[] = {"--config", bad, "--set", "buckets=1,2", NULL};
    code = run_daemon(args2, NULL, &log);
    CHECK_EQ(code, 2);
    CHECK_CONTAINS(log, bad);
    free(log);
    unlink(conf);
    unlink(bad);
    rmdir(dir);
}

int main(void)
{
    umask(022);
    h_init("test_daemon_life", 600);
    test_another_daemon();
    test_stale_socket_and_mode();
    test_regular_file();
    test_start_failures();
    test_precedence();
    return h_finish();
}
