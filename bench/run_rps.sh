#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Requests per second on the cpu backend, gfxgraphd against Redis, in one
# run: gfxgraphd --backend cpu and redis-server on temporary Unix sockets,
# both driven by bench_rps (the same C load generator: N client threads, one
# request in flight each, a fixed time).  Writes one JSON file and prints a
# table with the ratios, then the heap allocations per replay (the shim).
#
#   bench/run_rps.sh BUILD_DIR [OUT_JSON]
#
# Targets, run interleaved (socket, fast, redis, socket, fast, redis, ...)
# GG_RPS_ROUNDS times for each setting; the table gives each one's median:
#   gfx-socket  1-node replay, cache hit, GFXGRAPH_FASTPATH=0 (the socket)
#   gfx-fast    the same with the client's default (the fast path when the
#               daemon offers it)
#   gfx-fast-spin0  the fast path with GFXGRAPH_SPIN_US=0: the client sleeps
#               on the futex at once instead of spinning first (with every
#               process on one CPU a spinning waiter holds the CPU the daemon
#               needs)
#   redis       PING over Redis's Unix socket
# Settings: 1 and 32 clients, each "pinned" (the daemon, Redis and the load
# generator all on CPU 0: on a VM a round trip between two vCPUs costs tens
# of us whatever the server, so only co-located runs compare the servers)
# and "unpinned" (the scheduler's choice).
#
# BUILD_DIR: a built tree (any GFXGRAPH_GPU; the cpu backend is in every
# build); its tests/libgg_alloc_count.so (not in sanitizer builds) gives the
# allocation counts.  OUT_JSON: default bench/results/cpu-rps-<date>.json.
# redis-server is installed with apt-get when missing (sudo unless root).
# Environment: GG_RPS_SECONDS (2 per run), GG_RPS_ROUNDS (3),
# GG_RPS_WARMUP (200 requests per client), GG_RPS_CPU (0: the CPU of the
# pinned runs), GFXGRAPH_GIT_COMMIT (when there is no .git).  python3
# assembles the JSON and the table.  Exit status: 0, or 1 when a step failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '3,34p' "$0" | sed 's/^# \{0,1\}//'
    exit 64
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "run_rps.sh: no build dir '$1'" >&2; exit 1; }
out=${2:-$root/bench/results/cpu-rps-$(date -u +%Y-%m-%d).json}
secs=${GG_RPS_SECONDS:-2}
rounds=${GG_RPS_ROUNDS:-3}
warmup=${GG_RPS_WARMUP:-200}
pincpu=${GG_RPS_CPU:-0}
ncpu=$(nproc)
allcpus=0-$((ncpu - 1))
daemon=$build/daemon/gfxgraphd
bench=$build/bench/bench_rps
shim=$build/tests/libgg_alloc_count.so
for f in "$daemon" "$bench"; do
    [ -x "$f" ] || { echo "run_rps.sh: $f is missing: build first (cmake --build $build)" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "run_rps.sh: python3 is needed for the JSON" >&2; exit 1; }
command -v taskset >/dev/null || { echo "run_rps.sh: taskset (util-linux) is needed" >&2; exit 1; }

if ! command -v redis-server >/dev/null 2>&1; then
    echo "run_rps.sh: installing redis-server (apt-get)" >&2
    sudo=
    [ "$(id -u)" = 0 ] || sudo=sudo
    if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            redis-server; } >&2; then
        echo "run_rps.sh: could not install redis-server" >&2
        exit 1
    fi
fi

tmp=$(mktemp -d /tmp/gg-bench-rps.XXXXXX)
pids=()
# shellcheck disable=SC2317  # (called by the trap)
cleanup() {
    for p in ${pids[@]+"${pids[@]}"}; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in ${pids[@]+"${pids[@]}"}; do
        wait "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_sock() { # PID SOCK LOG NAME
    for _ in $(seq 200); do
        [ -S "$2" ] && return 0
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    echo "run_rps.sh: $4 did not start; its log:" >&2
    cat "$3" >&2
    exit 1
}

