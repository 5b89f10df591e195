"""Normalization over the trailing dims of a reshaped input: native_layer_norm and
native_group_norm (each returns the output, the mean and the inverse standard deviation it
normalized with), _fused_rms_norm (the output and the inverse root mean square), their fused
backward (NOTE [Fused normalization backward] in ops/_norm_shared.py) and the functional
forms layer_norm and group_norm."""

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
from ember.ops._norm_shared import (_F32, _FAST_DTYPES, _LOW, _check_mixed, _float_input,
                                    _name, _norm_grad, _outside_vmap, _vector)
from ember.ops._kernel_reads import tied_to
from ember.ops._registry import op, rename_node


def _row_dots(xp, a, b):
    """The dot products of the rows of two 2-D arrays: one dot per row (BLAS) for long rows,
    one contraction for short ones."""
    if a.shape[1] >= 256:
        return xp.matmul(a[:, None, :], b[:, :, None]).reshape(-1)
    return xp.einsum("rl,rl->r", a, b)


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
        var = xp.square(xc) @ avg
    lead = x2.shape[:-1] + (1,)
    return xc.reshape(x2.shape), mean.reshape(lead), (1 / xp.sqrt(var + eps)).reshape(lead)


_ONE_THREAD_MAX = 1 << 20


def _small_on_one_blas_thread(xp, size):
    """One BLAS thread for the products of an input of at most ``_ONE_THREAD_MAX`` values:
    on a busy machine OpenBLAS's thread wake-ups cost milliseconds, 20x the product of a
    512x1024 input; above that the second thread pays (32768x768: 3.8 vs 6.9 ms). Below
    ``_PLANE_MIN`` values OpenBLAS keeps to one thread by itself (matrix-vector products
    under 9216 values, matrix products under 262144 multiply-adds), and the switch, 1.5 us,
    would be all the context does."""
    if size < _PLANE_MIN or size > _ONE_THREAD_MAX:
        return _NO_SWITCH
    return one_blas_thread(xp)


_NO_SWITCH = contextlib.nullcontext()       # (reentrant, and reusable: it holds nothing)


_PLANE_MAX = 1 << 17
_PLANE_MIN = 1 << 12
_ROW_LANES = 64


def _spread(xp, shape, col=None, row=None, out=None):
    """``col[:, None] * row`` (a missing vector counts as ones) as an operand of an array of
    ``shape`` (len(col), len(row)): a fresh contiguous plane of exact products when it is
    small, else the broadcasting operand (the product taken for two vectors). Given both
    vectors, ``out`` (a C-contiguous array of ``shape``) receives the plane.

    NumPy runs an operation whose operand broadcasts along a row or a column two to three
    times slower than one on two arrays of the same shape; a matrix product of inner size 2
    (the second term zero) writes the plane about as fast as one such operation. (Inner size
    1 takes NumPy's slow non-BLAS loop.) Only up to 2**17 products, where OpenBLAS runs it
    on one thread: its threads cost milliseconds on a busy machine, and larger planes no
    longer pay off. Below 2**12 products the plane's four array calls cost more than the
    slower operation saves, and the broadcasting operand serves (each product is exact
    either way; only a zero product keeps its sign, which the plane's added 0 makes +0)."""
    rows, lanes = shape
    if xp is not np or not _PLANE_MIN <= rows * lanes <= _PLANE_MAX:
        if col is None:
            return row
        return col[:, None] if row is None else xp.multiply(col[:, None], row, out=out)
    dtype = (row if col is None else col).dtype
    left = xp.zeros((rows, 2), dtype)
    left[:, 0] = 1 if col is None else col
    right = xp.zeros((2, lanes), dtype)
    right[0] = 1 if row is None else row
    return xp.matmul(left, right, out=out)


def _minus_rows(xp, rows, col):
    """``rows - col[:, None]``, in place on a fresh plane when _spread gives one (not on the
    view ``col[:, None]`` it gives for rows of one value: that would overwrite ``col``)."""
    spread = _spread(xp, rows.shape, col)
    if spread.shape == rows.shape and spread.base is None:
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
    inputs=("input", "weight", "bias"), method=False, differentiable_outputs=(0,))
