"""Sorting and selection along a dim: sort, argsort, msort, topk, kthvalue, mode, unique and
unique_consecutive. Orderings are stable, with NaN above every number (last ascending, first
descending), as PyTorch's CPU kernels order them; gradients follow the returned indices."""

import math

import numpy as np

from ember import _dtype as D
from ember._memory_format import laid_like, row_major
from ember.backend import accumulate
from ember.ops import return_types
from ember.ops._call_site import call_shape, call_site
from ember.ops._dims import int_param, invalid_combination, is_index, wrap_dim
from ember.ops._overloads import in_parser_words
from ember.ops._promotion import SAME
from ember.ops._reduce import constant, rejecting, require_nonempty, route_to_indices
from ember.ops._registry import op


def _not_implemented(kernel):
    return lambda d: f"\"{kernel}\" not implemented for '{d._torch_name}'"


SORT = rejecting("sort", (D.COMPLEX,), RuntimeError,
                 lambda d: " Sort does not support complex dtypes on CPU")
TOPK = rejecting("topk", (D.BOOL, D.COMPLEX), RuntimeError,
                 lambda d: ("topk does not support bool dtypes on CPU" if d is D.bool_
                            else " topk does not support complex dtypes on CPU"))
KTHVALUE = rejecting("kthvalue", (D.BOOL, D.COMPLEX), NotImplementedError,
                     _not_implemented("kthvalue_cpu"))
MODE = rejecting("mode", (D.COMPLEX,), NotImplementedError, _not_implemented("mode_cpu"))


def _check_dtype(policy, x):
    """``policy``'s dtype check run in the kernel on its array: PyTorch checks the dim (and
    topk's and kthvalue's k) before the dtype."""
    if x.dtype.kind in "bc":
        policy.rule(D.FROM_NUMPY[x.dtype], policy.name, ())


def stable_order(xp, x, d, descending=False):
    """The stable sorting permutation of ``x`` along ``d``; NaN sorts above every number.

    Descending order is the ascending order of the reversed array, reversed: equal elements
    keep their original order and NaN comes first."""
    if not descending:
        return xp.argsort(x, axis=d, kind="stable")
    order = xp.argsort(xp.flip(x, axis=d), axis=d, kind="stable")
    return (x.shape[d] - 1) - xp.flip(order, axis=d)


def _leading(a, d, k):
    """The first ``k`` entries of ``a`` along ``d``."""
    return a[(slice(None),) * d + (slice(0, k),)]


# --- sort, argsort, msort ---------------------------------------------------------------------

def _sorted(xp, x, dim, descending):
    """(values, int64 indices) of ``x`` sorted along ``dim``, both laid out as PyTorch's
    ``empty_like(x)`` is (a transposed input's results are transposed)."""
    d = wrap_dim(dim, x.ndim)
    _check_dtype(SORT, x)
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype=np.int64)
    order = stable_order(xp, x, d, descending)
    values, order = xp.take_along_axis(x, order, axis=d), order.astype(np.int64, copy=False)
    if row_major(x):
        return values, order
    return laid_like(xp, values, x), laid_like(xp, order, x)


def _sort_grad(grad, x, dim, indices):
    """Zeros with each gradient scattered to the index its value came from (PyTorch's node,
    ScatterBackward0, for 0-d inputs too)."""
    return grad.new_zeros(x.shape).scatter(wrap_dim(dim, x.ndim) if x.ndim else 0, indices, grad)


@op("sort(input, dim=-1, descending=False, *, stable=None)", promote=SAME,
    namedtuple=return_types.sort)
def sort(xp, x, dim, descending, stable):
    """The named tuple (values, indices) of ``input`` sorted along ``dim`` (always stably)."""
    if type(dim) is not int or type(descending) is not bool:
        _check_sort_args(dim, descending)
    if stable is not None:
        _check_stable_alone("sort")
    return _sorted(xp, x, dim, descending)


