"""Benchmark (not a test): eager calls of functions flow writes as several ops, which run as one
compiled kernel each (``fused_in_eager``, flow/_eager_fusion.py), against the same functions op by op
(the decorated function's ``__wrapped__`` patched in, what ran before) and torch eager, in one
process. float32 inputs of [2048, 2048] (``--small``: [16, 256], where the call's overhead shows);
median of 30 calls each.

    PYTHONPATH=python .venv/bin/python bench/eager_composites.py [--small]
"""
import sys
import time

import torch

import flow
import flow.nn.functional as FF
from flow import _math, _math_more, _ops
from flow.nn import _functional_more as _fm
from flow.nn import _loss_functional as _lf


def median_ms(f, n=30):
    for _ in range(3):
        f()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2] * 1e3


def top(F):
    return flow if F is FF else torch


CASES = [  # name, inputs (number of tensors), fn(F, *xs), the module, the decorated function's name
    ("selu", 1, lambda F, x: F.selu(x), _fm, "_selu"),
    ("celu", 1, lambda F, x: F.celu(x, 0.5), _fm, "_celu"),
    ("softsign", 1, lambda F, x: F.softsign(x), _fm, "_softsign"),
    ("softshrink", 1, lambda F, x: F.softshrink(x, 0.3), _fm, "_softshrink"),
    ("hardshrink", 1, lambda F, x: F.hardshrink(x, 0.3), _fm, "_hardshrink"),
    ("tanhshrink", 1, lambda F, x: F.tanhshrink(x), _fm, "_tanhshrink"),
    ("threshold", 1, lambda F, x: F.threshold(x, 0.1, 20.0), _fm, "_threshold"),
    ("glu", 1, lambda F, x: F.glu(x, -1), _fm, "_glu"),
    ("logaddexp", 2, lambda F, a, b: top(F).logaddexp(a, b), _math, "_logaddexp"),
    ("addcmul", 3, lambda F, x, a, b: top(F).addcmul(x, a, b, value=0.5), _math, "_addcmul"),
    ("lerp 0.3", 2, lambda F, a, b: top(F).lerp(a, b, 0.3), _math, "_lerp"),
    ("isclose", 2, lambda F, a, b: top(F).isclose(a, b), _math, "_isclose"),
    ("xlogy", 2, lambda F, a, b: top(F).xlogy(a, b), _math_more, "_xlogy"),
    ("sinc", 1, lambda F, x: top(F).sinc(x), _math_more, "_sinc"),
    ("x ** 3", 1, lambda F, x: x ** 3, _ops, "_cube_or_inverse_square"),
    ("mse_loss", 2, lambda F, a, b: F.mse_loss(a, b), FF, "_mse_loss"),
    ("l1_loss", 2, lambda F, a, b: F.l1_loss(a, b), FF, "_l1_loss"),
    ("huber_loss", 2, lambda F, a, b: F.huber_loss(a, b, delta=0.5), _lf, "_huber_loss"),
    ("smooth_l1_loss", 2, lambda F, a, b: F.smooth_l1_loss(a, b, beta=0.5), _lf, "_smooth_l1_loss"),
    ("kl_div", 2, lambda F, a, b: F.kl_div(a, b, reduction="batchmean"), _lf, "_kl_div"),
]


def main():
    shape = (16, 256) if "--small" in sys.argv else (2048, 2048)
    tx = [torch.rand(*shape) + 0.1 for _ in range(3)]
    fx = [flow.as_tensor(t) for t in tx]
    print(f"{str(shape):14} {'fused ms':>9} {'op by op ms':>12} {'torch ms':>9} {'kernels op by op':>17}")
    for name, n, fn, module, attr in CASES:
        fused = median_ms(lambda: fn(FF, *fx[:n]))
        decorated = getattr(module, attr)
        setattr(module, attr, decorated.__wrapped__)
        try:
            op_by_op = median_ms(lambda: fn(FF, *fx[:n]))
            flow.reset_launch_count()
            fn(FF, *fx[:n])
            kernels = flow.launch_count()
        finally:
            setattr(module, attr, decorated)
        t = median_ms(lambda: fn(torch.nn.functional, *tx[:n]))
        print(f"{name:14} {fused:9.3f} {op_by_op:12.3f} {t:9.3f} {kernels:17d}")


if __name__ == "__main__":
    main()
