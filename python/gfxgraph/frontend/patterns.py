# SPDX-License-Identifier: MIT
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


# ---- HF rotary: q * cos + rotate_half(q) * sin -> rope ------------------------------

def _prod_of(ops, i, t, *names):
    """(index, op) of the op that produced t when its name is one of names."""
    j = producer(ops, i, t)
    if j is None or ops[j].name not in names:
        return None, None
    return j, ops[j]


def _through_casts(ops, i, t):
    """t followed back through _to_copy ops (dtype conversions only): (the
    tensor, the index of the op that read it)."""
    while True:
        j, op = _prod_of(ops, i, t, "aten._to_copy.default")
        if op is None or not isinstance(op.args[0], Tensor):
            return t, i
        t, i = op.args[0], j


def _trig(ops, i, t):
    """t (read by ops[i]) = [cast of] [scale *] cos/sin(e): (fn, e, scale,
    index of the cos/sin op) or None."""
    t, i = _through_casts(ops, i, t)
    scale = 1.0
    j, op = _prod_of(ops, i, t, "aten.mul.Tensor")
    if op is not None:
        a, s = op.args[0], op.args[1]
        if _num(a):
            a, s = s, a
        if not _num(s) or not isinstance(a, Tensor):
            return None
        scale, t, i = float(s), a, j
    j, op = _prod_of(ops, i, t, "aten.cos.default", "aten.sin.default")
    if op is None:
        return None
    return op.base, op.args[0], scale, j


def _rotary_angles(ops, i, e):
    """e (read by ops[i]) = cat(f, f) over the last dim with f the transpose of
    inv_freq[None, :, None] @ positions[:, None, :].float(): (inv_freq as a 1-D
    tensor, positions as a 1-D tensor, the index of the first op) or None."""
    j, cat = _prod_of(ops, i, e, "aten.cat.default")
    if cat is None or len(cat.args[0]) != 2 or cat.arg(1, "dim", 0) % e.ndim != e.ndim - 1:
        return None
    f0, f1 = cat.args[0]
    if not (isinstance(f0, Tensor) and isinstance(f1, Tensor) and f0.same_memory(f1)):
        return None
    jb, bmm = _prod_of(ops, j, f0, "aten.bmm.default")
    if bmm is None:
        return None
    a, p = bmm.args[0], bmm.args[1]
    out = bmm.out
    # [Bp, half, 1] @ [Bp, 1, 1]: one position a batch row, transposed to [Bp, 1, half]
    if a.ndim != 3 or p.ndim != 3 or a.shape[2] != 1 or p.shape[1:] != (1, 1):
        return None
    half, bp = a.shape[1], out.shape[0]
    if f0.shape[-1] != half or f0.numel != bp * half or e.shape[-1] != 2 * half:
        return None
    inv, ji = _through_casts(ops, jb, a)
    pos, jp = _through_casts(ops, jb, p)
    if inv.dtype not in ("f32", "f16", "bf16") or pos.dtype not in ("i64", "i32"):
        return None
    # inv_freq's elements along dim 1, the same for every batch row
    if inv.ndim != 3 or inv.shape[0] not in (1, bp) or (inv.shape[0] > 1 and inv.stride[0] != 0):
        return None
    inv1 = Tensor(None, inv.storage, inv.offset, (half,), (inv.stride[1],), inv.dtype)
    pos1 = Tensor(None, pos.storage, pos.offset, (pos.shape[0],), (pos.stride[0],), pos.dtype)
    if pos.shape[0] not in (1, bp):
        return None
    return inv1, pos1, min(ji, jp)


