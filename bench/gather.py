"""Benchmark (not a test): reads at indices loaded from a tensor, on the CPU. Each of these lowers to
a pointwise kernel whose loads go through dsl CheckIndex (an index out of range raises torch's
message after the kernel; docs/decisions.md "Index checks in compiled code"), followed by a fused
elementwise consumer.

Four float32 workloads, each timed in one run for flow jit, flow eager, torch eager and
torch.compile, next to the memory floor (reading the indices and the rows they name and writing the
output once, at the copy bandwidth measured in this run):
  - index_select of 2^24 positions from a 1000-element table (the table stays in L1), times 2;
  - gather along dim 1 of a 4096 x 1024 tensor, plus 1;
  - embedding of 64 x 512 token ids into a 50000 x 128 table (25.6 MB: rows come from memory), plus 1;
  - advanced indexing x[i] of 2^16 rows of 256 from 2^16 rows, exp.

    PYTHONPATH=python .venv/bin/python bench/gather.py [--quick] [--no-compile]
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import WORKLOAD_COLUMNS, cpu_bench_start, print_table, workload_rows, write_workloads  # noqa: E402


def main() -> None:
    args, bw = cpu_bench_start("gather")
    s = 8 if args.quick else 1
    rng = np.random.default_rng(0)

    n, rows, tokens, picks = (1 << 24) // s, 4096 // s, 512 // s, (1 << 16) // s
    workloads = [
        ("index_select 2^24 from 1000, * 2",
         lambda m, x, i: m.index_select(x, 0, i) * 2,
         [rng.standard_normal(1000).astype(np.float32), rng.integers(0, 1000, n)],
         lambda a: a[1].nbytes + a[1].size * 4),
        ("gather dim 1, 4096 x 1024, + 1",
         lambda m, x, i: m.gather(x, 1, i) + 1,
         [rng.standard_normal((rows, 1024)).astype(np.float32), rng.integers(0, 1024, (rows, 1024))],
         lambda a: a[0].nbytes + a[1].nbytes + a[1].size * 4),
        ("embedding 64 x 512 ids, 50000 x 128, + 1",
         lambda m, w, i: m.nn.functional.embedding(i, w) + 1,
         [rng.standard_normal((50000, 128)).astype(np.float32), rng.integers(0, 50000, (64, tokens))],
         lambda a: a[1].nbytes + 2 * a[1].size * 128 * 4),
        ("x[i]: 2^16 rows of 256, exp",
         lambda m, x, i: x[i].exp(),
         [rng.standard_normal((1 << 16, 256)).astype(np.float32), rng.integers(0, 1 << 16, picks)],
         lambda a: a[1].nbytes + 2 * a[1].size * 256 * 4),
    ]
    results = workload_rows(workloads, bw, not args.no_compile)
    print_table("reads at loaded indices, float32, CPU (median of repeats)", results, WORKLOAD_COLUMNS)
    write_workloads(args.json, bw, results)


if __name__ == "__main__":
    main()
