"""Arithmetic: add, sub, mul, div, the integer divisions, pow, and sign-like unary ops."""

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.backend import ROUNDS_SCALAR_OPERANDS
from ember.ops._barebones import WIDE_UNSIGNED_NP, KernelCheck, refusal
from ember.ops._op_errors import check_broadcast
from ember.ops._binary_rules import tensor_policy
from ember.ops._elementwise import binary, conj_grad, unary, zeros_for
from ember.ops._pointwise_layout import NUMBERS_ASIDE, laid_as_operands
from ember.ops._promotion import BINARY, FLOAT, FLOAT_ONLY, SAME, Policy, real_no_bool
from ember.ops._registry import broadcast_message, op
from ember.ops._scalars import checked_scalar, number_arg, rounded_number

_BOOL_SUB = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
             "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _sub_bools(name, operands):
    bools = sum(1 for dt, _ in operands if dt is D.bool_)
    if bools == 2:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if bools:
        raise RuntimeError(_BOOL_SUB)


def _sub_rule(d, name, operands):
    _sub_bools(name, operands)
    return d


def _neg_rule(d, name, operands):
    if d is D.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If "
                           "you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    return d


def _square_rule(d, name, operands):
    return D.int64 if d is D.bool_ else d


def _abs_rule(d, name, operands):
    if d is D.bool_:
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    return d


SUB = Policy("sub", _sub_rule, first=_sub_bools)   # (the rule too: distances.py)
NEG = Policy("neg", _neg_rule)
SQUARE = Policy("square", _square_rule)
ABS = Policy("abs", _abs_rule)


def _integral(x):
    kind = getattr(x, "dtype", None)
    return kind.kind in "iub" if kind is not None else isinstance(x, int)


def _check_nonzero_divisor(xp, a, b):
    """PyTorch's error for an integer division by zero; an empty operand divides nothing."""
    if (_integral(a) and _integral(b) and getattr(a, "size", 1) and getattr(b, "size", 1)
            and bool(xp.any(xp.asarray(b) == 0))):
        check_broadcast(a, b)           # (PyTorch's kernel checks: after the shapes')
        raise KernelCheck("ZeroDivisionError")


# --- add, sub, mul ----------------------------------------------------------------------------

def _scaled(xp, a, b, alpha, fname, negate=False):
    """``b * alpha`` (``b * -alpha`` if ``negate``, as PyTorch's sub adds ``-alpha``) after
    PyTorch's checks of alpha (``fname``'s Number argument) against the result dtype, which
    an array operand has."""
    alpha = number_arg(alpha, fname, "alpha")
    dtype = (a if hasattr(a, "dtype") else b).dtype
    kind = dtype.kind
    if kind in "biu" and isinstance(alpha, (float, complex)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")
    if kind != "c" and isinstance(alpha, complex):
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex "
                           "number.")
    if kind != "b" and isinstance(alpha, bool):
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    return xp.multiply(b, checked_scalar(xp, -alpha if negate else alpha, dtype))


def _is_one(alpha):
    return type(alpha) is int and alpha == 1


def _unit(xp, a, b):
    """``b`` as PyTorch's add and sub see it when alpha is 1: for complex operands they still
    compute ``alpha * b`` with a complex alpha, so an infinite ``b`` gets a nan imaginary
    part ((1+2j) + inf is inf+nanj). Only non-finite values change, so finite arrays skip
    the multiplication (a full copy)."""
    dtype = a.dtype if hasattr(a, "dtype") else b.dtype
    if dtype.kind != "c":
        return b
    if not hasattr(b, "dtype"):         # a number is first cast to the tensor's dtype
        with np.errstate(over="ignore"):
            b = dtype.type(b)           # (a NumPy scalar joins arrays of any backend)
    elif b.ndim and bool(xp.isfinite(b).all()):
        return b
    return b * dtype.type(1)


