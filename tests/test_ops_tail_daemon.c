/* SPDX-License-Identifier: MIT */
/* The data-movement, matmul and attention ops through the daemon (cpu
 * backend): one program chains embedding (ids [2, 3]), strided_copy (a
 * transpose of a 1-D view of its output), bmm, cat, index_copy into a cache
 * and sdpa (causal, over a 4-D view), every result checked against values
 * computed here in double; replayed twice with other ids and positions, the
 * first replay capturing the graph and the second a graph hit that must see
 * the new inputs.  index_copy leaves the cache rows it does not index
 * alone. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_client_util.h"

#define B 2
#define L 3
#define V 11
#define D 4
#define SC 5        /* cache rows */
#define SENT -7.0f

static double rel_err(const float *got, const double *want, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static void test_chain(const h_daemon *d)
{
    gg_client *c = t_connect(d, "ops-tail");
    if (!c)
        return;
    tbuf ids = {0}, tab = {0}, e = {0}, et = {0}, s = {0}, cc = {0}, pos = {0}, cache = {0},
         y = {0};
    bool ok = tbuf_new(c, &ids, B * L) && tbuf_new(c, &tab, V * D) && tbuf_new(c, &e, B * L * D) &&
              tbuf_new(c, &et, B * D * L) && tbuf_new(c, &s, B * L * L) &&
              tbuf_new(c, &cc, B * L * 2 * L) && tbuf_new(c, &pos, L) &&
              tbuf_new(c, &cache, B * SC * 2 * L) && tbuf_new(c, &y, B * L * D);
    if (!ok)
        goto out;
    gg_program_def *pd = gg_program_def_new("ops-tail");
    int64_t d_ids[] = {B, L}, d_tab[] = {V, D}, d_e[] = {B, L, D}, d_ev[] = {B * L * D},
            d_et[] = {B, D, L}, d_s[] = {B, L, L}, d_c[] = {B, L, 2 * L}, d_pos[] = {L},
            d_cache[] = {B, SC, 2 * L}, d_q[] = {B, 1, L, D};
    gg_program_def_tensor(pd, "ids", ids.id, 0, "i32", 2, d_ids);
    gg_program_def_tensor(pd, "table", tab.id, 0, "f32", 2, d_tab);
    gg_program_def_tensor(pd, "e", e.id, 0, "f32", 3, d_e);
    gg_program_def_view(pd, "ev", "e", 1, d_ev);
    gg_program_def_view(pd, "q", "e", 4, d_q);
    gg_program_def_tensor(pd, "et", et.id, 0, "f32", 3, d_et);
    gg_program_def_tensor(pd, "s", s.id, 0, "f32", 3, d_s);
    gg_program_def_tensor(pd, "c", cc.id, 0, "f32", 3, d_c);
    gg_program_def_tensor(pd, "pos", pos.id, 0, "i32", 1, d_pos);
    gg_program_def_tensor(pd, "cache", cache.id, 0, "f32", 3, d_cache);
    gg_program_def_tensor(pd, "y", y.id, 0, "f32", 4, d_q);
    gg_program_def_op(pd, "embedding", "ids,table", "e");
    gg_program_def_op(pd, "strided_copy", "ev", "et");   /* et[b][d][l] = e[b][l][d] */
    gg_program_def_attr_f(pd, "s0", L * D);
    gg_program_def_attr_f(pd, "s1", 1);
    gg_program_def_attr_f(pd, "s2", D);
    gg_program_def_op(pd, "bmm", "e,et", "s");
    gg_program_def_op(pd, "cat", "s,s", "c");
    gg_program_def_attr_f(pd, "dim", -1);
    gg_program_def_op(pd, "index_copy", "c,pos", "cache");
    gg_program_def_attr_f(pd, "dim", 1);
    gg_program_def_op(pd, "sdpa", "q,q,q", "y");
    gg_program_def_attr_f(pd, "causal", 1);
    uint64_t prog = 0;
    int rc = gg_client_program_define(c, pd, &prog);
    gg_program_def_free(pd);
    if (!CHECKF(rc == 0, "define: %s", gg_client_last_error(c)))
        goto out;
    for (int i = 0; i < V * D; i++)
        tab.f[i] = (float)(0.25 * ((i * 7) % 13) - 1.5);
    tbuf_fill(&cache, SENT);
    int32_t *idv = (int32_t *)ids.f, *pv = (int32_t *)pos.f;
    for (int step = 0; step < 2; step++) {
        const int32_t ids_at[2][B * L] = {{3, 0, 10, 7, 11, 2}, {5, 5, -1, 9, 1, 4}};
        const int32_t pos_at[2][L] = {{4, 0, 9}, {2, 7, 3}};
        memcpy(idv, ids_at[step], sizeof ids_at[step]);
        memcpy(pv, pos_at[step], sizeof pos_at[step]);
        gg_replay_result res;
        rc = gg_client_replay(c, prog, 1, 0, &res);
        if (!CHECKF(rc == 0, "replay %d: %s", step, gg_client_last_error(c)))
            goto out;
        if (step == 0)
            CHECKF(res.captured && !res.fallback, "replay 0 captured the graph (captured %d, "
                   "fallback %d: %s)", res.captured, res.fallback, res.reason);
        else
            CHECKF(res.path == GG_PATH_GRAPH && !res.captured && !res.fallback,
                   "replay 1 is a graph hit (path %d, captured %d, fallback %d: %s)", res.path,
                   res.captured, res.fallback, res.reason);
        /* the references, in double */
        double we[B * L * D], wet[B * D * L], ws[B * L * L], wc[B * L * 2 * L], wy[B * L * D];
        for (int r = 0; r < B * L; r++)
            for (int k = 0; k < D; k++)
                we[r * D + k] = idv[r] >= 0 && idv[r] < V ? tab.f[idv[r] * D + k] : 0.0;
        for (int b = 0; b < B; b++)
            for (int k = 0; k < D; k++)
                for (int l = 0; l < L; l++)
                    wet[(b * D + k) * L + l] = we[(b * L + l) * D + k];
        for (int b = 0; b < B; b++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < L; j++) {
                    double acc = 0;
                    for (int k = 0; k < D; k++)
                        acc += we[(b * L + i) * D + k] * we[(b * L + j) * D + k];
                    ws[(b * L + i) * L + j] = acc;
                    wc[(b * L + i) * 2 * L + j] = acc;
                    wc[(b * L + i) * 2 * L + L + j] = acc;
                }
        for (int b = 0; b < B; b++)
            for (int i = 0; i < L; i++) {
                const double *qi = we + (b * L + i) * D;
                double sc[L], mx = -INFINITY, tot = 0;
                for (int j = 0; j <= i; j++) {   /* causal, L == S */
                    sc[j] = 0;
                    for (int k = 0; k < D; k++)
                        sc[j] += qi[k] * we[(b * L + j) * D + k];
                    sc[j] /= sqrt((double)D);
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int k = 0; k < D; k++)
                    wy[(b * L + i) * D + k] = 0;
                for (int j = 0; j <= i; j++) {
                    const double p = exp(sc[j] - mx);
                    tot += p;
                    for (int k = 0; k < D; k++)
                        wy[(b * L + i) * D + k] += p * we[(b * L + j) * D + k];
                }
                for (int k = 0; k < D; k++)
                    wy[(b * L + i) * D + k] /= tot;
            }
        CHECKF(rel_err(e.f, we, B * L * D) == 0, "replay %d: embedding", step);
        CHECKF(rel_err(et.f, wet, B * L * D) == 0, "replay %d: strided_copy (transpose)", step);
        CHECKF(rel_err(s.f, ws, B * L * L) < 1e-6, "replay %d: bmm", step);
        CHECKF(rel_err(cc.f, wc, B * L * 2 * L) < 1e-6, "replay %d: cat", step);
        CHECKF(rel_err(y.f, wy, B * L * D) < 1e-5, "replay %d: sdpa (causal)", step);
        /* the cache: the rows the positions name (in range) hold c's rows;
         * the others keep what they had (the sentinel, or replay 0's row) */
        bool cache_ok = true;
        for (int b = 0; b < B; b++)
            for (int r = 0; r < SC; r++) {
                int from = -1, earlier = -1;
                for (int i = 0; i < L; i++) {
                    if (pv[i] == r)
                        from = i;
                    if (step == 1 && pos_at[0][i] == r)
                        earlier = i;
                }
                for (int k = 0; k < 2 * L; k++) {
                    const float got = cache.f[(b * SC + r) * 2 * L + k];
                    if (from >= 0)
                        cache_ok &= got == (float)wc[(b * L + from) * 2 * L + k];
                    else if (earlier < 0)
                        cache_ok &= got == SENT;
                }
            }
        CHECKF(cache_ok, "replay %d: index_copy wrote the named rows and only those", step);
    }
    /* a node the rules refuse is refused at define time, with the reason */
    pd = gg_program_def_new("ops-tail-bad");
    gg_program_def_tensor(pd, "e", e.id, 0, "f32", 3, d_e);
    gg_program_def_view(pd, "ev", "e", 1, d_ev);
    gg_program_def_tensor(pd, "et", et.id, 0, "f32", 3, d_et);
    gg_program_def_op(pd, "strided_copy", "ev", "et");
    gg_program_def_attr_f(pd, "s0", L * D);
    gg_program_def_attr_f(pd, "s1", 2);   /* reaches past the 24 elements */
    gg_program_def_attr_f(pd, "s2", D);
    rc = gg_client_program_define(c, pd, &prog);
    gg_program_def_free(pd);
    CHECKF(rc == -EINVAL && strstr(gg_client_last_error(c), "reaches element"),
           "a strided_copy past its input is refused: %s", gg_client_last_error(c));
out:
    tbuf_free(&ids), tbuf_free(&tab), tbuf_free(&e), tbuf_free(&et), tbuf_free(&s);
    tbuf_free(&cc), tbuf_free(&pos), tbuf_free(&cache), tbuf_free(&y);
    gg_client_close(c);
}

int main(void)
{
    h_init("test_ops_tail_daemon", 300);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_chain(&d);
        h_daemon_stop(&d);
    }
    return h_finish();
}
