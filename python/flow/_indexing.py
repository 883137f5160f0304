"""Tensor indexing helpers (python/flow/_tensor.py's __getitem__ and __setitem__, and the ops
that take index tensors): an index as a tuple, ellipsis expansion, boolean masks, advanced
(integer tensor) indexing as one index_select, and the host-side range checks of eager indices.
"""
import builtins
import math
import operator
import warnings

import numpy as np

from . import _C
from . import _dtype as D
from . import _ops as F
from ._dispatch import current_trace
from ._errors import trace_error
from ._tensor import Tensor


def _index_tuple(index):
    """An index as a tuple of ints, slices, None, Ellipsis and Tensors (lists/arrays -> tensors)."""
    if isinstance(index, tuple):
        items = list(index)
    elif isinstance(index, list) and builtins.any(isinstance(i, (slice, type(None), type(Ellipsis), Tensor, list))
                                                  for i in index):
        items = list(index)  # legacy numpy-style tuple given as a list
    else:
        items = [index]
    out = []
    for i in items:
        if isinstance(i, (bool, np.bool_)):
            raise NotImplementedError("flow: indexing with a Python bool (x[True]) is not supported")
        if isinstance(i, (list, np.ndarray)) or (type(i).__module__.startswith("torch") and hasattr(i, "dtype")):
            from . import _creation

            i = _creation.tensor(i)
            if i.dtype.is_floating_point and i.numel() == 0:
                i = i.long()
        elif not (i is None or i is Ellipsis or isinstance(i, (slice, Tensor))):
            try:
                i = operator.index(i)
            except TypeError:
                raise TypeError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                                "are valid indices (got " + type(i).__name__ + ")") from None
        if isinstance(i, Tensor) and i.dtype is D.uint8:  # torch's legacy rule: a byte index is a mask
            warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
                          "instead.", UserWarning, stacklevel=3)
            i = i.to(D.bool_)
        out.append(i)
    return out


def _expand_ellipsis(index, ndim):
    consumed = builtins.sum((i.ndim if i.dtype is D.bool_ else 1) if isinstance(i, Tensor) else
                            (0 if i is None or i is Ellipsis else 1) for i in index)
    if builtins.sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    out = []
    for i in index:
        if i is Ellipsis:
            out.extend([slice(None)] * (ndim - consumed))
        else:
            out.append(i)
    return out


def _mask_index(x, pos, mask):
    """x[..., mask] with a bool mask over dims pos..pos+mask.ndim: a data-dependent size, eager only."""
    if mask._c is None or x._c is None:
        raise trace_error("Tensor.__getitem__() with a boolean mask",
                          "the result's size depends on the mask's values; use flow.where / masked_fill instead")
    s = list(x.shape)
    k = mask.ndim
    for j in range(k):
        if mask.shape[j] != s[pos + j]:
            raise IndexError(f"The shape of the mask {list(mask.shape)} at index {j} does not match the shape of the "
                             f"indexed tensor {s} at index {pos + j}")
    m = 1
    for n in s[pos:pos + k]:
        m *= n
    idx = np.flatnonzero(_host_array(mask._c)).astype(np.int64)
    merged = x.reshape(s[:pos] + [m] + s[pos + k:])
    idx_c = _C.Tensor.from_numpy(idx)
    if x._c.device != "cpu":
        idx_c = idx_c.to_device(x._c.device)
    return F._index_select_wrapping(merged, pos, Tensor._wrap(idx_c))


def _host_array(c) -> np.ndarray:
    """The values of a _C tensor on any device as a numpy array (a device-to-host copy for CUDA), for
    the eager checks and index conversions that torch also makes on the host."""
    return (c if c.device == "cpu" else c.to_device("cpu")).numpy()


def _host_checks_indices(ix) -> bool:
    """Whether an eager index is range-checked on the host before use: on the CPU only. On CUDA the
    kernels check each index they read (dsl CheckIndex, the scatter kernel) and the next
    synchronization raises, as torch's device-side asserts do; a host check would copy the indices
    back and synchronize on every call."""
    return ix._c is not None and ix._c.device == "cpu" and current_trace() is None


