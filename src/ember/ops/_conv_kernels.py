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


def conv_forward(xp, x, w, stride, pads, dilation, groups):
    """Cross-correlation of x (B, C, *S) with w (O, C/G, *K): (B, O, *P)."""
    b, c = x.shape[:2]
    o = w.shape[0]
    kernel = w.shape[2:]
    cols, out = im2col(xp, x, kernel, stride, pads, dilation)
    ck = (c // groups) * math.prod(kernel)
    p = math.prod(out)
    if groups == 1:
        res = xp.matmul(w.reshape(o, ck), cols.reshape(b, ck, p))
    else:
        res = xp.matmul(w.reshape(groups, o // groups, ck), cols.reshape(b, groups, ck, p))
    return res.reshape((b, o) + out)


def conv_input_grad(xp, g, w, size, stride, pads, dilation, groups):
    """The adjoint of conv_forward in its input: (B, C, *size) from g (B, O, *P)."""
    b, o = g.shape[:2]
    cg = w.shape[1]
    kernel = w.shape[2:]
    out = g.shape[2:]
    ck = cg * math.prod(kernel)
    p = math.prod(out)
    if groups == 1:
        cols = xp.matmul(w.reshape(o, ck).T, g.reshape(b, o, p))
    else:
        wg = w.reshape(groups, o // groups, ck).transpose(0, 2, 1)
        cols = xp.matmul(wg, g.reshape(b, groups, o // groups, p))
    cols = cols.reshape((b, cg * groups) + tuple(kernel) + tuple(out))
    return col2im(xp, cols, size, stride, pads, dilation)


def conv_weight_grad(xp, x, g, kernel, stride, pads, dilation, groups):
    """The adjoint of conv_forward in its weight: (O, C/G, *K) from x and g (B, O, *P)."""
    b, c = x.shape[:2]
    o = g.shape[1]
    cols, out = im2col(xp, x, kernel, stride, pads, dilation)
    out = g.shape[2:]                    # P from g: rows past a stride's reach add nothing
    cols = cols[(Ellipsis,) + tuple(slice(0, n) for n in out)]
    ck = (c // groups) * math.prod(kernel)
    p = math.prod(out)
    if groups == 1:
        gw = xp.tensordot(g.reshape(b, o, p), cols.reshape(b, ck, p), axes=([0, 2], [0, 2]))
    else:
        gg = g.reshape(b, groups, o // groups, p)
        cc = cols.reshape(b, groups, ck, p)
        gw = xp.einsum("bgop,bgkp->gok", gg, cc, optimize=True)
    return gw.reshape((o, c // groups) + tuple(kernel))
