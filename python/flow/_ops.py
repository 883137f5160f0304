"""The math functions, with torch's names, argument orders and argument checks.

Each function validates its Python arguments the way torch's argument parser does (a non-tensor
where a tensor is required is a TypeError naming the argument and its position), converts them
to core attributes, and calls the one dispatcher (``_dispatch.dispatch``), which runs the op
eagerly or records it into an active trace. Shape and dtype checks are the core's (its messages
read like torch's).
"""
import builtins
import numbers
import operator

import numpy as np

from . import _dtype as D
from ._dispatch import dispatch1
from ._tensor import Tensor

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
                  "le": "<=", "gt": ">", "ge": ">="}[op]
        if op in ("eq", "ne"):
            return NotImplemented
        left, right = (bad, b) if sa is None else (a, bad)
        raise TypeError(f"unsupported operand type(s) for {symbol}: '{_type_name(left)}' and '{_type_name(right)}'")
    return dispatch1(op, [sa, sb])


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
    _no_out("add", out)
    return dispatch1("add", [_tensor_arg("add", input, "input", 1), _tensor_or_number("add", other, "other", 2)],
                     _alpha_attrs("add", alpha))


def sub(input, other, *, alpha=1, out=None):
    _no_out("sub", out)
    return dispatch1("sub", [_tensor_arg("sub", input, "input", 1), _tensor_or_number("sub", other, "other", 2)],
                     _alpha_attrs("sub", alpha))


subtract = sub


def mul(input, other, *, out=None):
    _no_out("mul", out)
    return dispatch1("mul", [_tensor_arg("mul", input, "input", 1), _tensor_or_number("mul", other, "other", 2)])


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    _no_out("div", out)
    x = _tensor_arg("div", input, "input", 1)
    y = _tensor_or_number("div", other, "other", 2)
    if rounding_mode is not None:
        if rounding_mode not in ("trunc", "floor"):
            raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                               f"'{rounding_mode}'")
        raise NotImplementedError(f"flow: div(rounding_mode='{rounding_mode}') is not supported yet")
    return dispatch1("div", [x, y])


divide = div
true_divide = div


def pow(input, exponent, *, out=None):
    _no_out("pow", out)
    if isinstance(input, Tensor):
        return dispatch1("pow", [input, _tensor_or_number("pow", exponent, "exponent", 2)])
    s = _scalar(input)
    if s is None or not isinstance(exponent, Tensor):
        _tensor_arg("pow", input, "input", 1)
        _tensor_arg("pow", exponent, "exponent", 2)
    return dispatch1("pow", [s, exponent])


def _tensor_binary(op):
    def f(input, other, *, out=None):
        _no_out(op, out)
        return dispatch1(op, [_tensor_arg(op, input, "input", 1), _tensor_arg(op, other, "other", 2)])

    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"torch.{op}(input, other): elementwise, with broadcasting and type promotion."
    return f


minimum = _tensor_binary("minimum")
maximum = _tensor_binary("maximum")


def _compare(op):
    def f(input, other, *, out=None):
        _no_out(op, out)
        return dispatch1(op, [_tensor_arg(op, input, "input", 1), _tensor_or_number(op, other, "other", 2)])

    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"torch.{op}(input, other): elementwise comparison; a bool tensor."
    return f


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
    _no_out("where", out)
    if input is None and other is None:
        raise NotImplementedError("flow: where(condition) (nonzero) is not supported yet")
    c = _tensor_arg("where", condition, "condition", 1)
    x = _tensor_or_number("where", input, "input", 2)
    y = _tensor_or_number("where", other, "other", 3)
    return dispatch1("where", [c, x, y])


# ---- unary -----------------------------------------------------------------------------------


def _no_out(fn, out):
    if out is not None:
        raise NotImplementedError(f"flow: {fn}(out=...) is not supported")


def _unary(op):
    def f(input, *, out=None):
        _no_out(op, out)
        return dispatch1(op, [_tensor_arg(op, input, "input", 1)])

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
    if inplace:
        raise NotImplementedError("flow: relu(inplace=True) is not supported")
    return dispatch1("relu", [_tensor_arg("relu", input, "input", 1)])


def gelu(input, approximate="none"):
    x = _tensor_arg("gelu", input, "input", 1)
    if not isinstance(approximate, str):
        raise TypeError(f"gelu(): argument 'approximate' must be str, not {_type_name(approximate)}")
    return dispatch1("gelu", [x], {"approximate": approximate})


def silu(input, inplace=False):
    if inplace:
        raise NotImplementedError("flow: silu(inplace=True) is not supported")
    return dispatch1("silu", [_tensor_arg("silu", input, "input", 1)])


def _clamp_bound(name, v):
    if v is None or isinstance(v, Tensor):
        return v
    s = _scalar(v)
    if s is None:
        raise TypeError(f"clamp(): argument '{name}' must be Number, not {_type_name(v)}")
    return s


def clamp(input, min=None, max=None, *, out=None):
    _no_out("clamp", out)
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


def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    _no_out("sum", out)
    return _reduce("sum", input, dim, keepdim, dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    _no_out("mean", out)
    return _reduce("mean", input, dim, keepdim, dtype)


def amax(input, dim=(), keepdim=False, *, out=None):
    _no_out("amax", out)
    return _reduce("amax", input, dim, keepdim)


def amin(input, dim=(), keepdim=False, *, out=None):
    _no_out("amin", out)
    return _reduce("amin", input, dim, keepdim)


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
    return dispatch1(op, [x], attrs)


def softmax(input, dim, dtype=None):
    return _softmax("softmax", input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    return _softmax("log_softmax", input, dim, dtype)
