"""Binning: searchsorted, bucketize, histc, histogram, histogramdd and bincount. None of them
has a gradient: bin indices are integers, histc's counts are not differentiable, and the
derivatives of histogram, histogramdd and bincount are not implemented (in PyTorch either)."""

import math

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember._warn import warn_once
from ember.backend import combine_at, device_of
from ember.ops import return_types
from ember.ops._dims import int_param
from ember.ops._promotion import Policy
from ember.ops._registry import op
from ember.ops._scalars import checked_scalar, number_arg, real_number
from ember.ops.sorting import _no_derivative


def _searchable(d, name, operands):
    return d


def _check_searchable(seq, values):
    """PyTorch's error for bool and complex operands, raised after its checks of the
    arguments and only when there are values to search."""
    if getattr(values, "size", 1) and seq.dtype.kind in "bc":    # (values may be a number)
        raise _kernel_error("searchsorted_out_cpu", seq.dtype)


SEARCH = Policy("searchsorted", _searchable)    # both operands in their promoted dtype
# the node PyTorch records for ops whose derivative it does not implement
_NOT_IMPLEMENTED = "NotImplemented"


def bisect(xp, seq, values, right, sorter=None):
    """Per value, the insertion point in the last dim of ``seq`` (1-D, or matching the leading
    dims of ``values``): the first position whose element is >= the value (> with ``right``).

    This is PyTorch's bisection step for step, so NaN boundaries send the search right as
    they do there."""
    n = seq.shape[-1]
    flat = seq.ndim == 1
    v = values.reshape(-1) if flat else values
    lo = xp.zeros(v.shape, dtype=np.int64)
    hi = xp.full(v.shape, n, dtype=np.int64)
    while True:
        active = lo < hi
        if not active.any():
            return lo.reshape(values.shape)
        mid = (lo + hi) >> 1
        at = xp.minimum(mid, n - 1)
        if sorter is not None:
            at = sorter[at] if flat else xp.take_along_axis(sorter, at, axis=-1)
        element = seq[at] if flat else xp.take_along_axis(seq, at, axis=-1)
        later = ~(element > v) if right else ~(element >= v)
        lo = xp.where(active & later, mid + 1, lo)
        hi = xp.where(active & ~later, mid, hi)


def _warn_noncontiguous(values, seq, sorter=None):
    """PyTorch's performance warnings for non-contiguous operands (its text, once each)."""
    for what, a in (("input value", values), ("boundary", seq), ("sorter", sorter)):
        if a is not None and getattr(a, "ndim", 0) and not a.flags.c_contiguous:
            warn_once(f"torch.searchsorted(): {what} tensor is non-contiguous, this will "
                      f"lower the performance due to extra data copy when converting "
                      f"non-contiguous tensor to contiguous, please use contiguous {what} "
                      f"tensor if possible. This message will only appear once per program.")


def _check_sorter(sorter, seq):
    if list(sorter.shape) != list(seq.shape):
        raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same size, "
                           f"but got boundary tensor {list(seq.shape)}and got sorter tensor "
                           f"{list(sorter.shape)}")
    if sorter.dtype is not D.int64:
        raise RuntimeError(f"torch.searchsorted(): sorter must be a tensor of long dtype but "
                           f"got dtype {sorter.dtype._torch_name}")
    data = sorter._data
    if data.size and (data.min() < 0 or data.max() >= seq.shape[-1]):
        raise RuntimeError("torch.searchsorted(): sorter index out of range")
    return data


def _side(side, right):
    if side is None:
        return right
    if not isinstance(side, str):       # (PyTorch's parser finds no overload for it)
        from ember.ops._dims import invalid_combination
        raise invalid_combination("searchsorted", ())
    if side not in ("left", "right"):
        raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got "
                           f"{side}")
    if right and side != "right":
        raise RuntimeError(f"torch.searchsorted(): side and right can't be set to opposites, "
                           f"got side of {side} while right was True")
    return side == "right"


@op("searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, "
    "sorter=None)", inputs=2, promote=SEARCH, upcast=False, method=False)
