/* SPDX-License-Identifier: MIT */
/* Counting a replay that ran (account.h). */
#include "core/account.h"

#include "base/log.h"
#include "core/adapt.h"

/* replay-mode adaptive: one more run of e.  A replay the entry picked a
 * run for is a timed sample of that run when it took it and did nothing
 * else (a validated run does the work twice; a fallback says nothing about
 * the graph); a plain hit counts towards the next re-measurement. */
static void account_adapt(gg_core *core, gg_session *s, const gg_program *p, gg_cache_entry *e,
                         const gg_replay_ran *r)
{
    const gg_config *cfg = core->cfg;
    int ran = r->graph ? GG_ADAPT_RUN_GRAPH : GG_ADAPT_RUN_EAGER;
    bool timed = r->adapt_run != GG_ADAPT_RUN_NONE && ran == r->adapt_run && !r->fallback &&
                 !r->validated;
    if (!gg_adapt_record(&e->adapt, r->adapt_round, ran, timed,
                         timed ? gg_adapt_clock(cfg, ran, r->device_us) : 0.0,
                         cfg->adaptive_samples, cfg->adaptive_recheck))
        return;
    gg_cache_adapt_decided(core->cache, e);
    gg_log_fields f = {.session = s->id, .program = p->id, .bucket = e->bucket};
    GG_LOG(GG_LOG_DEBUG, &f, "adaptive: branch %d runs %s (graph %.1f us, eager %.1f us, "
           "median of %u)", e->branch, gg_adapt_choice_name((gg_adapt_choice)e->adapt.choice),
           e->adapt.us[0], e->adapt.us[1], cfg->adaptive_samples);
}

void gg_account_replay(gg_core *core, gg_session *s, const gg_program *p, gg_cache_entry *e,
                       const gg_replay_ran *r)
{
    double us = r->device_us;
    s->replays++;
    s->replay_us_sum += us;
    if (r->graph) {
        core->stats.replay_count++;
        core->stats.replay_us_sum += us;
        s->graph_replays++;
        e->replays++;
        e->replay_us_sum += us;
    } else {
        core->stats.eager_count++;
        core->stats.eager_us_sum += us;
        s->eager_replays++;
        if (r->fallback) {
            core->stats.fallback_count++;
            e->fallbacks++;
        }
        if (!e)
            core->stats.oversize_count++;
    }
    gg_metrics_replay(&core->stats.metrics, r->path, p->name, e ? e->bucket : 0,
                      r->round_trip_us, us);
    /* a replay picked under replay-mode adaptive carries its pick; a plain
     * hit of the fast path counts while the mode is adaptive */
    if (e && (r->adapt_run != GG_ADAPT_RUN_NONE ||
              (r->path == GG_PATH_FASTPATH && core->cfg->replay_mode == GG_REPLAY_ADAPTIVE)))
        account_adapt(core, s, p, e, r);
}
