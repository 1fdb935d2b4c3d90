/* SPDX-License-Identifier: MIT */
/* Helpers shared by the client-library integration tests (test_client_*.c):
 * shm buffers registered with the daemon, stats lookups, float checks. */
#ifndef GG_TEST_CLIENT_UTIL_H
#define GG_TEST_CLIENT_UTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

/* A POSIX shm object, mapped here and registered with the daemon. */
typedef struct {
    char name[64];
    float *f;
    size_t size;
    uint64_t id;
} tbuf;

static inline bool tbuf_new(gg_client *c, tbuf *b, size_t floats)
{
    memset(b, 0, sizeof *b);
    h_unique(b->name, sizeof b->name, "/ggtest-buf");
    b->size = floats * sizeof(float);
    int rc = gg_client_shm_create(b->name, b->size, (void **)&b->f);
    if (!CHECKF(rc == 0, "shm_create %s: %d", b->name, rc))
        return false;
    rc = gg_client_buffer_register_shm(c, b->name, 0, b->size, &b->id);
    return CHECKF(rc == 0, "register %s: %s", b->name, gg_client_last_error(c));
}

static inline void tbuf_free(tbuf *b)
{
    if (b->f)
        gg_client_shm_destroy(b->name, b->f, b->size);
    b->f = NULL;
}

static inline void tbuf_fill(tbuf *b, float v)
{
    for (size_t i = 0; i < b->size / sizeof(float); i++)
        b->f[i] = v;
}

/* A client connected to d's socket as name, or NULL after a failed check. */
static inline gg_client *t_connect(const h_daemon *d, const char *name)
{
    gg_client *c = gg_client_new();
    if (!CHECKF(c && gg_client_connect(c, d->sock, name) == 0, "connect: %s",
                c ? gg_client_last_error(c) : "no memory")) {
        gg_client_close(c);
        return NULL;
    }
    return c;
}

/* stats as an object valid until the next call on c. */
static inline const msgpack_object *t_stats(gg_client *c)
{
    const msgpack_object *r = NULL;
    int rc = gg_client_call(c, "stats", NULL, 0, &r);
    if (!CHECKF(rc == 0, "stats: %s", gg_client_last_error(c)))
        return NULL;
    return r;
}

static inline uint64_t t_stat(gg_client *c, const char *key)
{
    const msgpack_object *r = t_stats(c);
    return r ? h_getu(r, key) : UINT64_MAX;
}

/* This client's own session in stats, once its replay count reaches want
 * (polled, up to 60 s: a fast-path completion can be seen before the daemon
 * has counted it): the count and the sum of the replays' device times
 * (avg_replay_us x replays).  false when stats fail or the count never gets
 * there. */
static inline bool t_session_replays(gg_client *c, uint64_t want, uint64_t *replays,
                                     double *us_sum)
{
    uint64_t id = gg_client_session_id(c);
    for (int64_t end = h_now_ms() + 60000;; h_sleep_ms(5)) {
        const msgpack_object *r = NULL;
        if (gg_client_call(c, "stats", NULL, 0, &r) != 0)
            return false;
        const msgpack_object *ss = h_get(r, "sessions");
        for (uint32_t i = 0; ss && ss->type == MSGPACK_OBJECT_ARRAY && i < ss->via.array.size;
             i++) {
            const msgpack_object *e = &ss->via.array.ptr[i];
            if (h_getu(e, "id") != id)
                continue;
            *replays = h_getu(e, "replays");
            *us_sum = h_getf(e, "avg_replay_us") * (double)*replays;
            if (*replays != UINT64_MAX && *replays >= want)
                return true;
        }
        if (h_now_ms() >= end)
            return false;
    }
}

/* The cache entry of (program, branch, bucket) in a stats result. */
static inline const msgpack_object *t_entry(const msgpack_object *stats, uint64_t prog,
                                            int branch, int bucket)
{
    const msgpack_object *cache = h_get(stats, "cache");
    for (uint32_t i = 0; cache && cache->type == MSGPACK_OBJECT_ARRAY && i < cache->via.array.size;
         i++) {
        const msgpack_object *e = &cache->via.array.ptr[i];
        if (h_getu(e, "program") == prog && h_geti(e, "branch") == branch &&
            h_geti(e, "bucket") == bucket)
            return e;
    }
    return NULL;
}

static inline int t_entries_of(const msgpack_object *stats, uint64_t prog)
{
    const msgpack_object *cache = h_get(stats, "cache");
    int n = 0;
    for (uint32_t i = 0; cache && cache->type == MSGPACK_OBJECT_ARRAY && i < cache->via.array.size;
         i++)
        n += h_getu(&cache->via.array.ptr[i], "program") == prog;
    return n;
}

static inline bool t_close(double got, double want, double tol)
{
    return fabs(got - want) <= tol * (1.0 + fabs(want));
}

/* The program several tests share: y = silu(x) * 2 + x over [batch, d] f32,
 * through two scratch tensors, buckets 1, 2, 4; 0 when define fails. */
static inline uint64_t t_define_silu2x(gg_client *c, const char *name, uint64_t x, uint64_t y,
                                       int64_t d)
{
    gg_program_def *p = gg_program_def_new(name);
    int64_t s[2] = {GG_BATCH, d};
    static const int b[] = {1, 2, 4};
    gg_program_def_buckets(p, 3, b);
    gg_program_def_tensor(p, "x", x, 0, "f32", 2, s);
    gg_program_def_tensor(p, "y", y, 0, "f32", 2, s);
    gg_program_def_scratch(p, "a", "f32", 2, s);
    gg_program_def_scratch(p, "b", "f32", 2, s);
    gg_program_def_op(p, "silu", "x", "a");
    gg_program_def_op(p, "scale", "a", "b");
    gg_program_def_attr_f(p, "scale", 2.0);
    gg_program_def_op(p, "add", "b, x", "y");
    uint64_t prog = 0;
    if (!CHECKF(gg_client_program_define(c, p, &prog) == 0, "define %s: %s", name,
                gg_client_last_error(c)))
        prog = 0;
    gg_program_def_free(p);
    return prog;
}

/* t_define_silu2x's result for one element, in double */
static inline double t_silu2x_ref(double v)
{
    return 2.0 * v / (1.0 + exp(-v)) + v;
}

/* A call expected to fail with code; false if it did not. */
#define CHECK_FAILS(call, client, code)                                                        \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        const char *got_ = gg_client_last_error_code(client);                                  \
        h_check(rc_ < 0 && strcmp(got_, (code)) == 0, __FILE__, __LINE__,                      \
                "%s fails with %s (rc %d, code %s: %s)", #call, (code), rc_, got_,              \
                gg_client_last_error(client));                                                 \
    } while (0)

#endif
