/* SPDX-License-Identifier: MIT */
/* Unit tests of the framing scanner (proto/frame.c): every MessagePack
 * type, split and concatenated input, the size, count and depth limits, and
 * a deterministic random-garbage driver (fixed seeds) checking the scanner
 * against msgpack_unpack_next.  Envelope decode, argument getters and error
 * codes: test_proto_message.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proto.h"
#include "test_proto_util.h"
#include "fuzz/proto_invariants.h"

/* ---- helpers ------------------------------------------------------------- */

static long scan_once(const void *p, size_t n, size_t max)
{
    proto_frame f;
    proto_frame_init(&f, max);
    return proto_frame_scan(&f, p, n);
}

/* msgpack's own idea of the first value's length; -1 when it does not unpack. */
static long unpack_len(const void *p, size_t n)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    msgpack_unpack_return r = msgpack_unpack_next(&up, p, n, &off);
    msgpack_unpacked_destroy(&up);
    return r == MSGPACK_UNPACK_SUCCESS ? (long)off : -1;
}

/* A value alone, then the same value with trailing bytes: the scanner must
 * stop exactly at its end, agreeing with msgpack. */
static void check_value(const char *what, const buf *b, uint8_t first)
{
    const uint8_t *p = (const uint8_t *)b->sb.data;
    size_t n = b->sb.size;
    CHECKF(n > 0 && p[0] == first, "%s: encoded with first byte 0x%02x (got 0x%02x)", what,
           first, n ? p[0] : 0);
    long r = scan_once(p, n, 1u << 24);
    CHECKF(r == (long)n, "%s: scan gives %ld, want %zu", what, r, n);
    CHECKF(unpack_len(p, n) == (long)n, "%s: msgpack agrees on %zu bytes", what, n);
    uint8_t *q = malloc(n + 3);
    memcpy(q, p, n);
    q[n] = 0x01;
    q[n + 1] = 0xc1;   /* garbage after the value must not be looked at */
    q[n + 2] = 0xdb;
    r = scan_once(q, n + 3, 1u << 24);
    CHECKF(r == (long)n, "%s + trailing bytes: scan gives %ld, want %zu", what, r, n);
    /* every strict prefix is incomplete */
    bool all_zero = true;
    for (size_t k = 0; k < n; k += (n > 600 ? 97 : 1))
        if (scan_once(p, k, 1u << 24) != 0)
            all_zero = false;
    CHECKF(all_zero, "%s: every strict prefix scans as incomplete", what);
    free(q);
}

/* ---- scanner: every type ------------------------------------------------- */

