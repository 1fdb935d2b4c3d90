# SPDX-License-Identifier: MIT
"""``torch.compile(model, backend="gfxgraph")``.

The backend goes through the same frontend as ``gfxgraph.enable()``
(gfxgraph.frontend: one table of op identity and lowering, the same fused
forms), so what a CUDA-graph capture routes, a compiled function routes:

- the FX graph Dynamo hands over is run once, on its first call with a
  given input signature (shapes, strides, dtypes, devices), under the
  recorder enable() uses, each aten op tagged with its FX node
  (frontend/fx.py says why the recorder and not AOT autograd); that run is
  the call: its results are returned and in-place updates happen once;
- the recorded ops -> the IR -> one daemon program: when every op lowers,
  the graph is ONE daemon partition and every later call is one replay;
- otherwise each FX node is covered (all its ops lower onto ops this
  daemon has) or not, and the graph is cut into the fewest alternating
  partitions (frontend/partition.py): covered ones become daemon programs,
  the others are compiled by Inductor; a graph that would need more than
  ``GFXGRAPH_COMPILE_MAX_PARTITIONS`` (default 3) partitions, or that has
  nothing covered, is handed to Inductor whole (so is a graph whose results
  require grad: the daemon runs inference only; one that sets grad mode or
  autocast between its nodes, when it would be cut; and a graph past 8
  input signatures); without Inductor (an old torch) those parts run
  eagerly.  A cut graph's first call with a signature is the whole graph's
  recording run (what finds the cut) and each daemon partition records on
  its own first call, the signature's second: its replays start with the
  third call.

Inputs.  A program is defined over fixed memory, and compile hands each
call new input tensors.  Parameters, buffers and tensors marked with
``torch._dynamo.mark_static_address`` (HF's StaticCache) keep their
address: the program uses them in place, and a call where one moved builds
the program again.  Every other tensor input is copied into a static
buffer the program was defined over (what CUDA-graph wrappers do: copying
an activation is cheap next to a step, where registering new memory costs
a daemon round trip and a program per address), and copied back after the
replay when the graph writes it.  Sizes Dynamo passes as ints (dynamic
shapes) and numbers it passes as CPU 0-dim tensors (a norm's eps, read with
``.item()``) are host values: constants of the program, part of the input
signature (frontend/fx.py).  Intermediates stay in the memory the
recording run allocated (kept alive by the program), and each output comes
back as a new tensor (a clone), so results of earlier calls are never
overwritten.

Ordering with the caller's stream is enable()'s ``sync`` mode: by default
the host waits for the current stream (the input copies) and the replay
returns when the daemon is done; ``"gpu"`` and ``"events"`` wait on the
GPU, ``"events"`` also returns before the daemon is done (the current
stream waits for it).

``gfxgraph.stats()["local"]``: ``compile_graphs`` (graphs planned, one per
input signature), ``compiled_partitions`` (daemon programs defined),
``compile_inductor_graphs`` (graphs handed to Inductor whole),
``compile_inductor_partitions`` (Inductor partitions of split graphs),
``compiled_replays`` (daemon partition calls), ``compile_eager_fallbacks``
(daemon partitions switched away from the daemon by an error: Inductor, or
eager without it), ``compile_inductor_failures`` (graphs or partitions that
Inductor failed to compile or run, run as their FX code instead: the
reason is in the log and, for a graph planned, its ``compile_log`` entry's
``inductor_failed``), ``compile_fallback_ops`` (aten op -> FX nodes left to
Inductor), and ``compile_log``, per graph planned: its ``mode`` (daemon,
mixed, inductor, none), ``partitions``, ``daemon_partitions``,
``inductor_partitions``, ``split`` (the partitions a cut would need) and the
first uncovered op with its operands (``op``, ``why``).

The name "gfxgraph" is registered with Dynamo on ``import gfxgraph`` when
torch is already imported, by ``gfxgraph.enable()``, by
``gfxgraph.register_compile_backend()``, and by a pip install's
``torch_dynamo_backends`` entry point; ``backend=gfxgraph.compile.gfxgraph_backend``
works without any of them.
"""

import logging
import os

from .errors import Error
from .stats import local as _local
from .stats import note_replay

log = logging.getLogger("gfxgraph")
_logged = set()
_registered = [False]

