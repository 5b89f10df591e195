"""OpInfo entries for ember/ops/shape.py (views that reshape or reorder dims) and
ember/ops/conversion.py (copies, casts, fills, conj/real/imag)."""

import math

import numpy as np

import ember
from tests.ops.opdb.core import ALL, COMPLEX, FLOATS, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name="", **kwargs):
    return SampleInput(x, args, kwargs, name=name)


def _err(x, args, error, match, **kwargs):
    return ErrorInput(SampleInput(x, args, kwargs), error, match)


# --- view, reshape, flatten, unflatten ---------------------------------------------------------

def _view_samples(dtype, rg):
    yield _s(make((2, 3, 4), dtype, rg), (4, 6), name="plain")
    yield _s(make((2, 3, 4), dtype, rg), (-1, 4), name="inferred")
    yield _s(make((2, 3, 4), dtype, rg), [24], name="list")
    yield _s(make((), dtype, rg), (1, 1), name="0dim_up")
    yield _s(make((1, 1), dtype, rg), (), name="to_0dim")
    yield _s(make((0, 3), dtype, rg), (3, 0, 2), name="empty")
    yield _s(make((0, 3), dtype, rg), (-1, 3), name="empty_inferred")
    # non-contiguous in the last dim: splitting or merging the leading dims is still a view
    yield _s(make((4, 3), dtype, rg, noncontiguous=True), (2, 2, 3), name="noncontiguous")


def _view_errors():
    x = ember.zeros(2, 3)
    yield _err(x, ((-1, -1),), RuntimeError, "only one dimension can be inferred")
    yield _err(x, ((-2, 3),), RuntimeError,
               r"invalid shape dimension -2 at index 0 of shape \[-2, 3\]")
    yield _err(x, ((4, -1),), RuntimeError, r"shape '\[4, -1\]' is invalid for input of size 6")
    yield _err(x, ((7,),), RuntimeError, r"shape '\[7\]' is invalid for input of size 6")
    yield _err(ember.zeros(0, 3), ((-1, 0),), RuntimeError,
               r"cannot reshape tensor of 0 elements into shape \[-1, 0\] because the "
               r"unspecified dimension size -1 can be any value and is ambiguous")


def _view_only_errors():
    yield from _view_errors()
    yield _err(ember.zeros(2, 3).t(), ((6,),), RuntimeError,
               r"view size is not compatible with input tensor's size and stride.*"
               r"Use \.reshape\(\.\.\.\) instead\.")


def _reshape_samples(dtype, rg):
    yield from _view_samples(dtype, rg)
    yield _s(make((3, 4), dtype, rg).t(), (12,), name="transposed_copies")
    yield _s(make((2, 3), dtype, rg, noncontiguous=True), (-1,), name="noncontiguous_copies")


def _unsafe_view_torch(x, size):
    import torch
    return torch.ops.aten._unsafe_view(x, size)


def _flatten_ref(a, start_dim=0, end_dim=-1):
    if a.ndim == 0:
        return a.reshape(1)
    s, e = start_dim % a.ndim, end_dim % a.ndim
    return a.reshape(a.shape[:s] + (-1,) + a.shape[e + 1:]) if a.size else \
        a.reshape(a.shape[:s] + (int(np.prod(a.shape[s:e + 1])),) + a.shape[e + 1:])


def _flatten_samples(dtype, rg):
    yield _s(make((2, 3, 4), dtype, rg), name="all")
    yield _s(make((2, 3, 4), dtype, rg), 1, name="start")
    yield _s(make((2, 3, 4), dtype, rg), start_dim=0, end_dim=1, name="keywords")
    yield _s(make((2, 3, 4), dtype, rg), -2, -1, name="negative")
    yield _s(make((2, 3, 4), dtype, rg), 1, 1, name="single_dim")
    yield _s(make((), dtype, rg), name="0dim")
    yield _s(make((), dtype, rg), -1, 0, name="0dim_dims")
    yield _s(make((2, 0, 3), dtype, rg), 1, name="empty")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), name="noncontiguous")


