/* The method table.  Names are the wire names; the table is searched by
 * length-checked compare because method strings arrive unterminated. */
#include "rpc/dispatch.h"

#include <string.h>

static const gg_method dispatch_methods[] = {
    {"hello", gg_method_hello},
    {"stats", gg_method_stats},
    {"health", gg_method_health},
    {"buffer.register", gg_method_buffer_register},
    {"buffer.release", gg_method_buffer_release},
    {"buffer.list", gg_method_buffer_list},
    {"event.register", gg_method_event_register},
    {"event.release", gg_method_event_release},
    {"program.define", gg_method_program_define},
    {"program.release", gg_method_program_release},
    {"program.list", gg_method_program_list},
    {"program.prepare", gg_method_program_prepare},
    {"program.rebind", gg_method_program_rebind},
    {"replay", gg_method_replay},
    {"fastpath.open", gg_method_fastpath_open},
};

const gg_method *gg_dispatch_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(dispatch_methods) / sizeof(dispatch_methods[0]); i++)
        if (strlen(dispatch_methods[i].name) == len &&
            memcmp(dispatch_methods[i].name, name, len) == 0)
            return &dispatch_methods[i];
    return NULL;
}

const gg_method *gg_dispatch_table(size_t *n)
{
    *n = sizeof(dispatch_methods) / sizeof(dispatch_methods[0]);
    return dispatch_methods;
}
