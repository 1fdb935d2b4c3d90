/* SPDX-License-Identifier: MIT */
/* proto/PROTOCOL.md section 14, the worked example, against a real daemon
 * (cpu backend, default settings): every hex dump is as long as its text
 * says; the requests are what a packer makes of the objects shown; the
 * daemon answers them with the bytes shown, except for what describes the
 * machine (the device map) and the session id; and the decoded text names
 * the same methods, ops and device values as the dump. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_daemon_proto_util.h"

#define MAX_DUMPS 8

typedef struct {
    uint8_t b[4096];
    size_t n;
    size_t stated;          /* "N bytes" in the text just before the dump */
} dump;

static bool dump_line(const char *p, size_t len)
{
    if (len < 16 || strncmp(p, "    ", 4) != 0 || p[12] != ' ' || p[13] != ' ')
        return false;
    for (int i = 4; i < 12; i++)
        if (!isxdigit((unsigned char)p[i]))
            return false;
    return true;
}

/* The last "N bytes" in a line of text, or keep *n. */
static void stated_bytes(const char *p, size_t len, size_t *n)
{
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)p[i]) || (i && isdigit((unsigned char)p[i - 1])))
            continue;
        char *end;
        unsigned long v = strtoul(p + i, &end, 10);
        if ((size_t)(end - p) + 6 <= len && strncmp(end, " bytes", 6) == 0)
            *n = v;
    }
}

/* The hex dumps ("    00000010  6f 63 ...  |ocol..|") of text, in order. */
static int parse_dumps(const char *text, dump *d, int max)
{
    int nd = 0;
    bool in = false;
    size_t stated = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (dump_line(p, len)) {
            if (!in) {
                if (nd == max)
                    return -1;
                d[nd].n = 0;
                d[nd++].stated = stated;
                in = true;
            }
            dump *cur = &d[nd - 1];
            for (const char *q = p + 14; q + 1 < p + len && !(q[0] == ' ' && q[1] == ' ');) {
                if (*q == ' ') {
                    q++;
                    continue;
                }
                unsigned v;
                if (sscanf(q, "%2x", &v) != 1 || cur->n == sizeof cur->b)
                    return -1;
                cur->b[cur->n++] = (uint8_t)v;
                q += 2;
            }
        } else {
            in = false;
            stated_bytes(p, len, &stated);
        }
        p = e ? e + 1 : p + len;
    }
    return nd;
}

static bool same_bytes(const dump *d, const void *p, size_t n)
{
    return d->n == n && memcmp(d->b, p, n) == 0;
}

/* The strings of the text's `"key": ["a", "b", ...]` list. */
static int text_list(const char *text, const char *key, char names[][32], int max)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\": [", key);
    const char *p = strstr(text, pat);
    if (!p)
        return -1;
    const char *end = strchr(p + strlen(pat), ']');
    int n = 0;
    for (p += strlen(pat); p && p < end && n < max;) {
        const char *a = strchr(p, '"');
        if (!a || a > end)
            break;
        const char *b = strchr(a + 1, '"');
        snprintf(names[n++], 32, "%.*s", (int)(b - a - 1), a + 1);
        p = b + 1;
    }
    return n;
}

static void check_list(const char *text, const char *key, const msgpack_object *live)
{
    char names[64][32];
    int n = text_list(text, key, names, 64);
    bool same = live && live->type == MSGPACK_OBJECT_ARRAY && n == (int)live->via.array.size;
    for (int i = 0; same && i < n; i++) {
        const msgpack_object *o = &live->via.array.ptr[i];
        same = o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(names[i]) &&
               memcmp(o->via.str.ptr, names[i], o->via.str.size) == 0;
    }
    CHECKF(same, "the decoded text's \"%s\" list is the daemon's (%d in the text, %d live)", key,
           n, live && live->type == MSGPACK_OBJECT_ARRAY ? (int)live->via.array.size : -1);
}

/* The hello result of the dump against the daemon's: equal but for the
 * device map's values and the session id. */
static void compare_hello(const msgpack_object *doc, const msgpack_object *live)
{
    if (!CHECK(doc->type == MSGPACK_OBJECT_ARRAY && doc->via.array.size == 4 &&
               live->type == MSGPACK_OBJECT_ARRAY && live->via.array.size == 4))
        return;
    for (int i = 0; i < 3; i++)
        CHECKF(msgpack_object_equal(doc->via.array.ptr[i], live->via.array.ptr[i]),
               "hello response element %d is as shown", i);
    const msgpack_object *dm = &doc->via.array.ptr[3], *lm = &live->via.array.ptr[3];
    if (!CHECK(dm->type == MSGPACK_OBJECT_MAP && lm->type == MSGPACK_OBJECT_MAP &&
               dm->via.map.size == lm->via.map.size))
        return;
    for (uint32_t i = 0; i < dm->via.map.size; i++) {
        const msgpack_object_kv *dk = &dm->via.map.ptr[i], *lk = &lm->via.map.ptr[i];
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)dk->key.via.str.size, dk->key.via.str.ptr);
        if (!CHECKF(msgpack_object_equal(dk->key, lk->key), "result key %u is \"%s\"", i, key))
            continue;
        if (strcmp(key, "session") == 0) {
            CHECK(dk->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                  lk->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER);
        } else if (strcmp(key, "device") == 0) {
            bool same = dk->val.type == MSGPACK_OBJECT_MAP && lk->val.type == MSGPACK_OBJECT_MAP &&
                        dk->val.via.map.size == lk->val.via.map.size;
            for (uint32_t j = 0; same && j < dk->val.via.map.size; j++) {
                const msgpack_object_kv *a = &dk->val.via.map.ptr[j], *b = &lk->val.via.map.ptr[j];
                same = msgpack_object_equal(a->key, b->key) && a->val.type == b->val.type;
            }
            CHECKF(same, "device: the same keys, in order, with values of the same types");
        } else {
            CHECKF(msgpack_object_equal(dk->val, lk->val), "\"%s\" is as shown", key);
        }
    }
}

