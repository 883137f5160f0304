"""Every eager op against torch: dtypes, broadcasting, non-contiguous inputs (transposed, sliced,
expanded), sizes 0, 1, odd and large, NaN/inf; result dtypes must equal torch's. Where torch
refuses an input (a dtype it does not implement an op for), flow must raise too."""
import pytest
import torch
import torch.nn.functional as TF

import flow
from conftest import ALL_DTYPES, FLOAT_DTYPES, FLOW_OF, TOL, assert_same, make, raises_like, to_flow, to_torch

# ---- layouts ------------------------------------------------------------------------------------

LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


def make_pair(shape, dtype, gen, layout="contiguous", **kw):
    """(torch tensor, flow tensor) holding equal values with the given logical shape; for the
    non-contiguous layouts the flow tensor is a view made with flow's own view ops."""
    shape = tuple(shape)
    if layout == "contiguous" or len(shape) == 0:
        t = make(shape, dtype, gen, **kw)
        return t, to_flow(t)
    if layout == "transposed":
        perm = list(range(len(shape)))[::-1]
        base = make(tuple(shape[p] for p in perm), dtype, gen, **kw)
        f = to_flow(base).permute(perm)
        return base.permute(perm), f
    if layout == "sliced":  # every other element of the last dim, starting at 1
        big = shape[:-1] + (2 * shape[-1] + 1,)
        base = make(big, dtype, gen, **kw)
        return base[..., 1::2], to_flow(base)[..., 1::2]
    if layout == "expanded":  # the first dim broadcast from size 1
        small = (1,) + shape[1:]
        base = make(small, dtype, gen, **kw)
        return base.expand(shape), to_flow(base).expand(shape)
    raise ValueError(layout)


def test_layout_helpers_are_non_contiguous(gen):
    for layout in LAYOUTS[1:]:
        t, f = make_pair((5, 7), torch.float32, gen, layout)
        assert not f.is_contiguous(), layout
        assert tuple(f.stride()) == tuple(t.stride()), layout
        assert_same(f, t, msg=layout)


def check(torch_fn, flow_fn, targs, fargs, msg, rtol=None, atol=None):
    """Runs the op in both; equal results, or an error in flow where torch errors."""
    if raises_like(lambda: torch_fn(*targs), lambda: flow_fn(*fargs)):
        return
    expected = torch_fn(*targs)
    actual = flow_fn(*fargs)
    assert_same(actual, expected, rtol=rtol, atol=atol, msg=msg)


# ---- unary --------------------------------------------------------------------------------------

UNARY = {
    "neg": (torch.neg, flow.neg),
    "abs": (torch.abs, flow.abs),
    "exp": (torch.exp, flow.exp),
    "log": (torch.log, flow.log),
    "sqrt": (torch.sqrt, flow.sqrt),
    "rsqrt": (torch.rsqrt, flow.rsqrt),
    "tanh": (torch.tanh, flow.tanh),
    "sigmoid": (torch.sigmoid, flow.sigmoid),
    "relu": (torch.relu, flow.relu),
    "silu": (TF.silu, flow.nn.functional.silu),
    "gelu": (TF.gelu, flow.nn.functional.gelu),
    "gelu_tanh": (lambda x: TF.gelu(x, approximate="tanh"), lambda x: flow.nn.functional.gelu(x, approximate="tanh")),
    "method_exp": (lambda x: x.exp(), lambda x: x.exp()),
    "operator_neg": (lambda x: -x, lambda x: -x),
    "operator_abs": (lambda x: abs(x), lambda x: abs(x)),
}

# float32 tolerances of ops computed with polynomial approximations (exp, log, tanh and what is
# built on them); relative error is a few ulp, so rtol is raised above the 1.3e-6 default.
F32_TRANSCENDENTAL = {"exp": 4e-6, "log": 4e-6, "tanh": 4e-6, "sigmoid": 4e-6, "silu": 4e-6, "gelu": 4e-6,
                      "gelu_tanh": 4e-6, "method_exp": 4e-6, "sqrt": 2e-6, "rsqrt": 4e-6}
F64_TRANSCENDENTAL = {k: 1e-12 for k in F32_TRANSCENDENTAL}

UNARY_SHAPES = [((), "contiguous"), ((1,), "contiguous"), ((0,), "contiguous"), ((7,), "contiguous"),
                ((1031,), "contiguous"), ((3, 0, 2), "contiguous"), ((33, 5), "contiguous"),
                ((33, 5), "transposed"), ((4, 9), "sliced"), ((6, 7), "expanded"), ((2, 3, 5), "transposed")]


