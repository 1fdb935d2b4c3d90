/* SPDX-License-Identifier: MIT */
/* Program layout: what a built program's tensors and nodes occupy.
 *
 * Pure queries over a program once built (core/program.h): each tensor's
 * shape at a row count, the bytes buffer tensors span and how two of them
 * overlap, the scratch a run needs and where each tensor lies in it, and
 * the op rules at a row count.  The builder, the launch planner and the
 * executor read a program only through these; none of them changes it. */
#ifndef GG_PROGRAM_LAYOUT_H
#define GG_PROGRAM_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"
#include "proto.h"

struct gg_program;
struct gg_ptensor;
struct gg_pnode;

/* t's shape with its batch dim (if any) at rows. */
gg_tensor_desc gg_program_desc_at(const struct gg_ptensor *t, int rows);
/* Rows buffer tensor t can hold (INT32_MAX without a batch dim), or
 * -EINVAL when it does not fit even at one row. */
int64_t gg_program_tensor_rows(const struct gg_ptensor *t);
/* rows, lowered to where two buffer tensors apart at the largest bucket
 * would start to overlap (runs above the largest bucket). */
int gg_program_layout_rows(const struct gg_program *p, int rows);
/* Index of the smallest bucket >= batch, or -1 when batch is above them all. */
int gg_program_bucket_index(const struct gg_program *p, int batch);

/* Where buffer tensor t's bytes lie at rows: [lo, hi) in the object obj
 * (true: the backend named it, buffer_object) or, with obj zero, in the
 * device's address space (false).  Two tensors overlap only where both
 * lie in the same place. */
bool gg_program_span(const struct gg_ptensor *t, int rows, uint64_t obj[2], uint64_t *lo,
                     uint64_t *hi);
/* How tensors a and b share memory at `rows`: 0 apart, 1 partly, 2 the
 * same bytes (one tensor, views of one scratch tensor, or an exact alias). */
int gg_program_overlap(const struct gg_program *p, int a, int b, int rows);
/* The tensor whose bytes t names: t itself, or the tensor t is a view of. */
int gg_program_root(const struct gg_program *p, int t);

/* Node n's op rule with the batch dims at rows: 0, or -EINVAL with why. */
int gg_program_node_check_rows(const struct gg_program *p, const struct gg_pnode *n, int rows,
                               char *why, size_t whylen);
/* A batch above the largest bucket runs eager at its own row count, where
 * define never checked the op rules: a batch dim that met a fixed one at the
 * bucket sizes may not meet it here.  0, or -ERANGE saying which node. */
int gg_program_check_rows(const struct gg_program *p, int branch, int rows, proto_errbuf *e);

/* Bytes of scratch a run at `rows` needs, and the tensors bound for it:
 * in/out arrays for node n of branch b with scratch at base. */
size_t gg_program_scratch_bytes(const struct gg_program *p, int rows);
/* Returns the number of inputs to launch with: n->nin, plus one (the batch
 * word, i32 [1]) for an op that wants the real batch. */
int gg_program_bind(const struct gg_program *p, const struct gg_pnode *n, int rows,
                    uint8_t *scratch, gg_tensor *in, gg_tensor *out);
/* Tensor t at `rows` with scratch at base. */
void gg_program_bind_tensor(const struct gg_program *p, int t, int rows, uint8_t *scratch,
                            gg_tensor *out);
/* The batch word of a run at `rows` with scratch at base: where the daemon
 * stores the request's real batch before each launch (graph or eager) so
 * that padding rows have no side effects; NULL when no node reads it. */
int32_t *gg_program_batch_word(const struct gg_program *p, int rows, uint8_t *scratch);

#endif
