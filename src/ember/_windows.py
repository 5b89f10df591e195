"""Window functions for spectral analysis: hann_window, hamming_window, blackman_window,
bartlett_window, kaiser_window (``torch.*_window``).

A periodic window of length N is the symmetric window of length N + 1 without its last
value (what ``stft`` wants); lengths 0 and 1 give ``[]`` and ``[1.]``. The values are
computed on the host as PyTorch's CPU kernels compute them, one rounding to the result dtype
per step (16-bit floats compute each step in float32), and then moved to ``device``.
"""

import math
import operator

import numpy as np

from ember import _dtype as D
from ember._api import strided
from ember._creation import _dtype_arg, _finish, _place, _target, check_requires_grad

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]

_MISSING = object()
_FACTORY_KEYWORDS = ("*, ember.dtype dtype = None, ember.layout layout = None, ember.device "
                     "device = None, bool pin_memory = False, bool requires_grad = False")


def _options(dtype, device, sparse=False):
    """PyTorch's printout of the TensorOptions a window function was given."""
    from ember.ops.indexing import CTYPE
    name = f"{CTYPE[D.get_default_dtype()]} (default)" if dtype is None else CTYPE.get(
        dtype, dtype._torch_name)
    layout = "Sparse" if sparse else "Strided (default)"
    return (f"TensorOptions(dtype={name}, device={device}, layout={layout}, requires_grad=false "
            f"(default), pinned_memory=false, memory_format=(nullopt))")


def _overload_error(name, extras, names, values):
    """PyTorch's TypeError for arguments no overload of ``name`` takes: ``extras`` are the
    overloads' parameters after window_length, ``values`` those given (``_MISSING`` if not);
    after a missing one, the others can only have been given by keyword."""
    got, chained = ["int"], True
    for arg, value in zip(names, values):
        if value is _MISSING:
            chained = False
        else:
            kind = "NoneType" if value is None else type(value).__name__
            got.append(kind if chained else f"{arg}={kind}")
    listed = "".join(f" * (int window_length, {p + ', ' if p else ''}{_FACTORY_KEYWORDS})\n"
                     for p in extras)
    return TypeError(f"{name}() received an invalid combination of arguments - got "
                     f"({', '.join(got)}), but expected one of:\n{listed}")


def _check_periodic(name, periodic):
    if not isinstance(periodic, bool):
        raise _overload_error(name, ("", "bool periodic"), ("periodic",), (periodic,))


def _is_float(value):
    return isinstance(value, (int, float))     # bool included, as PyTorch's parser takes it


def _window(name, length, periodic, dtype, layout, device, requires_grad, values):
    """The checks every window function makes, then ``values(n, dtype)`` (a host array of
    the symmetric window of length n >= 2) made into a tensor."""
    check_requires_grad(requires_grad, name)
    if isinstance(length, bool):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not bool")
    try:
        length = operator.index(length)
    except TypeError:
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{type(length).__name__}") from None
    _, dev = _target(device)
    dtype = _dtype_arg(name, dtype)
    if layout is not None and layout is not strided:
        raise RuntimeError(f"{name} is not implemented for sparse types, got: "
                           f"{_options(dtype, dev, sparse=True)}")
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"{name} expects floating point dtypes, got: "
                           f"{_options(dtype, dev)}")
    if length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={length}")
    dtype = D.get_default_dtype() if dtype is None else dtype
    if length <= 1:
        return _finish(_place(np.ones(length, dtype.np), dev), requires_grad)
    if dtype.is_complex or dtype.itemsize == 1:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{dtype._torch_name}'")
    n = length + 1 if periodic else length
    array = values(n, _Steps(dtype))[:length]
    return _finish(_place(np.ascontiguousarray(array).astype(dtype.np), dev), requires_grad)


class _Steps:
    """Elementwise steps rounded as PyTorch's kernels round them: each result is stored in
    ``dtype``; 16-bit floats compute in float32, with scalars rounded to ``dtype``."""

    def __init__(self, dtype):
        self.store = dtype.np
        self.math = np.dtype(np.float32 if dtype.itemsize == 2 else dtype.np)

    def __call__(self, array):
        return array.astype(self.store).astype(self.math)

    def scalar(self, value):
        return self(np.array(value, np.float64))[()]

    def arange(self, n):
        return self(np.arange(n, dtype=np.float64))


