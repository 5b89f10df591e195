"""Per-op dtype policies on top of PyTorch's promotion, cached by operand signature.

An op's policy maps the promoted dtype of its operands to the dtype its forward computes in.
The dispatcher casts tensor operands to that dtype; 16-bit and 8-bit floats are computed
in float32 and rounded back, as PyTorch's CPU kernels do.
"""

import numpy as np

from ember import _dtype as D
from ember.ops._barebones import BY_ARRAYS, Refused, refuse_compute
from ember.ops._op_errors import check_broadcast

__all__ = ["Policy", "BINARY", "FLOAT", "COMPARE", "INTEGRAL", "SAME", "SAME_NO_BOOL",
           "REAL_FLOAT", "FLOAT_ONLY", "real_no_bool", "compute_dtype", "refuse_kernel",
           "refuse_logical"]

_UPCAST = {d.np: np.dtype(np.float32) for d in D.LOW_PRECISION}


class Policy:
    """How an op picks its compute dtype from the promoted dtype of its operands."""

    __slots__ = ("name", "rule", "promoted", "first")

    def __init__(self, name, rule, promoted=None, first=None):
        self.name = name
        self.rule = rule            # (promoted, op name, operands) -> compute ember dtype
        self.promoted = promoted    # None, or (operands) -> those whose dtypes are promoted
        # None, or (op name, operands) -> None: PyTorch's checks of the operands' own dtypes,
        # which come before it promotes them (``bool - uint16`` names the bool, not uint16)
        self.first = first

    def __repr__(self):
        return f"Policy({self.name})"


def _binary(d, name, operands):
    return d


def _float(d, name, operands):
    return D.get_default_dtype() if d.category < D.FLOATING else d


def _integral(d, name, operands):
    if d.category > D.INTEGRAL:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{d._torch_name}'")
    return d


def _no_bool(d, name, operands):
    if d is D.bool_:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for 'Bool'")
    return d


def _float_only(d, name, operands):
    if d.category != D.FLOATING:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{d._torch_name}'")
    return d


def _real_float(d, name, operands):
    if d.category == D.COMPLEX:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{d._torch_name}'")
    return _float(d, name, operands)


BINARY = Policy("binary", _binary)          # result is the promoted dtype
COMPARE = Policy("compare", _binary)        # compute in the promoted dtype, result bool
FLOAT = Policy("float", _float)             # integers and bool compute in the default float
INTEGRAL = Policy("integral", _integral)    # bitwise ops: bool and integers only
SAME = Policy("same", _binary)              # unary ops that keep the input dtype
SAME_NO_BOOL = Policy("same_no_bool", _no_bool)
REAL_FLOAT = Policy("real_float", _real_float)   # real-only math, integers to float
FLOAT_ONLY = Policy("float_only", _float_only)   # floating inputs only (hypot, frac)


def real_no_bool(kernel):
    """BINARY for integers and floats; bool and complex raise, naming PyTorch's ``kernel``
    (floor division, remainder, fmod)."""
    def rule(d, name, operands):
        if d is D.bool_ or d.category == D.COMPLEX:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{d._torch_name}'")
        return d
    return Policy(f"real_no_bool[{kernel}]", rule)

# NOTE [Operand signatures]
# The dispatcher describes its operands cheaply: a tensor of one or more dims contributes its
# NumPy dtype, a 0-dim tensor a 1-tuple holding its dtype, a Python number its type, but for
# an int in [2**63, 2**64): UINT64_NUMBER (PyTorch's Scalar holds it as a uint64, which
# outranks a bool tensor: ``bool_tensor * 2**63`` is refused as a uint64 promotion).
class UINT64_NUMBER:     # noqa: N801 - a marker, read like the types beside it
    """The signature entry of a Python int in [2**63, 2**64)."""


_SCALAR_KIND = {bool: D.bool_, int: D.int64, float: D.float64, complex: D.complex128,
                UINT64_NUMBER: D.uint64}
_INTS = (int, UINT64_NUMBER)


def compute_dtype(policy, signature, op_name, upcast):
    """(compute dtype, casts, cast target) for an operand signature.

    casts is (compute, float32, whether any operand is a number or a 0-dim tensor of another
    dtype) when a 16/8-bit float computes in float32, else None; the
    target is the NumPy dtype operands must be cast to, or None when none needs a cast.
    """
    operands = []
    for entry in signature:
        if type(entry) is tuple:
            operands.append((D.FROM_NUMPY[entry[0]], D.ZERO_DIM))
        elif entry in _SCALAR_KIND:
            operands.append((_SCALAR_KIND[entry], D.SCALAR))
        else:
            operands.append((D.FROM_NUMPY[entry], D.DIM))
    if policy.first is not None:
        policy.first(op_name, operands)
    promoted = D.result_type_of(operands if policy.promoted is None
                                else policy.promoted(operands))
    try:
        compute = policy.rule(promoted, op_name, operands)
        if compute in D.FLOAT8:
            _check_float8(op_name.rpartition('.')[2], compute, signature)
        elif compute in D.WIDE_UNSIGNED:    # PyTorch's "barebones" dtypes (ops/_barebones.py)
            refuse_compute(op_name, compute, operands)
    except NotImplementedError as refused:
        refused.result_type = promoted      # (an out= call checks its cast first: ops/_out.py)
        raise
    compute = compute.np
    up = _UPCAST.get(compute) if upcast else None
    target = compute if up is None else up
    tensors = [e[0] if type(e) is tuple else e for e in signature if e not in _SCALAR_KIND]
    wraps = compute in _NARROW_INTS and any(e in _INTS for e in signature)
    if all(d is target for d in tensors) and not wraps:
        target = None
    if up is None:
        return compute, None, target
    # whether a number or a 0-dim tensor of another dtype may need rounding to ``compute``
    scalars = any(e in (int, float, UINT64_NUMBER) or type(e) is tuple and e[0] is not compute
                  for e in signature)
    return compute, (compute, up, scalars), target


