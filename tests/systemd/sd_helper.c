/* SPDX-License-Identifier: MIT */
/* gg_sd_helper: the service manager's side of gfxgraphd's systemd glue, for
 * the tests in tests/systemd/.  No systemd needed.
 *
 *   gg_sd_helper notify --socket PATH [--watchdog-usec N]
 *                [--watchdog-pid self|other|unset] [--expect-exit N] -- DAEMON ARGS...
 *       Owns a NOTIFY_SOCKET (AF_UNIX datagram), starts the daemon with
 *       NOTIFY_SOCKET (and WATCHDOG_USEC / WATCHDOG_PID) and checks what it
 *       sends.  Without --expect-exit: READY=1 exactly once and only once
 *       PATH is a socket that accepts connections; STATUS= lines with live
 *       counters (a client connection shows as "1 session(s)"); WATCHDOG=1
 *       again and again (or never, with --watchdog-pid other or without
 *       --watchdog-usec); after SIGTERM, STOPPING=1 and exit status 0.
 *       With --expect-exit N: the daemon must exit with status N without
 *       ever sending READY=1.
 *
 *   gg_sd_helper activate --socket PATH --client CTL -- DAEMON ARGS...
 *       Socket activation as systemd does it, restart included: binds and
 *       listens on PATH itself and keeps the socket for the whole run.  Run
 *       1: start the daemon with the socket (LISTEN_FDS=1, LISTEN_PID) and
 *       NOTIFY_SOCKET, wait for READY=1, "CTL health --socket PATH" must
 *       succeed, SIGTERM, exit 0.  Then PATH must still be the same socket
 *       and still accept connections.  Run 2: a client connects BEFORE the
 *       daemon is started (a queued connection) and must be served once the
 *       daemon is up.
 *
 *   gg_sd_helper mdwe seccomp|prctl -- PROG ARGS...
 *       Runs PROG under MemoryDenyWriteExecute=yes as systemd applies it:
 *       "seccomp" as systemd <= 253 does (Debian 12 has 252): mmap with
 *       PROT_WRITE|PROT_EXEC, mprotect/pkey_mprotect with PROT_EXEC and
 *       shmat with SHM_EXEC fail with EPERM; "prctl" as systemd >= 254 does
 *       on kernels >= 6.3 (PR_SET_MDWE).  Both survive execve.  Use it to
 *       check a GPU stack before turning the option on.
 *
 *   gg_sd_helper client SOCKET
 *       A small client (public client API, cpu backend): registers a shm
 *       buffer, defines program "sd-probe" (one copy node, buckets 1 and 2),
 *       replays batch 1 and 2 and checks the output, releases everything.
 *       Cheap enough for a sanitizer build; makes the daemon log records
 *       with a session, a program and (when a capture fails) a bucket.
 *
 *   gg_sd_helper journal-listen SOCKET OUTFILE
 *       A stand-in for journald: binds SOCKET (the native protocol socket,
 *       /run/systemd/journal/socket) and appends every record to OUTFILE,
 *       one FIELD=value per line ('\n' in a value written as "\\n"), each
 *       record ended by a line "--".  Runs until SIGTERM/SIGINT.
 *
 * Output: one line per check, "ok - ..." or "not ok - ...", and "# ..."
 * for information.  Exit status 0 when every check passed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gfxgraph/client.h>

static int npass, nfail;

static void check(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s - ", cond ? "ok" : "not ok");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (cond)
        npass++;
    else
        nfail++;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int bind_dgram(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "socket path too long: %s\n", path);
        return -1;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        fprintf(stderr, "bind %s: %s\n", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* 1: path is a socket that accepts a connection now. */
