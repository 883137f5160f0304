"""More of torch's elementwise math, and the functions torch defines by formula over other ops.

- C's math functions (tan, atan, ..., erfc, atan2, hypot) are ops of their own (dsl/ops/
  elementwise_more.cpp): ints and bool compute in float32, as torch's; hypot takes floats only.
- The others are compositions of flow ops, written as torch writes them (ATen's formulas), so they
  trace, fuse and run on every device like any op: clamp_min/clamp_max, logaddexp, addcmul,
  addcdiv, lerp, frac, deg2rad/rad2deg, rsub, float_power, isclose/allclose, count_nonzero.
- Views and joins torch builds from others: roll, meshgrid, repeat_interleave, diagonal, diag,
  trace.
"""
import builtins
import math
import numbers

import numpy as np

from . import _C
from . import _dtype as D
from . import _ops as F
from ._dispatch import dispatch1
from ._eager_fusion import fused_in_eager
from ._errors import trace_error
from ._ops import _binary_number_ok, _normalize_dim, _out, _tensor_arg, _tensor_or_number, _unary
from ._indexing import _host_array
from ._tensor import Tensor, _fresh, _inplace_method, _method

tan = _unary("tan")
atan = _unary("atan")
arctan = atan
asin = _unary("asin")
arcsin = asin
acos = _unary("acos")
arccos = acos
sinh = _unary("sinh")
cosh = _unary("cosh")
asinh = _unary("asinh")
arcsinh = asinh
acosh = _unary("acosh")
arccosh = acosh
atanh = _unary("atanh")
arctanh = atanh
log2 = _unary("log2")
log10 = _unary("log10")
exp2 = _unary("exp2")
erfc = _unary("erfc")
atan2 = _binary_number_ok("atan2", "the angle of (other, input), in radians")
arctan2 = atan2
hypot = _binary_number_ok("hypot", "sqrt(input^2 + other^2) without overflow")


def clamp_min(input, min, *, out=None):
    return F.clamp(input, min=min, out=out)


def clamp_max(input, max, *, out=None):
    return F.clamp(input, max=max, out=out)


def promote_types(type1, type2):
    """torch.promote_types (the core's rule, dsl/types.h)."""
    return D.to_dtype(_C.promote_types(D.to_dtype(type1).name, D.to_dtype(type2).name))


def _in_opmath(dtype, fn, *args):
    """fn(*args) computed in float32 for a half `dtype` and rounded once to it, as torch's fused
    kernels compute (their "opmath" type); a chain of flow ops would round after each."""
    if dtype not in (D.float16, D.bfloat16):
        return fn(*args)
    wide = [a.float() if isinstance(a, Tensor) and a.dtype is dtype else a for a in args]
    return fn(*wide).to(dtype)


def _float_only(fn, x):
    """torch's refusal of an integer or bool input, as the core's (dsl/ops/op_util.h
    not_implemented_for, NotImplementedError): '"frac_cpu" not implemented for 'Long''."""
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f'"{fn}" not implemented for \'{x.dtype._torch_short}\'')


# The functions below written as several flow ops run as one compiled kernel eagerly (fused_in_eager,
# flow/_eager_fusion.py; their argument checks stay outside): softsign-like chains of 3-11 kernels of
# a 4M tensor took 3-7x the fused time.
def logaddexp(input, other, *, out=None):
    """log(exp(input) + exp(other)) without overflow: m + log1p(exp(-|input - other|)), m the larger;
    equal infinities give themselves (torch's formula)."""
    a = _tensor_arg("logaddexp", input, "input", 1)
    b = _tensor_or_number("logaddexp", other, "other", 2)
    return _out("logaddexp", out, _logaddexp(a, b))


@fused_in_eager
def _logaddexp(a, b):
    if not a.dtype.is_floating_point:
        a = a.float()

    def formula(a, b):
        m = F.maximum(a, b) if isinstance(b, Tensor) else F.clamp(a, min=b)
        r = m + F.log1p(F.exp(-F.abs(a - b)))
        return F.where(F.isinf(a) & (a == b), a, r)

    dtype = promote_types(a.dtype, b.dtype) if isinstance(b, Tensor) else a.dtype
    return _in_opmath(dtype, formula, a, b)


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    return _out("addcmul", out, _addcmul(input, tensor1, tensor2, value))


def _common_type(*operands):
    from ._math_more import _result_type_of  # (_math_more builds on this module)

    return _result_type_of(*operands)


