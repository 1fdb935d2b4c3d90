#!/bin/bash
# SPDX-License-Identifier: MIT
# systemd-analyze security --offline=true: the overall exposure level of
# gfxgraphd.service (and of an instance of the template) must be at most 2.0.
# The units are checked as installed (prefix /usr into a temporary root, as
# in verify-units.sh).  A copy with the sandbox stripped must score above
# 2.0, so the parsing cannot pass by accident.
# Also: the daemon itself (cpu backend) runs under MemoryDenyWriteExecute as
# systemd 252 applies it (the unit leaves that option off for the GPU
# runtimes' sake; docs/operations.md).
. "$(dirname "$0")/lib.sh"
gg_need systemd-analyze cmake
gg_mktemp
R=$gg_tmp/root
U=/usr/lib/systemd/system
LIMIT=2.0
gg_check "install into a unit root" gg_make_unit_root "$R" || gg_summary

# exposure UNIT: prints the "Overall exposure level" number, or nothing.
exposure() {
    local out
    out=$(cd "$R" && systemd-analyze security --offline=true --root="$R" --no-pager "$U/$1" 2>&1)
    sed -nE 's/.*Overall exposure level for [^:]*: *([0-9]+(\.[0-9]+)?).*/\1/p' <<<"$out" | tail -1
    if ! grep -q "Overall exposure level" <<<"$out"; then
        sed 's/^/    /' <<<"$out" >&2
    fi
}
at_most() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }

for u in gfxgraphd.service gfxgraphd@0.service; do
    e=$(exposure "$u")
    echo "# $u: overall exposure level $e (limit $LIMIT)"
    gg_check "$u: exposure level parsed" test -n "$e"
    [ -n "$e" ] && gg_check "$u: exposure $e <= $LIMIT" at_most "$e" "$LIMIT"
done

# Self-check: the same unit without its [Service] sandbox scores high.
sed -n '1,/^\[Service\]/p; /^ExecStart=/p; /^\[Install\]/,$p' "$R$U/gfxgraphd.service" \
    >"$R$U/gfxgraphd-bare.service"
e=$(exposure gfxgraphd-bare.service)
echo "# without the sandbox: $e"
gg_check "self-check: an unhardened copy scores above $LIMIT ($e)" \
    eval '[ -n "$e" ] && ! at_most "$e" "$LIMIT"'

# The daemon under MemoryDenyWriteExecute (seccomp form, systemd <= 253).
# Only where it links no ROCm runtime: Debian's libamdhip64 (5.2) asks for an
# executable stack, which MemoryDenyWriteExecute refuses at load time; that
# is one reason the unit leaves the option off.
if ldd "$GFXGRAPHD" 2>/dev/null | grep -q 'libamdhip64'; then
    echo "# skip: this gfxgraphd links libamdhip64, which needs an executable stack"
    gg_summary
fi
sock=$gg_tmp/mdwe.sock
"$GG_SD_HELPER" mdwe seccomp -- "$GFXGRAPHD" --backend cpu --socket "$sock" 2>"$gg_tmp/mdwe.err" &
pid=$!
gg_cleanup_hooks+=("gg_running $pid && kill -KILL $pid")
gg_wait_socket "$sock"
probe() { "$GG_SD_HELPER" client "$sock" && "$GFXGRAPHCTL" health --socket "$sock" >/dev/null; }
gg_check "under MemoryDenyWriteExecute (as systemd 252 applies it) the cpu daemon serves a client" probe
gg_running "$pid" && kill -TERM "$pid"
gg_wait_pid "$pid" 20
gg_check "under MemoryDenyWriteExecute: clean stop (exit $gg_wait_rc)" test "$gg_wait_rc" -eq 0 ||
    cat "$gg_tmp/mdwe.err"
gg_summary
