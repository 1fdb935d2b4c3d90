/* SPDX-License-Identifier: MIT */
/* What config.c (the settings, their defaults, values and checks) and
 * config_load.c (where they come from: file, environment, flags) share.
 * Not for other files: they use base/config.h. */
#ifndef GG_CONFIG_INT_H
#define GG_CONFIG_INT_H

#include "base/config.h"

/* The build sets it from the configured sysconfdir, so that the daemon
 * reads the file `make install` wrote; this is only for other builds. */
#ifndef GG_DEFAULT_CONFIG
#define GG_DEFAULT_CONFIG "/etc/gfxgraph/gfxgraphd.conf"
#endif

/* The index of setting `key` in the table, or -1. */
int cfg_key_index(const char *key);

/* The per-uid connection limit that goes with max_connections when none
 * is set. */
unsigned cfg_per_uid_default(unsigned max_connections);

#endif
