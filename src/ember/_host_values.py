"""``host_values``: a tensor's values as a NumPy array whatever its dtype, for ember's own
code and tests (``Tensor.numpy()`` refuses bfloat16 and float8, as PyTorch's does)."""

from ember.backend import host_array
from ember.backend.meta import MetaArray

__all__ = ["host_values"]


def host_values(tensor):
    """``tensor``'s values as a NumPy array of its dtype, bfloat16 and float8 included."""
    if type(tensor._data) is MetaArray:
        raise TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() "
                        "to copy the tensor to host memory first.")
    return host_array(tensor._data)
