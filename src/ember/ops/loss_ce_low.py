"""cross_entropy of float16/bfloat16 logits with class-index targets, as PyTorch computes it:
``log_softmax``, then ``nll_loss`` and, with label smoothing, the smoothing term, each result
rounded to the input's dtype. The fused float32 computation of the other dtypes rounds once,
and its losses and gradients differed from PyTorch's in the last bits of most elements."""

import numpy as np

from ember.ops.log_space import log_softmax, log_softmax_grad

_F32 = np.float32


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
