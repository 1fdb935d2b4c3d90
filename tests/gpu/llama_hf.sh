#!/bin/bash
# SPDX-License-Identifier: MIT
# A random Hugging Face Llama decoded through gfxgraphd on a GPU machine:
#
#   tests/gpu/llama_hf.sh [BUILD_DIR]      (default: build)
#
# Starts BUILD_DIR/daemon/gfxgraphd --backend hip on a temporary socket,
# points tests/gpu/test_llama_hf.py at it (GFXGRAPH_SOCKET) and at BUILD_DIR's
# libgfxgraph-client (GFXGRAPH_LIB; the package from the source tree's
# python/), runs it, stops the daemon (it must exit 0).  Needs torch with
# CUDA and transformers, and a GPU build (cmake -DGFXGRAPH_GPU=cuda or hip).
# Exit: 0 passed, 1 failed (or the daemon did not start or stop cleanly),
# 77 skipped (no python3, torch, CUDA device or transformers).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd) || exit 1
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "SKIP: $py not found"; exit 77; }
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: torch with a CUDA device is not available to $py"; exit 77; }
"$py" -c 'import transformers' 2>/dev/null ||
    { echo "SKIP: transformers is not available to $py"; exit 77; }
lib=$build/client/libgfxgraph-client.so.0
[ -e "$lib" ] || { echo "FAIL: $lib not found (build first)"; exit 1; }
[ -x "$build/daemon/gfxgraphd" ] || { echo "FAIL: $build/daemon/gfxgraphd not found"; exit 1; }
tmp=$(mktemp -d /tmp/ggllamahf.XXXXXX)
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
if ! [ -S "$sock" ]; then
    echo "FAIL: gfxgraphd --backend hip did not come up:"; cat "$tmp/daemon.log"; exit 1
fi
export GFXGRAPH_SOCKET=$sock GFXGRAPH_LIB=$lib PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
timeout 600 "$py" "$here/test_llama_hf.py"
rc=$?
kill -TERM "$pid"
wait "$pid"
drc=$?
if [ $drc -ne 0 ]; then
    echo "FAIL: gfxgraphd exited $drc on SIGTERM"; tail -50 "$tmp/daemon.log"; exit 1
fi
case $rc in
    0) echo "llama_hf.sh: passed" ;;
    77) echo "llama_hf.sh: skipped" ;;
    *) echo "--- daemon log:"; tail -50 "$tmp/daemon.log"; echo "llama_hf.sh: FAILED (exit $rc)"; rc=1 ;;
esac
exit $rc
