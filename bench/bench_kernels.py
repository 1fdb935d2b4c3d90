#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The project's kernels beside PyTorch's for the same cases, in one run.

    python3 bench/bench_kernels.py --bin BUILD/bench/bench_kernels --out FILE.json
        [--only SUBSTR[|SUBSTR...]] [--trials N] [--commit SHA]

Runs bench_kernels (the project's kernels through gg_gpu_op_launch, and the
device-to-device copy ceiling), then times PyTorch's kernels for every case it
reports, the same way: the same shapes and dtypes, the same number of operand
copies rotated over (so that launches read memory outside L2), the same
launches per captured graph (torch.cuda.CUDAGraph), the median of the same
number of graph replays timed with CUDA events, over the launches; the two
sides in --rounds alternating rounds (default 3: ours, PyTorch's, ours, ...),
each side's time the median of its rounds.  Writes one
JSON with provenance (commit, device, driver, torch, date), the copy ceiling,
and per case: our time and GB/s, the percentage of the copy ceiling, torch's
time and our time over torch's.  Prints the table last.

PyTorch has no kernel of its own for some ops; what stands in is named in the
row ("torch_impl"): silu_mul is silu(a) * b (two kernels), rope is the
Hugging Face rotate_half form (several kernels), cache_write an index_put_,
attention_decode scaled_dot_product_attention with enable_gqa over the
[B, S, Hkv, Dh] cache seen as [B, Hkv, S, Dh].

Each compared row carries `work`: "equal", or "differs: how" where
PyTorch's stand-in does other work (silu_mul, rope, argmax's int64 output).

A read_ceiling row (no PyTorch counterpart) is one plain kernel reading the
same K and V bytes as the attention case of that size, rotated the same way:
the attention row reports its time over that one (over_read_ceiling).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile


def run_ours(args):
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [args.bin, "--json", path, "--trials", str(args.trials)]
    if args.only:
        cmd += ["--only", args.only]
    if args.commit:
        cmd += ["--commit", args.commit]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        raise SystemExit(f"bench_kernels failed with exit status {p.returncode}")
    with open(path) as f:
        data = json.load(f)
    os.unlink(path)
    return data


def torch_case(torch, F, case):
    """(make_set, fn, impl): make_set() builds one copy of the operands, fn(set)
    launches torch's kernels on it."""
    name, op = case["name"], case["op"]
    ins = case["inputs"]
    dev = "cuda"
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}

    def rnd(d):
        return (torch.rand(d["dims"], device=dev, dtype=torch.float32) * 4 - 2).to(dt[d["dtype"]])

    if op in ("copy", "add", "mul", "scale", "gelu", "silu", "silu_mul"):
        out = case["output"]

        def make():
            s = [rnd(d) for d in ins]
            s.append(torch.empty(out["dims"], device=dev, dtype=dt[out["dtype"]]))
            return s

        if op == "copy":
            return make, lambda s: s[1].copy_(s[0]), "Tensor.copy_"
        if op == "add":
            return make, lambda s: torch.add(s[0], s[1], out=s[2]), "torch.add(out=)"
        if op == "mul":
            return make, lambda s: torch.mul(s[0], s[1], out=s[2]), "torch.mul(out=)"
        if op == "scale":
            return make, lambda s: torch.mul(s[0], 1.0, out=s[1]), "torch.mul(scalar, out=)"
        if op == "gelu":
            approx = "tanh" if name.endswith("tanh") else "none"
            return make, lambda s: F.gelu(s[0], approximate=approx), f"F.gelu({approx})"
        if op == "silu":
            return make, lambda s: F.silu(s[0]), "F.silu"
        return make, lambda s: F.silu(s[0]) * s[1], "F.silu(a) * b (2 kernels)"
    if op in ("rmsnorm", "layernorm"):
        d = ins[0]["dims"][-1]

        def make():
            return [rnd(x) for x in ins]

        if op == "rmsnorm":
            return make, lambda s: F.rms_norm(s[0], (d,), s[1], 1e-6), "F.rms_norm"
        return make, lambda s: F.layer_norm(s[0], (d,), s[1], s[2], 1e-5), "F.layer_norm"
    if op == "softmax":
        return (lambda: [rnd(ins[0])]), lambda s: torch.softmax(s[0], -1), "torch.softmax"
    if op == "argmax":
        return (lambda: [rnd(ins[0])]), lambda s: torch.argmax(s[0], -1), "torch.argmax"
    if op == "cast":
        out = case["output"]

        def make():
            return [rnd(ins[0]), torch.empty(out["dims"], device=dev, dtype=dt[out["dtype"]])]

        return make, lambda s: s[1].copy_(s[0]), "Tensor.copy_ (dtype conversion)"
    if op == "embedding":
        V = ins[1]["dims"][0]

        def make():
            ids = torch.randint(0, V, ins[0]["dims"], device=dev, dtype=torch.int32)
            return [ids, rnd(ins[1])]

        return make, lambda s: F.embedding(s[0], s[1]), "F.embedding"
    if op == "rope":
        B, H, Dh = ins[0]["dims"]
        inv = 1.0 / (10000.0 ** (torch.arange(0, Dh, 2, device=dev, dtype=torch.float32) / Dh))

        def make():
            pos = torch.randint(0, 4096, (B,), device=dev, dtype=torch.int32)
            return [rnd(ins[0]), pos]

        def rope(s):
            x, pos = s
            fr = pos[:, None].float() * inv[None, :]
            emb = torch.cat((fr, fr), dim=-1)
            cos = emb.cos().to(x.dtype)[:, None, :]
            sin = emb.sin().to(x.dtype)[:, None, :]
            x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
            rot = torch.cat((-x2, x1), dim=-1)
            return x * cos + rot * sin

        return make, rope, "HF rotate_half rope (several kernels)"
    if op == "cache_write":
        B = ins[0]["dims"][0]
        S = case["output"]["dims"][1]
        rows = torch.arange(B, device=dev)

        def make():
            pos = torch.randint(0, S, (B,), device=dev, dtype=torch.int64)
            cache = rnd(case["output"])
            return [rnd(ins[0]), pos, cache]

        def cw(s):
            s[2].index_put_((rows, s[1]), s[0])

        return make, cw, "Tensor.index_put_ (cache[b, pos[b]] = x[b])"
    if op == "attention_decode":
        B, Hq, Dh = ins[0]["dims"]
        _, S, Hkv, _ = ins[1]["dims"]

        def make():
            return [rnd(ins[0]), rnd(ins[1]), rnd(ins[2])]

        def attn(s):
            q = s[0].view(B, Hq, 1, Dh)
            k = s[1].permute(0, 2, 1, 3)
            v = s[2].permute(0, 2, 1, 3)
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

        return make, attn, "F.scaled_dot_product_attention(enable_gqa=True)"
    if op == "linear":
        def make():
            return [rnd(ins[0]), rnd(ins[1])]

        return make, lambda s: F.linear(s[0], s[1]), "F.linear"
    return None


