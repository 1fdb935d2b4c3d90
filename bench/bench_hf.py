# SPDX-License-Identifier: MIT
"""Hugging Face decode steps, per family and dtype: HF eager, PyTorch's CUDA
graph, Inductor (max-autotune, no cudagraphs) captured in a CUDA graph,
torch.compile's default backend (compile-default: Inductor, no graph),
gfxgraph.enable() and torch.compile(backend="gfxgraph"), in one run.

    python3 bench/bench_hf.py --build BUILD [--mps] [--families llama] [--dtypes f16]
        [--contexts 512,2048] [--batches 1] [--size 1b|small] [--paths ...]
        [--steps 16] [--rounds 6] [--json OUT]

Every path decodes the same model with a cache of its own, prefilled with
the same prompt to the context, and the same static input ids and
position tensor (`cache_position`, advanced by one after every step,
outside the step, as a CUDA-graph decode loop does), so at each step every
path does the same work at the same position (the attention extent grows by
one a step on every path alike; the JSON states the extent).  Each row
counts the daemon's replays during its timed steps (the package's
counters): a gfxgraph path whose replays went back to PyTorch is marked
not routed.  Each case runs in a process of its own (one daemon serves
them all), so nothing of one case's enable(), Dynamo caches or memory
reaches the next.  Paths run in interleaved blocks (round r: `steps` steps of
each path in turn), each step timed on the host from its launch to
torch.cuda.synchronize() returning: the same completion wait for all.  The
last step of each block's logits are compared with the CUDA graph's of the
same step (rel-L2).  The floor row: the bytes of the weights over the copy
rate measured in the same run (a device-to-device copy of 2 GiB).

--build: a GPU build whose gfxgraphd this script starts (--backend hip, on a
private socket; --mps starts a private NVIDIA MPS control daemon first, so
the daemon and this process share the GPU instead of being time-sliced).
A gfxgraph path that falls back to PyTorch is reported with its reason
(gfxgraph.stats()["local"]) and its times are PyTorch's: "routed" says which.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = {
    # the 1B-class Llama shape of bench_decode.py
    "1b": dict(vocab_size=32000, hidden_size=2048, intermediate_size=8192,
               num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8),
    "small": dict(vocab_size=512, hidden_size=128, intermediate_size=256,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2),
}
FAMILIES = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", {}),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", {}),
    "mistral": ("MistralForCausalLM", "MistralConfig", {"sliding_window": None}),
    # Gemma2 wants a window even when every layer is full attention: one
    # wider than any context here
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", {"sliding_window": 8192,
                                                     "layer_types": "full"}),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", None),
}
ALL_PATHS = ["eager", "graph", "inductor", "compile-default", "enable", "compile"]


def start_daemon(build, mps):
    tmp = tempfile.mkdtemp(prefix="ggbenchhf.")
    env = dict(os.environ)
    mps_on = False
    if mps:
        env["CUDA_MPS_PIPE_DIRECTORY"] = os.path.join(tmp, "mps-pipe")
        env["CUDA_MPS_LOG_DIRECTORY"] = os.path.join(tmp, "mps-log")
        os.makedirs(env["CUDA_MPS_PIPE_DIRECTORY"])
        os.makedirs(env["CUDA_MPS_LOG_DIRECTORY"])
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True)
        os.environ.update({k: env[k] for k in ("CUDA_MPS_PIPE_DIRECTORY",
                                              "CUDA_MPS_LOG_DIRECTORY")})
        mps_on = True
    sock = os.path.join(tmp, "gfxgraphd.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    p = subprocess.Popen([os.path.join(build, "daemon", "gfxgraphd"), "--backend", "hip",
                          "--socket", sock, "--log-target", "stderr"], stderr=log, env=env)
    for _ in range(300):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.1)
    if not os.path.exists(sock):
        raise SystemExit("gfxgraphd did not come up: " + open(log.name).read()[-2000:])
    os.environ["GFXGRAPH_SOCKET"] = sock
    os.environ["GFXGRAPH_LIB"] = os.path.join(build, "client", "libgfxgraph-client.so.0")

    def stop():
        p.terminate()
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "killed: no exit 30 s after SIGTERM"
        if mps_on:
            # this process is still an MPS client: quit is asked for, not
            # waited on past a few seconds (the server goes when we exit)
            try:
                subprocess.run(["nvidia-cuda-mps-control"], input=b"quit", env=env, timeout=5)
            except subprocess.TimeoutExpired:
                pass
        return rc, open(log.name).read()[-4000:]
    return stop


def make_model(torch, transformers, family, size, dtype):
    cls_name, cfg_name, extra = FAMILIES[family]
    s = SIZES[size]
    if extra is None:     # GPT-2 names its dims its own way
        cfg = dict(vocab_size=s["vocab_size"], n_embd=s["hidden_size"],
                   n_layer=s["num_hidden_layers"], n_head=s["num_attention_heads"],
                   n_positions=8192, initializer_range=0.02)
    else:
        cfg = dict(s, max_position_embeddings=8192, tie_word_embeddings=False)
        for k, v in extra.items():
            cfg[k] = ["full_attention"] * s["num_hidden_layers"] if v == "full" else v
    torch.manual_seed(0)
    config = getattr(transformers, cfg_name)(**cfg)
    config._attn_implementation = "sdpa"
    with torch.device("cuda"):
        model = getattr(transformers, cls_name)(config).to(dtype).eval()
    return model, cfg


class Path:
    """One way of running the decode step over its own cache."""

    def __init__(self, name, model, batch, ctx, max_len, torch, transformers):
        from transformers import StaticCache
        self.name = name
        self.torch = torch
        self.model = model
        self.routed = None
        self.note = ""
        try:
            self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        except TypeError:
            self.cache = StaticCache(config=model.config, max_batch_size=batch,
                                     max_cache_len=max_len, device="cuda",
                                     dtype=next(model.parameters()).dtype)
        g = torch.Generator(device="cpu").manual_seed(7)
        prompt = torch.randint(0, model.config.vocab_size, (batch, ctx), generator=g).cuda()
        with torch.no_grad():
            for i in range(0, ctx, 512):
                part = prompt[:, i:i + 512]
                model(input_ids=part, past_key_values=self.cache,
                      cache_position=torch.arange(i, i + part.shape[1], device="cuda"),
                      use_cache=True)
        self.ids = torch.randint(0, model.config.vocab_size, (batch, 1), generator=g).cuda()
        # the usual static decode inputs: ids and a position tensor, advanced
        # between steps outside the step (so no path bakes a position in, and
        # Dynamo sees a tensor, not a number to specialize on)
        self.pos = torch.tensor([ctx], device="cuda")
        self.run = self.eager
        self.out = None

    def eager(self):
        with self.torch.no_grad():
            self.out = self.model(input_ids=self.ids, past_key_values=self.cache,
                                  cache_position=self.pos, use_cache=True).logits
        return self.out

    def step(self, fn=None):
        out = (fn or self.run)()
        self.pos.add_(1)
        return out

    def capture(self, fn, graph_cls, graph_ctx):
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(2):
                self.step(fn)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = graph_cls()
        with torch.no_grad(), graph_ctx(g):
            self.out = fn()
        self.graph = g
        self.run = self.replay
        return g

    def replay(self):
        self.graph.replay()
        return self.out


def copy_rate(torch):
    n = 1 << 31
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    best = None
    for _ in range(5):
        t0 = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    del a, b
    torch.cuda.empty_cache()
    return 2 * n / best      # bytes moved (read + written) per second, as a copy rate


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def prog_note(rep):
    """A routed capture's daemon program: its nodes and launches per replay."""
    if not rep:
        return ""
    return "nodes %s, kernels %s" % (rep.get("nodes"), rep.get("kernels"))


