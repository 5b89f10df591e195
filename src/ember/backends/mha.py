"""``ember.backends.mha`` (``torch.backends.mha``): whether ``nn.MultiheadAttention`` and the
Transformer layers may take PyTorch's fused inference fast path. ember computes the same math on
every path, but where PyTorch's fused kernel would run it reproduces what that kernel changes in
the results (see NOTE [Attention fast path] in nn/modules/_fast_path.py); switching the fast
path off turns that off too."""

__all__ = ["get_fastpath_enabled", "set_fastpath_enabled"]

_FASTPATH = [True]


def get_fastpath_enabled():
    """Whether the fast path is allowed (True unless switched off)."""
    return _FASTPATH[0]


def set_fastpath_enabled(value):
    """Allow or forbid the fast path."""
    _FASTPATH[0] = bool(value)
