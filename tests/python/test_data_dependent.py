"""nonzero/argwhere, masked_select and unique (eager only: the output size depends on the values;
under flow.jit a TraceError), and searchsorted/bucketize (compositions that trace), against PyTorch
over dtypes, edge sizes, NaN and non-contiguous inputs, on the CPU and (marker `gpu`) on CUDA."""
import pytest
import torch

import flow
from conftest import ALL_DTYPES, assert_same, make, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]


def pair(shape, dtype, gen, device, **kw):
    t = make(shape, dtype, gen, **kw)
    return t, to_flow(t).to(device)


def same(got, want, msg):
    assert got.device.type in ("cpu", "cuda")
    assert_same(got.cpu(), want, rtol=0, atol=0, msg=msg)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_nonzero_masked_select_unique(dtype, device, gen):
    for shape in ((), (0,), (7,), (4, 5), (2, 3, 4)):
        kw = {"low": -2, "high": 2} if not dtype.is_floating_point and dtype != torch.bool else {}
        t, f = pair(shape, dtype, gen, device, **kw)
        if dtype.is_floating_point:  # zeros and repeats
            t = (t * 2).round() / 2
            f = to_flow(t).to(device)
        msg = f"{dtype} {shape} {device}"
        same(flow.nonzero(f), torch.nonzero(t), "nonzero " + msg)
        same(f.argwhere(), t.argwhere(), "argwhere " + msg)
        for g, w in zip(flow.nonzero(f, as_tuple=True), torch.nonzero(t, as_tuple=True)):
            same(g, w, "nonzero as_tuple " + msg)
        got, want = flow.where(f), torch.where(t)  # where(condition) is nonzero(as_tuple=True)
        assert isinstance(got, tuple) and len(got) == len(want), msg
        for g, w in zip(got, want):
            same(g, w, "where(condition) " + msg)
        if len(shape) == 2:
            same(f.t().nonzero(), t.t().nonzero(), "nonzero of a transposed view " + msg)
            same(flow.masked_select(f, f.t().t() != 0), torch.masked_select(t, t != 0), "masked_select " + msg)
            same(flow.masked_select(f, flow.tensor([True, False, True, True, False]).to(device)),
                 torch.masked_select(t, torch.tensor([True, False, True, True, False])), "masked_select bcast " + msg)
        if dtype == torch.float16 and device == "cpu" or dtype == torch.bool and shape == ():
            continue  # torch's CPU unique has no float16 kernel; flow's agrees with the other dtypes
        got = flow.unique(f, return_inverse=True, return_counts=True)
        want = torch.unique(t, return_inverse=True, return_counts=True)
        for g, w, what in zip(got, want, ("values", "inverse", "counts")):
            same(g, w, f"unique {what} " + msg)
        if len(shape) == 2:
            got = flow.unique(f, dim=0, return_inverse=True)
            want = torch.unique(t, dim=0, return_inverse=True)
            same(got[0], want[0], "unique dim 0 " + msg)
            same(got[1], want[1], "unique dim 0 inverse " + msg)


def test_data_dependent_ops_refuse_tracing(gen):
    f = to_flow(make((3, 4), torch.float32, gen))
    for fn in (lambda x: flow.nonzero(x), lambda x: flow.unique(x), lambda x: x.masked_select(x > 0),
               lambda x: flow.where(x > 0)):
        with pytest.raises(flow.TraceError, match="depends on"):
            flow.jit(fn)(f)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.float16], ids=str)
def test_searchsorted_and_bucketize(dtype, device, gen):
    bound = torch.sort(make((9,), dtype, gen, **({} if dtype.is_floating_point else {"low": -5, "high": 5}))).values
    fb = to_flow(bound).to(device)
    t, f = pair((4, 6), dtype, gen, device, **({"special": True} if dtype.is_floating_point else {}))
    if dtype.is_floating_point:  # values equal to boundaries, too
        t[0, :3] = bound[:3]
        f = to_flow(t).to(device)
    for right in (False, True):
        msg = f"{dtype} right={right} {device}"
        same(flow.searchsorted(fb, f, right=right), torch.searchsorted(bound, t, right=right), "searchsorted " + msg)
        same(flow.searchsorted(fb, f.t(), side="right" if right else "left"),
             torch.searchsorted(bound, t.t().contiguous(), side="right" if right else "left"), "searchsorted side " + msg)
        same(flow.bucketize(f, fb, right=right), torch.bucketize(t, bound, right=right), "bucketize " + msg)
        same(flow.bucketize(f, fb, right=right, out_int32=True), torch.bucketize(t, bound, right=right,
                                                                               out_int32=True), "int32 " + msg)
        traced = flow.jit(lambda x, b: flow.bucketize(x, b, right=right) * 2)
        same(traced(f, fb), torch.bucketize(t, bound, right=right) * 2, "bucketize traced " + msg)
    rows = torch.sort(make((4, 5), dtype, gen), dim=1).values
    same(flow.searchsorted(to_flow(rows).to(device), f), torch.searchsorted(rows, t), f"row-wise boundaries {dtype}")
    with pytest.raises(RuntimeError, match="first N-1"):
        flow.searchsorted(to_flow(rows).to(device), f[:3])
