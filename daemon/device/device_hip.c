/* SPDX-License-Identifier: MIT */
/* The hip backend: real graphs on a real GPU.  The same C source builds for
 * AMD (HIP runtime) and for NVIDIA (CUDA runtime through kernels/gg_hip.h).
 *
 * Happy path: a client's buffer arrives as a 64-byte IPC memory handle plus
 * an offset; the handle is opened once per process (reference-counted, since
 * one allocation is often registered as several buffers) and the size is
 * checked against the real allocation's range.  Each session gets a
 * non-blocking stream with its own kernel context (BLAS handle and
 * workspace, created before any capture).  Capture runs in thread-local mode
 * on an executor thread; the graph is instantiated and launched there too;
 * completion reaches the loop through notify() (device_hip_done.c).
 *
 * AMD-specific choices, made here because this is where they bite:
 *   - Capture mode is hipStreamCaptureModeThreadLocal.  Relaxed mode from a
 *     worker thread faults on RDNA2 with ROCm, and global mode would let an
 *     unrelated call on another executor thread (a hipMalloc for another
 *     session's scratch) invalidate this capture.
 *   - The capture status is checked explicitly before and after
 *     hipStreamEndCapture, and the captured node count is compared with the
 *     launches made: older ROCm reports no error while capturing and can hand
 *     back a graph that silently lacks nodes.
 *   - hipGraphExecUpdate is used to rebind pointers, but ROCm leaks a
 *     kernel-argument slot per update, so the caller re-instantiates after
 *     exec-update-limit updates (default 64).
 *
 * Failure modes: a handle that does not open, or an offset/size past the
 * allocation, is refused with a message.  Errors that leave the context
 * unusable (illegal address or instruction, launch failure or timeout, a
 * device-side assert, ECC, lost device: gg_hip_error_is_sticky) come back
 * as -ENODEV, from whichever thread saw them: the daemon reports unhealthy
 * and exits with its own code (the executor checks the device after every
 * job, gg_device_ops.lost).
 * Everything else is -EIO with the runtime's message for the client. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/device.h"
#include "gg_hip.h"
#include "gpu_ops.h"
#include "base/log.h"

#include "device/device_hip.h"

__thread char hipdev_errbuf[256];
static __thread int hip_bound_device = -1;

static const char *hip_last_error(gg_device *dev)
{
    (void)dev;
    return hipdev_errbuf[0] ? hipdev_errbuf : "no error";
}

/* Errors after which the context cannot be trusted again (gg_hip.h keeps the
 * list per platform). */
static bool hip_sticky(hipError_t e)
{
    return gg_hip_error_is_sticky(e) != 0;
}

/* From any thread: the device is unusable; the first reason is kept. */
static void hip_mark_lost(gg_device *dev)
{
    if (!dev)
        return;
    hip_priv *p = hip_p(dev);
    pthread_mutex_lock(&p->lock);
    if (!p->lost)
        snprintf(p->lost_why, sizeof(p->lost_why), "%s", hipdev_errbuf);
    p->lost = 1;
    pthread_mutex_unlock(&p->lock);
}

static const char *hip_lost(gg_device *dev)
{
    hip_priv *p = hip_p(dev);
    pthread_mutex_lock(&p->lock);
    const char *why = p->lost ? p->lost_why : NULL;
    pthread_mutex_unlock(&p->lock);
    return why;   /* set once, never changed after: safe to read unlocked */
}

int hipdev_fail(gg_device *dev, hipError_t e, const char *what)
{
    snprintf(hipdev_errbuf, sizeof(hipdev_errbuf), "%s: %s (%s)", what, hipGetErrorString(e),
             hipGetErrorName(e));
    if (hip_sticky(e)) {
        hip_mark_lost(dev);
        return -ENODEV;
    }
    if (e == hipErrorOutOfMemory || e == hipErrorMemoryAllocation)
        return -ENOMEM;
    if (e == hipErrorInvalidValue)
        return -EINVAL;
    return -EIO;
}

/* The current device is per thread: bind each thread once. */
int hipdev_bind(gg_device *dev)
{
    hip_priv *p = hip_p(dev);
    if (hip_bound_device == p->device)
        return 0;
    hipError_t e = hipSetDevice(p->device);
    if (e != hipSuccess)
        return hipdev_fail(dev, e, "hipSetDevice");
    hip_bound_device = p->device;
    return 0;
}

