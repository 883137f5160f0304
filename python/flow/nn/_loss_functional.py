"""torch.nn.functional's loss functions beyond cross_entropy, nll_loss, mse_loss and l1_loss (those
live in functional.py), as compositions of flow ops, so each one runs eagerly and traces under
@flow.jit.

Note:
- Each loss follows ATen's definition (the formula of its kernel, or the ops of its composite),
  with torch's checks, messages, result dtypes and broadcasting: in-place steps of ATen's composites
  (``loss.mul_(weight)``) keep the left operand's shape and dtype, as torch's do (``_into``).
- Half precision: a loss that is one ATen kernel (binary_cross_entropy, huber, smooth_l1,
  multi_margin, multilabel_margin, log_sigmoid, xlogy) computes in float32 for float16/bfloat16 and
  rounds once, as those kernels do; a loss that ATen composes from ops (kl_div, poisson_nll,
  hinge, ...) is composed from the same ops here, each rounding as torch's does.
- Checks that need tensor values (BCE's [0, 1] range, target indices in range, gaussian_nll's
  negative variance) run eagerly only; under @flow.jit they are skipped and indices are clamped
  into range so a bad target cannot read out of bounds.
- multi_margin_loss and multilabel_margin_loss accept float16/bfloat16 as torch's CUDA kernels do
  (torch's CPU kernels refuse them); with an empty batch their 'mean' is NaN (torch's CPU kernels
  return uninitialized memory there). multilabel_margin_loss builds an [N, C, C] intermediate.
- Autocast: the losses on torch's float32 lists (CUDA and CPU, named in dsl/autocast.cpp) carry
  that class; torch refuses binary_cross_entropy under CUDA autocast, and so does flow.
  gaussian_nll_loss and multilabel_soft_margin_loss are Python composites in torch (on no list):
  their ops apply their own classes.
- The deprecated size_average/reduce arguments are honoured as torch's _Reduction does (with its
  warning).
"""
import builtins
import math
import warnings

import numpy as np

from .. import _creation
from .. import _dtype as D
from .. import _ops
from .. import amp as _amp
from .._dispatch import current_trace, dispatch1
from .._eager_fusion import fused_in_eager
from .._math import _in_opmath, broadcast_shapes, promote_types
from .._tensor import Tensor, _can_cast
from .functional import _check_reduction, _const, _legacy_reduction, _reduce_loss, _reshape, l1_loss

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "huber_loss", "smooth_l1_loss",
           "soft_margin_loss", "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss", "multi_margin_loss",
           "multilabel_soft_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss"]


# ---- helpers -----------------------------------------------------------------------------------------


_BCE_BANNED = ("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
               "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
               "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
               "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
               "safe to autocast.")


def _bce_autocast_class(*args, **kwargs):
    active = _amp._active(args, kwargs)
    if active is not None and active[0] == "cuda":
        raise RuntimeError(_BCE_BANNED)
    return "binary_cross_entropy"


def _reduction(size_average, reduce, reduction):
    return _check_reduction(_legacy_reduction(size_average, reduce, reduction))


def _tensor(fn, x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    return x


def _float_only(kernel, x):
    """torch's refusal of an integer or bool input to a floating-point kernel."""
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{x.dtype._torch_short}\'')


def _long_target(target):
    if target.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype._torch_short}")


def _into(result, like):
    """`result` as the output of torch's in-place `like.op_(...)`: like's shape and dtype."""
    if tuple(result.shape) != tuple(like.shape):
        raise RuntimeError(f"output with shape {list(like.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)}")
    if result.dtype is not like.dtype:
        if not _can_cast(result.dtype, like.dtype):
            raise RuntimeError(f"result type {result.dtype._torch_short} can't be cast to the desired output type "
                               f"{like.dtype._torch_short}")
        result = result.to(like.dtype)
    return result


def _warn_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)


def _broadcast(*tensors):
    shape = tuple(broadcast_shapes(*[t.shape for t in tensors]))
    return [t if tuple(t.shape) == shape else t.expand(shape) for t in tensors]


def _eager():
    """True when checks that need tensor values may run (not while tracing)."""
    return current_trace() is None


def _any(mask):
    return builtins.bool(_ops.any(mask)) if mask.numel() else False


def _result_type(*tensors):
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = promote_types(dt, t.dtype)
    return dt


