"""Benchmark (not a test): fused pointwise and row-normalization kernels on the CPU.

Seven workloads at 2^24 elements -- the 6-op chain relu(x*a+b)*sigmoid(x)+1, softmax over rows of
4096, a layer-norm-like row normalization (float32), where(m, x, y) (a bool mask picking between
two float32 tensors), |x| * 2 through the bits (x.view(int32) & mask, viewed back), ResNet's max
pool (3x3, stride 2, padding 1) and DenseNet's average pool
(2x2) of a channels-last [N, 64, 128, 128] float32 input -- each timed in one run for flow jit, flow
eager, torch eager, torch.compile and numpy, next to the memory floor (bytes that must move divided
by the copy bandwidth measured in this run). Then the chain's cold compile time and warm
(disk-cache) start time, each in a fresh process.

    make bench            # or: PYTHONPATH=python .venv/bin/python bench/pointwise.py [--quick]
"""
from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import copy_bandwidth, git_rev, machine, print_table, time_fn, write_json  # noqa: E402

import flow  # noqa: E402
import torch  # noqa: E402

ROWS_COLS = (4096, 4096)


def chain(m):
    def f(x, a, b):
        return m.relu(x * a + b) * m.sigmoid(x) + 1.0
    return f


def softmax(m):
    def f(x):
        return m.softmax(x, dim=-1)
    return f


def rownorm(m):
    def f(x, w, b):
        mu = x.mean(-1, keepdim=True)
        d = x - mu
        var = (d * d).mean(-1, keepdim=True)
        return d * m.rsqrt(var + 1e-5) * w + b
    return f


def select(m):
    def f(c, x, y):
        return m.where(c, x, y)
    return f


def bits(m):
    def f(x):  # |x| * 2 through the bits: Tensor.view(dtype) traced as a bit cast
        return (x.view(m.int32) & 0x7FFFFFFF).view(m.float32) * 2
    return f


def max_pool(m):
    def f(x_nhwc):  # the input as a CNN holds it after a convolution: channels-last
        return m.nn.functional.max_pool2d(x_nhwc.permute(0, 3, 1, 2), 3, 2, 1)
    return f


def avg_pool(m):
    def f(x_nhwc):  # DenseNet's transition pool, on a convolution's channels-last output
        return m.nn.functional.avg_pool2d(x_nhwc.permute(0, 3, 1, 2), 2)
    return f


