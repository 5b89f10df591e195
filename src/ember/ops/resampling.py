"""Interpolation (``F.interpolate`` and the deprecated ``F.upsample*``); this stub module
also gathers grid sampling (grid_sampling.py) and the shuffles (shuffle.py).

Every mode is linear in the input and separable over the spatial dims: a small (out, in)
matrix per dim (ops/_separable.py), built with PyTorch's source-index rules. Nearest modes
gather instead (exact, and fine for uint8); their gradient uses the one-hot matrices. uint8
bilinear and bicubic input is resampled in fixed point, as PyTorch does (_resample_uint8.py).
"""

import math
import operator
import warnings

import numpy as np

from ember import _dtype as D
from ember._memory_format import like_input, like_input_1d, suggested_order
from ember.backend import device_copy
from ember.ops import grid_sampling, shuffle  # noqa: E402,F401
from ember.ops._pool_args import adaptive_mats
from ember.ops._registry import op, rename_node
from ember.ops._resample_bilinear16 import (bilinear_16_bit, generic_16_bit,
                                             takes_channels_last_kernel)
from ember.ops._resample_uint8 import resample_uint8
from ember.ops._separable import Taps, _along_dims, apply_mats, built_once, transposed

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact",
          "lanczos")
_NEEDS = {"linear": 3, "bilinear": 4, "trilinear": 5}
_AXES = {1: ("W",), 2: ("H", "W"), 3: ("D", "H", "W")}
_CUBIC_A = -0.75


