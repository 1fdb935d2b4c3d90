/* SPDX-License-Identifier: MIT */
/* libgfxgraph-client: the C API for talking to gfxgraphd.
 *
 *   gg_client *c = gg_client_new();
 *   if (gg_client_connect(c, NULL, "myapp") < 0)          // NULL: default socket
 *       fprintf(stderr, "%s\n", gg_client_last_error(c));
 *   ... gg_client_buffer_register_shm(), program builder, gg_client_replay() ...
 *   gg_client_close(c);
 *
 * Return values: functions that can fail return 0 (or a documented count) on
 * success and a negative errno on failure.  The failure's message and its
 * symbolic code (the daemon's code, e.g. "EINVAL", or the local errno's name)
 * are kept per client: gg_client_last_error(), gg_client_last_error_code().
 *
 * Connection loss: a call during which the daemon closes the connection
 * returns -ECONNRESET; later calls return -ENOTCONN until gg_client_connect()
 * is called again (a new session: buffers and programs of the old one are
 * gone).  When the daemon said why before closing (an "error" notification),
 * gg_client_last_error_code() / gg_client_last_error() carry its code and
 * message.
 *
 * Thread safety: every call on one gg_client is serialised by a mutex inside
 * it, so a client may be shared between threads; calls from several threads
 * simply queue (one request is on the wire at a time, except for replays
 * submitted with gg_client_submit; a fast-path wait lets go of the mutex while
 * it waits: see "the fast path" below).  The last-error strings
 * and the server-info strings are per client, not per thread: read the error
 * right after the failing call, before another thread makes a call on the same
 * client (or give each thread its own client).  gg_client_close() must not race
 * with other calls on the same client.  Different clients are independent.
 * A gg_program_def is plain data with no lock: build it from one thread.
 * The shm helpers are thread-safe. */
#ifndef GFXGRAPH_CLIENT_H
#define GFXGRAPH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GG_CLIENT_API __attribute__((visibility("default")))
#else
#define GG_CLIENT_API
#endif

#define GG_CLIENT_PROTOCOL 1      /* wire protocol version this library speaks */

/* A dimension that is the replay's batch size (at most one per tensor, the
 * leading one by convention).  Rows past the batch, up to the bucket, are
 * padding: buffers must have room for them. */
#define GG_BATCH (-1)

/* The system service's socket (gfxgraphd.socket / gfxgraphd.service).
 *
 * Default socket when none is given:
 *   1. $GFXGRAPH_SOCKET if set and not empty: that path only;
 *   2. else, for root or when $XDG_RUNTIME_DIR is unset or empty: this path;
 *   3. else (a user): $XDG_RUNTIME_DIR/gfxgraph/gfxgraphd.sock, the user's
 *      own daemon, and when that socket does not exist or nobody listens on
 *      it (ENOENT, ECONNREFUSED), this path: so a user in group gfxgraph
 *      reaches the system service with no configuration.  Any other failure
 *      on the first path (EACCES, ...) is reported without trying further.
 * The daemon's own default is 1-3 without the fallback: as a user it
 * listens on the per-user path. */
#define GG_CLIENT_SYSTEM_SOCKET "/run/gfxgraph/gfxgraphd.sock"

typedef struct gg_client gg_client;
typedef struct gg_program_def gg_program_def;

/* ---- connection ---------------------------------------------------------- */

/* A new, unconnected client; NULL when out of memory. */
GG_CLIENT_API gg_client *gg_client_new(void);

/* Connect to socket_path (NULL or "": the default above, trying each of its
 * paths in turn) and say hello with client_name (NULL: "libgfxgraph-client").
 * gg_client_socket_path() then names the path connected to.  0 or a negative
 * errno:
 *   -ENOENT, -ECONNREFUSED, -EACCES, ...: no socket could be reached (the
 *    error of the last path tried; the message names every path tried and
 *    how to start the daemon);
 *   -EPROTO: the daemon speaks another protocol;  -EISCONN: already connected. */
GG_CLIENT_API int gg_client_connect(gg_client *c, const char *socket_path,
                                    const char *client_name);
/* Close the connection but keep the client (its last error stays readable). */
GG_CLIENT_API void gg_client_disconnect(gg_client *c);
/* Disconnect and free.  NULL is a no-op. */
GG_CLIENT_API void gg_client_close(gg_client *c);
GG_CLIENT_API bool gg_client_connected(const gg_client *c);

