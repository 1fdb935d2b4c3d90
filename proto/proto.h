/* SPDX-License-Identifier: MIT */
/* gfxgraph wire protocol: MessagePack-RPC over a Unix stream socket.
 * Shared by the daemon and the client library.  PROTOCOL.md is the spec.
 *
 *   request       [0, msgid, method, params]
 *   response      [1, msgid, error, result]
 *   notification  [2, method, params]
 *
 * params is [] or [map]; result is a map; error is nil or {code, message}. */
#ifndef GG_PROTO_H
#define GG_PROTO_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GG_PROTOCOL_VERSION 1
#define GG_PROTO_DEFAULT_MAX_MSG (16u << 20)
#define GG_PROTO_MAX_DEPTH 16

enum { GG_MSG_REQUEST = 0, GG_MSG_RESPONSE = 1, GG_MSG_NOTIFY = 2 };

/* ---- errors ------------------------------------------------------------
 * Functions return 0 / a count, or a negative errno.  On the wire an error
 * carries the errno's symbolic name ("EINVAL") and a message. */
const char *proto_errno_code(int neg_errno);     /* "EINVAL"; "EIO" if unknown */
int proto_errno_from_code(const char *code, size_t len);  /* -EINVAL; -EIO if unknown */
const char *proto_errno_code_at(size_t i);       /* the table's i-th code; NULL past its end */

/* ---- framing -------------------------------------------------------------
 * An incremental scanner that finds where one MessagePack value ends without
 * allocating, so a message is checked against the limits before any of it is
 * unpacked.  It keeps its position between calls: feed it the same growing
 * buffer and it resumes where it stopped. */
typedef struct {
    size_t max_msg;            /* bytes */
    size_t max_objects;        /* values in one message (bounds unpack memory) */
    size_t pos;                /* scanned so far */
    size_t objects;
    int depth;
    uint32_t remaining[GG_PROTO_MAX_DEPTH + 1]; /* values left per open container */
} proto_frame;

void proto_frame_init(proto_frame *f, size_t max_msg);
/* Reset for the next message (after one was returned). */
void proto_frame_reset(proto_frame *f);
/* > 0: a whole message of that many bytes starts at buf;
 *   0: need more bytes;
 * -EMSGSIZE: past max_msg or max_objects;  -EPROTO: not MessagePack or too deep. */
long proto_frame_scan(proto_frame *f, const uint8_t *buf, size_t len);

/* ---- messages ------------------------------------------------------------ */
typedef struct {
    int type;                  /* GG_MSG_* */
    uint32_t msgid;            /* request, response */
    const char *method;        /* request, notification (not NUL-terminated) */
    size_t method_len;
    const msgpack_object *params;  /* the params map, or NULL when params is [] */
    const msgpack_object *error;   /* response: NULL when nil */
    const msgpack_object *result;  /* response */
} proto_msg;

/* Unpack one whole message (len bytes, as proto_frame_scan found it) into
 * obj: its maps and arrays are allocated in zone, which the caller owns and
 * may clear and reuse between messages; its strings and binaries point
 * into data.  MSGPACK_UNPACK_SUCCESS, MSGPACK_UNPACK_NOMEM_ERROR or
 * MSGPACK_UNPACK_PARSE_ERROR (bytes that are not one MessagePack value). */
msgpack_unpack_return proto_unpack(const uint8_t *data, size_t len, msgpack_zone *zone,
                                   msgpack_object *obj);

/* Decode an unpacked message.  0, or -EPROTO with a reason in err; when the
 * message was a request whose msgid could be read, *msgid_ok is set so the
 * caller can answer it. */
int proto_msg_decode(const msgpack_object *o, proto_msg *m, bool *msgid_ok, char *err,
                     size_t errlen);

/* The method of a whole message (len bytes, as proto_frame_scan found it)
 * without unpacking it: true for a request [0, msgid, method, params] in
 * its usual encodings (msgid a uint up to 2^32-1, method a str of < 64 KiB),
 * false for anything else (which proto_unpack and proto_msg_decode judge). */
bool proto_msg_peek(const uint8_t *data, size_t len, uint32_t *msgid, const char **method,
                    size_t *method_len);

/* ---- UTF-8 (utf8.c) -----------------------------------------------------
 * Client text can be any bytes; what the daemon sends or logs is valid
 * UTF-8.  Cleaning replaces each invalid sequence, C0 control character and
 * DEL with U+FFFD, and cuts only at character boundaries. */
