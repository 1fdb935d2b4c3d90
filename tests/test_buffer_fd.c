/* SPDX-License-Identifier: MIT */
/* Buffers by file descriptor.  buffer.register {fd:
 * true} takes the descriptor that came (SCM_RIGHTS) with the request's own
 * bytes; holding it is the permission.
 *
 * test_buffer_fd (any uid, cpu backend):
 *  - a sealed memfd (gg_client_memfd_create) and an unlinked POSIX shm
 *    object registered by fd: a replay writes its outputs into them;
 *  - fd: true without a descriptor (EBADF), with a handle too (EINVAL); a
 *    pipe, a socket, /dev/null, a directory, a file on disk (EINVAL naming
 *    what it is), a read-only descriptor and a write-sealed memfd
 *    (EACCES), a range past the object's end (ERANGE);
 *  - a descriptor sent with a request that does not take it (hello) and
 *    two extra ones with a register: the requests are answered, the client
 *    gets an EBADF notification, the descriptors are closed; more than 16
 *    waiting for a request's bytes: the rest closed at once, said so;
 *  - the daemon's descriptor count is back at its baseline after all that;
 *  - an unsealed memfd shrunk under the daemon: the replay fails EFAULT and
 *    the daemon goes on; a sealed one cannot be shrunk.
 *
 * test_buffer_fd --other-uid (as root, else SKIP): the daemon runs as
 * nobody, the client as another uid: the client's shm object by name is
 * refused (the daemon cannot open a 0600 object of another uid), the same
 * memory by fd works, and a replay writes into it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"

enum { D = 4, TOP = 4, XOFF = 0, YOFF = 4096, BYTES = 8192 };

static uint32_t g_id = 1000;

static void pstr(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* The daemon's open descriptors (-1 when /proc cannot be read). */
static int fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Send len bytes with nfds descriptors on the first of them. */
static int send_fds(h_conn *c, const void *data, size_t len, const int *fds, int nfds)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * 32)];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        mh.msg_control = ctl.b;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : h_conn_send(c, (const uint8_t *)data + n, len - (size_t)n);
}

/* A request's bytes: buffer.register {fd: true (when fd), handle?, offset,
 * size}. */
static void pack_register(msgpack_sbuffer *sb, uint32_t msgid, bool fd, const char *handle,
                          uint64_t off, uint64_t size)
{
    msgpack_sbuffer p;
    msgpack_sbuffer_init(&p);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &p, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2 + (fd ? 1 : 0) + (handle ? 1 : 0));
    if (fd) {
        pstr(&pk, "fd");
        msgpack_pack_true(&pk);
    }
    if (handle) {
        pstr(&pk, "handle");
        pstr(&pk, handle);
    }
    pstr(&pk, "offset");
    msgpack_pack_uint64(&pk, off);
    pstr(&pk, "size");
    msgpack_pack_uint64(&pk, size);
    h_pack_request(sb, msgid, "buffer.register", p.data, p.size);
    msgpack_sbuffer_destroy(&p);
}

typedef struct {
    bool answered;          /* the response to the msgid came */
    uint64_t id;            /* its result's id, 0 on error */
    char code[32], msg[512];
    int notes;              /* EBADF notifications met on the way */
    char note[512];
} answer;

