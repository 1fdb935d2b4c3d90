"""``torch.compile(model, backend="gfxgraph")``.

The backend partitions the FX graph Dynamo hands it into runs of ops the
daemon has (docs/ops.md) and leaves the rest to eager PyTorch:

- supported: ``F.linear`` / ``nn.Linear``, ``F.layer_norm`` /
  ``nn.LayerNorm`` (weight and bias, last dim), ``F.rms_norm`` /
  ``nn.RMSNorm`` (weight, last dim), ``F.gelu`` / ``nn.GELU``, ``F.silu`` /
  ``nn.SiLU``, softmax over the last dim, ``+`` and ``*`` of two tensors of
  one shape or a tensor and a ``[D]`` vector, ``*`` and ``/`` by a Python
  number (scale), ``clone``; every operand a contiguous CUDA tensor of one
  dtype (f32, f16, bf16);
- each maximal run of supported nodes (torch.fx's CapabilityBasedPartitioner)
  becomes one daemon program, built on its first call: parameters are
  registered in place (by IPC), other inputs are copied into staging
  buffers, intermediates are daemon scratch, outputs come back as new
  tensors; dim 0 of the inputs is the batch, bucketed (powers of two up to
  the largest batch seen; a larger batch rebuilds the program);
- every other node runs in eager PyTorch; its op is named once in a debug
  log (logger "gfxgraph") and counted in
  ``gfxgraph.stats()["local"]["compile_fallback_ops"]``;
- a partition the daemon cannot take after all (no daemon, the cpu backend,
  a define or replay error) runs eagerly from then on, logged once.

The name "gfxgraph" is registered with Dynamo on ``import gfxgraph`` when
torch is already imported, by ``gfxgraph.enable()``, by
``gfxgraph.register_compile_backend()``, and by a pip install's
``torch_dynamo_backends`` entry point; ``backend=gfxgraph.compile.gfxgraph_backend``
works without any of them.
"""

import logging
import operator

from .stats import local as _local
from .stats import note_replay
from .errors import Error

log = logging.getLogger("gfxgraph")
_logged = set()
_registered = [False]


def register():
    if _registered[0]:
        return
    from torch._dynamo import register_backend
    from torch._dynamo.backends.registry import _BACKENDS
    if "gfxgraph" not in _BACKENDS:
        register_backend(compiler_fn=gfxgraph_backend, name="gfxgraph")
    _registered[0] = True


def _note_unsupported(name):
    d = _local["compile_fallback_ops"]
    d[name] = d.get(name, 0) + 1
    if name not in _logged:
        _logged.add(name)
        log.debug("gfxgraph.compile: %s has no daemon op: it runs in eager PyTorch", name)


# ---- which FX nodes the daemon can run ------------------------------------

def _targets():
    import torch
    import torch.nn.functional as F
    t = {}
    for f in (F.linear, torch._C._nn.linear):
        t[f] = "linear"
    t[F.layer_norm] = "layernorm"
    t[torch.layer_norm] = "layernorm"
    if hasattr(F, "rms_norm"):
        t[F.rms_norm] = "rmsnorm"
    if hasattr(torch, "rms_norm"):
        t[torch.rms_norm] = "rmsnorm"
    t[F.gelu] = "gelu"
    t[torch._C._nn.gelu] = "gelu"
    t[F.silu] = "silu"
    if hasattr(torch._C._nn, "silu"):
        t[torch._C._nn.silu] = "silu"
    for f in (F.softmax, torch.softmax, torch.nn.functional.softmax):
        t[f] = "softmax"
    for f in (operator.add, torch.add, operator.iadd):
        t[f] = "add"
    for f in (operator.mul, torch.mul, operator.imul):
        t[f] = "mul"
    t[operator.truediv] = "div"
    t[torch.clone] = "clone"
    return t


_METHODS = {"add": "add", "mul": "mul", "softmax": "softmax", "clone": "clone",
            "add_": "add", "mul_": "mul", "div": "div"}


def _modules():
    import torch.nn as nn
    m = {nn.Linear: "linear", nn.LayerNorm: "layernorm", nn.GELU: "gelu", nn.SiLU: "silu",
         nn.Softmax: "softmax"}
    if hasattr(nn, "RMSNorm"):
        m[nn.RMSNorm] = "rmsnorm"
    return m


def _kind(node, gm, targets, modules):
    if node.op == "call_function":
        return targets.get(node.target)
    if node.op == "call_method":
        return _METHODS.get(node.target)
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        return modules.get(type(mod))
    return None


