/* The method table.  Names are the wire names; the table is searched by
 * length-checked compare because method strings arrive unterminated. */
#include "rpc/dispatch.h"

#include <string.h>

#define M(name, fn) {name, fn, sizeof(name) - 1}

static const gg_method dispatch_methods[] = {
    M("hello", gg_method_hello),
    M("stats", gg_method_stats),
    M("health", gg_method_health),
    M("buffer.register", gg_method_buffer_register),
    M("buffer.release", gg_method_buffer_release),
    M("buffer.list", gg_method_buffer_list),
    M("event.register", gg_method_event_register),
    M("event.release", gg_method_event_release),
    M("program.define", gg_method_program_define),
    M("program.release", gg_method_program_release),
    M("program.list", gg_method_program_list),
    M("program.prepare", gg_method_program_prepare),
    M("program.rebind", gg_method_program_rebind),
    M("replay", gg_method_replay),
    M("fastpath.open", gg_method_fastpath_open),
};

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
