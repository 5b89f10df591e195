"""What the reductions share: dims and dtype handling, constant masks, and two
internal ops that route gradients through indices (``_take_along_dim``, ``_index_grad``)."""

import math
import threading

import numpy as np

from ember import _dtype as D
from ember._tensor import _make
from ember._warn import warn_once
from ember.ops._barebones import REFUSED, refusal
from ember.autograd.grad_mode import STATE as _GRAD
from ember.backend import combine_at, xp_of
from ember.ops._dims import wrap_dim
from ember.ops._promotion import Policy
from ember.ops._registry import op

__all__ = ["SUM", "expand_reduced", "unsqueeze_reduced", "view_reduced", "reduced_numel",
           "is_all", "int_dim", "wide", "cpu_wide",
           "cast_input", "rejecting", "require_nonempty", "as_written", "constant", "any_zero",
           "grad_enabled",
           "TRANSFORM_BACKWARD", "torch_grad_mode",
           "spread", "route_to_indices", "flip", "shift_in_one", "row_major"]

_WIDEN = {D.float16.np: np.dtype(np.float32), D.bfloat16.np: np.dtype(np.float32)}
# PyTorch's CPU scans (cumsum, cumprod, logcumsumexp) and moments (var, std) keep their running
# values in double for float32: a million float32 steps of a scan would drift by 1%, and the
# std of float32 values whose variance overflows float32 is still finite
_CPU_WIDEN = {**_WIDEN, np.dtype(np.float32): np.dtype(np.float64),
              np.dtype(np.complex64): np.dtype(np.complex128)}


def _sum_rule(d, name, operands):
    return D.int64 if d.category <= D.INTEGRAL else d


SUM = Policy("sum", _sum_rule)      # integers and bool accumulate (and return) in int64


def expand_reduced(grad, shape, dims, keepdim):
    """Broadcast a reduction's gradient back over the reduced ``dims`` of ``shape``."""
    if not grad.ndim:                   # a full reduction: a 0-dim gradient expands as it is
        return _expand(grad, shape)
    if not keepdim:
        for d in sorted(dims):          # one unsqueeze per dim, as PyTorch's graph shows
            grad = grad.unsqueeze(d)
    return grad.expand(shape)


def unsqueeze_reduced(grad, dims, keepdim):
    """A reduction's gradient with its reduced ``dims`` back as size-1 dims, one unsqueeze per
    dim: PyTorch's derivatives let the next binary op broadcast it (no ExpandBackward0)."""
    if not keepdim:
        for d in sorted(dims):
            grad = grad.unsqueeze(d)
    return grad


def view_reduced(grad, shape, dims, keepdim):
    """A reduction's gradient viewed with its reduced ``dims`` as size-1 dims (one
    ViewBackward0, as PyTorch's amax and amin derivatives restore them)."""
    if keepdim:
        return grad
    return grad.view([1 if d in dims else n for d, n in enumerate(shape)])


def reduced_numel(shape, dims):
    """How many elements each output element of a reduction over ``dims`` summarizes."""
    return math.prod(shape[d] for d in dims)


def is_all(dim):
    """Whether a ``dim`` argument means every dim (None, or an empty tuple or list)."""
    return dim is None or (isinstance(dim, (tuple, list)) and not dim)


def int_dim(name, dim, ndim, position=None):
    """A single ``dim`` argument (ops that take no dim tuples), wrapped; with ``position`` (in
    the method form) a TypeError names it as PyTorch's parser does."""
    if position is not None:
        return wrap_dim(dim, ndim, (name, "dim", position))
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    return wrap_dim(dim, ndim)


# --- dtypes -----------------------------------------------------------------------------------

def wide(x):
    """``x`` in the dtype to accumulate in: 16-bit floats in float32, as PyTorch's kernels do."""
    to = _WIDEN.get(x.dtype)
    return x if to is None else x.astype(to)


def cpu_wide(xp, x):
    """``x`` in the dtype PyTorch's scans and moments accumulate in: on the CPU float32 (and
    complex64) in double too; on a GPU, as PyTorch's CUDA kernels, only as ``wide``."""
    to = (_CPU_WIDEN if xp is np else _WIDEN).get(x.dtype)
    return x if to is None else x.astype(to)