def _flatten_errors():
    x = ember.zeros(2, 3, 4)
    yield _err(x, (2, 1), RuntimeError,
               "flatten\\(\\) has invalid args: start_dim cannot come after end_dim")
    yield _err(x, (3,), IndexError,
               r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)")
    yield _err(ember.tensor(1.), (1,), IndexError, "Dimension out of range")


def _unflatten_ref(a, dim, sizes):
    d = dim % a.ndim
    return a.reshape(a.shape[:d] + tuple(sizes) + a.shape[d + 1:])


def _unflatten_samples(dtype, rg):
    yield _s(make((2, 12), dtype, rg), 1, (3, 4), name="plain")
    yield _s(make((2, 12), dtype, rg), -1, (2, -1, 3), name="inferred")
    yield _s(make((6, 2), dtype, rg), 0, [6], name="list_one")
    yield _s(make((2, 0), dtype, rg), 1, (0, 5), name="empty")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), 0, (3, 1), name="noncontiguous")


def _unflatten_errors():
    x = ember.zeros(2, 3, 4)
    yield _err(x, (-1, (2, 3)), RuntimeError,
               r"unflatten: Provided sizes \[2, 3\] don't multiply up to the size of dim 2 "
               r"\(4\) in the input tensor")
    yield _err(x, (-1, (3, -1)), RuntimeError, r"Provided sizes \[3, -1\] don't multiply up")
    yield _err(x, (-1, (-1, -1)), RuntimeError, "only one dimension can be inferred")
    yield _err(x, (-1, ()), RuntimeError, "unflatten: sizes must be non-empty")
    yield _err(x, (3, (4,)), IndexError, "Dimension out of range")
    yield _err(ember.tensor(1.), (0, (1,)), RuntimeError,
               "unflatten got an unexpected error:\nDimension specified as 0 but tensor has no "
               "dimensions")


# --- expand, squeeze, unsqueeze ---------------------------------------------------------------

def _expand_ref(a, size):
    lead = len(size) - a.ndim
    target = [a.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size)]
    return np.broadcast_to(a, target)


def _expand_samples(dtype, rg):
    yield _s(make((3, 1), dtype, rg), (3, 4), name="plain")
    yield _s(make((3, 1), dtype, rg), (2, -1, 4), name="new_dim_and_keep")
    yield _s(make((), dtype, rg), (2, 3), name="0dim")
    yield _s(make((), dtype, rg), (), name="0dim_same")
    yield _s(make((1, 3), dtype, rg), (0, 3), name="to_empty")
    yield _s(make((0, 1), dtype, rg), (2, 0, 5), name="empty")
    yield _s(make((1, 3), dtype, rg, noncontiguous=True), (4, 3), name="noncontiguous")


def _expand_errors():
    x = ember.zeros(2, 3)
    yield _err(x, ((3,),), RuntimeError,
               r"expand\(ember\.FloatTensor\{\[2, 3\]\}, size=\[3\]\): the number of sizes "
               r"provided \(1\) must be greater or equal to the number of dimensions in the "
               r"tensor \(2\)")
    yield _err(x.double(), ((3,),), RuntimeError, r"expand\(ember\.DoubleTensor\{\[2, 3\]\}")
    yield _err(x, ((4, 3),), RuntimeError,
               r"The expanded size of the tensor \(4\) must match the existing size \(2\) at "
               r"non-singleton dimension 0\.  Target sizes: \[4, 3\]\.  Tensor sizes: \[2, 3\]")
    yield _err(x, ((-1, 2, 3),), RuntimeError,
               r"The expanded size of the tensor \(-1\) isn't allowed in a leading, "
               r"non-existing dimension 0")


