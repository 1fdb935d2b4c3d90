# SPDX-License-Identifier: MIT
"""Loading libgfxgraph-client with ctypes, and the prototype of every function
the package calls.

Where the library comes from, first match wins:

1. ``$GFXGRAPH_LIB``: a path to the shared library.  When it is set, nothing
   else is tried (a wrong path is an error, never a silent fallback).
2. The build it was installed from: ``make install`` / ``cmake --install``
   write ``_build_info.py`` beside this file, naming the installed library
   and the build tree's copy; a source checkout (``python/`` on the path)
   looks in ``<source>/build*/client/``.
3. The system loader: ``libgfxgraph-client.so.0`` (``ldconfig``,
   ``LD_LIBRARY_PATH``): the Debian package libgfxgraph-client0 is found so.
4. Where an install that ``ldconfig`` has not seen yet puts it: the
   interpreter's prefix (a venv or conda env built against its own copy),
   ``/usr/local/lib`` and ``/usr/local/lib/<multiarch>`` (``make install``).
   A wheel carries no library and no build path, so it relies on 3 and 4.

The library is loaded on first use, so ``import gfxgraph`` works without it
(``gfxgraph.__version__``, ``gfxgraph.is_enabled()``, ...).
"""

import ctypes
import glob
import os
import sys
import sysconfig
import threading
from typing import Any, Dict, List, Optional, Tuple, Union

from .errors import Error

SONAME = "libgfxgraph-client.so.0"
GG_BATCH = -1

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None
_tried: List[str] = []


class ReplayResult(ctypes.Structure):
    """gg_replay_result (client.h)."""
    _fields_ = [
        ("path", ctypes.c_int),
        ("bucket", ctypes.c_int),
        ("batch", ctypes.c_int),
        ("branch", ctypes.c_int),
        ("fallback", ctypes.c_bool),
        ("captured", ctypes.c_bool),
        ("device_us", ctypes.c_double),
        ("reason", ctypes.c_char * 192),
    ]


class ReplayOpts(ctypes.Structure):
    """gg_replay_opts (client.h)."""
    _fields_ = [
        ("wait_event", ctypes.c_uint64),
        ("signal_event", ctypes.c_uint64),
        ("async_", ctypes.c_bool),
        ("timed", ctypes.c_bool),
    ]


_c = ctypes.c_void_p       # gg_client *
_d = ctypes.c_void_p       # gg_program_def *
_s = ctypes.c_char_p
_i = ctypes.c_int
_u64 = ctypes.c_uint64
_pu64 = ctypes.POINTER(ctypes.c_uint64)
_pi = ctypes.POINTER(ctypes.c_int)