def _node_name(node):
    if node.op == "call_function":
        mod = getattr(node.target, "__module__", None) or "torch"
        return mod + "." + getattr(node.target, "__name__", str(node.target))
    if node.op == "call_method":
        return "Tensor." + str(node.target)
    return "%s(%s)" % (node.op, node.target)


def _val(n):
    """A node's example value (Dynamo's FakeTensor, or ShapeProp's meta)."""
    import torch
    if not hasattr(n, "meta"):
        return n
    v = n.meta.get("example_value", n.meta.get("val"))
    if isinstance(v, torch.Tensor):
        return v
    tm = n.meta.get("tensor_meta")
    return tm


def _is_tensorish(v):
    return v is not None and hasattr(v, "shape") and hasattr(v, "dtype")


def _supported(node, gm, targets, modules):
    """Whether the daemon can run node (checked on its example values)."""
    import torch
    from ._torchprog import DTYPES
    kind = _kind(node, gm, targets, modules)
    if kind is None:
        return False
    out = _val(node)
    if not _is_tensorish(out) or out.dtype not in DTYPES:
        return False
    dev = getattr(out, "device", None)
    if dev is not None and getattr(dev, "type", "cuda") not in ("cuda", "cpu"):
        return False
    args = list(node.args)
    ins = [_val(a) for a in args if isinstance(a, torch.fx.Node)]
    if any(not _is_tensorish(v) or v.dtype != out.dtype for v in ins):
        return False
    if len(out.shape) > 4 or len(out.shape) == 0:
        return False
    kw = node.kwargs
    if kind in ("add", "mul"):
        if len(args) < 2 or kw.get("alpha", 1) != 1 or "out" in kw:
            return False
        a, b = args[0], args[1]
        if not isinstance(a, torch.fx.Node):
            a, b = b, a
        if not isinstance(a, torch.fx.Node):
            return False
        av = _val(a)
        if isinstance(b, (int, float)) and not isinstance(b, bool):
            return kind == "mul" and tuple(av.shape) == tuple(out.shape)
        if not isinstance(b, torch.fx.Node):
            return False
        bv = _val(b)
        if tuple(av.shape) != tuple(out.shape):
            av, bv = bv, av
            if tuple(av.shape) != tuple(out.shape):
                return False
        return tuple(bv.shape) == tuple(av.shape) or tuple(bv.shape) == (av.shape[-1],)
    if kind == "div":
        return len(args) == 2 and isinstance(args[1], (int, float)) and \
            not isinstance(args[1], bool) and args[1] != 0 and isinstance(args[0], torch.fx.Node)
    if kind == "softmax":
        if node.op == "call_module":
            dim = gm.get_submodule(node.target).dim
        else:
            dim = kw.get("dim", args[1] if len(args) > 1 else None)
        if kw.get("dtype") is not None or (len(args) > 2 and args[2] is not None):
            return False
        return dim in (-1, len(out.shape) - 1)
    if kind == "layernorm":
        if node.op == "call_module":
            m = gm.get_submodule(node.target)
            return len(m.normalized_shape) == 1 and m.weight is not None and m.bias is not None
        shp = args[1] if len(args) > 1 else kw.get("normalized_shape")
        w = args[2] if len(args) > 2 else kw.get("weight")
        b = args[3] if len(args) > 3 else kw.get("bias")
        return shp is not None and len(shp) == 1 and isinstance(w, torch.fx.Node) and \
            isinstance(b, torch.fx.Node)
    if kind == "rmsnorm":
        if node.op == "call_module":
            m = gm.get_submodule(node.target)
            return len(m.normalized_shape) == 1 and m.weight is not None
        shp = args[1] if len(args) > 1 else kw.get("normalized_shape")
        w = args[2] if len(args) > 2 else kw.get("weight")
        return shp is not None and len(shp) == 1 and isinstance(w, torch.fx.Node)
    if kind == "linear":
        if node.op == "call_module":
            return True
        w = args[1] if len(args) > 1 else kw.get("weight")
        return isinstance(w, torch.fx.Node) and len(_val(w).shape) == 2
    if kind == "gelu":
        if node.op == "call_module":
            return gm.get_submodule(node.target).approximate in ("none", "tanh")
        return kw.get("approximate", "none") in ("none", "tanh")
    return kind in ("silu", "clone")


# ---- a partition run by the daemon ----------------------------------------