#define HIP_CALL(dev, call, what)                                                           \
    do {                                                                                    \
        hipError_t e_ = (call);                                                             \
        if (e_ != hipSuccess)                                                               \
            return hipdev_fail((dev), e_, (what));                                             \
    } while (0)

static int hip_info(gg_device *dev, gg_device_info *out)
{
    hip_priv *p = hip_p(dev);
    memset(out, 0, sizeof(*out));
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    hipDeviceProp_t prop;
    HIP_CALL(dev, hipGetDeviceProperties(&prop, p->device), "hipGetDeviceProperties");
    snprintf(out->name, sizeof(out->name), "%.127s", prop.name);
    gg_hip_arch_name(p->device, out->arch, sizeof(out->arch));
    gg_hip_runtime_string(out->runtime, sizeof(out->runtime));
    int drv = 0;
    if (hipDriverGetVersion(&drv) == hipSuccess)
        snprintf(out->driver, sizeof(out->driver), "%d", drv);
    size_t free_b = 0, total_b = 0;
    if (hipMemGetInfo(&free_b, &total_b) == hipSuccess) {
        out->mem_free = free_b;
        out->mem_total = total_b;
    }
    hipDeviceGetAttribute(&out->wave_size, hipDeviceAttributeWarpSize, p->device);
    hipDeviceGetAttribute(&out->compute_units, hipDeviceAttributeMultiprocessorCount, p->device);
    snprintf(out->gpu_sharing, sizeof(out->gpu_sharing), "%s", p->sharing);
    return 0;
}

/* ---- memory ---------------------------------------------------------------- */

static int hip_host_register(gg_device *dev, void *ptr, size_t len, void **devptr, char *err,
                             size_t errlen);
static void hip_host_unregister(gg_device *dev, void *ptr);

/* A client's memfd or shm object: mapped here and registered as mapped
 * pinned host memory, as the fast path's region is, so kernels read and
 * write it over the bus.  Sealed against shrinking: the device would keep
 * using pages the client had cut off. */
static int hip_buffer_import_fd(gg_device *dev, const gg_import_desc *d, gg_dev_buffer **out,
                                void **ptr, char *err, size_t errlen)
{
    gg_dev_buffer *b = calloc(1, sizeof(*b));
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    void *host;
    int rc = gg_device_map_fd(d, true, &b->map, &b->map_len, &host, err, errlen);
    if (rc < 0) {
        free(b);
        return rc;
    }
    void *devptr = NULL;
    char why[200] = "";
    if ((rc = hip_host_register(dev, b->map, b->map_len, &devptr, why, sizeof(why))) < 0) {
        snprintf(err, errlen, "cannot register the buffer with the device as host memory: %s",
                 why);
        munmap(b->map, b->map_len);
        free(b);
        return rc;
    }
    *out = b;
    *ptr = (uint8_t *)devptr + ((uint8_t *)host - (uint8_t *)b->map);
    return 0;
}

