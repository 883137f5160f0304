"""Whole-model benchmark: ResNet-50 (batch 1 and 8, 3x224x224) and the ViT-B/16 transformer encoder
(12 x TransformerEncoderLayer, d=768, 12 heads; batch 8, seq 128) under flow eager, flow @flow.jit,
torch eager and torch.compile. Not a test.

    PYTHONPATH=python .venv/bin/python bench/models.py [--quick] [--models resnet50_b1,...] [--no-compile]

Every measurement runs in a fresh subprocess (this file with --worker):
- flow, twice per model: first with an empty FLOW_CACHE_DIR (cold: every kernel generated and
  compiled), then with that directory warm (kernels loaded from the disk cache). Each run reports
  the first @flow.jit call (trace + compile + one run) and, from the warm run, the median latency of
  the jitted and the eager forward;
- torch: eager latency, and torch.compile's first call (with a fresh inductor cache dir: cold) and
  its median latency.
Latency is the median of repeats after warm-up; ratios are relative to torch eager. The models come
from tests/models/ (the same files the acceptance tests use). JSON goes to bench/out/models.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

MODELS = {
    "resnet50_b1": {"file": "resnet", "input": (1, 3, 224, 224)},
    "resnet50_b8": {"file": "resnet", "input": (8, 3, 224, 224)},
    "encoder_b8_s128": {"file": "vit", "input": (8, 128, 768)},
}


# ---- worker side --------------------------------------------------------------------------------------


def _build(name, framework):
    """The model of `name` for torch or flow (flow loads the torch twin's weights), and its input."""
    import numpy as np
    import torch

    from models import loader

    spec = MODELS[name]
    torch.manual_seed(0)
    tmod = loader.load(spec["file"], "torch")
    tm = tmod.resnet50() if spec["file"] == "resnet" else tmod.vit_b_16().layers
    tm.eval()
    x = torch.from_numpy(np.random.default_rng(0).standard_normal(spec["input"]).astype(np.float32))
    if framework == "torch":
        return tm, x
    import flow

    fmod = loader.load(spec["file"], "flow")
    fm = fmod.resnet50() if spec["file"] == "resnet" else fmod.vit_b_16().layers
    fm.load_state_dict(tm.state_dict())
    fm.eval()
    return fm, flow.as_tensor(x)


def _median_latency(fn, repeats, warmup, budget):
    for _ in range(warmup):
        fn()
    samples = []
    start = time.perf_counter()
    while len(samples) < repeats and (len(samples) < 2 or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), len(samples)


def _explain_counts(text):
    for line in text.splitlines():
        if line.startswith("== kernels:"):
            # "== kernels: 56 generated, 54 library calls (cpu) =="
            words = line.replace(",", "").split()
            return int(words[2]), int(words[4])
    return None, None


def worker_flow(name, repeats, warmup, budget, latency):
    import flow

    fm, x = _build(name, "flow")
    jm = flow.jit(fm)
    flow.reset_cache_stats()
    t0 = time.perf_counter()
    jm(x)
    first = time.perf_counter() - t0
    stats = flow.cache_stats()
    kernels, libcalls = _explain_counts(jm.explain(with_source=False))
    out = {"first_call_s": first, "compile_s": stats.get("compile_seconds"), "cache": stats,
           "kernels": kernels, "library_calls": libcalls}
    if latency:
        out["jit_s"], out["jit_n"] = _median_latency(lambda: jm(x), repeats, warmup, budget)
        out["eager_s"], out["eager_n"] = _median_latency(lambda: fm(x), repeats, warmup, budget)
    return out


def worker_torch(name, repeats, warmup, budget, compile_):
    import torch

    tm, x = _build(name, "torch")
    out = {"threads": torch.get_num_threads()}
    with torch.no_grad():
        out["eager_s"], out["eager_n"] = _median_latency(lambda: tm(x), repeats, warmup, budget)
        if compile_:
            cm = torch.compile(tm, dynamic=False)
            t0 = time.perf_counter()
            cm(x)
            out["compile_first_call_s"] = time.perf_counter() - t0
            out["compile_s"], out["compile_n"] = _median_latency(lambda: cm(x), repeats, warmup, budget)
    return out


# ---- driver side --------------------------------------------------------------------------------------


def run_worker(args, env_extra, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker"] + args
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    wall = time.perf_counter() - t0
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            r["process_wall_s"] = wall
            return r
    return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]}


