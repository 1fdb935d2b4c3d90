/* SPDX-License-Identifier: MIT */
/* Replies that leave after their handler returned, and the packing of the
 * core's answers (replay outcomes, prepared entries, the cache table) into
 * exactly the maps PROTOCOL.md documents: key order included, since
 * clients and tests/test_daemon_doc.c compare bytes.  An answer is packed
 * into its connection's reusable reply buffer and written from there
 * (gg_conn_reply_*): no allocation per answer. */
#include "rpc/reply.h"

#include <stdbool.h>

#include "base/clock.h"
#include "core/core.h"
#include "core/program.h"
#include "proto.h"
#include "rpc/conn.h"

/* Where an answer for a client that has gone is packed: nowhere. */
static int reply_discard(void *data, const char *buf, size_t len)
{
    (void)data;
    (void)buf;
    (void)len;
    return 0;
}

static msgpack_packer reply_void = {.data = NULL, .callback = reply_discard};

msgpack_packer *gg_rpc_reply_begin(gg_session *s, uint32_t msgid)
{
    struct gg_conn *conn = s->transport;   /* rpc's sessions carry their gg_conn */
    msgpack_packer *pk = conn ? gg_conn_reply_begin(conn) : &reply_void;
    proto_pack_response_head(pk, msgid);
    return pk;
}

void gg_rpc_reply_end(gg_session *s)
{
    struct gg_conn *conn = s->transport;
    if (conn)
        gg_conn_reply_end(conn);
}

void gg_rpc_reply_error(gg_session *s, uint32_t msgid, int neg_errno, const char *message)
{
    struct gg_conn *conn = s->transport;
    s->errors++;
    s->core->stats.errors++;
    gg_metrics_error(&s->core->stats.metrics, neg_errno);
    if (!conn)
        return;
    proto_pack_error_response(gg_conn_reply_begin(conn), msgid, neg_errno, message);
    gg_conn_reply_end(conn);
}

/* The replay answer less its reason: head 8 bytes at most, map 1, keys
 * and values 90 at most. */
#define REPLY_REPLAY_MAX 128

static void reply_replay(gg_job *j, const gg_replay_outcome *o)
{
    if (o->rc < 0) {
        gg_rpc_reply_error(j->sess, (uint32_t)j->tag, o->rc, o->reason);
        return;
    }
    struct gg_conn *conn = j->sess->transport;
    if (!conn)
        return;                     /* the client has gone: nowhere to answer */
    /* The bytes the packer calls below would give, written directly: this
     * answer goes out once per replay. */
    msgpack_packer *rpk = gg_conn_reply_begin(conn);
    msgpack_sbuffer *sb = gg_conn_reply_sbuffer(conn);
    uint8_t *p0 = proto_sbuffer_room(sb, REPLY_REPLAY_MAX);
    if (p0) {
        uint8_t *p = p0;
        *p++ = 0x94;                /* [1, msgid, nil, {...}] */
        *p++ = GG_MSG_RESPONSE;
        p = proto_w_uint(p, (uint32_t)j->tag);
        *p++ = 0xc0;
        *p++ = (uint8_t)(0x80 | (o->has_reason ? 9 : 8));
        p = PROTO_W_KEY(p, "path");
        p = o->graph ? PROTO_W_KEY(p, "graph") : PROTO_W_KEY(p, "eager");
        p = PROTO_W_KEY(p, "bucket");
        p = proto_w_int(p, o->bucket);
        p = PROTO_W_KEY(p, "batch");
        p = proto_w_int(p, o->batch);
        p = PROTO_W_KEY(p, "branch");
        p = proto_w_int(p, o->branch);
        p = PROTO_W_KEY(p, "fallback");
        p = proto_w_bool(p, o->fallback);
        p = PROTO_W_KEY(p, "captured");
        p = proto_w_bool(p, o->captured);
        p = PROTO_W_KEY(p, "async");
        p = proto_w_bool(p, o->async);
        p = PROTO_W_KEY(p, "device_us");
        p = proto_w_f64(p, o->device_us);
        sb->size += (size_t)(p - p0);
        if (o->has_reason)
            proto_pack_kv_str(rpk, "reason", o->reason);
        gg_conn_reply_end(conn);
        return;
    }
    msgpack_packer *pk = gg_rpc_reply_begin(j->sess, (uint32_t)j->tag);
    msgpack_pack_map(pk, (o->has_reason ? 9 : 8));
    proto_pack_kv_str(pk, "path", o->graph ? "graph" : "eager");
    proto_pack_kv_i64(pk, "bucket", o->bucket);
    proto_pack_kv_i64(pk, "batch", o->batch);
    proto_pack_kv_i64(pk, "branch", o->branch);
    proto_pack_kv_bool(pk, "fallback", o->fallback);
    proto_pack_kv_bool(pk, "captured", o->captured);
    proto_pack_kv_bool(pk, "async", o->async);
    proto_pack_kv_f64(pk, "device_us", o->device_us);
    if (o->has_reason)
        proto_pack_kv_str(pk, "reason", o->reason);
    gg_rpc_reply_end(j->sess);
}

