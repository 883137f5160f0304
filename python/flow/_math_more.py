"""More of torch's top-level math, as compositions of flow ops: dtype info (finfo, iinfo,
result_type, ...), elementwise formulas (sgn, signbit, copysign, heaviside, logit, xlogy, sinc),
NaN-aware reductions and order statistics (nansum, nanmean, aminmax, median, nanmedian, kthvalue,
quantile, nanquantile, mode), scans (logcumsumexp, cummax, cummin), joins and reshapes (diff,
cross, tensordot, kron, block_diag, cartesian_prod, combinations, atleast_*d, *stack, *split,
rot90, ...), integration (trapezoid, cumulative_trapezoid) and distances (dist, cdist, pdist).

Note: design choices.
  - Everything is a composition of existing flow ops, so it traces under @flow.jit, fuses and runs on
    every device. Index tensors that depend only on shapes (combinations, pdist, tril_indices) are
    built on the host with numpy and become graph constants. Checks that need values (quantile's q
    range, take's index range, is_nonzero) run eagerly only, as flow's other ops do.
  - Order statistics sort: flow's sort is stable with NaN above every number, so median's and
    kthvalue's NaN rules are gathers at computed positions (median: the first NaN of a line if it has
    one; nanmedian: the lower median of the non-NaN values). torch picks tie indices with an
    unspecified selection algorithm; flow returns the stable-sort position's index.
  - Scans without a primitive (cummax, cummin, logcumsumexp, and mode's run lengths) are
    Hillis-Steele scans: log2(n) steps of an associative combine of shifted slices. cummax's combine
    is torch's loop rule (a NaN always wins; ties take the later index), which is associative.
  - Half precision follows torch's kernels: where they compute in float32 for float16/bfloat16 and
    round once (sinc, logcumsumexp, the norms) the composition does too; where they round
    intermediates to half (logit's z / (1 - z), xlogy's log) the plain chain of half ops does that.
    quantile's ranks are float64, as torch's are (so its float32 results match bit for bit).
  - signbit reads the sign bit (the graph op bitcast, flow/_view_dtype.py), so a negative NaN and
    -0.0 are negative, as in torch.
  - Known differences from torch: mode's index among equal values is the
    last in input order (torch's is unspecified for lines of 16 or more); set_num_threads cannot
    change flow's thread count, which the runtime reads once from FLOW_NUM_THREADS (there is no
    binding to change it), so it accepts only the count in use.
"""
import builtins
import collections
import itertools
import math
import numbers
import os
import re
import warnings

import numpy as np

from . import _creation as C
from . import _dtype as D
from . import _ops as F
from ._dispatch import current_trace, dispatch1
from ._eager_fusion import fused_in_eager
from ._math import _in_opmath, broadcast_shapes, lerp, logaddexp, meshgrid, promote_types
from ._ops import _normalize_dim, _one_dim, _out, _scalar, _tensor_arg, _tensor_list, _type_name
from ._indexing import _host_checks_indices
from ._tensor import Tensor, _can_cast, _fresh, _inplace_method, _method

inf = math.inf
nan = math.nan
pi = math.pi
e = math.e
newaxis = None

_HALF = (D.float16, D.bfloat16)


# ---- dtype information and global switches ------------------------------------------------------


class finfo:
    """Machine limits of a floating dtype (torch.finfo): bits, eps, max, min, tiny (=
    smallest_normal), resolution and dtype (its name). The default is flow's default dtype."""

    _TABLE = {  # bits, eps, max, tiny, resolution
        "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 0.001),
        "bfloat16": (16, 2.0 ** -7, float.fromhex("0x1.fep127"), 2.0 ** -126, 0.01),
        "float32": (32, 2.0 ** -23, float.fromhex("0x1.fffffep127"), 2.0 ** -126, 1e-06),
        "float64": (64, 2.0 ** -52, float.fromhex("0x1.fffffffffffffp1023"), 2.0 ** -1022, 1e-15),
    }

    def __init__(self, type=None):
        dt = get_default_dtype() if type is None else D.to_dtype(type)
        if not dt.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        self.bits, self.eps, self.max, self.tiny, self.resolution = self._TABLE[dt.name]
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = dt.name

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (torch.iinfo): bits, min, max and dtype (its name)."""

    def __init__(self, type):
        dt = D.to_dtype(type)
        if dt is D.bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if dt.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle "
                            "'torch.iinfo'")
        info = np.iinfo(dt.np_dtype)
        self.bits, self.min, self.max, self.dtype = info.bits, builtins.int(info.min), builtins.int(info.max), dt.name

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def get_default_dtype():
    """flow's default floating dtype: always float32."""
    return D.float32


def set_default_dtype(d):
    """Accepts float32 (flow's fixed default); any other floating dtype is not supported."""
    dt = D.to_dtype(d)
    if not dt.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    if dt is not D.float32:
        raise NotImplementedError(f"flow: set_default_dtype({dt}) is not supported: flow's default floating dtype "
                                  f"is fixed at float32 (pass dtype= to the creation functions instead)")


def _threads_from_env():
    """The runtime's rule (runtime/thread_pool.cpp threads_from_env): $FLOW_NUM_THREADS when it is
    an integer >= 1 (at most 1024), else the number of hardware threads."""
    m = re.fullmatch(r"\s*[+-]?[0-9]+", os.environ.get("FLOW_NUM_THREADS", ""))  # (strtol's syntax)
    if m and builtins.int(m.group()) >= 1:
        return builtins.min(builtins.int(m.group()), 1024)
    return builtins.min(os.cpu_count() or 1, 1024)


_NUM_THREADS = _threads_from_env()  # the runtime reads it once too, at its first parallel loop


def get_num_threads():
    """The CPU threads flow's kernels use (fixed at start-up from $FLOW_NUM_THREADS)."""
    return _NUM_THREADS


def set_num_threads(int):  # noqa: A002  (torch's argument name)
    """Not supported: flow's runtime reads its thread count once (FLOW_NUM_THREADS) and has no
    binding to change it. Asking for the count it already uses is accepted."""
    n = _int_arg("set_num_threads", int)
    if n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    if n != get_num_threads():
        raise NotImplementedError(f"flow: set_num_threads({n}) is not supported: flow's runtime fixes its thread "
                                  f"count ({get_num_threads()}) at start-up; set the FLOW_NUM_THREADS environment "
                                  f"variable before starting Python instead")


def _int_arg(fn, v):
    if isinstance(v, builtins.bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}(): argument must be int, not {_type_name(v)}")
    return builtins.int(v)


