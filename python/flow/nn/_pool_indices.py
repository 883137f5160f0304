"""Max pooling that returns where each maximum came from, and its inverse, max_unpool.

Note: one routine serves max_pool2d and adaptive_max_pool2d with return_indices=True. A pooling's
windows are described by two position tables: rows [OH, kh] and cols [OW, kw] hold the input row
(column) of each window's i-th (j-th) position, -1 where the window has none (padding, or an
adaptive window shorter than the longest). Two index_selects with those tables gather every window
position into [..., OH, kh, OW, kw]; elementwise passes then scan the positions as torch's kernels
(cpu_max_pool, the CUDA max_pool_forward_nchw) do, row-major over the window: a value replaces the
maximum so far when greater, or when NaN, starting from -inf at the window's first non-negative
position. So ties give the first maximum, a NaN the last NaN, and a window of -inf (or one wholly in
the padding, which ceil_mode and dilation allow) -inf at its first position, exactly. The scan is
separable (max_with_indices), kh + kw steps: a global adaptive pool of a 56 x 56 map is 112 steps,
not 3136. Without indices, max_pool2d keeps its faster paths (functional.py).
"""
import builtins
import math

import numpy as np

from .. import _creation, _ops, _scatter
from .. import _dtype as D

__all__ = ["max_with_indices", "max3d_with_indices", "pool_rows", "adaptive_rows", "max_unpool1d", "max_unpool2d",
           "max_unpool3d"]


def pool_rows(out, k, s, p, d, size):
    """The [out, k] position table of a pooling along one axis of `size` (-1 outside the input),
    and each window's first non-negative position (torch's start after stepping over the left
    padding; at or past `size` for a window that lies wholly in the right padding)."""
    pos = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
    table = np.where((pos >= 0) & (pos < size), pos, -1).astype(np.int64)
    first = np.where(pos >= 0, pos, np.iinfo(np.int64).max).min(axis=1)
    return table, first.astype(np.int64)


