"""Discrete Fourier transforms: ``ember.fft`` (fft, ifft, rfft, irfft, hfft, ihfft and their
2-D and N-D forms).

Three kernels do the work, as in PyTorch: complex-to-complex (fft, ifft), real-to-complex
(rfft; ihfft is its conjugate) and complex-to-real (irfft; hfft is irfft of the conjugate).
Each transform first resizes its input to the signal sizes (``n`` or ``s``: zero padding or
truncation), then transforms. Integer and bool inputs compute in the default float dtype;
float32 gives complex64 and float64 complex128, computed in that precision; PyTorch's
CPU kernels have no float16 or bfloat16 transforms, so neither has ember.

NOTE [FFT gradients]
Each transform is linear over the reals, so its gradient is its adjoint applied to ``grad``
(PyTorch's convention for complex gradients; the engine keeps the real part for real
inputs). The adjoint of a DFT of one sign is the DFT of the other sign with the dual
normalization ("backward" <-> "forward", "ortho" alone); the adjoint of resizing to ``s`` is
resizing back. A one-sided (r2c) output keeps bins ``0..n//2`` of the full transform, so
its adjoint zero-pads ``grad`` to ``n`` bins first. A c2r transform reads each bin
``1..(n-1)//2`` twice (as itself and as its mirrored conjugate), so its adjoint, an r2c
transform, counts those bins twice.
"""

import itertools

import numpy as np

from ember import _dtype as D
from ember.backend import fft_of
from ember.ops._dims import argument_name, int_sequence, type_name, wrap_dim
from ember.ops.join import pad_along
from ember.ops.padding import constant_pad_nd
from ember.ops._registry import op
from ember.ops._scalars import int_arg

_NORMS = {None: "backward", "backward": "backward", "forward": "forward", "ortho": "ortho"}
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
_LOW = D.LOW_PRECISION_NP


# --- arguments --------------------------------------------------------------------------------

def _ints(value, what, name, position=None):
    """``s`` or ``dim`` of an N-D transform: None, an int, or a sequence of ints (at
    ``position`` of the function form, for the message)."""
    if value is None:
        return None
    if hasattr(value, "__index__") and not isinstance(value, bool) and \
            getattr(value, "ndim", 0) == 0:
        return (value.__index__(),)
    return int_sequence(value, (name, what, None if position is None else position - 1,
                                "function"))


def _typed(name, form, size, dim, norm):
    """PyTorch's argument parser: the types of ``n`` / ``s``, ``dim`` and ``norm`` (positions
    2 to 4) are checked before anything else."""
    if form == 1:
        if size is not None:
            int_arg(size, name, "n", 2)
        int_arg(dim, name, "dim", 3)
    else:
        _ints(size, "s", name, 2)
        _ints(dim, "dim", name, 3)
    if norm is not None and not isinstance(norm, str):
        raise TypeError(f"{argument_name((name, 'norm', 3, 'function'))} must be str, not "
                        f"{type_name(norm)}")


def _axis(dim, ndim):
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(dim, ndim)


def _points(n):
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return n


def _norm(norm, name):
    if norm is not None and not isinstance(norm, str):
        raise TypeError(f"{name}(): argument 'norm' must be str, not {type(norm).__name__}")
    mode = _NORMS.get(norm)
    if mode is None:
        raise RuntimeError(f"Invalid normalization mode: \"{norm}\"")
    return mode


def _plan_1d(name, shape, n, dim, c2r):
    """(axes, sizes) of a one-dim transform; a c2r transform's size is its output length."""
    dim = int_arg(dim, name, "dim")
    if n is not None:
        n = int_arg(n, name, "n")
    axis = _axis(dim, len(shape))
    if n is None:
        n = 2 * (shape[axis] - 1) if c2r else shape[axis]
    return (axis,), (_points(n),)


