/* SPDX-License-Identifier: MIT */
/* Backend selection and the health smoke test, common to both backends. */
#include "device/device.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

#include "base/log.h"

static const char *device_file_kind(mode_t m)
{
    return S_ISSOCK(m) ? "a socket" : S_ISFIFO(m) ? "a pipe" : S_ISDIR(m) ? "a directory"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "not a file";
}

int gg_device_map_fd(const gg_import_desc *d, bool need_seal, void **map, size_t *map_len,
                     void **ptr, char *err, size_t errlen)
{
    struct stat st;
    struct statfs sf;
    if (fstat(d->fd, &st) < 0) {
        snprintf(err, errlen, "cannot stat the file descriptor: %s", strerror(errno));
        return -EBADF;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "the file descriptor is %s; pass a memfd (memfd_create) or a "
                 "POSIX shm object (shm_open)", device_file_kind(st.st_mode));
        return -EINVAL;
    }
    /* Memory only: a file on a disk (or a network or FUSE file system)
     * would make a kernel's page fault wait on I/O, or on another process. */
    if (fstatfs(d->fd, &sf) < 0 ||
        ((unsigned long)sf.f_type != TMPFS_MAGIC && (unsigned long)sf.f_type != HUGETLBFS_MAGIC)) {
        snprintf(err, errlen, "the file descriptor is a file on a disk file system, not shared "
                 "memory; pass a memfd (memfd_create) or a POSIX shm object (shm_open)");
        return -EINVAL;
    }
    int fl = fcntl(d->fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) != O_RDWR) {
        snprintf(err, errlen, "the file descriptor is open %s; the daemon writes outputs "
                 "into the buffer, so open it read-write (O_RDWR)",
                 (fl & O_ACCMODE) == O_RDONLY ? "read-only" : "write-only");
        return -EACCES;
    }
    if ((uint64_t)st.st_size < d->offset || (uint64_t)st.st_size - d->offset < d->size) {
        snprintf(err, errlen, "offset %llu + size %llu is past the end of the file descriptor's "
                 "object (%lld bytes)", (unsigned long long)d->offset,
                 (unsigned long long)d->size, (long long)st.st_size);
        return -ERANGE;
    }
    int seals = fcntl(d->fd, F_GET_SEALS);
    if (need_seal && (seals < 0 || !(seals & F_SEAL_SHRINK))) {
        snprintf(err, errlen, "the object is not sealed against shrinking: on this backend the "
                 "device uses its pages directly, so make it a memfd with MFD_ALLOW_SEALING and "
                 "add F_SEAL_SHRINK (gg_client_memfd_create does)");
        return -EINVAL;
    }
    /* Only the registered range, widened to pages, as for a shm name. */
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t map_off = d->offset & ~(pg - 1);
    size_t len = (size_t)(d->offset + d->size - map_off);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd, (off_t)map_off);
    if (m == MAP_FAILED) {
        int e = errno;
        if (e == EPERM && seals > 0 && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
            snprintf(err, errlen, "the object is sealed against writing (F_SEAL_WRITE or "
                     "F_SEAL_FUTURE_WRITE); the daemon writes outputs into the buffer");
        else
            snprintf(err, errlen, "cannot map the file descriptor: %s", strerror(e));
        return e == EPERM || e == EACCES ? -EACCES : e == ENOMEM ? -ENOMEM : -EINVAL;
    }
    *map = m;
    *map_len = len;
    *ptr = (uint8_t *)m + (d->offset - map_off);
    return 0;
}

int gg_device_open(const gg_config *cfg, gg_device **out, char *err, size_t errlen)
{
    switch (cfg->backend) {
    case GG_BACKEND_CPU:
        return gg_device_cpu_open(cfg, out, err, errlen);
    case GG_BACKEND_HIP:
        if (!gg_device_hip_built()) {
            snprintf(err, errlen, "backend hip requested, but this gfxgraphd was built without "
                     "GPU support (GFXGRAPH_GPU=off)");
            return -ENODEV;
        }
        {
            char why[256] = "";
            int rc = gg_device_hip_open(cfg, out, why, sizeof(why));
            if (rc < 0)
                snprintf(err, errlen, "backend hip: %s", why);
            return rc;
        }
    default:
        break;
    }
    if (gg_device_hip_built()) {
        char why[256] = "";
        int rc = gg_device_hip_open(cfg, out, why, sizeof(why));
        if (rc == 0)
            return 0;
        gg_info("backend auto: no usable GPU (%s); using the cpu backend", why);
    } else {
        gg_info("backend auto: built without GPU support; using the cpu backend");
    }
    return gg_device_cpu_open(cfg, out, err, errlen);
}