def _spatial_args(x, size, scale_factor, mode, align_corners, recompute_scale_factor,
                  antialias):
    """Checked (output size, per-dim scale passed to the kernel or None) for interpolate."""
    nd = x.ndim - 2
    if mode in ("nearest", "area", "nearest-exact") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and x.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    if mode == "lanczos" and x.ndim == 4:
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    spatial = list(x.shape[2:])
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        if isinstance(size, (list, tuple)):
            if len(size) != nd:
                raise ValueError(f"Input and output must have the same number of spatial "
                                 f"dimensions, but got input with spatial dimensions of "
                                 f"{spatial} and output size of {size}. Please provide input "
                                 f"tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 f"(o1, o2, ...,oK) format.")
            if not all(_is_index(v) for v in size):
                raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] "
                                f"or Tuple[int, int, int], but got size with types "
                                f"{[type(v) for v in size]}")
            out = [operator.index(v) for v in size]
        elif _is_index(size):
            out = [operator.index(size)] * nd
        else:
            raise TypeError(_bad_size(size, nd, mode))
        scales = [None] * nd
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != nd:
                raise ValueError(f"Input and scale_factor must have the same number of spatial "
                                 f"dimensions, but got input with spatial dimensions of "
                                 f"{spatial} and scale_factor of shape {scale_factor}. Please "
                                 f"provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 f"scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * nd
        out = [math.floor(n * s) for n, s in zip(spatial, scales)]
        if recompute_scale_factor:
            scales = [None] * nd
    else:
        raise ValueError("either size or scale_factor should be defined")
    out = [int(v) for v in out]
    if mode == "area":
        _check_area_sizes(list(x.shape), out)
    elif any(v <= 0 for v in spatial + out):
        names = _AXES[nd]
        ins = ", ".join(f"{n}: {v}" for n, v in zip(names, spatial))
        outs = ", ".join(f"{n}: {v}" for n, v in zip(names, out))
        joint = " and" if nd == 1 else ""
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({ins}){joint} output ({outs})")
    return tuple(out), scales


def _check_area_sizes(shape, out):
    """PyTorch's adaptive-pooling errors (behind ``area``), which allow an empty output."""
    if len(shape) == 3:                 # the 1-D case runs as 2-D over an inserted unit axis
        shape, out = shape[:2] + [1] + shape[2:], [1] + out
    nd = len(out)
    first = 1 if nd == 3 else 2         # only the 3-D kernel refuses zero channels
    if 0 in shape[first:]:
        raise RuntimeError(f"adaptive_avg_pool{nd}d(): Expected input to have non-zero size for "
                           f"non-batch dimensions, but input has sizes "
                           f"[{', '.join(map(str, shape))}] with dimension "
                           f"{first + shape[first:].index(0)} being empty")
    if any(v < 0 for v in out):
        got = f"{out[0]}, {out[1]},{out[2]}" if nd == 3 else f"{out[0]}, {out[1]}"
        raise RuntimeError(f"adaptive_avg_pool{nd}d: elements of output_size must be greater "
                           f"than or equal to 0 but received {{{got}}}")


def _is_index(v):
    """An int or an integer tensor of one element (a valid entry of ``size``)."""
    if isinstance(v, bool):
        return False
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _bad_size(size, nd, mode):
    """PyTorch's message for a ``size`` that is neither a sequence nor an integer."""
    if mode == "area":
        return (f"adaptive_avg_pool{nd}d(): argument 'output_size' (position 2) must be tuple "
                f"of ints, but found element of type {type(size).__name__} at pos 0")
    name = f"_upsample_nearest_exact{nd}d" if mode == "nearest-exact" else f"upsample_{mode}{nd}d"
    got = "Tensor, list, NoneType" if "nearest" in mode else "Tensor, list, bool, NoneType"
    return (f"{name}() received an invalid combination of arguments - got ({got}), but "
            f"expected one of:")


def _int_kernel(mode, ndim, antialias):
    """The name of PyTorch's CPU kernel that rejects an integer input of ``mode``."""
    if antialias:
        return "compute_index_ranges_weights"
    if mode == "area":
        return "adaptive_avg_pool3d_cpu" if ndim == 5 else "adaptive_avg_pool2d"
    if ndim == 4 and mode != "bicubic":     # 2-D nearest/bilinear: the channels-last kernel
        return f"upsample_{mode.replace('-exact', '')}2d_channels_last"
    kind = {"bicubic": "cubic", "linear": "linear", "trilinear": "linear"}.get(mode, "nearest")
    return f"compute_indices_weights_{kind}"


def _check(x, mode, antialias):
    if (mode not in _MODES or x.ndim not in (3, 4, 5)
            or (mode in ("bicubic", "lanczos") and x.ndim != 4)):
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {x.ndim}D) for the "
            f"modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | "
            f"nearest-exact (got {mode})")
    if mode in _NEEDS and x.ndim != _NEEDS[mode]:
        raise NotImplementedError(f"Got {x.ndim}D input, but {mode} mode needs "
                                  f"{_NEEDS[mode]}D input")
    if 0 in x.shape[1:] and mode != "area":      # area: adaptive pooling's own check
        raise RuntimeError(f"Non-empty {x.ndim}D data tensor expected but got a tensor with "
                           f"sizes {list(x.shape)}")
    kind = np.dtype(x.dtype)
    if antialias and kind.itemsize == 2 and kind.kind in "fV":
        raise NotImplementedError(f"\"compute_index_ranges_weights\" not implemented for "
                                  f"'{D.FROM_NUMPY[kind]._torch_name}'")
    if kind.kind in "fV" or (kind == np.uint8 and mode not in ("area", "linear", "trilinear")):
        return
    if mode == "area":      # checked with the output size (_check_area)
        return
    raise NotImplementedError(f"\"{_int_kernel(mode, x.ndim, antialias)}\" not implemented for "
                              f"'{D.FROM_NUMPY[kind]._torch_name}'")


def _check_area(x, out):
    """Area mode's dtype check: PyTorch pools to one pixel with ``mean`` (complex works,
    integers fail as in ``mean``), otherwise with its float-only adaptive pooling kernel."""
    kind = np.dtype(x.dtype)
    if all(o == 1 for o in out) and kind.kind not in "fcV":
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: "
                           f"{D.FROM_NUMPY[kind]._torch_name}")
    if not all(o == 1 for o in out) and kind.kind not in "fV":
        raise NotImplementedError(f"\"{_int_kernel('area', x.ndim, False)}\" not implemented "
                                  f"for '{D.FROM_NUMPY[kind]._torch_name}'")


