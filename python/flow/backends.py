"""flow.backends: torch.backends' switches that scripts set, with what each means in flow.

- ``cudnn.benchmark``: torch times cuDNN's algorithms for each new convolution shape. In flow it is
  the default of ``flow.jit(..., conv_search=)`` (and ``flow.compile``): True picks ``"exhaustive"``
  (a timed search, cached per problem), False cuDNN's heuristic. Read when flow.jit or flow.compile
  is called, so set it before compiling, as scripts do at their top.
- ``cudnn.allow_tf32``, ``cuda.matmul.allow_tf32``, ``cuda.matmul.allow_fp16_reduced_precision_reduction``,
  ``flow.set_float32_matmul_precision``: permissions to compute with less precision. flow never
  takes them (float32 products and convolutions run in full float32, half ones accumulate in
  float32), so any value is accepted and the results are those of the strictest setting.
- ``cudnn.enabled``: CUDA convolutions always run through cuDNN in flow; False is refused.
- ``cudnn.deterministic``: flow does not restrict cuDNN to algorithms it documents as
  deterministic; True is refused rather than silently not honoured.
"""
from typing import Any


class _Cudnn:
    __slots__ = ("benchmark", "allow_tf32", "_deterministic", "_enabled")

    def __init__(self) -> None:
        self.benchmark = False
        self.allow_tf32 = True
        self._deterministic = False
        self._enabled = True

    @property
    def enabled(self) -> bool:
        return self._enabled

    @enabled.setter
    def enabled(self, value: Any) -> None:
        if not value:
            raise NotImplementedError("flow.backends.cudnn.enabled = False: flow's CUDA convolutions always run "
                                      "through cuDNN")
        self._enabled = True

    @property
    def deterministic(self) -> bool:
        return self._deterministic

    @deterministic.setter
    def deterministic(self, value: Any) -> None:
        if value:
            raise NotImplementedError("flow.backends.cudnn.deterministic = True: flow does not restrict cuDNN to "
                                      "deterministic algorithms yet")
        self._deterministic = False

    def is_available(self) -> bool:
        from . import cuda

        return cuda.is_available()


class _Matmul:
    __slots__ = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


class _Cuda:
    __slots__ = ("matmul",)

    def __init__(self) -> None:
        self.matmul = _Matmul()


cudnn = _Cudnn()
cuda = _Cuda()

_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """torch's permission to use TF32 or bfloat16 passes for float32 products; flow keeps "highest"
    arithmetic whatever is set (see the module doc)."""
    global _matmul_precision
    if precision not in _PRECISIONS:
        raise RuntimeError(f"Invalid precision {precision!r}: expected one of {', '.join(_PRECISIONS)}")
    _matmul_precision = precision


def get_float32_matmul_precision() -> str:
    return _matmul_precision