def _log_sigmoid_formula(x):
    return _ops.clamp(x, max=0) - _ops.log1p(_ops.exp(-_ops.abs(x)))


@_amp.autocast_op("log_sigmoid")  # on no autocast list: runs in its input's type, as torch's
def _log_sigmoid(x):
    """torch's log_sigmoid kernel: min(x, 0) - log1p(exp(-|x|)), in float32 for half types."""
    _float_only("log_sigmoid_cpu", x)
    return _in_opmath(x.dtype, _log_sigmoid_formula, x)


def _xlogy_self(t):
    """torch.xlogy(t, t): 0 where t == 0, t * log(t) elsewhere (NaN stays NaN), in float32 for half types."""
    return _in_opmath(t.dtype, lambda v: _ops.where(_ops.eq(v, 0), 0.0, v * _ops.log(v)), t)


# ---- binary cross entropy ------------------------------------------------------------------------------


def _bce_formula(x, t):
    return (t - 1) * _ops.clamp(_ops.log1p(-x), min=-100.0) - t * _ops.clamp(_ops.log(x), min=-100.0)


@_amp.autocast_op(_bce_autocast_class)
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-weight * (target * log(input) + (1 - target) * log(1 - input)), each log clamped at -100."""
    _tensor("binary_cross_entropy", input, "input")
    _tensor("binary_cross_entropy", target, "target")
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) "
                         "is deprecated. Please ensure they have the same size.")
    if weight is not None:
        weight = weight.expand(broadcast_shapes(target.shape, weight.shape))
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype._torch_short} but expected {input.dtype._torch_short}")
    _float_only("binary_cross_entropy", input)
    if _eager():
        for x, name in ((input, "input"), (target, "target")):
            if _any(_ops.logical_not(_ops.ge(x, 0) & _ops.le(x, 1))):
                raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    loss = _in_opmath(input.dtype, _bce_formula, input, target)
    if weight is not None:
        loss = _into(loss * weight, loss)
    return _reduce_loss(loss, reduction, "binary_cross_entropy")


@_amp.autocast_op("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """(1 - target) * input - log_sigmoid(input) * (1 + (pos_weight - 1) * target), times weight:
    BCE of sigmoid(input) in torch's numerically stable form."""
    _tensor("binary_cross_entropy_with_logits", input, "input")
    _tensor("binary_cross_entropy_with_logits", target, "target")
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    log_sig = _log_sigmoid(input)
    if pos_weight is not None:
        log_sig = _into(log_sig * ((pos_weight - 1) * target + 1), log_sig)
    one_minus_t = 1 - target
    loss = _into(one_minus_t * input, one_minus_t)
    loss = _into(loss - log_sig, loss)
    if weight is not None:
        loss = _into(loss * weight, loss)
    return _reduce_loss(loss, reduction, "binary_cross_entropy_with_logits")


# ---- divergences and regression losses ---------------------------------------------------------------


