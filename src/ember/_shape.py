"""Size, the tuple of ints a tensor's shape is (``torch.Size``)."""

import numbers
import operator

__all__ = ["Size"]


class Size(tuple):
    """A tensor shape: a tuple of ints that prints as ``ember.Size([2, 3])``."""

    __slots__ = ()

    def __new__(cls, sizes=()):
        sizes = tuple(sizes)
        if any(type(s) is not int for s in sizes):
            sizes = tuple(_size_entry(s, i) for i, s in enumerate(sizes))
        return tuple.__new__(cls, sizes)

    def __repr__(self):
        return f"ember.Size([{', '.join(map(str, self))}])"

    def numel(self):
        """The number of elements a tensor of this shape holds."""
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        out = tuple.__getitem__(self, key)
        return _shape(out) if isinstance(key, slice) else out

    def __add__(self, other):
        if not isinstance(other, tuple):
            raise TypeError(f"can only concatenate tuple (not {type(other).__name__}) to "
                            f"ember.Size")
        return Size(tuple.__add__(self, other))

    def __mul__(self, times):
        if isinstance(times, Size):
            raise TypeError("can't multiply sequence by non-int of type 'ember.Size'")
        out = tuple.__mul__(self, times)
        return out if out is NotImplemented else _shape(out)

    __rmul__ = __mul__

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __reduce__(self):
        return (Size, (tuple(self),))


def _size_entry(value, i):
    """A Size entry from ``value``: ints (NumPy's too) as they are, bools and one-element
    integer tensors as ints; anything else raises PyTorch's TypeError."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return value
    if isinstance(value, bool):
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"ember.Size() takes an iterable of 'int' (item {i} is "
                        f"'{type(value).__name__}')") from None


def _shape(dims):
    """A Size of dims known to be ints (an array's shape), without checking them."""
    return tuple.__new__(Size, dims)