def _converted(dtype, *tensors):
    """The operands converted to the common dtype first, as torch's TensorIterator does (a float16
    operand of a float32 addcmul must not round a product to float16 on the way)."""
    return [t if t.dtype is dtype else t.to(dtype) for t in tensors]


@fused_in_eager
def _addcmul(input, tensor1, tensor2, value):
    dtype = _common_type(input, tensor1, tensor2)
    return _in_opmath(dtype, lambda x, a, b: x + value * a * b, *_converted(dtype, input, tensor1, tensor2))


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future release addcdiv "
                           "will perform a true division of tensor1 and tensor2.")
    return _out("addcdiv", out, _addcdiv(input, tensor1, tensor2, value))


@fused_in_eager
def _addcdiv(input, tensor1, tensor2, value):
    dtype = _common_type(input, tensor1, tensor2)
    return _in_opmath(dtype, lambda x, a, b: x + value * a / b, *_converted(dtype, input, tensor1, tensor2))


def lerp(input, end, weight, *, out=None):
    """input + weight * (end - input), as torch computes it: from the nearer end (|weight| < 0.5 from
    input, else from end), so lerp(a, b, 1) is exactly b."""
    x = _tensor_arg("lerp", input, "input", 1)
    _float_only("lerp_kernel_scalar" if not isinstance(weight, Tensor) else "lerp_kernel_tensor", x)
    return _out("lerp", out, _lerp(x, end, weight))


@fused_in_eager
def _lerp(x, end, weight):
    def formula(x, end, weight):
        diff = end - x
        near_start = x + weight * diff
        near_end = end - diff * (1 - weight)
        if not isinstance(weight, Tensor):
            return near_start if builtins.abs(weight) < 0.5 else near_end
        return F.where(F.abs(weight) < 0.5, near_start, near_end)

    return _in_opmath(x.dtype, formula, x, end, weight)


def frac(input, *, out=None):
    x = _tensor_arg("frac", input, "input", 1)
    _float_only("frac_cpu", x)
    return _out("frac", out, _frac(x))


@fused_in_eager
def _frac(x):
    return x - F.trunc(x)


def deg2rad(input, *, out=None):
    x = _tensor_arg("deg2rad", input, "input", 1)
    x = x if x.dtype.is_floating_point else x.float()
    return _out("deg2rad", out, x * (math.pi / 180.0))


def rad2deg(input, *, out=None):
    x = _tensor_arg("rad2deg", input, "input", 1)
    x = x if x.dtype.is_floating_point else x.float()
    return _out("rad2deg", out, x * (180.0 / math.pi))


def rsub(input, other, *, alpha=1):
    return F.sub(other, input, alpha=alpha) if isinstance(other, Tensor) else other - alpha * input