/* Read until the response to msgid, counting "error" notifications. */
static void await(h_conn *c, uint32_t msgid, answer *a)
{
    memset(a, 0, sizeof *a);
    for (;;) {
        const msgpack_object *o;
        if (h_conn_recv(c, 60000, &o) != 1 || o->type != MSGPACK_OBJECT_ARRAY)
            return;
        const msgpack_object *v = o->via.array.ptr;
        if (o->via.array.size == 3 && v[0].via.u64 == 2) {
            const msgpack_object *p = v[2].type == MSGPACK_OBJECT_ARRAY && v[2].via.array.size
                                          ? &v[2].via.array.ptr[0] : NULL;
            char code[32] = "";
            if (p && strcmp(h_gets(p, "code", code, sizeof code), "EBADF") == 0) {
                a->notes++;
                h_gets(p, "message", a->note, sizeof a->note);
            }
            continue;
        }
        if (o->via.array.size != 4 || v[1].via.u64 != msgid)
            continue;
        a->answered = true;
        if (v[2].type != MSGPACK_OBJECT_NIL) {
            h_err_code(&v[2], a->code, sizeof a->code);
            h_gets(&v[2], "message", a->msg, sizeof a->msg);
        } else {
            a->id = h_getu(&v[3], "id");
        }
        return;
    }
}

/* buffer.register of fds[0..n) (n may be 0) with fd: true. */
static void reg_fds(h_conn *c, const int *fds, int n, uint64_t off, uint64_t size, answer *a)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint32_t id = g_id++;
    pack_register(&sb, id, true, NULL, off, size);
    CHECK(send_fds(c, sb.data, sb.size, fds, n) == 0);
    msgpack_sbuffer_destroy(&sb);
    await(c, id, a);
}

static void refused(h_conn *c, int fd, uint64_t off, uint64_t size, const char *code,
                    const char *want, const char *what)
{
    answer a;
    reg_fds(c, &fd, fd >= 0 ? 1 : 0, off, size, &a);
    CHECKF(a.answered && a.id == 0 && strcmp(a.code, code) == 0 && strstr(a.msg, want),
           "%s: %s containing \"%s\" (got %s: %s)", what, code, want, a.code, a.msg);
}

static void release(h_conn *c, uint64_t id)
{
    msgpack_sbuffer p;
    msgpack_sbuffer_init(&p);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &p, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    pstr(&pk, "id");
    msgpack_pack_uint64(&pk, id);
    const msgpack_object *r, *err;
    CHECK(h_conn_call(c, g_id++, "buffer.release", p.data, p.size, &r, &err) == 1 && !err);
    msgpack_sbuffer_destroy(&p);
}

/* y = 3 x over [batch, D] f32 at XOFF / YOFF of buffer buf, replayed at
 * batch TOP; base is the client's mapping of the buffer.  0 when y holds
 * 3 x, else the replay's error (-errno) or 1 for wrong numbers. */
static int scale_replay(gg_client *c, uint64_t buf, float *base, bool quiet)
{
    const int64_t dims[] = {GG_BATCH, D};
    const int buckets[] = {1, TOP};
    gg_program_def *d = gg_program_def_new("byfd");
    gg_program_def_buckets(d, 2, buckets);
    gg_program_def_tensor(d, "x", buf, XOFF, "f32", 2, dims);
    gg_program_def_tensor(d, "y", buf, YOFF, "f32", 2, dims);
    gg_program_def_op(d, "scale", "x", "y");
    gg_program_def_attr_f(d, "scale", 3.0);
    uint64_t pid = 0;
    int rc = gg_client_program_define(c, d, &pid);
    gg_program_def_free(d);
    if (!CHECKF(rc == 0, "define: %s", gg_client_last_error(c)))
        return rc;
    float *x = base + XOFF / 4, *y = base + YOFF / 4;
    for (int i = 0; i < TOP * D; i++) {
        x[i] = (float)i + 0.5f;
        y[i] = -1.0f;
    }
    gg_replay_result res;
    rc = gg_client_replay(c, pid, TOP, 0, &res);
    if (rc == 0) {
        for (int i = 0; i < TOP * D; i++)
            if (y[i] != 3.0f * x[i]) {
                rc = 1;
                break;
            }
    } else if (!quiet) {
        h_note("replay: %s", gg_client_last_error(c));
    }
    gg_client_program_release(c, pid);
    return rc;
}

/* ---- the daemon's own uid ------------------------------------------------ */

