"""Two- and three-operand math: atan2, hypot, xlogy, copysign, heaviside, lerp, addcmul,
addcdiv, the elementwise minimum/maximum family, clamp and where."""

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember._warn import warn_once
from ember.backend import device_scalar
from ember.backend.fused import fma
from ember.ops._barebones import BY_ARRAYS, Refused
from ember.ops._op_errors import RefusedFirst
from ember.ops._binary_rules import (PYTHON_NAMES, checked_scalar, require_tensors,
                                     tensor_policy)
from ember.ops._elementwise import binary, conj_grad, zeros_for
from ember.ops._pointwise_layout import NUMBERS_ASIDE
from ember.ops._scalars import number_arg, number_arrays, real_number
from ember.ops._promotion import FLOAT_ONLY, REAL_FLOAT, Policy, compute_dtype
from ember.ops._registry import _is_tensor, op, rename_node


def _is_tensor_operand(x):
    """Whether an operand is a Tensor (not a number); unlike the registry's _is_tensor,
    which also takes a node's saved InputMeta."""
    return isinstance(x, Tensor)


def _fit(xp, number, dtype):
    """A Python float operand that PyTorch converts to the compute dtype as a checked Scalar
    (clamp's bounds, where's values, lerp's weight): out-of-range values raise. An int is
    checked against a float dtype too (2**40 does not fit float16); narrow integer dtypes
    have the dispatcher's check (``checked_scalars``)."""
    if type(number) is complex and dtype.kind != "c":
        number = real_number(number, np.float64)     # PyTorch reads a double
    if type(number) is float or type(number) is int and dtype.kind in "fc":
        return checked_scalar(xp, number, dtype)
    if type(number) is int and not -2 ** 63 <= number < 2 ** 63:   # (where(c, x, 2**63))
        checked_scalar(xp, number, np.dtype(np.int64))              # PyTorch's error
    return number


# --- atan2, hypot, xlogy, copysign ------------------------------------------------------------

def _atan2_grad(grad, a, b):
    # PyTorch's convention: zero gradient at the origin, where the angle is undefined
    denom = a * a + b * b
    origin = denom == 0
    safe = where(origin, 1.0, denom)
    return where(origin, 0.0, grad * b / safe), where(origin, 0.0, -grad * a / safe)


atan2 = binary("atan2(input, other)", lambda xp, a, b: xp.arctan2(a, b), _atan2_grad,
               doc="The angle of the point (``other``, ``input``), elementwise, in radians.",
               promote=REAL_FLOAT, scalars=False, ufunc="arctan2")

hypot = binary("hypot(input, other)", lambda xp, a, b: xp.hypot(a, b),
               lambda grad, a, b, *, out: (grad * a / out, grad * b / out),
               doc="``sqrt(input**2 + other**2)``, elementwise, without overflow.",
               promote=FLOAT_ONLY, scalars=False, ufunc="hypot")


def _xlogy(xp, x, y):
    x, y = number_arrays(xp, x, y)
    out = x * xp.log(y)
    return xp.where((x == 0) & ~xp.isnan(y), 0, out)


def _xlogy_grad(grad, x, y):
    grad_x = grad_y = None
    if _is_tensor_operand(x):
        # log y, also at x = 0; held at 0 there only where log y is -inf or NaN
        low = y <= 0 if _is_tensor_operand(y) else not y > 0
        grad_x = where((x == 0) & low, 0.0, xlogy(grad, y))
    if _is_tensor_operand(y):
        grad_y = grad * x / y
    return grad_x, grad_y


# upcast=False: PyTorch's 16-bit kernel rounds log(other) to the operands' dtype before
# multiplying (each step rounds, as NumPy's float16 and ml_dtypes' bfloat16 ufuncs do)
xlogy = binary("xlogy(input, other)", _xlogy, _xlogy_grad,
               doc="``input * log(other)``, and 0 where ``input`` is 0 (unless ``other`` "
                   "is NaN).", promote=REAL_FLOAT, upcast=False)
xlogy.number_overload("input")
xlogy.number_overload("other")


