"""Depthwise convolutions (one input and one output channel per group) on backend arrays, where
a layout of _conv_kernels.py's columns does worse: the input gradient at a stride above 1 adds
each kernel offset's product straight into its window of the padded image, channel-first, with
no columns and no transposes (the columns of the generic path are an outer product, K times
the gradient, moved through two transposing copies)."""

import itertools
import math

from ember.ops._conv_chunks import map_samples

__all__ = ["takes_taps", "depthwise_input_grad"]

# below this many output pixels, _conv_kernels.py's batch-innermost columns do better (4x4
# and 5x5 outputs: 1.3-1.6x faster there; from 6x6 on, slower)
_FEW_TAP_PIXELS = 32


def takes_taps(w, groups, out):
    """Whether depthwise_input_grad serves a convolution with weight ``w`` (O, C/G, *K) and
    output size ``out``: one input and one output channel per group, not too few pixels."""
    return w.shape[1] == 1 and w.shape[0] == groups and math.prod(out) >= _FEW_TAP_PIXELS


def depthwise_input_grad(xp, g, w, size, stride, pads, dilation, bias):
    """conv_input_grad of a depthwise convolution: (B, C, *size) from g (B, C, *P), plus bias;
    per kernel offset, g times that offset's weights added into its (strided) window."""
    b, c = g.shape[:2]
    kernel, out = w.shape[2:], g.shape[2:]
    nd = len(kernel)
    dtype = xp.result_type(g, w) if bias is None else xp.result_type(g, w, bias)
    dst = xp.empty((b, c) + tuple(size), dtype)
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))
    # per kernel offset, the (C, 1, ...) weights that scale each channel of g
    taps = xp.ascontiguousarray(w.reshape(c, -1).T).reshape((-1, c) + (1,) * nd)
    lead = (slice(None), slice(None))
    windows = [lead + tuple(slice(j * d, j * d + (p - 1) * s + 1, s)
                            for j, d, p, s in zip(offset, dilation, out, stride))
               for offset in itertools.product(*map(range, kernel))]
    crop = lead + tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, pads))

    def chunk(lo, hi):
        img = xp.zeros((hi - lo, c) + padded, dtype)
        part = xp.empty((hi - lo, c) + tuple(out), dtype)
        for tap, window in zip(taps, windows):
            xp.multiply(g[lo:hi], tap, out=part)
            img[window] += part
        if bias is None:
            dst[lo:hi] = img[crop]
        else:
            xp.add(img[crop], bias.reshape((c,) + (1,) * nd), out=dst[lo:hi])

    # the image and the product twice over: chunks of half the usual size measured 1.2x faster
    per_sample = 2 * (math.prod(padded) + math.prod(out)) * c * g.itemsize
    map_samples(xp, b, per_sample, chunk)
    return dst
