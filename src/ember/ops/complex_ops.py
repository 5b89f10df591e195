"""Complex numbers: angle, polar, complex, view_as_real, view_as_complex (isreal: math_odds.py).

(conj, real and imag live in conversion.py.) ember has no complex32, so where PyTorch
builds a ComplexHalf tensor (``complex`` and ``view_as_complex`` of float16) ember raises.
"""

import numpy as np

from ember import _dtype as D
from ember._memory_format import restrided
from ember._storage_place import _address, _row_major_strides
from ember.autograd._forward_traces import FORWARD_OPEN, PULLING
from ember._tensor import Tensor
from ember.ops._elementwise import unary
from ember.ops._registry import op
from ember.ops.binary_math import where

_FLOAT_PAIR = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)}
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}


def _name(a):
    return D.FROM_NUMPY[a.dtype]._torch_name


# --- angle, isreal ----------------------------------------------------------------------------

def _angle(xp, x):
    if x.dtype.kind == "c":
        # row-major, as PyTorch's (it computes a complex input's angle into a resized out)
        out = xp.angle(x)
        return out.copy() if out.ndim > 1 and not out.flags.c_contiguous else out
    # a real number's angle is pi for negatives and 0 otherwise (-0.0 included); NaN stays
    return xp.where(x < 0, np.pi, xp.where(x != x, x, 0)).astype(x.dtype, copy=False)


def _angle_grad(grad, x):
    if not x.is_complex():
        return grad.new_zeros(grad.shape)   # piecewise constant: PyTorch's zero gradient
    # d angle = (-y dx + x dy) / |z|^2, i.e. i / conj(z) in PyTorch's convention; 0 at 0
    origin = x == 0
    return where(origin, 0, grad * 1j / where(origin, 1, x).conj())


angle = unary("angle(input)", _angle, _angle_grad, inplace=False,
              doc="The angle (argument) of each element in radians: of a complex number "
                  "its phase, of a real number 0 or pi.")


# (isreal: ops/math_odds.py)


# --- complex, polar ---------------------------------------------------------------------------

def _check_pair(xp, a, b, name):
    """The complex dtype that two real parts of one dtype build (PyTorch's checks)."""
    if a.dtype not in _FLOAT_PAIR or b.dtype not in _FLOAT_PAIR:
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{_name(a)} and {_name(b)}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"Expected object of scalar type {_name(a)} but got scalar type "
                           f"{_name(b)} for second argument")
    shape = xp.broadcast_shapes(a.shape, b.shape)
    if a.dtype not in _COMPLEX_OF:
        if name == "polar":
            raise NotImplementedError("\"polar_cpu\" not implemented for 'Half'")
        raise RuntimeError(f"{name}(): ember has no complex32 (ComplexHalf) dtype for "
                           f"float16 parts")
    return shape, _COMPLEX_OF[a.dtype]


def _assemble(xp, re, im, shape, dtype):
    # real and imaginary parts set apart: re + 1j * im would turn inf * 0 into NaN
    out = xp.empty(shape, dtype=dtype)
    out.real = re
    out.imag = im
    return out


@op("complex(real, imag)", inputs=2, method=False, out=True, scalars=False, pointwise=True)
def complex_(xp, re, im):
    """The complex tensor with real part ``real`` and imaginary part ``imag`` (broadcast)."""
    shape, dtype = _check_pair(xp, re, im, "complex")
    return _assemble(xp, re, im, shape, dtype)


@complex_.derivative
def _(grad, re, im):
    return grad.real, grad.imag


@op("polar(abs, angle)", inputs=2, method=False, out=True, scalars=False, pointwise=True)
def polar(xp, r, theta):
    """The complex tensor with absolute value ``abs`` and angle ``angle`` (broadcast)."""
    shape, dtype = _check_pair(xp, r, theta, "polar")
    return _assemble(xp, r * xp.cos(theta), r * xp.sin(theta), shape, dtype)


