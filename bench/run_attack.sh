#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Latencies under attack (cpu backend, as root: the attacker runs as
# nobody).  Runs tests/test_attack_fair's "fair" and "mixed" parts from
# each given build tree, GG_AB_ROUNDS rounds (default 3) alternating between
# the trees, and writes one JSON file of every run:
#   fair:  the other uid's slow replays answered while root's one replay
#          waited (24 sessions of one job each queued ahead of it);
#   mixed: four clients' replay round trips (two socket, two fast path,
#          results checked) alone and beside an attacker that closes
#          sessions with slow replays left behind and defines programs that
#          copy a slow one in 16 times: p50, p99, max.
#
#   bench/run_attack.sh BUILD_DIR [OUT_JSON] [LABEL=OTHER_BUILD_DIR[@COMMIT]]...
#
# OUT_JSON: default bench/results/cpu-attack.json.  GG_ATTACK_REPLAYS:
# replays per client per phase (default 2000).  The test binary runs the
# daemon of its own tree.  Exit status: 0, or 1 when a run failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '3,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 64
fi
build=$1
out=${2:-$root/bench/results/cpu-attack.json}
shift $(( $# >= 2 ? 2 : 1 ))
labels=("after=$build@$(git -C "$root" rev-parse --short HEAD 2>/dev/null)")
labels+=("$@")
: "${GG_AB_ROUNDS:=3}"
export GG_ATTACK_REPLAYS=${GG_ATTACK_REPLAYS:-2000}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
for round in $(seq 1 "$GG_AB_ROUNDS"); do
    for l in "${labels[@]}"; do
        name=${l%%=*}
        rest=${l#*=}
        dir=${rest%@*}
        commit=${rest#*@}
        [ "$commit" = "$rest" ] && commit=unknown
        bin=$dir/tests/test_attack_fair
        [ -x "$bin" ] || { echo "no $bin" >&2; exit 1; }
        log=$tmp/$name-$round.log
        "$bin" fair mixed >"$log" 2>&1 || status=1
        printf '%s\t%s\t%s\t%s\n' "$name" "$commit" "$round" "$log" >>"$tmp/runs"
    done
done
python3 - "$tmp/runs" "$out" <<'PY'
import json, re, sys, platform, os
runs = []
for line in open(sys.argv[1]):
    name, commit, rnd, log = line.rstrip("\n").split("\t")
    text = open(log).read()
    r = {"label": name, "commit": commit, "round": int(rnd),
         "passed": "0 failed" in text.splitlines()[-1] if text else False}
    m = re.search(r"attacker replays answered: (\d+) when root's was sent, (\d+) when it came back", text)
    if m:
        r["fair_other_uid_jobs_waited_for"] = int(m.group(2)) - int(m.group(1))
    for what, key in (("alone", "alone"), ("beside the attacker", "attacked")):
        m = re.search(r"latency %s: p50 (\d+) us, p99 (\d+) us, max (\d+) us" % what, text)
        if m:
            r[key + "_us"] = {"p50": int(m.group(1)), "p99": int(m.group(2)), "max": int(m.group(3))}
    m = re.search(r"attacker: (\d+) sessions closed", text)
    if m:
        r["attacker_sessions"] = int(m.group(1))
    runs.append(r)
    print("RESULT", json.dumps(r))
doc = {"bench": "run_attack.sh", "backend": "cpu", "host": platform.node(),
       "cpus": os.cpu_count(), "replays_per_client": int(os.environ["GG_ATTACK_REPLAYS"]),
       "work": "equal: the same test binary's parts from each tree, rounds alternating",
       "runs": runs}
os.makedirs(os.path.dirname(os.path.abspath(sys.argv[2])), exist_ok=True)
json.dump(doc, open(sys.argv[2], "w"), indent=1)
print("wrote", sys.argv[2])
PY
exit $status
