/* SPDX-License-Identifier: MIT */
/* Programs for the gfxgraphd GPU tests: specs of a few small programs,
 * their setup in a client process (device buffers registered with the
 * daemon, the inputs through a pointer into the middle of their allocation;
 * the program defined, prepared if asked), the CPU reference (gg_ops_run_cpu
 * on host copies, intermediates rounded to the storage dtype like the
 * GPU's), and replays checked against it (path, bucket, capture, fallback
 * and the real rows of every output, rel-L2: f32 1e-4, f16 3e-3, bf16 2e-2).
 * Outputs are poisoned with NaN (0xff bytes) before every replay. */
#ifndef GG_TEST_GPU_DAEMON_PROG_H
#define GG_TEST_GPU_DAEMON_PROG_H

#include "gpu_daemon_util.h"
#include "ops.h"

#define MAXR 40                         /* rows of every batch tensor */
#define TOP 32                          /* largest bucket */
#define NBK 6                           /* buckets {1,2,4,8,16,32} */

typedef enum { T_END = 0, T_IN, T_W, T_OUT, T_SCR } tkind;

typedef struct {
    const char *name;
    tkind kind;
    int64_t d0, d1;     /* T_W: [d1] when d0 == 0, else [d0, d1]; others: [batch, d1] */
    float lo, hi;       /* initial values (T_IN, T_W) */
} tspec;

typedef struct {
    const char *op, *in, *out;  /* comma lists of tensor names */
    const char *akey;           /* a float attribute, or NULL */
    double aval;
    const char *skey, *sval;    /* a choice attribute, or NULL */
    int branch;
} nspec;

#define MAXT 12
#define MAXN 8

typedef struct {
    const char *name;
    tspec t[MAXT];
    nspec n[MAXN];
} pspec;

extern const pspec P_CHAIN;    /* layernorm->gelu twice, prepared */
extern const pspec P_MLP;      /* linear->gelu->linear with bias */
extern const pspec P_RMS_SILU; /* rmsnorm + silu_mul */
extern const pspec P_SOFTMAX;
extern const pspec P_ADD;      /* add with a broadcast row */
extern const pspec P_BRANCHES; /* two branches */

typedef struct {
    const pspec *spec;
    gg_dtype dt;
    int nt, nn, nbranch;
    size_t es;
    /* device side */
    void *d_in, *d_w, *d_out;              /* allocations */
    size_t in_bytes, w_bytes, out_bytes;   /* registered sizes */
    uint8_t *in_reg;                       /* registered pointer: d_in + IN_SKEW */
    uint64_t id_in, id_w, id_out, prog;
    bool reg_in, reg_w, reg_out, defined;
    /* host side */
    size_t off[MAXT];                      /* offset in its registered buffer */
    size_t bytes[MAXT];
    void *host[MAXT];                      /* inputs/weights; scratch and outputs for refs */
    void *ref[2][MAXT];                    /* outputs per branch */
    void *got;                             /* output copy-back */
} prog_t;

typedef enum { EXPECT_NORMAL, EXPECT_FALLBACK } expect_t;

typedef struct {
    int replays, graph, eager, fallback;
} run_counts;

/* Allocate, fill, register, define (and prepare every bucket if asked).
 * 0, or -1 after a failed check; gd_prog_free in either case. */
int gd_prog_setup(gg_client *c, prog_t *p, const pspec *spec, gg_dtype dt, bool prepare);
void gd_prog_free(gg_client *c, prog_t *p);
/* Replay batch rows on branch, check the answer and the outputs.  Returns 0
 * when everything matched, 1 on a mismatch, -1 when the connection is gone. */
int gd_replay_check(gg_client *c, prog_t *p, int batch, int branch, expect_t ex,
                    bool want_captured, int *printed, gg_replay_result *out_res);
/* Batch 1..MAXR on every branch, with the expectations of ex.  seen0: the
 * (branch, bucket) graphs already captured (NULL: none).  The mismatches,
 * or -1 when the connection is gone. */
int gd_prog_run(gg_client *c, prog_t *p, expect_t ex, bool prepared, run_counts *rcnt,
                const bool (*seen0)[NBK]);
/* The index of bucket in the bucket list, or -1. */
int gd_bucket_slot(int bucket);

#endif
