"""BatchedTensor: a tensor seen one batch element at a time inside ``vmap``.

NOTE [Batched tensors]
A ``BatchedTensor`` of level L holds ``_value``, a tensor whose dim 0 is the batch of vmap
level L; the tensor the user's function sees is ``_value`` without that dim (the logical
tensor). ``_value`` may itself be a BatchedTensor of a lower level (nested vmap), never of a
higher one. The wrapper's own ``_data`` is a zero-stride array of the logical shape, so
shape, dtype, device and ndim work unchanged; nothing may read its values.

Every op with a BatchedTensor operand reaches ``__torch_function__`` (the registry routes
Tensor subclasses there). The highest level among the operands is handled: its operands are
unwrapped to their values, the op's batching rule (func/_batching/) runs on the values --
calling ember ops that dispatch again for lower levels -- and the results are wrapped at
level L. Autograd happens on the values, so grad composes with vmap without special cases.
"""

import textwrap
import threading

import numpy as np

from ember._tensor import Tensor, _make, _wrap_dim_of_sized
from ember.backend import XP_BY_ARRAY_TYPE, xp_of
from ember.ops._arg_aliases import UNSET

__all__ = ["BatchedTensor", "wrap", "is_batched_at", "remove_level", "add_level",
           "materialize", "rewrap", "active_levels", "Level", "with_levels_of"]


class Level:
    """One active vmap: its level number, batch size and randomness mode."""

    __slots__ = ("level", "size", "randomness")

    def __init__(self, level, size, randomness):
        self.level, self.size, self.randomness = level, size, randomness


class _State(threading.local):
    def __init__(self):
        self.levels = []            # active vmaps, outermost first
        self.counter = 0            # the last level number handed out
        self.handled = None         # the level of the batching rule running (handled_level)


STATE = _State()


def active_levels():
    """The active vmap levels, outermost first."""
    return list(STATE.levels)


def level_size(level):
    for lv in STATE.levels:
        if lv.level == level:
            return lv.size
    raise RuntimeError(f"vmap: level {level} is not active (a BatchedTensor escaped its vmap)")


def _depth(level):
    """The 1-based nesting depth of an active vmap level, the number PyTorch prints as
    ``lvl``; the level number itself for a tensor that escaped its vmap."""
    for depth, lv in enumerate(STATE.levels, 1):
        if lv.level == level:
            return depth
    return level


_NO_VALUES = ("vmap: this operation reads a batched tensor's values directly instead of "
              "through an ember op, which vmap does not support (it would see one element "
              "for the whole batch)")


class _Logical(np.ndarray):
    """The ``_data`` of a BatchedTensor on the CPU: shape and dtype only; any computation
    with it raises instead of silently using placeholder values."""

    def __array_ufunc__(self, *args, **kwargs):
        raise RuntimeError(_NO_VALUES)

    def __array_function__(self, *args, **kwargs):
        raise RuntimeError(_NO_VALUES)

    def _refuse(self, *args, **kwargs):
        raise RuntimeError(_NO_VALUES)

    __getitem__ = __setitem__ = __int__ = __float__ = __index__ = __bool__ = _refuse
    astype = copy = item = tolist = reshape = _refuse


XP_BY_ARRAY_TYPE.setdefault(_Logical, np)
_ZEROS = {}


def _fake(value):
    """A zero-stride array with ``value``'s logical shape (its shape without dim 0)."""
    arr = value._data
    key = (type(arr), arr.dtype)
    zero = _ZEROS.get(key)
    if zero is None:
        xp = xp_of(arr)
        zero = xp.zeros((), dtype=arr.dtype)
        _ZEROS[key] = zero = zero.view(_Logical) if xp is np else zero
    return np.ndarray.__new__(_Logical, arr.shape[1:], arr.dtype, zero, strides=(0,) * (
        arr.ndim - 1)) if type(zero) is _Logical else xp_of(arr).broadcast_to(zero, arr.shape[1:])


def wrap(value, level):
    """The BatchedTensor of ``level`` whose value is ``value`` (batch at dim 0)."""
    t = _make(_fake(value), BatchedTensor)
    t._value = value
    t._level = level
    return t