@built_once
def _nearest_index(n, o, scale, mode, nd):
    """PyTorch's nearest source index per output position (computed in float32 as it does).
    Its 2-D 'nearest' kernel copies a dim of unchanged size and halves a doubled one whatever
    the scale factor; the 1-D and 3-D kernels and 'nearest-exact' always apply the scale."""
    if mode == "nearest" and nd == 2 and o in (n, 2 * n):
        return np.arange(o) // (o // n)
    exact = mode == "nearest-exact"
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(n) / o
    dst = np.arange(o, dtype=np.float32)
    src = np.floor(((dst + np.float32(0.5)) if exact else dst) * s).astype(np.int64)
    return np.minimum(src, n - 1)


def _source(n, o, scale, align_corners, cubic):
    """Real-valued source coordinate of each output position (linear and cubic modes)."""
    dst = np.arange(o, dtype=np.float64)
    if align_corners:
        return dst * ((n - 1) / (o - 1) if o > 1 else 0.0)
    s = 1.0 / scale if scale is not None and scale > 0 else n / o
    src = s * (dst + 0.5) - 0.5
    return src if cubic else np.maximum(src, 0.0)


def _source32(n, o, scale, align_corners, cubic=False, fused=True):
    """``_source`` in float32 arithmetic, as PyTorch's float32 linear kernels compute it: the
    scale ``1 / scale_factor`` taken in double and rounded, ``scale * (dst + 0.5) - 0.5`` as
    one fused multiply-add (``fused=False``: rounding each step, as its bicubic backward)."""
    f = np.float32
    dst = np.arange(o, dtype=f)
    s = _scale32(n, o, scale, align_corners)
    if align_corners:
        return dst * s
    src = _fma32(s, dst + f(0.5), f(-0.5)) if fused else s * (dst + f(0.5)) - f(0.5)
    return src if cubic else np.maximum(src, f(0))


def _scale32(n, o, scale, align_corners):
    """PyTorch's float32 source-per-output scale (``area_pixel_compute_scale``)."""
    f = np.float32
    if align_corners:
        return f(n - 1) / f(o - 1) if o > 1 else f(0)
    return f(1.0 / scale) if scale is not None and scale > 0 else f(n) / f(o)


def _linear_mat(n, o, scale, align_corners, single=False):
    if n == o:      # PyTorch reads each pixel with weight 1 (and again with weight 0: inf
        i = np.arange(n)                        # gives NaN), whatever the scale factor
        return Taps(np.stack([i, i], 1), np.stack([np.ones(n), np.zeros(n)], 1), n)
    src = _source32(n, o, scale, align_corners) if single else \
        _source(n, o, scale, align_corners, False)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    lam = src - i0.astype(src.dtype)
    w = np.stack([1 - lam, lam], 1).astype(np.float64)
    return Taps(np.stack([i0, np.minimum(i0 + 1, n - 1)], 1), w, n)


def _fma32(a, b, c):
    """``a * b + c`` for float32 operands rounded once, as a fused multiply-add (the float64
    product of two float32 values is exact)."""
    return (np.float64(a) * np.asarray(b, np.float64) + np.float64(c)).astype(np.float32)


def _horner32(x, coeffs, fused):
    """The polynomial of ``coeffs`` (highest first) at ``x`` in float32 by Horner's rule, its
    first ``fused`` steps fused multiply-adds as PyTorch's build contracts them (matched
    weight for weight against its kernels), the others rounding each operation."""
    f = np.float32
    x = np.asarray(x, f)
    y = np.full(x.shape, coeffs[0], f)
    for k, c in enumerate(coeffs[1:]):
        y = _fma32(y, x, f(c)) if k < fused else y * x + f(c)
    return y


