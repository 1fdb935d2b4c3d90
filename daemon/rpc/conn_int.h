/* SPDX-License-Identifier: MIT */
/* What rpc/conn.c (connections, reading, handling requests), rpc/conn_write.c
 * (answers leaving) and rpc/conn_fd.c (descriptors on a connection) share;
 * not for other modules. */
#ifndef GG_CONN_INT_H
#define GG_CONN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/session.h"
#include "proto.h"
#include "rpc/conn.h"

#define CONN_READ_CHUNK 65536
#define CONN_MAX_WRITE_QUEUE (64u << 20)
/* The unpack zone's chunk: a request of any method but program.define
 * unpacks into far less, so one chunk serves them all. */
#define CONN_ZONE_CHUNK 4096
/* Response buffers and pooled write requests above this are freed after
 * use (a large stats answer), so an idle connection stays small. */
#define CONN_KEEP_BYTES 65536
/* Write requests kept for reuse: more are in flight only while the peer
 * reads slower than we answer. */
#define CONN_WRITE_POOL 4
/* A connection being closed gracefully (its queued answers flushed first)
 * is cut off this long after the close began: a peer that never reads
 * cannot keep it (and its slot under max-connections-per-uid) for ever.
 * A constant: long enough for any reader to take the last answers. */
#define CONN_CLOSE_TIMEOUT_MS 5000
/* What a queued answer holds besides its bytes: malloc's own header and
 * rounding, counted so the limit is on memory, not on payload. */
#define CONN_MALLOC_OVERHEAD 32
/* A request at least this large, of a method that can work off the loop
 * (gg_offload: program.define), is unpacked and worked on by a thread of
 * libuv's pool, unpacking included. */
#define CONN_OFFLOAD_BYTES 32768
/* A smaller one goes there too when the work it asks for (gg_offload.cost:
 * for a define, the tensors and nodes it will hold, a call counting what it
 * copies in) is past this; the loop does the rest at once.  Bytes alone say
 * little: a define of a few bytes can call a program of thousands of nodes
 * in each of many branches.  This much work stays well under the loop's
 * slice (CONN_SLICE_NS). */
#define CONN_OFFLOAD_UNITS 256
/* One connection's requests are handled back to back for at most about
 * this long (the request under way finishes); then the connection waits
 * for the loop's next turn and everyone else goes first, so a pipeline of
 * requests cannot keep the loop (the watchdog, other clients) waiting. */
#define CONN_SLICE_NS 2000000
/* File descriptors (SCM_RIGHTS) held for the requests they came with: a
 * request takes one; a client never needs more than a few ahead. */
#define CONN_MAX_FDS 16

typedef struct conn_write {
    uv_write_t req;
    struct conn_write *next;        /* the connection's free list */
    char *data;
    size_t cap;
} conn_write;

typedef struct gg_conn {
    uv_pipe_t pipe;                 /* first: the handle's data is the conn */
    gg_rpc *rpc;
    struct gg_conn *prev, *next;
    gg_session *sess;
    uint8_t *rbuf;
    size_t rlen, rcap;
    proto_frame frame;
    unsigned inflight;
    bool closing;
    int handles;                    /* open: freed when the last one closes */
    uv_timer_t req_timer;           /* request-timeout-ms of a partial request */
    uv_shutdown_t shutdown_req;
    msgpack_zone zone;              /* the message being handled unpacks here */
    /* Answers are packed here and written straight from here: out for the
     * answer its handler returns, reply for one given later (gg_conn_reply_*),
     * which may be packed while out holds a half-made answer (a cache hit
     * the loop ran completes inside its handler). */
    msgpack_sbuffer out, reply;
    msgpack_packer out_pk, reply_pk;
    conn_write *wfree;
    unsigned nwfree;
    /* Bytes the queued answers really hold (each write request, its data
     * buffer's capacity and malloc's overhead): over max-queued-bytes,
     * reading pauses until the peer has taken enough of them. */
    size_t queued, queued_peak;
    bool paused;                    /* reading stopped for the queue */
    /* max-inflight requests in flight: reading stops (what is read stays
     * in rbuf) until one of them is answered; the client is never cut off
     * for sending ahead */
    bool full;
    bool full_logged;
    bool pause_logged;
    bool refused;                   /* refused at accept: holds no slot */
    bool in_read;                   /* inside the read loop */
    /* A request is being worked on off the loop (conn_job): nothing else of
     * this connection is read or handled until it is answered. */
    bool held;
    /* Its slice of the loop is spent (CONN_SLICE_NS): not read, and what
     * rbuf holds waits, until req_timer fires at the loop's next turn. */
    bool yielded;
    /* Descriptors that came with the connection's bytes, oldest first, each
     * with the stream offset where the read that brought it ended (its
     * bytes, so its request, lie before that).  rx counts the bytes read;
     * rbuf[0] is at stream offset rx - rlen. */
    struct {
        int fd;
        uint64_t upto;
    } fds[CONN_MAX_FDS];
    unsigned nfds;
    /* The last descriptor refused (-EDQUOT past the uid's cap, -EMFILE or
     * -ENFILE): the request whose bytes end before fd_refused_upto is
     * told that instead of EBADF. */
    int fd_refused;
    uint64_t fd_refused_upto;
    uint64_t rx;
    uint64_t req_start;             /* stream offset of the request being handled */
} gg_conn;

/* Empty a response buffer for the next answer (freed when it grew large). */
void conn_buf_reset(msgpack_sbuffer *sb);
/* Close at once, without flushing what is queued. */
void conn_close_now(gg_conn *c);
/* With the core lock held: answer the requests the read buffer holds, then
 * read again unless reading is paused, held or over (conn_write.c, once the
 * queued answers have drained). */
void conn_read_resume(gg_conn *c);
/* conn_fd.c: hold the descriptors a read brought; close those whose bytes
 * all lie before stream offset upto, telling the client; send len bytes
 * with fd on the first (false: not sent). */
void conn_collect_fds(gg_conn *c);
void conn_drop_fds_before(gg_conn *c, uint64_t upto);
bool conn_send_fd(gg_conn *c, const char *data, size_t len, int fd);

#endif
