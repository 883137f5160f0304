"""torch.nn.functional's volumetric (3-d) convolutions and pools.

Note: conv3d and conv_transpose3d are library ops of their own (dsl/ops/library.cpp): oneDNN's
3-d convolution and deconvolution on the CPU, cuDNN's N-d convolution and backward data on CUDA,
with the epilogue fusion of their 2-d namesakes. What those cannot express (a conv_transpose3d
output_padding at or above the stride), and the pools everywhere, are compositions of 2-d ones:

- conv3d is one 2-d convolution over the depth-unfolded input. The KD depth taps of the (depth
  padded) input, strided slices along depth, are stacked into the channels, so each output depth is
  a batch entry ([N * OD, G * KD * C/G, H, W]) and the weight's depth taps become input channels
  ([O, KD * C/G, KH, KW], group-major as a grouped convolution wants). The multiply-adds are a 3-d
  convolution's and the library sees one call; the price is a copy of the input KD / stride_d times
  its size (TVM's and Caffe's "im2col along one axis").
- conv_transpose3d is the same over the transposed convolution's depth: the input with stride_d - 1
  zeros between its depths (the 2-d code's _dilate), padded by dilation_d * (KD - 1) - padding_d,
  unfolded with the weight's depth taps flipped, then one conv_transpose2d over height and width.
  Exact; stride_d times the depth work of a native 3-d transposed convolution.
- max and average pools are separable: the window taps over height and width (the 2-d pools'
  _pool_taps, one kernel), then over depth on the [.., D, OH * OW] result. The average divides the
  window sum once by torch's divisor (the product of the three axes' divisors), so its rounding is
  one sum's; max_pool3d's indices come from the 2-d scan applied twice (_pool_indices.max3d_with_indices).
- adaptive pools run the 2-d ones' per-axis loop over three axes; lp_pool3d is lp_pool2d's formula.

Also here: the *_with_indices spellings and the deprecated upsample_nearest / upsample_bilinear.

Everything traces under @flow.jit and fuses like other ops.
"""
import builtins
import math
import warnings

import numpy as np

from .. import _dtype as D
from .. import _ops
from .._eager_fusion import fused_in_eager
from . import _pool_indices
from . import functional as F

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
           "lp_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
           "upsample_nearest", "upsample_bilinear"]


def _triple(v, name, fn=None):
    if fn is not None and isinstance(v, (list, tuple)) and len(v) not in (1, 3):
        what = {"kernel_size": "a single int, or", "stride": "omitted, a single int, or"}.get(name, "a single int, or")
        raise RuntimeError(f"{fn}: {name} must either be {what} a tuple of three ints")
    return F._pair(v, 3, name)