def _add(xp, a, b):
    """``a + b``; a number ``a`` comes from ``number + tensor``, which PyTorch computes as
    ``tensor + number``."""
    return xp.add(a, _unit(xp, a, b)) if hasattr(a, "dtype") else xp.add(_unit(xp, b, a), b)


def _sub(xp, a, b, alpha, out=None, fname="sub"):
    """``a - alpha * b`` (into ``out``, cast, if given)."""
    cast = {} if out is None else {"out": out, "casting": "unsafe"}
    if _is_one(alpha):
        return xp.subtract(a, _unit(xp, a, b), **cast)
    return xp.add(a, _scaled(xp, a, b, alpha, fname, negate=True), **cast)


def _add_forward(xp, a, b, alpha):
    """add's forward: a real array plus anything, the common call, goes straight to NumPy."""
    if type(alpha) is int and alpha == 1:
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype.kind != "c":     # (what _unit leaves alone)
            return xp.add(a, b)
        return _add(xp, a, b)
    return xp.add(a, _scaled(xp, a, b, alpha, "add"))


add = binary("add(input, other, *, alpha=1)", _add_forward,
             lambda grad, a, b, alpha: (grad, grad if alpha == 1 else grad * conj_grad(alpha)),
             doc="Adds ``other``, scaled by ``alpha``, to ``input``.",
             promote=BINARY, saves_inputs=False)
add.inplace_variant(lambda xp, dst, a, b, alpha: xp.add(
    a, _unit(xp, a, b) if _is_one(alpha) else _scaled(xp, a, b, alpha, "add_"), out=dst,
    casting="unsafe"))

def _sub_forward(xp, a, b, alpha):
    """sub's forward: a real array minus anything, the common call, goes straight to NumPy."""
    if type(alpha) is int and alpha == 1:
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype.kind != "c":     # (what _unit leaves alone)
            return xp.subtract(a, b)
    return _sub(xp, a, b, alpha)


sub = binary("sub(input, other, *, alpha=1)", _sub_forward,
             lambda grad, a, b, alpha, *, needs=(True, True): (
                 grad, None if not needs[1] else -grad if alpha == 1 else
                 grad * -conj_grad(alpha)),
             doc="Subtracts ``other``, scaled by ``alpha``, from ``input``.",
             promote=SUB, saves_inputs=False)
sub.inplace_variant(lambda xp, dst, a, b, alpha: _sub(xp, a, b, alpha, out=dst, fname="sub_"))
add.params_in_dtype("alpha")
sub.params_in_dtype("alpha")


def _rsub(xp, a, b, alpha):
    try:
        res = _sub(xp, b, a, alpha, fname="rsub")
    except ValueError:                  # shapes: PyTorch names ``other`` tensor a
        raise RuntimeError(broadcast_message([np.shape(b), np.shape(a)])) from None
    # laid out as PyTorch's sub(other, input) lays it out: ``other`` first
    return laid_as_operands(xp, res, [b, a], False)


rsub = binary("rsub(input, other, alpha=1)", _rsub,
              lambda grad, a, b, alpha, *, needs=(True, True): (
                  None if not needs[0] else -grad if _is_one(alpha) else
                  grad * -conj_grad(alpha), grad),
              doc="``other - alpha * input``: ``sub`` with the operands swapped.",
              promote=tensor_policy("rsub", _sub_rule), method=False, inplace=False, out=False,
              saves_inputs=False, pointwise=False)   # (PyTorch's operands: other, input)
rsub.params_in_dtype("alpha")


def _mul_grad(grad, a, b, *, needs=(True, True)):
    return (grad * conj_grad(b) if needs[0] else None,
            grad * conj_grad(a) if needs[1] else None)


mul = binary("mul(input, other)", lambda xp, a, b: xp.multiply(a, b), _mul_grad,
             doc="Multiplies ``input`` by ``other`` elementwise.",
             promote=BINARY, ufunc="multiply")
mul.reads_inputs((1,), (0,))
mul.keep_scalars_unrounded(1)


