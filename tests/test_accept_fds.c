/* SPDX-License-Identifier: MIT */
/* Out of descriptors on accept (issue: running out of descriptors is logged
 * and backed off): with its RLIMIT_NOFILE lowered under it, a daemon that
 * receives more connections than it can hold refuses the rest (libuv's
 * reserve-descriptor trick closes them at once), says so in its log with
 * the numbers and the setting, keeps serving the connections it has, and
 * takes new ones again once some close. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

#define NCONN 80

static int conn_to(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* hello on fd: true when an answer comes (the daemon holds the connection). */
static bool hello_ok(int fd)
{
    static const unsigned char req[] = {0x94, 0x00, 0x01, 0xa5, 'h', 'e', 'l', 'l', 'o', 0x91,
                                        0x81, 0xa8, 'p', 'r', 'o', 't', 'o', 'c', 'o', 'l', 0x01};
    if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
        return false;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    unsigned char b[4096];
    ssize_t n = recv(fd, b, sizeof(b), 0);
    bool ok = n >= 4 && b[0] == 0x94 && b[1] == 0x01;
    /* the rest of the answer, so the next call reads its own */
    struct timeval shortv = {.tv_usec = 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &shortv, sizeof(shortv));
    while (n > 0)
        n = recv(fd, b, sizeof(b), 0);
    return ok;
}

static bool log_has(const h_daemon *d, const char *what)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, what) != NULL;
    fclose(f);
    return found;
}

int main(void)
{
    h_init("test_accept_fds", 120);
    h_section("connections past RLIMIT_NOFILE: refused, logged, served again later");
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return h_finish();
    struct rlimit old, low = {.rlim_cur = 48, .rlim_max = 48};
    CHECK(prlimit(d.pid, RLIMIT_NOFILE, NULL, &old) == 0);
    if (!CHECK(prlimit(d.pid, RLIMIT_NOFILE, &low, NULL) == 0)) {
        h_daemon_stop(&d);
        return h_finish();
    }
    int fds[NCONN], served = 0, refused = 0;
    for (int i = 0; i < NCONN; i++) {
        fds[i] = conn_to(d.sock);
        if (fds[i] >= 0 && hello_ok(fds[i]))
            served++;
        else
            refused++;
    }
    h_note("%d connections served, %d refused under a limit of 48 descriptors", served,
           refused);
    CHECK(served > 0 && refused > 0);
    bool said = false;
    for (int64_t end = h_now_ms() + 60000; !said && h_now_ms() < end; h_sleep_ms(100))
        said = log_has(&d, "file descriptors open of a limit of 48");
    CHECKF(said, "the log names the descriptors in use and the limit");
    CHECK(log_has(&d, "LimitNOFILE="));
    /* the connections it holds still work */
    int kept = -1;
    for (int i = 0; i < NCONN && kept < 0; i++)
        if (fds[i] >= 0 && hello_ok(fds[i]))
            kept = i;
    CHECKF(kept >= 0, "a connection the daemon holds is still served");
    /* room again: new connections are taken */
    for (int i = 0; i < NCONN; i++)
        if (fds[i] >= 0 && i != kept)
            close(fds[i]);
    prlimit(d.pid, RLIMIT_NOFILE, &old, NULL);
    bool again = false;
    for (int64_t end = h_now_ms() + 60000; !again && h_now_ms() < end; h_sleep_ms(100)) {
        int fd = conn_to(d.sock);
        again = fd >= 0 && hello_ok(fd);
        if (fd >= 0)
            close(fd);
    }
    CHECKF(again, "new connections are served again once descriptors are free");
    if (kept >= 0)
        close(fds[kept]);
    h_daemon_stop(&d);
    return h_finish();
}
