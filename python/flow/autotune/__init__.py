"""Offline autotuning of a model's kernels (the C++ tuner is autotune/ at the top of the repo).

``tune_model(model, inputs, out_dir, budget)`` compiles ``flow.jit(model)`` for the inputs, tunes
every kernel workload on the real inputs (skipping those already recorded in ``out_dir``, which is
how an interrupted sweep resumes), appends each record to ``out_dir/records.jsonl`` the moment it
is measured, and copies the tuned kernels' cache entries into ``out_dir/kernels``. The command line
is ``python -m flow.autotune`` (see ``__main__``).
"""
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence

from .. import _C

__all__ = ["tune_model", "SweepResult", "parse_input_spec", "make_inputs", "merge_records"]


@dataclass
class SweepResult:
    results: List[dict] = field(default_factory=list)  # one per workload (Executable.tune)
    default_ms: float = 0.0  # whole model, heuristic Params (or the records that existed)
    tuned_ms: float = 0.0  # whole model after tuning
    seconds: float = 0.0
    records_file: str = ""
    kernels_exported: int = 0
    compiled: Any = None  # the flow.jit model, tuned


def parse_input_spec(text: str):
    """'8x3x224x224' or '8,3,224,224:float16' -> (shape, dtype name)."""
    shape_text, _, dtype = text.partition(":")
    try:
        shape = [int(s) for s in shape_text.replace("x", ",").split(",") if s.strip() != ""]
    except ValueError:
        raise ValueError(f"bad input spec '{text}': expected e.g. 8x3x224x224 or 8,128:int64") from None
    return shape, dtype or "float32"


def make_inputs(specs: Sequence, device: str = "cpu", seed: int = 0):
    import flow

    flow.manual_seed(seed)
    out = []
    for shape, dtype in specs:
        dt = getattr(flow, dtype, None)
        if not isinstance(dt, flow.dtype):
            raise ValueError(f"unknown dtype '{dtype}'")
        if dt in (flow.int64, flow.int32):
            t = flow.randint(0, 10, shape, dtype=dt)
        elif dt is flow.bool:
            t = flow.rand(shape) > 0.5
        else:
            t = flow.randn(shape).to(dt)
        out.append(t.to(device) if device != "cpu" else t)
    return out


def _time_ms(fn, inputs, repeats=5):
    fn(*inputs)
    best = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*inputs)
        if _C.cuda_is_available():
            _C.cuda_synchronize()
        best.append((time.perf_counter() - t0) * 1e3)
    best.sort()
    return best[len(best) // 2]


def tune_model(model, inputs: Sequence, out_dir: str, budget: float = 600.0, strategy: str = "auto",
               max_trials: int = 0, seed: int = 0, progress: Optional[Callable] = None) -> SweepResult:
    """Tunes ``model`` (an nn.Module or function) on ``inputs`` for ``budget`` seconds; see the module
    doc. ``progress(result, done, total)`` is called after each workload. KeyboardInterrupt stops
    the sweep between workloads with every finished record kept."""
    import flow
    from .._jit import JitFunction, JitModule, _flatten

    os.makedirs(out_dir, exist_ok=True)
    records_file = os.path.join(out_dir, "records.jsonl")
    compiled = flow.jit(model, tuning=out_dir) if not isinstance(model, (JitModule, JitFunction)) else model
    jf = compiled if isinstance(compiled, JitFunction) else object.__getattribute__(compiled, "_jit")
    res = SweepResult(records_file=records_file, compiled=compiled)
    t0 = time.perf_counter()
    res.default_ms = _time_ms(compiled, inputs)
    v = jf._latest
    if v is None or v.exe is None:
        raise RuntimeError("flow.autotune: the model computes nothing to tune")
    db = jf._database()
    flat, _ = _flatten((tuple(inputs), {}))
    bound = v.bound(flat, v.check())

    def on_result(result, done, total):
        if result["record"] is not None:
            _C.TuningDatabase.append(records_file, result["record"])
            db.add_json(result["record"])
        if progress is not None:
            progress(result, done, total)

    res.results = v.exe.tune(bound, budget=budget, strategy=strategy, max_trials=max_trials, seed=seed,
                             existing=db, progress=on_result)
    res.tuned_ms = _time_ms(compiled, inputs)
    keys = [k["key"] for k in v.exe.kernels()]
    res.kernels_exported = _C.cache_export(keys, os.path.join(out_dir, "kernels"))
    res.seconds = time.perf_counter() - t0
    return res


def merge_records(sources: Sequence[str], out_file: str) -> int:
    """Merges record files or directories (from several machines or sweeps) into `out_file`,
    keeping the fastest record per (workload, target); returns how many it wrote. Torn or foreign
    lines are skipped."""
    merged = _C.TuningDatabase()
    for src in sources:
        db, _ = _C.TuningDatabase.load(os.fspath(src))
        merged.merge(db)
    merged.save(os.fspath(out_file))
    return len(merged)


def format_table(results: Sequence[dict]) -> str:
    """kernel | uses | default | tuned | speedup | status | params, one row per workload."""
    rows = [("kernel", "uses", "default us", "tuned us", "speedup", "status", "tuned params")]
    for r in results:
        speed = r["default_us"] / r["best_us"] if r["best_us"] > 0 else float("nan")
        params = r["best_params"].replace('"', "").replace("{kind:", "{")
        rows.append((r["name"][:40], str(r["uses"]), f"{r['default_us']:.1f}", f"{r['best_us']:.1f}",
                     f"{speed:.2f}x", r["status"], params))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     + "  " + row[-1])
        if n == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)