/* Time limit for each answer from the daemon, in milliseconds; 0 (the
 * default) waits forever.  A call that runs out returns -ETIMEDOUT and the
 * connection stays usable (the late answer is recognised and dropped). */
GG_CLIENT_API void gg_client_set_timeout(gg_client *c, int timeout_ms);

/* The first default socket path (see above: the one tried first) into buf.
 * Returns its length, or -ENAMETOOLONG when it does not fit (buf then holds
 * a truncated copy). */
GG_CLIENT_API int gg_client_default_socket(char *buf, size_t len);

/* ---- errors -------------------------------------------------------------- */

/* The last failure's message; "" after a call that succeeded (unless the
 * daemon sent an "error" notification during it, which is recorded here
 * too).  Never NULL. */
GG_CLIENT_API const char *gg_client_last_error(const gg_client *c);
/* Its symbolic code ("EINVAL", "ENOTCONN", ...), "" when none.  Never NULL. */
GG_CLIENT_API const char *gg_client_last_error_code(const gg_client *c);

/* ---- any method, in JSON --------------------------------------------------- */

/* Call any method of PROTOCOL.md by name: params_json is a JSON object of its
 * params (NULL, "" or "{}": none); on success *result_json is the answer as
 * JSON text (NaN and infinities as null, bytes as hex strings), to be freed
 * with gg_client_free_json().  0 or a negative errno (the daemon's error as
 * for any call: gg_client_last_error_code() is its code); -EINVAL with the
 * offset and the problem when params_json is not a JSON object.  For tools
 * and language bindings that would otherwise need a MessagePack library of
 * their own (gfxgraphctl call; the Python package's stats and health). */
GG_CLIENT_API int gg_client_call_json(gg_client *c, const char *method, const char *params_json,
                                      char **result_json);
GG_CLIENT_API void gg_client_free_json(char *json);

/* ---- what the daemon said in hello (valid while connected; "" / 0 before) - */

GG_CLIENT_API const char *gg_client_socket_path(const gg_client *c);
GG_CLIENT_API const char *gg_client_backend(const gg_client *c);        /* "cpu" | "hip" */
GG_CLIENT_API const char *gg_client_server_version(const gg_client *c); /* "0.1.0" */
GG_CLIENT_API const char *gg_client_device_name(const gg_client *c);
GG_CLIENT_API const char *gg_client_device_arch(const gg_client *c);
GG_CLIENT_API uint64_t gg_client_session_id(const gg_client *c);
/* Largest batch a replay may ask for (limits.max_batch), 0 if not reported. */
GG_CLIENT_API int gg_client_max_batch(const gg_client *c);
/* Largest request the daemon accepts (limits.max_message_size). */
GG_CLIENT_API size_t gg_client_max_message_size(const gg_client *c);

/* ---- buffers ------------------------------------------------------------- */

/* Register size bytes at offset of a POSIX shared-memory object (cpu
 * backend), e.g. one made with gg_client_shm_create().  *id receives the
 * daemon's buffer id. */
GG_CLIENT_API int gg_client_buffer_register_shm(gg_client *c, const char *shm_name,
                                                uint64_t offset, uint64_t size, uint64_t *id);
/* Register a buffer by raw handle bytes (hip backend: the 64-byte
 * hipIpcMemHandle_t of the allocation); offset and size select the part. */
GG_CLIENT_API int gg_client_buffer_register(gg_client *c, const void *handle, size_t handle_len,
                                            uint64_t offset, uint64_t size, uint64_t *id);
/* hip backend: register device memory by pointer.  The library finds the
 * allocation holding device_ptr (hipMemGetAddressRange), takes its IPC handle
 * (hipIpcGetMemHandle) and sends the pointer's offset into it, so any pointer
 * into a hipMalloc allocation works.  -ENOTSUP in a build without GPU
 * support. */
GG_CLIENT_API int gg_client_buffer_register_device(gg_client *c, const void *device_ptr,
                                                   uint64_t size, uint64_t *id);
