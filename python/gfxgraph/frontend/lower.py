# SPDX-License-Identifier: MIT
"""Lowering: each aten op of the step to daemon nodes (docs/ops.md).

``LOWER`` is the one table of op identity on the Python side: aten op name
(as torch prints it, ``aten.add.Tensor``) -> a function (builder, op) that
emits the op's nodes.  A new aten op is one entry.  View ops are in
``VIEWS``: their result is a tensor over the same memory, which the IR
already describes by its own strides, so they emit nothing.
"""

from .build import (MAX_DIMS, INPLACE_OK, coalesce, dense_order, prod, row_major)
from .ir import FLOATING, INTEGRAL, DType, Tensor, Unsupported

LOWER = {}

# ops that make no device work: views of their input, metadata, allocation
VIEWS = {
    "aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
    "aten.t.default", "aten.transpose.int", "aten.detach.default", "aten.alias.default",
    "aten.expand.default", "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.default",
    "aten.squeeze.dims", "aten.permute.default", "aten.slice.Tensor", "aten.select.int",
    "aten.as_strided.default", "aten.empty.memory_format", "aten.empty_strided.default",
    "aten.empty_like.default", "aten.empty.default", "aten.new_empty.default",
    "aten.new_empty_strided.default", "aten.lift_fresh.default",
    "aten.split.Tensor", "aten.split_with_sizes.default", "aten.unbind.int",
    "aten.chunk.default", "aten.flatten.using_ints", "aten.view_as.default",
    "aten._reshape_alias.default", "aten.sym_size.int", "aten.sym_stride.int",
    "aten.sym_numel.default", "aten.sym_storage_offset.default", "aten.is_same_size.default",
    "aten.record_stream.default", "aten.unfold.default", "aten.expand_as.default",
    "aten.narrow.default", "aten.movedim.int", "aten.swapaxes.default",
    "aten._assert_async.default", "aten._assert_async.msg",
    "aten._assert_tensor_metadata.default", "aten.resolve_conj.default",
    "aten.resolve_neg.default", "aten.dim.default", "aten.size.int", "aten.stride.int",
    "aten.set_.source_Tensor",
}


def register(*names):
    def deco(fn):
        for n in names:
            LOWER[n] = fn
        return fn
    return deco


def lower_op(b, op):
    """Emit op's nodes into builder b; Unsupported when the table has no
    entry or the entry cannot express this use."""
    b.op = op
    if op.name in VIEWS:
        return
    fn = LOWER.get(op.name)
    if fn is None:
        raise Unsupported(op.name, "no daemon lowering for this op; operands %s"
                          % op.describe())
    fn(b, op)


# ---- dtypes -------------------------------------------------------------------

_RANK = {"bool": 0, "i32": 1, "i64": 2, "bf16": 3, "f16": 3, "f32": 4}


def _kind(dt):
    return 0 if dt == "bool" else (1 if dt in INTEGRAL else 2)


def promote(a, b):
    if a == b:
        return a
    if {a, b} == {"f16", "bf16"}:
        return "f32"
    return a if _RANK[a] >= _RANK[b] else b


def result_type(operands):
    """torch's type promotion over tensors and Python scalars: tensors with
    dims decide, a 0-dim tensor or a scalar only when of a higher kind."""
    dims = [x.dtype for x in operands if isinstance(x, Tensor) and x.ndim > 0]
    zero = [x.dtype for x in operands if isinstance(x, Tensor) and x.ndim == 0]
    res = None
    for d in dims:
        res = d if res is None else promote(res, d)
    for d in zero:
        if res is None:
            res = d
        elif _kind(d) > _kind(res):
            res = d if _kind(d) == 2 else promote(res, d)
    if res is None:
        res = "f32"
    for s in operands:
        if isinstance(s, bool) or isinstance(s, Tensor):
            continue
        if isinstance(s, float) and _kind(res) < 2:
            res = "f32"
        elif isinstance(s, int) and res == "bool":
            res = "i64"
    return res


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, Tensor)


def _scalar(b, x, dtype):
    v = float(x)
    if dtype in INTEGRAL + ("bool",) and v != int(v):
        raise b.unsupported("a non-integer scalar %r for a %s operation" % (x, dtype))
    return v


# ---- the elementwise core ------------------------------------------------------

