/* SPDX-License-Identifier: MIT */
/* program.define, program.release, program.list, program.prepare, replay.
 *
 * Happy path: each handler checks its arguments and answers from the core;
 * program.define and program.rebind are decoded into the core's spec
 * (rpc/program_decode.c) and built and checked by the core; a replay that is a plain cache hit with a cheap launch is launched from
 * the loop (gg_exec_hit), any other goes to the executor as a job.
 *
 * Failure modes: an argument that is missing, of the wrong type or names
 * what is not the session's is refused with a message naming it; out of
 * memory refuses the request and leaves nothing pinned. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cache.h"
#include "rpc/dispatch.h"
#include "core/exec.h"
#include "base/log.h"
#include "core/fuse.h"
#include "core/program.h"
#include "core/quota.h"
#include "core/replay.h"
#include "core/snapshot.h"
#include "rpc/reply.h"
#include "core/core.h"
#include "rpc/conn.h"
#include "rpc/program_decode.h"

/* A define's state between its halves: the snapshot it reads instead of
 * the core, and the program it made. */
typedef struct {
    gg_define_env env;
    gg_snapshot snap;
    int buckets[GG_MAX_BUCKETS];
    gg_program *p;
} define_job;

static int define_snap_buffer(const gg_define_env *env, uint64_t id, gg_buffer **out,
                              proto_errbuf *e)
{
    return gg_snapshot_buffer(env->ctx, id, out, e);
}

static int define_snap_program(const gg_define_env *env, uint64_t id, gg_program **out,
                               proto_errbuf *e)
{
    return gg_snapshot_program(env->ctx, id, out, e);
}

static int define_begin(gg_call *c, void **state)
{
    define_job *j = calloc(1, sizeof(*j));
    if (!j || gg_snapshot_take(c->core, c->sess, &j->snap) < 0) {
        free(j);
        return proto_fail(&c->err, -ENOMEM, "out of memory");
    }
    memcpy(j->buckets, c->core->cfg->buckets, sizeof(j->buckets));
    j->env = (gg_define_env){.s = c->sess, .buckets = j->buckets,
                             .nbuckets = c->core->cfg->nbuckets, .fuse = c->core->cfg->fuse,
                             .lookup = define_snap_buffer, .program = define_snap_program,
                             .ctx = &j->snap};
    c->core->defines_checking++;
    *state = j;
    return 0;
}

static int define_work(void *state, const msgpack_object *params, proto_errbuf *e)
{
    define_job *j = state;
    if (!params)
        return proto_fail(e, -EINVAL, "program.define needs {name, tensors, nodes}");
    gg_program_spec spec;
    int rc = gg_decode_define(params, &spec, e);
    if (rc == 0)
        rc = gg_program_build(&j->env, &spec, &j->p, e);
    gg_decode_define_free(&spec);
    return rc;
}

static int define_answer(gg_call *c, gg_program *p);

static int define_end(gg_call *c, void *state, int rc)
{
    define_job *j = state;
    j->env.s->core->defines_checking--;
    gg_snapshot_free(&j->snap);
    gg_program *p = j->p;
    free(j);
    if (rc < 0 || !c) {
        if (p)
            gg_program_discard(p);
        return rc;
    }
    if ((rc = gg_program_commit(c->core, p, &c->err)) < 0)
        return rc;
    return define_answer(c, p);
}

/* One node list's work: a node is one unit, a call the tensors and nodes it
 * copies in.  A callee that cannot be found counts one: the define fails
 * on it later, having done nothing costly. */
static uint64_t define_cost_nodes(gg_call *c, const msgpack_object *arr)
{
    if (!arr || arr->type != MSGPACK_OBJECT_ARRAY)
        return 0;
    uint64_t units = 0;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *no = &arr->via.array.ptr[i];
        units++;
        const msgpack_object *op = proto_map_get(no, "op");  /* NULL: not a map, or no op */
        if (!op || !proto_str_eq(op, "call"))
            continue;
        const msgpack_object *po = proto_map_get(no, "program"), *bo = proto_map_get(no, "branch");
        uint64_t id, b = 0;
        gg_program *callee;
        char msg[160];
        if (!po || !proto_obj_u64(po, &id) || (bo && !proto_obj_u64(bo, &b)) ||
            gg_program_lookup(c->core, c->sess, id, &callee, &(proto_errbuf){msg, sizeof(msg)}) < 0 ||
            b >= (uint64_t)callee->nbranches)
            continue;
        units += (uint64_t)callee->ntensors + (uint64_t)callee->branches[b].nnodes;
    }
    return units;
}