def dynamo_summary(counters):
    """What Dynamo did in a case (its compile paths): graphs, breaks, and
    the most frequent break reasons, so a compile path that ran eagerly
    says why."""
    gb = counters.get("graph_break", {})
    return {"unique_graphs": counters.get("stats", {}).get("unique_graphs", 0),
            "frames": dict(counters.get("frames", {})),
            "graph_breaks": sum(gb.values()),
            "top_breaks": [[str(k)[:200], v] for k, v in
                           sorted(gb.items(), key=lambda kv: -kv[1])[:3]],
            "recompiles": sum(counters.get("recompiles", {}).values())}


def bench_case(args, torch, transformers, gfxgraph, family, dtn, ctx, batch, rate, orig):
    # each case compiles its own model: nothing of the last case's Dynamo
    # cache (its guards, its recompile count, a backend's code) carries over
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtn]
    model, cfg = make_model(torch, transformers, family, args.size, dtype)
    wbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    # a step reads every weight once but only `batch` rows of the input
    # embedding (unless the lm_head shares it, which reads it whole)
    emb = model.get_input_embeddings().weight
    out = model.get_output_embeddings()
    if out is None or out.weight.data_ptr() != emb.data_ptr():
        wbytes -= (emb.shape[0] - batch) * emb.shape[1] * emb.element_size()
    total_steps = (args.rounds + 1) * args.steps + 4
    max_len = ctx + total_steps + 8
    paths = []
    for name in args.paths:
        p = Path(name, model, batch, ctx, max_len, torch, transformers)
        try:
            if name == "eager":
                # the captures' two warm-up steps and compile's two calls
                # advance the cache's position: eager takes the same two
                for _ in range(2):
                    p.step(p.eager)
            elif name == "graph":
                p.capture(p.eager, *orig)
                p.routed = False
            elif name == "inductor":
                f = torch.compile(p.eager, mode="max-autotune-no-cudagraphs", fullgraph=False)
                p.capture(f, *orig)
                p.routed = False
            elif name == "compile-default":
                # torch.compile's default backend (Inductor, no CUDA graph):
                # what "compile is never a loss" is measured against
                f = torch.compile(p.eager)
                with torch.no_grad():
                    for _ in range(2):
                        p.step(f)
                p.run = f
                p.routed = False
            elif name == "enable":
                gfxgraph.enable()          # stays on: its replay() goes to the daemon
                before = dict(gfxgraph.stats()["local"].get("fallback_ops", {}))
                g = p.capture(p.eager, torch.cuda.CUDAGraph, torch.cuda.graph)
                p.routed = getattr(g, "gfxgraph_program", None) is not None
                if p.routed:
                    p.note = prog_note(getattr(g, "gfxgraph_report", None))
                else:
                    now = gfxgraph.stats()["local"].get("fallback_ops", {})
                    p.note = "fell back: %s" % {k: v for k, v in now.items()
                                                if v != before.get(k)}
            elif name == "compile":
                gfxgraph.enable()          # registers the backend
                n0 = len(gfxgraph.stats()["local"].get("compile_log", []))
                f = torch.compile(p.eager, backend="gfxgraph")
                with torch.no_grad():
                    for _ in range(2):     # each graph's recording call, then its plan's first
                        p.step(f)
                p.run = f
                lg = gfxgraph.stats()["local"].get("compile_log", [])[n0:]
                p.routed = any((r.get("daemon_partitions") or 0) > 0 for r in lg)
                miss = next((r for r in lg if r.get("op")), None)
                p.note = "graphs %d, partitions %d (daemon %d, inductor %d; modes %s; %s)%s" % (
                    len(lg), sum(r.get("partitions") or 0 for r in lg),
                    sum(r.get("daemon_partitions") or 0 for r in lg),
                    sum(r.get("inductor_partitions") or 0 for r in lg),
                    ",".join(str(r.get("mode")) for r in lg),
                    "; ".join(prog_note(r) for r in lg if r.get("nodes") is not None),
                    "; first uncovered: %s (%s)" % (miss["op"], str(miss.get("why"))[:200])
                    if miss else "")
        except Exception as e:   # noqa: BLE001 -- a path that cannot run is reported
            p.note = "failed: %s: %s" % (type(e).__name__, str(e)[:300])
            p.run = None
        paths.append(p)
    times = {p.name: [] for p in paths}
    rels = {p.name: [] for p in paths}
    # the daemon's replays per path, from the package's counters: a path
    # routed at capture whose replays went back to PyTorch shows it here
    replays = {p.name: 0 for p in paths}

    def daemon_replays():
        st = gfxgraph.stats()["local"]
        return st.get("replays", 0) + st.get("compiled_replays", 0)
    torch.cuda.synchronize()
    for r in range(args.rounds + 1):          # round 0 warms every path up
        for p in paths:
            if p.run is None:
                continue
            last = None
            n0 = daemon_replays()
            for _ in range(args.steps):
                t0 = time.perf_counter()
                last = p.step()
                torch.cuda.synchronize()
                if r:
                    times[p.name].append((time.perf_counter() - t0) * 1e6)
            if r:
                replays[p.name] += daemon_replays() - n0
            p.last = last.float().clone()
        ref = next((p.last for p in paths if p.name == "graph" and p.run is not None), None)
        if r and ref is not None:
            for p in paths:
                if p.run is not None:
                    rels[p.name].append(float((p.last - ref).norm() / ref.norm().clamp_min(1e-30)))
    floor_us = wbytes / rate * 1e6   # the weights read once at the copy rate
    rows = []
    gp50 = statistics.median(times["graph"]) if times.get("graph") else None
    for p in paths:
        t = times[p.name]
        row = {"path": p.name, "routed": p.routed, "note": p.note,
               "daemon_replays": replays[p.name], "steps_timed": len(t)}
        if p.routed and replays[p.name] < len(t):
            row["routed"] = False
            row["note"] += "; only %d of %d timed steps replayed by the daemon" % (
                replays[p.name], len(t))
        if t:
            p50 = statistics.median(t)
            row.update(p50_us=round(p50, 1), p99_us=round(pct(t, 0.99), 1),
                       tokens_per_s=round(batch * 1e6 / p50, 1),
                       x_floor=round(p50 / floor_us, 3),
                       x_graph=round(p50 / gp50, 3) if gp50 else None,
                       logits_rel_l2_vs_graph_max=max(rels[p.name]) if rels[p.name] else None)
        rows.append(row)
    del paths, model
    torch.cuda.empty_cache()
    return {"family": family, "dtype": dtn, "context": ctx, "batch": batch, "size": args.size,
            "config": cfg, "weights_read_bytes": wbytes,
            "attention_extent": [ctx, ctx + total_steps],
            "floor_us": round(floor_us, 1), "rows": rows, "dynamo": dynamo_summary(counters)}


