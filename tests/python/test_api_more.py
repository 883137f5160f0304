"""torch's namespace beyond the core (python/flow/_api_more.py) against PyTorch on fresh random
inputs: broadcast_tensors, isin, fmax/fmin (NaN), isneginf/isposinf/isreal, logaddexp2 (infinities),
ldexp, inner, vdot, addmv/addr/addbmm (beta 0 ignores NaN), chain_matmul, cov (weights, correction)
and corrcoef, renorm, unravel_index; the top-level spellings of nn.functional with torch's argument
orders; the in-place top-level ops; and the Tensor aliases and in-place forms; eagerly and (where
a value) under flow.jit."""
import math

import pytest
import torch

import flow
from conftest import assert_same, make, to_flow, to_torch


def _conv(v):
    if isinstance(v, torch.Tensor):
        return to_flow(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_conv(e) for e in v)
    return v


def _same(got, want, msg, **tol):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want), msg
        for g, w in zip(got, want):
            _same(g, w, msg, **tol)
        return
    assert_same(got, want, msg=msg, **tol)


# (name, fn(m, *tensors), input makers(gen)): m is torch or flow.
def _cases():
    f32 = torch.float32

    def mk(*shape, dtype=f32, special=False, **kw):
        return lambda gen: make(shape, dtype, gen, special=special, **kw)

    return [
        ("broadcast_tensors", lambda m, a, b, c: m.broadcast_tensors(a, b, c), [mk(3, 1), mk(4), mk(2, 1, 1)]),
        ("isin", lambda m, a, b: m.isin(a, b), [mk(4, 5, dtype=torch.int64, low=0, high=9),
                                                 mk(6, dtype=torch.int64, low=0, high=9)]),
        ("isin_invert_scalar", lambda m, a: m.isin(a, 3, invert=True), [mk(7, dtype=torch.int64, low=0, high=5)]),
        ("isin_float", lambda m, a, b: m.isin(a.round(), b.round()), [mk(9), mk(3, 3)]),
        ("fmax", lambda m, a, b: m.fmax(a, b), [mk(5, 4, special=True), mk(4, special=True)]),
        ("fmin", lambda m, a, b: m.fmin(a, b), [mk(5, 4, special=True), mk(5, 4, special=True)]),
        ("fmax_int", lambda m, a, b: m.fmax(a, b), [mk(6, dtype=torch.int32), mk(6, dtype=torch.int32)]),
        ("isneginf", lambda m, a: (m.isneginf(a), m.isposinf(a), a.isneginf(), m.isreal(a)),
         [mk(20, special=True)]),
        ("isposinf_int", lambda m, a: m.isposinf(a), [mk(5, dtype=torch.int64)]),
        ("logaddexp2", lambda m, a, b: m.logaddexp2(a, b), [mk(30, special=True), mk(30, special=True)]),
        ("ldexp", lambda m, a, b: m.ldexp(a, b), [mk(4, 3), mk(3, dtype=torch.int64, low=-4, high=5)]),
        ("ldexp_int_input", lambda m, a, b: m.ldexp(a, b), [mk(5, dtype=torch.int64), mk(5, dtype=torch.int64,
                                                                                          low=0, high=4)]),
        ("inner", lambda m, a, b: m.inner(a, b), [mk(2, 3, 5), mk(4, 5)]),
        ("inner_scalar", lambda m, a, b: m.inner(a, b), [mk(), mk(3, 2)]),
        ("vdot", lambda m, a, b: m.vdot(a, b), [mk(7), mk(7)]),
        ("addmv", lambda m, x, a, v: m.addmv(x, a, v, beta=0.5, alpha=2.0), [mk(3), mk(3, 4), mk(4)]),
        ("addmv_beta0_nan", lambda m, x, a, v: m.addmv(x * math.nan, a, v, beta=0), [mk(3), mk(3, 4), mk(4)]),
        ("addr", lambda m, x, a, b: m.addr(x, a, b, alpha=3), [mk(1, 4), mk(3), mk(4)]),
        ("addbmm", lambda m, x, a, b: m.addbmm(x, a, b, beta=2), [mk(3, 5), mk(4, 3, 2), mk(4, 2, 5)]),
        ("cov", lambda m, x: m.cov(x), [mk(3, 8)]),
        ("cov_1d", lambda m, x: m.cov(x, correction=0), [mk(9)]),
        ("cov_weights", lambda m, x, f, a: m.cov(x, fweights=f, aweights=a.abs()),
         [mk(2, 6), mk(6, dtype=torch.int64, low=1, high=4), mk(6)]),
        ("corrcoef", lambda m, x: m.corrcoef(x), [mk(4, 10)]),
        ("renorm", lambda m, x: m.renorm(x, 2, 1, 1.5), [mk(3, 4, 5)]),
        ("renorm_p1_dim0", lambda m, x: x.renorm(1, 0, 2.0), [mk(5, 3)]),
        ("unravel_index", lambda m, i: m.unravel_index(i, (3, 4, 5)), [mk(2, 6, dtype=torch.int64, low=-60,
                                                                           high=60)]),
        ("sum_to_size", lambda m, x: x.sum_to_size(3, 1, 5), [mk(2, 3, 4, 5)]),
        ("compare_aliases", lambda m, a, b: (a.greater(b), a.less_equal(b), a.not_equal(b)), [mk(4, 5), mk(5)]),
        ("batch_norm_top", lambda m, x, w, b, rm, rv: m.batch_norm(x, w, b, rm, rv.abs(), False, 0.1, 1e-5, True),
         [mk(2, 3, 4), mk(3), mk(3), mk(3), mk(3)]),
        ("layer_norm_top", lambda m, x, w, b: m.layer_norm(x, [5], w, b, 1e-5, True), [mk(3, 5), mk(5), mk(5)]),
        ("group_norm_top", lambda m, x: m.group_norm(x, 2), [mk(2, 4, 3)]),
        ("instance_norm_top", lambda m, x: m.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, True),
         [mk(2, 3, 6)]),
        ("embedding_top", lambda m, w, i: m.embedding(w, i), [mk(10, 4), mk(2, 3, dtype=torch.int64, low=0, high=10)]),
        ("pixel_shuffle_top", lambda m, x: m.pixel_shuffle(x, 2), [mk(1, 8, 2, 3)]),
        ("prelu_top", lambda m, x, w: m.prelu(x, w), [mk(2, 3, 4), mk(3)]),
        ("cosine_similarity_top", lambda m, a, b: m.cosine_similarity(a, b), [mk(4, 6), mk(4, 6)]),
        ("constant_pad_nd", lambda m, x: m.constant_pad_nd(x, [1, 2, 0, 1], 3.0), [mk(2, 3)]),
        ("threshold_top", lambda m, x: m.threshold(x, 0.1, -2.0), [mk(10)]),
        ("dropout_eval_top", lambda m, x: m.dropout(x, 0.5, False), [mk(6)]),
    ]


