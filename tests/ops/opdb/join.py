"""OpInfo entries for ember/ops/join.py: cat, stack, split, chunk, unbind, tensor_split."""

import itertools

import numpy as np

import ember
from tests.ops.opdb.core import ALL, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name="", **kwargs):
    return SampleInput(x, args, kwargs, name=name)


def _err(x, args, error, match, **kwargs):
    return ErrorInput(SampleInput(x, args, kwargs), error, match)


def _promoted(dtype, sample):
    out = None
    for t in sample.input:
        out = t.dtype if out is None else ember.promote_types(out, t.dtype)
    return out


# --- cat, stack -----------------------------------------------------------------------------------

def _cat_ref(tensors, dim=0):
    kept = [a for a in tensors if a.shape != (0,)]
    dtype = np.result_type(*tensors)
    if not kept:
        return np.zeros((0,), dtype)
    return np.concatenate([a.astype(dtype) for a in kept], axis=dim)


def _cat_samples(dtype, rg):
    yield _s([make((2, 3), dtype, rg), make((4, 3), dtype, rg)], name="dim0")
    yield _s([make((2, 3), dtype, rg), make((2, 1), dtype, rg), make((2, 2), dtype, rg)], 1,
             name="three_dim1")
    yield _s([make((2, 3), dtype, rg), make((2, 2), dtype, rg)], dim=-1, name="negative_dim")
    yield _s((make((2, 3), dtype, rg),), name="single_tuple")
    yield _s([make((0, 3), dtype, rg), make((2, 3), dtype, rg)], name="empty_part")
    yield _s([make((2, 3), dtype, rg), make((0,), dtype, rg), make((2, 1), dtype, rg)], 1,
             name="legacy_empty_skipped")
    yield _s([make((0,), dtype, rg), make((0,), dtype, rg)], 0, name="all_legacy_empty")
    yield _s([make((3, 4), dtype, rg, noncontiguous=True), make((4, 3), dtype, rg).t()], 1,
             name="noncontiguous")
    if dtype is not ember.float64:
        yield _s([make((2, 3), dtype, rg), make((1, 3), ember.float64)], name="promotes")
    if dtype is not ember.int32 and dtype is not ember.bool:
        yield _s([make((1, 3), ember.int32), make((2, 3), dtype, rg)], name="promotes_int")


def _cat_errors():
    x = ember.zeros(2, 3)
    yield _err([x, ember.zeros(3)], (1,), RuntimeError,
               "Tensors must have same number of dimensions: got 2 and 1")
    yield _err([x, ember.zeros(3, 3)], (1,), RuntimeError,
               r"Sizes of tensors must match except in dimension 1\. Expected size 2 but got "
               r"size 3 for tensor number 1 in the list\.")
    yield _err([ember.zeros(0), x, ember.zeros(4, 4)], (0,), RuntimeError,
               "Expected size 3 but got size 4 for tensor number 2 in the list")
    yield _err([ember.zeros(0, 2), x], (0,), RuntimeError,
               "Expected size 2 but got size 3 for tensor number 1")
    yield _err([x, x], (2,), IndexError, r"range of \[-2, 1\], but got 2\)")
    yield _err([ember.tensor(1.), ember.tensor(2.)], (), RuntimeError,
               r"zero-dimensional tensor \(at position 0\) cannot be concatenated")
    yield _err(x, (), TypeError, "must be tuple of Tensors, not Tensor")


def _stack_samples(dtype, rg):
    yield _s([make((2, 3), dtype, rg), make((2, 3), dtype, rg)], name="dim0")
    yield _s([make((2, 3), dtype, rg) for _ in range(3)], 2, name="last")
    yield _s([make((2, 3), dtype, rg), make((2, 3), dtype, rg)], dim=-2, name="negative")
    yield _s([make((), dtype, rg), make((), dtype, rg)], name="0dim")
    yield _s([make((), dtype, rg)], -1, name="0dim_negative")
    yield _s([make((0, 3), dtype, rg), make((0, 3), dtype, rg)], 1, name="empty")
    yield _s([make((3, 4), dtype, rg, noncontiguous=True), make((4, 3), dtype, rg).t()], 1,
             name="noncontiguous")
    if dtype is not ember.float64:
        yield _s([make((2, 3), dtype, rg), make((2, 3), ember.float64)], name="promotes")


