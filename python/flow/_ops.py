"""The math functions, with torch's names, argument orders and argument checks.

Each function validates its Python arguments the way torch's argument parser does (a non-tensor
where a tensor is required is a TypeError naming the argument and its position), converts them
to core attributes, and calls the one dispatcher (``_dispatch.dispatch``), which runs the op
eagerly or records it into an active trace. Shape and dtype checks are the core's (its messages
read like torch's).
"""
import builtins
import collections
import numbers
import operator

import numpy as np

from . import _C
from . import _dtype as D
from . import amp as _amp
from ._dispatch import dispatch, dispatch1
from ._eager_fusion import fused_in_eager
from ._errors import trace_error
from ._tensor import Tensor, _can_cast, _normalize_dim, rebind

__all__ = ["add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "pow", "neg", "negative",
           "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "clamp", "clip",
           "minimum", "maximum", "where", "eq", "ne", "lt", "le", "gt", "ge", "sum", "mean", "amax", "amin",
           "softmax", "log_softmax"]


def _type_name(x):
    return type(x).__name__


def _scalar(x):
    """A Python bool/int/float for a number argument (numpy scalars included), else None."""
    if isinstance(x, (bool, np.bool_)):
        return builtins.bool(x)
    if isinstance(x, numbers.Integral):
        return builtins.int(x)
    if isinstance(x, numbers.Real):
        return builtins.float(x)
    return None


def _tensor_arg(fn, x, name, pos):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not {_type_name(x)}")
    return x


def _tensor_or_number(fn, x, name, pos):
    if isinstance(x, Tensor):
        return x
    s = _scalar(x)
    if s is None:
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not {_type_name(x)}")
    return s


# ---- binary ----------------------------------------------------------------------------------


def _binary_op(op, a, b, reflected=False):
    """The operators (x + y, 2 * x, ...): like torch, a non-number operand is a TypeError."""
    sa, sb = (a if isinstance(a, Tensor) else _scalar(a)), (b if isinstance(b, Tensor) else _scalar(b))
    if sa is None or sb is None:
        bad = a if sa is None else b
        symbol = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "eq": "==", "ne": "!=", "lt": "<",
                  "le": "<=", "gt": ">", "ge": ">=", "floor_divide": "//", "remainder": "%", "bitwise_and": "&",
                  "bitwise_or": "|", "bitwise_xor": "^", "bitwise_left_shift": "<<", "bitwise_right_shift": ">>"}[op]
        if op in ("eq", "ne"):
            return NotImplemented
        left, right = (bad, b) if sa is None else (a, bad)
        raise TypeError(f"unsupported operand type(s) for {symbol}: '{_type_name(left)}' and '{_type_name(right)}'")
    if op in ("floor_divide", "remainder"):
        return _integer_division(op, sa, sb)
    return _pow(sa, sb) if op == "pow" else dispatch1(op, [sa, sb])


# torch computes pow(Tensor, Scalar) of a floating tensor by these exponents without pow (ATen's
# pow_tensor_scalar kernels: CUDA's, and the CPU's but for float16): sqrt, rsqrt, 1 / x, x * x, and
# x * x * x and 1 / (x * x) in float32 for the half types (their opmath), rounded once. So x ** 0.5
# is the correctly rounded sqrt, not a libm pow an ulp away, and (-inf) ** 0.5 is NaN.
_POW_SPECIAL = frozenset((0.5, -0.5, -1, 2, 3, -2))


@_amp.autocast_op("pow")  # pow's autocast class (float32 on CUDA) casts `base` before the ops run
def _pow_special(base, exponent):
    if exponent == 0.5:
        return dispatch1("sqrt", [base])
    if exponent == -0.5:
        return dispatch1("rsqrt", [base])
    if exponent == -1:
        return dispatch1("reciprocal", [base])
    if exponent == 2:
        return dispatch1("mul", [base, base])  # the exact float32 product of halves, rounded once
    return _cube_or_inverse_square(base, exponent == 3)


@fused_in_eager  # one kernel eagerly, where op by op it was two (four for the half types)
def _cube_or_inverse_square(base, cube: bool):
    """x * x * x or 1 / (x * x), in float32 for the half types and rounded once, as torch."""
    x = base if base.dtype.itemsize > 2 else base.to(D.float32)
    square = dispatch1("mul", [x, x])
    r = dispatch1("mul", [square, x]) if cube else dispatch1("reciprocal", [square])
    return r if r.dtype == base.dtype else r.to(base.dtype)


def _pow(base, exponent):
    """`base` ** `exponent` (a Tensor or Python number each)."""
    if (isinstance(base, Tensor) and base.dtype.is_floating_point and not isinstance(exponent, (Tensor, bool))
            and exponent in _POW_SPECIAL):
        return _pow_special(base, exponent)
    return dispatch1("pow", [base, exponent])


def _alpha_attrs(fn, alpha):
    if alpha is None:
        return {}
    s = _scalar(alpha)
    if s is None:
        raise TypeError(f"{fn}(): argument 'alpha' must be Number, not {_type_name(alpha)}")
    if isinstance(s, builtins.bool):
        return {"alpha": s}
    return {} if s == 1 and not isinstance(s, builtins.float) else {"alpha": s}


def add(input, other, *, alpha=1, out=None):
    args = [_tensor_arg("add", input, "input", 1), _tensor_or_number("add", other, "other", 2)]
    return _out("add", out, dispatch1("add", args, _alpha_attrs("add", alpha)))


def sub(input, other, *, alpha=1, out=None):
    args = [_tensor_arg("sub", input, "input", 1), _tensor_or_number("sub", other, "other", 2)]
    return _out("sub", out, dispatch1("sub", args, _alpha_attrs("sub", alpha)))


subtract = sub


def mul(input, other, *, out=None):
    args = [_tensor_arg("mul", input, "input", 1), _tensor_or_number("mul", other, "other", 2)]
    return _out("mul", out, dispatch1("mul", args))


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    x = _tensor_arg("div", input, "input", 1)
    y = _tensor_or_number("div", other, "other", 2)
    if rounding_mode is None:
        return _out("div", out, dispatch1("div", [x, y]))
    y_bool = y.dtype is D.bool_ if isinstance(y, Tensor) else isinstance(y, builtins.bool)
    if rounding_mode in ("floor", "trunc") and x.dtype is D.bool_ and y_bool:
        raise NotImplementedError(f'"div_{rounding_mode}_cpu" not implemented for \'Bool\'')
    if rounding_mode == "floor":
        return _out("div", out, _integer_division("floor_divide", x, y))
    if rounding_mode == "trunc":
        y_floating = y.dtype.is_floating_point if isinstance(y, Tensor) else isinstance(y, builtins.float)
        if x.dtype.is_floating_point or y_floating:  # a floating quotient, truncated
            return _out("div", out, dispatch1("trunc", [dispatch1("div", [x, y])]))
        # integers: the exact quotient of (x - fmod(x, y)) by y
        exact = dispatch1("sub", [x, _integer_division("fmod", x, y)])
        return _out("div", out, dispatch1("floor_divide", [exact, y]))
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                       f"'{rounding_mode}'")


