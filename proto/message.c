/* Envelope decode and encode for MessagePack-RPC messages. */
#include "proto.h"

#include <errno.h>
#include <stdio.h>
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
        m->method = a[1].via.str.ptr;
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
    m->method = a[2].via.str.ptr;
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
