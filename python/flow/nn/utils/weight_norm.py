"""torch.nn.utils.weight_norm / remove_weight_norm and torch.nn.utils.parametrizations.weight_norm
(with parametrize.remove_parametrizations / is_parametrized for it): weight = g * v / ||v||.

Note: torch recomputes the weight in a forward pre-hook (the old API) or a parametrization (the
new one). flow keeps g and v as parameters under torch's state_dict names (`weight_g`/`weight_v`,
or `parametrizations.weight.original0/1`) and makes the weight a derived attribute, computed from
them on each access (flow.nn.Module's `_derived`): the layer's forward reads it as before, eagerly
or traced (under @flow.jit it is parameter-only work, computed once per weight version), and a
read outside forward is never stale. spectral_norm (spectral_norm.py) works the same way.
"""
import warnings

from ... import _ops
from ..modules import Module, Parameter

__all__ = ["weight_norm", "remove_weight_norm"]


def _norm_except_dim(v, dim):
    """The 2-norm of v over every dim but `dim`, keeping dims; torch's dim -1 is the whole tensor."""
    if dim == -1:
        return _ops.norm(v)
    return _ops.norm(v, 2, [i for i in range(v.ndim) if i != dim], keepdim=True)


def _weight_norm(v, g, dim):
    return v * (g / _norm_except_dim(v, dim))


def _derived(module):
    d = module.__dict__.get("_derived")
    if d is None:
        d = {}
        object.__setattr__(module, "_derived", d)
    return d


def _take_parameter(module, name):
    if name not in module._parameters or module._parameters[name] is None:
        raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
    w = module._parameters[name]
    del module._parameters[name]
    return w


def weight_norm(module, name="weight", dim=0):
    """Replaces parameter `name` by `name`_g (its norm over every dim but `dim`) and `name`_v (its
    direction), as torch's; dim=None normalizes the whole tensor."""
    warnings.warn("torch.nn.utils.weight_norm is deprecated in favor of torch.nn.utils.parametrizations.weight_norm.",
                  FutureWarning, stacklevel=2)
    if name in _derived(module):
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    dim = -1 if dim is None else dim
    w = _take_parameter(module, name)
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(w, dim).clone()))
    module.register_parameter(name + "_v", Parameter(w))
    _derived(module)[name] = lambda m: _weight_norm(getattr(m, name + "_v"), getattr(m, name + "_g"), dim)
    return module


def remove_weight_norm(module, name="weight"):
    """The weight computed once and registered back as a plain parameter."""
    derived = _derived(module)
    if name not in derived or name + "_g" not in module._parameters:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    w = derived.pop(name)(module)
    del module._parameters[name + "_g"]
    del module._parameters[name + "_v"]
    module.register_parameter(name, Parameter(w.contiguous()))
    return module


class _WeightNorm(Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)


class ParametrizationList(Module):
    """Holds a parametrized tensor's originals (original0 = g, original1 = v) under torch's names."""

    def __init__(self, parametrization, originals):
        super().__init__()
        self._modules["0"] = parametrization
        for i, t in enumerate(originals):
            self.register_parameter(f"original{i}", Parameter(t))

    def forward(self):
        return self._modules["0"](self.original0, self.original1)


def parametrized_weight_norm(module, name="weight", dim=0):
    """torch.nn.utils.parametrizations.weight_norm: the same g and v, as
    module.parametrizations[name].original0 / original1."""
    from ..modules import ModuleDict

    if "parametrizations" in module._modules and name in module._modules["parametrizations"]._modules:
        raise ValueError(f"flow: {name} is already parametrized")
    dim = -1 if dim is None else dim
    w = _take_parameter(module, name)
    plist = ParametrizationList(_WeightNorm(dim), [_norm_except_dim(w, dim).clone(), w])
    if "parametrizations" not in module._modules:
        module.parametrizations = ModuleDict()
    module.parametrizations[name] = plist
    _derived(module)[name] = lambda m: m.parametrizations[name]()
    return module


def is_parametrized(module, tensor_name=None):
    p = module._modules.get("parametrizations")
    if p is None:
        return False
    return bool(p._modules) if tensor_name is None else tensor_name in p._modules


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """The parametrized tensor computed once and registered back as a plain parameter."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    if not leave_parametrized:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                         "in terms of a sequence of tensors.")
    w = _derived(module).pop(tensor_name)(module)
    del module.parametrizations._modules[tensor_name]
    if not module.parametrizations._modules:
        del module._modules["parametrizations"]
    module.register_parameter(tensor_name, Parameter(w.contiguous()))
    return module
