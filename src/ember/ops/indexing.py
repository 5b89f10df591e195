"""Indexing ops: advanced (integer and mask) indexing, index_put, the mask ops masked_fill,
masked_select, masked_scatter, nonzero and argwhere, fill_diagonal_, and unravel_index (the
basic-index views live in ops/subscript_views.py).

``Tensor.__getitem__`` and ``Tensor.__setitem__`` (ops/_subscript.py) split a subscript as
PyTorch does: ints, slices and None first, as one view of the input (the ``_getitem_*``
ops); then integer and mask tensors, as advanced indices on that view (``_index`` reads,
``index_put`` writes). Keys and index arrays travel as op parameters, not tensor inputs.
"""

import math
import warnings
from collections.abc import Sequence

import numpy as np

from ember import _dtype as D
from ember._memory_format import _order_strides, _stride_order, lay_out, preserved, restrided
from ember._tensor import Tensor
from ember._warn import outside_level
from ember.backend import combine_at, device_scalar, indexing_checks_bounds
from ember.ops._along import check_range
from ember.ops._index_checks import (check_expands, check_masked_scatter, check_user_indices,
                                     dim_out_of_range, type_string)
from ember.ops._overlap import PARTIAL_OVERLAP, _overlap, check_no_overlap
from ember.ops._barebones import WIDE_UNSIGNED_NP, refusal
from ember.ops._promotion import refuse_kernel
from ember.ops._registry import _is_tensor, op
from ember.ops._scalars import checked_scalar as checked_number
# basic indexing lives in ops/subscript_views.py; its names are also found here
from ember.ops.subscript_views import (_FULL, _explicit, _getitem_alias,  # noqa: F401
                                       _getitem_select, _getitem_slice, _getitem_unsqueeze,
                                       _slice_backward, alias_of, basic_view)

# --- advanced indices -------------------------------------------------------------------------

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


class SubscriptIndices(tuple):
    """The advanced indices of a subscript (ops/_subscript.py): None skips a dim and an entry
    may be an index array. The ``indices`` users give ``index_put`` are Tensors only."""

    __slots__ = ()


class BatchIndices(SubscriptIndices):
    """Subscript indices with vmap's batch dim in front (None there): PyTorch's batching rule
    indexes that dim too, so a mask is never the sole index (no masked_fill_ shortcut)."""

    __slots__ = ()


def advanced_indices(xp, x, indices, tensors_only=False, bounds=True):
    """Index arrays for the leading dims of ``x`` (None where a dim is not indexed).

    Masks become their nonzero coordinates, negative indices wrap, and everything is checked
    as PyTorch checks it; arrays are moved to ``x``'s device. ``tensors_only``: every entry
    must be a Tensor (``index_put`` called by users). ``bounds=False`` leaves the bounds
    (and negative indices) to the caller: see ``_index``.
    """
    if type(indices) is tuple and not indices:
        return indices
    if isinstance(indices, Tensor) or not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' (position 2) must be tuple of "
                        f"Tensors, not {type(indices).__name__}")
    if tensors_only:
        check_user_indices(x, indices)
    out = []
    for entry in indices:
        if entry is None:
            out.append(None)
            continue
        arr = entry._data if isinstance(entry, Tensor) else entry
        if type(arr) is not type(x):
            if type(x) is np.ndarray:
                raise RuntimeError("indices should be either on cpu or on the same device as "
                                   "the indexed tensor (cpu)")
            arr = xp.asarray(arr)
        if arr.dtype == np.bool_ or arr.dtype == np.uint8:
            out.extend(_mask_coordinates(xp, x, arr, len(out), tensors_only))
        elif arr.dtype in _INDEX_DTYPES:
            out.append(arr)
        else:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if len(out) > x.ndim:
        if tensors_only:    # (a user's entries were counted: a mask's dims, after broadcasting)
            _broadcast([a for a in out if a is not None])
            raise dim_out_of_range(x.ndim, x.ndim)
        raise IndexError(f"too many indices for tensor of dimension {x.ndim} (got {len(out)})")
    return _checked_bounds(xp, x, out) if bounds else out