def scalar_overload_nodes(base):
    """A ``named_by`` rule for a binary op with PyTorch's overloads Tensor, Scalar self and
    Scalar other: nodes ``<base>Backward0``, ``1`` and ``2``."""
    def name(flat, params, out):
        if not _is_tensor_operand(flat[0]):
            return f"{base}Backward1"
        return f"{base}Backward0" if _is_tensor_operand(flat[1]) else f"{base}Backward2"
    return name


xlogy.named_by(scalar_overload_nodes("Xlogy"))


def _copysign_grad(grad, a, b, *, out, needs):
    # d out / d a is the sign agreement of out and a: +-1, and 0 at a == 0
    # (through out and a, as PyTorch's: a double backward sees the ratio's zero slope)
    grad_a = grad * where(a == 0, 0.0, out / a) if needs[0] else None
    return grad_a, (zeros_for(grad) if _is_tensor(b) else None)


copysign = binary("copysign(input, other)", lambda xp, a, b: xp.copysign(a, b),
                  _copysign_grad,
                  doc="The magnitude of ``input`` with the sign of ``other``, elementwise.",
                  promote=tensor_policy("copysign", REAL_FLOAT.rule), ufunc="copysign")
copysign.number_overload("other")
copysign.reads_inputs((0,), ())     # PyTorch saves input (and the result), not other


@copysign.named_by
def _(flat, params, out):                    # PyTorch's overloads: Tensor, Scalar other
    return "CopysignBackward0" if _is_tensor_operand(flat[1]) else "CopysignBackward1"


# --- heaviside --------------------------------------------------------------------------------

def _heaviside_rule(d, name, operands):
    if any(dt.category == D.COMPLEX for dt, _ in operands):
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if operands[0][0] is not operands[1][0]:
        raise RuntimeError("heaviside is not yet implemented for tensors with different "
                           "dtypes.")
    return d


def _heaviside(xp, x, values):
    return xp.where(x == 0, values, x > 0).astype(x.dtype)


heaviside = binary("heaviside(input, values)", _heaviside, None,
                   doc="The Heaviside step of ``input``: 0 below zero, 1 above, ``values`` "
                       "at zero.", promote=Policy("heaviside", _heaviside_rule),
                   scalars=False)
heaviside.not_implemented("heaviside")


# --- minimum, maximum, fmin, fmax -------------------------------------------------------------

_TIE_PICK = {}      # (array module, ufunc name, dtype) -> which operand it returns on ties


def _tie_pick(xp, name, dtype):
    """0 or 1 when ``xp.<name>`` returns that operand wherever 0. and -0. tie (probed once, over
    contiguous, strided, broadcast and 0-dim operands); None when its loops disagree."""
    key = (xp, name, dtype)
    pick = _TIE_PICK.get(key, -1)
    if pick == -1:
        f = getattr(xp, name)
        a = xp.zeros(203, dtype=dtype)
        b = -a
        forms = (f(a, b), f(a[::2], b[::2]), f(a.reshape(7, 29).T, b.reshape(7, 29).T),
                 f(a, b[0]), f(a[0], b), f(a.reshape(7, 29), b[:29]), f(a[:29], b.reshape(7, 29)))
        signs = {bool(v) for r in forms for v in xp.signbit(r.astype(np.float32)).ravel().tolist()}
        pick = _TIE_PICK[key] = signs.pop() * 1 if len(signs) == 1 else None
    return pick


def _extremum(xp, name, x, other):
    """``xp.<name>`` (maximum, minimum) of ``x`` and clamp's bound ``other`` (an array: a
    number comes 0-dim), returning ``x`` itself where a 0-dim bound ties: PyTorch keeps
    ``input`` (0. against -0.) at every size for a number bound, NumPy's pick depends on the
    dtype and the loop (its SIMD maximum returns the second operand, its float16 loop the
    first). Wider bounds and maximum(a, b) keep NumPy's pick: PyTorch's vectorized loop keeps
    the other operand too (its scalar loop, on a few elements, ``input``). A 0-dim tensor
    bound cannot be told from a number here: it keeps ``input`` (PyTorch: the bound)."""
    dtype = x.dtype
    number = isinstance(other, (int, float, np.generic)) or \
        type(other) is np.ndarray and other.ndim == 0   # (a device array is not read: no sync)
    if dtype.kind in "biu" or not number or other != 0:
        return getattr(xp, name)(x, other)      # no signed zeros, a tensor, or no zero bound
    pick = _tie_pick(xp, name, dtype)
    if pick is not None:
        return getattr(xp, name)(other, x) if pick else getattr(xp, name)(x, other)
    r = getattr(xp, name)(x, other)
    zero = r == 0                       # (other ties give the same bits either way)
    return xp.where(zero & (x == 0), x, r) if zero.any() else r