static int hip_buffer_import(gg_device *dev, const gg_import_desc *d, gg_dev_buffer **out,
                             void **ptr, char *err, size_t errlen)
{
    hip_priv *p = hip_p(dev);
    if (d->by_fd)
        return hip_buffer_import_fd(dev, d, out, ptr, err, errlen);
    if (d->handle_len != HIP_HANDLE_SIZE) {
        snprintf(err, errlen, "the hip backend takes a %zu-byte IPC memory handle (bin), got %zu "
                 "bytes", HIP_HANDLE_SIZE, d->handle_len);
        return -EINVAL;
    }
    int rc = hipdev_bind(dev);
    if (rc < 0) {
        snprintf(err, errlen, "%s", hipdev_errbuf);
        return rc;
    }
    gg_dev_buffer *b = calloc(1, sizeof(*b));
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    pthread_mutex_lock(&p->lock);
    hip_import *imp = p->imports;
    while (imp && memcmp(&imp->handle, d->handle, HIP_HANDLE_SIZE) != 0)
        imp = imp->next;
    if (!imp) {
        imp = calloc(1, sizeof(*imp));
        if (!imp) {
            rc = -ENOMEM;
            snprintf(err, errlen, "out of memory");
            goto undo_lock;
        }
        memcpy(&imp->handle, d->handle, HIP_HANDLE_SIZE);
        void *base = NULL;
        hipError_t e = hipIpcOpenMemHandle(&base, imp->handle, hipIpcMemLazyEnablePeerAccess);
        if (e != hipSuccess) {
            rc = hipdev_fail(dev, e, "hipIpcOpenMemHandle");
            snprintf(err, errlen, "cannot open the IPC memory handle (%s); the handle must come "
                     "from hipIpcGetMemHandle in another process on this GPU",
                     hipGetErrorString(e));
            free(imp);
            goto undo_lock;
        }
        /* The size the client claims is checked against the real
         * allocation, never trusted. */
        hipDeviceptr_t abase = NULL;
        size_t asize = 0;
        e = hipMemGetAddressRange(&abase, &asize, base);
        if (e != hipSuccess) {
            rc = hipdev_fail(dev, e, "hipMemGetAddressRange");
            snprintf(err, errlen, "cannot find the allocation behind the handle: %s",
                     hipGetErrorString(e));
            hipIpcCloseMemHandle(base);
            free(imp);
            goto undo_lock;
        }
        imp->base = base;
        imp->size = asize - (size_t)((uint8_t *)base - (uint8_t *)abase);
        imp->next = p->imports;
        p->imports = imp;
    }
    if (d->offset > imp->size || d->size > imp->size - d->offset) {
        snprintf(err, errlen, "offset %llu + size %llu is past the end of the shared allocation "
                 "(%zu bytes)", (unsigned long long)d->offset, (unsigned long long)d->size,
                 imp->size);
        rc = -ERANGE;
        if (imp->refs == 0) {
            p->imports = imp->next;
            hipIpcCloseMemHandle(imp->base);
            free(imp);
        }
        goto undo_lock;
    }
    imp->refs++;
    pthread_mutex_unlock(&p->lock);
    b->imp = imp;
    *out = b;
    *ptr = imp->base + d->offset;
    return 0;

undo_lock:
    pthread_mutex_unlock(&p->lock);
    free(b);
    return rc;
}

static void hip_buffer_release(gg_device *dev, gg_dev_buffer *b)
{
    hip_priv *p = hip_p(dev);
    if (!b)
        return;
    if (!b->imp) {
        hip_host_unregister(dev, b->map);
        munmap(b->map, b->map_len);
        free(b);
        return;
    }
    pthread_mutex_lock(&p->lock);
    hip_import *imp = b->imp;
    if (--imp->refs == 0) {
        for (hip_import **pp = &p->imports; *pp; pp = &(*pp)->next)
            if (*pp == imp) {
                *pp = imp->next;
                break;
            }
        hipdev_bind(dev);
        hipIpcCloseMemHandle(imp->base);
        free(imp);
    }
    pthread_mutex_unlock(&p->lock);
    free(b);
}

static int hip_scratch_alloc(gg_device *dev, size_t bytes, void **ptr)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    HIP_CALL(dev, hipMalloc(ptr, bytes ? bytes : 256), "hipMalloc");
    return 0;
}

static void hip_scratch_free(gg_device *dev, void *ptr)
{
    if (ptr && hipdev_bind(dev) == 0)
        hipFree(ptr);
}

static int hip_memset(gg_device *dev, gg_dev_stream *s, void *ptr, int byte, size_t bytes)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    HIP_CALL(dev, hipMemsetAsync(ptr, byte, bytes, s->s), "hipMemsetAsync");
    return 0;
}

static int hip_memcpy_d2h(gg_device *dev, void *dst, const void *src, size_t bytes)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    HIP_CALL(dev, hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost), "hipMemcpy");
    return 0;
}

static int hip_memcpy_h2d(gg_device *dev, void *dst, const void *src, size_t bytes)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    HIP_CALL(dev, hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice), "hipMemcpy");
    /* From pageable memory the copy may return before its DMA lands, and
     * the sessions' non-blocking streams do not wait for the null stream:
     * wait here, so work enqueued next reads what was written. */
    HIP_CALL(dev, hipStreamSynchronize(0), "hipStreamSynchronize");
    return 0;
}

/* ---- streams and events ---------------------------------------------------- */

