"""The jagged nested layout (``layout=ember.jagged``): a batch of tensors that differ in one
dim (the ragged one), stored as one values tensor (the components laid end to end along the
ragged dim) and offsets (where each component starts; ``lengths`` too for one with holes).

NOTE [Jagged tensors]
A jagged tensor is a private Tensor subclass whose parts are ordinary ember tensors, as
sparse tensors are (NOTE [Sparse tensors]): ops reach it through ``__torch_function__``,
whose table (_jagged_ops.py) runs them on the values. Autograd needs nothing special:
gradients flow through the ops on the values, and a leaf's ``.grad`` is the jagged tensor of
its values' gradient. The ragged size is a ``NestedInt`` (PyTorch's ``j1``), one per offsets
tensor: tensors that share their offsets share it, and only those combine elementwise.
``_ragged_idx`` is the ragged dim (1, or another after ``transpose``); the values keep the
ragged (summed) dim first whatever it is.
"""

import itertools
import math
import weakref

from ember._shape import Size
from ember._tensor import Tensor
from ember._values_backed import NO_STORAGE, ValuesBacked, blank

__all__ = ["JaggedTensor", "NestedInt", "jagged", "nested_int_of", "components",
           "same_raggedness"]

_COUNTER = itertools.count(1)
_NESTED_INTS = {}          # id of an offsets tensor -> (a weak reference to it, its NestedInt)


class NestedInt:
    """The symbolic size of a ragged dim (prints as PyTorch's ``j1``)."""

    __slots__ = ("number",)

    def __init__(self, number):
        self.number = number

    def __repr__(self):
        return f"j{self.number}"

    __str__ = __repr__


def nested_int_of(offsets):
    """The ragged size that stands for ``offsets`` (a new one for new offsets)."""
    key = id(offsets)           # (not a WeakKeyDictionary: tensors compare elementwise)
    entry = _NESTED_INTS.get(key)
    if entry is not None and entry[0]() is offsets:
        return entry[1]
    sym = NestedInt(next(_COUNTER))
    _NESTED_INTS[key] = (weakref.ref(offsets, lambda _: _NESTED_INTS.pop(key, None)), sym)
    return sym


