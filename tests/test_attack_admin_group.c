/* SPDX-License-Identifier: MIT */
/* admin-group membership through a supplementary group (issue 24, item 4):
 * from the peer's uid and the group database, never from the client
 * process's own groups (/proc/PID/status, hidden under the unit's
 * ProtectProc=invisible and open to pid reuse).  As root, the test makes a
 * group and two users (deleted at the end):
 *  - a user whose primary group is nogroup and who is listed as a member
 *    of the admin group, its client run with no supplementary groups at
 *    all: stats scope "all", another uid's session seen, admin.evict
 *    allowed;
 *  - the same user once the group no longer lists it (gpasswd -d), the
 *    same daemon: scope "uid", admin.evict EPERM (each request asks the
 *    database);
 *  - a user the group does not list whose client process holds the admin
 *    gid as a supplementary group: scope "uid", admin.evict EPERM.
 * Not root (no groupadd/useradd): skipped, exit 77, with the reason. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_quota_util.h"

#define SKIP 77

static const char *g_sock;

/* argv run to its end, output to our stdout: the exit status, or -1.
 * useradd and friends refuse while another holds the passwd lock: the
 * state to wait for is the lock free, so try again while they say so. */
static int run(const char *const *argv)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(1, 2);
            execv(argv[0], (char **)argv);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
            return -1;
        /* 10: cannot lock /etc/group (useradd, groupadd, userdel, groupdel);
         * 1 with gpasswd is its own lock failure too, but also other
         * errors: only the lock codes are retried */
        if (WEXITSTATUS(st) != 10)
            return WEXITSTATUS(st);
        h_sleep_ms(100);
    }
    return -1;
}

typedef struct {
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[2];
    bool want_all;
    const char *what;
} as_user;

/* In a child with exactly the given credentials: stats and admin.evict. */
static void client_as(const as_user *u)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        h_init(u->what, 120);
        if (setgroups((size_t)u->ngroups, u->groups) < 0 || setgid(u->gid) < 0 ||
            setuid(u->uid) < 0) {
            CHECKF(0, "cannot take uid %d: %s", (int)u->uid, strerror(errno));
            _exit(h_finish());
        }
        /* the process's own supplementary groups are what was asked */
        gid_t have[8];
        int n = getgroups(8, have);
        CHECKF(n == u->ngroups && (n == 0 || have[0] == u->groups[0]),
               "the client holds %d supplementary group(s) (want %d)", n, u->ngroups);
        h_conn c;
        if (CHECK(h_conn_open(&c, g_sock) == 0) && hello(&c, 1)) {
            const msgpack_object *r = NULL, *err = NULL;
            if (CHECK(call(&c, q_id++, "stats", NULL, &r, &err) == 1 && !err && r)) {
                char scope[16];
                CHECK_STR(h_gets(r, "scope", scope, sizeof scope), u->want_all ? "all" : "uid");
                /* root's own session shows only to those who see all */
                const msgpack_object *s = h_get(r, "sessions");
                bool other = false;
                for (uint32_t i = 0; s && s->type == MSGPACK_OBJECT_ARRAY &&
                                     i < s->via.array.size; i++)
                    other |= h_geti(&s->via.array.ptr[i], "uid") == 0;
                CHECKF(other == u->want_all, "root's session %s", other ? "seen" : "not seen");
            }
            mp p;
            mp_init(&p);
            msgpack_pack_map(&p.pk, 1);
            proto_pack_kv_bool(&p.pk, "all", true);
            r = err = NULL;
            if (CHECK(call(&c, q_id++, "admin.evict", &p, &r, &err) == 1)) {
                char code[32] = "", msg[400] = "";
                if (err) {
                    h_err_code(err, code, sizeof code);
                    h_gets(err, "message", msg, sizeof msg);
                }
                if (u->want_all) {
                    CHECKF(!err, "admin.evict allowed (%s %s)", code, msg);
                } else {
                    CHECK_STR(code, "EPERM");
                    CHECK_CONTAINS(msg, "admin-group");
                }
            }
            mp_free(&p);
            h_conn_close(&c);
        }
        _exit(h_finish());
    }
    if (!CHECK(pid > 0))
        return;
    int st = 0;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the client's checks passed (status 0x%x)",
           u->what, st);
}

