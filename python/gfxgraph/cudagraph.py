"""gfxgraph.enable(): torch.cuda.CUDAGraph / torch.cuda.graph through the
daemon.

While enabled, ``torch.cuda.CUDAGraph`` is a subclass of PyTorch's whose
capture also records the aten ops of the captured region with a
TorchDispatchMode (the ops run normally: PyTorch captures its own graph as
always).  At capture_end the recorded ops are translated into a daemon
program (docs/ops.md: copy, add, mul, scale, gelu, silu, layernorm, rmsnorm,
linear, softmax; views and allocations need no node) over the tensors they
touch, whose storages are registered by IPC, so the outputs stay the tensors
the user holds.  ``replay()`` then replays the program through the daemon
(libgfxgraph-client: the fast path when the daemon offers it).

When a recorded op has no daemon equivalent, or anything else about the
capture cannot be expressed (a CPU scalar operand, a non-contiguous view, a
mixed-dtype op, memory that cannot be shared by IPC, no daemon), the capture
keeps PyTorch's own CUDA graph: ``replay()`` is PyTorch's, the capture is
counted in ``gfxgraph.stats()["local"]["fallback_count"]`` (with the op in
``fallback_ops``), and the reason is logged once per op name (logger
"gfxgraph").  Nothing raises: a capture that cannot go to the daemon runs as
it would without gfxgraph.

Ordering with the user's stream: by default (``sync="stream"``) replay()
waits on the host for the current stream (polling it for up to 200 us, then
synchronize()), so the work you queued before it (the static input's
``copy_``) is done, then replays and returns when
the daemon's work is done.  With ``sync="gpu"`` replay() records an
interprocess CUDA event on the current stream instead and the daemon's
stream waits for it on the GPU: no host round trip, but an interprocess
event to record and wait for.  With ``sync="events"`` the daemon also
records an event that the current stream waits for, and replay() returns at
once, asynchronous like a CUDA graph's.  Measured on an H100 under MPS (one
run, bench/bench_python.py, a 32-row f32 MLP step with its input copy):
"stream" 84.6 us, "gpu" 91.4, "events" 94.8, PyTorch's own graph 90.0.
Where interprocess events cannot be registered, "gpu" and "events" fall
back to "stream" (logged once).

On NVIDIA without MPS the GPU time-slices between your process and the
daemon's: any kernel of yours right before a replay (the input's copy_)
costs a context switch, about 300 us on an H100.  The daemon reports which
(``gpu_sharing`` in hello and health), and the first capture logs it once
when there is no MPS; docs/python.md says how to run under MPS.
"""

import logging
import threading
import time

from .stats import local as _local
from .stats import note_replay
from .errors import Error

log = logging.getLogger("gfxgraph")

_lock = threading.RLock()
_state = {
    "enabled": False,
    "orig": None,            # (CUDAGraph, graph) of PyTorch
    "socket": None,
    "sync": "stream",
    "client": None,
    "client_error": None,
    "storages": {},
    "logged": set(),
    "seq": 0,
}


def is_enabled():
    return _state["enabled"]


def _log_once(key, msg, *a):
    if key not in _state["logged"]:
        _state["logged"].add(key)
        log.warning(msg, *a)


def _client(backend="hip"):
    """The process's Client (connected on first use); None when the daemon
    cannot be reached or runs another backend than `backend` (logged once;
    captures then stay with PyTorch)."""
    with _lock:
        c = _state["client"]
        if c is not None and c.connected:
            return c if c.backend == backend else None
        from .client import Client
        try:
            c = Client(_state["socket"], name="gfxgraph-torch")
        except Error as e:
            _log_once(("connect", e.code), "gfxgraph: cannot reach gfxgraphd (%s); CUDA graphs "
                      "stay with PyTorch", e)
            return None
        _state["client"] = c
        _state["storages"] = {}
        if c.backend != backend:
            _log_once(("backend", c.backend, backend), "gfxgraph: gfxgraphd runs the %s backend; "
                      "work on %s tensors stays with PyTorch", c.backend,
                      "CUDA" if backend == "hip" else "CPU")
            return None
        _check_sharing(c.socket)
        return c