def _cosine_sum(n, step, alpha, beta):
    # alpha - beta cos(2 pi k / (n - 1))
    w = step(step.arange(n) * step.scalar(2 * math.pi / (n - 1)))
    return step(step(step(np.cos(w)) * step.scalar(-beta)) + step.scalar(alpha))


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                pin_memory=False, requires_grad=False):
    """The Hann window: 0.5 - 0.5 cos(2 pi k / (N - 1)) (periodic: N is one more than
    ``window_length``)."""
    _check_periodic("hann_window", periodic)
    return _window("hann_window", window_length, periodic, dtype, layout, device,
                   requires_grad, lambda n, step: _cosine_sum(n, step, 0.5, 0.5))


def hamming_window(window_length, periodic=_MISSING, alpha=_MISSING, beta=_MISSING, *,
                   dtype=None, layout=None, device=None, pin_memory=False,
                   requires_grad=False):
    """The Hamming window: alpha - beta cos(2 pi k / (N - 1)), by default alpha = 0.54 and
    beta = 0.46 (periodic: N is one more than ``window_length``)."""
    values = (periodic, alpha, beta)
    # PyTorch's overloads: alpha needs periodic, beta needs alpha
    if (periodic is not _MISSING and not isinstance(periodic, bool)) or \
            any(v is not _MISSING and not _is_float(v) for v in (alpha, beta)) or \
            (alpha is not _MISSING and periodic is _MISSING) or \
            (beta is not _MISSING and alpha is _MISSING):
        raise _overload_error("hamming_window", (
            "", "bool periodic", "bool periodic, float alpha",
            "bool periodic, float alpha, float beta"), ("periodic", "alpha", "beta"), values)
    periodic = True if periodic is _MISSING else periodic
    alpha = 0.54 if alpha is _MISSING else alpha
    beta = 0.46 if beta is _MISSING else beta
    return _window("hamming_window", window_length, periodic, dtype, layout, device,
                   requires_grad, lambda n, step: _cosine_sum(n, step, alpha, beta))


def _blackman(n, step):
    # 0.42 - 0.5 cos(2 pi k / (n - 1)) + 0.08 cos(4 pi k / (n - 1))
    w = step(step.arange(n) * step.scalar(math.pi / (n - 1)))
    four = step(step(np.cos(step(w * step.scalar(4)))) * step.scalar(0.08))
    two = step(step(np.cos(step(w * step.scalar(2)))) * step.scalar(0.5))
    return step(step(four - two) + step.scalar(0.42))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """The Blackman window: 0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))
    (periodic: N is one more than ``window_length``)."""
    _check_periodic("blackman_window", periodic)
    return _window("blackman_window", window_length, periodic, dtype, layout, device,
                   requires_grad, _blackman)


def _bartlett(n, step):
    # 2k / (n - 1) rising to the middle, 2 - 2k / (n - 1) after it
    w = step(step.arange(n) * step.scalar(2 / (n - 1)))
    half = (n - 1) // 2 + 1
    w[half:] = step(-w[half:] + step.scalar(2))
    return w


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """The Bartlett (triangular) window: 1 - |2k / (N - 1) - 1| (periodic: N is one more
    than ``window_length``)."""
    _check_periodic("bartlett_window", periodic)
    return _window("bartlett_window", window_length, periodic, dtype, layout, device,
                   requires_grad, _bartlett)


def _kaiser(beta):
    def values(n, step):
        # I0(beta sqrt(1 - ((k - a) / a)^2)) / I0(beta), a = (n - 1) / 2, rounded once; in
        # float64 (PyTorch's float32 I0 differs from the exact value by a few ulps)
        k = step.arange(n).astype(np.float64)
        a = (n - 1) / 2
        inside = np.maximum(1 - ((k - a) / a) ** 2, 0)
        return np.i0(beta * np.sqrt(inside)) / np.i0(beta)
    return values


def kaiser_window(window_length, periodic=_MISSING, beta=_MISSING, *, dtype=None, layout=None,
                  device=None, pin_memory=False, requires_grad=False):
    """The Kaiser window: I0(beta sqrt(1 - (2k / (N - 1) - 1)^2)) / I0(beta), beta 12 by
    default (periodic: N is one more than ``window_length``)."""
    if (periodic is not _MISSING and not isinstance(periodic, bool)) or \
            (beta is not _MISSING and not _is_float(beta)) or \
            (beta is not _MISSING and periodic is _MISSING):
        raise _overload_error("kaiser_window", ("", "bool periodic", "bool periodic, float beta"),
                              ("periodic", "beta"), (periodic, beta))
    periodic = True if periodic is _MISSING else periodic
    beta = 12.0 if beta is _MISSING else float(beta)
    return _window("kaiser_window", window_length, periodic, dtype, layout, device,
                   requires_grad, _kaiser(beta))
