# SPDX-License-Identifier: MIT
"""The PyTorch frontend: the recorded aten ops of a captured step -> one
daemon program.

    graph = Graph.from_json(doc)          # or torchrec.graph_of(records) live
    plan = build(graph)                   # passes + lowering; Unsupported names the op
    spec = plan.spec("name", buffers)     # buffers: storage id -> Buffer

The stages (docs/python.md, "The PyTorch frontend"): the IR (ir.py: ops over
(storage, offset, shape, stride, dtype) tensors), dead-op elimination
(passes.py), recognition of fused forms (patterns.py: RMSNorm, GELU and SiLU
spellings, silu(a) * b), lowering of every op through one table (lower.py,
``LOWER``) onto the daemon's ops, with the layout work in build.py.
Torch-free: CI runs it on recorded traces without torch.
"""

from .ir import Graph, Op, Storage, Tensor, Unsupported
from .build import Builder
from .lower import _SDPA, LOWER, VIEWS, lower_op, scratch_intermediates
from .passes import eliminate_dead
from .patterns import recognize

__all__ = ["Graph", "Op", "Storage", "Tensor", "Unsupported", "Plan", "build", "LOWER", "VIEWS"]

# ops with several results of which the daemon produces the first only
_FIRST_ONLY = ("aten.native_layer_norm.default", "aten._fused_rms_norm.default") + tuple(_SDPA)


class Plan:
    """A lowered step: ``tensors`` (name -> map; a buffer tensor names its
    step storage as ``storage`` and a byte ``offset``), ``nodes``,
    ``storages`` (the storage ids the program uses) and ``report`` (what
    the passes did)."""

    def __init__(self, builder, report):
        self.tensors = builder.tensors
        self.nodes = builder.nodes
        self.node_src = builder.node_src
        self.storages = sorted(builder.storages_used)
        self.report = report

    def first_missing(self, daemon_ops):
        """(daemon op, the aten op it lowers) for the first node whose op
        is not in daemon_ops, or None."""
        for n, src in zip(self.nodes, self.node_src):
            if n["op"] not in daemon_ops:
                return n["op"], src
        return None

    def source_of(self, message):
        """The aten op (with operands) behind the node a daemon error names
        ("node N (op) ..."), or None."""
        import re
        m = re.search(r"node (\d+)", message or "")
        if m and int(m.group(1)) < len(self.node_src):
            return self.node_src[int(m.group(1))]
        return None

    def spec(self, name, buffers, buckets=(1,)):
        """The program.define map, binding each storage id to buffers[id]
        (a Buffer or a buffer id)."""
        tensors = {}
        for n, t in self.tensors.items():
            t = dict(t)
            if "storage" in t:
                t["buffer"] = buffers[t.pop("storage")]
            tensors[n] = t
        return {"name": name, "tensors": tensors, "nodes": [dict(x) for x in self.nodes],
                "buckets": list(buckets)}


def build(graph):
    """Run the passes over graph and lower it; a Plan, or Unsupported naming
    the first op the daemon cannot run (with its operands' shapes, dtypes
    and strides)."""
    ops = [op for op in graph.ops if op.name not in VIEWS]
    live = eliminate_dead(graph, ops)
    fused = {}
    ops2 = eliminate_dead(graph, recognize(live, fused))
    b = Builder()
    unproduced = []
    for op in ops2:
        for t in op.tensors_in():
            for u in unproduced:
                if t.overlaps(u):
                    raise Unsupported(op.name, "reads %s, a secondary result (a norm's "
                                      "statistics, attention's log-sum-exp) that the daemon "
                                      "does not produce" % t.describe())
        lower_op(b, op)
        outs = op.tensors_out()
        unproduced = [u for u in unproduced if not any(o.overlaps(u) for o in outs)]
        if op.name in _FIRST_ONLY and isinstance(op.out, (list, tuple)):
            unproduced.extend(t for t in op.out[1:] if isinstance(t, Tensor) and t.numel)
    scratch_intermediates(graph, b)
    report = {"ops": len(graph.ops), "compute_ops": len(ops), "live_ops": len(live),
              "lowered_ops": len(ops2), "fused": fused, "nodes": len(b.nodes)}
    return Plan(b, report)
