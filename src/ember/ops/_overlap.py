"""PyTorch's memory-overlap checks for the tensors an op writes to (in-place ops, ``out=``).

As in PyTorch, a written-to tensor whose elements share memory (an expanded tensor: a stride
of 0 over a dim of size > 1) is refused, and so is one that partly overlaps an input: both
non-overlapping and dense, in one storage, their memory ranges intersect but are not the same
elements in the same order. Layouts whose overlap is hard to decide (a stepped slice, say)
pass, as in PyTorch.
"""

from ember._conj_view import _RAW, ConjView, NegView
from ember._storage_place import _address
from ember._tensor import Tensor

__all__ = ["INTERNAL_OVERLAP", "PARTIAL_OVERLAP", "has_internal_overlap",
           "check_internal_overlap", "check_no_partial_overlap", "check_memory_partial_overlap",
           "check_no_overlap"]

INTERNAL_OVERLAP = ("unsupported operation: more than one element of the written-to tensor "
                    "refers to a single memory location. Please clone() the tensor before "
                    "performing the operation.")
PARTIAL_OVERLAP = ("unsupported operation: some elements of the input tensor and the "
                   "written-to tensor refer to a single memory location. Please clone() the "
                   "tensor before performing the operation.")


def has_internal_overlap(array):
    """Whether several elements of ``array`` are one memory location (a 0 stride over a dim
    of size > 1)."""
    return 0 in array.strides and array.size > 1 and any(
        s == 0 and n > 1 for n, s in zip(array.shape, array.strides))


def check_internal_overlap(array):
    """Raise PyTorch's error if ``array``, about to be written, repeats memory."""
    if has_internal_overlap(array):
        raise RuntimeError(INTERNAL_OVERLAP)


def _dense_extent(array):
    """``(start, end)`` addresses of ``array``'s memory if it is non-overlapping and dense (a
    permutation of a contiguous layout), else None."""
    step = array.itemsize
    for stride, n in sorted((s, n) for s, n in zip(array.strides, array.shape) if n != 1):
        if stride != step:
            return None
        step *= n
    start = _address(array)
    return start, start + array.size * array.itemsize


def _partly_overlap(a, b):
    """PyTorch's PARTIAL overlap status of two arrays (both dense, intersecting, and not the
    same elements in the same layout)."""
    if not a.size or not b.size:
        return False
    ea, eb = _dense_extent(a), _dense_extent(b)
    if ea is None or eb is None:
        return False                    # too hard to tell: allowed, as in PyTorch
    if ea == eb:                        # the same elements, unless laid out differently
        return _layout(a) != _layout(b)
    return ea[0] < eb[1] and eb[0] < ea[1]


def _layout(array):
    """``(size, stride)`` of the dims of ``array`` longer than 1: what its layout is, once
    the dims that change nothing (``x[0]`` of shape (1,) vs its 0-dim alias) are dropped."""
    return [(n, s) for n, s in zip(array.shape, array.strides) if n != 1]


_LAZY_VIEWS = frozenset((ConjView, NegView))


def _memory(t):
    """The array ``t``'s memory holds: a conjugate or negative view's, not the values it
    reads (a copy)."""
    return _RAW.__get__(t) if type(t) in _LAZY_VIEWS else t._data


def check_no_partial_overlap(dst, inputs):
    """Raise PyTorch's error if a tensor in ``inputs`` partly overlaps the tensor ``dst`` it
    is written to. Only tensors sharing ``dst``'s version counter (its views, its base,
    detached copies) can share its memory, so others cost one identity test. A conjugate or
    negative view is checked as the values it reads, a copy, as PyTorch's fallback resolves
    such operands first (``x[1:].add_(x.conj()[:-1])`` passes); copy_ reads their memory:
    ``check_memory_partial_overlap``."""
    vc = dst._vc
    if vc is None:
        return
    array = dst._data
    for x in inputs:
        if isinstance(x, Tensor) and x._vc is vc and x._data is not array \
                and _partly_overlap(array, x._data):
            raise RuntimeError(PARTIAL_OVERLAP)


def check_memory_partial_overlap(dst, inputs):
    """``check_no_partial_overlap`` on the memory conjugate and negative views read: copy_'s
    (PyTorch's copy kernel reads them as they lie: ``y.copy_(y.conj()[1:])`` is refused)."""
    vc = dst._vc
    if vc is None:
        return
    array = dst._data if type(dst) not in _LAZY_VIEWS else _RAW.__get__(dst)   # (_memory)
    for x in inputs:
        if isinstance(x, Tensor) and x._vc is vc:
            a = _memory(x)
            if a is not array and _partly_overlap(array, a):
                raise RuntimeError(PARTIAL_OVERLAP)


def check_no_overlap(dst, inputs):
    """Raise PyTorch's error if a tensor in ``inputs`` shares any memory with ``dst``, even
    all of it: ops that read their inputs while writing ``dst`` elementwise out of order
    (scatter, index_copy, gather's out=...) refuse both kinds of overlap."""
    vc = dst._vc                        # None: dst has no views, only itself aliases it
    array = dst._data
    for x in inputs:
        if x is dst or vc is not None and isinstance(x, Tensor) and x._vc is vc \
                and _overlap(array, x._data):
            raise RuntimeError(PARTIAL_OVERLAP)


def _overlap(a, b):
    """Whether dense ``a`` and ``b`` share memory (the layouts too hard to tell pass)."""
    if not a.size or not b.size:
        return False
    ea, eb = _dense_extent(a), _dense_extent(b)
    return ea is not None and eb is not None and ea[0] < eb[1] and eb[0] < ea[1]
