# SPDX-License-Identifier: MIT
"""A small random Hugging Face LlamaForCausalLM decoded through gfxgraphd
(hip backend), one program per decode step, against transformers.

Model: hidden 128, 2 layers, 4 heads, 2 kv heads (head dim 32), intermediate
256, vocab 512, rms_norm_eps 1e-5, rope_theta 10000, untied lm_head, no
biases, initializer_range 0.1 (the default 0.02 gives logits with a spread
of about 0.2 over 512 tokens, so top-2 gaps near 1e-4 are common and an f32
rounding difference could flip a greedy token; at 0.1 the logits spread
about 1 and the gaps stay far above f32 error).  Seeded (torch.manual_seed).

The daemon program (`llama_spec`): embedding -> L x (rmsnorm -> q/k/v linear
-> rope(q), rope(k) neox -> cache_write(k), cache_write(v) ->
attention_decode -> o linear -> add -> rmsnorm -> gate/up linear -> silu_mul
-> down linear -> add) -> rmsnorm -> lm_head -> logits (a buffer) -> argmax
-> next.  Every tensor the client sees lives in ONE CUDA allocation (the
"arena", registered once): weights copied from the HF model, the k/v caches
[bucket, S, Hkv, Dh] per layer, ids/pos/lens/next (i32) and logits.

Checks:
  f32: 2 prompts (lengths 5 and 9) at batch 2 in bucket 2, prompt tokens fed
       one position per step; 32 greedy tokens per row equal
       model.generate(do_sample=False, max_new_tokens=32) of that prompt
       alone; every generated step's logits within rel-L2 1e-4 of
       generate's raw logits (output_logits).
  f16: the same model in f16 (model.half()), teacher-forced on the f32
       sequences: per-step logits within rel-L2 1e-2 of one HF forward over
       the whole sequence.
Exit 0 pass, 1 fail, 77 skip (no torch/CUDA/transformers, no daemon).
Run by tests/gpu/llama_hf.sh (starts gfxgraphd --backend hip)."""
import os
import sys

CFG = dict(hidden=128, layers=2, heads=4, kv_heads=2, inter=256, vocab=512, eps=1e-5,
           theta=10000.0)
INIT_RANGE = 0.1
NEW_TOKENS = 32
PROMPT_LENS = (5, 9)
CONTEXT = 128
FAILS = 0


def check(ok, what):
    global FAILS
    print(("   ok: " if ok else "FAIL: ") + what)
    sys.stdout.flush()
    if not ok:
        FAILS += 1
    return ok


def rel(a, b):
    a = a.detach().double().flatten()
    b = b.detach().double().flatten()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


# ---- the daemon program ------------------------------------------------------

class Arena:
    """One allocation holding every client-visible tensor: a CUDA uint8 tensor
    on the hip backend, a torch CPU tensor in POSIX shm on the cpu backend.
    Offsets are 256-byte aligned; tensors are views into it."""

    def __init__(self, torch, backend, device="cuda"):
        self.torch = torch
        self.backend = backend
        self.device = device
        self.layout = []            # (name, offset, dtype, shape)
        self.used = 0
        self.mem = None

    def add(self, name, dtype, shape):
        n = 1
        for d in shape:
            n *= d
        off = (self.used + 255) & ~255
        self.used = off + n * self.torch.empty((), dtype=dtype).element_size()
        self.layout.append((name, off, dtype, tuple(shape)))
        return off

    def allocate(self, client):
        torch = self.torch
        size = (self.used + 255) & ~255
        if self.backend == "hip":
            self.mem = torch.zeros(size, dtype=torch.uint8, device=self.device)
        else:
            import gfxgraph
            self.mem = gfxgraph.shared_array((size,), "uint8", torch=True)
        self.t = {}
        self.off = {}
        for name, off, dtype, shape in self.layout:
            n = 1
            for d in shape:
                n *= d
            es = torch.empty((), dtype=dtype).element_size()
            self.t[name] = self.mem[off:off + n * es].view(dtype).view(shape)
            self.off[name] = off
        if self.backend == "hip":
            torch.cuda.synchronize()
        self.buf = client.register(self.mem)
        return self


def _dt(torch, dtype):
    return {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
            torch.int32: "i32"}[dtype]


