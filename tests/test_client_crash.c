/* SPDX-License-Identifier: MIT */
/* A client killed (SIGKILL) in the middle of a stream of replays: the
 * daemon stays healthy, and the session's resources (its buffers, programs
 * and cached graphs) are released. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_client_util.h"

#define ROWS 64
#define D 256

/* The child: define a program and replay it until killed.  Writes one byte
 * to fd after each replay that checked out. */
static void child_main(const char *sock, const char *nx, const char *ny, const char *nw, int fd)
{
    gg_client *c = gg_client_new();
    if (gg_client_connect(c, sock, "doomed") < 0)
        _exit(2);
    float *x, *y, *w;
    size_t xb = (size_t)ROWS * D * 4, wb = (size_t)D * D * 4;
    uint64_t bx, by, bw, prog;
    if (gg_client_shm_create(nx, xb, (void **)&x) < 0 ||
        gg_client_shm_create(ny, xb, (void **)&y) < 0 ||
        gg_client_shm_create(nw, wb, (void **)&w) < 0)
        _exit(3);
    for (int i = 0; i < ROWS * D; i++)
        x[i] = (float)(i % 13);
    for (int i = 0; i < D; i++)
        w[i * D + i] = 2.0f;
    if (gg_client_buffer_register_shm(c, nx, 0, xb, &bx) < 0 ||
        gg_client_buffer_register_shm(c, ny, 0, xb, &by) < 0 ||
        gg_client_buffer_register_shm(c, nw, 0, wb, &bw) < 0)
        _exit(4);
    gg_program_def *p = gg_program_def_new("doomed");
    int64_t xs[2] = {GG_BATCH, D}, ws[2] = {D, D};
    static const int b[] = {16, 32, 64};
    gg_program_def_buckets(p, 3, b);
    gg_program_def_tensor(p, "x", bx, 0, "f32", 2, xs);
    gg_program_def_tensor(p, "y", by, 0, "f32", 2, xs);
    gg_program_def_tensor(p, "w", bw, 0, "f32", 2, ws);
    gg_program_def_scratch(p, "s", "f32", 2, xs);
    gg_program_def_op(p, "linear", "x, w", "s");
    for (int i = 0; i < 5; i++)   /* s -> y -> s -> y -> s -> y */
        gg_program_def_op(p, "linear", i % 2 ? "y, w" : "s, w", i % 2 ? "s" : "y");
    if (gg_client_program_define(c, p, &prog) < 0)
        _exit(5);
    for (unsigned k = 0;; k++) {
        int batch = 16 + (int)(k % 49);
        if (gg_client_replay(c, prog, batch, -1, NULL) < 0)
            _exit(6);
        /* 6 layers of w = 2I: y = 64 x */
        if (y[0] != 64.0f * x[0] || y[(batch - 1) * D + 5] != 64.0f * x[(batch - 1) * D + 5])
            _exit(7);
        char one = 1;
        if (write(fd, &one, 1) != 1)
            _exit(8);
    }
}

static const msgpack_object *session_by_client(const msgpack_object *st, const char *name)
{
    const msgpack_object *ss = h_get(st, "sessions");
    char s[64];
    for (uint32_t i = 0; ss && ss->type == MSGPACK_OBJECT_ARRAY && i < ss->via.array.size; i++)
        if (strcmp(h_gets(&ss->via.array.ptr[i], "client", s, sizeof s), name) == 0)
            return &ss->via.array.ptr[i];
    return NULL;
}