@_amp.autocast_op("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log(target) - input) (exp(target) * (target - input) for log_target); 'batchmean'
    divides the sum by the batch size."""
    _tensor("kl_div", input, "input")
    _tensor("kl_div", target, "target")
    if size_average is not None or reduce is not None:
        red = _legacy_reduction(size_average, reduce, reduction)
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                          "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                          "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
        red = "sum" if reduction == "batchmean" else reduction
    _check_reduction(red)
    if not (input.dtype.is_floating_point and target.dtype.is_floating_point):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    return _kl_div(input, target, red, reduction == "batchmean" and input.ndim != 0, log_target)


@fused_in_eager  # the pointwise terms and their reduction: one kernel eagerly (as the losses below)
def _kl_div(input, target, red, per_batch, log_target):
    if log_target:
        out = _ops.exp(target) * (target - input)
    else:
        out = _xlogy_self(target) - target * input
    reduced = _reduce_loss(out, red, "kl_div")
    return reduced / input.shape[0] if per_batch else reduced


def _huber_formula(delta):
    def f(x, t):
        z = _ops.abs(x - t)
        return _ops.where(_ops.lt(z, delta), 0.5 * z * z, delta * (z - 0.5 * delta))
    return f


@_amp.autocast_op("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 * (input - target)^2 where |input - target| < delta, else delta * (|input - target| - delta / 2);
    times weight (same size as input) when given."""
    _tensor("huber_loss", input, "input")
    _tensor("huber_loss", target, "target")
    _warn_size(input, target)
    x, t = _broadcast(input, target)
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError("Weights and input must have the same size.")
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    _check_reduction(reduction)
    delta = builtins.float(delta)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _float_only("huber_cpu", x)
    return _huber_loss(x, t, reduction, delta, weight)


@fused_in_eager
def _huber_loss(x, t, reduction, delta, weight):
    loss = _in_opmath(x.dtype, _huber_formula(delta), x, t).to(x.dtype)  # the result has input's dtype
    if weight is not None:
        loss = loss * weight
    return _reduce_loss(loss, reduction, "huber_loss")


def _smooth_l1_formula(beta):
    def f(x, t):
        z = _ops.abs(x - t)
        return _ops.where(_ops.lt(z, beta), 0.5 * z * z / beta, z - 0.5 * beta)
    return f


@_amp.autocast_op("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 * (input - target)^2 / beta where |input - target| < beta, else |input - target| - beta / 2
    (l1_loss for beta = 0)."""
    _tensor("smooth_l1_loss", input, "input")
    _tensor("smooth_l1_loss", target, "target")
    _warn_size(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    x, t = _broadcast(input, target)
    beta = builtins.float(beta)
    if beta == 0.0:
        return l1_loss(x, t, reduction=_check_reduction(reduction))
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    dt = _result_type(x, t)
    if not dt.is_floating_point:
        raise NotImplementedError(f'"smooth_l1_cpu" not implemented for \'{dt._torch_short}\'')
    return _smooth_l1_loss(x, t, reduction, beta, dt)


@fused_in_eager
def _smooth_l1_loss(x, t, reduction, beta, dt):
    return _reduce_loss(_in_opmath(dt, _smooth_l1_formula(beta), x, t), reduction, "smooth_l1_loss")


@_amp.autocast_op("poisson_nll_loss")
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(input) - target * input (input - target * log(input + eps) when not log_input), plus the
    Stirling term target * log(target) - target + 0.5 * log(2 pi target) where target > 1 when full."""
    _tensor("poisson_nll_loss", input, "input")
    _tensor("poisson_nll_loss", target, "target")
    reduction = _reduction(size_average, reduce, reduction)
    if log_input:
        loss = _ops.exp(input) - target * input
    else:
        loss = input - target * _ops.log(input + eps)
    if full:
        stirling = target * _ops.log(target) - target + 0.5 * _ops.log(2 * math.pi * target)
        loss = _into(loss + _ops.masked_fill(stirling, _ops.le(target, 1), 0), loss)
    return _reduce_loss(loss, reduction, "poisson_nll_loss")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 * log(2 pi) when full);
    var may be a float, input's shape, or one dimension short / of size 1 where input's is not."""
    _tensor("gaussian_nll_loss", input, "input")
    _tensor("gaussian_nll_loss", target, "target")
    if isinstance(var, builtins.float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * _creation.ones_like(input)
    elif not isinstance(var, Tensor):
        raise TypeError(f"gaussian_nll_loss(): argument 'var' must be Tensor or float, not {type(var).__name__}")
    elif _eager() and _any(_ops.lt(var, 0)):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = _ops.unsqueeze(var, -1)
        elif input.ndim == var.ndim and builtins.sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = _into(_ops.clamp(var, min=eps), var)
    loss = 0.5 * (_ops.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce_loss(loss, reduction, "gaussian_nll_loss")


# ---- margin losses ---------------------------------------------------------------------------------------


@_amp.autocast_op("soft_margin_loss")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-input * target)) (torch's formula: it overflows to inf as torch's does)."""
    _tensor("soft_margin_loss", input, "input")
    _tensor("soft_margin_loss", target, "target")
    reduction = _reduction(size_average, reduce, reduction)
    z = _into(-input * target, input)
    if not z.dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {z.dtype._torch_short}")
    return _reduce_loss(_ops.log1p(_ops.exp(z)), reduction, "soft_margin_loss")


@_amp.autocast_op("margin_ranking_loss")
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    for x, name in ((input1, "input1"), (input2, "input2"), (target, "target")):
        _tensor("margin_ranking_loss", x, name)
    reduction = _reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    out = _ops.clamp(-target * (input1 - input2) + builtins.float(margin), min=0)
    return _reduce_loss(out, reduction, "margin_ranking_loss")


@_amp.autocast_op("hinge_embedding_loss")
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target == 1, max(0, margin - input) where target == -1."""
    _tensor("hinge_embedding_loss", input, "input")
    _tensor("hinge_embedding_loss", target, "target")
    reduction = _reduction(size_average, reduce, reduction)
    margin_clamp = _ops.clamp(builtins.float(margin) - input, min=0)
    out = _ops.where(_ops.ne(target, 1), margin_clamp, 0) + _ops.where(_ops.ne(target, -1), input, 0)
    return _reduce_loss(out, reduction, "hinge_embedding_loss")


_EPSILON = 1e-12


@_amp.autocast_op("cosine_embedding_loss")
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(input1, input2) where target == 1, max(0, cos(input1, input2) - margin) where target == -1."""
    for x, name in ((input1, "input1"), (input2, "input2"), (target, "target")):
        _tensor("cosine_embedding_loss", x, name)
    reduction = _reduction(size_average, reduce, reduction)
    tdim = target.ndim
    if tdim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    want = 2 if tdim == 1 else 1
    if input1.ndim != want or input2.ndim != want:
        raise RuntimeError(f"{tdim}D target tensor expects {want}D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    prod_sum = _ops.sum(input1 * input2, tdim)
    mag_square1 = _ops.sum(input1 * input1, tdim) + _EPSILON
    mag_square2 = _ops.sum(input2 * input2, tdim) + _EPSILON
    cos = prod_sum / _ops.sqrt(mag_square1 * mag_square2)
    pos = 1 - cos
    neg = _ops.clamp(cos - builtins.float(margin), min=0)
    out = _ops.where(_ops.eq(target, 1), pos, 0) + _ops.where(_ops.eq(target, -1), neg, 0)
    return _reduce_loss(out, reduction, "cosine_embedding_loss")


def _pairwise_distance(x1, x2, p, eps):
    """torch.pairwise_distance: the p-norm of x1 - x2 + eps over the last dim."""
    return _ops.norm(x1 - x2 + eps, p, builtins.max(x1.ndim, x2.ndim) - 1)


@_amp.autocast_op("triplet_margin_loss")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the p-norm distance
    (d(anchor, negative) replaced by d(positive, negative) where smaller, when swap)."""
    return _triplet("triplet_margin_loss", anchor, positive, negative, lambda x, y: _pairwise_distance(x, y, p, eps),
                    margin, swap, _reduction(size_average, reduce, reduction))


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """triplet_margin_loss with any distance (a callable of two tensors; pairwise_distance when None)."""
    from ._functional_more import pairwise_distance

    return _triplet("triplet_margin_with_distance_loss", anchor, positive, negative,
                    distance_function if distance_function is not None else pairwise_distance, margin, swap,
                    _check_reduction(reduction))


def _triplet(fn, anchor, positive, negative, distance, margin, swap, reduction):
    for x, name in ((anchor, "anchor"), (positive, "positive"), (negative, "negative")):
        _tensor(fn, x, name)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a, pdim, n = anchor.ndim, positive.ndim, negative.ndim
    if not (a == pdim == n):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {pdim}D, and negative {n}D inputs")
    dist_pos = distance(anchor, positive)
    dist_neg = distance(anchor, negative)
    if swap:
        dist_neg = _ops.minimum(dist_neg, distance(positive, negative))
    out = _ops.clamp(builtins.float(margin) + dist_pos - dist_neg, min=0)
    return _reduce_loss(out, reduction, fn)


def _margin_input_check(input):
    nd = input.ndim
    if not ((nd == 2 and input.shape[1] != 0) or (nd == 1 and input.shape[0] != 0) or nd == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    return (1 if nd <= 1 else input.shape[0]), (1 if nd == 0 else input.shape[-1])


def _multi_margin_formula(nframe, dim, p, margin, has_weight):
    def f(x, t, w=None):
        x = _reshape(x, [nframe, dim])
        t = _reshape(_ops.clamp(t, 0, dim - 1), [nframe, 1])  # in range under @flow.jit too
        z = margin - dispatch1("gather", [x, t], {"dim": 1}) + x
        h = z if p == 1 else z * z
        if has_weight:
            h = h * _reshape(dispatch1("index_select", [w, _reshape(t, [-1])], {"dim": 0}), [nframe, 1])
        keep = _ops.gt(z, 0) & _ops.ne(_const(np.arange(dim).reshape(1, dim), t), t)
        return _ops.sum(_ops.where(keep, h, 0), 1) / dim
    return f


@_amp.autocast_op("multi_margin_loss")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Per sample, the mean over classes i != target of max(0, margin - input[target] + input[i])^p
    (times weight[target])."""
    _tensor("multi_margin_loss", input, "input")
    _tensor("multi_margin_loss", target, "target")
    reduction = _reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    nframe, dim = _margin_input_check(input)
    if target.ndim > 1 or target.numel() != nframe:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{nframe}], but got {list(target.shape)}. "
                           f"Input has shape {list(input.shape)}.")
    if weight is not None:
        if weight.numel() != dim:
            raise RuntimeError(f"inconsistent weight size, expected {dim} but got {list(weight.shape)}")
        if weight.dtype is not input.dtype:
            raise RuntimeError(f"expected scalar type {input.dtype._torch_short} but found "
                               f"{weight.dtype._torch_short}")
    _float_only("multi_margin_loss_cpu_kernel", input)
    _long_target(target)
    if _eager() and _any(_ops.lt(target, 0) | _ops.ge(target, dim)):
        raise RuntimeError("target out of range")
    f = _multi_margin_formula(nframe, dim, p, builtins.float(margin), weight is not None)
    args = [input, target] + ([weight] if weight is not None else [])
    per = _in_opmath(input.dtype, lambda *a: _reduce_loss(f(*a), reduction, "multi_margin_loss"), *args)
    if reduction == "none" and target.ndim == 0:
        per = _reshape(per, [])
    return per