def _cubic32(x, a, fused):
    """The cubic convolution filter (``a``: its parameter) at ``|x| < 2`` in float32:
    ``((a + 2) x - (a + 3)) x x + 1`` below 1, ``((a x - 5 a) x + 8 a) x - 4 a`` above."""
    near = _horner32(x, (a + 2, -(a + 3), 0, 1), fused)
    return np.where(np.asarray(x) < 1, near, _horner32(x, (a, -5 * a, 8 * a, -4 * a), fused))


def _cubic_mat32(n, o, scale, align_corners, fused=2):
    """``_cubic_mat`` in float32 arithmetic, as PyTorch's float32 bicubic kernel: the source
    index floored (at most n - 1), its fraction clamped to [0, 1]; ``fused=0``: as its
    backward kernel (built without fused multiply-adds)."""
    f = np.float32
    src = _source32(n, o, scale, align_corners, cubic=True, fused=bool(fused))
    i = np.minimum(np.floor(src).astype(np.int64), n - 1)
    t = np.clip(src - i.astype(f), f(0), f(1))
    u = f(1) - t
    w = [_cubic32(t + f(1), _CUBIC_A, fused), _cubic32(t, _CUBIC_A, fused),
         _cubic32(u, _CUBIC_A, fused), _cubic32(u + f(1), _CUBIC_A, fused)]
    index = np.stack([np.clip(i + j, 0, n - 1) for j in range(-1, 3)], 1)
    return Taps(index, np.stack(w, 1).astype(np.float64), n)


def _aa_mat32(n, o, scale, align_corners, mode):
    """``_aa_mat`` in float32 arithmetic, step by step as PyTorch's float32 antialiased
    kernels build their weights (the bounds truncated, the weights summed in order)."""
    f, d = np.float32, np.float64
    s = _scale32(n, o, scale, align_corners)
    wide = s >= 1
    support = f((2.0 if mode == "bicubic" else 1.0) * (d(s) if wide else 1.0))
    inv = f(1.0 / d(s)) if wide else f(1)
    center = (d(s) * (np.arange(o) + 0.5)).astype(f)
    xmin = np.maximum((center - support).astype(d) + 0.5, 0).astype(np.int64)
    xsize = np.minimum(((center + support).astype(d) + 0.5).astype(np.int64), n) - xmin
    xsize = np.clip(xsize, 0, int(np.ceil(support)) * 2 + 1)
    taps = np.arange(max(int(xsize.max()), 1))
    used = taps < xsize[:, None]
    x = np.abs((((xmin[:, None] + taps).astype(f) - center[:, None]).astype(d) + 0.5)
               * d(inv)).astype(f)
    if mode == "bicubic":
        w = np.where(x < 2, _cubic32(x, -0.5, 3), f(0))
    else:
        w = np.where(x < 1, f(1) - x, f(0))
    w = np.where(used, w, f(0)).astype(f)
    total = np.cumsum(w, axis=1, dtype=f)[:, -1:]          # (in order, as PyTorch adds)
    w = np.where(total != 0, w / np.where(total == 0, f(1), total), w)
    index = np.minimum(xmin[:, None] + taps, n - 1)
    return Taps(index, w.astype(d), n, used)


def _cubic_mat(n, o, scale, align_corners):
    src = _source(n, o, scale, align_corners, True)
    i = np.floor(src).astype(np.int64)
    t = src - i
    a = _CUBIC_A
    w = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
         ((a + 2) * t - (a + 3)) * t * t + 1,
         ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
         ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]
    index = np.stack([np.clip(i + j, 0, n - 1) for j in range(-1, 3)], 1)
    return Taps(index, np.stack(w, 1), n)


