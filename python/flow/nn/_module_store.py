"""The dicts that hold a module's parameters, buffers and children.

Note: every change to any module's parameters, buffers or children (assignment, deletion,
register_*, ``_apply``, direct writes to ``module._parameters[...]``) bumps one process-wide
counter, so that flow.jit can reuse its name -> tensor walk of a module tree for as long as the
counter stands still. The walk cost ~0.3 ms per call on MobileNetV3 (267 tensors under ~200
modules), more than the rest of the call's Python together. One counter for all trees: a change
in an unrelated model only costs the next call one walk.

A tensor's *data* (``param.data = ...``, in-place ops) is not structure; flow.jit guards it per
tensor (flow/_jit.py).
"""
from collections import OrderedDict

__all__ = ["ModuleStore", "structure_version", "mark_changed"]

_version = 0


def structure_version() -> int:
    """The number of changes made so far to any ModuleStore."""
    return _version


def _bump():
    global _version
    _version += 1


def mark_changed():
    """Counts a change made other than through a ModuleStore's methods (a whole store replaced)."""
    _bump()


class ModuleStore(OrderedDict):
    """An OrderedDict that counts its changes in structure_version(). update, |= and setdefault
    go through __setitem__; OrderedDict's pop, popitem and clear do not, so they count here."""

    __slots__ = ()

    def __setitem__(self, key, value):
        _bump()
        super().__setitem__(key, value)

    def __delitem__(self, key):
        _bump()
        super().__delitem__(key)

    def pop(self, *args):
        _bump()
        return super().pop(*args)

    def popitem(self, last=True):
        _bump()
        return super().popitem(last)

    def clear(self):
        _bump()
        super().clear()
