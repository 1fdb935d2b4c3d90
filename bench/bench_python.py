#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Python package on a GPU, against a `gfxgraphd --backend hip`:

(a) the three reference workloads (tests/gpu/python/test_torch_cudagraph.py's
    definitions: the decode chain, layernorm -> gelu(tanh) x 32, batch 1,
    d 1024, f16; mlp_bs32_d1024 and mlp_bs128_d2048, linear -> gelu ->
    linear with a 4x hidden, f32 without TF32 as in the test, plus f16 rows)
    captured the usual way and stepped with the same code,
        static_x.copy_(x); g.replay(); torch.cuda.synchronize()
    once with PyTorch's own torch.cuda.CUDAGraph (captured before enable())
    and under gfxgraph.enable(): sync="stream" (the default: the current
    stream synchronised on the host first), and rows for sync="gpu" (the
    daemon's stream waits for an event of the current stream) and
    sync="events" (asynchronous).  All the graphs live side by side and are stepped in
    alternating blocks so drift falls on both.  Per-step wall time
    (perf_counter_ns) p50/p90/p99; ratio gfxgraph/torch at p50 and p99
    (target <= 1.0).  The ratio compares different work: the daemon's
    kernels in its default plan (fused: the chain's 64 nodes in two
    launches) against PyTorch's own kernels; each workload's `work` and
    `daemon_plan` (nodes, launches per replay) say so.
(b) the package's own cost per replay (the same work in every row): one client, one 1-node program
    (`scale` on [1, 1024] f32 in torch CUDA tensors registered by IPC),
    replayed in alternating blocks by
      python    program.replay(1)                   (the package's API)
      ctypes    lib.gg_client_replay(...) directly  (the C function through
                ctypes, no package code)
      c         a C loop calling gg_client_replay   (a tiny helper compiled
                here with cc; the library's own round trip, no Python)
    overhead = python p50 - c p50 (target <= 3 us); the same on a second
    client connected with GFXGRAPH_FASTPATH=0 (the socket path).

    bench_python.py [--socket PATH | --build DIR] [--json FILE] [--steps N]
        [--replays N] [--commit SHA] [--label TEXT]

Without --socket it starts DIR/daemon/gfxgraphd --backend hip on a temporary
socket (and stops it).  GFXGRAPH_LIB defaults to DIR/client's library.
Exit: 0 measured; 1 a workload was not routed to the daemon or a replay
failed; 77 no torch / no CUDA device.
"""
import argparse
import ctypes
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


def pct(ns, q):
    """Nearest-rank percentile of a list of nanoseconds, in microseconds."""
    s = sorted(ns)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k] / 1000.0


def summary(ns):
    return {"n": len(ns), "p50_us": round(pct(ns, 50), 3), "p90_us": round(pct(ns, 90), 3),
            "p99_us": round(pct(ns, 99), 3), "min_us": round(min(ns) / 1000.0, 3),
            "mean_us": round(sum(ns) / len(ns) / 1000.0, 3)}


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:   # noqa: BLE001
        return ""


def git_commit(arg):
    if arg:
        return arg
    if os.environ.get("GFXGRAPH_GIT_COMMIT"):
        return os.environ["GFXGRAPH_GIT_COMMIT"]
    f = os.path.join(SRC, "COMMIT")
    if os.path.isfile(f):
        return open(f).read().strip()
    return sh(["git", "-C", SRC, "rev-parse", "HEAD"]) or None


def start_daemon(build):
    exe = os.path.join(build, "daemon", "gfxgraphd")
    tmp = tempfile.mkdtemp(prefix="ggbenchpy.")
    sock = os.path.join(tmp, "gfxgraphd.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    p = subprocess.Popen([exe, "--backend", "hip", "--socket", sock, "--log-target", "stderr"],
                         stderr=log)
    for _ in range(300):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.1)
    if not os.path.exists(sock):
        p.kill()
        sys.exit("gfxgraphd did not come up: " + open(os.path.join(tmp, "daemon.log")).read())
    return p, sock, tmp


# ---- (a) the three reference workloads ----------------------------------------------

def workloads_a(torch, gfxgraph, sock, steps, blocks, warmup, out):

    import importlib
    import ref_workloads as rw
    ggstats = importlib.import_module("gfxgraph.stats")   # the module, not gfxgraph.stats()

    def capture(model, x0):
        return rw.capture(torch, model, x0)

    ok = True
    for name, what, make, shape, dtype, seed in rw.workloads(torch):
        model = make().cuda().to(dtype).eval()
        row = {"name": name, "what": what, "shape": list(shape),
               "dtype": str(dtype).replace("torch.", ""), "seed_workload": seed}
        with torch.no_grad():
            x = torch.randn(shape, device="cuda", dtype=dtype)
            gfxgraph.disable()
            gt = capture(model, x)                           # PyTorch's own graph
            gfxgraph.enable(socket=sock)                     # the default, sync="stream"
            ge = capture(model, x)                           # through the daemon
            gfxgraph.enable(socket=sock, sync="events")      # sync is read at capture
            gs = capture(model, x)
            gfxgraph.enable(socket=sock, sync="gpu")
            gh = capture(model, x)
            gfxgraph.enable(socket=sock)
            modes = {"torch_cudagraph": gt, "gfxgraph": ge, "gfxgraph_events": gs,
                     "gfxgraph_gpu": gh}
            row["routed"] = {k: getattr(v[0], "gfxgraph_program", None) is not None
                             for k, v in modes.items() if k != "torch_cudagraph"}
            if not all(row["routed"].values()):
                ok = False
                print("FAIL: %s: capture not routed to the daemon: %r" % (name, row["routed"]))
            # correctness of the timed code: equal outputs for a fresh input
            xin = torch.randn(shape, device="cuda", dtype=dtype)
            for g, sx, sy in modes.values():
                sx.copy_(xin)
                g.replay()
            torch.cuda.synchronize()
            ref = model(xin)
            row["rel_l2_vs_eager"] = {k: rw.rel(v[2], ref) for k, v in modes.items()}
            # the daemon's plan for each routed capture: launches per replay
            ids = {k: v[0].gfxgraph_program.id for k, v in modes.items()
                   if getattr(v[0], "gfxgraph_program", None) is not None}
            kern = {}
            for e in ggstats.call("stats", sock).get("cache", []):
                for k, pid in ids.items():
                    if e.get("program") == pid and "kernels" in e:
                        kern[k] = (e.get("nodes"), e["kernels"])
            row["daemon_plan"] = {k: {"nodes": n, "kernels": kk} for k, (n, kk) in kern.items()}
            ks = sorted({kk for _, kk in kern.values()})
            row["work"] = ("differs: the daemon's kernels (%s launches per replay, the daemon's "
                           "default plan, fusion on) against PyTorch's own kernels in its graph; "
                           "the four modes through the daemon run the same program" %
                           ("/".join(str(k) for k in ks) or "?"))
            st0 = gfxgraph.stats(sock)["local"]

            def step(g, sx):
                sx.copy_(x)
                g.replay()
                torch.cuda.synchronize()

            for g, sx, _ in modes.values():
                for _ in range(warmup):
                    step(g, sx)
            ns = {k: [] for k in modes}
            per = max(1, steps // blocks)
            clock = time.perf_counter_ns
            for b in range(blocks):
                order = list(modes.items())
                if b % 2:
                    order.reverse()
                for k, (g, sx, _) in order:
                    acc = ns[k]
                    for _ in range(per):
                        t0 = clock()
                        sx.copy_(x)
                        g.replay()
                        torch.cuda.synchronize()
                        acc.append(clock() - t0)
            st1 = gfxgraph.stats(sock)["local"]
        row["steps"] = {k: summary(v) for k, v in ns.items()}
        t, e = row["steps"]["torch_cudagraph"], row["steps"]["gfxgraph"]
        s = row["steps"]["gfxgraph_events"]
        row["ratio_p50"] = round(e["p50_us"] / t["p50_us"], 3)
        row["ratio_p99"] = round(e["p99_us"] / t["p99_us"], 3)
        row["ratio_events_p50"] = round(s["p50_us"] / t["p50_us"], 3)
        row["ratio_events_p99"] = round(s["p99_us"] / t["p99_us"], 3)
        hs = row["steps"]["gfxgraph_gpu"]
        row["ratio_gpu_p50"] = round(hs["p50_us"] / t["p50_us"], 3)
        row["ratio_gpu_p99"] = round(hs["p99_us"] / t["p99_us"], 3)
        row["target_ratio"] = 1.0
        row["met_p50"] = row["ratio_p50"] <= 1.0
        row["met_p99"] = row["ratio_p99"] <= 1.0
        want = (warmup + per * blocks) * 3
        row["daemon_replays_in_timing"] = st1["replays"] - st0["replays"]
        row["fallbacks_in_timing"] = st1["fallback_count"] - st0["fallback_count"]
        if row["daemon_replays_in_timing"] != want or row["fallbacks_in_timing"]:
            ok = False
            print("FAIL: %s: %d daemon replays in the timing (want %d), %d fallbacks"
                  % (name, row["daemon_replays_in_timing"], want, row["fallbacks_in_timing"]))
        print("%-20s torch p50 %8.1f p99 %8.1f | gfxgraph p50 %8.1f p99 %8.1f (x%.3f / x%.3f) "
              "| events p50 %8.1f | gpu p50 %8.1f us" % (name, t["p50_us"], t["p99_us"], e["p50_us"],
                                                   e["p99_us"], row["ratio_p50"],
                                                   row["ratio_p99"], s["p50_us"], hs["p50_us"]))
        print("%-20s work: %s" % ("", row["work"]))
        sys.stdout.flush()
        out.append(row)
        for g, _, _ in modes.values():
            try:
                g.reset()
            except Exception:   # noqa: BLE001
                pass
        del modes, gt, ge, gs, gh
        torch.cuda.empty_cache()
    return ok


# ---- (b) the package's own cost per replay ---------------------------------

C_LOOP = r"""
#include <stdint.h>
#include <time.h>
#include <gfxgraph/client.h>
typedef int (*replay_fn)(gg_client *, uint64_t, int, int, gg_replay_result *);
int gg_bench_loop(void *fn, gg_client *c, uint64_t prog, int batch, int n, int64_t *ns)
{
    replay_fn f = (replay_fn)fn;
    gg_replay_result r;
    struct timespec a, b;
    for (int i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        int rc = f(c, prog, batch, 0, &r);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (rc < 0)
            return rc;
        ns[i] = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    }
    return n;
}
"""


def build_c_loop(tmp):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None, "no C compiler"
    src = os.path.join(tmp, "ggloop.c")
    so = os.path.join(tmp, "ggloop.so")
    with open(src, "w") as f:
        f.write(C_LOOP)
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-I", os.path.join(SRC, "client", "include"),
                        "-o", so, src], capture_output=True, text=True)
    if r.returncode != 0:
        return None, "cc failed: " + r.stderr[-500:]
    lib = ctypes.CDLL(so)
    lib.gg_bench_loop.restype = ctypes.c_int
    lib.gg_bench_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                                  ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    return lib, cc


def overhead_b(torch, gfxgraph, sock, n, blocks, warmup, cloop):
    from gfxgraph import _lib as L

    def one(fastpath):
        old = os.environ.get("GFXGRAPH_FASTPATH")
        if not fastpath:
            os.environ["GFXGRAPH_FASTPATH"] = "0"         # read by the library at connect
        try:
            c = gfxgraph.Client(sock, name="bench_python%s" % ("" if fastpath else "-socket"))
        finally:
            if old is None:
                os.environ.pop("GFXGRAPH_FASTPATH", None)
            else:
                os.environ["GFXGRAPH_FASTPATH"] = old
        x = torch.randn(1, 1024, device="cuda")
        y = torch.zeros(1, 1024, device="cuda")
        torch.cuda.synchronize()
        prog = c.define({"name": "onenode", "buckets": [1],
                         "tensors": {"x": {"dtype": "f32", "shape": ["batch", 1024],
                                           "buffer": c.register(x)},
                                     "y": {"dtype": "f32", "shape": ["batch", 1024],
                                           "buffer": c.register(y)}},
                         "nodes": [{"op": "scale", "inputs": ["x"], "outputs": ["y"],
                                    "attrs": {"scale": 0.5}}]})
        prog.prepare()
        r0 = prog.replay(1)
        correct = bool(torch.allclose(y, x * 0.5))
        lib = c._lib
        fn = lib.gg_client_replay
        h = c._c
        pid = prog.id
        res = L.ReplayResult()
        ref = ctypes.byref(res)
        fnptr = ctypes.cast(fn, ctypes.c_void_p).value
        per = max(1, n // blocks)
        buf = (ctypes.c_int64 * per)()
        clock = time.perf_counter_ns
        rep = prog.replay

        def py_block(acc, k):
            for _ in range(k):
                t0 = clock()
                rep(1)
                acc.append(clock() - t0)

        def ct_block(acc, k):
            for _ in range(k):
                t0 = clock()
                rc = fn(h, pid, 1, 0, ref)
                acc.append(clock() - t0)
                if rc < 0:
                    raise RuntimeError("gg_client_replay: %d" % rc)

        def c_block(acc, k):
            rc = cloop.gg_bench_loop(fnptr, h, pid, 1, k, buf)
            if rc < 0:
                raise RuntimeError("gg_client_replay (C loop): %d" % rc)
            acc.extend(buf[:k])

        kinds = [("python", py_block), ("ctypes", ct_block)]
        if cloop is not None:
            kinds.append(("c", c_block))
        for _, f in kinds:
            f([], min(warmup, per))
        ns = {k: [] for k, _ in kinds}
        for b in range(blocks):
            order = kinds if b % 2 == 0 else kinds[::-1]
            for k, f in order:
                f(ns[k], per)
        # the timer's own cost in a Python loop
        tm = []
        for _ in range(per):
            t0 = clock()
            tm.append(clock() - t0)
        out = {"fastpath_status": c.fastpath_status, "first_replay": r0,
               "work": "equal: the same client, program and replay call in every row",
               "result_correct": correct, "timer_overhead_py_p50_us": round(pct(tm, 50), 3),
               "rows": {k: summary(v) for k, v in ns.items()}}
        rows = out["rows"]
        base = "c" if "c" in rows else "ctypes"
        out["baseline"] = base
        out["overhead_p50_us"] = round(rows["python"]["p50_us"] - rows[base]["p50_us"], 3)
        out["overhead_p99_us"] = round(rows["python"]["p99_us"] - rows[base]["p99_us"], 3)
        out["ctypes_over_c_p50_us"] = (round(rows["ctypes"]["p50_us"] - rows["c"]["p50_us"], 3)
                                       if "c" in rows else None)
        out["package_over_ctypes_p50_us"] = round(rows["python"]["p50_us"] -
                                                  rows["ctypes"]["p50_us"], 3)
        out["target_us"] = 3.0
        out["met"] = out["overhead_p50_us"] <= 3.0
        print("replay %-6s (%s): python p50 %.2f p99 %.2f | ctypes p50 %.2f | c p50 %s p99 %s "
              "| overhead p50 %.2f us (vs %s)" % (
                  "fast" if fastpath else "socket", c.fastpath_status,
                  rows["python"]["p50_us"], rows["python"]["p99_us"], rows["ctypes"]["p50_us"],
                  rows["c"]["p50_us"] if "c" in rows else "-",
                  rows["c"]["p99_us"] if "c" in rows else "-", out["overhead_p50_us"], base))
        sys.stdout.flush()
        prog.release()
        c.close()
        return out, correct

    fast, ok1 = one(True)
    sock_, ok2 = one(False)
    return {"program": "scale [1, 1024] f32, torch CUDA tensors registered by IPC, bucket 1",
            "replays_per_row": n, "blocks": blocks, "fast": fast, "socket": sock_,
            "work_fast_vs_socket": "equal: the same program, two clients (fast path, socket)"}, \
        ok1 and ok2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket")
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--json")
    ap.add_argument("--steps", type=int, default=2000, help="timed steps per mode per workload")
    ap.add_argument("--replays", type=int, default=20000, help="timed replays per row in (b)")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--commit")
    ap.add_argument("--label", default="")
    a = ap.parse_args()

    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False     # the daemon's f32 linear has no TF32
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)

    daemon = tmp = None
    lib = os.path.join(a.build, "client", "libgfxgraph-client.so.0")
    if not os.environ.get("GFXGRAPH_LIB") and os.path.exists(lib):
        os.environ["GFXGRAPH_LIB"] = lib
    sys.path.insert(0, os.path.join(SRC, "python"))
    import gfxgraph
    sock = a.socket
    if not sock:
        daemon, sock, tmp = start_daemon(a.build)
    ctmp = tempfile.mkdtemp(prefix="ggloop.")
    try:
        cloop, ccinfo = build_c_loop(ctmp)
        info = gfxgraph.Client(sock, name="bench_python-info")
        dev = {"backend": info.backend, "device": info.device, "arch": info.arch,
               "server_version": info.server_version, "fastpath_status": info.fastpath_status}
        info.close()
        smi = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                  "--format=csv,noheader"]).split(", ")
        res = {
            "bench": "bench_python", "label": a.label,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "git_commit": git_commit(a.commit), "host": _socket.gethostname(),
            "gpu": {"name": torch.cuda.get_device_name(0),
                    "driver": smi[1] if len(smi) > 1 else None,
                    "memory": smi[2] if len(smi) > 2 else None,
                    "capability": ".".join(map(str, torch.cuda.get_device_capability(0)))},
            "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "python": platform.python_version(), "gfxgraph": gfxgraph.__version__,
            "library": gfxgraph.library_path(), "daemon": dev,
            "c_loop": {"built": cloop is not None, "compiler": ccinfo},
            "options": {"steps": a.steps, "replays": a.replays, "blocks": a.blocks,
                        "warmup": a.warmup, "allow_tf32": False,
                        "step": "static_x.copy_(x); g.replay(); torch.cuda.synchronize(), "
                                "perf_counter_ns around it",
                        "percentiles": "nearest rank"},
            "workloads": [],
        }
        print("bench_python: %s, driver %s, torch %s, daemon %s %s (%s), commit %s" % (
            res["gpu"]["name"], res["gpu"]["driver"], res["torch"], dev["backend"],
            dev["server_version"], dev["fastpath_status"], res["git_commit"]))
        if dev["backend"] != "hip":
            print("FAIL: the daemon runs the %s backend (want hip)" % dev["backend"])
            return 1
        gfxgraph.enable(socket=sock)
        ok_a = workloads_a(torch, gfxgraph, sock, a.steps, a.blocks, a.warmup, res["workloads"])
        gfxgraph.disable()
        res["replay_overhead"], ok_b = overhead_b(torch, gfxgraph, sock, a.replays, a.blocks,
                                                  a.warmup, cloop)
        st = gfxgraph.stats(sock)
        res["daemon_stats"] = {k: st.get(k) for k in ("capture_count", "replay_count",
                                                      "fallback_count", "avg_replay_us",
                                                      "validation_failures")}
        res["local_stats"] = st.get("local")
        seed = [w for w in res["workloads"] if w["seed_workload"]]
        res["summary"] = {
            "a_work": "differs: the daemon's kernels and fused plan against PyTorch's own "
                      "kernels (each workload's work field)",
            "a_seed_workloads": {w["name"]: {"torch_p50_us": w["steps"]["torch_cudagraph"]["p50_us"],
                                             "torch_p99_us": w["steps"]["torch_cudagraph"]["p99_us"],
                                             "gfxgraph_p50_us": w["steps"]["gfxgraph"]["p50_us"],
                                             "gfxgraph_p99_us": w["steps"]["gfxgraph"]["p99_us"],
                                             "ratio_p50": w["ratio_p50"],
                                             "ratio_p99": w["ratio_p99"]} for w in seed},
            "a_met_p50": all(w["met_p50"] for w in seed),
            "a_met_p99": all(w["met_p99"] for w in seed),
            "b_overhead_fast_p50_us": res["replay_overhead"]["fast"]["overhead_p50_us"],
            "b_overhead_socket_p50_us": res["replay_overhead"]["socket"]["overhead_p50_us"],
            "b_met": res["replay_overhead"]["fast"]["met"],
            "all_routed_and_correct": bool(ok_a and ok_b),
        }
        if a.json:
            os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)
                f.write("\n")
            print("wrote %s" % a.json)
        print("RESULT " + json.dumps(res["summary"]))
        return 0 if ok_a and ok_b else 1
    finally:
        shutil.rmtree(ctmp, ignore_errors=True)
        if daemon is not None:
            daemon.terminate()
            daemon.wait(30)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