def _no_complex(name, operands):
    if any(d.category == D.COMPLEX for d, _ in operands):
        raise RuntimeError(f"{name.rpartition('.')[2]} not implemented for complex tensors.")


_ORDERED = Policy("ordered", lambda d, name, operands: d, first=_no_complex)


def _extremum_grad(loses_a, loses_b):
    """Gradient of max/min-like ops: each side gets grad where it wins, half on ties."""
    def derivative(grad, a, b):
        tie = a == b
        half = where(tie, grad / 2, grad)
        # (under create_graph PyTorch's nodes are its masked_fill_'s, of the same values)
        return (rename_node(where(loses_a(a, b), 0.0, half), "MaskedFillBackward0"),
                rename_node(where(loses_b(a, b), 0.0, half), "MaskedFillBackward0"))
    return derivative


def _fextremum_grad(a_wins):
    """Gradient of fmax/fmin: ``input`` takes ties and NaN ``other``s, ``other`` the rest."""
    def derivative(grad, a, b):
        to_a = a_wins(a, b) | (b != b)
        return where(to_a, grad, 0.0), where(to_a, 0.0, grad)
    return derivative


maximum = binary("maximum(input, other)", lambda xp, a, b: xp.maximum(a, b),
                 _extremum_grad(lambda a, b: a < b, lambda a, b: a > b),
                 doc="The elementwise maximum (NaN propagates).", promote=_ORDERED,
                 scalars=False, inplace=False)
minimum = binary("minimum(input, other)", lambda xp, a, b: xp.minimum(a, b),
                 _extremum_grad(lambda a, b: a > b, lambda a, b: a < b),
                 doc="The elementwise minimum (NaN propagates).", promote=_ORDERED,
                 scalars=False, inplace=False)
fmax = binary("fmax(input, other)", lambda xp, a, b: xp.fmax(a, b),
              _fextremum_grad(lambda a, b: a >= b),
              doc="The elementwise maximum, ignoring NaN where the other value is a number.",
              promote=_ORDERED, scalars=False, inplace=False)
fmin = binary("fmin(input, other)", lambda xp, a, b: xp.fmin(a, b),
              _fextremum_grad(lambda a, b: a <= b),
              doc="The elementwise minimum, ignoring NaN where the other value is a number.",
              promote=_ORDERED, scalars=False, inplace=False)


# --- lerp -------------------------------------------------------------------------------------

# the C++ type names of PyTorch's dtype-mismatch messages (``expected dtype float ...``)
_META_NAMES = {D.bool_: "bool", D.uint8: "unsigned char", D.int8: "signed char",
               D.int16: "short int", D.int32: "int", D.int64: "long int",
               D.float16: "c10::Half", D.bfloat16: "c10::BFloat16", D.float32: "float",
               D.float64: "double", D.complex64: "c10::complex<float>",
               D.complex128: "c10::complex<double>", D.uint16: "short unsigned int",
               D.uint32: "unsigned int", D.uint64: "long unsigned int",
               D.float8_e4m3fn: "c10::Float8_e4m3fn", D.float8_e5m2: "c10::Float8_e5m2"}


def _lerp_rule(d, name, operands):
    require_tensors(name, operands, (0, 1))
    (dx, _), _, (dw, kw) = operands
    if dx.category < D.FLOATING:
        kernel = "lerp_kernel_scalar" if kw == D.SCALAR else "lerp_kernel_tensor"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dx._torch_name}'")
    if dw.category == D.COMPLEX and dx.category != D.COMPLEX:
        raise RuntimeError(f"value cannot be converted to type {_META_NAMES[dx]} without "
                           f"overflow")
    return dx


