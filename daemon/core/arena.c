/* SPDX-License-Identifier: MIT */
/* Scratch arenas (arena.h). */
#include "core/arena.h"

#include <stdlib.h>

#include "core/cache.h"
#include "core/core.h"

gg_arena *gg_arena_new(size_t bytes, int rows)
{
    gg_arena *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->refs = 1;
    a->bytes = bytes;
    a->rows = rows;
    return a;
}

void gg_arena_ref(gg_arena *a)
{
    a->refs++;
}

void gg_arena_unref(gg_core *core, gg_arena *a)
{
    if (!a || --a->refs > 0)
        return;
    if (a->base)
        gg_cache_arena_gone(core->cache, a);
    free(a);
}

void gg_arena_attach(gg_core *core, gg_arena *a, uint8_t *base)
{
    a->base = base;
    gg_cache_arena_added(core->cache, a);
}
