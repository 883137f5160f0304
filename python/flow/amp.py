"""``flow.autocast``: automatic mixed precision as ``torch.autocast`` defines it (dsl/autocast.h).

Inside ``with flow.autocast("cuda", dtype=flow.float16):`` matrix products and convolutions on
that device type run in the lower-precision type, the device's list of precision-sensitive ops
run in float32, and other ops follow their inputs. The lists are torch's, per device type, and
live in C++ (``_C.autocast_class``), shared with ``flow.jit(fn, amp=...)``.

- Eager ops: each op's tensor arguments are cast before it runs (``cast_args``, called by the
  dispatcher).
- Traces: a ``with flow.autocast(...)`` block inside a jitted function sets the policy of the graph
  being built for the block; a jitted function *called* inside the block traces under it, and the
  policy is part of its guard key (the same call outside the block is another variant).
- ``enabled=False`` turns autocast off for the block, nested inside an enabled one.

Defaults follow torch: float16 on "cuda", bfloat16 on "cpu".
"""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Dict, Optional

from . import _C

__all__ = ["autocast", "autocast_op", "is_autocast_enabled", "get_autocast_dtype"]

_DEFAULT = {"cuda": "float16", "cpu": "bfloat16"}
_local = threading.local()


def _state() -> Dict[str, Optional[str]]:
    """device type -> the active autocast dtype name (None: off) on this thread."""
    s = getattr(_local, "state", None)
    if s is None:
        s = _local.state = {}
    return s


def dtype_name(dtype: Any, what: str = "flow.autocast: dtype") -> str:
    """'float16' or 'bfloat16' from a name ("half", "bf16" too) or a flow or torch dtype; ValueError
    naming `what` otherwise."""
    name = dtype if isinstance(dtype, str) else str(getattr(dtype, "name", dtype)).replace("torch.", "")
    name = {"half": "float16", "fp16": "float16", "bf16": "bfloat16"}.get(name, name)
    if name not in ("float16", "bfloat16"):
        raise ValueError(f"{what} must be float16 or bfloat16, got {dtype!r}")
    return name


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    return _state().get(device_type) is not None


def get_autocast_dtype(device_type: str):
    from . import _dtype

    return getattr(_dtype, _state().get(device_type) or _DEFAULT[device_type])


class autocast:
    """Context manager (and decorator) like ``torch.autocast(device_type, dtype=None, enabled=True)``."""

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True, cache_enabled: Optional[bool] = None):
        if device_type not in _DEFAULT:
            raise ValueError(f"flow.autocast: device_type must be 'cuda' or 'cpu', got {device_type!r}")
        self.device_type = device_type
        self.fast_dtype = dtype_name(dtype) if dtype is not None else _DEFAULT[device_type]
        self.enabled = bool(enabled)
        self._saved = []  # (previous thread state, previous graph policy or the trace) per __enter__

    def __enter__(self) -> "autocast":
        from ._dispatch import current_trace

        state = _state()
        prev = state.get(self.device_type)
        state[self.device_type] = self.fast_dtype if self.enabled else None
        ctx = current_trace()
        graph_prev = None
        if ctx is not None:
            graph_prev = ctx.graph.autocast
            if self.device_type == trace_device(ctx):
                ctx.graph.set_autocast(self.fast_dtype if self.enabled else None, self.device_type)
        self._saved.append((prev, ctx, graph_prev))
        return self

    def __exit__(self, *exc) -> bool:
        prev, ctx, graph_prev = self._saved.pop()
        state = _state()
        if prev is None:  # absent and None both mean off; an empty state keeps dispatch on its fast path
            state.pop(self.device_type, None)
            if not any(state.values()):
                _cast_cache().clear()  # the cached parameter casts live while autocast is on
        else:
            state[self.device_type] = prev
        if ctx is not None:
            if graph_prev is None:
                ctx.graph.set_autocast(None)
            else:
                ctx.graph.set_autocast(graph_prev[0], graph_prev[1])
        return False

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapped


def trace_device(ctx) -> str:
    """The device type a trace's ops run on, whose autocast lists apply (set by flow.jit)."""
    return getattr(ctx, "autocast_device", None) or ("cuda" if ctx.device is not None else "cpu")


