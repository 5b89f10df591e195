"""Normalization with fused kernels: native_batch_norm, native_layer_norm, native_group_norm
(each returns the output, the mean and the inverse standard deviation it normalized with) and
_fused_rms_norm (the output and the inverse root mean square), and the functional forms
built on them (batch_norm, layer_norm, group_norm; rms_norm is in ops/norm_functions.py with
the compositions instance_norm, local_response_norm and normalize).

NOTE [Fused normalization backward]
With ``xc = x - mean``, ``invstd = (var + eps)^-1/2`` (biased variance over ``n`` elements)
and ``g`` the gradient reaching ``xhat = xc * invstd``, the input gradient is
``invstd * (g - sum(g)/n - xhat * sum(g * xhat)/n)``. Written as ``g*A + xc*B + C`` with
per-group constants A, B, C, it costs a handful of passes over the data; the gradients that
reach the saved mean and invstd (double backward) only change B and C. Everything is written
with ember ops on the saved outputs, so the derivative is differentiable again.
"""

import contextlib
import math

import numpy as np

from ember import _dtype as D
from ember._memory_format import like_input
from ember._tensor import _make
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.graph import carries_gradient
from ember.backend import xp_of
from ember.backend.blas_threads import one_blas_thread
from ember.ops._promotion import BINARY
from ember.ops._registry import op

_LOW = {d.np for d in D.LOW_PRECISION}
_F32 = np.dtype(np.float32)
_FAST_DTYPES = {_F32, np.dtype(np.float64)}


def _name(a):
    return D.FROM_NUMPY[a.dtype]._torch_name


def _float_input(x, kernel):
    if x.dtype.kind not in "fV":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_name(x)}'")
    return x.astype(_F32) if x.dtype in _LOW else x


def _check_mixed(xp, dtype, *params):
    """PyTorch's CPU norms take parameters of the input's dtype (float32 ones for a half input)."""
    for p in params:
        if xp is np and p is not None and p.dtype != dtype \
                and not (dtype in _LOW and p.dtype == _F32):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _vector(v, dtype):
    return None if v is None else (v.astype(dtype) if v.dtype != dtype else v)




@op("_norm_input_grad(grad, a, centered, b, c)", inputs=5, promote=BINARY, method=False)
def _norm_input_grad(xp, g, a, xc, b, c):
    """``grad * a + centered * b + c`` in one op (the input gradient of every norm)."""
    shape = g.shape
    planes = _channel_planes(xp, shape, a, b, c) if shape == xc.shape else None
    if planes is not None:              # batch norm: per-channel constants, see _channel_planes
        a, b, c = planes
        g, xc = g.reshape((shape[0],) + a.shape), xc.reshape((shape[0],) + a.shape)
    out = g * a
    out += xc * b
    out += c
    return out.reshape(shape) if planes is not None else out


def _channel_planes(xp, shape, *vectors):
    """Per-channel vectors of shape (1, C, 1, ...) spread over (C, L) planes for an array of
    ``shape`` (N, C, *S), L = prod(S); None when they are not all such vectors.

    NumPy broadcasts a (1, C, 1, 1) operand with a stride-0 inner loop, two to three times
    slower than an operand that is contiguous along the inner axis: over (N, C, L) views, a
    multiply by a materialized (C, L) plane (C*L values, small next to the data) runs at the
    speed of an ordinary array multiply."""
    if len(shape) < 3 or shape[0] < 2:
        return None
    c = shape[1]
    lanes = math.prod(shape[2:])
    if lanes < 16:
        return None
    planes = []
    for v in vectors:
        if v.ndim != len(shape) or v.shape[1] != c or v.size != c:
            return None
        planes.append(xp.ascontiguousarray(xp.broadcast_to(v.reshape(c, 1), (c, lanes))))
    return planes


@_norm_input_grad.derivative
def _(grad, g, a, xc, b, c):
    def need(t):
        return getattr(t, "requires_grad", False)
    return (grad * a if need(g) else None, grad * g if need(a) else None,
            grad * b if need(xc) else None, grad * xc if need(b) else None,
            grad if need(c) else None)


