"""torch's scatter family over one op, scatter (dsl/ops/scatter.cpp): scatter, scatter_add,
scatter_reduce, index_add, index_copy, index_fill, index_reduce, index_put, put, masked_scatter,
bincount and histc, as functions and Tensor methods (the ``_`` forms write in place).

Note: the op is scatter(self, index, src; dim, reduce in none|sum|prod|amax|amin, include_self).
Everything else is a formula over it, written here once:
  - scatter_reduce's "mean" is a sum and a count (two scatters) and a division (floor division for
    integers, as torch), keeping self where nothing was scattered with include_self=False;
  - index_add/index_copy/index_fill/index_reduce scatter along ``dim`` with the 1-D index expanded
    over the source's other dims;
  - index_put and put scatter along dim 0 of the input viewed as [positions, rest...], the indexed
    positions linearized (negative indices wrap, as torch);
  - masked_scatter needs no scatter: the k-th set element of the mask reads source's k-th element,
    a gather at cumsum(mask) - 1;
  - bincount and histc scatter-add ones (or weights) into bins.
Half-precision inputs scatter in float32 and round once after, which is what torch's kernels do
(they accumulate in float32: 3000 float16 ones scatter-added into one element give 3000, not 2048).
Duplicate indices: on the CPU the last along ``dim`` wins (for reduce none) and sums round in
index order; on CUDA see runtime/scatter_kernel.h (as in torch, the order is unspecified on the
position-parallel path). An index out of range raises on the CPU and is skipped on CUDA.
"""
import builtins
import math
import numbers

from . import _dtype as D
from ._dispatch import current_trace, dispatch1
from ._errors import trace_error
from . import _ops as F
from ._creation import check_fill_value
from ._ops import _normalize_dim, _tensor_arg, _type_name
from ._indexing import _host_checks_indices, _wrap_index
from ._tensor import Tensor, _inplace_method, _method

__all__ = ["scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill", "index_reduce",
           "index_put", "put", "masked_scatter", "bincount", "histc"]

_HALF = (D.float16, D.bfloat16)
# The dtype the op scatters each storage-only dtype in (small ints wrap when rounded back, as torch's).
_WIDE = {D.float16: D.float32, D.bfloat16: D.float32, D.uint8: D.int32, D.int8: D.int32, D.int16: D.int32}


def _index_arg(fn, index, pos=3, vector=False):
    ix = _tensor_arg(fn, index, "index", pos)
    if ix.dtype not in (D.int64, D.int32):
        if vector:
            raise RuntimeError(f"{fn}(): Expected dtype int32/int64 for index but got: {ix.dtype._torch_short}")
        raise RuntimeError(f"{fn}(): Expected dtype int64 for index")
    return ix if ix.dtype is D.int64 else ix.to(D.int64)


def _full(shape, value, like):
    from ._creation import full

    return full(list(shape), value, dtype=like.dtype, device=like.device)


def _scatter_op(x, d, ix, src, reduce="none", include_self=True):
    """The op itself: tensors of equal rank, x.dtype == src.dtype; half precision in float32, small
    ints in int32."""
    if src.dtype is not x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if x.dtype in _WIDE:
        w = _WIDE[x.dtype]
        out = _scatter_op(x.to(w), d, ix, src.to(w), reduce, include_self)
        return out.to(x.dtype)
    return dispatch1("scatter", [x, ix, src], {"dim": d, "reduce": reduce, "include_self": builtins.bool(include_self)})


def _src_arg(fn, x, ix, src, value):
    if src is not None and value is not None:
        raise TypeError(f"{fn}() received both src and value")
    s = value if src is None else src
    if isinstance(s, Tensor):
        return s
    if s is None or isinstance(s, str) or not isinstance(s, (numbers.Number,)):
        raise TypeError(f"{fn}(): argument 'src' must be Tensor or a number, not {_type_name(s)}")
    return _full(ix.shape, s, x)


def scatter(input, dim, index, src=None, value=None, *, reduce=None, out=None):
    """torch.scatter: a copy of input with src (a tensor, or a number) written where index says
    along dim; reduce='add'|'multiply' combines instead (torch's deprecated spelling)."""
    x = _tensor_arg("scatter", input, "input", 1)
    ix = _index_arg("scatter", index)
    s = _src_arg("scatter", x, ix, src, value)
    if reduce is None:
        r = "none"
    elif reduce in ("add", "multiply"):
        r = "sum" if reduce == "add" else "prod"
    else:
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    return _out(out, _scatter_op(x, _normalize_dim(dim, x.ndim), ix, s, r))


