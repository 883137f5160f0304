"""Benchmark (not a test): sorting on the CPU (flow's argsort library op, dsl/ops/sort.cpp).

Three float32 workloads, each timed in one run for flow jit, flow eager, torch eager, torch.compile
and numpy: topk(5) of 1000 class scores for 4096 images (a classifier's top-5), a full sort of
rows of 4096, and argsort of one 2^22-element line; next to the memory floor (reading the input
and writing the values and int64 indices once, at the copy bandwidth measured in this run), which a
sort cannot reach (it is compute-bound: n log n comparisons), so the ratio to torch is the figure
that matters.

    PYTHONPATH=python .venv/bin/python bench/sort.py [--quick] [--no-compile]
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import (add_time_columns, contender_times, cpu_bench_start, print_table, time_fn,  # noqa: E402
                    write_workloads)

import flow  # noqa: E402
import torch  # noqa: E402


def main() -> None:
    args, bw = cpu_bench_start("sort")
    scale = 8 if args.quick else 1
    rng = np.random.default_rng(0)

    workloads = [
        ("topk 5 of 1000 x 4096", (4096 // scale, 1000), lambda m, x: m.topk(x, 5, dim=1),
         lambda x: np.argpartition(-x, 5, axis=1)[:, :5], 5),
        ("sort rows of 4096 x 1024", (1024 // scale, 4096), lambda m, x: m.sort(x, dim=1),
         lambda x: np.sort(x, axis=1), None),
        ("argsort 2^22", (1 << (22 - (3 if args.quick else 0)),), lambda m, x: m.argsort(x),
         lambda x: np.argsort(x, kind="stable"), None),
    ]
    results = []
    for name, shape, fn, np_fn, k in workloads:
        a = rng.standard_normal(shape).astype(np.float32)
        fx, tx = flow.tensor(a), torch.from_numpy(a)
        f_jit = flow.jit(lambda x, fn=fn: fn(flow, x))
        f_eager = lambda: fn(flow, fx)  # noqa: E731
        got = f_jit(fx)
        got_i = got[1] if isinstance(got, tuple) else got
        # flow's order is a stable sort's (random float32 values do tie at these sizes), so the
        # indices are checked against torch's stable sort, cut to k for topk.
        want_i = torch.sort(tx, dim=-1, descending=k is not None, stable=True).indices
        if k is not None:
            want_i = want_i[:, :k]
        same = bool(np.array_equal(got_i.numpy(), want_i.numpy()))
        times = contender_times(lambda: f_jit(fx), f_eager, lambda: fn(torch, tx), lambda x, fn=fn: fn(torch, x),
                                (tx,), not args.no_compile)
        times["numpy"] = time_fn(lambda: np_fn(a), repeats=3)
        out_elems = a.size if k is None else a.shape[0] * k
        floor = (a.nbytes + out_elems * 12) / bw
        row = add_time_columns({"workload": name, "indices equal torch": same, "floor ms": f"{floor * 1e3:.3f}"},
                               times)
        results.append(row)
    columns = ["workload", "flow jit ms", "flow eager ms", "torch eager ms", "torch.compile ms", "numpy ms",
               "floor ms", "torch/flow jit", "compile/flow jit", "indices equal torch"]
    print_table("sorting, float32, CPU (median of repeats)", results, columns)
    write_workloads(args.json, bw, results)


if __name__ == "__main__":
    main()
