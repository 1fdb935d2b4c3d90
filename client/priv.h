/* SPDX-License-Identifier: MIT */
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

#include "fastpath.h"
#include "internal.h"
#include "proto.h"

/* room for a connect failure that names two socket paths and their errors */
#define GG_CLIENT_ERRLEN 1024

/* ---- the fast path (fastpath.c) -------------------------------------------- */

/* What the fast path is on this connection. */
enum {
    CLIENT_FP_NONE = 0,      /* not connected */
    CLIENT_FP_OFF,           /* GFXGRAPH_FASTPATH=0 */
    CLIENT_FP_UNAVAILABLE,   /* the daemon has none, refused it, or closed it */
    CLIENT_FP_PENDING,       /* offered, opened by the first replay or submit */
    CLIENT_FP_ACTIVE,
};

/* Each ring slot's owner on this side.  A slot is reused only once the
 * completion of the descriptor that last used it has been seen (FREE), so
 * an old completion is never taken for a new submission's. */
enum {
    CLIENT_FP_SLOT_FREE = 0,
    CLIENT_FP_SLOT_OUT,        /* submitted; its ticket not yet waited for */
    CLIENT_FP_SLOT_WAITING,    /* a thread waits for it (without the mutex) */
    CLIENT_FP_SLOT_ABANDONED,  /* its wait timed out: the completion is ignored */
};

typedef struct {
    uint64_t seq;
    uint8_t state;             /* CLIENT_FP_SLOT_* */
} client_fp_slot;

/* One mapped region.  Heap-allocated once per fastpath.open and counted
 * (refs, under the client's mutex): a thread waiting without the mutex holds
 * a reference so a disconnect from another thread cannot unmap the memory it
 * spins on. */
typedef struct {
    int refs;
    bool dead;                 /* the connection is gone: nothing completes */
    gg_fp_header *hdr;
    size_t size;
    gg_fp_sqe *sq;
    gg_fp_cqe *cq;
    uint32_t entries, mask;
    bool gpu;                  /* completion "gpu" */
    uint64_t next_seq;         /* the next descriptor's seq (from 1) */
    client_fp_slot slots[];
} client_fp_region;

/* A socket-path submission (submit.c): its msgid and, once read (by any
 * call that met it on the stream), its answer. */
typedef struct {
    uint64_t ticket;           /* 0: unused */
    uint32_t msgid;
    bool done;
    int rc;
    gg_replay_result res;
    char code[32];
    char msg[256];
} client_sticket;

/* What the connection (io.c) tells the layers above it, which set the table
 * at gg_client_new (client.c): io.c calls up only through it, so the I/O
 * layer knows nothing of tickets or the fast path. */
typedef struct client_io_events {
    void (*lost)(gg_client *c);                      /* the connection was dropped */
    void (*response)(gg_client *c, const proto_msg *m);   /* no call waits for it */
    void (*before_call)(gg_client *c, int64_t deadline_ms);   /* a call is to be written */
} client_io_events;

struct gg_client {
    const client_io_events *io_ev;
    pthread_mutex_t mu;
    int fd;                         /* -1 when not connected */
    bool reached;                   /* last connect() reached the socket */
    int timeout_ms;
    uint32_t next_msgid;
    char path[GG_CLIENT_PATH_MAX];

    /* receive side: rbuf[0..rlen) holds bytes read; the current message is
     * rbuf[0..msg_len), unpacked into obj (which points into rbuf and zone;
     * the zone is cleared, not freed, between messages: no allocation per
     * answer once warm). */
    uint8_t *rbuf;
    size_t rlen, rcap;
    size_t msg_len;
    proto_frame frame;
    msgpack_zone zone;
    msgpack_object obj;
    /* SCM_RIGHTS: while fd_wanted (a fastpath.open in flight) the first
     * descriptor received is kept in fd_received; any other is closed. */
    bool fd_wanted;
    int fd_received;
    uint16_t gen;                   /* connection number, part of tickets */
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
    uint32_t max_inflight;          /* limits.max_inflight, 0 if not reported */

    /* the fast path (fastpath.c) */
    int fp_mode;                    /* CLIENT_FP_* */
    bool fp_env_off;                /* GFXGRAPH_FASTPATH=0, read at connect */
    uint32_t fp_want_entries;       /* GFXGRAPH_FASTPATH_ENTRIES or 64 */
    int fp_spin_us;                 /* GFXGRAPH_SPIN_US or 200 */
    uint32_t fp_max_entries;        /* hello's fastpath.max_entries */
    client_fp_region *fp;           /* mapped region, NULL when none */
    char fp_status[256];

    /* socket-path tickets (submit.c) */
    client_sticket *st;
    int st_cap;                     /* allocated */
    uint64_t st_next;               /* the next socket ticket's number */
};

_Static_assert(GG_CLIENT_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path),
               "GG_CLIENT_PATH_MAX is sun_path's size");

/* ---- error.c ---------------------------------------------------------------- */

/* Record a failure: code from the errno (neg), message printf-style.
 * Returns neg. */