def adaptive_rows(out, size):
    """The position table of an adaptive pooling (window o spans [floor(o * size / out),
    ceil((o + 1) * size / out)), as torch's start_index / end_index) and each window's start."""
    starts = [(o * size) // out for o in range(out)]
    ends = [-((-(o + 1) * size) // out) for o in range(out)]
    k = builtins.max([e - b for b, e in zip(starts, ends)] + [1])
    table = np.full((out, k), -1, dtype=np.int64)
    for o, (b, e) in enumerate(zip(starts, ends)):
        table[o, : e - b] = np.arange(b, e)
    return table, np.asarray(starts, dtype=np.int64)


def _lowest(dtype):
    return -math.inf if dtype.is_floating_point else builtins.int(np.iinfo(dtype.name).min)


def max_with_indices(x, row_windows, col_windows):
    """(maximum, int64 index row * W + col into each [H, W] plane) of x [..., H, W] over the
    windows of `row_windows` and `col_windows`: each a position table ([OH, kh], [OW, kw]) and the
    windows' first positions, as pool_rows and adaptive_rows give them.

    Separable, kh + kw steps instead of kh * kw: a pass over each window row's columns keeps the
    row's maximum and its column, then a pass over the rows picks among those. It is torch's
    row-major scan exactly: with no NaN both give the first position of the first row reaching the
    maximum; with a NaN both give the last NaN of the last row holding one (every NaN is taken, and
    nothing after it is greater); a window of -inf (or no position at all) keeps its first position
    and -inf."""
    from . import functional as F

    (rows, r0), (cols, c0) = row_windows, col_windows
    H, W = x.shape[-2], x.shape[-1]
    OH, kh = rows.shape
    OW, kw = cols.shape
    lead = list(x.shape[:-2])
    ri = F._const(np.clip(rows.reshape(-1), 0, builtins.max(H - 1, 0)), x, D.int64)
    ci = F._const(np.clip(cols.reshape(-1), 0, builtins.max(W - 1, 0)), x, D.int64)
    win = F._reshape(_ops.index_select(_ops.index_select(x, -2, ri), -1, ci), lead + [OH, kh, OW, kw])
    lowest = _lowest(x.dtype)

    def scan(values, positions, valid, best, where_at):
        """One pass: for each step t, take values(t) where greater than `best` or NaN (and valid)."""
        for t in range(len(positions)):
            if not valid[t].any():
                continue
            v = values(t)
            take = (v > best) | v.isnan() if x.dtype.is_floating_point else v > best
            if not valid[t].all():
                take = take & F._const(valid[t], x, D.bool_)
            best = _ops.where(take, v, best)
            where_at = [_ops.where(take, p, w) for p, w in zip(positions[t], where_at)]
        return best, where_at

    # Columns: [..., OH, kh, OW] maxima of each window row, and their columns.
    col_valid = [(cols[:, j] >= 0)[None, None, :] for j in range(kw)]
    col_pos = [[F._const(cols[:, j], x, D.int64)] for j in range(kw)]
    best = _creation.full(lead + [OH, kh, OW], lowest, dtype=x.dtype, device=x.device)
    row_max, (col_at,) = scan(lambda j: F._select(win, -1, j), col_pos, col_valid, best,
                              [F._const(np.broadcast_to(c0, (OH, kh, OW)).copy(), x, D.int64)])
    # Rows: pick among the window rows, carrying each row's column.
    row_valid = [(rows[:, i] >= 0)[:, None] for i in range(kh)]
    row_pos = [[F._const(rows[:, i][:, None], x, D.int64), F._select(col_at, -2, i)] for i in range(kh)]
    best = _creation.full(lead + [OH, OW], lowest, dtype=x.dtype, device=x.device)
    start = [F._const(np.broadcast_to(r0[:, None], (OH, OW)).copy(), x, D.int64),
             F._const(np.broadcast_to(c0[None, :], (OH, OW)).copy(), x, D.int64)]
    out, (row_at, col_at) = scan(lambda i: F._select(row_max, -2, i), row_pos, row_valid, best, start)
    # Windows wholly in the padding take no step: their [OH, OW] start positions need the batch dims.
    return out, F._expand(row_at * W + col_at, lead + [OH, OW]).contiguous()


def max3d_with_indices(x, depth_windows, row_windows, col_windows):
    """(maximum, int64 index (d * H + h) * W + w into each [D, H, W] volume) of x [..., D, H, W] over
    the windows of three position tables, as max_with_indices does two: that scan over height and
    width, then the same scan over depth on its [..., D, OH * OW] result (each column its own
    one-element window), carrying each depth's height/width index. torch's scan is depth-major, so
    the two-level scan picks what it picks, ties and NaNs included."""
    from . import functional as F

    (depths, d0), (rows, r0), (cols, c0) = depth_windows, row_windows, col_windows
    D_, H, W = x.shape[-3:]
    OD, OH, OW = len(depths), len(rows), len(cols)
    M = OH * OW
    lead = list(x.shape[:-3])
    plane_max, plane_at = max_with_indices(x, row_windows, col_windows)  # [..., D, OH, OW]
    identity = (np.arange(M, dtype=np.int64)[:, None], np.arange(M, dtype=np.int64))
    out, at = max_with_indices(F._reshape(plane_max, lead + [D_, M]), depth_windows, identity)  # at = depth * M + m
    depth = _ops.div(at, M, rounding_mode="floor")
    hw = _ops.gather(F._reshape(plane_at, lead + [D_, M]), -2, _ops.clamp(depth, 0, builtins.max(D_ - 1, 0)))
    empty = (depths < 0).all(axis=1)
    if empty.any():  # a depth window wholly in the padding starts at its windows' first row and column
        start = (r0[:, None] * W + c0[None, :]).reshape(1, M)
        hw = _ops.where(F._const(empty[:, None], x, D.bool_), F._const(start, x, D.int64), hw)
    index = depth * (H * W) + hw
    return F._reshape(out, lead + [OD, OH, OW]), F._reshape(index, lead + [OD, OH, OW]).contiguous()


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d(return_indices=True): zeros of the unpooled size, with each input
    value written at its index into its [H, W] plane."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d(return_indices=True), each index into its [D, H, W] volume."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)


def _max_unpool(fn, nsp, input, indices, kernel_size, stride, padding, output_size):
    from . import functional as F

    x = F._check_tensor(fn, input)
    ix = F._check_tensor(fn, indices, "indices")
    if x.ndim not in (nsp + 1, nsp + 2):
        raise RuntimeError(f"{fn}(): Expected {nsp + 1}D or {nsp + 2}D tensor, but got {x.ndim}D")
    if ix.dtype is not D.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {ix.dtype._torch_short}")
    if list(ix.shape) != list(x.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(x.shape)}) but "
                           f"got indices tensor with shape: {list(ix.shape)}")
    k = F._pair(kernel_size, nsp, "kernel_size")
    s = k if stride is None else F._pair(stride, nsp, "stride")
    p = F._pair(padding, nsp, "padding")
    sizes = list(x.shape[-nsp:])
    default = [(sizes[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(nsp)]
    if output_size is None:
        out = default
    else:
        size = [builtins.int(v) for v in output_size]
        if len(size) not in (nsp, nsp + 2):
            raise ValueError(f"output_size should be a sequence containing {nsp} or {nsp + 2} elements, but it has a "
                             f"length of '{len(size)}'")
        size = size[-nsp:]
        for i, got in enumerate(size):
            if got < 0:
                raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                                 f"output_size[{i}]={got}")
        for got, d_, st in zip(size, default, s):
            if not d_ - st < got < d_ + st:
                raise ValueError(f"invalid output_size {size} (dim must be between {d_ - st + 1} and {d_ + st - 1})")
        out = size
    lead = list(x.shape[:-nsp])
    n_in = math.prod(sizes)
    flat = F._reshape(x, lead + [n_in])
    y = _creation.zeros(lead + [math.prod(out)], dtype=x.dtype, device=x.device)
    y = _scatter.scatter(y, -1, F._reshape(ix, lead + [n_in]), flat)
    return F._reshape(y, lead + out)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    from . import functional as F

    k = F._pair(kernel_size, 1, "kernel_size")[0]
    s = k if stride is None else F._pair(stride, 1, "stride")[0]
    p = F._pair(padding, 1, "padding")[0]
    size = None if output_size is None else [1, [builtins.int(v) for v in output_size][-1]]
    y = max_unpool2d(F._unsqueeze(input, -2), F._unsqueeze(indices, -2), [1, k], [1, s], [0, p], size)
    return F._reshape(y, list(y.shape[:-2]) + [y.shape[-1]])
