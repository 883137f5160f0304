"""The op sweeps of test_ops.py on a CUDA device (marker `gpu`; run by tools/gpu_check.sh, skipped
where flow finds no device): every unary, binary, reduction and softmax op of those tables, in
float32, float16 and bfloat16, over the same shapes (0, 1, odd, large) and layouts (transposed,
sliced, expanded views made on the device), against PyTorch on CUDA. Outputs are poisoned
(FLOW_POISON_OUTPUTS=1) so an unwritten element shows up.
"""
import os

os.environ.setdefault("FLOW_POISON_OUTPUTS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import flow  # noqa: E402
import test_ops as T  # noqa: E402
from conftest import TOL, assert_same, make, raises_like, to_flow  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80]),
]

GPU_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def gpu_pair(shape, dtype, gen, layout="contiguous", **kw):
    """(torch CUDA tensor, flow CUDA tensor) with equal values and the given logical shape; the
    non-contiguous layouts are views taken on the device (as test_ops.make_pair takes them)."""
    shape = tuple(shape)

    def both(base):
        return base.cuda(), to_flow(base).cuda()

    if layout == "contiguous" or len(shape) == 0:
        return both(make(shape, dtype, gen, **kw))
    if layout == "transposed":
        perm = list(range(len(shape)))[::-1]
        tb, fb = both(make(tuple(shape[p] for p in perm), dtype, gen, **kw))
        return tb.permute(perm), fb.permute(perm)
    if layout == "sliced":
        tb, fb = both(make(shape[:-1] + (2 * shape[-1] + 1,), dtype, gen, **kw))
        return tb[..., 1::2], fb[..., 1::2]
    if layout == "expanded":
        tb, fb = both(make((1,) + shape[1:], dtype, gen, **kw))
        return tb.expand(shape), fb.expand(shape)
    raise ValueError(layout)


def check(torch_fn, flow_fn, targs, fargs, msg, rtol=None, atol=None):
    if raises_like(lambda: torch_fn(*targs), lambda: flow_fn(*fargs)):
        return
    expected = torch_fn(*targs)
    actual = flow_fn(*fargs)
    assert actual.device.type == "cuda", msg
    assert_same(actual.cpu(), expected.cpu(), rtol=rtol, atol=atol, msg=msg)


def gpu_tol(rtol, atol, dtype):
    """The CPU sweep's tolerance, float32 transcendentals widened to CUDA's libdevice (a few ulp)."""
    if dtype == torch.float32 and rtol is not None:
        return 2 * rtol, 2 * atol
    return rtol, atol


def test_layout_helper_makes_device_views(gen):
    for layout in T.LAYOUTS[1:]:
        t, f = gpu_pair((5, 7), torch.float32, gen, layout)
        assert not f.is_contiguous() and f.is_cuda, layout
        assert tuple(f.stride()) == tuple(t.stride()), layout


@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(T.UNARY))
def test_unary_on_gpu(op, dtype, gen):
    tfn, ffn = T.UNARY[op]
    rtol, atol = gpu_tol(*T.unary_tol(op, dtype), dtype)
    for shape, layout in T.UNARY_SHAPES:
        t, f = gpu_pair(shape, dtype, gen, layout, special=True, no_posinf=op == "gelu")
        check(tfn, ffn, [t], [f], f"{op} {dtype} {shape} {layout} (cuda)", rtol, atol)


@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(T.BINARY))
def test_binary_on_gpu(op, dtype, gen):
    tfn, ffn = T.BINARY[op]
    if "alpha" in op and dtype in (torch.float16, torch.bfloat16):  # see test_ops.test_binary
        tfn = (lambda f: lambda a, b: f(a.float(), b.float()).to(a.dtype))(tfn)
    rtol, atol = gpu_tol(*T.binary_tol(op, dtype), dtype)
    for sa, sb, la, lb in T.BINARY_SHAPES:
        pow_op = op in ("pow", "operator_pow")
        ka = dict(low=-3.0, high=3.0) if pow_op else dict(special=True)
        kb = dict(low=-2.0, high=3.0) if pow_op else dict(special=True)
        ta, fa = gpu_pair(sa, dtype, gen, la, **ka)
        tb, fb = gpu_pair(sb, dtype, gen, lb, **kb)
        check(tfn, ffn, [ta, tb], [fa, fb], f"{op} {dtype} {sa}{la} {sb}{lb} (cuda)", rtol, atol)


@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(T.REDUCTIONS))
def test_reduction_on_gpu(op, dtype, gen):
    tfn, ffn = T.REDUCTIONS[op]
    for shape, layout in [((4, 5, 6), "contiguous"), ((4, 5, 6), "transposed"), ((3, 7, 33), "sliced"),
                          ((4, 5, 6), "expanded"), ((2, 4099), "contiguous")]:
        t, f = gpu_pair(shape, dtype, gen, layout)
        for dim in T.DIM_CONFIGS:
            if dim is not None and max(d if d >= 0 else d + len(shape) for d in (dim if isinstance(dim, tuple) else (dim,))) >= len(shape):
                continue
            for keepdim in (False, True):
                rtol, atol = T.reduction_tol_for(op, t, dim)
                check(T.reduce_call(tfn, dim, keepdim), T.reduce_call(ffn, dim, keepdim), [t], [f],
                      f"{op} {dtype} {shape} {layout} dim={dim} keepdim={keepdim} (cuda)", rtol, atol)


@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(T.SOFTMAX))
def test_softmax_on_gpu(op, dtype, gen):
    tfn, ffn = T.SOFTMAX[op]
    rtol, atol = T.softmax_tol(op, dtype)
    for shape, dim, layout in [((7,), 0, "contiguous"), ((4, 33), -1, "contiguous"), ((4, 33), 0, "contiguous"),
                               ((3, 1031), 1, "contiguous"), ((2, 3, 5), 1, "contiguous"), ((0, 4), 1, "contiguous"),
                               ((6, 9), -1, "transposed"), ((5, 8), 1, "sliced"), ((3, 8), 1, "expanded"),
                               ((8, 4096), -1, "contiguous")]:
        t, f = gpu_pair(shape, dtype, gen, layout)
        check(lambda x: tfn(x, dim), lambda x: ffn(x, dim), [t], [f],
              f"{op} {dtype} {shape} dim={dim} {layout} (cuda)", rtol, atol)


@pytest.mark.parametrize("src", GPU_DTYPES + [torch.int32, torch.int64, torch.bool], ids=str)
def test_cast_on_gpu(src, gen):
    t, f = gpu_pair((33, 17), src, gen, "transposed")
    for dst in GPU_DTYPES + [torch.int64, torch.bool]:
        if src.is_floating_point and not dst.is_floating_point:
            continue  # float -> int of NaN/inf is undefined in both
        check(lambda x: x.to(dst), lambda x: x.to(T.FLOW_OF[dst]), [t], [f], f"cast {src} -> {dst} (cuda)")


@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=str)
def test_where_and_clamp_on_gpu(dtype, gen):
    c, fc = gpu_pair((6, 7), torch.bool, gen)
    a, fa = gpu_pair((6, 7), dtype, gen, special=True)
    b, fb = gpu_pair((7,), dtype, gen, special=True)
    check(torch.where, flow.where, [c, a, b], [fc, fa, fb], f"where {dtype} (cuda)")
    check(lambda x: torch.clamp(x, -0.5, 1.5), lambda x: flow.clamp(x, -0.5, 1.5), [a], [fa], f"clamp {dtype} (cuda)")
    assert TOL[dtype]  # the tolerance table covers the dtype
