"""Pixel shuffle/unshuffle and channel shuffle: fixed permutations of channels and pixels.

Each is a reshape-transpose-reshape; the derivative is the inverse permutation, which is
the sibling op (pixel_unshuffle for pixel_shuffle, channel_shuffle with the other factor).
"""

from ember._memory_format import like_input
from ember.ops._registry import op

__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle"]


def _check_rank(name, x):
    if x.ndim < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input "
                           f"with {x.ndim} dimension(s)")


@op("pixel_shuffle(input, upscale_factor)", method=False, saves_inputs=False)
def pixel_shuffle(xp, x, r):
    """Rearrange (*, C*r*r, H, W) into (*, C, H*r, W*r)."""
    _check_rank("pixel_shuffle", x)
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    c, h, w = x.shape[-3:]
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    lead = x.shape[:-3]
    n = len(lead)
    y = x.reshape(lead + (c // (r * r), r, r, h, w))
    y = y.transpose(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    # a copy even when r == 1 leaves the permutation a no-op: never the input's memory
    return like_input(xp, x, y.copy().reshape(lead + (c // (r * r), h * r, w * r)))


@pixel_shuffle.derivative
def _(grad, x, r):
    return pixel_unshuffle(grad, r)


@op("pixel_unshuffle(input, downscale_factor)", method=False, saves_inputs=False)
def pixel_unshuffle(xp, x, r):
    """Rearrange (*, C, H*r, W*r) into (*, C*r*r, H, W)."""
    _check_rank("pixel_unshuffle", x)
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    c, h, w = x.shape[-3:]
    for what, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {what} to be divisible by "
                               f"downscale_factor, but input.size({d})={size} is not divisible "
                               f"by {r}")
    lead = x.shape[:-3]
    n = len(lead)
    y = x.reshape(lead + (c, h // r, r, w // r, r))
    y = y.transpose(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return like_input(xp, x, y.copy().reshape(lead + (c * r * r, h // r, w // r)))


@pixel_unshuffle.derivative
def _(grad, x, r):
    return pixel_shuffle(grad, r)


@op("channel_shuffle(input, groups)", method=False, saves_inputs=False)
def channel_shuffle(xp, x, groups):
    """Interleave the channels of ``groups`` groups: (N, g*k, *) viewed as (N, k, g, *)."""
    if x.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(x.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    c = x.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    y = x.reshape((x.shape[0], groups, c // groups) + x.shape[2:]).swapaxes(1, 2)
    return like_input(xp, x, y.copy().reshape(x.shape))    # a copy also when groups is 1 or C


@channel_shuffle.derivative
def _(grad, x, groups):
    return channel_shuffle(grad, grad.shape[1] // groups or 1)


FUNCTIONAL = {"pixel_shuffle": "pixel_shuffle", "pixel_unshuffle": "pixel_unshuffle",
              "channel_shuffle": "channel_shuffle", "native_channel_shuffle": "channel_shuffle"}
ALIASES = {"native_channel_shuffle": "channel_shuffle"}
