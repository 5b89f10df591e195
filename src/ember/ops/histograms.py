"""Binning: searchsorted, bucketize, histc, histogram and bincount. None of them has a
gradient: bin indices are integers, histc's counts are not differentiable, and histogram's
and bincount's derivatives are not implemented (in PyTorch either)."""

import math
import warnings

import numpy as np

from ember import _dtype as D
from ember.backend import combine_at
from ember.ops import return_types
from ember.ops._promotion import Policy
from ember.ops._registry import op
from ember.ops._scalars import checked_scalar
from ember.ops.sorting import _no_derivative


def _searchable(d, name, operands):
    if d.category in (D.BOOL, D.COMPLEX):
        raise NotImplementedError(f"\"searchsorted_out_cpu\" not implemented for "
                                  f"'{d._torch_name}'")
    return d


SEARCH = Policy("searchsorted", _searchable)    # both operands in their promoted dtype


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


_WARNED = set()       # PyTorch warns once per process about each non-contiguous operand


def _warn_noncontiguous(values, seq, sorter=None):
    """PyTorch's performance warnings for non-contiguous operands (its text, once each)."""
    for what, a in (("input value", values), ("boundary", seq), ("sorter", sorter)):
        if a is not None and getattr(a, "ndim", 0) and not a.flags.c_contiguous and \
                what not in _WARNED:
            _WARNED.add(what)
            warnings.warn(f"torch.searchsorted(): {what} tensor is non-contiguous, this will "
                          f"lower the performance due to extra data copy when converting "
                          f"non-contiguous tensor to contiguous, please use contiguous {what} "
                          f"tensor if possible. This message will only appear once per program.",
                          UserWarning, stacklevel=5)


def _check_sorter(sorter, seq):
    if list(sorter.shape) != list(seq.shape):
        raise RuntimeError(f"ember.searchsorted(): boundary and sorter must have the same size, "
                           f"but got boundary tensor {list(seq.shape)}and got sorter tensor "
                           f"{list(sorter.shape)}")
    if sorter.dtype is not D.int64:
        raise RuntimeError(f"ember.searchsorted(): sorter must be a tensor of long dtype but "
                           f"got dtype {sorter.dtype._torch_name}")
    data = sorter._data
    if data.size and (data.min() < 0 or data.max() >= seq.shape[-1]):
        raise RuntimeError("ember.searchsorted(): sorter index out of range")
    return data


def _side(side, right):
    if side is None:
        return right
    if side not in ("left", "right"):
        raise RuntimeError(f"ember.searchsorted(): side can only be 'left' or 'right' but got "
                           f"{side}")
    if right and side != "right":
        raise RuntimeError(f"ember.searchsorted(): side and right can't be set to opposites, "
                           f"got side of {side} while right was True")
    return side == "right"


@op("searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, "
    "sorter=None)", inputs=2, promote=SEARCH, upcast=False, method=False)
