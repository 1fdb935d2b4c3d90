/* SPDX-License-Identifier: MIT */
/* hello, stats, health, config. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/config.h"
#include "core/cache.h"
#include "rpc/dispatch.h"
#include "core/exec.h"
#include "core/program.h"
#include "core/quota.h"
#include "core/core.h"
#include "rpc/conn.h"
#include "core/session.h"
#include "rpc/reply.h"
#include "fastpath.h"

#define INFO_DEVINFO_MAX_AGE_MS 1000
/* A stats cache row's packed size at most: up to 21 keys with their
 * numbers and short strings (about 340 bytes), a program name (64) and a
 * failure reason (160): about 565 bytes. */
#define STATS_ROW_MAX 640

static void info_pack_device(msgpack_packer *pk, const gg_core *core)
{
    const gg_device_info *d = &core->devinfo;
    msgpack_pack_map(pk, 8 + (d->gpu_sharing[0] != '\0'));
    proto_pack_kv_str(pk, "name", d->name);
    proto_pack_kv_str(pk, "arch", d->arch);
    proto_pack_kv_str(pk, "runtime", d->runtime);
    proto_pack_kv_str(pk, "driver", d->driver);
    proto_pack_kv_u64(pk, "vram_total_mb", d->mem_total >> 20);
    proto_pack_kv_u64(pk, "vram_free_mb", d->mem_free >> 20);
    proto_pack_kv_i64(pk, "wave_size", d->wave_size);
    proto_pack_kv_i64(pk, "compute_units", d->compute_units);
    if (d->gpu_sharing[0])
        proto_pack_kv_str(pk, "gpu_sharing", d->gpu_sharing);
}

int gg_method_hello(gg_call *c)
{
    uint64_t protocol;
    const char *client = "";
    size_t clen = 0;
    int rc = proto_get_u64(c->params, "protocol", true, UINT32_MAX, &protocol, &c->err);
    if (rc < 0)
        return rc;
    if (protocol != GG_PROTOCOL_VERSION)
        return proto_fail(&c->err, -EPROTO,
                          "protocol %llu is not supported: this daemon speaks protocol %d",
                          (unsigned long long)protocol, GG_PROTOCOL_VERSION);
    rc = proto_get_str(c->params, "client", false, &client, &clen, &c->err);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    gg_session *s = c->sess;
    /* shown in stats: cleaned, and cut at a character boundary */
    proto_utf8_clean(s->client, sizeof(s->client), client, clen);
    s->said_hello = true;

    gg_core *core = c->core;
    /* Only the free memory changes; reading it can take a driver call
     * (hip) or several syscalls (cpu): at most once a second. */
    uint64_t now = gg_now_ms();
    if (now - c->rpc->devinfo_ms >= INFO_DEVINFO_MAX_AGE_MS) {
        core->dev->ops->info(core->dev, &core->devinfo);
        c->rpc->devinfo_ms = now;
    }
    msgpack_packer *pk = c->pk;
    msgpack_pack_map(pk, 9);
    proto_pack_kv_u64(pk, "protocol", GG_PROTOCOL_VERSION);
    proto_pack_kv_str(pk, "version", GG_VERSION);
    proto_pack_kv_str(pk, "backend", core->backend);
    proto_pack_kv_u64(pk, "session", s->id);
    proto_pack_key(pk, "device");
    info_pack_device(pk, core);
    proto_pack_key(pk, "limits");
    msgpack_pack_map(pk, 8);
    proto_pack_kv_u64(pk, "max_message_size", core->cfg->max_message);
    proto_pack_kv_u64(pk, "max_inflight", core->cfg->max_inflight);
    proto_pack_key(pk, "buckets");
    msgpack_pack_array(pk, core->cfg->nbuckets);
    for (int i = 0; i < core->cfg->nbuckets; i++)
        msgpack_pack_int(pk, core->cfg->buckets[i]);
    proto_pack_kv_u64(pk, "max_buckets", GG_MAX_BUCKETS);
    proto_pack_kv_u64(pk, "max_dims", GG_MAX_DIMS);
    proto_pack_kv_u64(pk, "max_batch", GG_MAX_BATCH);
    proto_pack_kv_u64(pk, "max_tensors", GG_MAX_TENSORS);
    proto_pack_kv_u64(pk, "max_nodes", GG_MAX_NODES);
    proto_pack_key(pk, "fastpath");
    msgpack_pack_map(pk, 3);
    const gg_rpc_fastpath *fp = c->rpc->fp;
    proto_pack_kv_bool(pk, "available", fp && fp->available(fp->ctx));
    proto_pack_kv_u64(pk, "max_entries", GG_FP_MAX_ENTRIES);
    proto_pack_kv_str(pk, "completion", fp ? fp->completion(fp->ctx) : "cpu");
    size_t n;
    const gg_method *m = gg_dispatch_table(&n);
    proto_pack_key(pk, "methods");
    msgpack_pack_array(pk, n);
    for (size_t i = 0; i < n; i++)
        proto_pack_str(pk, m[i].name);
    proto_pack_key(pk, "ops");
    msgpack_pack_array(pk, gg_ops_count());
    for (int i = 0; i < gg_ops_count(); i++)
        proto_pack_str(pk, gg_ops_at(i)->name);
    return 0;
}