/* Register size bytes at offset of a file descriptor: a memfd (e.g. from
 * gg_client_memfd_create()) or a POSIX shm object, open read-write.  The
 * descriptor travels with the request (SCM_RIGHTS); the daemon maps it and
 * closes its copy, so the caller may close fd afterwards.  Holding the
 * descriptor is the permission: this works whatever uid the daemon and
 * the client run as (a shm name works only for the daemon's own uid or
 * root).  The cpu backend takes any such object (one that shrinks makes
 * replays touching the lost pages fail with EFAULT); the hip backend needs
 * it sealed against shrinking (F_SEAL_SHRINK) and registers it as mapped
 * pinned host memory, so kernels reach it over the bus. */
GG_CLIENT_API int gg_client_buffer_register_fd(gg_client *c, int fd, uint64_t offset,
                                               uint64_t size, uint64_t *id);
GG_CLIENT_API int gg_client_buffer_release(gg_client *c, uint64_t id);

/* Shared memory for the cpu backend: create the POSIX shm object name ("/x",
 * one leading slash, no other), size it to size bytes (zero-filled), map it
 * read-write into *ptr.  Mode 0600: the daemon must run as the same user or
 * as root.  0, or -EEXIST when the name is taken, or another negative errno. */
GG_CLIENT_API int gg_client_shm_create(const char *name, size_t size, void **ptr);
/* Unmap (ptr may be NULL) and unlink name (may be NULL).  Register-then-unlink
 * is fine: the daemon keeps its own mapping. */
GG_CLIENT_API int gg_client_shm_destroy(const char *name, void *ptr, size_t size);
/* A memfd named name (for /proc only; need not be unique) of size bytes,
 * zero-filled, sealed against shrinking and growing (F_SEAL_SHRINK |
 * F_SEAL_GROW | F_SEAL_SEAL), mapped read-write into *ptr; *fd is the
 * descriptor for gg_client_buffer_register_fd().  Either backend takes it.
 * Free with munmap(*ptr, size) and close(*fd).  0 or a negative errno. */
GG_CLIENT_API int gg_client_memfd_create(const char *name, size_t size, void **ptr, int *fd);

/* ---- programs ------------------------------------------------------------ */

/* A program under construction.  Builder calls return 0 or a negative errno;
 * the first failure is remembered (gg_program_def_error()), later builder
 * calls then do nothing and return it, and gg_client_program_define() reports
 * it, so a sequence of builder calls may be checked once at the end.
 * Names are copied; dtype is "f32", "f16", "bf16", "i32", "i64" or "bool"
 * (which ops take which: docs/ops.md). */
GG_CLIENT_API gg_program_def *gg_program_def_new(const char *name);
GG_CLIENT_API void gg_program_def_free(gg_program_def *d);
/* A tensor in a registered buffer, offset bytes in.  dims: ndim (1..8) sizes
 * > 0, or GG_BATCH. */
GG_CLIENT_API int gg_program_def_tensor(gg_program_def *d, const char *name, uint64_t buffer,
                                        uint64_t offset, const char *dtype, int ndim,
                                        const int64_t *dims);
/* A daemon-owned intermediate tensor (not visible to the client). */
GG_CLIENT_API int gg_program_def_scratch(gg_program_def *d, const char *name, const char *dtype,
                                         int ndim, const int64_t *dims);
/* A view of tensor `of` (defined before or after): its dtype and bytes under
 * another shape with the same element count ([B, H*Dh] read as [B, H, Dh]).
 * dtype "i32" or "i64" is for token ids, positions and lengths, "bool" for
 * masks. */
GG_CLIENT_API int gg_program_def_view(gg_program_def *d, const char *name, const char *of,
                                      int ndim, const int64_t *dims);
/* Append a node to the current branch. */
GG_CLIENT_API int gg_program_def_node(gg_program_def *d, const char *op, int nin,
                                      const char *const *inputs, int nout,
                                      const char *const *outputs);
/* The same with comma-separated name lists: ("linear", "x,w,b", "y"). */
GG_CLIENT_API int gg_program_def_op(gg_program_def *d, const char *op, const char *inputs,
                                    const char *outputs);
/* Append a call of another program of the same client (its id from
 * gg_client_program_define), branch `branch` of it, to the current branch:
 * it runs at this program's bucket, so both need the same buckets.  The
 * daemon copies the callee's nodes and tensors into this program at define
 * (PROTOCOL.md, program.define). */
