"""More of torch's namespace and Tensor methods, as compositions of flow's ops: broadcast_tensors,
isin, fmax/fmin, isneginf/isposinf/isreal, logaddexp2, ldexp, inner, vdot, addr, addbmm,
chain_matmul, cov, corrcoef, renorm, unravel_index; torch's top-level spellings of nn.functional
(with torch's argument orders: torch.batch_norm, torch.embedding(weight, indices), ...) and of the
in-place ops (torch.relu_(x)); and the Tensor aliases and in-place forms torch has (greater, eq_,
addmm_, cumprod_, swapaxes_, ...).

Note: every function here is a composition, so it traces under @flow.jit and fuses like any other;
the comparisons' in-place forms write 0/1 in the tensor's own dtype, as torch's do.
"""
import builtins
import math
import numbers
import warnings


from . import _dtype as D
from . import _math
from . import _ops
from ._creation import ones_like, zeros_like
from ._tensor import Tensor, _normalize_dim

__all__ = ["broadcast_tensors", "isin", "fmax", "fmin", "isneginf", "isposinf", "isreal", "logaddexp2", "ldexp",
           "inner", "vdot", "addr", "addbmm", "chain_matmul", "cov", "corrcoef", "renorm", "unravel_index"]


def broadcast_tensors(*tensors):
    """Each tensor expanded (a view) to the shape they broadcast to."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = _math.broadcast_shapes(*[t.shape for t in tensors])
    return tuple(t.expand(list(shape)) for t in tensors)


def _as_tensor(v, like):
    from ._creation import tensor

    return v if isinstance(v, Tensor) else tensor(v, device=like.device if isinstance(like, Tensor) else None)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` is among `test_elements` (either may be a number): an
    equality against every test element, reduced with any."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() received an invalid combination of arguments: at least one of elements and "
                        "test_elements must be a Tensor")
    e = _as_tensor(elements, test_elements)
    t = _as_tensor(test_elements, e).reshape(-1)
    hit = _ops.any(_ops.eq(e.unsqueeze(-1), t), -1) if t.numel() else zeros_like(e, dtype=D.bool_)
    return _ops.logical_not(hit) if invert else hit


def _nan_ignoring(op):
    """op (maximum or minimum) taking the other value where one is NaN (NaN only where both are)."""

    def f(input, other, *, out=None):
        m = op(input, other)
        if m.dtype.is_floating_point:
            r = _ops.where(_ops.isnan(input), other, _ops.where(_ops.isnan(other), input, m))
            m = r if r.dtype is m.dtype else _ops._cast(r, m.dtype)
        return _ops._out(f.__name__, out, m)

    return f


fmax = _nan_ignoring(_ops.maximum)
fmin = _nan_ignoring(_ops.minimum)
fmax.__name__ = fmax.__qualname__ = "fmax"
fmin.__name__ = fmin.__qualname__ = "fmin"


def isneginf(input):
    return _ops.logical_and(_ops.isinf(input), _ops.lt(input, 0)) if input.dtype.is_floating_point else \
        zeros_like(input, dtype=D.bool_)


def isposinf(input):
    return _ops.logical_and(_ops.isinf(input), _ops.gt(input, 0)) if input.dtype.is_floating_point else \
        zeros_like(input, dtype=D.bool_)


def isreal(input):
    """flow has no complex dtypes: every element is real."""
    return ones_like(input, dtype=D.bool_)


def logaddexp2(input, other, *, out=None):
    """log2(2^a + 2^b): logaddexp's formula (equal infinities give themselves) in base 2."""
    dtype = _math._common_type(input, other)
    if not dtype.is_floating_point:  # (as torch's CPU kernel)
        raise NotImplementedError(f"\"logaddexp2_cpu\" not implemented for '{dtype._torch_short}'")
    ln2 = math.log(2.0)
    return _ops._out("logaddexp2", out, _math._logaddexp(input * ln2, other * ln2) * (1.0 / ln2))


