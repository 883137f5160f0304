"""More of torch's shape functions: tile, ravel, diag_embed, diagflat, the scatter-into-a-view
family (select_scatter, slice_scatter, diagonal_scatter), unique_consecutive, the H/mH
properties and the in-place view methods (squeeze_, unsqueeze_, t_, transpose_).

Note: the *_scatter functions are out of place in torch (a copy of the input with a view of it
overwritten). Here each is a `where` between the input and the source brought to the input's shape
(a broadcast, or an index_select by positions computed on the host from the sizes alone), so they
trace and fuse like any pointwise op, where writing through a view of a fresh copy would not trace.
"""
import builtins

import numpy as np

from . import _creation
from . import _ops as F
from ._dispatch import dispatch1
from ._data_dependent import _on
from ._errors import trace_error
from ._indexing import _host_array
from ._math import diagonal_length
from ._ops import _normalize_dim, _tensor_arg
from ._tensor import Tensor, rebind

__all__ = ["tile", "ravel", "diag_embed", "diagflat", "select_scatter", "slice_scatter", "diagonal_scatter",
           "unique_consecutive"]


def tile(input, dims):
    return _tensor_arg("tile", input, "input", 1).tile(dims)


def ravel(input):
    """The flattened input: a view where the strides allow, else a copy (as reshape)."""
    return _tensor_arg("ravel", input, "input", 1).reshape(-1)