static bool lookup_user(const char *name, uid_t *uid)
{
    struct passwd *pw = getpwnam(name);
    if (pw)
        *uid = pw->pw_uid;
    return pw != NULL;
}

int main(void)
{
    h_init("test_attack_admin_group", 240);
    if (geteuid() != 0) {
        printf("skip: creating a group and users (groupadd, useradd) needs root; "
               "uid %d is not\n", (int)geteuid());
        return SKIP;
    }
    static const char *const tools[] = {"/usr/sbin/groupadd", "/usr/sbin/useradd",
                                        "/usr/sbin/userdel", "/usr/sbin/groupdel",
                                        "/usr/bin/gpasswd"};
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
        if (access(tools[i], X_OK) < 0) {
            printf("skip: %s is not installed (package passwd)\n", tools[i]);
            return SKIP;
        }
    struct group *ng = getgrnam("nogroup");
    gid_t nogroup = ng ? ng->gr_gid : 65534;

    char grp[32], member[32], outsider[32];
    snprintf(grp, sizeof grp, "ggadm%d", (int)getpid());
    snprintf(member, sizeof member, "ggmem%d", (int)getpid());
    snprintf(outsider, sizeof outsider, "ggout%d", (int)getpid());
    char ngs[16];
    snprintf(ngs, sizeof ngs, "%u", (unsigned)nogroup);
    const char *ga[] = {"/usr/sbin/groupadd", grp, NULL};
    const char *ua[] = {"/usr/sbin/useradd", "-M", "-N", "-g", ngs, "-G", grp, "-s",
                        "/usr/sbin/nologin", member, NULL};
    const char *uo[] = {"/usr/sbin/useradd", "-M", "-N", "-g", ngs, "-s", "/usr/sbin/nologin",
                        outsider, NULL};
    bool made_g = CHECKF(run(ga) == 0, "groupadd %s", grp);
    bool made_m = made_g && CHECKF(run(ua) == 0, "useradd %s, a member of %s", member, grp);
    bool made_o = made_g && CHECKF(run(uo) == 0, "useradd %s", outsider);
    struct group *g = made_g ? getgrnam(grp) : NULL;
    gid_t adm = g ? g->gr_gid : 0;
    uid_t muid = 0, ouid = 0;
    if (CHECK(g != NULL) && made_m && made_o && CHECK(lookup_user(member, &muid)) &&
        CHECK(lookup_user(outsider, &ouid))) {
        char set[64];
        snprintf(set, sizeof set, "admin-group=%s", grp);
        const char *args[] = {"--set", set, NULL};
        h_daemon d;
        if (CHECK(h_daemon_start(&d, args, NULL) == 0)) {
            q_open_socket(&d);
            g_sock = d.sock;
            /* root's own session, for the others to see or not */
            h_conn root;
            if (CHECK(h_conn_open(&root, d.sock) == 0) && hello(&root, 1)) {
                h_section("a member through a supplementary group, none in its process");
                as_user m = {.uid = muid, .gid = nogroup, .ngroups = 0, .want_all = true,
                             .what = "member (supplementary group in the database)"};
                client_as(&m);

                h_section("the same user once the group no longer lists it");
                const char *del[] = {"/usr/bin/gpasswd", "-d", member, grp, NULL};
                if (CHECKF(run(del) == 0, "gpasswd -d %s %s", member, grp)) {
                    m.want_all = false;
                    m.what = "former member";
                    client_as(&m);
                }

                h_section("a process holding the admin gid, its user not listed");
                as_user o = {.uid = ouid, .gid = nogroup, .ngroups = 1, .groups = {adm},
                             .want_all = false, .what = "outsider with the gid in its process"};
                client_as(&o);
                h_conn_close(&root);
            }
            CHECK_EQ(h_daemon_stop(&d), 0);
        }
    }
    const char *dm[] = {"/usr/sbin/userdel", member, NULL};
    const char *dout[] = {"/usr/sbin/userdel", outsider, NULL};
    const char *dg[] = {"/usr/sbin/groupdel", grp, NULL};
    if (made_m)
        CHECK_EQ(run(dm), 0);
    if (made_o)
        CHECK_EQ(run(dout), 0);
    if (made_g)
        CHECK_EQ(run(dg), 0);
    CHECK(getgrnam(grp) == NULL && getpwnam(member) == NULL && getpwnam(outsider) == NULL);
    return h_finish();
}