def _squeeze_ref(a, dim=None):
    if dim is None:
        return np.squeeze(a)
    dims = dim if isinstance(dim, tuple) else (dim,)
    dims = tuple(d % max(a.ndim, 1) for d in dims if a.ndim and a.shape[d] == 1)
    return np.squeeze(a, axis=dims) if dims else a


def _squeeze_samples(dtype, rg):
    yield _s(make((1, 3, 1, 2), dtype, rg), name="all")
    yield _s(make((1, 3, 1, 2), dtype, rg), 2, name="one")
    yield _s(make((1, 3, 1, 2), dtype, rg), -4, name="negative")
    yield _s(make((1, 3, 1, 2), dtype, rg), 1, name="not_size_one")
    yield _s(make((1, 3, 1, 2), dtype, rg), (0, 1, -2), name="tuple")
    yield _s(make((1, 3, 1), dtype, rg), (), name="empty_tuple")
    yield _s(make((), dtype, rg), name="0dim")
    yield _s(make((), dtype, rg), 0, name="0dim_dim")
    yield _s(make((1, 0), dtype, rg), name="empty")
    yield _s(make((1, 4), dtype, rg, noncontiguous=True), 0, name="noncontiguous")


def _squeeze_errors():
    x = ember.zeros(1, 3, 1)
    yield _err(x, ((0, 0),), RuntimeError, "dim 0 appears multiple times in the list of dims")
    yield _err(x, (3,), IndexError,
               r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)")
    yield _err(x, ((0, 5),), IndexError, "Dimension out of range")


def _unsqueeze_samples(dtype, rg):
    for dim in (0, 2, -1, -3):
        yield _s(make((2, 3), dtype, rg), dim, name=f"dim{dim}")
    yield _s(make((), dtype, rg), 0, name="0dim")
    yield _s(make((), dtype, rg), -1, name="0dim_negative")
    yield _s(make((0, 2), dtype, rg), 1, name="empty")
    yield _s(make((2, 3), dtype, rg, noncontiguous=True), 1, name="noncontiguous")


def _unsqueeze_errors():
    x = ember.zeros(2, 3)
    yield _err(x, (3,), IndexError,
               r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)")
    yield _err(x, (-4,), IndexError, r"but got -4\)")
    yield _err(ember.tensor(1.), (2,), IndexError, r"range of \[-1, 0\], but got 2\)")


# --- permute, movedim, transpose, t -----------------------------------------------------------

def _permute_samples(dtype, rg):
    yield _s(make((2, 3, 4), dtype, rg), (2, 0, 1), name="tuple")
    yield _s(make((2, 3, 4), dtype, rg), [-1, 1, -3], name="negative_list")
    yield _s(make((), dtype, rg), (), name="0dim")
    yield _s(make((0, 3), dtype, rg), (1, 0), name="empty")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), (1, 0), name="noncontiguous")


def _permute_errors():
    x = ember.zeros(2, 3)
    yield _err(x, ((0,),), RuntimeError,
               r"permute\(sparse_coo\): number of dimensions in the tensor input does not match "
               r"the length of the desired ordering of dimensions i\.e\. input\.dim\(\) = 2 is "
               r"not equal to len\(dims\) = 1")
    yield _err(x, ((0, 0),), RuntimeError, r"permute\(\): duplicate dims are not allowed\.")
    yield _err(x, ((0, -2),), RuntimeError, "duplicate dims are not allowed")
    yield _err(x, ((0, 2),), IndexError, r"range of \[-2, 1\], but got 2\)")


def _movedim_samples(dtype, rg):
    yield _s(make((2, 3, 4), dtype, rg), 0, 2, name="int")
    yield _s(make((2, 3, 4), dtype, rg), -1, 0, name="negative")
    yield _s(make((2, 3, 4), dtype, rg), (0, 1), (2, 0), name="tuples")
    yield _s(make((2, 3, 4), dtype, rg), [], [], name="none")
    yield _s(make((), dtype, rg), 0, -1, name="0dim")
    yield _s(make((0, 3), dtype, rg), 0, 1, name="empty")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), 1, 0, name="noncontiguous")


