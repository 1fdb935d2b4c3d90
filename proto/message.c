/* SPDX-License-Identifier: MIT */
/* Envelope decode and encode for MessagePack-RPC messages. */
#include "proto.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int msg_bad(char *err, size_t errlen, const char *why)
{
    snprintf(err, errlen, "%s", why);
    return -EPROTO;
}

/* params must be [] or [map]. */
static int msg_params(const msgpack_object *p, const msgpack_object **out, char *err,
                      size_t errlen)
{
    if (p->type != MSGPACK_OBJECT_ARRAY)
        return msg_bad(err, errlen, "params must be an array: [] or [{name: value, ...}]");
    if (p->via.array.size == 0) {
        *out = NULL;
        return 0;
    }
    if (p->via.array.size != 1 || p->via.array.ptr[0].type != MSGPACK_OBJECT_MAP)
        return msg_bad(err, errlen, "params must hold exactly one map of named arguments");
    *out = &p->via.array.ptr[0];
    return 0;
}

msgpack_unpack_return proto_unpack(const uint8_t *data, size_t len, msgpack_zone *zone,
                                   msgpack_object *obj)
{
    size_t off = 0;
    msgpack_unpack_return r = msgpack_unpack((const char *)data, len, &off, zone, obj);
    if (r == MSGPACK_UNPACK_SUCCESS || r == MSGPACK_UNPACK_NOMEM_ERROR)
        return r;
    return MSGPACK_UNPACK_PARSE_ERROR;   /* short, or more than one value */
}

bool proto_msg_peek(const uint8_t *d, size_t len, uint32_t *msgid, const char **method,
                    size_t *method_len)
{
    size_t i;
    if (len >= 1 && d[0] == 0x94)
        i = 1;
    else if (len >= 3 && d[0] == 0xdc && d[1] == 0 && d[2] == 4)
        i = 3;
    else if (len >= 5 && d[0] == 0xdd && d[1] == 0 && d[2] == 0 && d[3] == 0 && d[4] == 4)
        i = 5;
    else
        return false;
    if (i >= len || d[i++] != 0x00)         /* type 0: a request */
        return false;
    if (i >= len)
        return false;
    uint8_t b = d[i++];
    uint64_t id = 0;
    int n = b <= 0x7f ? 0 : b == 0xcc ? 1 : b == 0xcd ? 2 : b == 0xce ? 4 : -1;
    if (n < 0 || len - i < (size_t)n)
        return false;
    if (n == 0)
        id = b;
    for (int k = 0; k < n; k++)
        id = id << 8 | d[i++];
    if (i >= len)
        return false;
    b = d[i++];
    size_t slen;
    if (b >= 0xa0 && b <= 0xbf) {
        slen = b & 0x1f;
    } else if (b == 0xd9 && i < len) {
        slen = d[i++];
    } else if (b == 0xda && len - i >= 2) {
        slen = (size_t)d[i] << 8 | d[i + 1];
        i += 2;
    } else {
        return false;
    }
    if (len - i < slen)
        return false;
    *msgid = (uint32_t)id;
    *method = (const char *)d + i;
    *method_len = slen;
    return true;
}

int proto_msg_decode(const msgpack_object *o, proto_msg *m, bool *msgid_ok, char *err,
                     size_t errlen)
{
    memset(m, 0, sizeof(*m));
    *msgid_ok = false;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 3)
        return msg_bad(err, errlen, "a message must be an array: [0, msgid, method, params]");
    const msgpack_object *a = o->via.array.ptr;
    uint32_t n = o->via.array.size;
    uint64_t type;
    if (!proto_obj_u64(&a[0], &type) || type > GG_MSG_NOTIFY)
        return msg_bad(err, errlen, "message type must be 0 (request), 1 (response) or 2 (notification)");
    m->type = (int)type;
    if (m->type == GG_MSG_NOTIFY) {
        if (n != 3)
            return msg_bad(err, errlen, "a notification is [2, method, params]");
        if (a[1].type != MSGPACK_OBJECT_STR)
            return msg_bad(err, errlen, "method must be a string");
        /* msgpack-c gives an empty str a NULL pointer: callers get "" */
        m->method = a[1].via.str.size ? a[1].via.str.ptr : "";
        m->method_len = a[1].via.str.size;
        return msg_params(&a[2], &m->params, err, errlen);
    }
    uint64_t id;
    if (n != 4) {
        /* a request of the wrong length whose msgid reads is still answered */
        if (m->type == GG_MSG_REQUEST && proto_obj_u64(&a[1], &id) && id <= UINT32_MAX) {
            m->msgid = (uint32_t)id;
            *msgid_ok = true;
        }
        return msg_bad(err, errlen, m->type == GG_MSG_REQUEST
                                        ? "a request is [0, msgid, method, params]"
                                        : "a response is [1, msgid, error, result]");
    }
    if (!proto_obj_u64(&a[1], &id) || id > UINT32_MAX)
        return msg_bad(err, errlen, "msgid must be an unsigned 32-bit integer");
    m->msgid = (uint32_t)id;
    if (m->type == GG_MSG_RESPONSE) {
        m->error = a[2].type == MSGPACK_OBJECT_NIL ? NULL : &a[2];
        m->result = &a[3];
        *msgid_ok = true;
        return 0;
    }
    *msgid_ok = true;
    if (a[2].type != MSGPACK_OBJECT_STR)
        return msg_bad(err, errlen, "method must be a string");
    m->method = a[2].via.str.size ? a[2].via.str.ptr : "";
    m->method_len = a[2].via.str.size;
    return msg_params(&a[3], &m->params, err, errlen);
}