def scatter_add(input, dim, index, src, *, out=None):
    x = _tensor_arg("scatter_add", input, "input", 1)
    ix = _index_arg("scatter_add", index)
    s = _tensor_arg("scatter_add", src, "src", 4)
    return _out(out, _scatter_op(x, _normalize_dim(dim, x.ndim), ix, s, "sum"))


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    """torch.scatter_reduce: reduce one of "sum", "prod", "mean", "amax", "amin"."""
    x = _tensor_arg("scatter_reduce", input, "input", 1)
    ix = _index_arg("scatter_reduce", index)
    s = _tensor_arg("scatter_reduce", src, "src", 4)
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    d = _normalize_dim(dim, x.ndim)
    if reduce != "mean":
        return _out(out, _scatter_op(x, d, ix, s, reduce, include_self))
    return _out(out, _scatter_mean(x, d, ix, s, include_self))


def _scatter_mean(x, d, ix, s, include_self):
    if x.dtype is D.bool_:
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    if s.dtype is not x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    work = D.float32 if x.dtype in _HALF else x.dtype
    xw, sw = x.to(work), s.to(work)
    total = _scatter_op(xw, d, ix, sw, "sum", include_self)
    ones = _full(ix.shape, 1, xw)
    count = _scatter_op(_full(x.shape, 1 if include_self else 0, xw), d, ix, ones, "sum")
    safe = count.clamp(min=1)
    mean = total // safe if not work.is_floating_point else total / safe
    return mean.where(count > 0, xw).to(x.dtype)


def _vector_index(fn, x, d, index, source_len):
    """index_*'s 1-D index (int32 or int64), checked as torch checks it."""
    ix = _index_arg(fn, index, 3, vector=True)
    if ix.ndim > 1:
        raise IndexError(f"{fn}(): Index is supposed to be a vector, but got dim: {ix.ndim} with type: "
                         f"{ix.dtype._torch_short} and size: {list(ix.shape)}")
    n = ix.numel()
    if source_len is not None and n != source_len:
        raise RuntimeError(f"{fn}(): Number of indices ({n}) should be equal to source.size(dim): ({source_len}), "
                           f"for dim: {d}")
    return ix.reshape(-1)


def _along(ix, d, shape):
    """A 1-D index along dim d, expanded over `shape`'s other dims (the scatter index of index_*)."""
    view = [1] * len(shape)
    if view:
        view[d] = -1
    return ix.reshape(view).expand(list(shape)) if shape else ix.reshape([])


def _index_source(fn, x, d, index, source):
    s = _tensor_arg(fn, source, "source", 4)
    if s.ndim != x.ndim and not (s.ndim <= 1 and x.ndim <= 1):
        raise IndexError(f"{fn}(): source and self must have the same number of dimensions")
    src_len = (s.shape[d] if s.ndim else 1)
    ix = _vector_index(fn, x, d, index, src_len)
    for k in range(x.ndim):
        if k != d and s.ndim and s.shape[k] != x.shape[k]:
            raise RuntimeError(f"{fn}(): source tensor shape must match self tensor shape, excluding the specified "
                               f"dimension. Got self.shape = {list(x.shape)} source.shape = {list(s.shape)}")
    shape = list(s.shape) if s.ndim else ([1] if x.ndim else [])
    return ix, s.reshape(shape) if s.ndim != len(shape) else s, shape


def index_add(input, dim, index, source, *, alpha=1, out=None):
    """torch.index_add: input.select(dim, index[j]) += alpha * source.select(dim, j)."""
    x = _tensor_arg("index_add", input, "input", 1)
    d = _normalize_dim(dim, x.ndim)
    ix, s, shape = _index_source("index_add_", x, d, index, source)
    if alpha != 1:
        s = s * alpha
        s = s.to(x.dtype)
    xs = x.reshape([1]) if x.ndim == 0 else x
    r = _scatter_op(xs, d, _along(ix, d, shape), s.reshape(shape) if shape else s, "sum")
    return _out(out, r.reshape([]) if x.ndim == 0 else r)


def index_copy(input, dim, index, source, *, out=None):
    x = _tensor_arg("index_copy", input, "input", 1)
    d = _normalize_dim(dim, x.ndim)
    ix, s, shape = _index_source("index_copy_", x, d, index, source)
    if isinstance(index, Tensor) and index.dtype is not D.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {index.dtype._torch_short}")
    xs = x.reshape([1]) if x.ndim == 0 else x
    r = _scatter_op(xs, d, _along(ix, d, shape), s.reshape(shape) if shape else s)
    return _out(out, r.reshape([]) if x.ndim == 0 else r)


