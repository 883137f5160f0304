"""Eager calls of composite functions (the pools, grid_sample, unfold, ...) run as one compiled
graph (flow/_eager_fusion.py): fewer launches (one for the pools), torch's values and strides, one
variant per signature with a cap, inline in a trace, op by op under flow.autocast."""
import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn.functional as FF
from flow import _eager_fusion
from flow.nn import _functional_more
from conftest import assert_same, make

POOLS = {
    "max_pool2d 3/2/1": (lambda F, x: F.max_pool2d(x, 3, 2, 1)),
    "max_pool2d ceil dilated": (lambda F, x: F.max_pool2d(x, 2, 2, 0, 2, ceil_mode=True)),
    "avg_pool2d 3/2/1": (lambda F, x: F.avg_pool2d(x, 3, 2, 1)),
    "avg_pool2d excluding pad": (lambda F, x: F.avg_pool2d(x, 2, 1, 1, count_include_pad=False)),
    "max_pool1d": (lambda F, x: F.max_pool1d(x.flatten(2), 4, 3)),
}


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("pool", list(POOLS))
def test_eager_pool_is_one_kernel_with_torchs_values(pool, dtype, channels_last, gen):
    fn = POOLS[pool]
    for shape in [(2, 3, 9, 8), (1, 5, 4, 7)]:
        x = make(shape, dtype, gen, special=True)
        f = flow.as_tensor(x)
        if channels_last:
            x, f = x.contiguous(memory_format=torch.channels_last), f.contiguous(memory_format=flow.channels_last)
        want = fn(TF, x)
        fn(FF, f)  # the first call traces and compiles
        flow.reset_launch_count()
        got = fn(FF, f)
        assert flow.launch_count() == 1, pool
        assert_same(got, want, msg=f"{pool} {shape}")
        if got.ndim == 4:
            assert got.is_contiguous(memory_format=flow.channels_last) == channels_last, got.stride()


COMPOSITES = {  # name: (inputs, fn(F, *inputs), the decorated function[, the module fn reaches it through])
    "grid_sample": (lambda g: [make((2, 3, 9, 8), torch.float32, g), torch.rand(2, 5, 4, 2, generator=g) * 2.2 - 1.1],
                    lambda F, x, grid: F.grid_sample(x, grid, align_corners=False), FF.grid_sample),
    "unfold": (lambda g: [make((2, 3, 7, 6), torch.float32, g)], lambda F, x: F.unfold(x, 3, padding=1), FF.unfold),
    "lp_pool2d": (lambda g: [make((2, 3, 8, 8), torch.float32, g)], lambda F, x: F.lp_pool2d(x, 2, 2), FF.lp_pool2d),
    "local_response_norm": (lambda g: [make((2, 6, 5, 5), torch.float32, g)],
                            lambda F, x: F.local_response_norm(x, 3), FF.local_response_norm),
    "logsigmoid": (lambda g: [make((4, 33), torch.float32, g, special=True)], lambda F, x: F.logsigmoid(x),
                   FF.logsigmoid),
    "cosine_similarity": (lambda g: [make((4, 33), torch.float32, g), make((4, 33), torch.float32, g)],
                          lambda F, a, b: F.cosine_similarity(a, b), FF.cosine_similarity),
    "adaptive_avg_pool2d": (lambda g: [make((2, 3, 9, 7), torch.float32, g)],
                            lambda F, x: F.adaptive_avg_pool2d(x, (4, 3)), FF.adaptive_avg_pool2d),
    "adaptive_max_pool2d": (lambda g: [make((2, 3, 9, 7), torch.float32, g, special=True)],
                            lambda F, x: F.adaptive_max_pool2d(x, (4, 3)), FF.adaptive_max_pool2d),
    "normalize": (lambda g: [make((6, 33), torch.float32, g)], lambda F, x: F.normalize(x, dim=-1), FF._normalize),
    "normalize p=1 with a zero row": (lambda g: [make((3, 8), torch.float32, g) * torch.tensor([[1.0], [0.0], [1.0]])],
                                      lambda F, x: F.normalize(x, p=1.0, dim=1), FF._normalize),
    "vector_norm": (lambda g: [make((5, 7, 9), torch.float32, g)],
                    lambda F, x: (flow if F is FF else torch).linalg.vector_norm(x, 2, dim=(0, 2)),
                    flow.linalg._vector_norm, flow.linalg),
    "vector_norm ord 3": (lambda g: [make((4, 17), torch.float32, g)],
                          lambda F, x: (flow if F is FF else torch).linalg.vector_norm(x, 3, dim=-1, keepdim=True),
                          flow.linalg._vector_norm, flow.linalg),
    "x ** 3": (lambda g: [make((5, 33), torch.float32, g, special=True)], lambda F, x: x ** 3,
               flow._ops._cube_or_inverse_square, flow._ops),
    "x ** -2, float64": (lambda g: [make((5, 33), torch.float64, g, special=True)], lambda F, x: x ** -2,
                         flow._ops._cube_or_inverse_square, flow._ops),
}


