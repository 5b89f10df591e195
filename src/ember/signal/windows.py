"""Window functions of ``torch.signal.windows``: bartlett, blackman, cosine, exponential,
gaussian, general_cosine, general_hamming, hamming, hann, kaiser and nuttall.

Unlike the top-level ``hann_window`` and the others (ember/_windows.py), these take the
length ``M`` and a keyword-only ``sym`` (``sym=False`` gives the periodic window, the
symmetric one of length M + 1 without its last value), accept float32 and float64 only and
raise ``ValueError`` for bad arguments. The values are computed on the host as PyTorch's CPU
code composes them: a ``linspace`` (each value one fused multiply-add, rounded once), then
elementwise steps each rounded to the dtype. Transcendental steps (exp, sin, cos, I0) are
computed in float64 and rounded once, so float32 results can differ from PyTorch's
vectorised kernels by an ulp (a few for kaiser, whose float32 I0 PyTorch evaluates in
float32). With ``requires_grad`` the result is a leaf (PyTorch's is the output of a graph
hanging from its internal linspace).
"""

import math
from collections.abc import Iterable

import numpy as np
import scipy.special

from ember import _dtype as D
from ember._api import strided
from ember._creation import _finish, _place, _target, check_requires_grad
from ember._device import device as _device

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]

_NUMBERS = "ember.dtype dtype = None, ember.layout layout = None, ember.device device = None"
_LINSPACE_FORMS = "".join(
    f" * ({s} start, {e} end, int steps, *, Tensor out = None, {_NUMBERS}, bool pin_memory = "
    f"False, bool requires_grad = False)\n"
    for s, e in (("Tensor", "Tensor"), ("Number", "Tensor"), ("Tensor", "Number"),
                 ("Number", "Number")))


class _Call:
    """One window call: PyTorch's checks of its arguments, then the dtype's rounding and the
    making of the result tensor."""

    def __init__(self, name, M, dtype, layout, device, requires_grad):
        if M < 0:
            raise ValueError(f"{name} requires non-negative window length, got M={M}")
        if layout is not strided:
            raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
        dtype = D.get_default_dtype() if dtype is None else dtype
        if dtype not in (D.float32, D.float64):
            raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
        self.M, self.dtype, self.device, self.requires_grad = M, dtype, device, requires_grad

    def round(self, values):
        """``values`` rounded to the dtype, held as float64."""
        with np.errstate(all="ignore"):     # overflow to inf, as PyTorch's casts
            return np.asarray(values, np.float64).astype(self.dtype.np).astype(np.float64)

    def tensor(self, values):
        """The result: ``values`` in the dtype, on the device."""
        # PyTorch makes the short windows with empty() or ones(), whose parsers check the flag
        check_requires_grad(self.requires_grad, "empty" if self.M == 0 else "ones")
        _, dev = _target(self.device)
        array = np.asarray(values, np.float64).astype(self.dtype.np)
        return _finish(_place(array, dev), self.requires_grad)

    def linspace(self, start, end, kinds=None):
        """``torch.linspace(start, end, M)``'s values in the dtype: the first half
        start + i * step, the rest end - (M - 1 - i) * step, each a fused multiply-add
        (``kinds``: the type names PyTorch's error would give start and end)."""
        steps = self.M
        flag = self.requires_grad
        if isinstance(steps, bool) or not hasattr(type(steps), "__index__") or not (
                flag is None or isinstance(flag, bool)):
            raise _linspace_error(kinds or (_kind(start), _kind(end)), steps, self.device,
                                  type(flag).__name__)
        steps = steps.__index__()
        kind = self.dtype.np.type
        start, end = kind(start), kind(end)
        if steps <= 1:
            return self.round([start][:steps])
        step = (end - start) / kind(steps - 1)
        if not all(map(math.isfinite, (start, end, step))):    # nan and inf propagate
            i = np.arange(steps, dtype=np.float64)
            with np.errstate(all="ignore"):
                return self.round(np.where(i < steps // 2, start + step * i,
                                           end - step * (steps - 1 - i)))
        return np.array(_fused_line(float(start), float(end), float(step), steps,
                                    np.finfo(self.dtype.np).nmant + 1))


def _kind(value):
    """The type name PyTorch's argument parser prints for ``value``."""
    if value is None:
        return "NoneType"
    return "ember.device" if isinstance(value, _device) else type(value).__name__


def _linspace_error(kinds, steps, device, flag_kind="bool"):
    """PyTorch's TypeError for a window length that linspace cannot take as ``steps``, or a
    ``requires_grad`` that is not a bool (``kinds``: the type names of its start and end)."""
    got = (f"requires_grad={flag_kind}, device={_kind(device)}, layout=ember.layout, "
           f"dtype=ember.dtype, steps={type(steps).__name__}, end={kinds[1]}, "
           f"start={kinds[0]}, ")
    return TypeError(f"linspace() received an invalid combination of arguments - got ({got}), "
                     f"but expected one of:\n{_LINSPACE_FORMS}")


def _split(value):
    """Integers (n, k) with value == n * 2**k exactly."""
    mantissa, exponent = math.frexp(value)
    return int(mantissa * (1 << 53)), exponent - 53