def _coefficients(sg, sgx, invstd, n, gmean, ginvstd):
    """B and C of NOTE [Fused normalization backward] from the group sums of g and g*xc."""
    inv_n = 1.0 / max(n, 1)           # (empty groups have an empty gradient: any scale does)
    # invstd^3 one factor at a time: it overflows for a tiny eps, and inf * 0 is NaN
    b = sgx * -inv_n * invstd * invstd * invstd
    c = invstd * sg * -inv_n
    if carries_gradient(ginvstd):     # reshaped only here: a reshape would lose the flag
        b = b - ginvstd.reshape(b.shape) * inv_n * invstd * invstd * invstd
    if carries_gradient(gmean):
        c = c + gmean.reshape(c.shape) * inv_n
    return b, c


def _norm_grad(g, xc, invstd, total, n, gmean=None, ginvstd=None):
    """The input gradient of NOTE [Fused normalization backward]; ``g`` reaches xhat and
    ``total(t)`` sums ``t`` over each group (keeping the reduced dims)."""
    b, c = _coefficients(total(g), total(g * xc), invstd, n, gmean, ginvstd)
    return _norm_input_grad(g, invstd, xc, b, c)


# --- batch norm -------------------------------------------------------------------------------

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
    xc = xp.subtract(x3, _plane(xp, mean, x3.shape[2]))
    return mean, _dots(xp, xc, xc) / n, xc


def _channel_sums(xp, a):
    """Per-channel sums of an (N, C, L) array: a matrix-vector product for rows of 16 to 511
    values (twice as fast as the contraction there), else one contraction."""
    if 16 <= a.shape[2] < 512:
        return (a @ xp.ones(a.shape[2], a.dtype)).sum(0)
    return xp.einsum("ncl->c", a)


def update_running_stats(xp, rm, rv, mean, var, n, momentum):
    """``running = (1 - momentum) * running + momentum * batch statistic`` in place, the
    variance unbiased (NaN from one value per channel, as PyTorch's)."""
    if rm is not None:
        rm *= 1 - momentum
        rm += (momentum * mean).astype(rm.dtype)
    if rv is not None:
        unbiased = var * n / (n - 1) if n > 1 else xp.full_like(var, np.nan)
        rv *= 1 - momentum
        rv += (momentum * unbiased).astype(rv.dtype)


def _row_dots(xp, a, b):
    """The dot products of the rows of two 2-D arrays, as _dots takes them."""
    if a.shape[1] >= 256:
        return xp.matmul(a[:, None, :], b[:, :, None]).reshape(-1)
    return xp.einsum("rl,rl->r", a, b)


@op("native_batch_norm(input, weight=None, bias=None, running_mean=None, running_var=None, "
    "training=False, momentum=0.1, eps=1e-5)", inputs=5, method=False)
def native_batch_norm(xp, x, w, b, rm, rv, training, momentum, eps):
    """Batch normalization over all dims but dim 1; returns (output, mean, invstd)."""
    if x.ndim < 2:
        raise RuntimeError(f"batch_norm(): expected input to have at least 2 dims, but got "
                           f"{x.ndim}")
    dtype = x.dtype
    x = _float_input(x, "batch_norm")
    _check_mixed(xp, dtype, w, b, rm, rv)
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
        invstd = _training_invstd(xp, var, eps, dtype)
    else:
        if rm is None or rv is None:
            raise RuntimeError("running_mean must be defined in evaluation mode")
        mean = rm.astype(x.dtype)
        invstd = 1 / xp.sqrt(rv.astype(x.dtype) + x.dtype.type(eps))
        out = None
    stats = _stats_dtype(dtype, w, b, rm, rv)
    if training and stats != mean.dtype:     # a 16-bit input normalizes with its saved stats
        mean, invstd = (v.astype(stats).astype(x.dtype) for v in (mean, invstd))
    if training and dtype not in _LOW:
        # (x - mean) * alpha + bias, in place on the centered array still in cache (PyTorch's
        # x * alpha + beta from x made the forward 8% slower, for an ulp in some elements)
        out *= _plane(xp, _scale(invstd, w, x.dtype), lanes)
        if b is not None:
            out += _plane(xp, b.astype(x.dtype, copy=False), lanes)
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


def _outside_vmap():
    """Whether no vmap is active: the array fast paths of the backward need real values
    (under vmap, operands are BatchedTensors whose ``_data`` is a placeholder)."""
    from ember.func._batched import STATE
    return not STATE.levels


native_batch_norm.writes_inputs(3, 4)


native_batch_norm.nondifferentiable("running_mean", "running_var")