def _batched(input, fn, what="input"):
    """input as [N, C, D, H, W] (an unbatched [C, D, H, W] gains N = 1), and whether it was unbatched."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Expected 4D (unbatched) or 5D (batched) {what} to {fn}, but got input of size: "
                           f"{list(input.shape)}")
    return (F._unsqueeze(input, 0), True) if input.ndim == 4 else (input, False)


def _unbatch(y, unbatched):
    return F._reshape(y, list(y.shape)[1:]) if unbatched else y


def _depth_unfold(x, k, s, d, pad, od, groups, hw_pads=(0, 0, 0, 0)):
    """x [N, C, D, H, W] -> [N * OD, G * k * C/G, H', W']: the k depth taps o * s + j * d - pad of
    each output depth o (zeros outside the input), stacked into the channels group-major; hw_pads
    ([w_lo, w_hi, h_lo, h_hi]) zero-pads height and width on the way. x is first viewed as
    [N, D, G, 1, C/G, H, W]; each tap is a strided depth slice of that view padded to OD (as the
    pools' taps), so the taps' cat along the unit dim reads x in place, one kernel, and its result
    is already the convolution's input (a reshape, no copy)."""
    n, c, _, h, w = x.shape
    xv = F._reshape(F._permute(x, [0, 2, 1, 3, 4]), [n, x.shape[2], groups, 1, c // groups, h, w])
    taps = []
    for j in range(k):
        r = F._tap_range(x.shape[2], od, s, d, pad, j)
        lo, hi = r if r is not None else (od, od - 1)  # (a tap wholly in the padding: an empty slice)
        start = builtins.max(lo * s + j * d - pad, 0)
        t = F._slice(xv, 1, start, start + builtins.max((hi - lo) * s + 1, 0), s)
        pads = list(hw_pads) + [0, 0] * 3 + [lo, od - 1 - hi]
        taps.append(F.pad(t, pads) if any(pads) else t)
    t = F._cat(taps, 3) if k > 1 else taps[0]
    return F._reshape(t, [n * od, c * k] + list(t.shape[-2:]))


def _fold_depth(y, n, od, unbatched):
    """[N * OD, O, OH, OW] -> [N, O, OD, OH, OW] ([O, OD, OH, OW] unbatched), contiguous as torch's
    convolutions return."""
    o, oh, ow = y.shape[1:]
    y = F._permute(F._reshape(y, [n, od, o, oh, ow]), [0, 2, 1, 3, 4])
    y = _unbatch(y, unbatched)
    # Traced, a copy (clone: a graph value of its own, written in order), else a
    # graph output would be this permuted view; an elementwise reader fuses the copy away.
    return y.contiguous() if y._c is not None else y.clone()


def _check_conv_args(fn, x, weight, bias, groups, stride, dilation, transposed=False):
    if weight.ndim != 5:
        raise RuntimeError(f"{fn}: expected a 5-D weight for a 5-D input {list(x.shape)}, but got weight of size "
                           f"{list(weight.shape)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if builtins.min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if builtins.min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    c = x.shape[1]
    if transposed:
        if weight.shape[0] != c:
            raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
                               f"{list(x.shape)} to have {weight.shape[0]} channels, but got {c} channels instead")
        if c % groups:
            raise RuntimeError(f"Given groups={groups}, expected input channels {c} to be divisible by {groups}")
        out_channels = weight.shape[1] * groups
    else:
        if weight.shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size [{list(weight.shape)}] instead")
        if weight.shape[1] * groups != c:
            raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                               f"{list(x.shape)} to have {weight.shape[1] * groups} channels, but got {c} channels "
                               "instead")
        out_channels = weight.shape[0]
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
                           f"{out_channels} elements, but got bias of size {list(bias.shape)} instead")


# Whether convolutions run as the 3-d library ops (oneDNN's on the CPU, cuDNN's N-d ones on CUDA)
# rather than as the composition over 2-d ones. A switch for bench/volumetric.py and the tests, which
# run the composition beside them.
_native_conv = True


def _operands(x, weight, bias):
    return [x, weight] + ([bias] if bias is not None else [])


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d: the 3-d library op (oneDNN's, cuDNN's), or one conv2d over the
    depth-unfolded input when that is switched off (see the Note)."""
    F._check_tensor("conv3d", input)
    F._check_tensor("conv3d", weight, "weight")
    x, unbatched = _batched(input, "conv3d")
    groups = builtins.int(groups)
    s, d = _triple(stride, "stride"), _triple(dilation, "dilation")
    _check_conv_args("conv3d", x, weight, bias, groups, s, d)
    k = list(weight.shape[2:])
    reach = [d[i] * (k[i] - 1) for i in range(3)]  # the dilated kernel's extent minus one
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if padding == "same" and builtins.max(s) != 1:
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        lo = [r // 2 for r in reach] if padding == "same" else [0, 0, 0]
        hi = [r - l_ for r, l_ in zip(reach, lo)] if padding == "same" else [0, 0, 0]
    else:
        lo = list(_triple(padding, "padding"))
        if builtins.min(lo) < 0:
            raise RuntimeError("negative padding is not supported")
        hi = list(lo)
    padded = [x.shape[2 + i] + lo[i] + hi[i] for i in range(3)]
    if any(padded[i] < reach[i] + 1 for i in range(3)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(str(r + 1) for r in reach)}). Kernel size can't be greater than actual "
                           "input size")
    if _native_conv:
        attrs = {"stride": list(s), "padding": lo, "dilation": list(d), "groups": groups}
        if hi != lo:
            attrs["padding_end"] = hi
        # (an unbatched input as it is: the op takes it, and its result is no view that an in-place
        # op after it could not write)
        return F.dispatch1("conv3d", _operands(input, weight, bias), attrs)
    # Depth padding and any asymmetric part of the height/width padding ('same' with an even
    # reach) are the unfold's (one kernel); the rest is conv2d's own.
    od = (padded[0] - reach[0] - 1) // s[0] + 1
    xcol = _depth_unfold(x, k[0], s[0], d[0], lo[0], od, groups, (0, hi[2] - lo[2], 0, hi[1] - lo[1]))
    o = weight.shape[0]
    w2 = F._reshape(F._permute(weight, [0, 2, 1, 3, 4]), [o, k[0] * weight.shape[1], k[1], k[2]])
    y = F.conv2d(xcol, w2, bias, list(s[1:]), lo[1:], list(d[1:]), groups)
    return _fold_depth(y, x.shape[0], od, unbatched)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """torch.nn.functional.conv_transpose3d: the 3-d library op (oneDNN's, cuDNN's), else
    conv_transpose2d over the depth-zero-stuffed, depth-unfolded input (see the Note)."""
    F._check_tensor("conv_transpose3d", input)
    F._check_tensor("conv_transpose3d", weight, "weight")
    x, unbatched = _batched(input, "conv_transpose3d")
    groups = builtins.int(groups)
    s, d = _triple(stride, "stride"), _triple(dilation, "dilation")
    p, op = _triple(padding, "padding"), _triple(output_padding, "output_padding")
    _check_conv_args("conv_transpose3d", x, weight, bias, groups, s, d, transposed=True)
    if builtins.min(p) < 0:
        raise RuntimeError("negative padding is not supported")
    if builtins.min(op) < 0:
        raise RuntimeError("negative output_padding is not supported")
    if any(op[i] >= builtins.max(s[i], d[i]) for i in range(3)):
        names = ("depth", "height", "width")
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got " + " ".join(
            f"{what}_{a}: {v[i]}" for what, v in (("output_padding", op), ("stride", s), ("dilation", d))
            for i, a in enumerate(names)))
    k = list(weight.shape[2:])
    size = list(x.shape[2:])
    out = [(size[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(3)]
    if builtins.min(out) <= 0:
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, size))}). Calculated output size per "
                           f"channel: ({' x '.join(map(str, out))}). Output size is too small")
    # The library's deconvolution (oneDNN's; cuDNN's backward data), as conv_transpose2d's:
    # output_padding below the stride.
    if _native_conv and all(op[i] < s[i] for i in range(3)):
        attrs = {"stride": list(s), "padding": list(p), "output_padding": list(op), "dilation": list(d),
                 "groups": groups}
        return F.dispatch1("conv_transpose3d", _operands(input, weight, bias), attrs)
    # Depth: zeros between the input's depths, padded (or cropped) so that output depth z reads taps
    # z + j * d of it, tap j against the weight's depth KD - 1 - j.
    xs = F._dilate(x, 2, s[0])
    lo = d[0] * (k[0] - 1) - p[0]
    hi = lo + op[0]
    if builtins.max(lo, hi) > 0:
        xs = F.pad(xs, [0, 0, 0, 0, builtins.max(lo, 0), builtins.max(hi, 0)])
    if builtins.min(lo, hi) < 0:
        xs = F._slice(xs, 2, builtins.max(-lo, 0), xs.shape[2] - builtins.max(-hi, 0))
    od = out[0]
    xcol = _depth_unfold(xs, k[0], 1, d[0], 0, od, groups)
    cin, cout_g = weight.shape[0], weight.shape[1]
    w2 = F._reshape(weight, [groups, cin // groups, cout_g] + k).flip([3])
    w2 = F._reshape(F._permute(w2, [0, 3, 1, 2, 4, 5]), [k[0] * cin, cout_g, k[1], k[2]])
    y = F.conv_transpose2d(xcol, w2, bias, list(s[1:]), list(p[1:]), list(op[1:]), groups, list(d[1:]))
    return _fold_depth(y, x.shape[0], od, unbatched)


# ---- pools ----------------------------------------------------------------------------------------------


def _pool3d_geometry(input, fn, kernel_size, stride, padding, dilation, ceil_mode):
    """The checks of torch's 3-d pools, in its order; ((OD, OH, OW), k, s, p, d)."""
    k = _triple(kernel_size, "kernel_size", fn)
    no_stride = stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
    s = k if no_stride else _triple(stride, "stride", fn)
    p, d = _triple(padding, "padding", fn), _triple(dilation, "dilation", fn)
    if 0 in s:
        raise RuntimeError("stride should not be zero")
    if builtins.min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} kH: {k[1]} kW: {k[2]}")
    if builtins.min(s) < 0:
        raise RuntimeError(f"stride should be greater than zero, but got dT: {s[0]} dH: {s[1]} dW: {s[2]}")
    if builtins.min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} dilationH: {d[1]} "
                           f"dilationW: {d[2]}")
    if input.ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    for i in range(input.ndim - 4, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {i} being empty")
    if builtins.min(p) < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {builtins.min(p)}")
    for i in range(3):
        if p[i] * 2 > k[i]:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[i]}, "
                               f"kernel_size={k[i]} and dilation={d[i]}")
    size = list(input.shape[-3:])
    if fn == "avg_pool3d" and any(size[i] < k[i] for i in range(3)):  # (torch's, on the unpadded input)
        raise RuntimeError(f"input image (T: {size[0]} H: {size[1]} W: {size[2]}) smaller than kernel size "
                           f"(kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    try:
        out = tuple(F._pool_out_size(size[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(3))
    except RuntimeError:
        if fn == "avg_pool3d":
            raise RuntimeError(f"input image (T: {size[0]} H: {size[1]} W: {size[2]}) smaller than kernel size "
                               f"(kT: {k[0]} kH: {k[1]} kW: {k[2]})") from None
        out = [(n + 2 * pp - dd * (kk - 1) - 1 + (ss - 1 if ceil_mode else 0)) // ss + 1
               for n, kk, ss, pp, dd in zip(size, k, s, p, d)]
        raise RuntimeError(f"Given input size: ({input.shape[-4]}x{'x'.join(map(str, size))}). Calculated output size: "
                           f"({input.shape[-4]}x{'x'.join(str(builtins.max(o, 0)) for o in out)}). Output size is "
                           "too small") from None
    return out, k, s, p, d


def _separable_pool(x, op, out, k, s, p, d, fill, acc=None, finish=None):
    """`op` over each k[0] x k[1] x k[2] window of x [..., D, H, W]: the height/width taps, then the
    depth taps of that over [..., D, OH * OW] (max and sum are separable). `finish` maps the
    [..., OD, OH * OW] result before its reshape, so that elementwise work joins the depth kernel."""
    od, oh, ow = out
    hw = F._pool_taps(x, op, (oh, ow), k[1:], s[1:], d[1:], p[1:], fill, acc)
    lead = list(hw.shape[:-3])
    flat = F._reshape(hw, lead + [hw.shape[-3], oh * ow])
    y = F._pool_taps(flat, op, (od, oh * ow), (k[0], 1), (s[0], 1), (d[0], 1), (p[0], 0), fill, acc)
    return F._reshape(finish(y) if finish else y, lead + [od, oh, ow])


@fused_in_eager
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    F._check_tensor("max_pool3d", input)
    out, k, s, p, d = _pool3d_geometry(input, "max_pool3d", kernel_size, stride, padding, dilation, ceil_mode)
    if input.dtype == D.bool_:
        raise NotImplementedError("\"max_pool3d\" not implemented for 'Bool'")
    size = input.shape[-3:]
    if return_indices:
        return _pool_indices.max3d_with_indices(
            input, *(_pool_indices.pool_rows(out[i], k[i], s[i], p[i], d[i], size[i]) for i in range(3)))
    lowest = -math.inf if input.dtype.is_floating_point else builtins.int(np.iinfo(input.dtype.np_dtype).min)
    return _separable_pool(input, "maximum", out, k, s, p, d, lowest)


@fused_in_eager
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    F._check_tensor("avg_pool3d", input)
    dtype = input.dtype
    if not dtype.is_floating_point and dtype != D.int64:
        raise NotImplementedError(f"\"avg_pool3d\" not implemented for '{dtype._torch_short}'")
    F._check_divisor_override("avg_pool3d", divisor_override)
    out, k, s, p, _ = _pool3d_geometry(input, "avg_pool3d", kernel_size, stride, padding, 1, ceil_mode)
    # Half types add in float32 and round once, as torch's CUDA kernels; int64 truncates as its CPU kernel.
    acc = D.float32 if dtype in (D.float16, D.bfloat16) else dtype
    if divisor_override is not None:
        table = np.array(builtins.int(divisor_override))
    else:
        size = input.shape[-3:]
        per_axis = [F._avg_divisors(out[i], size[i], k[i], s[i], p[i], count_include_pad) for i in range(3)]
        table = np.einsum("i,j,k->ijk", *per_axis).reshape(out[0], out[1] * out[2])

    def divide(total):  # over the window sums' [..., OD, OH * OW], inside the depth kernel
        divisor = builtins.int(table.flat[0]) if np.all(table == table.flat[0]) else F._const(table, total)
        if acc == D.int64:
            return _ops.div(total, divisor, rounding_mode="trunc")
        y = _ops.div(total, builtins.float(divisor) if isinstance(divisor, builtins.int) else divisor)
        return y if acc == dtype else _ops._cast(y, dtype)

    return _separable_pool(input, "add", out, k, s, p, (1, 1, 1), 0.0, acc, divide)


@fused_in_eager
def adaptive_avg_pool3d(input, output_size):
    if isinstance(input, F.Tensor) and input.ndim >= 3 and F._adaptive_sizes(input, output_size, nsp=3) == [1] * 3:
        # torch's shortcut, before its rank checks: a mean (an empty volume gives NaN, where a pool
        # would refuse it, and any rank from 3 up takes it)
        return F.dispatch1("mean", [input], {"dims": [-3, -2, -1], "keepdim": True})
    return F._adaptive_pool(input, output_size, "mean", "adaptive_avg_pool3d", nsp=3)


@fused_in_eager
def adaptive_max_pool3d(input, output_size, return_indices=False):
    if return_indices:
        F._check_tensor("adaptive_max_pool3d", input)
        out = F._adaptive_sizes(input, output_size, "adaptive_max_pool3d", 3)
        F._check_pool_input(input, "adaptive_max_pool3d", 3)
        size = input.shape[-3:]
        return _pool_indices.max3d_with_indices(input, *(_pool_indices.adaptive_rows(out[i], size[i])
                                                         for i in range(3)))
    return F._adaptive_pool(input, output_size, "amax", "adaptive_max_pool3d", nsp=3)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p), as lp_pool2d: the average pool of x^p times the window size."""
    x = F._check_tensor("lp_pool3d", input)
    k = _triple(kernel_size, "kernel_size")
    from ._functional_more import lp_from_average

    return lp_from_average(avg_pool3d(x ** norm_type, k, stride, 0, ceil_mode), math.prod(k), norm_type)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return F.adaptive_max_pool2d(input, output_size, return_indices=True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool3d(input, output_size, return_indices=True)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return F.interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return F.interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
