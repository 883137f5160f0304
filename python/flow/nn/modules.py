"""flow.nn.Module and Parameter, the minimal torch-compatible subset.

Attribute assignment registers Parameters and submodules (in order), as torch does; buffers via
register_buffer. ``__call__`` runs ``forward``. Under @flow.jit, parameters and buffers are graph
inputs bound to these objects at run time (see flow._jit), so new data of the same shape, dtype
and layout assigned to a parameter takes effect without recompiling.
"""
from collections import OrderedDict

from .. import _dtype as D
from .._tensor import Tensor


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter. Parameter(data) shares data's storage."""

    def __new__(cls, data=None, requires_grad=True):
        from .. import _creation

        if data is None:
            data = _creation.empty(0)
        if not isinstance(data, Tensor):
            data = _creation.tensor(data)
        data._need_data("nn.Parameter()")
        p = cls._wrap(data._c)
        p._requires_grad = bool(requires_grad)
        return p

    @property
    def requires_grad(self):
        return getattr(self, "_requires_grad", True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __hash__ = Tensor.__hash__


class Module:
    """Base class of flow modules (torch.nn.Module's registration and traversal, no autograd)."""

    def __init__(self, *args, **kwargs):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())

    def _ensure_init(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameters/modules before Module.__init__() call")

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self._ensure_init()
            d.pop(name, None)
            self._buffers.pop(name, None)
            self._modules.pop(name, None)
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._ensure_init()
            d.pop(name, None)
            self._parameters.pop(name, None)
            self._buffers.pop(name, None)
            self._modules[name] = value
        elif "_parameters" in d and name in self._parameters:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(flow.nn.Parameter or None expected)")
            self._parameters[name] = None
        elif "_buffers" in d and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(flow.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, {}):
                del self.__dict__[store][name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name, tensor, persistent=True):
        self._ensure_init()
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(flow Tensor or None required)")
        self._buffers[name] = tensor

    def register_parameter(self, name, param):
        self._ensure_init()
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(flow.nn.Parameter or None required)")
        self._parameters[name] = param

    def add_module(self, name, module):
        self._ensure_init()
        self._modules[name] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- traversal ---------------------------------------------------------------------------

    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield mp + ("." if mp else "") + name, p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, b in m._buffers.items():
                if b is not None:
                    yield mp + ("." if mp else "") + name, b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes -------------------------------------------------------------------------------

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        return self

    def zero_grad(self, set_to_none=True):
        pass

    def to(self, *args, **kwargs):
        dtype = kwargs.get("dtype")
        for a in args:
            if not isinstance(a, (str, D.device)):
                dtype = a
        if dtype is not None:
            for m in self.modules():
                for name, p in list(m._parameters.items()):
                    if p is not None and p.dtype.is_floating_point:
                        m._parameters[name] = Parameter(p.to(dtype), p.requires_grad)
        return self

    def float(self):
        return self.to(D.float32)

    def half(self):
        return self.to(D.float16)

    def double(self):
        return self.to(D.float64)

    # ---- state -------------------------------------------------------------------------------

    def state_dict(self, prefix=""):
        out = OrderedDict()
        for name, p in self.named_parameters(prefix=prefix):
            out[name] = p.data
        for name, b in self.named_buffers(prefix=prefix):
            out[name] = b
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies values (flow tensors, numpy arrays or torch tensors) into the parameters and
        buffers in place (so compiled variants stay valid)."""
        from .. import _creation

        own = dict(self.named_parameters())
        own.update(dict(self.named_buffers()))
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: missing keys {missing}, "
                               f"unexpected keys {unexpected}")
        for k, t in own.items():
            if k not in state_dict:
                continue
            v = _creation.as_tensor(state_dict[k]) if not isinstance(state_dict[k], Tensor) else state_dict[k]
            if tuple(v.shape) != tuple(t.shape):
                raise RuntimeError(f"size mismatch for {k}: copying a param with shape {list(v.shape)}, "
                                   f"the shape in current model is {list(t.shape)}.")
            t.copy_(v)
        return missing, unexpected

    # ---- printing ----------------------------------------------------------------------------

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(([extra] if extra else []) + lines) + "\n)"


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class Identity(Module):
    def forward(self, x):
        return x


def _activation(name, fn_name, **defaults):
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        params = dict(defaults)
        keys = list(defaults)
        for k, v in zip(keys, args):
            params[k] = v
        params.update(kwargs)
        for k, v in params.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_fn_kwargs", {k: params[k] for k in keys if k != "inplace"})

    def forward(self, x):
        from . import functional as F

        return getattr(F, fn_name)(x, **self._fn_kwargs)

    def extra_repr(self):
        return ", ".join(f"{k}={v!r}" for k, v in self._fn_kwargs.items())

    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__module__": __name__})


ReLU = _activation("ReLU", "relu", inplace=False)
GELU = _activation("GELU", "gelu", approximate="none")
SiLU = _activation("SiLU", "silu", inplace=False)
Sigmoid = _activation("Sigmoid", "sigmoid")
Tanh = _activation("Tanh", "tanh")
Softmax = _activation("Softmax", "softmax", dim=None)
LogSoftmax = _activation("LogSoftmax", "log_softmax", dim=None)


