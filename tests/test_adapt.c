/* SPDX-License-Identifier: MIT */
/* replay-mode adaptive's bookkeeping (daemon/core/adapt.c) driven by
 * made-up timings: which path each replay is given while an entry
 * measures, warm-ups and untimed runs left out, the median's choice (ties
 * keep the graph), pipelined picks and cancelled runs, stale rounds,
 * re-measuring, remembered choices by (uid, signature) and their bounds,
 * and the fixed timing source. */
#include <string.h>

#include "core/adapt.h"
#include "harness.h"

enum { G = GG_ADAPT_RUN_GRAPH, E = GG_ADAPT_RUN_EAGER };

/* One replay: pick, then record the time the path is given (and end it). */
static int step(gg_adapt *a, unsigned samples, unsigned recheck, double g_us, double e_us,
                bool *decided)
{
    uint32_t round;
    int run = gg_adapt_pick(a, samples, &round);
    bool d = gg_adapt_record(a, round, run, true, run == G ? g_us : e_us, samples, recheck);
    gg_adapt_end(a, round, run);
    if (decided)
        *decided = d;
    return run;
}

static void alternation_case(void)
{
    h_section("measuring alternates, one warm-up and `samples` timed runs per path");
    gg_adapt a;
    memset(&a, 0, sizeof a);
    int runs[10];
    bool decided = false;
    int at = -1;
    for (int i = 0; i < 10; i++) {
        runs[i] = step(&a, 4, 0, 100.0, 50.0, &decided);
        if (decided && at < 0)
            at = i;
    }
    for (int i = 0; i < 10; i++)
        CHECKF(runs[i] == (i % 2 ? E : G), "replay %d: %s", i, runs[i] == G ? "graph" : "eager");
    CHECKF(at == 9, "decided on the 10th replay (2 x (4 + 1)), got %d", at + 1);
    CHECK_EQ(a.choice, GG_ADAPT_EAGER);
    CHECK(a.us[0] == 100.0 && a.us[1] == 50.0);
    CHECK_EQ(a.decisions, 1);
    CHECK(!a.from_memo);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(step(&a, 4, 0, 100.0, 50.0, NULL), E);
    CHECK_EQ(a.choice, GG_ADAPT_EAGER);   /* recheck 0: never again */
}

static gg_adapt_choice measure(const double *g, const double *e, unsigned samples)
{
    gg_adapt a;
    memset(&a, 0, sizeof a);
    unsigned gi = 0, ei = 0;
    for (unsigned i = 0; i < 2 * (samples + 1) + 4 && a.choice == GG_ADAPT_MEASURING; i++) {
        uint32_t round;
        int run = gg_adapt_pick(&a, samples, &round);
        double us = run == G ? g[gi++] : e[ei++];
        gg_adapt_record(&a, round, run, true, us, samples, 0);
        gg_adapt_end(&a, round, run);
    }
    return (gg_adapt_choice)a.choice;
}

static void median_case(void)
{
    h_section("the median decides; warm-ups do not count; a tie keeps the graph");
    /* graph: warm-up 9000, then 10 10 1000 10 (mean 257, median 10); eager 20s */
    const double g1[] = {9000, 10, 10, 1000, 10}, e1[] = {5, 20, 20, 20, 20};
    CHECK_EQ(measure(g1, e1, 4), GG_ADAPT_GRAPH);
    /* eager's warm-up is slow, the rest fast */
    const double g2[] = {30, 30, 30, 30, 30}, e2[] = {9000, 12, 11, 13, 12};
    CHECK_EQ(measure(g2, e2, 4), GG_ADAPT_EAGER);
    const double g3[] = {0, 40, 40, 40}, e3[] = {0, 40, 40, 40};
    CHECK_EQ(measure(g3, e3, 3), GG_ADAPT_GRAPH);
    /* even sample counts: the middle two averaged (10, 20 -> 15 vs 16) */
    const double g4[] = {0, 10, 20, 10, 20}, e4[] = {0, 16, 16, 16, 16};
    CHECK_EQ(measure(g4, e4, 4), GG_ADAPT_GRAPH);
    /* one sample each */
    const double g5[] = {0, 7}, e5[] = {0, 6};
    CHECK_EQ(measure(g5, e5, 1), GG_ADAPT_EAGER);
}

static void untimed_case(void)
{
    h_section("untimed runs (validated, fallen back, hits) are not samples");
    gg_adapt a;
    memset(&a, 0, sizeof a);
    uint32_t round;
    int run = gg_adapt_pick(&a, 2, &round);
    CHECK_EQ(run, G);
    CHECK(!gg_adapt_record(&a, round, G, false, 1.0, 2, 0));
    gg_adapt_end(&a, round, G);
    CHECK_EQ(a.seen[0], 0);
    CHECK_EQ(gg_adapt_pick(&a, 2, &round), G);   /* the graph is still owed its runs */
    gg_adapt_end(&a, round, G);
    CHECK(!gg_adapt_record(&a, round, G, true, -1.0, 2, 0));   /* no negative time */
    CHECK_EQ(a.seen[0], 0);
}