def unary_tol(op, dtype):
    if dtype == torch.float32 and op in F32_TRANSCENDENTAL:
        return F32_TRANSCENDENTAL[op], 1e-5
    if dtype == torch.float64 and op in F64_TRANSCENDENTAL:
        return F64_TRANSCENDENTAL[op], 1e-12
    return None, None


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary(op, dtype, gen):
    tfn, ffn = UNARY[op]
    rtol, atol = unary_tol(op, dtype)
    for shape, layout in UNARY_SHAPES:
        special = dtype.is_floating_point
        # torch's vectorized float32/half gelu gives NaN at +inf (float64 gives inf): see test_gelu_posinf
        t, f = make_pair(shape, dtype, gen, layout, special=special, no_posinf=op == "gelu")
        check(tfn, ffn, [t], [f], f"{op} {dtype} {shape} {layout}", rtol, atol)


@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh"])
def test_unary_wide_range(op, gen):
    """Transcendentals over a wide range of magnitudes (not just N(0, 2))."""
    x64 = torch.cat([torch.linspace(-100, 100, 2001, dtype=torch.float64),
                     torch.logspace(-30, 30, 301, dtype=torch.float64),
                     -torch.logspace(-30, 30, 301, dtype=torch.float64),
                     torch.tensor([88.0, 88.7, 89.0, -87.0, -88.7, -103.0, -104.0, 709.0, -745.0, 710.0],
                                  dtype=torch.float64)])
    tfn, ffn = UNARY[op]
    for dtype in FLOAT_DTYPES:
        x = x64.to(dtype)
        if op == "gelu":
            x = x[x != float("inf")]  # see test_gelu_posinf
        rtol, atol = unary_tol(op, dtype)
        if dtype == torch.float32:
            atol = 1e-30  # tiny outputs must be right too, relatively
            if op in ("gelu", "gelu_tanh"):
                # x * (1 + erf(x / sqrt 2)) / 2 cancels for x << 0 in torch's formula as in ours: the
                # tail values (< 1e-6) carry no relative accuracy in either, so compare absolutely.
                atol = 1e-6
        check(tfn, ffn, [x], [to_flow(x)], f"{op} {dtype} wide", rtol, atol)


def test_gelu_posinf():
    """gelu(+inf) = +inf, as torch computes in float64 (torch's vectorized float32/half CPU kernels
    give NaN there, an artifact of their erf; flow is consistent across dtypes)."""
    for dtype in FLOAT_DTYPES:
        x = torch.tensor([float("inf"), 1.0, -float("inf")], dtype=dtype)
        r = to_torch(flow.nn.functional.gelu(to_flow(x)))
        e = TF.gelu(x.double()).to(dtype)
        assert_same(to_flow(r), e, msg=str(dtype))


def test_relu_negative_zero_and_nan():
    x = torch.tensor([-0.0, 0.0, float("nan"), -1.0, 2.0])
    r = flow.relu(to_flow(x))
    e = torch.relu(x)
    assert_same(r, e)
    assert torch.equal(torch.signbit(torch.from_numpy(r.numpy())), torch.signbit(e))


# ---- binary -------------------------------------------------------------------------------------

BINARY = {
    "add": (torch.add, flow.add),
    "sub": (torch.sub, flow.sub),
    "mul": (torch.mul, flow.mul),
    "div": (torch.div, flow.div),
    "pow": (torch.pow, flow.pow),
    "minimum": (torch.minimum, flow.minimum),
    "maximum": (torch.maximum, flow.maximum),
    "eq": (torch.eq, flow.eq),
    "ne": (torch.ne, flow.ne),
    "lt": (torch.lt, flow.lt),
    "le": (torch.le, flow.le),
    "gt": (torch.gt, flow.gt),
    "ge": (torch.ge, flow.ge),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2), lambda a, b: flow.add(a, b, alpha=2)),
    "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=3), lambda a, b: flow.sub(a, b, alpha=3)),
    "add_float_alpha": (lambda a, b: torch.add(a, b, alpha=0.5), lambda a, b: flow.add(a, b, alpha=0.5)),
    "operator_add": (lambda a, b: a + b, lambda a, b: a + b),
    "operator_truediv": (lambda a, b: a / b, lambda a, b: a / b),
    "operator_pow": (lambda a, b: a ** b, lambda a, b: a ** b),
    "operator_lt": (lambda a, b: a < b, lambda a, b: a < b),
}

BINARY_SHAPES = [  # (shape a, shape b, layout a, layout b)
    ((), (), "contiguous", "contiguous"),
    ((7,), (7,), "contiguous", "contiguous"),
    ((1,), (33,), "contiguous", "contiguous"),
    ((1031,), (), "contiguous", "contiguous"),
    ((), (5,), "contiguous", "contiguous"),
    ((0,), (0,), "contiguous", "contiguous"),
    ((0, 3), (1, 3), "contiguous", "contiguous"),
    ((3, 1), (1, 4), "contiguous", "contiguous"),
    ((2, 3, 4), (4,), "contiguous", "contiguous"),
    ((5, 6), (5, 6), "transposed", "contiguous"),
    ((5, 6), (6,), "sliced", "contiguous"),
    ((4, 5), (4, 5), "expanded", "transposed"),
    ((3, 4, 5), (1, 4, 1), "transposed", "contiguous"),
]


