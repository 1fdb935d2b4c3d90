/* SPDX-License-Identifier: MIT */
/* One table from method name to handler.  Adding a method is one row in
 * dispatch.c and one handler. */
#ifndef GG_DISPATCH_H
#define GG_DISPATCH_H

#include <msgpack.h>

#include "core/core.h"
#include "proto.h"

struct gg_rpc;
struct gg_session;

/* A handler returns 0 after packing exactly one result map into pk, a
 * negative errno after writing a message through proto_fail(&call->err, ...),
 * or GG_CALL_ASYNC when it has taken the request over and will answer it
 * later through its job's ops (rpc/reply.h). */
#define GG_CALL_ASYNC 1

typedef struct gg_call {
    gg_core *core;
    struct gg_rpc *rpc;             /* the connections, for stats and health */
    struct gg_session *sess;
    uint32_t msgid;
    const msgpack_object *params;   /* the params map; NULL when params was [] */
    /* a replay read straight from its bytes (proto_replay_req_scan, and
     * gg_replay_req_plain held): params is NULL then, the arguments are here */
    const proto_replay_req *rq;
    msgpack_packer *pk;
    proto_errbuf err;
    /* A handler that answers with a file descriptor (fastpath.open) puts it
     * here: it rides on the answer's first byte (SCM_RIGHTS), then closed. */
    int send_fd;
} gg_call;

typedef int (*gg_method_fn)(gg_call *call);

/* A method whose work grows with its request (program.define of 100,000
 * nodes) can have a large request unpacked, checked and worked on off the
 * loop, on a thread of libuv's pool, while the loop serves everyone else;
 * the connection handles nothing else of its own until it is answered, so
 * the session sees its requests in order as ever (rpc/conn.c). */
typedef struct gg_offload {
    /* loop, core lock, params unpacked and their keys checked: the work
     * the request asks for, in units of about a tensor or node; past
     * CONN_OFFLOAD_UNITS it goes off the loop whatever its size.  NULL:
     * only a large request does. */
    uint64_t (*cost)(gg_call *c);
    /* loop, core lock: take what work needs from the core into *state;
     * 0, or negative errno with a message (proto_fail on c->err) */
    int (*begin)(gg_call *c, void **state);
    /* pool thread, no lock: the request's params (keys already checked) */
    int (*work)(void *state, const msgpack_object *params, proto_errbuf *e);
    /* loop, core lock: rc is work's; finish and pack the result map into
     * c->pk as a handler does (0, or negative errno through c->err); free
     * state.  c NULL: the connection has gone, only free. */
    int (*end)(gg_call *c, void *state, int rc);
} gg_offload;

typedef struct {
    const char *name;
    gg_method_fn fn;
    size_t len;                     /* strlen(name) */
    /* the keys its params map may hold (NULL-terminated); any other is
     * refused with EINVAL before the handler runs (gg_dispatch_check) */
    const char *const *keys;
    const gg_offload *offload;      /* NULL: always on the loop */
} gg_method;

/* params' keys against m->keys: 0, or -EINVAL naming the key and listing
 * the accepted ones. */
int gg_dispatch_check(const gg_method *m, const msgpack_object *params, proto_errbuf *e);

const gg_method *gg_dispatch_find(const char *name, size_t len);
const gg_method *gg_dispatch_table(size_t *n);

/* handlers, grouped by file */
int gg_method_hello(gg_call *c);      /* methods_info.c */
int gg_method_stats(gg_call *c);
int gg_method_health(gg_call *c);
int gg_method_config(gg_call *c);
int gg_method_buffer_register(gg_call *c);   /* methods_buffer.c */
int gg_method_buffer_release(gg_call *c);
int gg_method_buffer_list(gg_call *c);
int gg_method_event_register(gg_call *c);    /* methods_event.c */
int gg_method_event_release(gg_call *c);
int gg_method_program_define(gg_call *c);    /* methods_program.c */
extern const gg_offload gg_method_program_define_offload;
int gg_method_program_release(gg_call *c);
int gg_method_program_list(gg_call *c);
int gg_method_program_prepare(gg_call *c);
int gg_method_program_rebind(gg_call *c);
int gg_method_replay(gg_call *c);
/* A replay read from its bytes that the handler can take as it is: program
 * and batch given, every value within the range its general reading
 * allows (anything else goes through the general path and its messages). */
bool gg_replay_req_plain(const proto_replay_req *q);
int gg_method_fastpath_open(gg_call *c);    /* methods_fastpath.c */
int gg_method_metrics(gg_call *c);          /* methods_metrics.c */
int gg_method_admin_evict(gg_call *c);      /* methods_admin.c */
int gg_method_admin_kill_session(gg_call *c);

#endif
