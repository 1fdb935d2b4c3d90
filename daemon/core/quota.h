/* SPDX-License-Identifier: MIT */
/* Per-uid quotas: what one user may hold in the daemon at once, so that one
 * user over its limits affects only itself (docs/configuration.md, "Per-uid
 * quotas").  Every limit is a setting (0: none); a request past one fails
 * with EDQUOT, its message naming the limit, the figures and the setting.
 *
 * Usage is counted from what the core holds when asked (the buffers and
 * programs maps, the parked graphs, the fast-path regions), never kept in
 * counters of its own: nothing to fall out of step when a request fails
 * half-way or a session ends with work in flight.  Loop thread, core lock. */
#ifndef GG_QUOTA_H
#define GG_QUOTA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

struct gg_core;
struct gg_program;

typedef struct {
    uint64_t buffers, mapped_bytes;
    uint64_t programs, scratch_bytes, program_bytes;
    uint64_t parked, parked_bytes;
} gg_quota_use;

/* What uid holds now (fast-path regions are the transport's: not here). */
void gg_quota_usage(struct gg_core *core, uid_t uid, gg_quota_use *out);
/* Bytes a registration of [offset, offset + size) maps: whole pages. */
uint64_t gg_quota_mapped(uint64_t offset, uint64_t size);
/* buffer.register, before the import: one more buffer of that range. */
int gg_quota_buffer(struct gg_core *core, uid_t uid, uint64_t offset, uint64_t size,
                    proto_errbuf *e);
/* program.define, once p is parsed (not yet listed): one more program,
 * its scratch (gg_quota_scratch) and its own memory
 * (gg_quota_program_bytes). */
int gg_quota_program(struct gg_core *core, uid_t uid, const struct gg_program *p,
                     proto_errbuf *e);
/* The scratch a program holds: its one arena, sized for its largest
 * bucket and shared by every branch and bucket (core/arena.h). */
uint64_t gg_quota_scratch(const struct gg_program *p);
/* max-scratch-bytes-per-uid as it applies: the setting, or for auto
 * (GG_QUOTA_AUTO) a quarter of the device's memory (RAM on the cpu
 * backend); 0: no limit. */
uint64_t gg_quota_scratch_limit(const struct gg_core *core);
/* The heap a program's own structures hold: its tensors and their name
 * index, and per branch its nodes, launch plan and row-chain stages.  A
 * call node copies its callee's nodes and tensors in, so a define of a few
 * bytes can hold megabytes here: counted under max-program-bytes-per-uid,
 * apart from scratch (which lives on the device). */
uint64_t gg_quota_program_bytes(const struct gg_program *p);
/* max-program-bytes-per-uid as it applies: the setting, or for auto
 * (GG_QUOTA_AUTO) an eighth of the host's RAM; 0: no limit. */
uint64_t gg_quota_program_bytes_limit(const struct gg_core *core);
/* fastpath.open: `open` regions of uid are open now. */
int gg_quota_regions(struct gg_core *core, uid_t uid, uint64_t open, proto_errbuf *e);
/* One more job (a replay, a prepare) for uid, which has `have` in the
 * executor now (gg_exec_uid_jobs: those of its departed sessions still
 * running count) (max-jobs-per-uid). */
int gg_quota_jobs(struct gg_core *core, uid_t uid, unsigned have, proto_errbuf *e);
/* The EDQUOT message: "uid U: WHAT would be HAVE + ADD, over the limit of
 * LIMIT (SETTING); release ... ". */
int gg_quota_fail(proto_errbuf *e, uid_t uid, const char *what, uint64_t have, uint64_t add,
                  uint64_t limit, const char *setting, const char *hint);

/* Whether a client (uid, gid from its socket's credentials) sees every
 * uid's sessions and programs in stats: root, the daemon's own uid, and
 * members of admin-group: gid, or uid's groups in the group database
 * (getgrouplist), never /proc (hidden under ProtectProc=invisible). */
bool gg_quota_sees_all(const struct gg_core *core, uid_t uid, gid_t gid);

#endif