static int socket_listening(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

static int connect_stream(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- notify ---------------------------------------------------------------- */

typedef struct {
    int ready, ready_before_listening, stopping, stopping_before_ready;
    int watchdog, status;
    int status_with_counters, status_with_session;
    uint64_t last_watchdog_ms, max_watchdog_gap_ms;
    char last_status[512];
    const char *sock;
} notify_state;

static void notify_take(notify_state *s, char *msg)
{
    for (char *save, *line = strtok_r(msg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strcmp(line, "READY=1") == 0) {
            s->ready++;
            if (!socket_listening(s->sock))
                s->ready_before_listening++;
            printf("# READY=1 (socket %s)\n", socket_listening(s->sock) ? "listening" : "NOT listening");
        } else if (strcmp(line, "STOPPING=1") == 0) {
            s->stopping++;
            if (!s->ready)
                s->stopping_before_ready++;
            printf("# STOPPING=1\n");
        } else if (strcmp(line, "WATCHDOG=1") == 0) {
            uint64_t t = now_ms();
            if (s->watchdog && t - s->last_watchdog_ms > s->max_watchdog_gap_ms)
                s->max_watchdog_gap_ms = t - s->last_watchdog_ms;
            s->last_watchdog_ms = t;
            s->watchdog++;
        } else if (strncmp(line, "STATUS=", 7) == 0) {
            s->status++;
            snprintf(s->last_status, sizeof(s->last_status), "%s", line + 7);
            if (strstr(line, "session(s)") && strstr(line, "graph(s) cached") &&
                strstr(line, "replays/s"))
                s->status_with_counters++;
            if (strstr(line, " 1 session(s)"))
                s->status_with_session++;
            printf("# %s\n", line);
        } else {
            printf("# %s\n", line);
        }
    }
    fflush(stdout);
}

/* Read notifications until until() says stop or the deadline passes; also
 * notices the child exiting.  Returns true when until() was satisfied. */
static bool notify_pump(int fd, notify_state *s, pid_t child, int *status, bool *exited,
                        uint64_t timeout_ms, bool (*until)(const notify_state *))
{
    uint64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        if (until && until(s))
            return true;
        if (!*exited && waitpid(child, status, WNOHANG) == child)
            *exited = true;
        uint64_t t = now_ms();
        if (t >= deadline)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int wait = (int)(deadline - t < 50 ? deadline - t : 50);
        if (poll(&p, 1, wait) > 0) {
            char buf[4096];
            ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
            if (n > 0) {
                buf[n] = '\0';
                notify_take(s, buf);
            }
            continue;
        }
        /* nothing to read: if the child is gone, nothing more can come */
        if (*exited)
            return until ? until(s) : false;
    }
}

static bool until_ready(const notify_state *s) { return s->ready > 0; }
static bool until_watchdogs(const notify_state *s) { return s->watchdog >= 5; }
static bool until_counters(const notify_state *s) { return s->status_with_counters > 0; }
static bool until_session(const notify_state *s) { return s->status_with_session > 0; }
static bool until_stopping(const notify_state *s) { return s->stopping > 0; }

static int cmd_notify(int argc, char **argv)
{
    const char *sock = NULL, *wd_pid = "self";
    long wd_usec = 0;
    int expect_exit = -1;
    int i = 0;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
            sock = argv[++i];
        } else if (strcmp(argv[i], "--watchdog-usec") == 0 && i + 1 < argc) {
            wd_usec = atol(argv[++i]);
        } else if (strcmp(argv[i], "--watchdog-pid") == 0 && i + 1 < argc) {
            wd_pid = argv[++i];
        } else if (strcmp(argv[i], "--expect-exit") == 0 && i + 1 < argc) {
            expect_exit = atoi(argv[++i]);
        } else {
            fprintf(stderr, "gg_sd_helper notify: bad argument '%s'\n", argv[i]);
            return 64;
        }
    }
    if (!sock || i >= argc) {
        fprintf(stderr, "usage: gg_sd_helper notify --socket PATH [...] -- DAEMON ARGS...\n");
        return 64;
    }
    char npath[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(npath, sizeof(npath), "%s.notify", sock);
    int nfd = bind_dgram(npath);
    if (nfd < 0)
        return 1;

    notify_state s = {.sock = sock};
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        setenv("NOTIFY_SOCKET", npath, 1);
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
        if (wd_usec > 0) {
            char v[32];
            snprintf(v, sizeof(v), "%ld", wd_usec);
            setenv("WATCHDOG_USEC", v, 1);
            if (strcmp(wd_pid, "self") == 0)
                snprintf(v, sizeof(v), "%d", (int)getpid());   /* the daemon, after exec */
            else if (strcmp(wd_pid, "other") == 0)
                snprintf(v, sizeof(v), "%d", (int)getppid());  /* not the daemon */
            if (strcmp(wd_pid, "unset") != 0)
                setenv("WATCHDOG_PID", v, 1);
        }
        execv(argv[i], argv + i);
        fprintf(stderr, "exec %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }

    int status = 0;
    bool exited = false;
    if (expect_exit >= 0) {
        notify_pump(nfd, &s, child, &status, &exited, 20000, NULL);
        if (!exited) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
        }
        check(exited, "daemon exited by itself");
        check(s.ready == 0, "no READY=1 from a daemon that did not start (got %d)", s.ready);
        check(exited && WIFEXITED(status) && WEXITSTATUS(status) == expect_exit,
              "exit status %d (got %d)", expect_exit,
              WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        goto out;
    }

    bool ok = notify_pump(nfd, &s, child, &status, &exited, 30000, until_ready);
    check(ok, "READY=1 received");
    check(s.ready_before_listening == 0, "READY=1 only once %s accepts connections", sock);
    if (!ok)
        goto stop;

    bool want_wd = wd_usec > 0 && strcmp(wd_pid, "other") != 0;
    if (want_wd) {
        ok = notify_pump(nfd, &s, child, &status, &exited, 20000, until_watchdogs);
        check(ok, "WATCHDOG=1 repeatedly (%d pings)", s.watchdog);
        printf("# longest gap between pings: %llu ms (WATCHDOG_USEC=%ld)\n",
               (unsigned long long)s.max_watchdog_gap_ms, wd_usec);
    } else {
        /* two status periods: long enough for pings to show if there were any */
        notify_pump(nfd, &s, child, &status, &exited, 2500, NULL);
        check(s.watchdog == 0, "no WATCHDOG=1 when the watchdog is not for this process (got %d)",
              s.watchdog);
    }
    ok = notify_pump(nfd, &s, child, &status, &exited, 20000, until_counters);
    check(ok,
          "STATUS= lines with sessions, graphs cached, replays/s (last: '%s')", s.last_status);

    /* a client connection is a session: the counter is live */
    int cfd = connect_stream(sock);
    check(cfd >= 0, "a client connects");
    ok = notify_pump(nfd, &s, child, &status, &exited, 20000, until_session);
    check(ok, "STATUS= shows the open connection as 1 session");
    if (cfd >= 0)
        close(cfd);

stop:
    if (!exited)
        kill(child, SIGTERM);
    ok = notify_pump(nfd, &s, child, &status, &exited, 30000, until_stopping);
    check(ok, "STOPPING=1 after SIGTERM");
    check(s.stopping_before_ready == 0, "STOPPING=1 not before READY=1");
    if (!exited) {
        uint64_t deadline = now_ms() + 30000;
        while (!exited && now_ms() < deadline) {
            if (waitpid(child, &status, WNOHANG) == child)
                exited = true;
            else
                usleep(20000);
        }
        if (!exited) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
        }
    }
    check(exited && WIFEXITED(status) && WEXITSTATUS(status) == 0, "clean stop: exit status 0");
    check(s.ready == 1, "READY=1 sent exactly once (got %d)", s.ready);

out:
    close(nfd);
    unlink(npath);
    return nfail ? 1 : 0;
}

