#!/bin/bash
# SPDX-License-Identifier: MIT
# make demo's script, checked: it exits 0, both runs of the demo match the
# reference, and the daemon counted no errors (the --keep run once released
# buffers its kept programs still used: errors 4).
set -uo pipefail
build=${1:?build dir}
out=$(bash "$(dirname "$0")/demo.sh" "$build" 2>&1)
rc=$?
echo "$out"
fail=0
check() { if "${@:2}"; then echo "ok - $1"; else echo "not ok - $1"; fail=1; fi; }
check "demo.sh exits 0 (got $rc)" test "$rc" -eq 0
check "both demo runs match the reference" test "$(grep -c 'all results match the reference' <<<"$out")" -eq 2
check "gfxgraphctl stats: errors 0" grep -Eq '^  errors +0$' <<<"$out"
check "the second run adopted the parked graphs (exec updates, no new instantiate)" \
    grep -Eq '^  exec_updates +[1-9]' <<<"$out"
exit $fail
