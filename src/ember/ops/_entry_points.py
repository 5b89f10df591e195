"""The public entry points of registered ops: ``ember.<name>``, ``Tensor.<name>`` and
``Tensor.<name>_`` generated from the op's PyTorch signature, so that binding arguments is
Python's own work."""

import ast
import inspect
import textwrap

from ember._dtype import PYTHON_DTYPES
from ember.ops._arg_aliases import (METHOD_NAMES, MISSING, UNSET, alias_arg, alias_prologue,
                                    aliases_of, missing_arg, public_signature,
                                    stand_in_defaults)
from ember.ops._deprecated_overloads import SCALAR_FIRST, scalar_first, scalar_first_prologue
from ember.ops._dims import is_index
from ember.ops._dispatch import call
from ember.ops._overloads import needs_refining, refine_type_error, refuse_bool, refuse_dtype

__all__ = ["generate", "GENERATED", "ENTRY_KINDS", "method_varargs", "varargs"]


def generate(op, kind, name=None):
    """Build ``ember.<name>`` (kind "function"), ``Tensor.<name>`` ("method") or
    ``Tensor.<name>_`` ("inplace") with the op's real signature; ``name``: another name
    PyTorch gives the op (``ember.divide``), which its TypeErrors then give."""
    args = op._args
    # a method may name a parameter as PyTorch's Tensor method does (Tensor.split's split_size)
    renamed = METHOD_NAMES.get(op.name, {}) if kind != "function" else {}
    pos = [renamed.get(a.arg, a.arg) for a in args.args]
    params = [renamed.get(p, p) for p in op.param_names]
    defaults = [None] * (len(pos) - len(args.defaults)) + list(args.defaults)
    own_name = op.short_name if kind == "function" else (op.method_name or op.short_name)
    fname = name or own_name
    aliases = aliases_of(op, pos + [a.arg for a in args.kwonlyargs], kind)
    stand_ins = stand_in_defaults(aliases, pos, defaults)
    given_defaults = list(defaults)
    dimless = _DIMLESS.get(own_name)
    if dimless is not None:     # dim and keepdim default to _NODIM: see _dimless_prologue
        for i, p in enumerate(pos):
            if p in ("dim", "keepdim"):
                defaults[i] = ast.Name("_NODIM")
    parts = []
    for name, default in zip(pos, defaults):
        parts.append(name if default is None else f"{name}={ast.unparse(default)}")
    if args.vararg:
        parts.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs or (kind == "function" and op.supports_out):
        parts.append("*")
    required = [a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults) if default is None]
    for a, default in zip(args.kwonlyargs, args.kw_defaults):
        # a required keyword-only parameter: PyTorch's parser words its absence (_MISSING)
        parts.append(f"{a.arg}=_MISSING" if default is None else
                     f"{a.arg}={ast.unparse(default)}")
    if kind == "function" and op.supports_out:
        parts.append("out=_UNSET" if _checks_all(op) else "out=None")
    prologue = ""
    if kind != "function":
        parts[0] = "self"
        if op.method_varargs:
            # x.view(2, 3), x.view((2, 3)) and x.view(size=(2, 3)) all work
            name = op.method_varargs
            idx = next(i for i, p in enumerate(parts) if p.split("=")[0] == name)
            default = parts[idx].partition("=")[2] or "_MISSING"
            parts[idx:idx + 1] = ["*_args", f"{name}=_UNSET"]
            if idx + 2 < len(parts) and parts[idx + 2] == "*":
                del parts[idx + 2]
            # x.view(2, 3), the common form, binds without a call
            prologue = (f"    if {name} is _UNSET and _args and type(_args[0]) is int:\n"
                        f"        {name} = _args\n"
                        f"    else:\n"
                        f"        {name} = _method_varargs(_args, {name}, {default}, "
                        f"'{op.method_name or op.short_name}', '{name}')\n")
        elif fname in _VARARG_DIMS:
            at = pos.index("dim") + 1
            parts[at:at + (parts[at:at + 1] == ["*"])] = ["*_more"]
    shifted = fname in SCALAR_FIRST
    if shifted:     # the positional arguments past the visible ones: see _deprecated_overloads
        parts[len(pos):len(pos) + (parts[len(pos):len(pos) + 1] == ["*"])] = ["*_shifted"]
        prologue += scalar_first_prologue(fname, kind, pos, kind == "function" and
                                          op.supports_out)
    if aliases:
        prologue = alias_prologue(aliases, parts, pos + [a.arg for a in args.kwonlyargs],
                                  defaults + list(args.kw_defaults), stand_ins,
                                  fname) + prologue
    for name in required:
        prologue += f"    if {name} is _MISSING:\n        _missing_arg('{fname}', '{name}')\n"
    if dimless is not None:
        prologue += _dimless_prologue(fname, dimless, kind == "function" and op.supports_out)
    has_dtype = "dtype" in pos or "dtype" in (a.arg for a in args.kwonlyargs)
    if has_dtype:
        prologue += _PYTHON_DTYPE
    if kind == "function" and op.out_prepare is not None:
        prologue += _out_prologue(op)
    if parts and parts[-1] == "*":
        parts.pop()
    inputs = ["self" if kind != "function" and n == pos[0] else n for n in op.input_names]
    entry = None
    if kind == "inplace":
        entry = fname if fname != op.name.rstrip("_") else None
        fname += "_"
    body = _call_line(op, kind, inputs, params, entry)
    if "*_more" in parts:       # x.squeeze(0, 1): the dims after the first gathered
        more = ["(dim, *_more)" if p == "dim" else p for p in params]
        body = f"    if _more:\n    {_call_line(op, kind, inputs, more, entry)}" + body
    body = _bool_checks(zip(pos, given_defaults)) + _bool_checks(
        (a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults)) + body
    if has_dtype:
        body = _dtype_check(body)
    parser_name = _parser_name(op, kind, fname)
    if needs_refining(parser_name, kind, own_name):
        body = _refining(body, parser_name, kind, own_name)
    # _op is a closure cell; _call is a global of the kind's shared namespace (GENERATED)
    src = (f"def _bind(_op):\n    def {fname}({', '.join(parts)}):\n"
           f"{textwrap.indent(prologue + body, '    ')}    return {fname}\n")
    namespace = _generated_globals(kind)
    exec(compile(src, f"<ember op {op.name}>", "exec"), namespace)
    fn = namespace.pop("_bind")(op)
    fn.__doc__ = op.forward.__doc__
    fn.__module__ = f"ember.{op.namespace}" if op.namespace and kind == "function" else "ember"
    fn.__qualname__ = fname if kind == "function" else f"Tensor.{fname}"
    fn._ember_op = op
    if aliases or shifted or required or "*_more" in parts:
        fn.__signature__ = public_signature(fn, aliases, ("_shifted", "_more"))
    if dimless is not None:    # (_NODIM shown as PyTorch's defaults)
        sig = inspect.signature(fn)
        fn.__signature__ = sig.replace(parameters=[
            p.replace(default=False if p.name == "keepdim" else None) if p.default is _NODIM else p
            for p in sig.parameters.values()])
    if kind == "function" and _checks_all(op):     # (out=_UNSET shown as PyTorch's None)
        sig = inspect.signature(fn)
        fn.__signature__ = sig.replace(parameters=[
            p.replace(default=None) if p.name == "out" else p for p in sig.parameters.values()])
    ENTRY_KINDS[fn.__code__] = kind
    ENTRY_FUNCTIONS[fn.__code__] = fn
    return fn


