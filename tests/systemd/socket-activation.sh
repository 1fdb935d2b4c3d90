#!/bin/bash
# SPDX-License-Identifier: MIT
# Socket activation end to end.
#  1. systemd-socket-activate -l PATH runs the real daemon on the first
#     connection; gfxgraphctl health --socket PATH talks to it through the
#     passed socket; the daemon neither binds its own --socket path nor
#     unlinks or replaces PATH (same inode after it stops).
#  2. Two passed sockets: the daemon refuses to start (exit 1) and says why.
#  3. gg_sd_helper activate: the service manager keeps the socket across a
#     restart; a client that connects before the daemon starts is served.
. "$(dirname "$0")/lib.sh"
gg_need systemd-socket-activate
gg_mktemp
T=$gg_tmp
A=$T/act.sock
OWN=$T/own.sock
D=("$GFXGRAPHD" --backend cpu --socket "$OWN" --log-level debug)

# ---- 1: systemd-socket-activate ----
systemd-socket-activate -l "$A" -- "${D[@]}" >"$T/sa.log" 2>&1 &
sa=$!
gg_cleanup_hooks+=("gg_running $sa && kill -KILL $sa")
gg_check "systemd-socket-activate listens on $A" gg_wait_socket "$A"
ino0=$(stat -c %i "$A")
out=$("$GFXGRAPHCTL" health --socket "$A" 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
gg_check "gfxgraphctl health through the activation socket (exit $rc)" test $rc -eq 0
gg_check "health reports the activation socket as the daemon's socket" \
    grep -qE "^ +socket +$A\$" <<<"$out"
health_quiet() { "$GFXGRAPHCTL" health --socket "$1" >/dev/null 2>&1; }
gg_check "a second client is served too" health_quiet "$A"
gg_check "the daemon said it serves the socket from systemd" \
    grep -q "serving on $A (socket from systemd)" "$T/sa.log"
gg_check "the daemon did not bind its own --socket path" test ! -e "$OWN"
gg_check "the activation socket is the same inode while serving" \
    test "$(stat -c %i "$A")" = "$ino0"
kill -TERM $sa
gg_wait_pid $sa 20
gg_check "SIGTERM: the daemon stops with exit 0 (got $gg_wait_rc)" test "$gg_wait_rc" -eq 0
gg_check "the daemon did not unlink or replace the activation socket" \
    test -S "$A" -a "$(stat -c %i "$A" 2>/dev/null)" = "$ino0"
sed 's/^/    /' "$T/sa.log"

# ---- 2: more than one socket ----
rm -f "$A"
systemd-socket-activate -l "$A" -l "$T/second.sock" -- "${D[@]}" >"$T/sa2.log" 2>&1 &
sa2=$!
gg_cleanup_hooks+=("gg_running $sa2 && kill -KILL $sa2")
gg_wait_socket "$A"
"$GFXGRAPHCTL" health --socket "$A" --timeout 5 >/dev/null 2>&1
gg_wait_pid $sa2 20
gg_check "two passed sockets: exit 1 (got $gg_wait_rc)" test "$gg_wait_rc" -eq 1
gg_check "two passed sockets: the daemon says why" grep -q "serves exactly one" "$T/sa2.log"

# ---- 3: restart on a socket the manager keeps ----
gg_helper "restart on a kept socket" "$GG_SD_HELPER" activate --socket "$T/keep.sock" \
    --client "$GFXGRAPHCTL" -- "$GFXGRAPHD" --backend cpu --socket "$OWN"
gg_summary
