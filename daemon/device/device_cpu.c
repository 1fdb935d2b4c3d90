/* SPDX-License-Identifier: MIT */
/* The cpu backend: the reference for the hip backend and what runs the whole
 * daemon on a machine without a GPU.
 *
 * Happy path: client buffers are POSIX shared-memory objects the client
 * names, or memfds / shm objects it passes by descriptor; the daemon maps
 * the registered range and hands out the address of the registered offset.  A "graph" is the list of launches recorded between
 * capture_begin and capture_end; launching it runs them in order on the
 * calling executor thread, so kernels never run on the loop.
 *
 * Failure modes: a name that is not a single-component shm name, an object
 * owned by another uid than the connecting peer's, or an offset/size past
 * the object's real size is refused with a message and nothing mapped.  A
 * client that shrinks its object after registering it would make the
 * daemon's next access fault with SIGBUS: kernels run under a per-thread
 * guard that turns that fault into -EFAULT for the one request. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "device/device.h"

typedef struct cpu_launch_s {
    const gg_op_def *op;
    int nin, nout;
    gg_tensor in[GG_MAX_OPERANDS], out[GG_MAX_OPERANDS];
    gg_op_attrs attrs;
} cpu_launch;

struct gg_dev_graph {
    cpu_launch *l;
    int n, cap;
};

struct gg_dev_exec {
    cpu_launch *l;
    int n;
};

struct gg_dev_stream {
    gg_dev_graph *capturing;     /* non-NULL between capture_begin and _end */
    int capture_err;
};

struct gg_dev_event {
    int recorded;
};

struct gg_dev_buffer {
    void *map;
    size_t map_len;
    uint64_t obj[2];        /* st_dev, st_ino of the object mapped */
    uint64_t obj_off;       /* where the buffer starts in it */
};

static __thread char cpu_err[256];

/* ---- SIGBUS guard --------------------------------------------------------- */
static __thread sigjmp_buf *cpu_guard;
static pthread_once_t cpu_guard_once = PTHREAD_ONCE_INIT;

static void cpu_on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    if (cpu_guard)
        siglongjmp(*cpu_guard, 1);
    /* not ours: die as the default action would */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* SA_NODEFER: SIGBUS is not added to the mask while the handler runs, so
 * jumping out of it leaves the thread's mask as it was when the kernel
 * faulted, and the guard need not save and restore the mask around every
 * run (sigsetjmp(env, 0): no rt_sigprocmask per launch).  sa_mask is empty
 * for the same reason. */
static void cpu_guard_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = cpu_on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

/* Run fn(arg) touching shared memory that may have shrunk under us. */
static int cpu_guarded(void (*fn)(void *), void *arg);

static int cpu_fail(int rc, const char *fmt, const char *arg)
{
    snprintf(cpu_err, sizeof(cpu_err), fmt, arg);
    return rc;
}

static int cpu_guarded(void (*fn)(void *), void *arg)
{
    sigjmp_buf env;
    pthread_once(&cpu_guard_once, cpu_guard_install);
    if (sigsetjmp(env, 0)) {
        cpu_guard = NULL;
        snprintf(cpu_err, sizeof(cpu_err), "a client buffer faulted (SIGBUS): its shared memory "
                 "object shrank after it was registered");
        return -EFAULT;
    }
    cpu_guard = &env;
    fn(arg);
    cpu_guard = NULL;
    return 0;
}

typedef struct {
    const cpu_launch *l;
    int n;
} cpu_run_args;

static void cpu_run(void *arg)
{
    const cpu_run_args *a = arg;
    for (int i = 0; i < a->n; i++)
        gg_ops_run_cpu(a->l[i].op, a->l[i].in, a->l[i].nin, a->l[i].out, a->l[i].nout,
                       &a->l[i].attrs);
}

static int cpu_run_guarded(const cpu_launch *l, int n)
{
    cpu_run_args a = {l, n};
    return cpu_guarded(cpu_run, &a);
}

typedef struct {
    void *dst;
    const void *src;
    size_t n;
} cpu_copy_args;

