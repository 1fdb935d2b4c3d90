/* SPDX-License-Identifier: MIT */
/* Invariants of the framing scanner and the envelope decoder on arbitrary
 * bytes, shared by the deterministic garbage driver in test_proto_frame.c and
 * the libFuzzer target fuzz_proto.c.
 *
 *  - scanning never crashes, whatever the bytes;
 *  - the result does not depend on how the bytes are split (the scanner
 *    resumes where it stopped);
 *  - a whole message the scanner returns is exactly one value for
 *    msgpack_unpack_next, of the same length;
 *  - a prefix the scanner calls incomplete is incomplete for msgpack too;
 *  - proto_msg_decode on any unpacked value is consistent with what it
 *    returns (a decoded request has a method, msgid_ok is set for it).
 *
 * msgpack_unpack_next is only run on bytes the scanner accepted (or called
 * incomplete, with every header seen within the limits): that is the
 * contract in the daemon, and unpacking a declared 4-billion-element array
 * would try to allocate for it. */
#ifndef GG_PROTO_INVARIANTS_H
#define GG_PROTO_INVARIANTS_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <msgpack.h>

#include "proto.h"

#define PI_MAX_MSG 4096

/* Scan bytes fed in chunks whose sizes come from `split` (1..16). */
static long pi_scan_chunked(const uint8_t *data, size_t len, size_t max_msg, unsigned split)
{
    proto_frame f;
    proto_frame_init(&f, max_msg);
    size_t have = 0;
    long r = 0;
    while (have < len) {
        size_t step = 1 + (split % 16);
        split = split * 1103515245u + 12345u;
        have = have + step > len ? len : have + step;
        r = proto_frame_scan(&f, data, have);
        if (r != 0)
            return r;
    }
    return r;
}

static int pi_check_decode(const msgpack_object *o, char *why, size_t wl)
{
    proto_msg m;
    bool idok = true;
    char err[256] = "";
    int rc = proto_msg_decode(o, &m, &idok, err, sizeof err);
    if (rc == 0) {
        if (m.type < GG_MSG_REQUEST || m.type > GG_MSG_NOTIFY) {
            snprintf(why, wl, "decode accepted message type %d", m.type);
            return -1;
        }
        if (m.type != GG_MSG_RESPONSE && !m.method) {
            snprintf(why, wl, "decoded request/notification without a method");
            return -1;
        }
        if (m.type != GG_MSG_NOTIFY && !idok) {
            snprintf(why, wl, "decoded request/response without msgid_ok");
            return -1;
        }
        if (m.params && m.params->type != MSGPACK_OBJECT_MAP) {
            snprintf(why, wl, "decoded params that are not a map");
            return -1;
        }
    } else {
        if (rc != -EPROTO) {
            snprintf(why, wl, "decode returned %d, not -EPROTO", rc);
            return -1;
        }
        if (!err[0]) {
            snprintf(why, wl, "decode failed without a reason");
            return -1;
        }
    }
    return 0;
}

/* Check one buffer; 0, or -1 with why filled. */
static int pi_check_bytes(const uint8_t *data, size_t len, unsigned split, char *why, size_t wl)
{
    size_t off = 0;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    int bad = 0;
    /* messages one after another, as a connection reads them */
    while (off < len && !bad) {
        proto_frame f;
        proto_frame_init(&f, PI_MAX_MSG);
        long r1 = proto_frame_scan(&f, data + off, len - off);
        long r2 = pi_scan_chunked(data + off, len - off, PI_MAX_MSG, split);
        if (r1 != r2) {
            snprintf(why, wl, "at %zu: one-shot scan gives %ld, chunked scan %ld", off, r1, r2);
            bad = 1;
            break;
        }
        if (r1 < 0) {
            if (r1 != -EPROTO && r1 != -EMSGSIZE) {
                snprintf(why, wl, "at %zu: scan returned %ld", off, r1);
                bad = 1;
            }
            break;
        }
        if (r1 == 0) {
            size_t uo = 0;
            msgpack_unpack_return ur =
                msgpack_unpack_next(&up, (const char *)data + off, len - off, &uo);
            if (ur != MSGPACK_UNPACK_CONTINUE) {
                snprintf(why, wl, "at %zu: scanner says incomplete, msgpack_unpack_next says %d",
                         off, (int)ur);
                bad = 1;
            }
            break;
        }
        if ((size_t)r1 > len - off) {
            snprintf(why, wl, "at %zu: scanner length %ld past the %zu bytes given", off, r1,
                     len - off);
            bad = 1;
            break;
        }
        size_t uo = 0;
        msgpack_unpack_return ur =
            msgpack_unpack_next(&up, (const char *)data + off, (size_t)r1, &uo);
        if (ur != MSGPACK_UNPACK_SUCCESS || uo != (size_t)r1) {
            snprintf(why, wl, "at %zu: scanner length %ld, msgpack_unpack_next gives %d / %zu",
                     off, r1, (int)ur, uo);
            bad = 1;
            break;
        }
        if (pi_check_decode(&up.data, why, wl) < 0)
            bad = 1;
        off += (size_t)r1;
    }
    msgpack_unpacked_destroy(&up);
    return bad ? -1 : 0;
}

#endif
