/* File descriptors on a connection, both ways (SCM_RIGHTS on the socket).
 *
 * Happy path: a descriptor a client sends with buffer.register {fd: true}
 * is taken from libuv (the pipe is an IPC one, so it reads with recvmsg)
 * and held with the stream offset where the read that brought it ended;
 * the request whose bytes it came with takes it (gg_conn_take_fd).  The
 * daemon sends one the other way with fastpath.open's answer
 * (conn_send_fd), on its first byte, straight to the socket.
 *
 * Failure modes: more than CONN_MAX_FDS waiting, or one no request takes
 * (its bytes all handled), are closed and the client told with an "error"
 * notification (EBADF); a descriptor that cannot be taken from libuv counts
 * as dropped.  A send that the socket refuses outright closes the
 * connection; one that would block leaves the descriptor unsent (false). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/conn.h"
#include "rpc/conn_int.h"

#include "base/log.h"
#include "core/metrics.h"
#include "core/session.h"
#include "proto.h"

static void conn_free_handle(uv_handle_t *h)
{
    free(h);
}

/* One descriptor libuv holds for the connection (it reads with recvmsg:
 * the pipe is an IPC one), as a plain fd: taken through a pipe handle of
 * its own, which is then closed with the original. */
static int conn_accept_fd(gg_conn *c)
{
    uv_pipe_t *tmp = malloc(sizeof(*tmp));
    if (!tmp || uv_pipe_init(c->rpc->core->loop, tmp, 0) < 0) {
        free(tmp);
        return -ENOMEM;
    }
    int fd = -EBADF;
    uv_os_fd_t ufd;
    if (uv_accept((uv_stream_t *)&c->pipe, (uv_stream_t *)tmp) == 0 &&
        uv_fileno((uv_handle_t *)tmp, &ufd) == 0 && (fd = fcntl(ufd, F_DUPFD_CLOEXEC, 3)) < 0)
        fd = -errno;
    uv_close((uv_handle_t *)tmp, conn_free_handle);
    return fd;
}

static void conn_fd_notify(gg_conn *c, const char *msg)
{
    c->rpc->core->stats.errors++;
    gg_metrics_error(&c->rpc->core->stats.metrics, -EBADF);
    conn_buf_reset(&c->out);
    proto_pack_error_notify(&c->out_pk, -EBADF, msg);
    gg_conn_send(c, c->out.data, c->out.size);
    conn_buf_reset(&c->out);
    gg_log_fields f = {.session = c->sess ? c->sess->id : 0};
    GG_LOG(GG_LOG_DEBUG, &f, "%s", msg);
}

/* The descriptors a read brought: held for their requests, up to
 * CONN_MAX_FDS; more are closed and the client told. */
void conn_collect_fds(gg_conn *c)
{
    unsigned dropped = 0;
    while (uv_pipe_pending_count(&c->pipe) > 0) {
        int fd = conn_accept_fd(c);
        if (fd < 0) {
            dropped++;
            continue;
        }
        if (c->nfds == CONN_MAX_FDS) {
            close(fd);
            dropped++;
            continue;
        }
        c->fds[c->nfds].fd = fd;
        c->fds[c->nfds].upto = c->rx;
        c->nfds++;
    }
    if (dropped) {
        char msg[200];
        snprintf(msg, sizeof(msg), "%u file descriptor(s) could not be held (at most %d wait "
                 "for their requests on a connection, or the daemon is out of descriptors); "
                 "closed", dropped, CONN_MAX_FDS);
        conn_fd_notify(c, msg);
    }
}

/* Close the descriptors whose bytes all lie before stream offset upto:
 * the requests they came with were handled without taking them. */
void conn_drop_fds_before(gg_conn *c, uint64_t upto)
{
    unsigned n = 0;
    while (n < c->nfds && c->fds[n].upto <= upto) {
        close(c->fds[n].fd);
        n++;
    }
    if (!n)
        return;
    c->nfds -= n;
    memmove(c->fds, c->fds + n, c->nfds * sizeof(c->fds[0]));
    char msg[240];
    snprintf(msg, sizeof(msg), "%u file descriptor(s) came with no request that takes them "
             "(only buffer.register with fd: true takes one, sent with the request's own "
             "bytes); closed", n);
    conn_fd_notify(c, msg);
}

int gg_conn_take_fd(gg_conn *c)
{
    if (!c)
        return -EBADF;
    conn_drop_fds_before(c, c->req_start);
    if (c->nfds == 0)
        return -EBADF;
    int fd = c->fds[0].fd;
    c->nfds--;
    memmove(c->fds, c->fds + 1, c->nfds * sizeof(c->fds[0]));
    return fd;
}

/* Send len bytes with fd attached to the first of them, straight to the
 * socket (the write queue is empty: gg_conn_writes_idle); what the socket
 * does not take at once is queued as usual.  false: the descriptor did not
 * go (the connection is then closed when the socket failed). */
bool conn_send_fd(gg_conn *c, const char *data, size_t len, int fd)
{
    uv_os_fd_t sfd;
    if (!gg_conn_writes_idle(c) || uv_fileno((uv_handle_t *)&c->pipe, &sfd) != 0)
        return false;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    ssize_t n;
    do
        n = sendmsg(sfd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            conn_close_now(c);
        return false;
    }
    if ((size_t)n < len)
        gg_conn_send(c, data + n, len - (size_t)n);
    return true;
}