def llama_spec(torch, client, cfg, dtype, top, S, logits_dtype=None, name="llama",
               buckets=None, device="cuda"):
    """Lay out an arena for a Llama decode step at cfg, define the program.
    Returns (arena, program).  arena.t[...] are the tensors: emb, nf, lm,
    n1_l, wq_l, wk_l, wv_l, wo_l, n2_l, wg_l, wu_l, wd_l, kc_l, vc_l (caches
    [top, S, Hkv, Dh]), ids, pos, lens, next (i32 [top]), logits [top, V]."""
    D, L, Hq, Hkv, F, V = (cfg["hidden"], cfg["layers"], cfg["heads"], cfg["kv_heads"],
                           cfg["inter"], cfg["vocab"])
    Dh = D // Hq
    QD, KD = Hq * Dh, Hkv * Dh
    logits_dtype = logits_dtype or dtype
    a = Arena(torch, client.backend, device)
    wshape = {"n1": (D,), "wq": (QD, D), "wk": (KD, D), "wv": (KD, D), "wo": (D, QD),
              "n2": (D,), "wg": (F, D), "wu": (F, D), "wd": (D, F)}
    a.add("emb", dtype, (V, D))
    for l in range(L):
        for k, shp in wshape.items():
            a.add("%s_%d" % (k, l), dtype, shp)
        a.add("kc_%d" % l, dtype, (top, S, Hkv, Dh))
        a.add("vc_%d" % l, dtype, (top, S, Hkv, Dh))
    a.add("nf", dtype, (D,))
    a.add("lm", dtype, (V, D))
    for k in ("ids", "pos", "lens", "next"):
        a.add(k, torch.int32, (top,))
    a.add("logits", logits_dtype, (top, V))
    a.allocate(client)

    dt = _dt(torch, dtype)
    B = "batch"
    tensors = {}
    for tname, off, tdtype, shape in a.layout:
        shp = list(shape)
        if tname in ("ids", "pos", "lens", "next", "logits") or tname[:3] in ("kc_", "vc_"):
            shp[0] = B
        tensors[tname] = {"dtype": _dt(torch, tdtype), "shape": shp, "buffer": a.buf,
                          "offset": off}
    for s, shp in (("h", [B, D]), ("hn", [B, D]), ("q", [B, QD]), ("k", [B, KD]),
                   ("v", [B, KD]), ("a3", [B, Hq, Dh]), ("o", [B, D]), ("g", [B, F]),
                   ("u", [B, F]), ("m", [B, F]), ("f", [B, D])):
        tensors[s] = {"dtype": dt, "shape": shp, "scratch": True}
    tensors["q3"] = {"view": "q", "shape": [B, Hq, Dh]}
    tensors["k3"] = {"view": "k", "shape": [B, Hkv, Dh]}
    tensors["v3"] = {"view": "v", "shape": [B, Hkv, Dh]}
    tensors["a2"] = {"view": "a3", "shape": [B, QD]}
    eps = {"eps": cfg["eps"]}
    rope = {"theta": cfg["theta"], "style": "neox"}

    def n(op, ins, out, attrs=None):
        d = {"op": op, "inputs": ins, "outputs": [out]}
        if attrs:
            d["attrs"] = attrs
        return d

    nodes = [n("embedding", ["ids", "emb"], "h")]
    for l in range(L):
        w = lambda k: "%s_%d" % (k, l)      # noqa: E731
        nodes += [
            n("rmsnorm", ["h", w("n1")], "hn", eps),
            n("linear", ["hn", w("wq")], "q"),
            n("linear", ["hn", w("wk")], "k"),
            n("linear", ["hn", w("wv")], "v"),
            n("rope", ["q3", "pos"], "q3", rope),
            n("rope", ["k3", "pos"], "k3", rope),
            n("cache_write", ["k3", "pos"], w("kc")),
            n("cache_write", ["v3", "pos"], w("vc")),
            n("attention_decode", ["q3", w("kc"), w("vc"), "lens"], "a3"),
            n("linear", ["a2", w("wo")], "o"),
            n("add", ["h", "o"], "h"),
            n("rmsnorm", ["h", w("n2")], "hn", eps),
            n("linear", ["hn", w("wg")], "g"),
            n("linear", ["hn", w("wu")], "u"),
            n("silu_mul", ["g", "u"], "m"),
            n("linear", ["m", w("wd")], "f"),
            n("add", ["h", "f"], "h"),
        ]
    nodes.append(n("rmsnorm", ["h", "nf"], "hn", eps))
    if logits_dtype == dtype:
        nodes.append(n("linear", ["hn", "lm"], "logits"))
    else:
        tensors["lg"] = {"dtype": dt, "shape": [B, V], "scratch": True}
        nodes.append(n("linear", ["hn", "lm"], "lg"))
        nodes.append(n("cast", ["lg"], "logits"))
    nodes.append(n("argmax", ["logits"], "next"))
    if buckets is None:
        buckets = sorted({1, top})
    prog = client.define({"name": name, "tensors": tensors, "nodes": nodes,
                          "buckets": list(buckets)})
    return a, prog