static void test_scan_types(void)
{
    h_section("scan: every type");
    buf b;
    char big[70000];
    memset(big, 'x', sizeof big);

#define ONE(name, first, stmt)                                                                 \
    do {                                                                                       \
        buf_init(&b);                                                                          \
        stmt;                                                                                  \
        check_value(name, &b, first);                                                          \
        buf_free(&b);                                                                          \
    } while (0)

    ONE("positive fixint", 0x05, msgpack_pack_uint8(&b.pk, 5));
    ONE("negative fixint", 0xff, msgpack_pack_int8(&b.pk, -1));
    ONE("nil", 0xc0, msgpack_pack_nil(&b.pk));
    ONE("false", 0xc2, msgpack_pack_false(&b.pk));
    ONE("true", 0xc3, msgpack_pack_true(&b.pk));
    ONE("uint8", 0xcc, msgpack_pack_uint8(&b.pk, 200));
    ONE("uint16", 0xcd, msgpack_pack_uint16(&b.pk, 60000));
    ONE("uint32", 0xce, msgpack_pack_uint32(&b.pk, 4000000000u));
    ONE("uint64", 0xcf, msgpack_pack_uint64(&b.pk, 1ull << 40));
    ONE("int8", 0xd0, msgpack_pack_int8(&b.pk, -100));
    ONE("int16", 0xd1, msgpack_pack_int16(&b.pk, -30000));
    ONE("int32", 0xd2, msgpack_pack_int32(&b.pk, -2000000000));
    ONE("int64", 0xd3, msgpack_pack_int64(&b.pk, -(1ll << 40)));
    ONE("float32", 0xca, msgpack_pack_float(&b.pk, 1.5f));
    ONE("float64", 0xcb, msgpack_pack_double(&b.pk, -2.25));
    ONE("fixstr", 0xa3, proto_pack_str(&b.pk, "abc"));
    ONE("empty fixstr", 0xa0, proto_pack_str(&b.pk, ""));
    ONE("str8", 0xd9, proto_pack_strn(&b.pk, big, 40));
    ONE("str16", 0xda, proto_pack_strn(&b.pk, big, 300));
    ONE("str32", 0xdb, proto_pack_strn(&b.pk, big, 70000));
    ONE("bin8", 0xc4, (msgpack_pack_bin(&b.pk, 10), msgpack_pack_bin_body(&b.pk, big, 10)));
    ONE("bin16", 0xc5, (msgpack_pack_bin(&b.pk, 1000), msgpack_pack_bin_body(&b.pk, big, 1000)));
    ONE("bin32", 0xc6,
        (msgpack_pack_bin(&b.pk, 66000), msgpack_pack_bin_body(&b.pk, big, 66000)));
    ONE("fixext1", 0xd4, (msgpack_pack_ext(&b.pk, 1, 7), msgpack_pack_ext_body(&b.pk, big, 1)));
    ONE("fixext2", 0xd5, (msgpack_pack_ext(&b.pk, 2, 7), msgpack_pack_ext_body(&b.pk, big, 2)));
    ONE("fixext4", 0xd6, (msgpack_pack_ext(&b.pk, 4, 7), msgpack_pack_ext_body(&b.pk, big, 4)));
    ONE("fixext8", 0xd7, (msgpack_pack_ext(&b.pk, 8, 7), msgpack_pack_ext_body(&b.pk, big, 8)));
    ONE("fixext16", 0xd8,
        (msgpack_pack_ext(&b.pk, 16, 7), msgpack_pack_ext_body(&b.pk, big, 16)));
    ONE("ext8", 0xc7, (msgpack_pack_ext(&b.pk, 3, -2), msgpack_pack_ext_body(&b.pk, big, 3)));
    ONE("ext16", 0xc8,
        (msgpack_pack_ext(&b.pk, 300, 1), msgpack_pack_ext_body(&b.pk, big, 300)));
    ONE("ext32", 0xc9,
        (msgpack_pack_ext(&b.pk, 66000, 1), msgpack_pack_ext_body(&b.pk, big, 66000)));
    ONE("empty fixarray", 0x90, msgpack_pack_array(&b.pk, 0));
    ONE("fixarray", 0x93,
        (msgpack_pack_array(&b.pk, 3), msgpack_pack_int(&b.pk, 1), msgpack_pack_nil(&b.pk),
         proto_pack_str(&b.pk, "z")));
    ONE("empty fixmap", 0x80, msgpack_pack_map(&b.pk, 0));
    ONE("fixmap", 0x82,
        (msgpack_pack_map(&b.pk, 2), proto_pack_kv_u64(&b.pk, "a", 1),
         proto_pack_kv_str(&b.pk, "b", "c")));
    ONE("array16", 0xdc, ({
            msgpack_pack_array(&b.pk, 20);
            for (int i = 0; i < 20; i++)
                msgpack_pack_int(&b.pk, i * 1000);
        }));
    ONE("map16", 0xde, ({
            msgpack_pack_map(&b.pk, 17);
            for (int i = 0; i < 17; i++) {
                msgpack_pack_int(&b.pk, i);
                msgpack_pack_double(&b.pk, i * 0.5);
            }
        }));
    /* 32-bit counts are never chosen by the packer for small sizes: by hand */
    ONE("array32", 0xdd, buf_raw(&b, "\xdd\x00\x00\x00\x03\x01\xc0\xa1q", 9));
    ONE("map32", 0xdf, buf_raw(&b, "\xdf\x00\x00\x00\x01\xa1k\x92\x01\x02", 10));
    ONE("nested", 0x83, ({
            msgpack_pack_map(&b.pk, 3);
            proto_pack_key(&b.pk, "list");
            msgpack_pack_array(&b.pk, 3);
            msgpack_pack_map(&b.pk, 1);
            proto_pack_key(&b.pk, "deep");
            msgpack_pack_array(&b.pk, 2);
            msgpack_pack_array(&b.pk, 0);
            msgpack_pack_map(&b.pk, 0);
            msgpack_pack_float(&b.pk, 3.0f);
            proto_pack_strn(&b.pk, big, 300);
            proto_pack_key(&b.pk, "bin");
            msgpack_pack_bin(&b.pk, 3);
            msgpack_pack_bin_body(&b.pk, "abc", 3);
            proto_pack_key(&b.pk, "ext");
            msgpack_pack_ext(&b.pk, 4, 9);
            msgpack_pack_ext_body(&b.pk, "wxyz", 4);
        }));
#undef ONE
}