def _mask_coordinates(xp, x, mask, dim, user_call=False):
    if mask.dtype == np.uint8:
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                      "torch.bool instead.", UserWarning, stacklevel=outside_level())
        mask = mask.astype(np.bool_)
    if mask.ndim == 0:
        raise IndexError("a 0-dim mask can only be used directly in a subscript (x[True])")
    if dim + mask.ndim > x.ndim and not user_call:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim} "
                         f"(got {dim + mask.ndim})")
    for j, size in enumerate(mask.shape):
        if dim + j >= x.ndim:           # (PyTorch's size() of the dim past the last)
            raise dim_out_of_range(x.ndim, dim + j)
        if size != x.shape[dim + j]:
            raise IndexError(f"The shape of the mask {list(mask.shape)} at index {j} does not "
                             f"match the shape of the indexed tensor {list(x.shape)} at index "
                             f"{dim + j}")
    return xp.nonzero(mask)


def _checked_bounds(xp, x, out, ranges=True):
    """``out`` checked to broadcast and to index no dim of size 0, and (``ranges``) to be in
    range, in PyTorch's words; the entries of an empty result are not checked."""
    out = list(out)
    arrays = [(d, a) for d, a in enumerate(out) if a is not None]
    if not arrays:
        return tuple(out)
    shape = arrays[0][1].shape if len(arrays) == 1 else _broadcast([a for _, a in arrays])
    count = math.prod(shape)
    empty = count * math.prod(
        s for d, s in enumerate(x.shape) if d >= len(out) or out[d] is None) == 0
    for nr, (d, a) in enumerate(arrays):
        size = x.shape[d]
        if not size and count:          # (even when another dim empties the result)
            raise IndexError("index is out of bounds for dimension with size 0")
        if empty:                       # PyTorch only checks the elements it reads
            if size:
                out[d] = xp.clip(a, -size, size - 1)
        elif ranges:                    # (negative entries count from the end, as in NumPy)
            check_range(a, -size, size, lambda bad, nr=nr, size=size: IndexError(
                f"index {bad} is out of bounds for dimension {nr} with size {size}"))
    return tuple(out)


def _broadcast(arrays):
    """The shape index ``arrays`` broadcast to, or PyTorch's IndexError."""
    try:
        return arrays[0].shape if len(arrays) == 1 else \
            np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(str(list(a.shape)) for a in arrays)
                         ) from None


def _numpy_key(idx):
    return tuple(_FULL if a is None else a for a in idx)


def index_shape(shape, idx):
    """The shape of ``x[idx]`` for normalized advanced indices (NumPy's placement rule)."""
    dims = [d for d, a in enumerate(idx) if a is not None]
    if not dims:
        return tuple(shape)
    bshape = idx[dims[0]].shape if len(dims) == 1 else \
        np.broadcast_shapes(*(idx[d].shape for d in dims))
    if dims == list(range(dims[0], dims[-1] + 1)):
        return tuple(shape[:dims[0]]) + bshape + tuple(shape[dims[-1] + 1:])
    return bshape + tuple(s for d, s in enumerate(shape) if d >= len(idx) or idx[d] is None)


@op("_index(input, indices)", method=False, saves_inputs=False, grad_fn_name="IndexBackward0")
def _index(xp, x, indices):
    """``input[indices]`` for integer or mask index tensors (None skips a dim): a copy."""
    # NumPy's indexing checks bounds itself (in its own words, translated on failure); CuPy's
    # wraps out-of-range entries around, so a GPU's are checked first
    idx = advanced_indices(xp, x, indices, bounds=not indexing_checks_bounds(xp))
    if all(a is None for a in idx):
        return x.copy()
    try:
        out = x[_numpy_key(idx)]
    except IndexError:
        out = x[_numpy_key(_checked_bounds(xp, x, idx))]
    if out.ndim < 2:
        return out
    if _row_major_operands(x, idx, out.shape):
        return xp.ascontiguousarray(out)
    order = _index_order(x, idx, out.shape)
    if out.strides == _order_strides(out.shape, order, out.itemsize):
        return out
    return lay_out(xp, out, order)


def _row_major_operands(x, idx, shape):
    """Whether ``x``'s dims are in row-major order (strides falling, as after an int or a
    slice of a contiguous tensor) and its indices row-major, with no dims of size 1 to blur
    their strides (nor has the result): then the result is row-major (the common case,
    which ``_index_order`` would find more slowly)."""
    if 1 in shape or 1 in x.shape:
        return False
    strides = x.strides
    if not (x.flags.c_contiguous or strides[-1] > 0 and all(
            a > b for a, b in zip(strides, strides[1:]))):
        return False
    # (a 1-D index's strides, non-zero along one dim alone, never order two dims)
    return all(a is None or a.ndim < 2 or a.flags.c_contiguous for a in idx)