# NOTE [Reductions without a dim]: PyTorch declares sum, mean and prod twice: without a dim
# (sum(input, *, dtype)) and with one (sum(input, dim, keepdim=False, *, dtype, out)). So a
# keepdim (even False) without a dim matches neither (nor does an out=, which ember still
# takes: its OpInfo out= tests reduce whole tensors); prod's dim is an
# int, so its dim=None does not either (sum's dim=None is the second form), nor squeeze's
# (squeeze(), squeeze(int dim), squeeze(int[] dim)). Their entry
# points default dim and keepdim to _NODIM, telling "not given" from None: a call pays one
# or two identity tests. name -> (whether out= needs a dim, whether dim=None is refused)
_DIMLESS = {"sum": (False, False), "mean": (False, False), "prod": (False, True),
            "squeeze": (False, True)}
_NODIM = object()


def _dimless_prologue(fname, dimless, has_out):
    """The code of an entry point of ``_DIMLESS`` that refuses what no overload takes."""
    out_needs_dim, refuse_none = dimless
    if fname.rstrip("_") == "squeeze":      # (no keepdim, no out=)
        return (f"    if dim is _NODIM:\n        dim = None\n"
                f"    elif dim is None:\n        _refuse_dimless('{fname}', _NODIM, None)\n")
    out = " or out is not None" if has_out and out_needs_dim else ""
    code = (f"    if dim is _NODIM:\n"
            f"        if keepdim is not _NODIM{out}:\n"
            f"            _refuse_dimless('{fname}', keepdim)\n"
            f"        dim = None\n"
            f"        keepdim = False\n"
            f"    else:\n")
    if refuse_none:
        code += f"        if dim is None:\n            _refuse_dimless('{fname}', keepdim, None)\n"
    return code + ("        if keepdim is _NODIM:\n"
                   "            keepdim = False\n")


