/* SPDX-License-Identifier: MIT */
/* UTF-8 for text that came from a client.
 *
 * MessagePack str values are meant to be UTF-8, but nothing enforces it: a
 * client can send any bytes as a method name, a client name or a shm name.
 * Whatever of that the daemon echoes (in a reply, a notification or a log
 * record) goes through here, so everything it sends and logs is valid
 * UTF-8 that a strict decoder on the other side accepts.
 *
 * Validity follows RFC 3629 (Unicode table 3-7): no overlong forms, no
 * surrogates, nothing above U+10FFFF.  An invalid sequence becomes one
 * U+FFFD per maximal subpart (the Unicode recommendation, so two decoders
 * agree on where the damage ends).  C0 controls and DEL become U+FFFD too
 * when cleaning: a client's newline must not start a fake log line. */
#include "proto.h"

#include <string.h>

#define UTF8_REPL "\xef\xbf\xbd"
#define UTF8_REPL_LEN 3

typedef enum { UTF8_CHAR, UTF8_CONTROL, UTF8_BAD } utf8_kind;

/* The first character of s: its kind, and in *n how many bytes it takes
 * (for UTF8_BAD: the maximal subpart to skip, at least 1). */
static utf8_kind utf8_step(const uint8_t *s, size_t len, size_t *n)
{
    uint8_t b = s[0];
    *n = 1;
    if (b < 0x80)
        return b < 0x20 || b == 0x7f ? UTF8_CONTROL : UTF8_CHAR;
    size_t want;
    uint8_t lo = 0x80, hi = 0xbf;   /* the range of the second byte */
    if (b >= 0xc2 && b <= 0xdf)
        want = 2;
    else if (b >= 0xe0 && b <= 0xef) {
        want = 3;
        if (b == 0xe0)
            lo = 0xa0;              /* overlong */
        else if (b == 0xed)
            hi = 0x9f;              /* surrogates */
    } else if (b >= 0xf0 && b <= 0xf4) {
        want = 4;
        if (b == 0xf0)
            lo = 0x90;              /* overlong */
        else if (b == 0xf4)
            hi = 0x8f;              /* above U+10FFFF */
    } else {
        return UTF8_BAD;            /* a continuation byte, C0, C1, F5..FF */
    }
    for (size_t i = 1; i < want; i++) {
        if (i >= len)
            return UTF8_BAD;
        uint8_t c = s[i];
        if (i == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xbf))
            return UTF8_BAD;
        *n = i + 1;
    }
    return UTF8_CHAR;
}

bool proto_utf8_valid(const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    for (size_t off = 0, n; off < len; off += n)
        if (utf8_step(p + off, len - off, &n) == UTF8_BAD)
            return false;
    return true;
}

size_t proto_utf8_clean(char *dst, size_t cap, const char *s, size_t len)
{
    if (cap == 0)
        return 0;
    const uint8_t *p = (const uint8_t *)s;
    size_t out = 0;
    for (size_t off = 0, n; off < len; off += n) {
        bool keep = utf8_step(p + off, len - off, &n) == UTF8_CHAR;
        const char *piece = keep ? s + off : UTF8_REPL;
        size_t plen = keep ? n : UTF8_REPL_LEN;
        if (out + plen > cap - 1)
            break;                  /* a whole character or nothing */
        memcpy(dst + out, piece, plen);
        out += plen;
    }
    dst[out] = '\0';
    return out;
}

void proto_pack_text(msgpack_packer *pk, const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t total = 0, n;
    for (size_t off = 0; off < len; off += n)
        total += utf8_step(p + off, len - off, &n) == UTF8_CHAR ? n : UTF8_REPL_LEN;
    msgpack_pack_str(pk, total);
    /* Valid runs go out in one piece each; the body is written in parts,
     * which msgpack-c's packer allows after the header. */
    size_t run = 0;
    for (size_t off = 0; off < len; off += n) {
        if (utf8_step(p + off, len - off, &n) == UTF8_CHAR)
            continue;
        if (off > run)
            msgpack_pack_str_body(pk, s + run, off - run);
        msgpack_pack_str_body(pk, UTF8_REPL, UTF8_REPL_LEN);
        run = off + n;
    }
    if (len > run)
        msgpack_pack_str_body(pk, s + run, len - run);
}
