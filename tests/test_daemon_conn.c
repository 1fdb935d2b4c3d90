/* SPDX-License-Identifier: MIT */
/* gfxgraphd connections over raw sockets: client text echoed in replies and
 * logs is valid UTF-8; records about closing a connection carry its session
 * as a field; request-timeout-ms cuts off a stalled partial request but not
 * an idle connection; max-connections-per-uid.  Each part starts its own
 * daemon. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_daemon_proto_util.h"

#define R "\xef\xbf\xbd"   /* U+FFFD */

static bool str_is(const msgpack_object *o, const char *want)
{
    return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(want) &&
           (!*want || memcmp(o->via.str.ptr, want, o->via.str.size) == 0);
}

static bool str_valid(const msgpack_object *o)
{
    return o && o->type == MSGPACK_OBJECT_STR && proto_utf8_valid(o->via.str.ptr, o->via.str.size);
}

/* hello with a client name of len raw bytes; the session id */
static uint64_t hello_as(h_conn *c, uint32_t msgid, const char *client, size_t len)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "protocol", 1);
    proto_pack_key(&p.pk, "client");
    proto_pack_strn(&p.pk, client, len);
    const msgpack_object *r;
    uint64_t id = call_ok(c, msgid, "hello", &p, &r) ? h_getu(r, "session") : 0;
    mp_free(&p);
    return id;
}

static const msgpack_object *stats_session(const msgpack_object *stats, uint64_t id)
{
    const msgpack_object *ss = h_get(stats, "sessions");
    for (uint32_t i = 0; ss && ss->type == MSGPACK_OBJECT_ARRAY && i < ss->via.array.size; i++)
        if (h_getu(&ss->via.array.ptr[i], "id") == id)
            return &ss->via.array.ptr[i];
    return NULL;
}

/* ---- UTF-8 ---------------------------------------------------------------- */