def _movedim_errors():
    x = ember.zeros(2, 3, 4)
    yield _err(x, ((0, 1), (2,)), RuntimeError,
               r"movedim: Invalid source or destination dims: source \(\[0, 1\] dims\) should "
               r"contain the same number of dims as destination \(\[2\] dims\)")
    yield _err(x, ((0, 0), (2, 1)), RuntimeError, r"movedim: repeated dim in `source` \(\[0, 0\]\)")
    yield _err(x, ((-1, 0), (0, -3)), RuntimeError,
               r"movedim: repeated dim in `destination` \(\[0, -3\]\)")
    yield _err(x, (3, 0), IndexError, "Dimension out of range")


def _transpose_ref(a, d0, d1):
    return a if a.ndim == 0 else np.swapaxes(a, d0, d1)


def _transpose_samples(dtype, rg):
    yield _s(make((2, 3, 4), dtype, rg), 0, 2, name="plain")
    yield _s(make((2, 3, 4), dtype, rg), -1, 1, name="negative")
    yield _s(make((2, 3), dtype, rg), 1, 1, name="same")
    yield _s(make((), dtype, rg), 0, -1, name="0dim")
    yield _s(make((0, 3), dtype, rg), 0, 1, name="empty")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), 0, 1, name="noncontiguous")


def _transpose_errors():
    yield _err(ember.zeros(2, 3), (0, 2), IndexError, r"range of \[-2, 1\], but got 2\)")
    yield _err(ember.tensor(1.), (0, 1), IndexError, r"range of \[-1, 0\], but got 1\)")


def _t_samples(dtype, rg):
    for shape in ((2, 3), (3,), (), (0, 2)):
        yield _s(make(shape, dtype, rg), name=f"shape{list(shape)}")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), name="noncontiguous")


def _t_errors():
    yield _err(ember.zeros(2, 3, 4), (), RuntimeError,
               r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D")


# --- conversion.py ------------------------------------------------------------------------------

def _to_copy_samples(dtype, rg):
    x = make((2, 3), dtype, rg)
    for target in (None, ember.float64, ember.float32, ember.int32, ember.bool,
                   ember.bfloat16, ember.complex64):
        if dtype.is_complex and target is not None and not target.is_complex:
            continue                    # complex -> real warns; tested in test_shape_methods
        yield _s(x, target, None, name=f"to_{target}")
    yield _s(make((), dtype, rg), ember.complex128 if dtype.is_complex else ember.float64, None,
             name="0dim")
    yield _s(make((0, 2), dtype, rg), ember.complex64 if dtype.is_complex else ember.int64, None,
             name="empty")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), None, None, name="noncontiguous")
    if not dtype.is_complex:
        # float8_e4m3fn has no infinity: out-of-range values saturate to +-448
        values = (1, 200, 255, 0) if dtype is ember.uint8 else \
            (1, -3, 500, 1000, 0) if not dtype.is_floating_point else \
            (1.5, 500.0, -1e4, math.inf, -math.inf, math.nan, 464.0)
        for target in (ember.float8_e4m3fn, ember.float8_e5m2):
            yield _s(ember.tensor(values).to(dtype), target, None, name=f"to_{target}")


def _to_copy_grad_samples(dtype, rg):
    for target in (None, ember.float64, ember.complex128):
        yield _s(make((2, 3), dtype, rg), target, None, name=f"to_{target}")


def _to_copy_ref(a, dtype, device):
    if dtype is None:
        return a.copy()
    if dtype is ember.float8_e4m3fn:
        a = np.clip(a.astype(np.float64), -448, 448)
    if dtype.is_floating_point and dtype.itemsize < 4:
        return a.astype(dtype.np).astype(np.float32)
    return a.astype(dtype.np)


def _clone_samples(dtype, rg):
    for shape in ((2, 3), (), (0, 3)):
        yield _s(make(shape, dtype, rg), name=f"shape{list(shape)}")
    yield _s(make((3, 4), dtype, rg), memory_format=None, name="memory_format")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), name="noncontiguous")