def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    """torch.index_reduce: reduce "prod", "mean", "amax" or "amin"."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    x = _tensor_arg("index_reduce", input, "input", 1)
    d = _normalize_dim(dim, x.ndim)
    ix, s, shape = _index_source("index_reduce_", x, d, index, source)
    xs = x.reshape([1]) if x.ndim == 0 else x
    full_ix = _along(ix, d, shape)
    s = s.reshape(shape) if shape else s
    r = (_scatter_mean(xs, d, full_ix, s, include_self) if reduce == "mean"
         else _scatter_op(xs, d, full_ix, s, reduce, include_self))
    return _out(out, r.reshape([]) if x.ndim == 0 else r)


def index_fill(input, dim, index, value):
    """torch.index_fill: input.select(dim, i) = value for every i in index."""
    x = _tensor_arg("index_fill", input, "input", 1)
    d = _normalize_dim(dim, x.ndim)
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    check_fill_value(value, x.dtype)
    fill = value.to(x.dtype) if isinstance(value, Tensor) else value
    ix = _vector_index("index_fill_", x, d, index, None)
    if isinstance(index, Tensor) and index.dtype is not D.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    size = x.shape[d] if x.ndim else 1
    F._check_range(ix, size, d)  # torch's index_fill wraps negative indices (index_copy does not)
    ix = _wrap_index(ix, size, d)
    shape = list(x.shape) if x.ndim else [1]
    shape[d] = ix.numel()
    xs = x.reshape([1]) if x.ndim == 0 else x
    src = fill.expand(shape).contiguous() if isinstance(fill, Tensor) else _full(shape, fill, x)
    r = _scatter_op(xs, d, _along(ix, d, shape), src)
    return r.reshape([]) if x.ndim == 0 else r


def check_index_put_dtypes(x, v):
    if v.dtype is not x.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{x.dtype._torch_short} for the destination and {v.dtype._torch_short} for the source.")


def index_put(input, indices, values, accumulate=False):
    """torch.index_put: input[indices] = values (or += with accumulate), indices a tuple of integer
    index tensors for the leading dims (broadcast together; negative indices wrap)."""
    x = _tensor_arg("index_put", input, "input", 1)
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' must be tuple of Tensors, not {_type_name(indices)}")
    consumed = builtins.sum(i.ndim if isinstance(i, Tensor) and i.dtype is D.bool_ else 1 for i in indices)
    if builtins.max(consumed, len(indices)) > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim} (got "
                         f"{builtins.max(consumed, len(indices))})")
    idx, new_dims = [], []
    for i in indices:
        if not isinstance(i, Tensor):
            raise TypeError("index_put(): indices must be tensors (None and slices are indexing syntax: use x[...] = v)")
        if i.dtype is D.bool_ and i._c is None:
            raise trace_error("index_put() with a boolean mask", "the number of positions depends on the mask's "
                              "values; flow.jit compiles static shapes")
        if i.dtype is D.bool_ and i.ndim == 0:
            # A 0-d mask consumes no dim: it indexes a new dim of size 1, all of it (True) or none (False).
            new_dims.append(len(idx))
            x = x.unsqueeze(len(idx))
            idx.append(_full([1 if i.item() else 0], 0, x).to(D.int64))
        elif i.dtype is D.bool_:
            from ._data_dependent import nonzero

            idx.extend(nonzero(i, as_tuple=True))
        elif i.dtype in (D.int64, D.int32):
            idx.append(i.to(D.int64))
        else:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    from ._math import broadcast_shapes

    v = _tensor_arg("index_put", values, "values", 3)
    check_index_put_dtypes(x, v)
    if not idx:  # x[()] = values: the whole tensor
        v = v.to(x.dtype).expand(list(x.shape))
        return x + v if accumulate else v.clone()
    k = len(idx)
    lead = [int(s) for s in x.shape[:k]]
    rest = [int(s) for s in x.shape[k:]]
    bshape = list(broadcast_shapes(*(tuple(i.shape) for i in idx))) if idx else []
    lin = None
    for j, (i, size) in enumerate(zip(idx, lead)):
        if _host_checks_indices(i) and i.numel():  # (elsewhere _wrap_index's kernel checks)
            lo, hi = builtins.int(i.min()), builtins.int(i.max())
            bad = lo if lo < -size else hi if hi >= size else None
            if bad is not None:
                raise IndexError(f"index {bad} is out of bounds for dimension {j} with size {size}")
        wrapped = _wrap_index(i, size, j)
        stride = math.prod(lead[j + 1:])
        term = wrapped.expand(bshape) * stride
        lin = term if lin is None else lin + term
    n = math.prod(bshape)
    positions = math.prod(lead)
    if v.dtype is not x.dtype:
        v = v.to(x.dtype)
    try:
        v = v.expand(bshape + rest)
    except RuntimeError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to "
                           f"indexing result of shape {bshape + rest}") from None
    flat = x.reshape([positions] + rest)
    target = lin.reshape([n] + [1] * len(rest)).expand([n] + rest)
    r = _scatter_op(flat, 0, target, v.reshape([n] + rest), "sum" if accumulate else "none").reshape(list(x.shape))
    for d in reversed(new_dims):
        r = r.squeeze(d)
    return r


def put(input, index, source, accumulate=False):
    """torch.put: input viewed as 1-D, input[index] = source (or +=); negative indices wrap."""
    x = _tensor_arg("put", input, "input", 1)
    ix = _index_arg("put", index, 2)
    s = _tensor_arg("put", source, "source", 3)
    if s.numel() != ix.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {s.numel()}, index.numel() = {ix.numel()}")
    return index_put(x.reshape(-1), (ix.reshape(-1),), s.reshape(-1), accumulate).reshape(list(x.shape))


def masked_scatter(input, mask, source):
    """torch.masked_scatter: where mask (broadcast to input) is set, source's elements in order."""
    x = _tensor_arg("masked_scatter", input, "input", 1)
    m = _tensor_arg("masked_scatter", mask, "mask", 2)
    s = _tensor_arg("masked_scatter", source, "source", 3)
    if m.dtype is not D.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{m.dtype._torch_short}")
    if s.dtype is not x.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got {x.dtype._torch_short} "
                           f"and {s.dtype._torch_short}")
    mb = m.expand(list(x.shape)).reshape(-1)
    if current_trace() is None and builtins.int(mb.sum()) > s.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    if s.numel() == 0:
        return x.clone()
    k = (mb.to(D.int64).cumsum(0) - 1).clamp(0, s.numel() - 1)
    picked = s.reshape(-1).index_select(0, k)
    return picked.where(mb, x.reshape(-1)).reshape(list(x.shape))


