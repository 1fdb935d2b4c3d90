/* SPDX-License-Identifier: MIT */
/* Registering a GPU buffer straight from a device pointer: the library finds
 * the allocation that holds the pointer, takes its IPC handle, and sends the
 * handle with the pointer's offset into the allocation.
 *
 * The library is not linked against the GPU runtime: a process that only
 * registers shared memory must not need ROCm (or CUDA) installed, and the
 * Debian package must not depend on it.  The few runtime entry points used
 * here are looked up when a device pointer is first registered, in the
 * runtime the process already has loaded (it allocated the memory with it),
 * else loaded by soname.  GPU builds compile this against HIP's (or, through
 * kernels/gg_hip.h, CUDA's) types; elsewhere the calls say GPU support is
 * not built in. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "gfxgraph/client.h"
#include "priv.h"

#ifdef GFXGRAPH_HAVE_GPU
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>

#include "gg_hip.h"

typedef const char *(*gpu_error_string_fn)(hipError_t);
typedef hipError_t (*gpu_ipc_mem_fn)(hipIpcMemHandle_t *, void *);
typedef hipError_t (*gpu_ipc_event_fn)(hipIpcEventHandle_t *, hipEvent_t);

#if defined(GFXGRAPH_HIP_CUDA)
/* CUDA's runtime has no hipMemGetAddressRange; the driver's
 * cuMemGetAddressRange (the _v2 symbol is the ABI since CUDA 3.2) answers it
 * for the runtime's primary context, which cudaSetDevice makes current. */
typedef cudaError_t (*gpu_get_device_fn)(int *);
typedef cudaError_t (*gpu_set_device_fn)(int);
typedef int (*gpu_cu_range_fn)(unsigned long long *, size_t *, unsigned long long);
#define GPU_RUNTIME_NAME "the CUDA runtime"
#define GPU_RUNTIME_PREFIX "libcudart"
static const char *const gpu_sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
static const char *const gpu_driver_soname = "libcuda.so.1";
#else
typedef hipError_t (*gpu_range_fn)(hipDeviceptr_t *, size_t *, hipDeviceptr_t);
#define GPU_RUNTIME_NAME "the HIP runtime"
#define GPU_RUNTIME_PREFIX "libamdhip64"
static const char *const gpu_sonames[] = {"libamdhip64.so.7", "libamdhip64.so.6",
                                          "libamdhip64.so.5", "libamdhip64.so"};
#endif

#define GPU_NSONAMES (sizeof gpu_sonames / sizeof gpu_sonames[0])

/* Resolved once per process; read-only after gpu_once. */
static struct {
    int err;                     /* 0, or the negative errno of the failure */
    char msg[512];               /* why, when err */
    gpu_error_string_fn error_string;
    gpu_ipc_mem_fn ipc_mem;
    gpu_ipc_event_fn ipc_event;
#if defined(GFXGRAPH_HIP_CUDA)
    gpu_get_device_fn get_device;
    gpu_set_device_fn set_device;
    gpu_cu_range_fn cu_range;
#else
    gpu_range_fn range;
#endif
} gpu_rt;
static pthread_once_t gpu_once = PTHREAD_ONCE_INIT;

/* ISO C has no object-to-function pointer conversion: copy the bits. */
static int gpu_sym(void *lib, const char *name, void *fn, size_t fnsize)
{
    void *p = dlsym(lib, name);
    if (!p) {
        snprintf(gpu_rt.msg, sizeof gpu_rt.msg, "%s has no %s", GPU_RUNTIME_NAME, name);
        return -ELIBACC;
    }
    memcpy(fn, &p, fnsize);
    return 0;
}

/* A runtime loaded under another file name (a wheel's bundled, renamed
 * copy): found among the loaded objects by its name's prefix. */
static int gpu_find_loaded(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    const char *path = info->dlpi_name, *base;
    if (!path || !*path)
        return 0;
    base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, GPU_RUNTIME_PREFIX, strlen(GPU_RUNTIME_PREFIX)) != 0)
        return 0;
    void *lib = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        return 0;
    *(void **)out = lib;
    return 1;
}

