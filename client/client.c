/* The client object: connect and hello, errors, what the daemon said. */
#include "priv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define GG_CLIENT_DEFAULT_NAME "libgfxgraph-client"

/* ---- errors -------------------------------------------------------------- */

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

void client_copy_str(const msgpack_object *o, char *dst, size_t cap)
{
    if (!cap)
        return;
    if (!o || o->type != MSGPACK_OBJECT_STR) {
        dst[0] = '\0';
        return;
    }
    size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
    memcpy(dst, o->via.str.ptr, n);
    dst[n] = '\0';
}

const char *gg_client_last_error(const gg_client *c)
{
    return c ? c->err : "no client (NULL)";
}

const char *gg_client_last_error_code(const gg_client *c)
{
    return c ? c->err_code : "EINVAL";
}

/* ---- lifetime ------------------------------------------------------------ */

gg_client *gg_client_new(void)
{
    gg_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->fd = -1;
    c->next_msgid = 1;
    c->max_recv = GG_PROTO_DEFAULT_MAX_MSG;
    c->max_send = GG_PROTO_DEFAULT_MAX_MSG;
    msgpack_unpacked_init(&c->up);
    msgpack_sbuffer_init(&c->sb);
    return c;
}

static void client_forget_server(gg_client *c)
{
    c->backend[0] = c->version[0] = c->device_name[0] = c->device_arch[0] = '\0';
    c->session = 0;
    c->max_batch = 0;
    c->server_max_msg = 0;
    c->max_recv = GG_PROTO_DEFAULT_MAX_MSG;
    c->max_send = GG_PROTO_DEFAULT_MAX_MSG;
}

void client_drop(gg_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->rlen = 0;
    c->msg_len = 0;
    proto_frame_reset(&c->frame);
}

void gg_client_disconnect(gg_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    client_drop(c);
    client_forget_server(c);
    pthread_mutex_unlock(&c->mu);
}

void gg_client_close(gg_client *c)
{
    if (!c)
        return;
    client_drop(c);
    msgpack_unpacked_destroy(&c->up);
    msgpack_sbuffer_destroy(&c->sb);
    free(c->rbuf);
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

int gg_client_default_socket(char *buf, size_t len)
{
    const char *env = getenv("GFXGRAPH_SOCKET");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (env && *env)
        n = snprintf(buf, len, "%s", env);
    else if (geteuid() == 0 || !xdg || !*xdg)
        n = snprintf(buf, len, "%s", GG_CLIENT_SYSTEM_SOCKET);
    else
        n = snprintf(buf, len, "%s/gfxgraph/gfxgraphd.sock", xdg);
    if (n < 0 || (size_t)n >= len)
        return -ENAMETOOLONG;
    return n;
}

static int client_connect_fail(gg_client *c, int err)
{
    const char *hint;
    switch (err) {
    case EACCES:
    case EPERM:
        hint = "is your user allowed to use the socket? (see its owner, group and mode)";
        break;
    case EAGAIN:
        hint = "gfxgraphd is not accepting connections right now; try again";
        break;
    default:
        hint = NULL;
    }
    if (hint)
        return client_fail(c, -err, "cannot connect to %s: %s; %s", c->path, strerror(err),
                           hint);
    return client_fail(c, -err,
                       "cannot connect to %s: %s; is gfxgraphd running? start it with "
                       "`systemctl start gfxgraphd` or `gfxgraphd --socket %s`",
                       c->path, strerror(err), c->path);
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
    o = proto_map_get(lim, "max_message_size");
    if (o && proto_obj_u64(o, &v) && v >= 1024 && v <= SIZE_MAX / 2) {
        c->server_max_msg = (size_t)v;
        c->max_send = (size_t)v;
        /* Answers are bounded by the daemon, not by its limit for requests:
         * accept at least the default. */
        c->max_recv = v > GG_PROTO_DEFAULT_MAX_MSG ? (size_t)v : GG_PROTO_DEFAULT_MAX_MSG;
        proto_frame_init(&c->frame, c->max_recv);
    }
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
    if (socket_path && *socket_path) {
        if (strlen(socket_path) >= sizeof c->path) {
            memcpy(c->path, socket_path, sizeof c->path - 1);
            c->path[sizeof c->path - 1] = '\0';
            rc = client_fail(c, -ENAMETOOLONG, "socket path is %zu bytes; at most %zu fit: %s",
                             strlen(socket_path), sizeof c->path - 1, socket_path);
            goto out;
        }
        memcpy(c->path, socket_path, strlen(socket_path) + 1);
    } else if (gg_client_default_socket(c->path, sizeof c->path) < 0) {
        rc = client_fail(c, -ENAMETOOLONG, "the default socket path is too long: %s... "
                         "(set GFXGRAPH_SOCKET to a shorter one)", c->path);
        goto out;
    }

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = client_fail(c, -errno, "cannot create a socket: %s", strerror(errno));
        goto out;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
    rc = client_socket_connect(fd, &sa);
    if (rc < 0) {
        close(fd);
        rc = client_connect_fail(c, -rc);
        goto out;
    }
    c->reached = true;
    c->fd = fd;
    rc = client_hello(c, client_name && *client_name ? client_name : GG_CLIENT_DEFAULT_NAME);
    if (rc < 0) {
        client_drop(c);
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