void gg_device_free(gg_device *dev, gg_dev_exec *graph, uint8_t *scratch, gg_dev_stream *stream)
{
    if (graph)
        dev->ops->exec_destroy(dev, graph);
    if (scratch)
        dev->ops->scratch_free(dev, scratch);
    if (stream)
        dev->ops->stream_destroy(dev, stream);
}

void gg_device_close(gg_device *dev)
{
    if (dev)
        dev->ops->destroy(dev);
}

/* y = x * 2 then z = y + x, captured once and replayed twice: z == 3x. */
int gg_device_smoke_test(gg_device *dev, char *err, size_t errlen)
{
    enum { N = 256 };
    const gg_device_ops *o = dev->ops;
    const gg_op_def *scale = gg_ops_find("scale"), *add = gg_ops_find("add");
    gg_dev_stream *s = NULL;
    gg_dev_graph *g = NULL;
    gg_dev_exec *x = NULL;
    void *mem = NULL;
    float host[N], back[N];
    int rc;
    if (!scale || !add) {
        snprintf(err, errlen, "op table lacks scale/add");
        return -EIO;
    }
    if ((rc = o->stream_create(dev, &s)) < 0) {
        snprintf(err, errlen, "stream: %s", o->last_error(dev));
        return rc;
    }
    if ((rc = o->scratch_alloc(dev, 3 * N * sizeof(float), &mem)) < 0) {
        snprintf(err, errlen, "allocation: %s", o->last_error(dev));
        goto undo_stream;
    }
    for (int i = 0; i < N; i++)
        host[i] = (float)(i - N / 2) * 0.25f;
    if ((rc = o->memcpy_h2d(dev, mem, host, sizeof(host))) < 0) {
        snprintf(err, errlen, "copy to device: %s", o->last_error(dev));
        goto undo_mem;
    }
    gg_tensor tx = {mem, {GG_DT_F32, 1, {N}}};
    gg_tensor ty = {(float *)mem + N, {GG_DT_F32, 1, {N}}};
    gg_tensor tz = {(float *)mem + 2 * N, {GG_DT_F32, 1, {N}}};
    gg_op_attrs a;
    gg_ops_attr_defaults(scale, &a);
    a.v[gg_ops_attr_index(scale, "scale")] = 2.0;
    gg_tensor in2[2] = {ty, tx};
    if ((rc = o->capture_begin(dev, s)) < 0) {
        snprintf(err, errlen, "capture: %s", o->last_error(dev));
        goto undo_mem;
    }
    int r1 = o->op_launch(dev, s, scale, &tx, 1, &ty, 1, &a);
    gg_op_attrs none;
    gg_ops_attr_defaults(add, &none);
    int r2 = r1 < 0 ? r1 : o->op_launch(dev, s, add, in2, 2, &tz, 1, &none);
    rc = o->capture_end(dev, s, &g);
    if (r2 < 0 || rc < 0) {
        snprintf(err, errlen, "capture: %s", o->last_error(dev));
        rc = r2 < 0 ? r2 : rc;
        goto undo_graph;
    }
    if ((rc = o->instantiate(dev, g, &x)) < 0) {
        snprintf(err, errlen, "instantiate: %s", o->last_error(dev));
        goto undo_graph;
    }
    for (int rep = 0; rep < 2 && rc == 0; rep++)
        rc = o->graph_launch(dev, x, s);
    if (rc == 0)
        rc = o->stream_sync(dev, s);
    if (rc == 0)
        rc = o->memcpy_d2h(dev, back, tz.data, sizeof(back));
    if (rc < 0) {
        snprintf(err, errlen, "replay: %s", o->last_error(dev));
        goto undo_exec;
    }
    for (int i = 0; i < N; i++)
        if (fabsf(back[i] - 3.0f * host[i]) > 1e-5f) {
            snprintf(err, errlen, "replayed graph computed %g at %d, expected %g", back[i], i,
                     3.0f * host[i]);
            rc = -EIO;
            break;
        }
undo_exec:
    o->exec_destroy(dev, x);
undo_graph:
    if (g)
        o->graph_destroy(dev, g);
undo_mem:
    o->scratch_free(dev, mem);
undo_stream:
    o->stream_destroy(dev, s);
    return rc;
}