def extreme(xp, x, name, axis=None, keepdims=False):
    """``x``'s ``name`` ("max" or "min") over ``axis`` (all by default), NaN where a NaN is;
    empty reductions must be refused first. On NumPy the identity as ``initial`` gives the
    same values, but along a short last axis (4096 rows of 64) a loop 2.5x as fast."""
    if xp is not np:
        return getattr(xp, "a" + name)(x, axis=axis, keepdims=keepdims)
    kind = x.dtype.kind
    if kind == "f":
        initial = -np.inf if name == "max" else np.inf
    elif kind in "iu":
        info = np.iinfo(x.dtype)
        initial = info.min if name == "max" else info.max
    elif kind == "b":
        initial = name == "min"
    else:
        return getattr(x, name)(axis=axis, keepdims=keepdims)
    return getattr(x, name)(axis=axis, keepdims=keepdims, initial=initial)


def narrow_to(result, dtype):
    """A reduction's result in ``dtype`` (converting only when it differs: 0-d results are
    NumPy scalars, whose ``astype`` costs a microsecond)."""
    return result if result.dtype == dtype else result.astype(dtype)


def row_major(x, result):
    """A reduction's ``result`` laid out row-major, as PyTorch allocates it (NumPy follows a
    non-contiguous ``x``'s dim order, and the strides of its dims of size 1; a row-major
    ``x``'s result it lays out row-major, unless empty: nothing to do then)."""
    if result.ndim < 2 or x.flags.c_contiguous and x.size:
        return result
    if not result.flags.c_contiguous:
        return result.copy()
    return result.reshape(-1).reshape(result.shape)      # (row-major size-1 strides: a view)


def cast_input(x, dtype, name):
    """``x`` cast to a ``dtype=`` argument (PyTorch casts before reducing)."""
    if dtype is None:
        return x
    if dtype in D.FLOAT8:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtype._torch_name}'")
    if dtype in D.WIDE_UNSIGNED and name in REFUSED:    # (ops/_barebones.py)
        raise refusal(REFUSED[name], dtype)
    if x.dtype.kind == "c" and not dtype.is_complex:
        if dtype is D.bool_:        # (nonzero: the imaginary part counts, and no warning)
            return x != 0
        warn_once("Casting complex values to real discards the imaginary part")
        x = x.real
    return x.astype(dtype.np, copy=False)


def rejecting(name, kinds, error, message):
    """A dtype policy that keeps the input dtype but rejects dtype categories.

    ``kinds``: the rejected ember dtype categories; ``message(dtype)`` builds the error text.
    """
    def rule(d, op_name, operands):
        if d.category in kinds:
            raise error(message(d))
        return d
    return Policy(name, rule)


def as_written(dim, dims):
    """The reduced dims as the caller wrote them (negative ones kept, in their order), for
    errors that name a dim as PyTorch's amax and vector_norm do; ``dims`` when none was."""
    if isinstance(dim, int):
        return (dim,)
    if isinstance(dim, (tuple, list)):
        return tuple(dim) if dim else dims
    return dims if dim is None else (dim.__index__(),)     # (a 0-d integer tensor)


def require_nonempty(name, shape, dims, full, error=RuntimeError):
    """PyTorch's errors for reductions without an identity (max, amin, ...) over no elements.

    ``full``: the reduction covers every dim because none was given. ``dims`` may hold
    negative dims (see ``as_written``): the message names them as given.
    """
    if full:
        if math.prod(shape) == 0:
            if error is IndexError:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                                 f"input.numel() == 0.")
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                               f"input.numel() == 0. Specify the reduction dim with the 'dim' "
                               f"argument.")
        return
    for d in dims:
        if shape and shape[d % len(shape)] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


# --- constants in derivatives -----------------------------------------------------------------

def constant(fn, *tensors):
    """``fn(xp, *arrays)`` of the ``tensors``' values as a tensor outside the graph: the masks
    and counts of derivatives, which are piecewise constant in the inputs."""
    arrays = [t._data for t in tensors]
    xp = xp_of(arrays[0])
    return _make(xp.asarray(fn(xp, *arrays)))


def any_zero(t):
    """Whether ``t`` holds a zero (products divide by their factors only when it does not)."""
    return bool(constant(lambda xp, a: (a == 0).any(), t))


def grad_enabled():
    """Whether a derivative runs under ``create_graph`` (its result must be differentiable)."""
    return _GRAD.grad_enabled


class _TransformBackward(threading.local):
    depth = 0       # how many ember.func transforms are running the engine backward now


TRANSFORM_BACKWARD = _TransformBackward()


