/* SPDX-License-Identifier: MIT */
/* One scrape: the daemon's `metrics` text and gfxgraph_up (exporter.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "exporter.h"
#include "internal.h"
#include "proto.h"

#define SCRAPE_UP_HEAD                                                                   \
    "# HELP gfxgraph_up Whether this scrape reached gfxgraphd and got its metrics (1) " \
    "or not (0).\n"                                                                      \
    "# TYPE gfxgraph_up gauge\n"

void gg_exporter_body(gg_exporter_buf *out, const char *daemon_text, size_t text_len,
                      const char *error)
{
    if (daemon_text) {
        gg_exporter_buf_add(out, daemon_text, text_len);
        if (text_len && daemon_text[text_len - 1] != '\n')
            gg_exporter_buf_add(out, "\n", 1);
        gg_exporter_buf_printf(out, SCRAPE_UP_HEAD "gfxgraph_up 1\n");
        return;
    }
    /* a comment line: whoever reads the page by hand sees why */
    gg_exporter_buf_printf(out, "# gfxgraphd not reachable: ");
    for (const char *p = error && *error ? error : "unknown error"; *p; p++) {
        char c = (*p == '\n' || *p == '\r') ? ' ' : *p;
        gg_exporter_buf_add(out, &c, 1);
    }
    gg_exporter_buf_printf(out, "\n" SCRAPE_UP_HEAD "gfxgraph_up 0\n");
}

int gg_exporter_scrape(const char *socket_path, int timeout_ms, gg_exporter_buf *out,
                       char *err, size_t errlen)
{
    gg_client *c = gg_client_new();
    if (!c) {
        snprintf(err, errlen, "out of memory");
        gg_exporter_body(out, NULL, 0, err);
        return 0;
    }
    gg_client_set_timeout(c, timeout_ms);
    int rc = gg_client_connect(c, socket_path, "gfxgraph-exporter");
    const msgpack_object *r = NULL;
    if (rc == 0)
        rc = gg_client_call(c, "metrics", NULL, 0, &r);
    const msgpack_object *t = rc == 0 ? proto_map_get(r, "text") : NULL;
    if (rc == 0 && (!t || t->type != MSGPACK_OBJECT_STR)) {
        rc = -EPROTO;
        snprintf(err, errlen, "the metrics answer has no text");
    } else if (rc < 0) {
        const char *code = gg_client_last_error_code(c);
        snprintf(err, errlen, "%s (%s)", gg_client_last_error(c),
                 *code ? code : proto_errno_code(rc));
    }
    if (rc == 0)
        gg_exporter_body(out, t->via.str.ptr, t->via.str.size, NULL);
    else
        gg_exporter_body(out, NULL, 0, err);
    gg_client_close(c);
    return rc == 0;
}
