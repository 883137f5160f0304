"""flow.nn.functional: torch.nn.functional's layers as compositions of core ops.

Every function calls the one dispatcher (``flow._dispatch``) directly, views included, so each one
works both eagerly and inside a ``@flow.jit`` trace. Composites (the pattern each one lowers to):

- conv1d: conv2d over a unit height dim; max_pool: the maximum of the window taps, each a strided
  slice of the input padded with -inf to the output size (no padded copy of the input; separable
  for windows over 16 elements); avg_pool: the sum of the same taps padded with 0, divided by
  torch's divisor (a scalar, or an [OH, OW] table for count_include_pad=False and ceil_mode);
  adaptive pools: a window pool when the size divides, else per-output slices + cat (torch's
  start/end formula);
- interpolate (nearest, nearest-exact, bilinear with align_corners either way) and pad's reflect /
  replicate / circular modes: index_select with index tensors computed on the host (constants of the
  trace); bilinear is the lerp of two index_selects per axis;
- scaled_dot_product_attention: matmul, scale, mask, softmax, matmul;
- cross_entropy / nll_loss: log_softmax + gather (+ a weight index_select, ignore_index mask).

Dropout draws its mask from flow's in-graph counter-based generator (``rand_uniform``,
dsl/ops/random.cpp): the mask is computed inside the kernel that uses it, and under @flow.jit every
call draws a new one (the generator's counter is a mutation of the trace).
"""
import builtins
import math
import numbers
import warnings

import numpy as np

from .. import _dtype as D
from .. import _ops
from .. import amp as _amp
from .._dispatch import dispatch, dispatch1
from .._eager_fusion import fused_in_eager
from .._ops import gelu, relu, sigmoid, silu, tanh  # noqa: F401
from .._indexing import _host_array, _host_checks_indices
from .._tensor import Tensor, _fresh

__all__ = ["relu", "relu6", "gelu", "silu", "sigmoid", "tanh", "hardswish", "hardsigmoid", "hardtanh",
           "leaky_relu", "elu", "softplus", "mish", "softmax", "log_softmax", "linear", "conv1d", "conv2d",
           "conv_transpose2d", "batch_norm", "layer_norm", "group_norm", "rms_norm", "dropout", "max_pool1d",
           "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "flatten",
           "embedding", "pad", "interpolate", "scaled_dot_product_attention", "one_hot", "cross_entropy",
           "nll_loss", "mse_loss", "l1_loss", "normalize", "cosine_similarity", "pixel_shuffle", "pixel_unshuffle"]


# ---- helpers: views and constants through the dispatcher ------------------------------------------


def _reshape(x, shape):
    return dispatch1("reshape", [x], {"shape": [builtins.int(s) for s in shape]})


def _permute(x, dims):
    return dispatch1("permute", [x], {"dims": [builtins.int(d) for d in dims]})


def _transpose(x, a, b):
    n = x.ndim
    dims = list(range(n))
    a, b = a % n, b % n
    dims[a], dims[b] = dims[b], dims[a]
    return _permute(x, dims)


def _unsqueeze(x, dim):
    s = list(x.shape)
    dim = dim % (len(s) + 1)
    s.insert(dim, 1)
    return _reshape(x, s)


def _slice(x, dim, start, end, step=1):
    return dispatch1("slice", [x], {"dim": builtins.int(dim), "start": builtins.int(start), "end": builtins.int(end),
                                    "step": builtins.int(step)})


def _select(x, dim, index):
    return dispatch1("select", [x], {"dim": builtins.int(dim), "index": builtins.int(index)})


def _expand(x, shape):
    return dispatch1("expand", [x], {"shape": [builtins.int(s) for s in shape]})


def _cat(tensors, dim):
    tensors = list(tensors)
    return tensors[0] if len(tensors) == 1 else dispatch1("cat", tensors, {"dim": builtins.int(dim)})


def _const(arr, like, dtype=None):
    """A concrete tensor holding numpy `arr` on `like`'s device (a constant input of a trace)."""
    from .. import _creation

    dtype = like.dtype if dtype is None else dtype
    return _creation.tensor(np.ascontiguousarray(arr), dtype=dtype, device=like.device)


def _pair(v, n=2, name="argument"):
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return [builtins.int(v[0])] * n
        if len(v) != n:
            raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v}")
        return [builtins.int(e) for e in v]
    return [builtins.int(v)] * n