static void happy(const char *sock)
{
    h_section("registered by fd, written by a replay");
    gg_client *c = gg_client_new();
    if (!CHECK(c && gg_client_connect(c, sock, "test_buffer_fd") == 0))
        goto out;
    void *mem;
    int fd;
    if (CHECK(gg_client_memfd_create("gg-test-fd", BYTES, &mem, &fd) == 0)) {
        uint64_t id = 0;
        CHECKF(gg_client_buffer_register_fd(c, fd, 0, BYTES, &id) == 0 && id,
               "register a sealed memfd: %s", gg_client_last_error(c));
        close(fd);       /* the daemon has its own mapping */
        CHECK_EQ(scale_replay(c, id, mem, false), 0);
        const msgpack_object *r;
        char h[80] = "";
        if (CHECK(gg_client_call(c, "buffer.list", NULL, 0, &r) == 0))
            CHECK_CONTAINS(h_gets(r, "buffers.0.handle", h, sizeof h), "fd:/memfd:gg-test-fd");
        CHECK(gg_client_buffer_release(c, id) == 0);
        /* the seals hold: the object cannot shrink under the daemon */
        int f2 = -1;
        void *m2;
        CHECK(gg_client_memfd_create("gg-test-seal", BYTES, &m2, &f2) == 0);
        errno = 0;
        CHECKF(ftruncate(f2, 0) < 0 && errno == EPERM, "a sealed memfd cannot be shrunk");
        munmap(m2, BYTES);
        close(f2);
        munmap(mem, BYTES);
    }
    /* a POSIX shm object, unlinked at once: passed by descriptor */
    char name[64];
    h_unique(name, sizeof name, "/gg-fdbuf");
    int sfd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (CHECK(sfd >= 0)) {
        shm_unlink(name);
        CHECK(ftruncate(sfd, BYTES) == 0);
        float *m = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
        uint64_t id = 0;
        CHECKF(gg_client_buffer_register_fd(c, sfd, 0, BYTES, &id) == 0,
               "register an unlinked shm object by fd: %s", gg_client_last_error(c));
        CHECK_EQ(scale_replay(c, id, m, false), 0);
        gg_client_buffer_release(c, id);
        munmap(m, BYTES);
        close(sfd);
    }

    h_section("an unsealed memfd shrunk under the daemon: EFAULT, and it goes on");
    int ufd = memfd_create("gg-test-shrink", MFD_CLOEXEC);
    if (CHECK(ufd >= 0 && ftruncate(ufd, BYTES) == 0)) {
        float *m = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, ufd, 0);
        uint64_t id = 0;
        CHECK(gg_client_buffer_register_fd(c, ufd, 0, BYTES, &id) == 0);
        CHECK_EQ(scale_replay(c, id, m, false), 0);
        munmap(m, BYTES);
        /* define on the full object, then cut it to nothing and replay */
        const int64_t dims[] = {GG_BATCH, D};
        const int buckets[] = {1, TOP};
        gg_program_def *d = gg_program_def_new("shrunk");
        gg_program_def_buckets(d, 2, buckets);
        gg_program_def_tensor(d, "x", id, XOFF, "f32", 2, dims);
        gg_program_def_tensor(d, "y", id, YOFF, "f32", 2, dims);
        gg_program_def_op(d, "scale", "x", "y");
        gg_program_def_attr_f(d, "scale", 3.0);
        uint64_t pid = 0;
        CHECK(gg_client_program_define(c, d, &pid) == 0);
        gg_program_def_free(d);
        CHECK(ftruncate(ufd, 0) == 0);
        gg_replay_result res;
        int rc = gg_client_replay(c, pid, TOP, 0, &res);
        CHECKF(rc < 0 && strcmp(gg_client_last_error_code(c), "EFAULT") == 0,
               "replay over a shrunk object: EFAULT (got %d %s: %s)", rc,
               gg_client_last_error_code(c), gg_client_last_error(c));
        const msgpack_object *r;
        CHECK(gg_client_call(c, "buffer.list", NULL, 0, &r) == 0);
        gg_client_program_release(c, pid);
        gg_client_buffer_release(c, id);
        close(ufd);
    }
