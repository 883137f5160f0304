"""torch.nn's loss functions and loss modules (flow/nn/_loss_functional.py, flow/nn/loss.py) against
PyTorch: each loss over float32 / float16 / bfloat16 / float64, every reduction and each of its
options, edge shapes (an empty batch, one element, odd sizes, unbatched inputs), transposed and
sliced inputs, NaN and infinities, eagerly and under flow.jit, on the CPU and (marker `gpu`) on a
CUDA device; the modules' constructor arguments and state_dict keys; torch's errors and warnings;
the autocast classes.

Where torch's CPU kernels refuse half types (multi_margin_loss, multilabel_margin_loss; torch's
CUDA kernels take them), the reference is torch in float32 on the same values, rounded once.
"""
import math
import warnings

import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn.functional as F
from conftest import FLOAT_DTYPES, assert_same, make, to_flow, to_torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]
REDUCTIONS = ("none", "mean", "sum")
HALF = (torch.float16, torch.bfloat16)


# ---- inputs --------------------------------------------------------------------------------------------


def unit(shape, dtype, gen, edges=False):
    """Values in [0, 1]; with `edges`, some exact 0s and 1s."""
    t = make(shape, dtype, gen, low=0.0, high=1.0)
    if edges and t.numel() >= 2:
        flat = t.view(-1)
        flat[0], flat[-1] = 0.0, 1.0
        if t.numel() >= 4:
            flat[1], flat[2] = 1.0, 0.0
    return t


def signs(shape, dtype, gen):
    return (torch.randint(0, 2, shape, generator=gen) * 2 - 1).to(dtype)


def counts(shape, dtype, gen):
    return torch.randint(0, 9, shape, generator=gen).to(dtype)


def with_big(t, value=30.0):
    """t with a large positive and a large negative entry (the stable forms must not overflow)."""
    t = t.clone()
    if t.numel() >= 2:
        t.view(-1)[0], t.view(-1)[-1] = value, -value
    return t


def multilabel_targets(n, c, gen):
    """Rows of class indices: a random prefix of a permutation, -1, then entries past the -1 that
    must be ignored."""
    rows = []
    for _ in range(n):
        perm = torch.randperm(c, generator=gen)
        k = int(torch.randint(0, c + 1, (), generator=gen))
        row = perm.clone()
        if k < c:
            row[k] = -1
            row[k + 1:] = torch.randint(-1, c, (c - k - 1,), generator=gen)
        rows.append(row)
    return torch.stack(rows) if rows else torch.zeros(0, c, dtype=torch.int64)


# Each case: (shapes, build(shape, dtype, gen) -> [(args, kwargs), ...] with torch tensors, extra
# reductions). Shapes are the input's; targets follow.
ELEMENTWISE = [(), (0,), (1,), (7,), (2, 3, 5), (0, 3)]
ROWS = [(0, 4), (1, 4), (7, 5), (5,)]  # (N, C) batches and one unbatched (C,)


def _bce(shape, dtype, gen):
    x, t = unit(shape, dtype, gen, edges=True), unit(shape, dtype, gen)
    w = make(shape[-1:], dtype, gen, low=0.0, high=2.0)
    w_full = make(shape, dtype, gen, low=0.0, high=2.0)
    return [((x, t), {}), ((x, t), {"weight": w}), ((x, t.round()), {"weight": w_full})]


def _bce_logits(shape, dtype, gen):
    x, t = with_big(make(shape, dtype, gen)), unit(shape, dtype, gen, edges=True)
    w, pw = make(shape[-1:], dtype, gen, low=0.0, high=2.0), make(shape[-1:], dtype, gen, low=0.5, high=3.0)
    return [((x, t), {}), ((x, t), {"weight": w}), ((x, t), {"pos_weight": pw}),
            ((x, t), {"weight": make(shape, dtype, gen, low=0.0, high=2.0), "pos_weight": pw})]


def _kl_div(shape, dtype, gen):
    x, t = make(shape, dtype, gen), unit(shape, dtype, gen, edges=True)
    return [((x, t), {}), ((x, make(shape, dtype, gen)), {"log_target": True})]


def _huber(shape, dtype, gen):
    x, t = make(shape, dtype, gen), make(shape, dtype, gen)
    return [((x, t), {}), ((x, t), {"delta": 0.5}), ((x, t), {"delta": 2.5}),
            ((x, t), {"weight": make(shape, dtype, gen, low=0.0, high=2.0)})]


def _smooth_l1(shape, dtype, gen):
    x, t = make(shape, dtype, gen), make(shape, dtype, gen)
    return [((x, t), {}), ((x, t), {"beta": 0.5}), ((x, t), {"beta": 3.0}), ((x, t), {"beta": 0.0})]


def _soft_margin(shape, dtype, gen):
    x = make(shape, dtype, gen)
    return [((x, signs(shape, dtype, gen)), {}), ((x, make(shape, dtype, gen)), {})]


def _margin_ranking(shape, dtype, gen):
    x1, x2, t = make(shape, dtype, gen), make(shape, dtype, gen), signs(shape, dtype, gen)
    return [((x1, x2, t), {}), ((x1, x2, t), {"margin": 0.5})]


def _hinge(shape, dtype, gen):
    x, t = make(shape, dtype, gen), signs(shape, dtype, gen)
    return [((x, t), {}), ((x, t), {"margin": 2.0})]


