"""Batch normalization: native_batch_norm (the output, and the per-channel mean and inverse
standard deviation it normalized with, or the running statistics in eval), its fused backward
(NOTE [Fused normalization backward] in ops/_norm_shared.py) and the functional forms
``batch_norm`` and ``F.batch_norm``."""

import math

import numpy as np

from ember import _dtype as D
from ember._memory_format import like_input
from ember._tensor import _make
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.graph import carries_gradient
from ember.backend import xp_of
from ember.ops._op_errors import OpValueError
from ember.ops._norm_shared import (_F32, _FAST_DTYPES, _LOW, _check_mixed, _coefficients,
                                    _float_input, _norm_input_grad, _outside_vmap)
from ember.ops._registry import op
from ember.ops._scalars import float_arg


def _check_vectors(c, **vectors):
    for name, v in vectors.items():
        if v is not None and v.size != c:
            raise RuntimeError(f"{name} should contain {c} elements not {v.size}")


def _plane(xp, v, lanes):
    """A per-channel vector (C,) as an operand of an (N, C, L) array: a contiguous (C, L)
    plane for short rows (NumPy broadcasts a (C, 1) operand with a stride-0 inner loop, two
    to three times slower than a contiguous operand of the rows' shape), else (C, 1)."""
    v = v.reshape(-1, 1)
    if lanes == 1 or lanes >= 4096:
        return v
    return xp.ascontiguousarray(xp.broadcast_to(v, (v.shape[0], lanes)))


def _dots(xp, a, b):
    """Per-channel sums of ``a * b`` over (N, C, L) arrays, without a product array: one dot
    per row (BLAS) for long rows, one contraction for short ones."""
    if a.shape[2] >= 256:
        return xp.matmul(a[:, :, None, :], b[:, :, :, None]).sum(0).reshape(-1)
    return xp.einsum("ncl,ncl->c", a, b)


def channel_stats(xp, x3):
    """The per-channel mean and biased variance of an (N, C, L) array with N * L > 0, and the
    array centered by that mean. (A float32 sum rounds the mean an ulp or so off PyTorch's,
    which accumulates in double; correcting it by a second pass cost 13-22% of the forward.)"""
    n = x3.shape[0] * x3.shape[2]
    mean = _channel_sums(xp, x3) / n
    spans = _sample_spans(xp, x3)
    if len(spans) == 1:
        xc = xp.subtract(x3, _plane(xp, mean, x3.shape[2]))
        return mean, _dots(xp, xc, xc) / n, xc
    xc = xp.empty(x3.shape, x3.dtype)
    return mean, _centered_dots(xp, spans, x3, x3, mean, xc) / n, xc


_SPAN_BYTES = 1 << 18


