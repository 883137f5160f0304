"""Errors read like torch's and never crash the process: shape mismatches, unsupported dtypes,
non-tensor arguments, bad dims, and data-dependent operations inside @flow.jit (TraceError naming
the op and the user's line)."""
import inspect

import numpy as np
import pytest
import torch

import flow
from conftest import make, raises_like, to_flow


def same_error(torch_fn, flow_fn, exact=True):
    """Both raise; flow's exception is an instance of torch's class (or of RuntimeError where torch
    raises NotImplementedError, a RuntimeError subclass); with `exact`, the messages are equal."""
    with pytest.raises(Exception) as te:
        torch_fn()
    with pytest.raises(Exception) as fe:
        flow_fn()
    tcls = te.type if te.type is not NotImplementedError else RuntimeError
    assert isinstance(fe.value, tcls), f"flow raised {fe.type.__name__}: {fe.value}; torch {te.type.__name__}"
    if exact:
        assert str(fe.value) == str(te.value), f"\nflow:  {fe.value}\ntorch: {te.value}"
    return fe.value


# ---- shapes -------------------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 3), (3, 2)), ((5, 1, 4), (3, 5)), ((0,), (2,))])
@pytest.mark.parametrize("op", ["add", "mul", "lt", "maximum"])
def test_broadcast_mismatch_message(op, sa, sb):
    ta, tb = torch.ones(sa), torch.ones(sb)
    same_error(lambda: getattr(torch, op)(ta, tb), lambda: getattr(flow, op)(to_flow(ta), to_flow(tb)))


def test_broadcast_mismatch_in_where_and_traced():
    c, a, b = torch.ones(3, dtype=torch.bool), torch.ones(4), torch.ones(3)
    same_error(lambda: torch.where(c, a, b), lambda: flow.where(to_flow(c), to_flow(a), to_flow(b)))
    f = flow.jit(lambda x, y: x * 2 + y)
    same_error(lambda: torch.ones(3) * 2 + torch.ones(4), lambda: f(flow.ones(3), flow.ones(4)))


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "softmax", "log_softmax"])
def test_dim_out_of_range(op):
    t = torch.ones(2, 3)
    same_error(lambda: getattr(torch, op)(t, 5), lambda: getattr(flow, op)(to_flow(t), 5))
    same_error(lambda: getattr(torch, op)(t, -3), lambda: getattr(flow, op)(to_flow(t), -3))


def test_amax_of_empty():
    t = torch.ones(3, 0)
    same_error(lambda: torch.amax(t, 1), lambda: flow.amax(to_flow(t), 1))
    same_error(lambda: torch.amin(torch.ones(0)), lambda: flow.amin(flow.ones(0)))


# ---- dtypes -------------------------------------------------------------------------------------

UNSUPPORTED = [
    ("sub bool", lambda m, x: m.sub(x, x), torch.bool),
    ("neg bool", lambda m, x: m.neg(x), torch.bool),
    ("abs bool", lambda m, x: m.abs(x), torch.bool),
    ("relu bool", lambda m, x: m.relu(x), torch.bool),
    ("gelu int", lambda m, x: m.nn.functional.gelu(x), torch.int32),
    ("silu int", lambda m, x: m.nn.functional.silu(x), torch.int64),
    ("mean int", lambda m, x: m.mean(x), torch.int64),
    ("softmax int", lambda m, x: m.softmax(x, 0), torch.int64),
    ("where float cond", lambda m, x: m.where(x, x, x), torch.float32),
    ("int alpha float", lambda m, x: m.add(x, x, alpha=0.5), torch.int64),
    ("int pow negative", lambda m, x: m.pow(x, -2), torch.int64),
]


