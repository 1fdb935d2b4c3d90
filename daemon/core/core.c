/* SPDX-License-Identifier: MIT */
/* The core's shared state, its lock and its hand-offs to the owner (core.h). */
#include "core/core.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"

void gg_core_init(gg_core *core, uv_loop_t *loop, const gg_config *cfg)
{
    memset(core, 0, sizeof(*core));
    core->loop = loop;
    core->cfg = cfg;
    core->started_ms = gg_now_ms();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    core->started_unix = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9;
    core->next_id = 1;
    gg_idmap_init(&core->buffers);
    gg_idmap_init(&core->programs);
    gg_idmap_init(&core->events);
    pthread_mutex_init(&core->lock, NULL);
}

void gg_core_fini(gg_core *core)
{
    gg_idmap_fini(&core->buffers);
    gg_idmap_fini(&core->programs);
    gg_idmap_fini(&core->events);
    pthread_mutex_destroy(&core->lock);
}

void gg_core_device_lost(gg_core *core, const char *why)
{
    if (core->device_lost)
        return;
    core->device_lost = true;
    snprintf(core->unhealthy_reason, sizeof(core->unhealthy_reason), "device lost: %s", why);
    if (core->hooks.device_lost)
        core->hooks.device_lost(core, why);
}

void gg_core_check_device(gg_core *core)
{
    const char *lost = gg_device_lost_reason(core->dev);
    if (lost)
        gg_core_device_lost(core, lost);
}

void gg_core_maybe_stopped(gg_core *core)
{
    if (core->stopping && core->hooks.maybe_stopped)
        core->hooks.maybe_stopped(core);
}

int gg_core_add_transport(gg_core *core, const gg_transport_ops *t)
{
    if (core->ntransports == GG_MAX_TRANSPORTS)
        return -ENOSPC;
    core->transports[core->ntransports++] = *t;
    return 0;
}

void gg_core_del_transport(gg_core *core, const void *ctx)
{
    for (unsigned i = 0; i < core->ntransports; i++)
        if (core->transports[i].ctx == ctx) {
            core->transports[i] = core->transports[--core->ntransports];
            return;
        }
}

void gg_core_settle(gg_core *core, struct gg_session *s)
{
    for (unsigned i = 0; i < core->ntransports; i++)
        if (core->transports[i].settle)
            core->transports[i].settle(core->transports[i].ctx, s);
}

void gg_core_session_closing(gg_core *core, struct gg_session *s)
{
    for (unsigned i = 0; i < core->ntransports; i++)
        if (core->transports[i].session_closing)
            core->transports[i].session_closing(core->transports[i].ctx, s);
}

void gg_core_lock(gg_core *core)
{
    pthread_mutex_lock(&core->lock);
}

void gg_core_unlock(gg_core *core)
{
    pthread_mutex_unlock(&core->lock);
}

bool gg_core_trylock(gg_core *core)
{
    return pthread_mutex_trylock(&core->lock) == 0;
}
