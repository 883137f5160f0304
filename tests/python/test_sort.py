"""torch.sort, argsort, msort and topk (one op, argsort, dsl/ops/sort.cpp) against PyTorch: every
dtype, every dim, ascending and descending, NaN, infinities, signed zeros and ties, edge sizes (0,
1, odd, one tile of the GPU sort and longer lines that need its global merge steps), transposed and
sliced inputs, eagerly and under flow.jit, on the CPU and (marker `gpu`) on a CUDA device.

flow's sort is always stable, so its indices are compared with torch's stable sort, and topk's with
the first k of that (torch leaves the order of topk's ties unspecified; its values are compared with
torch.topk's too).
"""
import pytest
import torch

import flow
from conftest import ALL_DTYPES, TDEV, assert_same, make, raises_like, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]

# (shape, dim): sizes 0, 1, odd, a 2048-element line (one GPU tile) and longer ones.
CASES = [((0,), 0), ((1,), 0), ((7,), 0), ((5, 33), 1), ((5, 33), 0), ((2, 3, 17), 1), ((4, 0, 3), 1),
         ((2, 2048), -1), ((2, 2049), 1), ((3000,), 0)]


def pair(shape, dtype, gen, device, layout="contiguous"):
    """(torch CPU tensor, flow tensor on `device`) with equal values: ties (a small range) and, for
    floats, NaN, infinities and signed zeros."""
    shape = tuple(shape)
    kw = {"low": -4, "high": 4} if not dtype.is_floating_point and dtype != torch.bool else {}

    def build(s):
        t = make(s, dtype, gen, special=dtype.is_floating_point, **kw)
        if dtype.is_floating_point:  # ties: values rounded to halves
            t = torch.where(torch.isfinite(t), (t * 2).round() / 2, t)
        return t

    if layout == "transposed" and len(shape) >= 2:
        base = build(shape[::-1])
        perm = list(range(len(shape)))[::-1]
        return base.permute(perm), to_flow(base).to(device).permute(perm)
    if layout == "sliced" and len(shape) >= 1:
        base = build(shape[:-1] + (2 * shape[-1] + 1,))
        return base[..., 1::2], to_flow(base).to(device)[..., 1::2]
    base = build(shape)
    return base, to_flow(base).to(device)


def check_pair(got, values, indices, msg):
    v, i = got
    assert v.device.type == i.device.type
    assert_same(i.cpu(), indices, rtol=0, atol=0, msg=msg + " indices")
    assert_same(v.cpu(), values, rtol=0, atol=0, msg=msg + " values")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", CASES, ids=str)
def test_sort_matches_torch_stable_sort(shape, dim, dtype, device, gen):
    t, f = pair(shape, dtype, gen, device)
    for descending in (False, True):
        msg = f"sort {dtype} {shape} dim={dim} descending={descending} on {device}"
        want = torch.sort(t, dim=dim, descending=descending, stable=True)
        check_pair(flow.sort(f, dim, descending), want.values, want.indices, msg)
        assert_same(flow.argsort(f, dim=dim, descending=descending).cpu(), want.indices, msg=msg + " argsort")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64], ids=str)
