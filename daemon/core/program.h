/* SPDX-License-Identifier: MIT */
/* Programs: what one is, and its lifetime in the core's registry.
 *
 * A program is named tensors and a list of op nodes (or several branches
 * of them), checked completely at define time so that nothing downstream
 * can read or write outside the client's buffers.  The layers below this
 * one: program_build.h builds and checks a define, fuse.h plans its
 * launches, program_layout.h answers what its tensors and nodes occupy;
 * none of them calls back up. */
#ifndef GG_PROGRAM_H
#define GG_PROGRAM_H

#include <stdint.h>

#include "core/buffer.h"
#include "base/config.h"
#include "ops.h"
#include "core/session.h"
#include "core/program_spec.h"
#include "core/program_build.h"
#include "core/program_layout.h"

#define GG_MAX_TENSORS 4096
#define GG_MAX_NODES 4096
#define GG_MAX_BRANCHES 64
#define GG_MAX_BATCH 65536
#define GG_MAX_TENSOR_BYTES (1ULL << 40)
/* Nodes that call nodes may copy into one program, all branches together:
 * a define of a few bytes is checked on the loop, and must stay cheap. */
#define GG_MAX_CALL_NODES 8192

typedef struct gg_ptensor {
    char name[64];
    gg_buffer *buf;          /* NULL: scratch (daemon-owned, in the program's arena) */
    uint64_t offset;         /* into buf */
    gg_tensor_desc desc;     /* the batch dim holds 1 here */
    int batch_dim;           /* -1: none */
    int view_of;             /* -1, or the tensor (never itself a view) whose bytes this
                              * one reads under another shape: buf/offset are its */
} gg_ptensor;

typedef struct gg_pnode {
    const gg_op_def *op;
    int nin, nout;
    int in[GG_MAX_OPERANDS];
    int out[GG_MAX_OPERANDS];
    gg_op_attrs attrs;
} gg_pnode;

/* One stage of a planned row chain (core/fuse.h, ops.h: gg_rowchain):
 * tensors, -1 for none; y is -1 when nothing after the chain reads it. */
typedef struct {
    int w, b, h, y;
    double eps, p;
    int rms, act;
} gg_pstage;

typedef struct {
    gg_pnode *nodes;
    int nnodes;
    /* What the executor launches (core/fuse.h): the nodes, or fewer, fused
     * ones in their place; capacity nnodes. */
    gg_pnode *plan;
    int nplan;
    /* The row chains' stages, which plan entries of gg_ops_rowchain() name
     * by range (attrs v[0] first, v[1] count); capacity nnodes. */
    gg_pstage *stages;
} gg_branch;

struct gg_cache_entry;
struct gg_arena;

typedef struct gg_program {
    uint64_t id;
    gg_session *sess;
    gg_list sess_link;
    char name[64];
    gg_ptensor *tensors;
    int ntensors;
    int *tindex;                        /* tensor names hashed (open addressing):
                                         * index + 1, 0 empty; tindex_mask + 1 slots */
    uint32_t tindex_mask;
    gg_branch *branches;
    int nbranches;
    int buckets[GG_MAX_BUCKETS];
    int nbuckets;
    int max_batch;                      /* largest batch the buffers hold */
    struct gg_cache_entry **entries;    /* [branch * nbuckets + bucket index] */
    int pins;                           /* jobs in flight */
    uint64_t gen;                       /* bumped by program.rebind */
    uint8_t *sig;                       /* structure, without buffers (parking) */
    size_t siglen;
    int warm;                           /* graphs adopted at define */
    struct gg_arena *arena;             /* scratch of every run (core/arena.h) */
    struct gg_adapt_slot *adapt_seed;   /* replay-mode adaptive: choices remembered for
                                         * this structure, [branch * nbuckets + bucket] */
    uint64_t scratch_quota;             /* counted against its uid (core/quota.h) */
    bool batch_word;                    /* a node reads the real batch (op->wants_batch):
                                         * an i32 at the end of each run's scratch */
    bool released;
    bool counted;                       /* its buffers' users count it (committed) */
} gg_program;

int gg_program_lookup(struct gg_core *core, gg_session *s, uint64_t id, gg_program **out,
                      proto_errbuf *e);
/* Build and check a program from its define, and commit it (loop, core
 * lock). */
int gg_program_define(struct gg_core *core, gg_session *s, const gg_program_spec *spec,
                      gg_program **out, proto_errbuf *e);

/* The second half of program.define (core/program_build.h): counts the
 * program against its uid's quotas, gives it its id and lists it (loop,
 * core lock).  On a failure the program is freed. */
int gg_program_commit(struct gg_core *core, gg_program *p, proto_errbuf *e);
/* Release from the client's side: unlisted at once, freed when unpinned. */
void gg_program_release(gg_program *p);
void gg_program_unpin(gg_program *p);
/* Session end: release every program, parking their ready graphs. */
void gg_program_park_all(gg_session *s);
/* program.rebind: point buffer tensors elsewhere; cached graphs are updated
 * on their next use. */
int gg_program_rebind(struct gg_core *core, gg_program *p, const gg_rebind_spec *spec,
                      int *count, proto_errbuf *e);

#endif
