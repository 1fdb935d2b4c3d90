# SPDX-License-Identifier: MIT
"""Per-token decode latency of a 1B-class Llama shape through gfxgraphd,
beside a torch.cuda.CUDAGraph of the same step in plain PyTorch with a
static cache, in the same run on the same GPU.

    python3 bench/bench_decode.py [--contexts 512,2048] [--steps 100]
        [--warmup 20] [--layers 16] [--hidden 2048] [--heads 32]
        [--kv-heads 8] [--inter 8192] [--vocab 32000] [--out FILE.json]

Shape (default): hidden 2048, 16 layers, 32 heads / 8 kv heads (head dim
64), intermediate 8192, vocab 32000, f16, batch 1; random weights (normal,
std 0.02; RMSNorm weights 1 + 0.1 N(0,1)); the k/v caches [1, S, 8, 64] per
layer filled with N(0,1) (a stand-in for a prefilled prompt), S = context.

One measured token at context C: write id/pos/len (pos = C - steps + i,
len = pos + 1), run the step, read the next token on the host.
  gfxgraph: one program (tests/gpu/test_llama_hf.py llama_spec: embedding ->
            16 x layer -> rmsnorm -> lm_head -> argmax) replayed through the
            daemon (prog.replay(1): returns when the device work is done),
            then next.item().
  torch:    the same step written in PyTorch (F.linear, SDPA with a length
            mask over the static cache, index_copy_ into the cache),
            captured once in a torch.cuda.CUDAGraph, graph.replay(), then
            next.item().
  hf_eager: transformers' LlamaForCausalLM with the same config and the
            same weights (copied from the arena), f16, run eagerly as
            people run it: model(input_ids=[[tok]], position_ids=[[pos]],
            past_key_values=cache, use_cache=True), logits[:, -1].argmax(),
            .item(); its DynamicCache starts with the arena's cache rows
            (keys and values as stored) up to the first position.  Fewer
            steps (--hf-steps, default 20): it is ~25x slower.
Both read the same weights (the daemon's arena tensors) and start from the
same cache contents.  gfxgraph and torch run in interleaved blocks
(--block steps of one, then of the other, default 10), each decoding its
own positions; hf_eager runs after them.  Reported per context and path: p50/p90/p99/mean/min
per-token latency (us), tokens/s, and whether the two paths' first tokens
agree.  JSON with provenance (git commit, host, GPU, torch, the daemon's
version, library path, the command line).  Needs torch with CUDA and a
daemon on the hip backend (GFXGRAPH_SOCKET; bench/run_decode.sh starts one).
Exit 0, 1 (a failure), 77 (skip)."""
import argparse
import datetime
import json
import os
import platform
import socket as pysocket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "tests", "gpu"))


def pct(xs, p):
    xs = sorted(xs)
    i = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[i]


def summary(lat_us):
    return {"p50_us": pct(lat_us, 50), "p90_us": pct(lat_us, 90), "p99_us": pct(lat_us, 99),
            "mean_us": sum(lat_us) / len(lat_us), "min_us": min(lat_us),
            "tokens_per_s": 1e6 * len(lat_us) / sum(lat_us), "n": len(lat_us)}