static void cpu_copy(void *arg)
{
    const cpu_copy_args *a = arg;
    memmove(a->dst, a->src, a->n);
}

static const char *cpu_last_error(gg_device *dev)
{
    (void)dev;
    return cpu_err[0] ? cpu_err : "no error";
}

/* The device memory the cpu backend reports: the host's RAM, or, with
 * GFXGRAPH_CPU_MEMORY=TOTAL[:USED] (bytes; K, M, G suffixes), a device of
 * TOTAL bytes of which USED are taken by others and the daemon's scratch
 * the rest, as a GPU runtime counts it: what tests of vram-cap need. */
typedef struct {
    bool injected;
    uint64_t total, used;
    uint64_t scratch;               /* bytes held by scratch_alloc (atomic) */
} cpu_mem;

/* scratch_alloc's block starts this far before the pointer it gives: the
 * block's size lives there, for the count (and keeps 256-byte alignment) */
#define CPU_SCRATCH_HEAD 256

static void cpu_destroy(gg_device *dev)
{
    free(dev->priv);
    free(dev);
}

static int cpu_mem_info(gg_device *dev, uint64_t *free_b, uint64_t *total_b)
{
    const cpu_mem *m = dev->priv;
    if (m && m->injected) {
        uint64_t taken = m->used + __atomic_load_n(&m->scratch, __ATOMIC_RELAXED);
        *total_b = m->total;
        *free_b = taken < m->total ? m->total - taken : 0;
        return 0;
    }
    struct sysinfo si;
    if (sysinfo(&si) != 0)
        return cpu_fail(-errno, "sysinfo failed%s", "");
    *total_b = (uint64_t)si.totalram * si.mem_unit;
    *free_b = (uint64_t)(si.freeram + si.bufferram) * si.mem_unit;
    return 0;
}

static int cpu_info(gg_device *dev, gg_device_info *out)
{
    struct utsname u;
    struct sysinfo si;
    memset(out, 0, sizeof(*out));
    uname(&u);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(out->name, sizeof(out->name), "cpu (%.32s, %ld threads)", u.machine, cpus);
    snprintf(out->arch, sizeof(out->arch), "%.31s", u.machine);
    snprintf(out->runtime, sizeof(out->runtime), "cpu reference kernels");
    snprintf(out->driver, sizeof(out->driver), "linux %.50s", u.release);
    (void)si;
    cpu_mem_info(dev, &out->mem_free, &out->mem_total);
    out->wave_size = 1;
    out->compute_units = (int)cpus;
    return 0;
}

