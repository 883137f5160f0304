"""flow.nn.utils: torch.nn.utils's inference-time helpers: parameters_to_vector,
vector_to_parameters, the conv/linear + batch-norm fusions, and rnn.pad_sequence.

Note: flow has no autograd, so the gradient utilities (clip_grad_norm_, clip_grad_value_) raise a
clear error rather than doing nothing. weight_norm (both APIs; weight_norm.py) and spectral_norm
(torch.nn.utils's; spectral_norm.py) are here.
"""
from . import parametrizations, parametrize, rnn  # noqa: F401
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights  # noqa: F401

__all__ = ["parameters_to_vector", "vector_to_parameters", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "clip_grad_norm_", "clip_grad_value_", "rnn", "weight_norm",
           "remove_weight_norm", "parametrizations", "parametrize", "spectral_norm", "remove_spectral_norm"]


def parameters_to_vector(parameters):
    """The parameters, flattened and concatenated into one 1-d tensor."""
    from ... import _ops

    params = list(parameters)
    if any(p.device != params[0].device for p in params):
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return _ops.cat([p.reshape(-1) for p in params])  # (an empty list: cat's ValueError, as torch)


def vector_to_parameters(vec, parameters):
    """Writes consecutive slices of the 1-d `vec` into the parameters (in place)."""
    from ..._tensor import Tensor

    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    for p in parameters:
        n = p.numel()
        p.copy_(vec[offset:offset + n].reshape(list(p.shape)))
        offset += n


def _no_autograd(name):
    def fn(*args, **kwargs):
        raise RuntimeError(f"flow.nn.utils.{name}: flow has no autograd (no .grad to clip); it compiles inference "
                           "and evaluation. Train with torch and load the weights into flow")
    fn.__name__ = name
    return fn


clip_grad_norm_ = _no_autograd("clip_grad_norm_")
clip_grad_value_ = _no_autograd("clip_grad_value_")