divide = div
true_divide = div


def pow(input, exponent, *, out=None):
    if isinstance(input, Tensor):
        return _out("pow", out, _pow(input, _tensor_or_number("pow", exponent, "exponent", 2)))
    s = _scalar(input)
    if s is None or not isinstance(exponent, Tensor):
        _tensor_arg("pow", input, "input", 1)
        _tensor_arg("pow", exponent, "exponent", 2)
    return _out("pow", out, dispatch1("pow", [s, exponent]))


def _tensor_binary(op):
    def f(input, other, *, out=None):
        return _out(op, out, dispatch1(op, [_tensor_arg(op, input, "input", 1), _tensor_arg(op, other, "other", 2)]))

    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"torch.{op}(input, other): elementwise, with broadcasting and type promotion."
    return f


minimum = _tensor_binary("minimum")
maximum = _tensor_binary("maximum")


def _binary_number_ok(op, doc="elementwise, with broadcasting and type promotion"):
    """torch.{op}(input, other): `input` a tensor, `other` a tensor or a number."""
    def f(input, other, *, out=None):
        return _out(op, out, dispatch1(op, [_tensor_arg(op, input, "input", 1),
                                            _tensor_or_number(op, other, "other", 2)]))

    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"torch.{op}(input, other): {doc}."
    return f


def _compare(op):
    return _binary_number_ok(op, "elementwise comparison; a bool tensor")


eq = _compare("eq")
ne = _compare("ne")
lt = _compare("lt")
le = _compare("le")
gt = _compare("gt")
ge = _compare("ge")
not_equal = ne
less = lt
less_equal = le
greater = gt
greater_equal = ge


def where(condition, input=None, other=None, *, out=None):
    if input is None and other is None:
        if out is not None:
            raise TypeError("where(condition) takes no out= (it returns a tuple of index tensors)")
        from ._data_dependent import nonzero

        return nonzero(condition, as_tuple=True)  # torch: where(condition) is nonzero(as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() expected both input and other, or neither (where(condition) is "
                        "nonzero(condition, as_tuple=True))")
    c = _tensor_arg("where", condition, "condition", 1)
    x = _tensor_or_number("where", input, "input", 2)
    y = _tensor_or_number("where", other, "other", 3)
    return _out("where", out, dispatch1("where", [c, x, y]))


# ---- unary -----------------------------------------------------------------------------------


def _no_out(fn, out):
    if out is not None:
        raise NotImplementedError(f"flow: {fn}(out=...) is not supported")


# The functions whose out= must have the result's dtype exactly: torch's kernels for them write
# only the dtype they compute (matrix products, selections and gathers, sorts, the rounding and
# sign functions, clamp, the index and truth reductions, ...). Every other out= takes any dtype the
# result can be cast to. Read off torch 2.x function by function (float32 inputs, a float64 out=);
# names as flow's functions pass them to _out (mm, bmm, mv and dot write through matmul's, sgn
# through sign's).
_OUT_EXACT_DTYPE = frozenset({
    "matmul", "addmm", "addmv", "baddbmm", "tensordot", "multi_dot", "matrix_power",
    "cross", "linalg.cross", "linalg.vecdot", "norm", "linalg.vector_norm", "linalg.matrix_norm",
    "amax", "amin", "argmax", "argmin", "all", "any", "median", "nanmedian", "sort", "msort", "topk",
    "index_select", "gather", "take", "masked_select", "scatter", "where", "nonzero", "searchsorted",
    "clamp", "round", "frac", "abs", "neg", "floor", "ceil", "trunc", "sign", "signbit", "nan_to_num",
    "logcumsumexp", "heaviside", "float_power",
})


def _out(fn, out, result):
    """torch's out= contract: the result is cast into `out` (which must be able to hold its dtype, or
    for the functions of _OUT_EXACT_DTYPE have it); an `out` of another shape is resized (it gets
    new storage), one of the same shape is written in place, so views of it see the values."""
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise TypeError(f"{fn}(): argument 'out' must be Tensor, not {_type_name(out)}")
    if fn in _OUT_EXACT_DTYPE and out.dtype != result.dtype:
        raise RuntimeError(f"{fn}(): Expected out tensor to have dtype {_c10_name(result.dtype)}, but got "
                           f"{_c10_name(out.dtype)} instead")
    if not _can_cast(result.dtype, out.dtype):
        if fn in ("cat", "stack"):  # (torch's cat raises a TypeError here, and stack is cat)
            raise TypeError(f"torch.cat(): input types can't be cast to the desired output type "
                            f"{out.dtype._torch_short}")
        raise RuntimeError(f"result type {result.dtype._torch_short} can't be cast to the desired output type "
                           f"{out.dtype._torch_short}")
    if tuple(out.shape) != tuple(result.shape):
        if out._c is None or result._c is None:
            raise trace_error(f"{fn}(out=...)", "resizing `out` cannot be traced")
        rebind(out, _cast(result, out.dtype)._c)  # a fresh copy (the cast kernel always writes new storage)
        return out
    return out._assign(f"{fn}(out=...)", result)


def _unary(op):
    def f(input, *, out=None):
        return _out(op, out, dispatch1(op, [_tensor_arg(op, input, "input", 1)]))

    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"torch.{op}(input): elementwise."
    return f


neg = _unary("neg")
negative = neg
abs = _unary("abs")
absolute = abs
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")


def relu(input, inplace=False):
    r = dispatch1("relu", [_tensor_arg("relu", input, "input", 1)])
    return input._assign("relu_", r) if inplace else r


def gelu(input, approximate="none"):
    x = _tensor_arg("gelu", input, "input", 1)
    if not isinstance(approximate, str):
        raise TypeError(f"gelu(): argument 'approximate' must be str, not {_type_name(approximate)}")
    return dispatch1("gelu", [x], {"approximate": approximate})


def silu(input, inplace=False):
    r = dispatch1("silu", [_tensor_arg("silu", input, "input", 1)])
    return input._assign("silu_", r) if inplace else r


def _clamp_bound(name, v):
    if v is None or isinstance(v, Tensor):
        return v
    s = _scalar(v)
    if s is None:
        raise TypeError(f"clamp(): argument '{name}' must be Number, not {_type_name(v)}")
    return s


def clamp(input, min=None, max=None, *, out=None):
    return _out("clamp", out, _clamp(input, min, max))


def _clamp(input, min, max):
    x = _tensor_arg("clamp", input, "input", 1)
    lo, hi = _clamp_bound("min", min), _clamp_bound("max", max)
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        # Tensor bounds: torch.clamp(x, min=t) == minimum(maximum(x, min), max), with promotion.
        r = x
        if lo is not None:
            r = maximum(r, lo if isinstance(lo, Tensor) else _full_like_scalar(lo, r))
        if hi is not None:
            r = minimum(r, hi if isinstance(hi, Tensor) else _full_like_scalar(hi, r))
        return r
    return dispatch1("clamp", [x], {"min": lo, "max": hi})


