/* SPDX-License-Identifier: MIT */
/* The config reader under hostile files (issue 24, item 9 and 8):
 *  - a comment longer than any read buffer: its tail never becomes a
 *    setting, and the line numbers after it stay right;
 *  - /dev/zero, a directory and a FIFO: refused at once as not a regular
 *    file (not read for ever, taken as empty or blocked on);
 *  - a NUL byte: the line refused, naming the line;
 *  - admin-group naming no group: --check-config refuses it; a known one
 *    (root) and a number pass;
 *  - a daemon started on /dev/zero exits 2 saying why. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char dir[64];

static void put(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(data, 1, len, f) == len);
    fclose(f);
}

/* gfxgraphd ARGS...: exit code, stdout and stderr together in *out. */
static int daemon_run(const char *a1, const char *a2, const char *a3, char **out)
{
    const char *argv[] = {GG_DAEMON_PATH, a1, a2, a3, NULL};
    const char *env[] = {"GFXGRAPH_CONFIG=", NULL};
    char *o = NULL, *e = NULL;
    /* the limit only ends a run that never would: a reader stuck on
     * /dev/zero; every run here is answered at once */
    int rc = h_run(argv, env, NULL, &o, &e, 60000);
    size_t n = (o ? strlen(o) : 0) + (e ? strlen(e) : 0) + 1;
    *out = malloc(n);
    snprintf(*out, n, "%s%s", o ? o : "", e ? e : "");
    free(o);
    free(e);
    return rc;
}

static void test_long_comment(void)
{
    h_section("a long comment's tail stays a comment");
    char path[128];
    snprintf(path, sizeof(path), "%s/long.conf", dir);
    /* longer than the old 512-byte pieces, with a setting where a piece
     * would start */
    size_t n = 5000;
    char *text = malloc(n + 200);
    size_t o = (size_t)snprintf(text, n, "# ");
    while (o < 510)
        text[o++] = 'x';
    o += (size_t)snprintf(text + o, 200, " admin-group = 100 ");
    while (o < 3000)
        text[o++] = 'y';
    o += (size_t)snprintf(text + o, 200, "\nmax-inflight = 9\nbogus line\n");
    put(path, text, o);
    free(text);
    char *out;
    int rc = daemon_run("--check-config", path, NULL, &out);
    CHECK_EQ(rc, 2);
    /* the one problem is line 3, numbered as a reader counts */
    char want[160];
    snprintf(want, sizeof(want), "%s:3: expected 'key = value'", path);
    CHECK_CONTAINS(out, want);
    CHECK_CONTAINS(out, "1 problem(s)");
    CHECKF(strstr(out, "admin-group") == NULL, "no admin-group problem: %s", out);
    free(out);

    snprintf(path, sizeof(path), "%s/long2.conf", dir);
    char line[1200];
    o = (size_t)snprintf(line, sizeof(line), "#");
    while (o < 700)
        line[o++] = 'z';
    o += (size_t)snprintf(line + o, sizeof(line) - o, "admin-group = 100\nmax-inflight = 9\n");
    put(path, line, o);
    char cfg[200];
    snprintf(cfg, sizeof(cfg), "--config=%s", path);
    rc = daemon_run(cfg, "--print-config", NULL, &out);
    CHECK_EQ(rc, 0);
    const char *ag = strstr(out, "\nadmin-group");
    CHECKF(ag && strncmp(ag + 1, "admin-group", 11) == 0 && strstr(ag, "none") &&
               strstr(ag, "none") < strchr(ag + 1, '\n'),
           "admin-group stays none: %s", ag ? ag : out);
    snprintf(want, sizeof(want), "file %s:2", path);
    CHECK_CONTAINS(out, want);   /* max-inflight from line 2 */
    free(out);
}

static void test_not_regular(void)
{
    h_section("only regular files");
    char *out;
    int rc = daemon_run("--check-config", "/dev/zero", NULL, &out);
    CHECK_EQ(rc, 2);
    CHECK_CONTAINS(out, "/dev/zero is not a regular file (a character device)");
    free(out);
    rc = daemon_run("--check-config", dir, NULL, &out);
    CHECK_EQ(rc, 2);
    CHECK_CONTAINS(out, "is not a regular file (a directory)");
    free(out);
    char fifo[128];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    rc = daemon_run("--check-config", fifo, NULL, &out);
    CHECK_EQ(rc, 2);
    CHECK_CONTAINS(out, "is not a regular file (a FIFO)");
    free(out);
    /* a daemon told to read it does not start */
    rc = daemon_run("--config", "/dev/zero", "--backend=cpu", &out);
    CHECK_EQ(rc, 2);
    CHECK_CONTAINS(out, "/dev/zero is not a regular file");
    free(out);
}

static void test_nul(void)
{
    h_section("a NUL byte is refused");
    char path[128];
    snprintf(path, sizeof(path), "%s/nul.conf", dir);
    static const char text[] = "max-inflight = 8\nmax-inflight = 9\0admin-group = 5\n";
    put(path, text, sizeof(text) - 1);
    char *out;
    int rc = daemon_run("--check-config", path, NULL, &out);
    CHECK_EQ(rc, 2);
    char want[160];
    snprintf(want, sizeof(want), "%s:2: the line holds a NUL byte", path);
    CHECK_CONTAINS(out, want);
    free(out);
}

static void test_group(void)
{
    h_section("admin-group must name a group");
    char path[128];
    snprintf(path, sizeof(path), "%s/grp.conf", dir);
    static const char bad[] = "admin-group = gg-no-such-group-x\n";
    put(path, bad, sizeof(bad) - 1);
    char *out;
    int rc = daemon_run("--check-config", path, NULL, &out);
    CHECK_EQ(rc, 2);
    CHECK_CONTAINS(out, "admin-group 'gg-no-such-group-x': no such group");
    free(out);
    static const char good[] = "admin-group = root\n";
    put(path, good, sizeof(good) - 1);
    rc = daemon_run("--check-config", path, NULL, &out);
    CHECK_EQ(rc, 0);
    CHECK_CONTAINS(out, ": OK");
    free(out);
    static const char num[] = "admin-group = 4242\n";
    put(path, num, sizeof(num) - 1);
    rc = daemon_run("--check-config", path, NULL, &out);
    CHECK_EQ(rc, 0);
    free(out);
}

int main(void)
{
    h_init("test_attack_config", 240);
    snprintf(dir, sizeof(dir), "/tmp/gg-atk-cfg-XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return h_finish();
    }
    test_long_comment();
    test_not_regular();
    test_nul();
    test_group();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return h_finish();
}
