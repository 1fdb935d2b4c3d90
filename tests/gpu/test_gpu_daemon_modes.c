/* SPDX-License-Identifier: MIT */
/* The real gfxgraphd on the hip backend in its other modes, each on a
 * daemon of its own, scenarios in client processes like
 * test_gpu_daemon.c (which describes the setup):
 *   hostfn         completion by host functions (GFXGRAPH_COMPLETION=hostfn):
 *                  the chain (f16) and the MLP (f32), every replay right
 *   faults         GFXGRAPH_FAULT=capture, instantiate, launch: every replay
 *                  is still right, path eager, fallback true, and the stats
 *                  count the fallbacks
 *
 * Without a device it prints SKIP and returns 77.  GG_TEST_VERBOSE=1 prints
 * every replay.  Ends with "N passed, M failed". */
#include "gpu_daemon_prog.h"
#include "gpu_daemon_util.h"

#include <stdio.h>
#include <string.h>

/* ---- scenarios (each runs in its own client process) ----------------------- */

typedef struct {
    const char *fault;
} fault_arg;

static void scn_fault(const void *arg)
{
    const fault_arg *fa = arg;
    if (gd_dev_init() < 0)
        return;
    gg_client *c = gd_connect("test_gpu_daemon/fault");
    if (!c)
        return;
    stats_t s0, s1;
    if (gd_get_stats(c, &s0) < 0) {
        gg_client_close(c);
        return;
    }
    gg_dtype dts[] = {GG_DT_F32, GG_DT_F16};
    run_counts rc = {0, 0, 0, 0};
    for (int k = 0; k < 2; k++) {
        prog_t p;
        const pspec *spec = k == 0 ? &P_CHAIN : &P_MLP;
        if (gd_prog_setup(c, &p, spec, dts[k], false) == 0) {
            /* prepare under a capture/instantiate fault reports failures */
            if (strcmp(fa->fault, "launch") != 0 && k == 0) {
                int ready = -1, failed = -1;
                int r = gg_client_program_prepare(c, p.prog, 0, NULL, -1, &ready, &failed);
                gd_check(r == 0 && ready == 0 && failed == NBK,
                         "GFXGRAPH_FAULT=%s: prepare reports %d failed, %d ready (want %d, 0): %s",
                         fa->fault, failed, ready, NBK, r ? gg_client_last_error(c) : "ok");
            }
            gd_prog_run(c, &p, EXPECT_FALLBACK, false, &rc, NULL);
        }
        gd_prog_free(c, &p);
    }
    if (gd_get_stats(c, &s1) == 0) {
        double fb = s1.fallback_count - s0.fallback_count;
        gd_check(fb == rc.fallback && rc.fallback == 2 * TOP,
                 "GFXGRAPH_FAULT=%s: stats fallback_count %g, replies with fallback %d (want %d)",
                 fa->fault, fb, rc.fallback, 2 * TOP);
        gd_check(s1.replay_count - s0.replay_count == 0,
                 "GFXGRAPH_FAULT=%s: no graph replays counted (got %g)", fa->fault,
                 s1.replay_count - s0.replay_count);
        gd_check(s1.eager_count - s0.eager_count == 2 * MAXR,
                 "GFXGRAPH_FAULT=%s: eager_count %g (want %d)", fa->fault,
                 s1.eager_count - s0.eager_count, 2 * MAXR);
    }
    gd_check_health(c, "after faults");
    gg_client_close(c);
}

static void scn_hostfn(const void *arg)
{
    (void)arg;
    if (gd_dev_init() < 0)
        return;
    gg_client *c = gd_connect("test_gpu_daemon/hostfn");
    if (!c)
        return;
    const pspec *specs[] = {&P_CHAIN, &P_MLP};
    gg_dtype dts[] = {GG_DT_F16, GG_DT_F32};
    for (int i = 0; i < 2; i++) {
        prog_t p;
        if (gd_prog_setup(c, &p, specs[i], dts[i], false) == 0)
            gd_prog_run(c, &p, EXPECT_NORMAL, false, NULL, NULL);
        gd_prog_free(c, &p);
    }
    gd_check_health(c, "hostfn completion");
    gg_client_close(c);
}

/* ---- main ---------------------------------------------------------------------- */

int main(void)
{
    int rc = gd_begin();
    if (rc)
        return rc;
    static const char *const env_hostfn[] = {"GFXGRAPH_COMPLETION=hostfn", NULL};
    if (gd_daemon_start(env_hostfn, "GFXGRAPH_COMPLETION=hostfn") == 0) {
        gd_run_child("completion by host functions", scn_hostfn, NULL, 180);
        gd_daemon_stop();
    }

    static const char *const faults[] = {"capture", "instantiate", "launch"};
    static fault_arg fargs[3];
    for (int i = 0; i < 3; i++) {
        char kv[64], name[96];
        snprintf(kv, sizeof kv, "GFXGRAPH_FAULT=%s", faults[i]);
        const char *env[] = {kv, NULL};
        fargs[i].fault = faults[i];
        snprintf(name, sizeof name, "fault injection: %s", kv);
        if (gd_daemon_start(env, kv) == 0) {
            gd_run_child(name, scn_fault, &fargs[i], 180);
            gd_daemon_stop();
        }
    }
    return gd_end();
}