static int cpu_buffer_import(gg_device *dev, const gg_import_desc *d, gg_dev_buffer **out,
                             void **ptr, char *err, size_t errlen)
{
    (void)dev;
    if (d->by_fd) {
        gg_dev_buffer *b = malloc(sizeof(*b));
        if (!b) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        /* unsealed is fine here: a shrink faults under the kernels' guard
         * (-EFAULT), as for a shm name */
        int rc = gg_device_map_fd(d, false, &b->map, &b->map_len, ptr, err, errlen);
        if (rc < 0) {
            free(b);
            return rc;
        }
        struct stat st;
        if (fstat(d->fd, &st) == 0) {
            b->obj[0] = (uint64_t)st.st_dev;
            b->obj[1] = (uint64_t)st.st_ino;
        } else {
            b->obj[0] = b->obj[1] = 0;  /* unknown: compared by address */
        }
        b->obj_off = d->offset;
        *out = b;
        return 0;
    }
    char name[256];
    if (d->handle_len >= sizeof(name) || d->handle_len < 2) {
        snprintf(err, errlen, "the cpu backend takes a POSIX shm name like \"/name\" as handle");
        return -EINVAL;
    }
    memcpy(name, d->handle, d->handle_len);
    name[d->handle_len] = '\0';
    if (name[0] != '/' || strchr(name + 1, '/') || strlen(name) != d->handle_len) {
        snprintf(err, errlen, "shm name '%s' must be '/' followed by a name without '/'", name);
        return -EINVAL;
    }
    int fd = shm_open(name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open shm object %s: %s", name, strerror(e));
        /* out of descriptors is the daemon's state, not a bad name: said as such */
        if (e == EMFILE || e == ENFILE)
            snprintf(err, errlen, "cannot open shm object %s: the daemon is out of file "
                     "descriptors (%s: %s); raise its limit (LimitNOFILE=, ulimit -n) or "
                     "release buffers", name, e == EMFILE ? "EMFILE" : "ENFILE", strerror(e));
        return e == ENOENT ? -ENOENT : e == EACCES ? -EACCES : e == EMFILE ? -EMFILE
             : e == ENFILE ? -ENFILE : -EINVAL;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot stat shm object %s: %s", name, strerror(errno));
        goto undo_fd;
    }
    /* Only the connecting process's own objects: the daemon must never be a
     * way into memory that another user shared by name. */
    if (st.st_uid != d->peer_uid) {
        snprintf(err, errlen, "shm object %s belongs to uid %u, not to the client (uid %u)", name,
                 (unsigned)st.st_uid, (unsigned)d->peer_uid);
        rc = -EACCES;
        goto undo_fd;
    }
    if ((uint64_t)st.st_size < d->offset || (uint64_t)st.st_size - d->offset < d->size) {
        snprintf(err, errlen, "offset %llu + size %llu is past the end of shm object %s "
                 "(%lld bytes)", (unsigned long long)d->offset, (unsigned long long)d->size, name,
                 (long long)st.st_size);
        rc = -ERANGE;
        goto undo_fd;
    }
    /* Only the registered range, widened to pages: mapping the whole object
     * let a few registrations of a large sparse object take the address
     * space from every other user. */
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t map_off = d->offset & ~(pg - 1);
    size_t map_len = (size_t)(d->offset + d->size - map_off);
    void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map_off);
    if (map == MAP_FAILED) {
        rc = -errno;
        snprintf(err, errlen, "cannot map shm object %s: %s", name, strerror(errno));
        goto undo_fd;
    }
    gg_dev_buffer *b = malloc(sizeof(*b));
    if (!b) {
        munmap(map, map_len);
        rc = -ENOMEM;
        goto undo_fd;
    }
    b->map = map;
    b->map_len = map_len;
    b->obj[0] = (uint64_t)st.st_dev;
    b->obj[1] = (uint64_t)st.st_ino;
    b->obj_off = d->offset;
    *out = b;
    *ptr = (uint8_t *)map + (d->offset - map_off);
undo_fd:
    close(fd);
    return rc;
}

static void cpu_buffer_release(gg_device *dev, gg_dev_buffer *b)
{
    (void)dev;
    if (!b)
        return;
    munmap(b->map, b->map_len);
    free(b);
}

static int cpu_buffer_object(gg_device *dev, gg_dev_buffer *b, uint64_t obj[2], uint64_t *off)
{
    (void)dev;
    if (!b || (!b->obj[0] && !b->obj[1]))
        return -ENOTSUP;
    obj[0] = b->obj[0];
    obj[1] = b->obj[1];
    *off = b->obj_off;
    return 0;
}

static int cpu_scratch_alloc(gg_device *dev, size_t bytes, void **ptr)
{
    cpu_mem *m = dev->priv;
    size_t n = (bytes + 255) & ~(size_t)255;
    if (!n)
        n = 256;
    if (n > SIZE_MAX - CPU_SCRATCH_HEAD)
        return cpu_fail(-ENOMEM, "out of host memory%s", "");
    uint8_t *p = aligned_alloc(256, n + CPU_SCRATCH_HEAD);
    if (!p)
        return cpu_fail(-ENOMEM, "out of host memory%s", "");
    memcpy(p, &n, sizeof(n));
    if (m)
        __atomic_add_fetch(&m->scratch, n, __ATOMIC_RELAXED);
    *ptr = p + CPU_SCRATCH_HEAD;
    return 0;
}

