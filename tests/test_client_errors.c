/* SPDX-License-Identifier: MIT */
/* Bad requests through the client library (and raw calls where the library
 * would refuse first): each is refused with the right code, and the session
 * keeps working (a good replay after each). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_client_util.h"

#define SENT 4242.0f

static gg_client *A, *B;
static tbuf gx, gy;
static uint64_t gprog;
static int good_count;

/* The session still works: a replay with the right numbers. */
static bool good_replay(void)
{
    good_count++;
    for (int i = 0; i < 32; i++)
        gx.f[i] = (float)(i * good_count % 9) - 4.0f;
    tbuf_fill(&gy, SENT);
    gg_replay_result res;
    int rc = gg_client_replay(A, gprog, 3, -1, &res);
    int bad = 0;
    for (int i = 0; i < 12; i++)
        bad += gy.f[i] != 2.0f * gx.f[i];
    return rc == 0 && bad == 0;
}

#define STILL_OK() CHECKF(good_replay(), "a good replay works afterwards")

/* A program definition under construction, to be sent. */
static gg_program_def *def_xy(const char *name, uint64_t bx, uint64_t by)
{
    gg_program_def *p = gg_program_def_new(name);
    int64_t s[2] = {GG_BATCH, 4};
    static const int b[] = {1, 2, 4, 8};
    gg_program_def_buckets(p, 4, b);
    gg_program_def_tensor(p, "x", bx, 0, "f32", 2, s);
    gg_program_def_tensor(p, "y", by, 0, "f32", 2, s);
    return p;
}

static int define(gg_client *c, gg_program_def *p, uint64_t *id)
{
    uint64_t tmp;
    int rc = gg_client_program_define(c, p, id ? id : &tmp);
    gg_program_def_free(p);
    return rc;
}

/* Raw call with a packed map of params. */
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} mp;

static void mp_init(mp *m)
{
    msgpack_sbuffer_init(&m->sb);
    msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
}

static int raw_call(gg_client *c, const char *method, mp *m)
{
    const msgpack_object *r;
    int rc = gg_client_call(c, method, m->sb.data, m->sb.size, &r);
    msgpack_sbuffer_destroy(&m->sb);
    return rc;
}

/* Whether buffer.list shows buffer `id` as registered by descriptor. */
static bool buffer_handle_is_fd(gg_client *c, uint64_t id)
{
    const msgpack_object *r;
    if (gg_client_call(c, "buffer.list", NULL, 0, &r) != 0)
        return false;
    const msgpack_object *b = h_get(r, "buffers");
    if (!b || b->type != MSGPACK_OBJECT_ARRAY)
        return false;
    for (uint32_t i = 0; i < b->via.array.size; i++) {
        const msgpack_object *e = &b->via.array.ptr[i];
        char h[80] = "";
        if (h_getu(e, "id") == id)
            return strncmp(h_gets(e, "handle", h, sizeof h), "fd:", 3) == 0;
    }
    return false;
}

/* ---- buffers ------------------------------------------------------------- */

