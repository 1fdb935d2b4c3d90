/* Sessions and their replies. */
#include "session.h"

#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "event.h"
#include "exec.h"
#include "log.h"
#include "program.h"
#include "server.h"

gg_session *gg_session_new(gg_server *srv, struct gg_conn *conn, pid_t pid, uid_t uid, gid_t gid)
{
    gg_session *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->id = ++srv->sessions_total;
    s->refs = 1;
    s->srv = srv;
    s->conn = conn;
    s->pid = pid;
    s->uid = uid;
    s->gid = gid;
    s->connected_ms = gg_now_ms();
    gg_list_init(&s->buffers);
    gg_list_init(&s->programs);
    gg_list_init(&s->events);
    gg_list_init(&s->jobs);
    return s;
}

void gg_session_ref(gg_session *s)
{
    s->refs++;
}

static void session_destroy(gg_session *s)
{
    gg_server *srv = s->srv;
    gg_program_park_all(s);
    gg_event_release_all(s);
    gg_buffer_release_all(s);
    if (s->stream)
        gg_exec_release_stream(srv->exec, s->stream);
    gg_log_fields f = {.session = s->id};
    GG_LOG(GG_LOG_DEBUG, &f, "session ended");
    free(s);
}

void gg_session_unref(gg_session *s)
{
    if (--s->refs == 0)
        session_destroy(s);
}

void gg_session_detach(gg_session *s)
{
    s->conn = NULL;
    gg_exec_cancel_session(s->srv->exec, s);
    gg_session_unref(s);
}

int gg_session_stream(gg_session *s, gg_dev_stream **out)
{
    if (!s->stream) {
        int rc = s->srv->dev->ops->stream_create(s->srv->dev, &s->stream);
        if (rc < 0)
            return rc;
    }
    *out = s->stream;
    return 0;
}

void gg_reply_begin(msgpack_sbuffer *sb, msgpack_packer *pk, uint32_t msgid)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
    proto_pack_response_head(pk, msgid);
}

void gg_reply_end(gg_session *s, msgpack_sbuffer *sb)
{
    if (s->conn) {
        gg_conn_send(s->conn, sb);
        gg_conn_request_done(s->conn);
    }
    msgpack_sbuffer_destroy(sb);
}

void gg_reply_error(gg_session *s, uint32_t msgid, int neg_errno, const char *message)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_error_response(&pk, msgid, neg_errno, message);
    s->errors++;
    s->srv->stats.errors++;
    gg_reply_end(s, &sb);
}