static void pipelined_case(void)
{
    h_section("picks in flight share the round out; cancelled runs give theirs back");
    gg_adapt a;
    memset(&a, 0, sizeof a);
    uint32_t r[8];
    int run[8];
    for (int i = 0; i < 6; i++)
        run[i] = gg_adapt_pick(&a, 2, &r[i]);
    for (int i = 0; i < 6; i++)
        CHECKF(run[i] == (i % 2 ? E : G), "pick %d", i);
    CHECK_EQ(a.inflight[0], 3);
    CHECK_EQ(a.inflight[1], 3);
    /* both paths have their 3 runs in flight: further picks keep the graph */
    run[6] = gg_adapt_pick(&a, 2, &r[6]);
    CHECK_EQ(run[6], G);
    gg_adapt_end(&a, r[6], run[6]);
    /* two graph runs are cancelled (their session went) */
    gg_adapt_end(&a, r[0], run[0]);
    gg_adapt_end(&a, r[2], run[2]);
    CHECK_EQ(a.inflight[0], 1);
    run[7] = gg_adapt_pick(&a, 2, &r[7]);
    CHECK_EQ(run[7], G);
    /* the rest complete: graph 5 (after a warm-up), eager 9 */
    bool d = false;
    int order[] = {1, 3, 4, 5, 7};
    for (int k = 0; k < 5; k++) {
        int i = order[k];
        CHECK(!gg_adapt_record(&a, r[i], run[i], true, run[i] == G ? 5.0 : 9.0, 2, 0));
        gg_adapt_end(&a, r[i], run[i]);
    }
    /* eager has its warm-up and 2 samples, the graph 1: one more graph run */
    CHECK_EQ(step(&a, 2, 0, 5.0, 9.0, &d), G);
    CHECK(d);
    CHECK_EQ(a.choice, GG_ADAPT_GRAPH);
    CHECK(a.inflight[0] == 0 && a.inflight[1] == 0);
}

static void recheck_case(void)
{
    h_section("re-measuring every `recheck` replays; a stale round's result is ignored");
    gg_adapt a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 6; i++)
        step(&a, 2, 5, 10.0, 20.0, NULL);
    CHECK_EQ(a.choice, GG_ADAPT_GRAPH);
    CHECK_EQ(a.round, 0);
    uint32_t old;
    int run = gg_adapt_pick(&a, 2, &old);   /* picked under the old choice */
    CHECK_EQ(run, G);
    for (int i = 0; i < 5; i++)
        step(&a, 2, 5, 10.0, 20.0, NULL);
    CHECK_EQ(a.choice, GG_ADAPT_MEASURING);
    CHECK_EQ(a.round, 1);
    /* the load changed: eager is faster now; the run picked before the
     * round began finishes with a time that must not count */
    CHECK(!gg_adapt_record(&a, old, G, true, 1.0, 2, 5));
    gg_adapt_end(&a, old, G);
    CHECK_EQ(a.seen[0], 0);
    bool d = false;
    for (int i = 0; i < 6; i++)
        step(&a, 2, 5, 30.0, 20.0, &d);
    CHECK(d);
    CHECK_EQ(a.choice, GG_ADAPT_EAGER);
    CHECK_EQ(a.decisions, 2);
    CHECK(a.us[0] == 30.0 && a.us[1] == 20.0);
}

static void seed_case(void)
{
    h_section("a remembered choice needs no measuring");
    gg_adapt a;
    memset(&a, 0, sizeof a);
    gg_adapt_seed(&a, GG_ADAPT_EAGER, 70.0, 35.0);
    CHECK_EQ(a.choice, GG_ADAPT_EAGER);
    CHECK(a.from_memo);
    uint32_t r;
    CHECK_EQ(gg_adapt_pick(&a, 8, &r), E);
    CHECK(a.inflight[0] == 0 && a.inflight[1] == 0);
    gg_adapt b;
    memset(&b, 0, sizeof b);
    gg_adapt_seed(&b, GG_ADAPT_MEASURING, 1, 2);   /* nothing remembered: measure */
    CHECK_EQ(b.choice, GG_ADAPT_MEASURING);
    CHECK(!b.from_memo);
    CHECK_STR(gg_adapt_choice_name(GG_ADAPT_GRAPH), "graph");
    CHECK_STR(gg_adapt_choice_name(GG_ADAPT_EAGER), "eager");
    CHECK_STR(gg_adapt_choice_name(GG_ADAPT_MEASURING), "measuring");
}