# --- a tensor and a number, as PyTorch's derivatives combine them (mul/div/sub.Scalar) --------

def _by_number(ufunc, x, other):
    if x.dtype.kind == "c" or x.dtype.kind == "f" and x.dtype.itemsize >= 4:
        return ufunc(x, other)
    # 16-bit floats compute in float32 and round once (a count may not fit float16)
    out = ufunc(x.astype(np.float32), other)
    return out if out.dtype.kind == "c" else out.astype(x.dtype)


@op("_mul_scalar(input, other)", method=False, saves_inputs=False,
    grad_fn_name="MulBackward1")
def _mul_scalar(xp, x, other):
    """``input * other`` for a number ``other``: its node, MulBackward1, has one edge."""
    return _by_number(xp.multiply, x, other)


@op("_div_scalar(input, other)", method=False, saves_inputs=False,
    grad_fn_name="DivBackward1")
def _div_scalar(xp, x, other):
    """``input / other`` for a number ``other``: its node, DivBackward1, has one edge."""
    return _by_number(xp.true_divide, x, other)


@op("_sub_scalar(input, other)", method=False, saves_inputs=False,
    grad_fn_name="SubBackward1")
def _sub_scalar(xp, x, other):
    """``input - other`` for a number ``other``: its node, SubBackward1, has one edge."""
    if x.dtype.kind == "b":             # (a bool exponent's pow gradient: PyTorch's error)
        raise RuntimeError(_BOOL_SUB)
    if x.dtype.kind in "iu":
        return xp.subtract(x, other).astype(x.dtype, copy=False)
    return _by_number(xp.subtract, x, other)


_mul_scalar.derivative(lambda grad, x, other: _mul_scalar(grad, conj_grad(other)))
_div_scalar.derivative(lambda grad, x, other: _div_scalar(grad, conj_grad(other)))
_sub_scalar.derivative(lambda grad, x, other: grad)


# --- division ---------------------------------------------------------------------------------

def _true_divide(xp, a, b):
    out = xp.true_divide(a, b)
    if _integral(a) and _integral(b):
        out = out.astype(D.get_default_dtype().np)
    return out


def _trunc_divide(xp, a, b):
    if _integral(a) and _integral(b):
        _check_nonzero_divisor(xp, a, b)
        q = xp.floor_divide(a, b)
        fix = (xp.remainder(a, b) != 0) & ((xp.asarray(a) < 0) != (xp.asarray(b) < 0))
        return q + fix.astype(q.dtype)
    return xp.trunc(xp.true_divide(a, b))


def _floor_divide(xp, a, b):
    if _integral(a) and _integral(b):
        _check_nonzero_divisor(xp, a, b)
    return xp.floor_divide(a, b)


_ROUNDING = {None: _true_divide, "trunc": _trunc_divide, "floor": _floor_divide}


def _div(xp, a, b, rounding_mode):
    if rounding_mode is None:           # the common call: a float array divides directly
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype.kind in "fc":
            return xp.true_divide(a, b)
    fn = _ROUNDING.get(rounding_mode) if rounding_mode is None or \
        rounding_mode.__class__ is str else None
    if fn is None:
        if rounding_mode.__class__ is not str:      # (the parser's: a str or None)
            from ember.ops._dims import invalid_combination
            raise invalid_combination("div", (b, rounding_mode))
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or "
                           f"'floor' but found '{rounding_mode}'")
    if rounding_mode is not None:
        _check_rounding_dtype(a, b, rounding_mode)
        a, b = _wrap_int_scalar(a, b)
    return fn(xp, a, b)


def _unwrapped_int(position, value, dtype):
    """A Python int beside a narrow integer tensor, kept whole (int64): true division
    computes in floating point, where PyTorch does not wrap it (``uint8 / -3`` is -1/3)."""
    if -2 ** 63 <= value < 2 ** 63:
        return np.array(value)
    if 2 ** 63 <= value < 2 ** 64:                  # (PyTorch's Scalar holds a uint64 too)
        return np.array(value, np.uint64)
    return np.array(value).astype(dtype)


