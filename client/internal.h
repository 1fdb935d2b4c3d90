/* SPDX-License-Identifier: MIT */
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

/* Pack the JSON text (one value, nothing after it) into out as MessagePack:
 * integers that fit as ints, other numbers as float64.  0, or -EINVAL with
 * where and what went wrong in err. */
int client_json_pack(const char *text, msgpack_sbuffer *out, char *err, size_t errlen);

/* Whether the socket itself was reached by the last gg_client_connect(): a
 * failed connect with this false could not reach the daemon at all; with it
 * true the daemon answered hello with an error (or closed the connection). */
bool gg_client_socket_reached(const gg_client *c);

/* ---- the default socket -------------------------------------------------- */

#define GG_CLIENT_PATH_MAX 108  /* sun_path, with its NUL */

/* The paths gg_client_connect() tries, in order, when it is given none:
 *   env_socket ($GFXGRAPH_SOCKET) when set and not empty: that path alone;
 *   else for root, or with xdg_runtime_dir unset or empty: the system
 *     service's socket alone;
 *   else xdg_runtime_dir/gfxgraph/gfxgraphd.sock, then the system service's
 *     socket (tried when the first is missing or refuses: ENOENT,
 *     ECONNREFUSED).
 * Writes at most max paths; returns how many (1 or 2), or -ENAMETOOLONG
 * (the path that did not fit holds its truncated start). */
int gg_client_socket_candidates(const char *env_socket, const char *xdg_runtime_dir, bool root,
                                char (*paths)[GG_CLIENT_PATH_MAX], int max);
/* The same for this process: $GFXGRAPH_SOCKET, $XDG_RUNTIME_DIR, euid 0. */
int gg_client_default_sockets(char (*paths)[GG_CLIENT_PATH_MAX], int max);

/* Tests only: the system service's socket the rule above falls back to
 * (copied; NULL or "": GG_CLIENT_SYSTEM_SOCKET again).  0 or -ENAMETOOLONG.  A test cannot bind
 * /run/gfxgraph in CI; production code never calls this, and the shared
 * library does not export it, so installed clients always use the real
 * path. */
int gg_client_test_set_system_socket(const char *path);

#endif