def _refuse_dimless(fname, keepdim, dim=_NODIM):
    """PyTorch's TypeError for a call of a ``_DIMLESS`` op no overload takes: a ``dim`` of
    None is no int (an "invalid combination" given alone)."""
    from ember.ops._dims import invalid_combination
    if dim is None:
        from ember.ops._reduce import _refuse_dim
        if keepdim is not _NODIM:       # (an int's error beside a keepdim)
            raise TypeError(f"{fname}(): argument 'dim' must be int, not NoneType")
        _refuse_dim(fname, dim, True)
    given = tuple(v for v in (dim, keepdim) if v is not _NODIM)
    raise invalid_combination(fname, given)


def _call_line(op, kind, inputs, params, entry=None):
    """The generated entry point's call of the dispatcher, with ``params`` (code) for the
    op's parameters; an in-place entry named otherwise than its op (an alias's, ``greater_``)
    passes its ``entry`` name on, for PyTorch's messages that name the call."""
    call_args = f"({', '.join(inputs)},), ({''.join(p + ', ' for p in params)})"
    if kind == "inplace":
        named = "" if entry is None else f", {entry!r}"
        return f"    return _call_inplace(_op, {call_args}{named})\n"
    out = "out" if kind == "function" and op.supports_out else "None"
    if out == "out" and _checks_all(op):
        out = "None if out is _UNSET else out"
    return f"    return _call(_op, {call_args}, {out})\n"


def _checks_all(op):
    """Whether the op's ``out=`` check reads all its inputs (where's): PyTorch's parser
    refuses numbers with ``out=`` passed at all, None too, so the default tells None from
    not passed."""
    return getattr(op.out_prepare, "all_inputs", False)


# The methods PyTorch's parser lets take their dims as varargs (x.squeeze(0, 1)): its rule
# is a method whose one positional parameter is an int list; these also take a single int,
# which stays an int (x.squeeze(0) is not x.squeeze((0,)): its node is SqueezeBackward1)
_VARARG_DIMS = frozenset(("squeeze", "count_nonzero"))


# the bool parameters PyTorch's parser refuses any other type for, which NumPy would take
_STRICT_BOOLS = frozenset(("keepdim", "largest", "sorted", "right", "out_int32", "upper",
                           "return_inverse", "return_counts", "stable", "full_matrices",
                           "left", "unitriangular", "check_errors", "hermitian", "pivot",
                           "adjoint", "transpose", "non_blocking", "wrap", "some", "compute_uv",
                           "descending", "equal_nan", "assume_unique", "invert", "include_self",
                           "accumulate", "sparse_grad", "unpack_data", "unpack_pivots"))


def _bool_checks(params):
    """Code refusing what is not a bool for the parameters of ``_STRICT_BOOLS`` among
    ``params`` ((name, default) pairs) whose default is a bool or None (the default, the
    usual value, is tested first: one identity test a call for it), or no default."""
    code = ""
    for name, default in params:
        if name in _STRICT_BOOLS and default is None:
            code += (f"    if {name} is not True and {name} is not False:\n"
                     f"        _refuse_bool('{name}', {name})\n")
        if name not in _STRICT_BOOLS or not isinstance(default, ast.Constant):
            continue
        if type(default.value) is bool:
            code += (f"    if {name} is not {default.value} and {name} is not "
                     f"{not default.value}:\n        _refuse_bool('{name}', {name})\n")
        elif default.value is None:
            code += (f"    if {name} is not None and {name} is not False and {name} is not "
                     f"True:\n        _refuse_bool('{name}', {name})\n")
    return code


# PyTorch's parser reads Python's bool, int, float and complex as dtypes (``x.sum(dtype=float)``
# is float64); a call without ``dtype`` pays one identity test
_PYTHON_DTYPE = ("    if dtype is not None and dtype.__class__ is type:\n"
                 "        dtype = _PYTHON_DTYPES.get(dtype, dtype)\n")