def _multilabel_margin_formula(nframe, dim):
    def f(x, t):
        x = _reshape(x, [nframe, dim])
        t = _reshape(t, [nframe, dim])
        valid = _ops.eq(_ops.cumsum(_ops.lt(t, 0), 1), 0)  # the targets before the first negative entry
        safe = _ops.where(valid, _ops.clamp(t, 0, dim - 1), 0)
        classes = _const(np.arange(dim).reshape(1, 1, dim), t)
        is_target = _ops.any(_ops.eq(_ops.unsqueeze(safe, 2), classes) & _ops.unsqueeze(valid, 2), 1)  # [N, C]
        x_t = dispatch1("gather", [x, safe], {"dim": 1})  # [N, J]
        z = 1 - _ops.unsqueeze(x_t, 2) + _ops.unsqueeze(x, 1)  # [N, J, C]: 1 - x[target_j] + x[i]
        keep = _ops.unsqueeze(valid, 2) & _ops.unsqueeze(_ops.logical_not(is_target), 1) & _ops.gt(z, 0)
        return _ops.sum(_ops.where(keep, z, 0), [1, 2]) / dim
    return f


@_amp.autocast_op("multilabel_margin_loss")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample, sum over the target classes j (target's entries before the first -1) and the
    non-target classes i of max(0, 1 - input[j] + input[i]), divided by the number of classes."""
    _tensor("multilabel_margin_loss", input, "input")
    _tensor("multilabel_margin_loss", target, "target")
    reduction = _reduction(size_average, reduce, reduction)
    nframe, dim = _margin_input_check(input)
    if input.ndim <= 1:
        ok = target.ndim <= 1 and target.numel() == dim
    else:
        ok = target.ndim == 2 and tuple(target.shape) == (nframe, dim)
    if not ok:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    _float_only("multilabel_margin_loss_forward_out_frame", input)
    _long_target(target)
    if _eager() and _any(_ops.lt(target, -1) | _ops.ge(target, dim)):
        raise RuntimeError("argument #2 'target' is out of range")
    f = _multilabel_margin_formula(nframe, dim)
    out = _in_opmath(input.dtype, lambda x, t: _reduce_loss(f(x, t), reduction, "multilabel_margin_loss"),
                     input, target)
    if reduction == "none" and input.ndim <= 1:
        out = _reshape(out, [])
    return out


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per sample, the mean over classes of -(target * log_sigmoid(input) + (1 - target) *
    log_sigmoid(-input)) (times weight)."""
    _tensor("multilabel_soft_margin_loss", input, "input")
    _tensor("multilabel_soft_margin_loss", target, "target")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * _log_sigmoid(input) + (1 - target) * _log_sigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    C = input.size(class_dim)
    loss = _ops.sum(loss, class_dim) / C
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce_loss(loss, reduction, "multilabel_soft_margin_loss")

