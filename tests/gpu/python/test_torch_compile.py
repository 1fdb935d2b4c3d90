#!/usr/bin/env python3
"""torch.compile(model, backend="gfxgraph") against a hip daemon (run.sh):
an nn.Module MLP and a small transformer block (attention's q @ k^T and
probs @ v stay in PyTorch; norms, linears, gelu, softmax, residual adds go
to daemon partitions), at several batch sizes, equal to eager PyTorch
within tolerance; partitions and the ops left to PyTorch are counted.
Around every run the daemon's counters and the package's must show each
partition call as a daemon graph launch (_common.DaemonReplays): a
partition whose replay fails runs in eager PyTorch and a daemon whose graph
launch fails answers eagerly, both with the right values, and only the
counters tell (test_fault_detection.py shows this file failing against such
a daemon)."""
import logging

import gfxgraph
from _common import DaemonReplays, check, finish, need_torch_cuda, rel, socket

torch = need_torch_cuda()
nn = torch.nn
F = nn.functional
sock = socket()
torch.manual_seed(0)
logging.basicConfig(level=logging.WARNING)
gfxgraph.enable(socket=sock)          # the process's client; registers the backend too
import torch._dynamo  # noqa: E402
check("gfxgraph" in torch._dynamo.list_backends(exclude_tags=()),
      "\"gfxgraph\" is a registered torch.compile backend")


class MLP(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Block(nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        self.h = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.RMSNorm(d, eps=1e-6) if hasattr(nn, "RMSNorm") else nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):               # x: [B, S, d]
        B, S, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q = q.view(B, S, self.h, D // self.h).transpose(1, 2)
        k = k.view(B, S, self.h, D // self.h).transpose(1, 2)
        v = v.view(B, S, self.h, D // self.h).transpose(1, 2)
        att = torch.softmax((q @ k.transpose(-1, -2)) * (D // self.h) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, S, D)
        x = x + self.proj(y)
        return x + self.down(F.silu(self.up(self.ln2(x))))


def run(name, model, shapes, tol, dynamic=None):
    model = model.cuda().eval()
    cm = torch.compile(model, backend="gfxgraph", dynamic=dynamic)
    worst, n = 0.0, 0
    # every partition call of cm a daemon graph launch (the package counts
    # the calls: compiled_replays)
    with DaemonReplays(sock, name) as d, torch.no_grad():
        for shp in shapes:
            x = torch.randn(shp, device="cuda")
            for _ in range(2):
                got = cm(x)
                worst = max(worst, rel(got, model(x)))
                n += 1
        torch.cuda.synchronize()
        d.expect(None)
    check(worst < tol, "%s: %d calls at shapes %s equal eager (worst rel L2 %.2g < %g)"
          % (name, n, shapes, worst, tol))


p0 = gfxgraph.stats(sock)["local"]["compiled_partitions"]
run("MLP module (layernorm, linear, gelu, linear, residual add)", MLP(),
    [(1, 512), (3, 512), (8, 512), (8, 512), (30, 512)], 1e-4, dynamic=False)
st = gfxgraph.stats(sock)
check(st["local"]["compiled_partitions"] > p0, "MLP: daemon partitions built (%d)"
      % (st["local"]["compiled_partitions"] - p0))
run("MLP module, dynamic shapes", MLP(), [(2, 512), (5, 512), (9, 512)], 1e-4, dynamic=True)
p1 = gfxgraph.stats(sock)["local"]["compiled_partitions"]
run("transformer block (attention matmuls in PyTorch)", Block(),
    [(1, 16, 256), (2, 16, 256), (4, 16, 256)], 1e-4, dynamic=False)
st = gfxgraph.stats(sock)
check(st["local"]["compiled_partitions"] > p1, "block: daemon partitions built (%d)"
      % (st["local"]["compiled_partitions"] - p1))
left = st["local"]["compile_fallback_ops"]
check(any("matmul" in k or "bmm" in k for k in left),
      "block: the attention matmul is named among the ops left to PyTorch: %r" % sorted(left))
gfxgraph.disable()
finish("test_torch_compile")
