"""Comparisons, closeness (isclose, allclose, equal), and the logical and bitwise ops.

None of them is differentiable: comparisons and logical ops return bool, bitwise ops keep
their integer dtype.
"""

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops._binary_rules import reject_complex, tensor_policy
from ember.ops._elementwise import binary, unary
from ember.ops._promotion import INTEGRAL, Policy, refuse_kernel, refuse_logical
from ember.ops._registry import broadcast_message, op
from ember.ops._scalars import number_arrays

# --- comparisons ------------------------------------------------------------------------------

_EQUALITY = tensor_policy("equality")
_ORDER = tensor_policy("order", reject_complex)

eq = binary("eq(input, other)", lambda xp, a, b: xp.equal(a, b),
            doc="Whether ``input == other``, elementwise.", promote=_EQUALITY)
ne = binary("ne(input, other)", lambda xp, a, b: xp.not_equal(a, b),
            doc="Whether ``input != other``, elementwise.", promote=_EQUALITY)
lt = binary("lt(input, other)", lambda xp, a, b: xp.less(a, b),
            doc="Whether ``input < other``, elementwise.", promote=_ORDER)
le = binary("le(input, other)", lambda xp, a, b: xp.less_equal(a, b),
            doc="Whether ``input <= other``, elementwise.", promote=_ORDER)
gt = binary("gt(input, other)", lambda xp, a, b: xp.greater(a, b),
            doc="Whether ``input > other``, elementwise.", promote=_ORDER)
ge = binary("ge(input, other)", lambda xp, a, b: xp.greater_equal(a, b),
            doc="Whether ``input >= other``, elementwise.", promote=_ORDER)


# --- closeness --------------------------------------------------------------------------------

def _same_dtype_rule(d, name, operands):
    (da, _), (db, _) = operands
    if da is not db:
        raise RuntimeError(f"{da._torch_name} did not match {db._torch_name}")
    return d


@op("isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False)", inputs=2,
    promote=Policy("same_dtype", _same_dtype_rule), scalars=False, out=False, pointwise=True)
def isclose(xp, a, b, rtol, atol, equal_nan):
    """Whether ``|input - other| <= atol + rtol * |other|``, elementwise."""
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if tol < 0:
            raise RuntimeError(f"{name} must be greater than or equal to zero, but got "
                               f"{tol:g}")
    close = a == b
    if equal_nan and a.dtype.kind in "fc":
        close = close | (xp.isnan(a) & xp.isnan(b))
    if rtol == 0 and atol == 0:
        return close
    if a.dtype.kind in "biu":             # differences of integers must not wrap around
        a = a.astype(D.get_default_dtype().np)
        b = b.astype(a.dtype)
    actual = xp.abs(a - b)
    return close | (xp.isfinite(actual) & (actual <= atol + xp.abs(rtol * b)))


def _require_tensor(name, x, arg, pos):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")


