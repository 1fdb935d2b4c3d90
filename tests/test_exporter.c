/* SPDX-License-Identifier: MIT */
/* gfxgraph-exporter: its HTTP parser and body composition in-process, then
 * the binary in front of a real cpu-backend daemon: GET /metrics relays the
 * daemon's text (its replay counters move with the replays done here) and
 * adds gfxgraph_up 1; with the daemon gone the page is gfxgraph_up 0 alone;
 * a daemon back on the same socket is seen again; HEAD, bad methods, paths,
 * versions, garbage and an oversized head get their status; a client that
 * sends nothing does not hold up the others and is dropped; SIGTERM stops
 * it with status 0. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exporter.h"
#include "test_client_util.h"

#ifndef GG_EXPORTER_PATH
#error "GG_EXPORTER_PATH must name the gfxgraph-exporter binary"
#endif

/* ---- in-process ----------------------------------------------------------- */

static int parse(const char *s, gg_exporter_request *r)
{
    return gg_exporter_http_parse(s, strlen(s), r);
}

static void test_parse(void)
{
    h_section("HTTP request parsing");
    gg_exporter_request r;
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n", &r), 0);
    CHECK(r.status == 0 && r.page == GG_EXPORTER_PAGE_METRICS && !r.head);
    CHECK_EQ(parse("GET /metrics?x=1 HTTP/1.0\n\n", &r), 0);
    CHECK(r.status == 0 && r.page == GG_EXPORTER_PAGE_METRICS);
    CHECK_EQ(parse("HEAD / HTTP/1.1\r\n\r\n", &r), 0);
    CHECK(r.status == 0 && r.page == GG_EXPORTER_PAGE_INDEX && r.head);
    CHECK_EQ(parse("GET /metricsx HTTP/1.1\r\n\r\n", &r), 0);
    CHECK(r.status == 0 && r.page == GG_EXPORTER_PAGE_NONE);
    CHECK_EQ(parse("POST /metrics HTTP/1.1\r\n\r\n", &r), 0);
    CHECK_EQ(r.status, 405);
    CHECK_EQ(parse("GET /metrics HTTP/2.0\r\n\r\n", &r), 0);
    CHECK_EQ(r.status, 505);
    CHECK_EQ(parse("GET /metrics\r\n\r\n", &r), 0);
    CHECK_EQ(r.status, 400);
    CHECK_EQ(parse("GET  /metrics HTTP/1.1\r\n\r\n", &r), 0);
    CHECK_EQ(r.status, 400);
    CHECK_EQ(parse("\x93\x01\x02\x03 garbage\r\n\r\n", &r), 0);
    CHECK_EQ(r.status, 400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n", &r), -EAGAIN);
    CHECK_EQ(parse("", &r), -EAGAIN);
    char big[GG_EXPORTER_MAX_HEAD + 16];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_EQ(parse(big, &r), -EMSGSIZE);
}

static void test_response_and_body(void)
{
    h_section("responses and bodies");
    gg_exporter_buf b = {0};
    gg_exporter_http_response(&b, 200, GG_EXPORTER_TEXT_TYPE, "a 1\n", 4, false);
    CHECK_STR(b.data, "HTTP/1.1 200 OK\r\n"
                      "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                      "Content-Length: 4\r\nCache-Control: no-store\r\n"
                      "Connection: close\r\n\r\na 1\n");
    gg_exporter_buf_free(&b);
    gg_exporter_http_response(&b, 405, "text/plain", "no\n", 3, true);
    CHECK_CONTAINS(b.data, "HTTP/1.1 405 Method Not Allowed\r\n");
    CHECK_CONTAINS(b.data, "Allow: GET, HEAD\r\n");
    CHECK_CONTAINS(b.data, "Content-Length: 3\r\n");
    CHECK(strstr(b.data, "\r\n\r\n") && strcmp(strstr(b.data, "\r\n\r\n"), "\r\n\r\n") == 0);
    gg_exporter_buf_free(&b);

    gg_exporter_body(&b, "x_total 3", 9, NULL);
    CHECK_STR(b.data, "x_total 3\n# HELP gfxgraph_up Whether this scrape reached gfxgraphd "
                      "and got its metrics (1) or not (0).\n# TYPE gfxgraph_up gauge\n"
                      "gfxgraph_up 1\n");
    gg_exporter_buf_free(&b);
    gg_exporter_body(&b, NULL, 0, "cannot connect\nto x (ENOENT)");
    CHECK_STR(b.data, "# gfxgraphd not reachable: cannot connect to x (ENOENT)\n"
                      "# HELP gfxgraph_up Whether this scrape reached gfxgraphd and got its "
                      "metrics (1) or not (0).\n# TYPE gfxgraph_up gauge\ngfxgraph_up 0\n");
    gg_exporter_buf_free(&b);
}

/* ---- the binary ----------------------------------------------------------- */

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send req and read the whole response (the exporter closes after it). */
static char *http(int port, const char *req, size_t len)
{
    int fd = tcp_connect(port);
    if (fd < 0)
        return strdup("");
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)!send(fd, req, len, MSG_NOSIGNAL);
    gg_exporter_buf b = {0};
    char chunk[65536];
    ssize_t n;
    while ((n = recv(fd, chunk, sizeof chunk, 0)) > 0)
        gg_exporter_buf_add(&b, chunk, (size_t)n);
    close(fd);
    return b.data ? b.data : strdup("");
}