def _top(F):
    """flow or torch, as F (the functional module) is flow's or torch's."""
    return flow if F is FF else torch


def _x(dtype=torch.float32, shape=(5, 34), special=True):
    return lambda g: [make(shape, dtype, g, special=special)]


def _xy(dtype=torch.float32, shape=(5, 34), special=True):
    return lambda g: [make(shape, dtype, g, special=special), make(shape, dtype, g, special=special)]


def _xyz(dtype=torch.float32, shape=(5, 34)):
    return lambda g: [make(shape, dtype, g) for _ in range(3)]


# Activations and math written as several flow ops (nn/_functional_more.py, _math.py, _math_more.py).
COMPOSITES.update({
    "selu": (_x(), lambda F, x: F.selu(x), _functional_more._selu, _functional_more),
    "selu float16": (_x(torch.float16), lambda F, x: F.selu(x), _functional_more._selu, _functional_more),
    "celu alpha 0.5": (_x(), lambda F, x: F.celu(x, 0.5), _functional_more._celu, _functional_more),
    "glu": (_x(), lambda F, x: F.glu(x, -1), _functional_more._glu, _functional_more),
    "hardshrink": (_x(), lambda F, x: F.hardshrink(x, 0.3), _functional_more._hardshrink, _functional_more),
    "softshrink float16": (_x(torch.float16), lambda F, x: F.softshrink(x, 0.3), _functional_more._softshrink,
                           _functional_more),
    "tanhshrink": (_x(), lambda F, x: F.tanhshrink(x), _functional_more._tanhshrink, _functional_more),
    "softsign": (_x(), lambda F, x: F.softsign(x), _functional_more._softsign, _functional_more),
    "prelu": (lambda g: [make((2, 3, 7), torch.float32, g, special=True), make((3,), torch.float32, g)],
              lambda F, x, w: F.prelu(x, w), _functional_more._prelu, _functional_more),
    "threshold": (_x(), lambda F, x: F.threshold(x, 0.1, 20.0), _functional_more._threshold, _functional_more),
    "logaddexp": (_xy(), lambda F, a, b: _top(F).logaddexp(a, b), flow._math._logaddexp, flow._math),
    "addcmul": (_xyz(), lambda F, x, a, b: _top(F).addcmul(x, a, b, value=0.5), flow._math._addcmul, flow._math),
    "addcdiv float16": (_xyz(torch.float16), lambda F, x, a, b: _top(F).addcdiv(x, a, b, value=2),
                         flow._math._addcdiv, flow._math),
    "lerp by 0.3": (_xy(), lambda F, a, b: _top(F).lerp(a, b, 0.3), flow._math._lerp, flow._math),
    "lerp by a tensor": (_xyz(), lambda F, a, b, w: _top(F).lerp(a, b, w), flow._math._lerp, flow._math),
    "frac": (_x(), lambda F, x: _top(F).frac(x), flow._math._frac, flow._math),
    "isclose": (lambda g: [make((5, 34), torch.float32, g, special=True)] * 2 + [make((5, 34), torch.float32, g)],
                lambda F, a, b, c: _top(F).isclose(a, b + c * 1e-6, equal_nan=True), flow._math._isclose, flow._math),
    "logit": (lambda g: [torch.rand(5, 34, generator=g)], lambda F, z: _top(F).logit(z, eps=1e-3),
              flow._math_more._logit, flow._math_more),
    "xlogy": (_xy(), lambda F, a, b: _top(F).xlogy(a, b.abs()), flow._math_more._xlogy, flow._math_more),
    "sinc": (_x(), lambda F, x: _top(F).sinc(x), flow._math_more._sinc, flow._math_more),
})

