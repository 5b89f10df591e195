"""OpInfo entries for ember/ops/slicing.py and ember/ops/reorder.py: narrow, select, unfold,
diagonal, diagonal_scatter, select_scatter, slice_scatter, rot90, diag, diag_embed, tril,
triu, flip, roll, repeat, repeat_interleave."""

import numpy as np

import ember
from tests.ops.opdb.core import ALL, FLOATS, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name="", **kwargs):
    return SampleInput(x, args, kwargs, name=name)


def _err(x, args, error, match, **kwargs):
    return ErrorInput(SampleInput(x, args, kwargs), error, match)


def _along(a, dim, index):
    return a[(slice(None),) * (dim % a.ndim) + (index,)]


# --- narrow, select ---------------------------------------------------------------------------

def _narrow_ref(a, dim, start, length):
    start = int(start) % a.shape[dim] if int(start) < 0 else int(start)
    return _along(a, dim, slice(start, start + length))


def _narrow_samples(dtype, rg):
    yield _s(make((5, 3), dtype, rg), 0, 1, 2, name="plain")
    yield _s(make((5, 3), dtype, rg), -1, -2, 2, name="negative")
    yield _s(make((5, 3), dtype, rg), 0, 5, 0, name="empty_at_end")
    yield _s(make((5, 3), dtype, rg), 1, ember.tensor(1), 2, name="tensor_start")
    yield _s(make((0, 3), dtype, rg), 1, 0, 3, name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), 1, 1, 4, name="noncontiguous")


def _narrow_errors():
    x = ember.zeros(5, 3)
    yield _err(x, (0, -6, 2), IndexError,
               r"start out of range \(expected to be in range of \[-5, 5\], but got -6\)")
    yield _err(x, (0, 4, 2), RuntimeError,
               r"start \(4\) \+ length \(2\) exceeds dimension size \(5\)\.")
    yield _err(x, (0, 1, -1), RuntimeError, r"narrow\(\): length must be non-negative\.")
    yield _err(x, (2, 1, 1), IndexError, r"range of \[-2, 1\], but got 2\)")
    yield _err(ember.tensor(1.), (0, 0, 1), RuntimeError,
               r"narrow\(\) cannot be applied to a 0-dim tensor\.")


def _select_samples(dtype, rg):
    yield _s(make((5, 3), dtype, rg), 0, 1, name="plain")
    yield _s(make((5, 3), dtype, rg), -1, -1, name="negative")
    yield _s(make((3,), dtype, rg), 0, 2, name="to_0dim")
    yield _s(make((2, 0), dtype, rg), 0, 1, name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), 1, 2, name="noncontiguous")


def _select_errors():
    x = ember.zeros(5, 3)
    yield _err(x, (0, 5), IndexError,
               r"select\(\): index 5 out of range for tensor of size \[5, 3\] at dimension 0")
    yield _err(x, (1, -4), IndexError, "index -4 out of range for tensor of size")
    yield _err(ember.tensor(1.), (0, 0), IndexError,
               r"select\(\) cannot be applied to a 0-dim tensor\.")


# --- unfold (Tensor.unfold) ---------------------------------------------------------------------

def _unfold_ref(a, dimension, size, step):
    if a.ndim == 0:
        return a.reshape(1)[:size]
    d = dimension % a.ndim
    windows = (a.shape[d] - size) // step + 1
    rows = np.arange(windows)[:, None] * step + np.arange(size)
    return np.moveaxis(np.take(a, rows, axis=d), d + 1, -1)


