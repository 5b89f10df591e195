"""quantile and nanquantile: order statistics interpolated between the two nearest ranks.

The forward sorts (NaN last), turns each q into a fractional rank in the input dtype, and
interpolates between the values at its floor and ceiling, as PyTorch does; the gradient goes to
those two elements with the interpolation weights (and, for linear interpolation, to q)."""

import numpy as np

from ember.backend import xp_of
from ember.ops._reduce import _index_grad, _take_along_dim, int_dim
from ember.ops._registry import op
from ember.ops.binary_math import lerp, where

_MODES = ("linear", "lower", "higher", "midpoint", "nearest")
# PyTorch refuses to sort more than 2**24 elements per quantile (their ranks are computed in the
# input's float dtype), however many rows the other dims hold
_MAX_REDUCED = 2 ** 24


def check_before_out(x, q, interpolation):
    """PyTorch's argument checks (of arrays ``x`` and ``q``, or a number ``q``) that come
    before its check of an ``out=`` tensor's dtype (ops/_out_compute.py), in its order."""
    scalar = not hasattr(q, "ndim")
    if scalar and not 0 <= q <= 1:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q:g}")
    if not isinstance(interpolation, str):      # (the parser's check: a str)
        from ember.ops._call_site import call_site
        from ember.ops._dims import invalid_combination
        site = call_site()
        raise invalid_combination("quantile" if site is None else site.name, (q, interpolation))
    if interpolation not in _MODES:
        raise RuntimeError(f"quantile() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if x.size == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if not scalar and q.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if x.dtype not in (np.float32, np.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if not scalar and q.dtype != x.dtype:
        raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")


def _check(xp, x, q, dim, interpolation):
    """PyTorch's argument checks, in its order; returns q as a 1-D array of the input dtype."""
    check_before_out(x, q, interpolation)
    scalar = not hasattr(q, "ndim")
    if dim is not None:
        int_dim("quantile", dim, x.ndim)
    if not scalar and not ((q >= 0) & (q <= 1)).all():
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    reduced = x.size if dim is None or x.ndim == 0 else x.shape[int_dim("quantile", dim, x.ndim)]
    if reduced > _MAX_REDUCED:
        raise RuntimeError("quantile() input tensor is too large")
    return xp.asarray(q, dtype=x.dtype).reshape(-1)


def _rows(xp, x, dim):
    """``x`` as (..., n) with the reduced elements last (all of them when dim is None)."""
    if dim is None:
        return x.reshape(-1)
    return xp.moveaxis(x, int_dim("quantile", dim, x.ndim), -1) if x.ndim else x.reshape(1)


def _ranks(xp, x, q, dim, interpolation, ignore_nan):
    """(order, sorted rows, lower rank, upper rank, weight of the upper one): the rows are
    ``x`` as (..., n), sorted NaN last; ``order`` maps sorted positions to row positions; the
    ranks and weights have shape (..., len(q))."""
    rows = _rows(xp, x, dim)
    order = xp.argsort(rows, axis=-1, kind="stable")
    ranked = xp.take_along_axis(rows, order, axis=-1)
    nan = xp.isnan(ranked)
    if ignore_nan:
        # all-NaN rows get rank 0, so their quantile is NaN
        count = (~nan).sum(axis=-1, keepdims=True) - 1
        ranks = q * count.astype(x.dtype)
        ranks = xp.where(ranks < 0, x.dtype.type(0), ranks)
    else:
        # a row holding NaN gets the last rank, so its quantile is NaN
        last = rows.shape[-1] - 1
        ranks = xp.where(nan.any(axis=-1, keepdims=True), x.dtype.type(last), q * last)
    if interpolation in ("lower", "higher", "nearest"):
        ranks = {"lower": xp.floor, "higher": xp.ceil, "nearest": xp.round}[interpolation](ranks)
    below = ranks.astype(np.int64)
    above = xp.ceil(ranks).astype(np.int64)
    if interpolation == "linear":
        weight = ranks - below.astype(x.dtype)
    elif interpolation == "midpoint":
        weight = xp.full(ranks.shape, 0.5, dtype=x.dtype)
    else:
        weight = xp.zeros(ranks.shape, dtype=x.dtype)
    return order, ranked, below, above, weight


def _shape_out(xp, x, q, dim, keepdim, values):
    """The (..., len(q)) ``values`` in the output layout: q's dim first (none for a number q),
    then the input's dims, the reduced one kept as size 1 with ``keepdim``."""
    if dim is None:
        kept = (1,) * x.ndim if keepdim else ()
    else:
        d = int_dim("quantile", dim, x.ndim)
        kept = tuple(1 if i == d else s for i, s in enumerate(x.shape)
                     if keepdim or i != d) if x.ndim else ()
    values = values.reshape(kept + values.shape[-1:])
    if not hasattr(q, "ndim") or q.ndim == 0:
        return values[..., 0]
    return xp.moveaxis(values, -1, 0)


def _quantile(xp, x, q, dim, keepdim, interpolation, ignore_nan):
    qs = _check(xp, x, q, dim, interpolation)
    _, ranked, below, above, weight = _ranks(xp, x, qs, dim, interpolation, ignore_nan)
    low = xp.take_along_axis(ranked, below, axis=-1)
    if interpolation in ("linear", "midpoint"):
        low = lerp.forward(xp, low, xp.take_along_axis(ranked, above, axis=-1), weight)
    return _shape_out(xp, x, q, dim, keepdim, low)


def _routing(xp, x, q, dim, interpolation, ignore_nan):
    """Per row and q: the row positions of the two interpolated elements, the weight of the
    upper one, and d rank / d q (the number of ranks; 0 where the rank was overridden)."""
    order, ranked, below, above, weight = _ranks(xp, x, q, dim, interpolation, ignore_nan)
    nan = xp.isnan(ranked)
    if ignore_nan:
        count = (~nan).sum(axis=-1, keepdims=True) - 1
        scale = xp.where(q * count < 0, 0, count)
    else:
        scale = xp.where(nan.any(axis=-1, keepdims=True), 0, ranked.shape[-1] - 1)
    return (xp.take_along_axis(order, below, axis=-1), xp.take_along_axis(order, above, axis=-1),
            weight, xp.broadcast_to(scale, weight.shape).astype(x.dtype))


def _quantile_grad(grad, x, q, dim, keepdim, interpolation, ignore_nan):
    """The gradient for x (to the two interpolated elements of each row, by the interpolation
    weights) and for a tensor q (linear interpolation only: the slope between the two elements
    times d rank / d q)."""
    from ember._tensor import Tensor, _make
    xp = xp_of(x._data)
    q_tensor = isinstance(q, Tensor)
    qs = xp.asarray(q._data if q_tensor else q, dtype=x._data.dtype).reshape(-1)
    below, above, w, scale = (_make(xp.ascontiguousarray(a)) for a in
                              _routing(xp, x._data, qs, dim, interpolation, ignore_nan))
    # the gradient in the (..., len(q)) layout of the ranks
    g = grad.movedim(0, -1) if q_tensor and q.ndim == 1 else grad.unsqueeze(-1)
    g = g.reshape(below.shape)
    rows = _rows_tensor(x, dim)
    last = rows.ndim - 1
    grad_rows = (_index_grad(g * (1 - w), below, last, tuple(rows.shape))
                 + _index_grad(g * w, above, last, tuple(rows.shape)))
    grad_q = None
    if q_tensor and interpolation == "linear":
        slope = _take_along_dim(rows, above, last) - _take_along_dim(rows, below, last)
        # where the rank was overridden its slope (NaN - NaN in a NaN row) must not leak
        through = where(scale != 0, g * slope * scale, 0.0)
        grad_q = through.reshape(-1, qs.shape[0]).sum(0).reshape(q.shape)
    return _rows_back(grad_rows, x, dim), grad_q


def _rows_tensor(x, dim):
    if dim is None:
        return x.reshape(-1)
    if x.ndim == 0:
        return x.reshape(1)
    return x.movedim(int_dim("quantile", dim, x.ndim), -1)


def _rows_back(g, x, dim):
    if dim is None or x.ndim == 0:
        return g.reshape(x.shape)
    return g.movedim(-1, int_dim("quantile", dim, x.ndim))


_SIGNATURE = "(input, q, dim=None, keepdim=False, *, interpolation='linear')"


@op("quantile" + _SIGNATURE, inputs=2, scalars=True, out=True)
def quantile(xp, x, q, dim, keepdim, interpolation):
    """The ``q``-quantiles (a number or a 1-D tensor in [0, 1]) over ``dim`` (all elements by
    default), interpolating between ranks; NaN wherever the reduced elements hold a NaN."""
    return _quantile(xp, x, q, dim, keepdim, interpolation, False)


def _squeezed(flat, params, out):
    """PyTorch's quantile ends by squeezing the sorted dim: its node is SqueezeBackward4."""
    return "SqueezeBackward4"


quantile.named_by(_squeezed)


@quantile.derivative
def _(grad, x, q, dim, keepdim, interpolation):
    return _quantile_grad(grad, x, q, dim, keepdim, interpolation, False)


@op("nanquantile" + _SIGNATURE, inputs=2, scalars=True, out=True)
def nanquantile(xp, x, q, dim, keepdim, interpolation):
    """``quantile`` ignoring NaN: the quantiles of the other elements (NaN if all are NaN)."""
    return _quantile(xp, x, q, dim, keepdim, interpolation, True)


nanquantile.named_by(_squeezed)


@nanquantile.derivative
def _(grad, x, q, dim, keepdim, interpolation):
    return _quantile_grad(grad, x, q, dim, keepdim, interpolation, True)


# PyTorch's composite saves the sort's indices and the interpolation weights: no input
quantile.copies_inputs(0, 1)
nanquantile.copies_inputs(0, 1)


ALIASES = {}
