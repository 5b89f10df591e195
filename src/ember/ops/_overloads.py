"""PyTorch's argument TypeErrors for the ops it declares with several signatures, and for the
other names of an op.

NOTE [Overloaded signatures in TypeErrors]: PyTorch's parser first counts the arguments given
(by position and keyword). When exactly one signature takes that many, it words the error
for that signature ("prod(): argument 'keepdim' (position 2) must be bool, not str");
otherwise it raises "received an invalid combination of arguments", listing every signature
(``_overload_table``). Under each signature whose item count (``*`` included; ``()`` counts
as one) equals the count of arguments given, it adds why it did not match: the keywords it
does not name (a parameter with a default is named by its default there, a quirk kept), or
else the arguments with the types it refuses marked ``!type!``. ember's entry points bind
their arguments with Python, so this is worked out on the error path only: a generated entry
point of such an op catches its TypeError and rewords it (``refine_type_error``).
"""

import os
import re

from ember.ops._call_site import call_site
from ember.ops._overload_table import (FORWARDED_OVERLOADS, FUNCTION_OVERLOADS, METHOD_OVERLOADS,
                                      SINGLE_METHODS)

__all__ = ["overloads", "refine_type_error", "listing", "site_listing", "needs_refining",
           "refuse_bool", "refuse_dtype", "forwarded_listing", "combination_error",
           "in_parser_words"]

# the parser's own errors, which the rewording may replace (not errors of the computation)
_PARSE_ERROR = re.compile(r"[\w.]+\(\)(: argument | received an invalid combination| got an "
                          r"unexpected keyword| got multiple values| missing \d| takes )")
_TENSOR_OUT = re.compile(r"(Tensor|tuple of Tensors) out = None$")
# where __torch_function__ handlers and modes are called from: their errors are not the parser's
_OVERRIDES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "overrides") + os.sep
_METHOD_FORMS = {}


def overloads(name, kind):
    """PyTorch's signatures of ``name`` called as ``kind`` ("function", "method" or
    "inplace", whose ``name`` ends in ``_``), or None when it declares a single one."""
    if kind == "function":
        return FUNCTION_OVERLOADS.get(name)
    if name not in _METHOD_FORMS:
        _METHOD_FORMS[name] = _method_forms(name)
    return _METHOD_FORMS[name]


def _method_forms(name):
    if name in METHOD_OVERLOADS:
        return METHOD_OVERLOADS[name]
    base = name[:-1] if name.endswith("_") else name
    functions = FUNCTION_OVERLOADS.get(base)
    if functions is None or base in SINGLE_METHODS:
        return None
    return tuple(form for form in map(_as_method, functions) if form is not None)


def _as_method(signature):
    """A function's signature as the method's: no tensor first, no ``out``, no bare ``*``
    last (None: the function's tensor is not first)."""
    items = signature.split(", ")
    if items[0] not in ("Tensor input", "Tensor self"):
        return None
    items = [item for item in items[1:] if not _TENSOR_OUT.match(item)]
    if items and items[-1] == "*":
        items.pop()
    return ", ".join(items)


def needs_refining(name, kind, op_name):
    """Whether the entry point ``name`` of ``kind`` for the op named ``op_name`` in that
    kind rewords its TypeErrors (PyTorch declares it several times, or it is another name
    of the op)."""
    return overloads(name, kind) is not None or _alias(name, kind, op_name) is not None


def _alias(name, kind, op_name):
    """The name the entry point ``name`` gives for ``op_name`` in a message (no in-place
    underscore), or None when it is the op's own."""
    base = name[:-1] if kind == "inplace" else name
    return None if base == op_name else base


def refine_type_error(error, name, kind, op_name):
    """Reword in place the TypeError ``error`` raised under the entry point ``name`` of
    ``kind`` as PyTorch's parser would (see NOTE [Overloaded signatures in TypeErrors]), and
    under the name the user called when ``op_name`` (the op's name in that kind) differs."""
    if _through_handlers(error):
        return
    message = str(error)
    if "failed to unpack" in message:
        # the parser had taken a signature: the message is that signature's, named
        if message.startswith("argument '"):
            error.args = (f"{_alias(name, kind, op_name) or op_name}(): {message}",)
        return
    parsing = _PARSE_ERROR.match(message) is not None
    signatures = overloads(name, kind)
    if not parsing and signatures is None:
        return
    alias = _alias(name, kind, op_name)
    if alias is not None and message.startswith(op_name + "("):
        message = alias + message[len(op_name):]
    if signatures is not None:
        message = _overloaded_message(message, parsing, name, kind, signatures)
    error.args = (message,)