def load_hf_weights(torch, arena, model, cfg):
    """Copy a LlamaForCausalLM's weights into the arena (dtype converted)."""
    m = model.model
    t = arena.t
    with torch.no_grad():
        t["emb"].copy_(m.embed_tokens.weight)
        for l, layer in enumerate(m.layers):
            at, mlp = layer.self_attn, layer.mlp
            for k, src in (("n1", layer.input_layernorm.weight), ("wq", at.q_proj.weight),
                           ("wk", at.k_proj.weight), ("wv", at.v_proj.weight),
                           ("wo", at.o_proj.weight),
                           ("n2", layer.post_attention_layernorm.weight),
                           ("wg", mlp.gate_proj.weight), ("wu", mlp.up_proj.weight),
                           ("wd", mlp.down_proj.weight)):
                t["%s_%d" % (k, l)].copy_(src)
            t["kc_%d" % l].zero_()
            t["vc_%d" % l].zero_()
        t["nf"].copy_(m.norm.weight)
        t["lm"].copy_(model.lm_head.weight)
    if arena.backend == "hip":
        torch.cuda.synchronize()


def decode(torch, arena, prog, feed, batch, steps, S):
    """Run steps replays at batch; feed(t, prev) -> list of ids for step t
    (prev: the daemon's tokens of step t-1).  Returns (tokens [steps][batch],
    logits [steps] tensors [batch, V] float32 on CPU, replay results)."""
    t = arena.t
    toks, logits, results = [], [], []
    prev = None
    for step in range(steps):
        ids = feed(step, prev)
        assert step < S
        t["ids"][:batch] = torch.tensor(ids, dtype=torch.int32).to(t["ids"].device)
        t["pos"][:batch] = step
        t["lens"][:batch] = step + 1
        t["next"].fill_(-1)
        if arena.backend == "hip":
            torch.cuda.synchronize()
        results.append(prog.replay(batch))
        prev = t["next"][:batch].tolist()
        toks.append(prev)
        logits.append(t["logits"][:batch].float().cpu())
    return toks, logits, results


