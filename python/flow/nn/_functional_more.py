"""The less common parts of torch.nn.functional, as formulas over flow's ops: more activations,
channel-wise and alpha dropout, instance and local response norm, im2col (unfold) and its
inverse (fold), 1-d adaptive pools, power-average pools, pairwise distance, channel shuffle,
bilinear, affine_grid / grid_sample, embedding_bag and conv_transpose1d.

Note: each function is a composition, so it traces under @flow.jit and fuses like any other ops.
Where torch's kernel computes half-precision inputs in float32 (its "opmath"), the formula runs on
float32 and rounds once at the end (``_opmath``), so results stay within one rounding of torch's.
Random draws (rrelu's slopes, the dropouts' masks, gumbel noise) come from flow's generators:
torch's distributions, not its streams.
"""
import builtins
import math
import warnings

from .. import _creation
from .. import _dtype as D
from .. import _math_more
from .. import _ops
from .._tensor import Tensor
from .._eager_fusion import fused_in_eager
from . import functional as F

__all__ = ["selu", "celu", "glu", "hardshrink", "softshrink", "tanhshrink", "softsign", "logsigmoid", "prelu", "rrelu",
           "threshold", "softmin", "gumbel_softmax", "relu_", "elu_", "leaky_relu_", "hardtanh_", "threshold_",
           "rrelu_", "selu_", "celu_", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
           "channel_shuffle", "native_channel_shuffle", "local_response_norm", "instance_norm", "unfold", "fold",
           "adaptive_avg_pool1d", "adaptive_max_pool1d", "lp_pool1d", "lp_pool2d", "pairwise_distance", "pdist", "bilinear",
           "affine_grid", "grid_sample", "embedding_bag", "conv_transpose1d"]

_HALF = (D.float16, D.bfloat16)


def _opmath(x, fn):
    """fn(x) computed in float32 for half-precision x and rounded once, else fn(x)."""
    if x.dtype in _HALF:
        return fn(x.float()).to(x.dtype)
    return fn(x)


def _in_dtype(value, dtype):
    """A Python number rounded to `dtype` (as a kernel that converts its scalar argument does)."""
    return _creation.full((), value, dtype=dtype).item() if dtype in _HALF else value


def _float_input(fn, x):
    F._check_tensor(fn, x)
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f'"{fn}" not implemented for \'{x.dtype._torch_short}\'')
    return x


# ---- activations -------------------------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


# The activations below written as several flow ops run as one compiled kernel eagerly
# (fused_in_eager, flow/_eager_fusion.py): their argument checks and in-place writes stay outside.
def selu(input, inplace=False):
    x = _float_input("selu", input)
    return F._maybe_inplace("selu", input, _selu(x), inplace)


@fused_in_eager
def _selu(x):
    return _opmath(x, lambda v: _ops.where(v > 0, v, (v.expm1() * _SELU_ALPHA)) * _SELU_SCALE)


def celu(input, alpha=1.0, inplace=False):
    x = _float_input("celu", input)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return F._maybe_inplace("celu", input, _celu(x, alpha), inplace)


@fused_in_eager
def _celu(x, alpha):
    return _opmath(x, lambda v: _ops.where(v > 0, v, (v * (1.0 / alpha)).expm1() * alpha))


def glu(input, dim=-1):
    x = F._check_tensor("glu", input)
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % x.ndim if -x.ndim <= dim < x.ndim else dim
    if not -x.ndim <= dim < x.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-x.ndim}, {x.ndim - 1}], but got {dim})")
    if x.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {x.shape[d]}")
    return _glu(x, d)


@fused_in_eager
def _glu(x, d):
    a, b = x.chunk(2, d)
    return a * b.sigmoid()


def hardshrink(input, lambd=0.5):
    return _hardshrink(F._check_tensor("hardshrink", input), lambd)


@fused_in_eager
def _hardshrink(x, lambd):
    return _ops.where((x >= -lambd) & (x <= lambd), 0.0, x)  # torch's test: NaN passes through


def softshrink(input, lambd=0.5):
    x = _float_input("softshrink", input)
    top = _math_more.finfo(x.dtype).max
    if not 0 <= lambd <= top:  # (NaN fails too)
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype {x.dtype._torch_short}, "
                           f"but found {lambd:g}")
    return _softshrink(x, _in_dtype(lambd, x.dtype))  # torch's kernel rounds lambd to the input's type first