def _unfold_samples(dtype, rg):
    yield _s(make((3, 4), dtype, rg), 1, 2, 1, name="overlapping")
    yield _s(make((3, 4), dtype, rg), 1, 3, 2, name="step")
    yield _s(make((3, 4), dtype, rg), 0, 2, 1, name="dim0")
    yield _s(make((3, 4), dtype, rg), -1, 4, 1, name="whole_dim")
    yield _s(make((3, 4), dtype, rg), 1, 0, 1, name="size0")
    yield _s(make((3, 4), dtype, rg), 1, 2, 10, name="step_past_end")
    yield _s(make((2, 3, 4), dtype, rg), dimension=1, size=2, step=1, name="keywords")
    yield _s(make((5,), dtype, rg), 0, ember.tensor(2), 2, name="tensor_size")
    yield _s(make((), dtype, rg), 0, 1, 1, name="0dim")
    yield _s(make((), dtype, rg), -1, 0, 2, name="0dim_size0")
    yield _s(make((0, 3), dtype, rg), 0, 0, 1, name="empty_dim")
    yield _s(make((0, 3), dtype, rg), 1, 2, 1, name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), 1, 2, 2, name="noncontiguous")


def _unfold_backward_ref(g, input_sizes, dim, size, step):
    out = np.zeros(input_sizes, dtype=g.dtype)
    d = dim % len(input_sizes)
    view, parts = np.moveaxis(out, d, -1), np.moveaxis(g, d, -2)
    for w in range(parts.shape[-2]):
        view[..., w * step:w * step + size] += parts[..., w, :]
    return out


def _unfold_backward_samples(dtype, rg):
    # grad_in: input_sizes with dim holding the windows, and a last dim of size
    yield _s(make((3, 2), dtype, rg), (4,), 0, 2, 1, name="overlapping")
    yield _s(make((2, 3, 4), dtype, rg), (2, 10), -1, 4, 3, name="overlap_add")
    yield _s(make((2, 3, 2), dtype, rg), (2, 10), 1, 2, 3, name="gaps")
    yield _s(make((2, 3, 5), dtype, rg), (9, 3), 0, 5, 4, name="size_above_windows")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), (6,), 0, 4, 1,
             name="noncontiguous")


def _unfold_errors():
    x = ember.zeros(3, 4)
    yield _err(x, (1, 5, 1), RuntimeError,
               "maximum size for tensor at dimension 1 is 4 but size is 5")
    yield _err(x, (-1, 5, 0), RuntimeError,
               "maximum size for tensor at dimension 1 is 4 but size is 5")
    yield _err(x, (1, -1, 0), RuntimeError, "size is -1 but must be >= 0")
    yield _err(x, (1, 2, 0), RuntimeError, "step is 0 but must be > 0")
    yield _err(x, (1, 2, -1), RuntimeError, "step is -1 but must be > 0")
    yield _err(x, (2, 2, 1), IndexError, r"range of \[-2, 1\], but got 2\)")
    yield _err(ember.tensor(1.), (0, 2, 1), RuntimeError,
               "maximum size for tensor at dimension 0 is 1 but size is 2")
    yield _err(x, (1, 2.0, 1), TypeError,
               r"unfold\(\): argument 'size' \(position 2\) must be int, not float")
    yield _err(x, (1.0, 2, 1), TypeError,
               r"unfold\(\): argument 'dimension' \(position 1\) must be int, not float")
    yield _err(x, (1, True, 1), TypeError, "must be int, not bool")


# --- diagonals --------------------------------------------------------------------------------

def _diagonal_samples(dtype, rg):
    yield _s(make((3, 4), dtype, rg), name="plain")
    yield _s(make((3, 4), dtype, rg), 1, name="above")
    yield _s(make((3, 4), dtype, rg), -2, name="below")
    yield _s(make((3, 4), dtype, rg), 10, name="offset_past_end")
    yield _s(make((2, 3, 4), dtype, rg), 0, 0, 2, name="batched")
    yield _s(make((2, 3, 4), dtype, rg), offset=1, dim1=-1, dim2=0, name="keywords_negative")
    yield _s(make((0, 3), dtype, rg), name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), -1, name="noncontiguous")


def _diagonal_errors():
    x = ember.zeros(2, 3, 4)
    yield _err(x, (0, 1, 1), RuntimeError, "diagonal dimensions cannot be identical 1, 1")
    yield _err(x, (0, -1, 2), RuntimeError, "diagonal dimensions cannot be identical -1, 2")
    yield _err(ember.zeros(3), (), IndexError, r"range of \[-1, 0\], but got 1\)")


