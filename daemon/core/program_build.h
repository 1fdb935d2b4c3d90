/* SPDX-License-Identifier: MIT */
/* The program builder (program_build.c): a define's spec checked and built.
 *
 * program.define runs in two halves, so that a large one is checked off the
 * loop: gg_program_build reads only the spec and env (no core state, no
 * lock; any thread), gg_program_commit (program.h: loop, core lock) counts
 * the program against its uid's quotas, gives it its id and lists it.  A
 * built program that is never committed goes with gg_program_discard. */
#ifndef GG_PROGRAM_BUILD_H
#define GG_PROGRAM_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"
#include "core/buffer.h"
#include "core/session.h"
#include "core/program_spec.h"

struct gg_program;
struct gg_pnode;

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

int gg_program_build(const gg_define_env *env, const gg_program_spec *spec,
                     struct gg_program **out, proto_errbuf *e);
/* Free what gg_program_build made (a program built in part included); a
 * committed program goes with gg_program_release (program.h), which undoes
 * the commit and then this. */
void gg_program_discard(struct gg_program *p);

/* The tensor named by string value o, or -1. */
int gg_program_find_tensor(const struct gg_program *p, const gg_spec_val *o);
/* v is the string s. */
bool gg_spec_str_eq(const gg_spec_val *v, const char *s);
/* v as the argument `key`: 0 with *out, -ENOENT when absent (or nil) and
 * not required, or -EINVAL with the message a client gets for it. */
int gg_spec_u64(const gg_spec_val *v, const char *key, bool required, uint64_t *out,
                proto_errbuf *e);
/* Define-time rules 5 and 6 (PROTOCOL.md, program.define): a node's outputs
 * against its inputs; batch outputs' padding rows against every other
 * buffer tensor.  0, or -EINVAL with the message.  program.rebind checks
 * them again against the new placement. */
int gg_program_node_overlaps(const struct gg_program *p, const struct gg_pnode *n, int ni,
                             proto_errbuf *e);
int gg_program_padding_overlaps(const struct gg_program *p, proto_errbuf *e);

#endif
