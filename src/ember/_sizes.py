"""The size arguments of factories (``zeros(2, 3)``, ``zeros((2, 3))``, ``zeros(size=...)``),
read and checked as PyTorch's argument parser does, with its messages."""

from ember._tensor import Size

__all__ = ["_size", "_size_args", "_is_int"]

_SEQUENCES = (tuple, list, Size)


def _size_args(sizes, size, name):
    """A factory's size, given as ``*sizes`` or as ``size=`` (not both), checked to be ints
    with PyTorch's messages."""
    if size is None:
        if not sizes:                   # (a 0-dim tensor's size is (), given as such)
            raise TypeError(f'{name}() missing 1 required positional arguments: "size"')
        if _plain_ints(sizes) or len(sizes) == 1 and type(sizes[0]) in _SEQUENCES \
                and _plain_ints(sizes[0]):
            return sizes                # the common forms, f(2, 3) and f((2, 3)): nothing to say
        if len(sizes) == 1 and not _is_int(sizes[0]):
            _check_size_sequence(sizes[0], name, " (position 1)")
        elif sizes and not _is_int(sizes[0]):
            raise TypeError(f"{name}() takes 1 positional argument but {len(sizes)} were given")
        else:
            _check_size_rest(sizes, name)
        return sizes
    if sizes:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    if not _is_int(size):
        _check_size_sequence(size, name, "")
    return (size,)


def _plain_ints(values):
    for v in values:
        if type(v) is not int:
            return False
    return True


def _is_int(x):
    """Whether ``x`` may stand for one dim's size (an int, not a bool)."""
    if isinstance(x, bool):
        return False
    try:
        x.__index__()
    except (AttributeError, TypeError, RuntimeError, ValueError):
        return False
    return True


def _check_size_sequence(size, name, position):
    """PyTorch's error for a size that is neither an int nor a sequence of ints: the first
    element is checked when the argument is parsed, the others when it is unpacked."""
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{name}(): argument 'size'{position} must be tuple of ints, not "
                        f"{type(size).__name__}")
    if size and not _is_int(size[0]):
        if not position:
            raise TypeError(f"{name}(): argument 'size' must be tuple of ints, not "
                            f"{type(size).__name__}")
        raise TypeError(f"{name}(): argument 'size'{position} must be tuple of ints, but found "
                        f"element of type {type(size[0]).__name__} at pos 0")
    _check_size_rest(size, name)


def _check_size_rest(size, name):
    for pos, s in enumerate(size[1:], 2):
        if not _is_int(s):
            raise TypeError(f"{name}(): argument 'size' failed to unpack the object at pos {pos} "
                            f"with error \"type must be tuple of ints,but got "
                            f"{type(s).__name__}\"")


def _size(size, factory=None):
    """Normalise ``f(2, 3)``, ``f((2, 3))`` and ``f(Size)`` to a tuple of ints (``factory``:
    the name PyTorch's message for a negative size gives, where it words it its own way)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    try:
        shape = tuple(int(s.__index__()) for s in size)
    except (AttributeError, TypeError):
        raise TypeError(f"size must be a tuple of ints, but got {size!r}") from None
    for s in shape:
        if s < 0:
            if factory is not None:
                raise RuntimeError(f"{factory}: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(shape)}")
    return shape
