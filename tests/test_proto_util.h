/* SPDX-License-Identifier: MIT */
/* Helpers shared by the protocol unit tests (test_proto_frame.c,
 * test_proto_message.c): a msgpack buffer with its packer. */
#ifndef GG_TEST_PROTO_UTIL_H
#define GG_TEST_PROTO_UTIL_H

#include <msgpack.h>
#include <stddef.h>

typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} buf;

static inline void buf_init(buf *b)
{
    msgpack_sbuffer_init(&b->sb);
    msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
}

static inline void buf_free(buf *b)
{
    msgpack_sbuffer_destroy(&b->sb);
}

static inline void buf_raw(buf *b, const void *p, size_t n)
{
    msgpack_sbuffer_write(&b->sb, p, n);
}

#endif
