"""The parts of ember.fft that are not ops: sample frequencies (factories, like those of
ember/_creation.py) and the shifts that center them (compositions of ``roll``)."""

import warnings

import numpy as np

from ember import _dtype as D
from ember._creation import _finish, _out_dtype, _target
from ember._tensor import Tensor
from ember._warn import outside_level
from ember.ops._dims import wrap_dim
from ember.ops.reorder import roll

__all__ = ["fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _count(n, name):
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"fft_{name}(): argument 'n' (position 1) must be int, not "
                        f"{type(n).__name__}")
    return n.__index__()


def _spacing(d, name):
    if isinstance(d, Tensor):
        d = d.item()
    if isinstance(d, complex) or not isinstance(d, (int, float, np.number)):
        raise TypeError(f"fft_{name}(): argument 'd' must be float, not {type(d).__name__}")
    return float(d)


def _frequencies(name, k, n, d, out, dtype, device, requires_grad):
    """``k / (n * d)`` as ``dtype``; like PyTorch, ``k`` times the reciprocal rounded to
    ``dtype`` (the last bit can differ from a division)."""
    dtype = _out_dtype(dtype, out)      # a dtype other than out's raises first
    if dtype is None:
        dtype = D.get_default_dtype()
    if dtype.category < D.FLOATING:
        raise RuntimeError(f"{name} requires a floating point or complex dtype")
    if dtype.is_complex:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{dtype._torch_name}'")
    xp, _ = _target(device)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.float64(1.0) / np.float64(n * d)     # rfftfreq(0): 0 * inf = NaN
        # the reciprocal as a NumPy scalar: CuPy refuses a (0-d) host array in its ufuncs
        arr = xp.asarray(k).astype(dtype.np) * np.dtype(dtype.np).type(scale)
    if out is not None:
        out._data = arr
        out._bump_version()
        return out.requires_grad_() if requires_grad else out    # as PyTorch's parser does
    return _finish(arr, requires_grad)


def _in_out_shape(k, out):
    """``k`` in the shape of ``out`` where it has as many elements (PyTorch's arange keeps that
    shape), else flat, with arange's warning when ``out`` had elements."""
    if out is None or out.numel() == 0:
        return k
    if out.numel() == k.size:
        return k.reshape(out.shape)
    warnings.warn(f"The number of elements in the out tensor of shape {list(out.shape)} is "
                  f"{out.numel()} which does not match the computed number of elements "
                  f"{k.size}. Note that this may occur as a result of rounding error. The out "
                  f"tensor will be resized to a tensor of shape ({k.size},).", UserWarning,
                  stacklevel=outside_level())
    return k


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of a length-``n`` FFT with sample spacing ``d``: zero, the
    positive frequencies, then the negative ones."""
    n, d = _count(n, "fftfreq"), _spacing(d, "fftfreq")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    k = _in_out_shape(np.arange(n, dtype=np.int64), out)
    k[(n + 1) // 2:] -= n                   # along dim 0 of out's shape, as PyTorch does
    return _frequencies("fftfreq", k, n, d, out, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """The sample frequencies of a length-``n`` rfft (the non-negative ones) with sample
    spacing ``d``."""
    n, d = _count(n, "rfftfreq"), _spacing(d, "rfftfreq")
    size = (n // 2 if n >= 0 else -(-n // 2)) + 1   # C's division: rfftfreq(-1) has 1 element
    if size < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {size}: [{size}]")
    k = _in_out_shape(np.arange(size, dtype=np.int64), out)
    return _frequencies("rfftfreq", k, n, d, out, dtype, device, requires_grad)


def _shift_dims(input, dim, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"fft_{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if dim is None:
        return tuple(range(input.ndim))
    if isinstance(dim, bool) or not (hasattr(dim, "__index__") or
                                     isinstance(dim, (tuple, list))):
        raise TypeError(f"fft_{name}(): argument 'dim' must be tuple of ints, not "
                        f"{type(dim).__name__}")
    dims = (dim,) if hasattr(dim, "__index__") else tuple(dim)
    if input.ndim == 0 and dims:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    return tuple(wrap_dim(d, input.ndim) for d in dims)


def fftshift(input, dim=None):
    """Reorder FFT frequencies so that zero is in the middle (all dims by default)."""
    dims = _shift_dims(input, dim, "fftshift")
    return roll(input, tuple(input.shape[d] // 2 for d in dims), dims)


def ifftshift(input, dim=None):
    """The inverse of fftshift: the zero frequency back to the front."""
    dims = _shift_dims(input, dim, "ifftshift")
    return roll(input, tuple((input.shape[d] + 1) // 2 for d in dims), dims)