def _nearest(n, k, bits):
    """n * 2**k rounded to ``bits`` significant bits, ties to even."""
    size = abs(n)
    shift = max(size.bit_length() - bits, 0)
    q, r = divmod(size, 1 << shift)
    if 2 * r > 1 << shift or (2 * r == 1 << shift and q & 1):
        q += 1
    return math.ldexp(q if n >= 0 else -q, k + shift)


def _fused_line(start, end, step, steps, bits):
    """start + i * step (first half) and end - j * step (second half), computed exactly in
    integers and rounded once to ``bits`` significant bits."""
    (s, a), (e, b), (t, c) = _split(start), _split(end), _split(step)
    low = min(a, b, c)
    s, e, t = s << (a - low), e << (b - low), t << (c - low)
    half = steps // 2
    return ([_nearest(s + t * i, low, bits) for i in range(half)]
            + [_nearest(e - t * (steps - 1 - i), low, bits) for i in range(half, steps)])


def _centre(M, sym):
    """Half the span of a window centred in its middle (periodic ones: of M + 1 values)."""
    return (M if not sym and M > 1 else M - 1) / 2.0


def bartlett(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The Bartlett (triangular) window: 1 - |2n / (M - 1) - 1|."""
    call = _Call("bartlett", M, dtype, layout, device, requires_grad)
    if M in (0, 1):
        return call.tensor(np.ones(int(M)))
    constant = 2 / (M if not sym else M - 1)
    k = call.linspace(-1, -1 + (M - 1) * constant)
    return call.tensor(call.round(1 - np.abs(k)))


def cosine(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The cosine (sine) window: sin(pi (n + 1/2) / M)."""
    call = _Call("cosine", M, dtype, layout, device, requires_grad)
    if M == 0:
        return call.tensor(np.ones(0))
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    k = call.linspace(0.5 * constant, (0.5 + (M - 1)) * constant)
    return call.tensor(call.round(np.sin(k)))


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=strided, device=None,
                requires_grad=False):
    """The exponential (Poisson) window: exp(-|n - center| / tau), centred by default."""
    call = _Call("exponential", M, dtype, layout, device, requires_grad)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return call.tensor(np.ones(0))
    center = _centre(M, sym) if center is None else center
    constant = 1 / tau
    k = call.linspace(-center * constant, (-center + (M - 1)) * constant)
    return call.tensor(call.round(np.exp(-np.abs(k))))


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=strided, device=None,
             requires_grad=False):
    """The Gaussian window: exp(-(n - (M - 1) / 2)^2 / (2 std^2))."""
    call = _Call("gaussian", M, dtype, layout, device, requires_grad)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return call.tensor(np.ones(0))
    start = -_centre(M, sym)
    constant = 1 / (std * math.sqrt(2))
    k = call.linspace(start * constant, (start + (M - 1)) * constant)
    return call.tensor(call.round(np.exp(-call.round(k * k))))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=strided, device=None,
           requires_grad=False):
    """The Kaiser window: I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)."""
    call = _Call("kaiser", M, dtype, layout, device, requires_grad)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M in (0, 1):
        return call.tensor(np.ones(int(M)))
    # PyTorch makes beta a tensor of the dtype, so every step here rounds to it
    b = call.round(beta)
    i0 = scipy.special.i0
    with np.errstate(all="ignore"):         # an infinite beta gives nan, as in PyTorch
        constant = call.round(call.round(2.0 * b) / (M if not sym else M - 1))
        start = -b
        end = np.minimum(b, call.round(start + call.round((M - 1) * constant)))
        k = call.linspace(start, end, kinds=("Tensor", "Tensor"))
        root = call.round(np.sqrt(call.round(call.round(b * b) - call.round(k * k))))
        return call.tensor(call.round(call.round(i0(root)) / call.round(i0(b))))


def general_cosine(M, *, a, sym=True, dtype=None, layout=strided, device=None,
                   requires_grad=False):
    """A sum of cosines: sum over i of (-1)^i a[i] cos(2 pi i n / (M - 1))."""
    call = _Call("general_cosine", M, dtype, layout, device, requires_grad)
    if M in (0, 1):
        return call.tensor(np.ones(int(M)))
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    terms = [(-1) ** i * w for i, w in enumerate(a)]
    constant = 2 * math.pi / (M if not sym else M - 1)
    k = call.linspace(0, (M - 1) * constant)
    # then PyTorch's tensor() of the coefficients, whose parser refuses requires_grad=None
    check_requires_grad(requires_grad, "tensor", none_ok=False)
    if any(isinstance(w, complex) for w in terms):
        raise TypeError("must be real number, not complex")
    total = None
    for i, w in enumerate(call.round(np.array(terms, np.float64))):
        term = call.round(w * call.round(np.cos(call.round(i * k))))
        total = term if total is None else call.round(total + term)
    return call.tensor(total)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=strided, device=None,
                    requires_grad=False):
    """The generalised Hamming window: alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The Hamming window: 0.54 - 0.46 cos(2 pi n / (M - 1))."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The Hann window: 0.5 - 0.5 cos(2 pi n / (M - 1))."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The Blackman window: 0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1))."""
    _Call("blackman", M, dtype, layout, device, requires_grad)
    return general_cosine(M, a=[0.42, 0.50, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)
