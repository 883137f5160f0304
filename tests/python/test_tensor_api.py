"""The Tensor API of `import flow as torch` against torch: creation, views (zero-copy in eager,
graph view nodes under @flow.jit), indexing and indexed assignment, joins and splits, matrix
products and einsum, reductions with torch's signatures, in-place forms and out=, conversions.
Every op over the dtypes torch supports it for, on contiguous and non-contiguous (transposed,
sliced, expanded) inputs, with edge sizes and NaN/inf; result dtypes must equal torch's."""
import numpy as np
import pytest
import torch

import flow
from conftest import (ALL_DTYPES, FLOAT_DTYPES, FLOW_OF, TOL, assert_same, kernel_lookups, make, raises_like, to_flow,
                      to_torch)

LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]
INT_DTYPES = [torch.int32, torch.int64]


def make_pair(shape, dtype, gen, layout="contiguous", **kw):
    """(torch, flow) tensors with equal values and logical `shape`; non-contiguous layouts are made
    with each library's own view ops."""
    shape = tuple(shape)
    if layout == "contiguous" or len(shape) == 0:
        t = make(shape, dtype, gen, **kw)
        return t, to_flow(t)
    if layout == "transposed":
        perm = list(range(len(shape)))[::-1]
        base = make(tuple(shape[p] for p in perm), dtype, gen, **kw)
        return base.permute(perm), to_flow(base).permute(perm)
    if layout == "sliced":
        base = make(shape[:-1] + (2 * shape[-1] + 1,), dtype, gen, **kw)
        return base[..., 1::2], to_flow(base)[..., 1::2]
    base = make((1,) + shape[1:], dtype, gen, **kw)  # expanded
    return base.expand(shape), to_flow(base).expand(shape)


def shares_storage(f, base):
    return f._c.storage_ptr() == base._c.storage_ptr()


def tol(dtype, n=1):
    """(rtol, atol) for a result accumulated over n values of magnitude ~2 (inputs are N(0, 2))."""
    r, _ = TOL.get(dtype, (0, 0))
    return r * 4, r * 4 * max(1.0, float(n) ** 0.5) * 2


# ---- creation -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_creation_with_dtype(dtype):
    fd = FLOW_OF[dtype]
    assert_same(flow.zeros(2, 3, dtype=fd), torch.zeros(2, 3, dtype=dtype))
    assert_same(flow.ones((3,), dtype=fd), torch.ones((3,), dtype=dtype))
    assert_same(flow.full((2, 2), 1, dtype=fd), torch.full((2, 2), 1, dtype=dtype))
    assert_same(flow.eye(3, 4, dtype=fd), torch.eye(3, 4, dtype=dtype))
    if dtype != torch.bool:
        assert_same(flow.arange(0, 7, 2, dtype=fd), torch.arange(0, 7, 2, dtype=dtype))
    like = flow.ones(2, 5, dtype=fd)
    for fn in ("zeros_like", "ones_like", "empty_like"):
        r = getattr(flow, fn)(like)
        assert r.shape == (2, 5) and r.dtype is fd, fn
    assert_same(flow.full_like(like, 1), torch.full_like(torch.ones(2, 5, dtype=dtype), 1))
    assert flow.empty(0, 4, dtype=fd).shape == (0, 4)
    assert like.new_zeros(3).dtype is fd and like.new_full((2,), 1).shape == (2,)


def test_creation_defaults_and_random(gen):
    assert_same(flow.linspace(-1, 2, 7), torch.linspace(-1, 2, 7))
    assert_same(flow.linspace(0, 1, 1), torch.linspace(0, 1, 1))
    assert_same(flow.linspace(0, 10, 101, dtype=flow.float64), torch.linspace(0, 10, 101, dtype=torch.float64))
    assert_same(flow.eye(4), torch.eye(4))
    assert_same(flow.arange(5), torch.arange(5))
    assert_same(flow.arange(0.5, 3), torch.arange(0.5, 3))
    assert_same(flow.full((2,), 2.5), torch.full((2,), 2.5))
    assert_same(flow.tensor([[1, 2], [3, 4]]), torch.tensor([[1, 2], [3, 4]]))
    assert_same(flow.as_tensor(np.arange(6, dtype=np.int32)), torch.as_tensor(np.arange(6, dtype=np.int32)))
    assert_same(flow.from_numpy(np.ones((2, 3))), torch.from_numpy(np.ones((2, 3))))
    flow.manual_seed(7)
    a = (flow.rand(50), flow.randn(50), flow.randint(0, 10, (50,)), flow.randint(5, (3,)))
    flow.manual_seed(7)
    b = (flow.rand(50), flow.randn(50), flow.randint(0, 10, (50,)), flow.randint(5, (3,)))
    for x, y in zip(a, b):
        assert x.tolist() == y.tolist()
    assert a[0].dtype is flow.float32 and a[2].dtype is flow.int64
    assert 0 <= a[0].amin().item() and a[0].amax().item() < 1
    assert 0 <= a[2].amin().item() and a[2].amax().item() < 10
    r = flow.randn_like(flow.ones(3, 4, dtype=flow.float64))
    assert r.shape == (3, 4) and r.dtype is flow.float64
    assert flow.rand_like(flow.ones(2, dtype=flow.float16)).dtype is flow.float16
    ri = flow.randint_like(flow.ones(20, dtype=flow.int32), 3, 6)
    assert ri.dtype is flow.int32 and 3 <= ri.amin().item() and ri.amax().item() < 6
    with pytest.raises(RuntimeError):
        flow.randn(3, dtype=flow.int64)
    with pytest.raises(RuntimeError):
        flow.full((-1,), 1.0)


# ---- views ------------------------------------------------------------------------------------

