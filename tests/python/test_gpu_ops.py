"""The op sweeps of test_ops.py on a CUDA device (marker `gpu`; run by tools/gpu_check.sh, skipped
where flow finds no device): every unary, binary, reduction and softmax op of those tables, in
float32, float16 and bfloat16, over the same shapes (0, 1, odd, large) and layouts (transposed,
sliced, expanded views made on the device), against PyTorch on CUDA; and the structural ops
(concatenation, padding, indexing, arg-reductions, scans, norms, pooling, resampling) eagerly and
under flow.jit. Outputs are poisoned (FLOW_POISON_OUTPUTS=1) so an unwritten element shows up.
"""
import os

os.environ.setdefault("FLOW_POISON_OUTPUTS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import flow  # noqa: E402
import test_ops as T  # noqa: E402
from conftest import TDEV, TOL, assert_same, make, raises_like, to_flow  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80]),
]

GPU_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Where the tensors live: "cuda". (A run of these functions with "cpu" checks their own logic on a
# machine without a GPU.)
DEVICE = "cuda"


def gpu_pair(shape, dtype, gen, layout="contiguous", **kw):
    """(torch CUDA tensor, flow CUDA tensor) with equal values and the given logical shape; the
    non-contiguous layouts are views taken on the device (as test_ops.make_pair takes them)."""
    shape = tuple(shape)

    def both(base):
        return base.to(TDEV), to_flow(base).to(DEVICE)

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
    assert actual.device.type == DEVICE, msg
    assert_same(actual.cpu(), expected.cpu(), rtol=rtol, atol=atol, msg=msg)


def gpu_tol(rtol, atol, dtype):
    """The CPU sweep's tolerance, float32 transcendentals widened to CUDA's libdevice (a few ulp)."""
    if dtype == torch.float32 and rtol is not None:
        return 2 * rtol, 2 * atol
    return rtol, atol


def test_layout_helper_makes_device_views(gen):
    for layout in T.LAYOUTS[1:]:
        t, f = gpu_pair((5, 7), torch.float32, gen, layout)
        assert not f.is_contiguous() and f.device.type == DEVICE, layout
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


# ---- structural ops: views and copies, indexing, arg-reductions, scans, norms, pooling, resampling --
# Each runs eagerly and under flow.jit on the device, on a contiguous input and on a transposed view,
# against torch on the same device. `m` is torch or flow, `F` its functional module, `dev` the device
# of index tensors. Arithmetic ones get the dtype's rounding tolerance; the rest must match exactly.


def _idx(m, dev, values):
    return m.tensor(values, device=dev)


STRUCTURAL = {  # name: (fn(m, F, a, dev), exact)
    "cat": (lambda m, F, a, dev: m.cat([a, a * 2], dim=1), True),
    "stack": (lambda m, F, a, dev: m.stack([a, a], dim=-1), True),
    "pad_constant": (lambda m, F, a, dev: F.pad(a, (1, 2, 0, 3), value=0.5), True),
    "pad_reflect": (lambda m, F, a, dev: F.pad(a, (1, 2, 2, 1), mode="reflect"), True),
    "pad_replicate": (lambda m, F, a, dev: F.pad(a, (3, 0, 1, 1), mode="replicate"), True),
    "index_select": (lambda m, F, a, dev: m.index_select(a, 2, _idx(m, dev, [0, 3, 3, 7])), True),
    "gather": (lambda m, F, a, dev: m.gather(a, 3, m.arange(2 * 3 * 8 * 4, device=dev).reshape(2, 3, 8, 4) % 9), True),
    "permute_contiguous": (lambda m, F, a, dev: a.permute(0, 2, 3, 1).contiguous(), True),
    "flip": (lambda m, F, a, dev: m.flip(a, [1, 3]), True),
    "tril": (lambda m, F, a, dev: m.tril(a), True),
    "masked_fill": (lambda m, F, a, dev: a.masked_fill(a > 0.5, -1.0), True),
    "embedding": (lambda m, F, a, dev: F.embedding(_idx(m, dev, [[0, 2], [1, 4]]), a.reshape(-1, 9)[:5]), True),
    "argmax": (lambda m, F, a, dev: m.argmax(a, dim=2), True),
    "argmin_keepdim": (lambda m, F, a, dev: m.argmin(a, dim=-1, keepdim=True), True),
    "max_pool2d": (lambda m, F, a, dev: F.max_pool2d(a, 3, stride=2, padding=1), True),
    "interpolate_nearest": (lambda m, F, a, dev: F.interpolate(a, scale_factor=2, mode="nearest"), True),
    "cumsum": (lambda m, F, a, dev: m.cumsum(a, dim=3), False),
    "layer_norm": (lambda m, F, a, dev: F.layer_norm(a, (9,)), False),
    "group_norm": (lambda m, F, a, dev: F.group_norm(a, 3), False),
    "batch_norm_eval": (lambda m, F, a, dev: F.batch_norm(
        a, m.zeros(3, device=dev) + 0.1, m.ones(3, device=dev) * 2.0, m.ones(3, device=dev) * 1.5,
        m.zeros(3, device=dev) - 0.2, False), False),
    "avg_pool2d": (lambda m, F, a, dev: F.avg_pool2d(a, 2), False),
    "adaptive_avg_pool2d": (lambda m, F, a, dev: F.adaptive_avg_pool2d(a, 1), False),
    "interpolate_bilinear": (lambda m, F, a, dev: F.interpolate(a, size=(5, 13), mode="bilinear",
                                                                align_corners=False), False),
    # (in float32: torch's CPU reference, used on the emulated device, has no half antialiasing)
    "interpolate_bicubic_antialias": (lambda m, F, a, dev: F.interpolate(a.float(), size=(3, 5), mode="bicubic",
                                                                         antialias=True).to(a.dtype), False),
    "softplus": (lambda m, F, a, dev: F.softplus(a), False),
    "log_softmax": (lambda m, F, a, dev: F.log_softmax(a, dim=1), False),
}
# Arithmetic results: both libraries compute in float32 and round once, up to summation order.
STRUCTURAL_TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}


