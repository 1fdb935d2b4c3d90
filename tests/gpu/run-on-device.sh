#!/usr/bin/env bash
# The device run: everything the GPU host should do, in one script, from the
# repository root:
#
#   bash tests/gpu/run-on-device.sh
#
#  1. . .gpu/env.sh (the Debian dependencies, unpacked into a private prefix)
#  2. configure + build a CUDA tree (Ninja, GFXGRAPH_GPU=cuda, sm_90) in
#     $GG_BUILD_DIR (default build-dev)
#  3. ctest -L gpu -V (all output kept), then the rest of the suite (-LE gpu):
#     together, the whole suite; then the torch tests of the Python package
#     (tests/gpu/python/run.sh: each asserts the daemon's replay counters,
#     and test_fault_detection.py shows each failing against a daemon with
#     GFXGRAPH_FAULT set), their output appended to ctest-gpu.log
#  4. bench_chain_inproc (in-process eager vs graph, the same 64 kernels), JSON
#  5. with an MPS control daemon of this run's own when
#     nvidia-cuda-mps-control exists (GG_MPS=0: without; the daemon and its
#     clients then share one GPU context, as bench/run_python.sh GG_MPS=1):
#     gfxgraphd --backend hip + bench_replay --memory gpu, chain64 at 1
#       client, 2000 replays, each row naming the plan it ran (the daemon's
#       launches per replay in the RESULT row and the JSON):
#       chain64-fused-graph / chain64-fused-eager (GFXGRAPH=0): fusion on
#         both sides (2 launches either way);
#       chain64-unfused-graph (GFXGRAPH_FUSE=0) / chain64-unfused-eager
#         (GFXGRAPH=0 GFXGRAPH_FUSE=0): fusion off both sides, 64 launches
#         against one graph of 64 kernels: what the graph saves;
#       chain64-fused-hostfn (GFXGRAPH_COMPLETION=hostfn);
#       onenode with 1 client and with 16 clients (on the first daemon).
#       Each daemon in turn: these rows are not interleaved.
#     then bench_fastpath on its own two daemons (fusion on, and
#     GFXGRAPH_FUSE=0 for --socket-unfused): onenode, chain64_fused and
#     chain64_unfused through the fast path, the socket and an in-process
#     graph of the same launches, interleaved; 16 clients
#  6. a summary table, printed at the end
#
# Output, in $OUT (default ./out-device; at most 8 files, no folders):
#   summary.txt              steps with exit status and seconds, test
#                            totals, the benchmark tables
#   setup.log                env, nvidia-smi, configure, build
#   ctest-gpu.log            ctest -L gpu -V --output-on-failure
#   ctest-rest.log           ctest -LE gpu --output-on-failure
#   bench.log                bench output, daemon logs and stats per daemon
#   bench-chain-inproc.json  bench_chain_inproc --json
#   bench-replay.json        every bench_replay run: {"runs": [...]}
#   bench-fastpath.json      bench_fastpath --json
#
# Each step runs under a time limit taken from one budget
# ($GG_DEVICE_BUDGET_S, default 500 s); a failed step is recorded and the
# next one runs.  Without a GPU (a local dry run) the gpu tests SKIP, the
# in-process bench says SKIP and the hip daemon does not start: the daemon
# benches are then recorded as skipped (GG_DAEMON_BACKEND=cpu runs the
# daemon benches on the cpu backend with shm buffers instead, to try the
# script itself; GG_SKIP_BUILD=1 takes $GG_BUILD_DIR as built, whatever its
# GPU kind, and GG_SKIP_CTEST=1 leaves out the ctest steps).  Exit status: 0
# when every step
# passed, else 1.  The git commit for the JSON: $GFXGRAPH_GIT_COMMIT, else
# git rev-parse where .git exists.
set +x
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
OUT=${OUT:-$root/out-device}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
build=${GG_BUILD_DIR:-build-dev}
budget=${GG_DEVICE_BUDGET_S:-500}
jobs=${GG_JOBS:-$(nproc 2>/dev/null || echo 4)}
t_begin=$(date +%s)
summary=$OUT/summary.txt
setup_log=$OUT/setup.log
bench_log=$OUT/bench.log
# start clean: only this run's files in $OUT
rm -f "$summary" "$setup_log" "$bench_log" "$OUT/ctest-gpu.log" "$OUT/ctest-rest.log" \
    "$OUT/bench-chain-inproc.json" "$OUT/bench-replay.json" "$OUT/bench-fastpath.json"