# (name, fn(lib, x)) over x of shape (4, 6, 5); each is a view in torch except "reshape copy" and "repeat".
VIEWS = [
    ("view", lambda L, x: x.view(4, 30) if x.is_contiguous() else x.reshape(4, 30)),
    ("reshape", lambda L, x: x.reshape(-1, 5)),
    ("reshape copy", lambda L, x: x.transpose(0, 1).reshape(24, 5)),
    ("permute", lambda L, x: x.permute(2, 0, 1)),
    ("permute neg", lambda L, x: L.permute(x, (-1, -3, -2))),
    ("transpose", lambda L, x: x.transpose(0, 2)),
    ("t", lambda L, x: x[0].t()),
    ("T", lambda L, x: x[1].T),
    ("mT", lambda L, x: x.mT),
    ("flatten", lambda L, x: x.flatten(1)),
    ("flatten all", lambda L, x: L.flatten(x)),
    ("unflatten", lambda L, x: x.unflatten(1, (2, 3))),
    ("squeeze", lambda L, x: x[:, :1].squeeze()),
    ("squeeze dim", lambda L, x: x[:, :1].squeeze(1)),
    ("squeeze tuple", lambda L, x: x[:1, :1].squeeze((0, 1))),
    ("unsqueeze", lambda L, x: x.unsqueeze(1)),
    ("unsqueeze neg", lambda L, x: L.unsqueeze(x, -1)),
    ("expand", lambda L, x: x[:, :1].expand(4, 3, 5)),
    ("expand new dim", lambda L, x: x[0, 0].expand(2, 3, -1)),
    ("expand_as", lambda L, x: x[:1].expand_as(x)),
    ("repeat", lambda L, x: x[:2, :3].repeat(2, 1, 2)),
    ("repeat new dims", lambda L, x: x[1, :2, :3].repeat(2, 1, 3)),
    ("narrow", lambda L, x: x.narrow(1, 2, 3)),
    ("narrow neg", lambda L, x: L.narrow(x, -1, -4, 2)),
    ("chunk", lambda L, x: x.chunk(3, 1)[2]),
    ("chunk uneven", lambda L, x: x.chunk(2, 2)[1]),
    ("split", lambda L, x: x.split(4, 1)[1]),
    ("split sizes", lambda L, x: L.split(x, [1, 3, 2], 1)[1]),
    ("unbind", lambda L, x: x.unbind(2)[3]),
    ("select", lambda L, x: x.select(1, -2)),
    ("movedim", lambda L, x: x.movedim(0, 2)),
    ("contiguous", lambda L, x: x.contiguous()),
    ("view of view", lambda L, x: x.permute(1, 0, 2)[1:5:2].flatten(0, 1)[:, 1:]),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_views_eager(dtype, layout, gen):
    t, f = make_pair((4, 6, 5), dtype, gen, layout)
    for name, fn in VIEWS:
        tv, fv = fn(torch, t), fn(flow, f)
        assert_same(fv, tv.contiguous(), msg=name)
        if tv.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() and name != "contiguous":
            assert shares_storage(fv, f), f"{name}: a view in torch, a copy in flow"
            if tv.numel() > 1:
                assert fv.storage_offset() == tv.storage_offset(), name
                assert [s for s, n in zip(fv.stride(), fv.shape) if n > 1] == \
                    [s for s, n in zip(tv.stride(), tv.shape) if n > 1], name


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
def test_views_traced(dtype, gen):
    t, f = make_pair((4, 6, 5), dtype, gen)
    for name, fn in VIEWS:
        j = flow.jit(lambda x, fn=fn: fn(flow, x))
        assert_same(j(f), fn(torch, t).contiguous(), msg=name)
    # views feeding arithmetic inside one compiled graph, non-contiguous input
    t, f = make_pair((4, 6, 5), dtype, gen, "transposed")

    def g(lib, x):
        a = x.permute(2, 0, 1)[1:, :, ::2].reshape(-1, 3)
        b = x[:, 0].unsqueeze(-1).expand(4, 5, 2).flatten()
        return (a * 2), b + 1, x.transpose(1, 2).contiguous().view(4, -1)[:, :7]

    for a, e in zip(flow.jit(lambda x: g(flow, x))(f), g(torch, t)):
        assert_same(a, e)


def test_view_errors_like_torch(gen):
    t, f = make_pair((4, 6), torch.float32, gen, "transposed")
    for fn in (lambda L, x: x.view(24), lambda L, x: x.reshape(5, 5), lambda L, x: x.view(-1, -1),
               lambda L, x: x.expand(3, 6), lambda L, x: x.permute(0, 0), lambda L, x: x.squeeze(5),
               lambda L, x: x.narrow(0, 3, 3), lambda L, x: x.split([1, 2], 0), lambda L, x: x.repeat(2),
               lambda L, x: x.flatten(1, 0), lambda L, x: x.chunk(0), lambda L, x: x.t().unflatten(0, (4, 2)),
               lambda L, x: x.select(0, 4), lambda L, x: x.movedim((0, 1), (0, 0))):
        assert raises_like(lambda: fn(torch, t), lambda: fn(flow, f))
    assert raises_like(lambda: t.view(torch.uint8), lambda: f.view(flow.uint8))  # a transposed last dim
    assert f.view(flow.int32).stride() == t.view(torch.int32).stride()  # same size: any strides


# ---- indexing -----------------------------------------------------------------------------------

INDEX = [
    ("int", lambda L, x: x[2]),
    ("neg int", lambda L, x: x[-1, -2]),
    ("slice", lambda L, x: x[1:3]),
    ("step", lambda L, x: x[::2, 1::3]),
    ("neg bounds", lambda L, x: x[-3:, :-1]),
    ("clamped", lambda L, x: x[2:100, -100:2]),
    ("empty", lambda L, x: x[3:1]),
    ("none", lambda L, x: x[None, :, None]),
    ("ellipsis", lambda L, x: x[..., 1]),
    ("ellipsis mid", lambda L, x: x[1, ..., None, 2:]),
    ("int tensor", lambda L, x: x[L.tensor([0, 3, 3, -1])]),
    ("int32 tensor", lambda L, x: x[:, L.tensor([5, 0], dtype=L.int32)]),
    ("2-d int tensor", lambda L, x: x[:, L.tensor([[0, 1], [2, 5]])]),
    ("int tensor + int", lambda L, x: x[1, :, L.tensor([4, 0])]),
    ("0-d int tensor", lambda L, x: x[L.tensor(2)]),
    ("list", lambda L, x: x[[1, 0]]),
    ("empty int tensor", lambda L, x: x[L.tensor([], dtype=L.int64)]),
    ("bool mask all", lambda L, x: x[L.arange(120).reshape(4, 6, 5) % 3 == 0]),
    ("bool mask rows", lambda L, x: x[L.tensor([True, False, True, True])]),
    ("bool mask mid", lambda L, x: x[:, L.tensor([False, True, False, False, True, True])]),
    ("bool mask none", lambda L, x: x[L.zeros(4, dtype=L.bool)]),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "expanded"])
def test_getitem(dtype, layout, gen):
    t, f = make_pair((4, 6, 5), dtype, gen, layout)
    for name, fn in INDEX:
        assert_same(fn(flow, f), fn(torch, t).contiguous(), msg=name)


def test_getitem_traced_and_errors(gen):
    t, f = make_pair((4, 6, 5), torch.float32, gen, "sliced")
    for name, fn in INDEX[:16]:
        assert_same(flow.jit(lambda x, fn=fn: fn(flow, x))(f), fn(torch, t).contiguous(), msg=name)
    with pytest.raises(flow.TraceError, match="boolean mask"):
        flow.jit(lambda x: x[x > 0])(f)
    for fn in (lambda L, x: x[4], lambda L, x: x[0, 0, 0, 0],
               lambda L, x: x[L.tensor([0, 4])], lambda L, x: x[L.tensor([True, False])],
               lambda L, x: x[L.tensor([0.0])], lambda L, x: x["a"]):
        assert raises_like(lambda: fn(torch, t), lambda: fn(flow, f))
    with pytest.raises(ValueError, match="step must be greater than zero"):
        f[::-1]
    with pytest.raises(NotImplementedError, match="boolean mask combined"):
        f[flow.tensor([True, False, True, False]), flow.tensor([1, 2])]


