# SPDX-License-Identifier: MIT
"""gfxgraph.stats() and gfxgraph.health_check(): the daemon's ``stats`` and
``health`` methods.

libgfxgraph-client exports no generic call (gg_client_call is internal), so
these two speak the protocol themselves: a Unix socket, ``hello`` then the
method, with the small standard-library MessagePack codec below.  Chosen
over running ``gfxgraphctl stats --json`` because it needs no second
executable to be found (a pip-installed package may have the library from
the system loader and no gfxgraphctl beside it), costs no process start, and
the two methods are not on the replay path (replays, buffers and programs
all go through the C library and its fast path).
"""

import errno
import os
import socket as _socket
import struct
import time

from .errors import Error

SYSTEM_SOCKET = "/run/gfxgraph/gfxgraphd.sock"

# ---- MessagePack (the subset the protocol uses, plus everything decodable) --


def packb(o, out=None):
    b = bytearray() if out is None else out
    if o is None:
        b.append(0xC0)
    elif o is True:
        b.append(0xC3)
    elif o is False:
        b.append(0xC2)
    elif isinstance(o, int):
        if 0 <= o < 0x80:
            b.append(o)
        elif -32 <= o < 0:
            b.append(o & 0xFF)
        elif 0 <= o <= 0xFFFFFFFF:
            b += struct.pack(">BI", 0xCE, o)
        elif 0 <= o <= 0xFFFFFFFFFFFFFFFF:
            b += struct.pack(">BQ", 0xCF, o)
        else:
            b += struct.pack(">Bq", 0xD3, o)
    elif isinstance(o, float):
        b += struct.pack(">Bd", 0xCB, o)
    elif isinstance(o, str):
        s = o.encode("utf-8")
        n = len(s)
        if n < 32:
            b.append(0xA0 | n)
        elif n < 0x100:
            b += struct.pack(">BB", 0xD9, n)
        elif n < 0x10000:
            b += struct.pack(">BH", 0xDA, n)
        else:
            b += struct.pack(">BI", 0xDB, n)
        b += s
    elif isinstance(o, (bytes, bytearray)):
        n = len(o)
        b += struct.pack(">BB", 0xC4, n) if n < 0x100 else \
            struct.pack(">BH", 0xC5, n) if n < 0x10000 else struct.pack(">BI", 0xC6, n)
        b += o
    elif isinstance(o, (list, tuple)):
        n = len(o)
        b += bytes([0x90 | n]) if n < 16 else struct.pack(">BH", 0xDC, n) if n < 0x10000 \
            else struct.pack(">BI", 0xDD, n)
        for x in o:
            packb(x, b)
    elif isinstance(o, dict):
        n = len(o)
        b += bytes([0x80 | n]) if n < 16 else struct.pack(">BH", 0xDE, n) if n < 0x10000 \
            else struct.pack(">BI", 0xDF, n)
        for k, v in o.items():
            packb(k, b)
            packb(v, b)
    else:
        raise TypeError("cannot pack %s" % type(o).__name__)
    return bytes(b) if out is None else b


class Incomplete(Exception):
    pass


