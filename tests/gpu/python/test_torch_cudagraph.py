#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gfxgraph.enable(): unchanged torch.cuda.CUDAGraph code routed through the
daemon (run.sh starts a hip daemon).  The three reference workloads (decode
chain: layernorm -> gelu(tanh) x 8 at d 1024, batch 1; mlp_bs32_d1024;
mlp_bs128_d2048), each captured the usual way (warm-up on a side stream,
torch.cuda.graph, copy into the static input, replay), must be routed to
the daemon and equal PyTorch's eager result and PyTorch's own CUDA graph
within tolerance; an op the daemon lacks (cumsum) in the middle of a region
falls back to PyTorch's graph, counted and logged once, and is still right;
the sync modes "stream" (the default), "gpu" and "events"; f16; disable().
Around every run the daemon's counters and the package's must show each
replay as a daemon graph launch (_common.DaemonReplays): a daemon whose
graph launch fails answers eagerly with the right values, and only they
tell (test_fault_detection.py shows this file failing against one)."""
import logging
import os

import gfxgraph
from _common import DaemonReplays, check, finish, need_torch_cuda, rel, socket

torch = need_torch_cuda()
nn = torch.nn
sock = socket()
torch.manual_seed(0)


class Chain(nn.Module):
    def __init__(self, d=1024, layers=8):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        for n in self.norms:
            nn.init.normal_(n.weight, 1.0, 0.1)
            nn.init.normal_(n.bias, 0.0, 0.1)

    def forward(self, x):
        for n in self.norms:
            x = nn.functional.gelu(n(x), approximate="tanh")
        return x


class _Cumsum(nn.Module):
    """An op with no daemon lowering (gfxgraph.frontend.lower.LOWER)."""

    def forward(self, x):
        return torch.cumsum(x, -1)


def mlp(d, relu=False):
    mid = _Cumsum() if relu else nn.Identity()
    return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), mid, nn.Linear(4 * d, d))


def capture(model, x0):
    """The usual CUDA-graph recipe; returns (graph, static input, static output)."""
    static_x = x0.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
    return g, static_x, static_y


def run(name, model, shape, dtype=torch.float32, tol=1e-4, expect_daemon=True):
    model = model.cuda().to(dtype).eval()
    with torch.no_grad():
        g, sx, sy = capture(model, torch.randn(shape, device="cuda", dtype=dtype))
        routed = getattr(g, "gfxgraph_program", None) is not None
        check(routed == expect_daemon, "%s: capture %s" % (
            name, "routed to the daemon (%r)" % g.gfxgraph_program if routed
            else "left with PyTorch's CUDA graph"))
        # 6 replays of g below: all daemon graph launches when routed, none
        # reaching the daemon when not
        with DaemonReplays(sock, name) as d:
            replays(name, model, shape, dtype, tol, g, sx, sy)
            d.expect(6 if routed else 0)


def replays(name, model, shape, dtype, tol, g, sx, sy):
    """5 replays against eager PyTorch, then one against PyTorch's own
    graph of the model (no grad: run()'s)."""
    worst = 0.0
    for _ in range(5):
        x = torch.randn(shape, device="cuda", dtype=dtype)
        sx.copy_(x)
        g.replay()
        out = sy.clone()              # ordered after the replay on the current stream
        worst = max(worst, rel(out, model(x)))
    torch.cuda.synchronize()
    check(worst < tol, "%s: 5 replays equal eager PyTorch (worst rel L2 %.2g < %g)"
          % (name, worst, tol))
    # PyTorch's own graph of the same model, for the record
    mode = gfxgraph.cudagraph._state["sync"]
    gfxgraph.disable()
    g2, sx2, sy2 = capture(model, x)
    gfxgraph.enable(socket=sock, sync=mode)
    sx2.copy_(x)
    g2.replay()
    sx.copy_(x)
    g.replay()
    torch.cuda.synchronize()
    check(rel(sy, sy2) < tol, "%s: equal to torch.cuda.CUDAGraph's replay (rel L2 %.2g)"
          % (name, rel(sy, sy2)))


class Count(logging.Handler):
    def __init__(self):
        super().__init__()
        self.msgs = []

    def emit(self, rec):
        self.msgs.append(rec.getMessage())


h = Count()
logging.getLogger("gfxgraph").addHandler(h)
check(gfxgraph.is_enabled() is False, "is_enabled() False before enable()")
gfxgraph.enable(socket=sock)
check(gfxgraph.is_enabled() is True, "enable(): is_enabled() True")
check(torch.cuda.CUDAGraph.__module__ == "gfxgraph.cudagraph", "torch.cuda.CUDAGraph is patched")
st0 = gfxgraph.stats(sock)

run("decode chain (8 x layernorm -> gelu tanh, d 1024, batch 1)", Chain(), (1, 1024))
run("mlp_bs32_d1024", mlp(1024), (32, 1024))
run("mlp_bs128_d2048", mlp(2048), (128, 2048))
run("mlp_bs32_d1024 f16", mlp(1024), (32, 1024), torch.float16, 2e-2)
run("mlp on a 3-D input [4, 8, 512]", mlp(512), (4, 8, 512))

st = gfxgraph.stats(sock)
check(st["local"]["captures"] >= 5 and st["local"]["replays"] >= 30,
      "stats local: %d captures routed, %d replays" % (st["local"]["captures"],
                                                       st["local"]["replays"]))
check(st["capture_count"] > st0["capture_count"] and st["replay_count"] > st0["replay_count"],
      "the daemon counted captures (%d -> %d) and graph replays (%d -> %d)"
      % (st0["capture_count"], st["capture_count"], st0["replay_count"], st["replay_count"]))
check(st["enabled_at"] is not None, "stats enabled_at %r" % st["enabled_at"])

fb0 = st["local"]["fallback_count"]
run("mlp with cumsum in the middle (no daemon op)", mlp(1024, relu=True), (32, 1024),
    expect_daemon=False)
run("the same again", mlp(1024, relu=True), (32, 1024), expect_daemon=False)
st = gfxgraph.stats(sock)
check(st["local"]["fallback_count"] == fb0 + 2 and
      st["local"]["fallback_ops"].get("aten.cumsum.default") == 2,
      "fallbacks counted: %d, ops %r" % (st["local"]["fallback_count"], st["local"]["fallback_ops"]))
relu_logs = [m for m in h.msgs if "aten.cumsum" in m]
check(len(relu_logs) == 1, "the cumsum fallback is logged once: %r" % relu_logs)

check(gfxgraph.cudagraph._state["sync"] == "stream", "enable()'s default sync is \"stream\"")
for mode in ("gpu", "events"):
    gfxgraph.disable()
    gfxgraph.enable(socket=sock, sync=mode)
    run("mlp_bs32_d1024, sync=\"%s\"" % mode, mlp(1024), (32, 1024))
    run("decode chain, sync=\"%s\"" % mode, Chain(), (1, 1024))
try:
    gfxgraph.enable(socket=sock, sync="sometimes")
    check(False, "enable(sync=\"sometimes\") raises")
except gfxgraph.Error as e:
    check(e.code == "EINVAL" and "sync" in str(e), "enable(sync=\"sometimes\"): %s %s" % (e.code, e))
gfxgraph.disable()
check(gfxgraph.is_enabled() is False and torch.cuda.CUDAGraph.__module__ != "gfxgraph.cudagraph",
      "disable(): PyTorch's classes are back")
sh = gfxgraph.server_info(sock)["device"].get("gpu_sharing")
check(sh in ("mps", "time-sliced") if torch.version.cuda else sh is None,
      "hello's device.gpu_sharing on this GPU: %r (CUDA_MPS_PIPE_DIRECTORY %r)"
      % (sh, os.environ.get("CUDA_MPS_PIPE_DIRECTORY")))
h2 = gfxgraph.health_check(sock)
check(h2["ok"] is True and h2["gpu"], "health_check(): %r" % {k: h2[k] for k in ("ok", "gpu", "arch")})
finish("test_torch_cudagraph")
