"""flow.save / flow.load: a saved model runs in a fresh process with zero compilations and the
same outputs; another CPU target recompiles from the graph; bad bundles give clear errors; weights
are safetensors that the safetensors package reads."""
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import flow
import flow.nn as nn
from flow import _C
from flow._safetensors import load_file, save_file

from conftest import products_atol

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON_DIR = os.path.join(REPO, "python")

SAVE_SCRIPT = textwrap.dedent("""
    import sys, json, numpy as np, flow
    sys.path.insert(0, {repo!r})
    from tests.models.small import SmallCNN
    flow.manual_seed({seed})
    m = SmallCNN().eval()
    x = flow.randn(2, 3, 16, 16)
    j = flow.jit(m)
    y = j(x)
    y2 = j(flow.randn(1, 3, 16, 16))  # a second variant (another batch size)
    flow.save(j, {bundle!r})
    np.save({bundle!r} + "/../x.npy", x.numpy())
    np.save({bundle!r} + "/../y.npy", y.numpy())
    print(json.dumps({{"kernels": j.num_kernels}}))
""")

LOAD_SCRIPT = textwrap.dedent("""
    import json, numpy as np, flow
    m = flow.load({bundle!r})
    x = flow.from_numpy(np.load({bundle!r} + "/../x.npy"))
    y = m(x)
    y1 = m(flow.randn(1, 3, 16, 16))
    print(json.dumps({{"compiled": m.num_compiled, "kernels": m.num_kernels, "stats": flow.cache_stats(),
                      "target_matches": m.target_matches, "y": y.numpy().tolist(), "shape1": list(y1.shape)}}))
""")


def run(script, env_extra):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, **env_extra)
    env.pop("FLOW_DISABLE_DISK_CACHE", None)
    env.pop("FLOW_CPU_TARGET", None) if "FLOW_CPU_TARGET" not in env_extra else None
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def saved_bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("bundle")
    bundle = str(d / "model")
    info = run(SAVE_SCRIPT.format(repo=REPO, seed=1234, bundle=bundle), {"FLOW_CACHE_DIR": str(d / "cache_save")})
    return bundle, info


def test_saved_model_loads_in_a_fresh_process_with_zero_compiles(saved_bundle, tmp_path):
    bundle, info = saved_bundle
    out = run(LOAD_SCRIPT.format(bundle=bundle), {"FLOW_CACHE_DIR": str(tmp_path / "empty_cache")})
    assert out["compiled"] == 0
    assert out["target_matches"] is True
    st = out["stats"]
    assert st["misses"] == 0 and st["stores"] == 0, st
    assert st["readonly_hits"] > 0 and st["readonly_hits"] == st["disk_hits"], st
    np.testing.assert_array_equal(np.array(out["y"], dtype=np.float32), np.load(bundle + "/../y.npy"))
    assert out["shape1"] == [1, 10]
    # Nothing was written into the user's cache or the bundle.
    assert not os.path.exists(tmp_path / "empty_cache") or not any(os.scandir(tmp_path / "empty_cache"))


def test_another_cpu_target_recompiles_from_the_graph(saved_bundle, tmp_path):
    bundle, _ = saved_bundle
    out = run(LOAD_SCRIPT.format(bundle=bundle),
              {"FLOW_CACHE_DIR": str(tmp_path / "c"), "FLOW_CPU_TARGET": "x86-64"})
    assert out["target_matches"] is False
    assert out["compiled"] > 0 and out["stats"]["readonly_hits"] == 0
    np.testing.assert_allclose(np.array(out["y"], dtype=np.float32), np.load(bundle + "/../y.npy"),
                               rtol=1e-5, atol=1e-5)


def test_corrupt_shipped_kernels_are_recompiled(saved_bundle, tmp_path):
    bundle, _ = saved_bundle
    copy = str(tmp_path / "model")
    shutil.copytree(bundle, copy)
    shutil.copy(bundle + "/../x.npy", tmp_path / "x.npy")
    shutil.copy(bundle + "/../y.npy", tmp_path / "y.npy")
    files = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(copy, "kernels")) for f in fs]
    assert files
    with open(files[0], "r+b") as f:
        f.seek(70)
        f.write(b"\xff\xfe\xfd")
    out = run(LOAD_SCRIPT.format(bundle=copy), {"FLOW_CACHE_DIR": str(tmp_path / "c")})
    assert out["stats"]["corrupt_entries"] >= 1
    assert out["compiled"] >= 1
    np.testing.assert_array_equal(np.array(out["y"], dtype=np.float32), np.load(bundle + "/../y.npy"))


