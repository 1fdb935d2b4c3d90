#!/usr/bin/env python3
"""The elementwise kernels' variants (GGX_EW=N, kernels/gpu_ops.hip) beside
PyTorch's kernels, in one run:

    python3 bench/ew_variants.py --bin BUILD/bench/bench_kernels --out FILE.json
        [--variants 0,1,2,...] [--top 3]

Each variant runs bench_kernels on the f16 [8192, 8192] elementwise cases;
PyTorch's kernels are timed before and after them (bench_kernels.py's
method). The best --top variants by the mean of ours / torch (and variant 1,
the kernel before) then run again on those cases and on f32, bf16 and
[8191, 8193] f16, with PyTorch timed again beside them. Prints the tables
last; the JSON holds every number."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_kernels as bk  # noqa: E402

MAIN = "[8192, 8192] f16"
EXTRA = "[8192, 8192] f32|[8192, 8192] bf16|[8191, 8193] f16"


def ours(binp, v, only, trials):
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, GGX_EW=str(v))
    p = subprocess.run([binp, "--json", path, "--trials", str(trials), "--only", only],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.stdout.write(p.stdout[-3000:])
        raise SystemExit(f"bench_kernels (GGX_EW={v}) exit {p.returncode}")
    with open(path) as f:
        d = json.load(f)
    os.unlink(path)
    return {c["name"] + " " + c["shape"]: c for c in d["cases"] if "us" in c}, d


def torch_times(torch, F, cases, trials):
    out = {}
    for key, c in cases.items():
        t = bk.time_torch(torch, F, c, trials)
        out[key] = t
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default="1,0,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--trials", type=int, default=15)
    args = ap.parse_args()
    variants = [int(x) for x in args.variants.split(",")]

    import torch
    import torch.nn.functional as F

    res = {"main": {}, "main2": {}, "extra": {}, "torch": {}}
    first, meta = ours(args.bin, 1, MAIN, args.trials)
    res["provenance"] = meta["provenance"]
    res["copy_ceiling_gbs"] = meta["copy_ceiling_gbs"]
    t1 = torch_times(torch, F, first, args.trials)
    for v in variants:
        res["main"][v], _ = ours(args.bin, v, MAIN, args.trials)
        print(f"variant {v}: " + " ".join(f"{res['main'][v][k]['us'] / t1[k]['us']:.3f}"
                                          for k in first), flush=True)
    t2 = torch_times(torch, F, first, args.trials)
    res["torch"]["main"] = [t1, t2]
    keys = list(first.keys())

    def tref(key, field):
        return statistics.mean([t1[key][field], t2[key][field]])

    def score(r):
        return statistics.mean([r[k]["us"] / tref(k, "us") for k in keys])

    ranked = sorted((v for v in variants if v != 1), key=lambda v: score(res["main"][v]))
    top = ranked[: args.top] + [1]
    for v in top:
        res["main2"][v], _ = ours(args.bin, v, MAIN, args.trials)
    extra_cases, _ = ours(args.bin, 1, EXTRA, args.trials)
    te = torch_times(torch, F, extra_cases, args.trials)
    for v in top:
        res["extra"][v], _ = ours(args.bin, v, EXTRA, args.trials)
    te2 = torch_times(torch, F, extra_cases, args.trials)
    res["torch"]["extra"] = [te, te2]
    res["ranked"] = ranked
    res["top"] = top
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1, default=str)

    def show(title, table, tk, tt):
        print(f"\n{title}: per case ours us, ours/torch us, ours/torch us_min")
        tm = [statistics.mean([t[k]["us"] for t in tt]) for k in tk]
        tmin = [min(t[k]["us_min"] for t in tt) for k in tk]
        print(f"{'v':>5} {'score':>6} " + " ".join(f"{k.split(' [')[0][:19]:>19}" for k in tk))
        print(f"{'torch':>5} {'':>6} " + " ".join(f"{a:7.2f} {b:11.2f}" for a, b in zip(tm, tmin)))
        for v, r in table.items():
            rs = [r[k]["us"] / m for k, m in zip(tk, tm)]
            cells = [f"{r[k]['us']:7.2f} {r[k]['us'] / m:5.3f}/{r[k]['us_min'] / mn:5.3f}"
                     for k, m, mn in zip(tk, tm, tmin)]
            print(f"{v:>5} {statistics.mean(rs):6.3f} " + " ".join(cells))

    show("f16 [8192, 8192], each variant", res["main"], keys, [t1, t2])
    show("f16 [8192, 8192], the best again", res["main2"], keys, [t1, t2])
    ekeys = list(extra_cases.keys())
    for grp in ("f32", "bf16", "[8191, 8193]"):
        gk = [k for k in ekeys if grp in k]
        show(f"extra {grp}", res["extra"], gk, [te, te2])
    print("\nranked:", ranked)


if __name__ == "__main__":
    main()
