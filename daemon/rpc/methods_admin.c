/* SPDX-License-Identifier: MIT */
/* admin.evict, admin.kill_session: the operator's verbs (gfxgraphctl evict,
 * kill-session).  Allowed for whoever sees every uid in stats: root, the
 * daemon's own uid and members of admin-group (core/quota.h); anyone else
 * gets EPERM naming who may. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "core/cache.h"
#include "core/core.h"
#include "core/program.h"
#include "core/quota.h"
#include "core/session.h"
#include "rpc/conn.h"
#include "rpc/dispatch.h"

static int admin_allowed(gg_call *c, const char *method)
{
    const gg_session *s = c->sess;
    if (gg_quota_sees_all(c->core, s->uid, s->gid))
        return 0;
    const char *g = c->core->cfg->admin_group;
    return proto_fail(&c->err, -EPERM,
                      "%s is for root, the daemon's uid (%u) and members of admin-group (%s); "
                      "uid %u is none of them", method, (unsigned)geteuid(),
                      g[0] ? g : "none set", (unsigned)s->uid);
}

typedef struct {
    bool all;
    uint64_t id;                /* by id when non-zero */
    const char *name;           /* else by name */
    size_t len;
} admin_sel;

static bool admin_match(const gg_cache_entry *e, const void *arg)
{
    const admin_sel *sel = arg;
    if (sel->all)
        return true;
    if (sel->id)
        return e->prog_id == sel->id;
    return strlen(e->prog_name) == sel->len && memcmp(e->prog_name, sel->name, sel->len) == 0;
}

/* A live program the selection names (one without cache entries yet). */
static bool admin_program_exists(const gg_core *core, const admin_sel *sel)
{
    size_t pos = 0;
    uint64_t id;
    for (gg_program *p; (p = gg_idmap_next(&core->programs, &pos, &id));)
        if (sel->id ? p->id == sel->id
                    : strlen(p->name) == sel->len && memcmp(p->name, sel->name, sel->len) == 0)
            return true;
    return false;
}

int gg_method_admin_evict(gg_call *c)
{
    int rc = admin_allowed(c, "admin.evict");
    if (rc < 0)
        return rc;
    admin_sel sel = {0};
    const msgpack_object *prog = c->params ? proto_map_get(c->params, "program") : NULL;
    if ((rc = proto_get_bool(c->params, "all", false, &sel.all, &c->err)) < 0 && rc != -ENOENT)
        return rc;
    if (!prog == !sel.all)
        return proto_fail(&c->err, -EINVAL, "admin.evict wants either program (a name or an "
                          "id) or all: true");
    if (prog && prog->type == MSGPACK_OBJECT_STR) {
        sel.name = prog->via.str.ptr;
        sel.len = prog->via.str.size;
        if (sel.len == 0 || sel.len >= sizeof(((gg_program *)0)->name))
            return proto_fail(&c->err, -EINVAL, "program: a name is 1 to %zu bytes",
                              sizeof(((gg_program *)0)->name) - 1);
    } else if (prog && (!proto_obj_u64(prog, &sel.id) || sel.id == 0)) {
        return proto_fail(&c->err, -EINVAL, "program: wants a program name (str) or id (uint)");
    }
    unsigned evicted, deferred;
    unsigned matched = gg_cache_evict_matching(c->core->cache, admin_match, &sel, &evicted,
                                               &deferred);
    if (!sel.all && matched == 0 && !admin_program_exists(c->core, &sel)) {
        if (sel.id)
            return proto_fail(&c->err, -ENOENT, "no program %llu (and no parked graphs of it)",
                              (unsigned long long)sel.id);
        return proto_fail(&c->err, -ENOENT, "no program named '%.*s' (and no parked graphs "
                          "of one)", (int)sel.len, sel.name);
    }
    gg_log_fields f = {.session = c->sess->id};
    char what[96];
    if (sel.all)
        snprintf(what, sizeof(what), "every graph");
    else if (sel.id)
        snprintf(what, sizeof(what), "program %llu", (unsigned long long)sel.id);
    else
        snprintf(what, sizeof(what), "program '%.*s'", (int)sel.len, sel.name);
    GG_LOG(GG_LOG_INFO, &f, "evict %s, asked by uid %u (pid %d): %u graph(s) evicted, %u in "
           "use evicted when their replays end", what, (unsigned)c->sess->uid, (int)c->sess->pid,
           evicted, deferred);
    msgpack_packer *pk = c->pk;
    msgpack_pack_map(pk, 4);
    proto_pack_kv_u64(pk, "matched", matched);
    proto_pack_kv_u64(pk, "evicted", evicted);
    proto_pack_kv_u64(pk, "deferred", deferred);
    proto_pack_kv_u64(pk, "graphs_cached", gg_cache_count(c->core->cache));
    return 0;
}

int gg_method_admin_kill_session(gg_call *c)
{
    int rc = admin_allowed(c, "admin.kill_session");
    if (rc < 0)
        return rc;
    uint64_t id;
    if ((rc = proto_get_u64(c->params, "id", true, UINT64_MAX, &id, &c->err)) < 0)
        return rc;
    if (id == c->sess->id)
        return proto_fail(&c->err, -EINVAL, "session %llu is the caller's own: close the "
                          "connection instead", (unsigned long long)id);
    struct gg_conn *cn = c->rpc->conns;
    while (cn && !(gg_conn_session(cn) && gg_conn_session(cn)->id == id))
        cn = gg_conn_next(cn);
    if (!cn || gg_conn_closing(cn))
        return proto_fail(&c->err, -ENOENT, "no session %llu connected%s",
                          (unsigned long long)id, cn ? " (it is already closing)" : "");
    const gg_session *s = gg_conn_session(cn);
    unsigned nbuf = 0, nprog = 0;
    for (const gg_list *l = s->buffers.next; l != &s->buffers; l = l->next)
        nbuf++;
    for (const gg_list *l = s->programs.next; l != &s->programs; l = l->next)
        nprog++;
    msgpack_packer *pk = c->pk;
    msgpack_pack_map(pk, 8);
    proto_pack_kv_u64(pk, "session", s->id);
    proto_pack_kv_str(pk, "client", s->client);
    proto_pack_kv_i64(pk, "pid", s->pid);
    proto_pack_kv_i64(pk, "uid", (int64_t)s->uid);
    proto_pack_kv_u64(pk, "buffers", nbuf);
    proto_pack_kv_u64(pk, "programs", nprog);
    proto_pack_kv_bool(pk, "fastpath", c->rpc->fp && c->rpc->fp->attached(c->rpc->fp->ctx, s));
    proto_pack_kv_u64(pk, "requests", s->requests);
    gg_log_fields f = {.session = s->id};
    GG_LOG(GG_LOG_INFO, &f, "killing session %llu (pid %d, uid %u, client '%s'), asked by uid "
           "%u (pid %d, session %llu)", (unsigned long long)s->id, (int)s->pid,
           (unsigned)s->uid, s->client, (unsigned)c->sess->uid, (int)c->sess->pid,
           (unsigned long long)c->sess->id);
    /* The client's own disconnect path: answers already queued still go,
     * then the fast-path region closes and the session is detached.  The
     * client is told first, with a code of its own (ECONNABORTED), so it
     * can tell an operator's kill from a daemon that died. */
    char why[200];
    snprintf(why, sizeof(why), "session %llu was closed by an operator (admin.kill_session, "
             "gfxgraphctl kill-session, by uid %u pid %d)", (unsigned long long)s->id,
             (unsigned)c->sess->uid, (int)c->sess->pid);
    gg_conn_close_error(cn, -ECONNABORTED, why);
    return 0;
}
