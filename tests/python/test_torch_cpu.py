#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The package's torch parts that run without a GPU, against a cpu-backend
gfxgraphd (SKIP, 77, when torch does not import: CI has no torch; Debian's
python3-torch is enough here).

    test_torch_cpu.py --daemon PATH/gfxgraphd --lib PATH/libgfxgraph-client.so.0

- the torch.compile backend on CPU tensors: the FX graph of an MLP with an op
  the daemon lacks (cumsum) in the middle is split into daemon partitions and
  an Inductor one (eager without Inductor); each daemon partition runs as a
  program on the cpu backend (inputs staged in shared memory, weights copied there once) for batches
  1..20 and a 3-D input, equal to eager PyTorch; the daemon counted the
  replays; cumsum is named among the ops left to Inductor.  torch.compile
  itself when torch._dynamo exists, else the backend on a symbolic trace;
- gfxgraph.enable()'s frontend on recorded ops (decode chain, MLP on 2-D
  and 3-D inputs, scale/silu/add/softmax/div, broadcast bias, a transposed
  operand, a conversion): the expected daemon nodes; an op without a
  lowering (cumsum) refused by name with its operands;
- enable()/disable() patch and restore torch.cuda.CUDAGraph/graph.
"""
import argparse
import os
import shutil
import sys
import tempfile

import test_package as tp
from test_package import check, skip


def test_compile(torch, sock):
    import gfxgraph
    from gfxgraph import compile as gc
    from gfxgraph import cudagraph
    nn, F = torch.nn, torch.nn.functional
    cudagraph._state["socket"] = sock

    class MLP(nn.Module):
        def __init__(self, d=64):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x):
            h = self.fc2(F.gelu(self.fc1(self.ln(x)), approximate="tanh"))
            return torch.softmax(torch.cumsum(x + h, dim=-1) * 0.05 + self.ln.bias, dim=-1)

    torch.manual_seed(0)
    m = MLP().eval()
    st0 = gfxgraph.stats(sock)
    loc0 = dict(st0["local"])
    if hasattr(torch, "compile"):
        fn = torch.compile(m, backend=gc.gfxgraph_backend, dynamic=False)
        how = "torch.compile(backend=gfxgraph_backend)"
    else:
        from torch.fx.passes.shape_prop import ShapeProp
        gm = torch.fx.symbolic_trace(m)
        x0 = torch.randn(8, 64)
        ShapeProp(gm).propagate(x0)
        fn = gc.gfxgraph_backend(gm, [x0])
        how = "gfxgraph_backend on torch.fx.symbolic_trace (torch %s has no torch.compile)" \
            % torch.__version__
    worst = 0.0
    with torch.no_grad():
        # per input signature the backend records its first call and the
        # partitions theirs: the third call is the first replay
        for b in (8, 3, 1, 8, 20, 5):
            x = torch.randn(b, 64)
            for _ in range(3):
                worst = max(worst, float((fn(x) - m(x)).abs().max()))
        x3 = torch.randn(2, 5, 64)
        for _ in range(3):
            worst = max(worst, float((fn(x3) - m(x3)).abs().max()))
    check(worst < 1e-5, "%s: MLP with cumsum in the middle, batch 1..20 and [2, 5, 64], equal "
          "to eager (max abs diff %.2g)" % (how, worst))
    st = gfxgraph.stats(sock)
    loc = st["local"]
    check(loc["compiled_partitions"] > loc0["compiled_partitions"] and
          st["replay_count"] + st["eager_count"] > st0["replay_count"] + st0["eager_count"],
          "daemon partitions built (%d) and replayed by the daemon (%d replays)"
          % (loc["compiled_partitions"] - loc0["compiled_partitions"],
             st["replay_count"] + st["eager_count"] - st0["replay_count"] - st0["eager_count"]))
    check(any("cumsum" in k for k in loc["compile_fallback_ops"]),
          "cumsum is named among the ops left to Inductor: %r" % loc["compile_fallback_ops"])


def test_translate(torch):
    """enable()'s frontend on ops recorded from CPU tensors: the live
    adapter's IR, the passes and the lowering (no daemon needed)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from gfxgraph import frontend
    from gfxgraph.frontend import torchrec
    nn, F = torch.nn, torch.nn.functional

    class Rec(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.records = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.records.append((func, args, kwargs, out))
            return out

    def ops_of(fn, x):
        r = Rec()
        with torch.no_grad(), r:
            y = fn(x)
        g, _objs, weak = torchrec.graph_of(r.records, "cpu")
        r.records = None
        g.outputs = torchrec.live_outputs(g, weak)
        plan = frontend.build(g)
        del y
        return [(n["op"], [plan.tensors[i]["shape"] for i in n["inputs"]],
                 plan.tensors[n["outputs"][0]]["shape"], n.get("attrs")) for n in plan.nodes]

    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.n = nn.ModuleList(nn.LayerNorm(32) for _ in range(3))

        def forward(self, x):
            for n in self.n:
                x = F.gelu(n(x), approximate="tanh")
            return x

    got = ops_of(Chain(), torch.randn(1, 32))
    check([g[0] for g in got] == ["layernorm", "gelu"] * 3 and
          got[0][3] == {"eps": 1e-5} and got[1][3] == {"approximate": "tanh"},
          "decode chain -> layernorm, gelu(tanh) x 3: %r" % [g[0] for g in got])
    mlp = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 32))
    got = ops_of(mlp, torch.randn(8, 32))
    check([(g[0], g[1], g[2]) for g in got] ==
          [("linear", [[8, 32], [128, 32], [128]], [8, 128]), ("gelu", [[8, 128]], [8, 128]),
           ("linear", [[8, 128], [32, 128], [32]], [8, 32])],
          "MLP (t + addmm) -> linear, gelu, linear with [N, K] weights: %r" % got)
    got = ops_of(mlp, torch.randn(2, 4, 32))
    check([g[0] for g in got] == ["linear", "gelu", "linear"] and got[0][1][0] == [8, 32],
          "MLP on [2, 4, 32] (views around addmm) -> rows 8: %r" % [g[:3] for g in got])
    b = torch.randn(32)
    got = ops_of(lambda x: torch.softmax(F.silu(x * 0.5) + x, dim=-1) / 4 + b, torch.randn(8, 32))
    check([g[0] for g in got] == ["scale", "silu", "add", "softmax", "scale", "add"] and
          got[4][3] == {"scale": 0.25} and got[-1][1][1] == [32],
          "scale, silu, add, softmax, div by a scalar as scale, a [D] add: %r" % got)
    got = ops_of(lambda x: torch.relu(x.t() * 2).to(torch.float16), torch.randn(8, 32))
    check([g[0] for g in got] == ["scale", "maximum", "cast"],
          "a transposed operand, relu as maximum, a dtype conversion: %r" % got)
    try:
        ops_of(lambda x: torch.cumsum(x, 0), torch.randn(4, 32))
        check(False, "cumsum is refused")
    except frontend.Unsupported as e:
        check(e.op == "aten.cumsum.default" and "f32[4, 32]" in str(e),
              "cumsum is refused, naming the op and its operands: %s" % e)


