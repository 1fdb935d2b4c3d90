/* SPDX-License-Identifier: MIT */
/* One scratch arena per program: the device memory of its scratch tensors,
 * sized for its largest bucket and shared by the graphs and eager runs of
 * every (branch, bucket), as PyTorch's graphs share a private pool.
 *
 * Sharing is sound because runs of one program never overlap: a program
 * belongs to one session, a session's work runs one piece at a time in
 * order on its stream (docs/architecture.md), and every run writes a scratch
 * tensor before it reads it (program.c checks it), so what a run at one
 * bucket leaves behind is never read by the next.  Two sessions never share
 * an arena: a parked record takes the arena over only when its program has
 * nothing in flight, and hands it to at most one program.
 *
 * Reference-counted under the core lock: the program holds one reference,
 * and a parked record another from the moment its session ends, so parked
 * graphs (which point into it) keep valid memory while they are cached and
 * a program that adopts them adopts the arena too.  The memory is allocated
 * once, by the first job of the program that needs it (on an executor
 * thread: allocation may wait for the device), and freed when the last
 * reference goes (on an executor thread too).  The memory counts against
 * the cache's VRAM cap: its attach and last unref are the cache's
 * (gg_cache_arena_attach, gg_cache_arena_unref). */
#ifndef GG_ARENA_H
#define GG_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gg_arena {
    int refs;
    size_t bytes;       /* what a run at the largest bucket needs; 0: no scratch */
    int rows;           /* that bucket */
    uint8_t *base;      /* NULL until allocated; then fixed until freed */
} gg_arena;

/* A new arena of one reference, not yet allocated; NULL when out of memory. */
gg_arena *gg_arena_new(size_t bytes, int rows);
void gg_arena_ref(gg_arena *a);
/* Drop a reference: true when it was the last (the caller frees a and its
 * memory). */
bool gg_arena_unref(gg_arena *a);

#endif
