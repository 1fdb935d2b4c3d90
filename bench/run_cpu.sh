#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Replay round trip on the cpu backend: starts gfxgraphd --backend cpu on a
# temporary socket and runs bench_replay (onenode, shm buffers) with 1 client
# and with 32 clients; writes both runs to one JSON file and prints a table.
#
#   bench/run_cpu.sh BUILD_DIR [OUT_JSON]
#
# BUILD_DIR: any configured and built tree (GFXGRAPH_GPU=off|cuda|hip; the
# cpu backend is in every build).  OUT_JSON: default
# bench/results/cpu-replay.json.  Environment: GG_BENCH_ITERS_1 (2000
# replays for the single client), GG_BENCH_ITERS_32 (500 per client with 32
# clients), GG_BENCH_WARMUP (200).  Exit status: 0, or 1 when a step failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 64
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "run_cpu.sh: no build dir '$1'" >&2; exit 1; }
out=${2:-$root/bench/results/cpu-replay.json}
iters1=${GG_BENCH_ITERS_1:-2000}
iters32=${GG_BENCH_ITERS_32:-500}
warmup=${GG_BENCH_WARMUP:-200}
daemon=$build/daemon/gfxgraphd
bench=$build/bench/bench_replay
for f in "$daemon" "$bench"; do
    [ -x "$f" ] || { echo "run_cpu.sh: $f is missing: build first (ninja -C $build)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/gg-bench-cpu.XXXXXX)
dpid=
# shellcheck disable=SC2317  # (called by the trap)
cleanup() {
    if [ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null; then
        kill -TERM "$dpid" 2>/dev/null
        wait "$dpid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sock=$tmp/gfxgraphd.sock
(
    for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
    export GFXGRAPH_CONFIG=/dev/null
    exec "$daemon" --backend cpu --socket "$sock" --log-target stderr
) >"$tmp/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 200); do
    [ -S "$sock" ] && break
    kill -0 "$dpid" 2>/dev/null || break
    sleep 0.05
done
if ! [ -S "$sock" ] || ! kill -0 "$dpid" 2>/dev/null; then
    echo "run_cpu.sh: gfxgraphd did not start; its log:" >&2
    cat "$tmp/daemon.log" >&2
    exit 1
fi

commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || true)
if [ -n "$commit" ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit-dirty"
fi

rc=0
run() { # label clients iters
    "$bench" --socket "$sock" --program onenode --memory shm --clients "$2" --iters "$3" \
        --warmup "$warmup" --label "$1" --commit "$commit" --json "$tmp/$1.json" \
        | tee "$tmp/$1.txt"
    local r=${PIPESTATUS[0]}
    [ "$r" -eq 0 ] || { echo "run_cpu.sh: bench_replay $1 exited $r" >&2; rc=1; }
}
run cpu-onenode-c1 1 "$iters1"
run cpu-onenode-c32 32 "$iters32"

# one file: {"suite": ..., "runs": [run, run]}
mkdir -p "$(dirname "$out")"
{
    printf '{\n  "suite": "cpu-replay",\n  "script": "bench/run_cpu.sh",\n  "runs": [\n'
    first=1
    for l in cpu-onenode-c1 cpu-onenode-c32; do
        [ -s "$tmp/$l.json" ] || continue
        [ $first -eq 1 ] || printf '    ,\n'
        first=0
        sed 's/^/    /' "$tmp/$l.json"
    done
    printf '  ]\n}\n'
} >"$out.tmp" && mv "$out.tmp" "$out"

echo
printf '%-22s %-8s %-4s %7s %6s %9s %9s %9s %9s %9s %10s %7s %7s\n' label program mem \
    clients iters p50_us p90_us p99_us mean_us dev_us replays/s graph eager
cat "$tmp"/cpu-onenode-c1.txt "$tmp"/cpu-onenode-c32.txt 2>/dev/null | sed -n 's/^RESULT //p'
echo "wrote $out"
exit $rc