def _aa_mat(n, o, scale, align_corners, mode):
    """Antialiased (bilinear/bicubic/lanczos) weights: the filter widened by the downscale
    factor."""
    if align_corners:
        s = (n - 1) / (o - 1) if o > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n / o
    support = {"bicubic": 2.0, "lanczos": 3.0}.get(mode, 1.0) * max(s, 1.0)
    inv = 1.0 / max(s, 1.0)
    center = s * (np.arange(o) + 0.5)
    xmin = np.maximum(np.floor(center - support + 0.5), 0).astype(np.int64)
    xmax = np.minimum(np.floor(center + support + 0.5), n).astype(np.int64)
    pos = np.arange(n)
    inside = (pos >= xmin[:, None]) & (pos < xmax[:, None])
    x = np.abs((pos[None, :] - center[:, None] + 0.5) * inv)
    if mode == "lanczos":                       # Lanczos-3: sinc(x) sinc(x / 3)
        w = np.where(x < 3, np.sinc(x) * np.sinc(x / 3), 0.0)
    elif mode == "bicubic":
        a = -0.5
        w = np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                     np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))
    else:
        w = np.maximum(1 - x, 0.0)
    w = w * inside
    total = w.sum(axis=1, keepdims=True)
    w = w / np.where(total == 0, 1, total)
    taps = np.arange(max(int((xmax - xmin).max()), 1))
    index = np.minimum(xmin[:, None] + taps, n - 1)
    return Taps(index, np.take_along_axis(w, index, 1), n, taps < (xmax - xmin)[:, None])


@built_once
def _mats(shape, out, scales, mode, align_corners, antialias, single=False, backward=False):
    """Per-dim Taps or matrices; ``single``: float32 weights (see ``_source32``) and
    ``backward``: those of PyTorch's backward kernel (bicubic's differ, see _cubic_mat32)."""
    mats = []
    for n, o, s in zip(shape, out, scales):
        if n == o and antialias:        # PyTorch's kernels copy a dim of unchanged size,
            m = None                    # whatever the scale factor (see _linear_mat)
        elif mode in ("nearest", "nearest-exact"):
            m = np.zeros((o, n))
            m[np.arange(o), _nearest_index(n, o, s, mode, len(shape))] = 1
        elif antialias:
            m = (_aa_mat32 if single and mode != "lanczos" else _aa_mat)(n, o, s,
                                                                          align_corners, mode)
        elif mode == "bicubic":
            m = _cubic_mat32(n, o, s, align_corners, 0 if backward else 2) if single else \
                _cubic_mat(n, o, s, align_corners)
        elif mode == "area":
            m = adaptive_mats((n,), (o,))[0]
        else:
            m = _linear_mat(n, o, s, align_corners, single)
        mats.append(m)
    return mats


@op("interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None, "
    "recompute_scale_factor=None, antialias=False)", namespace="nn.functional",
    saves_inputs=False, grad_fn_name="UpsampleBackward0")
def interpolate(xp, x, size, scale_factor, mode, align_corners, recompute_scale_factor,
                antialias):
    """Resample ``input`` to ``size`` (or by ``scale_factor``) with the given ``mode``."""
    _check(x, mode, antialias)
    out, scales = _spatial_args(x, size, scale_factor, mode, align_corners,
                                recompute_scale_factor, antialias)
    if mode == "area":
        _check_area(x, out)
    res = _resample(xp, x, out, scales, mode, align_corners, antialias)
    if mode == "area" and x.ndim == 3:      # adaptive pooling's layouts (see adaptive_pooling)
        return like_input_1d(xp, x, res)
    if mode == "area" and x.ndim == 5 and any(o != 1 for o in out):
        return res
    return like_input(xp, x, res)


