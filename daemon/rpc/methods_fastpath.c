/* SPDX-License-Identifier: MIT */
/* fastpath.open: negotiate a session's shared-memory ring (PROTOCOL.md
 * section 15).  The region itself is fastpath/'s; this transport only
 * carries its memfd to the client on the answer. */
#include <errno.h>
#include <stdint.h>

#include "core/session.h"
#include "fastpath.h"
#include "rpc/conn.h"
#include "rpc/dispatch.h"

int gg_method_fastpath_open(gg_call *c)
{
    uint64_t entries = GG_FP_DEFAULT_ENTRIES;
    int rc = proto_get_u64(c->params, "entries", false, UINT32_MAX, &entries, &c->err);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    const gg_rpc_fastpath *fp = c->rpc->fp;
    if (!fp)
        return proto_fail(&c->err, -ENOTSUP, "this daemon has no fast path");
    /* The descriptor must ride on this answer's first byte: nothing queued
     * before it may be written after it. */
    if (!gg_conn_writes_idle(c->sess->transport))
        return proto_fail(&c->err, -EAGAIN, "answers to earlier requests are still being "
                          "written on this connection; read them, then ask again");
    int fd;
    gg_fp_geom g;
    if ((rc = fp->open(fp->ctx, c->sess, (uint32_t)entries, &fd, &g, &c->err)) < 0) {
        if (rc == -EMFILE || rc == -ENFILE)
            gg_conn_log_fd_shortage(c->sess->transport, rc, "fastpath.open");
        return rc;
    }
    msgpack_packer *pk = c->pk;
    msgpack_pack_map(pk, 7);
    proto_pack_kv_u64(pk, "entries", g.entries);
    proto_pack_kv_u64(pk, "region_size", g.region_size);
    proto_pack_kv_u64(pk, "sq_offset", g.sq_offset);
    proto_pack_kv_u64(pk, "cq_offset", g.cq_offset);
    proto_pack_kv_u64(pk, "sqe_size", g.sqe_size);
    proto_pack_kv_u64(pk, "cqe_size", g.cqe_size);
    proto_pack_kv_str(pk, "completion", g.completion);
    c->send_fd = fd;
    return 0;
}