def elementwise(b, dop, ins, out, attrs=None, compute=None, broadcast=True):
    """Emit daemon op `dop` over tensor inputs `ins` writing the step's
    tensor `out` (elementwise, broadcasting).  The dims are taken in out's
    memory order and collapsed, so a transposed or permuted output needs no
    copy; an input that is not row-major in that order is gathered; inputs
    are cast to `compute` (default out's dtype; a list: one dtype per
    input, as where's bool condition beside its values)."""
    compute = compute or out.dtype
    computes = list(compute) if isinstance(compute, (list, tuple)) else [compute] * len(ins)
    order = dense_order(out)
    if order is None:
        return _elementwise_via_temp(b, dop, ins, out, attrs, compute, broadcast)
    nd = out.ndim
    shapes, strides = [], []
    for t in ins:
        sh = [1] * (nd - t.ndim) + list(t.shape)
        st = [0] * (nd - t.ndim) + list(t.stride)
        if len(sh) > nd:
            raise b.unsupported("an input with more dims than the output")
        st = [0 if d == 1 else s for d, s in zip(sh, st)]
        for d, od in zip(sh, out.shape):
            if d not in (1, od):
                raise b.unsupported("input dims %s do not broadcast to %s" % (sh, out.shape))
        shapes.append(sh)
        strides.append(st)
    oshape = [out.shape[i] for i in order]
    ost = [out.stride[i] if out.shape[i] != 1 else 0 for i in order]
    pst = [[st[i] for i in order] for st in strides]
    if _as_declared(out, ins, strides):
        # out's own shape, as the row ops and linear that produce and read
        # it declare it: the fusion planner follows a value by its program
        # tensor, so a collapsed [D] beside a norm's [1, D] ends its chains.
        # Inputs all of out's shape take the shape their producer wrote
        # (a linear's [1, 1, N] read through a [1, N] view).
        ws = None
        if all(tuple(t.shape) == tuple(out.shape) and t.is_contiguous() for t in ins):
            ws = next((w for w in (written_shape(b, t) for t in ins) if w), None)
        if ws is not None:
            cshape, cst = ws, [list(row_major(ws))] * (1 + len(ins))
        else:
            cshape, cst = list(out.shape), [list(out.stride)] + [list(st) for st in strides]
    else:
        cshape, cst = coalesce(oshape, [ost] + pst)
    if len(cshape) > MAX_DIMS:
        raise b.unsupported("%d dims after collapsing (the daemon takes up to %d)"
                            % (len(cshape), MAX_DIMS))
    # the daemon's output is exactly the broadcast of its inputs: a dim that
    # every input broadcasts (an expand of all of them) is materialized in
    # the first
    spread = any(d != 1 and all(st[j] == 0 for st in cst[1:]) for j, d in enumerate(cshape))
    names = []
    for i, (t, st, compute) in enumerate(zip(ins, cst[1:], computes)):
        dshape = [d if s != 0 else 1 for d, s in zip(cshape, st)]
        if (not broadcast or (spread and i == 0)) and dshape != cshape:
            names.append(b.gather(t, cshape, st, compute))
            continue
        v = Tensor(None, t.storage, t.offset, dshape, [s if d != 1 else 0
                                                       for d, s in zip(dshape, st)], t.dtype)
        # leading 1s say nothing under right-aligned broadcasting; without
        # them a row vector is the [D] every add/mul takes
        k = 0
        while k < len(dshape) - 1 and dshape[k] == 1 and (dshape != cshape or
                                                           tuple(t.shape) != tuple(out.shape)):
            k += 1
        decl = dshape[k:]
        names.append(b.mem(v, decl) if v.is_contiguous() else
                     b.view(b.gather(v, dshape, v.stride), decl))
        names[-1] = b.cast(names[-1], compute)
    ov = Tensor(None, out.storage, out.offset, cshape, row_major(cshape), out.dtype)
    oname = b.mem(ov, cshape)
    clash = False
    for t, n in zip(ins, names):
        if t.overlaps(out):
            same = n == oname and dop in INPLACE_OK
            if not same:
                clash = True
    if clash:
        tmp = b.scratch(out.dtype, cshape)
        b.node(dop, names, tmp, attrs)
        b.node("copy", [tmp], oname)
    else:
        b.node(dop, names, oname, attrs)


def written_shape(b, t):
    """The shape the last node writing t's memory declared for it, when that
    output is exactly t's elements (t contiguous, same count and last dim)
    under another shape, within the daemon's dims; else None.  A view
    (reshape) of a node's output is then read as the tensor the node wrote,
    which is what the fusion planner follows."""
    if not t.is_contiguous() or t.storage is None or t.itemsize == 0:
        return None
    size = t.itemsize
    lo = t.offset * size
    hi = lo + t.numel * size
    last = t.shape[-1] if t.ndim else 1
    for n in reversed(b.nodes):
        for o in n["outputs"]:
            spec = b.tensors[o]
            if spec.get("storage") != t.storage.id:
                continue
            olo = spec["offset"]
            ohi = olo + prod(spec["shape"]) * size
            if ohi <= lo or hi <= olo:
                continue
            if olo == lo and ohi == hi and spec["dtype"] == t.dtype and \
                    spec["shape"][-1] == last and list(spec["shape"]) != list(t.shape or [1]):
                return list(spec["shape"])
            return None
    return None


def _as_declared(out, ins, strides):
    """Whether out can be declared with its own shape: contiguous, within the
    daemon's dims, and every input (strides broadcast to out's dims) named in
    place, row-major over the dims it does not broadcast."""
    if not 1 <= out.ndim <= MAX_DIMS or not out.is_contiguous():
        return False
    for st in strides:
        dims = [(d, s) for d, s in zip(out.shape, st) if s != 0]
        want = 1
        for d, s in reversed(dims):
            if s != want:
                return False
            want *= d
    return True


def _elementwise_via_temp(b, dop, ins, out, attrs, compute, broadcast):
    """out is not one dense block (a strided slice of a larger tensor):
    compute into a contiguous temporary, then store it."""
    names = []
    computes = list(compute) if isinstance(compute, (list, tuple)) else [compute] * len(ins)
    for t, compute in zip(ins, computes):
        names.append(b.bcast(t, out.ndim, compute) if broadcast else
                     b.contig(_expand_to(t, out.shape), dtype=compute))
    _cover(b, ins, names, out.shape, computes)
    tmp = b.scratch(out.dtype, list(out.shape) or [1])
    b.node(dop, names, tmp, attrs)
    b.store(tmp, out)


def _cover(b, ins, names, shape, computes):
    """Where the declared operands `names` (of the tensors `ins`) do not
    broadcast to all of `shape` (every one of them stride 0 in some dim),
    the first is materialized at `shape`: the daemon's output is exactly
    its inputs' broadcast shape."""
    shape = list(shape) or [1]
    for j in range(1, len(shape) + 1):
        if shape[-j] != 1 and all(len(b.shape_of(n)) < j or b.shape_of(n)[-j] == 1
                                  for n in names):
            names[0] = b.contig(_expand_to(ins[0], shape), dtype=computes[0])
            return


def _expand_to(t, shape):
    nd = len(shape)
    sh = [1] * (nd - t.ndim) + list(t.shape)
    st = [0] * (nd - t.ndim) + list(t.stride)
    st = [0 if d == 1 else s for d, s in zip(sh, st)]
    return Tensor(None, t.storage, t.offset, shape, st, t.dtype)


def _target(op):
    """The tensor an op writes: its first argument for an in-place op."""
    if op.inplace:
        return op.args[0]
    o = op.out
    return o[0] if isinstance(o, (list, tuple)) else o


# ---- arithmetic ---------------------------------------------------------------

