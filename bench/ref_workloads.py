# SPDX-License-Identifier: MIT
"""The three reference workloads as PyTorch modules, and the CUDA-graph
capture recipe, for bench_python.py and bench_fuse.py (the same models as
tests/gpu/python/test_torch_cudagraph.py, the decode chain at 32 layers):

    decode chain      32 x (layernorm -> gelu tanh), d 1024
    mlp(d)            linear d -> 4d -> gelu -> linear 4d -> d

torch is the caller's (imported there: it is optional elsewhere)."""


def chain(torch, d=1024, layers=32):
    nn = torch.nn

    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
            for n in self.norms:
                nn.init.normal_(n.weight, 1.0, 0.1)
                nn.init.normal_(n.bias, 0.0, 0.1)

        def forward(self, x):
            for n in self.norms:
                x = nn.functional.gelu(n(x), approximate="tanh")
            return x

    return Chain()


def mlp(torch, d):
    nn = torch.nn
    return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Identity(), nn.Linear(4 * d, d))


def capture(torch, model, x0):
    """(graph, static input, static output): warm up on a side stream, then
    capture, as PyTorch's documentation does it."""
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


def workloads(torch):
    """The rows bench_python.py and bench_fuse.py both time: (name, what,
    make_model, input shape, dtype, whether it is one of the three
    reference workloads).  The MLPs are f32 (TF32 off, as the callers set
    it) with an f16 row each."""
    f16, f32 = torch.float16, torch.float32
    return [
        ("decode_chain", "32 x (layernorm -> gelu tanh), d 1024, batch 1",
         lambda: chain(torch), (1, 1024), f16, True),
        ("mlp_bs32_d1024", "linear 1024->4096 -> gelu -> linear 4096->1024, batch 32",
         lambda: mlp(torch, 1024), (32, 1024), f32, True),
        ("mlp_bs128_d2048", "linear 2048->8192 -> gelu -> linear 8192->2048, batch 128",
         lambda: mlp(torch, 2048), (128, 2048), f32, True),
        ("mlp_bs32_d1024_f16", "as mlp_bs32_d1024, f16",
         lambda: mlp(torch, 1024), (32, 1024), f16, False),
        ("mlp_bs128_d2048_f16", "as mlp_bs128_d2048, f16",
         lambda: mlp(torch, 2048), (128, 2048), f16, False),
    ]


def rel(a, b):
    """Relative L2 error of a against b."""
    a, b = a.double().flatten(), b.double().flatten()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))