def _index_order(x, idx, shape):
    """The dim order (outermost first) of PyTorch's ``x[idx]``, of ``shape``: its
    TensorIterator sorts the result's dims by the strides of ``x`` (0 on the indexed dims),
    then of each index (0 on the others), so a row-major input gives a row-major result
    whatever NumPy's placement (``x[:, mask].view(-1)`` works) and other layouts are kept."""
    dims = [d for d, a in enumerate(idx) if a is not None]
    bshape = np.broadcast_shapes(*(idx[d].shape for d in dims))
    kept = [d for d in range(x.ndim) if d >= len(idx) or idx[d] is None]
    n = len(bshape)
    if dims == list(range(dims[0], dims[-1] + 1)):      # in place of the indexed dims
        before, after = kept[:dims[0]], kept[dims[0]:]
    else:                                               # in front
        before, after = [], kept
    x_strides = (*(x.strides[d] for d in before), *[0] * n, *(x.strides[d] for d in after))
    index_strides = [_viewed_strides(idx[d], bshape, shape, len(before)) for d in dims]
    return _stride_order(shape, x_strides, *index_strides)


def _viewed_strides(a, bshape, shape, lead):
    """The strides of index ``a``, broadcast to ``bshape`` and viewed with dims of size 1
    around it, in the result of ``shape`` (``lead`` dims before ``bshape``'s) as PyTorch's
    iterator sees it: 0 along the dims it is broadcast in; a dim of size 1 in the result
    keeps the stride the view gives it."""
    strides = _broadcast_strides(a, bshape)
    trail = len(shape) - lead - len(bshape)
    if not bshape:
        outer = inner = 0
    else:
        outer = strides[0] * bshape[0] if strides[0] else a.itemsize
        inner = strides[-1] if strides[-1] else a.itemsize
    return (*(outer if n == 1 else 0 for n in shape[:lead]), *strides,
            *(inner if n == 1 else 0 for n in shape[len(shape) - trail:]))


def _broadcast_strides(a, shape):
    """The strides of ``a`` broadcast to ``shape`` (0 along the dims it is broadcast in)."""
    lead = len(shape) - a.ndim
    return tuple(0 if d < lead or a.shape[d - lead] != n else a.strides[d - lead]
                 for d, n in enumerate(shape))


_index.versioned_params = (0,)         # PyTorch's node saves the indices


@_index.derivative
def _(grad, x, indices):
    from ember._creation import zeros
    return index_put(zeros(x.shape, dtype=grad.dtype, device=grad.device),
                     _BackwardIndices(indices), grad, accumulate=True)


class _BackwardIndices(SubscriptIndices):
    """The indices of an advanced read's backward, which PyTorch writes with _index_put_impl_
    (its node: IndexPutImplBackward0)."""

    __slots__ = ()


_FILL_REFUSED = WIDE_UNSIGNED_NP | {d.np for d in D.FLOAT8}


# --- index_put --------------------------------------------------------------------------------

def _put(xp, dst, values, indices, accumulate, inplace=False):
    # PyTorch checks the indices' types, number and shapes, the values' shape, then the
    # dtypes, then the bounds
    user_call = not isinstance(indices, SubscriptIndices)
    mask = None if accumulate or values.size != 1 or type(indices) is BatchIndices else \
        _sole_mask(dst, indices, user_call)
    if mask is not None:                # PyTorch writes one value through masked_fill_, which
        if dst.dtype in _FILL_REFUSED:  # refuses float8 and uint16/32/64, then converts it
            raise refusal("masked_fill", D.FROM_NUMPY[dst.dtype])
        values = _fill_value(xp, dst, mask, values.reshape(()), refuse=False)
    elif inplace and values.size == 1 and values.base is not None and _overlap(dst, values):
        raise RuntimeError(PARTIAL_OVERLAP)     # (see _no_overlap)
    idx = advanced_indices(xp, dst, indices, user_call, bounds=False)
    idx = _checked_bounds(xp, dst, idx, ranges=False)
    region = index_shape(dst.shape, idx)
    _check_values_shape(values, region, any(a is not None for a in idx), dst.dtype)
    if values.dtype != dst.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{D.FROM_NUMPY[dst.dtype]._torch_name} for the destination and "
                           f"{D.FROM_NUMPY[values.dtype]._torch_name} for the source.")
    if dst.dtype in WIDE_UNSIGNED_NP and any(a is not None for a in idx):  # (_barebones.py)
        raise refusal("index_put" if mask is None else "masked_fill", D.FROM_NUMPY[dst.dtype])
    idx = _checked_bounds(xp, dst, idx)
    key = _numpy_key(idx)
    if accumulate:
        combine_at(xp, np.add, dst, key, values)
    else:
        dst[key] = values