def _resample(xp, x, out, scales, mode, align_corners, antialias):
    """``interpolate`` on checked arguments (``out``: the output's spatial size)."""
    if mode in ("nearest", "nearest-exact"):
        picked = x
        for i, (n, o, s) in enumerate(zip(x.shape[2:], out, scales)):
            index = _nearest_index(n, o, s, mode, x.ndim - 2)
            if n != o or (index != np.arange(n)).any():    # a scale may move an equal size
                picked = picked.take(device_copy(x, index, index.dtype), axis=2 + i)
        return picked if picked is not x else x.copy(order="K")   # never the input's memory
    mats = _mats(x.shape[2:], out, scales, mode, align_corners, antialias,
                 _single(mode, antialias, x.dtype))
    if x.dtype == np.uint8:
        return resample_uint8(xp, x, x.shape[2:], out, mats)
    if (mode == "bicubic" and not antialias and x.dtype.itemsize == 2 and x.dtype.kind in "fV"
            and xp is np):              # PyTorch's CPU kernel; a GPU one rounds once
        return _bicubic_16_bit(xp, x, _taps_in(mats, x.dtype))
    if (mode in ("linear", "bilinear", "trilinear") and not antialias and x.dtype.itemsize == 2
            and x.dtype.kind in "fV" and xp is np):
        if mode == "bilinear" and x.size and takes_channels_last_kernel(x, out):
            return bilinear_16_bit(x, out, [_source32(n, o, s, align_corners)
                                            for n, o, s in zip(x.shape[2:], out, scales)])
        mats = _linear_taps_in(mats, x.dtype)
        if mode == "bilinear" and x.size and all(isinstance(m, Taps) for m in mats):
            return generic_16_bit(x, mats)
    # (PyTorch's float32 bicubic and antialiased kernels sum along the last dim first)
    return apply_mats(xp, x, mats, (mode == "bicubic" or antialias) and x.dtype == np.float32)


def _single(mode, antialias, dtype):
    """Whether PyTorch computes this interpolation's weights in float32 arithmetic: its
    float32 linear, bicubic and antialiased kernels do, and its 16-bit linear ones before
    rounding them (float64 ones in double; see _linear_taps_in and _taps_in)."""
    dtype = np.dtype(getattr(dtype, "np", dtype))
    sixteen = dtype.itemsize == 2 and dtype.kind in "fV"
    return (mode in _NEEDS or mode == "bicubic" or antialias) and \
        (dtype == np.float32 or (mode in _NEEDS and not antialias and sixteen))


@built_once
def _linear_taps_in(mats, dtype):
    """PyTorch's float16/bfloat16 linear kernels store ``lambda1`` in the input's dtype and
    take ``lambda0 = 1 - lambda1`` in that dtype too (the sums stay in float32)."""
    taps = []
    for m in mats:
        if m is not None:
            far = m.weight[:, 1].astype(np.float32).astype(dtype).astype(np.float32)
            near = (1 - far).astype(dtype).astype(np.float64)
            m = Taps(m.index, np.stack([near, far.astype(np.float64)], 1), m.matrix.shape[1])
        taps.append(m)
    return taps


@built_once
def _taps_in(mats, dtype):
    """The taps with their weights rounded to ``dtype``, as PyTorch's kernels store them."""
    return [m if m is None else
            Taps(m.index, m.weight.astype(np.float32).astype(dtype).astype(np.float64),
                 m.matrix.shape[1]) for m in mats]


def _bicubic_16_bit(xp, x, taps):
    """PyTorch's float16/bfloat16 bicubic kernel: weights in the input's dtype, sums in
    float32 along the last dim first, one rounding at the end."""
    return apply_mats(xp, x.astype(np.float32), taps, last_first=True).astype(x.dtype)


_UPSAMPLE = {"nearest": "Nearest", "nearest-exact": "NearestExact", "linear": "Linear",
             "bilinear": "Bilinear", "bicubic": "Bicubic", "trilinear": "Trilinear",
             "lanczos": "Lanczos"}


@interpolate.named_by
def _(flat, params, out):                    # PyTorch's kernel per mode and rank
    mode, antialias, nd = params[2], params[5], flat[0].ndim - 2
    if mode == "area":      # PyTorch pools to one pixel with mean
        if nd == 1:
            return "SqueezeBackward1"
        return "MeanBackward1" if out.shape[2:] == (1,) * nd else \
            f"AdaptiveAvgPool{nd}DBackward0"
    name = _UPSAMPLE.get(mode)
    if name is None:
        return "UpsampleBackward0"
    return f"Upsample{name}{nd}D{'Aa' if antialias else ''}Backward0"


