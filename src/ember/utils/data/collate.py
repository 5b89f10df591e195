"""Turning a list of samples into a batch (``default_collate``) and samples into tensors
(``default_convert``), with PyTorch's rules for every container type."""

import collections.abc
import copy
import re

import numpy as np

import ember
from ember._tensor import Tensor
from ember.utils.data._stacked import StackedSamples

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map"]

_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
          "found {}")
_NUMPY_STRING = re.compile(r"[SaUO]")


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def collate_tensor_fn(batch, *, collate_fn_map=None):
    """Stack a batch of tensors along a new first dimension (a tensor is no batch: ``stack``
    refuses it, as PyTorch's does when a loader without batching collates one sample)."""
    return ember.stack(batch if isinstance(batch, Tensor) else list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    """Stack a batch of NumPy arrays (not of strings or objects) into a tensor."""
    if _NUMPY_STRING.search(batch[0].dtype.str) is not None:
        raise TypeError(_ERROR.format(batch[0].dtype))
    return collate([ember.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    """A tensor of a batch of NumPy numbers or bools (their dtype kept), built as
    ``as_tensor`` builds one from a list: other elements (Python numbers, tensors) take part
    in the dtype and raise its errors."""
    if len(set(map(type, batch))) == 1:         # (the usual batch: one array, quickly)
        return ember.as_tensor(np.array(batch))
    return ember.as_tensor(list(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    """A float64 tensor of a batch of Python floats."""
    return ember.tensor(batch, dtype=ember.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    """An int64 tensor of a batch of Python ints (bool for bools)."""
    return ember.tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    """A batch of strings or bytes, kept as it is."""
    return batch


default_collate_fn_map = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,   # not str_/datetime64
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def collate(batch, *, collate_fn_map=None):
    """Collate ``batch`` (a sequence of samples), looking up a function per element type in
    ``collate_fn_map`` first, then recursing into mappings, named tuples and sequences."""
    if isinstance(batch, StackedSamples):
        # an empty batch (a Poisson sampler's) falls through to PyTorch's IndexError
        if (batch and collate_fn_map is not None
                and collate_fn_map.get(Tensor) is collate_tensor_fn):
            stacked = batch.stacked()
            if stacked is not None:
                return stacked
        batch = list(batch)             # a custom map may handle tensors its own way
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for cls, fn in collate_fn_map.items():
            if isinstance(elem, cls):               # bools go by int: a bool tensor
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                    for key in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                out = copy.copy(elem)           # keeps a dict subclass's type and state
                out.update(collated)
                return out
            return elem_type(collated)
        except TypeError:
            return collated
    if _is_namedtuple(elem):
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))          # tuples: strings come back as tuples
        if isinstance(elem, tuple):
            return [collate(s, collate_fn_map=collate_fn_map) for s in transposed]
        try:
            return elem_type([collate(s, collate_fn_map=collate_fn_map) for s in transposed])
        except TypeError:
            return [collate(s, collate_fn_map=collate_fn_map) for s in transposed]
    raise TypeError(_ERROR.format(elem_type))


def default_collate(batch):
    """Stack a list of samples into a batch: tensors and arrays stacked along a new first
    dimension, numbers into tensors (float64 / int64), strings kept as lists, and mappings,
    named tuples and sequences collated element by element."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """Convert NumPy arrays (inside any containers) to tensors, leaving the rest alone."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        if _NUMPY_STRING.search(data.dtype.str) is not None:
            return data
        return ember.as_tensor(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return ember.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                out = copy.copy(data)
                out.update(converted)
                return out
            return type(data)(converted)
        except TypeError:
            return converted
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
