"""flow.Tensor: a torch-like tensor over a ``_C.Tensor`` (concrete) or a graph value (a tracer).

A concrete tensor wraps a strided ``_C.Tensor``. A tracer exists only while @flow.jit traces a
function: it knows its shape and dtype (inferred by the core's op table) and records every op
applied to it. Everything goes through the one dispatcher (``flow._dispatch``):

- Views (view, reshape, permute, transpose, expand, squeeze/unsqueeze, narrow, split/chunk,
  indexing with ints, slices, None and ``...``) are the op table's view ops: zero-copy aliases
  sharing storage in eager mode (a reshape that strides cannot express copies, as torch's does),
  graph view nodes in a trace. ``view(dtype)`` aliases the storage read as another dtype eagerly,
  and is a bit cast in a trace (flow/_view_dtype.py).
- Indexing with one integer tensor is index_select (+ a reshape for N-d indices); a boolean mask
  has a data-dependent size, so it runs eagerly only (nonzero in numpy, then index_select).
- In-place ops compute out of place and then write into this tensor's storage (a numpy view
  write on the CPU; on a GPU one stream-ordered copy into a dense target, else a rewrite of the
  storage run the target spans, see ``_device_write``), so every view sees the values; in a trace
  the tracer is rebound to the new value (an argument's, a parameter's or a captured tensor's is
  written back after every run), which is refused (TraceError) for views and tensors that have
  views.
- Operations that need a tracer's *values* (``item()``, ``bool()``, ``numpy()``, ``tolist()``,
  boolean masks, indexed assignment) raise ``flow.TraceError`` naming the op and the user's line.
"""
import builtins
import numbers
import operator

import numpy as np

from . import _C, _epoch
from . import _dtype as D
from ._dispatch import TraceContext, current_trace, dispatch1  # noqa: F401  (TraceContext re-exported for tools)
from ._errors import TraceError, trace_error


def rebind(t, c):
    """Makes concrete Tensor `t` hold flow._C tensor `c`, counted (flow/_epoch.py) after the change:
    the only way an existing Tensor's shape, dtype or strides change."""
    t._c = c
    _epoch.rebound()


def _is_dtype(x):
    """A flow dtype or a torch one (torch's dtypes are accepted wherever flow's are)."""
    return isinstance(x, D.dtype) or x in (float, int, bool) or D.is_torch_dtype(x)


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


def _sizes_arg(sizes, fn=None, name=None):
    """Accepts f(2, 3) and f((2, 3)) / f([2, 3]) / f(flow.Size); with `fn`, no sizes at all is torch's
    TypeError (an empty tuple is fine)."""
    if fn is not None and not sizes:
        raise TypeError(f'{fn}() missing 1 required positional arguments: "{name}"')
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    return [operator.index(s) for s in sizes]


def _infer_sizes(sizes, numel, what="view"):
    """torch's infer_size: one -1 allowed; the product must equal numel."""
    sizes = list(sizes)
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
        raise RuntimeError(f"{what}: sizes {sizes} don't multiply up to the size of dim ({numel})")
    return sizes


# The most views one call makes (tensor_split's sections): beyond it torch runs out of memory building
# the list, and a Python loop over them would hang.
_MAX_VIEWS = 2**31 - 1
# torch.can_cast for the in-place/out= contract: no float -> int/bool, no int -> bool.
_KIND = {"bool": 0, "uint8": 1, "int8": 1, "int16": 1, "int32": 1, "int64": 1, "float16": 2, "bfloat16": 2,
         "float32": 2, "float64": 2}


def _can_cast(src, dst):
    return _KIND[src.name] <= _KIND[dst.name]


def _fresh(result, source):
    """`result`, or a copy of it where it is `source` itself or (eagerly) a view of its storage: for
    ops that are copies in torch (roll, repeat, repeat_interleave, ...) even where they move nothing,
    so a write into the result never reaches the input. In a trace always a copy: a compiled
    function returns a chain of views of its argument as a view (a reshape's result is one), and
    the copy of a computed value fuses into its kernel."""
    if result is source or result._c is None:
        return result.clone()
    if source._c is not None and result.numel() and result._c.storage_ptr() == source._c.storage_ptr():
        return result.clone()
    return result


