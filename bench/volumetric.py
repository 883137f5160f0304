"""Benchmark (not a test): the 3-d convolutions and pools (python/flow/nn/_functional_3d.py) on the
CPU, flow jit and flow eager against torch eager and torch.compile in one run.

conv3d and conv_transpose3d run as oneDNN's 3-d convolution and deconvolution on the CPU; the
column "flow jit composed" times the composition over 2-d ones instead (one 2-d convolution over the
depth-unfolded input, python/flow/nn/_functional_3d.py), jitted, in the same run. The pools are
separable tap kernels. Milliseconds per call (median), the ratios torch / flow jit, and the
convolutions' GFLOP/s under flow jit.

    PYTHONPATH=python .venv/bin/python bench/volumetric.py [--no-compile] [--repeats N]
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import add_time_columns, contender_times, git_rev, machine, print_table, time_fn, write_json  # noqa: E402

import flow  # noqa: E402
import torch  # noqa: E402
from flow.nn import _functional_3d  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", default="bench/out/volumetric.json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    x = normal(2, 32, 8, 28, 28)  # a video clip's feature map: N, C, frames, H, W
    w3, b3 = normal(32, 32, 3, 3, 3) * 0.05, normal(32)
    w133 = normal(64, 32, 1, 3, 3) * 0.05
    wt = normal(32, 16, 2, 2, 2) * 0.05
    conv_flops = 2 * 2 * 32 * 8 * 28 * 28 * 32 * 27
    workloads = [
        ("conv3d 3x3x3 + bias + relu, 32->32", lambda m, a, w, b: m.relu(m.nn.functional.conv3d(a, w, b, padding=1)),
         [x, w3, b3], conv_flops),
        ("conv3d causal pad (1,1,1,1,2,0) + 3x3x3, 32->32",
         lambda m, a, w, b: m.nn.functional.conv3d(m.nn.functional.pad(a, (1, 1, 1, 1, 2, 0)), w, b),
         [x, w3, b3], conv_flops),
        ("conv3d 1x3x3 stride (1,2,2), 32->64", lambda m, a, w: m.nn.functional.conv3d(a, w, stride=(1, 2, 2),
                                                                                          padding=(0, 1, 1)),
         [x, w133], 2 * 2 * 64 * 8 * 14 * 14 * 32 * 9),
        ("conv_transpose3d 2x2x2 stride 2, 32->16", lambda m, a, w: m.nn.functional.conv_transpose3d(a, w, stride=2),
         [x, wt], 2 * 2 * 32 * 8 * 28 * 28 * 16 * 8),
        ("max_pool3d 3 stride 2 pad 1", lambda m, a: m.nn.functional.max_pool3d(a, 3, 2, 1), [x], 0),
        ("avg_pool3d 2", lambda m, a: m.nn.functional.avg_pool3d(a, 2), [x], 0),
        ("adaptive_avg_pool3d (1, 7, 7)", lambda m, a: m.nn.functional.adaptive_avg_pool3d(a, (1, 7, 7)), [x], 0),
    ]
    print(f"machine: {machine()}; threads: flow {flow.get_num_threads()}, torch {torch.get_num_threads()}")
    rows, results = [], []
    for name, fn, arrays, flops in workloads:
        fa = [flow.tensor(a) for a in arrays]
        ta = [torch.from_numpy(a) for a in arrays]
        jitted = flow.jit(lambda *xs, fn=fn: fn(flow, *xs))
        want = fn(torch, *ta)
        err = float(np.abs(jitted(*fa).numpy() - want.numpy()).max() / max(float(want.abs().max()), 1e-30))
        times = contender_times(lambda: jitted(*fa), lambda: fn(flow, *fa), lambda: fn(torch, *ta),
                                lambda *xs: fn(torch, *xs), tuple(ta), not args.no_compile, args.repeats)
        if name.startswith("conv"):  # the composition, traced with the 3-d library ops switched off
            _functional_3d._native_conv = False
            composed = flow.jit(lambda *xs, fn=fn: fn(flow, *xs))
            got = composed(*fa).numpy()
            _functional_3d._native_conv = True
            err = max(err, float(np.abs(got - want.numpy()).max() / max(float(want.abs().max()), 1e-30)))
            times["flow jit composed"] = time_fn(lambda: composed(*fa), repeats=args.repeats)
        row = add_time_columns({"workload": name, "max rel err": f"{err:.1e}"}, times)
        row["flow jit GFLOP/s"] = f"{flops / times['flow jit'] / 1e9:.1f}" if flops else "-"
        rows.append(row)
        results.append({"name": name, "times_s": times, "max_rel_err": err, "flops": flops})
    print_table("milliseconds per call (float32, input [2, 32, 8, 28, 28])", rows,
                ["workload", "flow jit ms", "flow jit composed ms", "flow eager ms", "torch eager ms", "torch.compile ms",
                 "torch/flow jit",
                 "compile/flow jit", "flow jit GFLOP/s", "max rel err"])
    write_json(args.json, {"date": datetime.date.today().isoformat(), "machine": machine(), "git": git_rev(),
                           "workloads": results})


if __name__ == "__main__":
    main()
