"""as_strided (a view of the input's storage with any sizes and strides), its in-place form
Tensor.as_strided_, as_strided_copy, and as_strided_scatter (a copy, not a view).

NOTE [Storage geometry]
PyTorch's ``as_strided`` indexes the input's *storage*: element ``i`` of the result is
``storage[storage_offset + sum_k i_k * stride_k]``, where the storage is the memory of the
input's view root (``Tensor._base``, or the tensor itself when it is no view) and the default
offset is the input's own ``storage_offset()``. A forward sees only the input's array, so the
public functions work out where that array lies in its storage and pass it on in the
``storage_offset`` parameter: a ``_Place``, an int (the offset) that also holds the input's
own offset and strides and the storage's size in bytes. View recipes and backward replay
those parameters, so they need nothing else. A plain int or None there (vmap's per-example
loop calls the op directly) makes the input's values, in row-major order, its own storage.
A gradient reaches the storage first (elements that several outputs view add up), and each
input element then takes the gradient of the storage element it views, shared evenly among
the input elements viewing the same one (an expanded input), as in PyTorch.
"""

from ember._creation import zeros
from ember._memory_format import contiguous_format, restrided
from ember._storage_place import _address, _row_major_strides, _storage_root
from ember._tensor import Tensor
from ember._warn import warn_once
from ember.ops._inplace import call_inplace
from ember.ops._reduce import constant
from ember.ops._registry import call, op
from ember.ops.index_dim import index_add, index_select
from ember.overrides import has_torch_function

__all__ = ["as_strided", "as_strided_", "as_strided_copy", "as_strided_scatter"]

# where a tensor that is no view keeps its storage once as_strided_ gave it a window of it
_KEPT = "as_strided_storage"


class _Place(int):
    """A storage offset, with where the input lies in that storage (see NOTE [Storage
    geometry]): its own offset and strides in elements, and the storage's size in bytes."""

    def __new__(cls, offset, source, strides, nbytes):
        self = int.__new__(cls, offset)
        self.source, self.strides, self.nbytes = source, strides, nbytes
        return self


# --- arguments, checked as PyTorch's argument parser does ----------------------------------

def _ints(value, fname, name, pos):
    """A tuple or list of ints (or one-element integer tensors) as a tuple of ints."""
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{fname}(): argument '{name}' (position {pos}) must be tuple of ints, "
                        f"not {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        try:
            if isinstance(v, bool):
                raise TypeError
            out.append(v.__index__())
        except (AttributeError, TypeError):
            raise TypeError(f"{fname}(): argument '{name}' (position {pos}) must be tuple of "
                            f"ints, but found element of type {type(v).__name__} at pos {i}"
                            ) from None
    return tuple(out)


def _offset(value, fname, pos):
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise TypeError
        return value.__index__()
    except (AttributeError, TypeError):
        raise TypeError(f"{fname}(): argument 'storage_offset' (position {pos}) must be int, "
                        f"not {type(value).__name__}") from None


def _arguments(fname, pos, size, stride, storage_offset):
    """(size, stride, storage_offset) checked; ``pos`` is the position of ``size``."""
    return (_ints(size, fname, "size", pos), _ints(stride, fname, "stride", pos + 1),
            _offset(storage_offset, fname, pos + 2))


# --- where an array lies in its storage ------------------------------------------------------

def _extent(a):
    """Bytes from an array's first element to the end of the last one it reaches."""
    if a.size == 0:
        return 0
    return a.itemsize + sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0)


def _locate(t):
    """(the array holding tensor ``t``'s storage, ``t``'s offset in it in elements)."""
    a = t._data
    root = _storage_root(t)
    store = root._data
    if root._meta and _KEPT in root._meta:
        store = root._meta[_KEPT]
    shift = _address(a) - _address(store)
    low = shift + sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
    if shift % a.itemsize or low < 0 or shift + _extent(a) > _extent(store):
        return a, 0         # not inside (another dtype's root, a replaced array): its own
    return store, shift // a.itemsize


