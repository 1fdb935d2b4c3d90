/* SPDX-License-Identifier: MIT */
/* The core's state and its hand-offs to the owner (core.h). */
#include "core/core.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "core/cache.h"
#include "core/exec.h"

uint64_t gg_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t gg_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

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

int gg_core_start(gg_core *core, char *err, size_t errlen)
{
    int rc = gg_device_open(core->cfg, &core->dev, err, errlen);
    if (rc < 0)
        return rc;
    snprintf(core->backend, sizeof(core->backend), "%s", core->dev->ops->name);
    core->dev->ops->info(core->dev, &core->devinfo);
    gg_info("device: %s (%s, %s), backend %s", core->devinfo.name, core->devinfo.arch,
            core->devinfo.runtime, core->backend);

    if ((rc = gg_cache_new(core, &core->cache)) < 0 || (rc = gg_exec_new(core, &core->exec)) < 0) {
        snprintf(err, errlen, "cannot start the executor: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

void gg_core_close(gg_core *core)
{
    if (core->exec)
        gg_exec_close(core->exec);
}

bool gg_core_idle(const gg_core *core)
{
    return !core->exec || gg_exec_idle(core->exec);
}

void gg_core_fini(gg_core *core)
{
    /* the cache first: freeing its graphs goes through the (closed) executor */
    if (core->cache)
        gg_cache_free(core->cache);
    if (core->exec)
        gg_exec_free(core->exec);
    uv_run(core->loop, UV_RUN_NOWAIT);
    if (core->dev)
        gg_device_close(core->dev);
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
