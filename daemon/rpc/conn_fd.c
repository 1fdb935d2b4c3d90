/* SPDX-License-Identifier: MIT */
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
 * as dropped.  Descriptors held for one uid across its connections are
 * capped (gg_conn_fd_cap): past it one is closed, the client told EDQUOT
 * and the refusal logged with the counts.  A descriptor the kernel could
 * not give us (the daemon's table full: recvmsg drops it and says only
 * MSG_CTRUNC, which libuv does not pass on) is told apart from one never
 * sent by trying to take a descriptor when the request finds none: that
 * request gets EMFILE/ENFILE, not EBADF, and the daemon logs the counts.  A send that the socket refuses outright closes the
 * connection; one that would block leaves the descriptor unsent (false). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
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

static unsigned conn_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > UINT32_MAX)
        return UINT32_MAX;
    return (unsigned)rl.rlim_cur;
}

unsigned gg_conn_fd_cap(void)
{
    /* An eighth of the table: a uid's parked descriptors plus its
     * connections (max-connections-per-uid) stay well short of it, so
     * other users' requests still find room. */
    unsigned lim = conn_fd_limit();
    return lim / 8 < CONN_MAX_FDS ? CONN_MAX_FDS : lim / 8;
}

/* Descriptors held on every connection of uid, waiting for requests. */
static unsigned conn_fds_of_uid(const gg_conn *c, uid_t uid)
{
    unsigned n = 0;
    for (const gg_conn *x = c->rpc->conns; x; x = x->next)
        if (x->sess && x->sess->uid == uid)
            n += x->nfds;
    return n;
}

/* Descriptors the daemon has open: /proc/self/fd's entries (the daemon's
 * own, which ProtectProc= leaves visible); the limit when not even one is
 * left to look with. */
static unsigned conn_fds_open(unsigned limit)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return errno == EMFILE || errno == ENFILE ? limit : 0;
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 0;   /* less the directory's own */
}

void gg_conn_fd_counts(gg_conn *c, unsigned *open, unsigned *limit, unsigned *parked_uid)
{
    *limit = conn_fd_limit();
    *open = conn_fds_open(*limit);
    *parked_uid = c && c->sess ? conn_fds_of_uid(c, c->sess->uid) : 0;
}

void gg_conn_log_fd_shortage(gg_conn *c, int rc, const char *what)
{
    unsigned open, limit, parked;
    gg_conn_fd_counts(c, &open, &limit, &parked);
    gg_log_fields f = {.session = c && c->sess ? c->sess->id : 0};
    GG_LOG(GG_LOG_WARN, &f, "%s: %s: %u file descriptors open of a limit of %u, uid %d holds "
           "%u waiting for requests (at most %u); raise LimitNOFILE= in the unit", what,
           rc == -ENFILE ? "the system is out of file descriptors (ENFILE)"
                         : "the daemon is out of file descriptors (EMFILE)",
           open, limit, c && c->sess ? (int)c->sess->uid : -1, parked, gg_conn_fd_cap());
}

/* The descriptors a read brought: held for their requests, up to
 * CONN_MAX_FDS on a connection and gg_conn_fd_cap() for its uid; more are
 * closed and the client told. */