def _place(t, storage_offset):
    """``storage_offset`` (None: ``t``'s own) as a _Place for tensor ``t``; unchanged for
    operands whose ``__torch_function__`` will take the call."""
    if not isinstance(t, Tensor) or has_torch_function((t,)):
        return storage_offset
    store, source = _locate(t)
    a = t._data
    strides = tuple(s // a.itemsize for s in a.strides)
    return _Place(source if storage_offset is None else storage_offset, source, strides,
                  _extent(store))


def _placed(xp, x, place):
    """(array, _Place) for a forward: a plain offset makes the values their own storage."""
    if isinstance(place, _Place):
        return x, place
    if not x.flags.c_contiguous:
        x = x.copy()
    return x, _Place(place or 0, 0, _row_major_strides(x.shape), x.nbytes)




def _geometry(x, place):
    """(window offset, input offset, input strides) for a derivative."""
    if isinstance(place, _Place):
        return int(place), place.source, place.strides
    return place or 0, 0, _row_major_strides(x.shape)


def _check(size, stride, offset, itemsize, nbytes):
    """PyTorch's checks of a window of a storage of ``nbytes`` bytes."""
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, "
                           f"got strides: {list(stride)}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and "
                           f"strides={list(stride)}")
    if 0 in size:
        return
    need = (offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))) * itemsize
    if need > nbytes:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {offset}, and itemsize {itemsize} requiring a storage size "
                           f"of {need} are out of bounds for storage of size {nbytes}")


def _frame(*geometries):
    """(lowest index, count) of the storage indices that nonempty (shape, strides, offset)
    geometries reach."""
    lows, highs = [], []
    for shape, strides, offset in geometries:
        lows.append(offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0))
        highs.append(offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0))
    return min(lows), max(highs) - min(lows) + 1


def _positions(xp, shape, strides, offset):
    """The storage index of each element of a (shape, strides, offset) geometry, flattened."""
    pos = xp.asarray(offset, dtype=xp.int64)
    for n, s in zip(shape, strides):
        pos = pos[..., None] + xp.arange(n, dtype=xp.int64) * s
    return pos.reshape(-1)


def _may_overlap(shape, strides):
    """Whether two elements of a geometry may share a storage index (False: they cannot)."""
    reach = 0
    for s, n in sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1):
        if s <= reach:
            return True
        reach += (n - 1) * s
    return False


def _kept(xp, index):
    """A mask of the entries of ``index`` that are the last with their value: the writes that
    stay when several land on one storage element (PyTorch's CPU order)."""
    _, first = xp.unique(index[::-1], return_index=True)
    mask = xp.zeros(index.size, dtype=bool)
    mask[index.size - 1 - first] = True
    return mask


# --- as_strided: a view ------------------------------------------------------------------------

@op("as_strided(input, size, stride, storage_offset=None)", view=True, inplace=True,
    saves_inputs=False)
def as_strided(xp, x, size, stride, storage_offset):
    """A view of ``input``'s storage with the given sizes and strides (in elements), from
    ``storage_offset`` (default: ``input``'s own); elements may overlap."""
    x, place = _placed(xp, x, storage_offset)
    size, stride = tuple(size), tuple(stride)
    _check(size, stride, place, x.itemsize, place.nbytes)
    item = x.itemsize
    strides = tuple(s * item for s in stride)
    shift = (place - place.source) * item       # bytes from x's first element to the window's
    if not shift or (x.size == 0 and 0 in size):    # CuPy: a fresh empty array has no address
        return restrided(xp, x, size, strides)
    # [1, ...], not [1]: for a 0-dim window, [1] would give a scalar, a copy
    return restrided(xp, x, (2,) + size, (shift,) + strides)[1, ...]