: >"$setup_log"
: >"$bench_log"
tmp=$(mktemp -d /tmp/gg-device-run.XXXXXX)
dpid=
d2pid=
mps=

# shellcheck disable=SC2317  # (called by the trap)
cleanup() {
    daemon_stop >/dev/null 2>&1
    daemon2_stop >/dev/null 2>&1
    mps_stop >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

elapsed() { echo $(($(date +%s) - t_begin)); }
# seconds a step may take: its own cap, within what is left of the budget
limit() {
    local left=$((budget - $(elapsed) - 10))
    [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}

steps=()
failed=0
record() { # name rc seconds note
    steps+=("$(printf '%-40s %-8s %5ss  %s' "$1" "$2" "$3" "$4")")
    case "$2" in 0 | skipped) ;; *) failed=1 ;; esac
}

# step NAME CAP LOG CMD...: run CMD with its output appended to LOG under a
# time limit; records the status (124: timed out)
step() {
    local name=$1 cap=$2 log=$3
    shift 3
    local lim
    lim=$(limit "$cap")
    if [ "$lim" -lt 5 ]; then
        record "$name" skipped 0 "out of time budget"
        return 99
    fi
    echo "==== $name (limit ${lim}s): $*" >>"$log"
    local t0 rc
    t0=$(date +%s)
    timeout -k 10 "$lim" "$@" >>"$log" 2>&1
    rc=$?
    local note="" status=$rc
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && note="timed out after ${lim}s"
    # 77: the step's own "nothing could run here" (no torch, no device)
    [ "$rc" -eq 77 ] && status=skipped note="exit 77: nothing could run here"
    echo "==== $name: exit $rc" >>"$log"
    record "$name" "$status" "$(($(date +%s) - t0))" "$note"
    return "$rc"
}

# ---- 1. environment ---------------------------------------------------------
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -a)"
    echo "cpus: $(nproc 2>/dev/null)"
} >>"$setup_log"
if [ -f .gpu/env.sh ]; then
    # shellcheck disable=SC1091
    . .gpu/env.sh >>"$setup_log" 2>&1
    record "env (.gpu/env.sh)" $? 0 ""
else
    record "env (.gpu/env.sh)" skipped 0 "no .gpu/env.sh"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi >>"$setup_log" 2>&1
fi
commit=${GFXGRAPH_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}
echo "commit: ${commit:-unknown}" >>"$setup_log"

# ---- 2. configure and build ---------------------------------------------------
nvcc_arg=()
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc_arg=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
if [ "${GG_SKIP_BUILD:-0}" = 1 ]; then
    record "configure + build" skipped 0 "GG_SKIP_BUILD=1: $build as it is"
elif step "configure (cuda, sm_90)" 180 "$setup_log" \
    cmake -S . -B "$build" -G Ninja -DGFXGRAPH_GPU=cuda -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo ${nvcc_arg[@]+"${nvcc_arg[@]}"}; then
    # -k 0: build everything that builds, so one broken target does not
    # hide the others
    step "build" 360 "$setup_log" cmake --build "$build" -j "$jobs" -- -k 0
fi
[ -d "$build" ] || record "build" skipped 0 "not configured"

# ---- 3. tests ----------------------------------------------------------------------
if [ "${GG_SKIP_CTEST:-0}" = 1 ]; then
    record "ctest" skipped 0 "GG_SKIP_CTEST=1"