def _lerp_same_dtypes(name, operands):
    """PyTorch's check that the tensors share one dtype, before it promotes any."""
    (dx, kx), (dend, kend), (dw, kw) = operands
    if dend is not dx and D.SCALAR not in (kx, kend):
        raise RuntimeError(f"expected dtype {_META_NAMES[dx]} for `end` but got dtype "
                           f"{_META_NAMES[dend]}")
    if kw == D.DIM and dw is not dx:
        raise RuntimeError(f"expected dtype {_META_NAMES[dx]} for `weight` but got dtype "
                           f"{_META_NAMES[dw]}")


def _lerp_promoted(operands):
    """The operands PyTorch promotes: a number weight is not one of them (``lerp_`` of
    integers with weight 0.5 fails in the kernel, not on casting a float result)."""
    return [o for o in operands if o[1] != D.SCALAR]


@op("lerp(input, end, weight)", inputs=3, promote=Policy("lerp", _lerp_rule, _lerp_promoted,
                                                       _lerp_same_dtypes),
    inplace=True, pointwise=NUMBERS_ASIDE)
def lerp(xp, x, end, weight):
    """``input + weight * (end - input)``, elementwise."""
    weight = _fit(xp, weight, x.dtype)
    diff = end - x
    # PyTorch's two-sided form, exact at weight 0 and weight 1: x + weight * diff below 0.5,
    # else end - diff * (1 - weight), each one fused multiply-add
    if xp is np and np.ndim(weight) == 0:
        if abs(weight) < 0.5:
            return fma(xp, weight, diff, x)
        return fma(xp, weight - 1, diff, end)
    small = xp.abs(weight) < 0.5
    return fma(xp, xp.where(small, weight, weight - 1), diff, xp.where(small, x, end))


@lerp.named_by
def _(flat, params, out):
    return "LerpBackward1" if _is_tensor_operand(flat[2]) else "LerpBackward0"


lerp.number_overload("weight")
lerp.keep_scalars_unrounded(2, zero_dim=False)     # PyTorch's lerp.Scalar reads it in float32


# PyTorch saves input and end only for a tensor weight's gradient, and the weight for theirs
lerp.reads_inputs((2,), (2,), (0, 1))


@lerp.derivative
def _(grad, x, end, weight, *, needs=(True, True, True)):
    # a tensor weight only its own gradient needs comes saved as an InputMeta (_is_tensor)
    grad_w = grad * conj_grad(end - x) if needs[2] and _is_tensor(weight) else None
    if not (needs[0] or needs[1]):
        return None, None, grad_w
    w = conj_grad(weight)
    return (grad * (1 - w) if needs[0] else None, grad * w if needs[1] else None, grad_w)


# --- addcmul, addcdiv -------------------------------------------------------------------------

def _addcmul_rule(d, name, operands):
    if d is D.bool_:
        raise NotImplementedError("\"addcmul_cpu_out\" not implemented for 'Bool'")
    return d


_ADDCDIV_INTEGER = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
    "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
    "be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
    "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
    "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
    "for all dtypes.")


def _addcdiv_rule(d, name, operands):
    if all(dt.category <= D.INTEGRAL for dt, _ in operands[1:]):
        raise RuntimeError(_ADDCDIV_INTEGER)
    return d


@op("addcmul(input, tensor1, tensor2, *, value=1)", inputs=3,
    promote=Policy("addcmul", _addcmul_rule), scalars=False, inplace=True, pointwise=True)
def addcmul(xp, x, t1, t2, value):
    """``input + value * tensor1 * tensor2``, elementwise."""
    value = number_arg(value, "addcmul", "value")
    return x + checked_scalar(xp, value, x.dtype) * t1 * t2


addcmul.reads_inputs((), (2,), (1,))       # each factor for the other's gradient


@addcmul.derivative
def _(grad, x, t1, t2, value, *, needs=(True, True, True)):
    return (grad, grad * conj_grad(value * t2) if needs[1] else None,
            grad * conj_grad(value * t1) if needs[2] else None)


@op("addcdiv(input, tensor1, tensor2, *, value=1)", inputs=3,
    promote=Policy("addcdiv", _addcdiv_rule), scalars=False, inplace=True, pointwise=True)
def addcdiv(xp, x, t1, t2, value):
    """``input + value * tensor1 / tensor2``, elementwise."""
    value = number_arg(value, "addcdiv", "value")
    return x + checked_scalar(xp, value, x.dtype) * t1 / t2