def _binary(b, op, dop, x, y, alpha=1, reverse=False):
    out = _target(op)
    if not isinstance(out, Tensor):
        raise b.unsupported("no tensor result")
    compute = out.dtype
    if dop in ("add", "sub") and alpha != 1:
        if isinstance(y, Tensor):
            if compute not in FLOATING:
                raise b.unsupported("alpha on an integer operation")
            tmp = _scaled(b, y, alpha, compute)
            return _binary_names(b, op, dop, x, tmp, out, compute)
        y = y * alpha
    if isinstance(x, Tensor) and isinstance(y, Tensor):
        elementwise(b, dop, [x, y], out, compute=compute)
    elif isinstance(x, Tensor) and _num(y):
        attrs = {"scalar": _scalar(b, y, compute)}
        if reverse:
            attrs["reverse"] = 1
        if dop in ("mul", "div") and not reverse and compute in FLOATING and \
                (dop == "mul" or attrs["scalar"] != 0):
            # x * s and x / s as scale (x / s within an ulp of x * (1/s)),
            # an op the daemon's fusion planner folds into its neighbours
            s = attrs["scalar"] if dop == "mul" else 1.0 / attrs["scalar"]
            elementwise(b, "scale", [x], out, {"scale": s}, compute=compute, broadcast=False)
        else:
            elementwise(b, dop, [x], out, attrs, compute=compute)
    elif _num(x) and isinstance(y, Tensor):
        if dop in ("add", "mul"):
            return _binary(b, op, dop, y, x)
        attrs = {"scalar": _scalar(b, x, compute), "reverse": 1}
        elementwise(b, dop, [y], out, attrs, compute=compute)
    else:
        raise b.unsupported("operands %r, %r" % (type(x).__name__, type(y).__name__))


def _scaled(b, y, alpha, dtype):
    name = b.bcast(y, dtype=dtype)
    tmp = b.scratch(dtype, b.shape_of(name))
    b.node("scale", [name], tmp, {"scale": float(alpha)})
    return (tmp, y)


def _binary_names(b, op, dop, x, ytmp, out, compute):
    # y already in a temporary (alpha applied): lower x + tmp with tmp as a
    # broadcasting operand declared by its own dims
    tmp, y = ytmp
    xs = b.bcast(x, out.ndim, compute)
    ys = b.view(tmp, [1] * (out.ndim - len(b.shape_of(tmp))) + b.shape_of(tmp))
    o, pend = b.out_begin(out, reads=[x, y], op=dop)
    b.node(dop, [xs, ys], o)
    b.out_end(pend)


def _arith(dop):
    def fn(b, op):
        x, y = op.arg(0, "self"), op.arg(1, "other")
        _binary(b, op, dop, x, y, op.arg(2, "alpha", 1))
    return fn


for _n in ("add", "sub", "mul", "div", "maximum", "minimum"):
    for _ov in ("Tensor", "Scalar"):
        LOWER["aten.%s.%s" % (_n, _ov)] = _arith(_n)
        LOWER["aten.%s_.%s" % (_n, _ov)] = _arith(_n)
    LOWER["aten.%s.default" % _n] = _arith(_n)
LOWER["aten.true_divide.Tensor"] = _arith("div")


@register("aten.div.Tensor_mode", "aten.div_.Tensor_mode")
def _div_mode(b, op):
    if op.arg(2, "rounding_mode") is not None:
        raise b.unsupported("rounding_mode %r" % op.arg(2, "rounding_mode"))
    _binary(b, op, "div", op.args[0], op.args[1])


@register("aten.rsub.Scalar", "aten.rsub.Tensor")
def _rsub(b, op):
    x, y, alpha = op.args[0], op.arg(1, "other"), op.arg(2, "alpha", 1)
    if alpha != 1:
        raise b.unsupported("rsub with alpha %r" % alpha)
    _binary(b, op, "sub", y, x) if isinstance(y, Tensor) else \
        _binary(b, op, "sub", x, y, reverse=True)


@register("aten.pow.Tensor_Scalar", "aten.pow_.Scalar", "aten.pow.Tensor_Tensor",
          "aten.pow_.Tensor")
def _pow(b, op):
    x, e = op.args[0], op.arg(1, "exponent")
    out = _target(op)
    if _num(e) and float(e) == 1.0:
        return _copy_into(b, x, out)
    if _num(e) and float(e) == 2.0 and out.dtype in FLOATING:
        # x*x: exact in f32 like powf(x, 2), and the daemon's mul broadcasts
        # and fuses where pow may not
        return elementwise(b, "mul", [x, x], out)
    _binary(b, op, "pow", x, e)


@register("aten.pow.Scalar")
def _pow_scalar(b, op):
    _binary(b, op, "pow", op.args[0], op.args[1])


@register("aten.clamp.default", "aten.clamp_.default", "aten.clamp_min.default",
          "aten.clamp_max.default")
def _clamp(b, op):
    x, out = op.args[0], _target(op)
    if op.base.startswith("clamp_min"):
        lo, hi = op.args[1], None
    elif op.base.startswith("clamp_max"):
        lo, hi = None, op.args[1]
    else:
        lo, hi = op.arg(1, "min"), op.arg(2, "max")
    steps = [(k, v) for k, v in (("maximum", lo), ("minimum", hi)) if v is not None]
    if not steps or not all(_num(v) for _, v in steps):
        raise b.unsupported("clamp bounds %r, %r" % (lo, hi))
    if len(steps) == 1:
        return elementwise(b, steps[0][0], [x], out,
                           {"scalar": _scalar(b, steps[0][1], out.dtype)})
    xs = b.contig(x, dtype=out.dtype)
    tmp = b.scratch(out.dtype, b.shape_of(xs))
    b.node("maximum", [xs], tmp, {"scalar": _scalar(b, lo, out.dtype)})
    o, pend = b.out_begin(out, b.shape_of(xs), reads=[x], op="minimum")
    b.node("minimum", [tmp], o, {"scalar": _scalar(b, hi, out.dtype)})
    b.out_end(pend)


@register("aten.relu.default", "aten.relu_.default")
def _relu(b, op):
    elementwise(b, "maximum", [op.args[0]], _target(op), {"scalar": 0.0})


