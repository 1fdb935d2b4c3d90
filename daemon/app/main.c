/* SPDX-License-Identifier: MIT */
/* gfxgraphd: parse settings, open the device, serve. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/config.h"
#include "base/log.h"
#include "app/server.h"
#include "core/quota.h"

/* The soft descriptor limit up to the hard one (LimitNOFILE=, ulimit -Hn):
 * the soft default (1024) is kept low only for programs that use select(),
 * which the daemon does not; connections and the descriptors clients send
 * need the room. */
static void main_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        gg_warn("cannot raise the descriptor limit from %llu to %llu: %s",
                (unsigned long long)was, (unsigned long long)rl.rlim_max, strerror(errno));
    else
        gg_debug("descriptor limit raised from %llu to %llu", (unsigned long long)was,
                 (unsigned long long)rl.rlim_max);
}

/* The quotas whose default is sized from the machine, as they came out:
 * an operator reading the log sees what "auto" means on this host. */
static void main_log_auto_quotas(const gg_server *srv)
{
    const gg_config *cfg = &srv->cfg;
    if (cfg->quota_scratch_bytes == GG_QUOTA_AUTO)
        gg_info("max-scratch-bytes-per-uid auto: %llu bytes (a quarter of the device's memory)",
                (unsigned long long)gg_quota_scratch_limit(&srv->core));
    if (cfg->quota_program_bytes == GG_QUOTA_AUTO)
        gg_info("max-program-bytes-per-uid auto: %llu bytes (an eighth of RAM)",
                (unsigned long long)gg_quota_program_bytes_limit(&srv->core));
}

int main(int argc, char **argv)
{
    gg_config cfg;
    char err[512] = "";
    int rc = gg_config_load(&cfg, argc, argv, err, sizeof(err));
    if (rc == 1)
        return GG_EXIT_OK;
    if (rc == 2)
        return GG_EXIT_USAGE;   /* --check-config found problems */
    if (rc < 0) {
        fprintf(stderr, "gfxgraphd: %s\n", err);
        return GG_EXIT_USAGE;
    }
    gg_log_init(cfg.log_level, cfg.log_target);
    main_raise_nofile();
    /* A client that vanishes mid-write must not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);

    /* SIGHUP loads the settings again from the same flags */
    gg_server_set_args(argc, argv);
    static gg_server srv;
    if (gg_server_init(&srv, &cfg, err, sizeof(err)) < 0) {
        gg_error("cannot start: %s", err);
        if (gg_log_get_target() == GG_LOG_TARGET_JOURNAL)
            fprintf(stderr, "gfxgraphd: %s\n", err);
        gg_server_fini(&srv);
        return GG_EXIT_FAILURE;
    }
    main_log_auto_quotas(&srv);
    rc = gg_server_run(&srv);
    gg_server_fini(&srv);
    return rc;
}