def is_complex(input):
    """False: flow has no complex dtypes."""
    _tensor_arg("is_complex", input, "input", 1)
    return False


def is_nonzero(input):
    """The truth value of a one-element tensor (eager only: it reads the value)."""
    x = _tensor_arg("is_nonzero", input, "input", 1)
    n = x.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(x.item())


def is_same_size(input, other):
    return tuple(_tensor_arg("is_same_size", input, "input", 1).shape) == \
        tuple(_tensor_arg("is_same_size", other, "other", 2).shape)


def _promote(a, b):
    return b if a is None else a if b is None else promote_types(a, b)


def _combine_categories(higher, lower):
    """torch's ResultTypeState rule: a lower-priority operand only wins by a higher category."""
    if higher is not None and higher.is_floating_point:
        return higher
    if higher is D.bool_ or (lower is not None and lower.is_floating_point):
        return _promote(higher, lower)
    return higher if higher is not None else lower


def result_type(tensor, other):
    """The dtype of an arithmetic op on the two operands (tensors or numbers), torch's rule:
    tensors with dims > 0-dim tensors > Python numbers, a lower kind counting only when it is a higher
    category (bool < integer < floating)."""
    return _result_type_of(tensor, other)


def _result_type_of(*operands):
    """result_type over any number of operands (torch's n-ary TensorIterator rule: addcmul's three)."""
    dim_r = zero_r = num_r = None
    for pos, a in enumerate(operands, 1):
        if isinstance(a, Tensor):
            if a.ndim:
                dim_r = _promote(dim_r, a.dtype)
            else:
                zero_r = _promote(zero_r, a.dtype)
            continue
        s = _scalar(a)
        if s is None:
            raise TypeError(f"result_type(): argument '{'tensor' if pos == 1 else 'other'}' (position {pos}) must be "
                            f"Tensor or Number, not {_type_name(a)}")
        num_r = _promote(num_r, D.bool_ if isinstance(s, builtins.bool) else
                         D.int64 if isinstance(s, builtins.int) else get_default_dtype())
    return _combine_categories(dim_r, _combine_categories(zero_r, num_r))


def can_cast(from_, to):
    """Whether torch's casting rules allow from_ -> to (no float -> integer, nothing -> bool)."""
    for name, v in (("from_", from_), ("to", to)):
        if not isinstance(v, D.dtype) and not type(v).__module__.startswith("torch"):
            raise TypeError(f"can_cast(): argument '{name}' must be torch.dtype, not {_type_name(v)}")
    return _can_cast(D.to_dtype(from_), D.to_dtype(to))


# ---- elementwise --------------------------------------------------------------------------------


def _floatify(x):
    """x, or x as float32 when it is an integer or bool tensor (torch's int -> float promotion)."""
    return x if x.dtype.is_floating_point else F._cast(x, D.float32)


def sgn(input, *, out=None):
    """sign for real tensors (torch.sgn is x/|x| for complex ones)."""
    return F.sign(_tensor_arg("sgn", input, "input", 1), out=out)


def _signbit(x):
    if x.dtype is D.bool_:
        return x != x  # all False
    if not x.dtype.is_floating_point:
        return x < 0
    # the sign bit itself, so -0.0 and a negative NaN count as negative (as torch's)
    from ._view_dtype import bits_of

    return bits_of(x) < 0


def signbit(input, *, out=None):
    x = _tensor_arg("signbit", input, "input", 1)
    return _out("signbit", out, _signbit(x))


def copysign(input, other, *, out=None):
    """|input| with the sign of other (integers promote to float32, as torch)."""
    x = _tensor_arg("copysign", input, "input", 1)
    y = F._tensor_or_number("copysign", other, "other", 2)
    dt = result_type(x, y)
    dt = dt if dt.is_floating_point else D.float32
    mag = F.abs(x if x.dtype is dt else F._cast(x, dt))
    if isinstance(y, Tensor):
        r = F.where(_signbit(y), -mag, mag)
        r = r if r.dtype is dt else F._cast(r, dt)
    else:
        r = -mag if math.copysign(1.0, builtins.float(y)) < 0 else mag
    return _out("copysign", out, r)


def heaviside(input, values, *, out=None):
    """0 where input < 0, 1 where input > 0, `values` where input == 0 (NaN gives 0, as torch)."""
    x = _tensor_arg("heaviside", input, "input", 1)
    v = _tensor_arg("heaviside", values, "values", 2)
    if x.dtype is not v.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    step = x > 0
    r = F.where(x == 0, v, step if x.dtype is D.bool_ else F._cast(step, x.dtype))
    return _out("heaviside", out, r if r.dtype is x.dtype else F._cast(r, x.dtype))


def logit(input, eps=None, *, out=None):
    """log(z / (1 - z)), z = input clamped to [eps, 1 - eps] when eps is given (NaN stays NaN)."""
    return _out("logit", out, _logit(_floatify(_tensor_arg("logit", input, "input", 1)), eps))


@fused_in_eager  # one kernel eagerly (as the functions of flow/_math.py marked so)
def _logit(z, eps):
    if eps is not None and eps >= 0:
        lo = builtins.float(np.float32(eps)) if z.dtype is not D.float64 else builtins.float(eps)
        hi = builtins.float(np.float32(1) - np.float32(eps)) if z.dtype is not D.float64 else 1.0 - eps
        z = F.where(z < lo, lo, F.where(z > hi, hi, z))
    # (torch's half kernel rounds z / (1 - z) to half before the log, as this chain does)
    return F.log(z / (1 - z))


def xlogy(input, other, *, out=None):
    """input * log(other), 0 where input == 0 (unless other is NaN); either may be a number."""
    if isinstance(input, Tensor):
        F._tensor_or_number("xlogy", other, "other", 2)
    else:
        F._tensor_or_number("xlogy", input, "self", 1)
        _tensor_arg("xlogy", other, "other", 2)
    dt = result_type(input, other)
    dt = dt if dt.is_floating_point else D.float32
    device = (input if isinstance(input, Tensor) else other).device

    def as_dt(v):  # (torch's half kernel rounds log(other) and the product to half, as half ops do)
        if isinstance(v, Tensor):
            return v if v.dtype is dt else F._cast(v, dt)
        return C.full([], _scalar(v), dtype=dt, device=device)

    return _out("xlogy", out, _xlogy(as_dt(input), as_dt(other)))


