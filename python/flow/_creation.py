"""Tensor creation: flow.tensor, as_tensor, from_numpy, zeros/ones/full/empty(_like), arange,
rand/randn/randint and manual_seed. Data is built with numpy and copied into fresh aligned
storage; dtype inference follows torch (Python floats -> float32, ints -> int64, bools -> bool;
numpy arrays and torch tensors keep their dtype). Torch tensors are converted without importing
torch: ``.detach().cpu()``, then ``.numpy()`` (bfloat16 through an int16 view, bit-exact).
"""
import builtins
import math
import numbers
import zlib

import numpy as np

from . import _C
from . import _dtype as D
from ._dispatch import dispatch1
from ._tensor import Tensor, _sizes_arg

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
           "full_like", "empty_like", "arange", "rand", "randn", "randint", "manual_seed", "is_tensor", "linspace",
           "eye", "rand_like", "randn_like", "randint_like", "scalar_tensor"]

from ._dispatch import current_trace
from ._errors import TraceError
from ._random import default_generator, np_rng


def _place(t, device):
    """Moves a freshly created (CPU) tensor to `device` when one is asked for."""
    if device is None or str(device).split(":")[0] == "cpu":
        return t
    return t.cuda(device)

def manual_seed(seed):
    """Seeds flow's default generator (rand, randn, randint, nn.init, ...) and the in-graph
    generator (dropout, and random draws under @flow.jit). Returns the default generator."""
    default_generator.manual_seed(seed)
    # Reseed the in-graph counters in place: compiled functions hold these very tensors.
    for key, t in _counter_states.items():
        t.copy_(_from_array(_counter_start(key), D.int64).to(t.device))
    return default_generator


# The in-graph generator (dsl/ops/random.cpp): one 0-dim int64 counter per device, advanced by each
# draw. Under @flow.jit the counter is a captured tensor and its advance a mutation, so a compiled
# function draws fresh numbers on every call.
_counter_states = {}


def _counter_start(key):
    """A counter's value after manual_seed, from the seed and the device alone. Drawn from the
    default generator instead, it shifted that generator's stream by one draw per counter, so the
    same seed gave other weights in a process that had used dropout than in a fresh one."""
    derived = np.random.default_rng([default_generator.initial_seed(), zlib.crc32(key.encode())])
    return np.array(derived.integers(0, 2**31 - 1), dtype=np.int64)


def _counter_state(device):
    key = str(device)
    t = _counter_states.get(key)
    if t is None:
        t = _place(_from_array(_counter_start(key), D.int64), device)
        _counter_states[key] = t
    return t


def counter_rand(shape, device="cpu"):
    """Uniform [0, 1) float32 of `shape` from the in-graph counter-based generator; traceable."""
    state = _counter_state(device)
    u = dispatch1("rand_uniform", [state], {"shape": [int(s) for s in shape]})
    state.add_(1)
    return u


def is_tensor(x):
    return isinstance(x, Tensor)


def _is_torch_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "dtype")


def _from_array(arr, dtype):
    """A new flow tensor holding numpy array `arr` converted to flow dtype `dtype`."""
    if dtype is D.bfloat16:
        if arr.dtype == np.bool_:
            arr = arr.astype(np.float32)
        return Tensor._wrap(_C.Tensor.from_numpy(D.f32_to_bf16_bits(arr.astype(np.float32)), "bfloat16"))
    if arr.dtype != dtype.np_dtype:
        with np.errstate(invalid="ignore", over="ignore"):
            if dtype.np_dtype.kind in "iu" and arr.dtype.kind == "f":
                arr = np.trunc(arr)  # torch converts float -> int by truncation (numpy does too)
            arr = arr.astype(dtype.np_dtype)
    return Tensor._wrap(_C.Tensor.from_numpy(np.asarray(arr)))


_C_TYPE_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t"}


def check_fill_value(value, dtype):
    """torch's check of a fill value (masked_fill, index_fill, fill_, pad: a number or a concrete
    0-dim CPU tensor's) against an integer dtype, with its message naming the C type ("uint8_t").
    A traced or device tensor is not read (torch's CUDA kernels take the tensor without a check)."""
    if dtype.name not in _C_TYPE_NAMES:
        return
    if isinstance(value, Tensor):
        if value._c is None or value.device.type != "cpu":
            return
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return
    _check_fits(np.asarray([value]), dtype, _C_TYPE_NAMES[dtype.name])


