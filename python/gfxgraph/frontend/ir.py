# SPDX-License-Identifier: MIT
"""The frontend's IR: the recorded aten ops of one captured step over the
tensors they touch.

A tensor is (storage, offset, shape, stride, dtype), offsets and strides in
elements, read off the recorded tensors themselves, so a view op (view,
transpose, expand, slice, unsqueeze, permute, select, alias, ...) is fully
described by the tensor it returns and needs no node.  An op reads the
tensors among its arguments and writes its outputs; an in-place op
(``add_``, ``index_copy_``, ``copy_``, ...) writes its first operand.

The same structure is the trace format of tests/traces/*.json (see
docs/python.md, "The PyTorch frontend"): ``Graph.from_json`` reads one, and
gfxgraph.frontend.torchrec builds one from a live capture.
"""

import math

# name -> bytes per element
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "bool": 1}
FLOATING = ("f32", "f16", "bf16")
INTEGRAL = ("i64", "i32")
# torch's names for the dtypes of the trace format
TORCH_NAMES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
               "int32": "i32", "bool": "bool"}


class Unsupported(Exception):
    """Something the frontend cannot express as daemon ops: ``op`` names the
    aten op, ``why`` says what about it (shapes, dtypes, strides)."""

    def __init__(self, op, why=""):
        self.op = op
        self.why = why
        super().__init__("%s: %s" % (op, why) if why else op)


class Storage:
    __slots__ = ("id", "nbytes", "external")

    def __init__(self, sid, nbytes, external):
        self.id, self.nbytes, self.external = int(sid), int(nbytes), bool(external)

    def __repr__(self):
        return "Storage(%d, %d%s)" % (self.id, self.nbytes, ", external" if self.external else "")


class Tensor:
    """One recorded tensor (or a view the frontend derives from one)."""
    __slots__ = ("id", "storage", "offset", "shape", "stride", "dtype")

    def __init__(self, tid, storage, offset, shape, stride, dtype):
        self.id = tid
        self.storage = storage          # a Storage
        self.offset = int(offset)
        self.shape = tuple(int(d) for d in shape)
        self.stride = tuple(int(s) for s in stride)
        self.dtype = dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self):
        return ITEMSIZE.get(self.dtype, 0)

    def is_contiguous(self):
        """Row-major contiguous (size-1 dims may have any stride)."""
        want = 1
        for d, s in zip(reversed(self.shape), reversed(self.stride)):
            if d != 1 and s != want:
                return False
            want *= d
        return True

    def extent(self):
        """[first, last] element offsets the tensor touches, or None when
        empty."""
        if self.numel == 0:
            return None
        lo = hi = self.offset
        for d, s in zip(self.shape, self.stride):
            if s >= 0:
                hi += (d - 1) * s
            else:
                lo += (d - 1) * s
        return lo, hi

    def byte_range(self):
        e = self.extent()
        if e is None:
            return None
        return e[0] * self.itemsize, (e[1] + 1) * self.itemsize

    def overlaps(self, other):
        if self.storage is not other.storage:
            return False
        a, b = self.byte_range(), other.byte_range()
        return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]

    def same_memory(self, other):
        """The same elements in the same order (the same program tensor)."""
        return (self.storage is other.storage and self.offset == other.offset and
                self.dtype == other.dtype and self.shape == other.shape and
                all(s1 == s2 for d, s1, s2 in zip(self.shape, self.stride, other.stride)
                    if d != 1))

    def describe(self):
        return "%s%s stride %s" % (self.dtype, list(self.shape), list(self.stride))

    def __repr__(self):
        return "Tensor(%s, s%d+%d, %s)" % (self.id, self.storage.id, self.offset,
                                           self.describe())


