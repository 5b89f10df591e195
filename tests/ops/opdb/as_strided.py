"""OpInfo entries for ember/ops/as_strided.py: as_strided, as_strided_scatter.

Both index the input's storage, so a sample's input is always a contiguous tensor of its own
(the parity tests hand torch a contiguous copy); ``source=`` names a view to take of it first
(a transpose, a slice, an expansion), which both frameworks then take alike.
"""

import numpy as np

import ember
from tests.ops.opdb.core import ALL, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name="", **kwargs):
    return SampleInput(x, args, kwargs, name=name)


def _err(x, args, error, match, **kwargs):
    return ErrorInput(SampleInput(x, args, kwargs), error, match)


def _view_of(x, source):
    """The view ``source`` names, of a NumPy array, an ember tensor or a torch tensor."""
    if source is None:
        return x
    if source == "expand":
        shape = (2,) + tuple(x.shape)
        return np.broadcast_to(x, shape) if isinstance(x, np.ndarray) else x.expand(shape)
    return {"t": lambda y: y.T, "cols": lambda y: y[:, 1:], "step": lambda y: y[::2],
            "tail": lambda y: y[2:]}[source](x)


def _on_view(fn):
    def call(x, *args, source=None, **kwargs):
        return fn()(_view_of(x, source), *args, **kwargs)
    return call


def _torch(name):
    def fn():
        import torch
        return getattr(torch, name)
    return _on_view(fn)


def _window(a, size, stride, storage_offset=None, *, source=None):
    """(storage, storage indices of the window) of the contiguous array ``a``."""
    view = _view_of(a, source)
    start = (view.__array_interface__["data"][0] - a.__array_interface__["data"][0]) \
        // a.itemsize
    offset = start if storage_offset is None else int(storage_offset)
    size = [int(n) for n in size]
    index = np.asarray(offset)
    for k, (n, s) in enumerate(zip(size, stride)):
        index = index + np.arange(n).reshape((n,) + (1,) * (len(size) - k - 1)) * int(s)
    return a.reshape(-1), index, view, start


# --- as_strided --------------------------------------------------------------------------------

def _as_strided_ref(a, size, stride, storage_offset=None, *, source=None):
    storage, index, _, _ = _window(a, size, stride, storage_offset, source=source)
    return storage[index]


def _as_strided_samples(dtype, rg, grad=False):
    yield _s(make((12,), dtype, rg), (3, 4), (4, 1), name="reshape")
    yield _s(make((6,), dtype, rg), (3, 3), (1, 1), name="overlapping")
    yield _s(make((3, 4), dtype, rg), (2, 2), (1, 4), 3, name="offset")
    yield _s(make((5,), dtype, rg), (3, 2), (0, 2), 1, name="zero_stride")
    yield _s(make((4,), dtype, rg), (), (), 2, name="0dim_result")
    yield _s(make((), dtype, rg), (2, 3), (0, 0), name="0dim_input")
    yield _s(make((0,), dtype, rg), (0,), (1,), name="empty")
    yield _s(make((4,), dtype, rg), (2, 0), (1, 1), 100, name="empty_past_end")
    yield _s(make((2, 5), dtype, rg), size=(2, 2), stride=(5, 1), storage_offset=1,
             name="keywords")
    yield _s(make((8,), dtype, rg), [2, 2], [1, 2], ember.tensor(1), name="lists_tensor")
    yield _s(make((3, 4), dtype, rg), (2, 3), (2, 3), 1, source="t", name="transposed")
    yield _s(make((3, 4), dtype, rg), (2, 2), (1, 4), source="cols", name="view_offset")
    yield _s(make((8,), dtype, rg), (3,), (2,), source="step", name="strided_view")
    yield _s(make((3,), dtype, rg), (2, 2), (1, 1), source="expand", name="expanded")
    if grad:
        return
    # windows reaching storage outside the view: as in PyTorch, the view's own backward
    # passes no gradient there, so these fail gradcheck (test_as_strided.py checks torch's)
    yield _s(make((3, 4), dtype), (2, 2), (1, 4), 0, source="cols",
             name="view_explicit_offset")
    yield _s(make((3, 4), dtype), (3,), (5,), 1, source="tail", name="outside_the_view")