clip = clamp


def _full_like_scalar(v, like):
    from . import _creation

    return _creation.tensor(v, dtype=like.dtype)


def _cast(x, dtype):
    return dispatch1("cast", [x], {"dtype": dtype.name})


# ---- reductions ------------------------------------------------------------------------------


def _dims(fn, dim):
    """dim: None (all), an int or a sequence of ints -> a list (or None)."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list, D.Size)):
        out = []
        for d in dim:
            if isinstance(d, builtins.bool) or not isinstance(d, numbers.Integral):
                raise TypeError(f"{fn}(): argument 'dim' must be tuple of ints, but found element of type "
                                f"{_type_name(d)} at pos {len(out)}")
            out.append(builtins.int(d))
        return out
    if isinstance(dim, builtins.bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"{fn}(): argument 'dim' must be tuple of ints, not {_type_name(dim)}")
    return [operator.index(dim)]


def _check_keepdim(fn, keepdim):
    if not isinstance(keepdim, (builtins.bool, np.bool_)):
        raise TypeError(f"{fn}(): argument 'keepdim' must be bool, not {_type_name(keepdim)}")
    return builtins.bool(keepdim)


def _reduce(op, input, dim, keepdim, dtype=None):
    x = _tensor_arg(op, input, "input", 1)
    attrs = {"keepdim": _check_keepdim(op, keepdim)}
    dims = _dims(op, dim)
    if dims is not None:
        attrs["dims"] = dims
    if dtype is not None:
        attrs["dtype"] = D.to_dtype(dtype).name
    return dispatch1(op, [x], attrs)


def _out_dtype(dtype, out):
    """sum, prod, cumsum and cumprod compute in out's dtype when out= is given without dtype= (torch
    casts the input first: sum([0.6, 1.7]) into an int64 out is 1)."""
    return out.dtype if dtype is None and isinstance(out, Tensor) else dtype


def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    return _out("sum", out, _reduce("sum", input, dim, keepdim, _out_dtype(dtype, out)))


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    return _out("mean", out, _reduce("mean", input, dim, keepdim, dtype))


def amax(input, dim=(), keepdim=False, *, out=None):
    return _out("amax", out, _reduce("amax", input, dim, keepdim))


def amin(input, dim=(), keepdim=False, *, out=None):
    return _out("amin", out, _reduce("amin", input, dim, keepdim))


def _softmax_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1  # torch's legacy implicit dim


def _softmax(op, input, dim, dtype):
    x = _tensor_arg(op, input, "input", 1)
    if dim is None:
        raise TypeError(f'{op}() missing 1 required positional arguments: "dim"')
    if isinstance(dim, builtins.bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {_type_name(dim)}")
    attrs = {"dim": builtins.int(dim)}
    if dtype is not None:
        attrs["dtype"] = D.to_dtype(dtype).name
    elif not x.dtype.is_floating_point and x.numel() == 0:
        # torch has no integer softmax, but returns an empty integer input as it is (a copy)
        _normalize_dim(dim, x.ndim)
        return _cast(x, x.dtype)
    return dispatch1(op, [x], attrs)


def softmax(input, dim, dtype=None):
    return _softmax("softmax", input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    return _softmax("log_softmax", input, dim, dtype)


# ---- more elementwise ------------------------------------------------------------------------

erf = _unary("erf")
log1p = _unary("log1p")
expm1 = _unary("expm1")
sin = _unary("sin")
cos = _unary("cos")
floor = _unary("floor")
ceil = _unary("ceil")
trunc = _unary("trunc")
fix = trunc
sign = _unary("sign")
reciprocal = _unary("reciprocal")
square = _unary("square")
logical_not = _unary("logical_not")
bitwise_not = _unary("bitwise_not")
isnan = _unary("isnan")
isinf = _unary("isinf")
isfinite = _unary("isfinite")


def round(input, *, decimals=0, out=None):
    x = _tensor_arg("round", input, "input", 1)
    return _out("round", out, dispatch1("round", [x], {"decimals": decimals} if decimals else {}))


def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    x = _tensor_arg("nan_to_num", input, "input", 1)
    attrs = {"nan": builtins.float(nan)}
    if posinf is not None:
        attrs["posinf"] = builtins.float(posinf)
    if neginf is not None:
        attrs["neginf"] = builtins.float(neginf)
    return _out("nan_to_num", out, dispatch1("nan_to_num", [x], attrs))


def _divides_by_zero(divisor) -> builtins.bool:
    """Whether an integer divisor has a zero in it: a number, or an eager CPU tensor (read on the host;
    torch's CUDA kernels, as flow's and compiled graphs, do not check)."""
    if not isinstance(divisor, Tensor):
        return divisor == 0
    from ._indexing import _host_array, _host_checks_indices

    return _host_checks_indices(divisor) and builtins.bool((_host_array(divisor._c) == 0).any())


def _integer_division(op, x, y):
    """floor_divide, remainder or fmod, with torch's CPU refusal of an integer division by zero."""
    r = dispatch1(op, [x, y])
    if r.numel() and not r.dtype.is_floating_point and _divides_by_zero(y):
        raise RuntimeError("ZeroDivisionError")
    return r


def _division_op(op):
    def f(input, other, *, out=None):
        # torch's remainder and floor_divide also take a number first (fmod does not)
        first = _tensor_or_number(op, input, "input", 1) if op != "fmod" and isinstance(other, Tensor) else \
            _tensor_arg(op, input, "input", 1)
        return _out(op, out, _integer_division(op, first, _tensor_or_number(op, other, "other", 2)))

    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"torch.{op}(input, other): elementwise, with broadcasting and type promotion; an integer " \
                "division by zero raises on the CPU, as torch's."
    return f


floor_divide = _division_op("floor_divide")
remainder = _division_op("remainder")
fmod = _division_op("fmod")
logical_and = _binary_number_ok("logical_and")
logical_or = _binary_number_ok("logical_or")
logical_xor = _binary_number_ok("logical_xor")
bitwise_and = _binary_number_ok("bitwise_and", "elementwise and of the bits (ints) or logical and (bool)")
bitwise_or = _binary_number_ok("bitwise_or", "elementwise or of the bits (ints) or logical or (bool)")
bitwise_xor = _binary_number_ok("bitwise_xor", "elementwise xor of the bits (ints) or logical xor (bool)")
bitwise_left_shift = _binary_number_ok("bitwise_left_shift", "ints shifted left (a count outside [0, bits): 0)")
bitwise_right_shift = _binary_number_ok("bitwise_right_shift",
                                        "ints shifted right arithmetically (a count outside [0, bits): the sign)")