def main():
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    try:
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("SKIP: transformers is not installed")
        return 77
    sock = os.environ.get("GFXGRAPH_SOCKET")
    if not sock:
        print("SKIP: GFXGRAPH_SOCKET is not set (llama_hf.sh starts a daemon and sets it)")
        return 77
    import gfxgraph
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    print("torch %s, transformers %s, gfxgraph library %s" %
          (torch.__version__, transformers.__version__, gfxgraph.library_path()))

    torch.manual_seed(1234)
    hc = LlamaConfig(hidden_size=CFG["hidden"], intermediate_size=CFG["inter"],
                     num_hidden_layers=CFG["layers"], num_attention_heads=CFG["heads"],
                     num_key_value_heads=CFG["kv_heads"], vocab_size=CFG["vocab"],
                     max_position_embeddings=CONTEXT, rms_norm_eps=CFG["eps"],
                     rope_theta=CFG["theta"], initializer_range=INIT_RANGE,
                     tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                     hidden_act="silu", bos_token_id=None, eos_token_id=None, pad_token_id=None,
                     attn_implementation="eager")
    model = LlamaForCausalLM(hc)
    # HF leaves RMSNorm weights at 1: perturb them so the norm weights are
    # actually exercised (the copy into the daemon would otherwise be unchecked)
    with torch.no_grad():
        for p_name, p in model.named_parameters():
            if "norm" in p_name:
                p.add_(0.1 * torch.randn_like(p))
    model = model.to("cuda").eval()
    try:
        model.config._attn_implementation = "eager"
    except Exception:
        pass

    g = torch.Generator().manual_seed(99)
    prompts = [torch.randint(0, CFG["vocab"], (n,), generator=g).tolist() for n in PROMPT_LENS]

    # reference: generate per prompt, greedy, with the raw logits of each step
    ref_tokens, ref_logits = [], []
    for pr in prompts:
        inp = torch.tensor([pr], device="cuda")
        with torch.no_grad():
            out = model.generate(inp, attention_mask=torch.ones_like(inp), do_sample=False,
                                 max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                 output_logits=True, return_dict_in_generate=True,
                                 pad_token_id=0, eos_token_id=None, temperature=None,
                                 top_p=None, top_k=None)
        ref_tokens.append(out.sequences[0, len(pr):].tolist())
        ref_logits.append(torch.stack([x[0].float().cpu() for x in out.logits]))
    gaps = []
    for lg in ref_logits:
        top2 = lg.topk(2, dim=-1).values
        gaps.append(float((top2[:, 0] - top2[:, 1]).min()))
    print("   note: smallest top-2 logit gap in the reference: %.3g" % min(gaps))

    with gfxgraphd_client(gfxgraph, sock) as c:
        if c.backend != "hip":
            print("SKIP: the daemon runs the %s backend (this test wants hip)" % c.backend)
            return 77
        nb = len(prompts)
        steps = max(PROMPT_LENS) + NEW_TOKENS - 1
        # ---- f32: greedy, token-identical -------------------------------
        arena, prog = llama_spec(torch, c, CFG, torch.float32, top=nb, S=CONTEXT,
                                 name="llama-hf-f32", buckets=[1, nb])
        load_hf_weights(torch, arena, model, CFG)

        def feed(step, prev):
            return [pr[step] if step < len(pr) else prev[r] for r, pr in enumerate(prompts)]

        toks, logits, results = decode(torch, arena, prog, feed, nb, steps, CONTEXT)
        check(all(r["bucket"] == nb for r in results),
              "every replay ran in bucket %d (paths: %d graph)" %
              (nb, sum(r["path"] == "graph" for r in results)))
        worst = 0.0
        for r, pr in enumerate(prompts):
            P = len(pr)
            got = [toks[P - 1 + i][r] for i in range(NEW_TOKENS)]
            check(got == ref_tokens[r], "f32 row %d (prompt %d tokens): %d greedy tokens equal "
                  "generate's%s" % (r, P, NEW_TOKENS, "" if got == ref_tokens[r] else
                                    ": got %s, want %s" % (got, ref_tokens[r])))
            for i in range(NEW_TOKENS):
                worst = max(worst, rel(logits[P - 1 + i][r], ref_logits[r][i]))
        check(worst <= 1e-4, "f32 per-step logits rel-L2 %.3e <= 1e-4" % worst)
        prog.release()
        arena.buf.release()

        # ---- f16: teacher-forced logits --------------------------------
        model16 = model.half()
        seqs = [pr + ref_tokens[r] for r, pr in enumerate(prompts)]
        ref16 = []
        for s in seqs:
            with torch.no_grad():
                ref16.append(model16(torch.tensor([s], device="cuda")).logits[0].float().cpu())
        arena, prog = llama_spec(torch, c, CFG, torch.float16, top=nb, S=CONTEXT,
                                 name="llama-hf-f16", buckets=[1, nb])
        load_hf_weights(torch, arena, model16, CFG)
        steps16 = min(len(s) for s in seqs)
        toks16, logits16, _ = decode(torch, arena, prog,
                                     lambda step, prev: [s[step] for s in seqs], nb, steps16,
                                     CONTEXT)
        worst16 = 0.0
        for r in range(nb):
            for step in range(steps16):
                worst16 = max(worst16, rel(logits16[step][r], ref16[r][step]))
        check(worst16 <= 1e-2, "f16 teacher-forced per-step logits rel-L2 %.3e <= 1e-2 "
              "(%d steps x %d rows)" % (worst16, steps16, nb))
        prog.release()
        arena.buf.release()
    print("test_llama_hf: %s" % ("FAILED" if FAILS else "passed"))
    return 1 if FAILS else 0


class gfxgraphd_client:
    def __init__(self, gfxgraph, sock):
        self.c = gfxgraph.Client(socket=sock, name="test_llama_hf")

    def __enter__(self):
        return self.c

    def __exit__(self, *exc):
        self.c.close()


if __name__ == "__main__":
    sys.exit(main())
