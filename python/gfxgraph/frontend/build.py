# SPDX-License-Identifier: MIT
"""The program under construction: named tensors over the step's storages
and daemon scratch, and the nodes, with the layout work every lowering
needs (contiguous operands, broadcast operands, outputs written in their
own memory order).

Program tensors are contiguous row-major (docs/ops.md), while the step's
tensors carry arbitrary strides.  An operand whose elements are already in
row-major order is named in place; otherwise a ``strided_copy`` gathers it
into a scratch temporary.  A stride-0 dim (an ``expand``) is declared as a
size-1 dim, which the elementwise ops broadcast.  Temporaries are daemon
scratch (``"scratch": true``): memory the program owns, laid out by the
daemon in one arena per program, and dropped by its fusion planner where no
later node reads them.
"""

from .ir import ITEMSIZE, Tensor, Unsupported

MAX_DIMS = 4

# ops whose output may be exactly one of its inputs (docs/ops.md "In place");
# any other op writing memory it reads goes through a temporary
INPLACE_OK = {"copy", "add", "mul", "scale", "gelu", "silu", "silu_mul", "sub", "div",
              "pow", "maximum", "minimum", "neg", "abs", "rsqrt", "sqrt", "exp", "log",
              "tanh", "sin", "cos", "sigmoid", "recip", "bitwise_and", "bitwise_or",
              "bitwise_xor", "bitwise_not"}


