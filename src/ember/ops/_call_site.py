"""How the public call being refused was made: which arguments came by keyword.

NOTE [Keyword arguments in TypeErrors]: PyTorch's parser words a bad argument passed by
keyword without its position ("sum(): argument 'dim' must be tuple of ints") and lists
keywords by name in its "invalid combination" message ("got (Tensor, dim=str)"). Python's
binding forgets how each argument came, and asking the entry points to remember would cost
every valid call. So only the error path looks: it finds the entry point's frame (a generated
function of the registry, or a hand-written public function) and reads the call that made it
from the caller's bytecode (``CALL`` with its keyword names), or from the ``args``/``kwargs``
of the guard frame that ember.overrides puts around hand-written functions. When neither
tells (a call from C, an unpacked ``f(*args, **kwargs)`` whose operands
ember.ops._unpacked_call cannot read back), the message keeps its positional wording.
"""

import dis
import sys
import types

from ember.ops._arg_aliases import _ALIASES, _OP_ALIASES
from ember.ops._unpacked_call import unpacked_call

__all__ = ["CallSite", "call_site", "call_shape", "PYTHON_METHODS"]

_ALIAS_OF = {}              # a parameter name -> the other names PyTorch takes for it
for _param, _alias in _ALIASES + tuple(p for pairs in _OP_ALIASES.values() for p in pairs):
    _ALIAS_OF.setdefault(_param, set()).add(_alias)


class CallSite:
    """The entry point's ``kind`` and ``frame``, the values passed by position (``self``
    included) and the names passed by keyword (None where the call cannot be read)."""

    __slots__ = ("kind", "frame", "positional", "keywords")

    def __init__(self, kind, frame, positional, keywords):
        self.kind, self.frame = kind, frame
        self.positional, self.keywords = positional, keywords

    @property
    def name(self):
        """The entry point's public name (no in-place underscore)."""
        return _name(self.frame, self.kind)

    @property
    def parser_name(self):
        """The name PyTorch's parser gives the entry point: ``linalg_cholesky`` for
        ``ember.linalg.cholesky``."""
        name = self.name
        if self.kind == "function":
            from ember.ops._entry_points import ENTRY_FUNCTIONS
            op = getattr(ENTRY_FUNCTIONS.get(self.frame.f_code), "_ember_op", None)
            namespace = getattr(op, "namespace", None)
            if namespace in ("linalg", "special", "fft"):
                return f"{namespace}_{name}"
        return name

    def argument(self, param):
        """(name, ``param``, position in the method form or None, kind) as PyTorch's parser
        words the argument ``param`` (see ``_dims._argument``), or None when the entry point
        has no such parameter."""
        code = self.frame.f_code
        if param not in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
            return None
        position = self.position(param)
        form = _python_form(self) if self.parser_name in _PYTHON_FUNCTIONS else None
        if form is None:
            return self.parser_name, param, position
        native, positional = form       # tensor first, then ``positional``, the rest by keyword
        position = positional.index(param) + 1 if param in positional else None
        return native, param, position, "function"

    def position(self, name):
        """The position of the parameter ``name`` in the method form (the tensor is 0), or
        None when the entry point has no such parameter."""
        code = self.frame.f_code
        params = code.co_varnames[:code.co_argcount]
        return params.index(name) if name in params else None

    @property
    def varargs(self):
        """Whether the entry point gathers extra positional arguments (``x.squeeze(0, 1)``)."""
        return bool(self.frame.f_code.co_flags & 0x04)      # CO_VARARGS

    def given_count(self):
        """How many arguments the call gave besides the tensor (None: unknown)."""
        if self.keywords is None:
            return None
        return len(self.positional) + len(self.keywords) - 1

    def passed_by_keyword(self, name):
        """Whether the argument ``name`` (or another name PyTorch takes for it) came by
        keyword."""
        if not self.keywords:
            return False
        return name in self.keywords or not _ALIAS_OF.get(name, set()).isdisjoint(self.keywords)

    def got(self):
        """PyTorch's list of the given argument types: ``Tensor, dim=str`` (after the tensor
        in a method); keywords last, in reverse order, each followed by ", " when no
        positional argument is listed (PyTorch's quirk)."""
        from ember.ops._dims import type_name
        values = self.positional[1:] if self.kind in ("method", "inplace") else self.positional
        names = [type_name(v) for v in values]
        keywords = [f"{k}={type_name(self.frame.f_locals[k])}" for k in reversed(self.keywords)]
        if names:
            return ", ".join(names + keywords)
        return "".join(k + ", " for k in keywords)


