# SPDX-License-Identifier: MIT
"""Programs: a program.define spec translated into gg_program_def builder
calls, and replay / submit / prepare / rebind / release."""

import ctypes
import numbers
from typing import Any, Dict, Iterable, Literal, Optional, Union, cast

from . import _lib
from .client import Buffer, Ticket, result_dict
from .errors import Error

_SPEC_KEYS = {"name", "tensors", "nodes", "branches", "buckets"}
_TENSOR_KEYS = {"dtype", "shape", "buffer", "offset", "scratch", "view"}
_NODE_KEYS = {"op", "inputs", "outputs", "attrs"}
_CALL_KEYS = {"op", "program", "branch"}
_INT_MAX = 2**31 - 1
_ReplayResult = _lib.ReplayResult
_byref = ctypes.byref


def _bad(msg):
    return Error("EINVAL", "program spec: " + msg)


def _dims(name, shape):
    if not isinstance(shape, (list, tuple)) or not shape:
        raise _bad("tensor %r: shape must be a non-empty list" % name)
    dims = []
    for i, d in enumerate(shape):
        if d == "batch" or d is None:
            if i != 0:
                raise _bad("tensor %r: \"batch\" may only be the first dim" % name)
            dims.append(_lib.GG_BATCH)
        elif isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 1:
            dims.append(int(d))
        else:
            raise _bad("tensor %r: dim %d is %r (an integer >= 1, or \"batch\" first)"
                       % (name, i, d))
    return (ctypes.c_int64 * len(dims))(*dims), len(dims)


def _dtype(name, dt):
    if dt is None:
        raise _bad("tensor %r: missing dtype" % name)
    names = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "half": "f16",
             "float": "f32", "torch.float32": "f32", "torch.float16": "f16",
             "torch.bfloat16": "bf16", "int32": "i32", "torch.int32": "i32",
             "int64": "i64", "torch.int64": "i64", "long": "i64", "torch.long": "i64",
             "bool": "bool", "bool_": "bool", "torch.bool": "bool"}
    d = str(dt)
    return names.get(d, d)