static void utf8_unknown_methods(h_conn *c)
{
    char long_name[80], long_want[120];
    memset(long_name, 'a', 63);
    strcpy(long_name + 63, "\xc3\xa9tc");      /* é straddles the 64-byte cut */
    snprintf(long_want, sizeof long_want, "unknown method '%.63s'", long_name);
    const struct {
        const char *method, *want;
    } cases[] = {
        {"bad\xff\xfename", "unknown method 'bad" R R "name'"},
        {long_name, long_want},
        {"two\nlines", "unknown method 'two" R "lines'"},
        {"caf\xc3\xa9", "unknown method 'caf\xc3\xa9'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const msgpack_object *res, *err;
        if (call(c, 100 + (uint32_t)i, cases[i].method, NULL, &res, &err) != 1)
            continue;
        char code[32];
        CHECK_STR(h_err_code(err, code, sizeof code), "ENOSYS");
        const msgpack_object *m = h_get(err, "message");
        CHECKF(str_valid(m), "unknown method %zu: the message is valid UTF-8", i);
        CHECKF(str_is(m, cases[i].want), "unknown method %zu: the message is \"%s\"", i,
               cases[i].want);
    }
}

static void utf8_client_names(h_conn *c, const char *sock)
{
    char name[80], want[80];
    memset(name, 'n', 62);
    memcpy(name + 62, "\xe2\x82\xac", 3);      /* € across the 63-byte limit */
    memset(want, 'n', 62);
    want[62] = '\0';
    uint64_t id1 = hello_as(c, 1, name, 65);
    h_conn c2;
    if (!CHECK(h_conn_open(&c2, sock) == 0))
        return;
    uint64_t id2 = hello_as(&c2, 1, "x\xffy\tz\xc3", 6);
    const msgpack_object *st;
    if (id1 && id2 && call_ok(c, 2, "stats", NULL, &st)) {
        const msgpack_object *n1 = h_get(stats_session(st, id1), "client");
        const msgpack_object *n2 = h_get(stats_session(st, id2), "client");
        CHECKF(str_valid(n1) && str_valid(n2), "stats: client names are valid UTF-8");
        CHECKF(str_is(n1, want), "a name cut at 63 bytes keeps whole characters (62 bytes)");
        CHECKF(str_is(n2, "x" R "y" R "z" R), "invalid bytes and controls become U+FFFD");
    }
    h_conn_close(&c2);
}

static void utf8_shm_handles(h_conn *c)
{
    char n1[96], n2[96];
    snprintf(n1, sizeof n1, "/ggtest-\xc3\xa9-\xff-%d", (int)getpid());
    memset(n2, 'h', sizeof n2);
    n2[0] = '/';
    memcpy(n2 + 69, "\xc3\xa9", 2);             /* é at bytes 69..70, past the 70 shown */
    n2[71] = '\0';
    const char *names[2] = {n1, n2};
    char want1[96];
    snprintf(want1, sizeof want1, "/ggtest-\xc3\xa9-" R "-%d", (int)getpid());
    char want2[80];
    memcpy(want2, n2, 69);
    want2[69] = '\0';
    const char *wants[2] = {want1, want2};
    for (int i = 0; i < 2; i++) {
        int fd = shm_open(names[i], O_CREAT | O_EXCL | O_RDWR, 0600);
        if (!CHECKF(fd >= 0 && ftruncate(fd, 4096) == 0, "shm %d: %s", i, strerror(errno)))
            return;
        close(fd);
        mp p;
        mp_init(&p);
        msgpack_pack_map(&p.pk, 2);
        proto_pack_key(&p.pk, "handle");
        proto_pack_str(&p.pk, names[i]);
        proto_pack_kv_u64(&p.pk, "size", 4096);
        const msgpack_object *r;
        call_ok(c, 10 + (uint32_t)i, "buffer.register", &p, &r);
        mp_free(&p);
        shm_unlink(names[i]);
    }
    const msgpack_object *r;
    if (!call_ok(c, 12, "buffer.list", NULL, &r))
        return;
    const msgpack_object *bl = h_get(r, "buffers");
    CHECK(bl && bl->type == MSGPACK_OBJECT_ARRAY && bl->via.array.size == 2);
    for (uint32_t i = 0; bl && i < bl->via.array.size && i < 2; i++) {
        const msgpack_object *h = h_get(&bl->via.array.ptr[i], "handle");
        CHECKF(str_valid(h), "buffer.list: handle %u is valid UTF-8", i);
        CHECKF(str_is(h, wants[i]), "buffer.list: handle %u is \"%s\"", i, wants[i]);
    }
}

static void utf8_program_names(h_conn *c)
{
    char msg[256];
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 3);
    proto_pack_kv_str(&p.pk, "name", "prog\xff");
    proto_pack_key(&p.pk, "tensors");
    msgpack_pack_map(&p.pk, 0);
    proto_pack_key(&p.pk, "nodes");
    msgpack_pack_array(&p.pk, 0);
    call_fails(c, 20, "program.define", &p, "EINVAL", msg, sizeof msg);
    CHECK_CONTAINS(msg, "UTF-8");
    mp_free(&p);

    /* an error quoting the client's bytes: the reply and the log get them clean */
    mp_init(&p);
    msgpack_pack_map(&p.pk, 3);
    proto_pack_kv_str(&p.pk, "name", "prog");
    proto_pack_key(&p.pk, "tensors");
    msgpack_pack_map(&p.pk, 1);
    proto_pack_key(&p.pk, "s");
    msgpack_pack_map(&p.pk, 3);
    proto_pack_kv_bool(&p.pk, "scratch", true);
    proto_pack_kv_str(&p.pk, "dtype", "f32");
    proto_pack_key(&p.pk, "shape");
    msgpack_pack_array(&p.pk, 1);
    msgpack_pack_uint8(&p.pk, 4);
    proto_pack_key(&p.pk, "nodes");
    msgpack_pack_array(&p.pk, 1);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_str(&p.pk, "op", "x\xffy\nz");
    call_fails(c, 21, "program.define", &p, "EINVAL", msg, sizeof msg);
    CHECK_CONTAINS(msg, "unknown op 'x" R "y" R "z'");
    mp_free(&p);
}

