"""Reductions over a few long rows (CPU): each row's passes run as parallel chunks whose partial
results are combined in order (scheduler/reduction_scheduler.cpp, ReductionParams.cpu_row_splits).
Values against torch, eagerly and under flow.jit, over dtypes, strided rows, NaNs in the first and the
last chunk, and eager calls going from the split form to the unsplit one and back."""
import pytest
import torch

import flow
from conftest import assert_same, make, to_flow, to_torch

F = torch.nn.functional

# (name, torch function of a tensor); each reduces the last dim.
OPS = [
    ("sum", lambda m, x: x.sum(-1)),
    ("mean", lambda m, x: x.mean(-1)),
    ("amax", lambda m, x: x.amax(-1)),
    ("amin", lambda m, x: x.amin(-1)),
    ("var", lambda m, x: x.var(-1)),
    ("norm", lambda m, x: x.norm(dim=-1)),
    ("logsumexp", lambda m, x: x.logsumexp(-1)),
    ("softmax", lambda m, x: m.softmax(x, -1)),
    ("log_softmax", lambda m, x: m.log_softmax(x, -1)),
    ("sum of squares", lambda m, x: (x * x).sum(-1)),
]

# Few long rows (split: 2 chunks and a tail; 4 chunks; 64 chunks), then many long rows and short rows
# (not split).
FEW_LONG = [(1, 70001), (3, 65536 + 5), (1, 1 << 21)]
OTHERS = [(40, 33000), (7, 9), (2, 1)]


def check(op, fn, got, x, what):
    """flow result `got` of fn against torch's on x; sums of many float32 terms are compared with the
    float64 result within 2e-6 of the same sum of absolute values (blocked float32 sums and torch's
    are off by ~1e-7 of it; a lost chunk of 16384 terms moves a sum by ~200 of its ~1e5)."""
    want = fn(torch, x)
    if x.dtype == torch.float32 and op in ("sum", "mean", "sum of squares", "var", "norm"):
        exact = fn(torch, x.double())
        scale = fn(torch, x.double().abs()) if op in ("sum", "mean") else exact.abs()
        atol = 2e-6 * float(scale.nan_to_num().abs().max()) + 1e-6
        assert_same(got, want, atol=atol, msg=what)
        torch.testing.assert_close(to_torch(got).double(), exact, rtol=0, atol=atol, equal_nan=True,
                                   msg=lambda m: f"{what}: {m}")
    else:
        assert_same(got, want, msg=what)


@pytest.mark.parametrize("op,fn", OPS, ids=[o for o, _ in OPS])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_few_long_rows_match_torch(op, fn, mode, gen):
    for shape in FEW_LONG[:2] + ([FEW_LONG[2]] if op in ("sum", "amax", "softmax") else []):
        x = make(shape, torch.float32, gen)
        f = (lambda t: fn(flow, t)) if mode == "eager" else flow.jit(lambda t: fn(flow, t))
        check(op, fn, f(to_flow(x)), x, f"{op} {mode} {shape}")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "softmax"])
def test_few_long_rows_in_other_dtypes(op, dtype, gen):
    fn = dict(OPS)[op]
    x = make((2, 50003), dtype, gen)
    check(op, fn, fn(flow, to_flow(x)), x, f"{op} {dtype}")
    check(op, fn, flow.jit(lambda t: fn(flow, t))(to_flow(x)), x, f"{op} {dtype} jit")


@pytest.mark.parametrize("op", ["sum", "amax", "softmax", "var"])
@pytest.mark.filterwarnings("ignore:var\\(\\)")
def test_eager_calls_alternate_between_forms(op, gen):
    """Eager plans are per shape: one function's calls go from the split form (few long rows) to the
    unsplit one (many rows, short rows, one element) and back."""
    fn = dict(OPS)[op]
    for shape in FEW_LONG[:1] + OTHERS + FEW_LONG[1:2]:
        x = make(shape, torch.float32, gen)
        check(op, fn, fn(flow, to_flow(x)), x, f"{op} {shape}")


def test_strided_long_rows(gen):
    """Rows read with a stride (every other element of a wider tensor) split as contiguous ones."""
    base = make((2, 2 * 40001), torch.float32, gen)
    x = base[:, ::2]
    fx = to_flow(base)[:, ::2]
    check("sum", dict(OPS)["sum"], fx.sum(-1), x, "sum of strided rows")
    assert_same(flow.softmax(fx, -1), torch.softmax(x, -1), msg="softmax of strided rows")


@pytest.mark.parametrize("where", ["first chunk", "last chunk", "tail"])
def test_nan_in_any_chunk_reaches_the_result(where, gen):
    x = make((1, 70001), torch.float32, gen)
    x[0, {"first chunk": 5, "last chunk": 60000, "tail": 70000}[where]] = float("nan")
    for op in ("amax", "amin", "sum"):
        got = to_torch(dict(OPS)[op](flow, to_flow(x)))
        assert torch.isnan(got).all(), f"{op} with a NaN in the {where}: {got}"