def _uint(name, key, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
        raise _bad("tensor %r: %s must be a non-negative integer, not %r" % (name, key, v))
    return int(v)


def _names(what, v):
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise _bad("%s must be a list of tensor names" % what)
    return [x.encode("utf-8") for x in v]


def _check_keys(what, m, allowed):
    extra = [k for k in m if k not in allowed]
    if extra:
        raise _bad("%s: %s not understood (the builder of libgfxgraph-client takes only %s)"
                   % (what, ", ".join(map(repr, extra)), ", ".join(sorted(allowed))))


def build(client, spec):
    """A gg_program_def (the caller frees it) for spec, plus the spec's
    bookkeeping (name, buckets, the Buffers it uses)."""
    lib = client._lib
    if not isinstance(spec, dict):
        raise _bad("a dict (the program.define map) is expected, not %s" % type(spec).__name__)
    _check_keys("the spec", spec, _SPEC_KEYS)
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise _bad("missing or empty 'name'")
    tensors = spec.get("tensors")
    if not isinstance(tensors, dict) or not tensors:
        raise _bad("'tensors' must be a non-empty map name -> tensor")
    nodes, branches = spec.get("nodes"), spec.get("branches")
    if (nodes is None) == (branches is None):
        raise _bad("give exactly one of 'nodes' and 'branches'")
    if nodes is not None:
        branches = [nodes]
    if not isinstance(branches, (list, tuple)) or not branches:
        raise _bad("'branches' must be a non-empty list of node lists")
    d = lib.gg_program_def_new(name.encode("utf-8"))
    if not d:
        raise Error("ENOMEM", "gg_program_def_new failed")
    used = []
    try:
        for tname, t in tensors.items():
            if not isinstance(tname, str):
                raise _bad("tensor names must be strings")
            if not isinstance(t, dict):
                raise _bad("tensor %r must be a map" % tname)
            _check_keys("tensor %r" % tname, t, _TENSOR_KEYS)
            dims, nd = _dims(tname, t.get("shape"))
            if t.get("view") is not None:
                of = t["view"]
                if not isinstance(of, str) or not of:
                    raise _bad("tensor %r: 'view' must name another tensor" % tname)
                for k in ("buffer", "offset", "scratch"):
                    if t.get(k):
                        raise _bad("tensor %r: a view takes no %r" % (tname, k))
                if t.get("dtype") is not None:
                    # the builder takes a view's dtype from its tensor: a
                    # dtype here is only accepted when it says the same
                    base = tensors.get(of)
                    if not isinstance(base, dict) or base.get("dtype") is None or \
                            _dtype(of, base["dtype"]) != _dtype(tname, t["dtype"]):
                        raise _bad("tensor %r: a view's dtype comes from %r; the builder "
                                   "cannot send another one" % (tname, of))
                if not _lib.has("gg_program_def_view"):
                    raise Error("ENOSYS", "program spec: tensor %r is a view, and this "
                                "libgfxgraph-client (%s) has no gg_program_def_view"
                                % (tname, _lib.library_path()))
                lib.gg_program_def_view(d, tname.encode("utf-8"), of.encode("utf-8"), nd, dims)
                continue
            dt = _dtype(tname, t.get("dtype")).encode()
            if t.get("scratch"):
                if t.get("buffer") is not None:
                    raise _bad("tensor %r: a scratch tensor has no buffer" % tname)
                if t.get("offset"):
                    raise _bad("tensor %r: a scratch tensor has no offset" % tname)
                lib.gg_program_def_scratch(d, tname.encode("utf-8"), dt, nd, dims)
                continue
            buf = t.get("buffer")
            if buf is None:
                raise _bad("tensor %r: 'buffer' is required unless scratch" % tname)
            if isinstance(buf, Buffer):
                if buf.client is not client:
                    raise _bad("tensor %r: the Buffer belongs to another client" % tname)
                if buf.id is None:
                    raise Error("ENOENT", "program spec: tensor %r: the Buffer was released"
                                % tname)
                used.append(buf)
                bid = buf.id
            else:
                bid = _uint(tname, "buffer", buf)
            off = _uint(tname, "offset", t.get("offset") or 0)
            lib.gg_program_def_tensor(d, tname.encode("utf-8"), bid, off, dt, nd, dims)
        for bi, br in enumerate(branches):
            if not isinstance(br, (list, tuple)) or not br:
                raise _bad("branch %d must be a non-empty list of nodes" % bi)
            if bi > 0:
                lib.gg_program_def_branch(d)
            for ni, n in enumerate(br):
                where = "branch %d node %d" % (bi, ni)
                if not isinstance(n, dict):
                    raise _bad("%s must be a map" % where)
                if n.get("op") == "call":
                    _call(lib, d, client, where, n)
                    continue
                _check_keys(where, n, _NODE_KEYS)
                op = n.get("op")
                if not isinstance(op, str) or not op:
                    raise _bad("%s: missing 'op'" % where)
                ins = _names(where + " inputs", n.get("inputs", []))
                outs = _names(where + " outputs", n.get("outputs", []))
                ia = (ctypes.c_char_p * max(1, len(ins)))(*ins)
                oa = (ctypes.c_char_p * max(1, len(outs)))(*outs)
                lib.gg_program_def_node(d, op.encode(), len(ins), ia, len(outs), oa)
                attrs = n.get("attrs") or {}
                if not isinstance(attrs, dict):
                    raise _bad("%s: attrs must be a map" % where)
                for k, v in attrs.items():
                    if v is None:
                        continue
                    if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
                        raise _bad("%s: attribute %r is %r: the builder takes numbers and "
                                   "strings only" % (where, k, v))
                    if isinstance(v, str):
                        lib.gg_program_def_attr_s(d, str(k).encode(), v.encode("utf-8"))
                    else:
                        lib.gg_program_def_attr_f(d, str(k).encode(), float(v))
        buckets = spec.get("buckets")
        if buckets is not None:
            if (not isinstance(buckets, (list, tuple)) or not buckets or
                    not all(isinstance(b, numbers.Integral) and not isinstance(b, bool)
                            and 0 < b <= _INT_MAX for b in buckets)):
                raise _bad("'buckets' must be a non-empty list of positive integers")
            arr = (ctypes.c_int * len(buckets))(*[int(b) for b in buckets])
            lib.gg_program_def_buckets(d, len(buckets), arr)
            buckets = [int(b) for b in buckets]
        err = _lib.s(lib.gg_program_def_error(d))
        if err:
            raise _bad(err)
    except BaseException:
        lib.gg_program_def_free(d)
        raise
    return d, name, buckets, len(branches), used


def _call(lib, d, client, where, n):
    """A node {op: "call", program: Program or id, branch: n}: the daemon
    runs that program's nodes at this program's bucket (PROTOCOL.md)."""
    _check_keys(where + " (call)", n, _CALL_KEYS)
    prog = n.get("program")
    if isinstance(prog, Program):
        if prog.client is not client:
            raise _bad("%s: the called Program belongs to another client" % where)
        if prog.id is None:
            raise Error("ENOENT", "program spec: %s: the called program %r was released"
                        % (where, prog.name))
        prog = prog.id
    if isinstance(prog, bool) or not isinstance(prog, numbers.Integral) or prog < 0:
        raise _bad("%s: 'program' must be a Program or a program id, not %r" % (where, prog))
    pid = int(prog)
    branch = n.get("branch", 0)
    if isinstance(branch, bool) or not isinstance(branch, numbers.Integral) or \
            not 0 <= branch <= _INT_MAX:
        raise _bad("%s: 'branch' must be an integer >= 0" % where)
    if not _lib.has("gg_program_def_call"):
        raise Error("ENOSYS", "program spec: %s is a call, and this libgfxgraph-client (%s) "
                    "has no gg_program_def_call" % (where, _lib.library_path()))
    lib.gg_program_def_call(d, pid, int(branch))


def define(client: Any, spec: Dict[str, Any]) -> "Program":
    c = client._h()
    lib = client._lib
    d, name, buckets, nbranches, used = build(client, spec)
    pid = ctypes.c_uint64()
    try:
        rc = lib.gg_client_program_define(c, d, ctypes.byref(pid))
        if rc < 0:
            raise client._fail(rc, "program.define %r" % name)
    finally:
        lib.gg_program_def_free(d)
    return Program(client, pid.value, name, buckets, nbranches, used)


def _batch(batch):
    if type(batch) is int and 0 < batch <= _INT_MAX:     # the common case, cheaply
        return batch
    if not isinstance(batch, numbers.Integral) or isinstance(batch, bool):
        raise Error("EINVAL", "batch must be an integer, not %r" % (batch,))
    if not 1 <= batch <= _INT_MAX:
        raise Error("EINVAL", "batch %d is out of range (1 .. 65536)" % batch)
    return int(batch)


def _branch(branch):
    if type(branch) is int and 0 <= branch <= _INT_MAX:
        return branch
    if branch is None:
        return 0
    if not isinstance(branch, numbers.Integral) or isinstance(branch, bool) or \
            not 0 <= branch <= _INT_MAX:
        raise Error("EINVAL", "branch must be an integer >= 0, not %r" % (branch,))
    return int(branch)


class Program:
    """A defined program: ``id``, ``name``, ``buckets`` (as given in the
    spec; None: the daemon's), ``branches``."""

    def __init__(self, client: Any, pid: int, name: str, buckets: Any, branches: Any,
                 buffers: Any) -> None:
        self.client = client
        self.id: Optional[int] = pid
        # the plain replay's arguments, made once (see replay)
        self._replay_fn = _lib.raw("gg_client_replay")
        self._ch = ctypes.c_void_p(client._c)
        self._cid = ctypes.c_uint64(pid)
        self.name = name
        self.buckets = buckets
        self.branches = branches
        self._buffers = buffers          # keep what the program reads alive

    def __repr__(self) -> str:
        return "Program(id=%r, name=%r)" % (self.id, self.name)

    def _h(self):
        c = self.client._h()
        if self.id is None:
            raise Error("ENOENT", "program %r was released" % self.name)
        return c

    @staticmethod
    def _opts(wait_event, signal_event, async_, timed):
        if not (wait_event or signal_event or async_ or timed):
            return None
        o = _lib.ReplayOpts()
        o.wait_event = int(wait_event or 0)
        o.signal_event = int(signal_event or 0)
        o.async_ = bool(async_)
        o.timed = bool(timed)
        return ctypes.byref(o)

    def replay(self, batch: int, branch: int = 0, *, wait_event: Optional[int] = None,
               signal_event: Optional[int] = None, async_: bool = False,
               timed: bool = False) -> Dict[str, Any]:
        """Run the program for batch rows; returns the result map as a dict
        (path, bucket, batch, branch, fallback, captured, device_us,
        reason).  The outputs are in the buffers when it returns (unless
        async_, see gg_replay_opts)."""
        # The common call (a plain replay, int arguments in range, client
        # open, program not released) costs the least Python we can make it:
        # a replay through the fast path takes a few microseconds, so every
        # conversion here shows.
        if (self.client._c and self.id is not None and type(batch) is int and
                type(branch) is int and 0 < batch <= _INT_MAX and 0 <= branch <= _INT_MAX and
                not (wait_event or signal_event or async_ or timed)):
            r = _ReplayResult()
            rc = self._replay_fn(self._ch, self._cid, batch, branch, _byref(r))
            if rc >= 0:
                return result_dict(r)
            raise self.client._fail(rc, "replay %r batch %r" % (self.name, batch))
        c = self._h()
        lib = self.client._lib
        r = _lib.ReplayResult()
        opts = self._opts(wait_event, signal_event, async_, timed)
        if opts is None:
            rc = lib.gg_client_replay(c, self.id, _batch(batch), _branch(branch), ctypes.byref(r))
        else:
            rc = lib.gg_client_replay_ex(c, self.id, _batch(batch), _branch(branch), opts,
                                         ctypes.byref(r))
        if rc < 0:
            raise self.client._fail(rc, "replay %r batch %r" % (self.name, batch))
        return result_dict(r)

    __call__ = replay

    def submit(self, batch: int, branch: int = 0, *, wait_event: Optional[int] = None,
               signal_event: Optional[int] = None, timed: bool = False) -> Ticket:
        """Submit a replay and return at once: a Ticket for client.wait()."""
        c = self._h()
        t = ctypes.c_uint64()
        opts = self._opts(wait_event, signal_event, False, timed)
        rc = self.client._lib.gg_client_submit(c, self.id, _batch(batch), _branch(branch), opts,
                                               ctypes.byref(t))
        if rc < 0:
            raise self.client._fail(rc, "submit %r batch %r" % (self.name, batch))
        return Ticket(self.client, t.value, self)

    def prepare(self, buckets: Union[None, int, Iterable[int]] = None,
                branch: Optional[int] = None) -> Dict[str, int]:
        """program.prepare: capture graphs ahead of use for buckets (None:
        all of the program's) and branch (None: every branch).  Returns
        {"ready": n, "failed": m}."""
        c = self._h()
        ready, failed = ctypes.c_int(), ctypes.c_int()
        if buckets is None:
            n, arr = 0, None
        else:
            if isinstance(buckets, numbers.Integral):
                bl = [int(buckets)]
            else:
                bl = [int(b) for b in cast(Iterable[int], buckets)]
            n = len(bl)
            arr = (ctypes.c_int * max(1, n))(*bl)
        br = -1 if branch is None else _branch(branch)
        rc = self.client._lib.gg_client_program_prepare(c, self.id, n, arr, br,
                                                        ctypes.byref(ready), ctypes.byref(failed))
        if rc < 0:
            raise self.client._fail(rc, "program.prepare %r" % self.name)
        return {"ready": ready.value, "failed": failed.value}

    def rebind(self, tensor: str, buffer: Union[Buffer, int], offset: int = 0) -> None:
        """program.rebind of one buffer tensor to buffer (a Buffer or id) at
        offset bytes."""
        c = self._h()
        bid: Any = buffer
        if isinstance(buffer, Buffer):
            self._buffers.append(buffer)
            bid = buffer.id
        rc = self.client._lib.gg_client_program_rebind(c, self.id, _lib.enc(tensor, "tensor"),
                                                       int(bid), int(offset))
        if rc < 0:
            raise self.client._fail(rc, "program.rebind %r" % self.name)

    def release(self) -> None:
        """program.release (idempotent)."""
        if self.id is None or self.client.closed:
            self.id = None
            return
        rc = self.client._lib.gg_client_program_release(self.client._c, self.id)
        if rc < 0:
            raise self.client._fail(rc, "program.release %r" % self.name)
        self.id = None
        self._buffers = []

    def __enter__(self) -> "Program":
        return self

    def __exit__(self, *exc: Any) -> "Literal[False]":
        self.release()
        return False
