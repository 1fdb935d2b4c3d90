/* SPDX-License-Identifier: MIT */
/* The exporter's sockets (exporter.h): listeners from systemd or --listen,
 * and one thread that reads requests from up to GG_EXPORTER_MAX_CONNS
 * clients at once.  A client that sends nothing, or reads nothing, is
 * dropped after the timeout, so it cannot hold the exporter; a scrape
 * itself runs in turn (Prometheus sends one per target at a time). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "exporter.h"

#define SERVE_INDEX                                                                 \
    "<html><head><title>gfxgraph exporter</title></head><body>\n"                   \
    "<h1>gfxgraph exporter</h1>\n<p><a href=\"/metrics\">Metrics</a></p>\n"        \
    "</body></html>\n"

typedef struct {
    int fd;                 /* -1: free */
    size_t len;
    int64_t deadline_ms;
    char head[GG_EXPORTER_MAX_HEAD];
} serve_conn;

static volatile sig_atomic_t serve_stop;

static void serve_on_signal(int sig)
{
    (void)sig;
    serve_stop = 1;
}

static int64_t serve_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int gg_exporter_listen_activated(gg_exporter_config *cfg)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid || !fds)
        return 0;
    char *end;
    long p = strtol(pid, &end, 10);
    if (*end || p != (long)getpid())
        return 0;   /* meant for another process */
    long n = strtol(fds, &end, 10);
    if (*end || n < 0 || cfg->nfds + n > GG_EXPORTER_MAX_LISTEN)
        return -EINVAL;
    for (int i = 0; i < (int)n; i++) {
        int fd = 3 + i;     /* SD_LISTEN_FDS_START */
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        cfg->fds[cfg->nfds++] = fd;
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return (int)n;
}

int gg_exporter_listen_addr(gg_exporter_config *cfg, const char *addr, char *err,
                            size_t errlen)
{
    if (cfg->nfds >= GG_EXPORTER_MAX_LISTEN) {
        snprintf(err, errlen, "too many listening sockets (at most %d)", GG_EXPORTER_MAX_LISTEN);
        return -EINVAL;
    }
    const char *spec = addr;
    const char *colon = strrchr(addr, ':');
    if (!colon || !colon[1]) {
        snprintf(err, errlen, "'%s': give HOST:PORT, [IPV6]:PORT or :PORT", addr);
        return -EINVAL;
    }
    char host[256];
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= 2 && addr[0] == '[' && addr[hlen - 1] == ']') {
        addr++;
        hlen -= 2;
    }
    if (hlen >= sizeof host) {
        snprintf(err, errlen, "'%s': host name too long", spec);
        return -ENAMETOOLONG;
    }
    memcpy(host, addr, hlen);
    host[hlen] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
    int g = getaddrinfo(hlen ? host : NULL, colon + 1, &hints, &res);
    if (g != 0) {
        snprintf(err, errlen, "'%s': %s", spec, gai_strerror(g));
        return -EINVAL;
    }
    int rc = -EADDRNOTAVAIL;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0) {
            cfg->fds[cfg->nfds++] = fd;
            rc = 0;
            break;
        }
        rc = -errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (rc < 0)
        snprintf(err, errlen, "cannot listen on %s: %s", spec, strerror(-rc));
    return rc;
}

static void serve_print_addr(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 ||
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        fprintf(stderr, "gfxgraph-exporter: listening on descriptor %d\n", fd);
        return;
    }
    fprintf(stderr, ss.ss_family == AF_INET6 ? "gfxgraph-exporter: listening on [%s]:%s\n"
                                             : "gfxgraph-exporter: listening on %s:%s\n",
            host, port);
}

/* Write all of buf, waiting for the client up to the deadline. */
static void serve_write_all(int fd, const char *buf, size_t len, int64_t deadline)
{
    while (len) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return;
        int64_t left = deadline - serve_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return;
    }
}

static void serve_reply(serve_conn *c, int status, const char *type, const char *body,
                        size_t len, bool head, int timeout_ms)
{
    gg_exporter_buf out = {0};
    gg_exporter_http_response(&out, status, type, body, len, head);
    if (!out.oom)
        serve_write_all(c->fd, out.data, out.len, serve_now_ms() + timeout_ms);
    gg_exporter_buf_free(&out);
    close(c->fd);
    c->fd = -1;
}

static void serve_error(serve_conn *c, int status, const char *msg, int timeout_ms)
{
    serve_reply(c, status, "text/plain; charset=utf-8", msg, strlen(msg), false, timeout_ms);
}

/* The daemon's reachability as last seen: logged when it changes, not on
 * every scrape. */
static int serve_last_up = -1;

