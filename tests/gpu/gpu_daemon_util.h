/* SPDX-License-Identifier: MIT */
/* Harness of the gfxgraphd GPU tests (test_gpu_daemon.c,
 * test_gpu_daemon_modes.c): pass/fail counting per scenario, the daemon
 * under test (parent process only), scenarios in forked client processes
 * with their counts sent back, stats and health through the raw call.
 * Programs, their CPU references and the replay checks: gpu_daemon_prog.h. */
#ifndef GG_TEST_GPU_DAEMON_UTIL_H
#define GG_TEST_GPU_DAEMON_UTIL_H

#include "gg_hip.h"
#include "internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifndef GG_TEST_BACKEND
#define GG_TEST_BACKEND "hip"
#endif

/* ---- checks ---------------------------------------------------------------- */

extern int gd_pass, gd_fail;
extern bool gd_verbose;     /* GG_TEST_VERBOSE: print passing checks too */
extern const char *gd_scn;  /* the scenario messages are about */

void gd_set_scn(const char *name);
__attribute__((format(printf, 1, 2))) void gd_failf(const char *fmt, ...);
__attribute__((format(printf, 2, 3))) bool gd_check(bool ok, const char *fmt, ...);

/* A HIP call that must succeed; on failure a failed check and goto out. */
#define HIP_OK(call)                                                                       \
    do {                                                                                   \
        hipError_t e_ = (call);                                                            \
        if (e_ != hipSuccess) {                                                            \
            gd_failf("%s:%d: %s: %s", __FILE__, __LINE__, #call, hipGetErrorString(e_));     \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

double gd_now_s(void);
void gd_sleep_ms(int ms);

/* ---- the daemon (parent process only) -------------------------------------- */

typedef struct {
    pid_t pid;
    char dir[48];
    char sock[96];          /* fits sun_path (108) */
    char log[96];
    char what[96];
} daemon_t;

extern daemon_t gd_daemon;

void gd_daemon_print_log(void);
/* Start gfxgraphd --backend GG_TEST_BACKEND on gd_daemon.sock with the
 * environment cleaned of GFXGRAPH* / HGB_* plus env ("KEY=VALUE" strings,
 * NULL-terminated); waits (90 s) until the socket answers.  0 or -1 (a
 * failed check, the log printed). */
int gd_daemon_start(const char *const *env, const char *what);
bool gd_daemon_alive(void);
/* SIGTERM, and a check that it exits 0 (SIGKILL after 20 s). */
void gd_daemon_stop(void);

/* ---- client processes ------------------------------------------------------- */

typedef void (*scn_fn)(const void *arg);

/* Run fn(arg) in a child process; its pass/fail counts come back through a
 * pipe.  A child that dies (crash, SIGALRM after timeout_s) is a failure. */
void gd_run_child(const char *name, scn_fn fn, const void *arg, int timeout_s);
/* In a client process: device 0 current; 0 or -1 (a failed check). */
int gd_dev_init(void);
/* A client connected to the daemon under test, or NULL (a failed check). */
gg_client *gd_connect(const char *name);

/* ---- stats and health through the raw call --------------------------------- */

typedef struct {
    double capture_count, replay_count, eager_count, fallback_count, sessions_active,
        graphs_cached;
} stats_t;

int gd_get_stats(gg_client *c, stats_t *s);

typedef struct {
    bool ok;
    char gpu[128], arch[64], smoke[200], reason[200], backend[16];
    double vram_total_mb, vram_free_mb;
} health_t;

int gd_get_health(gg_client *c, health_t *h);
/* Wait (up to timeout_s) until the daemon counts `want` sessions: a client
 * that just closed its connection may still be being torn down.  Returns the
 * last count seen (NAN when stats failed). */
double gd_wait_sessions(gg_client *c, double want, double timeout_s);
/* sm_90, sm_89, gfx1030, gfx90a ... */
bool gd_arch_ok(const char *a);
/* health ok, GPU name, arch, VRAM totals, smoke test passed, backend. */
void gd_check_health(gg_client *c, const char *when);

/* ---- main ------------------------------------------------------------------- */

/* Start of main: line-buffered stdout, GG_TEST_VERBOSE, SIGPIPE ignored; a
 * device probe in a child process (the parent never touches the runtime, so
 * the scenario processes start clean); the daemon's temporary directory.
 * 0 to go on, else main's exit status: 77 (SKIP: no device) or 1. */
int gd_begin(void);
/* End of main: the daemon log kept when a check failed, the time taken,
 * "N passed, M failed"; main's exit status. */
int gd_end(void);

#endif