def test_bundle_layout_and_weights(saved_bundle):
    bundle, info = saved_bundle
    manifest = json.load(open(os.path.join(bundle, "manifest.json")))
    assert manifest["format"] == "flow.bundle/1"
    assert manifest["target"] == _C.target_id("cpu") and manifest["device"] == "cpu"
    assert len(manifest["variants"]) == 2
    assert manifest["kernels_exported"] == manifest["kernels"] > 0
    # The weights are the module's state dict, readable by the safetensors package.
    from safetensors.numpy import load_file as st_load

    arrays = st_load(os.path.join(bundle, "weights.safetensors"))
    flow.manual_seed(1234)
    sys.path.insert(0, REPO)
    from tests.models.small import SmallCNN

    sd = SmallCNN().eval().state_dict()
    assert set(sd) <= set(arrays)
    for k, v in sd.items():
        np.testing.assert_array_equal(arrays[k], v.numpy(), err_msg=k)


def test_incompatible_or_missing_bundles_are_clear_errors(saved_bundle, tmp_path):
    bundle, _ = saved_bundle
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        flow.load(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="not a flow bundle"):
        flow.load(tmp_path / "empty")
    copy = tmp_path / "old"
    shutil.copytree(bundle, copy)
    m = json.load(open(copy / "manifest.json"))
    m["format"] = "flow.bundle/0"
    json.dump(m, open(copy / "manifest.json", "w"))
    with pytest.raises(RuntimeError, match=r"format 'flow.bundle/0'.*reads 'flow.bundle/1'"):
        flow.load(copy)
    (copy / "manifest.json").write_text("{not json")
    with pytest.raises(RuntimeError, match="unreadable"):
        flow.load(copy)
    shutil.rmtree(copy)
    shutil.copytree(bundle, copy)
    (copy / "weights.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{bad")
    with pytest.raises(ValueError, match="not a safetensors file"):
        flow.load(copy)


def test_save_errors(tmp_path):
    m = nn.Linear(4, 4)
    with pytest.raises(pickle.PicklingError, match="state_dict"):  # a module object is not a checkpoint
        flow.save(m, tmp_path / "x")
    j = flow.jit(m)
    with pytest.raises(RuntimeError, match="call it once"):
        flow.save(j, tmp_path / "x")
    (tmp_path / "notabundle").mkdir()
    (tmp_path / "notabundle" / "precious.txt").write_text("keep me")
    j(flow.randn(2, 4))
    with pytest.raises(FileExistsError):
        flow.save(j, tmp_path / "notabundle")
    assert (tmp_path / "notabundle" / "precious.txt").read_text() == "keep me"


