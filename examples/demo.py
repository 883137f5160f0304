"""The main job of `make demo`: a small model compiled with @flow.jit, checked against PyTorch.

Runs on the CPU (LLVM backend); prints the fused kernels flow generated, the cache counters, and
the agreement with torch.
"""
import time

import numpy as np

import flow


class GatedResidual(flow.nn.Module):
    """relu(x * a + b) * sigmoid(x) + 1, then a softmax over the last dim."""

    def __init__(self, features: int):
        super().__init__()
        rng = np.random.default_rng(0)
        self.a = flow.nn.Parameter(flow.tensor(rng.standard_normal(features).astype(np.float32)))
        self.b = flow.nn.Parameter(flow.tensor(rng.standard_normal(features).astype(np.float32)))

    def forward(self, x):
        y = flow.relu(x * self.a + self.b) * flow.sigmoid(x) + 1.0
        return flow.softmax(y, dim=-1)


def main() -> None:
    model = flow.jit(GatedResidual(1024))
    x_np = np.random.default_rng(1).standard_normal((256, 1024)).astype(np.float32)
    x = flow.tensor(x_np)

    t0 = time.perf_counter()
    y = model(x)
    first = time.perf_counter() - t0
    for _ in range(5):  # warm-up: the thread pool starts and the output blocks are paged in
        y = model(x)
    calls = []
    for _ in range(20):
        t0 = time.perf_counter()
        y = model(x)
        calls.append(time.perf_counter() - t0)
    steady = sorted(calls)[len(calls) // 2]  # the median call

    print(model.explain(with_source=False) if hasattr(model, "explain") else "")
    print(f"first call (trace + compile or cache load): {first * 1e3:.1f} ms; steady state: {steady * 1e3:.3f} ms")
    print("kernel cache:", flow.cache_stats())

    try:
        import torch
    except ImportError:  # the demo still runs without the oracle
        return
    a = torch.from_numpy(model.a.numpy())
    b = torch.from_numpy(model.b.numpy())
    xt = torch.from_numpy(x_np)
    ref = torch.softmax(torch.relu(xt * a + b) * torch.sigmoid(xt) + 1.0, dim=-1)
    err = float((torch.from_numpy(y.numpy()) - ref).abs().max())
    print(f"max abs difference vs torch: {err:.3e}")
    if not err < 1e-5:
        raise SystemExit("demo: flow and torch disagree")
    image_classifier(torch)


def conv_net(nn):
    """A small image classifier written against torch.nn's API (works with torch.nn and flow.nn)."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def image_classifier(torch) -> None:
    """The founding use: a CNN's weights from PyTorch, compiled with @flow.jit (batch norm folded
    into the convolutions, parameter-only work cached), checked against PyTorch, and profiled."""
    torch.manual_seed(0)
    tm = conv_net(torch.nn).eval()
    for m in tm.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
    fm = conv_net(flow.nn).eval()
    fm.load_state_dict(tm.state_dict())
    model = flow.jit(fm)
    x = torch.randn(8, 3, 64, 64)
    with flow.no_grad():
        y = model(flow.as_tensor(x))
        prof = model.profile(flow.as_tensor(x), repeats=5)
    with torch.no_grad():
        ref = tm(x)
    err = float((torch.from_numpy(y.numpy()) - ref).abs().max() / ref.abs().max())
    print("\n== an image classifier (conv, batch norm, relu, max pool, silu, linear), batch 8, 64x64 ==")
    for line in model.explain(with_source=False).splitlines():
        if line.startswith(("== kernels", "parameter-only", "folded", "group")) and "library call" in line or \
                line.startswith(("== kernels", "parameter-only", "folded")):
            print(line)
    print(prof.table(top=8))
    print(f"max relative difference vs torch: {err:.3e}")
    if not err < 1e-4:
        raise SystemExit("demo: flow and torch disagree on the image classifier")


if __name__ == "__main__":
    main()
