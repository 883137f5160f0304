"""flow.nn.Module and Parameter, and the containers (Sequential, ModuleList, ModuleDict).

Attribute assignment registers Parameters and submodules (in order), as torch does; buffers via
register_buffer (persistent or not). ``__call__`` runs forward pre-hooks, ``forward`` and forward
hooks. Under @flow.jit, parameters and buffers are graph inputs bound to these objects at run time
(see flow._jit), so new data of the same shape, dtype and layout assigned to a parameter takes
effect without recompiling; ``load_state_dict`` copies in place for the same reason.

The layers live in the sibling files (activation, linear/conv/norm/pooling in layers.py,
attention and transformer layers in transformer.py) and are re-exported by flow.nn.
"""
import itertools
from collections import OrderedDict, namedtuple

import numpy as np

from .. import _dtype as D
from .._epoch import structure_changed
from .._tensor import Tensor
from ._module_store import ModuleStore


def _data_of(data):
    """Parameter's and Buffer's data argument as a Tensor (None: an empty one)."""
    from .. import _creation

    if data is None:
        return _creation.empty(0)
    return data if isinstance(data, Tensor) else _creation.tensor(data)


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter. Parameter(data) shares data's storage."""

    def __new__(cls, data=None, requires_grad=True):
        data = _data_of(data)
        data._need_data("nn.Parameter()")
        p = cls._wrap(data._c)
        p._requires_grad = bool(requires_grad)
        return p

    @property
    def requires_grad(self):
        return getattr(self, "_requires_grad", True)

    def requires_grad_(self, requires_grad=True):
        self._requires_grad = bool(requires_grad)
        return self

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __hash__ = Tensor.__hash__


class _BufferMeta(type):
    def __instancecheck__(cls, obj):  # torch's: a tensor made by Buffer() counts as one
        return isinstance(obj, Tensor) and getattr(obj, "_is_buffer", False)


class Buffer(Tensor, metaclass=_BufferMeta):
    """torch.nn.Buffer(data, persistent=True): a plain Tensor (sharing data's storage) that a Module
    registers as a buffer when assigned as an attribute, persistent (in state_dict) or not."""

    def __new__(cls, data=None, *, persistent=True):
        data = _data_of(data)
        b = Tensor._wrap(data._c) if data._c is not None else data
        b._is_buffer = True
        b._buffer_persistent = bool(persistent)
        return b


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    _ids = itertools.count()

    def __init__(self, store):
        self._store = store
        self.id = next(RemovableHandle._ids)

    def remove(self):
        self._store.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _to_flow(v, like):
    """A state-dict value (flow tensor, torch tensor, numpy array, number) as a flow tensor."""
    from .. import _creation

    if isinstance(v, Tensor):
        return v
    if isinstance(v, (int, float, bool, np.ndarray, np.generic, list)):
        return _creation.tensor(np.asarray(v), dtype=like.dtype)
    return _creation.as_tensor(v)


_STORES = ("_parameters", "_buffers", "_modules")