/* enabled_at: when graph replay was enabled, as Unix time (the daemon's
 * start, the wall clock read once then); nil while graphs are off (mode 0). */
static void info_pack_enabled_at(msgpack_packer *pk, const gg_core *core)
{
    proto_pack_key(pk, "enabled_at");
    if (!core->cfg->graphs_enabled) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_double(pk, core->started_unix);
}

static void stats_pack_session(msgpack_packer *pk, const gg_session *s, bool fastpath)
{
    unsigned nbuf = 0, nprog = 0;
    for (gg_list *l = s->buffers.next; l != &s->buffers; l = l->next)
        nbuf++;
    for (gg_list *l = s->programs.next; l != &s->programs; l = l->next)
        nprog++;
    msgpack_pack_map(pk, 13);
    proto_pack_kv_u64(pk, "id", s->id);
    proto_pack_kv_bool(pk, "fastpath", fastpath);
    proto_pack_kv_str(pk, "client", s->client);
    proto_pack_kv_i64(pk, "pid", s->pid);
    proto_pack_kv_i64(pk, "uid", (int64_t)s->uid);
    proto_pack_kv_u64(pk, "requests", s->requests);
    proto_pack_kv_u64(pk, "errors", s->errors);
    proto_pack_kv_u64(pk, "replays", s->replays);
    proto_pack_kv_u64(pk, "graph_replays", s->graph_replays);
    proto_pack_kv_u64(pk, "eager_replays", s->eager_replays);
    proto_pack_kv_f64(pk, "avg_replay_us", gg_stats_avg(s->replay_us_sum, s->replays));
    proto_pack_kv_u64(pk, "buffers", nbuf);
    proto_pack_kv_u64(pk, "programs", nprog);
}

