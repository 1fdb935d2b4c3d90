/* SPDX-License-Identifier: MIT */
/* The method table.  Names are the wire names; the table is searched by
 * length-checked compare because method strings arrive unterminated. */
#include "rpc/dispatch.h"

#include <stdio.h>
#include <string.h>

#define M(name, fn, ...) {name, fn, sizeof(name) - 1, (const char *const[]){__VA_ARGS__ NULL}, NULL}
/* one whose large requests are worked on off the loop (gg_offload) */
#define MO(name, fn, off, ...) \
    {name, fn, sizeof(name) - 1, (const char *const[]){__VA_ARGS__ NULL}, off}

/* Every key a method reads is listed with it: a misspelt one (bucket: for
 * buckets:, asynch: for async:) is refused instead of silently ignored.
 * A method that gains an argument gains its key here. */
static const gg_method dispatch_methods[] = {
    M("hello", gg_method_hello, "protocol", "client",),
    M("stats", gg_method_stats),
    M("health", gg_method_health),
    M("config", gg_method_config),
    M("metrics", gg_method_metrics),
    M("buffer.register", gg_method_buffer_register, "handle", "offset", "size", "fd",),
    M("buffer.release", gg_method_buffer_release, "id",),
    M("buffer.list", gg_method_buffer_list),
    M("event.register", gg_method_event_register, "handle",),
    M("event.release", gg_method_event_release, "id",),
    MO("program.define", gg_method_program_define, &gg_method_program_define_offload, "name",
       "buckets", "tensors", "nodes", "branches",),
    M("program.release", gg_method_program_release, "id",),
    M("program.list", gg_method_program_list),
    M("program.prepare", gg_method_program_prepare, "id", "buckets", "branch",),
    M("program.rebind", gg_method_program_rebind, "id", "tensors",),
    M("replay", gg_method_replay, "program", "batch", "branch", "wait_event", "signal_event",
      "async",),
    M("fastpath.open", gg_method_fastpath_open, "entries",),
    M("admin.evict", gg_method_admin_evict, "program", "all",),
    M("admin.kill_session", gg_method_admin_kill_session, "id",),
};

int gg_dispatch_check(const gg_method *m, const msgpack_object *params, proto_errbuf *e)
{
    char what[64];
    snprintf(what, sizeof(what), "%s's params", m->name);
    return proto_check_keys(params, m->keys, what, e);
}

const gg_method *gg_dispatch_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(dispatch_methods) / sizeof(dispatch_methods[0]); i++)
        if (dispatch_methods[i].len == len &&
            memcmp(dispatch_methods[i].name, name, len) == 0)
            return &dispatch_methods[i];
    return NULL;
}

const gg_method *gg_dispatch_table(size_t *n)
{
    *n = sizeof(dispatch_methods) / sizeof(dispatch_methods[0]);
    return dispatch_methods;
}