def test_in_process_round_trip_of_a_function_with_structured_outputs(tmp_path):
    w = flow.randn(8, 8)

    @flow.jit
    def f(x, scale):
        h = flow.relu(x @ w) * scale
        return {"h": h, "pair": (h.sum(-1), x)}

    x = flow.randn(3, 8)
    ref = f(x, 2.0)
    flow.save(f, tmp_path / "f")
    g = flow.load(tmp_path / "f")
    out = g(x, 2.0)
    np.testing.assert_array_equal(out["h"].numpy(), ref["h"].numpy())
    np.testing.assert_array_equal(out["pair"][0].numpy(), ref["pair"][0].numpy())
    assert out["pair"][1] is x  # an input returned as is
    with pytest.raises(ValueError, match="no saved variant"):
        g(x, 3.0)  # the scalar was specialized at trace time
    with pytest.raises(ValueError, match="no saved variant"):
        g(flow.randn(4, 8), 2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_safetensors_round_trip_and_interop(dtype, tmp_path, gen):
    t = (torch.randn(3, 5, generator=gen) * 10).to(dtype)
    x = flow.from_numpy(t.float().numpy()).to(getattr(flow, str(dtype).split(".")[1]))
    save_file({"a": x, "b": x[:, 1:4]}, tmp_path / "w.safetensors", metadata={"k": "v"})
    back, meta = load_file(tmp_path / "w.safetensors")
    assert meta == {"k": "v"}
    for name, ref in (("a", x), ("b", x[:, 1:4])):
        assert back[name].dtype == ref.dtype and back[name].shape == ref.shape
        assert (back[name].float() == ref.float()).all().item()
    # The safetensors package reads ours and we read its.
    from safetensors.torch import load_file as st_load, save_file as st_save

    theirs = st_load(str(tmp_path / "w.safetensors"))
    assert torch.equal(theirs["a"].float(), torch.from_numpy(x.float().numpy()))
    st_save({"t": t}, str(tmp_path / "t.safetensors"))
    mine, _ = load_file(tmp_path / "t.safetensors")
    assert torch.equal(torch.from_numpy(mine["t"].float().numpy()), t.float())


def test_a_training_forward_that_updates_buffers_round_trips(tmp_path, gen):
    bn = nn.BatchNorm1d(4).train()
    j = flow.jit(bn)
    x = flow.as_tensor(torch.randn(8, 4, generator=gen))
    j(x)  # compiles the training variant; the running stats move once
    flow.save(j, tmp_path / "bn")
    m = flow.load(tmp_path / "bn").train()
    before = m.weights["running_mean"].numpy().copy()
    saved_count = int(m.weights["num_batches_tracked"].item())
    y = m(x)
    # The loaded model performs the same update the original does on its next call.
    ref = j(x)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(m.weights["running_mean"].numpy(), bn.running_mean.numpy(), rtol=1e-6, atol=1e-7)
    assert not np.array_equal(m.weights["running_mean"].numpy(), before)
    assert int(m.weights["num_batches_tracked"].item()) == saved_count + 1 == int(bn.num_batches_tracked.item())


def test_loaded_model_folds_batch_norm_sees_weight_writes_and_profiles(tmp_path):
    import sys as _sys

    _sys.path.insert(0, REPO)
    from tests.models.small import SmallCNN

    flow.manual_seed(7)
    m = SmallCNN().eval()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_var.copy_(flow.rand(mod.running_var.shape[0]) + 0.5)
            mod.running_mean.copy_(flow.randn(mod.running_mean.shape[0]))
    j = flow.jit(m)
    x = flow.randn(2, 3, 16, 16)
    ref = j(x)
    assert "2 convolution(s) absorbed" in j.explain(with_source=False)
    flow.save(j, tmp_path / "cnn")
    loaded = flow.load(tmp_path / "cnn")
    assert "2 convolution(s) absorbed" in loaded.explain()
    np.testing.assert_array_equal(loaded(x).numpy(), ref.numpy())
    # A weight written in place after loading is seen by the next call (its folded and reordered
    # forms are recomputed), as it is by the jitted module after the same write.
    loaded.weights["features.0.weight"].mul_(-2.0)
    m.features[0].weight.mul_(-2.0)
    np.testing.assert_allclose(loaded(x).numpy(), j(x).numpy(), rtol=1e-5, atol=1e-6)
    assert np.abs(j(x).numpy() - ref.numpy()).max() > 1e-3
    prof = loaded.profile(x, repeats=2)
    assert sum(1 for s in prof.steps if s.kind == "library") == 4  # 3 convolutions and the Linear


def test_loaded_model_binds_replaced_weights(tmp_path):
    """A loaded model's repeated calls run on a kept input template (the weights, checked once):
    a weight replaced in `weights`, given new data, or a whole new `weights` dict, is bound at the
    next call, and a replaced weight is not kept alive."""
    lin = nn.Linear(6, 4)
    j = flow.jit(lin)
    x = flow.randn(3, 6)
    j(x)
    flow.save(j, tmp_path / "lin")
    loaded = flow.load(tmp_path / "lin")

    def check():
        w, b = loaded.weights["weight"].numpy(), loaded.weights["bias"].numpy()
        atol = products_atol(torch.from_numpy(np.abs(x.numpy()) @ np.abs(w.T) + np.abs(b)), terms=7)
        np.testing.assert_allclose(loaded(x).numpy(), x.numpy() @ w.T + b, rtol=1e-5, atol=atol)

    for _ in range(2):
        check()
    old = loaded.weights["weight"]
    refs = old._c._storage_refs
    loaded.weights["weight"] = flow.randn(4, 6)
    check()
    assert old._c._storage_refs < refs, "the loaded model keeps the replaced weight"
    loaded.weights["bias"].data = flow.randn(4)
    check()
    loaded.weights = {"weight": flow.randn(4, 6), "bias": flow.randn(4)}
    check()
    loaded.weights["bias"] = flow.randn(5)
    with pytest.raises(ValueError, match=r"input 2 is float32\[5\] but the graph was compiled for"):
        loaded(x)