class JaggedTensor(ValuesBacked, Tensor):
    """A nested tensor in the jagged layout; see NOTE [Jagged tensors]."""

    __slots__ = ("_v", "_offsets", "_lengths", "_ragged_idx", "_size", "_leaf",
                 "_min_seqlen", "_max_seqlen")

    is_nested = True

    @property
    def layout(self):
        from ember._api import jagged as layout
        return layout

    def numel(self):
        """The number of elements of all components (not of the holes between them)."""
        if self._lengths is None:
            return self._v.numel()
        return int(self._lengths.sum()) * math.prod(self._v.shape[1:])

    nelement = numel

    def stride(self, dim=None):
        """Not available: ember has no symbolic strides for the jagged layout."""
        raise NotImplementedError("ember.nested: stride() of a jagged tensor is not supported")

    def is_contiguous(self, memory_format=None):
        """Whether the components lie end to end, row-major, in ``values()`` (no holes)."""
        return self._lengths is None and self._shown_values().is_contiguous()

    def contiguous(self, memory_format=None):
        """Self when contiguous, else a copy whose components lie end to end, row-major."""
        if self.is_contiguous():
            return self
        if self._lengths is not None:           # holes: new offsets, without them
            from ember.nested._jagged_ops import from_components
            return from_components(components(self), self._ragged_idx)
        r = self._ragged_idx
        return self._with_values(self._shown_values().contiguous().movedim(r - 1, 0))

    def _shown_values(self):
        """The values as ``values()`` shows them (the ragged dim in its place), no alias."""
        r = self._ragged_idx
        if r == 1:
            return self._v
        # next to the ragged dim, a transpose (its node is PyTorch's TransposeBackward0)
        return self._v.transpose(0, 1) if r == 2 else self._v.movedim(0, r - 1)

    def values(self):
        """The components laid end to end along the ragged dim (differentiable): a view whose
        node is PyTorch's NestedGetValuesBackward0."""
        from ember.ops._recording import rename_node
        from ember.ops.conversion import _alias
        return rename_node(_alias(self._shown_values()), "NestedGetValuesBackward0")

    def offsets(self):
        """Where each component starts in the values, and where the last one ends."""
        return self._offsets

    def lengths(self):
        """The components' lengths along the ragged dim for a tensor with holes, else None."""
        return self._lengths

    def unbind(self, dim=0):
        """The components, as a tuple (views of the values)."""
        if dim != 0:
            raise RuntimeError("unbind(): only supported for NestedTensor on dim=0")
        from ember.ops._recording import rename_node
        return tuple(rename_node(part, "UnbindBackwardAutogradNestedTensor0")
                     for part in components(self))

    def to_padded_tensor(self, padding, output_size=None):
        """A dense tensor: the components padded with ``padding`` along the ragged dim."""
        from ember.nested._jagged_ops import to_padded
        return to_padded(self, padding, output_size)

    # ----- autograd ---------------------------------------------------------------------

    @property
    def grad(self):
        grad = self._v.grad if self._leaf else None
        return None if grad is None else self._with_values(grad)

    @grad.setter
    def grad(self, value):
        if value is not None:
            raise RuntimeError("ember sets the gradient of a jagged tensor only through "
                               "backward; assign None to clear it")
        if self._leaf:
            self._v.grad = None

    def detach(self):
        """This jagged tensor cut from the graph (sharing its values' memory)."""
        return self._with_values(self._v.detach())

    def detach_(self):
        """Cut this jagged tensor from the graph in place (its values detached): self."""
        self._v, self._leaf = self._v.detach(), True
        return self

    def _with_values(self, values, ragged_idx=None):
        """A jagged tensor with these offsets and ``values`` (of the same ragged layout)."""
        return jagged(values, self._offsets, self._lengths, ragged_idx or self._ragged_idx,
                      self._min_seqlen, self._max_seqlen)

    def to(self, *args, **kwargs):
        """This tensor with another dtype and/or device (self when nothing changes)."""
        from ember.ops.conversion import _parse_to_all
        dtype, device, copy, _, _ = _parse_to_all(args, kwargs)
        values = self._v.to(dtype=dtype, device=device, copy=copy)
        if values is self._v:
            return self
        out = self._with_values(values)
        out._offsets = self._offsets.to(values.device)
        return out

    # PyTorch's jagged tensors make only 0-dim new tensors, and no full one (the arguments
    # are checked first, as its parser does)
    def new_empty(self, *size, **kwargs):
        """A 0-dim ``Tensor.new_empty`` (PyTorch's error for any other shape)."""
        return _scalar_only(Tensor.new_empty(self, *size, **kwargs))

    def new_zeros(self, *size, **kwargs):
        """A 0-dim ``Tensor.new_zeros`` (PyTorch's error for any other shape)."""
        return _scalar_only(Tensor.new_zeros(self, *size, **kwargs))

    def new_ones(self, *size, **kwargs):
        """A 0-dim ``Tensor.new_ones`` (PyTorch's error for any other shape)."""
        return _scalar_only(Tensor.new_ones(self, *size, **kwargs))

    def new_full(self, size, fill_value, **kwargs):
        """Not supported on a jagged tensor (PyTorch's error)."""
        Tensor.new_full(self, size, fill_value, **kwargs)
        raise NotImplementedError("aten.new_full.default")

    def new_empty_strided(self, size, stride, **kwargs):
        """Not supported on a jagged tensor (PyTorch's error)."""
        Tensor.new_empty_strided(self, size, stride, **kwargs)
        raise NotImplementedError("aten.new_empty_strided.default")

    # ----- Python protocols -------------------------------------------------------------

    def __repr__(self, *, tensor_contents=None):
        size = ", ".join(map(str, self._size))
        grad = ""
        if self.requires_grad:
            grad = ", requires_grad=True" if self.is_leaf else f", grad_fn={self.grad_fn}"
        return (f"NestedTensor(size=({size}), offsets={self._offsets!r}{grad}, "
                f"contiguous={self.is_contiguous()})")

    def __format__(self, spec):
        return object.__format__(self, spec) if spec else repr(self)

    def __len__(self):
        return self._size[0]

    def __getitem__(self, index):
        from ember.nested._jagged_views import getitem
        return getitem(self, index)

    def tolist(self):
        """Not available for nested tensors (PyTorch's error)."""
        raise RuntimeError(NO_STORAGE)

    def numpy(self, *, force=False):
        """Not available for nested tensors: use ``to_padded_tensor()`` first."""
        raise RuntimeError(NO_STORAGE)

    def __reduce_ex__(self, protocol):
        return (rebuild_jagged, (self._v.detach(), self._offsets, self._lengths,
                                 self._ragged_idx, self._min_seqlen, self._max_seqlen,
                                 self.requires_grad))

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            return Tensor.__deepcopy__(self, memo)      # (PyTorch's error for a non-leaf)
        if id(self) not in memo:
            parts = self.__reduce_ex__(2)[1]
            memo[id(self)] = rebuild_jagged(*(p.clone() if isinstance(p, Tensor) else p
                                              for p in parts))
        return memo[id(self)]

    __copy__ = detach

    _takes_registry_calls = True       # offered op functions, parameters by name (handle_op)
    _takes_like_factories = True       # zeros_like/rand_like of a jagged tensor are jagged
    _takes_functions = frozenset({"dropout"})   # hand-written, offered as themselves (_guards)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from ember.nested._jagged_ops import dispatch
        return dispatch(func, args, kwargs or {})


