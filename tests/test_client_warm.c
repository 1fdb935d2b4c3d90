/* SPDX-License-Identifier: MIT */
/* Graphs kept warm across a client restart: a client that goes away without
 * releasing its program leaves the program's graphs parked; a later client
 * of the same uid that defines the same program (with its own buffers)
 * adopts them, and each is updated in place on first use (an exec update,
 * not a new instantiate), computing on the new client's buffers. */
#include <math.h>
#include <stdlib.h>

#include "test_client_util.h"

enum { D = 64, ROWS = 4 };

static int wrong_rows(const tbuf *x, const tbuf *y, int batch)
{
    int bad = 0;
    for (int i = 0; i < batch * D; i++) {
        double v = x->f[i];
        bad += !t_close(y->f[i], t_silu2x_ref(v), 1e-5);
    }
    return bad;
}

static int parked_entries(const msgpack_object *st)
{
    const msgpack_object *cache = h_get(st, "cache");
    int n = 0;
    for (uint32_t i = 0; cache && i < cache->via.array.size; i++)
        n += h_get(&cache->via.array.ptr[i], "parked") &&
             h_get(&cache->via.array.ptr[i], "parked")->via.boolean;
    return n;
}

int main(void)
{
    h_init("test_client_warm", 300);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return h_finish();
    gg_client *w = gg_client_new();   /* watcher: stats */
    CHECK(gg_client_connect(w, d.sock, "watcher") == 0);

    h_section("a client leaves without releasing its program");
    gg_client *a = gg_client_new();
    tbuf ax, ay;
    uint64_t pa = 0;
    if (CHECK(gg_client_connect(a, d.sock, "first") == 0) && tbuf_new(a, &ax, ROWS * D) &&
        tbuf_new(a, &ay, ROWS * D)) {
        for (int i = 0; i < ROWS * D; i++)
            ax.f[i] = (float)((i * 13) % 17) / 4.0f - 2.0f;
        pa = t_define_silu2x(a, "warm", ax.id, ay.id, D);
        gg_replay_result r;
        for (int batch = 1; batch <= 4; batch *= 2) {
            CHECK(gg_client_replay(a, pa, batch, -1, &r) == 0 && r.path == GG_PATH_GRAPH &&
                  r.captured);
            CHECK_EQ(wrong_rows(&ax, &ay, batch), 0);
        }
    }
    gg_client_close(a);   /* no program.release: the client "crashed" */
    const msgpack_object *st = NULL;
    int parked = 0;
    for (int i = 0; i < 6000 && parked < 3; i++) {   /* up to 60 s */
        st = t_stats(w);
        parked = st ? parked_entries(st) : 0;
        if (parked < 3)
            h_sleep_ms(10);
    }
    CHECK_EQ(parked, 3);
    st = t_stats(w);
    if (st) {
        CHECK_EQ(h_getu(st, "graphs_cached"), 3);
        CHECK_EQ(h_getu(st, "capture_count"), 3);
        CHECK_EQ(h_getu(st, "instantiation_count"), 3);
    }

    h_section("a new client defines the same program and adopts the graphs");
    gg_client *b = gg_client_new();
    tbuf bx, by;
    if (CHECK(gg_client_connect(b, d.sock, "second") == 0) && tbuf_new(b, &bx, ROWS * D) &&
        tbuf_new(b, &by, ROWS * D)) {
        for (int i = 0; i < ROWS * D; i++)
            bx.f[i] = (float)((i * 7) % 11) / 3.0f - 1.5f;   /* other data, other buffers */
        uint64_t pb = t_define_silu2x(b, "warm", bx.id, by.id, D);
        st = t_stats(w);
        if (st) {
            CHECK_EQ(parked_entries(st), 0);
            CHECK_EQ(t_entries_of(st, pb), 3);
            const msgpack_object *e = t_entry(st, pb, 0, 2);
            CHECK(e && h_get(e, "parked") && !h_get(e, "parked")->via.boolean);
        }
        gg_replay_result r;
        CHECK(gg_client_replay(b, pb, 2, -1, &r) == 0);
        CHECK(r.path == GG_PATH_GRAPH);
        CHECKF(r.captured, "the first replay re-captures for the new buffers");
        CHECK_EQ(wrong_rows(&bx, &by, 2), 0);
        CHECK(gg_client_replay(b, pb, 2, -1, &r) == 0 && r.path == GG_PATH_GRAPH && !r.captured);
        CHECK_EQ(wrong_rows(&bx, &by, 2), 0);
        st = t_stats(w);
        if (st) {
            CHECKF(h_getu(st, "exec_updates") == 1, "the adopted graph was updated in place "
                   "(exec_updates %llu)", (unsigned long long)h_getu(st, "exec_updates"));
            CHECK_EQ(h_getu(st, "capture_count"), 4);
            /* the warm adoption captured, but instantiated nothing */
            CHECK_EQ(h_getu(st, "instantiation_count"), 3);
            const msgpack_object *e = t_entry(st, pb, 0, 2);
            CHECK(e && h_getu(e, "captures") == 2 && h_getu(e, "instantiations") == 1);
            CHECK_EQ(h_getu(st, "fallback_count"), 0);
        }

        h_section("a program of another structure adopts nothing");
        gg_program_def *p = gg_program_def_new("warm");
        int64_t s[2] = {GG_BATCH, D};
        static const int bk[] = {1, 2, 4};
        gg_program_def_buckets(p, 3, bk);
        gg_program_def_tensor(p, "x", bx.id, 0, "f32", 2, s);
        gg_program_def_tensor(p, "y", by.id, 0, "f32", 2, s);
        gg_program_def_op(p, "silu", "x", "y");
        uint64_t pc = 0;
        CHECK(gg_client_program_define(b, p, &pc) == 0);
        gg_program_def_free(p);
        st = t_stats(w);
        if (st)
            CHECK_EQ(t_entries_of(st, pc), 0);
        gg_client_program_release(b, pc);
        gg_client_program_release(b, pb);
    }
    h_section("an explicit release drops the graphs instead of parking them");
    gg_client_close(b);
    st = t_stats(w);
    for (int i = 0; i < 6000 && st && h_getu(st, "sessions_active") != 1; i++) {
        h_sleep_ms(10);
        st = t_stats(w);
    }
    if (st) {
        CHECK_EQ(parked_entries(st), 0);
        CHECK_EQ(h_getu(st, "graphs_cached"), 0);
    }
    tbuf_free(&ax);
    tbuf_free(&ay);
    tbuf_free(&bx);
    tbuf_free(&by);
    gg_client_close(w);
    CHECK_EQ(h_daemon_stop(&d), 0);
    return h_finish();
}