MULTI_INDEX = [
    ("x[a, b]", lambda x, a, b: x[a, b]),
    ("x[:, a, b]", lambda x, a, b: x[:, a, b]),
    ("x[a, :, b] (apart: B first)", lambda x, a, b: x[a, :, b]),
    ("x[..., a, b]", lambda x, a, b: x[..., a, b]),
    ("x[1, a, b]", lambda x, a, b: x[1, a, b]),
    ("x[None, a, :, b]", lambda x, a, b: x[None, a, :, b]),
    ("x[a, b, 2:5]", lambda x, a, b: x[a, b, 2:5]),
    ("x[a, b, a]", lambda x, a, b: x[a, b, a]),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name,fn", MULTI_INDEX, ids=[n for n, _ in MULTI_INDEX])
def test_getitem_several_index_tensors(gen, dtype, name, fn):
    t, f = make_pair((4, 5, 6, 7), dtype, gen, "sliced")
    for shapes in [((3,), (3,)), ((2, 1), (3,)), ((1,), (0,))]:
        a = torch.randint(-4, 4, shapes[0], generator=gen)
        b = torch.randint(-4, 4, shapes[1], generator=gen)
        want = fn(t, a, b)
        assert_same(fn(f, to_flow(a), to_flow(b)), want, msg=f"{name} eager {shapes}")
        jitted = flow.jit(lambda x, p, q: fn(x, p, q))
        assert_same(jitted(f, to_flow(a), to_flow(b)), want, msg=f"{name} jit {shapes}")
    for a, b in [(torch.tensor([0, 9]), torch.tensor([0, 1])), (torch.tensor([0, 1]), torch.tensor([0, 1, 2]))]:
        assert raises_like(lambda: fn(t, a, b), lambda: fn(f, to_flow(a), to_flow(b)))


MIXED_INDICES = [
    lambda L: (0, slice(None), L.tensor([2, 0, 1])),
    lambda L: (1, Ellipsis, L.tensor([2, 0])),
    lambda L: (0, slice(None), L.tensor([True, False, True])),
    lambda L: (L.tensor([0, 1]), 0, L.tensor([1, 2])),
    lambda L: (slice(None), L.tensor([0, 1]), 1),
    lambda L: (L.tensor([0, 1]), slice(None), L.tensor([1, 2])),
    lambda L: (None, 0, L.tensor([[0], [1]]), slice(0, 2)),
    lambda L: (L.tensor(True),),
    lambda L: (L.tensor(False), 0),
    lambda L: (0, L.tensor(True), slice(None), 1),
    lambda L: (1, L.tensor([[True, False, True], [False, True, True], [True, True, False]])),
    lambda L: (slice(None, None, 2), L.tensor([2, 1]), -1),
    lambda L: (0, L.tensor(2), slice(None)),
    lambda L: (L.tensor(0), slice(None), L.tensor([0, 1])),  # a 0-d integer tensor is an int
]


def check_mixed_setitem(device, gen):
    for k, index in enumerate(MIXED_INDICES):
        t = make((2, 3, 3), torch.float32, gen)
        f = to_flow(t).to(device)
        v = make(tuple(t[index(torch)].shape), torch.float32, gen)
        t[index(torch)] = v
        f[index(flow)] = to_flow(v).to(device)
        assert_same(f.cpu(), t, msg=f"case {k}: =")
        t[index(torch)] += 1
        f[index(flow)] += 1
        assert_same(f.cpu(), t, msg=f"case {k}: +=")


def test_setitem_selects_ints_before_tensor_indices(gen):
    """torch applies an int index as a select, before the tensor indices; flow wrote through one
    numpy index, where an int beside an array is an advanced index: x[0, :, [2, 0, 1]] = v wrote v
    transposed, and a mask after an int raised a shape mismatch."""
    check_mixed_setitem("cpu", gen)


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="needs a CUDA device")
def test_setitem_selects_ints_before_tensor_indices_on_the_gpu(gen):
    check_mixed_setitem("cuda", gen)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_setitem(dtype, gen):
    cases = [
        ((1,), lambda L, x: 1),
        ((slice(1, 3), slice(None, None, 2)), lambda L, x: 0),
        ((Ellipsis, 0), lambda L, x: L.ones(6, dtype=L.int64)),
        ((slice(None), 2), lambda L, x: x[:, 3]),  # a view of the same tensor
        ("mask", lambda L, x: 1),
        ("mask values", lambda L, x: None),
        ((slice(None), "idx"), lambda L, x: L.zeros(4, 2, 5, dtype=x.dtype)),
        ((None, 3, slice(1, None)), lambda L, x: L.arange(25).reshape(5, 5) > 7),
    ]
    for k, (index, value) in enumerate(cases):
        t, f = make_pair((4, 6, 5), dtype, gen)
        results = []
        for L, x in ((torch, t), (flow, f)):
            ix = index
            if index == "mask":
                ix = x > 0.5 if dtype != torch.bool else x
            elif index == "mask values":
                ix = L.arange(120).reshape(4, 6, 5) % 2 == 0
                x[ix] = L.arange(60).to(x.dtype)
                results.append(x)
                continue
            elif isinstance(index, tuple) and "idx" in index:
                ix = (slice(None), L.tensor([4, 1]))
            x[ix] = value(L, x)
            results.append(x)
        assert_same(results[1], results[0], msg=f"case {k}")
    # writes through views reach the base; a write into an expanded tensor is refused
    t, f = make_pair((4, 6), dtype, gen)
    f.t()[1:3] = f[0, 0]
    t.t()[1:3] = t[0, 0]
    assert_same(f, t)
    with pytest.raises(RuntimeError, match="single memory location"):
        flow.zeros(1, 3).expand(2, 3)[0] = 1
    with pytest.raises(RuntimeError, match="shape mismatch"):
        f[0] = flow.ones(5)
    with pytest.raises(flow.TraceError, match="__setitem__"):
        flow.jit(lambda x: x.__setitem__(0, 1))(f)


def test_index_select_gather_masked_fill(gen):
    for dtype in ALL_DTYPES:
        t, f = make_pair((5, 7), dtype, gen, "transposed")
        it = torch.tensor([6, 0, 3, 3])
        assert_same(flow.index_select(f, 1, to_flow(it)), torch.index_select(t, 1, it))
        assert_same(f.index_select(0, to_flow(it[1:3])), t.index_select(0, it[1:3]))
        gi = torch.randint(0, 5, (3, 7), generator=gen)
        assert_same(flow.gather(f, 0, to_flow(gi)), torch.gather(t, 0, gi))
        assert_same(f.gather(1, to_flow(gi[:, :4].clamp(max=4))), t.gather(1, gi[:, :4].clamp(max=4)))
        m = make((5, 1), torch.bool, gen)
        for v in (0, 1, True, 2.5) if dtype != torch.bool else (True, 0):
            assert_same(flow.masked_fill(f, to_flow(m), v), torch.masked_fill(t, m, v), msg=f"{dtype} {v}")
        assert_same(f.masked_fill(to_flow(m), flow.tensor(1)), t.masked_fill(m, torch.tensor(1)))
    def g(lib, x, i, m):
        return x.index_select(1, i), x.gather(0, i[None].expand(5, 4).clamp(max=4)), x.masked_fill(m, -1.0)

    t, f = make_pair((5, 7), torch.float32, gen, "sliced", special=True)
    it, m = torch.tensor([6, 0, 3, 3]), make((5, 7), torch.bool, gen)
    for a, e in zip(flow.jit(lambda x, i, m: g(flow, x, i, m))(f, to_flow(it), to_flow(m)), g(torch, t, it, m)):
        assert_same(a, e)
    for fn in (lambda L: L.index_select(L.ones(3), 0, L.tensor([3])),
               lambda L: L.gather(L.ones(3, 2), 1, L.tensor([[2]])),
               lambda L: L.gather(L.ones(3, 2), 0, L.zeros(2, 3, dtype=L.int64)),
               lambda L: L.masked_fill(L.ones(3), L.ones(3), 1.0), lambda L: L.gather(L.ones(3), 0, L.tensor([0.0]))):
        assert raises_like(lambda: fn(torch), lambda: fn(flow))