static void serve_request(const gg_exporter_config *cfg, serve_conn *c,
                          const gg_exporter_request *req)
{
    if (req->status == 400)
        return serve_error(c, 400, "bad request\n", cfg->timeout_ms);
    if (req->status == 505)
        return serve_error(c, 505, "HTTP/1.x only\n", cfg->timeout_ms);
    if (req->status == 405)
        return serve_error(c, 405, "GET or HEAD only\n", cfg->timeout_ms);
    if (req->page == GG_EXPORTER_PAGE_INDEX)
        return serve_reply(c, 200, "text/html; charset=utf-8", SERVE_INDEX,
                           sizeof(SERVE_INDEX) - 1, req->head, cfg->timeout_ms);
    if (req->page != GG_EXPORTER_PAGE_METRICS)
        return serve_error(c, 404, "not found: the metrics are at /metrics\n", cfg->timeout_ms);
    gg_exporter_buf body = {0};
    char err[512] = "";
    int up = gg_exporter_scrape(cfg->socket_path, cfg->timeout_ms, &body, err, sizeof err);
    if (up != serve_last_up) {
        if (up)
            fprintf(stderr, "gfxgraph-exporter: gfxgraphd answers\n");
        else
            fprintf(stderr, "gfxgraph-exporter: gfxgraphd not reachable: %s\n", err);
        serve_last_up = up;
    }
    if (body.oom)
        serve_error(c, 500, "out of memory\n", cfg->timeout_ms);
    else
        serve_reply(c, 200, GG_EXPORTER_TEXT_TYPE, body.data, body.len, req->head,
                    cfg->timeout_ms);
    gg_exporter_buf_free(&body);
}

/* Data from a client: a complete head is answered, a too long one refused. */
static void serve_read(const gg_exporter_config *cfg, serve_conn *c)
{
    ssize_t n = recv(c->fd, c->head + c->len, sizeof(c->head) - c->len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        close(c->fd);
        c->fd = -1;
        return;
    }
    c->len += (size_t)n;
    gg_exporter_request req;
    int rc = gg_exporter_http_parse(c->head, c->len, &req);
    if (rc == -EAGAIN)
        return;
    if (rc == -EMSGSIZE)
        return serve_error(c, 431, "request head too large\n", cfg->timeout_ms);
    serve_request(cfg, c, &req);
}

static void serve_accept(int lfd, serve_conn *conns, int timeout_ms)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    for (int i = 0; i < GG_EXPORTER_MAX_CONNS; i++)
        if (conns[i].fd < 0) {
            conns[i].fd = fd;
            conns[i].len = 0;
            conns[i].deadline_ms = serve_now_ms() + timeout_ms;
            return;
        }
    close(fd);  /* not polled while full, so only a race gets here */
}

int gg_exporter_serve(const gg_exporter_config *cfg)
{
    struct sigaction sa = {.sa_handler = serve_on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < cfg->nfds; i++) {
        fcntl(cfg->fds[i], F_SETFL, fcntl(cfg->fds[i], F_GETFL) | O_NONBLOCK);
        serve_print_addr(cfg->fds[i]);
    }
    fflush(stderr);
    serve_conn *conns = calloc(GG_EXPORTER_MAX_CONNS, sizeof *conns);
    if (!conns)
        return -ENOMEM;
    for (int i = 0; i < GG_EXPORTER_MAX_CONNS; i++)
        conns[i].fd = -1;
    struct pollfd pfd[GG_EXPORTER_MAX_LISTEN + GG_EXPORTER_MAX_CONNS];
    int rc = 0;
    while (!serve_stop) {
        int np = 0, nconn = 0;
        int64_t now = serve_now_ms(), wait = -1;
        int idx[GG_EXPORTER_MAX_CONNS];
        for (int i = 0; i < GG_EXPORTER_MAX_CONNS; i++) {
            if (conns[i].fd < 0)
                continue;
            if (conns[i].deadline_ms <= now) {
                close(conns[i].fd);
                conns[i].fd = -1;
                continue;
            }
            int64_t left = conns[i].deadline_ms - now;
            wait = wait < 0 || left < wait ? left : wait;
            idx[nconn++] = i;
            pfd[np++] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        }
        int nl = nconn < GG_EXPORTER_MAX_CONNS ? cfg->nfds : 0;
        for (int i = 0; i < nl; i++)
            pfd[np++] = (struct pollfd){.fd = cfg->fds[i], .events = POLLIN};
        int n = poll(pfd, (nfds_t)np, (int)wait);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        for (int k = 0; k < nconn; k++)
            if (pfd[k].revents)
                serve_read(cfg, &conns[idx[k]]);
        for (int i = 0; i < nl; i++)
            if (pfd[nconn + i].revents & POLLIN)
                serve_accept(cfg->fds[i], conns, cfg->timeout_ms);
    }
    for (int i = 0; i < GG_EXPORTER_MAX_CONNS; i++)
        if (conns[i].fd >= 0)
            close(conns[i].fd);
    free(conns);
    return rc;
}