def _sample_spans(xp, x3):
    """``[(lo, hi), ...]``: spans of the samples of the (N, C, L) array ``x3`` of about
    ``_SPAN_BYTES`` each, or one span of all. A pass that centers a span and takes its row
    dots then reads it from cache, not memory (32x32x32x32 float32: backward 16% and
    forward 4% less CPU time).
    Only on NumPy, for a C-contiguous ``x3`` whose rows take _dots' per-row products (their
    sum over the samples comes out the same, span by span; a contraction's would not)."""
    n, c, lanes = x3.shape
    per = c * lanes * x3.itemsize
    if xp is not np or lanes < 256 or n * per <= 2 * _SPAN_BYTES or not x3.flags.c_contiguous:
        return ((0, n),)
    step = max(1, _SPAN_BYTES // per)
    return tuple((lo, min(lo + step, n)) for lo in range(0, n, step))


def _centered_dots(xp, spans, a, x3, mean, xc):
    """``_dots(a, xc)`` for ``xc = x3 - mean`` (per channel), written into ``xc`` span by
    span (see _sample_spans); ``a`` may be ``x3`` (then the dots are of xc with itself)."""
    plane = _plane(xp, mean, x3.shape[2])
    rows = xp.empty(x3.shape[:2] + (1, 1), xc.dtype)
    for lo, hi in spans:
        part = xp.subtract(x3[lo:hi], plane, out=xc[lo:hi])
        left = part if a is x3 else a[lo:hi]
        xp.matmul(left[:, :, None, :], part[:, :, :, None], out=rows[lo:hi])
    return rows.sum(0).reshape(-1)


def _in_spans(spans, x3, *steps):
    """``x3`` changed in place by each ``(ufunc, operand)`` of ``steps`` in turn, span by span
    (an operand of x3's shape taken span by span, a per-channel plane whole)."""
    for lo, hi in spans:
        part = x3[lo:hi]
        for ufunc, operand in steps:
            ufunc(part, operand[lo:hi] if operand.shape == x3.shape else operand, out=part)


def _channel_sums(xp, a):
    """Per-channel sums of an (N, C, L) array: a matrix-vector product for rows of 16 to 511
    values (twice as fast as the contraction there), else one contraction."""
    if 16 <= a.shape[2] < 512:
        return (a @ xp.ones(a.shape[2], a.dtype)).sum(0)
    return xp.einsum("ncl->c", a)


def update_running_stats(xp, rm, rv, mean, var, n, momentum):
    """``running = (1 - momentum) * running + momentum * batch statistic`` in place, the
    variance unbiased (NaN from one value per channel, as PyTorch's). float16 statistics are
    updated in float32 and rounded once, bfloat16 ones in bfloat16 arithmetic, as PyTorch's
    (its bfloat16 running variance still differs in the last bit now and then)."""
    if rm is not None:
        _blend(rm, mean, momentum)
    if rv is not None:
        unbiased = var * n / (n - 1) if n > 1 else xp.full_like(var, np.nan)
        if rv.dtype == D.bfloat16.np and n > 1:      # from the bfloat16 sum, as PyTorch's
            unbiased = (var * n).astype(rv.dtype).astype(var.dtype) / (n - 1)
        _blend(rv, unbiased, momentum)


def _blend(running, batch, momentum):
    if running.dtype == D.bfloat16.np:
        # PyTorch's bfloat16 kernel: momentum, each product and the sum rounded to bfloat16
        low = running.dtype
        kept = running * low.type(1 - momentum)
        running[...] = kept + batch.astype(low) * low.type(momentum)
        return
    if running.dtype == np.float16:
        running[...] = ((1 - momentum) * running.astype(_F32)
                        + momentum * batch.astype(_F32)).astype(running.dtype)
        return
    running *= 1 - momentum
    running += (momentum * batch).astype(running.dtype)


@op("native_batch_norm(input, weight=None, bias=None, running_mean=None, running_var=None, "
    "training=False, momentum=0.1, eps=1e-5)", inputs=5, method=False,
    differentiable_outputs=(0,))
def native_batch_norm(xp, x, w, b, rm, rv, training, momentum, eps):
    """Batch normalization over all dims but dim 1; returns (output, mean, invstd)."""
    if x.ndim < 2:
        raise RuntimeError(f"batch_norm(): expected input to have at least 2 dims, but got "
                           f"{x.ndim}")
    if training and (rm is None) != (rv is None):     # (after the size checks, as PyTorch)
        _check_vectors(x.shape[1], running_mean=rm, running_var=rv, weight=w, bias=b)
        raise OpValueError("running_mean and running_var must either both be None or neither "
                           "be None")
    dtype = x.dtype
    x = _float_input(x, "batch_norm")
    _check_mixed(xp, dtype, w, b, rm, rv, search=(w, rm, rv, b) if training else None)
    c = x.shape[1]
    _check_vectors(c, running_mean=rm, running_var=rv, weight=w, bias=b)   # PyTorch's order
    x3 = x.reshape(_channel_rows(x.shape))      # (N, C, L): passes over contiguous rows
    lanes = x3.shape[2]
    if training:
        if not x.size:
            raise RuntimeError(f"input tensor must have at least one element, but got "
                               f"input_sizes = {list(x.shape)}")
        mean, var, out = channel_stats(xp, x3)
        update_running_stats(xp, rm, rv, mean, var, x3.shape[0] * lanes, momentum)
        if dtype == D.bfloat16.np and _stats_dtype(dtype, w, b, rm, rv) == dtype:
            var = _bfloat16_var(var, x3.shape[0] * lanes)
        invstd = _training_invstd(xp, var, eps, dtype)
    else:
        if rm is None or rv is None:
            missing = "running_mean" if rm is None else "running_var"
            raise RuntimeError(f"{missing} must be defined in evaluation mode")
        mean = rm.astype(x.dtype)
        invstd = 1 / xp.sqrt(rv.astype(x.dtype) + x.dtype.type(eps))
        out = None
    stats = _stats_dtype(dtype, w, b, rm, rv)
    if training and stats != mean.dtype:     # a 16-bit input normalizes with its saved stats
        mean, invstd = (v.astype(stats).astype(x.dtype) for v in (mean, invstd))
    if training and dtype not in _LOW:
        # (x - mean) * alpha + bias, in place on the centered array still in cache (PyTorch's
        # x * alpha + beta from x made the forward 8% slower, for an ulp in some elements)
        steps = [(xp.multiply, _plane(xp, _scale(invstd, w, x.dtype), lanes))]
        if b is not None:
            steps.append((xp.add, _plane(xp, b.astype(x.dtype, copy=False), lanes)))
        _in_spans(_sample_spans(xp, out), out, *steps)
        out = out.reshape(x.shape)
    elif dtype in _LOW:     # x * alpha + beta rounded once to float32 (fused), then to 16 bits
        alpha, beta = _scale_and_shift(mean, invstd, w, b, x.dtype, fused=False)
        out = (x3 * _plane(xp, alpha.astype(np.float64), lanes) + _plane(xp, beta, lanes))
        out = out.astype(_F32).reshape(x.shape).astype(dtype)
    else:                   # x * alpha + beta, PyTorch's order of operations
        alpha, beta = _scale_and_shift(mean, invstd, w, b, x.dtype, fused=True)
        out = xp.multiply(x3, _plane(xp, alpha, lanes))
        out += _plane(xp, beta, lanes)
        out = out.reshape(x.shape)
    if not training:
        mean = invstd = xp.zeros(0, stats)
    return like_input(xp, x, out), mean.astype(stats, copy=False), invstd.astype(stats,
                                                                                copy=False)


def _bfloat16_var(var, n):
    """The variance as PyTorch's CPU kernel takes it for bfloat16 statistics: the sum of
    squared deviations rounded to bfloat16, then divided by n in bfloat16 arithmetic."""
    low = D.bfloat16.np
    return ((var * n).astype(low).astype(_F32) / n).astype(low).astype(var.dtype)


def _training_invstd(xp, var, eps, dtype):
    """``1 / sqrt(var + eps)`` as PyTorch's CPU kernel takes it: in double for a float32 or
    float64 input, in float32 for a 16-bit one; 0 for a constant channel when eps is 0."""
    acc = var.dtype if dtype in _LOW else np.dtype(np.float64)
    v = var.astype(acc, copy=False)
    invstd = 1 / xp.sqrt(v + acc.type(eps))
    if eps == 0:
        invstd[v == 0] = 0
    return invstd.astype(var.dtype, copy=False)


def _scale(invstd, w, dtype):
    """Per-channel ``invstd * weight``."""
    return invstd if w is None else invstd * w.astype(dtype, copy=False)


def _scale_and_shift(mean, invstd, w, b, dtype, fused):
    """Per-channel ``alpha = invstd * weight`` and ``beta = bias - mean * alpha``, the latter
    rounded once when ``fused`` (a fused multiply-add, as PyTorch's float32 kernel takes it;
    its 16-bit one rounds the product first)."""
    alpha = _scale(invstd, w, dtype)
    wide = np.float64 if dtype == _F32 and fused else dtype
    beta = -(mean.astype(wide) * alpha.astype(wide))
    if b is not None:
        beta += b.astype(wide)
    return alpha.astype(dtype, copy=False), beta.astype(dtype, copy=False)


def _stats_dtype(dtype, *params):
    """The saved statistics' dtype: float32 for a 16-bit input with float32 parameters."""
    if dtype in _LOW and any(p is not None and p.dtype == _F32 for p in params):
        return _F32
    return dtype


native_batch_norm.writes_inputs(3, 4)


native_batch_norm.nondifferentiable("running_mean", "running_var")
# running statistics that require grad make PyTorch refuse the call, in training or not
native_batch_norm.refuse_grad("running_mean", "native_batch_norm", forward=True)
native_batch_norm.refuse_grad("running_var", "native_batch_norm", forward=True)


@native_batch_norm.derivative(outputs=(1, 2))    # the statistics: y may change in place
def _(grads, x, w, b, rm, rv, training, momentum, eps, *, out, needs=(True,) * 5):
    gy, gmean, ginvstd = grads
    need = (needs[0], w is not None and needs[1], b is not None and needs[2])
    if (_GRAD.grad_enabled and gy is not None and not carries_gradient(gmean)
            and not carries_gradient(ginvstd) and _outside_vmap()):
        # create_graph: PyTorch's fused backward, one node whose derivative is the double
        # backward (ops/norm_batch_backward.py)
        from ember.ops.norm_batch_backward import _native_batch_norm_backward
        gx, gw, gb = _native_batch_norm_backward(
            gy, x, w, None if training else rm, None if training else rv, out[1], out[2],
            training, eps)
        return (gx if need[0] else None, gw if need[1] else None,
                (gb if gb.dtype == b.dtype else gb.to(b.dtype)) if need[2] else None,
                None, None)
    if x.dtype not in D.LOW_PRECISION:
        return _batch_norm_derivative(gy, gmean, ginvstd, x, w, rm, rv, training, eps, out,
                                      need)
    # a 16-bit input: in float32 from the saved float32 (or 16-bit) statistics, each gradient
    # rounded once to its input's dtype, as PyTorch's CPU kernel computes it
    gx, gw, gb = _batch_norm_derivative(
        gy.float(), gmean, ginvstd, x.float(), None if w is None else w.float(), rm, rv,
        training, eps, out, need)
    return (None if gx is None else gx.to(x.dtype), None if gw is None else gw.to(w.dtype),
            None if gb is None else gb.to(b.dtype), None, None)


# PyTorch saves no bias (and the running statistics, which take no gradient, when any is needed)
native_batch_norm.reads_inputs((0, 1, 2), (0, 1, 2), (), (0, 1, 2), (0, 1, 2))


def _batch_norm_derivative(gy, gmean, ginvstd, x, w, rm, rv, training, eps, out, need):
    """The input, weight and bias gradients, each where ``need`` asks for it, computed in
    ``x``'s dtype (float32 or float64)."""
    need_x, need_w, need_b = need
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if training:
        mean, invstd = (v.to(x.dtype).reshape(shape) for v in out[1:])
    else:
        mean = rm.detach().to(x.dtype).reshape(shape)
        invstd = (rv.detach().to(x.dtype) + eps).rsqrt().reshape(shape)
    if (not _GRAD.grad_enabled and x._data.dtype in _FAST_DTYPES and gy._data.dtype
            == x._data.dtype == mean._data.dtype and not carries_gradient(gmean)
            and not carries_gradient(ginvstd) and _outside_vmap()):
        return tuple(None if t is None else _make(t) for t in _batch_norm_arrays(
            gy._data, x._data, None if w is None else w._data, mean._data.reshape(-1),
            invstd._data.reshape(-1), training, need))
    xc = x - mean
    wv = None if w is None else w.reshape(shape)
    gx = gw = gb = None
    if training and need_x:
        # the weight folds into the per-channel constants: gx = gy*A + xc*B + C
        s0 = _channel_sum(gy).reshape(shape)
        s1 = _channel_dot(gy, xc).reshape(shape)
        n = x.numel() // x.shape[1]
        a = invstd if wv is None else invstd * wv
        sg, sgx = (s0, s1) if wv is None else (s0 * wv, s1 * wv)
        bc, cc = _coefficients(sg, sgx, invstd, n, gmean, ginvstd)
        gx = _norm_input_grad(gy, a, xc, bc, cc)
        if need_w:
            gw = (s1 * invstd).reshape(-1)
        if need_b:
            gb = s0.reshape(-1)
        return gx, gw, gb
    if need_x:
        gx = gy * (invstd if wv is None else invstd * wv)
    if need_w:
        gw = _channel_dot(gy, xc) * invstd.reshape(-1)
    if need_b:
        gb = _channel_sum(gy)
    return gx, gw, gb


def _batch_norm_arrays(g, x, w, mean, invstd, training, need):
    """The batch norm derivative on arrays, for a backward that records no graph (the
    composition above dispatches some 25 ops and makes more passes over the data); the
    statistics get no gradient here. With A = invstd * weight and the per-channel sums
    s0 = sum(g), s1 = sum(g * (x - mean)): gx = g*A + (x - mean)*B + C in training (see
    NOTE [Fused normalization backward]), g*A in evaluation."""
    xp = xp_of(g)
    shape = _channel_rows(x.shape)
    lanes = shape[2]
    n = shape[0] * lanes
    g3 = g.reshape(shape)
    need_x, need_w, need_b = need
    a = invstd if w is None else invstd * w.astype(invstd.dtype, copy=False)
    s0 = xp.einsum("ncl->c", g3) if need_b or (training and need_x) else None
    xc = s1 = owner = None
    spans = ((0, shape[0]),)
    if need_w or (training and need_x):
        x3 = x.reshape(shape)
        if x.flags.c_contiguous:
            # into an array of x's shape that owns its memory: gx, finished in place on it,
            # then becomes .grad as it is, where the (N, C, L) result's view was copied
            owner = xp.empty(x.shape, x3.dtype)
            xc = owner.reshape(shape)
            spans = _sample_spans(xp, x3) if g3.flags.c_contiguous else spans
        if len(spans) > 1:
            s1 = _centered_dots(xp, spans, g3, x3, mean, xc)
        else:
            xc = xp.subtract(x3, _plane(xp, mean, lanes), out=xc)
            s1 = _dots(xp, g3, xc)
    gx = None
    if need_x:
        scale = _plane(xp, a, lanes)
        if training and n:
            # (g + xc * B/A + C/A) * A, finished in place: no second array of the input's
            # size (a fresh one costs twice an in-place pass: it is not in cache)
            gx = xc
            _in_spans(spans, gx, (xp.multiply, _plane(xp, invstd * invstd * s1 * (-1 / n), lanes)),
                      (xp.add, _plane(xp, s0 * (-1 / n), lanes)), (xp.add, g3),
                      (xp.multiply, scale))
            if owner is not None:
                gx = owner
        else:
            gx = g3 * scale
        if gx.shape != x.shape:         # (a reshape to its own shape would make a view)
            gx = gx.reshape(x.shape)
    return gx, s1 * invstd if need_w else None, s0 if need_b else None


def _channel_sum(a):
    """Per-channel (dim 1) sums, as a contraction: three times faster than a sum over dims
    (0, 2, ...)."""
    from ember.ops.einsum import einsum
    return einsum("ncl->c", a.reshape(_channel_rows(a.shape)))


def _channel_rows(shape):
    """``shape`` as (N, C, L), L the product of the rest (0-size safe, unlike -1)."""
    return shape[0], shape[1], math.prod(shape[2:])


def _channel_dot(a, b):
    """Per-channel (dim 1) sums of ``a * b``, as one contraction with no product array."""
    from ember.ops.einsum import einsum
    shape = _channel_rows(a.shape)          # a contiguous last axis: the fast inner loop
    return einsum("ncl,ncl->c", a.reshape(shape), b.reshape(shape))


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    """Batch normalization (``torch.batch_norm``'s argument order)."""
    momentum = float_arg(momentum, "batch_norm", "momentum", 7)
    if not input.numel():
        return _empty_batch_norm(input, weight, bias)
    try:
        return native_batch_norm(input, weight, bias, running_mean, running_var, training,
                                 momentum, eps)[0]
    except RuntimeError:
        if input.dim() >= 2:        # sizes before native_batch_norm's dtype checks, as torch
            _check_features(input.shape[1], training, running_mean=running_mean,
                            running_var=running_var, weight=weight, bias=bias)
        raise


def _check_features(c, training, **vectors):
    """torch.batch_norm's checks of the vectors' sizes, in its order."""
    for name, v in vectors.items():
        if v is None:
            if not training and name.startswith("running"):
                raise RuntimeError(f"{name} must be defined in evaluation mode")
        elif v.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {v.numel()}")


def functional_batch_norm(input, running_mean, running_var, weight=None, bias=None,
                          training=False, momentum=0.1, eps=1e-5):
    """Normalize each channel (dim 1) by batch statistics, or by running ones in eval."""
    if training:
        size = input.shape
        if math.prod(size[:1] + size[2:]) == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {_size_text(size)}")
        if eps <= 0.0:
            raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    return batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                      False)


def _empty_batch_norm(input, weight, bias):
    """PyTorch's batch norm of an empty input: no statistics (native_batch_norm refuses it in
    training), an output still connected to the weight and bias."""
    out = input.clone()
    if weight is not None:
        out = out * weight.select(0, 0)
    if bias is not None:
        out = out + bias.select(0, 0)
    return out


def _size_text(shape):
    return f"ember.Size({list(shape)})"


functional_batch_norm.__name__ = functional_batch_norm.__qualname__ = "batch_norm"