@interpolate.derivative
def _(grad, x, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    out = tuple(grad.shape[2:])
    if 0 in out:
        _refuse_empty_area_grad(grad.shape)
    _, scales = _spatial_args(_Meta(x.shape), size, scale_factor, mode, align_corners,
                              recompute_scale_factor, antialias)
    gx = _along_dims(grad, transposed(_mats(tuple(x.shape[2:]), out, scales, mode,
                                            align_corners, antialias,
                                            _single(mode, antialias, grad.dtype), True)),
                     _grad_order(x, grad, mode))
    return rename_node(gx, _double_name(mode, x.ndim - 2, antialias))


def _grad_order(x, grad, mode):
    """The memory order of PyTorch's input gradient: the incoming gradient's, for the upsampling
    kernels that keep channels-last (area's pooling kernel follows the input, not saved here)."""
    if (x.ndim == 4 and mode in ("nearest", "nearest-exact", "bilinear")) or \
            (x.ndim == 5 and mode == "trilinear"):
        return suggested_order(grad._data)
    return None


def _double_name(mode, nd, antialias):
    """The node PyTorch's backward kernel of an interpolation records under create_graph."""
    if mode == "area":          # adaptive average pooling (a squeezed 2-D one for 1-D)
        return "SqueezeBackward1" if nd == 1 else f"AdaptiveAvgPool{nd}DBackwardBackward0"
    name = _UPSAMPLE.get(mode)
    return f"Upsample{name}{nd}D{'Aa' if antialias else ''}BackwardBackward0" if name else \
        "AlongDimsBackward0"


def _refuse_empty_area_grad(shape):
    """PyTorch's adaptive-pooling backward (behind ``area``) refuses an empty output."""
    shape = list(shape)
    if len(shape) == 3:                 # the 1-D case runs as 2-D over an inserted unit axis
        shape.insert(2, 1)
    dim = 2 + shape[2:].index(0)
    raise RuntimeError(f"adaptive_avg_pool{len(shape) - 2}d_backward(): Expected grad_output to "
                       f"have non-zero size for non-batch dimensions, but grad_output has sizes "
                       f"[{', '.join(map(str, shape))}] with dimension {dim} being empty")


class _Meta:
    def __init__(self, shape):
        self.shape, self.ndim = tuple(shape), len(shape)


def _functional_interpolate(input, size=None, scale_factor=None, mode="nearest",
                           align_corners=None, recompute_scale_factor=None, antialias=False):
    if input.ndim > 2:      # argument errors first: PyTorch raises these as ValueError, which
        _spatial_args(input, size, scale_factor, mode, align_corners,  # the dispatcher would
                      recompute_scale_factor, antialias)               # turn into RuntimeError
    return interpolate.function(input, size, scale_factor, mode, align_corners,
                                recompute_scale_factor, antialias)


def _warn_deprecated(name):
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` "
                  f"instead.", stacklevel=3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated: ``interpolate``."""
    _warn_deprecated("upsample")
    return _functional_interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(mode='nearest')``."""
    _warn_deprecated("upsample_nearest")
    return _functional_interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(mode='bilinear', align_corners=True)``."""
    _warn_deprecated("upsample_bilinear")
    return _functional_interpolate(input, size, scale_factor, "bilinear", True)


for _f in (_functional_interpolate, upsample, upsample_nearest, upsample_bilinear):
    _f.__module__ = "ember.nn.functional"
_functional_interpolate.__name__ = _functional_interpolate.__qualname__ = "interpolate"
_functional_interpolate.__doc__ = interpolate.function.__doc__

FUNCTIONAL = {"interpolate": _functional_interpolate, "upsample": upsample,
              "upsample_nearest": upsample_nearest, "upsample_bilinear": upsample_bilinear}
FUNCTIONAL.update(grid_sampling.FUNCTIONAL)
PUBLIC = dict(grid_sampling.PUBLIC)
FUNCTIONAL.update(shuffle.FUNCTIONAL)
ALIASES = dict(shuffle.ALIASES)