def _check_tensor(fn, x, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    return x


def _maybe_inplace(fn, input, result, inplace):
    """inplace=True: the result written into `input` (torch's in-place contract), which is returned."""
    return input._assign(fn + "_", result) if inplace else result


# ---- activations -------------------------------------------------------------------------------------


def _implicit_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1  # torch's legacy choice when dim is None


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None and isinstance(input, Tensor):
        dim = _implicit_dim(input.ndim)
    return _ops.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None and isinstance(input, Tensor):
        dim = _implicit_dim(input.ndim)
    return _ops.log_softmax(input, dim, dtype=dtype)


def relu6(input, inplace=False):
    r = dispatch1("relu6", [_check_tensor("relu6", input)])
    return _maybe_inplace("relu6", input, r, inplace)


def hardswish(input, inplace=False):
    r = dispatch1("hardswish", [_check_tensor("hardswish", input)])
    return _maybe_inplace("hardswish", input, r, inplace)


def hardsigmoid(input, inplace=False):
    r = dispatch1("hardsigmoid", [_check_tensor("hardsigmoid", input)])
    return _maybe_inplace("hardsigmoid", input, r, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    r = dispatch1("hardtanh", [_check_tensor("hardtanh", input)],
                  {"min_val": builtins.float(min_val), "max_val": builtins.float(max_val)})
    return _maybe_inplace("hardtanh", input, r, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    r = dispatch1("leaky_relu", [_check_tensor("leaky_relu", input)], {"negative_slope": builtins.float(negative_slope)})
    return _maybe_inplace("leaky_relu", input, r, inplace)


def elu(input, alpha=1.0, inplace=False):
    r = dispatch1("elu", [_check_tensor("elu", input)], {"alpha": builtins.float(alpha)})
    return _maybe_inplace("elu", input, r, inplace)


def softplus(input, beta=1.0, threshold=20.0):
    return dispatch1("softplus", [_check_tensor("softplus", input)],
                     {"beta": builtins.float(beta), "threshold": builtins.float(threshold)})


def mish(input, inplace=False):
    r = dispatch1("mish", [_check_tensor("mish", input)])
    return _maybe_inplace("mish", input, r, inplace)


# ---- linear and convolutions ----------------------------------------------------------------------------


def linear(input, weight, bias=None):
    _check_tensor("linear", input)
    _check_tensor("linear", weight, "weight")
    if not input.dtype.is_floating_point and input.dtype is not D.bool_:
        # An integer linear (torch's CPU kernel) is flow's exact integer matrix product, wrapping in
        # its dtype; the library call takes floating point only.
        if weight.dtype is not input.dtype:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_ops._c10_name(input.dtype)} != "
                               f"{_ops._c10_name(weight.dtype)}")
        if bias is not None and bias.dtype is not input.dtype:
            raise RuntimeError(f"self and mat2 must have the same dtype, but got {bias.dtype._torch_short} and "
                               f"{input.dtype._torch_short}")
        out = _ops.matmul(input, _transpose(weight, 0, 1) if weight.ndim == 2 else weight)
        return out if bias is None else out + bias
    return dispatch1("linear", [input, weight] + ([bias] if bias is not None else []))


def _conv_padding(padding, n=2):
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        return padding
    return _pair(padding, n, "padding")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    _check_tensor("conv2d", input)
    _check_tensor("conv2d", weight, "weight")
    attrs = {"stride": _pair(stride, 2, "stride"), "padding": _conv_padding(padding),
             "dilation": _pair(dilation, 2, "dilation"), "groups": builtins.int(groups)}
    return dispatch1("conv2d", [input, weight] + ([bias] if bias is not None else []), attrs)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d over a unit height dim: [N, C, L] -> [N, C, 1, L], weight [O, C/g, K] -> [O, C/g, 1, K]."""
    _check_tensor("conv1d", input)
    _check_tensor("conv1d", weight, "weight")
    unbatched = input.ndim == 2
    x = _unsqueeze(input, 0) if unbatched else input
    if x.ndim != 3:
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: "
                           f"{list(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D weight, got size {list(weight.shape)}")
    pad = padding if isinstance(padding, str) else [0, _pair(padding, 1, "padding")[0]]
    y = conv2d(_unsqueeze(x, 2), _unsqueeze(weight, 2), bias, [1, _pair(stride, 1, "stride")[0]], pad,
               [1, _pair(dilation, 1, "dilation")[0]], groups)
    s = list(y.shape)
    y = _reshape(y, [s[0], s[1], s[3]])
    return _reshape(y, s[1:2] + s[3:]) if unbatched else y


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    _check_tensor("conv_transpose2d", input)
    _check_tensor("conv_transpose2d", weight, "weight")
    attrs = {"stride": _pair(stride, 2, "stride"), "padding": _pair(padding, 2, "padding"),
             "output_padding": _pair(output_padding, 2, "output_padding"), "dilation": _pair(dilation, 2, "dilation"),
             "groups": builtins.int(groups)}
    # cuDNN's backward data (CUDA) and oneDNN's deconvolution (CPU) run it when its output is the
    # input of a convolution giving back the input's size: output_padding below the stride (torch
    # also allows it below the dilation). The rest is written as a convolution over the
    # zero-stuffed input.
    if any(op >= s for op, s in zip(attrs["output_padding"], attrs["stride"])):  # (oneDNN refuses it too)
        return _conv_transpose2d_as_conv2d(input, weight, bias, **attrs)
    return dispatch1("conv_transpose2d", [input, weight] + ([bias] if bias is not None else []), attrs)


def _dilate(v, dim, step):
    """Inserts step - 1 zeros between the elements of v along dim (the inverse of a strided slice)."""
    if step == 1:
        return v
    from .. import _creation

    z = _ops.stack([v] + [_creation.zeros_like(v)] * (step - 1), dim + 1)
    shape = list(v.shape)
    shape[dim] *= step
    return z.reshape(shape).narrow(dim, 0, (v.shape[dim] - 1) * step + 1)


def _conv_transpose2d_as_conv2d(x, w, bias, stride, padding, output_padding, dilation, groups):
    """conv_transpose2d on CUDA when cuDNN's backward data cannot express it (output_padding at or
    above the stride, below the dilation): the same sum as a stride-1 convolution over x with
    stride - 1 zeros between its elements, padded by dilation * (k - 1) - padding (plus
    output_padding after), with each group's filter transposed
    (in and out channels swapped) and flipped. Exact, but stride^2 more multiply-adds than
    cuDNN's backward data would do (the zeros); the filter's transform is weight-only work, done
    once for a frozen weight (docs/decisions.md)."""
    unbatched = x.ndim == 3
    if unbatched:
        x = _unsqueeze(x, 0)
    if x.ndim != 4 or w.ndim != 4:
        raise RuntimeError(f"conv_transpose2d: expected a 3-D or 4-D input and a 4-D weight, got input "
                           f"{list(x.shape)} and weight {list(w.shape)}")
    n, c, h, wd = x.shape
    if w.shape[0] != c or c % groups:
        raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected input{list(x.shape)} to "
                           f"have {w.shape[0]} channels, but got {c} channels instead")
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    if oph >= builtins.max(sh, dh) or opw >= builtins.max(sw, dw):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got output_padding: "
                           f"{output_padding}, stride: {stride}, dilation: {dilation}")
    kh, kw = w.shape[2], w.shape[3]
    xs = _dilate(_dilate(x, 2, sh), 3, sw)
    pads = [dw * (kw - 1) - pw, dw * (kw - 1) - pw + opw, dh * (kh - 1) - ph, dh * (kh - 1) - ph + oph]
    xs = pad(xs, [builtins.max(p_, 0) for p_ in pads])
    if builtins.min(pads) < 0:  # padding larger than the kernel's reach: crop instead
        left, right, top, bottom = (builtins.max(-p_, 0) for p_ in pads)
        xs = xs[:, :, top: xs.shape[2] - bottom, left: xs.shape[3] - right]
    cout_g = w.shape[1]
    wt = _reshape(w, [groups, c // groups, cout_g, kh, kw]).transpose(1, 2)
    wt = _reshape(wt, [groups * cout_g, c // groups, kh, kw]).flip([2, 3])
    y = conv2d(xs, wt, bias, 1, 0, [dh, dw], groups)
    return _reshape(y, list(y.shape)[1:]) if unbatched else y


# ---- normalization ---------------------------------------------------------------------------------------


def _affine_args(weight, bias):
    args = [t for t in (weight, bias) if t is not None]
    return args, {"has_weight": weight is not None, "has_bias": bias is not None}


def _check_norm_param_dtypes(x, *params):
    """torch's CPU batch norm: the statistics and affine parameters have the input's dtype, or all
    float32 beside a half input."""
    ps = [p for p in params if isinstance(p, Tensor)]
    if not ps or x.device.type != "cpu":
        return
    if x.dtype is D.float64:
        if builtins.any(p.dtype is not D.float64 for p in ps):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        return
    mixed = x.dtype in (D.float16, D.bfloat16) and builtins.any(p.dtype is D.float32 for p in ps)
    allowed = (D.float32,) if mixed or x.dtype is D.float32 else (x.dtype, D.float32)
    if builtins.any(p.dtype not in allowed for p in ps):
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm. In training mode the batch statistics normalize and, when running
    stats are given, update them in place: running = (1 - momentum) * running + momentum * batch
    (the unbiased batch variance), as torch; under @flow.jit the compiled forward performs the update on
    every call."""
    _check_tensor("batch_norm", input)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least a 2-D input (got {input.ndim}D input)")
    _check_norm_param_dtypes(input, running_mean, running_var, weight, bias)
    wb, attrs = _affine_args(weight, bias)
    attrs["eps"] = builtins.float(eps)
    has_stats = running_mean is not None and running_var is not None
    if not training:
        if builtins.float(eps) < 0:  # torch.nn.functional's check (training asks for more, below)
            raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
        if not has_stats:
            raise RuntimeError("batch_norm: running_mean and running_var must be defined in evaluation mode")
        attrs.update(training=False, has_running_stats=True)
        return dispatch1("batch_norm", [input, running_mean, running_var] + wb, attrs)
    size = 1
    for i, s in enumerate(input.shape):
        if i != 1:
            size *= s
    if size == 0:  # no values: an empty result, running stats untouched (torch's)
        return input.clone()
    if size == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"torch.Size({list(input.shape)})")
    if builtins.float(eps) <= 0:  # torch.nn.functional's check
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    attrs.update(training=True, has_running_stats=False)
    y, mean, var = dispatch("batch_norm", [input] + wb, attrs)
    if has_stats:
        # In place, as torch; under @flow.jit the writes are mutations of the buffers (written back
        # after every run). `momentum` may be a traced 0-dim tensor (BatchNorm's momentum=None).
        m = momentum if isinstance(momentum, Tensor) else builtins.float(momentum)
        running_mean.copy_(running_mean * (1.0 - m) + mean.to(running_mean.dtype) * m)
        running_var.copy_(running_var * (1.0 - m) + var.to(running_var.dtype) * m)
    return y


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    _check_tensor("layer_norm", input)
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = [normalized_shape]
    wb, attrs = _affine_args(weight, bias)
    attrs.update(normalized_shape=[builtins.int(s) for s in normalized_shape], eps=builtins.float(eps))
    return dispatch1("layer_norm", [input] + wb, attrs)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    _check_tensor("group_norm", input)
    g = builtins.int(num_groups)
    if input.ndim >= 2 and g > 0 and input.shape[1] % g == 0:  # torch.nn.functional's check, over [N C / G, G, ...]
        size = [input.shape[0] * input.shape[1] // g, g] + list(input.shape[2:])
        if size[0] * math.prod(size[2:]) == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
    wb, attrs = _affine_args(weight, bias)
    attrs.update(num_groups=builtins.int(num_groups), eps=builtins.float(eps))
    return dispatch1("group_norm", [input] + wb, attrs)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    _check_tensor("rms_norm", input)
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = [normalized_shape]
    attrs = {"normalized_shape": [builtins.int(s) for s in normalized_shape], "has_weight": weight is not None}
    if eps is not None:
        attrs["eps"] = builtins.float(eps)
    return dispatch1("rms_norm", [input] + ([weight] if weight is not None else []), attrs)


# ---- dropout ---------------------------------------------------------------------------------------------


def _check_p(p):
    """torch's checks of a dropout probability: its Python check (ValueError), then its C++ one for NaN."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p != p:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input, p=0.5, training=True, inplace=False):
    _check_p(p)
    if not training or p == 0.0:
        return input
    _check_tensor("dropout", input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {input.dtype._torch_short}")
    if p == 1.0:
        out = input * 0.0
    else:
        from .. import _creation

        keep = _creation.counter_rand(input.shape, input.device) >= builtins.float(p)
        out = _ops.where(keep, input * (1.0 / (1.0 - builtins.float(p))), 0.0)
    return input.copy_(out) if inplace else out


# ---- pooling ----------------------------------------------------------------------------------------------


def _pool_out_size(size, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape: floor (or, with ceil_mode, ceiling) division of the span the
    windows can start in, rounding toward minus infinity; with ceil_mode the last window must start
    inside the input or the left padding. With ceil_mode a window may reach past the padded input
    (the padding then grows to cover it), so an input shorter than the window can still give one
    output."""
    eff = d * (k - 1) + 1
    num = size + 2 * p - eff
    out = (num + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    if out < 1:
        raise RuntimeError(f"pooling: output size is too small (input {size}, kernel {k}, padding {p}, "
                           f"dilation {d}, stride {s}: {out} outputs)")
    return out


def _pool_geometry(input, fn, kernel_size, stride, padding, dilation, ceil_mode):
    """(OH, OW) and the kernel, stride, padding and dilation pairs of a pooling, checked as torch."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{fn}: expected 3D or 4D input, got {input.ndim}D")
    k = _pair(kernel_size, 2, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _pair(stride, 2, "stride")
    p = _pair(padding, 2, "padding")
    d = _pair(dilation, 2, "dilation")
    if 0 in s:
        raise RuntimeError("stride should not be zero")
    if builtins.min(p) < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {builtins.min(p)}")
    if builtins.min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} kW: {k[1]}")
    if builtins.min(s) < 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {s[0]} dW: {s[1]}")
    if builtins.min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {d[0]} dilationW: {d[1]}")
    for i in range(2):
        if p[i] * 2 > k[i]:
            raise RuntimeError(f"{fn}: pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation={d[i]}")
    H, W = input.shape[-2], input.shape[-1]
    OH = _pool_out_size(H, k[0], s[0], p[0], d[0], ceil_mode)
    OW = _pool_out_size(W, k[1], s[1], p[1], d[1], ceil_mode)
    return (OH, OW), k, s, p, d


def _tap_range(size, out, s, d, p, offset):
    """The outputs [lo, hi] whose window tap `offset` (along one axis) lands inside an input of
    `size` (input position o * s + offset * d - p), or None when none does."""
    shift = offset * d - p
    lo = builtins.max(0, -(shift // s) if shift < 0 else 0)
    hi = builtins.min(out - 1, (size - 1 - shift) // s)
    return (lo, hi) if lo <= hi else None


def _pool_tap(x, axes, out_size, s, d, p, offsets, fill):
    """Window tap `offsets` of a pooling of `x` along `axes` (0: rows, 1: columns), without a padded
    copy of `x`: the strided slice of `x` the tap reads inside the input, padded with `fill` to the
    output size. None when the tap lies wholly in the padding. A pad of a view is one injective
    read of `x`, so every tap of a pool and their maximum are one kernel (a pad of `x`, sliced per
    tap, was a kernel writing the whole padded input first)."""
    pads = [0, 0, 0, 0]  # [w_lo, w_hi, h_lo, h_hi], as the pad op takes them
    for axis, off in zip(axes, offsets):
        dim = x.ndim - 2 + axis
        r = _tap_range(x.shape[dim], out_size[axis], s[axis], d[axis], p[axis], off)
        if r is None:
            return None
        lo, hi = r
        start = lo * s[axis] + off * d[axis] - p[axis]
        x = dispatch1("slice", [x], {"dim": dim, "start": start, "end": start + (hi - lo) * s[axis] + 1,
                                     "step": s[axis]})
        pads[2 - 2 * axis] = lo
        pads[3 - 2 * axis] = out_size[axis] - 1 - hi
    if any(pads):
        x = dispatch1("pad", [x], {"pads": pads, "value": builtins.float(fill)})
    return x


def _combine_taps(taps, op, like, out_size, empty, acc=None):
    """`op` ("maximum" or "add") over `taps` (None ones skipped; `empty` where none is left), a new
    tensor as torch's pools return (a lone unpadded tap is a view of the input: 1x1 windows). Taps
    are cast to `acc` first where given: a cast of each tap is computed inside the pool's kernel,
    where a cast of the whole input was a kernel of its own (the taps read it through views)."""
    out = None
    for t in taps:
        if t is not None:
            if acc is not None and t.dtype != acc:
                t = _ops._cast(t, acc)
            out = t if out is None else dispatch1(op, [out, t])
    if out is None:  # every window wholly in the padding (a dilation can allow it), as torch
        from .._creation import full
        filled = full(list(like.shape[:-2]) + list(out_size), empty, dtype=acc or like.dtype, device=like.device)
        # A copy: in a trace (flow/_eager_fusion.py's too) `filled` is a constant, and a compiled
        # function returns a constant itself, the same tensor every call.
        return _ops._cast(filled, filled.dtype)
    if sum(t is not None for t in taps) == 1:
        out = _ops._cast(out, out.dtype)  # a copy, not the input's view
    return out


def _pool_taps(x, op, out_size, k, s, d, p, fill, acc=None):
    """`op` ("maximum" or "add") over every tap of the k[0] x k[1] windows of `x`, each a strided
    slice of `x` padded with `fill` (_pool_tap) and cast to `acc` where given: one pointwise kernel
    vectorized along the output row. Windows over _POOL_UNROLLED_WINDOW elements are separable, `op`
    over the window's columns and then over its rows, k[0] + k[1] taps instead of k[0] * k[1] (max
    and sum are associative; a sum then adds in another order than torch's loop, within float
    tolerance)."""
    if k[0] * k[1] > _POOL_UNROLLED_WINDOW:
        cols_size = (x.shape[-2], out_size[1])
        cols = _combine_taps([_pool_tap(x, (1,), cols_size, s, d, p, (j,), fill) for j in range(k[1])], op, x,
                             cols_size, fill, acc)
        return _combine_taps([_pool_tap(cols, (0,), out_size, s, d, p, (i,), fill) for i in range(k[0])], op, x,
                             out_size, fill, acc)
    return _combine_taps([_pool_tap(x, (0, 1), out_size, s, d, p, (i, j), fill)
                          for i in range(k[0]) for j in range(k[1])], op, x, out_size, fill, acc)


_POOL_UNROLLED_WINDOW = 16  # windows up to this many elements are unrolled (see _pool_taps)


@fused_in_eager  # its taps and maxima as one kernel (flow/_eager_fusion.py)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    _check_tensor("max_pool2d", input)
    if input.dtype == D.bool_:
        raise NotImplementedError("\"max_pool2d\" not implemented for 'Bool'")
    (OH, OW), k, s, p, d = _pool_geometry(input, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode)
    if return_indices:
        H, W = input.shape[-2], input.shape[-1]
        return _pool_indices.max_with_indices(input, _pool_indices.pool_rows(OH, k[0], s[0], p[0], d[0], H),
                                              _pool_indices.pool_rows(OW, k[1], s[1], p[1], d[1], W))
    # Each window tap is a strided slice of the input padded with -inf to the output size
    # (_pool_tap); NaN propagates as in amax. Windows reaching past the input (ceil_mode) read -inf
    # there, as torch's padding does. As a reduction over a [kH, kW] window view (a 9-element row
    # per output) the row-reduction schedule ran 2-3x slower (ResNet-50's max pool at batch 8,
    # alone: 18 ms against 7.5 ms), and a 5x5 window ~40x slower than its bytes allow.
    # Integer inputs pad with their type's lowest value (-inf does not fit them).
    lowest = -math.inf if input.dtype.is_floating_point else builtins.int(np.iinfo(input.dtype.np_dtype).min)
    return _pool_taps(input, "maximum", (OH, OW), k, s, d, p, lowest)


@_amp.autocast_op("avg_pool2d")
@fused_in_eager
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _check_tensor("avg_pool2d", input)
    dtype = input.dtype
    if not dtype.is_floating_point and dtype != D.int64:
        raise NotImplementedError(f"\"avg_pool2d\" not implemented for '{dtype._torch_short}'")
    _check_divisor_override("avg_pool2d", divisor_override)
    (OH, OW), k, s, p, d = _pool_geometry(input, "avg_pool2d", kernel_size, stride, padding, 1, ceil_mode)
    H, W = input.shape[-2], input.shape[-1]
    # The window sum is a sum of taps (zero-padded strided slices, _pool_taps): one kernel that
    # reads the input in place, channels-last included. As a mean over a [kH, kW] window view it
    # was three (a padded copy, a contiguous copy for the view, a reduction of 4-element rows):
    # DenseNet-121's first transition pool took 2.0 ms of kernels for 0.4M outputs. Half types
    # add in float32 and round once, as torch's float accumulator. int64 runs on CUDA too (where
    # torch refuses it), truncating as torch's CPU kernel, like flow's integer matrix products.
    acc = D.float32 if dtype in (D.float16, D.bfloat16) else dtype
    total = _pool_taps(input, "add", (OH, OW), k, s, d, p, 0.0, acc)

    if divisor_override is not None:
        divisor = builtins.int(divisor_override)
    else:
        table = np.outer(_avg_divisors(OH, H, k[0], s[0], p[0], count_include_pad),
                         _avg_divisors(OW, W, k[1], s[1], p[1], count_include_pad))
        divisor = builtins.int(table[0, 0]) if np.all(table == table[0, 0]) else _const(table, total)
    if acc == D.int64:  # torch divides integer sums truncating
        return _ops.div(total, divisor, rounding_mode="trunc")
    out = _ops.div(total, builtins.float(divisor) if isinstance(divisor, builtins.int) else divisor)
    return out if acc == dtype else _ops._cast(out, dtype)


def _check_divisor_override(fn, divisor_override):
    if divisor_override is not None:
        if not isinstance(divisor_override, numbers.Integral) or isinstance(divisor_override, builtins.bool):
            raise TypeError(f"{fn}(): argument 'divisor_override' must be int, not {type(divisor_override).__name__}")
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")


def _avg_divisors(O, size, k, s, p, count_include_pad):
    """torch's average-pool divisor of each of the O outputs along one axis (a window's divisor is
    the product of its axes' divisors)."""
    full, valid = [], []
    for o in range(O):
        start = o * s - p
        end = builtins.min(start + k, size + p)
        full.append(end - start)
        valid.append(builtins.min(end, size) - builtins.max(start, 0))
    return np.array(full if count_include_pad else valid, dtype=np.int64)


def _unit_dim_pool(fn2d, input, kernel_size, stride, padding, **kw):
    x = _unsqueeze(input, -2)
    y = fn2d(x, [1, _pair(kernel_size, 1)[0]], None if stride is None else [1, _pair(stride, 1)[0]],
             [0, _pair(padding, 1)[0]], **kw)
    if isinstance(y, tuple):  # (values, indices): indices into a [1, W] plane are column numbers
        return tuple(_reshape(t, list(t.shape[:-2]) + [t.shape[-1]]) for t in y)
    s = list(y.shape)
    return _reshape(y, s[:-2] + s[-1:])


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _unit_dim_pool(max_pool2d, input, kernel_size, stride, padding, dilation=[1, _pair(dilation, 1)[0]],
                          ceil_mode=ceil_mode, return_indices=return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _unit_dim_pool(avg_pool2d, input, kernel_size, stride, padding, ceil_mode=ceil_mode,
                          count_include_pad=count_include_pad)


def _check_storage(shape, dtype):
    """torch's refusal of a result whose element or byte count overflows int64, made before the
    index tables a resize or pool builds per output position (which would run out of memory)."""
    n = math.prod(shape)
    if n >= 2**63:
        raise RuntimeError("numel: integer multiplication overflow")
    if n * dtype.itemsize >= 2**63:
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)}")


