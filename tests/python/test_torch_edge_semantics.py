"""Edge cases where flow's values or errors differed from torch's, found by a fuzzing campaign of
generated calls against torch: 0-d masks and indices, negative split points and pads, broadcasting
in take_along_dim, type promotion of addcmul, reductions over no dims, integer division by zero,
class targets out of range, argument checks, sizes that overflow, and a failed host allocation.
Each case compares with torch on fresh random inputs (values) or with torch's exception and message."""
import itertools
import math

import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn.functional as FF
from conftest import assert_same, make, to_flow, to_torch


def same_error(torch_fn, flow_fn):
    """Both raise, flow an instance of torch's class, with torch's message."""
    with pytest.raises(Exception) as te:
        torch_fn()
    with pytest.raises(type(te.value)) as fe:
        flow_fn()
    assert str(fe.value) == str(te.value), f"\nflow:  {fe.value}\ntorch: {te.value}"


# ---- values ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_a_0d_mask(gen, accumulate):
    """A 0-d mask consumes no dim: True writes every row (flow wrote row 0 only), False none."""
    x = make((3, 2), torch.float32, gen)
    cases = [
        ((torch.tensor(True),), make((), torch.float32, gen)),
        ((torch.tensor(False),), make((), torch.float32, gen)),
        ((torch.tensor([0, 2]), torch.tensor(True)), make((2, 1), torch.float32, gen)),
        ((torch.tensor(True), torch.tensor([1])), make((2,), torch.float32, gen)),
    ]
    for indices, v in cases:
        # (torch's accumulating kernel fails an internal assert on 0-d masks; the positions here are
        # distinct, so adding to what they read is the same)
        want = x + torch.index_put(torch.zeros_like(x), indices, v) if accumulate else torch.index_put(x, indices, v)
        got = flow.index_put(to_flow(x), tuple(to_flow(i) for i in indices), to_flow(v), accumulate=accumulate)
        assert_same(got, want)
    m = torch.tensor([[True, False], [False, True]])
    y = make((2, 2, 3), torch.float32, gen)
    v = make((3,), torch.float32, gen)
    assert_same(flow.index_put(to_flow(y), (to_flow(m), flow.tensor(True)), to_flow(v)),
                torch.index_put(y, (m, torch.tensor(True)), v))


def test_tensor_split_at_negative_and_clamped_points():
    """Split points are slice bounds: negatives count from the end (flow took them as 0)."""
    for points in ([-1], [1, -1], [-10, 3], [3, 1], [7], [-2, -4], [0, 5, 5]):
        want = [t.tolist() for t in torch.tensor_split(torch.arange(5), points)]
        assert [t.tolist() for t in flow.tensor_split(flow.arange(5), points)] == want, points
    for arg in (torch.tensor([1, -1]), torch.tensor(2)):
        want = [t.tolist() for t in torch.tensor_split(torch.arange(5), arg)]
        assert [t.tolist() for t in flow.tensor_split(flow.arange(5), to_flow(arg))] == want
    same_error(lambda: torch.tensor_split(torch.arange(5), torch.tensor([1], dtype=torch.int32)),
               lambda: flow.tensor_split(flow.arange(5), flow.tensor([1], dtype=flow.int32)))
    with pytest.raises(RuntimeError, match="sections"):  # torch runs out of memory; flow would loop
        flow.tensor_split(flow.arange(5), 2**40)


def test_take_along_dim_broadcasts(gen):
    x = make((2, 3, 4), torch.float32, gen)
    cases = [(torch.tensor([[[0], [3], [1]]]), 2), (torch.tensor([[[1, 0, 1, 1]]]), 0),
             (torch.tensor([[[2]], [[0]]]), 1),
             (torch.tensor([[[3, 0, 1, 2]]]), -1), (torch.tensor([5, 23, 0]), None)]
    for ix, d in cases:
        assert_same(flow.take_along_dim(to_flow(x), to_flow(ix), d), torch.take_along_dim(x, ix, d))
    assert_same(to_flow(x).take_along_dim(flow.tensor([[[1]]]), 2), x.take_along_dim(torch.tensor([[[1]]]), 2))
    same_error(lambda: torch.take_along_dim(x, torch.tensor([0]), 1),
               lambda: flow.take_along_dim(to_flow(x), flow.tensor([0]), 1))
    same_error(lambda: torch.take_along_dim(x, torch.tensor([[[0]]], dtype=torch.int32), 1),
               lambda: flow.take_along_dim(to_flow(x), flow.tensor([[[0]]], dtype=flow.int32), 1))


def test_circular_pad_crops_then_wraps(gen):
    """Negative amounts crop first and the wrap reads what is left (flow wrapped the uncropped row).
    Where torch's own kernel reads outside the kept part (its result is garbage), flow raises."""
    for size in (1, 3, 5):
        x = make((1, 2, size), torch.float32, gen)
        for lo, hi in itertools.product(range(-6, 7), repeat=2):
            kept = size - max(-lo, 0) - max(-hi, 0)
            if size + lo + hi < 0 or lo > size or hi > size:
                same_error(lambda: TF.pad(x, (lo, hi), mode="circular"),
                           lambda: FF.pad(to_flow(x), (lo, hi), mode="circular"))
            elif size + lo + hi == 0:  # (torch's own result varies here: empty, or an internal error)
                assert FF.pad(to_flow(x), (lo, hi), mode="circular").shape == (1, 2, 0)
            elif kept >= 1 and lo <= kept and hi <= kept:
                assert_same(FF.pad(to_flow(x), (lo, hi), mode="circular"), TF.pad(x, (lo, hi), mode="circular"),
                            msg=f"pad {(lo, hi)} of {size}")
            else:
                with pytest.raises(RuntimeError, match="Padding|wrapping"):
                    FF.pad(to_flow(x), (lo, hi), mode="circular")
    x = make((1, 1, 4, 5), torch.float32, gen)
    assert_same(FF.pad(to_flow(x), (-1, 2, 1, -2), mode="circular"), TF.pad(x, (-1, 2, 1, -2), mode="circular"))