/* The tensors and nodes the define will hold, calls expanded: known from
 * the request and the callees before any of it is built. */
static uint64_t define_cost(gg_call *c)
{
    const msgpack_object *params = c->params;
    if (!params || params->type != MSGPACK_OBJECT_MAP)
        return 0;
    const msgpack_object *t = proto_map_get(params, "tensors");
    uint64_t units = t && t->type == MSGPACK_OBJECT_MAP ? t->via.map.size : 0;
    units += define_cost_nodes(c, proto_map_get(params, "nodes"));
    const msgpack_object *br = proto_map_get(params, "branches");
    if (br && br->type == MSGPACK_OBJECT_ARRAY)
        for (uint32_t b = 0; b < br->via.array.size; b++)
            units += define_cost_nodes(c, &br->via.array.ptr[b]);
    return units;
}

const gg_offload gg_method_program_define_offload = {
    .cost = define_cost, .begin = define_begin, .work = define_work, .end = define_end,
};

/* A define that is small enough to check on the loop reads the core
 * directly: a snapshot of every id would cost more than the define. */
int gg_method_program_define(gg_call *c)
{
    if (!c->params)
        return proto_fail(&c->err, -EINVAL, "program.define needs {name, tensors, nodes}");
    gg_program_spec spec;
    gg_program *p;
    int rc = gg_decode_define(c->params, &spec, &c->err);
    if (rc == 0)
        rc = gg_program_define(c->core, c->sess, &spec, &p, &c->err);
    gg_decode_define_free(&spec);
    if (rc < 0)
        return rc;
    return define_answer(c, p);
}

static int define_answer(gg_call *c, gg_program *p)
{
    int nodes = 0;
    for (int b = 0; b < p->nbranches; b++)
        nodes += p->branches[b].nnodes;
    gg_log_fields f = {.session = c->sess->id, .program = p->id};
    GG_LOG(GG_LOG_DEBUG, &f, "program '%s' defined: %d node(s) (%d launch(es) a replay, all "
           "branches) in %d branch(es), %d bucket(s), %d warm graph(s) adopted", p->name, nodes,
           gg_fuse_kernels(p), p->nbranches, p->nbuckets, p->warm);
    msgpack_packer *pk = c->pk;
    msgpack_pack_map(pk, 7);
    proto_pack_kv_u64(pk, "id", p->id);
    proto_pack_kv_i64(pk, "warm", p->warm);
    proto_pack_key(pk, "buckets");
    msgpack_pack_array(pk, p->nbuckets);
    for (int i = 0; i < p->nbuckets; i++)
        msgpack_pack_int(pk, p->buckets[i]);
    proto_pack_kv_i64(pk, "max_batch", p->max_batch);
    proto_pack_kv_i64(pk, "branches", p->nbranches);
    proto_pack_kv_i64(pk, "nodes", nodes);
    proto_pack_kv_i64(pk, "kernels", gg_fuse_kernels(p));
    return 0;
}

static int prog_arg(gg_call *c, const char *key, gg_program **p)
{
    uint64_t id;
    int rc = proto_get_u64(c->params, key, true, UINT64_MAX, &id, &c->err);
    if (rc < 0)
        return rc;
    return gg_program_lookup(c->core, c->sess, id, p, &c->err);
}

int gg_method_program_release(gg_call *c)
{
    gg_program *p;
    int rc = prog_arg(c, "id", &p);
    if (rc < 0)
        return rc;
    uint64_t id = p->id;
    gg_program_release(p);
    msgpack_pack_map(c->pk, 1);
    proto_pack_kv_u64(c->pk, "id", id);
    return 0;
}

