/* SPDX-License-Identifier: MIT */
/* Symbolic error codes on the wire: the errno names, stable across releases. */
#include "proto.h"

#include <errno.h>
#include <string.h>

static const struct {
    int err;
    const char *code;
} proto_codes[] = {
    {EINVAL, "EINVAL"},   {EPROTO, "EPROTO"},   {ENOENT, "ENOENT"},
    {EACCES, "EACCES"},   {EPERM, "EPERM"},     {EMSGSIZE, "EMSGSIZE"},
    {EBUSY, "EBUSY"},     {ENOMEM, "ENOMEM"},   {EIO, "EIO"},
    {ENOSYS, "ENOSYS"},   {ERANGE, "ERANGE"},   {EAGAIN, "EAGAIN"},
    {EEXIST, "EEXIST"},   {ENODEV, "ENODEV"},   {ESHUTDOWN, "ESHUTDOWN"},
    {ECONNREFUSED, "ECONNREFUSED"}, {ENOTCONN, "ENOTCONN"}, {ETIMEDOUT, "ETIMEDOUT"},
    {ECANCELED, "ECANCELED"}, {E2BIG, "E2BIG"}, {ENOSPC, "ENOSPC"}, {EFAULT, "EFAULT"}, {ENOTSUP, "ENOTSUP"},
    {EMFILE, "EMFILE"},   {ENFILE, "ENFILE"},   {EDQUOT, "EDQUOT"},   {EBADF, "EBADF"},
    {ECONNABORTED, "ECONNABORTED"},
};

const char *proto_errno_code(int neg_errno)
{
    int e = neg_errno < 0 ? -neg_errno : neg_errno;
    for (size_t i = 0; i < sizeof(proto_codes) / sizeof(proto_codes[0]); i++)
        if (proto_codes[i].err == e)
            return proto_codes[i].code;
    return "EIO";
}

int proto_errno_from_code(const char *code, size_t len)
{
    for (size_t i = 0; i < sizeof(proto_codes) / sizeof(proto_codes[0]); i++)
        if (strlen(proto_codes[i].code) == len && memcmp(proto_codes[i].code, code, len) == 0)
            return -proto_codes[i].err;
    return -EIO;
}

/* The table in order, for what lists every code (the metrics' error series,
 * the tests that check them). */
const char *proto_errno_code_at(size_t i)
{
    return i < sizeof(proto_codes) / sizeof(proto_codes[0]) ? proto_codes[i].code : NULL;
}
