#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch.compile(fn, backend="gfxgraph") against a hip daemon (run.sh).

- Covered graphs are ONE daemon partition: an nn.Module MLP (static and
  dynamic shapes) and a small transformer block (attention's matmuls,
  softmax, views and transposes included), at several batch sizes, equal to
  eager PyTorch; stats()["local"]["compile_log"] says mode "daemon" and one
  partition for each graph planned.  Under dynamic shapes Dynamo hands over
  sizes as int inputs and the layer norm's eps as a CPU 0-dim tensor read
  with .item(): host values, so the graph is still one daemon partition per
  input signature, and Inductor is never asked.
- A graph with an op the daemon does not have (cumsum) in the middle is cut
  into daemon, Inductor, daemon partitions (3 <= N), equal to eager; the
  same op in each of three layers would need 7 partitions: the graph goes
  to Inductor whole (compile_inductor_graphs), equal to eager, with no
  daemon replay.  Under dynamic shapes, cumsum and leaky_relu first
  (Inductor's partition, the slope a float attribute Dynamo passes as a
  tensor) then daemon nodes: Inductor compiles its partition per signature without
  a failure (compile_inductor_failures), and from each signature's third call
  on every daemon partition call is a replay (the first call is the whole
  graph's recording run, which finds the cut; the second records each
  daemon partition).  Inductor made to fail (its
  compile raising, then a compiled partition raising when called): the
  partition runs as its FX code, equal to eager, each failure counted,
  the daemon partitions still replayed.
- A Hugging Face LlamaForCausalLM decode step (small random config,
  StaticCache, sdpa; f32 and f16): torch.compile(step, backend="gfxgraph")
  gives the logits of the same step in eager PyTorch (rel-L2 1e-5 f32,
  1e-2 f16) over several steps, reports its partitions, and is routed
  (each graph one daemon partition, or at most N with Inductor's; every
  daemon partition call after the first a daemon graph launch) or, where
  an op of the step is not covered, to Inductor (whole past N
  partitions), with no daemon replay.  SKIP lines, not failures, without
  transformers.