CASES = _cases()


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name,fn,makers", CASES, ids=[c[0] for c in CASES])
def test_functions_match_torch(name, fn, makers, jit, gen):
    args = [mk(gen) for mk in makers]
    want = fn(torch, *args)
    if jit and name == "unravel_index":
        jit = False  # (its range check reads the indices: eager only, as torch's)
    run = flow.jit(lambda *a: fn(flow, *a)) if jit else (lambda *a: fn(flow, *a))
    got = run(*_conv(args))
    _same(got, want, name, atol=2e-5, rtol=2e-5)


def test_in_place_forms_match_torch(gen):
    x = make((4, 5), torch.float32, gen)
    y = make((5,), torch.float32, gen)
    for name, args in (("eq_", (y,)), ("lt_", (0.0,)), ("greater_equal_", (y,)), ("not_equal_", (y,)),
                       ("cumprod_", (1,)), ("renorm_", (2, 0, 1.0)), ("ldexp_", (torch.full((5,), 2.0),)),
                       ("absolute_", ()), ("negative_", ()), ("fix_", ()),
                       ("arctan_", ()), ("logical_xor_", (y > 0,))):
        t, f = x.clone(), to_flow(x.clone())
        ret = getattr(f, name)(*_conv(args))
        getattr(t, name)(*args)
        assert ret is f, name
        assert_same(f, t, msg=name)
    a, m, v = make((3,), torch.float32, gen), make((3, 4), torch.float32, gen), make((4,), torch.float32, gen)
    t, f = a.clone(), to_flow(a.clone())
    t.addmv_(m, v, alpha=2)
    f.addmv_(to_flow(m), to_flow(v), alpha=2)
    assert_same(f, t, atol=1e-5)
    c, p, q = make((3, 4), torch.float32, gen), make((3, 2), torch.float32, gen), make((2, 4), torch.float32, gen)
    t, f = c.clone(), to_flow(c.clone())
    t.addmm_(p, q, beta=0.5)
    f.addmm_(to_flow(p), to_flow(q), beta=0.5)
    assert_same(f, t, atol=1e-5)
    t, f = x.clone(), to_flow(x.clone())
    assert flow.relu_(f) is f and flow.sigmoid_(f) is f
    assert_same(f, torch.sigmoid_(torch.relu_(t)))
    d = make((4,), torch.float64, gen)
    t, f = d.clone(), to_flow(d.clone())
    t.float_power_(3)
    f.float_power_(3)
    assert_same(f, t)
    with pytest.raises(RuntimeError, match="requires dtype Double"):
        to_flow(x.clone()).float_power_(2)
    t, f = x.clone(), to_flow(x.clone())
    f.swapaxes_(0, 1)
    assert list(f.shape) == [5, 4]


def test_tensor_properties_and_errors(gen):
    x = to_flow(make((2, 3), torch.float32, gen))
    assert x.is_cpu and x.is_leaf and x.get_device() == -1 and x.is_signed() and x.detach_() is x
    assert not flow.ones(2, dtype=flow.uint8).is_signed()
    assert x.positive() is x
    with pytest.raises(RuntimeError, match="inner\\(\\) the last dimension must match"):
        flow.inner(flow.ones(2, 3), flow.ones(2))
    with pytest.raises(RuntimeError, match="is not expandable to size"):
        x.sum_to_size(3, 3)
    with pytest.raises(RuntimeError, match="out of bounds for shape"):
        flow.unravel_index(flow.tensor([60]), (3, 4, 5))
    with pytest.raises(TypeError, match="integer dtype"):
        flow.unravel_index(flow.tensor([1.0]), (3,))
    with pytest.warns(UserWarning, match="degrees of freedom"):
        c = flow.cov(flow.ones(1, 1))
    assert math.isnan(c.item()) or math.isinf(c.item())
    with pytest.warns(UserWarning, match="chain_matmul is deprecated"):
        m = [make((3, 4), torch.float32, gen), make((4, 2), torch.float32, gen), make((2, 5), torch.float32, gen)]
        assert_same(flow.chain_matmul(*map(to_flow, m)), m[0] @ m[1] @ m[2], atol=1e-5)
    assert to_torch(flow.isin(flow.ones(3), flow.ones(0))).tolist() == [False] * 3
