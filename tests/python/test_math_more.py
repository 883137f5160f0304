"""flow._math_more and flow.linalg against PyTorch: dtype info and switches, the elementwise formulas
(sgn ... sinc), NaN-aware reductions and order statistics (median, kthvalue, quantile, mode), scans
(cummax, cummin, logcumsumexp), joins and reshapes (diff ... cumulative_trapezoid), distances and
the linalg norms and products: over dtypes, edge values (NaN, infinities, signed zeros, ties), edge
sizes (0, 1, odd), non-contiguous inputs, eagerly and under flow.jit, on the CPU and (marker `gpu`)
on a CUDA device, and the errors torch raises for bad arguments.

Note: torch leaves the index of tied values unspecified for median, nanmedian and kthvalue (and for
mode on lines of 16 or more), so those indices are checked by gathering them (they must point at
the returned value); on lines without ties they are compared with torch's.
"""
import math
import os
import subprocess
import sys

import pytest
import torch

import flow
from conftest import ALL_DTYPES, FLOAT_DTYPES, FLOW_OF, assert_same, make, raises_like, to_flow

# torch.cross(dim=None) warns that the default dim is deprecated, and flow warns as torch does
pytestmark = pytest.mark.filterwarnings("ignore:Using (torch|flow).cross without specifying the dim")

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]


def pair(shape, dtype, gen, device="cpu", layout="contiguous", ties=False, **kw):
    """(torch tensor, flow tensor on device) with equal values; `transposed` makes both
    non-contiguous; ties rounds floats to halves (many equal values)."""
    shape = tuple(shape)
    src = shape[::-1] if layout == "transposed" else shape
    t = make(src, dtype, gen, **kw)
    if ties and dtype.is_floating_point:
        t = torch.where(torch.isfinite(t), (t * 2).round() / 2, t)
    f = to_flow(t).to(device)
    if layout == "transposed":
        perm = list(range(len(shape)))[::-1]
        return t.permute(perm), f.permute(perm)
    return t, f


def devtypes(device):
    if device == "cuda":
        return [torch.float32, torch.float16, torch.bfloat16, torch.int64]
    return ALL_DTYPES