void conn_collect_fds(gg_conn *c)
{
    unsigned dropped = 0, over = 0, held = 0, cap = 0;
    int shortage = 0;
    while (uv_pipe_pending_count(&c->pipe) > 0) {
        int fd = conn_accept_fd(c);
        if (fd < 0) {
            if (fd == -EMFILE || fd == -ENFILE)
                shortage = fd;
            dropped++;
            continue;
        }
        if (c->nfds == CONN_MAX_FDS) {
            close(fd);
            dropped++;
            continue;
        }
        if (!cap) {
            cap = gg_conn_fd_cap();
            held = c->sess ? conn_fds_of_uid(c, c->sess->uid) : 0;
        }
        if (held >= cap) {
            close(fd);
            over++;
            continue;
        }
        held++;
        c->fds[c->nfds].fd = fd;
        c->fds[c->nfds].upto = c->rx;
        c->nfds++;
    }
    if (over) {
        /* the request these came with finds none: it gets this, not EBADF */
        c->fd_refused = -EDQUOT;
        c->fd_refused_upto = c->rx;
        char msg[300];
        snprintf(msg, sizeof(msg), "%u file descriptor(s) refused: uid %d holds %u waiting for "
                 "their requests on its connections, the most one uid may (an eighth of the "
                 "daemon's descriptor limit); send requests whole, or fewer at once", over,
                 c->sess ? (int)c->sess->uid : -1, held);
        c->rpc->core->stats.errors++;
        gg_metrics_error(&c->rpc->core->stats.metrics, -EDQUOT);
        conn_buf_reset(&c->out);
        proto_pack_error_notify(&c->out_pk, -EDQUOT, msg);
        gg_conn_send(c, c->out.data, c->out.size);
        conn_buf_reset(&c->out);
        unsigned open, limit, parked;
        gg_conn_fd_counts(c, &open, &limit, &parked);
        gg_log_fields f = {.session = c->sess ? c->sess->id : 0};
        GG_LOG(GG_LOG_WARN, &f, "refused %u file descriptor(s) from uid %d: it holds %u waiting "
               "for requests, at most %u; %u file descriptors open of a limit of %u", over,
               c->sess ? (int)c->sess->uid : -1, parked, gg_conn_fd_cap(), open, limit);
    }
    if (shortage) {
        c->fd_refused = shortage;
        c->fd_refused_upto = c->rx;
        gg_conn_log_fd_shortage(c, shortage, "taking a descriptor a client sent");
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

/* No descriptor for the request being handled: why.  One refused with
 * bytes of this request (cap or shortage), or the daemon's table full now
 * (the kernel then drops what a client sends), or none sent. */
static int conn_fd_missing(gg_conn *c)
{
    if (c->fd_refused && c->fd_refused_upto > c->req_start)
        return c->fd_refused;
    uv_os_fd_t sfd;
    if (uv_fileno((uv_handle_t *)&c->pipe, &sfd) != 0)
        return -EBADF;
    int t = fcntl(sfd, F_DUPFD_CLOEXEC, 3);
    if (t >= 0) {
        close(t);
        return -EBADF;
    }
    return errno == EMFILE || errno == ENFILE ? -errno : -EBADF;
}

int gg_conn_take_fd(gg_conn *c)
{
    if (!c)
        return -EBADF;
    conn_drop_fds_before(c, c->req_start);
    if (c->nfds == 0) {
        int rc = conn_fd_missing(c);
        if (rc == -EMFILE || rc == -ENFILE)
            gg_conn_log_fd_shortage(c, rc, "a request's descriptor was dropped");
        return rc;
    }
    int fd = c->fds[0].fd;
    c->nfds--;
    memmove(c->fds, c->fds + 1, c->nfds * sizeof(c->fds[0]));
    return fd;
}

int gg_conn_fd_fail(gg_conn *c, int rc, proto_errbuf *e)
{
    unsigned open = 0, limit = 0, parked = 0;
    switch (rc) {
    case -EMFILE:
    case -ENFILE:
        gg_conn_fd_counts(c, &open, &limit, &parked);
        return proto_fail(e, rc, "the daemon is out of file descriptors (%s: %u open of a limit "
                          "of %u), so the descriptor sent with this request was dropped by the "
                          "kernel; try again later", rc == -EMFILE ? "EMFILE" : "ENFILE", open,
                          limit);
    case -EDQUOT:
        return proto_fail(e, rc, "the descriptor sent with this request was refused: this uid "
                          "holds the most descriptors waiting for their requests that one uid "
                          "may (%u); send requests whole", gg_conn_fd_cap());
    default:
        return proto_fail(e, -EBADF, "fd: true, but no file descriptor came with this "
                          "request: send it as SCM_RIGHTS ancillary data with the request's "
                          "own bytes (sendmsg)");
    }
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
