/* SPDX-License-Identifier: MIT */
/* Incremental MessagePack framing.
 *
 * Happy path: bytes arrive in any split; proto_frame_scan walks one value
 * header at a time, remembering how many values each open array or map still
 * owes, and returns the message length once the outermost value is whole.
 *
 * Failure modes: a declared length or element count that cannot fit within
 * max_msg / max_objects is refused as soon as its header is seen, before the
 * bytes arrive, so a client cannot make the daemon buffer or allocate for a
 * message it will refuse anyway; 0xc1 and nesting past GG_PROTO_MAX_DEPTH are
 * protocol errors.  After an error the stream cannot be resynchronised: the
 * caller closes the connection. */
#include "proto.h"

#include <errno.h>
#include <string.h>

void proto_frame_init(proto_frame *f, size_t max_msg)
{
    memset(f, 0, sizeof(*f));
    f->max_msg = max_msg ? max_msg : GG_PROTO_DEFAULT_MAX_MSG;
    /* msgpack-c expands each value to a 24-byte object; one value per 16
     * bytes of budget keeps a worst-case message's unpacked size near its
     * own size. */
    f->max_objects = f->max_msg / 16 > 4096 ? f->max_msg / 16 : 4096;
    proto_frame_reset(f);
}

void proto_frame_reset(proto_frame *f)
{
    f->pos = 0;
    f->objects = 0;
    f->depth = 0;
    f->remaining[0] = 1;
}

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Size of the value header at p (hdr), the payload that follows it (body)
 * and the number of child values.  Returns 0, 1 if more bytes are needed to
 * read the header, or -EPROTO. */
static int frame_header(const uint8_t *p, size_t avail, size_t *hdr, uint64_t *body,
                        uint64_t *children)
{
    uint8_t b = p[0];
    *body = 0;
    *children = 0;
    *hdr = 1;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return 0;
    if (b >= 0x80 && b <= 0x8f) {
        *children = 2u * (b & 0x0f);
        return 0;
    }
    if (b >= 0x90 && b <= 0x9f) {
        *children = b & 0x0f;
        return 0;
    }
    if (b >= 0xa0 && b <= 0xbf) {
        *body = b & 0x1f;
        return 0;
    }
    int lenbytes = 0;
    switch (b) {
    case 0xc1:
        return -EPROTO;
    case 0xca: *body = 4; return 0;
    case 0xcb: *body = 8; return 0;
    case 0xcc: case 0xd0: *body = 1; return 0;
    case 0xcd: case 0xd1: *body = 2; return 0;
    case 0xce: case 0xd2: *body = 4; return 0;
    case 0xcf: case 0xd3: *body = 8; return 0;
    case 0xd4: *body = 2; return 0;
    case 0xd5: *body = 3; return 0;
    case 0xd6: *body = 5; return 0;
    case 0xd7: *body = 9; return 0;
    case 0xd8: *body = 17; return 0;
    case 0xc4: case 0xd9: lenbytes = 1; break;
    case 0xc5: case 0xda: case 0xdc: case 0xde: lenbytes = 2; break;
    case 0xc6: case 0xdb: case 0xdd: case 0xdf: lenbytes = 4; break;
    case 0xc7: lenbytes = 1; break;
    case 0xc8: lenbytes = 2; break;
    case 0xc9: lenbytes = 4; break;
    default:
        return -EPROTO;
    }
    if (avail < 1u + (size_t)lenbytes)
        return 1;
    uint64_t n = be(p + 1, lenbytes);
    *hdr = 1 + (size_t)lenbytes;
    switch (b) {
    case 0xdc: case 0xdd:
        *children = n;
        break;
    case 0xde: case 0xdf:
        *children = 2 * n;
        break;
    case 0xc7: case 0xc8: case 0xc9:
        *body = n + 1;  /* type byte */
        break;
    default:
        *body = n;
    }
    return 0;
}

long proto_frame_scan(proto_frame *f, const uint8_t *buf, size_t len)
{
    for (;;) {
        while (f->depth >= 0 && f->remaining[f->depth] == 0)
            f->depth--;
        if (f->depth < 0)
            return (long)f->pos;
        if (f->pos >= len)
            return 0;
        size_t hdr;
        uint64_t body, children;
        int r = frame_header(buf + f->pos, len - f->pos, &hdr, &body, &children);
        if (r < 0)
            return r;
        if (r > 0)
            return 0;
        uint64_t item = hdr + body;
        if (body > f->max_msg || f->pos + item > f->max_msg)
            return -EMSGSIZE;
        if (children > f->max_objects || f->objects + 1 + children > f->max_objects)
            return -EMSGSIZE;
        if (f->pos + item > len)
            return 0;
        f->pos += item;
        f->objects++;
        f->remaining[f->depth]--;
        if (children) {
            if (f->depth + 1 > GG_PROTO_MAX_DEPTH)
                return -EPROTO;
            f->depth++;
            f->remaining[f->depth] = (uint32_t)children;
        }
    }
}