@native_batch_norm.derivative(outputs=(1, 2))    # the statistics: y may change in place
def _(grads, x, w, b, rm, rv, training, momentum, eps, *, out):
    gy, gmean, ginvstd = grads
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if training:
        mean, invstd = out[1].reshape(shape), out[2].reshape(shape)
        if mean.dtype != x.dtype:       # float32 statistics of a 16-bit input
            mean, invstd = mean.to(x.dtype), invstd.to(x.dtype)
    else:
        mean = rm.detach().to(x.dtype).reshape(shape)
        invstd = (rv.detach().to(x.dtype) + eps).rsqrt().reshape(shape)
    if (not _GRAD.grad_enabled and x._data.dtype in _FAST_DTYPES and gy._data.dtype
            == x._data.dtype == mean._data.dtype and not carries_gradient(gmean)
            and not carries_gradient(ginvstd) and _outside_vmap()):
        return _batch_norm_backward(gy._data, x, w, b, mean._data.reshape(-1),
                                    invstd._data.reshape(-1), training)
    xc = x - mean
    wv = None if w is None else w.reshape(shape)
    gx = gw = gb = None
    need_w = w is not None and w.requires_grad
    if training and x.requires_grad:
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
        if b is not None and b.requires_grad:
            gb = s0.reshape(-1)
        return gx, gw, gb, None, None
    if x.requires_grad:
        gx = gy * (invstd if wv is None else invstd * wv)
    if need_w:
        gw = _channel_dot(gy, xc) * invstd.reshape(-1)
    if b is not None and b.requires_grad:
        gb = _channel_sum(gy)
    return gx, gw, gb, None, None


def _batch_norm_backward(g, x, w, b, mean, invstd, training):
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
    need_x, need_w = x.requires_grad, w is not None and w.requires_grad
    need_b = b is not None and b.requires_grad
    a = invstd if w is None else invstd * w._data.astype(invstd.dtype, copy=False)
    s0 = xp.einsum("ncl->c", g3) if need_b or (training and need_x) else None
    xc = s1 = None
    if need_w or (training and need_x):
        xc = xp.subtract(x._data.reshape(shape), _plane(xp, mean, lanes))
        s1 = _dots(xp, g3, xc)
    gx = None
    if need_x:
        scale = _plane(xp, a, lanes)
        if training and n:
            # (g + xc * B/A + C/A) * A, finished in place: no second array of the input's
            # size (a fresh one costs twice an in-place pass: it is not in cache)
            gx = xc
            gx *= _plane(xp, invstd * invstd * s1 * (-1 / n), lanes)
            gx += _plane(xp, s0 * (-1 / n), lanes)
            gx += g3
            gx *= scale
        else:
            gx = g3 * scale
        gx = _make(gx.reshape(x.shape))
    return (gx, _make(s1 * invstd) if need_w else None, _make(s0) if need_b else None,
            None, None)


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
    if not input.numel():
        return _empty_batch_norm(input, weight, bias)
    return native_batch_norm(input, weight, bias, running_mean, running_var, training,
                             momentum, eps)[0]


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


# --- layer norm and group norm: normalize over the trailing dims of a reshaped input ----------

def _last_axis_stats(xp, x2, eps):
    """Centered ``x2`` (rows of any leading shape), and mean and invstd over its last axis,
    kept as a size-1 axis."""
    k = x2.shape[-1]
    if not k:
        mean = xp.zeros(x2.shape[:-1] + (1,), x2.dtype)
        return x2 - mean, mean, 1 / xp.sqrt(mean + eps)
    rows = x2.reshape(-1, k)
    # means as matrix-vector products: several times faster than mean() over a short axis
    avg = xp.full(k, 1 / k, x2.dtype)
    with _small_on_one_blas_thread(xp, rows.size):
        mean = rows @ avg
        xc = _minus_rows(xp, rows, mean)
        var = (xc * xc) @ avg
    lead = x2.shape[:-1] + (1,)
    return xc.reshape(x2.shape), mean.reshape(lead), (1 / xp.sqrt(var + eps)).reshape(lead)


_ONE_THREAD_MAX = 1 << 20


def _small_on_one_blas_thread(xp, size):
    """One BLAS thread for the products of an input of at most ``_ONE_THREAD_MAX`` values:
    on a busy machine OpenBLAS's thread wake-ups cost milliseconds, 20x the product of a
    512x1024 input; above that the second thread pays (32768x768: 3.8 vs 6.9 ms)."""
    return one_blas_thread(xp) if size <= _ONE_THREAD_MAX else contextlib.nullcontext()


