/* SPDX-License-Identifier: MIT */
/* vram-cap held against the device's real memory at capture time, on the
 * cpu backend with injected sizes (GFXGRAPH_CPU_MEMORY:
 * TOTAL:USED, the daemon's scratch counted against the rest as a GPU
 * runtime counts it):
 *  - hello and health report the injected total and free memory;
 *  - captures that keep the memory in use within vram-cap x total go ahead;
 *  - one that would pass it evicts the least recently used cached graphs
 *    to make room (a parked program's arena goes with its last graph):
 *    that replay runs eager (fallback, the reason names the cap and the
 *    figures), the next one captures;
 *  - when the memory others use leaves no room (the old estimate, the
 *    cache's own bytes, would have let it through), the entry fails and is
 *    served eagerly with the reason. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_client_util.h"

enum { D = 262144 };    /* a row of f32: 1 MiB */

/* y = 2x through a scratch tensor of [batch, D] (its arena: 4 MiB, for
 * bucket 4); copies more of y into y make another structure */
static uint64_t define_big(gg_client *c, const char *name, uint64_t x, uint64_t y, int copies)
{
    gg_program_def *p = gg_program_def_new(name);
    int64_t s[2] = {GG_BATCH, D};
    gg_program_def_buckets(p, 3, (int[]){1, 2, 4});
    gg_program_def_tensor(p, "x", x, 0, "f32", 2, s);
    gg_program_def_tensor(p, "y", y, 0, "f32", 2, s);
    gg_program_def_scratch(p, "a", "f32", 2, s);
    gg_program_def_op(p, "scale", "x", "a");
    gg_program_def_attr_f(p, "scale", 2.0);
    gg_program_def_op(p, "copy", "a", "y");
    for (int i = 0; i < copies; i++)
        gg_program_def_op(p, "copy", "a", "y");
    uint64_t id = 0;
    if (!CHECKF(gg_client_program_define(c, p, &id) == 0, "define: %s", gg_client_last_error(c)))
        id = 0;
    gg_program_def_free(p);
    return id;
}

/* health's vram_free_mb, once it reads want (up to 60 s: releases run on a
 * worker) */
static uint64_t free_mb(gg_client *c, uint64_t want)
{
    uint64_t v = UINT64_MAX;
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end;) {
        const msgpack_object *r;
        if (gg_client_call(c, "health", NULL, 0, &r) == 0)
            v = h_getu(r, "vram_free_mb");
        if (v == want)
            break;
        h_sleep_ms(10);
    }
    return v;
}

static bool replay(gg_client *c, uint64_t prog, int batch, gg_replay_result *res, tbuf *x,
                   tbuf *y)
{
    memset(y->f, 0, y->size);
    if (!CHECKF(gg_client_replay(c, prog, batch, -1, res) == 0, "replay %d: %s", batch,
                gg_client_last_error(c)))
        return false;
    bool right = true;
    for (size_t i = 0; i < (size_t)batch * D; i += 4099)
        right = right && y->f[i] == 2 * x->f[i];
    return CHECKF(right, "replay %d: y = 2x", batch);
}

static void test_evicts_for_room(void)
{
    h_section("32 MiB device, 10 used by others, vram-cap 0.5: room made by eviction");
    const char *env[] = {"GFXGRAPH_CPU_MEMORY=32M:10M", NULL};
    const char *args[] = {"--set", "vram-cap=0.5", "--backend", "cpu", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, env) == 0))
        return;
    gg_client *a = t_connect(&d, "vram"), *c = NULL;
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    gg_replay_result res;
    if (!a || !tbuf_new(a, &x, 4 * D) || !tbuf_new(a, &y, 4 * D))
        goto out;
    for (size_t i = 0; i < 4 * (size_t)D; i++)
        x.f[i] = (float)(i % 13) - 6.0f;
    CHECK_EQ(free_mb(a, 22), 22);
    /* a first client's program: its arena (4 MiB) and graph, 14 MiB in use */
    uint64_t first = define_big(a, "first", x.id, y.id, 0);
    if (first && replay(a, first, 4, &res, &x, &y))
        CHECK(res.path == GG_PATH_GRAPH && res.captured);
    CHECK_EQ(free_mb(a, 18), 18);
    /* it leaves without releasing it: the graph is parked, with its arena */
    gg_client_close(a);
    a = NULL;
    c = t_connect(&d, "vram");
    if (!c)
        goto out;
    const msgpack_object *st = NULL;
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end;) {
        st = t_stats(c);
        if (!st || h_getu(st, "sessions_active") == 1)
            break;
        h_sleep_ms(10);
    }
    tbuf_free(&x);
    tbuf_free(&y);
    if (!tbuf_new(c, &x, 4 * D) || !tbuf_new(c, &y, 4 * D))
        goto out;
    for (size_t i = 0; i < 4 * (size_t)D; i++)
        x.f[i] = (float)(i % 11) - 5.0f;
    /* another structure, so nothing is adopted: its own arena takes the
     * memory in use to 18 MiB, past 16, before its capture */
    uint64_t second = define_big(c, "second", x.id, y.id, 1);
    if (second && replay(c, second, 4, &res, &x, &y)) {
        CHECK(res.path == GG_PATH_EAGER && res.fallback && !res.captured);
        CHECK_CONTAINS(res.reason, "VRAM cap: 18.0 MiB of 32.0 MiB of device memory in use and "
                                   "this graph needs 3.0 KiB more: past vram-cap 0.50 (16.0 MiB)");
    }
    /* the parked graph went, and its arena with it */
    st = t_stats(c);
    char b[32];
    if (st) {
        CHECK_EQ(h_getu(st, "evictions"), 1);
        CHECK_EQ(h_getu(st, "graphs_cached"), 0);
        CHECK_EQ(h_getu(st, "fallback_count"), 1);
        const msgpack_object *e = t_entry(st, second, 0, 4);
        CHECK(e && strcmp(h_gets(e, "state", b, sizeof b), "empty") == 0);
    }
    CHECK_EQ(free_mb(c, 18), 18);
    /* now 14 MiB in use: the graph */
    if (second && replay(c, second, 4, &res, &x, &y))
        CHECK(res.path == GG_PATH_GRAPH && res.captured);
    if (second && replay(c, second, 3, &res, &x, &y))
        CHECK(res.path == GG_PATH_GRAPH && !res.captured);
