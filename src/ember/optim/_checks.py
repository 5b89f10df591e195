"""Hyperparameter validation with PyTorch's messages."""

from ember.optim._state import value

__all__ = ["check_lr", "check_nonnegative", "check_betas"]


def check_lr(lr):
    """``lr`` must be >= 0 (a number or a one-element tensor)."""
    if not 0.0 <= value(lr):
        raise ValueError(f"Invalid learning rate: {lr}")


def check_nonnegative(**options):
    """Each option must be >= 0 ("Invalid eps value: -1")."""
    for name, v in options.items():
        if not 0.0 <= v:
            label = {"eps": "epsilon"}.get(name, name)
            raise ValueError(f"Invalid {label} value: {v}")


def check_betas(betas):
    """Both betas must lie in [0, 1)."""
    for i, b in enumerate(betas):
        if not 0.0 <= value(b) < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")