@addcdiv.derivative
def _(grad, x, t1, t2, value, *, needs):
    return (grad, grad * conj_grad(value / t2) if needs[1] else None,
            -grad * conj_grad(value * t1 / (t2 * t2)) if needs[2] else None)


# PyTorch saves tensor2 whenever it records (tensor1 for tensor2's gradient), not input
addcdiv.reads_inputs((), (2,), (0, 1, 2))


# --- clamp ------------------------------------------------------------------------------------

def _mixed_bounds_error(name, operands):
    """PyTorch's parser error for a number and a tensor as clamp's bounds, worded for the
    call as made (function or method, bounds by position or keyword) where it can be read."""
    from ember.ops._call_site import call_site
    from ember.ops._overloads import in_parser_words
    site = call_site()
    if site is not None and site.keywords is not None:
        name = site.name + "_" if site.kind == "inplace" else site.name    # clip_: its own
        if site.kind == "inplace" and _called_as_function(site):
            return _function_form_error(name, site)
        return TypeError(in_parser_words(f"{name}() received an invalid combination of arguments"
                                         f" - got ({site.got()}), but expected one of:"))
    got = ", ".join(PYTHON_NAMES[dt] if kind == D.SCALAR else "Tensor"
                    for dt, kind in operands[1:])
    return TypeError(
        f"{name}() received an invalid combination of arguments - got (Tensor, {got}), but "
        f"expected one of:\n * (Tensor input, Tensor min = None, Tensor max = None)\n"
        f" * (Tensor input, Number min = None, Number max = None)")


def _called_as_function(site):
    """Whether the in-place entry point of ``site``, refusing two bounds, was called as
    ``ember.clamp_(x, lo, hi)`` (one argument more than ``x.clamp_(lo, hi)``), which is
    Tensor.clamp_ itself."""
    from ember.ops._call_site import call_shape
    shape = call_shape("clamp")
    return shape is not None and shape[0] - 1 + len(shape[1]) == 3


def _function_form_error(name, site):
    """PyTorch's parser error for ``ember.clamp_`` (or ``clip_``) given a number and a tensor
    as bounds: the function's signatures (no ``out``), the tensor among the arguments."""
    from ember.ops._overload_table import FUNCTION_OVERLOADS
    from ember.ops._overloads import combination_error
    signatures = tuple(s.replace(", *, Tensor out = None", "")
                       for s in FUNCTION_OVERLOADS["clamp"])
    keywords = {k: site.frame.f_locals[k] for k in site.keywords}
    return combination_error(name, site.positional, keywords, signatures)


# clamp_min/clamp_max with a tensor bound run maximum's/minimum's kernel (no complex check)
_TENSOR_BOUND_KERNELS = {"clamp_min": '"maximum_cpu"', "clamp_max": '"minimum_cpu"'}


def _clamp_rule(d, name, operands):
    kinds = [kind for _, kind in operands[1:]]
    if d.category == D.COMPLEX:
        if not kinds:
            return d                    # (no bounds: clamp's own error comes first)
        if operands[0][0].category == D.FLOATING and D.DIM not in kinds and \
                D.ZERO_DIM not in kinds:
            return operands[0][0]       # complex number bounds are read as doubles (_fit)
        if D.SCALAR not in kinds and name.rstrip("_") in _TENSOR_BOUND_KERNELS:
            kernel = _TENSOR_BOUND_KERNELS[name.rstrip("_")]  # (a tensor bound: their kernel)
            raise NotImplementedError(f"{kernel} not implemented for '{d._torch_name}'")
        if operands[0][0].category != D.COMPLEX and D.SCALAR not in kinds and (
                len(kinds) == 2 or name.rstrip("_") == "clamp"):
            # (one tensor bound: maximum's or minimum's kernel, as the arrays tell)
            raise _clamp_refusal(name, d)
        # (PyTorch checks self's dtype first; a complex bound of a real self is refused by
        # the kernel, after the operands' shapes and an in-place result's cast are checked)
        refused = RefusedFirst if operands[0][0].category == D.COMPLEX else NotImplementedError
        raise refused("clamp is not supported for complex types")
    if d is D.bool_ and D.SCALAR in kinds:
        raise _clamp_refusal(name, d, f"\"{name}_scalar_cpu\"")
    return d