static int hip_stream_create(gg_device *dev, gg_dev_stream **out)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    gg_dev_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    hipError_t e = hipStreamCreateWithFlags(&s->s, hipStreamNonBlocking);
    if (e != hipSuccess) {
        free(s);
        return hipdev_fail(dev, e, "hipStreamCreateWithFlags");
    }
    /* The BLAS handle and workspace exist before any capture on this stream. */
    if ((rc = gg_gpu_ctx_create((void *)s->s, &s->ctx)) < 0) {
        snprintf(hipdev_errbuf, sizeof(hipdev_errbuf), "kernel context: %s", gg_gpu_last_error());
        hipStreamDestroy(s->s);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void hip_stream_destroy(gg_device *dev, gg_dev_stream *s)
{
    if (!s)
        return;
    hipdev_bind(dev);
    gg_gpu_ctx_destroy(s->ctx);
    hipStreamDestroy(s->s);
    free(s);
}

static int hip_stream_sync(gg_device *dev, gg_dev_stream *s)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    HIP_CALL(dev, hipStreamSynchronize(s->s), "hipStreamSynchronize");
    return 0;
}

static int hip_event_create(gg_device *dev, gg_dev_event **out)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    gg_dev_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return -ENOMEM;
    hipError_t e = hipEventCreateWithFlags(&ev->e, hipEventDisableTiming);
    if (e != hipSuccess) {
        free(ev);
        return hipdev_fail(dev, e, "hipEventCreateWithFlags");
    }
    *out = ev;
    return 0;
}

static int hip_event_import(gg_device *dev, const void *handle, size_t len, gg_dev_event **out,
                            char *err, size_t errlen)
{
    if (len != sizeof(hipIpcEventHandle_t)) {
        snprintf(err, errlen, "an IPC event handle is %zu bytes, got %zu",
                 sizeof(hipIpcEventHandle_t), len);
        return -EINVAL;
    }
    int rc = hipdev_bind(dev);
    if (rc < 0) {
        snprintf(err, errlen, "%s", hipdev_errbuf);
        return rc;
    }
    gg_dev_event *ev = calloc(1, sizeof(*ev));
    if (!ev) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    hipIpcEventHandle_t h;
    memcpy(&h, handle, sizeof(h));
    hipError_t e = hipIpcOpenEventHandle(&ev->e, h);
    if (e != hipSuccess) {
        rc = hipdev_fail(dev, e, "hipIpcOpenEventHandle");
        snprintf(err, errlen, "cannot open the IPC event handle: %s (create the event with "
                 "hipEventInterprocess | hipEventDisableTiming)", hipGetErrorString(e));
        free(ev);
        return rc;
    }
    *out = ev;
    return 0;
}

static int hip_event_record(gg_device *dev, gg_dev_event *ev, gg_dev_stream *s)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    HIP_CALL(dev, hipEventRecord(ev->e, s->s), "hipEventRecord");
    return 0;
}

static int hip_stream_wait_event(gg_device *dev, gg_dev_stream *s, gg_dev_event *ev)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    HIP_CALL(dev, hipStreamWaitEvent(s->s, ev->e, 0), "hipStreamWaitEvent");
    return 0;
}

static void hip_event_destroy(gg_device *dev, gg_dev_event *ev)
{
    if (!ev)
        return;
    hipdev_bind(dev);
    hipEventDestroy(ev->e);
    free(ev);
}

/* ---- capture and graphs ---------------------------------------------------- */

static int hip_capture_begin(gg_device *dev, gg_dev_stream *s)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    hipGetLastError();   /* start from a clean slate: errors below are ours */
    HIP_CALL(dev, hipStreamBeginCapture(s->s, hipStreamCaptureModeThreadLocal),
             "hipStreamBeginCapture");
    s->capturing = true;
    s->launches = 0;
    return 0;
}

