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
