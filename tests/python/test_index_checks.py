"""Indices out of range inside compiled code: the kernels that read at loaded indices (index_select,
gather, embedding, advanced indexing, take) check each index (dsl CheckIndex) and raise torch's
"index ... is out of bounds" after the kernel, on the CPU at the call and on CUDA at the next
synchronization (as torch's device-side asserts, but the device stays usable). Before, compiled
code clamped the index and returned a wrong row without a word."""
from __future__ import annotations

import pytest
import torch

import flow
import flow.nn.functional as F
from conftest import assert_same, products_atol, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]

# (name, flow function, torch function, table shape): each reads x at the indices i.
OPS = [
    ("index_select", lambda m, x, i: m.index_select(x, 0, i) * 2, (10,)),
    ("gather", lambda m, x, i: m.gather(x, 0, i) + 1, (10,)),
    ("getitem", lambda m, x, i: x[i].exp(), (10, 3)),
    ("take", lambda m, x, i: m.take(x, i), (10,)),
    ("embedding", lambda m, x, i: m.nn.functional.embedding(i, x) - 1, (10, 4)),
]


def _on(t, device):
    f = to_flow(t)
    return f.to(device) if device != "cpu" else f


def _indices(gen, n, size=37):
    return torch.randint(0, n, (size,), generator=gen)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn,shape", OPS, ids=[o[0] for o in OPS])
def test_compiled_code_raises_for_an_index_out_of_range(name, fn, shape, device, gen):
    x = torch.randn(*shape, generator=gen)
    n = shape[0] if name != "take" else x.numel()
    compiled = flow.jit(lambda x, i: fn(flow, x, i))
    for at, bad in ((0, n), (17, 1000), (36, -n - 1)):
        i = _indices(gen, n)
        i[at] = bad
        with pytest.raises((IndexError, RuntimeError), match=f"index {bad} is out of bounds for dimension 0 "
                                                              f"with size {n}"):
            compiled(_on(x, device), _on(i, device)).cpu()  # a CUDA kernel's report surfaces at the copy
        with pytest.raises((IndexError, RuntimeError)):  # eager checks on the host first
            fn(flow, _on(x, device), _on(i, device)).cpu()
        with pytest.raises((IndexError, RuntimeError)):
            fn(torch, x, i)
    # The same compiled function on good indices afterwards (negative ones where torch takes them).
    good = _indices(gen, n)
    if name in ("getitem", "take"):
        good[5] = -1
    assert_same(compiled(_on(x, device), _on(good, device)).cpu(), fn(torch, x, good))


@pytest.mark.parametrize("device", DEVICES)
def test_negative_indices_follow_torch_under_jit(device, gen):
    """Python indexing and take wrap a negative index; embedding, index_select and gather refuse
    it, as torch does: eagerly on the host, compiled in the kernel that reads it."""
    x = torch.randn(10, 4, generator=gen)
    i = torch.tensor([3, -1, -10, 0])
    assert_same(flow.jit(lambda x, i: x[i])(_on(x, device), _on(i, device)).cpu(), x[i])
    emb = flow.jit(lambda x, i: F.embedding(i, x))
    with pytest.raises((IndexError, RuntimeError), match="index -1 is out of bounds for dimension 0 with size 10"):
        emb(_on(x, device), _on(i, device)).cpu()
        flow.cuda.synchronize()
    with pytest.raises(IndexError):
        torch.nn.functional.embedding(i, x)
    g = torch.tensor([[3, 0, 1, 2], [0, -1, 1, 2]])
    for name, fn, ix in (("index_select", lambda m, x, i: m.index_select(x, 0, i), i),
                         ("gather", lambda m, x, i: m.gather(x, 1, i), g)):
        with pytest.raises((IndexError, RuntimeError)):
            fn(torch, x, ix)
        with pytest.raises((IndexError, RuntimeError), match="out of"):
            fn(flow, _on(x, device), _on(ix, device)).cpu()
            flow.cuda.synchronize()
        with pytest.raises((IndexError, RuntimeError), match="index -1 is out of bounds"):
            flow.jit(lambda x, i: fn(flow, x, i))(_on(x, device), _on(ix, device)).cpu()
            flow.cuda.synchronize()


def test_a_model_with_an_unknown_token_raises():
    """A compiled model given a token id past its vocabulary: torch's error, not a wrong embedding."""
    tm = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 2)).eval()
    fm = flow.nn.Sequential(flow.nn.Embedding(50, 8), flow.nn.Linear(8, 2)).eval()
    fm.load_state_dict({k: to_flow(v) for k, v in tm.state_dict().items()})
    model = flow.jit(fm)
    tokens = torch.tensor([[1, 2, 49], [3, 50, 4]])
    with pytest.raises(IndexError, match="index 50 is out of bounds for dimension 0 with size 50"):
        model(to_flow(tokens))
    tokens[1, 1] = 7
    with torch.no_grad():
        emb, lin = tm[0].weight, tm[1]
        atol = products_atol(emb[tokens].abs() @ lin.weight.abs().T + lin.bias.abs(), terms=9)
        assert_same(model(to_flow(tokens)), tm(tokens), rtol=1e-5, atol=atol)