def searchsorted(xp, seq, values, out_int32, right, side, sorter):
    """The indices at which ``values`` would be inserted into the innermost dim of
    ``sorted_sequence`` to keep it sorted (after equal elements with ``right``)."""
    values = xp.asarray(values, dtype=seq.dtype)
    right = _side(side, right)
    if sorter is not None:
        sorter = _check_sorter(sorter, seq)
    if values.ndim == 0 and seq.ndim != 1:
        raise RuntimeError(f"torch.searchsorted(): input value can be a scalar only when "
                           f"boundaries tensor dimension is 1, but we got boundaries tensor "
                           f"dim({seq.ndim}) and input value's dim(0) numel(1)")
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if seq.ndim != 1 and (seq.ndim != values.ndim or seq.shape[:-1] != values.shape[:-1]):
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           f"the first N-1 dimensions of boundaries tensor and input value "
                           f"tensor must match, but we got boundaries tensor {list(seq.shape)} "
                           f"and input value tensor {list(values.shape)}")
    _check_searchable(seq, values)
    _warn_noncontiguous(values, seq, sorter)
    found = bisect(xp, seq, values, right, sorter)
    return found.astype(np.int32) if out_int32 else found


searchsorted.casts_keep_layout = True      # (they warn of non-contiguous operands as given)


@op("bucketize(input, boundaries, *, out_int32=False, right=False)", inputs=2, promote=SEARCH,
    upcast=False, method=False)
def bucketize(xp, x, boundaries, out_int32, right):
    """The index of the bucket of ``boundaries`` (1-D, ascending) each element falls in."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    _check_searchable(boundaries, x)
    _warn_noncontiguous(x, boundaries)
    found = bisect(xp, boundaries, xp.asarray(x, dtype=boundaries.dtype), right)
    return found.astype(np.int32) if out_int32 else found


bucketize.casts_keep_layout = True


# --- histc, histogram -------------------------------------------------------------------------

def _printed(v):
    """A float as PyTorch's messages print it (C++ stream formatting)."""
    return f"{v:g}"


def _kernel_error(kernel, dtype):
    return NotImplementedError(f"\"{kernel}\" not implemented for "
                               f"'{D.FROM_NUMPY[dtype]._torch_name}'")


def _check_bins(bins, name):
    if type(bins) is not int:
        raise TypeError(f"{name}(): argument 'bins' (position 2) must be int, not "
                        f"{type(bins).__name__}")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")


def _linspace(xp, start, end, steps, dtype):
    """PyTorch's linspace in ``dtype``: the first half stepped from ``start``, the second half
    from ``end`` (so both ends are exact)."""
    start, end = xp.asarray(start, dtype=dtype), xp.asarray(end, dtype=dtype)
    step = (end - start) / dtype.type(steps - 1)
    half = steps // 2
    i = xp.arange(steps)
    return xp.concatenate([start + step * i[:half].astype(dtype),
                           end - step * (steps - 1 - i[half:]).astype(dtype)])


@op("histc(input, bins=100, min=0, max=0)", out=True)
def histc(xp, x, bins, min, max):
    """A histogram of ``bins`` equal bins over [min, max] (the data's range when min == max);
    elements outside are ignored."""
    bins = int_param(bins, ("histc", "bins", 1), strict=True)
    _check_bins(bins, "histc")
    left, right = (real_number(number_arg(v, "histc", name), np.float64)
                   for v, name in ((min, "min"), (max, "max")))
    left, right = float(left), float(right)
    if x.dtype.kind == "c" and left == right and x.size:
        raise _kernel_error("aminmax_cpu", x.dtype)
    if left == right and x.size:
        left, right = float(x.min()), float(x.max())
    if left == right:
        left, right = left - 1, right + 1
    if not (math.isfinite(left) and math.isfinite(right)):
        raise RuntimeError(f"torch.histc: range of [{_printed(left)}, {_printed(right)}] is not "
                           f"finite")
    if not left < right:
        raise RuntimeError("torch.histc: max must be larger than min")
    if x.dtype.kind == "b":
        raise _kernel_error("linspace_cpu", x.dtype)
    if x.dtype.kind != "f" and x.dtype.kind != "V":
        raise _kernel_error("histogram_cpu", x.dtype)
    lo, hi = checked_scalar(xp, left, x.dtype), checked_scalar(xp, right, x.dtype)
    flat = x.reshape(-1)
    inside = flat[(flat >= lo) & (flat <= hi)]
    # the bin by division in the input dtype, as PyTorch's kernel computes it
    where = xp.minimum(((inside - lo) * bins / (hi - lo)).astype(np.int64), bins - 1)
    hist = xp.zeros(bins, dtype=x.dtype)
    combine_at(xp, np.add, hist, where, 1)     # counted one by one, in the input's dtype
    return hist