static void *gpu_open_runtime(void)
{
    void *lib = NULL;
    for (size_t i = 0; i < GPU_NSONAMES && !lib; i++)
        lib = dlopen(gpu_sonames[i], RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        dl_iterate_phdr(gpu_find_loaded, &lib);
    for (size_t i = 0; i < GPU_NSONAMES && !lib; i++)
        lib = dlopen(gpu_sonames[i], RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(gpu_rt.msg, sizeof gpu_rt.msg,
                 "%s is not loaded in this process and %s cannot be loaded (%s): device "
                 "memory is registered from the process that allocated it with that runtime",
                 GPU_RUNTIME_NAME, gpu_sonames[0], why ? why : "not found");
    }
    return lib;
}

static void gpu_resolve(void)
{
    void *lib = gpu_open_runtime();
    int rc = lib ? 0 : -ELIBACC;
#if defined(GFXGRAPH_HIP_CUDA)
    if (!rc)
        rc = gpu_sym(lib, "cudaGetErrorString", &gpu_rt.error_string, sizeof gpu_rt.error_string);
    if (!rc)
        rc = gpu_sym(lib, "cudaIpcGetMemHandle", &gpu_rt.ipc_mem, sizeof gpu_rt.ipc_mem);
    if (!rc)
        rc = gpu_sym(lib, "cudaIpcGetEventHandle", &gpu_rt.ipc_event, sizeof gpu_rt.ipc_event);
    if (!rc)
        rc = gpu_sym(lib, "cudaGetDevice", &gpu_rt.get_device, sizeof gpu_rt.get_device);
    if (!rc)
        rc = gpu_sym(lib, "cudaSetDevice", &gpu_rt.set_device, sizeof gpu_rt.set_device);
    if (!rc) {
        /* the runtime loads the driver itself; by soname only if it has not yet */
        void *drv = dlopen(gpu_driver_soname, RTLD_LAZY | RTLD_NOLOAD);
        if (!drv)
            drv = dlopen(gpu_driver_soname, RTLD_LAZY | RTLD_LOCAL);
        if (!drv) {
            const char *why = dlerror();
            snprintf(gpu_rt.msg, sizeof gpu_rt.msg, "the CUDA driver (%s) cannot be loaded: %s",
                     gpu_driver_soname, why ? why : "not found");
            rc = -ELIBACC;
        } else {
            rc = gpu_sym(drv, "cuMemGetAddressRange_v2", &gpu_rt.cu_range,
                         sizeof gpu_rt.cu_range);
        }
    }
#else
    if (!rc)
        rc = gpu_sym(lib, "hipGetErrorString", &gpu_rt.error_string, sizeof gpu_rt.error_string);
    if (!rc)
        rc = gpu_sym(lib, "hipIpcGetMemHandle", &gpu_rt.ipc_mem, sizeof gpu_rt.ipc_mem);
    if (!rc)
        rc = gpu_sym(lib, "hipIpcGetEventHandle", &gpu_rt.ipc_event, sizeof gpu_rt.ipc_event);
    if (!rc)
        rc = gpu_sym(lib, "hipMemGetAddressRange", &gpu_rt.range, sizeof gpu_rt.range);
#endif
    gpu_rt.err = rc;
}

static int gpu_ready(gg_client *c)
{
    pthread_once(&gpu_once, gpu_resolve);
    if (gpu_rt.err)
        return client_fail(c, gpu_rt.err, "%s", gpu_rt.msg);
    return 0;
}

static const char *gpu_error_string(hipError_t e)
{
    const char *s = gpu_rt.error_string(e);
    return s ? s : "unknown error";
}

static hipError_t gpu_address_range(hipDeviceptr_t *base, size_t *size, hipDeviceptr_t ptr)
{
#if defined(GFXGRAPH_HIP_CUDA)
    int dev = 0;
    cudaError_t rc = gpu_rt.get_device(&dev);
    if (rc == cudaSuccess)
        rc = gpu_rt.set_device(dev); /* CUDA 12+: initialises the primary context and binds it */
    if (rc != cudaSuccess)
        return rc;
    unsigned long long b = 0;
    size_t s = 0;
    /* the driver's CUresult codes are the runtime's numbers for the ones it returns here */
    int r = gpu_rt.cu_range(&b, &s, (unsigned long long)(uintptr_t)ptr);
    if (r != 0)
        return (cudaError_t)r;
    *base = (hipDeviceptr_t)(uintptr_t)b;
    *size = s;
    return cudaSuccess;
#else
    return gpu_rt.range(base, size, ptr);
#endif
}

int gg_client_buffer_register_device(gg_client *c, const void *device_ptr, uint64_t size,
                                     uint64_t *id)
{
    if (!device_ptr || size == 0)
        return client_fail(c, -EINVAL, "a device pointer and a non-zero size are needed");
    int rc = gpu_ready(c);
    if (rc < 0)
        return rc;
    hipDeviceptr_t base = NULL;
    size_t alloc = 0;
    hipError_t e = gpu_address_range(&base, &alloc, (hipDeviceptr_t)(uintptr_t)device_ptr);
    if (e != hipSuccess)
        return client_fail(c, -EINVAL, "%p is not device memory this process allocated: %s",
                           device_ptr, gpu_error_string(e));
    uint64_t offset = (uint64_t)((uintptr_t)device_ptr - (uintptr_t)base);
    if (size > alloc - offset)
        return client_fail(c, -ERANGE, "%llu bytes from %p run past the end of its allocation "
                           "(%zu bytes from %p)", (unsigned long long)size, device_ptr, alloc,
                           (void *)base);
    hipIpcMemHandle_t h;
    e = gpu_rt.ipc_mem(&h, (void *)base);
    if (e != hipSuccess)
        return client_fail(c, -EINVAL, "cannot share the allocation at %p: %s (memory from "
                           "hipMalloc can be shared; pool or managed memory cannot)",
                           (void *)base, gpu_error_string(e));
    return gg_client_buffer_register(c, &h, sizeof(h), offset, size, id);
}

int gg_client_event_register_device(gg_client *c, void *hip_event, uint64_t *id)
{
    if (!hip_event)
        return client_fail(c, -EINVAL, "no event given");
    int rc = gpu_ready(c);
    if (rc < 0)
        return rc;
    hipIpcEventHandle_t h;
    hipError_t e = gpu_rt.ipc_event(&h, (hipEvent_t)hip_event);
    if (e != hipSuccess)
        return client_fail(c, -EINVAL, "cannot share the event: %s (create it with "
                           "hipEventInterprocess | hipEventDisableTiming)", gpu_error_string(e));
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