_PLANE_MAX = 1 << 17


def _spread(xp, shape, col=None, row=None):
    """``col[:, None] * row`` (a missing vector counts as ones) as an operand of an array of
    ``shape`` (len(col), len(row)): a fresh contiguous plane of exact products when it is
    small, else the broadcasting operand (the product taken for two vectors).

    NumPy runs an operation whose operand broadcasts along a row or a column two to three
    times slower than one on two arrays of the same shape; a matrix product of inner size 2
    (the second term zero) writes the plane about as fast as one such operation. (Inner size
    1 takes NumPy's slow non-BLAS loop.) Only up to 2**17 products, where OpenBLAS runs it
    on one thread: its threads cost milliseconds on a busy machine, and larger planes no
    longer pay off."""
    rows, lanes = shape
    if xp is not np or rows * lanes > _PLANE_MAX:
        if col is None:
            return row
        return col[:, None] if row is None else col[:, None] * row
    dtype = (row if col is None else col).dtype
    left = xp.zeros((rows, 2), dtype)
    left[:, 0] = 1 if col is None else col
    right = xp.zeros((2, lanes), dtype)
    right[0] = 1 if row is None else row
    return left @ right


def _minus_rows(xp, rows, col):
    """``rows - col[:, None]``, in place on a fresh plane when _spread gives one."""
    spread = _spread(xp, rows.shape, col)
    if spread.shape == rows.shape:
        return xp.subtract(rows, spread, out=spread)
    return rows - spread


