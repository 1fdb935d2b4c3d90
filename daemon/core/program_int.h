/* SPDX-License-Identifier: MIT */
/* What program.c (a program's layout, binding, rebind) and program_build.c
 * (a program built from its define, and checked) share; not for other
 * modules. */
#ifndef GG_PROGRAM_INT_H
#define GG_PROGRAM_INT_H

#include "core/program.h"

/* t's shape with its batch dim (if any) at rows. */
gg_tensor_desc gg_program_desc_at(const gg_ptensor *t, int rows);
/* Rows buffer tensor t can hold (INT32_MAX without a batch dim), or
 * -EINVAL when it does not fit even at one row. */
int64_t gg_program_tensor_rows(const gg_ptensor *t);
/* rows, lowered to where two buffer tensors apart at the largest bucket
 * would start to overlap (runs above the largest bucket). */
int gg_program_layout_rows(const gg_program *p, int rows);
/* Node n's op rule with the batch dims at rows: 0, or -EINVAL with why. */
int gg_program_node_check_rows(const gg_program *p, const gg_pnode *n, int rows, char *why,
                               size_t whylen);
/* Where buffer tensor t's bytes lie at rows: [lo, hi) in the object obj
 * (true: the backend named it, buffer_object) or, with obj zero, in the
 * device's address space (false).  Two tensors overlap only where both
 * lie in the same place. */
bool gg_program_span(const gg_ptensor *t, int rows, uint64_t obj[2], uint64_t *lo, uint64_t *hi);
/* The tensor named by string value o, or -1. */
int gg_program_find_tensor(const gg_program *p, const gg_spec_val *o);
/* v is the string s. */
bool gg_spec_str_eq(const gg_spec_val *v, const char *s);
/* v as the argument `key`: 0 with *out, -ENOENT when absent (or nil) and
 * not required, or -EINVAL with the message a client gets for it. */
int gg_spec_u64(const gg_spec_val *v, const char *key, bool required, uint64_t *out,
                proto_errbuf *e);
/* Define-time rules 5 and 6 (PROTOCOL.md, program.define): a node's outputs
 * against its inputs; batch outputs' padding rows against every other
 * buffer tensor.  0, or -EINVAL with the message. */
int gg_program_node_overlaps(const gg_program *p, const gg_pnode *n, int ni, proto_errbuf *e);
int gg_program_padding_overlaps(const gg_program *p, proto_errbuf *e);

#endif
