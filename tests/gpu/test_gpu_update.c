/* SPDX-License-Identifier: MIT */
/* Graph update on the GPU: program.rebind and graphs kept warm across a
 * client restart both end in hipGraphExecUpdate of an instantiated graph
 * (cudaGraphExecUpdate on NVIDIA).  Each client runs in its own process
 * (IPC handles cannot be opened by the process that made them, and the GPU
 * runtime must not be touched before fork), against gfxgraphd --backend hip.
 * SKIP (77) when the hip backend does not start (no device).
 *
 * The replays run on the daemon's stream, in another process: nothing
 * orders them after this process's copies and memsets but the copies'
 * completion.  A pageable hipMemcpy may return with its last DMA still in
 * flight and hipMemset returns at once, so each is followed by a
 * hipDeviceSynchronize before the daemon is asked to read or write the
 * buffer (as gpu_daemon_prog.c and test_gpu_fastpath.c do). */
#include <math.h>
#include <stdlib.h>

#include "gg_hip.h"
#include "test_client_util.h"

enum { D = 256, ROWS = 4 };

static const char *g_sock;

typedef struct {
    float *dev;
    uint64_t id;
} dbuf;

static bool dbuf_new(gg_client *c, dbuf *b, float seed)
{
    float host[ROWS * D];
    for (int i = 0; i < ROWS * D; i++)
        host[i] = (float)((i * 13 + (int)(seed * 7)) % 23) / 5.0f - 2.0f + seed;
    return CHECK(hipMalloc((void **)&b->dev, sizeof(host)) == hipSuccess) &&
           CHECK(hipMemcpy(b->dev, host, sizeof(host), hipMemcpyHostToDevice) == hipSuccess) &&
           CHECK(hipDeviceSynchronize() == hipSuccess) &&
           CHECKF(gg_client_buffer_register_device(c, b->dev, sizeof(host), &b->id) == 0,
                  "register_device: %s", gg_client_last_error(c));
}

/* replay and compare y with silu(x)*2+x over the real rows */
static void replay_check(gg_client *c, uint64_t prog, int batch, const dbuf *x, const dbuf *y,
                         bool want_captured, const char *what)
{
    float hx[ROWS * D], hy[ROWS * D];
    /* NaN: unwritten rows show; landed before the replay writes y */
    if (!CHECKF(hipMemset(y->dev, 0xff, sizeof(hy)) == hipSuccess &&
                    hipDeviceSynchronize() == hipSuccess,
                "%s: poison y", what))
        return;
    gg_replay_result r;
    if (!CHECKF(gg_client_replay(c, prog, batch, -1, &r) == 0, "%s: replay: %s", what,
                gg_client_last_error(c)))
        return;
    CHECKF(r.path == GG_PATH_GRAPH, "%s: path graph (%s)", what, r.reason);
    CHECKF(r.captured == want_captured, "%s: captured %d", what, r.captured);
    /* the replay has completed (a synchronous answer): these read its result */
    if (!CHECKF(hipMemcpy(hx, x->dev, sizeof(hx), hipMemcpyDeviceToHost) == hipSuccess &&
                    hipMemcpy(hy, y->dev, sizeof(hy), hipMemcpyDeviceToHost) == hipSuccess,
                "%s: copy x and y back", what))
        return;
    int bad = 0, first = -1;
    for (int i = 0; i < batch * D; i++)
        if (!t_close(hy[i], t_silu2x_ref(hx[i]), 1e-4)) {
            bad++;
            if (first < 0)
                first = i;
        }
    const int fa = first < 0 ? 0 : first;
    CHECKF(bad == 0, "%s: %d wrong values, the first at %d: y %g, want %g for x %g", what, bad,
           first, (double)hy[fa], t_silu2x_ref(hx[fa]), (double)hx[fa]);
}

static uint64_t stat_u(gg_client *c, const char *key)
{
    const msgpack_object *st;
    return gg_client_call(c, "stats", NULL, 0, &st) == 0 ? h_getu(st, key) : UINT64_MAX;
}