def _clamp_refusal(name, d, kernel='"clamp_cpu"'):
    """clamp's refusal of compute dtype ``d``, naming the kernel its given bounds pick."""
    message = f"{kernel} not implemented for '{d._torch_name}'"
    if name.rstrip("_") != "clamp":
        return NotImplementedError(message)
    return Refused(message, None, None, BY_ARRAYS["clamp"], d)


def _clamp_first(name, operands):
    """clamp's checks before promotion: the parser's of mixed bounds, then self's dtype."""
    kinds = [kind for _, kind in operands[1:]]
    if D.SCALAR in kinds and D.DIM in kinds:
        raise _mixed_bounds_error(name, operands)
    if operands[0][0].category == D.COMPLEX and operands[0][1] != D.SCALAR and kinds and (
            D.SCALAR in kinds or name.rstrip("_") not in _TENSOR_BOUND_KERNELS):
        raise RefusedFirst("clamp is not supported for complex types")


_CLAMP = tensor_policy("clamp", _clamp_rule, first=_clamp_first)


# upcast=False: bounds are checked against the tensor's own dtype (c10::Half, not float), and
# max/min are exact in 16-bit floats
@op("clamp(input, min=None, max=None)", inputs=3, promote=_CLAMP, inplace=True, upcast=False,
    checked_scalars=True, grad_fn_name="ClampBackward1", pointwise=NUMBERS_ASIDE)
def clamp(xp, x, lo, hi):
    """``input`` limited to [``min``, ``max``] (``max`` wins where ``min > max``)."""
    if lo is None and hi is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if lo is not None:
        x = _extremum(xp, "maximum", x, _fit(xp, lo, x.dtype))
    if hi is not None:
        x = _extremum(xp, "minimum", x, _fit(xp, hi, x.dtype))
    return x


@clamp.named_by
def _(flat, params, out):                    # PyTorch's overloads: Tensor bounds, Scalar bounds
    return "ClampBackward0" if any(isinstance(b, Tensor) for b in flat[1:]) else \
        "ClampBackward1"


clamp.number_overload("min", "max")


@clamp.derivative
def _(grad, x, lo, hi):
    # as PyTorch: input gets the gradient where it was kept; a tensor bound where it won
    keep = None if lo is None else x >= lo
    if hi is not None:
        keep = x <= hi if keep is None else keep & (x <= hi)
    grad_lo = grad_hi = None
    if _is_tensor_operand(lo):
        wins = x < lo if hi is None else (x < lo) & (lo < hi)
        grad_lo = where(wins, grad, 0.0)
    if _is_tensor_operand(hi):
        wins = x > hi if lo is None else (x > hi) | (hi < lo)
        grad_hi = where(wins, grad, 0.0)
    return where(keep, grad, 0.0), grad_lo, grad_hi


@op("clamp_min(input, min)", inputs=2, promote=_CLAMP, inplace=True, upcast=False,
    checked_scalars=True, pointwise=NUMBERS_ASIDE)
def clamp_min(xp, x, lo):
    """``input`` limited from below by ``min``."""
    return _extremum(xp, "maximum", x, _fit(xp, lo, x.dtype))


@clamp_min.derivative
def _(grad, x, lo):
    return where(x >= lo, grad, 0.0), (where(x < lo, grad, 0.0) if _is_tensor_operand(lo) else None)


@op("clamp_max(input, max)", inputs=2, promote=_CLAMP, inplace=True, upcast=False,
    checked_scalars=True, pointwise=NUMBERS_ASIDE)
def clamp_max(xp, x, hi):
    """``input`` limited from above by ``max``."""
    return _extremum(xp, "minimum", x, _fit(xp, hi, x.dtype))


@clamp_max.derivative
def _(grad, x, hi):
    return where(x <= hi, grad, 0.0), (where(x > hi, grad, 0.0) if _is_tensor_operand(hi) else None)


clamp_min.number_overload("min")
clamp_max.number_overload("max")


@clamp_min.named_by
def _(flat, params, out):                    # PyTorch's overloads: Scalar, Tensor bound
    return "ClampMinBackward1" if isinstance(flat[1], Tensor) else "ClampMinBackward0"


