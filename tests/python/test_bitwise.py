"""Bitwise and, or, xor and the shifts (dsl/ops/elementwise_more.cpp over the IR's bitwise
intrinsics) against PyTorch: int32, int64 and bool, broadcasting, numbers on either side, shift
counts outside [0, bits) (0 for <<, the sign for >>, as torch), the in-place forms and operators,
eagerly and under flow.jit, on the CPU and (marker `gpu`) on a CUDA device; floats and shifted
bools raise as torch does."""
import operator

import pytest
import torch

import flow
from conftest import assert_same, make, raises_like, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]
OPS = [("bitwise_and", operator.and_), ("bitwise_or", operator.or_), ("bitwise_xor", operator.xor),
       ("bitwise_left_shift", operator.lshift), ("bitwise_right_shift", operator.rshift)]


def _f(t, device):
    return to_flow(t).to(device) if device != "cpu" else to_flow(t)


def _ints(shape, dtype, gen, shift=False):
    """Random bits (extremes included); shift counts in [-3, bits + 3)."""
    if shift:
        bits = 32 if dtype == torch.int32 else 64
        return torch.randint(-3, bits + 3, shape, generator=gen).to(dtype)
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, shape, generator=gen, dtype=torch.int64).to(dtype)
    flat = x.reshape(-1)
    if flat.numel() >= 3:
        flat[0], flat[1], flat[2] = info.min, info.max, -1
    return x


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("name,op", OPS, ids=[o[0] for o in OPS])
def test_integer_ops_match_torch(name, op, dtype, jit, device, gen):
    shift = "shift" in name
    for sa, sb in [((37,), (37,)), ((4, 1, 5), (3, 1)), ((0, 3), (3,)), ((1,), (6, 7))]:
        a, b = _ints(sa, dtype, gen), _ints(sb, dtype, gen, shift)
        fn = flow.jit(lambda x, y: getattr(flow, name)(x, y)) if jit else getattr(flow, name)
        assert_same(fn(_f(a, device), _f(b, device)).cpu(), getattr(torch, name)(a, b), msg=f"{sa} {sb}")
        assert_same(op(_f(a, device), _f(b, device)).cpu(), op(a, b), msg=f"operator {sa} {sb}")
    a = _ints((9,), dtype, gen)
    for k in (0, 1, 5, 31, 33, -1, 64, 70):
        assert_same(op(_f(a, device), k).cpu(), op(a, k), msg=f"number {k}")
    for k in (3, -7):
        b = _ints((9,), dtype, gen, shift)
        assert_same(op(k, _f(b, device)).cpu(), op(k, b), msg=f"reflected {k}")


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_dtypes_bool_and_in_place(device, gen):
    i32, i64 = _ints((5, 4), torch.int32, gen), _ints((4,), torch.int64, gen)
    for name, op in OPS:
        assert_same(op(_f(i32, device), _f(i64, device)).cpu(), op(i32, i64), msg=name)  # promotes to int64
    m1, m2 = torch.rand(6, generator=gen) > 0.5, torch.rand(6, generator=gen) > 0.5
    for name, op in OPS[:3]:
        assert_same(op(_f(m1, device), _f(m2, device)).cpu(), op(m1, m2), msg=name)
        assert_same(op(_f(m1, device), True).cpu(), op(m1, True), msg=name + " number")
        assert_same(op(_f(i64, device), True).cpu(), op(i64, True), msg=name + " int and bool")
    for name, op in OPS:
        x = _ints((3, 4), torch.int64, gen)
        y = _ints((4,), torch.int64, gen, "shift" in name)
        fx = _f(x, device)
        view = fx[1:]
        ret = getattr(fx, name + "_")(_f(y, device))
        assert ret is fx
        assert_same(fx.cpu(), op(x, y), msg=name + "_")
        assert_same(view.cpu(), op(x, y)[1:], msg=name + "_ view")
    z = _ints((5,), torch.int32, gen)
    fz = _f(z, device)
    fz <<= 2
    fz |= 3
    fz ^= -1
    fz >>= 1
    fz &= 0x0F0F
    expected = z.clone()
    expected <<= 2
    expected |= 3
    expected ^= -1
    expected >>= 1
    expected &= 0x0F0F
    assert_same(fz.cpu(), expected)


def test_floats_and_shifted_bools_raise_like_torch():
    cases = [lambda m: m.ones(2) & m.ones(2), lambda m: m.ones(2, dtype=m.int64) | 1.5,
             lambda m: m.ones(2) << 1, lambda m: m.tensor([True]) << m.tensor([True]),
             lambda m: m.bitwise_xor(m.ones(2, dtype=m.float64), m.ones(2, dtype=m.int32))]
    for i, fn in enumerate(cases):
        assert raises_like(lambda: fn(torch), lambda: fn(flow)), f"case {i}: torch accepts it"
    # a bool shifted by an int promotes to int64, as in torch
    assert_same(flow.tensor([True, False]) << 1, torch.tensor([True, False]) << 1)
    assert_same(flow.tensor([True]) >> flow.tensor([1]), torch.tensor([True]) >> torch.tensor([1]))
    with pytest.raises(TypeError, match="unsupported operand"):
        flow.ones(2, dtype=flow.int64) & "a"