out:
    gg_client_close(c);
}

static void bad(const char *sock)
{
    h_conn c;
    if (!CHECK(h_conn_open(&c, sock) == 0))
        return;
    h_section("what is refused, and why");
    refused(&c, -1, 0, 64, "EBADF", "no file descriptor came with this request",
            "fd: true and no descriptor");
    int mfd = memfd_create("gg-test-bad", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK(mfd >= 0 && ftruncate(mfd, BYTES) == 0);
    {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        uint32_t id = g_id++;
        pack_register(&sb, id, true, "/gg-also-a-name", 0, 64);
        CHECK(send_fds(&c, sb.data, sb.size, &mfd, 1) == 0);
        msgpack_sbuffer_destroy(&sb);
        answer a;
        await(&c, id, &a);
        CHECKF(a.answered && strcmp(a.code, "EINVAL") == 0 && strstr(a.msg, "not both"),
               "handle and fd: EINVAL (got %s: %s)", a.code, a.msg);
    }
    int pp[2], sp[2];
    CHECK(pipe2(pp, O_CLOEXEC) == 0);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
    refused(&c, pp[1], 0, 64, "EINVAL", "is a pipe", "a pipe");
    refused(&c, sp[0], 0, 64, "EINVAL", "is a socket", "a socket");
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    refused(&c, null, 0, 64, "EINVAL", "is a character device", "/dev/null");
    int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    refused(&c, dir, 0, 64, "EINVAL", "is a directory", "a directory");
    char tmp[] = "/var/tmp/gg-fdbuf-XXXXXX";
    int disk = mkstemp(tmp);
    struct statfs sf;
    if (disk >= 0 && fstatfs(disk, &sf) == 0 && sf.f_type == 0x01021994 /* TMPFS_MAGIC */) {
        h_note("/var/tmp is tmpfs here: no file on a disk file system to refuse");
        unlink(tmp);
        close(disk);
    } else if (CHECK(disk >= 0)) {
        unlink(tmp);
        CHECK(ftruncate(disk, BYTES) == 0);
        refused(&c, disk, 0, 64, "EINVAL", "not shared memory", "a file on disk");
        close(disk);
    }
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", mfd);
    int ro = open(self, O_RDONLY | O_CLOEXEC);
    refused(&c, ro, 0, 64, "EACCES", "read-only", "a read-only descriptor");
    int wfd = memfd_create("gg-test-wseal", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK(wfd >= 0 && ftruncate(wfd, BYTES) == 0 &&
          fcntl(wfd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == 0);
    refused(&c, wfd, 0, 64, "EACCES", "sealed against writing", "a write-sealed memfd");
    refused(&c, mfd, BYTES - 16, 64, "ERANGE", "past the end", "a range past the end");
    int all[] = {pp[0], pp[1], sp[0], sp[1], null, dir, ro, wfd};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        close(all[i]);

    h_section("descriptors no request takes are closed, and the client told");
    {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        uint32_t id = g_id++;
        h_pack_request(&sb, id, "buffer.list", NULL, 0);
        CHECK(send_fds(&c, sb.data, sb.size, &mfd, 1) == 0);
        msgpack_sbuffer_destroy(&sb);
        answer a;
        await(&c, id, &a);
        CHECKF(a.answered && !a.code[0], "a request with a descriptor it does not take is answered (%s)", a.code);
        if (a.notes == 0) {      /* the notification follows the answer */
            uint32_t id2 = g_id++;
            msgpack_sbuffer_init(&sb);
            h_pack_request(&sb, id2, "buffer.list", NULL, 0);
            h_conn_send_sb(&c, &sb);
            msgpack_sbuffer_destroy(&sb);
            answer b;
            await(&c, id2, &b);
            a.notes += b.notes;
            snprintf(a.note, sizeof a.note, "%s", b.note);
        }
        CHECK_EQ(a.notes, 1);
        CHECK_CONTAINS(a.note, "1 file descriptor(s) came with no request that takes them");
    }
    {
        int three[] = {mfd, mfd, mfd};
        answer a;
        reg_fds(&c, three, 3, 0, BYTES, &a);
        CHECKF(a.answered && a.id, "a register with three descriptors takes the first (%s: %s)",
               a.code, a.msg);
        if (a.notes == 0) {
            uint32_t id2 = g_id++;
            msgpack_sbuffer sb;
            msgpack_sbuffer_init(&sb);
            h_pack_request(&sb, id2, "buffer.list", NULL, 0);
            h_conn_send_sb(&c, &sb);
            msgpack_sbuffer_destroy(&sb);
            answer b;
            await(&c, id2, &b);
            a.notes += b.notes;
            snprintf(a.note, sizeof a.note, "%s", b.note);
        }
        CHECK_EQ(a.notes, 1);
        CHECK_CONTAINS(a.note, "2 file descriptor(s) came with no request");
        if (a.id)
            release(&c, a.id);
    }
    {
        /* 20 descriptors on the first byte of a request sent in two parts:
         * 16 wait for it, 4 are closed at once */
        int many[20];
        for (int i = 0; i < 20; i++)
            many[i] = mfd;
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        uint32_t id = g_id++;
        h_pack_request(&sb, id, "buffer.list", NULL, 0);
        CHECK(send_fds(&c, sb.data, 1, many, 20) == 0);
        CHECK(h_conn_drained(&c, 60000) == 0);   /* the first part read on its own */
        CHECK(h_conn_send(&c, sb.data + 1, sb.size - 1) == 0);
        msgpack_sbuffer_destroy(&sb);
        answer a;
        await(&c, id, &a);
        int notes = a.notes;
        uint32_t id2 = g_id++;
        msgpack_sbuffer_init(&sb);
        h_pack_request(&sb, id2, "buffer.list", NULL, 0);
        h_conn_send_sb(&c, &sb);
        msgpack_sbuffer_destroy(&sb);
        answer b;
        await(&c, id2, &b);
        notes += b.notes;
        CHECKF(a.answered && b.answered, "the requests are answered");
        CHECKF(notes == 2, "two notifications: 4 not held, 16 not taken (got %d)", notes);
    }
    close(mfd);
    h_conn_close(&c);
}

static void fd_leaks(h_daemon *d)
{
    h_section("the daemon's descriptors are back at their baseline");
    h_conn c;
    if (!CHECK(h_conn_open(&c, d->sock) == 0))
        return;
    const msgpack_object *r, *err;
    CHECK(h_conn_call(&c, g_id++, "buffer.list", NULL, 0, &r, &err) == 1);
    int base = fd_count(d->pid);
    if (!CHECKF(base > 0, "/proc/%d/fd is readable", (int)d->pid)) {
        h_conn_close(&c);
        return;
    }
    bad(d->sock);
    happy(d->sock);
    /* closed connections and handles go on the daemon's next turns */
    int now = -1;
    for (int i = 0; i < 1200 && (now = fd_count(d->pid)) != base; i++)   /* up to 60 s */
        h_sleep_ms(50);
    CHECKF(now == base, "the daemon holds %d descriptors, as before (%d)", now, base);
    CHECK(h_conn_call(&c, g_id++, "buffer.list", NULL, 0, &r, &err) == 1 && !err);
    h_conn_close(&c);
}

/* ---- another uid ----------------------------------------------------------- */

static const char *g_other_sock;

/* In the client's process, as its own uid. */
static void other_client(uid_t daemon_uid)
{
    h_note("client uid %d, daemon uid %d", (int)getuid(), (int)daemon_uid);
    gg_client *c = gg_client_new();
    if (!CHECK(c && gg_client_connect(c, g_other_sock, "other-uid") == 0)) {
        h_note("connect: %s", c ? gg_client_last_error(c) : "");
        gg_client_close(c);
        return;
    }
    char name[64];
    h_unique(name, sizeof name, "/gg-fdbuf-uid");
    void *shm;
    uint64_t id = 0;
    if (CHECK(gg_client_shm_create(name, BYTES, &shm) == 0)) {
        /* the daemon refuses the name: it cannot open a 0600 object of another uid */
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 3);
        pstr(&pk, "handle");
        pstr(&pk, name);
        pstr(&pk, "offset");
        msgpack_pack_uint64(&pk, 0);
        pstr(&pk, "size");
        msgpack_pack_uint64(&pk, BYTES);
        const msgpack_object *r;
        int rc = gg_client_call(c, "buffer.register", sb.data, sb.size, &r);
        msgpack_sbuffer_destroy(&sb);
        CHECKF(rc == -EACCES, "the shm object by name is refused: %d %s: %s", rc,
               gg_client_last_error_code(c), gg_client_last_error(c));
        /* the client API sends the same object by descriptor after that refusal */
        rc = gg_client_buffer_register_shm(c, name, 0, BYTES, &id);
        CHECKF(rc == 0, "the shm name registered through its descriptor: %s",
               gg_client_last_error(c));
        if (rc == 0) {
            char h[80] = "";
            if (CHECK(gg_client_call(c, "buffer.list", NULL, 0, &r) == 0))
                CHECK_CONTAINS(h_gets(r, "buffers.0.handle", h, sizeof h),
                               "fd:/dev/shm/gg-fdbuf-uid");
            CHECK_EQ(scale_replay(c, id, shm, false), 0);
            gg_client_buffer_release(c, id);
        }
        /* the same memory, by descriptor */
        int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        if (CHECK(fd >= 0)) {
            rc = gg_client_buffer_register_fd(c, fd, 0, BYTES, &id);
            CHECKF(rc == 0, "the shm object by fd: %s", gg_client_last_error(c));
            close(fd);
            if (rc == 0) {
                CHECK_EQ(scale_replay(c, id, shm, false), 0);
                gg_client_buffer_release(c, id);
            }
        }
        gg_client_shm_destroy(name, shm, BYTES);
    }
    void *mem;
    int mfd;
    if (CHECK(gg_client_memfd_create("gg-test-uid", BYTES, &mem, &mfd) == 0)) {
        CHECKF(gg_client_buffer_register_fd(c, mfd, 0, BYTES, &id) == 0, "a memfd by fd: %s",
               gg_client_last_error(c));
        close(mfd);
        CHECK_EQ(scale_replay(c, id, mem, false), 0);
        munmap(mem, BYTES);
    }
    gg_client_close(c);
}

/* A uid with no passwd entry, other than nobody's. */
static uid_t free_uid(void)
{
    for (uid_t u = 61000; u < 62000; u++)
        if (!getpwuid(u))
            return u;
    return 0;
}

static int other_uid(void)
{
    h_init("test_buffer_fd (as another uid)", 300);
    if (geteuid() != 0) {
        printf("SKIP: running the daemon as a service user and the client as another uid "
               "needs root (this runs as uid %d)\n", (int)geteuid());
        return 77;
    }
    struct passwd *pw = getpwnam("nobody");
    uid_t duid = pw ? pw->pw_uid : 65534;
    gid_t dgid = pw ? pw->pw_gid : 65534;
    uid_t cuid = free_uid();
    if (!CHECK(cuid != 0))
        return h_finish();
    char dir[] = "/tmp/gg-fdbuf-uid-XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL))
        return h_finish();
    char sock[128], log[128];
    snprintf(sock, sizeof sock, "%s/gfxgraphd.sock", dir);
    snprintf(log, sizeof log, "%s/gfxgraphd.log", dir);
    CHECK(chown(dir, duid, dgid) == 0 && chmod(dir, 0755) == 0);
    if (access(GG_DAEMON_PATH, X_OK) != 0) {
        printf("SKIP: %s is not executable\n", GG_DAEMON_PATH);
        rmdir(dir);
        return 77;
    }
    fflush(stdout);
    pid_t dpid = fork();
    if (dpid == 0) {
        int lf = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int nf = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (lf < 0 || nf < 0)
            _exit(127);
        dup2(nf, 0);
        dup2(lf, 1);
        dup2(lf, 2);
        if (setgroups(0, NULL) < 0 || setgid(dgid) < 0 || setuid(duid) < 0)
            _exit(126);
        if (access(GG_DAEMON_PATH, X_OK) != 0)
            _exit(125);     /* a build under a home nobody cannot enter */
        execl(GG_DAEMON_PATH, GG_DAEMON_PATH, "--socket", sock, "--log-target", "stderr",
              "--backend", "cpu", (char *)NULL);
        _exit(127);
    }
    bool up = false;
    for (int i = 0; i < 1200 && !up; i++) {   /* up to 60 s */
        h_conn t;
        if (access(sock, F_OK) == 0 && h_conn_open(&t, sock) == 0) {
            h_conn_close(&t);
            up = true;
        } else {
            int st;
            if (waitpid(dpid, &st, WNOHANG) == dpid) {
                dpid = 0;
                if (WIFEXITED(st) && (WEXITSTATUS(st) == 125 || WEXITSTATUS(st) == 126)) {
                    printf("SKIP: uid %d cannot %s\n", (int)duid, WEXITSTATUS(st) == 125
                           ? "execute " GG_DAEMON_PATH : "be taken on (setuid failed)");
                    unlink(log);
                    rmdir(dir);
                    return 77;
                }
                break;
            }
            h_sleep_ms(50);
        }
    }
    if (!CHECKF(up, "the daemon came up as uid %d", (int)duid)) {
        char *l = h_read_file(log);
        printf("%s\n", l);
        free(l);
        if (dpid > 0)
            kill(dpid, SIGKILL), waitpid(dpid, NULL, 0);
        return h_finish();
    }
    char status[64];
    snprintf(status, sizeof status, "/proc/%d/status", (int)dpid);
    char *st = h_read_file(status);
    char want[64];
    snprintf(want, sizeof want, "Uid:\t%d\t%d", (int)duid, (int)duid);
    CHECK_CONTAINS(st, want);
    free(st);
    CHECK(chmod(sock, 0666) == 0);      /* the client's uid may connect */
    g_other_sock = sock;
    fflush(stdout);
    pid_t cpid = fork();
    if (cpid == 0) {
        if (setgroups(0, NULL) < 0 || setgid(cuid) < 0 || setuid(cuid) < 0)
            _exit(126);
        h_init("test_buffer_fd (client as another uid)", 300);
        other_client(duid);
        _exit(h_finish());
    }
    int cst = 0;
    waitpid(cpid, &cst, 0);
    CHECKF(WIFEXITED(cst) && WEXITSTATUS(cst) == 0, "the client's checks passed (status 0x%x)",
           cst);
    kill(dpid, SIGTERM);
    int dst = 0;
    waitpid(dpid, &dst, 0);
    CHECKF(WIFEXITED(dst) && WEXITSTATUS(dst) == 0, "the daemon stopped cleanly (0x%x)", dst);
    if (h_fail) {
        char *l = h_read_file(log);
        printf("daemon log:\n%s\n", l);
        free(l);
    }
    unlink(log);
    rmdir(dir);
    return h_finish();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--other-uid") == 0)
        return other_uid();
    h_init("test_buffer_fd", 300);
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, NULL, NULL) == 0))
        return h_finish();
    fd_leaks(&d);
    h_daemon_stop(&d);
    return h_finish();
}
