/* SPDX-License-Identifier: MIT */
/* gfxgraphctl health against an unhealthy daemon: exit status 1, and the
 * output names what failed.
 *
 * A real daemon is healthy here (the cpu backend's smoke test passes), so a
 * small stand-in serves the socket instead: a thread of this test that
 * answers MessagePack-RPC hello and health the way gfxgraphd does, with the
 * health result it is told to give.  Cases: ok false with a failed smoke test
 * and a reason (text and --json), a result without the ok flag (counted as
 * unhealthy), health answered with an error (exit 1: the daemon answered),
 * and ok true (exit 0, so the stand-in itself is trusted). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

#ifndef GG_CTL_PATH
#error "GG_CTL_PATH must name the gfxgraphctl binary"
#endif

#define FAILED_SMOKE "failed: z != 3x at element 7 (got 2.5, want 3)"
#define FAILED_REASON "the smoke test failed: z != 3x at element 7"

typedef enum { FAKE_UNHEALTHY, FAKE_NO_OK, FAKE_ERROR, FAKE_HEALTHY } fake_mode;

typedef struct {
    int lfd;
    int stop[2];             /* a byte on stop[1] ends the thread */
    pthread_mutex_t mu;
    fake_mode mode;          /* under mu */
    char methods[256];       /* the methods asked for, space-separated; under mu */
} fake_server;

static void fake_pack_hello(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 6);
    proto_pack_kv_u64(pk, "protocol", 1);
    proto_pack_kv_str(pk, "version", "0.1.0-fake");
    proto_pack_kv_str(pk, "backend", "cpu");
    proto_pack_kv_u64(pk, "session", 1);
    proto_pack_key(pk, "device");
    msgpack_pack_map(pk, 2);
    proto_pack_kv_str(pk, "name", "stand-in");
    proto_pack_kv_str(pk, "arch", "none");
    proto_pack_key(pk, "limits");
    msgpack_pack_map(pk, 2);
    proto_pack_kv_u64(pk, "max_message_size", 16u << 20);
    proto_pack_kv_u64(pk, "max_batch", 65536);
}

static void fake_pack_health(msgpack_packer *pk, fake_mode mode)
{
    bool ok = mode == FAKE_HEALTHY;
    msgpack_pack_map(pk, mode == FAKE_NO_OK ? 4 : 5);
    if (mode != FAKE_NO_OK)
        proto_pack_kv_bool(pk, "ok", ok);
    proto_pack_kv_str(pk, "gpu", "Stand-in GPU");
    proto_pack_kv_str(pk, "arch", "gfx0000");
    proto_pack_kv_u64(pk, "vram_total_mb", 1024);
    proto_pack_key(pk, "details");
    msgpack_pack_map(pk, ok ? 3 : 4);
    proto_pack_kv_str(pk, "backend", "cpu");
    proto_pack_kv_str(pk, "smoke_test", ok ? "passed" : FAILED_SMOKE);
    proto_pack_kv_u64(pk, "sessions", 1);
    if (!ok)
        proto_pack_kv_str(pk, "reason", FAILED_REASON);
}

/* One connection: answer each request until the client closes. */
static void fake_serve(fake_server *s, int fd)
{
    h_conn c;
    memset(&c, 0, sizeof c);
    c.fd = fd;
    msgpack_unpacked_init(&c.up);
    proto_frame_init(&c.frame, 1u << 20);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    const msgpack_object *o;
    while (h_conn_recv(&c, 30000, &o) > 0) {
        proto_msg m;
        bool idok;
        char why[128];
        if (proto_msg_decode(o, &m, &idok, why, sizeof why) < 0 || m.type != GG_MSG_REQUEST)
            break;
        char method[32];
        snprintf(method, sizeof method, "%.*s", (int)m.method_len, m.method);
        pthread_mutex_lock(&s->mu);
        fake_mode mode = s->mode;
        size_t n = strlen(s->methods);
        snprintf(s->methods + n, sizeof s->methods - n, "%s%s", n ? " " : "", method);
        pthread_mutex_unlock(&s->mu);
        if (strcmp(method, "hello") == 0) {
            proto_pack_response_head(&pk, m.msgid);
            fake_pack_hello(&pk);
        } else if (strcmp(method, "health") == 0 && mode != FAKE_ERROR) {
            proto_pack_response_head(&pk, m.msgid);
            fake_pack_health(&pk, mode);
        } else if (strcmp(method, "health") == 0) {
            proto_pack_error_response(&pk, m.msgid, -ESHUTDOWN, "the daemon is stopping");
        } else {
            proto_pack_error_response(&pk, m.msgid, -ENOSYS, "no such method");
        }
        if (h_conn_send_sb(&c, &sb) < 0)
            break;
    }
    msgpack_sbuffer_destroy(&sb);
    h_conn_close(&c);
}

