/* SPDX-License-Identifier: MIT */
/* What the family files (ops_<family>.c) share to write their rows and
 * rules: the row macro, the messages, the common operand checks.  Private to
 * the op library (not installed, not read by the daemon).
 *
 * A row:
 *     GG_OP_ROW(ADD, .nin_min = 1, .nin_max = 2, .nout = 1,
 *               .in_names = {"a", "b"}, .out_names = {"y"},
 *               .check = my_check, .cpu = my_cpu);
 * defines gg_op_row_ADD with its name, id and family taken from ops_list.h;
 * ops_table.c gathers the rows into the table. */
#ifndef GG_OPS_RULES_H
#define GG_OPS_RULES_H

#define GG_OPS_IMPL
#include "ops.h"

#include <errno.h>
#include <stddef.h>

/* The names, one array each (an address constant, so a row's initializer
 * may point at it): defined in ops_table.c. */
#define GG_OP_NAME_DECL_(id_, name_, fam_) extern const char gg_op_name_##id_[];
GG_OPS_LIST(GG_OP_NAME_DECL_)
#undef GG_OP_NAME_DECL_
/* Each op's family, by id (an enum constant per op). */
#define GG_OP_FAM_ENUM_(id_, name_, fam_) GG_OP_FAMILY_OF_##id_ = GG_FAM_##fam_,
enum { GG_OPS_LIST(GG_OP_FAM_ENUM_) GG_OP_FAMILY_OF_END_ };
#undef GG_OP_FAM_ENUM_

#define GG_OP_ROW(ID, ...)                                                        \
    const gg_op_def gg_op_row_##ID = {.name = gg_op_name_##ID, .id = GG_OP_##ID,  \
                                      .family = GG_OP_FAMILY_OF_##ID, __VA_ARGS__}

#define GG_OP_ROW_DECL_(id_, name_, fam_) extern const gg_op_def gg_op_row_##id_;
GG_OPS_LIST(GG_OP_ROW_DECL_)
#undef GG_OP_ROW_DECL_

/* ---- messages ---------------------------------------------------------------- */

/* Writes the message to err; returns -EINVAL. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int gg_rule_fail(char *err, size_t errlen, const char *fmt, ...);

typedef struct {
    char s[96];
} gg_shape_buf;

/* "[5, 1024]" */
const char *gg_rule_shape_str(const gg_tensor_desc *d, gg_shape_buf *b);

/* ---- shapes -------------------------------------------------------------------- */

int gg_rule_same_shape(const gg_tensor_desc *a, const gg_tensor_desc *b);
int64_t gg_rule_last_dim(const gg_tensor_desc *d);
int gg_rule_is_vec(const gg_tensor_desc *d, int64_t len);

/* ---- checks (0 or -EINVAL with the message in err) ---------------------------- */

/* The attribute's value (attrs NULL: its default). */
double gg_rule_attr(const gg_op_def *op, const gg_op_attrs *attrs, int i);

/* Counts, descs, attribute kinds; with `dtypes`, one shared floating dtype
 * over every operand (the ops that state their own dtypes pass 0). */
int gg_rule_common(const gg_op_def *op, const gg_tensor_desc *in, int nin,
                   const gg_tensor_desc *out, int nout, const gg_op_attrs *attrs, int dtypes,
                   char *err, size_t errlen);

/* out (the op's first output) has want's shape; why says where it comes from. */
int gg_rule_out(const gg_op_def *op, const gg_tensor_desc *out, const gg_tensor_desc *want,
                const char *why, char *err, size_t errlen);
/* d is 1-D of length len. */
int gg_rule_vec(const gg_op_def *op, const char *what, const gg_tensor_desc *d, int64_t len,
                const char *why, char *err, size_t errlen);
/* The attr "eps" is > 0 and finite in f32. */
int gg_rule_eps(const gg_op_def *op, const gg_op_attrs *attrs, char *err, size_t errlen);
/* d is floating (isfloat) or i32 (!isfloat). */
int gg_rule_dtype(const gg_op_def *op, const char *what, const gg_tensor_desc *d, int isfloat,
                  char *err, size_t errlen);
/* d has dtype dt, ref's. */
int gg_rule_same_dtype(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                       const char *ref, gg_dtype dt, char *err, size_t errlen);
int gg_rule_ndim(const gg_op_def *op, const char *what, const gg_tensor_desc *d, int nd,
                 const char *layout, char *err, size_t errlen);
/* A per-row i32 vector [rows]. */
int gg_rule_rows_i32(const gg_op_def *op, const char *what, const gg_tensor_desc *d,
                     int64_t rows, char *err, size_t errlen);

/* In a check function with the usual parameter names: the common checks,
 * with (GG_RULE_COMMON) or without (GG_RULE_COMMON_NODT) the shared floating
 * dtype. */
#define GG_RULE_COMMON_DT_(dt_)                                                          \
    do {                                                                                 \
        int rc_ = gg_rule_common(op, in, nin, out, nout, attrs, dt_, err, errlen);       \
        if (rc_)                                                                         \
            return rc_;                                                                  \
    } while (0)
#define GG_RULE_COMMON() GG_RULE_COMMON_DT_(1)
#define GG_RULE_COMMON_NODT() GG_RULE_COMMON_DT_(0)

#endif
