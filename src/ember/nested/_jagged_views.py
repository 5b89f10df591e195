"""Views of jagged tensors (NOTE [Jagged tensors] in _jagged.py): indexing as PyTorch allows
it (an int picks a component; otherwise slices, ints and ``None`` act dim by dim, never on
the batch or the ragged dim), ``select``, ``narrow``, splits, and the shape changes that keep
the batch and ragged dims (``view``, ``unsqueeze``, ``permute``, ``flatten``, ``stack``...)."""

import re

import ember
from ember._tensor import Tensor, _wrap_dim
from ember.nested._jagged import JaggedTensor, components, same_raggedness
from ember.nested._jagged_ops import HANDLERS, _handles, _shape_text

__all__ = ["getitem"]


def _values_dim(nt, d):
    """The values' dim that holds ``nt``'s dim ``d`` (neither the batch nor the ragged one)."""
    return d - 1 if d > nt._ragged_idx else d


def _check_dense_dim(name, nt, d):
    if d == 0:
        raise RuntimeError(f"{name}(): not supported for NestedTensor on dim=0")
    if d == nt._ragged_idx:
        raise RuntimeError(f"{name}(): not supported for NestedTensor on ragged dim")


def _check_contiguous(signature, nt):
    if nt._lengths is not None or nt._ragged_idx != 1:
        raise ValueError(f"NestedTensor {signature}: expected self to be a contiguous jagged "
                         f"layout NestedTensor")


@_handles("select")
def _select(input, dim, index):
    d = _wrap_dim(dim, input.dim())
    if d == 0:
        return tuple(components(input))[index]
    if d == input._ragged_idx:
        raise RuntimeError("select(): not supported for NestedTensor on ragged dim")
    if input._lengths is not None:
        raise ValueError("select(): not yet supported on dim != 0 for non-contiguous nested "
                         "tensor with holes")
    r = input._ragged_idx
    return input._with_values(input._v.select(_values_dim(input, d), index),
                              r - 1 if d < r else r)


@_handles("narrow")
def _narrow(input, dim, start, length):
    _check_contiguous("narrow(self: jt, dim: any, start: any, length: any)", input)
    d = _wrap_dim(dim, input.dim())
    _check_dense_dim("narrow", input, d)
    return input._with_values(input._v.narrow(_values_dim(input, d), start, length))


def _slice(input, d, index):
    _check_contiguous("slice_tensor(self: jt, dim: any?, start: any?, end: any?, step: any?)",
                      input)
    _check_dense_dim("slice", input, d)
    vd = _values_dim(input, d)
    return input._with_values(input._v[(slice(None),) * vd + (index,)])


@_handles("unsqueeze")
def _unsqueeze(input, dim):
    d = _wrap_dim(dim, input.dim() + 1)
    if d == 0:
        raise RuntimeError("unsqueeze(): not supported for NestedTensor on dim=0")
    r = input._ragged_idx
    if d <= r:                          # before the ragged dim: it moves one on
        return input._with_values(input._v.unsqueeze(d), r + 1)
    return input._with_values(input._v.unsqueeze(d - 1))


_SPLIT_SIGNATURES = {
    "chunk": "chunk_default(self: jt, chunks: any, dim: any?)",
    "split": "split_tensor(self: jt, split_size: any, dim: any?)",
    "split_with_sizes": "split_with_sizes_default(self: jt, split_sizes: any, dim: any?)"}


def _split_like(name):
    def run(input, *args, **kwargs):         # (the registry passes parameters by name)
        dim = args[1] if len(args) > 1 else kwargs.pop("dim", 0)
        size_or_sections = args[0] if args else next(iter(kwargs.values()))
        # (PyTorch's split of a list of sizes is its split_with_sizes, and says so)
        label = "split_with_sizes" if name == "split" and isinstance(
            size_or_sections, (list, tuple)) else name
        _check_contiguous(_SPLIT_SIGNATURES[label], input)
        d = _wrap_dim(dim, input.dim())
        if name == "chunk" and d == 0 and input._lengths is None:
            return _chunk_batch(input, size_or_sections)
        _check_dense_dim(label, input, d)
        parts = getattr(input._v, name)(size_or_sections, _values_dim(input, d))
        return tuple(input._with_values(p) for p in parts)
    return run


