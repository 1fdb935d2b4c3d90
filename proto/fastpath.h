/* SPDX-License-Identifier: MIT */
/* The fast path's shared region: byte layout, shared by the daemon and the
 * client library.  PROTOCOL.md section 15 is the spec; these structs are it
 * in C, pinned by the static assertions at the end (a client in another
 * language uses the offsets, not this header).
 *
 * One region per session, created by the daemon (a sealed memfd handed to
 * the client with SCM_RIGHTS in the answer to `fastpath.open`).  Both
 * processes map it shared, read-write.  Host byte order (the two processes
 * share a machine).  Words that one side writes and the other reads are
 * accessed with atomic loads and stores (gg_barrier.h: the daemon and this
 * library use its primitives alone); each side's words sit on their own
 * 64-byte cache line so the two never write the same line. */
#ifndef GG_PROTO_FASTPATH_H
#define GG_PROTO_FASTPATH_H

#include <stddef.h>
#include <stdint.h>

#define GG_FP_MAGIC "GGFPATH1"        /* 8 bytes, no NUL */
#define GG_FP_VERSION 1u
#define GG_FP_SQE_SIZE 64u
#define GG_FP_CQE_SIZE 256u
#define GG_FP_RING_OFFSET 512u         /* the submission ring starts here */
#define GG_FP_MIN_ENTRIES 2u
#define GG_FP_MAX_ENTRIES 4096u
#define GG_FP_DEFAULT_ENTRIES 64u

/* descriptor flags */
#define GG_FP_SQE_ASYNC 0x1u   /* complete once the work is enqueued */
#define GG_FP_SQE_TIMED 0x2u   /* measure device_us (the daemon, not the GPU, then completes it) */
#define GG_FP_SQE_FLAGS_KNOWN 0x3u

/* completion flags */
#define GG_FP_CQE_EAGER 0x1u      /* path: eager launches (else one graph launch) */
#define GG_FP_CQE_FALLBACK 0x2u   /* eager because the entry's graph failed */
#define GG_FP_CQE_CAPTURED 0x4u   /* this replay captured the graph */
#define GG_FP_CQE_ASYNC 0x8u      /* completed at enqueue (GG_FP_SQE_ASYNC) */
#define GG_FP_CQE_TIMED 0x10u     /* device_us was measured */
#define GG_FP_CQE_GPU 0x20u       /* completed by the GPU (a cache hit's graph launch) */

/* state word */
#define GG_FP_STATE_OPEN 1u
#define GG_FP_STATE_CLOSED 2u     /* the daemon ended the region: no more completions */

/* What fastpath.open answers besides the region's fd: its geometry. */
typedef struct {
    uint32_t entries;
    uint64_t region_size;
    uint32_t sq_offset, cq_offset, sqe_size, cqe_size;
    const char *completion;        /* "gpu" | "cpu" */
} gg_fp_geom;

/* One cache line for each word that one side writes. */
typedef struct {
    /* line 0, daemon-written once before the fd is sent, never changed */
    char magic[8];
    uint32_t version;
    uint32_t entries;            /* ring slots, a power of two */
    uint32_t sqe_size;           /* GG_FP_SQE_SIZE */
    uint32_t cqe_size;           /* GG_FP_CQE_SIZE */
    uint64_t region_size;        /* bytes, the memfd's size */
    uint32_t sq_offset;          /* GG_FP_RING_OFFSET */
    uint32_t cq_offset;          /* sq_offset + entries * sqe_size */
    uint64_t session;            /* the session id (hello's) */
    uint8_t pad0[16];
    /* line 1, client-written: descriptors submitted so far (mod 2^32) */
    uint32_t sq_tail;
    uint8_t pad1[60];
    /* line 2, daemon-written: descriptors taken so far (mod 2^32) */
    uint32_t sq_head;
    uint8_t pad2[60];
    /* line 3: the daemon's doorbell.  sq_sleeping is daemon-written (1 while
     * its submission thread sleeps or is about to); sq_wake is the futex word
     * the client bumps and wakes after publishing sq_tail. */
    uint32_t sq_sleeping;
    uint32_t sq_wake;
    uint8_t pad3[56];
    /* line 4, client-written: how many client threads sleep (or are about to)
     * waiting for a completion */
    uint32_t cq_waiters;
    uint8_t pad4[60];
    /* line 5, daemon-written: the client's doorbell (futex word the daemon
     * bumps and wakes when it completes work and cq_waiters is not 0), and
     * the region's state */
    uint32_t cq_wake;
    uint32_t state;
    uint8_t pad5[56];
    uint8_t pad6[128];           /* lines 6-7: reserved, zero */
} gg_fp_header;