/* A message with one of everything, for the split tests. */
static void pack_sample(buf *b, uint32_t msgid)
{
    static char s300[300];
    memset(s300, 's', sizeof s300);
    proto_pack_request_head(&b->pk, msgid, "program.define");
    msgpack_pack_array(&b->pk, 1);
    msgpack_pack_map(&b->pk, 8);
    proto_pack_kv_str(&b->pk, "name", "sample");
    proto_pack_kv_u64(&b->pk, "u64", 1ull << 50);
    proto_pack_kv_i64(&b->pk, "i64", -123456789);
    proto_pack_kv_f64(&b->pk, "f64", 0.125);
    proto_pack_key(&b->pk, "f32");
    msgpack_pack_float(&b->pk, 2.5f);
    proto_pack_key(&b->pk, "long");
    proto_pack_strn(&b->pk, s300, sizeof s300);
    proto_pack_key(&b->pk, "blob");
    msgpack_pack_bin(&b->pk, 5);
    msgpack_pack_bin_body(&b->pk, "\x00\x01\x02\xc1\xff", 5);
    proto_pack_key(&b->pk, "nest");
    msgpack_pack_array(&b->pk, 2);
    msgpack_pack_map(&b->pk, 1);
    proto_pack_key(&b->pk, "e");
    msgpack_pack_ext(&b->pk, 2, 5);
    msgpack_pack_ext_body(&b->pk, "ab", 2);
    msgpack_pack_array(&b->pk, 3);
    msgpack_pack_true(&b->pk);
    msgpack_pack_nil(&b->pk);
    msgpack_pack_int16(&b->pk, -300);
}

static void test_scan_split(void)
{
    h_section("scan: split at every byte boundary");
    buf b;
    buf_init(&b);
    pack_sample(&b, 77);
    const uint8_t *p = (const uint8_t *)b.sb.data;
    size_t n = b.sb.size;
    CHECK(unpack_len(p, n) == (long)n);

    /* two pieces, at every boundary: the second call resumes */
    int bad = 0;
    for (size_t k = 0; k <= n; k++) {
        proto_frame f;
        proto_frame_init(&f, 1u << 20);
        long r1 = proto_frame_scan(&f, p, k);
        long r2 = proto_frame_scan(&f, p, n);
        if (!((k < n ? r1 == 0 : r1 == (long)n) && r2 == (long)n))
            bad++;
    }
    CHECKF(bad == 0, "split in two at each of %zu boundaries: %d wrong", n + 1, bad);

    /* one byte at a time, with the position never going back */
    proto_frame f;
    proto_frame_init(&f, 1u << 20);
    size_t last_pos = 0;
    bool monotonic = true;
    long r = 0;
    size_t k;
    for (k = 1; k <= n; k++) {
        r = proto_frame_scan(&f, p, k);
        if (f.pos < last_pos || f.pos > k)
            monotonic = false;
        last_pos = f.pos;
        if (r != 0)
            break;
    }
    CHECKF(r == (long)n && k == n, "byte by byte: whole at byte %zu (want %zu), length %ld", k,
           n, r);
    CHECK(monotonic);

    /* a call with the same length again changes nothing */
    proto_frame_init(&f, 1u << 20);
    CHECK(proto_frame_scan(&f, p, n / 2) == 0);
    size_t pos = f.pos;
    CHECK(proto_frame_scan(&f, p, n / 2) == 0);
    CHECK(f.pos == pos);
    CHECK(proto_frame_scan(&f, p, n) == (long)n);
    buf_free(&b);
}