def ldexp(input, other, *, out=None):
    """input * 2^other, in input's floating type (float32 for integers)."""
    x = input if input.dtype.is_floating_point else _ops._cast(input, D.float32)
    r = x * _ops.pow(2.0, other if not isinstance(other, Tensor) or other.dtype.is_floating_point
                     else _ops._cast(other, x.dtype))
    return _ops._out("ldexp", out, r)


def inner(input, other, *, out=None):
    """The sums of products over the last dims: shape input.shape[:-1] + other.shape[:-1]."""
    if input.ndim == 0 or other.ndim == 0:
        r = input * other
    else:
        if input.shape[-1] != other.shape[-1]:
            raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                               f"{list(input.shape)} and {list(other.shape)}")
        n = input.shape[-1]
        flat = _ops.matmul(input.reshape(-1, n), other.reshape(-1, n).t())
        r = flat.reshape(list(input.shape[:-1]) + list(other.shape[:-1]))
    return _ops._out("inner", out, r)


def vdot(input, other, *, out=None):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return _ops._out("vdot", out, _ops.dot(input, other))


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * outer(vec1, vec2) (addmm's rule: beta 0 ignores input, NaN too)."""
    x = _ops._tensor_arg("addr", input, "input", 1)
    return _ops._out("addr", out, _ops._scaled_sum("addr", x, _ops.outer(vec1, vec2), beta, alpha))


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    x = _ops._tensor_arg("addbmm", input, "input", 1)
    return _ops._out("addbmm", out, _ops._scaled_sum("addbmm", x, _ops.sum(_ops.bmm(batch1, batch2), 0), beta, alpha))


def chain_matmul(*matrices, out=None):
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. "
                  "Use torch.linalg.multi_dot instead.", stacklevel=2)
    from . import linalg

    return _ops._out("chain_matmul", out, linalg.multi_dot(list(matrices)))


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the rows of input (variables) over its columns (observations), weighted by
    frequency and/or observation weights, as numpy's and torch's cov."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = _ops._cast(x, D.float32)
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = _ops._cast(fweights, x.dtype)
    if aweights is not None:
        w = _ops._cast(aweights, x.dtype) if w is None else w * aweights
    if w is None:
        avg = _ops.mean(x, 1, keepdim=True)
        w_sum = builtins.float(n)
        norm = w_sum - correction
        centered = x - avg
        c = _ops.matmul(centered, centered.t())
    else:
        w_sum = _ops.sum(w)
        avg = _ops.sum(x * w, 1, keepdim=True) / w_sum
        norm = w_sum - correction if aweights is None else \
            w_sum - correction * _ops.sum(w * aweights) / w_sum
        centered = x - avg
        c = _ops.matmul(centered * w, centered.t())
    if isinstance(norm, builtins.float) and norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", stacklevel=2)
        norm = 0.0
    elif isinstance(norm, Tensor):
        norm = _ops.clamp(norm, min=0)
    c = c / norm
    return c.reshape([]) if input.ndim < 2 else c


def corrcoef(input):
    """cov normalized by the standard deviations, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = _math.diagonal(c)
    sd = _ops.sqrt(d)
    c = c / sd.unsqueeze(1) / sd.unsqueeze(0)
    return _ops.clamp(c, -1, 1)


def renorm(input, p, dim, maxnorm, *, out=None):
    """Each slice along dim whose p-norm exceeds maxnorm scaled to maxnorm / (norm + 1e-7) of itself."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"renorm: expected a floating point input, got {input.dtype._torch_short}")
    if builtins.float(p) <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if builtins.float(maxnorm) < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = _normalize_dim(dim, input.ndim)
    others = [i for i in range(input.ndim) if i != d]
    wide = _ops._cast(input, D.float32) if input.dtype in (D.float16, D.bfloat16) else input
    norms = _ops.norm(wide, builtins.float(p), others, keepdim=True) if others else _ops.abs(wide)
    scale = _ops.where(_ops.gt(norms, builtins.float(maxnorm)), builtins.float(maxnorm) / (norms + 1e-7), 1.0)
    r = _ops._cast(wide * scale, input.dtype) if wide is not input else input * scale
    return _ops._out("renorm", out, r)


