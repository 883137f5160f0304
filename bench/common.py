"""Shared benchmark helpers: timing (warm-up, repeats, median), copy bandwidth, tables and JSON."""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time
from typing import Callable


def time_fn(fn: Callable[[], object], repeats: int = 15, warmup: int = 3, min_time: float = 0.0) -> float:
    """Median wall time of fn() in seconds."""
    for _ in range(warmup):
        fn()
    samples = []
    start = time.perf_counter()
    while len(samples) < repeats or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def copy_bandwidth(nbytes: int) -> float:
    """Bytes per second of the fastest plain copy we can measure here (torch's threaded copy_,
    numpy's copyto); the floor of a memory-bound kernel is bytes moved / this."""
    import numpy as np
    import torch

    n = nbytes // 4
    src = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    dst = np.empty_like(src)
    t_np = time_fn(lambda: np.copyto(dst, src), repeats=10)
    ts, td = torch.from_numpy(src), torch.empty(n, dtype=torch.float32)
    t_torch = time_fn(lambda: td.copy_(ts), repeats=10)
    return 2 * nbytes / min(t_np, t_torch)  # a copy reads and writes nbytes


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def print_table(title: str, rows: list[dict], columns: list[str]) -> None:
    print(f"\n{title}")
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))


def write_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
    print(f"\nwrote {path}")


def git_rev() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def contender_times(flow_jit: Callable[[], object], flow_eager: Callable[[], object],
                    torch_eager: Callable[[], object], torch_fn: Callable[..., object], torch_args: tuple,
                    compile_too: bool, repeats: int = 7) -> dict[str, float]:
    """Seconds per call of flow jit, flow eager, torch eager and (compile_too) torch.compile of
    torch_fn over torch_args, timed in one run; torch.compile failing is reported, not fatal."""
    times = {"flow jit": time_fn(flow_jit, repeats=repeats), "flow eager": time_fn(flow_eager, repeats=repeats),
             "torch eager": time_fn(torch_eager, repeats=repeats)}
    if compile_too:
        import torch

        try:
            compiled = torch.compile(torch_fn)
            compiled(*torch_args)
            times["torch.compile"] = time_fn(lambda: compiled(*torch_args), repeats=repeats)
        except Exception as e:  # noqa: BLE001
            print("torch.compile failed:", e)
    return times


def add_time_columns(row: dict, times: dict[str, float]) -> dict:
    """row with "<contender> ms" columns and the ratios torch eager / flow jit, torch.compile / flow jit."""
    for label, t in times.items():
        row[f"{label} ms"] = f"{t * 1e3:.3f}"
    row["torch/flow jit"] = f"{times['torch eager'] / times['flow jit']:.2f}"
    if "torch.compile" in times:
        row["compile/flow jit"] = f"{times['torch.compile'] / times['flow jit']:.2f}"
    return row


# The columns of a workload table built by workload_rows.
WORKLOAD_COLUMNS = ["workload", "flow jit ms", "flow eager ms", "torch eager ms", "torch.compile ms", "floor ms",
                    "torch/flow jit", "compile/flow jit", "max |flow - torch|"]


def workload_rows(workloads: list, bandwidth: float, compile_too: bool) -> list[dict]:
    """One table row per (name, fn(lib, *tensors), numpy arrays, floor_bytes(arrays)) workload: fn run
    as flow jit, flow eager, torch eager and torch.compile on the same arrays in one run, flow's
    result compared with torch's, and the memory floor (floor_bytes at `bandwidth` bytes/s)."""
    import flow
    import numpy as np
    import torch

    rows = []
    for name, fn, arrays, floor_bytes in workloads:
        fa = [flow.tensor(a) for a in arrays]
        ta = [torch.from_numpy(a) for a in arrays]
        f_jit = flow.jit(lambda *xs, fn=fn: fn(flow, *xs))
        got = f_jit(*fa)
        want = fn(torch, *ta)
        err = float(np.abs(got.numpy() - want.numpy()).max()) if want.numel() else 0.0
        times = contender_times(lambda: f_jit(*fa), lambda: fn(flow, *fa), lambda: fn(torch, *ta),
                                lambda *xs, fn=fn: fn(torch, *xs), ta, compile_too)
        floor = floor_bytes(arrays) / bandwidth
        rows.append(add_time_columns({"workload": name, "max |flow - torch|": f"{err:.2e}",
                                      "floor ms": f"{floor * 1e3:.3f}"}, times))
    return rows


def cpu_bench_start(name: str, quick_help: str = "smaller sizes (smoke run)"):
    """A CPU benchmark's command line (--quick, --no-compile, --json bench/out/<name>.json) and the
    copy bandwidth measured now (bytes/s), printed with the machine: (args, bandwidth)."""
    import argparse

    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--json", default=f"bench/out/{name}.json")
    args = ap.parse_args()
    bw = copy_bandwidth(1 << 24)
    print(f"machine: {machine()}; threads: torch {torch.get_num_threads()}; copy bandwidth {bw / 1e9:.2f} GB/s")
    return args, bw


def normal_float32(seed: int = 0) -> Callable[..., object]:
    """normal(*shape): standard normal float32 numpy arrays, all drawn from one generator."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return lambda *shape: rng.standard_normal(shape).astype(np.float32)


def read_once(arrays: list) -> int:
    """A workload's floor bytes when it reads its first array once (and writes little)."""
    return arrays[0].nbytes


def write_workloads(path: str, bandwidth: float, rows: list[dict]) -> None:
    """The JSON of a run: date, revision, machine, the copy bandwidth (GB/s) and the rows."""
    import datetime

    write_json(path, {"date": datetime.date.today().isoformat(), "rev": git_rev(), "machine": machine(),
                      "copy_bandwidth_gbs": bandwidth / 1e9, "workloads": rows})