def _check_sharing(path):
    """Say once when the daemon at `path` (the one just connected to)
    reports that NVIDIA time-slices the GPU between it and this process:
    then every kernel of this process right before a replay costs a context
    switch, and MPS is the remedy.  Asked once a process, briefly."""
    if ("sharing",) in _state["logged"] or _state.get("sharing_checked") == path:
        return
    _state["sharing_checked"] = path
    from .stats import server_info
    try:
        dev = (server_info(path, timeout=2.0) or {}).get("device") or {}
    except Exception:   # noqa: BLE001 -- advice only
        return
    if dev.get("gpu_sharing") == "time-sliced":
        _log_once(("sharing",), "gfxgraph: gfxgraphd reports no NVIDIA MPS: the GPU "
                  "time-slices between this process and the daemon, so a kernel of yours "
                  "right before replay() (such as the input's copy_) costs a GPU context "
                  "switch, about 300 us on an H100; run both under MPS (docs/python.md)")


# How long replay() polls the caller's stream before it blocks in
# synchronize(): a step's input copy is done within microseconds, and
# polling sees that 2-5 us sooner than synchronize() (H100 under MPS, one
# run: a 32-row MLP step 78.8 against 81.2 us, the decode chain 70.3
# against 74.9), while long work queued before a replay still gets the
# blocking wait instead of a spinning thread.
_POLL_NS = 200_000


def _wait_stream(s):
    end = time.perf_counter_ns() + _POLL_NS
    while not s.query():
        if time.perf_counter_ns() > end:
            s.synchronize()
            return


def _fallback(op, why):
    _local["fallback_count"] += 1
    fo = _local["fallback_ops"]
    fo[op] = fo.get(op, 0) + 1
    _log_once(("op", op), "gfxgraph: %s (%s): this capture replays with PyTorch's own CUDA graph "
              "(logged once per op)", op, why)


# ---- aten -> daemon ops ---------------------------------------------------

