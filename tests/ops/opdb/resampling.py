"""OpInfo entries for ember/ops/resampling.py (interpolate), ember/ops/shuffle.py,
affine_grid_generator and _grid_sampler (ember/ops/grid_sampling.py)."""

import itertools
import math

import numpy as np

import ember
from tests.ops.opdb.core import ALL, FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make

# --- interpolate: a per-output-position reference of PyTorch's documented index rules ---------


def _nearest_weights(n, o, scale, exact):
    s = np.float32(1.0 / scale) if scale else np.float32(n) / np.float32(o)
    w = np.zeros((o, n))
    for i in range(o):
        src = math.floor(np.float32(np.float32(i) + np.float32(0.5 if exact else 0)) * s)
        w[i, min(src, n - 1)] = 1
    return w


def _cubic(x, a):
    x = abs(x)
    if x < 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def _interp_weights(n, o, scale, mode, align_corners):
    if mode in ("nearest", "nearest-exact"):
        return _nearest_weights(n, o, scale, mode == "nearest-exact")
    w = np.zeros((o, n))
    if mode == "area":
        for i in range(o):
            lo, hi = (i * n) // o, -((-(i + 1) * n) // o)
            w[i, lo:hi] = 1 / (hi - lo)
        return w
    if align_corners:
        s = (n - 1) / (o - 1) if o > 1 else 0.0
    else:
        s = 1 / scale if scale else n / o
    for i in range(o):
        src = i * s if align_corners else s * (i + 0.5) - 0.5
        if mode == "bicubic":
            base = math.floor(src)
            for tap in range(base - 1, base + 3):
                w[i, min(max(tap, 0), n - 1)] += _cubic(src - tap, -0.75)
        else:
            src = max(src, 0.0)
            lo = min(int(src), n - 1)
            hi = min(lo + 1, n - 1)
            w[i, lo] += 1 - (src - lo)
            w[i, hi] += src - lo
    return w


def _antialias_weights(n, o, scale, mode, align_corners):
    if align_corners:
        s = (n - 1) / (o - 1) if o > 1 else 0.0
    else:
        s = 1 / scale if scale else n / o
    cubic = mode == "bicubic"
    support = (2.0 if cubic else 1.0) * max(s, 1.0)
    w = np.zeros((o, n))
    for i in range(o):
        center = s * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n)
        for j in range(lo, hi):
            x = (j - center + 0.5) / max(s, 1.0)
            w[i, j] = _cubic(x, -0.5) if cubic else max(0.0, 1 - abs(x))
        w[i] /= w[i].sum()
    return w


def _interpolate_ref(x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                     recompute_scale_factor=None, antialias=False):
    nd = x.ndim - 2
    if size is not None:
        out = list(size) if isinstance(size, (list, tuple)) else [size] * nd
        scales = [None] * nd
    else:
        scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) \
            else [scale_factor] * nd
        out = [math.floor(n * s) for n, s in zip(x.shape[2:], scales)]
        if recompute_scale_factor:
            scales = [None] * nd
    make_w = _antialias_weights if antialias else _interp_weights
    if x.dtype == np.uint8 and mode in ("bilinear", "bicubic"):
        return _fixed_point_ref(x, out, [make_w(n, o, s, mode, align_corners) for n, o, s
                                         in zip(x.shape[2:], out, scales)])
    result = x.astype(np.float64)
    for d in range(nd):
        w = make_w(x.shape[2 + d], out[d], scales[d], mode, align_corners)
        result = np.moveaxis(np.tensordot(w, result, axes=([1], [2 + d])), 0, 2 + d)
    return result.astype(x.dtype) if x.dtype == np.uint8 else result