def _copy_samples(dtype, rg):
    yield _s(make((2, 3), dtype), make((2, 3), dtype, rg), name="same_shape")
    yield _s(make((2, 3), dtype), make((3,), dtype, rg), name="broadcast")
    yield _s(make((2, 3), dtype), make((), dtype, rg), name="0dim_src")
    yield _s(make((), dtype), make((), dtype, rg), name="0dim")
    yield _s(make((0, 3), dtype), make((3,), dtype, rg), name="empty")
    yield _s(make((3, 4), dtype, noncontiguous=True),
             make((3, 4), dtype, rg, noncontiguous=True), name="noncontiguous")
    other = ember.float64 if dtype is not ember.float64 else ember.float32
    yield _s(make((2, 3), dtype), make((2, 3), other), name="cast")


def _copy_ref(dst, src, non_blocking=False):
    return np.broadcast_to(src, dst.shape).astype(dst.dtype)


def _copy_errors():
    yield _err(ember.zeros(2, 3), (ember.ones(2, 2),), RuntimeError,
               r"The size of tensor a \(3\) must match the size of tensor b \(2\) at "
               r"non-singleton dimension 1")


def _fill_samples(dtype, rg):
    value = True if dtype is ember.bool else 2
    yield _s(make((2, 3), dtype), value, name="int")
    yield _s(make((), dtype), value, name="0dim")
    yield _s(make((0, 3), dtype), value, name="empty")
    yield _s(make((3, 4), dtype, noncontiguous=True), value, name="noncontiguous")
    if dtype.is_floating_point or dtype.is_complex:
        yield _s(make((2, 3), dtype), 0.5, name="float")
        yield _s(make((2, 3), dtype), make((), dtype, rg), name="tensor_value")
        yield _s(make((2, 3), dtype, rg), make((), dtype, rg), name="both_grad")


def _fill_ref(a, value):
    return np.full(a.shape, value, dtype=a.dtype)


def _fill_errors():
    yield _err(ember.zeros(3), (ember.ones(2),), RuntimeError,
               "fill_ only supports 0-dimension value tensor but got tensor with 1 dimensions.")
    e4m3 = ember.zeros(3, dtype=ember.float8_e4m3fn)
    for value in (449.0, math.inf):             # float8_e4m3fn has no infinity
        yield _err(e4m3, (value,), RuntimeError,
                   "value cannot be converted to type c10::Float8_e4m3fn without overflow")
    yield _err(ember.zeros(3, dtype=ember.float8_e5m2), (6e4,), RuntimeError,
               "value cannot be converted to type c10::Float8_e5m2 without overflow")


def _unary(dtype, rg):
    for shape in ((2, 3), (), (0, 3)):
        yield _s(make(shape, dtype, rg), name=f"shape{list(shape)}")
    yield _s(make((3, 4), dtype, rg, noncontiguous=True), name="noncontiguous")


def _complex_grad_samples(dtype, rg):
    yield from _unary(ember.complex128, rg)
    yield from _unary(ember.float64, rg)


def _real_dtype(dtype, sample):
    return dtype.to_real() if dtype.is_complex else dtype


def _imag_errors():
    yield _err(ember.zeros(3), (), RuntimeError,
               "imag is not implemented for tensors with non-complex dtypes.")


_SAME_SIZE_INT = {1: ember.int8, 2: ember.int16, 4: ember.int32, 8: ember.int64, 16: ember.int64}