def match_rope(ops, i):
    """ops[i] = q * cos + rotate_half(q) * sin with HF's cos/sin (neox, the
    whole head rotated): gfx.rope(q, positions, inv_freq, attention_scaling)."""
    m = ops[i]
    if not _is(m, "add") or len(m.args) < 2 or m.arg(2, "alpha", 1) != 1:
        return None
    y = m.out
    # bf16 keeps the general path: HF rounds cos, sin and each product to
    # bf16, and one rounding of the fused op lands about the frontend's bf16
    # tolerance away from that chain
    if not isinstance(y, Tensor) or y.ndim != 4 or y.shape[2] != 1 or y.dtype == "bf16":
        return None
    for pa, pb in ((m.args[0], m.args[1]), (m.args[1], m.args[0])):
        if not isinstance(pa, Tensor) or not isinstance(pb, Tensor):
            continue
        ja, ma = _prod_of(ops, i, pa, "aten.mul.Tensor")
        jb, mb = _prod_of(ops, i, pb, "aten.mul.Tensor")
        if ma is None or mb is None:
            continue
        r = _rope_terms(ops, ja, ma, jb, mb, y)
        if r is not None:
            x, pos, inv, scale, jx, jfirst = r
            # each input holds at ops[i] what the pattern's first read of it saw
            if not (unchanged(ops, x, jx, i) and unchanged(ops, pos, jfirst, i) and
                    unchanged(ops, inv, jfirst, i)):
                continue
            return Op("gfx.rope", [x, pos, inv, scale], {}, y, m.index)
    return None


def _rope_terms(ops, ja, ma, jb, mb, y):
    Dh = y.shape[-1]
    half = Dh // 2
    for x, c in ((ma.args[0], ma.args[1]), (ma.args[1], ma.args[0])):
        for rot, s in ((mb.args[0], mb.args[1]), (mb.args[1], mb.args[0])):
            if not all(isinstance(t, Tensor) for t in (x, c, rot, s)):
                continue
            if x.shape != y.shape or x.dtype != y.dtype or Dh % 2:
                continue
            jc, cat = _prod_of(ops, jb, rot, "aten.cat.default")
            if cat is None or len(cat.args[0]) != 2 or \
                    cat.arg(1, "dim", 0) % rot.ndim != rot.ndim - 1:
                continue
            n, x1 = cat.args[0]
            jn, neg = _prod_of(ops, jc, n, "aten.neg.default")
            if neg is None:
                continue
            x2 = neg.args[0]
            lo = Tensor(None, x.storage, x.offset, x.shape[:-1] + (half,), x.stride, x.dtype)
            hi = Tensor(None, x.storage, x.offset + half * x.stride[-1],
                        x.shape[:-1] + (half,), x.stride, x.dtype)
            if not (isinstance(x1, Tensor) and isinstance(x2, Tensor) and
                    x1.same_memory(lo) and x2.same_memory(hi)):
                continue
            tc, ts = _trig(ops, ja, c), _trig(ops, jb, s)
            if tc is None or ts is None or tc[0] != "cos" or ts[0] != "sin" or tc[2] != ts[2]:
                continue
            if not tc[1].same_memory(ts[1]):
                continue
            ang = _rotary_angles(ops, tc[3], tc[1])
            if ang is None or 2 * ang[0].shape[0] != Dh:
                continue
            inv, pos, jfirst = ang
            # cos/sin broadcast over heads: [Bp, 1, 1, Dh] against q [B, H, 1, Dh]
            if c.shape[-1] != Dh or c.numel != pos.shape[0] * Dh or \
                    (pos.shape[0] > 1 and (c.ndim != 4 or c.shape[0] != y.shape[0])):
                continue
            if not unchanged(ops, tc[1], tc[3], jb) or not unchanged(ops, x, jn, jb):
                continue
            return x, pos, inv, tc[2], min(ja, jn), jfirst
    return None


# ---- StaticCache write: index_copy_ of one position -> cache_write -----------------

