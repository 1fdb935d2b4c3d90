/* SPDX-License-Identifier: MIT */
/* The hip backend's private parts, shared by device_hip.c (memory,
 * streams, events, graphs, launches) and device_hip_done.c (completion). */
#ifndef GG_DEVICE_HIP_H
#define GG_DEVICE_HIP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"
#include "gg_hip.h"
#include "gpu_ops.h"

#define HIP_HANDLE_SIZE ((size_t)sizeof(hipIpcMemHandle_t))

typedef struct hip_import {
    struct hip_import *next;
    hipIpcMemHandle_t handle;
    uint8_t *base;
    size_t size;
    int refs;
} hip_import;

typedef struct hip_wait {
    struct hip_wait *next;
    hipEvent_t ev;
    gg_done_fn fn;
    void *arg;
} hip_wait;

typedef enum { HIP_NOTIFY_POLL = 0, HIP_NOTIFY_HOSTFN } hip_notify_mode;

typedef struct {
    int device;
    hip_notify_mode notify;
    pthread_mutex_t lock;          /* imports, waits */
    hip_import *imports;
    /* event-polling completion thread */
    pthread_t poller;
    pthread_cond_t poll_cond;
    hip_wait *waits, *free_waits;
    bool poller_started, quit;
    int lost;                      /* a sticky error was seen (under lock) */
    char lost_why[256];            /* the first one, set once */
    char sharing[16];              /* gg_device_info.gpu_sharing, found at open */
} hip_priv;

struct gg_dev_buffer {
    hip_import *imp;               /* by IPC handle; NULL for a client's descriptor: */
    void *map;                     /* its mapping, registered as mapped pinned memory */
    size_t map_len;
};

struct gg_dev_stream {
    hipStream_t s;
    gg_gpu_ctx *ctx;
    int launches;                  /* made during the current capture */
    bool capturing;
};

struct gg_dev_graph {
    hipGraph_t g;
};

struct gg_dev_exec {
    hipGraphExec_t x;
    size_t nodes;
};

struct gg_dev_event {
    hipEvent_t e;
};

static inline hip_priv *hip_p(gg_device *dev)
{
    return dev->priv;
}

/* The message of this thread's last failure (last_error). */
extern __thread char hipdev_errbuf[256];
/* Record a failed call in hipdev_errbuf: -ENODEV for an error that leaves
 * the device unusable (and marks it lost), -ENOMEM, -EINVAL or -EIO. */
int hipdev_fail(gg_device *dev, hipError_t e, const char *what);
/* The current device is per thread: bind this thread to ours (once). */
int hipdev_bind(gg_device *dev);

/* device_hip_done.c */
int hipdev_notify(gg_device *dev, gg_dev_stream *s, gg_done_fn fn, void *arg);
int hipdev_completion_start(gg_device *dev);
/* Stop the polling thread (if any) and free its events. */
void hipdev_completion_stop(gg_device *dev);

#endif