def _stack_ref(tensors, dim=0):
    dtype = np.result_type(*tensors)
    return np.stack([a.astype(dtype) for a in tensors], axis=dim)


def _stack_errors():
    yield _err([ember.zeros(2), ember.zeros(3)], (), RuntimeError,
               r"stack expects each tensor to be equal size, but got \[2\] at entry 0 and "
               r"\[3\] at entry 1")
    x = ember.zeros(2, 3)
    yield _err([x, x], (3,), IndexError, r"range of \[-3, 2\], but got 3\)")
    yield _err([x, x], (-4,), IndexError, r"but got -4\)")


# --- split, chunk, unbind, tensor_split ---------------------------------------------------------

def _slices(a, dim, bounds):
    lead = (slice(None),) * (dim % a.ndim)
    return tuple(a[lead + (slice(s, e),)] for s, e in bounds)


def _bounds_of(sizes):
    return list(itertools.pairwise(np.cumsum([0, *sizes])))


def _split_ref(a, split, dim=0):
    n = a.shape[dim]
    if isinstance(split, (list, tuple)):
        sizes = split
    else:
        sizes = [min(split, n - i) for i in range(0, n, split)] if split else [0]
    return _slices(a, dim, _bounds_of(sizes))


def _split_samples(dtype, rg):
    yield _s(make((5, 3), dtype, rg), 2, name="size")
    yield _s(make((5, 3), dtype, rg), 5, name="size_whole")
    yield _s(make((5, 3), dtype, rg), 10, name="size_larger")
    yield _s(make((5, 3), dtype, rg), 1, 1, name="dim1")
    yield _s(make((5, 3), dtype, rg), [2, 3], name="sizes")
    yield _s(make((5, 3), dtype, rg), (1, 0, 2), dim=-1, name="sizes_with_zero")
    yield _s(make((0, 3), dtype, rg), 0, name="empty_size0")
    yield _s(make((0, 3), dtype, rg), 2, name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), 2, 1, name="noncontiguous")


def _split_errors():
    x = ember.zeros(5, 3)
    yield _err(x, (0,), RuntimeError,
               "split_size can only be 0 if dimension size is 0, but got dimension size of 5")
    yield _err(x, (-1,), RuntimeError,
               "split expects split_size be non-negative, but got split_size=-1")
    yield _err(x, ([2, 2],), RuntimeError,
               r"split_with_sizes expects split_sizes to sum exactly to 5 \(input tensor's size "
               r"at dimension 0\), but got split_sizes=\[2, 2\]")
    yield _err(x, ([2, -1, 4],), RuntimeError,
               r"split_with_sizes expects split_sizes have only non-negative entries, but got "
               r"split_sizes=\[2, -1, 4\]")
    yield _err(x, (2, 2), IndexError, r"range of \[-2, 1\], but got 2\)")
    yield _err(ember.tensor(1.), (1,), RuntimeError,
               "split expects at least a 1-dimensional tensor")


def _chunk_ref(a, chunks, dim=0):
    n = a.shape[dim]
    if n == 0:
        return _slices(a, dim, [(0, 0)] * chunks)
    size = -(-n // chunks)
    return _split_ref(a, size, dim)


def _unsafe_split_samples(dtype, rg):
    return (s for s in _split_samples(dtype, rg) if not isinstance(s.args[0], (list, tuple)))


def _unsafe_split_with_sizes_samples(dtype, rg):
    return (s for s in _split_samples(dtype, rg) if isinstance(s.args[0], (list, tuple)))


def _unsafe_split_errors():
    yield _err(ember.zeros(5, 3), ([2, 3],), TypeError,
               r"unsafe_split\(\): argument 'split_size' \(position 2\) must be int, not list")
    yield from (e for e in _split_errors() if not isinstance(e.sample.args[0], (list, tuple)))


def _chunk_samples(dtype, rg):
    yield _s(make((5, 3), dtype, rg), 2, name="uneven")
    yield _s(make((6, 3), dtype, rg), 3, name="even")
    yield _s(make((5, 3), dtype, rg), 4, name="fewer_than_asked")
    yield _s(make((2, 3), dtype, rg), 5, name="more_than_size")
    yield _s(make((2, 3), dtype, rg), 2, dim=-1, name="negative_dim")
    yield _s(make((0, 3), dtype, rg), 2, name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), 2, 1, name="noncontiguous")