def refuse_bool(param, value):
    """Raise PyTorch's TypeError for ``value``, not a bool, given to the bool parameter
    ``param`` of the entry point being called (worded on this error path only)."""
    _refuse(param, value, "bool")


def refuse_dtype(value):
    """Raise PyTorch's TypeError when ``value``, given as ``dtype``, is neither None nor a
    dtype (the entry points have read Python's ``float`` and the like as dtypes already);
    return otherwise."""
    from ember._dtype import dtype as DType
    if value is None or isinstance(value, DType):
        return
    _refuse("dtype", value, "ember.dtype")


def _refuse(param, value, type_text):
    from ember.ops._dims import _argument, type_name
    site = call_site()
    if site is None:
        raise TypeError(f"argument '{param}' must be {type_text}, not {type_name(value)}")
    message = f"{_argument(site.argument(param))} must be {type_text}, not {type_name(value)}"
    signatures = overloads(site.parser_name, site.kind)
    if signatures is not None:      # (ember.max's _max_dim: the public name's signatures)
        message = _overloaded_message(message, True, site.parser_name, site.kind, signatures)
    raise TypeError(message)


def in_parser_words(message):
    """``message``, the parser's error for the call being made, as PyTorch gives it for an
    entry point it declares several times: its "invalid combination" listing where not
    exactly one signature takes as many arguments (else, or when the call cannot be read,
    ``message`` itself)."""
    site = call_site()
    if site is None:
        return message
    signatures = overloads(site.parser_name, site.kind)
    if signatures is None:
        return message
    return _overloaded_message(message, True, site.parser_name, site.kind, signatures)


def _through_handlers(error):
    """Whether ``error`` came from (or through) a ``__torch_function__`` handler or mode."""
    frame = error.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_filename.startswith(_OVERRIDES):
            return True
        frame = frame.tb_next
    return False


def _overloaded_message(message, parsing, name, kind, signatures):
    """``message`` as PyTorch's parser gives it for ``signatures``; ``parsing``: whether
    ember's message is a parser's (else a later step refused a bad argument)."""
    site = call_site(kind)
    if site is None or site.keywords is None or message.startswith(
            ("expected Tensor as element", "expected tuple of")):
        return message      # (the last: the parser took a tensor-list signature, then unpacked)
    given = _given(site)
    if "received an invalid combination" in message:
        return message if "\n" in message else message + site_listing(signatures, site)
    count = len(given[0]) + len(given[1])
    plausible = [s for s in signatures if _least(s) <= count <= _most(s)]
    if len(plausible) == 1:     # the parser words the error for that signature
        return message if parsing else _refused(plausible[0], given, name) or message
    return (f"{name}() received an invalid combination of arguments - got ({site.got()}), "
            f"but expected one of:" + site_listing(signatures, site))


def combination_error(name, args, kwargs, signatures=None):
    """PyTorch's "invalid combination" TypeError for ``name`` called with ``args`` (a
    method's without the tensor) and ``kwargs`` (in the order passed), listing
    ``signatures`` (by default the table's for the function ``name``) with why those taking
    as many arguments refused them. For hand-written entry points that take ``**kwargs``,
    whose calls ``call_site`` cannot read."""
    from ember.ops._dims import type_name
    signatures = FUNCTION_OVERLOADS[name] if signatures is None else signatures
    names = [type_name(v) for v in args]
    keywords = [f"{k}={type_name(v)}" for k, v in reversed(kwargs.items())]
    got = ", ".join(names + keywords) if names else "".join(k + ", " for k in keywords)
    lines = listing(signatures, (tuple(args), dict(kwargs)), tuple(kwargs))
    return TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                     f"but expected one of:\n{lines}")


def site_listing(signatures, site):
    """The lines after "expected one of:" for the call ``site`` (a CallSite whose keywords
    are known)."""
    return "\n" + listing(signatures, _given(site), site.keywords)


def forwarded_listing(name, given):
    """The lines after "expected one of:" for the native function ``name`` that PyTorch's
    Python method calls with the tensor and ``given`` by position ("" when not known)."""
    signatures = FORWARDED_OVERLOADS.get(name)
    if signatures is None:
        return ""
    from ember._tensor import Tensor
    placeholder = Tensor.__new__(Tensor)       # only its type is read
    return "\n" + listing(signatures, ((placeholder, *given), {}), ())