/* child 1: capture, rebind (exec update), then leave without releasing */
static void client_first(void)
{
    gg_client *c = gg_client_new();
    dbuf x1, x2, y;
    if (!CHECK(gg_client_connect(c, g_sock, "first") == 0) || !dbuf_new(c, &x1, 0.0f) ||
        !dbuf_new(c, &x2, 0.5f) || !dbuf_new(c, &y, 0.0f))
        return;
    uint64_t p = t_define_silu2x(c, "update", x1.id, y.id, D);
    for (int b = 1; b <= 4; b *= 2)
        replay_check(c, p, b, &x1, &y, true, "first capture");
    replay_check(c, p, 2, &x1, &y, false, "replay");
    uint64_t up0 = stat_u(c, "exec_updates");
    CHECKF(gg_client_program_rebind(c, p, "x", x2.id, 0) == 0, "rebind: %s",
           gg_client_last_error(c));
    replay_check(c, p, 2, &x2, &y, true, "after rebind");
    replay_check(c, p, 2, &x2, &y, false, "after rebind, again");
    CHECKF(stat_u(c, "exec_updates") == up0 + 1, "rebind updated the graph in place");
    gg_client_close(c);   /* no release: the graphs are parked */
}

/* child 2: the same program on new memory adopts the parked graphs */
static void client_second(void)
{
    gg_client *c = gg_client_new();
    dbuf x, y;
    if (!CHECK(gg_client_connect(c, g_sock, "second") == 0) || !dbuf_new(c, &x, 1.0f) ||
        !dbuf_new(c, &y, 0.0f))
        return;
    uint64_t up0 = stat_u(c, "exec_updates"), cap0 = stat_u(c, "capture_count");
    uint64_t p = t_define_silu2x(c, "update", x.id, y.id, D);
    replay_check(c, p, 4, &x, &y, true, "adopted graph, first use");
    replay_check(c, p, 4, &x, &y, false, "adopted graph, again");
    CHECKF(stat_u(c, "exec_updates") == up0 + 1, "the adopted graph was updated in place");
    CHECK_EQ(stat_u(c, "capture_count"), cap0 + 1);
    CHECK_EQ(stat_u(c, "fallback_count"), 0);
    gg_client_program_release(c, p);
    gg_client_close(c);
}

/* child 3 (daemon with exec-update-limit=2): after two updates in place the
 * third rebind instantiates afresh, and the count starts again */
static void client_limit(void)
{
    gg_client *c = gg_client_new();
    dbuf x1, x2, y;
    if (!CHECK(gg_client_connect(c, g_sock, "limit") == 0) || !dbuf_new(c, &x1, 0.25f) ||
        !dbuf_new(c, &x2, 0.75f) || !dbuf_new(c, &y, 0.0f))
        return;
    uint64_t p = t_define_silu2x(c, "limit", x1.id, y.id, D);
    replay_check(c, p, 2, &x1, &y, true, "first capture");
    uint64_t up0 = stat_u(c, "exec_updates");
    for (int k = 0; k < 4; k++) {
        const dbuf *x = k % 2 ? &x1 : &x2;
        CHECKF(gg_client_program_rebind(c, p, "x", x->id, 0) == 0, "rebind %d: %s", k,
               gg_client_last_error(c));
        replay_check(c, p, 2, x, &y, true, "after a rebind");
    }
    CHECKF(stat_u(c, "exec_updates") == up0 + 3,
           "updates 1, 2, then a new instantiate, then update 1 again (%llu updates)",
           (unsigned long long)(stat_u(c, "exec_updates") - up0));
    gg_client_program_release(c, p);
    gg_client_close(c);
}

int main(void)
{
    h_init("test_gpu_update", 300);
    h_daemon d;
    if (h_daemon_start_hip(&d, NULL, NULL) < 0)
        return 77;
    g_sock = d.sock;
    h_section("rebind: the graph is updated in place");
    h_in_child("first client", client_first);
    h_section("a restarted client adopts the parked graphs");
    h_in_child("second client", client_second);
    CHECK_EQ(h_daemon_stop(&d), 0);

    h_section("exec-update-limit bounds the updates of one instantiated graph");
    static const char *const largs[] = {"--set", "exec-update-limit=2", NULL};
    if (CHECK(h_daemon_start_hip(&d, largs, NULL) == 0)) {
        g_sock = d.sock;
        h_in_child("limit client", client_limit);
        CHECK_EQ(h_daemon_stop(&d), 0);
    }
    return h_finish();
}
