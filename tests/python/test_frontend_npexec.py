#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A numpy model of the daemon's ops (docs/ops.md and the op-table
additions: broadcasting elementwise ops with the scalar convention, fill,
arange, cast, reductions, strided_copy, cat, index_copy, embedding, bmm,
sdpa), computed in float64 and rounded to each tensor's dtype, for
executing a frontend Plan without a daemon.

    test_frontend_npexec.py [--only NAME]

Runs every trace of tests/traces (and the synthetic ones of
test_frontend_traces.py) through the frontend and this model and compares
with the recorded results, as test_frontend_traces.py does on the daemon:
a check of the lowering itself, independent of the kernels.  Exit 0 when
all passed, 1 otherwise, 77 without numpy.
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

SIZE = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "bool": 1}


class Exec:
    def __init__(self, plan, arrays):
        import numpy as np
        self.np = np
        self.plan = plan
        self.arrays = arrays          # storage id -> uint8 array
        self.scratch = {}

    # raw storage of a tensor name: (uint8 array, byte offset, dtype, shape)
    def _raw(self, name):
        t = self.plan.tensors[name]
        if "view" in t:
            arr, off, dt, _ = self._raw(t["view"])
            return arr, off, dt, t["shape"]
        if t.get("scratch"):
            if name not in self.scratch:
                n = 1
                for d in t["shape"]:
                    n *= d
                self.scratch[name] = self.np.zeros(n * SIZE[t["dtype"]], dtype=self.np.uint8)
            return self.scratch[name], 0, t["dtype"], t["shape"]
        return self.arrays[t["storage"]], t["offset"], t["dtype"], t["shape"]

    def read(self, name):
        np = self.np
        arr, off, dt, shape = self._raw(name)
        n = 1
        for d in shape:
            n *= d
        b = arr[off:off + n * SIZE[dt]]
        if dt == "bf16":
            v = (b.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            v = b.view({"f32": np.float32, "f16": np.float16, "i64": np.int64,
                        "i32": np.int32, "bool": np.bool_}[dt])
            v = v.astype(np.float64) if dt in ("f32", "f16") else v.copy()
        return v.reshape(shape), dt

    def write(self, name, v):
        np = self.np
        arr, off, dt, shape = self._raw(name)
        v = np.broadcast_to(np.asarray(v), shape)
        if dt == "bf16":
            f = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
            r = ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)
            r = np.where(np.isnan(np.ascontiguousarray(v, dtype=np.float32)),
                         np.uint16(0x7FC0), r)
            by = r.tobytes()
        elif dt in ("f32", "f16"):
            by = np.ascontiguousarray(v, dtype=np.float32).astype(
                np.float16 if dt == "f16" else np.float32).tobytes()
        elif dt == "bool":
            by = (np.ascontiguousarray(v) != 0).astype(np.bool_).tobytes()
        else:
            by = np.ascontiguousarray(v).astype(np.int64).astype(
                np.int32 if dt == "i32" else np.int64).tobytes()
        arr[off:off + len(by)] = np.frombuffer(by, dtype=np.uint8)

    def run(self):
        for n in self.plan.nodes:
            getattr(self, "op_" + n["op"])(n, n.get("attrs") or {})

    def _exact_broadcast(self, n):
        """The daemon's rule for every broadcasting op: the output is
        exactly the broadcast shape of the inputs."""
        shapes = [tuple(self.plan.tensors[x]["shape"]) for x in n["inputs"]]
        want = tuple(self.np.broadcast_shapes(*shapes))
        got = tuple(self._raw(n["outputs"][0])[3])
        if want != got:
            raise AssertionError("%s: output %s is not the inputs' broadcast shape %s"
                                 % (n["op"], list(got), list(want)))

    def _bin(self, n, a, f):
        self._exact_broadcast(n)
        ins = [self.read(x)[0] for x in n["inputs"]]
        if len(ins) == 1:
            s = a.get("scalar", 0.0)
            x = ins[0]
            ins = [s, x] if a.get("reverse") else [x, s]
        return f(*ins)

    def _out(self, n, v):
        self.write(n["outputs"][0], v)