MAX_SIGNATURES = 8        # input signatures of one graph given their own plan
LOG_KEPT = 32             # compile_log entries kept


def register():
    if _registered[0]:
        return
    from torch._dynamo import register_backend
    from torch._dynamo.backends.registry import _BACKENDS
    if "gfxgraph" not in _BACKENDS:
        register_backend(compiler_fn=gfxgraph_backend, name="gfxgraph")
    _registered[0] = True


def max_partitions():
    from .frontend.partition import MAX_PARTITIONS
    try:
        return max(1, int(os.environ.get("GFXGRAPH_COMPILE_MAX_PARTITIONS", MAX_PARTITIONS)))
    except ValueError:
        return MAX_PARTITIONS


def _log_once(key, level, msg, *a):
    if key not in _logged:
        _logged.add(key)
        log.log(level, msg, *a)


def _count(key, n=1):
    _local[key] = _local.get(key, 0) + n


def _report(rep):
    logl = _local.setdefault("compile_log", [])
    logl.append(rep)
    del logl[:-LOG_KEPT]


def _note_uncovered(uncovered):
    d = _local.setdefault("compile_fallback_ops", {})
    for node, ops in uncovered.items():
        op, why = ops[0]
        d[op] = d.get(op, 0) + 1
        _log_once(("op", op), logging.DEBUG, "gfxgraph.compile: %s has no daemon lowering here "
                  "(%s): its node runs through Inductor", op, why)


class _NotRouted(Exception):
    """The daemon cannot run the graph.  ``outs``: the call's results when
    the recording run happened (else None), ``coverage``: (IR graph, op
    index -> node name) for partitioning, ``refused``: an aten op the
    daemon refused to define."""

    def __init__(self, why, op=None, outs=None, coverage=None, refused=None):
        super().__init__(why)
        self.why, self.op, self.outs, self.coverage, self.refused = why, op, outs, coverage, \
            refused


# ---- one daemon program over a graph, for one input signature ---------------

class _Program:
    """A defined program and how a call maps onto it: ``staged`` (arg
    index, static buffer, copy back), ``inplace`` (arg indices, their data
    pointers), ``copy_back`` ((original, shared) memory pairs, cpu
    backend), ``recipes`` (per flat output) and its ``spec`` (pytree)."""

    def __init__(self):
        self.prog = None
        self.keep = []
        self.staged = []
        self.inplace_idx = []
        self.inplace_ptr = []
        self.copy_back = []
        self.recipes = []
        self.spec = None
        self.events = None
        self.cpu = False
        self.report = None

    def release(self):
        p, self.prog = self.prog, None
        if p is None:
            return
        try:
            ev = self.events
            if ev is not None and not p.client.closed:
                p.client.release_event(ev[1])
                if ev[3] is not None:
                    p.client.release_event(ev[3])
            p.release()
        except Error:
            pass
        self.events = None

    def outputs(self, args, first=None):
        """The call's results: new tensors for the program's outputs."""
        import torch.utils._pytree as pytree
        vals = []
        for i, r in enumerate(self.recipes):
            kind = r[0]
            if kind == "clone":
                src = first[i] if first is not None else r[1]
                vals.append(src.clone())
            elif kind == "arg":
                _, ai, shape, stride, off = r
                a = args[ai]
                vals.append(a.as_strided(shape, stride, a.storage_offset() + off))
            else:
                vals.append(r[1])
        return pytree.tree_unflatten(vals, self.spec)

    def run(self, args):
        """One call; None when an input used in place has moved (the caller
        builds again)."""
        import torch
        if self.inplace_idx and [args[i].data_ptr() for i in self.inplace_idx] != \
                self.inplace_ptr:
            return None
        for i, buf, _back in self.staged:
            buf.copy_(args[i])
        p = self.prog
        if self.cpu:
            r = p.replay(1)
        else:
            from .cudagraph import _wait_stream
            s = torch.cuda.current_stream()
            ev = self.events
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
        _local["compiled_replays"] += 1
        note_replay(r)
        for i, buf, back in self.staged:
            if back:
                args[i].copy_(buf)
        for orig, shared in self.copy_back:
            orig.copy_(shared)
        return self.outputs(args)


