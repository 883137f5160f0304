"""The scatter family (one op, dsl/ops/scatter.cpp; python/flow/_scatter.py) against PyTorch:
scatter, scatter_add, scatter_reduce (every reduction, with and without self), index_add,
index_copy, index_fill, index_reduce, index_put, put, masked_scatter, bincount and histc, over every
dtype torch supports, dims, index shapes smaller than src and self, duplicate indices, NaN,
empty and 0-size inputs, non-contiguous operands, the in-place forms, eagerly and under flow.jit,
on the CPU and (marker `gpu`) on a CUDA device.

Duplicate indices: reduce "none" keeps the last value along dim on the CPU (torch's CPU order, the
one compared here); on CUDA the winner is unspecified (as in torch), so GPU cases of plain scatter
use distinct targets. Float sums over duplicates may round in another order on CUDA: compared
with the dtype's tolerance.
"""
import pytest
import torch

import flow
from conftest import ALL_DTYPES, assert_same, make, raises_like, to_flow, to_torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]
REDUCES = ["sum", "prod", "mean", "amax", "amin"]

# (self shape, index shape, src shape, dim)
CASES = [((7,), (12,), (15,), 0), ((3, 5), (3, 4), (4, 6), 1), ((4, 3), (6, 3), (6, 3), 0),
         ((2, 5, 4), (2, 3, 4), (2, 3, 5), 1), ((2, 3), (0, 3), (1, 3), 0), ((1,), (1,), (1,), 0),
         ((5, 2), (5, 2), (5, 2), -1)]


def _f(t, device):
    return to_flow(t).to(device) if device != "cpu" else to_flow(t)


def _back(t):
    return to_torch(t.cpu())


def _index(gen, index_shape, size, dim, distinct):
    """Random targets in [0, size); `distinct`: no two positions of a line along dim share one."""
    if not distinct:
        return torch.randint(0, size, index_shape, generator=gen)
    n = index_shape[dim]
    assert n <= size
    lines = torch.argsort(torch.rand(list(index_shape[:dim]) + [size] + list(index_shape[dim + 1:]), generator=gen),
                          dim=dim)
    return lines.narrow(dim, 0, n).contiguous()


def _stepwise_tol(dtype, x, source, terms):
    """torch's index_add, index_reduce's mean, index_put and put with accumulate add term by term,
    rounding half precision at each step; flow sums in float32 and rounds once. The results are
    then a few units in the last place of the terms apart: this atol (none for other dtypes)."""
    if dtype not in (torch.float16, torch.bfloat16) or x.numel() == 0:
        return {}
    return {"atol": 4 * torch.finfo(dtype).eps * (x.abs().max().item() + terms * source.abs().max().item())}