static int hip_capture_end(gg_device *dev, gg_dev_stream *s, gg_dev_graph **out)
{
    *out = NULL;
    if (!s->capturing) {
        snprintf(hipdev_errbuf, sizeof(hipdev_errbuf), "the stream is not capturing");
        return -EINVAL;
    }
    s->capturing = false;
    /* Older ROCm reports nothing while capturing: ask for the status. */
    hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
    unsigned long long id = 0;
    hipError_t qe = hipStreamGetCaptureInfo(s->s, &st, &id);
    hipGraph_t g = NULL;
    hipError_t e = hipStreamEndCapture(s->s, &g);
    if (e != hipSuccess || !g)
        return hipdev_fail(dev, e != hipSuccess ? e : hipErrorStreamCaptureInvalidated,
                        "hipStreamEndCapture");
    if (qe != hipSuccess || st != hipStreamCaptureStatusActive) {
        hipGraphDestroy(g);
        return hipdev_fail(dev, qe != hipSuccess ? qe : hipErrorStreamCaptureInvalidated,
                        "capture status");
    }
    hipError_t le = hipGetLastError();
    if (le != hipSuccess) {
        hipGraphDestroy(g);
        return hipdev_fail(dev, le, "launch during capture");
    }
    size_t nodes = 0;
    e = hipGraphGetNodes(g, NULL, &nodes);
    if (e != hipSuccess || (int)nodes < s->launches) {
        hipGraphDestroy(g);
        snprintf(hipdev_errbuf, sizeof(hipdev_errbuf),
                 "the captured graph has %zu node(s) for %d launch(es)", nodes, s->launches);
        return -EIO;
    }
    gg_dev_graph *gr = malloc(sizeof(*gr));
    if (!gr) {
        hipGraphDestroy(g);
        return -ENOMEM;
    }
    gr->g = g;
    *out = gr;
    return 0;
}

static void hip_graph_destroy(gg_device *dev, gg_dev_graph *g)
{
    (void)dev;
    if (!g)
        return;
    hipGraphDestroy(g->g);
    free(g);
}

static int hip_instantiate(gg_device *dev, gg_dev_graph *g, gg_dev_exec **out)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    gg_dev_exec *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    char log[256] = "";
    hipError_t e = hipGraphInstantiate(&x->x, g->g, NULL, log, sizeof(log));
    if (e != hipSuccess) {
        free(x);
        rc = hipdev_fail(dev, e, "hipGraphInstantiate");
        if (log[0])
            snprintf(hipdev_errbuf + strlen(hipdev_errbuf), sizeof(hipdev_errbuf) - strlen(hipdev_errbuf),
                     ": %.120s", log);
        return rc;
    }
    hipGraphGetNodes(g->g, NULL, &x->nodes);
    *out = x;
    return 0;
}

static int hip_exec_update(gg_device *dev, gg_dev_exec *x, gg_dev_graph *g)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    hipGraphNode_t bad = NULL;
    hipGraphExecUpdateResult res = hipGraphExecUpdateError;
    hipError_t e = hipGraphExecUpdate(x->x, g->g, &bad, &res);
    if (e != hipSuccess || res != hipGraphExecUpdateSuccess) {
        hipGetLastError();   /* an update failure is not sticky */
        snprintf(hipdev_errbuf, sizeof(hipdev_errbuf), "graph update refused (result %d): %s",
                 (int)res, hipGetErrorString(e));
        return -EINVAL;
    }
    return 0;
}

static int hip_graph_launch(gg_device *dev, gg_dev_exec *x, gg_dev_stream *s)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    HIP_CALL(dev, hipGraphLaunch(x->x, s->s), "hipGraphLaunch");
    return 0;
}

static int hip_host_register(gg_device *dev, void *ptr, size_t len, void **devptr, char *err,
                             size_t errlen)
{
    int rc = hipdev_bind(dev);
    if (rc < 0) {
        snprintf(err, errlen, "%s", hipdev_errbuf);
        return rc;
    }
    hipError_t e = hipHostRegister(ptr, len, hipHostRegisterMapped | hipHostRegisterPortable);
    if (e == hipSuccess) {
        e = hipHostGetDevicePointer(devptr, ptr, 0);
        if (e != hipSuccess)
            hipHostUnregister(ptr);
    }
    if (e != hipSuccess) {
        rc = hipdev_fail(dev, e, "hipHostRegister");
        snprintf(err, errlen, "%s", hipdev_errbuf);
        return rc;
    }
    return 0;
}

static void hip_host_unregister(gg_device *dev, void *ptr)
{
    hipdev_bind(dev);
    hipHostUnregister(ptr);
}

