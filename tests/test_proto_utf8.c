/* SPDX-License-Identifier: MIT */
/* Unit tests of proto/utf8.c: what counts as valid UTF-8, cleaning client
 * text (U+FFFD for invalid sequences and control characters, cuts at
 * character boundaries only), and error messages packed clean. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proto.h"
#include "test_proto_util.h"

#define R "\xef\xbf\xbd"   /* U+FFFD */

static bool valid(const char *s)
{
    return proto_utf8_valid(s, strlen(s));
}

static void test_valid(void)
{
    h_section("proto_utf8_valid: RFC 3629");
    CHECK(proto_utf8_valid("", 0));
    CHECK(valid("plain ascii"));
    CHECK(valid("caf\xc3\xa9"));                        /* é */
    CHECK(valid("\xe2\x82\xac"));                       /* € */
    CHECK(valid("\xf0\x9f\x98\x80"));                   /* U+1F600 */
    CHECK(valid("\xf4\x8f\xbf\xbf"));                   /* U+10FFFF, the last */
    CHECK(valid("\xed\x9f\xbf"));                       /* U+D7FF, below the surrogates */
    CHECK(valid("tab\tand newline\n"));                 /* controls are valid UTF-8 */
    CHECK(proto_utf8_valid("a\0b", 3));                 /* so is U+0000 */
    CHECK(!valid("\xff"));
    CHECK(!valid("\x80"));                              /* a lone continuation byte */
    CHECK(!valid("\xc3"));                              /* cut after the lead byte */
    CHECK(!valid("\xe2\x82"));                          /* cut inside € */
    CHECK(!valid("\xc0\xaf"));                          /* overlong '/' */
    CHECK(!valid("\xc1\xbf"));                          /* overlong */
    CHECK(!valid("\xe0\x80\xaf"));                      /* overlong, 3 bytes */
    CHECK(!valid("\xf0\x80\x80\xaf"));                  /* overlong, 4 bytes */
    CHECK(!valid("\xed\xa0\x80"));                      /* U+D800, a surrogate */
    CHECK(!valid("\xf4\x90\x80\x80"));                  /* U+110000 */
    CHECK(!valid("\xf5\x80\x80\x80"));
    CHECK(!valid("ok\xc3\xa9\xa9"));                    /* one continuation too many */
}

static void clean_is(const char *in, size_t inlen, size_t cap, const char *want)
{
    char out[256];
    memset(out, 'X', sizeof out);
    size_t n = proto_utf8_clean(out, cap, in, inlen);
    CHECKF(n == strlen(want) && out[n] == '\0' && memcmp(out, want, n) == 0,
           "clean(%zu bytes, cap %zu) gives %zu bytes \"%s\" (got %zu \"%.*s\")", inlen, cap,
           strlen(want), want, n, (int)(n < sizeof out ? n : 0), out);
    CHECKF(proto_utf8_valid(out, n), "the cleaned text is valid UTF-8");
    CHECKF(cap == 0 || n < cap, "it fits in %zu bytes with its NUL", cap);
}