def binary_inputs(op, shape, dtype, gen, layout, which):
    if op in ("pow", "operator_pow"):
        if dtype.is_floating_point:
            # bases away from 0 with both signs; exponents small so results stay finite in halves
            return make_pair(shape, dtype, gen, layout, low=-3.0 if which == 0 else -2.0,
                             high=3.0 if which == 0 else 3.0)
        return make_pair(shape, dtype, gen, layout, low=-4 if which == 0 else 0, high=5 if which == 0 else 4)
    return make_pair(shape, dtype, gen, layout, special=dtype.is_floating_point)


def binary_tol(op, dtype):
    if op in ("pow", "operator_pow") and dtype == torch.float32:
        return 4e-6, 1e-5
    if op in ("pow", "operator_pow") and dtype == torch.float64:
        return 1e-12, 1e-12
    return None, None


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, dtype, gen):
    tfn, ffn = BINARY[op]
    if "alpha" in op and dtype in (torch.float16, torch.bfloat16):
        # torch's half add/sub with alpha rounds alpha * other to the half type first (a double
        # rounding); flow computes a + alpha * b in float32 and rounds once, as torch's float32
        # result cast to the half type does.
        tfn = (lambda f: lambda a, b: f(a.float(), b.float()).to(a.dtype))(tfn)
    rtol, atol = binary_tol(op, dtype)
    for sa, sb, la, lb in BINARY_SHAPES:
        ta, fa = binary_inputs(op, sa, dtype, gen, la, 0)
        tb, fb = binary_inputs(op, sb, dtype, gen, lb, 1)
        check(tfn, ffn, [ta, tb], [fa, fb], f"{op} {dtype} {sa}{la} {sb}{lb}", rtol, atol)


MIXED_PAIRS = [(torch.float32, torch.float16), (torch.float16, torch.bfloat16), (torch.bfloat16, torch.float64),
               (torch.int32, torch.float32), (torch.int64, torch.int32), (torch.bool, torch.int32),
               (torch.bool, torch.float16), (torch.int64, torch.bfloat16), (torch.float64, torch.int32),
               (torch.bool, torch.bool), (torch.int32, torch.bool)]


@pytest.mark.parametrize("pair", MIXED_PAIRS, ids=lambda p: f"{p[0]}-{p[1]}".replace("torch.", ""))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "minimum", "maximum", "eq", "lt", "ge"])
def test_binary_type_promotion(op, pair, gen):
    tfn, ffn = BINARY[op]
    da, db = pair
    ta, fa = binary_inputs(op, (3, 5), da, gen, "contiguous", 0)
    tb, fb = binary_inputs(op, (5,), db, gen, "contiguous", 1)
    rtol, atol = binary_tol(op, torch.result_type(ta, tb))
    check(tfn, ffn, [ta, tb], [fa, fb], f"{op} {da} {db}", rtol, atol)
    # 0-dim tensors take part in promotion only by category, as in torch
    ts, fs = binary_inputs(op, (), db, gen, "contiguous", 1)
    rtol, atol = binary_tol(op, torch.result_type(ta, ts))
    check(tfn, ffn, [ta, ts], [fa, fs], f"{op} {da} 0-dim {db}", rtol, atol)