def _next_pow2(n):
    p = 1
    while p < n:
        p *= 2
    return p


class _Built:
    """One daemon program of a partition at one capacity (rows)."""

    def __init__(self, prog, staging, outputs, cap, events):
        self.prog, self.staging, self.outputs, self.cap, self.events = \
            prog, staging, outputs, cap, events


def _make_partition_class():
    import torch
    from ._torchprog import Unsupported

    class DaemonPartition(torch.nn.Module):
        """Runs a fused FX submodule as a daemon program (eager fallback)."""

        def __init__(self, submod, name):
            super().__init__()
            self.submod = submod
            self.part_name = name
            self.eager = False
            self.built = None
            self._cpu = False

        def _fail(self, why):
            if ("part", why) not in _logged:
                _logged.add(("part", why))
                log.warning("gfxgraph.compile: partition %s runs in eager PyTorch: %s",
                            self.part_name, why)
            self.eager = True
            _local["compile_eager_fallbacks"] += 1
            self._release()

        def _release(self):
            b, self.built = self.built, None
            if b is not None:
                try:
                    b.prog.release()
                except Error:
                    pass

        def forward(self, *args):
            if self.eager:
                return self.submod(*args)
            if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad
                                               for a in args):
                return self.submod(*args)    # autograd needs PyTorch's ops: inference only
            try:
                return self._run(args)
            except Unsupported as e:
                self._fail("%s" % e)
            except Error as e:
                self._fail("gfxgraphd: %s" % e)
            except Exception as e:   # noqa: BLE001 -- never break the model
                self._fail("%s: %s" % (type(e).__name__, e))
            return self.submod(*args)

        def _batch(self, args):
            for a in args:
                if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter) \
                        and a.dim() >= 1:
                    return int(a.shape[0])
            return 1

        @staticmethod
        def _sig(args):
            """What a program is built for besides the batch: each input's
            dims past the first, dtype and device."""
            return tuple((tuple(a.shape[1:]), a.dim(), a.dtype, a.device)
                         if isinstance(a, torch.Tensor) else type(a) for a in args)

        def _run(self, args):
            B = self._batch(args)
            b = self.built
            sig = self._sig(args)
            if b is None or B > b.cap or sig != b.sig:
                self._release()
                self.built = b = self._build(args, max(_next_pow2(B), 1))
                b.sig = sig
            for (i, buf, batched) in b.staging:
                a = args[i]
                (buf.narrow(0, 0, B) if batched else buf).copy_(a)
            if self._cpu:
                r = b.prog.replay(B)     # returns with the outputs in place
            elif b.events is not None:
                s = torch.cuda.current_stream()
                pre, pre_id, post, post_id = b.events
                pre.record(s)
                r = b.prog.replay(B, wait_event=pre_id, signal_event=post_id, async_=True)
                s.wait_event(post)
            else:
                torch.cuda.current_stream().synchronize()
                r = b.prog.replay(B)
            _local["compiled_replays"] += 1
            note_replay(r)
            outs = [(o.narrow(0, 0, B) if batched else o).clone() for (o, batched) in b.outputs]
            return outs[0] if self._single else tuple(outs)

        def _build(self, args, cap):
            from torch.fx.passes.shape_prop import ShapeProp
            from . import cudagraph
            from ._torchprog import DTYPES, Unsupported, TensorTable, alloc
            devs = {a.device.type for a in args if isinstance(a, torch.Tensor)}
            if len(devs) != 1 or not devs <= {"cuda", "cpu"}:
                raise Unsupported(self.part_name, "inputs on devices %s" % sorted(devs))
            cpu = devs == {"cpu"}
            backend = "cpu" if cpu else "hip"
            c = cudagraph._client(backend)
            if c is None:
                raise Unsupported("gfxgraphd", "no daemon with the %s backend" % backend)
            ShapeProp(self.submod).propagate(*args)
            B = self._batch(args)
            targets, modules = _targets(), _modules()
            table = TensorTable(c, cudagraph._state["storages"], op=self.part_name, cpu=cpu)
            self._cpu = cpu
            self._table = table
            tensors = table.tensors
            env, staging, nodes = {}, [], []
            out_bufs = {}          # fx node -> (static output tensor, batched)
            dev = None

            def meta(n):
                tm = n.meta.get("tensor_meta")
                if tm is None:
                    raise Unsupported(_node_name(n), "no shape")
                return tm

            def batched(shape):
                return len(shape) >= 1 and int(shape[0]) == B

            out_nodes, single = [], True
            for n in self.submod.graph.nodes:
                if n.op == "output":
                    r = n.args[0]
                    single = not isinstance(r, (tuple, list))
                    out_nodes = [r] if single else list(r)
            self._single = single
            wanted = set(out_nodes)
            idx = 0
            for n in self.submod.graph.nodes:
                if n.op == "placeholder":
                    a = args[idx]
                    i = idx
                    idx += 1
                    if not isinstance(a, torch.Tensor) or a.dtype not in DTYPES:
                        raise Unsupported(self.part_name, "an input that is not a float tensor")
                    dev = a.device
                    if isinstance(a, torch.nn.Parameter) and a.is_contiguous() and not cpu:
                        env[n] = table.name(a.detach(), list(a.shape))
                    elif isinstance(a, torch.nn.Parameter):
                        # cpu backend: weights copied into shared memory once
                        # (a later change of the parameter is not seen)
                        buf = alloc(list(a.shape), a.dtype, a.device)
                        buf.copy_(a.detach())
                        env[n] = table.name(buf, list(a.shape))
                    else:
                        bt = batched(a.shape)
                        shape = [int(d) for d in a.shape]
                        buf = alloc([cap] + shape[1:] if bt else shape, a.dtype, a.device)
                        staging.append((i, buf, bt))
                        env[n] = table.name(buf, list(buf.shape), batch=bt)
                    continue
                if n.op == "get_attr":
                    t = getattr(self.submod, n.target).detach()
                    if cpu or not t.is_contiguous():
                        buf = alloc(list(t.shape), t.dtype, t.device)
                        buf.copy_(t)
                        t = buf
                    env[n] = table.name(t, list(t.shape))
                    continue
                if n.op == "output":
                    continue
                kind = _kind(n, self.submod, targets, modules)
                if kind is None:
                    raise Unsupported(_node_name(n), "not a daemon op")
                tm = meta(n)
                if tm.dtype not in DTYPES:
                    raise Unsupported(_node_name(n), "dtype %s" % tm.dtype)
                bt = batched(tm.shape)
                shape = [int(d) for d in tm.shape]
                if n in wanted:
                    o = alloc([cap] + shape[1:] if bt else shape, tm.dtype, dev)
                    out_bufs[n] = (o, bt)
                    onm = table.name(o, list(o.shape), batch=bt)
                else:
                    onm = "s%d" % len(tensors)
                    tensors[onm] = {"dtype": DTYPES[tm.dtype],
                                    "shape": (["batch"] + shape[1:]) if bt else shape,
                                    "scratch": True}
                env[n] = onm
                nodes.extend(self._nodes_for(n, kind, env, onm))
            final = []
            for on in out_nodes:
                if on not in out_bufs:
                    raise Unsupported(self.part_name, "an output that is not computed here")
                final.append(out_bufs[on])
            if not nodes:
                raise Unsupported(self.part_name, "nothing to run")
            cudagraph._state["seq"] += 1
            spec = {"name": "torch_compile_%d" % cudagraph._state["seq"], "tensors": tensors,
                    "nodes": nodes,
                    "buckets": [1 << k for k in range(cap.bit_length()) if (1 << k) <= cap]}
            prog = c.define(spec)
            events = None
            if cudagraph._state["sync"] == "events" and not cpu:
                try:
                    pre = torch.cuda.Event(interprocess=True)
                    post = torch.cuda.Event(interprocess=True)
                    pre.record()
                    post.record()
                    torch.cuda.current_stream().synchronize()
                    events = (pre, c.register_event(pre), post, c.register_event(post))
                except Exception:   # noqa: BLE001
                    events = None
            _local["compiled_partitions"] += 1
            built = _Built(prog, staging, final, cap, events)
            built.keep = table.keep
            self._table = None
            return built

        def _nodes_for(self, n, kind, env, out):
            import torch
            args, kw = list(n.args), dict(n.kwargs)

            def nm(x):
                if isinstance(x, torch.fx.Node):
                    return env[x]
                raise Unsupported(_node_name(n), "a non-tensor operand %r" % (x,))

            def one(op, ins, attrs=None):
                d = {"op": op, "inputs": ins, "outputs": [out]}
                if attrs:
                    d["attrs"] = attrs
                return [d]

            if n.op == "call_module":
                m = self.submod.get_submodule(n.target)
                x = nm(args[0])
                ps = self._params(m)
                if kind == "linear":
                    return one("linear", [x] + ps)
                if kind == "layernorm":
                    return one("layernorm", [x] + ps, {"eps": float(m.eps)})
                if kind == "rmsnorm":
                    eps = m.eps if m.eps is not None else torch.finfo(m.weight.dtype).eps
                    return one("rmsnorm", [x] + ps, {"eps": float(eps)})
                if kind == "gelu":
                    return one("gelu", [x], {"approximate": m.approximate})
                return one(kind, [x])
            if kind in ("add", "mul"):
                a, b = args[0], args[1]
                if not isinstance(a, torch.fx.Node):
                    a, b = b, a
                if isinstance(b, (int, float)):
                    return one("scale", [nm(a)], {"scale": float(b)})
                if tuple(a.meta["tensor_meta"].shape) != tuple(n.meta["tensor_meta"].shape):
                    a, b = b, a          # [D] + x: the full-shape operand first
                return one(kind, [nm(a), nm(b)])
            if kind == "div":
                return one("scale", [nm(args[0])], {"scale": 1.0 / float(args[1])})
            if kind == "softmax":
                return one("softmax", [nm(args[0])])
            if kind == "clone":
                return one("copy", [nm(args[0])])
            if kind in ("gelu", "silu"):
                attrs = {"approximate": kw.get("approximate", "none")} if kind == "gelu" else None
                return one(kind, [nm(args[0])], attrs)
            if kind == "linear":
                w = args[1] if len(args) > 1 else kw.get("weight")
                b = args[2] if len(args) > 2 else kw.get("bias")
                ins = [nm(args[0]), nm(w)]
                if b is not None:
                    ins.append(nm(b))
                return one("linear", ins)
            if kind == "layernorm":
                w = args[2] if len(args) > 2 else kw.get("weight")
                b = args[3] if len(args) > 3 else kw.get("bias")
                eps = args[4] if len(args) > 4 else kw.get("eps", 1e-5)
                return one("layernorm", [nm(args[0]), nm(w), nm(b)], {"eps": float(eps)})
            if kind == "rmsnorm":
                w = args[2] if len(args) > 2 else kw.get("weight")
                eps = args[3] if len(args) > 3 else kw.get("eps")
                if eps is None:
                    eps = torch.finfo(n.meta["tensor_meta"].dtype).eps
                return one("rmsnorm", [nm(args[0]), nm(w)], {"eps": float(eps)})
            raise Unsupported(_node_name(n), "not a daemon op")

        def _params(self, m):
            from ._torchprog import alloc
            out = []
            for p in (getattr(m, "weight", None), getattr(m, "bias", None)):
                if p is None:
                    continue
                p = p.detach()
                if self._cpu or not p.is_contiguous():
                    buf = alloc(list(p.shape), p.dtype, p.device)   # cpu: into shared memory
                    buf.copy_(p)
                    p = buf
                out.append(self._table.name(p, list(p.shape)))
            return out

    return DaemonPartition