_C_TYPES = {D.float32: "float", D.float64: "double", D.int64: "long int", D.int32: "int",
            D.int16: "short int", D.int8: "signed char", D.uint8: "unsigned char",
            D.bool_: "bool", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
            D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>"}
_BINNABLE = (D.float16, D.bfloat16, D.float32, D.float64)      # PyTorch's histogram kernel's


def _ctype(dtype):
    return _C_TYPES.get(D.FROM_NUMPY[dtype], str(dtype))


def _ranges(points, range):
    """Per dim of the (N, D) ``points``, its outermost edges: ``range`` (min and max of dim 0,
    then of dim 1, ...), else the data's (0 and 1 without data); a single point widens to a
    bin of width 1 around it."""
    dims = points.shape[1]
    if range is not None and len(range) != 2 * dims:
        raise RuntimeError(f"torch.histogramdd: for a {dims}-dimensional histogram range "
                           f"should have {2 * dims} elements, but got {len(range)}")
    if range is None:
        if points.size and points.dtype not in (np.float32, np.float64):
            raise _kernel_error("histogramdd", points.dtype)
        range = [v for pair in zip(points.min(0).tolist(), points.max(0).tolist())
                 for v in pair] if points.size else [0.0, 1.0] * dims
    out = []
    for dim, (left, right) in enumerate(zip(range[::2], range[1::2])):
        left, right = float(left), float(right)
        if not (math.isfinite(left) and math.isfinite(right)):
            raise RuntimeError(f"torch.histogramdd: dimension {dim}'s range [{_printed(left)}, "
                               f"{_printed(right)}] is not finite")
        if left > right:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                               f"{_printed(left)} max {_printed(right)} for dimension {dim}")
        out.append((left - 0.5, right + 0.5) if left == right else (left, right))
    return out


def _equal_edges(xp, points, counts, range):
    """Edges of ``counts[d]`` equal bins over each dim's range (one count for all dims if an
    int), in the points' dtype."""
    ranges = _ranges(points, range)
    if not isinstance(counts, list):
        counts = [counts] * len(ranges)
    elif len(counts) != len(ranges):
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                           "dimension of the input.")
    edges = []
    for (left, right), count in zip(ranges, counts):
        if count < -1:
            raise RuntimeError("number of steps must be non-negative")
        if points.dtype.kind == "b":
            raise _kernel_error("linspace_cpu", points.dtype)
        if points.dtype.kind in "iuc":      # no kernel bins these; the edges' size still counts
            edges.append(xp.zeros(count + 1, dtype=points.dtype))
        else:
            edges.append(_linspace(xp, left, right, count + 1, points.dtype))
    return edges


def _check_edges(edges, dtype, dim):
    if edges.dtype != dtype:
        raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the "
                           f"same dtype, but got input with dtype {_ctype(dtype)} and bins for "
                           f"dimension {dim} with dtype {_ctype(edges.dtype)}")
    if edges.ndim != 1:
        raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but got "
                           f"{edges.ndim} dimensions in the bins tensor for dimension {dim}")
    if edges.size == 0:
        raise RuntimeError(f"torch.histogramdd: bins tensor should have at least 1 element, "
                           f"but got 0 elements in the bins tensor for dimension {dim}")