@fused_in_eager
def _softshrink(x, lam):
    # (torch's last branch is v * 0: NaN stays NaN)
    return _opmath(x, lambda v: _ops.where(v > lam, v - lam, _ops.where(v < -lam, v + lam, v * 0.0)))


def tanhshrink(input):
    return _tanhshrink(F._check_tensor("tanhshrink", input))


@fused_in_eager
def _tanhshrink(x):
    return x - x.tanh()  # torch's own formula, rounded at each step in half precision as torch's is


def softsign(input):
    return _softsign(F._check_tensor("softsign", input))


@fused_in_eager
def _softsign(x):
    return x / (x.abs() + 1.0)  # as torch's


@fused_in_eager
def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for large |x|."""
    x = _float_input("log_sigmoid_forward", input)
    return _opmath(x, lambda v: v.clamp(max=0.0) - (-v.abs()).exp().log1p())


def prelu(input, weight):
    x = F._check_tensor("prelu", input)
    w = F._check_tensor("prelu", weight, "weight")
    if w.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {w.ndim}")
    n = w.numel()
    if n != 1:
        channels = x.shape[1] if x.ndim >= 2 else 1  # (torch: a 1-D input has one channel)
        if x.ndim == 0 or n != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} "
                               f"and channel size = {channels}.")
        if x.ndim >= 2:
            w = w.reshape([1, n] + [1] * (x.ndim - 2))
    else:
        w = w.reshape([])
    return _prelu(x, w)


@fused_in_eager
def _prelu(x, w):
    return _ops.where(x > 0, x, x * w).to(x.dtype)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with a slope drawn uniformly from [lower, upper] per element in training, their
    mean in evaluation."""
    x = _float_input("rrelu_with_noise", input)
    if training:
        slope = _creation.uniform_draw(list(x.shape), D.float32, x.device, None, "rrelu") * (upper - lower) + lower
        r = _opmath(x, lambda v: _ops.where(v >= 0, v, v * slope))
    else:
        r = F.leaky_relu(x, (lower + upper) / 2)
    return F._maybe_inplace("rrelu", input, r, inplace)


def threshold(input, threshold, value, inplace=False):
    x = F._check_tensor("threshold", input)
    return F._maybe_inplace("threshold", input, _threshold(x, threshold, value), inplace)


@fused_in_eager
def _threshold(x, threshold, value):
    if not x.dtype.is_floating_point:  # torch converts both numbers to the input's type first
        threshold, value = _int_scalar(threshold, x.dtype), _int_scalar(value, x.dtype)
    # torch's CPU kernel compares a half-precision input with the threshold in float32; its CUDA
    # kernel rounds the threshold to the input's type first (bfloat16(0.2) > 0.2 tells them apart)
    test = x.float() if x.dtype in _HALF and not x.is_cuda else x
    return _ops.where(test <= threshold, value, x).to(x.dtype)  # torch's test: NaN passes through


