"""Autotuning from Python: online tuning under @flow.jit, records reused by later compiles and by
$FLOW_TUNING, the offline sweep CLI (table, records, kernels, resume after Ctrl-C)."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import flow
import flow.nn as nn
from flow import _C

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON_DIR = os.path.join(REPO, "python")


class Block(nn.Module):
    """A Linear (library call), a row reduction (layer norm + softmax) and a pointwise chain."""

    def __init__(self, d=96):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x, y):
        h = self.norm(self.fc(x)).softmax(-1)
        return h, flow.sigmoid(y) * y + flow.tanh(y) * 0.5


def block_and_inputs(gen, d=96, rows=300):
    flow.manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen)))
    m = Block(d).eval()
    x, y = flow.randn(rows, d), flow.randn(rows, 4 * d + 7)
    return m, x, y


def origins(compiled):
    return object.__getattribute__(compiled, "_jit")._latest.exe.kernel_origins()


def test_online_autotune_writes_records_that_later_compiles_use(gen, tmp_path):
    m, x, y = block_and_inputs(gen)
    ref = [t.numpy() for t in m(x, y)]  # eager
    tuned = flow.jit(m, tuning=tmp_path, autotune=True, budget=20)
    out = tuned(x, y)
    for o, r in zip(out, ref):
        np.testing.assert_allclose(o.numpy(), r, rtol=1e-5, atol=1e-6)
    results = object.__getattribute__(tuned, "_jit").tuning_results
    # Two generated kernels and the Linear's oneDNN call (its implementation choice).
    assert sorted(r["scheduler"] for r in results) == ["oneDNN", "pointwise", "reduction"]
    for r in results:
        assert r["status"] == "tuned" and r["candidates"] >= (1 if r["scheduler"] == "oneDNN" else 2)
        assert 0 < r["best_us"] <= r["default_us"]  # the default is measured too: never worse
    assert set(origins(tuned)) == {"tuned"}
    calls = object.__getattribute__(tuned, "_jit")._latest.exe.library_calls()
    assert [c["origin"] for c in calls] == ["tuned"] and calls[0]["impl"]
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == 3
    recs = [json.loads(l) for l in lines]
    assert {r["workload"] for r in recs} == {r["workload"] for r in results}
    assert all(r["target"] == _C.target_id("cpu") for r in recs)

    # A new jit of the same model with the records: every kernel scheduled from them, same results.
    again = flow.jit(m, tuning=tmp_path)
    out2 = again(x, y)
    assert set(origins(again)) == {"record"}
    assert [c["origin"] for c in object.__getattribute__(again, "_jit")._latest.exe.library_calls()] == ["record"]
    assert "params from record" in again.explain(False)
    for o, o2 in zip(out, out2):
        np.testing.assert_allclose(o.numpy(), o2.numpy(), rtol=1e-5, atol=1e-6)
    # Without records: heuristics.
    plain = flow.jit(m)
    plain(x, y)
    assert set(origins(plain)) == {"heuristic"}


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("op", ["conv2d", "conv3d"])
def test_cuda_autotune_times_the_cudnn_algorithms(op, gen, tmp_path):
    """Online tuning of a CUDA convolution (conv + bias + relu, one cuDNN call): every cuDNN
    algorithm is a candidate, the fastest is recorded for the CUDA target and a later compile with
    the records runs it; the values are torch's throughout."""
    spatial = (5, 6) if op == "conv2d" else (4, 5, 6)
    x = torch.randn((2, 4) + spatial, generator=gen)
    w = torch.randn((6, 4) + (3,) * len(spatial), generator=gen)
    b = torch.randn(6, generator=gen)
    tfn = getattr(torch.nn.functional, op)

    def block(m, conv):
        return lambda a, c, d: m.relu(conv(a, c, d, padding=1))

    want = block(torch, tfn)(x.double(), w.double(), b.double())
    fargs = [flow.tensor(t.numpy()).cuda() for t in (x, w, b)]
    fn = block(flow, getattr(flow.nn.functional, op))
    tuned = flow.jit(fn, tuning=tmp_path, autotune=True, budget=10)
    np.testing.assert_allclose(tuned(*fargs).cpu().numpy(), want.numpy(), rtol=1e-4, atol=1e-4)
    (result,) = tuned.tuning_results
    assert result["scheduler"] == "cuDNN" and result["status"] == "tuned", result
    assert result["candidates"] == 8, result  # the CUDNN_CONVOLUTION_FWD_ALGO_* names (runtime/cudnn.h)
    (call,) = tuned._latest.exe.library_calls()
    assert call["origin"] == "tuned" and call["call"].startswith(f"{op} (cuDNN, {call['impl']})"), call
    (record,) = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert record["scheduler"] == "cuDNN" and record["params"]["impl"] == call["impl"], record
    assert record["target"] == tuned._latest.exe.target_id, record
    again = flow.jit(fn, tuning=tmp_path)
    np.testing.assert_allclose(again(*fargs).cpu().numpy(), want.numpy(), rtol=1e-4, atol=1e-4)
    (call_again,) = again._latest.exe.library_calls()
    assert call_again["origin"] == "record" and call_again["impl"] == call["impl"], call_again