static void test_utf8(void)
{
    h_section("client text in replies and logs is valid UTF-8");
    const char *args[] = {"--log-level", "debug", NULL};
    h_daemon d;
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    h_conn c;
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        utf8_unknown_methods(&c);
        utf8_client_names(&c, d.sock);
        utf8_shm_handles(&c);
        utf8_program_names(&c);
        h_conn_close(&c);
    }
    /* every record is valid UTF-8 and one line (the log is written by a
     * thread of its own: wait for the last case's record) */
    char *log = h_read_file(d.log);
    for (int64_t end = h_now_ms() + 60000;
         !strstr(log, "unknown op 'x" R "y" R "z'") && h_now_ms() < end;) {
        h_sleep_ms(20);
        free(log);
        log = h_read_file(d.log);
    }
    CHECKF(proto_utf8_valid(log, strlen(log)), "the daemon's log is valid UTF-8");
    CHECK_CONTAINS(log, "unknown op 'x" R "y" R "z'");
    int bad = 0;
    for (const char *l = log; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        bad += !(l[0] >= '0' && l[0] <= '9');
    CHECKF(bad == 0, "every log line starts with its timestamp (%d do not)", bad);
    free(log);
    h_daemon_stop(&d);
}

/* ---- records about closing a connection --------------------------------- */

/* Wait (up to 60 s) for the daemon's log to contain needle. */
static bool log_has(const h_daemon *d, const char *needle)
{
    for (int64_t end = h_now_ms() + 60000;; h_sleep_ms(20)) {
        char *log = h_read_file(d->log);
        bool found = strstr(log, needle) != NULL;
        free(log);
        if (found || h_now_ms() > end)
            return found;
    }
}

/* A connection that never reads: buffer.list of many buffers, over and over,
 * until the daemon has more than 64 MiB queued for it and cuts it off. */
static void close_not_reading(const char *sock, const h_daemon *d)
{
    h_conn c;
    if (!CHECK(h_conn_open(&c, sock) == 0))
        return;
    uint64_t sid = hello_as(&c, 1, "not-reading", 11);
    char name[96];
    snprintf(name, sizeof name, "/ggtest-conn-%d-%s", (int)getpid(),
             "padded-so-that-each-buffer-list-entry-is-long");
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (!CHECKF(fd >= 0 && ftruncate(fd, 4096) == 0, "shm: %s", strerror(errno))) {
        h_conn_close(&c);
        return;
    }
    close(fd);
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_str(&p.pk, "handle", name);
    proto_pack_kv_u64(&p.pk, "size", 4096);
    const msgpack_object *r;
    bool ok = true;
    for (uint32_t i = 0; i < 256 && ok; i++)
        ok = call_ok(&c, 10 + i, "buffer.register", &p, &r);
    mp_free(&p);
    shm_unlink(name);
    size_t one = 0;
    if (ok && call_ok(&c, 300, "buffer.list", NULL, &r))
        one = c.msg_len;
    if (!CHECKF(one > 10000, "one buffer.list answer is large (%zu bytes)", one)) {
        h_conn_close(&c);
        return;
    }
    /* 100 requests a write; 80 MiB of answers is past the bound */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int i = 0; i < 100; i++)
        h_pack_request(&sb, 1000 + (uint32_t)i, "buffer.list", NULL, 0);
    size_t batches = (80u << 20) / (one * 100) + 1, sent = 0;
    while (sent < batches && h_conn_send(&c, sb.data, sb.size) == 0)
        sent++;
    msgpack_sbuffer_destroy(&sb);
    char want[160];
    snprintf(want, sizeof want, "warn: session=%llu client pid %d is not reading its responses",
             (unsigned long long)sid, (int)getpid());
    CHECKF(log_has(d, want), "the log names the session as a field: \"%s\"", want);
    h_conn_close(&c);
}