# gfxgraphd --backend cpu, clean GFXGRAPH* environment, an empty config file
: >"$tmp/gfxgraphd.conf"
start_daemon() { # SOCK LOG [ENV...]
    local sock=$1 log=$2
    shift 2
    (
        for v in $(compgen -e | grep -E '^(GFXGRAPH|HGB_)'); do unset "$v"; done
        export GFXGRAPH_CONFIG=$tmp/gfxgraphd.conf
        for kv in "$@"; do export "${kv?}"; done
        exec "$daemon" --backend cpu --socket "$sock" --log-target stderr
    ) >"$log" 2>&1 &
    started=$!
    pids+=("$started")
    wait_sock "$started" "$sock" "$log" "gfxgraphd"
}
gsock=$tmp/gfxgraphd.sock
rsock=$tmp/redis.sock
start_daemon "$gsock" "$tmp/daemon.log"
dpid=$started
redis-server --port 0 --unixsocket "$rsock" --unixsocketperm 700 --save '' --appendonly no \
    --daemonize no --loglevel warning >"$tmp/redis.log" 2>&1 &
rpid=$!
pids+=("$rpid")
wait_sock "$rpid" "$rsock" "$tmp/redis.log" "redis-server"
redis_version=$(redis-server --version 2>/dev/null | head -1)

commit=${GFXGRAPH_GIT_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || true)}
if [ -z "${GFXGRAPH_GIT_COMMIT:-}" ] && [ -n "$commit" ] &&
    [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit-dirty"
fi

# affinity of every thread of a server: the pinned CPU or all
place() { # pinned|unpinned PID...
    local cpus=$allcpus
    [ "$1" = pinned ] && cpus=$pincpu
    shift
    for p in "$@"; do taskset -a -p -c "$cpus" "$p" >/dev/null || return 1; done
}

rc=0
runs=()
one() { # LABEL SETTING CLIENTS TARGET
    local label=$1 setting=$2 clients=$3 target=$4
    local cmd=("$bench" --clients "$clients" --seconds "$secs" --warmup "$warmup" --label "$label"
        --commit "$commit" --json "$tmp/run-$label.json")
    case $target in
        gfx-socket) cmd+=(--target gfxgraph --socket "$gsock") ;;
        gfx-fast | gfx-fast-spin0) cmd+=(--target gfxgraph --socket "$gsock") ;;
        redis) cmd+=(--target redis --socket "$rsock" --server-version "$redis_version") ;;
    esac
    local pre=()
    [ "$setting" = pinned ] && pre=(taskset -c "$pincpu")
    local envs=(env -u GFXGRAPH_FASTPATH)
    [ "$target" = gfx-socket ] && envs=(env GFXGRAPH_FASTPATH=0)
    [ "$target" = gfx-fast-spin0 ] && envs=(env -u GFXGRAPH_FASTPATH GFXGRAPH_SPIN_US=0)
    "${envs[@]}" ${pre[@]+"${pre[@]}"} "${cmd[@]}" >"$tmp/run-$label.txt" 2>&1
    local r=$?
    sed -n 's/^RESULT /  /p' "$tmp/run-$label.txt"
    if ! kill -0 "$dpid" 2>/dev/null; then
        wait "$dpid" 2>/dev/null
        echo "run_rps.sh: gfxgraphd exited (status $?) during $label; its log:" >&2
        tail -30 "$tmp/daemon.log" >&2
        exit 1
    fi
    if [ "$r" -ne 0 ] || ! [ -s "$tmp/run-$label.json" ]; then
        echo "run_rps.sh: bench_rps $label exited $r:" >&2
        cat "$tmp/run-$label.txt" >&2
        rc=1
        return
    fi
    runs+=("$setting $clients $target $label")
}

echo "run_rps.sh: $rounds rounds x ${secs}s per run; gfxgraphd pid $dpid, redis pid $rpid; $ncpu cpus"
for setting in pinned unpinned; do
    place "$setting" "$dpid" "$rpid" || { echo "run_rps.sh: taskset failed" >&2; exit 1; }
    for clients in 1 32; do
        for r in $(seq "$rounds"); do
            for target in gfx-socket gfx-fast gfx-fast-spin0 redis; do
                one "$setting-c$clients-$target-r$r" "$setting" "$clients" "$target"
            done
        done
    done
done