def one_case(args):
    """--one FAMILY,DTYPE,CONTEXT,BATCH: one case in this process (a fresh
    one per case: nothing of a case's enable(), Dynamo caches or memory
    reaches the next), its result as JSON in --json."""
    import torch
    import transformers
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    # PyTorch's own graph class and capture context, before enable()
    # replaces them (its torch.cuda.graph takes a PyTorch graph in too): the
    # graph and inductor paths capture with these
    orig = (torch.cuda.CUDAGraph, torch.cuda.graph)
    import gfxgraph
    fam, dtn, ctx, b = args.one.split(",")
    rate = copy_rate(torch)
    case = bench_case(args, torch, transformers, gfxgraph, fam, dtn, int(ctx), int(b), rate, orig)
    case["copy_rate_bytes_per_s"] = rate
    case["env"] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "transformers": transformers.__version__}
    gfxgraph.disable()
    with open(args.json, "w") as f:
        json.dump(case, f)
    return 0


def run_child(args, fam, dtn, ctx, b):
    """One case in a fresh process; its result, or None (reported) when it
    failed."""
    fd, path = tempfile.mkstemp(prefix="ggbenchhf.", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), "--build", args.build,
           "--one", "%s,%s,%d,%d" % (fam, dtn, ctx, b), "--size", args.size,
           "--paths", ",".join(args.paths), "--steps", str(args.steps),
           "--rounds", str(args.rounds), "--json", path]
    try:
        rc = subprocess.run(cmd).returncode
        if rc != 0:
            print("case %s %s ctx %d batch %d: exit %d" % (fam, dtn, ctx, b, rc))
            return None
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--mps", action="store_true")
    ap.add_argument("--families", default="llama")
    ap.add_argument("--dtypes", default="f16")
    ap.add_argument("--contexts", default="512,2048")
    ap.add_argument("--batches", default="1")
    ap.add_argument("--size", default="1b", choices=sorted(SIZES))
    ap.add_argument("--paths", default=",".join(ALL_PATHS))
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--json")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.paths = args.paths.split(",")
    if args.one:
        return one_case(args)
    stop = start_daemon(args.build, args.mps)
    out = {"bench": "bench_hf", "mps": args.mps,
           "commit": os.environ.get("GFXGRAPH_GIT_COMMIT", "unknown"),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "isolation": "each case in a process of its own (one daemon for all)",
           "floor": "the weights a step reads (all but the unread embedding rows) over the copy rate",
           "sync": "every step: host launch/replay, then torch.cuda.synchronize()",
           "work": "the same step (model, cache state, position and inputs) on every path, "
                   "each warmed up by two steps; the kernels differ: PyTorch's (eager, graph), "
                   "Inductor's (inductor), the daemon's fused plan (enable, compile)",
           "cases": []}
    failed = 0
    for fam in args.families.split(","):
        for dtn in args.dtypes.split(","):
            for ctx in [int(c) for c in args.contexts.split(",")]:
                for b in [int(x) for x in args.batches.split(",")]:
                    case = run_child(args, fam, dtn, ctx, b)
                    if case is None:
                        failed += 1
                        continue
                    out.update(case.pop("env"))
                    out["cases"].append(case)
                    print(json.dumps({k: case[k] for k in ("family", "dtype", "context", "batch",
                                                           "floor_us")}))
                    for row in case["rows"]:
                        print("   ", json.dumps(row))
                    print("    dynamo:", json.dumps(case["dynamo"]))
                    sys.stdout.flush()
    if args.json:       # written before the stop, which a stuck daemon could outlast
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    rc, log = stop()
    out["daemon_exit"] = rc
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if rc != 0:
        print("daemon exited %s:\n%s" % (rc, log))
    return 0 if rc == 0 and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