def work_of(case):
    """Whether PyTorch's stand-in does the op's work: "equal" (the same
    operands read, the same result written, one graph of the same launches
    count) or "differs: how"."""
    op = case["op"]
    if op == "silu_mul":
        return "differs: PyTorch has no fused silu_mul: silu(a) * b, two kernels and an intermediate"
    if op == "rope":
        return ("differs: PyTorch's rotate_half form computes cos and sin from the positions "
                "and rotates in several kernels")
    if op == "argmax":
        return "differs: PyTorch writes int64 indices, this op int32 (the output only)"
    if op == "attention_decode":
        return "equal: the same K and V extent (lens = S) and GQA groups"
    return "equal"


def time_torch(torch, F, case, trials):
    spec = torch_case(torch, F, case)
    if spec is None:
        return None
    make, fn, impl = spec
    sets = [make() for _ in range(case["sets"])]
    reps = case["reps"]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for s in sets:  # warm-up outside capture (library handles, algorithm picks)
            fn(s)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for r in range(reps):
            fn(sets[r % len(sets)])
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(trials):
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        t.append(e0.elapsed_time(e1) * 1000.0 / reps)
    del g, sets
    torch.cuda.empty_cache()
    return {"us": statistics.median(t), "us_min": min(t), "impl": impl}


def torch_copy_ceiling(torch, trials):
    n = 256 << 20
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    r = []
    for _ in range(trials):
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        r.append(2.0 * n / (e0.elapsed_time(e1) * 1e6))
    del a, b
    torch.cuda.empty_cache()
    return statistics.median(r)


def gpu_driver():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0]
    except Exception:
        return "unknown"