void proto_pack_strn(msgpack_packer *pk, const char *s, size_t n)
{
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void proto_pack_str(msgpack_packer *pk, const char *s)
{
    proto_pack_strn(pk, s, strlen(s));
}

void proto_pack_key(msgpack_packer *pk, const char *k)
{
    proto_pack_str(pk, k);
}

void proto_pack_kv_str(msgpack_packer *pk, const char *k, const char *v)
{
    proto_pack_str(pk, k);
    proto_pack_str(pk, v);
}

void proto_pack_kv_u64(msgpack_packer *pk, const char *k, uint64_t v)
{
    proto_pack_str(pk, k);
    msgpack_pack_uint64(pk, v);
}

void proto_pack_kv_i64(msgpack_packer *pk, const char *k, int64_t v)
{
    proto_pack_str(pk, k);
    msgpack_pack_int64(pk, v);
}

void proto_pack_kv_f64(msgpack_packer *pk, const char *k, double v)
{
    proto_pack_str(pk, k);
    msgpack_pack_double(pk, v);
}

void proto_pack_kv_bool(msgpack_packer *pk, const char *k, bool v)
{
    proto_pack_str(pk, k);
    if (v)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}

static void proto_pack_error_map(msgpack_packer *pk, int neg_errno, const char *message)
{
    msgpack_pack_map(pk, 2);
    proto_pack_kv_str(pk, "code", proto_errno_code(neg_errno));
    /* Messages often quote what the client sent, or were cut to fit a
     * buffer: cleaned here, so no error can carry invalid UTF-8. */
    proto_pack_key(pk, "message");
    proto_pack_text(pk, message ? message : "", message ? strlen(message) : 0);
}

void proto_pack_error_response(msgpack_packer *pk, uint32_t msgid, int neg_errno,
                               const char *message)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, GG_MSG_RESPONSE);
    msgpack_pack_uint32(pk, msgid);
    proto_pack_error_map(pk, neg_errno, message);
    msgpack_pack_nil(pk);
}

void proto_pack_error_notify(msgpack_packer *pk, int neg_errno, const char *message)
{
    msgpack_pack_array(pk, 3);
    msgpack_pack_uint8(pk, GG_MSG_NOTIFY);
    proto_pack_str(pk, "error");
    msgpack_pack_array(pk, 1);
    proto_pack_error_map(pk, neg_errno, message);
}

void proto_pack_request_head(msgpack_packer *pk, uint32_t msgid, const char *method)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, GG_MSG_REQUEST);
    msgpack_pack_uint32(pk, msgid);
    proto_pack_str(pk, method);
}

void proto_pack_response_head(msgpack_packer *pk, uint32_t msgid)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, GG_MSG_RESPONSE);
    msgpack_pack_uint32(pk, msgid);
    msgpack_pack_nil(pk);
}

uint8_t *proto_sbuffer_room(msgpack_sbuffer *sb, size_t n)
{
    if (sb->alloc - sb->size < n) {
        size_t ns = sb->alloc ? sb->alloc * 2 : MSGPACK_SBUFFER_INIT_SIZE;
        while (ns < sb->size + n)
            ns *= 2;
        char *d = realloc(sb->data, ns);
        if (!d)
            return NULL;
        sb->data = d;
        sb->alloc = ns;
    }
    return (uint8_t *)sb->data + sb->size;
}

/* ---- replay, read straight from its bytes ---------------------------------- */

/* A reader over buf[0..len): each step either takes what it wants or says
 * why not (short: more bytes needed; bad: not the plain form). */
typedef struct {
    const uint8_t *p, *end;
    bool short_, bad;
} scan_rd;

static uint64_t scan_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static bool scan_need(scan_rd *r, size_t n)
{
    if ((size_t)(r->end - r->p) < n) {
        r->short_ = true;
        return false;
    }
    return true;
}

static int scan_byte(scan_rd *r)
{
    if (!scan_need(r, 1))
        return -1;
    return *r->p++;
}

