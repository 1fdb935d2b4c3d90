/* SPDX-License-Identifier: MIT */
/* Fast-path regions: create, share, end.
 *
 * Happy path: fastpath.open makes a memfd of the ring's size, seals its
 * size, maps it, writes the header, registers the mapping with the device
 * (mapped pinned memory on hip, so the GPU can write completion words into
 * it), and starts the region's thread; the memfd goes to the client with
 * SCM_RIGHTS (rpc/).  When the session's connection closes, the thread stops
 * taking descriptors, waits for its work in flight, marks the region closed,
 * wakes any client sleeper and unmaps: nothing stays behind.
 *
 * Failure modes: every step of the open is undone on failure and reported
 * with its errno; past fastpath-max-regions an open gets EBUSY.  The client
 * can neither shrink nor grow the memfd (sealed), so the daemon's mapping
 * never faults; whatever it writes into the region is only ever read by the
 * region's own thread, which checks it (ring.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "core/quota.h"
#include "fp_internal.h"

static void fp_on_async(uv_async_t *h)
{
    gg_fp_module *m = h->data;
    gg_core_lock(m->core);
    gg_core_check_device(m->core);
    gg_core_maybe_stopped(m->core);
    gg_core_unlock(m->core);
}

/* The fast path's part in the core's events (core.h, gg_transport_ops). */
static void fp_settle(void *ctx, gg_session *s)
{
    gg_fp_collect(ctx, s);
}

static void fp_session_closing(void *ctx, gg_session *s)
{
    gg_fp_session_closed(ctx, s);
}

int gg_fp_module_new(gg_core *core, uv_loop_t *loop, const gg_fp_settings *set,
                     gg_fp_module **out)
{
    gg_fp_module *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->core = core;
    m->set = *set;
    /* With one CPU to run on, a spinning ring thread only delays the client
     * it waits for: sleep at once instead. */
    cpu_set_t cpus;
    int ncpu = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 2;
    m->max_spinners = ncpu / 2 > 0 ? (unsigned)(ncpu / 2) : 1;
    m->one_cpu = ncpu < 2;
    if (m->set.spin_us && ncpu < 2) {
        gg_info("fast path: one CPU to run on, so ring threads sleep without spinning "
                "(fastpath-spin-us %u ignored)", m->set.spin_us);
        m->set.spin_us = 0;
    }
    m->gpu_completion = set->completion == GG_FP_COMPLETE_AUTO
                            ? strcmp(core->dev->ops->name, "cpu") != 0
                            : set->completion == GG_FP_COMPLETE_DEVICE;
    m->completion = m->gpu_completion ? "gpu" : "cpu";
    gg_transport_ops t = {.ctx = m, .settle = fp_settle, .session_closing = fp_session_closing};
    int rc = gg_core_add_transport(core, &t);
    if (rc < 0) {
        free(m);
        return rc;
    }
    if ((rc = uv_async_init(loop, &m->async, fp_on_async)) < 0) {
        gg_core_del_transport(core, m);
        free(m);
        return rc;
    }
    m->async.data = m;
    m->async_open = true;
    *out = m;
    return 0;
}

void gg_fp_module_close(gg_fp_module *m)
{
    if (m && m->async_open) {
        m->async_open = false;
        uv_close((uv_handle_t *)&m->async, NULL);
    }
}

void gg_fp_module_free(gg_fp_module *m)
{
    if (m)
        gg_core_del_transport(m->core, m);
    free(m);
}

void gg_fp_set_spin_us(gg_fp_module *m, unsigned spin_us)
{
    gg_store_relaxed(&m->set.spin_us, m->one_cpu ? 0 : spin_us);
}

unsigned gg_fp_live(const gg_fp_module *m)
{
    return m ? gg_load_seq_cst(&((gg_fp_module *)m)->live) : 0;
}

bool gg_fp_available(const gg_fp_module *m)
{
    return m && m->set.enabled;
}

const char *gg_fp_completion(const gg_fp_module *m)
{
    return m ? m->completion : "cpu";
}

static void fp_region_unmap(gg_fp_region *r)
{
    gg_device *dev = r->core->dev;
    if (r->registered)
        dev->ops->host_unregister(dev, r->base);
    if (r->base)
        munmap(r->base, r->size);
    free(r->slots);
    free(r);
}