static char *get(int port, const char *path)
{
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path);
    return http(port, req, strlen(req));
}

static const char *body_of(const char *resp)
{
    const char *p = strstr(resp, "\r\n\r\n");
    return p ? p + 4 : "";
}

static double sample(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    return -1;
}

static double replays_total(const char *text)
{
    return sample(text, "gfxgraph_replays_total{path=\"graph\"}") +
           sample(text, "gfxgraph_replays_total{path=\"eager\"}") +
           sample(text, "gfxgraph_replays_total{path=\"fastpath\"}");
}

static int count_of(const char *hay, const char *needle)
{
    int k = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        k++;
    return k;
}

static pid_t exporter_start(const char *sock, const char *log, int *port)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        execl(GG_EXPORTER_PATH, GG_EXPORTER_PATH, "--socket", sock, "--listen", "127.0.0.1:0",
              "--timeout", "2", (char *)NULL);
        _exit(127);
    }
    *port = 0;
    for (int64_t end = h_now_ms() + 60000; pid > 0 && h_now_ms() < end && !*port;) {
        char *t = h_read_file(log);
        const char *p = strstr(t, "listening on 127.0.0.1:");
        if (p)
            *port = atoi(p + strlen("listening on 127.0.0.1:"));
        free(t);
        if (!*port)
            h_sleep_ms(20);
    }
    return pid;
}