def _check_fits(arr, dtype, type_name=None):
    """torch's checked conversion of Python numbers to an integer dtype: "value cannot be converted
    to type uint8 without overflow". Integers must lie in the type's range (an unsigned type also
    takes negatives down to -max, which wrap); floats in [min, max + 1), truncating into range."""
    if dtype.is_floating_point or dtype is D.bool_ or arr.size == 0 or arr.dtype.kind not in "iuf":
        return
    info = np.iinfo(dtype.np_dtype)
    lo, hi = arr.min(), arr.max()
    if arr.dtype.kind == "f":
        bad = not (np.isfinite(lo) and np.isfinite(hi)) or lo < info.min or hi >= float(info.max) + 1
    else:
        bad = int(lo) < (-info.max if info.min == 0 else info.min) or int(hi) > info.max
    if bad:
        raise RuntimeError(f"value cannot be converted to type {type_name or dtype.name} without overflow")


def _torch_to_flow(t, dtype):
    t = t.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        bits = t.contiguous().view(_torch_int16(t)).numpy().view(np.uint16)
        src = Tensor._wrap(_C.Tensor.from_numpy(bits, "bfloat16"))
        return src if dtype is None or dtype is D.bfloat16 else src.to(dtype)
    arr = t.numpy()
    src_dtype = D.to_dtype(arr.dtype)
    return _from_array(arr, dtype or src_dtype)


def _torch_int16(t):
    import sys

    return sys.modules[type(t).__module__.split(".")[0]].int16


def _flow_tensor_copy(t, dtype):
    t._need_data("flow.tensor(<Tensor>)")
    src = t if dtype is None else t.to(dtype)
    return Tensor._wrap(src._c.contiguous()) if src is t else src.contiguous()


def _infer_from_python(data, dtype=None):
    """Python data (scalars, nested lists/tuples of numbers or 0-dim tensors) -> numpy array."""
    if isinstance(data, (list, tuple)):
        data = [(_unwrap_scalar(x) if isinstance(x, Tensor) else x) for x in data]
    arr = np.array(data)
    # Python ints past int64 make numpy's array uint64, objects, or (beside floats) float64 with a value
    # that large; only then are the leaves walked. torch reads such ints as doubles for a floating or
    # bool dtype, or beside floats with no dtype given; otherwise it unpacks them as int64 and refuses.
    maybe_past = arr.dtype.kind in "uO" or (arr.dtype.kind == "f" and bool(np.any(np.abs(arr) >= 2.0**63)))
    if maybe_past and _has_int_past_int64(data):
        reads_doubles = dtype.is_floating_point or dtype is D.bool_ if dtype is not None else \
            builtins.any(isinstance(v, builtins.float) for v in _leaves(data))
        if not reads_doubles:
            raise ValueError("Overflow when unpacking long long")
        return np.array(data, dtype=np.float64)
    if arr.dtype == object:
        raise TypeError(f"flow.tensor: could not infer dtype of {type(data).__name__} data")
    return arr


def _leaves(data):
    if isinstance(data, (list, tuple)):
        for d in data:
            yield from _leaves(d)
    else:
        yield data


def _has_int_past_int64(data) -> bool:
    return builtins.any(isinstance(v, builtins.int) and not isinstance(v, builtins.bool) and
                        not -2**63 <= v < 2**63 for v in _leaves(data))


def _unwrap_scalar(t):
    if t.ndim == 0:
        return t.item()
    return t.tolist()