Around every routed run the daemon's counters and the package's must show
each daemon partition call as a daemon graph launch (_common.DaemonReplays):
a daemon whose graph launch fails answers eagerly with the right values,
and only the counters tell (test_fault_detection.py shows this file failing
against such a daemon)."""
import logging

import gfxgraph
from _common import DaemonReplays, check, finish, need_torch_cuda, rel, socket

torch = need_torch_cuda()
nn = torch.nn
F = nn.functional
sock = socket()
torch.manual_seed(0)
logging.basicConfig(level=logging.WARNING)
gfxgraph.enable(socket=sock)          # the process's client; registers the backend too
import torch._dynamo  # noqa: E402
from gfxgraph.compile import max_partitions  # noqa: E402

N = max_partitions()
check("gfxgraph" in torch._dynamo.list_backends(exclude_tags=()),
      "\"gfxgraph\" is a registered torch.compile backend")


def local():
    return gfxgraph.stats(sock)["local"]


def log_since(n0):
    return local()["compile_log"][n0:] if n0 is not None else []


class MLP(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Block(nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        self.h = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.RMSNorm(d, eps=1e-6) if hasattr(nn, "RMSNorm") else nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):               # x: [B, S, d]
        B, S, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q = q.view(B, S, self.h, D // self.h).transpose(1, 2)
        k = k.view(B, S, self.h, D // self.h).transpose(1, 2)
        v = v.view(B, S, self.h, D // self.h).transpose(1, 2)
        att = torch.softmax((q @ k.transpose(-1, -2)) * (D // self.h) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, S, D)
        x = x + self.proj(y)
        return x + self.down(F.silu(self.up(self.ln2(x))))


class Cumsum(nn.Module):
    """layers x (linear, cumsum, linear): cumsum has no daemon lowering."""

    def __init__(self, d=128, layers=1):
        super().__init__()
        self.a = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.b = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))

    def forward(self, x):
        for a, b in zip(self.a, self.b):
            x = b(torch.cumsum(F.gelu(a(x)), dim=-1) * 0.01) + x
        return x


def run(name, model, shapes, tol, dynamic=None, routed=True, calls=2):
    """cm(x) `calls` times for a new x of each shape in turn; the
    compile_log entries of the graphs planned meanwhile."""
    model = model.cuda().eval()
    cm = torch.compile(model, backend="gfxgraph", dynamic=dynamic)
    worst, n = 0.0, 0
    n0 = len(local()["compile_log"])
    # every daemon partition call of cm after its recording run a daemon
    # graph launch (the package counts those calls: compiled_replays).  A
    # graph that is one daemon partition records on a signature's first
    # call; a split one runs whole on the first (the recording that finds
    # the cut) and records its daemon partitions on the second, so it needs
    # three calls of a signature before one replays
    d = DaemonReplays(sock, name) if routed else None
    if d is not None:
        d.__enter__()
    with torch.no_grad():
        for shp in shapes:
            x = torch.randn(shp, device="cuda")
            for _ in range(calls):
                got = cm(x)
                worst = max(worst, rel(got, model(x)))
                n += 1
        torch.cuda.synchronize()
    if d is not None:
        d.expect(None)
        d.__exit__(None, None, None)
    check(worst < tol, "%s: %d calls at shapes %s equal eager (worst rel L2 %.2g < %g)"
          % (name, n, shapes, worst, tol))
    return log_since(n0)


def parts(log):
    return [(r.get("mode"), r.get("partitions"), r.get("daemon_partitions"),
             r.get("inductor_partitions"), r.get("split")) for r in log]


def replays_expected(log, calls):
    """Daemon partition replays for `calls` calls of each graph planned in
    log (one entry per graph and signature): a daemon graph's calls after
    its first, a split one's daemon partitions' calls after its second."""
    n = 0
    for r in log:
        if r.get("mode") == "daemon":
            n += calls - 1
        elif r.get("mode") == "mixed":
            n += max(0, calls - 2) * (r.get("daemon_partitions") or 0)
    return n


def whys(log):
    """Why graphs planned did not go to the daemon whole (for a failure's
    message)."""
    return [("%s: %s" % (r.get("op"), r.get("why")))[:300] + (
        "; Inductor failed: %s" % r["inductor_failed"][:200] if r.get("inductor_failed") else "")
        for r in log if r.get("mode") != "daemon"]


# ---- covered graphs: one daemon partition ---------------------------------

p0 = local()["compiled_partitions"]
lg = run("MLP module (layernorm, linear, gelu, linear, residual add)", MLP(),
         [(1, 512), (3, 512), (8, 512), (8, 512), (30, 512)], 1e-4, dynamic=False)
check(lg and all(r["mode"] == "daemon" and r["partitions"] == 1 for r in lg) and
      local()["compiled_partitions"] - p0 == len(lg),
      "MLP: each graph planned is ONE daemon partition (%d graphs: %s)" % (len(lg), parts(lg)))
f0 = local()["compile_inductor_failures"]
lg = run("MLP module, dynamic shapes", MLP(), [(2, 512), (5, 512), (9, 512)], 1e-4,
         dynamic=True)
check(lg and all(r["mode"] == "daemon" and r["partitions"] == 1 for r in lg),
      "MLP, dynamic shapes: one daemon partition per input signature (%s%s)"
      % (parts(lg), "; not routed: %s" % whys(lg) if whys(lg) else ""))
check(len(lg) == 3 and local()["compile_inductor_failures"] == f0,
      "MLP, dynamic shapes: one plan for each of the 3 input signatures (%d), no Inductor "
      "failure (compile_inductor_failures +%d)"
      % (len(lg), local()["compile_inductor_failures"] - f0))
lg = run("transformer block (attention matmuls, softmax, views on the daemon)", Block(),
         [(1, 16, 256), (2, 16, 256), (4, 16, 256)], 1e-4, dynamic=False)
check(lg and all(r["mode"] == "daemon" and r["partitions"] == 1 for r in lg),
      "block: ONE daemon partition per graph, attention included (%s)" % parts(lg))

# ---- partly covered: daemon + Inductor, or Inductor whole -----------------

ind0 = local()["compile_inductor_graphs"]
lg = run("linear, cumsum, linear (cumsum not covered)", Cumsum(layers=1),
         [(4, 128), (4, 128)], 1e-4, dynamic=False)
loc = local()
check(lg and all(r["mode"] == "mixed" and r["partitions"] == 3 and r["daemon_partitions"] == 2
                 and r["inductor_partitions"] == 1 for r in lg),
      "one cumsum: daemon, Inductor, daemon partitions (3 <= N=%d): %s" % (N, parts(lg)))
check(any("cumsum" in k for k in loc["compile_fallback_ops"]),
      "cumsum is named among the ops left to Inductor: %r" % sorted(loc["compile_fallback_ops"]))
r0 = loc["compiled_replays"]
lg = run("three layers with a cumsum each", Cumsum(layers=3), [(4, 128), (4, 128)], 1e-4,
         dynamic=False, routed=False)
loc = local()
check(lg and all(r["mode"] == "inductor" and r["split"] == 7 for r in lg) and
      loc["compile_inductor_graphs"] - ind0 == len(lg) and loc["compiled_replays"] == r0,
      "three cumsums: the cut would need 7 partitions (> N=%d): Inductor whole, no daemon "
      "replay (%s, compile_inductor_graphs +%d)" % (N, parts(lg),
                                                   loc["compile_inductor_graphs"] - ind0))


class CumsumFirst(nn.Module):
    """cumsum and leaky_relu (no daemon lowering) first, then daemon nodes;
    the slope, a float attribute, is what Dynamo under dynamic shapes passes
    as a tensor read with .item() in the first partition, Inductor's."""

    def __init__(self, d=128):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.slope = 0.2

    def forward(self, x):
        return self.a(F.leaky_relu(torch.cumsum(x, dim=-1), self.slope)) + x