static void cpu_scratch_free(gg_device *dev, void *ptr)
{
    cpu_mem *m = dev->priv;
    if (!ptr)
        return;
    uint8_t *p = (uint8_t *)ptr - CPU_SCRATCH_HEAD;
    size_t n;
    memcpy(&n, p, sizeof(n));
    if (m)
        __atomic_sub_fetch(&m->scratch, n, __ATOMIC_RELAXED);
    free(p);
}

static int cpu_memset(gg_device *dev, gg_dev_stream *s, void *ptr, int byte, size_t bytes)
{
    (void)dev;
    (void)s;
    memset(ptr, byte, bytes);
    return 0;
}

static int cpu_memcpy(gg_device *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    cpu_copy_args a = {dst, src, bytes};
    return cpu_guarded(cpu_copy, &a);   /* one side may be a client's shared memory */
}

static int cpu_stream_create(gg_device *dev, gg_dev_stream **out)
{
    (void)dev;
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : cpu_fail(-ENOMEM, "out of memory%s", "");
}

static void cpu_graph_destroy(gg_device *dev, gg_dev_graph *g)
{
    (void)dev;
    if (!g)
        return;
    free(g->l);
    free(g);
}

static void cpu_stream_destroy(gg_device *dev, gg_dev_stream *s)
{
    if (!s)
        return;
    cpu_graph_destroy(dev, s->capturing);
    free(s);
}

static int cpu_stream_sync(gg_device *dev, gg_dev_stream *s)
{
    (void)dev;
    (void)s;
    return 0;   /* work on a cpu stream is done when its call returns */
}