int gg_method_stats(gg_call *c)
{
    /* every session's device-completed replays, counted before they are shown */
    gg_core_settle(c->core, NULL);
    gg_core *core = c->core;
    const gg_stats *st = &core->stats;
    msgpack_packer *pk = c->pk;
    /* Scope: the caller's own uid's sessions and programs, or every uid's
     * for root, the daemon's uid and admin-group (core/quota.h). */
    gg_session *me = c->sess;
    bool all = gg_quota_sees_all(core, me->uid, me->gid);
    /* Bounded: at most stats-max-cache-entries rows, and never more than
     * half the largest message at STATS_ROW_MAX bytes a row, so the answer
     * always fits (the least recently used rows are left out). */
    unsigned cap = core->cfg->stats_max_cache;
    size_t fit = core->cfg->max_message / 2 / STATS_ROW_MAX;
    if (cap > fit)
        cap = fit ? (unsigned)fit : 1;
    unsigned ctotal = gg_rpc_cache_count(core->cache, all, me->uid);
    msgpack_pack_map(pk, 36);
    info_pack_enabled_at(pk, core);
    proto_pack_kv_u64(pk, "capture_count", st->capture_count);
    proto_pack_kv_u64(pk, "instantiation_count", st->instantiations);
    proto_pack_kv_u64(pk, "replay_count", st->replay_count);
    proto_pack_kv_u64(pk, "eager_count", st->eager_count);
    proto_pack_kv_u64(pk, "fallback_count", st->fallback_count);
    proto_pack_kv_u64(pk, "oversize_count", st->oversize_count);
    proto_pack_kv_u64(pk, "validation_failures", st->validation_failures);
    proto_pack_kv_u64(pk, "validations", st->validations);
    proto_pack_kv_f64(pk, "avg_replay_us", gg_stats_avg(st->replay_us_sum, st->replay_count));
    proto_pack_kv_f64(pk, "avg_eager_us", gg_stats_avg(st->eager_us_sum, st->eager_count));
    proto_pack_kv_u64(pk, "requests", st->requests);
    proto_pack_kv_u64(pk, "errors", st->errors);
    proto_pack_kv_u64(pk, "evictions", st->evictions);
    proto_pack_kv_u64(pk, "exec_updates", st->exec_updates);
    proto_pack_kv_u64(pk, "fastpath_replays", st->fastpath_replays);
    proto_pack_kv_u64(pk, "fastpath_regions",
                      c->rpc->fp ? c->rpc->fp->regions(c->rpc->fp->ctx) : 0);
    proto_pack_kv_u64(pk, "uptime_s", (gg_now_ms() - core->started_ms) / 1000);
    proto_pack_kv_str(pk, "backend", core->backend);
    proto_pack_kv_u64(pk, "sessions_active", c->rpc->nconns);
    proto_pack_kv_u64(pk, "sessions_total", core->sessions_total);
    proto_pack_kv_u64(pk, "defines_checking", core->defines_checking);
    /* the caller's uid's work in the executor (max-jobs-per-uid counts it),
     * and the jobs of departed sessions dropped before they ran */
    proto_pack_kv_u64(pk, "uid_jobs", gg_exec_uid_jobs(core->exec, me->uid));
    proto_pack_kv_u64(pk, "jobs_dropped", gg_exec_dropped(core->exec));
    proto_pack_kv_u64(pk, "graphs_cached", gg_cache_count(core->cache));
    proto_pack_kv_u64(pk, "cache_capacity", gg_cache_capacity(core->cache));
    proto_pack_kv_u64(pk, "cache_bytes", gg_cache_bytes(core->cache));
    proto_pack_kv_u64(pk, "scratch_bytes", gg_cache_arena_bytes(core->cache));
    proto_pack_kv_u64(pk, "scratch_arenas", gg_cache_arenas(core->cache));
    uint64_t log_dropped, log_suppressed;
    gg_log_counts(&log_dropped, &log_suppressed);
    proto_pack_kv_u64(pk, "log_dropped", log_dropped);
    proto_pack_kv_u64(pk, "log_suppressed", log_suppressed);
    proto_pack_kv_str(pk, "scope", all ? "all" : "uid");
    proto_pack_kv_u64(pk, "cache_total", ctotal);
    proto_pack_kv_bool(pk, "cache_truncated", ctotal > cap);
    proto_pack_key(pk, "sessions");
    unsigned nsess = 0;
    for (struct gg_conn *cn = c->rpc->conns; cn; cn = gg_conn_next(cn)) {
        const gg_session *s = gg_conn_session(cn);
        nsess += s && (all || s->uid == me->uid);
    }
    msgpack_pack_array(pk, nsess);
    for (struct gg_conn *cn = c->rpc->conns; cn; cn = gg_conn_next(cn)) {
        const gg_session *s = gg_conn_session(cn);
        if (s && (all || s->uid == me->uid))
            stats_pack_session(pk, s, c->rpc->fp && c->rpc->fp->attached(c->rpc->fp->ctx, s));
    }
    proto_pack_key(pk, "cache");
    gg_rpc_pack_cache(core->cache, pk, all, me->uid, cap,
                      core->cfg->replay_mode == GG_REPLAY_ADAPTIVE);
    return 0;
}

/* The smoke test's answer: the job itself says how it went (out adds
 * nothing for a smoke test). */
