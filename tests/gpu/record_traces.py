# SPDX-License-Identifier: MIT
"""Record the aten ops of Hugging Face decode steps captured in a CUDA graph,
as the traces tests/traces/ holds (the PyTorch frontend's input format,
docs/python.md "Traces").

    python3 tests/gpu/record_traces.py OUTDIR [FAMILY:DTYPE:BATCH ...]

For each case: a small transformers model of the family (random weights,
seeded), a StaticCache, a prefill of a few tokens run eagerly, then the
decode step captured the usual way (warm-up on a side stream, static
input_ids and cache_position, torch.cuda.graph) while a TorchDispatchMode
records every aten op with the tensors it reads and writes.  Then the step's
inputs are set to the next token and position, every storage the step
reads from outside the graph's pool is saved ("before"), the graph is
replayed once, and every such storage the step writes, and the storages of
the logits, are saved again ("after").

Writes OUTDIR/<family>_<dtype>_b<batch>.json and .npz, and
OUTDIR/manifest.json (what was recorded, what failed and why).  Needs
torch with CUDA and transformers."""
import json
import math
import os
import sys
import traceback

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

DT_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
            torch.int64: "i64", torch.int32: "i32", torch.bool: "bool"}
DT_TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# small configs: every dim odd enough to catch layout slips, weights spread
# wide enough (initializer_range) that f32 greedy gaps stay above rounding
COMMON = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              initializer_range=0.1, tie_word_embeddings=False)
FAMILIES = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(COMMON, rms_norm_eps=1e-5)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(COMMON, rms_norm_eps=1e-6)),
    # transformers' sliding-window cache layer builds a CPU tensor in its
    # update, which a CUDA graph capture refuses: these two are recorded
    # with full attention in every layer (their other ops unchanged)
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(COMMON, sliding_window=None)),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config",
               dict(COMMON, head_dim=16, sliding_window=4096,
                    layer_types=["full_attention", "full_attention"], query_pre_attn_scalar=16,
                    attn_logit_softcapping=50.0, final_logit_softcapping=30.0)),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config",
             dict(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                  initializer_range=0.1)),
}
DEFAULT_CASES = [(f, d, b) for f in FAMILIES for (d, b) in (("f32", 1), ("f16", 8), ("bf16", 1))]
MAX_CACHE = 16
PREFILL = 6


class Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.records = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.records.append((func, args, kwargs or {}, out))
        return out


class Trace:
    """The IR under construction: storages by data pointer, tensors by
    (storage, offset, shape, stride, dtype)."""

    def __init__(self):
        self.storages = {}     # data_ptr -> dict
        self.st_keep = {}      # data_ptr -> a tensor on it (to read it back)
        self.tensors = {}      # key -> dict
        self.seen_out = set()  # storages first seen as an op's output

    def storage(self, t, produced):
        st = t.untyped_storage()
        p = st.data_ptr()
        s = self.storages.get(p)
        if s is None:
            s = {"id": len(self.storages), "nbytes": st.nbytes(), "external": not produced}
            self.storages[p] = s
            self.st_keep[p] = t
        else:
            s["nbytes"] = max(s["nbytes"], st.nbytes())
        return s

    def tensor(self, t, produced=False):
        s = self.storage(t, produced)
        dt = DT_NAMES.get(t.dtype, str(t.dtype).replace("torch.", ""))
        key = (s["id"], t.storage_offset(), tuple(t.shape), tuple(t.stride()), dt)
        d = self.tensors.get(key)
        if d is None:
            d = {"id": len(self.tensors), "storage": s["id"], "offset": t.storage_offset(),
                 "shape": list(t.shape), "stride": list(t.stride()), "dtype": dt}
            self.tensors[key] = d
        return d["id"]

    def value(self, v, produced=False):
        if isinstance(v, torch.Tensor):
            return {"t": self.tensor(v, produced)}
        if isinstance(v, (list, tuple)):
            return [self.value(x, produced) for x in v]
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"float": str(v)}
        if isinstance(v, torch.dtype):
            return {"dtype": DT_NAMES.get(v, str(v).replace("torch.", ""))}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        return {"repr": repr(v)}

    def op(self, func, args, kwargs, out):
        # inputs first (an input's storage seen before any output is external)
        a = self.value(list(args))
        k = {key: self.value(v) for key, v in kwargs.items()}
        o = self.value(out, produced=True)
        return {"op": str(func), "args": a, "kwargs": k, "out": o}


def written_tensors(func, args, kwargs):
    """The tensors an op writes in place (its schema's mutable arguments)."""
    out = []
    try:
        schema = func._schema
    except AttributeError:
        return out
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        v = kwargs.get(arg.name) if arg.name in kwargs else (args[i] if i < len(args) else None)
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


def make_cache(transformers, model, batch, dtype, dev):
    from transformers import StaticCache
    tries = [dict(config=model.config, max_cache_len=MAX_CACHE),
             dict(config=model.config, max_batch_size=batch, max_cache_len=MAX_CACHE,
                  device=dev, dtype=dtype)]
    err = None
    for kw in tries:
        try:
            return StaticCache(**kw)
        except TypeError as e:
            err = e
    raise err


