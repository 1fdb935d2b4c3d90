# SPDX-License-Identifier: MIT
"""Graph passes over the IR's op list: who wrote what (dataflow through
storages), and dead-op elimination.

Dataflow is tracked by memory, not by tensor identity: an op reads the
elements of its tensor arguments and writes those of its outputs (an
in-place op: its first argument), so a view between two ops changes
nothing.
"""

from .ir import Tensor
from .lower import VIEWS


def producer(ops, i, t):
    """The index of the op before ops[i] that last wrote t's memory, when
    that op wrote t's elements exactly (t the same tensor or a reshaping view
    of what it wrote); None otherwise (t is external, or partly written)."""
    if not isinstance(t, Tensor):
        return None
    for j in range(i - 1, -1, -1):
        op = ops[j]
        if op.name in VIEWS:
            continue
        for w in op.tensors_out():
            if w.storage is t.storage and w.overlaps(t):
                if w.same_memory(t) or (w.offset == t.offset and w.numel == t.numel and
                                        w.dtype == t.dtype and w.is_contiguous() and
                                        t.is_contiguous()):
                    return j
                return None
    return None


def unchanged(ops, t, i0, i1):
    """No op in ops[i0:i1] writes memory t covers."""
    for op in ops[i0:i1]:
        if op.name in VIEWS:
            continue
        for w in op.tensors_out():
            if w.overlaps(t):
                return False
    return True


def eliminate_dead(graph, ops):
    """The ops whose effects reach the step's outputs or its external
    memory (weights, caches, inputs), in order.  Storage granularity:
    an op writing a storage something later reads is kept."""
    needed = set(graph.tensors[i].storage.id for i in graph.outputs if i in graph.tensors)
    needed.update(graph.tensors[i].storage.id for i in graph.state if i in graph.tensors)
    keep = []
    for op in reversed(ops):
        if op.name in VIEWS:
            continue
        outs = op.tensors_out()
        live = any(t.storage.external or t.storage.id in needed for t in outs)
        if not live:
            continue
        keep.append(op)
        for t in op.tensors_in():
            needed.add(t.storage.id)
    keep.reverse()
    return keep