def check_normalized_shape(x, normalized_shape, w, b, batch_dims="*, "):
    """``normalized_shape`` as a tuple, after PyTorch's checks against the input, weight and
    bias (rms_norm words its input-shape message ``[*4]``, layer_norm ``[*, 4]``)."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not ns:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    for name, v in (("weight", w), ("bias", b)):
        if v is not None and tuple(v.shape) != ns:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {list(v.shape)} and normalized_shape = "
                               f"{list(ns)}")
    if x.ndim < len(ns) or tuple(x.shape[x.ndim - len(ns):]) != ns:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape "
                           f"[{batch_dims}{', '.join(str(s) for s in ns)}], but got input of "
                           f"size"
                           f"{list(x.shape)}")
    return ns


@op("native_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)",
    inputs=("input", "weight", "bias"), method=False)
def native_layer_norm(xp, x, w, b, normalized_shape, eps):
    """Layer normalization over the trailing ``normalized_shape``; returns (output, mean,
    invstd), the statistics with size-1 trailing dims."""
    ns = check_normalized_shape(x, normalized_shape, w, b)
    dtype = x.dtype
    _check_mixed(xp, dtype, w, b)
    x = xp.ascontiguousarray(_float_input(x, "LayerNormKernelImpl"))    # as PyTorch's, and
    lead = x.shape[:x.ndim - len(ns)]                                   # row-major out
    k = math.prod(ns)
    xc, mean, invstd = _last_axis_stats(xp, x.reshape(math.prod(lead), k), eps)
    # out = xc * (invstd * w) + b, the products with the broadcast vectors taken on
    # planes of _spread (see there)
    w = xp.ones(k, x.dtype) if w is None else _vector(w, x.dtype).reshape(k)
    out = _spread(xp, xc.shape, invstd.reshape(-1), w)     # a fresh array either way
    out *= xc
    if b is not None:
        out += _spread(xp, xc.shape, row=_vector(b, x.dtype).reshape(k))
    out = out.reshape(x.shape)
    stats = lead + (1,) * len(ns)
    return (out.astype(dtype, copy=False), mean.reshape(stats).astype(dtype, copy=False),
            invstd.reshape(stats).astype(dtype, copy=False))


@native_layer_norm.derivative(outputs=(1, 2))    # the statistics: y may change in place
def _(grads, x, w, b, normalized_shape, eps, *, out):
    gy, gmean, ginvstd = grads
    k = math.prod(normalized_shape)
    if k == 0:      # nothing normalized: every gradient is empty (and rows can't be inferred)
        return tuple(None if t is None or not t.requires_grad else t.new_zeros(t.shape)
                     for t in (x, w, b))
    if (not _GRAD.grad_enabled and (x._data.dtype in _FAST_DTYPES or x._data.dtype in _LOW)
            and gy._data.dtype == x._data.dtype and not carries_gradient(gmean)
            and not carries_gradient(ginvstd) and _outside_vmap()):
        return _layer_norm_backward(gy._data, x, w, b, out[1]._data, out[2]._data, k)
    # on (rows, k) views; sums over rows and columns as matrix-vector products (BLAS is
    # several times faster than NumPy's sum along a short axis)
    gy2 = gy.reshape(-1, k)
    invstd = out[2].reshape(-1, 1)
    xc = x.reshape(-1, k) - out[1].reshape(-1, 1)
    gx = gw = gb = None
    if x.requires_grad:
        g = gy2 if w is None else gy2 * w.reshape(k)   # (a float32 w widens bfloat16 gy)
        ones = g.new_ones(k)
        gx = _norm_grad(g, xc, invstd, lambda t: (t @ ones).unsqueeze(-1), k,
                        gmean, ginvstd).reshape(x.shape)
    if w is not None and w.requires_grad:
        gw = ((gy2 * xc).mT @ invstd.squeeze(-1)).reshape(w.shape)
    if b is not None and b.requires_grad:
        gb = (gy2.mT @ gy2.new_ones(gy2.shape[0])).reshape(b.shape)
    return gx, gw, gb


def _layer_norm_backward(gy, x, w, b, mean, invstd, k):
    """The layer norm derivative on arrays, for a backward that records no graph: the
    composition above costs some 30 dispatched ops, this a dozen array calls. The gradients
    that reach the saved statistics are zero here."""
    # with g = gy * w and xc = x - mean: gx = invstd * g + xc * B + C per row, where
    # B = -invstd^3 * mean(g * xc) and C = -invstd * mean(g); the means as products with
    # w / k, every broadcast vector spread by _spread. xc stays exact for a
    # large mean.
    xp = xp_of(gy)
    low = gy.dtype in _LOW
    if low:     # as PyTorch's kernel: in float32, from the statistics saved in gy's dtype
        gy, mean, invstd = gy.astype(_F32), mean.astype(_F32), invstd.astype(_F32)
    with _small_on_one_blas_thread(xp, gy.size):
        grads = _layer_norm_backward_rows(xp, gy.reshape(-1, k), x, w, b, mean.reshape(-1),
                                          invstd.reshape(-1), k)
    if not low:
        return grads
    return tuple(None if g is None else _make(g._data.astype(t._data.dtype))
                 for g, t in zip(grads, (x, w, b)))


def _layer_norm_backward_rows(xp, gy, x, w, b, mean, invstd, k):
    """_layer_norm_backward on (rows, k) arrays."""
    xc = _minus_rows(xp, x._data.reshape(-1, k).astype(gy.dtype, copy=False), mean)
    gy_xc = gy * xc
    gx = gw = gb = None
    if w is not None and w.requires_grad:       # sum over rows of gy * xhat
        gw = _make((invstd @ gy_xc).reshape(w.shape))
    if b is not None and b.requires_grad:
        gb = _make((xp.ones(gy.shape[0], gy.dtype) @ gy).reshape(b.shape))
    if x.requires_grad:
        wk = xp.ones(k, gy.dtype) if w is None else w._data.reshape(k).astype(gy.dtype,
                                                                               copy=False)
        avg = wk * (1 / k)
        xc *= _spread(xp, gy.shape, ((gy_xc @ avg) * invstd) * invstd * -invstd)  # (invstd**3
        gx = _spread(xp, gy.shape, invstd, wk)                                     # overflows)
        gx *= gy
        gx += xc
        gx -= _spread(xp, gy.shape, (gy @ avg) * invstd)
        gx = _make(gx.reshape(x.shape))
    return gx, gw, gb


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return native_layer_norm(input, tuple(normalized_shape), weight, bias, eps)[0]


def functional_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift."""
    return layer_norm(input, normalized_shape, weight, bias, eps)


# --- RMS norm ---------------------------------------------------------------------------------

@op("_fused_rms_norm(input, normalized_shape, weight=None, eps=None)",
    inputs=("input", "weight"), method=False)
