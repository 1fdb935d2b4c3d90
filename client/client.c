/* SPDX-License-Identifier: MIT */
/* The client object: connect and hello, what the daemon said, the end of a connection. */
#include "priv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define GG_CLIENT_DEFAULT_NAME "libgfxgraph-client"

/* ---- lifetime ------------------------------------------------------------ */

/* The connection was dropped: its tickets and its region go with it. */
static void client_lost(gg_client *c)
{
    client_sticket_reset(c);
    client_fp_drop(c);
}

static const client_io_events client_events = {
    .lost = client_lost,
    .response = client_sticket_offer,
    /* the daemon takes the region's submissions before a socket call's */
    .before_call = client_fp_drain,
};

gg_client *gg_client_new(void)
{
    gg_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->io_ev = &client_events;
    c->fd = -1;
    c->next_msgid = 1;
    c->max_recv = GG_PROTO_DEFAULT_MAX_MSG;
    c->max_send = GG_PROTO_DEFAULT_MAX_MSG;
    c->fd_received = -1;
    msgpack_zone_init(&c->zone, MSGPACK_ZONE_CHUNK_SIZE);
    msgpack_sbuffer_init(&c->sb);
    snprintf(c->fp_status, sizeof c->fp_status, "not connected");
    return c;
}

static void client_forget_server(gg_client *c)
{
    c->backend[0] = c->version[0] = c->device_name[0] = c->device_arch[0] = '\0';
    c->session = 0;
    c->max_batch = 0;
    c->server_max_msg = 0;
    c->max_inflight = 0;
    c->max_recv = GG_PROTO_DEFAULT_MAX_MSG;
    c->max_send = GG_PROTO_DEFAULT_MAX_MSG;
}

void gg_client_disconnect(gg_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    client_io_drop(c);
    client_forget_server(c);
    pthread_mutex_unlock(&c->mu);
}