def _diagonal_positions(shape, offset, d1, d2):
    d1, d2 = d1 % len(shape), d2 % len(shape)
    n = min(shape[d1], shape[d2] - offset) if offset >= 0 else min(shape[d1] + offset, shape[d2])
    rows = np.arange(max(n, 0)) + max(-offset, 0)
    return d1, d2, rows, rows + offset


def _write_diagonal(out, src, offset, d1, d2):
    d1, d2, rows, cols = _diagonal_positions(out.shape, offset, d1, d2)
    moved = np.moveaxis(out, (d1, d2), (-2, -1))
    for k, (i, j) in enumerate(zip(rows, cols)):
        moved[..., i, j] = src[..., k]
    return out


def _diagonal_scatter_ref(a, src, offset=0, dim1=0, dim2=1):
    return _write_diagonal(a.copy(), src.astype(a.dtype), offset, dim1, dim2)


def _diagonal_scatter_samples(dtype, rg):
    for shape, kwargs in (((3, 4), {}), ((3, 4), {"offset": 1}), ((3, 4), {"offset": -2}),
                          ((2, 3, 4), {"dim1": 2, "dim2": 0, "offset": -1}),
                          ((0, 3), {}), ((3, 4), {"offset": 5})):
        x = make(shape, dtype, rg)
        src = make(tuple(x.diagonal(**kwargs).shape), dtype, rg)
        yield _s(x, src, **kwargs, name=f"{list(shape)}{kwargs}")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), make((4,), dtype, rg),
             name="noncontiguous")


def _diagonal_scatter_errors():
    x = ember.zeros(2, 3)
    yield _err(x, (ember.zeros(3),), RuntimeError,
               r"expected src to have a size equal to the slice of self\. src size = \[3\], "
               r"slice size = \[2\]")
    yield _err(x, (ember.zeros(2), 0, 1, 1), RuntimeError,
               "diagonal dimensions cannot be identical")


def _select_scatter_ref(a, src, dim, index):
    out = a.copy()
    out[(slice(None),) * (dim % a.ndim) + (index,)] = src.astype(a.dtype)
    return out


def _select_scatter_samples(dtype, rg):
    yield _s(make((5, 3), dtype, rg), make((3,), dtype, rg), 0, 1, name="plain")
    yield _s(make((5, 3), dtype, rg), make((5,), dtype, rg), -1, -1, name="negative")
    yield _s(make((3,), dtype, rg), make((), dtype, rg), 0, 2, name="to_0dim")
    yield _s(make((2, 0), dtype, rg), make((0,), dtype, rg), 0, 1, name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), make((4,), dtype, rg), 1, 2,
             name="noncontiguous")


def _scatter_errors(name, args):
    x = ember.zeros(5, 3)
    yield _err(x, (ember.zeros(2),) + args, RuntimeError,
               r"expected src to have a size equal to the slice of self\. src size = \[2\]")
    yield _err(ember.tensor(1.), (ember.tensor(1.),) + args, IndexError,
               rf"{name}\(\) cannot be applied to a 0-dim tensor\.")


def _slice_scatter_ref(a, src, dim=0, start=None, end=None, step=1):
    out = a.copy()
    out[(slice(None),) * (dim % a.ndim) + (slice(start, end, step),)] = src.astype(a.dtype)
    return out


def _slice_scatter_samples(dtype, rg):
    yield _s(make((5, 3), dtype, rg), make((2, 3), dtype, rg), 0, 1, 3, name="plain")
    yield _s(make((5, 3), dtype, rg), make((5, 2), dtype, rg), -1, None, None, 2,
             name="stepped")
    yield _s(make((5, 3), dtype, rg), make((3, 3), dtype, rg), start=-3, name="keywords")
    yield _s(make((2, 0), dtype, rg), make((2, 0), dtype, rg), 1, 0, 0, name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), make((4, 1), dtype, rg), 1, 2, 3,
             name="noncontiguous")


