# SPDX-License-Identifier: MIT
"""gfxgraph.Client: one connection (session) to gfxgraphd through
libgfxgraph-client, with buffers, programs and asynchronous replays."""

import ctypes
import threading
import weakref
from typing import TYPE_CHECKING, Any, Dict, Literal, Optional

from . import _lib, shm
from .errors import Error, from_client

if TYPE_CHECKING:
    from .program import Program


class Buffer:
    """A registered buffer: ``id`` (the daemon's buffer id), ``size``,
    ``offset``, ``obj`` (what was registered: kept alive while registered)."""

    __slots__ = ("client", "id", "size", "offset", "obj", "handle", "__weakref__")

    def __init__(self, client: "Client", bid: int, size: int, offset: int, obj: Any,
                 handle: Any) -> None:
        self.client = client
        self.id: Optional[int] = bid
        self.size = size
        self.offset = offset
        self.obj = obj
        self.handle = handle

    @property
    def released(self) -> bool:
        return self.id is None

    def release(self) -> None:
        """buffer.release (idempotent; EBUSY while programs use it)."""
        c = self.client
        if self.id is None or c is None or c._c is None:
            self.id = None
            return
        rc = c._lib.gg_client_buffer_release(c._c, self.id)
        if rc < 0:
            raise from_client(c._lib, c._c, rc, "buffer.release %d" % self.id)
        c._buffers.pop(self.id, None)
        self.id = None
        self.obj = None

    def __repr__(self):
        return "Buffer(id=%r, size=%d, offset=%d, handle=%r)" % (self.id, self.size, self.offset,
                                                                self.handle)


class Ticket:
    """A submitted replay (Program.submit): ``wait()`` / ``poll()``, or
    ``client.wait(ticket)``.  Every ticket must be waited for once."""

    __slots__ = ("client", "value", "program", "done")

    def __init__(self, client: "Client", value: int, program: Any) -> None:
        self.client = client
        self.value = value
        self.program = program
        self.done = False

    def wait(self) -> Dict[str, Any]:
        return self.client.wait(self)

    def poll(self) -> bool:
        return self.client.poll(self)

    def __int__(self) -> int:
        return self.value

    def __repr__(self):
        return "Ticket(%d%s)" % (self.value, ", done" if self.done else "")


_PATHS = ("graph", "eager")


def result_dict(r: Any) -> Dict[str, Any]:
    """A gg_replay_result as the replay result map of PROTOCOL.md."""
    path = r.path
    reason = r.reason
    return {
        "path": _PATHS[path] if 0 <= path < 2 else str(path),
        "bucket": r.bucket,
        "batch": r.batch,
        "branch": r.branch,
        "fallback": r.fallback,
        "captured": r.captured,
        "device_us": r.device_us,
        "reason": reason.decode("utf-8", "replace") if reason else "",
    }