def _polar_readers(flat, params):
    """The inputs polar's gradients read: none (PyTorch saves the result alone, so abs or
    angle may be written in place before backward), but both where a forward-mode pass may
    pull through the call (the PULLING formula below reads them)."""
    from ember.autograd.forward_ad import STATE
    return ((0, 1), (0, 1)) if FORWARD_OPEN[0] or STATE.pushing else ((), ())


polar.reads_inputs(_polar_readers)


@polar.derivative
def _(grad, r, theta, *, out):
    # out = r e^{it}: d/dr = e^{it}, d/dt = i out, each as Re(conj(grad) * .). As PyTorch,
    # d/dr is taken as sgn(out) (a negative abs flips it, abs 0 gives 0) and both are written
    # in out, so that double backward runs through polar's derivative again as PyTorch's does
    gr, gi = grad.real, grad.imag
    if PULLING.depth:
        # a double vjp building forward-mode tangents: PyTorch's forward formula is the plain
        # one, e^{it} even where abs <= 0
        c, s = theta.cos(), theta.sin()
        return gr * c + gi * s, r * (gi * c - gr * s)
    unit = out.sgn()
    return gr * unit.real + gi * unit.imag, gi * out.real - gr * out.imag


# --- view_as_real, view_as_complex ------------------------------------------------------------

@op("view_as_real(input)", view=True, method=False, saves_inputs=False)
def view_as_real(xp, x):
    """A real view of a complex tensor, with a last dim of size 2 (real, imaginary)."""
    if x.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    out = x[..., None].view(x.real.dtype)
    if x.size == 0:     # NumPy zeroes an empty view's strides; PyTorch doubles the input's
        half = x.itemsize // 2
        strides = x.strides if any(x.strides) else \
            tuple(s * x.itemsize for s in _row_major_strides(x.shape))  # (a fresh empty)
        out = restrided(xp, out, out.shape, strides + (half,))
    return out


@view_as_real.derivative
def _(grad, x):
    g = grad.contiguous()
    # (a vmap BatchedTensor's _data is a placeholder without memory: its batch is aligned)
    if type(g) is Tensor and not _pairs_aligned(g._data):
        g = g.clone()
    return view_as_complex(g)


def _storage_offset(a):
    """Elements from the start of the memory ``a`` views to its first element."""
    root = a
    while isinstance(root.base, type(a)):
        root = root.base
    return (_address(a) - _address(root)) // a.itemsize


def _pairs_aligned(a):
    return _storage_offset(a) % 2 == 0


def _check_pairs(x):
    """PyTorch's layout rules for reading ``x``'s last dim as (real, imaginary) pairs."""
    item = x.itemsize
    if x.strides[-1] != item:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * item) for s in x.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last "
                           "dimension")
    if not _pairs_aligned(x):
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")


@op("view_as_complex(input)", view=True, method=False, saves_inputs=False)
def view_as_complex(xp, x):
    """A complex view of a real tensor whose last dim (of size 2, stride 1) holds the real
    and imaginary parts."""
    if x.dtype not in _FLOAT_PAIR:
        raise RuntimeError(f"view_as_complex is only supported for half, float and double "
                           f"tensors, but got a tensor of scalar type: {_name(x)}")
    if x.ndim == 0:
        raise RuntimeError("Input tensor must have one or more dimensions")
    if x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if x.size:                          # NumPy gives empty arrays arbitrary strides
        _check_pairs(x)
    if x.dtype not in _COMPLEX_OF:
        raise RuntimeError("view_as_complex(): ember has no complex32 (ComplexHalf) dtype "
                           "for float16 tensors")
    return x.view(_COMPLEX_OF[x.dtype])[..., 0]


@view_as_complex.derivative
def _(grad, x):
    return view_as_real(grad.resolve_conj())     # grad may be a conjugate view (conj's vjp)


ALIASES = {}