/* An unsigned integer in any of its unsigned forms. */
static bool scan_uint(scan_rd *r, int b, uint64_t *v)
{
    int n;
    if (b <= 0x7f) {
        *v = (uint64_t)b;
        return true;
    }
    switch (b) {
    case 0xcc: n = 1; break;
    case 0xcd: n = 2; break;
    case 0xce: n = 4; break;
    case 0xcf: n = 8; break;
    default:
        r->bad = true;
        return false;
    }
    if (!scan_need(r, (size_t)n))
        return false;
    *v = scan_be(r->p, n);
    r->p += n;
    return true;
}

/* An integer in any of its forms. */
static bool scan_int(scan_rd *r, int b, int64_t *v)
{
    int n;
    if (b >= 0xe0) {
        *v = (int8_t)(uint8_t)b;
        return true;
    }
    switch (b) {
    case 0xd0: n = 1; break;
    case 0xd1: n = 2; break;
    case 0xd2: n = 4; break;
    case 0xd3: n = 8; break;
    default: {
        uint64_t u;
        if (!scan_uint(r, b, &u))
            return false;
        if (u > INT64_MAX) {
            r->bad = true;
            return false;
        }
        *v = (int64_t)u;
        return true;
    }
    }
    if (!scan_need(r, (size_t)n))
        return false;
    uint64_t u = scan_be(r->p, n);
    r->p += n;
    /* sign-extend from n bytes */
    int sh = 64 - 8 * n;
    *v = sh ? (int64_t)(u << sh) >> sh : (int64_t)u;
    return true;
}

/* A fixstr key: its bytes and length, or bad. */
static bool scan_key(scan_rd *r, const uint8_t **k, size_t *n)
{
    int b = scan_byte(r);
    if (b < 0)
        return false;
    if (b < 0xa0 || b > 0xbf) {
        r->bad = true;
        return false;
    }
    *n = (size_t)(b & 0x1f);
    if (!scan_need(r, *n))
        return false;
    *k = r->p;
    r->p += *n;
    return true;
}

#define SCAN_IS(k, n, lit) ((n) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

static long scan_result(const scan_rd *r, const uint8_t *buf)
{
    if (r->bad)
        return -1;
    if (r->short_)
        return 0;
    return (long)(r->p - buf);
}

/* An envelope's start, [type, msgid, ...: a 4-array, its type, a msgid
 * that fits 32 bits.  false: short, or bad (another form). */
static bool scan_head(scan_rd *r, int type, uint32_t *msgid)
{
    uint64_t id;
    int b;
    if ((b = scan_byte(r)) < 0)
        return false;
    if (b != 0x94 || (b = scan_byte(r)) < 0 || b != type) {
        r->bad = b >= 0;
        return false;
    }
    if ((b = scan_byte(r)) < 0 || !scan_uint(r, b, &id))
        return false;
    if (id > UINT32_MAX) {
        r->bad = true;
        return false;
    }
    *msgid = (uint32_t)id;
    return true;
}

/* A fixmap's header: its entry count.  false: short, or bad. */
static bool scan_fixmap(scan_rd *r, int *n)
{
    int b = scan_byte(r);
    if (b < 0)
        return false;
    if (b < 0x80 || b > 0x8f) {
        r->bad = true;
        return false;
    }
    *n = b & 0x0f;
    return true;
}

long proto_replay_req_scan(const uint8_t *buf, size_t len, proto_replay_req *q)
{
    scan_rd r = {.p = buf, .end = buf + len};
    memset(q, 0, sizeof(*q));
    int b, n;
    /* [0, msgid, "replay", [ {  */
    if (!scan_head(&r, 0x00, &q->msgid))
        goto out;
    size_t have = (size_t)(r.end - r.p) < 8 ? (size_t)(r.end - r.p) : 8;
    if (memcmp(r.p, "\xa6replay\x91", have) != 0) {
        r.bad = true;               /* another method: known from its first byte off */
        goto out;
    }
    if (!scan_need(&r, 8))
        goto out;
    r.p += 8;
    if (!scan_fixmap(&r, &n))
        goto out;
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *k;
        size_t kn;
        if (!scan_key(&r, &k, &kn))
            goto out;
        unsigned bit = 0;
        uint64_t *dst = NULL;
        switch (kn) {      /* by length first: one compare per key */
        case 7:
            if (SCAN_IS(k, kn, "program")) {
                bit = PROTO_RQ_PROGRAM;
                dst = &q->program;
            }
            break;
        case 5:
            if (SCAN_IS(k, kn, "batch")) {
                bit = PROTO_RQ_BATCH;
                dst = &q->batch;
            } else if (SCAN_IS(k, kn, "async")) {
                bit = PROTO_RQ_ASYNC;
            }
            break;
        case 6:
            if (SCAN_IS(k, kn, "branch")) {
                bit = PROTO_RQ_BRANCH;
                dst = &q->branch;
            }
            break;
        case 10:
            if (SCAN_IS(k, kn, "wait_event")) {
                bit = PROTO_RQ_WAIT_EVENT;
                dst = &q->wait_event;
            }
            break;
        case 12:
            if (SCAN_IS(k, kn, "signal_event")) {
                bit = PROTO_RQ_SIGNAL_EVENT;
                dst = &q->signal_event;
            }
            break;
        }
        if (!bit) {
            r.bad = true;
            goto out;
        }
        if (seen & bit) {
            r.bad = true;
            goto out;
        }
        seen |= bit;
        if ((b = scan_byte(&r)) < 0)
            goto out;
        if (b == 0xc0)
            continue;                  /* nil: as if absent */
        if (dst) {
            if (!scan_uint(&r, b, dst))
                goto out;
        } else if (b == 0xc2 || b == 0xc3) {
            q->async = b == 0xc3;
        } else {
            r.bad = true;
            goto out;
        }
        q->has |= bit;
    }