int gg_method_program_list(gg_call *c)
{
    gg_session *s = c->sess;
    unsigned n = 0;
    for (gg_list *l = s->programs.next; l != &s->programs; l = l->next)
        n++;
    msgpack_pack_map(c->pk, 1);
    proto_pack_key(c->pk, "programs");
    msgpack_pack_array(c->pk, n);
    for (gg_list *l = s->programs.next; l != &s->programs; l = l->next) {
        gg_program *p = gg_container_of(l, gg_program, sess_link);
        int nodes = 0;
        for (int b = 0; b < p->nbranches; b++)
            nodes += p->branches[b].nnodes;
        msgpack_pack_map(c->pk, 7);
        proto_pack_kv_u64(c->pk, "id", p->id);
        proto_pack_kv_str(c->pk, "name", p->name);
        proto_pack_kv_i64(c->pk, "nodes", nodes);
        proto_pack_kv_i64(c->pk, "kernels", gg_fuse_kernels(p));
        proto_pack_kv_i64(c->pk, "branches", p->nbranches);
        proto_pack_key(c->pk, "buckets");
        msgpack_pack_array(c->pk, p->nbuckets);
        for (int i = 0; i < p->nbuckets; i++)
            msgpack_pack_int(c->pk, p->buckets[i]);
        proto_pack_kv_i64(c->pk, "max_batch", p->max_batch);
    }
    return 0;
}

int gg_method_program_rebind(gg_call *c)
{
    gg_program *p;
    int rc = prog_arg(c, "id", &p);
    if (rc < 0)
        return rc;
    int n = 0;
    gg_rebind_spec spec;
    rc = gg_decode_rebind(proto_map_get(c->params, "tensors"), &spec, &c->err);
    if (rc == 0)
        rc = gg_program_rebind(c->core, p, &spec, &n, &c->err);
    gg_decode_rebind_free(&spec);
    if (rc < 0)
        return rc;
    msgpack_pack_map(c->pk, 3);
    proto_pack_kv_u64(c->pk, "id", p->id);
    proto_pack_kv_i64(c->pk, "rebound", n);
    proto_pack_kv_i64(c->pk, "max_batch", p->max_batch);
    return 0;
}

/* The launch of a checked replay: from the loop when it is a cheap cache
 * hit, else by the executor. */
static int replay_go(gg_call *c, gg_replay_target *t)
{
    gg_cache_entry *hit = gg_replay_hit(c->core, c->sess, t);
    int rc;
    gg_job *j = gg_replay_job(c->core, c->sess, t, &gg_rpc_replay_ops, c->msgid, NULL, &rc,
                              &c->err);
    if (!j)
        return rc;
    /* A ready graph whose launch is cheap goes from here: no worker hand-off
     * and, on the cpu backend, the answer before the loop polls again. */
    if (hit && gg_exec_hit_cheap(c->core, hit))
        gg_exec_hit(c->core, j);
    else
        gg_exec_queue(c->core, j);
    return GG_CALL_ASYNC;
}

bool gg_replay_req_plain(const proto_replay_req *q)
{
    unsigned need = PROTO_RQ_PROGRAM | PROTO_RQ_BATCH;
    return (q->has & need) == need && q->batch <= GG_MAX_BATCH &&
           (!(q->has & PROTO_RQ_BRANCH) || q->branch <= UINT32_MAX);
}

/* A replay's params read into the request the byte scanner fills
 * (conn.c, proto_replay_req_scan): every key's type and range, nothing
 * looked up yet.  Absent or nil: not in q->has. */
static int replay_decode(gg_call *c, proto_replay_req *q)
{
    static const struct {
        const char *key;
        unsigned bit;
        bool required;
        uint64_t max;
    } keys[] = {
        {"program", PROTO_RQ_PROGRAM, true, UINT64_MAX},
        {"batch", PROTO_RQ_BATCH, true, GG_MAX_BATCH},
        {"branch", PROTO_RQ_BRANCH, false, UINT32_MAX},
        {"wait_event", PROTO_RQ_WAIT_EVENT, false, UINT64_MAX},
        {"signal_event", PROTO_RQ_SIGNAL_EVENT, false, UINT64_MAX},
    };
    uint64_t *vals[] = {&q->program, &q->batch, &q->branch, &q->wait_event, &q->signal_event};
    memset(q, 0, sizeof(*q));
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        int rc = proto_get_u64(c->params, keys[i].key, keys[i].required, keys[i].max, vals[i],
                               &c->err);
        if (rc == 0)
            q->has |= keys[i].bit;
        else if (rc != -ENOENT || keys[i].required)
            return rc;
    }
    int rc = proto_get_bool(c->params, "async", false, &q->async, &c->err);
    if (rc == 0)
        q->has |= PROTO_RQ_ASYNC;
    else if (rc != -ENOENT)
        return rc;
    return 0;
}

/* A replay request, however it was read (its bytes scanned, or its params
 * decoded): looked up and checked in one order, with one set of
 * messages, then launched. */
