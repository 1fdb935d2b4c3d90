#!/bin/bash
# SPDX-License-Identifier: MIT
# Per-token decode latency, gfxgraphd vs a torch.cuda.CUDAGraph of the same
# step, on a GPU machine (bench/bench_decode.py says what is measured):
#
#   bench/run_decode.sh [BUILD_DIR] [OUT.json] [bench_decode.py args...]
#
# BUILD_DIR (default build): a GPU build (cmake -DGFXGRAPH_GPU=cuda or hip);
# its daemon/gfxgraphd --backend hip is started on a temporary socket and the
# bench uses its libgfxgraph-client (GFXGRAPH_LIB).  OUT (default
# bench/results/decode-<gpu>-<date>.json).  Exit: 0 done, 1 failed, 77 no
# torch/CUDA.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd) || exit 1
shift || true
py=${PYTHON:-python3}
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: torch with a CUDA device is not available to $py"; exit 77; }
gpu=$("$py" -c 'import torch; print(torch.cuda.get_device_name(0).split()[-1].lower())' 2>/dev/null)
out=${1:-$here/results/decode-${gpu:-gpu}-$(date -u +%Y-%m-%d).json}
shift || true
lib=$build/client/libgfxgraph-client.so.0
[ -e "$lib" ] || { echo "FAIL: $lib not found (build first)"; exit 1; }
tmp=$(mktemp -d /tmp/ggdecodebench.XXXXXX)
sock=$tmp/gfxgraphd.sock
"$build/daemon/gfxgraphd" --backend hip --socket "$sock" --log-target stderr 2>"$tmp/daemon.log" &
pid=$!
cleanup() { kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
for _ in $(seq 300); do
    [ -S "$sock" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
[ -S "$sock" ] || { echo "FAIL: gfxgraphd did not come up:"; cat "$tmp/daemon.log"; exit 1; }
export GFXGRAPH_SOCKET=$sock GFXGRAPH_LIB=$lib PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
"$py" "$here/bench_decode.py" --out "$out" "$@"
rc=$?
kill -TERM "$pid"
wait "$pid" || { echo "FAIL: gfxgraphd did not exit 0"; tail -30 "$tmp/daemon.log"; rc=1; }
[ $rc -ne 0 ] && [ $rc -ne 77 ] && { echo "--- daemon log:"; tail -30 "$tmp/daemon.log"; }
exit $rc
