/* SPDX-License-Identifier: MIT */
/* The graph cache.
 *
 * Happy path: gg_cache_get finds or creates the (program, branch, bucket)
 * entry; the executor captures into it once and replays it after; each use
 * moves it to the LRU tail.
 *
 * Failure modes: past cache-entries, or past the VRAM cap, the least
 * recently used unpinned graphs are dropped (their entry stays, EMPTY, with
 * its figures, and is captured again on next use).  A FAILED entry keeps
 * its reason and runs eager until program.prepare asks for a retry.
 * Device memory is freed on an executor thread, never on the loop: freeing
 * can wait for the device. */
#include "core/cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/arena.h"
#include "base/clock.h"
#include "base/log.h"
#include "core/program.h"
#include "core/core.h"

struct gg_cache {
    gg_core *core;
    gg_parked *parked;       /* list */
    gg_list lru;             /* every entry, least recently used first */
    unsigned ready;          /* entries holding a graph */
    size_t bytes;            /* their graph footprints + the arenas' bytes */
    unsigned arenas;         /* scratch arenas allocated (programs' and parked) */
    size_t arena_bytes;
    gg_adapt_memo *memo;     /* replay-mode adaptive's remembered choices */
};

int gg_cache_new(gg_core *core, gg_cache **out)
{
    gg_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->core = core;
    gg_list_init(&c->lru);
    if (!(c->memo = gg_adapt_memo_new())) {
        free(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

static void cache_empty(gg_cache *c, gg_cache_entry *e);

void gg_cache_free(gg_cache *c)
{
    while (c->parked) {
        gg_parked *pk = c->parked;
        for (int i = 0; i < pk->nslots; i++)
            if (pk->entries[i]) {
                gg_cache_entry *e = pk->entries[i];
                cache_empty(c, e);
                gg_list_del(&e->lru_link);
                free(e);
            }
        c->parked = pk->next;
        gg_cache_arena_unref(c, pk->arena);
        free(pk->sig);
        free(pk->entries);
        free(pk);
    }
    gg_adapt_memo_free(c->memo);
    free(c);
}

unsigned gg_cache_count(const gg_cache *c)
{
    return c ? c->ready : 0;
}

unsigned gg_cache_capacity(const gg_cache *c)
{
    return c->core->cfg->cache_entries;
}

size_t gg_cache_bytes(const gg_cache *c)
{
    return c->bytes;
}

unsigned gg_cache_arenas(const gg_cache *c)
{
    return c ? c->arenas : 0;
}

size_t gg_cache_arena_bytes(const gg_cache *c)
{
    return c ? c->arena_bytes : 0;
}

int gg_cache_get(gg_cache *c, gg_program *p, int branch, int bi, gg_cache_entry **out)
{
    gg_cache_entry **slot = &p->entries[branch * p->nbuckets + bi];
    if (!*slot) {
        gg_cache_entry *e = calloc(1, sizeof(*e));
        if (!e)
            return -ENOMEM;
        e->prog = p;
        e->slot = slot;
        e->prog_id = p->id;
        e->sess_id = p->sess->id;
        e->uid = p->sess->uid;
        snprintf(e->prog_name, sizeof(e->prog_name), "%s", p->name);
        e->branch = branch;
        e->bucket_index = bi;
        e->bucket = p->buckets[bi];
        if (p->adapt_seed) {
            const gg_adapt_slot *m = &p->adapt_seed[branch * p->nbuckets + bi];
            gg_adapt_seed(&e->adapt, (gg_adapt_choice)m->choice, m->us[0], m->us[1]);
        }
        gg_list_add_tail(&c->lru, &e->lru_link);
        *slot = e;
    }
    *out = *slot;
    return 0;
}

/* Give the graph back; the entry stays with its figures (and its program
 * with its arena). */
static void cache_empty(gg_cache *c, gg_cache_entry *e)
{
    if (e->state == GG_ENTRY_READY) {
        c->ready--;
        c->bytes -= e->footprint;
    }
    if (e->exec)
        c->core->release(c->core, e->exec, NULL, NULL);
    e->exec = NULL;
    e->footprint = 0;
    e->updates = 0;
    if (e->state == GG_ENTRY_READY)
        e->state = GG_ENTRY_EMPTY;
}

static void cache_evict(gg_cache *c, gg_cache_entry *e, const char *why)
{
    e->evict_deferred = false;
    gg_log_fields f = {.session = e->sess_id, .program = e->prog_id, .bucket = e->bucket};
    GG_LOG(GG_LOG_DEBUG, &f, "evicting graph (%s)%s", why, e->parked ? ", parked" : "");
    c->core->stats.evictions++;
    if (e->parked)
        gg_cache_drop(c, e);   /* nothing left to run it for */
    else
        cache_empty(c, e);
}

/* Evict least recently used graphs until `need` more bytes fit under the
 * cap and the count is under capacity.  Returns false if that cannot be
 * done without touching pinned entries. */
static bool cache_make_room(gg_cache *c, size_t need, unsigned slots)
{
    gg_core *core = c->core;
    uint64_t cap = (uint64_t)(core->cfg->vram_cap * (double)core->devinfo.mem_total);
    for (gg_list *l = c->lru.next, *n; l != &c->lru; l = n) {
        n = l->next;
        if (c->ready + slots <= core->cfg->cache_entries && c->bytes + need <= cap)
            return true;
        gg_cache_entry *e = gg_container_of(l, gg_cache_entry, lru_link);
        if (e->state == GG_ENTRY_READY && e->pins == 0)
            cache_evict(c, e, c->ready + slots > core->cfg->cache_entries ? "capacity" : "VRAM cap");
    }
    return c->ready + slots <= core->cfg->cache_entries && c->bytes + need <= cap;
}


/* A graph larger than the whole cap can never be held.  Otherwise it is
 * taken even when the graphs that would have to go are pinned by queued or
 * running jobs: those pins are short-lived, and gg_cache_unpin brings the
 * cache back under its limits when they end.  Refusing instead would throw
 * away a graph already captured and leave the entry failed for no lasting
 * reason (a prepare pins every entry it captures). */
bool gg_cache_reserve(gg_cache *c, gg_cache_entry *e, size_t need)
{
    (void)e;
    gg_core *core = c->core;
    if (need > (uint64_t)(core->cfg->vram_cap * (double)core->devinfo.mem_total))
        return false;
    cache_make_room(c, need, 1);
    return true;
}

void gg_cache_pin(gg_cache *c, gg_cache_entry *e)
{
    e->pins++;
    e->last_used_ms = gg_now_ms();
    gg_list_del(&e->lru_link);
    gg_list_add_tail(&c->lru, &e->lru_link);
}

void gg_cache_unpin(gg_cache *c, gg_cache_entry *e)
{
    e->pins--;
    if (e->pins != 0)
        return;
    if (e->evict_deferred) {
        if (e->state == GG_ENTRY_READY)
            cache_evict(c, e, "operator, deferred while in use");
        else
            e->evict_deferred = false;
    }
    cache_make_room(c, 0, 0);   /* over the limits while this was pinned */
}

/* Bytes evicting e gives back (0: it cannot go now). */
static uint64_t cache_reclaimable(const gg_cache_entry *e, const gg_cache_entry *keep)
{
    if (e == keep || e->state != GG_ENTRY_READY || e->pins)
        return 0;
    uint64_t n = e->footprint;
    /* the last graph of a parked record takes its arena with it */
    const gg_parked *pk = e->parked;
    if (pk && pk->live == 1 && pk->arena && pk->arena->refs == 1 && pk->arena->base)
        n += pk->arena->bytes;
    return n;
}

uint64_t gg_cache_evict_bytes(gg_cache *c, const gg_cache_entry *keep, uint64_t bytes)
{
    /* all or nothing: graphs are not thrown away for room they cannot make */
    uint64_t can = 0;
    for (gg_list *l = c->lru.next; l != &c->lru && can < bytes; l = l->next)
        can += cache_reclaimable(gg_container_of(l, gg_cache_entry, lru_link), keep);
    if (can < bytes)
        return 0;
    uint64_t freed = 0;
    for (gg_list *l = c->lru.next, *nx; l != &c->lru && freed < bytes; l = nx) {
        nx = l->next;
        gg_cache_entry *e = gg_container_of(l, gg_cache_entry, lru_link);
        uint64_t n = cache_reclaimable(e, keep);
        if (!n)
            continue;
        freed += n;
        cache_evict(c, e, "VRAM cap at capture");
    }
    return freed;
}

unsigned gg_cache_evict_matching(gg_cache *c, bool (*match)(const gg_cache_entry *, const void *),
                                 const void *arg, unsigned *evicted, unsigned *deferred)
{
    unsigned n = 0;
    *evicted = *deferred = 0;
    for (gg_list *l = c->lru.next, *nx; l != &c->lru; l = nx) {
        nx = l->next;   /* a parked entry is freed when evicted */
        gg_cache_entry *e = gg_container_of(l, gg_cache_entry, lru_link);
        if (!match(e, arg))
            continue;
        n++;
        if (e->state != GG_ENTRY_READY)
            continue;
        if (e->pins) {
            e->evict_deferred = true;
            (*deferred)++;
        } else {
            cache_evict(c, e, "operator");
            (*evicted)++;
        }
    }
    return n;
}

void gg_cache_ready(gg_cache *c, gg_cache_entry *e)
{
    e->state = GG_ENTRY_READY;
    c->ready++;
    c->bytes += e->footprint;
    cache_make_room(c, 0, 0);
}

void gg_cache_fail(gg_cache *c, gg_cache_entry *e, const char *reason)
{
    if (e->state == GG_ENTRY_READY) {
        c->ready--;
        c->bytes -= e->footprint;
    }
    if (e->exec)
        c->core->release(c->core, e->exec, NULL, NULL);
    e->exec = NULL;
    e->footprint = 0;
    e->state = GG_ENTRY_FAILED;
    snprintf(e->reason, sizeof(e->reason), "%s", reason);
}

void gg_cache_unready(gg_cache *c, gg_cache_entry *e)
{
    if (e->state != GG_ENTRY_READY)
        return;
    c->ready--;
    c->bytes -= e->footprint;
    e->state = GG_ENTRY_EMPTY;
    e->exec = NULL;
    e->footprint = 0;
}

void gg_cache_retry(gg_cache *c, gg_cache_entry *e)
{
    (void)c;
    if (e->state == GG_ENTRY_FAILED) {
        e->state = GG_ENTRY_EMPTY;
        e->reason[0] = '\0';
    }
}

gg_adapt_slot *gg_cache_adapt_seed(gg_cache *c, const gg_program *p)
{
    if (c->core->cfg->replay_mode != GG_REPLAY_ADAPTIVE)
        return NULL;
    return gg_adapt_memo_get(c->memo, p->sess->uid, p->sig, p->siglen,
                             p->nbranches * p->nbuckets);
}

void gg_cache_adapt_decided(gg_cache *c, const gg_cache_entry *e)
{
    const gg_program *p = e->prog;
    if (p && p->sig)
        gg_adapt_memo_put(c->memo, e->uid, p->sig, p->siglen, p->nbranches * p->nbuckets,
                          e->branch * p->nbuckets + e->bucket_index, &e->adapt);
}

unsigned gg_cache_adapt_memos(const gg_cache *c)
{
    return c ? gg_adapt_memo_count(c->memo) : 0;
}

void gg_cache_arena_attach(gg_cache *c, gg_arena *a, uint8_t *base)
{
    a->base = base;
    c->arenas++;
    c->arena_bytes += a->bytes;
    c->bytes += a->bytes;
    cache_make_room(c, 0, 0);
}

void gg_cache_arena_unref(gg_cache *c, gg_arena *a)
{
    if (!gg_arena_unref(a))
        return;
    if (a->base) {
        c->arenas--;
        c->arena_bytes -= a->bytes;
        c->bytes -= a->bytes;
        c->core->release(c->core, NULL, a->base, NULL);
    }
    free(a);
}

static void cache_parked_free(gg_cache *c, gg_parked *pk)
{
    for (gg_parked **pp = &c->parked; *pp; pp = &(*pp)->next)
        if (*pp == pk) {
            *pp = pk->next;
            break;
        }
    gg_cache_arena_unref(c, pk->arena);
    free(pk->sig);
    free(pk->entries);
    free(pk);
}

void gg_cache_drop(gg_cache *c, gg_cache_entry *e)
{
    cache_empty(c, e);
    gg_list_del(&e->lru_link);
    if (e->slot)
        *e->slot = NULL;
    gg_parked *pk = e->parked;
    free(e);
    if (pk && --pk->live == 0)
        cache_parked_free(c, pk);
}

void gg_cache_parked_usage(const gg_cache *c, uid_t uid, uint64_t *graphs, uint64_t *bytes)
{
    *graphs = *bytes = 0;
    for (const gg_parked *pk = c->parked; pk; pk = pk->next) {
        if (pk->uid != uid)
            continue;
        if (pk->arena && pk->arena->base)
            *bytes += pk->arena->bytes;
        for (int i = 0; i < pk->nslots; i++)
            if (pk->entries[i]) {
                (*graphs)++;
                *bytes += pk->entries[i]->footprint;
            }
    }
}

void gg_cache_park(gg_cache *c, gg_program *p, uid_t uid)
{
    int n = p->nbranches * p->nbuckets, ready = 0, over = 0;
    const gg_config *cfg = c->core->cfg;
    uint64_t held, held_bytes;
    gg_cache_parked_usage(c, uid, &held, &held_bytes);
    /* the arena goes with the graphs, counted once */
    if (p->arena && p->arena->base)
        held_bytes += p->arena->bytes;
    for (int i = 0; i < n; i++) {
        gg_cache_entry *e = p->entries[i];
        if (e && (e->state != GG_ENTRY_READY || e->pins)) {
            gg_cache_drop(c, e);   /* only sound, idle graphs are worth keeping */
        } else if (e && ((cfg->quota_parked && held + 1 > cfg->quota_parked) ||
                         (cfg->quota_parked_bytes &&
                          held_bytes + e->footprint > cfg->quota_parked_bytes))) {
            gg_cache_drop(c, e);   /* past the uid's quota: only this uid loses */
            over++;
        } else if (e) {
            ready++;
            held++;
            held_bytes += e->footprint;
        }
    }
    if (over) {
        gg_log_fields f = {.session = p->sess->id, .program = p->id};
        GG_LOG(GG_LOG_INFO, &f, "uid %u: %d graph(s) of '%s' not parked: past the quota of "
               "%llu parked graphs (max-parked-graphs-per-uid) or %llu bytes "
               "(max-parked-bytes-per-uid)", (unsigned)uid, over, p->name,
               (unsigned long long)cfg->quota_parked, (unsigned long long)cfg->quota_parked_bytes);
    }
    if (!ready)
        return;
    gg_parked *pk = calloc(1, sizeof(*pk));
    uint8_t *sig = pk ? malloc(p->siglen) : NULL;
    if (!pk || !sig) {
        free(pk);
        for (int i = 0; i < n; i++)
            if (p->entries[i])
                gg_cache_drop(c, p->entries[i]);
        return;
    }
    memcpy(sig, p->sig, p->siglen);
    pk->sig = sig;
    pk->siglen = p->siglen;
    pk->uid = uid;
    pk->nslots = n;
    pk->live = ready;
    pk->entries = p->entries;   /* the program gives its slot array away */
    p->entries = NULL;
    /* Nothing of p is in flight (its pins are 0), so the graphs' scratch
     * is the record's alone until a program adopts it. */
    pk->arena = p->arena;
    if (pk->arena)
        gg_arena_ref(pk->arena);
    for (int i = 0; i < n; i++)
        if (pk->entries[i]) {
            pk->entries[i]->prog = NULL;
            pk->entries[i]->parked = pk;
            pk->entries[i]->slot = &pk->entries[i];
        }
    pk->next = c->parked;
    c->parked = pk;
    gg_log_fields f = {.session = p->sess->id, .program = p->id};
    GG_LOG(GG_LOG_DEBUG, &f, "session ended: %d graph(s) of '%s' parked", ready, p->name);
}

int gg_cache_adopt(gg_cache *c, gg_program *p, uid_t uid)
{
    gg_parked *pk = c->parked;
    while (pk && (pk->uid != uid || pk->siglen != p->siglen ||
                  memcmp(pk->sig, p->sig, p->siglen) != 0))
        pk = pk->next;
    if (!pk)
        return 0;
    int n = 0;
    for (int i = 0; i < pk->nslots; i++) {
        gg_cache_entry *e = pk->entries[i];
        if (!e)
            continue;
        p->entries[i] = e;
        e->slot = &p->entries[i];
        e->parked = NULL;
        e->prog = p;
        e->prog_id = p->id;
        e->sess_id = p->sess->id;
        e->uid = p->sess->uid;
        /* Its pointers are the old client's: never launch it before the
         * next use has captured again and updated it in place. */
        e->gen = UINT64_MAX;
        n++;
    }
    /* The graphs point into the record's arena, the same size as p's (the
     * structures are equal): p takes it, and its own (never allocated:
     * p has run nothing yet) goes. */
    if (pk->arena) {
        gg_arena *fresh = p->arena;
        p->arena = pk->arena;
        pk->arena = NULL;
        gg_cache_arena_unref(c, fresh);
    }
    pk->live = 0;
    cache_parked_free(c, pk);
    return n;
}

void gg_cache_tick(gg_cache *c, uint64_t now_ms)
{
    unsigned idle = c->core->cfg->cache_idle_s;
    if (!idle)
        return;
    for (gg_list *l = c->lru.next, *n; l != &c->lru; l = n) {
        n = l->next;
        gg_cache_entry *e = gg_container_of(l, gg_cache_entry, lru_link);
        if (now_ms - e->last_used_ms < (uint64_t)idle * 1000)
            break;   /* LRU order: the rest are younger */
        if (e->state == GG_ENTRY_READY && e->pins == 0)
            cache_evict(c, e, "idle");
    }
}

const gg_cache_entry *gg_cache_next(const gg_cache *c, const gg_cache_entry *prev)
{
    const gg_list *l = prev ? prev->lru_link.next : c->lru.next;
    return l == &c->lru ? NULL : gg_container_of(l, gg_cache_entry, lru_link);
}