def _tensors(args, kwargs):
    from ._tensor import Tensor

    return [a for a in list(args) + list(kwargs.values()) if isinstance(a, Tensor)]


def _active(args, kwargs):
    """(device type, autocast dtype name) that applies to a call with these arguments, or None."""
    from ._dispatch import current_trace

    ctx = current_trace()
    if ctx is not None:
        p = ctx.graph.autocast
        return None if p is None else (p[1], p[0])
    ts = _tensors(args, kwargs)
    if not ts or not _state():
        return None
    device = "cuda" if ts[0].is_cuda else "cpu"
    amp = _state().get(device)
    return None if amp is None else (device, amp)


@contextlib.contextmanager
def _suspended(device: str):
    """Autocast off (eagerly, or in the trace's graph) for the body of a function with its own policy."""
    from ._dispatch import current_trace

    ctx = current_trace()
    if ctx is not None:
        prev = ctx.graph.autocast
        ctx.graph.set_autocast(None)
        try:
            yield
        finally:
            if prev is None:
                ctx.graph.set_autocast(None)
            else:
                ctx.graph.set_autocast(prev[0], prev[1])
        return
    state = _state()
    prev = state.pop(device, None)
    try:
        yield
    finally:
        if prev is not None:
            state[device] = prev


def autocast_op(name):
    """Gives a torch function that flow writes in Python (mm, addmm, mse_loss, ...) torch.autocast's
    policy for that function, as torch's dispatcher does: its tensor arguments are cast by the
    function's class (``_C.autocast_class(name, device)``) and autocast is off inside its body, so
    the primitives it is built of do not apply their own lists. `name` may be a function of the call's
    arguments (pad's class depends on its mode)."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            active = _active(args, kwargs)
            if active is None:
                return fn(*args, **kwargs)
            device, amp = active
            cls = _C.autocast_class(name(*args, **kwargs) if callable(name) else name, device)
            args, kwargs = _cast_call(args, kwargs, cls, amp)
            with _suspended(device):
                return fn(*args, **kwargs)
        return wrapped
    return deco


def _cast_call(args, kwargs, cls, amp):
    from . import _dtype
    from ._tensor import Tensor

    floats = [a.dtype.name for a in _tensors(args, kwargs) if a.dtype.name in ("float32", "float16", "bfloat16")]
    widest = ("float32" if "float32" in floats or {"float16", "bfloat16"} <= set(floats)
              else "bfloat16" if "bfloat16" in floats else "float16")

    def cast(a):
        if not isinstance(a, Tensor) or a.dtype.name not in ("float32", "float16", "bfloat16"):
            return a
        want = {"lower_precision_fp": amp, "promote": widest,
                "fp32": "float32"}.get(cls, a.dtype.name)
        return a if want == a.dtype.name else _to(a, want)

    if cls == "none":
        return args, kwargs
    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def cast_args(op: str, args: list) -> list:
    """Eager autocast: `args` (flow Tensors and Python scalars) cast by graph op `op`'s class on the
    device type of its tensors, when autocast is on for that device type on this thread."""
    if not _state() or any(getattr(a, "_c", 0) is None for a in args):  # tracers: the dispatcher raises
        return args
    active = _active(args, {})
    if active is None:
        return args
    device, amp = active
    return list(_cast_call(tuple(args), {}, _C.autocast_class(op, device), amp)[0])


def _cast_cache() -> dict:
    c = getattr(_local, "cast_cache", None)
    if c is None:
        c = _local.cast_cache = {}
    return c


def _to(a, want: str):
    """`a` cast to dtype `want`. Eagerly, a parameter's cast (a tensor that requires grad, as
    torch caches them) is kept while autocast is on and reused until the parameter is written (its
    version changes): a model run repeatedly inside one flow.autocast casts its weights once."""
    from . import _dtype
    from ._dispatch import current_trace

    if a._c is None or current_trace() is not None or not getattr(a, "requires_grad", False):
        return a.to(getattr(_dtype, want))
    cache = _cast_cache()
    key = (id(a), want)
    hit = cache.get(key)
    if hit is not None and hit[0] is a and hit[1] == a._version:
        return hit[2]
    c = a.to(getattr(_dtype, want))
    cache[key] = (a, a._version, c)  # holds `a`: its id cannot be reused while the entry lives
    return c