def compare(got, want, msg, rtol=None, atol=None):
    """flow result(s) `got` equal torch result(s) `want` (tensors, sequences, numbers)."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, flow.Tensor), f"{msg}: got {type(got).__name__}"
        assert_same(got.cpu(), want, rtol=rtol, atol=atol, msg=msg)
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), f"{msg}: {got!r} vs {want!r}"
        for k, (g, w) in enumerate(zip(got, want)):
            compare(g, w, f"{msg}[{k}]", rtol, atol)
    else:
        assert got == want, f"{msg}: {got!r} != {want!r}"


def check(fn, targs, fargs, msg, rtol=None, atol=None, jit=True):
    """fn(torch, ...) against fn(flow, ...), eagerly and (jit) under flow.jit; torch's errors must be
    raised by flow too. Returns False when torch raised."""
    if raises_like(lambda: fn(torch, *targs), lambda: fn(flow, *fargs)):
        return False
    want = fn(torch, *targs)
    compare(fn(flow, *fargs), want, msg + " eager", rtol, atol)
    if jit:
        compare(flow.jit(lambda *a: fn(flow, *a))(*fargs), want, msg + " jit", rtol, atol)
    return True


def must_raise(torch_fn, flow_fn):
    """torch raises for these arguments, and flow raises a compatible error."""
    assert raises_like(torch_fn, flow_fn), "torch did not raise"


# ---- dtype information and switches ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [None], ids=str)
def test_finfo_matches_torch(dtype):
    want = torch.finfo(dtype) if dtype is not None else torch.finfo()
    got = flow.finfo(FLOW_OF[dtype]) if dtype is not None else flow.finfo()
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        g, w = getattr(got, attr), getattr(want, attr)
        assert g == w, f"{dtype} {attr}: {g} vs {w}"
    assert repr(got) == repr(want)
    if dtype is not None:  # the limits are the dtype's: max is representable, 2 * max overflows
        m = flow.tensor([got.max, got.tiny, 1 + got.eps], dtype=FLOW_OF[dtype])
        assert m.tolist() == [got.max, got.tiny, 1 + got.eps]
        assert math.isinf((flow.tensor([got.max], dtype=FLOW_OF[dtype]) * 2).item())


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_iinfo_matches_torch(dtype):
    want, got = torch.iinfo(dtype), flow.iinfo(FLOW_OF[dtype])
    assert (got.bits, got.min, got.max, got.dtype) == (want.bits, want.min, want.max, want.dtype)
    assert repr(got) == repr(want)


def test_dtype_info_errors():
    for d in (torch.bool, torch.float32):
        must_raise(lambda: torch.iinfo(d), lambda: flow.iinfo(FLOW_OF[d]))
    for d in (torch.int32, torch.int64, torch.bool):
        must_raise(lambda: torch.finfo(d), lambda: flow.finfo(FLOW_OF[d]))


def test_default_dtype():
    assert flow.get_default_dtype() is flow.float32
    assert flow.get_default_dtype() is FLOW_OF[torch.get_default_dtype()]
    flow.set_default_dtype(flow.float32)  # accepted: it is flow's default
    flow.set_default_dtype(torch.float32)
    for d in (flow.float64, flow.float16, flow.bfloat16):
        with pytest.raises(NotImplementedError, match="fixed at float32"):
            flow.set_default_dtype(d)
    must_raise(lambda: torch.set_default_dtype(torch.int64), lambda: flow.set_default_dtype(flow.int64))
    assert flow.get_default_dtype() is flow.float32


def test_num_threads(monkeypatch):
    import flow._math_more as mm

    assert flow.get_num_threads() == mm._threads_from_env() >= 1
    monkeypatch.setenv("FLOW_NUM_THREADS", "3")
    assert mm._threads_from_env() == 3
    monkeypatch.setenv("FLOW_NUM_THREADS", "5000")
    assert mm._threads_from_env() == 1024
    for bad in ("0", "x", "2.5", ""):
        monkeypatch.setenv("FLOW_NUM_THREADS", bad)
        assert mm._threads_from_env() == min(os.cpu_count(), 1024)
    monkeypatch.delenv("FLOW_NUM_THREADS")
    assert mm._threads_from_env() == min(os.cpu_count(), 1024)
    flow.set_num_threads(flow.get_num_threads())  # the count in use: accepted
    with pytest.raises(NotImplementedError, match="FLOW_NUM_THREADS"):
        flow.set_num_threads(flow.get_num_threads() + 1)
    with pytest.raises(RuntimeError):
        flow.set_num_threads(0)
    with pytest.raises(TypeError):
        flow.set_num_threads(2.0)


def test_num_threads_reads_the_environment_at_start():
    env = dict(os.environ, FLOW_NUM_THREADS="3", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", "import flow; print(flow.get_num_threads())"], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3"


def test_predicates(gen):
    t, f = pair((2, 3), torch.float32, gen)
    assert flow.is_complex(f) is torch.is_complex(t) is False
    assert f.is_complex() is False
    assert flow.is_same_size(f, f.t().t()) is True and flow.is_same_size(f, f.t()) is False
    assert f.is_same_size(f * 2)
    for vals in ([0.0], [2.5], [-0.0], [float("nan")], [True], [False], [0], [7]):
        tv = torch.tensor(vals)
        assert flow.is_nonzero(to_flow(tv)) is torch.is_nonzero(tv), vals
        assert to_flow(tv).reshape(()).is_nonzero() is torch.is_nonzero(tv.reshape(())), vals
    for shape in ((0,), (2,), (1, 2)):
        must_raise(lambda: torch.is_nonzero(torch.ones(shape)), lambda: flow.is_nonzero(flow.ones(shape)))
    with pytest.raises(flow.TraceError):
        flow.jit(lambda x: x * flow.is_nonzero(x))(flow.ones(1))


def test_result_type_and_can_cast(gen):
    operands = []  # (torch operand, flow operand)
    for d in ALL_DTYPES:
        operands.append((make((2,), d, gen), None))
        operands.append((make((), d, gen), None))
    operands = [(t, to_flow(t)) for t, _ in operands] + [(v, v) for v in (True, 3, -2.5)]
    for ta, fa in operands:
        for tb, fb in operands:
            want = torch.result_type(ta, tb)
            got = flow.result_type(fa, fb)
            assert got is FLOW_OF[want], f"result_type({ta!r}, {tb!r}): {got} vs {want}"
            if isinstance(fa, flow.Tensor) and isinstance(fb, flow.Tensor):  # what the ops themselves do
                assert (fa + fb).dtype is got if got is not flow.bool else (fa | fb).dtype is got
    with pytest.raises(TypeError):
        flow.result_type(flow.ones(1), "x")
    for a in ALL_DTYPES:
        for b in ALL_DTYPES:
            assert flow.can_cast(FLOW_OF[a], FLOW_OF[b]) is torch.can_cast(a, b), (a, b)
    must_raise(lambda: torch.can_cast(torch.ones(1), torch.float32), lambda: flow.can_cast(flow.ones(1), flow.float32))


def test_constants():
    assert flow.inf == torch.inf == math.inf and flow.pi == torch.pi and flow.e == torch.e
    assert math.isnan(flow.nan) and flow.newaxis is torch.newaxis is None
    x = flow.ones(3, 4)
    assert x[:, flow.newaxis].shape == (3, 1, 4)
    assert flow.full((2,), flow.inf).tolist() == [math.inf, math.inf]


# ---- elementwise --------------------------------------------------------------------------------

SHAPES = [((), "contiguous"), ((0,), "contiguous"), ((7,), "contiguous"), ((33, 5), "transposed")]

ELEMENTWISE = {
    "sgn": lambda L, x, y: L.sgn(x),
    "signbit": lambda L, x, y: L.signbit(x),
    "copysign": lambda L, x, y: L.copysign(x, y),
    "copysign scalar": lambda L, x, y: L.copysign(x, -2.0) + L.copysign(x, 0.0),
    "copysign mixed": lambda L, x, y: L.copysign(x, y.float()) + L.copysign(y.int(), x),
    "heaviside": lambda L, x, y: L.heaviside(x, y),
    "logit": lambda L, x, y: L.logit(x),
    "logit eps": lambda L, x, y: L.logit(x, eps=0.2),
    "logit eps 0": lambda L, x, y: x.logit(0.0),
    "logit eps<0": lambda L, x, y: L.logit(x, -1.0),
    "xlogy": lambda L, x, y: L.xlogy(x, y),
    "xlogy scalar other": lambda L, x, y: L.xlogy(x, 3) + x.xlogy(0.5),
    "xlogy scalar self": lambda L, x, y: L.xlogy(2, y) + L.xlogy(0.0, y),
    "sinc": lambda L, x, y: L.sinc(x),
}
UNIT = ("logit",)  # ops whose interesting domain is (0, 1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise_matches_torch(name, device, gen):
    fn = ELEMENTWISE[name]
    for dtype in devtypes(device):
        floating = dtype.is_floating_point
        for k, (shape, layout) in enumerate(SHAPES):
            kw = {"special": floating}
            if name.startswith(UNIT) and floating:
                kw.update(low=-0.1, high=1.1)
            t, f = pair(shape, dtype, gen, device, layout, **kw)
            u, g = pair(shape, dtype, gen, device, layout, special=floating)
            rtol, atol = (2e-6, 1e-6) if dtype == torch.float32 else (None, None)
            check(fn, [t, u], [f, g], f"{name} {dtype} {shape} {device}", rtol, atol,
                  jit=k == len(SHAPES) - 1 and dtype in (torch.float32, torch.float16, torch.int64))
    t, f = pair((3, 4), torch.float32, gen, device, special=True)
    u, g = pair((4,), torch.float32, gen, device, special=True)  # broadcasting
    check(fn, [t, u], [f, g], f"{name} broadcast {device}", 2e-6, 1e-6, jit=False)


def test_signbit_of_zeros_and_infinities():
    vals = [0.0, -0.0, math.inf, -math.inf, 1e-45, -1e-45, 3.0, -3.0]
    for dtype in FLOAT_DTYPES:
        t = torch.tensor(vals, dtype=dtype)
        assert_same(flow.signbit(to_flow(t)), torch.signbit(t), msg=str(dtype))
        assert_same(flow.copysign(to_flow(t).flip(0), to_flow(t)), torch.copysign(t.flip(0), t), msg=str(dtype))


@pytest.mark.parametrize("name", ["sgn", "copysign", "heaviside", "logit", "xlogy", "sinc"])
def test_elementwise_in_place(name, gen):
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        kw = {"low": 0.05, "high": 0.95} if name == "logit" and dtype.is_floating_point else {}
        t, f = pair((4, 5), dtype, gen, **kw)
        u, g = pair((5,), dtype, gen)
        args = {"sgn": [], "copysign": [1], "heaviside": [1], "logit": [], "xlogy": [1], "sinc": []}[name]

        def fn(L, x, y):
            x = x.clone()
            r = getattr(x, name + "_")(*[y for _ in args])
            assert r is x
            return x

        rtol, atol = (2e-6, 1e-6) if dtype == torch.float32 else (None, None)
        check(fn, [t, u], [f, g], f"{name}_ {dtype}", rtol, atol, jit=False)


# ---- reductions and statistics -----------------------------------------------------------------

REDUCTIONS = {
    "nansum": lambda L, x: L.nansum(x),
    "nansum dim": lambda L, x: L.nansum(x, 1, keepdim=True),
    "nansum dims dtype": lambda L, x: x.nansum((0, 1), dtype=L.float64),
    "nanmean": lambda L, x: L.nanmean(x),
    "nanmean dim": lambda L, x: x.nanmean(dim=0),
    "nanmean keepdim": lambda L, x: L.nanmean(x, (-1,), keepdim=True),
    "aminmax": lambda L, x: L.aminmax(x),
    "aminmax dim": lambda L, x: L.aminmax(x, dim=1),
    "aminmax keepdim": lambda L, x: x.aminmax(dim=0, keepdim=True),
    "aminmax all keepdim": lambda L, x: L.aminmax(x, keepdim=True),
    "median": lambda L, x: L.median(x),
    "nanmedian": lambda L, x: x.nanmedian(),
    "quantile": lambda L, x: L.quantile(x, 0.3),
    "nanquantile": lambda L, x: L.nanquantile(x, 0.7, dim=1),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions_match_torch(name, device, gen):
    fn = REDUCTIONS[name]
    for dtype in devtypes(device):
        for shape, layout in (((5, 6), "transposed"), ((3, 1), "contiguous"), ((0, 4), "contiguous"),
                              ((4, 0), "contiguous")):
            t, f = pair(shape, dtype, gen, device, layout, special=dtype.is_floating_point)
            rtol, atol = (1e-5, 1e-5) if dtype == torch.float32 else (None, None)
            check(fn, [t], [f], f"{name} {dtype} {shape} {device}", rtol, atol,
                  jit=layout == "transposed" and dtype in (torch.float32, torch.bfloat16))
    for vals in ([math.nan, math.nan], [math.nan, 1.0], [2.0]):  # all-NaN and partly-NaN lines
        t = torch.tensor(vals)
        check(fn, [t.reshape(1, -1).expand(2, -1)], [to_flow(t).reshape(1, -1).expand(2, -1).to(device)],
              f"{name} {vals} {device}", jit=False)


def check_indexed(got, want, x_torch, dim, keepdim, msg, exact_indices):
    """(values, indices) against torch's: the values equal; the indices point at the values (and
    equal torch's when exact_indices)."""
    v, i = got
    assert_same(v.cpu(), want[0], rtol=0, atol=0, msg=msg + " values")
    idx = torch.from_numpy(i.cpu().numpy())
    assert idx.dtype == torch.int64 and idx.shape == want[1].shape, msg
    if exact_indices:
        assert torch.equal(idx, want[1]), f"{msg} indices: {idx} vs {want[1]}"
    if x_torch.ndim:
        picked = x_torch.gather(dim, idx if keepdim else idx.unsqueeze(dim))
        picked = picked if keepdim else picked.squeeze(dim)
    else:
        picked = x_torch
    torch.testing.assert_close(picked, want[0], rtol=0, atol=0, equal_nan=True, msg=lambda m: msg + " gather " + m)