def _wrap_int_scalar(a, b):
    """Rounding division stays in the integer dtype: a kept int wraps to it like a C cast."""
    if hasattr(a, "dtype") and hasattr(b, "dtype") and a.dtype != b.dtype \
            and _integral(a) and _integral(b):
        if a.ndim == 0 and a.dtype == np.int64:
            a = a.astype(b.dtype)
        elif b.ndim == 0 and b.dtype == np.int64:
            b = b.astype(a.dtype)
    return a, b



def _check_rounding_dtype(a, b, rounding_mode):
    """Rounding division has no bool or complex kernel (operands are cast to the compute
    dtype already, so one array tells it), refused after the operands' shapes are checked."""
    x = a if hasattr(a, "dtype") else b
    if x.dtype.kind in "bc" or x.dtype in WIDE_UNSIGNED_NP:
        check_broadcast(a, b)
        name = D.FROM_NUMPY[x.dtype]._torch_name
        raise NotImplementedError(f"\"div_{rounding_mode}_cpu\" not implemented for '{name}'")


def _div_grad(grad, a, b, rounding_mode, *, needs=(True, True)):
    if rounding_mode is not None:
        return zeros_for(grad), zeros_for(grad)
    # PyTorch's formulas, the divisor's first: -grad * (a / b) / b, then grad / b
    grad_b = -grad * conj_grad((a / b) / b) if needs[1] else None
    return grad / conj_grad(b) if needs[0] else None, grad_b


div = binary("div(input, other, *, rounding_mode=None)", _div, _div_grad,
             doc="Divides ``input`` by ``other``, truncating or flooring per "
                 "``rounding_mode``.", promote=BINARY, checked_scalars=_unwrapped_int)
div.reads_inputs((1,), (0, 1))
div.keep_scalars_unrounded(1)

floor_divide = binary("floor_divide(input, other)", _floor_divide, None,
                      doc="Divides and rounds toward negative infinity.",
                      promote=real_no_bool("div_floor_cpu"),
                      saves_inputs=False)
floor_divide.keep_scalars_unrounded(1)
floor_divide.not_implemented("floor_divide")


def _remainder(xp, a, b):
    _check_nonzero_divisor(xp, a, b)
    r = xp.remainder(a, b)
    if r.dtype.kind in "fV":
        # a zero result keeps the dividend's sign in PyTorch (NumPy gives it the divisor's)
        r = xp.where(r == 0, xp.copysign(r, a), r)
    return r


def _fmod(xp, a, b):
    _check_nonzero_divisor(xp, a, b)
    return xp.fmod(a, b)


def _remainder_grad(grad, a, b):
    if not hasattr(a, "shape"):     # PyTorch's remainder(Scalar, Tensor) has no derivative
        raise RuntimeError("derivative for aten::remainder is not implemented")
    return grad, -grad * a.div(b, rounding_mode="floor") if hasattr(b, "shape") else None


remainder = binary("remainder(input, other)", _remainder, _remainder_grad,
                   doc="Python-style modulus: the result has the sign of the divisor.",
                   promote=real_no_bool("remainder_cpu"))

fmod = binary("fmod(input, other)", _fmod,
              lambda grad, a, b: (grad, -grad * a.div(b, rounding_mode="trunc")
                                  if hasattr(b, "shape") else None),
              doc="C-style modulus: the result has the sign of the dividend.",
              # unlike remainder, PyTorch's fmod has no overload taking a number first
              promote=tensor_policy("fmod", real_no_bool("fmod_cpu").rule))


# --- pow --------------------------------------------------------------------------------------

def _is_bool(x):
    return x.dtype.kind == "b" if hasattr(x, "dtype") else type(x) is bool


