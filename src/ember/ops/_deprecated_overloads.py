"""PyTorch's deprecated overloads that put a scalar before the tensors: ``x.add(2, y)`` is
``x.add(y, alpha=2)``, ``x.addcmul_(0.5, a, b)`` is ``x.addcmul_(a, b, value=0.5)``, and
``m.addmm(0.5, a, b)`` is ``m.addmm(a, b, beta=0.5)`` (old optimizers, training loops and layers
are full of them).

NOTE [Scalar-first overloads]: PyTorch's parser keeps these signatures hidden: it takes them
(with a UserWarning, once per process) when the visible signature refuses a call, and never
names them in its errors. The generated entry points of these ops gather the positional
arguments past the visible ones in ``*_shifted``, empty in every other call (a valid call pays
one truth test); when one is there, the positional arguments are read one place further on
(the first is the scalar), as ``scalar_first`` checks, and more than one is PyTorch's error
for too many arguments.
"""

import numbers

from ember._tensor import Tensor
from ember._warn import warn_once

__all__ = ["SCALAR_FIRST", "scalar_first", "scalar_first_prologue"]

# op name -> (its scalar's keyword, the tensors after the input); PyTorch's parser also takes
# numbers for add's and sub's tensors. The matrix products take two, beta then alpha (see
# NOTE [Beta-first overloads])
SCALAR_FIRST = {"add": ("alpha", ("other",)), "sub": ("alpha", ("other",)),
                "addcmul": ("value", ("tensor1", "tensor2")),
                "addcdiv": ("value", ("tensor1", "tensor2")),
                **{name: (("beta", "alpha"), tensors) for name, tensors in (
                    ("addmm", ("mat1", "mat2")), ("addbmm", ("batch1", "batch2")),
                    ("baddbmm", ("batch1", "batch2")), ("addmv", ("mat", "vec")),
                    ("addr", ("vec1", "vec2")))}}
_NUMBERS_AS_TENSORS = frozenset(("add", "sub"))
# the functions whose visible signatures PyTorch lists with an out_dtype overload too
_OUT_DTYPE = frozenset(("addmm", "baddbmm"))


def scalar_first_prologue(name, kind, positional, has_out):
    """The code of the generated entry point ``name`` (of ``kind``; ``positional``: its
    positional parameters; ``has_out``: it takes ``out=``) that reads a call with arguments in
    ``*_shifted`` as the deprecated form."""
    scalar, _ = SCALAR_FIRST[name]
    given = positional[1:]
    shown = name + "_" if kind == "inplace" else name
    first = positional[0] if kind == "function" else "self"
    if isinstance(scalar, tuple):
        targets = ", ".join((*([first] if kind == "function" else ()), *given, *scalar))
        return (f"    if _shifted:\n"
                f"        {targets} = _scalar_first('{shown}', '{kind}', ({', '.join(scalar)}), "
                f"{'out' if has_out else 'None'}, {', '.join((first, *given))}, *_shifted)\n")
    return (f"    if _shifted:\n"
            f"        {', '.join((scalar, *given))} = _scalar_first('{shown}', '{kind}', "
            f"{scalar}, {'out' if has_out else 'None'}, {', '.join((first, *given))}, "
            f"*_shifted)\n")


def scalar_first(name, kind, keyword, out, first, *given):
    """(scalar, tensors...) of a call of ``name`` (as ``kind``) in the deprecated form whose
    positional arguments are ``first`` (the input) and ``given``; ``keyword``: the value of
    the scalar's keyword, ``out``: of ``out=``. Raises PyTorch's TypeError where that form
    does not take them."""
    base = name.rstrip("_")
    scalar_name, tensor_names = SCALAR_FIRST[base]
    if isinstance(scalar_name, tuple):
        return _beta_first(name, kind, keyword, first, given, tensor_names)
    keyword_given = not (type(keyword) is int and keyword == 1)     # (its default: 1)
    if len(given) > len(tensor_names) + 1:
        raise _too_many(name, kind, (first, *given), keyword_given, out is not None)
    scalar, tensors = given[0], given[1:]
    numbers_ok = base in _NUMBERS_AS_TENSORS
    if keyword_given or not (_is_scalar(scalar) and all(
            isinstance(t, Tensor) or numbers_ok and _is_number(t) for t in tensors)):
        raise _refusal(name, kind, scalar_name, len(tensor_names), keyword_given)
    _warn(name, kind, scalar_name, tensor_names)
    if isinstance(scalar, Tensor):
        scalar = scalar.item()
    return (scalar, *tensors)


