/* SPDX-License-Identifier: MIT */
/* Answers that leave after the handler has returned (GG_CALL_ASYNC): the
 * job completion callbacks the rpc handlers give the executor, and the
 * packing they share with the synchronous handlers. */
#ifndef GG_REPLY_H
#define GG_REPLY_H

#include <msgpack.h>
#include <stdint.h>

#include "core/cache.h"
#include "core/exec.h"
#include "core/session.h"

/* Begin packs the response head into the session's connection's reply
 * buffer (nowhere when the client has gone) and returns the packer; the
 * caller packs the result map; end sends it and counts the request done.
 * Loop thread, one answer at a time. */
msgpack_packer *gg_rpc_reply_begin(gg_session *s, uint32_t msgid);
void gg_rpc_reply_end(gg_session *s);
/* An error response; counted as an error of the session and the daemon. */
void gg_rpc_reply_error(gg_session *s, uint32_t msgid, int neg_errno, const char *message);

/* The jobs' ops for replay and program.prepare: j->tag is the msgid. */
extern const gg_job_ops gg_rpc_replay_ops;
extern const gg_job_ops gg_rpc_prepare_ops;

/* The cache entries stats would show: every uid's (all) or uid's only. */
unsigned gg_rpc_cache_count(const gg_cache *c, bool all, uid_t uid);
/* Pack the cache table for stats: those entries, at most max of them (the
 * most recently used, in LRU order); adaptive: with each entry's choice of
 * graph or eager and both timings (replay-mode adaptive). */
void gg_rpc_pack_cache(const gg_cache *c, msgpack_packer *pk, bool all, uid_t uid,
                       unsigned max, bool adaptive);

#endif
