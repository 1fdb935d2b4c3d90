/* SPDX-License-Identifier: MIT */
/* The plain-form scanners of the replay request and answer
 * (proto_replay_req_scan, proto_replay_ans_scan) against msgpack-c on
 * random messages: every encoding of every value, keys in any order,
 * missing, nil, repeated and unknown keys, other types, and every prefix
 * of each message.  Whenever a scanner accepts a message, its length and
 * every field must be what msgpack-c decodes; it may refuse (the general
 * path then takes the message), but never ask for more bytes of a whole
 * message, and never accept a prefix. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proto.h"
#include "test_proto_util.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static unsigned pick(unsigned n)
{
    return (unsigned)(rnd() % n);
}

/* A non-negative integer in one of its encodings, chosen at random: the
 * smallest form, a wider unsigned form, or a signed form. */
static void pack_uint_any(msgpack_packer *pk, uint64_t v)
{
    unsigned form = pick(6);
    if (form == 1)
        msgpack_pack_fix_uint64(pk, v);
    else if (form == 2 && v <= UINT32_MAX)
        msgpack_pack_fix_uint32(pk, (uint32_t)v);
    else if (form == 3 && v <= UINT16_MAX)
        msgpack_pack_fix_uint16(pk, (uint16_t)v);
    else if (form == 4 && v <= INT32_MAX)
        msgpack_pack_fix_int32(pk, (int32_t)v);
    else if (form == 5 && v <= INT64_MAX)
        msgpack_pack_fix_int64(pk, (int64_t)v);
    else
        msgpack_pack_uint64(pk, v);   /* the smallest form */
}

static uint64_t rnd_value(void)
{
    switch (pick(5)) {
    case 0: return rnd() % 128;
    case 1: return rnd() % 256;
    case 2: return rnd() % 65536;
    case 3: return rnd() % 4294967296ull;
    default: return rnd();
    }
}

/* Some other value for a key: nil, a negative number, a float, a string,
 * a bool, an array. */
static void pack_other(msgpack_packer *pk)
{
    switch (pick(6)) {
    case 0: msgpack_pack_nil(pk); break;
    case 1: msgpack_pack_int64(pk, -(int64_t)(rnd() % 1000) - 1); break;
    case 2: msgpack_pack_double(pk, 3.5); break;
    case 3: msgpack_pack_str(pk, 2); msgpack_pack_str_body(pk, "ab", 2); break;
    case 4: if (pick(2)) msgpack_pack_true(pk); else msgpack_pack_false(pk); break;
    default: msgpack_pack_array(pk, 1); msgpack_pack_uint8(pk, 1); break;
    }
}

static void pack_key(msgpack_packer *pk, const char *k)
{
    size_t n = strlen(k);
    if (pick(8) == 0) {   /* str8 form of a short key */
        uint8_t h[2] = {0xd9, (uint8_t)n};
        msgpack_sbuffer_write((msgpack_sbuffer *)pk->data, (const char *)h, 2);
        msgpack_sbuffer_write((msgpack_sbuffer *)pk->data, k, n);
        return;
    }
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, k, n);
}

static const char *const req_keys[] = {"program", "batch", "branch", "wait_event",
                                       "signal_event", "async"};

static void build_request(buf *b)
{
    msgpack_packer *pk = &b->pk;
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, 0);
    pack_uint_any(pk, pick(4) ? rnd() % 100000 : rnd_value());
    if (pick(20) == 0) {
        msgpack_pack_str(pk, 6);
        msgpack_pack_str_body(pk, pick(2) ? "replaz" : "buffer", 6);
    } else {
        msgpack_pack_str(pk, 6);
        msgpack_pack_str_body(pk, "replay", 6);
    }
    msgpack_pack_array(pk, 1);
    unsigned n = pick(8);
    msgpack_pack_map(pk, n);
    for (unsigned i = 0; i < n; i++) {
        unsigned k = pick(7);
        if (k == 6) {                       /* an unknown key */
            pack_key(pk, pick(2) ? "bach" : "asynch");
            msgpack_pack_uint8(pk, 1);
            continue;
        }
        pack_key(pk, req_keys[k]);
        if (k == 5) {
            if (pick(4)) {
                if (pick(2))
                    msgpack_pack_true(pk);
                else
                    msgpack_pack_false(pk);
            } else {
                pack_other(pk);
            }
        } else if (pick(5)) {
            pack_uint_any(pk, rnd_value());
        } else {
            pack_other(pk);
        }
    }
}

