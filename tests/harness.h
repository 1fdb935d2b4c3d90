/* SPDX-License-Identifier: MIT */
/* Test harness shared by the unit and integration tests.
 *
 * Checks: CHECK(cond) and friends count passes and failures and print each
 * failure with its file and line; h_finish() prints the closing line
 * "N passed, M failed" and gives the exit status.  GG_TEST_VERBOSE=1 prints
 * passing checks too.
 *
 * Daemons: h_daemon_start() runs the real gfxgraphd (GG_DAEMON_PATH, set by
 * CMake) on a socket in a fresh temporary directory, with the environment
 * cleaned of GFXGRAPH* and HGB_* variables (and GFXGRAPH_CONFIG=/dev/null, so
 * no system config file is read) plus the variables the test gives, and
 * waits until the socket answers.  h_daemon_stop() sends SIGTERM and checks
 * exit status 0.  A daemon still running when the test ends, fails or runs
 * past its time limit (h_init) is killed.  A forked child that calls h_init
 * starts its own counts and does not own its parent's daemons.
 *
 * Raw connections: h_conn speaks MessagePack-RPC bytes directly, for tests
 * that need to send what the client library never would. */
#ifndef GG_TEST_HARNESS_H
#define GG_TEST_HARNESS_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

/* ---- checks -------------------------------------------------------------- */

extern int h_pass, h_fail;