_partition_cls = [None]


def gfxgraph_backend(gm, example_inputs, **kwargs):
    """The torch.compile backend: gm with its daemon-runnable runs of ops
    replaced by DaemonPartition modules; returns its forward."""
    import torch
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase
    targets, modules = _targets(), _modules()

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            if node.op not in ("call_function", "call_method", "call_module"):
                return False
            try:
                ok = _supported(node, gm, targets, modules)
            except Exception:   # noqa: BLE001
                ok = False
            if not ok:
                _note_unsupported(_node_name(node))
            return ok

    try:
        parts = CapabilityBasedPartitioner(gm, Support(),
                                           allows_single_node_partition=True).propose_partitions()
        if not parts:
            return gm.forward
        fused = CapabilityBasedPartitioner(gm, Support(), allows_single_node_partition=True) \
            .fuse_partitions(parts)
    except Exception as e:   # noqa: BLE001
        log.warning("gfxgraph.compile: partitioning failed (%s): the graph runs in eager "
                    "PyTorch", e)
        return gm.forward
    if _partition_cls[0] is None:
        _partition_cls[0] = _make_partition_class()
    Part = _partition_cls[0]
    for node in list(fused.graph.nodes):
        if node.op == "call_module" and node.target.startswith("fused_"):
            sub = fused.get_submodule(node.target)
            setattr(fused, node.target, Part(sub, node.target))
    fused.recompile()
    log.debug("gfxgraph.compile: %d daemon partition(s)", len(parts))
    _ = torch
    return fused.forward
