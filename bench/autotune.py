"""Benchmark (not a test): what autotuning buys on this CPU, and how fast a shipped model starts.

1. Default heuristics against tuned Params for the pointwise chain, softmax and row-norm kernels of
   bench/pointwise.py (2^24 float32), and for ResNet-50 at batch 1 end to end: per-kernel and
   whole-model speedup, and the tuning time spent. Default and tuned variants are timed side by side
   in the same process, interleaved, after tuning.
2. Time to first output of ResNet-50 (batch 1) in a fresh process: from a cold kernel cache (build
   the model, compile, run), from a warm cache, and from a bundle written by flow.save (load weights
   and kernels, run) with an empty user cache.

    PYTHONPATH=python .venv/bin/python bench/autotune.py [--quick] [--model-budget 300]
    ... bench/autotune.py --device cuda --micro-only   # the GPU version (tools/gpu_check.sh runs it)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from common import git_rev, machine, print_table, time_fn, write_json  # noqa: E402

import flow  # noqa: E402
from flow.autotune import tune_model  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
N = 1 << 24
ROWS, COLS = 4096, 4096


def chain(x, a, b):
    return flow.relu(x * a + b) * flow.sigmoid(x) + 1.0


def softmax(x):
    return flow.softmax(x, dim=-1)


def rownorm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(-1, keepdim=True)
    return d * flow.rsqrt(var + 1e-5) * w + b


def side_by_side(default, tuned, inputs, repeats):
    """Median seconds of each, measured in alternating rounds (drift hits both alike); device work
    is synchronized inside each timed call."""
    sync = flow.cuda.synchronize if any(getattr(x, "is_cuda", False) for x in inputs) else (lambda: None)
    d, t = [], []
    for _ in range(3):
        d.append(time_fn(lambda: (default(*inputs), sync()), repeats=repeats, warmup=1))
        t.append(time_fn(lambda: (tuned(*inputs), sync()), repeats=repeats, warmup=1))
    return sorted(d)[1], sorted(t)[1]


def kernel_rows(results, limit=None):
    rows = []
    for r in sorted(results, key=lambda r: -(r["default_us"] - r["best_us"]) * r["uses"])[:limit]:
        rows.append({"kernel": r["name"][:44], "uses": r["uses"], "default us": f"{r['default_us']:.1f}",
                     "tuned us": f"{r['best_us']:.1f}",
                     "speedup": f"{r['default_us'] / r['best_us']:.2f}x" if r["best_us"] else "-",
                     "tried": r["candidates"], "params": r["best_params"].replace('"', "")[:80]})
    return rows


def micro(args, workdir):
    flow.manual_seed(0)
    dev = (lambda t: t.cuda()) if args.device == "cuda" else (lambda t: t)
    work = {
        "chain": (chain, [dev(flow.randn(N)), dev(flow.randn(N)), dev(flow.randn(N))]),
        "softmax": (softmax, [dev(flow.randn(ROWS, COLS))]),
        "rownorm": (rownorm, [dev(flow.randn(ROWS, COLS)), dev(flow.randn(COLS)), dev(flow.randn(COLS))]),
    }
    out = []
    for name, (fn, inputs) in work.items():
        default = flow.jit(fn)
        res = tune_model(flow.jit(fn, tuning=os.path.join(workdir, name)), inputs, os.path.join(workdir, name),
                         budget=args.micro_budget, seed=1)
        td, tt = side_by_side(default, res.compiled, inputs, args.repeats)
        print_table(f"{name}: per kernel", kernel_rows(res.results),
                    ["kernel", "uses", "default us", "tuned us", "speedup", "tried", "params"])
        out.append({"workload": name, "default ms": f"{td * 1e3:.2f}", "tuned ms": f"{tt * 1e3:.2f}",
                    "speedup": f"{td / tt:.2f}x", "tuning s": f"{res.seconds:.1f}",
                    "kernels": len(res.results), "default_s": td, "tuned_s": tt, "tuning_s": res.seconds,
                    "per_kernel": res.results})
    return out


def resnet(args, workdir):
    from models import loader

    flow.manual_seed(0)
    model = loader.load("resnet", "flow").resnet50().eval()
    x = flow.randn(1, 3, 224, 224)
    default = flow.jit(model)
    tuned = flow.jit(model, tuning=os.path.join(workdir, "resnet50"))
    res = tune_model(tuned, [x], os.path.join(workdir, "resnet50"), budget=args.model_budget, seed=1)
    td, tt = side_by_side(default, res.compiled, [x], max(3, args.repeats // 3))
    print_table("ResNet-50 b1: the 15 kernels tuning helped most", kernel_rows(res.results, 15),
                ["kernel", "uses", "default us", "tuned us", "speedup", "tried", "params"])
    bundle = os.path.join(workdir, "resnet50_bundle")
    flow.save(res.compiled, bundle)
    row = {"workload": "resnet50 b1", "default ms": f"{td * 1e3:.2f}", "tuned ms": f"{tt * 1e3:.2f}",
           "speedup": f"{td / tt:.2f}x", "tuning s": f"{res.seconds:.1f}", "kernels": len(res.results),
           "default_s": td, "tuned_s": tt, "tuning_s": res.seconds, "per_kernel": res.results}
    return row, bundle


FIRST_OUTPUT = r"""
import time, json, sys
t0 = time.perf_counter()
import flow
t_import = time.perf_counter() - t0
sys.path.insert(0, {tests!r})
if {bundle!r}:
    m = flow.load({bundle!r})
    t_model = time.perf_counter() - t0
    compiled = lambda: m.num_compiled
