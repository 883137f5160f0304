"""Tensor.view(dtype): the same bytes read as another dtype (torch's ``view.dtype``).

Note: eagerly this is an alias, as torch's: a flow._C view of the same storage whose sizes, strides
and offset are rescaled to the new element size, so a write through either is seen by the other.
torch's checks come first, in its order and with its messages (the last dim must be dense, and
divisible by the size ratio when elements grow; offsets and strides too).

A traced graph has no aliases, so there it is a value: between types of one size the graph op
``bitcast`` (the IR's Reinterpret); between sizes the bytes are split with shifts and masks, or
joined with masks, shifts and ors, little-endian as every device flow runs on. These are
elementwise and injective ops, so they fuse with their neighbours; both sides count as views, so an
in-place write to either is refused in a trace (TraceError), as for other views. A traced tensor
has no strides, so the stride and offset checks (which a traced value always passes, being laid
out densely) are not made there.
"""
from . import _dtype as D
from ._dispatch import current_trace, dispatch1

# The integer type of each element size: the bits travel in it.
_BITS = {1: D.uint8, 2: D.int16, 4: D.int32, 8: D.int64}


def bits_of(x):
    """The bits of each element of x as the integer type of its size (the graph op bitcast)."""
    return _bitcast(x, _BITS[x.dtype.itemsize])


def _what(src, dst):
    return f"to view {src._torch_short} as {dst._torch_short} (different element sizes)"


def _check_and_rescale(x, dst):
    """torch's checks of a view between element sizes; the new sizes, strides and offset."""
    src = x.dtype
    shape = list(x.shape)
    strides = list(x.stride()) if x._c is not None else None
    offset = x._c.offset if x._c is not None else 0
    if len(shape) == 0:
        raise RuntimeError(f"self.dim() cannot be 0 {_what(src, dst)}")

    def dense_last_dim():
        if strides is not None and strides[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {_what(src, dst)}, but got {strides[-1]}")

    if src.itemsize > dst.itemsize:  # each element becomes `ratio` smaller ones
        dense_last_dim()
        ratio = src.itemsize // dst.itemsize
        shape[-1] *= ratio
        if strides is not None:
            strides = [s * ratio for s in strides[:-1]] + [1]
        return shape, strides, offset * ratio
    ratio = dst.itemsize // src.itemsize  # `ratio` elements become one
    if shape[-1] % ratio:
        raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {_what(src, dst)}, but got {shape[-1]}")
    if offset % ratio:
        raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {_what(src, dst)}, but got {offset}")
    dense_last_dim()  # torch's order: size, offset, then the last stride
    if strides is not None:
        for i, s in enumerate(strides[:-1]):
            if s % ratio:
                raise RuntimeError(f"self.stride({i}) must be divisible by {ratio} {_what(src, dst)}, but got {s}")
        strides = [s // ratio for s in strides[:-1]] + [1]
    shape[-1] //= ratio
    return shape, strides, offset // ratio


def _bitcast(x, dst):
    return x if x.dtype is dst else dispatch1("bitcast", [x], {"dtype": dst.name})


def _split(x, dst, shape):
    """Each element of x as `ratio` elements of dst, least significant bytes first."""
    ratio = x.dtype.itemsize // dst.itemsize
    bits = bits_of(x)
    width = 8 * dst.itemsize
    mask = (1 << width) - 1
    pieces = [(bits >> (width * k)) & mask if k else bits & mask for k in range(ratio)]
    from ._ops import stack
    small = stack([p.to(_BITS[dst.itemsize]) for p in pieces], -1).reshape(shape)
    return _bitcast(small, dst)


def _join(x, dst, shape):
    """Each run of `ratio` elements of x along the last dim as one element of dst."""
    ratio = dst.itemsize // x.dtype.itemsize
    wide = _BITS[dst.itemsize]
    bits = bits_of(x).reshape(list(x.shape[:-1]) + [shape[-1], ratio])
    width = 8 * x.dtype.itemsize
    mask = (1 << width) - 1
    out = None
    for k in range(ratio):
        piece = bits.select(-1, k).to(wide) & mask
        piece = piece << (width * k) if k else piece
        out = piece if out is None else out | piece
    return _bitcast(out, dst)


# Python's types name torch's default dtypes of their kind here (torch.ones(2).view(float) is float64).
_PY_TYPES = {float: D.float64, int: D.int64, bool: D.bool_}


def view_dtype(x, dtype):
    from ._tensor import Tensor

    dst = _PY_TYPES[dtype] if dtype in _PY_TYPES else D.to_dtype(dtype)
    src = x.dtype
    ctx = current_trace()
    if ctx is None and x._c is not None:
        c = x._c
        shape, strides, offset = (list(c.shape), list(c.strides), c.offset) if src.itemsize == dst.itemsize \
            else _check_and_rescale(x, dst)
        return Tensor._wrap(c.as_strided(shape, strides, offset, dst.name))  # a plain Tensor, as torch's
    if src is dst:
        return x
    if src.itemsize == dst.itemsize:
        out = _bitcast(x, dst)
    else:
        shape = _check_and_rescale(x, dst)[0]
        out = _split(x, dst, shape) if src.itemsize > dst.itemsize else _join(x, dst, shape)
    if ctx is not None:  # torch's view would see later in-place writes to either side: refuse those
        ctx.aliased.update([ctx.value_id(x), ctx.value_id(out)])
    return out