def _scalar_only(new):
    if new.ndim:
        raise RuntimeError("new_empty() not supported for NJT with shape != ()")
    return new


def jagged(values, offsets, lengths=None, ragged_idx=1, min_seqlen=None, max_seqlen=None):
    """A jagged tensor from checked parts (no copies, no checks)."""
    t = blank(JaggedTensor)
    t._v = values
    t._offsets = offsets
    t._lengths = lengths
    t._ragged_idx = ragged_idx
    t._leaf = False
    t._min_seqlen = min_seqlen
    t._max_seqlen = max_seqlen
    inner = list(values.shape[1:])
    # (one with holes is as ragged as its lengths: PyTorch keys its size on them)
    inner.insert(ragged_idx - 1, nested_int_of(offsets if lengths is None else lengths))
    size = [offsets.shape[0] - 1] + inner
    t._size = tuple.__new__(Size, size)
    return t


def rebuild_jagged(values, offsets, lengths, ragged_idx, min_seqlen, max_seqlen,
                   requires_grad):
    """A jagged tensor from its pickled parts (a leaf that requires grad when it was one)."""
    out = jagged(values, offsets, lengths, ragged_idx, min_seqlen, max_seqlen)
    return out._set_requires_grad() if requires_grad else out


def same_raggedness(a, b):
    """Whether two jagged tensors share their ragged dim and its size (offsets, or lengths
    for ones with holes): those alone combine elementwise."""
    r = a._ragged_idx
    return b._ragged_idx == r and a._size[r] is b._size[r]


def component_bounds(nt):
    """``(start, length)`` of each component in the values' first dim."""
    starts = nt._offsets.tolist()
    if nt._lengths is not None:
        return list(zip(starts[:-1], nt._lengths.tolist()))
    return [(s, e - s) for s, e in zip(starts[:-1], starts[1:])]


def components(nt):
    """The components of ``nt`` (views of the values, with the ragged dim in its place)."""
    out = []
    for start, length in component_bounds(nt):
        part = nt._v.narrow(0, start, length)
        out.append(part if nt._ragged_idx == 1 else part.movedim(0, nt._ragged_idx - 1))
    return out