ORDER_STATS = {
    "median": lambda L, x, d, k: L.median(x, d, keepdim=k),
    "nanmedian": lambda L, x, d, k: x.nanmedian(d, k),
    "kthvalue 1": lambda L, x, d, k: L.kthvalue(x, 1, d, k),
    "kthvalue mid": lambda L, x, d, k: x.kthvalue(max(x.shape[d] // 2, 1) if x.ndim else 1, d, keepdim=k),
    "kthvalue last": lambda L, x, d, k: L.kthvalue(x, x.shape[d] if x.ndim else 1, dim=d, keepdim=k),
    "mode": lambda L, x, d, k: L.mode(x, d, k),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(ORDER_STATS))
def test_order_statistics_match_torch(name, device, gen):
    fn = ORDER_STATS[name]
    for dtype in devtypes(device):
        for shape, dim, layout in (((5, 7), 1, "transposed"), ((6, 4), 0, "contiguous"), ((9,), 0, "contiguous"),
                                   ((1, 3), -1, "contiguous"), ((), 0, "contiguous"), ((3, 17), 1, "contiguous"),
                                   ((2, 0), 1, "contiguous"), ((0, 3), 1, "contiguous")):
            for ties in (False, True):
                special = dtype.is_floating_point and name != "mode"  # (torch's mode of NaN is unspecified)
                kw = {"low": -3, "high": 3} if ties and not dtype.is_floating_point else {}
                t, f = pair(shape, dtype, gen, device, layout, ties=ties, special=special, **kw)
                for keepdim in (False, True):
                    msg = f"{name} {dtype} {shape} dim={dim} keepdim={keepdim} ties={ties} {device}"
                    if raises_like(lambda: fn(torch, t, dim, keepdim), lambda: fn(flow, f, dim, keepdim)):
                        continue
                    want = fn(torch, t, dim, keepdim)
                    # without ties (and specials) the answer is unique; mode's index is torch's for short
                    # lines (insertion-sorted there, so the last occurrence)
                    line = t.shape[dim] if t.ndim else 1
                    exact = (not ties and dtype in (torch.float32, torch.float64) and not special) or \
                        (name == "mode" and line < 16)
                    check_indexed(fn(flow, f, dim, keepdim), want, t, dim, keepdim, msg + " eager", exact)
                    if keepdim and shape == (5, 7) and dtype in (torch.float32, torch.int64, torch.float16):
                        got = flow.jit(lambda x: fn(flow, x, dim, keepdim))(f)
                        check_indexed(got, want, t, dim, keepdim, msg + " jit", exact)


def test_order_statistics_without_ties_have_torch_indices(gen):
    t = torch.randperm(60, generator=gen).float().reshape(6, 10) - 30
    f = to_flow(t)
    for name in ("median", "nanmedian", "kthvalue 1", "kthvalue mid", "kthvalue last"):
        for dim in (0, 1):
            want = ORDER_STATS[name](torch, t, dim, False)
            check_indexed(ORDER_STATS[name](flow, f, dim, False), want, t, dim, False, name, True)
    # NaN: median gives the first NaN of the line, nanmedian ignores NaNs (an all-NaN line: some NaN,
    # which torch picks with nth_element)
    t = torch.tensor([[1.0, math.nan, 3.0, math.nan, 0.0], [math.nan] * 5, [4.0, 2.0, 5.0, 1.0, 3.0],
                      [math.nan, 2.0, math.nan, math.nan, -1.0]])
    for name in ("median", "nanmedian"):
        want = ORDER_STATS[name](torch, t, 1, False)
        got = ORDER_STATS[name](flow, to_flow(t), 1, False)
        check_indexed(got, want, t, 1, False, name + " nan", False)
        keep = [0, 2, 3] if name == "nanmedian" else [0, 1, 2, 3]
        assert torch.equal(torch.from_numpy(got.indices.numpy())[keep], want.indices[keep]), name
    assert_same(flow.median(flow.tensor([])), torch.median(torch.tensor([])))
    assert_same(flow.nanmedian(to_flow(t)), torch.nanmedian(t))


def test_order_statistics_errors(gen):
    t, f = pair((3, 4), torch.float32, gen)
    for fn in (lambda L, x: L.kthvalue(x, 0), lambda L, x: L.kthvalue(x, 5), lambda L, x: L.kthvalue(x, 2.0),
               lambda L, x: L.median(x, 2), lambda L, x: L.mode(x, 3), lambda L, x: L.median(x.bool()),
               lambda L, x: L.median(x[:, :0], 1), lambda L, x: L.mode(x[:0], 0), lambda L, x: L.aminmax(x[:0]),
               lambda L, x: L.aminmax(x[:0], dim=0), lambda L, x: L.nanmean(x.long()),
               lambda L, x: L.median(x, dim=1.5)):
        must_raise(lambda: fn(torch, t), lambda: fn(flow, f))


QUANTILE_QS = [0.0, 0.25, 0.5, 1.0, 1 / 3, "tensor", "tensor0d"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("fname", ["quantile", "nanquantile"])
def test_quantile_matches_torch(fname, interpolation, device, gen):
    for dtype in (torch.float32, torch.float64):
        for shape, layout in (((6, 5), "transposed"), ((7,), "contiguous"), ((1, 4), "contiguous"),
                              ((), "contiguous")):
            t, f = pair(shape, dtype, gen, device, layout, special=True, ties=shape == (7,))
            for q in QUANTILE_QS:
                if q == "tensor":
                    tq = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0, 0.375], dtype=dtype)
                elif q == "tensor0d":
                    tq = torch.tensor(0.6, dtype=dtype)
                else:
                    tq = q
                fq = to_flow(tq).to(device) if isinstance(tq, torch.Tensor) else tq
                for dim in (None, 0, -1):
                    for keepdim in (False, True):
                        def fn(L, x, qq):
                            return getattr(L, fname)(x, qq, dim=dim, keepdim=keepdim, interpolation=interpolation)

                        jit = keepdim and dim == 0 and q == "tensor" and layout == "transposed"
                        check(fn, [t, tq], [f, fq], f"{fname} {interpolation} {dtype} {shape} q={q} dim={dim} "
                              f"keepdim={keepdim} {device}", jit=jit)
    t, f = pair((4, 6), torch.float32, gen, device)
    assert_same(f.quantile(0.5, 1).cpu(), t.quantile(0.5, 1), msg="method")


def test_quantile_errors(gen):
    t, f = pair((3, 4), torch.float32, gen)
    tq, fq = torch.tensor([0.5, 0.2]), flow.tensor([0.5, 0.2])
    for fn in (lambda L, x, q: L.quantile(x, 1.5), lambda L, x, q: L.quantile(x, -0.1),
               lambda L, x, q: L.quantile(x, q * 3), lambda L, x, q: L.quantile(x, q.double()),
               lambda L, x, q: L.quantile(x, q.reshape(1, 2)), lambda L, x, q: L.quantile(x.half(), 0.5),
               lambda L, x, q: L.quantile(x.long(), 0.5), lambda L, x, q: L.quantile(x[:0], 0.5),
               lambda L, x, q: L.quantile(x, 0.5, interpolation="cubic"), lambda L, x, q: L.nanquantile(x, 2.0),
               lambda L, x, q: L.quantile(x, 0.5, dim=2), lambda L, x, q: L.quantile(x, "half")):
        must_raise(lambda: fn(torch, t, tq), lambda: fn(flow, f, fq))


SCANS = {
    "cummax": lambda L, x, d: L.cummax(x, d),
    "cummin": lambda L, x, d: x.cummin(d),
    "logcumsumexp": lambda L, x, d: L.logcumsumexp(x, d),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SCANS))