def call_site(kind=None):
    """The CallSite of the public entry point the running code was called through (the
    nearest on the stack), or None; ``kind`` overrides the one found."""
    found = _next_entry(sys._getframe(1))
    if found is None:
        return None
    outer = _next_entry(found[0].f_back)
    if outer is not None and outer[0].f_code in _native() and _name(*outer) == _name(*found):
        found = outer            # ember.cat, hand-written around the op cat, is native in torch
    frame, kind = found[0], kind or found[1]
    positional, keywords = _read_call(frame, kind)
    site = CallSite(kind, frame, positional, keywords)
    if keywords and (kind == "method" and site.name in PYTHON_METHODS
                     or kind == "function" and site.parser_name in _PYTHON_FUNCTIONS):
        site.keywords = ()      # PyTorch's Python method passes them on by position
    return site


def call_shape(op_name):
    """(how many values were passed by position, ``self`` included; the names passed by
    keyword) in the call of an entry point the registry generated for the op ``op_name``
    running on the stack, or None where it cannot be read. Quick enough for valid calls'
    paths: no code object is hashed on the way (hashing one reads all of it), and each call
    instruction is read once (a call's counts are in its code)."""
    filename, frame = f"<ember op {op_name}>", sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != filename:
        frame = frame.f_back
    if frame is None or frame.f_back is None:
        return None
    code, caller = frame.f_code, frame.f_back
    key = (id(code), id(caller.f_code), caller.f_lasti)
    known = _SHAPES.get(key)
    if known is not None and known[0] is code and known[1] is caller.f_code:
        return known[2]
    from ember.ops._entry_points import ENTRY_KINDS
    kind = ENTRY_KINDS.get(code)
    shape = None if kind is None else _shape_of(code, kind, _call_instruction(caller))
    if len(_SHAPES) >= 4096:        # (code made on the fly, exec'd in a loop, say)
        _SHAPES.clear()
    _SHAPES[key] = (code, caller.f_code, shape)
    return shape


_SHAPES = {}        # (id of the entry's code, id of the caller's, offset) -> codes, shape


def _shape_of(code, kind, read):
    """``call_shape``'s answer for the entry point of ``code`` called by the CALL ``read``."""
    if read is None:
        return None
    argc, keywords = read
    if not set(keywords) <= set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]):
        return None         # not the call that made the frame
    return argc - len(keywords) + (kind in ("method", "inplace")), keywords


# Tensor methods PyTorch writes in Python (torch/_tensor.py), which call the native function
# with every argument by position
PYTHON_METHODS = frozenset(("unflatten", "split", "norm", "unique", "unique_consecutive",
                             "stft", "istft", "lu"))


# functions (and their methods) PyTorch writes in Python, which call a native function under
# another name: how that one is called (see CallSite.argument)
_PYTHON_FUNCTIONS = frozenset(("norm", "unique", "unique_consecutive"))


def _python_form(site):
    """(the native function's name, the parameters it is given by position after the
    tensor) for the call ``site`` to a function of ``_PYTHON_FUNCTIONS``, or None."""
    local = site.frame.f_locals
    if site.name == "unique":
        return ("_unique2", ()) if local.get("dim") is None else ("unique_dim", ("dim",))
    if site.name == "unique_consecutive":
        return "unique_consecutive", ()
    if local.get("p") != "nuc":     # the nuclear norm calls linalg_matrix_norm
        return "linalg_vector_norm", ("p", "dim", "keepdim")
    return None


