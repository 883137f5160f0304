"""The changes flow.jit's cached bindings of a module depend on, counted (python/flow/_jit.py).

Note: a jitted module's parameters and buffers are bound by name at every call. To keep a steady
call from touching every weight (on MobileNetV3, 267 Python objects that are cache misses after
the model's kernels ran: ~0.2 ms), flow counts the only two ways a binding can change:
  - structure: a module's parameters, buffers or children changed (flow/nn/_module_store.py);
  - rebinds: a Tensor was given another flow._C tensor (`.data =`, an out= resize;
    flow/_tensor.py `rebind`), the only way its shape, dtype or strides change.
Each counter moves *after* its change is made, so a reader that sees the new count sees the new
binding. Listeners (flow.jit's drop of the graph-input templates it keeps) run at every change.
"""

_structure = 0
_rebinds = 0
_listeners = []


def structure_version() -> int:
    """Changes made so far to any module's parameters, buffers or children."""
    return _structure


def rebinds() -> int:
    """Tensors given another flow._C tensor so far."""
    return _rebinds


def structure_changed() -> None:
    global _structure
    _structure += 1
    _notify()


def rebound() -> None:
    global _rebinds
    _rebinds += 1
    _notify()


def on_change(fn) -> None:
    """Calls fn() after every counted change."""
    _listeners.append(fn)


def _notify() -> None:
    for fn in _listeners:
        fn()