# ---- comparisons, logic, where --------------------------------------------------

def _compare(dop):
    def fn(b, op):
        x, y = op.args[0], op.arg(1, "other")
        out = _target(op)
        compute = result_type([x, y])
        if isinstance(y, Tensor):
            elementwise(b, dop, [x, y], out, compute=compute)
        else:
            elementwise(b, dop, [x], out, {"scalar": _scalar(b, y, compute)}, compute=compute)
    return fn


for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    for _ov in ("Tensor", "Scalar"):
        LOWER["aten.%s.%s" % (_n, _ov)] = _compare(_n)
        LOWER["aten.%s_.%s" % (_n, _ov)] = _compare(_n)


def _bitwise(dop):
    def fn(b, op):
        x, y, out = op.args[0], op.arg(1, "other"), _target(op)
        if isinstance(y, Tensor):
            elementwise(b, dop, [x, y], out)
        else:
            elementwise(b, dop, [x], out, {"scalar": _scalar(b, y, out.dtype)})
    return fn


for _n in ("and", "or", "xor"):
    for _ov in ("Tensor", "Scalar"):
        LOWER["aten.bitwise_%s.%s" % (_n, _ov)] = _bitwise("bitwise_" + _n)
        LOWER["aten.bitwise_%s_.%s" % (_n, _ov)] = _bitwise("bitwise_" + _n)
    LOWER["aten.logical_%s.default" % _n] = _bitwise("bitwise_" + _n)
    LOWER["aten.__%s__.Tensor" % _n] = _bitwise("bitwise_" + _n)


@register("aten.bitwise_not.default", "aten.logical_not.default")
def _not(b, op):
    x, out = op.args[0], _target(op)
    if op.base == "logical_not" and x.dtype != "bool":
        return elementwise(b, "eq", [x], out, {"scalar": 0.0}, compute=x.dtype)
    elementwise(b, "bitwise_not", [x], out)


def _const_operand(b, v, dtype):
    """A one-element scratch tensor holding v (for a where's scalar)."""
    tmp = b.scratch(dtype, [1])
    b.node("fill", [], tmp, {"value": _scalar(b, v, dtype)})
    return Tensor(None, None, 0, (), (), dtype), tmp


def _where(b, cond, x, y, out):
    dt = out.dtype
    ins = [cond]
    consts = {}
    for v in (x, y):
        if isinstance(v, Tensor):
            ins.append(v)
        else:
            fake, name = _const_operand(b, v, dt)
            consts[id(fake)] = name
            ins.append(fake)
    if not consts:
        if cond.dtype != "bool":
            raise b.unsupported("a %s condition" % cond.dtype)
        return elementwise(b, "where", ins, out, compute=["bool", dt, dt])
    # scalars: every operand declared broadcasting in logical order
    names = []
    for t in ins:
        if id(t) in consts:
            names.append(b.view(consts[id(t)], [1] * max(1, out.ndim)))
        else:
            names.append(b.bcast(t, max(1, out.ndim), "bool" if t is cond else dt))
    _cover(b, ins, names, out.shape, ["bool", dt, dt])
    o, pend = b.out_begin(out, reads=[t for t in ins if id(t) not in consts], op="where")
    b.node("where", names, o)
    b.out_end(pend)


@register("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf",
          "aten.where.Scalar")
def _where_op(b, op):
    _where(b, op.args[0], op.args[1], op.args[2], _target(op))


@register("aten.masked_fill.Scalar", "aten.masked_fill_.Scalar", "aten.masked_fill.Tensor",
          "aten.masked_fill_.Tensor")
def _masked_fill(b, op):
    x, mask, v = op.args[0], op.args[1], op.args[2]
    _where(b, mask, v, x, _target(op))


# ---- unary ----------------------------------------------------------------------

def _unary(dop, attrs_of=None, floating=True):
    def fn(b, op):
        x, out = op.args[0], _target(op)
        compute = out.dtype
        if floating and compute not in FLOATING:
            raise b.unsupported("%s of %s" % (dop, compute))
        elementwise(b, dop, [x], out, attrs_of(op) if attrs_of else None, compute=compute,
                    broadcast=False)
    return fn


for _a, _d in (("neg", "neg"), ("abs", "abs"), ("rsqrt", "rsqrt"), ("sqrt", "sqrt"),
               ("exp", "exp"), ("log", "log"), ("tanh", "tanh"), ("sin", "sin"),
               ("cos", "cos"), ("sigmoid", "sigmoid"), ("reciprocal", "recip"),
               ("silu", "silu")):
    LOWER["aten.%s.default" % _a] = _unary(_d, floating=_a not in ("neg", "abs"))
    LOWER["aten.%s_.default" % _a] = LOWER["aten.%s.default" % _a]

LOWER["aten.gelu.default"] = LOWER["aten.gelu_.default"] = _unary(
    "gelu", lambda op: {"approximate": op.arg(1, "approximate", "none")})


# ---- copies and conversions -------------------------------------------------

def _copy_into(b, src, dst):
    """dst = src (broadcasting src, converting its dtype)."""
    if src.dtype != dst.dtype:
        return elementwise(b, "cast", [src], dst, compute=src.dtype, broadcast=False)
    if src.same_memory(dst):
        return
    order = dense_order(dst)
    if order is not None and not src.overlaps(dst):
        # one strided_copy reads src in dst's memory order
        sh = [1] * (dst.ndim - src.ndim) + list(src.shape)
        st = [0] * (dst.ndim - src.ndim) + list(src.stride)
        st = [0 if d == 1 else s for d, s in zip(sh, st)]
        oshape = [dst.shape[i] for i in order]
        ost = [dst.stride[i] if dst.shape[i] != 1 else 0 for i in order]
        cshape, (cost, cst) = coalesce(oshape, [ost, [st[i] for i in order]])
        if len(cshape) <= MAX_DIMS:
            dname = b.mem(Tensor(None, dst.storage, dst.offset, cshape, row_major(cshape),
                                 dst.dtype), cshape)
            if all(s == r for s, r in zip(cst, row_major(cshape))):
                b.node("copy", [b.mem(Tensor(None, src.storage, src.offset, cshape,
                                             row_major(cshape), src.dtype), cshape)], dname)
                return
            n = sum((d - 1) * s for d, s in zip(cshape, cst)) + 1
            flat = b.mem(Tensor(None, src.storage, src.offset, (n,), (1,), src.dtype), [n])
            b.node("strided_copy", [flat], dname, {"s%d" % i: s for i, s in enumerate(cst)})
            return
    name = b.contig(_expand_to(src, dst.shape)) if dst.ndim else b.contig(src)
    b.store(name, dst)


