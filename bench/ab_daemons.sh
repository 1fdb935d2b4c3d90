# SPDX-License-Identifier: MIT
# Sourced by the run_*.sh scripts that measure one bench against several
# gfxgraphd binaries in one run (run_define.sh, run_scratch.sh):
#
#   ab_main NAME BENCH DEFAULT_OUT "$@"
#
# with the script's own arguments BUILD_DIR [OUT_JSON] [LABEL=DAEMON[@COMMIT]]...
# Starts every daemon (cpu backend, a clean GFXGRAPH environment, no config
# file: the defaults) on a temporary socket, all at once, then in each of
# $GG_AB_ROUNDS rounds (default 1; labels get -rN when more) calls the
# script's ab_bench LABEL SOCK COMMIT DIR for each daemon in turn (the order
# reversed every other round, so that the daemons' runs alternate), which
# runs BUILD_DIR/bench/BENCH against it and appends each JSON file it wrote
# to the array `runs` (0, or non-zero when a run failed).  Then writes every
# run to OUT_JSON as one JSON array.
# Without LABEL=DAEMON: "after=BUILD_DIR/daemon/gfxgraphd@<HEAD>".

ab_pids=()
# shellcheck disable=SC2317  # (called by the trap)
ab_cleanup() {
    local p
    for p in ${ab_pids[@]+"${ab_pids[@]}"}; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in ${ab_pids[@]+"${ab_pids[@]}"}; do
        wait "$p" 2>/dev/null
    done
    rm -rf "$ab_tmp"
}

ab_main() {
    local name=$1 benchname=$2 default_out=$3
    shift 3
    local root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    build=$(cd "$1" 2>/dev/null && pwd) || { echo "$name: no build dir '$1'" >&2; exit 1; }
    local out=${2:-$default_out}
    shift $(( $# >= 2 ? 2 : 1 ))
    bench=$build/bench/$benchname
    [ -x "$bench" ] || { echo "$name: $bench is missing: build it first" >&2; exit 1; }
    local head
    head=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
    local daemons=("$@")
    [ ${#daemons[@]} -gt 0 ] || daemons=("after=$build/daemon/gfxgraphd@$head")
    local rounds=${GG_AB_ROUNDS:-1}
    ab_tmp=$(mktemp -d "/tmp/gg-${benchname}.XXXXXX")
    trap ab_cleanup EXIT
    runs=()
    local status=0 spec label rest daemon commit sock i r
    local labels=() commits=() socks=()
    # every daemon up at once, so that their runs can alternate
    for spec in "${daemons[@]}"; do
        label=${spec%%=*}
        rest=${spec#*=}
        daemon=${rest%@*}
        commit=$head
        [ "$rest" != "$daemon" ] && commit=${rest##*@}
        [ -x "$daemon" ] || { echo "$name: $daemon is not executable" >&2; exit 1; }
        sock=$ab_tmp/$label.sock
        (
            # the defaults, whatever this shell has set
            for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
            export GFXGRAPH_CONFIG=/dev/null
            exec "$daemon" --backend cpu --socket "$sock" --log-target stderr
        ) >"$ab_tmp/$label.log" 2>&1 &
        local pid=$!
        ab_pids+=("$pid")
        for _ in $(seq 200); do
            [ -S "$sock" ] && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        if ! [ -S "$sock" ]; then
            echo "$name: $daemon did not start; its log:" >&2
            cat "$ab_tmp/$label.log" >&2
            exit 1
        fi
        labels+=("$label")
        commits+=("$commit")
        socks+=("$sock")
    done
    # GG_AB_ROUNDS rounds, the daemons in turn in each (the first of a round
    # alternating), so that drift of a busy machine falls on every daemon
    for r in $(seq "$rounds"); do
        local order=("${!labels[@]}")
        if [ $((r % 2)) -eq 0 ]; then
            local rev=()
            for ((i = ${#order[@]} - 1; i >= 0; i--)); do rev+=("${order[$i]}"); done
            order=("${rev[@]}")
        fi
        for i in "${order[@]}"; do
            label=${labels[$i]}
            [ "$rounds" -gt 1 ] && label=$label-r$r
            ab_bench "$label" "${socks[$i]}" "${commits[$i]}" "$ab_tmp" || status=1
        done
    done
    {
        echo "["
        local i
        for i in "${!runs[@]}"; do
            [ "$i" -gt 0 ] && echo ","
            cat "${runs[$i]}"
        done
        echo "]"
    } >"$out"
    echo "$name: wrote $out"
    exit $status
}
