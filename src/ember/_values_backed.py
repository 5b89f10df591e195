"""Tensor subclasses whose elements live in a values tensor of their own (sparse and jagged
tensors): the metadata they read from it, their autograd plumbing (a leaf owns its values as
a leaf), the blank instance their constructors fill, and the keys and registration of their
``__torch_function__`` tables."""

from ember._tensor import Tensor, _new, _wrap_dim
from ember._transform_state import check_requires_grad_allowed

__all__ = ["ValuesBacked", "NO_STORAGE", "blank", "op_name", "registrar"]

NO_STORAGE = "Cannot access data pointer of Tensor that doesn't have storage"


class ValuesBacked:
    """A mixin (listed before Tensor in the bases) for a Tensor subclass that keeps its
    elements in ``_v``, its shape in ``_size`` and whether it is a leaf in ``_leaf``."""

    __slots__ = ()
    _non_float_grad_message = "only Tensors of floating point dtype can require gradients"

    _data = property(lambda self: self._v._data[:0])    # empty: for device checks only
    dtype = property(lambda self: self._v.dtype)
    device = property(lambda self: self._v.device)
    shape = property(lambda self: self._size)
    ndim = property(lambda self: len(self._size))
    itemsize = property(lambda self: self._v.itemsize)

    def size(self, dim=None):
        """The shape, or the length of one dim."""
        if dim is None:
            return self._size
        return self._size[_wrap_dim(dim, len(self._size))]

    def dim(self):
        """The number of dims."""
        return len(self._size)

    ndimension = dim

    def element_size(self):
        """Bytes per element of the values."""
        return self._v.element_size()

    # the version counter is the values' (see NOTE [Sparse versions] in sparse/_versions.py)
    _version = property(lambda self: self._v._version)

    def _bump_version(self):
        self._v._bump_version()

    def _shared_version(self):
        return self._v._shared_version()

    def _own_data(self):
        """``.data``: this tensor detached, its values' memory shared but not their counter."""
        return self._with_values(self._v.data)

    data = property(_own_data, Tensor.data.fset, doc=Tensor.data.__doc__)

    @property
    def requires_grad(self):
        return self._v.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self._set_requires_grad(flag)

    def requires_grad_(self, requires_grad=True):
        """Make this tensor a leaf that requires grad (or not); returns self."""
        check_requires_grad_allowed()       # (refused inside function transforms, as PyTorch)
        return self._set_requires_grad(requires_grad)

    def _set_requires_grad(self, requires_grad=True):
        """``requires_grad_`` for ember's own code and the setter (allowed inside function
        transforms)."""
        if self._v._grad_fn is not None and not self._leaf:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if requires_grad and not (self.is_floating_point() or self.is_complex()):
            raise RuntimeError(self._non_float_grad_message)
        if requires_grad and not self._leaf:
            self._v = self._v.detach()._set_requires_grad()    # an alias the tensor owns
            self._leaf = True
        elif not requires_grad:
            self._v = self._v.detach()
            self._leaf = False
        return self

    @property
    def is_leaf(self):
        return self._leaf or not self._v.requires_grad

    @property
    def grad_fn(self):
        return None if self.is_leaf else self._v.grad_fn


def blank(cls):
    """A new ``cls`` instance with Tensor's own fields empty (no data, no history)."""
    t = _new(cls)
    t._requires_grad = False
    t._grad_fn = None
    t._output_nr = 0
    t._grad = None
    t._vc = None
    t._view = None
    t._meta = None
    return t


def op_name(func):
    """The registry name of an ember function (``name_`` for an in-place method)."""
    op = getattr(func, "_ember_op", None)
    if op is None:
        return getattr(func, "__name__", str(func))
    if func.__name__.endswith("_") and not op.name.endswith("_"):
        return op.name + "_"                    # the in-place method
    return op.name


def registrar(table):
    """A decorator factory: ``@handles(*names)`` enters the decorated function in ``table``
    under each registry name."""
    def handles(*names):
        def register(fn):
            for name in names:
                table[name] = fn
            return fn
        return register
    return handles