def _adaptive_sizes(input, output_size, fn="adaptive_avg_pool2d", nsp=2):
    """The output sizes of an adaptive pool over the last `nsp` dims (None: the input's size)."""
    if isinstance(output_size, (list, tuple)):
        if input.ndim <= len(output_size):  # (torch's _list_with_default, before its other checks)
            raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
        sizes = _pair_none(output_size, nsp)
        if len(sizes) != nsp:
            if fn.startswith("adaptive_max"):
                raise RuntimeError(f"{fn}(): internal error: output_size.size() must be {nsp}")
            raise RuntimeError(f"{fn}: output_size must be {nsp}")
        out = [input.shape[-nsp + i] if o is None else builtins.int(o) for i, o in enumerate(sizes)]
    else:
        out = [builtins.int(output_size)] * nsp
    if builtins.min(out) < 0:
        if fn.startswith("adaptive_max"):
            shape = list(input.shape[:-nsp]) + out
            raise RuntimeError(f"Trying to create tensor with negative dimension {builtins.min(out)}: {shape}")
        raise RuntimeError(f"{fn}: elements of output_size must be greater than or equal to 0 but received "
                           "{" + ", ".join(str(o) for o in out) + "}")
    _check_storage(list(input.shape[:-nsp]) + out, input.dtype)
    return out


