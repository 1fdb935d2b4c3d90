#!/usr/bin/env python3
"""Three reference workloads, device time per replay, fused and unfused,
beside a torch.cuda.CUDAGraph of the same PyTorch code, in one run:

    decode_chain      32 x (layernorm -> gelu tanh), batch 1, d 1024, f16
    mlp_bs32_d1024    linear 1024->4096 -> gelu -> linear 4096->1024, batch 32, f32
    mlp_bs128_d2048   linear 2048->8192 -> gelu -> linear 8192->2048, batch 128, f32
    (and the two MLPs in f16, beside the reference ones)

(bench_python.py's definitions; f32 without TF32 on both sides.)  Two
daemons are started from BUILD: one with the default launch plans (fused)
and one with GFXGRAPH_FUSE=0.  For each, a child process (gfxgraph.enable()
keeps one daemon connection a process) captures every workload twice, with
PyTorch's own CUDA graph and through the daemon, then in alternating blocks
  torch:   g.replay() between two CUDA events on the current stream;
  daemon:  the captured program's replay(1, timed=True): its device_us (the
           daemon's time from the graph launch to the device's completion,
           seen on the host: it includes the launch and the completion's
           notice, which the events do not; so a third row, torch_host,
           times g.replay() + torch.cuda.synchronize() on the host);
and reports p50/mean of each, the ratio daemon/torch at p50, the program's
nodes and kernels (launches per replay, from stats), and the daemon
output's relative L2 error against PyTorch eager on a fresh input.
Targets: decode_chain <= 0.5, the MLPs <= 1.0, fused.

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

    def capture(model, x0):
        return rw.capture(torch, model, x0)

    def one(name, model, shape, dtype):
        model = model.cuda().to(dtype).eval()
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
            return None
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
        per = max(1, steps // blocks)
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(per)]
        tt, th, dd = [], [], []
        for _ in range(warmup):
            gt[0].replay()
            prog.replay(1, timed=True)
        torch.cuda.synchronize()
        clock = time.perf_counter_ns
        for b in range(blocks):
            for s0, s1 in ev:
                s0.record()
                gt[0].replay()
                s1.record()
            torch.cuda.synchronize()
            tt += [1000.0 * s0.elapsed_time(s1) for s0, s1 in ev]
            for _ in range(per):
                t0 = clock()
                gt[0].replay()
                torch.cuda.synchronize()
                th.append((clock() - t0) / 1000.0)
            for _ in range(per):
                rr = prog.replay(1, timed=True)
                if rr["path"] != "graph":
                    row["_ok"] = False
                dd.append(rr["device_us"])
        row["torch_cudagraph"] = summ(tt)
        row["torch_cudagraph_host"] = summ(th)
        row["daemon_device"] = summ(dd)
        row["ratio_p50"] = round(row["daemon_device"]["p50_us"] / row["torch_cudagraph"]["p50_us"], 3)
        row["ratio_host_p50"] = round(row["daemon_device"]["p50_us"] /
                                      row["torch_cudagraph_host"]["p50_us"], 3)
        for g in (gt[0], ge[0]):
            try:
                g.reset()
            except Exception:   # noqa: BLE001
                pass
        return row

    out = []
    ok = True
    with torch.no_grad():
        for name, _, make, shape, dtype, _ in rw.workloads(torch):
            try:
                row = one(name, make(), shape, dtype)
            except Exception:   # noqa: BLE001
                traceback.print_exc()
                row = None
            if row is None:
                print("FAIL: %s" % name, file=sys.stderr)
                ok = False
                continue
            ok = ok and row.pop("_ok")
            out.append(row)
            torch.cuda.empty_cache()
    print(json.dumps({"ok": ok, "workloads": out}))
    return 0 if ok else 1


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
                       "percentiles": "nearest rank"},
           "targets_ratio_p50": TARGETS, "runs": {}}
    del torch
    ok = True
    for label, denv in (("fused", {}), ("unfused", {"GFXGRAPH_FUSE": "0"})):
        p, sock, tmp = start_daemon(a.build, denv)
        try:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", sock,
                                "--steps", str(a.steps), "--blocks", str(a.blocks),
                                "--warmup", str(a.warmup)], capture_output=True, text=True,
                               env=env, timeout=900)
            sys.stderr.write(r.stderr[-4000:])
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            got = json.loads(lines[-1]) if lines else {"ok": False, "workloads": []}
            ok = ok and r.returncode == 0 and got["ok"]
            res["runs"][label] = got["workloads"]
        finally:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
            shutil.rmtree(tmp, ignore_errors=True)
    summary = {}
    for w in res["runs"].get("fused", []):
        u = next((x for x in res["runs"].get("unfused", []) if x["name"] == w["name"]), None)
        s = {"torch_p50_us": w["torch_cudagraph"]["p50_us"],
             "fused_device_p50_us": w["daemon_device"]["p50_us"], "fused_ratio_p50": w["ratio_p50"],
             "kernels_fused": w.get("kernels"), "nodes": w.get("nodes"),
             "torch_host_p50_us": w["torch_cudagraph_host"]["p50_us"],
             "fused_ratio_host_p50": w["ratio_host_p50"],
             "rel_l2_fused": w["rel_l2_vs_eager"]["daemon"]}
        if u:
            s.update({"unfused_torch_p50_us": u["torch_cudagraph"]["p50_us"],
                      "unfused_device_p50_us": u["daemon_device"]["p50_us"],
                      "unfused_ratio_p50": u["ratio_p50"], "kernels_unfused": u.get("kernels")})
        if w["name"] in TARGETS:
            s["target"] = TARGETS[w["name"]]
            s["met"] = w["ratio_p50"] <= TARGETS[w["name"]]
        summary[w["name"]] = s
        print("%-20s torch %8.1f us | fused %8.1f us (x%.3f, %s kernels) | unfused %8.1f us "
              "(x%.3f, %s kernels)%s" % (
                  w["name"], s["torch_p50_us"], s["fused_device_p50_us"], s["fused_ratio_p50"],
                  s["kernels_fused"], s.get("unfused_device_p50_us", float("nan")),
                  s.get("unfused_ratio_p50", float("nan")), s.get("kernels_unfused"),
                  "" if "target" not in s else "  target x%.1f %s" % (
                      s["target"], "met" if s["met"] else "NOT met")))
    res["summary"] = summary
    out = a.json or os.path.join(HERE, "results", "fuse-%s.json" % datetime.date.today())
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print("bench_fuse: %s" % out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
