/* SPDX-License-Identifier: MIT */
/* A program.define (or a program.rebind's tensors) as the client sent it,
 * in plain C: what the transport decoded, before any check.  The core
 * builds and checks a program from it (program_build.c) and never sees the
 * wire format.  Malformed parts are kept as what they are (a value of the
 * wrong kind, a key that was absent), because the builder reports the first
 * fault in its own order and a define with two faults must always name the
 * same one. */
#ifndef GG_PROGRAM_SPEC_H
#define GG_PROGRAM_SPEC_H

#include <stdbool.h>
#include <stdint.h>

/* What one value of the request was. */
typedef enum {
    GG_SPEC_ABSENT = 0,         /* the key was not there */
    GG_SPEC_NIL,
    GG_SPEC_BOOL,               /* b */
    GG_SPEC_UINT,               /* u: a non-negative integer */
    GG_SPEC_INT,                /* i: a negative integer */
    GG_SPEC_FLOAT,              /* f */
    GG_SPEC_STR,                /* s, len bytes, not NUL-terminated */
    GG_SPEC_ARRAY,              /* len elements; where the field says so, at u */
    GG_SPEC_MAP,                /* len pairs; where the field says so, at u */
    GG_SPEC_OTHER,              /* bytes, an extension type */
} gg_spec_kind;

typedef struct {
    uint8_t kind;               /* gg_spec_kind */
    uint32_t len;
    union {
        uint64_t u;
        int64_t i;
        double f;
        bool b;
        const char *s;
    };
} gg_spec_val;

/* One entry of the tensors map.  A tensor that is not a map (is_map false)
 * has only its name. */
typedef struct {
    gg_spec_val name;           /* the key */
    bool is_map;
    gg_spec_val view, dtype, buffer, offset, scratch;
    gg_spec_val shape;          /* an ARRAY of 1 to GG_MAX_DIMS dims: at vals[u] */
} gg_spec_tensor;

/* One node.  A node that is not a map (is_map false) has nothing else. */
typedef struct {
    bool is_map;
    gg_spec_val op;
    gg_spec_val inputs, outputs;  /* an ARRAY of at most GG_MAX_OPERANDS: at vals[u] */
    gg_spec_val attrs;            /* a MAP: key, value, key, ... at vals[u] */
    gg_spec_val program, branch;  /* a call's */
} gg_spec_node;

typedef struct gg_program_spec {
    gg_spec_val name;
    gg_spec_val buckets;        /* an ARRAY of at most GG_MAX_BUCKETS: at vals[u] */
    gg_spec_val tensors;        /* a MAP of at most GG_MAX_TENSORS: at tensor[u] */
    gg_spec_val nodes;          /* an ARRAY: at node[u] */
    gg_spec_val branches;       /* an ARRAY: at vals[u], each a node list as nodes */
    gg_spec_tensor *tensor;
    gg_spec_node *node;
    gg_spec_val *vals;          /* the elements the fields above point into */
    uint32_t ntensor, nnode, nvals;
} gg_program_spec;

/* program.rebind's tensors: name and {buffer, offset} of each.  A value
 * that is not a map (is_map false) has only its name. */
typedef struct {
    gg_spec_val name;
    bool is_map;
    gg_spec_val buffer, offset;
} gg_rebind_tensor;

typedef struct {
    gg_spec_val tensors;        /* a MAP: at tensor[u] */
    gg_rebind_tensor *tensor;
} gg_rebind_spec;

#endif
