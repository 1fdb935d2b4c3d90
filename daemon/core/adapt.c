/* SPDX-License-Identifier: MIT */
/* replay-mode adaptive (adapt.h). */
#include "core/adapt.h"

#include <stdlib.h>
#include <string.h>

enum { ADAPT_G = 0, ADAPT_E = 1 };

static int adapt_index(int run)
{
    return run == GG_ADAPT_RUN_EAGER ? ADAPT_E : ADAPT_G;
}

static unsigned adapt_samples(unsigned samples)
{
    return samples < 1 ? 1 : samples > GG_ADAPT_MAX_SAMPLES ? GG_ADAPT_MAX_SAMPLES : samples;
}

const char *gg_adapt_choice_name(gg_adapt_choice c)
{
    return c == GG_ADAPT_GRAPH ? "graph" : c == GG_ADAPT_EAGER ? "eager" : "measuring";
}

int gg_adapt_pick(gg_adapt *a, unsigned samples, uint32_t *round)
{
    *round = a->round;
    if (a->choice == GG_ADAPT_GRAPH)
        return GG_ADAPT_RUN_GRAPH;
    if (a->choice == GG_ADAPT_EAGER)
        return GG_ADAPT_RUN_EAGER;
    /* One warm-up and `samples` timed runs of each path; runs in flight
     * count as taken, so pipelined replays still share the round out. */
    unsigned want = adapt_samples(samples) + 1;
    unsigned g = (unsigned)a->seen[ADAPT_G] + a->inflight[ADAPT_G];
    unsigned e = (unsigned)a->seen[ADAPT_E] + a->inflight[ADAPT_E];
    int run;
    if (g < want && (g <= e || e >= want))
        run = GG_ADAPT_RUN_GRAPH;
    else if (e < want)
        run = GG_ADAPT_RUN_EAGER;
    else
        run = GG_ADAPT_RUN_GRAPH;   /* both taken: a result is still to come */
    a->inflight[adapt_index(run)]++;
    return run;
}

void gg_adapt_end(gg_adapt *a, uint32_t round, int run)
{
    int i = adapt_index(run);
    if (round == a->round && a->choice == GG_ADAPT_MEASURING && a->inflight[i])
        a->inflight[i]--;
}

