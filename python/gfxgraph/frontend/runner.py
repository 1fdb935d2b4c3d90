# SPDX-License-Identifier: MIT
"""Graph runners: the same step captured at several batch sizes (SGLang's
CudaGraphRunner, vLLM: bs 8, 4, 2, 1 in one memory pool, largest first,
the static inputs sliced ``[:bs]`` from buffers of the largest size) ->
one daemon program whose buckets are those sizes.

Captures merge when their lowered programs are the same up to the batch:
the same nodes over the same tensor names, every tensor of the same dtype
and kind, and each tensor's shape either equal in all of them or differing
in dim 0 only, as ``r * bs`` with one ``r`` for the tensor (a row of ``r``
elements per batch row after the lowering collapsed dims): that tensor gets
the ``"batch"`` dim (``["batch", r, ...]`` where r > 1).  A strided copy's
1-D source is the storage span its strides reach, which grows with the
batch without being a multiple of it: it is declared at the largest
capture's span, which holds every smaller one.  A tensor in memory outside
the graph pool (weights, caches, the static inputs) must be the same memory
in every capture; the pool's memory is the largest capture's, which holds
the rows of every bucket (its batch rows start at the same place).  The
smaller captures' own output tensors then receive their rows from the
largest capture's after each replay (the live layer does that copy).

A tensor that gains the ["batch", r] dim has one dim more than in the
captures, so the attributes that index its dims follow (_node_at_rank): a
strided copy's strides for its collapsed bs * r rows become the batch's
r * s0 and s0 for the r rows, a cat's or index_copy's dim shifts by one.

The daemon checks the merged program at every bucket when it is defined;
where it refuses, the captures keep a program each.  A capture at batch 1
keeps its own program: the lowering drops size-1 dims when it collapses a
view's dims, so at batch 1 the batch dim is gone from the nodes themselves
(a strided copy has one stride fewer, a broadcast operand's name and shape
another), not only from the tensors' shapes; merging it would mean
lowering the step again as if its batch were not 1.
Torch-free: CI merges synthetic captures with it.
"""

import math

from .ir import Unsupported


class NoMerge(Exception):
    """The captures are not one step at different batch sizes (says why)."""


class Member:
    """One capture: its Plan, its Graph, and ``where(sid)``, the identity of
    a storage's memory (a data pointer live, any key in a test): equal keys
    are the same memory."""

    def __init__(self, plan, graph, where):
        self.plan, self.graph, self.where = plan, graph, where
        self.batch = None


class Merged:
    """The merged program: ``tensors`` (storage ids those of ``base``, the
    largest capture), ``nodes``, ``buckets`` and each member's batch
    (``Member.batch``).  ``spec`` as Plan.spec."""

    def __init__(self, base, tensors, nodes, buckets, members):
        self.base, self.tensors, self.nodes = base, tensors, nodes
        self.buckets, self.members = buckets, members
        self.storages = sorted({t["storage"] for t in tensors.values() if "storage" in t})
        self.report = dict(base.plan.report, buckets=list(buckets), merged=len(members))

    def spec(self, name, buffers):
        tensors = {}
        for n, t in self.tensors.items():
            t = dict(t)
            if "storage" in t:
                t["buffer"] = buffers[t.pop("storage")]
            tensors[n] = t
        return {"name": name, "tensors": tensors, "nodes": [dict(x) for x in self.nodes],
                "buckets": list(self.buckets)}


def _flex_sources(nodes):
    """Tensors read as a strided copy's 1-D storage span."""
    return {n["inputs"][0] for n in nodes if n["op"] == "strided_copy"}


