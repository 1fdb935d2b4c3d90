/* SPDX-License-Identifier: MIT */
/* Decode steps through the daemon (cpu backend): i32 buffer tensors, a view
 * ([B, Hkv*Dh] read as [B, Hkv, Dh]) and cache_write at a batch of 3 in
 * bucket 4: the real batch reaches the kernels at run time, so cache row 3
 * (padding) is never written, on the first (captured) replay and on graph
 * hits after it; the same graph serves every step as positions change. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "test_client_util.h"

#define S 6
#define HKV 2
#define DH 4
#define ROW (HKV * DH)
#define TOP 4
#define SENT -7.0f

static void test_padding(const h_daemon *d)
{
    gg_client *c = gg_client_new();
    if (!CHECKF(gg_client_connect(c, d->sock, "decode") == 0, "connect: %s",
                gg_client_last_error(c)))
        return;
    tbuf x, pos, cache;
    if (!tbuf_new(c, &x, TOP * ROW) || !tbuf_new(c, &pos, TOP) ||
        !tbuf_new(c, &cache, TOP * S * ROW))
        goto out;
    gg_program_def *pd = gg_program_def_new("cache-pad");
    const int buckets[] = {1, TOP};
    int64_t dx[] = {GG_BATCH, ROW}, dv[] = {GG_BATCH, HKV, DH}, dp[] = {GG_BATCH},
            dc[] = {GG_BATCH, S, HKV, DH};
    gg_program_def_buckets(pd, 2, buckets);
    gg_program_def_tensor(pd, "x", x.id, 0, "f32", 2, dx);
    gg_program_def_view(pd, "xv", "x", 3, dv);
    gg_program_def_tensor(pd, "pos", pos.id, 0, "i32", 1, dp);
    gg_program_def_tensor(pd, "cache", cache.id, 0, "f32", 4, dc);
    gg_program_def_op(pd, "cache_write", "xv,pos", "cache");
    uint64_t prog = 0;
    int rc = gg_client_program_define(c, pd, &prog);
    gg_program_def_free(pd);
    if (!CHECKF(rc == 0, "define: %s", gg_client_last_error(c)))
        goto out;
    tbuf_fill(&cache, SENT);
    int32_t *p = (int32_t *)pos.f;
    for (int step = 0; step < 3; step++) {
        for (int r = 0; r < TOP; r++) {
            p[r] = r == 3 ? step : step + r % 2;   /* row 3 holds a valid position */
            for (int i = 0; i < ROW; i++)
                x.f[r * ROW + i] = (float)(100 * step + 10 * r + i);
        }
        gg_replay_result res;
        rc = gg_client_replay(c, prog, 3, 0, &res);
        if (!CHECKF(rc == 0, "replay step %d: %s", step, gg_client_last_error(c)))
            goto out;
        bool ok = true;
        for (int r = 0; r < 3; r++)
            for (int i = 0; i < ROW; i++)
                ok &= cache.f[(r * S + p[r]) * ROW + i] == x.f[r * ROW + i];
        CHECKF(ok, "step %d (%s): rows 0..2 written at their positions", step,
               res.path == GG_PATH_GRAPH ? "graph" : "eager");
        bool pad = true;
        for (int i = 0; i < S * ROW; i++)
            pad &= cache.f[3 * S * ROW + i] == SENT;
        CHECKF(pad, "step %d: cache row 3 (padding of bucket 4) untouched", step);
    }
    /* a view that does not keep the element count is refused */
    pd = gg_program_def_new("bad-view");
    gg_program_def_buckets(pd, 2, buckets);
    int64_t dbad[] = {GG_BATCH, 3, DH};
    gg_program_def_tensor(pd, "x", x.id, 0, "f32", 2, dx);
    gg_program_def_view(pd, "xv", "x", 3, dbad);
    gg_program_def_tensor(pd, "y", x.id, 0, "f32", 2, dx);
    gg_program_def_op(pd, "copy", "x", "y");
    rc = gg_client_program_define(c, pd, &prog);
    gg_program_def_free(pd);
    CHECKF(rc == -EINVAL && strstr(gg_client_last_error(c), "element count"),
           "a view with another element count is refused: %s", gg_client_last_error(c));
out:
    tbuf_free(&x);
    tbuf_free(&pos);
    tbuf_free(&cache);
    gg_client_close(c);
}

int main(void)
{
    h_init("test_decode_daemon", 300);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_padding(&d);
        h_daemon_stop(&d);
    }
    return h_finish();
}
