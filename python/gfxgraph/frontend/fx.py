# SPDX-License-Identifier: MIT
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

Host values.  Under dynamic shapes Dynamo passes sizes as int (SymInt)
inputs and a Python float it does not specialize (a norm's eps) as a CPU
0-dim tensor input that the graph reads with ``.item()``.  Both are host
values: the recording run sees real ints and the scalar's real value, the
op using it records it as a number, and the ``_local_scalar_dense`` that
reads it is no device work (not recorded).  A program built from them holds
them as constants, so they belong to its input signature (the compile
backend's ``_signature`` keeps their values): a new value is a new plan,
never a replay with the old one.
"""

import operator

import torch
from torch.utils._python_dispatch import TorchDispatchMode


_SCALAR_READ = "aten._local_scalar_dense.default"


class NodeRecorder(TorchDispatchMode):
    """(func, args, kwargs, out) per aten op, and per record the name of the
    FX node running (None outside an interpreted graph).  host: tensors
    that are host values (see the module's doc); reading one is not
    recorded.  A read of any other tensor is, and stays uncovered: its
    value is data the program computes, not a constant of the signature."""

    def __init__(self, host=()):
        super().__init__()
        self.records = []
        self.nodes = []
        self.node = None
        self.host = {id(t) for t in host}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.host and args and id(args[0]) in self.host and str(func) == _SCALAR_READ:
            return out
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


def record(gm, args, tag=True, host=()):
    """Run gm(*args) under a NodeRecorder; (its result, the recorder).
    tag: run node by node (torch.fx.Interpreter) so that each record names
    its node; else gm's own forward (a submodule whose ops need no tags).
    host: the indices of args that are host scalars (host_scalars)."""
    rec = NodeRecorder([args[i] for i in host])
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


# ---- host values ----------------------------------------------------------------

def _name(n):
    t = n.target
    return t if isinstance(t, str) else (getattr(t, "__name__", None) or str(t))


def _reads_scalar(n):
    """n reads the Python number out of its tensor input (Tensor.item, in
    whichever spelling the graph has it)."""
    if n.op == "call_method":
        return n.target == "item"
    if n.op == "call_function":
        return _name(n) == "item" or str(n.target) in (_SCALAR_READ, "aten.item.default")
    return False


def item_only_inputs(gm):
    """The indices of gm's placeholders that the graph only reads with
    .item(): how Dynamo passes a Python number it does not specialize."""
    out = set()
    for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        if n.users and all(_reads_scalar(u) for u in n.users):
            out.add(i)
    return frozenset(out)


def host_scalars(args, item_only=()):
    """The indices of args that are host scalars: CPU 0-dim tensors that
    the graph reads only with .item() (item_only), and with a graph on a
    GPU every CPU 0-dim tensor (an op given one takes it as a number: the
    frontend's live adapter bakes it into the program)."""
    zero, on_gpu = [], False
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            if a.device.type == "cpu" and a.dim() == 0:
                zero.append(i)
            elif a.device.type != "cpu":
                on_gpu = True
    return [i for i in zero if on_gpu or i in item_only]


def specialize(gm, args, host):
    """A copy of gm (sharing its parameters and submodules) in which each
    .item() of a host scalar input is the number args holds: what Inductor
    compiles for one input signature.  Compiled on its own, outside Dynamo's
    tracing, Inductor has no symbol for a value read from a tensor and
    refuses the .item() (DataDependentOutputException).  The placeholders
    stay, so the copy is called like gm.  gm itself when host is empty."""
    if not host:
        return gm
    g, env = _copy(gm)
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i in host:
        if i >= len(ph):
            continue
        value = args[i].item()
        for u in list(ph[i].users):
            if not _reads_scalar(u):
                continue
            nu = env[u]
            for user in list(nu.users):
                def sub(a, nu=nu):
                    return value if a is nu else a
                user.args = torch.fx.node.map_arg(user.args, sub)
                user.kwargs = torch.fx.node.map_arg(user.kwargs, sub)
            g.erase_node(nu)
    g.lint()
    return torch.fx.GraphModule(gm, g)


_SIZE_METHODS = ("size", "stride", "dim", "numel", "storage_offset")
_SIZE_FUNCS = ("aten.sym_size.int", "aten.sym_stride.int", "aten.sym_numel.default",
               "aten.sym_storage_offset.default")


def _host_read(n):
    """n reads a host value (an .item(), a size) out of graph inputs only."""
    if not n.all_input_nodes or \
            not all(a.op in ("placeholder", "get_attr") for a in n.all_input_nodes):
        return False
    if _reads_scalar(n):
        return True
    if n.op == "call_method":
        return n.target in _SIZE_METHODS
    return n.op == "call_function" and str(n.target) in _SIZE_FUNCS


def _copy(gm):
    """A copy of gm's graph (node names kept) and the node map."""
    g = torch.fx.Graph()
    if hasattr(gm.graph, "_codegen"):
        g._codegen = gm.graph._codegen        # how the graph takes and returns pytrees
    env = {}
    g.output(g.graph_copy(gm.graph, env))
    return g, env


def localize_host_reads(gm, where):
    """(a copy of gm, where) where each read of a host value out of the
    graph's inputs (an .item() of a host scalar, a size query) is done in
    the partition of its users, repeated in each when several use it
    (where: node name -> partition index, extended with the copies).  So a
    partition takes the input itself, never a number another partition
    read: Inductor, compiling a partition on its own, gets the .item() in
    its graph to specialize (specialize) instead of having to return the
    number it read.  gm and where themselves when it reads none."""
    if not any(_host_read(n) for n in gm.graph.nodes):
        return gm, where
    g, env = _copy(gm)
    where = dict(where)
    for old in list(gm.graph.nodes):
        if not _host_read(old):
            continue
        n = env[old]
        groups = {}
        for u in n.users:
            k = where.get(u.name)
            if u.op != "output" and k is not None:
                groups.setdefault(k, []).append(u)
        if not groups:
            continue
        ks = sorted(groups)
        where[n.name] = ks[0]
        for k in ks[1:]:
            with g.inserting_after(n):
                c = g.node_copy(n)
            where[c.name] = k
            for u in groups[k]:
                def sub(a, n=n, c=c):
                    return c if a is n else a
                u.args = torch.fx.node.map_arg(u.args, sub)
                u.kwargs = torch.fx.node.map_arg(u.kwargs, sub)
    g.lint()
    return torch.fx.GraphModule(gm, g), where


# in-place updates in an FX graph: Tensor methods ending in "_", operator's
# augmented assignments, item assignment, an out= argument
_INPLACE_FUNCS = {operator.setitem, operator.iadd, operator.isub, operator.imul,
                  operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
                  operator.iand, operator.ior, operator.ixor, operator.ilshift,
                  operator.irshift, operator.imatmul}


def mutates(gm):
    """gm may update memory it does not own (an input in place): running it
    again after a failed attempt could apply an update twice."""
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function", "call_module"):
            continue
        if n.op == "call_module" or "out" in n.kwargs:
            return True
        if n.op == "call_function" and n.target in _INPLACE_FUNCS:
            return True
        schema = getattr(n.target, "_schema", None)
        if schema is not None and schema.is_mutable:
            return True
        name = _name(n)
        if name.endswith("_") and not name.startswith("_") or name in ("__setitem__",) or \
                name.startswith("__i") and name.endswith("__"):
            return True
    return False