def _next_entry(frame):
    """(frame, kind) of the first public entry point from ``frame`` up, or None."""
    while frame is not None:
        kind = _entry_kind_of(frame)
        if kind is not None and not _is_private(_name(frame, kind)):
            return frame, kind
        frame = frame.f_back
    return None


def _name(frame, kind):
    """The public name of the entry point running in ``frame`` (no in-place underscore)."""
    code = frame.f_code
    name = _hand_written().get(code, (None, code.co_name))[1]
    return name[:-1] if kind == "inplace" else name


def _is_private(name):
    """Whether ``name`` is an internal op's (``_max_dim``): the public function that called
    it is the one the user called."""
    return name.startswith("_") and not name.startswith("__")


def _entry_kind_of(frame):
    from ember.ops._entry_points import ENTRY_KINDS
    kind = ENTRY_KINDS.get(frame.f_code)
    if kind is not None:
        return kind
    kind = _hand_written().get(frame.f_code, (None,))[0]
    if kind == "dual":          # ember.<name> and Tensor.<name>: its guard tells them apart
        return "function" if _is_guard(_past_forwarders(frame.f_back)) else "method"
    return kind


def _past_forwarders(frame):
    """``frame``, or the first frame above it that is not a wrapper in _FORWARDERS."""
    while frame is not None and frame.f_code in _FORWARDERS:
        frame = frame.f_back
    return frame


def _is_guard(frame):
    from ember._warn import HIDDEN
    return frame is not None and frame.f_code in HIDDEN and "kwargs" in frame.f_code.co_varnames


def _read_call(frame, kind):
    """(values passed by position, names passed by keyword) of the call that made ``frame``,
    or ((), None)."""
    caller = frame.f_back
    if caller is None:
        return (), None
    if _is_guard(_past_forwarders(caller)):
        caller = _past_forwarders(caller)
    if caller.f_code in _FORWARDERS or _is_guard(caller):
        local = caller.f_locals
        args = local.get("args", ())
        if "self" in local:     # a method's guard
            args = (local["self"], *args)
        return tuple(args), tuple(local.get("kwargs", {}))
    read = _call_instruction(caller, unpacked=True)
    if read is None:
        return (), None
    argc, keywords = read
    code = frame.f_code
    params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    if not set(keywords) <= set(params):    # not the call that made the frame
        return (), None
    count = argc - len(keywords) + (kind in ("method", "inplace"))
    count = min([count, code.co_argcount] + [params.index(k) for k in keywords])
    local = frame.f_locals
    if not _rest_untouched(code, params[count:], keywords, local):
        return (), None         # the CALL read was not the entry point's (functools.partial)
    values = [local[p] for p in params[:count]]
    if code.co_flags & 0x04:    # CO_VARARGS: the generated x.view(*_args, size=...)
        values += local[code.co_varnames[code.co_argcount + code.co_kwonlyargcount]]
    return tuple(values), keywords


def _rest_untouched(code, rest, keywords, local):
    """Whether every parameter in ``rest`` not passed by keyword (under its name or another
    PyTorch takes for it) holds its default, as it must if the call read is the one that made
    the frame (True when the defaults are not known)."""
    function = _function_of(code)
    if function is None:
        return True
    positional = function.__defaults__ or ()
    names = code.co_varnames[:code.co_argcount]
    defaults = dict(zip(names[len(names) - len(positional):], positional))
    defaults.update(function.__kwdefaults__ or {})
    from ember.ops._entry_points import _NODIM
    missing = object()
    return all(name in keywords or not _ALIAS_OF.get(name, set()).isdisjoint(keywords)
               or local.get(name, missing) is defaults.get(name, missing)
               # (or read as None / False already: NOTE [Reductions without a dim])
               or defaults.get(name) is _NODIM
               and local.get(name) is (None if name == "dim" else False)
               for name in rest)