def _beta_first(name, kind, keywords, first, given, tensor_names):
    """NOTE [Beta-first overloads]: ``m.addmm(beta, [alpha,] mat1, mat2)`` and
    ``torch.addmm(beta, input, [alpha,] mat1, mat2)``: (the tensors after the input, the input
    first for a function, then beta and alpha) of such a call, with PyTorch's warning."""
    args = (first, *given) if kind == "function" else given
    tensors = len(tensor_names) + (kind == "function")
    with_alpha = len(args) == tensors + 2
    if with_alpha and kind == "function":
        scalars, rest = (args[0], args[2]), (args[1], *args[3:])
    else:
        scalars, rest = args[:1 + with_alpha], args[1 + with_alpha:]
    keyword_given = any(not (type(k) is int and k == 1) for k in keywords)
    if (len(args) > tensors + 2 or keyword_given or not all(map(_is_scalar, scalars))
            or not all(isinstance(t, Tensor) for t in rest)):
        raise TypeError(f"{name}() takes {tensors} positional arguments but {len(args)} were "
                        f"given")
    tensors_shown = ", ".join(f"Tensor {t}" for t in tensor_names)
    alpha = "Number alpha, " * with_alpha
    if kind == "function":
        old = f"Number beta, Tensor input, {alpha}{tensors_shown}, *, Tensor out = None"
        new = [f"Tensor input, {tensors_shown}, *, Number beta = 1, Number alpha = 1, "
               f"Tensor out = None"]
        if name in _OUT_DTYPE:
            new.append(f"Tensor input, {tensors_shown}, torch.dtype out_dtype, *, Number beta "
                       f"= 1, Number alpha = 1, Tensor out = None")
    else:
        old = f"Number beta, {alpha}{tensors_shown}"
        new = [f"{tensors_shown}, *, Number beta = 1, Number alpha = 1"]
    instead = "\n".join(f"\t{name}({sig})" for sig in new)
    warn_once(f"This overload of {name} is deprecated:\n\t{name}({old})\nConsider using one "
              f"of the following signatures instead:\n{instead}", key="scalar-first overload")
    scalars = [s.item() if isinstance(s, Tensor) else s for s in scalars]
    return (*rest, scalars[0], scalars[1] if with_alpha else 1)


def _is_number(value):
    return isinstance(value, numbers.Number)


def _is_scalar(value):
    """Whether PyTorch's parser takes ``value`` for a Number: a number or a 0-dim tensor that
    does not require grad."""
    return _is_number(value) or (isinstance(value, Tensor) and value.ndim == 0
                                 and not value.requires_grad)


def _refusal(name, kind, scalar_name, count, keyword_given):
    """PyTorch's TypeError for a call the visible signature of ``name`` (``count`` tensors
    after the input) refuses for one positional argument too many."""
    if keyword_given and kind != "function":
        return TypeError(f"{name}() received an invalid combination of arguments - got "
                         f"unrecognized keyword arguments: {scalar_name}")
    count += kind == "function"
    return TypeError(f"{name}() takes {count} positional argument{'s' * (count != 1)} but "
                     f"{count + 1} were given")


def _too_many(name, kind, args, keyword_given, out_given):
    """PyTorch's TypeError for a call of ``name`` (as ``kind``) with ``args`` (the input
    first), more positional arguments than even the deprecated form takes."""
    scalar_name, tensor_names = SCALAR_FIRST[name.rstrip("_")]
    keywords = [scalar_name] * keyword_given + ["out"] * out_given
    if keywords:
        return TypeError(f"{name}() received an invalid combination of arguments - got "
                         f"unrecognized keyword arguments: {', '.join(keywords)}")
    items = [f"Tensor {t}" for t in tensor_names] + ["*", f"Number {scalar_name} = 1"]
    if kind == "function":
        items = ["Tensor input", *items, "Tensor out = None"]
        if len(args) == len(tensor_names) + 3:
            return TypeError(f"{name}() takes {len(tensor_names) + 1} positional arguments "
                             f"but {len(args)} were given")
    else:
        args = args[1:]
    from ember.ops._dims import type_name
    names = [type_name(v) for v in args]
    if len(args) == len(items):     # the parser says which items refused their arguments
        names = [n if item.startswith("Tensor ") and " = " not in item and isinstance(
            v, Tensor) else f"!{n}!" for n, v, item in zip(names, args, items)]
    return TypeError(f"{name}() received an invalid combination of arguments - got "
                     f"({', '.join(names)}), but expected ({', '.join(items)})")


def _warn(name, kind, scalar_name, tensor_names):
    """PyTorch's deprecation warning for the scalar-first form of ``name``."""
    tensors = ", ".join(f"Tensor {t}" for t in tensor_names)
    if kind == "function":
        old = f"Tensor input, Number {scalar_name}, {tensors}, *, Tensor out = None"
        new = f"Tensor input, {tensors}, *, Number {scalar_name} = 1, Tensor out = None"
    else:
        old = f"Number {scalar_name}, {tensors}"
        new = f"{tensors}, *, Number {scalar_name} = 1"
    # PyTorch warns for the first such call only, whichever function it is (TORCH_WARN_ONCE)
    warn_once(f"This overload of {name} is deprecated:\n\t{name}({old})\nConsider using one "
              f"of the following signatures instead:\n\t{name}({new})",
              key="scalar-first overload")