def _check_no_self_overlap(c):
    """torch's refusal to write into a tensor whose elements share memory (an expanded view)."""
    if builtins.any(st == 0 and n > 1 for n, st in zip(c.shape, c.strides)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")


def _value_array(value, dtype, op):
    """`value` (number, array-like or concrete Tensor) as a numpy array in the storage type of `dtype`
    (bfloat16: uint16 bits), converted as torch converts (float -> int truncates, bf16 rounds)."""
    from . import _creation

    if isinstance(value, Tensor):
        value._need_data(op)
        if value.dtype is not dtype:
            value = F._cast(value, dtype)
        return value._c.numpy_raw()
    return _creation.tensor(value, dtype=dtype)._c.numpy_raw()


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

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    def unfold(self, dimension, size, step):
        """Tensor.unfold: the windows of `size` elements every `step` along `dimension`, as a new
        last dim. Eagerly a view (as torch's); traced, a gather of the windows' positions."""
        n = self.ndim
        d = dimension + n if dimension < 0 else dimension
        if not 0 <= d < builtins.max(n, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-builtins.max(n, 1)}, "
                             f"{builtins.max(n, 1) - 1}], but got {dimension})")
        length = self.shape[d] if n else 1
        if size > length:
            raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        count = (length - size) // step + 1
        if n == 0:
            return self.reshape([1])
        if self._c is not None:
            st = list(self.stride())
            shape = list(self.shape)
            shape[d] = count
            return self.as_strided(shape + [size], st[:d] + [st[d] * step] + st[d + 1:] + [st[d]],
                                   self.storage_offset())
        from . import _creation

        pos = (_creation.arange(count).reshape([count, 1]) * step + _creation.arange(size).reshape([1, size]))
        windows = self.index_select(d, pos.reshape([-1]).to(self.device))
        shape = list(self.shape)
        shape[d:d + 1] = [count, size]
        return windows.reshape(shape).movedim(d + 1, -1)

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def stride(self, dim=None):
        # A tracer has no layout yet (the compiler picks it): report contiguous strides.
        s = tuple(self._c.strides) if self._c is not None else tuple(_contiguous_strides(self.shape))
        return s if dim is None else s[_normalize_dim(dim, len(s))]

    def storage_offset(self):
        return self._c.offset if self._c is not None else 0

    def is_contiguous(self, memory_format=None):
        if memory_format is D.channels_last:
            if self.ndim != 4:
                raise RuntimeError("required rank 4 tensor to use channels_last format")
            if self._c is None:
                return False
            n, c, h, w = self.shape
            want = (h * w * c, 1, w * c, c)  # NHWC strides of an NCHW shape (a size-1 dim's: any)
            return builtins.all(self.shape[d] == 1 or self._c.strides[d] == want[d] for d in range(4))
        if memory_format not in (None, D.contiguous_format):
            raise RuntimeError(f"is_contiguous(): unsupported memory format {memory_format}")
        return True if self._c is None else self._c.is_contiguous()

    def data_ptr(self):
        self._need_data("Tensor.data_ptr()")
        return self._c.data_ptr()

    def contiguous(self, memory_format=None):
        if memory_format is D.channels_last:
            if self.is_contiguous(memory_format=D.channels_last):
                return self
            return self.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
        if memory_format not in (None, D.contiguous_format, D.preserve_format):
            raise RuntimeError(f"contiguous(): unsupported memory format {memory_format}")
        if self._c is None or self._c.is_contiguous():
            return self
        return Tensor._wrap(self._c.contiguous())

    def clone(self, memory_format=None):
        if memory_format is D.channels_last:
            return self.permute(0, 2, 3, 1).clone(memory_format=D.contiguous_format).permute(0, 3, 1, 2)
        if memory_format is D.contiguous_format and self._c is not None:
            return Tensor._wrap(self._c.contiguous())
        if memory_format not in (None, D.contiguous_format, D.preserve_format):
            raise RuntimeError(f"clone(): unsupported memory format {memory_format}")
        # torch.preserve_format: an eager copy keeps its source's order of dims in memory (a dense
        # tensor its strides: jit/eager_layout.h). In a trace, a new graph value (a copy), so
        # in-place ops on the clone are allowed.
        return F._cast(self, self.dtype)

    def detach(self):
        return self

    def __deepcopy__(self, memo):
        """copy.deepcopy: a tensor with its own storage and the same values (a Parameter stays one)."""
        self._need_data("copy.deepcopy")
        new = self.clone()
        if type(self) is not Tensor:  # nn.Parameter
            new = type(self)(new, requires_grad=self.requires_grad)
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, protocol):
        """pickle: the values as little-endian bytes, rebuilt on the device they were on."""
        self._need_data("pickle")
        c = self._c if self._c.device == "cpu" else self._c.to_device("cpu")
        raw = np.ascontiguousarray(c.numpy_view()).tobytes()
        return (_unpickle_tensor, (self.dtype.name, tuple(self.shape), raw, str(self.device), type(self) is not Tensor,
                                   builtins.bool(getattr(self, "requires_grad", False))))

    def cpu(self):
        if self.device.type == "cpu":  # (also a traced tensor already there: nothing to move)
            return self
        self._need_data("Tensor.cpu()")
        return Tensor._wrap(self._c.to_device("cpu", keep_layout=True))

    def cuda(self, device=None, non_blocking=False):
        from . import cuda as _cuda
        _cuda._require_current(device)
        if self.device.type == "cuda":
            return self
        self._need_data("Tensor.cuda()")
        return Tensor._wrap(self._c.to_device("cuda", keep_layout=True))

    def pin_memory(self, device=None):
        """torch pins host memory for asynchronous uploads; flow's host-to-device copies are
        synchronous from pageable memory (correct either way), so this is the tensor itself."""
        self._need_data("Tensor.pin_memory()")
        if self._c.device != "cpu":
            raise RuntimeError(f"cannot pin '{self.device.type}' memory: only dense CPU tensors can be pinned")
        return self

    def is_pinned(self, device=None):
        return False

    def requires_grad_(self, requires_grad=True):
        return self

    @property
    def data(self):
        return Tensor._wrap(self._c) if self._c is not None else self

    @property
    def _version(self) -> int:
        """In-place writes seen by this tensor's storage (torch's ``Tensor._version``)."""
        self._need_data("Tensor._version")
        return self._c._version

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor) or value._c is None:
            raise TypeError("Tensor.data must be set to a concrete flow.Tensor")
        rebind(self, value._c)

    # ---- conversion to Python / numpy (data-dependent: refused while tracing) ----------------

    def _numpy_f32_or_native(self):
        """A numpy copy, from any device (what item(), tolist() and printing read: torch copies a GPU
        tensor to the host for these too); bfloat16 widened to float32 (exactly)."""
        c = self._c if self._c.device == "cpu" else self._c.to_device("cpu")
        if self.dtype is D.bfloat16:
            return D.bf16_bits_to_f32(c.numpy_raw())
        return c.numpy()

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

    # ---- views: the op table's view ops (eager: zero-copy aliases; traced: graph view nodes) ---

    def _vop(self, op, attrs):
        return dispatch1(op, [self], attrs)

    def as_strided(self, size, stride, storage_offset=None):
        size, stride = _sizes_arg((size,)), _sizes_arg((stride,))
        if self._c is not None:  # bounds-checked against the storage
            return Tensor._wrap(self._c.as_strided(size, stride,
                                                   self._c.offset if storage_offset is None else storage_offset))
        attrs = {"size": size, "stride": stride}
        if storage_offset:
            attrs["storage_offset"] = operator.index(storage_offset)
        return self._vop("as_strided", attrs)

    def permute(self, *dims):
        return self._vop("permute", {"dims": _sizes_arg(dims, "permute", "dims")})

    def transpose(self, dim0, dim1):
        n = self.ndim
        a, b = _normalize_dim(dim0, n), _normalize_dim(dim1, n)
        if n == 0 or a == b:
            return self._vop("permute", {"dims": list(range(n))}) if n else self
        perm = list(range(n))
        perm[a], perm[b] = perm[b], perm[a]
        return self.permute(perm)

    swapaxes = transpose
    swapdims = transpose

    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self.transpose(0, 1) if self.ndim == 2 else self

    @property
    def T(self):
        return self.permute(list(range(self.ndim))[::-1])

    @property
    def mT(self):
        if self.ndim == 0:  # torch: the identity on 0-d tensors (deprecated there)
            return self.permute([])
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D "
                               "tensor.")
        return self.transpose(-2, -1)

    def movedim(self, source, destination):
        n = self.ndim
        src = [source] if isinstance(source, numbers.Integral) else list(source)
        dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
        if len(src) != len(dst):
            raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
                               f"the same number of dims as destination ({dst} dims)")
        src = [_normalize_dim(d, n) for d in src]
        dst = [_normalize_dim(d, n) for d in dst]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise RuntimeError("movedim: repeated dim in `source` or `destination`")
        if n == 0:  # dims 0 and -1 of a 0-d tensor: itself, as a view
            return self.permute([])
        perm = [-1] * n
        for s, d in zip(src, dst):
            perm[d] = s
        rest = iter(d for d in range(n) if d not in src)
        perm = [p if p >= 0 else next(rest) for p in perm]
        return self.permute(perm)

    moveaxis = movedim

    def expand(self, *sizes):
        sizes = _sizes_arg(sizes, "expand", "size")
        old = list(self.shape)
        # torch's checks and messages (from the last dim; the op table checks from the first)
        if len(sizes) < len(old):
            raise RuntimeError(f"expand({self.dtype._torch_short}Type{{{old}}}, size={sizes}): the number of sizes "
                               f"provided ({len(sizes)}) must be greater or equal to the number of dimensions in the "
                               f"tensor ({len(old)})")
        lead = len(sizes) - len(old)
        for i in range(len(sizes) - 1, -1, -1):
            s = sizes[i]
            if i < lead:
                if s < 0:
                    raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                                       f"non-existing dimension {i}")
            elif s != -1 and s != old[i - lead] and old[i - lead] != 1:
                raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size "
                                   f"({old[i - lead]}) at non-singleton dimension {i}.  Target sizes: {sizes}.  "
                                   f"Tensor sizes: {old}")
        return self._vop("expand", {"shape": sizes})

    def expand_as(self, other):
        return self.expand(list(other.shape))

    def unsqueeze(self, dim):
        s = list(self.shape)
        s.insert(_normalize_dim(dim, len(s) + 1), 1)
        return self._vop("reshape", {"shape": s})

    def squeeze(self, dim=None):
        s = list(self.shape)
        n = len(s)
        if dim is None:
            dims = set(range(n))
        elif isinstance(dim, (tuple, list)):
            listed = [_normalize_dim(d, n) for d in dim]
            dims = set(listed)
            if len(dims) != len(listed):
                dup = next(d for d in listed if listed.count(d) > 1)
                raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
        else:
            dims = {_normalize_dim(dim, n)}
        keep = [s[i] for i in range(n) if not (i in dims and s[i] == 1)]
        if len(keep) == n:
            return self._vop("reshape", {"shape": s})  # torch returns a view (a new tensor) here too
        return self._vop("reshape", {"shape": keep})

    def view(self, *sizes, dtype=None):
        """A view with another shape, or with the same bytes read as `dtype` (flow/_view_dtype.py)."""
        if dtype is not None and not sizes:
            sizes = (dtype,)
        elif dtype is not None:
            raise TypeError("view() received an invalid combination of arguments: a size and a dtype")
        if len(sizes) == 1 and _is_dtype(sizes[0]):
            from ._view_dtype import view_dtype
            return view_dtype(self, sizes[0])
        if any(_is_dtype(s) for s in sizes):
            raise TypeError("view() received an invalid combination of arguments: a size and a dtype")
        return self._vop("view", {"shape": _sizes_arg(sizes)})

    def view_as(self, other):
        return self.view(list(other.shape))

    def reshape(self, *sizes):
        return self._vop("reshape", {"shape": _sizes_arg(sizes, "reshape", "shape")})

    def reshape_as(self, other):
        return self.reshape(list(other.shape))

    def flatten(self, start_dim=0, end_dim=-1):
        n = self.ndim
        a, b = _normalize_dim(start_dim, n), _normalize_dim(end_dim, n)
        if n == 0:
            return self.reshape(1)
        if a > b:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        s = list(self.shape)
        mid = 1
        for x in s[a:b + 1]:
            mid *= x
        return self.reshape(s[:a] + [mid] + s[b + 1:])

    def unflatten(self, dim, sizes):
        s = list(self.shape)
        d = _normalize_dim(dim, len(s))
        sizes = [operator.index(x) for x in sizes]
        return self.reshape(s[:d] + _infer_sizes(sizes, s[d], "unflatten") + s[d + 1:])

    def _slice(self, dim, start, end, step=1):
        attrs = {"dim": dim, "step": step}
        if start is not None:
            attrs["start"] = start
        if end is not None:
            attrs["end"] = end
        return self._vop("slice", attrs)

    def narrow(self, dim, start, length):
        d = _normalize_dim(dim, self.ndim)
        if self.ndim == 0:
            raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
        size = self.shape[d]
        start, length = operator.index(start), operator.index(length)
        if length < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        if start < -size or start > size:
            raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
        if start < 0:
            start += size
        if start + length > size:
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
        return self._slice(d, start, start + length)

    def split(self, split_size_or_sections, dim=0):
        d = _normalize_dim(dim, self.ndim)
        size = self.shape[d]
        if isinstance(split_size_or_sections, numbers.Integral):
            step = operator.index(split_size_or_sections)
            if step < 0 or (step == 0 and size != 0):
                raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of "
                                   f"{size}")
            if size == 0:
                return (self,)
            return tuple(self._slice(d, i, min(i + step, size)) for i in range(0, size, step))
        sections = [operator.index(s) for s in split_size_or_sections]
        if builtins.sum(sections) != size or builtins.any(s < 0 for s in sections):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size "
                               f"at dimension {d}), but got split_sizes={sections}")
        out, at = [], 0
        for s in sections:
            out.append(self._slice(d, at, at + s))
            at += s
        return tuple(out)

    def split_with_sizes(self, split_sizes, dim=0):
        return self.split(list(split_sizes), dim)

    def chunk(self, chunks, dim=0):
        chunks = operator.index(chunks)
        if chunks <= 0:
            raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
        d = _normalize_dim(dim, self.ndim)
        size = self.shape[d]
        step = (size + chunks - 1) // chunks
        if step == 0:  # an empty dim: torch returns `chunks` empty pieces... only when size == 0
            return tuple(self._slice(d, 0, 0) for _ in range(chunks))
        return self.split(step, d)

    def tensor_split(self, indices_or_sections, dim=0):
        d = _normalize_dim(dim, self.ndim)
        size = self.shape[d]
        if isinstance(indices_or_sections, Tensor):  # torch: a 0-d count of sections or a 1-d list of indices
            t = indices_or_sections
            if t.dtype is not D.int64:
                raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but "
                                   f"got {t.dtype._torch_short}")
            if t.ndim > 1:
                raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                                   f"one-dimensional tensor, but got a tensor with {t.ndim} dims")
            if t._c is None:
                raise trace_error("tensor_split() with a tensor of indices", "the pieces' sizes depend on its values; "
                                  "pass them as Python ints")
            indices_or_sections = t.tolist()
        if isinstance(indices_or_sections, numbers.Integral):
            n = operator.index(indices_or_sections)
            if n <= 0:
                raise RuntimeError(f"number of sections must be larger than 0, got {n}")
            if n > _MAX_VIEWS:
                raise RuntimeError(f"tensor_split: {n} sections would be {n} tensors; flow makes at most "
                                   f"{_MAX_VIEWS}")
            q, r = divmod(size, n)
            bounds, at = [], 0
            for i in range(n):
                bounds.append((at, at + q + (1 if i < r else 0)))
                at = bounds[-1][1]
        else:
            # Each index is a Python slice bound: negatives count from the end, then clamp to [0, size].
            idx = [builtins.min(builtins.max(i + size if i < 0 else i, 0), size)
                   for i in map(operator.index, indices_or_sections)]
            edges = [0] + idx + [size]
            bounds = [(edges[i], builtins.max(edges[i], edges[i + 1])) for i in range(len(edges) - 1)]
        return tuple(self._slice(d, a, b) for a, b in bounds)

    def unbind(self, dim=0):
        d = _normalize_dim(dim, self.ndim)
        return tuple(self._vop("select", {"dim": d, "index": i}) for i in range(self.shape[d]))

    def select(self, dim, index):
        if self.ndim == 0:
            raise IndexError("select() cannot be applied to a 0-dim tensor.")
        d = _normalize_dim(dim, self.ndim)
        index = operator.index(index)
        size = self.shape[d]
        if index < -size or index >= size:
            raise IndexError(f"select(): index {index} out of range for tensor of size {list(self.shape)} at "
                             f"dimension {d}")
        return self._vop("select", {"dim": d, "index": index})

    def repeat(self, *sizes):
        reps = _sizes_arg(sizes, "repeat", "repeats")
        s = list(self.shape)
        if len(reps) < len(s):
            raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                               "tensor")
        if builtins.any(r < 0 for r in reps):
            raise RuntimeError(f"Trying to create tensor with negative dimension: {reps}")
        s = [1] * (len(reps) - len(s)) + s
        inter, expanded, final = [], [], []
        for r, n in zip(reps, s):
            inter += [1, n]
            expanded += [r, n]
            final.append(r * n)
        return _fresh(self.reshape(inter).expand(expanded).reshape(final).contiguous(), self)

    def tile(self, *dims):
        reps = _sizes_arg(dims)
        return self.repeat([1] * (self.ndim - len(reps)) + reps)

    # ---- indexing ----------------------------------------------------------------------------

    def __getitem__(self, index):
        index = _indexing._index_tuple(index)
        n = self.ndim
        expanded = _indexing._expand_ellipsis(index, n)
        x, d, adv = self, 0, []
        for i in expanded:
            if i is None:
                x = x.unsqueeze(d)
                d += 1
            elif isinstance(i, slice):
                step = 1 if i.step is None else operator.index(i.step)
                if step <= 0:
                    raise ValueError("step must be greater than zero")
                start = None if i.start is None else operator.index(i.start)
                stop = None if i.stop is None else operator.index(i.stop)
                if not (start in (None, 0) and stop is None and step == 1):
                    x = x._slice(d, start, stop, step)
                d += 1
            elif isinstance(i, Tensor) and not _indexing.is_concrete_int(i):
                if i.device != self.device and i.device.type == "cpu":  # torch takes CPU indices anywhere
                    i = i.to(self.device)
                adv.append((d, i))
                d += i.ndim if i.dtype is D.bool_ else 1
            else:  # an int, or a concrete 0-d integer tensor (its int: a select, a view, as torch's)
                k = builtins.int(i.item()) if isinstance(i, Tensor) else operator.index(i)
                size = x.shape[d]
                if k < -size or k >= size:
                    raise IndexError(f"index {k} is out of bounds for dimension {d} with size {size}")
                x = x._vop("select", {"dim": d, "index": k})
        if not adv:
            return x
        if len(adv) > 1:
            return _indexing._multi_index(x, adv)
        pos, ix = adv[0]
        s = list(x.shape)
        if ix.dtype is D.bool_:
            return _indexing._mask_index(x, pos, ix)
        if ix.dtype not in (D.int64, D.int32):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        flat = ix.reshape(-1) if ix.ndim != 1 else ix
        out = F._index_select_wrapping(x, pos, flat)  # checks the range on the host (CPU, eager)
        if ix.ndim != 1:
            out = out.reshape(s[:pos] + list(ix.shape) + s[pos + 1:])
        return out

    def __setitem__(self, index, value):
        if self._c is None or current_trace() is not None:
            raise trace_error("Tensor.__setitem__() (indexed assignment)",
                              "in-place writes into a traced tensor are not supported; build the value with "
                              "flow.where / flow.cat instead")
        index = _indexing._index_tuple(index)
        npindex = _indexing._numpy_index(index, self.ndim)
        if npindex[1] is not None and isinstance(value, Tensor) and value.dtype is not self.dtype and not (
                value.ndim == 0 and len(index) == 1 and isinstance(index[0], Tensor) and index[0].dtype is D.bool_):
            from ._scatter import check_index_put_dtypes  # torch's index_put_ (a 0-d value by one mask: a fill)

            check_index_put_dtypes(self, value)
        if self._c.device != "cpu":
            self._device_write("Tensor.__setitem__()", value, npindex)
            return
        dst = self._writable("Tensor.__setitem__()")
        target_shape = _indexing.np_indexed(dst, npindex).shape
        src = _value_array(value, self.dtype, "Tensor.__setitem__()")
        try:
            _indexing.np_assign(dst, npindex, np.broadcast_to(src, target_shape))
        except ValueError:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(src.shape)} cannot be broadcast to "
                               f"indexing result of shape {list(target_shape)}") from None
        self._wrote()

    # ---- in-place ops: compute out of place, then write into self's storage ------------------

    def _writable(self, op):
        """A writable numpy view of this (concrete, CPU) tensor's elements (bfloat16: uint16 bits)."""
        c = self._c
        if c.device != "cpu":
            raise AssertionError(f"{op}: a CUDA tensor is written by _device_write")
        _check_no_self_overlap(c)
        # Every eager in-place write comes through here: the version tells compiled functions that
        # cached values derived from this storage (folded weights, reordered weights) are stale.
        # Callers bump again after writing (_wrote), so a result cached by a concurrent call from
        # half-written data is not current either.
        c.bump_version()
        return c.numpy_view()

    def _wrote(self):
        self._c.bump_version()

    def _device_write(self, op, value, npindex=None):
        """An in-place write into this tensor on a GPU: `value` (number, array-like or Tensor,
        broadcast as torch does) into the elements `npindex` selects (all when None). A dense target
        (the whole tensor when it fills a gap-free run of storage) is one copy of the value, permuted
        to the storage order. Any other target (a slice, a mask, integer indices) is found on the host
        as storage positions; the run of storage between the first and last of them is rewritten
        whole, each position taking its value or keeping its own (a where over an index_select),
        so every view of the storage sees the write."""
        from . import _creation

        c = self._c
        _check_no_self_overlap(c)
        if isinstance(value, Tensor):
            value._need_data(op)
            if value.dtype is not self.dtype:
                value = F._cast(value, self.dtype)
        else:
            value = _creation.tensor(value, dtype=self.dtype)
        if value.device != self.device:
            value = value.to(self.device)
        pos = None
        if npindex is not None or not c.is_dense:
            pos = np.full(tuple(c.shape), c.offset, dtype=np.int64)
            for d, (n, st) in enumerate(zip(c.shape, c.strides)):
                pos += (np.arange(n, dtype=np.int64) * st).reshape((n,) + (1,) * (len(c.shape) - d - 1))
            if npindex is not None:
                pos = _indexing.np_indexed(pos, npindex)
        target = list(self.shape) if pos is None else list(pos.shape)
        if list(value.shape) != target:
            try:
                value = value.expand(target)
            except (RuntimeError, ValueError):
                raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to "
                                   f"indexing result of shape {target}") from None
        c.bump_version()
        if pos is None:
            c.write_dense(value._c)
        elif pos.size:
            lo = int(pos.min())
            which = np.full(int(pos.max()) - lo + 1, -1, dtype=np.int64)
            which[(pos - lo).reshape(-1)] = np.arange(pos.size, dtype=np.int64)
            span = Tensor._wrap(c.as_strided([which.size], [1], lo))
            which = _creation.tensor(which).to(self.device)
            taken = dispatch1("index_select", [value.reshape(-1), which.clamp(min=0)], {"dim": 0})  # in range
            merged = F.where(which >= 0, taken, span)
            span._c.write_dense(merged._c)
        self._wrote()

    def _assign(self, op, result, check_cast=True):
        """Makes this tensor hold `result` (a Tensor of this shape) in place, torch's in-place contract:
        the result must have this shape and be castable to this dtype. Eager: the values are written
        into this tensor's storage, so every view of it sees them. Traced: this tracer is rebound to
        the new graph value (refused for arguments, views and viewed tensors, whose aliases could not
        see the write)."""
        if tuple(result.shape) != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                               f"{list(result.shape)}")
        if result.dtype is not self.dtype:
            if check_cast and not _can_cast(result.dtype, self.dtype):
                raise RuntimeError(f"result type {result.dtype._torch_short} can't be cast to the desired output "
                                   f"type {self.dtype._torch_short}")
            result = F._cast(result, self.dtype)
        if self._c is None:
            ctx = self._ctx
            if result._c is not None:
                result = Tensor._tracer(ctx, ctx.value_id(result))
            if self._vid in ctx.aliased:
                raise trace_error(f"Tensor.{op}", "an in-place op on a view or a tensor that has views cannot be "
                                  "expressed in the traced graph (the views would not see the write); use the "
                                  "out-of-place form")
            ctx.write_arg(self)  # a function argument's tracer: written back after every run
            self._vid = result._vid
            return self
        ctx = current_trace()
        if ctx is not None:
            # A parameter, buffer or global written during a trace: a mutation, written back after
            # every run of the compiled function (see flow._dispatch). Refused when the trace took
            # a view of it before: that view would not see the write.
            if ctx.viewed_before_write(self):
                raise trace_error(f"Tensor.{op}", "the traced function took a view of this tensor before writing "
                                  "it in place; the view would not see the write (write first, or compute out "
                                  "of place)")
            ctx.mutate(self, ctx.value_id(result))
            return self
        if result._c is None:
            raise trace_error(f"Tensor.{op}", "it would write a value of a finished trace into a tensor")
        if self._c.device != "cpu":
            self._device_write(f"Tensor.{op}", result)
            return self
        if result._c.device != "cpu":
            result = result.to("cpu")
        dst = self._writable(f"Tensor.{op}")
        dst[...] = result._c.numpy_raw()
        self._wrote()
        return self

    def copy_(self, src, non_blocking=False):
        if not isinstance(src, Tensor):
            from . import _creation

            src = _creation.tensor(src, dtype=self.dtype)
        if src.dtype is not self.dtype:
            src = F._cast(src, self.dtype)
        if tuple(src.shape) != tuple(self.shape):
            src = src.expand(list(self.shape))
            if self._c is None:
                src = src.contiguous() if src._c is not None else F._cast(src, self.dtype)
        return self._assign("copy_", src, check_cast=False)

    def fill_(self, value):
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                                   f"{value.ndim} dimensions.")
            if value._c is not None and self._c is not None:
                value = value.item()
        from ._creation import check_fill_value

        check_fill_value(value, self.dtype)
        if self._c is not None and current_trace() is None and builtins.any(
                st == 0 and n > 1 for n, st in zip(self._c.shape, self._c.strides)):
            # torch fills an expanded tensor (every element sharing memory gets the same value):
            # fill the elements it has, a view without the repeats
            sizes = [1 if st == 0 else n for n, st in zip(self._c.shape, self._c.strides)]
            self.as_strided(sizes, list(self._c.strides), self.storage_offset()).fill_(value)
            return self
        if self._c is not None and self._c.device != "cpu" and current_trace() is None:
            self._device_write("Tensor.fill_()", value)
            return self
        if self._c is not None and not isinstance(value, Tensor) and current_trace() is None:
            dst = self._writable("Tensor.fill_()")
            dst[...] = _value_array(value, self.dtype, "Tensor.fill_()")
            self._wrote()
            return self
        v = dispatch1("cast", [value], {"dtype": self.dtype.name})
        return self._assign("fill_", v.expand(list(self.shape)), check_cast=False)

    def zero_(self):
        return self.fill_(0)

    def _fill_from(self, value):
        """Writes `value` (a number, array-like or Tensor, broadcastable) into this tensor in place."""
        if isinstance(value, Tensor):
            self.copy_(value)
            return
        if self._c.device != "cpu":
            self._device_write("Tensor.copy_()", value)
            return
        dst = self._writable("Tensor.copy_()")
        dst[...] = np.broadcast_to(_value_array(value, self.dtype, "Tensor.copy_()"), dst.shape)
        self._wrote()

    def add_(self, other, *, alpha=1):
        return self._assign("add_", F.add(self, other, alpha=alpha))

    def sub_(self, other, *, alpha=1):
        return self._assign("sub_", F.sub(self, other, alpha=alpha))

    subtract_ = sub_

    def mul_(self, other):
        return self._assign("mul_", F.mul(self, other))

    multiply_ = mul_

    def div_(self, other, *, rounding_mode=None):
        return self._assign("div_", F.div(self, other, rounding_mode=rounding_mode))

    divide_ = div_
    true_divide_ = div_

    def pow_(self, exponent):
        return self._assign("pow_", F.pow(self, exponent))

    def clamp_(self, min=None, max=None):
        return self._assign("clamp_", F.clamp(self, min, max))

    clip_ = clamp_

    def clamp_min_(self, min):
        return self._assign("clamp_min_", F.clamp(self, min, None))

    def clamp_max_(self, max):
        return self._assign("clamp_max_", F.clamp(self, None, max))

    def masked_fill_(self, mask, value):
        return self._assign("masked_fill_", F.masked_fill(self, mask, value))

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    # ---- dtype conversion ---------------------------------------------------------------------

    def to(self, *args, **kwargs):
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        memory_format = kwargs.pop("memory_format", None)
        kwargs.pop("non_blocking", None)
        flags = [a for a in args if isinstance(a, builtins.bool)]  # torch's positional non_blocking, copy
        args = [a for a in args if not isinstance(a, builtins.bool)]
        if len(flags) > 1:
            kwargs.setdefault("copy", flags[1])
        if kwargs.pop("copy", False):  # torch's copy=True: a new tensor even when nothing converts
            out = self.to(*args, dtype=dtype, device=device, memory_format=memory_format, **kwargs)
            return out.clone() if out is self else out
        if memory_format is not None and memory_format is not D.preserve_format:
            out = self.to(*args, dtype=dtype, device=device)
            return out.contiguous(memory_format=memory_format)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
                device = a.device
            elif isinstance(a, (str, D.device)) and str(a).split(":")[0] in ("cpu", "cuda"):
                device = a
            else:
                dtype = a
        out = self
        if device is not None:
            out = out.cuda(device) if str(device).startswith("cuda") else out.cpu()
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

    def short(self):
        return self.to(D.int16)

    def char(self):
        return self.to(D.int8)

    def byte(self):
        return self.to(D.uint8)

    def bool(self):
        return self.to(D.bool_)

    def type_as(self, other):
        return self.to(other.dtype)

    def _new(self, fn, size, dtype, device, *args):
        from . import _creation

        return getattr(_creation, fn)(_sizes_arg(size), *args, dtype=dtype or self.dtype,
                                      device=device if device is not None else self.device)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return self._new("zeros", size, dtype, device)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return self._new("ones", size, dtype, device)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return self._new("empty", size, dtype, device)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        return self._new("full", (size,), dtype, device, fill_value)

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        from . import _creation

        return _creation.tensor(data, dtype=dtype or self.dtype, device=device if device is not None else self.device)

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
        # torch's: the reciprocal times the number (float32 2 / x is 2 * (1 / x), rounded twice)
        if isinstance(other, numbers.Real) and not isinstance(other, Tensor):
            return self.reciprocal() * other
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
from . import _indexing  # noqa: E402  (indexing helpers; they use Tensor)


