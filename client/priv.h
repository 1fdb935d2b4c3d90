/* Private to the library's own sources: the client object and the helpers
 * the modules share. */
#ifndef GG_CLIENT_PRIV_H
#define GG_CLIENT_PRIV_H

#include <msgpack.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "internal.h"
#include "proto.h"

/* room for a connect failure that names two socket paths and their errors */
#define GG_CLIENT_ERRLEN 1024

struct gg_client {
    pthread_mutex_t mu;
    int fd;                         /* -1 when not connected */
    bool reached;                   /* last connect() reached the socket */
    int timeout_ms;
    uint32_t next_msgid;
    char path[GG_CLIENT_PATH_MAX];

    /* receive side: rbuf[0..rlen) holds bytes read; the current message is
     * rbuf[0..msg_len), unpacked into up (which points into rbuf). */
    uint8_t *rbuf;
    size_t rlen, rcap;
    size_t msg_len;
    proto_frame frame;
    msgpack_unpacked up;
    size_t max_recv;                /* limit for one message from the daemon */
    size_t max_send;                /* limit for one request (from hello) */

    msgpack_sbuffer sb;             /* outgoing request */

    /* an "error" notification seen on this connection */
    bool notified;
    char notify_code[32];
    char notify_msg[GG_CLIENT_ERRLEN];

    char err[GG_CLIENT_ERRLEN];
    char err_code[32];

    /* from hello */
    char backend[16];
    char version[32];
    char device_name[128];
    char device_arch[64];
    uint64_t session;
    int max_batch;
    size_t server_max_msg;
};

_Static_assert(GG_CLIENT_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path),
               "GG_CLIENT_PATH_MAX is sun_path's size");

/* Record a failure: code from the errno (neg), message printf-style.
 * Returns neg. */
int client_fail(gg_client *c, int neg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with the code given as a string (the daemon's). */
void client_set_error(gg_client *c, const char *code, size_t code_len, const char *msg,
                      size_t msg_len);
void client_clear_error(gg_client *c);

/* Call with c->mu held (io.c).  params: bytes of one map, or NULL. */
int client_call_locked(gg_client *c, const char *method, const void *params, size_t len,
                       const msgpack_object **result);
/* Drop the connection and the receive state (mutex held). */
void client_drop(gg_client *c);

/* Copy a str object into dst (truncating), "" when o is not a str. */
void client_copy_str(const msgpack_object *o, char *dst, size_t cap);

/* The params of a call built in an sbuffer: helpers so every module packs the
 * same way. */
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} client_params;

void client_params_init(client_params *p);
void client_params_free(client_params *p);
/* Reads a result (mutex held, so no other call can invalidate it). */
typedef int (*client_read_fn)(gg_client *c, const msgpack_object *result, void *arg);
/* Call method with the map packed in p; read (may be NULL) gets the result.
 * The mutex is taken inside. */
int client_call_params(gg_client *c, const char *method, client_params *p, client_read_fn read,
                       void *arg);
/* client_fail under the mutex, for argument checks before a call. */
int client_fail_locked(gg_client *c, int neg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