static int cpu_event_create(gg_device *dev, gg_dev_event **out)
{
    (void)dev;
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

static int cpu_event_import(gg_device *dev, const void *handle, size_t len, gg_dev_event **out,
                            char *err, size_t errlen)
{
    (void)handle;
    (void)len;
    /* A client of the cpu backend has no device work to order against: the
     * imported event is always complete. */
    int rc = cpu_event_create(dev, out);
    if (rc < 0)
        snprintf(err, errlen, "out of memory");
    else
        (*out)->recorded = 1;
    return rc;
}

static int cpu_event_record(gg_device *dev, gg_dev_event *ev, gg_dev_stream *s)
{
    (void)dev;
    (void)s;
    ev->recorded = 1;
    return 0;
}

static int cpu_stream_wait_event(gg_device *dev, gg_dev_stream *s, gg_dev_event *ev)
{
    (void)dev;
    (void)s;
    (void)ev;
    return 0;
}

static void cpu_event_destroy(gg_device *dev, gg_dev_event *ev)
{
    (void)dev;
    free(ev);
}

static int cpu_capture_begin(gg_device *dev, gg_dev_stream *s)
{
    (void)dev;
    if (s->capturing)
        return cpu_fail(-EBUSY, "the stream is already capturing%s", "");
    s->capturing = calloc(1, sizeof(*s->capturing));
    s->capture_err = 0;
    return s->capturing ? 0 : cpu_fail(-ENOMEM, "out of memory%s", "");
}

static int cpu_capture_end(gg_device *dev, gg_dev_stream *s, gg_dev_graph **out)
{
    *out = NULL;
    if (!s->capturing)
        return cpu_fail(-EINVAL, "the stream is not capturing%s", "");
    gg_dev_graph *g = s->capturing;
    s->capturing = NULL;
    if (s->capture_err) {
        cpu_graph_destroy(dev, g);
        return cpu_fail(-EIO, "the capture was invalidated by a failed launch%s", "");
    }
    *out = g;
    return 0;
}

static int cpu_instantiate(gg_device *dev, gg_dev_graph *g, gg_dev_exec **out)
{
    (void)dev;
    gg_dev_exec *x = calloc(1, sizeof(*x));
    if (!x || (g->n && !(x->l = malloc(sizeof(cpu_launch) * (size_t)g->n)))) {
        free(x);
        return cpu_fail(-ENOMEM, "out of memory%s", "");
    }
    if (g->n)
        memcpy(x->l, g->l, sizeof(cpu_launch) * (size_t)g->n);
    x->n = g->n;
    *out = x;
    return 0;
}

static int cpu_exec_update(gg_device *dev, gg_dev_exec *x, gg_dev_graph *g)
{
    (void)dev;
    if (x->n != g->n)
        return cpu_fail(-EINVAL, "topology differs: node count%s", "");
    for (int i = 0; i < g->n; i++)
        if (x->l[i].op != g->l[i].op)
            return cpu_fail(-EINVAL, "topology differs: op kinds%s", "");
    memcpy(x->l, g->l, sizeof(cpu_launch) * (size_t)g->n);
    return 0;
}

static int cpu_graph_launch(gg_device *dev, gg_dev_exec *x, gg_dev_stream *s)
{
    (void)dev;
    if (s->capturing)
        return cpu_fail(-EINVAL, "cannot launch a graph into a capture%s", "");
    return cpu_run_guarded(x->l, x->n);
}

static void cpu_exec_destroy(gg_device *dev, gg_dev_exec *x)
{
    (void)dev;
    if (!x)
        return;
    free(x->l);
    free(x);
}

static size_t cpu_exec_footprint(gg_device *dev, gg_dev_exec *x)
{
    (void)dev;
    return sizeof(*x) + sizeof(cpu_launch) * (size_t)x->n;
}

static int cpu_op_launch(gg_device *dev, gg_dev_stream *s, const gg_op_def *op, const gg_tensor *in,
                         int nin, const gg_tensor *out, int nout, const gg_op_attrs *attrs)
{
    (void)dev;
    if (nin > GG_MAX_OPERANDS || nout > GG_MAX_OPERANDS)
        return cpu_fail(-EINVAL, "too many operands%s", "");
    if (!op->cpu)
        return cpu_fail(-ENOTSUP, "%s does not launch as an op", op->name);
    if (!s->capturing) {
        cpu_launch l = {.op = op, .nin = nin, .nout = nout, .attrs = *attrs};
        memcpy(l.in, in, sizeof(*in) * (size_t)nin);
        memcpy(l.out, out, sizeof(*out) * (size_t)nout);
        return cpu_run_guarded(&l, 1);
    }
    gg_dev_graph *g = s->capturing;
    if (g->n == g->cap) {
        int ncap = g->cap ? g->cap * 2 : 16;
        cpu_launch *nl = realloc(g->l, sizeof(*nl) * (size_t)ncap);
        if (!nl) {
            s->capture_err = -ENOMEM;
            return cpu_fail(-ENOMEM, "out of memory%s", "");
        }
        g->l = nl;
        g->cap = ncap;
    }
    cpu_launch *l = &g->l[g->n++];
    l->op = op;
    l->nin = nin;
    l->nout = nout;
    memcpy(l->in, in, sizeof(*in) * (size_t)nin);
    memcpy(l->out, out, sizeof(*out) * (size_t)nout);
    l->attrs = *attrs;
    return 0;
}

/* The chain as its stages' fused.norm_act launches, which run (or are
 * recorded) like any other: the same bytes as the unfused nodes. */
static int cpu_rowchain_launch(gg_device *dev, gg_dev_stream *s, const gg_rowchain *c)
{
    char why[160];
    if (gg_rowchain_check(c, why, sizeof why) < 0)
        return cpu_fail(-EINVAL, "%s", why);
    for (int k = 0; k < c->n; k++) {
        gg_tensor in[3], out[2];
        gg_op_attrs a;
        int nout, nin = gg_rowchain_stage_launch(c, k, in, out, &nout, &a);
        int rc = cpu_op_launch(dev, s, gg_ops_fused(GG_FUSED_NORM_ACT), in, nin, out, nout, &a);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static bool cpu_op_needs_warmup(gg_device *dev, const gg_op_def *op)
{
    (void)dev;
    (void)op;
    return false;
}

static int cpu_host_register(gg_device *dev, void *ptr, size_t len, void **devptr, char *err,
                             size_t errlen)
{
    (void)dev;
    (void)len;
    (void)err;
    (void)errlen;
    *devptr = ptr;
    return 0;
}

static void cpu_host_unregister(gg_device *dev, void *ptr)
{
    (void)dev;
    (void)ptr;
}

static int cpu_stream_write_u64(gg_device *dev, gg_dev_stream *s, void *devptr, uint64_t *hostptr,
                                uint64_t value)
{
    (void)dev;
    (void)s;
    (void)devptr;
    __atomic_store_n(hostptr, value, __ATOMIC_RELEASE);
    return 0;
}

static int cpu_stream_write_u32(gg_device *dev, gg_dev_stream *s, void *devptr, uint32_t value)
{
    (void)dev;
    (void)s;
    memcpy(devptr, &value, sizeof value);
    return 0;
}

static int cpu_stream_query(gg_device *dev, gg_dev_stream *s)
{
    (void)dev;
    (void)s;
    return 0;   /* the work ran in the caller's thread */
}

static int cpu_notify(gg_device *dev, gg_dev_stream *s, gg_done_fn fn, void *arg)
{
    (void)dev;
    (void)s;
    fn(arg, 0);   /* the work ran in the caller's thread: already complete */
    return 0;
}

static const gg_device_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .info = cpu_info,
    .buffer_import = cpu_buffer_import,
    .buffer_release = cpu_buffer_release,
    .buffer_object = cpu_buffer_object,
    .scratch_alloc = cpu_scratch_alloc,
    .scratch_free = cpu_scratch_free,
    .memset = cpu_memset,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_h2d = cpu_memcpy,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .event_create = cpu_event_create,
    .event_import = cpu_event_import,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_destroy = cpu_event_destroy,
    .capture_begin = cpu_capture_begin,
    .capture_end = cpu_capture_end,
    .instantiate = cpu_instantiate,
    .exec_update = cpu_exec_update,
    .graph_launch = cpu_graph_launch,
    .graph_destroy = cpu_graph_destroy,
    .exec_destroy = cpu_exec_destroy,
    .exec_footprint = cpu_exec_footprint,
    .mem_info = cpu_mem_info,
    .op_needs_warmup = cpu_op_needs_warmup,
    .op_launch = cpu_op_launch,
    .rowchain_launch = cpu_rowchain_launch,
    .host_register = cpu_host_register,
    .host_unregister = cpu_host_unregister,
    .stream_write_u64 = cpu_stream_write_u64,
    .stream_write_u32 = cpu_stream_write_u32,
    .stream_query = cpu_stream_query,
    .notify = cpu_notify,
    .last_error = cpu_last_error,
};

/* "64M", "1G", "1048576": bytes, or false. */
static bool cpu_parse_bytes(const char *s, char **end, uint64_t *v)
{
    errno = 0;
    if (*s < '0' || *s > '9')
        return false;
    unsigned long long n = strtoull(s, end, 10);
    unsigned shift = **end == 'K' ? 10 : **end == 'M' ? 20 : **end == 'G' ? 30 : 0;
    if (shift)
        (*end)++;
    if (errno || n > (UINT64_MAX >> shift))
        return false;
    *v = (uint64_t)n << shift;
    return true;
}

int gg_device_cpu_open(const gg_config *cfg, gg_device **out, char *err, size_t errlen)
{
    (void)cfg;
    gg_device *d = calloc(1, sizeof(*d));
    cpu_mem *m = calloc(1, sizeof(*m));
    if (!d || !m) {
        free(d);
        free(m);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    const char *inj = getenv("GFXGRAPH_CPU_MEMORY");
    if (inj && *inj) {
        char *end;
        bool ok = cpu_parse_bytes(inj, &end, &m->total);
        if (ok && *end == ':')
            ok = cpu_parse_bytes(end + 1, &end, &m->used);
        if (!ok || *end || m->total == 0 || m->used > m->total) {
            snprintf(err, errlen, "GFXGRAPH_CPU_MEMORY='%.64s': want TOTAL[:USED] in bytes "
                     "(K, M, G suffixes), TOTAL > 0 and USED <= TOTAL", inj);
            free(d);
            free(m);
            return -EINVAL;
        }
        m->injected = true;
    }
    d->priv = m;
    d->ops = &cpu_ops;
    *out = d;
    return 0;
}