def _check_index_range(ix, size, dim, refusing_negatives=None):
    """Indices in [-size, size), or in [0, size) for `refusing_negatives` ("index_select" or
    "gather": torch's functions refuse negatives, where advanced indexing wraps them), checked on
    the host in one pass, with torch's messages."""
    if not _host_checks_indices(ix):
        return
    a = _host_array(ix._c)
    lo, hi = int(a.min()), int(a.max())
    if refusing_negatives and lo < 0:
        if refusing_negatives == "index_select":
            raise IndexError("index out of range in self")
        raise RuntimeError(f"index {lo} is out of bounds for dimension {dim} with size {size}")
    bad = lo if lo < -size else hi if hi >= size else None
    if bad is not None:  # (gather's kernel check is torch's RuntimeError; indexing's an IndexError)
        raise (RuntimeError if refusing_negatives == "gather" else IndexError)(
            f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _wrap_index(ix, size, dim):
    """An int64 index into a dim of `size` (position `dim` of the indexed tensor) with negatives wrapped.
    Indices the host checked (_host_checks_indices) just wrap; others are read through an index_select
    of the positions, whose kernel checks each one (dsl CheckIndex) and raises torch's "index i is out
    of bounds for dimension dim with size size": a flattened multi-dimensional index would only be
    checked against the product of the sizes (x[0, 5] of a 3 x 4 tensor would read x[1, 1])."""
    if _host_checks_indices(ix):
        return F.where(ix < 0, ix + size, ix)
    from . import _creation

    positions = _creation.arange(size, device=ix.device).reshape([1] * dim + [size])
    return F._index_select_wrapping(positions, dim, ix.reshape(-1)).reshape(list(ix.shape))


def _multi_index(x, adv):
    """x[..., i, ..., j, ...] with several integer index tensors (torch's advanced indexing): the
    indices broadcast to one shape B; the indexed dims are flattened into one (row-major linear index)
    and read by one index_select. B replaces the indexed dims where they stood when they are adjacent,
    else it comes first, as in torch."""
    if builtins.any(ix.dtype is D.bool_ for _, ix in adv):
        raise NotImplementedError("flow: a boolean mask combined with other tensor indices is not supported; "
                                  "index with the mask's nonzero() positions instead")
    for d, ix in adv:
        if ix.dtype not in (D.int64, D.int32):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if ix._c is not None and ix.numel() > 0:
            _check_index_range(ix, x.shape[d], d)
    dims = [d for d, _ in adv]
    sizes = [x.shape[d] for d in dims]
    try:
        bshape = list(np.broadcast_shapes(*[tuple(ix.shape) for _, ix in adv]))
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes " +
                         ", ".join(str(list(ix.shape)) for _, ix in adv)) from None
    others = [d for d in range(x.ndim) if d not in dims]
    moved = x.permute(dims + others)
    rest = [x.shape[d] for d in others]
    flat = moved.reshape([math.prod(sizes)] + rest)
    linear = None
    for (d, ix), size, stride in zip(adv, sizes, [math.prod(sizes[k + 1:]) for k in range(len(sizes))]):
        ix = _wrap_index(ix.to(D.int64), size, d) * stride
        linear = ix if linear is None else linear + ix
    linear = linear.expand(bshape).reshape(-1)
    out = F._index_select_wrapping(flat, 0, linear).reshape(bshape + rest)
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    if not adjacent or dims[0] == 0:
        return out
    nb, p0 = len(bshape), dims[0]
    return out.permute([nb + i for i in range(p0)] + list(range(nb)) + [nb + i for i in range(p0, len(rest))])


def is_concrete_int(i):
    """A concrete 0-d integer tensor: torch's indexing takes it as its int (a select, not a gather)."""
    return i.ndim == 0 and i.dtype in (D.int64, D.int32) and i._c is not None


def _numpy_index(index, ndim):
    """A flow index as a pair of numpy indices over numpy_view(), applied one after the other by
    np_indexed: the basic part (ints, slices, None; a slice holding each tensor's place), then the
    tensors at their places in what that leaves. In one numpy index an int beside an array would
    count as an advanced index (x[0, :, [0, 1]] puts the array's dim first); torch selects ints
    first, as basic indexing does."""
    basic, advanced, any_array = [], [], False  # advanced: one entry per dim of the basic part's view
    for i in _expand_ellipsis(index, ndim):
        if isinstance(i, slice):
            if i.step is not None and operator.index(i.step) <= 0:
                raise ValueError("step must be greater than zero")
            basic.append(i)
            advanced.append(slice(None))
        elif isinstance(i, Tensor):
            i._need_data("Tensor.__setitem__() index")
            if i.dtype is not D.bool_ and i.dtype not in (D.int32, D.int64):
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            if is_concrete_int(i):  # a 0-d integer tensor indexes as its int
                basic.append(int(_host_array(i._c)))
                continue
            if i.dtype is D.bool_ and i.ndim == 0:  # a new dim of size 1, all of it or none
                keep = bool(_host_array(i._c))
                basic.append(None)
                advanced.append(slice(None) if keep else slice(0, 0))
                any_array = any_array or not keep
                continue
            basic.extend([slice(None)] * (i.ndim if i.dtype is D.bool_ else 1))
            advanced.append(_host_array(i._c))  # a mask indexes its i.ndim dims at once
            any_array = True
        elif i is None:
            basic.append(None)
            advanced.append(slice(None))
        else:
            basic.append(i)
    return tuple(basic), (tuple(advanced) if any_array else None)


def _torch_index_error(e):
    """numpy's "index 5 is out of bounds for axis 0 with size 3" in torch's words ("dimension")."""
    return IndexError(str(e).replace(" for axis ", " for dimension "))


def np_indexed(array, npindex):
    """array[npindex] for a _numpy_index pair (a view when the index has no tensors)."""
    basic, advanced = npindex
    try:
        view = array[basic]
        return view if advanced is None else view[advanced]
    except IndexError as e:
        raise _torch_index_error(e) from None


def np_assign(array, npindex, value):
    """array[npindex] = value, through the basic part's view."""
    basic, advanced = npindex
    try:
        if advanced is None:  # (ints alone index an element, which numpy gives as a scalar, not a view)
            array[basic] = value
        else:
            array[basic][advanced] = value
    except IndexError as e:
        raise _torch_index_error(e) from None