def _as_strided_errors():
    x = ember.zeros(10)
    yield _err(x, ((20,), (1,)), RuntimeError,
               r"setStorage: sizes \[20\], strides \[1\], storage offset 0, and itemsize 4 "
               r"requiring a storage size of 80 are out of bounds for storage of size 40")
    yield _err(x, ((2, 3), (3, 1), 5), RuntimeError, r"storage offset 5, and itemsize 4 "
               r"requiring a storage size of 44 are out of bounds for storage of size 40")
    yield _err(x, ((3,), (0,), 10), RuntimeError, "requiring a storage size of 44")
    yield _err(ember.zeros(3, 4, dtype=ember.float64), ((12,), (1,)), RuntimeError,
               r"storage offset 1, and itemsize 8 requiring a storage size of 104 are out of "
               r"bounds for storage of size 96", source="cols")
    yield _err(ember.zeros(0), ((1,), (1,)), RuntimeError, "out of bounds for storage of size 0")
    yield _err(x, ((2, 3), (1,)), RuntimeError, "mismatch in length of strides and shape")
    yield _err(x, ((2,), (-1,), -1), RuntimeError,
               r"as_strided: Negative strides are not supported at the moment, got strides: "
               r"\[-1\]")
    yield _err(x, ((2,), (1,), -1), RuntimeError, "Tensor: invalid storage offset -1")
    yield _err(x, ((-1, 2), (100, 1)), RuntimeError,
               r"Storage size calculation overflowed with sizes=\[-1, 2\] and "
               r"strides=\[100, 1\]")
    yield _err(x, (3, (1,)), TypeError,
               r"as_strided\(\): argument 'size' \(position 2\) must be tuple of ints, not int")
    yield _err(x, ((2.0,), (1,)), TypeError,
               r"argument 'size' \(position 2\) must be tuple of ints, but found element of "
               r"type float at pos 0")
    yield _err(x, ((2,), (True,)), TypeError,
               r"argument 'stride' \(position 3\) must be tuple of ints, but found element of "
               r"type bool at pos 0")
    yield _err(x, ((2,), (1,), 1.0), TypeError,
               r"as_strided\(\): argument 'storage_offset' \(position 4\) must be int, not "
               r"float")


# --- as_strided_scatter ------------------------------------------------------------------------