static void test_clean(void)
{
    h_section("proto_utf8_clean: replace, never split");
    clean_is("hello", 5, 64, "hello");
    clean_is("caf\xc3\xa9", 5, 64, "caf\xc3\xa9");
    clean_is("a\xff" "b", 3, 64, "a" R "b");
    clean_is("\xc0\xaf", 2, 64, R R);                   /* each byte of an overlong */
    clean_is("\xed\xa0\x80", 3, 64, R R R);             /* a surrogate: 3 subparts */
    clean_is("\xe2\x82" "x", 3, 64, R "x");            /* a cut sequence is one subpart */
    clean_is("\xf0\x9f\x98", 3, 64, R);
    clean_is("line\nfake", 9, 64, "line" R "fake");     /* controls too */
    clean_is("a\0b", 3, 64, "a" R "b");
    clean_is("del\x7f", 4, 64, "del" R);
    /* cuts: whole characters only */
    clean_is("abc", 3, 3, "ab");
    clean_is("ab\xc3\xa9", 4, 4, "ab");                 /* é would need bytes 3..4 */
    clean_is("ab\xc3\xa9", 4, 5, "ab\xc3\xa9");
    clean_is("a\xe2\x82\xac", 4, 5, "a\xe2\x82\xac");
    clean_is("a\xe2\x82\xac", 4, 4, "a");
    clean_is("a\xff", 2, 4, "a");                       /* U+FFFD needs 3 */
    clean_is("a\xff", 2, 5, "a" R);
    clean_is("anything", 8, 1, "");
    char one = 'X';
    CHECK(proto_utf8_clean(&one, 0, "abc", 3) == 0 && one == 'X');   /* cap 0: untouched */
    /* hello's 63-byte client name: 62 ASCII bytes and a 3-byte € */
    char name[70];
    memset(name, 'n', 62);
    memcpy(name + 62, "\xe2\x82\xac", 3);
    char got[64];
    size_t n = proto_utf8_clean(got, sizeof got, name, 65);
    CHECKF(n == 62 && proto_utf8_valid(got, n),
           "a 65-byte name cut for 64 bytes keeps 62 (got %zu)", n);
}

/* the str packed for text */
static void packed_is(const char *in, size_t inlen, const char *want)
{
    buf b;
    buf_init(&b);
    proto_pack_text(&b.pk, in, inlen);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    bool ok = msgpack_unpack_next(&up, b.sb.data, b.sb.size, &off) == MSGPACK_UNPACK_SUCCESS &&
              off == b.sb.size && up.data.type == MSGPACK_OBJECT_STR &&
              up.data.via.str.size == strlen(want) &&
              (!*want || memcmp(up.data.via.str.ptr, want, strlen(want)) == 0);
    CHECKF(ok, "pack_text(%zu bytes) is the str \"%s\"", inlen, want);
    msgpack_unpacked_destroy(&up);
    buf_free(&b);
}

static void test_pack(void)
{
    h_section("proto_pack_text, and error messages packed clean");
    packed_is("", 0, "");
    packed_is("plain", 5, "plain");
    packed_is("\xff", 1, R);
    packed_is("x\xffy\xc3\xa9z\x80", 7, "x" R "y\xc3\xa9z" R);
    /* a long text: the header is str16 and the body goes in pieces */
    char big[400], want[1200];
    size_t w = 0;
    for (int i = 0; i < 400; i++) {
        big[i] = i % 5 == 4 ? '\xfe' : 'a';
        w += (size_t)snprintf(want + w, sizeof want - w, "%s", i % 5 == 4 ? R : "a");
    }
    packed_is(big, sizeof big, want);

    /* every error the daemon packs goes through it */
    buf b;
    buf_init(&b);
    proto_pack_error_response(&b.pk, 7, -ENOSYS, "unknown method 'bad\xff\xfename'");
    proto_pack_error_notify(&b.pk, -EPROTO, "cut inside \xe2\x82");
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    for (int i = 0; i < 2; i++) {
        if (!CHECK(msgpack_unpack_next(&up, b.sb.data, b.sb.size, &off) == MSGPACK_UNPACK_SUCCESS))
            break;
        const msgpack_object *err = i == 0 ? &up.data.via.array.ptr[2]
                                           : &up.data.via.array.ptr[2].via.array.ptr[0];
        const msgpack_object *m = h_get(err, "message");
        CHECKF(m && m->type == MSGPACK_OBJECT_STR &&
                   proto_utf8_valid(m->via.str.ptr, m->via.str.size),
               "error %d: the message is valid UTF-8", i);
        char text[128];
        h_gets(err, "message", text, sizeof text);
        CHECK_STR(text, i == 0 ? "unknown method 'bad" R R "name'" : "cut inside " R);
    }
    msgpack_unpacked_destroy(&up);
    buf_free(&b);
}

int main(void)
{
    h_init("test_proto_utf8", 300);
    test_valid();
    test_clean();
    test_pack();
    return h_finish();
}