# ---- joins and splits ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_cat_stack(dtype, gen):
    (a, fa), (b, fb) = make_pair((3, 4), dtype, gen, "transposed"), make_pair((3, 2), dtype, gen, "sliced")
    (c, fc) = make_pair((3, 4), dtype, gen, "expanded")
    assert_same(flow.cat([fa, fb, fa], 1), torch.cat([a, b, a], 1))
    assert_same(flow.cat((fa, fc), dim=-2), torch.cat((a, c), dim=-2))
    assert_same(flow.concat([fa], 0), torch.concat([a], 0))
    assert_same(flow.cat([fa, flow.empty(0, dtype=fa.dtype)]), torch.cat([a, torch.empty(0, dtype=a.dtype)]))
    assert_same(flow.stack([fa, fc]), torch.stack([a, c]))
    assert_same(flow.stack([fa, fc], -1), torch.stack([a, c], -1))
    assert_same(flow.hstack([fa, fb]), torch.hstack([a, b]))
    assert_same(flow.vstack([fa, fc]), torch.vstack([a, c]))
    # traced
    j = flow.jit(lambda x, y, z: (flow.cat([x, y], 1), flow.stack([x, z], 1), flow.cat([x[:, :1], x], 1)))
    for r, e in zip(j(fa, fb, fc), (torch.cat([a, b], 1), torch.stack([a, c], 1), torch.cat([a[:, :1], a], 1))):
        assert_same(r, e)


@pytest.mark.parametrize("dim", [0, 1, 3, -1])
def test_eager_cat_copies_without_compiling(dim, gen):
    """Eager cat on the CPU copies rows (jit/eager_cat.h): any number of inputs, no kernel to compile
    for contiguous inputs of the output's dtype; large inputs span several copy tasks."""
    shape = [3, 5, 7, 9]
    ts = []
    for k in range(int(torch.randint(5, 40, (1,), generator=gen))):
        s = list(shape)
        s[dim] = int(torch.randint(0, 4, (1,), generator=gen))  # empty inputs too
        ts.append(torch.randn(*s, generator=gen))
    big = list(shape)
    big[dim] = 3000
    ts.append(torch.randn(*big, generator=gen))  # rows longer than a copy task
    fs = [to_flow(t) for t in ts]
    before = kernel_lookups()
    got = flow.cat(fs, dim)
    assert kernel_lookups() == before
    assert_same(got, torch.cat(ts, dim))
    # Inputs of another dtype or layout go through the cast kernel first.
    mixed = [to_flow(ts[0].to(torch.float64)), to_flow(ts[1].transpose(0, 1).contiguous().transpose(0, 1))] + fs[2:5]
    assert_same(flow.cat(mixed, dim), torch.cat([ts[0].double()] + ts[1:5], dim))


def test_cat_promotes_and_errors(gen):
    for d1, d2 in [(torch.int32, torch.float16), (torch.bool, torch.int64), (torch.bfloat16, torch.float32),
                   (torch.int32, torch.int64)]:
        a, b = make((2, 3), d1, gen), make((1, 3), d2, gen)
        assert_same(flow.cat([to_flow(a), to_flow(b)]), torch.cat([a, b]), msg=f"{d1} {d2}")
    for fn in (lambda L: L.cat([L.ones(2, 3), L.ones(2, 4)]), lambda L: L.cat([]), lambda L: L.cat(L.ones(2)),
               lambda L: L.cat([L.ones(2), 1]), lambda L: L.stack([L.ones(2), L.ones(3)]),
               lambda L: L.cat([L.ones(2, 3), L.ones(3)]), lambda L: L.cat([L.tensor(1.0)])):
        assert raises_like(lambda: fn(torch), lambda: fn(flow))


def test_split_family_match_torch(gen):
    t, f = make_pair((7, 5), torch.float32, gen, "transposed")
    for name, fn in [("split", lambda x: x.split(3)), ("split sizes", lambda x: x.split([2, 0, 5])),
                     ("chunk", lambda x: x.chunk(3)), ("chunk dim", lambda x: x.chunk(2, 1)),
                     ("tensor_split", lambda x: x.tensor_split(3)),
                     ("tensor_split idx", lambda x: x.tensor_split([1, 4], 1)),
                     ("unbind", lambda x: x.unbind(1)), ("split 0", lambda x: x[:0].split(2))]:
        ts, fs = fn(t), fn(f)
        assert len(ts) == len(fs), name
        for a, e in zip(fs, ts):
            assert_same(a, e.contiguous(), msg=name)
            assert shares_storage(a, f)
    j = flow.jit(lambda x: [c * 2 for c in x.chunk(3)] + list(x.split([3, 4])))
    for a, e in zip(j(f), [c * 2 for c in t.chunk(3)] + list(t.split([3, 4]))):
        assert_same(a, e.contiguous())


# ---- matrix products ------------------------------------------------------------------------------

MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
                 ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((5,), (2, 5, 3)), ((1, 1), (1, 1)),
                 ((0, 4), (4, 3)), ((3, 0), (0, 2)), ((17, 33), (33, 9))]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_matmul(dtype, gen):
    for sa, sb in MATMUL_SHAPES:
        for layout in ("contiguous", "transposed"):
            (a, fa), (b, fb) = make_pair(sa, dtype, gen, layout), make_pair(sb, dtype, gen)
            k = sa[-1]
            rt, at = tol(dtype, k)
            exp = torch.matmul(a, b)
            assert_same(flow.matmul(fa, fb), exp, rtol=rt, atol=at, msg=f"{sa} @ {sb} {layout}")
            assert_same(fa @ fb, exp, rtol=rt, atol=at)
    (a, fa), (b, fb), (c, fc) = (make_pair(s, dtype, gen) for s in ((3, 5), (5, 4), (3, 4)))
    rt, at = tol(dtype, 5)
    assert_same(flow.mm(fa, fb), torch.mm(a, b), rtol=rt, atol=at)
    assert_same(flow.addmm(fc, fa, fb), torch.addmm(c, a, b), rtol=rt, atol=at)
    assert_same(flow.addmm(fc[0], fa, fb, beta=0.5, alpha=2), torch.addmm(c[0], a, b, beta=0.5, alpha=2),
                rtol=rt, atol=2 * at)
    assert_same(flow.bmm(fa[None].expand(2, 3, 5), fb[None].expand(2, 5, 4)),
                torch.bmm(a[None].expand(2, 3, 5), b[None].expand(2, 5, 4)), rtol=rt, atol=at)
    assert_same(fa.mv(fb[:, 0]), a.mv(b[:, 0]), rtol=rt, atol=at)
    assert_same(fa[0].dot(fb[:, 1]), a[0].dot(b[:, 1]), rtol=rt, atol=at)
    assert_same(flow.outer(fa[0], fb[0]), torch.outer(a[0], b[0]), rtol=rt, atol=at)