def _check_weight(weight, dtype, shape):
    """``weight`` must have the input's dtype and its ``shape`` less the innermost dim."""
    if weight.dtype != dtype:
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided, input tensor and "
                           f"weight tensor should have the same dtype, but got "
                           f"input({_ctype(dtype)}), and weight({_ctype(weight.dtype)})")
    if weight.shape != tuple(shape[:-1]):
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have the "
                           f"same shape as the input tensor excluding its innermost dimension, "
                           f"but got input with shape {list(shape)} and weight with shape "
                           f"{list(weight.shape)}")


def _binned(xp, points, weight, edges, density, shape):
    """The histogram of the (N, D) ``points`` (of an input of ``shape``) over the bins between
    ``edges`` (one 1-D array per dim): each bin includes its left edge, the last also its
    right edge; points outside every bin (or with a NaN) are skipped."""
    for dim, e in enumerate(edges):
        _check_edges(e, points.dtype, dim)
    if weight is not None:
        _check_weight(weight, points.dtype, shape)
    for dim, e in enumerate(edges):
        if e.size < 2:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {e.size - 1} for "
                               f"dimension {dim}")
    if D.FROM_NUMPY[points.dtype] not in _BINNABLE:
        raise _kernel_error("histogram_cpu", points.dtype)
    sizes = tuple(e.size - 1 for e in edges)
    hist = xp.zeros(sizes, dtype=points.dtype)
    if edges:                           # PyTorch counts nothing in a 0-dimensional histogram
        inside = xp.ones(points.shape[0], dtype=bool)
        for dim, e in enumerate(edges):
            inside &= (points[:, dim] >= e[0]) & (points[:, dim] <= e[-1])
        kept = points[inside]
        where = xp.zeros(kept.shape[0], dtype=np.int64)
        for dim, e in enumerate(edges):
            found = xp.minimum(bisect(xp, e, kept[:, dim], True) - 1, sizes[dim] - 1)
            where = where * sizes[dim] + found
        combine_at(xp, np.add, hist.reshape(-1), where,
                   1 if weight is None else weight.reshape(-1)[inside])
    if density:
        volume = xp.ones(sizes, dtype=points.dtype)
        for dim, e in enumerate(edges):
            volume = volume * xp.diff(e).reshape((-1,) + (1,) * (len(edges) - dim - 1))
        hist = hist / hist.sum() / volume
    return hist


# ``weight`` is keyword-only in PyTorch; it is positional here because the registry treats
# only positional tensor parameters defaulting to None as optional inputs
@op("histogram(input, bins=100, weight=None, *, range=None, density=False)",
    inputs=("input", "bins", "weight"), scalars=True, out=True,
    namedtuple=return_types.histogram, grad_fn_name=_NOT_IMPLEMENTED)
def histogram(xp, x, bins, weight, range, density):
    """The named tuple (hist, bin_edges): ``bins`` equal bins over ``range`` (the data's range
    by default), or the bins between the edges of a 1-D tensor ``bins``; optionally weighted,
    or normalized to a density."""
    given = not isinstance(bins, (int, float, bool))
    if given and range is not None:
        raise TypeError("histogram(): argument 'range' must be None when 'bins' is a Tensor")
    if not given:
        _check_bins(bins, "histogram")
    points = x.reshape(-1, 1)
    edges = [bins.copy()] if given else _equal_edges(xp, points, bins, range)
    hist = _binned(xp, points, None if weight is None else weight.reshape(-1), edges, density,
                   points.shape)
    return hist, edges[0]


histogram.derivative(_no_derivative("aten::histogram", RuntimeError,
                                    "derivative for {} is not implemented"))
histogram.refuse_forward_ad("aten::histogram")


def _int_like(b, element):
    """Whether PyTorch reads ``b`` as an int: an int (not a bool), or an integer tensor of one
    element (at the top level, a 0-d one)."""
    if isinstance(b, Tensor):
        return not (b.dtype.is_floating_point or b.dtype.is_complex or b.dtype is D.bool_) \
            and (b.numel() == 1 if element else b.ndim == 0)
    return hasattr(b, "__index__") and not isinstance(b, (bool, np.bool_))