@as_strided.derivative
def _(grad, x, size, stride, storage_offset):
    offset, source, strides = _geometry(x, storage_offset)
    if grad.numel() == 0 or x.numel() == 0:
        return zeros(x.shape, dtype=grad.dtype, device=grad.device)
    lo, count = _frame((x.shape, strides, source), (size, stride, offset))
    inside = constant(lambda xp, _: _positions(xp, x.shape, strides, source - lo), grad)
    window = constant(lambda xp, _: _positions(xp, size, stride, offset - lo), grad)
    storage = index_add(zeros(count, dtype=grad.dtype, device=grad.device), 0, window,
                        grad.reshape(-1))
    g = index_select(storage, 0, inside)
    if _may_overlap(x.shape, strides):
        g = g / constant(lambda xp, i: xp.bincount(i, minlength=count)[i], inside)
    return g.reshape(x.shape)


def _view(input, size, stride, storage_offset, fname, pos, inplace=False):
    size, stride, offset = _arguments(fname, pos, size, stride, storage_offset)
    place = _place(input, offset)
    if not inplace:
        return call(as_strided, (input,), (size, stride, place))
    store = _locate(input)[0] if isinstance(place, _Place) else None
    call_inplace(as_strided, (input,), (size, stride, place))
    if store is not None and input._view is None:
        if input._meta is None:
            input._meta = {}
        input._meta[_KEPT] = store
    return input


def _as_strided(input, size, stride, storage_offset=None):
    return _view(input, size, stride, storage_offset, "as_strided", 2)


def _as_strided_method(self, size, stride, storage_offset=None):
    return _view(self, size, stride, storage_offset, "as_strided", 1)


def as_strided_(input, size, stride, storage_offset=None):
    """Give ``input`` itself the sizes, strides and storage offset of ``as_strided``."""
    return _view(input, size, stride, storage_offset, "as_strided_", 2, inplace=True)


def _as_strided_inplace_method(self, size, stride, storage_offset=None):
    return _view(self, size, stride, storage_offset, "as_strided_", 1, inplace=True)


def as_strided_copy(input, size, stride, storage_offset=None):
    """A contiguous copy of ``as_strided(input, size, stride, storage_offset)``."""
    return _view(input, size, stride, storage_offset, "as_strided_copy", 2).clone(
        memory_format=contiguous_format)


# --- as_strided_scatter: a copy --------------------------------------------------------------

@op("as_strided_scatter(input, src, size, stride, storage_offset=None)", inputs=2,
    saves_inputs=False)