static void one_round(const h_daemon *d, gg_client *w, int round)
{
    char title[64];
    snprintf(title, sizeof title, "kill a client mid-stream (round %d)", round);
    h_section(title);
    char nx[64], ny[64], nw[64];
    h_unique(nx, sizeof nx, "/ggtest-crash-x");
    h_unique(ny, sizeof ny, "/ggtest-crash-y");
    h_unique(nw, sizeof nw, "/ggtest-crash-w");
    int pfd[2];
    if (!CHECK(pipe(pfd) == 0))
        return;
    uint64_t sessions0 = t_stat(w, "sessions_active");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        alarm(120);   /* never outlive the test */
        child_main(d->sock, nx, ny, nw, pfd[1]);
        _exit(0);
    }
    close(pfd[1]);
    if (!CHECK(pid > 0)) {
        close(pfd[0]);
        return;
    }
    /* a few good replays first, then kill at a point that varies */
    int want = 3 + round * 4, got = 0;
    char buf[64];
    while (got < want) {
        ssize_t n = read(pfd[0], buf, sizeof buf < (size_t)(want - got) ? sizeof buf
                                                                        : (size_t)(want - got));
        if (n <= 0)
            break;
        got += (int)n;
    }
    CHECKF(got >= want, "the child ran %d good replays before the kill (wanted %d)", got, want);
    const msgpack_object *st = NULL;
    if (round % 2) {
        /* kill only once the daemon has taken a replay this process has not
         * heard of (running, or just answered): the kill lands later in the
         * stream than in the even rounds.  No check depends on where it
         * lands: whatever the child was doing, its session must go. */
        st = t_stats(w);
        uint64_t r0 = h_getu(session_by_client(st, "doomed"), "requests"), r = r0;
        for (int64_t end = h_now_ms() + 60000; r0 != UINT64_MAX && r <= r0 && h_now_ms() < end;
             h_sleep_ms(1)) {
            st = t_stats(w);
            r = h_getu(session_by_client(st, "doomed"), "requests");
        }
        CHECKF(r0 != UINT64_MAX && r > r0, "the daemon took a further replay of the child (%llu "
               "requests, %llu before)", (unsigned long long)r, (unsigned long long)r0);
    }
    st = t_stats(w);
    CHECK(st && session_by_client(st, "doomed") != NULL);
    CHECK(st && h_getu(st, "sessions_active") == sessions0 + 1);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(pfd[0]);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
           "the child died of SIGKILL, not of its own error (status 0x%x)", status);

    /* the daemon notices and frees the session */
    bool released = false;
    int64_t t0 = h_now_ms();
    while (!released && h_now_ms() - t0 < 30000) {
        st = t_stats(w);
        /* its graphs may stay, parked for a restarted client to adopt, but
         * nothing may remain attached to the dead session */
        released = st && h_getu(st, "sessions_active") == sessions0 &&
                   session_by_client(st, "doomed") == NULL && h_get(st, "cache");
        for (uint32_t i = 0; released && i < h_get(st, "cache")->via.array.size; i++) {
            const msgpack_object *e = &h_get(st, "cache")->via.array.ptr[i];
            released = h_get(e, "parked") && h_get(e, "parked")->via.boolean;
        }
        if (!released)
            h_sleep_ms(20);
    }
    CHECKF(released, "the killed client's session and programs are released (graphs parked)");
    const msgpack_object *hr;
    if (CHECK(gg_client_call(w, "health", NULL, 0, &hr) == 0))
        CHECK(h_get(hr, "ok") && h_get(hr, "ok")->via.boolean);
    /* the objects are the child's to remove; it cannot any more */
    shm_unlink(nx);
    shm_unlink(ny);
    shm_unlink(nw);
}

int main(void)
{
    h_init("test_client_crash", 600);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return h_finish();
    gg_client *w = gg_client_new();
    if (CHECK(gg_client_connect(w, d.sock, "watcher") == 0)) {
        for (int round = 0; round < 4; round++)
            one_round(&d, w, round);
        /* a new client does a full round trip afterwards */
        gg_client *c = gg_client_new();
        tbuf x, y;
        memset(&x, 0, sizeof x);
        memset(&y, 0, sizeof y);
        if (CHECK(gg_client_connect(c, d.sock, "after") == 0) && tbuf_new(c, &x, 16) &&
            tbuf_new(c, &y, 16)) {
            gg_program_def *p = gg_program_def_new("after");
            int64_t s[2] = {GG_BATCH, 4};
            gg_program_def_buckets(p, 1, (int[]){4});
            gg_program_def_tensor(p, "x", x.id, 0, "f32", 2, s);
            gg_program_def_tensor(p, "y", y.id, 0, "f32", 2, s);
            gg_program_def_op(p, "add", "x, x", "y");
            uint64_t prog;
            if (CHECK(gg_client_program_define(c, p, &prog) == 0)) {
                for (int i = 0; i < 16; i++)
                    x.f[i] = (float)i;
                CHECK(gg_client_replay(c, prog, 4, -1, NULL) == 0);
                CHECK(y.f[15] == 30.0f);
            }
            gg_program_def_free(p);
        }
        tbuf_free(&x);
        tbuf_free(&y);
        gg_client_close(c);
    }
    gg_client_close(w);
    h_daemon_stop(&d);
    return h_finish();
}
