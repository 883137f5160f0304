"""Acceptance: whole models written as ordinary PyTorch files (tests/models/, `import flow as torch`)
against their torch twins (the same file with the import lines replaced).

ResNet-50, a ViT-B/16 encoder (12 x TransformerEncoderLayer, d=768, 12 heads, seq 197),
MobileNetV3-Large, EfficientNet-B0, a small ConvNeXt, DenseNet-121, a small U-Net and a ShuffleNetV2
load the torch twin's state_dict and must match torch's eval-mode output with relative error
max|flow - torch| / max|torch| < 1e-4 in float32, eagerly and under @flow.jit. The small MLP and CNN
run training-mode forwards (Dropout p=0) eagerly: outputs and BatchNorm running statistics match
torch's step by step.
"""
import os
import sys
import time

import numpy as np
import pytest
import torch

import flow

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from models import loader  # noqa: E402

REL_TOL = 1e-4


def rel_err(actual, expected):
    a = torch.from_numpy(actual.numpy()).double()
    e = expected.detach().double()
    assert a.shape == e.shape, f"shape {tuple(a.shape)} != torch's {tuple(e.shape)}"
    return ((a - e).abs().max() / e.abs().max()).item()


def randomize_norms(model, gen):
    """Non-trivial BatchNorm / LayerNorm parameters and running statistics, so eval mode is not an identity."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
                m.running_mean.normal_(0, 0.1, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d, torch.nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.normal_(0, 0.1, generator=gen)


def twins(name, factory, *args, **kwargs):
    tmod, fmod = loader.load(name, "torch"), loader.load(name, "flow")
    torch.manual_seed(0)
    tm = getattr(tmod, factory)(*args, **kwargs)
    fm = getattr(fmod, factory)(*args, **kwargs)
    return tm, fm


def eval_twins(name, factory, g):
    """Eval-mode twins with randomized norm statistics, flow's loaded from torch's state_dict, and
    flow's compiled module."""
    tm, fm = twins(name, factory)
    randomize_norms(tm, g)
    tm.eval()
    r = fm.load_state_dict(tm.state_dict())
    assert not r.missing_keys and not r.unexpected_keys
    fm.eval()
    return tm, fm, flow.jit(fm)


@pytest.fixture(scope="module")
def resnet():
    return eval_twins("resnet", "resnet50", torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def vit():
    tm, fm = twins("vit", "vit_b_16")
    g = torch.Generator().manual_seed(2)
    randomize_norms(tm, g)
    with torch.no_grad():
        tm.class_token.normal_(0, 0.5, generator=g)
    tm.eval()
    fm.load_state_dict(tm.state_dict())
    fm.eval()
    return tm, fm, flow.jit(fm)


def check_model(tm, fm, jm, x, label):
    with torch.no_grad():
        expected = tm(x)
    fx = flow.as_tensor(x)
    t0 = time.perf_counter()
    eager = rel_err(fm(fx), expected)
    t1 = time.perf_counter()
    jitted = rel_err(jm(fx), expected)
    t2 = time.perf_counter()
    jitted2 = rel_err(jm(fx), expected)  # the compiled variant, reused
    print(f"\n{label}: rel err eager {eager:.2e} jit {jitted:.2e} ({jitted2:.2e} warm); "
          f"eager {t1 - t0:.2f}s, jit first call {t2 - t1:.2f}s")
    assert eager < REL_TOL, f"{label} eager: relative error {eager:.3e}"
    assert jitted < REL_TOL and jitted2 < REL_TOL, f"{label} jit: relative error {jitted:.3e} / {jitted2:.3e}"


def test_resnet50_64(resnet):
    tm, fm, jm = resnet
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    check_model(tm, fm, jm, x, "resnet50 1x3x64x64")
    text = jm.explain(with_source=False)
    assert "== kernels:" in text and "library calls" in text


@pytest.mark.slow
def test_resnet50_224(resnet):
    tm, fm, jm = resnet
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(4))
    check_model(tm, fm, jm, x, "resnet50 1x3x224x224")
    assert jm.num_variants == 2 or jm.num_variants == 1


@pytest.mark.slow
def test_vit_b16_224(vit):
    tm, fm, jm = vit
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(5))
    check_model(tm, fm, jm, x, "vit_b_16 1x3x224x224 (seq 197)")