static void test_close_records(void)
{
    h_section("records about closing a connection carry the session field");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return;
    h_conn c;
    if (CHECK(h_conn_open(&c, d.sock) == 0)) {
        uint64_t sid = hello_as(&c, 1, "bad-bytes", 9);
        CHECK(h_conn_send(&c, "\xc1", 1) == 0);
        char msg[256];
        expect_notify(&c, "EPROTO", msg, sizeof msg);
        expect_eof(&c);
        h_conn_close(&c);
        char want[400];
        snprintf(want, sizeof want, "info: session=%llu closing connection: %s",
                 (unsigned long long)sid, msg);
        CHECKF(log_has(&d, want), "the log names the session as a field: \"%s\"", want);
    }
    close_not_reading(d.sock, &d);
    h_daemon_stop(&d);
}

/* ---- request-timeout-ms -------------------------------------------------- */

/* A whole hello request, packed. */
static void hello_bytes(msgpack_sbuffer *sb, uint32_t msgid)
{
    mp p;
    mp_init(&p);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_u64(&p.pk, "protocol", 1);
    h_pack_request(sb, msgid, "hello", p.sb.data, p.sb.size);
    mp_free(&p);
}

/* The next message is the response to msgid, without an error. */
static bool expect_answer(h_conn *c, uint32_t msgid, const char *what)
{
    const msgpack_object *o;
    int rc = h_conn_recv(c, T_RECV_MS, &o);
    return CHECKF(rc == 1 && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 4 &&
                      o->via.array.ptr[0].via.u64 == 1 && o->via.array.ptr[1].via.u64 == msgid &&
                      o->via.array.ptr[2].type == MSGPACK_OBJECT_NIL,
                  "%s: answered (rc %d)", what, rc);
}