@register("aten.copy_.default", "aten.copy.default")
def _copy_(b, op):
    dst, src = op.args[0], op.args[1]
    out = _target(op) if op.inplace else op.out
    if not op.inplace:
        _copy_into(b, dst, out)
    _copy_into(b, src, out)


@register("aten.clone.default", "aten.contiguous.default", "aten.lift_fresh_copy.default",
          "aten.alias_copy.default", "aten.view_copy.default", "aten._unsafe_view_copy.default")
def _clone(b, op):
    x, out = op.args[0], op.out
    if x.numel != out.numel:
        raise b.unsupported("a copy that changes the element count")
    if tuple(x.shape) != tuple(out.shape):
        # *_copy of a reshape: out's row-major elements are x's
        name = b.contig(x, list(out.shape) or [1])
        return b.store(name, out)
    _copy_into(b, x, out)


@register("aten._to_copy.default", "aten.to.dtype", "aten._to_dtype.default")
def _to_copy(b, op):
    _copy_into(b, op.args[0], op.out)


# ---- constants ------------------------------------------------------------------

def _fill(b, out, value):
    v = _scalar(b, value, out.dtype) if not isinstance(value, bool) else float(value)
    order = dense_order(out)
    if order is None:
        tmp = b.scratch(out.dtype, list(out.shape) or [1])
        b.node("fill", [], tmp, {"value": v})
        return b.store(tmp, out)
    # layout does not matter to a fill: the block as one flat run
    lo = min(out.extent())
    b.node("fill", [], b.mem(Tensor(None, out.storage, lo, (out.numel,), (1,), out.dtype),
                             [out.numel]), {"value": v})


@register("aten.fill.Scalar", "aten.fill_.Scalar", "aten.full.default", "aten.full_like.default",
          "aten.new_full.default")
def _fill_op(b, op):
    value = op.args[-1] if op.base in ("fill", "fill_") else op.arg(
        2 if op.base == "new_full" else 1, "fill_value")
    if isinstance(value, Tensor):
        raise b.unsupported("a fill from a tensor")
    _fill(b, _target(op), value)


@register("aten.fill.Tensor", "aten.fill_.Tensor")
def _fill_tensor(b, op):
    _copy_into(b, op.args[1], _target(op))


@register("aten.zero_.default", "aten.zeros.default", "aten.zeros_like.default",
          "aten.new_zeros.default")
def _zeros(b, op):
    _fill(b, _target(op), 0)


@register("aten.ones.default", "aten.ones_like.default", "aten.new_ones.default")
def _ones(b, op):
    _fill(b, _target(op), 1)


@register("aten.scalar_tensor.default")
def _scalar_tensor(b, op):
    _fill(b, op.out, op.args[0])