def _int_scalar(v, dtype):
    """A number as an integer tensor's scalar (truncated, as C++'s conversion; bools as 0/1)."""
    return builtins.bool(v) if dtype is D.bool_ else builtins.int(v)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    x = F._check_tensor("softmin", input)
    return F.softmax(-x if dtype is None else -(x.to(dtype)), dim)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau); hard: the one-hot of its argmax (as torch's forward)."""
    x = F._check_tensor("gumbel_softmax", logits)
    e = _creation.uniform_draw(list(x.shape), D.float32, x.device, None, "gumbel_softmax")
    gumbels = -((1.0 - e).log().neg()).log()  # -log(Exp(1)) with Exp(1) = -log(1 - u)
    y = F.softmax((x + gumbels.to(x.dtype)) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    return _creation.zeros_like(y).scatter(dim, index, 1.0)


def relu_(input):
    return _ops.relu(input, inplace=True)


def elu_(input, alpha=1.0):
    return F.elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return F.leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return F.hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input, threshold_value, value):
    return threshold(input, threshold_value, value, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def selu_(input):
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


# ---- dropout variants --------------------------------------------------------------------------

def _channel_dropout(input, p, training, inplace, lead):
    """Zeroes whole channels: one keep/drop draw per position of the first `lead` dims (batch and
    channel, or channel alone for an unbatched input), the other dims sharing it."""
    x = input
    if not training or p == 0.0:
        return x
    mask_shape = list(x.shape[:lead]) + [1] * (x.ndim - lead)
    if p == 1.0:
        r = x * 0.0
    else:
        keep = _creation.counter_rand(mask_shape, x.device) >= builtins.float(p)
        r = _ops.where(keep, x * (1.0 / (1.0 - p)), 0.0).to(x.dtype)
    return x.copy_(r) if inplace else r


def dropout1d(input, p=0.5, training=True, inplace=False):
    F._check_p(p)
    x = F._check_tensor("dropout1d", input)
    if x.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {x.ndim}D input. Note that dropout1d "
                           "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
                           "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _channel_dropout(x, p, training, inplace, 2 if x.ndim == 3 else 1)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """torch's rule: whatever the rank, the first two dims are (batch, channel) (a 3-D input is
    taken as [N, C, L], with torch's warning)."""
    F._check_p(p)
    x = F._check_tensor("dropout2d", input)
    if x.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {x.ndim}-D input to dropout2d, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).")
    elif x.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.")
    return _channel_dropout(x, p, training, inplace, builtins.min(2, x.ndim))


def dropout3d(input, p=0.5, training=True, inplace=False):
    F._check_p(p)
    x = F._check_tensor("dropout3d", input)
    if x.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {x.ndim}-D input to dropout3d, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).")
    return _channel_dropout(x, p, training, inplace, 2 if x.ndim == 5 else 1)


def _alpha_dropout(fn, input, p, training, inplace, feature):
    """SELU's dropout: dropped values become SELU's negative saturation -alpha*scale, then an affine
    map keeps the mean and variance (torch's formula)."""
    F._check_p(p)
    x = F._check_tensor(fn, input)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        r = x * 0.0
    else:
        alpha = -_SELU_ALPHA * _SELU_SCALE
        a = ((1 - p) * (1 + p * alpha * alpha)) ** -0.5
        b = -a * alpha * p
        shape = list(x.shape[:2]) + [1] * (x.ndim - 2) if feature else list(x.shape)
        keep = (_creation.counter_rand(shape, x.device) >= builtins.float(p)).to(x.dtype)
        r = ((x * keep + (1.0 - keep) * alpha) * a + b).to(x.dtype)
    return x.copy_(r) if inplace else r


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, True)


# ---- channel ops and norms ---------------------------------------------------------------------

