# SPDX-License-Identifier: MIT
"""Which parts of a torch.compile graph the daemon runs: per-node coverage
and the partitioning rule of the compile backend (gfxgraph.compile).
Torch-free: CI tests it on plain data and on IR graphs without torch.

A graph node (an FX node) is *covered* when every aten op it ran lowers
onto daemon ops this daemon has (``LOWER`` in lower.py, the same table
enable()'s captures use), *uncovered* when one does not, and *neutral* when
it ran no device work (views, tuple indexing, shape arithmetic): a neutral
node joins whichever partition its inputs are in.

``plan`` returns what the backend does with the graph:

- ``daemon``: no uncovered node: the whole graph is one daemon program;
- ``mixed``: covered and uncovered nodes in at most ``max_partitions``
  alternating partitions (the fewest a topological order allows): the
  covered ones are daemon programs, the others go to Inductor;
- ``inductor``: nothing covered, or more partitions than that: each extra
  partition is a round trip between the caller's stream and the daemon, and
  a graph cut into many small pieces loses Inductor's fusion across them,
  so the whole graph is handed to Inductor;
- ``none``: no device work at all.
"""

from .build import Builder
from .ir import Unsupported
from .lower import VIEWS, lower_op

DAEMON = "daemon"
INDUCTOR = "inductor"

# the default most partitions a graph is split into before it goes to
# Inductor whole (GFXGRAPH_COMPILE_MAX_PARTITIONS overrides it)
MAX_PARTITIONS = 3


def _segments(order, preds, covered, first_kind):
    """ASAP assignment of nodes to alternating segments 0, 1, 2, ... whose
    kinds are first_kind, not first_kind, ...: each node goes to the first
    segment of its kind at or after its inputs' segments.  That is the
    earliest segment any valid cut can give it, so the last segment index
    is the fewest alternations a cut starting with first_kind needs."""
    seg = {}
    for n in order:
        lo = 0
        for p in preds.get(n, ()):
            if p in seg:
                lo = max(lo, seg[p])
        c = covered.get(n)
        if c is None:
            seg[n] = lo
        else:
            kind = first_kind if lo % 2 == 0 else (not first_kind)
            seg[n] = lo if kind == bool(c) else lo + 1
    return seg


def _collect(order, seg, covered, first_kind):
    """[(kind, [nodes])] in segment order, neutral-only segments merged into
    the next one (the last into the one before), equal kinds next to each
    other merged."""
    if not order:
        return []
    top = max(seg.values())
    groups = [[] for _ in range(top + 1)]
    for n in order:
        groups[seg[n]].append(n)
    out = []
    pending = []            # neutral-only segments waiting for a real one
    for i, g in enumerate(groups):
        if not g:
            continue
        kind = first_kind if i % 2 == 0 else (not first_kind)
        if all(covered.get(n) is None for n in g):
            pending.extend(g)
            continue
        nodes = pending + g
        pending = []
        k = DAEMON if kind else INDUCTOR
        if out and out[-1][0] == k:
            out[-1][1].extend(nodes)
        else:
            out.append((k, nodes))
    if pending:
        if out:
            out[-1][1].extend(pending)
        else:
            out.append((None, pending))
    return out


def partitions(order, preds, covered):
    """The fewest alternating partitions of the nodes `order` (topological)
    with inputs `preds` (node -> iterable of nodes; others than those of
    `order` are ignored) and `covered` (node -> True, False or None for
    neutral): [(DAEMON or INDUCTOR, [nodes in order])].  Every edge goes
    from a partition to itself or a later one."""
    best = None
    for first in (True, False):
        seg = _segments(order, preds, covered, first)
        parts = _collect(order, seg, covered, first)
        if best is None or len(parts) < len(best):
            best = parts
    return best or []


def plan(order, preds, covered, max_partitions=MAX_PARTITIONS):
    """What the compile backend does with a graph (see the module's doc):
    {"mode": "daemon" | "mixed" | "inductor" | "none", "partitions":
    [(kind, [nodes])] as run (one for daemon and inductor), "split": how
    many partitions the alternating cut has (what a mixed run would use)}."""
    order = list(order)
    kinds = {covered.get(n) for n in order}
    if True not in kinds and False not in kinds:
        return {"mode": "none", "partitions": [], "split": 0}
    if False not in kinds:
        return {"mode": "daemon", "partitions": [(DAEMON, order)], "split": 1}
    if True not in kinds:
        return {"mode": "inductor", "partitions": [(INDUCTOR, order)], "split": 1}
    parts = partitions(order, preds, covered)
    if len(parts) > max(1, int(max_partitions)):
        return {"mode": "inductor", "partitions": [(INDUCTOR, order)], "split": len(parts)}
    return {"mode": "mixed", "partitions": parts, "split": len(parts)}


# ---- coverage of IR ops ------------------------------------------------------

def op_covered(op, daemon_ops=None, refused=()):
    """None when op lowers onto daemon ops (all in daemon_ops when that is
    given and not empty), else why not (a string naming the op and its
    operands).  Views are covered.  refused: aten op names a daemon refused
    to define."""
    if op.name in VIEWS:
        return None
    if op.name in refused:
        return "%s: the daemon refused its node; operands %s" % (op.name, op.describe())
    b = Builder()
    try:
        lower_op(b, op)
    except Unsupported as e:
        return str(e)
    except Exception as e:   # noqa: BLE001 -- a lowering that cannot take these operands
        return "%s: %s: %s; operands %s" % (op.name, type(e).__name__, e, op.describe())
    if daemon_ops:
        for n in b.nodes:
            if n["op"] not in daemon_ops:
                return "%s: lowers to the daemon op %r, which this daemon does not have; " \
                       "operands %s" % (op.name, n["op"], op.describe())
    return None


def node_coverage(graph, node_of_op, nodes, daemon_ops=None, refused=()):
    """Per node of `nodes`: True (covered), False (an op is not) or None
    (no device work), from the IR graph's ops and node_of_op (op index ->
    node).  Returns (covered, uncovered) with uncovered: node -> [(aten op
    name, why)]."""
    covered = {n: None for n in nodes}
    uncovered = {}
    for op in graph.ops:
        n = node_of_op.get(op.index)
        if n is None or n not in covered:
            continue
        if op.name in VIEWS:
            continue
        why = op_covered(op, daemon_ops, refused)
        if why is None:
            if covered[n] is None:
                covered[n] = True
        else:
            covered[n] = False
            uncovered.setdefault(n, []).append((op.name, why))
    return covered, uncovered