def test_matmul_traced_and_errors(gen):
    (q, fq), (k, fk) = make_pair((2, 3, 6, 8), torch.float32, gen), make_pair((2, 3, 6, 8), torch.float32, gen)

    def attn(lib, q, k):
        s = (q @ k.transpose(-2, -1) * 0.35).softmax(-1)
        return s @ k, lib.bmm(q.flatten(0, 1), k.flatten(0, 1).mT), lib.addmm(q[0, 0, 0, :6], q[0, 0], k[0, 0].t())

    for a, e in zip(flow.jit(lambda q, k: attn(flow, q, k))(fq, fk), attn(torch, q, k)):
        assert_same(a, e, rtol=1e-5, atol=1e-5)
    for fn in (lambda L: L.matmul(L.ones(2, 3), L.ones(2, 3)), lambda L: L.mm(L.ones(2), L.ones(2, 2)),
               lambda L: L.bmm(L.ones(2, 2, 3), L.ones(3, 3, 2)), lambda L: L.matmul(L.ones(()), L.ones(2)),
               lambda L: L.matmul(L.ones(2, 3), L.ones(3, 2, dtype=L.float64)), lambda L: L.ones(2) @ 2):
        assert raises_like(lambda: fn(torch), lambda: fn(flow))
    with pytest.raises(NotImplementedError, match="Bool"):  # as torch's
        flow.ones(2, 2, dtype=flow.bool) @ flow.ones(2, 2, dtype=flow.bool)
    assert (flow.ones(2, 2, dtype=flow.int64) @ flow.ones(2, 2, dtype=flow.int64)).tolist() == [[2, 2], [2, 2]]


EINSUM = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
          ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 6, 8)]), ("bhqk,bhkd->bhqd", [(2, 3, 5, 6), (2, 3, 6, 8)]),
          ("ij->ji", [(3, 4)]), ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk->...ik", [(3, 4),
                      (4, 5)]),
          ("...ij,jk->...ik", [(2, 2, 3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ij,j->i", [(3, 4), (4,)]),
          ("i,j->ij", [(3,), (4,)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]), ("bij->bji", [(2, 3, 4)]),
          ("ij,ij->ij", [(3, 4), (3, 4)]), ("ij,ij->", [(3, 4), (3, 4)]), ("bn,anm,bm->ba", [(2, 3), (5, 3, 4),
                         (2, 4)]),
          ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)]), ("ik,kj->ji", [(3, 4), (4, 5)])]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_einsum(dtype, gen):
    for eq, shapes in EINSUM:
        pairs = [make_pair(s, dtype, gen, "transposed" if k else "contiguous") for k, s in enumerate(shapes)]
        exp = torch.einsum(eq, *[p[0] for p in pairs])
        rt, at = tol(dtype, 40)
        assert_same(flow.einsum(eq, *[p[1] for p in pairs]), exp, rtol=rt, atol=at, msg=eq)
        if dtype == torch.float32:
            j = flow.jit(lambda *xs, eq=eq: flow.einsum(eq, *xs))
            assert_same(j(*[p[1] for p in pairs]), exp, rtol=rt, atol=at, msg=eq + " traced")
    assert_same(flow.einsum("ij,jk->ik", [flow.ones(2, 3), flow.ones(3, 2)]), torch.ones(2, 2) * 3)
    with pytest.raises(NotImplementedError, match="ii->i"):
        flow.einsum("ii->i", flow.ones(3, 3))
    for fn in (lambda L: L.einsum("ij,jk->ik", L.ones(2, 3), L.ones(4, 2)), lambda L: L.einsum("ij->k", L.ones(2, 3)),
               lambda L: L.einsum("ijk->ij", L.ones(2, 3)), lambda L: L.einsum("ij,jk->ik", L.ones(2, 3))):
        assert raises_like(lambda: fn(torch), lambda: fn(flow))


# ---- reductions -----------------------------------------------------------------------------------

