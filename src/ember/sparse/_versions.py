"""Sparse tensors' version counter.

NOTE [Sparse versions]
As PyTorch's, a sparse tensor has one version counter, shared with the values and indices
its accessors return, and bumped by every in-place op on any of them. ember keeps it as the
counter of the tensor's values tensor (``_v``), where autograd finds it for the values it
saved; an in-place op that gives the tensor new parts (_inplace._replace) hands them the
counter and bumps it, so values saved before still see the change. The counter remembers its
tensor's layout and size, so that the saved-tensor error names the sparse tensor
("[ember.sparse.FloatTensor [2, 2]]") as PyTorch's does, except for the dense tensors the
accessors return (marked ``_sparse_part``) and their views, which it names as themselves.
"""

from ember._tensor import _Version

__all__ = ["SparseVersion", "adopt", "hand_over", "part", "describe", "own_counter"]


class SparseVersion(_Version):
    """A version counter that knows the sparse tensor owning it: ``(layout, size)``."""

    __slots__ = ("owner",)

    def describe(self, t, kind, shape):
        """How the saved-tensor error names ``t`` (the engine's ``kind`` and ``shape``)."""
        return describe(t, kind, shape)


def adopt(t):
    """Give the new sparse tensor ``t`` a counter of its own, unless its values have one."""
    v = t._v
    if v._vc is None:
        vc = v._vc = SparseVersion()
        vc.owner = (t._layout, t._size)


def hand_over(t, old):
    """After ``t`` took new parts in place (``old``: its values before): the new values take
    the old counter, bumped."""
    vc = old._shared_version()
    t._v._vc = vc
    vc.value += 1
    if type(vc) is SparseVersion:
        vc.owner = (t._layout, t._size)


def part(t, tensor):
    """``tensor`` (a part of the sparse tensor ``t``) as an accessor returns it: an alias
    sharing ``t``'s version counter."""
    out = tensor.detach()
    out._vc = t._v._shared_version()
    out.__dict__["_sparse_part"] = True
    return out


def describe(t, kind, shape):
    """How the saved-tensor error names ``t`` (type string ``kind``, ``shape``): as its sparse
    tensor when ``t`` is one's values."""
    vc = t._vc
    if _handed_out(t) or t._view is not None and _handed_out(t._view[0]):
        return kind, shape
    from ember.sparse import _layouts as L
    layout, size = vc.owner
    prefix = "Sparse" if layout is L.sparse_coo else "SparseCsr"
    if layout is L.sparse_coo and kind.startswith("ember."):
        return "ember.sparse." + kind[len("ember."):], list(size)
    return prefix + kind, list(size)


def _handed_out(t):
    return t.__dict__.get("_sparse_part", False)


def own_counter(values):
    """The values a constructor was given, as the new sparse tensor keeps them: the same
    memory with a counter of its own (PyTorch's in-place ops on the sparse tensor leave the
    given tensor's version as it was)."""
    out = values.detach()
    out._vc = None
    return out
