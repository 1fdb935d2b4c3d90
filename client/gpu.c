/* Registering a GPU buffer straight from a device pointer: the library finds
 * the allocation that holds the pointer, takes its IPC handle, and sends the
 * handle with the pointer's offset into the allocation.  Built against the
 * HIP runtime (or CUDA through kernels/gg_hip.h) in GPU builds; elsewhere
 * the call says GPU support is not built in. */
#include <errno.h>
#include <stdint.h>

#include "gfxgraph/client.h"
#include "priv.h"

#ifdef GFXGRAPH_HAVE_GPU
#include "gg_hip.h"

int gg_client_buffer_register_device(gg_client *c, const void *device_ptr, uint64_t size,
                                     uint64_t *id)
{
    if (!device_ptr || size == 0)
        return client_fail(c, -EINVAL, "a device pointer and a non-zero size are needed");
    hipDeviceptr_t base = NULL;
    size_t alloc = 0;
    hipError_t e = hipMemGetAddressRange(&base, &alloc, (hipDeviceptr_t)(uintptr_t)device_ptr);
    if (e != hipSuccess)
        return client_fail(c, -EINVAL, "%p is not device memory this process allocated: %s",
                           device_ptr, hipGetErrorString(e));
    uint64_t offset = (uint64_t)((uintptr_t)device_ptr - (uintptr_t)base);
    if (size > alloc - offset)
        return client_fail(c, -ERANGE, "%llu bytes from %p run past the end of its allocation "
                           "(%zu bytes from %p)", (unsigned long long)size, device_ptr, alloc,
                           (void *)base);
    hipIpcMemHandle_t h;
    e = hipIpcGetMemHandle(&h, (void *)base);
    if (e != hipSuccess)
        return client_fail(c, -EINVAL, "cannot share the allocation at %p: %s (memory from "
                           "hipMalloc can be shared; pool or managed memory cannot)",
                           (void *)base, hipGetErrorString(e));
    return gg_client_buffer_register(c, &h, sizeof(h), offset, size, id);
}

int gg_client_event_register_device(gg_client *c, void *hip_event, uint64_t *id)
{
    if (!hip_event)
        return client_fail(c, -EINVAL, "no event given");
    hipIpcEventHandle_t h;
    hipError_t e = hipIpcGetEventHandle(&h, (hipEvent_t)hip_event);
    if (e != hipSuccess)
        return client_fail(c, -EINVAL, "cannot share the event: %s (create it with "
                           "hipEventInterprocess | hipEventDisableTiming)", hipGetErrorString(e));
    return gg_client_event_register(c, &h, sizeof(h), id);
}

#else

int gg_client_event_register_device(gg_client *c, void *hip_event, uint64_t *id)
{
    (void)hip_event;
    (void)id;
    return client_fail(c, -ENOTSUP, "this libgfxgraph-client was built without GPU support");
}

int gg_client_buffer_register_device(gg_client *c, const void *device_ptr, uint64_t size,
                                     uint64_t *id)
{
    (void)device_ptr;
    (void)size;
    (void)id;
    return client_fail(c, -ENOTSUP, "this libgfxgraph-client was built without GPU support "
                       "(GFXGRAPH_GPU=off): register shared memory instead");
}

#endif
