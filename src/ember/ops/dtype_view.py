"""``Tensor.view(dtype)``: the same bytes read as another dtype.

A shape view and a dtype view share a name in PyTorch, so ``install`` puts one
``Tensor.view`` in front of the op-generated shape view: the common ``x.view(2, 3)`` goes
straight through, a dtype goes to ``_view_dtype``. The result shares memory with the input
and, as in PyTorch, carries no gradient.
"""

import operator
import weakref

from ember import _dtype as D
from ember._inference import inherit
from ember._storage_place import _storage_root
from ember._tensor import Tensor
from ember.ops._overload_table import METHOD_OVERLOADS
from ember.ops._overloads import combination_error
from ember.ops._registry import REGISTRY, call, op

__all__ = []


@op("_view_dtype(input, dtype)", view=True, method=False, saves_inputs=False)
def _view_dtype(xp, x, dtype):
    """``input``'s bytes read as ``dtype`` (the last dimension scales by the size ratio)."""
    return x.view(dtype.np)


def _check(x, dtype):
    """PyTorch's conditions for viewing ``x`` as a dtype of another element size."""
    ratio = dtype.itemsize / x.dtype.itemsize
    if ratio == 1:
        return
    what = f"to view {x.dtype._torch_name} as {dtype._torch_name} (different element sizes)"
    if x.ndim == 0:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    if x.stride(-1) != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {x.stride(-1)}")
    if ratio > 1:
        ratio = int(ratio)
        if x.shape[-1] % ratio:
            raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, but got "
                               f"{x.shape[-1]}")
        if x.storage_offset() % ratio:
            raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {what}, "
                               f"but got {x.storage_offset()}")
        for i in range(x.ndim - 1):
            if x.stride(i) % ratio:
                raise RuntimeError(f"self.stride({i}) must be divisible by {ratio} {what}, "
                                   f"but got {x.stride(i)}")


def view_dtype(x, dtype):
    """``x``'s memory read as ``dtype``, after PyTorch's checks. As PyTorch's, the result is
    no view to autograd: its ``_base`` is None (views taken of it are based on it), it never
    requires grad; it shares ``x``'s memory and version counter."""
    _check(x, dtype)
    out = _view_dtype(x, dtype)
    if out._view is not None:   # (not an inference tensor's alias): an alias as detach's
        root = _storage_root(x)
        out._view, out._requires_grad = None, False     # (one made in no_grad mode: no leaf)
        out._meta = {"storage_root": weakref.ref(root), "storage_array": root._data}
        inherit(out, x)
    return out


def _invalid_combination(args, kwargs):
    """PyTorch's error for arguments neither overload takes: ``view(ember.int32, 2)``,
    ``view()``, ``view(foo=1)``."""
    raise combination_error("view", args, kwargs, METHOD_OVERLOADS["view"])


def _neither_size_nor_dtype(args):
    """Whether PyTorch's parser matches neither overload: ``view("a")``, ``view(("a", 2))``
    (a later bad element is left to the size's own error)."""
    first = args[0]
    if isinstance(first, (tuple, list)) and len(args) == 1:
        first = first[0] if first else 0
    try:
        operator.index(first)
    except TypeError:
        return True
    return False


def install():
    """Put the dtype-aware ``Tensor.view`` in front of the generated shape view."""
    view_shape, view_op = Tensor.view, REGISTRY["view"]

    def view(self, *args, **kwargs):
        if args and type(args[0]) is int and not kwargs:    # x.view(2, 3): the common form,
            return call(view_op, (self,), (args,))          # as directly as the generated one
        dtype = args[0] if len(args) == 1 and not kwargs else kwargs.get("dtype")
        if dtype.__class__ is type:         # x.view(float), as PyTorch reads it
            dtype = D.PYTHON_DTYPES.get(dtype, dtype)
        if isinstance(dtype, D.dtype) and len(args) + len(kwargs) == 1:
            return view_dtype(self, dtype)
        if args and isinstance(args[0], D.dtype) or "dtype" in kwargs \
                or args and _neither_size_nor_dtype(args) \
                or not (args or kwargs) or args and kwargs or not set(kwargs) <= {"size"}:
            _invalid_combination(args, kwargs)
        return view_shape(self, *args, **kwargs)

    view.__doc__ = ("A tensor sharing this one's memory, with another shape "
                    "(``view(2, 3)``) or its bytes read as another dtype (``view(dtype)``).")
    view.__qualname__ = "Tensor.view"
    view._ember_op = view_shape._ember_op
    Tensor.view = view
