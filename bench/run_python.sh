#!/bin/bash
# SPDX-License-Identifier: MIT
# The Python package's figures on a GPU machine:
#
#   bench/run_python.sh BUILD_DIR [JSON]     (JSON default: bench/results/h100-python.json)
#
# GG_MPS=1: first start an NVIDIA MPS control daemon of this run's own
# (private pipe and log directories, stopped at the end), so that the
# daemon and the clients share one GPU context instead of being
# time-sliced between processes; the JSON's label says "mps".
#
# Starts BUILD_DIR/daemon/gfxgraphd --backend hip on a temporary socket (as
# tests/gpu/python/run.sh does), runs bench/bench_python.py against it with
# BUILD_DIR's libgfxgraph-client (GFXGRAPH_LIB) and the package from the
# source tree, writes JSON, stops the daemon (it must exit 0).  The git
# commit comes from $GFXGRAPH_GIT_COMMIT, a COMMIT file at the source root
# (a snapshot made with git archive), or git.  Exit: the bench's (0 measured,
# 1 a workload not routed or a replay failed), 1 when the daemon did not
# start or stop cleanly, 77 nothing could run (no python3 / torch / CUDA).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd) || exit 1
json=${2:-$src/bench/results/h100-python.json}
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "SKIP: $py not found"; exit 77; }
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: torch with a CUDA device is not available to $py"; exit 77; }
lib=$build/client/libgfxgraph-client.so.0
[ -e "$lib" ] || { echo "FAIL: $lib not found (build first)"; exit 1; }
if [ -z "${GFXGRAPH_GIT_COMMIT:-}" ]; then
    if [ -f "$src/COMMIT" ]; then GFXGRAPH_GIT_COMMIT=$(cat "$src/COMMIT")
    else GFXGRAPH_GIT_COMMIT=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown); fi
fi
export GFXGRAPH_GIT_COMMIT
tmp=$(mktemp -d /tmp/ggbenchpy.XXXXXX)
sock=$tmp/gfxgraphd.sock
mps=
if [ "${GG_MPS:-0}" = 1 ]; then
    command -v nvidia-cuda-mps-control >/dev/null ||
        { echo "FAIL: GG_MPS=1 but nvidia-cuda-mps-control is not installed"; rm -rf "$tmp"; exit 1; }
    export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d || { echo "FAIL: the MPS control daemon did not start"; exit 1; }
    mps=1
    BENCH_PYTHON_ARGS="--label mps ${BENCH_PYTHON_ARGS:-}"
fi
"$build/daemon/gfxgraphd" --backend hip --socket "$sock" --log-target stderr 2>"$tmp/daemon.log" &
pid=$!
cleanup() {
    kill -KILL "$pid" 2>/dev/null
    [ -n "$mps" ] && echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 300); do
    [ -S "$sock" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if ! [ -S "$sock" ]; then
    echo "FAIL: gfxgraphd --backend hip did not come up:"; cat "$tmp/daemon.log"; exit 1
fi
export GFXGRAPH_SOCKET=$sock GFXGRAPH_LIB=$lib PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
timeout 240 "$py" "$here/bench_python.py" --socket "$sock" --build "$build" --json "$json" \
    ${BENCH_PYTHON_ARGS:-}
rc=$?
kill -TERM "$pid"
wait "$pid"
drc=$?
if [ $drc -ne 0 ]; then
    echo "FAIL: gfxgraphd exited $drc on SIGTERM"; rc=1
fi
if [ $rc -ne 0 ]; then echo "--- daemon log:"; tail -40 "$tmp/daemon.log"; fi
echo "run_python.sh: bench exit $rc, json $json"
exit $rc