static const msgpack_object *map_get(const msgpack_object *map, const char *key, int *count)
{
    const msgpack_object *v = NULL;
    *count = 0;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
            memcmp(k->via.str.ptr, key, k->via.str.size) == 0) {
            v = &map->via.map.ptr[i].val;
            ++*count;
        }
    }
    return v;
}

/* Check a scanner's verdict on a whole message and on each of its prefixes. */
static bool check_prefixes(const uint8_t *data, size_t len, long full,
                           long (*scan)(const uint8_t *, size_t, void *), void *out)
{
    bool ok = true;
    for (size_t k = 0; k < len; k++) {
        long r = scan(data, k, out);
        if (r > 0 || (full > 0 && r != 0)) {
            ok = CHECKF(false, "a prefix of %zu of %zu bytes scans as %ld (the whole: %ld)", k,
                        len, r, full);
            break;
        }
    }
    return ok;
}

static long scan_req(const uint8_t *b, size_t n, void *out)
{
    return proto_replay_req_scan(b, n, out);
}

static long scan_ans(const uint8_t *b, size_t n, void *out)
{
    return proto_replay_ans_scan(b, n, out);
}

static void test_requests(int rounds)
{
    h_section("replay requests");
    int accepted = 0, refused = 0;
    for (int i = 0; i < rounds; i++) {
        buf b;
        buf_init(&b);
        build_request(&b);
        const uint8_t *data = (const uint8_t *)b.sb.data;
        size_t len = b.sb.size;
        proto_replay_req q;
        long r = proto_replay_req_scan(data, len, &q);
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        bool unpacked = msgpack_unpack_next(&up, b.sb.data, len, &off) == MSGPACK_UNPACK_SUCCESS;
        if (!CHECKF(unpacked && off == len, "msgpack-c reads the built message"))
            goto next;
        if (!CHECKF(r != 0, "a whole message never asks for more bytes (round %d)", i))
            goto next;
        if (r < 0) {
            refused++;
            check_prefixes(data, len, r, scan_req, &q);
            goto next;
        }
        accepted++;
        CHECK_EQ((size_t)r, len);
        const msgpack_object *o = &up.data;
        CHECK(o->via.array.ptr[2].via.str.size == 6 &&
              memcmp(o->via.array.ptr[2].via.str.ptr, "replay", 6) == 0);
        CHECK_EQ(q.msgid, o->via.array.ptr[1].via.u64);
        const msgpack_object *map = &o->via.array.ptr[3].via.array.ptr[0];
        int known = 0;
        for (int k = 0; k < 6; k++) {
            int count;
            const msgpack_object *v = map_get(map, req_keys[k], &count);
            known += count;
            CHECKF(count <= 1, "key %s once at most in an accepted request", req_keys[k]);
            bool present = v && v->type != MSGPACK_OBJECT_NIL;
            CHECKF(((q.has >> k) & 1) == present, "key %s: present %d, scanned %u", req_keys[k],
                   present, (q.has >> k) & 1);
            if (!present)
                continue;
            if (k == 5) {
                CHECK(v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean == q.async);
            } else {
                const uint64_t *got[] = {&q.program, &q.batch, &q.branch, &q.wait_event,
                                         &q.signal_event};
                CHECKF(v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 == *got[k],
                       "key %s: %llu scanned", req_keys[k], (unsigned long long)*got[k]);
            }
        }
        CHECKF(known == (int)map->via.map.size, "an accepted request has only known keys");
        check_prefixes(data, len, r, scan_req, &q);
    next:
        msgpack_unpacked_destroy(&up);
        buf_free(&b);
    }
    h_note("%d accepted, %d left to the general path", accepted, refused);
    CHECK(accepted > rounds / 20 && refused > rounds / 20);
}

static const char *const ans_keys[] = {"path", "bucket", "batch", "branch", "fallback",
                                       "captured", "async", "device_us"};