def _sole_mask(dst, indices, user_call):
    """The mask of ``indices``, shaped to broadcast against ``dst``, when it is their only
    index (the others None) and matches ``dst``'s dims; else None."""
    if not isinstance(indices, (tuple, list)):
        return None
    mask, lead, dim = None, 0, 0
    for entry in indices:
        if entry is None:
            dim += 1
            continue
        if user_call and not isinstance(entry, Tensor):
            return None
        arr = entry._data if isinstance(entry, Tensor) else entry
        if mask is not None or type(arr) is not type(dst) or arr.ndim == 0 \
                or arr.dtype not in _MASK_DTYPES or arr.shape != dst.shape[dim:dim + arr.ndim]:
            return None
        mask, lead = arr, dim
        dim += arr.ndim
    if mask is None:
        return None
    return mask.reshape((1,) * lead + mask.shape + (1,) * (dst.ndim - lead - mask.ndim))


_MASK_DTYPES = (np.dtype(np.bool_), np.dtype(np.uint8))


def _check_values_shape(values, region, advanced, dtype):
    if values.ndim <= len(region):
        lead = len(region) - values.ndim
        if all(v == r or v == 1 for v, r in zip(values.shape, region[lead:])):
            return
    if advanced:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot "
                           f"be broadcast to indexing result of shape {list(region)}")
    if values.ndim > len(region):
        raise RuntimeError(f"expand({type_string(D.FROM_NUMPY[dtype])}{{{list(values.shape)}}}"
                           f", size={list(region)}): the number of sizes provided "
                           f"({len(region)}) must be greater or equal to the number of "
                           f"dimensions in the tensor ({values.ndim})")
    lead = len(region) - values.ndim
    for i in range(values.ndim - 1, -1, -1):
        if values.shape[i] not in (1, region[lead + i]):
            raise RuntimeError(f"The expanded size of the tensor ({region[lead + i]}) must "
                               f"match the existing size ({values.shape[i]}) at "
                               f"non-singleton dimension {lead + i}.  Target sizes: "
                               f"{list(region)}.  Tensor sizes: {list(values.shape)}")


@op("index_put(input, indices, values, accumulate=False)", inputs=("input", "values"),
    inplace=True, saves_inputs=False, scalars=False)
def index_put(xp, x, values, indices, accumulate):
    """``input`` with ``values`` written (or added, if ``accumulate``) at ``indices``."""
    out = preserved(xp, x)
    _put(xp, out, values, indices, accumulate)
    return out


index_put.versioned_params = (0,)      # PyTorch's node saves the indices


def _no_overlap(dst, inputs):
    """PyTorch refuses values sharing any memory with the tensor written (``x[i] = x``),
    except one value written through masked_fill_, which reads it first: ``_put`` checks
    single values, after seeing whether they take that way."""
    if inputs[0]._data.size != 1:
        check_no_overlap(dst, inputs)


index_put.overlap_check = _no_overlap


@index_put.inplace_variant
def _(xp, dst, x, values, indices, accumulate):
    _put(xp, dst, values, indices, accumulate, inplace=True)


@index_put.named_by
def _(flat, params, out):
    return "IndexPutImplBackward0" if type(params[0]) is _BackwardIndices else \
        "IndexPutBackward0"


@index_put.derivative
def _(grad, x, values, indices, accumulate):
    from ember._creation import zeros
    if accumulate:
        grad_input = grad
    else:
        # zeros shaped like ``values``, as PyTorch's: a 0-d one would take the masked_fill_
        # shortcut, which refuses uint8 masks
        grad_input = index_put(grad, indices, zeros(values.shape, dtype=grad.dtype,
                                                    device=grad.device))
    return grad_input, _index(grad, indices)