f0 = local()["compile_inductor_failures"]
r0 = local()["compiled_replays"]
# three calls a shape: a split graph's first replay is a signature's third call
lg = run("cumsum first, dynamic shapes", CumsumFirst(), [(3, 128), (6, 128)], 1e-4,
         dynamic=True, calls=3)
nr = local()["compiled_replays"] - r0
check(nr == replays_expected(lg, 3),
      "cumsum first, dynamic shapes: each signature's third call replays each of its daemon "
      "partitions (compiled_replays +%d, %d expected for %s)"
      % (nr, replays_expected(lg, 3), parts(lg)))
check(lg and all(r["mode"] == "mixed" and r["daemon_partitions"] >= 1 and
                 r["inductor_partitions"] >= 1 and r["partitions"] <= N for r in lg) and
      local()["compile_inductor_failures"] == f0,
      "cumsum first, dynamic shapes: Inductor and daemon partitions (%s), Inductor compiled "
      "its partition for each signature (compile_inductor_failures +%d)"
      % (parts(lg), local()["compile_inductor_failures"] - f0))

# Inductor made to fail: at compile, then when its compiled partition is called
import torch._inductor  # noqa: E402
_real_compile = torch._inductor.compile


def _failing_compile(gm, example_inputs, *a, **kw):
    raise RuntimeError("inductor compile made to fail by the test")


def _failing_call(gm, example_inputs, *a, **kw):
    def call(*args):
        raise RuntimeError("inductor call made to fail by the test")
    return call


for how, fake in (("compile", _failing_compile), ("call", _failing_call)):
    # a new Dynamo compile, so that the backend plans the graph (and asks
    # Inductor) again rather than reusing an earlier model's plan
    torch._dynamo.reset()
    f0 = local()["compile_inductor_failures"]
    torch._inductor.compile = fake
    try:
        lg = run("one cumsum, Inductor's %s failing" % how, Cumsum(layers=1),
                 [(4, 128), (4, 128)], 1e-4, dynamic=False)
    finally:
        torch._inductor.compile = _real_compile
    nf = local()["compile_inductor_failures"] - f0
    check(lg and all(r["mode"] == "mixed" and r["inductor_partitions"] == 1 for r in lg) and
          nf == len(lg),
          "Inductor's %s failing: its partition ran as its FX code (equal to eager above), "
          "one failure counted per Inductor partition (%d for %d graphs: %s)"
          % (how, nf, len(lg), parts(lg)))