def test_flow_tuning_environment_variable(gen, tmp_path, monkeypatch):
    m, x, y = block_and_inputs(gen, d=64, rows=50)
    flow.jit(m, tuning=tmp_path, autotune=True, budget=5)(x, y)
    monkeypatch.setenv("FLOW_TUNING", str(tmp_path))
    j = flow.jit(m)
    j(x, y)
    assert set(origins(j)) == {"record"}
    # Records for other workloads (other sizes) are simply not used.
    x2, y2 = flow.randn(51, 64), flow.randn(51, 4 * 64 + 7)
    j(x2, y2)
    assert set(origins(j)) == {"heuristic"}


def test_bad_budget_and_strategy_are_errors(gen):
    m, x, y = block_and_inputs(gen, d=16, rows=4)
    with pytest.raises(ValueError, match="budget"):
        flow.jit(m, autotune=True, budget=-1)
    j = flow.jit(m)
    j(x, y)
    exe = object.__getattribute__(j, "_jit")._latest.exe
    v = object.__getattribute__(j, "_jit")._latest
    with pytest.raises(Exception, match="unknown tuning strategy 'annealing'"):
        exe.tune(v.bound([x, y], v.check()), budget=1, strategy="annealing")


def test_tuning_database_merges_and_skips_torn_lines(tmp_path):
    w = "ab" * 16
    rec = {"format": 1, "workload": w, "target": "t", "scheduler": "pointwise",
           "params": json.loads('{"kind":"pointwise","cpu_tile":4096,"cpu_vector_width":8,"cpu_unroll":1,'
                                '"gpu_threads":256,"gpu_elements_per_thread":4,"gpu_vector_width":4}'),
           "best_us": 5.0, "default_params": {"kind": "pointwise"}, "default_us": 9.0}
    (tmp_path / "a.jsonl").write_text(json.dumps(rec) + "\n" + '{"format":1,"work')
    rec2 = dict(rec, best_us=3.0)
    (tmp_path / "b.jsonl").write_text(json.dumps(rec2) + "\n")
    db, report = _C.TuningDatabase.load(str(tmp_path))
    assert report == {"files": 2, "lines": 3, "bad_lines": 1}
    assert len(db) == 1 and json.loads(db.best(w, "t"))["best_us"] == 3.0
    with pytest.raises(ValueError, match="not a tuning record"):
        db.add_json("{}")
    # flow.autotune.merge_records: machines' files into one, fastest first.
    other = dict(rec, workload="cd" * 16, target="t2")
    (tmp_path / "m2").mkdir()
    (tmp_path / "m2" / "x.jsonl").write_text(json.dumps(other) + "\n")
    from flow.autotune import merge_records

    assert merge_records([tmp_path, tmp_path / "m2"], tmp_path / "out" / "records.jsonl") == 2
    merged = [json.loads(l) for l in (tmp_path / "out" / "records.jsonl").read_text().splitlines()]
    assert sorted((r["workload"], r["best_us"]) for r in merged) == [(w, 3.0), ("cd" * 16, 5.0)]