/* An answer as the daemon packs it (every key once, in order), in half the
 * rounds: most of these must be accepted. */
static void build_plain_answer(buf *b)
{
    msgpack_packer *pk = &b->pk;
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, 1);
    msgpack_pack_uint64(pk, rnd() % 100000);
    msgpack_pack_nil(pk);
    msgpack_pack_map(pk, 8);
    pack_key(pk, "path");
    const char *p = pick(2) ? "graph" : "eager";
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, p, 5);
    for (int k = 1; k <= 3; k++) {
        pack_key(pk, ans_keys[k]);
        msgpack_pack_int64(pk, (int64_t)(rnd() % 70000));
    }
    for (int k = 4; k <= 6; k++) {
        pack_key(pk, ans_keys[k]);
        pick(2) ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    }
    pack_key(pk, "device_us");
    msgpack_pack_double(pk, (double)(rnd() % 100000) / 7.0);
}

static void build_answer(buf *b)
{
    msgpack_packer *pk = &b->pk;
    if (pick(2)) {
        build_plain_answer(b);
        return;
    }
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, 1);
    pack_uint_any(pk, rnd() % 100000);
    if (pick(20) == 0)
        msgpack_pack_true(pk);          /* an error slot that is not nil */
    else
        msgpack_pack_nil(pk);
    unsigned n = pick(11);
    msgpack_pack_map(pk, n);
    for (unsigned i = 0; i < n; i++) {
        unsigned k = pick(9);
        if (k == 8) {
            pack_key(pk, "reason");
            msgpack_pack_str(pk, 3);
            msgpack_pack_str_body(pk, "why", 3);
            continue;
        }
        pack_key(pk, ans_keys[k]);
        if (k == 0) {
            const char *p = pick(2) ? "graph" : pick(4) ? "eager" : "other";
            msgpack_pack_str(pk, strlen(p));
            msgpack_pack_str_body(pk, p, strlen(p));
        } else if (k <= 3) {
            if (pick(3))
                pack_uint_any(pk, rnd_value() >> pick(64));
            else if (pick(2))
                msgpack_pack_int64(pk, -(int64_t)(rnd() % 70000));
            else
                pack_other(pk);
        } else if (k <= 6) {
            if (pick(4))
                pick(2) ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
            else
                pack_other(pk);
        } else {
            switch (pick(4)) {
            case 0: msgpack_pack_float(pk, 1.25f); break;
            case 1: msgpack_pack_uint8(pk, 7); break;
            default: msgpack_pack_double(pk, (double)(rnd() % 100000) / 7.0); break;
            }
        }
    }
}