out:
    return scan_result(&r, buf);
}

long proto_replay_ans_scan(const uint8_t *buf, size_t len, proto_replay_ans *a)
{
    scan_rd r = {.p = buf, .end = buf + len};
    memset(a, 0, sizeof(*a));
    int b, n;
    /* [1, msgid, nil, {  */
    if (!scan_head(&r, 0x01, &a->msgid))
        goto out;
    if ((b = scan_byte(&r)) < 0)
        goto out;
    if (b != 0xc0) {
        r.bad = true;
        goto out;
    }
    if (!scan_fixmap(&r, &n))
        goto out;
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *k;
        size_t kn;
        if (!scan_key(&r, &k, &kn) || (b = scan_byte(&r)) < 0)
            goto out;
        /* the key, by length first: one compare per key */
        enum { K_NONE, K_PATH, K_BUCKET, K_BATCH, K_BRANCH, K_FALLBACK, K_CAPTURED, K_ASYNC,
               K_DEVICE_US } key = K_NONE;
        switch (kn) {
        case 4: key = SCAN_IS(k, kn, "path") ? K_PATH : K_NONE; break;
        case 5: key = SCAN_IS(k, kn, "batch") ? K_BATCH : SCAN_IS(k, kn, "async") ? K_ASYNC
                                                                                  : K_NONE;
            break;
        case 6: key = SCAN_IS(k, kn, "bucket") ? K_BUCKET : SCAN_IS(k, kn, "branch") ? K_BRANCH
                                                                                     : K_NONE;
            break;
        case 8: key = SCAN_IS(k, kn, "fallback") ? K_FALLBACK
                      : SCAN_IS(k, kn, "captured") ? K_CAPTURED : K_NONE;
            break;
        case 9: key = SCAN_IS(k, kn, "device_us") ? K_DEVICE_US : K_NONE; break;
        }
        unsigned bit = 1u << key;
        int64_t v;
        switch (key) {
        case K_PATH:
            if (!scan_need(&r, 5))
                goto out;
            if (b == 0xa5 && memcmp(r.p, "graph", 5) == 0)
                a->graph = true;
            else if (!(b == 0xa5 && memcmp(r.p, "eager", 5) == 0)) {
                r.bad = true;
                goto out;
            }
            r.p += 5;
            break;
        case K_BUCKET: case K_BATCH: case K_BRANCH:
            if (!scan_int(&r, b, &v))
                goto out;
            if (key == K_BUCKET) {
                a->has_bucket = true;
                a->bucket = v;
            } else if (key == K_BATCH) {
                a->has_batch = true;
                a->batch = v;
            } else {
                a->has_branch = true;
                a->branch = v;
            }
            break;
        case K_FALLBACK: case K_CAPTURED: case K_ASYNC:
            if (b != 0xc2 && b != 0xc3) {
                r.bad = true;
                goto out;
            }
            *(key == K_FALLBACK ? &a->fallback : key == K_CAPTURED ? &a->captured
                                                                   : &a->async) = b == 0xc3;
            break;
        case K_DEVICE_US: {
            if (b != 0xcb) {
                r.bad = true;
                goto out;
            }
            if (!scan_need(&r, 8))
                goto out;
            uint64_t u = scan_be(r.p, 8);
            r.p += 8;
            double d;
            memcpy(&d, &u, sizeof d);
            if (isfinite(d)) {
                a->has_device_us = true;
                a->device_us = d;
            }
            break;
        }
        default:
            r.bad = true;
            goto out;
        }
        if (seen & bit) {
            r.bad = true;
            goto out;
        }
        seen |= bit;
    }
    if (!(seen & (1u << 1)) && !r.short_)
        r.bad = true;                  /* no path: the general path's error */
out:
    return scan_result(&r, buf);
}
