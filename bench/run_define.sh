#!/usr/bin/env bash
# Does a large program.define hold up other clients?  Starts each given
# gfxgraphd (cpu backend) on a temporary socket and runs bench_define
# against it (a 102,400-node define, 5 times, while another client sends
# buffer.list back to back); writes every run to one JSON file and prints
# the RESULT rows.
#
#   bench/run_define.sh BUILD_DIR [OUT_JSON] [LABEL=DAEMON[@COMMIT]]...
#
# BUILD_DIR: a built tree with bench_define (and gfxgraphd, used when no
# LABEL=DAEMON is given).  LABEL=DAEMON: another daemon binary to measure
# (e.g. before=/tmp/old/build/daemon/gfxgraphd@b1e2007), its commit after
# '@'.  OUT_JSON: default bench/results/cpu-define.json.  Exit status: 0,
# or 1 when a step failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 64
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "run_define.sh: no build dir '$1'" >&2; exit 1; }
out=${2:-$root/bench/results/cpu-define.json}
shift $(( $# >= 2 ? 2 : 1 ))
bench=$build/bench/bench_define
[ -x "$bench" ] || { echo "run_define.sh: $bench is missing: build it first" >&2; exit 1; }
head=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
daemons=("$@")
[ ${#daemons[@]} -gt 0 ] || daemons=("after=$build/daemon/gfxgraphd@$head")

tmp=$(mktemp -d /tmp/gg-bench-define.XXXXXX)
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

runs=()
status=0
for spec in "${daemons[@]}"; do
    label=${spec%%=*}
    rest=${spec#*=}
    daemon=${rest%@*}
    commit=$head
    [ "$rest" != "$daemon" ] && commit=${rest##*@}
    [ -x "$daemon" ] || { echo "run_define.sh: $daemon is not executable" >&2; exit 1; }
    sock=$tmp/$label.sock
    (
        # the defaults, whatever this shell has set
        for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
        export GFXGRAPH_CONFIG=/dev/null
        exec "$daemon" --backend cpu --socket "$sock" --log-target stderr
    ) >"$tmp/$label.log" 2>&1 &
    dpid=$!
    for _ in $(seq 200); do
        [ -S "$sock" ] && break
        kill -0 "$dpid" 2>/dev/null || break
        sleep 0.05
    done
    if ! [ -S "$sock" ]; then
        echo "run_define.sh: $daemon did not start; its log:" >&2
        cat "$tmp/$label.log" >&2
        exit 1
    fi
    j=$tmp/$label.json
    if "$bench" --socket "$sock" --label "$label" --commit "$commit" --json "$j"; then
        runs+=("$j")
    else
        status=1
    fi
    kill -TERM "$dpid" 2>/dev/null
    wait "$dpid" 2>/dev/null
    dpid=
done
{
    echo "["
    for i in "${!runs[@]}"; do
        [ "$i" -gt 0 ] && echo ","
        cat "${runs[$i]}"
    done
    echo "]"
} >"$out"
echo "run_define.sh: wrote $out"
exit $status