def _cosine_embedding(shape, dtype, gen):
    x1, x2, t = make(shape, dtype, gen), make(shape, dtype, gen), signs(shape[:-1], torch.int64, gen)
    if x1.numel():
        x2[..., 0] = x1[..., 0]  # some cosines near 1
    return [((x1, x2, t), {}), ((x1, x2, t), {"margin": 0.3}), ((x1, x2, t.to(dtype)), {"margin": -0.2})]


def _triplet(shape, dtype, gen):
    a, p, n = (make(shape, dtype, gen) for _ in range(3))
    return [((a, p, n), {}), ((a, p, n), {"p": 1}), ((a, p, n), {"p": 3, "margin": 0.5}),
            ((a, p, n), {"swap": True}), ((a, p, n), {"eps": 0.0, "p": 1.5})]


def _poisson(shape, dtype, gen):
    x, t = make(shape, dtype, gen), counts(shape, dtype, gen)
    rate = make(shape, dtype, gen, low=0.0, high=5.0)
    return [((x, t), {}), ((x, t), {"full": True}), ((rate, t), {"log_input": False}),
            ((rate, t), {"log_input": False, "full": True, "eps": 1e-3})]


def _gaussian(shape, dtype, gen):
    x, t = make(shape, dtype, gen), make(shape, dtype, gen)
    var = make(shape, dtype, gen, low=0.0, high=3.0)
    if var.numel():
        var.view(-1)[0] = 0.0  # clamped to eps
    out = [((x, t, var), {}), ((x, t, var), {"full": True, "eps": 1e-3}), ((x, t, 0.7), {})]
    if len(shape) >= 1:
        out.append(((x, t, make(shape[:-1], dtype, gen, low=0.1, high=3.0)), {}))
        out.append(((x, t, make(shape[:-1] + (1,), dtype, gen, low=0.1, high=3.0)), {"full": True}))
    return out


def _multi_margin(shape, dtype, gen):
    x = make(shape, dtype, gen)
    c = shape[-1]
    t = torch.randint(0, c, shape[:-1], generator=gen)
    w = make((c,), dtype, gen, low=0.0, high=2.0)
    return [((x, t), {}), ((x, t), {"p": 2}), ((x, t), {"margin": 0.5, "weight": w}),
            ((x, t), {"p": 2, "margin": 2.0, "weight": w})]


def _multilabel_soft_margin(shape, dtype, gen):
    x, t = make(shape, dtype, gen), torch.randint(0, 2, shape, generator=gen).to(dtype)
    return [((x, t), {}), ((x, unit(shape, dtype, gen)), {"weight": make(shape[-1:], dtype, gen, low=0.0, high=2.0)})]


def _multilabel_margin(shape, dtype, gen):
    x = make(shape, dtype, gen)
    t = multilabel_targets(1 if len(shape) == 1 else shape[0], shape[-1], gen).reshape(shape)
    return [((x, t), {})]


CASES = {
    "binary_cross_entropy": (ELEMENTWISE, _bce, ()),
    "binary_cross_entropy_with_logits": (ELEMENTWISE, _bce_logits, ()),
    "kl_div": (ELEMENTWISE, _kl_div, ("batchmean",)),
    "huber_loss": (ELEMENTWISE, _huber, ()),
    "smooth_l1_loss": (ELEMENTWISE, _smooth_l1, ()),
    "soft_margin_loss": (ELEMENTWISE, _soft_margin, ()),
    "margin_ranking_loss": ([(0,), (1,), (9,), (3, 4)], _margin_ranking, ()),
    "hinge_embedding_loss": (ELEMENTWISE, _hinge, ()),
    "cosine_embedding_loss": ([(0, 4), (1, 4), (7, 5), (6,)], _cosine_embedding, ()),
    "triplet_margin_loss": ([(0, 4), (1, 4), (7, 5), (6,), (2, 3, 4)], _triplet, ()),
    "poisson_nll_loss": (ELEMENTWISE, _poisson, ()),
    "gaussian_nll_loss": (ELEMENTWISE, _gaussian, ()),
    "multi_margin_loss": (ROWS, _multi_margin, ()),
    "multilabel_soft_margin_loss": (ROWS + [(2, 3, 4)], _multilabel_soft_margin, ()),
    "multilabel_margin_loss": (ROWS, _multilabel_margin, ()),
}
NO_HALF_ON_TORCH_CPU = ("multi_margin_loss", "multilabel_margin_loss")


# ---- running both ----------------------------------------------------------------------------------------


def flow_view(t, device, layout="contiguous"):
    """A flow tensor on `device` with t's values: contiguous, a transposed view or a strided slice."""
    if layout == "transposed" and t.ndim >= 2:
        return to_flow(t.transpose(-1, -2).contiguous()).to(device).transpose(-1, -2)
    if layout == "sliced" and t.ndim >= 1:
        base = torch.zeros(t.shape[:-1] + (2 * t.shape[-1] + 1,), dtype=t.dtype)
        base[..., 1::2] = t
        return to_flow(base).to(device)[..., 1::2]
    return to_flow(t).to(device)


def to_flow_args(args, kwargs, device, layout="contiguous"):
    conv = (lambda v: flow_view(v, device, layout) if torch.is_tensor(v) else v)
    return [conv(a) for a in args], {k: conv(v) for k, v in kwargs.items()}


