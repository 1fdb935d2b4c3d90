#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scratch bytes of a 13-bucket program, before and after one arena per
# program: starts each given gfxgraphd (cpu backend, default buckets) on a
# temporary socket and runs bench_scratch (chain64 and mlp, 2 branches)
# against it; writes every run to one JSON file and prints the RESULT rows.
#
#   bench/run_scratch.sh BUILD_DIR [OUT_JSON] [LABEL=DAEMON[@COMMIT]]...
#
# BUILD_DIR: a built tree with bench_scratch (and gfxgraphd, used when no
# LABEL=DAEMON is given).  LABEL=DAEMON: another daemon binary to measure
# (e.g. before=/tmp/old/build/daemon/gfxgraphd@e53b407), its commit after
# '@'.  OUT_JSON: default bench/results/cpu-scratch.json.  Exit status: 0,
# or 1 when a step failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '3,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 64
fi
ab_bench() { # LABEL SOCK COMMIT DIR: both programs, two branches each
    local prog j rc=0
    for prog in chain64 mlp; do
        j=$4/$1-$prog.json
        if "$bench" --socket "$2" --program "$prog" --branches 2 --label "$1-$prog" \
               --commit "$3" --json "$j"; then
            runs+=("$j")
        else
            rc=1
        fi
    done
    return $rc
}

. "$(dirname "$0")/ab_daemons.sh"
ab_main run_scratch.sh bench_scratch "$root/bench/results/cpu-scratch.json" "$@"
