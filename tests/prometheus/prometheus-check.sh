#!/bin/bash
# SPDX-License-Identifier: MIT
# A real Prometheus (Debian's `prometheus` package) scrapes gfxgraph-exporter
# in front of a cpu-backend gfxgraphd, and its HTTP API is asked what an
# operator would ask:
#   - gfxgraph_up and up are 1, the error series are there at 0;
#   - after replays: their count, a rate (rate(gfxgraph_replays_total)) and
#     a quantile (histogram_quantile over the round-trip histogram);
#   - the alert rule of docs/metrics.md (checked by promtool) matches nothing
#     while the daemon answers; with the daemon gone gfxgraph_up is 0, no
#     other gfxgraph series has a value (staleness), and the rule's alert is
#     pending or firing; with the exporter gone too, up is 0.
# Every wait is for a state seen through the API (no fixed sleeps decide
# anything).  Prints each query and its answer.  Skips (77) without
# prometheus, promtool or python3.
#
# Environment (tests/cmake/metrics.cmake): as tests/systemd/lib.sh, plus
# GFXGRAPH_EXPORTER.  By hand:
#   GG_SOURCE_DIR=. GG_BUILD_DIR=build GFXGRAPHD=build/daemon/gfxgraphd \
#   GFXGRAPHCTL=build/client/gfxgraphctl GG_SD_HELPER=build/tests/gg_sd_helper \
#   GFXGRAPH_EXPORTER=build/tools/gfxgraph-exporter/gfxgraph-exporter \
#   bash tests/prometheus/prometheus-check.sh
. "$(dirname "$0")/../systemd/lib.sh"
: "${GFXGRAPH_EXPORTER:?GFXGRAPH_EXPORTER must name the gfxgraph-exporter binary}"
gg_need prometheus promtool python3
gg_mktemp
WAIT_S=${GG_PROM_WAIT_S:-180}   # the most any one state is waited for
CLIENT_RUNS=5                   # gg_sd_helper client: 2 replays a run

# ---- the alert rule, as docs/metrics.md gives it ----
sed -n '/^```yaml$/,/^```$/p' "$GG_SOURCE_DIR/docs/metrics.md" | sed '1d;$d' >"$gg_tmp/rules.yml"
gg_check "docs/metrics.md has an alert rule" grep -q 'alert: GfxgraphDown' "$gg_tmp/rules.yml"
gg_check "promtool check rules accepts it" promtool check rules "$gg_tmp/rules.yml"
ALERT_EXPR=$(sed -nE 's/^ *expr: *(.*)$/\1/p' "$gg_tmp/rules.yml" | head -1)
echo "# alert expression: $ALERT_EXPR"

# ---- daemon and exporter ----
sock=$gg_tmp/d.sock
"$GFXGRAPHD" --backend cpu --socket "$sock" >"$gg_tmp/daemon.log" 2>&1 &
dpid=$!
gg_cleanup_hooks+=("gg_running $dpid && kill -KILL $dpid")
gg_check "gfxgraphd is up" gg_wait_socket "$sock" || gg_summary
"$GFXGRAPH_EXPORTER" --socket "$sock" --listen 127.0.0.1:0 2>"$gg_tmp/exporter.log" &
epid=$!
gg_cleanup_hooks+=("gg_running $epid && kill -KILL $epid")
eport=""
for _ in $(seq 1 1200); do
    eport=$(sed -nE 's/^gfxgraph-exporter: listening on 127\.0\.0\.1:([0-9]+)$/\1/p' "$gg_tmp/exporter.log")
    [ -n "$eport" ] && break
    gg_running "$epid" || break
    sleep 0.05
done
gg_check "the exporter listens (port $eport)" test -n "$eport" || { cat "$gg_tmp/exporter.log"; gg_summary; }

# ---- prometheus, scraping every second ----
pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$gg_tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $gg_tmp/rules.yml
scrape_configs:
  - job_name: gfxgraph
    static_configs:
      - targets: ["127.0.0.1:$eport"]
EOF
gg_check "promtool check config" promtool check config "$gg_tmp/prometheus.yml"
prometheus --config.file="$gg_tmp/prometheus.yml" --storage.tsdb.path="$gg_tmp/data" \
    --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$gg_tmp/prometheus.log" 2>&1 &
ppid=$!
gg_cleanup_hooks+=("gg_running $ppid && kill -TERM $ppid")