def _view_dtype_samples(dtype, requires_grad):
    # the same element size, a smaller one, and (where one exists) a larger one
    x = make((3, 4), dtype, requires_grad)
    yield SampleInput(x, (_SAME_SIZE_INT[dtype.itemsize],), name="same_size")
    yield SampleInput(make((3, 4), dtype, requires_grad), (ember.uint8,), name="to_bytes")
    if dtype.itemsize <= 4:
        wider = {1: ember.int16, 2: ember.int32, 4: ember.int64}[dtype.itemsize]
        yield SampleInput(make((2, 6), dtype, requires_grad), (wider,), name="wider")
    yield SampleInput(make((), dtype, requires_grad), (_SAME_SIZE_INT[dtype.itemsize],),
                      name="0d")


def _view_dtype_reference(x, dtype):
    return np.array(x, order="C").view(dtype.np)


OPS = [
    # Tensor.view(dtype): bit views of the dtypes the NumPy reference holds exactly
    OpInfo("_view_dtype", _view_dtype_reference, _view_dtype_samples,
           dtypes=(ember.float32, ember.float64, ember.int32, ember.int64, ember.uint8,
                   ember.bool, ember.complex64),
           result_dtype=lambda dtype, sample: sample.args[0], grad=False,
           torch_op=lambda x, dtype: x.view(dtype)),
    OpInfo("view", np.reshape, _view_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_view_only_errors),
    OpInfo("reshape", np.reshape, _reshape_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_view_errors),
    OpInfo("_unsafe_view", np.reshape, _view_samples, dtypes=ALL, gradgrad=True,
           torch_op=_unsafe_view_torch, error_inputs=_view_only_errors),
    OpInfo("flatten", _flatten_ref, _flatten_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_flatten_errors),
    OpInfo("unflatten", _unflatten_ref, _unflatten_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_unflatten_errors),
    OpInfo("expand", _expand_ref, _expand_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_expand_errors),
    OpInfo("squeeze", _squeeze_ref, _squeeze_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_squeeze_errors),
    OpInfo("unsqueeze", np.expand_dims, _unsqueeze_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_unsqueeze_errors),
    OpInfo("permute", np.transpose, _permute_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_permute_errors),
    OpInfo("movedim", lambda a, s, d: np.moveaxis(a, s, d) if a.ndim else a, _movedim_samples,
           dtypes=ALL, gradgrad=True, error_inputs=_movedim_errors),
    OpInfo("transpose", _transpose_ref, _transpose_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_transpose_errors),
    OpInfo("t", np.transpose, _t_samples, dtypes=ALL, gradgrad=True, error_inputs=_t_errors),
    OpInfo("_to_copy", _to_copy_ref, _to_copy_samples, dtypes=ALL,
           result_dtype=lambda d, s: s.args[0] or d if s else d,
           grad_samples=_to_copy_grad_samples, gradgrad=True,
           torch_op=lambda x, dtype, device: x.to(dtype=dtype, copy=True)),
    OpInfo("clone", lambda a, memory_format=None: a.copy(), _clone_samples, dtypes=ALL,
           gradgrad=True),
    OpInfo("copy_", _copy_ref, _copy_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_copy_errors),
    OpInfo("fill", _fill_ref, _fill_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_fill_errors),
    OpInfo("fill_", _fill_ref, _fill_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_fill_errors, torch_name="fill"),     # the out-of-place form
    OpInfo("conj", np.conj, _unary, dtypes=ALL, grad_samples=_complex_grad_samples,
           gradgrad=True),
    OpInfo("conj_physical", np.conj, _unary, dtypes=ALL,
           grad_samples=_complex_grad_samples, gradgrad=True),
    OpInfo("real", np.real, _unary, dtypes=ALL, result_dtype=_real_dtype,
           grad_samples=_complex_grad_samples, gradgrad=True),
    # the lazily negated view conj().imag is built on (NOTE [Conjugate views])
    OpInfo("_neg_view", np.negative, _unary, dtypes=FLOATS + COMPLEX,
           grad_samples=_complex_grad_samples, gradgrad=True),
    # gradients of complex-only ops are checked in test_shape_methods.py
    OpInfo("imag", np.imag, _unary, dtypes=COMPLEX, result_dtype=_real_dtype,
           error_inputs=_imag_errors),
]