@register("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def _arange(b, op):
    out = op.out
    nums = [a for a in op.args if _num(a)]
    if op.name.endswith("default"):
        start, step = 0, 1
    elif op.name.endswith("start"):
        start, step = nums[0], 1
    else:
        start, step = nums[0], op.arg(2, "step", 1)
    if out.ndim != 1:
        raise b.unsupported("arange of %d dims" % out.ndim)
    attrs = {"start": float(start), "step": float(step)}
    if out.stride[0] == 1 or out.shape[0] == 1:
        b.node("arange", [], b.mem(out, [out.shape[0]]), attrs)
    else:
        tmp = b.scratch(out.dtype, [out.shape[0]])
        b.node("arange", [], tmp, attrs)
        b.store(tmp, out)


# ---- reductions -------------------------------------------------------------------

def _reduce(dop):
    def fn(b, op):
        x = op.args[0]
        dims = op.arg(1, "dim")
        dtype = op.kwargs.get("dtype")
        out = op.out
        if dims is None or dims == []:
            dims = list(range(x.ndim))
        if isinstance(dims, int):
            dims = [dims]
        dims = sorted(set(d % max(1, x.ndim) for d in dims))
        if dtype is not None and not isinstance(dtype, DType):
            raise b.unsupported("dtype %r" % dtype)
        compute = out.dtype
        rest = [i for i in range(x.ndim) if i not in dims]
        # the reduced dims moved last, as one row per output element
        perm = rest + dims
        pshape = [x.shape[i] for i in perm]
        pstride = [x.stride[i] for i in perm]
        rows = prod(x.shape[i] for i in rest)
        D = prod(x.shape[i] for i in dims)
        v = Tensor(None, x.storage, x.offset, pshape, pstride, x.dtype)
        xs = b.contig(v, [rows, D], dtype=compute if compute != x.dtype else None)
        o, pend = b.out_begin(out, [rows, 1], reads=[x], op=dop)
        b.node(dop, [xs], o)
        b.out_end(pend)
    return fn


LOWER["aten.mean.dim"] = LOWER["aten.mean.default"] = _reduce("mean")
LOWER["aten.sum.dim_IntList"] = LOWER["aten.sum.default"] = _reduce("sum")
LOWER["aten.amax.default"] = _reduce("amax")
LOWER["aten.amin.default"] = _reduce("amin")


@register("aten._softmax.default", "aten.softmax.int", "aten._safe_softmax.default")
def _softmax(b, op):
    x, dim, out = op.args[0], op.arg(1, "dim"), op.out
    dim = dim % max(1, x.ndim)
    if dim != x.ndim - 1:
        raise b.unsupported("softmax over dim %d (the daemon's is over the last)" % dim)
    D = x.shape[-1] if x.ndim else 1
    rows = x.numel // D
    xs = b.contig(x, [rows, D], dtype=out.dtype)
    o, pend = b.out_begin(out, [rows, D], reads=[x], op="softmax")
    b.node("softmax", [xs], o)
    b.out_end(pend)


# ---- matmul -----------------------------------------------------------------

def _weight_of(wt):
    """The contiguous [N, K] weight whose transpose view is wt ([K, N],
    strides (1, K)), or None."""
    if wt.ndim != 2:
        return None
    K, N = wt.shape
    if (wt.stride[0] == 1 or K == 1) and (wt.stride[1] == K or N == 1):
        return Tensor(None, wt.storage, wt.offset, (N, K), (K, 1), wt.dtype)
    return None


def _linear(b, x, w, bias, out):
    """out = x @ w.T (+ bias) with w a contiguous [N, K] weight."""
    K = x.shape[-1]
    rows = x.numel // K
    dt = out.dtype
    xs = b.contig(x, written_shape(b, x) or ([rows, K] if x.ndim > 4 or x.ndim == 1 else None),
                  dtype=dt)
    ws = b.contig(w, [w.shape[0], K], dtype=dt)
    ins = [xs, ws]
    if bias is not None:
        if bias.numel != w.shape[0]:
            raise b.unsupported("a bias of %s for %d outputs" % (list(bias.shape), w.shape[0]))
        bb = bias if bias.ndim == 1 else Tensor(None, bias.storage, bias.offset, (bias.numel,),
                                                (bias.stride[-1],), bias.dtype)
        ins.append(b.contig(bb, [bias.numel], dtype=dt))
    oshape = b.shape_of(xs)[:-1] + [w.shape[0]]
    o, pend = b.out_begin(out, oshape, reads=[x, w] + ([bias] if bias is not None else []),
                          op="linear")
    b.node("linear", ins, o)
    b.out_end(pend)


def _bmm(b, a, m, out, bias=None):
    """out = a @ m (2..4 dims, leading dims broadcast), + bias [N]."""
    dt = out.dtype
    if dt not in FLOATING:
        raise b.unsupported("a matmul in %s" % dt)
    nd = max(a.ndim, m.ndim)
    if nd > MAX_DIMS:
        raise b.unsupported("a %d-dim matmul" % nd)
    attrs = {}
    mt = Tensor(None, m.storage, m.offset, m.shape[:-2] + (m.shape[-1], m.shape[-2]),
                m.stride[:-2] + (m.stride[-1], m.stride[-2]), m.dtype)
    an = _bcast_matrix(b, a, nd, dt)
    if not m.is_contiguous() and mt.is_contiguous():
        mn = _bcast_matrix(b, mt, nd, dt)
        attrs["trans_b"] = 1
    else:
        mn = _bcast_matrix(b, m, nd, dt)
    oshape = list(out.shape)
    if bias is None:
        o, pend = b.out_begin(out, oshape, reads=[a, m], op="bmm")
        b.node("bmm", [an, mn], o, attrs)
        b.out_end(pend)
        return
    tmp = b.scratch(dt, oshape)
    b.node("bmm", [an, mn], tmp, attrs)
    bn = b.bcast(bias, len(oshape), dt)
    o, pend = b.out_begin(out, oshape, reads=[a, m, bias], op="add")
    b.node("add", [tmp, bn], o)
    b.out_end(pend)


def _bcast_matrix(b, t, nd, dt):
    """A matmul operand: its last two dims contiguous, batch dims declared
    1 where t broadcasts them (stride 0)."""
    sh = [1] * (nd - t.ndim) + list(t.shape)
    st = [0] * (nd - t.ndim) + list(t.stride)
    dsh = [d if (s != 0 or i >= nd - 2) else 1 for i, (d, s) in enumerate(zip(sh, st))]
    v = Tensor(None, t.storage, t.offset, dsh, [s if d != 1 else 0 for d, s in zip(dsh, st)],
               t.dtype)
    name = b.mem(v, dsh) if v.is_contiguous() else b.gather(v, dsh, v.stride)
    return b.cast(name, dt)


@register("aten.mm.default")
def _mm(b, op):
    x, wt = op.args[0], op.args[1]
    w = _weight_of(wt)
    if w is not None:
        return _linear(b, x, w, None, op.out)
    _bmm(b, x, wt, op.out)


@register("aten.addmm.default")
def _addmm(b, op):
    bias, x, wt = op.args[0], op.args[1], op.args[2]
    if op.arg(3, "beta", 1) != 1 or op.arg(4, "alpha", 1) != 1:
        raise b.unsupported("beta/alpha other than 1")
    if bias.numel != wt.shape[-1]:
        raise b.unsupported("a bias of %s (only [N] is expressed)" % list(bias.shape))
    w = _weight_of(wt)
    if w is not None:
        return _linear(b, x, w, bias, op.out)
    _bmm(b, x, wt, op.out, bias)


@register("aten.linear.default")
def _linear_op(b, op):
    x, w, bias = op.args[0], op.args[1], op.arg(2, "bias")
    _linear(b, x, w, bias, op.out)


@register("aten.bmm.default", "aten.matmul.default")
def _bmm_op(b, op):
    _bmm(b, op.args[0], op.args[1], op.out)


# ---- norms ----------------------------------------------------------------------

@register("aten.native_layer_norm.default")
def _layer_norm(b, op):
    x, shp, w, bias, eps = op.args[:5]
    y = op.out[0]
    _check_stats_unused(b, op)
    if len(shp) != 1 or w is None or bias is None:
        raise b.unsupported("a layer norm over %d dims / without weight or bias" % len(shp))
    _row_op(b, "layernorm", x, [w, bias], y, {"eps": float(eps)})


@register("aten._fused_rms_norm.default", "gfx.rmsnorm")
def _rms_norm(b, op):
    x, shp, w = op.args[0], op.args[1], op.args[2]
    eps = op.arg(3, "eps")
    y = op.out[0] if isinstance(op.out, (list, tuple)) else op.out
    if isinstance(op.out, (list, tuple)):
        _check_stats_unused(b, op)
    if len(shp) != 1 or w is None:
        raise b.unsupported("an RMS norm over %d dims / without weight" % len(shp))
    if eps is None:
        eps = {"f32": 1.1920928955078125e-07, "f16": 0.0009765625,
               "bf16": 0.0078125}.get(x.dtype, 1e-6)
    attrs = {"eps": float(eps)}
    if op.kwargs.get("round_x") and y.dtype != "f32":
        attrs["round_x"] = 1
    _row_op(b, "rmsnorm", x, [w], y, attrs)


def _check_stats_unused(b, op):
    if getattr(op, "stats_used", False):
        raise b.unsupported("reads a norm's mean/rstd, which the daemon does not produce")


def _row_op(b, dop, x, vecs, y, attrs):
    D = x.shape[-1]
    dt = y.dtype
    rows = x.numel // D
    shape = written_shape(b, x) or ([rows, D] if x.ndim > 4 else list(x.shape))
    xs = b.contig(x, shape, dtype=dt)
    ins = [xs] + [b.contig(v if v.ndim == 1 else Tensor(None, v.storage, v.offset, (v.numel,),
                                                        (1,), v.dtype) if v.is_contiguous()
                           else v, [D], dtype=dt) for v in vecs]
    o, pend = b.out_begin(y, shape, reads=[x] + list(vecs), op=dop)
    b.node(dop, ins, o, attrs)
    b.out_end(pend)


@register("gfx.silu_mul")
def _silu_mul(b, op):
    a, g = op.args[0], op.args[1]
    y = op.out
    if tuple(a.shape) != tuple(y.shape) or tuple(g.shape) != tuple(y.shape):
        raise b.unsupported("silu_mul of shapes %s, %s" % (list(a.shape), list(g.shape)))
    rnd = op.kwargs.get("round_act") and y.dtype != "f32"
    elementwise(b, "silu_mul", [a, g], y, {"round_act": 1} if rnd else None, broadcast=False)


@register("gfx.gelu")
def _gelu_fused(b, op):
    elementwise(b, "gelu", [op.args[0]], op.out, {"approximate": op.args[1]}, broadcast=False)


# ---- data movement ------------------------------------------------------------

@register("aten.cat.default")
def _cat(b, op):
    ts = [t for t in op.args[0] if isinstance(t, Tensor) and t.numel > 0]
    dim = op.arg(1, "dim", 0)
    out = op.out
    if not ts:
        return
    dim = dim % out.ndim
    if len(ts) == 1:
        return _copy_into(b, ts[0], out)
    names = [b.contig(t, dtype=out.dtype) for t in ts]
    # up to 4 inputs a node; more go through partial results
    while len(names) > 4:
        part = names[:4]
        shp = b.shape_of(part[0])
        shp[dim] = sum(b.shape_of(n)[dim] for n in part)
        tmp = b.scratch(out.dtype, shp)
        b.node("cat", part, tmp, {"dim": dim})
        names = [tmp] + names[4:]
    if out.ndim > MAX_DIMS:
        raise b.unsupported("a %d-dim cat" % out.ndim)
    o, pend = b.out_begin(out, reads=ts, op="cat")
    b.node("cat", names, o, {"dim": dim})
    b.out_end(pend)


@register("aten.index_copy_.default", "aten.index_copy.default")
def _index_copy(b, op):
    self_, dim, index, src = op.args[0], op.args[1], op.args[2], op.args[3]
    dest = self_ if op.inplace else op.out
    if not op.inplace:
        _copy_into(b, self_, dest)
    if not dest.is_contiguous():
        raise b.unsupported("index_copy into a non-contiguous %s" % dest.describe())
    if index.dtype not in INTEGRAL:
        raise b.unsupported("an index of %s" % index.dtype)
    dim = dim % dest.ndim
    srcn = b.contig(src, dtype=dest.dtype)
    idx = b.contig(index, [index.numel])
    if src.overlaps(dest) or index.overlaps(dest):
        raise b.unsupported("index_copy whose source overlaps its destination")
    b.node("index_copy", [srcn, idx], b.mem(dest), {"dim": dim})


@register("aten.embedding.default")
def _embedding(b, op):
    table, ids, out = op.args[0], op.args[1], op.out
    if ids.dtype not in INTEGRAL:
        raise b.unsupported("ids of %s" % ids.dtype)
    if ids.ndim > 3:
        raise b.unsupported("ids of %d dims" % ids.ndim)
    idn = b.contig(ids, list(ids.shape) or [1])
    tn = b.contig(table, dtype=out.dtype)
    o, pend = b.out_begin(out, (list(ids.shape) or [1]) + [table.shape[-1]],
                          reads=[ids, table], op="embedding")
    b.node("embedding", [idn, tn], o)
    b.out_end(pend)


# ---- attention ---------------------------------------------------------------

_SDPA = {
    # name: (positional index of the mask or None, of is_causal, of scale or None)
    "aten._scaled_dot_product_flash_attention.default": (None, 4, None),
    "aten._scaled_dot_product_efficient_attention.default": (3, 6, None),
    "aten._scaled_dot_product_cudnn_attention.default": (3, 6, None),
    "aten._scaled_dot_product_flash_attention_for_cpu.default": ("attn_mask", 4, None),
    "aten._scaled_dot_product_attention_math.default": (3, 5, None),
    "aten.scaled_dot_product_attention.default": (3, 5, 6),
    "aten._scaled_dot_product_fused_attention_overrideable.default": (3, 5, None),
}


# The fused kernels (flash, memory-efficient, cuDNN) store each weight
# exp(score - max) in q's dtype for the tensor-core product with v, and
# divide by the f32 sum at the end; the math form and the CPU kernels do not.
_SDPA_ROUND_P = ("aten._scaled_dot_product_flash_attention.default",
                 "aten._scaled_dot_product_efficient_attention.default",
                 "aten._scaled_dot_product_cudnn_attention.default",
                 "aten._scaled_dot_product_fused_attention_overrideable.default",
                 "aten.scaled_dot_product_attention.default")


def _sdpa(b, op):
    mask_at, causal_at, scale_at = _SDPA[op.name]
    q, k, v = op.args[0], op.args[1], op.args[2]
    out = op.out[0] if isinstance(op.out, (list, tuple)) else op.out
    if isinstance(mask_at, str):
        mask = op.kwargs.get(mask_at)
    else:
        mask = op.arg(mask_at, "attn_mask" if "math" in op.name or op.name.startswith(
            "aten.scaled") else "attn_bias") if mask_at is not None else None
    causal = bool(op.arg(causal_at, "is_causal", False))
    scale = op.kwargs.get("scale")
    if scale is None and scale_at is not None:
        scale = op.arg(scale_at, "scale")
    dp = op.kwargs.get("dropout_p", 0.0)
    if dp:
        raise b.unsupported("dropout_p %r" % dp)
    dt = out.dtype
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise b.unsupported("attention over %d-dim q (the daemon's sdpa takes [B, H, L, D])"
                            % q.ndim)
    names = [b.contig(t, dtype=dt) for t in (q, k, v)]
    reads = [q, k, v]
    if isinstance(mask, Tensor):
        mdt = "bool" if mask.dtype == "bool" else dt
        names.append(b.bcast(mask, 4, mdt))
        reads.append(mask)
    attrs = {"causal": 1 if causal else 0}
    if scale:
        attrs["scale"] = float(scale)
    if dt in ("f16", "bf16") and op.name in _SDPA_ROUND_P:
        attrs["round_p"] = 1
    o, pend = b.out_begin(out, list(out.shape), reads=reads, op="sdpa")
    b.node("sdpa", names, o, attrs)
    b.out_end(pend)


for _n in _SDPA:
    LOWER[_n] = _sdpa



# ---- the decode family (patterns.py's rotary, cache write and attention) ------------

def _index(b, t):
    """A positions/lens operand: t's elements as a 1-D program tensor."""
    if t.dtype not in INTEGRAL:
        raise b.unsupported("an index of %s" % t.dtype)
    return b.contig(t, [t.numel])


@register("gfx.rope")
def _rope(b, op):
    x, pos, inv, scale = op.args
    y = op.out
    B, H, L, Dh = x.shape
    xs = b.contig(x, [B, H, Dh])
    ins = [xs, _index(b, pos), b.contig(inv, [inv.numel])]
    o, pend = b.out_begin(y, [B, H, Dh], reads=[x, pos, inv], op="rope")
    b.node("rope", ins, o, {"style": "neox", "attention_scaling": float(scale)})
    b.out_end(pend)


@register("gfx.cache_write")
def _cache_write(b, op):
    src, pos, cache = op.args
    B, Hkv, S, Dh = cache.shape
    # [B, Hkv] as one dim of B * Hkv rows of the bhsd layout: the same bytes,
    # and a single row for the daemon's batch word, which a program of fixed
    # shape sets to its replay's batch, not to B
    xs = b.contig(src, [1, B * Hkv, Dh])
    cn = b.mem(cache, [1, B * Hkv, S, Dh])
    b.node("cache_write", [xs, _index(b, pos)], cn, {"layout": "bhsd"})


@register("gfx.attention_decode")
def _attention_decode(b, op):
    q, kc, vc, M, add, scale = op.args
    y = op.out
    B, Hq, L, Dh = q.shape
    # lens = the position + 1, once per step for all layers
    key = ("lens", M.storage.id, M.offset, M.dtype, M.numel, add)
    lens = b.memo.get(key) if hasattr(b, "memo") else None
    if lens is None:
        mn = _index(b, M)
        lens = b.scratch(M.dtype, [M.numel])
        b.node("add", [mn], lens, {"scalar": float(add)})
        if not hasattr(b, "memo"):
            b.memo = {}
        b.memo[key] = lens
    qs = b.contig(q, [B, Hq, Dh])
    attrs = {"layout": "bhsd"}
    if scale:
        attrs["scale"] = float(scale)
    o, pend = b.out_begin(y, [B, Hq, Dh], reads=[q, kc, vc], op="attention_decode")
    b.node("attention_decode", [qs, b.mem(kc), b.mem(vc), lens], o, attrs)
    b.out_end(pend)


# ---- the step's intermediates ------------------------------------------------------

def scratch_intermediates(graph, b):
    """Make the program's tensors over the step's own intermediates daemon
    scratch: the memory of the capture that holds no output or state (what
    dead-op elimination already treats as unread after the step).  The
    fusion planner keeps every buffer a fused kernel passes through, since
    a client may read it; scratch that no later node reads it drops (gate
    and up before silu_mul, a row chain's stages).  A storage whose tensors
    are not all its whole bytes from offset 0 under one dtype (a split's
    parts) stays a buffer: scratch views share their root's bytes exactly."""
    kept = set(graph.tensors[i].storage.id for i in list(graph.outputs) + list(graph.state)
               if i in graph.tensors)
    by_sid = {}
    for name, spec in b.tensors.items():
        if "storage" in spec:
            by_sid.setdefault(spec["storage"], []).append(name)
    for sid, names in by_sid.items():
        st = graph.storages.get(sid)
        if st is None or st.external or sid in kept:
            continue
        specs = [b.tensors[n] for n in names]
        n0 = prod(specs[0]["shape"])
        if any(s["offset"] != 0 or s["dtype"] != specs[0]["dtype"] or prod(s["shape"]) != n0
               for s in specs):
            continue
        root = names[0]
        b.tensors[root] = {"dtype": specs[0]["dtype"], "shape": list(specs[0]["shape"]),
                           "scratch": True}
        for n, s in zip(names[1:], specs[1:]):
            b.tensors[n] = {"dtype": s["dtype"], "shape": list(s["shape"]), "view": root}
        moved = set(names[1:])
        for spec in b.tensors.values():
            if spec.get("view") in moved:    # a view's base is never itself a view
                spec["view"] = root
        b.storages_used.discard(sid)