def _slice_scatter_errors():
    yield from _scatter_errors("slice", (0, 0, 2))
    yield _err(ember.zeros(5, 3), (ember.zeros(5, 3), 0, None, None, 0), RuntimeError,
               "slice step must be positive")


def _rot90_samples(dtype, rg):
    yield _s(make((3, 4), dtype, rg), name="default")
    for k in (-5, 0, 2, 3):
        yield _s(make((2, 3, 4), dtype, rg), k, (2, 0), name=f"k{k}")
    yield _s(make((0, 3), dtype, rg), k=1, dims=[1, 0], name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), 1, (-1, -2), name="noncontiguous")


def _rot90_errors():
    x = ember.zeros(2, 3)
    yield _err(x, (1, (0,)), RuntimeError, "expected total rotation dims == 2, but got dims = 1")
    yield _err(ember.zeros(3), (), RuntimeError, "expected total dims >= 2, but got total dims")
    yield _err(x, (1, (1, -1)), RuntimeError, "expected rotation dims to be different")


def _diag_samples(dtype, rg):
    yield _s(make((3,), dtype, rg), name="vector")
    yield _s(make((3,), dtype, rg), 1, name="vector_above")
    yield _s(make((3,), dtype, rg), diagonal=-2, name="vector_below")
    yield _s(make((3, 4), dtype, rg), name="matrix")
    yield _s(make((3, 4), dtype, rg), 1, name="matrix_above")
    yield _s(make((3, 4), dtype, rg), -5, name="matrix_offset_past_end")
    yield _s(make((0,), dtype, rg), 1, name="empty_vector")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), name="noncontiguous")


def _diag_errors():
    yield _err(ember.tensor(1.), (), RuntimeError, "diag\\(\\): Supports 1D or 2D tensors. Got 0D")
    yield _err(ember.zeros(2, 3, 4), (), RuntimeError, "Supports 1D or 2D tensors. Got 3D")


def _diag_embed_ref(a, offset=0, dim1=-2, dim2=-1):
    ndim = a.ndim + 1
    d1, d2 = dim1 % ndim, dim2 % ndim
    n = a.shape[-1] + abs(offset)
    batch = iter(a.shape[:-1])
    out = np.zeros([n if i in (d1, d2) else next(batch) for i in range(ndim)], a.dtype)
    return _write_diagonal(out, a, offset, d1, d2)


def _diag_embed_samples(dtype, rg):
    yield _s(make((3,), dtype, rg), name="vector")
    yield _s(make((2, 3), dtype, rg), 1, name="batched_above")
    yield _s(make((2, 3), dtype, rg), -1, 0, 2, name="dims")
    yield _s(make((2, 3), dtype, rg), offset=2, dim1=-1, dim2=0, name="keywords_reversed")
    yield _s(make((2, 0), dtype, rg), name="empty")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), name="noncontiguous")


def _diag_embed_errors():
    x = ember.zeros(2, 3)
    yield _err(x, (0, 0, 0), RuntimeError, "diagonal dimensions cannot be identical 0, 0")
    yield _err(x, (0, 0, 3), IndexError, r"range of \[-3, 2\], but got 3\)")
    yield _err(ember.tensor(1.), (), IndexError, r"range of \[-1, 0\], but got -2\)")


def _triangle_samples(dtype, rg):
    yield _s(make((4, 5), dtype, rg), name="plain")
    yield _s(make((4, 5), dtype, rg), 1, name="above")
    yield _s(make((4, 5), dtype, rg), diagonal=-2, name="below")
    yield _s(make((3, 3), dtype, rg), -10, name="past_end")
    yield _s(make((2, 3, 4), dtype, rg), 1, name="batched")
    yield _s(make((0, 3), dtype, rg), name="empty")
    yield _s(make((4, 6), dtype, rg, noncontiguous=True), name="noncontiguous")