def unravel_index(indices, shape):
    """The coordinates of flat indices in a tensor of `shape` (a tuple of int64 tensors)."""
    from ._creation import tensor

    ix = indices if isinstance(indices, Tensor) else tensor(indices)
    if ix.dtype.is_floating_point or ix.dtype is D.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {ix.dtype}")
    shape = [builtins.int(s) for s in ([shape] if isinstance(shape, numbers.Integral) else shape)]
    if builtins.min(shape + [0]) < 0:
        raise ValueError("'shape' cannot have negative values, but got " + str(tuple(shape)))
    total = math.prod(shape)
    ix = ix if ix.dtype is D.int64 else _ops._cast(ix, D.int64)
    if ix._c is not None and ix.numel():
        lo, hi = builtins.int(ix.min().item()), builtins.int(ix.max().item())
        if lo < -total or hi >= total:
            raise RuntimeError(f"index {hi if hi >= total else lo} is out of bounds for shape {tuple(shape)}")
    ix = _ops.where(_ops.lt(ix, 0), ix + total, ix)
    out = []
    stride = total
    for s in shape:
        stride = stride // s if s else 0
        out.append(_ops.remainder(_ops.div(ix, stride, rounding_mode="floor"), s) if stride else ix * 0)
    return tuple(out)


# ---- torch's top-level spellings of nn.functional, in torch's argument orders ----------------------------


def _install_toplevel(flow):
    F = flow.nn.functional

    def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True):
        return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)

    def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                      cudnn_enabled=True):
        return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)

    def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
        return F.layer_norm(input, normalized_shape, weight, bias, eps)

    def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
        return F.group_norm(input, num_groups, weight, bias, eps)

    def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
        return F.embedding(indices, weight)  # (padding_idx only affects gradients)

    def dropout(input, p, train):
        return F.dropout(input, p, train)

    def constant_pad_nd(input, pad, value=0):
        return F.pad(input, list(pad), value=value)

    def threshold(input, threshold, value):
        return F.threshold(input, threshold, value)

    names = {"batch_norm": batch_norm, "instance_norm": instance_norm, "layer_norm": layer_norm,
             "group_norm": group_norm, "embedding": embedding, "dropout": dropout, "constant_pad_nd": constant_pad_nd,
             "threshold": threshold}
    for name in ("pixel_shuffle", "pixel_unshuffle", "prelu", "selu", "celu", "rrelu", "hardshrink", "bilinear",
                 "cosine_similarity", "pairwise_distance", "channel_shuffle", "native_channel_shuffle", "alpha_dropout",
                 "feature_alpha_dropout", "rms_norm", "selu_", "celu_", "rrelu_", "threshold_", "relu_"):
        names.setdefault(name, getattr(F, name))
    for name, fn in names.items():
        if not hasattr(flow, name):
            setattr(flow, name, fn)
    # torch.<op>_(x, ...) for the in-place methods flow has
    for name in ("abs_", "acos_", "acosh_", "asin_", "asinh_", "atan_", "atanh_", "arccos_", "arccosh_", "arcsin_",
                 "arcsinh_", "arctan_", "arctanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_",
                 "cosh_", "erf_", "erfc_", "exp_", "exp2_", "expm1_", "fix_", "floor_", "frac_", "log_", "log10_",
                 "log1p_", "log2_", "logit_", "nan_to_num_", "neg_", "negative_", "reciprocal_", "round_", "rsqrt_",
                 "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_",
                 "deg2rad_", "rad2deg_", "ldexp_", "index_put_", "fill_", "zero_"):
        if hasattr(Tensor, name) and not hasattr(flow, name):
            setattr(flow, name, getattr(Tensor, name))


