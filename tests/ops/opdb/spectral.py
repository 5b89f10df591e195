"""OpInfo entries for ember/ops/spectral.py (ember.fft)."""

import numpy as np

import ember
from tests.ops.opdb.core import COMPLEX, FLOATS, INTS, ErrorInput, OpInfo, SampleInput, make

REAL = FLOATS + INTS + (ember.bool,)
_DUAL = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}
# float32 transforms round at every butterfly: a few ulps of the largest output element
_TOL = {d: (1e-4, 1e-4) for d in INTS + (ember.bool, ember.float32, ember.complex64)}


def _s(x, name, **kwargs):
    return SampleInput(x, (), kwargs, name=name)


def _err(x, error, match, **kwargs):
    return ErrorInput(SampleInput(x, (), kwargs), error, match)


# --- references: NumPy's transforms on explicit axes ------------------------------------------

def _resolve(a, s, dim, c2r):
    """(axes, sizes) as the torch.fft docs define them, for NumPy's explicit-axes calls."""
    s = (s,) if isinstance(s, int) else s
    dim = (dim,) if isinstance(dim, int) else dim
    if dim is None:
        dim = range(a.ndim) if s is None else range(a.ndim - len(s), a.ndim)
    axes = [d % a.ndim for d in dim]
    sizes = [a.shape[d] for d in axes] if s is None else list(s)
    for i, d in enumerate(axes):
        if sizes[i] == -1 or (s is None and c2r and i == len(axes) - 1):
            sizes[i] = 2 * (a.shape[d] - 1) if c2r and i == len(axes) - 1 else a.shape[d]
    return axes, sizes


def _transform(a, axes, sizes, norm, kind, flag):
    if kind == "c2c":
        if not axes:
            return a.astype(np.complex128)
        return (np.fft.ifftn if flag else np.fft.fftn)(a, sizes, axes, norm)
    if kind == "r2c":
        if flag:
            return np.conj(np.fft.rfftn(a, sizes, axes, _DUAL[norm]))
        return np.fft.rfftn(a, sizes, axes, norm)
    if flag:
        return np.fft.irfftn(np.conj(a), sizes, axes, _DUAL[norm])
    return np.fft.irfftn(a, sizes, axes, norm)


def _ref(form, kind, flag):
    default_dim = {1: -1, 2: (-2, -1), "n": None}[form]

    def ref(a, size=None, dim=default_dim, norm=None, n=None, s=None):
        size = n if n is not None else s if s is not None else size
        a = np.asarray(a, dtype=np.complex128 if a.dtype.kind == "c" else np.float64)
        if form == 1:
            axes, sizes = [dim % a.ndim], [size if size is not None else
                                           2 * (a.shape[dim] - 1) if kind == "c2r" else
                                           a.shape[dim]]
        else:
            axes, sizes = _resolve(a, size, dim, kind == "c2r")
        return _transform(a, axes, sizes, norm, kind, flag)
    return ref


# --- samples ----------------------------------------------------------------------------------

def _samples_1d(dtype, rg):
    def m(shape, **kw):
        return make(shape, dtype, rg, **kw)
    yield _s(m((5,)), "1d")
    yield _s(m((3, 4)), "dim0", dim=0)
    yield _s(m((2, 3, 4)), "batched_ortho", dim=1, norm="ortho")
    yield _s(m((6,)), "padded_forward", n=9, norm="forward")
    yield _s(m((2, 7)), "truncated_backward", n=4, norm="backward")
    yield _s(m((4, 6), noncontiguous=True), "noncontiguous", n=5, dim=0)
    yield _s(m((3, 2, 5)), "batched_last", dim=-1)
    yield _s(m((2,)), "n_one", n=1)
    yield _s(m((0,)), "empty_padded", n=4)


def _samples_2d(dtype, rg):
    def m(shape, **kw):
        return make(shape, dtype, rg, **kw)
    yield _s(m((3, 4)), "2d")
    yield _s(m((2, 3, 4)), "batched_ortho", norm="ortho")
    yield _s(m((4, 5)), "resized_forward", s=(3, 7), norm="forward")
    yield _s(m((2, 3, 4)), "dims_0_2", dim=(0, 2))
    yield _s(m((3, 4, 2)), "dims_reversed", s=(3, 5), dim=(-1, 0))
    yield _s(m((4, 3), noncontiguous=True), "noncontiguous")
    yield _s(m((3, 4)), "s_minus_one", s=(-1, 6))
    yield _s(m((0, 3)), "empty_padded", s=(2, 3))


def _samples_nd(c2c):
    def samples(dtype, rg):
        def m(shape, **kw):
            return make(shape, dtype, rg, **kw)
        yield _s(m((3, 4, 5)), "3d")
        yield _s(m((2, 3)), "2d_ortho", norm="ortho")
        yield _s(m((3, 4, 5)), "last_two_by_s", s=(4, 6))
        yield _s(m((3, 4, 5)), "dims_by_s", dim=(0, 2), s=(2, 7), norm="forward")
        yield _s(m((4, 5)), "int_dim", dim=1)
        yield _s(m((4, 5)), "int_s", s=3)
        yield _s(m((2, 3, 4)), "s_minus_one", s=(3, -1, 5))
        yield _s(m((4, 3, 2), noncontiguous=True), "noncontiguous", dim=(0, -1))
        yield _s(m((0, 3)), "empty_padded", s=(2, 3))
        yield _s(m((5,)), "1d")
        if c2c:
            yield _s(m((2, 3)), "no_dims", dim=())
            yield _s(m(()), "0dim")
    return samples


_SAMPLES = {1: _samples_1d, 2: _samples_2d}


