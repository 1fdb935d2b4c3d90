/* A session is one client connection's state: who it is, what it registered
 * and defined, its device stream and its queue of replays.  It is
 * reference-counted: the connection holds one reference and every job in
 * flight holds one, so a client that disconnects mid-replay leaves its
 * buffers mapped until the device is done with them. */
#ifndef GG_SESSION_H
#define GG_SESSION_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "device.h"

struct gg_server;
struct gg_conn;
struct gg_job;

typedef struct gg_list {
    struct gg_list *prev, *next;
} gg_list;

static inline void gg_list_init(gg_list *l) { l->prev = l->next = l; }
static inline bool gg_list_empty(const gg_list *l) { return l->next == l; }
static inline void gg_list_add_tail(gg_list *head, gg_list *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}
static inline void gg_list_del(gg_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
#define gg_container_of(p, T, m) ((T *)((char *)(p) - offsetof(T, m)))

typedef struct gg_session {
    uint64_t id;
    int refs;
    struct gg_server *srv;
    struct gg_conn *conn;           /* NULL once the client has gone */
    char client[64];                /* from hello */
    bool said_hello;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    uint64_t connected_ms;

    gg_list buffers;                /* gg_buffer.sess_link */
    gg_list programs;               /* gg_program.sess_link */
    gg_list events;                 /* gg_event.sess_link */
    gg_dev_stream *stream;          /* created on first use */
    gg_list jobs;                   /* queued, not yet running (gg_job.link) */
    struct gg_job *running;

    uint64_t requests, errors, replays, graph_replays, eager_replays;
    double replay_us_sum;
} gg_session;

gg_session *gg_session_new(struct gg_server *srv, struct gg_conn *conn, pid_t pid, uid_t uid,
                           gid_t gid);
void gg_session_ref(gg_session *s);
void gg_session_unref(gg_session *s);
/* The connection is closing: detach from it and drop its reference. */
void gg_session_detach(gg_session *s);
int gg_session_stream(gg_session *s, gg_dev_stream **out);

/* Answer a request that a handler took over (GG_CALL_ASYNC).  Begin packs the
 * response head into sb; the caller packs the result map; end sends it, or
 * drops it when the client has gone. */
void gg_reply_begin(msgpack_sbuffer *sb, msgpack_packer *pk, uint32_t msgid);
void gg_reply_end(gg_session *s, msgpack_sbuffer *sb);
void gg_reply_error(gg_session *s, uint32_t msgid, int neg_errno, const char *message);

#endif
