"""Benchmark (not a test): means and variances of rows (dsl/ops/moments.h, the corrected two-pass
algorithm; scheduler/reduction_parts.h, reductions sharing a pass over the row), on the CPU.

Accuracy: var and layer_norm of rows far from 0 (and of N(0, 1) rows), flow's and torch's float32
results against float64, as the largest absolute error (layer_norm: of values ~N(0, 1)) and the
largest relative one (var). Speed: layer_norm, var over rows and over columns, group_norm and
batch_norm (training) in float32, each timed in one run for flow jit, flow eager, torch eager and
torch.compile, next to the memory floor (reading the input once and writing the output once, at the
copy bandwidth measured in this run).

    PYTHONPATH=python .venv/bin/python bench/moments.py [--quick] [--no-compile]
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import (WORKLOAD_COLUMNS, cpu_bench_start, normal_float32, print_table, read_once,  # noqa: E402
                    workload_rows, write_workloads)


def accuracy_rows(rows: int, cols: int) -> list[dict]:
    import flow
    import torch

    F, TF = flow.nn.functional, torch.nn.functional
    rng = np.random.default_rng(2)
    out = []
    for name, x in (("constant 1000.1", np.full((rows, cols), 1000.1, dtype=np.float32)),
                    ("1000 + 0.01 N(0, 1)", (1000 + 0.01 * rng.standard_normal((rows, cols))).astype(np.float32)),
                    ("1e4 + U(0, 1)", (1e4 + rng.random((rows, cols))).astype(np.float32)),
                    ("N(0, 1)", rng.standard_normal((rows, cols)).astype(np.float32))):
        xd = torch.from_numpy(x).double()
        ln_ref, var_ref = TF.layer_norm(xd, (cols,)).numpy(), xd.var(1).numpy()
        fx, tx = flow.tensor(x), torch.from_numpy(x)

        def rel(v):
            return float((np.abs(v - var_ref) / np.maximum(var_ref, 1e-30)).max())

        out.append({"rows": f"{name}, {rows} x {cols}",
                    "layer_norm flow": f"{np.abs(F.layer_norm(fx, (cols,)).numpy() - ln_ref).max():.1e}",
                    "layer_norm torch": f"{np.abs(TF.layer_norm(tx, (cols,)).numpy() - ln_ref).max():.1e}",
                    "var flow (rel.)": f"{rel(flow.var(fx, 1).numpy()):.1e}",
                    "var torch (rel.)": f"{rel(tx.var(1).numpy()):.1e}"})
    return out


def main() -> None:
    args, bw = cpu_bench_start("moments")
    s = 8 if args.quick else 1
    normal = normal_float32()
    in_out = lambda a: 2 * a[0].nbytes  # noqa: E731
    workloads = [
        ("layer_norm [8192, 768]", lambda m, x, w, b: m.nn.functional.layer_norm(x, (768,), w, b),
         [normal(8192 // s, 768), normal(768), normal(768)], in_out),
        ("var(-1) [8192, 768]", lambda m, x: x.var(-1), [normal(8192 // s, 768)], read_once),
        ("var(0) [65536, 64]", lambda m, x: x.var(0), [normal(65536 // s, 64)], read_once),
        ("group_norm(32) [16, 256, 32, 32]", lambda m, x: m.nn.functional.group_norm(x, 32),
         [normal(16 // s, 256, 32, 32)], in_out),
        ("batch_norm training [16, 64, 56, 56]",
         lambda m, x: m.nn.functional.batch_norm(x, None, None, training=True), [normal(16 // s, 64, 56, 56)], in_out),
    ]
    results = workload_rows(workloads, bw, not args.no_compile)
    print_table("means and variances, float32, CPU (median of repeats)", results, WORKLOAD_COLUMNS)
    acc = accuracy_rows(8, 4096)
    print_table("accuracy against float64: layer_norm max abs error, var max relative error", acc,
                ["rows", "layer_norm flow", "layer_norm torch", "var flow (rel.)", "var torch (rel.)"])
    write_workloads(args.json, bw, results + acc)


if __name__ == "__main__":
    main()
