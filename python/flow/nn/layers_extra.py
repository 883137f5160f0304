"""The less common torch.nn layers, over flow.nn.functional: instance and local response norm,
BatchNorm3d, the padding layers, fold/unfold, 1-d adaptive and power-average pools, pairwise
distance, channel shuffle, bilinear, embedding bags, the alpha and channel dropouts, the upsampling
aliases, ConvTranspose1d and ParameterDict. Constructor arguments, parameter and buffer names and
default initializations are torch's, so torch state dicts load (values follow torch's
distributions, not its random stream)."""
import math
import numbers

from .. import _creation
from .. import _dtype as D
from . import functional as F
from . import init
from .layers import ConvTranspose2d, Upsample, _BatchNorm, _empty
from .modules import Module, Parameter

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "BatchNorm3d", "SyncBatchNorm", "ConstantPad1d",
           "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d",
           "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d", "Fold", "Unfold", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "MaxUnpool1d",
           "MaxUnpool2d", "LPPool1d", "LPPool2d", "PairwiseDistance", "ChannelShuffle", "Bilinear", "EmbeddingBag", "AlphaDropout",
           "FeatureAlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "ConvTranspose1d", "ParameterDict", "DataParallel"]


# ---- norms -------------------------------------------------------------------------------------

class _InstanceNorm(Module):
    _batched_ndim = 0

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self._has_bias = bool(affine and bias)
        if affine:
            self.weight = Parameter(_creation.ones(num_features, dtype=dtype or D.float32, device=device))
            if bias:
                self.bias = Parameter(_creation.zeros(num_features, dtype=dtype or D.float32, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _creation.zeros(num_features, dtype=dtype or D.float32, device=device))
            self.register_buffer("running_var", _creation.ones(num_features, dtype=dtype or D.float32, device=device))
            self.register_buffer("num_batches_tracked", _creation.tensor(0, dtype=D.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, input):
        n = self._batched_ndim
        if input.ndim not in (n - 1, n):
            raise ValueError(f"expected {n - 1}D or {n}D input (got {input.ndim}D input)")
        unbatched = input.ndim == n - 1
        x = input.unsqueeze(0) if unbatched else input
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"expected input's size at dim=1 to match num_features ({self.num_features}), but got: "
                             f"{x.shape[1]}.")
        # (torch's InstanceNorm never counts batches, and momentum=None leaves the running stats as
        # they are: its forward passes 0.0)
        use_input_stats = self.training or not self.track_running_stats
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
                            self.momentum if self.momentum is not None else 0.0, self.eps)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self._has_bias}, track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    _batched_ndim = 3


class InstanceNorm2d(_InstanceNorm):
    _batched_ndim = 4


class InstanceNorm3d(_InstanceNorm):
    _batched_ndim = 5


class BatchNorm3d(_BatchNorm):
    _dims = (5,)