def _pair_none(v, n=2):
    v = list(v)
    return v * n if len(v) == 1 else v


def _check_pool_input(input, fn, nsp):
    """torch's checks of an adaptive pool's input: (nsp + 1)-D or (nsp + 2)-D, with no empty dim
    after the first (an unbatched input may have no channels), or for adaptive_avg_pool2d no empty
    spatial dim."""
    if input.ndim not in (nsp + 1, nsp + 2):
        colon = ":" if fn.startswith("adaptive_max") else ""
        raise RuntimeError(f"{fn}(): Expected {nsp + 1}D or {nsp + 2}D tensor, but got{colon} {list(input.shape)}")
    for i in range(input.ndim - 2 if fn == "adaptive_avg_pool2d" else 1, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {i} being empty")


def _adaptive_pool(input, output_size, op, fn, nsp=2):
    _check_tensor(fn, input)
    sizes = _adaptive_sizes(input, output_size, fn, nsp)
    _check_pool_input(input, fn, nsp)
    # A half mean pools in float32 and rounds once (a rounding per axis was up to 3 ulp off torch's):
    # each axis's kernel widens what it reads, and only the last result is rounded.
    half_mean = op == "mean" and input.dtype in (D.float16, D.bfloat16)
    x = input
    n = x.ndim
    for axis, O in zip(range(n - nsp, n), sizes):
        size = x.shape[axis]
        if O == size:
            continue
        if O == 0:  # an empty result, as torch's
            x = _ops._cast(_slice(x, axis, 0, 0), x.dtype)
            continue
        if size % O == 0:
            # Equal windows: view the axis as [O, size / O] and reduce the inner dim.
            s = list(x.shape)
            x = _reshape(x, s[:axis] + [O, size // O] + s[axis + 1:])
            x = dispatch1(op, [_ops._cast(x, D.float32) if half_mean else x], {"dims": [axis + 1], "keepdim": False})
            continue
        # torch's windows: start = floor(o * size / O), end = ceil((o + 1) * size / O).
        starts = [(o * size) // O for o in range(O)]
        lengths = [-((-(o + 1) * size) // O) - st for o, st in enumerate(starts)]
        if op == "amax" or x.dtype.is_floating_point:
            x = _unequal_window_taps(x, axis, starts, lengths, op, keep_float32=half_mean)
            continue
        parts = [dispatch1(op, [_slice(x, axis, st, st + n)], {"dims": [axis], "keepdim": True})
                 for st, n in zip(starts, lengths)]
        x = _cat(parts, axis)
    if half_mean and x.dtype is not input.dtype:
        return _ops._cast(x, input.dtype)  # (a new tensor)
    return _fresh(x, input)  # (a pool to the input's own size is a copy, as torch's)


def _unequal_window_taps(x, axis, starts, lengths, op, keep_float32=False):
    """`op` ("mean" or "amax") over windows [starts[o], starts[o] + lengths[o]) of `axis`: the
    windows' k-th elements gathered by one index_select each (a shorter window repeats its last
    element, left out of a sum by a select), combined as the pools' taps are (_combine_taps), so the
    axis is one kernel where a reduction per window and a cat were len(starts) + 1. Half types sum
    in float32 and round once."""
    shape = [1] * x.ndim
    shape[axis] = len(starts)
    acc = D.float32 if x.dtype in (D.float16, D.bfloat16) and op == "mean" else x.dtype
    taps = []
    for k in range(builtins.max(lengths)):
        tap = _index_select(x, axis, [st + builtins.min(k, n - 1) for st, n in zip(starts, lengths)])
        if op == "mean" and builtins.min(lengths) <= k:
            tap = _ops.where(_const(np.array([k < n for n in lengths]).reshape(shape), tap, D.bool_), tap, 0.0)
        taps.append(tap)
    out = _combine_taps(taps, "add" if op == "mean" else "maximum", x, None, None, acc)
    if op == "mean":
        out = _ops.div(out, _const(np.array(lengths, dtype=np.float64).reshape(shape), out))
    return out if out.dtype == x.dtype or keep_float32 else _ops._cast(out, x.dtype)


@fused_in_eager
def adaptive_avg_pool2d(input, output_size):
    if isinstance(input, Tensor) and input.ndim >= 2 and _adaptive_sizes(input, output_size) == [1, 1]:
        # torch's shortcut, before its rank checks: a mean (an empty plane gives NaN where a pool
        # would refuse it, and any rank from 2 up takes it)
        return dispatch1("mean", [input], {"dims": [-2, -1], "keepdim": True})
    return _adaptive_pool(input, output_size, "mean", "adaptive_avg_pool2d")


@fused_in_eager
def adaptive_max_pool2d(input, output_size, return_indices=False):
    if return_indices:
        _check_tensor("adaptive_max_pool2d", input)
        OH, OW = _adaptive_sizes(input, output_size, "adaptive_max_pool2d")
        _check_pool_input(input, "adaptive_max_pool2d", 2)
        return _pool_indices.max_with_indices(input, _pool_indices.adaptive_rows(OH, input.shape[-2]),
                                              _pool_indices.adaptive_rows(OW, input.shape[-1]))
    return _adaptive_pool(input, output_size, "amax", "adaptive_max_pool2d")


# ---- shape ------------------------------------------------------------------------------------------------


def flatten(input, start_dim=0, end_dim=-1):
    n = input.ndim
    if n == 0:
        return _reshape(input, [1])
    a, b = start_dim % n, end_dim % n
    s = list(input.shape)
    mid = 1
    for v in s[a:b + 1]:
        mid *= v
    return _reshape(input, s[:a] + [mid] + s[b + 1:])


def unflatten(input, dim, sizes):
    s = list(input.shape)
    dim = dim % len(s)
    return _reshape(input, s[:dim] + list(sizes) + s[dim + 1:])


# ---- embedding -----------------------------------------------------------------------------------------


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if padding_idx is not None and isinstance(weight, Tensor) and weight.ndim:  # torch's asserts
        if padding_idx > 0:
            assert padding_idx < weight.shape[0], "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -weight.shape[0], "Padding_idx must be within num_embeddings"
    if isinstance(input, Tensor) and _host_checks_indices(input) and input.numel() > 0 and \
            input.dtype in (D.int32, D.int64) and isinstance(weight, Tensor):
        # torch's message for any index outside [0, num_embeddings) (negative ones included) on the
        # CPU; elsewhere the kernel's check raises "index i is out of bounds for dimension 0 ...".
        a = _host_array(input._c)
        if int(a.min()) < 0 or int(a.max()) >= weight.shape[0]:
            raise IndexError("index out of range in self")
    if max_norm is not None:
        _embedding_renorm_(input, weight, builtins.float(max_norm), builtins.float(norm_type))
    return dispatch1("embedding", [input, weight])


def _embedding_renorm_(input, weight, max_norm, norm_type):
    """torch's embedding_renorm_: each row of weight that input looks up and whose norm exceeds
    max_norm is scaled in place to max_norm / (norm + 1e-7) of itself, before the lookup. A row
    looked up twice gets the same value written twice. Under @flow.jit it is a write into the weight
    (a parameter) that every run of the compiled call repeats, as torch's forward does."""
    from .._api_more import renorm

    idx = _reshape(input, [-1])
    rows = dispatch1("embedding", [idx, weight])  # (checks the indices as the lookup does)
    weight.index_copy_(0, idx if idx.dtype is D.int64 else _ops._cast(idx, D.int64),
                       renorm(rows, norm_type, 0, max_norm))  # (torch's rule: the same per row)


# ---- padding and resampling (index math) ---------------------------------------------------------------


def _index_select(x, dim, idx):
    return dispatch1("index_select", [x, _const(np.asarray(idx, dtype=np.int64), x, D.int64)], {"dim": dim})


@_amp.autocast_op(lambda input, pad, mode="constant", value=None: "pad_" + mode)
def pad(input, pad, mode="constant", value=None):
    _check_tensor("pad", input)
    pad = [builtins.int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError("Padding length must be divisible by 2 and at most twice the input rank")
    if mode == "constant":
        v = builtins.float(0.0 if value is None else value)
        if isinstance(input, Tensor) and value is not None:
            from .._creation import check_fill_value

            check_fill_value(v, input.dtype)  # (as a float, as torch takes it)
        if isinstance(input, Tensor) and input.dtype is D.bool_:  # the value converted to bool, as torch's
            v = builtins.float(v != 0)
        return dispatch1("pad", [input], {"pads": pad, "value": v})
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"flow: pad mode '{mode}' is not supported")
    if value is not None and value != 0:
        raise ValueError(f'Padding mode "{mode}" doesn\'t take in value argument')
    # torch's rule for non-constant modes: n padded dims on an (n+1)-D or (n+2)-D input, n <= 3.
    if len(pad) not in (2, 4, 6) or input.ndim not in (len(pad) // 2 + 1, len(pad) // 2 + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    x = input
    for i in range(len(pad) // 2):
        dim = x.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        size = x.shape[dim]
        j = np.arange(-lo, size + hi)
        if mode == "reflect":
            if lo >= size or hi >= size:
                raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input "
                                   f"dimension, but got: padding ({lo}, {hi}) at dimension {dim} of input "
                                   f"{list(input.shape)}")
            period = 2 * (size - 1) if size > 1 else 1
            j = np.abs(j) % period
            j = np.where(j >= size, period - j, j)
        elif mode == "replicate":
            j = np.clip(j, 0, size - 1)
        else:
            if lo > size or hi > size:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if size + lo + hi < 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
            # torch crops first (negative amounts), then wraps around what is left.
            start, kept = builtins.max(-lo, 0), size - builtins.max(-lo, 0) - builtins.max(-hi, 0)
            if size + lo + hi and (kept <= 0 or lo > kept or hi > kept):
                raise RuntimeError(f"Padding ({lo}, {hi}) at dimension {dim} of input {list(input.shape)} crops "
                                   f"the dimension to {builtins.max(kept, 0)} elements and then wraps around them "
                                   f"more than once")
            j = start + (np.arange(size + lo + hi) - builtins.max(lo, 0)) % builtins.max(kept, 1)
        x = _index_select(x, dim, j)
    return x


def _source_index_nearest(out, inp, scale, exact, shortcuts=True):
    # torch's nearest_idx (its 1-d and 2-d kernels; not 3-d): an axis that keeps its size is copied,
    # one that doubles is shifted, whatever the scale
    if not exact and shortcuts and out in (inp, 2 * inp):
        return np.arange(out, dtype=np.int64) // (out // inp)
    o = np.arange(out, dtype=np.float64)
    s = (inp / out) if scale is None else 1.0 / scale
    if exact:
        src = np.floor((o + 0.5) * s)
    else:
        src = np.floor(o * np.float32(s))  # torch computes the nearest source index in float32
    return np.minimum(src.astype(np.int64), inp - 1)


def _linear_weights(out, inp, scale, align_corners, ft=np.float32):
    """torch's (area_pixel_compute_source_index) low/high indices and the high weight, one axis."""
    # In float32 operation by operation, as torch's kernels (opmath float): a float64 ratio moves the
    # source coordinate of pixel 255 by ~1e-5, which the weights then show. ft is the float type: a
    # float64 input computes in float64, torch's opmath type for double.
    o = np.arange(out).astype(ft)
    if align_corners:
        s = ft(inp - 1) / ft(out - 1) if out > 1 else ft(0)
        src = o * s
    else:
        s = ft(inp) / ft(out) if scale is None else ft(1.0 / scale)
        src = np.maximum((o + ft(0.5)) * s - ft(0.5), ft(0))
    lo = np.minimum(np.floor(src).astype(np.int64), inp - 1)
    hi = np.minimum(lo + 1, inp - 1)
    w = np.clip(src - lo.astype(ft), ft(0), ft(1)).astype(ft)
    return lo, hi, w


def _ratio(out, inp, scale, align_corners, ft=np.float32):
    """torch's area_pixel_compute_scale in float32 (float64 for a float64 input): input pixels per
    output pixel."""
    if align_corners:
        return ft(inp - 1) / ft(out - 1) if out > 1 else ft(0)
    return ft(inp) / ft(out) if scale is None else ft(1.0 / scale)


def _cubic_near(x, a, ft=np.float32):
    """Keys' cubic convolution kernel for 0 <= x <= 1 (torch's cubic_convolution1), in float32."""
    return ((a + ft(2)) * x - (a + ft(3))) * x * x + ft(1)


def _cubic_far(x, a, ft=np.float32):
    """Keys' cubic convolution kernel for 1 < x < 2 (torch's cubic_convolution2), in float32."""
    return ((a * x - ft(5) * a) * x + ft(8) * a) * x - ft(4) * a


def _cubic_taps(out, inp, scale, align_corners, ft=np.float32):
    """Bicubic (Keys, A = -0.75) source indices and weights of one axis, 4 taps, as torch's
    compute_indices_weights_cubic in float32 (float64 for a float64 input): indices clamped to the
    image (edge replication)."""
    o = np.arange(out)
    s = _ratio(out, inp, scale, align_corners, ft)
    # Not clamped at 0 for cubic. torch's kernel rounds (o + 0.5) * s - 0.5 once (a fused
    # multiply-add, measured against its weights: rounding twice moved the weights by up to 1e-5).
    src = o.astype(ft) * s if align_corners else ((o + 0.5) * np.float64(s) - 0.5).astype(ft)
    idx = np.minimum(np.floor(src).astype(np.int64), inp - 1)
    t = np.clip(src - idx.astype(ft), ft(0), ft(1))
    a = ft(-0.75)
    weights = [_cubic_far(t + ft(1), a, ft), _cubic_near(t, a, ft), _cubic_near(ft(1) - t, a, ft),
               _cubic_far(ft(1) - t + ft(1), a, ft)]
    return [np.clip(idx - 1 + j, 0, inp - 1) for j in range(4)], weights


def _antialias_taps(out, inp, scale, align_corners, cubic):
    """torch's antialiased resampling (_compute_indices_min_size_weights_aa) for one axis: a
    triangle (bilinear) or Keys A = -0.5 (bicubic) filter stretched by the downscale factor, each
    output pixel's window of taps normalized to sum 1. Returns per tap the indices, weights and
    which output pixels the tap belongs to (windows near the borders are shorter). The float32 and
    float64 steps are torch's."""
    f32, f64 = np.float32, np.float64
    size = 4 if cubic else 2
    s = _ratio(out, inp, scale, align_corners)
    support = f32(size * 0.5) * s if s >= 1 else f32(size * 0.5)
    taps = int(math.ceil(support)) * 2 + 1
    invscale = f32(1.0 / f64(s)) if s >= 1 else f32(1)
    center = (f64(s) * (np.arange(out, dtype=f64) + 0.5)).astype(f32)
    xmin = np.maximum(((center - support).astype(f64) + 0.5).astype(np.int64), 0)
    xsize = np.clip(np.minimum(((center + support).astype(f64) + 0.5).astype(np.int64), inp) - xmin, 0, taps)

    def filt(x):
        x = np.abs(x)
        if not cubic:
            return np.where(x < f32(1), f32(1) - x, f32(0)).astype(f32)
        a = f32(-0.5)  # (PIL's, as torch's antialiased bicubic)
        return np.where(x < f32(1), _cubic_near(x, a), np.where(x < f32(2), _cubic_far(x, a), f32(0))).astype(f32)

    valid = [j < xsize for j in range(taps)]
    raw = []
    for j in range(taps):
        d = ((xmin + j).astype(f32) - center).astype(f64) + 0.5
        raw.append(np.where(valid[j], filt((d * f64(invscale)).astype(f32)), f32(0)).astype(f32))
    total = np.zeros(out, dtype=f32)
    for w in raw:
        total = (total + w).astype(f32)
    weights = [np.where(total != 0, w / np.where(total != 0, total, f32(1)), w).astype(f32) for w in raw]
    return [np.clip(xmin + j, 0, inp - 1) for j in range(taps)], weights, valid


def _resample_axis(x, dim, indices, weights, valid=None):
    """sum_j x[indices[j]] * weights[j] along dim, left to right as torch's kernels add; a tap past
    a pixel's (shorter) window adds nothing, even where the value it reads is inf or NaN."""
    shape = [1] * x.ndim
    shape[dim] = len(indices[0])
    out = None
    for j, (ix, w) in enumerate(zip(indices, weights)):
        term = _index_select(x, dim, ix) * _const(w.reshape(shape), x)
        if valid is not None and not valid[j].all():
            term = _ops.where(_const(valid[j].reshape(shape), x, D.bool_), term, 0.0)
        out = term if out is None else out + term
    return out


@fused_in_eager  # a gather, a multiply and an add per tap and axis, as one kernel per axis
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    _check_tensor("interpolate", input)
    if antialias and (mode not in ("bilinear", "bicubic") or input.ndim != 4):
        raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor "
                         "as input")
    if mode == "bicubic" and input.ndim != 4:
        raise NotImplementedError(f"Got {input.ndim}D input, but bicubic mode needs 4D input")
    nsp = input.ndim - 2
    if nsp < 1:
        raise ValueError(f"interpolate: expected a batched input with spatial dims, got {input.ndim}D")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    in_sizes = list(input.shape[2:])
    if size is not None:
        out_sizes = [builtins.int(s) for s in (size if isinstance(size, (list, tuple)) else [size] * nsp)]
        scales = [None] * nsp
    else:
        sf = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * nsp
        out_sizes = [builtins.int(math.floor(i * builtins.float(f))) for i, f in zip(in_sizes, sf)]
        scales = [None if recompute_scale_factor else builtins.float(f) for f in sf]
    if builtins.min(out_sizes) <= 0 and not (mode == "area" and builtins.min(out_sizes) == 0):
        names = "DHW"[3 - nsp:]
        raise RuntimeError("Input and output sizes should be greater than 0, but got input (" +
                           ", ".join(f"{a}: {v}" for a, v in zip(names, in_sizes)) +
                           (") and output (" if nsp == 1 else ") output (") +
                           ", ".join(f"{a}: {v}" for a, v in zip(names, out_sizes)) + ")")
    _check_storage(list(input.shape[:2]) + out_sizes, input.dtype)
    linear_modes = {"linear": 1, "bilinear": 2, "trilinear": 3}
    ft = np.float64 if input.dtype is D.float64 else np.float32  # the weights' type: torch's opmath type
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if mode == "area":  # torch's: the adaptive average pool to the output size
        if nsp > 3:
            raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) "
                                      "for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                      f"nearest-exact (got {mode})")
        pool = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d, 3: adaptive_avg_pool3d}[nsp]  # noqa: F405
        return pool(input, out_sizes)
    if mode in ("nearest", "nearest-exact"):
        x = input
        for i in range(nsp):
            idx = _source_index_nearest(out_sizes[i], in_sizes[i], scales[i], mode == "nearest-exact", nsp < 3)
            x = _index_select(x, 2 + i, idx)
        return x
    if mode == "bicubic" or antialias:
        if not input.dtype.is_floating_point:
            raise NotImplementedError(f"flow: interpolate mode '{mode}' takes floating-point input")
        half = input.dtype in (D.float16, D.bfloat16)
        x = input.float() if half else input
        for i in reversed(range(nsp)):  # the innermost axis first, as torch's kernels
            if antialias and out_sizes[i] == in_sizes[i]:
                continue  # (torch skips an axis it does not resize)
            if antialias:
                ix, w, valid = _antialias_taps(out_sizes[i], in_sizes[i], scales[i], bool(align_corners),
                                               mode == "bicubic")
                x = _resample_axis(x, 2 + i, ix, w, valid)
            else:
                ix, w = _cubic_taps(out_sizes[i], in_sizes[i], scales[i], bool(align_corners), ft)
                x = _resample_axis(x, 2 + i, ix, w)
        return x.to(input.dtype) if half else x
    if mode in linear_modes:
        if linear_modes[mode] != nsp:
            raise NotImplementedError(f"flow: interpolate mode '{mode}' needs a {linear_modes[mode] + 2}-D input, "
                                      f"got {input.ndim}D")
        # Half inputs interpolate in float32 and round once at the end (torch's CUDA kernels compute in
        # float32 too); rounding after every pass would be up to a few ulp off. Integer inputs (uint8
        # images) too, rounded to the nearest integer: torch's uint8 kernel uses fixed-point weights,
        # so its values may differ from these by one.
        half = input.dtype in (D.float16, D.bfloat16) or not input.dtype.is_floating_point
        x = input.float() if half else input
        for i in reversed(range(nsp)):  # innermost axis first, as torch's kernels: w0 * a + w1 * b
            if out_sizes[i] == in_sizes[i]:  # copied, whatever the scale (compute_source_index_and_lambda)
                continue
            lo, hi, w = _linear_weights(out_sizes[i], in_sizes[i], scales[i], bool(align_corners), ft)
            dim = 2 + i
            shape = [1] * x.ndim
            shape[dim] = out_sizes[i]
            w1 = _const(w.reshape(shape), x)
            w0 = _const((ft(1) - w).reshape(shape), x)
            x = _index_select(x, dim, lo) * w0 + _index_select(x, dim, hi) * w1
        if not input.dtype.is_floating_point:  # (a weighted mean stays in the inputs' range)
            x = x.round()
        return x.to(input.dtype) if half else x
    raise NotImplementedError(f"flow: interpolate mode '{mode}' is not supported (nearest, nearest-exact, "
                              "linear, bilinear, bicubic, trilinear and area are)")


upsample = interpolate


# ---- attention ----------------------------------------------------------------------------------------


def _apply_mask(scores, mask):
    """scores + mask for a float mask; scores where mask else -inf for a boolean one (True = attend)."""
    if mask.dtype is D.bool_:
        return _ops.where(mask, scores, -math.inf)
    return scores + mask


def _gqa_heads(query, key, value):
    """Grouped-query attention as torch's: key's and value's heads (dim -3) repeated, each head
    in place, to the query's head count, which each must divide."""
    for t in (query, key, value):
        if t.ndim < 3:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-t.ndim}, {t.ndim - 1}], but got -3)")
    hq = query.shape[-3]
    if hq % key.shape[-3] or hq % value.shape[-3]:
        raise RuntimeError("Number of heads in key and value must divide the number of heads in query")

    def repeat(t):
        r = hq // t.shape[-3]
        if r == 1:
            return t
        s = list(t.shape)
        grouped = _expand(_unsqueeze(t, -3), s[:-2] + [r] + s[-2:])
        return _reshape(grouped, s[:-3] + [hq] + s[-2:])

    return repeat(key), repeat(value)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v, composed from matmul and softmax. With enable_gqa, key
    and value heads are shared by groups of query heads (each repeated to the query's count)."""
    if enable_gqa:
        key, value = _gqa_heads(query, key, value)
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else builtins.float(scale)
    scores = dispatch1("matmul", [query, _transpose(key, -2, -1)]) * scale
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        causal = np.where(np.tril(np.ones((L, S), dtype=bool)), 0.0, -np.inf).astype(np.float32)
        scores = scores + _const(causal, scores)
    elif attn_mask is not None:
        scores = _apply_mask(scores, attn_mask)
    attn = softmax(scores, -1)
    if attn_mask is not None:  # torch's safe softmax: a row the mask hides entirely attends to nothing (0)
        hidden = _ops.all(_ops.eq(scores, -math.inf), -1, keepdim=True)
        attn = _ops.where(hidden, 0.0, attn)
    if dropout_p > 0.0:  # torch applies it whenever given (no training flag here)
        attn = dropout(attn, dropout_p, training=True)
    return dispatch1("matmul", [attn, value])


# ---- losses and one_hot --------------------------------------------------------------------------------


def one_hot(tensor, num_classes=-1):
    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes < 0:
        tensor._need_data("one_hot(num_classes=-1)")
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = builtins.int(_host_array(tensor._c).max()) + 1
    if _host_checks_indices(tensor) and tensor.numel():  # torch's CPU checks (a class out of range is all zeros)
        a = _host_array(tensor._c)
        if a.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if a.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    classes = _const(np.arange(num_classes, dtype=np.int64), tensor, D.int64)
    return _ops.eq(_unsqueeze(tensor, -1), classes).to(D.int64)


def _legacy_reduction(size_average, reduce, reduction):
    """torch's _Reduction.legacy_get_string: the deprecated size_average/reduce, when given, decide."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                  stacklevel=3)
    return ret


def _warn_target_size(fn, input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", stacklevel=3)


def _check_reduction(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce_loss(loss, reduction, fn):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return _ops.sum(loss)
    if reduction == "mean":
        return _ops.mean(loss)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_targets(target, classes, ignore_index):
    """torch's CPU check of class targets: each in [0, classes) or ignore_index."""
    if not (_host_checks_indices(target) and target.numel()):
        return
    a = _host_array(target._c).reshape(-1)
    bad = a[(a != ignore_index) & ((a < 0) | (a >= classes))]
    if bad.size:
        raise IndexError(f"Target {builtins.int(bad[0])} is out of bounds.")


@_amp.autocast_op("nll_loss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n], ...] (times weight[target]), mean over the weights of the non-ignored targets."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype}")
    unbatched = input.ndim == 1
    if unbatched:
        input, target = _unsqueeze(input, 0), _unsqueeze(target, 0)
    _check_targets(target, input.shape[1] if input.ndim > 1 else 0, ignore_index)
    valid = _ops.ne(target, ignore_index)
    safe_t = _ops.where(valid, target, 0)
    # "nonnegative": elsewhere (CUDA, flow.jit) the kernels check each target they read against [0, C).
    picked = dispatch1("gather", [input, _unsqueeze(safe_t, 1)], {"dim": 1, "nonnegative": 1})
    picked = _reshape(picked, list(target.shape))
    w = valid.to(input.dtype)
    if weight is not None:
        w = w * _reshape(dispatch1("index_select", [weight, _reshape(safe_t, [-1])], {"dim": 0, "nonnegative": 1}),
                         list(target.shape))
    loss = -(picked * w)
    if reduction == "mean":
        return _ops.sum(loss) / _ops.sum(w)
    out = _reduce_loss(loss, reduction, "nll_loss")
    if unbatched and reduction == "none":
        out = _reshape(out, [])
    return out


@_amp.autocast_op("cross_entropy")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1 (0 for an unbatched input) + nll_loss; class-probability targets (float)
    and label smoothing as torch."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    cdim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, cdim)
    if target.dtype.is_floating_point:  # class probabilities
        C = input.shape[cdim]
        t = target * (1.0 - label_smoothing) + label_smoothing / C if label_smoothing > 0 else target
        lp = logp
        if weight is not None:
            shape = [1] * input.ndim
            shape[cdim] = C
            lp = lp * _reshape(weight, shape)
        loss = -_ops.sum(lp * t, cdim)
        if reduction == "mean":
            n = 1
            for i, s in enumerate(input.shape):
                if i != cdim:
                    n *= s
            return _ops.sum(loss) / builtins.float(n)  # (no elements: 0 / 0, NaN, as torch's)
        return _reduce_loss(loss, reduction, "cross_entropy")
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing <= 0:  # torch ignores a negative amount
        return nll
    C = input.shape[cdim]
    x = logp if cdim == 1 else _unsqueeze(logp, 0)
    tt = target if cdim == 1 else _unsqueeze(target, 0)
    valid = _ops.ne(tt, ignore_index).to(x.dtype)
    if weight is not None:
        shape = [1] * x.ndim
        shape[1] = C
        smooth = -_ops.sum(x * _reshape(weight, shape), 1) * valid
    else:
        smooth = -_ops.sum(x, 1) * valid
    if reduction == "mean":
        if weight is not None:
            safe_t = _ops.where(_ops.ne(tt, ignore_index), tt, 0)
            wsum = _ops.sum(dispatch1("index_select", [weight, _reshape(safe_t, [-1])], {"dim": 0}) *
                            _reshape(valid, [-1]))
        else:
            wsum = _ops.sum(valid)
        smooth = _ops.sum(smooth) / wsum
    else:
        smooth = _reduce_loss(smooth, reduction, "cross_entropy")
        if cdim == 0 and reduction == "none":
            smooth = _reshape(smooth, [])
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / C)


@_amp.autocast_op("mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_target_size("mse_loss", input, target)
    _check_reduction(reduction)
    return _mse_loss(input, target, reduction)


@fused_in_eager  # the difference, its square and the mean: one kernel eagerly, where op by op was three
def _mse_loss(input, target, reduction):
    d = input - target
    return _reduce_loss(d * d, reduction, "mse_loss")


@_amp.autocast_op("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_target_size("l1_loss", input, target)
    _check_reduction(reduction)
    return _l1_loss(input, target, reduction)


@fused_in_eager
def _l1_loss(input, target, reduction):
    return _reduce_loss(_ops.abs(input - target), reduction, "l1_loss")


# ---- normalization by a norm, pixel (un)shuffle --------------------------------------------------


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p along dim, eps) (torch's formula)."""
    return _ops._out("normalize", out, _normalize(input, p, dim, eps))


@fused_in_eager  # the norm, its clamp and the division: one kernel eagerly, where op by op was three
def _normalize(input, p, dim, eps):
    return input / _ops.norm(input, p, dim, keepdim=True).clamp_min(eps)


@fused_in_eager
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) along dim, after broadcasting (torch's
    formula: each side normalized first, so large values do not overflow)."""
    from .._math import broadcast_shapes

    shape = list(broadcast_shapes(x1.shape, x2.shape))
    a, b = x1.expand(shape), x2.expand(shape)
    na = _ops.norm(a, 2, dim, keepdim=True).clamp_min(eps)
    nb = _ops.norm(b, 2, dim, keepdim=True).clamp_min(eps)
    return _ops.sum((a / na) * (b / nb), dim)


def pixel_shuffle(input, upscale_factor):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r)."""
    r = builtins.int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    nb = len(batch)
    x = _reshape(input, batch + [c // (r * r), r, r, h, w])
    x = _permute(x, list(range(nb)) + [nb, nb + 3, nb + 1, nb + 4, nb + 2])
    return _reshape(x, batch + [c // (r * r), h * r, w * r])


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W)."""
    r = builtins.int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
                           f"{h} and {w} for downscale_factor={r}")
    nb = len(batch)
    x = _reshape(input, batch + [c, h // r, r, w // r, r])
    x = _permute(x, list(range(nb)) + [nb, nb + 2, nb + 4, nb + 1, nb + 3])
    return _reshape(x, batch + [c * r * r, h // r, w // r])


# ---- the loss functions beyond cross_entropy, nll, mse and l1, and the less common functions, live ---
# ---- in their own files ---------------------------------------------------------------------------

from . import _ctc, _functional_3d, _functional_more, _loss_functional, _pool_indices  # noqa: E402
from ._pool_indices import max_unpool1d, max_unpool2d, max_unpool3d  # noqa: F401,E402
from ._functional_more import *  # noqa: F401,F403,E402
from ._loss_functional import *  # noqa: F401,F403,E402
from ._functional_3d import *  # noqa: F401,F403,E402
from ._ctc import ctc_loss  # noqa: F401,E402


def multi_head_attention_forward(*args, **kwargs):
    from .transformer import multi_head_attention_forward as mha  # (transformer.py imports this module)

    return mha(*args, **kwargs)


multi_head_attention_forward.__doc__ = "torch.nn.functional.multi_head_attention_forward (flow/nn/transformer.py)."

__all__ += (_loss_functional.__all__ + _functional_more.__all__ + _functional_3d.__all__ +
            ["max_unpool1d", "max_unpool2d", "max_unpool3d", "ctc_loss", "multi_head_attention_forward"])
