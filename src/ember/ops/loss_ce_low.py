"""cross_entropy of float16/bfloat16 logits as PyTorch computes it. Class-index targets:
``log_softmax``, then ``nll_loss`` and, with label smoothing, the smoothing term, each result
rounded to the input's dtype; class-probability targets: the composite at the end. The fused
float32 computation of the other dtypes rounds once, and its losses and gradients differed
from PyTorch's in the last bits of most elements."""

import numpy as np

from ember import _dtype as D
from ember.ops._scalars import rounded_number
from ember.ops.log_space import log_softmax, log_softmax_grad

_F32 = np.float32
LOW = D.HALF_NP


def _rounded(a, dtype):
    """float32 ``a`` rounded to ``dtype`` and back to float32."""
    return np.asarray(a, _F32).astype(dtype).astype(_F32)


def _class_dim(x):
    return 1 if x.ndim > 1 else 0


def _weight_along_classes(w, ndim, dim):
    return w.reshape((-1,) + (1,) * (ndim - 1 - dim))


def low_precision_loss(xp, x, t, w, ignore_index, reduction, smoothing, nll_forward):
    """The loss, from arrays (``nll_forward``: nll_loss's forward)."""
    dim = _class_dim(x)
    lsm = log_softmax.forward(xp, x, dim, None)
    nll = nll_forward(xp, lsm, t, w, None, ignore_index, None, reduction)
    if not smoothing > 0:
        return nll
    dtype, c = x.dtype, x.shape[dim]
    terms = lsm.astype(_F32)
    if w is not None:
        terms = _rounded(terms * _weight_along_classes(w.astype(_F32), x.ndim, dim), dtype)
    kept = t != ignore_index
    smooth = xp.where(kept, -_rounded(terms.sum(axis=dim, dtype=_F32), dtype), _F32(0))
    if reduction == "none":
        term = smooth
    else:
        term = _rounded(smooth.sum(dtype=_F32), dtype)
        if reduction == "mean":
            kept_weights = kept.sum() if w is None else \
                xp.where(kept, w.astype(_F32)[xp.where(kept, t, 0)], _F32(0)).sum(dtype=_F32)
            term = _rounded(term / _rounded(kept_weights, dtype), dtype)
    loss = _rounded(nll.astype(_F32) * _F32(1 - smoothing), dtype) + \
        _rounded(term * _F32(smoothing / c), dtype)
    return np.asarray(loss.astype(dtype)).reshape(nll.shape)


def low_precision_grad(grad, x, t, w, ignore_index, reduction, smoothing, nll_grad):
    """The input's gradient, from tensors through ember ops, in the order autograd takes
    PyTorch's composite (``nll_grad``: nll_loss's derivative)."""
    dim = _class_dim(x)
    lsm = log_softmax(x, dim)
    if not smoothing > 0:
        grad_lsm = nll_grad(grad, lsm, t, w, None, ignore_index, None, reduction)[0]
        return log_softmax_grad(grad_lsm, lsm, dim)
    grad_lsm = nll_grad(grad * (1 - smoothing), lsm, t, w, None, ignore_index, None, reduction)[0]
    grad_term = grad * (smoothing / x.shape[dim])
    kept = t != ignore_index
    if reduction == "mean":
        grad_term = grad_term / (kept.sum() if w is None else w[t[kept]].sum())
    grad_smooth = -grad_term.expand(t.shape).masked_fill(~kept, 0.0)
    grad_smooth = grad_smooth.unsqueeze(dim).expand(lsm.shape)
    if w is not None:
        grad_smooth = grad_smooth * w.reshape(_weight_along_classes(w, x.ndim, dim).shape)
    return log_softmax_grad(grad_lsm + grad_smooth, lsm, dim)


# --- class-probability targets ----------------------------------------------------------------
# PyTorch composes this loss of ops: -(log_softmax(x) * q [* w]).sum(...) [/ (numel / C)], with
# q = t * (1 - s) + s / C when smoothing; each op rounds to the 16-bit dtype, and autograd
# takes their derivatives in turn.

def is_low_probability_case(x, t, w):
    """Whether ``x``, ``t`` (and ``w``) share one 16-bit dtype and ``x`` is not empty."""
    dtype = x.dtype
    return dtype in LOW and t.dtype == dtype and (w is None or w.dtype == dtype) and x.size > 0


