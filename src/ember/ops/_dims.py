"""Dimension arguments: wrapping negative dims and validating dim lists, as PyTorch does."""

import operator

import numpy as np

from ember.ops._call_site import call_site

__all__ = ["wrap_dim", "wrap_dim_of_sized", "reduction_dims", "int_param", "int_sequence",
           "invalid_combination", "check_overloaded_dims", "is_index", "int_error", "type_name",
           "unpack_error", "given_count"]


def wrap_dim(dim, ndim, arg=None):
    """``dim`` in ``[0, ndim)``; 0-dim tensors accept -1 and 0. ``arg``, ``(op, name,
    position)`` with the position in the method form, lets a TypeError name the argument
    as PyTorch's parser does."""
    if type(dim) is not int:            # PyTorch refuses bool dims (sort(x, True))
        dim = _index(dim, arg, strict=arg is not None)
    size = ndim if ndim > 0 else 1
    if not -size <= dim < size:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-size}, "
                         f"{size - 1}], but got {dim})")
    return dim + size if dim < 0 else dim


def wrap_dim_of_sized(dim, ndim, arg=None):
    """``wrap_dim``, then PyTorch's error naming the wrapped dim when the tensor is 0-dim
    (for ops that need a dim to index into: unbind, unflatten, take_along_dim)."""
    d = wrap_dim(dim, ndim, arg)
    if ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    return d


def int_param(value, arg, strict=False):
    """``value`` as an int, or PyTorch's TypeError naming the argument as ``wrap_dim``'s
    ``arg`` does (for int arguments that are not dims: chunks, k, offset). ``strict``: an
    ``int`` (not ``SymInt``) argument, which refuses other objects with ``__index__``."""
    if type(value) is int:
        return value
    return _index(value, arg, strict)


def int_sequence(value, arg, scalar=True):
    """``value``, a sequence of ints (or an int, if ``scalar``), as a tuple of ints; anything
    else raises PyTorch's TypeError for an ``int[]`` argument, named by ``arg`` as in
    ``wrap_dim``."""
    if isinstance(value, (tuple, list)):
        items = value
    elif scalar:
        items = (value,)
    else:
        raise TypeError(_sequence_error(value, arg))
    try:
        ints = tuple(map(operator.index, items))
    except TypeError:
        raise TypeError(_sequence_error(value, arg)) from None
    if items and type(items[0]) is bool:    # the parser checks the first element's type
        raise TypeError(_sequence_error(value, arg))
    return ints


def _sequence_error(value, arg):
    """PyTorch's three words for a bad ``int[]``: not a sequence, a bad first element (the
    parser's type check), a bad later one (its unpacking)."""
    if not isinstance(value, (tuple, list)):
        return f"{_argument(arg)} must be tuple of ints, not {type_name(value)}"
    pos, bad = _first_non_int(value)
    if pos == 0 and _by_keyword(arg):       # the keyword form names the sequence's type
        return f"{_argument(arg)} must be tuple of ints, not {type_name(value)}"
    if pos == 0:
        return (f"{_argument(arg)} must be tuple of ints, but found element of type "
                f"{type_name(bad)} at pos 0")
    site = call_site()
    arg = _resolved(arg, site) or ("", "dim")
    op = arg[0] + "_" if arg[0] and len(arg) < 4 and site and site.kind == "inplace" else arg[0]
    where = f"{op}(): argument '{arg[1]}'" if op else "argument 'dim'"
    return unpack_error(where, pos + 1, bad)


def unpack_error(where, pos, bad):
    """PyTorch's words for a bad element ``bad`` at (1-based) ``pos`` of an ``int[]``
    argument that ``where`` names (``"movedim(): argument 'source'"``)."""
    return (f"{where} failed to unpack the object at pos {pos} with error "
            f"\"type must be tuple of ints,but got {type_name(bad)}\"")


def invalid_combination(op, given, kind=None):
    """PyTorch's TypeError when no overload of ``op`` takes the arguments (its first line):
    ``given`` are the arguments after the tensor as if passed by position, for a call that
    passed none by keyword; ``kind`` overrides the entry point's ("function" where PyTorch's
    method calls the function, which then sees no keywords)."""
    forwarded = kind is not None
    site = None if forwarded else call_site()
    # (see NOTE [Keyword arguments in TypeErrors]; varargs: x.squeeze("a", 0) is two given)
    if site is not None and (site.keywords or site.keywords is not None and site.varargs):
        kind, got = site.kind, site.got()
    else:
        kind = kind or (site and site.kind)
        names = [] if kind in ("method", "inplace") else ["Tensor"]
        got = ", ".join(names + [type_name(v) for v in given])
    op += "_" if kind == "inplace" else ""
    if forwarded:
        from ember.ops._overloads import forwarded_listing
        lines = forwarded_listing(op, given)
    else:
        lines = _listing(op, kind, site)
    return TypeError(f"{op}() received an invalid combination of arguments - got "
                     f"({got}), but expected one of:{lines}")


def _listing(op, kind, site):
    """PyTorch's signatures of ``op`` after its "expected one of:", where they are known
    (see NOTE [Overloaded signatures in TypeErrors])."""
    from ember.ops._overloads import overloads, site_listing
    signatures = overloads(op, kind or "function")
    if signatures is None or site is None or site.keywords is None:
        return ""
    return site_listing(signatures, site)