def _plan_nd(name, shape, s, dim, c2r, short):
    """(axes, sizes) of an N-D transform; ``short`` names a one-sided transform, which must
    cover at least one dim."""
    s, dims = _ints(s, "s", name), _ints(dim, "dim", name)
    ndim = len(shape)
    if dims is not None:
        axes = tuple(_axis(d, ndim) for d in dims)
        if len(set(axes)) != len(axes):
            raise RuntimeError("FFT dims must be unique")
        if s is not None and len(s) != len(axes):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                               f"{ndim} dimensions.")
        axes = tuple(range(ndim - len(s), ndim))
    else:
        axes = tuple(range(ndim))
    if short and not axes:
        raise RuntimeError(f"{short} must transform at least one axis")
    sizes = []
    for i, a in enumerate(axes):
        n = -1 if s is None else s[i]
        if n == -1:         # the input's size, checked as given before a c2r doubles it
            n = _points(shape[a])
            if c2r and i == len(axes) - 1:
                n = 2 * (n - 1)
        sizes.append(_points(n))
    return axes, tuple(sizes)


def _unsupported(x):
    if x.dtype in _LOW:
        raise RuntimeError(f"Unsupported dtype {D.FROM_NUMPY[x.dtype]._torch_name}")


def _complex_input(x, message):
    if x.dtype.kind == "c":
        raise RuntimeError(message.format(D.FROM_NUMPY[x.dtype]._torch_name))


def _as_float(x):
    """Integer and bool signals compute in the default float dtype."""
    return x.astype(D.get_default_dtype().np) if x.dtype.kind in "biu" else x


# --- the three kernels ------------------------------------------------------------------------

def _c2c(xp, x, axes, sizes, norm, inverse, one_d=False):
    """A real ``x`` is transformed as PyTorch does, which fixes the signs of zero parts: by
    fft and ifft (``one_d``) through the one-sided transform, by the others as complex."""
    real = x.dtype.kind != "c"
    if real:
        if one_d:
            return _real_full(xp, x, axes[0], sizes[0], norm, inverse)
        x = x.astype(np.result_type(x.dtype, np.complex64))
    if not axes:
        return x
    lib = fft_of(xp)
    if len(axes) == 1:
        return (lib.ifft if inverse else lib.fft)(x, sizes[0], axes[0], norm)
    out = (lib.ifftn if inverse else lib.fftn)(x, sizes, axes, norm)
    return _real_bins(out, axes, sizes) if real else out