def row_major(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def coalesce(shape, strides_list):
    """Merge adjacent dims that every stride list walks as one, drop size-1
    dims.  Returns (shape, [strides]) with at least one dim."""
    dims = [i for i, d in enumerate(shape) if d != 1]
    if not dims:
        return [1], [[0] for _ in strides_list]
    out_shape = [shape[dims[0]]]
    out_st = [[s[dims[0]]] for s in strides_list]
    for i in dims[1:]:
        d = shape[i]
        if all(st[-1] == s[i] * d for st, s in zip(out_st, strides_list)):
            out_shape[-1] *= d
            for st, s in zip(out_st, strides_list):
                st[-1] = s[i]
        else:
            out_shape.append(d)
            for st, s in zip(out_st, strides_list):
                st.append(s[i])
    return out_shape, out_st


def dense_order(t):
    """A permutation of t's dims that makes t row-major contiguous (size-1
    dims placed where they keep the logical order), or None when t's
    elements are not one dense block without overlap."""
    dims = [i for i in range(t.ndim) if t.shape[i] != 1]
    order = sorted(dims, key=lambda i: -t.stride[i])
    want = 1
    for i in reversed(order):
        if t.stride[i] != want:
            return None
        want *= t.shape[i]
    # size-1 dims anywhere: keep them before the dim that follows them
    ones = [i for i in range(t.ndim) if t.shape[i] == 1]
    return ones + order


class Builder:
    """One program spec: ``tensors`` (name -> map with ``storage`` (a
    Storage id, bound to a buffer later) and byte ``offset``, or
    ``scratch``, or ``view``) and ``nodes``."""

    def __init__(self):
        self.tensors = {}
        self.nodes = []
        self.node_src = []       # per node: the aten op it was lowered from
        self._keys = {}
        self.op = None           # the aten Op being lowered (for messages)
        self.storages_used = set()

    # ---- errors -----------------------------------------------------------

    def unsupported(self, why):
        op = self.op
        if op is None:
            return Unsupported("?", why)
        return Unsupported(op.name, "%s; operands %s" % (why, op.describe()))

    # ---- names ------------------------------------------------------------

    def _new(self, spec):
        n = "t%d" % len(self.tensors)
        self.tensors[n] = spec
        return n

    def mem(self, t, shape=None):
        """t (contiguous, or declared with `shape` over its row-major
        elements) named in place in its storage."""
        if t.dtype not in ITEMSIZE:
            raise self.unsupported("dtype %s" % t.dtype)
        shape = [int(d) for d in (shape if shape is not None else (t.shape or (1,)))]
        if len(shape) > MAX_DIMS:
            raise self.unsupported("a %d-dim operand (the daemon takes up to %d)"
                                   % (len(shape), MAX_DIMS))
        if prod(shape) == 0:
            raise self.unsupported("an empty tensor")
        off = t.offset * ITEMSIZE[t.dtype]
        key = (t.storage.id, off, t.dtype, tuple(shape))
        n = self._keys.get(key)
        if n is None:
            n = self._new({"dtype": t.dtype, "shape": shape, "storage": t.storage.id,
                           "offset": off})
            self._keys[key] = n
            self.storages_used.add(t.storage.id)
        return n

    def scratch(self, dtype, shape):
        shape = [int(d) for d in shape] or [1]
        if len(shape) > MAX_DIMS:
            raise self.unsupported("a %d-dim temporary" % len(shape))
        return self._new({"dtype": dtype, "shape": shape, "scratch": True})

    def view(self, name, shape):
        base = self.tensors[name]
        shape = [int(d) for d in shape] or [1]
        if list(base["shape"]) == shape:
            return name
        while "view" in base:
            name = base["view"]
            base = self.tensors[name]
        if list(base["shape"]) == shape:
            return name
        if len(shape) > MAX_DIMS:
            raise self.unsupported("a %d-dim view" % len(shape))
        return self._new({"dtype": base["dtype"], "shape": shape, "view": name})

    def dtype_of(self, name):
        return self.tensors[name]["dtype"]

    def shape_of(self, name):
        return list(self.tensors[name]["shape"])

    def node(self, op, ins, out, attrs=None):
        n = {"op": op, "inputs": list(ins), "outputs": [out]}
        if attrs:
            n["attrs"] = dict(attrs)
        self.nodes.append(n)
        self.node_src.append(self.op.describe() if self.op is not None else "?")
        return out

    # ---- operands -----------------------------------------------------------

    def gather(self, t, shape, strides, dtype=None):
        """A scratch tensor holding the elements of the view (t's storage
        and offset, `shape`, `strides`) in row-major order, declared
        `shape` (collapsed to at most 4 dims where the view allows it)."""
        cshape, (cst,) = coalesce(list(shape), [list(strides)])
        if len(cshape) > MAX_DIMS:
            raise self.unsupported("a view of %s with strides %s that does not collapse to "
                                   "%d dims" % (list(shape), list(strides), MAX_DIMS))
        n = sum((d - 1) * s for d, s in zip(cshape, cst)) + 1
        flat = Tensor(None, t.storage, t.offset, (n,), (1,), t.dtype)
        src = self.mem(flat, [n])
        tmp = self.scratch(t.dtype, cshape)
        attrs = {"s%d" % i: s for i, s in enumerate(cst)}
        self.node("strided_copy", [src], tmp, attrs)
        out = self.view(tmp, list(shape)) if len(shape) <= MAX_DIMS else tmp
        return self.cast(out, dtype) if dtype else out

    def contig(self, t, shape=None, dtype=None):
        """A program tensor with t's elements in row-major order of t's own
        shape, declared `shape` (default t's shape; same element count),
        converted to `dtype` if given."""
        shape = list(shape) if shape is not None else list(t.shape or (1,))
        if prod(shape) != t.numel:
            raise self.unsupported("internal: %s declared as %s" % (list(t.shape), shape))
        if t.is_contiguous():
            name = self.mem(t, shape) if len(shape) <= MAX_DIMS else None
            if name is None:
                cshape, _ = coalesce(list(t.shape), [list(t.stride)])
                raise self.unsupported("a %d-dim operand %s" % (len(shape), cshape))
        else:
            name = self.gather(t, t.shape or (1,), t.stride or (1,))
            name = self.view(name, shape)
        return self.cast(name, dtype) if dtype else name

    def cast(self, name, dtype):
        if dtype is None or self.dtype_of(name) == dtype:
            return name
        tmp = self.scratch(dtype, self.shape_of(name))
        return self.node("cast", [name], tmp)

    def bcast(self, t, ndim=None, dtype=None):
        """t as a broadcasting operand: declared with t's dims (right-aligned
        to `ndim` dims by leading 1s), a stride-0 dim declared as 1."""
        shape = list(t.shape) or [1]
        stride = list(t.stride) or [0]
        if ndim is not None and ndim > len(shape):
            shape = [1] * (ndim - len(shape)) + shape
            stride = [0] * (ndim - len(stride)) + stride
        dshape = [d if s != 0 else 1 for d, s in zip(shape, stride)]
        dstride = [s if d != 1 else 0 for d, s in zip(dshape, stride)]
        v = Tensor(None, t.storage, t.offset, dshape, dstride, t.dtype)
        if v.is_contiguous():
            name = self.mem(v, dshape)
        else:
            name = self.gather(v, dshape, dstride)
        return self.cast(name, dtype) if dtype else name

    # ---- outputs ------------------------------------------------------------

    def out_begin(self, t, shape=None, reads=(), op=None):
        """The program tensor a node writes for the step's tensor t (declared
        `shape` over t's row-major elements).  Where t is not contiguous, or
        overlaps what the node reads (other than as an exact in-place alias
        the op allows), the node writes a temporary and out_end moves it."""
        shape = list(shape) if shape is not None else list(t.shape or (1,))
        direct = t.is_contiguous() and len(shape) <= MAX_DIMS
        if direct:
            for r in reads:
                if isinstance(r, Tensor) and r.overlaps(t):
                    if not (op in INPLACE_OK and r.same_memory(t) and r.is_contiguous()):
                        direct = False
        if direct:
            return self.mem(t, shape), None
        if t.dtype not in ITEMSIZE:
            raise self.unsupported("dtype %s" % t.dtype)
        tmp = self.scratch(t.dtype, shape)
        return tmp, (tmp, t)

    def out_end(self, pending):
        if pending is None:
            return
        tmp, t = pending
        self.store(tmp, t)

    def store(self, name, t):
        """Write program tensor `name` (t's elements in t's logical
        row-major order) into the step's tensor t, whatever t's strides."""
        if t.is_contiguous():
            dst = self.mem(t, self.shape_of(name) if prod(self.shape_of(name)) == t.numel
                           else None)
            self.node("copy", [name], dst)
            return
        order = dense_order(t)
        if order is None:
            raise self.unsupported("writes %s, a view that is not one dense block (the daemon "
                                   "writes contiguous outputs)" % t.describe())
        # the destination in its memory order is contiguous; read the source
        # (row-major in logical order) with its strides permuted alike
        src_st = row_major(t.shape)
        pshape = [t.shape[i] for i in order]
        pst = [src_st[i] for i in order]
        cshape, (cst,) = coalesce(pshape, [pst])
        if len(cshape) > MAX_DIMS:
            raise self.unsupported("writes %s: more than %d dims after collapsing"
                                   % (t.describe(), MAX_DIMS))
        flat = self.view(name, [t.numel])
        dst = self.mem(Tensor(None, t.storage, min(t.extent()), cshape, row_major(cshape),
                              t.dtype), cshape)
        self.node("strided_copy", [flat], dst, {"s%d" % i: s for i, s in enumerate(cst)})
