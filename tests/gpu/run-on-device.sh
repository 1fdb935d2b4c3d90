#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
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
#  4. bench_chain_inproc (in-process eager vs graph, the same 64 kernels, in
#     interleaved blocks)
#  5. with an MPS control daemon of this run's own when
#     nvidia-cuda-mps-control exists (GG_MPS=0: without; the daemons and
#     their clients then share one GPU context, as bench/run_python.sh
#     GG_MPS=1): bench_replay --memory gpu against gfxgraphd --backend hip,
#     chain64 at 1 client, 2000 replays a row, each pair of rows from two
#     daemons up at once and timed by the same client processes in 10
#     alternating blocks (bench_replay --socket-b), each row naming its plan
#     (the daemon's launches per replay) and the pair's work:
#       chain64-fused-graph / chain64-fused-eager (default / GFXGRAPH=0):
#         fusion on both sides (2 launches either way): fused graph against
#         fused eager, equal work;
#       chain64-unfused-graph / chain64-unfused-eager (GFXGRAPH_FUSE=0 /
#         GFXGRAPH=0 GFXGRAPH_FUSE=0): 64 launches against one graph of the
#         64 kernels, equal work: what the graph saves;
#       chain64-fuse-on-graph / chain64-fuse-off-graph (default /
#         GFXGRAPH_FUSE=0): fused against unfused graph, differing work (2
#         kernels against 64), what fusion saves;
#       chain64-fused-poll / chain64-fused-hostfn (default /
#         GFXGRAPH_COMPLETION=hostfn): the two completion modes, equal work;
#     then onenode with 1 and 16 clients on one default daemon (single rows,
#     not interleaved); bench_fastpath on its own two daemons (fusion on,
#     and GFXGRAPH_FUSE=0 for --socket-unfused): onenode, chain64_fused and
#     chain64_unfused through the fast path, the socket and an in-process
#     graph of the same launches, interleaved; 16 clients; fastpath_probe
#     (the floor); the README's demo
#  6. optional benches, each on by default (GG_BENCH_PYTHON=0,
#     GG_BENCH_FUSE=0, GG_BENCH_KERNELS=0: left out), each under its own cap
#     (GG_CAP_PYTHON, GG_CAP_FUSE, GG_CAP_KERNELS seconds) within the budget,
#     after the MPS daemon of step 5 is gone:
#       bench_python under an MPS daemon of its own
#         (GG_MPS=1 bench/run_python.sh; without MPS when GG_MPS=0 or no
#         nvidia-cuda-mps-control; extra arguments: $BENCH_PYTHON_ARGS)
#       bench_fuse.py (fused and unfused daemons of its own against
#         PyTorch's graph; extra arguments: $GG_BENCH_FUSE_ARGS)
#       bench_kernels (bench/run_kernels.sh on this build tree; its kernel
#         tests only when ctest did not run them; extra arguments:
#         $GG_BENCH_KERNELS_ARGS)
#  7. a summary table, printed at the end
#
# Output, in $OUT (default ./out-device; 6 files, no folders):
#   summary.txt      steps with exit status and seconds, test totals, the
#                    benchmark tables
#   setup.log        env, nvidia-smi, configure, build
#   ctest-gpu.log    ctest -L gpu -V --output-on-failure, the torch tests
#   ctest-rest.log   ctest -LE gpu --output-on-failure
#   bench.log        bench output, daemon logs and stats per daemon
#   results.tgz      every JSON result, in results/:
#                      bench-chain-inproc.json  bench_chain_inproc --json
#                      bench-replay.json        every bench_replay row:
#                                               {"runs": [...]}
#                      bench-fastpath.json      bench_fastpath --json
#                      bench-python.json        bench_python.py (step 6)
#                      bench-fuse.json          bench_fuse.py (step 6)
#                      bench-kernels.json       bench_kernels.py (step 6)
#
# Each step runs under a time limit taken from one budget
# ($GG_DEVICE_BUDGET_S, default 520 s: the run ends within about nine
# minutes); a failed step is recorded and the next one runs.  Switches:
#   GG_ONLY_BENCH=1  the benches alone: no configure/build when
#                    $GG_BUILD_DIR/daemon/gfxgraphd exists (else it builds),
#                    no ctest, no torch tests
#   GG_SKIP_BUILD=1  take $GG_BUILD_DIR as built, whatever its GPU kind
#   GG_SKIP_CTEST=1  leave out both ctest steps
#   GG_SKIP_PYTEST=1 leave out the torch tests (GG_CAP_PYTEST: their cap, 240 s)
#   GG_SKIP_REST=1   leave out ctest -LE gpu (the cpu suite CI runs anyway)
# Without a GPU (a local dry run) the gpu tests SKIP, the in-process bench
# and the torch steps say SKIP (exit 77) and the hip daemon does not start:
# the daemon benches are then recorded as skipped.  GG_DAEMON_BACKEND=cpu
# runs the daemon benches on the cpu backend with shm buffers instead, to
# try the script itself:
#   GG_DAEMON_BACKEND=cpu GG_BUILD_DIR=build-cpu GG_ONLY_BENCH=1 \
#       bash tests/gpu/run-on-device.sh
# Exit status: 0 when every step passed, else 1.  The git commit for the
# JSON: $GFXGRAPH_GIT_COMMIT, else git rev-parse where .git exists.
set +x
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
OUT=${OUT:-$root/out-device}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
build=${GG_BUILD_DIR:-build-dev}
budget=${GG_DEVICE_BUDGET_S:-520}
jobs=${GG_JOBS:-$(nproc 2>/dev/null || echo 4)}
only_bench=${GG_ONLY_BENCH:-0}
t_begin=$(date +%s)
summary=$OUT/summary.txt
setup_log=$OUT/setup.log
bench_log=$OUT/bench.log
# start clean: only this run's files in $OUT (and none of the older runs'
# loose JSON files, so that the files that come back stay few)
rm -f "$summary" "$setup_log" "$bench_log" "$OUT/ctest-gpu.log" "$OUT/ctest-rest.log" \
    "$OUT/results.tgz" "$OUT/bench-chain-inproc.json" "$OUT/bench-replay.json" \
    "$OUT/bench-fastpath.json"