static void test_buffers(void)
{
    h_section("buffer.register refusals");
    char name[64];
    h_unique(name, sizeof name, "/ggtest-err");
    void *p = NULL;
    CHECK(gg_client_shm_create(name, 4096, &p) == 0);
    uint64_t id;
    CHECK_FAILS(gg_client_buffer_register_shm(A, name, 8192, 16, &id), A, "ERANGE");
    CHECK_CONTAINS(gg_client_last_error(A), "past the end");
    STILL_OK();
    CHECK_FAILS(gg_client_buffer_register_shm(A, name, 0, 8192, &id), A, "ERANGE");
    STILL_OK();
    CHECK_FAILS(gg_client_buffer_register_shm(A, name, 4000, 97, &id), A, "ERANGE");
    STILL_OK();
    CHECK(gg_client_buffer_register_shm(A, name, 4000, 96, &id) == 0);   /* exactly to the end */
    CHECK(gg_client_buffer_release(A, id) == 0);
    CHECK_FAILS(gg_client_buffer_register_shm(A, name, 0, 0, &id), A, "EINVAL");
    STILL_OK();
    CHECK_FAILS(gg_client_buffer_register_shm(A, "/ggtest/inside", 0, 16, &id), A, "EINVAL");
    STILL_OK();
    CHECK_FAILS(gg_client_buffer_register_shm(A, "no-leading-slash", 0, 16, &id), A, "EINVAL");
    STILL_OK();
    CHECK_FAILS(gg_client_buffer_register_shm(A, "/../etc/passwd", 0, 16, &id), A, "EINVAL");
    STILL_OK();
    CHECK_FAILS(gg_client_buffer_register_shm(A, "/ggtest-does-not-exist", 0, 16, &id), A,
                "ENOENT");
    STILL_OK();
    /* a name with a NUL inside: raw bytes */
    mp m;
    mp_init(&m);
    msgpack_pack_map(&m.pk, 2);
    proto_pack_key(&m.pk, "handle");
    proto_pack_strn(&m.pk, "/ab\0cd", 6);
    proto_pack_kv_u64(&m.pk, "size", 16);
    CHECK_FAILS(raw_call(A, "buffer.register", &m), A, "EINVAL");
    STILL_OK();
    mp_init(&m);
    msgpack_pack_map(&m.pk, 2);
    proto_pack_kv_str(&m.pk, "handle", name);
    proto_pack_kv_i64(&m.pk, "size", -16);
    CHECK_FAILS(raw_call(A, "buffer.register", &m), A, "EINVAL");
    STILL_OK();
    mp_init(&m);
    msgpack_pack_map(&m.pk, 3);
    proto_pack_kv_str(&m.pk, "handle", name);
    proto_pack_kv_u64(&m.pk, "offset", UINT64_MAX - 4);
    proto_pack_kv_u64(&m.pk, "size", 16);
    CHECK_FAILS(raw_call(A, "buffer.register", &m), A, "EINVAL");   /* overflows */
    STILL_OK();
    gg_client_shm_destroy(name, p, 4096);

    /* another user's object (needs root to make one) */
    if (geteuid() == 0) {
        h_unique(name, sizeof name, "/ggtest-nobody");
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0666);
        CHECK(fd >= 0 && ftruncate(fd, 4096) == 0 && fchown(fd, 65534, 65534) == 0);
        if (fd >= 0)
            close(fd);
        /* the daemon refuses the name of an object its client's uid does not own */
        mp_init(&m);
        msgpack_pack_map(&m.pk, 3);
        proto_pack_kv_str(&m.pk, "handle", name);
        proto_pack_kv_u64(&m.pk, "offset", 0);
        proto_pack_kv_u64(&m.pk, "size", 4096);
        CHECK_FAILS(raw_call(A, "buffer.register", &m), A, "EACCES");
        CHECK_CONTAINS(gg_client_last_error(A), "65534");
        STILL_OK();
        /* the client API, refused so, sends the object by descriptor: this
         * process opened it, so the daemon maps what the caller holds */
        id = 0;
        CHECKF(gg_client_buffer_register_shm(A, name, 0, 4096, &id) == 0 && id,
               "registered through its descriptor: %s", gg_client_last_error(A));
        CHECKF(buffer_handle_is_fd(A, id), "buffer %llu was registered by descriptor",
               (unsigned long long)id);
        if (id)
            CHECK(gg_client_buffer_release(A, id) == 0);
        STILL_OK();
        shm_unlink(name);
    } else {
        h_note("not root: skipping the shm object of another uid");
    }

    /* released buffer ids */
    tbuf t;
    if (tbuf_new(A, &t, 16)) {
        CHECK(gg_client_buffer_release(A, t.id) == 0);
        CHECK_FAILS(gg_client_buffer_release(A, t.id), A, "ENOENT");
        STILL_OK();
        CHECK_FAILS(define(A, def_xy("released-buf", t.id, gy.id), NULL), A, "ENOENT");
        STILL_OK();
    }
    tbuf_free(&t);
    CHECK_FAILS(gg_client_buffer_release(A, 987654321), A, "ENOENT");
    STILL_OK();
}

/* ---- define ------------------------------------------------------------- */