def targets(case, pct, ratio):
    """The targets that apply to the case: memory-bound ops past L2 (a case
    run on one operand set) and f16 linear as the op runs it (the `linear`
    rows) >= 80 % of the copy ceiling; device time <= 1.0x PyTorch's for
    every case.  A linear forced into one mode beside the op's own pick
    (linear:own, linear:blas, linear:lin32-blas) is there for comparison and
    has none; f32 linear (linear:lin32-auto) only the PyTorch ratio."""
    out = {}
    name = case["name"]
    if case["op"] == "linear":
        if name != "linear" and not name.endswith("-auto"):
            return out
        if name == "linear":
            out["pct_copy_ge_80"] = pct >= 80.0
    elif case["sets"] == 1:
        out["pct_copy_ge_80"] = pct >= 80.0
    if ratio is not None:
        out["ratio_le_1"] = ratio <= 1.0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of (this project's kernels, PyTorch's), alternating")
    ap.add_argument("--commit", default=os.environ.get("GFXGRAPH_GIT_COMMIT"))
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    # f32 linear without TF32 on both sides (the project runs pedantic f32)
    torch.backends.cuda.matmul.allow_tf32 = False

    # Rounds of the whole suite, ours then PyTorch's, alternating, so that
    # drift of the clocks or of the machine falls on both sides; a case's
    # time on each side is the median of its rounds' medians.
    rounds = max(1, args.rounds)
    ours_r, torch_r, copies = [], [], []
    for r in range(rounds):
        o = run_ours(args)
        ours_r.append(o)
        copies.append(o["copy_ceiling_gbs"])
        tr = {}
        for case in o["cases"]:
            if "us" not in case:
                continue
            try:
                t = time_torch(torch, F, case, args.trials)
            except Exception as e:  # a case torch cannot run is reported, not fatal
                t = {"error": f"{type(e).__name__}: {e}"}
                torch.cuda.empty_cache()
            if t is not None:
                tr[case["name"] + "|" + case["shape"]] = t
        torch_r.append(tr)
    ours = ours_r[-1]
    copy = statistics.median(copies)
    rows = []
    for case in ours["cases"]:
        row = dict(case)
        if "us" not in case:
            rows.append(row)
            continue
        key = case["name"] + "|" + case["shape"]
        mine = [c for o in ours_r for c in o["cases"]
                if c["name"] + "|" + c["shape"] == key and "us" in c]
        row["rounds_us"] = [round(c["us"], 3) for c in mine]
        row["us"] = statistics.median(c["us"] for c in mine)
        row["us_min"] = min(c["us_min"] for c in mine)
        row["gbs"] = case["bytes"] / (row["us"] * 1e3)
        row["pct_copy"] = 100.0 * row["gbs"] / copy
        theirs = [tr[key] for tr in torch_r if key in tr]
        ok = [t for t in theirs if "us" in t]
        if ok:
            t = {"us": statistics.median(x["us"] for x in ok), "us_min": min(x["us_min"] for x in ok),
                 "impl": ok[0]["impl"], "rounds_us": [round(x["us"], 3) for x in ok]}
        elif theirs:
            t = theirs[-1]
        else:
            t = None
        if t is not None:
            row["torch"] = t
            row["work"] = work_of(case)
            if "us" in t:
                row["torch_gbs"] = case["bytes"] / (t["us"] * 1e3)
                row["ours_over_torch"] = row["us"] / t["us"]
        row["targets"] = targets(case, row["pct_copy"], row.get("ours_over_torch"))
        rows.append(row)

    # attention beside the read ceiling of its K and V
    reads = {json.dumps(r["inputs"][0]["dims"]): r for r in rows
             if r.get("op") == "read_ceiling" and "us" in r}
    for r in rows:
        if r.get("op") == "attention_decode" and "us" in r:
            rc = reads.get(json.dumps(r["inputs"][1]["dims"]))
            if rc:
                r["read_ceiling_us"] = rc["us"]
                r["over_read_ceiling"] = r["us"] / rc["us"]

    prov = dict(ours["provenance"])
    prov.update({
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu_driver": gpu_driver(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": platform.python_version(),
        "script": "bench/bench_kernels.py",
    })
    result = {
        "bench": "bench_kernels",
        "provenance": prov,
        "method": ours["method"] + "; PyTorch: the same sets, launches per graph and "
                  "replays, torch.cuda.CUDAGraph, CUDA events; %d rounds of both sides "
                  "alternating (ours, PyTorch's, ...), each side's time the median of its "
                  "rounds" % rounds,
        "rounds": rounds,
        "copy_ceiling_gbs": copy,
        "copy_ceiling_rounds_gbs": copies,
        "copy_ceiling_best_gbs": ours["copy_ceiling_best_gbs"],
        "torch_copy_ceiling_gbs": torch_copy_ceiling(torch, args.trials),
        "cases": rows,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)

    print()
    print(f"copy ceiling {copy:.0f} GB/s (torch copy_ {result['torch_copy_ceiling_gbs']:.0f}); "
          f"{prov['device']}, {prov['gpu_driver']}, commit {prov.get('commit')}")
    print(f"{'op':<18} {'shape':<42} {'us':>8} {'GB/s':>7} {'%copy':>6} {'torch us':>9} "
          f"{'ratio':>6}  targets")
    for r in rows:
        if "us" not in r:
            print(f"{r['name']:<18} {r['shape']:<42} {r.get('error', '')}")
            continue
        t = r.get("torch", {})
        tus = f"{t['us']:9.2f}" if "us" in t else f"{'-':>9}"
        ratio = f"{r['ours_over_torch']:6.2f}" if "ours_over_torch" in r else f"{'-':>6}"
        miss = [k for k, v in r.get("targets", {}).items() if not v]
        rd = f"  {r['over_read_ceiling']:.2f}x read" if "over_read_ceiling" in r else ""
        wk = "" if r.get("work", "equal").startswith("equal") else "  (work differs)"
        print(f"{r['name']:<18} {r['shape']:<42} {r['us']:8.2f} {r['gbs']:7.0f} "
              f"{r['pct_copy']:5.1f}% {tus} {ratio}  {'MISS ' + ','.join(miss) if miss else 'ok'}"
              f"{rd}{wk}")
        if "error" in t:
            print(f"    torch: {t['error'][:150]}")


if __name__ == "__main__":
    main()
