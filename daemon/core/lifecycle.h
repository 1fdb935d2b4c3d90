/* SPDX-License-Identifier: MIT */
/* Bringing the core up and down: the device, the graph cache and the
 * executor, in the order each needs the others.  The owner (app/) calls
 * these; nothing in the core does. */
#ifndef GG_LIFECYCLE_H
#define GG_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/core.h"

/* After gg_core_init: open the device and start the cache and the executor
 * on the loop.  On failure err says why in one line; gg_core_teardown
 * undoes what was done. */
int gg_core_start(gg_core *core, char *err, size_t errlen);
/* The executor's async handle and workers go, so the loop can end. */
void gg_core_close(gg_core *core);
/* No job queued or running. */
bool gg_core_idle(const gg_core *core);
/* After the loop has ended: free the cache, the executor and the device
 * (whatever gg_core_start got to); gg_core_fini then frees the state. */
void gg_core_teardown(gg_core *core);

#endif