GG_CLIENT_API int gg_program_def_call(gg_program_def *d, uint64_t program, int branch);
/* An attribute of the last node added. */
GG_CLIENT_API int gg_program_def_attr_f(gg_program_def *d, const char *key, double value);
GG_CLIENT_API int gg_program_def_attr_s(gg_program_def *d, const char *key, const char *value);
/* Start a new branch (alternative node list; replay picks one with branch).
 * Nodes added before the first call form branch 0; a call while the current
 * branch has no nodes yet starts nothing.  Returns the index of the branch
 * that nodes now go to. */
GG_CLIENT_API int gg_program_def_branch(gg_program_def *d);
/* Shape buckets for this program (ascending batch sizes); default: the
 * daemon's. */
GG_CLIENT_API int gg_program_def_buckets(gg_program_def *d, int n, const int *buckets);
/* The first builder failure's message, "" when none. */
GG_CLIENT_API const char *gg_program_def_error(const gg_program_def *d);

/* Send the definition; *id receives the program id.  d stays owned by the
 * caller and may be reused or freed right after. */
GG_CLIENT_API int gg_client_program_define(gg_client *c, const gg_program_def *d, uint64_t *id);
GG_CLIENT_API int gg_client_program_release(gg_client *c, uint64_t id);
/* Capture ahead of time: buckets (n of them; n == 0: all of the program's)
 * for branch (< 0: every branch).  Counts of entries that are ready and that
 * failed (captures that failed are served eagerly) go to *ready / *failed
 * (either may be NULL).  0 or a negative errno. */
GG_CLIENT_API int gg_client_program_prepare(gg_client *c, uint64_t id, int n, const int *buckets,
                                            int branch, int *ready, int *failed);

/* ---- replay -------------------------------------------------------------- */

typedef enum { GG_PATH_GRAPH = 0, GG_PATH_EAGER = 1 } gg_replay_path;

typedef struct gg_replay_result {
    gg_replay_path path;    /* graph launch or eager launches */
    int bucket;             /* bucket used; 0 when batch > the largest bucket */
    int batch;
    int branch;
    bool fallback;          /* eager because the graph path failed */
    bool captured;          /* this replay captured the graph */
    double device_us;       /* device time of the work */
    char reason[192];       /* why eager / fallback, "" when none */
} gg_replay_result;

/* Run program for batch rows (>= 1) on branch (< 0: the default, 0).  Returns
 * when the work has completed, so the outputs are in the buffers.  res may be
 * NULL.  device_us: see gg_replay_opts.timed below (this call is untimed). */
GG_CLIENT_API int gg_client_replay(gg_client *c, uint64_t program, int batch, int branch,
                                   gg_replay_result *res);

/* Ordering with the client's own GPU work.  wait_event: the daemon's stream
 * waits (on the device) for this registered event before the replay's work;
 * signal_event: recorded on the daemon's stream after it.  async: the answer
 * comes as soon as the work is enqueued (device_us is then 0); wait on the
 * signal event before reading the outputs.
 *
 * timed (added after the first release, in what was padding, so the struct's
 * size and the other fields' offsets are unchanged; zero-initialise the
 * struct, e.g. `gg_replay_opts o = {0}` or designated initialisers): on the
 * fast path, have the daemon measure device_us; otherwise a cache hit on a
 * GPU is completed by the GPU itself, a few microseconds sooner, and its
 * device_us is 0.  The cpu backend and every replay that is not a plain hit
 * (capture, eager, ...) measure it anyway, as the socket path always does.
 * opts == NULL behaves as all zeros: the quickest path. */
typedef struct gg_replay_opts {
    uint64_t wait_event;    /* 0: none */
    uint64_t signal_event;  /* 0: none */
    bool async;
    bool timed;             /* fast path: measure device_us (see above) */
} gg_replay_opts;
GG_CLIENT_API int gg_client_replay_ex(gg_client *c, uint64_t program, int batch, int branch,
                                      const gg_replay_opts *opts, gg_replay_result *res);

/* ---- asynchronous replays ------------------------------------------------ */

/* Submit a replay and return at once; *ticket (never 0 on success) names it
 * for gg_client_wait() / gg_client_poll().  Arguments as gg_client_replay_ex
 * (opts may be NULL).  Several submissions may be outstanding and they may be
 * waited for in any order; the daemon runs a session's replays in submission
 * order.  Every ticket must be waited for once (that frees its place):
 *   - fast path: at most the ring's entries (64 by default) outstanding;
 *   - socket path: at most hello's limits.max_inflight - 1 (63 by default);
 * past that, -EBUSY.  Errors of the replay itself (unknown program, batch out
 * of range...) may come from the submit or, more often, from the wait. */