# ops with no device work of their own: views, allocations, metadata
_PASS = {
    "aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
    "aten.t.default", "aten.transpose.int", "aten.detach.default", "aten.alias.default",
    "aten.expand.default", "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.default",
    "aten.squeeze.dims", "aten.permute.default", "aten.slice.Tensor", "aten.select.int",
    "aten.as_strided.default", "aten.empty.memory_format", "aten.empty_strided.default",
    "aten.empty_like.default", "aten.empty.default", "aten.lift_fresh.default",
    "aten.split.Tensor", "aten.split_with_sizes.default", "aten.unbind.int",
    "aten.flatten.using_ints", "aten.view_as.default", "aten._reshape_alias.default",
    "aten.contiguous.default", "aten.sym_size.int", "aten.sym_stride.int",
    "aten.sym_numel.default", "aten.is_same_size.default", "aten.record_stream.default",
}


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def translate(records, table):
    """Nodes (program.define maps) for recorded (func, args, kwargs, out)
    tuples; raises _torchprog.Unsupported naming the first op that has no
    daemon equivalent."""
    import torch
    from ._torchprog import Unsupported, is_weight_transpose, same_dtype

    nodes = []
    dead = set()     # outputs the daemon does not produce (a norm's mean/rstd)

    def node(op, ins, out, attrs=None):
        n = {"op": op, "inputs": ins, "outputs": [out]}
        if attrs:
            n["attrs"] = attrs
        nodes.append(n)

    def T(t):
        return table.name(t)

    for func, args, kwargs, out in records:
        name = str(func)
        table.op = name
        if name in _PASS:
            continue
        kw = dict(kwargs or {})
        a = list(args)
        ten = [x for x in a if isinstance(x, torch.Tensor)]
        if any(x.data_ptr() in dead for x in ten):
            raise Unsupported(name, "reads a norm's mean/rstd, which the daemon does not produce")
        # the op's main output (native_layer_norm's mean/rstd are f32 for
        # half inputs and are not produced by the daemon)
        main = out[0] if isinstance(out, (tuple, list)) else out
        same_dtype(name, *ten, main)
        if name in ("aten.add.Tensor", "aten.add_.Tensor", "aten.mul.Tensor", "aten.mul_.Tensor",
                    "aten.div.Tensor", "aten.div_.Tensor", "aten.mul.Scalar", "aten.mul_.Scalar",
                    "aten.div.Scalar", "aten.div_.Scalar", "aten.sub.Tensor", "aten.sub_.Tensor"):
            x, y = a[0], a[1]
            alpha = kw.get("alpha", a[2] if len(a) > 2 else 1)
            kind = name.split(".")[1].rstrip("_")
            res = x if name.split(".")[1].endswith("_") else out
            if not isinstance(x, torch.Tensor):
                raise Unsupported(name, "a scalar first operand")
            if _num(y) or (isinstance(y, torch.Tensor) and y.dim() == 0 and not y.is_cuda):
                s = float(y)
                if kind == "mul":
                    node("scale", [T(x)], T(res), {"scale": s})
                elif kind == "div" and s != 0:
                    node("scale", [T(x)], T(res), {"scale": 1.0 / s})
                else:
                    raise Unsupported(name, "a scalar operand (the daemon has no add-scalar)")
                continue
            if kind in ("div", "sub") or alpha != 1:
                raise Unsupported(name, "tensor %s%s" % (kind, "" if alpha == 1 else " with alpha"))
            if tuple(res.shape) != tuple(x.shape):
                if kind in ("add", "mul") and tuple(res.shape) == tuple(y.shape):
                    x, y = y, x           # commutative: bias + x
                else:
                    raise Unsupported(name, "broadcast into a larger output")
            if tuple(y.shape) == tuple(x.shape):
                node(kind, [T(x), T(y)], T(res))
            elif y.numel() == x.shape[-1] and all(d == 1 for d in y.shape[:-1]):
                node(kind, [T(x), table.name(y, [y.numel()])], T(res))
            else:
                raise Unsupported(name, "broadcast of shape %s over %s" % (list(y.shape),
                                                                          list(x.shape)))
        elif name in ("aten.gelu.default", "aten.gelu_.default"):
            appr = kw.get("approximate", a[1] if len(a) > 1 else "none")
            res = a[0] if name.endswith("_.default") else out
            node("gelu", [T(a[0])], T(res), {"approximate": appr})
        elif name in ("aten.silu.default", "aten.silu_.default"):
            res = a[0] if name.endswith("_.default") else out
            node("silu", [T(a[0])], T(res))
        elif name == "aten.native_layer_norm.default":
            x, shp, w, b, eps = a[0], a[1], a[2], a[3], a[4]
            if len(shp) != 1 or w is None or b is None:
                raise Unsupported(name, "only a layer norm over the last dim with weight and bias")
            node("layernorm", [T(x), table.name(w, [w.numel()]), table.name(b, [b.numel()])],
                 T(out[0]), {"eps": float(eps)})
            dead.update(o.data_ptr() for o in out[1:] if isinstance(o, torch.Tensor) and o.numel())
        elif name == "aten._fused_rms_norm.default":
            x, shp, w = a[0], a[1], a[2]
            eps = a[3] if len(a) > 3 else kw.get("eps")
            if len(shp) != 1 or w is None:
                raise Unsupported(name, "only an RMS norm over the last dim with a weight")
            if eps is None:
                eps = torch.finfo(x.dtype).eps
            node("rmsnorm", [T(x), table.name(w, [w.numel()])], T(out[0]), {"eps": float(eps)})
            dead.update(o.data_ptr() for o in out[1:] if isinstance(o, torch.Tensor) and o.numel())
        elif name in ("aten._softmax.default", "aten.softmax.int"):
            x, dim = a[0], a[1]
            if dim not in (-1, x.dim() - 1) or (len(a) > 2 and a[2] is True):
                raise Unsupported(name, "softmax over a dim other than the last")
            node("softmax", [T(x)], T(out))
        elif name in ("aten.addmm.default", "aten.mm.default"):
            if name == "aten.addmm.default":
                bias, x, wt = a[0], a[1], a[2]
                if kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1:
                    raise Unsupported(name, "beta/alpha other than 1")
                if bias.numel() != wt.shape[1]:
                    raise Unsupported(name, "a bias that is not [N]")
            else:
                bias, x, wt = None, a[0], a[1]
            if not is_weight_transpose(wt):
                raise Unsupported(name, "a right operand that is not a linear weight's transpose")
            w = wt.t()
            ins = [table.name(x), table.name(w, list(w.shape))]
            if bias is not None:
                ins.append(table.name(bias.reshape(-1), [bias.numel()]))
            node("linear", ins, T(out))
        elif name == "aten.linear.default":
            x, w = a[0], a[1]
            b = a[2] if len(a) > 2 else kw.get("bias")
            ins = [T(x), table.name(w, list(w.shape))]
            if b is not None:
                ins.append(table.name(b, [b.numel()]))
            node("linear", ins, T(out))
        elif name == "aten.copy_.default":
            dst, src = a[0], a[1]
            if tuple(dst.shape) != tuple(src.shape) or dst.dtype != src.dtype:
                raise Unsupported(name, "a copy that broadcasts or converts")
            node("copy", [T(src)], T(dst))
        elif name in ("aten.clone.default", "aten._to_copy.default"):
            if out.dtype != a[0].dtype or out.device != a[0].device:
                raise Unsupported(name, "a conversion")
            node("copy", [T(a[0])], T(out))
        else:
            raise Unsupported(name, "no daemon op")
    return nodes


