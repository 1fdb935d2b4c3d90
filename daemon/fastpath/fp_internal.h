/* SPDX-License-Identifier: MIT */
/* Private to daemon/fastpath/: the region, its slots and the module. */
#ifndef GG_FP_INTERNAL_H
#define GG_FP_INTERNAL_H

#include <pthread.h>

#include "core/cache.h"
#include "core/event.h"
#include "core/exec.h"
#include "core/program.h"
#include "core/session.h"
#include "fastpath.h"   /* proto/: the shared layout */
#include "gg_barrier.h" /* proto/: every access to the words below marked atomic */
#include "fp.h"

struct gg_fp_region;

/* The daemon's own record of one ring slot: what the descriptor in flight
 * there holds pinned.  Never in shared memory. */
typedef struct gg_fp_slot {
    struct gg_fp_region *r;
    uint32_t index;
    int busy;                      /* atomic: a descriptor is in flight in this slot */
    uint64_t seq;
    uint64_t user_data;
    uint32_t sqe_flags;
    uint32_t batch, branch, bucket;
    /* a cache hit run by the region thread: released when the device is done */
    gg_cache_entry *entry;
    gg_program *prog;
    gg_event *wait_ev, *signal_ev;
    bool gpu_writes_seq;
    int gpu_pending;               /* atomic: the device writes seq; the slot is not yet free */
    int released;                  /* atomic: the hit's pins and counts are done (once) */
    uint64_t t_launch_us;
    uint64_t t_take_us;             /* descriptor taken: a hit's round trip starts */
} gg_fp_slot;

typedef struct gg_fp_region {
    gg_fp_module *m;
    gg_core *core;
    gg_session *sess;              /* referenced until the region goes */
    uint8_t *base;                 /* the daemon's mapping */
    size_t size;
    uint8_t *dev_base;             /* base as the device addresses it */
    bool registered;
    uint32_t entries, mask;
    gg_fp_header *hdr;
    gg_fp_sqe *sq;
    gg_fp_cqe *cq;
    gg_fp_slot *slots;
    uint64_t head;                 /* descriptors taken (the last seq taken) */
    unsigned spins;                /* idle spin rounds, for the yield cadence */
    bool spinning;                 /* holds one of the module's spinner places */
    unsigned gpu_pending;          /* atomic: slots whose seq the device will write */
    uint64_t checked_us;           /* last stuck-completion check (fp_check_stuck) */
    int quit;                      /* atomic */
    pthread_t thread;
    struct gg_fp_region *next;     /* the module's list (core lock) */
} gg_fp_region;

struct gg_fp_module {
    gg_core *core;
    gg_fp_settings set;            /* set.spin_us: atomic (a reload may change it) */
    bool one_cpu;                  /* never spin */
    uv_async_t async;              /* a region ended / the device went: tell the loop */
    bool async_open;
    unsigned live;                 /* atomic: regions open */
    gg_fp_region *regions;         /* core lock */
    const char *completion;
    bool gpu_completion;           /* hits are completed by the device */
    /* Ring threads spinning at once, at most max_spinners (half the CPUs
     * this daemon may run on): past that, more spinners only take CPU from
     * the clients they wait for, and the rest sleep until rung. */
    unsigned spinners;             /* atomic */
    unsigned max_spinners;
};

/* ring.c */
void *gg_fp_thread_main(void *arg);
/* Free the slots whose completion the device has written (and check on
 * ones long overdue); true when any was new.  The region's thread only. */
bool gg_fp_reap(gg_fp_region *r);
/* region.c: the region thread's last act */
void gg_fp_region_end(gg_fp_region *r);

/* Futex on a word of the shared region (not FUTEX_PRIVATE: the client
 * maps the same memfd). */
int gg_fp_futex_wait(uint32_t *word, uint32_t val, const struct timespec *timeout);
void gg_fp_futex_wake(uint32_t *word, int n);

#endif
