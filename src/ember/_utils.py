"""``torch._utils``: the flat-buffer helpers that mixed-precision and data-parallel code
(apex, DeepSpeed, Megatron, DDP-style bucketing) imports from PyTorch's private module to keep
float32 master weights and gradients in one contiguous buffer."""

from collections import OrderedDict, defaultdict

__all__ = []


def _flatten_dense_tensors(tensors):
    """One contiguous 1-D buffer holding the elements of ``tensors`` in order (a view of a
    lone contiguous tensor, as PyTorch's)."""
    import ember

    flat = [t.contiguous().view(-1) for t in tensors]
    return flat[0] if len(flat) == 1 else ember.cat(flat)


def _unflatten_dense_tensors(flat, tensors):
    """Views of ``flat`` shaped as each of ``tensors`` in turn (what
    ``_flatten_dense_tensors(tensors)`` packed)."""
    outputs, offset = [], 0
    for tensor in tensors:
        numel = tensor.numel()
        outputs.append(flat.narrow(0, offset, numel).view_as(tensor))
        offset += numel
    return tuple(outputs)


def _take_tensors(tensors, size_limit):
    """Group ``tensors`` into lists of one type each, yielding a list as soon as adding the
    next tensor would take it past ``size_limit`` bytes, then the rest in order of type."""
    buf_dict = defaultdict(lambda: [[], 0])
    for tensor in tensors:
        key = tensor.type()
        size = tensor.numel() * tensor.element_size()
        buf_and_size = buf_dict[key]
        if buf_and_size[1] + size > size_limit and buf_and_size[1] > 0:
            yield buf_and_size[0]
            buf_and_size = buf_dict[key] = [[], 0]
        buf_and_size[0].append(tensor)
        buf_and_size[1] += size
    for buf, _ in buf_dict.values():
        if len(buf) > 0:
            yield buf


def _reorder_tensors_as(tensors, ordered_tensors):
    """``tensors`` put in the order of ``ordered_tensors`` (matched by type, in turn within
    each type)."""
    type_dict = defaultdict(list)
    for tensor in tensors:
        type_dict[tensor.type()].append(tensor)
    type_dict_ = OrderedDict((t, iter(ts)) for t, ts in type_dict.items())
    return tuple(next(type_dict_[tensor.type()]) for tensor in ordered_tensors)
