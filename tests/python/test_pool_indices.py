"""max_pool1d/2d and adaptive_max_pool1d/2d with return_indices=True, and max_unpool1d/2d, against
PyTorch: values and indices equal (ties give the first maximum, NaN the last NaN, an all -inf
window its first position), eager and under flow.jit, on the CPU and (marker `gpu`) on CUDA."""
import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn.functional as F
from conftest import assert_same, make, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def _input(shape, dtype, gen):
    """Values with ties (rounded to halves), NaN, +-inf and all -inf rows."""
    t = (make(shape, dtype, gen, special=True).float() * 2).round() / 2
    t[..., 0, :] = -float("inf")  # windows at the top edge that see only -inf and padding
    return t.to(dtype)


def _same_pool(got, want, msg):
    assert isinstance(got, tuple) and len(got) == 2, msg
    assert_same(got[0].cpu(), want[0], rtol=0, atol=0, msg=msg + " values")
    assert_same(got[1].cpu(), want[1], rtol=0, atol=0, msg=msg + " indices")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("kw", [
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (2, 3), "stride": (1, 2), "ceil_mode": True},
    {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 2},
    {"kernel_size": 5, "stride": 3, "padding": 2},
    {"kernel_size": 1},
], ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_max_pool2d_return_indices(device, dtype, kw, gen):
    for shape in [(2, 3, 11, 9), (3, 7, 8), (1, 1, 5, 5)]:
        t = _input(shape, dtype, gen)
        want = TF.max_pool2d(t, return_indices=True, **kw)
        f = to_flow(t).to(device)
        _same_pool(F.max_pool2d(f, return_indices=True, **kw), want, f"eager {shape}")
        jitted = flow.jit(lambda x: F.max_pool2d(x, return_indices=True, **kw))
        _same_pool(jitted(f), want, f"jit {shape}")
    # A channels-last input, and the module.
    t = _input((2, 4, 9, 10), dtype, gen).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    pool = flow.nn.MaxPool2d(return_indices=True, **kw)
    _same_pool(pool(to_flow(t).to(device)), torch.nn.MaxPool2d(return_indices=True, **kw)(t), "module, channels-last")


@pytest.mark.parametrize("device", DEVICES)
def test_max_pool2d_windows_in_the_padding(device, gen):
    """Dilation and ceil_mode allow windows whose taps all fall in the padding (they straddle the
    input): torch gives -inf at the window's first tap at or after 0, even past the input."""
    for shape, kw in [((2, 3, 2, 5), {"kernel_size": 2, "padding": 1, "dilation": 3}),
                      ((1, 2, 2, 1), {"kernel_size": (1, 3), "stride": (1, 3), "padding": (0, 1), "dilation": (1, 2),
                                      "ceil_mode": True}),
                      ((3, 2, 5), {"kernel_size": (2, 1), "padding": (1, 0), "dilation": (3, 1)})]:
        t = make(shape, torch.float32, gen)
        want = TF.max_pool2d(t, return_indices=True, **kw)
        assert bool(torch.isinf(want[0]).any()), kw  # the case holds an empty window
        f = to_flow(t).to(device)
        _same_pool(F.max_pool2d(f, return_indices=True, **kw), want, f"eager {shape} {kw}")
        _same_pool(flow.jit(lambda x: F.max_pool2d(x, return_indices=True, **kw))(f), want, f"jit {shape} {kw}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out", [(1, 1), (4, 5), (3, 3), (11, 9), (7, None)], ids=str)
def test_adaptive_max_pool2d_return_indices(device, out, gen):
    """Equal and unequal adaptive windows (11 -> 4 rows: windows of 3 and 4), and a global pool of
    a larger map (one 40 x 36 window: the scan is separable, 76 steps)."""
    big = _input((1, 2, 40, 36), torch.float32, gen)
    want = TF.adaptive_max_pool2d(big, out, return_indices=True)
    _same_pool(F.adaptive_max_pool2d(to_flow(big).to(device), out, return_indices=True), want, f"40 x 36 {out}")
    t = _input((2, 3, 11, 9), torch.float32, gen)
    f = to_flow(t).to(device)
    want = TF.adaptive_max_pool2d(t, out, return_indices=True)
    _same_pool(F.adaptive_max_pool2d(f, out, return_indices=True), want, f"eager {out}")
    _same_pool(flow.jit(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True))(f), want, f"jit {out}")
    _same_pool(flow.nn.AdaptiveMaxPool2d(out, return_indices=True)(f[0]),
               torch.nn.AdaptiveMaxPool2d(out, return_indices=True)(t[0]), f"module, unbatched {out}")