# Losses whose terms and reduction are one kernel: the pointwise terms fused into the reduction.
_L = flow.nn._loss_functional
COMPOSITES.update({
    "mse_loss": (_xy(special=False), lambda F, a, b: F.mse_loss(a, b), FF._mse_loss, FF),
    "l1_loss sum": (_xy(special=False), lambda F, a, b: F.l1_loss(a, b, reduction="sum"), FF._l1_loss, FF),
    "huber_loss delta 0.5": (_xy(special=False), lambda F, a, b: F.huber_loss(a, b, delta=0.5), _L._huber_loss, _L),
    "smooth_l1_loss none float64": (_xy(torch.float64, special=False),
                                    lambda F, a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.5),
                                    _L._smooth_l1_loss, _L),
    "kl_div batchmean log_target": (_xy(special=False),
                                    lambda F, a, b: F.kl_div(a, b, reduction="batchmean", log_target=True),
                                    _L._kl_div, _L),
})


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_eager_composites_run_compiled_with_torchs_values(name, gen, monkeypatch):
    build, fn, decorated, *module = COMPOSITES[name]
    ts = build(gen)
    fs = [flow.as_tensor(t) for t in ts]
    want = fn(TF, *ts)
    fn(FF, *fs)
    flow.reset_launch_count()
    got = fn(FF, *fs)
    fused_launches = flow.launch_count()
    assert decorated.jitted is not None and decorated.jitted is not False, name
    assert_same(got, want, rtol=1e-5, atol=1e-6, msg=name)
    monkeypatch.setattr(module[0] if module else FF, decorated.__name__, decorated.__wrapped__)  # op by op: same values
    flow.reset_launch_count()
    op_by_op = fn(FF, *fs)
    assert flow.launch_count() > fused_launches, name
    assert_same(got, torch.from_numpy(op_by_op.numpy()), rtol=0, atol=0, msg=name + " op by op")


def test_op_by_op_under_autocast_and_inline_in_a_trace(gen):
    x = flow.as_tensor(make((2, 3, 8, 8), torch.float32, gen))
    FF.max_pool2d(x, 3, 2, 1)
    with flow.autocast("cpu"):
        flow.reset_launch_count()
        FF.max_pool2d(x, 3, 2, 1)
        assert flow.launch_count() > 1  # each tap and maximum, as before
    jitted = flow.jit(lambda a: FF.max_pool2d(a, 3, 2, 1).relu() + 1)
    assert_same(jitted(x), TF.max_pool2d(torch.from_numpy(x.numpy()), 3, 2, 1).relu() + 1)
    assert jitted.num_kernels == 1, jitted.explain(with_source=False)


def test_variants_are_capped_least_recently_used_first(gen, monkeypatch):
    monkeypatch.setattr(_eager_fusion, "_MAX_VARIANTS", 2)
    pool = _eager_fusion.fused_in_eager(lambda x, k: FF.max_pool2d.__wrapped__(x, k))
    x = flow.as_tensor(make((1, 2, 8, 8), torch.float32, gen))
    # k=4 drops k=3's variant (k=2 was used since), so the last k=2 runs its kept variant and the
    # last k=3 traces again.
    for k in (2, 3, 2, 4, 2, 3):
        assert_same(pool(x, k), TF.max_pool2d(torch.from_numpy(x.numpy()), k))
        assert len(pool.jitted._variants) <= 2
    assert pool.jitted.num_traces == 4