def _tensor_cpu(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """flow.tensor(data, dtype=None): a new tensor copying `data`."""
    dtype = D.to_dtype(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
        return _flow_tensor_copy(data, dtype)
    if _is_torch_tensor(data):
        return _torch_to_flow(data, dtype)
    if isinstance(data, (np.ndarray, np.generic)):
        arr = np.asarray(data)
        return _from_array(arr, dtype or D.to_dtype(arr.dtype))
    if isinstance(data, str) or not isinstance(data, (numbers.Number, list, tuple, np.bool_)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    arr = _infer_from_python(data, dtype)
    if dtype is not None:
        _check_fits(arr, dtype)
    if dtype is None and _first_leaf_is_numpy(data):  # numpy scalars keep their type, as in torch
        return _from_array(arr, D.to_dtype(arr.dtype))
    return _from_array(arr, dtype or D.promote_numpy_default(arr.dtype))


def _first_leaf_is_numpy(data):
    while isinstance(data, (list, tuple)) and data:
        data = data[0]
    return isinstance(data, np.generic)


def _as_tensor_cpu(data, dtype=None, device=None):
    """flow.as_tensor: a flow tensor from a flow tensor (returned as is when the dtype matches), a
    numpy array, a torch tensor or Python data."""
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    return tensor(data, dtype=dtype)


def from_numpy(ndarray):
    """A flow tensor copying a numpy array (its dtype kept; unlike torch, memory is not shared)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return Tensor._wrap(_C.Tensor.from_numpy(ndarray))


def _creation_dtype(dtype, default=D.float32):
    return default if dtype is None else D.to_dtype(dtype)


def _shape(size, fn):
    try:
        shape = _sizes_arg(size)
    except TypeError:
        raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, but found {size!r}") from None
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")
    return shape


def _empty_cpu(*size, dtype=None, device=None, requires_grad=False, out=None):
    return Tensor._wrap(_C.Tensor.empty(_shape(size, "empty"), _creation_dtype(dtype).name))


def _full_cpu(size, fill_value, *, dtype=None, device=None, requires_grad=False, out=None):
    if dtype is None:
        dtype = (D.bool_ if isinstance(fill_value, (builtins.bool, np.bool_))
                 else D.int64 if isinstance(fill_value, numbers.Integral) else D.float32)
    t = empty(_shape((size,), "full"), dtype=dtype)
    if isinstance(fill_value, numbers.Number):
        _check_fits(np.asarray(fill_value), D.to_dtype(dtype))
    t._fill_from(fill_value)
    return t


def _zeros_cpu(*size, dtype=None, device=None, requires_grad=False, out=None):
    return full(_shape(size, "zeros"), 0, dtype=_creation_dtype(dtype))


def _ones_cpu(*size, dtype=None, device=None, requires_grad=False, out=None):
    return full(_shape(size, "ones"), 1, dtype=_creation_dtype(dtype))


def _empty_like_cpu(input, *, dtype=None, device=None):
    return empty(list(input.shape), dtype=dtype or input.dtype)


def _zeros_like_cpu(input, *, dtype=None, device=None):
    return zeros(list(input.shape), dtype=dtype or input.dtype)


def _ones_like_cpu(input, *, dtype=None, device=None):
    return ones(list(input.shape), dtype=dtype or input.dtype)


def _full_like_cpu(input, fill_value, *, dtype=None, device=None):
    return full(list(input.shape), fill_value, dtype=dtype or input.dtype)


def _arange_cpu(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None):
    if end is None:
        start, end = 0, start
    # 0-d tensors as their Python numbers (an int64 tensor gives an int64 range, as torch's)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not math.isfinite(step):
        raise RuntimeError(f"step must be finite but got {step}")
    for v in (start, end):
        if not math.isfinite(v):
            raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    all_int = builtins.all(isinstance(v, numbers.Integral) for v in (start, end, step))
    dt = _creation_dtype(dtype, D.int64 if all_int else D.float32)
    arr = np.arange(start, end, step, dtype=np.int64 if all_int else np.float64)
    return _from_array(arr, dt)


def _traced_draw(fn, generator):
    """Whether a random draw runs under @flow.jit (then it uses the in-graph generator)."""
    if current_trace() is None:
        return False
    if generator is not None:
        raise TraceError(f"flow.jit: cannot trace {fn}(generator=...): a flow.Generator draws on the host, once at "
                         "trace time; under flow.jit draws come from flow's in-graph generator (seeded by "
                         "flow.manual_seed), so drop the generator argument")
    return True


def uniform_draw(shape, dtype, device, generator, fn):
    """Uniform [0, 1) numbers of `dtype` on `device`: from the host generator eagerly, from the
    in-graph generator under @flow.jit (24 random bits: float32 numbers, widened for float64)."""
    if _traced_draw(fn, generator):
        return counter_rand(shape, device or "cpu").to(dtype)
    u = np_rng(generator).random(shape)
    if dtype is not D.float64:
        # As many random bits as the type holds (torch's uniform does the same): a float64 draw
        # rounded to float32 or a half type could round up to 1.0 (a float16 one in 2^12 draws).
        bits = _UNIFORM_BITS[dtype]
        u = np.floor(u * 2.0 ** bits) * 2.0 ** -bits
    return _place(_from_array(u, dtype), device)


_UNIFORM_BITS = {D.float32: 24, D.float16: 11, D.bfloat16: 8}  # significand bits


def normal_draw(shape, dtype, device, generator, fn):
    """Standard normal numbers of `dtype` on `device`. Under @flow.jit: Box-Muller over two in-graph
    uniform draws, computed in float32."""
    if _traced_draw(fn, generator):
        u1, u2 = counter_rand(shape, device or "cpu"), counter_rand(shape, device or "cpu")
        z = ((1.0 - u1).log() * -2.0).sqrt() * (u2 * (2.0 * np.pi)).cos()
        return z.to(dtype)
    return _place(_from_array(np_rng(generator).standard_normal(shape), dtype), device)


def rand(*size, dtype=None, device=None, generator=None, requires_grad=False):
    dt = _creation_dtype(dtype)
    if not dt.is_floating_point:
        raise NotImplementedError(f'"check_uniform_bounds" not implemented for \'{dt._torch_short}\'')
    return uniform_draw(_shape(size, "rand"), dt, device, generator, "rand")


def randn(*size, dtype=None, device=None, generator=None, requires_grad=False):
    dt = _creation_dtype(dtype)
    if not dt.is_floating_point:
        raise NotImplementedError(f'"normal_kernel_cpu" not implemented for \'{dt._torch_short}\'')
    return normal_draw(_shape(size, "randn"), dt, device, generator, "randn")


def randint(low, high=None, size=None, *, dtype=None, device=None, generator=None, requires_grad=False):
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    if size is None:
        raise TypeError("randint(): missing required argument 'size'")
    if high is None:
        low, high = 0, low
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    shape, dt = _shape((size,), "randint"), _creation_dtype(dtype, D.int64)
    if _traced_draw("randint", generator):  # floor(low + u * span) in float64 from a float32 uniform
        u = counter_rand(shape, device or "cpu").to(D.float64)
        return (u * builtins.float(high - low) + builtins.float(low)).floor().to(dt)
    return _place(_from_array(np_rng(generator).integers(low, high, size=shape), dt), device)


def tensor(*args, device=None, **kwargs):
    return _place(_tensor_cpu(*args, **kwargs), device)


tensor.__doc__ = _tensor_cpu.__doc__


def as_tensor(*args, device=None, **kwargs):
    return _place(_as_tensor_cpu(*args, **kwargs), device)


as_tensor.__doc__ = _as_tensor_cpu.__doc__


def empty(*args, device=None, **kwargs):
    return _place(_empty_cpu(*args, **kwargs), device)


empty.__doc__ = _empty_cpu.__doc__


def full(*args, device=None, **kwargs):
    return _place(_full_cpu(*args, **kwargs), device)


full.__doc__ = _full_cpu.__doc__


def zeros(*args, device=None, **kwargs):
    return _place(_zeros_cpu(*args, **kwargs), device)


zeros.__doc__ = _zeros_cpu.__doc__


def ones(*args, device=None, **kwargs):
    return _place(_ones_cpu(*args, **kwargs), device)


ones.__doc__ = _ones_cpu.__doc__


def arange(*args, device=None, **kwargs):
    return _place(_arange_cpu(*args, **kwargs), device)


arange.__doc__ = _arange_cpu.__doc__


def empty_like(input, *args, device=None, **kwargs):
    return _place(_empty_like_cpu(input, *args, **kwargs), device if device is not None else getattr(input, "device", None))


def zeros_like(input, *args, device=None, **kwargs):
    return _place(_zeros_like_cpu(input, *args, **kwargs), device if device is not None else getattr(input, "device", None))


def ones_like(input, *args, device=None, **kwargs):
    return _place(_ones_like_cpu(input, *args, **kwargs), device if device is not None else getattr(input, "device", None))


def full_like(input, *args, device=None, **kwargs):
    return _place(_full_like_cpu(input, *args, **kwargs), device if device is not None else getattr(input, "device", None))


def _linspace_cpu(start, end, steps, *, dtype=None, device=None, requires_grad=False, out=None):
    """torch.linspace: `steps` points from start to end; the first half counted from start, the
    second from end (torch's formula, so both ends are exact)."""
    if isinstance(steps, builtins.bool) or not isinstance(steps, numbers.Integral):
        raise TypeError(f"linspace(): argument 'steps' must be int, not {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _creation_dtype(dtype)
    if steps == 1:
        arr = np.array([start], dtype=np.float64)
    else:
        calc = np.float64 if dt is D.float64 or not dt.is_floating_point else np.float32
        i = np.arange(steps, dtype=calc)
        step = (calc(end) - calc(start)) / calc(max(steps - 1, 1))
        half = steps // 2
        arr = np.where(i < half, calc(start) + step * i, calc(end) - step * (calc(steps - 1) - i))
    return _from_array(arr, dt)


def _eye_cpu(n, m=None, *, dtype=None, device=None, requires_grad=False, out=None):
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"n must be greater or equal to 0, got {n if n < 0 else m}")
    return _from_array(np.eye(n, n if m is None else m), _creation_dtype(dtype))


def linspace(*args, device=None, **kwargs):
    return _place(_linspace_cpu(*args, **kwargs), device)


linspace.__doc__ = _linspace_cpu.__doc__


def eye(*args, device=None, **kwargs):
    return _place(_eye_cpu(*args, **kwargs), device)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    return full((), s, dtype=_creation_dtype(dtype), device=device)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    return rand(list(input.shape), dtype=dtype or input.dtype, device=device if device is not None else input.device)


def randn_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    return randn(list(input.shape), dtype=dtype or input.dtype, device=device if device is not None else input.device)


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    if high is None:
        low, high = 0, low
    return randint(low, high, list(input.shape), dtype=dtype or input.dtype,
                   device=device if device is not None else input.device)