static void test_binary(void)
{
    h_section("the exporter in front of a daemon");
    char dir[] = "/tmp/ggexpXXXXXX";
    if (!CHECK(mkdtemp(dir)))
        return;
    char sock[128], log[128];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(log, sizeof log, "%s/exporter.log", dir);
    const char *const args[] = {"--backend", "cpu", NULL};
    h_daemon d;
    memset(&d, 0, sizeof d);
    if (!CHECK(h_daemon_spawn(&d, sock, args, NULL) == 0 && h_daemon_wait_ready(&d, 60000) == 0))
        return;
    int port;
    pid_t ex = exporter_start(sock, log, &port);
    if (!CHECKF(port > 0, "the exporter says where it listens")) {
        h_daemon_stop(&d);
        return;
    }

    char *r = get(port, "/metrics");
    CHECK_CONTAINS(r, "HTTP/1.1 200 OK\r\n");
    CHECK_CONTAINS(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n");
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", strlen(body_of(r)));
    CHECK_CONTAINS(r, cl);
    CHECK_CONTAINS(body_of(r), "\ngfxgraph_up 1\n");
    CHECK_CONTAINS(body_of(r), "\ngfxgraph_info{version=");
    CHECK_CONTAINS(body_of(r), "\nprocess_start_time_seconds ");
    CHECK(sample(body_of(r), "gfxgraph_errors_total{code=\"EINVAL\"}") == 0);
    double before = replays_total(body_of(r));
    double sessions_before = sample(body_of(r), "gfxgraph_sessions_opened_total");
    free(r);

    /* replays through the client library: the relayed counters follow */
    gg_client *c = t_connect(&d, "exporter-test");
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    int done = 0;
    if (c && tbuf_new(c, &x, 64) && tbuf_new(c, &y, 64)) {
        uint64_t p = t_define_silu2x(c, "exporter", x.id, y.id, 4);
        for (int i = 0; i < 7; i++)
            done += gg_client_replay(c, p, 1, -1, NULL) == 0;
    }
    CHECK_EQ(done, 7);
    r = get(port, "/metrics");
    CHECKF(replays_total(body_of(r)) == before + 7, "replays %g then %g", before,
           replays_total(body_of(r)));
    CHECK(sample(body_of(r), "gfxgraph_replay_round_trip_seconds_count{program=\"exporter\","
                             "bucket=\"1\"}") == 7);
    /* each scrape is a session of its own, and the client's */
    CHECK(sample(body_of(r), "gfxgraph_sessions_opened_total") == sessions_before + 2);
    free(r);
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);

    h_section("requests the exporter refuses");
    r = http(port, "HEAD /metrics HTTP/1.1\r\n\r\n", 26);
    CHECK_CONTAINS(r, "HTTP/1.1 200 OK\r\n");
    CHECK_STR(body_of(r), "");
    free(r);
    r = http(port, "POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi", 46);
    CHECK_CONTAINS(r, "HTTP/1.1 405 ");
    CHECK_CONTAINS(r, "Allow: GET, HEAD\r\n");
    free(r);
    r = get(port, "/nothing");
    CHECK_CONTAINS(r, "HTTP/1.1 404 ");
    free(r);
    r = get(port, "/");
    CHECK_CONTAINS(r, "HTTP/1.1 200 OK\r\n");
    CHECK_CONTAINS(r, "href=\"/metrics\"");
    free(r);
    r = http(port, "GET /metrics HTTP/3.0\r\n\r\n", 25);
    CHECK_CONTAINS(r, "HTTP/1.1 505 ");
    free(r);
    static const char msgpack[] = "\x94\x00\x01\xa5hello\x90\r\n\r\n";
    r = http(port, msgpack, sizeof msgpack - 1);
    CHECK_CONTAINS(r, "HTTP/1.1 400 ");
    free(r);
    char *big = malloc(GG_EXPORTER_MAX_HEAD + 100);
    memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
    memset(big + 26, 'a', GG_EXPORTER_MAX_HEAD + 100 - 26);
    r = http(port, big, GG_EXPORTER_MAX_HEAD + 100);
    CHECK_CONTAINS(r, "HTTP/1.1 431 ");
    free(r);
    free(big);

    h_section("a silent client holds nobody up and is dropped");
    int silent = tcp_connect(port);
    CHECK(silent >= 0);
    r = get(port, "/metrics");
    CHECK_CONTAINS(body_of(r), "\ngfxgraph_up 1\n");
    free(r);
    char ch;
    struct timeval tv = {.tv_sec = 60};
    setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    CHECKF(recv(silent, &ch, 1, 0) == 0, "the exporter closes the silent connection");
    close(silent);

    h_section("the daemon gone, then back");
    h_daemon_stop(&d);
    for (int i = 0; i < 2; i++) {
        r = get(port, "/metrics");
        CHECK_CONTAINS(r, "HTTP/1.1 200 OK\r\n");
        CHECK_CONTAINS(body_of(r), "# gfxgraphd not reachable: ");
        CHECK_CONTAINS(body_of(r), "\ngfxgraph_up 0\n");
        CHECKF(!strstr(body_of(r), "gfxgraph_replays_total") &&
                   !strstr(body_of(r), "process_start_time_seconds"),
               "no value of the daemon's is repeated: '%s'", body_of(r));
        CHECK_EQ(count_of(body_of(r), "\n") , 4);
        free(r);
    }
    char *l = h_read_file(log);
    CHECKF(count_of(l, "gfxgraphd not reachable") == 1, "logged once, not per scrape: %s", l);
    free(l);
    memset(&d, 0, sizeof d);
    if (CHECK(h_daemon_spawn(&d, sock, args, NULL) == 0 && h_daemon_wait_ready(&d, 60000) == 0)) {
        r = get(port, "/metrics");
        CHECK_CONTAINS(body_of(r), "\ngfxgraph_up 1\n");
        CHECKF(replays_total(body_of(r)) == 0, "a new daemon's counters (%g)",
               replays_total(body_of(r)));
        free(r);
        h_daemon_stop(&d);
    }
    l = h_read_file(log);
    CHECKF(count_of(l, "gfxgraphd answers") == 2, "logged when it answers again: %s", l);
    free(l);

    kill(ex, SIGTERM);
    int st = 0;
    CHECK(waitpid(ex, &st, 0) == ex);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: exit status 0 (%#x)", st);
    unlink(log);
    rmdir(dir);
}

static void test_usage(void)
{
    h_section("command line");
    char *out = NULL, *err = NULL;
    const char *bad[] = {GG_EXPORTER_PATH, "--timeout", "0", NULL};
    CHECK_EQ(h_run(bad, NULL, NULL, &out, &err, 30000), 64);
    CHECK_CONTAINS(err, "--timeout");
    free(out);
    free(err);
    const char *addr[] = {GG_EXPORTER_PATH, "--listen", "nowhere", NULL};
    CHECK_EQ(h_run(addr, NULL, NULL, &out, &err, 30000), 1);
    CHECK_CONTAINS(err, "HOST:PORT");
    free(out);
    free(err);
}

int main(void)
{
    h_init("test_exporter", 300);
    test_parse();
    test_response_and_body();
    test_usage();
    test_binary();
    return h_finish();
}
