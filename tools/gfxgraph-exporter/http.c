/* SPDX-License-Identifier: MIT */
/* HTTP/1.x for a scrape endpoint (exporter.h): just enough of RFC 9112 to
 * answer GET and HEAD of /metrics and /, and a clear status for anything
 * else.  Every response closes the connection, so no request body or
 * pipelined request ever needs reading. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "exporter.h"

/* The end of the head: the first empty line (CRLF CRLF, or bare LF LF as
 * RFC 9112 lets a server accept).  Its length, or 0 when not there yet. */
static size_t http_head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (buf[i + 1] == '\n')
            return i + 2;
        if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

static bool http_token_is(const char *p, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(p, word, n) == 0;
}

int gg_exporter_http_parse(const char *buf, size_t len, gg_exporter_request *req)
{
    *req = (gg_exporter_request){.page = GG_EXPORTER_PAGE_NONE};
    size_t end = http_head_end(buf, len);
    if (!end)
        return len >= GG_EXPORTER_MAX_HEAD ? -EMSGSIZE : -EAGAIN;
    if (end > GG_EXPORTER_MAX_HEAD)
        return -EMSGSIZE;
    const char *line_end = memchr(buf, '\n', end);
    size_t line = (size_t)(line_end - buf);
    if (line && buf[line - 1] == '\r')
        line--;
    /* METHOD SP TARGET SP VERSION, single spaces, nothing else */
    const char *sp1 = memchr(buf, ' ', line);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', line - (size_t)(sp1 + 1 - buf)) : NULL;
    if (!sp1 || !sp2 || sp1 == buf || sp2 == sp1 + 1 || sp2 + 1 == buf + line ||
        memchr(sp2 + 1, ' ', line - (size_t)(sp2 + 1 - buf))) {
        req->status = 400;
        return 0;
    }
    const char *ver = sp2 + 1;
    size_t vlen = line - (size_t)(ver - buf);
    if (vlen != 8 || memcmp(ver, "HTTP/1.", 7) != 0 || ver[7] < '0' || ver[7] > '9') {
        req->status = vlen > 5 && memcmp(ver, "HTTP/", 5) == 0 ? 505 : 400;
        return 0;
    }
    const char *target = sp1 + 1;
    size_t tlen = (size_t)(sp2 - target);
    const char *q = memchr(target, '?', tlen);
    size_t plen = q ? (size_t)(q - target) : tlen;
    if (http_token_is(target, plen, "/metrics"))
        req->page = GG_EXPORTER_PAGE_METRICS;
    else if (http_token_is(target, plen, "/"))
        req->page = GG_EXPORTER_PAGE_INDEX;
    size_t mlen = (size_t)(sp1 - buf);
    if (http_token_is(buf, mlen, "HEAD"))
        req->head = true;
    else if (!http_token_is(buf, mlen, "GET"))
        req->status = 405;
    return 0;
}

static const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

void gg_exporter_http_response(gg_exporter_buf *out, int status, const char *content_type,
                               const char *body, size_t body_len, bool head)
{
    gg_exporter_buf_printf(out,
                           "HTTP/1.1 %d %s\r\n"
                           "Content-Type: %s\r\n"
                           "Content-Length: %zu\r\n"
                           "Cache-Control: no-store\r\n"
                           "%s"
                           "Connection: close\r\n\r\n",
                           status, http_reason(status), content_type, body_len,
                           status == 405 ? "Allow: GET, HEAD\r\n" : "");
    if (!head)
        gg_exporter_buf_add(out, body, body_len);
}