def _values(shape, dtype, gen, reduce):
    if reduce == "prod" and dtype.is_floating_point:  # products of few factors near 1
        return make(shape, dtype, gen, low=0.5, high=1.5)
    if reduce == "prod" and dtype != torch.bool:
        return make(shape, dtype, gen, low=-2, high=3)
    return make(shape, dtype, gen, special=reduce in ("amax", "amin"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_scatter_and_scatter_add(dtype, device, gen):
    for shape, ishape, sshape, dim in CASES:
        d = dim % len(shape)
        x, src = make(shape, dtype, gen), make(sshape, dtype, gen)
        distinct = ishape[d] <= shape[d] and device != "cpu"
        idx = _index(gen, ishape, shape[d], d, distinct)
        msg = f"{shape} {ishape} {sshape} dim={dim}"
        if ishape[d] <= shape[d] or device == "cpu":
            assert_same(flow.scatter(_f(x, device), dim, _f(idx, device), _f(src, device)).cpu(),
                        torch.scatter(x, dim, idx, src), msg=msg)
        assert_same(_f(x, device).scatter_add(dim, _f(idx, device), _f(src, device)).cpu(),
                    x.scatter_add(dim, idx, src), msg=msg + " add")
        value = True if dtype == torch.bool else 3 if not dtype.is_floating_point else -1.5
        if distinct or device == "cpu":
            assert_same(flow.scatter(_f(x, device), dim, _f(idx, device), value).cpu(),
                        torch.scatter(x, dim, idx, value), msg=msg + " value")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self, device, gen):
    for shape, ishape, sshape, dim in CASES:
        x = _values(shape, dtype, gen, reduce)
        src = _values(sshape, dtype, gen, reduce)
        idx = torch.randint(0, shape[dim % len(shape)], ishape, generator=gen)
        flow_fn = lambda: _f(x, device).scatter_reduce(dim, _f(idx, device), _f(src, device), reduce,  # noqa: E731
                                                       include_self=include_self)
        torch_fn = lambda: x.scatter_reduce(dim, idx, src, reduce, include_self=include_self)  # noqa: E731
        if raises_like(torch_fn, flow_fn):
            continue
        expected = torch_fn()
        # mean of halves: torch divides in float32 and rounds once, as flow; the sum's rounding
        # order over duplicates differs on CUDA
        assert_same(flow_fn().cpu(), expected, msg=f"{reduce} {shape} {ishape} dim={dim}")


@pytest.mark.parametrize("device", DEVICES)
def test_half_precision_accumulates_in_float32(device):
    """torch's kernels accumulate half sums in float32: 3000 ones into one float16 element are 3000."""
    for dt in (flow.float16, flow.bfloat16):
        ones = flow.ones(3000, dtype=dt, device=device)
        got = flow.zeros(2, dtype=dt, device=device).scatter_add(0, flow.zeros(3000, dtype=flow.int64,
                                                                                device=device), ones)
        expected = torch.zeros(2, dtype=flow_to_torch_dtype(dt)).scatter_add(
            0, torch.zeros(3000, dtype=torch.long), torch.ones(3000, dtype=flow_to_torch_dtype(dt)))
        assert_same(got.cpu(), expected)
        assert got[0].item() == expected[0].item() == (3000 if dt is flow.float16 else 3008)


def flow_to_torch_dtype(dt):
    return {flow.float16: torch.float16, flow.bfloat16: torch.bfloat16}[dt]


def test_duplicates_keep_the_last_value_along_dim_on_the_cpu(gen):
    x = make((4, 6), torch.float32, gen)
    idx = torch.randint(0, 2, (4, 6), generator=gen)
    src = make((4, 6), torch.float32, gen)
    assert torch.equal(_back(flow.scatter(to_flow(x), 1, to_flow(idx), to_flow(src))), torch.scatter(x, 1, idx, src))


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_operands_and_in_place_forms(device, gen):
    x = make((6, 5), torch.float32, gen)
    src = make((7, 8), torch.float32, gen).t()[:, 1:6]  # [8, 7] viewed, then sliced to [8, 5]: strided
    idx = torch.randint(0, 5, (5, 6), generator=gen).t()  # [6, 5], transposed
    expected = x.scatter_add(1, idx, src[:6])
    fx = _f(x, device)
    view = fx[2:]  # a view of the written storage sees the in-place result
    out = fx.scatter_add_(1, _f(idx, device), _f(src, device)[:6])
    assert out is fx
    assert_same(fx.cpu(), expected)
    assert_same(view.cpu(), expected[2:])
    y = make((3, 4), torch.int64, gen)
    fy = _f(y, device)
    ix = torch.randint(0, 4, (3, 4), generator=gen)
    s = make((3, 4), torch.int64, gen)
    fy.scatter_reduce_(1, _f(ix, device), _f(s, device), "amax", include_self=False)
    assert_same(fy.cpu(), y.scatter_reduce(1, ix, s, "amax", include_self=False))
    fz = _f(y, device)
    fz.scatter_(1, _f(ix, device)[:, :1], 7)
    assert_same(fz.cpu(), y.scatter(1, ix[:, :1], 7))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32], ids=str)