def masked_fill(input, mask, value):
    """torch.masked_fill: `value` (a number or 0-dim tensor) where `mask` (bool) is True; the result
    has input's dtype and the broadcast shape of input and mask."""
    x = _tensor_arg("masked_fill", input, "input", 1)
    m = _tensor_arg("masked_fill", mask, "mask", 2)
    if m.dtype is not D.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_c10_name(m.dtype)}")
    from ._creation import check_fill_value

    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        check_fill_value(value, x.dtype)
        v = value if value.dtype is x.dtype else _cast(value, x.dtype)
    else:
        s = _scalar(value)
        if s is None:
            raise TypeError(f"masked_fill(): argument 'value' must be Number, not {_type_name(value)}")
        check_fill_value(s, x.dtype)
        v = (builtins.bool(s) if x.dtype is D.bool_ else
             s if x.dtype.is_floating_point else builtins.int(s) if not (isinstance(s, builtins.float) and s != s)
             else s)
    r = dispatch1("where", [m, v, x])
    return r if r.dtype is x.dtype else _cast(r, x.dtype)


def _c10_name(dt):
    return {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
            "int64": "long int", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double"}[dt.name]


# ---- more reductions -------------------------------------------------------------------------


class return_types:
    """torch.return_types: the named tuples of (values, indices) reductions."""

    max = collections.namedtuple("max", ["values", "indices"])
    min = collections.namedtuple("min", ["values", "indices"])
    sort = collections.namedtuple("sort", ["values", "indices"])
    topk = collections.namedtuple("topk", ["values", "indices"])


def _one_dim(fn, dim):
    if isinstance(dim, builtins.bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"{fn}(): argument 'dim' must be int, not {_type_name(dim)}")
    return builtins.int(dim)


_NO_DIM = object()  # max(x) reduces all; max(x, None) is torch's TypeError, as is keepdim without a dim


def _max_min(fn, input, dim, keepdim, out):
    if dim is None or (dim is _NO_DIM and keepdim is not False):
        given = ", ".join(["Tensor"] + (["NoneType"] if dim is None else []) + (
            [f"keepdim={_type_name(keepdim)}"] if keepdim is not False else []))
        raise TypeError(f"{fn}() received an invalid combination of arguments - got ({given}), but expected one "
                        f"of: (Tensor input), (Tensor input, Tensor other), (Tensor input, int dim, bool keepdim)")
    if isinstance(dim, Tensor):  # torch.max(a, b) is maximum
        if keepdim is not False:
            raise TypeError(f"{fn}(): 'keepdim' is not an argument of {fn}(input, other)")
        return (maximum if fn == "max" else minimum)(input, dim, out=out)
    x = _tensor_arg(fn, input, "input", 1)
    if dim is _NO_DIM:
        if x.numel() == 0:
            raise RuntimeError(f"{fn}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                               f"reduction dim with the 'dim' argument.")
        return _out(fn, out, dispatch1("amax" if fn == "max" else "amin", [x], {"keepdim": False}))
    v, i = dispatch(fn + "_dim", [x], {"dim": _one_dim(fn, dim), "keepdim": _check_keepdim(fn, keepdim)})
    if out is not None:
        _out(fn, out[0], v)
        _out(fn, out[1], i)
        v, i = out
    return getattr(return_types, fn)(v, i)


def max(input, dim=_NO_DIM, keepdim=False, *, out=None):
    """torch.max(input) -> amax of all; max(input, dim, keepdim) -> (values, indices); max(a, b) ->
    maximum."""
    return _max_min("max", input, dim, keepdim, out)


def min(input, dim=_NO_DIM, keepdim=False, *, out=None):
    return _max_min("min", input, dim, keepdim, out)


def _arg(fn, input, dim, keepdim):
    x = _tensor_arg(fn, input, "input", 1)
    if x.dtype is D.bool_:
        raise NotImplementedError(f"{fn}(): does not support bool input")
    attrs = {"keepdim": _check_keepdim(fn, keepdim)}
    if dim is not None:
        attrs["dim"] = _one_dim(fn, dim)
    return dispatch1(fn, [x], attrs)


def argmax(input, dim=None, keepdim=False, *, out=None):
    return _out("argmax", out, _arg("argmax", input, dim, keepdim))


def argmin(input, dim=None, keepdim=False, *, out=None):
    return _out("argmin", out, _arg("argmin", input, dim, keepdim))


def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):
    if dim is not None:
        dim = _one_dim("prod", dim)
    return _out("prod", out, _reduce("prod", input, dim, keepdim, _out_dtype(dtype, out)))


def _truth_reduce(name, input, dim, keepdim):
    if isinstance(dim, (tuple, list)) and not dim and isinstance(input, Tensor):
        r = input != 0  # torch: any/all over no dims reduce nothing (sum and the others reduce all)
    else:
        r = _reduce(name, input, dim, keepdim)
    # torch's legacy rule: any/all of a uint8 tensor is a uint8 tensor of 0s and 1s
    return r.to(D.uint8) if isinstance(input, Tensor) and input.dtype is D.uint8 else r


def any(input, dim=None, keepdim=False, *, out=None):
    return _out("any", out, _truth_reduce("any", input, dim, keepdim))


def all(input, dim=None, keepdim=False, *, out=None):
    return _out("all", out, _truth_reduce("all", input, dim, keepdim))


def _var_attrs(fn, input, dim, unbiased, keepdim, correction):
    x = _tensor_arg(fn, input, "input", 1)
    if isinstance(dim, builtins.bool):  # var(input, unbiased)
        dim, unbiased = None, dim
    if not x.dtype.is_floating_point:
        raise NotImplementedError("std and var only support floating point and complex dtypes")
    attrs = {"keepdim": _check_keepdim(fn, keepdim)}
    dims = _dims(fn, dim)
    if dims is not None:
        attrs["dims"] = dims
    if correction is not None:
        if unbiased is not None:
            raise RuntimeError(f"{fn}: can't specify both unbiased and correction")
        attrs["correction"] = builtins.float(correction)
    elif unbiased is not None:
        attrs["unbiased"] = builtins.bool(unbiased)
    return x, attrs


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    x, attrs = _var_attrs("var", input, dim, unbiased, keepdim, correction)
    return _out("var", out, dispatch1("var", [x], attrs))


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    x, attrs = _var_attrs("std", input, dim, unbiased, keepdim, correction)
    return _out("std", out, dispatch1("std", [x], attrs))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    x, attrs = _var_attrs("var_mean", input, dim, unbiased, keepdim, correction)
    return tuple(dispatch("var_mean", [x], attrs))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    x, attrs = _var_attrs("std_mean", input, dim, unbiased, keepdim, correction)
    return tuple(dispatch("std_mean", [x], attrs))


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    x = _tensor_arg("norm", input, "input", 1)
    if dtype is not None:
        x = _cast(x, D.to_dtype(dtype))
    fro = isinstance(p, str)
    if fro:
        if p != "fro":
            raise NotImplementedError(f"flow: norm(p='{p}') is not supported")
        p = 2.0
    elif p is None:
        p = 2.0
    attrs = {"keepdim": _check_keepdim("norm", keepdim), "p": builtins.float(p)}
    dims = _dims("norm", dim)
    if fro and dims is not None and len(dims) > 2:  # torch's Frobenius norm is a matrix norm there
        given = dim if isinstance(dim, (tuple, list)) else [dim]
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in given)}")
    if dims is not None:
        attrs["dims"] = dims
    return _out("norm", out, dispatch1("norm", [x], attrs))


