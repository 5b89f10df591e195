"""``ember.backends.opt_einsum`` (``torch.backends.opt_einsum``): PyTorch orders an einsum's
contractions with the opt_einsum package when it is installed. ember orders them itself
(greedily, keeping intermediates small; see ops/einsum.py) and never uses the package, so
``is_available()`` is False, as PyTorch's is without it; ``enabled`` and ``strategy`` are
remembered and change nothing."""

import contextlib

__all__ = ["is_available", "get_opt_einsum", "flags", "enabled", "strategy"]

enabled = False
strategy = None


def is_available():
    """Whether einsum uses the opt_einsum package: never in ember."""
    return False


def get_opt_einsum():
    """The opt_einsum package einsum uses: None."""
    return None


@contextlib.contextmanager
def flags(enabled=None, strategy=None):
    """Set ``enabled`` and ``strategy`` (those given) inside a ``with`` block."""
    import ember.backends.opt_einsum as module
    saved = module.enabled, module.strategy
    try:
        if enabled is not None:
            module.enabled = enabled
        if strategy is not None:
            module.strategy = strategy
        yield
    finally:
        module.enabled, module.strategy = saved