void gg_client_close(gg_client *c)
{
    if (!c)
        return;
    client_io_drop(c);
    msgpack_zone_destroy(&c->zone);
    msgpack_sbuffer_destroy(&c->sb);
    free(c->rbuf);
    free(c->st);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

bool gg_client_connected(const gg_client *c)
{
    return c && c->fd >= 0;
}

void gg_client_set_timeout(gg_client *c, int timeout_ms)
{
    if (c)
        c->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
}

bool gg_client_socket_reached(const gg_client *c)
{
    return c && c->reached;
}

/* ---- connect ------------------------------------------------------------- */

/* The system service's socket.  A variable rather than the macro itself so
 * that the project's tests can point the fallback at a socket they own
 * (gg_client_test_set_system_socket, internal.h); nothing outside the tests
 * sets it, and the shared library does not export the setter. */
static char client_system_socket[GG_CLIENT_PATH_MAX] = GG_CLIENT_SYSTEM_SOCKET;

int gg_client_test_set_system_socket(const char *path)
{
    if (!path || !*path)
        path = GG_CLIENT_SYSTEM_SOCKET;
    if (strlen(path) >= sizeof client_system_socket)
        return -ENAMETOOLONG;
    memcpy(client_system_socket, path, strlen(path) + 1);
    return 0;
}

/* buf = dir followed by name; its length or -ENAMETOOLONG. */
static int client_put_path(char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf(buf, len, "%s%s", dir, name);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

int gg_client_socket_candidates(const char *env_socket, const char *xdg_runtime_dir, bool root,
                                char (*paths)[GG_CLIENT_PATH_MAX], int max)
{
    if (max < 1)
        return -EINVAL;
    int rc;
    if (env_socket && *env_socket)
        rc = client_put_path(paths[0], sizeof paths[0], env_socket, "");
    else if (root || !xdg_runtime_dir || !*xdg_runtime_dir)
        rc = client_put_path(paths[0], sizeof paths[0], client_system_socket, "");
    else {
        /* A user's own daemon comes first; a user in group gfxgraph who
         * runs none is served by the system service. */
        rc = client_put_path(paths[0], sizeof paths[0], xdg_runtime_dir,
                             "/gfxgraph/gfxgraphd.sock");
        if (rc < 0)
            return rc;
        if (max < 2)
            return 1;
        rc = client_put_path(paths[1], sizeof paths[1], client_system_socket, "");
        return rc < 0 ? rc : 2;
    }
    return rc < 0 ? rc : 1;
}

int gg_client_default_sockets(char (*paths)[GG_CLIENT_PATH_MAX], int max)
{
    return gg_client_socket_candidates(getenv("GFXGRAPH_SOCKET"), getenv("XDG_RUNTIME_DIR"),
                                       geteuid() == 0, paths, max);
}

int gg_client_default_socket(char *buf, size_t len)
{
    char paths[1][GG_CLIENT_PATH_MAX];
    int rc = gg_client_default_sockets(paths, 1);
    if (rc < 0) {
        /* the caller still gets the start of the path, as before */
        if (len)
            snprintf(buf, len, "%s", paths[0]);
        return rc;
    }
    return client_put_path(buf, len, paths[0], "");
}

static const char *client_connect_hint(int err)
{
    switch (err) {
    case EACCES:
    case EPERM:
        return "is your user allowed to use the socket? (see its owner, group and mode; the "
               "system service's socket is for group gfxgraph)";
    case EAGAIN:
        return "gfxgraphd is not accepting connections right now; try again";
    default:
        return NULL;
    }
}

/* tried paths[0..ntried), errs[i] the errno of each: the message names every
 * one of them, and how to start a daemon where the client looked. */
static int client_connect_fail(gg_client *c, char (*paths)[GG_CLIENT_PATH_MAX],
                               const int *errs, int ntried)
{
    int err = errs[ntried - 1];
    const char *hint = client_connect_hint(err);
    if (ntried == 1) {
        if (hint)
            return client_fail(c, -err, "cannot connect to %s: %s; %s", paths[0],
                               strerror(err), hint);
        return client_fail(c, -err,
                           "cannot connect to %s: %s; is gfxgraphd running? start it with "
                           "`systemctl start gfxgraphd` or `gfxgraphd --socket %s`",
                           paths[0], strerror(err), paths[0]);
    }
    char tried[GG_CLIENT_ERRLEN / 2];
    size_t n = 0;
    for (int i = 0; i < ntried && n < sizeof tried; i++) {
        int w = snprintf(tried + n, sizeof tried - n, "%s%s (%s)", i ? ", then " : "",
                         paths[i], strerror(errs[i]));
        if (w < 0)
            break;
        n += (size_t)w;
    }
    if (hint)
        return client_fail(c, -err, "cannot connect to gfxgraphd: tried %s; %s", tried, hint);
    return client_fail(c, -err,
                       "cannot connect to gfxgraphd: tried %s; is gfxgraphd running? start "
                       "the system service with `systemctl start gfxgraphd`, or your own "
                       "with `gfxgraphd --socket %s`",
                       tried, paths[0]);
}

/* connect() that survives EINTR: the connection then completes on its own,
 * and poll + SO_ERROR tell how it went. */
static int client_socket_connect(int fd, const struct sockaddr_un *sa)
{
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0)
        return 0;
    if (errno != EINTR && errno != EINPROGRESS)
        return -errno;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int r = poll(&p, 1, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        break;
    }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        return -errno;
    return soerr ? -soerr : 0;
}

static void client_read_hello(gg_client *c, const msgpack_object *r)
{
    client_copy_str(proto_map_get(r, "backend"), c->backend, sizeof c->backend);
    client_copy_str(proto_map_get(r, "version"), c->version, sizeof c->version);
    uint64_t v;
    const msgpack_object *o = proto_map_get(r, "session");
    c->session = o && proto_obj_u64(o, &v) ? v : 0;
    const msgpack_object *dev = proto_map_get(r, "device");
    client_copy_str(proto_map_get(dev, "name"), c->device_name, sizeof c->device_name);
    client_copy_str(proto_map_get(dev, "arch"), c->device_arch, sizeof c->device_arch);
    const msgpack_object *lim = proto_map_get(r, "limits");
    o = proto_map_get(lim, "max_batch");
    c->max_batch = o && proto_obj_u64(o, &v) && v <= INT32_MAX ? (int)v : 0;
    o = proto_map_get(lim, "max_inflight");
    c->max_inflight = o && proto_obj_u64(o, &v) && v <= UINT32_MAX ? (uint32_t)v : 0;
    o = proto_map_get(lim, "max_message_size");
    if (o && proto_obj_u64(o, &v) && v >= 1024 && v <= SIZE_MAX / 2) {
        c->server_max_msg = (size_t)v;
        c->max_send = (size_t)v;
        /* Answers are bounded by the daemon, not by its limit for requests:
         * accept at least the default. */
        c->max_recv = v > GG_PROTO_DEFAULT_MAX_MSG ? (size_t)v : GG_PROTO_DEFAULT_MAX_MSG;
        proto_frame_init(&c->frame, c->max_recv);
    }
    client_fp_hello(c, r);
}

static int client_hello(gg_client *c, const char *name)
{
    client_params p;
    client_params_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "protocol", GG_CLIENT_PROTOCOL);
    proto_pack_kv_str(&p.pk, "client", name);
    const msgpack_object *r;
    int rc = client_call_locked(c, "hello", p.sb.data, p.sb.size, &r);
    client_params_free(&p);
    if (rc < 0)
        return rc;
    uint64_t proto;
    const msgpack_object *o = proto_map_get(r, "protocol");
    if (!o || !proto_obj_u64(o, &proto))
        return client_fail(c, -EPROTO, "gfxgraphd at %s answered hello without a protocol "
                           "version; is it a gfxgraphd socket?", c->path);
    if (proto != GG_CLIENT_PROTOCOL)
        return client_fail(c, -EPROTO, "gfxgraphd at %s speaks protocol %llu; this library "
                           "speaks %d: upgrade the older of the two", c->path,
                           (unsigned long long)proto, GG_CLIENT_PROTOCOL);
    client_read_hello(c, r);
    return 0;
}

