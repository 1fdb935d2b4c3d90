/* Internal interface of libgfxgraph-client for the project's own tools
 * (gfxgraphctl) and tests: not installed, not exported from the shared
 * library.  Link the static target gg_client_static to use it. */
#ifndef GG_CLIENT_INTERNAL_H
#define GG_CLIENT_INTERNAL_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

#include "gfxgraph/client.h"

/* Call method with params, the packed bytes of exactly one MessagePack map
 * (the named arguments), or params == NULL / len 0 for none (wire: []).
 * On success *result points at the response's result object, valid until the
 * next call on c (from any thread), gg_client_disconnect() or
 * gg_client_close().  0 or a negative errno; the daemon's error code and
 * message are the client's last error. */
int gg_client_call(gg_client *c, const char *method, const void *params, size_t params_len,
                   const msgpack_object **result);

/* Whether the socket itself was reached by the last gg_client_connect(): a
 * failed connect with this false could not reach the daemon at all; with it
 * true the daemon answered hello with an error (or closed the connection). */
bool gg_client_socket_reached(const gg_client *c);

#endif
