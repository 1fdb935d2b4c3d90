#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The gfxgraph Python package against a cpu-backend gfxgraphd.

    test_package.py --daemon PATH/gfxgraphd --lib PATH/libgfxgraph-client.so.0

Starts its own daemon on a temporary socket (--backend cpu), imports the
package (PYTHONPATH: the source tree's python/), and checks: GFXGRAPH_LIB
(honoured; a wrong path is an error, not a fallback), connection properties,
a program over every op of docs/ops.md with three branches defined from a
spec dict (Buffers in it, offsets, scratch, attrs, buckets) replayed for
batch 1..12 (buckets 1, 2, 4, 8 and eager above) against references computed
here, the same through the socket path (GFXGRAPH_FASTPATH=0), errors with
their codes, submit/poll/wait, prepare, rebind, stats and health keys,
sessions and buffers released on close, and a clean daemon stop.  numpy
checks (shared_array, numpy references) run when numpy imports, else are
reported as skipped.  Prints one line per check; exit 0 when all passed, 1
otherwise, 77 when the package cannot run at all here.
"""
import argparse
import json
import math
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

FAILS = 0
PASSES = 0
SKIPS = 0


def check(ok, what):
    global FAILS, PASSES
    if ok:
        PASSES += 1
        print("   ok: " + what)
    else:
        FAILS += 1
        print("FAIL: " + what)
    sys.stdout.flush()
    return ok


def skip(what):
    global SKIPS
    SKIPS += 1
    print(" skip: " + what)


def raises(fn, code, what):
    """fn() raises gfxgraph.Error with .code == code."""
    import gfxgraph
    try:
        fn()
    except gfxgraph.Error as e:
        return check(e.code == code and bool(e.message),
                     "%s -> %s (%s)" % (what, code, e if e.code == code else "got %r" % e))
    except Exception as e:   # noqa: BLE001
        return check(False, "%s -> %s (raised %r)" % (what, code, e))
    return check(False, "%s -> %s (no error)" % (what, code))


# ---- references (pure Python, double precision) --------------------------

def layernorm(row, w, b, eps):
    m = sum(row) / len(row)
    v = sum((x - m) ** 2 for x in row) / len(row)
    return [(x - m) / math.sqrt(v + eps) * wi + bi for x, wi, bi in zip(row, w, b)]


def rmsnorm(row, w, eps):
    r = math.sqrt(sum(x * x for x in row) / len(row) + eps)
    return [x / r * wi for x, wi in zip(row, w)]


def linear(row, W, b):
    return [sum(x * wk for x, wk in zip(row, wr)) + (b[n] if b else 0.0) for n, wr in enumerate(W)]


def gelu_tanh(x):
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu(x):
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def silu(x):
    return x / (1 + math.exp(-x))


def softmax(row):
    m = max(row)
    e = [math.exp(x - m) for x in row]
    s = sum(e)
    return [x / s for x in e]


def ref_row(branch, x, P):
    lnw, lnb, W, bias = P
    if branch == 0:      # layernorm -> linear(+b) -> gelu(tanh)
        h = layernorm(x, lnw, lnb, 1e-5)
        return [gelu_tanh(v) for v in linear(h, W, bias)]
    if branch == 1:      # scale 0.5 -> silu (in place) -> linear(no b) -> softmax
        h = [silu(0.5 * v) for v in x]
        return softmax(linear(h, W, None))
    # branch 2: rmsnorm -> mul [D] -> silu_mul(h, x) -> add x -> linear(+b)
    #           -> gelu(none) -> copy
    h = rmsnorm(x, lnw, 1e-6)
    h = [a * b for a, b in zip(h, lnb)]
    h2 = [silu(a) * b for a, b in zip(h, x)]
    h2 = [a + b for a, b in zip(h2, x)]
    return [gelu(v) for v in linear(h2, W, bias)]


def rel_l2(out, ref):
    num = sum((a - b) ** 2 for a, b in zip(out, ref))
    den = sum(b * b for b in ref) or 1.0
    return math.sqrt(num / den)


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


# ---- the daemon -----------------------------------------------------------

class Daemon:
    def __init__(self, path, tmp, extra=()):
        self.sock = os.path.join(tmp, "gfxgraphd.sock")
        self.log = open(os.path.join(tmp, "gfxgraphd.log"), "w+")
        # sanitizer builds: python runs with libasan preloaded and leak
        # checks off (python.cmake); the daemon, linked with it, gets its own
        # options back
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if env.get("GG_DAEMON_ASAN_OPTIONS"):
            env["ASAN_OPTIONS"] = env["GG_DAEMON_ASAN_OPTIONS"]
        self.p = subprocess.Popen([path, "--socket", self.sock, "--backend", "cpu",
                                   "--log-target", "stderr"] + list(extra),
                                  stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                break
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.sock)
                s.close()
                return
            except OSError:
                time.sleep(0.05)
        self.dump()
        raise SystemExit("gfxgraphd did not come up")

    def dump(self):
        self.log.seek(0)
        print("--- gfxgraphd log:\n" + self.log.read() + "---")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return -9


# ---- the checks -----------------------------------------------------------

D, N, ROWS = 8, 6, 12           # model dim, linear out, rows the buffers hold
BUCKETS = [1, 2, 4, 8]


def test_lib_env(args):
    import gfxgraph
    check(gfxgraph.library_path() == os.environ["GFXGRAPH_LIB"],
          "GFXGRAPH_LIB honoured (%s)" % gfxgraph.library_path())
    env = dict(os.environ, GFXGRAPH_LIB="/nonexistent/libgfxgraph-client.so.0")
    code = ("import gfxgraph, sys\n"
            "print(gfxgraph.__version__, gfxgraph.is_enabled())\n"
            "try:\n gfxgraph.Client(sys.argv[1])\n"
            "except gfxgraph.Error as e:\n print('code', e.code); sys.exit(3)\n")
    r = subprocess.run([sys.executable, "-c", code, args.sock], env=env,
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 3 and "code ELIBACC" in r.stdout and "0.1.0 False" in r.stdout,
          "a wrong GFXGRAPH_LIB: import works, Client() raises ELIBACC, no fallback (%r %r)"
          % (r.stdout.strip(), r.stderr.strip()[-200:]))
    tmp = tempfile.mkdtemp(prefix="ggpy-lib.")
    try:
        cp = os.path.join(tmp, "libcopy.so")
        shutil.copy(os.environ["GFXGRAPH_LIB"], cp)
        env["GFXGRAPH_LIB"] = cp
        code = ("import gfxgraph, sys\nc = gfxgraph.Client(sys.argv[1])\n"
                "print('lib', gfxgraph.library_path(), c.backend)\n")
        r = subprocess.run([sys.executable, "-c", code, args.sock], env=env,
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and ("lib %s cpu" % cp) in r.stdout,
              "GFXGRAPH_LIB naming a copy of the library loads that copy (%r)"
              % (r.stdout.strip() or r.stderr.strip()[-200:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fill(mv, start, values):
    for i, v in enumerate(values):
        mv[start + i] = v


def make_params():
    lnw = [f32(1.0 + 0.05 * i) for i in range(D)]
    lnb = [f32(0.1 * (i - 3)) for i in range(D)]
    W = [[f32(math.sin(1.3 * n + 0.7 * k) * 0.4) for k in range(D)] for n in range(N)]
    bias = [f32(0.02 * n - 0.05) for n in range(N)]
    return lnw, lnb, W, bias


def make_x(seed):
    return [[f32(math.sin(seed * 0.37 + r * 1.7 + k * 0.9) * 1.5) for k in range(D)]
            for r in range(ROWS)]


def spec_for(bx, bw, by, name="all_ops"):
    F = 4
    return {
        "name": name,
        "tensors": {
            "x": {"dtype": "f32", "shape": ["batch", D], "buffer": bx},
            "lnw": {"dtype": "f32", "shape": [D], "buffer": bw, "offset": 0},
            "lnb": {"dtype": "f32", "shape": [D], "buffer": bw, "offset": D * F},
            "W": {"dtype": "f32", "shape": [N, D], "buffer": bw, "offset": 2 * D * F},
            "bias": {"dtype": "f32", "shape": [N], "buffer": bw.id,
                     "offset": (2 * D + N * D) * F},
            "h": {"dtype": "f32", "shape": ["batch", D], "scratch": True},
            "h2": {"dtype": "f32", "shape": ["batch", D], "scratch": True},
            "g": {"dtype": "f32", "shape": ["batch", N], "scratch": True},
            "y": {"dtype": "f32", "shape": ["batch", N], "buffer": by},
        },
        "branches": [
            [
                {"op": "layernorm", "inputs": ["x", "lnw", "lnb"], "outputs": ["h"],
                 "attrs": {"eps": 1e-5}},
                {"op": "linear", "inputs": ["h", "W", "bias"], "outputs": ["g"]},
                {"op": "gelu", "inputs": ["g"], "outputs": ["y"], "attrs": {"approximate": "tanh"}},
            ],
            [
                {"op": "scale", "inputs": ["x"], "outputs": ["h"], "attrs": {"scale": 0.5}},
                {"op": "silu", "inputs": ["h"], "outputs": ["h"]},
                {"op": "linear", "inputs": ["h", "W"], "outputs": ["g"]},
                {"op": "softmax", "inputs": ["g"], "outputs": ["y"], "attrs": None},
            ],
            [
                {"op": "rmsnorm", "inputs": ["x", "lnw"], "outputs": ["h"], "attrs": {"eps": 1e-6}},
                {"op": "mul", "inputs": ["h", "lnb"], "outputs": ["h"]},
                {"op": "silu_mul", "inputs": ["h", "x"], "outputs": ["h2"]},
                {"op": "add", "inputs": ["h2", "x"], "outputs": ["h2"]},
                {"op": "linear", "inputs": ["h2", "W", "bias"], "outputs": ["g"]},
                {"op": "gelu", "inputs": ["g"], "outputs": ["g"]},
                {"op": "copy", "inputs": ["g"], "outputs": ["y"]},
            ],
        ],
        "buckets": BUCKETS,
    }


def run_all_batches(c, prog, xs, ymv, P, tag):
    bad = []
    paths = {}
    for branch in range(3):
        for batch in range(1, ROWS + 1):
            for i in range(ROWS * N):
                ymv[i] = float("nan")
            r = prog.replay(batch, branch=branch)
            want_bucket = next((b for b in BUCKETS if b >= batch), 0)
            if (r["batch"] != batch or r["branch"] != branch or r["bucket"] != want_bucket or
                    r["path"] != ("graph" if want_bucket else "eager")):
                bad.append("branch %d batch %d: result %r" % (branch, batch, r))
                continue
            paths[r["path"]] = paths.get(r["path"], 0) + 1
            for row in range(batch):
                out = [ymv[row * N + n] for n in range(N)]
                ref = ref_row(branch, xs[row], P)
                e = rel_l2(out, ref)
                if not e <= 1e-4:
                    bad.append("branch %d batch %d row %d: rel err %g (%r vs %r)"
                               % (branch, batch, row, e, out, ref))
                    break
    check(not bad, "%s: 3 branches x batch 1..%d (buckets %s, eager above) match the "
          "references (%s)%s" % (tag, ROWS, BUCKETS, paths, "; " + "; ".join(bad[:3]) if bad else ""))


def session_of(st, sid):
    return [s for s in st.get("sessions", []) if s.get("id") == sid]


def test_main(args):
    import gfxgraph
    check(isinstance(gfxgraph.__version__, str) and gfxgraph.__version__ == "0.1.0",
          "__version__ %r" % gfxgraph.__version__)
    check(gfxgraph.is_enabled() is False, "is_enabled() is False before enable()")
    try:
        import torch  # noqa: F401
        skip("enable() without torch: torch is installed here")
    except ImportError:
        raises(lambda: gfxgraph.enable(), "ENOSYS", "enable() without torch")
        check(gfxgraph.is_enabled() is False and "torch" not in sys.modules and
              gfxgraph.disable() is None,
              "without torch: is_enabled() False, disable() a no-op, torch never imported")

    c = gfxgraph.Client(args.sock, name="py-test")
    check(c.backend == "cpu" and c.device and c.session > 0 and c.socket == args.sock,
          "Client: backend %r device %r session %d socket %r" % (c.backend, c.device, c.session,
                                                               c.socket))
    P = make_params()
    lnw, lnb, W, bias = P
    F = 4
    wmem = gfxgraph.SharedMemory((2 * D + N * D + N) * F + 64)
    xmem = gfxgraph.SharedMemory(ROWS * D * F)
    ymem = gfxgraph.SharedMemory(ROWS * N * F + 128)
    wmv, xmv = wmem.buffer.cast("f"), xmem.buffer.cast("f")
    fill(wmv, 0, lnw)
    fill(wmv, D, lnb)
    fill(wmv, 2 * D, [v for r in W for v in r])
    fill(wmv, 2 * D + N * D, bias)
    xs = make_x(1)
    fill(xmv, 0, [v for r in xs for v in r])
    bw, bx = c.register(wmem), c.register(xmem)
    by = c.register(ymem, offset=64, size=ROWS * N * F)      # a part of the object
    ymv = ymem.buffer[64:64 + ROWS * N * F].cast("f")
    check(bx.id > 0 and bw.id > 0 and by.id > 0 and len({bx.id, bw.id, by.id}) == 3 and
          by.size == ROWS * N * F and by.offset == 64,
          "register: SharedMemory objects, one by offset/size (ids %d %d %d)"
          % (bx.id, bw.id, by.id))
    prog = c.define(spec_for(bx, bw, by))
    check(prog.id > 0 and prog.name == "all_ops" and prog.buckets == BUCKETS,
          "define: a spec with Buffers, offsets, scratch, attrs, 3 branches, buckets -> %r" % prog)
    run_all_batches(c, prog, xs, ymv, P, "fast path (%s)" % c.fastpath_status)
    check(c.fastpath_status.startswith("active"), "the fast path is active: %s"
          % c.fastpath_status)
    r = prog.replay(3, branch=0)
    check(r["path"] == "graph" and r["captured"] is False and r["fallback"] is False and
          r["reason"] == "" and r["device_us"] >= 0,
          "replay result dict: %r" % r)

    # the socket path, same answers
    os.environ["GFXGRAPH_FASTPATH"] = "0"
    try:
        c2 = gfxgraph.Client(args.sock, name="py-test-socket")
    finally:
        del os.environ["GFXGRAPH_FASTPATH"]
    bw2, bx2, by2 = c2.register(wmem), c2.register(xmem), c2.register(ymem, 64, ROWS * N * F)
    prog2 = c2.define(spec_for(bx2, bw2, by2, "all_ops_socket"))
    run_all_batches(c2, prog2, xs, ymv, P, "socket path (GFXGRAPH_FASTPATH=0: %s)"
                    % c2.fastpath_status)
    check(c2.fastpath_status.startswith("off"), "GFXGRAPH_FASTPATH=0: %s" % c2.fastpath_status)

    # prepare
    pr = prog2.prepare()
    check(pr == {"ready": 3 * len(BUCKETS), "failed": 0}, "prepare(): %r" % pr)
    pr = prog2.prepare(buckets=[2, 8], branch=1)
    check(pr == {"ready": 2, "failed": 0}, "prepare(buckets=[2, 8], branch=1): %r" % pr)

    # async
    tickets = [prog.submit(b, branch=b % 3) for b in (1, 3, 5, 9, 12)]
    check(all(isinstance(t.poll(), bool) for t in tickets), "poll() before wait")
    res = [c.wait(t) for t in reversed(tickets)]
    check([r["batch"] for r in res] == [12, 9, 5, 3, 1] and
          [r["bucket"] for r in res] == [0, 0, 8, 4, 1],
          "submit x5, wait in reverse order: %r" % [(r["batch"], r["bucket"]) for r in res])
    raises(lambda: c.wait(tickets[0]), "ENOENT", "waiting for a ticket twice")
    t = prog2.submit(4, branch=2)
    r = t.wait()
    check(r["bucket"] == 4 and r["branch"] == 2, "socket path submit/wait: %r" % r)
    for row in range(4):
        out = [ymv[row * N + n] for n in range(N)]
        if rel_l2(out, ref_row(2, xs[row], P)) > 1e-4:
            check(False, "socket path submit/wait: row %d wrong" % row)
            break
    else:
        check(True, "socket path submit/wait: outputs right")

    # rebind x to another buffer
    xs2 = make_x(7)
    xmem2 = gfxgraph.SharedMemory(ROWS * D * F)
    fill(xmem2.buffer.cast("f"), 0, [v for r in xs2 for v in r])
    bx3 = c.register(xmem2)
    prog.rebind("x", bx3)
    prog.replay(5, branch=1)
    out = [[ymv[row * N + n] for n in range(N)] for row in range(5)]
    check(all(rel_l2(out[r], ref_row(1, xs2[r], P)) < 1e-4 for r in range(5)),
          "rebind x to another buffer: the replay reads it")
    prog.rebind("x", bx)

    # a view and i32 positions (cache_write), when the daemon has the op
    test_view_i32(c)
    test_call(c)
    test_register_fd(c)

    # errors and their codes
    ghost = gfxgraph.Program(c, 987654, "ghost", None, 1, [])
    raises(lambda: ghost.replay(1), "ENOENT", "replay of an unknown program id")
    raises(lambda: prog.replay(0), "EINVAL", "batch 0")
    raises(lambda: prog.replay(70000), "EINVAL", "batch 70000 (> 65536)")
    raises(lambda: prog.replay("3"), "EINVAL", "batch '3' (a string)")
    raises(lambda: prog.replay(ROWS + 1), "ERANGE", "batch past what the buffers hold")
    raises(lambda: prog.replay(2, branch=3), "EINVAL", "branch 3 of 3")
    raises(lambda: prog.replay(2, branch=-1), "EINVAL", "branch -1")
    raises(lambda: prog2.submit(2, branch=7).wait(), "EINVAL", "submit/wait of branch 7")
    s = spec_for(bx, bw, by, "bad")
    s["branches"][0][0]["op"] = "conv2d"
    raises(lambda: c.define(s), "EINVAL", "define: an unknown op (daemon)")
    s = spec_for(bx, bw, by, "bad")
    s["tensors"]["x"]["buffer"] = 424242
    raises(lambda: c.define(s), "ENOENT", "define: an unknown buffer id (daemon)")
    s = spec_for(bx, bw, by, "bad")
    s["tensors"]["x"]["shape"] = ["batch", 4]
    raises(lambda: c.define(s), "EINVAL", "define: shapes that do not fit the ops (daemon)")
    s = spec_for(bx, bw, by, "bad")
    s["buckets"] = [1, 2, 4, 8, 16]
    raises(lambda: c.define(s), "ERANGE", "define: buffers too small for the largest bucket")
    s = spec_for(bx, bw, by, "bad")
    s["tensors"]["x"]["layout"] = "nhwc"
    raises(lambda: c.define(s), "EINVAL", "define: a tensor key the builder cannot express")
    s = spec_for(bx, bw, by, "bad")
    s["branches"][0][0]["attrs"] = {"eps": True}
    raises(lambda: c.define(s), "EINVAL", "define: a bool attribute")
    s = spec_for(bx, bw, by, "bad")
    s["branches"][0][0]["attrs"] = {"eps": [1, 2]}
    raises(lambda: c.define(s), "EINVAL", "define: a list attribute")
    s = spec_for(bx, bw, by, "bad")
    s["nodes"] = s["branches"][0]
    raises(lambda: c.define(s), "EINVAL", "define: both nodes and branches")
    s = spec_for(bx, bw, by, "bad")
    s["tensors"]["y"]["shape"] = [N, "batch"]
    raises(lambda: c.define(s), "EINVAL", "define: \"batch\" not as the first dim")
    raises(lambda: c.define({"name": "x"}), "EINVAL", "define: no tensors")
    s = spec_for(bx2, bw, by, "bad")
    raises(lambda: c.define(s), "EINVAL", "define: a Buffer of another client")
    raises(lambda: c.register(bytearray(64)), "EINVAL", "register: memory not in shm")
    raises(lambda: c.register(xmem, offset=8, size=ROWS * D * F), "ERANGE",
           "register: offset + size past the object")
    raises(lambda: bw.release(), "EBUSY", "buffer.release of a buffer programs use")
    raises(lambda: gfxgraph.Client(os.path.join(args.tmp, "nobody.sock")), "ENOENT",
           "Client() on a socket nobody serves")
    try:
        prog.replay(0)
    except gfxgraph.Error as e:
        check(e.errno == 22 and str(e).startswith("EINVAL: ") and isinstance(e, Exception),
              "Error: .code, .message, .errno, str() %r" % str(e))

    # stats / health
    st = gfxgraph.stats(args.sock)
    keys = ["capture_count", "replay_count", "fallback_count", "validation_failures",
            "avg_replay_us", "enabled_at"]
    check(all(k in st for k in keys) and st["capture_count"] >= 6 and st["replay_count"] > 0
          and st["enabled_at"] is None and "local" in st,
          "stats(): the Python API's keys %r" % {k: st.get(k) for k in keys})
    check(len(session_of(st, c.session)) == 1 and session_of(st, c.session)[0]["programs"] == 1
          and session_of(st, c.session)[0]["buffers"] == 4,
          "stats(): this session with its 1 program and 4 buffers: %r"
          % session_of(st, c.session))
    h = gfxgraph.health_check(args.sock)
    hk = ["ok", "gpu", "arch", "vram_total_mb", "vram_free_mb", "details"]
    check(all(k in h for k in hk) and h["ok"] is True and h["details"].get("backend") == "cpu",
          "health_check(): %r" % {k: h.get(k) for k in hk})
    si = gfxgraph.server_info(args.sock)
    check(si["backend"] == "cpu" and si["device"]["name"] == h["gpu"] and
          "gpu_sharing" not in si["device"] and "gpu_sharing" not in h["details"],
          "server_info(): hello's answer, cpu backend, no gpu_sharing: %r" % si["device"])
    h = gfxgraph.health_check(os.path.join(args.tmp, "nobody.sock"))
    check(h["ok"] is False and h["details"]["code"] == "ENOENT",
          "health_check() of no daemon: ok False, code %r" % h["details"].get("code"))
    raises(lambda: gfxgraph.stats(os.path.join(args.tmp, "nobody.sock")), "ENOENT",
           "stats() of no daemon")
    test_stats_through_library(args, c)
    os.environ["GFXGRAPH_SOCKET"] = args.sock
    try:
        check(gfxgraph.stats()["backend"] == "cpu", "stats() with GFXGRAPH_SOCKET")
        with gfxgraph.Client() as c3:
            check(c3.socket == args.sock, "Client() with GFXGRAPH_SOCKET")
    finally:
        del os.environ["GFXGRAPH_SOCKET"]

    # release and close
    prog2.release()
    prog2.release()
    raises(lambda: prog2.replay(1), "ENOENT", "replay of a released program")
    bx2.release()
    st = gfxgraph.stats(args.sock)
    s2 = session_of(st, c2.session)
    check(len(s2) == 1 and s2[0]["programs"] == 0 and s2[0]["buffers"] == 2,
          "program.release and buffer.release: %r" % s2)
    sid, sid2 = c.session, c2.session
    with c2:
        pass
    check(c2.closed, "the with block closed the client")
    c.close()
    c.close()
    raises(lambda: prog.replay(1), "ENOTCONN", "replay on a closed client")
    raises(lambda: c.register(xmem), "ENOTCONN", "register on a closed client")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = gfxgraph.stats(args.sock)
        # a region goes once its thread has seen its last work done
        if not session_of(st, sid) and not session_of(st, sid2) and st["fastpath_regions"] == 0:
            break
        time.sleep(0.05)
    mine = [e for e in st.get("cache", []) if e.get("session") in (sid, sid2)]
    check(not session_of(st, sid) and not session_of(st, sid2) and st["fastpath_regions"] == 0
          and all(e.get("parked") for e in mine),
          "after close: both sessions and the fast-path region are gone, their graphs only "
          "parked (sessions_active %d, fastpath_regions %d, %d parked)"
          % (st["sessions_active"], st["fastpath_regions"], len(mine)))
    for m in (wmem, xmem, ymem, xmem2):
        name = m.name
        m.close()
    check(not os.path.exists("/dev/shm" + name), "SharedMemory.close() unlinks the name")


def test_stats_through_library(args, c):
    """stats, health_check and server_info go through the C library's
    generic call (counted here), keep the daemon's codes and types, take
    socket= and give up after their timeout."""
    import importlib
    import gfxgraph
    from gfxgraph import _lib
    ggstats = importlib.import_module("gfxgraph.stats")   # the module, not gfxgraph.stats()
    lib = _lib.load()
    real = lib.gg_client_call_json
    seen = []

    def counting(cl, method, params, out):
        seen.append(method)
        return real(cl, method, params, out)
    lib.gg_client_call_json = counting
    try:
        st = gfxgraph.stats(socket=args.sock)
        h = gfxgraph.health_check(socket=args.sock)
        si = gfxgraph.server_info(socket=args.sock)
    finally:
        lib.gg_client_call_json = real
    check(seen == [b"stats", b"health", b"hello"],
          "stats, health_check, server_info (socket=): each one gg_client_call_json (%r)" % seen)
    check(hasattr(ggstats, "local") and
          not any(hasattr(ggstats, n) for n in ("packb", "unpack", "socket_candidates")),
          "gfxgraph.stats has no MessagePack codec or socket rules of its own")
    check(isinstance(st["replay_count"], int) and isinstance(st["avg_replay_us"], float) and
          isinstance(st["cache_truncated"], bool) and isinstance(st["sessions"], list) and
          st["replay_count"] > 0,
          "stats(): ints, floats (whole ones too), bools and lists as the daemon sent them")
    check(st["backend"] == "cpu" and h["ok"] is True and si["session"] > 0 and
          si["limits"]["max_batch"] == c.max_batch and "rmsnorm" in si["ops"],
          "stats, health and hello answers through the library (session %r)" % si.get("session"))
    try:
        ggstats.call("stats", args.sock, params={"nosuch": 1})
        check(False, "stats with a param the daemon refuses: no error")
    except gfxgraph.Error as e:
        check(e.code == "EINVAL" and e.message.startswith("stats: ") and "nosuch" in e.message,
              "the daemon's error through the library: code and message kept (%s)" % e)
    # a socket that accepts and never answers: the timeout ends the wait
    mute = os.path.join(args.tmp, "mute.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(mute)
    srv.listen(8)
    try:
        t0 = time.monotonic()
        raises(lambda: gfxgraph.stats(mute, timeout=0.5), "ETIMEDOUT",
               "stats(timeout=0.5) of a daemon that never answers")
        h = gfxgraph.health_check(socket=mute, timeout=0.5)
        check(h["ok"] is False and h["details"]["code"] == "ETIMEDOUT" and
              h["details"]["socket"] == mute,
              "health_check(timeout=0.5) of a daemon that never answers: ok False, ETIMEDOUT "
              "(%r)" % h["details"])
        raises(lambda: gfxgraph.server_info(mute, timeout=0.5), "ETIMEDOUT",
               "server_info(timeout=0.5) of a daemon that never answers")
        # the timeout is the contract here; the bound is generous for a busy machine
        el = time.monotonic() - t0
        check(el < 60, "the three timed out calls returned (%.1f s for 3 x 0.5 s)" % el)
    finally:
        srv.close()
    h = gfxgraph.health_check(os.path.join(args.tmp, "nobody.sock"))
    check(h["details"]["socket"] == os.path.join(args.tmp, "nobody.sock") and
          h["details"]["reason"].count("nobody.sock") >= 1,
          "health_check() of no daemon: the library's message names the socket (%r)"
          % h["details"]["reason"])


def test_view_i32(c):
    import gfxgraph
    from gfxgraph import _lib
    if not _lib.has("gg_program_def_view"):
        skip("views: this libgfxgraph-client has no gg_program_def_view")
        return
    S, H, DH, TOP = 4, 2, 4, 4
    ROW = H * DH
    xm = gfxgraph.SharedMemory(TOP * ROW * 4)
    pm = gfxgraph.SharedMemory(TOP * 4)
    cm = gfxgraph.SharedMemory(TOP * S * ROW * 4)
    bx, bp, bc = c.register(xm), c.register(pm), c.register(cm)
    spec = {"name": "cache-pad", "buckets": [1, TOP],
            "tensors": {"x": {"dtype": "f32", "shape": ["batch", ROW], "buffer": bx},
                        "xv": {"view": "x", "shape": ["batch", H, DH]},
                        "pos": {"dtype": "i32", "shape": ["batch"], "buffer": bp},
                        "cache": {"dtype": "f32", "shape": ["batch", S, H, DH], "buffer": bc}},
            "nodes": [{"op": "cache_write", "inputs": ["xv", "pos"], "outputs": ["cache"]}]}
    try:
        p = c.define(spec)
    except gfxgraph.Error as e:
        if "cache_write" in e.message and e.code == "EINVAL":
            skip("views: this daemon has no cache_write (%s)" % e)
            return
        raise
    xf, pi, cf = xm.buffer.cast("f"), pm.buffer.cast("i"), cm.buffer.cast("f")
    ok = True
    for step in range(3):
        for i in range(TOP * S * ROW):
            cf[i] = -7.0
        for r in range(TOP):
            pi[r] = step if r == 3 else step + r % 2
            for i in range(ROW):
                xf[r * ROW + i] = 100 * step + 10 * r + i
        p.replay(3)
        for r in range(3):
            for i in range(ROW):
                ok &= cf[(r * S + pi[r]) * ROW + i] == xf[r * ROW + i]
        ok &= all(cf[(3 * S + k) * ROW + i] == -7.0 for k in range(S) for i in range(ROW))
    check(ok, "a view ([batch, 8] as [batch, 2, 4]) and i32 positions: cache_write puts rows "
          "0..2 at their positions over 3 steps, padding row 3 untouched")
    s2 = dict(spec, name="bad-view")
    s2["tensors"] = dict(spec["tensors"], xv={"view": "x", "shape": ["batch", 3, DH]})
    raises(lambda: c.define(s2), "EINVAL", "define: a view with another element count (daemon)")
    s2["tensors"] = dict(spec["tensors"], xv={"view": "x", "shape": ["batch", H, DH],
                                              "dtype": "f16"})
    raises(lambda: c.define(s2), "EINVAL", "define: a view with a dtype the builder cannot send")
    s2["tensors"] = dict(spec["tensors"], xv={"view": "x", "shape": ["batch", H, DH],
                                              "buffer": bx})
    raises(lambda: c.define(s2), "EINVAL", "define: a view with a buffer")
    p.release()
    for b in (bx, bp, bc):
        b.release()


def test_call(c):
    import gfxgraph
    from gfxgraph import _lib
    if not _lib.has("gg_program_def_call"):
        skip("calls: this libgfxgraph-client has no gg_program_def_call")
        return
    D, TOP = 3, 4
    xm, ym = gfxgraph.SharedMemory(TOP * D * 4), gfxgraph.SharedMemory(TOP * D * 4)
    bx, by = c.register(xm), c.register(ym)
    t = {"x": {"dtype": "f32", "shape": ["batch", D], "buffer": bx},
         "y": {"dtype": "f32", "shape": ["batch", D], "buffer": by}}
    inner = c.define({"name": "inner", "buckets": [2, TOP], "tensors": t,
                      "branches": [[{"op": "scale", "inputs": ["x"], "outputs": ["y"],
                                     "attrs": {"scale": 2.0}}],
                                   [{"op": "scale", "inputs": ["x"], "outputs": ["y"],
                                     "attrs": {"scale": -1.0}}]]})
    outer = c.define({"name": "outer", "buckets": [2, TOP], "tensors": t,
                      "nodes": [{"op": "add", "inputs": ["x", "x"], "outputs": ["x"]},
                                {"op": "call", "program": inner, "branch": 1}]})
    xf, yf = xm.buffer.cast("f"), ym.buffer.cast("f")
    for i in range(TOP * D):
        xf[i] = i + 0.5
    outer.replay(3)
    check(all(yf[i] == -2 * (i + 0.5) for i in range(3 * D)),
          "a call node with a Program and a branch: y = -(x + x) for 3 rows")
    raises(lambda: c.define({"name": "bad", "buckets": [TOP], "tensors": t,
                             "nodes": [{"op": "call", "program": inner}]}),
           "EINVAL", "define: a call of a program with other buckets")
    raises(lambda: c.define({"name": "bad", "buckets": [2, TOP], "tensors": t,
                             "nodes": [{"op": "call", "program": inner, "inputs": ["x"]}]}),
           "EINVAL", "define: a call with inputs (the builder)")
    for p in (outer, inner):
        p.release()
    for b in (bx, by):
        b.release()


def test_register_fd(c):
    import fcntl
    import mmap
    import os
    from gfxgraph import _lib
    if not _lib.has("gg_client_buffer_register_fd"):
        skip("buffers by fd: this libgfxgraph-client has no gg_client_buffer_register_fd")
        return
    D, TOP = 4, 2
    n = TOP * D * 4
    fd = os.memfd_create("gfxgraph-py-fd", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 2 * n)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    m = mmap.mmap(fd, 2 * n)
    bx = c.register_fd(fd, 0, n, owner=m)
    by = c.register_fd(fd, n, n, owner=m)
    os.close(fd)           # the daemon has its own mapping
    t = {"x": {"dtype": "f32", "shape": ["batch", D], "buffer": bx},
         "y": {"dtype": "f32", "shape": ["batch", D], "buffer": by}}
    p = c.define({"name": "byfd", "buckets": [1, TOP], "tensors": t,
                  "nodes": [{"op": "scale", "inputs": ["x"], "outputs": ["y"],
                             "attrs": {"scale": 3.0}}]})
    xf = memoryview(m).cast("f")
    for i in range(TOP * D):
        xf[i] = i + 1.0
    p.replay(TOP)
    check(all(xf[TOP * D + i] == 3.0 * (i + 1.0) for i in range(TOP * D)),
          "a memfd registered by fd: the daemon wrote y = 3x into it")
    null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    raises(lambda: c.register_fd(null, 0, 16), "EINVAL",
           "register_fd: /dev/null is not shared memory")
    os.close(null)
    p.release()
    for b in (bx, by):
        b.release()
    del xf


def call_json(c, method, params="{}"):
    """The daemon's answer to method, through the library's generic call."""
    import ctypes
    from gfxgraph import _lib
    lib = _lib.load()
    out = ctypes.c_void_p()
    rc = lib.gg_client_call_json(c._h(), method.encode(), params.encode(), ctypes.byref(out))
    if rc < 0:
        raise RuntimeError("%s: %d %s" % (method, rc, _lib.s(lib.gg_client_last_error(c._h()))))
    try:
        return json.loads(ctypes.string_at(out.value).decode())
    finally:
        lib.gg_client_free_json(out)


def dev_shm_names():
    """This process's names in /dev/shm (the package's: gfxgraph-py-<pid>-...);
    other tests running beside this one make and remove names of their own."""
    mine = "gfxgraph-py-%d-" % os.getpid()
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(mine)}
    except OSError:
        return set()


def test_memfd(args):
    try:
        import numpy as np
    except ImportError:
        skip("memfd arrays: numpy is not installed (Debian: python3-numpy)")
        return
    import gfxgraph
    from gfxgraph import _lib
    if not (_lib.has("gg_client_memfd_create") and _lib.has("gg_client_call_json")):
        skip("memfd arrays: this libgfxgraph-client has no gg_client_memfd_create")
        return
    before = dev_shm_names()
    with gfxgraph.Client(args.sock, name="py-test-memfd") as c:
        x = gfxgraph.shared_array((4, 8), np.float32, memfd=True)
        y = gfxgraph.memfd_array((4, 8), "float32")
        seg = gfxgraph.shm_of(x)
        check(isinstance(x, np.ndarray) and x.shape == (4, 8) and not x.any() and
              seg is not None and seg.fd is not None and
              os.readlink("/proc/self/fd/%d" % seg.fd).startswith("/memfd:"),
              "shared_array(memfd=True): a zeroed numpy array over a memfd")
        check(dev_shm_names() == before, "memfd arrays: nothing new in /dev/shm")
        bx, by = c.register(x), c.register(y)
        check(bx.handle.startswith("memfd:") and by.handle.startswith("memfd:"),
              "register: a memfd array goes by descriptor (%r)" % bx.handle)
        listed = {b["id"]: b["handle"] for b in call_json(c, "buffer.list")["buffers"]}
        check(all(listed.get(b.id, "").startswith("fd:") for b in (bx, by)),
              "buffer.list: the daemon imported both by descriptor (%r)" % listed)
        p = c.define({"name": "memfd_scale", "buckets": [4],
                      "tensors": {"x": {"dtype": "f32", "shape": ["batch", 8], "buffer": bx},
                                  "y": {"dtype": "f32", "shape": ["batch", 8], "buffer": by}},
                      "nodes": [{"op": "scale", "inputs": ["x"], "outputs": ["y"],
                                 "attrs": {"scale": 2.5}}]})
        x[:] = np.arange(32, dtype=np.float32).reshape(4, 8)
        r = p.replay(4)
        check(np.array_equal(y, 2.5 * x) and r["bucket"] == 4,
              "memfd arrays: the daemon wrote y = 2.5x into the memfd")
        p.release()
        bx.release()
        by.release()
        fd = seg.fd
        del x, y, seg
        import gc
        gc.collect()
        check(not os.path.exists("/proc/self/fd/%d" % fd) or
              not os.readlink("/proc/self/fd/%d" % fd).startswith("/memfd:gfxgraph-py"),
              "memfd arrays: the descriptor is closed once no array uses it")
    # a failure on the way leaves nothing behind either
    raises(lambda: gfxgraph.SharedMemory(0, memfd=True), "EINVAL", "SharedMemory(0, memfd=True)")
    check(dev_shm_names() == before, "memfd arrays: /dev/shm as before at the end")


def test_numpy(args):
    try:
        import numpy as np
    except ImportError:
        skip("numpy checks: numpy is not installed (Debian: python3-numpy)")
        return
    import gfxgraph
    rng = np.random.default_rng(5)
    with gfxgraph.Client(args.sock, name="py-test-numpy") as c:
        x = gfxgraph.shared_array((16, 32), np.float32)
        w = gfxgraph.shared_array((24, 32), "f32")
        b = gfxgraph.shared_array(24, "float32")
        yz = gfxgraph.shared_array((2, 16, 24), np.float32)
        check(isinstance(x, np.ndarray) and x.shape == (16, 32) and not x.any() and
              gfxgraph.shm_of(x) is not None, "shared_array: a zeroed numpy array in shm")
        x[:] = rng.standard_normal((16, 32), dtype=np.float32)
        w[:] = rng.standard_normal((24, 32), dtype=np.float32) * 0.2
        b[:] = rng.standard_normal(24, dtype=np.float32)
        y = yz[1]                                   # a view into the middle of an object
        spec = {"name": "np_mlp", "buckets": [2, 4, 8, 16],
                "tensors": {"x": {"dtype": "f32", "shape": ["batch", 32], "buffer": c.register(x)},
                            "w": {"dtype": "f32", "shape": [24, 32], "buffer": c.register(w)},
                            "b": {"dtype": "f32", "shape": [24], "buffer": c.register(b)},
                            "t": {"dtype": "f32", "shape": ["batch", 24], "scratch": True},
                            "y": {"dtype": "f32", "shape": ["batch", 24], "buffer": c.register(y)}},
                "nodes": [{"op": "linear", "inputs": ["x", "w", "b"], "outputs": ["t"]},
                          {"op": "silu", "inputs": ["t"], "outputs": ["t"]},
                          {"op": "softmax", "inputs": ["t"], "outputs": ["y"]}]}
        p = c.define(spec)
        bad = []
        for batch in range(1, 17):
            yz[:] = np.nan
            r = p.replay(batch)
            t = x[:batch].astype(np.float64) @ w.astype(np.float64).T + b
            t = t / (1 + np.exp(-t))
            t = np.exp(t - t.max(-1, keepdims=True))
            ref = t / t.sum(-1, keepdims=True)
            err = np.linalg.norm(y[:batch] - ref) / np.linalg.norm(ref)
            if not err < 1e-5:
                bad.append("batch %d bucket %d err %g" % (batch, r["bucket"], err))
        check(not bad, "numpy: linear -> silu -> softmax at batch 1..16 over a view of a "
              "shared_array matches numpy (rel L2 < 1e-5)%s" % ("; ".join(bad[:3])))
        check(np.isnan(yz[0]).all(), "numpy: the view's neighbours were not written")
        raises(lambda: c.register(np.zeros(8, np.float32)), "EINVAL",
               "register: a plain numpy array (not in shm)")
        raises(lambda: c.register(x[:, ::2]), "EINVAL", "register: a non-contiguous view")
        f16 = gfxgraph.shared_array((4, 8), np.float16)
        f16[:] = np.linspace(-2, 2, 32, dtype=np.float16).reshape(4, 8)
        o16 = gfxgraph.shared_array((4, 8), np.float16)
        p16 = c.define({"name": "f16", "buckets": [4],
                        "tensors": {"a": {"dtype": "f16", "shape": ["batch", 8],
                                          "buffer": c.register(f16)},
                                    "o": {"dtype": "f16", "shape": ["batch", 8],
                                          "buffer": c.register(o16)}},
                        "nodes": [{"op": "gelu", "inputs": ["a"], "outputs": ["o"]}]})
        p16.replay(4)
        xa = f16.astype(np.float64)
        ref = 0.5 * xa * (1 + np.vectorize(math.erf)(xa / math.sqrt(2)))
        err = np.linalg.norm(o16 - ref) / np.linalg.norm(ref)
        check(err < 2e-3, "numpy: f16 gelu matches (rel L2 %.2g < 2e-3)" % err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()
    os.environ["GFXGRAPH_LIB"] = args.lib
    for k in ("GFXGRAPH_SOCKET", "GFXGRAPH_FASTPATH"):
        os.environ.pop(k, None)
    try:
        import gfxgraph  # noqa: F401
    except Exception as e:   # noqa: BLE001
        print("SKIP: the gfxgraph package does not import here: %r" % e)
        return 77
    args.tmp = tempfile.mkdtemp(prefix="ggpy.")
    d = Daemon(args.daemon, args.tmp)
    args.sock = d.sock
    try:
        test_lib_env(args)
        test_main(args)
        test_numpy(args)
        test_memfd(args)
    except Exception:   # noqa: BLE001
        import traceback
        traceback.print_exc()
        check(False, "the checks ran to the end without an exception")
    finally:
        rc = d.stop()
        check(rc == 0, "gfxgraphd stopped cleanly on SIGTERM (exit %s)" % rc)
        if FAILS or rc != 0:
            d.dump()
        shutil.rmtree(args.tmp, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (PASSES, FAILS, SKIPS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
