"""Means and variances of rows far from 0 (dsl/ops/moments.h: the corrected two-pass algorithm).
With the plain two-pass form, the float32 mean's own rounding error (2.4e-3 for 4096 copies of
1000.1) went into every deviation: layer_norm of a constant row gave 0.6 where torch gives 0, and
of 1000 + 0.01 * N(0, 1) rows was 2e-2 off. var, std, var_mean, layer_norm, group_norm, instance_norm
and batch_norm (training) are compared with the float64 result on such rows, on the CPU and on the
GPU (row and column schedules), eagerly and under flow.jit."""
import pytest
import torch

import flow
from conftest import to_flow, to_torch

TF = torch.nn.functional
FF = flow.nn.functional

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="needs a CUDA device")]),
]


def offset_rows(gen, shape, offset, spread):
    return offset + spread * torch.randn(shape, generator=gen)


# (name, function of (module, functional, x)); x is [8, 16, 32, 32] float32.
FUNCTIONS = [
    ("var rows", lambda m, F, x: x.var(-1)),
    ("var of columns", lambda m, F, x: x.var(0)),  # strided rows: the column schedules
    ("std", lambda m, F, x: x.std((2, 3))),
    ("var_mean", lambda m, F, x: m.var_mean(x, -1, correction=0)[0]),
    ("layer_norm", lambda m, F, x: F.layer_norm(x, (32, 32))),
    ("group_norm", lambda m, F, x: F.group_norm(x, 4)),
    ("instance_norm", lambda m, F, x: F.instance_norm(x)),
    ("batch_norm training", lambda m, F, x: F.batch_norm(x, None, None, training=True)),
]


def error_vs_float64(fn, x, device, jit):
    want = fn(torch, TF, x.double())
    f = (lambda t: fn(flow, FF, t))
    if jit:
        f = flow.jit(f)
    got = to_torch(f(to_flow(x).to(device)).cpu()).double()
    assert not torch.isnan(got).any()
    return (got - want).abs().max().item(), want


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name,fn", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_rows_far_from_zero(gen, device, jit, name, fn):
    """1000 + 0.01 * N(0, 1): deviations of 1e-5 relative to the offset. The plain two-pass form was
    off by ~1e-2 in the normalized outputs and ~5e-4 relatively in the variances."""
    x = offset_rows(gen, (8, 16, 32, 32), 1000.0, 0.01)
    err, want = error_vs_float64(fn, x, device, jit)
    if name.startswith(("var", "std")):
        assert err <= 2e-5 * want.abs().max().item(), f"{name}: {err}"
    else:
        assert err <= 2e-4, f"{name}: {err}"  # of normalized values ~N(0, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_a_constant_row_normalizes_to_zero(device):
    x = torch.full((4, 4096), 1000.1)
    for fn in (lambda m, F, x: F.layer_norm(x, (4096,)), lambda m, F, x: F.group_norm(x.reshape(4, 2, 2048), 2)):
        got = to_torch(fn(flow, FF, to_flow(x).to(device)).cpu())
        assert got.abs().max().item() <= 1e-4
    assert to_torch(to_flow(x).to(device).var(1).cpu()).abs().max().item() <= 1e-9


@pytest.mark.parametrize("device", DEVICES)
def test_rows_near_zero_are_unchanged(gen, device):
    """Rows of N(0, 1) and with a NaN: against torch, as before the change."""
    x = torch.randn(16, 1000, generator=gen)
    x[3, 7] = float("nan")
    for fn in (lambda m, F, x: F.layer_norm(x, (1000,)), lambda m, F, x: x.var(1), lambda m, F, x: x.std(0)):
        want = fn(torch, TF, x)
        got = to_torch(fn(flow, FF, to_flow(x).to(device)).cpu())
        torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5, equal_nan=True)


def test_instance_norm_is_group_norm_with_a_group_per_channel(gen):
    """One kernel eagerly (it was a fused_in_eager composite of its own), torch's values."""
    x, w, b = torch.randn(2, 3, 5, 6, generator=gen), torch.randn(3, generator=gen), torch.randn(3, generator=gen)
    fx, fw, fb = to_flow(x), to_flow(w), to_flow(b)
    FF.instance_norm(fx, weight=fw, bias=fb)
    flow.reset_launch_count()
    got = FF.instance_norm(fx, weight=fw, bias=fb)
    assert flow.launch_count() == 1
    torch.testing.assert_close(to_torch(got), TF.instance_norm(x, weight=w, bias=b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_an_infinite_value_keeps_an_infinite_mean(device):
    """The deviations from an infinite first mean are NaN; the mean stays the first mean (torch's)."""
    for data in ([1.0, 2.0, float("inf")], [float("-inf")], [1.0, float("nan")], [float("inf"), float("-inf")]):
        x = torch.tensor(data)
        want_var, want_mean = torch.var_mean(x, correction=0)
        got_var, got_mean = flow.var_mean(to_flow(x).to(device), correction=0)
        torch.testing.assert_close(to_torch(got_mean.cpu()), want_mean, equal_nan=True)
        torch.testing.assert_close(to_torch(got_var.cpu()), want_var, equal_nan=True)
    rm, rv, trm, trv = flow.zeros(2), flow.ones(2), torch.zeros(2), torch.ones(2)
    x = torch.tensor([[1.0, float("inf")], [2.0, 3.0]])
    TF.batch_norm(x, trm, trv, training=True)
    FF.batch_norm(to_flow(x), rm, rv, training=True)
    torch.testing.assert_close(to_torch(rm), trm, equal_nan=True)
    torch.testing.assert_close(to_torch(rv), trv, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rms_norm_of_half_types_defaults_to_float32_eps(dtype):
    """torch computes in float32 and takes float32's eps; flow took the half type's (1e-3, 8e-3),
    which swamped rows of small values."""
    x = torch.tensor([[1e-4, 2e-4], [3.0, 4.0], [1e-2, 1e-2]], dtype=dtype)
    torch.testing.assert_close(to_torch(FF.rms_norm(to_flow(x), (2,))), TF.rms_norm(x, (2,)))