def _with_complex(samples):
    """Gradient samples: float64 inputs, then complex128 ones."""
    def grad_samples(dtype, rg):
        yield from samples(dtype, rg)
        yield from samples(ember.complex128, rg)
    return grad_samples


# --- errors -----------------------------------------------------------------------------------

# the harness's call, f(x, *sample.args, **sample.kwargs), cannot be read back to tell a
# keyword from a position (NOTE [Unpacked calls]): either wording
_AT = {k: f"(?: \\(position {k}\\))?" for k in (2, 3)}


def _errors(name, form, kind, flag):
    fn = f"fft_{name}"
    short = name.rstrip("2n") + "n"

    def errors():
        x = ember.ones(4, 5)
        for low in (ember.float16, ember.bfloat16):
            yield _err(ember.ones(4, 4, dtype=low), RuntimeError,
                       f"Unsupported dtype {low._torch_name}")
        yield _err(x, RuntimeError, 'Invalid normalization mode: "bad"', norm="bad")
        if kind == "r2c":
            c = ember.ones(4, 4, dtype=ember.complex64)
            match = (f"{name} expects a real input tensor, but got ComplexFloat" if form == 1
                     else "Only supports floating-point dtypes, but found: ComplexFloat" if flag
                     else "rfftn expects a real-valued input tensor, but got ComplexFloat")
            yield _err(c, RuntimeError, match)
        if form == 1:
            yield _err(x, RuntimeError, r"Invalid number of data points \(0\) specified", n=0)
            yield _err(x, RuntimeError, r"Invalid number of data points \(-1\) specified",
                       n=-1)
            yield _err(x, IndexError, r"Dimension out of range \(expected to be in range of "
                       r"\[-2, 1\], but got 2\)", dim=2)
            yield _err(ember.tensor(1.0), IndexError,
                       "Dimension specified as -1 but tensor has no dimensions")
            yield _err(x, TypeError, f"{fn}\\(\\): argument 'n'{_AT[2]} must be int, not float",
                       n=3.0)
            yield _err(x, TypeError,
                       f"{fn}\\(\\): argument 'dim'{_AT[3]} must be int, not tuple",
                       dim=(0,))
            if kind == "c2r":
                yield _err(ember.ones(3, 1), RuntimeError,
                           r"Invalid number of data points \(0\) specified")
                yield _err(ember.ones(0), RuntimeError,
                           r"Invalid number of data points \(-2\) specified")
            else:
                yield _err(ember.ones(0), RuntimeError,
                           r"Invalid number of data points \(0\) specified")
            return
        same_length = "When given, dim and shape arguments must have the same length"
        if form == 2:
            yield _err(x, RuntimeError, same_length, s=(3,))
            yield _err(ember.ones(4), IndexError, r"Dimension out of range \(expected to be in "
                       r"range of \[-1, 0\], but got -2\)")
        else:
            yield _err(x, RuntimeError, same_length, s=(3,), dim=(0, 1))
            yield _err(x, RuntimeError, "Got shape with 3 values but input tensor only has 2 "
                       "dimensions.", s=(3, 4, 5))
        yield _err(x, RuntimeError, "FFT dims must be unique", dim=(0, -2))
        yield _err(x, IndexError, r"Dimension out of range \(expected to be in range of "
                   r"\[-2, 1\], but got 5\)", dim=(0, 5))
        yield _err(x, RuntimeError, r"Invalid number of data points \(0\) specified",
                   s=(0, 3))
        yield _err(x, RuntimeError, r"Invalid number of data points \(-2\) specified",
                   s=(-2, 3))
        yield _err(x, TypeError, f"{fn}\\(\\): argument 's'{_AT[2]} must be tuple of ints, "
                   "(?:not tuple|but found element of type float at pos 0)",
                   s=(2.0, 3))
        if kind != "c2c":
            yield _err(x, RuntimeError, f"{short} must transform at least one axis", dim=())
        if kind == "c2r":
            yield _err(ember.ones(3, 1), RuntimeError,
                       r"Invalid number of data points \(0\) specified")
    return errors


# --- result dtypes ----------------------------------------------------------------------------

def _complex_result(dtype, sample):
    if dtype.is_complex:
        return dtype
    return ember.complex128 if dtype is ember.float64 else ember.complex64


def _real_result(dtype, sample):
    if dtype.is_complex:
        return dtype.to_real()
    return ember.float64 if dtype is ember.float64 else ember.float32


def _entry(name, form, kind, flag=False):
    samples = _SAMPLES[form] if form != "n" else _samples_nd(kind == "c2c")
    return OpInfo(f"fft.{name}", _ref(form, kind, flag), samples,
                  dtypes=REAL if kind == "r2c" else REAL + COMPLEX,
                  result_dtype=_complex_result if kind != "c2r" else _real_result,
                  grad_samples=None if kind == "r2c" else _with_complex(samples),
                  gradgrad=True, error_inputs=_errors(name, form, kind, flag), tol=_TOL)


OPS = [
    _entry("fft", 1, "c2c"), _entry("ifft", 1, "c2c", True),
    _entry("fft2", 2, "c2c"), _entry("ifft2", 2, "c2c", True),
    _entry("fftn", "n", "c2c"), _entry("ifftn", "n", "c2c", True),
    _entry("rfft", 1, "r2c"), _entry("rfft2", 2, "r2c"), _entry("rfftn", "n", "r2c"),
    _entry("ihfft", 1, "r2c", True), _entry("ihfft2", 2, "r2c", True),
    _entry("ihfftn", "n", "r2c", True),
    _entry("irfft", 1, "c2r"), _entry("irfft2", 2, "c2r"), _entry("irfftn", "n", "c2r"),
    _entry("hfft", 1, "c2r", True), _entry("hfft2", 2, "c2r", True),
    _entry("hfftn", "n", "c2r", True),
]
