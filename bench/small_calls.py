"""Benchmark (not a test): the latency of small calls on the CPU, where a call's fixed costs (Python,
argument checks, waking threads) outweigh its arithmetic.

Five workloads on a few thousand elements or fewer -- a fused row reduction (64 x 16), a 6-op
pointwise chain (1024), softmax (8 x 64), layer norm (16 x 128) and a column sum (256 x 8) -- each
timed as flow jit, flow eager, torch eager and torch.compile in one run: microseconds per call, the
median of `--repeats` samples of 200 calls each. The thread count is the default (all cores);
`FLOW_NUM_THREADS=1` shows the same work without a thread team.

    PYTHONPATH=python .venv/bin/python bench/small_calls.py [--no-compile] [--repeats N]
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import git_rev, machine, print_table, time_fn, write_json  # noqa: E402

import flow  # noqa: E402
import torch  # noqa: E402

CALLS = 200  # calls per sample


def row_sum(m, a, b):
    return (a * b + 1).relu().sum(-1)


def chain(m, x, a, b):
    return m.relu(x * a + b) * m.sigmoid(x) + 1.0


def softmax(m, x):
    return m.softmax(x, dim=-1)


def layer_norm(m, x, w, b):
    return m.nn.functional.layer_norm(x, (x.shape[-1],), w, b)


def column_sum(m, x):
    return (x * x).sum(0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--json", default="bench/out/small_calls.json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    workloads = [
        ("row sum of relu(a*b+1), 64 x 16", row_sum, [normal(64, 16), normal(64, 16)]),
        ("6-op chain, 1024", chain, [normal(1024), normal(1024), normal(1024)]),
        ("softmax, 8 x 64", softmax, [normal(8, 64)]),
        ("layer_norm, 16 x 128", layer_norm, [normal(16, 128), normal(128), normal(128)]),
        ("column sum of x*x, 256 x 8", column_sum, [normal(256, 8)]),
    ]
    print(f"machine: {machine()}; threads: flow {flow.get_num_threads()}, torch {torch.get_num_threads()}")

    def per_call(fn):
        def many():
            for _ in range(CALLS):
                fn()
        return time_fn(many, repeats=args.repeats) / CALLS

    rows, results = [], []
    for name, fn, arrays in workloads:
        fa = [flow.tensor(a) for a in arrays]
        ta = [torch.from_numpy(a) for a in arrays]
        jitted = flow.jit(lambda *xs, fn=fn: fn(flow, *xs))
        err = float(np.abs(jitted(*fa).numpy() - fn(torch, *ta).numpy()).max())
        times = {"flow jit": per_call(lambda: jitted(*fa)), "flow eager": per_call(lambda: fn(flow, *fa)),
                 "torch eager": per_call(lambda: fn(torch, *ta))}
        if not args.no_compile:
            compiled = torch.compile(lambda *xs, fn=fn: fn(torch, *xs))
            compiled(*ta)
            times["torch.compile"] = per_call(lambda: compiled(*ta))
        row = {"workload": name, "max |flow - torch|": f"{err:.1e}"}
        for k, v in times.items():
            row[f"{k} us"] = f"{v * 1e6:.1f}"
        row["torch eager/jit"] = f"{times['torch eager'] / times['flow jit']:.2f}x"
        if "torch.compile" in times:
            row["torch.compile/jit"] = f"{times['torch.compile'] / times['flow jit']:.2f}x"
        rows.append(row)
        results.append({"name": name, "times_s": times, "max_err": err})

    print_table("microseconds per call (float32)", rows,
                ["workload", "flow jit us", "flow eager us", "torch eager us", "torch.compile us", "torch eager/jit",
                 "torch.compile/jit", "max |flow - torch|"])
    write_json(args.json, {"date": datetime.date.today().isoformat(), "machine": machine(), "git": git_rev(),
                           "flow_threads": flow.get_num_threads(), "workloads": results})


if __name__ == "__main__":
    main()