static void test_define(void)
{
    h_section("program.define refusals");
    tbuf small;
    memset(&small, 0, sizeof small);
    if (!tbuf_new(A, &small, 8))   /* 8 floats: 2 rows of 4 */
        return;
    /* a tensor past the end of its buffer at the largest bucket */
    CHECK_FAILS(define(A, def_xy("too-small", small.id, gy.id), NULL), A, "ERANGE");
    CHECK_CONTAINS(gg_client_last_error(A), "does not fit");
    STILL_OK();
    /* an offset that moves a fixed tensor out of its buffer */
    gg_program_def *p = gg_program_def_new("offset");
    int64_t s4[1] = {4};
    gg_program_def_tensor(p, "v", small.id, 20, "f32", 1, s4);
    gg_program_def_tensor(p, "y", gy.id, 0, "f32", 1, s4);
    gg_program_def_op(p, "copy", "v", "y");
    CHECK_FAILS(define(A, p, NULL), A, "ERANGE");
    STILL_OK();
    /* an offset that is not element-aligned */
    p = gg_program_def_new("misaligned");
    gg_program_def_tensor(p, "v", small.id, 2, "f32", 1, s4);
    gg_program_def_tensor(p, "y", gy.id, 0, "f32", 1, s4);
    gg_program_def_op(p, "copy", "v", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();

    int64_t s2[2] = {GG_BATCH, 4}, s5[2] = {GG_BATCH, 5};
    /* dtype */
    p = gg_program_def_new("dtype");
    gg_program_def_buckets(p, 4, (int[]){1, 2, 4, 8});
    gg_program_def_tensor(p, "x", gx.id, 0, "f64", 2, s2);
    gg_program_def_tensor(p, "y", gy.id, 0, "f32", 2, s2);
    gg_program_def_op(p, "copy", "x", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "f64");
    STILL_OK();
    /* mixed dtypes in one op */
    p = gg_program_def_new("mixed");
    gg_program_def_buckets(p, 4, (int[]){1, 2, 4, 8});
    gg_program_def_tensor(p, "x", gx.id, 0, "f16", 2, s2);
    gg_program_def_tensor(p, "y", gy.id, 0, "f32", 2, s2);
    gg_program_def_op(p, "copy", "x", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    /* shapes the op does not accept */
    p = def_xy("shape", gx.id, gy.id);
    gg_program_def_scratch(p, "z", "f32", 2, s5);
    gg_program_def_op(p, "add", "x, z", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    p = def_xy("linear-shape", gx.id, gy.id);
    gg_program_def_tensor(p, "w", gx.id, 0, "f32", 2, (int64_t[]){3, 3});
    gg_program_def_op(p, "linear", "x, w", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    /* "batch" anywhere but first */
    p = gg_program_def_new("batch-second");
    gg_program_def_buckets(p, 4, (int[]){1, 2, 4, 8});
    gg_program_def_tensor(p, "x", gx.id, 0, "f32", 2, (int64_t[]){4, GG_BATCH});
    gg_program_def_tensor(p, "y", gy.id, 0, "f32", 2, (int64_t[]){4, GG_BATCH});
    gg_program_def_op(p, "copy", "x", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    /* unknown op */
    p = def_xy("unknown-op", gx.id, gy.id);
    gg_program_def_op(p, "conv2d", "x", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "conv2d");
    STILL_OK();
    /* operand counts */
    p = def_xy("one-input-where", gx.id, gy.id);
    gg_program_def_op(p, "where", "x", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    p = def_xy("three-input-add", gx.id, gy.id);
    gg_program_def_op(p, "add", "x, x, x", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    p = def_xy("two-outputs", gx.id, gy.id);
    gg_program_def_scratch(p, "z", "f32", 2, s2);
    gg_program_def_op(p, "copy", "x", "y, z");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    /* unknown tensor */
    p = def_xy("unknown-tensor", gx.id, gy.id);
    gg_program_def_op(p, "add", "x, nope", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "nope");
    STILL_OK();
    /* scratch read before written */
    p = def_xy("scratch-first", gx.id, gy.id);
    gg_program_def_scratch(p, "s", "f32", 2, s2);
    gg_program_def_op(p, "add", "x, s", "y");
    gg_program_def_op(p, "copy", "x", "s");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "read before");
    STILL_OK();
    /* no nodes */
    p = def_xy("empty", gx.id, gy.id);
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    /* a name too long */
    char longname[100];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    p = def_xy(longname, gx.id, gy.id);
    gg_program_def_op(p, "copy", "x", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    /* buckets out of order */
    p = def_xy("buckets", gx.id, gy.id);
    gg_program_def_buckets(p, 2, (int[]){4, 2});
    gg_program_def_op(p, "copy", "x", "y");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();

    h_section("attributes");
    p = def_xy("unknown-attr", gx.id, gy.id);
    gg_program_def_op(p, "scale", "x", "y");
    gg_program_def_attr_f(p, "factor", 2.0);
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "factor");
    STILL_OK();
    tbuf wv;
    if (tbuf_new(A, &wv, 4)) {
        for (int k = 0; k < 2; k++) {
            p = def_xy(k ? "eps-negative" : "eps-zero", gx.id, gy.id);
            gg_program_def_tensor(p, "w", wv.id, 0, "f32", 1, (int64_t[]){4});
            gg_program_def_op(p, "rmsnorm", "x, w", "y");
            gg_program_def_attr_f(p, "eps", k ? -1e-5 : 0.0);
            CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
            CHECK_CONTAINS(gg_client_last_error(A), "eps");
            STILL_OK();
        }
        p = def_xy("eps-string", gx.id, gy.id);
        gg_program_def_tensor(p, "w", wv.id, 0, "f32", 1, (int64_t[]){4});
        gg_program_def_op(p, "rmsnorm", "x, w", "y");
        gg_program_def_attr_s(p, "eps", "small");
        CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
        STILL_OK();
    }
    tbuf_free(&wv);
    p = def_xy("gelu-foo", gx.id, gy.id);
    gg_program_def_op(p, "gelu", "x", "y");
    gg_program_def_attr_s(p, "approximate", "foo");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "approximate");
    STILL_OK();
    p = def_xy("gelu-number", gx.id, gy.id);
    gg_program_def_op(p, "gelu", "x", "y");
    gg_program_def_attr_f(p, "approximate", 1.0);
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    /* the good spellings are accepted */
    p = def_xy("gelu-tanh", gx.id, gy.id);
    gg_program_def_op(p, "gelu", "x", "y");
    gg_program_def_attr_s(p, "approximate", "tanh");
    uint64_t ok_id = 0;
    CHECK(define(A, p, &ok_id) == 0);
    CHECK(gg_client_program_release(A, ok_id) == 0);
    STILL_OK();

    h_section("overlapping tensors");
    tbuf one;
    if (tbuf_new(A, &one, 64)) {
        /* y starts one row into x: partial overlap */
        p = gg_program_def_new("partial");
        gg_program_def_buckets(p, 1, (int[]){4});
        gg_program_def_tensor(p, "x", one.id, 0, "f32", 2, s2);
        gg_program_def_tensor(p, "y", one.id, 16, "f32", 2, s2);
        gg_program_def_op(p, "scale", "x", "y");
        CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
        CHECK_CONTAINS(gg_client_last_error(A), "overlap");
        STILL_OK();
        /* exact alias: fine for an elementwise op ... */
        p = gg_program_def_new("in-place");
        gg_program_def_buckets(p, 1, (int[]){4});
        gg_program_def_tensor(p, "x", one.id, 0, "f32", 2, s2);
        gg_program_def_tensor(p, "y", one.id, 0, "f32", 2, s2);
        gg_program_def_op(p, "scale", "x", "y");
        gg_program_def_attr_f(p, "scale", 3.0);
        uint64_t ip = 0;
        if (CHECK(define(A, p, &ip) == 0)) {
            for (int i = 0; i < 16; i++)
                one.f[i] = (float)i;
            CHECK(gg_client_replay(A, ip, 4, -1, NULL) == 0);
            int bad = 0;
            for (int i = 0; i < 16; i++)
                bad += one.f[i] != 3.0f * (float)i;
            CHECK_EQ(bad, 0);
            CHECK(gg_client_program_release(A, ip) == 0);
        }
        /* ... not for one that reads other positions */
        p = gg_program_def_new("softmax-in-place");
        gg_program_def_buckets(p, 1, (int[]){4});
        gg_program_def_tensor(p, "x", one.id, 0, "f32", 2, s2);
        gg_program_def_tensor(p, "y", one.id, 0, "f32", 2, s2);
        gg_program_def_op(p, "softmax", "x", "y");
        CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
        STILL_OK();
    }
    tbuf_free(&one);

    h_section("duplicate tensor names");
    p = def_xy("dup", gx.id, gy.id);
    CHECK(gg_program_def_tensor(p, "x", gx.id, 0, "f32", 2, s2) < 0);   /* refused here */
    CHECK_CONTAINS(gg_program_def_error(p), "twice");
    CHECK_FAILS(define(A, p, NULL), A, "EINVAL");
    STILL_OK();
    /* the daemon refuses them too: a map with the key twice */
    mp m;
    mp_init(&m);
    msgpack_pack_map(&m.pk, 4);
    proto_pack_kv_str(&m.pk, "name", "raw-dup");
    proto_pack_key(&m.pk, "buckets");
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_int(&m.pk, 8);
    proto_pack_key(&m.pk, "tensors");
    msgpack_pack_map(&m.pk, 2);
    for (int t = 0; t < 2; t++) {
        proto_pack_key(&m.pk, "x");
        msgpack_pack_map(&m.pk, 3);
        proto_pack_kv_u64(&m.pk, "buffer", t ? gy.id : gx.id);
        proto_pack_kv_str(&m.pk, "dtype", "f32");
        proto_pack_key(&m.pk, "shape");
        msgpack_pack_array(&m.pk, 2);
        proto_pack_str(&m.pk, "batch");
        msgpack_pack_int(&m.pk, 4);
    }
    proto_pack_key(&m.pk, "nodes");
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_map(&m.pk, 3);
    proto_pack_kv_str(&m.pk, "op", "copy");
    proto_pack_key(&m.pk, "inputs");
    msgpack_pack_array(&m.pk, 1);
    proto_pack_str(&m.pk, "x");
    proto_pack_key(&m.pk, "outputs");
    msgpack_pack_array(&m.pk, 1);
    proto_pack_str(&m.pk, "x");
    CHECK_FAILS(raw_call(A, "program.define", &m), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "twice");
    STILL_OK();
    /* a big params map (many small values) goes through the raw call */
    mp_init(&m);
    msgpack_pack_map(&m.pk, 20000);
    for (int i = 0; i < 20000; i++) {
        msgpack_pack_int(&m.pk, i);   /* unknown (non-string) keys are refused */
        msgpack_pack_nil(&m.pk);
    }
    CHECK_FAILS(raw_call(A, "buffer.list", &m), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "keys must be strings");
    STILL_OK();
    /* define without params */
    const msgpack_object *r;
    CHECK_FAILS(gg_client_call(A, "program.define", NULL, 0, &r), A, "EINVAL");
    STILL_OK();
    tbuf_free(&small);
}

/* ---- replay ------------------------------------------------------------- */

static void test_replay_args(void)
{
    h_section("replay refusals");
    /* batch 0: the library refuses locally; the daemon too */
    CHECK_FAILS(gg_client_replay(A, gprog, 0, -1, NULL), A, "EINVAL");
    STILL_OK();
    mp m;
    mp_init(&m);
    msgpack_pack_map(&m.pk, 2);
    proto_pack_kv_u64(&m.pk, "program", gprog);
    proto_pack_kv_u64(&m.pk, "batch", 0);
    CHECK_FAILS(raw_call(A, "replay", &m), A, "EINVAL");
    STILL_OK();
    mp_init(&m);
    msgpack_pack_map(&m.pk, 2);
    proto_pack_kv_u64(&m.pk, "program", gprog);
    proto_pack_kv_i64(&m.pk, "batch", -3);
    CHECK_FAILS(raw_call(A, "replay", &m), A, "EINVAL");
    STILL_OK();
    mp_init(&m);
    msgpack_pack_map(&m.pk, 2);
    proto_pack_kv_u64(&m.pk, "program", gprog);
    proto_pack_kv_u64(&m.pk, "batch", 70000);   /* past limits.max_batch */
    CHECK_FAILS(raw_call(A, "replay", &m), A, "EINVAL");
    STILL_OK();
    mp_init(&m);
    msgpack_pack_map(&m.pk, 1);
    proto_pack_kv_u64(&m.pk, "program", gprog);
    CHECK_FAILS(raw_call(A, "replay", &m), A, "EINVAL");   /* batch missing */
    STILL_OK();
    /* past what the buffers hold (8 rows, largest bucket 8) */
    CHECK_FAILS(gg_client_replay(A, gprog, 9, -1, NULL), A, "ERANGE");
    STILL_OK();
    CHECK_FAILS(gg_client_replay(A, gprog, 2, 1, NULL), A, "EINVAL");   /* no branch 1 */
    STILL_OK();
    CHECK_FAILS(gg_client_replay(A, 987654321, 2, -1, NULL), A, "ENOENT");
    STILL_OK();

    /* a released program */
    uint64_t p2 = 0;
    gg_program_def *p = def_xy("to-release", gx.id, gy.id);
    gg_program_def_op(p, "copy", "x", "y");
    if (CHECK(define(A, p, &p2) == 0)) {
        CHECK(gg_client_replay(A, p2, 2, -1, NULL) == 0);
        CHECK(gg_client_program_release(A, p2) == 0);
        CHECK_FAILS(gg_client_replay(A, p2, 2, -1, NULL), A, "ENOENT");
        STILL_OK();
        CHECK_FAILS(gg_client_program_release(A, p2), A, "ENOENT");
        STILL_OK();
        CHECK_FAILS(gg_client_program_prepare(A, p2, 0, NULL, -1, NULL, NULL), A, "ENOENT");
        STILL_OK();
    }
}

/* ---- sessions ------------------------------------------------------------ */

static void test_sessions(void)
{
    h_section("another session's ids");
    /* B may not use A's buffer, program */
    CHECK_FAILS(define(B, def_xy("steal", gx.id, gy.id), NULL), B, "EACCES");
    CHECK_CONTAINS(gg_client_last_error(B), "another session");
    STILL_OK();
    CHECK_FAILS(gg_client_replay(B, gprog, 2, -1, NULL), B, "EACCES");
    STILL_OK();
    CHECK_FAILS(gg_client_buffer_release(B, gx.id), B, "EACCES");
    STILL_OK();
    CHECK_FAILS(gg_client_program_release(B, gprog), B, "EACCES");
    STILL_OK();
    CHECK_FAILS(gg_client_program_prepare(B, gprog, 0, NULL, -1, NULL, NULL), B, "EACCES");
    STILL_OK();
    /* B's own work is fine meanwhile */
    tbuf bx, by;
    if (tbuf_new(B, &bx, 32) && tbuf_new(B, &by, 32)) {
        gg_program_def *p = def_xy("b-own", bx.id, by.id);
        gg_program_def_op(p, "scale", "x", "y");
        gg_program_def_attr_f(p, "scale", -1.0);
        uint64_t bp = 0;
        if (CHECK(define(B, p, &bp) == 0)) {
            for (int i = 0; i < 32; i++)
                bx.f[i] = (float)i;
            CHECK(gg_client_replay(B, bp, 8, -1, NULL) == 0);
            CHECK(by.f[31] == -31.0f);
            CHECK_FAILS(gg_client_replay(A, bp, 2, -1, NULL), A, "EACCES");
            STILL_OK();
        }
    }
    tbuf_free(&bx);
    tbuf_free(&by);

    h_section("a buffer in use by a program");
    CHECK_FAILS(gg_client_buffer_release(A, gx.id), A, "EBUSY");
    CHECK_CONTAINS(gg_client_last_error(A), "release the programs first");
    STILL_OK();
    /* after the program goes, the buffer can go */
    tbuf t1, t2;
    if (tbuf_new(A, &t1, 32) && tbuf_new(A, &t2, 32)) {
        gg_program_def *p = def_xy("user", t1.id, t2.id);
        gg_program_def_op(p, "copy", "x", "y");
        uint64_t up = 0;
        if (CHECK(define(A, p, &up) == 0)) {
            CHECK_FAILS(gg_client_buffer_release(A, t1.id), A, "EBUSY");
            CHECK_FAILS(gg_client_buffer_release(A, t2.id), A, "EBUSY");
            CHECK(gg_client_program_release(A, up) == 0);
            CHECK(gg_client_buffer_release(A, t1.id) == 0);
            CHECK(gg_client_buffer_release(A, t2.id) == 0);
        }
        STILL_OK();
    }
    tbuf_free(&t1);
    tbuf_free(&t2);
    /* a failed define leaves no users behind */
    tbuf t3;
    if (tbuf_new(A, &t3, 32)) {
        gg_program_def *p = def_xy("fails", t3.id, gy.id);
        gg_program_def_op(p, "nope", "x", "y");
        CHECK(define(A, p, NULL) < 0);
        CHECK(gg_client_buffer_release(A, t3.id) == 0);
        STILL_OK();
    }
    tbuf_free(&t3);
}

/* ---- events and async replays (cpu backend: events are always complete) ---- */

static void test_events(void)
{
    h_section("events and async replays");
    uint64_t ev = 0, ev2 = 0, evb = 0;
    static const uint8_t handle[64] = {1, 2, 3};
    CHECK(gg_client_event_register(A, handle, sizeof handle, &ev) == 0 && ev > 0);
    CHECK(gg_client_event_register(A, handle, sizeof handle, &ev2) == 0 && ev2 != ev);
    CHECK(gg_client_event_register(B, handle, sizeof handle, &evb) == 0);
    gg_replay_opts o = {.wait_event = ev, .signal_event = ev2, .async = false};
    gg_replay_result res;
    for (int i = 0; i < 32; i++)
        gx.f[i] = (float)i;
    tbuf_fill(&gy, SENT);
    uint64_t n0 = 0, n1 = 0;
    double sum0 = 0, sum1 = 0;
    CHECK(t_session_replays(A, 0, &n0, &sum0));
    if (CHECK(gg_client_replay_ex(A, gprog, 3, -1, &o, &res) == 0)) {
        CHECK(gy.f[11] == 22.0f && res.path == GG_PATH_GRAPH);
        /* the device time answered is the one the daemon counted for it */
        CHECK(t_session_replays(A, n0 + 1, &n1, &sum1));
        CHECKF(n1 == n0 + 1 && fabs((sum1 - sum0) - res.device_us) < 0.01,
               "device_us %.1f is what the session's replay time in stats grew by (%.3f, %llu "
               "replays)", res.device_us, sum1 - sum0, (unsigned long long)(n1 - n0));
    }
    /* async: answered once enqueued */
    o.async = true;
    tbuf_fill(&gy, SENT);
    if (CHECK(gg_client_replay_ex(A, gprog, 3, -1, &o, &res) == 0))
        CHECK(res.device_us == 0.0);
    /* a later synchronous replay is ordered after it on the session's stream */
    CHECK(gg_client_replay(A, gprog, 3, -1, NULL) == 0);
    CHECK(gy.f[11] == 22.0f);
    /* unknown and foreign events */
    o = (gg_replay_opts){.wait_event = 987654321};
    CHECK_FAILS(gg_client_replay_ex(A, gprog, 3, -1, &o, NULL), A, "ENOENT");
    STILL_OK();
    o = (gg_replay_opts){.signal_event = evb};
    CHECK_FAILS(gg_client_replay_ex(A, gprog, 3, -1, &o, NULL), A, "EACCES");
    STILL_OK();
    CHECK_FAILS(gg_client_event_release(A, evb), A, "EACCES");
    STILL_OK();
    CHECK(gg_client_event_release(A, ev) == 0);
    CHECK_FAILS(gg_client_event_release(A, ev), A, "ENOENT");
    o = (gg_replay_opts){.wait_event = ev};
    CHECK_FAILS(gg_client_replay_ex(A, gprog, 3, -1, &o, NULL), A, "ENOENT");
    STILL_OK();
    CHECK(gg_client_event_release(A, ev2) == 0);
    CHECK(gg_client_event_release(B, evb) == 0);

    h_section("optional arguments given as nil");
    /* "An optional argument given as nil is treated as absent." */
    static const char *const opt[] = {"branch", "wait_event", "signal_event", "async"};
    for (int k = 0; k < 4; k++) {
        mp m;
        mp_init(&m);
        msgpack_pack_map(&m.pk, 3);
        proto_pack_kv_u64(&m.pk, "program", gprog);
        proto_pack_kv_u64(&m.pk, "batch", 2);
        proto_pack_key(&m.pk, opt[k]);
        msgpack_pack_nil(&m.pk);
        int rc = raw_call(A, "replay", &m);
        CHECKF(rc == 0, "replay with %s: nil succeeds (rc %d, %s: %s)", opt[k], rc,
               gg_client_last_error_code(A), gg_client_last_error(A));
        STILL_OK();
    }
}

/* ---- a shm object that shrinks after registration ------------------------- */

static void test_shrunk_shm(void)
{
    h_section("a registered shm object shrinks (SIGBUS guard)");
    tbuf sx, sy;
    memset(&sx, 0, sizeof sx);
    memset(&sy, 0, sizeof sy);
    if (!tbuf_new(A, &sx, 1024) || !tbuf_new(A, &sy, 1024)) {
        tbuf_free(&sx);
        tbuf_free(&sy);
        return;
    }
    gg_program_def *p = def_xy("shrinking", sx.id, sy.id);
    gg_program_def_op(p, "scale", "x", "y");
    gg_program_def_attr_f(p, "scale", 5.0);
    uint64_t sp = 0;
    if (CHECK(define(A, p, &sp) == 0)) {
        for (int i = 0; i < 32; i++)
            sx.f[i] = (float)i;
        gg_replay_result res;
        CHECK(gg_client_replay(A, sp, 8, -1, &res) == 0 && sy.f[31] == 155.0f);
        /* the object shrinks under the daemon's mapping */
        int fd = shm_open(sx.name, O_RDWR, 0);
        CHECK(fd >= 0 && ftruncate(fd, 0) == 0);
        for (int k = 0; k < 2; k++) {
            CHECK_FAILS(gg_client_replay(A, sp, 8, -1, &res), A, "EFAULT");
            CHECK_CONTAINS(gg_client_last_error(A), "SIGBUS");
            STILL_OK();
        }
        /* and grows back: the program works again (zeros in, zeros out) */
        CHECK(fd >= 0 && ftruncate(fd, (off_t)sx.size) == 0);
        if (fd >= 0)
            close(fd);
        for (int i = 0; i < 32; i++)
            sx.f[i] = (float)i;
        tbuf_fill(&sy, -1.0f);
        if (CHECK(gg_client_replay(A, sp, 8, -1, &res) == 0)) {
            CHECK(sy.f[31] == 155.0f && sy.f[1] == 5.0f);
            if (res.path != GG_PATH_GRAPH)
                h_note("after the fault the program runs %s (fallback %d): %s",
                       res.path == GG_PATH_EAGER ? "eager" : "graph", res.fallback, res.reason);
        }
        const msgpack_object *hr;
        if (CHECK(gg_client_call(A, "health", NULL, 0, &hr) == 0))
            CHECK(h_get(hr, "ok") && h_get(hr, "ok")->via.boolean);
        CHECK(gg_client_program_release(A, sp) == 0);
    }
    tbuf_free(&sx);
    tbuf_free(&sy);
}

/* ---- the connection ------------------------------------------------------ */

static void test_connection(void)
{
    h_section("connection errors");
    gg_client *c = gg_client_new();
    char dir[64], path[128];
    snprintf(dir, sizeof dir, "/tmp/ggtest.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/none.sock", dir);
    CHECK_FAILS(gg_client_connect(c, path, "x"), c, "ENOENT");
    CHECK_CONTAINS(gg_client_last_error(c), path);
    CHECK_CONTAINS(gg_client_last_error(c), "gfxgraphd --socket");
    CHECK(!gg_client_connected(c));
    CHECK_FAILS(gg_client_replay(c, 1, 1, -1, NULL), c, "ENOTCONN");
    rmdir(dir);

    /* a daemon with a small message limit: the library refuses big requests
     * itself and the connection stays */
    h_daemon d;
    const char *args[] = {"--set", "max-message-size=65536", NULL};
    if (h_daemon_start(&d, args, NULL) < 0) {
        gg_client_close(c);
        return;
    }
    CHECK(gg_client_connect(c, d.sock, "conn") == 0);
    CHECK_EQ(gg_client_max_message_size(c), 65536);
    CHECK_FAILS(gg_client_connect(c, d.sock, "again"), c, "EISCONN");
    CHECK(gg_client_connected(c));
    tbuf t;
    if (tbuf_new(c, &t, 64)) {
        gg_program_def *p = gg_program_def_new("huge");
        int64_t s[2] = {GG_BATCH, 4};
        gg_program_def_buckets(p, 1, (int[]){4});
        gg_program_def_tensor(p, "x", t.id, 0, "f32", 2, s);
        gg_program_def_tensor(p, "y", t.id, 128, "f32", 2, s);
        for (int i = 0; i < 3000; i++)   /* ~30 bytes a node: past 64 KiB */
            gg_program_def_op(p, "scale", "x", "y");
        CHECK_FAILS(define(c, p, NULL), c, "EMSGSIZE");
        CHECK_CONTAINS(gg_client_last_error(c), "65536");
        CHECK(gg_client_connected(c));
        const msgpack_object *r;
        CHECK(gg_client_call(c, "stats", NULL, 0, &r) == 0);
    }
    tbuf_free(&t);
    /* the daemon goes away: the next call says so, later ones are ENOTCONN */
    h_daemon_stop(&d);
    CHECK_FAILS(gg_client_replay(c, 1, 1, -1, NULL), c, "ECONNRESET");
    CHECK(!gg_client_connected(c));
    CHECK_FAILS(gg_client_replay(c, 1, 1, -1, NULL), c, "ENOTCONN");
    gg_client_close(c);
}

int main(void)
{
    h_init("test_client_errors", 600);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return h_finish();
    A = gg_client_new();
    B = gg_client_new();
    if (CHECK(gg_client_connect(A, d.sock, "errors-a") == 0) &&
        CHECK(gg_client_connect(B, d.sock, "errors-b") == 0) && tbuf_new(A, &gx, 32) &&
        tbuf_new(A, &gy, 32)) {
        gg_program_def *p = def_xy("good", gx.id, gy.id);
        gg_program_def_op(p, "scale", "x", "y");
        gg_program_def_attr_f(p, "scale", 2.0);
        if (CHECK(define(A, p, &gprog) == 0) && CHECK(good_replay())) {
            test_buffers();
            test_define();
            test_replay_args();
            test_sessions();
            test_shrunk_shm();
            test_events();
            /* errors were counted for the sessions that made them */
            const msgpack_object *st = t_stats(A);
            if (st)
                CHECK(h_getu(st, "errors") >= 40);
            const msgpack_object *hr;
            if (CHECK(gg_client_call(A, "health", NULL, 0, &hr) == 0))
                CHECK(h_get(hr, "ok") && h_get(hr, "ok")->via.boolean);
        }
    }
    tbuf_free(&gx);
    tbuf_free(&gy);
    gg_client_close(A);
    gg_client_close(B);
    h_daemon_stop(&d);
    test_connection();
    return h_finish();
}