REDUCTIONS = [
    ("sum", lambda L, x: x.sum()), ("sum dim", lambda L, x: x.sum(1)),
    ("sum dims keep", lambda L, x: L.sum(x, (0, 2), True)),
    ("sum dtype", lambda L, x: x.sum(-1, dtype=L.float64)),
    ("mean", lambda L, x: x.mean() if x.is_floating_point() else x.float().mean()),
    ("mean dims", lambda L, x: x.mean((-1, 0), keepdim=True) if x.is_floating_point()
     else x.mean((1,), dtype=L.float32)),
    ("var", lambda L, x: x.var(1) if x.is_floating_point() else x.float().var(1)),
    ("var unbiased", lambda L, x: L.var(x, (0, 2), False, True) if x.is_floating_point() else x.float().var()),
    ("var correction", lambda L, x: x.var(correction=0) if x.is_floating_point() else x.float().var(2, correction=2)),
    ("std", lambda L, x: x.std(-1, keepdim=True) if x.is_floating_point() else x.float().std()),
    # (torch's var_mean/std_mean give a NaN mean where a slice holds inf; flow gives inf: finite inputs)
    ("var_mean", lambda L, x: L.var_mean(x.clamp(-9, 9), 1)[0] if x.is_floating_point() else x.float().var()),
    ("std_mean", lambda L, x: L.std_mean(x.clamp(-9, 9), (0, 1))[1] if x.is_floating_point() else x.float().std()),
    ("max", lambda L, x: x.max()), ("min", lambda L, x: L.min(x)),
    ("max dim values", lambda L, x: x.max(1).values), ("max dim indices", lambda L, x: x.max(1)[1]),
    ("min dim keep", lambda L, x: L.min(x, -1, keepdim=True)[0]), ("min dim idx", lambda L, x: x.min(0).indices),
    ("max binary", lambda L, x: L.max(x, x.flip(0) if hasattr(x, "flip") else x[L.tensor([3, 2, 1, 0])])),
    ("argmax", lambda L, x: x.argmax() if x.dtype != L.bool else x.int().argmax()),
    ("argmin dim", lambda L, x: L.argmin(x, 2, keepdim=True) if x.dtype != L.bool else x.int().argmin(2)),
    ("prod", lambda L, x: (x.abs() + 1).prod() if x.dtype.is_floating_point and x.dtype.itemsize > 2 else x.prod(1)),
    ("prod dim", lambda L, x: x.prod(2, keepdim=True)),
    ("any", lambda L, x: x.any()), ("any dim", lambda L, x: x.any(1)), ("all", lambda L, x: L.all(x)),
    ("all dim", lambda L, x: x.all(-1, keepdim=True)),
    ("norm", lambda L, x: x.norm() if x.is_floating_point() else x.float().norm()),
    ("norm p", lambda L, x: L.norm(x, 1, dim=1) if x.is_floating_point() else x.float().norm(3, 0)),
    ("norm inf", lambda L, x: x.norm(float("inf"), dim=(0, 2), keepdim=True) if x.is_floating_point()
     else x.float().norm()),
    ("cumsum", lambda L, x: x.cumsum(1)), ("cumsum dtype", lambda L, x: L.cumsum(x, 0, dtype=L.float64)),
    ("cumprod", lambda L, x: (x.clamp(-2, 2) if x.dtype != L.bool else x).cumprod(-1)),
    ("logsumexp", lambda L, x: L.logsumexp(x, 1) if x.is_floating_point() else x.float().logsumexp((0, 1))),
    ("amax", lambda L, x: x.amax((0, 2))),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_reductions(dtype, layout, gen):
    t, f = make_pair((4, 6, 5), dtype, gen, layout, special=dtype.is_floating_point)
    if dtype.is_floating_point:
        t = t.clamp(-3, 3) if layout == "transposed" else t  # one layout with finite values only
        f = to_flow(t) if layout == "transposed" else f
    for name, fn in REDUCTIONS:
        if raises_like(lambda: fn(torch, t), lambda: fn(flow, f)):
            continue
        exp = fn(torch, t)
        rt, at = tol(exp.dtype, 120)
        if name.startswith("prod") or name.startswith("cumprod"):
            rt, at = rt * 4, at * 4
        assert_same(fn(flow, f), exp, rtol=rt, atol=at, msg=name)


def test_reductions_traced(gen):
    t, f = make_pair((4, 6, 5), torch.float32, gen, "sliced")

    def g(lib, x):
        v, i = x.max(-1)
        return (x.var(-1, keepdim=True), x.mean((1, 2)), v, i, x.argmin(1), x.std(0, unbiased=False), x.sum(),
                x.amax(), lib.min(x), x.norm(dim=1), (x > 0).any(2), (x > -9).all(), x.cumsum(2), x.prod(0),
                lib.var_mean(x, 1)[1], x.logsumexp(-1))

    for k, (a, e) in enumerate(zip(flow.jit(lambda x: g(flow, x))(f), g(torch, t))):
        assert_same(a, e, rtol=1e-5, atol=1e-4, msg=str(k))
    # max with dim is a namedtuple, also through @flow.jit
    r = flow.jit(lambda x: x.max(1))(f)
    assert type(r).__name__ == "max" and r.values.shape == (4, 5) and r.indices.dtype is flow.int64


def test_reduction_edge_sizes(gen):
    for shape in [(0,), (1,), (3, 0), (1, 1), (7,), (1 << 20,)]:
        t, f = make_pair(shape, torch.float32, gen, low=-1.0, high=1.0)
        n = max(t.numel(), 1)
        rt, at = tol(torch.float32, n)
        for name, fn in [("sum", lambda L, x: x.sum(0)), ("mean", lambda L, x: x.mean()),
                         ("var", lambda L, x: x.var(0)),
                         ("max", lambda L, x: x.max()), ("amax dim", lambda L, x: x.max(0)[0]),
                         ("argmax", lambda L, x: x.argmax()),
                         ("prod", lambda L, x: x.prod()), ("any", lambda L, x: x.any()), ("all", lambda L, x: x.all()),
                         ("cumsum", lambda L, x: x.cumsum(0)), ("norm", lambda L, x: x.norm())]:
            if raises_like(lambda: fn(torch, t), lambda: fn(flow, f)):
                continue
            assert_same(fn(flow, f), fn(torch, t), rtol=rt * 10, atol=at * 10, msg=f"{name} {shape}")


def test_reduction_argument_errors(gen):
    f, t = flow.ones(2, 3), torch.ones(2, 3)
    for fn in (lambda L, x: x.sum(2), lambda L, x: x.max(1, 1), lambda L, x: x.argmax((0, 1)),
               lambda L, x: x.mean(dim="a"), lambda L, x: x.var(keepdim=1), lambda L, x: x.int().var(),
               lambda L, x: x.int().mean(), lambda L, x: x.int().norm(), lambda L, x: x[:0].max(),
               lambda L, x: x.cumsum(), lambda L, x: x.prod((0, 1))):
        assert raises_like(lambda: fn(torch, t), lambda: fn(flow, f))
    with pytest.raises(NotImplementedError, match="nuc"):
        f.norm("nuc")


# ---- in-place ops and out= ----------------------------------------------------------------------

INPLACE = [
    ("add_", lambda L, x: x.add_(2)), ("add_ tensor alpha", lambda L, x: x.add_(x[0].clone(), alpha=2)),
    ("sub_", lambda L, x: x.sub_(x.t().t())), ("mul_", lambda L, x: x.mul_(3)), ("div_", lambda L, x: x.div_(2)),
    ("relu_", lambda L, x: x.relu_()), ("clamp_", lambda L, x: x.clamp_(-1, 1)),
    ("clamp_ min", lambda L, x: x.clamp_(min=0)),
    ("copy_", lambda L, x: x.copy_(L.arange(5))),
    ("copy_ cast", lambda L, x: x.copy_(L.ones(4, 5, dtype=L.float64) / 3)),
    ("zero_", lambda L, x: x.zero_()), ("fill_", lambda L, x: x.fill_(1)),
    ("fill_ tensor", lambda L, x: x.fill_(L.tensor(2))),
    ("masked_fill_", lambda L, x: x.masked_fill_(L.arange(20).reshape(4, 5) % 3 == 0, 1)),
    ("iadd", lambda L, x: x.__iadd__(1)), ("imul", lambda L, x: x.__imul__(x)),
    ("view add_", lambda L, x: x[1:3, ::2].add_(1)), ("t mul_", lambda L, x: x.t().mul_(2)),
    ("sigmoid_", lambda L, x: x.sigmoid_()), ("floor_", lambda L, x: x.floor_()),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_inplace(dtype, gen):
    for name, fn in INPLACE:
        t, f = make_pair((4, 5), dtype, gen)
        base_t, base_f = t[1:], f[1:]  # a view of the written tensor sees the write
        if raises_like(lambda: fn(torch, t.clone()), lambda: fn(flow, f.clone())):
            continue
        rt_, rf = fn(torch, t), fn(flow, f)
        assert rf is f or name.startswith(("view", "t ")), name
        assert_same(f, t, msg=name)
        assert_same(base_f, base_t.contiguous(), msg=name + " (view)")
        del rt_


def test_inplace_traced(gen):
    t, f = make_pair((4, 5), torch.float32, gen)

    def g(lib, x):
        h = x * 2
        h.add_(1).relu_()
        h.mul_(x)
        k = h.clone()
        k.clamp_(max=1.5)
        return h, k

    for a, e in zip(flow.jit(lambda x: g(flow, x))(f), g(torch, t.clone())):
        assert_same(a, e)
    a, ta = f.clone(), t.clone()
    assert flow.jit(lambda x: x.add_(1))(a) is a  # an argument: written back (tests/python/test_jit.py)
    assert_same(a, ta.add_(1))
    with pytest.raises(flow.TraceError, match="mul_"):
        flow.jit(lambda x: (x * 1).view(-1).mul_(2))(f)  # a view
    # A captured tensor written in place: a mutation, performed by every call (torch's semantics).
    w = flow.ones(5)
    jw = flow.jit(lambda x: w.sub_(x[0]))
    assert jw(f) is w
    jw(f)
    np.testing.assert_allclose(w.numpy(), 1 - 2 * t[0].numpy(), rtol=1e-6, atol=1e-6)


def test_out_argument(gen):
    t, f = make_pair((3, 4), torch.float32, gen)
    o = flow.empty(3, 4)
    v = o[1:]
    r = flow.add(f, 1, out=o)
    assert r is o
    assert_same(o, t + 1)
    assert_same(v, (t + 1)[1:])  # written in place
    o2 = flow.empty(0)
    flow.sum(f, 1, out=o2)  # resized
    assert_same(o2, t.sum(1))
    o3 = flow.empty(3, 5, dtype=flow.float64)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double"):
        flow.matmul(f, flow.ones(4, 5), out=o3)  # as torch: a matrix product writes only its own dtype
    o4 = flow.empty(3, 4, dtype=flow.float64)
    flow.add(f, 1, out=o4)  # an elementwise op casts into any dtype the result can become
    assert_same(o4, (t + 1).double())
    oi = flow.empty(3, 4, dtype=flow.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        flow.mul(f, 2, out=oi)
    vals, idx = flow.empty(3), flow.empty(3, dtype=flow.int64)
    r = flow.max(f, 1, out=(vals, idx))
    assert r.values is vals and r.indices is idx
    assert_same(vals, t.max(1).values)
    assert_same(flow.cat([f, f], out=flow.empty(6, 4)), torch.cat([t, t]))


# ---- conversions, dtypes, devices, misc ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_conversions(dtype, gen):
    t, f = make_pair((3, 4), dtype, gen, "transposed")
    assert f.tolist() == t.tolist()
    assert f[1, 2].item() == t[1, 2].item()
    assert type(f[0, 0].item()) is type(t[0, 0].item())
    if dtype != torch.bfloat16:
        assert np.array_equal(f.numpy(), t.numpy())
    for target in ALL_DTYPES:
        assert_same(f.to(FLOW_OF[target]), t.to(target), msg=f"to {target}")
    assert_same(f.float(), t.float())
    assert_same(f.half(), t.half())
    assert_same(f.bfloat16(), t.bfloat16())
    assert_same(f.double(), t.double())
    assert_same(f.long(), t.long())
    assert_same(f.int(), t.int())
    assert_same(f.bool(), t.bool())
    assert_same(f.to(flow.ones(1, dtype=flow.float16)), t.to(torch.ones(1, dtype=torch.float16)))
    assert_same(f.to("cpu", flow.float64), t.to("cpu", torch.float64))
    assert f.to(f.dtype) is f and f.cpu() is f
    # copy=True always copies (by keyword or torch's positional non_blocking, copy); copy=False does not
    for c in (f.to(f.dtype, copy=True), f.to(f.dtype, False, True), f.to("cpu", f.dtype, False, True),
              f.to(f, False, True)):
        assert c is not f and c._c.storage_ptr() != f._c.storage_ptr()
        assert_same(c, t)
    assert f.to(f.dtype, False, False) is f and f.to(f.dtype, copy=False) is f
    assert f.type_as(flow.ones(1, dtype=flow.int32)).dtype is flow.int32


def test_cuda_memory_api_names_and_arguments():
    # torch.cuda's memory functions, with its argument forms; on a machine without CUDA (or before a
    # device's first allocation) every figure is zero, as torch reports for an uninitialized device.
    stats = flow.cuda.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current"):
        assert key in stats and stats[key] >= 0
    assert stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"]
    for dev in (None, 0, "cuda", "cuda:0", flow.device("cuda:0")):
        assert flow.cuda.max_memory_allocated(dev) >= flow.cuda.memory_allocated(dev) >= 0
        assert flow.cuda.memory_reserved(dev) >= flow.cuda.memory_allocated(dev)
    flow.cuda.reset_peak_memory_stats()
    flow.cuda.empty_cache()
    for bad in ("cpu", -1, True):
        with pytest.raises(ValueError, match="cuda device"):
            flow.cuda.memory_allocated(bad)
    counters = flow.cuda.library_counters()
    assert set(counters) == {"cudnn_fused", "cudnn_unfused", "cudnn_fused_refused", "cudnn_last_refusal",
                             "cudnn_z_probes", "cudnn_z_read", "cublaslt_split_epilogue", "cublaslt_plans"}
    if not flow.cuda.is_available():
        assert counters["cudnn_fused"] == counters["cudnn_unfused"] == counters["cublaslt_split_epilogue"] == 0
        assert counters["cublaslt_plans"] == 0
        assert flow.cuda.memory_allocated() == 0 and flow.cuda.max_memory_allocated() == 0
        assert all(v == 0 for v in flow.cuda.memory_stats().values())


def test_devices_grad_modes_and_dtypes():
    assert flow.device("cpu") == flow.ones(1).device and str(flow.device("cuda:0")) == "cuda:0"
    assert flow.zeros(2, device="cpu").device.type == "cpu"
    assert flow.zeros(2, device=flow.device("cpu")).device == flow.device("cpu")
    if not flow.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            flow.ones(2).cuda()
        with pytest.raises(RuntimeError, match="CUDA"):
            flow.ones(2, device="cuda")
    with flow.no_grad():
        assert not flow.ones(1).requires_grad
    with flow.inference_mode():
        pass
    with flow.inference_mode(False):
        pass

    @flow.no_grad()
    def f(x):
        return x + 1

    @flow.inference_mode()
    def g(x):
        return x + 1

    assert f(flow.ones(1)).item() == 2 and g(flow.ones(1)).item() == 2
    for name in ("float32", "float16", "bfloat16", "float64", "int32", "int64", "bool", "float", "half", "double",
                 "long", "int"):
        assert repr(getattr(flow, name)) == repr(getattr(torch, name)).replace("torch.", "flow.")


def test_elementwise_extras_and_operators(gen):
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        t, f = make_pair((3, 4), dtype, gen, "transposed")
        u, g = make_pair((4,), dtype, gen, low=1, high=5)
        for name, fn in [("//", lambda L, x, y: x // y), ("%", lambda L, x, y: x % y),
                         ("rfloordiv", lambda L, x, y: 7 // y),
                         ("fmod", lambda L, x, y: L.fmod(x, y)),
                         ("div floor", lambda L, x, y: L.div(x, y, rounding_mode="floor")),
                         ("div trunc", lambda L, x, y: x.div(y, rounding_mode="trunc")),
                         ("floor", lambda L, x, y: L.floor(x)),
                         ("round", lambda L, x, y: x.round()), ("sign", lambda L, x, y: x.sign()),
                         ("square", lambda L, x, y: L.square(x)), ("isnan", lambda L, x, y: x.isnan()),
                         ("and", lambda L, x, y: (x > 0) & (y > 2)), ("or", lambda L, x, y: (x > 0) | (y > 2)),
                         ("invert", lambda L, x, y: ~(x > 0)), ("logical_xor", lambda L, x, y: L.logical_xor(x, y)),
                         ("nan_to_num", lambda L, x, y: L.nan_to_num(x / 0.0 if x.is_floating_point() else x, 1.0)),
                         ("matmul op", lambda L, x, y: (x.float() @ y.float()))]:
            if raises_like(lambda: fn(torch, t, u), lambda: fn(flow, f, g)):
                continue
            assert_same(fn(flow, f, g), fn(torch, t, u), msg=f"{name} {dtype}")
    three = flow.full((2,), 3, dtype=flow.int64)  # integer & is bitwise (tests/python/test_bitwise.py)
    assert (three & flow.full((2,), 6, dtype=flow.int64)).tolist() == [2, 2]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_flip_triu_tril(dtype, gen):
    t, f = make_pair((4, 5, 3), dtype, gen, "transposed")
    for name, fn in [("flip", lambda L, x: x.flip(0, 2)), ("flip fn", lambda L, x: L.flip(x, (-1,))),
                     ("triu", lambda L, x: x.triu()), ("triu k", lambda L, x: L.triu(x, 2)),
                     ("tril k", lambda L, x: x.tril(-1)), ("tril_", lambda L, x: x.clone().tril_(1))]:
        assert_same(fn(flow, f), fn(torch, t), msg=name)
        assert_same(flow.jit(lambda x, fn=fn: fn(flow, x))(f), fn(torch, t), msg=name + " traced")


def test_transformer_and_resnet_patterns(gen):
    """The view/indexing idioms of a ViT attention block and a ResNet head, eager and traced."""
    B, N, C, H = 2, 5, 16, 4
    t, f = make_pair((B, N, C), torch.float32, gen)
    w, fw = make_pair((3 * C, C), torch.float32, gen)
    cls, fcls = make_pair((1, 1, C), torch.float32, gen)

    def vit(lib, x, w, cls):
        x = lib.cat([cls.expand(x.shape[0], -1, -1), x], dim=1)
        qkv = (x @ w.t()).reshape(B, N + 1, 3, H, C // H).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        a = (q @ k.transpose(-2, -1)) * (C // H) ** -0.5
        y = (a.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, N + 1, C)
        return y[:, 0], y[:, 1:].mean(1), x.var(-1, keepdim=True, unbiased=False)

    def head(lib, x):
        y = x.reshape(B, N, 4, 4).permute(0, 2, 3, 1)  # NHWC -> "image"
        return lib.flatten(y.mean((1, 2)), 1), y.amax(dim=(1, 2)), lib.flatten(y, 1)[:, :7]

    exp = vit(torch, t, w, cls) + head(torch, t)
    exact = vit(torch, t.double(), w.double(), cls.double()) + head(torch, t.double())
    eager = vit(flow, f, fw, fcls) + head(flow, f)
    traced = flow.jit(lambda x, w, c: vit(flow, x, w, c) + head(flow, x))(f, fw, fcls)
    for k, (a, b, e, x) in enumerate(zip(eager, traced, exp, exact)):
        # Two GEMMs around a softmax, in float32 and another summation order than torch's: each
        # result may be ~1e-4 from torch's, so the bar is torch's own float32 error against the
        # float64 result (flow within 4x of it, or of float32 rounding at the output's scale), plus
        # dtype, shape and NaN checks.
        bound = max(4 * float((e.double() - x).abs().max()), 2e-6 * (1 + float(x.abs().max())))
        for got, how in ((a, "eager"), (b, "traced")):
            assert_same(got, e, rtol=1e-3, atol=1e-3, msg=f"output {k} {how}")
            err = float((to_torch(got).double() - x).abs().max())
            assert err <= bound, (k, how, err, bound)


def test_large_inputs(gen):
    t, f = make_pair((1 << 20,), torch.float32, gen)
    assert_same(f.view(1024, 1024).t()[::2].sum(1), t.view(1024, 1024).t()[::2].sum(1), rtol=1e-4, atol=1e-3)
    assert_same(flow.cat([f[:1000], f[-5:]]), torch.cat([t[:1000], t[-5:]]))
    assert_same(f.reshape(4, -1).var(1), t.reshape(4, -1).var(1), rtol=1e-4, atol=1e-4)
    assert_same(f.max(), t.max())
    g = f.clone()
    g[g > 0] = 0
    tt = t.clone()
    tt[tt > 0] = 0
    assert_same(g, tt)


def test_untraceable_and_unsupported_are_named(gen):
    f = flow.ones(3, 4)
    with pytest.raises(flow.TraceError, match="item"):
        flow.jit(lambda x: x * x.sum().item())(f)
    with pytest.raises(flow.TraceError, match="depends on"):
        flow.jit(lambda x: flow.where(x > 0))(f)  # where(condition) is nonzero: its size depends on values
    with pytest.raises(NotImplementedError, match="Python bool"):
        f[True]
    _ = to_torch


def test_numpy_scalars_in_lists_keep_their_dtype():
    for data in ([np.float64(1.5), np.float64(-2)], [np.float32(1)], [[np.int32(3)], [np.int32(-4)]], [np.float16(2)],
                 [np.bool_(True)], [1.5, 2.5], [np.int64(7)]):
        assert flow.as_tensor(data).dtype is FLOW_OF[torch.as_tensor(data).dtype], data
        assert flow.tensor(data).dtype is FLOW_OF[torch.tensor(data).dtype], data


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_deepcopy_and_pickle_copy_values_and_storage(dtype, gen):
    import copy
    import pickle

    x = to_flow(make((3, 4), dtype, gen))
    for clone in (copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert type(clone) is flow.Tensor and clone.dtype is x.dtype and clone.shape == x.shape
        assert clone.data_ptr() != x.data_ptr()
        assert torch.equal(to_torch(clone), to_torch(x))
    view = x.t()[1:]
    assert torch.equal(to_torch(pickle.loads(pickle.dumps(view))), to_torch(view))
    m = flow.nn.Linear(4, 2)
    m2 = copy.deepcopy(m)
    assert type(m2.weight) is flow.nn.Parameter and torch.equal(to_torch(m2.weight), to_torch(m.weight))
    m2.weight.add_(1.0)
    assert not torch.equal(to_torch(m2.weight), to_torch(m.weight))  # its own storage
    p = pickle.loads(pickle.dumps(m.weight))
    assert type(p) is flow.nn.Parameter and torch.equal(to_torch(p), to_torch(m.weight))
    with pytest.raises(flow.TraceError, match="deepcopy"):
        flow.jit(lambda t: copy.deepcopy(t))(x)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_unfold_windows_and_byte_sizes(jit, gen):
    x = make((3, 8, 2), torch.float32, gen)
    for args in [(1, 3, 2), (1, 8, 1), (-1, 1, 1), (0, 2, 1), (1, 1, 3)]:
        fn = (lambda t: t.unfold(*args) * 1.0) if jit else (lambda t: t.unfold(*args))
        got = (flow.jit(fn) if jit else fn)(to_flow(x))
        assert_same(got, x.unfold(*args) * (1.0 if jit else 1), msg=str(args))
    if not jit:  # eagerly a view of the same storage, as torch's
        fx = to_flow(x)
        w = fx.unfold(1, 4, 2)
        fx[0, 2, 0] = 100.0
        assert w[0, 1, 0, 0].item() == 100.0
    for fn in (lambda m: m.ones(3, 4).unfold(1, 5, 1), lambda m: m.ones(3, 4).unfold(2, 1, 1),
               lambda m: m.ones(3, 4).unfold(1, 2, 0)):
        assert raises_like(lambda: fn(torch), lambda: fn(flow))
    t = make((3, 5), torch.float16, gen)
    assert to_flow(t).nbytes == t.nbytes and to_flow(t).itemsize == t.itemsize