/* A submission descriptor, client-written.  seq is the descriptor's number
 * counted from 1 since the region was opened; it lives in slot
 * (seq - 1) & (entries - 1). */
typedef struct {
    uint64_t seq;
    uint64_t program;
    uint64_t wait_event;         /* 0: none */
    uint64_t signal_event;       /* 0: none */
    uint32_t batch;
    uint32_t branch;
    uint32_t flags;              /* GG_FP_SQE_* */
    uint32_t reserved0;          /* 0 */
    uint64_t user_data;          /* echoed in the completion */
    uint64_t reserved1;          /* 0 */
} gg_fp_sqe;

/* A completion record, daemon-written (or, for seq, GPU-written), in the
 * slot of the descriptor it answers.  Every field but seq is written
 * before seq; seq == the descriptor's seq means the record is complete. */
typedef struct {
    uint64_t seq;
    int32_t status;              /* 0, or a negative errno */
    uint32_t flags;              /* GG_FP_CQE_* */
    uint32_t bucket;             /* 0 when batch was above the largest bucket */
    uint32_t batch;
    uint32_t branch;
    uint32_t reserved0;
    double device_us;            /* when GG_FP_CQE_TIMED, else 0 */
    uint64_t user_data;
    uint8_t reserved1[16];
    char reason[192];            /* NUL-terminated UTF-8: why eager, or the error */
} gg_fp_cqe;

_Static_assert(sizeof(gg_fp_header) == GG_FP_RING_OFFSET, "header size");
_Static_assert(offsetof(gg_fp_header, sq_tail) == 64, "sq_tail offset");
_Static_assert(offsetof(gg_fp_header, sq_head) == 128, "sq_head offset");
_Static_assert(offsetof(gg_fp_header, sq_sleeping) == 192, "sq_sleeping offset");
_Static_assert(offsetof(gg_fp_header, sq_wake) == 196, "sq_wake offset");
_Static_assert(offsetof(gg_fp_header, cq_waiters) == 256, "cq_waiters offset");
_Static_assert(offsetof(gg_fp_header, cq_wake) == 320, "cq_wake offset");
_Static_assert(offsetof(gg_fp_header, state) == 324, "state offset");
_Static_assert(sizeof(gg_fp_sqe) == GG_FP_SQE_SIZE, "sqe size");
_Static_assert(offsetof(gg_fp_sqe, batch) == 32, "sqe batch");
_Static_assert(offsetof(gg_fp_sqe, user_data) == 48, "sqe user_data");
_Static_assert(sizeof(gg_fp_cqe) == GG_FP_CQE_SIZE, "cqe size");
_Static_assert(offsetof(gg_fp_cqe, device_us) == 32, "cqe device_us");
_Static_assert(offsetof(gg_fp_cqe, reason) == 64, "cqe reason");

/* The region's size for a ring of n entries: header, rings, rounded up to
 * a 4 KiB page. */
static inline uint64_t gg_fp_region_size(uint32_t entries)
{
    uint64_t end = GG_FP_RING_OFFSET + (uint64_t)entries * (GG_FP_SQE_SIZE + GG_FP_CQE_SIZE);
    return (end + 4095u) & ~(uint64_t)4095u;
}

#endif