int gg_fp_open(gg_fp_module *m, gg_session *s, uint32_t entries, int *fdp, gg_fp_geom *geom,
               proto_errbuf *err)
{
    gg_core *core = m->core;
    if (!m->set.enabled)
        return proto_fail(err, -ENOTSUP, "the fast path is off on this daemon (fastpath = off)");
    if (gg_fp_attached(m, s))
        return proto_fail(err, -EEXIST, "this session already has a fast-path region");
    if (entries < GG_FP_MIN_ENTRIES || entries > GG_FP_MAX_ENTRIES || (entries & (entries - 1)))
        return proto_fail(err, -EINVAL, "entries must be a power of two from %u to %u",
                          GG_FP_MIN_ENTRIES, GG_FP_MAX_ENTRIES);
    if (gg_load_seq_cst(&m->live) >= m->set.max_regions)
        return proto_fail(err, -EBUSY, "%u fast-path regions are open, the limit "
                          "(fastpath-max-regions); use the socket path", m->set.max_regions);
    /* per-uid quota (core/quota.h): regions of this uid open now */
    uint64_t mine = 0;
    for (const gg_fp_region *o = m->regions; o; o = o->next)
        mine += o->sess->uid == s->uid;
    int qrc = gg_quota_regions(core, s->uid, mine, err);
    if (qrc < 0)
        return qrc;
    gg_fp_region *r = calloc(1, sizeof(*r));
    gg_fp_slot *slots = calloc(entries, sizeof(*slots));
    if (!r || !slots) {
        free(r);
        free(slots);
        return proto_fail(err, -ENOMEM, "out of memory");
    }
    r->m = m;
    r->core = core;
    r->sess = s;
    r->slots = slots;
    r->entries = entries;
    r->mask = entries - 1;
    r->size = (size_t)gg_fp_region_size(entries);
    for (uint32_t i = 0; i < entries; i++) {
        slots[i].r = r;
        slots[i].index = i;
    }
    int rc;
    int fd = memfd_create("gfxgraph-fastpath", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        rc = -errno;
        fp_region_unmap(r);
        return proto_fail(err, rc, "memfd_create: %s", strerror(-rc));
    }
    if (ftruncate(fd, (off_t)r->size) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        rc = -errno;
        close(fd);
        fp_region_unmap(r);
        return proto_fail(err, rc, "sizing the region: %s", strerror(-rc));
    }
    void *base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        rc = -errno;
        close(fd);
        fp_region_unmap(r);
        return proto_fail(err, rc, "mapping the region: %s", strerror(-rc));
    }
    r->base = base;
    r->hdr = base;
    r->sq = (gg_fp_sqe *)(r->base + GG_FP_RING_OFFSET);
    r->cq = (gg_fp_cqe *)(r->base + GG_FP_RING_OFFSET + (size_t)entries * GG_FP_SQE_SIZE);
    gg_fp_header *h = r->hdr;
    memcpy(h->magic, GG_FP_MAGIC, sizeof(h->magic));
    h->version = GG_FP_VERSION;
    h->entries = entries;
    h->sqe_size = GG_FP_SQE_SIZE;
    h->cqe_size = GG_FP_CQE_SIZE;
    h->region_size = r->size;
    h->sq_offset = GG_FP_RING_OFFSET;
    h->cq_offset = (uint32_t)((uint8_t *)r->cq - r->base);
    h->session = s->id;
    h->state = GG_FP_STATE_OPEN;

    void *dptr = NULL;
    char why[200] = "";
    rc = core->dev->ops->host_register(core->dev, r->base, r->size, &dptr, why, sizeof(why));
    if (rc < 0) {
        close(fd);
        fp_region_unmap(r);
        return proto_fail(err, rc, "registering the region with the device: %s", why);
    }
    r->registered = true;
    r->dev_base = dptr;

    gg_session_ref(s);
    gg_fetch_add_seq_cst(&m->live, 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = -pthread_create(&r->thread, &attr, gg_fp_thread_main, r);
    pthread_attr_destroy(&attr);
    if (rc < 0) {
        gg_fetch_sub_seq_cst(&m->live, 1);
        gg_session_unref(s);
        close(fd);
        fp_region_unmap(r);
        return proto_fail(err, rc, "cannot start the region's thread: %s", strerror(-rc));
    }
    r->next = m->regions;
    m->regions = r;
    *fdp = fd;
    *geom = (gg_fp_geom){
        .entries = entries, .region_size = r->size, .sq_offset = h->sq_offset,
        .cq_offset = h->cq_offset, .sqe_size = GG_FP_SQE_SIZE, .cqe_size = GG_FP_CQE_SIZE,
        .completion = m->completion,
    };
    gg_log_fields f = {.session = s->id};
    GG_LOG(GG_LOG_DEBUG, &f, "fast path open: %u entries, %zu bytes, %s completion", entries,
           r->size, m->completion);
    return 0;
}