# ---- a Hugging Face Llama decode step ---------------------------------------

def make_cache(model, dtype):
    from transformers import StaticCache
    tries = [dict(config=model.config, max_cache_len=64),
             dict(config=model.config, max_batch_size=1, max_cache_len=64, device="cuda",
                  dtype=dtype)]
    err = None
    for kw in tries:
        try:
            return StaticCache(**kw)
        except TypeError as e:
            err = e
    raise err


def hf_llama(dtn, tol, steps=8):
    try:
        import transformers
    except ImportError:
        print("SKIP: transformers is not installed: the HF Llama case (%s)" % dtn)
        return
    dtype = {"f32": torch.float32, "f16": torch.float16}[dtn]
    torch.manual_seed(1234)
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=256,
                                   tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    model = transformers.LlamaForCausalLM(cfg).to("cuda", dtype).eval()
    caches = [make_cache(model, dtype), make_cache(model, dtype)]    # eager's, compile's
    g = torch.Generator(device="cpu").manual_seed(99)
    prompt = torch.randint(0, cfg.vocab_size, (1, 8), generator=g).cuda()
    with torch.no_grad():
        for c in caches:
            model(input_ids=prompt, past_key_values=c, cache_position=torch.arange(8,
                  device="cuda"), use_cache=True)

    def step(ids, pos, cache):
        return model(input_ids=ids, past_key_values=cache, cache_position=pos,
                     use_cache=True).logits

    cstep = torch.compile(step, backend="gfxgraph")
    name = "HF Llama decode step (%s)" % dtn
    n0 = len(local()["compile_log"])
    ids = torch.randint(0, cfg.vocab_size, (1, 1), generator=g).cuda()
    worst = [0.0]
    t = [8]

    def one():
        pos = torch.tensor([t[0]], device="cuda")
        with torch.no_grad():
            ref = step(ids, pos, caches[0])
            got = cstep(ids, pos, caches[1])
        worst[0] = max(worst[0], rel(got, ref))
        ids.copy_(ref[:, -1].argmax(-1, keepdim=True))     # the same next token for both
        t[0] += 1

    for _ in range(2):          # each graph's first call (recorded), then one more
        one()
    lg = log_since(n0)
    routed = any((r.get("daemon_partitions") or 0) > 0 for r in lg)
    total = sum(r.get("partitions") or 0 for r in lg)
    print("   info: %s: %d graph(s), partitions %s, %d in all; first uncovered op: %s"
          % (name, len(lg), parts(lg), total,
             next(("%s (%s)" % (r["op"], r.get("why", ""))[:300] for r in lg if r.get("op")),
                  "none")))
    if routed:
        with DaemonReplays(sock, name) as d:
            for _ in range(steps):
                one()
            torch.cuda.synchronize()
            d.expect(None)
        check(all(r["mode"] in ("daemon", "mixed") and r["partitions"] <= N for r in lg),
              "%s: routed, %s (%s)" % (name, "every graph ONE daemon partition" if
                                       all(r["partitions"] == 1 for r in lg) else
                                       "at most N=%d partitions a graph" % N, parts(lg)))
    else:
        r0 = local()["compiled_replays"]
        for _ in range(steps):
            one()
        torch.cuda.synchronize()
        check(lg and all(r["mode"] in ("inductor", "mixed") and r["partitions"] <= N
                         for r in lg) and local()["compiled_replays"] == r0,
              "%s: not all ops covered: planned with at most N=%d partitions, Inductor "
              "whole past that (%s)" % (name, N, parts(lg)))
    check(worst[0] < tol, "%s: %d steps, logits equal eager (worst rel L2 %.2g < %g)"
          % (name, steps + 2, worst[0], tol))


hf_llama("f32", 1e-5)
hf_llama("f16", 1e-2)
gfxgraph.disable()
finish("test_torch_compile")