def _chunk_errors():
    x = ember.zeros(5, 3)
    yield _err(x, (0,), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0")
    yield _err(x, (-1,), RuntimeError, "greater than 0, got: -1")
    yield _err(x, (2, 2), IndexError, "Dimension out of range")
    yield _err(ember.tensor(1.), (1,), RuntimeError,
               "chunk expects at least a 1-dimensional tensor")


def _unbind_ref(a, dim=0):
    return tuple(np.moveaxis(a, dim, 0))


def _unbind_samples(dtype, rg):
    yield _s(make((3, 2), dtype, rg), name="dim0")
    yield _s(make((3, 2), dtype, rg), 1, name="dim1")
    yield _s(make((2, 3, 2), dtype, rg), dim=-2, name="negative")
    yield _s(make((3,), dtype, rg), name="to_0dim")
    yield _s(make((2, 0), dtype, rg), name="empty")
    yield _s(make((2, 3), dtype, rg, noncontiguous=True), 1, name="noncontiguous")


def _unbind_errors():
    yield _err(ember.zeros(2, 3), (2,), IndexError, r"range of \[-2, 1\], but got 2\)")
    yield _err(ember.tensor(1.), (), IndexError,
               "Dimension specified as 0 but tensor has no dimensions")


def _tensor_split_ref(a, arg, dim=0):
    n = a.shape[dim]
    if isinstance(arg, (list, tuple)):
        edges = [slice(i, None).indices(n)[0] for i in arg]
        return _slices(a, dim, list(zip([0] + edges, edges + [n])))
    arg = int(arg)
    small, extra = divmod(n, arg)
    return _slices(a, dim, _bounds_of([small + 1] * extra + [small] * (arg - extra)))


def _tensor_split_samples(dtype, rg):
    yield _s(make((5, 3), dtype, rg), 2, name="sections")
    yield _s(make((5, 3), dtype, rg), 7, name="more_sections_than_size")
    yield _s(make((5, 3), dtype, rg), [1, 4], name="indices")
    yield _s(make((5, 3), dtype, rg), (1, 10), name="index_past_end")
    yield _s(make((5, 3), dtype, rg), [-1], name="negative_index")
    yield _s(make((5, 3), dtype, rg), [4, 1], name="overlapping")
    yield _s(make((5, 3), dtype, rg), [2], 1, name="dim1")
    yield _s(make((0, 3), dtype, rg), 2, name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), [2, 3], -1, name="noncontiguous")


def _tensor_split_errors():
    x = ember.zeros(5, 3)
    yield _err(x, (0,), RuntimeError, "number of sections must be larger than 0, got 0")
    yield _err(x, (ember.tensor([1.0, 3.0]),), RuntimeError,
               "tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
               "Float")
    yield _err(x, (ember.zeros(2, 2, dtype=ember.int64),), RuntimeError,
               "to be a zero-dimensional or one-dimensional tensor, but got a tensor with 2 dims")
    yield _err(ember.tensor(1.), (2,), RuntimeError,
               "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 "
               "dims")


OPS = [
    OpInfo("cat", _cat_ref, _cat_samples, dtypes=ALL, result_dtype=_promoted, gradgrad=True,
           error_inputs=_cat_errors),
    OpInfo("stack", _stack_ref, _stack_samples, dtypes=ALL, result_dtype=_promoted,
           gradgrad=True, error_inputs=_stack_errors),
    OpInfo("split", _split_ref, _split_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_split_errors),
    OpInfo("chunk", _chunk_ref, _chunk_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_chunk_errors),
    OpInfo("unsafe_split", _split_ref, _unsafe_split_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_unsafe_split_errors),
    OpInfo("unsafe_split_with_sizes", _split_ref, _unsafe_split_with_sizes_samples, dtypes=ALL,
           gradgrad=True),
    OpInfo("unsafe_chunk", _chunk_ref, _chunk_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_chunk_errors),
    OpInfo("unbind", _unbind_ref, _unbind_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_unbind_errors),
    OpInfo("tensor_split", _tensor_split_ref, _tensor_split_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_tensor_split_errors),
]