def as_strided_scatter(xp, x, src, size, stride, storage_offset):
    """A copy of ``input`` in which the elements ``as_strided(input, size, stride,
    storage_offset)`` views are ``src``'s (where several would be, the last one's)."""
    x, place = _placed(xp, x, storage_offset)
    size, stride = tuple(size), tuple(stride)
    _check(size, stride, place, x.itemsize, place.nbytes)
    if src.shape != size:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(size)}")
    if src.size and any(s == 0 and n > 1 for n, s in zip(size, stride)):
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the "
                           "tensor before performing the operation.")
    if src.dtype.kind == "c" and x.dtype.kind not in "cb":
        warn_once("Casting complex values to real discards the imaginary part")
        src = src.real
    if x.size == 0 or src.size == 0:
        return x.copy()
    strides = tuple(s // x.itemsize for s in x.strides)
    lo, count = _frame((x.shape, strides, place.source), (size, stride, place))
    inside = _positions(xp, x.shape, strides, place.source - lo)
    window = _positions(xp, size, stride, place - lo)
    values = src.reshape(-1)
    if _may_overlap(size, stride):
        kept = _kept(xp, window)
        window, values = window[kept], values[kept]
    written = xp.zeros(count, dtype=bool)
    written[window] = True
    memory = xp.zeros(count, dtype=x.dtype)
    memory[window] = values
    out = x.copy(order="K")                 # the input's layout, as PyTorch keeps it
    xp.copyto(out, memory[inside].reshape(x.shape), where=written[inside].reshape(x.shape))
    return out


@as_strided_scatter.derivative
def _(grad, x, src, size, stride, storage_offset, *, needs=(True, True)):
    offset, source, strides = _geometry(x, storage_offset)
    grad_x = grad if needs[0] else None
    if x.numel() == 0 or src.numel() == 0:
        return grad_x, zeros(src.shape, dtype=src.dtype, device=grad.device) if needs[1] \
            else None
    lo, count = _frame((x.shape, strides, source), (size, stride, offset))
    inside = constant(lambda xp, _: _positions(xp, x.shape, strides, source - lo), grad)
    window = constant(lambda xp, _: _positions(xp, size, stride, offset - lo), grad)
    if needs[0]:
        def hit(xp, i, w):
            written = xp.zeros(count, dtype=bool)
            written[w] = True
            return written[i].reshape(x.shape)
        grad_x = grad.masked_fill(constant(hit, inside, window), 0)
    grad_src = None
    if needs[1]:
        storage = index_add(zeros(count, dtype=grad.dtype, device=grad.device), 0, inside,
                            grad.reshape(-1))
        g = index_select(storage, 0, window)
        if _may_overlap(size, stride):       # writes that a later one overwrote
            g = g.masked_fill(constant(lambda xp, w: ~_kept(xp, w), window), 0)
        if g.is_complex() and not src.dtype.is_complex:
            g = g.real
        grad_src = g.to(src.dtype).reshape(src.shape)
    return grad_x, grad_src


def _scatter(input, src, size, stride, storage_offset, pos):
    size, stride, offset = _arguments("as_strided_scatter", pos, size, stride, storage_offset)
    place = _place(input, offset)
    if isinstance(place, _Place) and any(s == 0 and n > 1 for n, s in
                                         zip(input.shape, place.strides)):
        place = offset          # as PyTorch, an expanded input's copy is a contiguous one
    return call(as_strided_scatter, (input, src), (size, stride, place))


def _as_strided_scatter(input, src, size, stride, storage_offset=None):
    return _scatter(input, src, size, stride, storage_offset, 3)


def _as_strided_scatter_method(self, src, size, stride, storage_offset=None):
    return _scatter(self, src, size, stride, storage_offset, 2)


# --- the public functions and methods: see NOTE [Storage geometry] -------------------------

def _publish(fn, name, the_op, method=False):
    fn.__name__ = name
    fn.__qualname__ = f"Tensor.{name}" if method else name
    fn.__module__ = "ember"
    fn.__doc__ = the_op.forward.__doc__ if fn.__doc__ is None else fn.__doc__
    fn._ember_op = the_op
    return fn


as_strided.function = _publish(_as_strided, "as_strided", as_strided)
as_strided_scatter.function = _publish(_as_strided_scatter, "as_strided_scatter",
                                       as_strided_scatter)
Tensor.as_strided = _publish(_as_strided_method, "as_strided", as_strided, method=True)
Tensor.as_strided_ = _publish(_as_strided_inplace_method, "as_strided_", as_strided,
                              method=True)
Tensor.as_strided_scatter = _publish(_as_strided_scatter_method, "as_strided_scatter",
                                     as_strided_scatter, method=True)
_publish(as_strided_, "as_strided_", as_strided)



def slice_inverse(input, src, dim=0, start=None, end=None, step=1):
    """The view of ``input``'s storage with ``src``'s geometry (sizes, strides, offset): the
    inverse of slicing ``src`` out of a tensor, for which ``dim``, ``start``, ``end`` and
    ``step`` are given but not needed."""
    if not isinstance(src, Tensor):
        raise TypeError(f"slice_inverse(): argument 'src' (position 2) must be Tensor, not "
                        f"{type(src).__name__}")
    return _as_strided(input, src.shape, src.stride(), src.storage_offset())


PUBLIC = {"as_strided_": as_strided_, "as_strided_copy": as_strided_copy,
          "slice_inverse": slice_inverse}