SCALARS = [2, -3, 2.5, True, 0.0, float("inf")]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "pow", "eq", "lt", "ge"])
def test_binary_with_python_scalars(op, dtype, gen):
    """x op scalar and scalar op x (wrapped numbers: promotion by category only)."""
    import operator

    fn = getattr(operator, op)
    ta, fa = binary_inputs("pow" if op == "pow" else op, (4, 7), dtype, gen, "contiguous", 0)
    for s in SCALARS:
        if op == "pow" and (isinstance(s, float) and abs(s) == float("inf")):
            continue
        if op == "pow" and s == -3 and not dtype.is_floating_point:
            continue  # torch: "Integers to negative integer powers are not allowed." (see test_errors)
        if op == "pow" and s is True and dtype == torch.bool:
            continue  # torch: bool_tensor ** True works but torch.pow(bool_tensor, True) raises
        rtol, atol = binary_tol("pow", dtype) if op == "pow" else (None, None)
        check(lambda x: fn(x, s), lambda x: fn(x, s), [ta], [fa], f"x {op} {s!r} {dtype}", rtol, atol)
        if op == "pow" and not dtype.is_floating_point:
            continue  # 2 ** negative int tensor: int results torch computes specially
        tb = ta if op != "pow" else ta.abs() if dtype != torch.bool else ta
        fb = fa if op != "pow" else to_flow(tb)
        check(lambda x: fn(s, x), lambda x: fn(s, x), [tb], [fb], f"{s!r} {op} x {dtype}", rtol, atol)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_pow_by_special_exponents_is_torchs_named_op(dtype, gen):
    """torch computes x ** 0.5, -0.5, 2, -1, 3 and -2 of a floating tensor as sqrt, rsqrt, x * x,
    1 / x, x * x * x and 1 / (x * x) (sqrt(-inf) is NaN where pow gives inf; pow(-0, -0.5) is inf
    where rsqrt gives -inf): flow too, eagerly (one kernel each), jitted and as torch.pow, the jitted
    values the eager ones bit for bit (libm's pow is an ulp from the correctly rounded sqrt a compiled kernel may fold
    it to). Half types as on CUDA, in float32 rounded once: torch's CPU kernels run pow for float16
    and round bfloat16's x * x * x twice, so there the oracle is the float32 result rounded."""
    x = make((5, 37), dtype, gen, special=True)
    x[0, :6] = torch.tensor([float("-inf"), -0.0, 0.0, float("inf"), -1.0, 4.0])
    for e in (0.5, -0.5, 2, 2.0, -1, -1.0, 3, 3.0, -2, -2.0):
        want = x ** e if dtype in (torch.float32, torch.float64) else (x.float() ** e).to(dtype)
        tol = (None, None) if e in (0.5, -0.5) else (0, 0)  # torch's CPU sqrt is not correctly rounded
        eager = to_flow(x) ** e
        assert_same(eager, want, *tol, msg=f"x ** {e!r}")
        assert_same(flow.pow(to_flow(x), e), to_torch(eager), 0, 0, msg=f"pow(x, {e!r})")
        assert_same(flow.jit(lambda v: v ** e)(to_flow(x)), to_torch(eager), 0, 0, msg=f"jitted x ** {e!r}")
        fx = to_flow(x)
        flow.reset_launch_count()
        fx ** e
        assert flow.launch_count() == 1, f"x ** {e!r}: one kernel eagerly (the half types' casts inside it)"
    if dtype != torch.float16:
        with torch.autocast("cpu", dtype=torch.bfloat16), flow.autocast("cpu", dtype=flow.bfloat16):
            assert_same(to_flow(x) ** 0.5, x ** 0.5, msg="autocast")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_comparisons_round_python_numbers(dtype):
    """torch rounds a Python number to the half type before comparing (0.7 becomes the float16
    0.7001953125, so that value is not > 0.7): checked at the rounded value and its neighbours."""
    import operator

    for s in (0.7, 0.1, 1.3, 0.3333, 1e-3, 2.2, -5.1):
        h = torch.tensor(s).to(dtype).float()
        x = torch.stack([h, torch.nextafter(h, torch.tensor(1e4)), torch.nextafter(h, torch.tensor(-1e4))]).to(dtype)
        for op in ("gt", "ge", "lt", "le", "eq", "ne"):
            fn = getattr(operator, op)
            check(lambda t: fn(t, s), lambda t: fn(t, s), [x], [to_flow(x)], f"x {op} {s} {dtype}")
            check(lambda t: fn(s, t), lambda t: fn(s, t), [x], [to_flow(x)], f"{s} {op} x {dtype}")


# Binary ops of a half tensor and a number (or a 0-dim float32 tensor), bit for bit as torch's CPU
# kernels: add, sub (and alpha), pow, fmod and remainder round the number to the half type first,
# mul and div keep its full value, and `s / x` is torch's reciprocal(x) * s.
HALF_SCALAR_OPS = {
    "add": lambda x, s: x + s, "radd": lambda x, s: s + x, "sub": lambda x, s: x - s, "rsub": lambda x, s: s - x,
    "add alpha": lambda x, s: (torch if isinstance(x, torch.Tensor) else flow).add(x, s, alpha=2.5),
    "sub alpha": lambda x, s: (torch if isinstance(x, torch.Tensor) else flow).sub(x, x, alpha=0.3),
    "mul": lambda x, s: x * s, "div": lambda x, s: x / s, "rdiv": lambda x, s: s / x,
    "pow": lambda x, s: x.abs() ** s, "rpow": lambda x, s: s ** x,
    "fmod": lambda x, s: (torch if isinstance(x, torch.Tensor) else flow).fmod(x, s),
    "remainder": lambda x, s: x % s, "in-place add": lambda x, s: x.clone().add_(s),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(HALF_SCALAR_OPS))
