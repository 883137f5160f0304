"""Ops whose output size depends on the input's values: nonzero/argwhere, masked_select, unique.

Like boolean-mask indexing (flow._indexing._mask_index), they run eagerly only: the values are read
on the host (a device-to-host copy for a GPU tensor, as torch synchronizes for them too), the
result is computed there with numpy and placed on the input's device. Under flow.jit they raise
flow.TraceError naming the op, since a compiled graph has static shapes.

searchsorted/bucketize have static shapes, so they are compositions of flow ops instead (one
comparison per boundary, summed), and trace and run on every device.
"""
import builtins

import numpy as np

from . import _dtype as D
from . import _ops as F
from ._errors import trace_error
from ._math import broadcast_shapes
from ._ops import _normalize_dim, _tensor_arg
from ._tensor import Tensor


def _values(fn, x):
    """x's values as a numpy array (bfloat16 widened to float32, exactly)."""
    if x._c is None:
        raise trace_error(f"flow.{fn}()", "the result's size depends on the input's values; flow.jit compiles static "
                                          "shapes (call it outside the compiled function)")
    return x._numpy_f32_or_native()


def _on(x, array, dtype=None):
    from . import _creation

    t = _creation.tensor(np.array(array, order="C"), dtype=dtype)  # (ascontiguousarray makes 0-d 1-d)
    return t if x.device.type == "cpu" else t.to(x.device)


def nonzero(input, *, out=None, as_tuple=False):
    """The indices of the nonzero elements, one row per element in row-major order ([n, ndim] int64),
    or with as_tuple one index tensor per dim."""
    x = _tensor_arg("nonzero", input, "input", 1)
    idx = np.argwhere(_values("nonzero", x) != 0).astype(np.int64)  # [n, ndim] (a 0-dim input: [n, 0])
    if as_tuple:
        if x.ndim == 0:  # torch: one index tensor of zeros, one per nonzero
            return (_on(x, np.zeros(idx.shape[0], dtype=np.int64)),)
        return tuple(_on(x, idx[:, k]) for k in range(x.ndim))
    return F._out("nonzero", out, _on(x, idx.reshape(idx.shape[0], x.ndim)))


def argwhere(input):
    return nonzero(input)


def masked_select(input, mask, *, out=None):
    """input's elements where mask (broadcast together) is True, as a 1-d tensor."""
    x = _tensor_arg("masked_select", input, "input", 1)
    m = _tensor_arg("masked_select", mask, "mask", 2)
    if m.dtype is not D.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {m.dtype._torch_short}")
    shape = list(broadcast_shapes(x.shape, m.shape))
    xb, mb = x.expand(shape).reshape(-1), m.expand(shape).reshape(-1)
    return F._out("masked_select", out, xb[mb])


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values in ascending order (torch's order for sorted=False too), and optionally the
    index of each input element's value in them and each value's count. NaNs are distinct from each
    other, as in torch."""
    x = _tensor_arg("unique", input, "input", 1)
    arr = _values("unique", x)
    if dim is None:
        vals, inverse, counts = np.unique(arr.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
        inverse = inverse.reshape(x.shape)
    else:
        d = _normalize_dim(dim, x.ndim)
        vals, inverse, counts = np.unique(arr, return_inverse=True, return_counts=True, axis=d, equal_nan=False)
        inverse = inverse.reshape(-1)
    out = _on(x, vals.astype(arr.dtype), dtype=x.dtype)
    extra = []
    if return_inverse:
        extra.append(_on(x, inverse.astype(np.int64)))
    if return_counts:
        extra.append(_on(x, counts.astype(np.int64)))
    return (out, *extra) if extra else out


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None, out=None):
    """For each value, the index where it would be inserted in the sorted innermost rows of
    sorted_sequence: the count of boundaries below it (left), or not above it (right). NaN sorts
    after every number, as in torch. Computed as one comparison per boundary, summed: O(values *
    boundaries), meant for the short boundary lists models use."""
    seq = _tensor_arg("searchsorted", sorted_sequence, "sorted_sequence", 1)
    if sorter is not None:
        raise NotImplementedError("flow: searchsorted(sorter=...) is not supported")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    if scalar:
        from . import _creation

        input = _creation.tensor(input, dtype=seq.dtype).to(seq.device)
    v = input
    if seq.ndim > 1 and list(seq.shape[:-1]) != list(v.shape[:-1]):
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           f"dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {list(v.shape)}")
    b = seq.unsqueeze(-2) if seq.ndim > 1 else seq  # [..., 1, m] against values [..., n, 1]
    vv = v.unsqueeze(-1)
    below = (b <= vv) if right else (b < vv)
    if v.dtype.is_floating_point or seq.dtype.is_floating_point:
        below = below | (F.isnan(vv) & ~F.isnan(b))  # NaN values go after every number
    idx = F.sum(below, -1)
    idx = idx.int() if out_int32 else idx
    return F._out("searchsorted", out, idx)


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each value among 1-d sorted boundaries (torch.bucketize: right=False puts a value
    equal to a boundary in that boundary's bucket)."""
    b = _tensor_arg("bucketize", boundaries, "boundaries", 2)
    if b.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    return searchsorted(b, input, out_int32=out_int32, right=right, out=out)


__all__ = ["nonzero", "argwhere", "masked_select", "unique", "searchsorted", "bucketize"]

for _name in ("nonzero", "argwhere", "masked_select", "unique"):
    setattr(Tensor, _name, globals()[_name])
del _name