def _u8(st, device):
    """A uint8 tensor over all of an UntypedStorage."""
    import torch
    return torch.empty(0, dtype=torch.uint8, device=device).set_(st, 0, (st.nbytes(),), (1,))


def _view(u8, dtype, shape, stride, offset):
    import torch
    item = torch.empty((), dtype=dtype).element_size()
    n = u8.numel() // item * item
    return u8[:n].view(dtype).as_strided(shape, stride, offset)


def _make_events(c):
    import torch
    from .cudagraph import _state
    sync = _state["sync"]
    if sync == "stream":
        return None
    made = []
    try:
        evs = [torch.cuda.Event(interprocess=True) for _ in range(2 if sync == "events" else 1)]
        for e in evs:
            e.record()           # an event must have been recorded to be shared
        torch.cuda.current_stream().synchronize()
        for e in evs:
            made.append(c.register_event(e))
        if sync == "events":
            return (evs[0], made[0], evs[1], made[1])
        return (evs[0], made[0], None, None)
    except Exception as e:   # noqa: BLE001
        for eid in made:
            try:
                c.release_event(eid)
            except Exception:   # noqa: BLE001
                pass
        _log_once(("events",), logging.WARNING, "gfxgraph.compile: interprocess events are not "
                  "available (%s): replays synchronise the stream on the host", e)
        return None


def _build(gm, args, name, tag, item_only=frozenset()):
    """Record gm(*args) (the call itself) and define its daemon program:
    (_Program, the call's results).  Raises _NotRouted, with the results
    when the recording ran.  item_only: fx.item_only_inputs(gm)."""
    import torch
    import torch.utils._pytree as pytree
    from . import cudagraph
    from .frontend import fx
    from ._torchprog import alloc

    host = fx.host_scalars(args, item_only)
    devs = {a.device.type for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and i not in host}
    if len(devs) > 1 or not devs <= {"cuda", "cpu"}:
        raise _NotRouted("inputs on devices %s" % sorted(devs))
    cpu = devs == {"cpu"}
    dev_type = "cpu" if cpu else "cuda"
    c = cudagraph._client("cpu" if cpu else "hip")
    if c is None:
        raise _NotRouted("no daemon with the %s backend" % ("cpu" if cpu else "hip"))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    P = _Program()
    P.cpu = cpu
    call = list(args)
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor) or i in host:
            continue            # a host value: a constant of this signature's program
        node = placeholders[i] if i < len(placeholders) else None
        if fx.is_static_input(a, node):
            P.inplace_idx.append(i)
            P.inplace_ptr.append(a.data_ptr())
            continue
        buf = alloc(list(a.shape), a.dtype, a.device)
        buf.copy_(a)
        call[i] = buf
        P.staged.append([i, buf, False])
    out, rec = fx.record(gm, call, tag, host)
    flat, P.spec = pytree.tree_flatten(out)
    try:
        return _define(gm, args, name, P, c, cpu, dev_type, rec, flat)
    except _NotRouted:
        raise
    except Exception as e:   # noqa: BLE001 -- the call has run: its results go back
        raise _NotRouted("%s: %s" % (type(e).__name__, e),
                         outs=pytree.tree_unflatten(list(flat), P.spec))


