"""The rest of torch's elementwise math (C's functions as ops: tan ... erfc, atan2, hypot), the
functions torch defines by formula (clamp_min, logaddexp, addcmul, lerp, isclose, ...), the views
and joins built from others (roll, meshgrid, repeat_interleave, diagonal, diag, trace) and
F.normalize / cosine_similarity / pixel_shuffle with their modules: against PyTorch over dtypes,
edge values, non-contiguous inputs and edge sizes, eagerly and under flow.jit, on the CPU and (marker
`gpu`) on a CUDA device."""
import math

import pytest
import torch
import torch.nn.functional as TF

import flow
from conftest import assert_same, make, raises_like, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]

MATH_UNARY = ["tan", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2",
              "erfc"]
# (shape, layout): scalar, empty, odd, a transposed matrix.
SHAPES = [((), "contiguous"), ((0,), "contiguous"), ((7,), "contiguous"), ((33, 5), "transposed")]


def pair(shape, dtype, gen, device, layout="contiguous", **kw):
    shape = tuple(shape)
    if layout == "transposed":
        t = make(shape[::-1], dtype, gen, **kw)
        return t.t(), to_flow(t).to(device).t()
    t = make(shape, dtype, gen, **kw)
    return t, to_flow(t).to(device)


def tol(dtype, device, ulps=4):
    """libm (CPU) and CUDA's math library differ from torch's vectorized functions by a few ulp."""
    if dtype == torch.float32:
        r = ulps * 1.2e-7 * (2 if device == "cuda" else 1)
        return r, 1e-6
    if dtype == torch.float64:
        return 1e-13, 1e-13
    return None, None


def check(tfn, ffn, targs, fargs, msg, rtol=None, atol=None):
    if raises_like(lambda: tfn(*targs), lambda: ffn(*fargs)):
        return
    want = tfn(*targs)
    got = ffn(*fargs)
    assert_same(got.cpu(), want, rtol=rtol, atol=atol, msg=msg)


def devtypes(device):
    if device == "cuda":
        return [torch.float32, torch.float16, torch.bfloat16, torch.int64]
    return [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.bool]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", MATH_UNARY)
def test_math_unary(op, device, gen):
    for dtype in devtypes(device):
        rtol, atol = tol(dtype, device, ulps=8 if op in ("sinh", "cosh", "exp2", "erfc") else 4)
        for shape, layout in SHAPES:
            kw = {"special": dtype.is_floating_point}
            if op in ("asin", "acos", "atanh"):  # mostly inside the domain, some outside (NaN)
                kw.update(low=-1.2, high=1.2) if dtype.is_floating_point else kw.update(low=-1, high=2)
            t, f = pair(shape, dtype, gen, device, layout, **kw)
            check(getattr(torch, op), getattr(flow, op), [t], [f], f"{op} {dtype} {shape} {layout} {device}",
                  rtol, atol)
        t, f = pair((5,), dtype, gen, device)
        if dtype.is_floating_point:
            check(lambda x: getattr(x.clone(), op + "_")(), lambda x: getattr(x.clone(), op + "_")(), [t], [f],
                  f"{op}_ {dtype} {device}", rtol, atol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["atan2", "hypot"])
def test_math_binary(op, device, gen):
    for dtype in devtypes(device):
        rtol, atol = tol(dtype, device)
        for sa, sb in (((), ()), ((7,), (7,)), ((3, 1), (1, 4)), ((0, 3), (1, 3)), ((2, 3, 4), (4,))):
            ta, fa = pair(sa, dtype, gen, device, special=dtype.is_floating_point)
            tb, fb = pair(sb, dtype, gen, device, special=dtype.is_floating_point)
            check(getattr(torch, op), getattr(flow, op), [ta, tb], [fa, fb], f"{op} {dtype} {sa} {sb} {device}",
                  rtol, atol)
    t, f = pair((4, 3), torch.float32, gen, device, "transposed")
    check(lambda x: getattr(x, op)(x.flip(0)), lambda x: getattr(x, op)(x.flip(0)), [t], [f], f"{op} method")


