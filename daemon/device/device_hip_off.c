/* SPDX-License-Identifier: MIT */
/* The hip backend in a build without GPU support. */
#include <errno.h>
#include <stdio.h>

#include "device/device.h"

bool gg_device_hip_built(void)
{
    return false;
}

int gg_device_hip_open(const gg_config *cfg, gg_device **out, char *err, size_t errlen)
{
    (void)cfg;
    (void)out;
    snprintf(err, errlen, "this gfxgraphd was built without GPU support");
    return -ENODEV;
}