void h_init(const char *name, int timeout_s);
int h_finish(void);
bool h_check(bool ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void h_section(const char *name);
void h_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define CHECK(cond) h_check(!!(cond), __FILE__, __LINE__, "%s", #cond)
#define CHECKF(cond, ...) h_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_EQ(a, b)                                                                       \
    do {                                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                                  \
        h_check(a_ == b_, __FILE__, __LINE__, "%s == %s (%lld vs %lld)", #a, #b, a_, b_);    \
    } while (0)
#define CHECK_STR(a, b)                                                                      \
    do {                                                                                     \
        const char *a_ = (a), *b_ = (b);                                                     \
        h_check(a_ && b_ && strcmp(a_, b_) == 0, __FILE__, __LINE__, "%s == %s (\"%s\" vs \"%s\")", \
                #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                             \
    } while (0)
#define CHECK_CONTAINS(hay, needle)                                                          \
    do {                                                                                     \
        const char *h_ = (hay), *n_ = (needle);                                              \
        h_check(h_ && strstr(h_, n_) != NULL, __FILE__, __LINE__, "%s contains \"%s\" (got \"%s\")", \
                #hay, n_, h_ ? h_ : "(null)");                                               \
    } while (0)

/* ---- time ---------------------------------------------------------------- */

int64_t h_now_ms(void);
void h_sleep_ms(int ms);

/* ---- daemons ------------------------------------------------------------- */

typedef struct h_daemon {
    pid_t pid;              /* 0 when not running */
    int status;             /* wait status once it ended */
    bool own_dir;
    char dir[128];          /* temporary directory (removed at stop) */
    char sock[160];
    char log[160];          /* the daemon's stdout and stderr */
} h_daemon;

/* Start on a fresh socket and wait (up to 60 s) for it to answer.  args and
 * env are NULL-terminated lists (either may be NULL).  Returns 0, or -1
 * after printing the daemon's log (a failed check). */
int h_daemon_start(h_daemon *d, const char *const *args, const char *const *env);
/* The same with --backend hip first.  A daemon that does not come up (no
 * GPU) is no failure: "SKIP: ..." and its log are printed and -1 returned,
 * for the test to exit 77. */
int h_daemon_start_hip(h_daemon *d, const char *const *args, const char *const *env);
/* Run fn() in a child process, counted as a test of its own named name (a
 * GPU client must not share the runtime with its parent); one check here:
 * the child's checks passed. */
void h_in_child(const char *name, void (*fn)(void));
/* Start on sock (in dir, which the caller owns) without waiting: for tests of
 * start-up itself.  Always passes --socket sock --log-target stderr first.
 * Returns 0 or -errno. */
int h_daemon_spawn(h_daemon *d, const char *sock, const char *const *args,
                   const char *const *env);
/* The same with only args (no --socket, --log-target or --backend of the
 * harness's): for tests of the settings that choose those.  sock is where
 * the daemon is expected to listen (for h_daemon_wait_ready).  The log is
 * d->log when set, else sock.log; its directory must exist.  0 or -errno. */
int h_daemon_spawn_bare(h_daemon *d, const char *sock, const char *const *args,
                        const char *const *env);
/* 0 when the socket answers; -1 when the daemon exited (d->status holds how);
 * -ETIMEDOUT. */
int h_daemon_wait_ready(h_daemon *d, int timeout_ms);
/* Wait for the daemon to exit: its exit code, 128+signal when killed, or
 * -ETIMEDOUT (still running). */
int h_daemon_wait_exit(h_daemon *d, int timeout_ms);
/* SIGTERM, wait (60 s, then SIGKILL) and check exit status 0.  Returns the
 * exit code (or 128+signal). */
int h_daemon_stop(h_daemon *d);
void h_daemon_kill(h_daemon *d);
void h_daemon_dump_log(const h_daemon *d);
/* The log file's contents (malloc'd, NUL-terminated; "" if unreadable). */
char *h_read_file(const char *path);

/* ---- JSON output checked by python3 ------------------------------------------ */

/* Whether python3 runs here (looked up once). */
bool h_have_python(void);
/* Load json with python3's json module as d, run code (asserts on d); true
 * when it all passed.  Prints python's output when it did not. */
bool h_py_json_check(const char *json, const char *code);

/* ---- as an unprivileged user ------------------------------------------------ */

/* Run fn(arg) in a child process as "nobody" (when this process is root;
 * as itself otherwise), counted as a test of its own named name.  The child
 * is skipped with a note, not failed, when it cannot become that user or
 * cannot execute each path in need (NULL-terminated; a build under a 0700
 * home, say).  Records one check here: the child's checks passed. */
void h_as_user(const char *name, void (*fn)(void *), void *arg, const char *const *need);

/* ---- raw connections ----------------------------------------------------- */

typedef struct {
    int fd;
    uint8_t *buf;
    size_t len, cap, msg_len;
    proto_frame frame;
    msgpack_unpacked up;
} h_conn;

int h_conn_open(h_conn *c, const char *sock);
void h_conn_close(h_conn *c);
int h_conn_send(h_conn *c, const void *p, size_t n);
/* Send the sbuffer's bytes and clear it. */
int h_conn_send_sb(h_conn *c, msgpack_sbuffer *sb);
/* Wait (up to timeout_ms) until the daemon has read all that was sent on c:
 * a unix stream socket's bytes count against the sender (SIOCOUTQ) until
 * the reader takes them.  For a message sent in pieces, each piece read
 * before the next.  0, -ETIMEDOUT or -errno. */
int h_conn_drained(const h_conn *c, int timeout_ms);
/* The next whole message: 1 (valid until the next recv), 0 at end of stream,
 * -ETIMEDOUT, or -EPROTO / -EMSGSIZE / -errno. */
int h_conn_recv(h_conn *c, int timeout_ms, const msgpack_object **out);
/* Send a request whose params map is the packed map bytes (NULL: []), and
 * read messages until the response with that msgid.  1 and *result (the
 * result map) / *error (the error map, NULL when none); or <= 0 as recv. */
int h_conn_call(h_conn *c, uint32_t msgid, const char *method, const void *params,
                size_t params_len, const msgpack_object **result, const msgpack_object **error);

/* Pack [0, msgid, method, [<map>]] with the map given as packed bytes, or
 * [0, msgid, method, []] when params is NULL. */
void h_pack_request(msgpack_sbuffer *sb, uint32_t msgid, const char *method, const void *params,
                    size_t params_len);

/* ---- reading results ----------------------------------------------------- */

/* Look up a dotted path in nested maps and arrays: "limits.buckets",
 * "sessions.0.requests".  NULL when absent. */
const msgpack_object *h_get(const msgpack_object *o, const char *path);
/* Numbers: UINT64_MAX / NAN when absent or not a number of that kind. */
uint64_t h_getu(const msgpack_object *o, const char *path);
int64_t h_geti(const msgpack_object *o, const char *path);
double h_getf(const msgpack_object *o, const char *path);
/* A str as a NUL-terminated copy in buf ("" when absent); returns buf. */
const char *h_gets(const msgpack_object *o, const char *path, char *buf, size_t len);
bool h_is(const msgpack_object *o, const char *path, msgpack_object_type t);
/* The error code string of an error map {code, message} into buf. */
const char *h_err_code(const msgpack_object *err, char *buf, size_t len);

/* ---- misc ---------------------------------------------------------------- */

/* A unique name for a shm object or file: "<prefix>-<pid>-<n>". */
void h_unique(char *buf, size_t len, const char *prefix);
/* Run argv (stdin /dev/null) and capture stdout and stderr (malloc'd).
 * env: extra "K=V" entries.  Returns the exit code, 128+signal, or -errno. */
int h_run(const char *const *argv, const char *const *env, const char *stdin_text, char **out,
          char **err, int timeout_ms);

#endif