def test_scans_match_torch(name, device, gen):
    """Indices too: torch's cummax/cummin rule is deterministic (ties and NaNs take the later index)."""
    fn = SCANS[name]
    for dtype in devtypes(device):
        for shape, dim, layout in (((5, 37), 1, "transposed"), ((6, 4), 0, "contiguous"), ((1,), 0, "contiguous"),
                                   ((), 0, "contiguous"), ((3, 0), 1, "contiguous"), ((2, 64), -1, "contiguous"),
                                   ((2, 3, 9), 1, "contiguous")):
            kw = {"low": -3, "high": 3} if not dtype.is_floating_point else {}
            t, f = pair(shape, dtype, gen, device, layout, ties=True, special=dtype.is_floating_point, **kw)
            rtol, atol = (2e-6, 1e-6) if dtype == torch.float32 else (1e-12, 1e-12) if dtype == torch.float64 else \
                (None, None)
            jit = shape == (5, 37) and dtype in (torch.float32, torch.bfloat16, torch.int64)
            check(fn, [t, dim], [f, dim], f"{name} {dtype} {shape} {device}", rtol, atol, jit=jit)


def test_logcumsumexp_is_stable(gen):
    """Large, tiny and infinite values: no overflow to inf, no underflow to -inf."""
    t = torch.tensor([[1000.0, 1000.0, -1000.0, 0.0], [-math.inf, -math.inf, 3.0, -math.inf],
                      [math.inf, 1.0, math.inf, -math.inf], [-1e30, -1e30, 1e30, math.nan]])
    for dtype in FLOAT_DTYPES:
        assert_same(flow.logcumsumexp(to_flow(t.to(dtype)), 1), torch.logcumsumexp(t.to(dtype), 1), msg=str(dtype))


# ---- shapes and joins -------------------------------------------------------------------------------



def torch_contiguous(t):
    """torch.kron of a transposed matrix raises (a view in its implementation): torch gets a
    contiguous copy, flow the transposed view."""
    return t.contiguous() if isinstance(t, torch.Tensor) else t