def _check_sort_args(dim, descending, name="sort"):
    """PyTorch's TypeError when no overload of sort (or argsort) takes ``dim`` and
    ``descending``."""
    if isinstance(descending, bool) and is_index(dim):
        return
    shape = call_shape(name)    # (how many the call passed by position, self included)
    given = (dim, descending)[:shape[0] - 1] if shape is not None else \
        (dim, descending) if descending is not False else (dim,)
    raise invalid_combination(name, given)


def _check_stable_alone(name):
    """PyTorch's TypeError when ``stable`` comes with ``dim`` or ``descending`` given by
    position: only its signature with ``stable`` takes that keyword, and it takes the others
    by keyword only (an explicit default ``stable`` goes unchecked: the check costs a call)."""
    shape = call_shape(name)
    if shape is None or "stable" not in shape[1] or shape[0] < 2:
        return
    method = call_site().kind != "function"
    # worded for that signature where it alone takes as many arguments (its least count
    # has the tensor and stable, its positional ones the tensor: less the method's self)
    raise TypeError(in_parser_words(f"{name}() takes from {2 - method} to {1 - method} "
                                    f"positional arguments but {shape[0] - method} were given"))


@sort.named_by
def _(flat, params, out):            # PyTorch's overload taking ``stable`` is SortBackward1
    return "SortBackward0" if params[2] is None else "SortBackward1"


@sort.derivative(outputs=(1,))
def _(grads, x, dim, descending, stable, *, out):
    return _sort_grad(grads[0], x, dim, out[1])


sort.reads_inputs(())       # the indices and the input's size: PyTorch saves no input


@op("argsort(input, dim=-1, descending=False, *, stable=False)", promote=SAME)
def argsort(xp, x, dim, descending, stable):
    """The indices that sort ``input`` along ``dim`` (always stably)."""
    if type(dim) is not int or type(descending) is not bool:
        _check_sort_args(dim, descending, "argsort")
    if stable is not False:
        _check_stable_alone("argsort")
    return _sorted(xp, x, dim, descending)[1]


def _check_out_has_stable(got, want, inputs):
    """PyTorch's TypeError for argsort's ``out=`` without ``stable``: only its signature with
    ``stable`` takes ``out`` (run on the out= path only, as its dtype check)."""
    shape = call_shape("argsort")
    if shape is not None and "stable" not in shape[1]:
        raise invalid_combination("argsort", ())
    return False            # (the dtype itself: checked as MESSAGES says)


argsort.out_dtype_check = _check_out_has_stable


@op("msort(input)", promote=SAME)
def msort(xp, x):
    """``input`` sorted along its first dim."""
    return _sorted(xp, x, 0, False)[0]


msort.name_nodes("SortBackward0")
msort.copies_inputs(0)          # PyTorch's sort saves the indices, not the input


@msort.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: a sort along dim 0 (its node keeps the dim and the indices)."""
    return sort(inputs[0], 0)[0]


@msort.derivative
def _(grad, x):
    indices = constant(lambda xp, a: _sorted(xp, a, 0, False)[1], x)
    return _sort_grad(grad, x, 0, indices)


# --- topk, kthvalue, mode ---------------------------------------------------------------------

@op("topk(input, k, dim=-1, largest=True, sorted=True)", promote=SAME,
    namedtuple=return_types.topk)
def topk(xp, x, k, dim, largest, sorted):
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices, in order."""
    k = int_param(k, ("topk", "k", 1))
    d = wrap_dim(dim, x.ndim, ("topk", "dim", 2))
    size = x.shape[d] if x.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    _check_dtype(TOPK, x)
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype=np.int64)
    # a contiguous copy of the leading k: PyTorch's results are contiguous
    order = _fresh(xp, _leading(stable_order(xp, x, d, descending=largest), d, k))
    return xp.take_along_axis(x, order, axis=d), order.astype(np.int64, copy=False)