static void reply_prepare(gg_job *j, const gg_replay_outcome *o)
{
    if (o->rc < 0) {
        gg_rpc_reply_error(j->sess, (uint32_t)j->tag, o->rc, o->reason);
        return;
    }
    msgpack_packer *pk = gg_rpc_reply_begin(j->sess, (uint32_t)j->tag);
    msgpack_pack_map(pk, 2);
    proto_pack_kv_u64(pk, "id", j->prog->id);
    proto_pack_key(pk, "prepared");
    msgpack_pack_array(pk, j->nentries);
    for (int i = 0; i < j->nentries; i++) {
        gg_cache_entry *e = j->entries[i];
        bool failed = e->state == GG_ENTRY_FAILED;
        msgpack_pack_map(pk, failed ? 4 : 3);
        proto_pack_kv_i64(pk, "branch", e->branch);
        proto_pack_kv_i64(pk, "bucket", e->bucket);
        proto_pack_kv_str(pk, "state", failed ? "failed" : e->state == GG_ENTRY_READY ? "ready" : "empty");
        if (failed)
            proto_pack_kv_str(pk, "reason", e->reason);
    }
    gg_rpc_reply_end(j->sess);
}

const gg_job_ops gg_rpc_replay_ops = {.done = reply_replay};
const gg_job_ops gg_rpc_prepare_ops = {.done = reply_prepare};

static const char *reply_state_name(gg_entry_state s)
{
    return s == GG_ENTRY_READY ? "ready" : s == GG_ENTRY_FAILED ? "failed" : "empty";
}

unsigned gg_rpc_cache_count(const gg_cache *c, bool all, uid_t uid)
{
    unsigned n = 0;
    for (const gg_cache_entry *e = gg_cache_next(c, NULL); e; e = gg_cache_next(c, e))
        n += all || e->uid == uid;
    return n;
}

void gg_rpc_pack_cache(const gg_cache *c, msgpack_packer *pk, bool all, uid_t uid,
                       unsigned max, bool adaptive)
{
    unsigned n = gg_rpc_cache_count(c, all, uid);
    unsigned skip = n > max ? n - max : 0;   /* the least recently used go */
    uint64_t now = gg_now_ms();
    msgpack_pack_array(pk, n - skip);
    for (const gg_cache_entry *e = gg_cache_next(c, NULL); e; e = gg_cache_next(c, e)) {
        if (!all && e->uid != uid)
            continue;
        if (skip) {
            skip--;
            continue;
        }
        bool failed = e->state == GG_ENTRY_FAILED;
        /* the branch's nodes and launches per replay (core/fuse.h), while
         * its program is defined (a parked graph's program is gone) */
        const gg_branch *br = e->prog ? &e->prog->branches[e->branch] : NULL;
        msgpack_pack_map(pk, (failed ? 14 : 13) + (adaptive ? 5 : 0) + (br ? 2 : 0));
        proto_pack_kv_u64(pk, "program", e->prog_id);
        proto_pack_kv_str(pk, "program_name", e->prog_name);
        proto_pack_kv_u64(pk, "session", e->sess_id);
        proto_pack_kv_bool(pk, "parked", e->parked != NULL);
        proto_pack_kv_i64(pk, "branch", e->branch);
        proto_pack_kv_i64(pk, "bucket", e->bucket);
        proto_pack_kv_str(pk, "state", reply_state_name(e->state));
        proto_pack_kv_u64(pk, "captures", e->captures);
        proto_pack_kv_u64(pk, "instantiations", e->instantiations);
        proto_pack_kv_u64(pk, "replays", e->replays);
        proto_pack_kv_u64(pk, "fallbacks", e->fallbacks);
        proto_pack_kv_f64(pk, "avg_replay_us", gg_stats_avg(e->replay_us_sum, e->replays));
        proto_pack_kv_u64(pk, "idle_s", e->last_used_ms ? (now - e->last_used_ms) / 1000 : 0);
        if (br) {
            proto_pack_kv_i64(pk, "nodes", br->nnodes);
            proto_pack_kv_i64(pk, "kernels", br->nplan);
        }
        if (failed)
            proto_pack_kv_str(pk, "reason", e->reason);
        if (adaptive) {
            const gg_adapt *a = &e->adapt;
            proto_pack_kv_str(pk, "choice", gg_adapt_choice_name((gg_adapt_choice)a->choice));
            proto_pack_kv_str(pk, "choice_from", a->from_memo ? "signature" : "measured");
            proto_pack_kv_f64(pk, "graph_us", a->us[0]);
            proto_pack_kv_f64(pk, "eager_us", a->us[1]);
            proto_pack_kv_u64(pk, "decisions", a->decisions);
        }
    }
}
