"""Benchmark (not a test): the scatter family on the CPU (flow's scatter library op,
dsl/ops/scatter.cpp, and the formulas over it in python/flow/_scatter.py).

Six float32 workloads, each timed in one run for flow jit, flow eager, torch eager and
torch.compile, next to the memory floor (reading index and source and writing the output once at
the copy bandwidth measured in this run):
  - scatter_add of 2^22 values into 1000 bins (a histogram: one line, so flow runs it serially, as
    torch's CPU kernel does);
  - index_add of 2^20 rows of 64 features into 2^16 rows (a graph network's message sum: 64 lines
    of 2^20 positions, in parallel);
  - scatter_reduce amax over dim 1 of a 4096 x 1024 tensor into 4096 x 64 (4096 lines);
  - embedding_bag of 2^18 indices into 2^14 bags over a 50000 x 128 table, mean and max (one op,
    dsl/ops/embedding_bag.cpp), and sum over 2^14 fixed bags of 16 (a 2-d input: a recommender's
    pooled features).

    PYTHONPATH=python .venv/bin/python bench/scatter.py [--quick] [--no-compile]
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import WORKLOAD_COLUMNS, cpu_bench_start, print_table, workload_rows, write_workloads  # noqa: E402


def main() -> None:
    args, bw = cpu_bench_start("scatter")
    s = 8 if args.quick else 1
    rng = np.random.default_rng(0)

    n_hist, n_edges, n_rows, n_idx, n_bags = (1 << 22) // s, (1 << 20) // s, 4096 // s, (1 << 18) // s, (1 << 14) // s
    workloads = [
        ("scatter_add 2^22 -> 1000 bins",
         lambda m, x, i, v: x.scatter_add(0, i, v),
         [np.zeros(1000, np.float32), rng.integers(0, 1000, n_hist), rng.standard_normal(n_hist).astype(np.float32)],
         lambda a: (a[1].nbytes + a[2].nbytes + a[0].nbytes)),
        ("index_add 2^20 x 64 -> 2^16 rows",
         lambda m, x, i, v: x.index_add(0, i, v),
         [np.zeros((1 << 16, 64), np.float32), rng.integers(0, 1 << 16, n_edges),
          rng.standard_normal((n_edges, 64)).astype(np.float32)],
         lambda a: (a[1].nbytes + a[2].nbytes + 2 * a[0].nbytes)),
        ("scatter_reduce amax 4096 x 1024 -> x 64",
         lambda m, x, i, v: x.scatter_reduce(1, i, v, "amax", include_self=False),
         [np.zeros((n_rows, 64), np.float32), rng.integers(0, 64, (n_rows, 1024)),
          rng.standard_normal((n_rows, 1024)).astype(np.float32)],
         lambda a: (a[1].nbytes + a[2].nbytes + 2 * a[0].nbytes)),
        ("embedding_bag mean 2^18 -> 2^14 bags",
         lambda m, w, i, o: m.nn.functional.embedding_bag(i, w, o, mode="mean"),
         [rng.standard_normal((50000, 128)).astype(np.float32), rng.integers(0, 50000, n_idx),
          np.sort(rng.integers(0, n_idx, n_bags)).astype(np.int64)],
         lambda a: (a[1].nbytes + a[1].size * 128 * 4 + a[2].size * 128 * 4)),
        ("embedding_bag max 2^18 -> 2^14 bags",
         lambda m, w, i, o: m.nn.functional.embedding_bag(i, w, o, mode="max"),
         None, None),
        ("embedding_bag sum 2^14 bags x 16 (2-d)",
         lambda m, w, i: m.nn.functional.embedding_bag(i, w, mode="sum"),
         [rng.standard_normal((50000, 128)).astype(np.float32), rng.integers(0, 50000, (n_bags, 16))],
         lambda a: (a[1].nbytes + a[1].size * 128 * 4 + a[1].shape[0] * 128 * 4)),
    ]
    workloads[3][2][2][0] = 0
    workloads[4] = workloads[4][:2] + workloads[3][2:]  # the mean row's table and bags
    results = workload_rows(workloads, bw, not args.no_compile)
    print_table("scatter family, float32, CPU (median of repeats)", results, WORKLOAD_COLUMNS)
    write_workloads(args.json, bw, results)


if __name__ == "__main__":
    main()
