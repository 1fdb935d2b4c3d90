/* SPDX-License-Identifier: MIT */
/* Programs: named tensors and a list of op nodes (or several branches of
 * them), checked completely at define time so that nothing downstream can
 * read or write outside the client's buffers. */
#ifndef GG_PROGRAM_H
#define GG_PROGRAM_H

#include <stdint.h>

#include "core/buffer.h"
#include "base/config.h"
#include "ops.h"
#include "core/session.h"
#include "core/program_spec.h"

#define GG_MAX_TENSORS 4096
#define GG_MAX_NODES 4096
#define GG_MAX_BRANCHES 64
#define GG_MAX_BATCH 65536
#define GG_MAX_TENSOR_BYTES (1ULL << 40)
/* Nodes that call nodes may copy into one program, all branches together:
 * a define of a few bytes is checked on the loop, and must stay cheap. */
#define GG_MAX_CALL_NODES 8192

typedef struct {
    char name[64];
    gg_buffer *buf;          /* NULL: scratch (daemon-owned, in the program's arena) */
    uint64_t offset;         /* into buf */
    gg_tensor_desc desc;     /* the batch dim holds 1 here */
    int batch_dim;           /* -1: none */
    int view_of;             /* -1, or the tensor (never itself a view) whose bytes this
                              * one reads under another shape: buf/offset are its */
} gg_ptensor;

typedef struct {
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

/* program.define in two halves, so that a large one is checked off the
 * loop: gg_program_build reads only the spec and env (no core state, no
 * lock; any thread), gg_program_commit (loop, core lock) counts the
 * program against its uid's quotas, gives it its id and lists it.  On a
 * commit failure the program is freed; a built program that is never
 * committed goes with gg_program_discard. */
typedef struct gg_define_env {
    gg_session *s;
    const int *buckets;                 /* the daemon's default buckets */
    int nbuckets;
    bool fuse;                          /* plan fused launches (core/fuse.h) */
    /* the session's buffer id: the messages of gg_buffer_lookup */
    int (*lookup)(const struct gg_define_env *env, uint64_t id, gg_buffer **out,
                  proto_errbuf *e);
    /* the session's program id (a call's callee): gg_program_lookup's */
    int (*program)(const struct gg_define_env *env, uint64_t id, struct gg_program **out,
                   proto_errbuf *e);
    void *ctx;
} gg_define_env;
int gg_program_build(const gg_define_env *env, const gg_program_spec *spec, gg_program **out,
                     proto_errbuf *e);
int gg_program_commit(struct gg_core *core, gg_program *p, proto_errbuf *e);
void gg_program_discard(gg_program *p);
/* Release from the client's side: unlisted at once, freed when unpinned. */
void gg_program_release(gg_program *p);
void gg_program_unpin(gg_program *p);
/* Session end: release every program, parking their ready graphs. */
void gg_program_park_all(gg_session *s);
/* program.rebind: point buffer tensors elsewhere; cached graphs are updated
 * on their next use. */
int gg_program_rebind(struct gg_core *core, gg_program *p, const gg_rebind_spec *spec,
                      int *count, proto_errbuf *e);
/* A batch above the largest bucket runs eager at its own row count, where
 * define never checked the op rules: a batch dim that met a fixed one at the
 * bucket sizes may not meet it here.  0, or -ERANGE saying which node. */
int gg_program_check_rows(const gg_program *p, int branch, int rows, proto_errbuf *e);
/* How tensors a and b share memory at `rows`: 0 apart, 1 partly, 2 the
 * same bytes (one tensor, views of one scratch tensor, or an exact alias). */
int gg_program_overlap(const gg_program *p, int a, int b, int rows);
/* The tensor whose bytes t names: t itself, or the tensor t is a view of. */
int gg_program_root(const gg_program *p, int t);
/* Index of the smallest bucket >= batch, or -1 when batch is above them all. */
int gg_program_bucket_index(const gg_program *p, int batch);
/* Bytes of scratch a run at `rows` needs, and the tensors bound for it:
 * in/out arrays for node n of branch b with scratch at base. */
size_t gg_program_scratch_bytes(const gg_program *p, int rows);
/* Returns the number of inputs to launch with: n->nin, plus one (the batch
 * word, i32 [1]) for an op that wants the real batch. */
int gg_program_bind(const gg_program *p, const gg_pnode *n, int rows, uint8_t *scratch,
                    gg_tensor *in, gg_tensor *out);
/* Tensor t at `rows` with scratch at base. */
void gg_program_bind_tensor(const gg_program *p, int t, int rows, uint8_t *scratch,
                            gg_tensor *out);
/* The batch word of a run at `rows` with scratch at base: where the daemon
 * stores the request's real batch before each launch (graph or eager) so
 * that padding rows have no side effects; NULL when no node reads it. */
int32_t *gg_program_batch_word(const gg_program *p, int rows, uint8_t *scratch);

#endif