@pytest.mark.parametrize("dtype", GPU_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(STRUCTURAL))
def test_structural_op_on_gpu(op, dtype, gen):
    import torch.nn.functional as TF

    fn, exact = STRUCTURAL[op]
    rtol, atol = (0.0, 0.0) if exact else STRUCTURAL_TOL[dtype]
    jitted = flow.jit(lambda a: fn(flow, flow.nn.functional, a, DEVICE))
    for layout in ("contiguous", "transposed"):
        if layout == "contiguous":
            t, f = gpu_pair((2, 3, 8, 9), dtype, gen)
        else:  # a (2, 3, 8, 9) view of a (2, 3, 9, 8) tensor
            tb, fb = gpu_pair((2, 3, 9, 8), dtype, gen)
            t, f = tb.transpose(2, 3), fb.transpose(2, 3)
        expected = fn(torch, TF, t, TDEV)
        for how, run in (("eager", lambda x: fn(flow, flow.nn.functional, x, DEVICE)), ("jit", jitted)):
            actual = run(f)
            msg = f"{op} {dtype} {layout} {how} ({DEVICE})"
            assert actual.device.type == DEVICE, msg
            assert_same(actual.cpu(), expected.cpu(), rtol=rtol, atol=atol, msg=msg)


def test_host_side_index_checks_on_gpu(gen):
    """Eager ops that convert indices on the host (as torch's do) copy CUDA indices there first:
    boolean-mask indexing, one_hot with an inferred class count. Indices out of range are not copied
    back to be checked: the kernels report them and the next synchronization raises (as torch's
    device-side asserts do, but the device stays usable)."""
    t, f = gpu_pair((4, 6), torch.float32, gen)
    assert_same(f[f > 0].cpu(), t[t > 0].cpu(), rtol=0, atol=0, msg="mask")
    rows = torch.tensor([True, False, True, True])
    assert_same(f[flow.tensor(rows.numpy()).to(DEVICE)].cpu(), t[rows.to(TDEV)].cpu(), rtol=0, atol=0,
                msg="row mask")
    idx = torch.tensor([0, 3, 2])
    got = flow.nn.functional.one_hot(flow.tensor(idx.numpy()).to(DEVICE))
    assert got.device.type == DEVICE
    assert_same(got.cpu(), torch.nn.functional.one_hot(idx.to(TDEV)).cpu(), rtol=0, atol=0, msg="one_hot")
    with pytest.raises(RuntimeError, match="index 4 is out of bounds for dimension 0 with size 4"):
        flow.index_select(f, 0, flow.tensor([4]).to(DEVICE)).cpu()
    with pytest.raises(RuntimeError, match="index 6 is out of bounds for dimension 0 with size 4"):
        flow.nn.functional.embedding(flow.tensor([6]).to(DEVICE), f).cpu()
    with pytest.raises(RuntimeError, match="index 6 is out of bounds for dimension 1 with size 6"):
        f[flow.tensor([0]).to(DEVICE), flow.tensor([5, 6]).to(DEVICE)]
        flow.cuda.synchronize()
    assert_same(f[1].cpu(), t[1].cpu(), rtol=0, atol=0, msg="the device works afterwards")


def test_host_conversions_on_gpu(gen, tmp_path):
    """What reads a GPU tensor's values on the host copies them there first, as torch does: printing,
    item(), tolist(), bool()/float()/int(), saving to safetensors. numpy() refuses, as torch's does."""
    t, f = gpu_pair((2, 3), torch.float32, gen)
    th = t.cpu()
    assert repr(f).endswith("device='cuda:0')"), repr(f)
    assert repr(f.half()).endswith("device='cuda:0', dtype=flow.float16)"), repr(f.half())
    assert f.tolist() == th.tolist()
    assert f.bfloat16().tolist() == th.bfloat16().float().tolist()
    assert f[1, 2].item() == th[1, 2].item()
    assert float(f[0, 0]) == float(th[0, 0]) and int(f[0, 0] * 10) == int(th[0, 0] * 10)
    assert bool((f > 100).any()) is False and bool((f == f).all()) is True
    with pytest.raises(TypeError, match="Tensor.cpu"):
        f.numpy()
    from flow import _safetensors

    path = str(tmp_path / "w.safetensors")
    _safetensors.save_file({"w": f, "b": f[0].to(DEVICE)}, path)
    back, _ = _safetensors.load_file(path)
    assert_same(back["w"], th, rtol=0, atol=0, msg="safetensors round trip")
