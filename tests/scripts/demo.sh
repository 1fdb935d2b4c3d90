#!/bin/bash
# SPDX-License-Identifier: MIT
# make demo: start gfxgraphd on a temporary socket, run the demo client
# against it, show gfxgraphctl stats and health, stop the daemon.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d /tmp/gfxgraph-demo.XXXXXX)
sock=$dir/gfxgraphd.sock
log=$dir/gfxgraphd.log
cleanup() {
    [ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
"$build/daemon/gfxgraphd" --socket "$sock" --backend "${GFXGRAPH_BACKEND:-auto}" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1200); do [ -S "$sock" ] && break; sleep 0.05; done   # up to 60 s
[ -S "$sock" ] || { echo "gfxgraphd did not start:"; cat "$log"; exit 1; }
echo "== gfxgraphd started (pid $pid) on $sock"
sed 's/^/   daemon: /' "$log"
echo
echo "== demo: decode-like chain and MLP, batch 1..40, checked against a reference"
# --keep: the programs' graphs stay parked in the cache when the demo exits,
# so the stats below show them, and a second run adopts them warm
"$build/client/gfxgraph-demo" --keep "$sock"
echo
echo "== demo again: a restarted client adopts the parked graphs (updated in place, no new instantiate)"
"$build/client/gfxgraph-demo" --keep "$sock"
echo
echo "== gfxgraphctl stats"
backend=$(sed -n 's/.*backend \([a-z]*\)$/\1/p' "$log" | tail -n 1)
if [ "$backend" = cpu ]; then
    cat <<'EOF'
   (backend cpu: replay times are those of the reference kernels on the CPU,
    a correctness baseline, not GPU speed.  AVG_US averages every replay of
    a bucket since the daemon started, and each demo run's first replay of a
    program is cold (the daemon touches that run's new buffers for the first
    time), so the smallest bucket's average carries a one-off cost; the
    demo's medians above leave it out.)
EOF
fi
"$build/client/gfxgraphctl" stats --socket "$sock"
echo
echo "== gfxgraphctl health"
"$build/client/gfxgraphctl" health --socket "$sock"
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
echo
echo "== gfxgraphd stopped (exit $rc)"
