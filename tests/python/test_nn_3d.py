"""The volumetric functions and layers (python/flow/nn/_functional_3d.py, layers_3d.py) against PyTorch:
conv3d and conv_transpose3d over strides, paddings ('same' with even kernels too), dilations,
groups, unbatched, non-contiguous and edge-sized inputs; the max (with indices, NaN and ties),
average, adaptive and power-average 3-d pools; max_unpool3d; interpolate(mode='area'); eagerly,
under flow.jit, and (marker `gpu`) on CUDA; torch's errors for bad arguments; the modules with
torch's state dicts; and the jitted conv3d as one oneDNN call on the CPU, or (the composition CUDA
runs, also checked on the CPU) one unfold kernel plus a 2-d convolution."""
import copy
import math

import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn as fnn
import flow.nn.functional as F
from conftest import FLOAT_DTYPES, assert_same, make, products_atol, to_flow, to_torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]
HALF = (torch.float16, torch.bfloat16)
# The convolutions' two paths: the 3-d library op (oneDNN's on the CPU, cuDNN's on CUDA) and the
# composition over 2-d ones (by switching the library op off).
_GPU_MARKS = [pytest.mark.gpu, pytest.mark.skipif(
    not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]
CONV_PATHS = [
    ("cpu", "native"),
    ("cpu", "composed"),
    pytest.param("cuda", "native", marks=_GPU_MARKS),
    pytest.param("cuda", "composed", marks=_GPU_MARKS),
]


@pytest.fixture
def conv_path(request, monkeypatch):
    from flow.nn import _functional_3d

    monkeypatch.setattr(_functional_3d, "_native_conv", request.param == "native")
    return request.param


def _f(t, device):
    return to_flow(t).to(device) if device != "cpu" else to_flow(t)


def _run(fn, jit):
    return flow.jit(fn) if jit else fn


def _assert_products(got, exact, magnitude, terms, dtype, msg):
    """A sum of products against its float64 value: rounding grows with the terms (products_atol),
    and a half result is rounded once more at the end."""
    assert got.dtype == dtype and got.shape == exact.shape, f"{msg}: {got.dtype} {tuple(got.shape)}"
    atol = products_atol(magnitude, terms, torch.float32 if dtype in HALF else dtype)
    if dtype in HALF:
        atol += 2 * torch.finfo(dtype).eps * float(exact.abs().max())
    torch.testing.assert_close(got.double(), exact, rtol=0, atol=atol + 1e-12, msg=lambda m: f"{msg}: {m}")


# (input shape, weight shape, keyword arguments): groups, strides, paddings, dilations, 'same' with
# an even kernel (asymmetric), an unbatched input, size-1 and odd sizes, a depth window wholly in
# the padding for some outputs.
CONV3D_CASES = [
    ((2, 4, 5, 6, 7), (6, 4, 3, 3, 3), {"padding": 1}),
    ((1, 6, 7, 5, 9), (4, 3, 3, 2, 3), {"groups": 2, "stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1)}),
    ((2, 3, 6, 5, 4), (5, 3, 2, 4, 2), {"padding": "same", "dilation": (3, 1, 2)}),
    ((3, 5, 4, 4), (2, 3, 1, 1, 1), {}),  # unbatched
    ((1, 4, 1, 3, 3), (4, 1, 3, 3, 3), {"groups": 4, "padding": 1}),  # depthwise, depth 1
    ((2, 2, 9, 1, 5), (3, 2, 3, 1, 2), {"stride": 3, "padding": (2, 0, 1), "dilation": (2, 1, 1)}),
    ((2, 3, 4, 5, 6), (2, 3, 4, 5, 6), {"padding": "valid"}),  # the kernel covers the input
]


@pytest.mark.parametrize("device,conv_path", CONV_PATHS, indirect=["conv_path"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_conv3d_matches_torch(jit, dtype, device, conv_path, gen):
    for xs, ws, kw in CONV3D_CASES:
        x, w, b = make(xs, dtype, gen), make(ws, dtype, gen), make((ws[0],), dtype, gen)
        exact = TF.conv3d(x.double(), w.double(), b.double(), **kw)
        magnitude = TF.conv3d(x.double().abs(), w.double().abs(), b.double().abs(), **kw)
        run = _run(lambda a, c, d: F.conv3d(a, c, d, **kw), jit)
        if device == "cuda" and dtype == torch.float64:
            with pytest.raises(NotImplementedError, match="not implemented for 'Double' on CUDA"):
                run(_f(x, device), _f(w, device), _f(b, device))
            return
        out = run(_f(x, device), _f(w, device), _f(b, device))
        assert out.is_contiguous(), (out.stride(), f"{xs} {ws} {kw}")  # as torch's, jitted too
        got = to_torch(out.cpu())
        _assert_products(got, exact, magnitude, math.prod(ws[1:]) + 1, dtype, f"{xs} {ws} {kw}")
    # no bias, a non-contiguous input (a channels-last view) and weight (every other filter)
    fx = _f(make((2, 5, 4, 6, 3), dtype, gen), device)
    fw = _f(make((8, 3, 2, 3, 3), dtype, gen), device)
    tx, tw = to_torch(fx.cpu()).permute(0, 4, 1, 2, 3), to_torch(fw.cpu())[::2]
    got = to_torch(_run(lambda a, c: F.conv3d(a.permute(0, 4, 1, 2, 3), c[::2], stride=(1, 2, 1)), jit)(fx, fw).cpu())
    exact = TF.conv3d(tx.double(), tw.double(), stride=(1, 2, 1))
    magnitude = TF.conv3d(tx.double().abs(), tw.double().abs(), stride=(1, 2, 1))
    _assert_products(got, exact, magnitude, 3 * 2 * 3 * 3, dtype, "strided operands")


CONV_T3D_CASES = [
    ((2, 4, 3, 4, 5), (4, 3, 3, 3, 3), {}),
    ((1, 4, 4, 3, 5), (4, 2, 3, 2, 3), {"groups": 2, "stride": (2, 1, 2), "padding": (1, 0, 1),
                                        "output_padding": (1, 0, 1)}),
    ((2, 3, 3, 2, 4), (3, 3, 2, 3, 2), {"stride": 3, "dilation": 2, "padding": (3, 1, 1), "output_padding": (2, 1, 0)}),
    ((3, 2, 2, 3), (3, 2, 1, 2, 2), {"stride": (2, 1, 1)}),  # unbatched
]


@pytest.mark.parametrize("device,conv_path", CONV_PATHS, indirect=["conv_path"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_conv_transpose3d_matches_torch(jit, dtype, device, conv_path, gen):
    for xs, ws, kw in CONV_T3D_CASES:
        groups = kw.get("groups", 1)
        x, w, b = make(xs, dtype, gen), make(ws, dtype, gen), make((ws[1] * groups,), dtype, gen)
        exact = TF.conv_transpose3d(x.double(), w.double(), b.double(), **kw)
        magnitude = TF.conv_transpose3d(x.double().abs(), w.double().abs(), b.double().abs(), **kw)
        run = _run(lambda a, c, d: F.conv_transpose3d(a, c, d, **kw), jit)
        if device == "cuda" and dtype == torch.float64:
            with pytest.raises(NotImplementedError, match="not implemented for 'Double' on CUDA"):
                run(_f(x, device), _f(w, device), _f(b, device))
            return
        out = run(_f(x, device), _f(w, device), _f(b, device))
        assert out.is_contiguous(), (out.stride(), f"{xs} {ws} {kw}")
        got = to_torch(out.cpu())
        _assert_products(got, exact, magnitude, ws[0] // groups * math.prod(ws[2:]) + 1, dtype, f"{xs} {ws} {kw}")


# (input shape, keyword arguments) of the pools: windows reaching past the input with ceil_mode,
# dilations that leave some windows' taps in the padding, size-1 and odd sizes, unbatched inputs.
POOL_CASES = [
    ((2, 3, 7, 6, 5), {"kernel_size": 3}),
    ((2, 3, 7, 6, 5), {"kernel_size": (2, 3, 2), "stride": (1, 2, 1), "padding": (1, 1, 0), "ceil_mode": True}),
    ((1, 2, 5, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ((3, 1, 4, 9), {"kernel_size": (1, 3, 2), "stride": (1, 2, 3), "ceil_mode": True}),  # unbatched
    ((2, 2, 1, 1, 1), {"kernel_size": 1}),
    ((1, 2, 6, 5, 8), {"kernel_size": (4, 1, 5), "stride": (3, 1, 2), "padding": (2, 0, 1)}),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int64], ids=str)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_max_pool3d_values_and_indices(jit, dtype, device, gen):
    dilated = [((2, 3, 7, 6, 9), {"kernel_size": 2, "dilation": (2, 1, 3), "padding": 1}),
               ((1, 1, 9, 4, 4), {"kernel_size": (3, 2, 2), "dilation": (3, 1, 1), "ceil_mode": True})]
    for shape, kw in POOL_CASES + dilated:
        x = make(shape, dtype, gen, special=True, low=-3, high=3)  # NaN, inf and (small ints) ties
        run = _run(lambda a: F.max_pool3d(a, **kw), jit)
        assert_same(run(_f(x, device)).cpu(), TF.max_pool3d(x.double() if dtype in HALF else x, **kw).to(dtype),
                    msg=f"{shape} {kw}")
        got, idx = _run(lambda a: F.max_pool3d(a, return_indices=True, **kw), jit)(_f(x, device))
        want, widx = TF.max_pool3d(x.float() if dtype in HALF else x, return_indices=True, **kw)
        assert_same(got.cpu(), want.to(dtype), msg=f"{shape} {kw} values")
        assert_same(idx.cpu(), widx, msg=f"{shape} {kw} indices")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int64], ids=str)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_avg_pool3d_matches_torch(jit, dtype, device, gen):
    for shape, kw in POOL_CASES:
        x = make(shape, dtype, gen)
        for extra in ({}, {"count_include_pad": False}, {"divisor_override": 5}):
            args = {**kw, **extra}
            # torch's CPU avg_pool3d has no half kernel: float32 rounded once is the reference
            want = TF.avg_pool3d(x.float() if dtype in HALF else x, **args).to(dtype)
            got = _run(lambda a: F.avg_pool3d(a, **args), jit)(_f(x, device))
            assert_same(got.cpu(), want, msg=f"{shape} {args}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_adaptive_and_lp_pools_3d(jit, dtype, device, gen):
    x = make((2, 3, 7, 9, 5), dtype, gen, special=True)
    for out in (2, (3, None, 4), 1, (5, 4, 3), (7, 9, 5), (0, 2, 2)):
        ref = x.float() if dtype in HALF else x
        assert_same(_run(lambda a: F.adaptive_avg_pool3d(a, out), jit)(_f(x, device)).cpu(),
                    TF.adaptive_avg_pool3d(ref, out).to(dtype), msg=f"avg {out}")
        assert_same(_run(lambda a: F.adaptive_max_pool3d(a, out), jit)(_f(x, device)).cpu(),
                    TF.adaptive_max_pool3d(ref, out).to(dtype), msg=f"max {out}")
        got, idx = _run(lambda a: F.adaptive_max_pool3d(a, out, True), jit)(_f(x, device))
        want, widx = TF.adaptive_max_pool3d(ref, out, True)
        assert_same(got.cpu(), want.to(dtype), msg=f"max {out}")
        assert_same(idx.cpu(), widx, msg=f"indices {out}")
    y = make((3, 6, 5, 7), dtype, gen, low=0.1, high=2.0)  # unbatched
    want = TF.lp_pool3d(y.float() if dtype in HALF else y, 2.0, (2, 3, 2), (2, 1, 2), ceil_mode=True).to(dtype)
    got = _run(lambda a: F.lp_pool3d(a, 2.0, (2, 3, 2), (2, 1, 2), ceil_mode=True), jit)(_f(y, device))
    tol = {"rtol": 4e-3, "atol": 4e-3} if dtype == torch.float16 else {"rtol": 3e-2, "atol": 3e-2} \
        if dtype == torch.bfloat16 else {}
    assert_same(got.cpu(), want, msg="lp_pool3d", **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_max_unpool3d_inverts_max_pool3d(device, gen):
    x = make((2, 3, 6, 5, 7), torch.float32, gen)
    for kw, size in (({"kernel_size": 2}, [6, 5, 7]), ({"kernel_size": 3, "stride": 2, "padding": 1}, [6, 5, 7]),
                     ({"kernel_size": (2, 1, 1)}, None)):
        vals, idx = TF.max_pool3d(x, return_indices=True, **kw)
        unpool_kw = {"kernel_size": kw["kernel_size"], "stride": kw.get("stride"), "padding": kw.get("padding", 0),
                     "output_size": size}
        got = F.max_unpool3d(_f(vals, device), _f(idx, device), **unpool_kw)
        assert_same(got.cpu(), TF.max_unpool3d(vals, idx, **unpool_kw))
        module = fnn.MaxUnpool3d(kw["kernel_size"], kw.get("stride"), kw.get("padding", 0))
        assert_same(module(_f(vals, device), _f(idx, device), size).cpu(), TF.max_unpool3d(vals, idx, **unpool_kw))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_interpolate_area_is_torchs(jit, dtype, device, gen):
    for shape in ((2, 3, 11), (2, 3, 7, 9), (1, 2, 7, 9, 5), (2, 9, 4)):
        x = make(shape, dtype, gen)
        for kw in ({"size": 3}, {"scale_factor": 0.5}, {"scale_factor": 1.7}, {"size": shape[2:]}):
            want = TF.interpolate(x.float(), mode="area", **kw).to(dtype)
            got = _run(lambda a: F.interpolate(a, mode="area", **kw), jit)(_f(x, device))
            assert_same(got.cpu(), want, msg=f"{shape} {kw}")
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(flow.randn(1, 1, 4, 4), size=2, mode="area", align_corners=False)


def test_bad_arguments_raise_as_torch():
    x = torch.randn(1, 2, 4, 4, 4)
    w = torch.randn(3, 2, 3, 3, 3)
    cases = [
        ("conv3d channels", lambda m: m.nn.functional.conv3d(x, torch.randn(3, 3, 3, 3, 3))),
        ("conv3d kernel too big", lambda m: m.nn.functional.conv3d(x, torch.randn(3, 2, 5, 1, 1))),
        ("conv3d 4-d weight", lambda m: m.nn.functional.conv3d(x, torch.randn(3, 2, 3, 3))),
        ("conv3d groups", lambda m: m.nn.functional.conv3d(x, w, groups=2)),
        ("conv3d stride 0", lambda m: m.nn.functional.conv3d(x, w, stride=0)),
        ("conv3d negative padding", lambda m: m.nn.functional.conv3d(x, w, padding=-1)),
        ("conv3d same strided", lambda m: m.nn.functional.conv3d(x, w, padding="same", stride=2)),
        ("conv3d padding string", lambda m: m.nn.functional.conv3d(x, w, padding="full")),
        ("conv3d bias", lambda m: m.nn.functional.conv3d(x, w, bias=torch.randn(2))),
        ("conv3d dilation 0", lambda m: m.nn.functional.conv3d(x, w, dilation=0)),
        ("conv3d 3-d input", lambda m: m.nn.functional.conv3d(torch.randn(2, 4, 4), w)),
        ("conv3d dtypes", lambda m: m.nn.functional.conv3d(x.double(), w)),
        ("conv_transpose3d output_padding", lambda m: m.nn.functional.conv_transpose3d(
            x, torch.randn(2, 3, 3, 3, 3), output_padding=1)),
        ("conv_transpose3d channels", lambda m: m.nn.functional.conv_transpose3d(x, torch.randn(3, 3, 3, 3, 3))),
        ("conv_transpose3d too small", lambda m: m.nn.functional.conv_transpose3d(
            torch.randn(1, 2, 1, 1, 1), torch.randn(2, 2, 3, 3, 3), padding=2)),
        ("max_pool3d pad", lambda m: m.nn.functional.max_pool3d(x, 3, padding=2)),
        ("max_pool3d stride 0", lambda m: m.nn.functional.max_pool3d(x, 2, stride=0)),
        ("max_pool3d too small", lambda m: m.nn.functional.max_pool3d(x, 5)),
        ("max_pool3d kernel pair", lambda m: m.nn.functional.max_pool3d(x, (2, 2))),
        ("max_pool3d dilation 0", lambda m: m.nn.functional.max_pool3d(x, 2, dilation=0)),
        ("max_pool3d 3-d input", lambda m: m.nn.functional.max_pool3d(torch.randn(2, 3, 4), 2)),
        ("max_pool3d empty channel", lambda m: m.nn.functional.max_pool3d(torch.randn(1, 0, 4, 4, 4), 2)),
        ("max_pool3d bool", lambda m: m.nn.functional.max_pool3d(x > 0, 2)),
        ("avg_pool3d too small", lambda m: m.nn.functional.avg_pool3d(x, 5)),
        ("avg_pool3d smaller than the kernel, padded", lambda m: m.nn.functional.avg_pool3d(
            torch.randn(1, 1, 2, 4, 4), (3, 2, 2), padding=(1, 0, 0))),
        ("avg_pool3d divisor 0", lambda m: m.nn.functional.avg_pool3d(x, 2, divisor_override=0)),
        ("avg_pool3d empty depth", lambda m: m.nn.functional.avg_pool3d(torch.randn(1, 2, 0, 4, 4), 2)),
        ("adaptive_avg_pool3d negative", lambda m: m.nn.functional.adaptive_avg_pool3d(x, -1)),
        ("adaptive_max_pool3d negative", lambda m: m.nn.functional.adaptive_max_pool3d(x, -1)),
        ("adaptive_avg_pool3d pair", lambda m: m.nn.functional.adaptive_avg_pool3d(x, (2, 2))),
        ("adaptive_avg_pool3d 2-d input", lambda m: m.nn.functional.adaptive_avg_pool3d(torch.randn(3, 4), 2)),
        ("adaptive_avg_pool3d empty", lambda m: m.nn.functional.adaptive_avg_pool3d(torch.randn(1, 2, 0, 4, 4), 2)),
        ("adaptive_avg_pool2d empty", lambda m: m.nn.functional.adaptive_avg_pool2d(torch.randn(1, 2, 0, 4), 2)),
        ("adaptive_max_pool2d empty", lambda m: m.nn.functional.adaptive_max_pool2d(torch.randn(2, 0, 4), 2)),
        ("adaptive_max_pool2d empty indices", lambda m: m.nn.functional.adaptive_max_pool2d(
            torch.randn(2, 3, 0), 2, return_indices=True)),
        ("adaptive_max_pool2d 2-d input", lambda m: m.nn.functional.adaptive_max_pool2d(torch.randn(7, 3), (2, 2))),
        ("adaptive_avg_pool3d 3-d input", lambda m: m.nn.functional.adaptive_avg_pool3d(torch.randn(7, 3, 4), (2, 2, 2))),
        ("max_unpool3d negative size", lambda m: m.nn.functional.max_unpool3d(
            *m.nn.functional.max_pool3d(x, 2, return_indices=True), 2, output_size=[4, 4, -1])),
    ]
    for name, fn in cases:
        try:
            fn(torch)
        except Exception as e:  # noqa: BLE001
            kind = type(e) if isinstance(e, (ValueError, TypeError, NotImplementedError)) else RuntimeError
            with pytest.raises(kind):
                fn(_FlowArgs)
            continue
        pytest.fail(f"{name}: torch accepts it (the case is meant to be an error)")


class _FlowArgs:
    """torch's namespace for the error cases, with their torch tensors converted to flow's."""

    class nn:
        class functional:
            pass


def _flow_call(name):
    fn = getattr(F, name)
    return lambda *a, **kw: fn(*[to_flow(v) if isinstance(v, torch.Tensor) else v for v in a],
                               **{k: to_flow(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()})


for _name in ("conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
              "adaptive_avg_pool2d", "adaptive_max_pool2d", "max_unpool3d"):
    setattr(_FlowArgs.nn.functional, _name, staticmethod(_flow_call(_name)))


def test_empty_dims_torch_accepts(gen):
    """torch's adaptive pools refuse an empty dim after the first (adaptive_avg_pool2d: an empty
    spatial dim only), so an unbatched input without channels pools; interpolate(mode="area") to a
    size of 0 is an empty result (the other modes refuse it)."""
    for fn, shape, out in (("adaptive_avg_pool2d", (0, 4, 5), (2, 3)), ("adaptive_max_pool2d", (0, 4, 5), (2, 3)),
                           ("adaptive_avg_pool2d", (2, 0, 4, 5), (2, 3)), ("adaptive_avg_pool3d", (0, 3, 4, 5), 2),
                           ("adaptive_max_pool3d", (0, 3, 4, 5), 2)):
        x = make(shape, torch.float32, gen)
        assert_same(getattr(F, fn)(to_flow(x), out), getattr(TF, fn)(x, out), msg=f"{fn} {shape}")
    x = make((2, 1, 1, 5), torch.float32, gen)
    for kw in ({"scale_factor": 0.7}, {"size": (0, 3)}):
        assert_same(F.interpolate(to_flow(x), mode="area", **kw), TF.interpolate(x, mode="area", **kw))


def test_conv_transpose_output_size_as_torch(gen):
    """The modules' forward(output_size=): [min, min + stride - 1] per dim (not the dilation), with
    the batch and channel dims optional, and torch's ValueErrors."""
    for nd, tcls, fcls in ((1, torch.nn.ConvTranspose1d, fnn.ConvTranspose1d),
                           (2, torch.nn.ConvTranspose2d, fnn.ConvTranspose2d),
                           (3, torch.nn.ConvTranspose3d, fnn.ConvTranspose3d)):
        tm, fm = tcls(2, 3, 3, stride=2, padding=1, dilation=2), fcls(2, 3, 3, stride=2, padding=1, dilation=2)
        fm.load_state_dict(tm.state_dict())
        x = make((1, 2) + (3, 4, 2)[:nd], torch.float32, gen)
        base = [(n - 1) * 2 - 2 + 2 * 2 + 1 for n in x.shape[2:]]
        for size in (base, [b + 1 for b in base], [1, 3] + base, [b + 2 for b in base], [7] * (nd + 1)):
            try:
                want = tm(x, output_size=size).detach()
            except ValueError:
                with pytest.raises(ValueError):
                    fm(to_flow(x), output_size=size)
                continue
            assert_same(fm(to_flow(x), output_size=size), want, atol=1e-5, msg=f"{nd}-d {size}")


def test_empty_batch_and_edge_shapes(gen):
    for mfn in (lambda m, a: m.nn.functional.max_pool3d(a, 2), lambda m, a: m.nn.functional.avg_pool3d(a, 2),
                lambda m, a: m.nn.functional.adaptive_avg_pool3d(a, 3)):
        x = make((0, 2, 4, 4, 4), torch.float32, gen)
        assert_same(mfn(flow, to_flow(x)), mfn(torch, x))
    x, w = make((0, 2, 4, 4, 4), torch.float32, gen), make((3, 2, 3, 3, 3), torch.float32, gen)
    assert_same(F.conv3d(to_flow(x), to_flow(w)), TF.conv3d(x, w))
    # torch's global average pools are means: an empty plane or volume gives NaN, not an error
    for x, fn in ((make((1, 2, 0, 4), torch.float32, gen), "adaptive_avg_pool2d"),
                  (make((2, 0, 3, 4), torch.float32, gen), "adaptive_avg_pool3d"),
                  (make((7, 3), torch.float32, gen), "adaptive_avg_pool2d"),  # (any rank: torch's mean)
                  (make((2, 2, 3, 2, 4, 3), torch.float32, gen), "adaptive_avg_pool3d")):
        assert_same(getattr(F, fn)(to_flow(x), 1), getattr(TF, fn)(x, 1))
    # a depth-1 kernel over a single depth, and a 1 x 1 x 1 window: copies, not views of the input
    x = make((2, 3, 1, 4, 5), torch.float32, gen)
    fx = to_flow(x)
    y = F.max_pool3d(fx, 1)
    fx.add_(1.0)
    assert_same(y, TF.max_pool3d(x, 1))


@pytest.mark.parametrize("device", DEVICES)
def test_modules_load_torch_state_and_match(device, gen):
    torch.manual_seed(gen.initial_seed() % 2**31)
    pairs = [
        (torch.nn.Conv3d(4, 6, 3, padding=1, bias=True), fnn.Conv3d(4, 6, 3, padding=1, bias=True)),
        (torch.nn.Conv3d(4, 6, (1, 3, 3), stride=(1, 2, 2), groups=2, bias=False),
         fnn.Conv3d(4, 6, (1, 3, 3), stride=(1, 2, 2), groups=2, bias=False)),
        (torch.nn.Conv3d(4, 2, 3, padding=1, padding_mode="replicate"),
         fnn.Conv3d(4, 2, 3, padding=1, padding_mode="replicate")),
        (torch.nn.ConvTranspose3d(4, 3, 2, stride=2), fnn.ConvTranspose3d(4, 3, 2, stride=2)),
        (torch.nn.MaxPool3d(3, 2, 1), fnn.MaxPool3d(3, 2, 1)),
        (torch.nn.AvgPool3d(2, ceil_mode=True, count_include_pad=False),
         fnn.AvgPool3d(2, ceil_mode=True, count_include_pad=False)),
        (torch.nn.AdaptiveAvgPool3d((1, 2, 3)), fnn.AdaptiveAvgPool3d((1, 2, 3))),
        (torch.nn.AdaptiveMaxPool3d(2), fnn.AdaptiveMaxPool3d(2)),
    ]
    x = make((2, 4, 5, 6, 7), torch.float32, gen)
    for tm, fm in pairs:
        fm.load_state_dict(tm.state_dict())
        assert repr(fm) == repr(tm)
        fm = fm.to(device)
        want = tm(x).detach()
        got = fm(_f(x, device)).cpu()
        assert_same(got, want, atol=5e-5, rtol=1e-5, msg=repr(tm))
        got_jit = flow.jit(fm)(_f(x, device)).cpu()
        assert_same(got_jit, want, atol=5e-5, rtol=1e-5, msg=f"jit {tm!r}")
    up = torch.nn.ConvTranspose3d(4, 3, 3, stride=2, padding=1)
    fup = fnn.ConvTranspose3d(4, 3, 3, stride=2, padding=1)
    fup.load_state_dict(up.state_dict())
    assert_same(fup.to(device)(_f(x, device), output_size=[10, 12, 14]).cpu(),
                up(x, output_size=[10, 12, 14]).detach(), atol=5e-5, rtol=1e-5)


@pytest.mark.parametrize("conv_path", ["native", "composed"], indirect=True)
def test_jitted_conv3d_launches(conv_path, gen):
    """conv3d + relu under jit. Native: one oneDNN conv3d call, relu its only generated kernel.
    Composed: the depth taps' cat (reading the input in place, pads inlined) and relu writing the
    NCDHW result are the two generated kernels launched beside a 2-d library convolution (a
    frozen weight's transform is computed once, not per call)."""
    x, w = make((2, 4, 5, 6, 7), torch.float32, gen), make((6, 4, 3, 3, 3), torch.float32, gen)
    conv = fnn.Conv3d(4, 6, 3, padding=1, bias=False)
    conv.weight = fnn.Parameter(to_flow(w))
    model = flow.jit(fnn.Sequential(conv, fnn.ReLU()))
    fx = to_flow(x)
    assert_same(model(fx), TF.relu(TF.conv3d(x, w, padding=1)), atol=3e-5, rtol=1e-5)
    flow.reset_launch_count()
    model(fx)
    report = model.explain(with_source=False)
    assert flow.launch_count() == (1 if conv_path == "native" else 2), report
    library = "library call: conv3d (oneDNN)" if conv_path == "native" else "library call: conv2d (oneDNN)"
    assert library in report, report


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_jitted_conv3d_on_cuda_is_one_cudnn_call(dtype, gen):
    """conv3d + bias + residual + relu under jit on CUDA: one cuDNN N-d convolution with the whole
    epilogue fused (no generated kernel, no depth unfold), and conv_transpose3d one backward-data
    call; both torch's values."""
    x, w, b = make((2, 4, 5, 6, 7), dtype, gen), make((6, 4, 3, 3, 3), dtype, gen), make((6,), dtype, gen)
    r = make((2, 6, 5, 6, 7), dtype, gen)

    def block(m, a, c, d, e):
        return m.relu(m.nn.functional.conv3d(a, c, d, padding=1) + e)

    jitted = flow.jit(lambda *xs: block(flow, *xs))
    fx, fw, fb, fr = (to_flow(t).cuda() for t in (x, w, b, r))
    got = to_torch(jitted(fx, fw, fb, fr).cpu())
    exact = block(torch, x.double(), w.double(), b.double(), r.double())
    magnitude = TF.conv3d(x.double().abs(), w.double().abs(), b.double().abs(), padding=1) + r.double().abs()
    _assert_products(got, exact, magnitude, 4 * 27 + 2, dtype, "conv3d block")
    text = jitted.explain(with_source=False)
    assert "library call: conv3d (cuDNN)" in text, text
    before = flow.cuda.library_counters()
    flow.reset_launch_count()
    jitted(fx, fw, fb, fr)
    assert flow.launch_count() == 0, text  # the library call alone
    after = flow.cuda.library_counters()
    assert after["cudnn_fused"] + after["cudnn_unfused"] == before["cudnn_fused"] + before["cudnn_unfused"] + 1
    wt = make((4, 3, 2, 2, 2), dtype, gen)
    up = flow.jit(lambda a, c: F.conv_transpose3d(a, c, stride=2))
    got = to_torch(up(fx, to_flow(wt).cuda()).cpu())
    exact = TF.conv_transpose3d(x.double(), wt.double(), stride=2)
    magnitude = TF.conv_transpose3d(x.double().abs(), wt.double().abs(), stride=2)
    _assert_products(got, exact, magnitude, 4 * 8, dtype, "conv_transpose3d")
    assert "library call: conv_transpose3d (cuDNN)" in up.explain(with_source=False)


def test_top_level_spellings():
    x = torch.randn(1, 2, 9)
    assert flow.conv3d is F.conv3d and flow.max_pool3d is F.max_pool3d
    values, indices = flow.adaptive_max_pool1d(to_flow(x), 4)  # torch's returns the indices too
    want_values, want_indices = torch.adaptive_max_pool1d(x, 4)
    assert_same(values, want_values)
    assert_same(indices, want_indices)
    v, i = F.max_pool2d_with_indices(to_flow(x[None]), 2)
    wv, wi = TF.max_pool2d_with_indices(x[None], 2)
    assert_same(v, wv)
    assert_same(i, wi)


def _unet3d(m):
    """A small 3-D U-Net (as in volumetric segmentation): conv-BN-ReLU blocks, a max pool down, a
    transposed convolution up, a skip concatenation and trilinear upsampling of the logits."""
    nn = m.nn

    class Block(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.body = nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout), nn.ReLU(),
                                      nn.Conv3d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout), nn.ReLU())

        def forward(self, x):
            return self.body(x)

    class UNet3d(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = Block(2, 8)
            self.pool = nn.MaxPool3d(2)
            self.mid = Block(8, 16)
            self.up = nn.ConvTranspose3d(16, 8, 2, stride=2)
            self.dec = Block(16, 8)
            self.head = nn.Conv3d(8, 3, 1)

        def forward(self, x):
            e = self.enc(x)
            u = self.up(self.mid(self.pool(e)))
            y = self.head(self.dec(m.cat([e, u], 1)))
            return m.nn.functional.interpolate(y, scale_factor=2, mode="trilinear", align_corners=False)

    return UNet3d()


def _unet3d_twins(gen):
    """torch's and flow's 3-D U-Net in eval mode with the same random weights and batch-norm
    statistics."""
    torch.manual_seed(gen.initial_seed() % 2**31)
    tm, fm = _unet3d(torch).eval(), _unet3d(flow).eval()
    with torch.no_grad():
        for name, b in tm.named_buffers():
            if name.endswith("running_mean"):
                b.normal_(0, 0.1, generator=gen)
            elif name.endswith("running_var"):
                b.uniform_(0.5, 1.5, generator=gen)
    fm.load_state_dict(tm.state_dict())
    return tm, fm


def test_a_3d_unet_matches_torch(gen):
    tm, fm = _unet3d_twins(gen)
    x = make((2, 2, 8, 12, 10), torch.float32, gen)
    want = tm(x).detach()
    assert_same(fm(to_flow(x)), want, atol=2e-5, rtol=1e-4)
    assert_same(flow.jit(fm)(to_flow(x)), want, atol=2e-5, rtol=1e-4)


def _max_rel(got, want):
    return float((got.double() - want.double()).abs().max() / want.double().abs().max())


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("amp", [None, "float16"])
def test_a_3d_unet_on_gpu(amp, gen):
    """The 3-D U-Net on CUDA: its convolutions are cuDNN's N-d calls (under jit with the batch norms
    folded into them), its transposed convolution cuDNN's backward data. float32, eager and jitted:
    torch's result. Jitted under autocast to float16: as close to the float64 result as torch's own
    autocast result is (with a margin)."""
    tm, fm = _unet3d_twins(gen)
    fm = fm.cuda()
    x = make((2, 2, 8, 12, 10), torch.float32, gen)
    with torch.no_grad():
        exact = copy.deepcopy(tm).double()(x.double())
    jm = flow.jit(fm, amp=amp)
    got = to_torch(jm(to_flow(x).cuda()).cpu())
    text = jm.explain(with_source=False)
    assert "library call: conv3d (cuDNN)" in text and "library call: conv_transpose3d (cuDNN)" in text, text
    assert "absorbed a per-channel scale/shift" in text, text
    if amp is None:
        assert got.dtype == torch.float32
        assert _max_rel(got, exact) < 1e-4
        assert _max_rel(to_torch(fm(to_flow(x).cuda()).cpu()), exact) < 1e-4  # eager
        return
    tdev = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.no_grad(), torch.autocast(tdev, dtype=torch.float16):
        want = tm.to(tdev)(x.to(tdev)).float().cpu()
    assert got.dtype == torch.float16
    assert _max_rel(got, exact) < 3 * _max_rel(want, exact) + 2e-3, (_max_rel(got, exact), _max_rel(want, exact))


@pytest.mark.parametrize("groups", [1, 4], ids=["dense", "depthwise"])
def test_frozen_conv3d_absorbs_batch_norm3d(groups, gen):
    """Conv3d + BatchNorm3d + ReLU of an eval module under jit on the CPU: the batch norm's scale
    and shift fold into the 3-d library convolution's weight and bias (scheduler/fold_scale.h),
    and the result is torch's."""
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))

    def block(m):
        return m.nn.Sequential(m.nn.Conv3d(4, 8, 3, padding=1, groups=groups, bias=groups == 1), m.nn.BatchNorm3d(8),
                               m.nn.ReLU())

    tm = block(torch).eval()
    with torch.no_grad():
        bn = tm[1]
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.normal_()
        bn.bias.normal_()
    fm = block(flow).eval()
    fm.load_state_dict(tm.state_dict())
    jm = flow.jit(fm)
    for _ in range(2):  # the second call reuses the cached folded weights
        x = make((2, 4, 5, 6, 7), torch.float32, gen)
        with torch.no_grad():
            want = tm(x)
        assert_same(jm(to_flow(x)), want, rtol=1e-4, atol=1e-4)
    text = jm.explain(with_source=False)
    assert "1 convolution(s) absorbed a per-channel scale/shift" in text, text
    assert "library call: conv3d (oneDNN)" in text, text


@pytest.mark.parametrize("conv_path", ["native", "composed"], indirect=True)
def test_unbatched_conv3d_output_takes_inplace_ops_under_jit(conv_path, gen):
    """An in-place activation on an unbatched 3-d convolution's result traces (torch accepts it):
    the result is no view of a batched one."""
    x, w, wt = make((3, 4, 5, 6), torch.float32, gen), make((2, 3, 1, 2, 2), torch.float32, gen), \
        make((3, 2, 2, 1, 2), torch.float32, gen)
    for fn, tfn, weight in ((F.conv3d, TF.conv3d, w), (F.conv_transpose3d, TF.conv_transpose3d, wt)):
        got = flow.jit(lambda a, c: F.relu(fn(a, c), inplace=True))(to_flow(x), to_flow(weight))
        assert_same(got, TF.relu(tfn(x, weight)), atol=3e-5, rtol=1e-5)


def test_causal_pad_folds_into_conv3d(gen):
    """A video model's causal convolution, F.pad(x, (1, 1, 1, 1, 2, 0)) then conv3d: under jit on the
    CPU the zero pad becomes the library convolution's (asymmetric) padding, so the padded copy is
    never written; the result is torch's."""
    x, w, b = make((2, 3, 5, 6, 7), torch.float32, gen), make((4, 3, 3, 3, 3), torch.float32, gen), \
        make((4,), torch.float32, gen)

    def causal(m, a, c, d):
        return m.nn.functional.conv3d(m.nn.functional.pad(a, (1, 1, 1, 1, 2, 0)), c, d)

    jitted = flow.jit(lambda a, c, d: causal(flow, a, c, d))
    assert_same(jitted(to_flow(x), to_flow(w), to_flow(b)), causal(torch, x, w, b), atol=3e-5, rtol=1e-5)
    text = jitted.explain(with_source=False)
    assert "folded 1 zero pad(s) into convolution padding" in text, text
    assert "padding_end=[0, 1, 1]" in text and "padding=[2, 1, 1]" in text, text
    flow.reset_launch_count()
    jitted(to_flow(x), to_flow(w), to_flow(b))
    assert flow.launch_count() == 0, text  # the library call alone