GG_CLIENT_API int gg_client_submit(gg_client *c, uint64_t program, int batch, int branch,
                                   const gg_replay_opts *opts, uint64_t *ticket);
/* Wait for a submitted replay and fill res (may be NULL) as gg_client_replay
 * does; 0 or the replay's negative errno (last error set as for any call).
 * -ENOENT: not an outstanding ticket (already waited for, timed out, or from
 * a previous connection).  The client's timeout (gg_client_set_timeout)
 * applies: on -ETIMEDOUT the ticket is given up and its late completion
 * ignored (the connection stays usable).  After a connection loss every
 * outstanding ticket is gone (-ENOTCONN). */
GG_CLIENT_API int gg_client_wait(gg_client *c, uint64_t ticket, gg_replay_result *res);
/* Without blocking: 1 when gg_client_wait(ticket) would return at once, 0
 * when the replay is still running, or a negative errno (-ENOENT as above).
 * The ticket stays outstanding either way. */
GG_CLIENT_API int gg_client_poll(gg_client *c, uint64_t ticket);

/* ---- the fast path ------------------------------------------------------- *
 *
 * When the daemon offers it (hello's fastpath.available), the first replay or
 * submit on a connection maps a shared-memory ring from the daemon
 * (fastpath.open, PROTOCOL.md section 15), and from then on replays skip the
 * socket: the library writes a descriptor into the ring, the daemon's
 * submission thread launches the work, and the completion comes back in the
 * same memory (on a GPU cache hit written by the device itself).  Results are
 * the same as over the socket (device_us: see gg_replay_opts.timed).  Everything
 * else (buffers, programs, stats) stays on the socket.  If the ring cannot be
 * had (the daemon is older or runs with fastpath = off, too many regions are
 * open, a region that does not check out), the connection silently keeps
 * using the socket; gg_client_fastpath_status() says which and why.
 *
 * Waiting: a wait first spins on the completion for GFXGRAPH_SPIN_US
 * microseconds (default 200; 0: never spin), yielding the CPU now and then,
 * then sleeps on a futex in slices of at most 20 ms, between which it checks
 * that the daemon and the connection are still alive: a daemon that dies or
 * closes the region ends the wait with -ECONNRESET, never a hang.  The
 * client's mutex is not held while spinning or sleeping, so other threads may
 * submit and wait meanwhile (two threads may not wait for the same ticket:
 * -EBUSY).  Over the socket a wait holds the mutex while it reads the answer
 * (other calls on the client queue behind it).
 *
 * Environment, read at gg_client_connect():
 *   GFXGRAPH_FASTPATH=0          never use the fast path (socket only);
 *   GFXGRAPH_FASTPATH_ENTRIES=N  ring slots to ask for (a power of two,
 *                                2..hello's max_entries; default 64);
 *   GFXGRAPH_SPIN_US=N           spin before sleeping (default 200). */

/* "active (64 entries, gpu completion)", "off (GFXGRAPH_FASTPATH=0)",
 * "unavailable: <why>" (the daemon's error code and message when it refused),
 * "not yet opened" (opened by the first replay), "not connected".  Never
 * NULL; valid until the next call on c. */
GG_CLIENT_API const char *gg_client_fastpath_status(const gg_client *c);

/* Events shared by IPC handle (hip backend: the 64-byte hipIpcEventHandle_t
 * of an event created with hipEventInterprocess | hipEventDisableTiming). */
GG_CLIENT_API int gg_client_event_register(gg_client *c, const void *handle, size_t handle_len,
                                           uint64_t *id);
/* GPU builds: register a hipEvent_t (passed as void *) of this process. */
GG_CLIENT_API int gg_client_event_register_device(gg_client *c, void *hip_event, uint64_t *id);
GG_CLIENT_API int gg_client_event_release(gg_client *c, uint64_t id);

/* Point one buffer tensor of a program at another buffer/offset (same dtype
 * and shape).  Cached graphs are updated in place on their next use instead
 * of being captured and instantiated again. */
GG_CLIENT_API int gg_client_program_rebind(gg_client *c, uint64_t program, const char *tensor,
                                           uint64_t buffer, uint64_t offset);

#ifdef __cplusplus
}
#endif
#endif