class SyncBatchNorm(_BatchNorm):
    """torch's SyncBatchNorm in one process: batch norm over any input of 2 or more dims (in
    training, the statistics of the batch it sees; there are no other processes to share them
    with). It is here so that models trained with it (convert_sync_batchnorm) load and run."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*d replaced by a SyncBatchNorm holding the same parameters and
        buffers (the module itself when it is one), as torch's."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group, bias=module._has_bias)
            for store in ("_parameters", "_buffers"):
                for name, value in getattr(module, store).items():
                    getattr(out, store)[name] = value
            out.train(module.training)
        for name, child in module._modules.items():
            out._modules[name] = cls.convert_sync_batchnorm(child, process_group)
        return out


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


# ---- padding -----------------------------------------------------------------------------------

def _padding(n, padding):
    if isinstance(padding, numbers.Integral):
        return (int(padding),) * (2 * n)
    padding = tuple(int(p) for p in padding)
    if len(padding) != 2 * n:
        raise ValueError(f"padding must be an int or a tuple of {2 * n} ints, got {padding}")
    return padding


def _pad_layer(name, n, mode):
    def __init__(self, padding, value=None):
        Module.__init__(self)
        self.padding = _padding(n, padding)
        self.value = 0.0 if value is None else float(value)

    def forward(self, input):
        if mode == "constant":
            return F.pad(input, list(self.padding), "constant", self.value)
        return F.pad(input, list(self.padding), mode)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if mode == "constant" else "")

    if mode == "constant" and name.startswith("Constant"):
        init_fn = __init__
    elif mode == "constant":  # ZeroPad: no value argument
        def init_fn(self, padding):
            __init__(self, padding, 0.0)
    else:
        def init_fn(self, padding):
            __init__(self, padding)
    return type(name, (Module,), {"__init__": init_fn, "forward": forward, "extra_repr": extra_repr,
                                  "__module__": __name__, "__qualname__": name})


ConstantPad1d = _pad_layer("ConstantPad1d", 1, "constant")
ConstantPad2d = _pad_layer("ConstantPad2d", 2, "constant")
ConstantPad3d = _pad_layer("ConstantPad3d", 3, "constant")
ZeroPad1d = _pad_layer("ZeroPad1d", 1, "constant")
ZeroPad3d = _pad_layer("ZeroPad3d", 3, "constant")
ReflectionPad1d = _pad_layer("ReflectionPad1d", 1, "reflect")
ReflectionPad2d = _pad_layer("ReflectionPad2d", 2, "reflect")
ReflectionPad3d = _pad_layer("ReflectionPad3d", 3, "reflect")
ReplicationPad1d = _pad_layer("ReplicationPad1d", 1, "replicate")
ReplicationPad2d = _pad_layer("ReplicationPad2d", 2, "replicate")
ReplicationPad3d = _pad_layer("ReplicationPad3d", 3, "replicate")
CircularPad1d = _pad_layer("CircularPad1d", 1, "circular")
CircularPad2d = _pad_layer("CircularPad2d", 2, "circular")
CircularPad3d = _pad_layer("CircularPad3d", 3, "circular")


# ---- fold/unfold, pools, distances -------------------------------------------------------------

class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class AdaptiveAvgPool1d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class MaxUnpool2d(Module):
    """The inverse of MaxPool2d(return_indices=True): forward(input, indices, output_size=None)."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, input, indices, output_size=None):
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool1d(MaxUnpool2d):
    def forward(self, input, indices, output_size=None):
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class AdaptiveMaxPool1d(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class LPPool1d(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return F.lp_pool1d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(LPPool1d):
    def forward(self, input):
        return F.lp_pool2d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class Bilinear(Module):
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(_empty((out_features, in1_features, in2_features), device, dtype))
        if bias:
            self.bias = Parameter(_empty((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class EmbeddingBag(Module):
    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx = padding_idx % num_embeddings
        self.padding_idx, self.mode, self.sparse, self.include_last_offset = padding_idx, mode, sparse, \
            include_last_offset
        if _weight is None:
            self.weight = Parameter(_empty((num_embeddings, embedding_dim), device, dtype))
            init.normal_(self.weight)
            if padding_idx is not None:
                self.weight[padding_idx] = 0.0
        else:
            self.weight = Parameter(_weight)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)


# ---- dropouts ----------------------------------------------------------------------------------

def _dropout_layer(name, fn_name):
    def __init__(self, p=0.5, inplace=False):
        Module.__init__(self)
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return getattr(F, fn_name)(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"

    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__module__": __name__, "__qualname__": name})


Dropout1d = _dropout_layer("Dropout1d", "dropout1d")
Dropout2d = _dropout_layer("Dropout2d", "dropout2d")
Dropout3d = _dropout_layer("Dropout3d", "dropout3d")
AlphaDropout = _dropout_layer("AlphaDropout", "alpha_dropout")
FeatureAlphaDropout = _dropout_layer("FeatureAlphaDropout", "feature_alpha_dropout")


# ---- aliases and containers --------------------------------------------------------------------

class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class ConvTranspose1d(ConvTranspose2d):
    """ConvTranspose2d's parameters over a unit height: weight [in, out / groups, k], as torch's."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        def one(v):
            return (v[0] if isinstance(v, (tuple, list)) else v)

        super().__init__(in_channels, out_channels, (1, one(kernel_size)), (1, one(stride)), (0, one(padding)),
                         (0, one(output_padding)), groups, bias, (1, one(dilation)), padding_mode, device, dtype)
        self.weight = Parameter(self.weight.squeeze(2).contiguous())
        self.kernel_size, self.stride = (one(kernel_size),), (one(stride),)
        self.padding, self.output_padding, self.dilation = (one(padding),), (one(output_padding),), (one(dilation),)

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ParameterDict(Module):
    """A dict of Parameters registered on the module (their state_dict keys are the dict's keys)."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

    def __delitem__(self, key):
        del self._parameters[key]

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def pop(self, key):
        return self._parameters.pop(key)

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in items:
            self[k] = v


class DataParallel(Module):
    """torch's DataParallel on one device: forward is the wrapped module's, and state_dict keys
    carry its "module." prefix, so code and checkpoints that use it run unchanged."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