static void test_scan_many(void)
{
    h_section("scan: many messages in one buffer");
    buf b;
    buf_init(&b);
    size_t ends[200];
    for (int i = 0; i < 200; i++) {
        if (i % 3 == 0)
            pack_sample(&b, (uint32_t)i);
        else {
            proto_pack_request_head(&b.pk, (uint32_t)i, i % 3 == 1 ? "stats" : "hello");
            msgpack_pack_array(&b.pk, 0);
        }
        ends[i] = b.sb.size;
    }
    const uint8_t *p = (const uint8_t *)b.sb.data;
    proto_frame f;
    proto_frame_init(&f, 1u << 20);
    size_t off = 0;
    int count = 0, wrong = 0;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    while (off < b.sb.size) {
        long r = proto_frame_scan(&f, p + off, b.sb.size - off);
        if (r <= 0)
            break;
        size_t uo = 0;
        if (msgpack_unpack_next(&up, (const char *)p + off, (size_t)r, &uo) !=
                MSGPACK_UNPACK_SUCCESS || uo != (size_t)r)
            wrong++;
        proto_msg m;
        bool idok;
        char why[128];
        if (proto_msg_decode(&up.data, &m, &idok, why, sizeof why) != 0 ||
            m.msgid != (uint32_t)count)
            wrong++;
        off += (size_t)r;
        if (off != ends[count])
            wrong++;
        count++;
        proto_frame_reset(&f);
    }
    msgpack_unpacked_destroy(&up);
    CHECK_EQ(count, 200);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(off, b.sb.size);
    buf_free(&b);
}

/* ---- scanner: limits ----------------------------------------------------- */

