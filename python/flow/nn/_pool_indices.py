"""Max pooling that returns where each maximum came from, and its inverse, max_unpool.

Note: one routine serves max_pool2d and adaptive_max_pool2d with return_indices=True. A pooling's
windows are described by two position tables: rows [OH, kh] and cols [OW, kw] hold the input row
(column) of each window's i-th (j-th) position, -1 where the window has none (padding, or an
adaptive window shorter than the longest). Two index_selects with those tables gather every window
position into [..., OH, kh, OW, kw]; one elementwise pass then scans the positions in torch's order
(row-major over the window): a value replaces the maximum so far when greater, or when NaN, and the
index starts at the window's first position. So ties give the first maximum, a NaN the last NaN,
and an all -inf window its first position: torch's kernels (cpu_max_pool, the CUDA
max_pool_forward_nchw) exactly. Without indices, max_pool2d keeps its faster paths
(functional.py): this scan does two selects per position.
"""
import builtins

import numpy as np

from .. import _creation, _ops, _scatter
from .. import _dtype as D

__all__ = ["max_with_indices", "pool_rows", "adaptive_rows", "max_unpool1d", "max_unpool2d"]


def pool_rows(out, k, s, p, d, size):
    """The [out, k] position table of a pooling along one axis of `size` (-1 outside the input)."""
    pos = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
    return np.where((pos >= 0) & (pos < size), pos, -1).astype(np.int64)


def adaptive_rows(out, size):
    """The position table of an adaptive pooling: window o spans [floor(o * size / out),
    ceil((o + 1) * size / out)), as torch's start_index / end_index."""
    starts = [(o * size) // out for o in range(out)]
    ends = [-((-(o + 1) * size) // out) for o in range(out)]
    k = builtins.max([e - b for b, e in zip(starts, ends)] + [1])
    table = np.full((out, k), -1, dtype=np.int64)
    for o, (b, e) in enumerate(zip(starts, ends)):
        table[o, : e - b] = np.arange(b, e)
    return table


def _first_valid(table):
    """Each window's first position (0 for a window with none, which then has no output anyway)."""
    valid = table >= 0
    first = np.argmax(valid, axis=1)
    return np.where(valid.any(axis=1), table[np.arange(table.shape[0]), first], 0)


def max_with_indices(x, rows, cols):
    """(maximum, int64 index row * W + col into each [H, W] plane) of x [..., H, W] over the
    windows of the position tables `rows` [OH, kh] and `cols` [OW, kw]."""
    from . import functional as F

    H, W = x.shape[-2], x.shape[-1]
    OH, kh = rows.shape
    OW, kw = cols.shape

    def gathered(r, c):
        """x at rows r and columns c (clamped into range): [..., len(r), len(c)]."""
        ri = F._const(np.clip(r, 0, builtins.max(H - 1, 0)), x, D.int64)
        ci = F._const(np.clip(c, 0, builtins.max(W - 1, 0)), x, D.int64)
        return _ops.index_select(_ops.index_select(x, -2, ri), -1, ci)

    r0, c0 = _first_valid(rows), _first_valid(cols)
    out = gathered(r0, c0)
    idx = F._const(r0[:, None] * W + c0[None, :], x, D.int64)
    lead = list(x.shape[:-2])
    win = F._reshape(gathered(rows.reshape(-1), cols.reshape(-1)), lead + [OH, kh, OW, kw])
    for i in range(kh):
        for j in range(kw):
            valid = (rows[:, i] >= 0)[:, None] & (cols[:, j] >= 0)[None, :]
            if not valid.any():
                continue
            v = F._select(F._select(win, -1, j), -2, i)  # [..., OH, OW]
            take = (v > out) | v.isnan()
            if not valid.all():
                take = take & F._const(valid, x, D.bool_)
            out = _ops.where(take, v, out)
            idx = _ops.where(take, F._const(rows[:, i][:, None] * W + cols[:, j][None, :], x, D.int64), idx)
    return out, idx


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d(return_indices=True): zeros of the unpooled size, with each input
    value written at its index into its [H, W] plane."""
    from . import functional as F

    x = F._check_tensor("max_unpool2d", input)
    ix = F._check_tensor("max_unpool2d", indices, "indices")
    if x.ndim not in (3, 4):
        raise RuntimeError(f"max_unpool2d(): Expected 3D or 4D tensor, but got {x.ndim}D")
    if ix.dtype is not D.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {ix.dtype._torch_short}")
    if list(ix.shape) != list(x.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(x.shape)}) but "
                           f"got indices tensor with shape: {list(ix.shape)}")
    k = F._pair(kernel_size, 2, "kernel_size")
    s = k if stride is None else F._pair(stride, 2, "stride")
    p = F._pair(padding, 2, "padding")
    H, W = x.shape[-2], x.shape[-1]
    default = [(H - 1) * s[0] - 2 * p[0] + k[0], (W - 1) * s[1] - 2 * p[1] + k[1]]
    if output_size is None:
        oh, ow = default
    else:
        size = [builtins.int(v) for v in output_size][-2:]
        if len(size) != 2:
            raise ValueError(f"output_size should be a sequence containing 2 or 4 elements, but it has a length of "
                             f"'{len(list(output_size))}'")
        for got, d_, st in zip(size, default, s):
            if not d_ - st < got < d_ + st:
                raise ValueError(f"invalid output_size {size} (dim must be between {d_ - st + 1} and {d_ + st - 1})")
        oh, ow = size
    lead = list(x.shape[:-2])
    flat = F._reshape(x, lead + [H * W])
    out = _creation.zeros(lead + [oh * ow], dtype=x.dtype, device=x.device)
    out = _scatter.scatter(out, -1, F._reshape(ix, lead + [H * W]), flat)
    return F._reshape(out, lead + [oh, ow])


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    from . import functional as F

    k = F._pair(kernel_size, 1, "kernel_size")[0]
    s = k if stride is None else F._pair(stride, 1, "stride")[0]
    p = F._pair(padding, 1, "padding")[0]
    size = None if output_size is None else [1, [builtins.int(v) for v in output_size][-1]]
    y = max_unpool2d(F._unsqueeze(input, -2), F._unsqueeze(indices, -2), [1, k], [1, s], [0, p], size)
    return F._reshape(y, list(y.shape[:-2]) + [y.shape[-1]])