@clamp_max.named_by
def _(flat, params, out):
    return "ClampMaxBackward1" if isinstance(flat[1], Tensor) else "ClampMaxBackward0"


# --- where ------------------------------------------------------------------------------------

def _where_rule(d, name, operands):
    if len(operands) == 1:
        return d                        # where(condition) is nonzero(condition, as_tuple=True)
    if len(operands) == 2:
        raise TypeError("where() takes a condition and both 'input' and 'other'")
    require_tensors(name, operands, (0,))
    cond = operands[0][0]
    if cond is not D.bool_ and cond is not D.uint8:     # (uint8 warns in where's forward)
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a "
                           f"tensor with dtype {cond._torch_name}")
    return d


def _where_values(operands):
    """The operands whose dtypes where's result promotes: its values, not its condition."""
    return operands[1:] if len(operands) == 3 else operands


_HALVES = (D.float16, D.bfloat16)
_BOOL = np.dtype(np.bool_)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_F32_MAX = float(np.finfo(np.float32).max)


def _where_fit(xp, number, dtype):
    """where's number operand: checked as ``_fit`` does, except that PyTorch lets a float
    overflow a 16-bit float dtype to inf (where(c, half, 1e300) is inf, not an error)."""
    if type(number) is float and xp is np:      # the common case (derivatives' zeros), fast
        if dtype is _F64 or dtype is _F32 and not abs(number) > _F32_MAX:
            return dtype.type(number)
    if D.FROM_NUMPY.get(dtype) in _HALVES and type(number) in (int, float):
        with np.errstate(over="ignore"):
            return device_scalar(xp, np.asarray(number, dtype=dtype))
    return _fit(xp, number, dtype)


# upcast=False: selection is exact in every dtype, and 16-bit floats have _where_fit's rule
@op("where(condition, input=None, other=None)", inputs=3, checked_scalars=True, upcast=False,
    promote=Policy("where", _where_rule, _where_values), method=False, pointwise=True)
def where(xp, cond, x, y):
    """``input`` where ``condition`` is True, else ``other`` (numbers allowed); with only a
    condition, the indices of its nonzero elements, one tensor per dim."""
    if x is None and y is None:
        from ember.ops.indexing import nonzero
        return nonzero.forward(xp, cond, True)
    if cond.dtype is not _BOOL:
        # at every call, not in the (cached) dtype rule: PyTorch warns once a process, or
        # each time under set_warn_always
        warn_once("where received a uint8 condition tensor. This behavior is deprecated and "
                  "will be removed in a future version of PyTorch. Use a boolean condition "
                  "instead.")
    # the dispatcher cast the tensor values (not the condition) to the compute dtype: the
    # result's (numbers in x or y would otherwise make NumPy choose float64)
    kind = type(cond)
    if type(x) is kind:
        if type(y) is kind:                     # two arrays: already in that dtype
            return xp.where(cond, x, y)
        dtype = x.dtype
    elif type(y) is kind:
        dtype = y.dtype
    else:                                       # two numbers: their promoted dtype
        dtype = compute_dtype(where.promote, (_BOOL, type(x), type(y)), "where", False)[0]
    return xp.where(cond, _where_fit(xp, x, dtype), _where_fit(xp, y, dtype)).astype(
        dtype, copy=False)


where.leave_uncast("condition")
where.nondifferentiable("condition")
where.reads_inputs((1, 2), (), ())      # only the condition is saved: values may change after


@where.derivative
def _(grad, cond, x, y):
    return (None, where(cond, grad, 0.0) if _is_tensor(x) else None,
            where(cond, 0.0, grad) if _is_tensor(y) else None)


_NO_OUT = object()


def _where_method(self, condition, other, *, out=_NO_OUT):
    """``self`` where ``condition`` is True, else ``other``."""
    if out is not _NO_OUT:         # PyTorch's method takes no out=, None included
        from ember.ops._overloads import combination_error, overloads
        raise combination_error("where", (condition, other), {"out": out},
                                overloads("where", "method"))
    return where(condition, self, other)


_where_method.__name__ = _where_method.__qualname__ = "where"
Tensor.where = _where_method

ALIASES = {"clip": "clamp", "arctan2": "atan2"}
