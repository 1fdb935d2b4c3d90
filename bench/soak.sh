#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Soak: the load-and-fault suite (tests/test_load_fault.c) at 64 clients x
# 10,000 replays per main round, half on the fast path and half on the
# socket, every result checked, then clients and the daemon killed and a
# SIGTERM under load.  Prints replays/s, lost, wrong and the daemon's VmRSS
# before (after the warm-up) and after the main rounds.
#
#   bench/soak.sh [-b BUILD_DIR] [-c CLIENTS] [-n REPLAYS] [-d SECONDS]
#
#   -b  build directory holding tests/test_load_fault (default: build; it is
#       built there when missing)
#   -c  clients (64), -n  replays per client per round (10000)
#   -d  repeat the main round until SECONDS have passed (0: one round)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build clients=64 replays=10000 duration=0
while getopts "b:c:n:d:h" o; do
  case $o in
    b) build=$OPTARG ;;
    c) clients=$OPTARG ;;
    n) replays=$OPTARG ;;
    d) duration=$OPTARG ;;
    *) sed -n '3,14p' "$0"; exit 2 ;;
  esac
done
bin=$build/tests/test_load_fault
if [[ ! -x $bin ]]; then
  cmake --build "$build" --target test_load_fault >/dev/null
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
GG_LOAD_CLIENTS=$clients GG_LOAD_REPLAYS=$replays GG_LOAD_WARMUP=$((replays / 10)) \
  GG_LOAD_DURATION_S=$duration "$bin" >"$log" 2>&1 || rc=$?
total=$(grep -m1 'note: load total:' "$log" || true)
rss=$(grep -m1 'note: daemon VmRSS:' "$log" || true)
echo "soak: $clients clients x $replays replays per round, duration ${duration}s, $(nproc) cores"
if [[ $total =~ ([0-9]+)\ round.*\ ([0-9]+)\ replays\ in\ ([0-9]+)\ ms:\ ([0-9]+)\ replays/s,\ ([0-9]+)\ lost,\ ([0-9]+)\ wrong ]]; then
  echo "rounds:      ${BASH_REMATCH[1]}"
  echo "replays:     ${BASH_REMATCH[2]} in ${BASH_REMATCH[3]} ms"
  echo "replays/s:   ${BASH_REMATCH[4]}"
  echo "lost:        ${BASH_REMATCH[5]}"
  echo "wrong:       ${BASH_REMATCH[6]}"
fi
if [[ $rss =~ ([0-9]+)\ kB\ after\ the\ warm-up,\ ([0-9]+)\ kB\ after\ the\ main\ round\ \(([-+0-9.]+)\ %\) ]]; then
  echo "RSS before:  ${BASH_REMATCH[1]} kB (after the warm-up)"
  echo "RSS after:   ${BASH_REMATCH[2]} kB (${BASH_REMATCH[3]} %)"
fi
grep -E 'note: (restart|stop under load|first failures|times):' "$log" | sed 's/^ *note: /faults:      /'
grep -E '^FAIL' "$log" | head -20 || true
tail -1 "$log"
exit $rc