def _fixed_point_ref(x, out, weights):
    """PyTorch's uint8 resampling: width, then height, each a pass in integer arithmetic with
    weights scaled by 2**p (the largest p that keeps them under 2**15), rounded and
    clamped to bytes in between; a dim of unchanged size is skipped."""
    result = x.astype(np.int64)
    for d in (3, 2):
        w = weights[d - 2]
        if x.shape[d] == out[d - 2]:
            continue
        p = max(q for q in range(23) if q == 0 or int(0.5 + w.max() * 2 ** q) < 2 ** 15)
        w_int = np.array([[int(v * 2 ** p + (0.5 if v >= 0 else -0.5)) for v in row]
                          for row in w], dtype=np.int64)
        moved = np.moveaxis(result, d, -1)
        acc = np.zeros(moved.shape[:-1] + (len(w_int),), np.int64)
        for i, row in enumerate(w_int):
            acc[..., i] = (moved * row).sum(-1)
        result = np.moveaxis(np.clip((acc + (1 << p >> 1)) >> p, 0, 255), -1, d)
    return result.astype(np.uint8)


_CASES = [  # (shape, kwargs)
    ((2, 3, 5), dict(size=7)),
    ((2, 3, 5), dict(scale_factor=1.5, mode="nearest-exact")),
    ((2, 3, 5), dict(size=8, mode="linear")),
    ((2, 3, 5), dict(scale_factor=0.5, mode="linear", align_corners=True)),
    ((2, 3, 5), dict(size=3, mode="area")),
    ((2, 2, 4, 5), dict(scale_factor=2)),
    ((2, 2, 4, 5), dict(size=(5, 9), mode="nearest-exact")),
    ((2, 2, 4, 5), dict(size=(3, 7), mode="bilinear", align_corners=False)),
    ((2, 2, 4, 5), dict(scale_factor=(1.5, 0.8), mode="bilinear", align_corners=True)),
    ((2, 2, 4, 5), dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True)),
    ((2, 2, 4, 5), dict(size=(6, 3), mode="bicubic")),
    ((2, 2, 4, 5), dict(size=5, mode="bicubic", align_corners=True)),
    ((2, 2, 4, 5), dict(size=(2, 3), mode="area")),
    ((2, 2, 6, 7), dict(size=(2, 3), mode="bilinear", antialias=True)),
    ((2, 2, 6, 7), dict(scale_factor=0.5, mode="bicubic", antialias=True)),
    ((1, 2, 3, 4, 3), dict(size=(4, 3, 5), mode="trilinear")),
    ((1, 2, 3, 4, 3), dict(size=2, mode="trilinear", align_corners=True)),
    ((1, 2, 3, 4, 3), dict(scale_factor=2)),
    ((1, 2, 3, 4, 3), dict(size=2, mode="area")),
]


# uint8 bilinear/bicubic: full-range bytes (bicubic overshoots, and clamps), each resizing
# one dim or both, up and down, with and without antialias. PyTorch 2.13 fails on some
# shapes ember gets right, avoided here: an internal assert for a 1 by 1 output of at most 4
# channels, and every row equal to the first for a width-1 output of more channels.
_UINT8_CASES = [
    ((2, 3, 9, 11), dict(size=(5, 7), mode="bilinear")),
    ((2, 3, 9, 11), dict(size=(13, 17), mode="bilinear", align_corners=True)),
    ((2, 3, 9, 11), dict(size=(9, 6), mode="bilinear", antialias=True)),
    ((2, 3, 9, 11), dict(scale_factor=0.4, mode="bilinear", antialias=True,
                         align_corners=True)),
    ((1, 5, 9, 11), dict(size=(4, 11), mode="bicubic")),
    ((2, 3, 9, 11), dict(size=(13, 17), mode="bicubic", align_corners=True)),
    ((2, 3, 9, 11), dict(scale_factor=(0.6, 1.3), mode="bicubic", antialias=True)),
    ((1, 5, 9, 11), dict(size=(2, 30), mode="bicubic", antialias=True, align_corners=True)),
]