@topk.derivative(outputs=(1,))
def _(grads, x, k, dim, largest, sorted, *, out):
    return _sort_grad(grads[0], x, dim, out[1])


topk.reads_inputs(())       # the indices and the input's size: PyTorch saves no input


def _fresh(xp, a):
    """``a`` row-major with a fresh array's strides, those of its dims of size 1 included
    (NumPy takes a slice with odd ones for contiguous)."""
    a = a if a.flags.c_contiguous else a.copy()
    return a.reshape(-1).reshape(a.shape) if 1 in a.shape else a


def _squeezed(xp, values, index, d, keepdim):
    if not keepdim:
        values, index = xp.squeeze(values, axis=d), xp.squeeze(index, axis=d)
    return values, _fresh(xp, index.astype(np.int64, copy=False))


@op("kthvalue(input, k, dim=-1, keepdim=False)", promote=SAME,
    namedtuple=return_types.kthvalue)
def kthvalue(xp, x, k, dim, keepdim):
    """The ``k``-th smallest element (``k`` counts from 1) along ``dim`` and its index."""
    k = int_param(k, ("kthvalue", "k", 1))
    d = wrap_dim(dim, x.ndim, ("kthvalue", "dim", 2))
    if x.ndim == 0:
        if k != 1:
            raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
        return x.copy(), xp.zeros((), dtype=np.int64)
    require_nonempty("kthvalue", x.shape, (d,), full=False)
    if not 1 <= k <= x.shape[d]:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    _check_dtype(KTHVALUE, x)
    index = xp.ascontiguousarray(stable_order(xp, x, d)[(slice(None),) * d + (slice(k - 1, k),)])
    return _squeezed(xp, xp.take_along_axis(x, index, axis=d), index, d, keepdim)


@kthvalue.derivative(outputs=(1,))
def _(grads, x, k, dim, keepdim, *, out):
    return route_to_indices(grads, x, dim, keepdim, out=out)


kthvalue.reads_inputs(())   # the indices and the input's size: PyTorch saves no input


