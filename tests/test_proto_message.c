/* SPDX-License-Identifier: MIT */
/* Unit tests of the message layer of the wire protocol (proto/): envelope
 * decode, the typed argument getters and the errno <-> wire code mapping.
 * The framing scanner: test_proto_frame.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proto.h"
#include "test_proto_util.h"

/* ---- envelope decode ----------------------------------------------------- */

typedef struct {
    int rc;
    bool idok;
    proto_msg m;
    char why[256];
    msgpack_unpacked up;
} decoded;

static void decode_bytes(decoded *d, const buf *b)
{
    msgpack_unpacked_init(&d->up);
    size_t off = 0;
    msgpack_unpack_return r = msgpack_unpack_next(&d->up, b->sb.data, b->sb.size, &off);
    d->why[0] = '\0';
    d->idok = true;
    if (r != MSGPACK_UNPACK_SUCCESS) {
        d->rc = -9999;
        return;
    }
    d->rc = proto_msg_decode(&d->up.data, &d->m, &d->idok, d->why, sizeof d->why);
}

static void test_decode(void)
{
    h_section("decode: good envelopes");
    buf b;
    decoded d;

    buf_init(&b);
    proto_pack_request_head(&b.pk, 42, "hello");
    msgpack_pack_array(&b.pk, 1);
    msgpack_pack_map(&b.pk, 1);
    proto_pack_kv_u64(&b.pk, "protocol", 1);
    decode_bytes(&d, &b);
    CHECK_EQ(d.rc, 0);
    CHECK(d.idok);
    CHECK_EQ(d.m.type, GG_MSG_REQUEST);
    CHECK_EQ(d.m.msgid, 42);
    CHECK(d.m.method_len == 5 && memcmp(d.m.method, "hello", 5) == 0);
    CHECK(d.m.params && d.m.params->type == MSGPACK_OBJECT_MAP &&
          h_getu(d.m.params, "protocol") == 1);
    msgpack_unpacked_destroy(&d.up);
    buf_free(&b);

    buf_init(&b);
    proto_pack_request_head(&b.pk, UINT32_MAX, "stats");
    msgpack_pack_array(&b.pk, 0);
    decode_bytes(&d, &b);
    CHECK_EQ(d.rc, 0);
    CHECK_EQ(d.m.msgid, UINT32_MAX);
    CHECK(d.m.params == NULL);
    msgpack_unpacked_destroy(&d.up);
    buf_free(&b);

    buf_init(&b);
    proto_pack_response_head(&b.pk, 9);
    msgpack_pack_map(&b.pk, 1);
    proto_pack_kv_bool(&b.pk, "ok", true);
    decode_bytes(&d, &b);
    CHECK_EQ(d.rc, 0);
    CHECK(d.idok);
    CHECK_EQ(d.m.type, GG_MSG_RESPONSE);
    CHECK_EQ(d.m.msgid, 9);
    CHECK(d.m.error == NULL);
    CHECK(d.m.result && d.m.result->type == MSGPACK_OBJECT_MAP);
    msgpack_unpacked_destroy(&d.up);
    buf_free(&b);

    buf_init(&b);
    proto_pack_error_response(&b.pk, 10, -ERANGE, "too far");
    decode_bytes(&d, &b);
    CHECK_EQ(d.rc, 0);
    CHECK(d.m.error != NULL);
    char code[32], msg[64];
    CHECK_STR(h_gets(d.m.error, "code", code, sizeof code), "ERANGE");
    CHECK_STR(h_gets(d.m.error, "message", msg, sizeof msg), "too far");
    CHECK(d.m.result && d.m.result->type == MSGPACK_OBJECT_NIL);
    msgpack_unpacked_destroy(&d.up);
    buf_free(&b);

    buf_init(&b);
    proto_pack_error_notify(&b.pk, -EMSGSIZE, "big");
    decode_bytes(&d, &b);
    CHECK_EQ(d.rc, 0);
    CHECK_EQ(d.m.type, GG_MSG_NOTIFY);
    CHECK(d.m.method_len == 5 && memcmp(d.m.method, "error", 5) == 0);
    CHECK_STR(h_gets(d.m.params, "code", code, sizeof code), "EMSGSIZE");
    msgpack_unpacked_destroy(&d.up);
    buf_free(&b);

    h_section("decode: bad envelopes");
    struct {
        const char *what;
        const char *bytes;
        size_t len;
        bool idok;
        uint32_t msgid;
    } bad[] = {
        {"not an array (int)", "\x2a", 1, false, 0},
        {"not an array (map)", "\x81\xa1k\x01", 4, false, 0},
        {"not an array (str)", "\xa3\x61\x62\x63", 4, false, 0},
        {"array of 2", "\x92\x00\x01", 3, false, 0},
        {"empty array", "\x90", 1, false, 0},
        {"type 3", "\x94\x03\x01\xa1m\x90", 6, false, 0},
        {"type -1", "\x94\xff\x01\xa1m\x90", 6, false, 0},
        {"type a string", "\x94\xa1\x30\x01\xa1m\x90", 7, false, 0},
        {"request of 5", "\x95\x00\x07\xa1m\x90\xc0", 7, true, 7},
        {"request of 3", "\x93\x00\x07\xa1m", 5, true, 7},
        {"msgid a string", "\x94\x00\xa1x\xa1m\x90", 7, false, 0},
        {"msgid negative", "\x94\x00\xff\xa1m\x90", 6, false, 0},
        {"msgid past 32 bits", "\x94\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xa1m\x90", 14, false,
         0},
        {"msgid a float", "\x94\x00\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\xa1m\x90", 14, false, 0},
        {"method an int", "\x94\x00\x08\x05\x90", 5, true, 8},
        {"method nil", "\x94\x00\x08\xc0\x90", 5, true, 8},
        {"params a map", "\x94\x00\x09\xa1m\x80", 6, true, 9},
        {"params nil", "\x94\x00\x09\xa1m\xc0", 6, true, 9},
        {"params [int]", "\x94\x00\x09\xa1m\x91\x05", 7, true, 9},
        {"params [map, map]", "\x94\x00\x09\xa1m\x92\x80\x80", 8, true, 9},
        {"params [[ ]]", "\x94\x00\x09\xa1m\x91\x90", 7, true, 9},
        {"notification of 4", "\x94\x02\xa1m\x90\xc0", 6, false, 0},
        {"notification method int", "\x93\x02\x01\x90", 4, false, 0},
        {"notification params int", "\x93\x02\xa1m\x01", 5, false, 0},
        {"response of 3", "\x93\x01\x01\xc0", 4, false, 0},
        {"response msgid a string", "\x94\x01\xa1x\xc0\x80", 6, false, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        buf_init(&b);
        buf_raw(&b, bad[i].bytes, bad[i].len);
        decode_bytes(&d, &b);
        CHECKF(d.rc == -EPROTO, "%s: decode gives %d, want -EPROTO", bad[i].what, d.rc);
        CHECKF(d.why[0] != '\0', "%s: a reason is given", bad[i].what);
        CHECKF(d.idok == bad[i].idok, "%s: msgid_ok is %d, want %d", bad[i].what, d.idok,
               bad[i].idok);
        if (bad[i].idok)
            CHECKF(d.m.msgid == bad[i].msgid, "%s: msgid %u, want %u", bad[i].what, d.m.msgid,
                   bad[i].msgid);
        msgpack_unpacked_destroy(&d.up);
        buf_free(&b);
    }
}

/* ---- argument getters ---------------------------------------------------- */

static void test_getters(void)
{
    h_section("getters");
    buf b;
    buf_init(&b);
    msgpack_pack_map(&b.pk, 14);
    proto_pack_kv_u64(&b.pk, "u", 300);
    proto_pack_kv_i64(&b.pk, "neg", -5);
    proto_pack_kv_str(&b.pk, "s", "text");
    proto_pack_kv_f64(&b.pk, "f", 0.5);
    proto_pack_key(&b.pk, "f32");
    msgpack_pack_float(&b.pk, 0.25f);
    proto_pack_key(&b.pk, "nan");
    msgpack_pack_double(&b.pk, NAN);
    proto_pack_key(&b.pk, "inf");
    msgpack_pack_double(&b.pk, INFINITY);
    proto_pack_kv_bool(&b.pk, "t", true);
    proto_pack_key(&b.pk, "nil");
    msgpack_pack_nil(&b.pk);
    proto_pack_key(&b.pk, "m");
    msgpack_pack_map(&b.pk, 0);
    proto_pack_key(&b.pk, "a");
    msgpack_pack_array(&b.pk, 2);
    msgpack_pack_int(&b.pk, 1);
    msgpack_pack_int(&b.pk, 2);
    proto_pack_key(&b.pk, "bin");
    msgpack_pack_bin(&b.pk, 3);
    msgpack_pack_bin_body(&b.pk, "\x01\x02\x03", 3);
    proto_pack_kv_u64(&b.pk, "big", UINT64_MAX);
    proto_pack_key(&b.pk, "longname_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    proto_pack_str(&b.pk, "0123456789");
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    CHECK(msgpack_unpack_next(&up, b.sb.data, b.sb.size, &off) == MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *m = &up.data;
    char em[256];
    proto_errbuf e = {em, sizeof em};
#define RESET() (em[0] = '\0')

    uint64_t u = 0;
    RESET();
    CHECK_EQ(proto_get_u64(m, "u", true, 1000, &u, &e), 0);
    CHECK_EQ(u, 300);
    CHECK_STR(em, "");
    RESET();
    CHECK_EQ(proto_get_u64(m, "u", true, 299, &u, &e), -EINVAL);
    CHECK_CONTAINS(em, "'u' is 300; the most allowed is 299");
    RESET();
    CHECK_EQ(proto_get_u64(m, "neg", true, 1000, &u, &e), -EINVAL);
    CHECK_CONTAINS(em, "'neg' must be a non-negative integer");
    RESET();
    CHECK_EQ(proto_get_u64(m, "missing", true, 1000, &u, &e), -EINVAL);
    CHECK_CONTAINS(em, "missing required argument 'missing'");
    RESET();
    CHECK_EQ(proto_get_u64(m, "missing", false, 1000, &u, &e), -ENOENT);
    CHECK_STR(em, "");
    RESET();
    CHECK_EQ(proto_get_u64(m, "nil", false, 1000, &u, &e), -ENOENT);
    RESET();
    CHECK_EQ(proto_get_u64(m, "nil", true, 1000, &u, &e), -EINVAL);
    RESET();
    CHECK_EQ(proto_get_u64(m, "s", true, 1000, &u, &e), -EINVAL);
    RESET();
    CHECK_EQ(proto_get_u64(m, "f", true, 1000, &u, &e), -EINVAL);
    RESET();
    CHECK_EQ(proto_get_u64(m, "big", true, UINT64_MAX, &u, &e), 0);
    CHECK(u == UINT64_MAX);

    int64_t i = 0;
    RESET();
    CHECK_EQ(proto_get_i64(m, "neg", true, &i, &e), 0);
    CHECK_EQ(i, -5);
    CHECK_EQ(proto_get_i64(m, "u", true, &i, &e), 0);
    CHECK_EQ(i, 300);
    RESET();
    CHECK_EQ(proto_get_i64(m, "big", true, &i, &e), -EINVAL);
    CHECK_CONTAINS(em, "'big' must be an integer");

    double f = 0;
    RESET();
    CHECK_EQ(proto_get_f64(m, "f", true, &f, &e), 0);
    CHECK(f == 0.5);
    CHECK_EQ(proto_get_f64(m, "f32", true, &f, &e), 0);
    CHECK(f == 0.25);
    CHECK_EQ(proto_get_f64(m, "neg", true, &f, &e), 0);
    CHECK(f == -5.0);
    CHECK_EQ(proto_get_f64(m, "u", true, &f, &e), 0);
    CHECK(f == 300.0);
    RESET();
    CHECK_EQ(proto_get_f64(m, "nan", true, &f, &e), -EINVAL);
    CHECK_CONTAINS(em, "'nan' must be a finite number");
    RESET();
    CHECK_EQ(proto_get_f64(m, "inf", true, &f, &e), -EINVAL);
    RESET();
    CHECK_EQ(proto_get_f64(m, "s", true, &f, &e), -EINVAL);

    const char *s = NULL;
    size_t sl = 0;
    RESET();
    CHECK_EQ(proto_get_str(m, "s", true, &s, &sl, &e), 0);
    CHECK(sl == 4 && memcmp(s, "text", 4) == 0);
    CHECK_EQ(proto_get_str(m, "s", true, &s, NULL, &e), 0);
    RESET();
    CHECK_EQ(proto_get_str(m, "u", true, &s, &sl, &e), -EINVAL);
    CHECK_CONTAINS(em, "'u' must be a string");

    bool t = false;
    RESET();
    CHECK_EQ(proto_get_bool(m, "t", true, &t, &e), 0);
    CHECK(t);
    RESET();
    CHECK_EQ(proto_get_bool(m, "u", true, &t, &e), -EINVAL);
    CHECK_CONTAINS(em, "'u' must be true or false");

    const msgpack_object *o = NULL;
    RESET();
    CHECK_EQ(proto_get_map(m, "m", true, &o, &e), 0);
    CHECK(o && o->type == MSGPACK_OBJECT_MAP);
    RESET();
    CHECK_EQ(proto_get_map(m, "a", true, &o, &e), -EINVAL);
    CHECK_CONTAINS(em, "'a' must be a map");
    RESET();
    CHECK_EQ(proto_get_array(m, "a", true, &o, &e), 0);
    CHECK(o && o->via.array.size == 2);
    RESET();
    CHECK_EQ(proto_get_array(m, "m", true, &o, &e), -EINVAL);
    CHECK_CONTAINS(em, "'m' must be an array");

    const void *p = NULL;
    size_t pl = 0;
    RESET();
    CHECK_EQ(proto_get_bin(m, "bin", true, &p, &pl, &e), 0);
    CHECK(pl == 3 && memcmp(p, "\x01\x02\x03", 3) == 0);
    CHECK_EQ(proto_get_bin(m, "s", true, &p, &pl, &e), 0);
    CHECK(pl == 4);
    RESET();
    CHECK_EQ(proto_get_bin(m, "u", true, &p, &pl, &e), -EINVAL);
    CHECK_CONTAINS(em, "'u' must be bytes");

    /* the first error wins */
    RESET();
    proto_get_u64(m, "missing", true, 10, &u, &e);
    proto_get_str(m, "u", true, &s, &sl, &e);
    CHECK_CONTAINS(em, "missing required argument 'missing'");
    CHECK_EQ(proto_fail(&e, -ERANGE, "later %d", 1), -ERANGE);
    CHECK(strstr(em, "later") == NULL);
    /* no buffer: still the code */
    CHECK_EQ(proto_fail(NULL, -EBUSY, "x"), -EBUSY);
    CHECK_EQ(proto_get_u64(m, "missing", true, 1, &u, NULL), -EINVAL);

    /* lookups on things that are not maps */
    CHECK(proto_map_get(NULL, "u") == NULL);
    CHECK(proto_map_get(h_get(m, "a"), "u") == NULL);
    CHECK(proto_str_eq(h_get(m, "s"), "text"));
    CHECK(!proto_str_eq(h_get(m, "s"), "tex"));
    CHECK(!proto_str_eq(h_get(m, "u"), "300"));

    char small[8];
    CHECK_EQ(proto_strdup_obj(h_get(m, "s"), small, sizeof small), 0);
    CHECK_STR(small, "text");
    CHECK_EQ(proto_strdup_obj(h_get(m, "s"), small, 4), -EINVAL);   /* 4 + NUL */
    CHECK_EQ(proto_strdup_obj(h_get(m, "s"), small, 5), 0);
    CHECK_EQ(proto_strdup_obj(h_get(m, "u"), small, sizeof small), -EINVAL);
    const msgpack_object *lk = NULL;
    for (uint32_t k = 0; k < m->via.map.size; k++)
        if (m->via.map.ptr[k].key.via.str.size > 40)
            lk = &m->via.map.ptr[k].key;
    CHECK(lk && proto_strdup_obj(lk, small, sizeof small) == -EINVAL);

    uint64_t ou;
    int64_t oi;
    double of;
    CHECK(!proto_obj_u64(h_get(m, "neg"), &ou));
    CHECK(proto_obj_i64(h_get(m, "neg"), &oi) && oi == -5);
    CHECK(!proto_obj_i64(h_get(m, "big"), &oi));
    CHECK(proto_obj_f64(h_get(m, "big"), &of) && of > 1.8e19);
    CHECK(!proto_obj_f64(h_get(m, "t"), &of));
#undef RESET
    msgpack_unpacked_destroy(&up);
    buf_free(&b);
}

/* ---- error codes --------------------------------------------------------- */

static void test_errno_codes(void)
{
    h_section("errno codes");
    static const int errs[] = {EINVAL, EPROTO, ENOENT, EACCES, EPERM, EMSGSIZE, EBUSY,
                               ENOMEM, EIO, ENOSYS, ERANGE, EAGAIN, EEXIST, ENODEV, ESHUTDOWN,
                               ECONNREFUSED, ENOTCONN, ETIMEDOUT, ECANCELED, E2BIG, ENOSPC,
                               EFAULT, ENOTSUP};
    int bad = 0;
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        const char *c = proto_errno_code(-errs[i]);
        if (proto_errno_from_code(c, strlen(c)) != -errs[i]) {
            bad++;
            printf("   %d -> %s -> %d\n", errs[i], c, proto_errno_from_code(c, strlen(c)));
        }
        if (strcmp(proto_errno_code(errs[i]), c) != 0)
            bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_STR(proto_errno_code(-EINVAL), "EINVAL");
    CHECK_STR(proto_errno_code(-ERANGE), "ERANGE");
    CHECK_STR(proto_errno_code(-EACCES), "EACCES");
    CHECK_STR(proto_errno_code(-EXDEV), "EIO");       /* not a wire code */
    CHECK_STR(proto_errno_code(0), "EIO");
    CHECK_EQ(proto_errno_from_code("EBUSY", 5), -EBUSY);
    CHECK_EQ(proto_errno_from_code("EBUSYX", 6), -EIO);
    CHECK_EQ(proto_errno_from_code("EBUS", 4), -EIO);
    CHECK_EQ(proto_errno_from_code("EINVALxx", 6), -EINVAL);   /* length decides */
    CHECK_EQ(proto_errno_from_code("", 0), -EIO);
}

int main(void)
{
    h_init("test_proto_message", 300);
    test_decode();
    test_getters();
    test_errno_codes();
    return h_finish();
}