def _define(gm, args, name, P, c, cpu, dev_type, rec, flat):
    """_build's part after the recording run: the IR, the plan, the program."""
    import collections
    import torch
    import torch.utils._pytree as pytree
    from . import cudagraph
    from . import frontend
    from .frontend.live import _register, daemon_ops, kernels_of
    from .frontend.torchrec import check_devices, graph_of
    from ._torchprog import alloc
    records, rec.records = rec.records, None
    node_names = rec.nodes
    bad = check_devices(records, dev_type)
    graph, objs, weak = graph_of(records, dev_type)
    del records
    node_of = {i: node_names[i] for i in range(len(node_names))}
    by_ptr = {st.data_ptr(): sid for sid, st in objs.items()}
    # a staged input the graph wrote goes back to the caller's tensor
    written = set()
    for op in graph.ops:
        for t in op.tensors_out():
            if t.storage.external:
                written.add(t.storage.id)
    for s in P.staged:
        sid = by_ptr.get(s[1].untyped_storage().data_ptr())
        if sid in written:
            s[2] = True
            args[s[0]].copy_(s[1])
    coverage = (graph, node_of)

    def fail(why, op=None, refused=None):
        return _NotRouted(why, op, flat_out(), coverage, refused)

    def flat_out():
        return pytree.tree_unflatten(list(flat), P.spec)

    if bad is not None:
        raise fail("an operand on %s; the daemon runs on %s" % (bad[1].device, dev_type),
                   bad[0])
    if any(isinstance(v, torch.Tensor) and v.requires_grad for v in flat):
        # autograd needs PyTorch's ops (the daemon runs inference): Inductor
        # compiles the training graph
        e = fail("autograd: an output requires grad")
        e.coverage = None
        raise e
    # the outputs: what the program must produce, and how a call reads them
    tid_of = {}
    for tid, w in weak:
        o = w()
        if o is not None:
            tid_of[id(o)] = tid
    staged_ptr = {s[1].untyped_storage().data_ptr(): s for s in P.staged}
    outputs = []
    for v in flat:
        if not isinstance(v, torch.Tensor):
            P.recipes.append(("const", v))
            continue
        ptr = v.untyped_storage().data_ptr()
        if ptr in staged_ptr:
            s = staged_ptr[ptr]
            if not args[s[0]].is_contiguous():
                raise fail("an output that is a view of a non-contiguous input")
            P.recipes.append(("arg", s[0], tuple(v.shape), tuple(v.stride()),
                              v.storage_offset() - s[1].storage_offset()))
            continue
        tid = tid_of.get(id(v))
        sid = by_ptr.get(ptr)
        if sid is not None and graph.storages[sid].external or tid is None and sid is None:
            P.recipes.append(("same", v))       # a weight, a cache: the memory itself
            continue
        if tid is None:
            raise fail("an output the recorded ops do not describe")
        outputs.append(tid)
        P.recipes.append(["clone", v, tid, v.dtype])
    graph.outputs = outputs
    try:
        plan = frontend.build(graph)
    except frontend.Unsupported as e:
        raise fail(e.why, e.op)
    if not plan.nodes:
        raise fail("no device work", None)
    ops = daemon_ops(c)
    miss = plan.first_missing(ops) if ops else None
    if miss is not None:
        src = miss[1]
        raise fail("lowers to the daemon op %r, which this daemon does not have; operands %s"
                   % (miss[0], src), src.split("(", 1)[0])
    for r in P.recipes:
        if r[0] == "clone" and graph.tensors[r[2]].storage.id not in plan.storages:
            raise fail("an output the program does not write (%s)"
                       % graph.tensors[r[2]].describe())
    bufs, mem = {}, {}
    for sid in plan.storages:
        st = objs[sid]
        if not cpu:
            bufs[sid] = _register(c, cudagraph._state["storages"], objs, sid)
            continue
        # cpu backend: memory the daemon maps is gfxgraph shared memory; a
        # storage elsewhere gets a shared copy (an external one's bytes
        # copied once, and back after each replay when the program writes it)
        from . import shm
        seg = shm.find(st.data_ptr(), st.nbytes())
        if seg is not None:
            bufs[sid] = c.register_shm_name(seg.name, st.data_ptr() - seg.address, st.nbytes(),
                                            owner=seg)
            continue
        shared = alloc([max(1, st.nbytes())], torch.uint8, torch.device("cpu"))
        orig = _u8(st, "cpu")
        if graph.storages[sid].external:
            shared[:st.nbytes()].copy_(orig)
            if sid in written:
                P.copy_back.append((orig, shared[:st.nbytes()]))
        seg = shm.find(shared.data_ptr(), st.nbytes())
        bufs[sid] = c.register_shm_name(seg.name, shared.data_ptr() - seg.address,
                                        max(1, st.nbytes()), owner=seg)
        mem[sid] = shared
    for r in P.recipes:
        # an output read where the program writes it: the recorded tensor,
        # or its place in the shared copy (cpu backend)
        if r[0] == "clone" and graph.tensors[r[2]].storage.id in mem:
            t = graph.tensors[r[2]]
            r[1] = _view(mem[t.storage.id], r[3], t.shape, t.stride, t.offset)
    P.recipes = [tuple(r) for r in P.recipes]
    cudagraph._state["seq"] += 1
    try:
        prog = c.define(plan.spec("%s_%d" % (name, cudagraph._state["seq"]), bufs))
    except Error as e:
        src = plan.source_of(e.message)
        if src is None:
            raise fail("gfxgraphd: %s" % e)
        op = src.split("(", 1)[0]
        raise fail("the daemon refused its node (%s); operands %s" % (e, src), op, refused=op)
    P.prog = prog
    P.keep = [objs[s] for s in plan.storages] + list(mem.values())
    prep = prog.prepare()
    P.events = None if cpu else _make_events(c)
    P.report = dict(plan.report, program=prog.name, program_id=prog.id, prepare=prep,
                    node_ops=dict(collections.Counter(n["op"] for n in plan.nodes)),
                    kernels=kernels_of(c, prog))
    _local["compiled_partitions"] += 1
    # the recording run's results are in the memory the program writes
    # from now on: the caller gets copies
    return P, P.outputs(args, first=flat)