COMPOSITES = {
    "clamp_min": lambda L, x, y: L.clamp_min(x, -0.5),
    "clamp_max method": lambda L, x, y: x.clamp_max(0.25),
    "clamp_min_ tensor": lambda L, x, y: x.clone().clamp_min_(y),
    "logaddexp": lambda L, x, y: L.logaddexp(x, y),
    "addcmul": lambda L, x, y: L.addcmul(x, x, y, value=0.5),
    "addcdiv": lambda L, x, y: L.addcdiv(x, y, x + 3, value=2),
    "lerp scalar": lambda L, x, y: L.lerp(x, y, 0.3),
    "lerp tensor": lambda L, x, y: L.lerp(x, y, (y.abs() / 3).clamp(max=1)),
    "lerp_ 0.75": lambda L, x, y: x.clone().lerp_(y, 0.75),
    "frac": lambda L, x, y: L.frac(x * 3),
    "deg2rad": lambda L, x, y: L.deg2rad(x),
    "rad2deg": lambda L, x, y: x.rad2deg(),
    "rsub": lambda L, x, y: L.rsub(x, y, alpha=2),
    "float_power": lambda L, x, y: L.float_power(x.abs(), 1.5),
    "isclose": lambda L, x, y: L.isclose(x, x + y * 1e-6),
    "isclose nan": lambda L, x, y: L.isclose(x, x, equal_nan=True),
    "isclose tight": lambda L, x, y: L.isclose(x, y, rtol=0, atol=0),
    "count_nonzero": lambda L, x, y: L.count_nonzero(x.round(), dim=0),
    "roll": lambda L, x, y: L.roll(x, 2, 0),
    "roll dims": lambda L, x, y: L.roll(x, (-1, 7), (1, 0)),
    "roll flat": lambda L, x, y: x.roll(5),
    "repeat_interleave": lambda L, x, y: x.repeat_interleave(2, dim=1),
    "repeat_interleave flat": lambda L, x, y: L.repeat_interleave(x, 3),
    "diagonal": lambda L, x, y: L.diagonal(x),
    "diagonal offset": lambda L, x, y: L.diagonal(x, 1) + L.diagonal(x, -2).sum(),
    "diag of matrix": lambda L, x, y: L.diag(x, -1),
    "diag of vector": lambda L, x, y: L.diag(x[0], 2),
    "trace": lambda L, x, y: L.trace(x),
    "normalize": lambda L, x, y: L.nn.functional.normalize(x, dim=0),
    "normalize p1": lambda L, x, y: L.nn.functional.normalize(x, p=1.0, dim=1),
    "cosine_similarity": lambda L, x, y: L.nn.functional.cosine_similarity(x, y[:1], dim=1),
    "CosineSimilarity": lambda L, x, y: L.nn.CosineSimilarity(dim=0)(x, y),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(COMPOSITES))
def test_composites_match_torch(name, device, gen):
    fn = COMPOSITES[name]
    jitted = flow.jit(lambda a, b: fn(flow, a, b))
    for dtype in ([torch.float32, torch.float16] if device == "cuda" else [torch.float32, torch.float64,
                                                                             torch.bfloat16]):
        special = "isclose" in name or name in ("logaddexp", "clamp_min", "frac")
        t, f = pair((5, 6), dtype, gen, device, "transposed", special=special)
        u, g = pair((5, 6), dtype, gen, device, special=special)
        rtol, atol = (1e-5, 1e-5) if dtype == torch.float32 else (None, None)
        if "normalize" in name or "osine" in name:
            rtol, atol = (2e-5, 1e-5) if dtype == torch.float32 else (rtol, atol)
        msg = f"{name} {dtype} {device}"
        if raises_like(lambda: fn(torch, t, u), lambda: fn(flow, f, g)):
            continue
        want = fn(torch, t, u)
        assert_same(fn(flow, f, g).cpu(), want, rtol=rtol, atol=atol, msg=msg + " eager")
        if "repeat_interleave flat" in name or name.startswith("clamp_min_") or name.startswith("lerp_"):
            continue  # in-place on an argument / flattening: eager only
        assert_same(jitted(f, g).cpu(), want, rtol=rtol, atol=atol, msg=msg + " jit")


@pytest.mark.parametrize("device", DEVICES)
def test_integer_and_bool_cases(device, gen):
    t, f = pair((4, 5), torch.int64, gen, device, "transposed", low=-3, high=3)
    u, g = pair((4, 5), torch.int64, gen, device, low=-3, high=3)
    for name, fn in [("isclose int", lambda L, x, y: L.isclose(x, y, atol=1)),
                     ("isclose bool", lambda L, x, y: L.isclose(x > 0, y > 0)),
                     ("allclose", lambda L, x, y: L.tensor(L.allclose(x, x))),
                     ("count_nonzero", lambda L, x, y: L.count_nonzero(x)),
                     ("deg2rad int", lambda L, x, y: L.deg2rad(x)),
                     ("roll int", lambda L, x, y: L.roll(x, -3)),
                     ("repeat_interleave counts", lambda L, x, y: L.repeat_interleave(x[0].abs())),
                     ("repeat_interleave tensor", lambda L, x, y: L.repeat_interleave(x, y[:, 0].abs(), dim=0)),
                     ("diag int", lambda L, x, y: L.diag(x[1])),
                     ("lerp int", lambda L, x, y: L.lerp(x, y, 0.5)),
                     ("frac int", lambda L, x, y: L.frac(x)),
                     ("hypot int", lambda L, x, y: L.hypot(x, y)),
                     ("atan2 int", lambda L, x, y: L.atan2(x, y)),
                     ("addcdiv int", lambda L, x, y: L.addcdiv(x, x, y))]:
        msg = f"{name} {device}"
        if raises_like(lambda: fn(torch, t, u), lambda: fn(flow, f, g)):
            continue
        got = fn(flow, f, g)
        assert_same(got.cpu() if isinstance(got, flow.Tensor) else got, fn(torch, t, u), msg=msg)


