"""Hyperparameter validation with PyTorch's messages."""

from ember._tensor import Tensor
from ember.optim._state import value

__all__ = ["check_lr", "check_tensor_lr", "check_nonnegative", "check_betas", "check_fused",
           "check_positive"]


def check_tensor_lr(lr):
    """A tensor ``lr`` must hold exactly one element."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")


def check_lr(lr):
    """``lr`` must be >= 0 (a number or a one-element tensor)."""
    check_tensor_lr(lr)
    if not 0.0 <= value(lr):
        raise ValueError(f"Invalid learning rate: {lr}")


def check_positive(**options):
    """Each option must be > 0 (SparseAdam's lr and eps: "Invalid epsilon value: 0.0"); a
    tensor must hold one element."""
    for name, v in options.items():
        if name == "lr":
            check_tensor_lr(v)
        if not 0.0 < _one_value(v):
            label = {"eps": "epsilon value", "lr": "learning rate"}.get(name, f"{name} value")
            raise ValueError(f"Invalid {label}: {v}")


def check_fused(fused, foreach, differentiable):
    """``fused`` excludes ``differentiable`` and ``foreach``."""
    if fused and differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def check_nonnegative(**options):
    """Each option must be >= 0 ("Invalid eps value: -1")."""
    for name, v in options.items():
        if not 0.0 <= v:
            label = {"eps": "epsilon"}.get(name, name)
            raise ValueError(f"Invalid {label} value: {v}")


def check_betas(betas):
    """Both betas must lie in [0, 1)."""
    for i in (0, 1):
        b = betas[i]
        if not 0.0 <= _one_value(b) < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")


def _one_value(v):
    """``v`` as a number, or the error PyTorch's comparison raises for a tensor of several
    elements."""
    if isinstance(v, Tensor) and v.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return value(v)
