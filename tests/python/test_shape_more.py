"""torch's shape functions flow lacked (an AttributeError under `import flow as torch`): tile,
ravel, diag_embed, diagflat, select_scatter, slice_scatter, diagonal_scatter, unique_consecutive,
Tensor.H/mH/broadcast_to and the in-place view methods; eagerly and traced, against torch on fresh
random inputs, over offsets, dims (negative too) and the dtypes."""
import itertools

import pytest
import torch

import flow
from conftest import ALL_DTYPES, assert_same, make, to_flow


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_diagonal_scatter_and_diag_embed(dtype, gen):
    x = make((3, 4, 5), dtype, gen)
    for off, d1, d2 in itertools.product([-2, 0, 1, 4], [0, 2, -1], [1, -3, 2]):
        if (d1 % 3) == (d2 % 3):
            continue
        src = make(tuple(torch.diagonal(x, off, d1, d2).shape), dtype, gen)
        want = torch.diagonal_scatter(x, src, off, d1, d2)
        assert_same(flow.diagonal_scatter(to_flow(x), to_flow(src), off, d1, d2), want)
        assert_same(flow.jit(lambda a, b: a.diagonal_scatter(b, off, d1, d2))(to_flow(x), to_flow(src)), want)
    v = make((2, 3), dtype, gen)
    for off, d1, d2 in itertools.product([-2, 0, 1], [0, 2, -1, -3], [1, -1, 0]):
        if (d1 % 3) == (d2 % 3):
            continue
        want = torch.diag_embed(v, off, d1, d2)
        assert_same(flow.diag_embed(to_flow(v), off, d1, d2), want)
        assert_same(flow.jit(lambda a: a.diag_embed(off, d1, d2))(to_flow(v)), want)
    for off in (-1, 0, 2):
        assert_same(flow.diagflat(to_flow(v), off), torch.diagflat(v, off))
    with pytest.raises(RuntimeError, match="diagonal"):
        flow.diagonal_scatter(to_flow(x), to_flow(x), 0, 0, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16], ids=str)
def test_select_and_slice_scatter(dtype, gen):
    x = make((3, 4, 7), dtype, gen)
    for d, i in [(0, 1), (1, -1), (2, 6), (-1, 0)]:
        src = make(tuple(torch.select(x, d, i).shape), dtype, gen)
        want = torch.select_scatter(x, src, d, i)
        assert_same(flow.select_scatter(to_flow(x), to_flow(src), d, i), want)
        assert_same(flow.jit(lambda a, b: flow.select_scatter(a, b, d, i))(to_flow(x), to_flow(src)), want)
    for d, s, e, st in [(0, None, None, 1), (1, 1, None, 2), (2, -3, -1, 1), (2, 0, 7, 3), (1, 2, 2, 1), (-1, 5, 100, 4)]:
        index = [slice(None)] * 3
        index[d] = slice(s, e, st)
        src = make(tuple(x[tuple(index)].shape), dtype, gen)
        want = torch.slice_scatter(x, src, d, s, e, st)
        assert_same(flow.slice_scatter(to_flow(x), to_flow(src), d, s, e, st), want)
        assert_same(flow.jit(lambda a, b: a.slice_scatter(b, d, s, e, st))(to_flow(x), to_flow(src)), want)
    for bad in (lambda m: m.select_scatter(m.ones(2, 3), m.ones(2), 0, 5),
                lambda m: m.select_scatter(m.ones(2, 3), m.ones(2), 0, 1)):
        with pytest.raises(Exception) as te:
            bad(torch)
        with pytest.raises(type(te.value)):
            bad(flow)


def test_unique_consecutive(gen):
    t = torch.randint(0, 3, (40,), generator=gen)
    for ri, rc in itertools.product([False, True], repeat=2):
        want = torch.unique_consecutive(t, return_inverse=ri, return_counts=rc)
        got = flow.unique_consecutive(to_flow(t), return_inverse=ri, return_counts=rc)
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert_same(g, w)
    m = torch.randint(0, 2, (9, 2), generator=gen)
    for dim in (0, 1, -1):
        want = torch.unique_consecutive(m, return_inverse=True, return_counts=True, dim=dim)
        for w, g in zip(want, to_flow(m).unique_consecutive(return_inverse=True, return_counts=True, dim=dim)):
            assert_same(g, w)
    assert_same(flow.unique_consecutive(to_flow(m.reshape(3, 6)), return_inverse=True)[1],
                torch.unique_consecutive(m.reshape(3, 6), return_inverse=True)[1])
    with pytest.raises(flow.TraceError, match="depends on the values"):
        flow.jit(flow.unique_consecutive)(to_flow(t))


def test_tile_ravel_h_broadcast_to_and_in_place_views(gen):
    y = make((2, 3), torch.float32, gen)
    x = make((2, 3, 4), torch.float32, gen)
    assert_same(to_flow(y).H, y.H)
    assert_same(to_flow(x).mH, x.mH)
    with pytest.raises(RuntimeError, match="only supported on matrices"):
        to_flow(x).H
    assert_same(flow.tile(to_flow(y), (2,)), torch.tile(y, (2,)))
    assert_same(flow.ravel(to_flow(y).t()), torch.ravel(y.t()))
    assert_same(to_flow(y).ravel(), y.ravel())
    assert_same(to_flow(y).broadcast_to((4, 2, 3)), y.broadcast_to((4, 2, 3)))
    fy, ty = to_flow(y), y.clone()
    for op, args in [("unsqueeze_", (1,)), ("transpose_", (0, 2)), ("squeeze_", (1,)), ("t_", ())]:
        assert getattr(fy, op)(*args) is fy
        getattr(ty, op)(*args)
        assert_same(fy, ty, msg=op)
    with pytest.raises(flow.TraceError, match="in-place view"):
        flow.jit(lambda a: a.t_())(to_flow(y))


@pytest.mark.parametrize("call", ["permute", "reshape", "expand", "repeat"])
def test_size_methods_without_sizes_raise_typeerror(call):
    """flow accepted x.permute() on a 0-d tensor; torch requires the argument."""
    for m in (torch, flow):
        with pytest.raises(TypeError, match="missing 1 required positional arguments"):
            getattr(m.tensor(2.0), call)()
    assert flow.tensor(2.0).permute([]).shape == () and flow.tensor(2.0).reshape(()).shape == ()
