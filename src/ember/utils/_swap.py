"""``swap_tensors``: exchange everything two tensor objects hold, keeping their identities."""

from ember._conj_view import ConjView
from ember._tensor import Tensor

__all__ = ["swap_tensors"]

_SLOTS = tuple(s for s in Tensor.__slots__ if s not in ("__weakref__", "__dict__"))


def swap_tensors(t1, t2):
    """Swap the contents of two tensors in place: data, autograd state, Python attributes
    and class; references to either object then see the other's contents."""
    for t in (t1, t2):
        if not isinstance(t, Tensor):
            raise TypeError(f"Expected t1 and t2 to be tensors, but got {type(t).__name__}")
    if ConjView in (type(t1), type(t2)):    # the slots themselves: a conjugate view's
        for name in _SLOTS:                 # memory, not the values its ``_data`` reads
            slot = getattr(Tensor, name)
            a, b = slot.__get__(t1), slot.__get__(t2)
            slot.__set__(t1, b)
            slot.__set__(t2, a)
    else:
        for name in _SLOTS:
            a, b = getattr(t1, name), getattr(t2, name)
            setattr(t1, name, b)
            setattr(t2, name, a)
    t1.__dict__, t2.__dict__ = t2.__dict__, t1.__dict__
    t1.__class__, t2.__class__ = t2.__class__, t1.__class__