def record(family, dtn, batch, outdir):
    import transformers
    cls_name, cfg_name, cfg = FAMILIES[family]
    dev = torch.device("cuda")
    dtype = DT_TORCH[dtn]
    torch.manual_seed(1234)
    config = getattr(transformers, cfg_name)(**cfg)
    config._attn_implementation = "sdpa"
    model = getattr(transformers, cls_name)(config).to(dev, dtype).eval()
    cache = make_cache(transformers, model, batch, dtype, dev)
    g = torch.Generator(device="cpu").manual_seed(99)
    prompt = torch.randint(0, config.vocab_size, (batch, PREFILL), generator=g).to(dev)
    with torch.no_grad():
        model(input_ids=prompt, past_key_values=cache,
              cache_position=torch.arange(PREFILL, device=dev), use_cache=True)
    ids = torch.zeros(batch, 1, dtype=torch.long, device=dev)
    cache_pos = torch.tensor([PREFILL], dtype=torch.long, device=dev)

    def step():
        return model(input_ids=ids, past_key_values=cache, cache_position=cache_pos,
                     use_cache=True).logits

    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        rec = Recorder()
        with torch.cuda.graph(graph):
            with rec:
                logits = step()
    torch.cuda.synchronize()

    tr = Trace()
    ops = []
    written = []
    for func, args, kwargs, out in rec.records:
        ops.append(tr.op(func, args, kwargs, out))
        written.extend(written_tensors(func, args, kwargs))
    in_ids = [tr.tensor(ids), tr.tensor(cache_pos)]
    out_ids = [tr.tensor(logits, produced=True)]
    state = []
    for t in written:
        s = tr.storage(t, False)
        if s["external"]:
            tid = tr.tensor(t)
            if tid not in state:
                state.append(tid)

    # the step's inputs: the next token of each row and the next position
    ids.copy_(torch.randint(0, config.vocab_size, (batch, 1), generator=g).to(dev))
    cache_pos.fill_(PREFILL)
    torch.cuda.synchronize()

    def raw(p):
        t = tr.st_keep[p]
        st = t.untyped_storage()
        u = torch.empty(0, dtype=torch.uint8, device=t.device)
        u.set_(st, 0, (st.nbytes(),))
        return u.cpu().numpy().copy()

    arrays = {}
    for p, s in tr.storages.items():
        if s["external"]:
            arrays["s%d_before" % s["id"]] = raw(p)
    graph.replay()
    torch.cuda.synchronize()
    after = {d["storage"] for d in tr.tensors.values() if d["id"] in state or d["id"] in out_ids}
    for p, s in tr.storages.items():
        if s["id"] in after:
            arrays["s%d_after" % s["id"]] = raw(p)
    # the replay against an eager step from the same state (every external
    # storage put back as it was before the replay; transformers' static
    # cache keeps its own position on the device and advances it): the
    # trace must be the step the model computes
    out_logits = logits.float().clone()
    for p, s in tr.storages.items():
        if s["external"]:
            t = tr.st_keep[p]
            st = t.untyped_storage()
            u = torch.empty(0, dtype=torch.uint8, device=t.device)
            u.set_(st, 0, (st.nbytes(),))
            u.copy_(torch.from_numpy(arrays["s%d_before" % s["id"]]).to(t.device))
    with torch.no_grad():
        eager = step().float()
    torch.cuda.synchronize()
    ref_rel = float((out_logits - eager).norm() / eager.norm().clamp_min(1e-30))
    name = "%s_%s_b%d" % (family, dtn, batch)
    doc = {
        "version": 1, "family": family, "model_class": cls_name, "dtype": dtn, "batch": batch,
        "config": {k: v for k, v in cfg.items()}, "max_cache_len": MAX_CACHE, "prefill": PREFILL,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(),
        "storages": sorted(tr.storages.values(), key=lambda s: s["id"]),
        "tensors": sorted(tr.tensors.values(), key=lambda d: d["id"]),
        "ops": ops, "inputs": in_ids, "outputs": out_ids, "state": state,
    }
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    np.savez_compressed(os.path.join(outdir, name + ".npz"), **arrays)
    kinds = sorted({o["op"] for o in ops})
    return {"name": name, "ops": len(ops), "kinds": kinds, "replay_vs_eager_rel_l2": ref_rel,
            "bytes": int(sum(a.nbytes for a in arrays.values()))}


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    cases = [tuple(c.split(":")) for c in sys.argv[2:]] or DEFAULT_CASES
    manifest = {"recorded": [], "failed": []}
    for fam, dtn, b in cases:
        try:
            r = record(fam, dtn, int(b), outdir)
            manifest["recorded"].append(r)
            print("recorded %s: %d ops, %d kinds" % (r["name"], r["ops"], len(r["kinds"])))
        except Exception as e:   # noqa: BLE001 -- record what failed, go on
            manifest["failed"].append({"case": [fam, dtn, b], "error": repr(e),
                                       "trace": traceback.format_exc()[-2000:]})
            print("FAILED %s %s b%s: %r" % (fam, dtn, b, e))
        torch.cuda.empty_cache()
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return 0 if not manifest["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
