#!/bin/bash
# SPDX-License-Identifier: MIT
# SIGHUP re-reads the config file: log level and a limit change live, the
# daemon keeps serving, a setting that cannot change live is logged as
# needing a restart, a broken file changes nothing; SIGTERM after: exit 0.
. "$GG_SOURCE_DIR/tests/systemd/lib.sh"
gg_need python3
gg_mktemp
sock=$gg_tmp/d.sock
conf=$gg_tmp/d.conf
log=$gg_tmp/d.log
printf 'log-level = info\nmax-connections-per-uid = 16\nworkers = 2\n' >"$conf"
"$GFXGRAPHD" --backend cpu --socket "$sock" --config "$conf" --log-target stderr 2>"$log" &
pid=$!
gg_cleanup_hooks+=("kill -KILL $pid 2>/dev/null")
gg_check "daemon listens" gg_wait_socket "$sock"
gg_check "health before the reload" "$GFXGRAPHCTL" --socket "$sock" health

wait_log() {   # wait_log PATTERN: at most 60 s
    local i
    for i in $(seq 1 600); do grep -q -- "$1" "$log" && return 0; sleep 0.1; done
    return 1
}
# wait_file PATH: until the file has a line (at most 60 s; python3 can be a
# slow shim, and the machine busy)
wait_file() {
    local i
    for i in $(seq 1 1200); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}
# health_ok: until a health check passes (at most 60 s): the daemon counts a
# closed connection out when its loop sees the hang-up, not at the close
health_ok() {
    local i
    for i in $(seq 1 600); do
        "$GFXGRAPHCTL" --socket "$sock" health >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

# one idle connection of ours, held open across the reload; it says so once
# connect() returned (the daemon accepts in order: the health check below,
# connected after it, is accepted after it)
python3 -c 'import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f=open(sys.argv[2], "w"); f.write("connected\n"); f.close(); time.sleep(600)' "$sock" "$gg_tmp/holder" &
holder=$!
gg_cleanup_hooks+=("kill $holder 2>/dev/null")
gg_check "holder connection open" wait_file "$gg_tmp/holder"
gg_check "health with a second connection open (limit 16)" "$GFXGRAPHCTL" --socket "$sock" health >/dev/null
printf 'log-level = debug\nmax-connections-per-uid = 1\nworkers = 3\n' >"$conf"
kill -HUP "$pid"
gg_check "reload logged" wait_log "reload of $conf"
gg_check "still running after SIGHUP" gg_running "$pid"
gg_check "log-level change logged" grep -q "reload: log-level changed from info to debug" "$log"
gg_check "max-connections-per-uid change logged" \
    grep -q "reload: max-connections-per-uid changed from 16 to 1 (file $conf:2)" "$log"
gg_check "workers: needs a restart" grep -q "reload: workers changed from 2 to 3.*needs a restart" "$log"
gg_check "summary names what needs a restart" grep -q "1 need a restart (workers)" "$log"
gg_check "socket still there" test -S "$sock"

# the new per-uid limit holds now: our second connection is refused
out=$("$GFXGRAPHCTL" --socket "$sock" health 2>&1)
gg_check "limit applied live: second connection refused" grep -q "max-connections-per-uid" <<<"$out"
echo "$out"
# debug level applied live: connection records are logged now
gg_check "debug records after the reload" wait_log "gfxgraphd debug: "

kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
gg_check "serving after the reload" health_ok

# a broken file changes nothing
printf 'log-level = info\nmax-connections-per-uid = lots\n' >"$conf"
kill -HUP "$pid"
gg_check "broken file: refused, running settings kept" wait_log "keeping the running settings"
gg_check "still serving after a broken reload" "$GFXGRAPHCTL" --socket "$sock" health >/dev/null

kill -TERM "$pid"
gg_wait_pid "$pid" 20
gg_check "SIGTERM after reloads: exit 0 (got $gg_wait_rc)" test "$gg_wait_rc" -eq 0
gg_check "socket removed" test ! -e "$sock"
[ "$gg_fail" -eq 0 ] || cat "$log"
gg_summary