# PyTorch's CPU kernels that accept float8 operands (they compute in float32 and round back)
_FLOAT8_OPS = frozenset({"abs", "mul", "eq", "ne", "cat", "stack", "where"})
# the kernels PyTorch's errors name for float8, where not "<op>_cpu"
_FLOAT8_KERNELS = {"add": "add_stub", "sub": "add_stub", "sgn": "sign_cpu",
                   "sqrt": "sqrt_vml_cpu", "exp": "exp_vml_cpu", "ceil": "ceil_vml_cpu",
                   "floor": "floor_vml_cpu", "round": "round_vml_cpu", "trunc": "trunc_vml_cpu",
                   "square": "pow", "pow": "pow", "nan_to_num": "nan_to_num",
                   "isclose": "mul_cpu_reduced_float", "addcmul": "addcmul_cpu_out",
                   "lerp": "lerp_kernel_scalar", "relu": "clamp_min_scalar_cpu",
                   "clamp": "clamp_scalar_cpu", "floor_divide": "div_floor_cpu",
                   "sort": "sorting_kernel_method_name",
                   "argsort": "sorting_kernel_method_name",
                   "msort": "sorting_kernel_method_name", "unique": "unique",
                   "unique_consecutive": "unique", "isin": "isin_default_cpu"}


# the kernels of a number or a 0-dim tensor as ``other`` (another path, which a 0-dim
# ``self`` does not take): mul's float8 kernel needs ``other`` a tensor of 1+ dims
_FLOAT8_SCALAR_KERNELS = {"mul": "mul_cpu_reduced_float", "div": "div_cpu_reduced_float",
                          "floor_divide": "div_floor_cpu_reduced_float"}


def _check_float8(name, compute, signature):
    """Raise PyTorch's error unless op ``name`` has a float8 CPU kernel for ``signature``."""
    base = name.rstrip("_")
    kernel = _FLOAT8_KERNELS.get(base, f"{name}_cpu")
    if base in _FLOAT8_SCALAR_KERNELS and len(signature) > 1 and (
            signature[1] in _SCALAR_KIND or type(signature[1]) is tuple):
        kernel = _FLOAT8_SCALAR_KERNELS[base]
    elif base in _FLOAT8_OPS:
        return
    message = f"\"{kernel}\" not implemented for '{compute._torch_name}'"
    if base in BY_ARRAYS:               # (the kernel depends on which operands are given)
        raise Refused(message, None, None, BY_ARRAYS[base], compute)
    if base == "div":                   # (and div's on its rounding mode)
        raise Refused(message, None, None, None, compute, _rounding_kernel)
    raise NotImplementedError(message)


def _rounding_kernel(message, params):
    """div's refusal naming the kernel of its rounding mode (params: (rounding_mode,))."""
    mode = params[0] if params else None
    return message if mode not in ("floor", "trunc") else \
        message.replace('"div_', f'"div_{mode}_', 1)


_FLOAT8_NP = frozenset(d.np for d in D.FLOAT8)
_WIDE_UNSIGNED_NP = frozenset(d.np for d in D.WIDE_UNSIGNED)
_REFUSED_NP = _FLOAT8_NP | _WIDE_UNSIGNED_NP


def refuse_kernel(x, kernel, wide_unsigned=False):
    """PyTorch's NotImplementedError naming CPU kernel ``kernel`` when backend array ``x`` is
    float8 (or, if ``wide_unsigned``, uint16/32/64), which that kernel has no version for."""
    if x.dtype in _FLOAT8_NP or wide_unsigned and x.dtype in _WIDE_UNSIGNED_NP:
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")


def refuse_logical(name, *arrays):
    """PyTorch's refusal of logical op ``name`` for float8 or uint16/32/64 operands: its
    promotion error for mixed dtypes, else its kernel's NotImplementedError."""
    for a in arrays:
        if getattr(a, "dtype", None) in _REFUSED_NP:
            break
    else:
        return
    dtypes = [(D.FROM_NUMPY[a.dtype], D.DIM if a.ndim else D.ZERO_DIM)
              for a in arrays if hasattr(a, "dtype")]
    if dtypes:
        common = D.result_type_of(dtypes)   # (a 0-dim complex outranks a uint16 tensor)
        if common in D.FLOAT8 or common in D.WIDE_UNSIGNED:
            check_broadcast(*arrays)    # (TensorIterator's check comes first)
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for "
                                      f"'{common._torch_name}'")


_NARROW_INTS = {np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.uint16,
                                      np.uint32, np.uint64)}