def is_batched_at(x, level):
    return type(x) is BatchedTensor and x._level == level


_ITEM = ("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
         "calling .item() on a Tensor, please try to rewrite what you're doing with other "
         "operations. If error is occurring somewhere inside PyTorch internals, please file a "
         "bug report.")
_CONTROL = ("vmap: It looks like you're attempting to use a Tensor in some data-dependent "
            "control flow. We don't support that yet, please file an issue at "
            "https://github.com/pytorch/pytorch/issues .")
_STORAGE = "Cannot access data pointer of Tensor that doesn't have storage"


class BatchedTensor(Tensor):
    """The logical view of a tensor with a vmap batch dim (see NOTE [Batched tensors])."""

    __slots__ = ("_value", "_level")

    def __repr__(self):
        value = textwrap.indent(repr(self._value), "    ")
        return f"BatchedTensor(lvl={_depth(self._level)}, bdim=0, value=\n{value}\n)"

    _takes_registry_calls = True       # offered op functions, parameters by name (handle_op)
    # hand-written functions offered too: zeros_like of a batched tensor is batched (dispatch)
    _takes_functions = ("zeros_like", "ones_like", "empty_like", "full_like")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from ember.func._batching import dispatch
        return dispatch(func, args, kwargs or {})

    # --- what needs the values: not possible per batch element --------------------------
    def item(self):
        raise RuntimeError(_ITEM)

    def __bool__(self):
        raise RuntimeError(_CONTROL)

    def __float__(self):
        raise RuntimeError(_ITEM)

    def __int__(self):
        raise RuntimeError(_ITEM)

    def __index__(self):
        raise RuntimeError(_ITEM)

    def __complex__(self):
        raise RuntimeError(_ITEM)

    def tolist(self):
        raise RuntimeError(_STORAGE)

    def numpy(self, *, force=False):
        raise RuntimeError(_STORAGE)

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError(_STORAGE)

    def data_ptr(self):
        raise RuntimeError(_STORAGE)

    def __reduce_ex__(self, protocol):
        raise RuntimeError(_STORAGE)

    @property
    def device(self):
        return self._value.device

    def stride(self, dim=None):
        """The value's strides without its batch dim (PyTorch's per-example strides: code
        such as stft's framing builds ``as_strided`` views from them)."""
        strides = self._value.stride()[1:]
        if dim is None:
            return strides
        return strides[_wrap_dim_of_sized(dim, len(strides), ("stride", "dim", 1, "method"))]

    def is_contiguous(self, *, memory_format=None):
        """Whether an example is laid out densely in row-major order, judged from the
        per-example strides, as PyTorch judges it."""
        from ember import _memory_format as M
        if memory_format not in (None, M.contiguous_format):
            raise RuntimeError("NYI: querying is_contiguous inside of vmap for memory_format "
                               "other than torch.contiguous_format")
        shape, strides = tuple(self.shape), self.stride()
        if 0 in shape:
            return True
        expected = 1
        for size, stride in zip(reversed(shape), reversed(strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def contiguous(self, *, memory_format=None):
        """Self, or a copy laid out in row-major order; other formats raise PyTorch's error
        (its contiguous asks is_contiguous first)."""
        from ember import _memory_format as M
        memory_format = M.contiguous_format if memory_format is None else memory_format
        self.is_contiguous(memory_format=memory_format)
        return Tensor.contiguous(self, memory_format=memory_format)

    def storage_offset(self):
        """The value's storage offset: PyTorch's per-example offset (that of example 0, which
        its ``as_strided`` rule counts from)."""
        return self._value.storage_offset()

    # --- autograd state lives on the value -------------------------------------------------
    @property
    def requires_grad(self):
        return self._value.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self._value.requires_grad = flag

    @property
    def grad_fn(self):
        return self._value.grad_fn

    @property
    def is_leaf(self):
        return self._value.is_leaf

    @property
    def grad(self):
        g = self._value._grad
        return None if g is None else wrap(g, self._level)

    def detach(self):
        return wrap(self._value.detach(), self._level)

    # --- in-place methods that are not ops of their own -------------------------------------
    def copy_(self, src, non_blocking=False):
        from ember.func._batching import inplace_copy
        return inplace_copy(self, src)

    def fill_(self, value):
        from ember.func._batching import inplace_copy
        return inplace_copy(self, value, "fill_")

    def zero_(self):
        return self.copy_(0)

    def resize_(self, *sizes, size=UNSET, memory_format=None):
        """PyTorch's batching rule: the value resized to (batch, *sizes), so each example is
        a row-major run of the value's memory; other memory formats raise."""
        from ember._memory_format import contiguous_format
        from ember.ops.conversion import resize_shape
        if memory_format not in (None, contiguous_format):
            raise RuntimeError("resize_: batching rule only supports None or Contiguous "
                               "MemoryFormat")
        shape = resize_shape(sizes, size)
        self._value.resize_((self._value.shape[0],) + shape)
        self._data = _fake(self._value)
        return self

    def resize_as_(self, the_template, memory_format=None):
        """PyTorch's fallback: it resizes a slice per example, which leaves self as it was."""
        from ember.func._batching import repeating, warn_fallback
        warn_fallback("aten::resize_as_")
        if type(self._value) is BatchedTensor:
            with repeating(level_size(self._level)):
                self._value.resize_as_(the_template, memory_format)
        return self

    def detach_(self):
        """PyTorch's fallback: detach_ per example, of a slice, a view: that raises."""
        from ember._tensor import DETACH_VIEW
        from ember.func._batching import warn_fallback
        warn_fallback("aten::detach_")
        if type(self._value) is BatchedTensor:
            self._value.detach_()
        raise RuntimeError(DETACH_VIEW)

    # --- factories that follow the batch, as PyTorch's: buffers written per example --------
    def new_zeros(self, *args, **kwargs):
        return with_levels_of(Tensor.new_zeros(self, *args, **kwargs), self)

    def new_ones(self, *args, **kwargs):
        return with_levels_of(Tensor.new_ones(self, *args, **kwargs), self)

    def new_empty(self, *args, **kwargs):
        return with_levels_of(Tensor.new_empty(self, *args, **kwargs), self)

    def new_full(self, *args, **kwargs):
        return with_levels_of(Tensor.new_full(self, *args, **kwargs), self)


def remove_level(t, level, size):
    """``t`` with the batch of vmap ``level`` turned into logical dim 0 (expanded if ``t`` is
    not batched at ``level``); other levels stay batched."""
    if type(t) is not BatchedTensor or t._level < level:
        return t.unsqueeze(0).expand((size,) + tuple(t.shape))
    if t._level == level:
        return t._value
    inner = remove_level(t._value, level, size)
    return wrap(inner.movedim(0, 1), t._level)


def add_level(t, level):
    """The inverse of ``remove_level``: logical dim 0 of ``t`` becomes the batch of
    ``level``, below any higher levels ``t`` is batched at."""
    if type(t) is not BatchedTensor or t._level < level:
        return wrap(t, level)
    return wrap(add_level(t._value.movedim(1, 0), level), t._level)


def _levels(t):
    out = set()
    while type(t) is BatchedTensor:
        out.add(t._level)
        t = t._value
    return out


def with_levels_of(t, other, copy=True):
    """``t`` batched at every vmap level ``other`` is batched at and ``t`` is not: copied
    along each (``t`` is about to be written in place with ``other``: an out-of-place op
    written as clone-then-copy_ works with an unbatched ``self``), or, with ``copy=False``,
    a broadcast view (``t`` is read with ``other``'s values, as indices say)."""
    if type(other) is not BatchedTensor:
        return t
    missing = _levels(other) - _levels(t)
    for lv in sorted(missing):
        size = level_size(lv)
        t = t.unsqueeze(0)
        t = t.repeat((size,) + (1,) * (t.ndim - 1)) if copy else t.expand(
            (size,) + tuple(t.shape[1:]))
        t = add_level(t, lv)
    return t


def materialize(t, levels):
    """``t`` with the batches of ``levels`` (outermost first) as its leading logical dims."""
    for lv in reversed(levels):
        t = remove_level(t, lv.level, lv.size)
    return t


def rewrap(t, levels):
    """The inverse of ``materialize``."""
    for lv in levels:
        t = add_level(t, lv.level)
    return t