def np_avg_pool(x_nhwc):
    n, h, w, c = x_nhwc.shape
    win = x_nhwc[:, :h // 2 * 2, :w // 2 * 2].reshape(n, h // 2, 2, w // 2, 2, c)
    return (win.sum(axis=(2, 4), dtype=np.float32) / np.float32(4)).transpose(0, 3, 1, 2)


def np_max_pool(x_nhwc):
    n, h, w, c = x_nhwc.shape
    xp = np.pad(x_nhwc, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    oh, ow = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    out = np.full((n, oh, ow, c), -np.inf, dtype=x_nhwc.dtype)
    for i in range(3):
        for j in range(3):
            out = np.maximum(out, xp[:, i:i + 2 * oh - 1:2, j:j + 2 * ow - 1:2, :])
    return out.transpose(0, 3, 1, 2)


def np_select(c, x, y):
    return np.where(c, x, y)


def np_bits(x):
    return np.abs(x) * 2


def np_chain(x, a, b):
    return np.maximum(x * a + b, 0) * (1 / (1 + np.exp(-x))) + 1.0


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_rownorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * w + b


COLD_SCRIPT = r"""
import time, sys, numpy as np
t0 = time.perf_counter()
import flow
t_import = time.perf_counter() - t0
x = flow.tensor(np.ones(1 << 24, np.float32)); a = flow.tensor(np.ones(1 << 24, np.float32)); b = flow.tensor(np.ones(1 << 24, np.float32))
@flow.jit
def f(x, a, b):
    return flow.relu(x * a + b) * flow.sigmoid(x) + 1.0
# Touch one output-sized block and free it, so the first call's output reuses warm pages (as the
# steady call's does) and first - run is the start-up work alone, not the page faults of 64 MB.
w = flow.empty(1 << 24); w._c.numpy_view()[:] = 0; del w
t0 = time.perf_counter(); f(x, a, b); first = time.perf_counter() - t0
t0 = time.perf_counter(); f(x, a, b); run = time.perf_counter() - t0
s = flow.cache_stats()
print(f"{first} {run} {s['compile_seconds']} {s['misses']} {s['disk_hits']} {t_import}")
"""


def cold_warm(env_extra: dict) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, FLOW_CACHE_DIR=cache, **env_extra)
        out = {}
        for label in ("cold", "warm"):
            res = subprocess.run([sys.executable, "-c", COLD_SCRIPT], env=env, capture_output=True, text=True, check=True)
            first, run, compile_s, misses, disk_hits, t_import = map(float, res.stdout.split())
            out[label] = {"first_call_s": first, "run_s": run, "start_overhead_s": max(0.0, first - run),
                          "compile_s": compile_s, "misses": int(misses), "disk_hits": int(disk_hits),
                          "import_s": t_import}
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats (smoke run)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--json", default="bench/out/pointwise.json")
    args = ap.parse_args()

    n = 1 << (20 if args.quick else 24)
    rows, cols = (n // 4096, 4096)
    rng = np.random.default_rng(0)
    bw = copy_bandwidth(n * 4)
    print(f"machine: {machine()}; threads: torch {torch.get_num_threads()}; copy bandwidth {bw / 1e9:.2f} GB/s")

    x1 = rng.standard_normal(n).astype(np.float32)
    a1 = rng.standard_normal(n).astype(np.float32)
    b1 = rng.standard_normal(n).astype(np.float32)
    x2 = rng.standard_normal((rows, cols)).astype(np.float32)
    w2 = rng.standard_normal(cols).astype(np.float32)
    c2 = rng.standard_normal(cols).astype(np.float32)

    x4 = rng.standard_normal((n // (128 * 128 * 64), 128, 128, 64)).astype(np.float32)
    workloads = [
        ("chain (6 ops)", chain, np_chain, (x1, a1, b1), 4 * n * 4),
        ("softmax rows 4096", softmax, np_softmax, (x2,), 2 * n * 4),
        ("row norm 4096", rownorm, np_rownorm, (x2, w2, c2), 2 * n * 4),
        ("where(m, x, y)", select, np_select, (x1 > 0, a1, b1), n * (1 + 3 * 4)),
        ("bits: view(int32) & mask", bits, np_bits, (x1,), 2 * n * 4),
        ("max_pool 3x3/2 NHWC", max_pool, np_max_pool, (x4,), n * 4 + n // 4 * 4),
        ("avg_pool 2x2 NHWC", avg_pool, np_avg_pool, (x4,), n * 4 + n // 4 * 4),
    ]
    results = []
    for name, make, np_fn, arrays, nbytes in workloads:
        fl = [flow.tensor(a) for a in arrays]
        th = [torch.from_numpy(a) for a in arrays]
        f_jit = flow.jit(make(flow))
        f_eager = make(flow)
        t_eager = make(torch)
        ref = np_fn(*arrays)
        got = f_jit(*fl).numpy()
        err = float(np.max(np.abs(got - ref)))
        times = {
            "flow jit": time_fn(lambda: f_jit(*fl)),
            "flow eager": time_fn(lambda: f_eager(*fl), repeats=5),
            "torch eager": time_fn(lambda: t_eager(*th)),
            "numpy": time_fn(lambda: np_fn(*arrays), repeats=5),
        }
        if not args.no_compile:
            t_comp = torch.compile(make(torch))
            t_comp(*th)
            times["torch.compile"] = time_fn(lambda: t_comp(*th))
        floor = nbytes / bw
        row = {"workload": name, "floor_ms": f"{floor * 1e3:.2f}", "max_err_vs_numpy": f"{err:.1e}"}
        for k, v in times.items():
            row[k + " ms"] = f"{v * 1e3:.2f}"
        row["jit/floor"] = f"{times['flow jit'] / floor:.2f}x"
        row["torch eager/jit"] = f"{times['torch eager'] / times['flow jit']:.2f}x"
        if "torch.compile" in times:
            row["torch.compile/jit"] = f"{times['torch.compile'] / times['flow jit']:.2f}x"
        results.append({"name": name, "bytes": nbytes, "floor_s": floor, "times_s": times, "max_err": err, "row": row})

    cols_out = ["workload", "flow jit ms", "flow eager ms", "torch eager ms", "torch.compile ms", "numpy ms",
                "floor_ms", "jit/floor", "torch eager/jit", "torch.compile/jit", "max_err_vs_numpy"]
    print_table(f"float32, {n} elements", [r["row"] for r in results], cols_out)

    cw = cold_warm({})
    print_table("chain start-up in a fresh process (first call minus a steady call)",
                [{"cache": k, "start overhead ms": f"{v['start_overhead_s'] * 1e3:.1f}",
                  "compile ms (counter)": f"{v['compile_s'] * 1e3:.1f}", "misses": v["misses"],
                  "disk hits": v["disk_hits"], "import flow ms": f"{v['import_s'] * 1e3:.1f}"} for k, v in cw.items()],
                ["cache", "start overhead ms", "compile ms (counter)", "misses", "disk hits", "import flow ms"])

    write_json(args.json, {
        "date": datetime.date.today().isoformat(), "machine": machine(), "git": git_rev(), "elements": n,
        "copy_bandwidth_Bps": bw,
        "workloads": [{k: v for k, v in r.items() if k != "row"} for r in results],
        "startup": cw,
    })


if __name__ == "__main__":
    main()
