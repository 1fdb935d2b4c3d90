/* SPDX-License-Identifier: MIT */
/* The fast path: replays through a shared-memory ring per session
 * (PROTOCOL.md section 15), beside the socket transport.  One submission
 * thread per region takes descriptors, runs cache hits itself (graph launch
 * plus a device-written completion word) and hands everything else to the
 * executor, whose answer comes back through the same completion record.
 *
 * Threading: gg_fp_open and gg_fp_session_closed run on the loop thread with
 * the core lock held; the rest of the module runs on the region threads and
 * whatever thread the device reports completions on, taking the core lock
 * only to look up and pin what a descriptor names and to count. */
#ifndef GG_FP_H
#define GG_FP_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/core.h"
#include "proto.h"

typedef struct gg_fp_module gg_fp_module;

enum { GG_FP_COMPLETE_AUTO = 0, GG_FP_COMPLETE_DEVICE, GG_FP_COMPLETE_DAEMON };

/* Settings (config keys fastpath, fastpath-spin-us, fastpath-max-regions). */
typedef struct {
    bool enabled;
    unsigned spin_us;              /* submission thread's busy-wait after activity */
    unsigned max_regions;          /* daemon-wide */
    /* fastpath-completion: who completes a cache hit's record.  auto: the
     * device on a GPU, the daemon on the cpu backend; device: the device's
     * write (on the cpu backend a store right after the work: the same
     * path, for tests); daemon: the daemon, once the work is done. */
    int completion;                /* GG_FP_COMPLETE_* */
} gg_fp_settings;

int gg_fp_module_new(gg_core *core, uv_loop_t *loop, const gg_fp_settings *set,
                     gg_fp_module **out);
/* Loop thread, once no region is left (gg_fp_live() == 0). */
void gg_fp_module_close(gg_fp_module *m);
void gg_fp_module_free(gg_fp_module *m);
/* Regions whose threads have not finished (a stop waits for 0). */
unsigned gg_fp_live(const gg_fp_module *m);
/* fastpath-spin-us changed (a reload): the ring threads use it from their
 * next idle check; with one CPU to run on they still never spin. */
void gg_fp_set_spin_us(gg_fp_module *m, unsigned spin_us);
/* hello's fastpath map. */
bool gg_fp_available(const gg_fp_module *m);
const char *gg_fp_completion(const gg_fp_module *m);

/* fastpath.open: create s's region with `entries` slots.  On success *fd is
 * the sealed memfd, for the caller to send and then close.  Negative errno
 * with a message in err. */
int gg_fp_open(gg_fp_module *m, gg_session *s, uint32_t entries, int *fd, gg_fp_geom *geom,
               proto_errbuf *err);
/* The session's client is going (or never got its region): its region
 * stops taking descriptors and goes once its work in flight is done.  Core
 * lock held. */
void gg_fp_session_closed(gg_fp_module *m, gg_session *s);
/* s has a region (stopping or not).  Core lock held. */
bool gg_fp_attached(const gg_fp_module *m, const gg_session *s);
/* Hits whose completion the device has written but whose callback has not
 * come yet: unpin and count them now, so that a request a client sends on
 * seeing its completion finds the replay finished (a rebind is not refused
 * as "in flight", stats count it).  s NULL: every session's.  Core lock
 * held. */
void gg_fp_collect(gg_fp_module *m, gg_session *s);
/* Cache hits still running, appended to buf as gg_exec_describe writes
 * jobs ("; " before each when n > 0); returns n plus their count.  Core
 * lock held. */
unsigned gg_fp_describe(const gg_fp_module *m, char *buf, size_t len, unsigned n);

#endif