def logsumexp(input, dim, keepdim=False, *, out=None):
    x = _tensor_arg("logsumexp", input, "input", 1)
    attrs = {"keepdim": _check_keepdim("logsumexp", keepdim)}
    dims = _dims("logsumexp", dim)
    if dims is not None:
        attrs["dims"] = dims
    return _out("logsumexp", out, dispatch1("logsumexp", [x], attrs))


def _scan(fn, input, dim, dtype, out):
    x = _tensor_arg(fn, input, "input", 1)
    attrs = {"dim": _one_dim(fn, dim)}
    if dtype is not None:
        attrs["dtype"] = D.to_dtype(dtype).name
        if attrs["dtype"] == "bool":  # (as torch: a scan into bool has no kernel)
            raise NotImplementedError(f"\"{fn}\" not implemented for 'Bool'")
    return _out(fn, out, dispatch1(fn, [x], attrs))


def cumsum(input, dim, *, dtype=None, out=None):
    return _scan("cumsum", input, dim, _out_dtype(dtype, out), out)


def cumprod(input, dim, *, dtype=None, out=None):
    return _scan("cumprod", input, dim, _out_dtype(dtype, out), out)


# ---- sorting ----------------------------------------------------------------------------------
# One op, argsort (dsl/ops/sort.cpp): the positions of the first k elements of each line in sorted
# order, under a total order (NaN above every number, ties by position), so the result is always
# that of a stable sort. The values are a gather through those positions.


def _check_bool(fn, name, v):
    if not isinstance(v, builtins.bool):
        raise TypeError(f"{fn}(): argument '{name}' must be bool, not {_type_name(v)}")
    return v


def _argsort(fn, x, dim, descending, k=None):
    attrs = {"dim": _one_dim(fn, dim), "descending": descending}
    if k is not None:
        attrs["k"] = k
    if x.dtype in (D.uint8, D.int8, D.int16):  # the op sorts int32 keys; the values are exact there
        x = x.to(D.int32)
    return dispatch1("argsort", [x], attrs)


def _values_at(x, dim, indices):
    if x.ndim == 0:
        return x.clone()
    return dispatch1("gather", [x, indices], {"dim": _normalize_dim(dim, x.ndim)})


def _pair_out(fn, out, values, indices):
    if out is None:
        return getattr(return_types, fn)(values, indices)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"{fn}(): argument 'out' must be tuple of Tensors")
    _out(fn, out[0], values)
    _out(fn, out[1], indices)
    return getattr(return_types, fn)(out[0], out[1])


def sort(input, dim=-1, descending=False, *, stable=False, out=None):
    """torch.sort -> (values, indices). Ties keep their order whatever `stable` says (one of the
    answers torch allows for stable=False); NaN sorts above every number."""
    x = _tensor_arg("sort", input, "input", 1)
    _check_bool("sort", "descending", descending)
    if stable is not None:
        _check_bool("sort", "stable", stable)
    indices = _argsort("sort", x, dim, descending)
    return _pair_out("sort", out, _values_at(x, dim, indices), indices)


def argsort(input, dim=-1, descending=False, stable=False):
    x = _tensor_arg("argsort", input, "input", 1)
    _check_bool("argsort", "descending", descending)
    _check_bool("argsort", "stable", stable)
    return _argsort("argsort", x, dim, descending)


def msort(input, *, out=None):
    return _out("msort", out, sort(input, 0).values)


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """torch.topk -> (values, indices), always in sorted order (which `sorted=False` allows), equal
    values by position."""
    x = _tensor_arg("topk", input, "input", 1)
    if isinstance(k, builtins.bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"topk(): argument 'k' (position 2) must be int, not {_type_name(k)}")
    _check_bool("topk", "largest", largest)
    _check_bool("topk", "sorted", sorted)
    k = builtins.int(k)
    if x.ndim == 0 and k == 0:  # torch: the 0-d tensor itself, index 0 (k is checked against 1 element)
        k = 1
    indices = _argsort("topk", x, dim, largest, k)
    return _pair_out("topk", out, _values_at(x, dim, indices), indices)


# ---- shape ops, joins and gathers -----------------------------------------------------------


def _tensor_list(fn, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{_type_name(tensors)}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, but found element "
                            f"of type {_type_name(t)} at pos {i}")
    return list(tensors)


def cat(tensors, dim=0, *, out=None):
    ts = _tensor_list("cat", tensors)
    if not ts:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    if isinstance(dim, builtins.bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"cat(): argument 'dim' must be int, not {_type_name(dim)}")
    # torch skips legacy empty 1-D tensors (shape [0]) next to tensors of higher rank (and takes any
    # dim when every input is one), but their dtypes still take part in the result's
    legacy = [t.ndim == 1 and t.shape[0] == 0 for t in ts]
    if builtins.any(legacy) and (builtins.all(legacy) or builtins.any(t.ndim > 1 for t in ts)):
        from ._math import promote_types

        want = ts[0].dtype
        for t in ts[1:]:
            want = promote_types(want, t.dtype)
        kept = [t for t, skip in zip(ts, legacy) if not skip] or [ts[0]]
        r = dispatch1("cat", kept, {"dim": 0 if builtins.all(legacy) else builtins.int(dim)})
        return _out("cat", out, r if r.dtype is want else _cast(r, want))
    return _out("cat", out, dispatch1("cat", ts, {"dim": builtins.int(dim)}))


concat = cat
concatenate = cat


def stack(tensors, dim=0, *, out=None):
    ts = _tensor_list("stack", tensors)
    if not ts:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(ts[1:], 1):
        if tuple(t.shape) != tuple(ts[0].shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ts[0].shape)} at entry 0 "
                               f"and {list(t.shape)} at entry {i}")
    d = _normalize_dim(dim, ts[0].ndim + 1)
    return _out("stack", out, dispatch1("cat", [t.unsqueeze(d) for t in ts], {"dim": d}))


def hstack(tensors, *, out=None):
    ts = [t.reshape(1) if t.ndim == 0 else t for t in _tensor_list("hstack", tensors)]
    return cat(ts, 0 if ts and ts[0].ndim == 1 else 1, out=out)


def vstack(tensors, *, out=None):
    ts = [t.reshape(1, -1) if t.ndim < 2 else t for t in _tensor_list("vstack", tensors)]
    return cat(ts, 0, out=out)


def _check_range(ix, size, dim, refusing_negatives=None):
    if ix._c is not None and ix.numel() > 0:
        from ._indexing import _check_index_range

        _check_index_range(ix, size, dim, refusing_negatives)


