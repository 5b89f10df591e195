"""NumPy's argument names that PyTorch accepts as well as its own (``axis``, ``keepdims``):
how the registry's generated functions, and hand-written ones, take them."""

import ast
import inspect

__all__ = ["UNSET", "MISSING", "METHOD_NAMES", "aliases_of", "stand_in_defaults",
           "alias_prologue", "public_signature", "alias_arg", "numpy_names", "missing_arg"]

UNSET = object()            # a keyword that was not passed
MISSING = object()          # the default of a required parameter an alias may stand in for


# NOTE [NumPy argument names]: PyTorch's argument parser accepts NumPy's names for two
# parameters of every native function and method: ``axis`` for ``dim`` and ``keepdims`` for
# ``keepdim`` (``x.sum(axis=1, keepdims=True)``); giving both names raises. The generated
# functions take them as hidden keyword-only parameters (absent from ``inspect.signature``).
# nn.functional's functions are plain Python in PyTorch and take no aliases.
_ALIASES = (("dim", "axis"), ("keepdim", "keepdims"))
# PyTorch's parser also takes ``x`` for ``input`` everywhere; ember does so only where the
# documentation names the parameter ``x`` (each alias costs every call of the op a check)
_OP_ALIASES = {"linalg.vector_norm": (("input", "x"),),
               # isin's overloads taking a number name it in the singular
               "isin": (("elements", "element"), ("test_elements", "test_element")),
               # tensor_split's overloads name theirs
               "tensor_split": (("indices_or_sections", "sections"),
                                ("indices_or_sections", "indices"),
                                ("indices_or_sections", "tensor_indices_or_sections"))}


# the names Tensor's methods give the op's parameters, where the function's differ: each
# takes its own name only (torch.split(x, split_size=2) raises, as x.split(split_size=2) does
# not)
METHOD_NAMES = {"split": {"split_size_or_sections": "split_size"}}


# functions PyTorch writes in Python (torch/functional.py): they take no aliases
_PYTHON_FUNCTIONS = frozenset(("split", "norm", "unique", "unique_consecutive"))


def aliases_of(op, names, kind="function"):
    """The (parameter, NumPy name) pairs the generated functions of ``op`` of ``kind``
    accept."""
    from ember.ops._call_site import PYTHON_METHODS
    if op.namespace == "nn.functional":
        return ()
    if (op.name in _PYTHON_FUNCTIONS if kind == "function" else
            (op.method_name or op.name) in PYTHON_METHODS):
        return ()
    pairs = _ALIASES + _OP_ALIASES.get(op.name, ())
    return tuple((p, a) for p, a in pairs if p in names and a not in names)


def stand_in_defaults(aliases, pos, defaults):
    """Give a required ``dim`` (and the required parameters after it) the default MISSING,
    so that ``softmax(x, axis=1)`` binds; returns the names given it."""
    required = [pos.index(p) for p, _ in aliases if p in pos and defaults[pos.index(p)] is None]
    if not required:
        return []
    names = []
    for i in range(required[0], len(pos)):
        if defaults[i] is None:
            defaults[i] = ast.Name("_MISSING")
            names.append(pos[i])
    return names


def alias_prologue(aliases, parts, pos, defaults, stand_ins, fname):
    """Add the alias keywords to ``parts``; the code that maps them to their parameters."""
    if not any(p.startswith("*") for p in parts):
        parts.append("*")
    lines = []
    for param, alias in aliases:
        parts.append(f"{alias}=_UNSET")
        default = "_MISSING" if param in stand_ins else next(
            (ast.unparse(d) for n, d in zip(pos, defaults) if n == param and d is not None),
            "None")
        lines.append(f"    if {alias} is not _UNSET:\n"
                     f"        {param} = _alias_arg({param}, {alias}, {default}, '{fname}', "
                     f"'{alias}')\n")
    for name in stand_ins:
        lines.append(f"    if {name} is _MISSING:\n"
                     f"        _missing_arg('{fname}', '{name}')\n")
    return "".join(lines)


def public_signature(fn, aliases, hidden=()):
    """``fn``'s signature as PyTorch documents it: no alias keywords, no stand-in defaults,
    none of the ``hidden`` parameters."""
    hidden = {a for _, a in aliases} | set(hidden)
    return inspect.Signature([
        p.replace(default=inspect.Parameter.empty) if p.default is MISSING else p
        for p in inspect.signature(fn).parameters.values() if p.name not in hidden])


def alias_arg(value, alias_value, default, fname, alias):
    """The value of a parameter passed under its NumPy name (see NOTE [NumPy argument names])."""
    if value is not default:
        raise TypeError(f"{fname}() got an unexpected keyword argument '{alias}'")
    return alias_value


def numpy_names(fn):
    """Hide a hand-written function's ``axis``/``keepdims`` keywords from its signature (see
    NOTE [NumPy argument names]); the function maps them with ``alias_arg``. Returns ``fn``."""
    sig = inspect.signature(fn)
    fn.__signature__ = sig.replace(parameters=[
        p for n, p in sig.parameters.items() if n not in ("axis", "keepdims")])
    return fn


def missing_arg(fname, name):
    """Raise PyTorch's error for a required argument that was not passed: its parser's words
    ("arguments" and double quotes, sic), or its "invalid combination" listing for an op it
    declares several times."""
    from ember.ops._call_site import PYTHON_METHODS, call_site
    from ember.ops._overloads import in_parser_words
    site = call_site()
    if site is not None:        # the parser's name: linalg_vector_norm, cumsum_
        if site.kind == "method" and site.name in PYTHON_METHODS:
            # PyTorch writes this method in Python: Python's words
            raise TypeError(f"Tensor.{fname}() missing 1 required positional argument: "
                            f"'{name}'")
        fname = site.parser_name + "_" * (site.kind == "inplace")
    raise TypeError(in_parser_words(f'{fname}() missing 1 required positional arguments: '
                                    f'"{name}"'))