def native_layer_norm(xp, x, w, b, normalized_shape, eps):
    """Layer normalization over the trailing ``normalized_shape``; returns (output, mean,
    invstd), the statistics with size-1 trailing dims."""
    ns = check_normalized_shape(x, normalized_shape, w, b)
    dtype, w0, b0 = x.dtype, w, b
    _check_mixed(xp, dtype, w, b)
    x = xp.ascontiguousarray(_float_input(x, "LayerNormKernelImpl"))    # as PyTorch's, and
    lead = x.shape[:x.ndim - len(ns)]                                   # row-major out
    k = math.prod(ns)
    rows = x.reshape(math.prod(lead), k)
    w = xp.ones(k, x.dtype) if w is None else _vector(w, x.dtype).reshape(k)
    b = None if b is None else _vector(b, x.dtype).reshape(k)
    blocks = _row_blocks(xp, rows.shape)
    if blocks is None:
        out, mean, invstd = _normalize_rows(xp, rows, w, b, eps)
    else:   # row blocks whose temporaries stay in cache (and take _spread's planes)
        out = xp.empty(rows.shape, x.dtype)
        mean, invstd = (xp.empty((rows.shape[0], 1), x.dtype) for _ in range(2))
        for part in blocks:
            _normalize_rows(xp, rows[part], w, b, eps, out[part], mean[part], invstd[part])
    out = out.reshape(x.shape)
    stats = lead + (1,) * len(ns)
    # float32 parameters of a 16-bit input keep float32 statistics, as PyTorch's mixed kernel
    sd = _F32 if any(p is not None and p.dtype != dtype for p in (w0, b0)) else dtype
    return (out.astype(dtype, copy=False), mean.reshape(stats).astype(sd, copy=False),
            invstd.reshape(stats).astype(sd, copy=False))


def _normalize_rows(xp, rows, w, b, eps, out=None, mean=None, invstd=None):
    """(out, mean, invstd) of layer norm over the last axis of the 2-D ``rows`` with the
    weight and bias vectors ``w`` and ``b`` (None: no bias), into the given arrays if any."""
    xc, m, s = _last_axis_stats(xp, rows, eps)
    if mean is not None:
        mean[...], invstd[...] = m, s
    # out = xc * (invstd * w) + b, the products with the broadcast vectors taken on
    # planes of _spread (see there)
    out = _spread(xp, xc.shape, s.reshape(-1), w, out=out)  # a fresh array without out
    out *= xc
    if b is not None:
        # in place, NumPy broadcasts a row of 64 or more as fast as it adds a plane
        out += b if xc.shape[1] >= _ROW_LANES else _spread(xp, xc.shape, row=b)
    return out, m, s


_BLOCK = 1 << 16