def _index_select_wrapping(x, dim, ix):
    """index_select with Python's negative indices wrapped (advanced indexing, take): indices in
    [-size, size) are valid, others raise."""
    d = _normalize_dim(dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if size == 0 or x.numel() != 0:  # (torch's indexing reads nothing, and checks nothing, when another dim is 0)
        _check_range(ix, size, d)
    return dispatch1("index_select", [x, ix], {"dim": d})


def index_select(input, dim, index, *, out=None):
    x = _tensor_arg("index_select", input, "input", 1)
    ix = _tensor_arg("index_select", index, "index", 3)
    d = _normalize_dim(dim, x.ndim)
    if ix.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if x.ndim == 0 and ix.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {ix.numel()} value(s)")
    if ix.dtype in (D.int32, D.int64):
        # Compiled and CUDA kernels check each index they read against [0, size) ("nonnegative").
        _check_range(ix, x.shape[d] if x.ndim else 1, d, "index_select")
    return _out("index_select", out, dispatch1("index_select", [x, ix], {"dim": d, "nonnegative": 1}))


def gather(input, dim, index, *, sparse_grad=False, out=None):
    x = _tensor_arg("gather", input, "input", 1)
    ix = _tensor_arg("gather", index, "index", 3)
    d = _normalize_dim(dim, x.ndim)
    if ix.dtype is not D.int64:
        raise RuntimeError("gather(): Expected dtype int64 for index")
    if ix.ndim != x.ndim and not (x.ndim == 0 and ix.ndim <= 1) and not (ix.ndim == 0 and x.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if ix.ndim == x.ndim:
        for k in range(x.ndim):
            if k != d and ix.shape[k] > x.shape[k]:
                raise RuntimeError(f"Size does not match at dimension {k} expected index {list(ix.shape)} to be no "
                                   f"larger than self {list(x.shape)} apart from dimension {d}")
    if x.ndim == 0 or ix.ndim == 0:  # a 0-d tensor counts as one element along dim 0
        x1, ix1 = x.reshape([-1]), ix.reshape([-1])
        _check_range(ix1, x1.shape[0], 0, "gather")
        r = dispatch1("gather", [x1, ix1], {"dim": 0, "nonnegative": 1}).reshape(list(ix.shape))
        return _out("gather", out, r)
    _check_range(ix, x.shape[d], d, "gather")
    return _out("gather", out, dispatch1("gather", [x, ix], {"dim": d, "nonnegative": 1}))


def take_along_dim(input, indices, dim=None, *, out=None):
    """torch.take_along_dim: gather along dim after broadcasting input and indices over the other
    dims (numpy's take_along_axis); dim=None takes from the flattened input."""
    x = _tensor_arg("take_along_dim", input, "input", 1)
    ix = _tensor_arg("take_along_dim", indices, "indices", 2)
    if ix.dtype is not D.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{ix.dtype._torch_short}")
    if dim is None:
        return _out("take_along_dim", out, gather(x.reshape(-1), 0, ix.reshape(-1)))
    if x.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = _normalize_dim(dim, x.ndim)
    if ix.ndim != x.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {x.ndim} dimensions for input, and {ix.ndim} dimensions for indices")
    xs, ixs = list(x.shape), list(ix.shape)
    common = []
    for k, (a, b) in enumerate(zip(xs, ixs)):
        if k != d and a != b and a != 1 and b != 1:
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton "
                               f"dimension {k}")
        common.append(1 if k == d else builtins.max(a, b) if a and b else 0)
    x = x.expand(common[:d] + [xs[d]] + common[d + 1:])
    ix = ix.expand(common[:d] + [ixs[d]] + common[d + 1:])
    return _out("take_along_dim", out, gather(x, d, ix))


def reshape(input, shape):
    return _tensor_arg("reshape", input, "input", 1).reshape(shape)


def permute(input, dims):
    return _tensor_arg("permute", input, "input", 1).permute(dims)


def transpose(input, dim0, dim1):
    return _tensor_arg("transpose", input, "input", 1).transpose(dim0, dim1)


swapaxes = transpose
swapdims = transpose


def t(input):
    return _tensor_arg("t", input, "input", 1).t()


def flatten(input, start_dim=0, end_dim=-1):
    return _tensor_arg("flatten", input, "input", 1).flatten(start_dim, end_dim)


def unflatten(input, dim, sizes):
    return _tensor_arg("unflatten", input, "input", 1).unflatten(dim, sizes)


def squeeze(input, dim=None):
    return _tensor_arg("squeeze", input, "input", 1).squeeze(dim)


def unsqueeze(input, dim):
    return _tensor_arg("unsqueeze", input, "input", 1).unsqueeze(dim)


def narrow(input, dim, start, length):
    return _tensor_arg("narrow", input, "input", 1).narrow(dim, start, length)


def chunk(input, chunks, dim=0):
    return _tensor_arg("chunk", input, "input", 1).chunk(chunks, dim)


def split(tensor, split_size_or_sections, dim=0):
    return _tensor_arg("split", tensor, "tensor", 1).split(split_size_or_sections, dim)


def tensor_split(input, indices_or_sections, dim=0):
    return _tensor_arg("tensor_split", input, "input", 1).tensor_split(indices_or_sections, dim)


def unbind(input, dim=0):
    return _tensor_arg("unbind", input, "input", 1).unbind(dim)


def select(input, dim, index):
    return _tensor_arg("select", input, "input", 1).select(dim, index)


def movedim(input, source, destination):
    return _tensor_arg("movedim", input, "input", 1).movedim(source, destination)


moveaxis = movedim


def as_strided(input, size, stride, storage_offset=None):
    return _tensor_arg("as_strided", input, "input", 1).as_strided(size, stride, storage_offset)


def broadcast_to(input, size):
    return _tensor_arg("broadcast_to", input, "input", 1).expand(size)


def clone(input, *, memory_format=None):
    return _tensor_arg("clone", input, "input", 1).clone(memory_format=memory_format)


def flip(input, dims):
    """torch.flip (a copy, as in torch): one injective op reversing the index along each of dims."""
    x = _tensor_arg("flip", input, "input", 1)
    ds = _dims("flip", dims) or []
    seen = []
    for d in ds:
        nd = _normalize_dim(d, x.ndim)
        if nd in seen:
            raise RuntimeError(f"dim {nd} appears multiple times in the list of dims")
        seen.append(nd)
    flipped = [d for d in seen if x.ndim and x.shape[d] > 1]  # (a 0-dim tensor takes dim 0 or -1)
    if not flipped:
        return x.clone()
    return dispatch1("flip", [x], {"dims": flipped})


def _tri(fn, input, diagonal, upper, out):
    x = _tensor_arg(fn, input, "input", 1)
    if x.ndim < 2:
        raise RuntimeError(f"{fn}: input tensor must have at least 2 dimensions")
    from . import _creation

    rows, cols = x.shape[-2], x.shape[-1]
    d = (_creation.arange(cols, device=x.device).reshape(1, cols) -
         _creation.arange(rows, device=x.device).reshape(rows, 1))
    keep = d >= diagonal if upper else d <= diagonal
    zero = False if x.dtype is D.bool_ else 0
    r = dispatch1("where", [keep, x, zero])
    return _out(fn, out, r if r.dtype is x.dtype else _cast(r, x.dtype))


def triu(input, diagonal=0, *, out=None):
    return _tri("triu", input, diagonal, True, out)


def tril(input, diagonal=0, *, out=None):
    return _tri("tril", input, diagonal, False, out)


# ---- matrix products --------------------------------------------------------------------------

_HALF = ("float16", "bfloat16")


def matmul(input, other, *, out=None):
    """torch.matmul. float16/bfloat16 operands (same dtype) are multiplied in float32 and the result
    rounded back, as torch's CPU kernels accumulate them in float32."""
    x = _tensor_arg("matmul", input, "input", 1)
    y = _tensor_arg("matmul", other, "other", 2)
    if x.dtype is y.dtype and x.dtype.name in _HALF:
        r = _cast(_matmul(_cast(x, D.float32), _cast(y, D.float32)), x.dtype)
    elif x.dtype is y.dtype and not x.dtype.is_floating_point and x.dtype is not D.bool_:
        r = _integer_matmul(x, y)
    else:
        r = _matmul(x, y)
    return _out("matmul", out, r)


def _integer_matmul(x, y):
    """An integer product, exact as torch's CPU kernels (wrapping in the operands' dtype): the
    library op takes floating-point tensors, so this is a broadcast product summed over k (in
    int64, whose wrap agrees with the dtype's), which @flow.jit fuses into one reduction kernel.
    Shapes are checked by the matmul op itself on float32 stand-ins, so errors are its own. (torch
    refuses integer products on CUDA; flow computes them there too.)"""
    probe = _C.Graph()
    probe.add_op("matmul", [probe.add_input(list(x.shape), "float32"), probe.add_input(list(y.shape), "float32")])
    a = x.unsqueeze(0) if x.ndim == 1 else x  # [..., m, k]
    b = y.unsqueeze(-1) if y.ndim == 1 else y  # [..., k, n]
    k = a.shape[-1]
    step = builtins.max(k, 1)
    if x._c is not None and y._c is not None:  # eager: the product is stored, so bound it
        rows = int(np.prod(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))) * a.shape[-2]
        step = builtins.max(1, (1 << 24) // builtins.max(1, rows * b.shape[-1]))  # 2^24 products at a time
    if step >= k:
        r = sum(a.unsqueeze(-1) * b.unsqueeze(-3), -2)
    else:
        r = None
        for k0 in range(0, k, step):
            n = builtins.min(step, k - k0)
            part = sum(a.narrow(-1, k0, n).unsqueeze(-1) * b.narrow(-2, k0, n).unsqueeze(-3), -2)
            r = part if r is None else r + part
    r = _cast(r, x.dtype)
    if x.ndim == 1:
        r = r.squeeze(-2)
    return r.squeeze(-1) if y.ndim == 1 else r


def _maybe_zero_stride(t):
    """Whether `t` may have a zero stride on a dim of size > 1 (tracers: views of an expand and graph
    inputs, whose layouts are the call's)."""
    if t._c is not None:
        return builtins.any(st == 0 and n > 1 for n, st in zip(t._c.shape, t._c.strides))
    return t._vid in t._ctx.broadcast_views or t._vid in t._ctx.graph.inputs


def _dense(t):
    return t.contiguous() if t._c is not None else t * 1


def _matmul(x, y):
    # Works around a core bug (jit/library_ops.cpp run_matmul): a batch dim that an operand
    # broadcasts by stride 0 is treated as size 1, and when the other operand's dim there is 1 too,
    # the output keeps one batch element (the rest is left unwritten). So: a batched `x` times a
    # matrix/vector folds the batch into rows (torch's own strategy); other batch broadcasts get
    # dense operands.
    k = x.shape[-1] if x.ndim else -1
    if k == 0 and y.ndim and y.shape[-2 if y.ndim >= 2 else 0] == 0 and x.dtype is y.dtype:
        # core bug workaround: an empty contraction leaves the output unwritten; it is all zeros
        shape = dispatch1("matmul", [x, y]).shape  # (checks and the result shape)
        from . import _creation

        return _creation.zeros(list(shape), dtype=x.dtype, device=x.device)
    if x.ndim >= 3 and y.ndim <= 2 and x.dtype is y.dtype and x.shape[-1] == y.shape[0]:
        lead = list(x.shape[:-1])
        r = dispatch1("matmul", [x.reshape(-1, x.shape[-1]), y])
        return r.reshape(lead + ([y.shape[1]] if y.ndim == 2 else []))
    if builtins.max(x.ndim, y.ndim) >= 3:
        bx = list(x.shape[:-2]) if x.ndim >= 2 else []
        by = list(y.shape[:-2]) if y.ndim >= 2 else []
        n = builtins.max(len(bx), len(by))
        bx, by = [1] * (n - len(bx)) + bx, [1] * (n - len(by)) + by
        if bx != by:
            x = _dense(x) if x.ndim >= 3 and _maybe_zero_stride(x) else x
            y = _dense(y) if y.ndim >= 3 and _maybe_zero_stride(y) else y
        elif _maybe_zero_stride(x) and _maybe_zero_stride(y):
            x = _dense(x)
    return dispatch1("matmul", [x, y])


@_amp.autocast_op("mm")
def mm(input, mat2, *, out=None):
    x = _tensor_arg("mm", input, "input", 1)
    y = _tensor_arg("mm", mat2, "mat2", 2)
    if x.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if y.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return matmul(x, y, out=out)


@_amp.autocast_op("bmm")
def bmm(input, mat2, *, out=None):
    x = _tensor_arg("bmm", input, "input", 1)
    y = _tensor_arg("bmm", mat2, "mat2", 2)
    if x.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if y.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if y.shape[0] != x.shape[0] or y.shape[1] != x.shape[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{x.shape[0]}, "
                           f"{x.shape[2]}] but got: [{y.shape[0]}, {y.shape[1]}].")
    return matmul(x, y, out=out)


@_amp.autocast_op("mv")
def mv(input, vec, *, out=None):
    x = _tensor_arg("mv", input, "input", 1)
    v = _tensor_arg("mv", vec, "vec", 2)
    if x.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {x.ndim}, {v.ndim}")
    return matmul(x, v, out=out)


@_amp.autocast_op("dot")
def dot(input, tensor, *, out=None):
    x = _tensor_arg("dot", input, "input", 1)
    y = _tensor_arg("dot", tensor, "tensor", 2)
    if x.ndim != 1 or y.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {x.ndim}D and {y.ndim}D tensors")
    return matmul(x, y, out=out)


def outer(input, vec2, *, out=None):
    x = _tensor_arg("outer", input, "input", 1)
    y = _tensor_arg("outer", vec2, "vec2", 2)
    return _out("outer", out, mul(x.reshape(-1, 1), y.reshape(1, -1)))


ger = outer


def _scaled_sum(fn, input, prod, beta, alpha):
    """beta * input + alpha * prod, torch's addmm/baddbmm: beta == 0 ignores input (NaN too)."""
    input.expand(list(prod.shape))  # torch's check: input broadcasts to the product's shape
    if alpha != 1:
        prod = mul(prod, alpha)
    if beta == 0:
        return prod
    return add(prod, input if beta == 1 else mul(input, beta))


@_amp.autocast_op("addmm")
def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    x = _tensor_arg("addmm", input, "input", 1)
    return _out("addmm", out, _scaled_sum("addmm", x, mm(mat1, mat2), beta, alpha))


@_amp.autocast_op("baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    x = _tensor_arg("baddbmm", input, "input", 1)
    return _out("baddbmm", out, _scaled_sum("baddbmm", x, bmm(batch1, batch2), beta, alpha))


@_amp.autocast_op("addmv")
def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    x = _tensor_arg("addmv", input, "input", 1)
    return _out("addmv", out, _scaled_sum("addmv", x, mv(mat, vec), beta, alpha))


def einsum(equation, *operands):
    """torch.einsum by permutes, reshapes and (batched) matmuls: any equation without repeated
    subscripts inside one operand (diagonals), over one or more operands (contracted pairwise,
    left to right), with '...' and implicit outputs."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' (position 1) must be str, not {_type_name(equation)}")
    ops = [_tensor_arg("einsum", t, "operands", 2) for t in operands]
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise RuntimeError(f"einsum(): {'more' if len(ops) > len(terms) else 'fewer'} operands were provided than "
                           f"specified in the equation")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used]
    ell_rank = 0
    for term, t in zip(terms, ops):
        if "..." in term:
            ell_rank = builtins.max(ell_rank, t.ndim - (len(term) - 3))
    ell = "".join(spare[:ell_rank])
    subs = []
    for k, (term, t) in enumerate(zip(terms, ops)):
        letters = term.replace("...", "")
        if builtins.any(not c.isalpha() for c in letters) or term.count("...") > 1:
            raise RuntimeError(f"einsum(): invalid subscript given in the equation string '{equation}'")
        n_ell = t.ndim - len(letters) if "..." in term else 0
        if ("..." not in term and len(letters) != t.ndim) or n_ell < 0:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(letters)}) does not match "
                               f"the number of dimensions ({t.ndim}) for operand {k}"
                               f"{' and no ellipsis was given' if '...' not in term else ''}")
        sub = term.replace("...", ell[ell_rank - n_ell:] if n_ell else "")
        if len(set(sub)) != len(sub):
            raise NotImplementedError(f"flow: einsum('{equation}'): a subscript repeated within one operand "
                                      f"(a diagonal) is not supported")
        subs.append(sub)
    if arrow:
        if rhs.count("...") > 1:
            raise RuntimeError(f"einsum(): invalid subscript given in the equation string '{equation}'")
        out = rhs.replace("...", ell)
        if builtins.any(not c.isalpha() for c in out) or len(set(out)) != len(out):
            raise RuntimeError(f"einsum(): invalid output subscripts in '{equation}'")
        for c in out:
            if not builtins.any(c in s for s in subs):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   f"operand")
    else:
        counts = collections.Counter("".join(subs))
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    sizes = {}
    for sub, t in zip(subs, ops):
        for c, n in zip(sub, t.shape):
            if c in sizes and sizes[c] != n and n != 1 and sizes[c] != 1:
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes (original->remapped)"
                                   f" for subscript {c}: {sizes[c]} and {n}")
            sizes[c] = n if c not in sizes or sizes[c] == 1 else sizes[c]
    cur, cur_sub = ops[0], subs[0]
    for k in range(1, len(ops)):
        later = set(out).union(*[set(s) for s in subs[k + 1:]])
        cur, cur_sub = _einsum_pair(equation, cur, cur_sub, ops[k], subs[k], later, sizes)
    # a single operand (or what is left): sum the letters not in the output, permute to its order
    drop = [i for i, c in enumerate(cur_sub) if c not in out]
    if drop:
        cur = sum(cur, drop)
        cur_sub = "".join(c for c in cur_sub if c in out)
    if cur_sub != out:
        cur = cur.permute([cur_sub.index(c) for c in out])
    return cur


def _einsum_pair(equation, a, sa, b, sb, keep, sizes):
    """Contracts a (subscripts sa) with b (sb), keeping the letters in `keep`; returns (tensor, subs)."""
    # letters of one operand that nothing else needs are summed out first
    for name in ("a", "b"):
        t, s, other = (a, sa, sb) if name == "a" else (b, sb, sa)
        drop = [i for i, c in enumerate(s) if c not in keep and c not in other]
        if drop:
            t = sum(t, drop)
            s = "".join(c for c in s if c in keep or c in other)
        if name == "a":
            a, sa = t, s
        else:
            b, sb = t, s
    batch = [c for c in sa if c in sb and c in keep]
    contracted = [c for c in sa if c in sb and c not in keep]
    a_free = [c for c in sa if c not in sb]
    b_free = [c for c in sb if c not in sa]

    def arrange(t, s, order, groups):
        """t permuted to `order` and reshaped to [batch..., prod(groups[0]), prod(groups[1])]."""
        if list(s) != order:
            t = t.permute([s.index(c) for c in order])
        shape = list(t.shape)
        nb = len(batch)
        merged = shape[:nb]
        at = nb
        for g in groups:
            n = 1
            for k in range(at, at + len(g)):
                n *= shape[k]
            merged.append(n)
            at += len(g)
        return t if merged == shape else t.reshape(merged)

    a2 = arrange(a, sa, batch + a_free + contracted, [a_free, contracted])
    b2 = arrange(b, sb, batch + contracted + b_free, [contracted, b_free])
    r = matmul(a2, b2)
    final = (list(r.shape[:len(batch)]) + [a.shape[sa.index(c)] for c in a_free] +
             [b.shape[sb.index(c)] for c in b_free])
    if list(r.shape) != final:
        r = r.reshape(final)
    return r, "".join(batch + a_free + b_free)


__all__ += ["erf", "log1p", "expm1", "sin", "cos", "floor", "ceil", "trunc", "fix", "sign", "reciprocal", "square",
            "logical_not", "bitwise_not", "isnan", "isinf", "isfinite", "round", "nan_to_num", "floor_divide",
            "remainder", "fmod", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
            "bitwise_left_shift", "bitwise_right_shift", "masked_fill", "return_types", "max",
            "min", "argmax", "argmin", "prod", "any", "all", "var", "std", "var_mean", "std_mean", "norm",
            "logsumexp", "cumsum", "cumprod", "cat", "concat", "concatenate", "stack", "hstack", "vstack",
            "index_select", "gather", "take_along_dim", "reshape", "permute", "transpose", "swapaxes", "swapdims",
            "t", "flatten", "unflatten", "squeeze", "unsqueeze", "narrow", "chunk", "split", "tensor_split",
            "unbind", "select", "movedim", "moveaxis", "as_strided", "broadcast_to", "clone", "matmul", "mm", "bmm",
            "mv", "dot", "outer", "ger", "addmm", "baddbmm", "addmv", "einsum", "absolute", "not_equal", "less",
            "less_equal", "greater", "greater_equal", "flip", "triu", "tril", "sort", "argsort", "msort", "topk"]