# allocations per replay: a second daemon under the shim, unpinned, 1 client
alloc_runs=()
if [ -f "$shim" ]; then
    start_daemon "$tmp/alloc.sock" "$tmp/alloc-daemon.log" \
        "LD_PRELOAD=$shim" "GG_ALLOC_COUNT_FILE=$tmp/alloc-daemon.count"
    for target in gfx-socket gfx-fast; do
        label=alloc-$target
        fp=(env -u GFXGRAPH_FASTPATH)
        [ "$target" = gfx-socket ] && fp=(env GFXGRAPH_FASTPATH=0)
        rm -f "$tmp/alloc-client-$target.count"
        "${fp[@]}" LD_PRELOAD="$shim" GG_ALLOC_COUNT_FILE="$tmp/alloc-client-$target.count" \
            "$bench" --target gfxgraph --socket "$tmp/alloc.sock" --clients 1 --seconds 1 \
            --warmup "$warmup" --alloc-daemon "$tmp/alloc-daemon.count" --label "$label" \
            --commit "$commit" --json "$tmp/run-$label.json" >"$tmp/run-$label.txt" 2>&1
        r=$?
        if [ "$r" -ne 0 ] || ! [ -s "$tmp/run-$label.json" ]; then
            echo "run_rps.sh: bench_rps $label exited $r:" >&2
            cat "$tmp/run-$label.txt" >&2
            rc=1
        else
            alloc_runs+=("$target $label")
        fi
    done
else
    echo "run_rps.sh: $shim not built (a sanitizer build?): no allocation counts" >&2
fi

# the daemon's own view of the run
stats=
[ -x "$build/client/gfxgraphctl" ] &&
    stats=$("$build/client/gfxgraphctl" --socket "$gsock" --timeout 10 stats 2>&1 | head -40)

mkdir -p "$(dirname "$out")"
printf '%s\n' "${runs[@]}" >"$tmp/runs.txt"
printf '%s\n' ${alloc_runs[@]+"${alloc_runs[@]}"} >"$tmp/alloc-runs.txt"
printf '%s' "$stats" >"$tmp/stats.txt"
python3 - "$tmp" "$out" "$secs" "$rounds" "$pincpu" "$redis_version" "$commit" <<'EOF' || rc=1
import json, os, platform, statistics, sys, time
tmp, out, secs, rounds, pincpu, redis_version, commit = sys.argv[1:8]
def load(label):
    with open(os.path.join(tmp, "run-%s.json" % label)) as f:
        return json.load(f)
runs = []
for line in open(os.path.join(tmp, "runs.txt")):
    if not line.strip():
        continue
    setting, clients, target, label = line.split()
    r = load(label)
    r["setting"], r["target"], r["round"] = setting, target, int(label.rsplit("-r", 1)[1])
    runs.append(r)
alloc = {}
for line in open(os.path.join(tmp, "alloc-runs.txt")):
    if line.strip():
        target, label = line.split()
        alloc[target] = load(label)
model = "unknown"
for l in open("/proc/cpuinfo"):
    if l.startswith("model name"):
        model = l.split(":", 1)[1].strip()
        break
gfx = next((r for r in runs if r["server"]["kind"] == "gfxgraphd"), None)
summary = {}
for r in runs:
    k = "%s-c%d-%s" % (r["setting"], r["options"]["clients"], r["target"])
    summary.setdefault(k, []).append(r["requests_per_s"])
med = {k: statistics.median(v) for k, v in summary.items()}
def ratio(a, b):
    return round(med[a] / med[b], 3) if a in med and b in med and med[b] else None
ratios = {}
for s in ("pinned", "unpinned"):
    for c in (1, 32):
        ratios["%s-c%d socket/redis" % (s, c)] = ratio("%s-c%d-gfx-socket" % (s, c), "%s-c%d-redis" % (s, c))
        ratios["%s-c%d fast/redis" % (s, c)] = ratio("%s-c%d-gfx-fast" % (s, c), "%s-c%d-redis" % (s, c))
        ratios["%s-c%d fast/socket" % (s, c)] = ratio("%s-c%d-gfx-fast" % (s, c), "%s-c%d-gfx-socket" % (s, c))
        ratios["%s-c%d fast-spin0/socket" % (s, c)] = ratio("%s-c%d-gfx-fast-spin0" % (s, c), "%s-c%d-gfx-socket" % (s, c))
