"""Eager calls of flow's composite functions run as one compiled graph.

Note: some torch functions are written in flow as several ops: max_pool2d is a maximum over its
window taps (strided slices padded with -inf), avg_pool2d a sum of taps, interpolate a gather, a
multiply and an add per tap and axis, grid_sample 81 ops. Eagerly, op by op, each was a kernel
writing a tensor of the output's size: an NHWC 3x3 max pool of a [16, 64, 128, 128] float32 input
took 42 ms against torch eager's 27, where @flow.jit fuses it into one 5 ms kernel.

``fused_in_eager`` gives such a function a private ``flow.jit``: an eager call with concrete
tensors runs the compiled graph of the function, one variant per argument signature (shapes,
dtypes, strides, device, the other arguments' values); the kernels are shared through the kernel
cache with every graph of the same loop nests. Results equal op-by-op ones: a fused chain rounds
after every op as eager does (docs/decisions.md). Inside a trace the function is traced inline;
under ``flow.autocast`` (whose eager casts apply op by op) and for empty tensors it runs op by op.
A function's variants are capped (``_MAX_VARIANTS``, the least recently used dropped first), so
code calling it with ever new shapes keeps its memory bounded; a dropped signature traces again.
Float arguments are kernel constants: past ``_MAX_SCALAR_VALUES`` distinct ones, new values run op
by op (each would compile). Two or more inputs of rank 2+ of which one is not contiguous run op by
op too, so the result's strides follow torch's rule for mixed layouts. A
signature whose trace needs a tensor's value on the host (a TraceError: interpolate given sizes as
tensors) runs op by op from then on.

Only pure functions qualify: no in-place writes into arguments (a trace would not write them
back), no warnings (a trace warns once, from the wrong frame) and no checks of tensor values on
the host (skipped while tracing; flow's losses run them eagerly). And only where it pays, measured
eagerly against op by op (ad-hoc, 2-core Xeon, float32): grid_sample of [8, 32, 64, 64] 23.0 ->
4.6 ms, lp_pool2d 15.2 -> 0.5 ms, logsigmoid of 4M 14.3 -> 5.0 ms, cosine_similarity 11.0 -> 2.6
ms, unfold 2.2 -> 1.0 ms, local_response_norm 12.3 -> 9.9 ms, adaptive pools of unequal windows
(two kernels, one per axis); later (2026-12-03) instance_norm without running statistics of [8, 64,
64, 64] 15.1 -> 1.1 ms (torch 8.5), linalg.vector_norm of [4096, 768] over dim -1 1.89 -> 0.41 ms,
normalize of the same 1.76 -> 1.55 ms (one kernel each, from 8, 3 and 3); x ** 3 and x ** -2 of 4M
(pow's float32 x * x * x and 1 / (x * x)) 3.8 -> 1.4 and 2.9 -> 1.2 ms in float32, 7.2 -> 2.0 and
5.8 -> 2.4 ms in float16 (bench/pow_exponents.py, from 2 and 4 kernels); selu, celu, softsign,
softshrink, hardshrink, tanhshrink, threshold, glu, prelu, logaddexp, addcmul, addcdiv, lerp, frac,
isclose, logit, xlogy and sinc (2-11 kernels each op by op) 1.2-6x faster on [2048, 2048] float32
(bench/eager_composites.py: logaddexp 33.3 -> 5.7 ms), and on [16, 256] within 8 us or faster;
mse_loss, l1_loss, huber_loss, smooth_l1_loss and kl_div (their terms fused into the reduction)
3.5-8x faster on 4M (mse_loss 5.3 -> 1.5 ms), 11 us slower to 3.8x faster on 4K. cross_entropy and
binary_cross_entropy_with_logits gained nothing (their reductions stay kernels of their own) and
nll_loss lost the call's overhead (0.12 -> 0.16 ms): they run op by op.
"""
import functools
import threading

from . import amp as _amp
from ._dispatch import current_trace
from ._errors import TraceError
from ._tensor import Tensor

_MAX_VARIANTS = 64
# A float argument is a constant of the compiled kernel, so each new value traces and compiles
# again (~60-80 ms): a function seeing more distinct float arguments than this (an optimizer's
# addcdiv with a new step size each call) runs op by op for new ones, as eager ops take scalars at
# run time. (Integers, strings and tuples are sizes, dims and modes: structure, not data.)
_MAX_SCALAR_VALUES = 8
_LOCK = threading.Lock()  # (data-loading threads may resize images at once)


def _float_key(args, kwargs):
    """The call's float arguments, told apart as the kernels tell them (-0.0 from 0.0, NaNs alike)."""
    return tuple(v.hex() for v in (*args, *kwargs.values()) if type(v) is float)


def _mixed_layouts(tensors):
    """Whether two or more tensors of rank 2 or more include a non-contiguous one: torch's output
    layout then follows the inputs' strides op by op (channels-last beside contiguous), which a
    compiled graph's contiguous result would not."""
    ranked = [t for t in tensors if t._c.ndim >= 2]
    return len(ranked) >= 2 and not all(t._c.is_contiguous() for t in ranked)


def _signature(jitted, args, kwargs):
    """The key `jitted` files a call's variant under (argument structure, shapes, dtypes, strides)."""
    from ._jit import _flatten_call

    return jitted._key(*_flatten_call(args, kwargs))


def fused_in_eager(fn):
    """`fn` (a composite of flow ops, pure, returning tensors) as one compiled graph per eager call.
    The wrapper's ``jitted`` is its flow.jit (None until the first fused call); ``unfusable`` holds
    the signatures whose trace needed tensor values on the host (they run op by op)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if current_trace() is not None or _amp._state():
            return fn(*args, **kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        if not tensors or any(t._c is None or t._c.numel() == 0 for t in tensors) or _mixed_layouts(tensors):
            return fn(*args, **kwargs)  # (a tracer outside its trace: fn raises flow's error)
        scalars = _float_key(args, kwargs)
        if scalars and scalars not in wrapper.scalar_values:
            if len(wrapper.scalar_values) >= _MAX_SCALAR_VALUES:
                return fn(*args, **kwargs)
            wrapper.scalar_values.add(scalars)
        jitted = wrapper.jitted
        if jitted is None:
            with _LOCK:  # (the lock only for the first call: later ones read the attribute)
                if wrapper.jitted is None:
                    from ._jit import JitFunction  # (not at import: flow._jit imports flow.nn)

                    created = JitFunction(fn)
                    created._max_variants = _MAX_VARIANTS
                    wrapper.jitted = created
                jitted = wrapper.jitted
        if wrapper.unfusable and _signature(jitted, args, kwargs) in wrapper.unfusable:
            return fn(*args, **kwargs)
        try:
            out = jitted(*args, **kwargs)
        except TraceError:  # these arguments need tensor values on the host: op by op
            with _LOCK:
                if len(wrapper.unfusable) >= _MAX_VARIANTS:
                    wrapper.unfusable.clear()
                wrapper.unfusable.add(_signature(jitted, args, kwargs))
            return fn(*args, **kwargs)
        return out

    wrapper.jitted = None
    wrapper.unfusable = set()
    wrapper.scalar_values = set()  # the float arguments fused so far (at most _MAX_SCALAR_VALUES)
    return wrapper
