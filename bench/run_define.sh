#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Does a large program.define hold up other clients?  Starts each given
# gfxgraphd (cpu backend) on a temporary socket and runs bench_define
# against it (a 102,400-node define, 5 times, while another client sends
# buffer.list back to back); writes every run to one JSON file and prints
# the RESULT rows.
#
#   bench/run_define.sh BUILD_DIR [OUT_JSON] [LABEL=DAEMON[@COMMIT]]...
#
# BUILD_DIR: a built tree with bench_define (and gfxgraphd, used when no
# LABEL=DAEMON is given).  LABEL=DAEMON: another daemon binary to measure
# (e.g. before=/tmp/old/build/daemon/gfxgraphd@b1e2007), its commit after
# '@'.  OUT_JSON: default bench/results/cpu-define.json.  All daemons run
# at once and their runs alternate, GG_AB_ROUNDS rounds (default 3).  Exit
# status: 0, or 1 when a step failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 64
fi
ab_bench() { # LABEL SOCK COMMIT DIR
    local j=$4/$1.json
    "$bench" --socket "$2" --label "$1" --commit "$3" --json "$j" || return 1
    runs+=("$j")
}

: "${GG_AB_ROUNDS:=3}"
. "$(dirname "$0")/ab_daemons.sh"
ab_main run_define.sh bench_define "$root/bench/results/cpu-define.json" "$@"
