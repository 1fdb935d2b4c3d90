/* SPDX-License-Identifier: MIT */
/* Sessions. */
#include "core/session.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "core/buffer.h"
#include "core/core.h"
#include "core/event.h"
#include "base/log.h"
#include "core/program.h"

gg_session *gg_session_new(gg_core *core, void *transport, pid_t pid, uid_t uid, gid_t gid)
{
    gg_session *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->id = ++core->sessions_total;
    s->refs = 1;
    s->core = core;
    s->transport = transport;
    s->pid = pid;
    s->uid = uid;
    s->gid = gid;
    s->connected_ms = gg_now_ms();
    gg_list_init(&s->buffers);
    gg_list_init(&s->programs);
    gg_list_init(&s->events);
    gg_list_init(&s->jobs);
    return s;
}

void gg_session_ref(gg_session *s)
{
    s->refs++;
}

static void session_destroy(gg_session *s)
{
    gg_core *core = s->core;
    gg_program_park_all(s);
    gg_event_release_all(s);
    gg_buffer_release_all(s);
    if (s->stream)
        core->release(core, NULL, NULL, s->stream);
    gg_log_fields f = {.session = s->id};
    GG_LOG(GG_LOG_DEBUG, &f, "session ended");
    free(s);
}

void gg_session_unref(gg_session *s)
{
    if (--s->refs == 0)
        session_destroy(s);
}

int gg_session_stream(gg_session *s, gg_dev_stream **out)
{
    if (!s->stream) {
        int rc = s->core->dev->ops->stream_create(s->core->dev, &s->stream);
        if (rc < 0)
            return rc;
    }
    *out = s->stream;
    return 0;
}