/* ---- activate ------------------------------------------------------------------ */

static pid_t spawn(char **argv, int listen_fd, const char *notify_path)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (listen_fd >= 0) {
        if (listen_fd != 3) {
            dup2(listen_fd, 3);
            close(listen_fd);
        } else {
            fcntl(3, F_SETFD, 0);   /* keep it across exec */
        }
        char v[32];
        snprintf(v, sizeof(v), "%d", (int)getpid());
        setenv("LISTEN_PID", v, 1);
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_FDNAMES", "gfxgraphd.socket", 1);
    }
    if (notify_path)
        setenv("NOTIFY_SOCKET", notify_path, 1);
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    execv(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int wait_exit(pid_t pid, int secs)
{
    int status;
    for (int i = 0; i < secs * 50; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

static int cmd_activate(int argc, char **argv)
{
    const char *sock = NULL, *ctl = NULL;
    int i = 0;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
            sock = argv[++i];
        } else if (strcmp(argv[i], "--client") == 0 && i + 1 < argc) {
            ctl = argv[++i];
        } else {
            fprintf(stderr, "gg_sd_helper activate: bad argument '%s'\n", argv[i]);
            return 64;
        }
    }
    if (!sock || !ctl || i >= argc) {
        fprintf(stderr, "usage: gg_sd_helper activate --socket PATH --client CTL -- DAEMON ARGS...\n");
        return 64;
    }
    char **dargv = argv + i;

    /* the listening socket, as systemd's .socket unit makes it */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    unlink(sock);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);   /* no CLOEXEC: passed on */
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0) {
        fprintf(stderr, "listen %s: %s\n", sock, strerror(errno));
        return 1;
    }
    chmod(sock, 0660);
    struct stat st0;
    stat(sock, &st0);

    char npath[sizeof(sa.sun_path)];
    snprintf(npath, sizeof(npath), "%s.notify", sock);
    int nfd = bind_dgram(npath);
    if (nfd < 0)
        return 1;

    char *health[] = {(char *)ctl, "health", "--socket", (char *)sock, NULL};
    for (int run = 1; run <= 2; run++) {
        pid_t early = -1;
        if (run == 2)   /* connects before the daemon exists */
            early = spawn(health, -1, NULL);
        notify_state s = {.sock = sock};
        pid_t d = spawn(dargv, lfd, npath);
        int status = 0;
        bool exited = false;
        bool ready = notify_pump(nfd, &s, d, &status, &exited, 30000, until_ready);
        check(ready, "run %d: READY=1 from the activated daemon", run);
        if (run == 1) {
            pid_t h = spawn(health, -1, NULL);
            int rc = wait_exit(h, 30);
            check(rc == 0, "run %d: gfxgraphctl health through the passed socket (exit %d)", run, rc);
        } else {
            int rc = wait_exit(early, 30);
            check(rc == 0, "run %d: a client that connected before the daemon started is served "
                  "(exit %d)", run, rc);
        }
        if (!exited)
            kill(d, SIGTERM);
        notify_pump(nfd, &s, d, &status, &exited, 30000, until_stopping);
        int rc = exited ? (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status))
                        : wait_exit(d, 30);
        check(rc == 0, "run %d: clean stop (exit %d)", run, rc);
        struct stat st1;
        check(stat(sock, &st1) == 0 && S_ISSOCK(st1.st_mode) && st1.st_ino == st0.st_ino &&
                  st1.st_dev == st0.st_dev,
              "run %d: the daemon left %s in place (same inode)", run, sock);
        check((st1.st_mode & 0777) == 0660, "run %d: socket mode still 0660 (%o)", run,
              st1.st_mode & 0777);
        int c = connect_stream(sock);
        check(c >= 0, "run %d: the socket still accepts connections after the daemon stopped", run);
        if (c >= 0)
            close(c);
    }
    /* the probe connection above is still queued: drain it */
    close(lfd);
    close(nfd);
    unlink(npath);
    unlink(sock);
    return nfail ? 1 : 0;
}

