#!/bin/bash
# SPDX-License-Identifier: MIT
# gfxgraph-exporter's units, as installed (prefix /usr into a temporary
# root, as verify-units.sh and security.sh do):
#   - systemd-analyze verify accepts gfxgraph-exporter.socket and .service;
#   - the service names the installed binary, and the socket listens on
#     loopback port 9786;
#   - systemd-analyze security --offline=true: overall exposure <= 2.0, and a
#     copy with the sandbox stripped scores above it (the parsing cannot pass
#     by accident);
#   - the exporter started by systemd-socket-activate (LISTEN_FDS, as the
#     socket unit passes it) and under MemoryDenyWriteExecute as systemd 252
#     applies it (the unit turns it on) serves gfxgraph_up 1 from a cpu
#     daemon, then gfxgraph_up 0 alone once the daemon is stopped.
. "$(dirname "$0")/lib.sh"
: "${GFXGRAPH_EXPORTER:?GFXGRAPH_EXPORTER must name the gfxgraph-exporter binary}"
gg_need systemd-analyze cmake
gg_mktemp
R=$gg_tmp/root
U=/usr/lib/systemd/system
LIMIT=2.0
gg_check "install into a unit root" gg_make_unit_root "$R" || gg_summary

verify_unit() {
    (cd "$R" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --root="$R" --man=no \
        "$U/$1" 2>&1) | grep -v -e 'Cannot add dependency job' -e 'Failed to load' \
        -e 'No such file or directory' | sed 's/^/    /' >"$gg_tmp/verify.out"
    cat "$gg_tmp/verify.out"
    [ ! -s "$gg_tmp/verify.out" ]
}
for u in gfxgraph-exporter.socket gfxgraph-exporter.service; do
    gg_check "$u installed" test -f "$R$U/$u"
    gg_check "systemd-analyze verify $u" verify_unit "$u"
done
gg_check "ExecStart names the installed binary and the daemon's socket" \
    grep -qx 'ExecStart=/usr/bin/gfxgraph-exporter --socket /run/gfxgraph/gfxgraphd.sock' \
    "$R$U/gfxgraph-exporter.service"
gg_check "the binary is installed there" test -x "$R/usr/bin/gfxgraph-exporter"
gg_check "the socket listens on 127.0.0.1:9786" \
    grep -qx 'ListenStream=127.0.0.1:9786' "$R$U/gfxgraph-exporter.socket"
gg_check "the old root textfile units are gone" \
    eval '[ ! -e "$R$U/gfxgraph-metrics.service" ] && [ ! -e "$R$U/gfxgraph-metrics.timer" ]'

exposure() {
    local out
    out=$(cd "$R" && systemd-analyze security --offline=true --root="$R" --no-pager "$U/$1" 2>&1)
    echo "$out" >"$gg_tmp/security-$1.txt"
    sed -nE 's/.*Overall exposure level for [^:]*: *([0-9]+(\.[0-9]+)?).*/\1/p' <<<"$out" | tail -1
    if ! grep -q "Overall exposure level" <<<"$out"; then
        sed 's/^/    /' <<<"$out" >&2
    fi
}
at_most() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }
e=$(exposure gfxgraph-exporter.service)
echo "# gfxgraph-exporter.service: overall exposure level $e (limit $LIMIT)"
# the items still counted against it, for the record
grep -E '^✗' "$gg_tmp/security-gfxgraph-exporter.service.txt" | sed 's/^/#   /'
gg_check "exposure level parsed" test -n "$e"
[ -n "$e" ] && gg_check "exposure $e <= $LIMIT" at_most "$e" "$LIMIT"
sed -n '1,/^\[Service\]/p; /^ExecStart=/p; /^\[Install\]/,$p' "$R$U/gfxgraph-exporter.service" \
    >"$R$U/gfxgraph-exporter-bare.service"
e=$(exposure gfxgraph-exporter-bare.service)
echo "# without the sandbox: $e"
gg_check "self-check: an unhardened copy scores above $LIMIT ($e)" \
    eval '[ -n "$e" ] && ! at_most "$e" "$LIMIT"'

# ---- socket activation, under MemoryDenyWriteExecute ----
command -v systemd-socket-activate >/dev/null || gg_skip "systemd-socket-activate not found"
sock=$gg_tmp/d.sock
"$GFXGRAPHD" --backend cpu --socket "$sock" >"$gg_tmp/daemon.log" 2>&1 &
dpid=$!
gg_cleanup_hooks+=("gg_running $dpid && kill -KILL $dpid")
gg_check "gfxgraphd is up" gg_wait_socket "$sock" || gg_summary
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo $((20000 + RANDOM % 20000)))
mdwe=("$GG_SD_HELPER" mdwe seccomp --)
[ "$(uname -m)" = x86_64 ] || mdwe=()
systemd-socket-activate -l "127.0.0.1:$port" -- "${mdwe[@]}" "$GFXGRAPH_EXPORTER" \
    --socket "$sock" --timeout 5 >"$gg_tmp/act.log" 2>&1 &
apid=$!
gg_cleanup_hooks+=("gg_running $apid && kill -KILL $apid")
# scrape: the body of GET /metrics, through bash's own TCP (no curl needed)
scrape() {
    local i
    for i in $(seq 1 600); do
        if { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
            printf 'GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n' >&3
            sed '1,/^\r$/d' <&3
            exec 3<&-
            return 0
        fi
        sleep 0.1
    done
    return 1
}
body=$(scrape)
gg_check "the activated exporter got its socket from LISTEN_FDS" \
    grep -q "^gfxgraph-exporter: listening on 127.0.0.1:$port\$" "$gg_tmp/act.log"
gg_check "gfxgraph_up 1 under MemoryDenyWriteExecute" grep -qx 'gfxgraph_up 1' <<<"$body"
gg_check "the daemon's metrics relayed" grep -q '^gfxgraph_replays_total{path="graph"} 0$' <<<"$body"
kill -TERM "$dpid"
gg_wait_pid "$dpid" 30
body=$(scrape)
gg_check "with the daemon stopped: gfxgraph_up 0" grep -qx 'gfxgraph_up 0' <<<"$body"
gg_check "and nothing else but the reason" \
    eval '[ "$(grep -vc "^#" <<<"$body")" -eq 1 ] && grep -q "^# gfxgraphd not reachable: " <<<"$body"'
kill -TERM "$apid"
gg_wait_pid "$apid" 20
gg_check "SIGTERM: the exporter exits 0 ($gg_wait_rc)" test "$gg_wait_rc" -eq 0 ||
    cat "$gg_tmp/act.log"
gg_summary
