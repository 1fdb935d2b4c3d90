/* SPDX-License-Identifier: MIT */
/* gfxgraph-exporter: gfxgraphd's metrics over HTTP for Prometheus.
 *
 * A process of its own rather than an HTTP listener inside the daemon: the
 * daemon keeps its sandbox (no network at all: PrivateNetwork, AF_UNIX
 * only) and never parses HTTP, and the exporter can answer gfxgraph_up 0
 * when the daemon is gone, which a daemon cannot say about itself.  Each
 * scrape opens a session, calls the `metrics` method and relays its text
 * with gfxgraph_up added; nothing of an earlier scrape is kept, so a
 * daemon that is gone leaves no stale values behind (docs/metrics.md).
 *
 * Split by concept: http.c parses requests and writes responses (no I/O),
 * scrape.c talks to the daemon and composes the body, serve.c owns the
 * sockets, main.c the command line. */
#ifndef GG_EXPORTER_H
#define GG_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>

#define GG_EXPORTER_DEFAULT_LISTEN "127.0.0.1:9786"
#define GG_EXPORTER_MAX_HEAD 8192   /* request line and headers */
#define GG_EXPORTER_MAX_CONNS 16    /* connections read at once */
#define GG_EXPORTER_MAX_LISTEN 8

/* ---- a growable byte buffer ---------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
    bool oom;       /* an append failed: the content is incomplete */
} gg_exporter_buf;

void gg_exporter_buf_add(gg_exporter_buf *b, const char *s, size_t n);
void gg_exporter_buf_printf(gg_exporter_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gg_exporter_buf_free(gg_exporter_buf *b);

/* ---- HTTP (http.c) -------------------------------------------------------- */

typedef enum {
    GG_EXPORTER_PAGE_METRICS,   /* /metrics */
    GG_EXPORTER_PAGE_INDEX,     /* / */
    GG_EXPORTER_PAGE_NONE,      /* anything else: 404 */
} gg_exporter_page;

typedef struct {
    bool head;              /* HEAD: the headers only */
    gg_exporter_page page;
    int status;             /* 0 when the request is good, else the error status */
} gg_exporter_request;

/* Parse the request head in buf[0..len).  0: complete (*req filled: a good
 * request, or status set to 400, 405 or 505 for a bad one); -EAGAIN: the
 * head is not complete yet; -EMSGSIZE: no complete head within
 * GG_EXPORTER_MAX_HEAD bytes (answer 431). */
int gg_exporter_http_parse(const char *buf, size_t len, gg_exporter_request *req);

/* A whole response: status line, headers (Content-Type, Content-Length,
 * Connection: close, and Allow for 405) and, unless head, the body. */
void gg_exporter_http_response(gg_exporter_buf *out, int status, const char *content_type,
                               const char *body, size_t body_len, bool head);

/* The Content-Type of the text format 0.0.4. */
#define GG_EXPORTER_TEXT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- the daemon (scrape.c) ------------------------------------------------ */

/* The body of one scrape: the daemon's text then gfxgraph_up 1 when
 * daemon_text is not NULL; else a comment saying why (error, made one
 * line) and gfxgraph_up 0 alone. */
void gg_exporter_body(gg_exporter_buf *out, const char *daemon_text, size_t text_len,
                      const char *error);

/* Ask the daemon at socket_path (NULL: the client library's default) for
 * its metrics, within timeout_ms per answer, and write the body into out.
 * Returns 1 when the daemon answered, 0 when not (out then says gfxgraph_up
 * 0, and err, of errlen bytes, why). */
int gg_exporter_scrape(const char *socket_path, int timeout_ms, gg_exporter_buf *out,
                       char *err, size_t errlen);

/* ---- the sockets (serve.c) ------------------------------------------------ */

typedef struct {
    const char *socket_path;    /* the daemon's; NULL: the default */
    int timeout_ms;             /* per answer from the daemon, and per client */
    int fds[GG_EXPORTER_MAX_LISTEN];
    int nfds;
} gg_exporter_config;

/* The listening sockets systemd passed (LISTEN_FDS, for this process):
 * appended to cfg->fds.  Their number, or -EINVAL when LISTEN_FDS is
 * malformed or gives more than GG_EXPORTER_MAX_LISTEN. */
int gg_exporter_listen_activated(gg_exporter_config *cfg);
/* Bind and listen on "HOST:PORT" ("[v6]:PORT", ":PORT" for every
 * address); appended to cfg->fds.  0 or a negative errno (err says why). */
int gg_exporter_listen_addr(gg_exporter_config *cfg, const char *addr, char *err,
                            size_t errlen);
/* Serve until SIGTERM or SIGINT.  Prints "listening on ADDR:PORT" for each
 * socket first.  0 on a clean stop, else a negative errno. */
int gg_exporter_serve(const gg_exporter_config *cfg);

#endif
