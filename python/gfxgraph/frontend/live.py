# SPDX-License-Identifier: MIT
"""A capture under gfxgraph.enable() -> one daemon program, and the report
of what happened (gfxgraph.explain, stats()["local"]["captures_log"]).
Imports torch."""

import collections

from ..errors import Error
from .ir import Unsupported

# the last reports, newest last (stats()["local"]["captures_log"])
REPORTS_KEPT = 32


class Built:
    """A defined program with what it needs kept alive; ``group`` the
    RunnerGroup it belongs to when the capture merged with others of its
    memory pool (then the group says each member's batch and copies)."""

    def __init__(self, prog, keep, report, group=None):
        self.prog, self.keep, self.report, self.group = prog, keep, report, group


# memory pool (with the daemon's socket) -> its RunnerGroup
_GROUPS = {}


class RunnerGroup:
    """The captures of one memory pool (a graph runner's, captured at
    several batch sizes) and the one program they replay
    (frontend/runner.py).  Each member replays its own bucket; a member
    whose output tensors are not the largest capture's gets its rows copied
    from them after the replay."""

    def __init__(self, key):
        self.key = key
        self.members = []         # [runner.Member] with .objs, .outs, .graph_ref
        self.prog = None
        self.keep = None

    def alive(self):
        return [m for m in self.members if m.graph_ref() is not None]

    def copies(self, m, base):
        """[(own output, the base's output rows it receives)] for member m."""
        if m is base:
            return []
        if len(m.outs) != len(base.outs):
            raise Unsupported("graph runner", "%d outputs against %d in the largest capture"
                              % (len(m.outs), len(base.outs)))
        pairs = []
        for own, big in zip(m.outs, base.outs):
            if own.dtype != big.dtype or own.dim() != big.dim() or \
                    tuple(own.shape[1:]) != tuple(big.shape[1:]) or own.shape[0] > big.shape[0]:
                raise Unsupported("graph runner", "an output %s%s against %s%s in the largest "
                                  "capture" % (own.dtype, list(own.shape), big.dtype,
                                               list(big.shape)))
            if own.data_ptr() != big.data_ptr() or own.shape != big.shape:
                pairs.append((own, big[:own.shape[0]]))
        return pairs

    def apply(self):
        """Point every live member's graph at the group's program."""
        base = max(self.members, key=lambda m: m.batch)
        for m in self.alive():
            g = m.graph_ref()
            g._gg_prog, g._gg_keep, g._gg_group = self.prog, self.keep, self
            g._gg_batch, g._gg_copies = m.batch, self.copies(m, base)

    def detach(self, graph):
        """graph is reset or gone: the program is released with its last
        member."""
        self.members = [m for m in self.members if m.graph_ref() not in (None, graph)]
        if not self.members:
            _GROUPS.pop(self.key, None)
            p, self.prog, self.keep = self.prog, None, None
            return p
        return None


def _register(client, cache, objs, sid):
    st = objs[sid]
    key = (st.data_ptr(), st.nbytes())
    b = cache.get(key)
    if b is None or b.id is None:
        b = client.register_device_pointer(key[0], key[1], owner=st)
        cache[key] = b
    return b


def build_from_recorder(rec, client, cache, name, device_type="cuda", pool=None, graph=None):
    """The recorder's ops -> a defined, prepared program (Built).  Raises
    Unsupported (naming the op, its shapes, dtypes and strides) when the
    daemon cannot run the step; the records are dropped either way.  With
    `pool` (the capture's memory pool) and `graph` (the CUDAGraph), a
    capture that is a step already captured in that pool at another batch
    size joins its program (frontend/runner.py)."""
    from . import build
    from .torchrec import check_devices, graph_of, live_outputs
    records, rec.records = rec.records, None
    bad = check_devices(records, device_type)
    if bad is not None:
        raise Unsupported(bad[0], "an operand on %s (%s%s stride %s); the daemon runs on %s"
                          % (bad[1].device, bad[1].dtype, list(bad[1].shape),
                             list(bad[1].stride()), device_type))
    g_ir, objs, weak = graph_of(records, device_type)
    del records           # what only the records held is freed: the intermediates
    g_ir.outputs = live_outputs(g_ir, weak)
    outs = [w() for tid, w in weak if tid in set(g_ir.outputs)]
    outs = [t for t in outs if t is not None]
    plan = build(g_ir)
    report = dict(plan.report)
    if not plan.nodes:
        report.update(routed=False, why="no device work")
        return Built(None, None, report)
    ops = daemon_ops(client)
    miss = plan.first_missing(ops) if ops else None
    if miss is not None:
        src = miss[1]
        raise Unsupported(src.split("(", 1)[0], "lowers to the daemon op %r, which this daemon "
                          "does not have; operands %s" % (miss[0], src))
    if pool is not None and graph is not None:
        built = _join_group(client, cache, name, (client.socket, tuple(pool)), plan, g_ir,
                            objs, outs, graph, report)
        if built is not None:
            return built
    bufs = {sid: _register(client, cache, objs, sid) for sid in plan.storages}
    try:
        prog = client.define(plan.spec(name, bufs))
    except Error as e:
        src = plan.source_of(e.message)
        if src is None:
            raise
        raise Unsupported(src.split("(", 1)[0], "the daemon refused its node (%s); operands %s"
                          % (e, src))
    prep = prog.prepare()
    report.update(routed=True, program=name, program_id=prog.id, prepare=prep,
                  node_ops=dict(collections.Counter(n["op"] for n in plan.nodes)))
    report["kernels"] = kernels_of(client, prog)
    keep = [objs[s] for s in plan.storages]
    if pool is not None and graph is not None:
        key = (client.socket, tuple(pool))
        if key not in _GROUPS:
            _GROUPS[key] = RunnerGroup(key)
        grp = _GROUPS[key]
        if not grp.alive():
            grp.members = []
            grp.members.append(_member(plan, g_ir, objs, outs, graph))
            grp.prog, grp.keep = prog, keep
            return Built(prog, keep, report, grp)
    return Built(prog, keep, report)