def test_index_ops(dtype, device, gen):
    for shape, dim, n in [((5, 3), 0, 7), ((2, 6, 3), 1, 4), ((4,), 0, 9), ((3, 4), -1, 2), ((3, 0), 0, 2)]:
        x = make(shape, dtype, gen)
        d = dim % len(shape)
        sshape = list(shape)
        sshape[d] = n
        source = make(sshape, dtype, gen)
        index = torch.randint(0, shape[d], (n,), generator=gen)
        unique = torch.randperm(shape[d], generator=gen)[:min(n, shape[d])]
        fx, fs, fi = _f(x, device), _f(source, device), _f(index, device)
        alpha = 2 if not dtype.is_floating_point else 0.5
        tol = _stepwise_tol(dtype, x, source, n)
        assert_same(fx.index_add(dim, fi, fs, alpha=alpha).cpu(), x.index_add(dim, index, source, alpha=alpha), **tol)
        assert_same(flow.index_add(fx, dim, fi.to(flow.int32), fs).cpu(), torch.index_add(x, dim, index.int(), source),
                    **tol)
        src_u = source.narrow(d, 0, unique.numel())
        assert_same(fx.index_copy(dim, _f(unique, device), _f(src_u, device)).cpu(), x.index_copy(dim, unique, src_u))
        fill = 3 if not dtype.is_floating_point else -2.5
        assert_same(fx.index_fill(dim, fi, fill).cpu(), x.index_fill(dim, index, fill))
        # torch's half prod also rounds after each factor (flow multiplies in float32 and rounds
        # once): each of the up to n + 1 roundings is half an ulp, relative.
        prod_tol = {"rtol": (n + 1) * torch.finfo(dtype).eps} if dtype in (torch.float16, torch.bfloat16) else {}
        for reduce in ("prod", "mean", "amax", "amin"):
            for include_self in (True, False):
                assert_same(fx.index_reduce(dim, fi, fs, reduce, include_self=include_self).cpu(),
                            x.index_reduce(dim, index, source, reduce, include_self=include_self),
                            msg=f"index_reduce {reduce} {include_self} {shape}",
                            **(tol if reduce == "mean" else prod_tol if reduce == "prod" else {}))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool], ids=str)
def test_index_put_and_put(dtype, device, gen):
    x = make((5, 4, 3), dtype, gen)
    fx = _f(x, device)
    i0 = torch.randint(-5, 5, (6,), generator=gen)
    i1 = torch.randint(-4, 4, (6,), generator=gen)
    vals = make((6, 3), dtype, gen)
    for accumulate in (True, False) if dtype != torch.bool else (False,):
        if not accumulate:  # distinct positions: the winner among duplicates is unspecified on CUDA
            i0, i1 = torch.tensor([0, 1, -1, 2, 3, -2]), torch.tensor([1, -1, 0, 2, 3, 0])
        got = fx.index_put((_f(i0, device), _f(i1, device)), _f(vals, device), accumulate=accumulate)
        assert_same(got.cpu(), x.index_put((i0, i1), vals, accumulate=accumulate), msg=f"acc={accumulate}",
                    **_stepwise_tol(dtype, x, vals, 6))
    bcast = make((3,), dtype, gen)  # values broadcast over the indexed positions
    assert_same(fx.index_put((_f(torch.tensor([[0], [4]]), device), _f(torch.tensor([1, 2]), device)),
                             _f(bcast, device)).cpu(),
                x.index_put((torch.tensor([[0], [4]]), torch.tensor([1, 2])), bcast))
    mask = torch.rand(5, generator=gen) > 0.5
    one = make((), dtype, gen)
    assert_same(fx.index_put((_f(mask, device),), _f(one, device)).cpu(), x.index_put((mask,), one))
    flat_idx = torch.randint(-60, 60, (10,), generator=gen)
    src = make((10,), dtype, gen)
    if dtype != torch.bool:
        assert_same(fx.put(_f(flat_idx, device), _f(src, device), accumulate=True).cpu(),
                    x.put(flat_idx, src, accumulate=True), **_stepwise_tol(dtype, x, src, 10))
    y, rows, v = _f(x, device), torch.tensor([0, -1, 2]), make((4, 3), dtype, gen)
    assert y.index_put_((_f(rows, device),), _f(v, device)) is y
    assert_same(y.cpu(), x.index_put((rows,), v))


@pytest.mark.parametrize("device", DEVICES)
def test_masked_scatter(device, gen):
    for shape, mshape in [((4, 5), (4, 5)), ((4, 5), (5,)), ((3, 4, 2), (1, 4, 1)), ((0, 3), (3,))]:
        x = make(shape, torch.float32, gen)
        mask = torch.rand(mshape, generator=gen) > 0.4
        source = make((30,), torch.float32, gen)
        assert_same(_f(x, device).masked_scatter(_f(mask, device), _f(source, device)).cpu(),
                    x.masked_scatter(mask, source))
    traced = flow.jit(lambda x, m, s: x.masked_scatter(m, s) * 2)
    x, mask, source = make((6, 7), torch.float32, gen), torch.rand(6, 7, generator=gen) > 0.5, make((42,), torch.float32, gen)
    assert_same(traced(_f(x, device), _f(mask, device), _f(source, device)).cpu(), x.masked_scatter(mask, source) * 2)