def _plane_scatter(fn, x, src, offset, dim1, dim2):
    """x with the diagonal `offset` of its (dim1, dim2) planes replaced by src (the diagonal's shape:
    the other dims, then the diagonal's length)."""
    d1, d2 = _normalize_dim(dim1, x.ndim), _normalize_dim(dim2, x.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = x.shape[d1], x.shape[d2]
    length = diagonal_length(n1, n2, offset)
    rest = [x.shape[k] for k in range(x.ndim) if k not in (d1, d2)]
    if list(src.shape) != rest + [length]:
        raise RuntimeError(f"{fn}: expected src to have a size equal to the diagonal of the input "
                           f"{rest + [length]}, but got {list(src.shape)}")
    i, j = np.meshgrid(np.arange(n1), np.arange(n2), indexing="ij")
    on = (j - i) == offset
    if not on.any():
        return x.clone()
    pos = np.clip(i if offset >= 0 else j, 0, builtins.max(length - 1, 0)).reshape(-1)
    vals = dispatch1("index_select", [src, _on(src, pos.astype(np.int64))], {"dim": src.ndim - 1})
    vals = vals.reshape(rest + [n1, n2]).movedim([-2, -1], [d1, d2])
    shape = [1] * x.ndim
    shape[d1], shape[d2] = n1, n2
    mask = _on(x, (on if d1 < d2 else on.T).reshape(shape))
    return F.where(mask, vals.to(x.dtype), x)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """torch.diagonal_scatter: input with input.diagonal(offset, dim1, dim2) replaced by src."""
    x = _tensor_arg("diagonal_scatter", input, "input", 1)
    s = _tensor_arg("diagonal_scatter", src, "src", 2)
    if x.ndim < 2:
        raise RuntimeError(f"diagonal dimensions requested ({dim1}, {dim2}) with a tensor of {x.ndim} dims")
    return _plane_scatter("diagonal_scatter", x, s, builtins.int(offset), dim1, dim2)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """torch.diag_embed: the last dim of input on the diagonal `offset` of new (dim1, dim2) planes of
    size n + |offset|, zeros elsewhere."""
    x = _tensor_arg("diag_embed", input, "input", 1)
    offset = builtins.int(offset)
    n = (x.shape[-1] if x.ndim else 1) + builtins.abs(offset)
    nd = builtins.max(x.ndim, 1) + 1
    d1, d2 = _normalize_dim(dim1, nd), _normalize_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    batch = list(x.shape[:-1])
    shape, it = [], iter(batch)
    for k in range(nd):
        shape.append(n if k in (d1, d2) else next(it))
    return _plane_scatter("diag_embed", _creation.zeros(shape, dtype=x.dtype, device=x.device), x.reshape(batch + [-1]),
                          offset, d1, d2)


def diagflat(input, offset=0):
    """torch.diagflat: the flattened input on the diagonal `offset` of a square matrix."""
    return diag_embed(_tensor_arg("diagflat", input, "input", 1).reshape(-1), offset, 0, 1)


def select_scatter(input, src, dim, index):
    """torch.select_scatter: input with input.select(dim, index) replaced by src."""
    x = _tensor_arg("select_scatter", input, "input", 1)
    s = _tensor_arg("select_scatter", src, "src", 2)
    d = _normalize_dim(dim, x.ndim)
    size = x.shape[d]
    k = builtins.int(index)
    if k < -size or k >= size:
        raise IndexError(f"select(): index {k} out of range for tensor of size {list(x.shape)} at dimension {d}")
    k %= size
    want = list(x.shape[:d]) + list(x.shape[d + 1:])
    if list(s.shape) != want:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(s.shape)}, "
                           f"slice size = {want}")
    shape = [1] * x.ndim
    shape[d] = size
    mask = _on(x, (np.arange(size) == k).reshape(shape))
    return F.where(mask, s.unsqueeze(d).to(x.dtype), x)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """torch.slice_scatter: input with input[..., start:end:step, ...] (along dim) replaced by src."""
    x = _tensor_arg("slice_scatter", input, "input", 1)
    s = _tensor_arg("slice_scatter", src, "src", 2)
    d = _normalize_dim(dim, x.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    size = x.shape[d]
    picked = np.arange(size)[slice(start, end, step)]
    want = list(x.shape)
    want[d] = len(picked)
    if list(s.shape) != want:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(s.shape)}, "
                           f"slice size = {want}")
    if len(picked) == 0:
        return x.clone()
    on = np.zeros(size, dtype=bool)
    on[picked] = True
    pos = np.clip(np.searchsorted(picked, np.arange(size)), 0, len(picked) - 1).astype(np.int64)
    shape = [1] * x.ndim
    shape[d] = size
    vals = dispatch1("index_select", [s, _on(s, pos)], {"dim": d})
    return F.where(_on(x, on.reshape(shape)), vals.to(x.dtype), x)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """torch.unique_consecutive: runs of equal elements (slices along dim) collapsed to one, with the
    run each element falls in and the runs' lengths on request. Data-dependent sizes: eager only."""
    x = _tensor_arg("unique_consecutive", input, "input", 1)
    if x._c is None:
        raise trace_error("unique_consecutive()", "its output's size depends on the values")
    a = _host_array(x._c)
    if dim is None:
        a, d = a.reshape(-1), 0
    else:
        d = _normalize_dim(dim, x.ndim)
    moved = np.moveaxis(a, d, 0).reshape(a.shape[d] if a.ndim else 1, -1)
    n = moved.shape[0]
    starts = np.ones(n, dtype=bool)
    if n > 1:
        starts[1:] = (moved[1:] != moved[:-1]).any(axis=1)
    first = np.flatnonzero(starts)
    values = np.take(a, first, axis=d)
    out = [_on(x, values, x.dtype)]
    if return_inverse:
        inv = (np.cumsum(starts) - 1).astype(np.int64)
        out.append(_on(x, inv if dim is not None else inv.reshape(x.shape)))
    if return_counts:
        out.append(_on(x, np.diff(np.append(first, n)).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


# ---- Tensor methods and properties ----------------------------------------------------------------


def _H(self):
    if self.ndim not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
    return self.permute([1, 0]) if self.ndim == 2 else self.permute([])


def _mH(self):
    return self.mT  # real dtypes only: the conjugate is the tensor itself


def _in_place_view(name, fn):
    """Tensor.<name>: the view fn(self, ...) becomes this tensor's own shape and strides."""

    def m(self, *args, **kwargs):
        if self._c is None:
            raise trace_error(f"Tensor.{name}()", "an in-place view op changes a traced tensor's shape; use the "
                                                  f"out-of-place {name[:-1]}() instead")
        rebind(self, fn(self, *args, **kwargs)._c)
        return self

    m.__name__ = m.__qualname__ = name
    return m


Tensor.H = property(_H)
Tensor.mH = property(_mH)
Tensor.ravel = lambda self: self.reshape(-1)
Tensor.broadcast_to = lambda self, size: self.expand(size)
Tensor.diag_embed = lambda self, offset=0, dim1=-2, dim2=-1: diag_embed(self, offset, dim1, dim2)
Tensor.squeeze_ = _in_place_view("squeeze_", Tensor.squeeze)
Tensor.unsqueeze_ = _in_place_view("unsqueeze_", Tensor.unsqueeze)
Tensor.t_ = _in_place_view("t_", Tensor.t)
Tensor.transpose_ = _in_place_view("transpose_", Tensor.transpose)
Tensor.unique_consecutive = lambda self, return_inverse=False, return_counts=False, dim=None: unique_consecutive(
    self, return_inverse, return_counts, dim)
Tensor.select_scatter = lambda self, src, dim, index: select_scatter(self, src, dim, index)
Tensor.slice_scatter = lambda self, src, dim=0, start=None, end=None, step=1: slice_scatter(
    self, src, dim, start, end, step)
Tensor.diagonal_scatter = lambda self, src, offset=0, dim1=0, dim2=1: diagonal_scatter(self, src, offset, dim1, dim2)
