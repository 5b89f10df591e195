"""Pooling and interpolation on the GPU (NOTE [CUDA kernel overrides]): the forwards and
gradients that run the Triton kernels of triton_pooling.py and triton_resample.py.

1-D to 3-D max pooling (values and indices), average pooling with its gradient, adaptive
average pooling whose windows are equal (as average pooling), and 1-D and 2-D interpolation in
every mode with its gradient. Pooling runs on volumes (1-D and 2-D geometry as volumes one
plane deep and one row high), interpolation on planes. Each reads only its windows' or taps'
inputs, so none needs the generic code's read of whether the input is finite. Other layouts,
dtypes and 3-D interpolation return None: the generic code runs.
"""

import math

import numpy as np

from ember._deterministic import STATE as _DETERMINISM
from ember._tensor import _make
from ember.backend import device_copy, xp_of
from ember.backend.cuda_kernels import override, override_derivative
from ember.backend.cuda_kernels import triton_pooling as pooling
from ember.backend.cuda_kernels import triton_resample as resample
from ember.backend.cuda_kernels._launch import buffer, covered
from ember.ops import resampling
from ember.ops._separable import Taps, built_once
from ember.ops.adaptive_pooling import _check as _adaptive_args
from ember.ops.pooling import Shape, _avg_args, _max_args


def _as_3d(nd, size, out, kernel, stride, padding):
    """1-D and 2-D pooling geometry as 3-D pooling of volumes one plane deep (and one row
    high): (size, out, kernel, stride, padding) triples."""
    one, zero = (1,) * (3 - nd), (0,) * (3 - nd)
    return (one + tuple(size), one + tuple(out), one + tuple(kernel), one + tuple(stride),
            zero + tuple(padding))


# --- max pooling ------------------------------------------------------------------------------

