# SPDX-License-Identifier: MIT
"""Building daemon programs over torch CUDA tensors (shared by
gfxgraph.cudagraph and gfxgraph.compile).  Imports torch: only imported
when torch is in use.

Every operand is a contiguous CUDA tensor of dtype f32/f16/bf16; its storage
is registered once (by IPC: gg_client_buffer_register_device) and the tensor
is named by (address, shape, dtype).  Shapes are canonical 2-D: a tensor of
two or more dims becomes [numel / D, D] (D its last dim), a 1-D one stays
[D].  Every op of docs/ops.md works row by row over the last dim, so this is
the same computation, and views of one memory with different leading dims
get the same name.
"""

import torch

from .errors import Error

DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


class Unsupported(Exception):
    """An op (or operand) the daemon cannot run; ``op`` names it."""

    def __init__(self, op, why=""):
        self.op = op
        self.why = why
        super().__init__("%s: %s" % (op, why) if why else op)


def canon_shape(shape):
    shape = [int(d) for d in shape]
    if len(shape) == 0:
        return [1]
    if len(shape) == 1:
        return shape
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return [rows, shape[-1]]


class TensorTable:
    """The tensors of one program spec.

    ``storages`` maps (storage address, nbytes) to a registered Buffer and is
    shared between programs of one client (one registration per storage)."""

    def __init__(self, client, storages, op="?", cpu=False):
        self.cpu = cpu           # cpu backend: CPU tensors in gfxgraph shared memory
        self.client = client
        self.storages = storages
        self.tensors = {}
        self.keys = {}
        self.keep = []           # tensors whose memory the program uses
        self.op = op
        self.dtype = None

    def buffer_of(self, t):
        if self.cpu:
            from . import shm
            seg = shm.find(t.data_ptr(), t.numel() * t.element_size())
            if seg is None:
                raise Unsupported(self.op, "a CPU tensor that is not in gfxgraph shared memory")
            key = (seg.address, seg.size)
            b = self.storages.get(key)
            if b is None or b.id is None:
                try:
                    b = self.client.register_shm_name(seg.name, 0, seg.size, owner=seg)
                except Error as e:
                    raise Unsupported(self.op, "cannot register the tensor's memory: %s" % e)
                self.storages[key] = b
            return b, t.data_ptr() - key[0]
        st = _storage(t)
        key = (st.data_ptr(), st.nbytes())
        b = self.storages.get(key)
        if b is None or b.id is None:
            try:
                b = self.client.register_device_pointer(key[0], key[1], owner=st)
            except Error as e:
                raise Unsupported(self.op, "cannot register the tensor's memory: %s" % e)
            self.storages[key] = b
        return b, t.data_ptr() - key[0]

    def name(self, t, shape=None, batch=False):
        """The program tensor for t (registering its storage if needed).
        shape: the dims to declare (default: canonical 2-D); batch: dim 0 is
        the replay's batch."""
        if not isinstance(t, torch.Tensor):
            raise Unsupported(self.op, "an operand that is not a tensor (%r)" % (t,))
        if t.is_cuda == self.cpu:
            raise Unsupported(self.op, "a %s tensor operand (the daemon runs the %s backend)"
                              % (t.device, "cpu" if self.cpu else "hip"))
        dt = DTYPES.get(t.dtype)
        if dt is None:
            raise Unsupported(self.op, "dtype %s" % t.dtype)
        if self.dtype is not None and dt != self.dtype:
            raise Unsupported(self.op, "mixed dtypes (%s and %s)" % (self.dtype, dt))
        if not t.is_contiguous():
            raise Unsupported(self.op, "a non-contiguous operand (strides %s)" % (t.stride(),))
        if t.numel() == 0:
            raise Unsupported(self.op, "an empty tensor")
        shape = list(shape) if shape is not None else canon_shape(t.shape)
        if len(shape) > 4:
            raise Unsupported(self.op, "more than 4 dims")
        key = (t.data_ptr(), tuple(shape), dt, bool(batch))
        n = self.keys.get(key)
        if n is not None:
            return n
        b, off = self.buffer_of(t)
        n = "t%d" % len(self.tensors)
        self.tensors[n] = {"dtype": dt, "shape": (["batch"] + shape[1:]) if batch else shape,
                           "buffer": b, "offset": off}
        self.keys[key] = n
        self.keep.append(t)
        return n


def _storage(t):
    """t's storage (untyped_storage() from torch 2.0 on, storage() before)."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    return t.storage()


def alloc(shape, dtype, device):
    """An uninitialised tensor the daemon can use: torch.empty on a GPU; on
    the cpu backend a tensor in a new gfxgraph shared-memory object."""
    if device is None or device.type != "cpu":
        return torch.empty(shape, dtype=dtype, device=device)
    from .shm import shared_array
    n = 1
    for d in shape:
        n *= int(d)
    item = torch.empty((), dtype=dtype).element_size()
    raw = shared_array(max(1, n * item), "uint8", torch=True)
    return raw[:n * item].view(dtype).view(*[int(d) for d in shape])


def same_dtype(op, *ts):
    d = {t.dtype for t in ts if isinstance(t, torch.Tensor)}
    if len(d) > 1:
        raise Unsupported(op, "operands of different dtypes %s" % sorted(map(str, d)))


def is_weight_transpose(wt):
    """wt is the [K, N] transpose view of a contiguous [N, K] weight
    (what aten.t / F.linear hand to mm/addmm)."""
    return (wt.dim() == 2 and wt.stride(0) == 1 and wt.stride(1) == wt.shape[0]) or \
        (wt.dim() == 2 and wt.shape[1] == 1 and wt.stride(0) == 1)
