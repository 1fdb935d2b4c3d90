#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch frontend's programs fuse as the same steps written as daemon
programs do (daemon/core/fuse.c), on a cpu-backend gfxgraphd, without torch:

    test_frontend_fusion.py --daemon PATH/gfxgraphd --lib PATH/libgfxgraph-client.so.0

Each workload is written here as the aten ops a CUDA-graph capture records
(bench/ref_workloads.py's models; HF's RMSNorm and SiLU MLP), lowered by the
frontend, defined, replayed once; asserted: the launches per replay the
daemon reports for the program (its cache row's `kernels`, what enable()'s
report says), the node count before fusion, one daemon replay with no
fallback, and the outputs against numpy (float64, every op's result rounded
to the step's dtype as PyTorch stores it).

    decode_chain   32 x (native_layer_norm -> gelu tanh), d 1024, f16, batch 1:
                   64 nodes -> 2 row chains (16 stages each)
    mlp            addmm 64->256 -> gelu -> addmm 256->64, f32, 32 rows:
                   3 nodes -> 2 (linear -> gelu fused)
    hf_block       2 x (RMSNorm spelled out -> gate/up mm -> silu * up ->
                   down mm -> residual add), [1, 1, D], f32: 12 nodes ->
                   7 (rmsnorm, gate_up, linear, add_rmsnorm, gate_up,
                   linear, add)
    hf_block f16, bf16  the same in half precision, where HF rounds the
                   normed x to the dtype before the weight (rmsnorm round_x)
                   and silu(gate) before the multiply (silu_mul round_act):
                   the same 7 launches, and the outputs the same bytes as
                   a daemon started with GFXGRAPH_FUSE=0 gives (12 launches)

Exit 0 when all passed, 1 otherwise, 77 without numpy.
"""
import argparse
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import test_package as tp  # noqa: E402
from test_package import check  # noqa: E402


def rounded(v, dt):
    import numpy as np
    from test_frontend_traces import _bf16
    if dt == "f16":
        return v.astype(np.float16).astype(np.float64)
    if dt == "bf16":
        return _bf16(v)
    return v.astype(np.float32).astype(np.float64)


def gelu_tanh(x):
    import numpy as np
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    import numpy as np
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def decode_chain(layers=32, D=1024, dt="f16"):
    """bench/ref_workloads.py's chain as a capture records it: per layer
    native_layer_norm (its mean/rstd unused) and gelu(approximate='tanh')."""
    import numpy as np
    from test_frontend_traces import Synth
    rng = np.random.default_rng(11)
    s = Synth(dt)
    x0 = rounded(rng.standard_normal((1, D)), dt)
    x = s.new([1, D], dt, True, x0)
    s.doc["inputs"].append(x["t"])
    ref = x0
    for _ in range(layers):
        w0 = rounded(1 + 0.1 * rng.standard_normal(D), dt)
        b0 = rounded(0.1 * rng.standard_normal(D), dt)
        w = s.new([D], dt, True, w0)
        b = s.new([D], dt, True, b0)
        y = s.new([1, D], dt)
        s.op("aten.native_layer_norm.default", [x, [D], w, b, 1e-5],
             [y, s.new([1, 1]), s.new([1, 1])])
        x = s.op("aten.gelu.default", [y], s.new([1, D], dt), {"approximate": "tanh"})
        mu = ref.mean(-1, keepdims=True)
        var = ((ref - mu) ** 2).mean(-1, keepdims=True)
        ref = rounded(gelu_tanh(rounded((ref - mu) / np.sqrt(var + 1e-5) * w0 + b0, dt)), dt)
    s.expect(x, ref)
    return s


def mlp(R=32, D=64, dt="f32"):
    """nn.Sequential(Linear(D, 4D), GELU(), Identity(), Linear(4D, D)) on a
    [R, D] input: addmm over the weights' transposes, gelu."""
    import numpy as np
    from test_frontend_traces import Synth
    rng = np.random.default_rng(12)
    s = Synth(dt)
    H = 4 * D
    x0 = rng.standard_normal((R, D))
    W10, b10 = 0.2 * rng.standard_normal((H, D)), 0.1 * rng.standard_normal(H)
    W20, b20 = 0.1 * rng.standard_normal((D, H)), 0.1 * rng.standard_normal(D)
    x = s.new([R, D], dt, True, x0)
    W1, b1 = s.new([H, D], dt, True, W10), s.new([H], dt, True, b10)
    W2, b2 = s.new([D, H], dt, True, W20), s.new([D], dt, True, b20)
    s.doc["inputs"].append(x["t"])
    t1 = s.op("aten.t.default", [W1], s.view(W1, [D, H], [1, D]))
    h = s.op("aten.addmm.default", [b1, x, t1], s.new([R, H], dt))
    g = s.op("aten.gelu.default", [h], s.new([R, H], dt))
    t2 = s.op("aten.t.default", [W2], s.view(W2, [H, D], [1, H]))
    y = s.op("aten.addmm.default", [b2, g, t2], s.new([R, D], dt))
    s.expect(y, gelu_erf(x0 @ W10.T + b10) @ W20.T + b20)
    return s


def _linear3(s, x, W, L, K, N, dt):
    """nn.Linear without bias on [1, L, K]: view to [L, K], mm with W.t(),
    _unsafe_view back to [1, L, N]."""
    wt = s.op("aten.t.default", [W], s.view(W, [K, N], [1, K]))
    x2 = s.op("aten.view.default", [x, [L, K]], s.view(x, [L, K]))
    y2 = s.op("aten.mm.default", [x2, wt], s.new([L, N], dt))
    return s.op("aten._unsafe_view.default", [y2, [1, L, N]], s.view(y2, [1, L, N]))


def hf_block(layers=2, D=64, I=160, dt="f32"):
    """Layers of LlamaRMSNorm (to f32, pow, mean, add eps, rsqrt, mul, back to
    the dtype, times w) and LlamaMLP (down(silu(gate(x)) * up(x))) with the
    residual add, on a [1, 1, D] hidden state."""
    import numpy as np
    from test_frontend_traces import Synth
    rng = np.random.default_rng(13)
    s = Synth(dt)
    L, eps = 1, 1e-6
    h0 = rounded(rng.standard_normal((1, L, D)), dt)
    h = s.new([1, L, D], dt, True, h0)
    s.doc["inputs"].append(h["t"])
    ref = h0
    for _ in range(layers):
        w0 = rounded(1 + 0.3 * rng.standard_normal(D), dt)
        Wg0, Wu0 = (rounded(0.2 * rng.standard_normal((I, D)), dt) for _ in range(2))
        Wd0 = rounded(0.1 * rng.standard_normal((D, I)), dt)
        w = s.new([D], dt, True, w0)
        Wg, Wu = s.new([I, D], dt, True, Wg0), s.new([I, D], dt, True, Wu0)
        Wd = s.new([D, I], dt, True, Wd0)
        xf = s.op("aten._to_copy.default", [h], s.new([1, L, D]), {"dtype": "f32"}) \
            if dt != "f32" else h
        p = s.op("aten.pow.Tensor_Scalar", [xf, 2], s.new([1, L, D]))
        v = s.op("aten.mean.dim", [p, [-1], True], s.new([1, L, 1]))
        ve = s.op("aten.add.Tensor", [v, eps], s.new([1, L, 1]))
        r = s.op("aten.rsqrt.default", [ve], s.new([1, L, 1]))
        n = s.op("aten.mul.Tensor", [xf, r], s.new([1, L, D]))
        nb = s.op("aten._to_copy.default", [n], s.new([1, L, D], dt), {"dtype": dt}) \
            if dt != "f32" else n
        hn = s.op("aten.mul.Tensor", [w, nb], s.new([1, L, D], dt))
        g = _linear3(s, hn, Wg, L, D, I, dt)
        u = _linear3(s, hn, Wu, L, D, I, dt)
        a = s.op("aten.silu.default", [g], s.new([1, L, I], dt))
        m = s.op("aten.mul.Tensor", [a, u], s.new([1, L, I], dt))
        d = _linear3(s, m, Wd, L, I, D, dt)
        h = s.op("aten.add.Tensor", [h, d], s.new([1, L, D], dt))
        nr = rounded(ref / np.sqrt((ref * ref).mean(-1, keepdims=True) + eps), dt)
        hr = rounded(w0 * nr, dt)
        gr, ur = rounded(hr @ Wg0.T, dt), rounded(hr @ Wu0.T, dt)
        mr = rounded(rounded(gr / (1 + np.exp(-gr)), dt) * ur, dt)
        ref = rounded(ref + rounded(mr @ Wd0.T, dt), dt)
    s.expect(h, ref)
    return s


# name, make, nodes before fusion, launches per replay, rel-L2 tolerance,
# compared byte for byte with an unfused daemon
WORKLOADS = [
    ("decode_chain", decode_chain, 64, 2, 1e-2, False),
    ("mlp", mlp, 3, 2, 1e-5, False),
    ("hf_block", hf_block, 12, 7, 1e-5, True),
    ("hf_block f16", lambda: hf_block(dt="f16"), 12, 7, 1e-2, True),
    ("hf_block bf16", lambda: hf_block(dt="bf16"), 12, 7, 2e-2, True),
]


def kernels_of(sock, prog):
    import gfxgraph
    rows = [r for r in gfxgraph.stats(sock).get("cache") or [] if r.get("program") == prog.id]
    return [(r.get("nodes"), r.get("kernels")) for r in rows]


def run(client, sock, name, s, nodes, kernels, tol):
    """Define, replay once, check; the outputs' storage bytes by tensor id."""
    import numpy as np
    import gfxgraph
    from gfxgraph import frontend
    from gfxgraph.frontend import shmrun
    from test_frontend_traces import rel_l2
    g = frontend.Graph.from_json(s.doc)
    plan = frontend.build(g)
    ops = [n["op"] for n in plan.nodes]
    check(len(plan.nodes) == nodes, "%s: %d nodes before fusion (%d: %s)"
          % (name, nodes, len(plan.nodes), " ".join(ops[:16])))
    arrays = shmrun.storage_arrays(g, plan, s.before)
    prog, _ = shmrun.define(client, g, plan, arrays, name)
    st0 = gfxgraph.stats(sock)
    r = prog.replay(1)
    st1 = gfxgraph.stats(sock)
    check(st1["replay_count"] == st0["replay_count"] + 1 and r["path"] == "graph" and
          not r["fallback"], "%s: one daemon graph replay, no fallback (%r)" % (name, r))
    ks = kernels_of(sock, prog)
    check(ks == [(nodes, kernels)], "%s: %d nodes run as %d launches per replay (cache rows "
          "(nodes, kernels): %s)" % (name, nodes, kernels, ks))
    out = {}
    for tid in g.outputs:
        t = g.tensors[tid]
        out[tid] = arrays[t.storage.id].tobytes()
        got = shmrun.tensor_values(arrays[t.storage.id], t)
        ref = shmrun.tensor_values(np.frombuffer(s.after[t.storage.id], dtype=np.uint8), t)
        e = rel_l2(got, ref)
        check(e <= tol and np.isfinite(got).all(), "%s: output %s rel-L2 %.3g <= %g"
              % (name, t.describe(), e, tol))
    prog.release()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIP: numpy does not import here (Debian: python3-numpy)")
        return 77
    os.environ["GFXGRAPH_LIB"] = args.lib
    for k in ("GFXGRAPH_SOCKET", "GFXGRAPH_FASTPATH"):
        os.environ.pop(k, None)
    import gfxgraph
    tmp, tmp_off = tempfile.mkdtemp(prefix="ggff."), tempfile.mkdtemp(prefix="ggff0.")
    d = tp.Daemon(args.daemon, tmp)
    os.environ["GFXGRAPH_FUSE"] = "0"
    try:
        d_off = tp.Daemon(args.daemon, tmp_off)
    finally:
        del os.environ["GFXGRAPH_FUSE"]
    try:
        with gfxgraph.Client(d.sock) as c, gfxgraph.Client(d_off.sock) as c_off:
            for name, make, nodes, kernels, tol, pair in WORKLOADS:
                got = run(c, d.sock, name, make(), nodes, kernels, tol)
                if not pair:
                    continue
                # the same program on the unfused daemon: one launch a node
                plain = run(c_off, d_off.sock, name + " (GFXGRAPH_FUSE=0)", make(), nodes,
                            nodes, tol)
                check(got == plain, "%s: outputs the same bytes fused (%d launches) and "
                      "unfused (%d)" % (name, kernels, nodes))
    finally:
        rc, rc_off = d.stop(), d_off.stop()
        if tp.FAILS:
            d.dump()
            d_off.dump()
    check(rc == 0 and rc_off == 0, "daemons stopped cleanly (%r, %r)" % (rc, rc_off))
    print("%d passed, %d failed, %d skipped" % (tp.PASSES, tp.FAILS, tp.SKIPS))
    return 1 if tp.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