static int adapt_cmp(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

static double adapt_median(const float *v, unsigned n)
{
    float s[GG_ADAPT_MAX_SAMPLES];
    memcpy(s, v, sizeof(float) * n);
    qsort(s, n, sizeof(float), adapt_cmp);
    return n % 2 ? s[n / 2] : ((double)s[n / 2 - 1] + s[n / 2]) / 2.0;
}

static void adapt_new_round(gg_adapt *a)
{
    a->choice = GG_ADAPT_MEASURING;
    a->round++;
    memset(a->seen, 0, sizeof(a->seen));
    memset(a->n, 0, sizeof(a->n));
    memset(a->inflight, 0, sizeof(a->inflight));
}

bool gg_adapt_record(gg_adapt *a, uint32_t round, int run, bool timed, double us,
                     unsigned samples, unsigned recheck)
{
    if (a->choice != GG_ADAPT_MEASURING) {
        /* The choice stands until recheck replays have run on it. */
        if (recheck && ++a->since >= recheck)
            adapt_new_round(a);
        return false;
    }
    if (round != a->round || !timed || !(us >= 0))
        return false;
    unsigned want = adapt_samples(samples);
    int i = adapt_index(run);
    /* The first run of each path in a round is a warm-up: first touches of
     * the kernels' code, the buffers and (after a capture) the graph. */
    if (a->seen[i]++ == 0)
        return false;
    if (a->n[i] < want)
        a->samples[i][a->n[i]++] = (float)us;
    if (a->n[ADAPT_G] < want || a->n[ADAPT_E] < want)
        return false;
    a->us[ADAPT_G] = adapt_median(a->samples[ADAPT_G], a->n[ADAPT_G]);
    a->us[ADAPT_E] = adapt_median(a->samples[ADAPT_E], a->n[ADAPT_E]);
    a->choice = a->us[ADAPT_E] < a->us[ADAPT_G] ? GG_ADAPT_EAGER : GG_ADAPT_GRAPH;
    a->from_memo = false;
    a->since = 0;
    a->decisions++;
    memset(a->inflight, 0, sizeof(a->inflight));
    return true;
}

void gg_adapt_seed(gg_adapt *a, gg_adapt_choice choice, double graph_us, double eager_us)
{
    if (choice != GG_ADAPT_GRAPH && choice != GG_ADAPT_EAGER)
        return;
    a->choice = (uint8_t)choice;
    a->from_memo = true;
    a->us[ADAPT_G] = graph_us;
    a->us[ADAPT_E] = eager_us;
    a->since = 0;
}

double gg_adapt_clock(const gg_config *cfg, int run, double measured_us)
{
    if (!cfg->adaptive_fixed)
        return measured_us;
    return run == GG_ADAPT_RUN_EAGER ? cfg->adaptive_eager_us : cfg->adaptive_graph_us;
}

/* ---- remembered choices ------------------------------------------------- */

typedef struct adapt_rec {
    struct adapt_rec *prev, *next;  /* most recently used first */
    uid_t uid;
    uint8_t *sig;
    size_t siglen;
    int nslots;
    gg_adapt_slot slots[];
} adapt_rec;

struct gg_adapt_memo {
    adapt_rec *head, *tail;
    unsigned n;
};

gg_adapt_memo *gg_adapt_memo_new(void)
{
    return calloc(1, sizeof(gg_adapt_memo));
}

static void memo_unlink(gg_adapt_memo *m, adapt_rec *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        m->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        m->tail = r->prev;
    r->prev = r->next = NULL;
}

static void memo_push_front(gg_adapt_memo *m, adapt_rec *r)
{
    r->prev = NULL;
    r->next = m->head;
    if (m->head)
        m->head->prev = r;
    m->head = r;
    if (!m->tail)
        m->tail = r;
}

static void memo_drop(gg_adapt_memo *m, adapt_rec *r)
{
    memo_unlink(m, r);
    m->n--;
    free(r->sig);
    free(r);
}

void gg_adapt_memo_free(gg_adapt_memo *m)
{
    if (!m)
        return;
    while (m->head)
        memo_drop(m, m->head);
    free(m);
}

unsigned gg_adapt_memo_count(const gg_adapt_memo *m)
{
    return m ? m->n : 0;
}

static adapt_rec *memo_find(gg_adapt_memo *m, uid_t uid, const uint8_t *sig, size_t siglen,
                            int nslots)
{
    for (adapt_rec *r = m->head; r; r = r->next)
        if (r->uid == uid && r->siglen == siglen && r->nslots == nslots &&
            memcmp(r->sig, sig, siglen) == 0) {
            memo_unlink(m, r);
            memo_push_front(m, r);
            return r;
        }
    return NULL;
}

gg_adapt_slot *gg_adapt_memo_get(gg_adapt_memo *m, uid_t uid, const uint8_t *sig, size_t siglen,
                                 int nslots)
{
    adapt_rec *r = m ? memo_find(m, uid, sig, siglen, nslots) : NULL;
    if (!r)
        return NULL;
    gg_adapt_slot *copy = malloc(sizeof(gg_adapt_slot) * (size_t)nslots);
    if (copy)
        memcpy(copy, r->slots, sizeof(gg_adapt_slot) * (size_t)nslots);
    return copy;
}

void gg_adapt_memo_put(gg_adapt_memo *m, uid_t uid, const uint8_t *sig, size_t siglen,
                       int nslots, int slot, const gg_adapt *a)
{
    if (!m || slot < 0 || slot >= nslots)
        return;
    adapt_rec *r = memo_find(m, uid, sig, siglen, nslots);
    if (!r) {
        /* Room first: the uid's own oldest record past its share, so that
         * one uid defining many programs only pushes out its own. */
        unsigned mine = 0;
        adapt_rec *oldest_mine = NULL;
        for (adapt_rec *o = m->head; o; o = o->next)
            if (o->uid == uid) {
                mine++;
                oldest_mine = o;
            }
        if (mine >= GG_ADAPT_MEMO_PER_UID && oldest_mine)
            memo_drop(m, oldest_mine);
        else if (m->n >= GG_ADAPT_MEMO_MAX && m->tail)
            memo_drop(m, m->tail);
        r = calloc(1, sizeof(*r) + sizeof(gg_adapt_slot) * (size_t)nslots);
        uint8_t *copy = r ? malloc(siglen ? siglen : 1) : NULL;
        if (!r || !copy) {
            free(r);
            return;
        }
        memcpy(copy, sig, siglen);
        r->uid = uid;
        r->sig = copy;
        r->siglen = siglen;
        r->nslots = nslots;
        memo_push_front(m, r);
        m->n++;
    }
    r->slots[slot].choice = a->choice;
    r->slots[slot].us[0] = (float)a->us[ADAPT_G];
    r->slots[slot].us[1] = (float)a->us[ADAPT_E];
}