/* Strictly valid UTF-8 (RFC 3629); control characters are valid. */
bool proto_utf8_valid(const char *s, size_t len);
/* Clean len bytes of s into dst (cap bytes, always NUL-terminated when cap
 * > 0), dropping whole characters at the end that do not fit.  Returns the
 * bytes written, not counting the NUL. */
size_t proto_utf8_clean(char *dst, size_t cap, const char *s, size_t len);
/* Pack len bytes of s as a str, cleaned (never cut). */
void proto_pack_text(msgpack_packer *pk, const char *s, size_t len);

/* ---- encoding ------------------------------------------------------------ */
void proto_pack_str(msgpack_packer *pk, const char *s);
void proto_pack_strn(msgpack_packer *pk, const char *s, size_t n);
void proto_pack_kv_str(msgpack_packer *pk, const char *k, const char *v);
void proto_pack_kv_u64(msgpack_packer *pk, const char *k, uint64_t v);
void proto_pack_kv_i64(msgpack_packer *pk, const char *k, int64_t v);
void proto_pack_kv_f64(msgpack_packer *pk, const char *k, double v);
void proto_pack_kv_bool(msgpack_packer *pk, const char *k, bool v);
void proto_pack_key(msgpack_packer *pk, const char *k);
/* [1, msgid, {code, message}, nil] */
void proto_pack_error_response(msgpack_packer *pk, uint32_t msgid, int neg_errno,
                               const char *message);
/* [2, "error", [{code, message}]]: for a message with no msgid to answer. */
void proto_pack_error_notify(msgpack_packer *pk, int neg_errno, const char *message);
/* [0, msgid, method, ...]: the caller packs params next (an array). */
void proto_pack_request_head(msgpack_packer *pk, uint32_t msgid, const char *method);
/* [1, msgid, nil, ...]: the caller packs the result map next. */
void proto_pack_response_head(msgpack_packer *pk, uint32_t msgid);

/* ---- reading arguments ---------------------------------------------------
 * Typed lookups in a params map.  Each returns 0, -ENOENT when the key is
 * absent (and not required), or -EINVAL with a message naming the field. */
typedef struct {
    char *msg;                 /* where the first error goes */
    size_t len;
} proto_errbuf;

const msgpack_object *proto_map_get(const msgpack_object *map, const char *key);
bool proto_str_eq(const msgpack_object *o, const char *s);
int proto_get_str(const msgpack_object *map, const char *key, bool required, const char **s,
                  size_t *len, proto_errbuf *e);
int proto_get_u64(const msgpack_object *map, const char *key, bool required, uint64_t max,
                  uint64_t *v, proto_errbuf *e);
int proto_get_i64(const msgpack_object *map, const char *key, bool required, int64_t *v,
                  proto_errbuf *e);
int proto_get_f64(const msgpack_object *map, const char *key, bool required, double *v,
                  proto_errbuf *e);
int proto_get_bool(const msgpack_object *map, const char *key, bool required, bool *v,
                   proto_errbuf *e);
int proto_get_map(const msgpack_object *map, const char *key, bool required,
                  const msgpack_object **v, proto_errbuf *e);
int proto_get_array(const msgpack_object *map, const char *key, bool required,
                    const msgpack_object **v, proto_errbuf *e);
int proto_get_bin(const msgpack_object *map, const char *key, bool required, const void **p,
                  size_t *len, proto_errbuf *e);
/* Number conversions for a bare object; false if o is not that kind. */
bool proto_obj_u64(const msgpack_object *o, uint64_t *v);
bool proto_obj_i64(const msgpack_object *o, int64_t *v);
bool proto_obj_f64(const msgpack_object *o, double *v);
/* printf into e (first error wins); returns err. */
int proto_fail(proto_errbuf *e, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Every key of map (a map; anything else passes) is one of accepted
 * (NULL-terminated): else -EINVAL "WHAT: unknown key 'K' (accepted: a, b)". */
int proto_check_keys(const msgpack_object *map, const char *const *accepted, const char *what,
                     proto_errbuf *e);
/* Copy a str object into a NUL-terminated buffer; -EINVAL if it does not fit. */
int proto_strdup_obj(const msgpack_object *o, char *dst, size_t cap);

/* ---- direct encoding -----------------------------------------------------
 * The hot answers and requests are written byte by byte into a buffer the
 * caller has made room in, with exactly the bytes msgpack-c's packer gives
 * for the same calls (smallest integer form; a double is always 0xcb), so
 * the wire is the same either way.  Each returns the byte after what it
 * wrote. */
static inline uint8_t *proto_w_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
    return p + n;
}

