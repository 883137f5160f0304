"""flow.nn: Module, Parameter, containers, layers, functional and init, with torch.nn's names."""
from . import functional  # noqa: F401
from . import init  # noqa: F401
from . import utils  # noqa: F401
from .activation import *  # noqa: F401,F403
from .layers import (AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, BatchNorm1d,  # noqa: F401
                     BatchNorm2d, Conv1d, Conv2d, ConvTranspose2d, Dropout, Embedding,
                     Flatten, GroupNorm, Identity, LayerNorm, Linear, MaxPool1d, MaxPool2d, RMSNorm, Unflatten)
from .layers import CosineSimilarity, PixelShuffle, PixelUnshuffle, Upsample, ZeroPad2d  # noqa: F401
from .layers_extra import *  # noqa: F401,F403
from .layers_3d import *  # noqa: F401,F403
from .lazy import *  # noqa: F401,F403
from .modules import Buffer, Module, ModuleDict, ModuleList, Parameter, ParameterList, Sequential  # noqa: F401
from .transformer import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
