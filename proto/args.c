/* SPDX-License-Identifier: MIT */
/* Typed, range-checked lookups of named arguments in a params map.  Every
 * failure names the field and what was expected, since these messages go
 * straight back to the client. */
#include "proto.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int proto_fail(proto_errbuf *e, int err, const char *fmt, ...)
{
    if (e && e->msg && e->len && e->msg[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, e->len, fmt, ap);
        va_end(ap);
    }
    return err;
}

bool proto_str_eq(const msgpack_object *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           memcmp(o->via.str.ptr, s, n) == 0;
}

const msgpack_object *proto_map_get(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++)
        if (proto_str_eq(&map->via.map.ptr[i].key, key))
            return &map->via.map.ptr[i].val;
    return NULL;
}

bool proto_obj_u64(const msgpack_object *o, uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return false;
    *v = o->via.u64;
    return true;
}

bool proto_obj_i64(const msgpack_object *o, int64_t *v)
{
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *v = o->via.i64;
        return true;
    }
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
        *v = (int64_t)o->via.u64;
        return true;
    }
    return false;
}

bool proto_obj_f64(const msgpack_object *o, double *v)
{
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        *v = o->via.f64;
        return isfinite(*v);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *v = (double)o->via.u64;
        return true;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *v = (double)o->via.i64;
        return true;
    default:
        return false;
    }
}

static const msgpack_object *args_find(const msgpack_object *map, const char *key,
                                       bool required, int *rc, proto_errbuf *e)
{
    const msgpack_object *o = proto_map_get(map, key);
    if (!o || (o->type == MSGPACK_OBJECT_NIL && !required)) {
        *rc = required ? proto_fail(e, -EINVAL, "missing required argument '%s'", key)
                       : -ENOENT;
        return NULL;
    }
    *rc = 0;
    return o;
}

int proto_get_str(const msgpack_object *map, const char *key, bool required, const char **s,
                  size_t *len, proto_errbuf *e)
{
    int rc;
    const msgpack_object *o = args_find(map, key, required, &rc, e);
    if (!o)
        return rc;
    if (o->type != MSGPACK_OBJECT_STR)
        return proto_fail(e, -EINVAL, "argument '%s' must be a string", key);
    *s = o->via.str.ptr;
    if (len)
        *len = o->via.str.size;
    return 0;
}

int proto_get_u64(const msgpack_object *map, const char *key, bool required, uint64_t max,
                  uint64_t *v, proto_errbuf *e)
{
    int rc;
    const msgpack_object *o = args_find(map, key, required, &rc, e);
    if (!o)
        return rc;
    uint64_t x;
    if (!proto_obj_u64(o, &x))
        return proto_fail(e, -EINVAL, "argument '%s' must be a non-negative integer", key);
    if (x > max)
        return proto_fail(e, -EINVAL, "argument '%s' is %llu; the most allowed is %llu", key,
                          (unsigned long long)x, (unsigned long long)max);
    *v = x;
    return 0;
}

int proto_get_i64(const msgpack_object *map, const char *key, bool required, int64_t *v,
                  proto_errbuf *e)
{
    int rc;
    const msgpack_object *o = args_find(map, key, required, &rc, e);
    if (!o)
        return rc;
    if (!proto_obj_i64(o, v))
        return proto_fail(e, -EINVAL, "argument '%s' must be an integer", key);
    return 0;
}

int proto_get_f64(const msgpack_object *map, const char *key, bool required, double *v,
                  proto_errbuf *e)
{
    int rc;
    const msgpack_object *o = args_find(map, key, required, &rc, e);
    if (!o)
        return rc;
    if (!proto_obj_f64(o, v))
        return proto_fail(e, -EINVAL, "argument '%s' must be a finite number", key);
    return 0;
}

int proto_get_bool(const msgpack_object *map, const char *key, bool required, bool *v,
                   proto_errbuf *e)
{
    int rc;
    const msgpack_object *o = args_find(map, key, required, &rc, e);
    if (!o)
        return rc;
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return proto_fail(e, -EINVAL, "argument '%s' must be true or false", key);
    *v = o->via.boolean;
    return 0;
}

int proto_get_map(const msgpack_object *map, const char *key, bool required,
                  const msgpack_object **v, proto_errbuf *e)
{
    int rc;
    const msgpack_object *o = args_find(map, key, required, &rc, e);
    if (!o)
        return rc;
    if (o->type != MSGPACK_OBJECT_MAP)
        return proto_fail(e, -EINVAL, "argument '%s' must be a map", key);
    *v = o;
    return 0;
}

int proto_get_array(const msgpack_object *map, const char *key, bool required,
                    const msgpack_object **v, proto_errbuf *e)
{
    int rc;
    const msgpack_object *o = args_find(map, key, required, &rc, e);
    if (!o)
        return rc;
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return proto_fail(e, -EINVAL, "argument '%s' must be an array", key);
    *v = o;
    return 0;
}

int proto_get_bin(const msgpack_object *map, const char *key, bool required, const void **p,
                  size_t *len, proto_errbuf *e)
{
    int rc;
    const msgpack_object *o = args_find(map, key, required, &rc, e);
    if (!o)
        return rc;
    if (o->type == MSGPACK_OBJECT_BIN) {
        *p = o->via.bin.ptr;
        *len = o->via.bin.size;
        return 0;
    }
    if (o->type == MSGPACK_OBJECT_STR) {
        *p = o->via.str.ptr;
        *len = o->via.str.size;
        return 0;
    }
    return proto_fail(e, -EINVAL, "argument '%s' must be bytes (bin) or a string", key);
}

int proto_strdup_obj(const msgpack_object *o, char *dst, size_t cap)
{
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size >= cap)
        return -EINVAL;
    memcpy(dst, o->via.str.ptr, o->via.str.size);
    dst[o->via.str.size] = '\0';
    return 0;
}

int proto_check_keys(const msgpack_object *map, const char *const *accepted, const char *what,
                     proto_errbuf *e)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return 0;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        bool known = false;
        for (size_t j = 0; accepted && accepted[j] && !known; j++)
            known = proto_str_eq(k, accepted[j]);
        if (known)
            continue;
        char list[256] = "", name[65] = "";
        size_t n = 0;
        for (size_t j = 0; accepted && accepted[j] && n < sizeof(list); j++)
            n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", j ? ", " : "", accepted[j]);
        if (!accepted || !accepted[0])
            snprintf(list, sizeof(list), "none");
        if (k->type != MSGPACK_OBJECT_STR)
            return proto_fail(e, -EINVAL, "%s: keys must be strings (accepted: %s)", what, list);
        /* the key is the client's bytes: at most 64 of them, cleaned */
        proto_utf8_clean(name, sizeof(name), k->via.str.ptr, k->via.str.size);
        return proto_fail(e, -EINVAL, "%s: unknown key '%s' (accepted: %s)", what, name, list);
    }
    return 0;
}
