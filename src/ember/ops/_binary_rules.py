"""Operand rules shared by binary_math.py and comparison.py: which operands must be tensors,
and PyTorch's checked conversion of a Python number to a tensor's dtype."""

from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops._promotion import Policy

__all__ = ["require_tensors", "tensor_policy", "reject_complex", "checked_scalar", "C_NAMES",
           "PYTHON_NAMES"]

# the Python type a number operand of each dtype came from
PYTHON_NAMES = {D.bool_: "bool", D.int64: "int", D.float64: "float", D.complex128: "complex"}

# the C++ type names PyTorch's messages use for the dtypes
C_NAMES = {D.bool_: "bool", D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
           D.int32: "int", D.int64: "int64_t", D.float16: "c10::Half",
           D.bfloat16: "c10::BFloat16", D.float32: "float", D.float64: "double",
           D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>"}


def require_tensors(name, operands, positions):
    """PyTorch's TypeError when an operand at one of ``positions`` is a Python number."""
    from ember.ops._registry import REGISTRY
    for pos in positions:
        dtype, kind = operands[pos]
        if kind == D.SCALAR:
            arg = REGISTRY[name].input_names[pos]
            raise TypeError(f"{name}(): argument '{arg}' (position {pos + 1}) must be Tensor, "
                            f"not {PYTHON_NAMES[dtype]}")


def tensor_policy(name, rule=None, tensors=(0,)):
    """A Policy whose operands at ``tensors`` may not be Python numbers, then ``rule``.

    Policies cache by operand signature only, so ops sharing one must agree on ``tensors``.
    """
    def checked(d, op_name, operands):
        require_tensors(op_name, operands, tensors)
        return d if rule is None else rule(d, op_name, operands)
    return Policy(name, checked)


def reject_complex(d, name, operands):
    """Rule for ops with no complex kernel (PyTorch's NotImplementedError)."""
    if d.category == D.COMPLEX:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{d._torch_name}'")
    return d


def checked_scalar(xp, value, dtype):
    """``value`` as a 0-d array of ``dtype`` (a backend dtype), raising as PyTorch does when
    it does not fit; integers wrap modulo 2**bits like a C cast within the allowed range."""
    if isinstance(value, Tensor):
        value = value.item()
    kind = dtype.kind
    if kind == "c":
        return xp.asarray(value, dtype=dtype)
    if isinstance(value, complex):
        if value.imag != 0:
            _overflow(dtype)
        value = value.real
    if kind == "b":
        return xp.asarray(bool(value))
    if kind in "iu":
        if value != value or value in (float("inf"), float("-inf")):
            _overflow(dtype)
        value = int(value)
        bits = dtype.itemsize * 8
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if kind == "i" else \
            (-(2 ** bits - 1), 2 ** bits - 1)
        if not lo <= value <= hi:
            _overflow(dtype)
        return xp.asarray(value).astype(dtype)
    if value == value and abs(value) != float("inf") and \
            abs(value) > float(xp.finfo(dtype).max):
        _overflow(dtype)
    return xp.asarray(value, dtype=dtype)


def _overflow(np_dtype):
    name = C_NAMES[D.FROM_NUMPY[np_dtype]]
    raise RuntimeError(f"value cannot be converted to type {name} without overflow")
