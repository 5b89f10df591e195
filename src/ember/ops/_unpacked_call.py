"""How a ``f(*args, **kwargs)`` call was made, read back from the caller's bytecode (for the
call-site reading of ember.ops._call_site, on the error path only).

NOTE [Unpacked calls]: ``f(*args, **kwargs)`` compiles to CALL_FUNCTION_EX, whose operands,
a tuple and a mapping, are gone from the stack by the time the error path looks. They are
read back from the instructions that built them where those are simple: a tuple constant, a
BUILD_TUPLE or a variable for the positional part; for the keywords, a chain of literal maps
(BUILD_MAP with constant keys, BUILD_CONST_KEY_MAP) and DICT_MERGEs of literal maps or of
variables (whose current mapping gives the names). Anything else keeps the positional
wording. Each operand is delimited by walking back over stack effects; jumps (a conditional
expression) give up. Building an error message must run none of the user's code: variables
and attributes are read from the frame's and the objects' dicts, through the built-in
descriptors (no property, ``__getattr__``, ``__getattribute__`` or ``__class__`` runs), and
tuples, lists and dicts are measured by the built-in methods (a subclass's ``__len__`` or
``keys`` does not run either).
"""

import dis
import types

_VARIABLE_LOADS = ("LOAD_FAST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLOSURE")


def unpacked_call(frame, before):
    """(argument count, keyword names) of the CALL_FUNCTION_EX ending ``before``, or None."""
    start = end = len(before) - 1           # the mapping is the operand just before the call
    keywords = []
    if before[-1].arg & 1:                  # (else only ``*args``)
        start = _operand_start(before, end)
        if start is None:
            return None
        keywords = _mapping_keys(frame, before, start, end)
    args_start = _operand_start(before, start)
    if keywords is None or args_start is None:
        return None
    count = _tuple_length(frame, before, args_start, start)
    if count is None:
        return None
    return count + len(keywords), tuple(keywords)


def _operand_start(instructions, end):
    """The index of the first instruction of the expression whose value is on top of the
    stack before ``instructions[end]``, or None."""
    depth, i = 0, end
    while i > 0:
        i -= 1
        ins = instructions[i]
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs or ins.opname in (
                "RESUME", "NOP", "CACHE", "KW_NAMES", "PRECALL"):
            if ins.opname in ("NOP", "CACHE", "KW_NAMES", "PRECALL"):
                continue
            return None
        try:
            depth += dis.stack_effect(ins.opcode, ins.arg if ins.opcode >= dis.HAVE_ARGUMENT
                                      else None)
        except ValueError:
            return None
        if depth == 1:
            return i
        if depth > 1:
            return None
    return None


def _mapping_keys(frame, instructions, start, end):
    """The keys of the mapping built by ``instructions[start:end]``, or None."""
    last = instructions[end - 1]
    if last.opname in _VARIABLE_LOADS + ("LOAD_ATTR",):
        value = _variable_chain(frame, instructions, start, end)
        keys = list(dict.keys(value)) if issubclass(type(value), dict) else None
        return keys if keys is not None and all(type(k) is str for k in keys) else None
    if last.opname in ("DICT_MERGE", "DICT_UPDATE") and last.arg == 1:
        inner = _operand_start(instructions, end - 1)
        if inner is None or inner <= start:
            return None
        merged = _mapping_keys(frame, instructions, inner, end - 1)
        base = _mapping_keys(frame, instructions, start, inner)
        return None if merged is None or base is None else base + merged
    if last.opname == "BUILD_CONST_KEY_MAP":
        keys = instructions[end - 2].argval if end - 2 >= start else None
        return list(keys) if isinstance(keys, tuple) else None
    if last.opname == "BUILD_MAP":
        keys, stop = [], end - 1
        for _ in range(last.arg):
            value_start = _operand_start(instructions, stop)
            key_start = None if value_start is None else _operand_start(instructions, value_start)
            if key_start is None or key_start < start or key_start + 1 != value_start or \
                    instructions[key_start].opname != "LOAD_CONST":
                return None
            keys.insert(0, instructions[key_start].argval)
            stop = key_start
        return keys if stop == start and all(isinstance(k, str) for k in keys) else None
    return None


def _tuple_length(frame, instructions, start, end):
    """The length of the positional tuple built by ``instructions[start:end]``, or None."""
    last = instructions[end - 1]
    if end - start == 1 and last.opname == "LOAD_CONST" and isinstance(last.argval, tuple):
        return len(last.argval)
    if last.opname in _VARIABLE_LOADS + ("LOAD_ATTR",):
        value = _variable_chain(frame, instructions, start, end)
        kind = next((k for k in (tuple, list) if issubclass(type(value), k)), None)
        return None if kind is None else kind.__len__(value)
    if last.opname in ("BUILD_TUPLE", "BUILD_LIST"):     # ``f(a, **d)``, ``f(*[a, b])``
        return last.arg
    if last.opname == "LIST_TO_TUPLE" and end - 2 >= start and \
            instructions[end - 2].opname == "BUILD_LIST" and \
            _operand_start(instructions, end - 1) == start:
        return instructions[end - 2].arg      # ``f(*[a, b])``
    return None


def _variable_chain(frame, instructions, start, end):
    """The value of ``name.attr.attr...`` loaded by ``instructions[start:end]`` (attributes
    read as ``_plain_attribute`` reads them: no property runs), or None."""
    first = instructions[start]
    if first.opname not in _VARIABLE_LOADS or any(
            i.opname != "LOAD_ATTR" for i in instructions[start + 1:end]):
        return None
    value = _variable(frame, first)
    for ins in instructions[start + 1:end]:
        value = _plain_attribute(value, ins.argval)
    return value


_CLASS_DICT = type.__dict__["__dict__"]      # (read through these: no metaclass code runs)
_CLASS_MRO = type.__dict__["__mro__"]


def _class_lookup(klass, name):
    """``name`` as a class attribute of ``klass`` (its own or a base's), or None."""
    for base in _CLASS_MRO.__get__(klass):
        namespace = _CLASS_DICT.__get__(base)
        if name in namespace:
            return namespace[name]
    return None


def _plain_attribute(obj, name):
    """``obj.name`` when it is stored as a plain value (in the instance's dict, or a class's
    that no descriptor guards), read without running any of the object's code; else None."""
    if obj is None:
        return None
    kind = type(obj)
    if issubclass(kind, type):                  # a class: its own and its bases' dicts
        found = _class_lookup(obj, name)
        return None if _is_descriptor(found) else found
    found = _class_lookup(kind, name)
    if _is_descriptor(found):
        return None
    instance_dict = _class_lookup(kind, "__dict__")
    if type(instance_dict) is types.GetSetDescriptorType:
        namespace = instance_dict.__get__(obj)
        if type(namespace) is dict and name in namespace:
            return namespace[name]
    return found


def _is_descriptor(value):
    return value is not None and _class_lookup(type(value), "__get__") is not None


def _variable(frame, instruction):
    """The current value of the variable ``instruction`` loads (None when unknown)."""
    name = instruction.argval
    if instruction.opname == "LOAD_GLOBAL":
        name = name if isinstance(name, str) else None
        return frame.f_globals.get(name, frame.f_builtins.get(name)) if name else None
    local = frame.f_locals
    return local.get(name) if type(local) is dict else None    # (a class body's: its own)