# ---- more image classifiers, as torchvision writes them: eval mode, eager and @flow.jit ----------------------
# Each brings ops and patterns the two above do not: depthwise convolutions, squeeze-and-excitation
# (a pooled gate multiplied back), hardswish / hardsigmoid / SiLU, stochastic depth, channels-last
# LayerNorm between permutes with a learned layer scale, DenseNet's growing concatenations (cat
# along channels into BatchNorm + ReLU + 1x1 convolution) with average-pool transitions, and a
# segmentation U-Net: GroupNorm, a transposed convolution, nearest and bilinear upsampling, skip
# concatenations and an SPPF block of chained 5x5 max pools; ShuffleNetV2's channel split and
# channel shuffle (view into groups, transpose, view back).
ZOO = {
    "mobilenet_v3_large": ("mobilenet", "mobilenet_v3_large", (2, 3, 96, 96)),
    "efficientnet_b0": ("efficientnet", "efficientnet_b0", (2, 3, 96, 96)),
    "convnext": ("convnext", "convnext_small_test", (2, 3, 64, 64)),
    "densenet121": ("densenet", "densenet121", (2, 3, 64, 64)),
    "unet": ("unet", "unet", (2, 3, 48, 40)),
    "shufflenet_v2": ("shufflenet", "shufflenet_v2", (2, 3, 67, 59)),
}


@pytest.mark.parametrize("model", list(ZOO))
def test_image_classifiers(model):
    name, factory, shape = ZOO[model]
    g = torch.Generator().manual_seed(8)
    tm, fm, jm = eval_twins(name, factory, g)
    x = torch.randn(*shape, generator=g)
    check_model(tm, fm, jm, x, f"{model} {'x'.join(map(str, shape))}")
    if model == "densenet121":  # the concatenations and convolutions ran on NHWC values
        assert "channels-last:" in jm.explain(with_source=False)


def test_model_files_are_plain_torch():
    """The flow model files differ from their torch twins only in the import lines."""
    for name in ("resnet", "vit", "small", "mobilenet", "efficientnet", "convnext", "densenet", "unet",
                 "shufflenet"):
        with open(os.path.join(loader.HERE, name + ".py")) as f:
            lines = f.read().split("\n")
        flow_lines = [ln for ln in lines if "flow" in ln and not ln.lstrip().startswith("#")]
        assert all(ln.split("  #")[0] in loader.TWIN_IMPORTS for ln in flow_lines), flow_lines
        assert any(ln.startswith("import flow as torch") for ln in lines)


# ---- training-mode forwards (eager and @flow.jit) -------------------------------------------------------


def compare_state(fm, tm, label):
    tsd = tm.state_dict()
    fsd = fm.state_dict()
    assert list(fsd) == list(tsd)
    for k, v in tsd.items():
        a = torch.from_numpy(fsd[k].numpy())
        if v.dtype.is_floating_point:
            torch.testing.assert_close(a, v, rtol=1e-5, atol=1e-6, msg=lambda m: f"{label} {k}: {m}")
        else:
            assert torch.equal(a, v), f"{label} {k}: {a} != {v}"


@pytest.mark.parametrize("model,shape", [("MLP", (16, 32)), ("SmallCNN", (4, 3, 16, 16))])
def test_small_models_train_mode_under_jit(model, shape):
    """The compiled training-mode forward updates BatchNorm's running statistics and counter on every
    call (SmallCNN has a momentum=None BatchNorm: the cumulative average), as torch's eager forward."""
    tm, fm = twins("small", model)
    fm.load_state_dict(tm.state_dict())
    tm.train()
    fm.train()
    jm = flow.jit(fm)
    g = torch.Generator().manual_seed(7)
    for step in range(4):
        x = torch.randn(*shape, generator=g) * (1 + step)
        with torch.no_grad():
            expected = tm(x)
        err = rel_err(jm(flow.as_tensor(x)), expected)
        assert err < 1e-5, f"{model} jit train step {step}: relative error {err:.3e}"
        compare_state(fm, tm, f"{model} jit step {step}")
    assert jm.num_traces == 1  # one trace serves every step: the updates are in the graph
    # eval() is another variant: no updates.
    fm.eval()
    tm.eval()
    before = {k: v.numpy().copy() for k, v in fm.state_dict().items()}
    with torch.no_grad():
        expected = tm(x)
    assert rel_err(jm(flow.as_tensor(x)), expected) < 1e-5
    for k, v in fm.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k], err_msg=k)


@pytest.mark.parametrize("model,shape", [("MLP", (16, 32)), ("SmallCNN", (4, 3, 16, 16))])
def test_small_models_train_mode(model, shape):
    tm, fm = twins("small", model)
    fm.load_state_dict(tm.state_dict())
    tm.train()
    fm.train()
    g = torch.Generator().manual_seed(6)
    for step in range(3):
        x = torch.randn(*shape, generator=g) * (1 + step)
        with torch.no_grad():
            expected = tm(x)
        err = rel_err(fm(flow.as_tensor(x)), expected)
        assert err < 1e-5, f"{model} train step {step}: relative error {err:.3e}"
        compare_state(fm, tm, f"{model} step {step}")
    tm.eval()
    fm.eval()
    with torch.no_grad():
        expected = tm(x)
    assert rel_err(flow.jit(fm)(flow.as_tensor(x)), expected) < 1e-5
