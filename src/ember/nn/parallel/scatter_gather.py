"""Splitting a batch over GPUs and joining the results (``torch.nn.parallel.scatter``,
``gather``), differentiably: gradients flow back through the copies."""

import warnings

import ember
from ember._tensor import Tensor

__all__ = ["scatter", "scatter_kwargs", "gather"]


def _cuda(target):
    return ember.device("cuda", target) if isinstance(target, int) else ember.device(target)


def scatter(inputs, target_gpus, dim=0):
    """One piece of ``inputs`` per GPU: tensors are chunked along ``dim`` and copied to the
    GPUs, tuples, lists and dicts split entry by entry, other objects shared."""
    devices = [_cuda(t) for t in target_gpus]

    def split(obj):
        if isinstance(obj, Tensor):
            return [part.to(dev) for part, dev in zip(obj.chunk(len(devices), dim), devices)]
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):      # a named tuple
            return [type(obj)(*parts) for parts in zip(*map(split, obj))]
        if isinstance(obj, (tuple, list)) and obj:
            return [type(obj)(parts) for parts in zip(*map(split, obj))]
        if isinstance(obj, dict) and obj:
            return [type(obj)(zip(obj, parts)) for parts in zip(*map(split, obj.values()))]
        return [obj] * len(devices)

    return split(inputs)


def scatter_kwargs(inputs, kwargs, target_gpus, dim=0):
    """``scatter`` of the positional and the keyword arguments, padded to the same count."""
    pieces = scatter(inputs, target_gpus, dim) if inputs else []
    kw_pieces = scatter(kwargs, target_gpus, dim) if kwargs else []
    count = max(len(pieces), len(kw_pieces))
    pieces = [tuple(p) for p in pieces] + [()] * (count - len(pieces))
    kw_pieces = list(kw_pieces) + [{}] * (count - len(kw_pieces))
    return tuple(pieces), tuple(kw_pieces)


def gather(outputs, target_device, dim=0):
    """The per-GPU ``outputs`` joined on ``target_device`` ("cpu" or -1 for the host):
    tensors concatenated along ``dim``, containers entry by entry."""
    on_host = target_device in (-1, "cpu", ember.device("cpu"))
    device = ember.device("cpu") if on_host else _cuda(target_device)

    def join(parts):
        first = parts[0]
        if isinstance(first, Tensor):
            if all(p.ndim == 0 for p in parts):
                warnings.warn("Was asked to gather along dimension 0, but all input tensors "
                              "were scalars; will instead unsqueeze and return a vector.")
                parts = [p.reshape(1) for p in parts]
                return ember.cat([p.to(device) for p in parts], 0)
            return ember.cat([p.to(device) for p in parts], dim)
        if first is None:
            return None
        if isinstance(first, dict):
            if not all(len(p) == len(first) for p in parts):
                raise ValueError("All dicts must have the same number of keys")
            return type(first)((k, join([p[k] for p in parts])) for k in first)
        if isinstance(first, tuple) and hasattr(first, "_fields"):
            return type(first)(*map(join, zip(*parts)))
        return type(first)(map(join, zip(*parts)))

    return join(list(outputs))