def match_cache_write(ops, i):
    """ops[i] = cache.index_copy_(2, position [1], x [B, Hkv, 1, Dh]) into a
    contiguous [B, Hkv, S, Dh] cache (HF's StaticCache):
    gfx.cache_write(x, position, cache)."""
    m = ops[i]
    if m.name != "aten.index_copy_.default" or len(m.args) < 4:
        return None
    cache, dim, idx, src = m.args[0], m.args[1], m.args[2], m.args[3]
    if not all(isinstance(t, Tensor) for t in (cache, idx, src)) or not isinstance(dim, int):
        return None
    if cache.ndim != 4 or dim % 4 != 2 or not cache.is_contiguous() or idx.numel != 1 or \
            idx.dtype not in ("i64", "i32") or src.shape != cache.shape[:2] + (1,) + \
            cache.shape[3:] or src.dtype != cache.dtype or src.overlaps(cache) or \
            idx.overlaps(cache):
        return None
    pos = Tensor(None, idx.storage, idx.offset, (1,), (1,), idx.dtype)
    return Op("gfx.cache_write", [src, pos, cache], {}, cache, m.index)


# ---- SDPA over a static cache with a causal mask from the position -------------------

def _unexpanded(t):
    """t without its expanded dims (stride 0: the same values along them)."""
    if not any(s == 0 and d > 1 for d, s in zip(t.shape, t.stride)):
        return t
    return Tensor(None, t.storage, t.offset, [1 if s == 0 else d for d, s in
                                              zip(t.shape, t.stride)], t.stride, t.dtype)


def _mask_tree(ops, i, t, env):
    """The value of integer/bool tensor t (read by ops[i]) as a function of
    the cache index s (an arange of S along the last dim) and the position
    p (env["leaf"]): ("aff", a_s, a_p, c) for a_s*s + a_p*p + c, or a
    predicate ("cmp", op, aff, aff) / ("and"|"or", x, y) / ("not", x) /
    ("const", v).  None when t is anything else."""
    if _num(t):
        return ("const", bool(t)) if isinstance(t, bool) else ("aff", 0, 0, t)
    if not isinstance(t, Tensor):
        return None
    env["n"] += 1
    if env["n"] > 64:
        return None
    t = _unexpanded(t)
    j = producer(ops, i, t)
    op = ops[j] if j is not None else None
    name = op.name if op is not None else None
    if op is not None and name.startswith("aten.arange."):
        nums = [a for a in op.args if _num(a)]
        start, step = (0, 1) if name.endswith("default") else (nums[0], op.arg(2, "step", 1)) \
            if name.endswith("start_step") else (nums[0], 1)
        n = op.out.numel
        if n == 1:
            return ("aff", 0, 0, start)
        if step != 1 or t.numel != env["S"] or t.shape[-1] != env["S"] or \
                t.offset != op.out.offset:
            return None
        return ("aff", 1, 0, start)
    if op is not None and name in ("aten.scalar_tensor.default", "aten.full.default",
                                   "aten.new_ones.default", "aten.ones.default",
                                   "aten.new_full.default") and t.numel >= 1:
        v = 1 if "ones" in name else (op.args[0] if name == "aten.scalar_tensor.default"
                                      else op.args[-1])
        if t.dtype == "bool":
            return ("const", bool(v))
        return ("aff", 0, 0, v) if _num(v) else None
    if op is not None and name == "aten.expand.default":
        return None
    base = op.base.rstrip("_") if op is not None else None
    if op is not None and not op.inplace and base in ("add", "sub") and \
            t.dtype in ("i64", "i32"):
        a = _mask_tree(ops, j, op.args[0], env)
        b = _mask_tree(ops, j, op.args[1], env)
        al = op.arg(2, "alpha", 1)
        if a is None or b is None or a[0] != "aff" or b[0] != "aff" or not _num(al):
            return None
        sg = al if base == "add" else -al
        form = ("aff", a[1] + sg * b[1], a[2] + sg * b[2], a[3] + sg * b[3])
        if form[1] == 0 and form[2] == 1 and t.numel in (1, env["B"]):
            env["cands"].append((t, form[3], j))
        return form
    if op is not None and not op.inplace and base in ("le", "lt", "ge", "gt", "eq", "ne"):
        a = _mask_tree(ops, j, op.args[0], env)
        b = _mask_tree(ops, j, op.args[1], env)
        if a is None or b is None or a[0] != "aff" or b[0] != "aff":
            return None
        return ("cmp", base, a, b)
    if op is not None and not op.inplace and base in ("bitwise_and", "bitwise_or",
                                                      "logical_and", "logical_or", "__and__",
                                                      "__or__"):
        a = _mask_tree(ops, j, op.args[0], env)
        b = _mask_tree(ops, j, op.args[1], env)
        if a is None or b is None or a[0] == "aff" or b[0] == "aff":
            return None
        return ("and" if "and" in base else "or", a, b)
    if op is not None and not op.inplace and base in ("bitwise_not", "logical_not"):
        a = _mask_tree(ops, j, op.args[0], env)
        return None if a is None or a[0] == "aff" else ("not", a)
    if op is not None:
        return None
    # a leaf: the position (one for every row, or one a row along dim 0)
    if t.dtype not in ("i64", "i32") or t.numel not in (1, env["B"]):
        return None
    if t.numel > 1 and (t.ndim != 4 or t.shape[0] != env["B"]):
        return None
    leaf = env.get("leaf")
    if leaf is None:
        env["leaf"] = t
    elif not (leaf.storage is t.storage and leaf.offset == t.offset):
        return None
    env["cands"].append((t, 0, None))
    return ("aff", 0, 1, 0)


