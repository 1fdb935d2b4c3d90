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

#define GG_PROTOCOL_VERSION 1
#define GG_PROTO_DEFAULT_MAX_MSG (16u << 20)
#define GG_PROTO_MAX_DEPTH 16

enum { GG_MSG_REQUEST = 0, GG_MSG_RESPONSE = 1, GG_MSG_NOTIFY = 2 };

/* ---- errors ------------------------------------------------------------
 * Functions return 0 / a count, or a negative errno.  On the wire an error
 * carries the errno's symbolic name ("EINVAL") and a message. */
const char *proto_errno_code(int neg_errno);     /* "EINVAL"; "EIO" if unknown */
int proto_errno_from_code(const char *code, size_t len);  /* -EINVAL; -EIO if unknown */

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
/* Copy a str object into a NUL-terminated buffer; -EINVAL if it does not fit. */
int proto_strdup_obj(const msgpack_object *o, char *dst, size_t cap);

#endif
