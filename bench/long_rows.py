"""Benchmark (not a test): reductions over a few long rows on the CPU, where rows alone give no
parallelism (scheduler/reduction_scheduler.cpp: each row's passes split into parallel chunks, long
sums blocked). Six float32 workloads, each timed in one run for flow jit, flow eager, torch eager
and torch.compile, next to the memory floor (reading the input once, and writing it once for
softmax, at the copy bandwidth measured in this run):
  - sum of all 2^24 elements; norm (sqrt of the sum of squares) of 2^24;
  - sum over rows of 2^21, 8 rows; mean over rows of 2^23, 2 rows;
  - softmax over rows of 2^20, 4 rows (two reductions and a full pass, all split);
  - var over rows of 2^20, 16 rows.
Then the accuracy of a float32 sum of 2^24 values, flow's and torch's, against the float64 sum.

    PYTHONPATH=python .venv/bin/python bench/long_rows.py [--quick] [--no-compile]
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import (WORKLOAD_COLUMNS, cpu_bench_start, normal_float32, print_table, read_once,  # noqa: E402
                    workload_rows, write_workloads)


def accuracy_rows(n: int) -> list[dict]:
    """Relative error of flow's and torch's float32 sums of n values against the float64 sum."""
    import flow
    import torch

    rng = np.random.default_rng(1)
    rows = []
    for name, x in (("U(0, 1)", rng.random(n, dtype=np.float32)),
                    ("near 0.1", (0.1 + 1e-4 * rng.random(n)).astype(np.float32))):
        exact = float(x.astype(np.float64).sum())
        rows.append({"values": f"{name}, 2^{n.bit_length() - 1}",
                     "flow rel. error": f"{abs(float(flow.tensor(x).sum().item()) - exact) / exact:.1e}",
                     "torch rel. error": f"{abs(float(torch.from_numpy(x).sum().item()) - exact) / exact:.1e}"})
    return rows


def main() -> None:
    args, bw = cpu_bench_start("long_rows")
    s = 8 if args.quick else 1
    normal = normal_float32()
    n = (1 << 24) // s
    workloads = [
        ("sum, 2^24", lambda m, x: x.sum(), [normal(n)], read_once),
        ("norm, 2^24", lambda m, x: (x * x).sum().sqrt(), [normal(n)], read_once),
        ("sum(-1), 8 rows of 2^21", lambda m, x: x.sum(-1), [normal(8, n // 8)], read_once),
        ("mean(-1), 2 rows of 2^23", lambda m, x: x.mean(-1), [normal(2, n // 2)], read_once),
        ("softmax(-1), 4 rows of 2^20", lambda m, x: m.softmax(x, -1), [normal(4, n // 16)],
         lambda a: 2 * a[0].nbytes),
        ("var(-1), 16 rows of 2^20", lambda m, x: x.var(-1), [normal(16, n // 16)], read_once),
    ]
    results = workload_rows(workloads, bw, not args.no_compile)
    print_table("reductions over a few long rows, float32, CPU (median of repeats)", results, WORKLOAD_COLUMNS)
    acc = accuracy_rows(n)
    print_table("float32 sum accuracy (relative error against the float64 sum)", acc,
                ["values", "flow rel. error", "torch rel. error"])
    write_workloads(args.json, bw, results + acc)


if __name__ == "__main__":
    main()
