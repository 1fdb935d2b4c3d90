/* SPDX-License-Identifier: MIT */
/* gfxgraph-exporter: serves gfxgraphd's metrics at http://ADDR/metrics for
 * Prometheus (docs/metrics.md).
 *
 *   gfxgraph-exporter [--socket PATH] [--listen HOST:PORT]... [--timeout SECONDS]
 *
 * Listens on the sockets systemd passes (gfxgraph-exporter.socket), else on
 * each --listen, else on GG_EXPORTER_DEFAULT_LISTEN.  Exit status: 0 clean
 * stop (SIGTERM, SIGINT), 1 could not serve, 64 usage. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 64 };

static void main_usage(FILE *f)
{
    fprintf(f,
            "usage: gfxgraph-exporter [--socket PATH] [--listen HOST:PORT]... "
            "[--timeout SECONDS]\n"
            "Serves gfxgraphd's metrics in the Prometheus text format at /metrics, with\n"
            "gfxgraph_up 1 when the daemon answered and gfxgraph_up 0 (alone) when not.\n"
            "  --socket PATH      the daemon's socket (default: as gfxgraphctl, e.g.\n"
            "                     /run/gfxgraph/gfxgraphd.sock for the system service)\n"
            "  --listen HOST:PORT where to listen ([IPV6]:PORT, :PORT for every address);\n"
            "                     repeatable; default %s, or the sockets systemd\n"
            "                     passes (socket activation)\n"
            "  --timeout SECONDS  for each answer of the daemon and each HTTP client\n"
            "                     (default 5)\n"
            "  --version, --help\n",
            GG_EXPORTER_DEFAULT_LISTEN);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'}, {"listen", required_argument, NULL, 'l'},
        {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0},
    };
    gg_exporter_config cfg = {.timeout_ms = 5000};
    const char *listen[GG_EXPORTER_MAX_LISTEN];
    int nlisten = 0, o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            cfg.socket_path = optarg;
            break;
        case 'l':
            if (nlisten == GG_EXPORTER_MAX_LISTEN) {
                fprintf(stderr, "gfxgraph-exporter: at most %d --listen\n",
                        GG_EXPORTER_MAX_LISTEN);
                return EXIT_USAGE;
            }
            listen[nlisten++] = optarg;
            break;
        case 't': {
            char *end;
            double s = strtod(optarg, &end);
            if (*end || !(s > 0 && s <= 3600)) {
                fprintf(stderr, "gfxgraph-exporter: --timeout takes seconds, more than 0 "
                                "and at most 3600 (got '%s')\n", optarg);
                return EXIT_USAGE;
            }
            cfg.timeout_ms = (int)(s * 1000 + 0.5) > 0 ? (int)(s * 1000 + 0.5) : 1;
            break;
        }
        case 'h':
            main_usage(stdout);
            return EXIT_OK;
        case 'V':
            printf("gfxgraph-exporter %s\n", GG_VERSION);
            return EXIT_OK;
        default:
            main_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gfxgraph-exporter: unexpected argument '%s'\n", argv[optind]);
        main_usage(stderr);
        return EXIT_USAGE;
    }
    int n = gg_exporter_listen_activated(&cfg);
    if (n < 0) {
        fprintf(stderr, "gfxgraph-exporter: LISTEN_FDS is malformed or passes more than %d "
                        "sockets\n", GG_EXPORTER_MAX_LISTEN);
        return EXIT_FAIL;
    }
    if (n == 0 && nlisten == 0)
        listen[nlisten++] = GG_EXPORTER_DEFAULT_LISTEN;
    for (int i = 0; i < nlisten; i++) {
        char err[512];
        if (gg_exporter_listen_addr(&cfg, listen[i], err, sizeof err) < 0) {
            fprintf(stderr, "gfxgraph-exporter: %s\n", err);
            return EXIT_FAIL;
        }
    }
    int rc = gg_exporter_serve(&cfg);
    if (rc < 0) {
        fprintf(stderr, "gfxgraph-exporter: %s\n", strerror(-rc));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}
