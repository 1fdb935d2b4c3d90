/* SPDX-License-Identifier: MIT */
/* JSON in and out of the generic call: gg_client_call_json() packs a JSON
 * object as a method's params and hands back the answer as JSON, so a tool
 * or a language binding can reach every method (gfxgraphctl call, the
 * Python package's stats and health) without a MessagePack library of its
 * own. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_json.h"
#include "internal.h"
#include "priv.h"

#define JSON_MAX_DEPTH 32

typedef struct {
    const char *p, *end;
    msgpack_packer *pk;
    char *err;
    size_t errlen;
    const char *start;
} json_in;

static int json_fail(json_in *j, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(j->err, j->errlen, "JSON at offset %ld: %s", (long)(j->p - j->start), what);
    return -EINVAL;
}

static void json_ws(json_in *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int json_hex4(json_in *j, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        if (j->p >= j->end)
            return json_fail(j, "a \\u escape wants 4 hex digits");
        char c = *j->p++;
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return json_fail(j, "a \\u escape wants 4 hex digits");
        *v = *v << 4 | d;
    }
    return 0;
}

static size_t json_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string (the opening quote at j->p), packed as a MessagePack str. */
static int json_string(json_in *j)
{
    j->p++;
    /* the unescaped text is never longer than the escaped one */
    const char *q = j->p;
    while (q < j->end && *q != '"')
        q += *q == '\\' && q + 1 < j->end ? 2 : 1;
    if (q >= j->end)
        return json_fail(j, "a string without its closing quote");
    char *buf = malloc((size_t)(q - j->p) + 4);
    if (!buf)
        return json_fail(j, "out of memory");
    size_t n = 0;
    int rc = 0;
    while (*j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        if (c < 0x20) {
            rc = json_fail(j, "a control character in a string (escape it)");
            break;
        }
        if (c != '\\') {
            buf[n++] = (char)c;
            continue;
        }
        char e = *j->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char to[] = "\"\\/\b\f\n\r\t";
            buf[n++] = to[simple - "\"\\/bfnrt"];
            continue;
        }
        if (e != 'u') {
            rc = json_fail(j, "unknown escape '\\%c'", e);
            break;
        }
        unsigned cp, lo;
        if ((rc = json_hex4(j, &cp)) < 0)
            break;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') {
                rc = json_fail(j, "a lone surrogate in a \\u escape");
                break;
            }
            j->p += 2;
            if ((rc = json_hex4(j, &lo)) < 0)
                break;
            if (lo < 0xdc00 || lo > 0xdfff) {
                rc = json_fail(j, "a lone surrogate in a \\u escape");
                break;
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            rc = json_fail(j, "a lone surrogate in a \\u escape");
            break;
        }
        n += json_utf8(buf + n, cp);
    }
    if (rc == 0) {
        j->p++;
        msgpack_pack_str(j->pk, n);
        msgpack_pack_str_body(j->pk, buf, n);
    }
    free(buf);
    return rc;
}

/* A number: an integer when it has no fraction or exponent and fits, else
 * a float. */
static int json_number(json_in *j)
{
    const char *s = j->p;
    const char *q = s;
    if (q < j->end && *q == '-')
        q++;
    if (q >= j->end || *q < '0' || *q > '9')
        return json_fail(j, "not a value (a string wants double quotes)");
    bool integer = true;
    while (q < j->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' ||
                          *q == '+' || *q == '-')) {
        if (*q == '.' || *q == 'e' || *q == 'E')
            integer = false;
        q++;
    }
    char tmp[64];
    if ((size_t)(q - s) >= sizeof tmp)
        return json_fail(j, "a number of more than 63 characters");
    memcpy(tmp, s, (size_t)(q - s));
    tmp[q - s] = '\0';
    char *endp;
    errno = 0;
    if (integer && tmp[0] == '-') {
        long long v = strtoll(tmp, &endp, 10);
        if (*endp == '\0' && errno == 0) {
            msgpack_pack_int64(j->pk, v);
            j->p = q;
            return 0;
        }
    } else if (integer) {
        unsigned long long v = strtoull(tmp, &endp, 10);
        if (*endp == '\0' && errno == 0) {
            msgpack_pack_uint64(j->pk, v);
            j->p = q;
            return 0;
        }
    }
    errno = 0;
    double d = strtod(tmp, &endp);
    if (*endp != '\0' || !isfinite(d))
        return json_fail(j, "'%s' is not a number", tmp);
    msgpack_pack_double(j->pk, d);
    j->p = q;
    return 0;
}