out:
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(a);
    gg_client_close(c);
    h_daemon_stop(&d);
}

static void test_no_room(void)
{
    h_section("32 MiB device, 20 used by others, vram-cap 0.5: no room, served eagerly");
    const char *env[] = {"GFXGRAPH_CPU_MEMORY=32M:20M", NULL};
    const char *args[] = {"--set", "vram-cap=0.5", "--backend", "cpu", NULL};
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, args, env) == 0))
        return;
    gg_client *c = t_connect(&d, "vram");
    tbuf x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    if (!c || !tbuf_new(c, &x, 4 * D) || !tbuf_new(c, &y, 4 * D))
        goto out;
    for (size_t i = 0; i < 4 * (size_t)D; i++)
        x.f[i] = (float)(i % 7);
    const msgpack_object *r;
    if (CHECK(gg_client_call(c, "health", NULL, 0, &r) == 0)) {
        CHECK_EQ(h_getu(r, "vram_total_mb"), 32);
        CHECK_EQ(h_getu(r, "vram_free_mb"), 12);
    }
    uint64_t prog = define_big(c, "big", x.id, y.id, 0);
    gg_replay_result res;
    for (int i = 0; prog && i < 2; i++)
        if (replay(c, prog, 1, &res, &x, &y)) {
            CHECK(res.path == GG_PATH_EAGER && res.fallback && !res.captured);
            /* 20 + the arena's 4 */
            CHECK_CONTAINS(res.reason, "VRAM cap: 24.0 MiB of 32.0 MiB of device memory in use");
        }
    int ready = -1, failed = -1;
    CHECK(prog && gg_client_program_prepare(c, prog, 0, NULL, -1, &ready, &failed) == 0 &&
          ready == 0 && failed == 3);
    const msgpack_object *st = t_stats(c);
    char b[160];
    if (st) {
        const msgpack_object *e = t_entry(st, prog, 0, 1);
        CHECK(e && strcmp(h_gets(e, "state", b, sizeof b), "failed") == 0);
        CHECK_CONTAINS(e ? h_gets(e, "reason", b, sizeof b) : "", "VRAM cap");
        CHECK_EQ(h_getu(st, "capture_count"), 0);
        CHECK_EQ(h_getu(st, "graphs_cached"), 0);
        CHECK_EQ(h_getu(st, "fallback_count"), 2);
    }
out:
    tbuf_free(&x);
    tbuf_free(&y);
    gg_client_close(c);
    h_daemon_stop(&d);
}

static void test_bad_injection(void)
{
    h_section("GFXGRAPH_CPU_MEMORY that does not hold: the daemon does not start, and says why");
    char dir[] = "/tmp/gg-vram-XXXXXX", sock[128];
    if (!CHECK(mkdtemp(dir)))
        return;
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    const char *env[] = {"GFXGRAPH_CPU_MEMORY=32M:64M", NULL};
    const char *args[] = {"--backend", "cpu", NULL};
    h_daemon d;
    memset(&d, 0, sizeof d);
    snprintf(d.log, sizeof d.log, "%s/d.log", dir);
    if (CHECK(h_daemon_spawn(&d, sock, args, env) == 0)) {
        int code = h_daemon_wait_exit(&d, 60000);
        CHECK_EQ(code, 1);
        if (code == -ETIMEDOUT)
            h_daemon_kill(&d);
        char *l = h_read_file(d.log);
        CHECK_CONTAINS(l, "GFXGRAPH_CPU_MEMORY='32M:64M'");
        free(l);
    }
    unlink(d.log);
    unlink(sock);
    rmdir(dir);
}

int main(void)
{
    h_init("test_vram_cap", 280);
    test_evicts_for_room();
    test_no_room();
    test_bad_injection();
    return h_finish();
}