# (name, fn(L, x, y)) with x, y: [5, 6] tensors (x transposed, so non-contiguous).
SHAPE_OPS = {
    "diff": lambda L, x, y: L.diff(x),
    "diff n2 dim0": lambda L, x, y: L.diff(x, n=2, dim=0),
    "diff n0": lambda L, x, y: L.diff(x, 0),
    "diff n7": lambda L, x, y: x.diff(7),
    "diff prepend append": lambda L, x, y: L.diff(x, 1, -1, prepend=y[:, :2], append=y[:, 3:4]),
    "cross": lambda L, x, y: L.cross(x[:3], y[:3], dim=0),
    "cross default dim": lambda L, x, y: L.cross(x[:, :3], y[:, :3]),
    "cross method": lambda L, x, y: x[1:4].cross(y[1:4], 0),
    "linalg.cross": lambda L, x, y: L.linalg.cross(x[:, 3:], y[:1, :3]),
    "tensordot": lambda L, x, y: L.tensordot(x, y.t(), 1),
    "tensordot 2": lambda L, x, y: L.tensordot(x, y, 2),
    "tensordot 0": lambda L, x, y: L.tensordot(x[:2, :3], y[:3, :2], 0),
    "tensordot lists": lambda L, x, y: L.tensordot(x.reshape(5, 2, 3), y.reshape(3, 5, 2), dims=([0, 2], [1, 0])),
    "kron": lambda L, x, y: L.kron(torch_contiguous(x[:2, :3]), y[:3, :2]),
    "kron ranks": lambda L, x, y: L.kron(x[0], y[:2, :3]),
    "kron method": lambda L, x, y: x[0, :2].kron(y[0]),
    "block_diag": lambda L, x, y: L.block_diag(x[:2, :3], y[0], y[1, 1], x[:0, :2], y[:3, :1]),
    "cartesian_prod": lambda L, x, y: L.cartesian_prod(x[0], y[1, :4], x[2, :2]),
    "cartesian_prod one": lambda L, x, y: L.cartesian_prod(x[0]),
    "combinations": lambda L, x, y: L.combinations(x[0]),
    "combinations r3": lambda L, x, y: L.combinations(x[0], 3),
    "combinations replacement": lambda L, x, y: L.combinations(x[1, :4], r=2, with_replacement=True),
    "combinations r0": lambda L, x, y: L.combinations(x[0], 0),
    "combinations r>n": lambda L, x, y: L.combinations(x[0, :2], 3),
    "atleast_1d": lambda L, x, y: L.atleast_1d(x[0, 0]) * 1,
    "atleast_2d many": lambda L, x, y: [t * 1 for t in L.atleast_2d(x[0, 0], y[0], x)],
    "atleast_3d list": lambda L, x, y: [t * 1 for t in L.atleast_3d([x[0, 0], y[0], x, x.reshape(1, 2, 15)])],
    "dstack": lambda L, x, y: L.dstack([x, y]),
    "dstack 1d": lambda L, x, y: L.dstack((x[0], y[0])),
    "column_stack": lambda L, x, y: L.column_stack([x[:, 0], y, x[:, 1]]),
    "row_stack": lambda L, x, y: L.row_stack([x[0], y]),
    "hsplit": lambda L, x, y: [t * 1 for t in L.hsplit(x, 3)],
    "hsplit indices": lambda L, x, y: [t * 1 for t in x.hsplit([1, 4])],
    "hsplit 1d": lambda L, x, y: [t * 1 for t in L.hsplit(x[0], 2)],
    "vsplit": lambda L, x, y: [t * 1 for t in L.vsplit(x, [2])],
    "dsplit": lambda L, x, y: [t * 1 for t in L.dsplit(x.reshape(5, 2, 3), 3)],
    "rot90": lambda L, x, y: L.rot90(x),
    "rot90 k2": lambda L, x, y: L.rot90(x, 2, [1, 0]),
    "rot90 k-1": lambda L, x, y: x.rot90(-1, (0, 1)),
    "rot90 k4 3d": lambda L, x, y: L.rot90(x.reshape(5, 2, 3), 4, (0, 2)) * 1,
    "rot90 k3 3d": lambda L, x, y: L.rot90(x.reshape(5, 2, 3), 3, (-1, 0)),
    "fliplr": lambda L, x, y: L.fliplr(x),
    "flipud": lambda L, x, y: x.flipud(),
    "narrow_copy": lambda L, x, y: L.narrow_copy(x, 1, 2, 3),
    "take": lambda L, x, y: L.take(x, L.tensor([[0, 29, -1], [7, -30, 12]], device=x.device)),
    "take method": lambda L, x, y: x.take(L.tensor([3], device=x.device)),
    "vander": lambda L, x, y: L.vander(x[0]),
    "vander N increasing": lambda L, x, y: L.vander(x[1], N=4, increasing=True),
    "vander N0": lambda L, x, y: L.vander(x[1], 0),
    "vander N1": lambda L, x, y: L.vander(x[1], 1),
    "trapezoid": lambda L, x, y: L.trapezoid(x),
    "trapezoid dx": lambda L, x, y: L.trapezoid(x, dx=0.5, dim=0),
    "trapezoid x": lambda L, x, y: L.trapezoid(y, x[0]),
    "trapezoid x nd": lambda L, x, y: L.trapezoid(y, x, dim=0),
    "trapezoid x short": lambda L, x, y: L.trapezoid(y, x[1:2], dim=0),
    "trapz": lambda L, x, y: L.trapz(x, dx=2),
    "trapz x": lambda L, x, y: L.trapz(y, x[0]),
    "trapezoid one sample": lambda L, x, y: L.trapezoid(x[:, :1]),
    "trapezoid empty": lambda L, x, y: L.trapezoid(x[:, :0]),
    "cumulative_trapezoid": lambda L, x, y: L.cumulative_trapezoid(x),
    "cumulative_trapezoid dx": lambda L, x, y: L.cumulative_trapezoid(x, dx=3, dim=0),
    "cumulative_trapezoid x": lambda L, x, y: L.cumulative_trapezoid(y, x[0]),
    "cumulative_trapezoid empty": lambda L, x, y: L.cumulative_trapezoid(x[:0], dim=0),
}
NO_JIT = ("cartesian_prod one",)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SHAPE_OPS))
def test_shape_ops_match_torch(name, device, gen):
    fn = SHAPE_OPS[name]
    for dtype in devtypes(device):
        kw = {"low": -3, "high": 4} if name.startswith("vander") and not dtype.is_floating_point else {}
        t, f = pair((5, 6), dtype, gen, device, "transposed", **kw)
        u, g = pair((5, 6), dtype, gen, device, **kw)
        if name.startswith("tensordot") and dtype == torch.bool:
            # torch's bool tensordot raises (no bool mm/dot), except on some layouts where it takes
            # another path; flow always raises
            with pytest.raises(NotImplementedError):
                fn(flow, f, g)
            continue
        rtol, atol = (1e-5, 1e-5) if dtype == torch.float32 else (None, None)
        if "vander" in name and dtype in (torch.float16, torch.bfloat16):
            rtol, atol = (1e-2, 1e-2) if dtype == torch.float16 else (3e-2, 3e-2)
        jit = name not in NO_JIT and dtype in (torch.float32, torch.int64)
        if name.startswith("tensordot") and dtype in (torch.float16, torch.bfloat16):
            # torch's half tensordot of a transposed input sums in half precision on some paths (a
            # 30-term bfloat16 dot off by 2%); flow sums in float32: the reference is float64, rounded
            assert_same(fn(flow, f, g).cpu(), fn(torch, t.double(), u.double()).to(dtype), msg=f"{name} {dtype}")
            continue
        check(fn, [t, u], [f, g], f"{name} {dtype} {device}", rtol, atol, jit=jit)


@pytest.mark.parametrize("device", DEVICES)
def test_take_under_jit(device, gen):
    t, f = pair((4, 5), torch.float32, gen, device, "transposed")
    idx = torch.tensor([[0, 19, -1], [7, -20, 12]])
    want = torch.take(t, idx)
    got = flow.jit(lambda x, i: flow.take(x, i))(f, to_flow(idx).to(device))
    assert_same(got.cpu(), want, msg="take jit")
    assert_same(flow.take(f, to_flow(idx[:0]).to(device)).cpu(), torch.take(t, idx[:0]), msg="take empty")