/* ---- mdwe -------------------------------------------------------------------- */

#define MDWE_ARG(n) (offsetof(struct seccomp_data, args) + 8 * (n))

static int cmd_mdwe(int argc, char **argv)
{
    if (argc < 3 || strcmp(argv[1], "--") != 0) {
        fprintf(stderr, "usage: gg_sd_helper mdwe seccomp|prctl -- PROG ARGS...\n");
        return 64;
    }
    if (strcmp(argv[0], "seccomp") == 0) {
#ifndef __x86_64__
        fprintf(stderr, "gg_sd_helper mdwe seccomp: written for x86_64 only\n");
        return 77;
#endif
        /* the low 32 bits of the prot / shmflg argument (little endian) */
        struct sock_filter f[] = {
            /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
            /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
            /* 2 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            /* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            /* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 3),
            /* 5 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, MDWE_ARG(2)),
            /* 6 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC),
            /* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 9, 10),
            /* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 1, 0),
            /* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pkey_mprotect, 0, 3),
            /* 10 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, MDWE_ARG(2)),
            /* 11 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_EXEC),
            /* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_EXEC, 4, 5),
            /* 13 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_shmat, 0, 4),
            /* 14 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, MDWE_ARG(2)),
            /* 15 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, SHM_EXEC),
            /* 16 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SHM_EXEC, 0, 1),
            /* 17 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
            /* 18 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
            perror("gg_sd_helper mdwe: seccomp");
            return 1;
        }
    } else if (strcmp(argv[0], "prctl") == 0) {
        if (prctl(65 /* PR_SET_MDWE */, 1 /* PR_MDWE_REFUSE_EXEC_GAIN */, 0, 0, 0) < 0) {
            perror("gg_sd_helper mdwe: PR_SET_MDWE (kernel >= 6.3)");
            return 77;
        }
    } else {
        fprintf(stderr, "gg_sd_helper mdwe: seccomp or prctl, not '%s'\n", argv[0]);
        return 64;
    }
    execv(argv[2], argv + 2);
    fprintf(stderr, "exec %s: %s\n", argv[2], strerror(errno));
    return 127;
}

