"""Whole-model benchmark: ResNet-50 (batch 1 and 8, 3x224x224), the ViT-B/16 transformer encoder
(12 x TransformerEncoderLayer, d=768, 12 heads; batch 8, seq 128), and MobileNetV3-Large,
EfficientNet-B0, ConvNeXt-T, DenseNet-121 and a ShuffleNetV2 (batch 1, 3x224x224) and a small U-Net
(3x256x256) under flow eager, flow @flow.jit, torch eager and torch.compile. Not a test.

    PYTHONPATH=python .venv/bin/python bench/models.py [--quick] [--models resnet50_b1,...] [--no-compile]

Per model, three fresh processes (this file with --worker):
- flow cold: an empty FLOW_CACHE_DIR; reports the first @flow.jit call (trace + compile + one run);
- flow warm: the same directory, now warm; reports the first call again (kernels from the disk cache);
- latency, side by side: flow jit (warm cache), flow eager, torch eager and torch.compile (a fresh
  inductor cache: its first call is reported too) are built in one process and timed in
  interleaved rounds, one call of each per round, in an order that rotates every round. The VM's
  speed drifts 10-20% from minute to minute; interleaving exposes every contender to the same
  drift, where back-to-back processes measured minutes apart did not (the same build measured
  0.97x-1.11x torch eager in separate processes). flow and torch share one OpenMP runtime in that
  process (torch's libgomp.so.1 is loaded first and satisfies flow's), so neither has a second
  team spinning against it.
Latency is the median over rounds after warm-up; each ratio is the median over rounds of that
round's ratio. The models come from tests/models/ (the same files the acceptance tests use). JSON
goes to bench/out/models.json.
"""
import argparse
import contextlib
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
    "resnet50_b1": {"file": "resnet", "factory": "resnet50", "input": (1, 3, 224, 224)},
    "resnet50_b8": {"file": "resnet", "factory": "resnet50", "input": (8, 3, 224, 224)},
    "encoder_b8_s128": {"file": "vit", "factory": "vit_b_16", "part": "layers", "input": (8, 128, 768)},
    # Mixed precision: flow.jit(amp="bfloat16") against torch.autocast("cpu", bfloat16) with
    # channels_last (torch's fastest CPU bf16 ResNet); flow eager runs inside flow.autocast.
    "resnet50_b1_bf16": {"file": "resnet", "factory": "resnet50", "input": (1, 3, 224, 224), "amp": "bfloat16"},
    "encoder_b8_s128_bf16": {"file": "vit", "factory": "vit_b_16", "part": "layers", "input": (8, 128, 768),
                             "amp": "bfloat16"},
    # More image classifiers (tests/models/): depthwise convolutions and squeeze-and-excitation,
    # channels-last LayerNorm between permutes, DenseNet's growing concatenations.
    "mobilenet_v3_b1": {"file": "mobilenet", "factory": "mobilenet_v3_large", "input": (1, 3, 224, 224)},
    "efficientnet_b0_b1": {"file": "efficientnet", "factory": "efficientnet_b0", "input": (1, 3, 224, 224)},
    "convnext_tiny_b1": {"file": "convnext", "factory": "convnext_tiny", "input": (1, 3, 224, 224)},
    "densenet121_b1": {"file": "densenet", "factory": "densenet121", "input": (1, 3, 224, 224)},
    # Segmentation: GroupNorm, a transposed convolution, upsampling, skip concatenations, SPPF.
    "unet_b1_256": {"file": "unet", "factory": "unet", "input": (1, 3, 256, 256)},
    "shufflenet_v2_b1": {"file": "shufflenet", "factory": "shufflenet_v2", "input": (1, 3, 224, 224)},
}


def _make(module, spec):
    m = getattr(module, spec["factory"])()
    return getattr(m, spec["part"]) if "part" in spec else m


# ---- worker side --------------------------------------------------------------------------------------


def _build(name, framework):
    """The model of `name` for torch or flow (flow loads the torch twin's weights), and its input."""
    import numpy as np
    import torch

    from models import loader

    spec = MODELS[name]
    torch.manual_seed(0)
    tmod = loader.load(spec["file"], "torch")
    tm = _make(tmod, spec)
    tm.eval()
    x = torch.from_numpy(np.random.default_rng(0).standard_normal(spec["input"]).astype(np.float32))
    if framework == "torch":
        return tm, x
    import flow

    fmod = loader.load(spec["file"], "flow")
    fm = _make(fmod, spec)
    fm.load_state_dict(tm.state_dict())
    fm.eval()
    return fm, flow.as_tensor(x)


def _explain_counts(text):
    for line in text.splitlines():
        if line.startswith("== kernels:"):
            # "== kernels: 56 generated, 54 library calls (cpu) =="
            words = line.replace(",", "").split()
            return int(words[2]), int(words[4])
    return None, None


def worker_flow(name, repeats, warmup, budget, flag):
    """The first @flow.jit call in this process (cold or warm disk cache: the driver decides)."""
    import flow

    fm, x = _build(name, "flow")
    jm = flow.jit(fm, amp=MODELS[name].get("amp"))
    flow.reset_cache_stats()
    t0 = time.perf_counter()
    jm(x)
    first = time.perf_counter() - t0
    stats = flow.cache_stats()
    kernels, libcalls = _explain_counts(jm.explain(with_source=False))
    return {"first_call_s": first, "compile_s": stats.get("compile_seconds"), "cache": stats,
            "kernels": kernels, "library_calls": libcalls}