static void *fake_main(void *arg)
{
    fake_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
                              {.fd = s->stop[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            fake_serve(s, fd);
    }
    return NULL;
}

static void fake_set(fake_server *s, fake_mode mode)
{
    pthread_mutex_lock(&s->mu);
    s->mode = mode;
    s->methods[0] = '\0';
    pthread_mutex_unlock(&s->mu);
}

static void fake_methods(fake_server *s, char *buf, size_t len)
{
    pthread_mutex_lock(&s->mu);
    snprintf(buf, len, "%s", s->methods);
    pthread_mutex_unlock(&s->mu);
}

static int ctl(const char *sock, const char *a1, const char *a2, char **out, char **err)
{
    const char *argv[] = {GG_CTL_PATH, "--socket", sock, a1, a2, NULL};
    return h_run(argv, NULL, NULL, out, err, 60000);
}

static void test_unhealthy(fake_server *s, const char *sock)
{
    h_section("health: ok false");
    fake_set(s, FAKE_UNHEALTHY);
    char *out = NULL, *err = NULL, methods[256];
    int code = ctl(sock, "health", NULL, &out, &err);
    CHECKF(code == 1, "exit 1 when unhealthy (got %d; %s)", code, err ? err : "");
    fake_methods(s, methods, sizeof methods);
    CHECKF(strcmp(methods, "hello health") == 0, "gfxgraphctl said hello, then asked health "
           "(\"%s\")", methods);
    CHECK_CONTAINS(out, "NO");
    CHECK_CONTAINS(out, "Stand-in GPU");
    CHECK_CONTAINS(out, "smoke_test");
    CHECK_CONTAINS(out, FAILED_SMOKE);
    CHECK_CONTAINS(out, "reason");
    CHECK_CONTAINS(out, FAILED_REASON);
    free(out);
    free(err);

    h_section("health --json: ok false");
    fake_set(s, FAKE_UNHEALTHY);
    code = ctl(sock, "health", "--json", &out, &err);
    CHECKF(code == 1, "--json: exit 1 when unhealthy (got %d)", code);
    CHECK_CONTAINS(out, "\"ok\": false");
    CHECK_CONTAINS(out, FAILED_REASON);
    if (h_have_python() && out)
        CHECKF(h_py_json_check(out, "assert d['ok'] is False\n"
                             "assert d['details']['smoke_test'] == '" FAILED_SMOKE "'\n"
                             "assert d['details']['reason'] == '" FAILED_REASON "'\n"
                             "assert d['gpu'] == 'Stand-in GPU'\n"),
               "--json parses, with ok false and the failing details");
    free(out);
    free(err);
}

static void test_other_answers(fake_server *s, const char *sock)
{
    h_section("health without an ok flag");
    fake_set(s, FAKE_NO_OK);
    char *out = NULL, *err = NULL;
    int code = ctl(sock, "health", NULL, &out, &err);
    CHECKF(code == 1, "a result without ok counts as unhealthy: exit 1 (got %d)", code);
    CHECK_CONTAINS(err, "no ok flag");
    CHECK_CONTAINS(out, FAILED_REASON);
    free(out);
    free(err);
    code = ctl(sock, "health", "--json", &out, &err);
    CHECKF(code == 1, "--json: exit 1 (got %d)", code);
    CHECK_CONTAINS(err, "no ok flag");
    free(out);
    free(err);

    h_section("health answered with an error");
    fake_set(s, FAKE_ERROR);
    code = ctl(sock, "health", NULL, &out, &err);
    CHECKF(code == 1, "the daemon answered an error: exit 1 (got %d)", code);
    CHECK_CONTAINS(err, "health failed");
    CHECK_CONTAINS(err, "the daemon is stopping");
    CHECK_CONTAINS(err, "ESHUTDOWN");
    CHECKF(out && out[0] == '\0', "nothing on stdout");
    free(out);
    free(err);

    h_section("the stand-in healthy");
    fake_set(s, FAKE_HEALTHY);
    code = ctl(sock, "health", NULL, &out, &err);
    CHECKF(code == 0, "exit 0 when ok is true (got %d; %s)", code, err ? err : "");
    CHECK_CONTAINS(out, "yes");
    CHECK_CONTAINS(out, "passed");
    free(out);
    free(err);
}

int main(void)
{
    h_init("test_ctl_health", 300);
    if (!h_have_python())
        h_note("python3 not found: the --json output is only searched, not parsed");

    char dir[64] = "/tmp/ggtest.XXXXXX", sock[128];
    if (!CHECK(mkdtemp(dir) != NULL))
        return h_finish();
    snprintf(sock, sizeof sock, "%s/fake.sock", dir);
    fake_server s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    s.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    pthread_t th;
    if (CHECK(s.lfd >= 0 && bind(s.lfd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              listen(s.lfd, 8) == 0 && pipe(s.stop) == 0) &&
        CHECK(pthread_create(&th, NULL, fake_main, &s) == 0)) {
        test_unhealthy(&s, sock);
        test_other_answers(&s, sock);
        ssize_t w = write(s.stop[1], "x", 1);
        (void)w;
        pthread_join(th, NULL);
    }
    if (s.lfd >= 0)
        close(s.lfd);
    if (s.stop[0] > 0) {
        close(s.stop[0]);
        close(s.stop[1]);
    }
    unlink(sock);
    rmdir(dir);
    return h_finish();
}