def low_precision_probability_loss(xp, x, t, w, reduction, smoothing):
    """The loss of 16-bit class-probability targets, from arrays of one dtype."""
    dim = _class_dim(x)
    dtype, c = x.dtype, x.shape[dim]
    lsm = log_softmax.forward(xp, x, dim, None).astype(_F32)
    q = t.astype(_F32)
    if smoothing > 0:           # mul reads its number in float32, add rounds it first
        q = _round(q * _F32(1 - smoothing), dtype)
        q = _round(q + _F32(rounded_number(smoothing / c, dtype)), dtype)
    terms = _round(lsm * q, dtype)
    if w is not None:
        terms = _round(terms * _weight_along_classes(w.astype(_F32), x.ndim, dim), dtype)
    if reduction == "none":
        return (-terms.sum(axis=dim, dtype=_F32)).astype(dtype)
    total = -_round(terms.sum(dtype=_F32), dtype)
    if reduction == "mean":
        total = total / _F32(x.size / c)
    return xp.asarray(total.astype(dtype))


def low_precision_probability_grads(grad, x, t, w, reduction, smoothing):
    """(input's, target's, weight's) gradients, through ember ops in autograd's order over
    PyTorch's composite (None where not required)."""
    dim = _class_dim(x)
    c = x.shape[dim]
    lsm = log_softmax(x, dim)
    q = t * (1 - smoothing) + smoothing / c if smoothing > 0 else t
    g = -(grad / (x.numel() / c) if reduction == "mean" else grad)
    if reduction == "none" and x.ndim > 1:
        g = g.unsqueeze(dim)
    g = g.expand(x.shape)
    grad_w = None
    if w is not None:
        wc = w.reshape(_weight_along_classes(w, x.ndim, dim).shape)
        if w.requires_grad:
            grad_w = g * (lsm * q)
            grad_w = grad_w.sum([d for d in range(x.ndim) if d != dim]) if dim else grad_w
        g = g * wc
    grad_t = None
    if t.requires_grad:
        grad_t = g * lsm
        grad_t = grad_t * (1 - smoothing) if smoothing > 0 else grad_t
    return log_softmax_grad(g * q, lsm, dim), grad_t, grad_w


def _round(a, dtype):
    """float32 ``a`` (any backend) rounded to ``dtype`` and back to float32."""
    return a.astype(dtype).astype(_F32)


# --- the CPU kernels' cascaded sums -------------------------------------------------------------
# PyTorch's CPU nll_loss kernels reduce 16-bit losses in their own dtype: each sample's term
# goes into the lowest of 8 partial sums, and partial sum j is added into j + 1 after every
# position that is a multiple of 16**(j + 1) (position 0 among them); ignored positions add
# nothing and move nothing up. The partial sums are added last, lowest first, each step
# rounded. (Its CUDA kernels accumulate in float32.)

def cascaded_nll(xp, loss, kept, weights, weighted, reduction, dtype):
    """nll_loss's sum or mean of float32 per-sample ``loss`` terms (rounded products of
    log-probability and weight, negated) in the 16-bit ``dtype``, ``kept``: not ignored."""
    loss, kept = loss.reshape(-1), kept.reshape(-1)
    positions = xp.nonzero(kept)[0]
    count = loss.shape[0]
    total = cascaded_sum(xp, _round(loss[positions], dtype), positions, count, dtype)
    if reduction == "mean":
        if weighted:
            norm = cascaded_sum(xp, weights.reshape(-1)[positions], positions, count, dtype)
        else:
            norm = _round(xp.asarray(positions.shape[0], _F32), dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            total = total / norm
    return xp.asarray(total).astype(dtype)


def cascaded_sum(xp, values, positions, count, dtype):
    """The cascaded 16-bit sum of float32 ``values`` at increasing ``positions`` of ``count``
    samples, as a float32 0-d array."""
    power = max(4, (max(count - 1, 1)).bit_length() // 8)
    left = []
    for level in range(1, 8):
        ends = positions % (1 << (power * level)) == 0
        values, rest = _segment_sums(xp, values, ends, dtype)
        left.append(rest)
        positions = positions[ends]
    left.append(_segment_sums(xp, values, xp.zeros(values.shape, bool), dtype)[1])
    total = _F32(0)
    for part in left:
        total = _round(xp.asarray(total + part, _F32), dtype)
    return total


def _segment_sums(xp, values, ends, dtype):
    """Each segment's sum, added in turn and rounded at each step: (the sums of the segments
    that end where ``ends`` is True, the sum of the open one after them; 0 if none)."""
    n = values.shape[0]
    if not n:
        return values, _F32(0)
    segment = xp.cumsum(ends) - ends         # the segment of each value
    count = int(segment[-1]) + 1
    starts = xp.searchsorted(segment, xp.arange(count))
    within = xp.arange(n) - starts[segment]
    table = xp.zeros((count, int(within.max()) + 1), _F32)
    table[segment, within] = values
    sums = xp.zeros(count, _F32)
    for column in table.T:
        sums = _round(sums + column, dtype)
    if bool(ends[-1]):
        return sums, _F32(0)
    return sums[:-1], sums[-1]