elif [ -f "$build/CTestTestfile.cmake" ]; then
    step "ctest -L gpu" 240 "$OUT/ctest-gpu.log" \
        ctest --test-dir "$build" -L gpu -V --output-on-failure --timeout 220
    step "ctest -LE gpu (rest of the suite)" 180 "$OUT/ctest-rest.log" \
        ctest --test-dir "$build" -LE gpu --output-on-failure -j "$jobs" --timeout 170
else
    record "ctest" skipped 0 "no build tree"
fi
# the torch tests (exit 77: no python3, torch or CUDA device here)
if [ -x "$build/daemon/gfxgraphd" ]; then
    echo "#### tests/gpu/python/run.sh" >>"$OUT/ctest-gpu.log"
    step "python torch tests (gpu/python/run.sh)" 240 "$OUT/ctest-gpu.log" \
        bash tests/gpu/python/run.sh "$build"
fi

# ---- 4. in-process bench ----------------------------------------------------------
inproc=$build/bench/bench_chain_inproc
if [ -x "$inproc" ]; then
    echo "#### bench_chain_inproc" >>"$bench_log"
    step "bench_chain_inproc" 90 "$bench_log" \
        "$inproc" --iters 2000 --warmup 200 --floor --json "$OUT/bench-chain-inproc.json"
else
    record "bench_chain_inproc" skipped 0 "not built"
fi

# ---- 5. the daemon and bench_replay ----------------------------------------------
daemon=$build/daemon/gfxgraphd
breplay=$build/bench/bench_replay
ctl=$build/client/gfxgraphctl
sock=$tmp/gfxgraphd.sock
backend=${GG_DAEMON_BACKEND:-hip}
memory=gpu
[ "$backend" = hip ] || memory=shm

