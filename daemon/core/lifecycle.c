/* SPDX-License-Identifier: MIT */
/* Bringing the core up and down (lifecycle.h). */
#include "core/lifecycle.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "core/cache.h"
#include "core/exec.h"

/* core->release: on an executor thread; before there is one (a start
 * that failed), here. */
static void lifecycle_release(gg_core *core, gg_dev_exec *graph, uint8_t *scratch,
                              gg_dev_stream *stream)
{
    if (core->exec)
        gg_exec_release(core->exec, graph, scratch, stream);
    else
        gg_device_free(core->dev, graph, scratch, stream);
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

    core->release = lifecycle_release;
    if ((rc = gg_cache_new(core, &core->cache)) < 0 ||
        (rc = gg_exec_new(core, &core->exec)) < 0) {
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

void gg_core_teardown(gg_core *core)
{
    /* The executor closed first (after a start that failed no stop has
     * closed it): its workers joined and its handle's close let finish on
     * the loop before the executor's memory goes.  Then the cache, whose
     * graphs the closed executor frees at once. */
    if (core->exec)
        gg_exec_close(core->exec);
    uv_run(core->loop, UV_RUN_NOWAIT);
    if (core->cache)
        gg_cache_free(core->cache);
    core->cache = NULL;
    if (core->exec)
        gg_exec_free(core->exec);
    core->exec = NULL;
    if (core->dev)
        gg_device_close(core->dev);
    core->dev = NULL;
}
