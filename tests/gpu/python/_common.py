# SPDX-License-Identifier: MIT
"""Shared by tests/gpu/python/test_torch_*.py (run by run.sh): checks that
print one line each, the daemon's socket from GFXGRAPH_SOCKET, and a
relative-L2 comparison."""
import os
import sys

FAILS = 0
PASSES = 0


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


def rel(a, b):
    a = a.detach().double().flatten()
    b = b.detach().double().flatten()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def need_torch_cuda():
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        sys.exit(77)
    torch.backends.cuda.matmul.allow_tf32 = False      # the daemon's linear is f32 without TF32
    torch.backends.cudnn.allow_tf32 = False
    return torch


def socket():
    s = os.environ.get("GFXGRAPH_SOCKET")
    if not s:
        print("SKIP: GFXGRAPH_SOCKET is not set (run.sh starts a daemon and sets it)")
        sys.exit(77)
    return s


def finish(name):
    print("%s: %d passed, %d failed" % (name, PASSES, FAILS))
    sys.exit(1 if FAILS else 0)


# The marker of the checks on the daemon's counters: test_fault_detection.py
# looks for it among a faulted run's failures.
COUNTERS = "[daemon counters]"


def _counts(sock):
    import gfxgraph
    st = gfxgraph.stats(sock)
    return st, dict(st["local"])


class DaemonReplays:
    """Around a block of replays that must all run as daemon graphs:

        with DaemonReplays(sock, "what") as d:
            ...replays...
            d.expect(n)          # n replays routed to the daemon (None: any > 0,
                                 # counted by the package's compiled_replays)

    On exit it waits for the daemon's replay_count + eager_count to move by
    n (the counters move when the daemon has seen each replay finish, which
    for a fast-path or an async replay can come after the caller has its
    answer: a deadline, not a sleep), then checks that all n were graph
    launches (replay_count), none ran eagerly or fell back (eager_count,
    fallback_count), the package counted none as a fallback (fallback_count,
    compile_eager_fallbacks) and saw n graph answers (daemon_graph_replays).
    A daemon whose graph launch fails still answers, eagerly and with the
    right values: these counters are what tells.  The daemon must serve
    only this process meanwhile (run.sh starts one for the tests)."""

    def __init__(self, sock, what, package=True):
        self.sock, self.what, self.n, self.package = sock, what, None, package

    def __enter__(self):
        self.st0, self.l0 = _counts(self.sock)
        return self

    def expect(self, n):
        self.n = n

    def __exit__(self, et, ev, tb):
        if et is not None:
            return False
        import time
        l1 = _counts(self.sock)[1]
        n = self.n
        if n is None:
            n = l1["compiled_replays"] - self.l0["compiled_replays"]
            check(n > 0, "%s: %s the daemon ran partition replays (%d)" % (self.what, COUNTERS, n))
        deadline = time.monotonic() + 30.0
        while True:
            st1, l1 = _counts(self.sock)
            seen = (st1["replay_count"] + st1["eager_count"]
                    - self.st0["replay_count"] - self.st0["eager_count"])
            if seen >= n or time.monotonic() > deadline:
                break
            time.sleep(0.01)

        def d(k, a=st1, b=self.st0):
            return a.get(k, 0) - b.get(k, 0)

        def dl(k):
            return l1.get(k, 0) - self.l0.get(k, 0)
        check(d("replay_count") == n and d("eager_count") == 0 and d("fallback_count") == 0,
              "%s: %s all %d replays were daemon graph launches (replay_count +%d, eager_count "
              "+%d, fallback_count +%d)" % (self.what, COUNTERS, n, d("replay_count"),
                                            d("eager_count"), d("fallback_count")))
        if not self.package:      # replays of a gfxgraph.Client of the test's own
            return False
        check(dl("fallback_count") == 0 and dl("compile_eager_fallbacks") == 0 and
              dl("daemon_graph_replays") == n and dl("daemon_fallback_replays") == 0,
              "%s: %s the package: %d graph answers, no fallback (local fallback_count +%d, "
              "compile_eager_fallbacks +%d, daemon_graph_replays +%d, daemon_fallback_replays +%d)"
              % (self.what, COUNTERS, n, dl("fallback_count"), dl("compile_eager_fallbacks"),
                 dl("daemon_graph_replays"), dl("daemon_fallback_replays")))
        return False