def rounded(v, dt):
    """v (float64) as a tensor of dtype dt holds it: f16 and bf16 round to
    nearest even (bf16 through f32, where the values lie), f32 too."""
    import numpy as np
    v = np.asarray(v, dtype=np.float64)
    if dt == "f16":
        return v.astype(np.float16).astype(np.float64)
    if dt == "bf16":
        f = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
        r = (((f + 0x7FFF + ((f >> 16) & 1)) >> 16) << 16).astype(np.uint32)
        return np.where(np.isnan(v), v, r.view(np.float32).astype(np.float64))
    if dt == "f32":
        return v.astype(np.float32).astype(np.float64)
    return v


def _setup():
    np = __import__("numpy")
    out_dt = lambda e, n: e.plan.tensors[n["outputs"][0]]["dtype"]  # noqa: E731

    def arith(f, integer_f=None):
        def fn(self, n, a):
            dt = out_dt(self, n)
            if dt in ("i32", "i64"):
                v = self._bin(n, a, lambda x, y: (integer_f or f)(
                    np.asarray(x).astype(np.int64), np.asarray(y).astype(np.int64)))
            else:
                with np.errstate(all="ignore"):
                    v = self._bin(n, a, f)
            self._out(n, v)
        return fn

    for name, f in (("add", lambda x, y: x + y), ("sub", lambda x, y: x - y),
                    ("mul", lambda x, y: x * y), ("div", lambda x, y: x / y),
                    ("pow", lambda x, y: np.power(x, y)), ("maximum", np.maximum),
                    ("minimum", np.minimum),
                    ("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                    ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
        setattr(Exec, "op_" + name, arith(f))
    for name, f in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                    ("bitwise_xor", np.bitwise_xor)):
        def bit(self, n, a, f=f):
            dt = out_dt(self, n)
            cv = (lambda x: np.asarray(x).astype(np.bool_)) if dt == "bool" else \
                (lambda x: np.asarray(x).astype(np.int64))
            self._out(n, self._bin(n, a, lambda x, y: f(cv(x), cv(y))))
        setattr(Exec, "op_" + name, bit)

    def unary(f):
        def fn(self, n, a):
            x, _ = self.read(n["inputs"][0])
            with np.errstate(all="ignore"):
                self._out(n, f(x, a))
        return fn

    erf = np.vectorize(math.erf)
    for name, f in (("neg", lambda x, a: -x), ("abs", lambda x, a: np.abs(x)),
                    ("rsqrt", lambda x, a: 1 / np.sqrt(x)), ("sqrt", lambda x, a: np.sqrt(x)),
                    ("exp", lambda x, a: np.exp(x)), ("log", lambda x, a: np.log(x)),
                    ("tanh", lambda x, a: np.tanh(x)), ("sin", lambda x, a: np.sin(x)),
                    ("cos", lambda x, a: np.cos(x)),
                    ("sigmoid", lambda x, a: 1 / (1 + np.exp(-x))),
                    ("recip", lambda x, a: 1 / x), ("copy", lambda x, a: x),
                    ("scale", lambda x, a: x * a.get("scale", 1.0)),
                    ("silu", lambda x, a: x / (1 + np.exp(-x))),
                    ("bitwise_not", lambda x, a: ~x if x.dtype != np.bool_ else ~x),
                    ("gelu", lambda x, a: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (
                        x + 0.044715 * x ** 3))) if a.get("approximate") == "tanh" else
                     0.5 * x * (1 + erf(x / math.sqrt(2)))),
                    ("softmax", lambda x, a: np.exp(x - x.max(-1, keepdims=True)) /
                     np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))):
        setattr(Exec, "op_" + name, unary(f))

    def op_cast(self, n, a):
        x, sdt = self.read(n["inputs"][0])
        dt = out_dt(self, n)
        if dt in ("i32", "i64") and sdt in ("f32", "f16", "bf16"):
            x = np.trunc(np.nan_to_num(x, nan=0.0))
        if dt == "i32" and sdt == "i64":
            x = x.astype(np.int64).astype(np.int32)
        self._out(n, x)
    Exec.op_cast = op_cast

    def op_silu_mul(self, n, a):
        x, dt = self.read(n["inputs"][0])
        y, _ = self.read(n["inputs"][1])
        act = x / (1 + np.exp(-x))
        self._out(n, (rounded(act, dt) if a.get("round_act") else act) * y)
    Exec.op_silu_mul = op_silu_mul

    def op_where(self, n, a):
        self._exact_broadcast(n)
        if self.plan.tensors[n["inputs"][0]]["dtype"] != "bool":
            raise AssertionError("where: the condition must be bool")
        c, a1, b1 = [self.read(x)[0] for x in n["inputs"]]
        self._out(n, np.where(c.astype(bool), a1, b1))
    Exec.op_where = op_where

    def op_fill(self, n, a):
        self._out(n, a.get("value", 0.0))
    Exec.op_fill = op_fill

    def op_arange(self, n, a):
        shape = self.plan.tensors[n["outputs"][0]]["shape"]
        self._out(n, a.get("start", 0.0) + np.arange(shape[0]) * a.get("step", 1.0))
    Exec.op_arange = op_arange

    def red(f):
        def fn(self, n, a):
            x, _ = self.read(n["inputs"][0])
            oshape = self.plan.tensors[n["outputs"][0]]["shape"]
            self._out(n, f(x, -1).reshape(oshape))
        return fn
    Exec.op_sum = red(np.sum)
    Exec.op_mean = red(np.mean)
    Exec.op_amax = red(np.max)
    Exec.op_amin = red(np.min)

    def op_strided_copy(self, n, a):
        from numpy.lib.stride_tricks import as_strided
        x, _ = self.read(n["inputs"][0])
        oshape = self.plan.tensors[n["outputs"][0]]["shape"]
        st = [int(a.get("s%d" % i, 0)) * x.itemsize for i in range(len(oshape))]
        self._out(n, np.array(as_strided(x, shape=oshape, strides=st)))
    Exec.op_strided_copy = op_strided_copy

    def op_cat(self, n, a):
        self._out(n, np.concatenate([self.read(x)[0] for x in n["inputs"]],
                                    axis=int(a.get("dim", 0))))
    Exec.op_cat = op_cat

    def op_index_copy(self, n, a):
        src, _ = self.read(n["inputs"][0])
        idx, _ = self.read(n["inputs"][1])
        y, _ = self.read(n["outputs"][0])
        dim = int(a.get("dim", 0)) % y.ndim
        for i, k in enumerate(idx.ravel()):
            if 0 <= k < y.shape[dim]:
                sl = [slice(None)] * y.ndim
                sl[dim] = int(k)
                ss = [slice(None)] * y.ndim
                ss[dim] = i
                y[tuple(sl)] = src[tuple(ss)]
        self._out(n, y)
    Exec.op_index_copy = op_index_copy

    def op_embedding(self, n, a):
        ids, _ = self.read(n["inputs"][0])
        tab, _ = self.read(n["inputs"][1])
        ok = (ids >= 0) & (ids < tab.shape[0])
        v = tab[np.where(ok, ids, 0)]
        v[~ok] = 0
        self._out(n, v)
    Exec.op_embedding = op_embedding

    def op_linear(self, n, a):
        ins = [self.read(x)[0] for x in n["inputs"]]
        y = ins[0] @ ins[1].T
        if len(ins) > 2:
            y = y + ins[2]
        self._out(n, y)
    Exec.op_linear = op_linear

    def op_bmm(self, n, a):
        x, _ = self.read(n["inputs"][0])
        w, _ = self.read(n["inputs"][1])
        if a.get("trans_b"):
            w = np.swapaxes(w, -1, -2)
        self._out(n, np.matmul(x, w))
    Exec.op_bmm = op_bmm

    def op_rmsnorm(self, n, a):
        x, dt = self.read(n["inputs"][0])
        w, _ = self.read(n["inputs"][1])
        h = x / np.sqrt((x * x).mean(-1, keepdims=True) + a.get("eps", 1e-6))
        self._out(n, (rounded(h, dt) if a.get("round_x") else h) * w)
    Exec.op_rmsnorm = op_rmsnorm

    def op_layernorm(self, n, a):
        x, _ = self.read(n["inputs"][0])
        w, _ = self.read(n["inputs"][1])
        b, _ = self.read(n["inputs"][2])
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        self._out(n, (x - m) / np.sqrt(v + a.get("eps", 1e-5)) * w + b)
    Exec.op_layernorm = op_layernorm

    def op_sdpa(self, n, a):
        ins = [self.read(x) for x in n["inputs"]]
        q, k, v = ins[0][0], ins[1][0], ins[2][0]
        B, H, L, D = q.shape
        Hk, S = k.shape[1], k.shape[2]
        k = np.repeat(k, H // Hk, axis=1)
        v = np.repeat(v, H // Hk, axis=1)
        scale = a.get("scale", 0.0) or 1 / math.sqrt(D)
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
        allow = np.ones(s.shape, dtype=bool)
        if a.get("causal"):
            i = np.arange(L)[:, None]
            j = np.arange(S)[None, :]
            allow &= j <= i + S - L
        if len(ins) > 3:
            m, mdt = ins[3]
            if mdt == "bool":
                allow &= np.broadcast_to(m.astype(bool), s.shape)
            else:
                s = s + m
        s = np.where(allow, s, -np.inf)
        mx = s.max(-1, keepdims=True)
        mx = np.where(np.isfinite(mx), mx, 0)
        e = np.where(allow, np.exp(s - mx), 0)
        den = e.sum(-1, keepdims=True)
        if a.get("round_p"):
            # the weights as q's dtype holds them weigh v; the sum is not rounded
            num = np.matmul(rounded(e, ins[0][1]), v)
            self._out(n, np.where(den > 0, num / np.where(den > 0, den, 1), 0))
            return
        p = np.where(den > 0, e / np.where(den > 0, den, 1), 0)
        self._out(n, np.matmul(p, v))
    Exec.op_sdpa = op_sdpa

    def _rows(v, b):
        """positions/lens of [B] or [1] (one for every row) at row b"""
        v = v.ravel()
        return int(v[b if v.size > 1 else 0])

    def op_rope(self, n, a):
        x, dt = self.read(n["inputs"][0])
        pos, _ = self.read(n["inputs"][1])
        B, H, Dh = x.shape
        rd = int(a.get("rotary_dim", 0)) or Dh
        if len(n["inputs"]) > 2:
            inv = self.read(n["inputs"][2])[0].astype(np.float32).ravel()[:rd // 2]
        else:
            th = np.float32(a.get("theta", 10000.0))
            inv = (np.float32(1) / np.power(th, np.arange(rd // 2, dtype=np.float32) * 2 / rd,
                                            dtype=np.float32)).astype(np.float32)
        sc = float(a.get("attention_scaling", 1.0))
        y = x.copy()
        gptj = a.get("style") in ("gptj", 1)
        for b in range(B):
            ang = (np.float32(_rows(pos, b)) * inv).astype(np.float32).astype(np.float64)
            c, s_ = np.cos(ang) * sc, np.sin(ang) * sc
            if gptj:
                i0, i1 = np.arange(0, rd, 2), np.arange(1, rd, 2)
            else:
                i0, i1 = np.arange(rd // 2), np.arange(rd // 2, rd)
            x0, x1 = x[b][:, i0], x[b][:, i1]
            y[b][:, i0] = x0 * c - x1 * s_
            y[b][:, i1] = x1 * c + x0 * s_
        self._out(n, y)
    Exec.op_rope = op_rope

    def op_cache_write(self, n, a):
        x, _ = self.read(n["inputs"][0])
        pos, _ = self.read(n["inputs"][1])
        cache, _ = self.read(n["outputs"][0])
        bhsd = a.get("layout") in ("bhsd", 1)
        S = cache.shape[2] if bhsd else cache.shape[1]
        for b in range(x.shape[0]):
            p = _rows(pos, b)
            if 0 <= p < S:
                if bhsd:
                    cache[b, :, p] = x[b]
                else:
                    cache[b, p] = x[b]
        self._out(n, cache)
    Exec.op_cache_write = op_cache_write

    def op_attention_decode(self, n, a):
        q, _ = self.read(n["inputs"][0])
        kc, _ = self.read(n["inputs"][1])
        vc, _ = self.read(n["inputs"][2])
        lens, _ = self.read(n["inputs"][3])
        if a.get("layout") in ("bhsd", 1):
            kc, vc = np.swapaxes(kc, 1, 2), np.swapaxes(vc, 1, 2)   # -> [B, S, Hkv, Dh]
        B, Hq, Dh = q.shape
        S, Hk = kc.shape[1], kc.shape[2]
        scale = a.get("scale", 0.0) or 1 / math.sqrt(Dh)
        y = np.zeros_like(q)
        for b in range(B):
            L = min(max(_rows(lens, b), 0), S)
            for h in range(Hq):
                if L == 0:
                    continue
                g = h // (Hq // Hk)
                s_ = kc[b, :L, g] @ q[b, h] * scale
                e = np.exp(s_ - s_.max())
                y[b, h] = (e / e.sum()) @ vc[b, :L, g]
        self._out(n, y)
    Exec.op_attention_decode = op_attention_decode


def run_plan(graph, plan, before):
    from gfxgraph.frontend import shmrun
    import numpy as np
    sids = set(plan.storages)
    sids.update(graph.tensors[i].storage.id for i in graph.outputs + graph.state)
    arrays = {}
    for sid in sids:
        a = np.zeros(max(1, graph.storages[sid].nbytes), dtype=np.uint8)
        if sid in before:
            src = np.frombuffer(before[sid], dtype=np.uint8)
            a[:src.size] = src
        arrays[sid] = a
    Exec(plan, arrays).run()
    del shmrun
    return arrays


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    try:
        import numpy as np
    except ImportError:
        print("SKIP: numpy does not import here (Debian: python3-numpy)")
        return 77
    _setup()
    import glob
    import test_frontend_traces as tft
    from test_package import check
    import test_package as tp
    from gfxgraph import frontend
    from gfxgraph.frontend import shmrun
    cases = []
    for fn in tft.SYNTH:
        name, s, _want = fn()
        cases.append((name, s.doc, s.before, s.after))
    for p in sorted(glob.glob(os.path.join(tft.TRACES, "*.json"))):
        if os.path.exists(p[:-5] + ".npz"):
            cases.append((os.path.basename(p)[:-5],) + tft.load_trace(p))
    for name, doc, before, after in cases:
        if args.only and args.only not in name:
            continue
        g = frontend.Graph.from_json(doc)
        try:
            plan = frontend.build(g)
        except frontend.Unsupported as e:
            check(False, "%s: lowered (%s)" % (name, e))
            continue
        arrays = run_plan(g, plan, before)
        tol = tft.TOL.get(doc.get("dtype", "f32"), 1e-2)
        for tid in g.outputs:
            t = g.tensors[tid]
            got = shmrun.tensor_values(arrays[t.storage.id], t)
            ref = shmrun.tensor_values(np.frombuffer(after[t.storage.id], dtype=np.uint8), t)
            e = tft.rel_l2(got, ref)
            check(e <= max(tol, 1e-5), "%s (numpy model): output %s rel-L2 %.3g"
                  % (name, t.describe(), e))
        for tid in g.state:
            t = g.tensors[tid]
            whole = frontend.Tensor(None, t.storage, 0, [t.storage.nbytes // t.itemsize], [1],
                                    t.dtype)
            got = shmrun.tensor_values(arrays[t.storage.id], whole)
            ref = shmrun.tensor_values(np.frombuffer(after[t.storage.id], dtype=np.uint8),
                                       whole)
            e = tft.rel_l2(got, ref)
            check(e <= max(tol, 1e-5), "%s (numpy model): state storage %d rel-L2 %.3g"
                  % (name, t.storage.id, e))
    print("%d passed, %d failed" % (tp.PASSES, tp.FAILS))
    return 1 if tp.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
