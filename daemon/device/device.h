/* SPDX-License-Identifier: MIT */
/* The device interface: everything the daemon asks of a GPU, as a table of
 * function pointers with two implementations, `cpu` (host memory shared by
 * name, reference kernels, a "graph" that is the recorded launch list) and
 * `hip` (the HIP runtime; builds for AMD with hipcc and for NVIDIA through
 * kernels/gg_hip.h).
 *
 * Threading: the loop thread calls info, buffer_import/release and
 * scratch_alloc/free; executor threads call the stream, capture, graph and
 * launch entries, one thread per stream at a time.  `notify` calls its
 * function from whatever thread sees the work complete; that function must
 * only hand the news to the loop (see exec.c).
 *
 * Errors: negative errno; a message for the client in the err buffer where
 * one is taken.  -ENODEV from any entry means the device is lost (a sticky
 * error): the daemon reports unhealthy and exits. */
#ifndef GG_DEVICE_H
#define GG_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/config.h"
#include "ops.h"

typedef struct gg_device gg_device;
typedef struct gg_dev_buffer gg_dev_buffer;   /* imported client memory */
typedef struct gg_dev_stream gg_dev_stream;
typedef struct gg_dev_event gg_dev_event;
typedef struct gg_dev_graph gg_dev_graph;     /* captured */
typedef struct gg_dev_exec gg_dev_exec;       /* instantiated */

typedef struct {
    char name[128];          /* "NVIDIA H100 80GB HBM3", "cpu (x86_64, 2 threads)" */
    char arch[32];           /* "gfx1030", "sm_90", "x86_64" */
    char runtime[64];        /* "HIP 5.2.3", "CUDA 13.0", "cpu reference" */
    char driver[64];
    uint64_t mem_total;      /* bytes */
    uint64_t mem_free;
    int wave_size;
    int compute_units;
    /* How this process's GPU work shares the GPU with its clients' own
     * kernels, where the backend knows: "mps" or "time-sliced" on NVIDIA
     * (time-sliced: a client kernel right before a replay costs a context
     * switch); "" where it does not apply. */
    char gpu_sharing[16];
} gg_device_info;

typedef struct {
    const void *handle;      /* hip: the IPC memory handle bytes; cpu: a POSIX shm name */
    size_t handle_len;
    /* by_fd: instead of handle, a file descriptor the client passed (a memfd
     * or a POSIX shm object): offset counts from its start.  The backend
     * maps it (gg_device_map_fd) and leaves fd open for the caller. */
    bool by_fd;
    int fd;
    uint64_t offset;         /* from the start of the handle's allocation */
    uint64_t size;           /* bytes the client shares from offset */
    uid_t peer_uid;          /* the connecting process (SO_PEERCRED) */
    pid_t peer_pid;
} gg_import_desc;

typedef void (*gg_done_fn)(void *arg, int status);

