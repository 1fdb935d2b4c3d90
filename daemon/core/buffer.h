/* SPDX-License-Identifier: MIT */
/* Client buffers imported into the daemon: a POSIX shm object (cpu backend)
 * or an IPC memory handle (hip backend), with an offset and a size checked
 * against the real object.  Owned by the session that registered them. */
#ifndef GG_BUFFER_H
#define GG_BUFFER_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"
#include "core/session.h"

struct gg_core;

typedef struct gg_buffer {
    uint64_t id;
    gg_session *sess;
    gg_list sess_link;
    gg_dev_buffer *dev;
    uint8_t *ptr;            /* device address of offset */
    uint64_t offset;
    uint64_t size;
    char handle[72];         /* shm name, the IPC handle's first bytes in hex, or
                              * "fd:" and the file's name for one passed by fd */
    int users;               /* programs that refer to it */
    /* The object its memory belongs to and where it starts there
     * (device buffer_object), when the backend knows: overlap checks
     * compare two registrations of one object by it (program.c). */
    bool has_obj;
    uint64_t obj[2], obj_off;
} gg_buffer;

/* Look up id for session s: -ENOENT unknown, -EACCES another session's. */
int gg_buffer_lookup(struct gg_core *core, gg_session *s, uint64_t id, gg_buffer **out,
                     proto_errbuf *e);
/* Unregister it (loop thread); the caller has checked that nothing uses it. */
void gg_buffer_free(struct gg_core *core, gg_buffer *b);
void gg_buffer_release_all(gg_session *s);

#endif