def test_tri_indices_match_torch():
    for row, col in ((0, 0), (1, 1), (3, 3), (4, 2), (2, 5), (0, 3)):
        for offset in (0, 1, -1, 3, -4):
            for fname in ("tril_indices", "triu_indices"):
                for dtype in (torch.int64, torch.int32):
                    want = getattr(torch, fname)(row, col, offset, dtype=dtype)
                    assert_same(getattr(flow, fname)(row, col, offset, dtype=FLOW_OF[dtype]), want,
                                msg=f"{fname} {row} {col} {offset} {dtype}")
    for fn in (lambda L: L.tril_indices(-1, 3), lambda L: L.triu_indices(3, -2),
               lambda L: L.tril_indices(3, 3, dtype=L.float32)):
        must_raise(lambda: fn(torch), lambda: fn(flow))


def test_logspace_matches_torch():
    for start, end, steps, base in ((0, 3, 4, 10.0), (-2.5, 2.5, 11, 10.0), (0, 10, 11, 2.0), (1, -1, 5, 0.5),
                                    (0.0, 1.0, 1, 10.0), (2, 3, 0, 10.0), (0.1, 7.3, 17, math.e), (3, 0, 4, 3)):
        for dtype in (None, torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32):
            want = torch.logspace(start, end, steps, base, dtype=dtype)
            got = flow.logspace(start, end, steps, base, dtype=FLOW_OF[dtype] if dtype else None)
            rtol = 1e-6 if want.dtype == torch.float32 else None
            assert_same(got, want, rtol=rtol, msg=f"logspace {start} {end} {steps} {base} {dtype}")
    for fn in (lambda L: L.logspace(0, 1, -1), lambda L: L.logspace(0, 1, 2.5)):
        must_raise(lambda: fn(torch), lambda: fn(flow))


def test_shape_op_errors(gen):
    t, f = pair((3, 4), torch.float32, gen)
    for name, fn in [
            ("diff 0-d", lambda L, x: L.diff(x[0, 0])), ("diff n<0", lambda L, x: L.diff(x, -1)),
            ("diff prepend rank", lambda L, x: L.diff(x, prepend=x[0])),
            ("cross no 3", lambda L, x: L.cross(x[:2], x[:2])), ("cross dim", lambda L, x: L.cross(x, x, dim=1)),
            ("cross dtypes", lambda L, x: L.cross(x[:3], x[:3].double(), dim=0)),
            ("cross bool", lambda L, x: L.linalg.cross(x[:, :3] > 0, x[:, :3] > 0)),
            ("linalg.cross ranks", lambda L, x: L.linalg.cross(x[:, :3], x[0, :3])),
            ("tensordot mismatch", lambda L, x: L.tensordot(x, x, dims=([0], [1]))),
            ("tensordot dtypes", lambda L, x: L.tensordot(x, x.double().t(), 1)),
            ("tensordot lens", lambda L, x: L.tensordot(x, x, dims=([0, 1], [0]))),
            ("block_diag 3d", lambda L, x: L.block_diag(x, x.reshape(1, 3, 4))),
            ("cartesian_prod 2d", lambda L, x: L.cartesian_prod(x, x)),
            ("cartesian_prod dtypes", lambda L, x: L.cartesian_prod(x[0], x[0].double())),
            ("combinations 2d", lambda L, x: L.combinations(x)),
            ("combinations r<0", lambda L, x: L.combinations(x[0], -1)),
            ("hsplit uneven", lambda L, x: L.hsplit(x, 3)), ("hsplit 0-d", lambda L, x: L.hsplit(x[0, 0], 1)),
            ("vsplit 1d", lambda L, x: L.vsplit(x[0], 1)), ("dsplit 2d", lambda L, x: L.dsplit(x, 1)),
            ("vsplit uneven", lambda L, x: L.vsplit(x, 2)), ("hsplit zero", lambda L, x: L.hsplit(x, 0)),
            ("rot90 1d", lambda L, x: L.rot90(x[0])), ("rot90 same", lambda L, x: L.rot90(x, 1, [1, 1])),
            ("rot90 wrap", lambda L, x: L.rot90(x, 1, [0, -2])),
            ("rot90 3 dims", lambda L, x: L.rot90(x, 1, [0, 1, 0])),
            ("rot90 range", lambda L, x: L.rot90(x, 1, [0, 2])),
            ("fliplr 1d", lambda L, x: L.fliplr(x[0])), ("flipud 0d", lambda L, x: L.flipud(x[0, 0])),
            ("narrow_copy range", lambda L, x: L.narrow_copy(x, 1, 2, 3)),
            ("take range", lambda L, x: L.take(x, L.tensor([12]))),
            ("take neg", lambda L, x: L.take(x, L.tensor([-13]))),
            ("take int32", lambda L, x: L.take(x, L.tensor([1], dtype=L.int32))),
            ("vander 2d", lambda L, x: L.vander(x)), ("vander N<0", lambda L, x: L.vander(x[0], -1)),
            ("trapezoid x len", lambda L, x: L.trapezoid(x, x[0, :3])),
            ("trapezoid bool", lambda L, x: L.trapezoid(x > 0)),
            ("trapezoid both", lambda L, x: L.trapezoid(x, x, dx=1.0)),
            ("trapezoid dx bool", lambda L, x: L.trapezoid(x, dx=True)),
            ("atleast_1d number", lambda L, x: L.atleast_1d(1.0)),
    ]:
        assert raises_like(lambda: fn(torch, t), lambda: fn(flow, f)), name


# ---- distances ------------------------------------------------------------------------------------

P_VALUES = [0.0, 0.5, 1.0, 2.0, 3.0, math.inf]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p", P_VALUES, ids=str)
def test_distances_match_torch(p, device, gen):
    for dtype in (torch.float32, torch.float64):
        rtol, atol = (1e-5, 1e-5) if dtype == torch.float32 else (1e-10, 1e-10)
        for sa, sb in (((5, 3), (4, 3)), ((2, 1, 6, 4), (3, 7, 4)), ((1, 2), (0, 2)), ((3, 0), (2, 0)),
                       ((7, 5), (7, 5))):
            ta, fa = pair(sa, dtype, gen, device, "transposed" if len(sa) == 2 else "contiguous", ties=True)
            tb, fb = pair(sb, dtype, gen, device, ties=True)
            check(lambda L, a, b: L.cdist(a, b, p=p), [ta, tb], [fa, fb], f"cdist p={p} {dtype} {sa} {sb} {device}",
                  rtol, atol, jit=sa == (5, 3) and dtype == torch.float32)
            if sa == sb:
                check(lambda L, a, b: L.dist(a, b, p), [ta, tb], [fa, fb], f"dist p={p} {dtype} {device}", rtol, atol,
                      jit=dtype == torch.float32)
            if len(sa) == 2:
                check(lambda L, a, b: L.pdist(a, p), [ta, tb], [fa, fb], f"pdist p={p} {dtype} {sa} {device}", rtol,
                      atol, jit=sa == (5, 3) and dtype == torch.float32)
                check(lambda L, a, b: L.nn.functional.pdist(a, p), [ta, tb], [fa, fb], f"F.pdist p={p} {device}",
                      rtol, atol)
        # many rows: torch's default compute_mode would use the matmul form here; the exact one is the reference
        ta, fa = pair((30, 8), dtype, gen, device)
        tb, fb = pair((27, 8), dtype, gen, device)
        want = torch.cdist(ta, tb, p, compute_mode="donot_use_mm_for_euclid_dist")
        assert_same(flow.cdist(fa, fb, p).cpu(), want, rtol=rtol, atol=atol, msg=f"cdist 30x27 p={p}")
    t, f = pair((4, 3), torch.float16, gen, device)
    assert_same(flow.dist(f, f.flip(0), p).cpu(), torch.dist(t, t.flip(0), p), msg=f"dist half p={p}")
    assert_same(f.dist(f * 2, p).cpu(), t.dist(t * 2, p), msg=f"dist method half p={p}")


