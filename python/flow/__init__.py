"""flow: a kernel-generating JIT compiler for PyTorch-style models.

``import flow as torch`` works for what flow implements: tensors, dtypes, creation ops, the
elementwise math, reductions and softmax, views, ``flow.nn`` (Module, Parameter, functional), and
``@flow.jit``, which traces a function or module into a graph and compiles it into fused kernels.
Every op goes through one dispatcher (flow._dispatch): eager ops run a generated kernel compiled
once per signature, traced ops are recorded into the graph.
"""
import sys as _sys

from . import _C
from ._creation import (arange, as_tensor, empty, empty_like, from_numpy, full, full_like, is_tensor,  # noqa: F401
                        manual_seed, ones, ones_like, rand, randint, randn, tensor, zeros, zeros_like)
from ._creation import eye, linspace, rand_like, randint_like, randn_like, scalar_tensor  # noqa: F401
from ._dtype import Size, device  # noqa: F401
from ._dtype import channels_last, contiguous_format, memory_format, preserve_format  # noqa: F401
from ._dtype import bfloat16, bool_ as bool, float16, float32, float64, int8, int16, int32, int64, uint8  # noqa: F401
from ._dtype import dtype  # noqa: F401
from ._errors import TraceError  # noqa: F401
from ._jit import compile, jit  # noqa: F401  (compile shadows the builtin on purpose, as torch's does)
from . import backends  # noqa: F401,E402
from .backends import get_float32_matmul_precision, set_float32_matmul_precision  # noqa: F401
from . import amp  # noqa: F401,E402
from .amp import autocast, get_autocast_dtype, is_autocast_enabled  # noqa: F401
from ._profile import Profile  # noqa: F401
from ._bundle import LoadedModel  # noqa: F401
from ._serialization import load, save  # noqa: F401
from ._ops import *  # noqa: F401,F403
from ._ops import abs, pow, sum  # noqa: F401  (shadow the builtins on purpose, as torch does)
from ._math import *  # noqa: F401,F403
from ._data_dependent import *  # noqa: F401,F403
from ._random import *  # noqa: F401,F403
from ._sampling import *  # noqa: F401,F403
from ._scatter import *  # noqa: F401,F403
from ._math_more import *  # noqa: F401,F403
from ._shape_more import *  # noqa: F401,F403
from ._api_more import *  # noqa: F401,F403
from . import linalg  # noqa: F401,E402
from ._tensor import Tensor  # noqa: F401
from . import nn  # noqa: F401,E402
from . import cuda  # noqa: F401,E402
from . import utils  # noqa: F401,E402

float = float32  # noqa: A001
half = float16
double = float64
long = int64
int = int32  # noqa: A001
short = int16
silu = nn.functional.silu
gelu = nn.functional.gelu
# torch's top-level spellings of the convolutions and pools (the same functions as torch.nn.functional's).
conv1d, conv2d, conv3d = nn.functional.conv1d, nn.functional.conv2d, nn.functional.conv3d
conv_transpose1d = nn.functional.conv_transpose1d
conv_transpose2d, conv_transpose3d = nn.functional.conv_transpose2d, nn.functional.conv_transpose3d
max_pool1d, max_pool2d, max_pool3d = nn.functional.max_pool1d, nn.functional.max_pool2d, nn.functional.max_pool3d
max_pool1d_with_indices = nn.functional.max_pool1d_with_indices
avg_pool1d, adaptive_avg_pool1d = nn.functional.avg_pool1d, nn.functional.adaptive_avg_pool1d
adaptive_max_pool1d = nn.functional.adaptive_max_pool1d_with_indices  # (torch's returns the indices too)
_api_more._install_toplevel(_sys.modules[__name__])

__version__ = "0.1.0"


def cache_stats():
    """The process-wide kernel-cache counters: memory_hits, disk_hits, misses, stores,
    corrupt_entries, readonly_hits (disk hits served by a shipped bundle's kernels), evicted,
    compile_seconds."""
    return _C.cache_stats()


def reset_cache_stats():
    _C.reset_cache_stats()


def cache_dir():
    """The kernel cache directory ($FLOW_CACHE_DIR, else ~/.cache/flow/kernels; '' = memory only)."""
    return _C.cache_dir()


def launch_count():
    """Kernels launched so far (eager and compiled), for tests of kernel counts."""
    return _C.launch_count()


def reset_launch_count():
    _C.reset_launch_count()


class no_grad:
    """A no-op (flow has no autograd yet), usable as a context manager or decorator (with or without
    parentheses)."""

    def __new__(cls, fn=None, *args, **kwargs):
        self = super().__new__(cls)
        if callable(fn):  # @flow.no_grad without parentheses
            return fn
        return self

    def __init__(self, mode=True, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


class inference_mode(no_grad):
    """flow.inference_mode(mode=True): a no-op like no_grad."""


class enable_grad(no_grad):
    pass


class set_grad_enabled(no_grad):
    pass


def is_grad_enabled():
    return False


def is_inference_mode_enabled():
    return False


def is_floating_point(input):
    return input.dtype.is_floating_point


def numel(input):
    return input.numel()