def _as_strided_scatter_ref(a, src, size, stride, storage_offset=None, *, source=None):
    if source == "expand":      # PyTorch copies an expanded input into contiguous memory
        return _as_strided_scatter_ref(np.ascontiguousarray(_view_of(a, source)), src, size,
                                       stride, storage_offset)
    storage, index, view, start = _window(a, size, stride, storage_offset, source=source)
    storage = storage.copy()
    storage[index.reshape(-1)] = np.asarray(src).reshape(-1)   # NumPy: the last write stays
    strides = tuple(s // a.itemsize for s in view.strides)
    _, inside, _, _ = _window(storage, view.shape, strides, start)
    return storage[inside]


def _as_strided_scatter_samples(dtype, rg, grad=False):
    """Samples whose input never requires grad: the gradient samples differentiate src alone
    (see OPS)."""
    def src(shape):
        return make(shape, dtype, rg)
    yield _s(make((12,), dtype), src((2, 3)), (2, 3), (3, 2), 1, name="plain")
    yield _s(make((3, 4), dtype), src((2, 2)), (2, 2), (4, 1), name="default_offset")
    yield _s(make((), dtype), src(()), (), (), name="0dim")
    yield _s(make((5,), dtype), src(()), (), (), 3, name="0dim_src")
    yield _s(make((2, 5), dtype), src((3,)), size=(3,), stride=(2,), storage_offset=2,
             name="keywords")
    yield _s(make((0,), dtype), src((0,)), (0,), (1,), 5, name="empty")
    yield _s(make((4,), dtype), src((0, 2)), (0, 2), (1, 1), name="empty_src")
    if grad:
        return
    yield _s(make((6,), dtype), src((2, 2)), (2, 2), (1, 1), 1, name="overlapping")
    yield _s(make((5,), dtype), src((3, 1)), (3, 1), (1, 0), 1, name="zero_stride_size1")
    yield _s(make((5,), dtype), src((0, 3)), (0, 3), (1, 0), 1, name="zero_stride_empty")
    if dtype.is_floating_point or dtype.is_complex:
        yield _s(make((6,), dtype), make((2,), ember.float64), (2,), (2,), name="float64_src")
    yield _s(make((3, 4), dtype), src((2,)), (2,), (1,), source="cols", name="view_offset")
    yield _s(make((3, 4), dtype), src((2,)), (2,), (1,), 0, source="cols",
             name="view_explicit_offset")
    yield _s(make((3, 4), dtype), src((2, 2)), (2, 2), (1, 4), 0, source="t",
             name="transposed")
    yield _s(make((3,), dtype), src((2,)), (2,), (1,), source="expand", name="expanded")
    yield _s(make((3,), dtype), src((2,)), (2,), (2,), 1, source="expand",
             name="expanded_offset")


def _as_strided_scatter_errors():
    x = ember.zeros(10)
    yield _err(x, (ember.ones(3), (2, 2), (1, 2)), RuntimeError,
               r"expected src to have a size equal to the slice of self. src size = \[3\], "
               r"slice size = \[2, 2\]")
    yield _err(x, (ember.ones(1), (2,), (1,)), RuntimeError, r"src size = \[1\], slice size")
    yield _err(x, (ember.ones(20), (20,), (1,)), RuntimeError,
               r"setStorage: sizes \[20\], strides \[1\], storage offset 0, and itemsize 4 "
               r"requiring a storage size of 80 are out of bounds for storage of size 40")
    yield _err(x, (ember.ones(3), (2,), (-1,)), RuntimeError,
               "Negative strides are not supported")
    yield _err(x, (ember.ones(2), (2,), (1,), -1), RuntimeError, "invalid storage offset -1")
    yield _err(x, (ember.ones(2), (2,), (1, 1)), RuntimeError,
               "mismatch in length of strides and shape")
    yield _err(x, (ember.ones(3), (3,), (0,), 1), RuntimeError,
               r"unsupported operation: more than one element of the written-to tensor refers "
               r"to a single memory location. Please clone\(\) the tensor before performing "
               r"the operation.")
    yield _err(x, (1.0, (2,), (1,)), TypeError,
               r"as_strided_scatter\(\): argument 'src' \(position 2\) must be Tensor, not "
               r"float")
    yield _err(x, (ember.ones(2), 2, (1,)), TypeError,
               r"as_strided_scatter\(\): argument 'size' \(position 3\) must be tuple of ints, "
               r"not int")
    yield _err(x, (ember.ones(2), (2,), (1,), 1.5), TypeError,
               r"argument 'storage_offset' \(position 5\) must be int, not float")


OPS = [
    # as_strided_ (the in-place form) is checked in tests/ops/test_as_strided.py: the samples
    # take views first, which the generic in-place test cannot
    OpInfo("as_strided", _as_strided_ref, _as_strided_samples, dtypes=ALL, gradgrad=True,
           grad_samples=lambda dtype, rg: _as_strided_samples(dtype, rg, grad=True),
           op=_on_view(lambda: ember.as_strided), torch_op=_torch("as_strided"),
           error_inputs=_as_strided_errors, skips=("inplace",)),
    # PyTorch 2.13's gradient for input fails its own gradcheck (it passes the gradient of the
    # overwritten elements, not of the others), and for overlapping windows every write gets
    # a gradient, not just the one that stays: the gradient samples differentiate src alone,
    # without overlaps; tests/ops/test_as_strided.py checks the rest
    OpInfo("as_strided_scatter", _as_strided_scatter_ref, _as_strided_scatter_samples,
           dtypes=ALL, gradgrad=True,
           grad_samples=lambda dtype, rg: _as_strided_scatter_samples(dtype, rg, grad=True),
           op=_on_view(lambda: ember.as_strided_scatter),
           torch_op=_torch("as_strided_scatter"), error_inputs=_as_strided_scatter_errors),
]