static void fp_region_stop(gg_fp_region *r)
{
    gg_store_seq_cst(&r->quit, 1);
    gg_fetch_add_seq_cst(&r->hdr->sq_wake, 1);
    gg_fp_futex_wake(&r->hdr->sq_wake, 1);
}

/* s's region (one at most), or NULL.  Core lock held. */
static gg_fp_region *fp_region_of(const gg_fp_module *m, const gg_session *s)
{
    for (gg_fp_region *r = m ? m->regions : NULL; r; r = r->next)
        if (r->sess == s)
            return r;
    return NULL;
}

bool gg_fp_attached(const gg_fp_module *m, const gg_session *s)
{
    return fp_region_of(m, s) != NULL;
}

void gg_fp_session_closed(gg_fp_module *m, gg_session *s)
{
    gg_fp_region *r = fp_region_of(m, s);
    if (r)
        fp_region_stop(r);
}

unsigned gg_fp_describe(const gg_fp_module *m, char *buf, size_t len, unsigned n)
{
    size_t off = strlen(buf);
    for (const gg_fp_region *r = m ? m->regions : NULL; r; r = r->next)
        for (uint32_t i = 0; i < r->entries; i++) {
            const gg_fp_slot *sl = &r->slots[i];
            if (!sl->prog)   /* only hits pin here; other work is the executor's */
                continue;
            const gg_session *s = r->sess;
            char one[320];
            snprintf(one, sizeof(one), "replay of program %llu '%s' (batch %u, running) for "
                     "session %llu (pid %d, client '%s')", (unsigned long long)sl->prog->id,
                     sl->prog->name, sl->batch, (unsigned long long)s->id, (int)s->pid,
                     s->client);
            if (off + 1 < len) {
                int w = snprintf(buf + off, len - off, "%s%s", n ? "; " : "", one);
                off += w < 0 ? 0 : (size_t)w < len - off ? (size_t)w : len - off - 1;
            }
            n++;
        }
    return n;
}

/* The region's thread, last: wait for work in flight, close, unmap. */
void gg_fp_region_end(gg_fp_region *r)
{
    gg_fp_module *m = r->m;
    /* The device writes completion words into the mapping until its work
     * is done: the mapping stays until every slot is free. */
    for (;;) {
        bool busy = false;
        for (uint32_t i = 0; i < r->entries && !busy; i++)
            busy = gg_load_acquire(&r->slots[i].busy) != 0;
        if (!busy)
            break;
        gg_fp_reap(r);   /* device-written completions are freed here */
        struct timespec t = {.tv_nsec = 50000};
        nanosleep(&t, NULL);
    }
    gg_store_seq_cst(&r->hdr->state, GG_FP_STATE_CLOSED);
    gg_fetch_add_seq_cst(&r->hdr->cq_wake, 1);
    gg_fp_futex_wake(&r->hdr->cq_wake, INT_MAX);

    /* Unreachable first (the loop finds regions through the list and the
     * session), then unmapped, then counted out: the loop may free the
     * module and close the device as soon as live reaches 0. */
    gg_core *core = r->core;
    gg_session *s = r->sess;
    gg_core_lock(core);
    for (gg_fp_region **p = &m->regions; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    gg_core_unlock(core);
    fp_region_unmap(r);
    gg_core_lock(core);
    gg_session_unref(s);
    gg_fetch_sub_seq_cst(&m->live, 1);
    uv_async_send(&m->async);   /* a stop may be waiting for this */
    gg_core_unlock(core);
}