def test_half_ops_with_numbers_round_as_torch(name, dtype, gen):
    fn = HALF_SCALAR_OPS[name]
    x = (torch.randn(4000, generator=gen) * 3).to(dtype)
    fx = to_flow(x)

    def same(got, want, msg):
        if name not in ("pow", "rpow"):
            assert_same(got, want, rtol=0, atol=0, msg=msg)
            return
        # libm's powf and torch's may differ by an ulp of float32, which crosses a half rounding
        # boundary now and then: at most 0.5% of elements one half ulp apart (the wrong rounding rule
        # disagreed on 12-35% of them).
        g, w = to_torch(got).float(), want.float()
        differ = ~((g == w) | (g.isnan() & w.isnan()))
        assert differ.float().mean() <= 0.005, f"{msg}: {int(differ.sum())} of {g.numel()} differ"
        assert_same(got, want, msg=msg)

    for s in (0.7, 0.1, 1.3, 0.3333, 2.2):
        want = fn(x, s)
        same(fn(fx, s), want, f"{name} {s} {dtype}")
        same(flow.jit(lambda t: fn(t, s))(fx), want, f"{name} {s} {dtype} jit")
        if name not in ("rdiv", "rpow", "sub alpha"):  # a 0-dim float32 tensor operand, as torch
            same(fn(fx, flow.tensor(s)), fn(x, torch.tensor(s)), f"{name} 0-dim {s}")


def test_number_over_a_tensor_is_the_reciprocal_times_the_number(gen):
    """torch's `s / x` is x.reciprocal() * s (rounded twice), in float32 too."""
    x = torch.randn(4000, generator=gen)
    for s in (2.7, 1, -0.3):
        assert_same(s / to_flow(x), s / x, rtol=0, atol=0, msg=f"{s} / x")
    xi = torch.randint(1, 9, (50,), generator=gen)
    assert_same(3 / to_flow(xi), 3 / xi, rtol=0, atol=0, msg="3 / int tensor")


# ---- where, clamp, cast -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_where(dtype, gen):
    shapes = [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (4,)), ((0, 2), (2,), ()), ((7,), (), ())]
    for sc, sa, sb in shapes:
        c = make(sc, torch.bool, gen)
        ta, fa = make_pair(sa, dtype, gen, special=dtype.is_floating_point)
        tb, fb = make_pair(sb, dtype, gen)
        check(torch.where, flow.where, [c, ta, tb], [to_flow(c), fa, fb], f"where {dtype} {sc} {sa} {sb}")
    c = make((5, 6), torch.bool, gen)
    ta, fa = make_pair((6, 5), dtype, gen, "transposed")
    for other in [0, 1.5, True]:
        check(torch.where, flow.where, [c, ta, other], [to_flow(c), fa, other], f"where {dtype} scalar {other}")
        check(torch.where, flow.where, [c, other, ta], [to_flow(c), other, fa], f"where {dtype} scalar {other}")
    # mixed tensor dtypes promote
    tb, fb = make_pair((5, 6), torch.float16, gen)
    check(torch.where, flow.where, [c, ta, tb], [to_flow(c), fa, fb], f"where {dtype} float16")
    check(lambda c, a, b: a.where(c, b), lambda c, a, b: a.where(c, b), [c, ta, tb], [to_flow(c), fa, fb],
          "Tensor.where")