@op("mode(input, dim=-1, keepdim=False)", promote=SAME, namedtuple=return_types.mode)
def mode(xp, x, dim, keepdim):
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and the
    index of its last occurrence."""
    d = wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype=np.int64)
    require_nonempty("mode", x.shape, (d,), full=False)
    if x.size:
        _check_dtype(MODE, x)
    n = x.shape[d]
    order = xp.moveaxis(stable_order(xp, x, d), d, -1)
    ranked = xp.take_along_axis(xp.moveaxis(x, d, -1), order, axis=-1)
    # the length of the run of equal values ending at each sorted position; the first position
    # reaching the longest run ends the smallest most frequent value
    starts = xp.ones(ranked.shape, dtype=bool)
    starts[..., 1:] = ranked[..., 1:] != ranked[..., :-1]
    positions = xp.arange(n)
    run = positions - accumulate(xp, "maximum", xp.where(starts, positions, 0), -1)
    end = xp.argmax(run, axis=-1)[..., None]
    index = xp.moveaxis(xp.take_along_axis(order, end, axis=-1), -1, d).copy()  # row-major
    return _squeezed(xp, xp.take_along_axis(x, index, axis=d), index, d, keepdim)


@mode.derivative(outputs=(1,))
def _(grads, x, dim, keepdim, *, out):
    return route_to_indices(grads, x, dim, keepdim, out=out)


mode.reads_inputs(())       # the indices and the input's size: PyTorch saves no input


# --- unique, unique_consecutive -----------------------------------------------------------------

def _no_complex(x, kernel):
    if x.dtype.kind == "c":
        raise NotImplementedError(_not_implemented(kernel)(D.FROM_NUMPY[x.dtype]))


def _runs(xp, rows, order):
    """Group equal consecutive rows of ``rows`` (n, m), taken in ``order`` (None: as they are):
    (first row of each group, inverse index per original row, group sizes). NaN equals nothing,
    so every NaN is its own group, as in PyTorch."""
    n = rows.shape[0]
    ranked = rows if order is None else rows[order]
    starts = xp.ones(n, dtype=bool)
    starts[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    first = xp.flatnonzero(starts)
    ids = xp.cumsum(starts) - 1
    if order is not None:
        inverse = xp.empty(n, dtype=np.int64)
        inverse[order] = ids
        ids = inverse
    counts = xp.diff(xp.append(first, n))
    return ranked[first], ids.astype(np.int64, copy=False), counts.astype(np.int64, copy=False)


def _unique(xp, x, consecutive, return_inverse, return_counts, dim):
    """unique and unique_consecutive: of all elements, or of the slices along ``dim``."""
    if dim is None:
        flat = x.reshape(-1, 1)
        order = None if consecutive else xp.argsort(flat[:, 0], kind="stable")
        values, inverse, counts = _runs(xp, flat, order)
        values, inverse = values[:, 0], inverse.reshape(x.shape)
    else:
        if x.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        d = wrap_dim(dim, x.ndim)
        moved = xp.moveaxis(x, d, 0)
        n = moved.shape[0]
        if n and x.size == 0:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so "
                               "unique cannot be applied")
        rows = moved.reshape(n, math.prod(moved.shape[1:]))
        order = None
        if not consecutive and n:
            order = xp.lexsort(rows.T[::-1]) if rows.shape[1] else xp.arange(n)
        values, inverse, counts = _runs(xp, rows, order) if n else (
            rows, xp.zeros(0, dtype=np.int64), xp.zeros(0, dtype=np.int64))
        values = xp.moveaxis(values.reshape((-1,) + moved.shape[1:]), 0, d)
    outputs = (values,) + ((inverse,) if return_inverse else ()) + \
        ((counts,) if return_counts else ())
    return outputs if len(outputs) > 1 else values


def _no_derivative(name, error=NotImplementedError, text="the derivative for '{}' is not "
                   "implemented."):
    """A derivative that raises PyTorch's error: the op's outputs require grad, but backward
    through them is not implemented."""
    def derivative(grad, *args):
        raise error(text.format(name(*args) if callable(name) else name))
    return derivative


@op("unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None)",
    promote=SAME, out=False)
def unique(xp, x, sorted, return_inverse, return_counts, dim):
    """The distinct elements (or slices along ``dim``) in ascending order; with the flags, also
    each element's index among them and how often each occurs."""
    _no_complex(x, "unique" if dim is None else "unique_dim")
    return _unique(xp, x, False, return_inverse, return_counts, dim)


unique.derivative(_no_derivative(lambda x, s, i, c, dim: "_unique2" if dim is None
                                 else "unique_dim"))
unique.refuse_forward_ad(lambda flat, params: "_unique2" if params[3] is None else "unique_dim")


@unique.named_by
def _(flat, params, out):
    return "Unique2Backward0" if params[3] is None else "UniqueDimBackward0"


@op("unique_consecutive(input, return_inverse=False, return_counts=False, dim=None)",
    promote=SAME, out=False)
def unique_consecutive(xp, x, return_inverse, return_counts, dim):
    """``input`` with each run of equal consecutive elements (or slices along ``dim``) kept
    once; with the flags, also each element's run index and the run lengths."""
    # (PyTorch's kernel without a dim also takes dim=0, as written, of a 1-D input)
    _no_complex(x, "unique" if dim is None or dim == 0 and x.ndim == 1 else "unique_dim")
    return _unique(xp, x, True, return_inverse, return_counts, dim)


unique_consecutive.derivative(_no_derivative("unique_consecutive"))
unique_consecutive.refuse_forward_ad("unique_consecutive")


from ember.ops import calculus, histograms, quantiles, vectors  # noqa: E402,F401

ALIASES = {**calculus.ALIASES}
PUBLIC = {**calculus.PUBLIC}
