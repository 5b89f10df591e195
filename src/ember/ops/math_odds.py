"""Pointwise odds: float_power, ldexp, frexp, gcd, lcm, deg2rad, rad2deg, nextafter, signbit
and isreal."""

import math

from ember import _dtype as D
from ember._tensor import Tensor
from ember._memory_format import preserved
from ember.ops._elementwise import binary, conj_grad, unary, zeros_for
from ember.ops._promotion import Policy
from ember.ops import return_types
from ember.ops._registry import op
from ember.ops.arithmetic import pow as _pow
from ember.ops.arithmetic import number_base_layout, real_power
from ember.ops.unary_math import exp2

_LN2 = math.log(2.0)
_SIXTEEN_BIT = D.HALF_NP


# --- float_power ------------------------------------------------------------------------------

def _float_power_rule(d, name, operands):
    return D.complex128 if d.category == D.COMPLEX else D.float64


def _float_power_grad(grad, a, b, *, out=None):
    # pow's derivative, at the double precision the forward computed in (the gradient's);
    # ``out``: the result, kept for a tensor exponent, as pow's (PyTorch's PowBackward1)
    a = a.to(grad.dtype) if isinstance(a, Tensor) else a
    b = b.to(grad.dtype) if isinstance(b, Tensor) else b
    return _pow.vjp(grad, a, b, out=out)


def _float_power(xp, a, b):
    return number_base_layout(xp, a, real_power(xp, a, b))


float_power = binary("float_power(input, exponent)", _float_power,
                     _float_power_grad,
                     doc="``input ** exponent`` in double precision (float64 or complex128).",
                     promote=Policy("float_power", _float_power_rule))
float_power.needs_output = lambda flat: isinstance(flat[1], Tensor)