# q EXPR: the instant query's answer, one "labels value" line per series
# ("" when none); exit 1 when the API itself failed.
q() {
    python3 - "$pport" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
port, expr = sys.argv[1], sys.argv[2]
url = "http://127.0.0.1:%s/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
try:
    d = json.load(urllib.request.urlopen(url, timeout=10))
except Exception as e:
    print("API error: %s" % e, file=sys.stderr)
    sys.exit(1)
if d.get("status") != "success":
    print("API error: %s" % d, file=sys.stderr)
    sys.exit(1)
r = d["data"]["result"]
if d["data"]["resultType"] == "scalar":
    print(r[1])
else:
    for s in r:
        print("%s %s" % (json.dumps(s["metric"], sort_keys=True), s["value"][1]))
PY
}
# show EXPR: print the query and its answer (for the record).
show() {
    local a
    a=$(q "$1")
    echo "# query: $1"
    if [ -n "$a" ]; then sed 's/^/#   => /' <<<"$a"; else echo "#   => (no series)"; fi
}
# until_q EXPR TEST: wait until TEST (a python expression over v, the
# single series' value as a float, or None when there is none) holds.
until_q() {
    local expr=$1 test=$2 a v end=$((SECONDS + WAIT_S))
    while [ $SECONDS -lt $end ]; do
        a=$(q "$expr" 2>/dev/null) || { sleep 0.2; continue; }
        if [ -z "$a" ]; then
            v=None
        elif [ "$(wc -l <<<"$a")" -gt 1 ]; then
            v=many
        else
            v=${a##* }
        fi
        if [ "$v" != many ] && python3 -c 'import sys
v = None if sys.argv[1] == "None" else float(sys.argv[1])
sys.exit(0 if eval(sys.argv[2]) else 1)' "$v" "$test"; then
            return 0
        fi
        gg_running "$ppid" || return 1
        sleep 0.2
    done
    echo "# gave up waiting for: $expr ($test); last answer: $a"
    return 1
}

gg_check "prometheus scraped the exporter: up == 1" until_q 'up{job="gfxgraph"}' 'v == 1' ||
    { cat "$gg_tmp/prometheus.log"; gg_summary; }
gg_check "gfxgraph_up == 1" until_q 'gfxgraph_up' 'v == 1'
show 'gfxgraph_up'
gg_check "an error series at zero before any error: gfxgraph_errors_total{code=\"ENOENT\"} == 0" \
    until_q 'gfxgraph_errors_total{code="ENOENT"}' 'v == 0'
gg_check "every code's error series is there (count >= 20)" \
    until_q 'count(gfxgraph_errors_total)' 'v is not None and v >= 20'
show 'count(gfxgraph_errors_total)'
gg_check "the daemon's process_start_time_seconds (at most now)" \
    until_q 'process_start_time_seconds - time()' 'v is not None and v <= 1'
show 'process_start_time_seconds'
gg_check "the alert expression matches nothing while the daemon answers" \
    eval '[ -z "$(q "$ALERT_EXPR")" ]'

# ---- replays, then a rate and a quantile ----
# In two rounds: a (program, bucket) histogram series is born at its first
# replay, so rate() over it needs a second scrape that saw it grow.
client_runs() {
    local i
    for i in $(seq 1 "$1"); do
        "$GG_SD_HELPER" client "$sock" >"$gg_tmp/client.log" 2>&1 ||
            { gg_nok "gg_sd_helper client"; cat "$gg_tmp/client.log"; }
    done
}
client_runs 2
gg_check "prometheus sees the first 4 replays in the histogram" \
    until_q 'sum(gfxgraph_replay_round_trip_seconds_count)' 'v == 4'
client_runs $((CLIENT_RUNS - 2))
want=$((CLIENT_RUNS * 2))
gg_check "prometheus sees all $want replays: sum(gfxgraph_replays_total) == $want" \
    until_q 'sum(gfxgraph_replays_total)' "v == $want"
show 'sum by (path) (gfxgraph_replays_total)'
gg_check "and as many round-trip observations: sum(gfxgraph_replay_round_trip_seconds_count) == $want" \
    until_q 'sum(gfxgraph_replay_round_trip_seconds_count)' "v == $want"
RATE='sum(rate(gfxgraph_replays_total[1m]))'
gg_check "a rate: $RATE > 0" until_q "$RATE" 'v is not None and v > 0'
show "$RATE"
QUANT='histogram_quantile(0.9, sum by (le) (rate(gfxgraph_replay_round_trip_seconds_bucket[1m])))'
gg_check "a quantile: 0 < $QUANT <= 10 (the largest finite bucket)" \
    until_q "$QUANT" 'v is not None and 0 < v <= 10'
show "$QUANT"
QUANT_DEV='histogram_quantile(0.5, sum by (le) (rate(gfxgraph_replay_device_seconds_bucket[1m])))'
gg_check "the device-time median is a number" until_q "$QUANT_DEV" 'v is not None and v == v'
show "$QUANT_DEV"

# ---- the daemon gone ----
kill -TERM "$dpid"
gg_wait_pid "$dpid" 60
gg_check "gfxgraphd stopped (exit $gg_wait_rc)" test "$gg_wait_rc" -eq 0
gg_check "with the daemon gone: gfxgraph_up == 0" until_q 'gfxgraph_up' 'v == 0'
gg_check "the exporter itself is still scraped: up == 1" until_q 'up{job="gfxgraph"}' 'v == 1'
gg_check "no stale values: gfxgraph_replays_total has no series" \
    until_q 'count(gfxgraph_replays_total)' 'v is None'
gg_check "no stale values: process_start_time_seconds has no series" \
    until_q 'count(process_start_time_seconds)' 'v is None'
show 'gfxgraph_up'
show 'gfxgraph_replays_total'
gg_check "the alert expression matches" until_q "count($ALERT_EXPR)" 'v == 1'
show "$ALERT_EXPR"
alert_state() {
    python3 - "$pport" <<'PY'
import json, sys, urllib.request
d = json.load(urllib.request.urlopen("http://127.0.0.1:%s/api/v1/alerts" % sys.argv[1], timeout=10))
print(" ".join(a["labels"]["alertname"] + ":" + a["state"] for a in d["data"]["alerts"]))
PY
}
alert_active() {
    local end=$((SECONDS + WAIT_S))
    while [ $SECONDS -lt $end ]; do
        grep -qE 'GfxgraphDown:(pending|firing)' <<<"$(alert_state 2>/dev/null)" && return 0
        sleep 0.2
    done
    return 1
}
gg_check "the GfxgraphDown alert is pending or firing" alert_active
echo "# alerts: $(alert_state)"

# ---- the exporter gone too ----
kill -TERM "$epid"
gg_wait_pid "$epid" 20
gg_check "the exporter stopped cleanly on SIGTERM (exit $gg_wait_rc)" test "$gg_wait_rc" -eq 0
gg_check "with the exporter gone: up == 0" until_q 'up{job="gfxgraph"}' 'v == 0'
gg_check "the alert expression still matches" until_q "count($ALERT_EXPR)" 'v == 1'
show 'up{job="gfxgraph"}'
gg_summary