# ---- methods mirroring the functions of flow._ops (one line each) ------------------------------


def _unpickle_tensor(dtype_name, shape, raw, device, is_parameter, requires_grad):
    dt = D.from_name(dtype_name)
    arr = np.frombuffer(raw, dtype=dt.np_dtype).reshape(shape).copy()
    t = Tensor._wrap(_C.Tensor.from_numpy(arr, dtype_name))
    if device != "cpu":
        t = t.to(device)
    if is_parameter:
        from .nn import Parameter

        return Parameter(t, requires_grad=requires_grad)
    return t


def _method(name, fn=None):
    """Tensor.<name>(...) = fn(self, ...); fn a function or the name of one in flow._ops (default:
    `name`)."""
    fn = getattr(F, fn or name) if fn is None or isinstance(fn, str) else fn

    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    m.__name__ = m.__qualname__ = name
    m.__doc__ = f"Tensor.{name}: see flow.{fn.__name__}."
    return m


for _name in ("erf", "log1p", "expm1", "sin", "cos", "floor", "ceil", "trunc", "fix", "sign", "reciprocal", "square",
              "logical_not", "bitwise_not", "isnan", "isinf", "isfinite", "round", "nan_to_num", "floor_divide",
              "remainder", "fmod", "logical_and", "logical_or", "logical_xor", "masked_fill", "max", "min",
              "argmax", "argmin", "prod", "any", "all", "var", "std", "norm", "logsumexp", "cumsum", "cumprod",
              "index_select", "gather", "take_along_dim", "matmul", "mm", "bmm", "mv", "dot", "outer", "addmm",
              "baddbmm", "silu", "gelu", "absolute", "triu", "tril", "sort", "argsort", "msort", "topk"):
    setattr(Tensor, _name, _method(_name))