# --- masked_fill ------------------------------------------------------------------------------

# C++ type names PyTorch uses in some messages
CTYPE = {D.float32: "float", D.float64: "double", D.float16: "c10::Half",
         D.bfloat16: "c10::BFloat16", D.int64: "long int", D.int32: "int", D.int16: "short int",
         D.int8: "signed char", D.uint8: "unsigned char", D.bool_: "bool",
         D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>",
         D.uint16: "short unsigned int", D.uint32: "unsigned int", D.uint64: "long unsigned int"}
# ... and the names its scalar conversion checks use
_SCALAR_CTYPE = {D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t", D.int32: "int",
                 D.int64: "int64_t", D.float32: "float", D.uint16: "uint16_t",
                 D.uint32: "uint32_t", D.uint64: "uint64_t"}


_INT_RANGE = {d: (int(np.iinfo(d.np).min), int(np.iinfo(d.np).max))
              for d in (D.uint8, D.int8, D.int16, D.int32, D.int64, D.uint16, D.uint32,
                        D.uint64)}
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_E4M3_MAX = 448.0


def checked_scalar(value, dtype):
    """A Python number ready to be stored in ``dtype``, with PyTorch's overflow checks."""
    if isinstance(value, (np.generic, Tensor)):
        value = value.item()
    if type(value) is int and not -2 ** 63 <= value < 2 ** 63:
        raise ValueError("Overflow when unpacking long long")
    if dtype is D.complex64 and any(math.isfinite(v) and abs(v) > _FLOAT32_MAX
                                    for v in (value.real, value.imag)):
        raise RuntimeError("value cannot be converted to type c10::complex<float> without "
                           "overflow")
    if dtype.category in (D.COMPLEX, D.BOOL):
        return value
    bad = False
    if isinstance(value, complex):
        bad = value.imag != 0
        value = value.real
    if dtype.category == D.INTEGRAL:
        lo, hi = _INT_RANGE[dtype]
        if not math.isfinite(value):
            bad = True
        elif lo < 0 or isinstance(value, float):
            bad = bad or not lo <= value <= hi      # a float must fit the dtype itself
        else:
            bad = bad or value > hi or -value > hi     # C++ accepts -hi..hi for unsigned types
    elif dtype is D.float32 and math.isfinite(value):
        bad = bad or abs(value) > _FLOAT32_MAX
    if bad:
        raise RuntimeError(f"value cannot be converted to type "
                           f"{_SCALAR_CTYPE.get(dtype, 'double')} without overflow")
    return value


def scalar_array(xp, value, dtype):
    """A checked Python number as a 0-d array of ``dtype`` (wrapping like a C cast)."""
    value = np.asarray(checked_scalar(value, dtype))
    if dtype is D.float8_e4m3fn:                # no infinity: PyTorch saturates to +-448
        value = np.clip(value.astype(np.float64), -_E4M3_MAX, _E4M3_MAX)
    if dtype in D.LOW_PRECISION:
        with np.errstate(over="ignore"):        # out of range: inf, as in PyTorch
            return device_scalar(xp, value.astype(dtype.np))
    return device_scalar(xp, value.astype(dtype.np))


def _mask_arg(mask):
    if not hasattr(mask, "dtype"):
        raise TypeError(f"masked_fill(): argument 'mask' (position 2) must be Tensor, not "
                        f"{type(mask).__name__}")


def _fill_checks(mask, value):
    """PyTorch's checks of masked_fill's value's dims, then of the mask's dtype."""
    _mask_arg(mask)
    if hasattr(value, "dtype") and value.ndim != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{CTYPE.get(D.FROM_NUMPY[mask.dtype], mask.dtype.name)}")


def _fill_value(xp, x, mask, value, refuse=True):
    """``value`` converted to ``x``'s dtype, after ``_fill_checks`` and (``refuse``) its
    refusal of ``x``'s dtype (float8, uint16/32/64), which come before the conversion's range
    check: those follow the shapes' checks (in place, the checks come first)."""
    _fill_checks(mask, value)
    if hasattr(value, "dtype"):
        value = value.item() if value.dtype.kind != "V" else float(value.astype(np.float32))
    if refuse:
        refuse_kernel(x, "masked_fill", wide_unsigned=True)
    return checked_number(xp, value, x.dtype)       # fill_'s checks, unlike __setitem__'s