def _function_of(code):
    from ember.ops._entry_points import ENTRY_FUNCTIONS
    function = ENTRY_FUNCTIONS.get(code)
    if function is None:
        _hand_written()
        function = _HAND_WRITTEN_FUNCTIONS.get(code)
    return function


def _call_instruction(frame, unpacked=False):
    """(argument count, keyword names) of the CALL ``frame`` is executing, or None; with
    ``unpacked``, also of a ``f(*args, **kwargs)`` call whose operands can be read (see
    ember.ops._unpacked_call: the error path's, as its answer may change between calls)."""
    instructions = [i for i in dis.get_instructions(frame.f_code) if i.opname != "PRECALL"]
    before = [i for i in instructions if i.offset <= frame.f_lasti]
    if unpacked and before and before[-1].opname == "CALL_FUNCTION_EX":
        return unpacked_call(frame, before)
    if len(before) < 2 or before[-1].opname not in ("CALL", "CALL_KW"):
        return None
    call, previous = before[-1], before[-2]
    keywords = ()
    if previous.opname == "KW_NAMES":           # Python 3.11, 3.12
        keywords = frame.f_code.co_consts[previous.arg]
    elif call.opname == "CALL_KW":              # Python 3.13 on
        keywords = previous.argval
        if not isinstance(keywords, tuple):
            return None
    return call.arg, tuple(keywords)


_HAND_WRITTEN = None        # code of each hand-written public function -> (kind, name)
_HAND_WRITTEN_FUNCTIONS = {}    # and -> the function
# the codes of wrappers ``fn(*args, **kwargs)`` around hand-written functions (marked
# ``_ember_forwards``), whose frames hold the call as given
_FORWARDERS = set()
_NATIVE = None              # the codes of those PyTorch writes in C++ (its parser's words)


def _native():
    global _NATIVE
    if _NATIVE is None:
        import ember
        from ember.overrides._guards import _NATIVE as native_names
        guards = (getattr(ember, n, None) for n in native_names[""])
        _NATIVE = {g.__wrapped__.__code__ for g in guards if hasattr(g, "__wrapped__")}
    return _NATIVE


def _hand_written():
    global _HAND_WRITTEN
    if _HAND_WRITTEN is None:
        _HAND_WRITTEN = _collect_hand_written()
    return _HAND_WRITTEN


def _collect_hand_written():
    """The hand-written public functions' codes, with their kinds, "method" (Tensor's only),
    "function", or "dual" (one function both, behind a guard in its namespace), and names."""
    from ember.overrides._catalog import NAMESPACES, namespace_object
    kinds, names = {}, {}
    for namespace in NAMESPACES:
        is_method = namespace == "Tensor"
        for value in list(vars(namespace_object(namespace)).values()):
            guarded = getattr(value, "_ember_guarded", False)
            value = getattr(value, "__wrapped__", value) if guarded else value
            while getattr(value, "_ember_forwards", False):     # wrappers passing on the call
                _FORWARDERS.add(value.__code__)
                value = value.__wrapped__
            if not isinstance(value, types.FunctionType) or \
                    not value.__module__.startswith("ember"):
                continue
            kind = "method" if is_method else ("guarded" if guarded else "function")
            _HAND_WRITTEN_FUNCTIONS.setdefault(value.__code__, value)
            if names.setdefault(value.__code__, value.__name__) != value.__name__:
                names[value.__code__] = value.__code__.co_name    # closures sharing a code
            previous = kinds.setdefault(value.__code__, kind)
            if previous != kind:
                kinds[value.__code__] = "dual" if "guarded" in (previous, kind) else "function"
    return {code: ("function" if kind == "guarded" else kind, names[code])
            for code, kind in kinds.items()}