def _bool_pow(xp, a, b):
    """PyTorch has no bool pow kernel; only a bool tensor to a Python bool power works (its
    exponents 1 and 0 are copies and ones)."""
    if not hasattr(a, "dtype") or hasattr(b, "dtype"):
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    return a.copy() if b else xp.ones_like(a)


def number_base_layout(xp, base, res):
    """pow's result ``res`` row-major where its ``base`` is a number, as PyTorch's
    ``pow(Scalar, Tensor)`` allocates it whatever the exponent's layout."""
    if hasattr(base, "dtype") or getattr(res, "ndim", 0) < 2:
        return res
    return xp.ascontiguousarray(res)


_NUMBER_BASES = frozenset({bool, int, float, complex})


def _pow(xp, a, b, *, laid=False):
    if not laid and type(a) in _NUMBER_BASES:
        return number_base_layout(xp, a, _pow(xp, a, b, laid=True))
    if _is_bool(a) and _is_bool(b):
        return _bool_pow(xp, a, b)
    if _integral(a) and _integral(b):
        if isinstance(b, int):
            if b < 0:
                raise RuntimeError("Integers to negative integer powers are not allowed.")
        elif bool(xp.any(xp.asarray(b) < 0)):
            # C semantics: 1 ** -n == 1, (-1) ** -n == +-1, everything else truncates to 0
            safe = xp.power(a, xp.where(b < 0, 0, b))    # (abs(-128) is -128 in int8)
            odd = xp.remainder(b, 2) == 1
            neg = (xp.asarray(a) == -1) & (b < 0)
            small = xp.where(a == 1, 1, xp.where(neg, xp.where(odd, -1, 1), 0))
            return xp.where(b < 0, small, safe).astype(safe.dtype)
    if getattr(a, "dtype", None) in WIDE_UNSIGNED_NP and getattr(b, "ndim", 0) == 0 \
            and int(b) not in (0, 1):
        # (a tensor exponent was refused by the dispatcher: ops/_barebones.py)
        raise refusal("pow", D.FROM_NUMPY[a.dtype])
    if type(b) in _NUMBER_BASES and hasattr(a, "dtype") and a.dtype.kind == "c":
        special = _COMPLEX_POWERS.get(b)
        if special is not None:
            return special(xp, a)
    half = next((x.dtype for x in (a, b) if _is_half(x)), None)
    if half is not None:
        return _half_pow(xp, a, b, half)
    return real_power(xp, a, b)


def _zero_base_powers(xp, a, b, out):
    """``out`` = a ** b (complex) with PyTorch's values at a zero base, which takes C's cpow
    (but for the _EXACT_POWERS): 0 (its imaginary part -0.0 unless b's is
    negative) where b's real part is positive, inf+nanj where negative, NaN where zero
    (``0 ** 0j``) or where b's imaginary part is not finite. (NumPy gives 1 at 0 ** 0j, NaN
    elsewhere.)"""
    zero = xp.asarray(a) == 0
    if not zero.any():
        return out
    b = xp.broadcast_to(xp.asarray(b, dtype=out.dtype), out.shape)
    re, im = b.real, b.imag
    finite = xp.isfinite(im)
    positive = (re > 0) & finite
    at_zero = xp.where((re < 0) & finite, complex(np.inf, np.nan),
                       complex(np.nan, np.nan)).astype(out.dtype)
    at_zero.real[positive] = 0
    at_zero.imag[positive] = xp.where(im < 0, 0.0, -0.0)[positive]
    return xp.where(zero, at_zero, out).astype(out.dtype, copy=False)


# PyTorch's kernels for a complex tensor to these number powers: sqrt (exact on the axes,
# where NumPy's cpow is not), rsqrt and reciprocal (inf+nanj at 0, 0 at inf), products (the
# signs of zeros as multiplying gives them)
_COMPLEX_POWERS = {0.5: lambda xp, a: xp.sqrt(a), -0.5: lambda xp, a: 1 / xp.sqrt(a),
                   -1: lambda xp, a: xp.divide(1, a), 2: lambda xp, a: a * a,
                   3: lambda xp, a: a * a * a, -2: lambda xp, a: 1 / (a * a)}