def _size_mismatch(a, b):
    from ember.ops._registry import broadcast_message
    raise RuntimeError(broadcast_message([a, b]))


@op("masked_fill(input, mask, value)", inputs=3, inplace=True, scalars=True)
def masked_fill(xp, x, mask, value):
    """``input`` with ``value`` wherever ``mask`` is True (mask broadcasts)."""
    _mask_arg(mask)
    try:
        np.broadcast_shapes(mask.shape, x.shape)
    except ValueError:
        _size_mismatch(mask.shape, x.shape)
    value = _fill_value(xp, x, mask, value)
    out = xp.where(mask, value, x)
    return out if out.flags.c_contiguous else xp.ascontiguousarray(out)   # as PyTorch's


@masked_fill.inplace_variant
def _(xp, dst, x, mask, value):
    _fill_checks(mask, value)
    try:
        shape = np.broadcast_shapes(dst.shape, mask.shape)
    except ValueError:
        _size_mismatch(dst.shape, mask.shape)
    if shape != dst.shape:
        raise RuntimeError(f"output with shape {list(dst.shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")
    value = _fill_value(xp, dst, mask, value)
    xp.copyto(dst, value, where=mask)


masked_fill.nondifferentiable("mask")
masked_fill.number_overload("value")
masked_fill.reads_inputs((), (0, 2), ())    # PyTorch saves the mask alone


@masked_fill.named_by
def _(flat, params, out):                    # PyTorch's overloads: Scalar, Tensor value
    return "MaskedFillBackward1" if isinstance(flat[2], Tensor) else "MaskedFillBackward0"


@masked_fill.derivative
def _(grad, x, mask, value):
    grad_input = grad.masked_fill(mask, 0)
    if not _is_tensor(value):
        return grad_input, None, None
    outside = mask.logical_not()        # (a 0-d mask's ~ would be a NumPy scalar)
    return grad_input, None, grad.masked_fill(outside, 0).sum()


# --- masked_select, masked_scatter ------------------------------------------------------------

def _mask_broadcast(x, mask):
    try:
        return np.broadcast_shapes(mask.shape, x.shape)
    except ValueError:
        _size_mismatch(mask.shape, x.shape)


@op("masked_select(input, mask)", inputs=2, out=True)
def masked_select(xp, x, mask):
    """The elements of ``input`` where ``mask`` is True, as a 1-D tensor (they broadcast)."""
    if mask.dtype != np.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = _mask_broadcast(x, mask)
    return xp.broadcast_to(x, shape)[xp.broadcast_to(mask, shape)]


masked_select.nondifferentiable("mask")
masked_select.packs_reversed = True   # PyTorch packs mask, then self


@masked_select.derivative
def _(grad, x, mask):
    from ember._creation import zeros
    shape = np.broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    return zeros(shape, dtype=grad.dtype, device=grad.device).masked_scatter(mask, grad), None


@op("masked_scatter(input, mask, source)", inputs=3, inplace=True, out=False)
def masked_scatter(xp, x, mask, source):
    """``input`` with the leading elements of ``source`` written, in order, where ``mask`` is
    True (input and mask broadcast)."""
    shape = _mask_broadcast(x, mask)
    check_masked_scatter(x, mask, source)
    refuse_kernel(x, "masked_scatter")
    where = xp.broadcast_to(mask, shape)
    count = int(where.sum())
    if count > source.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out = xp.broadcast_to(x, shape).copy()
    out[where] = source.reshape(-1)[:count]
    return out


@masked_scatter.inplace_variant
def _(xp, dst, x, mask, source):
    """In place the mask expands to the tensor's shape (PyTorch's expand errors, after its
    check of the source's dtype)."""
    check_masked_scatter(dst, None, source)
    check_expands(mask, dst.shape)
    xp.copyto(dst, masked_scatter.forward(xp, dst, mask, source))


masked_scatter.nondifferentiable("mask")
masked_scatter.reads_inputs((), (0, 2), ())     # the mask alone (and the source's size)


