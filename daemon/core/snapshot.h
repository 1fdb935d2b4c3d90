/* SPDX-License-Identifier: MIT */
/* What a program.define checked off the loop reads instead of the core:
 * the buffer and program ids that exist at the moment it is taken (loop,
 * core lock), the session's own with their objects.  The reader needs no
 * lock: a session's buffers and programs change only through its own
 * requests, which wait for that define (rpc/conn.c), and stay in place
 * while its connection holds the session. */
#ifndef GG_SNAPSHOT_H
#define GG_SNAPSHOT_H

#include "core/buffer.h"
#include "core/idmap.h"
#include "core/program.h"

struct gg_core;

typedef struct {
    gg_idmap buffers;       /* id -> the session's gg_buffer, or a mark: another's */
    gg_idmap programs;      /* id -> the session's listed gg_program, or the mark */
} gg_snapshot;

int gg_snapshot_take(struct gg_core *core, const gg_session *s, gg_snapshot *out);
/* gg_buffer_lookup and gg_program_lookup against it, with their messages. */
int gg_snapshot_buffer(const gg_snapshot *snap, uint64_t id, gg_buffer **out, proto_errbuf *e);
int gg_snapshot_program(const gg_snapshot *snap, uint64_t id, gg_program **out,
                        proto_errbuf *e);
void gg_snapshot_free(gg_snapshot *snap);

#endif