def test_addcmul_and_addcdiv_promote_all_three_operands(gen):
    """torch's n-ary promotion: a bfloat16 input with float32 tensors gives float32 (flow kept bfloat16)."""
    dtypes = (torch.bfloat16, torch.float16, torch.float32, torch.int32)
    for name in ("addcmul", "addcdiv"):
        for dts in itertools.product(dtypes, repeat=3):
            args = [make(s, d, gen, low=1, high=3) for s, d in zip(((3,), (3,), ()), dts)]
            try:
                want = getattr(torch, name)(*args, value=2)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    getattr(flow, name)(*map(to_flow, args), value=2)
                continue
            got = getattr(flow, name)(*map(to_flow, args), value=2)
            assert got.dtype == want.dtype or str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1], dts
            assert_same(got, want, msg=f"{name} {dts}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.bool, torch.int64])
def test_any_and_all_over_no_dims_reduce_nothing(gen, dtype):
    x = make((2, 3), dtype, gen)
    for name, keepdim in itertools.product(("any", "all"), (False, True)):
        want = getattr(torch, name)(x, dim=(), keepdim=keepdim)
        got = getattr(flow, name)(to_flow(x), dim=(), keepdim=keepdim)
        assert_same(got, want)
    assert flow.sum(to_flow(x).float(), dim=()).shape == ()  # sum keeps torch's legacy: all dims


def test_index_select_and_embedding_of_0d_tensors(gen):
    """0-d inputs reached the scheduler with more index dims than the kernel's domain."""
    x = make((), torch.float32, gen)
    for ix in (torch.tensor([0]), torch.tensor(0), torch.tensor([-1])):
        if ix.min() < 0:
            with pytest.raises(IndexError):
                flow.index_select(to_flow(x), 0, to_flow(ix))
            continue
        assert_same(flow.index_select(to_flow(x), 0, to_flow(ix)), torch.index_select(x, 0, ix))
    same_error(lambda: torch.index_select(x, 0, torch.tensor([0, 0])),
               lambda: flow.index_select(to_flow(x), 0, flow.tensor([0, 0])))
    w = make((5, 3), torch.float32, gen)
    assert_same(FF.embedding(flow.tensor(2), to_flow(w)), TF.embedding(torch.tensor(2), w))
    f = flow.jit(lambda i, w: FF.embedding(i, w) * 2)
    assert_same(f(flow.tensor(4), to_flow(w)), TF.embedding(torch.tensor(4), w) * 2)


def test_adaptive_pools_to_empty_sizes(gen):
    x = make((1, 2, 4, 4), torch.float32, gen)
    for size in (0, (0, 3), (2, 0)):
        for name in ("adaptive_avg_pool2d", "adaptive_max_pool2d"):
            assert_same(getattr(FF, name)(to_flow(x), size), getattr(TF, name)(x, size))
    assert_same(FF.adaptive_avg_pool1d(to_flow(x[0]), 0), TF.adaptive_avg_pool1d(x[0], 0))


# ---- errors ---------------------------------------------------------------------------------------

INTEGER_DIVISIONS_BY_ZERO = [
    lambda m: m.tensor([3]) // 0,
    lambda m: m.tensor([3, 4]) // m.tensor([1, 0]),
    lambda m: m.tensor([3]) % 0,
    lambda m: 7 // m.tensor([0, 2]),
    lambda m: 7 % m.tensor([2, 0]),
    lambda m: m.fmod(m.tensor([3]), 0),
    lambda m: m.remainder(m.tensor([5]), m.tensor(0)),
    lambda m: m.div(m.tensor([3]), 0, rounding_mode="trunc"),
    lambda m: m.div(m.tensor([3]), m.tensor([0]), rounding_mode="floor"),
    lambda m: m.tensor([3], dtype=m.uint8) // m.tensor([0], dtype=m.uint8),
    lambda m: m.floor_divide(m.tensor([5]), False),
]


@pytest.mark.parametrize("case", range(len(INTEGER_DIVISIONS_BY_ZERO)))
def test_integer_division_by_zero_raises_on_the_cpu(case):
    """torch's CPU kernels raise; flow returned the dividend or 0."""
    fn = INTEGER_DIVISIONS_BY_ZERO[case]
    same_error(lambda: fn(torch), lambda: fn(flow))


def test_float_division_by_zero_and_nonzero_integer_divisors_still_compute(gen):
    a, b = make((7,), torch.int64, gen, low=-9, high=9), make((7,), torch.int64, gen, low=1, high=5)
    for fn in (lambda m, a, b: a // b, lambda m, a, b: a % -b, lambda m, a, b: m.fmod(a, b),
               lambda m, a, b: a // 0.0, lambda m, a, b: a.float() % 0, lambda m, a, b: a % b.float().sub(b)):
        assert_same(fn(flow, to_flow(a), to_flow(b)), fn(torch, a, b))
    # an empty result divides nothing
    assert (flow.tensor([1, 2])[:0] // 0).shape == (0,)
    assert (flow.ones(0, 3, dtype=flow.int64) % flow.tensor([0, 1, 2])).shape == (0, 3)
    f = flow.jit(lambda a, b: a // b)  # compiled graphs do not check (as torch's CUDA kernels)
    assert f(flow.tensor([6]), flow.tensor([3])).tolist() == [2]


def test_div_with_a_rounding_mode(gen):
    """An integer divided by a float number truncates the float quotient (it went through fmod: NaN
    for 0.0); bool by bool is refused with torch's kernel names."""
    a = make((9,), torch.int64, gen, low=-20, high=20)
    for b in (0.0, 2.5, -3.0, 2, torch.tensor([2.5]), torch.tensor([3])):
        for mode in ("trunc", "floor"):
            want = torch.div(a, b, rounding_mode=mode)
            assert_same(flow.div(to_flow(a), to_flow(b) if isinstance(b, torch.Tensor) else b, rounding_mode=mode),
                        want)
    for mode in ("trunc", "floor"):
        same_error(lambda: torch.div(torch.tensor([True]), True, rounding_mode=mode),
                   lambda: flow.div(flow.tensor([True]), True, rounding_mode=mode))


def test_remainder_and_floor_divide_take_a_number_first(gen):
    t = make((6,), torch.int64, gen, low=1, high=9)
    for fn in (lambda m, t: m.remainder(5, t), lambda m, t: m.floor_divide(5, t), lambda m, t: m.remainder(5.5, t),
               lambda m, t: m.remainder(-7, t.float())):
        assert_same(fn(flow, to_flow(t)), fn(torch, t))
    same_error(lambda: torch.remainder(5, torch.tensor([0])), lambda: flow.remainder(5, flow.tensor([0])))
    with pytest.raises(TypeError):  # fmod does not
        flow.fmod(5, to_flow(t))


def test_class_targets_out_of_range(gen):
    x = make((2, 3), torch.float32, gen)
    cases = [
        lambda m, F, x: F.nll_loss(x, m.tensor([0, -1])),
        lambda m, F, x: F.nll_loss(x, m.tensor([0, 3])),
        lambda m, F, x: F.cross_entropy(x, m.tensor([3, 7])),
        lambda m, F, x: F.cross_entropy(x.unsqueeze(-1).expand(2, 3, 4), m.tensor([[0, 1, 2, 3], [0, 0, 0, 0]])),
        lambda m, F, x: F.nll_loss(x[0], m.tensor(4)),
        lambda m, F, x: F.one_hot(m.tensor([0, -1]), 3),
        lambda m, F, x: F.one_hot(m.tensor([0, 3]), 3),
        lambda m, F, x: F.one_hot(m.tensor([-2])),
    ]
    for fn in cases:
        same_error(lambda: fn(torch, TF, x), lambda: fn(flow, FF, to_flow(x)))
    # ignore_index is allowed wherever it lies; values agree
    for t, ii in ((torch.tensor([0, -100]), -100), (torch.tensor([0, 5]), 5), (torch.tensor([2, 1]), -100)):
        assert_same(FF.nll_loss(to_flow(x), to_flow(t), ignore_index=ii), TF.nll_loss(x, t, ignore_index=ii))


ARGUMENT_CHECKS = [
    lambda m, F: F.avg_pool2d(m.ones(1, 1, 4, 4), 2, padding=-1),
    lambda m, F: F.max_pool2d(m.ones(1, 1, 4, 4), 2, padding=-1),
    lambda m, F: F.max_pool2d(m.ones(1, 1, 4, 4), 2, stride=0),
    lambda m, F: F.max_pool2d(m.ones(1, 1, 4, 4), 0),
    lambda m, F: F.max_pool2d(m.ones(1, 1, 4, 4), 2, stride=-1),
    lambda m, F: F.max_pool2d(m.ones(1, 1, 4, 4), -1, stride=1),
    lambda m, F: F.max_pool2d(m.ones(1, 1, 4, 4), 2, dilation=0),
    lambda m, F: F.avg_pool1d(m.ones(1, 1, 4), 2, padding=-1),
    lambda m, F: F.dropout(m.ones(3), p=1.5),
    lambda m, F: F.dropout(m.ones(3), p=float("nan")),
    lambda m, F: F.dropout2d(m.ones(1, 3, 2, 2), p=float("nan")),
    lambda m, F: F.embedding(m.tensor([0]), m.ones(3, 2), padding_idx=-4),
    lambda m, F: F.embedding(m.tensor([0]), m.ones(3, 2), padding_idx=3),
    lambda m, F: F.cross_entropy(m.ones(2, 3), m.tensor([0, 1]), label_smoothing=1.5),
    lambda m, F: F.cross_entropy(m.ones(2, 3), m.ones(2, 3) / 3, label_smoothing=1.5),
    lambda m, F: m.arange(-3),
    lambda m, F: m.arange(-3.0),
    lambda m, F: m.arange(0, 5, -1),
    lambda m, F: m.arange(0, float("inf")),
    lambda m, F: m.arange(float("nan")),
    lambda m, F: m.tensor([2**63]),
    lambda m, F: m.tensor([[1], [2**70]]),
    lambda m, F: m.tensor([-2**63 - 1]),
    lambda m, F: m.tensor([1, 2**63]),
    lambda m, F: m.tensor([1, 2**63], dtype=m.int64),
    lambda m, F: m.tensor([1.5, 2**63], dtype=m.int64),
    lambda m, F: m.tensor([True, 2**63]),
    lambda m, F: m.tensor(-2**63 - 1, dtype=m.uint8),
    lambda m, F: m.arange(0, 3, float("nan")),
    lambda m, F: m.arange(0, 3, float("inf")),
    lambda m, F: m.arange(0.0, float("inf")),
    lambda m, F: F.max_pool2d(m.ones(1, 1, 4, 4), 2, stride=-1, padding=-1),
    lambda m, F: F.adaptive_max_pool2d(m.ones(1, 1, 4, 4), -1),
    lambda m, F: F.adaptive_max_pool2d(m.ones(1, 1, 4, 4), (2, -3)),
    lambda m, F: F.adaptive_max_pool1d(m.ones(1, 1, 4), -1),
    lambda m, F: F.instance_norm(m.ones(2, 3, 4, dtype=m.int32)),
    lambda m, F: m.take_along_dim(m.tensor(3.0), m.tensor(0), 0),
    lambda m, F: m.take_along_dim(m.ones(3, 4, 5), m.zeros(2, 4, 1, dtype=m.int64), 2),
    lambda m, F: m.index_put(m.arange(12.0).reshape(3, 4), (m.tensor([0, 2]), m.tensor(True), m.tensor([1, 3])),
                             m.tensor(-1.0)),
    lambda m, F: F.adaptive_avg_pool2d(m.ones(1, 1, 4, 4), -1),
    lambda m, F: F.adaptive_avg_pool2d(m.ones(1, 1, 4, 4), 2**40),
    lambda m, F: F.adaptive_max_pool2d(m.ones(1, 1, 4, 4), (2**31, 2**31)),
    lambda m, F: F.interpolate(m.ones(1, 1, 4, 4), size=(0, 2)),
    lambda m, F: F.interpolate(m.ones(1, 1, 4, 4), size=(-1, 2)),
    lambda m, F: F.interpolate(m.ones(1, 1, 4), size=0),
    lambda m, F: F.interpolate(m.ones(1, 1, 4, 4), size=(2**31, 2**31), mode="bilinear"),
    lambda m, F: F.batch_norm(m.ones(2, 3), None, None, training=True, eps=0.0),
    lambda m, F: F.batch_norm(m.ones(2, 3), m.zeros(3), m.ones(3), training=True, eps=-1e-5),
    lambda m, F: F.instance_norm(m.ones(2, 3, 1, 1)),
    lambda m, F: F.instance_norm(m.ones(2, 3, 1), m.zeros(3), m.ones(3)),
    lambda m, F: F.batch_norm(m.ones(1, 3, 1, 1), None, None, training=True),  # torch's "torch.Size([...])"
    lambda m, F: F.batch_norm(m.ones(2, 3), m.zeros(3), m.ones(3), eps=-1.0),
    lambda m, F: m.nanmean(m.ones(3), dtype=m.int64),
    lambda m, F: m.nanmean(m.ones(3), dtype=m.bool),
    lambda m, F: m.norm(m.ones(2, 2, 2), p="fro", dim=(0, 1, 2)),
    lambda m, F: m.norm(m.ones(2, 2, 2), p="fro", dim=(-1, 0, 1)),
    lambda m, F: m.argmax(m.ones(3, dtype=m.bool)),
    lambda m, F: m.ones(3, 2, dtype=m.bool).argmin(1),
    lambda m, F: m.linalg.vector_norm(m.ones(3, dtype=m.int32)),
    lambda m, F: m.linalg.matrix_norm(m.ones(2, 2, dtype=m.int32)),
    lambda m, F: m.norm(m.ones(3, dtype=m.int64)),
    lambda m, F: m.arange(3.0).index_fill(0, m.tensor([-4]), 0.0),
    lambda m, F: m.arange(3.0).index_fill(0, m.tensor([1], dtype=m.int32), 0.0),
    lambda m, F: m.arange(3.0).index_copy(0, m.tensor([1], dtype=m.int32), m.ones(1)),
    lambda m, F: m.ones(3).gather(0, m.tensor([3])),
    lambda m, F: m.tensor(1.0).gather(0, m.tensor(1)),
    lambda m, F: m.topk(m.tensor(1.5), 2),
    lambda m, F: m.ones(1, 2).squeeze((0, 0)),
    lambda m, F: m.flatten(m.tensor(1), 0, 1),
    lambda m, F: m.zeros(3, dtype=m.uint8).masked_fill(m.ones(3, dtype=m.bool), 300),
    lambda m, F: m.zeros(3, dtype=m.uint8).masked_fill(m.ones(3, dtype=m.bool), m.tensor(300)),
    lambda m, F: m.zeros(3, dtype=m.int32).masked_fill(m.ones(3, dtype=m.bool), float("-inf")),
    lambda m, F: m.zeros(3, dtype=m.int8).masked_fill(m.ones(3, dtype=m.bool), float("nan")),
    lambda m, F: m.zeros(3, dtype=m.uint8).index_fill(0, m.tensor([0]), m.tensor(-256)),
    lambda m, F: m.zeros(3, dtype=m.int8).fill_(300),
    lambda m, F: m.zeros(3).index_put((m.tensor([0]),), m.tensor([1], dtype=m.int32)),
    lambda m, F: m.zeros(3).__setitem__(m.tensor([0, 1]), m.tensor(1)),
    lambda m, F: m.zeros(3, dtype=m.float16).__setitem__((m.tensor([0]),), m.ones(1)),
    lambda m, F: m.tensor(1.0).diagonal(),
    lambda m, F: m.zeros(0, 2, 3).unique(dim=-4),
    lambda m, F: m.zeros(3, dtype=m.bool).scatter_reduce(0, m.tensor([0]), m.ones(1, dtype=m.bool), "mean"),
    lambda m, F: F.batch_norm(m.ones(2, 3, dtype=m.float64), m.zeros(3), m.ones(3)),
    lambda m, F: F.batch_norm(m.ones(2, 3), m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64), training=True),
    lambda m, F: F.batch_norm(m.ones(2, 3, dtype=m.bfloat16), m.zeros(3, dtype=m.float16), m.ones(3, dtype=m.float16)),
    lambda m, F: F.prelu(m.ones(3), m.ones(3)),
    lambda m, F: F.one_hot(m.zeros(0, dtype=m.int64)),
    lambda m, F: F.pad(m.zeros(3, dtype=m.uint8), (1, 1), value=-2.0),
    lambda m, F: F.pad(m.zeros(3, dtype=m.int8), (1, 1), value=300),
    lambda m, F: F.pad(m.zeros(3, dtype=m.uint8), (1, 1), value=-1),
    lambda m, F: F.group_norm(m.ones(1, 3), 3),
    lambda m, F: F.group_norm(m.ones(1, 3, 1), 3),
    lambda m, F: m.zeros(3, dtype=m.int64).exponential_(),
    lambda m, F: m.zeros(3, dtype=m.int16).cauchy_(),
    lambda m, F: m.normal(m.zeros(3, dtype=m.int64), m.ones(3)),
    lambda m, F: m.normal(0.0, m.ones(3, dtype=m.int32)),
]


@pytest.mark.parametrize("case", range(len(ARGUMENT_CHECKS)))
def test_argument_checks_match_torch(case):
    """Each was accepted (a result, or a hang building index tables) or failed with an internal error."""
    fn = ARGUMENT_CHECKS[case]
    same_error(lambda: fn(torch, TF), lambda: fn(flow, FF))


def test_norm_parameters_torch_accepts_still_work(gen):
    """Half inputs take float32 statistics and parameters; group_norm with more than one value per
    group; prelu with one weight on a 1-D input; a pad value that truncates into uint8."""
    x = make((4, 3, 2), torch.bfloat16, gen)
    stats = (torch.zeros(3), torch.ones(3), torch.ones(3), torch.zeros(3))
    for training in (False, True):
        want = TF.batch_norm(x, *[s.clone() for s in stats[:2]], *stats[2:], training=training)
        got = FF.batch_norm(to_flow(x), *[to_flow(s) for s in stats], training=training)
        assert_same(got, want, rtol=1e-2, atol=1e-2)
    assert_same(FF.group_norm(flow.ones(1, 6) * flow.arange(6.0), 3), TF.group_norm(torch.ones(1, 6) * torch.arange(6.0), 3))
    assert_same(FF.prelu(flow.tensor([-1.0, 2.0]), flow.tensor([0.5])), TF.prelu(torch.tensor([-1.0, 2.0]), torch.tensor([0.5])))
    assert_same(FF.pad(flow.zeros(2, dtype=flow.uint8), (1, 0), value=255.7),
                TF.pad(torch.zeros(2, dtype=torch.uint8), (1, 0), value=255.7))


def test_normal_takes_means_dtype():
    """torch.normal's result has mean's dtype when mean is a tensor (std's otherwise): an integer std
    beside a float mean is fine (flow refused it), a wider std does not widen the result (flow's did)."""
    for mean, std in [(torch.zeros(2, dtype=torch.float64), torch.ones(2)),
                      (torch.zeros(2), torch.ones(2, dtype=torch.float64)),
                      (torch.zeros(2, dtype=torch.float16), torch.ones(2)),
                      (torch.zeros(3), torch.ones(3, dtype=torch.int64)),
                      (0.0, torch.ones(2, dtype=torch.float16))]:
        want = torch.normal(mean, std)
        got = flow.normal(to_flow(mean) if isinstance(mean, torch.Tensor) else mean, to_flow(std))
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1] and tuple(got.shape) == tuple(want.shape)


def test_fill_values_torch_accepts_still_work():
    """Negative values down to -max fit an unsigned type (they wrap), floats truncate, a 0-d value by
    a mask converts (masked_fill), as torch's."""
    for m in (torch, flow):
        mask = m.ones(3, dtype=m.bool)
        got = [m.zeros(3, dtype=m.uint8).masked_fill(mask, m.tensor(-1)).tolist(),
               m.zeros(3, dtype=m.int8).masked_fill(mask, 2.7).tolist(),
               m.zeros(3, dtype=m.uint8).index_fill(0, m.tensor([1]), -255).tolist()]
        x = m.zeros(3)
        x[m.tensor([True, False, True])] = m.tensor(2)
        got.append(x.tolist())
        if m is torch:
            want = got
    assert got == want


def test_arguments_torch_accepts_still_work(gen):
    x = make((2, 3), torch.float32, gen)
    t = torch.tensor([0, 2])
    # label_smoothing below 0 is ignored by torch; padding_idx inside [-n, n) is fine
    assert_same(FF.cross_entropy(to_flow(x), to_flow(t), label_smoothing=-0.1),
                TF.cross_entropy(x, t, label_smoothing=-0.1))
    w = make((3, 2), torch.float32, gen)
    assert_same(FF.embedding(to_flow(t), to_flow(w), padding_idx=-3), TF.embedding(t, w, padding_idx=-3))
    assert flow.arange(5, 0, -1).tolist() == torch.arange(5, 0, -1).tolist()
    assert flow.arange(3, 3).shape == (0,) and flow.arange(3, 3, -1).shape == (0,)
    assert_same(flow.arange(flow.tensor(3)), torch.arange(torch.tensor(3)))  # int64, as torch's
    assert_same(flow.arange(flow.tensor(1.5), 4), torch.arange(torch.tensor(1.5), 4))
    assert flow.tensor([2**63], dtype=flow.float32).item() == torch.tensor([2**63], dtype=torch.float32).item()
    assert flow.tensor([1.5, 2**63]).tolist() == torch.tensor([1.5, 2**63]).tolist()
    assert flow.tensor([2**63 - 1, -2**63]).tolist() == [2**63 - 1, -2**63]
    for data, dtype in (([1.5, 2**63], None), ([2**64], flow.float16), (2**63, flow.bool), ([1, 2**63], flow.bool)):
        want = torch.tensor(data, dtype=None if dtype is None else getattr(torch, str(dtype).split(".")[1]))
        assert_same(flow.tensor(data, dtype=dtype), want)
    assert FF.instance_norm(flow.ones(2, 0, 9, 9)).shape == (2, 0, 9, 9)  # no channels: empty, as torch's
    # an empty batch in training: an empty result, the running stats untouched (eagerly and traced)
    for fn in (FF.batch_norm, flow.jit(FF.batch_norm)):
        rm, rv = flow.zeros(2), flow.ones(2)
        assert fn(flow.zeros(0, 2), rm, rv, training=True).shape == (0, 2)
        assert rm.tolist() == [0, 0] and rv.tolist() == [1, 1]
    # eps=0 outside training, a NaN eps, one spatial element with the running stats normalizing
    x4 = make((2, 3, 4, 4), torch.float32, gen)
    for fn in (lambda m, F: F.batch_norm(m, m.mean((0, 2, 3)), m.var((0, 2, 3)) + 1, eps=0.0),
               lambda m, F: F.batch_norm(m, None, None, training=True, eps=float("nan")),
               lambda m, F: F.instance_norm(m[:, :, :1, :1], m.mean((0, 2, 3)), m.var((0, 2, 3)) + 1,
                                            use_input_stats=False)):
        assert_same(fn(to_flow(x4), FF), fn(x4, TF), rtol=1e-5, atol=1e-5)


def test_a_failed_host_allocation_names_its_size():
    """It was a bare MemoryError ("std::bad_alloc")."""
    with pytest.raises(RuntimeError, match="can't allocate memory: you tried to allocate 4398046511104 bytes"):
        flow.empty(2**40)
    assert flow.ones(3).sum().item() == 3.0  # and flow goes on working


@pytest.mark.parametrize("call", ["max(x, None)", "min(x, dim=None)", "max(x, keepdim=True)", "x.min(None)",
                                  "x.max(keepdim=True)"])
def test_max_and_min_without_a_dim_take_no_keepdim_and_no_none(call):
    """flow read max(x, None) as max(x) and ignored a keepdim without a dim; torch raises TypeError."""
    for m in (torch, flow):
        with pytest.raises(TypeError, match=r"received an invalid combination of arguments"):
            eval(call, {"max": m.max, "min": m.min, "x": m.ones(3)})
    assert flow.max(flow.tensor([1.0, 3.0])).item() == 3.0 and flow.tensor([2, 1]).min(0, True).values.tolist() == [1]


INT_TYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def integer_powers(dtype, gen):
    """Bases over the type's whole range; exponents small, large (past the bit width) and negative."""
    info = torch.iinfo(dtype)
    base = torch.randint(info.min, info.max, (8, 33), generator=gen, dtype=torch.int64).to(dtype)
    base[0, :6] = torch.tensor([0, 1, -1, 2, 3, info.max], dtype=torch.int64).to(dtype)
    exp = torch.randint(0, 70, (8, 33), generator=gen, dtype=torch.int64)
    exp[1] = torch.randint(0, info.max, (33,), generator=gen, dtype=torch.int64)
    if info.min < 0:
        exp[2] = torch.randint(max(info.min, -1000), 0, (33,), generator=gen, dtype=torch.int64)
        base[2, :6] = torch.tensor([1, -1, -1, 0, 2, -2], dtype=torch.int64).to(dtype)
    return base, exp.to(dtype)


@pytest.mark.parametrize("dtype", INT_TYPES, ids=str)
def test_integer_pow_wraps_as_torchs(dtype, gen):
    """torch multiplies by squaring in the type, so large powers wrap; flow computed the float64 power
    and saturated it. Negative exponents give 1, +-1 or 0. Eagerly, traced, by a number and of one."""
    base, exp = integer_powers(dtype, gen)
    for got in (to_flow(base) ** to_flow(exp), flow.jit(lambda a, b: a ** b)(to_flow(base), to_flow(exp))):
        assert_same(got, base ** exp)
    nonneg = exp.clamp(min=0)
    assert_same(flow.pow(to_flow(base), to_flow(nonneg).t().contiguous().t()), torch.pow(base, nonneg))
    for e in (e for e in (13, 40, 63, 200, 2**31 + 1) if e <= torch.iinfo(dtype).max):
        assert_same(to_flow(base) ** e, base ** e, msg=f"x ** {e}")
    assert_same(3 ** to_flow(nonneg), 3 ** nonneg)
    assert_same(flow.jit(lambda a: (a * 3) ** 21 + 1)(to_flow(base)), (base * 3) ** 21 + 1)


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", INT_TYPES, ids=str)
def test_integer_pow_wraps_on_the_gpu(dtype, gen):
    base, exp = integer_powers(dtype, gen)
    fb, fe = to_flow(base).cuda(), to_flow(exp).cuda()
    for got in (fb ** fe, flow.jit(lambda a, b: a ** b)(fb, fe), fb ** 41):
        assert got.device.type == "cuda"
    assert_same((fb ** fe).cpu(), base ** exp)
    assert_same(flow.jit(lambda a, b: a ** b)(fb, fe).cpu(), base ** exp)
    assert_same((fb ** 41).cpu(), base ** 41)


NO_OP_COPIES = {
    "roll by 0": lambda m, x: x.roll(0, 0),
    "roll by the size": lambda m, x: x.roll(4, 1),
    "roll flattened by 0": lambda m, x: x.roll(0),
    "repeat(1, 1)": lambda m, x: x.repeat(1, 1),
    "tile": lambda m, x: x.tile((1, 1)),
    "repeat_interleave(1)": lambda m, x: x.repeat_interleave(1, 1),
    "repeat_interleave(ones)": lambda m, x: x.repeat_interleave(m.tensor([1]), 0),
    "cummax values": lambda m, x: x.cummax(0).values,
    "cummin indices": lambda m, x: m.cummin(x, 0)[1],
    "adaptive_avg_pool1d to its size": lambda m, x: m.nn.functional.adaptive_avg_pool1d(x[None], 4)[0],
    "adaptive_max_pool2d to its size": lambda m, x: m.nn.functional.adaptive_max_pool2d(x[None], (1, 4))[0],
}


@pytest.mark.parametrize("name", list(NO_OP_COPIES))
def test_copies_that_move_nothing_are_still_copies(name, gen):
    """These are copies in torch; flow returned the input itself (or a view of it) where they move
    nothing, so a write into the result changed the input. Eagerly and under flow.jit."""
    fn = NO_OP_COPIES[name]
    t = make((1, 4), torch.float32, gen)
    want = fn(torch, t)
    for f in (lambda x: fn(flow, x), flow.jit(lambda x: fn(flow, x))):
        x = to_flow(t)
        got = f(x)
        assert_same(got, want)
        got.fill_(7)
        assert_same(x, t, msg="the input is unchanged")


SHAPE_EDGE_VALUES = {
    "topk of a 0-d tensor, k=0": lambda m: m.topk(m.tensor(1.5), 0),
    "cat: a skipped empty 1-D tensor still promotes": lambda m: m.cat([m.ones(2, 2, dtype=m.int32), m.zeros(0)], -1),
    "cat: bfloat16 and an empty float32": lambda m: m.cat([m.ones(2, 1, dtype=m.bfloat16), m.zeros(0)], 1),
    "cat: only empty 1-D tensors, any dim": lambda m: m.cat([m.zeros(0), m.zeros(0, dtype=m.int64)], dim=3),
    "movedim of a 0-d tensor": lambda m: m.movedim(m.tensor(1.5), 0, -1),
    "index_fill wraps negative indices": lambda m: m.arange(6.).reshape(2, 3).index_fill(1, m.tensor([-1, 0]), 7.),
    "gather of a 0-d input": lambda m: m.tensor(1.5).gather(0, m.tensor([0, 0])),
    "gather with a 0-d index": lambda m: m.tensor([1.5, 2.5]).gather(0, m.tensor(1)),
    "pad of bool with a value of 3": lambda m: m.nn.functional.pad(m.tensor([True, False]), [1, 1], value=3),
    "indices past the size into an empty result": lambda m: m.zeros(0, 3)[:, m.tensor([5, -9])],
}


@pytest.mark.parametrize("name", list(SHAPE_EDGE_VALUES))
def test_shape_edge_cases_match_torch(name):
    """Each raised, gave a wrong dtype or an uninitialized index (topk) in flow."""
    fn = SHAPE_EDGE_VALUES[name]
    want, got = fn(torch), fn(flow)
    if isinstance(want, tuple):
        for w, g in zip(want, got):
            assert_same(g, w)
    else:
        assert_same(got, want)


def test_zero_dim_integer_tensor_indexes_as_an_int():
    """x[tensor(1)] is x[1], a view (flow copied through index_select); mT of a 0-d is itself."""
    x = flow.zeros(2, 3)
    x[flow.tensor(1)].fill_(5.0)
    assert x.tolist() == [[0, 0, 0], [5, 5, 5]]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[flow.tensor(5)]
    assert flow.jit(lambda a, i: a[i])(x, flow.tensor(-1)).tolist() == [5, 5, 5]
    assert flow.tensor(2.0).mT.item() == 2.0


def test_repeat_interleave_with_tensor_repeats_under_jit():
    """It raised an AttributeError; with output_size it is traced (as torch.compile needs it), and
    without one it is a TraceError that says so."""
    x, r = torch.arange(6.0).reshape(2, 3), torch.tensor([0, 2, 1])
    got = flow.jit(lambda a, b: flow.repeat_interleave(a, b, dim=1, output_size=3))(to_flow(x), to_flow(r))
    assert_same(got, torch.repeat_interleave(x, r, dim=1))
    assert_same(flow.jit(lambda b: flow.repeat_interleave(b, output_size=3))(to_flow(r)), torch.repeat_interleave(r))
    with pytest.raises(flow.TraceError, match="output_size"):
        flow.jit(lambda b: flow.repeat_interleave(b))(to_flow(r))


@pytest.mark.parametrize("fn", ["elu", "selu", "celu", "gelu", "silu", "mish", "softplus", "leaky_relu", "hardswish",
                                "logsigmoid", "softmax", "log_softmax", "layer_norm"])
def test_integer_inputs_torch_does_not_implement_raise_notimplementederror(fn):
    """torch's dtype refusals ("... not implemented for 'Long'") are NotImplementedErrors; flow's were
    RuntimeErrors (code catching NotImplementedError missed them)."""
    def call(m, F):
        x = m.tensor([1, 2])
        return F.layer_norm(x, [2]) if fn == "layer_norm" else getattr(F, fn)(x, 0) if "softmax" in fn else \
            getattr(F, fn)(x)
    for m, F in ((torch, TF), (flow, FF)):
        with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
            call(m, F)


def test_attention_rows_a_mask_hides_entirely_are_zero(gen):
    """torch's attention softmax gives a row whose every key is masked zeros (flow gave NaN), and
    so MultiheadAttention without weights and the encoder layer with masks, on torch's general path
    (its inference fast path, taken under no_grad, gives NaN there: flow follows the general one)."""
    q, k, v = (torch.randn(2, 3, 4, 8, generator=gen) for _ in range(3))
    bool_mask = torch.rand(4, 4, generator=gen) > 0.5
    bool_mask[1] = False
    float_mask = torch.zeros(4, 4).masked_fill(~bool_mask, float("-inf"))
    for mask in (bool_mask, float_mask):
        want = TF.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert want[:, :, 1].abs().max() == 0
        for f in (FF.scaled_dot_product_attention, flow.jit(FF.scaled_dot_product_attention)):
            assert_same(f(to_flow(q), to_flow(k), to_flow(v), attn_mask=to_flow(mask)), want, rtol=1e-5, atol=1e-6)
    torch.manual_seed(0)
    tlayer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    flayer = flow.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    flayer.load_state_dict({n: to_flow(p) for n, p in tlayer.state_dict().items()})
    x = torch.randn(2, 5, 8, generator=gen)
    src_mask = torch.zeros(5, 5, dtype=torch.bool)
    src_mask[2] = True  # position 2 attends to nothing
    want = tlayer(x, src_mask=src_mask).detach()  # (with autograd on: torch's general path)
    assert_same(flayer(to_flow(x), src_mask=to_flow(src_mask)), want, rtol=1e-4, atol=1e-5)


def test_losses_and_norm_modules_at_the_edges(gen):
    """cross_entropy's mean over no elements with probability targets is NaN (0 / 0), as torch's
    (flow gave 0); InstanceNorm never counts batches, and momentum=None leaves its running stats."""
    assert torch.isnan(TF.cross_entropy(torch.randn(0, 3), torch.rand(0, 3)))
    assert math.isnan(FF.cross_entropy(flow.randn(0, 3), flow.rand(0, 3)).item())
    x = torch.randn(2, 3, 4, 4, generator=gen)
    for momentum in (None, 0.3):
        t = torch.nn.InstanceNorm2d(3, track_running_stats=True, momentum=momentum).train()
        f = flow.nn.InstanceNorm2d(3, track_running_stats=True, momentum=momentum).train()
        assert_same(f(to_flow(x)), t(x), rtol=1e-5, atol=1e-5)
        for name, buf in t.state_dict().items():
            assert_same(f.state_dict()[name], buf, rtol=1e-6, atol=1e-6, msg=name)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_conv_transpose2d_with_output_padding_at_or_above_the_stride(jit, gen):
    """torch allows an output_padding below the stride or the dilation; oneDNN's deconvolution
    refuses one at or above the stride (a negative end padding), so flow computes it as the
    convolution over the zero-stuffed input on the CPU as on CUDA (it raised)."""
    x, w, b = make((2, 2, 4, 5), torch.float32, gen), make((2, 3, 3, 3), torch.float32, gen), \
        make((3,), torch.float32, gen)
    for kw in ({"stride": 2, "output_padding": 2, "dilation": 3}, {"stride": 1, "output_padding": 1, "dilation": 2},
               {"stride": (1, 2), "output_padding": (1, 0), "dilation": (2, 1), "padding": (2, 1)}):
        run = flow.jit(lambda a, c, d: FF.conv_transpose2d(a, c, d, **kw)) if jit else \
            (lambda a, c, d: FF.conv_transpose2d(a, c, d, **kw))
        assert_same(run(to_flow(x), to_flow(w), to_flow(b)), TF.conv_transpose2d(x, w, b, **kw), atol=3e-5,
                    msg=str(kw))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_integer_linear_is_exact_as_torchs(dtype, gen):
    """F.linear of integers: torch's CPU kernel, wrapping in the dtype (flow refused: its library
    call takes floating point); 1-d weights and inputs too; mismatched dtypes raise as torch."""
    x, w, b = make((5, 7), dtype, gen), make((3, 7), dtype, gen), make((3,), dtype, gen)
    if dtype is torch.uint8:
        x, w = x * 37, w * 11  # products that wrap
    for args in ((x, w), (x, w, b), (x[0], w), (x, w[0]), (x[1], w[2])):
        assert_same(FF.linear(*map(to_flow, args)), TF.linear(*args))
    assert_same(flow.jit(lambda a, c, d: FF.linear(a, c, d))(to_flow(x), to_flow(w), to_flow(b)), TF.linear(x, w, b))
    other = torch.int32 if dtype is not torch.int32 else torch.int64
    same_error(lambda: TF.linear(x, w.to(other)), lambda: FF.linear(to_flow(x), to_flow(w.to(other))))
    same_error(lambda: TF.linear(x, w, b.float()), lambda: FF.linear(to_flow(x), to_flow(w), to_flow(b.float())))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_multiply_by_minus_one_keeps_a_nans_sign(dtype):
    """x * -1, -1 * x and x / -1 compiled: LLVM folds them into a negation, which flips a NaN's sign
    bit; torch's kernels multiply, and the hardware returns the NaN operand with its sign."""
    vals = [math.nan, -math.nan, 1.5, -0.0, math.inf, -2.0]
    t = torch.tensor(vals, dtype=dtype)
    for fn in (lambda a: a * -1, lambda a: -1 * a, lambda a: a / -1, lambda a: a.exp() * -1.0):
        result = flow.jit(fn)(to_flow(t))
        want = fn(t)
        assert_same(result, want)
        got = to_torch(result)
        assert torch.equal(torch.signbit(got), torch.signbit(want)), (got, want)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_convolutions_of_strided_weights(jit, gen):
    """A weight view oneDNN cannot describe (every other tap, a transposed filter) is copied first:
    it raised "could not construct a memory descriptor using strides"."""
    x, x3 = make((2, 2, 5, 6), torch.float32, gen), make((2, 1, 4, 3, 6), torch.float32, gen)
    w, wt, w3 = make((3, 2, 3, 6), torch.float32, gen), make((2, 3, 3, 6), torch.float32, gen), \
        make((3, 1, 2, 2, 6), torch.float32, gen)
    cases = [(lambda m, a, b: m.nn.functional.conv2d(a, b[..., ::2]), x, w),
             (lambda m, a, b: m.nn.functional.conv2d(a, b.transpose(2, 3)[:, :, :5, :3]), x, w),
             (lambda m, a, b: m.nn.functional.conv_transpose2d(a, b[..., 1::2], stride=2), x, wt),
             (lambda m, a, b: m.nn.functional.conv3d(a, b[..., ::3], padding=1), x3, w3)]
    for fn, a, b in cases:
        run = flow.jit(lambda p, q, fn=fn: fn(flow, p, q)) if jit else (lambda p, q, fn=fn: fn(flow, p, q))
        assert_same(run(to_flow(a), to_flow(b)), fn(torch, a, b), atol=1e-5)


def test_out_of_range_writes_name_the_dimension_as_torch():
    """Indexed writes past a dim (a size-0 one too) raise torch's IndexError and message."""
    for shape, index in (((0, 3), 5), ((0, 3), (slice(None), 5)), ((2, 0), (0, 1)), ((4,), -5)):
        with pytest.raises(IndexError) as te:
            torch.zeros(*shape)[index] = 1.0
        with pytest.raises(IndexError) as fe:
            flow.zeros(*shape)[index] = 1.0
        assert str(fe.value) == str(te.value)