/* msgpack_pack_uint8/16/32/64 */
static inline uint8_t *proto_w_uint(uint8_t *p, uint64_t v)
{
    if (v < 128) {
        *p = (uint8_t)v;
        return p + 1;
    }
    if (v < 256) {
        *p = 0xcc;
        return proto_w_be(p + 1, v, 1);
    }
    if (v < 65536) {
        *p = 0xcd;
        return proto_w_be(p + 1, v, 2);
    }
    if (v < (1ull << 32)) {
        *p = 0xce;
        return proto_w_be(p + 1, v, 4);
    }
    *p = 0xcf;
    return proto_w_be(p + 1, v, 8);
}

/* msgpack_pack_int64 (and msgpack_pack_int) */
static inline uint8_t *proto_w_int(uint8_t *p, int64_t v)
{
    if (v >= 0)
        return proto_w_uint(p, (uint64_t)v);
    if (v >= -32) {
        *p = (uint8_t)(int8_t)v;       /* negative fixint */
        return p + 1;
    }
    if (v >= -128) {
        *p = 0xd0;
        return proto_w_be(p + 1, (uint64_t)v, 1);
    }
    if (v >= -32768) {
        *p = 0xd1;
        return proto_w_be(p + 1, (uint64_t)v, 2);
    }
    if (v >= -(1ll << 31)) {
        *p = 0xd2;
        return proto_w_be(p + 1, (uint64_t)v, 4);
    }
    *p = 0xd3;
    return proto_w_be(p + 1, (uint64_t)v, 8);
}

static inline uint8_t *proto_w_f64(uint8_t *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    *p = 0xcb;
    return proto_w_be(p + 1, u, 8);
}

static inline uint8_t *proto_w_bool(uint8_t *p, bool v)
{
    *p = v ? 0xc3 : 0xc2;
    return p + 1;
}

/* A str of fewer than 32 bytes (a key): fixstr. */
static inline uint8_t *proto_w_fixstr(uint8_t *p, const char *s, size_t n)
{
    *p = (uint8_t)(0xa0 | n);
    memcpy(p + 1, s, n);
    return p + 1 + n;
}
#define PROTO_W_KEY(p, lit) proto_w_fixstr((p), (lit), sizeof(lit) - 1)

/* Room for n more bytes at the end of sb (as msgpack_sbuffer_write grows
 * it); NULL when out of memory.  The caller writes there and adds what it
 * wrote to sb->size. */
uint8_t *proto_sbuffer_room(msgpack_sbuffer *sb, size_t n);

/* ---- replay, read straight from its bytes --------------------------------
 * The one request and answer that come by the hundred thousand a second
 * are recognised in their plain form without unpacking; anything else (a
 * key not listed, a key twice, another encoding of a value) is left to the
 * general path, which gives the same answer as before, errors included. */
enum {
    PROTO_RQ_PROGRAM = 1u << 0,
    PROTO_RQ_BATCH = 1u << 1,
    PROTO_RQ_BRANCH = 1u << 2,
    PROTO_RQ_WAIT_EVENT = 1u << 3,
    PROTO_RQ_SIGNAL_EVENT = 1u << 4,
    PROTO_RQ_ASYNC = 1u << 5,
};

typedef struct {
    uint32_t msgid;
    unsigned has;              /* PROTO_RQ_*: present and not nil */
    uint64_t program, batch, branch, wait_event, signal_event;
    bool async;
} proto_replay_req;

/* buf starts with [0, msgid, "replay", [{...}]] whose map holds only the
 * keys program, batch, branch, wait_event, signal_event (non-negative
 * integers, unsigned forms) and async (a boolean), each at most once, any
 * of them possibly nil (absent):  > 0: its length, *r filled;  0: what is
 * there so far is of that form, more bytes are needed;  -1: not that form. */
long proto_replay_req_scan(const uint8_t *buf, size_t len, proto_replay_req *r);

typedef struct {
    uint32_t msgid;
    bool graph;                /* path: "graph", else "eager" */
    bool has_bucket, has_batch, has_branch;
    int64_t bucket, batch, branch;
    bool fallback, captured, async;
    bool has_device_us;
    double device_us;          /* finite */
} proto_replay_ans;

/* buf starts with [1, msgid, nil, {...}] whose map holds path ("graph" or
 * "eager"), and at most once each of bucket, batch, branch (integers),
 * fallback, captured, async (booleans) and device_us (a float64), and no
 * other key: > 0, 0, -1 as for proto_replay_req_scan. */
long proto_replay_ans_scan(const uint8_t *buf, size_t len, proto_replay_ans *a);

#endif
