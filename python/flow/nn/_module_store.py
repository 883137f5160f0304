"""The dicts that hold a module's parameters, buffers and children.

Note: every change to any module's parameters, buffers or children (assignment, deletion,
register_*, ``_apply``, direct writes to ``module._parameters[...]``) bumps one process-wide
counter (flow/_epoch.py) after the change, so that flow.jit can reuse its name -> tensor walk of
a module tree for as long as the counter stands still. The walk cost ~0.3 ms per call on
MobileNetV3 (267 tensors under ~200 modules), more than the rest of the call's Python together.
One counter for all trees: a change in an unrelated model only costs the next call one walk.
(Module.__setattr__ counts a whole store replaced.)
"""
from collections import OrderedDict

from .._epoch import structure_changed

__all__ = ["ModuleStore"]


class ModuleStore(OrderedDict):
    """An OrderedDict that counts its changes in structure_version(). update, |= and setdefault
    go through __setitem__; OrderedDict's pop, popitem and clear do not, so they count here."""

    __slots__ = ()

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        structure_changed()

    def __delitem__(self, key):
        try:
            super().__delitem__(key)
        finally:
            structure_changed()

    def pop(self, *args):
        try:
            return super().pop(*args)
        finally:
            structure_changed()

    def popitem(self, last=True):
        try:
            return super().popitem(last)
        finally:
            structure_changed()

    def clear(self):
        try:
            super().clear()
        finally:
            structure_changed()
