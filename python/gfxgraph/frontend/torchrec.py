# SPDX-License-Identifier: MIT
"""The live side of the frontend: the (func, args, kwargs, out) records of
a TorchDispatchMode during a capture -> the IR (the trace format's
structure, in memory).  Imports torch.

Storage identity is the storage's data pointer: two tensors over one
allocation are views of one storage.  A storage is external when the
capture first meets it as an operand (weights, caches, static inputs: it
existed before the capture), internal when an op's fresh result is the
first to use it (the graph's pool).  A CPU 0-dim tensor operand (a wrapped
Python number) becomes the number.
"""

import weakref

import torch

from .ir import Graph, Op, Opaque, DType, Storage, Tensor, TORCH_NAMES

_DTYPES = {getattr(torch, k): v for k, v in TORCH_NAMES.items()}


def dtype_name(dt):
    return _DTYPES.get(dt, str(dt).replace("torch.", ""))


class _Conv:
    def __init__(self, device_type):
        self.device_type = device_type
        self.storages = {}        # data_ptr -> Storage
        self.objs = {}            # Storage id -> torch UntypedStorage (kept alive)
        self.tensors = {}         # Tensor id -> Tensor
        self.by_obj = {}          # id(torch tensor) -> Tensor
        self.weak = []            # (Tensor id, weakref to the torch tensor)

    def storage_of(self, t, fresh):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        s = self.storages.get(ptr)
        if s is None or s.nbytes < st.nbytes():
            sid = len(self.objs)
            s = Storage(sid, st.nbytes(), external=not fresh)
            self.storages[ptr] = s
            self.objs[sid] = st
        return s

    def tensor(self, t, fresh):
        x = self.by_obj.get(id(t))
        if x is not None:
            return x
        s = self.storage_of(t, fresh)
        x = Tensor(len(self.tensors), s, t.storage_offset(), tuple(t.shape), tuple(t.stride()),
                   dtype_name(t.dtype))
        self.tensors[x.id] = x
        self.by_obj[id(t)] = x
        try:
            self.weak.append((x.id, weakref.ref(t)))
        except TypeError:
            pass
        return x

    def value(self, v, fresh=False):
        if isinstance(v, torch.Tensor):
            if v.device.type == "cpu" and self.device_type != "cpu" and v.dim() == 0:
                return v.item()
            return self.tensor(v, fresh)
        if isinstance(v, (list, tuple)):
            return [self.value(x, fresh) for x in v]
        if isinstance(v, torch.dtype):
            return DType(dtype_name(v))
        if isinstance(v, torch.device):
            return Opaque("device", str(v))
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if type(v).__name__ == "SymInt":
            return int(v)
        if type(v).__name__ == "SymFloat":
            return float(v)
        return Opaque("repr", repr(v))


def graph_of(records, device_type="cuda"):
    """(Graph, {storage id: torch storage}, [(tensor id, weakref)]) for the
    records.  The graph's outputs are left empty: the caller fills them
    with the tensors still alive once the records are dropped (what the
    user holds), see live_outputs."""
    c = _Conv(device_type)
    ops = []
    for i, (func, args, kwargs, out) in enumerate(records):
        a = c.value(list(args))
        kw = {k: c.value(v) for k, v in (kwargs or {}).items()}
        o = c.value(out, fresh=True)
        ops.append(Op(str(func), a, kw, o, i))
    g = Graph({s.id: s for s in c.storages.values()}, c.tensors, ops)
    return g, c.objs, c.weak


def live_outputs(graph, weak):
    """The internal tensors whose torch tensor is still alive: what the
    user may read after a replay."""
    return [tid for tid, w in weak
            if w() is not None and not graph.tensors[tid].storage.external]


def check_devices(records, device_type):
    """The first operand on another device than the daemon's, or None."""
    for func, args, kwargs, out in records:
        for v in list(args) + list((kwargs or {}).values()) + [out]:
            for t in (v if isinstance(v, (list, tuple)) else [v]):
                if isinstance(t, torch.Tensor) and t.device.type != device_type and \
                        not (t.device.type == "cpu" and t.dim() == 0):
                    return str(func), t
    return None
