#!/bin/bash
# SPDX-License-Identifier: MIT
# sd_notify as the service manager sees it (gg_sd_helper owns the
# NOTIFY_SOCKET and starts the real daemon):
#  1. WATCHDOG_USEC=200000, WATCHDOG_PID = the daemon: READY=1 once, only
#     after the socket accepts connections; STATUS= with live counters;
#     WATCHDOG=1 again and again; STOPPING=1 after SIGTERM; exit 0.  The
#     daemon logs that it pings at least every 100 ms (half the interval).
#  2. WATCHDOG_PID unset (allowed: the watchdog is for the main process).
#  3. WATCHDOG_PID names another process: no WATCHDOG=1.
#  4. A daemon that cannot start (the socket path is a regular file) never
#     says READY=1 and exits 1; a bad setting exits 2.
. "$(dirname "$0")/lib.sh"
gg_mktemp
T=$gg_tmp

gg_helper "watchdog for the daemon" "$GG_SD_HELPER" notify --socket "$T/a.sock" \
    --watchdog-usec 200000 --watchdog-pid self -- \
    "$GFXGRAPHD" --backend cpu --socket "$T/a.sock"
printf '%s\n' "$gg_helper_out" >"$T/a.log"
gg_check "the daemon pings at least every 100 ms for WATCHDOG_USEC=200000" \
    grep -q "watchdog enabled: interval 200 ms, WATCHDOG=1 at least every 100 ms" "$T/a.log"
gg_check "READY=1 came after the daemon logged that it serves" \
    awk '/serving on/ { s = 1 } /^# READY=1/ { exit !s }' "$T/a.log"

gg_helper "WATCHDOG_PID unset" "$GG_SD_HELPER" notify --socket "$T/b.sock" \
    --watchdog-usec 200000 --watchdog-pid unset -- "$GFXGRAPHD" --backend cpu --socket "$T/b.sock"

gg_helper "watchdog for another process" "$GG_SD_HELPER" notify --socket "$T/c.sock" \
    --watchdog-usec 200000 --watchdog-pid other -- "$GFXGRAPHD" --backend cpu --socket "$T/c.sock"

: >"$T/file"
gg_helper "start failure" "$GG_SD_HELPER" notify --socket "$T/file" --expect-exit 1 -- \
    "$GFXGRAPHD" --backend cpu --socket "$T/file"
gg_helper "bad setting" "$GG_SD_HELPER" notify --socket "$T/d.sock" --expect-exit 2 -- \
    "$GFXGRAPHD" --backend cpu --socket "$T/d.sock" --set device=gpu0
gg_summary
