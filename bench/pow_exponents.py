"""Benchmark (not a test): `x ** e` eagerly for the exponents torch computes without pow (0.5, 2, 3,
-2: sqrt, x * x, x * x * x, 1 / (x * x); python/flow/_ops.py `_pow`), against the same call sent to
flow's pow kernel (what ran before) and torch eager, on 4M elements in float32 and float16. Median
of 30 calls each, in one process.

    PYTHONPATH=python .venv/bin/python bench/pow_exponents.py
"""
import time

import torch

import flow
from flow._dispatch import dispatch1


def median_ms(f, x, n=30):
    for _ in range(3):
        f(x)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f(x)
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2] * 1e3


def main():
    x32 = flow.randn(4_000_000).abs()
    tx32 = torch.from_numpy(x32.numpy())
    cases = (("float32", x32, tx32), ("float16", x32.half(), tx32.half()))
    print(f"{'x ** e, 4M':18} {'flow eager ms':>14} {'pow kernel ms':>14} {'torch ms':>9}")
    for e in (0.5, 2, 3, -2):
        for name, x, tx in cases:
            now = median_ms(lambda a: a ** e, x)
            pow_kernel = median_ms(lambda a: dispatch1("pow", [a, e]), x)
            t = median_ms(lambda a: a ** e, tx)
            print(f"{str(e) + ', ' + name:18} {now:14.2f} {pow_kernel:14.2f} {t:9.2f}")


if __name__ == "__main__":
    main()