def check_overloaded_dims(dim, op, given, name="dim", alone=False):
    """Raise PyTorch's error for a bad ``dim`` of an op overloaded on it (an int, a tuple of
    ints, names): an "invalid combination" when no overload takes its type or its first
    element, an unpacking error for a later element; ``given`` as for
    ``invalid_combination``. ``alone``: the "invalid combination" only when ``dim`` is the
    one argument given (``sum``: PyTorch names the int[] otherwise). Call it on the error
    path only."""
    if isinstance(dim, (tuple, list)):
        no_overload = bool(dim) and not is_index(dim[0])
    else:
        no_overload = not is_index(dim)
    if no_overload and alone and given_count(given) > 1:
        raise TypeError(_sequence_error(dim, (op, name, 1)))
    if no_overload:
        raise invalid_combination(op, given)
    int_sequence(dim, (op, name, 1))


def _by_keyword(arg):
    """Whether the argument ``arg`` names (as in ``wrap_dim``) came by keyword."""
    site = call_site()
    return site is not None and site.passed_by_keyword("dim" if arg is None else arg[1])


def given_count(given):
    """How many arguments the running public call gave besides the tensor."""
    site = call_site()
    count = None if site is None else site.given_count()
    return len(given) if count is None else count


def is_index(value):
    """Whether ``value`` is an integer (Python's ``__index__``), as PyTorch's parser takes
    one: not a bool."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _index(dim, arg, strict=False):
    """``dim`` as PyTorch's parser reads an integer: not a bool; for an ``int`` (``strict``,
    a dim) only a Python or NumPy integer or an integer tensor, for a ``SymInt`` any object
    with ``__index__``."""
    if isinstance(dim, bool) or not hasattr(type(dim), "__index__") \
            or strict and not isinstance(dim, int) and not _is_numpy_int_or_tensor(dim):
        raise int_error(dim, arg)
    try:
        return dim.__index__()
    except TypeError:           # a float or many-element tensor
        raise int_error(dim, arg) from None


def _is_numpy_int_or_tensor(value):
    from ember._tensor import Tensor
    return isinstance(value, (np.integer, Tensor))


def int_error(value, arg):
    """PyTorch's TypeError for a value that is not an ``int``, named by ``arg`` as in
    ``wrap_dim`` (a position of None: the parser names none)."""
    return TypeError(f"{_argument(arg)} must be int, not {type_name(value)}")


def type_name(value):
    """The type name PyTorch's messages give (CPython's ``tp_name``): ``numpy.int64``;
    ``ember.dtype`` for the classes PyTorch writes in C (``torch.dtype``)."""
    from ember._from_data import _tp_name
    name = _tp_name(value)
    if name in _C_CLASSES and type(value).__module__.startswith("ember"):
        return _C_CLASSES[name]
    return name


# ember's classes whose PyTorch counterparts are C types, named by their module
_C_CLASSES = {"dtype": "ember.dtype", "device": "ember.device", "layout": "ember.layout",
              "memory_format": "ember.memory_format", "Generator": "ember._C.Generator",
              "finfo": "ember.finfo", "iinfo": "ember.iinfo"}


def _argument(arg):
    """How PyTorch's parser names a dim argument: ``op(): argument 'dim' (position 1)`` in
    the method form, one position further on in the function form (the tensor comes first),
    ``op_()`` in the in-place form, no position when passed by keyword. A fourth item names
    the form (plain methods such as ``Tensor.size``, which are no registry entry points);
    None, a dim a helper checks, names the entry point's ``dim`` where it has one."""
    site = call_site()          # the frames are only looked at on this error path
    arg = _resolved(arg, site)
    if arg is None:
        return "argument 'dim'"
    op, name, position = arg[:3]
    kind = arg[3] if len(arg) > 3 else site and site.kind
    if kind == "inplace":
        op += "_"
    if position is None:
        return f"{op}(): argument '{name}'"
    if site is not None and site.passed_by_keyword(name):
        return f"{op}(): argument '{name}'"     # see NOTE [Keyword arguments in TypeErrors]
    if kind not in ("method", "inplace"):
        position += 1
    return f"{op}(): argument '{name}' (position {position})"


argument_name = _argument     # for ops that name an argument of another type than int


def _resolved(arg, site):
    """``arg``; for None (a dim a helper checks), the dim of the entry point ``site``, when
    it has one."""
    if arg is not None or site is None:
        return arg
    return site.argument("dim")


def reduction_dims(dim, ndim):
    """The sorted tuple of dims a reduction covers: all of them when ``dim`` is None or ()."""
    if dim is None:
        return tuple(range(ndim))
    try:
        if isinstance(dim, (tuple, list)):
            if len(dim) == 0:
                return tuple(range(ndim))
            # the parser checks the first element's type only: later bools read as ints
            dims = [wrap_dim(int(d) if i and type(d) is bool else d, ndim)
                    for i, d in enumerate(dim)]
            seen = set()
            for d in dims:
                if d in seen:
                    raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
                seen.add(d)
            return tuple(sorted(dims)) if ndim else ()
        d = wrap_dim(dim, ndim)
        return (d,) if ndim else ()
    except TypeError:           # PyTorch's words for an int[] (no cost when nothing raises)
        if _first_non_int(dim) is None:
            raise
        raise TypeError(_sequence_error(dim, None)) from None


def _first_non_int(value):
    """(position, element) of the first element of the sequence ``value`` PyTorch's parser
    refuses as an int (it reads later bools as ints), (None, value) for a non-sequence that
    is no int, or None."""
    if not isinstance(value, (tuple, list)):
        return None if is_index(value) else (None, value)
    return next(((i, v) for i, v in enumerate(value)
                 if not is_index(v) and not (i and type(v) is bool)), None)
