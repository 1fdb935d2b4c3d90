/* SPDX-License-Identifier: MIT */
/* The socket transport: client connections on the loop thread, each
 * carrying one core session.  The listener belongs to app/; it hands each
 * new connection to gg_conn_accept. */
#ifndef GG_CONN_H
#define GG_CONN_H

#include <stdbool.h>
#include <msgpack.h>
#include <uv.h>

#include "base/clock.h"
#include "core/core.h"
#include "fastpath.h"   /* proto/: gg_fp_geom, fastpath.open's geometry */
#include "proto.h"

struct gg_conn;
struct gg_session;

/* The shared-memory transport as this one sees it: negotiated over the
 * socket (fastpath.open), so rpc/ needs these few entries, set by app/ from
 * fastpath/: the two transports stay side by side, each over the core. */
typedef struct gg_rpc_fastpath {
    void *ctx;
    bool (*available)(const void *ctx);
    const char *(*completion)(const void *ctx);    /* "gpu" | "cpu" */
    unsigned (*regions)(const void *ctx);          /* open now */
    /* Create s's region: the sealed memfd in *fd (sent, then closed, by
     * rpc) and its geometry; negative errno with a message in err. */
    int (*open)(void *ctx, struct gg_session *s, uint32_t entries, int *fd, gg_fp_geom *geom,
                proto_errbuf *err);
    /* The region just opened for s never reached its client (core lock
     * held): it goes. */
    void (*revoke)(void *ctx, struct gg_session *s);
    /* s has a region (stats; core lock held). */
    bool (*attached)(const void *ctx, const struct gg_session *s);
} gg_rpc_fastpath;

/* The transport's own state, kept apart from the core so a second
 * transport has its own. */
typedef struct gg_rpc {
    gg_core *core;
    struct gg_conn *conns;          /* list */
    unsigned nconns;
    const struct gg_rpc_fastpath *fp; /* the fast path, negotiated here; NULL: none */
    uint64_t devinfo_ms;            /* when core->devinfo was last read (gg_now_ms) */
} gg_rpc;

void gg_rpc_init(gg_rpc *rpc, gg_core *core);

int gg_conn_accept(gg_rpc *rpc, uv_stream_t *listener);
/* Graceful close: flush what is queued, then close. */
void gg_conn_close(struct gg_conn *c);
/* The same, after an "error" notification with err's code and msg: the
 * peer learns why its connection ends. */
void gg_conn_close_error(struct gg_conn *c, int err, const char *msg);
/* Write len bytes: what the socket takes at once leaves from data, the
 * rest is copied and queued.  false if the connection is gone. */
bool gg_conn_send(struct gg_conn *c, const char *data, size_t len);
/* An answer given after its handler returned: begin hands out the
 * connection's emptied reply buffer's packer; end sends what was packed
 * and counts the request done. */
msgpack_packer *gg_conn_reply_begin(struct gg_conn *c);
void gg_conn_reply_end(struct gg_conn *c);
/* The buffer behind gg_conn_reply_begin's packer, for an answer written
 * directly (proto_sbuffer_room) between begin and end. */
msgpack_sbuffer *gg_conn_reply_sbuffer(struct gg_conn *c);
/* A request finished (replied to or dropped). */
void gg_conn_request_done(struct gg_conn *c);
/* Close every connection as part of a stop; idle ones at once. */
void gg_conn_stop_all(gg_rpc *rpc);
void gg_conn_force_close_all(gg_rpc *rpc);
struct gg_session *gg_conn_session(struct gg_conn *c);
/* Nothing is waiting to be written: an answer sent now goes out first, so
 * it can carry a file descriptor. */
bool gg_conn_writes_idle(struct gg_conn *c);
struct gg_conn *gg_conn_next(struct gg_conn *c);
/* The file descriptor that came (SCM_RIGHTS) with the request being handled:
 * the oldest one held whose bytes are not all before the request; the
 * caller owns it.  -EBADF when none came. */
int gg_conn_take_fd(struct gg_conn *c);
/* The error for a request that found no descriptor (gg_conn_take_fd's
 * rc): EMFILE/ENFILE with the counts when the daemon is out of them,
 * EDQUOT past the uid's cap, else EBADF (none was sent). */
int gg_conn_fd_fail(struct gg_conn *c, int rc, proto_errbuf *e);
/* Descriptors held waiting for requests, per uid, are capped at this: an
 * eighth of the daemon's descriptor limit (RLIMIT_NOFILE), at least
 * CONN_MAX_FDS. */
unsigned gg_conn_fd_cap(void);
/* The daemon's open descriptors, its limit, and what c's uid holds waiting. */
void gg_conn_fd_counts(struct gg_conn *c, unsigned *open, unsigned *limit, unsigned *parked_uid);
/* Log a descriptor shortage (rc -EMFILE or -ENFILE) met by `what`, with
 * the counts. */
void gg_conn_log_fd_shortage(struct gg_conn *c, int rc, const char *what);
/* Closing already (its peer left, a stop, or an operator's kill). */
bool gg_conn_closing(const struct gg_conn *c);

#endif