def _bins_form(bins):
    """``bins`` as PyTorch's argument parser reads it: an int, a list of ints, or a list of
    tensors (of edges)."""
    if _int_like(bins, False):
        return int(bins)
    if not isinstance(bins, (list, tuple)):
        raise TypeError(f"histogramdd(): argument 'bins' (position 2) must be int, tuple of "
                        f"ints or tuple of Tensors, not {type(bins).__name__}")
    if all(_int_like(b, True) for b in bins):
        return [int(b) for b in bins]
    for i, b in enumerate(bins):
        if not isinstance(b, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got "
                            f"{type(b).__name__}")
    return tuple(bins)


def _edge_arrays(bins, x):
    """The arrays of tensors of edges; on another device than the input, an error."""
    for b in bins:
        if type(b._data) is not type(x):
            devices = sorted({str(device_of(x)), str(b.device)}, key=lambda d: d == "cpu")
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {devices[0]} and {devices[1]}!")
    return [b._data for b in bins]


_HISTOGRAMDD = return_types.histogramdd


def _histogramdd_result(hist, *edges):
    return _HISTOGRAMDD(hist, edges)


@op("histogramdd(input, bins, range=None, weight=None, density=False)",
    inputs=("input", "weight"), method=False, namedtuple=_histogramdd_result,
    grad_fn_name=_NOT_IMPLEMENTED)
def histogramdd(xp, x, weight, bins, range, density):
    """The named tuple (hist, bin_edges) of the points in the innermost dim of ``input``
    (dimension D): ``bins`` (an int, or one per dim) equal bins over ``range`` (the data's
    range by default), or the bins between the edges of D 1-D tensors; optionally weighted
    (one weight per point), or normalized to a density."""
    bins = _bins_form(bins)
    if x.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if x.ndim < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    points = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
    if isinstance(bins, tuple):
        if len(bins) != points.shape[1]:
            raise RuntimeError(f"torch.histogramdd: expected {points.shape[1]} sequences of bin "
                               f"edges for a {points.shape[1]}-dimensional histogram but got "
                               f"{len(bins)}")
        edges = [e.copy() for e in _edge_arrays(bins, x)]
    else:
        edges = _equal_edges(xp, points, bins, range)
    return (_binned(xp, points, weight, edges, density, x.shape), *edges)


def _histogramdd_kernel(x, weight, bins, *params):
    """The name of PyTorch's kernel for the call, which its error on backward names."""
    from_tensors = isinstance(bins, (list, tuple)) and bins and isinstance(bins[0], Tensor)
    return f"aten::_histogramdd_from_bin_{'tensors' if from_tensors else 'cts'}"


histogramdd.derivative(_no_derivative(_histogramdd_kernel, RuntimeError,
                                      "derivative for {} is not implemented"))


# --- bincount ---------------------------------------------------------------------------------

@op("bincount(input, weights=None, minlength=0)", inputs=2, grad_fn_name=_NOT_IMPLEMENTED)
def bincount(xp, x, weights, minlength):
    """How often each value 0, 1, ... occurs in a 1-D non-negative integer tensor (at least
    ``minlength`` counts); with ``weights``, the sum of the weights of its occurrences."""
    if x.dtype.kind not in "iu":
        raise _kernel_error("bincount_cpu", x.dtype)
    if type(minlength) is not int:
        raise TypeError(f"bincount(): argument 'minlength' must be int, not "
                        f"{type(minlength).__name__}")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and weights.dtype != np.float32:
        if weights.dtype.kind == "c":
            warn_once("Casting complex values to real discards the imaginary part")
            weights = weights.real
        weights = weights.astype(np.float64)
    if x.ndim == 1 and x.size == 0:
        return xp.zeros(minlength, dtype=np.int64)
    if x.ndim != 1 or x.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return xp.bincount(x, minlength=minlength).astype(np.int64, copy=False)
    if weights.ndim != 1 or weights.shape[0] != x.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out = xp.zeros(max(minlength, int(x.max()) + 1), dtype=weights.dtype)
    combine_at(xp, np.add, out, x, weights)
    return out


bincount.derivative(_no_derivative("aten::bincount", RuntimeError,
                                   "derivative for {} is not implemented"))
bincount.refuse_forward_ad("aten::bincount")

ALIASES = {}
