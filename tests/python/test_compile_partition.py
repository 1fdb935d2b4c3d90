#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The torch.compile backend's partitioning rule, without torch
(gfxgraph.frontend.partition): per-node coverage from the IR's ops (a node
is covered when each of its aten ops lowers onto ops the daemon has), the
fewest alternating daemon/Inductor partitions a topological order allows
(checked against an exhaustive search on random graphs), neutral nodes
joining their inputs' partition, and the rule that a graph needing more
than N partitions goes to Inductor whole.  On the recorded decode steps of
tests/traces (Llama, Qwen2, GPT-2), each op as its own node: every op is
covered, so the step is ONE daemon partition; with the embedding refused it
is Inductor then the daemon (GPT-2, whose position embedding reads
positions the daemon computes: daemon, Inductor, daemon); with attention refused in every layer
it would alternate once per layer and goes to Inductor whole.  A graph
under dynamic shapes (Dynamo's): size queries and the .item() of a host
scalar (no recorded device work) are neutral and the graph stays one daemon
partition; an .item() of a device tensor is data, not covered; with its
uncovered nodes first (cumsum, leaky_relu and its slope's .item()) it is
Inductor then the daemon.  Exit 0 when all passed, 1 otherwise.
"""
import glob
import itertools
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

from test_package import check  # noqa: E402
import test_package as tp  # noqa: E402
from gfxgraph.frontend import partition as P  # noqa: E402
from gfxgraph.frontend.ir import Graph, Op, Storage, Tensor  # noqa: E402

D, I = P.DAEMON, P.INDUCTOR


def valid(order, preds, covered, parts):
    """Every node once; kinds right; edges forward; neighbours differ."""
    where = {}
    for k, (kind, nodes) in enumerate(parts):
        for n in nodes:
            if n in where:
                return "node %s twice" % n
            where[n] = k
            c = covered.get(n)
            if c is not None and (D if c else I) != kind:
                return "node %s (covered %s) in a %s partition" % (n, c, kind)
    if set(where) != set(order):
        return "nodes missing: %s" % sorted(set(order) - set(where))
    for n in order:
        for p in preds.get(n, ()):
            if p in where and where[p] > where[n]:
                return "edge %s -> %s goes backwards (%d > %d)" % (p, n, where[p], where[n])
    for a, b in zip(parts, parts[1:]):
        if a[0] == b[0]:
            return "two %s partitions next to each other" % a[0]
    return None


def fewest(order, preds, covered):
    """The fewest alternating partitions, by trying every assignment."""
    real = [n for n in order if covered[n] is not None]
    if not real:
        return 0
    for k in range(1, len(real) + 1):
        for first in (True, False):
            kinds = [first if i % 2 == 0 else not first for i in range(k)]
            # each real node: a segment of its kind; neutral ones anywhere
            choices = []
            for n in order:
                c = covered[n]
                choices.append([i for i in range(k) if c is None or kinds[i] == c])
            for seg in itertools.product(*choices):
                w = dict(zip(order, seg))
                if all(w[p] <= w[n] for n in order for p in preds.get(n, ())):
                    used = sorted({w[n] for n in real})
                    if len(used) == k:
                        return k
    return len(real)


def test_plan():
    chain = ["a", "b", "c", "d"]
    pc = {"b": ["a"], "c": ["b"], "d": ["c"]}
    p = P.plan(chain, pc, {n: True for n in chain})
    check(p["mode"] == "daemon" and p["partitions"] == [(D, chain)] and p["split"] == 1,
          "all covered: one daemon partition: %r" % p)
    p = P.plan(chain, pc, {"a": True, "b": None, "c": True, "d": None})
    check(p["mode"] == "daemon" and len(p["partitions"]) == 1,
          "covered and neutral nodes: one daemon partition: %r" % p)
    p = P.plan(chain, pc, {n: False for n in chain})
    check(p["mode"] == "inductor" and p["partitions"] == [(I, chain)],
          "nothing covered: Inductor whole: %r" % p)
    p = P.plan(chain, pc, {n: None for n in chain})
    check(p["mode"] == "none" and p["partitions"] == [], "no device work: none: %r" % p)
    cov = {"a": True, "b": False, "c": True, "d": True}
    p = P.plan(chain, pc, cov)
    check(p["mode"] == "mixed" and p["partitions"] == [(D, ["a"]), (I, ["b"]), (D, ["c", "d"])],
          "daemon, Inductor, daemon along a chain: %r" % p)
    p = P.plan(chain, pc, cov, max_partitions=2)
    check(p["mode"] == "inductor" and p["split"] == 3 and p["partitions"] == [(I, chain)],
          "3 partitions with at most 2 allowed: Inductor whole, split 3: %r" % p)
    cov = {"a": True, "b": False, "c": True, "d": False}
    p = P.plan(chain, pc, cov)
    check(p["mode"] == "inductor" and p["split"] == 4,
          "more than N=%d partitions (4): Inductor whole: %r" % (P.MAX_PARTITIONS, p))
    # graph order d, i, d, i, d but the uncovered nodes are independent of
    # the second covered one: three partitions, not five
    order = ["x1", "y1", "x2", "y2", "x3"]
    preds = {"y1": ["x1"], "x2": ["x1"], "y2": ["x2"], "x3": ["y1", "y2"]}
    cov = {"x1": True, "y1": False, "x2": True, "y2": False, "x3": True}
    p = P.plan(order, preds, cov)
    check(p["mode"] == "mixed" and
          p["partitions"] == [(D, ["x1", "x2"]), (I, ["y1", "y2"]), (D, ["x3"])],
          "independent nodes regrouped: 3 partitions where graph order alternates 5 times: %r"
          % p)
    # a neutral node (tuple indexing) after an uncovered one stays with it;
    # a leading neutral node joins the first real partition
    order = ["v", "u", "g", "x"]
    preds = {"u": ["v"], "g": ["u"], "x": ["g"]}
    cov = {"v": None, "u": False, "g": None, "x": True}
    p = P.plan(order, preds, cov)
    check(p["mode"] == "mixed" and p["partitions"] == [(I, ["v", "u", "g"]), (D, ["x"])],
          "neutral nodes go with their inputs: %r" % p)


def test_random():
    rng = random.Random(19)
    bad, worst_gap, n_graphs = None, 0, 0
    for _ in range(60):
        n = rng.randint(1, 6)
        order = ["n%d" % i for i in range(n)]
        preds = {o: [order[j] for j in range(i) if rng.random() < 0.4]
                 for i, o in enumerate(order)}
        covered = {o: rng.choice([True, False, None]) for o in order}
        parts = P.partitions(order, preds, covered)
        why = valid(order, preds, covered, parts)
        best = fewest(order, preds, covered)
        real = [p for p in parts if p[0] is not None]
        n_graphs += 1
        if why is None and len(real) != best:
            why = "%d partitions, %d possible" % (len(real), best)
        if why is not None and bad is None:
            bad = (order, preds, covered, parts, why)
        worst_gap = max(worst_gap, len(real) - best)
    check(bad is None, "%d random graphs: valid cuts with the fewest partitions (exhaustive "
          "search)%s" % (n_graphs, "" if bad is None else ": %r" % (bad,)))


def _ir(ops_spec):
    """A small IR graph: ops_spec [(aten name, [input tensor ids], out id)],
    tensors f32 [4, 8] each in its own storage; tensor 0 external."""
    storages, tensors = {}, {}

    def t(i):
        if i not in tensors:
            s = Storage(i, 4 * 32, external=(i == 0))
            storages[i] = s
            tensors[i] = Tensor(i, s, 0, (4, 8), (8, 1), "f32")
        return tensors[i]
    ops = []
    for k, (name, ins, out) in enumerate(ops_spec):
        args = [t(i) for i in ins]
        if name == "aten.cumsum.default":
            args.append(1)
        if name == "aten.mul.Tensor" and len(args) == 1:
            args.append(0.5)
        ops.append(Op(name, args, {}, t(out), k))
    return Graph(storages, tensors, ops, inputs=[0], outputs=[ops[-1].out.id])


def test_coverage():
    g = _ir([("aten.add.Tensor", [0, 0], 1), ("aten.view.default", [1], 2),
             ("aten.cumsum.default", [2], 3), ("aten.mul.Tensor", [3], 4)])
    node_of = {0: "add", 1: "view", 2: "cumsum", 3: "mul"}
    nodes = ["add", "view", "cumsum", "mul"]
    cov, unc = P.node_coverage(g, node_of, nodes)
    check(cov == {"add": True, "view": None, "cumsum": False, "mul": True} and
          list(unc) == ["cumsum"] and unc["cumsum"][0][0] == "aten.cumsum.default" and
          "f32[4, 8]" in unc["cumsum"][0][1],
          "coverage: add, x * 0.5 covered, a view neutral, cumsum not (named with its "
          "operands): %r %r" % (cov, unc))
    p = P.plan(nodes, {"view": ["add"], "cumsum": ["view"], "mul": ["cumsum"]}, cov)
    check(p["partitions"] == [(D, ["add", "view"]), (I, ["cumsum"]), (D, ["mul"])],
          "-> daemon [add, view], Inductor [cumsum], daemon [mul]: %r" % p["partitions"])
    cov, unc = P.node_coverage(g, node_of, nodes, daemon_ops={"scale", "copy"})
    check(cov["add"] is False and "'add'" in unc["add"][0][1] and cov["mul"] is True,
          "a daemon without add: the add node is not covered (x * 0.5 lowers to scale, "
          "which it has): %r" % unc.get("add"))
    cov, unc = P.node_coverage(g, node_of, nodes, refused={"aten.mul.Tensor"})
    check(cov["mul"] is False and "refused" in unc["mul"][0][1],
          "an op the daemon refused to define is not covered: %r" % unc.get("mul"))
    # a node's ops: one uncovered op makes the node uncovered
    g2 = _ir([("aten.add.Tensor", [0, 0], 1), ("aten.cumsum.default", [1], 2)])
    cov, _ = P.node_coverage(g2, {0: "n", 1: "n"}, ["n"])
    check(cov == {"n": False}, "a node with a covered and an uncovered op is uncovered: %r"
          % cov)


def test_dynamic():
    """A node per FX node of Dynamo's graph of x + mul(add(x, x), eps)
    under dynamic shapes: `size` (x.size(0): aten.sym_size.int, an int),
    `add`, `item` (eps.item() of a host scalar input: the recorder keeps no
    record of it, so no op), `mul` (x * the number)."""
    st = {i: Storage(i, 4 * 5 * 8, external=(i == 0)) for i in range(4)}
    t = {i: Tensor(i, st[i], 0, (5, 8), (8, 1), "f32") for i in range(4)}
    ops = [Op("aten.sym_size.int", [t[0], 0], {}, 5, 0),
           Op("aten.add.Tensor", [t[0], t[0]], {}, t[1], 1),
           Op("aten.mul.Tensor", [t[1], 1e-5], {}, t[2], 2),
           Op("aten.add.Tensor", [t[0], t[2]], {}, t[3], 3)]
    g = Graph(st, t, ops, inputs=[0], outputs=[3])
    order = ["size", "add", "item", "mul", "add_1"]
    preds = {"add": [], "mul": ["add", "item"], "add_1": ["mul"]}
    node_of = {0: "size", 1: "add", 2: "mul", 3: "add_1"}
    cov, unc = P.node_coverage(g, node_of, order)
    check(cov == {"size": None, "add": True, "item": None, "mul": True, "add_1": True} and
          not unc, "dynamic shapes: a size query and a host scalar's .item() are neutral: %r"
          % cov)
    p = P.plan(order, preds, cov)
    check(p["mode"] == "daemon" and p["partitions"] == [(D, order)],
          "dynamic shapes: one daemon partition, the host-value nodes in it: %r" % p)
    # .item() of a tensor the graph computes: a value the program cannot
    # hold as a constant
    ops2 = ops[:3] + [Op("aten._local_scalar_dense.default", [t[2]], {}, 0.5, 3)]
    g2 = Graph(st, t, ops2, inputs=[0], outputs=[2])
    order2 = ["size", "add", "mul", "item"]
    node_of2 = {0: "size", 1: "add", 2: "mul", 3: "item"}
    cov, unc = P.node_coverage(g2, node_of2, order2)
    check(cov["item"] is False and unc["item"][0][0] == "aten._local_scalar_dense.default" and
          "f32[5, 8]" in unc["item"][0][1] and cov["mul"] is True,
          "an .item() of a device tensor is not covered, named with its operand: %r"
          % unc.get("item"))
    p = P.plan(order2, {"mul": ["add"], "item": ["mul"]}, cov)
    check(p["mode"] == "mixed" and p["partitions"] == [(D, ["size", "add", "mul"]),
                                                      (I, ["item"])],
          "-> daemon [size, add, mul], Inductor [item]: %r" % p["partitions"])
    _dynamic_uncovered_first()


def _dynamic_uncovered_first():
    """Dynamo's graph of linear(leaky_relu(cumsum(x), slope)) + x under
    dynamic shapes, the slope a host scalar read with .item(): the
    uncovered nodes first, then covered ones.  The cut is Inductor then the
    daemon, the size query and the .item() in Inductor's partition (before
    the node that reads them), the linear and the residual add the daemon's."""
    st = {0: Storage(0, 4 * 5 * 8, external=True), 1: Storage(1, 4 * 8 * 8, external=True),
          2: Storage(2, 4 * 8, external=True)}
    for i in range(3, 7):
        st[i] = Storage(i, 4 * 5 * 8, external=False)
    t = {0: Tensor(0, st[0], 0, (5, 8), (8, 1), "f32"),
         1: Tensor(1, st[1], 0, (8, 8), (8, 1), "f32"),
         2: Tensor(2, st[2], 0, (8,), (1,), "f32"),
         7: Tensor(7, st[1], 0, (8, 8), (1, 8), "f32")}     # the weight transposed (a view)
    for i in range(3, 7):
        t[i] = Tensor(i, st[i], 0, (5, 8), (8, 1), "f32")
    ops = [Op("aten.sym_size.int", [t[0], 0], {}, 5, 0),
           Op("aten.cumsum.default", [t[0], -1], {}, t[3], 1),
           Op("aten.leaky_relu.default", [t[3], 0.2], {}, t[4], 2),
           Op("aten.t.default", [t[1]], {}, t[7], 3),
           Op("aten.addmm.default", [t[2], t[4], t[7]], {}, t[5], 4),
           Op("aten.add.Tensor", [t[5], t[0]], {}, t[6], 5)]
    g = Graph(st, t, ops, inputs=[0, 1, 2], outputs=[6])
    order = ["size", "cumsum", "item", "leaky_relu", "linear", "add"]
    preds = {"cumsum": [], "leaky_relu": ["cumsum", "item"], "linear": ["leaky_relu"],
             "add": ["linear"]}
    node_of = {0: "size", 1: "cumsum", 2: "leaky_relu", 3: "linear", 4: "linear", 5: "add"}
    cov, unc = P.node_coverage(g, node_of, order)
    check(cov == {"size": None, "cumsum": False, "item": None, "leaky_relu": False,
                  "linear": True, "add": True} and sorted(unc) == ["cumsum", "leaky_relu"],
          "dynamic shapes, uncovered nodes first: cumsum and leaky_relu not covered, the "
          "linear (t, addmm) and the add covered, size and .item() neutral: %r" % cov)
    p = P.plan(order, preds, cov)
    check(p["mode"] == "mixed" and p["split"] == 2 and
          [(k, sorted(ns)) for k, ns in p["partitions"]] ==
          [(I, ["cumsum", "item", "leaky_relu", "size"]), (D, ["add", "linear"])],
          "-> Inductor [size, cumsum, item, leaky_relu], daemon [linear, add]: a leading "
          "Inductor partition leaves the rest to the daemon: %r" % p)


def _trace_nodes(g):
    """Each op its own node; an op's inputs: the earlier ops writing memory
    it reads (storage granularity)."""
    order = ["op%d" % op.index for op in g.ops]
    node_of = {op.index: "op%d" % op.index for op in g.ops}
    writers = {}
    preds = {}
    for op in g.ops:
        ps = set()
        for t in op.tensors_in():
            ps.update(writers.get(t.storage.id, ()))
        preds["op%d" % op.index] = sorted(ps)
        for t in op.tensors_out():
            writers.setdefault(t.storage.id, []).append("op%d" % op.index)
    return order, preds, node_of


def test_traces():
    files = sorted(glob.glob(os.path.join(HERE, "..", "traces", "*.json")))
    files = [f for f in files if not f.endswith("manifest.json")]
    if not files:
        check(False, "tests/traces has recorded steps")
        return
    for f in files:
        name = os.path.basename(f)[:-5]
        with open(f) as fh:
            g = Graph.from_json(json.load(fh))
        order, preds, node_of = _trace_nodes(g)
        cov, unc = P.node_coverage(g, node_of, order)
        p = P.plan(order, preds, cov)
        check(p["mode"] == "daemon" and len(p["partitions"]) == 1 and not unc,
              "%s: %d ops, all covered: one daemon partition (%s%s)"
              % (name, len(g.ops), p["mode"], "; uncovered %r" % list(unc.values())[:1]
                 if unc else ""))
        emb = {op.name for op in g.ops if op.name.startswith("aten.embedding")}
        if emb:
            cov, unc = P.node_coverage(g, node_of, order, refused=emb)
            p = P.plan(order, preds, cov)
            n_emb = sum(1 for op in g.ops if op.name in emb)
            ind = {n for k, ns in p["partitions"] if k == I for n in ns}
            # one token embedding: Inductor, then the daemon; GPT-2's
            # position embedding reads positions computed on the daemon
            want = [I, D] if n_emb == 1 else [D, I, D]
            check(p["mode"] == "mixed" and [k for k, _ in p["partitions"]] == want and
                  all(node_of[op.index] in ind for op in g.ops if op.name in emb),
                  "%s: %d embedding(s) refused: %s, the embeddings in Inductor's: %s"
                  % (name, n_emb, want, [(k, len(n)) for k, n in p["partitions"]]))
        layers = g.meta.get("config", {}).get("num_hidden_layers") or \
            g.meta.get("config", {}).get("n_layer") or 0
        att = {op.name for op in g.ops if "scaled_dot_product" in op.name}
        if att and layers >= 2:
            cov, unc = P.node_coverage(g, node_of, order, refused=att)
            p = P.plan(order, preds, cov)
            check(p["mode"] == "inductor" and p["split"] >= 2 * layers and
                  p["split"] > P.MAX_PARTITIONS,
                  "%s: attention refused in %d layers: the cut would need %d partitions "
                  "(> %d): Inductor whole" % (name, layers, p["split"], P.MAX_PARTITIONS))


def main():
    for fn in (test_plan, test_random, test_coverage, test_dynamic, test_traces):
        try:
            fn()
        except Exception:   # noqa: BLE001
            import traceback
            traceback.print_exc()
            check(False, "%s ran to the end without an exception" % fn.__name__)
    print("%d passed, %d failed" % (tp.PASSES, tp.FAILS))
    return 1 if tp.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