def _fused_rms_norm(xp, x, w, normalized_shape, eps):
    """RMS normalization over the trailing ``normalized_shape`` dims, scaled by ``weight``;
    returns (output, rstd), rstd = 1/sqrt(mean(x^2) + eps) with size-1 trailing dims. As in
    PyTorch, 16-bit inputs compute in float32 (rstd stays float32), ``eps`` defaults to the
    machine epsilon of that computation dtype, and the output, rounded once, has the input's
    dtype."""
    ns = check_normalized_shape(x, normalized_shape, w, None, batch_dims="*")
    if x.dtype.kind not in "fV":
        raise NotImplementedError(f"\"rms_norm\" not implemented for '{_name(x)}'")
    wide = x.astype(_F32) if x.dtype in _LOW else x
    eps = float(np.finfo(wide.dtype).eps) if eps is None else eps
    k = math.prod(ns)
    lead = x.shape[:x.ndim - len(ns)]
    rows = wide.reshape(lead + (k,))
    # the mean square as a matrix-vector product: several times faster than mean() on a
    # short axis
    rstd = 1 / xp.sqrt((rows * rows) @ xp.full(k, 1 / k, rows.dtype) + eps)
    out = rows * rstd[..., None]
    if w is not None:
        out = out * w.reshape(k)        # in the wider of the two dtypes, as PyTorch
    return (out.reshape(x.shape).astype(x.dtype, copy=False),
            rstd.reshape(lead + (1,) * len(ns)))


@_fused_rms_norm.derivative(outputs=(1,))    # the statistics: y may change in place
def _(grads, x, w, normalized_shape, eps, *, out):
    # y = x * rstd * w; with xhat = x * rstd and g the gradient reaching xhat:
    # dx = rstd * (g - xhat * mean(g * xhat)), and the gradient reaching rstd adds
    # grstd * -rstd^3 * x / k (rstd = (mean(x^2) + eps)^-1/2)
    gy, grstd = grads
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    dims = tuple(range(x.ndim - len(ns), x.ndim))
    k = math.prod(ns)
    rstd = out[1]
    wide = x.float() if x.dtype in D.LOW_PRECISION else x
    xhat = wide * rstd
    g = gy.to(xhat.dtype if w is None else D.promote_types(xhat.dtype, w.dtype))
    gw = None
    if w is not None and w.requires_grad:
        gw = (g * xhat).sum(tuple(range(x.ndim - len(ns)))).reshape(w.shape)
    gx = None
    if x.requires_grad:
        if w is not None:
            g = g * w
        gx = rstd * (g - xhat * (g * xhat).sum(dims, keepdim=True) * (1 / k))
        if carries_gradient(grstd):
            gx = gx - grstd * rstd ** 3 * wide * (1 / k)
    return gx, gw


_fused_rms_norm.name_nodes("MulBackward0")  # PyTorch's CPU rms_norm is a composite


def _check_group_norm(x, w, b, c, group):
    if group <= 0 or c % group:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(x.shape)} and "
                           f"num_groups={group}")
    for name, v in (("weight", w), ("bias", b)):
        if v is not None and (v.ndim != 1 or v.size != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape {list(v.shape)} "
                               f"and input of shape {list(x.shape)}")


@op("native_group_norm(input, weight=None, bias=None, N=0, C=0, HxW=0, group=1, eps=1e-5)",
    inputs=3, method=False)
def native_group_norm(xp, x, w, b, n, c, hxw, group, eps):
    """Group normalization of an (N, C, *) input; returns (output, mean, invstd) with the
    statistics of shape (N, group)."""
    _check_group_norm(x, w, b, c, group)
    dtype = x.dtype
    _check_mixed(xp, dtype, w, b)
    x = _float_input(x, "GroupNormKernelImpl")
    # explicit sizes: -1 cannot be inferred for an empty batch
    k = c // group * hxw
    xc, mean, invstd = _last_axis_stats(xp, x.reshape(n, group, k), eps)
    xc *= invstd
    out = xc.reshape(n, c, hxw)
    if w is not None:
        out *= _vector(w, x.dtype).reshape(c, 1)
    if b is not None:
        out += _vector(b, x.dtype).reshape(c, 1)
    return (like_input(xp, x, out.reshape(x.shape).astype(dtype, copy=False)),
            mean.reshape(n, group).astype(dtype, copy=False),
            invstd.reshape(n, group).astype(dtype, copy=False))