# ---- the classes ----------------------------------------------------------

def _make_classes(torch):
    from torch.utils._python_dispatch import TorchDispatchMode

    OrigGraph, OrigCtx = _state["orig"]

    class _Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.records = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.records.append((func, args, kwargs, out))
            return out

    class CUDAGraph(OrigGraph):
        """torch.cuda.CUDAGraph, routed through gfxgraphd (gfxgraph.enable())."""

        def __new__(cls, *a, **k):
            return super().__new__(cls, *a, **k)

        def _gg_init(self):
            if not hasattr(self, "_gg_prog"):
                self._gg_prog = None
                self._gg_rec = None
                self._gg_keep = None
                self._gg_events = None

        def capture_begin(self, *a, **k):
            self._gg_init()
            self._gg_release()
            super().capture_begin(*a, **k)
            if _state["enabled"]:
                rec = _Recorder()
                try:
                    rec.__enter__()
                    self._gg_rec = rec
                except Exception as e:   # noqa: BLE001
                    _fallback("TorchDispatchMode", "cannot record: %s" % e)

        def capture_end(self):
            self._gg_init()
            rec, self._gg_rec = self._gg_rec, None
            if rec is not None:
                rec.__exit__(None, None, None)
            super().capture_end()
            if rec is not None:
                self._gg_build(rec.records)

        def _gg_build(self, records):
            from ._torchprog import TensorTable, Unsupported
            if not records:
                return
            try:
                c = _client()
                if c is None:
                    _local["fallback_count"] += 1
                    return
                table = TensorTable(c, _state["storages"])
                nodes = translate(records, table)
                if not nodes:
                    return
                _state["seq"] += 1
                spec = {"name": "torch_graph_%d" % _state["seq"], "tensors": table.tensors,
                        "nodes": nodes, "buckets": [1]}
                prog = c.define(spec)
                prep = prog.prepare()
                if prep.get("failed"):
                    log.debug("gfxgraph: %s: %d graph captures failed in the daemon (served "
                              "eagerly)", spec["name"], prep["failed"])
            except Unsupported as e:
                _fallback(e.op, e.why or "no daemon op")
                return
            except Exception as e:   # noqa: BLE001 -- never crash a capture
                _fallback(type(e).__name__, str(e))
                return
            self._gg_prog = prog
            self._gg_keep = table.keep
            self._gg_events = (self._gg_make_events(c, _state["sync"] == "events")
                               if _state["sync"] != "stream" else None)
            _local["captures"] += 1

        def _gg_make_events(self, c, post_too):
            """(pre, its id, post, its id): pre is recorded on the caller's
            stream before each replay and waited for by the daemon; post
            (sync="events" only, else None) the other way round."""
            made = []
            try:
                evs = [torch.cuda.Event(interprocess=True) for _ in range(2 if post_too else 1)]
                for e in evs:
                    e.record()       # an event must have been recorded to be shared
                torch.cuda.current_stream().synchronize()
                for e in evs:
                    made.append(c.register_event(e))
                if post_too:
                    return (evs[0], made[0], evs[1], made[1])
                return (evs[0], made[0], None, None)
            except Exception as e:   # noqa: BLE001
                for eid in made:
                    try:
                        c.release_event(eid)
                    except Exception:   # noqa: BLE001
                        pass
                _log_once(("events", type(e).__name__), "gfxgraph: interprocess events are not "
                          "available (%s): replay() synchronises the stream on the host", e)
                return None

        def replay(self):
            self._gg_init()
            p = self._gg_prog
            if p is None or not _state["enabled"] or p.client.closed:
                return super().replay()
            s = torch.cuda.current_stream()
            ev = self._gg_events
            try:
                if ev is not None and ev[2] is not None:
                    pre, pre_id, post, post_id = ev
                    pre.record(s)
                    r = p.replay(1, wait_event=pre_id, signal_event=post_id, async_=True)
                    s.wait_event(post)
                elif ev is not None:
                    ev[0].record(s)
                    r = p.replay(1, wait_event=ev[1])
                else:
                    _wait_stream(s)
                    r = p.replay(1)
            except Error as e:
                _log_once(("replay", e.code), "gfxgraph: a daemon replay failed (%s); this graph "
                          "replays with PyTorch from now on", e)
                self._gg_release()
                _local["fallback_count"] += 1
                return super().replay()
            _local["replays"] += 1
            note_replay(r)

        def _gg_release(self):
            p = getattr(self, "_gg_prog", None)
            self._gg_prog = None
            self._gg_keep = None
            if p is not None:
                try:
                    ev = self._gg_events
                    if ev is not None and not p.client.closed:
                        p.client.release_event(ev[1])
                        if ev[3] is not None:
                            p.client.release_event(ev[3])
                    p.release()
                except Error:
                    pass
            self._gg_events = None

        def reset(self):
            self._gg_init()
            self._gg_release()
            return super().reset()

        @property
        def gfxgraph_program(self):
            """The daemon Program this capture replays through, or None
            (PyTorch's graph)."""
            return getattr(self, "_gg_prog", None)

    class graph(OrigCtx):
        """torch.cuda.graph, accepting graphs made before enable() too."""

        def __init__(self, cuda_graph, *a, **k):
            if type(cuda_graph) is OrigGraph:
                try:
                    cuda_graph.__class__ = CUDAGraph
                except TypeError:
                    pass
            super().__init__(cuda_graph, *a, **k)

    CUDAGraph.__name__ = CUDAGraph.__qualname__ = "CUDAGraph"
    CUDAGraph.__module__ = "gfxgraph.cudagraph"
    return CUDAGraph, graph