@pytest.mark.parametrize("device", DEVICES)
def test_bincount_and_histc(device, gen):
    for n, hi, minlength in [(50, 7, 0), (0, 1, 3), (20, 3, 10), (1, 1, 0)]:
        x = torch.randint(0, hi, (n,), generator=gen)
        w = make((n,), torch.float32, gen)
        assert_same(flow.bincount(_f(x, device), minlength=minlength).cpu(), torch.bincount(x, minlength=minlength))
        assert_same(_f(x, device).bincount(_f(w, device)).cpu(), x.bincount(w))
        assert_same(flow.bincount(_f(x.int(), device), _f(w.double(), device)).cpu(), torch.bincount(x.int(), w.double()))
    v = make((200,), torch.float32, gen)
    for bins, lo, hi in [(10, -2.0, 2.0), (7, 0.0, 0.0), (1, -1.0, 1.0)]:
        assert_same(flow.histc(_f(v, device), bins, lo, hi).cpu(), torch.histc(v, bins, lo, hi), msg=f"{bins} {lo} {hi}")
    for same in (torch.full((4,), 2.0), torch.zeros(0)):
        assert_same(flow.histc(_f(same, device), 3).cpu(), torch.histc(same, 3))
    with pytest.raises(flow.TraceError, match="bincount"):
        flow.jit(lambda x: flow.bincount(x))(flow.tensor([1, 2]))


@pytest.mark.parametrize("device", DEVICES)
def test_under_jit_with_fused_consumers(device, gen):
    def f(lib, x, idx, src, w):
        h = lib.relu(x.scatter_add(1, idx, src * 2.0)) + 1.0
        counts = lib.zeros(x.shape[1], dtype=x.dtype, device=x.device).index_add(0, idx[0], w)
        return h.scatter_reduce(1, idx[:2], src[:2], "amax"), counts

    x, src = make((3, 8), torch.float32, gen), make((3, 5), torch.float32, gen)
    idx = torch.randint(0, 8, (3, 5), generator=gen)
    w = make((5,), torch.float32, gen)
    jf = flow.jit(lambda *a: f(flow, *a))
    args = [_f(t, device) for t in (x, idx, src, w)]
    for _ in range(2):  # the second call reuses the compiled variant
        got = jf(*args)
        for g, e in zip(got, f(torch, x, idx, src, w)):
            assert_same(g.cpu(), e)