class Client:
    """A connection to gfxgraphd: ``Client(socket=None, name=None)``.

    socket None: the C library's default rules ($GFXGRAPH_SOCKET, the
    per-user socket, then the system service's).  Use it as a context
    manager, or call close().  Raises Error (``code`` ENOENT, ECONNREFUSED,
    EACCES, EPROTO ...) when the daemon cannot be reached.

    Thread safety: as the C client (calls are serialised inside it), but an
    Error raised in one thread may carry the message of another thread's
    failure on the same client when both fail at once: give each thread its
    own Client when that matters.
    """

    def __init__(self, socket: Optional[str] = None, name: Optional[str] = None,
                 timeout_ms: Optional[int] = None) -> None:
        self._lib = lib = _lib.load()
        self._c = None
        self._buffers: Dict[Any, Buffer] = {}
        self._programs: "weakref.WeakValueDictionary[int, Program]" = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        c = lib.gg_client_new()
        if not c:
            raise Error("ENOMEM", "gg_client_new failed")
        if timeout_ms:
            lib.gg_client_set_timeout(c, int(timeout_ms))
        rc = lib.gg_client_connect(c, _lib.enc(socket, "socket") if socket else None,
                                   _lib.enc(name if name is not None else "gfxgraph-python"))
        if rc < 0:
            err = from_client(lib, c, rc)
            lib.gg_client_close(c)
            raise err
        self._c = c
        self.backend = _lib.s(lib.gg_client_backend(c))
        self.device = _lib.s(lib.gg_client_device_name(c))
        self.arch = _lib.s(lib.gg_client_device_arch(c))
        self.server_version = _lib.s(lib.gg_client_server_version(c))
        self.socket = _lib.s(lib.gg_client_socket_path(c))
        self.session = int(lib.gg_client_session_id(c))
        self.max_batch = int(lib.gg_client_max_batch(c))

    # ---- lifetime ---------------------------------------------------------

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> "Literal[False]":
        self.close()
        return False

    def close(self) -> None:
        """Close the connection: the daemon drops the session's buffers and
        programs.  Idempotent."""
        c, self._c = self._c, None
        if c:
            for b in list(self._buffers.values()):
                b.id = None
                b.obj = None
            self._buffers.clear()
            for p in list(self._programs.values()):
                p.id = None
            self._lib.gg_client_close(c)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return self._c is None

    @property
    def connected(self) -> bool:
        return bool(self._c) and bool(self._lib.gg_client_connected(self._c))

    def _h(self):
        if not self._c:
            raise Error("ENOTCONN", "the client is closed")
        return self._c

    def _fail(self, rc, what=None):
        return from_client(self._lib, self._c, rc, what)

    @property
    def fastpath_status(self) -> str:
        """gg_client_fastpath_status(): "active (...)", "off (...)", ..."""
        return _lib.s(self._lib.gg_client_fastpath_status(self._h()))

    def set_timeout(self, timeout_ms: int) -> None:
        self._lib.gg_client_set_timeout(self._h(), int(timeout_ms))

    def __repr__(self):
        if not self._c:
            return "Client(closed)"
        return "Client(socket=%r, backend=%r, device=%r, session=%d)" % (
            self.socket, self.backend, self.device, self.session)

    # ---- buffers ----------------------------------------------------------

    def register(self, t: Any, offset: int = 0, size: Optional[int] = None) -> Buffer:
        """Register memory with the daemon; returns a Buffer (``.id``).

        hip backend: a torch CUDA tensor (its allocation's IPC handle and
        offset, via gg_client_buffer_register_device) or an object with
        ``__cuda_array_interface__``.
        cpu backend: a SharedMemory, a numpy array or a torch CPU tensor
        living in one (``gfxgraph.shared_array``), registered by shm name.
        ``offset`` (bytes, from the start of t's data) and ``size`` (bytes,
        default: the rest of t) select a part.  t must be contiguous."""
        c = self._h()
        offset = int(offset)
        if offset < 0:
            raise Error("EINVAL", "offset must be >= 0")
        dev = _device_pointer(t)
        bid = ctypes.c_uint64()
        if dev is not None:
            ptr, nbytes = dev
            if size is None:
                size = nbytes - offset
            size = int(size)
            if size < 1 or offset + size > nbytes:
                raise Error("ERANGE", "offset %d + size %d is outside the tensor's %d bytes"
                            % (offset, size, nbytes))
            rc = self._lib.gg_client_buffer_register_device(c, ctypes.c_void_p(ptr + offset), size,
                                                            ctypes.byref(bid))
            if rc < 0:
                raise self._fail(rc, "buffer.register (device pointer 0x%x)" % (ptr + offset))
            b = Buffer(self, bid.value, size, offset, t, "device:0x%x" % (ptr + offset))
        else:
            if _is_cuda_tensor(t):
                raise Error("EINVAL", "a CUDA tensor whose data pointer cannot be read")
            if not _contiguous(t):
                raise Error("EINVAL", "register: the tensor/array must be contiguous")
            addr, nbytes = shm.address_of(t)
            if addr is None:
                raise Error("EINVAL", "register: %s is neither a CUDA tensor nor memory in "
                            "shared memory (make it with gfxgraph.shared_array or "
                            "gfxgraph.SharedMemory)" % type(t).__name__)
            if size is None:
                size = nbytes - offset
            size = int(size)
            if size < 1 or offset + size > nbytes:
                raise Error("ERANGE", "offset %d + size %d is outside the object's %d bytes"
                            % (offset, size, nbytes))
            seg = shm.find(addr + offset, size)
            if seg is None:
                raise Error("EINVAL", "register: this memory is not in a gfxgraph shared-memory "
                            "object (the cpu backend imports shm by name: make it with "
                            "gfxgraph.shared_array(shape, dtype) or gfxgraph.SharedMemory(size))")
            shm_off = addr + offset - seg.address
            if seg.fd is not None:     # a memfd: it has no name, only its descriptor
                rc = self._lib.gg_client_buffer_register_fd(c, seg.fd, shm_off, size,
                                                            ctypes.byref(bid))
                label = "memfd:" + seg.name
            else:
                # a daemon of another uid refuses the name (EACCES); the
                # library then sends the object's descriptor itself
                rc = self._lib.gg_client_buffer_register_shm(c, seg.name.encode(), shm_off,
                                                             size, ctypes.byref(bid))
                label = seg.name
            if rc < 0:
                raise self._fail(rc, "buffer.register %s" % label)
            b = Buffer(self, bid.value, size, offset, (t, seg), label)
        self._buffers[b.id] = b
        return b

    def register_device_pointer(self, ptr: int, size: int, owner: Any = None) -> Buffer:
        """hip backend: register size bytes of device memory at ptr (any
        pointer into a device allocation; gg_client_buffer_register_device).
        owner: an object kept alive with the Buffer (e.g. the torch storage)."""
        c = self._h()
        bid = ctypes.c_uint64()
        rc = self._lib.gg_client_buffer_register_device(c, ctypes.c_void_p(int(ptr)), int(size),
                                                        ctypes.byref(bid))
        if rc < 0:
            raise self._fail(rc, "buffer.register (device pointer 0x%x)" % int(ptr))
        b = Buffer(self, bid.value, int(size), 0, owner, "device:0x%x" % int(ptr))
        self._buffers[b.id] = b
        return b

    def register_fd(self, fd: int, offset: int, size: int, owner: Any = None) -> Buffer:
        """Register size bytes at offset of a file descriptor (an int or an
        object with ``fileno()``): a memfd (``os.memfd_create``) or a POSIX
        shm object, open read-write.  It travels with the request
        (SCM_RIGHTS) and the daemon maps it, so this works whatever uid the
        daemon runs as; fd may be closed afterwards.  The hip backend needs
        the memfd sealed against shrinking (``MFD_ALLOW_SEALING`` and
        ``fcntl.F_SEAL_SHRINK``).  owner: an object kept alive with the
        Buffer (e.g. the mmap over it)."""
        c = self._h()
        if not _lib.has("gg_client_buffer_register_fd"):
            raise Error("ENOSYS", "this libgfxgraph-client has no gg_client_buffer_register_fd")
        fd = fd.fileno() if hasattr(fd, "fileno") else int(fd)
        bid = ctypes.c_uint64()
        rc = self._lib.gg_client_buffer_register_fd(c, fd, int(offset), int(size),
                                                    ctypes.byref(bid))
        if rc < 0:
            raise self._fail(rc, "buffer.register (fd %d)" % fd)
        b = Buffer(self, bid.value, int(size), int(offset), owner, "fd:%d" % fd)
        self._buffers[b.id] = b
        return b

    def register_shm_name(self, name: str, offset: int, size: int,
                          owner: Any = None) -> Buffer:
        """cpu backend: register size bytes at offset of the shm object name."""
        c = self._h()
        bid = ctypes.c_uint64()
        rc = self._lib.gg_client_buffer_register_shm(c, _lib.enc(name), int(offset), int(size),
                                                     ctypes.byref(bid))
        if rc < 0:
            raise self._fail(rc, "buffer.register %s" % name)
        b = Buffer(self, bid.value, int(size), int(offset), owner, name)
        self._buffers[b.id] = b
        return b

    # ---- programs ---------------------------------------------------------

    def define(self, spec: Dict[str, Any]) -> "Program":
        """program.define: spec is the map of PROTOCOL.md section 10 (a
        tensor's ``buffer`` may be a Buffer); returns a Program."""
        from .program import define
        p = define(self, spec)
        self._programs[id(p)] = p
        return p

    # ---- asynchronous replays ---------------------------------------------

    def wait(self, ticket: Any) -> Dict[str, Any]:
        """Wait for a submitted replay; its result dict (or Error)."""
        c = self._h()
        if not isinstance(ticket, Ticket):
            ticket = Ticket(self, int(ticket), None)
        if ticket.client is not self:
            raise Error("EINVAL", "the ticket belongs to another client")
        r = _lib.ReplayResult()
        rc = self._lib.gg_client_wait(c, ticket.value, ctypes.byref(r))
        ticket.done = True
        if rc < 0:
            raise self._fail(rc, "wait")
        return result_dict(r)

    def poll(self, ticket: Any) -> bool:
        """True when wait(ticket) would return at once."""
        c = self._h()
        v = ticket.value if isinstance(ticket, Ticket) else int(ticket)
        rc = self._lib.gg_client_poll(c, v)
        if rc < 0:
            raise self._fail(rc, "poll")
        return rc == 1

    # ---- events (hip) -----------------------------------------------------

    def register_event(self, event: Any) -> int:
        """Register a torch.cuda.Event(interprocess=True) / hipEvent_t (its
        raw handle as int) for Program.replay(wait_event=, signal_event=);
        returns the event id."""
        c = self._h()
        eid = ctypes.c_uint64()
        if hasattr(event, "ipc_handle"):
            h = bytes(event.ipc_handle())
            rc = self._lib.gg_client_event_register(c, h, len(h), ctypes.byref(eid))
        else:
            rc = self._lib.gg_client_event_register_device(c, ctypes.c_void_p(int(event)),
                                                           ctypes.byref(eid))
        if rc < 0:
            raise self._fail(rc, "event.register")
        return eid.value

    def release_event(self, eid: int) -> None:
        rc = self._lib.gg_client_event_release(self._h(), int(eid))
        if rc < 0:
            raise self._fail(rc, "event.release")


def _is_cuda_tensor(t):
    return getattr(t, "is_cuda", False) is True


def _contiguous(t):
    if hasattr(t, "is_contiguous"):
        return bool(t.is_contiguous())
    flags = getattr(t, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    return True


def _device_pointer(t):
    """(device pointer, nbytes) for GPU memory, else None."""
    if _is_cuda_tensor(t):
        if not t.is_contiguous():
            raise Error("EINVAL", "register: the CUDA tensor must be contiguous")
        return t.data_ptr(), t.numel() * t.element_size()
    cai = getattr(t, "__cuda_array_interface__", None)
    if cai is not None:
        n = 1
        for d in cai["shape"]:
            n *= d
        if cai.get("strides") is not None:
            raise Error("EINVAL", "register: the device array must be contiguous")
        item = int(cai["typestr"][2:])    # "<f4" -> 4 bytes
        return cai["data"][0], n * item
    return None
