"""flow.nn: Module, Parameter, a few activation modules and functional."""
from . import functional  # noqa: F401
from .modules import (GELU, Identity, LogSoftmax, Module, Parameter, ReLU, Sequential, Sigmoid, SiLU,  # noqa: F401
                      Softmax, Tanh)
