"""Random sampling beyond rand/randn/randint: randperm, normal, bernoulli, multinomial, and the
in-place fills (Tensor.uniform_, normal_, bernoulli_, exponential_, log_normal_, cauchy_,
geometric_, random_).

Every sampler is a formula over uniform or standard normal draws (``_creation.uniform_draw`` /
``normal_draw``): eagerly those come from the host generator (``generator=`` or the default one),
under ``@flow.jit`` from the in-graph generator, so a compiled function draws new numbers on each
call. multinomial samples eagerly on the host (numpy's ``choice`` per row with replacement; without,
torch's exponential races: the k largest p / Exp(1), so that zero-weight categories are drawn,
last, when the others run out, as torch does); under ``@flow.jit`` it uses the Gumbel-max trick
(argmax of log p plus Gumbel noise, or its top k without replacement, which draws the same
distribution of sequences).
"""
import builtins
import math
import numbers

import numpy as np

from . import _dtype as D
from ._creation import _from_array, _place, _shape, counter_rand, normal_draw, uniform_draw
from ._dispatch import current_trace
from ._ops import _c10_name
from ._random import np_rng
from ._tensor import Tensor, _inplace_method, _method

__all__ = ["randperm", "normal", "bernoulli", "multinomial"]


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False):
    """torch.randperm: a random permutation of 0..n-1."""
    if isinstance(n, builtins.bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"randperm(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    dt = D.int64 if dtype is None else D.to_dtype(dtype)
    if current_trace() is not None:  # the order of n in-graph uniforms (ties, rare, keep index order)
        return uniform_draw([n], D.float32, device, generator, "randperm").argsort().to(dt)
    return _place(_from_array(np_rng(generator).permutation(n), dt), device)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """torch.normal: N(mean, std) with tensor or float mean and std (broadcast), or floats and a size."""
    tensors = [x for x in (mean, std) if isinstance(x, Tensor)]
    if size is not None:
        if tensors:
            raise TypeError("normal(): size can be given only with float mean and std")
        shape, dt = _shape((size,), "normal"), D.float32 if dtype is None else D.to_dtype(dtype)
    elif tensors:
        shape = list(np.broadcast_shapes(*(tuple(t.shape) for t in tensors)))
        dt = tensors[0].dtype  # torch's: mean's dtype when it is a tensor, else std's
        if not dt.is_floating_point:
            raise NotImplementedError(f'"normal_kernel_cpu" not implemented for \'{dt._torch_short}\'')
        device = tensors[0].device
    else:
        raise TypeError("normal() received an invalid combination of arguments: give tensor mean/std, or a size")
    if isinstance(std, Tensor):
        if current_trace() is None and std.numel() and (std < 0).any().item():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    z = normal_draw(shape, dt, device, generator, "normal")
    r = z * std + mean
    return r if r.dtype is dt else r.to(dt)  # (an operand of a wider type than mean's promotes)


def bernoulli(input, p=None, *, generator=None, out=None):
    """torch.bernoulli: 1 with probability ``input`` (or ``p``), else 0, in input's dtype."""
    if not input.dtype.is_floating_point and p is None:
        raise NotImplementedError(f'"bernoulli_tensor_cpu_p_" not implemented for \'{input.dtype._torch_short}\'')
    prob = input if p is None else p
    if isinstance(prob, Tensor) and current_trace() is None and prob.numel() and \
            ((prob < 0) | (prob > 1)).any().item():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    if not isinstance(prob, Tensor) and not 0 <= prob <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={prob}")
    u = uniform_draw(list(input.shape), D.float64 if input.dtype is D.float64 else D.float32, input.device,
                     generator, "bernoulli")
    return (u < prob).to(input.dtype)


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """torch.multinomial: indices drawn from the rows of ``input`` (non-negative weights)."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {input.dtype._torch_short}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n = input.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if current_trace() is not None:
        return _multinomial_gumbel(input, num_samples, replacement, generator)
    w = input.float().cpu().numpy().reshape(-1, n).astype(np.float64)
    if not np.isfinite(w).all() or (w < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    rng, rows = np_rng(generator), []
    for row in w:
        total = row.sum()
        if total <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if replacement:
            rows.append(rng.choice(n, size=num_samples, replace=True, p=row / total))
        else:  # exponential races, as torch: the k smallest Exp(1)/p; zero weights come last, in random order
            keys = row / rng.exponential(size=n)
            rows.append(np.lexsort((rng.random(n), -keys))[:num_samples])
    out_shape = [num_samples] if input.ndim == 1 else [input.shape[0], num_samples]
    return _place(_from_array(np.array(rows, dtype=np.int64).reshape(out_shape), D.int64), input.device)


def _multinomial_gumbel(input, num_samples, replacement, generator):
    shape = list(input.shape)
    logp = input.float().log()
    if replacement:  # one independent Gumbel-max draw per sample
        keys_shape = shape[:-1] + [num_samples, shape[-1]]
        u = uniform_draw(keys_shape, D.float32, input.device, generator, "multinomial")
        return (logp.unsqueeze(-2) - (-(u.clamp(min=1e-30)).log()).log()).argmax(-1)
    u = uniform_draw(shape, D.float32, input.device, generator, "multinomial")
    return (logp - (-(u.clamp(min=1e-30)).log()).log()).topk(num_samples, -1)[1]


# ---- in-place fills --------------------------------------------------------------------------------

def _float_fill(name, self):
    """torch's refusal of an in-place float fill of an integer tensor: its dtype dispatch's
    NotImplementedError."""
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f'"{name}" not implemented for \'{self.dtype._torch_short}\'')


def _continuous_fill(name, ctype, self):
    """exponential_ and cauchy_ check the dtype themselves first (a RuntimeError naming the C++ type
    as torch's message does: "Long" for exponential_, "long int" for cauchy_)."""
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{name} distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {ctype(self.dtype)}")


def _u(self, generator, fn):
    return uniform_draw(list(self.shape), D.float64 if self.dtype is D.float64 else D.float32, self.device,
                        generator, fn)


def _uniform(self, from_=0.0, to=1.0, *, generator=None, **kw):
    from_ = kw.pop("from", from_)
    _float_fill("check_uniform_bounds", self)
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}")
    return (_u(self, generator, "uniform_") * (to - from_) + from_).to(self.dtype)


def _normal(self, mean=0.0, std=1.0, *, generator=None):
    _float_fill("normal_kernel_cpu", self)
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return normal_draw(list(self.shape), self.dtype, self.device, generator, "normal_") * std + mean


def _bernoulli(self, p=0.5, *, generator=None):
    if isinstance(p, Tensor):
        p = p.expand(self.shape)
    elif not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return (_u(self, generator, "bernoulli_") < p).to(self.dtype)


def _exponential(self, lambd=1.0, *, generator=None):
    _continuous_fill("Exponential", lambda t: t._torch_short, self)
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return ((1.0 - _u(self, generator, "exponential_")).log() * (-1.0 / lambd)).to(self.dtype)


def _log_normal(self, mean=1.0, std=2.0, *, generator=None):
    _float_fill("log_normal_cpu", self)
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return (normal_draw(list(self.shape), D.float64 if self.dtype is D.float64 else D.float32, self.device,
                        generator, "log_normal_") * std + mean).exp().to(self.dtype)


def _cauchy(self, median=0.0, sigma=1.0, *, generator=None):
    _continuous_fill("Cauchy", _c10_name, self)
    return (((_u(self, generator, "cauchy_") - 0.5) * math.pi).tan() * sigma + median).to(self.dtype)


def _geometric(self, p, *, generator=None):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    # the number of trials up to the first success: ceil(log(1 - u) / log(1 - p)), at least 1
    k = ((1.0 - _u(self, generator, "geometric_")).log() / math.log1p(-p)).ceil().clamp(min=1.0)
    return k.to(self.dtype)


_RANDOM_TOP = {D.float16: 2 ** 11, D.bfloat16: 2 ** 8, D.float32: 2 ** 24, D.float64: 2 ** 53,
               D.int32: 2 ** 31 - 1, D.int64: 2 ** 63 - 1, D.bool_: 1, D.uint8: 2 ** 8 - 1, D.int8: 2 ** 7 - 1,
               D.int16: 2 ** 15 - 1}


def _random(self, from_=None, to=None, *, generator=None):
    """random_(): integers in [0, top] (top: the largest integer the dtype holds exactly, as
    torch); random_(to): [0, to); random_(from, to): [from, to)."""
    if from_ is None:
        low, high = 0, _RANDOM_TOP[self.dtype] + 1
    elif to is None:
        low, high = 0, from_
    else:
        low, high = from_, to
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if current_trace() is not None:
        u = counter_rand(list(self.shape), self.device).to(D.float64)
        return (u * float(high - low) + float(low)).floor().to(self.dtype)
    vals = np_rng(generator).integers(low, high, size=tuple(self.shape), dtype=np.int64, endpoint=False) \
        if high - low <= 2 ** 63 - 1 else np_rng(generator).integers(low, high - 1, size=tuple(self.shape),
                                                                      endpoint=True)
    return _place(_from_array(vals, self.dtype), self.device)


for _name, _fn in (("uniform_", _uniform), ("normal_", _normal), ("bernoulli_", _bernoulli),
                   ("exponential_", _exponential), ("log_normal_", _log_normal), ("cauchy_", _cauchy),
                   ("geometric_", _geometric), ("random_", _random)):
    setattr(Tensor, _name, _inplace_method(_name, _fn))
setattr(Tensor, "bernoulli", _method("bernoulli", bernoulli))
setattr(Tensor, "multinomial", _method("multinomial", multinomial))
del _name, _fn