def fmt_ms(s):
    return "-" if s is None else f"{s * 1e3:.1f}"


def fmt_ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (3) and a shorter time budget")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "models.json"))
    ap.add_argument("--timeout", type=float, default=900, help="seconds per worker process")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        kind, name, repeats, warmup, budget, flag = a.worker
        repeats, warmup, budget, flag = int(repeats), int(warmup), float(budget), flag == "1"
        r = (worker_flow if kind == "flow" else worker_torch)(name, repeats, warmup, budget, flag)
        print("RESULT " + json.dumps(r))
        return

    from common import git_rev, machine, print_table, write_json

    repeats, warmup, budget = (3, 1, 20.0) if a.quick else (10, 2, 45.0)
    names = [n for n in a.models.split(",") if n]
    for n in names:
        if n not in MODELS:
            ap.error(f"unknown model {n}; choose from {', '.join(MODELS)}")
    results, rows = {}, []
    t_start = time.perf_counter()
    for name in names:
        print(f"[{time.perf_counter() - t_start:6.1f}s] {name}: flow cold ...", flush=True)
        r = {}
        with tempfile.TemporaryDirectory(prefix="flow-cache-") as cache, \
                tempfile.TemporaryDirectory(prefix="inductor-cache-") as inductor:
            env = {"FLOW_CACHE_DIR": cache}
            r["flow_cold"] = run_worker(["flow", name, str(repeats), str(warmup), str(budget), "0"], env, a.timeout)
            print(f"[{time.perf_counter() - t_start:6.1f}s] {name}: flow warm ...", flush=True)
            r["flow_warm"] = run_worker(["flow", name, str(repeats), str(warmup), str(budget), "1"], env, a.timeout)
            print(f"[{time.perf_counter() - t_start:6.1f}s] {name}: torch ...", flush=True)
            r["torch"] = run_worker(["torch", name, str(repeats), str(warmup), str(budget),
                                     "0" if a.no_compile else "1"],
                                    {"TORCHINDUCTOR_CACHE_DIR": inductor}, a.timeout)
        results[name] = r
        fw, tr, fc = r["flow_warm"], r["torch"], r["flow_cold"]
        for part in (fc, fw, tr):
            if "error" in part:
                print(f"  error: {part['error']}")
        rows.append({
            "model": name,
            "flow eager ms": fmt_ms(fw.get("eager_s")),
            "flow jit ms": fmt_ms(fw.get("jit_s")),
            "torch eager ms": fmt_ms(tr.get("eager_s")),
            "torch.compile ms": fmt_ms(tr.get("compile_s")),
            "eager/torch": fmt_ratio(fw.get("eager_s"), tr.get("eager_s")),
            "jit/torch": fmt_ratio(fw.get("jit_s"), tr.get("eager_s")),
            "jit/compile": fmt_ratio(fw.get("jit_s"), tr.get("compile_s")),
            "flow 1st call cold s": "-" if fc.get("first_call_s") is None else f"{fc['first_call_s']:.1f}",
            "flow 1st call warm s": "-" if fw.get("first_call_s") is None else f"{fw['first_call_s']:.1f}",
            "torch.compile 1st call s": ("-" if tr.get("compile_first_call_s") is None
                                         else f"{tr['compile_first_call_s']:.1f}"),
            "kernels+lib": f"{fw.get('kernels')}+{fw.get('library_calls')}",
        })
    columns = list(rows[0]) if rows else []
    print_table(f"models ({machine()}; median latency; ratios vs torch eager / torch.compile; 1st call = "
                "trace + compile + run, cold = empty FLOW_CACHE_DIR)", rows, columns)
    write_json(a.out, {"machine": machine(), "git": git_rev(), "quick": a.quick, "repeats": repeats,
                       "wall_s": time.perf_counter() - t_start, "models": results, "table": rows})


if __name__ == "__main__":
    main()