def _is_half(x):
    return hasattr(x, "dtype") and x.dtype.itemsize == 2 and x.dtype.kind in "fV"


def _half_pow(xp, a, b, dtype):
    """pow of float16/bfloat16 (not upcast by the dispatcher), computed in float32. As in
    PyTorch, a number exponent is rounded to the dtype (and must fit it), and float16 takes
    C's pow even for the exponents +-0.5 (bfloat16, like float32, takes sqrt and rsqrt).
    A number base (``2 ** t``) is rounded to the dtype, as other ops' numbers are (NOTE
    [Scalars beside 16-bit floats])."""
    if type(a) in (int, float) and type(b) in ROUNDS_SCALAR_OPERANDS:
        a = rounded_number(a, dtype)
    if type(b) in (int, float):
        b = float(checked_scalar(np, b, dtype))     # "value cannot be converted to type ..."
        if dtype == np.float16:
            b = xp.asarray(b, dtype=np.float32)     # an array exponent: C's pow
        elif b in (3.0, -2.0) and hasattr(a, "dtype"):
            # PyTorch's bfloat16 kernel multiplies for these, rounding the square first
            square = xp.multiply(a, a).astype(np.float32).astype(dtype).astype(np.float32)
            return (square * a.astype(np.float32) if b == 3.0 else 1 / square).astype(dtype)
    a, b = (x.astype(np.float32) if hasattr(x, "dtype") and x.dtype == dtype else x
            for x in (a, b))
    return real_power(xp, a, b).astype(dtype)


def real_power(xp, a, b):
    """``xp.power(a, b)`` with PyTorch's edges for real floats: a Python-number exponent of
    -0.5 is ``rsqrt`` (as 0.5 is ``sqrt``, in NumPy too), a tensor exponent is C's ``pow``."""
    if type(b) in (int, float) and hasattr(a, "dtype") and a.dtype.kind == "f":
        if b == -0.5:
            return 1 / xp.sqrt(a)               # -inf at -0.0 and NaN at -inf, not inf and 0
        # PyTorch multiplies for these exponents, exactly; NumPy's pow is off by an ulp
        if b == 3:
            return a * a * a
        if b == -2:
            return 1 / (a * a)
    out = xp.power(a, b)
    if type(b) is np.ndarray and b.ndim == 0 and b == 0.5 and out.dtype.kind == "f":
        # NumPy takes any 0-d exponent of 0.5 for sqrt; C's pow gives +0 at -0.0, inf at -inf
        out = xp.where(xp.isneginf(a), xp.inf, out + 0)
    if out.dtype.kind == "c" and not (type(b) in _NUMBER_BASES and b in _EXACT_POWERS):
        out = _zero_base_powers(xp, a, b, out)
    return out


# number exponents PyTorch's complex kernels compute exactly (ones, a copy, products, sqrt),
# keeping NumPy's values at a zero base
_EXACT_POWERS = (0, 1, 2, 3, 0.5)


def _pow_grad(grad, a, b, *, out=None):
    # ``out``: the result, kept (as PyTorch keeps it) only for a tensor exponent, whose
    # gradient reads it; ``y = x ** 2; y.add_(1)`` must not spoil backward. The exponent's
    # gradient is built first, as PyTorch's node builds it (the order shows in the order a
    # second backward adds up its contributions)
    from ember import where
    grad_a = grad_b = None
    if hasattr(b, "shape"):
        grad_b = _pow_exponent_grad(grad, a, b, pow(a, b) if out is None else out)
    if hasattr(a, "shape"):
        if isinstance(b, (int, float, complex)) and b == 0:
            grad_a = zeros_for(grad)
        elif hasattr(b, "shape"):               # 0 ** 0 has slope 0, not 0 * inf
            grad_a = where(b == 0, 0, grad * conj_grad(b * a.pow(_sub_scalar(b, 1))))
        else:                                   # a number exponent scales as mul.Scalar
            grad_a = grad * conj_grad(_mul_scalar(a.pow(b - 1), b))
    return grad_a, grad_b