def _triangle_errors(name):
    def errors():
        yield _err(ember.zeros(3), (), RuntimeError,
                   f"{name}: input tensor must have at least 2 dimensions")
    return errors


# --- flip, roll, repeat ---------------------------------------------------------------------------

def _flip_ref(a, dims):
    return a.copy() if a.ndim == 0 else np.flip(a, dims)


def _flip_samples(dtype, rg):
    yield _s(make((4, 3), dtype, rg), (0,), name="one_dim")
    yield _s(make((2, 3, 4), dtype, rg), (0, -1), name="tuple")
    yield _s(make((2, 3, 4), dtype, rg), [1], name="list")
    yield _s(make((4, 3), dtype, rg), (), name="none")
    yield _s(make((), dtype, rg), (0,), name="0dim")
    yield _s(make((0, 3), dtype, rg), (0, 1), name="empty")
    yield _s(make((4, 3), dtype, rg, noncontiguous=True), [1], name="noncontiguous")


def _flip_errors():
    x = ember.zeros(2, 3)
    yield _err(x, ([0, 0],), RuntimeError, "dim 0 appears multiple times in the list of dims")
    yield _err(x, ((2,),), IndexError, r"range of \[-2, 1\], but got 2\)")
    # only the method takes an int (``x.flip(0)``); the function needs a sequence
    yield _err(x, (0,), TypeError,
               r"flip\(\): argument 'dims' \(position 2\) must be tuple of ints, not int")
    yield _err(x, ([0.5],), TypeError, "must be tuple of ints, but found element of type float "
                                       "at pos 0")


def _roll_ref(a, shifts, dims=None):
    if dims is None or dims == ():
        return np.roll(a.reshape(-1), shifts).reshape(a.shape)
    return np.roll(a, shifts, dims)


def _roll_samples(dtype, rg):
    yield _s(make((4, 3), dtype, rg), 1, name="flat")
    yield _s(make((4, 3), dtype, rg), -7, 0, name="dim_negative_shift")
    yield _s(make((4, 3), dtype, rg), (1, 2), (0, 1), name="tuples")
    yield _s(make((2, 3, 4), dtype, rg), shifts=(5,), dims=(-1,), name="keywords")
    yield _s(make((4, 3), dtype, rg), 2, (), name="empty_dims_flat")
    yield _s(make((), dtype, rg), 1, name="0dim")
    yield _s(make((0, 3), dtype, rg), 1, 0, name="empty")
    yield _s(make((4, 3), dtype, rg, noncontiguous=True), 1, 1, name="noncontiguous")


def _roll_errors():
    x = ember.zeros(2, 3)
    yield _err(x, ((1, 2), 0), RuntimeError, "shifts and dimensions must align. shifts: 2, dims:1")
    yield _err(x, ((1, 2),), RuntimeError, "shifts and dimensions must align. shifts: 2, dims:0")
    yield _err(x, ((), ()), RuntimeError, "`shifts` required")
    yield _err(x, (1, 2), IndexError, r"range of \[-2, 1\], but got 2\)")
    yield _err(ember.tensor(1.), (1, 0), IndexError,
               "Dimension specified as 0 but tensor has no dimensions")


def _repeat_samples(dtype, rg):
    yield _s(make((2, 3), dtype, rg), (2, 1), name="same_ndim")
    yield _s(make((2, 3), dtype, rg), [3, 2, 2], name="more_dims")
    yield _s(make((2, 3), dtype, rg), (1, 1), name="ones")
    yield _s(make((2, 3), dtype, rg), (0, 2), name="zero")
    yield _s(make((), dtype, rg), (), name="0dim")
    yield _s(make((), dtype, rg), (3,), name="0dim_up")
    yield _s(make((0, 2), dtype, rg), (2, 2), name="empty")
    yield _s(make((3, 2), dtype, rg, noncontiguous=True), (2, 1, 2), name="noncontiguous")


