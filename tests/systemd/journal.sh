#!/bin/bash
# SPDX-License-Identifier: MIT
# Logging to the journal.
#
# Offline there is usually no journald, so (as root) the test makes a private
# mount namespace with an empty /run and, for the parts that need one, puts
# a stand-in journald there (gg_sd_helper journal-listen on
# /run/systemd/journal/socket, the socket sd_journal_sendv writes to).
#  A. --log-target=journal with no journal: the daemon runs, serves, says
#     once that it logs to stderr, and logs there.
#  B. --log-target=journal with a journal: every record has MESSAGE,
#     PRIORITY, CODE_FILE, CODE_LINE, SYSLOG_IDENTIFIER; records about a
#     session / program / bucket carry GFXGRAPH_SESSION / GFXGRAPH_PROGRAM /
#     GFXGRAPH_BUCKET (gg_sd_helper client with GFXGRAPH_FAULT=capture makes
#     them all);
#     nothing goes to stderr.
#  C. target auto: JOURNAL_STREAM naming stderr's device:inode picks the
#     journal; a JOURNAL_STREAM for another file keeps stderr.
# Without a private namespace (not root, no unshare), A runs only when this
# machine has no journald, and B/C are skipped with a message.
. "$(dirname "$0")/lib.sh"

J=/run/systemd/journal/socket

# run_daemon NAME ARGS...: start gfxgraphd on $T/NAME.sock, stderr to
# $T/NAME.err; sets $dpid.
run_daemon() {
    local name=$1
    shift
    "$GFXGRAPHD" --backend cpu --socket "$T/$name.sock" "$@" 2>"$T/$name.err" &
    dpid=$!
    gg_cleanup_hooks+=("gg_running $dpid && kill -KILL $dpid")
    gg_wait_socket "$T/$name.sock"
}
stop_daemon() {
    kill -TERM "$dpid"
    gg_wait_pid "$dpid" 20
    gg_check "$1: clean stop (exit $gg_wait_rc)" test "$gg_wait_rc" -eq 0
}
health() { "$GFXGRAPHCTL" health --socket "$1" >/dev/null 2>&1; }

part_a() {
    run_daemon a --log-target=journal
    gg_check "A: no journal: the daemon serves" health "$T/a.sock"
    stop_daemon A
    gg_check "A: no journal: it says it logs to stderr instead" \
        grep -q "cannot write to the journal" "$T/a.err"
    gg_check "A: no journal: records go to stderr" grep -q "gfxgraphd info: serving on" "$T/a.err"
    sed 's/^/    /' "$T/a.err" | head -5
}

# jrec FIELD=REGEX...: is there a record having all these fields?
jrec() {
    local IFS=$'\x1f'
    awk -v want="$*" '
        BEGIN { n = split(want, w, "\x1f") }
        /^--$/ { hit = 0; for (i = 1; i <= n; i++) hit += (i in got); if (hit == n) found = 1; delete got; next }
        { for (i = 1; i <= n; i++) if ($0 ~ ("^" w[i] "$")) got[i] = 1 }
        END { exit !found }' "$T/journal.txt"
}
# jwait FIELD=REGEX...: jrec, giving the stand-in journald up to 60 s to
# write out what it has received.
jwait() {
    local i
    for i in $(seq 1 600); do
        jrec "$@" && return 0
        sleep 0.1
    done
    return 1
}
# every record has FIELD (a regex for the whole line)
jall() {
    awk -v re="^$1\$" '/^--$/ { recs++; if (!has) bad++; has = 0; next } $0 ~ re { has = 1 }
        END { exit !(recs > 0 && bad == 0) }' "$T/journal.txt"
}

