"""default_collate and default_convert: how DataLoader turns samples into batches (torch's rules).

Tensors are stacked along a new dim 0, numpy arrays and scalars become flow tensors, Python
floats a float64 tensor, ints an int64 one (bools a bool one), strings and bytes stay lists;
mappings, namedtuples and sequences recurse. numpy dtypes flow lacks (uint8, int16, ...) raise
flow's TypeError where torch would make, e.g., a uint8 tensor.
"""
import collections.abc
import copy
import re
from typing import Any, Callable, Dict, Optional, Tuple, Type, Union

import numpy as np

import flow

__all__ = ["collate", "default_collate", "default_collate_fn_map", "default_convert"]

_np_str_obj_array = re.compile(r"[SaUO]")  # numpy dtype kinds that are strings or objects
_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"

CollateFnMap = Dict[Union[Type, Tuple[Type, ...]], Callable]


def default_convert(data: Any) -> Any:
    """Converts numpy arrays and scalars (also inside mappings and sequences) to flow tensors,
    leaving everything else as is; DataLoader's collate_fn when batching is disabled."""
    elem_type = type(data)
    if isinstance(data, flow.Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_", "bytes_"):
        if isinstance(data, np.ndarray) and _np_str_obj_array.search(data.dtype.str) is not None:
            return data
        return flow.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # torch's backwards-compatible list
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def _rebuild_mapping(like, items):
    """A mapping of like's type holding items (a plain dict when that type cannot be rebuilt)."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(items)
            return clone
        return type(like)(items)
    except TypeError:
        return items


def _rebuild_sequence(like, items):
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(like)(items)
    except TypeError:
        return items


def collate(batch, *, collate_fn_map: Optional[CollateFnMap] = None):
    """Collates a list of samples, using collate_fn_map's function for the first sample's type
    (exact type first, then isinstance in the map's order), else recursing into mappings,
    namedtuples and sequences."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type, fn in collate_fn_map.items():
            if isinstance(elem, collate_type):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                                       for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        elem_size = len(elem)
        if not all(len(e) == elem_size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        collated = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]  # tuples, as torch
        if isinstance(elem, tuple):
            return collated  # torch's backwards-compatible list
        return _rebuild_sequence(elem, collated)
    raise TypeError(_ERR.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return flow.stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    if _np_str_obj_array.search(batch[0].dtype.str) is not None:
        raise TypeError(_ERR.format(batch[0].dtype))
    return collate([flow.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return flow.as_tensor(np.asarray(batch))  # numpy keeps the scalars' dtype (flow.as_tensor of a list does not)


def collate_float_fn(batch, *, collate_fn_map=None):
    return flow.tensor(batch, dtype=flow.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return flow.tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map: CollateFnMap = {
    flow.Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """Collates a list of samples into a batch with torch's rules: tensors stacked (a new dim 0),
    numpy arrays and numbers made tensors, strings kept as lists, mappings, namedtuples and
    sequences collated field by field (tuples become lists, as in torch)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
