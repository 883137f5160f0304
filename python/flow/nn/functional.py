"""flow.nn.functional: the activation and softmax functions with torch.nn.functional's signatures."""
from .. import _ops
from .._ops import gelu, relu, sigmoid, silu, tanh  # noqa: F401
from .._tensor import Tensor

__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax"]


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