def reference(name, args, kwargs):
    fn = getattr(TF, name)
    red = kwargs.get("reduction", "mean")
    if name in NO_HALF_ON_TORCH_CPU and args[0].numel() == 0 and red != "none":
        # torch's CPU kernels leave an empty batch's mean and sum uninitialized: flow's are NaN and 0
        return getattr(reference(name, args, dict(kwargs, reduction="none")), red)()
    half = [a.dtype for a in list(args) + list(kwargs.values()) if torch.is_tensor(a) and a.dtype in HALF]
    if half and name in NO_HALF_ON_TORCH_CPU:
        up = (lambda v: v.float() if torch.is_tensor(v) and v.dtype in HALF else v)
        return fn(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()}).to(half[0])
    return fn(*args, **kwargs)


def tolerance(dtype):
    """(rtol, atol): torch's kernels round half types per op where flow rounds once (or the other
    way round), and sums run in another order."""
    if dtype == torch.float16:
        return 2e-3, 2e-3
    if dtype == torch.bfloat16:
        return 1.6e-2, 1.6e-2
    if dtype == torch.float32:
        return 2e-6, 1e-5
    return 1e-12, 1e-12


def summed_terms_atol(name, args, kwargs, dtype):
    """The absolute error a half-precision sum or mean of elementwise terms may carry: each term is
    rounded to the half type (by flow's kernel, or by torch's composite kernels), so the result's error
    grows with the terms' magnitudes, eps * sum|term| / denominator, not with the result's, which
    cancellation can make small (kl_div's terms have both signs). 0 for what tolerance() covers."""
    red = kwargs.get("reduction", "mean")
    if dtype not in HALF or red == "none" or CASES[name][0] is not ELEMENTWISE:
        return 0.0
    up = (lambda v: v.float() if torch.is_tensor(v) and v.dtype in HALF else v)
    terms = getattr(TF, name)(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items() if k != "reduction"},
                              reduction="none")
    magnitude = terms[terms.isfinite()].double().abs().sum().item()
    batch = args[0].shape[0] if args[0].ndim else 1
    denominator = {"sum": 1, "mean": terms.numel(), "batchmean": batch}[red]
    return torch.finfo(dtype).eps * magnitude / max(denominator, 1)


def jitted(name, args, kwargs):
    """F.<name> traced by flow.jit, with the tensor arguments (kwargs too) as arguments of the trace."""
    names = [k for k, v in kwargs.items() if isinstance(v, flow.Tensor)]
    static = {k: v for k, v in kwargs.items() if k not in names}
    n = len(args)
    fn = flow.jit(lambda *a: getattr(F, name)(*a[:n], **static, **dict(zip(names, a[n:]))))
    return fn(*args, *[kwargs[k] for k in names])


def run_case(name, args, kwargs, device, dtype, layout="contiguous", jit=False, msg=""):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = reference(name, args, kwargs)
        fargs, fkw = to_flow_args(args, kwargs, device, layout)
        got = jitted(name, fargs, fkw) if jit else getattr(F, name)(*fargs, **fkw)
    assert got.device.type == device, msg
    rtol, atol = tolerance(dtype)
    atol = max(atol, summed_terms_atol(name, args, kwargs, dtype))
    assert_same(got.cpu(), want, rtol=rtol, atol=atol, msg=msg)


def reductions(name):
    return REDUCTIONS + CASES[name][2]


def batch_shape(shapes):
    """The case's largest shape (most elements, then most dims)."""
    return max(shapes, key=lambda s: (math.prod(s), len(s)))


