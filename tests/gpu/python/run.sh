#!/bin/bash
# SPDX-License-Identifier: MIT
# Run the torch tests of the Python package on a GPU machine:
#
#   tests/gpu/python/run.sh [BUILD_DIR]      (default: build)
#
# Starts BUILD_DIR/daemon/gfxgraphd --backend hip on a temporary socket,
# points the tests at it (GFXGRAPH_SOCKET) and at BUILD_DIR's
# libgfxgraph-client (GFXGRAPH_LIB; the package from the source tree's
# python/), runs every tests/gpu/python/test_torch_*.py, stops the daemon
# (it must exit 0).  Then test_fault_detection.py against a second daemon,
# started with GFXGRAPH_FAULT=$GG_FAULT (default launch: every graph launch
# fails and the replay is answered eagerly), which runs each torch test there
# and requires it to fail on its daemon-counter checks.  Exit: 0 all passed, 1 a test failed or the daemon did
# not start or stop cleanly, 77 nothing could run (no python3, no torch, no
# CUDA device).  Needs a GPU build (cmake -DGFXGRAPH_GPU=cuda or hip).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd) || exit 1
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "SKIP: $py not found"; exit 77; }
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: torch with a CUDA device is not available to $py"; exit 77; }
lib=$build/client/libgfxgraph-client.so.0
[ -e "$lib" ] || { echo "FAIL: $lib not found (build first)"; exit 1; }
tmp=$(mktemp -d /tmp/ggpytorch.XXXXXX)
sock=$tmp/gfxgraphd.sock
fsock=$tmp/gfxgraphd-fault.sock
fault=${GG_FAULT:-launch}
pid='' fpid=''
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    [ -n "$fpid" ] && kill -KILL "$fpid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# wait_up SOCKET PID LOG: the socket appears (or the daemon exits)
wait_up() {
    for _ in $(seq 300); do
        [ -S "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    echo "FAIL: gfxgraphd --backend hip did not come up ($1):"; cat "$3"
    return 1
}
(
    for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
    export GFXGRAPH_CONFIG=/dev/null
    exec "$build/daemon/gfxgraphd" --backend hip --socket "$sock" --log-target stderr
) 2>"$tmp/daemon.log" &
pid=$!
wait_up "$sock" "$pid" "$tmp/daemon.log" || exit 1
export GFXGRAPH_SOCKET=$sock GFXGRAPH_LIB=$lib PYTHONPATH=$src/python:$here${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
fails=0 ran=0
for t in "$here"/test_torch_*.py; do
    echo "=== $(basename "$t")"
    timeout 600 "$py" "$t"
    rc=$?
    case $rc in
        0) ran=$((ran + 1)) ;;
        77) echo "--- skipped" ;;
        *) echo "--- $(basename "$t") FAILED (exit $rc)"; fails=$((fails + 1)); ran=$((ran + 1)) ;;
    esac
done
# the same tests against a daemon with a fault injected: they must fail
(
    for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
    export GFXGRAPH_CONFIG=/dev/null GFXGRAPH_FAULT=$fault
    exec "$build/daemon/gfxgraphd" --backend hip --socket "$fsock" --log-target stderr
) 2>"$tmp/daemon-fault.log" &
fpid=$!
if wait_up "$fsock" "$fpid" "$tmp/daemon-fault.log"; then
    echo "=== test_fault_detection.py (GFXGRAPH_FAULT=$fault)"
    GFXGRAPH_FAULT_SOCKET=$fsock GFXGRAPH_FAULT_KIND=$fault timeout 900 "$py" \
        "$here/test_fault_detection.py"
    rc=$?
    case $rc in
        0) ran=$((ran + 1)) ;;
        77) echo "--- skipped" ;;
        *) echo "--- test_fault_detection.py FAILED (exit $rc)"; fails=$((fails + 1)); ran=$((ran + 1)) ;;
    esac
    kill -TERM "$fpid"
    wait "$fpid"
    fpid=
else
    fails=$((fails + 1))
fi
kill -TERM "$pid"
wait "$pid"
drc=$?
pid=
if [ $drc -ne 0 ]; then
    echo "FAIL: gfxgraphd exited $drc on SIGTERM"; cat "$tmp/daemon.log"; fails=$((fails + 1))
fi
[ $fails -ne 0 ] && { echo "--- daemon log:"; tail -50 "$tmp/daemon.log"; }
echo "run.sh: $ran test files ran, $fails failed"
[ $fails -eq 0 ] || exit 1
[ $ran -gt 0 ] || exit 77
exit 0
