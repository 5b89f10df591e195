"""Memory formats (``torch.memory_format``): the order in which a tensor's dims lie in memory.

``contiguous_format`` is row-major. ``channels_last`` keeps an (N, C, H, W) tensor's channels
innermost, as if stored (N, H, W, C); ``channels_last_3d`` does the same for (N, C, D, H, W).
``preserve_format`` asks a copy to keep its source's format. ember's arrays carry their
strides, so a tensor in one of these formats is an ordinary view of such memory.
"""

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d",
           "preserve_format"]


class memory_format:  # noqa: N801  (PyTorch's name)
    """A memory format; compare by identity (``fmt is ember.channels_last``)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):                   # pickles as the module-level singleton
        return self.name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# the dims from outermost to innermost in memory, for the formats that reorder them
_ORDERS = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def memory_order(fmt, ndim):
    """The memory order of ``fmt`` for an ``ndim``-dim tensor; None for row-major formats.
    Raises PyTorch's error when the format needs another rank."""
    if fmt not in _ORDERS:
        return None
    rank, order = _ORDERS[fmt]
    if ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    return order


def laid_out(array, order):
    """Whether ``array``'s memory runs densely through its dims in ``order`` (dims of size 1
    may have any stride)."""
    expected = array.itemsize
    for d in reversed(order):
        size = array.shape[d]
        if size == 0:
            return True
        if size != 1 and array.strides[d] != expected:
            return False
        expected *= size
    return True


def lay_out(xp, array, order):
    """A copy of ``array`` whose memory runs through its dims in ``order``."""
    inverse = sorted(range(len(order)), key=order.__getitem__)
    return xp.ascontiguousarray(array.transpose(order)).transpose(inverse)


def preserving_order(array):
    """The NumPy order of a copy laid out as PyTorch's ``preserve_format`` lays it out: the
    array's own dim order, densely ("K"); row-major for an expanded (overlapping) array."""
    return "C" if array.flags.c_contiguous or 0 in array.strides else "K"