/* ---- client -------------------------------------------------------------------- */

#define PROBE_D 16

static int cmd_client(int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "usage: gg_sd_helper client SOCKET\n");
        return 64;
    }
    gg_client *c = gg_client_new();
    if (!c || gg_client_connect(c, argv[0], 0) < 0) {
        fprintf(stderr, "client: connect %s: %s\n", argv[0], c ? gg_client_last_error(c) : "no memory");
        gg_client_close(c);
        return 1;
    }
    char name[64];
    snprintf(name, sizeof(name), "/gg-sd-probe-%d", (int)getpid());
    const size_t rows = 2, bytes = 2 * rows * PROBE_D * sizeof(float);
    float *base = NULL;
    int rc = gg_client_shm_create(name, bytes, (void **)&base);
    if (rc < 0) {
        fprintf(stderr, "client: shm %s: %s\n", name, strerror(-rc));
        gg_client_close(c);
        return 1;
    }
    float *x = base, *y = base + rows * PROBE_D;
    for (size_t i = 0; i < rows * PROBE_D; i++)
        x[i] = (float)i + 0.5f;
    uint64_t buf = 0, prog = 0;
    int bad = 0;
    const int64_t dims[] = {GG_BATCH, PROBE_D};
    const int buckets[] = {1, 2};
    gg_program_def *d = gg_program_def_new("sd-probe");
    rc = gg_client_buffer_register_shm(c, name, 0, bytes, &buf);
    if (rc == 0 && d) {
        gg_program_def_tensor(d, "x", buf, 0, "f32", 2, dims);
        gg_program_def_tensor(d, "y", buf, rows * PROBE_D * sizeof(float), "f32", 2, dims);
        gg_program_def_op(d, "copy", "x", "y");
        gg_program_def_buckets(d, 2, buckets);
        rc = gg_client_program_define(c, d, &prog);
    }
    for (int batch = 1; rc == 0 && batch <= 2; batch++) {
        for (size_t i = 0; i < rows * PROBE_D; i++)
            y[i] = -1.0f;
        gg_replay_result r;
        rc = gg_client_replay(c, prog, batch, -1, &r);
        for (size_t i = 0; rc == 0 && i < (size_t)batch * PROBE_D; i++)
            bad += y[i] != x[i];
        if (rc == 0)
            printf("# replay batch %d: %s, bucket %d%s%s\n", batch,
                   r.path == GG_PATH_GRAPH ? "graph" : "eager", r.bucket,
                   r.fallback ? ", fallback: " : "", r.fallback ? r.reason : "");
    }
    if (rc < 0)
        fprintf(stderr, "client: %s (%s)\n", gg_client_last_error(c), gg_client_last_error_code(c));
    gg_program_def_free(d);
    if (prog)
        gg_client_program_release(c, prog);
    if (buf)
        gg_client_buffer_release(c, buf);
    gg_client_shm_destroy(name, base, bytes);
    gg_client_close(c);
    if (bad)
        fprintf(stderr, "client: %d wrong value(s)\n", bad);
    return rc < 0 || bad ? 1 : 0;
}

