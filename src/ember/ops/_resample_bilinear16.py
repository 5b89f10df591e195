"""PyTorch's float16/bfloat16 CPU bilinear kernel on the inputs it sends to its channels-last
path (outputs of at most 128 rows plus columns, channels-last input with more than 3 channels):
float32 weights, the four taps summed in float32 as fused multiply-adds in the order its vector
and scalar loops use, one rounding at the end. (The other inputs take its generic kernel, whose
weights are rounded to the input's dtype: resampling._linear_taps_in.)"""

import numpy as np

from ember.backend.cpu_kernels import get_num_threads

# PyTorch's vector loop covers the channels in blocks of 16 (float16/bfloat16, as measured with
# its AVX2 and AVX-512 builds); the channels left over go through its scalar loop
_LANES = 16


def takes_channels_last_kernel(x, out):
    """Whether PyTorch's CPU bilinear kernel resamples ``x`` (N, C, H, W) to ``out`` on its
    channels-last path."""
    channels = x.shape[1]
    channels_last = np.moveaxis(x, 1, -1).flags.c_contiguous
    return ((channels_last and channels > 3) or out[0] + out[1] <= 128
            or (get_num_threads() == 1 and channels == 3))


def _taps(n, o, source):
    """The two source indices and float32 weights per output position along one dim (a dim of
    unchanged size is copied)."""
    f = np.float32
    if n == o:
        i = np.arange(n)
        return i, i, np.ones(n, f), np.zeros(n, f)
    i0 = np.minimum(np.floor(source).astype(np.int64), n - 1)
    far = np.clip(source - i0.astype(f), f(0), f(1)).astype(f)
    return i0, np.where(i0 < n - 1, i0 + 1, i0), f(1) - far, far


def _fma(a, b, c):
    """``a * b + c`` for float32 operands rounded once to float32."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


def bilinear_16_bit(x, out, sources):
    """``x`` (float16 or bfloat16, N, C, H, W) resampled to ``out`` from the float32 source
    coordinates ``sources`` (one array per spatial dim), as PyTorch's channels-last kernel."""
    (h0, h1, a0, a1), (w0, w1, b0, b1) = (_taps(n, o, s)
                                          for n, o, s in zip(x.shape[2:], out, sources))
    xf = x.astype(np.float32)
    top, bottom = xf[:, :, h0], xf[:, :, h1]
    values = (top[..., w0], top[..., w1], bottom[..., w0], bottom[..., w1])
    a0, a1 = a0[:, None], a1[:, None]
    weights = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)          # float32 products
    vec = x.shape[1] - x.shape[1] % _LANES
    res = np.empty(x.shape[:2] + tuple(out), np.float32)
    # vector loop: x00 w00 + (x01 w01 + (x10 w10 + x11 w11))
    acc = values[3][:, :vec] * weights[3]
    for k in (2, 1, 0):
        acc = _fma(values[k][:, :vec], weights[k], acc)
    res[:, :vec] = acc
    # scalar loop: ((x00 w00 + x01 w01) + x10 w10) + x11 w11
    acc = values[0][:, vec:] * weights[0]
    for k in (1, 2, 3):
        acc = _fma(values[k][:, vec:], weights[k], acc)
    res[:, vec:] = acc
    return res.astype(x.dtype)


def generic_16_bit(x, taps):
    """``x`` (float16 or bfloat16, N, C, H, W) resampled with the rounded two-tap weights
    ``taps`` (resampling._linear_taps_in), as PyTorch's generic kernel: along W then H, each
    ``t0 w0 + t1 w1`` in float32."""
    res = x.astype(np.float32)
    for axis in (3, 2):
        m = taps[axis - 2]
        if m is None:
            continue
        shape = [1] * 4
        shape[axis] = -1
        w0, w1 = (m.weight[:, k].astype(np.float32).reshape(shape) for k in (0, 1))
        t0, t1 = (np.take(res, m.index[:, k], axis=axis) for k in (0, 1))
        res = t0 * w0 + t1 * w1
    return res.astype(x.dtype)
