"""``s.new(...)`` of a sparse tensor: PyTorch's legacy constructor of its (COO) type."""

import numbers

import ember
from ember._legacy_new import _c_type_name, _checked_device, combination_error, fold_size
from ember._tensor import Size, Tensor
from ember.sparse import _layouts as L

__all__ = ["sparse_new"]


def sparse_new(t, args, kwargs):
    """``t.new(indices, values[, size])`` (a COO tensor of the values' dtype, its invariants
    unchecked, as PyTorch's), ``t.new(*sizes)`` or ``t.new()`` (an empty one of ``t``'s
    dtype); ``size=`` and ``device=`` (of ``t``'s device type) as keywords."""
    if t._layout is not L.sparse_coo:
        from ember.sparse._dispatch import backend_name
        raise RuntimeError(f"Cannot map DispatchKey {backend_name((t,))} to a unique layout.")
    device = kwargs.pop("device", None)
    if "size" in kwargs:
        args = fold_size(args, kwargs.pop("size"), sparse=True)
    if kwargs:
        raise TypeError(f"new() got an unexpected keyword argument '{next(iter(kwargs))}'")
    dev = t.device if device is None else _checked_device(args, t.device, device, "new")
    from ember.sparse import _check_legacy_indices
    from ember.sparse._tensor import sparse_coo_tensor
    if len(args) in (2, 3) and all(isinstance(a, Tensor) for a in args[:2]):
        _check_legacy_indices(args[0], len(args) == 3)
        return sparse_coo_tensor(*args, device=dev, check_invariants=False)
    sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else args
    if not all(isinstance(s, numbers.Integral) and type(s) is not bool for s in sizes):
        raise combination_error([_c_type_name(a) for a in args], sparse=True)
    sizes = sizes or (0,)
    indices = ember.zeros((len(sizes), 0), dtype=ember.int64, device=dev)
    return sparse_coo_tensor(indices, ember.zeros(0, dtype=t.dtype, device=dev), sizes,
                             check_invariants=False)
