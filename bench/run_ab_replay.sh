#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A replay's cost through each transport, old daemon against new: starts each
# given gfxgraphd (cpu backend) on a temporary socket and, in rounds, runs
# against each in turn bench_replay (the socket: onenode, shm buffers, one
# client, then 8) and bench_fastpath (the fast path and the socket, shm
# buffers, one client, then its 16-client throughput); writes every run to
# one JSON file.  The same client binaries time every daemon.
#
#   bench/run_ab_replay.sh BUILD_DIR [OUT_JSON] [LABEL=DAEMON[@COMMIT]]...
#
# BUILD_DIR: a built tree with bench_replay and bench_fastpath (and
# gfxgraphd, used when no LABEL=DAEMON is given).  LABEL=DAEMON: a daemon
# binary to measure (e.g. before=/tmp/old/build/daemon/gfxgraphd@e4e966e),
# its commit after '@'.  OUT_JSON: default bench/results/cpu-ab-replay.json.
# All daemons run at once and their runs alternate, GG_AB_ROUNDS rounds
# (default 4; the order reversed every other round).  Environment:
# GG_AB_ITERS (3000 replays per row).  Exit status: 0, or 1 when a step
# failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 64
fi
iters=${GG_AB_ITERS:-3000}
ab_bench() { # LABEL SOCK COMMIT DIR
    local j
    for n in 1 8; do
        j=$4/$1-replay-c$n.json
        "$bench" --socket "$2" --program onenode --memory shm --clients "$n" \
            --iters "$iters" --label "$1-replay-c$n" --commit "$3" --json "$j" >/dev/null || return 1
        runs+=("$j")
    done
    j=$4/$1-fastpath.json
    "$fastpath" --socket "$2" --memory shm --iters "$iters" --tput-iters "$iters" \
        --commit "$3" --json "$j" >/dev/null || return 1
    runs+=("$j")
}

: "${GG_AB_ROUNDS:=4}"
fastpath=$(cd "$1" 2>/dev/null && pwd)/bench/bench_fastpath
[ -x "$fastpath" ] || { echo "run_ab_replay.sh: $fastpath is missing: build it first" >&2; exit 1; }
. "$(dirname "$0")/ab_daemons.sh"
ab_main run_ab_replay.sh bench_replay "$root/bench/results/cpu-ab-replay.json" "$@"
