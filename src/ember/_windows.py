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
from ember._tensor import Tensor

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]

_MISSING = object()


def _options(fname, dtype, device, layout):
    """PyTorch's printout of the TensorOptions a window function was given (its entry
    points other than hann_window's fill in the default dtype before checking it)."""
    from ember.ops.indexing import CTYPE
    name = CTYPE[D.get_default_dtype()] + (" (default)" if fname == "hann_window" else "") \
        if dtype is None else CTYPE.get(dtype, dtype._torch_name)
    layout = "Strided (default)" if layout is None else \
        "Strided" if layout is strided else "Sparse"
    return (f"TensorOptions(dtype={name}, device={device}, layout={layout}, requires_grad=false "
            f"(default), pinned_memory=false, memory_format=(nullopt))")


def _is_int(value):
    if isinstance(value, Tensor):       # a 0-dim integer tensor is an int to the parser
        return value.ndim == 0 and value.dtype.category == D.INTEGRAL
    return not isinstance(value, bool) and hasattr(type(value), "__index__")


def _is_float(value):
    # bools and 0-dim tensors of any dtype included, as PyTorch's parser takes them
    return isinstance(value, (int, float)) or isinstance(value, Tensor) and value.ndim == 0


def _float(value, default):
    """A float parameter's value (``default`` when not given)."""
    if value is _MISSING:
        return default
    if isinstance(value, Tensor):
        value = value.item()
        if isinstance(value, complex):
            if value.imag:
                raise RuntimeError("value cannot be converted to type double without overflow")
            value = value.real
    return float(value)


_TAKES = {"int": _is_int, "bool": lambda v: isinstance(v, bool), "float": _is_float}


def _parse(name, length, *params):
    """PyTorch's parser's TypeError for a window call whose arguments no overload takes:
    ``params`` are (name, value or ``_MISSING``, type) after window_length, in order; an
    overload taking one needs those before it (see NOTE [Overloaded signatures in
    TypeErrors]: the "invalid combination" listing, unless one overload takes as many
    arguments, whose refusal of the first bad one is the message)."""
    given = [("window_length", length, "int")] + list(params)
    bad = next(((i, p, v, t) for i, (p, v, t) in enumerate(given)
                if v is not _MISSING and not _TAKES[t](v)), None)
    gap = next((p for i, (p, v, _) in enumerate(given)
                if v is _MISSING and any(w is not _MISSING for _, w, _ in given[i + 1:])), None)
    if bad is None and gap is None:
        return
    from ember.ops._call_site import call_site
    from ember.ops._dims import type_name
    from ember.ops._overloads import in_parser_words
    site = call_site()
    if site is None or site.keywords is None:
        got = ", ".join(type_name(v) for _, v, _ in given if v is not _MISSING)
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:")
    message = f"{name}() missing 1 required positional argument: '{gap}'"
    if gap is None:
        index, param, value, kind = bad
        where = "" if site.passed_by_keyword(param) else f" (position {index + 1})"
        message = f"{name}(): argument '{param}'{where} must be {kind}, not {type_name(value)}"
    raise TypeError(in_parser_words(message))


def _check_periodic(name, length, periodic):
    _parse(name, length, ("periodic", periodic, "bool"))


def _window(name, length, periodic, dtype, layout, device, requires_grad, values):
    """The checks every window function makes, then ``values(n, dtype)`` (a host array of
    the symmetric window of length n >= 2) made into a tensor."""
    check_requires_grad(requires_grad, name)
    length = operator.index(length)
    _, dev = _target(device)
    dtype = _dtype_arg(name, dtype)
    if layout is not None and layout is not strided:
        raise RuntimeError(f"{name} is not implemented for sparse types, got: "
                           f"{_options(name, dtype, dev, layout)}")
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"{name} expects floating point dtypes, got: "
                           f"{_options(name, dtype, dev, layout)}")
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
    _check_periodic("hann_window", window_length, periodic)
    return _window("hann_window", window_length, periodic, dtype, layout, device,
                   requires_grad, lambda n, step: _cosine_sum(n, step, 0.5, 0.5))


def hamming_window(window_length, periodic=_MISSING, alpha=_MISSING, beta=_MISSING, *,
                   dtype=None, layout=None, device=None, pin_memory=False,
                   requires_grad=False):
    """The Hamming window: alpha - beta cos(2 pi k / (N - 1)), by default alpha = 0.54 and
    beta = 0.46 (periodic: N is one more than ``window_length``)."""
    _parse("hamming_window", window_length, ("periodic", periodic, "bool"),
           ("alpha", alpha, "float"), ("beta", beta, "float"))
    periodic = True if periodic is _MISSING else periodic
    alpha, beta = _float(alpha, 0.54), _float(beta, 0.46)
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
    _check_periodic("blackman_window", window_length, periodic)
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
    _check_periodic("bartlett_window", window_length, periodic)
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
    _parse("kaiser_window", window_length, ("periodic", periodic, "bool"),
           ("beta", beta, "float"))
    periodic = True if periodic is _MISSING else periodic
    beta = _float(beta, 12.0)
    return _window("kaiser_window", window_length, periodic, dtype, layout, device,
                   requires_grad, _kaiser(beta))
