/* SPDX-License-Identifier: MIT */
/* The one list of ops: each op's id, its name (what program.define nodes
 * use and hello lists) and its family.  Everything that names an op derives
 * from here: the table ids (GG_OP_*), the table itself (ops_table.c), the GPU
 * dispatch (by family, gpu_ops.hip), the fusion planner's tests on op ids
 * (daemon/core/fuse.c).  The Python frontend reads the names from hello.
 *
 * How to add an op:
 *   1. its line below (the order is the table's: append within reason, the
 *      ids are not part of the protocol, names are);
 *   2. its row and rules in its family's file, with GG_OP_ROW(ID, ...) (see
 *      ops_rules.h), beside its CPU reference; its kernel in the family's
 *      .hip file, reached from the family's launcher (a `case GG_OP_ID:`);
 *   3. its translation in python/gfxgraph.
 * A new family also gets a GG_FAM_* below, a row file (listed in
 * kernels/CMakeLists.txt), a .hip file with its launcher (listed in
 * kernels/gpu.cmake, declared in gpu_internal.h) and a case in
 * gg_gpu_op_launch's family switch.
 *
 * Plain C preprocessor, no other include: C and HIP C++ both read it. */
#ifndef GG_OPS_LIST_H
#define GG_OPS_LIST_H

/* Families: which file holds an op's rules and CPU reference, and which
 * launcher runs it on the GPU.
 *   ELEMENTWISE  ops_elementwise.c / gpu_ops.hip + gpu_elementwise.hip
 *   NORM         ops_norm.c        / gpu_ops.hip (row kernels)
 *   LINEAR       ops_linear.c      / gpu_linear.hip
 *   DECODE       ops_decode.c      / gpu_decode.hip (+ gpu_attention*.hip)
 *   REDUCE       ops_reduce.c      / gpu_reduce.hip
 *   MOVEMENT     ops_movement.c    / gpu_movement.hip
 *   MATMUL       ops_matmul.c      / gpu_matmul.hip
 *   ATTENTION    ops_attention.c   / gpu_sdpa.hip
 * GG_FAM_NONE is for op definitions outside the table (the planner's fused
 * ops). */
#define GG_FAMILY_LIST(F) \
    F(NONE)               \
    F(ELEMENTWISE)        \
    F(NORM)               \
    F(LINEAR)             \
    F(DECODE)             \
    F(REDUCE)             \
    F(MOVEMENT)           \
    F(MATMUL)             \
    F(ATTENTION)

/* X(ID, "name", FAMILY) */
#define GG_OPS_LIST(X)                                   \
    X(COPY, "copy", ELEMENTWISE)                         \
    X(ADD, "add", ELEMENTWISE)                           \
    X(MUL, "mul", ELEMENTWISE)                           \
    X(SCALE, "scale", ELEMENTWISE)                       \
    X(GELU, "gelu", ELEMENTWISE)                         \
    X(SILU, "silu", ELEMENTWISE)                         \
    X(SILU_MUL, "silu_mul", ELEMENTWISE)                 \
    X(LAYERNORM, "layernorm", NORM)                      \
    X(RMSNORM, "rmsnorm", NORM)                          \
    X(LINEAR, "linear", LINEAR)                          \
    X(SOFTMAX, "softmax", NORM)                          \
    X(EMBEDDING, "embedding", DECODE)                    \
    X(ROPE, "rope", DECODE)                              \
    X(CACHE_WRITE, "cache_write", DECODE)                \
    X(ATTENTION_DECODE, "attention_decode", DECODE)      \
    X(ARGMAX, "argmax", DECODE)                          \
    X(CAST, "cast", ELEMENTWISE)                         \
    X(SUB, "sub", ELEMENTWISE)                           \
    X(DIV, "div", ELEMENTWISE)                           \
    X(POW, "pow", ELEMENTWISE)                           \
    X(MAXIMUM, "maximum", ELEMENTWISE)                   \
    X(MINIMUM, "minimum", ELEMENTWISE)                   \
    X(EQ, "eq", ELEMENTWISE)                             \
    X(NE, "ne", ELEMENTWISE)                             \
    X(LT, "lt", ELEMENTWISE)                             \
    X(LE, "le", ELEMENTWISE)                             \
    X(GT, "gt", ELEMENTWISE)                             \
    X(GE, "ge", ELEMENTWISE)                             \
    X(BITWISE_AND, "bitwise_and", ELEMENTWISE)           \
    X(BITWISE_OR, "bitwise_or", ELEMENTWISE)             \
    X(BITWISE_XOR, "bitwise_xor", ELEMENTWISE)           \
    X(BITWISE_NOT, "bitwise_not", ELEMENTWISE)           \
    X(WHERE, "where", ELEMENTWISE)                       \
    X(NEG, "neg", ELEMENTWISE)                           \
    X(ABS, "abs", ELEMENTWISE)                           \
    X(RSQRT, "rsqrt", ELEMENTWISE)                       \
    X(SQRT, "sqrt", ELEMENTWISE)                         \
    X(EXP, "exp", ELEMENTWISE)                           \
    X(LOG, "log", ELEMENTWISE)                           \
    X(TANH, "tanh", ELEMENTWISE)                         \
    X(SIN, "sin", ELEMENTWISE)                           \
    X(COS, "cos", ELEMENTWISE)                           \
    X(SIGMOID, "sigmoid", ELEMENTWISE)                   \
    X(RECIP, "recip", ELEMENTWISE)                       \
    X(FILL, "fill", ELEMENTWISE)                         \
    X(ARANGE, "arange", ELEMENTWISE)                     \
    X(SUM, "sum", REDUCE)                                \
    X(MEAN, "mean", REDUCE)                              \
    X(AMAX, "amax", REDUCE)                              \
    X(AMIN, "amin", REDUCE)                              \
    X(STRIDED_COPY, "strided_copy", MOVEMENT)            \
    X(CAT, "cat", MOVEMENT)                              \
    X(INDEX_COPY, "index_copy", MOVEMENT)                \
    X(BMM, "bmm", MATMUL)                                \
    X(SDPA, "sdpa", ATTENTION)

#endif