static void test_scan_limits(void)
{
    h_section("scan: declared lengths past max_msg");
    /* str32 declaring 1 GiB: refused on the 5 header bytes alone */
    static const uint8_t str1g[] = {0xdb, 0x40, 0x00, 0x00, 0x00};
    CHECK_EQ(scan_once(str1g, sizeof str1g, 1u << 20), -EMSGSIZE);
    CHECK_EQ(scan_once(str1g, sizeof str1g, GG_PROTO_DEFAULT_MAX_MSG), -EMSGSIZE);
    /* inside a request envelope, after a few good values */
    static const uint8_t req1g[] = {0x94, 0x00, 0x01, 0xa5, 'h', 'e', 'l', 'l', 'o', 0x91, 0x81,
                                    0xa1, 'x', 0xdb, 0x40, 0x00, 0x00, 0x00};
    CHECK_EQ(scan_once(req1g, sizeof req1g, GG_PROTO_DEFAULT_MAX_MSG), -EMSGSIZE);
    /* the header itself incomplete: wait */
    CHECK_EQ(scan_once(str1g, 3, 1u << 20), 0);
    static const uint8_t bin4g[] = {0xc6, 0xff, 0xff, 0xff, 0xff};
    CHECK_EQ(scan_once(bin4g, sizeof bin4g, GG_PROTO_DEFAULT_MAX_MSG), -EMSGSIZE);
    static const uint8_t ext4g[] = {0xc9, 0xff, 0xff, 0xff, 0xff};
    CHECK_EQ(scan_once(ext4g, sizeof ext4g, GG_PROTO_DEFAULT_MAX_MSG), -EMSGSIZE);
    static const uint8_t str16[] = {0xda, 0x08, 0x00};   /* 2048 bytes, max 1024 */
    CHECK_EQ(scan_once(str16, sizeof str16, 1024), -EMSGSIZE);

    /* each piece fits, the sum does not */
    buf b;
    buf_init(&b);
    char s[200];
    memset(s, 'a', sizeof s);
    msgpack_pack_array(&b.pk, 10);
    for (int i = 0; i < 10; i++)
        proto_pack_strn(&b.pk, s, sizeof s);
    CHECK_EQ(scan_once(b.sb.data, b.sb.size, 1024), -EMSGSIZE);
    CHECK_EQ(scan_once(b.sb.data, b.sb.size, 4096), (long)b.sb.size);
    /* refused before the bytes that cross the limit arrive */
    CHECK_EQ(scan_once(b.sb.data, 5 * 203 + 1 + 3, 1024), -EMSGSIZE);
    buf_free(&b);

    /* exactly max_msg bytes is fine, one more is not */
    buf_init(&b);
    proto_pack_strn(&b.pk, s, 100);     /* 2 + 100 bytes: str8 */
    CHECK_EQ(b.sb.size, 102);
    CHECK_EQ(scan_once(b.sb.data, b.sb.size, 102), 102);
    CHECK_EQ(scan_once(b.sb.data, b.sb.size, 101), -EMSGSIZE);
    buf_free(&b);
    /* max_msg 0 means the default */
    proto_frame f;
    proto_frame_init(&f, 0);
    CHECK_EQ(f.max_msg, GG_PROTO_DEFAULT_MAX_MSG);

    h_section("scan: element count past max_objects");
    proto_frame_init(&f, 65536);
    CHECK_EQ(f.max_objects, 4096);
    static const uint8_t arr4g[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    CHECK_EQ(scan_once(arr4g, sizeof arr4g, GG_PROTO_DEFAULT_MAX_MSG), -EMSGSIZE);
    static const uint8_t map2g[] = {0xdf, 0x80, 0x00, 0x00, 0x00};
    CHECK_EQ(scan_once(map2g, sizeof map2g, GG_PROTO_DEFAULT_MAX_MSG), -EMSGSIZE);
    static const uint8_t map16[] = {0xde, 0x08, 0x00};   /* 2048 pairs = 4096 values */
    CHECK_EQ(scan_once(map16, sizeof map16, 65536), -EMSGSIZE);
    /* one value fewer than the limit (4095 children + the array itself) fits */
    uint8_t *a = calloc(1, 3 + 4096);
    a[0] = 0xdc;
    a[1] = 0x0f;
    a[2] = 0xff;
    memset(a + 3, 0xc0, 4095);
    CHECK_EQ(scan_once(a, 3 + 4095, 65536), 3 + 4095);
    a[1] = 0x10;
    a[2] = 0x00;          /* 4096 children + itself: one past */
    CHECK_EQ(scan_once(a, 3, 65536), -EMSGSIZE);
    free(a);
    /* values counted across nesting: [[nil x 3000], nil x 2999] holds 6001
     * values, past 4096, though each array alone is under it */
    size_t n = 3 + 3 + 3000 + 2999;
    a = malloc(n);
    a[0] = 0xdc;
    a[1] = 3000 >> 8;
    a[2] = 3000 & 0xff;
    a[3] = 0xdc;
    a[4] = 3000 >> 8;
    a[5] = 3000 & 0xff;
    memset(a + 6, 0xc0, n - 6);
    CHECK_EQ(unpack_len(a, n), (long)n);
    CHECK_EQ(scan_once(a, n, 65536), -EMSGSIZE);
    free(a);

    h_section("scan: nesting and bad bytes");
    uint8_t deep[64];
    for (int d = 1; d <= 20; d++) {
        memset(deep, 0x91, (size_t)d);   /* d nested one-element arrays */
        deep[d] = 0x01;
        long r = scan_once(deep, (size_t)d + 1, 1024);
        if (d <= GG_PROTO_MAX_DEPTH)
            CHECKF(r == d + 1, "%d nested arrays: scan gives %ld, want %d", d, r, d + 1);
        else
            CHECKF(r == -EPROTO, "%d nested arrays: scan gives %ld, want -EPROTO", d, r);
    }
    /* an empty container innermost opens nothing */
    memset(deep, 0x91, GG_PROTO_MAX_DEPTH);
    deep[GG_PROTO_MAX_DEPTH] = 0x90;
    CHECK_EQ(scan_once(deep, GG_PROTO_MAX_DEPTH + 1, 1024), GG_PROTO_MAX_DEPTH + 1);
    /* maps count too */
    memset(deep, 0x81, 17);   /* {nil: {nil: ...}}: key first, so interleave */
    for (int i = 0; i < 17; i++) {
        deep[2 * i] = 0x81;
        deep[2 * i + 1] = 0xc0;
    }
    deep[34] = 0x01;
    CHECK_EQ(scan_once(deep, 35, 1024), -EPROTO);
    /* refused before the rest arrives */
    memset(deep, 0x91, 17);
    CHECK_EQ(scan_once(deep, 17, 1024), -EPROTO);

    static const uint8_t c1[] = {0xc1};
    CHECK_EQ(scan_once(c1, 1, 1024), -EPROTO);
    static const uint8_t c1in[] = {0x93, 0x01, 0xc1, 0x02};
    CHECK_EQ(scan_once(c1in, sizeof c1in, 1024), -EPROTO);
    static const uint8_t c1late[] = {0x92, 0x01};
    CHECK_EQ(scan_once(c1late, sizeof c1late, 1024), 0);   /* no bad byte seen yet */
    /* 0xc1 inside a str body is just data */
    static const uint8_t c1str[] = {0xa2, 0xc1, 0xc1};
    CHECK_EQ(scan_once(c1str, sizeof c1str, 1024), 3);
}

/* ---- deterministic garbage driver ---------------------------------------- */

typedef struct {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned rbelow(rng *r, unsigned n)
{
    return (unsigned)(rnext(r) % n);
}

/* A byte biased towards headers and small lengths. */
static uint8_t rbyte(rng *r)
{
    static const uint8_t hdr[] = {0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9,
                                  0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3,
                                  0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xdb, 0xdc, 0xdd,
                                  0xde, 0xdf, 0x90, 0x91, 0x93, 0x94, 0x80, 0x81, 0xa1, 0xa5};
    switch (rbelow(r, 4)) {
    case 0:
        return hdr[rbelow(r, sizeof hdr)];
    case 1:
        return (uint8_t)rbelow(r, 8);
    default:
        return (uint8_t)rnext(r);
    }
}

static void rand_value(rng *r, msgpack_packer *pk, int depth)
{
    static char text[600];
    if (!text[0])
        for (size_t i = 0; i < sizeof text; i++)
            text[i] = (char)('a' + i % 26);
    unsigned k = rbelow(r, depth > 4 ? 12 : 16);
    switch (k) {
    case 0: msgpack_pack_nil(pk); break;
    case 1: rbelow(r, 2) ? msgpack_pack_true(pk) : msgpack_pack_false(pk); break;
    case 2: msgpack_pack_uint64(pk, rnext(r) >> rbelow(r, 64)); break;
    case 3: msgpack_pack_int64(pk, -(int64_t)(rnext(r) >> (1 + rbelow(r, 63)))); break;
    case 4: msgpack_pack_float(pk, (float)rbelow(r, 1000) / 7.0f); break;
    case 5: msgpack_pack_double(pk, (double)rnext(r) / 3.0); break;
    case 6: proto_pack_strn(pk, text, rbelow(r, 2) ? rbelow(r, 40) : rbelow(r, 600)); break;
    case 7: {
        size_t n = rbelow(r, 300);
        msgpack_pack_bin(pk, n);
        msgpack_pack_bin_body(pk, text, n);
        break;
    }
    case 8: {
        static const size_t sizes[] = {1, 2, 4, 8, 16, 0, 3, 5, 17, 200, 300};
        size_t n = sizes[rbelow(r, sizeof sizes / sizeof sizes[0])];
        msgpack_pack_ext(pk, n, (int8_t)rbelow(r, 100));
        msgpack_pack_ext_body(pk, text, n);
        break;
    }
    case 9: proto_pack_str(pk, "replay"); break;
    case 10: msgpack_pack_uint32(pk, (uint32_t)rbelow(r, 4)); break;
    case 11: msgpack_pack_int(pk, (int)rbelow(r, 3)); break;
    case 12: case 13: {
        unsigned n = rbelow(r, 2) ? rbelow(r, 5) : rbelow(r, 40);
        msgpack_pack_array(pk, n);
        for (unsigned i = 0; i < n; i++)
            rand_value(r, pk, depth + 1);
        break;
    }
    default: {
        unsigned n = rbelow(r, 2) ? rbelow(r, 4) : rbelow(r, 20);
        msgpack_pack_map(pk, n);
        for (unsigned i = 0; i < n; i++) {
            rand_value(r, pk, depth + 1);
            rand_value(r, pk, depth + 1);
        }
    }
    }
}

/* An RPC-shaped message with random parts. */
static void rand_envelope(rng *r, msgpack_packer *pk)
{
    unsigned shape = rbelow(r, 4);
    unsigned n = shape == 0 ? 4 : shape == 1 ? 3 : rbelow(r, 6);
    msgpack_pack_array(pk, n);
    for (unsigned i = 0; i < n; i++) {
        if (i == 0 && rbelow(r, 4))
            msgpack_pack_uint8(pk, (uint8_t)rbelow(r, 4));
        else if (i == 1 && rbelow(r, 2))
            msgpack_pack_uint64(pk, rnext(r) >> rbelow(r, 64));
        else if (i == 2 && rbelow(r, 2))
            proto_pack_str(pk, "stats");
        else if (i == 3 && rbelow(r, 2)) {
            msgpack_pack_array(pk, rbelow(r, 3));
            rand_value(r, pk, 3);
            rand_value(r, pk, 3);   /* harmless if the count is smaller: more garbage */
        } else
            rand_value(r, pk, 2);
    }
}

static void test_garbage(void)
{
    h_section("random garbage (fixed seeds)");
    rng r = {0x67667261706870ull};
    uint8_t data[4200];
    char why[256];
    int failures = 0, iters = 0;
    /* 1. random bytes */
    for (int it = 0; it < 40000; it++, iters++) {
        size_t n = 1 + rbelow(&r, it % 10 == 0 ? 600 : 48);
        for (size_t i = 0; i < n; i++)
            data[i] = rbyte(&r);
        if (pi_check_bytes(data, n, (unsigned)it, why, sizeof why) < 0 && failures++ < 5)
            printf("   random bytes, iteration %d: %s\n", it, why);
    }
    /* 2. valid values and envelopes, clean then mutated */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int agree = 0, clean = 0;
    for (int it = 0; it < 20000; it++, iters++) {
        msgpack_sbuffer_clear(&sb);
        unsigned nmsg = 1 + rbelow(&r, 3);
        for (unsigned k = 0; k < nmsg; k++) {
            if (rbelow(&r, 2))
                rand_envelope(&r, &pk);
            else
                rand_value(&r, &pk, 0);
        }
        if (sb.size > sizeof data)
            continue;
        size_t n = sb.size;
        memcpy(data, sb.data, n);
        /* clean: the scanner walks every message exactly (when within limits) */
        clean++;
        long s1 = scan_once(data, n, PI_MAX_MSG);
        long u1 = unpack_len(data, n);
        if (s1 > 0 && s1 == u1)
            agree++;
        else if (s1 >= 0 && failures++ < 5)
            printf("   clean value %d: scan %ld, unpack %ld\n", it, s1, u1);
        if (pi_check_bytes(data, n, (unsigned)it, why, sizeof why) < 0 && failures++ < 5)
            printf("   clean value %d: %s\n", it, why);
        /* mutations */
        for (int m = 0; m < 4; m++) {
            size_t len = n;
            uint8_t tmp[4300];
            memcpy(tmp, data, n);
            switch (rbelow(&r, 5)) {
            case 0:   /* flip a byte */
                tmp[rbelow(&r, (unsigned)len)] ^= (uint8_t)(1u << rbelow(&r, 8));
                break;
            case 1:   /* replace with a header byte */
                tmp[rbelow(&r, (unsigned)len)] = rbyte(&r);
                break;
            case 2:   /* truncate */
                len = rbelow(&r, (unsigned)len) + 1;
                break;
            case 3: { /* insert a few bytes */
                size_t at = rbelow(&r, (unsigned)len + 1), k = 1 + rbelow(&r, 8);
                memmove(tmp + at + k, tmp + at, len - at);
                for (size_t q = 0; q < k; q++)
                    tmp[at + q] = rbyte(&r);
                len += k;
                break;
            }
            default: { /* delete a run */
                size_t at = rbelow(&r, (unsigned)len), k = 1 + rbelow(&r, 8);
                if (at + k > len)
                    k = len - at;
                memmove(tmp + at, tmp + at + k, len - at - k);
                len -= k;
                if (!len)
                    len = 1;
            }
            }
            iters++;
            if (pi_check_bytes(tmp, len, (unsigned)(it * 4 + m), why, sizeof why) < 0 &&
                failures++ < 5)
                printf("   mutated value %d/%d: %s\n", it, m, why);
        }
    }
    msgpack_sbuffer_destroy(&sb);
    CHECKF(failures == 0, "%d invariant failures in %d buffers", failures, iters);
    CHECKF(agree * 10 > clean * 9, "scanner and msgpack agree on %d of %d clean values "
           "(the rest past the limits)", agree, clean);
}

int main(void)
{
    h_init("test_proto_frame", 300);
    test_scan_types();
    test_scan_split();
    test_scan_many();
    test_scan_limits();
    test_garbage();
    return h_finish();
}