# ---- Inductor -----------------------------------------------------------------

def _inductor(gm, args, item_only=frozenset(), rep=None):
    """gm compiled by Inductor for args' signature (its host scalars as
    constants: fx.specialize), or gm itself, its FX code as it is, where
    Inductor is not there or fails; a failure is counted
    (compile_inductor_failures), logged once per reason and, with rep (a
    compile_log entry), noted there as inductor_failed."""
    from .frontend import fx
    try:
        from torch._inductor import compile as inductor_compile
    except Exception as e:   # noqa: BLE001 -- an old torch
        _log_once(("inductor", "import"), logging.WARNING, "gfxgraph.compile: no Inductor "
                  "(%s): the parts the daemon does not run run eagerly", e)
        return gm
    try:
        spec = fx.specialize(gm, args, fx.host_scalars(args, item_only))
        fn = inductor_compile(spec, list(args))
    except Exception as e:   # noqa: BLE001 -- never break the model
        _inductor_failed("%s: %s" % (type(e).__name__, e), rep)
        return gm
    return _Compiled(fn, gm, rep)


def _inductor_failed(why, rep):
    _count("compile_inductor_failures")
    if rep is not None:
        rep["inductor_failed"] = why[:500]
    _log_once(("inductor", why.split(":", 1)[0], why[:200]), logging.WARNING,
              "gfxgraph.compile: Inductor failed (%s): that part runs as its FX graph, "
              "eagerly", why)


class _Compiled:
    """An Inductor-compiled graph that, should a call of it fail, runs the
    graph's own FX code from then on: that call again when the graph
    updates no memory in place (a second run of a partly applied update
    could be wrong), else the error is raised."""

    def __init__(self, fn, gm, rep):
        self.fn, self.gm, self.rep = fn, gm, rep

    def __call__(self, *args):
        if self.fn is None:
            return self.gm(*args)
        try:
            return self.fn(*args)
        except Exception as e:   # noqa: BLE001 -- never break the model
            from .frontend import fx
            self.fn = None
            _inductor_failed("%s: %s" % (type(e).__name__, e), self.rep)
            if fx.mutates(self.gm):
                raise
            return self.gm(*args)


def _signature(args, item_only=frozenset()):
    """What a plan depends on: grad mode, each tensor's layout, the values
    of host values (ints, numbers, host scalar tensors: a program holds
    them as constants; floats by repr, so that a NaN equals itself)."""
    import torch
    from .frontend import fx
    sig = [torch.is_grad_enabled()]
    for a in args:
        if isinstance(a, torch.Tensor):
            sig.append((tuple(a.shape), tuple(a.stride()), a.dtype, a.device, a.requires_grad))
        elif isinstance(a, float):
            sig.append((float, repr(a)))
        elif isinstance(a, (int, bool, type(None))):
            sig.append((type(a), a))
        else:
            sig.append(type(a))
    for i in fx.host_scalars(args, item_only):
        sig.append((i, repr(args[i].item())))
    return tuple(sig)