# ---- the offline sweep CLI ------------------------------------------------------------------------

CLI_MODEL = ["tests.models.small:SmallCNN", "--input", "2x3x16x16"]


def run_cli(args, cache_dir, **kw):
    env = dict(os.environ, FLOW_CACHE_DIR=str(cache_dir), PYTHONPATH=PYTHON_DIR)
    env.pop("FLOW_TUNING", None)
    return subprocess.run([sys.executable, "-m", "flow.autotune", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, **kw)


def test_cli_sweep_prints_a_table_writes_records_and_kernels_and_resumes(tmp_path):
    out = tmp_path / "tuned"
    r = run_cli([*CLI_MODEL, "--budget", "60", "--max-trials", "3", "--out", str(out), "--no-progress"],
                tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert "default us" in r.stdout and "speedup" in r.stdout and "tuned us" in r.stdout
    lines = (out / "records.jsonl").read_text().splitlines()
    kinds = [json.loads(l)["scheduler"] for l in lines]
    assert kinds.count("oneDNN") == 4  # the three convolutions and the linear: implementation choices
    generated = len(kinds) - kinds.count("oneDNN")
    assert generated >= 3
    n_kernels = sum(len(files) for _, _, files in os.walk(out / "kernels"))
    assert n_kernels >= generated
    assert f"{len(lines)} tuned now, 0 from earlier records" in r.stdout
    # Again: everything comes from the records, nothing is measured or appended.
    r2 = run_cli([*CLI_MODEL, "--budget", "60", "--out", str(out), "--no-progress"], tmp_path / "cache")
    assert r2.returncode == 0, r2.stderr
    assert f"0 tuned now, {len(lines)} from earlier records" in r2.stdout
    assert (out / "records.jsonl").read_text().splitlines() == lines


def test_cli_interrupted_sweep_keeps_records_and_resumes(tmp_path):
    out = tmp_path / "tuned"
    env = dict(os.environ, FLOW_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=PYTHON_DIR)
    # The child must take Ctrl-C's default disposition even when this test runs with SIGINT ignored
    # (a background job of a non-interactive shell: its children inherit SIG_IGN, and Python then
    # installs no KeyboardInterrupt handler, so the sweep would finish with status 0).
    p = subprocess.Popen([sys.executable, "-m", "flow.autotune", *CLI_MODEL, "--budget", "300", "--max-trials", "8",
                          "--out", str(out), "--no-progress"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    records = out / "records.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        if records.exists() and records.read_text().count("\n") >= 1:
            break
        time.sleep(0.02)
    assert p.poll() is None, "the sweep finished before it could be interrupted: " + p.communicate()[1]
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 130, stderr
    assert "interrupted" in stderr and "resume" in stderr
    kept = records.read_text().splitlines()
    for line in kept:
        json.loads(line)  # whole lines only
    # Resume: the kept workloads come from the records, the rest are tuned now.
    r = run_cli([*CLI_MODEL, "--budget", "120", "--max-trials", "3", "--out", str(out), "--no-progress"],
                tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    total = len(records.read_text().splitlines())
    assert f"{total - len(kept)} tuned now, {len(kept)} from earlier records" in r.stdout
    assert total > len(kept)


def test_cli_errors_are_clear(tmp_path):
    r = run_cli(["no_such_module:f", "--input", "4"], tmp_path)
    assert r.returncode == 2 and "cannot load no_such_module:f" in r.stderr
    r = run_cli(["tests.models.small:SmallCNN", "--input", "2xAx3"], tmp_path)
    assert r.returncode == 2 and "bad input spec" in r.stderr
    r = run_cli(["tests.models.small:SmallCNN", "--input", "2x3x8x8:complex64"], tmp_path)
    assert r.returncode == 2 and "unknown dtype 'complex64'" in r.stderr and "Traceback" not in r.stderr
    if not flow.cuda.is_available():
        r = run_cli(["tests.models.small:SmallCNN", "--input", "2x3x8x8", "--device", "cuda"], tmp_path)
        assert r.returncode == 2 and "CUDA" in r.stderr and "Traceback" not in r.stderr