def _all_true(mask):
    return int(logical_not(mask).sum()) == 0


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``input`` is close to ``other`` (see ``isclose``)."""
    _require_tensor("allclose", input, "input", 1)
    _require_tensor("allclose", other, "other", 2)
    return _all_true(isclose(input, other, rtol, atol, equal_nan))


def equal(input, other):
    """Whether the two tensors have the same shape and the same elements."""
    _require_tensor("equal", input, "input", 1)
    _require_tensor("equal", other, "other", 2)
    if input.dtype in D.FLOAT8 and input.dtype == other.dtype and input.shape == other.shape \
            and input.stride() == other.stride() and input.data_ptr() == other.data_ptr():
        # PyTorch's shortcut for a tensor compared with itself still looks for NaN
        refuse_kernel(input._data, "equal_notnan_cpu")
    return input.shape == other.shape and _all_true(eq(input, other))


Tensor.allclose = allclose
Tensor.equal = equal


# --- isin -------------------------------------------------------------------------------------

def _isin_rule(d, name, operands):
    for dtype, _ in operands:
        if dtype is D.bool_ or dtype.category == D.COMPLEX:
            _check_number_names(*(kind is D.SCALAR for _, kind in operands))
            raise RuntimeError(f"Unsupported input type encountered for isin(): "
                               f"{dtype._torch_name}")
    return d


def _check_number_names(elements_number, test_number):
    """PyTorch's TypeError for a number passed by the keyword of a tensor: its overloads
    taking one name it in the singular (``test_element=``, ``element=``)."""
    from ember.ops._call_site import call_shape
    from ember.ops._dims import invalid_combination
    shape = call_shape("isin")
    if shape is not None and (test_number and "test_elements" in shape[1] or
                              elements_number and "elements" in shape[1]):
        raise invalid_combination("isin", ())


# upcast=False: a number operand must round to a 16-bit float operand's dtype, not to float32
@op("isin(elements, test_elements, *, assume_unique=False, invert=False)", inputs=2,
    promote=Policy("isin", _isin_rule), upcast=False, method=False, differentiable=False)
def isin(xp, elements, test, assume_unique, invert):
    """Whether each element of ``elements`` is in ``test_elements`` (NaN never is); either may
    be a number. Both are compared in their promoted dtype."""
    numbers = not isinstance(elements, xp.ndarray), not isinstance(test, xp.ndarray)
    if numbers[0] or numbers[1]:
        _check_number_names(*numbers)
    elements, test = number_arrays(xp, elements, test)
    flat, pool = elements.reshape(-1), test.reshape(-1)
    if flat.dtype.itemsize < 4 and flat.dtype.kind not in "biu":   # 16-bit floats sort as
        flat, pool = flat.astype(xp.float32), pool.astype(xp.float32)   # float32 (exactly)
    if pool.size == 0:
        found = xp.zeros(flat.shape, dtype=bool)
    else:
        pool = xp.sort(pool)
        at = xp.minimum(xp.searchsorted(pool, flat), pool.size - 1)
        found = pool[at] == flat
    return (~found if invert else found).reshape(elements.shape)


# --- logical ops ------------------------------------------------------------------------------

@op("logical_and(input, other)", inputs=2, out=True, inplace=True, pointwise=True)
def logical_and(xp, a, b):
    """Whether both ``input`` and ``other`` are nonzero, elementwise."""
    refuse_logical("logical_and", a, b)
    return xp.logical_and(a, b)


@op("logical_or(input, other)", inputs=2, out=True, inplace=True, pointwise=True)
def logical_or(xp, a, b):
    """Whether ``input`` or ``other`` is nonzero, elementwise."""
    refuse_logical("logical_or", a, b)
    return xp.logical_or(a, b)


@op("logical_xor(input, other)", inputs=2, out=True, inplace=True, pointwise=True)
def logical_xor(xp, a, b):
    """Whether exactly one of ``input`` and ``other`` is nonzero, elementwise."""
    refuse_logical("logical_xor", a, b)
    return xp.logical_xor(a, b)


def _logical_inplace(name, ufunc):
    """The in-place form of binary logical op ``name``: TensorIterator's checks of the shapes
    (the operands', then the result's against ``input``'s) come before the kernel's refusal
    of float8 or uint16/32/64 operands."""
    def write(xp, dst, a, b):
        shapes = [x.shape for x in (a, b) if hasattr(x, "shape")]
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise RuntimeError(broadcast_message(shapes)) from None
        if shape != dst.shape:
            raise RuntimeError(f"output with shape {list(dst.shape)} doesn't match the "
                               f"broadcast shape {list(shape)}")
        refuse_logical(name, a, b)
        xp.copyto(dst, getattr(xp, ufunc)(a, b), casting="unsafe")
    return write


for _binary_logical in (logical_and, logical_or, logical_xor):
    _binary_logical.inplace_variant(_logical_inplace(_binary_logical.name,
                                                     _binary_logical.name))


@op("logical_not(input)", out=True, inplace=True, pointwise=True)
def logical_not(xp, x):
    """Whether ``input`` is zero, elementwise."""
    refuse_logical("logical_not", x)
    return xp.logical_not(x)


# --- bitwise ops ------------------------------------------------------------------------------

bitwise_and = binary("bitwise_and(input, other)", lambda xp, a, b: xp.bitwise_and(a, b),
                     doc="The bitwise AND (logical AND for bool).", promote=INTEGRAL,
                     ufunc="bitwise_and")
bitwise_or = binary("bitwise_or(input, other)", lambda xp, a, b: xp.bitwise_or(a, b),
                    doc="The bitwise OR (logical OR for bool).", promote=INTEGRAL,
                    ufunc="bitwise_or")
bitwise_xor = binary("bitwise_xor(input, other)", lambda xp, a, b: xp.bitwise_xor(a, b),
                     doc="The bitwise XOR (logical XOR for bool).", promote=INTEGRAL,
                     ufunc="bitwise_xor")
def _invert(xp, x):
    refuse_kernel(x, "bitwise_not_cpu", wide_unsigned=True)
    return xp.invert(x)


bitwise_not = unary("bitwise_not(input)", _invert,
                    doc="The bitwise NOT (logical NOT for bool).", promote=INTEGRAL,
                    ufunc="invert")


def _shift_policy(kernel):
    def rule(d, name, operands):
        if d.category != D.INTEGRAL or d in D.WIDE_UNSIGNED:
            raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for "
                                      f"'{d._torch_name}'")
        return d
    return Policy(kernel, rule)


# C leaves shifts by amounts outside [0, bits) undefined; PyTorch shifts every bit out: 0 to
# the left, the sign (-1 or 0) to the right.

def _left_shift(xp, a, s):
    bits = (s if hasattr(s, "dtype") else a).dtype.itemsize * 8
    if not hasattr(s, "dtype"):             # a Python int: NumPy keeps a's dtype
        return xp.left_shift(a, s) if 0 <= s < bits else xp.zeros_like(a)
    outside = (s < 0) | (s >= bits)
    return xp.where(outside, 0, xp.left_shift(a, xp.where(outside, 0, s))).astype(s.dtype)


def _right_shift(xp, a, s):
    dtype = (s if hasattr(s, "dtype") else a).dtype
    bits = dtype.itemsize * 8
    signed = dtype.kind == "i"
    if not hasattr(s, "dtype"):
        if 0 <= s < bits:
            return xp.right_shift(a, s)
        return xp.right_shift(a, bits - 1) if signed else xp.zeros_like(a)
    outside = (s < 0) | (s >= bits)
    if signed:
        return xp.right_shift(a, xp.where(outside, bits - 1, s))
    return xp.where(outside, 0, xp.right_shift(a, xp.where(outside, 0, s))).astype(dtype)


bitwise_left_shift = binary(
    "bitwise_left_shift(input, other)", _left_shift,
    doc="``input`` shifted left by ``other`` bits.", promote=_shift_policy("lshift"))
bitwise_right_shift = binary(
    "bitwise_right_shift(input, other)", _right_shift,
    doc="``input`` shifted right (arithmetically) by ``other`` bits.",
    promote=_shift_policy("rshift"))

ALIASES = {"greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
           "not_equal": "ne"}
PUBLIC = {"allclose": allclose, "equal": equal}