CLAMP_BOUNDS = [(-1, 1), (0.5, None), (None, 2), (-1.5, 2.5), (3, -3), (True, None)]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_clamp(dtype, gen):
    for lo, hi in CLAMP_BOUNDS:
        for shape, layout in [((33,), "contiguous"), ((5, 7), "transposed"), ((0,), "contiguous")]:
            t, f = make_pair(shape, dtype, gen, layout, special=dtype.is_floating_point)
            check(lambda x: torch.clamp(x, lo, hi), lambda x: flow.clamp(x, lo, hi), [t], [f],
                  f"clamp {dtype} {lo} {hi} {shape}")
            check(lambda x: x.clamp(min=lo, max=hi), lambda x: x.clamp(min=lo, max=hi), [t], [f],
                  f"Tensor.clamp {dtype} {lo} {hi}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16], ids=str)
def test_clamp_tensor_bounds(dtype, gen):
    t, f = make_pair((4, 5), dtype, gen, special=dtype.is_floating_point)
    lo, flo = make_pair((5,), dtype, gen)
    hi = lo + 2
    check(lambda x, a, b: torch.clamp(x, a, b), lambda x, a, b: flow.clamp(x, a, b), [t, lo, hi],
          [f, flo, to_flow(hi)], "clamp tensors")
    check(lambda x, a: torch.clamp(x, min=a), lambda x, a: flow.clamp(x, min=a), [t, lo], [f, flo], "clamp min")


@pytest.mark.parametrize("src", ALL_DTYPES, ids=str)
def test_cast(src, gen):
    # values representable in every target: moderate, with fractions for floats
    if src.is_floating_point:
        base = (torch.rand((7, 9), generator=gen, dtype=torch.float64) * 200 - 100).to(src)
    else:
        base = make((7, 9), src, gen, low=-100, high=100)
    for dst in ALL_DTYPES:
        for layout in ["contiguous", "transposed"]:
            t = base if layout == "contiguous" else base.t()
            f = to_flow(base) if layout == "contiguous" else to_flow(base).t()
            assert_same(f.to(FLOW_OF[dst]), t.to(dst), msg=f"{src}->{dst} {layout}")
    if src.is_floating_point:  # NaN/inf: to other floats and to bool only (to ints is undefined)
        s = make((40,), src, gen, special=True)
        for dst in [d for d in ALL_DTYPES if d.is_floating_point or d == torch.bool]:
            assert_same(to_flow(s).to(FLOW_OF[dst]), s.to(dst), msg=f"special {src}->{dst}")


def test_cast_method_spellings(gen):
    t = make((3, 4), torch.float32, gen)
    f = to_flow(t)
    for name in ["float", "half", "double", "int", "long", "bool", "bfloat16"]:
        assert_same(getattr(f, name)(), getattr(t, name)(), msg=name)
    assert f.to(flow.float32) is f
    assert_same(f.to(torch.float16), t.half(), msg="to(torch dtype)")
    assert_same(f.to("cpu", flow.float64), t.double(), msg="to(device, dtype)")


# ---- reductions ---------------------------------------------------------------------------------

REDUCTIONS = {
    "sum": (torch.sum, flow.sum),
    "mean": (torch.mean, flow.mean),
    "amax": (torch.amax, flow.amax),
    "amin": (torch.amin, flow.amin),
}

DIM_CONFIGS = [None, 0, -1, 1, (0, 2), (2, 0), (-1, -2), (0, 1, 2)]


def reduce_call(fn, dim, keepdim, **kw):
    if dim is None:
        return lambda x: fn(x, **kw) if not keepdim else fn(x, dim=tuple(range(x.dim())), keepdim=True, **kw)
    return lambda x: fn(x, dim, keepdim, **kw)


def reduction_tol(op, dtype, n_reduced, max_abs, sum_abs=0.0):
    """Accumulation order differs from torch's (torch sums in cascades, flow sequentially per tile):
    allow a random-walk error of the accumulator, or for long sums eps * sum(|x|) (still far below
    one dropped or doubled element of typical size)."""
    if not dtype.is_floating_point or op in ("amax", "amin"):
        return None, None
    acc_eps = {torch.float64: 2.2e-16}.get(dtype, 1.2e-7)
    rtol, atol = TOL[dtype]
    atol = atol + max(16 * acc_eps * max(n_reduced, 1) ** 0.5 * max_abs, acc_eps * sum_abs)
    return rtol, atol


def reduction_tol_for(op, t, dim):
    """reduction_tol for reducing torch tensor `t` over `dim` (None: every dim)."""
    n = t.numel() if dim is None else 1
    if dim is not None:
        for d in (dim if isinstance(dim, tuple) else (dim,)):
            n *= t.shape[d]
    max_abs = float(t.double().abs().max()) if t.numel() else 0.0
    return reduction_tol(op, t.dtype, n, max_abs)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_reduction(op, dtype, gen):
    tfn, ffn = REDUCTIONS[op]
    for shape, layout in [((4, 5, 6), "contiguous"), ((4, 5, 6), "transposed"), ((3, 7, 33), "sliced"),
                          ((4, 5, 6), "expanded")]:
        t, f = make_pair(shape, dtype, gen, layout)
        for dim in DIM_CONFIGS:
            for keepdim in (False, True):
                rtol, atol = reduction_tol_for(op, t, dim)
                check(reduce_call(tfn, dim, keepdim), reduce_call(ffn, dim, keepdim), [t], [f],
                      f"{op} {dtype} {shape} {layout} dim={dim} keepdim={keepdim}", rtol, atol)


@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_reduction_special_values_and_sizes(op, gen):
    tfn, ffn = REDUCTIONS[op]
    for dtype in FLOAT_DTYPES:
        t = make((6, 33), dtype, gen, special=True)
        for dim in (None, 0, 1):
            check(reduce_call(tfn, dim, False), reduce_call(ffn, dim, False), [t], [to_flow(t)],
                  f"{op} special {dtype} dim={dim}", *reduction_tol(op, dtype, 33, 10.0))
        for shape, dim in [((0,), None), ((0, 3), 0), ((0, 3), 1), ((3, 0), 1), ((3, 0), 0), ((1,), 0),
                           ((1, 1), (0, 1)), ((), None), ((), 0)]:
            t = make(shape, dtype, gen)
            check(reduce_call(tfn, dim, False), reduce_call(ffn, dim, False), [t], [to_flow(t)],
                  f"{op} {dtype} {shape} dim={dim}")


@pytest.mark.parametrize("src,dst", [(torch.int32, torch.float32), (torch.float16, torch.float32),
                                     (torch.int64, torch.float64), (torch.bool, torch.int32),
                                     (torch.float32, torch.float64), (torch.bfloat16, torch.float32),
                                     (torch.float32, torch.float16)], ids=str)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_reduction_dtype_argument(op, src, dst, gen):
    tfn, ffn = REDUCTIONS[op]
    t = make((5, 17), src, gen)
    rtol, atol = reduction_tol(op, dst, 85, 10.0)
    if dst in (torch.float16, torch.bfloat16):
        # torch's CPU reduction into a half dtype keeps partial sums in that dtype (measured: 80
        # ulps off the float64 result when the sum cancels), so against torch allow a few
        # roundings of sum(|x|) in the half dtype; flow itself is held to one rounding of the
        # exact result below.
        unit = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[dst]
        sum_abs = float(t.double().abs().sum()) / (t.numel() if op == "mean" else 1)
        atol += 4 * unit * sum_abs
    for dim in (None, 1):
        def flow_fn(x):
            return ffn(x, dim=dim, dtype=FLOW_OF[dst]) if dim is not None else ffn(x, dtype=FLOW_OF[dst])
        check(lambda x: tfn(x, dim=dim, dtype=dst) if dim is not None else tfn(x, dtype=dst),
              flow_fn, [t], [to_flow(t)], f"{op} {src} dtype={dst} dim={dim}", rtol, atol)
        if dst in (torch.float16, torch.bfloat16):
            x64 = t.to(dst).double()
            exact = (tfn(x64, dim=dim) if dim is not None else tfn(x64)).to(dst)
            assert_same(flow_fn(to_flow(t)), exact, msg=f"{op} {src} dtype={dst} dim={dim} vs float64")


def test_reduction_methods(gen):
    t = make((4, 6), torch.float32, gen)
    f = to_flow(t)
    assert_same(f.sum(), t.sum())
    assert_same(f.sum(1, keepdim=True), t.sum(1, keepdim=True))
    assert_same(f.mean(0), t.mean(0))
    assert_same(f.amax(-1), t.amax(-1))
    assert_same(f.amin((0, 1)), t.amin((0, 1)))
    assert_same(f.sum(dim=[0]), t.sum(dim=[0]))


# ---- softmax ------------------------------------------------------------------------------------

SOFTMAX = {"softmax": (torch.softmax, flow.softmax), "log_softmax": (torch.log_softmax, flow.log_softmax)}


def softmax_tol(op, dtype):
    if dtype == torch.float32:
        return 1e-5, 1e-6
    if dtype == torch.float64:
        return 1e-12, 1e-12
    if op == "log_softmax" and dtype in (torch.float16, torch.bfloat16):
        # torch's half log_softmax rounds the log-sum-exp (|.| up to ~8) to the half dtype before
        # the final subtraction, so small outputs carry an absolute error of that rounding.
        return TOL[dtype][0], {torch.float16: 4e-3, torch.bfloat16: 3.2e-2}[dtype]
    return None, None


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(SOFTMAX))
def test_softmax(op, dtype, gen):
    tfn, ffn = SOFTMAX[op]
    cases = [((7,), 0, "contiguous"), ((4, 33), -1, "contiguous"), ((4, 33), 0, "contiguous"),
             ((3, 1031), 1, "contiguous"), ((2, 3, 5), 1, "contiguous"), ((5, 1), 1, "contiguous"),
             ((0, 4), 1, "contiguous"), ((4, 0), 1, "contiguous"), ((6, 9), -1, "transposed"),
             ((5, 8), 1, "sliced"), ((3, 8), 1, "expanded"), ((), 0, "contiguous")]
    rtol, atol = softmax_tol(op, dtype)
    for shape, dim, layout in cases:
        if not dtype.is_floating_point and 0 in shape:
            continue  # torch skips its dtype check for empty inputs; flow refuses ints regardless
        t, f = make_pair(shape, dtype, gen, layout)
        check(lambda x: tfn(x, dim), lambda x: ffn(x, dim), [t], [f], f"{op} {dtype} {shape} dim={dim} {layout}",
              rtol, atol)