static void test_request_timeout(void)
{
    h_section("request-timeout-ms: a stalled partial request is cut off, idle connections are not");
    const char *args[] = {"--set", "request-timeout-ms=300", NULL};
    h_daemon d;
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    h_conn idle, done, partial, pieces, tail;
    if (!CHECK(h_conn_open(&idle, d.sock) == 0 && h_conn_open(&done, d.sock) == 0 &&
               h_conn_open(&partial, d.sock) == 0 && h_conn_open(&pieces, d.sock) == 0 &&
               h_conn_open(&tail, d.sock) == 0)) {
        h_daemon_stop(&d);
        return;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    hello_bytes(&sb, 1);
    size_t n = sb.size;
    CHECK(hello(&done, 1));
    int64_t t0 = h_now_ms();
    CHECK(h_conn_send(&partial, sb.data, 5) == 0);
    /* a whole request and the start of the next in one write */
    msgpack_sbuffer two;
    msgpack_sbuffer_init(&two);
    hello_bytes(&two, 7);
    CHECK(h_conn_send(&tail, two.data, two.size) == 0 && h_conn_send(&tail, sb.data, 3) == 0);
    msgpack_sbuffer_destroy(&two);
    /* a request in three pieces, all within the limit: each piece read by
     * the daemon before the next is sent */
    CHECK(h_conn_send(&pieces, sb.data, 4) == 0 && t_sent_read(&pieces));
    CHECK(h_conn_send(&pieces, sb.data + 4, 4) == 0 && t_sent_read(&pieces));
    CHECK(h_conn_send(&pieces, sb.data + 8, n - 8) == 0);
    expect_answer(&pieces, 1, "a request sent in pieces within the limit");

    char msg[256];
    expect_notify(&partial, "ETIMEDOUT", msg, sizeof msg);
    int64_t took = h_now_ms() - t0;
    CHECKF(took >= 250, "not before the limit (%lld ms)", (long long)took);
    CHECK_CONTAINS(msg, "request-timeout-ms");
    expect_eof(&partial);
    expect_answer(&tail, 7, "the whole request before a partial one");
    expect_notify(&tail, "ETIMEDOUT", msg, sizeof msg);
    expect_eof(&tail);

    /* three times the limit later: connections with nothing pending live */
    while (h_now_ms() < t0 + 1000)
        h_sleep_ms(20);
    CHECKF(hello(&idle, 2), "a connection that never sent anything is still served");
    CHECKF(hello(&done, 3), "a connection idle after its answer is still served");
    CHECKF(hello(&pieces, 4), "the connection that sent in pieces is still served");
    h_conn_close(&idle);
    h_conn_close(&done);
    h_conn_close(&partial);
    h_conn_close(&pieces);
    h_conn_close(&tail);
    h_daemon_stop(&d);

    /* 0: no limit */
    const char *off[] = {"--set", "request-timeout-ms=0", NULL};
    if (h_daemon_start(&d, off, NULL) < 0) {
        msgpack_sbuffer_destroy(&sb);
        return;
    }
    if (CHECK(h_conn_open(&partial, d.sock) == 0)) {
        CHECK(h_conn_send(&partial, sb.data, 5) == 0);
        h_sleep_ms(800);
        CHECK(h_conn_send(&partial, sb.data + 5, n - 5) == 0);
        expect_answer(&partial, 1, "request-timeout-ms=0: a slow request");
        h_conn_close(&partial);
    }
    msgpack_sbuffer_destroy(&sb);
    h_daemon_stop(&d);
}

/* ---- max-connections-per-uid --------------------------------------------- */

/* Wait (up to 60 s) until stats shows n open connections (closed ones may
 * linger a moment after the client let go). */
static bool wait_sessions(h_conn *c, uint64_t n)
{
    const msgpack_object *r, *e;
    for (int64_t end = h_now_ms() + 60000; h_now_ms() < end; h_sleep_ms(10))
        if (h_conn_call(c, 99, "stats", NULL, 0, &r, &e) == 1 && !e &&
            h_getu(r, "sessions_active") == n)
            return true;
    return CHECKF(false, "stats shows %llu open connections", (unsigned long long)n);
}

/* Open connections until one is refused; how many were served.  The
 * refusal's message goes to msg. */
static int open_until_refused(const char *sock, h_conn *conns, int max, char *msg, size_t len)
{
    msg[0] = '\0';
    for (int i = 0; i < max; i++) {
        if (!CHECK(h_conn_open(&conns[i], sock) == 0))
            return i;
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        h_pack_request(&sb, 1, "stats", NULL, 0);
        h_conn_send_sb(&conns[i], &sb);
        msgpack_sbuffer_destroy(&sb);
        /* the answer, or instead the refusal and the end */
        const msgpack_object *o;
        if (h_conn_recv(&conns[i], T_RECV_MS, &o) == 1 && o->type == MSGPACK_OBJECT_ARRAY &&
            o->via.array.size == 4 && o->via.array.ptr[0].via.u64 == GG_MSG_RESPONSE)
            continue;
        proto_msg m;
        bool idok;
        char why[128];
        CHECKF(proto_msg_decode(o, &m, &idok, why, sizeof why) == 0 && m.type == GG_MSG_NOTIFY,
               "connection %d: refused with a notification", i + 1);
        char code[32];
        CHECK_STR(h_gets(m.params, "code", code, sizeof code), "EBUSY");
        h_gets(m.params, "message", msg, len);
        expect_eof(&conns[i]);
        h_conn_close(&conns[i]);
        return i;
    }
    return max;
}

/* As another uid (root only): can it connect and say hello? */
static int other_uid_hello(const h_daemon *d)
{
    chmod(d->dir, 0711);
    chmod(d->sock, 0666);
    pid_t pid = fork();
    if (pid == 0) {
        h_conn c;
        bool ok = setgid(65534) == 0 && setuid(65534) == 0 && h_conn_open(&c, d->sock) == 0;
        const msgpack_object *r, *e;
        static const uint8_t params[] = {0x81, 0xa8, 'p', 'r', 'o', 't', 'o', 'c', 'o', 'l', 1};
        ok = ok && h_conn_call(&c, 1, "hello", params, sizeof params, &r, &e) == 1 && !e;
        _exit(ok ? 0 : 1);   /* not exit(): the parent's daemons are not ours */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_per_uid(void)
{
    h_section("max-connections-per-uid");
    enum { N = 24 };
    h_conn conns[N];
    char msg[256], uidtxt[32];
    snprintf(uidtxt, sizeof uidtxt, "from uid %d", (int)getuid());
    const char *env[] = {"GFXGRAPH_MAX_CONNECTIONS_PER_UID=3", NULL};
    h_daemon d;
    if (h_daemon_start(&d, NULL, env) < 0)
        return;
    h_conn first;
    if (CHECK(h_conn_open(&first, d.sock) == 0) && wait_sessions(&first, 1)) {
        int got = open_until_refused(d.sock, conns, N, msg, sizeof msg);
        CHECKF(got == 2, "a limit of 3: 3 connections served (got %d)", got + 1);
        CHECK_CONTAINS(msg, "max-connections-per-uid");
        CHECK_CONTAINS(msg, uidtxt);
        if (geteuid() == 0)
            CHECKF(other_uid_hello(&d) == 0, "another uid still gets in");
        else
            printf("SKIP: not root: cannot connect as another uid\n");
        for (int i = 0; i < got; i++)
            h_conn_close(&conns[i]);
        wait_sessions(&first, 1);
        got = open_until_refused(d.sock, conns, 1, msg, sizeof msg);
        CHECKF(got == 1, "once they close, the uid gets in again");
        for (int i = 0; i < got; i++)
            h_conn_close(&conns[i]);
        h_conn_close(&first);
    }
    h_daemon_stop(&d);

    /* the default: a quarter of max-connections, at least 16 */
    const char *args[] = {"--set", "max-connections=40", NULL};
    if (h_daemon_start(&d, args, NULL) < 0)
        return;
    if (CHECK(h_conn_open(&first, d.sock) == 0) && wait_sessions(&first, 1)) {
        int got = open_until_refused(d.sock, conns, N, msg, sizeof msg);
        CHECKF(got + 1 == 16, "max-connections 40: 16 per uid by default (got %d)", got + 1);
        CHECK_CONTAINS(msg, "max-connections-per-uid");
        for (int i = 0; i < got; i++)
            h_conn_close(&conns[i]);
        h_conn_close(&first);
    }
    h_daemon_stop(&d);

    /* 0: off, max-connections still holds */
    const char *none[] = {"--set", "max-connections=20", "--set", "max-connections-per-uid=0",
                          NULL};
    if (h_daemon_start(&d, none, NULL) < 0)
        return;
    if (CHECK(h_conn_open(&first, d.sock) == 0) && wait_sessions(&first, 1)) {
        int got = open_until_refused(d.sock, conns, N, msg, sizeof msg);
        CHECKF(got + 1 == 20, "max-connections-per-uid 0: max-connections (20) is the limit "
               "(got %d)", got + 1);
        CHECK_CONTAINS(msg, "(max-connections)");
        for (int i = 0; i < got; i++)
            h_conn_close(&conns[i]);
        h_conn_close(&first);
    }
    h_daemon_stop(&d);
}

int main(void)
{
    h_init("test_daemon_conn", 600);
    test_request_timeout();
    test_per_uid();
    test_utf8();
    test_close_records();
    return h_finish();
}
