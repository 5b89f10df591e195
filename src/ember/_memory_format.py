"""Memory formats (``torch.memory_format``): the order in which a tensor's dims lie in memory.

``contiguous_format`` is row-major. ``channels_last`` keeps an (N, C, H, W) tensor's channels
innermost, as if stored (N, H, W, C); ``channels_last_3d`` does the same for (N, C, D, H, W).
``preserve_format`` asks a copy to keep its source's format. ember's arrays carry their
strides, so a tensor in one of these formats is an ordinary view of such memory.
"""

import numpy as np

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d",
           "preserve_format", "legacy_contiguous_format"]


class memory_format:  # noqa: N801  (PyTorch's name)
    """A memory format; compare by identity (``fmt is ember.channels_last``)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):                   # pickles as the module-level singleton
        return self.name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
legacy_contiguous_format = contiguous_format    # PyTorch's alias (F.gumbel_softmax uses it)

# the dims from outermost to innermost in memory, for the formats that reorder them
_ORDERS = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def memory_order(fmt, ndim):
    """The memory order of ``fmt`` for an ``ndim``-dim tensor; None for row-major formats.
    Raises PyTorch's error when the format needs another rank."""
    if fmt not in _ORDERS:
        return None
    rank, order = _ORDERS[fmt]
    if ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    return order


def laid_out(array, order):
    """Whether ``array``'s memory runs densely through its dims in ``order`` (dims of size 1
    may have any stride)."""
    expected = array.itemsize
    for d in reversed(order):
        size = array.shape[d]
        if size == 0:
            return True
        if size != 1 and array.strides[d] != expected:
            return False
        expected *= size
    return True


def lay_out(xp, array, order, dtype=None):
    """A copy of ``array`` (cast to ``dtype`` if given) whose memory runs through its dims in
    ``order``, with the strides PyTorch gives that format (size-1 dims included: (N, 1, H, W)
    channels-last has C stride 1)."""
    inverse = sorted(range(len(order)), key=order.__getitem__)
    laid = xp.empty(tuple(array.shape[d] for d in order),
                    array.dtype if dtype is None else dtype).transpose(inverse)
    if not laid.size:                   # (NumPy gives an empty array zero strides)
        from ember._storage_place import over_own_memory
        return over_own_memory(laid, _order_strides(laid.shape, order, laid.itemsize))
    laid[...] = array
    return laid


def _order_strides(shape, order, itemsize):
    """The byte strides of a dense array of ``shape`` laid out in ``order``."""
    strides = [0] * len(shape)
    step = itemsize
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def preserved(xp, array, dtype=None):
    """A copy of ``array`` (cast to ``dtype`` if given) laid out as PyTorch's
    ``preserve_format`` copy: with ``array``'s own strides when it is empty or dense, odd
    strides of size-1 dims included; else in ``preserving_order``."""
    if array.flags.c_contiguous and array.size and 1 not in array.shape:   # (the common case)
        return array.copy() if dtype is None else array.astype(dtype)
    if array.size and 0 not in array.strides:
        # NumPy's order-K copy of a dense array keeps its strides (scaled to the new itemsize)
        # exactly, as PyTorch's copy does; anything else comes out dense and is laid again
        if dtype is None:
            out = array.copy(order="K")
            if out.strides == array.strides:
                return out
        else:
            out = array.astype(dtype, order="K")
            scale = out.itemsize / array.itemsize
            if out.strides == tuple(int(s * scale) for s in array.strides):
                return out
    return laid_like(xp, array, array, dtype, copy=True)


def row_major(array):
    """Whether ``array`` is non-empty and row-major with the strides a fresh array of its
    shape has, size-1 dims included: a ``preserve_format`` copy of it is a plain copy."""
    if not array.flags.c_contiguous or not array.size:
        return False
    if 1 not in array.shape:
        return True
    expected = array.itemsize
    for stride, size in zip(reversed(array.strides), reversed(array.shape)):
        if stride != expected:
            return False
        expected *= size
    return True


