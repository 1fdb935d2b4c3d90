# SPDX-License-Identifier: MIT
"""gfxgraph.stats(), gfxgraph.health_check() and gfxgraph.server_info(): the
daemon's ``stats``, ``health`` and ``hello``.

Each goes through libgfxgraph-client on a connection of its own: connect
(the library's default socket rules and errors), then the library's generic
call, gg_client_call_json, which hands the answer back as JSON.  So the
package speaks the protocol only through the library, as for replays,
buffers and programs; these calls are not on the replay path, and a
connection per call keeps them out of any Client's session.
"""

import ctypes
import json
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _lib
from .errors import Error, from_client

HELLO = {"protocol": 1, "client": "gfxgraph-python"}


def _first_key(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    # a map with a key twice keeps its first value, as the library's own
    # lookups in an answer do
    out: Dict[str, Any] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out


class _Conn:
    """A connection of the library's: gg_client_connect (hello included)
    with timeout seconds for each answer (0 or None: no limit)."""

    def __init__(self, sock: Optional[str] = None, timeout: Optional[float] = 30.0) -> None:
        lib = self.lib = _lib.load()
        if not _lib.has("gg_client_call_json"):
            raise Error("ENOSYS", "this libgfxgraph-client has no gg_client_call_json: "
                        "stats, health_check and server_info need a newer library (%s)"
                        % _lib.library_path())
        c = lib.gg_client_new()
        if not c:
            raise Error("ENOMEM", "gg_client_new failed")
        if timeout:
            lib.gg_client_set_timeout(c, max(1, int(round(float(timeout) * 1000))))
        rc = lib.gg_client_connect(c, _lib.enc(sock, "socket") if sock else None,
                                   _lib.enc(HELLO["client"]))
        if rc < 0:
            err = from_client(lib, c, rc)
            lib.gg_client_close(c)
            raise err
        self.c = c
        self.path = _lib.s(lib.gg_client_socket_path(c))

    def call(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:
        """method's result (JSON-decoded: maps, lists, numbers, strings; a
        bin value arrives as a hex string); Error with the daemon's code."""
        lib = self.lib
        out = ctypes.c_void_p()
        rc = lib.gg_client_call_json(self.c, _lib.enc(method, "method"),
                                     json.dumps(params).encode() if params else None,
                                     ctypes.byref(out))
        if rc < 0:
            raise from_client(lib, self.c, rc, method)
        try:
            text = ctypes.string_at(out.value).decode("utf-8", "replace")
        finally:
            lib.gg_client_free_json(out)
        return json.loads(text, object_pairs_hook=_first_key)

    def close(self) -> None:
        c, self.c = self.c, None
        if c:
            self.lib.gg_client_close(c)

    def __enter__(self) -> "_Conn":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def call(method: str, socket: Optional[str] = None, timeout: Optional[float] = 30.0,
         params: Optional[Dict[str, Any]] = None) -> Any:
    """One method on a fresh connection; its result."""
    with _Conn(socket, timeout) as c:
        return c.call(method, params)


def server_info(socket: Optional[str] = None, timeout: Optional[float] = 30.0) -> Dict[str, Any]:
    """The daemon's answer to ``hello`` (PROTOCOL.md: backend, version,
    device {name, arch, ..., gpu_sharing on NVIDIA}, limits, methods, ops)
    on a fresh connection."""
    with _Conn(socket, timeout) as c:
        return c.call("hello", HELLO)


def default_socket() -> Optional[str]:
    """The first socket path the default rules try (the library's
    gg_client_default_socket), None when the library cannot be loaded."""
    try:
        lib = _lib.load()
    except Error:
        return None
    buf = ctypes.create_string_buffer(4096)
    n = lib.gg_client_default_socket(buf, len(buf))
    return buf.value.decode("utf-8", "replace") if n >= 0 else None


# ---- stats / health_check -----------------------------------------------

# Local counters of this process (gfxgraph.enable()'s CUDA-graph routing).
local: Dict[str, Any] = {
    "enabled_at": None,       # time.time() of enable(), None while disabled
    "captures": 0,            # captures routed to the daemon
    "replays": 0,             # their replays
    "fallback_count": 0,      # captures left to PyTorch's own CUDA graph
    "fallback_ops": {},       # op name -> captures it sent to PyTorch
    "compiled_partitions": 0,  # torch.compile: daemon partitions made
    "compile_fallback_ops": {},  # aten op -> FX nodes left to Inductor
    "compiled_replays": 0,    # torch.compile: partition calls run by the daemon
    "compile_eager_fallbacks": 0,  # daemon partitions switched away by an error
    "compile_graphs": 0,      # torch.compile: graphs planned (one per input signature)
    "compile_inductor_graphs": 0,  # graphs handed to Inductor whole
    "compile_inductor_partitions": 0,  # Inductor partitions of split graphs
    "compile_inductor_failures": 0,  # Inductor could not compile or run: FX code ran
    "compile_log": [],        # per graph planned: mode, partitions, first uncovered op
    # how the daemon ran the replays above (enable()'s and torch.compile's),
    # from each replay's answer: a graph replay the daemon could not launch
    # is still answered, eagerly, with fallback set, and only these tell
    "daemon_graph_replays": 0,
    "daemon_eager_replays": 0,
    "daemon_fallback_replays": 0,   # of the eager ones: the graph path failed
}


def note_replay(r: Dict[str, Any]) -> None:
    """Count one daemon replay answer (Program.replay's dict) in local."""
    if r.get("path") == "graph":
        local["daemon_graph_replays"] += 1
    else:
        local["daemon_eager_replays"] += 1
        if r.get("fallback"):
            local["daemon_fallback_replays"] += 1


def _local_copy() -> Dict[str, Any]:
    d = dict(local)
    d["fallback_ops"] = dict(local["fallback_ops"])
    d["compile_fallback_ops"] = dict(local["compile_fallback_ops"])
    d["compile_log"] = [dict(r) for r in local["compile_log"]]
    return d


def stats(socket: Optional[str] = None, timeout: Optional[float] = 30.0) -> Dict[str, Any]:
    """The daemon's ``stats`` map (PROTOCOL.md section 10: capture_count,
    replay_count, fallback_count, validation_failures, avg_replay_us,
    sessions, cache, ...), plus ``enabled_at`` (when gfxgraph.enable() was
    called, seconds since the epoch, or None; the daemon's own enabled_at,
    its start, is ``daemon_enabled_at``) and ``local`` (this process's
    counters: captures routed through the daemon, captures that fell back to
    PyTorch's CUDA graph and the ops that caused it).  Raises Error when the
    daemon cannot be reached or does not answer within timeout seconds
    (ETIMEDOUT; 0 or None: no limit)."""
    r = call("stats", socket, timeout)
    out = dict(r)
    for k in ("capture_count", "replay_count", "fallback_count", "validation_failures"):
        out.setdefault(k, 0)
    out.setdefault("avg_replay_us", 0.0)
    # enabled_at is this process's enable(); the daemon's own (its start)
    # stays readable under another name
    out["daemon_enabled_at"] = r.get("enabled_at")
    out["enabled_at"] = local["enabled_at"]
    out["local"] = _local_copy()
    return out


def health_check(socket: Optional[str] = None, timeout: Optional[float] = 60.0) -> Dict[str, Any]:
    """The daemon's ``health`` map (ok, gpu, arch, vram_total_mb,
    vram_free_mb, details).  Never raises for an unreachable, slow (past
    timeout seconds) or broken daemon, nor for a missing library: then ok is
    False and details.reason / details.code say why."""
    t0 = time.monotonic()
    try:
        r = call("health", socket, timeout)
    except Error as e:
        return {"ok": False, "gpu": "", "arch": "", "vram_total_mb": 0, "vram_free_mb": 0,
                "details": {"reason": e.message, "code": e.code,
                            "socket": socket or default_socket()}}
    out = dict(r)
    out.setdefault("details", {})
    out["details"] = dict(out["details"])
    out["details"].setdefault("check_ms", (time.monotonic() - t0) * 1e3)
    return out
