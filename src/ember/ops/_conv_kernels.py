"""N-d convolution kernels on backend arrays: im2col windows + matmul, col2im by kernel offset.

Layouts: input (B, C, *S), weight (O, C/G, *K), output (B, O, *P). ``pads`` is a tuple of
(low, high) zero-padding pairs, one per spatial dim. Windows are gathered in the order
(B, G, C/G, *K, *P), whose innermost axis runs along an output row: the im2col copy is then
mostly unit-stride, and the product is one batched GEMM per (batch, group).
"""

import math

__all__ = ["output_size", "conv_forward", "conv_input_grad", "conv_weight_grad", "im2col",
           "col2im", "zero_pad"]


def output_size(size, kernel, stride, pad, dilation):
    """Spatial output sizes of a convolution (``pad`` as (low, high) pairs)."""
    return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                 for s, k, st, (lo, hi), d in zip(size, kernel, stride, pad, dilation))


def zero_pad(xp, x, pads):
    """``x`` with its trailing len(pads) dims zero-padded by (low, high) pairs."""
    if not any(lo or hi for lo, hi in pads):
        return x
    lead = x.ndim - len(pads)
    shape = x.shape[:lead] + tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[lead:], pads))
    out = xp.zeros(shape, x.dtype)
    out[(Ellipsis,) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[lead:], pads))] = x
    return out


def _windows(xp, xpad, kernel, out, stride, dilation):
    """A strided view (B, C, *K, *P) of the padded input's receptive fields."""
    st = xpad.strides
    nd = len(kernel)
    strides = st[:2] + tuple(s * d for s, d in zip(st[2:], dilation)) + \
        tuple(s * t for s, t in zip(st[2:], stride))
    return xp.lib.stride_tricks.as_strided(xpad, xpad.shape[:2] + tuple(kernel) + tuple(out),
                                           strides[:2 + 2 * nd], writeable=False)


def im2col(xp, x, kernel, stride, pads, dilation):
    """Columns (B, C, *K, *P) (a copy) and the output size P."""
    xpad = zero_pad(xp, x, pads)
    out = output_size(x.shape[2:], kernel, stride, pads, dilation)
    return xp.ascontiguousarray(_windows(xp, xpad, kernel, out, stride, dilation)), out


def col2im(xp, cols, size, stride, pads, dilation):
    """Sum columns (B, C, *K, *P) back into an image (B, C, *size): the adjoint of im2col."""
    nd = len(size)
    kernel = cols.shape[2:2 + nd]
    out = cols.shape[2 + nd:]
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))
    img = xp.zeros(cols.shape[:2] + padded, cols.dtype)
    for offset in _offsets(kernel):
        where = tuple(slice(o * d, o * d + (p - 1) * s + 1, s)
                      for o, d, p, s in zip(offset, dilation, out, stride))
        img[(slice(None), slice(None)) + where] += cols[(slice(None), slice(None)) + offset]
    crop = tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, pads))
    return img[(slice(None), slice(None)) + crop]


def _offsets(kernel):
    if not kernel:
        return [()]
    return [(k,) + rest for k in range(kernel[0]) for rest in _offsets(kernel[1:])]


def _channel_cols(xp, x, kernel, stride, pads, dilation, groups, out=None):
    """Columns (G, C/G*prod(K), B*prod(P)) for one GEMM per group, and the output size P
    (the first ``out`` windows only, when given)."""
    b, c = x.shape[:2]
    nd = len(kernel)
    xpad = zero_pad(xp, x, pads)
    if out is None:
        out = output_size(x.shape[2:], kernel, stride, pads, dilation)
    view = _windows(xp, xpad, kernel, out, stride, dilation)
    order = (1,) + tuple(range(2, 2 + nd)) + (0,) + tuple(range(2 + nd, 2 + 2 * nd))
    cols = xp.ascontiguousarray(view.transpose(order))        # (C, *K, B, *P)
    return cols.reshape(groups, (c // groups) * math.prod(kernel), b * math.prod(out)), out


def _batch_first(xp, res, o, b, out, bias=None):
    """(O, B, *P) as a contiguous (B, O, *P), adding ``bias`` on the way."""
    moved = xp.moveaxis(res.reshape((o, b) + tuple(out)), 1, 0)
    if bias is None:
        return xp.ascontiguousarray(moved)
    dst = xp.empty(moved.shape, xp.result_type(moved, bias))
    xp.add(moved, bias.reshape((-1,) + (1,) * len(out)), out=dst)
    return dst


def conv_forward(xp, x, w, stride, pads, dilation, groups, bias=None):
    """Cross-correlation of x (B, C, *S) with w (O, C/G, *K), plus bias: (B, O, *P)."""
    b = x.shape[0]
    o = w.shape[0]
    cols, out = _channel_cols(xp, x, w.shape[2:], stride, pads, dilation, groups)
    res = xp.matmul(w.reshape(groups, o // groups, cols.shape[1]), cols)
    return _batch_first(xp, res, o, b, out, bias)


def conv_input_grad(xp, g, w, size, stride, pads, dilation, groups, bias=None):
    """The adjoint of conv_forward in its input: (B, C, *size) from g (B, O, *P), plus bias
    (a transposed convolution)."""
    b, o = g.shape[:2]
    kernel = w.shape[2:]
    out = g.shape[2:]
    nd = len(kernel)
    ck = w.shape[1] * math.prod(kernel)
    gt = xp.ascontiguousarray(xp.moveaxis(g, 1, 0)).reshape(groups, o // groups, -1)
    wt = w.reshape(groups, o // groups, ck).transpose(0, 2, 1)
    # one output channel per group (depthwise): an outer product, which matmul loops slowly
    cols = wt * gt if o == groups else xp.matmul(wt, gt)
    cols = cols.reshape((w.shape[1] * groups,) + tuple(kernel) + (b,) + tuple(out))
    img = col2im(xp, xp.moveaxis(cols, 1 + nd, 1), size, stride, pads, dilation)  # (C, B, *S)
    return _batch_first(xp, img, img.shape[0], b, size, bias)


def conv_weight_grad(xp, x, g, kernel, stride, pads, dilation, groups):
    """The adjoint of conv_forward in its weight: (O, C/G, *K) from x and g (B, O, *P)."""
    b, c = x.shape[:2]
    o = g.shape[1]
    # g may have fewer windows than x allows (a transposed conv's output padding)
    cols, _ = _channel_cols(xp, x, kernel, stride, pads, dilation, groups, g.shape[2:])
    gt = xp.ascontiguousarray(xp.moveaxis(g, 1, 0)).reshape(groups, o // groups, -1)
    # OpenBLAS threads a product A @ B.T of two long operands badly (seconds, not
    # milliseconds) when A has fewer rows than B: put the taller operand on the left
    if cols.shape[1] > gt.shape[1]:
        gw = xp.matmul(cols, gt.transpose(0, 2, 1)).transpose(0, 2, 1)
    else:
        gw = xp.matmul(gt, cols.transpose(0, 2, 1))
    return gw.reshape((o, c // groups) + tuple(kernel))