class DType:
    """A torch.dtype argument (``dtype=torch.float32``)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, o):
        return isinstance(o, DType) and o.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return "dtype(%s)" % self.name


class Opaque:
    """Any other argument (a device, a memory format, ...): kept as text."""
    __slots__ = ("kind", "text")

    def __init__(self, kind, text):
        self.kind, self.text = kind, text

    def __repr__(self):
        return "%s(%s)" % (self.kind, self.text)


class Op:
    """One recorded aten op: ``name`` as torch prints it
    (``aten.mm.default``), decoded args/kwargs/out (Tensors, numbers,
    lists, DType, Opaque, None)."""
    __slots__ = ("name", "args", "kwargs", "out", "index")

    def __init__(self, name, args, kwargs, out, index=0):
        self.name = name
        self.args = list(args)
        self.kwargs = dict(kwargs or {})
        self.out = out
        self.index = index

    @property
    def base(self):
        """``aten.add_.Tensor`` -> ``add_``."""
        parts = self.name.split(".")
        return parts[1] if len(parts) > 1 else parts[0]

    @property
    def inplace(self):
        b = self.base
        return b.endswith("_") and not b.startswith("_") or b in ("_index_put_impl_",)

    def arg(self, i, name, default=None):
        """Positional argument i, else keyword name, else default."""
        if i is not None and i < len(self.args):
            return self.args[i]
        return self.kwargs.get(name, default)

    def tensors_in(self):
        return [t for t in flatten(self.args) + flatten(list(self.kwargs.values()))
                if isinstance(t, Tensor)]

    def tensors_out(self):
        if self.inplace and self.args and isinstance(self.args[0], Tensor):
            return [self.args[0]]
        return [t for t in flatten([self.out]) if isinstance(t, Tensor)]

    def describe(self):
        """The op with its tensor operands' shapes, dtypes and strides (what
        a bug report needs)."""
        ins = ", ".join(t.describe() for t in self.tensors_in())
        outs = ", ".join(t.describe() for t in flatten([self.out]) if isinstance(t, Tensor))
        return "%s(%s) -> %s" % (self.name, ins, outs or "()")

    def __repr__(self):
        return "Op(%s)" % self.describe()


def flatten(v):
    out = []
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        else:
            out.append(x)
    return out


class Graph:
    """The step: storages, tensors, ops in recorded order, and the tensor
    ids of the inputs (written by the user between replays), outputs (read
    by the user) and state (external storages the step mutates)."""

    def __init__(self, storages, tensors, ops, inputs=(), outputs=(), state=(), meta=None):
        self.storages = storages        # id -> Storage
        self.tensors = tensors          # id -> Tensor
        self.ops = ops                  # [Op]
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.state = list(state)
        self.meta = dict(meta or {})

    # ---- the trace format ------------------------------------------------

    @classmethod
    def from_json(cls, doc):
        if doc.get("version") != 1:
            raise ValueError("trace version %r (this frontend reads version 1)"
                             % doc.get("version"))
        storages = {int(s["id"]): Storage(s["id"], s["nbytes"], s.get("external", False))
                    for s in doc["storages"]}
        tensors = {}
        for t in doc["tensors"]:
            tensors[int(t["id"])] = Tensor(int(t["id"]), storages[int(t["storage"])],
                                           t.get("offset", 0), t["shape"], t["stride"],
                                           t["dtype"])

        def dec(v):
            if isinstance(v, list):
                return [dec(x) for x in v]
            if isinstance(v, dict):
                if "t" in v:
                    return tensors[int(v["t"])]
                if "float" in v:
                    return float(v["float"])
                if "dtype" in v:
                    return DType(v["dtype"])
                if "device" in v:
                    return Opaque("device", v["device"])
                if "repr" in v:
                    return Opaque("repr", v["repr"])
                return {k: dec(x) for k, x in v.items()}
            return v

        ops = [Op(o["op"], dec(o.get("args", [])), {k: dec(x) for k, x in
                                                    (o.get("kwargs") or {}).items()},
                  dec(o.get("out")), i)
               for i, o in enumerate(doc["ops"])]
        meta = {k: v for k, v in doc.items()
                if k not in ("storages", "tensors", "ops", "inputs", "outputs", "state")}
        return cls(storages, tensors, ops, doc.get("inputs", []), doc.get("outputs", []),
                   doc.get("state", []), meta)

    def to_json(self):
        def enc(v):
            if isinstance(v, Tensor):
                return {"t": v.id}
            if isinstance(v, (list, tuple)):
                return [enc(x) for x in v]
            if isinstance(v, float) and not math.isfinite(v):
                return {"float": "nan" if v != v else ("inf" if v > 0 else "-inf")}
            if isinstance(v, DType):
                return {"dtype": v.name}
            if isinstance(v, Opaque):
                return {v.kind: v.text}
            return v
        doc = dict(self.meta)
        doc.setdefault("version", 1)
        doc["storages"] = [{"id": s.id, "nbytes": s.nbytes, "external": s.external}
                           for s in self.storages.values()]
        doc["tensors"] = [{"id": t.id, "storage": t.storage.id, "offset": t.offset,
                           "shape": list(t.shape), "stride": list(t.stride), "dtype": t.dtype}
                          for t in self.tensors.values()]
        doc["ops"] = [{"op": o.name, "args": enc(o.args),
                       "kwargs": {k: enc(x) for k, x in o.kwargs.items()}, "out": enc(o.out)}
                      for o in self.ops]
        doc["inputs"], doc["outputs"], doc["state"] = self.inputs, self.outputs, self.state
        return doc