def enable(socket=None, sync="stream"):
    """Patch torch.cuda.CUDAGraph and torch.cuda.graph (idempotent).
    socket: the daemon's (None: the default rules).  sync: "stream",
    "gpu" or "events" (see the module's doc).  Returns True."""
    import torch
    import torch.cuda.graphs as tg
    if sync not in ("stream", "gpu", "events"):
        raise Error("EINVAL", "sync must be \"stream\", \"gpu\" or \"events\"")
    with _lock:
        _state["socket"] = socket
        _state["sync"] = sync
        if _state["enabled"]:
            return True
        _state["orig"] = (tg.CUDAGraph, tg.graph)
        G, ctx = _make_classes(torch)
        torch.cuda.CUDAGraph = tg.CUDAGraph = G
        torch.cuda.graph = tg.graph = ctx
        _state["enabled"] = True
        _local["enabled_at"] = time.time()
    try:
        from . import compile as _compile
        _compile.register()
    except Exception:   # noqa: BLE001
        pass
    return True


def disable():
    """Restore PyTorch's classes.  Graphs captured through the daemon replay
    with PyTorch's own graph from now on (it was captured too)."""
    with _lock:
        if not _state["enabled"]:
            return
        import torch
        import torch.cuda.graphs as tg
        OrigGraph, OrigCtx = _state["orig"]
        torch.cuda.CUDAGraph = tg.CUDAGraph = OrigGraph
        torch.cuda.graph = tg.graph = OrigCtx
        _state["enabled"] = False
        _local["enabled_at"] = None