# name: (restype, argtypes)
PROTOTYPES: Dict[str, Tuple[Any, List[Any]]] = {
    "gg_client_new": (_c, []),
    "gg_client_connect": (_i, [_c, _s, _s]),
    "gg_client_disconnect": (None, [_c]),
    "gg_client_close": (None, [_c]),
    "gg_client_connected": (ctypes.c_bool, [_c]),
    "gg_client_set_timeout": (None, [_c, _i]),
    "gg_client_default_socket": (_i, [ctypes.c_char_p, ctypes.c_size_t]),
    "gg_client_last_error": (_s, [_c]),
    "gg_client_last_error_code": (_s, [_c]),
    "gg_client_socket_path": (_s, [_c]),
    "gg_client_backend": (_s, [_c]),
    "gg_client_server_version": (_s, [_c]),
    "gg_client_device_name": (_s, [_c]),
    "gg_client_device_arch": (_s, [_c]),
    "gg_client_session_id": (_u64, [_c]),
    "gg_client_max_batch": (_i, [_c]),
    "gg_client_max_message_size": (ctypes.c_size_t, [_c]),
    "gg_client_buffer_register_shm": (_i, [_c, _s, _u64, _u64, _pu64]),
    "gg_client_buffer_register": (_i, [_c, ctypes.c_void_p, ctypes.c_size_t, _u64, _u64, _pu64]),
    "gg_client_buffer_register_device": (_i, [_c, ctypes.c_void_p, _u64, _pu64]),
    "gg_client_buffer_register_fd": (_i, [_c, _i, _u64, _u64, _pu64]),
    "gg_client_buffer_release": (_i, [_c, _u64]),
    "gg_client_shm_create": (_i, [_s, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
    "gg_client_shm_destroy": (_i, [_s, ctypes.c_void_p, ctypes.c_size_t]),
    "gg_client_memfd_create": (_i, [_s, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p), _pi]),
    # the answer is freed by gg_client_free_json: kept as a pointer, not a bytes copy
    "gg_client_call_json": (_i, [_c, _s, _s, ctypes.POINTER(ctypes.c_void_p)]),
    "gg_client_free_json": (None, [ctypes.c_void_p]),
    "gg_program_def_new": (_d, [_s]),
    "gg_program_def_free": (None, [_d]),
    "gg_program_def_tensor": (_i, [_d, _s, _u64, _u64, _s, _i, ctypes.POINTER(ctypes.c_int64)]),
    "gg_program_def_scratch": (_i, [_d, _s, _s, _i, ctypes.POINTER(ctypes.c_int64)]),
    "gg_program_def_view": (_i, [_d, _s, _s, _i, ctypes.POINTER(ctypes.c_int64)]),
    "gg_program_def_node": (_i, [_d, _s, _i, ctypes.POINTER(ctypes.c_char_p), _i,
                                 ctypes.POINTER(ctypes.c_char_p)]),
    "gg_program_def_call": (_i, [_d, _u64, _i]),
    "gg_program_def_attr_f": (_i, [_d, _s, ctypes.c_double]),
    "gg_program_def_attr_s": (_i, [_d, _s, _s]),
    "gg_program_def_branch": (_i, [_d]),
    "gg_program_def_buckets": (_i, [_d, _i, _pi]),
    "gg_program_def_error": (_s, [_d]),
    "gg_client_program_define": (_i, [_c, _d, _pu64]),
    "gg_client_program_release": (_i, [_c, _u64]),
    "gg_client_program_prepare": (_i, [_c, _u64, _i, _pi, _i, _pi, _pi]),
    "gg_client_program_rebind": (_i, [_c, _u64, _s, _u64, _u64]),
    "gg_client_replay": (_i, [_c, _u64, _i, _i, ctypes.POINTER(ReplayResult)]),
    "gg_client_replay_ex": (_i, [_c, _u64, _i, _i, ctypes.POINTER(ReplayOpts),
                                 ctypes.POINTER(ReplayResult)]),
    "gg_client_submit": (_i, [_c, _u64, _i, _i, ctypes.POINTER(ReplayOpts), _pu64]),
    "gg_client_wait": (_i, [_c, _u64, ctypes.POINTER(ReplayResult)]),
    "gg_client_poll": (_i, [_c, _u64]),
    "gg_client_fastpath_status": (_s, [_c]),
    "gg_client_event_register": (_i, [_c, ctypes.c_void_p, ctypes.c_size_t, _pu64]),
    "gg_client_event_register_device": (_i, [_c, ctypes.c_void_p, _pu64]),
    "gg_client_event_release": (_i, [_c, _u64]),
}


# Added to the library after its first release: a library without them still
# loads; using one raises ENOSYS (has(name) tells).
OPTIONAL = {"gg_program_def_view", "gg_program_def_call", "gg_client_buffer_register_fd",
            "gg_client_memfd_create", "gg_client_call_json", "gg_client_free_json"}


def has(name: str) -> bool:
    """Whether the loaded library has the function name."""
    return hasattr(load(), "_gg_has_" + name)


def _candidates() -> List[str]:
    """The paths tried after $GFXGRAPH_LIB and before the system loader, in
    order."""
    out = []
    try:
        from . import _build_info  # written by the install step
        rel = getattr(_build_info, "LIBRARY_FROM_PACKAGE", None)
        if rel:
            out.append(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     rel)))
        if getattr(_build_info, "BUILD_LIBRARY", None):
            out.append(_build_info.BUILD_LIBRARY)
    except ImportError:
        pass
    # a source checkout: <src>/python/gfxgraph/_lib.py -> <src>/build*/client/
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(src, "client", "include", "gfxgraph", "client.h")):
        for d in ["build"] + sorted(glob.glob(os.path.join(src, "build-*"))):
            out.append(os.path.join(src, d, "client", SONAME))
    return out


