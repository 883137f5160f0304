"""Activation modules: thin wrappers over flow.nn.functional with torch's constructor arguments."""
__all__ = ["ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid", "Tanh", "Hardswish", "Hardsigmoid", "Hardtanh", "LeakyReLU", "ELU",
           "Softplus", "Mish", "Softmax", "LogSoftmax", "SELU", "CELU", "GLU", "Hardshrink", "Softshrink", "Tanhshrink",
           "Softsign", "LogSigmoid", "Threshold", "Softmin", "RReLU", "Softmax2d", "PReLU"]

from . import functional as F
from .modules import Module


def _activation(name, fn_name, **defaults):
    keys = list(defaults)

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        if len(args) > len(keys):
            raise TypeError(f"{name}() takes at most {len(keys)} arguments ({len(args)} given)")
        params = dict(defaults)
        for k, v in zip(keys, args):
            params[k] = v
        for k, v in kwargs.items():
            if k not in params:
                raise TypeError(f"{name}.__init__() got an unexpected keyword argument '{k}'")
            params[k] = v
        for k, v in params.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_fn_kwargs", {k: params[k] for k in keys if k != "inplace"})

    def forward(self, input):
        return getattr(F, fn_name)(input, **self._fn_kwargs)

    def extra_repr(self):
        return ", ".join(f"{k}={v!r}" for k, v in self._fn_kwargs.items())

    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__module__": __name__, "__qualname__": name})


ReLU = _activation("ReLU", "relu", inplace=False)
ReLU6 = _activation("ReLU6", "relu6", inplace=False)
GELU = _activation("GELU", "gelu", approximate="none")
SiLU = _activation("SiLU", "silu", inplace=False)
Sigmoid = _activation("Sigmoid", "sigmoid")
Tanh = _activation("Tanh", "tanh")
Hardswish = _activation("Hardswish", "hardswish", inplace=False)
Hardsigmoid = _activation("Hardsigmoid", "hardsigmoid", inplace=False)
Hardtanh = _activation("Hardtanh", "hardtanh", min_val=-1.0, max_val=1.0, inplace=False)
LeakyReLU = _activation("LeakyReLU", "leaky_relu", negative_slope=0.01, inplace=False)
ELU = _activation("ELU", "elu", alpha=1.0, inplace=False)
Softplus = _activation("Softplus", "softplus", beta=1.0, threshold=20.0)
Mish = _activation("Mish", "mish", inplace=False)
Softmax = _activation("Softmax", "softmax", dim=None)
LogSoftmax = _activation("LogSoftmax", "log_softmax", dim=None)
SELU = _activation("SELU", "selu", inplace=False)
CELU = _activation("CELU", "celu", alpha=1.0, inplace=False)
GLU = _activation("GLU", "glu", dim=-1)
Hardshrink = _activation("Hardshrink", "hardshrink", lambd=0.5)
Softshrink = _activation("Softshrink", "softshrink", lambd=0.5)
Tanhshrink = _activation("Tanhshrink", "tanhshrink")
Softsign = _activation("Softsign", "softsign")
LogSigmoid = _activation("LogSigmoid", "logsigmoid")
Threshold = _activation("Threshold", "threshold", threshold=0.0, value=0.0, inplace=False)
Softmin = _activation("Softmin", "softmin", dim=None)


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}"


class Softmax2d(Module):
    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)


class PReLU(Module):
    """max(0, x) + weight * min(0, x), weight one per channel (or one shared), initialized to `init`."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        from .. import _creation
        from .. import _dtype as D
        from .modules import Parameter

        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(_creation.full((num_parameters,), init, dtype=dtype or D.float32, device=device))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