@pytest.mark.parametrize("op", list(SOFTMAX))
def test_softmax_special_values(op, gen):
    tfn, ffn = SOFTMAX[op]
    rows = torch.tensor([[0.0, 1.0, 2.0, 3.0],
                         [-float("inf"), 1.0, 2.0, -float("inf")],
                         [-float("inf")] * 4,
                         [float("inf"), 1.0, 0.0, -1.0],
                         [float("nan"), 1.0, 2.0, 3.0],
                         [1e4, -1e4, 0.0, 1e4],
                         [-1e30, -1e30, -1e30, -1e30]])
    for dtype in FLOAT_DTYPES:
        t = rows.to(dtype)
        rtol, atol = softmax_tol(op, dtype)
        check(lambda x: tfn(x, -1), lambda x: ffn(x, -1), [t], [to_flow(t)], f"{op} special {dtype}", rtol, atol)


@pytest.mark.parametrize("op", list(SOFTMAX))
def test_softmax_dtype_argument_and_functional(op, gen):
    tfn, ffn = SOFTMAX[op]
    for src, dst in [(torch.float16, torch.float32), (torch.float32, torch.float64), (torch.int64, torch.float32),
                     (torch.bfloat16, torch.float32), (torch.float32, torch.float16)]:
        t = make((3, 10), src, gen)
        check(lambda x: tfn(x, 1, dtype=dst), lambda x: ffn(x, 1, dtype=FLOW_OF[dst]), [t], [to_flow(t)],
              f"{op} {src} dtype={dst}", *softmax_tol(op, dst))
    t = make((3, 10), torch.float32, gen)
    tf, ff = getattr(TF, op), getattr(flow.nn.functional, op)
    check(lambda x: tf(x, dim=1), lambda x: ff(x, dim=1), [t], [to_flow(t)], f"F.{op}", 1e-5, 1e-6)
    check(lambda x: getattr(x, op)(0), lambda x: getattr(x, op)(0), [t], [to_flow(t)], f"Tensor.{op}", 1e-5, 1e-6)


