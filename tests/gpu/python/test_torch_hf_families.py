#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hugging Face decode steps routed whole through gfxgraph.enable() (run.sh
starts a hip daemon and sets GFXGRAPH_SOCKET / GFXGRAPH_LIB).

For LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM,
Gemma2ForCausalLM and GPT2LMHeadModel (transformers' own classes, the small
random configs of tests/gpu/record_traces.py), f32 / f16 / bf16, batch 1
and 8, StaticCache, sdpa: two caches of one model get the same prefill and
the same warm-up steps on a side stream, then the decode step over each is
captured the usual way (static input_ids, torch.cuda.graph): one with
PyTorch's own graph (gfxgraph disabled), one under gfxgraph.enable().  The
second must be routed (a daemon program, no new fallback, its node count in
the report).  Transformers' static cache keeps its position on the device
and each replay advances it, so both graphs decode the same positions:
  f32: 64 greedy steps, each graph fed its own argmax, the tokens identical;
  f16/bf16: 64 steps fed PyTorch's tokens, every step's logits within
  rel-L2 1e-2 of PyTorch's graph.
The daemon's counters must show exactly one graph launch per replay
(_common.DaemonReplays).  One line per case:
  family dtype batch routed nodes max-rel-L2 / tokens-equal
Exit 0 all passed, 1 a check failed, 77 no torch / CUDA / transformers."""
import os
import sys

import gfxgraph
from _common import DaemonReplays, check, finish, need_torch_cuda, rel, socket

torch = need_torch_cuda()
sock = socket()
try:
    import transformers
except ImportError:
    print("SKIP: transformers is not installed")
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from record_traces import FAMILIES  # noqa: E402  (the recorded traces' configs)

STEPS = 64
PREFILL = 6
WARMUP = 2
MAX_CACHE = 96          # prefill + warm-up + the steps, with room
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
ONLY = os.environ.get("GG_HF_ONLY")     # e.g. "llama" or "gemma2:bf16"


def model_of(family, dtn):
    cls_name, cfg_name, cfg = FAMILIES[family]
    cfg = dict(cfg)
    if "n_positions" in cfg:
        cfg["n_positions"] = 2 * MAX_CACHE
    else:
        cfg["max_position_embeddings"] = 2 * MAX_CACHE
    torch.manual_seed(1234)
    config = getattr(transformers, cfg_name)(**cfg)
    config._attn_implementation = "sdpa"
    return getattr(transformers, cls_name)(config).to("cuda", DT[dtn]).eval()


def cache_of(model, batch, dtype):
    from transformers import StaticCache
    err = None
    for kw in (dict(config=model.config, max_cache_len=MAX_CACHE),
               dict(config=model.config, max_batch_size=batch, max_cache_len=MAX_CACHE,
                    device="cuda", dtype=dtype)):
        try:
            return StaticCache(**kw)
        except TypeError as e:
            err = e
    raise err


def captured(model, batch, dtype, prompt, first):
    """Prefill a new cache, warm up on a side stream, capture the step;
    (graph, static ids, static logits).  Every call on the same prompt and
    first tokens leaves its cache in the same state."""
    cache = cache_of(model, batch, dtype)
    model(input_ids=prompt, past_key_values=cache,
          cache_position=torch.arange(PREFILL, device="cuda"), use_cache=True)
    ids = first.clone()
    pos = torch.tensor([PREFILL], dtype=torch.long, device="cuda")

    def step():
        return model(input_ids=ids, past_key_values=cache, cache_position=pos,
                     use_cache=True).logits

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(WARMUP):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        logits = step()
    return g, ids, logits, cache


def run_case(family, dtn, batch):
    name = "%s %s b%d" % (family, dtn, batch)
    dtype = DT[dtn]
    model = model_of(family, dtn)
    gen = torch.Generator(device="cpu").manual_seed(99)
    vocab = model.config.vocab_size
    prompt = torch.randint(0, vocab, (batch, PREFILL), generator=gen).to("cuda")
    first = torch.randint(0, vocab, (batch, 1), generator=gen).to("cuda")
    with torch.no_grad():
        gfxgraph.disable()
        g_ref, ids_ref, lg_ref, c_ref = captured(model, batch, dtype, prompt, first)
        gfxgraph.enable(sock)
        fb0 = gfxgraph.stats(sock)["local"]["fallback_count"]
        g, ids, lg, c = captured(model, batch, dtype, prompt, first)
        fb1 = gfxgraph.stats(sock)["local"]["fallback_count"]
        rep = getattr(g, "gfxgraph_report", None) or {}
        routed = g.gfxgraph_program is not None
        nodes = rep.get("nodes", 0)
        check(routed and fb1 == fb0 and nodes > 0,
              "%s: the capture is one daemon program (%s, %d nodes, %s kernels, fallbacks "
              "+%d)" % (name, g.gfxgraph_program if routed else
                        "NOT routed: %s %s" % (rep.get("op"), rep.get("why")),
                        nodes, rep.get("kernels"), fb1 - fb0))
        if not routed:
            print("CASE %-8s %-4s b%d routed=no nodes=0 first uncovered: %s"
                  % (family, dtn, batch, rep.get("op")))
            return
        worst, equal = 0.0, True
        toks_ref, toks = [], []
        with DaemonReplays(sock, name) as d:
            for _ in range(STEPS):
                g_ref.replay()
                t_ref = lg_ref[:, -1].argmax(-1, keepdim=True)
                if dtn == "f32":
                    g.replay()
                    t = lg[:, -1].argmax(-1, keepdim=True)
                    toks_ref.append(t_ref.clone())
                    toks.append(t.clone())
                    ids_ref.copy_(t_ref)
                    ids.copy_(t)
                else:
                    g.replay()
                    worst = max(worst, rel(lg[:, -1].float(), lg_ref[:, -1].float()))
                    ids_ref.copy_(t_ref)
                    ids.copy_(t_ref)
            torch.cuda.synchronize()
            d.expect(STEPS)
        if dtn == "f32":
            a, b = torch.cat(toks_ref, 1), torch.cat(toks, 1)
            equal = bool((a == b).all())
            same = int((a == b).all(0).long().cumprod(0).sum())
            check(equal, "%s: %d greedy tokens identical to PyTorch's graph (first %d equal)"
                  % (name, STEPS, same))
            print("CASE %-8s %-4s b%d routed=yes nodes=%d kernels=%s tokens_equal=%s (%d/%d)"
                  % (family, dtn, batch, nodes, rep.get("kernels"), equal, same, STEPS))
        else:
            check(worst <= 1e-2, "%s: logits of %d steps within rel-L2 1e-2 of PyTorch's graph "
                  "(max %.3g)" % (name, STEPS, worst))
            print("CASE %-8s %-4s b%d routed=yes nodes=%d kernels=%s max_rel_l2=%.3g"
                  % (family, dtn, batch, nodes, rep.get("kernels"), worst))
        g.reset()
        g_ref.reset()
    del model, c, c_ref
    torch.cuda.empty_cache()


def main():
    gfxgraph.enable(sock)
    for family in ("llama", "qwen2", "mistral", "gemma2", "gpt2"):
        for dtn in ("f32", "f16", "bf16"):
            for batch in (1, 8):
                tag = "%s:%s:%d" % (family, dtn, batch)
                if ONLY and not tag.startswith(ONLY):
                    continue
                try:
                    run_case(family, dtn, batch)
                except Exception as e:   # noqa: BLE001 -- one case's failure, the rest go on
                    check(False, "%s: %s: %s" % (tag, type(e).__name__, e))
                    print("CASE %s ERROR %s: %s" % (tag, type(e).__name__, e))
    gfxgraph.disable()
    finish("test_torch_hf_families")


if __name__ == "__main__":
    main()