static void memo_case(void)
{
    h_section("remembered by (uid, signature), per slot, bounded");
    gg_adapt_memo *m = gg_adapt_memo_new();
    if (!CHECK(m != NULL))
        return;
    const uint8_t sig[] = "prog-structure", other[] = "prog-structurf";
    gg_adapt a;
    memset(&a, 0, sizeof a);
    gg_adapt_seed(&a, GG_ADAPT_EAGER, 40.0, 20.0);
    gg_adapt_memo_put(m, 1000, sig, sizeof sig, 6, 4, &a);
    CHECK_EQ(gg_adapt_memo_count(m), 1);
    CHECK(gg_adapt_memo_get(m, 1001, sig, sizeof sig, 6) == NULL);       /* another uid */
    CHECK(gg_adapt_memo_get(m, 1000, other, sizeof other, 6) == NULL);   /* another structure */
    CHECK(gg_adapt_memo_get(m, 1000, sig, sizeof sig, 5) == NULL);
    gg_adapt_slot *s = gg_adapt_memo_get(m, 1000, sig, sizeof sig, 6);
    if (CHECK(s != NULL)) {
        CHECK_EQ(s[4].choice, GG_ADAPT_EAGER);
        CHECK(s[4].us[0] == 40.0f && s[4].us[1] == 20.0f);
        for (int i = 0; i < 6; i++)
            if (i != 4)
                CHECK_EQ(s[i].choice, GG_ADAPT_MEASURING);
        free(s);
    }
    gg_adapt_seed(&a, GG_ADAPT_GRAPH, 10.0, 20.0);
    gg_adapt_memo_put(m, 1000, sig, sizeof sig, 6, 0, &a);
    CHECK_EQ(gg_adapt_memo_count(m), 1);
    s = gg_adapt_memo_get(m, 1000, sig, sizeof sig, 6);
    if (CHECK(s != NULL)) {
        CHECK_EQ(s[0].choice, GG_ADAPT_GRAPH);
        CHECK_EQ(s[4].choice, GG_ADAPT_EAGER);
        free(s);
    }

    /* one uid's many programs push out only its own oldest */
    char name[32];
    for (int i = 0; i < GG_ADAPT_MEMO_PER_UID + 10; i++) {
        snprintf(name, sizeof name, "many-%d", i);
        gg_adapt_memo_put(m, 2000, (const uint8_t *)name, strlen(name), 1, 0, &a);
    }
    CHECK_EQ(gg_adapt_memo_count(m), GG_ADAPT_MEMO_PER_UID + 1);
    s = gg_adapt_memo_get(m, 1000, sig, sizeof sig, 6);
    CHECKF(s != NULL, "uid 1000's record survives uid 2000's");
    free(s);
    CHECK(gg_adapt_memo_get(m, 2000, (const uint8_t *)"many-0", 6, 1) == NULL);
    snprintf(name, sizeof name, "many-%d", GG_ADAPT_MEMO_PER_UID + 9);
    s = gg_adapt_memo_get(m, 2000, (const uint8_t *)name, strlen(name), 1);
    CHECK(s != NULL);
    free(s);
    /* and all uids together stay under the total */
    for (int u = 0; u < 8; u++)
        for (int i = 0; i < GG_ADAPT_MEMO_PER_UID; i++) {
            snprintf(name, sizeof name, "u%d-%d", u, i);
            gg_adapt_memo_put(m, (uid_t)(3000 + u), (const uint8_t *)name, strlen(name), 1, 0, &a);
        }
    CHECK_EQ(gg_adapt_memo_count(m), GG_ADAPT_MEMO_MAX);
    gg_adapt_memo_free(m);
}

static void clock_case(void)
{
    h_section("the timing source: measured, or adaptive-timing's fixed figures");
    gg_config c;
    gg_config_defaults(&c);
    CHECK(gg_adapt_clock(&c, G, 12.5) == 12.5);
    CHECK(gg_adapt_clock(&c, E, 3.0) == 3.0);
    char err[256];
    CHECK_EQ(gg_config_set(&c, "adaptive-timing", "80,20.5", err, sizeof err), 0);
    CHECK(gg_adapt_clock(&c, G, 12.5) == 80.0);
    CHECK(gg_adapt_clock(&c, E, 12.5) == 20.5);
    char v[64];
    for (int i = 0; gg_config_key_name(i); i++)
        if (strcmp(gg_config_key_name(i), "adaptive-timing") == 0) {
            gg_config_value(&c, i, v, sizeof v);
            CHECK_STR(v, "80,20.5");
        }
    CHECK(gg_config_set(&c, "adaptive-timing", "80", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "adaptive-timing");
    CHECK(gg_config_set(&c, "adaptive-timing", "80,-1", err, sizeof err) < 0);
    CHECK(gg_config_set(&c, "adaptive-timing", "x,1", err, sizeof err) < 0);
    CHECK(gg_config_set(&c, "adaptive-samples", "0", err, sizeof err) < 0);
    CHECK(gg_config_set(&c, "adaptive-samples", "33", err, sizeof err) < 0);
    CHECK_EQ(gg_config_set(&c, "adaptive-timing", "measured", err, sizeof err), 0);
    CHECK(gg_adapt_clock(&c, G, 12.5) == 12.5);
}

int main(void)
{
    h_init("test_adapt", 60);
    alternation_case();
    median_case();
    untimed_case();
    pipelined_case();
    recheck_case();
    seed_case();
    memo_case();
    clock_case();
    return h_finish();
}
