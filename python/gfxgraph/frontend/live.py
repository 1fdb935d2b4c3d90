"""A capture under gfxgraph.enable() -> one daemon program, and the report
of what happened (gfxgraph.explain, stats()["local"]["captures_log"]).
Imports torch."""

import collections

from ..errors import Error
from .ir import Unsupported

# the last reports, newest last (stats()["local"]["captures_log"])
REPORTS_KEPT = 32


class Built:
    """A defined program with what it needs kept alive."""

    def __init__(self, prog, keep, report):
        self.prog, self.keep, self.report = prog, keep, report


def _register(client, cache, objs, sid):
    st = objs[sid]
    key = (st.data_ptr(), st.nbytes())
    b = cache.get(key)
    if b is None or b.id is None:
        b = client.register_device_pointer(key[0], key[1], owner=st)
        cache[key] = b
    return b


def build_from_recorder(rec, client, cache, name, device_type="cuda"):
    """The recorder's ops -> a defined, prepared program (Built).  Raises
    Unsupported (naming the op, its shapes, dtypes and strides) when the
    daemon cannot run the step; the records are dropped either way."""
    from . import build
    from .torchrec import check_devices, graph_of, live_outputs
    records, rec.records = rec.records, None
    bad = check_devices(records, device_type)
    if bad is not None:
        raise Unsupported(bad[0], "an operand on %s (%s%s stride %s); the daemon runs on %s"
                          % (bad[1].device, bad[1].dtype, list(bad[1].shape),
                             list(bad[1].stride()), device_type))
    graph, objs, weak = graph_of(records, device_type)
    del records           # what only the records held is freed: the intermediates
    graph.outputs = live_outputs(graph, weak)
    plan = build(graph)
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
    return Built(prog, [objs[s] for s in plan.storages], report)


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
