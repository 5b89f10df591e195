"""Operand rules shared by binary_math.py and comparison.py: which operands must be tensors,
and which dtypes an op rejects."""

from ember import _dtype as D
from ember.ops._promotion import Policy

from ember.ops._scalars import C_NAMES, checked_scalar  # noqa: F401  (re-exported)

__all__ = ["require_tensors", "tensor_policy", "reject_complex", "checked_scalar", "C_NAMES",
           "PYTHON_NAMES"]

# the Python type a number operand of each dtype came from
PYTHON_NAMES = {D.bool_: "bool", D.int64: "int", D.float64: "float", D.complex128: "complex"}

def require_tensors(name, operands, positions):
    """PyTorch's TypeError when an operand at one of ``positions`` is a Python number."""
    from ember.ops._registry import REGISTRY
    for pos in positions:
        dtype, kind = operands[pos]
        if kind == D.SCALAR:
            arg = REGISTRY[name].input_names[pos]
            raise TypeError(f"{name}(): argument '{arg}' (position {pos + 1}) must be Tensor, "
                            f"not {PYTHON_NAMES[dtype]}")


def tensor_policy(name, rule=None, tensors=(0,), first=None):
    """A Policy whose operands at ``tensors`` may not be Python numbers, then ``rule``.

    Policies cache by operand signature only, so ops sharing one must agree on ``tensors``.
    """
    def checked(d, op_name, operands):
        require_tensors(op_name, operands, tensors)
        return d if rule is None else rule(d, op_name, operands)
    return Policy(name, checked, first=first)


def reject_complex(d, name, operands):
    """Rule for ops with no complex kernel (PyTorch's NotImplementedError)."""
    if d.category == D.COMPLEX:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{d._torch_name}'")
    return d