static int hip_stream_write_u64(gg_device *dev, gg_dev_stream *s, void *devptr, uint64_t *hostptr,
                                uint64_t value)
{
    (void)hostptr;
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    if (gg_gpu_signal_u64(s->s, devptr, value, NULL) < 0) {
        snprintf(hipdev_errbuf, sizeof(hipdev_errbuf), "%s", gg_gpu_last_error());
        return -EIO;
    }
    return 0;
}

static int hip_stream_write_u32(gg_device *dev, gg_dev_stream *s, void *devptr, uint32_t value)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    if (gg_gpu_write_u32(s->s, devptr, value, NULL) < 0) {
        snprintf(hipdev_errbuf, sizeof(hipdev_errbuf), "%s", gg_gpu_last_error());
        return -EIO;
    }
    return 0;
}

static int hip_stream_query(gg_device *dev, gg_dev_stream *s)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    hipError_t e = hipStreamQuery(s->s);
    if (e == hipSuccess)
        return 0;
    if (e == hipErrorNotReady)
        return -EBUSY;
    return hipdev_fail(dev, e, "hipStreamQuery");
}

static void hip_exec_destroy(gg_device *dev, gg_dev_exec *x)
{
    if (!x)
        return;
    hipdev_bind(dev);
    hipGraphExecDestroy(x->x);
    free(x);
}

static int hip_mem_info(gg_device *dev, uint64_t *free_b, uint64_t *total_b)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    size_t f = 0, t = 0;
    HIP_CALL(dev, hipMemGetInfo(&f, &t), "hipMemGetInfo");
    *free_b = f;
    *total_b = t;
    return 0;
}

/* The runtime does not say what an instantiated graph holds on the device;
 * a kernel node's parameters and launch descriptor are in the hundreds of
 * bytes, so count a kilobyte a node. */
static size_t hip_exec_footprint(gg_device *dev, gg_dev_exec *x)
{
    (void)dev;
    return x->nodes * 1024;
}

static int hip_op_launch(gg_device *dev, gg_dev_stream *s, const gg_op_def *op, const gg_tensor *in,
                         int nin, const gg_tensor *out, int nout, const gg_op_attrs *attrs)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    rc = gg_gpu_op_launch(s->ctx, op, in, nin, out, nout, attrs);
    if (rc < 0) {
        snprintf(hipdev_errbuf, sizeof(hipdev_errbuf), "%s", gg_gpu_last_error());
        hipError_t e = hipPeekAtLastError();
        if (e != hipSuccess && hip_sticky(e)) {
            hip_mark_lost(dev);
            return -ENODEV;
        }
        return rc;
    }
    if (s->capturing)
        s->launches++;
    return 0;
}

static int hip_rowchain_launch(gg_device *dev, gg_dev_stream *s, const gg_rowchain *c)
{
    int rc = hipdev_bind(dev);
    if (rc < 0)
        return rc;
    rc = gg_gpu_rowchain_launch(s->ctx, c);
    if (rc < 0) {
        snprintf(hipdev_errbuf, sizeof(hipdev_errbuf), "%s", gg_gpu_last_error());
        hipError_t e = hipPeekAtLastError();
        if (e != hipSuccess && hip_sticky(e)) {
            hip_mark_lost(dev);
            return -ENODEV;
        }
        return rc;
    }
    if (s->capturing)
        s->launches++;
    return 0;
}

static bool hip_op_needs_warmup(gg_device *dev, const gg_op_def *op)
{
    (void)dev;
    return gg_gpu_op_needs_warmup(op) != 0;
}

static void hip_destroy(gg_device *dev)
{
    hip_priv *p = hip_p(dev);
    hipdev_completion_stop(dev);
    hipdev_bind(dev);
    while (p->imports) {
        hip_import *imp = p->imports;
        p->imports = imp->next;
        hipIpcCloseMemHandle(imp->base);
        free(imp);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->poll_cond);
    free(p);
    free(dev);
}