part_bc() {
    "$GG_SD_HELPER" journal-listen "$J" "$T/journal.txt" &
    local jl=$!
    gg_cleanup_hooks+=("gg_running $jl && kill -KILL $jl")
    gg_wait_socket "$J"

    run_daemon b --log-target=journal --log-level=debug --set fault=capture
    gg_check "B: the daemon serves" health "$T/b.sock"
    local out
    out=$("$GG_SD_HELPER" client "$T/b.sock" 2>&1)
    gg_check "B: a client defines and replays a program (eager fallbacks logged with their bucket)" \
        test $? -eq 0
    echo "$out" | sed 's/^/    /'
    stop_daemon B
    jwait 'MESSAGE=stopped .*' || true
    local nrec
    nrec=$(grep -c '^--$' "$T/journal.txt")
    echo "# B: $nrec journal records"
    gg_check "B: records reached the journal" test "$nrec" -gt 5
    gg_check "B: nothing on stderr" test ! -s "$T/b.err"
    gg_check "B: every record has MESSAGE" jall 'MESSAGE=.+'
    gg_check "B: every record has PRIORITY (0-7)" jall 'PRIORITY=[0-7]'
    gg_check "B: every record has CODE_FILE" jall 'CODE_FILE=.*\.c'
    gg_check "B: every record has CODE_LINE" jall 'CODE_LINE=[0-9]+'
    gg_check "B: every record has SYSLOG_IDENTIFIER=gfxgraphd" jall 'SYSLOG_IDENTIFIER=gfxgraphd'
    gg_check "B: info at PRIORITY=6" jrec 'MESSAGE=serving on .*' 'PRIORITY=6'
    gg_check "B: debug at PRIORITY=7 with GFXGRAPH_SESSION" \
        jrec 'MESSAGE=client connected.*' 'PRIORITY=7' 'GFXGRAPH_SESSION=[0-9]+'
    gg_check "B: a program's record carries GFXGRAPH_SESSION and GFXGRAPH_PROGRAM" \
        jrec "MESSAGE=program 'sd-probe' defined.*" 'GFXGRAPH_SESSION=[0-9]+' 'GFXGRAPH_PROGRAM=[0-9]+'
    gg_check "B: a warning at PRIORITY=4 carries GFXGRAPH_SESSION, _PROGRAM, _BUCKET" \
        jrec 'MESSAGE=graph for branch .* disabled.*' 'PRIORITY=4' 'GFXGRAPH_SESSION=[0-9]+' \
             'GFXGRAPH_PROGRAM=[0-9]+' 'GFXGRAPH_BUCKET=[0-9]+'
    gg_check "B: a record without a session has no GFXGRAPH_SESSION" \
        awk '/^MESSAGE=serving on/ { s = 1 } /^GFXGRAPH_SESSION=/ && s { bad = 1 } /^--$/ { if (s) { done = 1; exit } }
             END { exit !(done && !bad) }' "$T/journal.txt"
    grep -m1 -B8 '^GFXGRAPH_BUCKET=' "$T/journal.txt" | sed 's/^/    /'

    # C: auto-detection through JOURNAL_STREAM
    : >"$T/journal.txt"
    : >"$T/c.err"
    local st
    st=$(stat -c '%d:%i' "$T/c.err")
    JOURNAL_STREAM=$st "$GFXGRAPHD" --backend cpu --socket "$T/c.sock" 2>>"$T/c.err" &
    dpid=$!
    gg_cleanup_hooks+=("gg_running $dpid && kill -KILL $dpid")
    gg_wait_socket "$T/c.sock"
    gg_check "C: JOURNAL_STREAM = stderr: the daemon serves" health "$T/c.sock"
    stop_daemon C
    gg_check "C: JOURNAL_STREAM = stderr: records go to the journal" \
        jwait "MESSAGE=serving on $T/c.sock.*"
    gg_check "C: JOURNAL_STREAM = stderr: nothing on stderr" test ! -s "$T/c.err" ||
        sed 's/^/    /' "$T/c.err"
    # its last record in before the file is emptied for C': one the stand-in
    # journald writes out late would land in C''s empty journal
    jwait 'MESSAGE=stopped .*' || true

    : >"$T/journal.txt"
    : >"$T/other"
    st=$(stat -c '%d:%i' "$T/other")
    JOURNAL_STREAM=$st "$GFXGRAPHD" --backend cpu --socket "$T/d.sock" 2>"$T/d.err" &
    dpid=$!
    gg_cleanup_hooks+=("gg_running $dpid && kill -KILL $dpid")
    gg_wait_socket "$T/d.sock"
    stop_daemon "C'"
    gg_check "C': JOURNAL_STREAM for another file: records stay on stderr" \
        grep -q "gfxgraphd info: serving on $T/d.sock" "$T/d.err"
    gg_check "C': JOURNAL_STREAM for another file: nothing in the journal" test ! -s "$T/journal.txt"

    kill -TERM "$jl"
    gg_wait_pid "$jl" 10
}

if [ "${1:-}" = --in-namespace ]; then
    # Here: a private mount namespace; /run is ours.
    T=$2
    trap 'gg_cleanup' EXIT   # stops what is left running; $T is the caller's
    mount -t tmpfs -o mode=0755 gg-run /run || { echo "not ok - mount a private /run"; exit 1; }
    mkdir -p /run/systemd/journal
    part_a
    part_bc
    gg_summary
fi

gg_mktemp
T=$gg_tmp
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
   unshare -m --propagation private true 2>/dev/null; then
    bash "$0" --in-namespace "$T"
    exit $?
fi

echo "# no private mount namespace (needs root and unshare)"
if [ -S "$J" ]; then
    echo "SKIP part A: this machine runs journald, so the journal is never missing here"
    run_daemon a --log-target=journal
    gg_check "journald present: --log-target=journal serves" health "$T/a.sock"
    stop_daemon "journald present"
else
    part_a
fi
echo "SKIP parts B and C: the stand-in journald needs a private /run (run as root)"
gg_summary
