"""torch.nn's lazy layers: LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d,
LazyBatchNorm1d/2d/3d and LazyInstanceNorm1d/2d/3d, whose input size (in_features, in_channels,
num_features) is found at the first call, or from a loaded state dict.

Note: a lazy layer holds its constructor's other arguments and placeholder parameters
(UninitializedParameter, UninitializedBuffer: empty tensors, so state_dict has torch's keys).
Materializing builds the layer it stands for (torch's cls_to_become) with the found size, takes its
parameters, buffers and attributes, and becomes that class, as torch's does at the first call.
`load_state_dict` materializes from the checkpoint's shapes first (torch materializes there too but
keeps the Lazy class until the first call; flow switches at once). Under @flow.jit a lazy layer must
already be materialized: creating and initializing parameters is eager work, not part of a trace.
"""
from .. import _creation
from .._dispatch import current_trace
from .._errors import trace_error
from . import layers, layers_3d, layers_extra
from .modules import Module, Parameter

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class UninitializedParameter(Parameter):
    """A parameter whose shape its lazy layer has not found yet (an empty tensor until then)."""

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Parameter.__new__(cls, _creation.empty(0, device=device, dtype=dtype), requires_grad)

    def __repr__(self):
        return "<UninitializedParameter>"


class UninitializedBuffer:
    """A buffer whose shape its lazy layer has not found yet (an empty tensor until then)."""

    def __new__(cls, device=None, dtype=None):
        return _creation.empty(0, device=device, dtype=dtype)


class _LazyModule(Module):
    cls_to_become = None
    _placeholders = ("weight", "bias")  # parameters, unless the arguments leave one out

    def __init__(self, *args, **kwargs):
        super().__init__()
        self._lazy_args, self._lazy_kwargs = args, kwargs
        device, dtype = kwargs.get("device"), kwargs.get("dtype")
        for name in self._placeholders:
            if self._has(name):
                setattr(self, name, UninitializedParameter(device=device, dtype=dtype))
            else:
                self.register_parameter(name, None)

    def _has(self, name):
        return name != "bias" or self._lazy_kwargs.get("bias", True)

    def has_uninitialized_params(self):
        return True  # (a materialized layer is its cls_to_become, which has no such method)

    def _size_from_input(self, input):
        raise NotImplementedError

    def _size_from_state(self, state_dict, prefix):
        w = state_dict.get(prefix + "weight")
        return None if w is None else int(w.shape[1])

    def _materialize(self, size):
        real = self.cls_to_become(size, *self._lazy_args, **self._lazy_kwargs)
        self._parameters = real._parameters
        self._buffers = real._buffers
        kept = {"_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks", "training",
                "_non_persistent_buffers_set"}
        for k, v in real.__dict__.items():
            if k not in kept:
                self.__dict__[k] = v
        for k in ("_lazy_args", "_lazy_kwargs"):
            self.__dict__.pop(k, None)
        self.__class__ = self.cls_to_become

    def _materialize_from_state(self, state_dict, prefix):
        size = self._size_from_state(state_dict, prefix)
        if size is not None:
            self._materialize(size)

    def forward(self, input, *args, **kwargs):
        if current_trace() is not None:
            raise trace_error(type(self).__name__, "a lazy layer finds its input size at its first call; call the "
                                                   "model once eagerly (or load a state dict) before flow.jit")
        self._materialize(self._size_from_input(input))
        return self.forward(input, *args, **kwargs)

    def extra_repr(self):
        return "uninitialized, " + ", ".join([repr(a) for a in self._lazy_args] +
                                             [f"{k}={v!r}" for k, v in self._lazy_kwargs.items()])


class LazyLinear(_LazyModule):
    cls_to_become = layers.Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(out_features, bias=bias, device=device, dtype=dtype)

    def _size_from_input(self, input):
        return int(input.shape[-1])


def _channels(layer, input, nd):
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {type(layer).__name__}, "
                           f"but got input of size: {list(input.shape)}")
    return int(input.shape[1] if input.ndim == nd + 2 else input.shape[0])


class _LazyConv(_LazyModule):
    _nd = 2

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups,
                         bias=bias, padding_mode=padding_mode, device=device, dtype=dtype)

    def _size_from_input(self, input):
        return _channels(self, input, self._nd)

    def _size_from_state(self, state_dict, prefix):
        w = state_dict.get(prefix + "weight")
        return None if w is None else int(w.shape[1]) * int(self._lazy_kwargs["groups"])


class LazyConv1d(_LazyConv):
    cls_to_become, _nd = layers.Conv1d, 1


class LazyConv2d(_LazyConv):
    cls_to_become, _nd = layers.Conv2d, 2


class LazyConv3d(_LazyConv):
    cls_to_become, _nd = layers_3d.Conv3d, 3


class _LazyConvTranspose(_LazyConv):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        _LazyModule.__init__(self, out_channels, kernel_size, stride=stride, padding=padding,
                             output_padding=output_padding, groups=groups, bias=bias, dilation=dilation,
                             padding_mode=padding_mode, device=device, dtype=dtype)

    def _size_from_state(self, state_dict, prefix):
        w = state_dict.get(prefix + "weight")
        return None if w is None else int(w.shape[0])


class LazyConvTranspose1d(_LazyConvTranspose):
    cls_to_become, _nd = layers_extra.ConvTranspose1d, 1


class LazyConvTranspose2d(_LazyConvTranspose):
    cls_to_become, _nd = layers.ConvTranspose2d, 2


class LazyConvTranspose3d(_LazyConvTranspose):
    cls_to_become, _nd = layers_3d.ConvTranspose3d, 3


class _LazyNorm(_LazyModule):
    _batched_ndim = None  # instance norms: an unbatched input has one dim fewer

    # (torch's lazy instance norms default to affine and tracked statistics too, unlike InstanceNorm)
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        if track_running_stats:
            self.register_buffer("running_mean", UninitializedBuffer(device=device, dtype=dtype))
            self.register_buffer("running_var", UninitializedBuffer(device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", _creation.tensor(0, device=device))

    def _has(self, name):
        return self._lazy_args[2] and (name != "bias" or self._lazy_kwargs["bias"])

    def _size_from_input(self, input):
        if self._batched_ndim is not None and input.ndim == self._batched_ndim - 1:
            return int(input.shape[0])
        return int(input.shape[1])

    def _size_from_state(self, state_dict, prefix):
        for key in ("weight", "running_mean"):
            if prefix + key in state_dict:
                return int(state_dict[prefix + key].shape[0])
        return None


class LazyBatchNorm1d(_LazyNorm):
    cls_to_become = layers.BatchNorm1d


class LazyBatchNorm2d(_LazyNorm):
    cls_to_become = layers.BatchNorm2d


class LazyBatchNorm3d(_LazyNorm):
    cls_to_become = layers_extra.BatchNorm3d


class LazyInstanceNorm1d(_LazyNorm):
    cls_to_become, _batched_ndim = layers_extra.InstanceNorm1d, 3


class LazyInstanceNorm2d(_LazyNorm):
    cls_to_become, _batched_ndim = layers_extra.InstanceNorm2d, 4


class LazyInstanceNorm3d(_LazyNorm):
    cls_to_become, _batched_ndim = layers_extra.InstanceNorm3d, 5
