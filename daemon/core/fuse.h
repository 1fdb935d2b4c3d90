/* SPDX-License-Identifier: MIT */
/* The launch planner: a checked branch's nodes as the launches that run.
 *
 * A checked branch's node list (the client's contract: checks, errors,
 * overlap rules and signatures stay on those nodes) becomes the launch plan
 * the executor runs, in which a run of nodes may be one fused op (ops.h,
 * "fused ops").
 *
 * Patterns: add -> rmsnorm; linear + linear -> silu_mul (gate and up);
 * layernorm/rmsnorm -> gelu/silu/scale; linear (-> add of a row vector)
 * (-> gelu/silu/scale); and runs of 2..GG_EW_MAX_STEPS elementwise ops.
 * Then runs of 2..GG_ROWCHAIN_MAX_STAGES norm(-> activation) launches, each
 * normalizing the one before's output, become one row chain (ops.h,
 * gg_rowchain: a kernel that keeps the row in registers from stage to
 * stage, as a decode model's layers would use it), its stages in
 * br->stages.
 * Only consecutive nodes fuse.  An intermediate is dropped only when it is
 * scratch and no later node of the branch reads it (by its bytes: a view
 * counts); a buffer intermediate, or one read later, is still written or
 * the run is not fused.  A run whose outputs overlap an input it reads is
 * not fused, but for an exact in-place alias of its first input where the
 * fused op allows it. */
#ifndef GG_FUSE_H
#define GG_FUSE_H

#include <stdbool.h>

#include "core/program.h"

/* Fill br->plan (capacity br->nnodes, allocated here when NULL) from
 * br->nodes: fused when `enabled`, else one entry per node.  Called at
 * define and after every rebind (buffer placement decides overlaps).
 * 0, or -ENOMEM (then the plan is the unfused node list, if there is room
 * for one at all: br->nplan is 0 only when no plan could be allocated). */
int gg_fuse_plan(const gg_program *p, gg_branch *br, bool enabled);

/* Plan entry n of br, a row chain (n->op == gg_ops_rowchain()), bound at
 * rows with scratch at base: 0, or -EINVAL when n is not one. */
int gg_fuse_bind_chain(const gg_program *p, const gg_branch *br, const gg_pnode *n, int rows,
                       uint8_t *scratch, gg_rowchain *out);

/* Launches per replay of every branch together. */
int gg_fuse_kernels(const gg_program *p);

#endif