@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_sort_of_views(layout, dtype, device, gen):
    for shape in ((6, 9), (3, 4, 5)):
        t, f = pair(shape, dtype, gen, device, layout)
        for dim in range(len(shape)):
            want = torch.sort(t, dim=dim, stable=True)
            check_pair(f.sort(dim), want.values, want.indices, f"sort of a {layout} {shape} view, dim {dim}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_topk_matches_torch(dtype, device, gen):
    for shape, dim in (((5, 33), 1), ((33, 5), 0), ((2, 3000), 1), ((6,), 0), ((4, 0), 0)):
        t, f = pair(shape, dtype, gen, device)
        n = shape[dim]
        for k in sorted({0, 1, min(3, n), n}):
            for largest in (True, False):
                msg = f"topk {dtype} {shape} dim={dim} k={k} largest={largest} on {device}"
                got = flow.topk(f, k, dim=dim, largest=largest)
                stable = torch.sort(t, dim=dim, descending=largest, stable=True)
                check_pair(got, stable.values.narrow(dim, 0, k), stable.indices.narrow(dim, 0, k), msg)
                if dtype != torch.bool:  # torch has no topk of bool
                    ref = torch.topk(t, k, dim=dim, largest=largest)
                    assert_same(got.values.cpu(), ref.values, rtol=0, atol=0, msg=msg + " vs torch.topk")


@pytest.mark.parametrize("device", DEVICES)
def test_sort_and_topk_under_jit(device, gen):
    """Sorting inside a traced function: the indices' consumers and a gather of the values fuse into
    their own kernels; results equal eager flow and torch."""

    def body(lib, x):
        v, i = x.topk(5)
        s = lib.sort(x, dim=0, descending=True)
        return v * 2 + 1, i, s.values.sum(0), lib.argsort(x, dim=1)[:, :3], x.msort()

    jitted = flow.jit(lambda x: body(flow, x))
    for shape in ((8, 40), (3, 7)):
        t = make(shape, torch.float32, gen)  # distinct values: torch.topk orders ties its own way
        f = to_flow(t).to(device)
        want = body(torch, t)
        for how, got in (("jit", jitted(f)), ("eager", body(flow, f))):
            for k, (a, b) in enumerate(zip(got, want)):
                assert a.device.type == device
                if k == 2:  # a float sum: summation order may differ
                    assert_same(a.cpu(), b, msg=f"{how} output {k} {shape}")
                else:
                    assert_same(a.cpu(), b, rtol=0, atol=0, msg=f"{how} output {k} {shape}")


@pytest.mark.parametrize("device", DEVICES)
def test_sort_of_zero_dim_and_out(device, gen):
    t = torch.tensor(2.5)
    f = to_flow(t).to(device)
    v, i = flow.sort(f)
    assert v.shape == () and i.shape == () and float(v.cpu()) == 2.5 and int(i.cpu()) == 0
    v, i = flow.topk(f, 1)
    assert float(v.cpu()) == 2.5 and int(i.cpu()) == 0
    t, f = pair((4, 6), torch.float32, gen, device)
    vo, io = flow.empty(4, 6, device=device), flow.empty(4, 6, dtype=flow.int64, device=device)
    r = flow.sort(f, 1, out=(vo, io))
    want = torch.sort(t, dim=1, stable=True)
    assert r.values is vo and r.indices is io
    check_pair((vo, io), want.values, want.indices, "sort(out=...)")


def test_sort_errors_match_torch(gen):
    t = make((3, 4), torch.float32, gen)
    f = to_flow(t)
    cases = [
        (lambda m, x: m.topk(x, 5), "k above the line length"),
        (lambda m, x: m.topk(x, -1), "negative k"),
        (lambda m, x: m.topk(x, 2, dim=2), "dim out of range"),
        (lambda m, x: m.sort(x, dim=-3), "dim out of range"),
        (lambda m, x: m.topk(x, 1.5), "k not an int"),
        (lambda m, x: m.sort(x, descending="yes"), "descending not a bool"),
        (lambda m, x: m.argsort(x, dim=None), "dim None"),
        (lambda m, x: m.topk([1.0, 2.0], 1), "a list, not a tensor"),
    ]
    for fn, what in cases:
        assert raises_like(lambda: fn(torch, t), lambda: fn(flow, f)), what
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        flow.topk(f, 5)


def test_sort_runs_as_one_library_call(gen):
    """The plan: argsort is a library step of its own (no kernel), the gather of the values a kernel."""
    fn = flow.jit(lambda x: flow.sort(x, dim=1).values * 3)
    t = make((4, 9), torch.float32, gen)
    fn(to_flow(t))
    text = fn.explain()
    assert "argsort" in text and "flow sort" in text, text
    assert TDEV in ("cpu", "cuda")