static void test_answers(int rounds)
{
    h_section("replay answers");
    int accepted = 0, refused = 0;
    for (int i = 0; i < rounds; i++) {
        buf b;
        buf_init(&b);
        build_answer(&b);
        const uint8_t *data = (const uint8_t *)b.sb.data;
        size_t len = b.sb.size;
        proto_replay_ans a;
        long r = proto_replay_ans_scan(data, len, &a);
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        bool unpacked = msgpack_unpack_next(&up, b.sb.data, len, &off) == MSGPACK_UNPACK_SUCCESS;
        if (!CHECKF(unpacked && off == len, "msgpack-c reads the built answer"))
            goto next;
        if (!CHECKF(r != 0, "a whole answer never asks for more bytes (round %d)", i))
            goto next;
        if (r < 0) {
            refused++;
            check_prefixes(data, len, r, scan_ans, &a);
            goto next;
        }
        accepted++;
        CHECK_EQ((size_t)r, len);
        const msgpack_object *o = &up.data;
        CHECK(o->via.array.ptr[2].type == MSGPACK_OBJECT_NIL);
        CHECK_EQ(a.msgid, o->via.array.ptr[1].via.u64);
        const msgpack_object *map = &o->via.array.ptr[3];
        int count, known = 0;
        const msgpack_object *v = map_get(map, "path", &count);
        known += count;
        CHECK(count == 1 && v->type == MSGPACK_OBJECT_STR);
        if (v && v->type == MSGPACK_OBJECT_STR)
            CHECK(a.graph == (v->via.str.size == 5 && memcmp(v->via.str.ptr, "graph", 5) == 0));
        const bool *has[] = {NULL, &a.has_bucket, &a.has_batch, &a.has_branch};
        const int64_t *ival[] = {NULL, &a.bucket, &a.batch, &a.branch};
        for (int k = 1; k <= 3; k++) {
            v = map_get(map, ans_keys[k], &count);
            known += count;
            CHECK(count <= 1);
            CHECKF(*has[k] == (v != NULL), "%s present", ans_keys[k]);
            if (!v)
                continue;
            int64_t want = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)v->via.u64
                                                                      : v->via.i64;
            CHECKF((v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
                    v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) && want == *ival[k],
                   "%s: %lld scanned", ans_keys[k], (long long)*ival[k]);
        }
        const bool *bval[] = {&a.fallback, &a.captured, &a.async};
        for (int k = 4; k <= 6; k++) {
            v = map_get(map, ans_keys[k], &count);
            known += count;
            CHECK(count <= 1);
            bool want = v && v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
            CHECKF(!v || v->type == MSGPACK_OBJECT_BOOLEAN, "%s is a bool", ans_keys[k]);
            CHECKF(*bval[k - 4] == want, "%s: %d scanned", ans_keys[k], *bval[k - 4]);
        }
        v = map_get(map, "device_us", &count);
        known += count;
        CHECK(count <= 1);
        CHECK(a.has_device_us == (v != NULL));
        if (v)
            CHECK(v->type == MSGPACK_OBJECT_FLOAT64 && v->via.f64 == a.device_us);
        CHECKF(known == (int)map->via.map.size, "an accepted answer has only known keys");
        check_prefixes(data, len, r, scan_ans, &a);
    next:
        msgpack_unpacked_destroy(&up);
        buf_free(&b);
    }
    h_note("%d accepted, %d left to the general path", accepted, refused);
    CHECK(accepted > rounds / 20 && refused > rounds / 20);
}

/* Other messages are "not that form" (-1) as soon as a byte says so, never
 * a length: a notification, a response where a request is scanned and the
 * other way round, another method cut short. */
static void test_other_forms(void)
{
    h_section("other forms: -1 from the first byte that differs");
    static const uint8_t notify[] = {0x93, 0x02, 0xa5, 'e', 'r', 'r', 'o', 'r', 0x90};
    static const uint8_t resp[] = {0x94, 0x01, 0x07, 0xc0, 0x80};
    static const uint8_t req[] = {0x94, 0x00, 0x07, 0xa5, 's', 't', 'a'};
    proto_replay_req q;
    proto_replay_ans a;
    for (size_t n = 1; n <= sizeof notify; n++) {
        CHECKF(proto_replay_req_scan(notify, n, &q) == -1, "notification, %zu bytes: request", n);
        CHECKF(proto_replay_ans_scan(notify, n, &a) == -1, "notification, %zu bytes: answer", n);
    }
    for (size_t n = 2; n <= sizeof resp; n++)
        CHECKF(proto_replay_req_scan(resp, n, &q) == -1, "a response, %zu bytes: request", n);
    for (size_t n = 2; n <= sizeof req; n++)
        CHECKF(proto_replay_ans_scan(req, n, &a) == -1, "a request, %zu bytes: answer", n);
    for (size_t n = 4; n <= sizeof req; n++)
        CHECKF(proto_replay_req_scan(req, n, &q) == -1, "method 'sta...', %zu bytes", n);
    CHECK_EQ(proto_replay_req_scan(req, 3, &q), 0);      /* the method not begun: more */
    CHECK_EQ(proto_replay_req_scan(resp, 1, &q), 0);     /* only the array header */
}

int main(int argc, char **argv)
{
    h_init("test_proto_scan", 300);
    int rounds = argc > 1 ? atoi(argv[1]) : 20000;
    if (argc > 2)
        rng_state = strtoull(argv[2], NULL, 0) | 1;
    h_note("%d rounds each, seed 0x%llx", rounds, (unsigned long long)rng_state);
    test_requests(rounds);
    test_answers(rounds);
    test_other_forms();
    return h_finish();
}