def torch_grad_mode():
    """Whether PyTorch would run this derivative in grad mode: under ``create_graph``, or for a
    ``torch.func`` transform, whose backward passes always run in grad mode (where a
    derivative's first-order shortcut gives values of its own, it must not take it then)."""
    return _GRAD.grad_enabled or TRANSFORM_BACKWARD.depth > 0


def spread(grad, x, value):
    """The gradient of a full reduction that selects ``value``, shared evenly by every element
    equal to it (NaN counts as equal to a NaN ``value``): max(), min(), median()."""
    def ties(xp, a, v):
        return a == v if a.dtype.kind in "biu" else (a == v) | (xp.isnan(a) & xp.isnan(v))
    mask = constant(ties, x, value)
    count = constant(lambda xp, m: m.sum(), mask)
    # zeros with grad / count where the ties are: PyTorch's node (MaskedFillBackward1)
    return grad.new_zeros(x.shape).masked_fill(mask, grad / count)


def route_to_indices(grads, x, dim, keepdim, *, out):
    """The derivative of ops returning (values, indices) along ``dim`` (max(dim), median(dim)):
    each gradient goes to the element its index picked."""
    grad, indices = grads[0], out[1]
    dim = wrap_dim(dim, x.ndim) if x.ndim else 0
    if not keepdim and x.ndim:
        grad, indices = grad.unsqueeze(dim), indices.unsqueeze(dim)
    # zeros with the gradient scattered in: PyTorch's node (ScatterBackward0)
    return grad.new_zeros(x.shape).scatter(dim, indices, grad)


def flip(t, dim):
    """``t`` reversed along ``dim`` (differentiable)."""
    n = t.shape[dim]
    return _take_along_dim(t, _along(t, np.arange(n - 1, -1, -1), dim), dim)


def shift_in_one(t, dim):
    """``t`` moved one step along ``dim``, a one coming in: ``[1, t0, ..., t(n-2)]``
    (differentiable; the dropped last element cannot leak a NaN into the result)."""
    n = t.shape[dim]
    if n == 0:
        return t
    head = _take_along_dim(t, _along(t, np.arange(n - 1), dim), dim)
    shifted = _index_grad(head, _along(head, np.arange(1, n), dim), dim, tuple(t.shape))
    first = constant(lambda xp, a: (xp.arange(n) == 0).reshape(
        [n if d == dim else 1 for d in range(a.ndim)]).astype(a.dtype), t)
    return shifted + first


def _along(t, positions, dim):
    """An int64 index tensor selecting ``positions`` along ``dim``, broadcast to ``t``."""
    xp = xp_of(t._data)
    shape = [1] * t.ndim
    shape[dim] = len(positions)
    index = xp.asarray(positions, dtype=np.int64).reshape(shape)
    full = list(t.shape)
    full[dim] = len(positions)
    return _make(xp.broadcast_to(index, full))


# --- index routing ops ------------------------------------------------------------------------

@op("_take_along_dim(input, index, dim)", inputs=2, method=False)
def _take_along_dim(xp, x, index, dim):
    """The elements of ``input`` at ``index`` along ``dim`` (``index`` has input's ndim)."""
    return xp.take_along_axis(x, index, axis=dim)


@_take_along_dim.derivative
def _(grad, x, index, dim):
    return _index_grad(grad, index, dim, tuple(x.shape)), None


@op("_index_grad(grad, index, dim, shape)", inputs=2, method=False)
def _index_grad(xp, grad, index, dim, shape):
    """Zeros of ``shape`` with ``grad`` added at ``index`` along ``dim`` (repeats accumulate)."""
    out = xp.zeros(shape, dtype=grad.dtype)
    if index.shape[dim] == 1:
        xp.put_along_axis(out, index, grad, axis=dim)       # one index per slice: no repeats
        return out
    where = [xp.arange(n).reshape([n if k == d else 1 for k in range(index.ndim)])
             for d, n in enumerate(index.shape)]          # CuPy's indices has no sparse=
    where[dim] = index
    combine_at(xp, np.add, out, tuple(where), grad)
    return out


@_index_grad.derivative
def _(grad, g, index, dim, shape):
    return _take_along_dim(grad, index, dim), None


def _refuse_dim(name, dim, overloaded):
    """PyTorch's TypeError for a ``dim`` of ``max``/``median`` & co that is no int, if it is
    none: an "invalid combination" for an op ``overloaded`` on it (``max(x, tensor)``) given
    ``dim`` alone."""
    from ember.ops._dims import given_count, int_error, invalid_combination, is_index
    if is_index(dim):
        return
    if overloaded and given_count((dim,)) == 1:
        raise invalid_combination(name, (dim,))
    from ember.ops._overloads import in_parser_words
    error = int_error(dim, (name, "dim", 1))
    raise type(error)(in_parser_words(str(error)))