def float_power(input, exponent, *, out=None):
    """pow in float64, as torch's."""
    a = input.double() if isinstance(input, Tensor) else builtins.float(input)
    b = exponent.double() if isinstance(exponent, Tensor) else builtins.float(exponent)
    return _out("float_power", out, F.pow(a, b))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, or equal (infinities included); NaNs equal only with
    equal_nan (torch's formula)."""
    a = _tensor_arg("isclose", input, "input", 1)
    b = _tensor_arg("isclose", other, "other", 2)
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{a.dtype._torch_short} did not match {b.dtype._torch_short}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    return _isclose(a, b, rtol, atol, equal_nan)


@fused_in_eager
def _isclose(a, b, rtol, atol, equal_nan):
    close = a == b
    if a.dtype is D.bool_:
        return close
    if equal_nan and a.dtype.is_floating_point:
        close = close | (F.isnan(a) & F.isnan(b))
    if rtol == 0 and atol == 0:
        return close
    if not a.dtype.is_floating_point:  # ints: the tolerance in float64, as torch's
        a, b = a.double(), b.double()
    allowed = atol + F.abs(rtol * b)
    actual = F.abs(a - b)
    return close | (F.isfinite(actual) & (actual <= allowed))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.bool(F.all(isclose(input, other, rtol, atol, equal_nan)))


def equal(input, other):
    """torch.equal: the same shape and equal elements (after type promotion; NaN is never equal)."""
    x = _tensor_arg("equal", input, "input", 1)
    y = _tensor_arg("equal", other, "other", 2)
    return tuple(x.shape) == tuple(y.shape) and builtins.bool(F.all(x == y))


def count_nonzero(input, dim=None):
    x = _tensor_arg("count_nonzero", input, "input", 1)
    return F.sum(x != 0, dim=dim)


# ---- views and joins ---------------------------------------------------------------------------


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (torch.broadcast_shapes)."""
    try:
        return D.Size(np.broadcast_shapes(*[tuple(s) if not isinstance(s, numbers.Integral) else (s,)
                                            for s in shapes]))
    except ValueError:
        raise RuntimeError("Shape mismatch: objects cannot be broadcast to a single shape.") from None



def roll(input, shifts, dims=None):
    """Elements shifted along dims, wrapping around: a concatenation of two slices per dim."""
    x = _tensor_arg("roll", input, "input", 1)
    shifts = [shifts] if isinstance(shifts, numbers.Integral) else list(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return roll(x.flatten(), shifts, 0).reshape(list(x.shape))
    dims = [dims] if isinstance(dims, numbers.Integral) else list(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = x
    for s, d in zip(shifts, dims):
        d = _normalize_dim(d, x.ndim)
        n = x.shape[d]
        k = builtins.int(s) % n if n else 0
        if k:
            out = F.cat([out.narrow(d, n - k, k), out.narrow(d, 0, n - k)], d)
    return _fresh(out, x)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids: each 1-d input expanded along the others (indexing "ij", torch's default;
    "xy": the first two inputs' roles swapped, so the grids are (len(y), len(x), ...))."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for t in tensors:
        if not isinstance(t, Tensor) or t.ndim > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list")
    ts = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.shape[0] for t in ts]
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = shape[i]
        out.append(t.reshape(view).expand(shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element repeated `repeats` times along dim (the flattened input when dim is None). An
    int repeats is an expand and a reshape; a tensor of counts is an index_select with the indices
    made on the host (the output's size depends on them, as torch's does)."""
    if repeats is None:  # repeat_interleave(counts): indices 0.. repeated by counts
        from . import _creation

        counts = _tensor_arg("repeat_interleave", input, "repeats", 1)
        if counts._c is None:
            return _traced_repeat_positions(counts, output_size)
        idx = np.repeat(np.arange(counts.shape[0], dtype=np.int64), _host_array(counts._c))
        return _creation.tensor(idx).to(counts.device)
    x = _tensor_arg("repeat_interleave", input, "input", 1)
    if dim is None:
        x, dim = x.reshape(-1), 0
    d = _normalize_dim(dim, x.ndim)
    if isinstance(repeats, Tensor) and repeats.numel() == 1:
        repeats = builtins.int(repeats.item())
    if isinstance(repeats, numbers.Integral):
        if repeats < 0:
            raise RuntimeError("repeats can not be negative")
        s = list(x.shape)
        e = x.unsqueeze(d + 1).expand(s[:d + 1] + [builtins.int(repeats)] + s[d + 1:])
        return _fresh(e.reshape(s[:d] + [s[d] * builtins.int(repeats)] + s[d + 1:]).contiguous(), input)
    if repeats._c is None:
        if repeats.ndim != 1 or repeats.shape[0] != x.shape[d]:
            raise RuntimeError("repeats must have the same size as input along dim")
        return dispatch1("index_select", [x, _traced_repeat_positions(repeats, output_size)], {"dim": d})
    counts = _host_array(repeats._c)
    if counts.ndim != 1 or counts.shape[0] != x.shape[d]:
        raise RuntimeError("repeats must have the same size as input along dim")
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    from . import _creation

    idx = _creation.tensor(np.repeat(np.arange(x.shape[d]), counts)).to(x.device)
    return _fresh(dispatch1("index_select", [x, idx], {"dim": d}), input)


def _traced_repeat_positions(counts, output_size):
    """In a trace, the positions 0.. of `counts` each repeated counts[i] times: position j is the
    number of running totals at or below j (a comparison of every output position with every total,
    then a sum). The output's size depends on the counts' values, so torch.compile's output_size is
    required, as a traced value has none."""
    if output_size is None:
        raise trace_error("repeat_interleave() with a tensor of repeats",
                          "the output's size depends on the repeats' values; pass output_size= (as for "
                          "torch.compile), or call it outside flow.jit")
    from . import _creation

    ends = F.cumsum(counts.to(D.int64), 0)
    j = _creation.arange(builtins.int(output_size), device=counts.device)
    return F.sum((ends.unsqueeze(0) <= j.unsqueeze(1)).to(D.int64), 1)


def diagonal_length(n1, n2, offset):
    """The length of diagonal `offset` of an n1 x n2 plane (0 past its corner)."""
    return builtins.max(0, builtins.min(n1, n2 - offset) if offset >= 0 else builtins.min(n1 + offset, n2))


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of the (dim1, dim2) planes as the last dim: a view of a concrete tensor (through
    its strides, as torch's), a gather when traced."""
    x = _tensor_arg("diagonal", input, "input", 1)
    d1, d2 = _normalize_dim(dim1, x.ndim), _normalize_dim(dim2, x.ndim)  # (torch's order: dims first)
    if x.ndim < 2 and d1 != d2:
        raise RuntimeError(f"diagonal dimensions requested ({dim1}, {dim2}) with a tensor of {x.ndim} dims")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = x.shape[d1], x.shape[d2]
    length = diagonal_length(n1, n2, offset)
    rest = [k for k in range(x.ndim) if k not in (d1, d2)]
    if x._c is not None:
        st = x._c.strides
        start = x._c.offset + (offset * st[d2] if offset >= 0 else -offset * st[d1]) if length else x._c.offset
        return Tensor._wrap(x._c.as_strided([x.shape[k] for k in rest] + [length],
                                            [st[k] for k in rest] + [st[d1] + st[d2]], start))
    from . import _creation

    plane = x.permute(rest + [d1, d2]).reshape([x.shape[k] for k in rest] + [n1 * n2])
    i = np.arange(length)
    flat = (i + builtins.max(0, -offset)) * n2 + i + builtins.max(0, offset)
    return dispatch1("index_select", [plane, _creation.tensor(flat.astype(np.int64)).to(x.device)],
                     {"dim": plane.ndim - 1})


_diagonal = diagonal  # diag's argument `diagonal` (torch's name) hides the function there


def diag(input, diagonal=0):
    """A 1-d input on the diagonal of a square matrix (zeros elsewhere), or a matrix's diagonal."""
    x = _tensor_arg("diag", input, "input", 1)
    if x.ndim == 2:
        return _diagonal(x, diagonal).clone()
    if x.ndim != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    from . import _creation

    k = builtins.int(diagonal)
    n = x.shape[0] + builtins.abs(k)
    if x.shape[0] == 0:
        return _creation.zeros(n, n, dtype=x.dtype, device=x.device)
    rows, cols = np.arange(n).reshape(n, 1), np.arange(n).reshape(1, n)
    # element (r, c) reads x[r] above the main diagonal (x[c] below) and is kept where c - r == k
    src = np.broadcast_to(np.minimum(rows if k >= 0 else cols, x.shape[0] - 1), (n, n)).reshape(-1)
    picked = dispatch1("index_select", [x, _creation.tensor(src).to(x.device)], {"dim": 0}).reshape(n, n)
    on = _creation.tensor(cols - rows == k).to(x.device)
    return F.where(on, picked, _creation.tensor(0, dtype=x.dtype).to(x.device))


def trace(input):
    x = _tensor_arg("trace", input, "input", 1)
    if x.ndim != 2:
        raise RuntimeError("trace: expected a matrix")
    return F.sum(diagonal(x))


__all__ = ["tan", "atan", "arctan", "asin", "arcsin", "acos", "arccos", "sinh", "cosh", "asinh", "arcsinh", "acosh",
           "arccosh", "atanh", "arctanh", "log2", "log10", "exp2", "erfc", "atan2", "arctan2", "hypot", "clamp_min",
           "clamp_max", "logaddexp", "addcmul", "addcdiv", "lerp", "frac", "deg2rad", "rad2deg", "rsub",
           "float_power", "isclose", "allclose", "equal", "count_nonzero", "promote_types", "broadcast_shapes", "roll",
           "meshgrid", "repeat_interleave", "diagonal", "diag", "trace"]


# ---- Tensor methods (x.tan(), x.lerp_(end, w), ...) -------------------------------------------


_METHODS = ["tan", "atan", "arctan", "asin", "arcsin", "acos", "arccos", "sinh", "cosh", "asinh", "arcsinh", "acosh",
            "arccosh", "atanh", "arctanh", "log2", "log10", "exp2", "erfc", "atan2", "arctan2", "hypot", "clamp_min",
            "clamp_max", "logaddexp", "addcmul", "addcdiv", "lerp", "frac", "deg2rad", "rad2deg", "float_power",
            "isclose", "allclose", "equal", "count_nonzero", "roll", "repeat_interleave", "diagonal", "diag", "trace"]
_INPLACE = ["tan", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "erfc",
            "atan2", "hypot", "clamp_min", "clamp_max", "addcmul", "addcdiv", "lerp", "frac", "deg2rad", "rad2deg"]
for _name in _METHODS:
    setattr(Tensor, _name, _method(_name, globals()[_name]))
for _name in _INPLACE:
    setattr(Tensor, _name + "_", _inplace_method(_name + "_", globals()[_name]))
del _name