class _Runner:
    """A graph (the one Dynamo hands over, or one partition of it) run per
    input signature by a daemon program, by Inductor, or split (top level
    only: ``split`` True)."""

    def __init__(self, gm, name, split):
        from .frontend import fx
        self.gm, self.name, self.split = gm, name, split
        self.entries = {}
        self.item_only = fx.item_only_inputs(gm)

    def __call__(self, *args):
        sig = _signature(args, self.item_only)
        e = self.entries.get(sig)
        if e is None:
            return self._first(sig, args)
        kind, obj = e
        if kind == "daemon":
            try:
                r = obj.run(args)
            except Error as err:
                return self._daemon_failed(sig, obj, args, "gfxgraphd: %s" % err)
            except Exception as err:   # noqa: BLE001 -- never break the model
                return self._daemon_failed(sig, obj, args, "%s: %s" % (type(err).__name__, err))
            if r is None:
                _log_once(("moved", self.name), logging.INFO, "gfxgraph.compile: %s: an input "
                          "used in place moved: its program is built again", self.name)
                obj.release()
                del self.entries[sig]
                return self._first(sig, args)
            return r
        return obj(*args)

    def _daemon_failed(self, sig, prog, args, why):
        _log_once(("failed", self.name, why), logging.WARNING, "gfxgraph.compile: %s: a daemon "
                  "replay failed (%s); it runs through Inductor from now on", self.name, why)
        prog.release()
        _local["compile_eager_fallbacks"] += 1
        fn = _inductor(self.gm, args, self.item_only)
        self.entries[sig] = ("fn", fn)
        return fn(*args)

    def _to_inductor(self, sig, args, rep, outs=None):
        _report(rep)
        fn = _inductor(self.gm, args, self.item_only, rep)
        self.entries[sig] = ("fn", fn)
        return outs if outs is not None else fn(*args)

    def _first(self, sig, args):
        rep = {"graph": self.name, "nodes_fx": sum(1 for n in self.gm.graph.nodes
                                                   if n.op not in ("placeholder", "output"))}
        if not self.split:
            rep["partition"] = True     # logged only when it leaves the daemon
        if self.split:
            _count("compile_graphs")
        if len(self.entries) >= MAX_SIGNATURES:
            rep.update(mode="inductor", partitions=1, daemon_partitions=0,
                       inductor_partitions=1, why="more than %d input signatures"
                       % MAX_SIGNATURES)
            _count("compile_inductor_graphs" if self.split else "compile_inductor_partitions")
            return self._to_inductor(sig, args, rep)
        try:
            P, outs = _build(self.gm, args, self.name, tag=self.split,
                             item_only=self.item_only)
        except _NotRouted as e:
            return self._not_routed(sig, args, rep, e)
        except Exception as e:   # noqa: BLE001 -- before the call ran: never break the model
            return self._not_routed(sig, args, rep, _NotRouted("%s: %s" % (type(e).__name__, e)))
        self.entries[sig] = ("daemon", P)
        if self.split:
            rep.update(mode="daemon", partitions=1, daemon_partitions=1, inductor_partitions=0,
                       split=1, **P.report)
            _report(rep)
        return outs

    def _not_routed(self, sig, args, rep, e):
        rep.update(op=e.op, why=e.why)
        if not self.split:
            # a partition the daemon cannot take after all: Inductor runs it
            _log_once(("part", e.op, e.why), logging.WARNING, "gfxgraph.compile: partition %s "
                      "runs through Inductor: %s%s", self.name, (e.op + ": ") if e.op else "",
                      e.why)
            _count("compile_inductor_partitions")
            rep.update(mode="inductor", partitions=1, daemon_partitions=0, inductor_partitions=1)
            return self._to_inductor(sig, args, rep, e.outs)
        if e.coverage is None:
            rep.update(mode="inductor", partitions=1, daemon_partitions=0, inductor_partitions=1)
            _count("compile_inductor_graphs")
            return self._to_inductor(sig, args, rep, e.outs)
        from .frontend import fx, partition
        from .frontend.live import daemon_ops
        from . import cudagraph
        graph, node_of = e.coverage
        order, preds = fx.compute_nodes(self.gm)
        c = cudagraph._state.get("client")
        ops = daemon_ops(c) if c is not None else frozenset()
        covered, uncovered = partition.node_coverage(graph, node_of, order, ops,
                                                     {e.refused} if e.refused else ())
        p = partition.plan(order, preds, covered, max_partitions())
        mode = p["mode"]
        if mode in ("daemon", "none"):
            # every node lowers alone but not together (a norm's statistics
            # read later, a refused combination): Inductor takes it whole
            mode = "inductor"
        if mode == "mixed" and fx.has_global_state(self.gm):
            mode = "inductor"
            rep["why_whole"] = "the graph sets grad mode or autocast between its nodes"
        _note_uncovered(uncovered)
        rep.update(split=p["split"], uncovered_nodes=len(uncovered))
        if mode == "inductor":
            rep.update(mode="inductor", partitions=1, daemon_partitions=0, inductor_partitions=1)
            _count("compile_inductor_graphs")
            if p["split"] > 1:
                _log_once(("whole", self.name), logging.INFO, "gfxgraph.compile: %s would split "
                          "into %d partitions (more than %d): Inductor takes it whole",
                          self.name, p["split"], max_partitions())
            return self._to_inductor(sig, args, rep, e.outs)
        try:
            split = _split(self.gm, p["partitions"], self.name)
        except Exception as err:   # noqa: BLE001 -- the cut failed: Inductor takes it whole
            rep.update(mode="inductor", partitions=1, daemon_partitions=0, inductor_partitions=1,
                       why_whole="split_module: %s: %s" % (type(err).__name__, err))
            _count("compile_inductor_graphs")
            return self._to_inductor(sig, args, rep, e.outs)
        nd = sum(1 for k, _ in p["partitions"] if k == partition.DAEMON)
        rep.update(mode="mixed", partitions=len(p["partitions"]), daemon_partitions=nd,
                   inductor_partitions=len(p["partitions"]) - nd)
        _report(rep)
        self.entries[sig] = ("fn", split)
        if e.outs is not None:
            return e.outs
        return split(*args)


