"""flow.nn.init: torch.nn.init's initializers, in place, with torch's fan and gain computations.

Values are drawn on the host with flow's generator (seeded by flow.manual_seed), so they follow
torch's distributions, not its exact random stream. Each function fills the tensor in place and
returns it; tracers are refused (initialization is eager work).
"""
import math

import numpy as np

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def _rng():
    from .._random import np_rng

    return np_rng()


def _fill(tensor, arr, fn):
    tensor._need_data(f"nn.init.{fn}")
    arr = np.asarray(arr)
    if tensor.dtype.name != "float64":
        arr = arr.astype(np.float32, copy=False)
    tensor.copy_(arr.reshape(tuple(tensor.shape)))
    return tensor


def calculate_gain(nonlinearity, param=None):
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    dims = tensor.ndim
    if dims < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    shape = list(tensor.shape)
    receptive = 1
    for s in shape[2:]:
        receptive *= s
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _size(tensor):
    return tuple(tensor.shape)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    u = _rng().random(_size(tensor), dtype=np.float32 if tensor.dtype.name != "float64" else np.float64)
    return _fill(tensor, u * (b - a) + a, "uniform_")


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    z = _rng().standard_normal(_size(tensor), dtype=np.float32 if tensor.dtype.name != "float64" else np.float64)
    return _fill(tensor, z * std + mean, "normal_")


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std) restricted to [a, b] (rejection sampling)."""
    n = int(np.prod(_size(tensor), dtype=np.int64))
    out = np.empty(n)
    filled = 0
    rng = _rng()
    while filled < n:
        draw = rng.normal(mean, std, max(2 * (n - filled), 16))
        draw = draw[(draw >= a) & (draw <= b)][:n - filled]
        out[filled:filled + draw.size] = draw
        filled += draw.size
    return _fill(tensor, out, "trunc_normal_")


def constant_(tensor, val):
    tensor._need_data("nn.init.constant_")
    return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*_size(tensor)), "eye_")


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in _size(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in _size(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


# torch's deprecated non-underscore aliases
uniform, normal, constant = uniform_, normal_, constant_
xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal = (xavier_uniform_, xavier_normal_,
                                                                  kaiming_uniform_, kaiming_normal_)