static int replay_request(gg_call *c, const proto_replay_req *q)
{
    gg_replay_target t = {0};
    int rc;
    if ((rc = gg_program_lookup(c->core, c->sess, q->program, &t.prog, &c->err)) < 0)
        return rc;
    if (q->batch == 0)
        return proto_fail(&c->err, -EINVAL, "argument 'batch' must be at least 1");
    t.batch = (int)q->batch;
    if ((rc = gg_replay_target_check(&t, q->has & PROTO_RQ_BRANCH ? q->branch : 0, &c->err)) < 0)
        return rc;
    if ((q->has & PROTO_RQ_WAIT_EVENT) &&
        (rc = gg_event_lookup(c->core, c->sess, q->wait_event, &t.wait_ev, &c->err)) < 0)
        return rc;
    if ((q->has & PROTO_RQ_SIGNAL_EVENT) &&
        (rc = gg_event_lookup(c->core, c->sess, q->signal_event, &t.signal_ev, &c->err)) < 0)
        return rc;
    t.async = (q->has & PROTO_RQ_ASYNC) && q->async;
    return replay_go(c, &t);
}

int gg_method_replay(gg_call *c)
{
    if (c->rq)
        return replay_request(c, c->rq);
    proto_replay_req q;
    int rc = replay_decode(c, &q);
    return rc < 0 ? rc : replay_request(c, &q);
}

int gg_method_program_prepare(gg_call *c)
{
    gg_program *p;
    int rc = prog_arg(c, "id", &p);
    if (rc < 0)
        return rc;
    int bidx[GG_MAX_BUCKETS], nb = 0;
    const msgpack_object *bk;
    rc = proto_get_array(c->params, "buckets", false, &bk, &c->err);
    if (rc == 0) {
        if (bk->via.array.size > GG_MAX_BUCKETS)
            return proto_fail(&c->err, -EINVAL, "buckets: at most %d", GG_MAX_BUCKETS);
        for (uint32_t i = 0; i < bk->via.array.size; i++) {
            uint64_t v;
            int found = -1;
            if (proto_obj_u64(&bk->via.array.ptr[i], &v))
                for (int k = 0; k < p->nbuckets; k++)
                    if ((uint64_t)p->buckets[k] == v)
                        found = k;
            if (found < 0)
                return proto_fail(&c->err, -EINVAL, "buckets[%u] is not one of the program's "
                                  "buckets (program.list shows them)", i);
            for (int k = 0; k < nb; k++)
                if (bidx[k] == found)
                    return proto_fail(&c->err, -EINVAL, "buckets[%u] is listed twice", i);
            bidx[nb++] = found;
        }
    } else if (rc == -ENOENT) {
        for (int k = 0; k < p->nbuckets; k++)
            bidx[nb++] = k;
    } else {
        return rc;
    }
    uint64_t branch;
    int b0 = 0, b1 = p->nbranches;
    rc = proto_get_u64(c->params, "branch", false, UINT32_MAX, &branch, &c->err);
    if (rc == 0) {
        if ((int64_t)branch >= p->nbranches)
            return proto_fail(&c->err, -EINVAL, "branch %llu does not exist: program has %d",
                              (unsigned long long)branch, p->nbranches);
        b0 = (int)branch;
        b1 = b0 + 1;
    } else if (rc != -ENOENT) {
        return rc;
    }
    if (!c->core->cfg->graphs_enabled)
        return proto_fail(&c->err, -EPERM, "graphs are disabled on this daemon (GFXGRAPH=0)");
    int n = nb * (b1 - b0);
    if ((rc = gg_quota_jobs(c->core, c->sess->uid,
                            gg_exec_uid_jobs(c->core->exec, c->sess->uid), &c->err)) < 0)
        return rc;
    gg_job *j = gg_job_new(GG_JOB_PREPARE, c->sess, &gg_rpc_prepare_ops, c->msgid, p, n);
    if (!j)
        return proto_fail(&c->err, -ENOMEM, "out of memory");
    for (int b = b0; b < b1; b++)
        for (int k = 0; k < nb; k++) {
            gg_cache_entry *e;
            if ((rc = gg_cache_get(c->core->cache, p, b, bidx[k], &e)) < 0) {
                gg_job_free(j);
                return proto_fail(&c->err, rc, "out of memory");
            }
            gg_cache_retry(c->core->cache, e);
            j->entries[j->nentries++] = e;
        }
    gg_exec_queue(c->core, j);
    return GG_CALL_ASYNC;
}