@fused_in_eager
def _xlogy(a, b):
    return F.where(F.isnan(b), math.nan, F.where(a == 0, 0.0, a * F.log(b)))


def sinc(input, *, out=None):
    """sin(pi x) / (pi x), 1 at 0."""
    return _out("sinc", out, _sinc(_floatify(_tensor_arg("sinc", input, "input", 1))))


@fused_in_eager
def _sinc(x):
    def formula(a):
        p = a * math.pi
        return F.where(a == 0, 1.0, F.sin(p) / p)

    return _in_opmath(x.dtype, formula, x)


# ---- reductions and statistics -----------------------------------------------------------------


def _add_return_type(name, fields):
    rt = getattr(F.return_types, name, None)
    if rt is None:
        rt = collections.namedtuple(name, fields)
        setattr(F.return_types, name, rt)
    return rt


_aminmax_t = _add_return_type("aminmax", ["min", "max"])
_median_t = _add_return_type("median", ["values", "indices"])
_nanmedian_t = _add_return_type("nanmedian", ["values", "indices"])
_kthvalue_t = _add_return_type("kthvalue", ["values", "indices"])
_mode_t = _add_return_type("mode", ["values", "indices"])
_cummax_t = _add_return_type("cummax", ["values", "indices"])
_cummin_t = _add_return_type("cummin", ["values", "indices"])


def _pair(kind, out, values, indices):
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"{kind.__name__}(): argument 'out' must be tuple of Tensors")
        _out(kind.__name__, out[0], values)
        _out(kind.__name__, out[1], indices)
        values, indices = out
    return kind(values, indices)


def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """sum with NaNs counted as zero."""
    x = _tensor_arg("nansum", input, "input", 1)
    if x.dtype.is_floating_point:
        x = F.where(F.isnan(x), 0, x)
    return F.sum(x, dim, keepdim, dtype=dtype, out=out)


def nanmean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """The mean of the non-NaN values (torch's formula: nansum / their count)."""
    x = _tensor_arg("nanmean", input, "input", 1)
    if dtype is not None and not D.to_dtype(dtype).is_floating_point:
        raise RuntimeError(f"nanmean(): could not infer output dtype. Optional dtype must be either a floating point "
                           f"or complex dtype. Got: {D.to_dtype(dtype)._torch_short}")
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"nanmean(): expected input to have floating point or complex dtype but got "
                                  f"{x.dtype._torch_short}")
    count = F.sum(~F.isnan(x), dim, keepdim)
    return _out("nanmean", out, nansum(x, dim, keepdim, dtype=dtype) / count)


def aminmax(input, *, dim=None, keepdim=False, out=None):
    """(amin, amax) in one call."""
    x = _tensor_arg("aminmax", input, "input", 1)
    if dim is None and x.numel() == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    if dim is not None:
        d = _normalize_dim(_one_dim("aminmax", dim), builtins.max(x.ndim, 1))
        if x.ndim and x.shape[d] == 0:
            raise IndexError(f"aminmax(): Expected reduction dim {d} to have non-zero size.")
    lo = F.amin(x, dim if dim is not None else (), keepdim)
    hi = F.amax(x, dim if dim is not None else (), keepdim)
    if dim is None and keepdim:
        lo, hi = lo.reshape([1] * x.ndim), hi.reshape([1] * x.ndim)
    return _pair(_aminmax_t, out, lo, hi)


def _zero_index(x):
    return C.zeros([], dtype=D.int64, device=x.device)


def _gather_sorted(x, d, pos, keepdim):
    """(values, indices) of the stable sort of x along d at position pos (shape: x's, 1 along d)."""
    s = F.sort(x, d)
    v = dispatch1("gather", [s.values, pos], {"dim": d})
    i = dispatch1("gather", [s.indices, pos], {"dim": d})
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