@pytest.mark.parametrize("device", DEVICES)
def test_several_index_tensors_are_checked_per_dimension(device):
    """x[i, j] and index_put under jit check each index against its own dim (a flattened index would
    pass x[0, 5] of a 3 x 4 tensor as x[1, 1]), with torch's message naming that dim."""
    x = torch.arange(12.0).reshape(3, 4)
    get = flow.jit(lambda x, i, j: x[i, j])
    put = flow.jit(lambda x, i, j, v: x.index_put((i, j), v))
    for i, j, dim, bad, size in (([0], [5], 1, 5, 4), ([3], [0], 0, 3, 3), ([0, 1], [1, -5], 1, -5, 4)):
        fi, fj = _on(torch.tensor(i), device), _on(torch.tensor(j), device)
        msg = f"index {bad} is out of bounds for dimension {dim} with size {size}"
        with pytest.raises(IndexError, match=msg):
            x[torch.tensor(i), torch.tensor(j)]
        with pytest.raises((IndexError, RuntimeError), match=msg):
            get(_on(x, device), fi, fj).cpu()
        with pytest.raises((IndexError, RuntimeError), match=msg):
            put(_on(x, device), fi, fj, _on(torch.ones(len(i)), device)).cpu()
    i, j = torch.tensor([0, 2, -1]), torch.tensor([1, -1, -4])
    assert_same(get(_on(x, device), _on(i, device), _on(j, device)).cpu(), x[i, j])
    assert_same(put(_on(x, device), _on(i, device), _on(j, device), _on(torch.ones(3), device)).cpu(),
                x.index_put((i, j), torch.ones(3)))


def test_an_index_into_an_empty_dim_raises_when_traced():
    """Any index into a dim of size 0 is out of range: raised when the graph is built (the kernel
    would have no element to read while it reported)."""
    for fn in (lambda x, i: x[i], lambda x, i: flow.index_select(x, 0, i),
               lambda x, i: F.embedding(i, x.reshape(0, 3))):
        with pytest.raises(IndexError):
            flow.jit(fn)(flow.empty(0), flow.tensor([0]))
    assert flow.jit(lambda x, i: x[i])(flow.empty(0), flow.tensor([], dtype=flow.int64)).shape == (0,)


@pytest.mark.parametrize("device", DEVICES)
def test_grid_sample_with_a_nan_position_reads_nothing_out_of_range(device, gen):
    """A NaN grid position is outside: its taps read element 0 (no index error) and are zeroed, so
    bilinear with zero padding gives torch's NaN (from the NaN weights) and nearest torch's 0."""
    x = torch.randn(1, 2, 5, 6, generator=gen)
    g = torch.rand(1, 3, 4, 2, generator=gen) * 2 - 1
    g[0, 0, 0, 0] = float("nan")
    g[0, 2, 3, :] = float("nan")
    for mode in ("bilinear", "nearest"):
        want = torch.nn.functional.grid_sample(x, g, mode=mode, align_corners=False)
        got = flow.jit(lambda a, b: F.grid_sample(a, b, mode=mode, align_corners=False))(_on(x, device), _on(g, device))
        assert_same(got.cpu(), want, rtol=1e-5, atol=1e-6, msg=mode)


@pytest.mark.parametrize("device", DEVICES)
def test_grid_sample_border_and_reflection_clip_nan_and_inf_as_torch(device, gen):
    """Border and reflection padding clip a NaN position to 0 and an infinite one to an edge
    (reflection: fmod of inf is NaN, so 0), as torch's clip_coordinates does: finite outputs
    where torch's are finite."""
    x = torch.randn(2, 3, 5, 6, generator=gen)
    g = torch.rand(2, 4, 5, 2, generator=gen) * 4 - 2
    g[0, 0, 0, 0] = float("nan")
    g[0, 1, 2, 1] = float("nan")
    g[1, 3, 4, :] = float("nan")
    g[1, 0, 1, 0] = float("inf")
    g[1, 2, 2, 1] = -float("inf")
    g[0, 3, 0, :] = float("inf")
    for padding in ("border", "reflection"):
        for mode in ("bilinear", "nearest"):
            for align in (False, True):
                want = torch.nn.functional.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
                run = flow.jit(lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=align))
                case = f"{padding} {mode} align_corners={align}"
                assert bool(torch.isfinite(want).all()), case  # the oracle itself: clipped, not NaN
                assert_same(run(_on(x, device), _on(g, device)).cpu(), want, rtol=1e-5, atol=1e-6, msg=case)
