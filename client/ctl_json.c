/* SPDX-License-Identifier: MIT */
/* msgpack_object -> JSON, and table cells, for gfxgraphctl. */
#include "ctl_json.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static void json_string(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t k = utf8_seq(p + i, n - i);
        if (k == 0) {
            fputs("\\ufffd", f);
            i++;
            continue;
        }
        if (k > 1) {
            fwrite(p + i, 1, k, f);
            i += k;
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
        i++;
    }
    fputc('"', f);
}

void ctl_json_number(char *buf, size_t len, double v, int is_f32)
{
    if (!isfinite(v)) {
        snprintf(buf, len, "null");
        return;
    }
    /* a whole number in plain digits: %g's shortest form of 50 is 5e+01 */
    if (v == floor(v) && fabs(v) < 1e17) {
        snprintf(buf, len, "%.0f.0", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (is_f32 ? (float)back == (float)v : back == v)
            break;
    }
    if (!strpbrk(buf, ".eE")) {
        size_t n = strlen(buf);
        if (n + 2 < len)
            memcpy(buf + n, ".0", 3);
    }
}

static void json_hex(FILE *f, const char *p, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", (unsigned char)p[i]);
    fputc('"', f);
}

static bool json_scalar(const msgpack_object *o)
{
    return o->type != MSGPACK_OBJECT_ARRAY && o->type != MSGPACK_OBJECT_MAP &&
           o->type != MSGPACK_OBJECT_EXT;
}

static void json_value(FILE *f, const msgpack_object *o, int depth, bool pretty);

static void json_indent(FILE *f, int depth, bool pretty)
{
    if (!pretty)
        return;
    fputc('\n', f);
    for (int i = 0; i < depth; i++)
        fputs("  ", f);
}

/* A key that is not a string: its compact JSON text, as a string. */
static void json_key(FILE *f, const msgpack_object *k)
{
    if (k->type == MSGPACK_OBJECT_STR) {
        json_string(f, k->via.str.ptr, k->via.str.size);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) {
        fputs("\"?\"", f);
        return;
    }
    json_value(m, k, 0, false);
    fclose(m);
    json_string(f, text, len);
    free(text);
}

static void json_value(FILE *f, const msgpack_object *o, int depth, bool pretty)
{
    char num[64];
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        fputs("null", f);
        break;
    case MSGPACK_OBJECT_BOOLEAN:
        fputs(o->via.boolean ? "true" : "false", f);
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        fprintf(f, "%llu", (unsigned long long)o->via.u64);
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        fprintf(f, "%lld", (long long)o->via.i64);
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        ctl_json_number(num, sizeof num, o->via.f64, o->type == MSGPACK_OBJECT_FLOAT32);
        fputs(num, f);
        break;
    case MSGPACK_OBJECT_STR:
        json_string(f, o->via.str.ptr, o->via.str.size);
        break;
    case MSGPACK_OBJECT_BIN:
        json_hex(f, o->via.bin.ptr, o->via.bin.size);
        break;
    case MSGPACK_OBJECT_EXT:
        fprintf(f, "{\"ext\": %d, \"data\": ", (int)o->via.ext.type);
        json_hex(f, o->via.ext.ptr, o->via.ext.size);
        fputc('}', f);
        break;
    case MSGPACK_OBJECT_ARRAY: {
        uint32_t n = o->via.array.size;
        if (n == 0) {
            fputs("[]", f);
            break;
        }
        bool inline_ = !pretty;
        if (pretty) {
            inline_ = n <= 32;
            for (uint32_t i = 0; inline_ && i < n; i++)
                inline_ = json_scalar(&o->via.array.ptr[i]);
        }
        fputc('[', f);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                fputs(inline_ ? ", " : ",", f);
            if (!inline_)
                json_indent(f, depth + 1, pretty);
            json_value(f, &o->via.array.ptr[i], depth + 1, pretty);
        }
        if (!inline_)
            json_indent(f, depth, pretty);
        fputc(']', f);
        break;
    }
    case MSGPACK_OBJECT_MAP: {
        uint32_t n = o->via.map.size;
        if (n == 0) {
            fputs("{}", f);
            break;
        }
        fputc('{', f);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                fputs(pretty ? "," : ", ", f);
            json_indent(f, depth + 1, pretty);
            json_key(f, &o->via.map.ptr[i].key);
            fputs(": ", f);
            json_value(f, &o->via.map.ptr[i].val, depth + 1, pretty);
        }
        json_indent(f, depth, pretty);
        fputc('}', f);
        break;
    }
    default:
        fputs("null", f);
    }
}

void ctl_json_print(FILE *f, const msgpack_object *o)
{
    json_value(f, o, 0, true);
    fputc('\n', f);
}

/* ---- table cells --------------------------------------------------------- */

/* Append s as printable UTF-8: control characters and bytes that are not
 * UTF-8 become '?'. */
static void cell_append(char *buf, size_t len, size_t *pos, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, n - i);
        if (k > 1) {
            if (*pos + k >= len)
                break;
            memcpy(buf + *pos, p + i, k);
            *pos += k;
            i += k;
            continue;
        }
        if (*pos + 1 >= len)
            break;
        unsigned char c = p[i];
        buf[(*pos)++] = (k == 0 || c < 0x20 || c == 0x7f) ? '?' : (char)c;
        i++;
    }
    buf[*pos < len ? *pos : len - 1] = '\0';
}

size_t ctl_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            w++;
    return w;
}

static void cell_value(char *buf, size_t len, size_t *pos, const msgpack_object *o,
                       int decimals)
{
    char tmp[64];
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        snprintf(tmp, sizeof tmp, "-");
        break;
    case MSGPACK_OBJECT_BOOLEAN:
        snprintf(tmp, sizeof tmp, "%s", o->via.boolean ? "yes" : "no");
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)o->via.u64);
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        snprintf(tmp, sizeof tmp, "%lld", (long long)o->via.i64);
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        snprintf(tmp, sizeof tmp, "%.*f", decimals, o->via.f64);
        break;
    case MSGPACK_OBJECT_STR:
        cell_append(buf, len, pos, o->via.str.ptr, o->via.str.size);
        return;
    case MSGPACK_OBJECT_ARRAY:
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i)
                cell_append(buf, len, pos, ",", 1);
            cell_value(buf, len, pos, &o->via.array.ptr[i], decimals);
        }
        return;
    default: {
        char *text = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&text, &n);
        if (!m)
            return;
        json_value(m, o, 0, false);
        fclose(m);
        cell_append(buf, len, pos, text, n);
        free(text);
        return;
    }
    }
    cell_append(buf, len, pos, tmp, strlen(tmp));
}

void ctl_cell(char *buf, size_t len, const msgpack_object *o, int decimals)
{
    size_t pos = 0;
    if (!len)
        return;
    buf[0] = '\0';
    if (!o) {
        snprintf(buf, len, "-");
        return;
    }
    cell_value(buf, len, &pos, o, decimals);
    if (pos == 0)
        snprintf(buf, len, "-");
}