daemon_stop() {
    if [ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null; then
        kill -TERM "$dpid" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$dpid" 2>/dev/null
    fi
    [ -n "$dpid" ] && wait "$dpid" 2>/dev/null
    dpid=
}

# The unfused daemon of bench_fastpath's chain64_unfused row, beside the
# first one: GFXGRAPH_FUSE=0, its own socket and log.
sock2=$tmp/gfxgraphd-unfused.sock
daemon2_start() {
    rm -f "$sock2"
    (
        for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
        export GFXGRAPH_CONFIG=/dev/null GFXGRAPH_FUSE=0
        exec "$daemon" --backend "$backend" --socket "$sock2" --log-target stderr
    ) >"$tmp/daemon2.log" 2>&1 &
    d2pid=$!
    local t0
    t0=$(date +%s)
    while [ $(($(date +%s) - t0)) -lt 60 ] && kill -0 "$d2pid" 2>/dev/null; do
        if [ -S "$sock2" ] && "$ctl" --socket "$sock2" --timeout 5 health >/dev/null 2>&1; then
            record "gfxgraphd (GFXGRAPH_FUSE=0, 2nd)" 0 "$(($(date +%s) - t0))" "healthy"
            return 0
        fi
        sleep 0.2
    done
    record "gfxgraphd (GFXGRAPH_FUSE=0, 2nd)" "no-start" "$(($(date +%s) - t0))" "see bench.log"
    { echo "#### gfxgraphd (GFXGRAPH_FUSE=0) did not start:"; cat "$tmp/daemon2.log"; } >>"$bench_log"
    daemon2_stop
    return 1
}
daemon2_stop() {
    if [ -n "$d2pid" ] && kill -0 "$d2pid" 2>/dev/null; then
        {
            echo "#### gfxgraphctl stats (GFXGRAPH_FUSE=0)"
            "$ctl" --socket "$sock2" --timeout 10 stats 2>&1
        } >>"$bench_log"
        kill -TERM "$d2pid" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$d2pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$d2pid" 2>/dev/null
        { echo "#### gfxgraphd log (GFXGRAPH_FUSE=0)"; cat "$tmp/daemon2.log"; } >>"$bench_log"
    fi
    [ -n "$d2pid" ] && wait "$d2pid" 2>/dev/null
    d2pid=
}

# An MPS control daemon of this run's own (private pipe and log directories,
# as bench/run_python.sh GG_MPS=1), for the figures where a daemon and its
# clients share the GPU: started after the tests, stopped at the end.
mps_start() {
    [ "${GG_MPS:-1}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1 || {
        record "MPS control daemon" skipped 0 "GG_MPS=0 or no nvidia-cuda-mps-control"
        return 0
    }
    export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d >>"$bench_log" 2>&1; then
        mps=1
        record "MPS control daemon" 0 0 "started"
    else
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        record "MPS control daemon" "no-start" 0 "see bench.log"
    fi
}
mps_stop() {
    [ -n "$mps" ] || return 0
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
    mps=
}

# daemon_start LABEL [KEY=VALUE...]: gfxgraphd --backend $backend with a clean
# GFXGRAPH*/HGB_* environment plus the given variables
daemon_start() {
    local label=$1
    shift
    rm -f "$sock"
    : >"$tmp/daemon.log"
    (
        for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
        export GFXGRAPH_CONFIG=/dev/null
        for kv in "$@"; do export "${kv?}"; done
        exec "$daemon" --backend "$backend" --socket "$sock" --log-target stderr
    ) >>"$tmp/daemon.log" 2>&1 &
    dpid=$!
    local t0
    t0=$(date +%s)
    while [ $(($(date +%s) - t0)) -lt 60 ]; do
        if ! kill -0 "$dpid" 2>/dev/null; then
            wait "$dpid" 2>/dev/null
            local rc=$?
            dpid=
            {
                echo "#### gfxgraphd --backend $backend ($label) did not start (exit $rc):"
                cat "$tmp/daemon.log"
            } >>"$bench_log"
            record "gfxgraphd ($label)" "no-start" "$(($(date +%s) - t0))" "exit $rc; see bench.log"
            return 1
        fi
        if [ -S "$sock" ] && "$ctl" --socket "$sock" --timeout 5 health >/dev/null 2>&1; then
            record "gfxgraphd ($label)" 0 "$(($(date +%s) - t0))" "healthy"
            return 0
        fi
        sleep 0.2
    done
    record "gfxgraphd ($label)" "no-start" 60 "no healthy answer in 60 s"
    daemon_stop
    { echo "#### gfxgraphd ($label): no healthy answer in 60 s:"; cat "$tmp/daemon.log"; } >>"$bench_log"
    return 1
}

# daemon_end LABEL: stats into the log, stop, the daemon's log into the log
daemon_end() {
    {
        echo "#### gfxgraphctl stats ($1)"
        "$ctl" --socket "$sock" --timeout 10 stats 2>&1
    } >>"$bench_log"
    daemon_stop
    { echo "#### gfxgraphd log ($1)"; cat "$tmp/daemon.log"; } >>"$bench_log"
}

runs=()
bench() { # LABEL ARGS...: one bench_replay run
    local label=$1
    shift
    echo "#### bench_replay $label" >>"$bench_log"
    step "bench_replay $label" 90 "$bench_log" \
        "$breplay" --socket "$sock" --memory "$memory" --warmup 200 --label "$label" \
        --commit "$commit" --json "$tmp/run-$label.json" "$@"
    [ -s "$tmp/run-$label.json" ] && runs+=("$label")
}

daemon_benches() { # LABEL ENV... -- BENCH-LABEL ARGS... [-- BENCH-LABEL ARGS...]
    local label=$1
    shift
    local env=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do env+=("$1"); shift; done
    if ! daemon_start "$label" ${env[@]+"${env[@]}"}; then
        while [ $# -gt 0 ]; do
            shift
            [ $# -gt 0 ] && record "bench_replay $1" skipped 0 "no daemon"
            while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
        done
        return
    fi
    while [ $# -gt 0 ]; do
        shift
        local args=()
        while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
        [ ${#args[@]} -gt 0 ] && bench "${args[@]}"
    done
    daemon_end "$label"
}

if [ -x "$daemon" ] && [ -x "$breplay" ] && [ -x "$ctl" ]; then
    [ "$backend" = hip ] && mps_start
    # fusion on (the default): graph against eager of the same fused plan
    daemon_benches "graphs" \
        -- chain64-fused-graph --program chain64 --clients 1 --iters 2000 \
        -- onenode-c1 --program onenode --clients 1 --iters 2000 \
        -- onenode-c16 --program onenode --clients 16 --iters 1000
    daemon_benches "GFXGRAPH=0" GFXGRAPH=0 \
        -- chain64-fused-eager --program chain64 --clients 1 --iters 2000
    # fusion off on both sides: 64 launches against one graph of 64 kernels,
    # what the graph itself saves
    daemon_benches "GFXGRAPH_FUSE=0" GFXGRAPH_FUSE=0 \
        -- chain64-unfused-graph --program chain64 --clients 1 --iters 2000
    daemon_benches "GFXGRAPH=0 GFXGRAPH_FUSE=0" GFXGRAPH=0 GFXGRAPH_FUSE=0 \
        -- chain64-unfused-eager --program chain64 --clients 1 --iters 2000
    # the fast path against the socket and an in-process graph launch, and
    # 16 client processes on each path (bench/README.md)
    fpbench=$build/bench/bench_fastpath
    if [ -x "$fpbench" ]; then
        if daemon_start "fastpath"; then
            unfused=()
            daemon2_start && unfused=(--socket-unfused "$sock2")
            echo "#### bench_fastpath" >>"$bench_log"
            step "bench_fastpath" 150 "$bench_log" \
                "$fpbench" --socket "$sock" ${unfused[@]+"${unfused[@]}"} --iters 2000 \
                --warmup 200 --clients 16 --tput-iters 2000 --commit "$commit" \
                --json "$OUT/bench-fastpath.json"
            daemon2_stop
            daemon_end "fastpath"
        fi
    else
        record "bench_fastpath" skipped 0 "not built"
    fi
    # the floor, in the same run: two processes and a shared page, no daemon
    # (bench/fastpath_probe.cu; its numbers sit beside bench_fastpath's)
    if [ "$backend" = hip ] && { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }; then
        nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
        echo "#### fastpath_probe" >>"$bench_log"
        if step "fastpath_probe build" 120 "$bench_log" \
            "$nvcc_bin" -O2 -arch=sm_90 bench/fastpath_probe.cu -lcuda -o "$tmp/fastpath_probe"; then
            step "fastpath_probe 1 node" 60 "$bench_log" "$tmp/fastpath_probe" 1 5000
            step "fastpath_probe 64 nodes" 90 "$bench_log" "$tmp/fastpath_probe" 64 3000
        fi
    fi
    daemon_benches "GFXGRAPH_COMPLETION=hostfn" GFXGRAPH_COMPLETION=hostfn \
        -- chain64-fused-hostfn --program chain64 --clients 1 --iters 2000
    # the README's demo, against the GPU: device memory registered by pointer
    demo=$build/client/gfxgraph-demo
    if [ -x "$demo" ] && daemon_start "demo"; then
        echo "#### gfxgraph-demo" >>"$bench_log"
        step "gfxgraph-demo (chain + MLP, batch 1..40)" 90 "$bench_log" "$demo" "$sock"
        { echo "#### gfxgraphctl health (demo)"; "$ctl" --socket "$sock" health 2>&1; } >>"$bench_log"
        daemon_end "demo"
    fi
    mps_stop
else
    record "bench_replay" skipped 0 "gfxgraphd, bench_replay or gfxgraphctl not built"
fi

# all runs in one file
if [ ${#runs[@]} -gt 0 ]; then
    {
        printf '{\n  "suite": "device-replay",\n  "script": "tests/gpu/run-on-device.sh",\n  "runs": [\n'
        first=1
        for l in "${runs[@]}"; do
            [ $first -eq 1 ] || printf '    ,\n'
            first=0
            sed 's/^/    /' "$tmp/run-$l.json"
        done
        printf '  ]\n}\n'
    } >"$OUT/bench-replay.json"
fi

# ---- 6. summary -----------------------------------------------------------------------
{
    echo "gfxgraph device run: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), commit ${commit:-unknown}"
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
    fi
    echo "total: $(elapsed) s (budget $budget s)"
    echo "MPS for the daemon benches: $(grep -q '^MPS control daemon *0 ' <(printf '%s\n' "${steps[@]}") && echo on || echo off)"
    echo
    printf '%-40s %-8s %6s  %s\n' step status time note
    for s in "${steps[@]}"; do echo "$s"; done
    echo
    echo "tests:"
    for f in "$OUT/ctest-gpu.log" "$OUT/ctest-rest.log"; do
        [ -f "$f" ] || continue
        printf '  %-16s %s\n' "$(basename "$f" .log):" \
            "$(grep -E 'tests passed|No tests were found' "$f" | tail -1)"
        grep -E '^[[:space:]]*[0-9]+ - .*\((Failed|Skipped|Timeout|Not Run|SEGFAULT|Subprocess)' "$f" \
            | sed 's/^[[:space:]]*/    /'
        # the gpu tests' own verdicts (ctest -V prefixes "N: ")
        [ "$f" = "$OUT/ctest-gpu.log" ] &&
            grep -E '^[0-9]+: ([0-9]+ passed, [0-9]+ failed|SKIP)' "$f" | sed 's/^/    test /'
    done
    echo
    echo "bench_chain_inproc (64-node chain, in process, us):"
    if grep -qE '^(eager|graph) ' "$bench_log"; then
        grep -E '^mode |^(eager|graph) |^graph nodes' "$bench_log" | sed 's/^/  /'
    else
        grep -E '^SKIP' "$bench_log" | head -1 | sed 's/^/  /'
        grep -qE '^SKIP' "$bench_log" || echo "  (no result)"
    fi
    echo
    echo "bench_replay through gfxgraphd --backend $backend (round trip per replay, us):"
    echo "  (kern: the daemon's launches per replay; each daemon in turn, not interleaved)"
    printf '  %-22s %-8s %-4s %7s %6s %9s %9s %9s %9s %9s %10s %7s %7s %6s\n' label program mem \
        clients iters p50 p90 p99 mean dev_us replays/s graph eager kern
    if grep -q '^RESULT ' "$bench_log"; then
        sed -n 's/^RESULT /  /p' "$bench_log"
    else
        echo "  (no runs)"
    fi
    echo
    echo "bench_fastpath (fast path vs socket vs in-process graph of the same launches, us;"
    echo "16 clients' replays/s):"
    if grep -q '^FASTPATH ' "$bench_log"; then
        grep -E '^fast path:|^in process:|^(onenode|chain64_[a-z]*)[ :]|^  launches: |^  ratios|^  device time' \
            "$bench_log" | sed 's/^/  /'
        sed -n 's/^FASTPATH /  /p' "$bench_log"
    else
        echo "  (no run)"
    fi
    echo
    echo "fastpath_probe (the floor: two processes, a shared page, no daemon; p50 us):"
    if grep -qE '^nodes [0-9]+ iters' "$bench_log"; then
        grep -E '^nodes [0-9]+ iters|^(inproc|xproc)-' "$bench_log" | sed 's/^/  /'
    else
        echo "  (no run)"
    fi
} >"$summary"
echo
cat "$summary"
echo
echo "files in $OUT:"
# shellcheck disable=SC2012
ls -l "$OUT" | sed 1d
exit $failed