def _repeat_errors():
    x = ember.zeros(2, 3, 4)
    yield _err(x, ((2, 1),), RuntimeError,
               "Number of dimensions of repeat dims can not be smaller than number of "
               "dimensions of tensor")
    yield _err(x, ((-1, 1, 1),), RuntimeError,
               r"Trying to create tensor with negative dimension -2: \[-2, 3, 4\]")


# --- repeat_interleave ----------------------------------------------------------------------------

def _repeat_interleave_ref(a, repeats=None, dim=None, output_size=None):
    if repeats is None:
        return np.repeat(np.arange(len(a)), a).astype(a.dtype)
    if isinstance(repeats, np.ndarray):
        repeats = repeats.reshape(-1)
    return np.repeat(a, repeats, axis=dim)


def _repeat_interleave_samples(dtype, rg):
    counts = ember.tensor([1, 0, 2])
    yield _s(make((2, 3), dtype, rg), 2, name="int_flat")
    yield _s(make((2, 3), dtype, rg), 2, 1, name="int_dim")
    yield _s(make((2, 3), dtype, rg), 3, dim=-2, output_size=6, name="int_keywords")
    yield _s(make((2, 3), dtype, rg), 0, 1, name="int_zero")
    yield _s(make((2, 3), dtype, rg), counts, 1, name="tensor")
    yield _s(make((2, 3), dtype, rg), counts.int(), -1, output_size=3, name="int32_output_size")
    yield _s(make((2, 3), dtype, rg), ember.tensor([2]), 0, name="broadcast_one")
    yield _s(make((2, 3), dtype, rg), ember.tensor(2), name="0dim_repeats_flat")
    yield _s(make((2, 3), dtype, rg), ember.tensor([1, 2, 0, 1, 1, 3]), name="tensor_flat")
    yield _s(make((), dtype, rg), 3, name="0dim")
    yield _s(make((), dtype, rg), ember.tensor([2]), name="0dim_tensor")
    yield _s(make((0, 3), dtype, rg), 2, 0, name="empty")
    yield _s(make((0, 3), dtype, rg), ember.tensor([], dtype=ember.int64), 0, name="empty_tensor")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), ember.tensor([1, 2, 0, 1]), 1,
             name="noncontiguous")
    if dtype in (ember.int64, ember.int32):         # repeat_interleave(repeats): the indices
        yield _s(ember.tensor([1, 0, 3, 2], dtype=dtype), name="indices")
        yield _s(ember.tensor([2, 1], dtype=dtype), output_size=3, name="indices_output_size")
        yield _s(ember.tensor([], dtype=dtype), name="indices_empty")