@pytest.mark.parametrize("device", DEVICES)
def test_1d_pools_return_indices(device, gen):
    t = _input((2, 3, 17), torch.float32, gen)
    f = to_flow(t).to(device)
    _same_pool(F.max_pool1d(f, 4, 3, 2, return_indices=True), TF.max_pool1d(t, 4, 3, 2, return_indices=True),
               "max_pool1d")
    _same_pool(F.adaptive_max_pool1d(f, 5, return_indices=True), TF.adaptive_max_pool1d(t, 5, return_indices=True),
               "adaptive_max_pool1d")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_max_unpool_inverts_max_pool(device, dtype, gen):
    t = make((2, 3, 12, 10), dtype, gen)
    f = to_flow(t).to(device)
    for k, s, p, size in [(2, 2, 0, None), (3, 2, 1, (12, 10)), (2, None, 0, (1, 1, 13, 11))]:
        tv, ti = TF.max_pool2d(t, k, s, p, return_indices=True)
        fv, fi = F.max_pool2d(f, k, s, p, return_indices=True)
        want = TF.max_unpool2d(tv, ti, k, s, p, size)
        assert_same(F.max_unpool2d(fv, fi, k, s, p, size).cpu(), want, rtol=0, atol=0, msg=f"{k} {s} {p} {size}")
        jitted = flow.jit(lambda v, i: flow.nn.MaxUnpool2d(k, s, p)(v, i, output_size=size))
        assert_same(jitted(fv, fi).cpu(), want, rtol=0, atol=0, msg=f"jit {k} {s} {p} {size}")
    t1 = t[0]  # [3, 12, 10] as a batch of 3 sequences
    tv, ti = TF.max_pool1d(t1, 3, 2, return_indices=True)
    fv, fi = F.max_pool1d(to_flow(t1).to(device), 3, 2, return_indices=True)
    assert_same(F.max_unpool1d(fv, fi, 3, 2).cpu(), TF.max_unpool1d(tv, ti, 3, 2), rtol=0, atol=0, msg="1d")


def test_max_unpool_bad_arguments_raise_like_torch(gen):
    t = make((1, 2, 4, 4), torch.float32, gen)
    tv, ti = TF.max_pool2d(t, 2, return_indices=True)
    fv, fi = to_flow(tv), to_flow(ti)
    for args, kwargs, exc in [((2,), {"output_size": (20, 20)}, ValueError),  # outside the sizes a pool gives
                              ((2,), {"output_size": (2, 4, 4)}, ValueError),  # 2 or 4 elements only
                              ((2,), {}, None)]:
        if exc is None:
            assert_same(F.max_unpool2d(fv, fi, *args, **kwargs), TF.max_unpool2d(tv, ti, *args, **kwargs))
            continue
        with pytest.raises(exc):
            TF.max_unpool2d(tv, ti, *args, **kwargs)
        with pytest.raises(exc):
            F.max_unpool2d(fv, fi, *args, **kwargs)
    with pytest.raises(RuntimeError, match="int64"):
        F.max_unpool2d(fv, fi.to(flow.int32), 2)
    with pytest.raises(RuntimeError, match="shape of indices"):
        F.max_unpool2d(fv, fi[..., :1], 2)
    bad = fi.clone()
    bad[0, 0, 0, 0] = 100  # outside the 4 x 4 output
    with pytest.raises((RuntimeError, IndexError)):
        TF.max_unpool2d(tv, torch.from_numpy(bad.numpy()), 2)
    with pytest.raises((RuntimeError, IndexError)):
        F.max_unpool2d(fv, bad, 2).numpy()