static bool json_word(json_in *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return false;
    j->p += n;
    return true;
}

static int json_value(json_in *j, int depth);

/* The elements of an array or the pairs of an object go into a scratch
 * packer first: MessagePack states the count before them. */
static int json_container(json_in *j, int depth, bool object)
{
    if (depth >= JSON_MAX_DEPTH)
        return json_fail(j, "nested more than %d deep", JSON_MAX_DEPTH);
    j->p++;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk, *outer = j->pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    j->pk = &pk;
    uint32_t n = 0;
    int rc = 0;
    char close = object ? '}' : ']';
    json_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
    } else {
        for (;;) {
            json_ws(j);
            if (object) {
                if (j->p >= j->end || *j->p != '"') {
                    rc = json_fail(j, "an object's key must be a string");
                    break;
                }
                if ((rc = json_string(j)) < 0)
                    break;
                json_ws(j);
                if (j->p >= j->end || *j->p != ':') {
                    rc = json_fail(j, "':' expected after an object's key");
                    break;
                }
                j->p++;
            }
            if ((rc = json_value(j, depth + 1)) < 0)
                break;
            n++;
            json_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == close) {
                j->p++;
                break;
            }
            rc = json_fail(j, "',' or '%c' expected", close);
            break;
        }
    }
    j->pk = outer;
    if (rc == 0) {
        if (object)
            msgpack_pack_map(outer, n);
        else
            msgpack_pack_array(outer, n);
        if (sb.size)
            msgpack_pack_str_body(outer, sb.data, sb.size);   /* raw bytes, no header */
    }
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static int json_value(json_in *j, int depth)
{
    json_ws(j);
    if (j->p >= j->end)
        return json_fail(j, "a value expected, the text ended");
    switch (*j->p) {
    case '{':
        return json_container(j, depth, true);
    case '[':
        return json_container(j, depth, false);
    case '"':
        return json_string(j);
    case 't':
        if (json_word(j, "true")) {
            msgpack_pack_true(j->pk);
            return 0;
        }
        break;
    case 'f':
        if (json_word(j, "false")) {
            msgpack_pack_false(j->pk);
            return 0;
        }
        break;
    case 'n':
        if (json_word(j, "null")) {
            msgpack_pack_nil(j->pk);
            return 0;
        }
        break;
    default:
        return json_number(j);
    }
    return json_fail(j, "not a value (a string wants double quotes)");
}

int client_json_pack(const char *text, msgpack_sbuffer *out, char *err, size_t errlen)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    json_in j = {text, text + strlen(text), &pk, err, errlen, text};
    int rc = json_value(&j, 0);
    if (rc < 0)
        return rc;
    json_ws(&j);
    if (j.p != j.end)
        return json_fail(&j, "text after the value");
    return 0;
}

int gg_client_call_json(gg_client *c, const char *method, const char *params_json,
                        char **result_json)
{
    if (result_json)
        *result_json = NULL;
    if (!c)
        return -EINVAL;
    if (!method || !*method || !result_json)
        return client_fail_locked(c, -EINVAL, "gg_client_call_json: method and result_json "
                                  "are required");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    const char *p = params_json;
    while (p && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    if (p && *p) {
        char err[256];
        if (*p != '{') {
            msgpack_sbuffer_destroy(&sb);
            return client_fail_locked(c, -EINVAL, "gg_client_call_json: params must be a JSON "
                                      "object ({\"key\": value, ...}), not '%.20s'", p);
        }
        if (client_json_pack(p, &sb, err, sizeof err) < 0) {
            msgpack_sbuffer_destroy(&sb);
            return client_fail_locked(c, -EINVAL, "gg_client_call_json: params: %s", err);
        }
    }
    const msgpack_object *r;
    /* an empty object is no params at all, as on the wire */
    bool none = sb.size == 1 && (uint8_t)sb.data[0] == 0x80;
    pthread_mutex_lock(&c->mu);
    int rc = client_call_locked(c, method, none ? NULL : sb.data, none ? 0 : sb.size, &r);
    if (rc == 0) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (f) {
            ctl_json_print(f, r);
            if (fclose(f) != 0) {
                free(buf);
                buf = NULL;
            }
        }
        if (!buf)
            rc = client_fail(c, -ENOMEM, "out of memory writing the '%s' answer as JSON",
                             method);
        *result_json = buf;
    }
    pthread_mutex_unlock(&c->mu);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

void gg_client_free_json(char *json)
{
    free(json);
}