def _aff(f, s, p):
    return f[1] * s + f[2] * p + f[3]


def _pred(x, s, p):
    k = x[0]
    if k == "const":
        return bool(x[1])
    if k == "not":
        return not _pred(x[1], s, p)
    if k == "and":
        return _pred(x[1], s, p) and _pred(x[2], s, p)
    if k == "or":
        return _pred(x[1], s, p) or _pred(x[2], s, p)
    a, b = _aff(x[2], s, p), _aff(x[3], s, p)
    return {"le": a <= b, "lt": a < b, "ge": a >= b, "gt": a > b, "eq": a == b,
            "ne": a != b}[x[1]]


def _atoms(x, out):
    if x[0] == "cmp":
        out.append((x[2][1] - x[3][1], x[2][2] - x[3][2], x[2][3] - x[3][3]))
    elif x[0] in ("and", "or"):
        _atoms(x[1], out)
        _atoms(x[2], out)
    elif x[0] == "not":
        _atoms(x[1], out)
    return out


def causal_up_to_position(pred, S):
    """Whether pred(s, p) == (s <= p) for every position p and cache index s in
    [0, S): exact, each atom a threshold in s for a given p, so both sides
    are constant between the points evaluated."""
    atoms = _atoms(pred, [])
    for p in range(S):
        pts = {0, S - 1, p, p + 1}
        for ds, dp, dc in atoms:
            if ds:
                t = -(dp * p + dc) / ds
                f = math.floor(t)
                pts.update((f - 1, f, f + 1, f + 2))
        for s in pts:
            if 0 <= s < S and _pred(pred, s, p) != (s <= p):
                return False
    return True


# the masked value: exp(masked - max) is 0 in f32 for any score spread below
# ~65400, so a mask at torch.finfo(dtype).min (-65504 for f16, lower for
# f32/bf16) or -inf drops the position exactly as a shorter length does
_MASKED = -65504.0


def _sdpa_mask(ops, i, mask, B, S, dtype):
    """mask (read by SDPA ops[i]) = causal up to the position: (tensor M
    holding the position + c, c) with M unchanged up to ops[i], or None."""
    mask = _unexpanded(mask)
    if mask.shape[-1] != S or mask.numel not in (S, B * S) or \
            (mask.numel > S and (mask.ndim != 4 or mask.shape[0] != B)):
        return None
    t = mask
    if mask.dtype != "bool":
        j, w = _prod_of(ops, i, mask, "aten.where.self", "aten.where.ScalarOther",
                        "aten.where.ScalarSelf", "aten.where.Scalar")
        if w is None:
            return None
        vals = []
        for v in (w.args[1], w.args[2]):
            if _num(v):
                vals.append(float(v))
                continue
            jv, sv = _prod_of(ops, j, v, "aten.scalar_tensor.default", "aten.full.default")
            if sv is None or not _num(sv.args[0] if sv.name.startswith("aten.scalar")
                                      else sv.args[-1]):
                return None
            vals.append(float(sv.args[0] if sv.name.startswith("aten.scalar") else sv.args[-1]))
        if vals[0] != 0.0 or not vals[1] <= _MASKED:
            return None
        t, i = w.args[0], j
    env = {"S": S, "B": B, "n": 0, "cands": []}
    pred = _mask_tree(ops, i, t, env)
    if pred is None or pred[0] in ("aff",) or not causal_up_to_position(pred, S):
        return None
    for m, c, jm in env["cands"]:
        if unchanged(ops, m, (jm if jm is not None else 0) + 1, i):
            return m, c
    return None


