/* SPDX-License-Identifier: MIT */
/* metrics: the daemon's counters, gauges and latency histograms as
 * Prometheus text (format 0.0.4), for gfxgraphctl metrics and any scraper
 * that speaks the protocol (docs/metrics.md lists the names).
 *
 * The answer is {text: "..."}.  Its size is bounded: the histogram series
 * are capped (core/metrics.h), each at most about 6 KB per family with the
 * longest escaped program name, so the text stays under 1.5 MB whatever
 * the clients do (test_metrics_format renders that worst case), far below
 * the protocol's message limit.
 *
 * The process_* metrics are the daemon's own: an exporter that relays this
 * text (gfxgraph-exporter) adds only gfxgraph_up, so a restart of the
 * daemon shows in process_start_time_seconds. */
#include <errno.h>
#include <stdlib.h>

#include "base/clock.h"
#include "core/cache.h"
#include "core/core.h"
#include "core/metrics.h"
#include "core/program.h"
#include "rpc/conn.h"
#include "rpc/dispatch.h"

#define METRICS_DEVINFO_MAX_AGE_MS 1000

static void metrics_one(gg_metrics_buf *b, const char *name, const char *type, const char *help,
                        double v)
{
    gg_metrics_head(b, name, type, help);
    gg_metrics_sample(b, name, NULL, NULL, v);
}

int gg_method_metrics(gg_call *c)
{
    gg_core *core = c->core;
    /* every session's device-completed fast-path hits, counted first */
    gg_core_settle(c->core, NULL);
    /* free VRAM changes; reading it may take a driver call: at most once a
     * second, as hello does */
    uint64_t now = gg_now_ms();
    if (now - c->rpc->devinfo_ms >= METRICS_DEVINFO_MAX_AGE_MS) {
        core->dev->ops->info(core->dev, &core->devinfo);
        c->rpc->devinfo_ms = now;
    }
    const gg_stats *st = &core->stats;

    gg_metrics_buf b = {0};
    gg_metrics_head(&b, "gfxgraph_info", "gauge", "The daemon's version and backend (always 1).");
    gg_metrics_printf(&b, "gfxgraph_info{version=\"");
    gg_metrics_escape(&b, GG_VERSION);
    gg_metrics_printf(&b, "\",backend=\"");
    gg_metrics_escape(&b, core->backend);
    gg_metrics_printf(&b, "\",device=\"");
    gg_metrics_escape(&b, core->devinfo.name);
    gg_metrics_printf(&b, "\"} 1\n");
    metrics_one(&b, "gfxgraph_uptime_seconds", "gauge", "Seconds since the daemon started.",
                (double)((now - core->started_ms) / 1000));

    gg_metrics_process(&b);
    gg_metrics_render(&st->metrics, &b);

    metrics_one(&b, "gfxgraph_requests_total", "counter",
                "Requests taken: socket messages and fast-path descriptors.",
                (double)st->requests);
    metrics_one(&b, "gfxgraph_fastpath_descriptors_total", "counter",
                "Replay descriptors taken from fast-path rings (hits and those handed to the "
                "executor).", (double)st->fastpath_replays);
    metrics_one(&b, "gfxgraph_captures_total", "counter",
                "Graphs captured (each then instantiated, or applied to the existing graph by "
                "an exec update).", (double)st->capture_count);
    metrics_one(&b, "gfxgraph_instantiations_total", "counter",
                "Captured graphs instantiated anew (a warm adoption, or a rebind, updates the "
                "graph in place instead).", (double)st->instantiations);
    metrics_one(&b, "gfxgraph_exec_updates_total", "counter",
                "Captured graphs applied to the existing executable graph (no instantiate).",
                (double)st->exec_updates);
    metrics_one(&b, "gfxgraph_fallbacks_total", "counter",
                "Replays run eager because a capture, instantiate or launch failed.",
                (double)st->fallback_count);
    metrics_one(&b, "gfxgraph_oversize_total", "counter",
                "Replays run eager because the batch is above the largest bucket.",
                (double)st->oversize_count);
    metrics_one(&b, "gfxgraph_validations_total", "counter",
                "Graph replays checked against an eager run (GFXGRAPH=validate).",
                (double)st->validations);
    metrics_one(&b, "gfxgraph_validation_failures_total", "counter",
                "Validations whose graph and eager results differed.",
                (double)st->validation_failures);
    metrics_one(&b, "gfxgraph_evictions_total", "counter",
                "Graphs evicted from the cache.", (double)st->evictions);
    metrics_one(&b, "gfxgraph_sessions_opened_total", "counter",
                "Sessions opened since the daemon started.", (double)core->sessions_total);

    metrics_one(&b, "gfxgraph_sessions", "gauge", "Sessions (connections) open now.",
                (double)c->rpc->nconns);
    metrics_one(&b, "gfxgraph_graphs_cached", "gauge", "Graphs in the cache now.",
                (double)gg_cache_count(core->cache));
    metrics_one(&b, "gfxgraph_cache_capacity", "gauge", "Graphs the cache may hold.",
                (double)gg_cache_capacity(core->cache));
    metrics_one(&b, "gfxgraph_cache_bytes", "gauge",
                "Device bytes charged to the VRAM cap: the cached graphs' footprints and "
                "the scratch arenas.",
                (double)gg_cache_bytes(core->cache));
    metrics_one(&b, "gfxgraph_scratch_bytes", "gauge",
                "Scratch bytes allocated: one arena per program (sized for its largest "
                "bucket), live or parked.",
                (double)gg_cache_arena_bytes(core->cache));
    metrics_one(&b, "gfxgraph_vram_total_bytes", "gauge", "Device memory in all.",
                (double)core->devinfo.mem_total);
    metrics_one(&b, "gfxgraph_vram_free_bytes", "gauge",
                "Device memory free (read at most once a second).",
                (double)core->devinfo.mem_free);
    if (b.oom) {
        free(b.data);
        return proto_fail(&c->err, -ENOMEM, "out of memory");
    }
    msgpack_pack_map(c->pk, 1);
    proto_pack_key(c->pk, "text");
    proto_pack_strn(c->pk, b.data, b.len);
    free(b.data);
    return 0;
}
