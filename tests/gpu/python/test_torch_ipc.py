#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch CUDA tensors registered by IPC (Client.register), against a hip
daemon (run.sh): a program over torch tensors, one of them a slice in the
middle of a larger allocation, replayed for batch 1..48 (buckets and eager
above) and compared with the same ops in PyTorch; submit/wait; f16;
register errors.  Each replay's answer must say how the daemon ran it (a
graph up to the top bucket, eager above it, never a fallback), and the
daemon's counters must agree (_common.DaemonReplays): a daemon whose graph
launch fails answers eagerly with the right values (test_fault_detection.py
shows this file failing against one)."""
import gfxgraph
from _common import COUNTERS, DaemonReplays, check, finish, need_torch_cuda, rel, socket

torch = need_torch_cuda()
F = torch.nn.functional
sock = socket()
torch.manual_seed(0)

with gfxgraph.Client(sock, name="test_torch_ipc") as c:
    check(c.backend == "hip", "Client: backend %r, device %r, fast path %s"
          % (c.backend, c.device, c.fastpath_status))
    D, N, ROWS = 256, 512, 48
    x = torch.randn(ROWS, D, device="cuda")
    lnw = torch.randn(D, device="cuda") * 0.1 + 1
    lnb = torch.randn(D, device="cuda") * 0.1
    w = torch.randn(N, D, device="cuda") / D ** 0.5
    b = torch.randn(N, device="cuda") * 0.1
    arena = torch.zeros(4 * ROWS * N + 1000, device="cuda")
    y = arena[1000:1000 + ROWS * N].view(ROWS, N)       # inside a larger allocation
    bufs = {k: c.register(t) for k, t in dict(x=x, lnw=lnw, lnb=lnb, w=w, b=b, y=y).items()}
    check(all(v.id > 0 for v in bufs.values()), "register: 6 CUDA tensors (one a slice at "
          "offset 4000 bytes of its allocation)")
    spec = {"name": "ipc", "buckets": [1, 2, 4, 8, 16, 32],
            "tensors": {"x": {"dtype": "f32", "shape": ["batch", D], "buffer": bufs["x"]},
                        "lnw": {"dtype": "f32", "shape": [D], "buffer": bufs["lnw"]},
                        "lnb": {"dtype": "f32", "shape": [D], "buffer": bufs["lnb"]},
                        "w": {"dtype": "f32", "shape": [N, D], "buffer": bufs["w"]},
                        "b": {"dtype": "f32", "shape": [N], "buffer": bufs["b"]},
                        "h": {"dtype": "f32", "shape": ["batch", D], "scratch": True},
                        "g": {"dtype": "f32", "shape": ["batch", N], "scratch": True},
                        "y": {"dtype": "f32", "shape": ["batch", N], "buffer": bufs["y"]}},
            "nodes": [{"op": "layernorm", "inputs": ["x", "lnw", "lnb"], "outputs": ["h"]},
                      {"op": "linear", "inputs": ["h", "w", "b"], "outputs": ["g"]},
                      {"op": "gelu", "inputs": ["g"], "outputs": ["y"],
                       "attrs": {"approximate": "tanh"}}]}
    p = c.define(spec)
    bad, paths = [], []
    eager_rows = 0
    for batch in range(1, ROWS + 1):
        x.copy_(torch.randn(ROWS, D, device="cuda"))
        y.fill_(float("nan"))
        torch.cuda.synchronize()                 # the daemon reads x: our writes are done
        r = p.replay(batch)
        want = "graph" if batch <= 32 else "eager"
        eager_rows += want == "eager"
        if r["path"] != want or r["fallback"]:
            paths.append("batch %d: %s%s (%s)" % (batch, r["path"], ", fallback" if r["fallback"]
                                                  else "", r["reason"]))
        ref = F.gelu(F.linear(F.layer_norm(x[:batch], (D,), lnw, lnb, 1e-5), w, b),
                     approximate="tanh")
        e = rel(y[:batch], ref)
        if not e < 1e-4:
            bad.append("batch %d (%s, bucket %d): rel %g" % (batch, r["path"], r["bucket"], e))
    check(not bad, "replays at batch 1..%d match PyTorch (rel L2 < 1e-4)%s"
          % (ROWS, "; " + "; ".join(bad[:3]) if bad else ""))
    check(not paths, "%s batch 1..32 ran as graphs, 33..%d eagerly above the top bucket, no "
          "fallback%s" % (COUNTERS, ROWS, ": " + "; ".join(paths[:3]) if paths else ""))
    check(torch.isnan(arena[:1000]).sum() == 0 and (arena[:1000] == 0).all().item(),
          "the bytes before the registered slice were not written")
    with DaemonReplays(sock, "submit/wait", package=False) as d:
        tickets = [p.submit(bt) for bt in (3, 17, 32)]
        res = [c.wait(t) for t in tickets]
        d.expect(3)
    check([r["bucket"] for r in res] == [4, 32, 32] and
          all(r["path"] == "graph" and not r["fallback"] for r in res),
          "%s submit/wait: %r" % (COUNTERS, res))

    xh, yh = x.half(), torch.empty(ROWS, D, device="cuda", dtype=torch.float16)
    ph = c.define({"name": "ipc_f16", "buckets": [8, ROWS],
                   "tensors": {"x": {"dtype": "f16", "shape": ["batch", D], "buffer": c.register(xh)},
                               "y": {"dtype": "f16", "shape": ["batch", D], "buffer": c.register(yh)}},
                   "nodes": [{"op": "silu", "inputs": ["x"], "outputs": ["y"]}]})
    torch.cuda.synchronize()
    with DaemonReplays(sock, "f16 silu", package=False) as d:
        rh = ph.replay(ROWS)
        d.expect(1)
    check(rel(yh, F.silu(xh)) < 2e-3, "f16 silu over torch.float16 tensors (%s)" % rh["path"])
    try:
        c.register(torch.zeros(4))
        check(False, "register of a CPU tensor on the hip backend fails")
    except gfxgraph.Error as e:
        check(e.code == "EINVAL", "register of a CPU tensor on the hip backend: %s" % e)
    try:
        c.register(x.t())
        check(False, "register of a non-contiguous tensor fails")
    except gfxgraph.Error as e:
        check(e.code == "EINVAL", "register of a non-contiguous CUDA tensor: %s" % e)
    b2 = c.register(y, offset=N * 4, size=N * 4)
    check(b2.size == N * 4, "register(t, offset, size): one row of y")
finish("test_torch_ipc")
