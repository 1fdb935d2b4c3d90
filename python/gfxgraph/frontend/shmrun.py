# SPDX-License-Identifier: MIT
"""Running a lowered step on a cpu-backend daemon: every storage the program
uses in gfxgraph shared memory (numpy), external ones filled from recorded
bytes.  What the trace tests do, and a way to reproduce a capture's program
without a GPU."""

from .ir import ITEMSIZE


def storage_arrays(graph, plan, before):
    """{storage id: uint8 shared array} for the plan's storages and every
    output/state storage; `before` maps storage id -> bytes to start from."""
    import numpy as np
    from ..shm import shared_array
    sids = set(plan.storages)
    sids.update(graph.tensors[i].storage.id for i in graph.outputs + graph.state)
    arrays = {}
    for sid in sorted(sids):
        st = graph.storages[sid]
        a = shared_array(max(1, st.nbytes), "uint8")
        if sid in before:
            src = np.frombuffer(bytes(before[sid]), dtype=np.uint8)
            a[:src.size] = src
        arrays[sid] = a
    return arrays


def define(client, graph, plan, arrays, name="trace"):
    """Register the arrays and define the plan's program; (program, buffers)."""
    bufs = {sid: client.register(a) for sid, a in arrays.items()}
    return client.define(plan.spec(name, bufs)), bufs


def tensor_values(arr, t):
    """The elements of IR tensor t in storage bytes arr, as a float64 (or
    int64/bool) numpy array of t's shape."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided
    if t.dtype == "bf16":
        u = np.frombuffer(arr.tobytes(), dtype=np.uint16)
        base = (u.astype(np.uint32) << 16).view(np.float32)
    else:
        np_dt = {"f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                 "bool": np.bool_}[t.dtype]
        n = arr.size // ITEMSIZE[t.dtype]
        base = np.frombuffer(arr.tobytes()[:n * ITEMSIZE[t.dtype]], dtype=np_dt)
    it = base.itemsize
    v = as_strided(base[t.offset:], shape=t.shape, strides=[s * it for s in t.stride])
    return np.array(v, dtype=np.float64 if t.dtype in ("f32", "f16", "bf16") else v.dtype)
