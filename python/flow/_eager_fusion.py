"""Eager calls of flow's composite functions run as one compiled graph.

Note: a few torch functions are written in flow as several ops: max_pool2d is a maximum over its
window taps (strided slices padded with -inf), avg_pool2d a sum of taps divided by its divisor,
interpolate a gather, a multiply and an add per tap and axis.
Eagerly, op by op, each tap and each maximum was a kernel writing a tensor of the output's size:
an NHWC 3x3 max pool of a [16, 64, 128, 128] float32 input took 42 ms against torch eager's 27,
where @flow.jit fuses it into one 5 ms kernel. ``fused_in_eager`` gives such a function a private
``flow.jit``: an eager call with concrete tensors runs the compiled graph of the function, one
variant per argument signature (shapes, dtypes, strides, device, the other arguments' values), its
kernels shared through the kernel cache with every other graph of the same loop nests. Inside a
trace the function is traced inline as before; under ``flow.autocast`` (whose eager casts apply op
by op) and for empty tensors it runs op by op. Results are those of the ops run one by one: a fused chain rounds after
every op as eager does (docs/decisions.md). The variants of one function are capped
(``_MAX_VARIANTS``, oldest dropped first), so code calling it with ever new shapes keeps its memory
bounded; a dropped signature traces again (its kernels come from the cache).
"""
import functools
import threading

from . import amp as _amp
from ._dispatch import current_trace

_MAX_VARIANTS = 64
_LOCK = threading.Lock()  # (data-loading threads may resize images at once)


def fused_in_eager(fn):
    """`fn` (a composite of flow ops, pure, returning tensors) as one compiled graph per eager call.
    The wrapper's ``jitted`` is its flow.jit (None until the first fused call)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from ._tensor import Tensor

        if current_trace() is not None or _amp._state():
            return fn(*args, **kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        if not tensors or any(t._c is None or t._c.numel() == 0 for t in tensors):
            return fn(*args, **kwargs)  # (a tracer outside its trace: fn raises flow's error)
        with _LOCK:
            if wrapper.jitted is None:
                from ._jit import JitFunction

                wrapper.jitted = JitFunction(fn)
            jitted = wrapper.jitted
        out = jitted(*args, **kwargs)
        with _LOCK:
            variants = jitted._variants
            while len(variants) > _MAX_VARIANTS:
                del variants[next(iter(variants))]
        return out

    wrapper.jitted = None
    return wrapper
