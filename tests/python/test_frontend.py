#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The frontend's passes one by one, on small steps written here in the
trace format (no torch, no daemon): each spelling of a fused form is
recognized (RMSNorm plain, with its f32 round trip, Gemma's (1 + w),
x*x for pow; GELU spelled with erf and GPT-2's tanh; x*sigmoid(x) * b),
a near miss is not; strided, broadcast and mixed-dtype operands are
lowered with the copies and casts they need; Unsupported names the op
with its operands' shapes, dtypes and strides.  Every program built here
is also executed by the numpy model of the daemon's ops
(test_frontend_npexec.py) and compared with numpy's own result.  Exit 0
when all passed, 1 otherwise, 77 without numpy.
"""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import test_package as tp  # noqa: E402
from test_package import check  # noqa: E402


def build(s):
    from gfxgraph import frontend
    g = frontend.Graph.from_json(s.doc)
    return g, frontend.build(g)


def run(s, what, tol=1e-5):
    """Build s, run it in the numpy model, compare every expected output."""
    import numpy as np
    import test_frontend_npexec as npx
    from test_frontend_traces import rel_l2
    from gfxgraph.frontend import shmrun
    g, plan = build(s)
    arrays = npx.run_plan(g, plan, s.before)
    worst = 0.0
    for tid in g.outputs:
        t = g.tensors[tid]
        got = shmrun.tensor_values(arrays[t.storage.id], t)
        ref = shmrun.tensor_values(np.frombuffer(s.after[t.storage.id], dtype=np.uint8), t)
        worst = max(worst, rel_l2(got, ref))
    ops = [n["op"] for n in plan.nodes]
    check(worst <= tol, "%s: values (rel-L2 %.3g) with nodes %s" % (what, worst, ops))
    return ops, plan


def rms_case(form):
    import numpy as np
    from test_frontend_traces import Synth
    rng = np.random.default_rng(3)
    R, D, eps = 5, 12, 1e-5
    dt = "f16" if form in ("roundtrip", "gemma") else "f32"
    npdt = np.float16 if dt == "f16" else np.float32
    x0 = rng.standard_normal((R, D)).astype(npdt)
    w0 = (0.5 + rng.random(D)).astype(npdt)
    s = Synth(dt)
    x = s.new([R, D], dt, True, x0)
    w = s.new([D], dt, True, w0)
    a = s.op("aten._to_copy.default", [x], s.new([R, D]), {"dtype": {"dtype": "f32"}}) \
        if dt != "f32" else x
    if form == "xx":
        p = s.op("aten.mul.Tensor", [a, a], s.new([R, D]))
    else:
        p = s.op("aten.pow.Tensor_Scalar", [a, 2], s.new([R, D]))
    v = s.op("aten.mean.dim", [p, [-1], True], s.new([R, 1]))
    ve = s.op("aten.add.Tensor", [v, eps], s.new([R, 1]))
    r = s.op("aten.rsqrt.default", [ve], s.new([R, 1]))
    n = s.op("aten.mul.Tensor", [a, r], s.new([R, D]))
    xd = x0.astype(np.float64)
    nd = xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + eps)
    if form == "gemma":
        wf = s.op("aten._to_copy.default", [w], s.new([D]), {"dtype": {"dtype": "f32"}})
        w1 = s.op("aten.add.Tensor", [wf, 1.0], s.new([D]))
        y32 = s.op("aten.mul.Tensor", [n, w1], s.new([R, D]))
        y = s.op("aten._to_copy.default", [y32], s.new([R, D], dt), {"dtype": {"dtype": dt}})
        s.expect(y, nd * (1 + w0.astype(np.float64)))
    else:
        h = s.op("aten._to_copy.default", [n], s.new([R, D], dt), {"dtype": {"dtype": dt}}) \
            if dt != "f32" else n
        y = s.op("aten.mul.Tensor", [w, h], s.new([R, D], dt))
        s.expect(y, nd * w0)
    return s


def test_rmsnorm():
    for form in ("plain", "xx", "roundtrip", "gemma"):
        s = rms_case(form)
        g, plan = build(s)
        check(plan.report["fused"].get("rmsnorm") == 1,
              "RMSNorm (%s) recognized: %r" % (form, plan.report["fused"]))
        ops, _ = run(s, "RMSNorm (%s)" % form, 1e-5 if form in ("plain", "xx") else 2e-3)
        want = {"plain": ["rmsnorm"], "xx": ["rmsnorm"], "roundtrip": ["rmsnorm"]}.get(form)
        if want:
            check(ops == want, "RMSNorm (%s) is one rmsnorm node: %s" % (form, ops))
        else:
            check("rmsnorm" in ops and "pow" not in ops and "rsqrt" not in ops and
                  "mean" not in ops, "Gemma's RMSNorm: rmsnorm over (1 + w), no pow/mean/"
                  "rsqrt left: %s" % ops)


def unary_case(spelling, c=None):
    import numpy as np
    from test_frontend_traces import Synth
    rng = np.random.default_rng(4)
    R, D = 3, 7
    a0 = (rng.standard_normal((R, D)) * 2).astype(np.float32)
    s = Synth()
    x = s.new([R, D], external=True, value=a0)
    ad = a0.astype(np.float64)
    new = lambda: s.new([R, D])  # noqa: E731
    if spelling == "erf":
        h = s.op("aten.mul.Tensor", [x, 0.5], new())
        q = s.op("aten.div.Tensor", [x, math.sqrt(2.0)], new())
        e = s.op("aten.erf.default", [q], new())
        o = s.op("aten.add.Tensor", [e, 1.0], new())
        y = s.op("aten.mul.Tensor", [h, o], new())
        from math import erf
        ref = 0.5 * ad * (1 + np.vectorize(erf)(ad / math.sqrt(2)))
    elif spelling in ("tanh", "near"):
        k = c or math.sqrt(2.0 / math.pi)
        p3 = s.op("aten.pow.Tensor_Scalar", [x, 3.0], new())
        m = s.op("aten.mul.Tensor", [p3, 0.044715], new())
        i = s.op("aten.add.Tensor", [x, m], new())
        sc = s.op("aten.mul.Tensor", [i, k], new())
        th = s.op("aten.tanh.default", [sc], new())
        o = s.op("aten.add.Tensor", [th, 1.0], new())
        h = s.op("aten.mul.Tensor", [x, 0.5], new())
        y = s.op("aten.mul.Tensor", [o, h], new())
        ref = 0.5 * ad * (1 + np.tanh(k * (ad + 0.044715 * ad ** 3)))
    else:    # x * sigmoid(x) * b
        b0 = rng.standard_normal((R, D)).astype(np.float32)
        b = s.new([R, D], external=True, value=b0)
        sg = s.op("aten.sigmoid.default", [x], new())
        si = s.op("aten.mul.Tensor", [x, sg], new())
        y = s.op("aten.mul.Tensor", [si, b], new())
        ref = ad / (1 + np.exp(-ad)) * b0
    s.expect(y, ref)
    return s


def test_unary():
    ops, _ = run(unary_case("erf"), "GELU spelled with erf")
    check(ops == ["gelu"], "GELU spelled with erf -> one gelu node: %s" % ops)
    ops, plan = run(unary_case("tanh"), "GPT-2's GELU")
    check(ops == ["gelu"] and plan.nodes[0]["attrs"] == {"approximate": "tanh"},
          "GPT-2's GELU -> gelu(tanh): %s" % plan.nodes)
    ops, _ = run(unary_case("near", 0.8), "a near-GELU (0.8 for sqrt(2/pi))")
    check("gelu" not in ops and "tanh" in ops,
          "a near-GELU is not taken for gelu (lowered op by op): %s" % ops)
    ops, _ = run(unary_case("silu"), "x * sigmoid(x) * b")
    check(ops == ["silu_mul"], "x * sigmoid(x) * b -> silu_mul: %s" % ops)


def test_layouts():
    import numpy as np
    from test_frontend_traces import Synth
    rng = np.random.default_rng(5)
    # a transposed operand, an expanded row and a mixed-dtype add
    A0 = rng.standard_normal((6, 4)).astype(np.float32)       # read as its transpose
    r0 = rng.standard_normal(6).astype(np.float16)
    s = Synth()
    A = s.new([6, 4], external=True, value=A0)
    At = s.view(A, [4, 6], [1, 4])
    r = s.new([6], "f16", True, r0)
    re = s.view(r, [4, 6], [0, 1])
    y = s.op("aten.add.Tensor", [At, re], s.new([4, 6]))
    s.expect(y, A0.T.astype(np.float64) + r0.astype(np.float64))
    ops, plan = run(s, "transposed + expanded f16 row -> f32")
    check("cast" in ops and "strided_copy" in ops and ops[-1] == "add",
          "the transposed operand gathered, the f16 row cast, one add: %s" % ops)
    shapes = [plan.tensors[i]["shape"] for i in plan.nodes[-1]["inputs"]]
    check(shapes == [[4, 6], [6]], "the expanded row declared [6] (broadcast): %s" % shapes)
    # an output in transposed memory order: the op runs in that order
    s = Synth()
    B0 = rng.standard_normal((3, 5)).astype(np.float32)
    Bm = s.new([3, 5], external=True, value=B0)
    Bt = s.view(Bm, [5, 3], [1, 5])
    out = s.new([3, 5])
    outt = s.view(out, [5, 3], [1, 5])
    s.op("aten.mul.Tensor", [Bt, Bt], outt)
    s.doc["outputs"].append(outt["t"])
    s.expect(out, B0.astype(np.float64) ** 2)
    s.doc["outputs"].remove(out["t"])
    ops, _ = run(s, "an op writing a transposed output")
    check(ops == ["mul"], "transposed in and out: one mul, no copies: %s" % ops)
    # a comparison of i64 against a broadcast column, then where with scalars
    s = Synth()
    ar = s.op("aten.arange.default", [7], s.new([7], "i64"), {"dtype": {"dtype": "i64"}})
    pos0 = np.array([3, 5], dtype=np.int64)
    pos = s.new([2], "i64", True, pos0)
    pc = s.view(pos, [2, 1], [1, 1])
    le = s.op("aten.le.Tensor", [ar, pc], s.new([2, 7], "bool"))
    m = s.op("aten.where.ScalarOther", [le, 0.0, -1e4], s.new([2, 7]))
    s.expect(m, np.where(np.arange(7)[None, :] <= pos0[:, None], 0.0, -1e4))
    ops, _ = run(s, "a mask from arange <= positions")
    check(ops[:2] == ["arange", "le"] and "where" in ops, "arange, le, where: %s" % ops)


def test_unsupported():
    import numpy as np  # noqa: F401 -- the Synth arrays
    from gfxgraph import frontend
    from test_frontend_traces import Synth
    s = Synth()
    x = s.new([4, 3], external=True, value=np.zeros((4, 3), np.float32))
    xt = s.view(x, [3, 4], [1, 3])
    y = s.op("aten.cumsum.default", [xt, 0], s.new([3, 4]))
    s.doc["outputs"].append(y["t"])
    try:
        build(s)
        check(False, "cumsum refused")
    except frontend.Unsupported as e:
        msg = str(e)
        check(e.op == "aten.cumsum.default" and "f32[3, 4] stride [1, 3]" in msg,
              "Unsupported names the op, shapes, dtypes and strides: %s" % msg)
    s = Synth()
    x = s.new([2, 3, 4, 5, 6], external=True, value=np.zeros((2, 3, 4, 5, 6), np.float32))
    xp = s.view(x, [2, 4, 3, 6, 5], [360, 30, 120, 1, 6])
    y = s.op("aten.clone.default", [xp], s.new([2, 4, 3, 6, 5]))
    s.doc["outputs"].append(y["t"])
    try:
        build(s)
        check(False, "a 5-dim permutation refused")
    except frontend.Unsupported as e:
        check(e.op == "aten.clone.default" and "stride" in str(e),
              "a permutation that does not collapse to 4 dims: %s" % e)


def main():
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIP: numpy does not import here (Debian: python3-numpy)")
        return 77
    import test_frontend_npexec as npx
    npx._setup()
    for fn in (test_rmsnorm, test_unary, test_layouts, test_unsupported):
        try:
            fn()
        except Exception:   # noqa: BLE001
            import traceback
            traceback.print_exc()
            check(False, "%s ran to the end" % fn.__name__)
    print("%d passed, %d failed" % (tp.PASSES, tp.FAILS))
    return 1 if tp.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