def _install_dirs() -> List[str]:
    """The library where an install not yet known to ldconfig puts it."""
    out = [os.path.join(sys.prefix, "lib", SONAME)]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    for d in ["/usr/local/lib"] + (["/usr/local/lib/" + multiarch] if multiarch else []):
        out.append(os.path.join(d, SONAME))
    return out


def _open(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    for name, (res, args) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name in OPTIONAL:
                continue
            raise
        fn.restype = res
        fn.argtypes = args
        setattr(lib, "_gg_has_" + name, True)
    # The same functions without argtypes, for the replay hot path: with
    # arguments that are already ctypes objects (or small ints for int
    # parameters) a call skips the per-argument conversion, a third of a
    # ctypes call's cost.  Callers pass exactly the C types.
    setattr(lib, "_gg_raw", ctypes.CDLL(path))
    return lib


def raw(name: str) -> Any:
    """The library function name without argtypes (restype int): pass
    ctypes objects of the exact C types (c_void_p, c_uint64, byref ...);
    plain Python ints only for C int parameters."""
    return getattr(load()._gg_raw, name)


def load() -> ctypes.CDLL:
    """The loaded library (loaded on the first call).  Raises Error
    (code "ELIBACC") naming every path tried when there is none."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        env = os.environ.get("GFXGRAPH_LIB")
        if env:
            try:
                lib = _open(env)
            except (OSError, AttributeError) as e:
                raise Error("ELIBACC", "GFXGRAPH_LIB=%s: cannot load libgfxgraph-client: %s" % (env, e))
            _lib, _path = lib, env
            return lib
        for p in _candidates():
            if not os.path.exists(p):
                tried.append("%s (missing)" % p)
                continue
            try:
                lib = _open(p)
            except (OSError, AttributeError) as e:
                tried.append("%s (%s)" % (p, e))
                continue
            _lib, _path = lib, p
            return lib
        try:
            lib = _open(SONAME)
            _lib, _path = lib, SONAME
            return lib
        except (OSError, AttributeError) as e:
            tried.append("%s via the system loader (%s)" % (SONAME, e))
        for p in _install_dirs():
            if not os.path.exists(p):
                tried.append("%s (missing)" % p)
                continue
            try:
                lib = _open(p)
            except (OSError, AttributeError) as e:
                tried.append("%s (%s)" % (p, e))
                continue
            _lib, _path = lib, p
            return lib
        _tried[:] = tried
        raise Error("ELIBACC", "libgfxgraph-client (%s) not found.  Install it: the Debian "
                    "package libgfxgraph-client0 (apt install ./libgfxgraph-client0_*.deb, "
                    "from make deb), or make install in the gfxgraph source tree then "
                    "sudo ldconfig; or set GFXGRAPH_LIB=/path/to/%s (a build tree has it "
                    "in <build>/client/).  Tried: %s" % (SONAME, SONAME, "; ".join(tried)))


def library_path() -> str:
    """The path (or soname) the library was loaded from; loads it if needed."""
    load()
    return str(_path)


def s(b: Optional[bytes]) -> str:
    """A C string from the library as str ("" for NULL)."""
    return b.decode("utf-8", "replace") if b else ""


def enc(x: Union[str, bytes], what: str = "name") -> bytes:
    if isinstance(x, bytes):
        return x
    if not isinstance(x, str):
        raise Error("EINVAL", "%s must be a string, not %s" % (what, type(x).__name__))
    return x.encode("utf-8")
