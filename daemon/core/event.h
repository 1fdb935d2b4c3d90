/* SPDX-License-Identifier: MIT */
/* Client events imported by IPC handle (event.register): a replay can wait
 * for one before its work and record one after it, so a client orders its
 * own GPU work against the daemon's without a host round trip. */
#ifndef GG_EVENT_H
#define GG_EVENT_H

#include <stdint.h>

#include "device/device.h"
#include "proto.h"
#include "core/session.h"

struct gg_core;

typedef struct gg_event {
    uint64_t id;
    gg_session *sess;
    gg_list sess_link;
    gg_dev_event *dev;
    int users;               /* jobs in flight */
} gg_event;

int gg_event_lookup(struct gg_core *core, gg_session *s, uint64_t id, gg_event **out,
                    proto_errbuf *e);
/* Unregister it (loop thread); the caller has checked that nothing uses it. */
void gg_event_free(struct gg_core *core, gg_event *ev);
void gg_event_release_all(gg_session *s);

#endif
