"""Building jagged nested tensors: from a list of tensors (``nested_tensor``,
``as_nested_tensor`` with ``layout=ember.jagged``) and from values and offsets
(``nested_tensor_from_jagged``), and views of dense tensors (``narrow``, ``masked_select``)."""

import ember
from ember._tensor import Tensor
from ember.nested._jagged import jagged
from ember.nested._jagged_ops import from_components

__all__ = ["from_tensor_list", "nested_tensor_from_jagged", "narrow", "masked_select"]


def _ragged_dim(tensors):
    """The one dim (of the components) along which their sizes may differ."""
    differ = [d for d in range(tensors[0].dim())
              if len({t.shape[d] for t in tensors}) > 1]
    if len(differ) > 1:
        raise RuntimeError(
            "Cannot represent given tensor list as a nested tensor with the jagged layout. "
            "Note that the jagged layout only allows for a single ragged dimension. For "
            "example: (B, *, D_0, D_1, ..., D_N), with ragged * dim.")
    return differ[0] if differ else 0


def from_tensor_list(tensors, dtype=None, device=None, requires_grad=False, keep_graph=False):
    """A jagged tensor of ``tensors``: copies on a leaf of its own, or (``keep_graph``) a
    differentiable packing of them."""
    if not tensors:
        raise RuntimeError("Cannot construct a nested tensor from an empty tensor list")
    if len({t.dtype for t in tensors}) > 1:     # (even with a dtype given, as in PyTorch)
        raise RuntimeError("When constructing a nested tensor, all tensors in list must have "
                           "the same dtype")
    if any(t.dim() == 0 for t in tensors):
        raise RuntimeError("Cannot construct a nested tensor from a list of zero-dim tensors")
    from ember.nested import _check_same_dim
    _check_same_dim(tensors)
    if not keep_graph:
        tensors = [t.detach() for t in tensors]
    tensors = [t.to(dtype=dtype, device=device) for t in tensors]
    out = from_components(tensors, _ragged_dim(tensors) + 1)
    return out._set_requires_grad() if requires_grad else out


def _offsets_of(lengths):
    return ember.cat([lengths.new_zeros(1), lengths.cumsum(0)])


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None,
                              min_seqlen=None, max_seqlen=None):
    """A jagged view of ``values`` split along dim ``jagged_dim - 1`` (default 0) at
    ``offsets`` (or by ``lengths``; with both, the components start at ``offsets`` and have
    ``lengths``, leaving holes)."""
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): At least one of offsets or "
                               "lengths is required.")
        offsets, lengths = _offsets_of(lengths), None
    if not isinstance(offsets, Tensor):
        raise TypeError(f"_nested_view_from_jagged(): argument 'offsets' (position 2) must be "
                        f"Tensor, not {type(offsets).__name__}")
    jagged_dim = 1 if jagged_dim is None else jagged_dim
    if jagged_dim < 1:
        raise ValueError(f"Expected jagged_dim >=1, but got {jagged_dim}.")
    first = values if jagged_dim == 1 else values.movedim(jagged_dim - 1, 0)
    return jagged(first, offsets, lengths, jagged_dim, min_seqlen, max_seqlen)


def narrow(tensor, dim, start, length):
    """A jagged view of the rows ``start`` to ``start + length`` (ints, or one per batch
    element) along dim 1 of the dense ``tensor``: its values are all of ``tensor``'s rows,
    and the parts left out are holes."""
    if dim != 1:
        raise RuntimeError("jagged layout only supports dim=1")
    batch, rows = tensor.shape[0], tensor.shape[1]
    starts, lengths = (x if isinstance(x, Tensor) else
                       ember.full((batch,), x, dtype=ember.int64, device=tensor.device)
                       for x in (start, length))
    row_starts = ember.arange(batch, device=tensor.device) * rows + starts
    offsets = ember.cat([row_starts, row_starts[-1:] + lengths[-1:]])
    values = tensor.flatten(0, 1)
    seqlens = (int(lengths.min()), int(lengths.max())) if batch else (None, None)
    if bool((offsets[1:-1] == row_starts[:-1] + lengths[:-1]).all()):
        # each part ends where the next begins: PyTorch's result is contiguous, without
        # holes, its values the rows from the first start to the last end
        first, last = int(offsets[0]), int(offsets[-1])
        return jagged(values[first:last], offsets - first, None, 1, *seqlens)
    return jagged(values, offsets, lengths, 1, *seqlens)


def masked_select(tensor, mask):
    """A 2-D jagged tensor of ``tensor``'s elements where ``mask`` holds, one component per
    row (of the last dim of the broadcast operands)."""
    tensor, mask = ember.broadcast_tensors(tensor, mask)
    if tensor.dim() < 2:
        tensor, mask = tensor.unsqueeze(0), mask.unsqueeze(0)
    tensor = tensor.reshape(-1, tensor.shape[-1])
    mask = mask.reshape(-1, mask.shape[-1])
    lengths = mask.sum(-1)
    return jagged(tensor[mask], _offsets_of(lengths), None, 1)