def _max_pool(xp, x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    k, s, p, d, out = _max_args(nd, x, kernel_size, stride, padding, dilation, ceil_mode)
    if not covered(x) or math.prod(k) > pooling.MAX_TAPS:
        return None
    lead = x.shape[:x.ndim - nd]
    y = xp.empty(lead + tuple(out), x.dtype)
    index = xp.empty(y.shape, xp.int64)
    if y.size:
        pooling.max_pool3d(buffer(x), buffer(y), buffer(index), math.prod(lead),
                           *_as_3d(nd, x.shape[x.ndim - nd:], out, k, s, p),
                           (1,) * (3 - nd) + tuple(d))
    return y, index


@override("max_pool1d_with_indices")
def max_pool1d_with_indices(xp, x, kernel_size, stride, padding, dilation, ceil_mode):
    """1-D max pooling of a contiguous array in one pass (values, flat indices)."""
    return _max_pool(xp, x, 1, kernel_size, stride, padding, dilation, ceil_mode)


@override("nn.functional.max_pool2d_with_indices")
def max_pool2d_with_indices(xp, x, kernel_size, stride, padding, dilation, ceil_mode,
                            *unused):
    """2-D max pooling of a contiguous array in one pass (values, flat indices); no read of
    the maxima to find NaNs, which the generic sweep makes."""
    return _max_pool(xp, x, 2, kernel_size, stride, padding, dilation, ceil_mode)


@override("nn.functional.max_pool3d_with_indices")
def max_pool3d_with_indices(xp, x, kernel_size, stride, padding, dilation, ceil_mode,
                            *unused):
    """3-D max pooling of a contiguous array in one pass (values, flat indices)."""
    return _max_pool(xp, x, 3, kernel_size, stride, padding, dilation, ceil_mode)


# --- average pooling --------------------------------------------------------------------------

def _avg_pool(xp, x, nd, k, s, p, out, count_include_pad, divisor):
    """Average pooling of checked geometry through the kernel; None for what it leaves."""
    if not covered(x) or math.prod(k) > pooling.MAX_TAPS:
        return None
    lead = x.shape[:x.ndim - nd]
    y = xp.empty(lead + tuple(out), x.dtype)
    if y.size:
        pooling.avg_pool3d(buffer(x), buffer(y), math.prod(lead),
                           *_as_3d(nd, x.shape[x.ndim - nd:], out, k, s, p),
                           count_include_pad, divisor)
    return y


def _uniform_windows(size, out):
    """The kernel of adaptive pooling from ``size`` to ``out`` when its windows are equal and
    disjoint (each size a multiple of its output's, not all outputs 1), else None."""
    if all(o == 1 for o in out) or any(o == 0 or n % o for n, o in zip(size, out)):
        return None
    return tuple(n // o for n, o in zip(size, out))


@override("avg_pool1d")
def avg_pool1d(xp, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    """1-D average pooling of a contiguous array in one pass."""
    k, s, p, out = _avg_args(1, x, kernel_size, stride, padding, ceil_mode, None)
    return _avg_pool(xp, x, 1, k, s, p, out, count_include_pad, None)


@override("nn.functional.avg_pool2d")
def avg_pool2d(xp, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override=None):
    """2-D average pooling of a contiguous array in one pass, reading only each window's
    taps (the generic matrices read whether the input is finite first)."""
    k, s, p, out = _avg_args(2, x, kernel_size, stride, padding, ceil_mode, divisor_override)
    return _avg_pool(xp, x, 2, k, s, p, out, count_include_pad, divisor_override)


@override("nn.functional.avg_pool3d")
def avg_pool3d(xp, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override=None):
    """3-D average pooling of a contiguous array in one pass (the generic code sums a shifted
    copy per tap)."""
    k, s, p, out = _avg_args(3, x, kernel_size, stride, padding, ceil_mode, divisor_override,
                             gpu=True)
    return _avg_pool(xp, x, 3, k, s, p, out, count_include_pad, divisor_override)


def _adaptive_avg_pool(xp, x, nd, output_size):
    out = _adaptive_args("avg", nd, x, output_size)
    k = _uniform_windows(x.shape[x.ndim - nd:], out)
    return None if k is None else _avg_pool(xp, x, nd, k, k, (0,) * nd, out, True, None)


@override("adaptive_avg_pool1d")
def adaptive_avg_pool1d(xp, x, output_size):
    """1-D adaptive average pooling with equal windows, as average pooling, in one pass."""
    return _adaptive_avg_pool(xp, x, 1, output_size)


@override("nn.functional.adaptive_avg_pool2d")
def adaptive_avg_pool2d(xp, x, output_size):
    """2-D adaptive average pooling with equal windows (sizes that are multiples of the
    output's), as average pooling, in one pass."""
    return _adaptive_avg_pool(xp, x, 2, output_size)


@override("nn.functional.adaptive_avg_pool3d")
def adaptive_avg_pool3d(xp, x, output_size):
    """3-D adaptive average pooling with equal windows, as average pooling, in one pass."""
    return _adaptive_avg_pool(xp, x, 3, output_size)


# --- interpolation ----------------------------------------------------------------------------

def _taps_of(m):
    """A dim's map (Taps, or a matrix read at its nonzero entries) as (index, weight) tables
    of shape (outputs, taps): int64 indices, -1 for a tap not read; float32 weights."""
    if isinstance(m, Taps):
        used = np.ones(m.index.shape, bool) if m.used is None else m.used
        index, weight = np.where(used, m.index, -1), m.weight * used
    else:
        nonzero = m != 0
        taps = max(int(nonzero.sum(axis=1).max()), 1)
        order = np.argsort(~nonzero, axis=1, kind="stable")[:, :taps]   # nonzero columns first
        read = np.take_along_axis(nonzero, order, axis=1)
        index, weight = np.where(read, order, -1), np.take_along_axis(m, order, axis=1) * read
    return index.astype(np.int64), weight.astype(np.float32)


def _copy_taps(n):
    """The tap tables of a dim that is copied (``_mats`` gives None for it)."""
    return np.arange(n, dtype=np.int64)[:, None], np.ones((n, 1), np.float32)


@built_once
def _tap_tables(shape, out, scales, mode, align_corners, antialias):
    """interpolate's geometry as (index, weight) tap tables per dim, two dims (a 1-D
    geometry gets a one-row identity dim first)."""
    mats = resampling._mats(shape, out, scales, mode, align_corners, antialias)
    tables = [_copy_taps(n) if m is None else _taps_of(m) for n, m in zip(shape, mats)]
    if len(tables) == 1:
        tables.insert(0, (np.zeros((1, 1), np.int64), np.ones((1, 1), np.float32)))
    return tuple(tables)


def _resample_tables(like, shape, out, scales, mode, align_corners, antialias):
    """The tap tables on ``like``'s GPU as (index, weight, taps) buffers per dim, uploaded
    once per geometry; None when there are too many taps for the kernel."""
    tables = _tap_tables(shape, out, scales, mode, align_corners, antialias)
    if math.prod(index.shape[1] for index, _ in tables) > resample.MAX_TAPS:
        return None
    return tuple((buffer(device_copy(like, index, index.dtype)),
                  buffer(device_copy(like, weight, weight.dtype)), index.shape[1])
                 for index, weight in tables)


def _as_planes(shape, out):
    """(planes, (H, W), (OH, OW)) of an (N, C, *spatial) resampling with 1 or 2 dims."""
    one = (1,) * (4 - len(shape))
    return shape[0] * shape[1], one + tuple(shape[2:]), one + tuple(out)


@override("nn.functional.interpolate")
def interpolate(xp, x, size, scale_factor, mode, align_corners, recompute_scale_factor,
                antialias):
    """1-D and 2-D interpolation of a contiguous array in one pass over the output, reading
    each output's taps (the generic matrices read whether the input is finite first)."""
    resampling._check(x, mode, antialias)
    out, scales = resampling._spatial_args(x, size, scale_factor, mode, align_corners,
                                           recompute_scale_factor, antialias)
    if x.ndim > 4 or not covered(x):
        return None
    tables = _resample_tables(x, tuple(x.shape[2:]), out, scales, mode, align_corners,
                             antialias)
    if tables is None:
        return None
    y = xp.empty(x.shape[:2] + tuple(out), x.dtype)
    resample.resample2d(buffer(x), buffer(y), tables, *_as_planes(x.shape, out))
    return y


# --- gradients --------------------------------------------------------------------------------

def _avg_pool_backward(nd, grad, x, k, s, p, out, count_include_pad, divisor):
    g = xp_of(grad._data).ascontiguousarray(grad._data)     # sum()'s gradient is broadcast
    lead = tuple(x.shape[:x.ndim - nd])
    if (math.prod(k) > pooling.MAX_TAPS or g.shape != lead + tuple(out)
            or g.dtype != x.dtype.np or not covered(g)):
        return None
    dx = xp_of(g).empty(tuple(x.shape), g.dtype)
    pooling.avg_pool3d_backward(buffer(g), buffer(dx), math.prod(lead),
                                *_as_3d(nd, x.shape[x.ndim - nd:], out, k, s, p),
                                count_include_pad, divisor)
    return _make(dx)


def _avg_geometry(nd, x, kernel_size, stride, padding, ceil_mode, divisor_override):
    return _avg_args(nd, Shape(tuple(x.shape)), kernel_size, stride, padding, ceil_mode,
                     divisor_override)


@override_derivative("avg_pool1d")
def avg_pool1d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    """1-D average pooling's input gradient in one pass."""
    k, s, p, out = _avg_geometry(1, x, kernel_size, stride, padding, ceil_mode, None)
    return _avg_pool_backward(1, grad, x, k, s, p, out, count_include_pad, None)


@override_derivative("nn.functional.avg_pool2d")
def avg_pool2d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override=None):
    """2-D average pooling's input gradient in one pass."""
    k, s, p, out = _avg_geometry(2, x, kernel_size, stride, padding, ceil_mode,
                                 divisor_override)
    return _avg_pool_backward(2, grad, x, k, s, p, out, count_include_pad, divisor_override)


@override_derivative("nn.functional.avg_pool3d")
def avg_pool3d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override=None):
    """3-D average pooling's input gradient in one pass."""
    k, s, p, out = _avg_geometry(3, x, kernel_size, stride, padding, ceil_mode,
                                 divisor_override)
    return _avg_pool_backward(3, grad, x, k, s, p, out, count_include_pad, divisor_override)


def _adaptive_avg_pool_backward(nd, grad, x):
    out = tuple(grad.shape[grad.ndim - nd:])
    k = _uniform_windows(tuple(x.shape[x.ndim - nd:]), out)
    return None if k is None else _avg_pool_backward(nd, grad, x, k, k, (0,) * nd, out, True,
                                                      None)


@override_derivative("adaptive_avg_pool1d")
def adaptive_avg_pool1d_backward(grad, x, output_size):
    """1-D adaptive average pooling's input gradient (equal windows) in one pass."""
    return _adaptive_avg_pool_backward(1, grad, x)


@override_derivative("nn.functional.adaptive_avg_pool2d")
def adaptive_avg_pool2d_backward(grad, x, output_size):
    """2-D adaptive average pooling's input gradient (equal windows) in one pass."""
    return _adaptive_avg_pool_backward(2, grad, x)


@override_derivative("nn.functional.adaptive_avg_pool3d")
def adaptive_avg_pool3d_backward(grad, x, output_size):
    """3-D adaptive average pooling's input gradient (equal windows) in one pass."""
    return _adaptive_avg_pool_backward(3, grad, x)


@override_derivative("nn.functional.interpolate")
def interpolate_backward(grad, x, size, scale_factor, mode, align_corners, recompute_scale_factor,
                antialias):
    """1-D and 2-D interpolation's input gradient in one pass over the output gradient
    (its atomic adds are not run-to-run identical: deterministic mode takes the generic
    products)."""
    if _DETERMINISM.enabled:
        return None
    g = xp_of(grad._data).ascontiguousarray(grad._data)     # sum()'s gradient is broadcast
    if x.ndim > 4 or g.dtype != x.dtype.np or not covered(g):
        return None
    out = tuple(g.shape[2:])
    _, scales = resampling._spatial_args(resampling._Meta(x.shape), size, scale_factor, mode,
                                         align_corners, recompute_scale_factor, antialias)
    tables = _resample_tables(g, tuple(x.shape[2:]), out, scales, mode, align_corners,
                             antialias)
    if tables is None:
        return None
    xp = xp_of(g)
    dx = xp.zeros(tuple(x.shape), xp.float32)       # summed into by atomic adds
    resample.resample2d_backward(buffer(g), buffer(dx), tables, *_as_planes(x.shape, out))
    return _make(dx.astype(g.dtype, copy=False))