def searchsorted(xp, seq, values, out_int32, right, side, sorter):
    """The indices at which ``values`` would be inserted into the innermost dim of
    ``sorted_sequence`` to keep it sorted (after equal elements with ``right``)."""
    values = xp.asarray(values, dtype=seq.dtype)
    if sorter is not None:
        sorter = _check_sorter(sorter, seq)
    if values.ndim == 0 and seq.ndim != 1:
        raise RuntimeError(f"ember.searchsorted(): input value can be a scalar only when "
                           f"boundaries tensor dimension is 1, but we got boundaries tensor "
                           f"dim({seq.ndim}) and input value's dim(0) numel(1)")
    if seq.ndim == 0:
        raise RuntimeError("ember.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if seq.ndim != 1 and (seq.ndim != values.ndim or seq.shape[:-1] != values.shape[:-1]):
        raise RuntimeError(f"ember.searchsorted(): boundaries tensor should be 1 dimension or "
                           f"the first N-1 dimensions of boundaries tensor and input value "
                           f"tensor must match, but we got boundaries tensor {list(seq.shape)} "
                           f"and input value tensor {list(values.shape)}")
    right = _side(side, right)
    _warn_noncontiguous(values, seq, sorter)
    found = bisect(xp, seq, values, right, sorter)
    return found.astype(np.int32) if out_int32 else found


@op("bucketize(input, boundaries, *, out_int32=False, right=False)", inputs=2, promote=SEARCH,
    upcast=False, method=False)
def bucketize(xp, x, boundaries, out_int32, right):
    """The index of the bucket of ``boundaries`` (1-D, ascending) each element falls in."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    _warn_noncontiguous(x, boundaries)
    found = bisect(xp, boundaries, xp.asarray(x, dtype=boundaries.dtype), right)
    return found.astype(np.int32) if out_int32 else found


# --- histc, histogram -------------------------------------------------------------------------

def _number(v):
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
        raise RuntimeError(f"ember.histogram(): bins must be > 0, but got {bins} for dimension 0")


def _linspace(xp, start, end, steps, dtype):
    """PyTorch's linspace in ``dtype``: the first half stepped from ``start``, the second half
    from ``end`` (so both ends are exact)."""
    start, end = xp.asarray(start, dtype=dtype), xp.asarray(end, dtype=dtype)
    step = (end - start) / dtype.type(steps - 1)
    half = steps // 2
    i = xp.arange(steps)
    return xp.concatenate([start + step * i[:half].astype(dtype),
                           end - step * (steps - 1 - i[half:]).astype(dtype)])


def _count(xp, flat, weights, edges, dtype):
    """Sums of ``weights`` (ones if None) per bin of ``edges``; the last bin includes its right
    edge, values outside the edges (and NaN) are skipped."""
    bins = edges.shape[0] - 1
    inside = (flat >= edges[0]) & (flat <= edges[-1])
    where = xp.minimum(bisect(xp, edges, flat[inside], True) - 1, bins - 1)
    hist = xp.zeros(bins, dtype=dtype)
    combine_at(xp, np.add, hist, where, 1 if weights is None else weights[inside])
    return hist


@op("histc(input, bins=100, min=0, max=0)", out=True)
def histc(xp, x, bins, min, max):
    """A histogram of ``bins`` equal bins over [min, max] (the data's range when min == max);
    elements outside are ignored."""
    _check_bins(bins, "histc")
    left, right = float(min), float(max)
    if x.dtype.kind == "c" and left == right and x.size:
        raise _kernel_error("aminmax_cpu", x.dtype)
    if left == right and x.size:
        left, right = float(x.min()), float(x.max())
    if left == right:
        left, right = left - 1, right + 1
    if not (math.isfinite(left) and math.isfinite(right)):
        raise RuntimeError(f"ember.histc: range of [{_number(left)}, {_number(right)}] is not "
                           f"finite")
    if not left < right:
        raise RuntimeError("ember.histc: max must be larger than min")
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
    xp.add.at(hist, where, 1)
    return hist


_C_TYPES = {D.float32: "float", D.float64: "double", D.int64: "long int", D.int32: "int",
            D.int16: "short int", D.int8: "signed char", D.uint8: "unsigned char",
            D.bool_: "bool", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
            D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>"}


def _ctype(dtype):
    return _C_TYPES.get(D.FROM_NUMPY[dtype], str(dtype))


def _tensor_bins(bins, x):
    if bins.dtype != x.dtype:
        raise RuntimeError(f"ember.histogramdd: input tensor and bins tensors should have the "
                           f"same dtype, but got input with dtype {_ctype(x.dtype)} and bins for "
                           f"dimension 0 with dtype {_ctype(bins.dtype)}")
    if bins.ndim != 1:
        raise RuntimeError(f"ember.histogramdd: bins tensor should have one dimension, but got "
                           f"{bins.ndim} dimensions in the bins tensor for dimension 0")
    if bins.size == 0:
        raise RuntimeError("ember.histogramdd: bins tensor should have at least 1 element, but "
                           "got 0 elements in the bins tensor for dimension 0")
    if bins.size == 1:
        raise RuntimeError("ember.histogram(): bins must be > 0, but got 0 for dimension 0")


def _check_weight(weight, x):
    if weight.dtype != x.dtype:
        raise RuntimeError(f"ember.histogramdd: if weight tensor is provided, input tensor and "
                           f"weight tensor should have the same dtype, but got "
                           f"input({_ctype(x.dtype)}), and weight({_ctype(weight.dtype)})")
    if weight.size != x.size:
        raise RuntimeError(f"ember.histogramdd: if weight tensor is provided it should have the "
                           f"same shape as the input tensor excluding its innermost dimension, "
                           f"but got input with shape [{x.size}, 1] and weight with shape "
                           f"[{weight.size}]")


def _outer_edges(x, range):
    """The histogram's range: ``range``, else the data's (0 to 1 for no data); a single
    point widens to a bin of width 1 around it."""
    if range is not None:
        if len(range) != 2:
            raise RuntimeError(f"ember.histogramdd: for a 1-dimensional histogram range should "
                               f"have 2 elements, but got {len(range)}")
        left, right = float(range[0]), float(range[1])
    elif x.size:
        left, right = float(x.min()), float(x.max())
    else:
        left, right = 0.0, 1.0
    if not (math.isfinite(left) and math.isfinite(right)):
        raise RuntimeError(f"ember.histogramdd: dimension 0's range [{_number(left)}, "
                           f"{_number(right)}] is not finite")
    if left > right:
        raise RuntimeError(f"ember.histogramdd: min should not exceed max, but got min "
                           f"{_number(left)} max {_number(right)} for dimension 0")
    if left == right:
        left, right = left - 0.5, right + 0.5
    return left, right


# ``weight`` is keyword-only in PyTorch; it is positional here because the registry treats
# only positional tensor parameters defaulting to None as optional inputs
@op("histogram(input, bins=100, weight=None, *, range=None, density=False)",
    inputs=("input", "bins", "weight"), scalars=True, out=True,
    namedtuple=return_types.histogram)
def histogram(xp, x, bins, weight, range, density):
    """The named tuple (hist, bin_edges): ``bins`` equal bins over ``range`` (the data's range
    by default), or the bins between the edges of a 1-D tensor ``bins``; optionally weighted,
    or normalized to a density."""
    given = not isinstance(bins, (int, float, bool))
    if given and range is not None:
        raise TypeError("histogram(): argument 'range' must be None when 'bins' is a Tensor")
    if not given:
        _check_bins(bins, "histogram")
    if x.dtype not in (np.float32, np.float64):
        raise _kernel_error("histogramdd", x.dtype)
    if given:
        _tensor_bins(bins, x)
    if weight is not None:
        _check_weight(weight, x)
    edges = bins.copy() if given else _linspace(xp, *_outer_edges(x, range), bins + 1, x.dtype)
    hist = _count(xp, x.reshape(-1), None if weight is None else weight.reshape(-1), edges,
                  x.dtype)
    if density:
        hist = hist / hist.sum() / xp.diff(edges)
    return hist, edges


histogram.derivative(_no_derivative("aten::histogram", RuntimeError,
                                    "derivative for {} is not implemented"))


# --- bincount ---------------------------------------------------------------------------------

@op("bincount(input, weights=None, minlength=0)", inputs=2)
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
            warnings.warn("Casting complex values to real discards the imaginary part",
                          UserWarning, stacklevel=5)
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

ALIASES = {}