@masked_scatter.derivative
def _(grad, x, mask, source, *, needs=(True, True, True)):
    from ember.func._batched import BatchedTensor
    if needs[2] and type(grad) is BatchedTensor:    # PyTorch has no batching rule for it
        from ember.func._batching import warn_fallback
        warn_fallback("aten::masked_scatter_backward")
    grad_source = masked_select(grad, mask)
    n, numel = grad_source.numel(), source.numel()
    if n < numel:
        grad_source = _slice_backward(grad_source, (numel,), (slice(0, n),))
    return grad.masked_fill(mask, 0), None, grad_source.reshape(source.shape)


# --- nonzero, argwhere ------------------------------------------------------------------------

@op("nonzero(input, *, as_tuple=False)", out=True, differentiable=False)
def nonzero(xp, x, as_tuple):
    """The indices of the nonzero elements: one row each (a tensor of shape (n, ndim)), or with
    ``as_tuple`` one 1-D tensor per dim."""
    if type(as_tuple) is not bool:
        raise TypeError(f"nonzero(): argument 'as_tuple' must be bool, not "
                        f"{type(as_tuple).__name__}")
    refuse_kernel(x, "nonzero_count_cpu")
    if not as_tuple:
        return _found(xp, x)
    found = _found(xp, x.reshape(1) if x.ndim == 0 else x)
    return tuple(found[:, i] for i in range(found.shape[1]))     # (its columns, as PyTorch's)


@op("argwhere(input)", out=False, differentiable=False)
def argwhere(xp, x):
    """The indices of the nonzero elements, one row each: a tensor of shape (n, ndim)."""
    refuse_kernel(x, "nonzero_count_cpu")
    return _found(xp, x)


def _found(xp, x):
    """``x``'s nonzero indices, (n, ndim), laid out by columns as PyTorch's: strides (1, n),
    (1, 0) when none is found, which an empty array has only over some memory."""
    found = xp.argwhere(x).astype(np.int64, copy=False)
    if found.size:
        return xp.asfortranarray(found)     # (NumPy's is: its nonzero's rows, transposed)
    n, ndim = found.shape
    return restrided(xp, xp.empty(1, np.int64), (n, ndim), (8, 8 * n))


# --- fill_diagonal_ ---------------------------------------------------------------------------

def _diagonal_positions(xp, shape, wrap):
    """Index arrays of the main diagonal of ``shape``; with ``wrap``, a tall matrix's diagonal
    starts again one row below where it ended (NumPy's ``fill_diagonal`` wrap)."""
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(set(shape)) > 1 and len(shape) > 2:
        raise RuntimeError("all dimensions of input must be of equal length")
    rows, cols = shape[0], shape[1]
    if len(shape) == 2 and wrap and rows > cols:
        r = xp.arange(rows)
        c = r % (cols + 1)
        keep = c < cols
        return r[keep], c[keep]
    return (xp.arange(min(shape)),) * len(shape)


def _diagonal_value(xp, x, value):
    """``fill_value`` (a number or a 0-dim tensor) as a checked 0-d array of x's dtype."""
    if getattr(value, "ndim", None) == 0:
        value = value.item()
    if not isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        raise TypeError(f"fill_diagonal_(): argument 'fill_value' (position 1) must be Number, "
                        f"not {type(value).__name__}")
    return checked_number(xp, value, x.dtype)


@op("fill_diagonal_(input, fill_value, wrap=False)", method=False, saves_inputs=False)
def fill_diagonal(xp, x, fill_value, wrap):
    """``input`` with ``fill_value`` on its main diagonal: a matrix's, or the positions whose
    coordinates are all equal when every dim has the same size."""
    value = _diagonal_value(xp, x, fill_value)
    out = x.copy()
    out[_diagonal_positions(xp, x.shape, wrap)] = value
    return out


@fill_diagonal.inplace_variant
def _(xp, dst, x, fill_value, wrap):
    value = _diagonal_value(xp, dst, fill_value)
    positions = _diagonal_positions(xp, dst.shape, wrap)
    dst[positions] = value


@fill_diagonal.derivative
def _(grad, x, fill_value, wrap):
    return fill_diagonal(grad, 0, wrap)


fill_diagonal.name_nodes("torch::autograd::CopySlices")    # PyTorch fills a strided view