_NO = object()      # an argument of with_optional_dim's functions that was not given


def _out_of_function(name, out):
    """``out``, given to ``name``; Tensor's method takes none (a method call raises)."""
    from ember.ops._call_site import call_site
    site = call_site()
    if site is not None and site.kind == "method":
        raise TypeError(f"{name}() got an unexpected keyword argument 'out'")
    return out


def _refuse_overload(name, dim, keepdim, other):
    """PyTorch's TypeError for arguments no overload of ``name`` takes: ``median`` (one
    overload with a ``dim``) misses its ``dim``, ``max`` finds no combination."""
    from ember.ops._dims import invalid_combination
    if dim is _NO and other is None and name in ("median", "nanmedian"):
        raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
    given = tuple(v for v in (dim, keepdim) if v is not _NO)
    raise invalid_combination(name, given + (() if other is None else (other,)))


def with_optional_dim(name, whole, along, pairwise=None):
    """The public ``max``/``median``-style function: ``whole`` without ``dim``, the named
    tuple op ``along`` with it, and (``max``/``min``) the ``pairwise`` op for a tensor.
    PyTorch declares these as overloads, so a ``dim`` of None, a ``keepdim`` without ``dim``
    and ``keepdim`` or a second tensor beside ``other`` match none of them; ``_NO`` (the
    defaults) tells an argument not given from one given as None."""
    from ember._tensor import Tensor
    from ember.ops._arg_aliases import UNSET, alias_arg, numpy_names
    from ember.ops._dims import is_index
    from ember.ops._registry import REGISTRY

    @numpy_names
    def function(input, dim=_NO, keepdim=_NO, *, other=None, out=_NO, axis=UNSET,
                 keepdims=UNSET):
        if axis is not UNSET:
            dim = alias_arg(dim, axis, _NO, name, "axis")
        if keepdims is not UNSET:
            keepdim = alias_arg(keepdim, keepdims, _NO, name, "keepdims")
        # (no parameter rebound: an error's message reads them, see ops/_call_site.py)
        out_given = out is not _NO
        target = _out_of_function(name, out) if out_given else None
        if other is not None and pairwise is None:
            raise TypeError(f"{name}() got an unexpected keyword argument 'other'")
        if pairwise is not None and (isinstance(dim, Tensor) or other is not None):
            if other is None and keepdim is not _NO and is_index(dim):
                pass        # max(x, tensor(1), True): a 0-d integer tensor is a dim
            elif keepdim is not _NO or other is not None and dim is not _NO:
                _refuse_overload(name, dim, keepdim, other)
            else:
                return REGISTRY[pairwise].function(input, dim if other is None else other,
                                                   out=target)
        if dim is _NO:
            if keepdim is not _NO or pairwise is None and out_given:
                _refuse_overload(name, dim, keepdim, other)
            return whole.function(input, out=target)
        if dim is None:
            _refuse_dim(name, dim, pairwise is not None)
        if target is not None and not isinstance(target, (tuple, list)):
            from ember.ops._dims import type_name
            from ember.ops._overloads import in_parser_words
            raise TypeError(in_parser_words(f"{name}(): argument 'out' must be tuple of "
                                            f"Tensors, not {type_name(target)}"))
        try:
            return along.function(input, dim, False if keepdim is _NO else keepdim, out=target)
        except TypeError:
            _refuse_dim(name, dim, pairwise is not None)
            raise
    function.__signature__ = function.__signature__.replace(parameters=[
        p.replace(default=False if p.name == "keepdim" else None) if p.default is _NO else p
        for p in function.__signature__.parameters.values()])
    function.__name__ = function.__qualname__ = name
    function.__module__ = "ember"
    # a code of its own: an error path tells max from min by its frame (ops/_call_site.py)
    function.__code__ = function.__code__.replace(co_name=name, co_qualname=name)
    what = f"{name}imum" if pairwise else name
    function.__doc__ = (f"The {what} of all elements; with ``dim``, the named tuple (values, "
                        f"indices) along it" + (f"; with a tensor ``other``, ``{pairwise}``."
                                               if pairwise else "."))
    return function


from ember.ops.shape import expand as _expand  # noqa: E402  (shape's ops import this module)