def bincount(input, weights=None, minlength=0):
    """torch.bincount: counts (or summed weights) of each value of a 1-D non-negative int tensor.
    The length depends on the values (max + 1), so it runs eagerly only."""
    x = _tensor_arg("bincount", input, "input", 1)
    if x.ndim != 1 or x.dtype not in (D.int32, D.int64, D.bool_):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if x._c is None:
        raise trace_error("flow.bincount()", "the result's size depends on the input's values; flow.jit compiles "
                                             "static shapes (call it outside the compiled function, or use "
                                             "scatter_add into a fixed number of bins)")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != x.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    from ._creation import ones, zeros

    if x.numel() == 0:  # torch: int64 zeros, even with weights
        return zeros(minlength, dtype=D.int64, device=x.device)
    ix = x.to(D.int64)
    if builtins.int(ix.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    size = builtins.max(builtins.int(ix.max()) + 1, minlength)

    if weights is None:
        return _scatter_op(zeros(size, dtype=D.int64, device=x.device), 0, ix,
                           ones(x.shape[0], dtype=D.int64, device=x.device), "sum")
    dt = weights.dtype if weights.dtype.is_floating_point else D.float64
    return _scatter_op(zeros(size, dtype=dt, device=x.device), 0, ix, weights.to(dt), "sum")


def histc(input, bins=100, min=0, max=0, *, out=None):
    """torch.histc: counts in `bins` equal bins over [min, max] (the data's range when min == max);
    elements outside, and NaN, are not counted; max falls in the last bin."""
    x = _tensor_arg("histc", input, "input", 1)
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{x.dtype._torch_short}'")
    if bins <= 0:
        raise RuntimeError("torch.histogramdd: expected bins > 0")
    lo, hi = builtins.float(min), builtins.float(max)
    if lo > hi:
        raise RuntimeError("max must be larger than min")
    if lo == hi:
        if x._c is None:
            raise trace_error("flow.histc() with min == max", "the range comes from the input's values; give min "
                                                               "and max under flow.jit")
        if x.numel():
            lo, hi = builtins.float(x.min()), builtins.float(x.max())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
    xf = x.float().reshape(-1)
    inside = (xf >= lo) & (xf <= hi)
    b = ((xf - lo) * (bins / (hi - lo))).floor().clamp(0, bins - 1).to(D.int64)
    from ._creation import zeros

    counts = _scatter_op(zeros(bins, dtype=D.float32, device=x.device), 0, b.where(inside, 0), inside.float(), "sum")
    return _out(out, counts.to(x.dtype))


def _out(out, result):
    from ._ops import _out as ops_out

    return ops_out("scatter", out, result) if out is not None else result


# ---- Tensor methods ----------------------------------------------------------------------------

for _name in ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill", "index_reduce",
              "index_put", "put", "masked_scatter"):
    setattr(Tensor, _name, _method(_name, globals()[_name]))
    setattr(Tensor, _name + "_", _inplace_method(_name + "_", globals()[_name]))
for _name in ("bincount", "histc"):
    setattr(Tensor, _name, _method(_name, globals()[_name]))
del _name
