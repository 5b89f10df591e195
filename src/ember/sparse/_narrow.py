"""``narrow_copy`` of a COO tensor (see NOTE [Dense origins] for its dense gradient)."""

from ember._tensor import _wrap_dim
from ember.sparse import _layouts as L
from ember.sparse._origin import carry_view
from ember.sparse._tensor import coo

__all__ = ["narrow_copy"]


def narrow_copy(input, dim, start, length):
    """``input.narrow_copy(dim, start, length)`` of a COO tensor: the stored elements in the
    range, shifted to start at 0 (in their stored order)."""
    if input.layout is not L.sparse_coo:
        input.stride()                          # raises PyTorch's error
    dim = _wrap_dim(dim, input.ndim)
    size = input.shape[dim]
    start = start + size if start < 0 else start
    if not (0 <= start and 0 <= length and start + length <= size):
        raise RuntimeError(f"Invalid range to narrow. range(start, start+length) must be a "
                           f"subset of range(0, {size}).")
    new_size = list(input.shape)
    new_size[dim] = length
    sparse_dim = input.sparse_dim()
    if dim >= sparse_dim:
        values = input._v.narrow(dim - sparse_dim + 1, start, length).clone()
        return coo(input._i, values, new_size, input._coalesced)
    column = input._i[dim]
    keep = ((column >= start) & (column < start + length)).nonzero().reshape(-1)
    indices = input._i.index_select(1, keep)
    indices[dim] -= start
    out = coo(indices, input._v.index_select(0, keep), new_size)
    out._coalesced = input._coalesced          # kept as it was, even with one element left
    return carry_view(out, input, lambda o: o.narrow(dim, start, length))
