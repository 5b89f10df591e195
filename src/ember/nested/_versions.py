"""Strided nested tensors' version counter.

NOTE [Nested versions]
As PyTorch's, a strided nested tensor has one version counter, shared by the views its
components are handed out as (``unbind``, ``nt[i]``): ember gives all its components one
counter when it is made, so an in-place op on any of them is seen by autograd for all; the
nested tensor's own in-place ops bump it once, as PyTorch's do. The counter remembers the
components' sizes, so that the saved-tensor error names the nested tensor as PyTorch's does
(its sizes printed as a legacy tensor).
"""

from ember._tensor import _Version

__all__ = ["NestedVersion", "share", "version", "current", "write_once"]


class NestedVersion(_Version):
    """The version counter of a strided nested tensor's components: ``owner`` holds their
    sizes."""

    __slots__ = ("owner",)

    def describe(self, t, kind, shape):
        """How the saved-tensor error names ``t`` (a component): by the nested tensor's sizes,
        printed as PyTorch prints a legacy tensor; as itself when ``unbind`` or ``nt[i]``
        handed it out."""
        if _handed_out(t):
            return kind, shape
        sizes = self.owner
        width = max((len(str(n)) for row in sizes for n in row), default=0) + 1
        rows = "\n".join(" ".join(f"{n:>{width}}" for n in row) for row in sizes)
        dims = len(sizes[0]) if sizes else 0
        return kind, f"{rows}\n[ ember.LongTensor{{{len(sizes)},{dims}}} ]"


def _handed_out(t):
    # (a component's view from nested/__init__._view, or a view of one: the chain of sources)
    while t is not None:
        meta = t._meta
        if meta and ("nested_output" in meta or "nested_select" in meta):
            return True
        t = None if t._view is None else t._view[1]
    return False


def share(components):
    """Give ``components`` (a new nested tensor's) one counter: the one they share already
    (a detached nested tensor's), else a new one."""
    if not components:
        return
    vc = components[0]._vc
    if type(vc) is NestedVersion and all(t._vc is vc for t in components):
        return
    vc = NestedVersion()
    vc.value = max(_value(t) for t in components)   # (0 for new ones, as a rule)
    vc.owner = [tuple(t.shape) for t in components]
    for t in components:
        t._vc = vc


def version(nt):
    """The nested tensor's version (raising, as PyTorch's, for an inference tensor's)."""
    return nt._components[0]._version if nt._components else 0


def current(nt):
    """The nested tensor's version as ember's own code reads it (inference tensors too)."""
    return _value(nt._components[0]) if nt._components else 0


def _value(t):
    vc = t._vc
    return 0 if vc is None else vc.value


def write_once(nt, writes):
    """Run ``writes`` (one in-place write per component of ``nt``) as one in-place op of the
    nested tensor: each write (and the node it records) sees the one bump PyTorch makes, and
    the shared counter ends one past where it was (as it was, if none wrote)."""
    before = current(nt)
    wrote = False
    for write in writes:
        _set(nt, before)
        write()
        wrote = wrote or current(nt) != before
    _set(nt, before + wrote)


def _set(nt, value):
    if nt._components:
        vc = nt._components[0]._shared_version()
        if all(t._vc is vc for t in nt._components):
            vc.value = value