doc = {
    "suite": "cpu-rps",
    "script": "bench/run_rps.sh",
    "provenance": {
        "git_commit": commit or None,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "device": gfx["server"]["device"] if gfx else None,
        "backend": "cpu",
        "driver": "none (cpu backend; kernel %s)" % platform.release(),
        "gfxgraphd_version": gfx["server"]["version"] if gfx else None,
        "redis": redis_version,
    },
    "method": {
        "load_generator": "bench/bench_rps.c: client threads, one request in flight each, fixed time",
        "seconds_per_run": float(secs), "rounds": int(rounds),
        "order": "interleaved: gfx-socket, gfx-fast, gfx-fast-spin0, redis, repeated per round",
        "pinned": "gfxgraphd, redis-server (all threads, taskset -a -p) and bench_rps on CPU %s" % pincpu,
        "unpinned": "all CPUs",
        "gfx-socket": "GFXGRAPH_FASTPATH=0", "gfx-fast": "the client's default path",
        "gfx-fast-spin0": "the client's default path with GFXGRAPH_SPIN_US=0 (no spinning before the futex wait)",
        "redis": "PING over its Unix socket",
    },
    "fast_path_in_use": all(r["options"]["path"] == "fast" for r in runs
                            if r["target"].startswith("gfx-fast")),
    "median_requests_per_s": {k: round(v, 1) for k, v in sorted(med.items())},
    "ratios": ratios,
    "ratios_work": {
        "socket/redis": "differs: a 1-node replay (scale on [1, D] f32, the cpu backend's kernel, "
                        "a cache hit) against a PING",
        "fast/redis": "differs: a 1-node replay (scale on [1, D] f32, the cpu backend's kernel, "
                      "a cache hit) against a PING",
        "fast/socket": "equal: the same replay, the fast path against the socket",
        "fast-spin0/socket": "equal: the same replay, the fast path without spinning against "
                             "the socket",
    },
    "allocations_per_replay": {t: r.get("allocations_per_request") for t, r in alloc.items()},
    "daemon_stats_after": open(os.path.join(tmp, "stats.txt")).read(),
    "runs": runs,
    "alloc_runs": list(alloc.values()),
}
with open(out + ".tmp", "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
os.replace(out + ".tmp", out)

print()
print("median requests/s (%s rounds x %ss, interleaved):" % (rounds, secs))
print("  %-9s %7s %11s %11s %11s %11s %10s %10s %10s %10s" % ("setting", "clients", "gfx-socket",
      "gfx-fast", "fast-spin0", "redis", "sock/redis", "fast/redis", "fast/sock", "spin0/sock"))
for s in ("pinned", "unpinned"):
    for c in (1, 32):
        g = lambda t: med.get("%s-c%d-%s" % (s, c, t))
        f = lambda v: "%11.0f" % v if v else "%11s" % "-"
        q = lambda v: "%10.2f" % v if v is not None else "%10s" % "-"
        print("  %-9s %7d %s %s %s %s %s %s %s %s" % (s, c, f(g("gfx-socket")), f(g("gfx-fast")),
              f(g("gfx-fast-spin0")), f(g("redis")), q(ratios["%s-c%d socket/redis" % (s, c)]),
              q(ratios["%s-c%d fast/redis" % (s, c)]), q(ratios["%s-c%d fast/socket" % (s, c)]),
              q(ratios["%s-c%d fast-spin0/socket" % (s, c)])))
print("  (pinned: everything on CPU %s; fast path target: fast/sock >= 3 with 1 client)" % pincpu)
print("  (work: */redis differs, a 1-node replay against a PING; fast/sock and spin0/sock equal)")
notfast = sorted({r["server"].get("fastpath_status", "") for r in runs
                  if r["target"].startswith("gfx-fast") and r["options"]["path"] != "fast"})
if notfast:
    print("  NOTE: the fast-path columns are NOT fast-path runs; the client said: %s" % "; ".join(notfast))
if alloc:
    print()
    print("heap allocations per cache-hit replay (tests/alloc_count.c shim, 1 client):")
    for t in ("gfx-socket", "gfx-fast"):
        a = alloc.get(t, {}).get("allocations_per_request")
        if a:
            print("  %-10s daemon %7.3f   client %7.3f" % (t, a["server"], a["client"]))
print("wrote", out)
EOF
exit $rc