def _pow_exponent_grad(grad, a, b, result):
    """pow's gradient for its tensor exponent ``b``: ``grad * result * log(a)``, 0 where
    ``a ** b`` is flat in ``b`` (at a = 0 for b >= 0)."""
    from ember import where
    flat = (b.real >= 0 if b.is_complex() else b >= 0)
    if hasattr(a, "shape"):
        return grad * conj_grad(where((a == 0) & flat, 0, result * a.log()))
    slope = _mul_scalar(result, _scalar_log(a, b))
    return grad * conj_grad(where(flat, 0, slope) if a == 0 else slope)


def _scalar_log(a, like):
    """``log(a)`` of a number base: complex only for a complex base or exponent (the log of
    a negative real base is NaN, as PyTorch's real kernel gives)."""
    import cmath
    import math
    if isinstance(a, complex) or (a < 0 and like.is_complex()):
        return cmath.log(a)
    return math.log(a) if a > 0 else (float("-inf") if a == 0 else float("nan"))


def _narrow_pow_scalar(position, value, dtype):
    """A Python int operand of pow on a narrow integer tensor, as a 0-d array: the base
    wraps like a C cast, the exponent must fit the dtype and not be negative (PyTorch checks
    the number, before any cast)."""
    if position == 0:
        return np.array(value).astype(dtype)
    if value < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if value >= 2 ** 63:                # (read as an int64 first, then as the dtype)
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    return checked_scalar(np, value, dtype)


# upcast=False: 16-bit floats have edges of their own (_half_pow)
pow = binary("pow(input, exponent)", _pow, _pow_grad,
             doc="``input`` raised to the power ``exponent``, elementwise.", promote=BINARY,
             upcast=False, checked_scalars=_narrow_pow_scalar, pointwise=NUMBERS_ASIDE)
pow.needs_output = lambda flat: isinstance(flat[1], Tensor)     # (see _pow_grad)


@sub.named_by
def _(flat, params, out):
    return "SubBackward0" if isinstance(flat[0], Tensor) else "RsubBackward1"


@rsub.named_by
def _(flat, params, out):
    return "RsubBackward0" if isinstance(flat[1], Tensor) else "RsubBackward1"


@pow.named_by
def _(flat, params, out):           # PyTorch's overloads: Tensor_Scalar, Tensor_Tensor, Scalar
    if not isinstance(flat[0], Tensor):
        return "PowBackward2"
    return "PowBackward1" if isinstance(flat[1], Tensor) else "PowBackward0"


# PyTorch's Scalar overloads, whose nodes have no edge for the number
sub.number_overload("input")                # 2 - x: rsub(Tensor, Scalar)
rsub.number_overload("other")
pow.number_overload("input")
pow.number_overload("exponent")
remainder.number_overload("other")
remainder.number_overload("input")          # 2 % x: remainder(Scalar, Tensor)
fmod.number_overload("other")


@remainder.named_by
def _(flat, params, out):           # PyTorch's Tensor_Scalar, Tensor_Tensor, Scalar_Tensor
    if not isinstance(flat[0], Tensor):
        return "NotImplemented"
    return "RemainderBackward1" if isinstance(flat[1], Tensor) else "RemainderBackward0"


@fmod.named_by
def _(flat, params, out):
    return "FmodBackward1" if isinstance(flat[1], Tensor) else "FmodBackward0"


@div.named_by
def _(flat, params, out):                    # PyTorch multiplies a number by the reciprocal
    if not isinstance(flat[0], Tensor):
        return "MulBackward0"
    return "DivBackward0" if params[0] is None else "DivBackward2"     # div(Tensor, mode)


