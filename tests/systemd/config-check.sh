#!/bin/bash
# SPDX-License-Identifier: MIT
# gfxgraphd --check-config [FILE] and --print-config.
. "$GG_SOURCE_DIR/tests/systemd/lib.sh"
gg_mktemp
good=$gg_tmp/good.conf
bad=$gg_tmp/bad.conf
printf '[gfxgraphd]\n# comment\nlog-level = warn\nmax-inflight = 8\ncache-entries = 100\n' >"$good"
printf 'log-levle = debug\nmax-inflight = zero\ncache_entries = 3\nthis is not a setting\nbuckets = 4,2\nfrobnicate = 1\n' >"$bad"

out=$("$GFXGRAPHD" --check-config "$good" 2>&1); rc=$?
echo "$out"
gg_check "good file: exit 0" test "$rc" -eq 0
gg_check "good file: OK" grep -q "$good: OK" <<<"$out"

out=$("$GFXGRAPHD" --check-config "$bad" 2>&1); rc=$?
echo "$out"
gg_check "bad file: exit 2 (got $rc)" test "$rc" -eq 2
gg_check "did you mean log-level" grep -q "$bad:1: unknown setting 'log-levle' (did you mean 'log-level'?)" <<<"$out"
gg_check "bad value named" grep -q "$bad:2: invalid value 'zero' for max-inflight" <<<"$out"
gg_check "underscore spelling: did you mean cache-entries" grep -q "$bad:3:.*did you mean 'cache-entries'" <<<"$out"
gg_check "not key = value" grep -q "$bad:4: expected 'key = value'" <<<"$out"
gg_check "bucket order" grep -q "$bad:5: invalid bucket list" <<<"$out"
gg_check "far-off key: no guess" grep -q "$bad:6: unknown setting 'frobnicate' (gfxgraphd.conf(5)" <<<"$out"
gg_check "every problem counted" grep -q "$bad: 6 problem(s)" <<<"$out"
out=$("$GFXGRAPHD" --check-config="$bad" 2>&1); rc=$?
gg_check "--check-config=FILE spelling: exit 2" test "$rc" -eq 2
out=$("$GFXGRAPHD" --config "$good" --check-config 2>&1); rc=$?
gg_check "--check-config checks --config's file" grep -q "$good: OK" <<<"$out"
out=$(GFXGRAPH_CACHE_ENTRIES=many "$GFXGRAPHD" --check-config "$good" 2>&1); rc=$?
gg_check "environment problems listed too" grep -q "environment GFXGRAPH_CACHE_ENTRIES: invalid value 'many'" <<<"$out"
gg_check "environment problem: exit 2" test "$rc" -eq 2
out=$("$GFXGRAPHD" --config "$good" --set kache-entries=3 --check-config 2>&1); rc=$?
gg_check "--set: did you mean" grep -q "did you mean 'cache-entries'" <<<"$out"
out=$("$GFXGRAPHD" --config "$bad" 2>&1); rc=$?
gg_check "starting on a bad file still stops: exit 2" test "$rc" -eq 2
gg_check "... with a did-you-mean" grep -q "did you mean 'log-level'" <<<"$out"

out=$(GFXGRAPH_CACHE_ENTRIES=77 "$GFXGRAPHD" --config "$good" --backend cpu --log-level error \
      --set workers=3 --print-config 2>&1); rc=$?
echo "$out"
gg_check "--print-config: exit 0" test "$rc" -eq 0
val() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ +/, ""); print }' <<<"$out"; }
gg_check "default" grep -qx "10000 *default" <<<"$(val request-timeout-ms)"
gg_check "file:line" grep -qx "8 *file $good:4" <<<"$(val max-inflight)"
gg_check "environment" grep -qx "77 *environment GFXGRAPH_CACHE_ENTRIES" <<<"$(val cache-entries)"
gg_check "--flag" grep -qx "cpu *--backend" <<<"$(val backend)"
gg_check "flag over file" grep -qx "error *--log-level" <<<"$(val log-level)"
gg_check "--set" grep -qx "3 *--set workers=3" <<<"$(val workers)"
gg_check "every key listed" test "$(grep -vc '^#' <<<"$out")" -ge 26
gg_summary