def test_distance_errors(gen):
    t, f = pair((3, 4), torch.float32, gen)
    for fn in (lambda L, x: L.cdist(x, x, p=-1.0), lambda L, x: L.cdist(x[0], x),
               lambda L, x: L.cdist(x, x[:, :3]), lambda L, x: L.cdist(x.long(), x.long()),
               lambda L, x: L.cdist(x.half(), x.half()), lambda L, x: L.cdist(x, x.double()),
               lambda L, x: L.cdist(x, x, compute_mode="fast"), lambda L, x: L.pdist(x, -1.0),
               lambda L, x: L.pdist(x[0]), lambda L, x: L.pdist(x.half()), lambda L, x: L.dist(x.long(), x.long())):
        must_raise(lambda: fn(torch, t), lambda: fn(flow, f))


# ---- linalg -----------------------------------------------------------------------------------------

LINALG = {
    "vector_norm": lambda L, x, y: L.linalg.vector_norm(x),
    "vector_norm ords": lambda L, x, y: [L.linalg.vector_norm(x, o, dim=1) for o in (0, 1, 2, 3.5, -1, -2, 0.5,
                                                                                     math.inf, -math.inf)],
    "vector_norm dims keepdim": lambda L, x, y: L.linalg.vector_norm(x.reshape(3, 2, 5), 3, (0, -1), keepdim=True),
    "vector_norm all keepdim": lambda L, x, y: L.linalg.vector_norm(x, math.inf, keepdim=True),
    "vector_norm dtype": lambda L, x, y: L.linalg.vector_norm(x, 2, 0, dtype=L.float64),
    "vector_norm 0-d": lambda L, x, y: L.linalg.vector_norm(x[0, 0], 1),
    "matrix_norm fro": lambda L, x, y: L.linalg.matrix_norm(x),
    "matrix_norm ords": lambda L, x, y: [L.linalg.matrix_norm(x.reshape(2, 3, 5), o) for o in (1, -1, math.inf,
                                                                                               -math.inf)],
    "matrix_norm dims keepdim": lambda L, x, y: [L.linalg.matrix_norm(x.reshape(2, 3, 5), o, (2, 0), True)
                                                 for o in ("fro", 1, -math.inf)],
    "matrix_norm empty": lambda L, x, y: [L.linalg.matrix_norm(x[:0], o) for o in (1, math.inf, "fro")],
    "norm": lambda L, x, y: L.linalg.norm(x),
    "norm vector ord": lambda L, x, y: L.linalg.norm(x[0], 3),
    "norm matrix ord": lambda L, x, y: L.linalg.norm(x, -math.inf),
    "norm dim": lambda L, x, y: L.linalg.norm(x, 1, dim=0),
    "norm dims": lambda L, x, y: L.linalg.norm(x.reshape(2, 3, 5), math.inf, dim=(0, 2), keepdim=True),
    "norm 3d": lambda L, x, y: L.linalg.norm(x.reshape(2, 3, 5)),
    "vecdot": lambda L, x, y: L.linalg.vecdot(x, y),
    "vecdot dim": lambda L, x, y: L.linalg.vecdot(x, y[:1], dim=0),
    "matmul": lambda L, x, y: L.linalg.matmul(x, y.t()),
    "diagonal": lambda L, x, y: L.linalg.diagonal(x.reshape(3, 2, 5), offset=1) * 1,
    "diagonal dims": lambda L, x, y: L.linalg.diagonal(x.reshape(3, 2, 5), offset=-1, dim1=0, dim2=2) * 1,
    "multi_dot": lambda L, x, y: L.linalg.multi_dot([x, y.t(), x[:, :4]]),
    "multi_dot vectors": lambda L, x, y: L.linalg.multi_dot([x[0, :6], y.t(), x, y[0]]),
    "multi_dot two": lambda L, x, y: L.linalg.multi_dot((x[0], y[0])),
    "multi_dot chain": lambda L, x, y: L.linalg.multi_dot([x, y.t(), x[:, :2], y[:2, :3], x[:3, :1], y[:1]]),
    "matrix_power": lambda L, x, y: [L.linalg.matrix_power(x[:, :6].reshape(2, 3, 3) / 2, n) for n in (0, 1, 2, 5)],
    "matrix_power method": lambda L, x, y: x[:, :5].matrix_power(3) + L.matrix_power(y[:5, :5] / 3, 2),
    "vander": lambda L, x, y: L.linalg.vander(x[:2, :4]),
    "vander N": lambda L, x, y: L.linalg.vander(x[0], N=3),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(LINALG))
def test_linalg_matches_torch(name, device, gen):
    fn = LINALG[name]
    for dtype in devtypes(device):
        kw = {"low": -3, "high": 4} if not dtype.is_floating_point else {}
        t, f = pair((5, 6), dtype, gen, device, "transposed", **kw)
        u, g = pair((5, 6), dtype, gen, device, **kw)
        # A chain of six products may be associated differently from torch's (and summed in another
        # order by cuBLASLt): rounding differences compound through it (seed 369091374 on the
        # emulated device: 3.3e-5 relative).
        tol = 1e-4 if name == "multi_dot chain" else 2e-5
        rtol, atol = (tol, tol) if dtype == torch.float32 else (None, None)
        if name.startswith("multi_dot") and dtype == torch.float16:
            # each intermediate product is rounded to half, so two products may round apart by
            # one half ulp each (the emulated device: 1.5e-3 relative, one element of 20)
            rtol, atol = 3e-3, 1e-3
        check(fn, [t, u], [f, g], f"{name} {dtype} {device}", rtol, atol, jit=dtype == torch.float32)
    t, f = pair((5, 6), torch.float32, gen, device, special=True)
    check(fn, [t, t], [f, f], f"{name} specials {device}", 2e-5, 2e-5, jit=False)