def laid_like(xp, array, like, dtype=None, copy=False):
    """``array`` (of ``like``'s shape; cast to ``dtype`` if given) laid out as a
    ``preserve_format`` copy of ``like`` is (itself, when row-major will do and ``copy`` is
    false)."""
    dtype = array.dtype if dtype is None else np.dtype(dtype)
    order = preserving_order(like)
    if order is not None:
        out = lay_out(xp, array, order, dtype)
    elif copy or dtype != array.dtype:
        out = array.astype(dtype, order="C", copy=True)
    else:
        out = array
    # the order's layout of a dense ``like`` differs from it only in the strides of size-1
    # dims, or of an empty array
    if like.size and 1 not in like.shape or not _keeps_strides(like):
        return out
    strides = tuple(s // like.itemsize * dtype.itemsize for s in like.strides)
    # (a fresh empty array's zero strides are not kept: see _storage_place.born_row_major)
    return out if out.strides == strides and (out.size or any(strides)) else \
        _strided_copy(xp, out, strides)


def preserved_strides(like, itemsize):
    """The byte strides (``itemsize`` bytes an element) ``laid_like`` gives a copy of ``like``,
    read off without laying anything out (a meta tensor has no memory); None for row-major."""
    if (not like.size or 1 in like.shape) and _keeps_strides(like):
        return tuple(s // like.itemsize * itemsize for s in like.strides)
    order = preserving_order(like)
    return None if order is None else _order_strides(like.shape, order, itemsize)


def _keeps_strides(array):
    """Whether a ``preserve_format`` copy of ``array`` takes its strides as they are."""
    return min(array.strides, default=0) >= 0 and (array.size == 0 or dense(array))


def _strided_copy(xp, array, strides):
    """A copy of ``array`` over fresh memory, with byte ``strides`` (an empty one's memory
    holds an element: its zero strides are kept, see _storage_place.born_row_major)."""
    out = restrided(xp, xp.empty(max(array.size, 1), array.dtype), array.shape, strides)
    out[...] = array
    return out


class _Strided:
    """Another array's memory described anew (NumPy's ``as_strided`` makes one, with checks
    that cost twice what this does)."""
    __slots__ = ("__array_interface__", "base")


def restrided(xp, array, shape, strides):
    """A view of ``array``'s memory with ``shape`` and byte ``strides`` (``as_strided``),
    keeping ml_dtypes' dtypes, which NumPy's ``as_strided`` loses (it reads the dtype back
    from a type string: float8_e5m2's, '<f1', names no type)."""
    if array.dtype.type.__module__ != "numpy":
        return restrided(xp, array.view(f"u{array.itemsize}"), shape, strides).view(array.dtype)
    if type(array) is np.ndarray:
        view = _Strided()
        view.__array_interface__ = face = array.__array_interface__     # (a new dict)
        face["shape"] = tuple(shape)
        face["strides"] = tuple(strides)
        view.base = array                   # (keeps the memory alive)
        return np.asarray(view)
    return xp.lib.stride_tricks.as_strided(array, shape, strides)


def preserving_order(array):
    """The dim order (outermost first) in which a ``preserve_format`` copy of ``array`` lies
    in memory, as PyTorch lays it out; None for row-major. Dims sort by stride, innermost
    smallest; a dim of stride 0 (expanded) keeps its place, and of equal strides the smaller
    dim goes inside."""
    if array.flags.c_contiguous and min(array.shape, default=2) > 1:
        return None
    order = _stride_order(array.shape, array.strides)
    return None if order == tuple(range(array.ndim)) else order


def _stride_order(shape, strides, *more_strides):
    """``preserving_order``'s sort: an insertion sort from the innermost dim outwards in which
    an ambiguous comparison (a zero stride, or equal strides) neither moves a dim nor stops
    its move. ``more_strides``: further operands' strides (PyTorch's TensorIterator), read in
    turn where the ones before cannot tell."""
    inner_first = list(range(len(shape) - 1, -1, -1))
    for start in range(1, len(shape)):
        moving = start
        for left in range(start - 1, -1, -1):
            outside = _further_out(shape, strides, inner_first[left], inner_first[moving])
            for other in more_strides:
                if outside is not None:
                    break
                outside = _further_out(shape, other, inner_first[left], inner_first[moving])
            if outside is None:
                continue
            if not outside:
                break
            inner_first[left], inner_first[moving] = inner_first[moving], inner_first[left]
            moving = left
    return tuple(reversed(inner_first))


def _further_out(shape, strides, a, b):
    """Whether dim ``a`` lies outside dim ``b`` in a copy; None when their strides cannot
    tell (either is 0, or they are equal and ``a`` is no larger)."""
    sa, sb = strides[a], strides[b]
    if sa == 0 or sb == 0:
        return None
    if sa != sb:
        return sa > sb
    return True if shape[a] > shape[b] else None


def suggested_order(array):
    """The memory order PyTorch's ``suggest_memory_format`` reads from ``array``'s strides:
    channels-last's for a 4-D (channels_last_3d's for a 5-D) array whose strides grow from the
    channels through the spatial dims to the batch, even if not dense (a slice of such an
    array); None (row-major) otherwise. Ambiguous strides count as row-major: a size-1 or
    empty dim cannot make an array channels-last, nor can N111 strides."""
    ndim = array.ndim
    if ndim != 4 and ndim != 5:
        return None
    strides, shape = array.strides, array.shape
    if strides[1] == 0:
        return None
    order = _ORDERS[channels_last if ndim == 4 else channels_last_3d][1]
    low = 0
    for d in reversed(order):               # channels, then W, H, (D), then the batch
        if shape[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return None
        low = strides[d] * shape[d] if shape[d] > 1 else strides[d]
    return order


def in_order(xp, array, order):
    """``array`` laid out in ``order`` (itself when it is, or when ``order`` is None)."""
    if order is None or array.strides == _order_strides(array.shape, order, array.itemsize):
        return array
    return lay_out(xp, array, order)


def like_input(xp, x, out):
    """``out``, results a CNN op computed from ``x`` (an array or a tuple of arrays of
    ``x``'s rank), in the memory format ``x``'s strides suggest: channels-last in gives
    channels-last out, as PyTorch's convolution, pooling, normalization and resampling
    give."""
    order = suggested_order(x)
    if order is None:               # row-major (NumPy's kernels may keep x's own order)
        if isinstance(out, tuple):
            return tuple(_row_major(xp, o) for o in out)
        return _row_major(xp, out)
    if isinstance(out, tuple):
        return tuple(in_order(xp, o, order) if o.ndim == x.ndim else o for o in out)
    return in_order(xp, out, order) if out.ndim == x.ndim else out


def _row_major(xp, array):
    return array if array.ndim == 0 or array.flags.c_contiguous else xp.ascontiguousarray(array)


class _Geometry:
    """An array's shape and byte strides alone (what ``suggested_order`` reads)."""

    __slots__ = ("shape", "strides", "ndim")

    def __init__(self, shape, strides):
        self.shape, self.strides, self.ndim = shape, strides, len(shape)


def pooled_1d_order(x):
    """The memory order of a 1-D pooling's result (and gradient) for the 3-D array ``x``:
    PyTorch pools (N, C, L) as (N, C, 1, L) (an unsqueeze's strides), so channels-last there
    gives (0, 2, 1), channels innermost; None (row-major) otherwise."""
    if x.ndim != 3:
        return None
    (n, c, length), (sn, sc, sl) = x.shape, x.strides
    unsqueezed = _Geometry((n, c, 1, length), (sn, sc, sl * length, sl))
    return None if suggested_order(unsqueezed) is None else (0, 2, 1)


def averaged_grad_order(nd, x):
    """The memory order of an average pooling's input gradient for the input array ``x`` of an
    ``nd``-D pooling: the forward's in 1-D and 2-D, row-major (None) in 3-D, as PyTorch's."""
    if nd == 1:
        return pooled_1d_order(x)
    return suggested_order(x) if nd == 2 else None


def like_input_1d(xp, x, out):
    """``like_input`` for a 1-D pooling: ``out`` (an array or a tuple of 3-D arrays) laid out
    in ``pooled_1d_order(x)``."""
    order = pooled_1d_order(x)
    if order is None:
        return out
    if isinstance(out, tuple):
        return tuple(in_order(xp, o, order) for o in out)
    return in_order(xp, out, order)


def dense(array):
    """Whether ``array``'s elements fill its memory without gaps or overlaps, in some order of
    its dims (PyTorch's "non-overlapping and dense")."""
    expected = array.itemsize
    for stride, size in sorted((s, n) for s, n in zip(array.strides, array.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True