int gg_client_connect(gg_client *c, const char *socket_path, const char *client_name)
{
    if (!c)
        return -EINVAL;
    pthread_mutex_lock(&c->mu);
    client_clear_error(c);
    c->reached = false;
    int rc;
    if (c->fd >= 0) {
        rc = client_fail(c, -EISCONN, "already connected to %s", c->path);
        goto out;
    }
    client_forget_server(c);
    c->notified = false;
    proto_frame_init(&c->frame, c->max_recv);
    /* a new connection: tickets of the old one are refused (0 skipped, so
     * a zero ticket is never valid) */
    c->gen = (uint16_t)((c->gen + 1) & 0x7fff);
    if (!c->gen)
        c->gen = 1;
    client_fp_env(c);
    char paths[2][GG_CLIENT_PATH_MAX];
    int npaths = 1;
    if (socket_path && *socket_path) {
        if (strlen(socket_path) >= sizeof c->path) {
            memcpy(c->path, socket_path, sizeof c->path - 1);
            c->path[sizeof c->path - 1] = '\0';
            rc = client_fail(c, -ENAMETOOLONG, "socket path is %zu bytes; at most %zu fit: %s",
                             strlen(socket_path), sizeof c->path - 1, socket_path);
            goto out;
        }
        memcpy(paths[0], socket_path, strlen(socket_path) + 1);
    } else if ((npaths = gg_client_default_sockets(paths, 2)) < 0) {
        snprintf(c->path, sizeof c->path, "%s", paths[0]);
        rc = client_fail(c, -ENAMETOOLONG, "the default socket path is too long: %s... "
                         "(set GFXGRAPH_SOCKET to a shorter one)", c->path);
        goto out;
    }

    int fd = -1, errs[2];
    int tried = 0;
    rc = 0;
    while (tried < npaths) {
        memcpy(c->path, paths[tried], strlen(paths[tried]) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = client_fail(c, -errno, "cannot create a socket: %s", strerror(errno));
            goto out;
        }
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
        rc = client_socket_connect(fd, &sa);
        if (rc == 0)
            break;
        close(fd);
        fd = -1;
        errs[tried++] = -rc;
        /* Only a socket that is not there (or that nobody serves) sends the
         * client on to the next path; any other failure is the answer. */
        if (rc != -ENOENT && rc != -ECONNREFUSED)
            break;
    }
    if (rc < 0) {
        rc = client_connect_fail(c, paths, errs, tried);
        goto out;
    }
    c->reached = true;
    c->fd = fd;
    rc = client_hello(c, client_name && *client_name ? client_name : GG_CLIENT_DEFAULT_NAME);
    if (rc < 0) {
        client_io_drop(c);
        client_forget_server(c);
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- server info --------------------------------------------------------- */

const char *gg_client_socket_path(const gg_client *c)
{
    return c ? c->path : "";
}

const char *gg_client_backend(const gg_client *c)
{
    return c ? c->backend : "";
}

const char *gg_client_server_version(const gg_client *c)
{
    return c ? c->version : "";
}

const char *gg_client_device_name(const gg_client *c)
{
    return c ? c->device_name : "";
}

const char *gg_client_device_arch(const gg_client *c)
{
    return c ? c->device_arch : "";
}

uint64_t gg_client_session_id(const gg_client *c)
{
    return c ? c->session : 0;
}

int gg_client_max_batch(const gg_client *c)
{
    return c ? c->max_batch : 0;
}

size_t gg_client_max_message_size(const gg_client *c)
{
    return c ? c->server_max_msg : 0;
}
