# SPDX-License-Identifier: MIT
"""Shared memory for the cpu backend: POSIX shm objects
(gg_client_shm_create) or memfds (gg_client_memfd_create).

The cpu backend imports client memory by shm name, so a buffer the daemon
reads and writes must live in a shm object.  ``SharedMemory(size)`` makes one
(mapped here, name kept); ``shared_array(shape, dtype)`` makes one and views
it as a numpy array (``torch.from_numpy`` of it is a torch CPU tensor in the
same memory).  ``Client.register`` finds the object a pointer lies in, so a
numpy view or a torch tensor over the memory may be registered directly.

A shm object is registered by name, which a daemon of another uid (the
system service runs as ``gfxgraph``) cannot open: the library then sends
its descriptor instead.  ``memfd=True`` makes an anonymous memfd, always
registered by descriptor: it works whatever uid the daemon runs as and
never appears in /dev/shm.

The mapping lives while anything uses it (the SharedMemory object, or a numpy
array / view of it): then it is unmapped and the name unlinked (a memfd's
descriptor closed).  The name is ``/gfxgraph-py-<pid>-<n>-<random>`` (a
memfd's, shown in /proc/PID/fd only, ``gfxgraph-py-<pid>-<n>``).
"""

import bisect
import ctypes
import itertools
import os
import threading
import weakref
from typing import Any, List, Optional, Sequence, Tuple, Union, cast

from . import _lib
from .errors import Error

_counter = itertools.count()
_segments_lock = threading.Lock()
_segments = {}        # base address -> _Seg, while the mapping lives
_bases: List[int] = []           # sorted base addresses


class SharedMemory:
    """A POSIX shm object (or with ``memfd=True`` a memfd, sealed at its
    size) of ``size`` bytes (zero-filled), mapped read-write.

    ``name`` (str), ``address`` (int), ``size``, ``fd`` (the memfd's
    descriptor, None for a shm object), ``buffer`` (a writable memoryview of
    the bytes), ``close()`` (unmap and unlink or close now; arrays over it
    must not be used afterwards)."""

    def __init__(self, size: int, name: Optional[str] = None, memfd: bool = False) -> None:
        size = int(size)
        if size < 1:
            raise Error("EINVAL", "shared memory size must be >= 1 (got %d)" % size)
        lib = _lib.load()
        ptr = ctypes.c_void_p()
        self.fd: Optional[int] = None
        if memfd:
            if not _lib.has("gg_client_memfd_create"):
                raise Error("ENOSYS", "this libgfxgraph-client has no gg_client_memfd_create")
            nm = name or "gfxgraph-py-%d-%d" % (os.getpid(), next(_counter))
            fd = ctypes.c_int(-1)
            rc = lib.gg_client_memfd_create(nm.encode(), size, ctypes.byref(ptr), ctypes.byref(fd))
            if rc < 0:
                raise Error(_errname(rc), "memfd_create %s (%d bytes): %s"
                            % (nm, size, os.strerror(-rc)), -rc)
            self.fd = fd.value
        while not memfd:
            nm = name or "/gfxgraph-py-%d-%d-%s" % (os.getpid(), next(_counter), os.urandom(4).hex())
            rc = lib.gg_client_shm_create(nm.encode(), size, ctypes.byref(ptr))
            if rc == -17 and name is None:     # EEXIST: pick another name
                continue
            if rc < 0:
                raise Error(_errname(rc), "shm_create %s (%d bytes): %s"
                            % (nm, size, os.strerror(-rc)), -rc)
            break
        self.name = nm
        self.size = size
        self.address: int = cast(int, ptr.value)   # set: the call succeeded
        self._raw = (ctypes.c_char * size).from_address(self.address)
        self.buffer = memoryview(self._raw).cast("B")
        self._finalizer = weakref.finalize(self._raw, _destroy, lib, nm, self.address, size,
                                           self.fd)
        with _segments_lock:
            _segments[self.address] = _Seg(nm, self.address, size, self._finalizer, self.fd)
            bisect.insort(_bases, self.address)

    def close(self) -> None:
        """Unmap and unlink now (idempotent)."""
        if self._finalizer.alive:
            with _segments_lock:
                _forget(self.address)
            self.buffer.release()
            self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __repr__(self) -> str:
        return "SharedMemory(name=%r, size=%d%s%s)" % (self.name, self.size,
                                                      ", memfd" if self.fd is not None else "",
                                                      ", closed" if self.closed else "")