def _member(plan, g_ir, objs, outs, graph):
    import weakref
    from .runner import Member
    # only what the program uses stays alive (the rest of the pool is freed)
    used = {sid: objs[sid] for sid in plan.storages}
    m = Member(plan, g_ir, lambda sid: (used[sid].data_ptr(), used[sid].nbytes()))
    m.objs = used
    m.outs, m.graph_ref = outs, weakref.ref(graph)
    return m


def _join_group(client, cache, name, key, plan, g_ir, objs, outs, graph, report):
    """Merge the capture into its pool's program (a new program with the
    union of the buckets, every member re-pointed at it); None when the
    pool has no program this capture merges with (it then gets its own)."""
    from .runner import merge_or_none
    grp = _GROUPS.get(key)
    if grp is None or not grp.alive():
        return None
    mem = _member(plan, g_ir, objs, outs, graph)
    members = grp.alive() + [mem]
    merged, why = merge_or_none(members)
    if merged is None:
        report["runner"] = "not merged with the pool's program: %s" % why
        return None
    base = merged.base
    try:
        for m in members:           # the outputs must correspond too
            grp.copies(m, base)
        bufs = {sid: _register(client, cache, base.objs, sid) for sid in merged.storages}
        prog = client.define(merged.spec(name, bufs))
    except (Error, Unsupported) as e:
        report["runner"] = "not merged with the pool's program: %s" % e
        return None
    prep = prog.prepare()
    old = grp.prog
    grp.members = members
    grp.prog, grp.keep = prog, [base.objs[s] for s in merged.storages]
    grp.apply()
    if old is not None:
        try:
            old.release()
        except Error:
            pass
    report.update(routed=True, program=name, program_id=prog.id, prepare=prep,
                  nodes=len(merged.nodes), buckets=list(merged.buckets), batch=mem.batch,
                  merged=len(members),
                  node_ops=dict(collections.Counter(n["op"] for n in merged.nodes)))
    report["kernels"] = kernels_of(client, prog)
    return Built(prog, grp.keep, report, grp)


_OPS = {}      # (socket, server version) -> the ops its hello lists


def daemon_ops(client):
    """The op names the daemon's hello lists (cached per daemon), or an
    empty set when it does not say."""
    key = (client.socket, client.server_version)
    if key not in _OPS:
        try:
            from ..stats import server_info
            _OPS[key] = frozenset((server_info(client.socket, timeout=5.0) or {})
                                  .get("ops") or ())
        except Exception:   # noqa: BLE001 -- then define's own check speaks
            return frozenset()
    return _OPS[key]


def kernels_of(client, prog):
    """The launches a replay of prog makes (the daemon's `kernels` for its
    cache rows), or None when the daemon does not say."""
    try:
        from ..stats import stats
        rows = stats(client.socket).get("cache") or []
        ks = [r.get("kernels") for r in rows if r.get("program") == prog.id and
              r.get("kernels") is not None]
        return max(ks) if ks else None
    except Exception:   # noqa: BLE001 -- a report detail only
        return None


def fallback_report(e):
    return {"routed": False, "op": e.op, "why": e.why}


def explain(fn, *args, **kwargs):
    """Capture fn(*args, **kwargs) in a CUDA graph under gfxgraph.enable()
    (after one warm-up call on a side stream, as CUDA-graph code does) and
    say what the daemon made of it: ``routed``, the program's ``nodes`` and
    ``kernels``, the aten ops recorded and lowered, the fused forms found,
    and for a capture left to PyTorch the first uncovered ``op`` and
    ``why`` (its operands' shapes, dtypes and strides)."""
    import torch
    from .. import cudagraph
    was = cudagraph.is_enabled()
    if not was:
        cudagraph.enable()
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn(*args, **kwargs)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn(*args, **kwargs)
        rep = dict(getattr(g, "gfxgraph_report", None) or {"routed": False,
                                                          "why": "nothing recorded"})
        g.reset()
        return rep
    finally:
        if not was:
            cudagraph.disable()