@native_group_norm.derivative(outputs=(1, 2))    # the statistics: y may change in place
def _(grads, x, w, b, n, c, hxw, group, eps, *, out):
    gy, gmean, ginvstd = grads
    if (not _GRAD.grad_enabled and x._data.dtype in _FAST_DTYPES and gy._data.dtype
            == x._data.dtype and gy._data.size and not carries_gradient(gmean)
            and not carries_gradient(ginvstd) and _outside_vmap()):
        return _group_norm_backward(gy._data, x, w, b, out[1]._data, out[2]._data,
                                    (n, c, hxw, group))
    mean, invstd = out[1].reshape(n, group, 1), out[2].reshape(n, group, 1)
    xc = x.reshape(n, group, c // group * hxw) - mean
    gy3 = gy.reshape(n, c, hxw)
    gx = gw = gb = None
    if x.requires_grad:
        g = gy3 if w is None else gy3 * w.reshape(c, 1)
        gx = _norm_grad(g.reshape(xc.shape), xc, invstd, lambda t: t.sum(2, keepdim=True),
                        (c // group) * hxw, gmean, ginvstd).reshape(x.shape)
    if w is not None and w.requires_grad:
        gw = (gy3 * (xc * invstd).reshape(gy3.shape)).sum((0, 2))
    if b is not None and b.requires_grad:
        gb = gy3.sum((0, 2))
    return gx, gw, gb


def _group_norm_backward(gy, x, w, b, mean, invstd, sizes):
    """The group norm derivative on arrays, for a backward that records no graph (the
    composition above dispatches some 30 ops). With the per-(sample, channel) sums
    ds = sum(gy * xc) and db = sum(gy), and g = gy * w: gx = gy*A + xc*B + C, A = invstd * w
    per channel, B and C per group as in NOTE [Fused normalization backward] (their group
    sums of g and g * xc are sums of w * db and w * ds). The statistics get no gradient."""
    n, c, hxw, group = sizes
    xp = xp_of(gy)
    k = c // group * hxw
    with _small_on_one_blas_thread(xp, gy.size):
        xc = _minus_rows(xp, x._data.reshape(n * group, k), mean.reshape(-1))
        xc, gy = xc.reshape(n * c, hxw), gy.reshape(n * c, hxw)
        db = gy @ xp.ones(hxw, gy.dtype)                 # (BLAS: faster than sum(1))
        ds = _row_dots(xp, gy, xc)
        inv = invstd.reshape(n, group, 1)
        ds3, db3 = ds.reshape(n, group, -1), db.reshape(n, group, -1)
        gx = gw = gb = None
        if w is not None and w.requires_grad:
            gw = _make((ds3 * inv).sum(0).reshape(w.shape))
        if b is not None and b.requires_grad:
            gb = _make(db3.sum(0).reshape(b.shape))
        if x.requires_grad:
            wv = (xp.ones(c, gy.dtype) if w is None
                  else w._data.astype(gy.dtype, copy=False)).reshape(group, -1)
            # B = -invstd^3 * sum(g * xc) / k, in steps (invstd**3 overflows for a tiny eps)
            bc = ((ds3 * wv).sum(2, keepdims=True) * (-1 / k) * inv) * inv * inv
            cc = (db3 * wv).sum(2, keepdims=True) * (-1 / k) * inv
            rows = (n * c, hxw)
            gx = _spread(xp, rows, (inv * wv).reshape(-1))
            gx = xp.multiply(gy, gx, out=gx) if gx.shape == rows else gy * gx
            xc *= _spread(xp, rows, xp.broadcast_to(bc, ds3.shape).reshape(-1))
            gx += xc
            gx += _spread(xp, rows, xp.broadcast_to(cc, ds3.shape).reshape(-1))
            gx = _make(gx.reshape(x.shape))
    return gx, gw, gb


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """Normalize each group of channels of an (N, C, *) input, then scale and shift."""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input.shape[:2]
    return native_group_norm(input, weight, bias, n, c, math.prod(input.shape[2:]), num_groups,
                             eps)[0]


def functional_group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each group of channels of an (N, C, *) input, then scale and shift."""
    return group_norm(input, num_groups, weight, bias, eps)


for _f, _n in ((functional_batch_norm, "batch_norm"), (functional_layer_norm, "layer_norm"),
               (functional_group_norm, "group_norm")):
    _f.__name__ = _f.__qualname__ = _n

from ember.ops import norm_functions  # noqa: E402

ALIASES = {}
PUBLIC = {"batch_norm": batch_norm, "layer_norm": layer_norm, "group_norm": group_norm,
          **norm_functions.PUBLIC}
FUNCTIONAL = {"batch_norm": functional_batch_norm, "layer_norm": functional_layer_norm,
              "group_norm": functional_group_norm, **norm_functions.FUNCTIONAL}
