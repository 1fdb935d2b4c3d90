/* SPDX-License-Identifier: MIT */
/* alloc_count: an LD_PRELOAD shim that counts heap allocations.
 *
 *   LD_PRELOAD=libgg_alloc_count.so GG_ALLOC_COUNT_FILE=/tmp/x.count prog ...
 *
 * Every call of malloc, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc in the process (from any
 * library: glibc routes its own internal allocations through the interposed
 * malloc) adds 1 to a 64-bit counter in a file that other processes can
 * read while this one runs.  The real functions are found with
 * dlsym(RTLD_NEXT); dlsym itself may call calloc before that is known, so
 * the first few allocations come from a small static buffer (counted too;
 * free() of such a pointer does nothing).
 *
 * The file ($GG_ALLOC_COUNT_FILE; without it the shim only passes calls
 * through) is created when missing and sized to 4096 bytes when smaller,
 * never truncated, and mapped shared: processes that name the same file add
 * to the same counters, and a forked child shares its parent's.  Layout
 * (host byte order, every field a uint64_t updated with relaxed atomic adds;
 * read it with an atomic or volatile 64-bit load, or pread):
 *
 *   offset  0  magic "GGALLOC1" (no NUL), written once mapped
 *   offset  8  allocations: every call of the functions above (the total)
 *   offset 16  malloc
 *   offset 24  calloc
 *   offset 32  realloc + reallocarray
 *   offset 40  posix_memalign + aligned_alloc + memalign + valloc + pvalloc
 *   offset 48  free (of a non-NULL pointer)
 *   offset 56  allocations made before the file was mapped (in the total)
 *
 * Counting starts at the process's first allocation; allocations made
 * before the file is mapped (the bootstrap) are added once it is.  Nothing
 * here allocates, takes a lock or calls stdio. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GG_ALLOC_EXPORT __attribute__((visibility("default")))

enum {
    F_MAGIC = 0,
    F_TOTAL = 1,
    F_MALLOC = 2,
    F_CALLOC = 3,
    F_REALLOC = 4,
    F_ALIGNED = 5,
    F_FREE = 6,
    F_EARLY = 7,
    F_COUNT = 8
};

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef void (*free_fn)(void *);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*aligned_alloc_fn)(size_t, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef void *(*valloc_fn)(size_t);

static malloc_fn real_malloc;
static calloc_fn real_calloc;
static realloc_fn real_realloc;
static reallocarray_fn real_reallocarray;
static free_fn real_free;
static posix_memalign_fn real_posix_memalign;
static aligned_alloc_fn real_aligned_alloc;
static memalign_fn real_memalign;
static valloc_fn real_valloc, real_pvalloc;

/* 0: not started, 1: resolving (allocations go to the bootstrap buffer),
 * 2: ready */
static _Atomic int state;
static _Atomic(uint64_t *) counters;        /* the mapped file, NULL until mapped */
static _Atomic uint64_t early[F_COUNT];     /* counts before it was */

/* ---- the bootstrap buffer ------------------------------------------------- */

static _Alignas(64) unsigned char boot[64 * 1024];
static _Atomic size_t boot_used;

static bool is_boot(const void *p)
{
    return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    size_t cur = atomic_load(&boot_used);
    for (;;) {
        size_t start = (cur + align - 1) & ~(align - 1);
        if (start + n > sizeof boot || start + n < start)
            return NULL;
        if (atomic_compare_exchange_weak(&boot_used, &cur, start + n))
            return boot + start;
    }
}

/* ---- counting ---------------------------------------------------------------- */

static void count(int field)
{
    uint64_t *c = atomic_load_explicit(&counters, memory_order_acquire);
    if (c) {
        atomic_fetch_add_explicit((_Atomic uint64_t *)&c[field], 1, memory_order_relaxed);
        if (field != F_FREE)
            atomic_fetch_add_explicit((_Atomic uint64_t *)&c[F_TOTAL], 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&early[field], 1, memory_order_relaxed);
        if (field != F_FREE)
            atomic_fetch_add_explicit(&early[F_TOTAL], 1, memory_order_relaxed);
    }
}

static void map_file(void)
{
    const char *path = getenv("GG_ALLOC_COUNT_FILE");    /* getenv does not allocate */
    if (!path || !*path)
        return;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size < 4096 && ftruncate(fd, 4096) != 0) {
        close(fd);
        return;
    }
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    uint64_t *c = p;
    memcpy(&c[F_MAGIC], "GGALLOC1", 8);
    /* publish, then move what was counted before into the file; a count
     * made between the two lands in `early` too late and is lost (only the
     * start-up's other threads could make one) */
    atomic_store_explicit(&counters, c, memory_order_release);
    for (int f = F_TOTAL; f < F_COUNT; f++) {
        uint64_t v = atomic_exchange(&early[f], 0);
        if (v) {
            atomic_fetch_add((_Atomic uint64_t *)&c[f], v);
            if (f == F_TOTAL)
                atomic_fetch_add((_Atomic uint64_t *)&c[F_EARLY], v);
        }
    }
}