@float_power.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: a pow of the operands cast to the result's dtype (PowBackward0, 1
    or 2 after ToCopyBackward0 nodes where a cast was needed; a number operand as a double,
    or a complex double)."""
    complex_ = any(isinstance(x, complex) or isinstance(x, Tensor) and x.is_complex()
                   for x in inputs)
    dtype, number = (D.complex128, complex) if complex_ else (D.float64, float)
    a, b = (x.to(dtype) if isinstance(x, Tensor) else number(x) for x in inputs)
    return _pow(a, b)


@float_power.named_by
def _(flat, params, outputs):
    """The node of a call not composed (``float_power_``): PyTorch's pow_'s."""
    return "PowBackward1" if isinstance(flat[1], Tensor) else "PowBackward0"


@float_power.inplace_variant
def _(xp, dst, a, b):
    result = a.dtype if hasattr(a, "dtype") else b.dtype
    if dst.dtype != result:
        raise RuntimeError(f"the base given to float_power_ has dtype "
                           f"{D.FROM_NUMPY[dst.dtype]._torch_name} but the operation's result "
                           f"requires dtype {D.FROM_NUMPY[result]._torch_name}")
    dst[...] = real_power(xp, a, b)         # (float_power's edges: rsqrt, x * x * x, ...)


def _float_power_public(input, exponent, *, out=None):
    if out is not None and isinstance(out, Tensor):
        operands = (input, exponent)
        is_complex = any(isinstance(x, complex) or (isinstance(x, Tensor) and x.is_complex())
                         for x in operands)
        result = D.complex128 if is_complex else D.float64
        if out.dtype is not result:
            raise RuntimeError(f"the output given to float_power has dtype "
                               f"{out.dtype._torch_name} but the operation's result requires "
                               f"dtype {result._torch_name}")
    return float_power.function(input, exponent, out=out)


_float_power_public.__name__ = _float_power_public.__qualname__ = "float_power"
_float_power_public.__module__ = "ember"
_float_power_public.__doc__ = float_power.function.__doc__


# --- ldexp, frexp -----------------------------------------------------------------------------

def _kind(a):
    return D.DIM if a.ndim else D.ZERO_DIM


def _reject_float8(kernel, *arrays):
    for a in arrays:
        dtype = D.FROM_NUMPY[a.dtype]
        if dtype in D.FLOAT8:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype._torch_name}'")


@op("ldexp(input, other)", inputs=2, out=True, inplace=True, pointwise=True)
def ldexp(xp, x, e):
    """``input * 2 ** other``, elementwise."""
    _reject_float8("ldexp_cpu", x, e)
    result = D.result_type_of([(D.FROM_NUMPY[x.dtype], _kind(x)),
                               (D.FROM_NUMPY[e.dtype], _kind(e))])
    if result.category < D.FLOATING:
        result = D.get_default_dtype()
    compute = xp.dtype(xp.float32) if result.np in _SIXTEEN_BIT else result.np
    if e.dtype.kind in "biu":
        # an integer exponent scales exactly (as C's ldexp), even where 2 ** e overflows
        x, n = x.astype(compute, copy=False), e.astype(xp.int64)
        if x.dtype.kind != "c":
            return xp.ldexp(x, n).astype(result.np, copy=False)
        out = xp.empty(xp.broadcast_shapes(x.shape, n.shape), dtype=x.dtype)
        out.real, out.imag = xp.ldexp(x.real, n), xp.ldexp(x.imag, n)
        return out.astype(result.np, copy=False)
    # PyTorch multiplies by pow(2, other), a power computed in other's own dtype
    if e.dtype in _SIXTEEN_BIT:
        power = xp.exp2(e.astype(xp.float32)).astype(e.dtype)
    else:
        power = xp.exp2(e)
    return (x.astype(compute, copy=False) * power.astype(compute, copy=False)).astype(
        result.np, copy=False)


@ldexp.derivative
def _(grad, x, e, *, out):
    scale = exp2(e.to(out.dtype))
    grad_e = grad * conj_grad(out * _LN2) if e.is_floating_point() or e.is_complex() else None
    return grad * conj_grad(scale), grad_e


ldexp.reads_inputs((), (0, 1))      # PyTorch saves other and the result, not input


@op("frexp(input)", out=True, namedtuple=return_types.frexp, saves_inputs=False)
def frexp(xp, x):
    """The mantissa in [0.5, 1) and the int32 exponent with ``input = mantissa * 2**exponent``."""
    _reject_float8("frexp_cpu", x)
    if x.dtype.kind not in "fV":
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    if x.dtype in _SIXTEEN_BIT:
        mantissa, exponent = xp.frexp(x.astype(xp.float32))
        return mantissa.astype(x.dtype), exponent
    return xp.frexp(x)


@frexp.derivative(outputs=(1,))
def _(grads, x, *, out):
    return grads[0] / exp2(out[1].to(grads[0].dtype))


# --- gcd, lcm ---------------------------------------------------------------------------------

def _integers_rule(kernel):
    def rule(d, name, operands):
        if d.category != D.INTEGRAL or d is D.bool_:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{d._torch_name}'")
        return d
    return Policy(f"integers[{kernel}]", rule)


gcd = binary("gcd(input, other)", lambda xp, a, b: xp.gcd(a, b), doc=(
    "The greatest common divisor of ``input`` and ``other`` (nonnegative; gcd(0, 0) = 0)."),
    promote=_integers_rule("gcd_cpu"), scalars=False, ufunc="gcd")
lcm = binary("lcm(input, other)", lambda xp, a, b: xp.lcm(a, b), doc=(
    "The least common multiple of ``input`` and ``other`` (nonnegative, wrapping as C does)."),
    promote=_integers_rule("lcm_cpu"), scalars=False, ufunc="lcm")


# --- deg2rad, rad2deg, nextafter --------------------------------------------------------------

def _angle_rule(d, name, operands):
    if d.category == D.COMPLEX:
        raise RuntimeError(f"{name} is not supported for complex tensors.")
    if d in D.FLOAT8:
        raise NotImplementedError(f"\"mul_cpu_reduced_float\" not implemented for "
                                  f"'{d._torch_name}'")
    return D.get_default_dtype() if d.category < D.FLOATING else d


_ANGLE = Policy("angle", _angle_rule)
deg2rad = unary("deg2rad(input)", lambda xp, x: xp.deg2rad(x),
                lambda grad, x: grad * (math.pi / 180), doc="Degrees converted to radians.",
                promote=_ANGLE, saves_inputs=False, ufunc="deg2rad")


def _rad2deg(xp, x):
    # PyTorch multiplies by 180/pi rounded to the computation's dtype (float32 for all but
    # float64); NumPy's float32 loop divides 180 by a rounded pi, a different constant
    if x.dtype == xp.float64:
        return x * (180 / math.pi)
    return (x.astype(xp.float32, copy=False) * xp.float32(180 / math.pi)).astype(x.dtype,
                                                                                 copy=False)


rad2deg = unary("rad2deg(input)", _rad2deg,
                lambda grad, x: grad * (180 / math.pi), doc="Radians converted to degrees.",
                promote=_ANGLE, saves_inputs=False)


def _floats_rule(d, name, operands):
    if d.category != D.FLOATING:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{d._torch_name}'")
    return d


def _nextafter(xp, a, b):
    out = xp.nextafter(a, b)
    if out.dtype == xp.float16:         # NumPy's half gives input, not other, where equal
        out = xp.where(a == b, b, out)  # (nextafter(-0.0, 0.0) is 0.0)
    return out


# upcast=False: the next value after a 16-bit float is a 16-bit question
nextafter = binary("nextafter(input, other)", _nextafter,
                   lambda grad, a, b: (grad, zeros_for(grad)),
                   doc="The next representable value after ``input`` towards ``other``.",
                   promote=Policy("nextafter", _floats_rule), upcast=False, scalars=False,
                   saves_inputs=False, ufunc="nextafter")


# --- signbit, isreal --------------------------------------------------------------------------

@op("signbit(input)", out=True)
def signbit(xp, x):
    """True where the sign bit is set (negative numbers, -0.0 and negative NaNs)."""
    kind = x.dtype.kind
    if kind == "c":
        raise NotImplementedError("signbit is not implemented for complex tensors.")
    _reject_float8("signbit_cpu", x)
    if kind in "bu":
        return xp.zeros_like(x, dtype=bool)     # (laid out as input, as PyTorch's)
    if kind == "i":
        return x < 0
    return xp.signbit(x)


@op("isreal(input)")
def isreal(xp, x):
    """True where the element has no imaginary part (every element of a real tensor)."""
    if x.dtype.kind == "c":
        return x.imag == 0
    out = preserved(xp, x, bool)            # (laid out as PyTorch's ones_like: an expanded
    out[...] = True                         # input's result is row-major)
    return out


ALIASES = {}
PUBLIC = {"float_power": _float_power_public}