def unpack(buf, pos=0):
    """(value, next position) of the MessagePack value at buf[pos:];
    Incomplete when buf ends inside it."""
    def need(n):
        if pos + n > len(buf):
            raise Incomplete()

    need(1)
    t = buf[pos]
    pos += 1
    if t < 0x80:
        return t, pos
    if t >= 0xE0:
        return t - 0x100, pos
    if 0x80 <= t <= 0x8F:
        return _map(buf, pos, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _arr(buf, pos, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        need(n)
        return bytes(buf[pos:pos + n]).decode("utf-8", "replace"), pos + n
    if t == 0xC0:
        return None, pos
    if t == 0xC2:
        return False, pos
    if t == 0xC3:
        return True, pos
    fixed = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
             0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
    if t in fixed:
        f = fixed[t]
        n = struct.calcsize(f)
        need(n)
        return struct.unpack_from(f, buf, pos)[0], pos + n
    lens = {0xC4: ">B", 0xC5: ">H", 0xC6: ">I", 0xD9: ">B", 0xDA: ">H", 0xDB: ">I",
            0xDC: ">H", 0xDD: ">I", 0xDE: ">H", 0xDF: ">I", 0xC7: ">B", 0xC8: ">H", 0xC9: ">I"}
    if t in lens:
        f = lens[t]
        k = struct.calcsize(f)
        need(k)
        n = struct.unpack_from(f, buf, pos)[0]
        pos += k
        if t in (0xDC, 0xDD):
            return _arr(buf, pos, n)
        if t in (0xDE, 0xDF):
            return _map(buf, pos, n)
        if t in (0xC7, 0xC8, 0xC9):          # ext: type byte + data
            need(1 + n)
            return bytes(buf[pos + 1:pos + 1 + n]), pos + 1 + n
        need(n)
        raw = bytes(buf[pos:pos + n])
        return (raw.decode("utf-8", "replace") if t >= 0xD9 else raw), pos + n
    if 0xD4 <= t <= 0xD8:                      # fixext 1..16
        n = 1 << (t - 0xD4)
        need(1 + n)
        return bytes(buf[pos + 1:pos + 1 + n]), pos + 1 + n
    raise Error("EPROTO", "not MessagePack: byte 0x%02x" % t)


def _arr(buf, pos, n):
    out = []
    for _ in range(n):
        v, pos = unpack(buf, pos)
        out.append(v)
    return out, pos


def _map(buf, pos, n):
    out = {}
    for _ in range(n):
        k, pos = unpack(buf, pos)
        v, pos = unpack(buf, pos)
        if isinstance(k, (list, dict)):
            k = repr(k)
        out.setdefault(k, v)
    return out, pos


# ---- a connection ---------------------------------------------------------

def socket_candidates(sock=None):
    """The paths tried for sock (None: the default rules of PROTOCOL.md
    section 1, with the client library's fallback to the system service)."""
    if sock:
        return [sock]
    env = os.environ.get("GFXGRAPH_SOCKET")
    if env:
        return [env]
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if os.geteuid() == 0 or not xdg:
        return [SYSTEM_SOCKET]
    return [os.path.join(xdg, "gfxgraph", "gfxgraphd.sock"), SYSTEM_SOCKET]


class _Conn:
    def __init__(self, sock=None, timeout=30.0):
        paths = socket_candidates(sock)
        last, tried = None, []
        for i, p in enumerate(paths):
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            s.settimeout(timeout)
            try:
                s.connect(p)
            except OSError as e:
                s.close()
                last = e
                tried.append("%s (%s)" % (p, os.strerror(e.errno) if e.errno else e))
                if i + 1 < len(paths) and e.errno in (errno.ENOENT, errno.ECONNREFUSED):
                    continue
                break
            else:
                self.s, self.path = s, p
                self.buf = bytearray()
                self.msgid = 0
                try:
                    self.hello = self.call("hello", {"protocol": 1, "client": "gfxgraph-python"})
                except BaseException:
                    s.close()
                    raise
                return
        code = errno.errorcode.get(getattr(last, "errno", 0) or 0, "ECONNREFUSED")
        raise Error(code, "cannot reach gfxgraphd: tried %s; start it with `gfxgraphd` "
                    "(or systemctl start gfxgraphd.socket)" % ", ".join(tried),
                    getattr(last, "errno", 0) or 0)

    def call(self, method, params=None):
        self.msgid += 1
        mid = self.msgid
        self.s.sendall(packb([0, mid, method, [params] if params else []]))
        while True:
            msg = self._read()
            if not isinstance(msg, list) or not msg:
                continue
            if msg[0] == 2 and len(msg) >= 3 and msg[1] == "error":
                e = msg[2][0] if msg[2] else {}
                self.note = (e.get("code"), e.get("message"))
                continue
            if msg[0] == 1 and len(msg) == 4 and msg[1] == mid:
                if msg[2] is not None:
                    e = msg[2] if isinstance(msg[2], dict) else {}
                    raise Error(e.get("code", "EIO"), "%s: %s" % (method, e.get("message", "")))
                return msg[3]

    def _read(self):
        while True:
            if self.buf:
                try:
                    v, n = unpack(self.buf, 0)
                    del self.buf[:n]
                    return v
                except Incomplete:
                    pass
            chunk = self.s.recv(65536)
            if not chunk:
                code, msg = getattr(self, "note", (None, None))
                raise Error(code or "ECONNRESET", msg or "gfxgraphd closed the connection")
            self.buf += chunk

    def close(self):
        self.s.close()


def call(method, sock=None, timeout=30.0):
    """One method (no params) on a fresh connection; its result map."""
    c = _Conn(sock, timeout)
    try:
        return c.call(method)
    finally:
        c.close()


def server_info(sock=None, timeout=30.0):
    """The daemon's answer to ``hello`` (PROTOCOL.md: backend, version,
    device {name, arch, ..., gpu_sharing on NVIDIA}, limits) on a fresh
    connection."""
    c = _Conn(sock, timeout)
    try:
        return c.hello
    finally:
        c.close()


# ---- stats / health_check -----------------------------------------------

# Local counters of this process (gfxgraph.enable()'s CUDA-graph routing).
local = {
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


def note_replay(r):
    """Count one daemon replay answer (Program.replay's dict) in local."""
    if r.get("path") == "graph":
        local["daemon_graph_replays"] += 1
    else:
        local["daemon_eager_replays"] += 1
        if r.get("fallback"):
            local["daemon_fallback_replays"] += 1


def _local_copy():
    d = dict(local)
    d["fallback_ops"] = dict(local["fallback_ops"])
    d["compile_fallback_ops"] = dict(local["compile_fallback_ops"])
    d["compile_log"] = [dict(r) for r in local["compile_log"]]
    return d


def stats(socket=None):
    """The daemon's ``stats`` map (PROTOCOL.md section 10: capture_count,
    replay_count, fallback_count, validation_failures, avg_replay_us,
    sessions, cache, ...), plus ``enabled_at`` (when gfxgraph.enable() was
    called, seconds since the epoch, or None; the daemon's own enabled_at,
    its start, is ``daemon_enabled_at``) and ``local`` (this process's
    counters: captures routed through the daemon, captures that fell back to
    PyTorch's CUDA graph and the ops that caused it).  Raises Error when the
    daemon cannot be reached."""
    r = call("stats", socket)
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


def health_check(socket=None, timeout=60.0):
    """The daemon's ``health`` map (ok, gpu, arch, vram_total_mb,
    vram_free_mb, details).  Never raises for an unreachable or broken
    daemon: then ok is False and details.reason / details.code say why."""
    t0 = time.monotonic()
    try:
        r = call("health", socket, timeout)
    except Error as e:
        return {"ok": False, "gpu": "", "arch": "", "vram_total_mb": 0, "vram_free_mb": 0,
                "details": {"reason": e.message, "code": e.code,
                            "socket": socket or socket_candidates()[0]}}
    except OSError as e:
        return {"ok": False, "gpu": "", "arch": "", "vram_total_mb": 0, "vram_free_mb": 0,
                "details": {"reason": str(e), "code": errno.errorcode.get(e.errno or 0, "EIO"),
                            "socket": socket or socket_candidates()[0]}}
    out = dict(r)
    out.setdefault("details", {})
    out["details"] = dict(out["details"])
    out["details"].setdefault("check_ms", (time.monotonic() - t0) * 1e3)
    return out