def _split(gm, parts, name):
    """gm cut into its partitions (torch.fx split_module), each a daemon
    partition or an Inductor one."""
    import torch
    from torch.fx.passes.split_module import split_module
    from .frontend import fx
    from .frontend.partition import DAEMON
    where = {}
    for k, (_kind, nodes) in enumerate(parts):
        for n in nodes:
            where[n] = k
    kinds = {k: kind for k, (kind, _) in enumerate(parts)}
    gm, where = fx.localize_host_reads(gm, where)

    def cb(node):
        # a node outside the compute nodes (a get_attr) has no inputs: the
        # first partition is before all its users
        return where.get(node.name, 0)

    sm = split_module(gm, None, cb)
    Daemon, Ind = _part_classes()
    for n in list(sm.graph.nodes):
        if n.op == "call_module" and n.target.startswith("submod_"):
            k = int(n.target[len("submod_"):])
            sub = sm.get_submodule(n.target)
            if kinds.get(k) == DAEMON:
                setattr(sm, n.target, Daemon(sub, "%s_%s" % (name, n.target)))
            else:
                _count("compile_inductor_partitions")
                setattr(sm, n.target, Ind(sub))
    sm.recompile()
    _ = torch
    return sm


_classes = [None]


def _part_classes():
    if _classes[0] is not None:
        return _classes[0]
    import torch

    class DaemonPartition(torch.nn.Module):
        """A partition of covered nodes: a daemon program per input
        signature (Inductor where the daemon cannot take it after all)."""

        def __init__(self, sub, name):
            super().__init__()
            self.sub = sub
            self._run = _Runner(sub, name, split=False)

        def forward(self, *args):
            return self._run(*args)

    class InductorPartition(torch.nn.Module):
        """A partition of uncovered nodes, compiled by Inductor per input
        signature."""

        def __init__(self, sub):
            from .frontend import fx
            super().__init__()
            self.sub = sub
            self._fns = {}
            self._item_only = fx.item_only_inputs(sub)

        def forward(self, *args):
            sig = _signature(args, self._item_only)
            fn = self._fns.get(sig)
            if fn is None:
                fn = self._fns[sig] = _inductor(self.sub, args, self._item_only)
            return fn(*args)

    _classes[0] = (DaemonPartition, InductorPartition)
    return _classes[0]


_graph_seq = [0]


def gfxgraph_backend(gm, example_inputs, **kwargs):
    """The torch.compile backend: a callable that runs gm per input
    signature as one daemon program, split between daemon programs and
    Inductor, or through Inductor (see the module's doc).  Planning needs
    real tensors (the recording run is the first call), so it happens on
    the first call of each signature."""
    _graph_seq[0] += 1
    return _Runner(gm, "torch_compile_g%d" % _graph_seq[0], split=True)
