#!/bin/bash
# SPDX-License-Identifier: MIT
# make test on a fresh clone while the CPU is busy with other work.
#
# The suite must hold on a loaded machine (no test may depend on timing):
# this script clones the repository's committed HEAD into a temporary
# directory (what CI sees: no uncommitted change, no build tree), starts a
# CPU load beside it (stress-ng --cpu LOAD, LOAD workers; a shell busy loop
# per worker when stress-ng is missing and cannot be installed), runs
# `make test` RUNS times in that clone, prints each run's result and time,
# stops the load and exits non-zero when any run failed.
#
#   tests/load/make-test-under-load.sh [-n RUNS] [-l LOAD] [-k]
#
#   -n RUNS   make test runs, one after the other (default 3)
#   -l LOAD   CPU load workers beside them (default 2)
#   -k        keep the clone and the logs even when every run passed
#             (they are always kept after a failure)
#
# Environment: MAKEFLAGS and the Makefile's variables (JOBS, GPU, NODEPS...)
# pass through to make.  stress-ng is installed with apt-get when missing and
# this runs as root or with sudo; NO_INSTALL=1 never installs it.  Each run's
# whole output is in run-N.log in the clone's parent directory; a failed
# run's failing tests are printed from it.
#
# A full make test on 2 loaded cores takes a while (the cpu and sanitizer
# builds and their tests, the fuzz smoke runs, the AMD and NVIDIA builds);
# later runs reuse the first run's build trees and rerun every test.
set -u

runs=3
load=2
keep=0
while getopts "n:l:kh" opt; do
    case $opt in
    n) runs=$OPTARG ;;
    l) load=$OPTARG ;;
    k) keep=1 ;;
    h) sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [-n RUNS] [-l LOAD] [-k]" >&2; exit 64 ;;
    esac
done
case $runs$load in
*[!0-9]*) echo "RUNS and LOAD are whole numbers" >&2; exit 64 ;;
esac
[ "$runs" -ge 1 ] || { echo "RUNS must be at least 1" >&2; exit 64; }

src=$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null) || {
    echo "not inside the gfxgraph repository" >&2
    exit 1
}
rev=$(git -C "$src" rev-parse HEAD) || exit 1
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
    echo "note: $src has uncommitted changes; the clone tests the commit $rev only"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gg-load.XXXXXX") || exit 1
clone=$work/gfxgraph
load_pids=()

stop_load() {
    local p
    for p in "${load_pids[@]+"${load_pids[@]}"}"; do
        kill "$p" 2>/dev/null
    done
    for p in "${load_pids[@]+"${load_pids[@]}"}"; do
        wait "$p" 2>/dev/null
    done
    load_pids=()
}
trap 'stop_load' EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# ---- the clone ------------------------------------------------------------
echo "== clone of $rev into $clone"
if ! git clone --quiet --no-local --no-checkout "$src" "$clone" ||
   ! git -C "$clone" checkout --quiet --detach "$rev"; then
    echo "git clone failed" >&2
    exit 1
fi

# ---- the load -------------------------------------------------------------
sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd=sudo
if ! command -v stress-ng >/dev/null 2>&1 && [ -z "${NO_INSTALL:-}" ] &&
   { [ -z "$sudo_cmd" ] || sudo -n true 2>/dev/null; }; then
    echo "== installing stress-ng (apt-get)"
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        stress-ng >"$work/apt.log" 2>&1 ||
        { $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get update -qq >>"$work/apt.log" 2>&1 &&
          $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
              --no-install-recommends stress-ng >>"$work/apt.log" 2>&1; } ||
        echo "   could not install stress-ng (see $work/apt.log)"
fi
if [ "$load" -gt 0 ]; then
    if command -v stress-ng >/dev/null 2>&1; then
        echo "== load: stress-ng --cpu $load"
        stress-ng --cpu "$load" --quiet >"$work/load.log" 2>&1 &
        load_pids+=($!)
    else
        echo "== load: $load shell busy loop(s) (stress-ng not found)"
        for _ in $(seq "$load"); do
            bash -c 'while :; do :; done' &
            load_pids+=($!)
        done
    fi
fi

# ---- the runs -------------------------------------------------------------
failed=0
summary=()
for i in $(seq "$runs"); do
    log=$work/run-$i.log
    echo "== run $i of $runs: make test (log: $log)"
    t0=$(date +%s)
    (cd "$clone" && make test) >"$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    if [ "$rc" -eq 0 ] && grep -q "make test: all builds passed" "$log"; then
        line=$(printf 'run %d: PASS in %dm%02ds' "$i" $((secs / 60)) $((secs % 60)))
    else
        failed=$((failed + 1))
        line=$(printf 'run %d: FAIL (exit %d) after %dm%02ds' "$i" "$rc" $((secs / 60)) $((secs % 60)))
        echo "   failing tests and checks:"
        grep -E '\*\*\*Failed|\*\*\*Timeout|\(Failed\)|\(Timeout\)|^FAIL|^not ok|^make(\[[0-9]+\])?: \*\*\*' "$log" |
            sed 's/^/     /' | head -40
        echo "   last lines:"
        tail -n 15 "$log" | sed 's/^/     /'
    fi
    echo "   $line"
    summary+=("$line")
done

stop_load
echo "== summary (commit $rev, load $load)"
for l in "${summary[@]}"; do echo "   $l"; done
if [ "$failed" -gt 0 ] || [ "$keep" = 1 ]; then
    echo "   clone and logs kept in $work"
else
    rm -rf "$work"
fi
[ "$failed" -eq 0 ]