@pytest.mark.parametrize("device", DEVICES)
def test_meshgrid_and_broadcast_shapes(device, gen):
    a, fa = pair((3,), torch.float32, gen, device)
    b, fb = pair((4,), torch.float32, gen, device)
    c, fc = pair((), torch.float32, gen, device)
    for indexing in ("ij", "xy"):
        want = torch.meshgrid(a, b, c, indexing=indexing)
        got = flow.meshgrid(fa, fb, fc, indexing=indexing)
        assert len(got) == 3
        for w, g in zip(want, got):
            assert_same(g.cpu(), w, rtol=0, atol=0, msg=f"meshgrid {indexing}")
    got = flow.jit(lambda x, y: [g * 1 for g in flow.meshgrid([x, y], indexing="xy")])(fa, fb)
    for w, g in zip(torch.meshgrid(a, b, indexing="xy"), got):
        assert_same(g.cpu(), w, rtol=0, atol=0, msg="meshgrid traced")
    assert flow.broadcast_shapes((3, 1), (4,), ()) == torch.broadcast_shapes((3, 1), (4,), ())
    with pytest.raises(RuntimeError, match="Shape mismatch"):
        flow.broadcast_shapes((3,), (4,))
    with pytest.raises(RuntimeError):
        flow.meshgrid(fa, fb, indexing="yx")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_pixel_shuffle_upsample_pad_modules(dtype, device, gen):
    t, f = pair((2, 8, 3, 5), dtype, gen, device)
    for name, fn in [("pixel_shuffle", lambda L, x: L.nn.functional.pixel_shuffle(x, 2)),
                     ("PixelShuffle", lambda L, x: L.nn.PixelShuffle(2)(x)),
                     ("pixel_unshuffle", lambda L, x: L.nn.functional.pixel_unshuffle(x[..., :2, :4], 2)),
                     ("PixelUnshuffle", lambda L, x: L.nn.PixelUnshuffle(2)(x[..., :2, :4])),
                     ("round trip", lambda L, x: L.nn.functional.pixel_unshuffle(L.nn.functional.pixel_shuffle(x, 2),
                                                                                 2)),
                     ("Upsample nearest", lambda L, x: L.nn.Upsample(scale_factor=2)(x)),
                     ("Upsample bilinear", lambda L, x: L.nn.Upsample(size=(5, 7), mode="bilinear",
                                                                      align_corners=False)(x)),
                     ("ZeroPad2d", lambda L, x: L.nn.ZeroPad2d((1, 0, 2, 3))(x)),
                     ("ZeroPad2d int", lambda L, x: L.nn.ZeroPad2d(1)(x))]:
        want = fn(torch, t)
        if "bilinear" in name and dtype == torch.float16:
            # torch's CPU half bilinear kernel interpolates in half (up to 2 ulp off); flow computes in
            # float32 and rounds once, so the reference is torch's float32 result rounded to half.
            want = fn(torch, t.float()).half()
        rtol, atol = (1e-5, 1e-5) if "bilinear" in name and dtype == torch.float32 else (None, None)
        assert_same(fn(flow, f).cpu(), want, rtol=rtol, atol=atol, msg=f"{name} {dtype} {device}")
        assert_same(flow.jit(lambda x, fn=fn: fn(flow, x))(f).cpu(), want, rtol=rtol, atol=atol,
                    msg=f"{name} {dtype} {device} jit")
    with pytest.raises(RuntimeError, match="divisible"):
        flow.nn.functional.pixel_shuffle(f[:, :3], 2)


def test_math_constants_at_edges():
    """Exact values at the functions' special points (C's definitions, as torch's)."""
    x = flow.tensor([0.0, -0.0, 1.0, math.inf, -math.inf, math.nan])
    t = torch.tensor([0.0, -0.0, 1.0, math.inf, -math.inf, math.nan])
    for op in MATH_UNARY:
        assert_same(getattr(flow, op)(x), getattr(torch, op)(t), rtol=1e-6, atol=0, msg=op)
    assert_same(flow.atan2(x, x.flip(0)), torch.atan2(t, t.flip(0)), rtol=1e-6, atol=0, msg="atan2 edges")
    assert_same(flow.hypot(x, x.flip(0)), torch.hypot(t, t.flip(0)), rtol=1e-6, atol=0, msg="hypot edges")