def _real_bins(out, axes, sizes):
    """Zero the imaginary parts of a real signal's self-conjugate bins (each index 0 or n/2),
    which are real: PyTorch's kernels give exact zeros there, pocketfft's c2c passes over the
    leading dims leave rounding noise that Adam would turn into full-size steps."""
    picks = [(0, n // 2) if n % 2 == 0 and n > 1 else (0,) for n in sizes]
    index = [slice(None)] * out.ndim
    for bins in itertools.product(*picks):
        for a, k in zip(axes, bins):
            index[a] = slice(k, k + 1)
        part = out.imag[tuple(index)]
        part[part != 0] = 0             # rounding noise becomes +0.0; a zero keeps its sign
    return out


def _real_full(xp, x, axis, n, norm, inverse):
    """The full transform of a real signal: its one-sided half, the rest filled in with the
    conjugates of its mirror image (an inverse transform is the conjugate of a forward one)."""
    half = fft_of(xp).rfft(x, n, axis, _DUAL[norm] if inverse else norm)
    mirror = xp.flip(xp.take(half, xp.arange(1, n - half.shape[axis] + 1), axis=axis), axis)
    full = xp.concatenate([half, xp.conjugate(mirror)], axis=axis)
    return xp.conjugate(full, out=full) if inverse else full


def _r2c(xp, x, axes, sizes, norm, conj):
    if conj:                            # ihfft: the conjugate of rfft, dually normalized
        norm = _DUAL[norm]
    lib = fft_of(xp)
    if conj and len(axes) > 1:          # as PyTorch: the conjugated one-sided transform of
        half = lib.rfft(x, sizes[-1], axes[-1], norm)   # the last dim, then inverse c2c
        half = xp.conjugate(half, out=half)             # transforms of the others
        pads = [(0, 0)] * half.ndim     # a padded signal's conjugated zeros: imaginary -0.0
        for a, n in zip(axes[:-1], sizes[:-1]):
            pads[a] = (0, max(n - half.shape[a], 0))
        if any(p[1] for p in pads):
            half = xp.pad(half, pads, constant_values=complex(0.0, -0.0))
        return _real_bins(lib.ifftn(half, sizes[:-1], axes[:-1], _DUAL[norm]), axes, sizes)
    if len(axes) == 1:
        out = lib.rfft(x, sizes[0], axes[0], norm)
    else:
        out = _real_bins(lib.rfftn(x, sizes, axes, norm), axes, sizes)
    return xp.conjugate(out, out=out) if conj else out


def _c2r(xp, x, axes, sizes, norm, conj):
    if any(x.shape[a] == 0 for a in axes):
        # a zero-padded empty spectrum (NumPy's irfft reads uninitialized memory for it)
        shape = list(x.shape)
        for a, n in zip(axes, sizes):
            shape[a] = n
        return xp.zeros(shape, dtype=x.real.dtype)
    lib = fft_of(xp)
    if conj and len(axes) > 1:          # as PyTorch: the leading dims' forward transform
        x = x.astype(np.result_type(x.dtype, np.complex64), copy=False)     # (complex),
        x = lib.fftn(x, sizes[:-1], axes[:-1], norm)    # conjugated, then irfft's
        return lib.irfft(xp.conjugate(x, out=x), sizes[-1], axes[-1], _DUAL[norm])
    if conj:                            # hfft: irfft of the conjugate, dually normalized
        x, norm = xp.conjugate(x), _DUAL[norm]
    if len(axes) == 1:
        return lib.irfft(x, sizes[0], axes[0], norm)
    return lib.irfftn(x, sizes, axes, norm)


# --- gradients (see NOTE [FFT gradients]) -----------------------------------------------------

def _resize(t, axes, sizes):
    """``t`` truncated or zero-padded to ``sizes`` along ``axes``."""
    for a, n in zip(axes, sizes):
        have = t.shape[a]
        if have > n:
            t = t.narrow(a, 0, n)
        elif have < n:
            t = pad_along(t, a, 0, n - have)
    return t


def _c2c_grad(grad, shape, axes, norm, inverse):
    adjoint = fftn if inverse else ifftn
    return _resize(adjoint(grad, None, axes, _DUAL[norm]), axes, [shape[a] for a in axes])


def _r2c_grad(grad, shape, axes, sizes, norm):
    last, n = axes[-1], sizes[-1]
    full = pad_along(grad, last, 0, n - grad.shape[last])
    return _resize(ifftn(full, None, axes, _DUAL[norm]), axes, [shape[a] for a in axes]).real


def _c2r_grad(grad, shape, axes, sizes, norm):
    last, n = axes[-1], sizes[-1]
    half = rfftn(grad, None, axes, _DUAL[norm])
    twice = (n - 1) // 2                # bins read twice: 1..(n-1)//2
    if twice:
        half = half + pad_along(half.narrow(last, 1, twice), last, 1, n // 2 - twice)
    return _resize(half, axes, [shape[a] for a in axes])


# --- registration -----------------------------------------------------------------------------

_SIGNATURES = {1: "{}(input, n=None, dim=-1, norm=None)",
               2: "{}(input, s=None, dim=(-2, -1), norm=None)",
               "n": "{}(input, s=None, dim=None, norm=None)"}


def _register(name, form, kind, doc, *, flag=False):
    """Register ``fft.<name>``: ``form`` is 1, 2 or "n" (its arguments), ``kind`` "c2c",
    "r2c" or "c2r"; ``flag`` is ``inverse`` for c2c, ``conj`` (ihfft, hfft) otherwise.

    PyTorch checks in this order, which the forward follows: a 1-D transform checks the
    dtype first; an N-D one checks its dims and sizes first, except that rfft2 and rfftn
    reject complex input before anything else; the norm comes after the dtype (and before
    ihfft2 and ihfftn reject complex input)."""
    full = f"fft_{name}"
    c2r = kind == "c2r"
    short = name.rstrip("2n") + "n" if form != 1 and kind != "c2c" else None
    real_message = None
    if kind == "r2c":
        real_message = (f"{name} expects a real input tensor, but got {{}}" if form == 1 else
                        "Only supports floating-point dtypes, but found: {}" if flag else
                        "rfftn expects a real-valued input tensor, but got {}")
    complex_first = real_message is not None and (form == 1 or not flag)

    def plan(shape, size, dim):
        if form == 1:
            return _plan_1d(full, shape, size, dim, c2r)
        return _plan_nd(full, shape, size, dim, c2r, short)

    def checked(x, size, dim, norm):
        """The forward's checks, in PyTorch's order; returns (axes, sizes, norm mode)."""
        _typed(full, form, size, dim, norm)
        if form == 1:
            _unsupported(x)
        if complex_first:
            _complex_input(x, real_message)
        axes, sizes = plan(x.shape, size, dim)
        _unsupported(x)
        mode = _norm(norm, full)
        if real_message is not None and not complex_first:
            _complex_input(x, real_message)
        return axes, sizes, mode

    def forward(xp, x, size, dim, norm):
        axes, sizes, mode = checked(x, size, dim, norm)
        x = _as_float(x)
        if kind == "c2c":
            return _c2c(xp, x, axes, sizes, mode, flag, one_d=form == 1)
        if kind == "r2c":
            return _r2c(xp, x, axes, sizes, mode, flag)
        return _c2r(xp, x, axes, sizes, mode, flag)

    def derivative(grad, x, size, dim, norm):
        axes, sizes = plan(x.shape, size, dim)
        mode = _NORMS[norm]
        if kind == "c2c":
            return _c2c_grad(grad, x.shape, axes, mode, flag)
        if flag:                        # the conjugate's adjoint: conjugate in and out
            mode = _DUAL[mode]
            if kind == "r2c":
                return _r2c_grad(grad.conj(), x.shape, axes, sizes, mode)
            return _c2r_grad(grad, x.shape, axes, sizes, mode).conj()
        if kind == "r2c":
            return _r2c_grad(grad, x.shape, axes, sizes, mode)
        return _c2r_grad(grad, x.shape, axes, sizes, mode)

    forward.__doc__ = doc
    # PyTorch's r2c kernel saves its (real) input; the c2c and c2r ones save no input
    two_sided = kind == "c2c" and form == 1 and not flag    # fft: r2c for a real signal
    new = op(_SIGNATURES[form].format(name), out=True, saves_inputs=kind == "r2c" or two_sided,
             namespace="fft", grad_fn_name=f"Fft{kind.upper()}Backward0")(forward)
    new.derivative(derivative)
    if two_sided:
        new.named_by(_fft_node_name)
        new.reads_inputs(_real_signal_saved)

    @new.composed_when_recording
    def _(inputs, params):
        x = inputs[0]
        axes, sizes, mode = checked(x._data, *params)
        if kind == "c2c":
            return _composed_c2c(x, axes, sizes, mode, flag, form == 1)
        if kind == "r2c":
            return _composed_r2c(x, axes, sizes, mode, flag)
        return _composed_c2r(x, axes, sizes, mode, flag)
    return new


def _fft_node_name(flat, params, outputs):
    """fft of a real signal runs PyTorch's r2c kernel (two-sided): its node is FftR2C's."""
    return "FftC2CBackward0" if flat[0].is_complex() else "FftR2CBackward0"


def _real_signal_saved(flat, params):
    """fft's readers: the r2c kernel of a real signal saves it, the c2c one nothing."""
    return ((),) if flat[0].is_complex() else ((0,),)


# --- the graphs PyTorch records -----------------------------------------------------------
# NOTE [FFT graphs]
# PyTorch composes each transform from its three kernels (nodes FftC2C, FftR2C, FftC2R):
# a real input of a c2c or c2r transform is first copied to complex (ToCopy), the signal is
# resized (a slice per trimmed dim, then one constant_pad_nd), a hermitian transform
# conjugates (Conj before c2r; Conj, or ConjPhysical before the leading dims' c2c, after
# r2c), and the kernel runs. When a call records a graph, ember composes it alike: the ops
# below, called on the resized signal, are the kernels (their own resizing then does
# nothing), and compute what the fused forwards do.

def _resized(x, axes, sizes):
    """``x`` trimmed (a slice per dim), then zero-padded (one pad) to ``sizes`` along
    ``axes``."""
    for a, n in zip(axes, sizes):
        if x.shape[a] > n:
            x = x.narrow(a, 0, n)
    pads = [0] * (2 * x.ndim)
    for a, n in zip(axes, sizes):
        pads[2 * (x.ndim - 1 - a) + 1] = max(n - x.shape[a], 0)
    return constant_pad_nd(x, pads) if any(pads) else x


def _as_complex(x):
    """A real signal copied to the complex dtype of its precision (ToCopy)."""
    if x.is_complex():
        return x
    return x.to(D.FROM_NUMPY[np.result_type(x._data.dtype, np.complex64)])


def _composed_c2c(x, axes, sizes, mode, inverse, one_d):
    if one_d and not x.is_complex():    # the two-sided r2c kernel; an inverse is its conjugate
        y = fft.fused(_resized(x, axes, sizes), None, axes[0], _DUAL[mode] if inverse else mode)
        return y.conj() if inverse else y
    x = _resized(_as_complex(x), axes, sizes)
    return (ifftn if inverse else fftn).fused(x, None, axes, mode)


def _composed_r2c(x, axes, sizes, mode, conj):
    x = _resized(x, axes, sizes)
    if not conj:
        kernel = rfft if len(axes) == 1 else rfftn
        return kernel.fused(x, None, axes[0] if len(axes) == 1 else axes, mode)
    half = rfft.fused(x, None, axes[-1], _DUAL[mode])
    if len(axes) == 1:
        return half.conj()
    return ifftn.fused(half.conj_physical(), None, axes[:-1], mode)


def _composed_c2r(x, axes, sizes, mode, conj):
    x = _resized(_as_complex(x), axes, sizes[:-1] + (sizes[-1] // 2 + 1,))
    if conj and len(axes) > 1:
        x = fftn.fused(x, None, axes[:-1], mode)
    if conj:
        return irfft.fused(x.conj(), sizes[-1], axes[-1], _DUAL[mode])
    if len(axes) == 1:
        return irfft.fused(x, sizes[0], axes[0], mode)
    return irfftn.fused(x, sizes, axes, mode)


fft = _register("fft", 1, "c2c", "The one-dimensional discrete Fourier transform.")
ifft = _register("ifft", 1, "c2c", "The one-dimensional inverse discrete Fourier transform.",
                 flag=True)
fft2 = _register("fft2", 2, "c2c", "The two-dimensional discrete Fourier transform.")
ifft2 = _register("ifft2", 2, "c2c", "The two-dimensional inverse discrete Fourier transform.",
                  flag=True)
fftn = _register("fftn", "n", "c2c", "The N-dimensional discrete Fourier transform.")
ifftn = _register("ifftn", "n", "c2c", "The N-dimensional inverse discrete Fourier transform.",
                  flag=True)
rfft = _register("rfft", 1, "r2c", "The one-dimensional Fourier transform of real input "
                 "(the non-negative frequencies only).")
rfft2 = _register("rfft2", 2, "r2c", "The two-dimensional Fourier transform of real input "
                  "(one-sided in the last dim).")
rfftn = _register("rfftn", "n", "r2c", "The N-dimensional Fourier transform of real input "
                  "(one-sided in the last dim).")
irfft = _register("irfft", 1, "c2r", "The inverse of rfft: a real signal from the "
                  "non-negative frequencies of a Hermitian spectrum.")
irfft2 = _register("irfft2", 2, "c2r", "The inverse of rfft2 (real output).")
irfftn = _register("irfftn", "n", "c2r", "The inverse of rfftn (real output).")
hfft = _register("hfft", 1, "c2r", "The one-dimensional Fourier transform of a Hermitian "
                 "signal given by its one-sided half (real output).", flag=True)
hfft2 = _register("hfft2", 2, "c2r", "The two-dimensional Fourier transform of a Hermitian "
                  "signal given by its one-sided half (real output).", flag=True)
hfftn = _register("hfftn", "n", "c2r", "The N-dimensional Fourier transform of a Hermitian "
                  "signal given by its one-sided half (real output).", flag=True)
ihfft = _register("ihfft", 1, "r2c", "The inverse of hfft: the one-sided half of the inverse "
                  "transform of a real signal.", flag=True)
ihfft2 = _register("ihfft2", 2, "r2c", "The inverse of hfft2 (one-sided in the last dim).",
                   flag=True)
ihfftn = _register("ihfftn", "n", "r2c", "The inverse of hfftn (one-sided in the last dim).",
                   flag=True)

ALIASES = {}