: >"$setup_log"
: >"$bench_log"
tmp=$(mktemp -d /tmp/gg-device-run.XXXXXX)
res=$tmp/results
mkdir -p "$res"
declare -A dpid=()
mps=
bundled=

# every JSON result in one tarball (the device returns few files)
bundle() {
    [ -n "$bundled" ] && return 0
    bundled=1
    tar -czf "$OUT/results.tgz" -C "$tmp" results
}

# shellcheck disable=SC2317  # (called by the trap)
cleanup() {
    for s in "${!dpid[@]}"; do gd_stop "$s" >/dev/null 2>&1; done
    mps_stop >/dev/null 2>&1
    bundle >/dev/null 2>&1
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
    steps+=("$(printf '%-44s %-8s %5ss  %s' "$1" "$2" "$3" "$4")")
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
    echo "switches: GG_ONLY_BENCH=$only_bench GG_SKIP_BUILD=${GG_SKIP_BUILD:-0}" \
        "GG_SKIP_CTEST=${GG_SKIP_CTEST:-0} GG_SKIP_PYTEST=${GG_SKIP_PYTEST:-0}" \
        "GG_MPS=${GG_MPS:-1} GG_BENCH_PYTHON=${GG_BENCH_PYTHON:-1}" \
        "GG_BENCH_FUSE=${GG_BENCH_FUSE:-1} GG_BENCH_KERNELS=${GG_BENCH_KERNELS:-1}" \
        "budget=${budget}s build=$build"
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
elif [ "$only_bench" = 1 ] && [ -x "$build/daemon/gfxgraphd" ]; then
    record "configure + build" skipped 0 "GG_ONLY_BENCH=1: $build as it is"
elif step "configure (cuda, sm_90)" 180 "$setup_log" \
    cmake -S . -B "$build" -G Ninja -DGFXGRAPH_GPU=cuda -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo ${nvcc_arg[@]+"${nvcc_arg[@]}"}; then
    # -k 0: build everything that builds, so one broken target does not
    # hide the others
    step "build" 360 "$setup_log" cmake --build "$build" -j "$jobs" -- -k 0
fi
[ -d "$build" ] || record "build" skipped 0 "not configured"

# ---- 3. tests ----------------------------------------------------------------------
ctest_ran=
if [ "$only_bench" = 1 ] || [ "${GG_SKIP_CTEST:-0}" = 1 ]; then
    record "ctest" skipped 0 "GG_ONLY_BENCH=1 or GG_SKIP_CTEST=1"
elif [ -f "$build/CTestTestfile.cmake" ]; then
    step "ctest -L gpu" 240 "$OUT/ctest-gpu.log" \
        ctest --test-dir "$build" -L gpu -V --output-on-failure --timeout 220
    ctest_ran=1
    if [ "${GG_SKIP_REST:-0}" = 1 ]; then
        record "ctest -LE gpu (rest of the suite)" skipped 0 "GG_SKIP_REST=1"
    else
        step "ctest -LE gpu (rest of the suite)" 180 "$OUT/ctest-rest.log" \
            ctest --test-dir "$build" -LE gpu --output-on-failure -j "$jobs" --timeout 170
    fi
else
    record "ctest" skipped 0 "no build tree"
fi
# the torch tests (exit 77: no python3, torch or CUDA device here)
if [ "$only_bench" = 1 ] || [ "${GG_SKIP_PYTEST:-0}" = 1 ]; then
    record "python torch tests" skipped 0 "GG_ONLY_BENCH=1 or GG_SKIP_PYTEST=1"
elif [ -x "$build/daemon/gfxgraphd" ]; then
    echo "#### tests/gpu/python/run.sh" >>"$OUT/ctest-gpu.log"
    step "python torch tests (gpu/python/run.sh)" "${GG_CAP_PYTEST:-240}" "$OUT/ctest-gpu.log" \
        bash tests/gpu/python/run.sh "$build"
fi

# ---- 4. in-process bench ----------------------------------------------------------
inproc=$build/bench/bench_chain_inproc
inproc_log=$tmp/inproc.log
: >"$inproc_log"
if [ -x "$inproc" ]; then
    step "bench_chain_inproc" 90 "$inproc_log" \
        "$inproc" --iters 2000 --warmup 200 --floor --json "$res/bench-chain-inproc.json"
    { echo "#### bench_chain_inproc"; cat "$inproc_log"; } >>"$bench_log"
else
    record "bench_chain_inproc" skipped 0 "not built"
fi

# ---- 5. the daemons, bench_replay and bench_fastpath -------------------------------
daemon=$build/daemon/gfxgraphd
breplay=$build/bench/bench_replay
ctl=$build/client/gfxgraphctl
backend=${GG_DAEMON_BACKEND:-hip}
memory=gpu
[ "$backend" = hip ] || memory=shm

# Daemons live in slots (a, b): two can be up at once, each with its own
# socket ($tmp/gd-SLOT.sock), log and label.
declare -A dlabel=()
gd_sock() { echo "$tmp/gd-$1.sock"; }

gd_stop() { # SLOT
    local p=${dpid[$1]:-}
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
        kill -TERM "$p" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
    fi
    [ -n "$p" ] && wait "$p" 2>/dev/null
    unset "dpid[$1]"
}

# gd_start SLOT LABEL [KEY=VALUE...]: gfxgraphd --backend $backend with a
# clean GFXGRAPH*/HGB_* environment plus the given variables, up when it
# answers health
gd_start() {
    local slot=$1 label=$2
    shift 2
    local sock log
    sock=$(gd_sock "$slot")
    log=$tmp/gd-$slot.log
    gd_stop "$slot"
    rm -f "$sock"
    : >"$log"
    dlabel[$slot]=$label
    (
        for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
        export GFXGRAPH_CONFIG=/dev/null
        for kv in "$@"; do export "${kv?}"; done
        exec "$daemon" --backend "$backend" --socket "$sock" --log-target stderr
    ) >>"$log" 2>&1 &
    dpid[$slot]=$!
    local p=$! t0
    t0=$(date +%s)
    while [ $(($(date +%s) - t0)) -lt 60 ]; do
        if ! kill -0 "$p" 2>/dev/null; then
            wait "$p" 2>/dev/null
            local rc=$?
            unset "dpid[$slot]"
            {
                echo "#### gfxgraphd --backend $backend ($label) did not start (exit $rc):"
                cat "$log"
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
    gd_stop "$slot"
    { echo "#### gfxgraphd ($label): no healthy answer in 60 s:"; cat "$log"; } >>"$bench_log"
    return 1
}

# gd_end SLOT: its stats into the log, stop it, its log into the log
gd_end() {
    [ -n "${dpid[$1]:-}" ] || return 0
    local label=${dlabel[$1]:-$1}
    {
        echo "#### gfxgraphctl stats ($label)"
        "$ctl" --socket "$(gd_sock "$1")" --timeout 10 stats 2>&1
    } >>"$bench_log"
    gd_stop "$1"
    { echo "#### gfxgraphd log ($label)"; cat "$tmp/gd-$1.log"; } >>"$bench_log"
}

# An MPS control daemon of this run's own (private pipe and log directories,
# as bench/run_python.sh GG_MPS=1), for the figures where a daemon and its
# clients share the GPU: started after the tests, stopped (and waited for)
# before the optional benches, which start their own.
mps_on() { [ "${GG_MPS:-1}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; }
mps_start() {
    mps_on || {
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
    # gone when its control pipe no longer answers (the next MPS daemon,
    # run_python.sh's, must not meet this one's server)
    local t0
    t0=$(date +%s)
    while [ $(($(date +%s) - t0)) -lt 30 ] &&
        echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; do
        sleep 0.2
    done
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    mps=
}

runs=()
replay_table=$tmp/replay-table.txt
: >"$replay_table"

# replay_rows STEP-LOG: the RESULT rows of one bench_replay run and the lines
# that name each row's interleaved partner, its ratio and its work
replay_rows() {
    sed -n 's/^RESULT /  /p' "$1"
    awk '/^[^ ][^ ]*:$/ { l = substr($0, 1, length($0) - 1) }
         /^  against / { sub(/^  /, ""); print "      " l " " $0 }' "$1"
}

# bench_single LABEL ARGS...: one bench_replay run against slot a
bench_single() {
    local label=$1
    shift
    local log=$tmp/br-$label.log
    : >"$log"
    step "bench_replay $label" 90 "$log" \
        "$breplay" --socket "$(gd_sock a)" --memory "$memory" --warmup 200 --label "$label" \
        --commit "$commit" --json "$res/run-$label.json" "$@"
    { echo "#### bench_replay $label"; cat "$log"; } >>"$bench_log"
    replay_rows "$log" >>"$replay_table"
    [ -s "$res/run-$label.json" ] && runs+=("$label")
}

# replay_pair WHAT LABEL-A "ENV-A" LABEL-B "ENV-B": two daemons up at once
# (slots a and b), chain64 on both from the same client process in 10
# alternating blocks (bench_replay --socket-b), one row each
replay_pair() {
    local what=$1 la=$2 ea=$3 lb=$4 eb=$5
    echo "  [$what]" >>"$replay_table"
    # shellcheck disable=SC2086  # (ENV-A/ENV-B: KEY=VALUE words, or none)
    if gd_start a "${ea:-default}" $ea && gd_start b "${eb:-default}" $eb; then
        local log=$tmp/br-$la.log
        : >"$log"
        step "bench_replay ${la#chain64-} | ${lb#chain64-}" 90 "$log" \
            "$breplay" --socket "$(gd_sock a)" --socket-b "$(gd_sock b)" --memory "$memory" \
            --program chain64 --clients 1 --iters 2000 --warmup 200 --blocks 10 \
            --label "$la" --label-b "$lb" --commit "$commit" \
            --json "$res/run-$la.json" --json-b "$res/run-$lb.json"
        { echo "#### bench_replay $la | $lb (interleaved)"; cat "$log"; } >>"$bench_log"
        replay_rows "$log" >>"$replay_table"
        [ -s "$res/run-$la.json" ] && runs+=("$la")
        [ -s "$res/run-$lb.json" ] && runs+=("$lb")
    else
        record "bench_replay ${la#chain64-} | ${lb#chain64-}" skipped 0 "no daemon"
        echo "    (no run: a daemon did not start)" >>"$replay_table"
    fi
    gd_end a
    gd_end b
}

if [ -x "$daemon" ] && [ -x "$breplay" ] && [ -x "$ctl" ]; then
    [ "$backend" = hip ] && mps_start
    replay_pair "fused graph vs fused eager: equal work (2 launches either way)" \
        chain64-fused-graph "" chain64-fused-eager "GFXGRAPH=0"
    replay_pair "what the graph saves: 64 launches vs one graph of 64 kernels, equal work" \
        chain64-unfused-graph "GFXGRAPH_FUSE=0" chain64-unfused-eager "GFXGRAPH=0 GFXGRAPH_FUSE=0"
    replay_pair "fused vs unfused graph: DIFFERING work (2 kernels vs 64), what fusion saves" \
        chain64-fuse-on-graph "" chain64-fuse-off-graph "GFXGRAPH_FUSE=0"
    replay_pair "completion by polling vs host functions: equal work" \
        chain64-fused-poll "" chain64-fused-hostfn "GFXGRAPH_COMPLETION=hostfn"
    # one daemon's fixed cost per request, and 16 client processes at once
    echo "  [onenode, one default daemon: single rows, not interleaved]" >>"$replay_table"
    if gd_start a "default, onenode"; then
        bench_single onenode-c1 --program onenode --clients 1 --iters 2000
        bench_single onenode-c16 --program onenode --clients 16 --iters 1000
        gd_end a
    else
        record "bench_replay onenode-c1, onenode-c16" skipped 0 "no daemon"
    fi
    # the fast path against the socket and an in-process graph launch, and
    # 16 client processes on each path (bench/README.md); the unfused daemon
    # of its chain64_unfused row beside the default one
    fpbench=$build/bench/bench_fastpath
    if [ -x "$fpbench" ]; then
        if gd_start a "default, fastpath"; then
            unfused=()
            gd_start b "GFXGRAPH_FUSE=0, fastpath" GFXGRAPH_FUSE=0 &&
                unfused=(--socket-unfused "$(gd_sock b)")
            echo "#### bench_fastpath" >>"$bench_log"
            step "bench_fastpath" 150 "$bench_log" \
                "$fpbench" --socket "$(gd_sock a)" ${unfused[@]+"${unfused[@]}"} --iters 2000 \
                --warmup 200 --clients 16 --tput-iters 2000 --commit "$commit" \
                --json "$res/bench-fastpath.json"
            gd_end b
            gd_end a
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
    # the README's demo, against the GPU: device memory registered by pointer
    demo=$build/client/gfxgraph-demo
    if [ -x "$demo" ] && gd_start a "default, demo"; then
        echo "#### gfxgraph-demo" >>"$bench_log"
        step "gfxgraph-demo (chain + MLP, batch 1..40)" 90 "$bench_log" "$demo" "$(gd_sock a)"
        { echo "#### gfxgraphctl health (demo)"; "$ctl" --socket "$(gd_sock a)" health 2>&1; } >>"$bench_log"
        gd_end a
    fi
    mps_stop
else
    record "bench_replay" skipped 0 "gfxgraphd, bench_replay or gfxgraphctl not built"
fi

# every bench_replay row in one file
if [ ${#runs[@]} -gt 0 ]; then
    {
        printf '{\n  "suite": "device-replay",\n  "script": "tests/gpu/run-on-device.sh",\n  "runs": [\n'
        first=1
        for l in "${runs[@]}"; do
            [ $first -eq 1 ] || printf '    ,\n'
            first=0
            sed 's/^/    /' "$res/run-$l.json"
        done
        printf '  ]\n}\n'
    } >"$res/bench-replay.json"
    for l in "${runs[@]}"; do rm -f "$res/run-$l.json"; done
fi

# ---- 6. optional benches: the Python package, fusion, the kernels -----------------
# Each with its output in a log of its own (then into bench.log), its JSON
# into the tarball, and a cap of its own within the budget.
opt_log() { echo "$tmp/opt-$1.log"; }
opt_done() { # NAME: the step's log into bench.log
    { echo "#### $1"; cat "$(opt_log "$1")"; } >>"$bench_log"
}
py=${PYTHON:-python3}
if [ "${GG_BENCH_PYTHON:-1}" = 1 ]; then
    # under an MPS daemon of run_python.sh's own (GG_MPS=1) where there is one
    pymps=0
    mps_on && pymps=1
    : >"$(opt_log bench_python)"
    step "bench_python (MPS: $([ $pymps = 1 ] && echo on || echo off))" "${GG_CAP_PYTHON:-120}" \
        "$(opt_log bench_python)" env GG_MPS=$pymps PYTHON="$py" GFXGRAPH_GIT_COMMIT="$commit" \
        bash bench/run_python.sh "$build" "$res/bench-python.json"
    opt_done bench_python
else
    record "bench_python" skipped 0 "GG_BENCH_PYTHON=0"
fi
if [ "${GG_BENCH_FUSE:-1}" = 1 ]; then
    : >"$(opt_log bench_fuse)"
    # shellcheck disable=SC2086  # (extra arguments, words)
    step "bench_fuse" "${GG_CAP_FUSE:-90}" "$(opt_log bench_fuse)" \
        env PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 \
        "$py" bench/bench_fuse.py --build "$build" --json "$res/bench-fuse.json" \
        --commit "$commit" ${GG_BENCH_FUSE_ARGS:-}
    opt_done bench_fuse
else
    record "bench_fuse" skipped 0 "GG_BENCH_FUSE=0"
fi
if [ "${GG_BENCH_KERNELS:-1}" = 1 ]; then
    # its kernel tests only where ctest -L gpu did not already run them
    kt=1
    [ -n "$ctest_ran" ] && kt=0
    : >"$(opt_log bench_kernels)"
    mkdir -p "$tmp/kernels"
    # shellcheck disable=SC2086  # (extra arguments, words)
    step "bench_kernels (run_kernels.sh)" "${GG_CAP_KERNELS:-120}" "$(opt_log bench_kernels)" \
        env GG_KERNEL_TESTS=$kt PYTHON="$py" GFXGRAPH_GIT_COMMIT="$commit" \
        bash bench/run_kernels.sh "$build" "$tmp/kernels" ${GG_BENCH_KERNELS_ARGS:-}
    for f in "$tmp"/kernels/kernels-*.json; do
        [ -f "$f" ] && cp "$f" "$res/bench-kernels.json"
    done
    for f in "$tmp"/kernels/*.log; do
        [ -f "$f" ] && { echo "#### run_kernels.sh: $(basename "$f")"; cat "$f"; } >>"$(opt_log bench_kernels)"
    done
    opt_done bench_kernels
else
    record "bench_kernels" skipped 0 "GG_BENCH_KERNELS=0"
fi
bundle

# ---- 7. summary -----------------------------------------------------------------------
{
    echo "gfxgraph device run: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), commit ${commit:-unknown}"
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
    fi
    echo "total: $(elapsed) s (budget $budget s)"
    echo "MPS for the daemon benches: $(grep -q '^MPS control daemon *0 ' <(printf '%s\n' "${steps[@]}") && echo on || echo off)"
    echo
    printf '%-44s %-8s %6s  %s\n' step status time note
    for s in "${steps[@]}"; do echo "$s"; done
    echo
    echo "tests:"
    [ -f "$OUT/ctest-gpu.log" ] || [ -f "$OUT/ctest-rest.log" ] || echo "  (not run)"
    for f in "$OUT/ctest-gpu.log" "$OUT/ctest-rest.log"; do
        [ -f "$f" ] || continue
        printf '  %-16s %s\n' "$(basename "$f" .log):" \
            "$(grep -E 'tests passed|No tests were found' "$f" | tail -1 | grep . || echo "(ctest not run)")"
        grep -E '^[[:space:]]*[0-9]+ - .*\((Failed|Skipped|Timeout|Not Run|SEGFAULT|Subprocess)' "$f" \
            | sed 's/^[[:space:]]*/    /'
        # the gpu tests' own verdicts (ctest -V prefixes "N: ")
        [ "$f" = "$OUT/ctest-gpu.log" ] &&
            grep -E '^[0-9]+: ([0-9]+ passed, [0-9]+ failed|SKIP)' "$f" | sed 's/^/    test /'
        # the torch tests (tests/gpu/python/run.sh), after ctest in that log
        [ "$f" = "$OUT/ctest-gpu.log" ] &&
            sed -n '/^#### tests\/gpu\/python\/run.sh/,$p' "$f" |
            grep -E '^=== |FAILED|^run\.sh: |^SKIP' | sed 's/^/  torch: /'
    done
    echo
    echo "bench_chain_inproc (64-node chain, in process, eager and graph in interleaved blocks, us):"
    if grep -qE '^(eager|graph) ' "$inproc_log"; then
        grep -E '^mode |^(eager|graph) |^graph nodes' "$inproc_log" | sed 's/^/  /'
    else
        { grep -E '^SKIP' "$inproc_log" || echo "(no result)"; } | head -1 | sed 's/^/  /'
    fi
    echo
    echo "bench_replay through gfxgraphd --backend $backend (round trip per replay, us; kern: the"
    echo "daemon's launches per replay; each [pair]: two daemons up at once, timed by the same"
    echo "client in 10 alternating blocks; \"against\": this row's p50 and p99 over its partner's):"
    printf '  %-22s %-8s %-4s %7s %6s %9s %9s %9s %9s %9s %10s %7s %7s %6s\n' label program mem \
        clients iters p50 p90 p99 mean dev_us replays/s graph eager kern
    if [ -s "$replay_table" ]; then
        cat "$replay_table"
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
    echo
    echo "bench_python (PyTorch's graph vs the same capture through the daemon, per step, us;"
    echo "then the package's own cost per replay):"
    f=$(opt_log bench_python)
    if [ -f "$f" ] && grep -q 'gfxgraph p50\|^replay ' "$f"; then
        grep -E '^bench_python:|torch p50 .*gfxgraph p50|^ +work: |^replay ' "$f" | sed 's/^/  /'
    else
        { grep -E '^(SKIP|FAIL)' "$f" 2>/dev/null || echo "(no run)"; } | head -3 | sed 's/^/  /'
    fi
    echo
    echo "bench_fuse (device time per replay: PyTorch's graph vs the daemon fused and unfused, us):"
    f=$(opt_log bench_fuse)
    if [ -f "$f" ] && grep -q '| fused' "$f"; then
        grep -E '\| fused|^\(work differs' "$f" | sed 's/^/  /'
    else
        { grep -E '^(SKIP|FAIL)' "$f" 2>/dev/null || echo "(no run)"; } | head -3 | sed 's/^/  /'
    fi
    echo
    echo "bench_kernels (this project's kernels vs PyTorch's, alternating rounds, us):"
    f=$(opt_log bench_kernels)
    if [ -f "$f" ] && grep -q '^copy ceiling' "$f"; then
        sed -n '/^copy ceiling/,/^results: /p' "$f" | sed 's/^/  /'
    else
        { grep -E '^(SKIP|FAIL)|^test_gpu_[a-z]*: exit' "$f" 2>/dev/null || echo "(no run)"; } |
            head -5 | sed 's/^/  /'
    fi
    echo
    echo "results.tgz:"
    tar -tzf "$OUT/results.tgz" 2>/dev/null | grep -v '/$' | sed 's/^/  /'
} >"$summary"
echo
cat "$summary"
echo
echo "files in $OUT:"
# shellcheck disable=SC2012
ls -l "$OUT" | sed 1d
exit $failed