def _kv_cache(ops, i, k, Hq):
    """k as SDPA reads it: the cache itself ([B, Hkv, S, Dh] contiguous) or a
    repeat_kv copy of it (expand + clone): (cache, Hkv) or None."""
    if k.ndim != 4:
        return None
    if k.is_contiguous() and k.shape[1] == Hq:
        j = producer(ops, i, k)
        if j is None or ops[j].name not in ("aten.clone.default",):
            return k, Hq
    j, cl = _prod_of(ops, i, k, "aten.clone.default")
    if cl is None:
        return None
    src = cl.args[0]
    if src.ndim != 5 or src.stride[2] != 0:
        return None
    B, Hkv, rep, S, Dh = src.shape
    if Hkv * rep != Hq or (B, Hq, S, Dh) != k.shape:
        return None
    cache = Tensor(None, src.storage, src.offset, (B, Hkv, S, Dh),
                   (src.stride[0], src.stride[1], src.stride[3], src.stride[4]), src.dtype)
    if not cache.is_contiguous() or not unchanged(ops, cache, j, i):
        return None
    return cache, Hkv


def match_attention_decode(ops, i):
    """ops[i] = SDPA of one query position over HF's static cache with the mask
    ``arange(S) <= position`` (proved, not assumed): gfx.attention_decode(q,
    cache_k, cache_v, M, 1 - c, scale) with lens = M + 1 - c."""
    from .lower import _SDPA
    m = ops[i]
    if m.name not in _SDPA:
        return None
    mask_at, causal_at, scale_at = _SDPA[m.name]
    q, k, v = m.args[0], m.args[1], m.args[2]
    if isinstance(mask_at, str):
        mask = m.kwargs.get(mask_at)
    else:
        mask = m.arg(mask_at, "attn_mask" if "math" in m.name or m.name.startswith(
            "aten.scaled") else "attn_bias") if mask_at is not None else None
    if not isinstance(mask, Tensor) or bool(m.arg(causal_at, "is_causal", False)) or \
            m.kwargs.get("dropout_p", 0.0):
        return None
    out = m.out[0] if isinstance(m.out, (list, tuple)) else m.out
    # bf16 keeps the general path, as for the rotary (match_rope)
    if not all(isinstance(t, Tensor) for t in (q, k, v, out)) or q.ndim != 4 or \
            q.shape[2] != 1 or k.shape != v.shape or q.dtype != k.dtype or q.dtype == "bf16":
        return None
    B, Hq, _, Dh = q.shape
    kc, vc = _kv_cache(ops, i, k, Hq), _kv_cache(ops, i, v, Hq)
    if kc is None or vc is None or kc[1] != vc[1] or kc[0].overlaps(vc[0]):
        return None
    S = kc[0].shape[2]
    if kc[0].shape[0] != B or kc[0].shape[3] != Dh:
        return None
    lm = _sdpa_mask(ops, i, mask, B, S, q.dtype)
    if lm is None:
        return None
    scale = m.kwargs.get("scale")
    if scale is None and scale_at is not None:
        scale = m.arg(scale_at, "scale")
    M, c = lm
    return Op("gfx.attention_decode", [q, kc[0], vc[0], M, 1 - c, float(scale or 0.0)], {},
              out, m.index)


MATCHERS.extend([("rope", match_rope), ("cache_write", match_cache_write),
                 ("attention_decode", match_attention_decode)])