def test_enable(torch):
    import gfxgraph
    import torch.cuda.graphs as tg
    orig = (tg.CUDAGraph, tg.graph)
    gfxgraph.enable()
    check(gfxgraph.is_enabled() and torch.cuda.CUDAGraph is not orig[0] and
          issubclass(torch.cuda.CUDAGraph, orig[0]) and tg.graph is not orig[1] and
          gfxgraph.stats.__module__ == "gfxgraph.stats",
          "enable(): torch.cuda.CUDAGraph / torch.cuda.graph are gfxgraph's subclasses")
    gfxgraph.disable()
    check(not gfxgraph.is_enabled() and (tg.CUDAGraph, tg.graph) == orig and
          torch.cuda.CUDAGraph is orig[0], "disable(): PyTorch's classes are back")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: torch does not import here (Debian: python3-torch)")
        return 77
    os.environ["GFXGRAPH_LIB"] = args.lib
    for k in ("GFXGRAPH_SOCKET", "GFXGRAPH_FASTPATH"):
        os.environ.pop(k, None)
    tmp = tempfile.mkdtemp(prefix="ggpyt.")
    d = tp.Daemon(args.daemon, tmp)
    try:
        for name, fn in (("compile", lambda: test_compile(torch, d.sock)),
                         ("translate", lambda: test_translate(torch)),
                         ("enable", lambda: test_enable(torch))):
            try:
                fn()
            except Exception:   # noqa: BLE001
                import traceback
                traceback.print_exc()
                check(False, "%s: ran to the end without an exception" % name)
    finally:
        import gfxgraph
        from gfxgraph import cudagraph
        c = cudagraph._state.get("client")
        if c is not None:
            c.close()
        gfxgraph.disable()
        rc = d.stop()
        check(rc == 0, "gfxgraphd stopped cleanly on SIGTERM (exit %s)" % rc)
        if tp.FAILS or rc != 0:
            d.dump()
        shutil.rmtree(tmp, ignore_errors=True)
    if not hasattr(torch, "compile"):
        skip("torch.compile itself: torch %s predates it" % torch.__version__)
    print("%d passed, %d failed, %d skipped" % (tp.PASSES, tp.FAILS, tp.SKIPS))
    return 1 if tp.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