def test_new_scalar_values_past_the_cap_run_op_by_op(gen, monkeypatch):
    """A scalar argument is a kernel constant: an optimizer-like caller passing a new value each call
    would compile each call, so past _MAX_SCALAR_VALUES distinct values new ones run op by op (the
    values seen before stay compiled); -0.0 and 0.0 are different values, every NaN the same."""
    monkeypatch.setattr(_eager_fusion, "_MAX_SCALAR_VALUES", 3)
    scaled = _eager_fusion.fused_in_eager(lambda x, w: x * w + 1.0)
    x = flow.as_tensor(make((3, 4), torch.float32, gen))
    tx = torch.from_numpy(x.numpy())
    for w in (0.5, 1.5, 2.5, 3.5, 4.5, 0.5):
        flow.reset_launch_count()
        assert_same(scaled(x, w), tx * w + 1.0)
        assert flow.launch_count() == (1 if w < 3 else 2), w  # op by op: the multiply, then the add
    assert scaled.jitted.num_traces == 3
    signed = _eager_fusion.fused_in_eager(lambda x, v: x + v)
    z = flow.tensor([-0.0])
    assert [bool(torch.from_numpy(signed(z, v).numpy()).signbit()) for v in (-0.0, 0.0, -0.0)] == [True, False, True]
    nan = _eager_fusion.fused_in_eager(lambda x, v: x * 0 + v)
    for _ in range(2):
        assert bool(torch.from_numpy(nan(z, float("nan")).numpy()).isnan())  # (a fresh NaN object each call)
    assert nan.jitted.num_traces == 1


def test_mixed_layouts_keep_torchs_strides(gen):
    """A channels-last input beside a contiguous one: the result's strides follow torch's rule (op
    by op), not a compiled graph's contiguous output."""
    a = make((2, 3, 5, 6), torch.float32, gen).contiguous(memory_format=torch.channels_last)
    b = make((2, 3, 5, 6), torch.float32, gen)
    fa = flow.as_tensor(a).contiguous(memory_format=flow.channels_last)
    fb = flow.as_tensor(b)
    for fn in (lambda m, p, q: m.logaddexp(p, q), lambda m, p, q: m.lerp(p, q, 0.25),
               lambda m, p, q: m.nn.functional.mse_loss(p, q, reduction="none")):
        want = fn(torch, a, b)
        got = fn(flow, fa, fb)
        assert_same(got, want)
        assert tuple(got.stride()) == tuple(want.stride())
        got_same_layout = fn(flow, fb, fb)  # both contiguous: compiled
        assert got_same_layout.is_contiguous()


def test_a_signature_that_needs_values_on_the_host_runs_op_by_op(gen):
    calls = []

    def peeks(x, scale):
        calls.append(1)
        if isinstance(scale, flow.Tensor):
            scale = float(scale)  # a value on the host: a TraceError in a trace
        return x * scale

    fused = _eager_fusion.fused_in_eager(peeks)
    x = flow.as_tensor(make((3, 4), torch.float32, gen))
    want = torch.from_numpy(x.numpy()) * 2.5
    for _ in range(2):
        assert_same(fused(x, flow.tensor(2.5)), want)
    assert len(calls) == 3 and len(fused.unfusable) == 1  # one failed trace, then two eager calls
    calls.clear()
    for _ in range(2):  # another signature still runs compiled: traced once
        assert_same(fused(x, 2.5), want)
    assert len(calls) == 1 and fused.jitted.num_traces == 2


def test_every_call_returns_a_new_tensor(gen):
    # Every window in the padding: the result is a filled tensor, a constant of the trace; each call
    # still gets its own copy, as op by op.
    x = flow.as_tensor(make((1, 1, 2, 2), torch.float32, gen))
    first = FF.max_pool2d(x, 2, 1, 1, dilation=3)
    second = FF.max_pool2d(x, 2, 1, 1, dilation=3)
    assert first is not second and first._c.storage_ptr() != second._c.storage_ptr()
    first.fill_(5.0)
    assert_same(FF.max_pool2d(x, 2, 1, 1, dilation=3), TF.max_pool2d(torch.from_numpy(x.numpy()), 2, 1, 1, 3))
