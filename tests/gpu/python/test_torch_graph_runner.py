#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A graph runner in the style of SGLang's CudaGraphRunner (run.sh starts a
hip daemon and sets GFXGRAPH_SOCKET / GFXGRAPH_LIB): a small HF
LlamaForCausalLM's modules driven by the runner's own decode step over
static buffers of the largest batch (input_ids, positions, seq_lens, cache
slots), sliced [:bs]; the KV cache a pool of slots (request r's token at
position p in slot r * MAX_LEN + p) written by index_copy_ and read back
per request with a seq_lens mask; captured at bs 8, 4, 2, 1 in one memory
pool, largest first; a step of n requests padded to the next captured size.

Under gfxgraph.enable() the captures at 8, 4 and 2 must be ONE daemon
program whose buckets hold 2, 4 and 8 (frontend/runner.py), each graph
replaying its own bucket; every step's logits equal PyTorch's graphs of
the same runner (f32, rel-L2 1e-5, the same greedy tokens); the daemon's
counters show every replay as a graph launch, and its cache rows of that
program the replays of each bucket.  Exit 0 / 1 / 77 (as run.sh's tests)."""
import sys

import gfxgraph
from _common import DaemonReplays, check, finish, need_torch_cuda, rel, socket

torch = need_torch_cuda()
sock = socket()
try:
    import transformers
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
except ImportError:
    print("SKIP: transformers is not installed")
    sys.exit(77)
F = torch.nn.functional

MAX_BS = 8
MAX_LEN = 32
SIZES = (8, 4, 2, 1)            # captured largest first, as runners do
# requests active per step: batches padded to 2, 4 and 8 (and 1)
PLAN = [8, 8, 3, 3, 2, 2, 5, 7, 1, 4, 6, 2, 8, 3]


class Runner:
    """The runner: static buffers, one graph per captured size."""

    def __init__(self, model):
        cfg = model.config
        self.model = model
        self.hq = cfg.num_attention_heads
        self.hkv = cfg.num_key_value_heads
        self.dh = cfg.hidden_size // self.hq
        L = cfg.num_hidden_layers
        dev, dt = "cuda", next(model.parameters()).dtype
        slots = MAX_BS * MAX_LEN + 1          # the last: padding rows write there
        self.k = [torch.zeros(slots, self.hkv, self.dh, device=dev, dtype=dt) for _ in range(L)]
        self.v = [torch.zeros(slots, self.hkv, self.dh, device=dev, dtype=dt) for _ in range(L)]
        self.input_ids = torch.zeros(MAX_BS, dtype=torch.long, device=dev)
        self.positions = torch.zeros(MAX_BS, dtype=torch.long, device=dev)
        self.seq_lens = torch.ones(MAX_BS, dtype=torch.long, device=dev)
        self.slots = torch.zeros(MAX_BS, dtype=torch.long, device=dev)
        self.keys = torch.arange(MAX_LEN, device=dev)
        self.graphs, self.out = {}, {}

    def forward(self, bs):
        m = self.model.model
        ids, pos = self.input_ids[:bs], self.positions[:bs]
        lens, slots = self.seq_lens[:bs], self.slots[:bs]
        h = m.embed_tokens(ids)[:, None, :]                       # [bs, 1, D]
        cos, sin = m.rotary_emb(h, pos[:, None])
        mask = (self.keys[None, :] < lens[:, None])[:, None, None, :]   # [bs, 1, 1, S]
        for i, layer in enumerate(m.layers):
            at = layer.self_attn
            x = layer.input_layernorm(h)
            q = at.q_proj(x).view(bs, 1, self.hq, self.dh).transpose(1, 2)
            k = at.k_proj(x).view(bs, 1, self.hkv, self.dh).transpose(1, 2)
            v = at.v_proj(x).view(bs, 1, self.hkv, self.dh).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            self.k[i].index_copy_(0, slots, k[:, :, 0, :])
            self.v[i].index_copy_(0, slots, v[:, :, 0, :])
            K, V = self.per_request(self.k[i], bs), self.per_request(self.v[i], bs)
            o = F.scaled_dot_product_attention(q, K, V, attn_mask=mask)
            h = h + at.o_proj(o.transpose(1, 2).reshape(bs, 1, self.hq * self.dh))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return self.model.lm_head(m.norm(h))[:, 0, :]             # [bs, V]

    def per_request(self, cache, bs):
        """The cache rows of requests 0..bs-1 as [bs, Hq, S, Dh], each kv
        head repeated for its query heads (GQA) before the transpose, so the
        copy walks whole [S, Hkv] planes."""
        rep = self.hq // self.hkv
        c = cache[:MAX_BS * MAX_LEN].view(MAX_BS, MAX_LEN, self.hkv, self.dh)[:bs]
        c = c[:, :, :, None, :].expand(bs, MAX_LEN, self.hkv, rep, self.dh)
        return c.reshape(bs, MAX_LEN, self.hq, self.dh).transpose(1, 2)

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for bs in SIZES:
                for _ in range(2):
                    self.forward(bs)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        for k, v in zip(self.k, self.v):          # the warm-up wrote slots
            k.zero_()
            v.zero_()
        pool = None
        for bs in SIZES:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                self.out[bs] = self.forward(bs)
            pool = g.pool()
            self.graphs[bs] = g

    def step(self, toks, pos):
        """Decode one token for requests 0..n-1 (toks, pos: their token and
        position), padded to the next captured size; the n rows of logits
        and the size replayed."""
        n = len(toks)
        bs = min(b for b in SIZES if b >= n)
        ids = torch.zeros(bs, dtype=torch.long)
        ps = torch.zeros(bs, dtype=torch.long)
        ids[:n], ps[:n] = torch.tensor(toks), torch.tensor(pos)
        self.input_ids[:bs].copy_(ids)
        self.positions[:bs].copy_(ps)
        self.seq_lens[:bs].copy_(ps + 1)
        sl = torch.full((bs,), MAX_BS * MAX_LEN, dtype=torch.long)   # padding rows' slot
        sl[:n] = torch.arange(n) * MAX_LEN + ps[:n]
        self.slots[:bs].copy_(sl)
        self.graphs[bs].replay()
        return self.out[bs][:n], bs


def main():
    torch.manual_seed(1234)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=2 * MAX_LEN,
                                   initializer_range=0.1, rms_norm_eps=1e-5)
    cfg._attn_implementation = "sdpa"
    model = transformers.LlamaForCausalLM(cfg).to("cuda").eval()
    with torch.no_grad():
        gfxgraph.disable()
        ref = Runner(model)
        ref.capture()
        gfxgraph.enable(sock)
        fb0 = gfxgraph.stats(sock)["local"]["fallback_count"]
        run = Runner(model)
        run.capture()
        fb1 = gfxgraph.stats(sock)["local"]["fallback_count"]
        progs = {bs: run.graphs[bs].gfxgraph_program for bs in SIZES}
        reps = {bs: run.graphs[bs].gfxgraph_report or {} for bs in SIZES}
        for bs in SIZES:
            r = reps[bs]
            print("CAPTURE bs %d: program %s, buckets %s, nodes %s, runner %s"
                  % (bs, progs[bs].id if progs[bs] is not None else None, r.get("buckets"),
                     r.get("nodes"), r.get("runner", "-")))
        check(fb1 == fb0 and all(progs[bs] is not None for bs in SIZES),
              "every capture routed to the daemon (fallbacks +%d)" % (fb1 - fb0))
        p = progs[8]
        shared = [bs for bs in SIZES if progs[bs] is p]
        buckets = reps[2].get("buckets") or []
        check(p is not None and {2, 4, 8} <= set(shared) and {2, 4, 8} <= set(buckets),
              "the captures at 8, 4 and 2 are one daemon program %r with buckets %s (shared by "
              "sizes %s; bs 1: %s)" % (p, buckets, shared,
                                       "the same program" if progs[1] is p else "its own"))
        if p is None or not {2, 4, 8} <= set(shared):
            finish("test_torch_graph_runner")
        gen = torch.Generator(device="cpu").manual_seed(5)
        toks = torch.randint(0, 128, (MAX_BS,), generator=gen).tolist()
        pos = [0] * MAX_BS
        per_bucket = {}
        worst, same = 0.0, True
        with DaemonReplays(sock, "graph runner") as d:
            for n in PLAN:
                lr, bs_r = ref.step(toks[:n], pos[:n])
                lg, bs = run.step(toks[:n], pos[:n])
                per_bucket[bs] = per_bucket.get(bs, 0) + 1
                worst = max(worst, rel(lg, lr))
                nr, ng = lr.argmax(-1), lg.argmax(-1)
                same = same and bool((nr == ng).all())
                toks[:n] = nr.tolist()
                pos[:n] = [x + 1 for x in pos[:n]]
            torch.cuda.synchronize()
            d.expect(len(PLAN))
        check(worst <= 1e-5 and same, "%d steps (batches %s, buckets replayed %s): logits within "
              "rel-L2 1e-5 of PyTorch's graphs (max %.3g), greedy tokens equal: %s"
              % (len(PLAN), PLAN, per_bucket, worst, same))
        rows = [r for r in (gfxgraph.stats(sock).get("cache") or []) if r.get("program") == p.id]
        got = {r.get("bucket"): r.get("replays", 0) for r in rows}
        want = {b: c for b, c in per_bucket.items() if progs[b] is p}
        check(all(got.get(b) == c for b, c in want.items()),
              "the program's cache rows show each bucket's replays: %s (want %s)" % (got, want))
        print("RUNNER program %s buckets %s nodes %s replays by bucket %s max_rel_l2 %.3g tokens_equal %s"
              % (p.id, buckets, reps[2].get("nodes"), got, worst, same))
        for g in list(run.graphs.values()) + list(ref.graphs.values()):
            g.reset()
    gfxgraph.disable()
    finish("test_torch_graph_runner")


if __name__ == "__main__":
    main()
