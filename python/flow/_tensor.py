"""flow.Tensor: a torch-like tensor over a ``_C.Tensor`` (concrete) or a graph value (a tracer).

A concrete tensor wraps a strided ``_C.Tensor``; views (permute, transpose, expand, basic slicing,
reshape of contiguous data) share its storage, as in torch. A tracer exists only while
@flow.jit traces a function: it knows its shape and dtype (inferred by the core's op table) and
records every op applied to it. Operations that need a tracer's *values* (``item()``,
``bool()``, ``numpy()``, ``tolist()``) raise ``flow.TraceError`` naming the op and the user's line.
Arithmetic goes through the functions of ``flow._ops`` and hence through the one dispatcher.
"""
import operator

import numpy as np

from . import _C
from . import _dtype as D
from ._dispatch import TraceContext  # noqa: F401  (re-exported for tools)
from ._errors import TraceError, trace_error


def _contiguous_strides(shape):
    strides = [1] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= max(shape[i], 1)
    return strides


def _normalize_dim(dim, ndim, what="dim"):
    try:
        dim = operator.index(dim)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(dim).__name__}") from None
    lo, hi = (-ndim, ndim - 1) if ndim > 0 else (-1, 0)
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim + ndim if dim < 0 and ndim > 0 else (0 if dim < 0 else dim)