typedef struct gg_device_ops {
    const char *name;        /* "cpu" | "hip" */
    void (*destroy)(gg_device *dev);
    int (*info)(gg_device *dev, gg_device_info *out);

    /* Import client memory; *ptr is the device address of desc->offset. */
    int (*buffer_import)(gg_device *dev, const gg_import_desc *desc, gg_dev_buffer **out,
                         void **ptr, char *err, size_t errlen);
    void (*buffer_release)(gg_device *dev, gg_dev_buffer *buf);
    /* The object buf's memory belongs to (obj: two words naming it) and
     * the offset of its first byte in it, for a backend that maps client
     * objects itself (cpu: the shm object or memfd): two registrations of
     * one object then compare by object and offset, not by the addresses
     * of their two mappings.  NULL, or -ENOTSUP: compare device addresses
     * (hip: one allocation opened twice is one address). */
    int (*buffer_object)(gg_device *dev, gg_dev_buffer *buf, uint64_t obj[2], uint64_t *off);

    int (*scratch_alloc)(gg_device *dev, size_t bytes, void **ptr);
    void (*scratch_free)(gg_device *dev, void *ptr);
    /* Fill n elements of dtype-sized memory with a byte pattern (poisoning
     * scratch in validate mode, tests). */
    int (*memset)(gg_device *dev, gg_dev_stream *s, void *ptr, int byte, size_t bytes);
    int (*memcpy_d2h)(gg_device *dev, void *dst, const void *src, size_t bytes);
    int (*memcpy_h2d)(gg_device *dev, void *dst, const void *src, size_t bytes);

    int (*stream_create)(gg_device *dev, gg_dev_stream **out);
    void (*stream_destroy)(gg_device *dev, gg_dev_stream *s);
    int (*stream_sync)(gg_device *dev, gg_dev_stream *s);

    /* Events: local, or imported from a client's IPC event handle. */
    int (*event_create)(gg_device *dev, gg_dev_event **out);
    int (*event_import)(gg_device *dev, const void *handle, size_t len, gg_dev_event **out,
                        char *err, size_t errlen);
    int (*event_record)(gg_device *dev, gg_dev_event *ev, gg_dev_stream *s);
    int (*stream_wait_event)(gg_device *dev, gg_dev_stream *s, gg_dev_event *ev);
    void (*event_destroy)(gg_device *dev, gg_dev_event *ev);

    /* Capture: every op_launch on s between begin and end is recorded, not
     * run.  end returns -EIO (and no graph) if the capture was invalidated. */
    int (*capture_begin)(gg_device *dev, gg_dev_stream *s);
    int (*capture_end)(gg_device *dev, gg_dev_stream *s, gg_dev_graph **out);
    int (*instantiate)(gg_device *dev, gg_dev_graph *g, gg_dev_exec **out);
    /* Rebind exec to g's parameters without re-instantiating; -EINVAL when the
     * topology differs (the caller then instantiates afresh). */
    int (*exec_update)(gg_device *dev, gg_dev_exec *x, gg_dev_graph *g);
    int (*graph_launch)(gg_device *dev, gg_dev_exec *x, gg_dev_stream *s);
    void (*graph_destroy)(gg_device *dev, gg_dev_graph *g);
    void (*exec_destroy)(gg_device *dev, gg_dev_exec *x);
    /* Bytes of device memory the instantiated graph holds (for the VRAM cap). */
    size_t (*exec_footprint)(gg_device *dev, gg_dev_exec *x);
    /* The device's memory now, free and total bytes, as the runtime counts
     * it (every process's allocations): cheap enough to ask before each
     * capture, which holds vram-cap against it.  Executor threads. */
    int (*mem_info)(gg_device *dev, uint64_t *free_b, uint64_t *total_b);

    /* true when the op's first launch on a stream may do one-time setup that
     * must not land in a capture (vendor BLAS picking and loading kernels):
     * the executor then runs it once on the stream before capturing. */
    bool (*op_needs_warmup)(gg_device *dev, const gg_op_def *op);

    /* Enqueue one op (or record it while capturing). */
    int (*op_launch)(gg_device *dev, gg_dev_stream *s, const gg_op_def *op, const gg_tensor *in,
                     int nin, const gg_tensor *out, int nout, const gg_op_attrs *attrs);
    /* Enqueue a row chain (ops.h, gg_rowchain: the planner's fused.row_chain,
     * whose operands do not fit op_launch's), or record it while capturing.
     * cpu: its stages as fused.norm_act launches; hip: one kernel. */
    int (*rowchain_launch)(gg_device *dev, gg_dev_stream *s, const gg_rowchain *c);

    /* Host memory the device writes into (the fast path's shared region):
     * register it, *devptr being the address the device uses for ptr;
     * unregister before unmapping.  cpu: the same address, nothing to do. */
    int (*host_register)(gg_device *dev, void *ptr, size_t len, void **devptr, char *err,
                         size_t errlen);
    void (*host_unregister)(gg_device *dev, void *ptr);
    /* Enqueue on s: once the work before it is done, store value into the
     * 8-byte word the device sees at devptr (host_register's), the host at
     * hostptr.  hip: a stream memory operation (or a one-thread kernel);
     * cpu: the work has already run, so a release store now. */
    int (*stream_write_u64)(gg_device *dev, gg_dev_stream *s, void *devptr, uint64_t *hostptr,
                            uint64_t value);
    /* Enqueue on s a store of value into the 4-byte device word at devptr
     * (scratch memory), ordered after the work before it and before the work
     * after it: the real batch a graph's kernels read (program.h,
     * gg_program_batch_word).  hip: hipStreamWriteValue32 (or a one-thread
     * kernel); cpu: the stream runs on the caller's thread, a plain store. */
    int (*stream_write_u32)(gg_device *dev, gg_dev_stream *s, void *devptr, uint32_t value);

    /* 0 when all work enqueued on s has completed, -EBUSY while some runs,
     * or the error it ended with.  Only while no other thread uses s. */
    int (*stream_query)(gg_device *dev, gg_dev_stream *s);
    /* Call fn(arg, status) once all work enqueued on s so far has completed. */
    int (*notify)(gg_device *dev, gg_dev_stream *s, gg_done_fn fn, void *arg);

    /* Message for the last failure on this thread. */
    const char *(*last_error)(gg_device *dev);

    /* NULL while the device is usable; once any thread has seen an error
     * that leaves it unusable, why (the same from every thread).  May be
     * NULL for a backend that cannot lose its device. */
    const char *(*lost)(gg_device *dev);
} gg_device_ops;

struct gg_device {
    const gg_device_ops *ops;
    void *priv;
};

static inline const char *gg_device_lost_reason(gg_device *dev)
{
    return dev->ops->lost ? dev->ops->lost(dev) : NULL;
}

/* Open the device for the configured backend.  auto: hip when built with GPU
 * support and a device is present, else cpu (logged).  On failure err says
 * why in one line. */
int gg_device_open(const gg_config *cfg, gg_device **out, char *err, size_t errlen);
void gg_device_close(gg_device *dev);
/* Free a graph, scratch memory and a stream (any may be NULL), now, on
 * this thread: it may wait for the whole device (the executor's workers
 * call it, never the loop while the executor runs). */
void gg_device_free(gg_device *dev, gg_dev_exec *graph, uint8_t *scratch, gg_dev_stream *stream);

int gg_device_cpu_open(const gg_config *cfg, gg_device **out, char *err, size_t errlen);
int gg_device_hip_open(const gg_config *cfg, gg_device **out, char *err, size_t errlen);
/* true when this build has the hip backend. */
bool gg_device_hip_built(void);

/* Map [offset, offset + size) of a client's file descriptor (desc->fd)
 * read-write and shared, widened to pages: *map and *map_len are the
 * mapping, *ptr the address of offset.  Possession of the descriptor is the
 * permission (no owner check); it must be a regular file in memory (tmpfs,
 * hugetlbfs: a memfd or a POSIX shm object), open read-write, and hold the
 * range; need_seal: sealed against shrinking too (F_SEAL_SHRINK), for a
 * backend whose device keeps using the pages.  Negative errno with a
 * message naming what is wrong. */
int gg_device_map_fd(const gg_import_desc *desc, bool need_seal, void **map, size_t *map_len,
                     void **ptr, char *err, size_t errlen);

/* Capture-and-replay a two-node graph on a scratch buffer and check the
 * numbers: the health smoke test.  0, or negative errno with why in err. */
int gg_device_smoke_test(gg_device *dev, char *err, size_t errlen);

#endif
