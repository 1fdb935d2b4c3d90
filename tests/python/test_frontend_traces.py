#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch frontend (python/gfxgraph/frontend) on recorded decode steps,
against a cpu-backend gfxgraphd, without torch.

    test_frontend_traces.py --daemon PATH/gfxgraphd --lib PATH/libgfxgraph-client.so.0

For every trace in tests/traces/*.json (+ .npz: the external storages'
bytes before one replay, and after it for the storages the step writes and
those holding its outputs), and for synthetic steps built here with their
expected values computed in numpy (float64): build the IR, run the passes,
lower, put every storage the program uses in shared memory (external ones
filled from the recorded bytes), define the program on the daemon, replay
once, and compare each output tensor and each state storage with the
recorded result (rel-L2 <= 1e-5 in f32, 1e-2 in f16 and bf16: the fused
ops round where PyTorch's spelling stores an intermediate, through their
round attrs, so what remains is the order of f32 sums).  The path is
asserted too: the daemon's replay count rises by exactly one and the replay
reports no fallback.  A step whose program needs an op the daemon's hello
does not list is reported as skipped with the op named.  Exit 0 when all passed, 1 otherwise, 77 when numpy
or python cannot run it here.
"""
import argparse
import glob
import json
import math
import os
import sys
import tempfile

import test_package as tp
from test_package import check

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = os.path.join(HERE, "..", "traces")
DAEMON_OPS = set()     # the ops the daemon's hello lists
MISSING = set()
TOL = {"f32": 1e-5, "f16": 1e-2, "bf16": 1e-2}


# ---- synthetic traces ---------------------------------------------------------

class Synth:
    """A trace written by hand, in the recorder's format (docs/python.md)."""

    NP = {"f32": "float32", "f16": "float16", "i64": "int64", "i32": "int32", "bool": "bool"}
    SIZE = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "bool": 1}

    def __init__(self, dtype="f32"):
        self.doc = {"version": 1, "family": "synthetic", "dtype": dtype, "batch": 1,
                    "storages": [], "tensors": [], "ops": [], "inputs": [], "outputs": [],
                    "state": []}
        self.before, self.after = {}, {}

    def storage(self, nbytes, external):
        sid = len(self.doc["storages"])
        self.doc["storages"].append({"id": sid, "nbytes": int(nbytes), "external": external})
        return sid

    def tensor(self, sid, shape, dtype="f32", offset=0, stride=None):
        if stride is None:
            stride, acc = [], 1
            for d in reversed(shape):
                stride.insert(0, acc)
                acc *= d
        tid = len(self.doc["tensors"])
        self.doc["tensors"].append({"id": tid, "storage": sid, "offset": offset,
                                    "shape": list(shape), "stride": list(stride),
                                    "dtype": dtype})
        return {"t": tid}

    def new(self, shape, dtype="f32", external=False, value=None):
        """A fresh contiguous tensor in its own storage (value: its bytes
        before the step, for an external one)."""
        import numpy as np
        n = 1
        for d in shape:
            n *= d
        sid = self.storage(max(1, n * self.SIZE[dtype]), external)
        if value is not None:
            self.before[sid] = _bytes(value, dtype)
        return self.tensor(sid, shape, dtype)

    def view(self, t, shape, stride=None, offset=None):
        src = self.doc["tensors"][t["t"]]
        return self.tensor(src["storage"], shape, src["dtype"],
                           src["offset"] if offset is None else offset, stride)

    def op(self, name, args, out, kwargs=None):
        self.doc["ops"].append({"op": name, "args": args, "kwargs": kwargs or {}, "out": out})
        return out

    def expect(self, t, value):
        """t (an output) must hold value after the step."""
        import numpy as np
        info = self.doc["tensors"][t["t"]]
        st = self.doc["storages"][info["storage"]]
        a = np.zeros(st["nbytes"], dtype=np.uint8)
        if info["storage"] in self.after:
            a[:] = np.frombuffer(self.after[info["storage"]], dtype=np.uint8)
        v = _bytes(value, info["dtype"])
        off = info["offset"] * self.SIZE[info["dtype"]]
        a[off:off + len(v)] = np.frombuffer(v, dtype=np.uint8)
        self.after[info["storage"]] = a.tobytes()
        self.doc["outputs"].append(t["t"])


def _bf16(v):
    """float64 values rounded to bf16 (nearest even), as float64."""
    import numpy as np
    f = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (((f + 0x7FFF + ((f >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    return r.view(np.float32).astype(np.float64)


def _bytes(value, dtype):
    import numpy as np
    if dtype == "bf16":
        b = np.ascontiguousarray(_bf16(value), dtype=np.float32).view(np.uint32) >> 16
        return b.astype(np.uint16).tobytes()
    return np.ascontiguousarray(value, dtype=Synth.NP[dtype]).tobytes()


def synth_bf16_rounding():
    """HF's bf16 RMSNorm (to f32, pow, mean, rsqrt, mul, back to bf16,
    then the weight multiply in bf16) and its MLP gate silu(g) * u, with
    weights far from 1 so that where the rounding happens shows.  Expected:
    numpy float64 rounded to bf16 after every op, as PyTorch's chain
    stores each result; the program must equal it (round_x, round_act)."""
    import numpy as np
    rng = np.random.default_rng(3)
    R, D, eps = 3, 40, 1e-5
    x0 = _bf16(rng.standard_normal((R, D)) * 3)
    w0 = _bf16(1 + 0.8 * rng.standard_normal(D))
    g0 = _bf16(rng.standard_normal((R, D)) * 2)
    s = Synth("bf16")
    x = s.new([R, D], "bf16", external=True, value=x0)
    w = s.new([D], "bf16", external=True, value=w0)
    gt = s.new([R, D], "bf16", external=True, value=g0)
    xf = s.op("aten._to_copy.default", [x], s.new([R, D]), {"dtype": "f32"})
    p = s.op("aten.pow.Tensor_Scalar", [xf, 2], s.new([R, D]))
    v = s.op("aten.mean.dim", [p, [-1], True], s.new([R, 1]))
    ve = s.op("aten.add.Tensor", [v, eps], s.new([R, 1]))
    r = s.op("aten.rsqrt.default", [ve], s.new([R, 1]))
    n = s.op("aten.mul.Tensor", [xf, r], s.new([R, D]))
    nb = s.op("aten._to_copy.default", [n], s.new([R, D], "bf16"), {"dtype": "bf16"})
    h = s.op("aten.mul.Tensor", [w, nb], s.new([R, D], "bf16"))
    si = s.op("aten.silu.default", [gt], s.new([R, D], "bf16"))
    y = s.op("aten.mul.Tensor", [si, h], s.new([R, D], "bf16"))
    f32 = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731
    nd = f32(x0 / np.sqrt(f32((x0 * x0).mean(-1, keepdims=True)) + eps))
    hd = _bf16(w0 * _bf16(nd))
    s.expect(h, hd)
    s.expect(y, _bf16(_bf16(g0 / (1 + np.exp(-g0))) * hd))
    s.doc["tol"] = 1e-6   # the expected values are the program's exactly
    return "synthetic_bf16_rounding", s, None


def synth_rmsnorm_linear():
    """HF RMSNorm (f32, no round trip) then a linear through t + mm, as
    LlamaRMSNorm and nn.Linear record them; expected in float64."""
    import numpy as np
    rng = np.random.default_rng(1)
    B, L, D, N, eps = 1, 3, 8, 6, 1e-6
    x0 = rng.standard_normal((B, L, D)).astype(np.float32)
    w0 = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    W0 = (0.3 * rng.standard_normal((N, D))).astype(np.float32)
    s = Synth()
    x = s.new([B, L, D], external=True, value=x0)
    w = s.new([D], external=True, value=w0)
    W = s.new([N, D], external=True, value=W0)
    p = s.op("aten.pow.Tensor_Scalar", [x, 2], s.new([B, L, D]))
    v = s.op("aten.mean.dim", [p, [-1], True], s.new([B, L, 1]))
    ve = s.op("aten.add.Tensor", [v, eps], s.new([B, L, 1]))
    r = s.op("aten.rsqrt.default", [ve], s.new([B, L, 1]))
    n = s.op("aten.mul.Tensor", [x, r], s.new([B, L, D]))
    h = s.op("aten.mul.Tensor", [w, n], s.new([B, L, D]))
    wt = s.op("aten.t.default", [W], s.view(W, [D, N], [1, D]))
    h2 = s.op("aten.view.default", [h, [B * L, D]], s.view(h, [B * L, D]))
    y2 = s.op("aten.mm.default", [h2, wt], s.new([B * L, N]))
    y = s.op("aten._unsafe_view.default", [y2, [B, L, N]], s.view(y2, [B, L, N]))
    s.doc["inputs"].append(x["t"])
    xd = x0.astype(np.float64)
    hd = xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + eps) * w0
    s.expect(y, hd @ W0.astype(np.float64).T)
    return "synthetic_rmsnorm_linear", s, ["rmsnorm", "linear"]


def synth_gelu_silu_mul():
    """GPT-2's spelled-out GELU and silu(a) * b over views (f32)."""
    import numpy as np
    rng = np.random.default_rng(2)
    R, D = 4, 10
    a0 = rng.standard_normal((R, D)).astype(np.float32) * 2
    b0 = rng.standard_normal((R, D)).astype(np.float32)
    s = Synth()
    a = s.new([R, D], external=True, value=a0)
    b = s.new([R, D], external=True, value=b0)
    half = s.op("aten.mul.Tensor", [a, 0.5], s.new([R, D]))
    p3 = s.op("aten.pow.Tensor_Scalar", [a, 3.0], s.new([R, D]))
    k = s.op("aten.mul.Tensor", [p3, 0.044715], s.new([R, D]))
    inner = s.op("aten.add.Tensor", [a, k], s.new([R, D]))
    sc = s.op("aten.mul.Tensor", [inner, math.sqrt(2.0 / math.pi)], s.new([R, D]))
    th = s.op("aten.tanh.default", [sc], s.new([R, D]))
    one = s.op("aten.add.Tensor", [th, 1.0], s.new([R, D]))
    g = s.op("aten.mul.Tensor", [half, one], s.new([R, D]))
    si = s.op("aten.silu.default", [g], s.new([R, D]))
    y = s.op("aten.mul.Tensor", [si, b], s.new([R, D]))
    ad = a0.astype(np.float64)
    gd = 0.5 * ad * (1 + np.tanh(math.sqrt(2 / math.pi) * (ad + 0.044715 * ad ** 3)))
    s.expect(y, gd / (1 + np.exp(-gd)) * b0)
    return "synthetic_gelu_silu_mul", s, ["gelu", "silu_mul"]


SYNTH = [synth_rmsnorm_linear, synth_gelu_silu_mul, synth_bf16_rounding]


# ---- graph runners: one step captured at two batch sizes ----------------------------

RUNNER = dict(BMAX=8, V=11, D=6, N=5, SLOTS=20)


def runner_values():
    """The external memory of the synthetic runner before a step: the static
    buffers at their largest size (ids, slots, E), the weights, the cache."""
    import numpy as np
    R = RUNNER
    rng = np.random.default_rng(7)
    return {
        "ids": rng.integers(0, R["V"], R["BMAX"]).astype(np.int64),
        "table": rng.standard_normal((R["V"], R["D"])).astype(np.float32),
        "w": (1 + 0.2 * rng.standard_normal(R["D"])).astype(np.float32),
        "W": (0.4 * rng.standard_normal((R["N"], R["D"]))).astype(np.float32),
        "E": rng.standard_normal((R["BMAX"], R["N"], 2)).astype(np.float32),
        "cache": rng.standard_normal((R["SLOTS"], R["N"])).astype(np.float32),
        "slots": rng.permutation(R["SLOTS"])[:R["BMAX"]].astype(np.int64),
    }


def synth_runner_step(bs):
    """The step a graph runner captures at batch bs, over static buffers
    of the largest batch sliced [:bs]: h = embedding(ids[:bs]) * w;
    y = h @ W.T; cache.index_copy_(0, slots[:bs], y); z = h + h (a
    contiguous op the lowering collapses to [bs * D]); e = E[:bs]
    permuted to [bs, 2, N] and copied (a strided gather).  The external
    storages carry the same ids at every batch (the same memory)."""
    R = RUNNER
    v = runner_values()
    s = Synth()
    ext = {}
    for key, dt, shape in (("ids", "i64", [R["BMAX"]]), ("table", "f32", [R["V"], R["D"]]),
                           ("w", "f32", [R["D"]]), ("W", "f32", [R["N"], R["D"]]),
                           ("E", "f32", [R["BMAX"], R["N"], 2]),
                           ("cache", "f32", [R["SLOTS"], R["N"]]),
                           ("slots", "i64", [R["BMAX"]])):
        ext[key] = s.new(shape, dt, external=True, value=v[key])
    ids = s.view(ext["ids"], [bs])
    slots = s.view(ext["slots"], [bs])
    emb = s.op("aten.embedding.default", [ext["table"], ids], s.new([bs, R["D"]]))
    h = s.op("aten.mul.Tensor", [emb, ext["w"]], s.new([bs, R["D"]]))
    wt = s.op("aten.t.default", [ext["W"]], s.view(ext["W"], [R["D"], R["N"]], [1, R["D"]]))
    y = s.op("aten.mm.default", [h, wt], s.new([bs, R["N"]]))
    s.op("aten.index_copy_.default", [ext["cache"], 0, slots, y], ext["cache"])
    z = s.op("aten.add.Tensor", [h, h], s.new([bs, R["D"]]))
    ep = s.view(ext["E"], [bs, 2, R["N"]], [2 * R["N"], 1, 2])
    e = s.op("aten.clone.default", [ep], s.new([bs, 2, R["N"]]))
    s.doc["inputs"] += [ids["t"], slots["t"]]
    s.doc["outputs"] += [y["t"], z["t"], e["t"]]
    s.doc["state"].append(ext["cache"]["t"])
    return s, {"y": y, "z": z, "e": e, "cache": ext["cache"]}


def runner_expected(bs):
    import numpy as np
    v = runner_values()
    h = v["table"].astype(np.float64)[v["ids"][:bs]] * v["w"]
    y = h @ v["W"].astype(np.float64).T
    cache = v["cache"].astype(np.float64).copy()
    cache[v["slots"][:bs]] = y
    return {"y": y, "z": h + h, "e": v["E"][:bs].transpose(0, 2, 1), "cache": cache}


def test_runner_merge(client, sock):
    """Captures at batch 4 and 2 (largest first, as a runner captures) merge
    into one program with buckets [2, 4]; a replay at each batch runs its
    own bucket as a daemon graph and leaves that batch's values."""
    import numpy as np
    import gfxgraph
    from gfxgraph import frontend
    from gfxgraph.frontend import runner, shmrun
    members, outs = [], {}
    for bs in (4, 2):
        s, o = synth_runner_step(bs)
        g = frontend.Graph.from_json(s.doc)
        plan = frontend.build(g)
        members.append(runner.Member(plan, g, lambda sid, g=g: (
            ("ext", sid) if g.storages[sid].external else ("pool", id(g), sid))))
        outs[bs] = (g, o, s.before)
    m, why = runner.merge_or_none(members)
    if not check(m is not None, "runner: captures at batch 4 and 2 merge (%s)" % why):
        return
    check(m.buckets == [2, 4] and [x.batch for x in members] == [4, 2],
          "runner: one program with buckets %s, the captures' batches %s"
          % (m.buckets, [x.batch for x in members]))
    batch_dims = sorted(n for n, t in m.tensors.items() if t["shape"][0] == "batch")
    check(len(batch_dims) >= 5 and any(len(m.tensors[n]["shape"]) == 2 and
                                       m.tensors[n]["shape"][1] == RUNNER["D"]
                                       for n in batch_dims),
          "runner: %d tensors take the batch dim, a collapsed [bs * D] one as [batch, D] (%s)"
          % (len(batch_dims), {n: m.tensors[n]["shape"] for n in batch_dims}))
    g4, o4, before = outs[4]
    for bs in (4, 2):
        arrays = shmrun.storage_arrays(g4, m, before)
        bufs = {sid: client.register(a) for sid, a in arrays.items()}
        try:
            prog = client.define(m.spec("runner_%d" % bs, bufs))
        except gfxgraph.Error as e:
            check(False, "runner: program.define of the merged program (%s)" % e)
            return
        st0 = gfxgraph.stats(sock)
        r = prog.replay(bs)
        st1 = gfxgraph.stats(sock)
        check(r["bucket"] == bs and r["path"] == "graph" and not r["fallback"] and
              st1["replay_count"] == st0["replay_count"] + 1,
              "runner: a replay at batch %d ran bucket %d as a daemon graph (%r, replay_count "
              "%d -> %d)" % (bs, bs, r, st0["replay_count"], st1["replay_count"]))
        exp = runner_expected(bs)
        for key in ("y", "z", "e"):
            t = g4.tensors[o4[key]["t"]]
            rows = frontend.Tensor(None, t.storage, t.offset, (bs,) + t.shape[1:], t.stride,
                                   t.dtype)
            got = shmrun.tensor_values(arrays[t.storage.id], rows)
            e = rel_l2(got, exp[key])
            check(e <= 1e-6, "runner: batch %d: %s %s rel-L2 %.3g" % (bs, key, list(got.shape), e))
        t = g4.tensors[o4["cache"]["t"]]
        got = shmrun.tensor_values(arrays[t.storage.id], t)
        e = rel_l2(got, exp["cache"])
        check(e <= 1e-6, "runner: batch %d: the cache after the step (its %d slots written, "
              "the others kept) rel-L2 %.3g" % (bs, bs, e))
        prog.release()
    # a capture that is another step does not merge
    s, _ = synth_runner_step(2)
    s.doc["ops"][1]["op"] = "aten.sub.Tensor"
    g = frontend.Graph.from_json(s.doc)
    other = runner.Member(frontend.build(g), g, lambda sid: ("ext", sid))
    m2, why = runner.merge_or_none([members[0], other])
    check(m2 is None and "differs" in why, "runner: another step does not merge (%s)" % why)


# A graph runner's decode step as tests/gpu/python/test_torch_graph_runner.py
# writes it over a HF Llama's modules: static input_ids, positions, seq_lens
# and cache slots of the largest batch sliced [:bs]; per layer the cache
# write index_copy_(0, slots, k) into a pool of slots (request r's position
# p in slot r * MAX_LEN + p), the per-request cache rows gathered with each
# kv head repeated (expand + reshape: a strided copy whose collapsed dim 0
# holds bs * MAX_LEN * HKV rows), SDPA with the seq_lens mask.
RDEC = dict(MAX_BS=8, MAX_LEN=8, V=20, D=16, HQ=4, HKV=2, DH=4, I=24, L=2, EPS=1e-5)

def _rm(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.insert(0, acc); acc *= d
    return st

def rdec_values(seed=3):
    """The external memory before the step: weights, the KV caches (a slot
    a request and position), the static buffers at the largest batch."""
    import numpy as np
    c = RDEC; rng = np.random.default_rng(seed)
    slots = c["MAX_BS"] * c["MAX_LEN"] + 1
    v = {"table": rng.standard_normal((c["V"], c["D"])), "inv": 1.0 / (10000 ** (np.arange(0, c["DH"], 2) / c["DH"])),
         "fnorm": 1 + 0.2 * rng.standard_normal(c["D"]), "lm": 0.3 * rng.standard_normal((c["V"], c["D"])),
         "keys": np.arange(c["MAX_LEN"])}
    for l in range(c["L"]):
        v["n1_%d" % l] = 1 + 0.2 * rng.standard_normal(c["D"])
        v["n2_%d" % l] = 1 + 0.2 * rng.standard_normal(c["D"])
        v["q_%d" % l] = 0.3 * rng.standard_normal((c["HQ"] * c["DH"], c["D"]))
        v["k_%d" % l] = 0.3 * rng.standard_normal((c["HKV"] * c["DH"], c["D"]))
        v["v_%d" % l] = 0.3 * rng.standard_normal((c["HKV"] * c["DH"], c["D"]))
        v["o_%d" % l] = 0.3 * rng.standard_normal((c["D"], c["HQ"] * c["DH"]))
        v["g_%d" % l] = 0.3 * rng.standard_normal((c["I"], c["D"]))
        v["u_%d" % l] = 0.3 * rng.standard_normal((c["I"], c["D"]))
        v["d_%d" % l] = 0.3 * rng.standard_normal((c["D"], c["I"]))
        v["kc_%d" % l] = rng.standard_normal((slots, c["HKV"], c["DH"]))
        v["vc_%d" % l] = rng.standard_normal((slots, c["HKV"], c["DH"]))
    # static buffers (largest batch): requests r at position pos[r], slot r*MAX_LEN+pos
    B = c["MAX_BS"]
    v["ids"] = rng.integers(0, c["V"], B)
    v["pos"] = rng.integers(0, c["MAX_LEN"], B)
    v["lens"] = v["pos"] + 1
    v["slots"] = np.arange(B) * c["MAX_LEN"] + v["pos"]
    for k in list(v):
        if v[k].dtype.kind == "f":
            v[k] = v[k].astype(np.float32)
        else:
            v[k] = v[k].astype(np.int64)
    return v

def rdec_step(bs, v):
    """The runner's decode step captured at batch bs (the aten ops
    PyTorch records for Runner.forward of the GPU test, in f32 on CUDA):
    (Synth, its logits tensor, the external tensors)."""
    c = RDEC; s = Synth()
    D, HQ, HKV, DH, I, S, B = c["D"], c["HQ"], c["HKV"], c["DH"], c["I"], c["MAX_LEN"], c["MAX_BS"]
    ext = {}
    for k, a in v.items():
        ext[k] = s.new(list(a.shape), "i64" if a.dtype.kind == "i" else "f32", external=True, value=a)
    def info(t): return s.doc["tensors"][t["t"]]
    def vw(name, args, t, shape, stride=None, off=None):
        o = s.view(t, shape, stride if stride is not None else _rm(shape), off)
        s.op(name, args, o); return o
    def new(shape, dt="f32"): return s.new(shape, dt)
    def linear(x, wkey, n):   # x [bs,1,K]
        K = info(x)["shape"][-1]
        W = ext[wkey]
        wt = vw("aten.t.default", [W], W, [K, n], [1, K])
        x2 = vw("aten.view.default", [x, [bs, K]], x, [bs, K])
        y = s.op("aten.mm.default", [x2, wt], new([bs, n]))
        return vw("aten._unsafe_view.default", [y, [bs, 1, n]], y, [bs, 1, n])
    def rms(x, wkey):
        p = s.op("aten.pow.Tensor_Scalar", [x, 2], new([bs, 1, D]))
        m = s.op("aten.mean.dim", [p, [-1], True], new([bs, 1, 1]))
        a = s.op("aten.add.Tensor", [m, c["EPS"]], new([bs, 1, 1]))
        r = s.op("aten.rsqrt.default", [a], new([bs, 1, 1]))
        y = s.op("aten.mul.Tensor", [x, r], new([bs, 1, D]))
        return s.op("aten.mul.Tensor", [ext[wkey], y], new([bs, 1, D]))
    ids = vw("aten.slice.Tensor", [ext["ids"], 0, 0, bs], ext["ids"], [bs])
    pos = vw("aten.slice.Tensor", [ext["pos"], 0, 0, bs], ext["pos"], [bs])
    lens = vw("aten.slice.Tensor", [ext["lens"], 0, 0, bs], ext["lens"], [bs])
    slots = vw("aten.slice.Tensor", [ext["slots"], 0, 0, bs], ext["slots"], [bs])
    s.doc["inputs"] += [ids["t"], pos["t"], lens["t"], slots["t"]]
    e = s.op("aten.embedding.default", [ext["table"], ids], new([bs, D]))
    h = vw("aten.unsqueeze.default", [e, 1], e, [bs, 1, D])
    # rotary_emb(h, pos[:, None])
    pid = vw("aten.unsqueeze.default", [pos, 1], pos, [bs, 1], [1, 1])
    half = DH // 2
    i1 = vw("aten.unsqueeze.default", [ext["inv"], 0], ext["inv"], [1, half])
    i2 = vw("aten.unsqueeze.default", [i1, 2], ext["inv"], [1, half, 1], [half, 1, 1])
    i3 = vw("aten.expand.default", [i2, [bs, -1, 1]], ext["inv"], [bs, half, 1], [0, 1, 1])
    p3 = vw("aten.unsqueeze.default", [pid, 1], pos, [bs, 1, 1], [1, 1, 1])
    pf = s.op("aten._to_copy.default", [p3], new([bs, 1, 1]), {"dtype": {"dtype": "f32"}})
    fr = s.op("aten.bmm.default", [i3, pf], new([bs, half, 1]))
    ft = vw("aten.transpose.int", [fr, 1, 2], fr, [bs, 1, half], [half, 1, 1])
    emb = s.op("aten.cat.default", [[ft, ft], -1], new([bs, 1, DH]))
    co = s.op("aten.cos.default", [emb], new([bs, 1, DH]))
    cos = s.op("aten.mul.Tensor", [co, 1.0], new([bs, 1, DH]))
    si = s.op("aten.sin.default", [emb], new([bs, 1, DH]))
    sin = s.op("aten.mul.Tensor", [si, 1.0], new([bs, 1, DH]))
    # mask = (keys[None, :] < lens[:, None])[:, None, None, :]
    kk = vw("aten.unsqueeze.default", [ext["keys"], 0], ext["keys"], [1, S])
    ll = vw("aten.unsqueeze.default", [lens, 1], lens, [bs, 1], [1, 1])
    lt = s.op("aten.lt.Tensor", [kk, ll], new([bs, S], "bool"))
    m1 = vw("aten.unsqueeze.default", [lt, 1], lt, [bs, 1, S], [S, S, 1])
    mask = vw("aten.unsqueeze.default", [m1, 2], lt, [bs, 1, 1, S], [S, S, S, 1])
    cos4 = vw("aten.unsqueeze.default", [cos, 1], cos, [bs, 1, 1, DH], [DH, DH, DH, 1])
    sin4 = vw("aten.unsqueeze.default", [sin, 1], sin, [bs, 1, 1, DH], [DH, DH, DH, 1])
    def rope(x, H):
        a = s.op("aten.mul.Tensor", [x, cos4], new([bs, H, 1, DH]))
        xi = info(x); st = xi["stride"]; off = xi["offset"]
        x1 = vw("aten.slice.Tensor", [x, 3, 0, half], x, [bs, H, 1, half], st, off)
        x2 = vw("aten.slice.Tensor", [x, 3, half, 2**63 - 1], x, [bs, H, 1, half], st, off + half)
        n = s.op("aten.neg.default", [x2], new([bs, H, 1, half]))
        rh = s.op("aten.cat.default", [[n, x1], -1], new([bs, H, 1, DH]))
        b_ = s.op("aten.mul.Tensor", [rh, sin4], new([bs, H, 1, DH]))
        return s.op("aten.add.Tensor", [a, b_], new([bs, H, 1, DH]))
    def heads(y, H):
        v4 = vw("aten.view.default", [y, [bs, 1, H, DH]], y, [bs, 1, H, DH])
        return vw("aten.transpose.int", [v4, 1, 2], y, [bs, H, 1, DH], [H * DH, DH, H * DH, 1])
    def per_request(cache):
        rep = HQ // HKV
        c0 = vw("aten.slice.Tensor", [cache, 0, 0, B * S], cache, [B * S, HKV, DH])
        c1 = vw("aten.view.default", [c0, [B, S, HKV, DH]], cache, [B, S, HKV, DH])
        c2 = vw("aten.slice.Tensor", [c1, 0, 0, bs], cache, [bs, S, HKV, DH])
        c3 = vw("aten.unsqueeze.default", [c2, 3], cache, [bs, S, HKV, 1, DH], [S * HKV * DH, HKV * DH, DH, DH, 1])
        c4 = vw("aten.expand.default", [c3, [bs, S, HKV, rep, DH]], cache, [bs, S, HKV, rep, DH], [S * HKV * DH, HKV * DH, DH, 0, 1])
        cl = s.op("aten.clone.default", [c4], new([bs, S, HKV, rep, DH]), {"memory_format": None})
        r = vw("aten._unsafe_view.default", [cl, [bs, S, HQ, DH]], cl, [bs, S, HQ, DH])
        return vw("aten.transpose.int", [r, 1, 2], cl, [bs, HQ, S, DH], [S * HQ * DH, DH, HQ * DH, 1])
    for l in range(c["L"]):
        x = rms(h, "n1_%d" % l)
        q = heads(linear(x, "q_%d" % l, HQ * DH), HQ)
        k = heads(linear(x, "k_%d" % l, HKV * DH), HKV)
        vv = heads(linear(x, "v_%d" % l, HKV * DH), HKV)
        q, k = rope(q, HQ), rope(k, HKV)
        ks = vw("aten.select.int", [k, 2, 0], k, [bs, HKV, DH], [HKV * DH, DH, 1])
        s.op("aten.index_copy_.default", [ext["kc_%d" % l], 0, slots, ks], ext["kc_%d" % l])
        vi = info(vv)
        vs = vw("aten.select.int", [vv, 2, 0], vv, [bs, HKV, DH], [HKV * DH, DH, 1], vi["offset"])
        s.op("aten.index_copy_.default", [ext["vc_%d" % l], 0, slots, vs], ext["vc_%d" % l])
        K, V = per_request(ext["kc_%d" % l]), per_request(ext["vc_%d" % l])
        # sdpa(q, K, V, attn_mask=mask): the bool mask as -inf/0, expanded to the heads
        nm = s.op("aten.logical_not.default", [mask], new([bs, 1, 1, S], "bool"))
        z = s.op("aten.scalar_tensor.default", [0.0], new([], "f32"), {"dtype": {"dtype": "f32"}})
        bias = s.op("aten.where.ScalarSelf", [nm, -math.inf, z], new([bs, 1, 1, S]))
        be = vw("aten.expand.default", [bias, [bs, HQ, 1, S]], bias, [bs, HQ, 1, S], [S, 0, S, 1])
        o = s.view(s.new([bs, 1, HQ, DH]), [bs, HQ, 1, DH], [HQ * DH, DH, HQ * DH, 1])
        lse = s.new([bs, HQ, 32])
        sd = s.new([2], "i64"); so = s.new([], "i64")
        s.op("aten._scaled_dot_product_efficient_attention.default", [q, K, V, be, False], [o, lse, sd, so])
        ot = vw("aten.transpose.int", [o, 1, 2], o, [bs, 1, HQ, DH], [HQ * DH, HQ * DH, DH, 1])
        o3 = vw("aten.view.default", [ot, [bs, 1, HQ * DH]], o, [bs, 1, HQ * DH])
        h = s.op("aten.add.Tensor", [h, linear(o3, "o_%d" % l, D)], new([bs, 1, D]))
        x = rms(h, "n2_%d" % l)
        g = linear(x, "g_%d" % l, I); u = linear(x, "u_%d" % l, I)
        sg = s.op("aten.silu.default", [g], new([bs, 1, I]))
        mu = s.op("aten.mul.Tensor", [sg, u], new([bs, 1, I]))
        h = s.op("aten.add.Tensor", [h, linear(mu, "d_%d" % l, D)], new([bs, 1, D]))
        s.doc["state"] += [ext["kc_%d" % l]["t"], ext["vc_%d" % l]["t"]]
    hn = rms(h, "fnorm")
    lg = linear(hn, "lm", c["V"])
    out = vw("aten.select.int", [lg, 1, 0], lg, [bs, c["V"]], [c["V"], 1])
    s.doc["outputs"].append(out["t"])
    return s, out, ext

def rdec_reference(bs, v):
    """The runner's step in float64 numpy, written from the model's math
    (not from the trace): logits [bs, V] and the caches after it."""
    import numpy as np
    c = RDEC; f = lambda a: a.astype(np.float64)
    D, HQ, HKV, DH, S = c["D"], c["HQ"], c["HKV"], c["DH"], c["MAX_LEN"]
    def rms(x, w): return x / np.sqrt((x * x).mean(-1, keepdims=True) + c["EPS"]) * f(w)
    ids, pos, lens, slots = v["ids"][:bs], v["pos"][:bs], v["lens"][:bs], v["slots"][:bs]
    h = f(v["table"])[ids]
    ang = pos[:, None] * f(v["inv"])[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    def rope(x):  # [bs, H, DH]
        x1, x2 = x[..., :DH // 2], x[..., DH // 2:]
        return x * cos[:, None] + np.concatenate([-x2, x1], -1) * sin[:, None]
    caches = {}
    for l in range(c["L"]):
        x = rms(h, v["n1_%d" % l])
        q = rope((x @ f(v["q_%d" % l]).T).reshape(bs, HQ, DH))
        k = rope((x @ f(v["k_%d" % l]).T).reshape(bs, HKV, DH))
        vv = (x @ f(v["v_%d" % l]).T).reshape(bs, HKV, DH)
        kc, vc = f(v["kc_%d" % l]).copy(), f(v["vc_%d" % l]).copy()
        kc[slots], vc[slots] = k, vv
        caches["kc_%d" % l], caches["vc_%d" % l] = kc, vc
        o = np.zeros((bs, HQ, DH))
        for r in range(bs):
            K = kc[r * S:(r + 1) * S]; V = vc[r * S:(r + 1) * S]   # [S, HKV, DH]
            for hh in range(HQ):
                kv = hh // (HQ // HKV)
                sc = K[:lens[r], kv] @ q[r, hh] / math.sqrt(DH)
                p = np.exp(sc - sc.max()); p /= p.sum()
                o[r, hh] = p @ V[:lens[r], kv]
        h = h + o.reshape(bs, HQ * DH) @ f(v["o_%d" % l]).T
        x = rms(h, v["n2_%d" % l])
        g, u = x @ f(v["g_%d" % l]).T, x @ f(v["u_%d" % l]).T
        h = h + (g / (1 + np.exp(-g)) * u) @ f(v["d_%d" % l]).T
    return rms(h, v["fnorm"]) @ f(v["lm"]).T, caches


def test_runner_decode(client, sock):
    """The runner's decode step captured at 8, 4 and 2 merges into one
    program with buckets [2, 4, 8]; a replay at each bucket runs that bucket
    as a daemon graph and gives that batch's logits and cache writes (the
    float64 reference of the model's math); the capture at 1 lowers its
    size-1 dims away and keeps a program of its own, with its values too."""
    import gfxgraph
    from gfxgraph import frontend
    from gfxgraph.frontend import runner, shmrun
    v = rdec_values()
    members, caps = [], {}
    for bs in (8, 4, 2, 1):
        s, out, ext = rdec_step(bs, v)
        g = frontend.Graph.from_json(s.doc)
        plan = frontend.build(g)
        members.append(runner.Member(plan, g, lambda sid, g=g: (
            ("ext", sid) if g.storages[sid].external else ("pool", id(g), sid))))
        caps[bs] = (s, out, ext, g, plan)
    m, why = runner.merge_or_none(members[:3])
    if not check(m is not None and m.buckets == [2, 4, 8],
                 "runner decode: captures at 8, 4 and 2 merge into buckets [2, 4, 8] (%s)"
                 % (m.buckets if m is not None else why)):
        return
    split = [n for n in m.nodes if n["op"] == "strided_copy" and
             len(m.tensors[n["outputs"][0]]["shape"]) > len(m.base.plan.tensors[
                 n["outputs"][0]]["shape"])]
    check(bool(split) and all(n["attrs"]["s0"] == n["attrs"]["s1"] *
                              m.tensors[n["outputs"][0]]["shape"][1] for n in split),
          "runner decode: the per-request cache gathers' collapsed rows became [batch, r] "
          "with the batch's stride r * s1 (%s)" % [n["attrs"] for n in split])
    s8, out8, ext8, g8, _ = caps[8]

    def compare(what, bs, arrays, g, out, ext):
        ref, caches = rdec_reference(bs, v)
        t = g.tensors[out["t"]]
        rows = frontend.Tensor(None, t.storage, t.offset, (bs,) + t.shape[1:], t.stride, t.dtype)
        got = shmrun.tensor_values(arrays[t.storage.id], rows)
        e = rel_l2(got, ref)
        same = bool((got.argmax(-1) == ref.argmax(-1)).all())
        check(e <= 1e-5 and same, "runner decode: %s at batch %d: logits rel-L2 %.3g, greedy "
              "tokens equal: %s" % (what, bs, e, same))
        worst = 0.0
        for key, want in caches.items():
            ct = g.tensors[ext[key]["t"]]
            worst = max(worst, rel_l2(shmrun.tensor_values(arrays[ct.storage.id], ct), want))
        check(worst <= 1e-5, "runner decode: %s at batch %d: the caches after the step (slots "
              "of requests 0..%d written, the others kept) rel-L2 %.3g" % (what, bs, bs - 1,
                                                                          worst))

    for bs in (8, 4, 2):
        arrays = shmrun.storage_arrays(g8, m, s8.before)
        bufs = {sid: client.register(a) for sid, a in arrays.items()}
        try:
            prog = client.define(m.spec("runner_decode_%d" % bs, bufs))
        except gfxgraph.Error as e:
            check(False, "runner decode: program.define of the merged program (%s)" % e)
            return
        st0 = gfxgraph.stats(sock)
        r = prog.replay(bs)
        st1 = gfxgraph.stats(sock)
        check(r["bucket"] == bs and r["path"] == "graph" and not r["fallback"] and
              st1["replay_count"] == st0["replay_count"] + 1,
              "runner decode: a replay at batch %d ran bucket %d as a daemon graph (%r, "
              "replay_count %d -> %d)" % (bs, bs, r, st0["replay_count"], st1["replay_count"]))
        compare("the merged program", bs, arrays, g8, out8, ext8)
        prog.release()
    # batch 1: its own program (runner.py says why), right values all the same
    m1, why1 = runner.merge_or_none(members)
    check(m1 is None and "differs" in why1, "runner decode: the capture at 1 keeps its own "
          "program (%s)" % why1)
    s1, out1, ext1, g1, plan1 = caps[1]
    arrays = shmrun.storage_arrays(g1, plan1, s1.before)
    prog, _ = shmrun.define(client, g1, plan1, arrays, "runner_decode_1")
    st0 = gfxgraph.stats(sock)
    r = prog.replay(1)
    st1 = gfxgraph.stats(sock)
    check(r["path"] == "graph" and not r["fallback"] and
          st1["replay_count"] == st0["replay_count"] + 1,
          "runner decode: batch 1's own program ran as a daemon graph (%r)" % r)
    compare("its own program", 1, arrays, g1, out1, ext1)
    prog.release()


# ---- running one trace -------------------------------------------------------------

def rel_l2(out, ref):
    import numpy as np
    out = np.asarray(out, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    den = math.sqrt(float((ref * ref).sum())) or 1.0
    return math.sqrt(float(((out - ref) ** 2).sum())) / den


def run_trace(client, sock, name, doc, before, after, want_ops=None):
    """Build, define, replay once, compare; every check reported."""
    import numpy as np
    import gfxgraph
    from gfxgraph import frontend
    from gfxgraph.frontend import shmrun
    g = frontend.Graph.from_json(doc)
    try:
        plan = frontend.build(g)
    except frontend.Unsupported as e:
        return check(False, "%s: lowered (%s)" % (name, e))
    ops = [n["op"] for n in plan.nodes]
    missing = sorted(set(ops) - DAEMON_OPS) if DAEMON_OPS else []
    if missing:
        # the op table grows op by op (docs/ops.md); a program needing an op
        # this daemon does not list yet is reported, not run
        tp.skip("%s: the daemon does not list %s yet" % (name, ", ".join(missing)))
        MISSING.update(missing)
        return True
    check(True, "%s: %d recorded ops -> %d nodes (%s), fused %r"
          % (name, len(g.ops), len(plan.nodes), " ".join(ops[:40]), plan.report["fused"]))
    if want_ops is not None:
        check(ops == want_ops, "%s: the program is exactly %s (%s)" % (name, want_ops, ops))
    fam = doc.get("family")
    if fam in ("llama", "qwen2", "mistral", "gemma2", "gpt2"):
        # the decode family's fused ops: the StaticCache write always; the
        # rotary and the attention over the cache in f32 and f16 (bf16 keeps
        # the general path, patterns.match_rope says why)
        want = {"cache_write"}
        if doc.get("dtype") != "bf16":
            want.add("attention_decode")
            if fam != "gpt2":
                want.add("rope")
        gone = {"sdpa", "index_copy"} if doc.get("dtype") != "bf16" else {"index_copy"}
        check(want <= set(ops) and not (gone & set(ops)),
              "%s: the program uses %s and no %s (%s)"
              % (name, sorted(want), sorted(gone), sorted(set(ops))))
    if name == "synthetic_bf16_rounding":
        at = {n["op"]: n.get("attrs") or {} for n in plan.nodes}
        check(at.get("rmsnorm", {}).get("round_x") == 1 and
              at.get("silu_mul", {}).get("round_act") == 1,
              "%s: rmsnorm carries round_x, silu_mul round_act (%r)" % (name, at))
    arrays = shmrun.storage_arrays(g, plan, before)
    try:
        prog, _ = shmrun.define(client, g, plan, arrays, name)
    except gfxgraph.Error as e:
        return check(False, "%s: program.define (%s)" % (name, e))
    st0 = gfxgraph.stats(sock)
    r = prog.replay(1)
    st1 = gfxgraph.stats(sock)
    n0 = st0["replay_count"] + st0.get("eager_count", 0)
    n1 = st1["replay_count"] + st1.get("eager_count", 0)
    check(n1 == n0 + 1 and not r["fallback"],
          "%s: one daemon replay (%d -> %d), no fallback (%r)" % (name, n0, n1, r))
    dtype = doc.get("dtype", "f32")
    tol = TOL.get(dtype, 1e-2)
    for tid in g.outputs:
        t = g.tensors[tid]
        got = shmrun.tensor_values(arrays[t.storage.id], t)
        ref = shmrun.tensor_values(np.frombuffer(after[t.storage.id], dtype=np.uint8), t)
        e = rel_l2(got, ref)
        if "tol" in doc:
            check(e <= doc["tol"], "%s: output %d %s rel-L2 %.3g <= %g" % (
                name, tid, t.describe(), e, doc["tol"]))
            continue
        check(e <= TOL.get(t.dtype, tol) and np.isfinite(got).all(),
              "%s: output %d %s rel-L2 %.3g <= %g" % (name, tid, t.describe(), e,
                                                     TOL.get(t.dtype, tol)))
    for tid in g.state:
        t = g.tensors[tid]
        sid = t.storage.id
        whole = frontend.Tensor(None, t.storage, 0, [t.storage.nbytes // t.itemsize], [1],
                                t.dtype)
        got = shmrun.tensor_values(arrays[sid], whole)
        ref = shmrun.tensor_values(np.frombuffer(after[sid], dtype=np.uint8), whole)
        e = rel_l2(got, ref)
        check(e <= TOL.get(t.dtype, tol), "%s: state storage %d rel-L2 %.3g" % (name, sid, e))
    prog.release()
    return True


def load_trace(path):
    import numpy as np
    with open(path) as f:
        doc = json.load(f)
    data = np.load(path[:-5] + ".npz")
    before, after = {}, {}
    for k in data.files:
        sid, _, when = k[1:].partition("_")
        (before if when == "before" else after)[int(sid)] = data[k].tobytes()
    return doc, before, after


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--only", default=None, help="run the traces whose name contains this")
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
    tmp = tempfile.mkdtemp(prefix="ggfe.")
    d = tp.Daemon(args.daemon, tmp)
    try:
        DAEMON_OPS.update(gfxgraph.server_info(d.sock).get("ops") or [])
        check(bool(DAEMON_OPS), "hello lists %d ops" % len(DAEMON_OPS))
        with gfxgraph.Client(d.sock) as c:
            for fn in SYNTH:
                name, s, want = fn()
                if args.only and args.only not in name:
                    continue
                run_trace(c, d.sock, name, s.doc, s.before, s.after, want)
            if not args.only or args.only in "runner":
                test_runner_merge(c, d.sock)
                test_runner_decode(c, d.sock)
            paths = sorted(p for p in glob.glob(os.path.join(TRACES, "*.json"))
                           if os.path.exists(p[:-5] + ".npz"))
            for p in paths:
                name = os.path.basename(p)[:-5]
                if args.only and args.only not in name:
                    continue
                doc, before, after = load_trace(p)
                run_trace(c, d.sock, name, doc, before, after)
            check(True, "%d recorded traces in tests/traces" % len(paths))
    finally:
        rc = d.stop()
        if tp.FAILS:
            d.dump()
    check(rc == 0, "daemon stopped cleanly (%r)" % rc)
    print("%d passed, %d failed, %d skipped" % (tp.PASSES, tp.FAILS, tp.SKIPS))
    if MISSING:
        print("ops the traces need that the daemon does not list: %s" % " ".join(sorted(MISSING)))
    return 1 if tp.FAILS else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    sys.exit(main())