def worker_latency(name, repeats, warmup, budget, compile_):
    """flow jit, flow eager, torch eager and torch.compile timed side by side in interleaved rounds."""
    import flow
    import torch

    tm, tx = _build(name, "torch")
    fm, fx = _build(name, "flow")
    amp = MODELS[name].get("amp")
    jm = flow.jit(fm, amp=amp)
    out = {"threads": torch.get_num_threads(), "amp": amp}
    if amp and tx.dim() == 4:
        tm = tm.to(memory_format=torch.channels_last)
        tx = tx.contiguous(memory_format=torch.channels_last)

    # Both frameworks' eager calls run inside one autocast context for the whole measurement (the
    # context caches the weights' casts between calls, in torch and in flow); flow jit casts them
    # once (frozen parameters) and ignores the context (its amp= decides).
    torch_amp = torch.autocast("cpu", dtype=getattr(torch, amp)) if amp else contextlib.nullcontext()
    flow_amp = flow.autocast("cpu", dtype=getattr(flow, amp)) if amp else contextlib.nullcontext()
    with torch.no_grad(), torch_amp, flow_amp:
        jm(fx)
        calls = {"flow_jit": lambda: jm(fx), "flow_eager": lambda: fm(fx), "torch_eager": lambda: tm(tx)}
        if compile_:
            try:
                cm = torch.compile(tm, dynamic=False)
                t0 = time.perf_counter()
                cm(tx)
                out["compile_first_call_s"] = time.perf_counter() - t0
                calls["torch_compile"] = lambda: cm(tx)
            except Exception as e:  # keep the other contenders' figures
                out["compile_error"] = f"{type(e).__name__}: {e}"
        names = list(calls)
        samples = {n: [] for n in names}
        start = None
        for r in range(warmup + repeats):
            if r == warmup:
                start = time.perf_counter()
            elif r - warmup >= 4 and (r - warmup) % len(names) == 0 and time.perf_counter() - start > budget:
                break  # out of time, after whole rotations only
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                t0 = time.perf_counter()
                calls[n]()
                if r >= warmup:
                    samples[n].append(time.perf_counter() - t0)
    for n in names:
        out[n + "_s"] = statistics.median(samples[n])
        out[n + "_n"] = len(samples[n])
    for a, b in (("flow_jit", "torch_eager"), ("flow_eager", "torch_eager"), ("flow_jit", "torch_compile")):
        if a in samples and b in samples:
            out[f"{a}/{b}"] = statistics.median(x / y for x, y in zip(samples[a], samples[b]))
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
        r = (worker_flow if kind == "flow" else worker_latency)(name, repeats, warmup, budget, flag)
        print("RESULT " + json.dumps(r))
        return

    from common import git_rev, machine, print_table, write_json

    # Rounds: a multiple of the four contenders, so that each takes every position equally often.
    repeats, warmup, budget = (4, 1, 60.0) if a.quick else (12, 2, 180.0)
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
            args = [name, str(repeats), str(warmup), str(budget)]
            env = {"FLOW_CACHE_DIR": cache}
            r["flow_cold"] = run_worker(["flow"] + args + ["0"], env, a.timeout)
            print(f"[{time.perf_counter() - t_start:6.1f}s] {name}: flow warm ...", flush=True)
            r["flow_warm"] = run_worker(["flow"] + args + ["0"], env, a.timeout)
            print(f"[{time.perf_counter() - t_start:6.1f}s] {name}: latency, side by side ...", flush=True)
            r["latency"] = run_worker(["latency"] + args + ["0" if a.no_compile else "1"],
                                      dict(env, TORCHINDUCTOR_CACHE_DIR=inductor), a.timeout)
        results[name] = r
        fw, lat, fc = r["flow_warm"], r["latency"], r["flow_cold"]
        for part in (fc, fw, lat):
            if "error" in part:
                print(f"  error: {part['error']}")
        if "compile_error" in lat:
            print(f"  torch.compile failed: {lat['compile_error']}")
        ratio = lambda key: "-" if lat.get(key) is None else f"{lat[key]:.2f}x"  # noqa: E731
        rows.append({
            "model": name,
            "flow eager ms": fmt_ms(lat.get("flow_eager_s")),
            "flow jit ms": fmt_ms(lat.get("flow_jit_s")),
            "torch eager ms": fmt_ms(lat.get("torch_eager_s")),
            "torch.compile ms": fmt_ms(lat.get("torch_compile_s")),
            "eager/torch": ratio("flow_eager/torch_eager"),
            "jit/torch": ratio("flow_jit/torch_eager"),
            "jit/compile": ratio("flow_jit/torch_compile"),
            "rounds": str(lat.get("flow_jit_n", "-")),
            "flow 1st call cold s": "-" if fc.get("first_call_s") is None else f"{fc['first_call_s']:.1f}",
            "flow 1st call warm s": "-" if fw.get("first_call_s") is None else f"{fw['first_call_s']:.1f}",
            "torch.compile 1st call s": ("-" if lat.get("compile_first_call_s") is None
                                         else f"{lat['compile_first_call_s']:.1f}"),
            "kernels+lib": f"{fw.get('kernels')}+{fw.get('library_calls')}",
        })
    columns = list(rows[0]) if rows else []
    print_table(f"models ({machine()}; median latency over interleaved rounds; ratios: median per-round ratio "
                "vs torch eager / torch.compile; 1st call = trace + compile + run, cold = empty FLOW_CACHE_DIR)",
                rows, columns)
    write_json(a.out, {"machine": machine(), "git": git_rev(), "quick": a.quick, "repeats": repeats,
                       "wall_s": time.perf_counter() - t_start, "models": results, "table": rows})


if __name__ == "__main__":
    main()