class Module:
    """Base class of flow modules (torch.nn.Module's registration, traversal and state; no autograd)."""

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", ModuleStore())
        object.__setattr__(self, "_buffers", ModuleStore())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", ModuleStore())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

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
        elif isinstance(value, Tensor) and getattr(value, "_is_buffer", False):  # an nn.Buffer
            d.pop(name, None)
            self.register_buffer(name, value, persistent=value._buffer_persistent)
        elif "_parameters" in d and name in self._parameters:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(flow.nn.Parameter or None expected)")
            self._parameters[name] = None
        elif "_modules" in d and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(flow.nn.Module or None expected)")
            self._modules[name] = None
        elif "_buffers" in d and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(flow.Tensor or None expected)")
            self._buffers[name] = value
        else:
            if name in _STORES:  # a whole store replaced (empty, too): flow.jit's cached walks are stale
                object.__setattr__(self, name, ModuleStore(value))
                structure_changed()  # after the change: a reader seeing the count sees the new store
                return
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        derived = d.get("_derived")  # tensors computed from parameters on each access (weight_norm)
        if derived and name in derived:
            return derived[name](self)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, {}):
                del self.__dict__[store][name]
                self.__dict__.get("_non_persistent_buffers_set", set()).discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__())
        for store in ("_parameters", "_buffers", "_modules"):
            keys += list(self.__dict__.get(store, {}))
        return sorted(set(keys))

    def _check_name(self, name, kind):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters and name not in self._buffers and \
                name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name, tensor, persistent=True):
        self._ensure_init()
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(flow Tensor or None required)")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        self._ensure_init()
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(flow.nn.Parameter or None required)")
        self._buffers.pop(name, None)
        self._modules.pop(name, None)
        self._parameters[name] = param

    def add_module(self, name, module):
        self._ensure_init()
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f'module name can\'t contain "." or be empty, got: "{name}"')
        self._parameters.pop(name, None)
        self._buffers.pop(name, None)
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        m = self
        for part in target.split(".") if target else []:
            if part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}`")
            m = m._modules[part]
        return m

    def get_parameter(self, target):
        mod, _, name = target.rpartition(".")
        m = self.get_submodule(mod)
        if name not in m._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return m._parameters[name]

    def get_buffer(self, target):
        mod, _, name = target.rpartition(".")
        m = self.get_submodule(mod)
        if name not in m._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return m._buffers[name]

    # ---- calling -----------------------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        pre, post = self.__dict__.get("_forward_pre_hooks"), self.__dict__.get("_forward_hooks")
        if not pre and not post:
            return self.forward(*args, **kwargs)
        for hook, with_kwargs in list(pre.values()):
            r = hook(self, args, kwargs) if with_kwargs else hook(self, args)
            if r is not None:
                if with_kwargs:
                    args, kwargs = r
                else:
                    args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(post.values()):
            r = hook(self, args, kwargs, out) if with_kwargs else hook(self, args, out)
            if r is not None:
                out = r
        return out

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        h = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[h.id] = (hook, with_kwargs)
        if prepend:
            self._forward_pre_hooks.move_to_end(h.id, last=False)
        return h

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        h = RemovableHandle(self._forward_hooks)
        self._forward_hooks[h.id] = (hook, with_kwargs)
        if prepend:
            self._forward_hooks.move_to_end(h.id, last=False)
        return h

    # ---- traversal ---------------------------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, t in getattr(m, store).items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield mp + ("." if mp else "") + name, t

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes -------------------------------------------------------------------------------

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        pass

    # ---- dtype / device ----------------------------------------------------------------------

    def _apply(self, fn):
        """Replaces every parameter by Parameter(fn(p)) and every buffer by fn(b) (new objects, as torch
        does when a conversion makes a copy)."""
        for m in self.modules():
            for name, p in list(m._parameters.items()):
                if p is not None:
                    q = fn(p)
                    if q is not p:
                        m._parameters[name] = Parameter(q, p.requires_grad)
            for name, b in list(m._buffers.items()):
                if b is not None:
                    m._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
        memory_format = kwargs.pop("memory_format", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (str, D.device)):
                device = a
            else:
                dtype = a
        if dtype is not None:
            dtype = D.to_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def conv(t):
            if device is not None:
                t = t.to(device)
            if dtype is not None and t.dtype.is_floating_point:
                t = t.to(dtype)
            if memory_format is not None and t.ndim == 4:  # torch converts 4-d weights only
                t = t.contiguous(memory_format=memory_format)
            return t

        return self._apply(conv)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda")

    def float(self):
        return self.to(D.float32)

    def half(self):
        return self.to(D.float16)

    def bfloat16(self):
        return self.to(D.bfloat16)

    def double(self):
        return self.to(D.float64)

    # ---- state -------------------------------------------------------------------------------

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """name -> tensor, torch's order: per module (pre-order) its parameters then its persistent
        buffers. The values are the module's own tensors (as torch's detached views)."""
        if args:
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
        out = OrderedDict() if destination is None else destination
        for mp, m in self.named_modules(prefix=prefix.rstrip(".") if prefix else ""):
            base = mp + "." if mp else ""
            for name, p in m._parameters.items():
                if p is not None:
                    out[base + name] = p if keep_vars else p.data
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent_buffers_set:
                    out[base + name] = b
        return out

    def _state_tensors(self):
        own = OrderedDict()
        for mp, m in self.named_modules(remove_duplicate=False):
            base = mp + "." if mp else ""
            for name, p in m._parameters.items():
                if p is not None:
                    own[base + name] = (m, "_parameters", name)
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent_buffers_set:
                    own[base + name] = (m, "_buffers", name)
        return own

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies values (flow tensors, torch tensors or numpy arrays) into the parameters and buffers
        in place, so compiled @flow.jit variants stay valid. strict: missing or unexpected keys are an
        error (else returned in the result). Shapes must match; values are converted to the
        destination dtype (as torch's copy_). Lazy layers (flow.nn.lazy) take their sizes from it first."""
        for prefix, m in list(self.named_modules()):
            if hasattr(m, "_materialize_from_state"):
                m._materialize_from_state(state_dict, prefix + "." if prefix else "")
        own = self._state_tensors()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        updates = []
        for k, (m, store, name) in own.items():
            if k not in state_dict:
                continue
            t = getattr(m, store)[name]
            v = _to_flow(state_dict[k], t)
            if tuple(v.shape) != tuple(t.shape):
                errors.append(f"size mismatch for {k}: copying a param with shape {list(v.shape)} from checkpoint, "
                              f"the shape in current model is {list(t.shape)}.")
                continue
            updates.append((m, store, name, t, v))
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        for m, store, name, t, v in updates:
            if assign:
                getattr(m, store)[name] = Parameter(v, t.requires_grad) if store == "_parameters" else v
            else:
                t.copy_(v)
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing ----------------------------------------------------------------------------

    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{self._get_name()}({extra})"
        return f"{self._get_name()}(\n  " + "\n  ".join(([extra] if extra else []) + lines) + "\n)"


# ---- containers ------------------------------------------------------------------------------------


def _index(i, n, what):
    i = int(i)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range")
    return i % n


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
        if isinstance(i, slice):
            return Sequential(OrderedDict(list(self._modules.items())[i]))
        return list(self._modules.values())[_index(i, len(self), "Sequential")]

    def __setitem__(self, i, module):
        key = list(self._modules)[_index(i, len(self), "Sequential")]
        self.add_module(key, module)

    def __delitem__(self, i):
        keys = list(self._modules)
        for k in (keys[i] if isinstance(i, slice) else [keys[_index(i, len(self), "Sequential")]]):
            del self._modules[k]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ModuleList(list(self._modules.values())[i])
        return self._modules[str(_index(i, len(self), "ModuleList"))]

    def __setitem__(self, i, module):
        self.add_module(str(_index(i, len(self), "ModuleList")), module)

    def __delitem__(self, i):
        mods = list(self._modules.values())
        del mods[i]
        self._modules.clear()
        for k, m in enumerate(mods):
            self.add_module(str(k), m)

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for k, m in enumerate(mods):
            self.add_module(str(k), m)


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key):
        return self._modules.pop(key)

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m


class ParameterList(Module):
    def __init__(self, values=None):
        super().__init__()
        for v in values or []:
            self.append(v)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, i):
        return self._parameters[str(_index(i, len(self), "ParameterList"))]

    def append(self, value):
        self.register_parameter(str(len(self)), value if isinstance(value, Parameter) else Parameter(value))
        return self