def torch_step_fn(torch, a, cfg, S):
    """The decode step in plain PyTorch over the arena's weights and its own
    static caches; returns (step(), static inputs, caches, next)."""
    import torch.nn.functional as Fn
    D, L, Hq, Hkv, V = cfg["hidden"], cfg["layers"], cfg["heads"], cfg["kv_heads"], cfg["vocab"]
    Dh = D // Hq
    t = a.t
    dev = t["emb"].device
    ids = torch.zeros(1, dtype=torch.int64, device=dev)
    pos = torch.zeros(1, dtype=torch.int64, device=dev)
    lens = torch.zeros(1, dtype=torch.int64, device=dev)
    kc = [t["kc_%d" % l][:1].clone() for l in range(L)]
    vc = [t["vc_%d" % l][:1].clone() for l in range(L)]
    inv = 1.0 / (cfg["theta"] ** (torch.arange(0, Dh, 2, device=dev, dtype=torch.float32) / Dh))
    ar = torch.arange(S, device=dev)
    eps = cfg["eps"]
    out = {}

    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

    def rope(x, cos, sin):          # x [1, H, Dh], neox
        x1, x2 = x[..., :Dh // 2], x[..., Dh // 2:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)

    def step():
        h = Fn.embedding(ids, t["emb"])                     # [1, D]
        ang = pos.float()[:, None] * inv[None, :]           # [1, Dh/2]
        cos = ang.cos().to(h.dtype)[:, None, :]
        sin = ang.sin().to(h.dtype)[:, None, :]
        mask = (ar[None, :] < lens[:, None])[:, None, None, :]   # [1, 1, 1, S]
        for l in range(L):
            w = lambda k: t["%s_%d" % (k, l)]              # noqa: E731
            hn = rms(h, w("n1"))
            q = rope(Fn.linear(hn, w("wq")).view(1, Hq, Dh), cos, sin)
            k = rope(Fn.linear(hn, w("wk")).view(1, Hkv, Dh), cos, sin)
            v = Fn.linear(hn, w("wv")).view(1, Hkv, Dh)
            kc[l].index_copy_(1, pos, k[:, None])
            vc[l].index_copy_(1, pos, v[:, None])
            o = Fn.scaled_dot_product_attention(
                q[:, :, None, :], kc[l].transpose(1, 2), vc[l].transpose(1, 2),
                attn_mask=mask, enable_gqa=True)            # [1, Hq, 1, Dh]
            h = h + Fn.linear(o.reshape(1, Hq * Dh), w("wo"))
            hn = rms(h, w("n2"))
            h = h + Fn.linear(Fn.silu(Fn.linear(hn, w("wg"))) * Fn.linear(hn, w("wu")), w("wd"))
        logits = Fn.linear(rms(h, t["nf"]), t["lm"])
        out["next"] = logits.argmax(-1)
        return out["next"]

    return step, (ids, pos, lens), (kc, vc), out


def hf_eager_fn(torch, a, cfg, S, start):
    """(step(pos, tok) -> next token, versions) for transformers' Llama with
    the arena's weights and a DynamicCache holding the arena's cache rows
    [0, start); None (and the reason) when transformers is missing."""
    try:
        import transformers
        from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        return None, "transformers is not installed (%s)" % e
    hc = LlamaConfig(hidden_size=cfg["hidden"], intermediate_size=cfg["inter"],
                     num_hidden_layers=cfg["layers"], num_attention_heads=cfg["heads"],
                     num_key_value_heads=cfg["kv_heads"], vocab_size=cfg["vocab"],
                     max_position_embeddings=S, rms_norm_eps=cfg["eps"],
                     rope_theta=cfg["theta"], tie_word_embeddings=False,
                     attention_bias=False, mlp_bias=False, hidden_act="silu",
                     bos_token_id=None, eos_token_id=None, pad_token_id=None)
    with torch.device("cuda"):
        model = LlamaForCausalLM(hc).to(torch.float16).eval()
    t = a.t
    with torch.no_grad():
        m = model.model
        m.embed_tokens.weight.copy_(t["emb"])
        for l, layer in enumerate(m.layers):
            at, mlp = layer.self_attn, layer.mlp
            for k, dst in (("n1", layer.input_layernorm.weight), ("wq", at.q_proj.weight),
                           ("wk", at.k_proj.weight), ("wv", at.v_proj.weight),
                           ("wo", at.o_proj.weight),
                           ("n2", layer.post_attention_layernorm.weight),
                           ("wg", mlp.gate_proj.weight), ("wu", mlp.up_proj.weight),
                           ("wd", mlp.down_proj.weight)):
                dst.copy_(t["%s_%d" % (k, l)])
        m.norm.weight.copy_(t["nf"])
        model.lm_head.weight.copy_(t["lm"])
    base = []
    for l in range(cfg["layers"]):
        # arena [1, S, Hkv, Dh] -> HF [1, Hkv, T, Dh]
        base.append((t["kc_%d" % l][:, :start].transpose(1, 2).contiguous(),
                     t["vc_%d" % l][:, :start].transpose(1, 2).contiguous()))
    state = {}

    def reset():
        cache = DynamicCache()
        for l, (k, v) in enumerate(base):
            cache.update(k.clone(), v.clone(), l)
        state["cache"] = cache

    def step(p, tok):
        with torch.no_grad():
            out = model(input_ids=torch.tensor([[tok]], device="cuda"),
                        position_ids=torch.tensor([[p]], device="cuda"),
                        past_key_values=state["cache"], use_cache=True)
            state["cache"] = out.past_key_values
            return int(out.logits[:, -1].argmax(-1).item())

    step.reset = reset
    step.model = model
    return step, {"transformers": transformers.__version__,
                  "attn_implementation": getattr(model.config, "_attn_implementation", None)}


def provenance(args, c, torch):
    def git(*a):
        try:
            return subprocess.check_output(["git", "-C", SRC] + list(a), text=True,
                                           stderr=subprocess.DEVNULL).strip()
        except Exception:
            return None
    import gfxgraph
    commit = os.environ.get("GFXGRAPH_GIT_COMMIT")
    if not commit and os.path.isfile(os.path.join(SRC, "COMMIT")):
        with open(os.path.join(SRC, "COMMIT")) as f:
            commit = f.read().strip()
    p = torch.cuda.get_device_properties(0)
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "host": pysocket.gethostname(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "gpu": p.name,
            "gpu_memory_gib": round(p.total_memory / 2**30, 1),
            # a snapshot made with git archive sits inside some other
            # checkout: its own word (the environment, a COMMIT file) first
            "git_commit": commit or git("rev-parse", "HEAD"),
            "git_dirty": None if commit else
                         bool(git("status", "--porcelain", "--untracked-files=no")),
            "daemon": {"version": c.server_version, "backend": c.backend, "device": c.device,
                       "socket": c.socket, "fastpath": str(c.fastpath_status)},
            "library": gfxgraph.library_path(), "argv": sys.argv}


def time_paths(runs, start, block):
    """Time each path's steps: (name, fn, warm, nsteps) with fn(pos, tok) ->
    next token (gfxgraph: (token, replay result)).  Every path but
    hf_eager runs in interleaved blocks of `block` steps, in turn, so that
    drift on the machine falls on them alike; hf_eager (a different step,
    and slow) runs after them.  Each path decodes its own positions start,
    start + 1, ... feeding back its own tokens.  Returns ({name: summary},
    {name: first token})."""
    state = {name: {"i": 0, "tok": 1, "lat": [], "n_graph": 0} for name, _, _, _ in runs}
    firsts = {}

    def one(name, fn, warm):
        st = state[name]
        p = start + st["i"]
        t0 = time.perf_counter()
        r = fn(p, st["tok"])
        dt = (time.perf_counter() - t0) * 1e6
        if name == "gfxgraph":
            r, rr = r
            st["n_graph"] += rr["path"] == "graph"
        if st["i"] == 0:
            firsts[name] = r
        st["tok"] = r
        if st["i"] >= warm:
            st["lat"].append(dt)
        st["i"] += 1

    together = [r for r in runs if r[0] != "hf_eager"]
    left = True
    while left:
        left = False
        for name, fn, warm, nsteps in together:
            for _ in range(max(1, block)):
                if state[name]["i"] >= warm + nsteps:
                    break
                one(name, fn, warm)
            left |= state[name]["i"] < warm + nsteps
    for name, fn, warm, nsteps in runs:
        if name == "hf_eager":
            while state[name]["i"] < warm + nsteps:
                one(name, fn, warm)
    paths = {}
    for name, _, _, _ in runs:
        paths[name] = summary(state[name]["lat"])
        if name == "gfxgraph":
            paths[name]["graph_replays"] = state[name]["n_graph"]
    return paths, firsts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--contexts", default="512,2048")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--inter", type=int, default=8192)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--hf-steps", type=int, default=20,
                    help="measured steps of the HF eager path (0: skip it)")
    ap.add_argument("--block", type=int, default=10,
                    help="steps of one path before the other's turn (interleaved blocks)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    sock = os.environ.get("GFXGRAPH_SOCKET")
    if not sock:
        print("SKIP: GFXGRAPH_SOCKET is not set (bench/run_decode.sh starts a daemon)")
        return 77
    import gfxgraph
    from test_llama_hf import llama_spec
    cfg = dict(hidden=args.hidden, layers=args.layers, heads=args.heads,
               kv_heads=args.kv_heads, inter=args.inter, vocab=args.vocab, eps=1e-5,
               theta=10000.0)
    contexts = [int(x) for x in args.contexts.split(",")]
    dtype = torch.float16
    res = {"shape": dict(cfg, dtype="f16", batch=1, head_dim=cfg["hidden"] // cfg["heads"]),
           "steps": args.steps, "warmup": args.warmup,
           "timing": "gfxgraph and torch_cudagraph in interleaved blocks of %d steps, each "
                     "step timed on the host from writing its inputs to its token read back; "
                     "hf_eager (a different step) after them" % args.block,
           "work": "the same step and weights on gfxgraph and torch_cudagraph, the kernels "
                   "differ: the daemon's fused plan against PyTorch's ops (its attention "
                   "covers the whole static cache with a length mask)",
           "results": []}
    c = gfxgraph.Client(socket=sock, name="bench_decode")
    if c.backend != "hip":
        print("SKIP: the daemon runs the %s backend" % c.backend)
        return 77
    res["provenance"] = provenance(args, c, torch)
    g = torch.Generator(device="cuda").manual_seed(7)
    for S in contexts:
        if args.steps + args.warmup > S:
            print("FAIL: steps + warmup > context %d" % S)
            return 1
        a, prog = llama_spec(torch, c, cfg, dtype, top=1, S=S, name="bench-decode-%d" % S,
                             buckets=[1])
        with torch.no_grad():
            for name, _, _, _ in a.layout:
                x = a.t[name]
                if name in ("ids", "pos", "lens", "next"):
                    x.zero_()
                elif name.startswith(("n1_", "n2_")) or name == "nf":
                    x.copy_(1 + 0.1 * torch.randn(x.shape, generator=g, device="cuda"))
                elif name.startswith(("kc_", "vc_")):
                    x.copy_(torch.randn(x.shape, generator=g, device="cuda"))
                elif name != "logits":
                    x.copy_(0.02 * torch.randn(x.shape, generator=g, device="cuda"))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        prep = prog.prepare()
        t_prep = time.perf_counter() - t0

        # torch: the same step, captured (caches cloned before the daemon runs)
        step, (ids_t, pos_t, lens_t), _, out = torch_step_fn(torch, a, cfg, S)
        start = S - args.steps - args.warmup
        ids_t.fill_(1)
        pos_t.fill_(start)
        lens_t.fill_(start + 1)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            step()
        torch.cuda.synchronize()

        def run_gfx(p, tok):
            a.t["ids"].fill_(tok)
            a.t["pos"].fill_(p)
            a.t["lens"].fill_(p + 1)
            torch.cuda.synchronize()
            r = prog.replay(1)
            return int(a.t["next"].item()), r

        def run_torch(p, tok):
            ids_t.fill_(tok)
            pos_t.fill_(p)
            lens_t.fill_(p + 1)
            graph.replay()
            return int(out["next"].item())

        runs = [("gfxgraph", run_gfx, args.warmup, args.steps),
                ("torch_cudagraph", run_torch, args.warmup, args.steps)]
        hf_step, hf_info = (None, "--hf-steps 0")
        if args.hf_steps > 0:
            hf_step, hf_info = hf_eager_fn(torch, a, cfg, S, start)
            if hf_step is not None:
                try:
                    hf_step.reset()
                    hf_step(start, 1)         # one step: the API works here
                    hf_step.reset()
                    runs.append(("hf_eager", hf_step, 3, args.hf_steps))
                except Exception as e:   # noqa: BLE001 -- the other paths still count
                    hf_info = "transformers failed: %s: %s" % (type(e).__name__, e)
                    hf_step = None
            if hf_step is None:
                print("hf_eager: skipped: %s" % hf_info)
        paths, firsts = time_paths(runs, start, args.block)
        entry = {"context": S, "positions": [start + args.warmup, S - 1],
                 "prepare_s": t_prep, "prepare": prep, "paths": paths,
                 "first_token_agrees": firsts.get("gfxgraph") == firsts.get("torch_cudagraph"),
                 "first_tokens": firsts,
                 "gfxgraph_over_torch_p50": paths["gfxgraph"]["p50_us"] /
                 paths["torch_cudagraph"]["p50_us"]}
        if "hf_eager" in paths:
            entry["hf_eager"] = hf_info
            entry["gfxgraph_over_hf_eager_p50"] = (paths["gfxgraph"]["p50_us"] /
                                                   paths["hf_eager"]["p50_us"])
        else:
            entry["hf_eager"] = "skipped: %s" % hf_info
        res["results"].append(entry)
        print("context %5d: gfxgraph p50 %.1f us p99 %.1f us (%.0f tok/s) | torch CUDAGraph "
              "p50 %.1f us p99 %.1f us (%.0f tok/s) | first tokens %s" %
              (S, paths["gfxgraph"]["p50_us"], paths["gfxgraph"]["p99_us"],
               paths["gfxgraph"]["tokens_per_s"], paths["torch_cudagraph"]["p50_us"],
               paths["torch_cudagraph"]["p99_us"], paths["torch_cudagraph"]["tokens_per_s"],
               "agree" if entry["first_token_agrees"] else "differ %s" % firsts))
        if "hf_eager" in paths:
            print("context %5d: HF eager p50 %.1f us (%.0f tok/s; first token %s the "
                  "daemon's)" % (S, paths["hf_eager"]["p50_us"],
                                 paths["hf_eager"]["tokens_per_s"],
                                 "equals" if firsts.get("hf_eager") == firsts.get("gfxgraph")
                                 else "differs from"))
        sys.stdout.flush()
        del graph, hf_step
        prog.release()
        a.buf.release()
        del a
        torch.cuda.empty_cache()
    c.close()
    text = json.dumps(res, indent=1, default=str)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
        print("wrote %s" % args.out)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