def _flip(self, *dims):
    return F.flip(self, _sizes_arg(dims))


Tensor.flip = _flip


def _inplace_method(name, fn):
    """Tensor.<name>(...) writes fn(self, ...) into self; fn a function or a name in flow._ops."""
    fn = getattr(F, fn) if isinstance(fn, str) else fn

    def m(self, *args, **kwargs):
        return self._assign(name, fn(self, *args, **kwargs))

    m.__name__ = m.__qualname__ = name
    m.__doc__ = f"Tensor.{name}: in-place flow.{fn.__name__} (written into this tensor's storage)."
    return m


for _name in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg", "abs", "floor", "ceil", "trunc",
              "round", "sign", "reciprocal", "square", "erf", "sin", "cos", "log1p", "expm1", "nan_to_num",
              "floor_divide", "remainder", "fmod", "logical_not", "logical_and", "logical_or", "silu", "gelu",
              "cumsum", "triu", "tril"):
    setattr(Tensor, _name + "_", _inplace_method(_name + "_", _name))
del _name
_cumsum_ = Tensor.cumsum_


def _cumsum_bool_refused(self, *args, **kwargs):
    if self.dtype is D.bool_ and kwargs.get("dtype") is None:  # (its sum is int64, which bool cannot hold)
        raise NotImplementedError("\"cumsum_out_cpu\" not implemented for 'Bool'")
    return _cumsum_(self, *args, **kwargs)


