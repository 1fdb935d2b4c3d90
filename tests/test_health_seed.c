/* SPDX-License-Identifier: MIT */
/* The Python API's keys in health and stats: health answers
 * `summary`, the one-line `details` string of gfxgraph's Python API, beside today's `details`
 * map (unchanged), and `enabled_at` (Unix time graphs were enabled: the
 * daemon's start), which stats answers too; with graphs off (GFXGRAPH=0)
 * enabled_at is nil. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test_daemon_proto_util.h"

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check_daemon(const char *const *env, bool graphs)
{
    double t0 = wall_now();
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, NULL, env) == 0))
        return;
    double t1 = wall_now();
    h_conn c;
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        const msgpack_object *r, *err;
        char s[128];
        double health_at = 0;
        if (CHECK(h_conn_call(&c, 1, "health", NULL, 0, &r, &err) == 1 && !err)) {
            CHECK(h_get(r, "ok") && h_get(r, "ok")->via.boolean);
            CHECK_STR(h_gets(r, "summary", s, sizeof s), "Graph capture/replay OK, output verified");
            CHECK(h_is(r, "details", MSGPACK_OBJECT_MAP));
            CHECK_STR(h_gets(r, "details.smoke_test", s, sizeof s), "passed");
            if (graphs) {
                health_at = h_getf(r, "enabled_at");
                CHECKF(health_at >= t0 - 1 && health_at <= t1 + 1,
                       "health enabled_at %.3f is the daemon's start (%.3f .. %.3f)", health_at,
                       t0, t1);
            } else {
                CHECK(h_is(r, "enabled_at", MSGPACK_OBJECT_NIL));
            }
        }
        if (CHECK(h_conn_call(&c, 2, "stats", NULL, 0, &r, &err) == 1 && !err)) {
            if (graphs) {
                double at = h_getf(r, "enabled_at");
                CHECKF(at > health_at - 0.1 && at < health_at + 0.1,
                       "stats enabled_at %.3f is health's %.3f", at, health_at);
            } else {
                CHECK(h_is(r, "enabled_at", MSGPACK_OBJECT_NIL));
            }
        }
        h_conn_close(&c);
    }
    h_daemon_stop(&d);
}

int main(void)
{
    h_init("test_health_seed", 120);
    h_section("health: summary beside the details map, enabled_at; stats: enabled_at");
    check_daemon(NULL, true);
    h_section("GFXGRAPH=0: enabled_at is nil");
    const char *off[] = {"GFXGRAPH=0", NULL};
    check_daemon(off, false);
    return h_finish();
}