@pytest.mark.parametrize("name,fn,dtype", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_dtype(name, fn, dtype):
    t = torch.ones(4, dtype=dtype)
    err = same_error(lambda: fn(torch, t), lambda: fn(flow, to_flow(t)), exact=False)
    assert str(err), name


@pytest.mark.parametrize("name,fn,dtype", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_dtype_traced(name, fn, dtype):
    f = flow.jit(lambda x: fn(flow, x))
    with pytest.raises((RuntimeError, TypeError)):
        f(to_flow(torch.ones(4, dtype=dtype)))


def test_unsupported_numpy_dtype():
    with pytest.raises(TypeError):
        flow.from_numpy(np.ones(3, dtype=np.uint16))
    with pytest.raises(TypeError):
        flow.as_tensor(torch.ones(3, dtype=torch.complex64))
    with pytest.raises(TypeError):
        flow.tensor([1, 2], dtype="complex64")
    with pytest.raises(TypeError, match="BFloat16"):
        flow.ones(2, dtype=flow.bfloat16).numpy()


# ---- argument types -----------------------------------------------------------------------------

NON_TENSOR_CALLS = [
    ("add input str", lambda m, x: m.add("a", x)),
    ("add other str", lambda m, x: m.add(x, "a")),
    ("exp list", lambda m, x: m.exp([1.0])),
    ("sigmoid None", lambda m, x: m.sigmoid(None)),
    ("minimum float", lambda m, x: m.minimum(x, 2.0)),
    ("mul dict", lambda m, x: m.mul(x, {})),
    ("where cond list", lambda m, x: m.where([True], x, x)),
    ("sum str", lambda m, x: m.sum("x")),
]


@pytest.mark.parametrize("name,fn", NON_TENSOR_CALLS, ids=[c[0] for c in NON_TENSOR_CALLS])
def test_non_tensor_arguments(name, fn):
    t = torch.ones(3)
    same_error(lambda: fn(torch, t), lambda: fn(flow, to_flow(t)), exact=name not in ("where cond list",))


def test_operator_with_bad_operand():
    same_error(lambda: torch.ones(2) + "a", lambda: flow.ones(2) + "a")
    same_error(lambda: "a" * torch.ones(2) if False else torch.ones(2) / object(),
               lambda: flow.ones(2) / object(), exact=False)


def test_bad_attribute_values():
    t = torch.ones(2, 3)
    same_error(lambda: torch.sum(t, dim="a"), lambda: flow.sum(to_flow(t), dim="a"), exact=False)
    same_error(lambda: torch.nn.functional.gelu(t, approximate="fast"),
               lambda: flow.nn.functional.gelu(to_flow(t), approximate="fast"))
    same_error(lambda: torch.clamp(t), lambda: flow.clamp(to_flow(t)))
    same_error(lambda: torch.softmax(t), lambda: flow.softmax(to_flow(t)), exact=False)


def test_scalar_conversions():
    t = torch.ones(3)
    same_error(lambda: t.item(), lambda: flow.ones(3).item())
    same_error(lambda: bool(t), lambda: bool(flow.ones(3)))
    same_error(lambda: len(torch.tensor(1.0)), lambda: len(flow.tensor(1.0)))
    assert flow.tensor([2.5]).item() == 2.5 and bool(flow.tensor([1])) is True


def test_views_errors():
    t = torch.ones(2, 3)
    f = to_flow(t)
    same_error(lambda: t[2], lambda: f[2])
    same_error(lambda: t[0, 0, 0], lambda: f[0, 0, 0])
    same_error(lambda: t.expand(4, 4), lambda: f.expand(4, 4))
    same_error(lambda: t.t().view(6), lambda: f.t().view(6), exact=False)
    with pytest.raises(RuntimeError):
        f._c.as_strided([10], [1], 0)  # out of the storage: refused, not a bad read


def test_compile_misuse_is_an_exception():
    g = flow._C.Graph()
    x = g.add_input([3], "float32", "x")
    with pytest.raises(ValueError):
        flow._C.compile(g, [[]])  # no outputs
    y = g.add_op("exp", [x], {})[0]
    g.mark_output(y)
    with pytest.raises(ValueError):
        flow._C.compile(g, [])  # wrong number of stride lists
    exe = flow._C.compile(g, [[]])
    with pytest.raises(ValueError):
        exe.run([])
    with pytest.raises(ValueError):
        exe.run([flow.ones(4)._c])  # wrong shape
    with pytest.raises(ValueError):
        exe.run([flow.ones(3, 2)[:, 0]._c])  # wrong layout
    with pytest.raises(NotImplementedError):
        g.add_op("no_such_op", [x], {})
    with pytest.raises(IndexError):
        g.value_shape(99)
    with pytest.raises(TypeError):
        g.add_op("sum", [x], {"dims": [0.5]})
    with pytest.raises(TypeError):
        flow._C.eager("exp", [object()], {})
    assert exe.run([flow.ones(3)._c])[0].shape == [3]


# ---- tracing ------------------------------------------------------------------------------------

def _line_of(fn, text):
    src, start = inspect.getsourcelines(fn)
    for i, line in enumerate(src):
        if text in line:
            return start + i
    raise AssertionError(text)


def traced_item(x):
    s = x.sum()
    v = s.item()  # data-dependent: not traceable
    return x * v


def traced_if(x):
    if x.amax() > 0:  # data-dependent control flow
        return x
    return -x


def traced_numpy(x):
    return flow.tensor(x.numpy() * 2)


def traced_tolist(x):
    return x * len(x.tolist())


@pytest.mark.parametrize("fn,op,text", [(traced_item, "item", "s.item()"), (traced_if, "__bool__", "if x.amax()"),
                                        (traced_numpy, "numpy", "x.numpy()"), (traced_tolist, "tolist", "x.tolist()")])
def test_trace_error_names_op_and_line(fn, op, text):
    f = flow.jit(fn)
    with pytest.raises(flow.TraceError) as e:
        f(flow.ones(4))
    msg = str(e.value)
    assert op in msg, msg
    assert f"line {_line_of(fn, text)}" in msg, msg
    assert text in msg and __file__ in msg, msg
    assert isinstance(e.value, RuntimeError)
    # the process and flow keep working after the error
    assert flow.jit(lambda x: x + 1)(flow.ones(2)).tolist() == [2.0, 2.0]
    assert fn(flow.ones(4)) is not None  # eager works


def test_trace_error_in_module_forward():
    class M(flow.nn.Module):
        def forward(self, x):
            return x * float(x.mean())

    with pytest.raises(flow.TraceError, match="__float__"):
        flow.jit(M())(flow.ones(3))


def test_data_dependent_indexing_inside_trace_is_a_trace_error():
    # views trace as graph nodes now; a boolean mask's result size depends on the data
    assert flow.jit(lambda x: x.permute(1, 0) + 1)(flow.ones(2, 3)).shape == (3, 2)
    with pytest.raises(flow.TraceError, match="boolean mask"):
        flow.jit(lambda x: x[x > 0] + 1)(flow.ones(2, 3))


def test_escaped_tracer_is_an_error():
    leaked = []

    @flow.jit
    def f(x):
        leaked.append(x * 2)
        return x + 1

    f(flow.ones(2))
    with pytest.raises(flow.TraceError):
        leaked[0] + 1


def test_error_inside_compiled_call_does_not_crash(gen):
    f = flow.jit(lambda x, y: x + y)
    a = to_flow(make((3,), torch.float32, gen))
    f(a, a)
    with pytest.raises(RuntimeError):
        f(a, flow.ones(4))
    assert f(a, a).shape == (3,)


def test_sizes_whose_element_or_byte_count_overflows_raise_like_torch():
    """A size product past int64 (or its bytes past it) raised nothing and left a tensor without
    memory behind it, which the next op read or wrote (a segfault): found by a fuzzing campaign."""
    cases = [
        lambda m: m.ones(1).expand(2**62) + 1,
        lambda m: m.empty(2**31, 2**31),
        lambda m: m.ones(1, 1).expand(2**32, 2**32).sum(),
        lambda m: m.ones(2, 3).repeat(2**31, 2**31),
    ]
    for i, fn in enumerate(cases):
        assert raises_like(lambda: fn(torch), lambda: fn(flow)), f"case {i}: torch accepts it"


def test_a_cached_eager_kernel_does_not_skip_an_argument_check():
    """pow(int tensor, -2) is an error; eagerly, a kernel compiled for pow(int tensor, 2) takes the
    exponent as an argument, so the op's graph-time check must not be the only one."""
    x = flow.tensor([2, 3, -1])
    assert flow.pow(x, 2).tolist() == [4, 9, 1]
    for fn in (lambda: flow.pow(x, -2), lambda: x ** -1):
        assert raises_like(lambda: torch.pow(torch.tensor([2, 3, -1]), -2), fn)


def test_exception_classes_torch_raises(gen):
    """The exception classes (and messages) of torch for: an out-of-range index found by a jitted
    gather's kernel (RuntimeError, where a jitted index_select's or indexing's is IndexError, both as
    torch's eager ops); the inf norms of an empty dim (RuntimeError); cumsum_ of bool
    (NotImplementedError)."""
    x = make((2, 3), torch.float32, gen)
    bad = torch.tensor([[0, 5]])
    same_error(lambda: torch.gather(x, 1, bad),
               lambda: flow.jit(lambda a, i: flow.gather(a, 1, i))(to_flow(x), to_flow(bad)))
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        flow.jit(lambda a, i: flow.index_select(a, 0, i))(flow.ones(3), flow.tensor([0, 5]))
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with size 3"):
        flow.jit(lambda a, i: a[i])(flow.ones(3), flow.tensor([0, -4]))
    for p in (float("inf"), float("-inf")):
        same_error(lambda: torch.nn.functional.normalize(torch.ones(2, 0), p=p, dim=1),
                   lambda: flow.nn.functional.normalize(flow.ones(2, 0), p=p, dim=1), exact=False)
        same_error(lambda: torch.norm(torch.ones(0, 2), p, 0), lambda: flow.norm(flow.ones(0, 2), p, 0), exact=False)
    same_error(lambda: torch.ones(3, dtype=torch.bool).cumsum_(0), lambda: flow.ones(3, dtype=flow.bool).cumsum_(0))
    y = flow.ones(3, dtype=flow.int64)
    assert y.cumsum_(0) is y and y.tolist() == [1, 2, 3]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_softmax_of_an_empty_integer_tensor_is_itself(dtype):
    """torch has no integer softmax, but an empty integer input comes back as it is (a new tensor);
    the dim is still checked."""
    for fn in ("softmax", "log_softmax"):
        x = torch.ones(0, 3, dtype=dtype)
        got = getattr(flow, fn)(to_flow(x), 1)
        assert got.dtype == to_flow(x).dtype and list(got.shape) == [0, 3]
        assert list(getattr(flow.nn.functional, fn)(to_flow(x), -1).shape) == list(getattr(torch, fn)(x, -1).shape)
        same_error(lambda: getattr(torch, fn)(x, 2), lambda: getattr(flow, fn)(to_flow(x), 2))
        same_error(lambda: getattr(torch, fn)(torch.ones(2, 3, dtype=dtype), 1),
                   lambda: getattr(flow, fn)(flow.ones(2, 3, dtype=to_flow(x).dtype), 1), exact=False)
