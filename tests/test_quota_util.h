/* SPDX-License-Identifier: MIT */
/* Helpers of test_quota.c and test_stats_scope.c: a shm object, hello,
 * buffer.register, a small program define and prepare over raw sockets. */
#ifndef GG_TEST_QUOTA_UTIL_H
#define GG_TEST_QUOTA_UTIL_H

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_daemon_proto_util.h"

static uint32_t q_id = 100;

static inline void q_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* A fresh shm object of size bytes (sparse); its name to name. */
static inline bool q_shm(char *name, size_t len, uint64_t size)
{
    h_unique(name, len, "/gg-quota");
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return false;
    bool ok = ftruncate(fd, (off_t)size) == 0;
    close(fd);
    if (!ok)
        shm_unlink(name);
    return ok;
}

/* buffer.register: the id, or 0 with the error code and message. */
static inline uint64_t q_register(h_conn *c, const char *shm, uint64_t off, uint64_t size,
                                  char *code, size_t clen, char *msg, size_t mlen)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 3);
    q_str(&p.pk, "handle");
    msgpack_pack_bin(&p.pk, strlen(shm));
    msgpack_pack_bin_body(&p.pk, shm, strlen(shm));
    proto_pack_kv_u64(&p.pk, "offset", off);
    proto_pack_kv_u64(&p.pk, "size", size);
    const msgpack_object *r = NULL, *err = NULL;
    uint64_t id = 0;
    if (code)
        code[0] = '\0';
    if (msg)
        msg[0] = '\0';
    if (call(c, q_id++, "buffer.register", &p, &r, &err) == 1) {
        if (!err && r)
            id = h_getu(r, "id");
        else if (err) {
            if (code)
                h_err_code(err, code, clen);
            if (msg)
                h_gets(err, "message", msg, mlen);
        }
    }
    mp_free(&p);
    return id;
}

/* program.define: y = copy(s), s = copy(x), x/y in buffer bid ([batch, 4]
 * f32 at 0 and 4096), s scratch; buckets 1, 2, 4 .. top (a power of two up
 * to 256: the program's scratch arena is top x 16 bytes, at least 256);
 * nbr branches. */
static inline uint64_t q_define_b(h_conn *c, uint64_t bid, const char *name, int nbr, int top,
                                  char *code, size_t clen, char *msg, size_t mlen)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 4);
    q_str(&p.pk, "name");
    q_str(&p.pk, name);
    q_str(&p.pk, "buckets");
    int nb = 0;
    for (int b = 1; b <= top; b *= 2)
        nb++;
    msgpack_pack_array(&p.pk, (size_t)nb);
    for (int b = 1; b <= top; b *= 2)
        msgpack_pack_int(&p.pk, b);
    q_str(&p.pk, "tensors");
    msgpack_pack_map(&p.pk, 3);
    for (int t = 0; t < 2; t++) {
        q_str(&p.pk, t ? "y" : "x");
        msgpack_pack_map(&p.pk, 4);
        proto_pack_kv_u64(&p.pk, "buffer", bid);
        proto_pack_kv_u64(&p.pk, "offset", t ? 4096 : 0);
        proto_pack_kv_str(&p.pk, "dtype", "f32");
        q_str(&p.pk, "shape");
        msgpack_pack_array(&p.pk, 2);
        q_str(&p.pk, "batch");
        msgpack_pack_int(&p.pk, 4);
    }
    q_str(&p.pk, "s");
    msgpack_pack_map(&p.pk, 3);
    proto_pack_kv_bool(&p.pk, "scratch", true);
    proto_pack_kv_str(&p.pk, "dtype", "f32");
    q_str(&p.pk, "shape");
    msgpack_pack_array(&p.pk, 2);
    q_str(&p.pk, "batch");
    msgpack_pack_int(&p.pk, 4);
    q_str(&p.pk, "branches");
    msgpack_pack_array(&p.pk, (size_t)nbr);
    for (int b = 0; b < nbr; b++) {
        msgpack_pack_array(&p.pk, 2);
        for (int n = 0; n < 2; n++) {
            msgpack_pack_map(&p.pk, 3);
            proto_pack_kv_str(&p.pk, "op", "copy");
            q_str(&p.pk, "inputs");
            msgpack_pack_array(&p.pk, 1);
            q_str(&p.pk, n ? "s" : "x");
            q_str(&p.pk, "outputs");
            msgpack_pack_array(&p.pk, 1);
            q_str(&p.pk, n ? "y" : "s");
        }
    }
    const msgpack_object *r = NULL, *err = NULL;
    uint64_t id = 0;
    if (code)
        code[0] = '\0';
    if (msg)
        msg[0] = '\0';
    if (call(c, q_id++, "program.define", &p, &r, &err) == 1) {
        if (!err && r)
            id = h_getu(r, "id");
        else if (err) {
            if (code)
                h_err_code(err, code, clen);
            if (msg)
                h_gets(err, "message", msg, mlen);
            h_note("program.define: %s", msg ? msg : "");
        }
    }
    mp_free(&p);
    return id;
}

/* The same with buckets 1, 2, 4, 8 (a 256-byte arena). */
static inline uint64_t q_define(h_conn *c, uint64_t bid, const char *name, int nbr, char *code,
                                size_t clen, char *msg, size_t mlen)
{
    return q_define_b(c, bid, name, nbr, 8, code, clen, msg, mlen);
}

/* program.prepare of every branch and bucket: the graphs captured. */
static inline bool q_prepare(h_conn *c, uint64_t pid, int nbr)
{
    bool ok = true;
    for (int b = 0; b < nbr; b++) {
        mp p;
        mp_init(&p);
        msgpack_pack_map(&p.pk, 2);
        proto_pack_kv_u64(&p.pk, "id", pid);
        proto_pack_kv_u64(&p.pk, "branch", (uint64_t)b);
        const msgpack_object *r;
        ok = call_ok(c, q_id++, "program.prepare", &p, &r) && ok;
        mp_free(&p);
    }
    return ok;
}

/* The socket reachable by nobody (the harness's directory is private). */
static inline void q_open_socket(const h_daemon *d)
{
    chmod(d->dir, 0755);
    chmod(d->sock, 0666);
}

#endif
