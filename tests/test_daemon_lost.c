/* SPDX-License-Identifier: MIT */
/* A lost device ends the daemon with its own exit code (3), so the service
 * manager restarts it: GFXGRAPH_FAULT=device makes every replay find the
 * device lost, as a sticky GPU error would.  The replay that saw it fails
 * with ENODEV, the daemon says why in its log and stops by itself. */
#include <stdlib.h>
#include <string.h>

#include "test_client_util.h"

#define D 8

int main(void)
{
    h_init("test_daemon_lost", 120);
    h_daemon d;
    static const char *const env[] = {"GFXGRAPH_FAULT=device", NULL};
    if (h_daemon_start(&d, NULL, env) < 0)
        return h_finish();
    gg_client *c = gg_client_new();
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    if (CHECK(gg_client_connect(c, d.sock, "lost") == 0) && tbuf_new(c, &x, 4 * D) &&
        tbuf_new(c, &y, 4 * D)) {
        uint64_t prog = t_define_silu2x(c, "lost", x.id, y.id, D);
        const msgpack_object *hr;
        if (CHECK(gg_client_call(c, "health", NULL, 0, &hr) == 0))
            CHECKF(h_get(hr, "ok") && h_get(hr, "ok")->via.boolean, "healthy before");
        tbuf_fill(&y, -3.0f);
        CHECK_FAILS(gg_client_replay(c, prog, 2, -1, NULL), c, "ENODEV");
        CHECK_CONTAINS(gg_client_last_error(c), "device lost");
        int bad = 0;
        for (int i = 0; i < 4 * D; i++)
            bad += y.f[i] != -3.0f;
        CHECKF(bad == 0, "nothing was written (%d changed)", bad);
    }
    int code = h_daemon_wait_exit(&d, 60000);
    CHECKF(code == 3, "the daemon stops by itself with exit code 3 (got %d)", code);
    char *log = h_read_file(d.log);
    CHECK_CONTAINS(log, "device lost");
    free(log);
    gg_client_close(c);
    tbuf_free(&x);
    tbuf_free(&y);
    if (code != 3)
        h_daemon_kill(&d);
    return h_finish();
}
