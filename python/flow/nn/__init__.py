"""flow.nn: Module, Parameter, containers, layers, functional and init, with torch.nn's names."""
from . import functional  # noqa: F401
from . import init  # noqa: F401
from .activation import (ELU, GELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSoftmax, Mish,  # noqa: F401
                         ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softplus, Tanh)
from .layers import (AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, BatchNorm1d,  # noqa: F401
                     BatchNorm2d, Conv1d, Conv2d, ConvTranspose2d, Dropout, Dropout1d, Dropout2d, Embedding,
                     Flatten, GroupNorm, Identity, LayerNorm, Linear, MaxPool1d, MaxPool2d, RMSNorm, Unflatten)
from .layers import CosineSimilarity, PixelShuffle, PixelUnshuffle, Upsample, ZeroPad2d  # noqa: F401
from .modules import Module, ModuleDict, ModuleList, Parameter, ParameterList, Sequential  # noqa: F401
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer  # noqa: F401
