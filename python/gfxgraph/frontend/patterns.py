"""Recognizing subgraphs that have a fused daemon op, whatever their
spelling.

A recognized subgraph is replaced by one synthetic op (``gfx.rmsnorm``,
``gfx.gelu``, ``gfx.silu_mul``, lowered by the table in lower.py) at the
position of its last op, reading the subgraph's inputs there; the ops
inside stay where they were and go with the next dead-op pass when nothing
else reads their results.  So a match never changes what the step
computes, only how: an intermediate something else reads is still
produced.

Elementwise functions of one tensor (GELU in its erf and tanh spellings,
GPT-2's ``0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715x^3)))``, ``x*sigmoid(x)``)
are recognized by value: the op tree is evaluated at fixed points and
compared with the daemon op's formula, so any algebraic spelling of the
same function matches and a different one never does.
"""

import math

from .ir import Op, Tensor
from .passes import producer, unchanged


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, Tensor)


def _is(op, *bases):
    return op is not None and op.base.rstrip("_") in bases and not op.inplace


# ---- RMSNorm ---------------------------------------------------------------

def _rms_core(ops, j):
    """ops[j] = a * rsqrt(mean(a^2, -1, keepdim) + eps): (a, eps) or None."""
    m = ops[j]
    if not _is(m, "mul") or len(m.args) < 2:
        return None
    for a, r in ((m.args[0], m.args[1]), (m.args[1], m.args[0])):
        if not isinstance(a, Tensor) or not isinstance(r, Tensor):
            continue
        jr = producer(ops, j, r)
        if jr is None or not _is(ops[jr], "rsqrt"):
            continue
        js = producer(ops, jr, ops[jr].args[0])
        if js is None or not _is(ops[js], "add"):
            continue
        s = ops[js]
        v, eps = s.args[0], s.args[1]
        if _num(v):
            v, eps = eps, v
        if not _num(eps) or not isinstance(v, Tensor) or s.arg(2, "alpha", 1) != 1:
            continue
        jv = producer(ops, js, v)
        if jv is None or ops[jv].name != "aten.mean.dim":
            continue
        mean = ops[jv]
        x2 = mean.args[0]
        dims = mean.arg(1, "dim")
        if not isinstance(x2, Tensor) or dims is None or len(dims) != 1 or \
                dims[0] % x2.ndim != x2.ndim - 1 or not mean.arg(2, "keepdim", False):
            continue
        jp = producer(ops, jv, x2)
        if jp is None:
            continue
        p = ops[jp]
        if _is(p, "pow") and len(p.args) > 1 and _num(p.args[1]) and float(p.args[1]) == 2.0:
            src = p.args[0]
        elif _is(p, "mul") and isinstance(p.args[0], Tensor) and \
                isinstance(p.args[1], Tensor) and p.args[0].same_memory(p.args[1]):
            src = p.args[0]
        else:
            continue
        if not (isinstance(src, Tensor) and src.same_memory(a) and unchanged(ops, a, jp, j)):
            continue
        return a, float(eps), jp
    return None


_HALF = ("f16", "bf16")


def _vector(t, D):
    return isinstance(t, Tensor) and t.numel == D and t.shape[-1:] == (D,)


def match_rmsnorm(ops, i):
    """ops[i] = w * rmsnorm_core(x) [through a dtype round trip]: the fused op,
    or None."""
    m = ops[i]
    if not _is(m, "mul") or len(m.args) < 2:
        return None
    y = m.out
    if not isinstance(y, Tensor):
        return None
    D = y.shape[-1] if y.ndim else 0
    for h, w in ((m.args[0], m.args[1]), (m.args[1], m.args[0])):
        if not isinstance(h, Tensor) or not _vector(w, D) or h.shape != y.shape:
            continue
        j = producer(ops, i, h)
        if j is None:
            continue
        # HF's `weight * hidden.to(input_dtype)`: the normalized value is
        # stored in a half dtype before the weight multiply
        round_x = 0
        if ops[j].name == "aten._to_copy.default":
            src = ops[j].args[0]
            round_x = int(isinstance(src, Tensor) and h.dtype in _HALF and
                          src.dtype not in _HALF)
            j = producer(ops, j, src)
            if j is None:
                continue
        core = _rms_core(ops, j)
        if core is None:
            continue
        a, eps, jfirst = core
        x = a
        ja = producer(ops, jfirst, a)
        if ja is not None and ops[ja].name == "aten._to_copy.default":
            x0 = ops[ja].args[0]
            if isinstance(x0, Tensor) and x0.dtype == y.dtype and \
                    unchanged(ops, x0, ja, i):
                x = x0
        # the fused op reads x where ops[i] is: x must hold what the pattern's
        # first op read (w is read where ops[i] read it)
        if not unchanged(ops, x, jfirst, i):
            continue
        return Op("gfx.rmsnorm", [x, [D], w, eps], {"round_x": round_x} if round_x else {},
                  y, m.index)
    return None


# ---- elementwise functions of one tensor, by value ---------------------------