else:
    from models import loader
    flow.manual_seed(0)
    model = loader.load("resnet", "flow").resnet50().eval()
    m = flow.jit(model)
    t_model = time.perf_counter() - t0
    compiled = lambda: m.num_compiled
x = flow.randn(1, 3, 224, 224)
y = m(x)
y.numpy()  # a host copy: the output is complete (no eager kernels, which would compile)
t = time.perf_counter() - t0
print(json.dumps({{"first_output_s": t, "import_s": t_import, "model_s": t_model - t_import,
                  "compile_and_run_s": t - t_model, "compiled": compiled(), "stats": flow.cache_stats()}}))
"""


def first_output(cache_dir, bundle=""):
    env = dict(os.environ, FLOW_CACHE_DIR=cache_dir, PYTHONPATH=os.path.join(REPO, "python"))
    env.pop("FLOW_TUNING", None)
    script = FIRST_OUTPUT.format(tests=os.path.join(REPO, "tests"), bundle=bundle)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small budgets (a smoke run)")
    p.add_argument("--micro-budget", type=float, default=40.0)
    p.add_argument("--model-budget", type=float, default=300.0)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--micro-only", action="store_true", help="only the three kernels (no ResNet-50, no start-up)")
    p.add_argument("--json", default=None, help="default: bench/results/autotune-<device>.json ($OUT/ on a GPU run)")
    args = p.parse_args()
    if args.json is None:
        base = os.environ.get("OUT") if args.device == "cuda" and os.environ.get("OUT") else \
            os.path.join(REPO, "bench", "results")
        args.json = os.path.join(base, f"autotune-{args.device}.json")
    if args.quick:
        args.micro_budget, args.model_budget, args.repeats = 5.0, 30.0, 3
    print(f"flow autotune benchmark  {datetime.date.today()}  {machine()}  git {git_rev()}")
    with tempfile.TemporaryDirectory(prefix="flow-autotune-bench-") as work:
        rows = micro(args, work)
        if args.micro_only:
            print_table(f"Default heuristics vs tuned Params ({args.device})", rows,
                        ["workload", "kernels", "default ms", "tuned ms", "speedup", "tuning s"])
            write_json(args.json, {"date": str(datetime.date.today()), "machine": machine(), "git": git_rev(),
                                   "device": args.device, "args": vars(args), "tuning": rows})
            return
        rn, bundle = resnet(args, work)
        rows.append(rn)
        print_table("Default heuristics vs tuned Params (same process, interleaved timing)", rows,
                    ["workload", "kernels", "default ms", "tuned ms", "speedup", "tuning s"])
        cold_dir = os.path.join(work, "cache_cold")
        starts = [("cold cache", first_output(cold_dir)), ("warm cache", first_output(cold_dir)),
                  ("shipped bundle", first_output(os.path.join(work, "cache_empty"), bundle))]
        start_rows = [{"start": name, "first output s": f"{s['first_output_s']:.2f}",
                       "import s": f"{s['import_s']:.2f}", "model/load s": f"{s['model_s']:.2f}",
                       "compile+run s": f"{s['compile_and_run_s']:.2f}", "kernels compiled": s["compiled"],
                       "cache misses": s["stats"]["misses"], "read-only hits": s["stats"]["readonly_hits"]}
                      for name, s in starts]
        print_table("ResNet-50 b1: time to first output in a fresh process", start_rows,
                    ["start", "first output s", "import s", "model/load s", "compile+run s", "kernels compiled",
                     "cache misses", "read-only hits"])
    write_json(args.json, {"date": str(datetime.date.today()), "machine": machine(), "git": git_rev(),
                           "args": vars(args), "tuning": rows, "first_output": dict(starts)})


if __name__ == "__main__":
    main()
