"""A tensor's values on the host: ``host_values``, a NumPy array whatever the dtype, for
ember's own code and tests (``Tensor.numpy()`` refuses bfloat16 and float8, as PyTorch's
does), and the conversions behind ``item()``, ``float()`` and ``numpy()``."""


import numpy as np

from ember import _dtype
from ember._warn import warn_once
from ember.backend import host_array
from ember.backend.meta import MetaArray

__all__ = ["host_values"]

# the dtypes NumPy has no type of its own for (ml_dtypes' stand in): no numpy(), no DLPack
_NO_HOST_DLPACK = (_dtype.bfloat16, _dtype.float8_e4m3fn, _dtype.float8_e5m2)


def host_values(tensor):
    """``tensor``'s values as a NumPy array of its dtype, bfloat16 and float8 included."""
    if type(tensor._data) is MetaArray:
        raise TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() "
                        "to copy the tensor to host memory first.")
    return host_array(tensor._data)


def _real_part(value, c_type):
    """A complex scalar's real part for ``float()``/``int()``; PyTorch refuses a nonzero
    imaginary part."""
    if isinstance(value, complex):
        if value.imag != 0:
            raise RuntimeError(f"value cannot be converted to type {c_type} without overflow")
        return value.real
    return value


def _warn_scalar_of_grad_tensor():
    """PyTorch's warning, once per process, for ``float(t)`` / ``complex(t)`` of a tensor
    that requires grad while grad mode is on (``item()`` does not warn)."""
    from ember.autograd.grad_mode import STATE
    if STATE.grad_enabled:
        warn_once("Converting a tensor with requires_grad=True to a scalar may lead to "
                  "unexpected behavior.\nConsider using tensor.detach() first.")


def _to_host(array):
    return array if type(array) is np.ndarray else host_array(array)


def _check_numpy_dtype(dtype):
    """PyTorch's refusal of the dtypes NumPy has no type for (ember's code: ``host_values``)."""
    if dtype in _NO_HOST_DLPACK:
        raise TypeError(f"Got unsupported ScalarType {dtype._torch_name}")


# bfloat16 and float8 have no Python conversion of their own
_PYTHON_VIA = {d.np: np.dtype(np.float32) for d in _dtype.LOW_PRECISION}


def _to_python(array0d):
    if type(array0d) is MetaArray:
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")
    arr = _to_host(array0d)
    if arr.dtype in _PYTHON_VIA:
        arr = arr.astype(np.float32)
    return arr.item()