def merge(members):
    """One Merged program for the members (captures of one step at different
    batch sizes, any order); NoMerge says why not."""
    if len(members) < 2:
        raise NoMerge("one capture")
    plans = [m.plan for m in members]
    p0 = plans[0]
    for p in plans[1:]:
        if len(p.nodes) != len(p0.nodes):
            raise NoMerge("%d nodes against %d" % (len(p.nodes), len(p0.nodes)))
        for i, (a, b) in enumerate(zip(p.nodes, p0.nodes)):
            if a != b:
                raise NoMerge("node %d differs: %s against %s" % (i, a, b))
        if set(p.tensors) != set(p0.tensors):
            raise NoMerge("different tensors")
    flex = _flex_sources(p0.nodes)
    # the batch of each member: the gcd of the dim 0 of the tensors that vary
    varying = {}
    for name in p0.tensors:
        specs = [p.tensors[name] for p in plans]
        kinds = [tuple(k for k in ("storage", "scratch", "view") if k in s) for s in specs]
        if any(k != kinds[0] for k in kinds) or \
                any(s.get("dtype") != specs[0].get("dtype") for s in specs) or \
                any(s.get("view") != specs[0].get("view") for s in specs):
            raise NoMerge("tensor %s differs in kind or dtype" % name)
        shapes = [list(s["shape"]) for s in specs]
        if all(sh == shapes[0] for sh in shapes):
            continue
        if name in flex and all(len(sh) == 1 for sh in shapes) and "storage" in specs[0]:
            varying[name] = None
            continue
        if any(len(sh) != len(shapes[0]) or sh[1:] != shapes[0][1:] for sh in shapes):
            raise NoMerge("tensor %s: shapes %s differ past dim 0" % (name, shapes))
        varying[name] = [sh[0] for sh in shapes]
    rows = [v for v in varying.values() if v is not None]
    if not rows:
        raise NoMerge("no tensor follows a batch")
    batches = [0] * len(members)
    for v in rows:
        batches = [math.gcd(b, d) for b, d in zip(batches, v)]
    if len(set(batches)) != len(batches):
        raise NoMerge("two captures at one batch size (%s)" % batches)
    for v in rows:
        r = {d // b for d, b in zip(v, batches)}
        if len(r) != 1 or any(d % b for d, b in zip(v, batches)):
            raise NoMerge("a tensor's rows %s do not follow the batches %s" % (v, batches))
    for m, b in zip(members, batches):
        m.batch = b
    bi = max(range(len(members)), key=lambda i: batches[i])
    base = members[bi]
    # memory: outside the pool the same in every capture; in the pool, the
    # base's, one storage of a member for one of the base's
    pool_map = [dict() for _ in members]
    for name, s0 in base.plan.tensors.items():
        if "storage" not in s0:
            continue
        for k, m in enumerate(members):
            s = m.plan.tensors[name]
            st, st0 = m.graph.storages[s["storage"]], base.graph.storages[s0["storage"]]
            if st.external != st0.external:
                raise NoMerge("tensor %s is in the pool in one capture only" % name)
            if s["offset"] != s0["offset"]:
                raise NoMerge("tensor %s at byte offsets %d and %d" % (name, s["offset"],
                                                                     s0["offset"]))
            if st.external:
                if m.where(st.id) != base.where(st0.id):
                    raise NoMerge("tensor %s is other memory in another capture" % name)
            elif pool_map[k].setdefault(st.id, st0.id) != st0.id:
                raise NoMerge("tensor %s: the pool's storages do not correspond" % name)
    tensors = {}
    for name, s0 in base.plan.tensors.items():
        t = dict(s0)
        v = varying.get(name, 0)
        if v is None:
            if max(m.plan.tensors[name]["shape"][0] for m in members) != t["shape"][0]:
                raise NoMerge("tensor %s: the largest capture's span is not the largest" % name)
        elif v:
            r = v[bi] // batches[bi]
            rest = list(t["shape"][1:])
            shape = ["batch"] + ([r] if r > 1 else []) + rest
            if len(shape) > 4:
                raise NoMerge("tensor %s would need %d dims" % (name, len(shape)))
            t["shape"] = shape
        tensors[name] = t
    nodes = [_node_at_rank(n, base.plan.tensors, tensors) for n in base.plan.nodes]
    return Merged(base, tensors, nodes, sorted(batches), members)


def _split(name, before, after):
    """Whether tensor `name`'s dim 0 of bs * r rows became ["batch", r]."""
    return len(after[name]["shape"]) == len(before[name]["shape"]) + 1


def _node_at_rank(n, before, after):
    """Node n of the largest capture, its attributes made to index the dims
    of its tensors in the merged program: a tensor whose collapsed dim 0 of
    bs * r rows became ["batch", r] has one dim more, and an attribute that
    names a dim or gives a stride per dim would otherwise apply to the
    wrong one (a strided copy's s0 for its bs * r rows read as the batch's
    stride, and the r rows given s1's)."""
    n = dict(n)
    names = list(n["inputs"]) + list(n["outputs"])
    split = [x for x in names if _split(x, before, after)]
    if not split:
        return n
    attrs = dict(n.get("attrs") or {})
    out = n["outputs"][0]
    if n["op"] == "strided_copy" and out in split:
        r = after[out]["shape"][1]
        nd = len(before[out]["shape"])
        st = [attrs.get("s%d" % i, 0) for i in range(nd)]
        st = [st[0] * r] + st
        attrs = {k: v for k, v in attrs.items() if not (k[:1] == "s" and k[1:].isdigit())}
        attrs.update({"s%d" % i: s for i, s in enumerate(st)})
    elif "dim" in attrs:
        # every operand that has the dim must have gained it alike
        nd = len(before[out]["shape"])
        if any(len(before[x]["shape"]) == nd and not _split(x, before, after) for x in names):
            raise NoMerge("node %s: operands %s follow the batch in dim 0, others not"
                          % (n["op"], split))
        d = attrs["dim"] % nd
        if d == 0:
            raise NoMerge("node %s along dim 0, which holds the batch's rows" % n["op"])
        attrs["dim"] = d + 1
    n["attrs"] = attrs
    return n


def merge_or_none(members):
    """merge(members), or (None, why)."""
    try:
        return merge(members), None
    except (NoMerge, Unsupported) as e:
        return None, str(e)
