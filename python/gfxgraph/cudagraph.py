# SPDX-License-Identifier: MIT
"""gfxgraph.enable(): torch.cuda.CUDAGraph / torch.cuda.graph through the
daemon.

While enabled, ``torch.cuda.CUDAGraph`` is a subclass of PyTorch's whose
capture also records the aten ops of the captured region with a
TorchDispatchMode (the ops run normally: PyTorch captures its own graph as
always).  At capture_end gfxgraph.frontend turns the recorded ops into one
daemon program (docs/python.md, "The PyTorch frontend": the step's tensors
with their strides, dead-op elimination, the fused forms it recognizes,
every other op lowered onto the daemon's general ops), over the storages
they touch, registered by IPC, so the outputs stay the tensors the user
holds.  ``replay()`` then replays the program through the daemon
(libgfxgraph-client: the fast path when the daemon offers it).

When an op has no lowering, or anything else about the capture cannot be
expressed (an operand on another device, memory that cannot be shared by
IPC, no daemon), the capture keeps PyTorch's own CUDA graph: ``replay()`` is
PyTorch's, the capture is counted in
``gfxgraph.stats()["local"]["fallback_count"]`` (with the op in
``fallback_ops``), and the reason is logged once per op name (logger
"gfxgraph").  Every capture's report (routed or not, nodes, kernels, the
first uncovered op with its shapes, dtypes and strides) is
``graph.gfxgraph_report`` and the last ones are in
``stats()["local"]["captures_log"]``; ``gfxgraph.explain(fn, *args)``
captures fn and returns its report.  Nothing raises: a capture that cannot
go to the daemon runs as it would without gfxgraph.

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


def _report(rep):
    """Keep a capture's report for stats()["local"]["captures_log"]."""
    logl = _local.setdefault("captures_log", [])
    logl.append(rep)
    from .frontend.live import REPORTS_KEPT
    del logl[:-REPORTS_KEPT]


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
                self.gfxgraph_report = None
                self._gg_prog = None
                self._gg_rec = None
                self._gg_keep = None
                self._gg_events = None
                self._gg_group = None       # a graph runner's captures sharing a program
                self._gg_batch = 1          # the bucket this capture replays
                self._gg_copies = ()        # (own output, the rows it receives) after a replay

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
                self._gg_build(rec)

        def _gg_build(self, rec):
            """The recorded ops -> one daemon program (gfxgraph.frontend);
            anything it cannot express leaves the capture to PyTorch."""
            from .frontend import Unsupported
            from .frontend.live import build_from_recorder, fallback_report
            self.gfxgraph_report = None
            if not rec.records:
                return
            try:
                c = _client()
                if c is None:
                    _local["fallback_count"] += 1
                    self.gfxgraph_report = {"routed": False, "why": "no daemon"}
                    _report(self.gfxgraph_report)
                    return
                _state["seq"] += 1
                try:
                    pool = self.pool()
                except Exception:   # noqa: BLE001 -- then no runner merge
                    pool = None
                built = build_from_recorder(rec, c, _state["storages"],
                                            "torch_graph_%d" % _state["seq"], pool=pool,
                                            graph=self)
                prog = built.prog
                self.gfxgraph_report = built.report
                if prog is None:
                    return
                if built.report["prepare"].get("failed"):
                    log.debug("gfxgraph: %s: %d graph captures failed in the daemon (served "
                              "eagerly)", prog.name, built.report["prepare"]["failed"])
            except Unsupported as e:
                self.gfxgraph_report = fallback_report(e)
                _report(self.gfxgraph_report)
                _fallback(e.op, e.why or "no daemon op")
                return
            except Exception as e:   # noqa: BLE001 -- never crash a capture
                self.gfxgraph_report = {"routed": False, "op": type(e).__name__, "why": str(e)}
                _report(self.gfxgraph_report)
                _fallback(type(e).__name__, str(e))
                return
            finally:
                rec.records = None
            _report(self.gfxgraph_report)
            self._gg_prog = prog
            self._gg_keep = built.keep
            self._gg_group = built.group
            if built.group is not None and len(built.group.members) > 1:
                built.group.apply()
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
                    r = p.replay(self._gg_batch, wait_event=pre_id, signal_event=post_id,
                                 async_=True)
                    s.wait_event(post)
                elif ev is not None:
                    ev[0].record(s)
                    r = p.replay(self._gg_batch, wait_event=ev[1])
                else:
                    _wait_stream(s)
                    r = p.replay(self._gg_batch)
                for own, rows in self._gg_copies:
                    own.copy_(rows)
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
            grp = getattr(self, "_gg_group", None)
            self._gg_prog = None
            self._gg_keep = None
            self._gg_group, self._gg_batch, self._gg_copies = None, 1, ()
            if grp is not None:
                # a runner's program goes with its last capture
                p_last = grp.detach(self)
                ev = self._gg_events
                if ev is not None and p is not None and not p.client.closed:
                    try:
                        p.client.release_event(ev[1])
                        if ev[3] is not None:
                            p.client.release_event(ev[3])
                    except Error:
                        pass
                self._gg_events = None
                p = p_last
                if p is None:
                    return
                try:
                    p.release()
                except Error:
                    pass
                return
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
