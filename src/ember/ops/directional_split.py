"""``hsplit``, ``vsplit`` and ``dsplit`` (functions and methods): ``tensor_split`` along dim
1 (0 for 1-D tensors), 0 and 2, into equal sections or at indices.

PyTorch declares each with two overloads, ``(Tensor input, int sections)`` and ``(Tensor
input, tuple of ints indices)``, and the method takes its indices as varargs too
(``x.hsplit(1, 4)``). Its parser reads the one argument as ``sections`` when it is an int (a
0-dim integer tensor included) and as ``indices`` when it is a sequence whose first element
is an int, or an integer tensor of one element; anything else, a keyword neither overload
names, or one argument too many or too few, is its "invalid combination" TypeError listing
both overloads. These are hand-written, as the argument's type picks the overload.
"""

from ember._dtype import INTEGRAL
from ember._tensor import Tensor
from ember.ops._dims import is_index, unpack_error
from ember.ops._overloads import combination_error
from ember.ops.join import tensor_split

__all__ = ["hsplit", "vsplit", "dsplit", "METHODS"]

_FUNCTION_SIGNATURES = ("Tensor input, int sections", "Tensor input, tuple of ints indices")
_METHOD_SIGNATURES = ("int sections", "tuple of ints indices")
_REFUSED = object()


def _integral(tensor):
    return tensor.dtype.category == INTEGRAL


def _sections(value):
    """``value`` as ``sections`` (an int), or _REFUSED."""
    if isinstance(value, Tensor):
        return int(value) if _integral(value) and value.ndim == 0 else _REFUSED
    return value.__index__() if is_index(value) else _REFUSED


def _indices(name, value):
    """``value`` as ``indices`` (a list of ints), or _REFUSED; a later element that is no
    int raises the parser's unpacking error."""
    if isinstance(value, Tensor):
        return [int(value)] if _integral(value) and value.numel() == 1 else _REFUSED
    if not isinstance(value, (tuple, list)):
        return _REFUSED
    if value and not is_index(value[0]):        # the parser checks the first one's type
        return _REFUSED
    for pos, item in enumerate(value):
        if not (is_index(item) or type(item) is bool):  # later bools read as ints
            raise TypeError(unpack_error(f"{name}(): argument 'indices'", pos + 1, item))
    return [int(item) for item in value]


def _parse(name, args, kwargs, method):
    """(tensor, sections or indices) of a call of ``name`` with ``args`` and ``kwargs`` (a
    method's after its tensor, given as ``method``), read as PyTorch's parser reads them."""
    signatures = _FUNCTION_SIGNATURES if method is None else _METHOD_SIGNATURES
    given = args
    if method is not None:
        input = method
    elif args:
        input, args = args[0], args[1:]
    else:
        input = kwargs.get("input")
    named = {k: v for k, v in kwargs.items() if k != "input" or method is not None}
    value = _REFUSED
    if method is not None and len(args) > 1 and not kwargs:     # x.hsplit(1, 4)
        value = _indices(name, args)
    elif len(args) + len(named) == 1 and isinstance(input, Tensor) \
            and named.keys() <= {"sections", "indices"}:
        if args:
            value = _sections(args[0])
            if value is _REFUSED:
                value = _indices(name, args[0])
        elif "sections" in named:
            value = _sections(named["sections"])
        else:
            value = _indices(name, named["indices"])
    if value is _REFUSED:
        raise combination_error(name, given, kwargs, signatures)
    return input, value


def _directional_split(name, ndim_needed, dim_of):
    def split(*args, **kwargs):
        input, value = _parse(name, args, kwargs, None)
        return _split(input, value)

    def method(self, *args, **kwargs):
        _, value = _parse(name, args, kwargs, self)
        return _split(self, value)

    def _split(input, value):
        if input.ndim < ndim_needed:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {ndim_needed} "
                               f"dimension, but got a tensor with {input.ndim} dimensions!")
        d = dim_of(input.ndim)
        if isinstance(value, list):
            return tensor_split(input, value, d)
        n = input.shape[d]
        if value == 0 or n % value:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the "
                               f"size of the dimension {n} is not divisible by the split_size "
                               f"{value}!")
        return tensor_split(input, value, d)

    split.__name__ = split.__qualname__ = method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    split.__doc__ = method.__doc__ = (
        f"Views of the tensor split along dim {dim_of(3)}"
        + (" (dim 0 for 1-D tensors)" if name == "hsplit" else "")
        + ": into ``sections`` equal pieces, or at ``indices``.")
    return split, method


hsplit, _hsplit_method = _directional_split("hsplit", 1, lambda ndim: 1 if ndim > 1 else 0)
vsplit, _vsplit_method = _directional_split("vsplit", 2, lambda ndim: 0)
dsplit, _dsplit_method = _directional_split("dsplit", 3, lambda ndim: 2)

METHODS = {"hsplit": _hsplit_method, "vsplit": _vsplit_method, "dsplit": _dsplit_method}