static void resolve(void)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&state, &expect, 1)) {
        /* another thread resolves: wait for it (dlsym is quick); this
         * thread's allocations meanwhile come from the bootstrap buffer */
        return;
    }
    real_malloc = (malloc_fn)dlsym(RTLD_NEXT, "malloc");
    real_calloc = (calloc_fn)dlsym(RTLD_NEXT, "calloc");
    real_realloc = (realloc_fn)dlsym(RTLD_NEXT, "realloc");
    real_reallocarray = (reallocarray_fn)dlsym(RTLD_NEXT, "reallocarray");
    real_free = (free_fn)dlsym(RTLD_NEXT, "free");
    real_posix_memalign = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (aligned_alloc_fn)dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = (memalign_fn)dlsym(RTLD_NEXT, "memalign");
    real_valloc = (valloc_fn)dlsym(RTLD_NEXT, "valloc");
    real_pvalloc = (valloc_fn)dlsym(RTLD_NEXT, "pvalloc");
    map_file();
    atomic_store_explicit(&state, 2, memory_order_release);
}

/* true when the real functions may be called */
static bool ready(void)
{
    if (__builtin_expect(atomic_load_explicit(&state, memory_order_acquire) == 2, 1))
        return true;
    resolve();
    return atomic_load_explicit(&state, memory_order_acquire) == 2;
}

/* ---- the interposed functions ----------------------------------------------------- */

GG_ALLOC_EXPORT void *malloc(size_t n)
{
    count(F_MALLOC);
    if (!ready() || !real_malloc)
        return boot_alloc(n, 16);
    return real_malloc(n);
}

GG_ALLOC_EXPORT void *calloc(size_t n, size_t m)
{
    count(F_CALLOC);
    if (!ready() || !real_calloc) {
        if (m && n > SIZE_MAX / m)
            return NULL;
        return boot_alloc(n * m, 16);      /* static: already zero */
    }
    return real_calloc(n, m);
}

GG_ALLOC_EXPORT void free(void *p)
{
    if (!p)
        return;
    count(F_FREE);
    if (is_boot(p))
        return;
    if (ready() && real_free)
        real_free(p);
}

static void *realloc_common(void *p, size_t n)
{
    if (!ready() || !real_realloc) {
        void *q = boot_alloc(n, 16);
        if (q && p) {
            /* the old block's size is unknown: copy what the buffer holds
             * after it, at most n bytes */
            size_t avail = is_boot(p) ? (size_t)(boot + sizeof boot - (unsigned char *)p) : n;
            memmove(q, p, avail < n ? avail : n);
        }
        return q;
    }
    if (p && is_boot(p)) {
        void *q = real_malloc(n);
        if (q) {
            size_t avail = (size_t)(boot + sizeof boot - (unsigned char *)p);
            memcpy(q, p, avail < n ? avail : n);
        }
        return q;
    }
    return real_realloc(p, n);
}

GG_ALLOC_EXPORT void *realloc(void *p, size_t n)
{
    count(F_REALLOC);
    return realloc_common(p, n);
}

GG_ALLOC_EXPORT void *reallocarray(void *p, size_t n, size_t m)
{
    count(F_REALLOC);
    if (m && n > SIZE_MAX / m) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_common(p, n * m);
}

GG_ALLOC_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    count(F_ALIGNED);
    if (!ready() || !real_posix_memalign) {
        void *q = boot_alloc(n, align);
        if (!q)
            return ENOMEM;
        *out = q;
        return 0;
    }
    return real_posix_memalign(out, align, n);
}

GG_ALLOC_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    count(F_ALIGNED);
    if (!ready() || !real_aligned_alloc)
        return boot_alloc(n, align);
    return real_aligned_alloc(align, n);
}

GG_ALLOC_EXPORT void *memalign(size_t align, size_t n)
{
    count(F_ALIGNED);
    if (!ready() || !real_memalign)
        return boot_alloc(n, align);
    return real_memalign(align, n);
}

GG_ALLOC_EXPORT void *valloc(size_t n)
{
    count(F_ALIGNED);
    if (!ready() || !real_valloc)
        return boot_alloc(n, 4096);
    return real_valloc(n);
}

GG_ALLOC_EXPORT void *pvalloc(size_t n)
{
    count(F_ALIGNED);
    if (!ready() || !real_pvalloc)
        return boot_alloc((n + 4095) & ~(size_t)4095, 4096);
    return real_pvalloc(n);
}