# ---- every loss against torch --------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_loss_matches_torch(name, dtype, device, gen):
    shapes, build, _ = CASES[name]
    for shape in shapes:
        for args, kwargs in build(shape, dtype, gen):
            for reduction in reductions(name):
                kw = dict(kwargs, reduction=reduction)
                run_case(name, args, kw, device, dtype, msg=f"{name} {shape} {kw} {dtype} on {device}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_loss_under_jit(name, dtype, device, gen):
    """Traced and compiled: every option and reduction of a batch in float32 (bfloat16: the means),
    and an empty batch's mean."""
    shapes, build, _ = CASES[name]
    batch = batch_shape(shapes)
    for shape in (batch, next(s for s in shapes if math.prod(s) == 0)):
        for k, (args, kwargs) in enumerate(build(shape, dtype, gen)):
            for reduction in reductions(name):
                every = dtype == torch.float32 and shape == batch
                if every or (reduction == "mean" and (shape == batch or k == 0)):
                    kw = dict(kwargs, reduction=reduction)
                    run_case(name, args, kw, device, dtype, jit=True,
                             msg=f"jit {name} {shape} {kw} {dtype} on {device}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["transposed", "sliced"])
@pytest.mark.parametrize("name", list(CASES))
def test_loss_of_non_contiguous_inputs(name, layout, device, gen):
    """Views as inputs: every option eagerly, the first one under flow.jit too."""
    shapes, build, _ = CASES[name]
    shape = batch_shape(shapes)
    for k, (args, kwargs) in enumerate(build(shape, torch.float32, gen)):
        kw = dict(kwargs, reduction="none")
        for jit in (False, True) if k == 0 else (False,):
            run_case(name, args, kw, device, torch.float32, layout, jit,
                     msg=f"{name} {layout} {shape} {kw} jit={jit} on {device}")


# NaN and infinities pass through as torch's formulas pass them (BCE refuses NaN: see the errors).
SPECIAL = {
    "binary_cross_entropy_with_logits": lambda x, gen: (x, unit(x.shape, x.dtype, gen)),
    "kl_div": lambda x, gen: (x, unit(x.shape, x.dtype, gen, edges=True)),
    "huber_loss": lambda x, gen: (x, make(x.shape, x.dtype, gen)),
    "smooth_l1_loss": lambda x, gen: (x, make(x.shape, x.dtype, gen)),
    "soft_margin_loss": lambda x, gen: (x, signs(x.shape, x.dtype, gen)),
    "hinge_embedding_loss": lambda x, gen: (x, signs(x.shape, x.dtype, gen)),
    "poisson_nll_loss": lambda x, gen: (x, counts(x.shape, x.dtype, gen)),
    "multi_margin_loss": lambda x, gen: (x, torch.randint(0, x.shape[-1], x.shape[:-1], generator=gen)),
    "multilabel_soft_margin_loss": lambda x, gen: (x, unit(x.shape, x.dtype, gen)),
    "multilabel_margin_loss": lambda x, gen: (x, multilabel_targets(x.shape[0], x.shape[1], gen)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(SPECIAL))
def test_loss_of_nan_and_infinities(name, dtype, device, gen):
    for _ in range(3):
        x = make((6, 5), dtype, gen, special=True)
        args = SPECIAL[name](x, gen)
        for jit in (False, True):
            run_case(name, args, {"reduction": "none"}, device, dtype, jit=jit, msg=f"{name} special jit={jit}")


@pytest.mark.parametrize("device", DEVICES)
def test_losses_are_stable_or_overflow_as_torch(device):
    """BCE with logits is stable for large logits; BCE clamps its logs at -100; soft_margin_loss's
    log1p(exp(-x*y)) overflows to inf as torch's does."""
    x = torch.tensor([-200.0, -40.0, 0.0, 40.0, 200.0])
    t = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    fx, ft = to_flow(x).to(device), to_flow(t).to(device)
    cases = [("binary_cross_entropy_with_logits", (x, t), (fx, ft)),
             ("binary_cross_entropy", (torch.sigmoid(x), t), (flow.sigmoid(fx), ft)),
             ("soft_margin_loss", (x, t * 2 - 1), (fx, ft * 2 - 1))]
    for name, targs, fargs in cases:
        want = getattr(TF, name)(*targs, reduction="none")
        assert_same(getattr(F, name)(*fargs, reduction="none").cpu(), want, msg=name)
    assert math.isinf(to_torch(F.soft_margin_loss(fx, ft * 2 - 1, reduction="none").cpu())[0])
    assert to_torch(F.binary_cross_entropy(flow.sigmoid(fx), ft, reduction="none").cpu()).max() == 100.0


def test_mixed_dtypes_follow_torch(gen):
    """Result dtypes of mixed inputs are torch's (in-place steps of ATen keep their operand's type)."""
    pairs = [(torch.float32, torch.float64), (torch.float64, torch.float32), (torch.float16, torch.float32),
             (torch.float32, torch.bfloat16)]
    for a, b in pairs:
        x, t = make((4, 3), a, gen), make((4, 3), b, gen, low=0.0, high=1.0)
        s = signs((4,), b, gen)
        calls = [
            ("binary_cross_entropy_with_logits", (x, t), {}),
            ("binary_cross_entropy_with_logits", (x, t.to(a)), {"pos_weight": t[0], "weight": t[1]}),
            ("binary_cross_entropy", (x.sigmoid(), t.to(a)), {"weight": t[0]}),
            ("kl_div", (x, t), {"reduction": "sum"}),
            ("huber_loss", (x, t), {}),
            ("smooth_l1_loss", (x, t), {}),
            ("soft_margin_loss", (x, t), {}),
            ("hinge_embedding_loss", (x, t), {}),
            ("poisson_nll_loss", (x, t), {"full": True}),
            ("gaussian_nll_loss", (x, t, t.abs()), {}),
            ("margin_ranking_loss", (x[:, 0], x[:, 1], s), {}),
            ("cosine_embedding_loss", (x, t, s), {}),
            ("triplet_margin_loss", (x, t, t.flip(0)), {}),
            ("multilabel_soft_margin_loss", (x, t), {"weight": t[0]}),
        ]
        for name, args, kw in calls:
            run_case(name, args, kw, "cpu", torch.bfloat16, msg=f"{name} {a} with {b}")


# ---- edges where flow chooses ----------------------------------------------------------------------------


def test_margin_losses_of_an_empty_batch():
    """torch's CPU kernels return uninitialized memory for an empty batch's mean; flow's mean of no
    samples is NaN and its sum 0, as every other loss."""
    x = flow.zeros(0, 5)
    for fn, t in ((F.multi_margin_loss, flow.zeros(0, dtype=flow.int64)),
                  (F.multilabel_margin_loss, flow.zeros(0, 5, dtype=flow.int64))):
        assert math.isnan(fn(x, t).item())
        assert fn(x, t, reduction="sum").item() == 0.0
        assert tuple(fn(x, t, reduction="none").shape) == (0,)


def test_margin_losses_unbatched_shapes():
    """torch's 'none' shapes: multi_margin keeps a 1-element target's dim, multilabel_margin never."""
    x = torch.randn(5)
    for name, t in (("multi_margin_loss", torch.tensor(2)), ("multi_margin_loss", torch.tensor([2])),
                    ("multilabel_margin_loss", torch.tensor([3, 1, -1, 0, 0]))):
        run_case(name, (x, t), {"reduction": "none"}, "cpu", torch.float32, msg=f"{name} {tuple(t.shape)}")
    run_case("multi_margin_loss", (x[:1].reshape(()), torch.tensor([0])), {"reduction": "none"}, "cpu",
             torch.float32, msg="0-dim input")
    run_case("multi_margin_loss", (x[None], torch.tensor(1)), {"reduction": "none"}, "cpu", torch.float32,
             msg="a batch of one with a 0-dim target")


def test_value_checks_are_skipped_under_jit():
    """Checks that need values run eagerly; a jitted loss with an out-of-range target index still
    reads in bounds (the index is clamped) and returns a finite value."""
    x = flow.randn(3, 4)
    t = flow.tensor([0, 7, -3])
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multi_margin_loss(x, t)
    assert math.isfinite(flow.jit(lambda a, b: F.multi_margin_loss(a, b))(x, t).item())
    bad = flow.tensor([[0, 9, -5, 1]] * 3)
    with pytest.raises(RuntimeError, match="out of range"):
        F.multilabel_margin_loss(x, bad)
    assert math.isfinite(flow.jit(lambda a, b: F.multilabel_margin_loss(a, b))(x, bad).item())
    p = flow.tensor([0.5, 1.5])
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(p, flow.tensor([0.0, 1.0]))
    flow.jit(lambda a, b: F.binary_cross_entropy(a, b))(p, flow.tensor([0.0, 1.0]))  # no check, no error


# ---- errors and warnings -----------------------------------------------------------------------------------


def same_error(torch_fn, flow_fn):
    """torch raises; flow raises the same class (torch's NotImplementedError is a RuntimeError)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as want:
            torch_fn()
        kind = want.type if want.type is not NotImplementedError else RuntimeError
        with pytest.raises(kind):
            flow_fn()


def _error_calls():
    x, t = torch.rand(3, 4), torch.rand(3, 4)
    i64, lab = torch.randint(0, 2, (3, 4)), torch.randint(0, 4, (3,))
    s = torch.tensor([1.0, -1.0, 1.0])
    mlm_t = torch.tensor([[0, 1, -1, 2]] * 3)
    return [
        ("binary_cross_entropy", (x, t[0]), {}),
        ("binary_cross_entropy", (x, t.double()), {}),
        ("binary_cross_entropy", (i64, i64), {}),
        ("binary_cross_entropy", (x + 1, t), {}),
        ("binary_cross_entropy", (x, t - 1), {}),
        ("binary_cross_entropy", (torch.full((2,), float("nan")), t[0, :2]), {}),
        ("binary_cross_entropy", (x, t), {"weight": torch.rand(3)}),
        ("binary_cross_entropy", (x, t), {"weight": torch.rand(2, 3, 4)}),
        ("binary_cross_entropy", (x, t), {"reduction": "avg"}),
        ("binary_cross_entropy_with_logits", (x, t[0]), {}),
        ("binary_cross_entropy_with_logits", (i64, i64), {}),
        ("binary_cross_entropy_with_logits", (x, i64), {}),
        ("binary_cross_entropy_with_logits", (x, t), {"weight": torch.rand(2, 3, 4)}),
        ("binary_cross_entropy_with_logits", (x, t), {"pos_weight": torch.rand(2, 3, 4)}),
        ("kl_div", (i64, i64), {}),
        ("kl_div", (x, i64), {}),
        ("kl_div", (x, t), {"reduction": "batch"}),
        ("huber_loss", (x, t), {"delta": 0.0}),
        ("huber_loss", (i64, i64), {}),
        ("huber_loss", (x, t), {"weight": torch.rand(4)}),
        ("huber_loss", (x, t[:, :3]), {}),
        ("smooth_l1_loss", (x, t), {"beta": -1.0}),
        ("smooth_l1_loss", (i64, i64), {}),
        ("smooth_l1_loss", (x[0, :3], t), {}),
        ("soft_margin_loss", (x[0], t), {}),
        ("soft_margin_loss", (i64, x), {}),
        ("soft_margin_loss", (x, t), {"reduction": "mean "}),
        ("margin_ranking_loss", (x, x, s), {}),
        ("cosine_embedding_loss", (x[None], t[None], s), {}),
        ("cosine_embedding_loss", (x, t, s[None]), {}),
        ("cosine_embedding_loss", (x, t, s[0]), {}),
        ("cosine_embedding_loss", (x, t, s[:2]), {}),
        ("triplet_margin_loss", (x, t, t), {"margin": 0.0}),
        ("triplet_margin_loss", (x, t, t[0]), {}),
        ("poisson_nll_loss", (x, t), {"reduction": "max"}),
        ("gaussian_nll_loss", (x, t, -t), {}),
        ("gaussian_nll_loss", (x, t, -1.0), {}),
        ("gaussian_nll_loss", (x, t, t[:2]), {}),
        ("gaussian_nll_loss", (x, t, t[:1, :1]), {}),
        ("gaussian_nll_loss", (x, t, i64), {}),
        ("gaussian_nll_loss", (x, t, t), {"reduction": "bad"}),
        ("multi_margin_loss", (x, lab), {"p": 3}),
        ("multi_margin_loss", (x, lab + 4), {}),
        ("multi_margin_loss", (x, lab - 5), {}),
        ("multi_margin_loss", (x, lab[:2]), {}),
        ("multi_margin_loss", (x, lab.int()), {}),
        ("multi_margin_loss", (x, lab.float()), {}),
        ("multi_margin_loss", (x[None], lab), {}),
        ("multi_margin_loss", (x[:, :0], lab), {}),
        ("multi_margin_loss", (i64, lab), {}),
        ("multi_margin_loss", (x, lab), {"weight": torch.rand(3)}),
        ("multi_margin_loss", (x, lab), {"weight": torch.rand(1, 4)}),
        ("multi_margin_loss", (x, lab), {"weight": torch.rand(4, dtype=torch.float64)}),
        ("multilabel_margin_loss", (x, mlm_t + 4), {}),
        ("multilabel_margin_loss", (x, mlm_t - 2), {}),
        ("multilabel_margin_loss", (x, mlm_t[:, :3]), {}),
        ("multilabel_margin_loss", (x[0], mlm_t), {}),
        ("multilabel_margin_loss", (x, mlm_t.int()), {}),
        ("multilabel_margin_loss", (x[None], mlm_t[None]), {}),
        ("multilabel_margin_loss", (x[:, :0], mlm_t[:, :0]), {}),
        ("multilabel_soft_margin_loss", (x[0, 0], t[0, 0]), {}),
        ("multilabel_soft_margin_loss", (x, t), {"reduction": "bad"}),
    ]


@pytest.mark.parametrize("call", _error_calls(), ids=lambda c: c[0])
def test_errors_follow_torch(call):
    name, args, kwargs = call
    fargs, fkw = to_flow_args(args, kwargs, "cpu")
    same_error(lambda: getattr(TF, name)(*args, **kwargs), lambda: getattr(F, name)(*fargs, **fkw))


def test_non_tensor_arguments_are_type_errors():
    """A list where a tensor belongs is a TypeError naming the argument (torch raises TypeError or,
    from its Python-level size checks, AttributeError)."""
    x = flow.rand(3)
    for name in F._loss_functional.__all__:
        nargs = 3 if name in ("margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss",
                                "triplet_margin_with_distance_loss") else 2
        for pos in range(nargs):
            args = [x] * nargs
            args[pos] = [0.5] * 3
            with pytest.raises(TypeError, match="must be Tensor"):
                getattr(F, name)(*args, **({"var": x} if name == "gaussian_nll_loss" else {}))
    same_error(lambda: TF.gaussian_nll_loss(torch.rand(3), torch.rand(3), 1),
               lambda: F.gaussian_nll_loss(x, x, 1))


def test_warnings_follow_torch():
    x, t = flow.rand(3, 4), flow.rand(4)
    for fn in (F.huber_loss, F.smooth_l1_loss):
        with pytest.warns(UserWarning, match="target size"):
            fn(x, t)
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, x)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        got = F.soft_margin_loss(x, x, size_average=False)
    assert_same(got, TF.soft_margin_loss(to_torch(x), to_torch(x), reduction="sum"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.huber_loss(x, x)
        F.kl_div(x, x, reduction="batchmean")


@pytest.mark.parametrize("size_average,reduce", [(None, False), (False, None), (True, True), (False, True)])
def test_legacy_reduction_arguments(size_average, reduce, gen):
    x, t = unit((4, 3), torch.float32, gen), unit((4, 3), torch.float32, gen)
    lab = torch.randint(0, 3, (4,), generator=gen)
    calls = [("binary_cross_entropy", (x, t)), ("binary_cross_entropy_with_logits", (x, t)), ("kl_div", (x, t)),
             ("smooth_l1_loss", (x, t)), ("soft_margin_loss", (x, t)), ("poisson_nll_loss", (x, t)),
             ("hinge_embedding_loss", (x, t)), ("multi_margin_loss", (x, lab)),
             ("multilabel_soft_margin_loss", (x, t)), ("triplet_margin_loss", (x, t, t.flip(0)))]
    for name, args in calls:
        run_case(name, args, {"size_average": size_average, "reduce": reduce}, "cpu", torch.float32,
                 msg=f"{name} size_average={size_average} reduce={reduce}")


# ---- modules -------------------------------------------------------------------------------------------


def _module_cases(gen):
    x, t = make((4, 3), torch.float32, gen), unit((4, 3), torch.float32, gen)
    p = unit((4, 3), torch.float32, gen)
    lab = torch.randint(0, 3, (4,), generator=gen)
    w3 = make((3,), torch.float32, gen, low=0.1, high=2.0)
    s = signs((4,), torch.float32, gen)
    mlm = multilabel_targets(4, 3, gen)
    return [
        ("CrossEntropyLoss", {}, (x, lab)),
        ("CrossEntropyLoss", {"weight": w3, "ignore_index": 1, "label_smoothing": 0.1}, (x, lab)),
        ("NLLLoss", {"weight": w3, "reduction": "sum"}, (x.log_softmax(1), lab)),
        ("MSELoss", {"reduction": "none"}, (x, t)),
        ("L1Loss", {}, (x, t)),
        ("BCELoss", {"weight": w3}, (p, t)),
        ("BCELoss", {"reduce": False}, (p, t)),
        ("BCEWithLogitsLoss", {"weight": w3, "pos_weight": w3.flip(0)}, (x, t)),
        ("BCEWithLogitsLoss", {"pos_weight": w3}, (x, t)),
        ("SmoothL1Loss", {"beta": 0.5}, (x, t)),
        ("HuberLoss", {"delta": 0.5, "reduction": "sum"}, (x, t)),
        ("KLDivLoss", {"reduction": "batchmean", "log_target": True}, (x, x.flip(0))),
        ("SoftMarginLoss", {}, (x, t)),
        ("MarginRankingLoss", {"margin": 0.2}, (x[:, 0], x[:, 1], s)),
        ("CosineEmbeddingLoss", {"margin": 0.1}, (x, t, s)),
        ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "swap": True}, (x, t, p)),
        ("PoissonNLLLoss", {"log_input": False, "full": True}, (p, counts((4, 3), torch.float32, gen))),
        ("GaussianNLLLoss", {"full": True, "eps": 1e-3}, (x, t, p)),
        ("HingeEmbeddingLoss", {"margin": 0.5}, (x, s[:, None].expand(4, 3))),
        ("MultiMarginLoss", {"p": 2, "margin": 0.5, "weight": w3}, (x, lab)),
        ("MultiLabelSoftMarginLoss", {"weight": w3}, (x, t.round())),
        ("MultiLabelMarginLoss", {"size_average": False}, (x, mlm)),
    ]


MODULE_IDS = [c[0] for c in _module_cases(torch.Generator())]


@pytest.mark.parametrize("index", range(len(MODULE_IDS)), ids=lambda i: f"{i}-{MODULE_IDS[i]}")
def test_loss_modules(index, gen):
    """Constructor arguments, state_dict keys and values (weight / pos_weight are buffers), and the
    forward eagerly and under flow.jit."""
    name, kwargs, args = _module_cases(gen)[index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = getattr(torch.nn, name)(**kwargs)
        fm = getattr(flow.nn, name)(**{k: to_flow(v) if torch.is_tensor(v) else v for k, v in kwargs.items()})
        assert fm.reduction == tm.reduction
        tsd, fsd = tm.state_dict(), fm.state_dict()
        assert list(fsd) == list(tsd), name
        for k, v in tsd.items():
            assert_same(fsd[k], v, msg=f"{name} {k}")
        fm.load_state_dict(tsd)
        want = tm(*args)
        fargs = [to_flow(a) for a in args]
        assert_same(fm(*fargs), want, msg=f"{name} eager")
        assert_same(flow.jit(fm)(*fargs), want, msg=f"{name} jit")


def test_module_buffers_are_bound_at_run_time(gen):
    """A jitted BCEWithLogitsLoss sees new pos_weight values loaded after it was compiled."""
    x, t = make((5, 3), torch.float32, gen), unit((5, 3), torch.float32, gen)
    fm = flow.nn.BCEWithLogitsLoss(pos_weight=flow.ones(3))
    j = flow.jit(fm)
    j(to_flow(x), to_flow(t))
    pw = make((3,), torch.float32, gen, low=0.5, high=3.0)
    fm.load_state_dict({"pos_weight": pw})
    assert_same(j(to_flow(x), to_flow(t)), TF.binary_cross_entropy_with_logits(x, t, pos_weight=pw))


def test_module_constructor_errors():
    for tfn, ffn in ((lambda: torch.nn.TripletMarginLoss(margin=0), lambda: flow.nn.TripletMarginLoss(margin=0)),
                     (lambda: torch.nn.MultiMarginLoss(p=3), lambda: flow.nn.MultiMarginLoss(p=3)),
                     (lambda: torch.nn.MultiMarginLoss(weight=torch.ones(2, 2)),
                      lambda: flow.nn.MultiMarginLoss(weight=flow.ones(2, 2))),
                     (lambda: torch.nn.HuberLoss(delta="1"), lambda: flow.nn.HuberLoss(delta="1"))):
        same_error(tfn, ffn)


def test_module_names_match_torch():
    for name in flow.nn.loss.__all__:
        assert hasattr(torch.nn, name), name
    for name in F._loss_functional.__all__:
        assert hasattr(TF, name) and hasattr(F, name), name


# ---- autocast ---------------------------------------------------------------------------------------------


def _autocast_calls(m):
    """(name, fn(m, a, b, p, lab, s)) for each loss; a, b float32 logits, p probabilities."""
    F_ = m.nn.functional
    return [
        ("binary_cross_entropy", lambda a, b, p, lab, s: F_.binary_cross_entropy(p, p.flip(0))),
        ("binary_cross_entropy_with_logits", lambda a, b, p, lab, s: F_.binary_cross_entropy_with_logits(a, p)),
        ("kl_div", lambda a, b, p, lab, s: F_.kl_div(a, p, reduction="batchmean")),
        ("huber_loss", lambda a, b, p, lab, s: F_.huber_loss(a, b)),
        ("smooth_l1_loss", lambda a, b, p, lab, s: F_.smooth_l1_loss(a, b)),
        ("soft_margin_loss", lambda a, b, p, lab, s: F_.soft_margin_loss(a, b)),
        ("margin_ranking_loss", lambda a, b, p, lab, s: F_.margin_ranking_loss(a[:, 0], b[:, 0], s)),
        ("cosine_embedding_loss", lambda a, b, p, lab, s: F_.cosine_embedding_loss(a, b, s)),
        ("triplet_margin_loss", lambda a, b, p, lab, s: F_.triplet_margin_loss(a, b, p)),
        ("poisson_nll_loss", lambda a, b, p, lab, s: F_.poisson_nll_loss(a, p)),
        ("gaussian_nll_loss", lambda a, b, p, lab, s: F_.gaussian_nll_loss(a, b, p)),
        ("hinge_embedding_loss", lambda a, b, p, lab, s: F_.hinge_embedding_loss(a, b)),
        ("multi_margin_loss", lambda a, b, p, lab, s: F_.multi_margin_loss(a, lab)),
        ("multilabel_soft_margin_loss", lambda a, b, p, lab, s: F_.multilabel_soft_margin_loss(a, p)),
        ("multilabel_margin_loss", lambda a, b, p, lab, s: F_.multilabel_margin_loss(a, lab[:, None].expand(6, 4)
                                                                                       .contiguous())),
    ]


def _autocast_inputs(gen):
    a, b = make((6, 4), torch.float32, gen), make((6, 4), torch.float32, gen)
    p = unit((6, 4), torch.float32, gen)
    lab, s = torch.randint(0, 4, (6,), generator=gen), signs((6,), torch.float32, gen)
    return [x.bfloat16() if x.is_floating_point() else x for x in (a, b, p)] + [lab, s]


AUTOCAST_IDS = [c[0] for c in _autocast_calls(torch)]


@pytest.mark.parametrize("index", range(len(AUTOCAST_IDS)), ids=AUTOCAST_IDS)
def test_autocast_cpu_classes(index, gen):
    """Under autocast("cpu") bfloat16 inputs: the losses on torch's CPU float32 list compute in float32,
    the Python composites (gaussian_nll, multilabel_soft_margin) stay in bfloat16, eagerly and jitted."""
    name, fn = _autocast_calls(torch)[index]
    ffn = _autocast_calls(flow)[index][1]
    targs = _autocast_inputs(gen)
    fargs = [to_flow(x) for x in targs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want = fn(*targs)
        with flow.autocast("cpu", dtype=flow.bfloat16):
            eager = ffn(*fargs)
        jit = flow.jit(ffn, amp="bfloat16")(*fargs)
    for how, got in (("eager", eager), ("jit", jit)):
        assert_same(got, want, rtol=3.2e-2, atol=3e-2, msg=f"{name} {how}")


def _cuda_output_dtype(fn, *args, amp="float16"):
    """The output dtype of `fn` traced for CUDA under amp (NVRTC compiles it; nothing runs)."""
    from flow._jit import _flatten

    jf = flow.jit(fn, amp=amp, target="cuda")
    flat, spec = _flatten((args, {}))
    g = jf._trace_and_compile(flat, spec).graph
    return [g.value_dtype(o) for o in g.outputs][0]


# torch's CUDA lists: every native loss here is float32; the Python composites follow their ops
# (gaussian_nll_loss's log and pow, multilabel_soft_margin_loss's sum are float32 on CUDA).
@pytest.mark.parametrize("index", range(1, len(AUTOCAST_IDS)), ids=AUTOCAST_IDS[1:])
def test_autocast_cuda_classes(index, gen):
    name, ffn = _autocast_calls(flow)[index]
    fargs = [to_flow(x) for x in _autocast_inputs(gen)]
    fargs = [x.half() if x.dtype == flow.bfloat16 else x for x in fargs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _cuda_output_dtype(ffn, *fargs) == "float32", name


def test_binary_cross_entropy_is_refused_under_cuda_autocast():
    p = flow.rand(4, 3).half()
    with pytest.raises(RuntimeError, match="unsafe to autocast"):
        _cuda_output_dtype(lambda a: F.binary_cross_entropy(a, a), p)
    with pytest.raises(RuntimeError, match="unsafe to autocast"):
        _cuda_output_dtype(lambda a: flow.nn.BCELoss()(a, a), p)
    assert _cuda_output_dtype(lambda a: F.binary_cross_entropy(a, a), p, amp=None) == "float16"


def test_legacy_size_average_and_reduce_of_the_core_losses(gen):
    """mse_loss, l1_loss, nll_loss and cross_entropy honour the deprecated arguments as torch does
    (reduce=False: per element; size_average=False: a sum), with torch's warning."""
    x, y = make((4, 5), torch.float32, gen), make((4, 5), torch.float32, gen)
    target = torch.randint(0, 5, (4,), generator=gen)
    for size_average, reduce in ((None, False), (False, None), (True, True), (False, True)):
        kw = {"size_average": size_average, "reduce": reduce}
        for name, args in (("mse_loss", (x, y)), ("l1_loss", (x, y)), ("cross_entropy", (x, target)),
                           ("nll_loss", (torch.log_softmax(x, 1), target))):
            with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
                got = getattr(F, name)(*(to_flow(a) for a in args), **kw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = getattr(TF, name)(*args, **kw)
            assert_same(got, expected, msg=f"{name} {kw}")
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(to_flow(x), to_flow(y[:1]))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_triplet_margin_with_distance_loss(jit, gen):
    """Any distance function (a callable; pairwise_distance by default), swap, every reduction, the
    module, and torch's argument errors."""
    a, p, n = (make((5, 7), torch.float32, gen) for _ in range(3))

    def cosine(m):
        return lambda x, y: 1.0 - m.nn.functional.cosine_similarity(x, y)

    for kw in ({}, {"swap": True, "margin": 0.5}, {"reduction": "none"}, {"reduction": "sum", "swap": True}):
        for dist in (None, cosine):
            tkw = dict(kw, distance_function=None if dist is None else dist(torch))
            fkw = dict(kw, distance_function=None if dist is None else dist(flow))
            run = (lambda x, y, z, fkw=fkw: F.triplet_margin_with_distance_loss(x, y, z, **fkw))
            got = (flow.jit(run) if jit else run)(to_flow(a), to_flow(p), to_flow(n))
            assert_same(got, TF.triplet_margin_with_distance_loss(a, p, n, **tkw), atol=3e-6, msg=str(kw))
    module = flow.nn.TripletMarginWithDistanceLoss(distance_function=cosine(flow), margin=0.3)
    assert_same(module(to_flow(a), to_flow(p), to_flow(n)),
                torch.nn.TripletMarginWithDistanceLoss(distance_function=cosine(torch), margin=0.3)(a, p, n), atol=3e-6)
    for bad in ({"margin": 0}, {"reduction": "avg"}):
        with pytest.raises(ValueError):
            F.triplet_margin_with_distance_loss(to_flow(a), to_flow(p), to_flow(n), **bad)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_with_distance_loss(to_flow(a), to_flow(p), to_flow(n[0]))