def fill_diagonal_(self, fill_value, wrap=False):
    """Fill the main diagonal (all dims equal above 2-D) with ``fill_value`` in place; ``wrap``
    restarts a tall matrix's diagonal every ``columns + 1`` rows. Returns self."""
    from ember.autograd.grad_mode import STATE
    from ember.ops._inplace import call_inplace
    if isinstance(self, Tensor) and STATE.grad_enabled and self.requires_grad:
        if self.grad_fn is None:
            # PyTorch fills through a view of self, hence its wording
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in "
                               "an in-place operation.")
        strides = self.stride()
        # (ember's backward through an as_strided view of a transposed view is wrong: those
        # keep the fused op, whose node only bears CopySlices' name)
        if type(self) is Tensor and all(a >= b for a, b in zip(strides, strides[1:])):
            return _fill_strided_diagonals(self, fill_value, wrap)
    return call_inplace(fill_diagonal, (self,), (fill_value, wrap))


def _fill_strided_diagonals(self, fill_value, wrap):
    """fill_diagonal_ as PyTorch records it: ``fill_`` of an as_strided view of the diagonal
    (the stride is the sum of self's), and with ``wrap`` of a second one from row
    ``columns + 1`` on, running to the end of the matrix: a CopySlices node per view."""
    _diagonal_positions(np, self.shape, wrap)           # the shape checks
    value = _diagonal_value(np, self._data, fill_value).item()
    step, start = sum(self.stride()), self.storage_offset()
    size = min(self.shape)
    self.as_strided((size,), (step,), start).fill_(value)
    rows, cols = self.shape[:2]
    if wrap and self.ndim == 2 and rows > cols + 1:
        more = -(-self.numel() // (cols + 1)) - size
        self.as_strided((more,), (step,), start + self.stride(0) * (cols + 1)).fill_(value)
    return self


fill_diagonal_._ember_op = fill_diagonal        # vmap's dispatch finds the op from the method
Tensor.fill_diagonal_ = fill_diagonal_


# --- unravel_index ----------------------------------------------------------------------------

def _unravel_shape(shape):
    """``shape`` as a tuple of ints, checked as PyTorch does."""
    if isinstance(shape, int):
        shape = (shape,)
    elif not isinstance(shape, Sequence):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    for s in shape:
        if not isinstance(s, int):
            raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(s)}")
    if any(s >= 2 ** 63 for s in shape):
        raise ValueError("Overflow when unpacking long long")
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    return tuple(int(s) for s in shape)


def unravel_index(indices, shape):
    """The coordinates in a tensor of ``shape`` of the flat positions ``indices`` (an integer
    tensor or an int): one int64 tensor per dim, each of ``indices``' shape. As in PyTorch,
    positions outside ``[0, numel)`` wrap around."""
    if not isinstance(indices, Tensor):
        if not isinstance(indices, int):
            raise TypeError(f"expected 'indices' to be integer tensor or int, but got "
                            f"{type(indices)}")
        from ember._creation import tensor
        indices = tensor(indices)
    elif indices.dtype.is_floating_point or indices.dtype.is_complex or \
            indices.dtype is D.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = _unravel_shape(shape)
    flat = indices.long()
    if not flat.numel():
        return tuple(flat.clone() for _ in shape)
    if 0 in shape:
        raise RuntimeError("ZeroDivisionError")
    coords = []
    for size in reversed(shape):
        coords.append(flat.remainder(size))
        flat = flat.div(size, rounding_mode="floor")
    return tuple(reversed(coords))


@op("nonzero_static(input, *, size, fill_value=-1)", out=True, differentiable=False)
def nonzero_static(xp, x, size, fill_value):
    """``nonzero(input)`` with exactly ``size`` rows: cut short, or padded with
    ``fill_value`` (an op of its own, so that its result's shape never depends on values)."""
    from ember.ops._scalars import int64_arg
    size = int64_arg(size, "nonzero_static", "size")
    fill_value = int64_arg(fill_value, "nonzero_static", "fill_value")
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    refuse_kernel(x, "nonzero_count_cpu")
    # laid out by rows, as PyTorch's (unlike nonzero's): a copy, not F's (2, 1) or concatenation
    found = xp.argwhere(x).astype(np.int64, copy=False)[:size].copy()
    if found.shape[0] == size:
        return found
    padding = xp.full((size - found.shape[0], x.ndim), fill_value, dtype=np.int64)
    return xp.concatenate([found, padding])


ALIASES = {}
PUBLIC = {"unravel_index": unravel_index}

from ember.ops import _subscript  # noqa: E402,F401  (installs Tensor.__getitem__/__setitem__)