def _median(fn, x, dim, keepdim, ignore_nan, kernel="median_out"):
    d = _normalize_dim(_one_dim(fn, dim), builtins.max(x.ndim, 1))
    n = x.shape[d] if x.ndim else 1
    if n == 0:
        raise IndexError(f"{fn}(): Expected reduction dim {d} to have non-zero size.")
    if x.dtype is D.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")  # torch's kernel names
    if x.ndim == 0:
        return x.clone(), _zero_index(x)
    shape = list(x.shape)
    shape[d] = 1
    if not x.dtype.is_floating_point:
        pos = C.full(shape, (n - 1) // 2, dtype=D.int64, device=x.device)
    else:
        nans = F.sum(F.isnan(x), d, keepdim=True)  # int64
        if ignore_nan:  # the lower median of the numbers; an all-NaN line gives its first NaN
            valid = n - nans
            pos = F.where(valid > 0, F.floor_divide(valid - 1, 2), 0)
        else:  # a line with a NaN gives its first NaN (NaNs sort last, stably)
            pos = F.where(nans > 0, n - nans, (n - 1) // 2)
    return _gather_sorted(x, d, pos, keepdim)


def _median_all(fn, x, ignore_nan):
    if x.numel() == 0:  # NaN, cast to the dtype as torch's is on x86 (int32/int64: their minimum; the small
        # ints wrap that to 0; bool: True). Made in float32 and cast (flow.full(nan, dtype=bfloat16) fails).
        return F._cast(C.full([], math.nan, device=x.device), x.dtype)
    return _median(fn, x.reshape(-1), 0, False, ignore_nan, "median_cpu")[0]


def median(input, dim=None, keepdim=False, *, out=None):
    """The lower median: of all elements (a 0-dim tensor), or along dim -> (values, indices). NaN
    propagates: a line with a NaN has the median NaN (at its first NaN)."""
    x = _tensor_arg("median", input, "input", 1)
    if dim is None:
        return _out("median", out, _median_all("median", x, False))
    return _pair(_median_t, out, *_median(x=x, fn="median", dim=dim, keepdim=keepdim, ignore_nan=False))


def nanmedian(input, dim=None, keepdim=False, *, out=None):
    """median ignoring NaNs (an all-NaN line gives NaN)."""
    x = _tensor_arg("nanmedian", input, "input", 1)
    if dim is None:
        return _out("nanmedian", out, _median_all("nanmedian", x, True))
    return _pair(_nanmedian_t, out, *_median(x=x, fn="nanmedian", dim=dim, keepdim=keepdim, ignore_nan=True))


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The k-th smallest element along dim (k from 1; NaN counts as the largest) -> (values,
    indices)."""
    x = _tensor_arg("kthvalue", input, "input", 1)
    if isinstance(k, builtins.bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"kthvalue(): argument 'k' (position 2) must be int, not {_type_name(k)}")
    d = _normalize_dim(_one_dim("kthvalue", dim), builtins.max(x.ndim, 1))
    n = x.shape[d] if x.ndim else 1
    if n == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {d} to have non-zero size.")
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if x.ndim == 0:
        return _pair(_kthvalue_t, out, x.clone(), _zero_index(x))
    if x.dtype is D.bool_:
        raise NotImplementedError("\"kthvalue_cpu\" not implemented for 'Bool'")
    top = F.topk(x, builtins.int(k), d, largest=False)  # the k smallest, ascending (stable)
    v, i = top.values.narrow(d, k - 1, 1), top.indices.narrow(d, k - 1, 1)
    return _pair(_kthvalue_t, out, *((v, i) if keepdim else (v.squeeze(d), i.squeeze(d))))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(fn, input, q, dim, keepdim, interpolation, out, ignore_nan):
    """torch's quantile_compute: sort, ranks = q * (count - 1) in float64, gather below/above, lerp
    (with the weights in the input's dtype)."""
    x = _tensor_arg(fn, input, "input", 1)
    if x.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{fn}() input tensor must be either float or double dtype")
    if x.numel() == 0:
        raise RuntimeError(f"{fn}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{fn}() interpolation must be one of linear, lower, higher, midpoint or nearest. Got "
                           f"{interpolation}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"{fn}() q must be a scalar or 1D tensor")
        if q.dtype is not x.dtype:
            raise RuntimeError(f"{fn}() q tensor must be same dtype as the input tensor")
        if current_trace() is None and q.numel() and not builtins.bool(F.all((q >= 0) & (q <= 1))):
            raise RuntimeError(f"{fn}() q values must be in the range [0, 1]")
        q_1d, scalar_q = q.reshape(-1), q.ndim == 0
    else:
        s = _scalar(q)
        if s is None or isinstance(s, builtins.bool):
            raise TypeError(f"{fn}(): argument 'q' (position 2) must be float or Tensor, not {_type_name(q)}")
        if not 0 <= s <= 1:
            raise RuntimeError(f"{fn}() q must be in the range [0, 1] but got {s}")
        q_1d, scalar_q = C.full([1], builtins.float(s), dtype=x.dtype, device=x.device), True
    nq = q_1d.shape[0]
    if dim is None:
        sorted_ = F.sort(x.reshape(-1)).values
        out_shape = [1] * x.ndim if keepdim else []
    else:
        d = _normalize_dim(_one_dim(fn, dim), builtins.max(x.ndim, 1))
        sorted_ = F.sort(x, d).values.movedim(d, -1) if x.ndim else x.reshape(1)
        out_shape = list(x.shape)
        if x.ndim:
            if keepdim:
                out_shape[d] = 1
            else:
                del out_shape[d]
    n = sorted_.shape[-1]
    lead = list(sorted_.shape[:-1])
    nans = F.isnan(sorted_)
    q64 = q_1d if q_1d.dtype is D.float64 else F._cast(q_1d, D.float64)  # torch's ranks are float64
    if ignore_nan:  # ranks over the numbers; an all-NaN line gets rank 0 (a NaN)
        count = F.sum(~nans, -1, keepdim=True)
        ranks = F._cast(count - 1, D.float64) * q64
        ranks = F.where(ranks < 0, 0.0, ranks)
    else:  # a line with a NaN gets the last rank (a NaN)
        ranks = F.where(F.any(nans, -1, keepdim=True), builtins.float(n - 1), q64 * (n - 1))
    ranks = ranks.expand(lead + [nq])
    if interpolation == "lower":
        ranks = F.floor(ranks)
    elif interpolation == "higher":
        ranks = F.ceil(ranks)
    elif interpolation == "nearest":
        ranks = F.round(ranks)
    below = F._cast(ranks, D.int64)
    values = dispatch1("gather", [sorted_, below], {"dim": len(lead)})
    if interpolation in ("linear", "midpoint"):
        weights = F._cast(ranks - F._cast(below, D.float64), x.dtype) if interpolation == "linear" else 0.5
        above = dispatch1("gather", [sorted_, F._cast(F.ceil(ranks), D.int64)], {"dim": len(lead)})
        values = lerp(values, above, weights)
    # values: lead + [nq] -> [nq] + out_shape (a scalar q: out_shape)
    values = values.movedim(-1, 0).reshape([nq] + out_shape)
    return _out(fn, out, values.reshape(out_shape) if scalar_q else values)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-th quantiles along dim (all elements when dim is None); q a number or a 1-D tensor (its
    quantiles come first in the result). NaN propagates."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, out, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """quantile ignoring NaNs (an all-NaN line gives NaN)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, out, True)


def _shift_scan(tensors, combine):
    """Inclusive Hillis-Steele scan along the last dim of equally shaped tensors: after step s, every
    position holds the combination of the 2s elements ending there. combine(earlier, later) takes
    and returns tuples of tensors and must be associative."""
    n = tensors[0].shape[-1]
    cur = tuple(tensors)
    step = 1
    while step < n:
        early = tuple(t.narrow(-1, 0, n - step) for t in cur)
        late = tuple(t.narrow(-1, step, n - step) for t in cur)
        merged = combine(early, late)
        cur = tuple(F.cat([t.narrow(-1, 0, step), m], -1) for t, m in zip(cur, merged))
        step *= 2
    return cur


def _positions(x, n):
    """0..n-1 along the last dim, expanded to x's shape (int64)."""
    return C.arange(n, device=x.device).expand(list(x.shape))


def _cum_extreme(fn, kind, input, dim, out):
    x = _tensor_arg(fn, input, "input", 1)
    d = _normalize_dim(_one_dim(fn, dim), builtins.max(x.ndim, 1))
    if x.ndim == 0:
        return _pair(kind, out, x.clone(), _zero_index(x))
    xt = x.movedim(d, -1)
    n = xt.shape[-1]
    floating = x.dtype.is_floating_point

    def combine(early, late):
        (ev, ei), (lv, li) = early, late
        later_wins = (lv >= ev) if fn == "cummax" else (lv <= ev)  # ties: the later index (torch's loop)
        if floating:  # a NaN always wins, and then stays (torch's loop)
            later_wins = F.isnan(lv) | (later_wins & ~F.isnan(ev))
        return F.where(later_wins, lv, ev), F.where(later_wins, li, ei)

    v, i = _shift_scan((xt, _positions(xt, n)), combine) if n else (xt, _positions(xt, n))
    v = v if v.dtype is x.dtype else F._cast(v, x.dtype)
    return _pair(kind, out, _fresh(v.movedim(-1, d), x), _fresh(i.movedim(-1, d).contiguous(), x))


def cummax(input, dim, *, out=None):
    """The running maximum along dim -> (values, indices): torch's rule, a NaN wins and stays, ties
    take the later index."""
    return _cum_extreme("cummax", _cummax_t, input, dim, out)


def cummin(input, dim, *, out=None):
    return _cum_extreme("cummin", _cummin_t, input, dim, out)


def logcumsumexp(input, dim, *, out=None):
    """log(cumsum(exp(input))) without overflow: a scan of logaddexp (in float32 for half inputs)."""
    x = _tensor_arg("logcumsumexp", input, "input", 1)
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{x.dtype._torch_short}'")
    d = _normalize_dim(_one_dim("logcumsumexp", dim), builtins.max(x.ndim, 1))
    if x.ndim == 0:
        return _out("logcumsumexp", out, x.clone())

    def scan(a):
        t = a.movedim(d, -1)
        (r,) = _shift_scan((t,), lambda early, late: (logaddexp(early[0], late[0]),))
        return (r if r is not t else t.clone()).movedim(-1, d)

    return _out("logcumsumexp", out, _in_opmath(x.dtype, scan, x))


def mode(input, dim=-1, keepdim=False, *, out=None):
    """The most frequent value along dim (the smallest of equally frequent ones) and the index of its
    last occurrence -> (values, indices). Traceable: a sort, run lengths by a scan, a max."""
    x = _tensor_arg("mode", input, "input", 1)
    d = _normalize_dim(_one_dim("mode", dim), builtins.max(x.ndim, 1))
    if x.ndim == 0:
        return _pair(_mode_t, out, x.clone(), _zero_index(x))
    n = x.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    s = F.sort(x.movedim(d, -1), -1)
    sv, si = s.values, s.indices
    pos = _positions(sv, n)
    if n > 1:
        differs = sv.narrow(-1, 1, n - 1) != sv.narrow(-1, 0, n - 1)
        true = C.ones(list(sv.shape[:-1]) + [1], dtype=D.bool_, device=x.device)
        starts = F.cat([true, differs], -1)
        ends = F.cat([differs, true], -1)
        (run_start,) = _shift_scan((F.where(starts, pos, 0),), lambda a, b: (F.maximum(a[0], b[0]),))
        freq = F.where(ends, pos - run_start + 1, 0)
        at = F.argmax(freq, -1, keepdim=True)
    else:
        at = C.zeros(list(sv.shape[:-1]) + [1], dtype=D.int64, device=x.device)
    v = dispatch1("gather", [sv, at], {"dim": sv.ndim - 1}).movedim(-1, d)
    i = dispatch1("gather", [si, at], {"dim": sv.ndim - 1}).movedim(-1, d)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return _pair(_mode_t, out, v, i)


# ---- shapes and joins -----------------------------------------------------------------------------


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (logical xor for bool), after joining prepend/append."""
    x = _tensor_arg("diff", input, "input", 1)
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _normalize_dim(dim, x.ndim)
    parts = []
    for extra in (prepend, x, append):
        if extra is None:
            continue
        if extra.ndim != x.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        parts.append(extra)
    if len(parts) > 1:
        dt = parts[0].dtype
        for p in parts[1:]:
            dt = promote_types(dt, p.dtype)
        x = F.cat([p if p.dtype is dt else F._cast(p, dt) for p in parts], d)
    for _ in range(builtins.int(n)):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
        x = F.logical_xor(hi, lo) if x.dtype is D.bool_ else hi - lo
    return x if n else x.clone()


def _cross(x, y, d):
    def part(t, k):
        return t.narrow(d, k, 1)

    a0, a1, a2 = part(x, 0), part(x, 1), part(x, 2)
    b0, b1, b2 = part(y, 0), part(y, 1), part(y, 2)
    return F.cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def _linalg_cross(fn, x, y, dim):
    if x.ndim != y.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if x.dtype is not y.dtype:
        raise RuntimeError(f"expected scalar type {x.dtype._torch_short} but found {y.dtype._torch_short}")
    if x.dtype is D.bool_:
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    d = _normalize_dim(dim, builtins.max(x.ndim, 1))
    if x.shape[d] != 3 or y.shape[d] != 3:
        raise RuntimeError(f"{fn}: inputs dimension {dim} must have length 3. Got {x.shape[d]} and {y.shape[d]}")
    shape = list(broadcast_shapes(x.shape, y.shape))
    return _cross(x.expand(shape), y.expand(shape), d)


def cross(input, other, dim=None, *, out=None):
    """The cross product of 3-vectors along dim (default: the first dim of input of size 3)."""
    x = _tensor_arg("cross", input, "input", 1)
    y = _tensor_arg("cross", other, "other", 2)
    if dim is None:
        warnings.warn("Using flow.cross without specifying the dim arg is deprecated (as in torch): it takes the "
                      "first dim of size 3; pass dim explicitly or use flow.linalg.cross (dim=-1)", UserWarning,
                      stacklevel=2)
        dim = next((k for k, s in enumerate(x.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return _out("cross", out, _linalg_cross("linalg.cross", x, y, dim))


def _matmul2d(a, b):
    """[..., m, k] @ [..., k, n] for the linalg products: flow.matmul (exact for integers), with
    torch's addmm message for bool."""
    if a.dtype is D.bool_:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    return F.matmul(a, b)


def tensordot(a, b, dims=2, out=None):
    """Contracts dims of a with dims of b: an int n (a's last n with b's first n) or two lists."""
    x = _tensor_arg("tensordot", a, "a", 1)
    y = _tensor_arg("tensordot", b, "b", 2)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, numbers.Integral):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > x.ndim or dims > y.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(x.ndim - dims, x.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("tensordot expects dims to be a pair of lists of dimensions")
        da, db = dims
        da = [da] if isinstance(da, numbers.Integral) else list(da)
        db = [db] if isinstance(db, numbers.Integral) else list(db)
        if len(da) != len(db):
            raise RuntimeError("both dimension lists should have same length")
    if x.dtype is not y.dtype:
        raise RuntimeError("both inputs should have same dtype")
    da = [_normalize_dim(k, x.ndim) for k in da]
    db = [_normalize_dim(k, y.ndim) for k in db]
    for ka, kb in zip(da, db):
        if x.shape[ka] != y.shape[kb]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {x.shape[ka]} in dim {ka} "
                               f"and second has size {y.shape[kb]} in dim {kb}")
    fa = [k for k in range(x.ndim) if k not in da]
    fb = [k for k in range(y.ndim) if k not in db]
    k = math.prod(x.shape[i] for i in da)
    m = math.prod(x.shape[i] for i in fa)
    nn = math.prod(y.shape[i] for i in fb)
    a2 = x.permute(fa + da).reshape(m, k)
    b2 = y.permute(db + fb).reshape(k, nn)
    r = _matmul2d(a2, b2) if k else C.zeros([m, nn], dtype=x.dtype, device=x.device)
    return _out("tensordot", out, r.reshape([x.shape[i] for i in fa] + [y.shape[i] for i in fb]))


def kron(input, other, *, out=None):
    """The Kronecker product: block (i, j, ...) is input[i, j, ...] * other."""
    x = _tensor_arg("kron", input, "input", 1)
    y = _tensor_arg("kron", other, "other", 2)
    nd = builtins.max(x.ndim, y.ndim)
    sx = [1] * (nd - x.ndim) + list(x.shape)
    sy = [1] * (nd - y.ndim) + list(y.shape)
    xi = x.reshape([v for s in sx for v in (s, 1)])
    yi = y.reshape([v for s in sy for v in (1, s)])
    return _out("kron", out, (xi * yi).reshape([a * b for a, b in zip(sx, sy)]))


def block_diag(*tensors):
    """The tensors (0-, 1- or 2-d) as diagonal blocks of a matrix, zeros elsewhere."""
    ts = []
    for i, t in enumerate(tensors):
        t = _tensor_arg("block_diag", t, "tensors", 1)
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
        ts.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t)
    if not ts:
        return C.empty(1, 0)
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = promote_types(dt, t.dtype)
    device = ts[0].device
    cols = builtins.sum(t.shape[1] for t in ts)
    rows, at = [], 0
    for t in ts:
        r, c = t.shape
        parts = [C.zeros(r, at, dtype=dt, device=device), t if t.dtype is dt else F._cast(t, dt),
                 C.zeros(r, cols - at - c, dtype=dt, device=device)]
        rows.append(F.cat([p for p in parts if p.shape[1]] or parts[:1], 1))
        at += c
    return F.cat(rows, 0)


def cartesian_prod(*tensors):
    """All tuples of one element from each 1-d tensor, in row-major order, as rows."""
    ts = [_tensor_arg("cartesian_prod", t, "tensors", 1) for t in tensors]
    for t in ts:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(ts) == 1:
        return ts[0]
    if builtins.any(t.dtype is not ts[0].dtype for t in ts):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    return F.stack([g.reshape(-1) for g in meshgrid(*ts, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    """All r-combinations of a 1-d tensor's elements (itertools' order) as rows; the indices are
    built on the host from the length alone, so it traces."""
    x = _tensor_arg("combinations", input, "input", 1)
    if x.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(x.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return C.empty(0, dtype=x.dtype, device=x.device)
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(make(range(x.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if idx.shape[0] == 0:
        return C.empty(0, r, dtype=x.dtype, device=x.device)
    return dispatch1("index_select", [x, C.tensor(idx.reshape(-1)).to(x.device)], {"dim": 0}).reshape(-1, r)


def _tri_indices(fn, np_fn, row, col, offset, dtype, device):
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    dt = D.to_dtype(dtype)
    if dt not in (D.int32, D.int64):
        raise NotImplementedError(f"\"{fn}\" not implemented for '{dt._torch_short}'")
    i, j = np_fn(row, offset, col)
    return C.tensor(np.stack([i, j]).astype(np.int64).reshape(2, -1), dtype=dt, device=device)


def tril_indices(row, col, offset=0, *, dtype=D.int64, device=None, layout=None):
    """The (row, col) coordinates of the lower triangle of a row x col matrix, row by row, as [2, N]."""
    return _tri_indices("tril_indices", np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=D.int64, device=None, layout=None):
    return _tri_indices("triu_indices", np.triu_indices, row, col, offset, dtype, device)


def _atleast(fn, shaper, tensors):
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    outs = []
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument 'tensors' must be tuple of Tensors, not {_type_name(t)}")
        outs.append(shaper(t))
    return outs[0] if one else tuple(outs)


def atleast_1d(*tensors):
    return _atleast("atleast_1d", lambda t: t.reshape(1) if t.ndim == 0 else t, tensors)


def atleast_2d(*tensors):
    return _atleast("atleast_2d", lambda t: t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t,
                    tensors)


def _3d(t):
    if t.ndim == 0:
        return t.reshape(1, 1, 1)
    if t.ndim == 1:
        return t.reshape(1, -1, 1)
    if t.ndim == 2:
        return t.unsqueeze(-1)
    return t


def atleast_3d(*tensors):
    return _atleast("atleast_3d", _3d, tensors)


def dstack(tensors, *, out=None):
    """Joins along the third dim (after atleast_3d)."""
    return F.cat([_3d(t) for t in _tensor_list("dstack", tensors)], 2, out=out)


def column_stack(tensors, *, out=None):
    """Joins as columns: 0- and 1-d tensors become columns, then hstack."""
    ts = [t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in _tensor_list("column_stack", tensors)]
    return F.cat(ts, 1, out=out)


def row_stack(tensors, *, out=None):
    return F.vstack(tensors, out=out)


def _split_along(fn, x, sections, dim, min_dims):
    if x.ndim < min_dims:
        plural = "s" if min_dims > 1 else ""
        raise RuntimeError(f"torch.{fn} requires a tensor with at least {min_dims} dimension{plural}, but got a tensor "
                           f"with {x.ndim} dimensions!")
    if isinstance(sections, numbers.Integral):
        if sections == 0 or x.shape[dim] % sections:
            raise RuntimeError(f"torch.{fn} attempted to split along dimension {dim}, but the size of the dimension "
                               f"{x.shape[dim]} is not divisible by the split_size {sections}!")
    return x.tensor_split(sections, dim)


def hsplit(input, indices_or_sections):
    x = _tensor_arg("hsplit", input, "input", 1)
    return _split_along("hsplit", x, indices_or_sections, 0 if x.ndim == 1 else 1, 1)


def vsplit(input, indices_or_sections):
    return _split_along("vsplit", _tensor_arg("vsplit", input, "input", 1), indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _split_along("dsplit", _tensor_arg("dsplit", input, "input", 1), indices_or_sections, 2, 3)


def rot90(input, k=1, dims=(0, 1)):
    """Rotation by 90 degrees k times in the plane of dims (from the first towards the second)."""
    x = _tensor_arg("rot90", input, "input", 1)
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    d0, d1 = _normalize_dim(dims[0], x.ndim), _normalize_dim(dims[1], x.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    k = builtins.int(k) % 4
    if k == 1:
        return F.flip(x, [d1]).transpose(d0, d1)
    if k == 2:
        return F.flip(x, [d0, d1])
    if k == 3:
        return F.flip(x, [d0]).transpose(d0, d1)
    return x.clone()


def fliplr(input):
    x = _tensor_arg("fliplr", input, "input", 1)
    if x.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return F.flip(x, [1])


def flipud(input):
    x = _tensor_arg("flipud", input, "input", 1)
    if x.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return F.flip(x, [0])


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, layout=None, requires_grad=False, out=None):
    """base ** linspace(start, end, steps), torch's formula (the first half counted from start, the
    second from end; the exponent and power in float64, the ends in the result dtype)."""
    if isinstance(steps, builtins.bool) or not isinstance(steps, numbers.Integral):
        raise TypeError(f"logspace(): argument 'steps' must be int, not {_type_name(steps)}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = get_default_dtype() if dtype is None else D.to_dtype(dtype)
    start = builtins.float(start.item()) if isinstance(start, Tensor) else start
    end = builtins.float(end.item()) if isinstance(end, Tensor) else end

    def as_dt(v):  # a scalar converted to the result dtype, as a float64
        return builtins.float(C.tensor(v, dtype=dt).to(D.float64).item())

    if steps == 1:
        arr = np.array([builtins.float(base) ** builtins.float(start)])
    else:
        a, b = as_dt(start), as_dt(end)
        i = np.arange(steps, dtype=np.float64)
        step = (b - a) / builtins.max(steps - 1, 1)
        expo = np.where(i < steps // 2, a + step * i, b - step * (steps - i - 1))
        arr = np.power(np.float64(base), expo)
    r = C.tensor(arr, dtype=dt, device=device) if dt.is_floating_point else \
        C.tensor(np.trunc(arr), dtype=dt, device=device)
    return _out("logspace", out, r)


def narrow_copy(input, dim, start, length):
    return _tensor_arg("narrow_copy", input, "input", 1).narrow(dim, start, length).clone()


def take(input, index, *, out=None):
    """input's elements at flat (row-major) positions `index` (negative ones from the end), in
    index's shape."""
    x = _tensor_arg("take", input, "input", 1)
    ix = _tensor_arg("take", index, "index", 2)
    if ix.dtype is not D.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {ix.dtype._torch_short}")
    n = x.numel()
    if _host_checks_indices(ix) and ix.numel():  # (elsewhere index_select's kernel checks)
        lo, hi = builtins.int(F.amin(ix).item()), builtins.int(F.amax(ix).item())
        bad = hi if hi >= n else lo if lo < -n else None
        if bad is not None:
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    if ix.numel() == 0:
        return _out("take", out, C.empty(list(ix.shape), dtype=x.dtype, device=x.device))
    # index_select wraps negatives itself and checks the range (in compiled code too).
    r = dispatch1("index_select", [x.reshape(-1), ix.reshape(-1)], {"dim": 0})
    return _out("take", out, r.reshape(list(ix.shape)))


def vander(x, N=None, increasing=False):
    """Columns x^(N-1) ... x^0 (increasing: x^0 ... x^(N-1)), as torch builds them (a cumprod, in
    x's dtype promoted with int64)."""
    t = _tensor_arg("vander", x, "x", 1)
    if t.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = t.shape[0] if N is None else builtins.int(N)
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    r = _vander_cols(t, n)
    return r if increasing else F.flip(r, [1])


def _vander_cols(t, n):
    """[..., len, n]: t^0, t^1, ... along a new last dim."""
    dt = promote_types(t.dtype, D.int64)
    shape = list(t.shape)
    if n == 0:
        return C.empty(shape + [0], dtype=dt, device=t.device)
    ones = C.ones(shape + [1], dtype=dt, device=t.device)
    if n == 1:
        return ones
    tt = t if t.dtype is dt else F._cast(t, dt)
    powers = F.cumprod(tt.unsqueeze(-1).expand(shape + [n - 1]), -1)
    return F.cat([ones, powers], -1)


def _trapezoid_x(y, x, d):
    if y.dtype is D.bool_ or x.dtype is D.bool_:
        raise RuntimeError("trapezoid: received a bool input for `x` or `y`, but bool is not supported")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError("trapezoid: There must be one `x` value for each sample point")
        view = [1] * y.ndim
        view[d] = x.shape[0]
        x = x.reshape(view)
    elif x.ndim < y.ndim:
        x = x.reshape([1] * (y.ndim - x.ndim) + list(x.shape))
    m = x.shape[d]
    return x.narrow(d, 1, m - 1) - x.narrow(d, 0, m - 1)


def _check_dx(dx):
    s = _scalar(dx)
    if s is None or isinstance(s, builtins.bool):
        raise RuntimeError("trapezoid: Currently, we only support dx as a real number.")
    return builtins.float(s)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim, with sample points x (a tensor) or a spacing dx (default 1)."""
    yt = _tensor_arg("trapezoid", y, "y", 1)
    if x is not None and dx is not None:
        raise TypeError("trapezoid() received an invalid combination of arguments - got (Tensor, Tensor, dx)")
    d = _normalize_dim(dim, builtins.max(yt.ndim, 1))
    if yt.shape[d] == 0:
        shape = [s for k, s in enumerate(yt.shape) if k != d]
        return C.zeros(shape, dtype=yt.dtype, device=yt.device)
    m = yt.shape[d]
    if x is not None:
        step = _trapezoid_x(yt, _tensor_arg("trapezoid", x, "x", 2), d)
        return F.sum(step * (yt.narrow(d, 0, m - 1) + yt.narrow(d, 1, m - 1)), d) / 2.0  # torch's order
    if yt.dtype is D.bool_:
        raise RuntimeError("trapezoid: received a bool input for `y`, but bool is not supported")
    h = _check_dx(1 if dx is None else dx)
    return (F.sum(yt, d) - (yt.select(d, 0) + yt.select(d, -1)) * 0.5) * h


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral along dim (one element shorter than y there)."""
    yt = _tensor_arg("cumulative_trapezoid", y, "y", 1)
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid() received an invalid combination of arguments - got (Tensor, Tensor, "
                        "dx)")
    d = _normalize_dim(dim, builtins.max(yt.ndim, 1))
    m = yt.shape[d]
    if yt.dtype is D.bool_ or (isinstance(x, Tensor) and x.dtype is D.bool_):
        raise RuntimeError("cumulative_trapezoid: received a bool input for `x` or `y`, but bool is not supported")
    if m == 0:  # (the formula's dtype: y's promoted with x, floating)
        dt = result_type(yt, x) if x is not None else yt.dtype
        return C.empty(list(yt.shape), dtype=dt if dt.is_floating_point else D.float32, device=yt.device)
    pair_sum = yt.narrow(d, 0, m - 1) + yt.narrow(d, 1, m - 1)
    if x is not None:
        step = _trapezoid_x(yt, _tensor_arg("cumulative_trapezoid", x, "x", 2), d)
        return F.cumsum(step * pair_sum / 2.0, d)  # torch's order (an integer product wraps first)
    return F.cumsum(_check_dx(1 if dx is None else dx) / 2.0 * pair_sum, d)


# ---- distances ------------------------------------------------------------------------------------


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast)."""
    from . import linalg

    x = _tensor_arg("dist", input, "input", 1)
    y = _tensor_arg("dist", other, "other", 2)
    if not (x.dtype.is_floating_point and y.dtype.is_floating_point):
        raise RuntimeError(f"dist(): input dtype should be either floating point, got {x.dtype._torch_short} and "
                           f"{y.dtype._torch_short}")
    return linalg.vector_norm(x - y, builtins.float(p))


def _check_p(fn, p):
    s = _scalar(p)
    if s is None:
        raise TypeError(f"{fn}(): argument 'p' must be float, not {_type_name(p)}")
    if s < 0:
        raise RuntimeError(f"{fn} only supports non-negative p values")
    return builtins.float(s)


def _pnorm_last(diff, p):
    from . import linalg

    return linalg.vector_norm(diff, p, dim=-1)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 [..., P, M] and of x2 [..., R, M] -> [..., P, R],
    from the differences themselves (torch's exact form for every compute_mode)."""
    a = _tensor_arg("cdist", x1, "x1", 1)
    b = _tensor_arg("cdist", x2, "x2", 2)
    p = _check_p("cdist", p)
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if a.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {a.ndim}D")
    if b.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {b.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} X2: {b.shape[-1]}")
    for t, name in ((a, "X1"), (b, "X2")):
        if t.dtype not in (D.float32, D.float64):
            if t.dtype in _HALF:
                raise NotImplementedError(f"\"cdist\" not implemented for '{t.dtype._torch_short}'")
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {t.dtype._torch_short}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {a.dtype._torch_short} but found {b.dtype._torch_short}")
    batch = list(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    P, R, M = a.shape[-2], b.shape[-2], a.shape[-1]
    if M == 0 or P == 0 or R == 0:
        return C.zeros(batch + [P, R], dtype=a.dtype, device=a.device)
    diff = a.expand(batch + [P, M]).unsqueeze(-2) - b.expand(batch + [R, M]).unsqueeze(-3)
    return _pnorm_last(diff, p)


def pdist(input, p=2):
    """The p-norm distance between each pair of rows i < j of a [N, M] matrix, row-major -> [N(N-1)/2]."""
    x = _tensor_arg("pdist", input, "input", 1)
    if x.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {x.ndim}D")
    if x.dtype not in (D.float32, D.float64):
        if x.dtype in _HALF:
            raise NotImplementedError(f"\"pdist\" not implemented for '{x.dtype._torch_short}'")
        raise RuntimeError("pdist only supports floating-point dtypes")
    p = _check_p("pdist", p)
    n = x.shape[0]
    if n <= 1:
        return C.empty(0, dtype=x.dtype, device=x.device)
    if x.shape[1] == 0:
        return C.zeros(n * (n - 1) // 2, dtype=x.dtype, device=x.device)
    i, j = np.triu_indices(n, 1)
    rows_i = dispatch1("index_select", [x, C.tensor(i.astype(np.int64)).to(x.device)], {"dim": 0})
    rows_j = dispatch1("index_select", [x, C.tensor(j.astype(np.int64)).to(x.device)], {"dim": 0})
    return _pnorm_last(rows_i - rows_j, p)


def matrix_power(input, n, *, out=None):
    from . import linalg

    return linalg.matrix_power(input, n, out=out)


__all__ = ["finfo", "iinfo", "get_default_dtype", "set_default_dtype", "get_num_threads", "set_num_threads",
           "is_complex", "is_nonzero", "is_same_size", "result_type", "can_cast", "inf", "nan", "pi", "e", "newaxis",
           "sgn", "signbit", "copysign", "heaviside", "logit", "xlogy", "sinc", "nansum", "nanmean", "aminmax",
           "median", "nanmedian", "kthvalue", "quantile", "nanquantile", "mode", "logcumsumexp", "cummax", "cummin",
           "diff", "cross", "tensordot", "kron", "block_diag", "cartesian_prod", "combinations", "tril_indices",
           "triu_indices", "atleast_1d", "atleast_2d", "atleast_3d", "dstack", "column_stack", "row_stack", "hsplit",
           "vsplit", "dsplit", "rot90", "fliplr", "flipud", "logspace", "narrow_copy", "take", "vander", "trapezoid",
           "trapz", "cumulative_trapezoid", "dist", "cdist", "pdist", "matrix_power"]


# ---- Tensor methods --------------------------------------------------------------------------------

_METHODS = ["is_complex", "is_nonzero", "is_same_size", "sgn", "signbit", "copysign", "heaviside", "logit", "xlogy",
            "sinc", "nansum", "nanmean", "aminmax", "median", "nanmedian", "kthvalue", "quantile", "nanquantile",
            "mode", "logcumsumexp", "cummax", "cummin", "diff", "cross", "kron", "rot90", "fliplr", "flipud",
            "narrow_copy", "take", "hsplit", "vsplit", "dsplit", "dist", "matrix_power"]
_INPLACE = ["sgn", "copysign", "heaviside", "logit", "xlogy", "sinc"]
for _name in _METHODS:
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _method(_name, globals()[_name]))
for _name in _INPLACE:
    if not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _inplace_method(_name + "_", globals()[_name]))
del _name
