"""Matrix products of integer tensors (flow/_ops.py, _integer_matmul): exact, wrapping in the
operands' dtype as torch's CPU kernels do, for every integer dtype and matmul's shape rules (1-D
operands, batches that broadcast, k = 0), eagerly and under @flow.jit, through matmul, mm, bmm,
mv, dot, addmm, einsum and the linalg products; with torch's errors for mixed dtypes and shapes
that do not multiply."""
import pytest
import torch

import flow
from conftest import assert_same, raises_like, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
SHAPES = [((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)), ((3, 5), (5, 4)), ((2, 3, 5), (5, 4)),
          ((2, 1, 3, 5), (4, 5, 2)), ((3, 0), (0, 4)), ((1, 1), (1, 1)), ((7,), (2, 7, 3))]


def full_range(dtype, shape, gen):
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=gen, dtype=torch.int64).to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_matmul_wraps_as_torch(dtype, device, gen):
    """(torch refuses integer products on CUDA; its CPU result is the reference there too.)"""
    for sa, sb in SHAPES:
        a, b = full_range(dtype, sa, gen), full_range(dtype, sb, gen)  # products overflow the dtype
        fa, fb = to_flow(a).to(device), to_flow(b).to(device)
        want = a @ b
        got = fa @ fb
        assert got.dtype is flow.__dict__[str(dtype).split(".")[1]] and got.device == fa.device
        assert_same(got.cpu(), want, msg=f"{sa} @ {sb}")
        assert_same(flow.jit(lambda x, y: x @ y)(fa, fb).cpu(), want, msg=f"{sa} @ {sb} jit")


def test_large_eager_products_run_in_chunks_of_k(gen):
    """2048 x 2048 outputs: eagerly the k products are summed a few at a time (the broadcast product
    would be m*k*n elements), with the same wrapped result."""
    a, b = full_range(torch.int32, (2048, 10), gen), full_range(torch.int32, (10, 2048), gen)
    assert_same(to_flow(a) @ to_flow(b), a @ b)


def test_products_over_matmul(gen):
    i = torch.randint(-50, 50, (4, 6), generator=gen)
    j = torch.randint(-50, 50, (6, 3), generator=gen)
    v = torch.randint(-50, 50, (6,), generator=gen)
    c = torch.randint(-50, 50, (4, 3), generator=gen)
    fi, fj, fv, fc = map(to_flow, (i, j, v, c))
    assert_same(flow.mm(fi, fj), torch.mm(i, j))
    assert_same(flow.bmm(fi.expand(2, 4, 6), fj.expand(2, 6, 3)), torch.bmm(i.expand(2, 4, 6), j.expand(2, 6, 3)))
    assert_same(flow.mv(fi, fv), torch.mv(i, v))
    assert_same(flow.dot(fv, fv), torch.dot(v, v))
    assert_same(flow.addmm(fc, fi, fj, beta=2, alpha=3), torch.addmm(c, i, j, beta=2, alpha=3))
    assert_same(flow.einsum("ij,jk->ik", fi, fj), torch.einsum("ij,jk->ik", i, j))
    assert_same(flow.tensordot(fi, fj, 1), torch.tensordot(i, j, 1))
    sq = torch.randint(-3, 4, (2, 3, 3), generator=gen)
    assert_same(flow.linalg.matrix_power(to_flow(sq), 5), torch.linalg.matrix_power(sq, 5))
    assert_same(flow.linalg.multi_dot([fi, fj, fj.T]), torch.linalg.multi_dot([i, j, j.T]))
    # The transposed (non-contiguous) operand and a view of a wider buffer.
    assert_same(fj.T @ fi.T, j.T @ i.T)
    assert_same(fi[:, ::2] @ fj[::2], i[:, ::2] @ j[::2])


def test_integer_matmul_errors(gen):
    cases = [(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(4, 5, dtype=torch.int64)),
             (torch.zeros(3, dtype=torch.int64), torch.zeros(4, dtype=torch.int64)),
             (torch.zeros(2, 3, dtype=torch.int64), torch.zeros(3, 2, dtype=torch.int32)),
             (torch.zeros(2, 3, dtype=torch.uint8), torch.zeros(3, 2, dtype=torch.float32)),
             (torch.zeros(2, 2, 3, dtype=torch.int32), torch.zeros(3, 3, 2, dtype=torch.int32)),
             (torch.zeros((), dtype=torch.int32), torch.zeros(3, dtype=torch.int32))]
    for a, b in cases:
        fa, fb = to_flow(a), to_flow(b)
        assert raises_like(lambda: a @ b, lambda: fa @ fb), (a.shape, b.shape, a.dtype, b.dtype)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        to_flow(cases[0][0]) @ to_flow(cases[0][1])
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        to_flow(cases[2][0]) @ to_flow(cases[2][1])
