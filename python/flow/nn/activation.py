"""Activation modules: thin wrappers over flow.nn.functional with torch's constructor arguments."""
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