class _Seg:
    """What the registry keeps of a live mapping (not the memory itself:
    the mapping lives while its ctypes array, or an array over it, does)."""
    __slots__ = ("name", "address", "size", "finalizer", "fd")

    def __init__(self, name, address, size, finalizer, fd=None):
        self.name, self.address, self.size, self.finalizer = name, address, size, finalizer
        self.fd = fd

    @property
    def closed(self):
        return not self.finalizer.alive


def _errname(rc):
    import errno
    return errno.errorcode.get(-rc, "EIO")


def _forget(addr):
    if _segments.pop(addr, None) is not None:
        i = bisect.bisect_left(_bases, addr)
        if i < len(_bases) and _bases[i] == addr:
            del _bases[i]


_libc = None


def _munmap(addr, size):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _libc.munmap.restype = ctypes.c_int
    _libc.munmap(ctypes.c_void_p(addr), size)


def _destroy(lib, name, addr, size, fd=None):
    with _segments_lock:
        _forget(addr)
    if fd is None:
        lib.gg_client_shm_destroy(name.encode(), ctypes.c_void_p(addr), size)
        return
    _munmap(addr, size)
    os.close(fd)


def find(address: int, size: int) -> Optional["_Seg"]:
    """The live mapping (name, address, size) holding [address, address +
    size), or None."""
    with _segments_lock:
        i = bisect.bisect_right(_bases, address) - 1
        if i < 0:
            return None
        base = _bases[i]
        seg = _segments.get(base)
    if seg is None or seg.closed or address + size > seg.address + seg.size:
        return None
    return seg


def shared_array(shape: Union[int, Sequence[int]], dtype: Any = "float32",
                 torch: bool = False, memfd: bool = False) -> Any:
    """A zero-filled numpy array of ``shape`` and ``dtype`` in a new shm
    object (needs numpy).  ``torch=True``: a torch CPU tensor over the same
    memory (``torch.from_numpy``).  ``memfd=True``: in a memfd, registered
    by descriptor (works whatever uid the daemon runs as; nothing in
    /dev/shm).  ``gfxgraph.shm_of(a)`` gives the SharedMemory;
    ``Client.register(a)`` registers it by name (a memfd by descriptor)."""
    try:
        import numpy as np
    except ImportError:
        raise Error("ENOSYS", "gfxgraph.shared_array needs numpy; without it use "
                    "gfxgraph.SharedMemory(size) and its .buffer") from None
    if isinstance(shape, int):
        shape = (shape,)
    dt = np.dtype(_np_dtype(dtype))
    n = 1
    for d in shape:
        n *= int(d)
    seg = SharedMemory(max(1, n * dt.itemsize), memfd=memfd)
    # np.frombuffer keeps the ctypes array (and so the mapping) alive as long
    # as the array or any view of it lives.
    # (numpy's stubs do not list ctypes arrays, which export the buffer protocol)
    flat = np.frombuffer(seg._raw, dtype=dt, count=n)  # type: ignore[call-overload]
    a = flat.reshape(tuple(int(d) for d in shape))
    if torch:
        import torch as _torch
        return _torch.from_numpy(a)
    return a


def memfd_array(shape: Union[int, Sequence[int]], dtype: Any = "float32",
                torch: bool = False) -> Any:
    """``shared_array(shape, dtype, torch, memfd=True)``."""
    return shared_array(shape, dtype, torch=torch, memfd=True)


def _np_dtype(dtype):
    names = {"f32": "float32", "f16": "float16", "bf16": None}
    if isinstance(dtype, str) and dtype in names:
        if names[dtype] is None:
            raise Error("EINVAL", "numpy has no bfloat16: make a uint16 array and view it "
                        "as bf16 in the program spec")
        return names[dtype]
    return dtype


def shm_of(obj: Any) -> Optional[Union["SharedMemory", "_Seg"]]:
    """The SharedMemory that obj (a SharedMemory, numpy array, torch CPU
    tensor, or anything with a buffer address) lies in, or None."""
    if isinstance(obj, SharedMemory):
        return obj
    addr, size = address_of(obj)
    if addr is None:
        return None
    return find(addr, max(size, 1))


def address_of(obj: Any) -> Tuple[Optional[int], int]:
    """(address, nbytes) of an array-like's data, or (None, 0)."""
    if isinstance(obj, SharedMemory):
        return obj.address, obj.size
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):       # torch
        return obj.data_ptr(), obj.numel() * obj.element_size()
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        return ai["data"][0], getattr(obj, "nbytes", 0)
    if isinstance(obj, memoryview):
        if not obj.contiguous:
            return None, 0
        c = (ctypes.c_char * obj.nbytes).from_buffer(obj) if not obj.readonly else None
        if c is None:
            return None, 0
        return ctypes.addressof(c), obj.nbytes
    return None, 0
