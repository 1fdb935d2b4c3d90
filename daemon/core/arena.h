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
 * reference goes (on an executor thread too). */
#ifndef GG_ARENA_H
#define GG_ARENA_H

#include <stddef.h>
#include <stdint.h>

struct gg_core;

typedef struct gg_arena {
    int refs;
    size_t bytes;       /* what a run at the largest bucket needs; 0: no scratch */
    int rows;           /* that bucket */
    uint8_t *base;      /* NULL until allocated; then fixed until freed */
} gg_arena;

/* A new arena of one reference, not yet allocated; NULL when out of memory. */
gg_arena *gg_arena_new(size_t bytes, int rows);
void gg_arena_ref(gg_arena *a);
/* Drop a reference; the last one frees the memory (on an executor thread)
 * and takes it out of the cache's accounting. */
void gg_arena_unref(struct gg_core *core, gg_arena *a);
/* A job allocated a's memory at base (core lock held): record it and count
 * it against the VRAM cap. */
void gg_arena_attach(struct gg_core *core, gg_arena *a, uint8_t *base);

#endif