def _sizes_arg(sizes):
    """Accepts f(2, 3) and f((2, 3)) / f([2, 3]) / f(flow.Size)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    return [operator.index(s) for s in sizes]


class Tensor:
    """A torch-like tensor. Create one with flow.tensor / flow.zeros / flow.from_numpy / ..."""

    __array_priority__ = 1000  # numpy defers binary operators to us

    def __new__(cls, *args, **kwargs):
        # The legacy constructor, as torch.Tensor(...): data -> float32 tensor; ints -> empty shape.
        from . import _creation

        if len(args) == 1 and not isinstance(args[0], int):
            t = _creation.tensor(args[0], dtype=D.float32)
        else:
            t = _creation.empty(*args, dtype=D.float32) if args else _creation.empty(0, dtype=D.float32)
        return cls._wrap(t._c)

    # ---- construction (internal) -------------------------------------------------------------

    @classmethod
    def _wrap(cls, c):
        t = object.__new__(cls)
        t._c = c
        t._ctx = None
        t._vid = -1
        return t

    @classmethod
    def _tracer(cls, ctx, vid):
        t = object.__new__(cls)
        t._c = None
        t._ctx = ctx
        t._vid = vid
        return t

    @property
    def _is_tracer(self):
        return self._c is None

    def _need_data(self, op):
        if self._c is None:
            raise trace_error(op, "it needs the value of a traced tensor (data-dependent Python control flow "
                                  "or a conversion to Python/numpy); keep such code outside the @flow.jit "
                                  "function or pass the value in as an argument")

    def _no_trace_view(self, op):
        if self._c is None:
            raise trace_error(op, "views and indexing are not supported inside a traced function yet")

    # ---- metadata ----------------------------------------------------------------------------

    @property
    def shape(self):
        if self._c is None:
            return D.Size(self._ctx.graph.value_shape(self._vid))
        return D.Size(self._c.shape)

    def size(self, dim=None):
        s = self.shape
        return s if dim is None else s[_normalize_dim(dim, len(s))]

    @property
    def dtype(self):
        name = self._c.dtype if self._c is not None else self._ctx.graph.value_dtype(self._vid)
        return D.from_name(name)

    @property
    def device(self):
        if self._c is None:
            return self._ctx.device if getattr(self._ctx, "device", None) is not None else D.CPU
        return D.CUDA if self._c.device == "cuda" else D.CPU

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def requires_grad(self):
        return False

    @property
    def grad(self):
        return None

    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    ndimension = dim

    def numel(self):
        return self.shape.numel()

    nelement = numel

    def element_size(self):
        return self.dtype.itemsize

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def stride(self, dim=None):
        # A tracer has no layout yet (the compiler picks it): report contiguous strides.
        s = tuple(self._c.strides) if self._c is not None else tuple(_contiguous_strides(self.shape))
        return s if dim is None else s[_normalize_dim(dim, len(s))]

    def storage_offset(self):
        return self._c.offset if self._c is not None else 0

    def is_contiguous(self, memory_format=None):
        return True if self._c is None else self._c.is_contiguous()

    def data_ptr(self):
        self._need_data("Tensor.data_ptr()")
        return self._c.data_ptr()

    def contiguous(self, memory_format=None):
        if self._c is None or self._c.is_contiguous():
            return self
        return Tensor._wrap(self._c.contiguous())

    def clone(self, memory_format=None):
        if self._c is None:
            return self
        return Tensor._wrap(self._c.contiguous())

    def detach(self):
        return self

    def cpu(self):
        self._need_data("Tensor.cpu()")
        return self if self._c.device == "cpu" else Tensor._wrap(self._c.to_device("cpu"))

    def cuda(self, device=None, non_blocking=False):
        self._need_data("Tensor.cuda()")
        return self if self._c.device == "cuda" else Tensor._wrap(self._c.to_device("cuda"))

    def requires_grad_(self, requires_grad=True):
        return self

    @property
    def data(self):
        return Tensor._wrap(self._c) if self._c is not None else self

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor) or value._c is None:
            raise TypeError("Tensor.data must be set to a concrete flow.Tensor")
        self._c = value._c

    # ---- conversion to Python / numpy (data-dependent: refused while tracing) ----------------

    def _numpy_f32_or_native(self):
        """A numpy copy; bfloat16 widened to float32 (exactly)."""
        if self.dtype is D.bfloat16:
            return D.bf16_bits_to_f32(self._c.numpy_raw())
        return self._c.numpy()

    def numpy(self, force=False):
        self._need_data("Tensor.numpy()")
        return self._c.numpy()

    def __array__(self, dtype=None, copy=None):
        self._need_data("Tensor.__array__() (a numpy conversion)")
        a = self._c.numpy()
        return a.astype(dtype) if dtype is not None else a

    def tolist(self):
        self._need_data("Tensor.tolist()")
        return self._numpy_f32_or_native().tolist()

    def item(self):
        self._need_data("Tensor.item()")
        n = self.numel()
        if n != 1:
            raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar")
        return self._numpy_f32_or_native().reshape(()).item()

    def __bool__(self):
        self._need_data("Tensor.__bool__() (bool() or an if/while on a tensor)")
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self):
        self._need_data("Tensor.__float__()")
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self.item())

    def __int__(self):
        self._need_data("Tensor.__int__()")
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __index__(self):
        self._need_data("Tensor.__index__()")
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = object.__hash__

    # ---- printing ----------------------------------------------------------------------------

    def __repr__(self):
        if self._c is None:
            return f"tensor(<traced {self.dtype.name}{list(self.shape)}>)"
        from ._format import format_tensor

        return format_tensor(self)

    __str__ = __repr__

    def __format__(self, spec):
        if self._c is not None and self.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    # ---- views -------------------------------------------------------------------------------

    def _view(self, sizes, strides, offset):
        return Tensor._wrap(self._c.as_strided(list(sizes), list(strides), offset))

    def as_strided(self, size, stride, storage_offset=None):
        self._no_trace_view("Tensor.as_strided()")
        return self._view(size, stride, self._c.offset if storage_offset is None else storage_offset)

    def permute(self, *dims):
        self._no_trace_view("Tensor.permute()")
        dims = _sizes_arg(dims)
        n = self.ndim
        if len(dims) != n:
            raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                               f"length of the desired ordering of dimensions i.e. input.dim() = {n} is not equal "
                               f"to len(dims) = {len(dims)}")
        dims = [_normalize_dim(d, n) for d in dims]
        if len(set(dims)) != n:
            raise RuntimeError("permute(): duplicate dims are not allowed.")
        c = self._c
        return self._view([c.shape[d] for d in dims], [c.strides[d] for d in dims], c.offset)

    def transpose(self, dim0, dim1):
        self._no_trace_view("Tensor.transpose()")
        n = self.ndim
        perm = list(range(n))
        if n == 0:
            return self
        a, b = _normalize_dim(dim0, n), _normalize_dim(dim1, n)
        perm[a], perm[b] = perm[b], perm[a]
        return self.permute(perm)

    swapaxes = transpose

    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self.transpose(0, 1) if self.ndim == 2 else self

    @property
    def T(self):
        return self.permute(list(range(self.ndim))[::-1])

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def expand(self, *sizes):
        self._no_trace_view("Tensor.expand()")
        sizes = _sizes_arg(sizes)
        c = self._c
        old_s, old_st = list(c.shape), list(c.strides)
        if len(sizes) < len(old_s):
            raise RuntimeError(f"expand({self.dtype._torch_short}Type{{{list(old_s)}}}, size={sizes}): the number "
                               f"of sizes provided ({len(sizes)}) must be greater or equal to the number of "
                               f"dimensions in the tensor ({len(old_s)})")
        lead = len(sizes) - len(old_s)
        for i in range(len(sizes) - 1, lead - 1, -1):  # torch checks from the last dim
            s, o = sizes[i], old_s[i - lead]
            if s != -1 and s != o and o != 1:
                raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size ({o}) at "
                                   f"non-singleton dimension {i}.  Target sizes: {sizes}.  Tensor sizes: {old_s}")
        new_s, new_st = [], []
        for i, s in enumerate(sizes):
            if i < lead:
                if s < 0:
                    raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                                       f"non-existing dimension {i}")
                new_s.append(s)
                new_st.append(0)
                continue
            o, st = old_s[i - lead], old_st[i - lead]
            if s == -1 or s == o:
                new_s.append(o)
                new_st.append(st)
            elif o == 1:
                new_s.append(s)
                new_st.append(0)
            else:
                raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size ({o}) at "
                                   f"non-singleton dimension {i}.  Target sizes: {sizes}.  Tensor sizes: {old_s}")
        return self._view(new_s, new_st, c.offset)

    def expand_as(self, other):
        return self.expand(list(other.shape))

    def unsqueeze(self, dim):
        self._no_trace_view("Tensor.unsqueeze()")
        c = self._c
        n = len(c.shape)
        dim = _normalize_dim(dim, n + 1)
        s, st = list(c.shape), list(c.strides)
        new_stride = s[dim] * st[dim] if dim < n else 1
        s.insert(dim, 1)
        st.insert(dim, new_stride)
        return self._view(s, st, c.offset)

    def squeeze(self, dim=None):
        self._no_trace_view("Tensor.squeeze()")
        c = self._c
        n = len(c.shape)
        if dim is None:
            dims = {i for i in range(n) if c.shape[i] == 1}
        elif isinstance(dim, (tuple, list)):
            dims = {_normalize_dim(d, n) for d in dim}
        else:
            dims = {_normalize_dim(dim, n)}
        keep = [i for i in range(n) if not (i in dims and c.shape[i] == 1)]
        return self._view([c.shape[i] for i in keep], [c.strides[i] for i in keep], c.offset)

    def _infer_size(self, sizes):
        sizes = list(sizes)
        numel = self.numel()
        neg = [i for i, s in enumerate(sizes) if s == -1]
        if len(neg) > 1:
            raise RuntimeError("only one dimension can be inferred")
        known = 1
        for s in sizes:
            if s != -1:
                if s < 0:
                    raise RuntimeError(f"invalid shape dimension {s}")
                known *= s
        if neg:
            if known == 0 or numel % known:
                raise RuntimeError(f"shape '{sizes}' is invalid for input of size {numel}")
            sizes[neg[0]] = numel // known
        elif known != numel:
            raise RuntimeError(f"shape '{sizes}' is invalid for input of size {numel}")
        return sizes

    def view(self, *sizes):
        self._no_trace_view("Tensor.view()")
        if len(sizes) == 1 and isinstance(sizes[0], D.dtype):
            raise NotImplementedError("flow: Tensor.view(dtype) is not supported")
        sizes = self._infer_size(_sizes_arg(sizes))
        if not self.is_contiguous():
            raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
        return self._view(sizes, _contiguous_strides(sizes), self._c.offset)

    def reshape(self, *sizes):
        self._no_trace_view("Tensor.reshape()")
        sizes = self._infer_size(_sizes_arg(sizes))
        return self.contiguous().view(sizes)

    def flatten(self, start_dim=0, end_dim=-1):
        n = self.ndim
        if n == 0:
            return self.reshape(1)
        a, b = _normalize_dim(start_dim, n), _normalize_dim(end_dim, n)
        s = list(self.shape)
        mid = 1
        for x in s[a:b + 1]:
            mid *= x
        return self.reshape(s[:a] + [mid] + s[b + 1:])

    def narrow(self, dim, start, length):
        d = _normalize_dim(dim, self.ndim)
        idx = [slice(None)] * d + [slice(start, start + length)]
        return self[tuple(idx)]

    def __getitem__(self, index):
        self._no_trace_view("Tensor.__getitem__() (indexing)")
        c = self._c
        if not isinstance(index, tuple):
            index = (index,)
        for i in index:
            if isinstance(i, (Tensor, list, np.ndarray)) or isinstance(i, bool):
                raise NotImplementedError("flow: advanced indexing (tensors, lists, bools) is not supported yet; "
                                          "use ints, slices, None and ...")
        n = len(c.shape)
        consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
        if sum(1 for i in index if i is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if consumed > n:
            raise IndexError(f"too many indices for tensor of dimension {n}")
        expanded = []
        for i in index:
            if i is Ellipsis:
                expanded.extend([slice(None)] * (n - consumed))
            else:
                expanded.append(i)
        if Ellipsis not in index:
            expanded.extend([slice(None)] * (n - consumed))
        sizes, strides, offset, d = [], [], c.offset, 0
        for i in expanded:
            if i is None:
                sizes.append(1)
                strides.append(c.shape[d] * c.strides[d] if d < n else 1)
                continue
            size, stride = c.shape[d], c.strides[d]
            if isinstance(i, slice):
                start, stop, step = i.indices(size)
                if step <= 0:
                    raise ValueError("step must be greater than zero")
                length = len(range(start, stop, step))
                if length > 0:
                    offset += start * stride
                sizes.append(length)
                strides.append(stride * step)
            else:
                try:
                    k = operator.index(i)
                except TypeError:
                    raise TypeError(f"flow: unsupported index of type {type(i).__name__}") from None
                if k < -size or k >= size:
                    raise IndexError(f"index {k} is out of bounds for dimension {d} with size {size}")
                offset += (k + size if k < 0 else k) * stride
            d += 1
        return self._view(sizes, strides, offset)

    def __setitem__(self, index, value):
        self._need_data("Tensor.__setitem__() (in-place assignment)")
        view = self[index] if index is not Ellipsis else self
        view._fill_from(value)

    def _fill_from(self, value):
        """Writes `value` (a number, array-like or Tensor, broadcastable) into this view in place."""
        if isinstance(value, Tensor):
            value._need_data("Tensor.copy_()")
            value = value._numpy_f32_or_native()
        arr = np.asarray(value)
        dst = self._c.numpy_view()
        if self.dtype is D.bfloat16:
            dst[...] = D.f32_to_bf16_bits(np.broadcast_to(arr.astype(np.float32), dst.shape))
        else:
            dst[...] = np.broadcast_to(arr, dst.shape).astype(dst.dtype)

    def copy_(self, src, non_blocking=False):
        self._need_data("Tensor.copy_()")
        self._fill_from(src)
        return self

    def fill_(self, value):
        self._need_data("Tensor.fill_()")
        self._fill_from(value)
        return self

    def zero_(self):
        return self.fill_(0)

    # ---- dtype conversion ---------------------------------------------------------------------

    def to(self, *args, **kwargs):
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("copy", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, (str, D.device)) and str(a).split(":")[0] in ("cpu", "cuda"):
                device = a
            else:
                dtype = a
        out = self
        if device is not None:
            out = out.cuda() if str(device).startswith("cuda") else out.cpu()
        if dtype is None:
            return out
        self = out
        dtype = D.to_dtype(dtype)
        if dtype is self.dtype:
            return self
        return F._cast(self, dtype)

    def type(self, dtype=None):
        if dtype is None:
            return "flow." + self.dtype._torch_short + "Tensor"
        return self.to(dtype)

    def float(self):
        return self.to(D.float32)

    def half(self):
        return self.to(D.float16)

    def bfloat16(self):
        return self.to(D.bfloat16)

    def double(self):
        return self.to(D.float64)

    def int(self):
        return self.to(D.int32)

    def long(self):
        return self.to(D.int64)

    def bool(self):
        return self.to(D.bool_)

    # ---- operators (reflected forms swap the operands) ---------------------------------------

    def __add__(self, other):
        return F._binary_op("add", self, other)

    def __radd__(self, other):
        return F._binary_op("add", other, self, reflected=True)

    def __sub__(self, other):
        return F._binary_op("sub", self, other)

    def __rsub__(self, other):
        return F._binary_op("sub", other, self, reflected=True)

    def __mul__(self, other):
        return F._binary_op("mul", self, other)

    def __rmul__(self, other):
        return F._binary_op("mul", other, self, reflected=True)

    def __truediv__(self, other):
        return F._binary_op("div", self, other)

    def __rtruediv__(self, other):
        return F._binary_op("div", other, self, reflected=True)

    def __pow__(self, other):
        return F._binary_op("pow", self, other)

    def __rpow__(self, other):
        return F._binary_op("pow", other, self, reflected=True)

    def __neg__(self):
        return F.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return F.abs(self)

    def __eq__(self, other):
        return F._binary_op("eq", self, other)

    def __ne__(self, other):
        return F._binary_op("ne", self, other)

    def __lt__(self, other):
        return F._binary_op("lt", self, other)

    def __le__(self, other):
        return F._binary_op("le", self, other)

    def __gt__(self, other):
        return F._binary_op("gt", self, other)

    def __ge__(self, other):
        return F._binary_op("ge", self, other)

    # ---- methods mirroring the functions ------------------------------------------------------

    def add(self, other, *, alpha=1):
        return F.add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return F.sub(self, other, alpha=alpha)

    subtract = sub

    def mul(self, other):
        return F.mul(self, other)

    multiply = mul

    def div(self, other, *, rounding_mode=None):
        return F.div(self, other, rounding_mode=rounding_mode)

    divide = div
    true_divide = div

    def pow(self, exponent):
        return F.pow(self, exponent)

    def minimum(self, other):
        return F.minimum(self, other)

    def maximum(self, other):
        return F.maximum(self, other)

    def eq(self, other):
        return F.eq(self, other)

    def ne(self, other):
        return F.ne(self, other)

    def lt(self, other):
        return F.lt(self, other)

    def le(self, other):
        return F.le(self, other)

    def gt(self, other):
        return F.gt(self, other)

    def ge(self, other):
        return F.ge(self, other)

    def neg(self):
        return F.neg(self)

    negative = neg

    def abs(self):
        return F.abs(self)

    def exp(self):
        return F.exp(self)

    def log(self):
        return F.log(self)

    def sqrt(self):
        return F.sqrt(self)

    def rsqrt(self):
        return F.rsqrt(self)

    def tanh(self):
        return F.tanh(self)

    def sigmoid(self):
        return F.sigmoid(self)

    def relu(self):
        return F.relu(self)

    def clamp(self, min=None, max=None):
        return F.clamp(self, min, max)

    clip = clamp

    def where(self, condition, other):
        return F.where(condition, self, other)

    def sum(self, dim=None, keepdim=False, *, dtype=None):
        return F.sum(self, dim, keepdim, dtype=dtype)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        return F.mean(self, dim, keepdim, dtype=dtype)

    def amax(self, dim=(), keepdim=False):
        return F.amax(self, dim, keepdim)

    def amin(self, dim=(), keepdim=False):
        return F.amin(self, dim, keepdim)

    def softmax(self, dim, dtype=None):
        return F.softmax(self, dim, dtype=dtype)

    def log_softmax(self, dim, dtype=None):
        return F.log_softmax(self, dim, dtype=dtype)


from . import _ops as F  # noqa: E402  (the functions use Tensor; Tensor's methods use them)