static void health_done(gg_job *j, const gg_replay_outcome *out)
{
    (void)out;
    gg_core *core = j->sess->core;
    gg_rpc *rpc = j->ctx;
    const gg_job_result *r = &j->results[0];
    char smoke[200] = "passed";
    bool ok = !core->device_lost && j->rc == 0 && r->rc == 0;
    if (core->device_lost)
        snprintf(smoke, sizeof(smoke), "not run: the device is lost");
    else if (j->rc < 0 || r->rc < 0)
        snprintf(smoke, sizeof(smoke), "failed: %s", r->rc < 0 ? r->reason : j->reason);
    if (!ok && !core->device_lost)
        snprintf(core->unhealthy_reason, sizeof(core->unhealthy_reason), "smoke test %s", smoke);
    /* health reads the device afresh: it is the check, and rare */
    core->dev->ops->info(core->dev, &core->devinfo);
    rpc->devinfo_ms = gg_now_ms();
    const gg_device_info *d = &core->devinfo;
    msgpack_packer *pk = gg_rpc_reply_begin(j->sess, (uint32_t)j->tag);
    /* the Python API's details string, one line, beside the details map */
    char summary[300];
    if (ok)
        snprintf(summary, sizeof(summary), "Graph capture/replay OK, output verified");
    else if (core->device_lost)
        snprintf(summary, sizeof(summary), "device lost: %.250s", core->unhealthy_reason);
    else
        snprintf(summary, sizeof(summary), "smoke test %.250s", smoke);
    msgpack_pack_map(pk, 8);
    proto_pack_kv_bool(pk, "ok", ok);
    proto_pack_kv_str(pk, "summary", summary);
    info_pack_enabled_at(pk, core);
    proto_pack_kv_str(pk, "gpu", d->name);
    proto_pack_kv_str(pk, "arch", d->arch);
    proto_pack_kv_u64(pk, "vram_total_mb", d->mem_total >> 20);
    proto_pack_kv_u64(pk, "vram_free_mb", d->mem_free >> 20);
    proto_pack_key(pk, "details");
    msgpack_pack_map(pk, (ok ? 10 : 11) + (d->gpu_sharing[0] != '\0'));
    proto_pack_kv_str(pk, "backend", core->backend);
    proto_pack_kv_str(pk, "runtime", d->runtime);
    proto_pack_kv_str(pk, "driver", d->driver);
    proto_pack_kv_str(pk, "smoke_test", smoke);
    proto_pack_kv_f64(pk, "smoke_test_us", (double)(j->t_done_us - j->t_start_us));
    proto_pack_kv_u64(pk, "uptime_s", (gg_now_ms() - core->started_ms) / 1000);
    proto_pack_kv_u64(pk, "sessions", rpc->nconns);
    proto_pack_kv_u64(pk, "graphs_cached", gg_cache_count(core->cache));
    proto_pack_kv_str(pk, "socket", core->cfg->socket_path);
    proto_pack_kv_str(pk, "version", GG_VERSION);
    if (d->gpu_sharing[0])
        proto_pack_kv_str(pk, "gpu_sharing", d->gpu_sharing);
    if (!ok)
        proto_pack_kv_str(pk, "reason", core->unhealthy_reason);
    gg_rpc_reply_end(j->sess);
}

/* The smoke test captures and replays a graph: it runs on an executor
 * thread like any other device work, never on the loop. */
int gg_method_health(gg_call *c)
{
    static const gg_job_ops health_ops = {.done = health_done};
    gg_job *j = gg_job_new(GG_JOB_SMOKE, c->sess, &health_ops, c->msgid, NULL, 0);
    if (!j)
        return proto_fail(&c->err, -ENOMEM, "out of memory");
    j->ctx = c->rpc;
    gg_exec_queue(c->core, j);
    return GG_CALL_ASYNC;
}

/* The running settings, each with where it came from: after a reload
 * (SIGHUP) the live ones show their new value and source, the others the
 * value the daemon still runs with.  Nothing in them is secret, so every
 * client may ask. */
int gg_method_config(gg_call *c)
{
    const gg_config *cfg = c->core->cfg;
    msgpack_packer *pk = c->pk;
    char v[512];
    msgpack_pack_map(pk, 2);
    proto_pack_kv_str(pk, "file", gg_config_file_path(cfg));
    proto_pack_key(pk, "settings");
    msgpack_pack_array(pk, GG_CFG_NKEYS);
    for (int i = 0; i < GG_CFG_NKEYS; i++) {
        gg_config_value(cfg, i, v, sizeof(v));
        msgpack_pack_map(pk, 4);
        proto_pack_kv_str(pk, "key", gg_config_key_name(i));
        proto_pack_kv_str(pk, "value", v);
        proto_pack_kv_str(pk, "source", cfg->sources[i]);
        proto_pack_kv_bool(pk, "live", gg_config_key_live(i));
    }
    return 0;
}