def _repeat_interleave_errors():
    x, t = ember.zeros(2, 3), ember.tensor
    yield _err(x, (t([[1, 2]]), 0), RuntimeError, "repeats must be 0-dim or 1-dim tensor")
    yield _err(x, (t([1, 2, 3]), 0), RuntimeError,
               r"repeats must have the same size as input along dim, but got repeats\.size\(0\) "
               r"= 3 and input\.size\(0\) = 2")
    yield _err(x, (t([1, 2]), -1), RuntimeError,
               r"repeats\.size\(0\) = 2 and input\.size\(-1\) = 3")
    yield _err(x, (t([1, 2]),), RuntimeError, r"repeats\.size\(0\) = 2 and input\.size\(0\) = 6")
    yield _err(x, (t([1., 2.]), 0), NotImplementedError,
               "\"repeat_interleave_cpu\" not implemented for 'Float'")
    yield _err(x, (t([1, 2], dtype=ember.int16), 0), NotImplementedError,
               "not implemented for 'Short'")
    yield _err(x, (t([-1, 2]), 0), RuntimeError, "repeats can not be negative")
    yield _err(x, (-1, 0), RuntimeError, "Repeats must be non-negative")
    yield _err(x, (2, 2), IndexError, r"range of \[-2, 1\], but got 2\)")
    yield _err(x, (t([1, 2]), -3), IndexError, r"range of \[-2, 1\], but got -3\)")
    yield _err(x, (2, 0), RuntimeError,
               "repeat_interleave: Invalid output_size, expected 4 but got 5", output_size=5)
    yield _err(x, (t([1, 2]), 0), RuntimeError, "allocated size does not match required size",
               output_size=4)
    yield _err(x, (t(2), 0), RuntimeError, "allocated size does not match required size",
               output_size=3)
    yield _err(x, (t([1, 2]), 0), RuntimeError,
               r"Trying to create tensor with negative dimension -1: \[-1\]", output_size=-1)
    yield _err(ember.tensor(3.), (2, 0), IndexError, r"range of \[-1, 0\], but got 1\)")
    yield _err(ember.tensor(3.), (t([2]), 0), IndexError,
               "Dimension specified as 0 but tensor has no dimensions")
    yield _err(x, (2.0, 0), TypeError, r"repeat_interleave\(\)")
    yield _err(x, (True,), TypeError, r"repeat_interleave\(\)")
    # the one-argument form
    yield _err(t(3), (), RuntimeError, "repeat_interleave only accept 1D vector as repeat")
    yield _err(t([[1, 2]]), (), RuntimeError, "repeat_interleave only accept 1D vector as repeat")
    yield _err(t([1., 2.]), (), NotImplementedError, "not implemented for 'Float'")
    yield _err(t([-1, 2]), (), RuntimeError, "repeats can not be negative")
    yield _err(t([3, 1]), (), RuntimeError, "allocated size does not match required size",
               output_size=5)
    yield _err(t([3, 1]), (), TypeError, r"repeat_interleave\(\)", dim=0)


OPS = [
    OpInfo("narrow", _narrow_ref, _narrow_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_narrow_errors),
    OpInfo("select", lambda a, d, i: np.take(a, i, axis=d), _select_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_select_errors),
    OpInfo("_unfold", _unfold_ref, _unfold_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_unfold_errors, torch_name="unfold"),
    OpInfo("_unfold_backward", _unfold_backward_ref, _unfold_backward_samples,
           dtypes=FLOATS, gradgrad=True,
           torch_op=lambda g, *args: __import__("torch").ops.aten.unfold_backward(g, *args)),
    OpInfo("diagonal", lambda a, offset=0, dim1=0, dim2=1: np.diagonal(a, offset, dim1, dim2),
           _diagonal_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_diagonal_errors),
    OpInfo("diagonal_scatter", _diagonal_scatter_ref, _diagonal_scatter_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_diagonal_scatter_errors),
    OpInfo("select_scatter", _select_scatter_ref, _select_scatter_samples, dtypes=ALL,
           gradgrad=True, error_inputs=lambda: _scatter_errors("select", (0, 0)),
           skips=("grad_complex",)),                # refused, as in PyTorch
    OpInfo("slice_scatter", _slice_scatter_ref, _slice_scatter_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_slice_scatter_errors, skips=("grad_complex",)),
    OpInfo("rot90", lambda a, k=1, dims=(0, 1): np.rot90(a, k, tuple(dims)), _rot90_samples,
           dtypes=ALL, gradgrad=True, error_inputs=_rot90_errors),
    OpInfo("diag", lambda a, diagonal=0: np.diag(a, diagonal), _diag_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_diag_errors),
    OpInfo("diag_embed", _diag_embed_ref, _diag_embed_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_diag_embed_errors),
    OpInfo("tril", lambda a, diagonal=0: np.tril(a, diagonal), _triangle_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_triangle_errors("tril")),
    OpInfo("triu", lambda a, diagonal=0: np.triu(a, diagonal), _triangle_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_triangle_errors("triu")),
    OpInfo("flip", _flip_ref, _flip_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_flip_errors),
    OpInfo("roll", _roll_ref, _roll_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_roll_errors),
    OpInfo("_repeat", np.tile, _repeat_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_repeat_errors, torch_name="repeat"),
    OpInfo("repeat_interleave", _repeat_interleave_ref, _repeat_interleave_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_repeat_interleave_errors),
]