def _gelu_erf(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _silu(x):
    return x / (1.0 + math.exp(-x))


UNARY_TARGETS = [
    ("gelu_tanh", _gelu_tanh, lambda x, y: Op("gfx.gelu", [x, "tanh"], {}, y)),
    ("gelu_erf", _gelu_erf, lambda x, y: Op("gfx.gelu", [x, "none"], {}, y)),
    ("silu", _silu, lambda x, y: Op("aten.silu.default", [x], {}, y)),
]

_POINTS = [-5.5, -3.1, -1.7, -1.0, -0.43, -0.05, 0.0, 0.11, 0.5, 0.93, 1.6, 2.4, 4.2]


def _binop(f):
    def ev(op, a, b):
        alpha = op.arg(2, "alpha", 1) if op.base.rstrip("_") in ("add", "sub", "rsub") else 1
        return f(a, b, alpha)
    return ev


_EVAL = {
    "add": _binop(lambda a, b, al: a + al * b),
    "sub": _binop(lambda a, b, al: a - al * b),
    "rsub": _binop(lambda a, b, al: b - al * a),
    "mul": _binop(lambda a, b, al: a * b),
    "div": _binop(lambda a, b, al: a / b),
    "pow": _binop(lambda a, b, al: a ** b),
    "tanh": lambda op, a: math.tanh(a),
    "erf": lambda op, a: math.erf(a),
    "sigmoid": lambda op, a: 1.0 / (1.0 + math.exp(-a)),
    "exp": lambda op, a: math.exp(a),
    "neg": lambda op, a: -a,
    "sqrt": lambda op, a: math.sqrt(a),
    "reciprocal": lambda op, a: 1.0 / a,
}
_MAX_TREE = 24


def _tree(ops, i, t, depth, seen, leaf):
    """An evaluator for tensor t (read by ops[i]) as a function of one leaf
    tensor, following producers through the ops of _EVAL; None when t is
    not such a function.  seen: the indices of the ops in the tree."""
    if _num(t):
        v = float(t)
        return lambda x: v
    if not isinstance(t, Tensor):
        return None
    j = producer(ops, i, t)
    op = ops[j] if j is not None else None
    base = op.base.rstrip("_") if op is not None else None
    if op is None or base not in _EVAL or op.inplace or depth > 12 or len(seen) >= _MAX_TREE:
        if leaf[0] is None:
            leaf[0] = t
            return lambda x: x
        if leaf[0].same_memory(t):
            return lambda x: x
        return None
    if any(isinstance(a, Tensor) and a.numel != t.numel for a in op.args[:2]):
        return None
    seen.append(j)
    return _op_eval(ops, j, op, base, depth, seen, leaf)


def _op_eval(ops, j, op, base, depth, seen, leaf):
    ev = _EVAL[base]
    if base in _UNARY:
        f = _tree(ops, j, op.args[0], depth + 1, seen, leaf)
        return None if f is None else (lambda x: ev(op, f(x)))
    if len(op.args) < 2:
        return None
    fa = _tree(ops, j, op.args[0], depth + 1, seen, leaf)
    fb = _tree(ops, j, op.args[1], depth + 1, seen, leaf) if fa is not None else None
    return None if fb is None else (lambda x: ev(op, fa(x), fb(x)))


_UNARY = ("tanh", "erf", "sigmoid", "exp", "neg", "sqrt", "reciprocal")


def match_unary(ops, i):
    """ops[i] ends a tree of elementwise ops over one tensor x that computes
    one of UNARY_TARGETS: that target's op, or None."""
    m = ops[i]
    base = m.base.rstrip("_")
    y = m.out
    if base not in _EVAL or m.inplace or not isinstance(y, Tensor):
        return None
    leaf, seen = [None], [i]
    f = _op_eval(ops, i, m, base, 0, seen, leaf)
    x = leaf[0]
    if f is None or x is None or len(seen) < 2 or x.shape != y.shape:
        return None
    try:
        got = [f(p) for p in _POINTS]
    except (ValueError, OverflowError, ZeroDivisionError):
        return None
    for _name, ref, make in UNARY_TARGETS:
        if all(abs(g - ref(p)) <= 1e-9 * max(1.0, abs(ref(p))) for g, p in zip(got, _POINTS)):
            if not unchanged(ops, x, min(seen), i):
                return None
            op = make(x, y)
            op.index = m.index
            return op
    return None


# ---- silu(a) * b -------------------------------------------------------------

def match_silu_mul(ops, i):
    m = ops[i]
    if not _is(m, "mul") or len(m.args) < 2 or not isinstance(m.out, Tensor):
        return None
    for s, g in ((m.args[0], m.args[1]), (m.args[1], m.args[0])):
        if not isinstance(s, Tensor) or not isinstance(g, Tensor):
            continue
        j = producer(ops, i, s)
        if j is None or ops[j].name != "aten.silu.default":
            continue
        a = ops[j].args[0]
        y = m.out
        if not (a.shape == g.shape == y.shape == s.shape and a.dtype == g.dtype == y.dtype):
            continue
        if not unchanged(ops, a, j, i):
            continue
        # act_fn(gate(x)) * up(x): silu's result is stored in s's dtype
        # before the multiply
        kw = {"round_act": 1} if s.dtype in _HALF else {}
        return Op("gfx.silu_mul", [a, g], kw, y, m.index)
    return None


MATCHERS = [("rmsnorm", match_rmsnorm), ("unary", match_unary), ("silu_mul", match_silu_mul)]


def recognize(ops, counts=None):
    """ops with every recognized subgraph's last op replaced by its fused
    op (each matcher over the whole list in turn, so silu_mul sees a silu
    recognized by value).  counts: a dict name -> matches, updated."""
    ops = list(ops)
    for name, fn in MATCHERS:
        for i in range(len(ops) - 1, -1, -1):
            if ops[i].name.startswith("gfx."):
                continue
            r = fn(ops, i)
            if r is not None:
                ops[i] = r
                if counts is not None:
                    counts[name] = counts.get(name, 0) + 1
    return ops
