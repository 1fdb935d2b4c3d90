#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Three reference workloads, device time per replay, fused and unfused,
beside a torch.cuda.CUDAGraph of the same PyTorch code, in one run:

    decode_chain      32 x (layernorm -> gelu tanh), batch 1, d 1024, f16
    mlp_bs32_d1024    linear 1024->4096 -> gelu -> linear 4096->1024, batch 32, f32
    mlp_bs128_d2048   linear 2048->8192 -> gelu -> linear 8192->2048, batch 128, f32
    (and the two MLPs in f16, beside the reference ones)

(bench_python.py's definitions; f32 without TF32 on both sides.)  Two
daemons are started from BUILD: one with the default launch plans (fused)
and one with GFXGRAPH_FUSE=0, and beside each a child process
(gfxgraph.enable() keeps one daemon connection a process) that captures
every workload twice, with PyTorch's own CUDA graph and through its daemon.
The parent then has the two children time each workload in alternating
blocks (fused child, unfused child, unfused, fused, ...), and within a
child's block
  torch:       g.replay() between two CUDA events (the GPU's time alone);
  torch_host:  g.replay(); torch.cuda.synchronize(), on the host's clock;
  daemon:      the captured program's replay(1, timed=True): its device_us,
               the daemon's time from the graph launch to the completion
               it sees on the host;
and reports p50/mean of each, the ratio daemon/torch_host at p50 (the same
wait on both sides: launch to completion seen by the host), the ratio
against the events beside it (a different wait, labelled so), the
program's nodes and kernels (launches per replay, from stats), and the
daemon output's relative L2 error against PyTorch eager on a fresh input.
Every ratio against torch compares different work, and the JSON says so
(`work`): the daemon's kernels and plan against PyTorch's own kernels.
Targets (on the same-wait ratio): decode_chain <= 0.5, the MLPs <= 1.0,
fused.

    bench_fuse.py [--build DIR] [--json FILE] [--steps N] [--blocks N] [--commit SHA]

JSON with provenance (commit, GPU, driver, torch, date).  Exit 0 measured,
1 a workload was not routed or failed, 77 no torch / CUDA."""
import argparse
import datetime
import json
import os
import platform
import shutil
import socket as _socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
TARGETS = {"decode_chain": 0.5, "mlp_bs32_d1024": 1.0, "mlp_bs128_d2048": 1.0}


def pct(xs, q):
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def summ(xs):
    return {"n": len(xs), "p50_us": round(pct(xs, 50), 3), "p90_us": round(pct(xs, 90), 3),
            "mean_us": round(sum(xs) / len(xs), 3), "min_us": round(min(xs), 3)}


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:   # noqa: BLE001
        return ""


# ---- child: one daemon ------------------------------------------------------

def child(sock, steps, blocks, warmup):
    """Serves the parent over stdin/stdout, one line each way: "setup I"
    captures workload I (PyTorch's graph and the daemon's), "block I" times
    one block of it, "finish I" prints its row as JSON and drops it, "end"
    ends.  Answers start with "ok" or "fail"; the parent interleaves the
    blocks of this child (one daemon) with the other's."""
    import importlib
    import traceback
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    sys.path.insert(0, os.path.join(SRC, "python"))
    import gfxgraph
    ggstats = importlib.import_module("gfxgraph.stats")   # the module, not gfxgraph.stats()

    import ref_workloads as rw

    wl = rw.workloads(torch)
    per = max(1, steps // blocks)
    live = {}

    def capture(model, x0):
        return rw.capture(torch, model, x0)

    def setup(i):
        name, _, make, shape, dtype, _ = wl[i]
        torch.manual_seed(1000 + i)       # the same weights and input in both children
        model = make().cuda().to(dtype).eval()
        row = {"name": name, "shape": list(shape), "dtype": str(dtype).replace("torch.", ""),
               "_ok": True}
        x = torch.randn(shape, device="cuda", dtype=dtype)
        gfxgraph.disable()
        gt = capture(model, x)
        gfxgraph.enable(socket=sock)
        ge = capture(model, x)
        gfxgraph.disable()
        prog = ge[0].gfxgraph_program
        if prog is None:
            print("FAIL: %s: the capture was not routed to the daemon" % name, file=sys.stderr)
            return False
        xin = torch.randn(shape, device="cuda", dtype=dtype)
        gt[1].copy_(xin)
        ge[1].copy_(xin)
        gt[0].replay()
        r = prog.replay(1)
        torch.cuda.synchronize()
        ref = model(xin)
        row["rel_l2_vs_eager"] = {"torch_cudagraph": rw.rel(gt[2], ref),
                                  "daemon": rw.rel(ge[2], ref)}
        row["path"] = r["path"]
        gt[1].copy_(x)
        ge[1].copy_(x)
        torch.cuda.synchronize()
        for e in ggstats.call("stats", sock).get("cache", []):
            if e.get("program") == prog.id and "kernels" in e:
                row["nodes"], row["kernels"] = e["nodes"], e["kernels"]
        for _ in range(warmup):
            gt[0].replay()
            prog.replay(1, timed=True)
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(per)]
        live[i] = {"row": row, "gt": gt, "ge": ge, "prog": prog, "ev": ev,
                   "tt": [], "th": [], "dd": []}
        return True

    def block(i):
        st = live[i]
        gt, prog, ev, row = st["gt"], st["prog"], st["ev"], st["row"]
        clock = time.perf_counter_ns
        for s0, s1 in ev:
            s0.record()
            gt[0].replay()
            s1.record()
        torch.cuda.synchronize()
        st["tt"] += [1000.0 * s0.elapsed_time(s1) for s0, s1 in ev]
        for _ in range(per):
            t0 = clock()
            gt[0].replay()
            torch.cuda.synchronize()
            st["th"].append((clock() - t0) / 1000.0)
        for _ in range(per):
            rr = prog.replay(1, timed=True)
            if rr["path"] != "graph":
                row["_ok"] = False
            st["dd"].append(rr["device_us"])

    def finish(i):
        st = live.pop(i)
        row = st["row"]
        row["torch_cudagraph"] = summ(st["tt"])
        row["torch_cudagraph_host"] = summ(st["th"])
        row["daemon_device"] = summ(st["dd"])
        # the same wait: the host's clock from the launch to the completion
        # the host sees (torch: g.replay() + synchronize; the daemon: its
        # device_us); the events' row is the GPU's time alone
        row["ratio_p50"] = round(row["daemon_device"]["p50_us"] /
                                 row["torch_cudagraph_host"]["p50_us"], 3)
        row["ratio_events_p50"] = round(row["daemon_device"]["p50_us"] /
                                        row["torch_cudagraph"]["p50_us"], 3)
        for g in (st["gt"][0], st["ge"][0]):
            try:
                g.reset()
            except Exception:   # noqa: BLE001
                pass
        torch.cuda.empty_cache()
        return row

    with torch.no_grad():
        for line in sys.stdin:
            cmd = line.split()
            if not cmd or cmd[0] == "end":
                break
            try:
                i = int(cmd[1])
                if cmd[0] == "setup":
                    ok = setup(i)
                    print("ok" if ok else "fail", flush=True)
                elif cmd[0] == "block":
                    block(i)
                    print("ok", flush=True)
                elif cmd[0] == "finish":
                    print("ok " + json.dumps(finish(i)), flush=True)
                else:
                    print("fail unknown command", flush=True)
            except Exception:   # noqa: BLE001
                traceback.print_exc()
                live.pop(int(cmd[1]) if len(cmd) > 1 and cmd[1].isdigit() else -1, None)
                print("fail", flush=True)
    return 0


# ---- parent -----------------------------------------------------------------

def start_daemon(build, env):
    exe = os.path.join(build, "daemon", "gfxgraphd")
    tmp = tempfile.mkdtemp(prefix="ggbenchfuse.")
    sock = os.path.join(tmp, "gfxgraphd.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    p = subprocess.Popen([exe, "--backend", "hip", "--socket", sock, "--log-target", "stderr"],
                         stderr=log, env=dict(os.environ, **env))
    for _ in range(300):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.1)
    if not os.path.exists(sock):
        p.kill()
        raise SystemExit("gfxgraphd did not come up: " + open(os.path.join(tmp, "daemon.log")).read())
    return p, sock, tmp


def ref_workloads_list():
    """The workloads' rows (the children build them; the parent needs the
    names and order only)."""
    import torch
    import ref_workloads as rw
    return rw.workloads(torch)


def git_commit(arg):
    if arg:
        return arg
    if os.environ.get("GFXGRAPH_GIT_COMMIT"):
        return os.environ["GFXGRAPH_GIT_COMMIT"]
    f = os.path.join(SRC, "COMMIT")
    if os.path.isfile(f):
        return open(f).read().strip()
    return sh(["git", "-C", SRC, "rev-parse", "HEAD"]) or None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--json")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--commit")
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.steps, a.blocks, a.warmup)
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    lib = os.path.join(a.build, "client", "libgfxgraph-client.so.0")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if not env.get("GFXGRAPH_LIB") and os.path.exists(lib):
        env["GFXGRAPH_LIB"] = lib
    smi = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
              "--format=csv,noheader"]).split(", ")
    res = {"bench": "bench_fuse",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "git_commit": git_commit(a.commit), "host": _socket.gethostname(),
           "gpu": {"name": torch.cuda.get_device_name(0),
                   "driver": smi[1] if len(smi) > 1 else None,
                   "capability": ".".join(map(str, torch.cuda.get_device_capability(0)))},
           "torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "python": platform.python_version(),
           "options": {"steps": a.steps, "blocks": a.blocks, "warmup": a.warmup,
                       "allow_tf32": False,
                       "torch": "g.replay() between two CUDA events, per replay",
                       "torch_host": "g.replay(); torch.cuda.synchronize(), perf_counter_ns "
                                     "around it",
                       "daemon": "device_us of program.replay(1, timed=True) (the daemon's "
                                 "graph launch to device completion)",
                       "ratio_p50": "daemon / torch_host (the same wait)",
                       "ratio_events_p50": "daemon / torch events (a different wait)",
                       "order": "fused and unfused daemons' children in alternating blocks, "
                                "each block torch events, torch_host, daemon",
                       "percentiles": "nearest rank"},
           "targets_ratio_p50": TARGETS, "runs": {}}
    del torch
    ok = True
    daemons, kids, logs = {}, {}, {}
    labels = ("fused", "unfused")
    try:
        for label, denv in zip(labels, ({}, {"GFXGRAPH_FUSE": "0"})):
            daemons[label] = start_daemon(a.build, denv)
        for label in labels:
            logs[label] = tempfile.TemporaryFile(mode="w+")
            kids[label] = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--child", daemons[label][1],
                 "--steps", str(a.steps), "--blocks", str(a.blocks), "--warmup", str(a.warmup)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logs[label], text=True,
                bufsize=1, env=env)

        def ask(label, cmd):
            """One command to a child; its answer line ("ok ..." / "fail")."""
            k = kids[label]
            try:
                k.stdin.write(cmd + "\n")
                k.stdin.flush()
            except OSError:
                return "fail (the child ended)"
            for line in k.stdout:
                if line.startswith("ok") or line.startswith("fail"):
                    return line.rstrip("\n")
            return "fail (the child ended)"

        names = [w[0] for w in ref_workloads_list()]
        res["runs"] = {label: [] for label in labels}
        for i, name in enumerate(names):
            if not all(ask(label, "setup %d" % i) == "ok" for label in labels):
                ok = False
                print("FAIL: %s: setup" % name, file=sys.stderr)
                for label in labels:
                    ask(label, "finish %d" % i)
                continue
            # the two daemons' blocks alternate, the first of a pair in turn
            for b in range(a.blocks):
                for label in (labels if b % 2 == 0 else labels[::-1]):
                    if ask(label, "block %d" % i) != "ok":
                        ok = False
            for label in labels:
                ans = ask(label, "finish %d" % i)
                if not ans.startswith("ok "):
                    ok = False
                    print("FAIL: %s (%s)" % (name, label), file=sys.stderr)
                    continue
                row = json.loads(ans[3:])
                ok = ok and row.pop("_ok")
                k = row.get("kernels")
                row["work"] = ("differs: the daemon's kernels, %s launches per replay (%s plan), "
                               "against PyTorch's own kernels in its graph" % (k, label))
                row["wait"] = ("ratio_p50: equal (the host's clock from the launch to the "
                               "completion the host sees: device_us against g.replay() + "
                               "torch.cuda.synchronize()); ratio_events_p50: differs (CUDA "
                               "events: the GPU's time alone, no launch, no completion notice)")
                res["runs"][label].append(row)
        for label in labels:
            ask(label, "end")
    finally:
        for label, k in kids.items():
            try:
                k.stdin.close()
            except OSError:
                pass
            try:
                k.wait(60)
            except subprocess.TimeoutExpired:
                k.kill()
                k.wait()
            if k.returncode:
                ok = False
                logs[label].seek(0)
                sys.stderr.write(logs[label].read()[-4000:])
        for p, _, tmp in daemons.values():
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
            shutil.rmtree(tmp, ignore_errors=True)
    summary = {}
    for w in res["runs"].get("fused", []):
        u = next((x for x in res["runs"].get("unfused", []) if x["name"] == w["name"]), None)
        s = {"torch_host_p50_us": w["torch_cudagraph_host"]["p50_us"],
             "torch_events_p50_us": w["torch_cudagraph"]["p50_us"],
             "fused_device_p50_us": w["daemon_device"]["p50_us"], "fused_ratio_p50": w["ratio_p50"],
             "fused_ratio_events_p50": w["ratio_events_p50"],
             "kernels_fused": w.get("kernels"), "nodes": w.get("nodes"),
             "rel_l2_fused": w["rel_l2_vs_eager"]["daemon"], "work": w["work"]}
        if u:
            s.update({"unfused_torch_host_p50_us": u["torch_cudagraph_host"]["p50_us"],
                      "unfused_device_p50_us": u["daemon_device"]["p50_us"],
                      "unfused_ratio_p50": u["ratio_p50"],
                      "unfused_ratio_events_p50": u["ratio_events_p50"],
                      "kernels_unfused": u.get("kernels"),
                      "fused_over_unfused_p50": round(w["daemon_device"]["p50_us"] /
                                                      u["daemon_device"]["p50_us"], 3),
                      "fused_vs_unfused_work":
                          "equal" if w.get("kernels") == u.get("kernels") else
                          "differs: %s launches per replay against %s (the plan)" % (
                              w.get("kernels"), u.get("kernels"))})
        if w["name"] in TARGETS:
            s["target"] = TARGETS[w["name"]]
            s["met"] = w["ratio_p50"] <= TARGETS[w["name"]]
        summary[w["name"]] = s
        print("%-20s torch %8.1f us (events %6.1f) | fused %8.1f us (x%.3f, %s kernels) | "
              "unfused %8.1f us (x%.3f, %s kernels)%s" % (
                  w["name"], s["torch_host_p50_us"], s["torch_events_p50_us"],
                  s["fused_device_p50_us"], s["fused_ratio_p50"],
                  s["kernels_fused"], s.get("unfused_device_p50_us", float("nan")),
                  s.get("unfused_ratio_p50", float("nan")), s.get("kernels_unfused"),
                  "" if "target" not in s else "  target x%.1f %s" % (
                      s["target"], "met" if s["met"] else "NOT met")))
    print("(work differs in every ratio against torch: the daemon's kernels and plan against "
          "PyTorch's; ratios on the host's clock, launch to completion, on both sides)")
    res["summary"] = summary
    out = a.json or os.path.join(HERE, "results", "fuse-%s.json" % datetime.date.today())
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print("bench_fuse: %s" % out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