/* ---- journal-listen ---------------------------------------------------------- */

static volatile sig_atomic_t jl_stop;
static void jl_on_signal(int sig)
{
    (void)sig;
    jl_stop = 1;
}

static void jl_put(FILE *out, const char *name, size_t nlen, const char *val, size_t vlen)
{
    fwrite(name, 1, nlen, out);
    fputc('=', out);
    for (size_t k = 0; k < vlen; k++) {
        if (val[k] == '\n')
            fputs("\\n", out);
        else
            fputc(val[k], out);
    }
    fputc('\n', out);
}

/* The native protocol (systemd.io/JOURNAL_NATIVE_PROTOCOL): "NAME=value\n",
 * or "NAME\n" + 64-bit little-endian length + bytes + "\n". */
static void jl_record(FILE *out, const char *buf, size_t n)
{
    size_t p = 0;
    while (p < n) {
        const char *nl = memchr(buf + p, '\n', n - p);
        if (!nl)
            break;
        size_t llen = (size_t)(nl - (buf + p));
        const char *eq = memchr(buf + p, '=', llen);
        if (eq) {
            jl_put(out, buf + p, (size_t)(eq - (buf + p)), eq + 1, (size_t)(nl - eq - 1));
            p += llen + 1;
        } else {
            size_t q = p + llen + 1;
            if (q + 8 > n)
                break;
            uint64_t vlen = 0;
            for (int b = 7; b >= 0; b--)
                vlen = (vlen << 8) | (unsigned char)buf[q + b];
            q += 8;
            if (vlen > n - q)
                break;
            jl_put(out, buf + p, llen, buf + q, (size_t)vlen);
            p = q + (size_t)vlen + 1;
        }
    }
    fputs("--\n", out);
    fflush(out);
}

static int cmd_journal_listen(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gg_sd_helper journal-listen SOCKET OUTFILE\n");
        return 64;
    }
    FILE *out = fopen(argv[1], "a");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    int fd = bind_dgram(argv[0]);
    if (fd < 0)
        return 1;
    chmod(argv[0], 0666);
    struct sigaction sa = {.sa_handler = jl_on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    static char buf[1 << 20];
    while (!jl_stop) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n > 0)
            jl_record(out, buf, (size_t)n);
    }
    close(fd);
    unlink(argv[0]);
    fclose(out);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "notify") == 0)
        return cmd_notify(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "activate") == 0)
        return cmd_activate(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "mdwe") == 0)
        return cmd_mdwe(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "client") == 0)
        return cmd_client(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "journal-listen") == 0)
        return cmd_journal_listen(argc - 2, argv + 2);
    fprintf(stderr, "usage: gg_sd_helper notify|activate|mdwe|client|journal-listen ...\n");
    return 64;
}