def _row_blocks(xp, shape):
    """Slices of row blocks for an operation on (rows, k) values of more than _PLANE_MAX on
    NumPy, so that each block's temporaries stay in cache; None: one block (small inputs,
    other backends, rows longer than 1024). Blocks start at multiples of 64 rows, where
    OpenBLAS's matrix-vector kernels give each row the bits they give it in the whole array;
    a last block of one row joins the one before it (NumPy's matmul takes a dot product for
    a single row, which sums in another order)."""
    rows, k = shape
    if xp is not np or rows * k <= _PLANE_MAX or k > _BLOCK // 64:
        return None
    bounds = list(range(0, rows, _BLOCK // k // 64 * 64))
    if rows - bounds[-1] == 1:
        bounds.pop()
    return [slice(lo, hi) for lo, hi in zip(bounds, bounds[1:] + [rows])]


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
    # a double backward that reaches only the statistics gives weight and bias no gradient
    # (PyTorch's: "not used in the graph"), as in group norm
    reached = not gy.__dict__.get("_filled_zeros")
    if w is not None and w.requires_grad and reached:
        gw = ((gy2 * xc).mT @ invstd.squeeze(-1)).reshape(w.shape)
    if b is not None and b.requires_grad and reached:
        gb = (gy2.mT @ gy2.new_ones(gy2.shape[0])).reshape(b.shape)
    # under create_graph: PyTorch's one native_layer_norm_backward node, which takes x, w, b
    name = "NativeLayerNormBackwardBackward0"
    return tuple(rename_node(tied_to(g, (x, w, b), name), name) if g is not None else None
                 for g in (gx, gw, gb))


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
    gx = gw = gb = None
    if b is not None and b.requires_grad:
        gb = _make(_shaped(xp.ones(gy.shape[0], gy.dtype) @ gy, b.shape))
    need_w, need_x = w is not None and w.requires_grad, x.requires_grad
    if not (need_w or need_x):
        return gx, gw, gb
    xrows = x._data.reshape(-1, k).astype(gy.dtype, copy=False)
    avg = wk = out = None
    if need_x:
        wk = xp.ones(k, gy.dtype) if w is None else w._data.reshape(k).astype(gy.dtype,
                                                                               copy=False)
        avg = wk * (1 / k)
        # gx in an array of x's shape: one that owns its memory becomes .grad as it is, where
        # a reshaped view would be copied
        out = xp.empty(x.shape, gy.dtype)
    blocks = _row_blocks(xp, gy.shape)
    if blocks is None:
        gy_xc = _grad_rows(xp, gy, xrows, mean, invstd, wk, avg,
                           gx=None if out is None else out.reshape(gy.shape))
    else:   # row blocks whose temporaries stay in cache; gy * xc kept whole for the weight
        gy_xc = xp.empty(gy.shape, gy.dtype) if need_w else None
        gx2 = None if out is None else out.reshape(gy.shape)
        with one_blas_thread(xp):   # (each block's products are small: _small_on_one_...)
            for part in blocks:
                _grad_rows(xp, gy[part], xrows[part], mean[part], invstd[part], wk, avg,
                           None if gy_xc is None else gy_xc[part],
                           None if gx2 is None else gx2[part])
    if need_w:                                  # sum over rows of gy * xhat
        gw = _make(_shaped(invstd @ gy_xc, w.shape))
    if need_x:
        gx = _make(out)
    return gx, gw, gb


def _grad_rows(xp, gy, xrows, mean, invstd, wk, avg, gy_xc=None, gx=None):
    """``gy * xc`` (into ``gy_xc`` if given) of (rows, k) arrays and, given ``avg`` (the
    weight / k), the input's gradient into ``gx``."""
    xc = _minus_rows(xp, xrows, mean)
    gy_xc = xp.multiply(gy, xc, out=gy_xc)
    if avg is not None:
        xc *= _spread(xp, gy.shape, ((gy_xc @ avg) * invstd) * invstd * -invstd)  # (invstd**3
        #                                                                            overflows)
        gx = _spread(xp, gy.shape, invstd, wk, out=gx)  # every step after it in place
        gx *= gy
        gx += xc
        gx -= _spread(xp, gy.shape, (gy @ avg) * invstd)
    return gy_xc


def _shaped(a, shape):
    """``a`` in ``shape``: itself (which owns its memory) when it has that shape already."""
    return a if a.shape == shape else a.reshape(shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift."""
    if not isinstance(normalized_shape, tuple) or set(map(type, normalized_shape)) != {int}:
        from ember.ops._dims import int_sequence    # (PyTorch's parser refuses an int)
        normalized_shape = int_sequence(normalized_shape, ("layer_norm", "normalized_shape", 1),
                                        scalar=False)
    return native_layer_norm(input, tuple(normalized_shape), weight, bias, eps)[0]


def functional_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift."""
    return layer_norm(input, normalized_shape, weight, bias, eps)


# --- RMS norm ---------------------------------------------------------------------------------

def _check_rms_args(normalized_shape, eps):
    """PyTorch's parser errors for rms_norm's ``int[]`` normalized_shape (an int is refused)
    and ``float?`` eps, named by the entry point called (``rms_norm`` or ``_fused_rms_norm``)."""
    if isinstance(normalized_shape, (tuple, list)) and (
            eps is None or isinstance(eps, (float, int)) and not isinstance(eps, bool)):
        return
    from ember.ops._call_site import call_site
    from ember.ops._dims import _argument, int_sequence, type_name
    site = call_site()
    name = "_fused_rms_norm" if site is None or site.name == "_fused_rms_norm" else "rms_norm"
    if not isinstance(normalized_shape, (tuple, list)):
        int_sequence(normalized_shape, (name, "normalized_shape", 1), scalar=False)
    raise TypeError(f"{_argument((name, 'eps', 3))} must be float, not {type_name(eps)}")


@op("_fused_rms_norm(input, normalized_shape, weight=None, eps=None)",
    inputs=("input", "weight"), method=False)
def _fused_rms_norm(xp, x, w, normalized_shape, eps):
    """RMS normalization over the trailing ``normalized_shape`` dims, scaled by ``weight``;
    returns (output, rstd), rstd = 1/sqrt(mean(x^2) + eps) with size-1 trailing dims. As in
    PyTorch, 16-bit inputs compute in float32 (rstd stays float32), ``eps`` defaults to the
    machine epsilon of that computation dtype, and the output, rounded once, has the input's
    dtype."""
    _check_rms_args(normalized_shape, eps)
    ns = check_normalized_shape(x, normalized_shape, w, None, batch_dims="*")
    if x.dtype.kind not in "fV":
        raise NotImplementedError(f"\"rms_norm\" not implemented for '{_name(x)}'")
    wide = x.astype(_F32) if x.dtype in _LOW else x
    eps = float(np.finfo(wide.dtype).eps) if eps is None else eps
    k = math.prod(ns)
    lead = x.shape[:x.ndim - len(ns)]
    rows = wide.reshape(lead + (k,))
    # the composite's arithmetic (pow, mean, add, rsqrt), so that a call recorded for autograd
    # (which runs that composite, as PyTorch's CPU graph) and one under no_grad agree bitwise
    rstd = 1 / xp.sqrt((rows * rows).sum(-1) / k + eps)
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


@_fused_rms_norm.composed_when_recording
def _(inputs, params):
    """PyTorch's CPU graph, a composite: ``rstd = (x.pow(2).mean(dims, keepdim) + eps)
    .rsqrt()`` (so rstd's node is RsqrtBackward0), ``out = x * rstd [* weight]``, 16-bit
    inputs widened to float32 and the output cast back (ToCopyBackward0)."""
    x, w = inputs
    if x.device.type != "cpu":
        return NotImplemented
    normalized_shape, eps = params
    _check_rms_args(normalized_shape, eps)
    ns = check_normalized_shape(x, normalized_shape, w, None, batch_dims="*")
    if x.dtype.is_complex or not x.dtype.is_floating_point:
        return NotImplemented               # (the forward raises PyTorch's error)
    from ember.ops._registry import rename_node
    wide = x.float() if x.dtype in D.LOW_PRECISION else x
    eps = float(np.finfo(np.float32 if wide.dtype == D.float32 else np.float64).eps) \
        if eps is None else eps
    dims = tuple(range(x.ndim - len(ns), x.ndim))
    rstd = rename_node(wide.pow(2).mean(dims, keepdim=True) + eps, "AddBackward1").rsqrt()
    out = wide * rstd
    if w is not None:
        out = out * w
    return (out if out.dtype == x.dtype else out.to(x.dtype)), rstd


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
    sd = _F32 if any(p is not None and p.dtype != dtype for p in (w, b)) else dtype  # mixed
    return (like_input(xp, x, out.reshape(x.shape).astype(dtype, copy=False)),
            mean.reshape(n, group).astype(sd, copy=False),
            invstd.reshape(n, group).astype(sd, copy=False))


@native_group_norm.derivative(outputs=(1, 2))    # the statistics: y may change in place
def _(grads, x, w, b, n, c, hxw, group, eps, *, out, needs=(True, True, True)):
    gy, gmean, ginvstd = grads
    need_x, need_w, need_b = needs[0], w is not None and needs[1], b is not None and needs[2]
    if (not _GRAD.grad_enabled and (x._data.dtype in _FAST_DTYPES or x._data.dtype in _LOW)
            and gy._data.dtype == x._data.dtype and gy._data.size
            and not carries_gradient(gmean) and not carries_gradient(ginvstd)
            and _outside_vmap()):
        if x._data.dtype in _LOW:
            return _group_norm_backward_low(gy._data, x, w, b, out[1]._data, out[2]._data,
                                            (n, c, hxw, group), (need_x, need_w, need_b))
        return _group_norm_backward(gy._data, x, w, out[1]._data, out[2]._data,
                                    (n, c, hxw, group), (need_x, need_w, need_b))
    mean, invstd = out[1].reshape(n, group, 1), out[2].reshape(n, group, 1)
    xc = x.reshape(n, group, c // group * hxw) - mean
    gy3 = gy.reshape(n, c, hxw)
    gx = gw = gb = None
    if need_x:
        g = gy3 if w is None else gy3 * w.reshape(c, 1)
        gx = _norm_grad(g.reshape(xc.shape), xc, invstd, lambda t: t.sum(2, keepdim=True),
                        (c // group) * hxw, gmean, ginvstd).reshape(x.shape)
    # no gradient reached the output (a double backward reaches only the statistics): the
    # weight and bias get none, as in PyTorch, rather than zeros
    reached = not gy.__dict__.get("_filled_zeros")
    if need_w and reached:       # (PyTorch's nodes: views')
        gw = rename_node((gy3 * (xc * invstd).reshape(gy3.shape)).sum((0, 2)), "ViewBackward0")
    if need_b and reached:
        gb = rename_node(gy3.sum((0, 2)), "ViewBackward0")
    return gx, gw, gb


native_group_norm.reads_inputs((0, 1, 2), (0, 1, 2), ())   # PyTorch saves no bias


def _group_norm_backward_low(gy, x, w, b, mean, invstd, sizes, needs):
    """_group_norm_backward for a 16-bit input, as PyTorch's kernel: in float32 (from the
    statistics in their saved dtype), each gradient rounded once to its input's dtype."""
    wide = [None if t is None else _make(t._data.astype(_F32)) for t in (x, w)]
    grads = _group_norm_backward(gy.astype(_F32), wide[0], wide[1], mean.astype(_F32),
                                 invstd.astype(_F32), sizes, needs)
    return tuple(None if g is None else _make(g._data.astype(_np_dtype(t)))
                 for g, t in zip(grads, (x, w, b)))


def _np_dtype(t):
    """The NumPy dtype of a saved tensor or of an unsaved input's InputMeta."""
    return t._data.dtype if hasattr(t, "_data") else t._dtype


def _group_norm_backward(gy, x, w, mean, invstd, sizes, needs):
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
        if needs[1]:
            gw = _make((ds3 * inv).sum(0).reshape(w.shape))
        if needs[2]:
            gb = _make(db3.sum(0).reshape(c))
        if needs[0]:
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
    if input.ndim >= 2 and isinstance(num_groups, int) and num_groups:
        # PyTorch's check of one value per (sample, group), in its words (its sizes: N * C //
        # num_groups rows of num_groups groups), before the channels' divisibility
        size = [input.shape[0] * input.shape[1] // num_groups, num_groups, *input.shape[2:]]
        if size[0] * math.prod(size[2:]) == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {size}")
    return group_norm(input, num_groups, weight, bias, eps)

for _f, _n in ((functional_layer_norm, "layer_norm"), (functional_group_norm, "group_norm")):
    _f.__name__ = _f.__qualname__ = _n