def test_bad_arguments_raise_like_torch(gen):
    x = torch.zeros(3, 4)
    cases = [
        lambda m: m.zeros(5).scatter_add(0, m.tensor([7]), m.ones(1)),  # out of range
        lambda m: m.zeros(5).scatter_add(0, m.tensor([-1]), m.ones(1)),
        lambda m: m.zeros(3).scatter_add(0, m.tensor([0.0]), m.ones(1)),  # float index
        lambda m: m.zeros(3).scatter_add(0, m.tensor([0, 1]), m.ones(2, dtype=m.float64)),  # dtypes differ
        lambda m: m.zeros(3, 2).scatter_add(0, m.tensor([[0, 1, 1]]), m.ones(1, 3)),  # index too large
        lambda m: m.zeros(3, 2).scatter_add(0, m.tensor([0, 1]), m.ones(2)),  # ranks differ
        lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0]), m.ones(1), "median"),
        lambda m: m.zeros(3).scatter(0, m.tensor([0]), m.ones(1), reduce="max"),
        lambda m: m.zeros(3, dtype=m.bool).scatter_reduce(0, m.tensor([0]), m.ones(1, dtype=m.bool), "mean"),
        lambda m: m.zeros(2, 3).index_add(1, m.tensor([[0]]), m.ones(2, 1)),
        lambda m: m.zeros(2, 3).index_add(1, m.tensor([0, 1]), m.ones(2, 1)),
        lambda m: m.zeros(2, 3).index_add(1, m.tensor([0.0]), m.ones(2, 1)),
        lambda m: m.zeros(2, 3).index_add(1, m.tensor([5]), m.ones(2, 1)),
        lambda m: m.zeros(2, 3).index_reduce(1, m.tensor([0]), m.ones(2, 1), "sum"),
        lambda m: m.zeros(3, 4).index_put((m.tensor([3]),), m.tensor(1.0)),
        lambda m: m.zeros(3, 4).index_put((m.tensor([0, 1]),), m.ones(3, 4)),
        lambda m: m.zeros(3).masked_scatter(m.tensor([True, True, False]), m.ones(1)),
        lambda m: m.zeros(3).masked_scatter(m.tensor([1, 0, 0]), m.ones(3)),
        lambda m: m.bincount(m.tensor([-1, 2])),
        lambda m: m.bincount(m.tensor([[1]])),
        lambda m: m.histc(m.tensor([1, 2]), bins=3),
        lambda m: m.zeros(5).put(m.tensor([7]), m.ones(1)),
    ]
    for i, fn in enumerate(cases):
        assert raises_like(lambda: fn(torch), lambda: fn(flow)), f"case {i}: torch accepts it"
    assert x.sum() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_index_out_of_range_raises_on_every_device(device):
    """The CPU raises at the call; the CUDA kernel skips the position, reports it into the device's
    error word and the next synchronization raises torch's message (as torch's device-side assert
    does, but the device works afterwards)."""
    x = _f(torch.zeros(3, 4), device)
    src = _f(torch.ones(2, 4), device)
    for bad in (7, -1):
        index = _f(torch.tensor([[0, 1, 2, 0], [1, bad, 0, 2]]), device)
        with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds for dimension 0 with size 3"):
            x.scatter_add(0, index, src).cpu()
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1 with size 4"):
        x.scatter_reduce(1, _f(torch.tensor([[5, 0], [1, 2]]), device), src, "amax")
        flow.cuda.synchronize()
    good = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 2]])
    assert_same(x.scatter_add(0, _f(good, device), src).cpu(), torch.zeros(3, 4).scatter_add(0, good, torch.ones(2, 4)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_whole_row_scatters(dtype, device, gen):
    """index_add/index_copy/index_reduce/index_put write whole rows (the index broadcast over the
    dims after dim): wide rows (the CPU's row mode, never materializing the broadcast) with
    duplicates, outer dims before dim, and every reduction."""
    for shape, dim, n in [((40, 24), 0, 300), ((3, 50, 16), 1, 90), ((2, 3, 7, 9), 2, 20)]:
        x = make(shape, dtype, gen)
        sshape = list(shape)
        sshape[dim] = n
        source = make(sshape, dtype, gen)
        index = torch.randint(0, shape[dim], (n,), generator=gen)
        fx, fs, fi = _f(x, device), _f(source, device), _f(index, device)
        assert_same(fx.index_add(dim, fi, fs).cpu(), x.index_add(dim, index, source), msg=f"add {shape}",
                    **({"rtol": 1e-5, "atol": 1e-5} if device != "cpu" else {}))
        for reduce in ("prod", "mean", "amax", "amin"):
            for include_self in (True, False):
                src = source if reduce != "prod" else source.clamp(-2, 2)
                assert_same(fx.index_reduce(dim, fi, _f(src, device), reduce, include_self=include_self).cpu(),
                            x.index_reduce(dim, index, src, reduce, include_self=include_self),
                            msg=f"{reduce} {include_self} {shape}", **({"rtol": 1e-4} if reduce == "prod" else {}))
        unique = torch.randperm(shape[dim], generator=gen)[:min(n, shape[dim])]
        src_u = source.narrow(dim, 0, unique.numel())
        assert_same(fx.index_copy(dim, _f(unique, device), _f(src_u, device)).cpu(), x.index_copy(dim, unique, src_u))
    big = make((64, 32), dtype, gen)
    rows = torch.randint(0, 64, (200,), generator=gen)
    vals = make((200, 32), dtype, gen)
    assert_same(_f(big, device).index_put((_f(rows, device),), _f(vals, device), accumulate=True).cpu(),
                big.index_put((rows,), vals, accumulate=True), **({"rtol": 1e-5, "atol": 1e-5} if device != "cpu" else {}))
    with pytest.raises(RuntimeError, match="index 64 is out of bounds for dimension 0 with size 64"):
        to_flow(big).index_add(0, to_flow(torch.tensor([3, 64])), to_flow(vals[:2]))
