/* SPDX-License-Identifier: MIT */
/* A call's failure as the caller reads it: the message and the code that
 * gg_client_last_error() and gg_client_last_error_code() return. */
#include "priv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int client_fail(gg_client *c, int neg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    snprintf(c->err_code, sizeof c->err_code, "%s", proto_errno_code(neg));
    /* proto_errno_code knows the codes of the wire; name the local ones it
     * does not know rather than calling them EIO. */
    if (strcmp(c->err_code, "EIO") == 0 && neg != -EIO) {
        const char *n = strerrorname_np(-neg);
        if (n)
            snprintf(c->err_code, sizeof c->err_code, "%s", n);
    }
    return neg;
}

int client_fail_locked(gg_client *c, int neg, const char *fmt, ...)
{
    char msg[GG_CLIENT_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->mu);
    client_fail(c, neg, "%s", msg);
    pthread_mutex_unlock(&c->mu);
    return neg;
}

void client_set_error(gg_client *c, const char *code, size_t code_len, const char *msg,
                      size_t msg_len)
{
    if (code_len >= sizeof c->err_code)
        code_len = sizeof c->err_code - 1;
    memcpy(c->err_code, code, code_len);
    c->err_code[code_len] = '\0';
    if (msg_len >= sizeof c->err)
        msg_len = sizeof c->err - 1;
    memcpy(c->err, msg, msg_len);
    c->err[msg_len] = '\0';
}

void client_clear_error(gg_client *c)
{
    c->err[0] = '\0';
    c->err_code[0] = '\0';
}

const char *gg_client_last_error(const gg_client *c)
{
    return c ? c->err : "no client (NULL)";
}

const char *gg_client_last_error_code(const gg_client *c)
{
    return c ? c->err_code : "EINVAL";
}