def _chunk_batch(input, chunks):
    """``input`` cut into ``chunks`` groups of components (new offsets for each group)."""
    from ember.nested._jagged_ops import from_components
    parts = components(input)
    size = -(-len(parts) // chunks)
    return tuple(from_components(parts[i:i + size], input._ragged_idx)
                 for i in range(0, len(parts), size))


HANDLERS["chunk"] = _split_like("chunk")
HANDLERS["split"] = _split_like("split")
HANDLERS["split_with_sizes"] = _split_like("split_with_sizes")


# ----- indexing ------------------------------------------------------------------------------

def _is_int(item):
    if isinstance(item, Tensor) and not isinstance(item, JaggedTensor):
        return item.dim() == 0 and not item.is_floating_point() and item.dtype.itemsize > 1
    return type(item) is int


def _index_component(part, items):
    """``part[items]``, an error naming the dim as the jagged tensor's (one more)."""
    try:
        return part[items]
    except IndexError as e:
        message = re.sub(r"for dimension (\d+)", lambda m: f"for dimension {int(m[1]) + 1}",
                         str(e))
        raise IndexError(message) from None


def getitem(nt, index):
    """``nt[index]`` as PyTorch computes it for a jagged tensor."""
    items = index if type(index) is tuple else (index,)
    if items and _is_int(items[0]):                 # one component, then dense indexing
        part = tuple(components(nt))[int(items[0])]
        return _index_component(part, items[1:]) if len(items) > 1 else part
    if items == (Ellipsis,):
        raise NotImplementedError("aten.alias.default")
    consuming = sum(1 for i in items if i is not None and i is not Ellipsis
                    and type(i) is not bool)
    out, d = nt, 0
    for item in items:
        if item is Ellipsis:
            d += nt.dim() - consuming       # the dims it stands for
        elif item is None or item is True or item is False:
            out = _unsqueeze(out, d)
            d += 1
        elif type(item) is slice:
            out = _slice(out, d, item)
            d += 1
        elif _is_int(item):
            out = _select(out, d, int(item))
        else:
            raise NotImplementedError("aten.index.Tensor")
    return out



# ----- shape changes -------------------------------------------------------------------------

def _sizes_fit(input, size):
    """Whether ``size`` keeps the batch size and the ragged dim (-1 or its own ``j``)."""
    r = input._ragged_idx
    return (len(size) > r + 1 and size[0] in (-1, input.shape[0])
            and (size[r] == -1 or size[r] is input.shape[r]))


def _view_like(name):
    def run(input, size=None, shape=None):     # (view's parameter is size, reshape's shape)
        size = shape if size is None else size
        if input._ragged_idx != 1 or not _sizes_fit(input, size):
            raise RuntimeError(f"view(): cannot view shape {_shape_text(input, True)} as "
                               f"{list(size)}")
        values = input._v if name == "view" else input._v.contiguous()   # (PyTorch's copy)
        return input._with_values(getattr(values, name)(values.shape[0], *size[2:]))
    return run


HANDLERS["view"] = _view_like("view")
HANDLERS["reshape"] = _view_like("reshape")


@_handles("unflatten")
def _unflatten(input, dim, sizes):
    """PyTorch's: a view whose dim ``dim`` is split into ``sizes`` (-1 inferred in a dense
    dim, as a dense tensor's unflatten infers and checks it)."""
    d = _wrap_dim(dim, input.dim())
    sizes = list(sizes)
    if d not in (0, input._ragged_idx):
        sizes = list(ember.empty([1] * d + [input.shape[d]]).unflatten(d, sizes).shape[d:])
    return HANDLERS["view"](input, list(input.shape[:d]) + sizes + list(input.shape[d + 1:]))


@_handles("expand")
def _expand(input, size, implicit=False):
    if input._ragged_idx != 1 or not _sizes_fit(input, size):
        raise RuntimeError(f"expand(): cannot expand shape {_shape_text(input, True)} -> "
                           f"{list(size)}")
    return input._with_values(input._v.expand(-1, *size[2:]))


@_handles("squeeze")
def _squeeze(input, dim=None):
    if dim is None:
        raise NotImplementedError("aten.squeeze.default")
    _check_contiguous("squeeze_dim(self: jt, dim: any)", input)
    d = _wrap_dim(dim, input.dim())
    _check_dense_dim("squeeze", input, d)
    return input._with_values(input._v.squeeze(_values_dim(input, d)))


@_handles("permute")
def _permute(input, dims):
    if len(dims) != input.dim():
        raise ValueError(f"permute(): number of dimensions in the tensor input ({input.dim()}) "
                         f"does not match the length of the desired ordering of dimensions "
                         f"({len(dims)}).")
    dims = [_wrap_dim(d, input.dim()) for d in dims]
    if dims[0] != 0:
        raise ValueError("Permute is not supported on the batch dimension for jagged NT")
    r = input._ragged_idx
    order = [0] + [_values_dim(input, d) for d in dims[1:] if d != r]   # the ragged dim first
    return input._with_values(input._v.permute(order), dims.index(r))


@_handles("flatten")
def _flatten(input, start_dim=0, end_dim=-1):
    start, end = (_wrap_dim(d, input.dim()) for d in (start_dim, end_dim))
    r = input._ragged_idx
    if start == 0:
        raise RuntimeError("flatten(): not supported for NestedTensor on dim=0")
    if start <= r <= end:
        raise RuntimeError("flatten(): not supported for NestedTensor on ragged dim")
    values = input._v.flatten(_values_dim(input, start), _values_dim(input, end))
    return input._with_values(values, r - (end - start) if end < r else r)


@_handles("stack")
def _stack(tensors, dim=0):
    first = tensors[0]
    if not all(isinstance(t, JaggedTensor) and same_raggedness(t, first) for t in tensors):
        raise RuntimeError("stack(): expected all nested tensors to have the same nested "
                           "structure")
    d = _wrap_dim(dim, first.dim() + 1)
    _check_dense_dim("stack", first, d)
    r = first._ragged_idx
    values = ember.stack([t._v for t in tensors], d - 1 if d > r else d)
    return first._with_values(values, r if d > r else r + 1)