def _dtype_check(body):
    """``body`` inside a ``try`` that turns the AttributeError a ``dtype`` that is no dtype
    causes into PyTorch's TypeError (a ``try`` costs a call that raises nothing)."""
    return (f"    try:\n{textwrap.indent(body, '    ')}"
            f"    except AttributeError:\n"
            f"        _refuse_dtype(dtype)\n"
            f"        raise\n")


def _parser_name(op, kind, fname):
    """The name PyTorch's parser gives the entry point ``fname``: ``linalg_norm`` for
    ``ember.linalg.norm``."""
    if kind == "function" and op.namespace in ("linalg", "special", "fft"):
        return f"{op.namespace}_{fname}"
    return fname


def _refining(body, fname, kind, op_name):
    """``body`` inside a ``try`` that rewords its TypeErrors as PyTorch's parser words them
    for ``fname`` (see NOTE [Overloaded signatures in TypeErrors]; a ``try`` costs a call
    that raises nothing)."""
    return (f"    try:\n{textwrap.indent(body, '    ')}"
            f"    except TypeError as _error:\n"
            f"        _refine_type_error(_error, '{fname}', '{kind}', '{op_name}')\n"
            f"        raise\n")


def _out_prologue(op):
    """Code that lets ``out=`` set the op's input and ``dtype=`` before the call; it runs only
    when ``out`` is given, so calls without it cost nothing more."""
    x = op.input_names[0]
    dtype = "dtype" if "dtype" in op.param_names else None
    if getattr(op.out_prepare, "with_params", False):   # (checks them and the parameters)
        return (f"    if out is not None:\n"
                f"        _op.out_prepare(({', '.join(op.input_names)},), "
                f"({''.join(p + ', ' for p in op.param_names)}), out)\n")
    if _checks_all(op):    # (only checks them: where)
        return (f"    if out is not _UNSET:\n"
                f"        _op.out_prepare(({', '.join(op.input_names)},), {dtype}, out)\n")
    return (f"    if out is not None:\n"
            f"        {x}, {dtype or '_'} = _op.out_prepare({x}, {dtype}, out)\n")


GENERATED = {}      # kind -> the globals all generated functions of that kind share
# the code of each public entry point into ``call`` -> its kind ("function", "method",
# "inplace", "operator", "operator_inplace"): how an override learns which entry a call came
# through (see NOTE [Entry points from frames] in ember/overrides/_entries.py)
ENTRY_KINDS = {}
ENTRY_FUNCTIONS = {}    # the same codes -> their functions (error messages read defaults)


def _generated_globals(kind):
    """The namespace the generated functions of ``kind`` run in: ember.overrides swaps its
    ``_call`` / ``_call_inplace`` while a torch function mode is active (none: no cost)."""
    namespace = GENERATED.get(kind)
    if namespace is None:
        from ember.ops._inplace import call_inplace
        namespace = GENERATED[kind] = {
            "_call": call, "_call_inplace": call_inplace, "_method_varargs": method_varargs,
            "_UNSET": _UNSET, "_MISSING": _MISSING, "_alias_arg": alias_arg,
            "_missing_arg": missing_arg, "_refine_type_error": refine_type_error,
            "_refuse_bool": refuse_bool, "_refuse_dtype": refuse_dtype,
            "_PYTHON_DTYPES": PYTHON_DTYPES, "_scalar_first": scalar_first,
            "_NODIM": _NODIM, "_refuse_dimless": _refuse_dimless}
    return namespace


_UNSET = UNSET             # the keyword form was not used
_MISSING = MISSING         # the parameter has no default


def method_varargs(args, keyword, default, fname, name):
    """The value of a method parameter given as varargs, as a sequence, or by keyword."""
    if args:
        if keyword is not _UNSET:
            raise TypeError(f"{fname}() got multiple values for argument '{name}'")
        first = args[0]
        if len(args) == 1 and isinstance(first, (tuple, list)):
            return tuple(first)
        if type(first) is int or is_index(first):
            return args
        if len(args) == 1:
            return first        # not a size: the op names its type in its TypeError
        # PyTorch gathers varargs only after an int: x.permute("a", 0)
        raise TypeError(f"{fname}() takes 1 positional argument but {len(args)} were given")
    if keyword is not _UNSET:
        return keyword
    if default is _MISSING:         # (PyTorch's words: "arguments", double quotes)
        raise TypeError(f'{fname}() missing 1 required positional arguments: "{name}"')
    return default


def varargs(args):
    """``x.view(2, 3)`` and ``x.view((2, 3))`` both mean shape (2, 3)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args