int client_fail(gg_client *c, int neg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with the code given as a string (the daemon's). */
void client_set_error(gg_client *c, const char *code, size_t code_len, const char *msg,
                      size_t msg_len);
void client_clear_error(gg_client *c);
/* client_fail under the mutex, for argument checks before a call. */
int client_fail_locked(gg_client *c, int neg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the connection -------------------------------------------------------- */

/* Call with c->mu held (io.c).  params: bytes of one map, or NULL. */
int client_call_locked(gg_client *c, const char *method, const void *params, size_t len,
                       const msgpack_object **result);

/* Tickets: bit 63 says fast path; bits 48..62 the connection (gen); bits
 * 0..47 the fast path's seq or the socket path's ticket number. */
#define CLIENT_TICKET_FP (1ull << 63)
#define CLIENT_TICKET_NUM_MASK ((1ull << 48) - 1)
static inline uint64_t client_ticket_make(const gg_client *c, bool fp, uint64_t num)
{
    return (fp ? CLIENT_TICKET_FP : 0) | ((uint64_t)(c->gen & 0x7fff) << 48) |
           (num & CLIENT_TICKET_NUM_MASK);
}
static inline bool client_ticket_ours(const gg_client *c, uint64_t t)
{
    return ((t >> 48) & 0x7fff) == (uint64_t)(c->gen & 0x7fff);
}

/* ---- io.c: the socket, a request at a time or pipelined ------------------ */

/* The deadline for the next answer (ms, monotonic; -1: none). */
int64_t client_deadline(const gg_client *c);
int64_t client_now_ms(void);
/* -ENOTCONN with the usual message when not connected, else 0. */
int client_check_connected(gg_client *c);
/* Start a request in c->sb ([0, msgid, method, ...]); the caller packs the
 * params array next with pk.  Returns the msgid. */
uint32_t client_req_begin(gg_client *c, msgpack_packer *pk, const char *method);
/* Send c->sb (mutex held).  0, or a negative errno (connection dropped). */
int client_req_send(gg_client *c, const char *method, int64_t deadline);
/* A call whose request carries fd (SCM_RIGHTS on its first byte); params
 * is one packed map (mutex held). */
int client_call_locked_fd(gg_client *c, const char *method, const void *params, size_t len,
                          int fd, const msgpack_object **result);
/* Read until the response to msgid (mutex held); answers to outstanding
 * socket tickets met on the way are kept (io_ev->response). */
int client_req_await(gg_client *c, uint32_t msgid, const char *method, int64_t deadline,
                     const msgpack_object **result);
/* Read whatever the socket holds now without waiting: notifications noted,
 * ticket answers kept, end of stream noticed.  0, or -ECONNRESET (dropped). */
int client_pump(gg_client *c, const char *method);
/* Drop the connection and the receive state, then tell io_ev->lost
 * (mutex held). */
void client_io_drop(gg_client *c);
/* Copy a str object into dst (truncating), "" when o is not a str. */
void client_copy_str(const msgpack_object *o, char *dst, size_t cap);

/* ---- submit.c ------------------------------------------------------------- */

/* A response with a msgid no call waits for: kept when it answers an
 * outstanding socket ticket, else dropped (a late answer). */
void client_sticket_offer(gg_client *c, const proto_msg *m);
/* Forget every socket ticket (the connection is gone). */
void client_sticket_reset(gg_client *c);
/* A replay result map into res; -EPROTO when it has no valid path. */
int client_replay_parse(const msgpack_object *r, gg_replay_result *res);

/* ---- fastpath.c ----------------------------------------------------------- */

/* At connect, before hello: the environment. */
void client_fp_env(gg_client *c);
/* hello's result: what the daemon offers. */
void client_fp_hello(gg_client *c, const msgpack_object *hello);
/* The connection is gone (mutex held). */
void client_fp_drop(gg_client *c);
/* Mutex held: 1 when replays go through the ring, 0 for the socket; opens
 * it the first time (a refusal is silent: the socket path is used and the
 * status says why).  A negative errno when the connection was lost. */
int client_fp_usable(gg_client *c);
/* Mutex held.  Submit one descriptor; *ticket gets its ticket.  May drop the
 * mutex for a while (waiting for a slot whose wait timed out). */
int client_fp_submit(gg_client *c, uint64_t program, int batch, int branch,
                     const gg_replay_opts *opts, bool timed, uint64_t *ticket);
/* Mutex held on entry and on return; dropped while waiting. */
int client_fp_wait(gg_client *c, uint64_t ticket, gg_replay_result *res);
/* Mutex held: 1 done, 0 not yet, or a negative errno. */
int client_fp_poll(gg_client *c, uint64_t ticket);
/* Mutex held.  Before a socket request: wait for the daemon to have taken
 * every descriptor submitted so far (sq_head reaching sq_tail), so that the
 * request comes after them in the session's order, as it would had they
 * gone through the socket (PROTOCOL.md 15).  Gives up when the region
 * closes, the connection is found gone, deadline_ms (-1 none) passes or
 * half a second has: the request then goes as it is. */
void client_fp_drain(gg_client *c, int64_t deadline_ms);

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

/* io.c, for the replay's plain-form fast lane (submit.c): the request
 * buffer emptied for a new request with room bytes free (NULL: out of
 * memory) and its msgid; one read of what the socket has into the receive
 * buffer (0, or a recorded error). */
uint8_t *client_req_raw(gg_client *c, size_t room, uint32_t *msgid);
int client_read_some(gg_client *c, const char *method, int64_t deadline);

#endif
