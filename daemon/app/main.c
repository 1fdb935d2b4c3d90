/* gfxgraphd: parse settings, open the device, serve. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/log.h"
#include "app/server.h"

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
    rc = gg_server_run(&srv);
    gg_server_fini(&srv);
    return rc;
}