# --- unary sign-like ops ----------------------------------------------------------------------

neg = unary("neg(input)", lambda xp, x: xp.negative(x), lambda grad, x: -grad,
            doc="The negation of each element.", promote=NEG, saves_inputs=False,
            ufunc="negative")


def _sgn(xp, x):
    if x.dtype.kind == "c":
        # each part over the (real) magnitude, as PyTorch divides: a complex division would
        # turn inf / inf parts and signed zeros into NaN and +0
        mag = xp.abs(x)
        safe = xp.where(mag == 0, 1, mag)
        out = xp.empty_like(x)
        out.real, out.imag = x.real / safe, x.imag / safe
        return xp.where(mag == 0, 0, out).astype(x.dtype)
    return _sign(xp, x)


def _sign(xp, x):
    if x.dtype.kind == "c":
        raise NotImplementedError("Unlike NumPy, torch.sign is not intended to support "
                                  "complex numbers. Please use torch.sgn instead.")
    if x.dtype.kind == "b":
        return x.copy(order="K")        # (laid out as input, as PyTorch's)
    out = xp.sign(x)
    if x.dtype.kind == "f":
        out = xp.where(xp.isnan(x), 0, out).astype(x.dtype)
    return out


def _sgn_grad(grad, x, *, out):
    if not x.is_complex():
        return zeros_for(grad)
    mag = x.abs()
    safe = mag.masked_fill(mag == 0, 1)
    g = (grad - (grad * out.conj()).real * out) / safe
    return g.masked_fill(mag == 0, 0)


abs = unary("abs(input)", lambda xp, x: xp.abs(x), lambda grad, x: grad * x.sgn(),
            doc="The absolute value of each element.", promote=ABS)


def _abs_out_layout(res, inputs, out):
    """PyTorch computes a complex input's abs complex to complex, then copies its real part
    into a real out= resized row-major; other calls lay out out= as the result."""
    if inputs[0].is_complex() and not out.is_complex():
        return res.copy()               # (fresh: row-major)
    return res


abs.out_layout = _abs_out_layout


@abs.inplace_variant
def _(xp, dst, a):
    if dst.dtype.kind == "c":           # the result is real: it cannot live in self
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    xp.absolute(a, out=dst, casting="unsafe")


sign = unary("sign(input)", _sign, lambda grad, x: zeros_for(grad),
             doc="-1, 0 or 1 by the sign of each element (0 for NaN).", promote=SAME,
             saves_inputs=False)
sgn = unary("sgn(input)", _sgn, _sgn_grad,
            doc="``input / |input|`` for complex tensors (0 at 0); ``sign`` for real ones.",
            promote=SAME)


def _reciprocal(xp, x, out=None):
    # a division: NumPy's reciprocal is 1.6x slower on floats (same values), and on complex
    # numbers gives nan+nanj at 0, not PyTorch's inf+nanj
    return xp.divide(1, x, out=out, casting="unsafe")


reciprocal = unary("reciprocal(input)", _reciprocal,
                   lambda grad, x, *, out: -grad * conj_grad(out * out),
                   doc="``1 / input``, elementwise.", promote=FLOAT, saves_inputs=False)
reciprocal.inplace_variant(lambda xp, dst, a: _reciprocal(xp, a, out=dst))
square = unary("square(input)", lambda xp, x: xp.square(x),
               lambda grad, x: grad * conj_grad(2 * x),
               doc="The square of each element.", promote=SQUARE, ufunc="square")
square.name_nodes("PowBackward0")      # PyTorch squares by pow(input, 2)
frac = unary("frac(input)", lambda xp, x: x - xp.trunc(x), lambda grad, x: grad,
             doc="The fractional part of each element.", promote=FLOAT_ONLY,
             saves_inputs=False)

ALIASES = {"absolute": "abs", "negative": "neg", "multiply": "mul", "divide": "div",
           "subtract": "sub", "true_divide": "div"}
