"""What ``t.data = value`` checks before it gives ``t`` the memory of ``value`` (dense tensors
in _tensor.py, sparse ones in sparse/_tensor.py)."""

import functools

__all__ = ["check_new_data", "storage_kind"]

_INCOMPATIBLE = ("Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` "
                 "have incompatible tensor type.")


@functools.cache
def _classes():
    """(Tensor, ValuesBacked, the lowest floating category), imported once they can be."""
    from ember import _dtype
    from ember._tensor import Tensor
    from ember._values_backed import ValuesBacked
    return Tensor, ValuesBacked, _dtype.FLOATING


def storage_kind(t):
    """What PyTorch's ``set_data`` compares: dense, sparse COO, sparse compressed (CSR, CSC,
    BSR and BSC alike) or another tensor type of ember's (nested)."""
    if not isinstance(t, _classes()[1]):
        return "dense"
    from ember.sparse import _layouts as L
    layout = t.layout
    if layout is L.sparse_coo:
        return "coo"
    return "compressed" if layout in L.COMPRESSED else type(t)


def check_new_data(t, value):
    """Raise PyTorch's error when ``value`` cannot become the data of ``t``."""
    tensor, _, floating = _classes()
    if getattr(t, "_forward_primal", False):     # (NOTE [Forward-mode primals])
        raise RuntimeError("mutating directly with `.data` inside functorch transform is not "
                           "allowed.")
    if not isinstance(value, tensor):
        raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
    if (type(value) is not tensor or type(t) is not tensor) and \
            storage_kind(value) != storage_kind(t):       # (two plain tensors are dense)
        raise RuntimeError(_INCOMPATIBLE)
    if t.requires_grad and value.dtype.category < floating:
        raise RuntimeError("data set to a tensor that requires gradients must be floating "
                           "point or complex dtype")