# ---- large sizes --------------------------------------------------------------------------------

LARGE = 2**20 + 3


def test_large_elementwise(gen):
    a = make((LARGE,), torch.float32, gen, special=True)
    b = make((LARGE,), torch.float32, gen)
    fa, fb = to_flow(a), to_flow(b)
    assert_same(fa + fb, a + b)
    assert_same(flow.exp(fa), torch.exp(a), rtol=4e-6)
    assert_same(flow.sigmoid(fa) * fb, torch.sigmoid(a) * b, rtol=4e-6)
    h = a.half()
    assert_same(flow.tanh(to_flow(h)), torch.tanh(h))
    # non-contiguous and large: every other element
    big = make((2 * LARGE,), torch.float32, gen)
    assert_same(flow.relu(to_flow(big)[::2]), torch.relu(big[::2]))


def test_large_reductions(gen):
    x = make((LARGE,), torch.float32, gen)
    f = to_flow(x)
    max_abs, sum_abs = float(x.abs().max()), float(x.double().abs().sum())
    for op in ("sum", "mean"):
        rtol, atol = reduction_tol(op, torch.float32, LARGE, max_abs, sum_abs / (LARGE if op == "mean" else 1))
        assert_same(getattr(flow, op)(f), getattr(torch, op)(x), rtol=rtol, atol=atol, msg=op)
    assert_same(flow.amax(f), torch.amax(x))
    assert_same(flow.amin(f), torch.amin(x))
    m = make((1031, 1031), torch.float32, gen)
    fm = to_flow(m)
    for dim in (0, 1):
        rtol, atol = reduction_tol("sum", torch.float32, 1031, float(m.abs().max()))
        assert_same(flow.sum(fm, dim), torch.sum(m, dim), rtol=rtol, atol=atol, msg=f"sum dim {dim}")
        assert_same(flow.softmax(fm, dim), torch.softmax(m, dim), rtol=1e-5, atol=1e-6, msg=f"softmax dim {dim}")
    i = make((LARGE,), torch.int32, gen)
    assert_same(flow.sum(to_flow(i)), torch.sum(i))


@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not flow.cuda.is_available(),
                                                                    reason="no CUDA device")])])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_zero_dim_operands_of_another_dtype(dtype, device):
    """torch's pow and comparisons round a 0-dim float64 operand to the half dtype first (bfloat16
    1.003 is 1.0, so a negative base ** it is finite); its mul and div keep the full value. flow
    follows both, bit for bit."""
    x = torch.tensor([-1.5, 2.0, -0.75, 1.0, 1.0009765625, 1.0078125, 3.0], dtype=dtype)
    e = torch.tensor(1.0009 if dtype == torch.float16 else 1.003, dtype=torch.float64)
    fx, fe = flow.as_tensor(x).to(device), flow.as_tensor(e).to(device)
    for name, fn in [("pow", lambda a, b: a ** b), ("rpow", lambda a, b: b ** a), ("mul", lambda a, b: a * b),
                     ("div", lambda a, b: a / b), ("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b),
                     ("eq", lambda a, b: a == b), ("lt", lambda a, b: a < b)]:
        expected = fn(x, e)
        got = to_torch(fn(fx, fe).cpu())
        assert got.dtype == expected.dtype and torch.equal(got.nan_to_num(), expected.nan_to_num()) and \
            torch.equal(got.isnan(), expected.isnan()), f"{name}: {got} != {expected}"