# ---- Tensor methods ---------------------------------------------------------------------------------------


def _compare_inplace(op):
    def m(self, other):
        return self._assign(op + "_", _ops._cast(getattr(_ops, op)(self, other), self.dtype), check_cast=False)

    m.__name__ = m.__qualname__ = op + "_"
    return m


def _install_methods():
    for alias, op in (("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
                      ("not_equal", "ne")):
        setattr(Tensor, alias, getattr(Tensor, op))
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        setattr(Tensor, op + "_", _compare_inplace(op))
    for alias, op in (("greater_", "gt"), ("greater_equal_", "ge"), ("less_", "lt"), ("less_equal_", "le"),
                      ("not_equal_", "ne")):
        setattr(Tensor, alias, _compare_inplace(op))
    methods = {"isneginf": isneginf, "isposinf": isposinf, "isreal": isreal, "fmax": fmax, "fmin": fmin,
               "logaddexp2": logaddexp2, "ldexp": ldexp, "inner": inner, "vdot": vdot, "addmv": _ops.addmv, "addr": addr,
               "addbmm": addbmm, "renorm": renorm, "cov": cov, "corrcoef": corrcoef}
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    for name, fn in (("addmv_", _ops.addmv), ("addr_", addr), ("addbmm_", addbmm), ("renorm_", renorm),
                     ("ldexp_", ldexp), ("addmm_", _ops.addmm), ("baddbmm_", _ops.baddbmm),
                     ("cumprod_", _ops.cumprod), ("logical_xor_", _ops.logical_xor),
                     ("bitwise_not_", _ops.bitwise_not)):
        def m(self, *args, _fn=fn, _name=name, **kwargs):
            return self._assign(_name, _fn(self, *args, **kwargs))

        m.__name__ = m.__qualname__ = name
        setattr(Tensor, name, m)
    for name, base in (("absolute_", "abs_"), ("negative_", "neg_"), ("fix_", "trunc_"), ("arccos_", "acos_"),
                       ("arcsin_", "asin_"), ("arctan_", "atan_"), ("arccosh_", "acosh_"), ("arcsinh_", "asinh_"),
                       ("arctanh_", "atanh_")):
        if hasattr(Tensor, base) and not hasattr(Tensor, name):
            setattr(Tensor, name, getattr(Tensor, base))
    def float_power_(self, exponent):
        if self.dtype is not D.float64:
            raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype._torch_short} but the "
                               "operation's result requires dtype Double")
        return self._assign("float_power_", _math.float_power(self, exponent))

    Tensor.float_power_ = float_power_
    Tensor.positive = lambda self: self
    Tensor.swapaxes_ = Tensor.transpose_
    Tensor.swapdims_ = Tensor.transpose_
    Tensor.is_signed = lambda self: self.dtype.is_signed
    Tensor.get_device = lambda self: -1 if self.device.type == "cpu" else (self.device.index or 0)
    Tensor.is_cpu = property(lambda self: self.device.type == "cpu")
    Tensor.is_leaf = property(lambda self: True)  # (no autograd: every tensor is a leaf)
    Tensor.detach_ = lambda self: self

    def sum_to_size(self, *size):
        """The sum of this tensor down to `size`, which it must be expandable from (torch's)."""
        from ._tensor import _sizes_arg

        size = list(_sizes_arg(size))
        lead = self.ndim - len(size)
        if lead < 0 or any(s not in (1, n) for s, n in zip(size, self.shape[lead:])):
            raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                               f"{{{', '.join(map(str, self.shape))}}}.")
        dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and self.shape[lead + i] != 1]
        return _ops.sum(self, dims, keepdim=True).reshape(size) if dims else self

    Tensor.sum_to_size = sum_to_size


_install_methods()