Tensor.cumsum_ = _cumsum_bool_refused
Tensor.cumsum_.__name__ = Tensor.cumsum_.__qualname__ = "cumsum_"


Tensor.__matmul__ = lambda self, other: F.matmul(self, other) if isinstance(other, Tensor) else NotImplemented
Tensor.__rmatmul__ = lambda self, other: F.matmul(other, self) if isinstance(other, Tensor) else NotImplemented
Tensor.__floordiv__ = lambda self, other: F.floor_divide(self, other)
Tensor.__rfloordiv__ = lambda self, other: F._binary_op("floor_divide", other, self, reflected=True)
Tensor.__mod__ = lambda self, other: F.remainder(self, other)
Tensor.__rmod__ = lambda self, other: F._binary_op("remainder", other, self, reflected=True)
Tensor.__invert__ = lambda self: F.bitwise_not(self)
for _name, _op in (("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"), ("lshift", "bitwise_left_shift"),
                   ("rshift", "bitwise_right_shift")):
    setattr(Tensor, f"__{_name}__", lambda self, other, _op=_op: F._binary_op(_op, self, other))
    setattr(Tensor, f"__r{_name}__", lambda self, other, _op=_op: F._binary_op(_op, other, self, reflected=True))
    setattr(Tensor, f"__i{_name}__", lambda self, other, _op=_op: self._assign(_op + "_", F._binary_op(_op, self, other)))
    setattr(Tensor, _op, _method(_op))
    setattr(Tensor, _op + "_", _inplace_method(_op + "_", _op))
del _name, _op
Tensor.__imatmul__ = lambda self, other: self._assign("__imatmul__", F.matmul(self, other))
Tensor.__ifloordiv__ = lambda self, other: self._assign("__ifloordiv__", F.floor_divide(self, other))
Tensor.__imod__ = lambda self, other: self._assign("__imod__", F.remainder(self, other))
Tensor.__ipow__ = lambda self, other: self._assign("__ipow__", F.pow(self, other))
