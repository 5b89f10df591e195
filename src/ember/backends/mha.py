"""``ember.backends.mha`` (``torch.backends.mha``): whether ``nn.MultiheadAttention`` and the
Transformer layers may take PyTorch's fused inference fast path. ember's layers have one path,
which computes the same values, so the switch is remembered and changes nothing."""

__all__ = ["get_fastpath_enabled", "set_fastpath_enabled"]

_FASTPATH = [True]


def get_fastpath_enabled():
    """Whether the fast path is allowed (True unless switched off)."""
    return _FASTPATH[0]


def set_fastpath_enabled(value):
    """Allow or forbid the fast path."""
    _FASTPATH[0] = bool(value)
