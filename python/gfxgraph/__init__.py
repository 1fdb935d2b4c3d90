# SPDX-License-Identifier: MIT
"""gfxgraph: Python bindings for gfxgraphd, the GPU graph-replay daemon.

    import gfxgraph
    with gfxgraph.Client() as c:                  # default socket rules
        x = gfxgraph.shared_array((64, 256), "float32")   # cpu backend
        bx = c.register(x)
        ...
        prog = c.define({"name": "p", "tensors": {...}, "nodes": [...]})
        prog.replay(batch=5)

PyTorch: ``client.register(cuda_tensor)`` (hip backend, by IPC);
``gfxgraph.enable()`` routes ``torch.cuda.CUDAGraph`` / ``torch.cuda.graph``
captures through the daemon; ``torch.compile(m, backend="gfxgraph")``.
See docs/python.md.  The library binds libgfxgraph-client with ctypes
(``gfxgraph._lib``: GFXGRAPH_LIB, the build it was installed from, the
system loader); numpy and torch are optional.
"""

import sys as _sys
from typing import Any, Callable, Optional

from .errors import Error
from .client import Buffer, Client, Ticket
from .program import Program
from .shm import SharedMemory, memfd_array, shared_array, shm_of
from .stats import health_check, server_info, stats



def _find_version() -> str:
    """The project's one version: project(gfxgraph VERSION ...) of the
    top-level CMakeLists.txt, read from the source tree when the package is
    used from it, else recorded at install time (_build_info.py, written by
    cmake --install and by the wheel build), else the installed metadata."""
    import os
    import re
    here = os.path.dirname(os.path.abspath(__file__))
    cm = os.path.join(os.path.dirname(os.path.dirname(here)), "CMakeLists.txt")
    try:
        with open(cm, encoding="utf-8") as f:
            m = re.search(r"^project\(gfxgraph\s+VERSION\s+([0-9][0-9.]*)", f.read(), re.M)
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        from ._build_info import VERSION  # type: ignore[attr-defined]
        return str(VERSION)
    except ImportError:
        pass
    try:
        from importlib.metadata import version
        return version("gfxgraph")
    except Exception:
        return "unknown"


__version__: str = _find_version()

__all__ = ["Error", "Client", "Buffer", "Program", "Ticket", "SharedMemory", "shared_array",
           "memfd_array", "shm_of", "stats", "health_check", "server_info", "enable", "disable", "is_enabled",
           "explain",
           "library_path", "__version__"]


def library_path() -> str:
    """The libgfxgraph-client the package uses (loading it if needed)."""
    from . import _lib
    return _lib.library_path()


def enable(socket: Optional[str] = None, **kw: Any) -> Any:
    """Route torch.cuda.CUDAGraph / torch.cuda.graph captures through the
    daemon (needs torch; see gfxgraph.cudagraph).  Idempotent."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise Error("ENOSYS", "gfxgraph.enable() routes torch.cuda.CUDAGraph: it needs "
                    "PyTorch, which does not import here") from None
    from . import cudagraph
    return cudagraph.enable(socket=socket, **kw)


def explain(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Capture fn(*args, **kwargs) in a CUDA graph under enable() and return
    what the daemon made of it: routed or not, the program's node and
    kernel counts, the recorded and lowered ops, the fused forms, and for a
    capture left to PyTorch the first uncovered op with its operands'
    shapes, dtypes and strides (gfxgraph.frontend.live.explain)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise Error("ENOSYS", "gfxgraph.explain() captures a CUDA graph: it needs PyTorch, "
                    "which does not import here") from None
    from .frontend.live import explain as _explain
    return _explain(fn, *args, **kwargs)


def disable() -> None:
    """Undo enable(): torch.cuda.CUDAGraph is PyTorch's own again."""
    if "gfxgraph.cudagraph" in _sys.modules:
        _sys.modules["gfxgraph.cudagraph"].disable()


def is_enabled() -> bool:
    """Whether enable() is in effect."""
    m = _sys.modules.get("gfxgraph.cudagraph")
    return bool(m is not None and m.is_enabled())


def register_compile_backend() -> None:
    """Register "gfxgraph" as a torch.compile backend (done on import when
    torch is already imported, and by enable(); a pip install also
    registers it through the torch_dynamo_backends entry point)."""
    from . import compile as _compile
    _compile.register()


if "torch" in _sys.modules:
    try:
        register_compile_backend()
    except Exception:      # an old or partial torch: torch.compile just lacks the name
        pass
