"""An FX graph (what torch.compile hands its backend) -> the frontend's IR.
Imports torch.

The graph is run once on real tensors under a TorchDispatchMode, the same
kind of recorder enable() uses inside a CUDA-graph capture, with each
record tagged by the FX node that made it.  So the compile backend sees
exactly the aten ops, spellings and strides that enable()'s captures see
(the ones the patterns in patterns.py and the LOWER table are written and
tested against), instead of AOT autograd's functionalized graph, whose
spelling (functional index_copy plus a copy_ back, views as ops without
storages) and whose internals change between torch releases.  The run is
the call itself: its results are the call's results and an in-place
update (a KV cache's index_copy_) happens once.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class NodeRecorder(TorchDispatchMode):
    """(func, args, kwargs, out) per aten op, and per record the name of the
    FX node running (None outside an interpreted graph)."""

    def __init__(self):
        super().__init__()
        self.records = []
        self.nodes = []
        self.node = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.records.append((func, args, kwargs, out))
        self.nodes.append(self.node)
        return out


class _Tagger(torch.fx.Interpreter):
    def __init__(self, gm, rec):
        super().__init__(gm)
        self.rec = rec

    def run_node(self, n):
        self.rec.node = n.name
        try:
            return super().run_node(n)
        finally:
            self.rec.node = None


def record(gm, args, tag=True):
    """Run gm(*args) under a NodeRecorder; (its result, the recorder).
    tag: run node by node (torch.fx.Interpreter) so that each record names
    its node; else gm's own forward (a submodule whose ops need no tags)."""
    rec = NodeRecorder()
    with rec:
        out = _Tagger(gm, rec).run(*args) if tag else gm(*args)
    return out, rec


def compute_nodes(gm):
    """The nodes that run something, in graph order, and their inputs among
    them: (order, preds) for partition.plan."""
    order = [n.name for n in gm.graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
    keep = set(order)
    preds = {}
    for n in gm.graph.nodes:
        if n.name in keep:
            preds[n.name] = [a.name for a in n.all_input_nodes if a.name in keep]
    return order, preds


# calls that set global state for the nodes after them (Dynamo keeps a
# `with torch.no_grad()` inside the compiled function as such calls)
_GLOBAL_STATE = ("_set_grad_enabled", "set_grad_enabled", "_enter_autocast", "_exit_autocast")


def has_global_state(gm):
    """gm sets grad mode or autocast between its nodes: cut into partitions,
    a partition would not see the state its nodes ran under."""
    return any(n.op == "call_function" and getattr(n.target, "__name__", "") in _GLOBAL_STATE
               for n in gm.graph.nodes)


def is_static_input(t, node=None):
    """A parameter, a buffer or a tensor marked with
    torch._dynamo.mark_static_address (HF's StaticCache marks its caches):
    its address stays, so a program uses it in place."""
    if isinstance(t, torch.nn.Parameter):
        return True
    if getattr(t, "_dynamo_static_input_type", None) is not None:
        return True
    if node is not None:
        td = node.meta.get("tensor_dict") or {}
        if td.get("_dynamo_static_input_type") is not None:
            return True
    return False
