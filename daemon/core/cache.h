/* SPDX-License-Identifier: MIT */
/* The graph cache, keyed by (program, branch, bucket): instantiated graphs
 * in LRU order with idle eviction.  Entries in use by a job are pinned and
 * never evicted.  Their scratch is their program's arena (core/arena.h),
 * counted here once per program. */
#ifndef GG_CACHE_H
#define GG_CACHE_H

#include <stdint.h>
#include <sys/types.h>

#include "device/device.h"
#include "proto.h"
#include "core/adapt.h"
#include "core/list.h"

struct gg_core;
struct gg_arena;
struct gg_program;

typedef enum { GG_ENTRY_EMPTY = 0, GG_ENTRY_READY, GG_ENTRY_FAILED } gg_entry_state;

struct gg_parked;

typedef struct gg_cache_entry {
    struct gg_program *prog;        /* NULL while parked */
    struct gg_parked *parked;       /* set while parked (its program is gone) */
    struct gg_cache_entry **slot;   /* where the owner keeps this entry */
    uint64_t prog_id;               /* for stats and logs, also while parked */
    uint64_t sess_id;
    uid_t uid;                      /* its program's client's (stats' scope, quotas) */
    char prog_name[64];
    int branch;
    int bucket_index;
    int bucket;
    gg_list lru_link;
    gg_entry_state state;
    gg_dev_exec *exec;
    size_t footprint;               /* the instantiated graph's own bytes */
    int pins;
    bool evict_deferred;            /* an operator's evict waits for the last unpin */
    unsigned updates;               /* exec updates since instantiate */
    uint64_t gen;                   /* program binding generation captured */
    uint64_t warm_sess;             /* session whose stream ran the warm-up (0: none) */
    uint64_t last_used_ms;
    uint64_t captures, instantiations, replays, fallbacks, validations;
    double replay_us_sum;
    char reason[160];               /* why FAILED */
    gg_adapt adapt;                 /* replay-mode adaptive: graph or eager (core/adapt.h) */
} gg_cache_entry;

typedef struct gg_cache gg_cache;

/* Graphs of a program whose session ended without releasing it, kept warm:
 * a later program.define with the same structure from the same uid adopts
 * them, and each is updated in place (exec update) on its next use instead
 * of being instantiated again.  Only READY entries are parked; the cache's
 * LRU and idle eviction drop them like any other. */
typedef struct gg_parked {
    struct gg_parked *next;
    uid_t uid;
    uint8_t *sig;                   /* the program's structure (program.c) */
    size_t siglen;
    int nslots;
    int live;                       /* entries still held */
    gg_cache_entry **entries;       /* [branch * nbuckets + bucket index] */
    struct gg_arena *arena;         /* the program's scratch, which the graphs point into */
} gg_parked;

/* Parked graphs of uid and their bytes (footprints, and each record's
 * scratch arena once), for its quota. */
void gg_cache_parked_usage(const gg_cache *c, uid_t uid, uint64_t *graphs, uint64_t *bytes);
/* Session end: move p's READY graphs into a parked record (or drop them);
 * those past uid's max-parked-graphs-per-uid / max-parked-bytes-per-uid
 * are dropped (they count against uid after its client has gone). */
void gg_cache_park(gg_cache *c, struct gg_program *p, uid_t uid);
/* program.define: adopt a parked record matching p's structure and uid;
 * returns the number of graphs adopted. */
int gg_cache_adopt(gg_cache *c, struct gg_program *p, uid_t uid);

/* The graphs and arenas it lets go are freed through core->release. */
int gg_cache_new(struct gg_core *core, gg_cache **out);
void gg_cache_free(gg_cache *c);
/* The entry for (p, branch, bucket index), created EMPTY on first use. */
int gg_cache_get(gg_cache *c, struct gg_program *p, int branch, int bucket_index,
                 gg_cache_entry **out);
void gg_cache_pin(gg_cache *c, gg_cache_entry *e);
void gg_cache_unpin(gg_cache *c, gg_cache_entry *e);
/* Mark READY after a capture; may evict others past the capacity. */
void gg_cache_ready(gg_cache *c, gg_cache_entry *e);
/* The entry's graph failed: drop it, run eager from now. */
void gg_cache_fail(gg_cache *c, gg_cache_entry *e, const char *reason);
/* A READY entry's graph is being replaced: take it out of the accounting. */
void gg_cache_unready(gg_cache *c, gg_cache_entry *e);
/* program.prepare: give a FAILED entry another capture. */
void gg_cache_retry(gg_cache *c, gg_cache_entry *e);
/* A program's scratch arena (core/arena.h) counts against the VRAM cap
 * once, however many graphs use it.  Attach: a job allocated a's memory at
 * base (core lock held).  Unref: drop a reference (NULL: none); the last
 * one takes it out of the accounting, frees its memory on an executor
 * thread (core->release) and frees a. */
void gg_cache_arena_attach(gg_cache *c, struct gg_arena *a, uint8_t *base);
void gg_cache_arena_unref(gg_cache *c, struct gg_arena *a);
/* Scratch arenas allocated now, and their bytes. */
unsigned gg_cache_arenas(const gg_cache *c);
size_t gg_cache_arena_bytes(const gg_cache *c);
/* replay-mode adaptive: remembered choices (core/adapt.h).  Seed: the
 * slots remembered for p's uid and structure, for gg_cache_get to start
 * p's entries from (NULL: none).  Decided: e just chose; remember it. */
gg_adapt_slot *gg_cache_adapt_seed(gg_cache *c, const struct gg_program *p);
void gg_cache_adapt_decided(gg_cache *c, const gg_cache_entry *e);
unsigned gg_cache_adapt_memos(const gg_cache *c);
/* Drop an entry's graph (and the entry), e.g. when its program goes. */
void gg_cache_drop(gg_cache *c, gg_cache_entry *e);
void gg_cache_tick(gg_cache *c, uint64_t now_ms);
/* Make room for one more graph of `need` bytes; false if the cap cannot be met. */
bool gg_cache_reserve(gg_cache *c, gg_cache_entry *e, size_t need);
/* An operator's evict (admin.evict): every READY graph that match accepts
 * goes now when unpinned, else when its last pin goes (a running replay
 * keeps its graph).  Counts both; returns the entries match accepted (any
 * state). */
unsigned gg_cache_evict_matching(gg_cache *c, bool (*match)(const gg_cache_entry *, const void *),
                                 const void *arg, unsigned *evicted, unsigned *deferred);
/* Evict least recently used unpinned graphs other than keep until at
 * least bytes of footprint are freed (vram-cap at capture, exec.c);
 * returns the footprint freed: 0, with nothing evicted, when all such
 * graphs together hold less than bytes. */
uint64_t gg_cache_evict_bytes(gg_cache *c, const gg_cache_entry *keep, uint64_t bytes);
unsigned gg_cache_count(const gg_cache *c);
unsigned gg_cache_capacity(const gg_cache *c);
size_t gg_cache_bytes(const gg_cache *c);
/* Every entry, least recently used first (the stats table's order): the
 * first with prev NULL, then the one after prev; NULL past the last.  Loop
 * thread only. */
const gg_cache_entry *gg_cache_next(const gg_cache *c, const gg_cache_entry *prev);

#endif
