# Sourced by the run_*.sh scripts that measure one bench against several
# gfxgraphd binaries in one run (run_define.sh, run_scratch.sh):
#
#   ab_main NAME BENCH DEFAULT_OUT "$@"
#
# with the script's own arguments BUILD_DIR [OUT_JSON] [LABEL=DAEMON[@COMMIT]]...
# Starts each daemon (cpu backend, a clean GFXGRAPH environment, no config
# file: the defaults) on a temporary socket in turn and calls the script's
# ab_bench LABEL SOCK COMMIT DIR, which runs BUILD_DIR/bench/BENCH against it
# and appends each JSON file it wrote to the array `runs` (0, or non-zero
# when a run failed).  Then writes every run to OUT_JSON as one JSON array.
# Without LABEL=DAEMON: "after=BUILD_DIR/daemon/gfxgraphd@<HEAD>".

ab_dpid=
# shellcheck disable=SC2317  # (called by the trap)
ab_cleanup() {
    if [ -n "$ab_dpid" ] && kill -0 "$ab_dpid" 2>/dev/null; then
        kill -TERM "$ab_dpid" 2>/dev/null
        wait "$ab_dpid" 2>/dev/null
    fi
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
    ab_tmp=$(mktemp -d "/tmp/gg-${benchname}.XXXXXX")
    trap ab_cleanup EXIT
    runs=()
    local status=0 spec label rest daemon commit sock
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
        ab_dpid=$!
        for _ in $(seq 200); do
            [ -S "$sock" ] && break
            kill -0 "$ab_dpid" 2>/dev/null || break
            sleep 0.05
        done
        if ! [ -S "$sock" ]; then
            echo "$name: $daemon did not start; its log:" >&2
            cat "$ab_tmp/$label.log" >&2
            exit 1
        fi
        ab_bench "$label" "$sock" "$commit" "$ab_tmp" || status=1
        kill -TERM "$ab_dpid" 2>/dev/null
        wait "$ab_dpid" 2>/dev/null
        ab_dpid=
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
