"""torch.nn.utils.spectral_norm / remove_spectral_norm: weight = weight_orig / sigma, sigma the
largest singular value of weight_orig (as a [out, -1] matrix) estimated by power iteration with the
vectors u and v kept as buffers.

Note: as weight_norm (weight_norm.py), the weight is a derived attribute computed on each access,
under torch's state_dict names (weight_orig, weight_u, weight_v). In training mode an access runs
n_power_iterations steps and writes u and v back in place, as torch's forward pre-hook does (under
@flow.jit a mutation of the buffers that every run repeats); in eval mode it uses u and v as they
are, so a torch checkpoint's eval output is reproduced exactly.
"""
from ... import _creation
from ... import _ops
from ..modules import Parameter
from .weight_norm import _derived, _take_parameter

__all__ = ["spectral_norm", "remove_spectral_norm"]


def _matrix(w, dim):
    if dim != 0:
        w = w.permute([dim] + [d for d in range(w.ndim) if d != dim])
    return w.reshape(w.shape[0], -1)


def _normalize(x, eps):
    from .. import functional as F

    return F.normalize(x, dim=0, eps=eps)


def _spectrally_normed(module, name, n_power_iterations, dim, eps):
    w = getattr(module, name + "_orig")
    u, v = module._buffers[name + "_u"], module._buffers[name + "_v"]
    mat = _matrix(w, dim)
    if module.training and n_power_iterations > 0:
        new_u, new_v = u, v
        for _ in range(n_power_iterations):
            new_v = _normalize(_ops.mv(mat.t(), new_u), eps)
            new_u = _normalize(_ops.mv(mat, new_v), eps)
        u.copy_(new_u)
        v.copy_(new_v)
        u, v = new_u, new_v
    sigma = _ops.dot(u, _ops.mv(mat, v))
    return w / sigma


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    from ..layers import ConvTranspose2d
    from ..layers_3d import ConvTranspose3d

    if name in _derived(module):
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    if n_power_iterations <= 0:
        raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations="
                         f"{n_power_iterations}")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose2d, ConvTranspose3d)) else 0  # (ConvTranspose1d is a 2d one)
    w = _take_parameter(module, name)
    mat = _matrix(w, dim)
    u = _normalize(_creation.randn(mat.shape[0], dtype=w.dtype, device=w.device), eps)
    v = _normalize(_creation.randn(mat.shape[1], dtype=w.dtype, device=w.device), eps)
    module.register_parameter(name + "_orig", Parameter(w))
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    _derived(module)[name] = lambda m: _spectrally_normed(m, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    derived = _derived(module)
    if name not in derived or name + "_orig" not in module._parameters:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    training = module.training
    module.training = False  # (the weight as it stands: no more power iteration)
    w = derived.pop(name)(module)
    module.training = training
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_u"]
    del module._buffers[name + "_v"]
    module.register_parameter(name, Parameter(w.contiguous()))
    return module