/* The decoded text shows the dump's device values. */
static void check_device_text(const char *text, const msgpack_object *doc)
{
    const msgpack_object *dev = h_get(&doc->via.array.ptr[3], "device");
    for (uint32_t i = 0; dev && dev->type == MSGPACK_OBJECT_MAP && i < dev->via.map.size; i++) {
        const msgpack_object_kv *kv = &dev->via.map.ptr[i];
        char want[160];
        if (kv->val.type == MSGPACK_OBJECT_STR)
            snprintf(want, sizeof want, "\"%.*s\": \"%.*s\"", (int)kv->key.via.str.size,
                     kv->key.via.str.ptr, (int)kv->val.via.str.size, kv->val.via.str.ptr);
        else
            snprintf(want, sizeof want, "\"%.*s\": %llu", (int)kv->key.via.str.size,
                     kv->key.via.str.ptr, (unsigned long long)kv->val.via.u64);
        CHECK_CONTAINS(text, want);
    }
}

int main(void)
{
    h_init("test_daemon_doc", 300);
    h_section("PROTOCOL.md section 14 against the daemon");
    char *doc = h_read_file(GG_PROTOCOL_MD);
    char *sec = strstr(doc, "\n## 14. Worked example");
    if (!CHECKF(sec != NULL, "%s has section 14", GG_PROTOCOL_MD)) {
        free(doc);
        return h_finish();
    }
    static dump d[MAX_DUMPS];
    int nd = parse_dumps(sec, d, MAX_DUMPS);
    CHECKF(nd == 4, "four hex dumps: two requests, two responses (got %d)", nd);
    for (int i = 0; i < nd; i++)
        CHECKF(d[i].n == d[i].stated, "dump %d: %zu bytes, as its text says (%zu)", i + 1, d[i].n,
               d[i].stated);
    if (nd != 4) {
        free(doc);
        return h_finish();
    }

    /* the requests are the objects shown, packed */
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "protocol", 1);
    proto_pack_kv_str(&p.pk, "client", "doc");
    msgpack_sbuffer req1, req2;
    msgpack_sbuffer_init(&req1);
    msgpack_sbuffer_init(&req2);
    h_pack_request(&req1, 1, "hello", p.sb.data, p.sb.size);
    mp_free(&p);
    mp_init(&p);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_u64(&p.pk, "id", 99);
    h_pack_request(&req2, 2, "buffer.release", p.sb.data, p.sb.size);
    mp_free(&p);
    CHECKF(same_bytes(&d[0], req1.data, req1.size),
           "request 1 is hello {protocol: 1, client: \"doc\"}");
    CHECKF(same_bytes(&d[2], req2.data, req2.size), "request 2 is buffer.release {id: 99}");

    const char *args[] = {"--backend", "cpu", NULL};
    h_daemon dm;
    h_conn c;
    if (h_daemon_start(&dm, args, NULL) == 0 && CHECK(h_conn_open(&c, dm.sock) == 0)) {
        /* the dumped requests themselves go to the daemon */
        const msgpack_object *live;
        CHECK(h_conn_send(&c, d[0].b, d[0].n) == 0);
        if (CHECK(h_conn_recv(&c, T_RECV_MS, &live) == 1)) {
            msgpack_unpacked up;
            msgpack_unpacked_init(&up);
            size_t off = 0;
            if (CHECK(msgpack_unpack_next(&up, (const char *)d[1].b, d[1].n, &off) ==
                          MSGPACK_UNPACK_SUCCESS && off == d[1].n)) {
                compare_hello(&up.data, live);
                check_list(sec, "methods", h_get(&live->via.array.ptr[3], "methods"));
                check_list(sec, "ops", h_get(&live->via.array.ptr[3], "ops"));
                check_device_text(sec, &up.data);
            }
            msgpack_unpacked_destroy(&up);
        }
        CHECK(h_conn_send(&c, d[2].b, d[2].n) == 0);
        if (CHECK(h_conn_recv(&c, T_RECV_MS, &live) == 1))
            CHECKF(same_bytes(&d[3], c.buf, c.msg_len),
                   "the response to request 2 is byte for byte the dump (%zu bytes)", c.msg_len);
        h_conn_close(&c);
        h_daemon_stop(&dm);
    }
    if (h_fail)
        h_note("a daemon whose hello changed (a method, an op, a limit) needs section 14 "
               "regenerated: tests/scripts/gen-hello-doc %s %s (or cmake --build BUILD "
               "--target gen-hello-doc)", GG_DAEMON_PATH, GG_PROTOCOL_MD);
    msgpack_sbuffer_destroy(&req1);
    msgpack_sbuffer_destroy(&req2);
    free(doc);
    return h_finish();
}