def _interpolate_samples(dtype, requires_grad):
    if dtype is ember.uint8:
        for shape, kwargs in _UINT8_CASES:
            yield SampleInput(make(shape, dtype, high=256), (), kwargs,
                              name=f"{kwargs['mode']} {list(shape)}")
    for shape, kwargs in _CASES:
        if dtype is ember.uint8 and kwargs.get("mode", "nearest") not in ("nearest",
                                                                         "nearest-exact"):
            continue
        if dtype in LOW and kwargs.get("antialias"):
            continue            # PyTorch has no 16-bit antialiasing kernel
        yield SampleInput(make(shape, dtype, requires_grad), (), kwargs,
                          name=kwargs.get("mode", "nearest"))
    yield SampleInput(make((2, 2, 4, 5), dtype, requires_grad, noncontiguous=True), (),
                      dict(size=(3, 8)), name="noncontiguous")
    yield SampleInput(make((0, 2, 4, 5), dtype, requires_grad), (), dict(size=3), name="empty")
    if dtype is not ember.uint8:
        yield SampleInput(make((1, 1, 2, 3), dtype, requires_grad), (),
                          dict(size=(3, 4), mode="bilinear"), name="tiny")


def _interpolate_errors():
    x = ember.randn(1, 1, 4, 4)
    yield ErrorInput(SampleInput(x, (), dict(mode="bilinear")), ValueError,
                     "either size or scale_factor should be defined")
    yield ErrorInput(SampleInput(x, (), dict(size=3, scale_factor=2)), ValueError,
                     "only one of size or scale_factor should be defined")
    yield ErrorInput(SampleInput(x, (), dict(size=(3, 3, 3))), ValueError,
                     "Input and output must have the same number of spatial dimensions")
    yield ErrorInput(SampleInput(x, (), dict(scale_factor=(2, 2, 2))), ValueError,
                     "Input and scale_factor must have the same number of spatial dimensions")
    yield ErrorInput(SampleInput(x, (), dict(size=3, align_corners=True)), ValueError,
                     "align_corners option can only be set with the interpolating modes")
    yield ErrorInput(SampleInput(x, (), dict(size=3, recompute_scale_factor=True)), ValueError,
                     "recompute_scale_factor is not meaningful with an explicit size")
    yield ErrorInput(SampleInput(x, (), dict(size=3, antialias=True)), ValueError,
                     "Anti-alias option is restricted to bilinear, bicubic")
    yield ErrorInput(SampleInput(x, (), dict(size=3, mode="linear")), NotImplementedError,
                     "Got 4D input, but linear mode needs 3D input")
    yield ErrorInput(SampleInput(x, (), dict(size=3, mode="foo")), NotImplementedError,
                     r"Only 3D, 4D and 5D input Tensors supported \(got 4D\)")
    yield ErrorInput(SampleInput(ember.randn(4, 4), (), dict(size=3)), NotImplementedError,
                     "Only 3D, 4D and 5D input Tensors supported")
    yield ErrorInput(SampleInput(x, (), dict(scale_factor=0.1)), RuntimeError,
                     r"Input and output sizes should be greater than 0, but got input "
                     r"\(H: 4, W: 4\) output \(H: 0, W: 0\)")
    yield ErrorInput(SampleInput(ember.ones(1, 1, 2, 2, dtype=ember.int64), (), dict(size=3)),
                     NotImplementedError, "not implemented for 'Long'")
    yield ErrorInput(SampleInput(ember.ones(1, 1, 2, dtype=ember.uint8), (),
                                 dict(size=3, mode="linear")), NotImplementedError,
                     "\"compute_indices_weights_linear\" not implemented for 'Byte'")
    yield ErrorInput(SampleInput(ember.ones(1, 1, 2, 2, dtype=ember.uint8), (),
                                 dict(size=3, mode="area")), NotImplementedError,
                     "\"adaptive_avg_pool2d\" not implemented for 'Byte'")
    yield ErrorInput(SampleInput(x.half(), (), dict(size=3, mode="bilinear", antialias=True)),
                     NotImplementedError, "not implemented for 'Half'")


