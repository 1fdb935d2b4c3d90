/* SPDX-License-Identifier: MIT */
/* Scratch arenas (arena.h). */
#include "core/arena.h"

#include <stdlib.h>

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

bool gg_arena_unref(gg_arena *a)
{
    return a && --a->refs == 0;
}