def _given(site):
    """(values passed by position, {name: value passed by keyword}) of the call, the tensor
    of a method left out."""
    values = site.positional[1:] if site.kind in ("method", "inplace") else site.positional
    return tuple(values), {k: site.frame.f_locals.get(k) for k in site.keywords}


def _items(signature):
    return [item for item in signature.split(", ") if item not in ("", "*")]


def _least(signature):
    return sum(" = " not in item for item in _items(signature))


def _most(signature):
    return len(_items(signature))


def listing(signatures, given, keywords):
    """PyTorch's list of ``signatures`` after "expected one of:", with why each that takes
    as many items as were ``given`` (positional values, {keyword: value}) did not match;
    ``keywords`` is the order the keywords were passed in."""
    lines = []
    for signature in signatures:
        lines.append(f" * ({signature})\n")
        items = signature.split(", ")
        if len(items) == len(given[0]) + len(given[1]):
            lines.append(f"      didn't match because {_mismatch(items, given, keywords)}\n")
    return "".join(lines)


def _mismatch(items, given, keywords):
    """Why the signature of ``items`` does not take the arguments ``given``."""
    names = [item.rsplit(" ", 1)[-1] for item in items]
    types = [item.rsplit(" ", 1)[0] if " " in item else "" for item in items]
    passed = list(reversed(keywords))
    unknown = [k for k in passed if k not in names]
    if unknown:
        return f"some of the keywords were incorrect: {', '.join(unknown)}"
    parts = [_marked(_described(v), _takes(t, v)) for v, t in zip(given[0], types)]
    named = [_marked(f"{k}={_described(given[1][k])}", _takes(types[names.index(k)],
                                                             given[1][k])) for k in passed]
    text = ", ".join(parts + named) if parts else "".join(k + ", " for k in named)
    return f"some of the arguments have invalid types: ({text})"


def _marked(text, fits):
    return text if fits else f"!{text}!"


def _described(value):
    """A value's type as the list of mismatches gives it: sequences with their items'."""
    from ember.ops._dims import type_name
    if isinstance(value, tuple):
        names = [type_name(v) for v in value]
        return f"tuple of ({', '.join(names)}{',' if len(names) == 1 else ''})"
    if isinstance(value, list):
        return f"list of [{', '.join(type_name(v) for v in value)}]"
    return type_name(value)


def _takes(type_text, value):
    """Whether the mismatch list counts ``value`` as of the type ``type_text`` (its check
    knows plain types only)."""
    from ember._tensor import Tensor
    if type_text == "Tensor":
        return isinstance(value, Tensor)
    if isinstance(value, bool):
        return type_text == "bool"
    if type_text == "int":
        return isinstance(value, int)
    if type_text == "float":
        return isinstance(value, (int, float))
    return type_text == "str" and isinstance(value, str)


def _refused(signature, given, name):
    """The parser's TypeError for the first argument ``given`` that the one signature
    taking as many refuses for its type, or None (only plain types are checked)."""
    from ember.ops._dims import type_name
    params = [item.split(" = ")[0].rsplit(" ", 1) for item in _items(signature)]
    nullable = {p[1] for p, item in zip(params, _items(signature)) if item.endswith("= None")}
    positional = signature.split(", *")[0].split(", ") if signature else []
    named = [(i, p, v) for i, (p, v) in enumerate(zip(params, given[0]))]
    named += [(None, p, given[1][p[1]]) for p in params if p[1] in given[1]]
    for index, (type_text, param), value in named:
        if index is not None and index >= len(positional):
            return None
        if value is None and param in nullable or _strictly(type_text, value) is not False:
            continue
        where = "" if index is None else f" (position {index + 1})"
        return f"{name}(): argument '{param}'{where} must be {type_text}, not {type_name(value)}"
    return None


def _strictly(type_text, value):
    """Whether the parser takes ``value`` for ``type_text`` (None: a type not checked)."""
    from ember._tensor import Tensor
    from ember.ops._dims import is_index
    if type_text == "bool":
        return isinstance(value, bool)
    if type_text == "int":
        return is_index(value)
    if type_text == "Tensor":
        return isinstance(value, Tensor)
    if type_text == "str":
        return isinstance(value, str)
    return None