# --- shuffles ---------------------------------------------------------------------------------

def _pixel_shuffle_ref(x, r):
    c, h, w = x.shape[-3:]
    out = np.zeros(x.shape[:-3] + (c // (r * r), h * r, w * r), x.dtype)
    for i in range(r):
        for j in range(r):
            out[..., :, i::r, j::r] = x[..., i * r + j::r * r, :, :]
    return out


def _pixel_unshuffle_ref(x, r):
    c, h, w = x.shape[-3:]
    out = np.zeros(x.shape[:-3] + (c * r * r, h // r, w // r), x.dtype)
    for i in range(r):
        for j in range(r):
            out[..., i * r + j::r * r, :, :] = x[..., :, i::r, j::r]
    return out


def _channel_shuffle_ref(x, groups):
    c = x.shape[1]
    k = c // groups
    order = [g * k + j for j in range(k) for g in range(groups)]
    return x[:, order]


def _pixel_samples(up):
    def samples(dtype, requires_grad):
        def input_for(shape, r):
            if up:
                return shape
            c, h, w = shape[-3:]
            return shape[:-3] + (c // (r * r), h * r, w * r)
        # no empty sample: PyTorch's pixel_unshuffle returns empty inputs unchanged (shape
        # included), and pixel_shuffle's backward inherits that (tests/nn checks ember's shapes)
        for shape, r in (((2, 8, 2, 3), 2), ((9, 2, 1), 3), ((2, 1, 4, 1, 2), 2),
                         ((2, 3, 2, 2), 1), ((1, 4, 1, 1), 2)):
            yield SampleInput(make(input_for(shape, r), dtype, requires_grad), (r,),
                              name=f"{list(shape)}_r{r}")
        yield SampleInput(make(input_for((2, 4, 2, 2), 2), dtype, requires_grad,
                               noncontiguous=True), (2,), name="noncontiguous")
    return samples


def _channel_samples(dtype, requires_grad):
    for shape, g in (((2, 6, 3), 2), ((2, 6, 3), 3), ((1, 4, 2, 2), 4), ((0, 4, 2), 2),
                     ((1, 4, 3), 1), ((1, 6, 1, 2), 2)):
        yield SampleInput(make(shape, dtype, requires_grad), (g,), name=f"{list(shape)}_g{g}")
    yield SampleInput(make((2, 4, 3), dtype, requires_grad, noncontiguous=True), (2,),
                      name="noncontiguous")


def _pixel_shuffle_errors():
    yield ErrorInput(SampleInput(ember.randn(1, 5, 2, 2), (2,)), RuntimeError,
                     r"divisible by the square of upscale_factor, but input.size\(-3\)=5 is not "
                     r"divisible by 4")
    yield ErrorInput(SampleInput(ember.randn(5, 2), (2,)), RuntimeError,
                     "pixel_shuffle expects input to have at least 3 dimensions")
    yield ErrorInput(SampleInput(ember.randn(1, 4, 2, 2), (0,)), RuntimeError,
                     "pixel_shuffle expects a positive upscale_factor, but got 0")


def _pixel_unshuffle_errors():
    yield ErrorInput(SampleInput(ember.randn(1, 4, 3, 4), (2,)), RuntimeError,
                     r"height to be divisible by downscale_factor, but input.size\(-2\)=3")
    yield ErrorInput(SampleInput(ember.randn(1, 4, 4, 3), (2,)), RuntimeError,
                     r"width to be divisible by downscale_factor, but input.size\(-1\)=3")
    yield ErrorInput(SampleInput(ember.randn(4, 3), (2,)), RuntimeError,
                     "pixel_unshuffle expects input to have at least 3 dimensions")
    yield ErrorInput(SampleInput(ember.randn(1, 4, 4, 4), (0,)), RuntimeError,
                     "pixel_unshuffle expects a positive downscale_factor, but got 0")


def _channel_shuffle_errors():
    yield ErrorInput(SampleInput(ember.randn(1, 5, 3, 3), (2,)), RuntimeError,
                     "Number of channels must be divisible by groups. Got 5 channels and 2 "
                     "groups.")
    yield ErrorInput(SampleInput(ember.randn(5, 3, 3), (0,)), RuntimeError,
                     "Number of groups to divide channels in must be positive. Value of groups:0")
    yield ErrorInput(SampleInput(ember.randn(5, 3), (5,)), RuntimeError,
                     r"channel_shuffle expects input with > 2 dims, but got input with sizes "
                     r"\[5, 3\]")


# --- affine_grid_generator: base pixel coordinates times each theta -------------------------

def _affine_grid_ref(theta, size, align_corners):
    spatial = size[2:]
    coords = []
    for n in spatial:
        c = np.linspace(-1, 1, n) if n > 1 else np.zeros(n)
        coords.append(c if align_corners else c * (n - 1) / n)
    axes = np.meshgrid(*coords, indexing="ij")
    base = np.stack(list(axes[::-1]) + [np.ones(spatial)], -1)
    return np.einsum("...k,njk->n...j", base, theta.astype(np.float64))


def _affine_grid_samples(dtype, requires_grad):
    for size, ac in (((2, 1, 3, 4), False), ((2, 3, 3, 4), True), ((1, 1, 2, 3, 2), False),
                     ((1, 2, 1, 3, 2), True), ((3, 1, 1, 1), False)):
        if dtype in LOW and min(size[2:]) == 1:
            continue        # torch's CPU kernel has no 16-bit path for unit-size grids
        nd = len(size) - 2
        yield SampleInput(make((size[0], nd, nd + 1), dtype, requires_grad), (size, ac))


# --- _grid_sampler (grid_sample's node): each output point from the corners around it -------

def _grid_source(c, size, padding_mode, align_corners):
    c = (c + 1) / 2 * (size - 1) if align_corners else ((c + 1) * size - 1) / 2
    return min(max(c, 0), size - 1) if padding_mode == 1 else c    # (1: border)


def _grid_sampler_ref(x, grid, interpolation_mode, padding_mode, align_corners):
    """Bilinear (0) or nearest (1) sampling with zeros (0) or border (1) padding, any dims."""
    sizes = x.shape[2:]
    out = np.zeros(x.shape[:2] + grid.shape[1:-1])
    for b in range(x.shape[0]):
        for p in np.ndindex(*grid.shape[1:-1]):
            src = [_grid_source(grid[(b,) + p][len(sizes) - 1 - d], sizes[d], padding_mode,
                                align_corners) for d in range(len(sizes))]
            corners = [[(int(np.rint(s)), 1.0)] if interpolation_mode == 1 else
                       [(math.floor(s), 1 - s + math.floor(s)), (math.floor(s) + 1,
                                                                  s - math.floor(s))]
                       for s in src]
            for picks in itertools.product(*corners):
                if all(0 <= i < n for (i, _), n in zip(picks, sizes)):
                    w = math.prod(w for _, w in picks)
                    out[(b, slice(None)) + p] += w * x[(b, slice(None)) + tuple(
                        i for i, _ in picks)]
    return out


def _grid_sampler_samples(dtype, requires_grad):
    def grid(*shape):   # points inside [-1.2, 1.2], off the pixel centres
        return (make(shape, dtype, low=-1.2, high=1.2)).requires_grad_(requires_grad)
    yield SampleInput(make((2, 3, 4, 5), dtype, requires_grad), (grid(2, 3, 2, 2), 0, 0, False))
    yield SampleInput(make((1, 2, 3, 3), dtype, requires_grad), (grid(1, 2, 4, 2), 0, 1, True),
                      name="border")
    yield SampleInput(make((1, 2, 4, 3), dtype, requires_grad), (grid(1, 1, 3, 2), 1, 0, False),
                      name="nearest")
    yield SampleInput(make((1, 1, 2, 3, 4), dtype, requires_grad),
                      (grid(1, 2, 2, 1, 3), 0, 0, True), name="3d")
    yield SampleInput(make((3, 4, 2, 1), dtype, requires_grad).permute(3, 2, 0, 1),
                      (grid(1, 3, 2, 2).transpose(1, 2), 0, 1, False), name="noncontiguous")


def _cubic_slope(x, a):
    """The derivative of ``_cubic`` in ``x``."""
    sign, x = np.sign(x), abs(x)
    if x < 1:
        return sign * (3 * (a + 2) * x - 2 * (a + 3)) * x
    if x < 2:
        return sign * ((3 * a * x - 10 * a) * x + 8 * a)
    return 0.0


def _bicubic_backward_ref(go, x, grid, padding_mode, align_corners):
    """The gradients of 2-D bicubic sampling (zeros or border padding) for ``go``: 4 x 4 taps
    around the unpadded source point, each clamped on its own by border padding (the padding
    moves no weight: the grid's gradient is the values times the weights' slopes)."""
    sizes = x.shape[2:]
    gx, gg = np.zeros(x.shape), np.zeros(grid.shape)
    for b in range(x.shape[0]):
        for p in np.ndindex(*grid.shape[1:-1]):
            src = [_grid_source(grid[(b,) + p][1 - d], sizes[d], 0, align_corners)
                   for d in range(2)]
            scale = [(n - 1) / 2 if align_corners else n / 2 for n in sizes]
            g_out = go[(b, slice(None)) + p]
            for ks in itertools.product(range(-1, 3), repeat=2):
                taps = [math.floor(s) + k for s, k in zip(src, ks)]
                ts = [s - t for s, t in zip(src, taps)]
                if padding_mode == 1:
                    taps = [min(max(t, 0), n - 1) for t, n in zip(taps, sizes)]
                elif not all(0 <= t < n for t, n in zip(taps, sizes)):
                    continue
                ws = [_cubic(t, -0.75) for t in ts]
                gx[(b, slice(None)) + tuple(taps)] += ws[0] * ws[1] * g_out
                seen = float(np.dot(g_out, x[(b, slice(None)) + tuple(taps)]))
                for d in range(2):
                    gg[(b,) + p + (1 - d,)] += seen * _cubic_slope(ts[d], -0.75) * \
                        ws[1 - d] * scale[d]
    return gx.astype(x.dtype), gg.astype(grid.dtype)


def _grid_sampler_backward_ref(go, x, grid, interpolation_mode, padding_mode, align_corners):
    """The input and grid gradients of ``_grid_sampler_ref`` for ``go``: each corner's weight
    times ``go`` added to the input; the corner values times each weight's slope to the grid."""
    if interpolation_mode == 2:
        return _bicubic_backward_ref(go, x, grid, padding_mode, align_corners)
    sizes = x.shape[2:]
    nd = len(sizes)
    gx, gg = np.zeros(x.shape), np.zeros(grid.shape)
    for b in range(x.shape[0]):
        for p in np.ndindex(*grid.shape[1:-1]):
            src, slope = [], []
            for d in range(nd):
                g = grid[(b,) + p][nd - 1 - d]
                s = _grid_source(g, sizes[d], padding_mode, align_corners)
                scale = (sizes[d] - 1) / 2 if align_corners else sizes[d] / 2
                inside = padding_mode == 0 or 0 < s < sizes[d] - 1
                src.append(s)
                slope.append(scale if inside else 0.0)
            g_out = go[(b, slice(None)) + p]
            if interpolation_mode == 1:
                at = tuple(int(np.rint(s)) for s in src)
                if all(0 <= i < n for i, n in zip(at, sizes)):
                    gx[(b, slice(None)) + at] += g_out
                continue
            for bits in itertools.product((0, 1), repeat=nd):
                at = tuple(math.floor(s) + k for s, k in zip(src, bits))
                if not all(0 <= i < n for i, n in zip(at, sizes)):
                    continue
                ws = [s - math.floor(s) if k else 1 - s + math.floor(s)
                      for s, k in zip(src, bits)]
                gx[(b, slice(None)) + at] += math.prod(ws) * g_out
                seen = float(np.dot(g_out, x[(b, slice(None)) + at]))
                for d in range(nd):
                    rest = math.prod(w for e, w in enumerate(ws) if e != d)
                    gg[(b,) + p + (nd - 1 - d,)] += (1 if bits[d] else -1) * seen * rest * \
                        slope[d]
    return gx.astype(x.dtype), gg.astype(grid.dtype)


def _grid_sampler_backward_samples(dtype, requires_grad):
    def bicubic(shape, points, padding_mode, align_corners):
        x = make(shape, dtype, requires_grad)
        grid = make((shape[0],) + points + (2,), dtype, requires_grad, low=-1.2, high=1.2)
        return SampleInput(x, (grid, 2, padding_mode, align_corners),
                           name=f"bicubic{padding_mode}{int(align_corners)}")
    for s in itertools.chain(_grid_sampler_samples(dtype, requires_grad),
                             (bicubic((2, 2, 4, 5), (2, 3), 0, False),
                              bicubic((1, 3, 3, 4), (3, 2), 1, True))):
        x, grid = s.input, s.args[0]
        go = make((x.shape[0], x.shape[1]) + tuple(grid.shape[1:-1]), dtype, requires_grad)
        yield SampleInput(go, (x, grid) + s.args[1:], name=s.name)


def _torch_grid_sampler_backward(go, x, grid, interpolation_mode, padding_mode, align_corners):
    import torch
    kernel = torch.ops.aten.grid_sampler_2d_backward if x.ndim == 4 else \
        torch.ops.aten.grid_sampler_3d_backward
    return kernel(go, x, grid, interpolation_mode, padding_mode, align_corners, [True, True])


OPS = [
    OpInfo("_grid_sampler", _grid_sampler_ref, _grid_sampler_samples, dtypes=FLOATS,
           gradgrad=True),
    OpInfo("_grid_sampler_backward", _grid_sampler_backward_ref, _grid_sampler_backward_samples,
           dtypes=FLOATS, torch_op=_torch_grid_sampler_backward, tol={ember.float32: (1e-5, 1e-5)},
           gradgrad=True),
    OpInfo("affine_grid_generator", _affine_grid_ref, _affine_grid_samples, gradgrad=True,
           dtypes=FLOATS + LOW, tol={ember.float16: (2e-3, 2e-3), ember.bfloat16: (2e-2, 2e-2)}),
    OpInfo("nn.functional.interpolate", _interpolate_ref, _interpolate_samples,
           dtypes=FLOATS + LOW + (ember.uint8,), gradgrad=True,
           error_inputs=_interpolate_errors, op=ember.nn.functional.interpolate,
           # 16-bit (tri)linear keeps lambda in the input's dtype, as PyTorch's CPU kernels:
           # off the exact reference by that rounding
           tol={ember.float16: (2e-3, 4e-3), ember.bfloat16: (2e-2, 4e-2)},
           parity_tol={ember.bfloat16: (2e-2, 6e-2), ember.float16: (2e-3, 2e-3),
                       ember.float32: (1e-4, 1e-5)}),
    OpInfo("pixel_shuffle", _pixel_shuffle_ref, _pixel_samples(True), dtypes=ALL,
           gradgrad=True, error_inputs=_pixel_shuffle_errors),
    OpInfo("pixel_unshuffle", _pixel_unshuffle_ref, _pixel_samples(False), dtypes=ALL,
           gradgrad=True, error_inputs=_pixel_unshuffle_errors),
    OpInfo("channel_shuffle", _channel_shuffle_ref, _channel_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_channel_shuffle_errors),
]
