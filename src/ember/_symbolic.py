"""PyTorch's ``sym_*`` functions: the operations symbolic shapes overload (``torch.export``
and ``torch.compile`` trace sizes as symbols). ember has no symbolic sizes, so each one is the
plain Python operation on the numbers it is given, as in eager PyTorch."""

import builtins
import math

__all__ = ["sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite", "sym_sqrt",
           "sym_sum", "sym_fresh_size", "SymInt", "SymFloat", "SymBool"]

_NUMBERS = (int, float)


def _check_numbers(*values):
    import numpy as np
    for v in values:
        if not isinstance(v, (np.integer, np.floating) + _NUMBERS):
            raise AssertionError(f"expected (<class 'numpy.integer'>, <class 'numpy.floating'>, "
                                 f"<class 'int'>, <class 'float'>), got {type(v)}")


def sym_int(a):
    """``int(a)``, rounding toward zero."""
    return math.trunc(a) if isinstance(a, float) else int(a)


def sym_float(a):
    """``float(a)``."""
    return float(a)


def sym_max(a, b):
    """The larger of two numbers (a float if either is)."""
    _check_numbers(a, b)
    out = builtins.max(a, b)
    return float(out) if isinstance(a, float) or isinstance(b, float) else out


def sym_min(a, b):
    """The smaller of two numbers (a float if either is)."""
    _check_numbers(a, b)
    out = builtins.min(a, b)
    return float(out) if isinstance(a, float) or isinstance(b, float) else out


def sym_not(a):
    """``not a``."""
    return not a


def sym_ite(b, t, f):
    """``t if b else f``."""
    return t if b else f


def sym_sqrt(a):
    """``math.sqrt(a)``."""
    return math.sqrt(a)


def sym_sum(*args):
    """The sum of the numbers given: ``sym_sum([a, b, c])`` or ``sym_sum(a, b, c)``."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return builtins.sum(args)


def sym_fresh_size(expr):
    """``expr`` as a size that the compiler would treat as a new unknown: here, its value
    read back through a tensor (``tensor(expr).item()``)."""
    from ember._creation import tensor
    return tensor(expr).item()


# The types of symbolic numbers, for the ``isinstance(n, (int, torch.SymInt))`` checks
# programs make: ember's sizes are always plain numbers, so nothing is an instance of these.
class SymInt:
    """A symbolic integer (ember makes none: sizes are plain ints)."""

    def __init__(self, *args, **kwargs):
        raise TypeError("ember has no symbolic sizes: SymInt cannot be made")


class SymFloat:
    """A symbolic float (ember makes none)."""

    def __init__(self, *args, **kwargs):
        raise TypeError("ember has no symbolic sizes: SymFloat cannot be made")


class SymBool:
    """A symbolic bool (ember makes none)."""

    def __init__(self, *args, **kwargs):
        raise TypeError("ember has no symbolic sizes: SymBool cannot be made")