def channel_shuffle(input, groups):
    x = F._check_tensor("channel_shuffle", input)
    if x.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{x.ndim} dimension(s)")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c = x.shape[0], x.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = list(x.shape[2:])
    return x.reshape([n, groups, c // groups] + rest).transpose(1, 2).reshape([n, c] + rest)


native_channel_shuffle = channel_shuffle


@fused_in_eager
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha / size * sum of x^2 over the `size` channels around each)^beta; the window is
    zero-padded at the ends (torch's average over the padded window)."""
    x = F._check_tensor("local_response_norm", input)
    if x.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {x.ndim} dimensions)")
    if x.numel() == 0:
        return x

    def norm(v):
        c = v.shape[1]
        sq = F.pad(v * v, [0, 0] * (v.ndim - 2) + [size // 2, (size - 1) // 2])
        window = sq.narrow(1, 0, c)
        for j in range(1, size):
            window = window + sq.narrow(1, j, c)
        return v / (window * (alpha / size) + k) ** beta

    return _opmath(x, norm)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Each (sample, channel) normalized over its spatial dims; with use_input_stats and running
    stats given, those are updated in place (the mean over the batch of each instance's statistics,
    unbiased variance, as torch); without use_input_stats the running stats normalize."""
    x = F._check_tensor("instance_norm", input)
    if x.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {x.ndim} dimensions)")
    if use_input_stats and math.prod(x.shape[2:]) == 1:  # torch.nn.functional's check
        raise ValueError(f"Expected more than 1 spatial element when training, got input size torch.Size({list(x.shape)})")
    if use_input_stats and running_mean is None and running_var is None:  # InstanceNorm's default
        return _instance_norm_of_input(x, weight, bias, eps)
    c = x.shape[1]
    bshape = [1, c] + [1] * (x.ndim - 2)
    xf = x.float() if x.dtype in _HALF else x
    if use_input_stats:
        mean, var = _instance_stats(xf)
        if running_mean is not None or running_var is not None:
            n = math.prod(x.shape[2:])
            if running_mean is not None:
                new = running_mean * (1 - momentum) + mean.mean(0).reshape([c]).to(running_mean.dtype) * momentum
                running_mean.copy_(new)
            if running_var is not None:
                unbiased = var * (n / builtins.max(n - 1, 1))
                new = running_var * (1 - momentum) + unbiased.mean(0).reshape([c]).to(running_var.dtype) * momentum
                running_var.copy_(new)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
        mean = running_mean.float().reshape(bshape) if x.dtype in _HALF else running_mean.reshape(bshape)
        var = running_var.float().reshape(bshape) if x.dtype in _HALF else running_var.reshape(bshape)
    return _instance_normalized(x, xf, mean, var, weight, bias, eps)


def _instance_stats(xf):
    """Each (sample, channel)'s mean and biased variance over the spatial dims, kept as dims."""
    var, mean = _ops.var_mean(xf, list(range(2, xf.ndim)), correction=0, keepdim=True)
    return mean, var


def _instance_normalized(x, xf, mean, var, weight, bias, eps):
    """(xf - mean) / sqrt(var + eps), then weight and bias per channel, in x's dtype."""
    bshape = [1, x.shape[1]] + [1] * (x.ndim - 2)
    y = (xf - mean) * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(bshape).to(y.dtype)
    if bias is not None:
        y = y + bias.reshape(bshape).to(y.dtype)
    return y.to(x.dtype)


def _instance_norm_of_input(x, weight, bias, eps):
    """instance_norm with the input's own statistics and no running ones: group_norm with a group
    per channel (its composite normalizes the deviations of the corrected two-pass moments,
    dsl/ops/moments.h, in one kernel)."""
    if not x.dtype.is_floating_point:  # torch's instance_norm runs as a batch_norm
        raise NotImplementedError(f'"batch_norm" not implemented for \'{x.dtype._torch_short}\'')
    if x.shape[1] == 0:  # no channels, no groups: an empty result
        return x.clone()
    return F.group_norm(x, x.shape[1], weight, bias, eps)


# ---- im2col and its inverse --------------------------------------------------------------------

def _fold_args(fn, kernel_size, dilation, padding, stride):
    k, d = F._pair(kernel_size, 2, "kernel_size"), F._pair(dilation, 2, "dilation")
    p, s = F._pair(padding, 2, "padding"), F._pair(stride, 2, "stride")
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise RuntimeError(f"{fn}: kernel size, dilation and stride should be greater than zero and padding "
                           f"non-negative, but got kernel_size={k}, dilation={d}, padding={p}, stride={s}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@fused_in_eager
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: [N, C, H, W] -> [N, C * kh * kw, L], each column one sliding block (channel-major,
    then kernel row, then kernel column, as torch)."""
    x = F._check_tensor("unfold", input)
    if x.ndim not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {x.ndim}D)")
    batched = x.ndim == 4
    if not batched:
        x = x.unsqueeze(0)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _fold_args("unfold", kernel_size, dilation, padding, stride)
    n, c, h, w = x.shape
    oh, ow = _blocks(h, kh, dh, ph, sh), _blocks(w, kw, dw, pw, sw)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size=({kh}, {kw}), dilation=({dh}, "
                           f"{dw}), padding=({ph}, {pw}), calculated shape of the array of sliding blocks as "
                           f"({oh}, {ow}), but its components must be at least one.")
    xp = F.pad(x, [pw, pw, ph, ph]) if ph or pw else x
    patches = []
    for i in range(kh):
        for j in range(kw):
            rows = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
            patches.append(rows)
    cols = _ops.stack(patches, 2).reshape([n, c * kh * kw, oh * ow])
    return cols if batched else cols.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: [N, C * kh * kw, L] -> [N, C, H, W], overlapping blocks summed."""
    x = F._check_tensor("fold", input)
    if x.ndim not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                                  f"(got {x.ndim}D)")
    batched = x.ndim == 3
    if not batched:
        x = x.unsqueeze(0)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _fold_args("fold", kernel_size, dilation, padding, stride)
    h, w = F._pair(output_size, 2, "output_size")
    n, ckk, length = x.shape
    if ckk % (kh * kw):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={ckk} and kernel_size=({kh}, {kw})")
    oh, ow = _blocks(h, kh, dh, ph, sh), _blocks(w, kw, dw, pw, sw)
    if oh * ow != length:
        raise RuntimeError(f"Given output_size=({h}, {w}), kernel_size=({kh}, {kw}), dilation=({dh}, {dw}), "
                           f"padding=({ph}, {pw}), stride=({sh}, {sw}), expected size of input's dimension 2 to match "
                           f"the calculated number of sliding blocks {oh} * {ow} = {oh * ow}, but got "
                           f"input.size(2)={length}.")
    c = ckk // (kh * kw)
    blocks = x.reshape([n, c, kh, kw, oh, ow])
    hp, wp = h + 2 * ph, w + 2 * pw
    out = None
    for i in range(kh):
        for j in range(kw):
            v = F._dilate(F._dilate(blocks[:, :, i, j], 2, sh), 3, sw)
            top, left = i * dh, j * dw
            v = F.pad(v, [left, wp - left - v.shape[3], top, hp - top - v.shape[2]])
            out = v if out is None else out + v
    out = out[:, :, ph: ph + h, pw: pw + w]
    return out if batched else out.squeeze(0)


# ---- pools and distances -----------------------------------------------------------------------

def adaptive_avg_pool1d(input, output_size):
    x = F._check_tensor("adaptive_avg_pool1d", input)
    if x.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d(): Expected 2D or 3D tensor, but got {x.ndim}D")
    size = F._pair(output_size, 1, "output_size")[0]
    return F.adaptive_avg_pool2d(x.unsqueeze(-2), (1, size)).squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    x = F._check_tensor("adaptive_max_pool1d", input)
    if x.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got {x.ndim}D")
    size = F._pair(output_size, 1, "output_size")[0]
    y = F.adaptive_max_pool2d(x.unsqueeze(-2), (1, size), return_indices)
    return tuple(t.squeeze(-2) for t in y) if return_indices else y.squeeze(-2)


def lp_from_average(avg, window, norm_type):
    """The lp pools from the average pool of x^p: (avg * window size)^(1/p), a negative average
    (odd p) taken as 0, as torch's."""
    return ((avg.sign() * avg.abs().relu()) * window) ** (1.0 / norm_type)


@fused_in_eager
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p): the average pool of x^p times the window size."""
    x = F._check_tensor("lp_pool2d", input)
    kh, kw = F._pair(kernel_size, 2, "kernel_size")
    return lp_from_average(F.avg_pool2d(x ** norm_type, (kh, kw), stride, 0, ceil_mode), kh * kw, norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    x = F._check_tensor("lp_pool1d", input)
    k = F._pair(kernel_size, 1, "kernel_size")[0]
    return lp_from_average(F.avg_pool1d(x ** norm_type, k, stride, 0, ceil_mode), k, norm_type)


pdist = _math_more.pdist  # torch.nn.functional.pdist is torch.pdist


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps along the last dim (torch adds eps to the difference)."""
    a = F._check_tensor("pairwise_distance", x1)
    b = F._check_tensor("pairwise_distance", x2, "x2")
    diff = a - b + eps
    if diff.ndim == 0:
        diff = diff.reshape([1])
    return _opmath(diff, lambda v: _ops.norm(v, p, -1, keepdim))


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]."""
    x1 = F._check_tensor("bilinear", input1)
    x2 = F._check_tensor("bilinear", input2, "input2")
    w = F._check_tensor("bilinear", weight, "weight")
    out_f, in1, in2 = w.shape
    if x1.shape[-1] != in1 or x2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input sizes {list(x1.shape)} and {list(x2.shape)} do not match the weight "
                           f"{list(w.shape)}")
    t = x1.matmul(w.permute(1, 0, 2).reshape([in1, out_f * in2]))
    y = (t.reshape(list(t.shape[:-1]) + [out_f, in2]) * x2.unsqueeze(-2)).sum(-1)
    return y + bias if bias is not None else y


# ---- sampling grids ----------------------------------------------------------------------------

def _linspace_coords(n, align_corners, like):
    """The normalized coordinates of n pixels in [-1, 1] (pixel centres unless align_corners)."""
    if n <= 1:
        return _creation.zeros(builtins.max(n, 0), dtype=like.dtype, device=like.device)
    base = _creation.arange(n, dtype=D.float64, device=like.device)
    coords = base * (2.0 / (n - 1)) - 1.0 if align_corners else (base * 2.0 + 1.0) / n - 1.0
    return coords.to(like.dtype)


def affine_grid(theta, size, align_corners=None):
    """The [N, H, W, 2] sampling grid of the 2-d affine maps theta [N, 2, 3]."""
    t = F._check_tensor("affine_grid", theta)
    if not t.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {t.dtype}")
    size = [builtins.int(s) for s in size]
    if len(size) != 4:
        raise NotImplementedError("affine_grid only supports 4D sizes, for 2D affine transformations (flow has no 3D "
                                  "grid_sample)")
    if t.ndim != 3 or tuple(t.shape[1:]) != (2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                         f"{list(t.shape)}.")
    n, _, h, w = size
    ac = builtins.bool(align_corners)
    xs = _linspace_coords(w, ac, t).reshape([1, w, 1]).expand([h, w, 1])
    ys = _linspace_coords(h, ac, t).reshape([h, 1, 1]).expand([h, w, 1])
    base = _ops.cat([xs, ys, _creation.ones([h, w, 1], dtype=t.dtype, device=t.device)], -1)  # [H, W, 3]
    grid = base.reshape([1, h * w, 3]).matmul(t.transpose(1, 2))  # [N, H*W, 2]
    return grid.reshape([n, h, w, 2])


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1.0) * ((size - 1) / 2.0)
    return ((coord + 1.0) * size - 1.0) / 2.0


def _reflect(coord, size, align_corners):
    """Reflects coordinates into the valid range (torch's reflect_coordinates), then clips."""
    lo, span = (0.0, 2.0 * (size - 1)) if align_corners else (-0.5, 2.0 * size)
    if span <= 0:
        return coord * 0.0
    c = (coord - lo).abs()
    extra = c - (c / span).floor() * span
    flips = (c / (span / 2.0)).floor()
    even = (flips - (flips / 2.0).floor() * 2.0) == 0
    c = _ops.where(even, extra + lo, span / 2.0 - (extra - span / 2.0) + lo)
    return _clip(c, size)


def _clip(coord, size):
    """Clamps coordinates into [0, size - 1]; a NaN one goes to 0 (torch's clip_coordinates on both
    devices: the CPU clamps with NaN-dropping operand order, CUDA with fmaxf)."""
    c = coord.clamp(0.0, builtins.float(size - 1))
    return _ops.where(c.isnan(), 0.0, c)


@fused_in_eager
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples input [N, C, H, W] at grid [N, Ho, Wo, 2] (x, y in [-1, 1]): bilinear or nearest,
    padding zeros, border or reflection, as torch."""
    x = F._check_tensor("grid_sample", input)
    g = F._check_tensor("grid_sample", grid, "grid")
    if mode not in ("bilinear", "nearest"):
        raise NotImplementedError(f"flow: grid_sample mode '{mode}' is not supported (bilinear and nearest are)")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if x.ndim != 4 or g.ndim != 4 or g.shape[-1] != 2 or g.shape[0] != x.shape[0]:
        raise RuntimeError(f"grid_sample(): expected 4D input and grid [N, H, W, 2] with the same batch, got input "
                           f"{list(x.shape)} and grid {list(g.shape)}")
    ac = builtins.bool(align_corners)
    n, c, h, w = x.shape
    ho, wo = g.shape[1], g.shape[2]
    gf = g.float() if g.dtype in _HALF else g
    ix = _unnormalize(gf[..., 0], w, ac)
    iy = _unnormalize(gf[..., 1], h, ac)
    if padding_mode == "border":
        ix, iy = _clip(ix, w), _clip(iy, h)
    elif padding_mode == "reflection":
        ix, iy = _reflect(ix, w, ac), _reflect(iy, h, ac)
    flat = x.reshape([n, c, h * w])
    xf = flat.float() if x.dtype in _HALF else flat

    def tap(px, py):
        """input at integer positions (px, py) [N, Ho, Wo] (zero outside), as [N, C, Ho, Wo]. A position
        outside, a NaN one included, reads element 0 (the gather checks every index it reads)."""
        inside = (px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
        pos = _ops.where(inside, py * w + px, 0.0).to(D.int64).reshape([n, 1, ho * wo])
        vals = xf.gather(2, pos.expand([n, c, ho * wo])).reshape([n, c, ho, wo])
        return _ops.where(inside.unsqueeze(1), vals, 0.0)

    if mode == "nearest":
        out = tap(ix.round(), iy.round())
    else:
        x0, y0 = ix.floor(), iy.floor()
        x1, y1 = x0 + 1.0, y0 + 1.0
        wx1, wy1 = ix - x0, iy - y0
        wx0, wy0 = 1.0 - wx1, 1.0 - wy1
        out = (tap(x0, y0) * (wx0 * wy0).unsqueeze(1) + tap(x1, y0) * (wx1 * wy0).unsqueeze(1)
               + tap(x0, y1) * (wx0 * wy1).unsqueeze(1) + tap(x1, y1) * (wx1 * wy1).unsqueeze(1))
    return out.to(x.dtype)


# ---- embedding_bag and conv_transpose1d --------------------------------------------------------

def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embeddings: a 2-d input is one bag per row; a 1-d input is
    cut into bags at `offsets`. padding_idx entries are left out (and not counted by the mean);
    an empty bag gives zeros. One op (dsl/ops/embedding_bag.cpp): each named row is read once, each
    bag written once. A 2-d input with bags of length 0 gives zeros (torch raises "step must be
    nonzero" there)."""
    ix = F._check_tensor("embedding_bag", input)
    w = F._check_tensor("embedding_bag", weight, "weight")
    if max_norm is not None:
        raise NotImplementedError("flow: embedding_bag(max_norm=...) is not supported (it renormalizes the weight "
                                  "in place)")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode}")
    # The weight's dtype and rank, per_sample_weights' dtype and mode are checked by the op
    # (dsl/ops/embedding_bag.cpp); here only what it cannot see: the index dtypes before their
    # conversion to int64 and the shapes before flattening.
    if ix.dtype not in (D.int32, D.int64):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
                           f"Int; but got {ix.dtype._torch_short} instead")
    psw = per_sample_weights
    if psw is not None:
        psw = F._check_tensor("embedding_bag", psw, "per_sample_weights")
        if list(psw.shape) != list(ix.shape):
            raise ValueError(f"embedding_bag: per_sample_weights {list(psw.shape)} must have the shape of the "
                             f"input {list(ix.shape)}")
    if ix.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        bags, length = ix.shape
        flat = ix.reshape([-1])
        # bags + 1 boundaries 0, length, 2 * length, ... (all 0 when length is 0)
        bounds = _creation.arange(bags + 1, dtype=D.int64, device=ix.device) * length
        psw = psw.reshape([-1]) if psw is not None else None
    elif ix.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        off = F._check_tensor("embedding_bag", offsets, "offsets")
        if off.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        if off.dtype not in (D.int32, D.int64):
            raise RuntimeError(f"Expected tensor for argument #1 'offsets' to have one of the following scalar types: "
                               f"Long, Int; but got {off.dtype._torch_short} instead")
        flat = ix
        off = off.to(D.int64)
        if include_last_offset:
            if off.shape[0] == 0:
                raise RuntimeError("include_last_offset: number of offset should be at least 1")
            bounds = off
        else:  # the last bag ends at the input's end
            bounds = _ops.cat([off, _creation.full([1], ix.shape[0], dtype=D.int64, device=ix.device)])
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {ix.ndim}")
    attrs = {"mode": mode}
    if padding_idx is not None:
        attrs["padding_idx"] = builtins.int(padding_idx)
    args = [flat.to(D.int64), w, bounds] + ([psw] if psw is not None else [])
    return F.dispatch1("embedding_bag", args, attrs)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """conv_transpose2d over a unit height."""
    x = F._check_tensor("conv_transpose1d", input)
    wt = F._check_tensor("conv_transpose1d", weight, "weight")
    batched = x.ndim == 3
    if x.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, but got input of size: "
                           f"{list(x.shape)}")
    x4 = (x if batched else x.unsqueeze(0)).unsqueeze(2)

    def one(v, name):
        return [0 if name in ("padding", "output_padding") else 1, F._pair(v, 1, name)[0]]

    y = F.conv_transpose2d(x4, wt.unsqueeze(2), bias, one(stride, "stride"), one(padding, "padding"),
                           one(output_padding, "output_padding"), groups, one(dilation, "dilation"))
    y = y.squeeze(2)
    return y if batched else y.squeeze(0)