static const gg_device_ops hip_ops = {
    .name = "hip",
    .destroy = hip_destroy,
    .info = hip_info,
    .buffer_import = hip_buffer_import,
    .buffer_release = hip_buffer_release,
    .scratch_alloc = hip_scratch_alloc,
    .scratch_free = hip_scratch_free,
    .memset = hip_memset,
    .memcpy_d2h = hip_memcpy_d2h,
    .memcpy_h2d = hip_memcpy_h2d,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .stream_sync = hip_stream_sync,
    .event_create = hip_event_create,
    .event_import = hip_event_import,
    .event_record = hip_event_record,
    .stream_wait_event = hip_stream_wait_event,
    .event_destroy = hip_event_destroy,
    .capture_begin = hip_capture_begin,
    .capture_end = hip_capture_end,
    .instantiate = hip_instantiate,
    .exec_update = hip_exec_update,
    .graph_launch = hip_graph_launch,
    .graph_destroy = hip_graph_destroy,
    .exec_destroy = hip_exec_destroy,
    .exec_footprint = hip_exec_footprint,
    .mem_info = hip_mem_info,
    .op_needs_warmup = hip_op_needs_warmup,
    .op_launch = hip_op_launch,
    .rowchain_launch = hip_rowchain_launch,
    .host_register = hip_host_register,
    .host_unregister = hip_host_unregister,
    .stream_write_u64 = hip_stream_write_u64,
    .stream_write_u32 = hip_stream_write_u32,
    .stream_query = hip_stream_query,
    .notify = hipdev_notify,
    .last_error = hip_last_error,
    .lost = hip_lost,
};

bool gg_device_hip_built(void)
{
    return true;
}

/* The CUDA runtime joins MPS at initialisation when a control daemon's pipe
 * is in CUDA_MPS_PIPE_DIRECTORY (by default /tmp/nvidia-mps, which a unit
 * with PrivateTmp= does not see).  Without it NVIDIA time-slices the GPU
 * between processes, and every client kernel queued right before a replay
 * costs a context switch, so operators are told. */
static void hipdev_sharing(char *buf, size_t len)
{
    buf[0] = '\0';
#if defined(GFXGRAPH_HIP_CUDA)
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char path[4096];
    snprintf(path, sizeof(path), "%s/control", dir && *dir ? dir : "/tmp/nvidia-mps");
    snprintf(buf, len, "%s", access(path, F_OK) == 0 ? "mps" : "time-sliced");
#else
    (void)len;
#endif
}

int gg_device_hip_open(const gg_config *cfg, gg_device **out, char *err, size_t errlen)
{
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n == 0) {
        snprintf(err, errlen, "no GPU found (%s)",
                 e != hipSuccess ? hipGetErrorString(e) : "hipGetDeviceCount reports 0 devices");
        return -ENODEV;
    }
    if (cfg->device_index >= n) {
        snprintf(err, errlen, "GPU index %d does not exist: %d device(s) found", cfg->device_index, n);
        return -ENODEV;
    }
    gg_device *dev = calloc(1, sizeof(*dev));
    hip_priv *p = calloc(1, sizeof(*p));
    if (!dev || !p) {
        free(dev);
        free(p);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    dev->ops = &hip_ops;
    dev->priv = p;
    p->device = cfg->device_index;
    p->notify = cfg->completion_hostfn ? HIP_NOTIFY_HOSTFN : HIP_NOTIFY_POLL;
    hipdev_sharing(p->sharing, sizeof(p->sharing));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->poll_cond, NULL);
    int rc = hipdev_bind(dev);
    if (rc == 0) {
        /* Touch the context now so a broken driver fails start-up, not the
         * first request. */
        e = hipFree(NULL);
        if (e != hipSuccess)
            rc = hipdev_fail(dev, e, "initialising the device");
    }
    if (rc == 0)
        rc = hipdev_completion_start(dev);
    if (rc < 0) {
        snprintf(err, errlen, "cannot use GPU %d: %s", p->device, hipdev_errbuf);
        hip_destroy(dev);
        return rc;
    }
    gg_info("hip backend: GPU %d of %d, completion by %s%s%s", p->device, n,
            p->notify == HIP_NOTIFY_POLL ? "event polling" : "host functions",
            p->sharing[0] ? ", GPU shared with clients: " : "", p->sharing);
    if (strcmp(p->sharing, "time-sliced") == 0)
        gg_warn("no NVIDIA MPS control daemon found: the GPU time-slices between this "
                  "daemon and its clients, and a client kernel right before a replay costs "
                  "a context switch; docs/operations.md says how to run under MPS");
    *out = dev;
    return 0;
}