def test_cross_without_dim_warns_as_torch(gen):
    t, f = pair((2, 3), torch.float32, gen)
    with pytest.warns(UserWarning, match="flow.cross without specifying the dim"):
        got = flow.cross(f, f.flip(0))
    assert_same(got, torch.linalg.cross(t, t.flip(0)), msg="cross default dim")


def test_linalg_errors_and_missing(gen):
    t, f = pair((3, 4), torch.float32, gen)
    for fn in (lambda L, x: L.linalg.vector_norm(x.long()), lambda L, x: L.linalg.vector_norm(x, "fro"),
               lambda L, x: L.linalg.vector_norm(x[:0], math.inf), lambda L, x: L.linalg.vector_norm(x[:0], -1),
               lambda L, x: L.linalg.vector_norm(x[:, :0], -math.inf, dim=1),
               lambda L, x: L.linalg.vector_norm(x.double(), dtype=L.float32),
               lambda L, x: L.linalg.matrix_norm(x[0]), lambda L, x: L.linalg.matrix_norm(x, 3),
               lambda L, x: L.linalg.matrix_norm(x, "foo"), lambda L, x: L.linalg.matrix_norm(x, dim=(0, 0)),
               lambda L, x: L.linalg.matrix_norm(x, dim=(0, 1, 1)),
               lambda L, x: L.linalg.norm(x.reshape(2, 3, 2), 2), lambda L, x: L.linalg.norm(x[0], "fro"),
               lambda L, x: L.linalg.norm(x, dim=(0, 1, 1)), lambda L, x: L.linalg.vecdot(x.long(), x.long()),
               lambda L, x: L.linalg.vecdot(x, x.double()), lambda L, x: L.linalg.multi_dot([x]),
               lambda L, x: L.linalg.multi_dot([x, x]), lambda L, x: L.linalg.multi_dot([x, x.reshape(1, 4, 3)]),
               lambda L, x: L.linalg.multi_dot([x, x.t(), x.reshape(3, 1, 4)]),
               lambda L, x: L.linalg.multi_dot([x, x.t().double()]),
               lambda L, x: L.linalg.matrix_power(x, 2), lambda L, x: L.linalg.matrix_power(x[0], 2),
               lambda L, x: L.linalg.vander(x.half()), lambda L, x: L.linalg.vander(x, N=1),
               lambda L, x: L.linalg.vander(x > 0)):
        must_raise(lambda: fn(torch, t), lambda: fn(flow, f))
    for ord in ("nuc", 2, -2):
        with pytest.raises(NotImplementedError, match="singular values"):
            flow.linalg.matrix_norm(f, ord)
    with pytest.raises(NotImplementedError, match="inv"):
        flow.linalg.matrix_power(f[:, :3], -1)
    for name in ("inv", "det", "svd", "qr", "solve", "eigh", "cholesky"):
        assert hasattr(torch.linalg, name) and not hasattr(flow.linalg, name), name
        with pytest.raises(AttributeError, match="factorization"):
            getattr(flow.linalg, name)
    assert flow.linalg.matmul is flow.matmul


def test_out_arguments(gen):
    """out= receives the result (resized when its shape differs), and the pair ops fill both."""
    t, f = pair((4, 7), torch.float32, gen, special=True)
    for name, fn in [("logit", lambda L, x, o: L.logit(x.sigmoid(), out=o)),
                     ("nansum", lambda L, x, o: L.nansum(x, 1, out=o)),
                     ("quantile", lambda L, x, o: L.quantile(x, 0.25, dim=0, out=o)),
                     ("logcumsumexp", lambda L, x, o: L.logcumsumexp(x, 1, out=o)),
                     ("copysign", lambda L, x, o: L.copysign(x, -1.0, out=o))]:
        to, fo = torch.empty(0), flow.empty(0)
        r = fn(flow, f, fo)
        assert r is fo, name
        fn(torch, t, to)
        assert_same(fo, to, msg=name)
    for name, fn in [("median", lambda L, x, o: L.median(x, 1, out=o)),
                     ("cummax", lambda L, x, o: L.cummax(x, 0, out=o)),
                     ("kthvalue", lambda L, x, o: L.kthvalue(x, 2, 1, True, out=o)),
                     ("mode", lambda L, x, o: L.mode(L.nan_to_num(x, 0.0, 9.0, -9.0).round(), 0, out=o)),
                     ("aminmax", lambda L, x, o: L.aminmax(x, dim=1, out=o))]:
        tout = (torch.empty(0), torch.empty(0, dtype=torch.int64 if name != "aminmax" else torch.float32))
        fout = (flow.empty(0), flow.empty(0, dtype=flow.int64 if name != "aminmax" else flow.float32))
        r = fn(flow, f, fout)
        assert r[0] is fout[0] and r[1] is fout[1], name
        fn(torch, t, tout)
        assert_same(fout[0], tout[0], msg=name)
        if name in ("cummax", "aminmax"):  # (the others' tie indices are torch's choice)
            assert_same(fout[1], tout[1], msg=name)


# ---- torch's methods, and tracing ---------------------------------------------------------------


def test_tensor_methods_exist_where_torch_has_them():
    import flow._math_more as mm

    for name in mm._METHODS:
        assert hasattr(torch.Tensor, name), f"torch.Tensor has no {name}"
        assert hasattr(flow.Tensor, name), name
    for name in mm._INPLACE:
        assert hasattr(torch.Tensor, name + "_") and hasattr(flow.Tensor, name + "_"), name
    for name in mm.__all__:
        assert hasattr(torch, name), f"torch has no {name}"
    for name in flow.linalg.__all__:
        assert hasattr(torch.linalg, name), f"torch.linalg has no {name}"


@pytest.mark.parametrize("device", DEVICES)
def test_one_traced_graph(device, gen):
    """A function mixing many of the new ops traces once and matches torch (and reruns compiled)."""
    def body(L, x, y):
        v, i = L.cummax(x, 1)
        q = L.quantile(x, L.tensor([0.25, 0.75], device=x.device), dim=1, keepdim=True)
        m = L.median(x, 0)
        d = L.cdist(x, y)
        return (v * 2, i, L.logcumsumexp(x, 0), q, m.values, m.indices, d, L.linalg.vector_norm(x, 3, 1),
                L.sinc(x) + L.logit(L.sigmoid(y)), L.kron(torch_contiguous(x[:2, :2]), y[:2, :2]), L.diff(x, 2),
                L.nanmean(x, 1),
                L.mode(x.round(), 1).values, L.tensordot(x, y.t(), 1), L.block_diag(x[:2], y[:1]))

    jitted = flow.jit(lambda x, y: body(flow, x, y))
    for _ in range(2):
        t, f = pair((6, 9), torch.float32, gen, device, "transposed")
        u, g = pair((6, 9), torch.float32, gen, device)
        compare(jitted(f, g), body(torch, t, u), "traced graph", 2e-5, 2e-5)
