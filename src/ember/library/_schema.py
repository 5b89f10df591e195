"""Operator schemas in PyTorch's syntax: ``mylib::foo.out(Tensor x, *, Tensor(a!) out) ->
Tensor(a!)``. ``parse_schema`` reads one (with PyTorch's error wording for the usual
mistakes); ``FunctionSchema.bind`` checks a call's arguments against it, as the dispatcher
does before any kernel runs."""

import math
import numbers
import re

from ember._tensor import Tensor

__all__ = ["Argument", "FunctionSchema", "Return", "parse_schema", "parse_name"]

_NO_DEFAULT = object()
BASE_TYPES = ("Tensor", "int", "SymInt", "float", "SymFloat", "bool", "SymBool", "str",
              "Scalar", "ScalarType", "Device", "Layout", "MemoryFormat", "Generator",
              "Dimname", "Storage", "Stream", "complex", "Any")
# PyTorch prints a ScalarType default as its enum number
SCALAR_TYPE_NUMBERS = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5,
                       "float32": 6, "float64": 7, "complex64": 9, "complex128": 10,
                       "bool": 11, "bfloat16": 15, "float8_e5m2": 23, "float8_e4m3fn": 24,
                       "uint16": 27, "uint32": 28, "uint64": 29}
_TOKEN = re.compile(r"\s*(?:(?P<arrow>->)|(?P<number>\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+)"
                    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)|(?P<string>'[^']*'|\"[^\"]*\")"
                    r"|(?P<char>\S))")


class _Tokens:
    """The schema text as PyTorch's lexer cuts it: kinds ident, number, string, arrow, or
    the character itself; ``eof`` at the end."""

    def __init__(self, text):
        self.text = text
        self.items = []
        for m in _TOKEN.finditer(text):
            kind = m.lastgroup
            value = m.group(kind)
            self.items.append((value if kind == "char" else kind, value, m.start(kind)))
        self.items.append(("eof", "", len(text)))
        self.i = 0

    def peek(self, ahead=0):
        """The token ``ahead`` places on: (kind, text, offset)."""
        return self.items[min(self.i + ahead, len(self.items) - 1)]

    def next(self):
        """Consume a token."""
        item = self.peek()
        self.i += 1
        return item

    def accept(self, kind):
        """Consume a token of ``kind`` if one is next; it, or None."""
        if self.peek()[0] == kind:
            return self.next()
        return None

    def expect(self, kind):
        """Consume a token of ``kind``, or raise PyTorch's parse error."""
        if self.peek()[0] != kind:
            self.fail(f"expected {kind} but found '{self.peek()[0]}' here:")
        return self.next()

    def fail(self, message, at=None):
        """Raise ``message`` with the text and a marker under the token, as PyTorch."""
        kind, value, start = at or self.peek()
        if kind == "eof":
            raise RuntimeError(f"{message}\n{self.text}")
        raise RuntimeError(f"{message}\n{self.text}\n{' ' * start}{'~' * len(value)} "
                          f"<--- HERE\n")


class Argument:
    """One parameter of a schema: its type, name, default and alias annotation."""

    def __init__(self, name, base, suffix, alias=None, default=_NO_DEFAULT, default_text=None,
                 kwarg_only=False):
        self.name = name
        self.base = base                # "Tensor", "SymInt", ...
        self.suffix = suffix            # "", "?", "[]", "?[]", "[]?", "[2]"
        self.alias = alias              # "a!", "a0!", "a" or None
        self.default = default
        self.default_text = default_text
        self.kwarg_only = kwarg_only

    @property
    def type(self):
        """The type as the schema spells it, alias annotation included."""
        alias = f"({self.alias})" if self.alias else ""
        return f"{self.base}{alias}{self.suffix}"

    @property
    def is_write(self):
        """Whether the op may write to this argument (``Tensor(a!)``)."""
        return bool(self.alias) and self.alias.endswith("!")

    @property
    def has_default(self):
        """Whether the schema gives the argument a default."""
        return self.default is not _NO_DEFAULT

    @property
    def is_list(self):
        """Whether the argument is a list (``Tensor[]``, ``int[2]``)."""
        return "[" in self.suffix

    def __str__(self):
        text = f"{self.type} {self.name}"
        return text if self.default_text is None else f"{text}={self.default_text}"


class Return:
    """One result of a schema."""

    def __init__(self, base, suffix, alias=None, name=None):
        self.base, self.suffix, self.alias, self.name = base, suffix, alias, name

    @property
    def type(self):
        """The type as the schema spells it."""
        alias = f"({self.alias})" if self.alias else ""
        return f"{self.base}{alias}{self.suffix}"

    def __str__(self):
        return self.type if self.name is None else f"{self.type} {self.name}"


class FunctionSchema:
    """A parsed schema: ``name`` (with its namespace when given), ``overload_name``,
    ``arguments`` and ``returns``; ``str()`` prints it as PyTorch does."""

    def __init__(self, name, overload_name, arguments, returns, returns_tuple):
        self.name = name
        self.overload_name = overload_name
        self.arguments = arguments
        self.returns = returns
        self.returns_tuple = returns_tuple   # the result is a tuple, even of one value

    def with_name(self, name):
        """This schema under another (qualified) name."""
        return FunctionSchema(name, self.overload_name, self.arguments, self.returns,
                              self.returns_tuple)

    @property
    def is_mutable(self):
        """Whether the op writes to any of its arguments."""
        return any(a.is_write for a in self.arguments)

    def _returns_text(self):
        if self.returns_tuple and len(self.returns) == 1:
            return f"(({self.returns[0]}))"
        if len(self.returns) == 1 and not self.returns_tuple:
            return str(self.returns[0])
        return "(" + ", ".join(str(r) for r in self.returns) + ")"

    def __str__(self):
        parts, star = [], False
        for a in self.arguments:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(a))
        name = self.name + (f".{self.overload_name}" if self.overload_name else "")
        return f"{name}({', '.join(parts)}) -> {self._returns_text()}"

    def __repr__(self):
        return str(self)

    def bind(self, args, kwargs):
        """The call's value for each argument, in schema order (defaults filled in, numbers
        and devices converted as the dispatcher converts them); PyTorch's errors otherwise."""
        qualname = self.name
        positional = [a for a in self.arguments if not a.kwarg_only]
        given = len(args) + len(kwargs)
        if given > len(self.arguments):
            raise RuntimeError(f"{qualname}() expected at most {len(self.arguments)} "
                               f"argument(s) but received {given} argument(s). "
                               f"Declaration: {self}")
        if len(args) > len(positional):
            raise RuntimeError(f"{qualname}() takes {len(positional)} positional argument(s) "
                               f"but {len(args)} was/were given.  Declaration: {self}")
        values = []
        for i, arg in enumerate(self.arguments):
            if i < len(args):
                if arg.name in kwargs:
                    raise RuntimeError(f"{qualname}() got multiple values for argument "
                                       f"'{arg.name}'. Declaration: {self}")
                value = args[i]
            elif arg.name in kwargs:
                value = kwargs[arg.name]
            elif arg.has_default:
                values.append(arg.default)
                continue
            else:
                raise RuntimeError(f"{qualname}() is missing value for argument '{arg.name}'. "
                                   f"Declaration: {self}")
            values.append(self._convert(i, arg, value))
        known = {a.name for a in self.arguments}
        for key in kwargs:
            if key not in known:
                raise RuntimeError(f"Unknown keyword argument '{key}' for operator "
                                   f"'{qualname}'. Schema: {self}")
        return values

    def _convert(self, position, arg, value):
        try:
            return convert(arg.base, arg.suffix, value)
        except (TypeError, ValueError):
            pass
        message = (f"{self.name}() Expected a value of type '{type_name(arg)}' for argument "
                   f"'{arg.name}' but instead found type '{type(value).__name__}'.\n"
                   f"Position: {position}\nValue: {value!r}\nDeclaration: {self}")
        if arg.base == "Tensor" and not arg.is_list:
            message += f"\nCast error details: Unable to cast {value!r} to Tensor"
        raise RuntimeError(message)


# --- values ------------------------------------------------------------------------------------

_PYTHON_NAMES = {"Tensor": "Tensor", "int": "int", "SymInt": "int", "float": "float",
                 "SymFloat": "float", "bool": "bool", "SymBool": "bool", "str": "str",
                 "Scalar": "number", "ScalarType": "int", "Layout": "int",
                 "MemoryFormat": "int", "Device": "Device", "Generator": "Generator",
                 "complex": "complex"}


def type_name(arg):
    """The argument's type as PyTorch's cast errors name it (``Optional[List[int]]``)."""
    name = _PYTHON_NAMES.get(arg.base, arg.base)
    for mark in re.findall(r"\?|\[\d*\]", arg.suffix):
        name = f"Optional[{name}]" if mark == "?" else f"List[{name}]"
    return name


def _scalar_of(value):
    """A one-element tensor's Python number, else the value itself."""
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise TypeError("not a scalar")
        return value.item()
    return value


def _convert_one(base, value):
    if base == "Tensor":
        if not isinstance(value, Tensor):
            raise TypeError
        return value
    if base in ("int", "SymInt"):
        value = _scalar_of(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        raise TypeError
    if base in ("float", "SymFloat"):
        value = _scalar_of(value)
        if isinstance(value, numbers.Real):
            return float(value)
        raise TypeError
    if base in ("bool", "SymBool"):
        value = _scalar_of(value)
        if isinstance(value, numbers.Integral):
            return bool(value)
        raise TypeError
    if base == "str":
        if not isinstance(value, str):
            raise TypeError
        return value
    if base == "Scalar":
        value = _scalar_of(value)
        if isinstance(value, numbers.Number):
            return value
        raise TypeError
    if base == "ScalarType":
        from ember._dtype import dtype
        if not isinstance(value, dtype):
            raise TypeError
        return value
    if base == "Device":
        from ember._device import device
        if not isinstance(value, (str, device)):
            raise TypeError
        return device(value)
    return value


def convert(base, suffix, value):
    """``value`` checked (and converted) for a parameter of type ``base`` + ``suffix``."""
    if value is None and suffix.endswith("?"):
        return None
    inner = suffix[:-1] if suffix.endswith("?") else suffix
    if inner.startswith("?"):           # Tensor?[]: elements may be None
        inner = inner[1:]
        element_optional = True
    else:
        element_optional = False
    if inner.startswith("["):
        if not isinstance(value, (list, tuple)):
            raise TypeError
        return [None if v is None and element_optional else _convert_one(base, v)
                for v in value]
    if element_optional and value is None:
        return None
    return _convert_one(base, value)


def format_float(value):
    """A float as PyTorch prints a schema default: 17 significant digits, ``1.`` for 1.0."""
    if math.isinf(value) or math.isnan(value):
        return repr(value)
    text = "%.17g" % value
    if text == "-0":
        text = "0"
    return text if any(c in text for c in ".e") else text + "."


# --- parsing -----------------------------------------------------------------------------------

def parse_name(tokens):
    """``[ns::]name[.overload]`` from the tokens: (qualified name, overload name)."""
    name = tokens.expect("ident")[1]
    if tokens.peek()[0] == ":" and tokens.peek(1)[0] == ":":
        tokens.next()
        tokens.next()
        name = f"{name}::{tokens.expect('ident')[1]}"
    overload = ""
    if tokens.accept("."):
        overload = tokens.expect("ident")[1]
    return name, overload


def parse_schema(text):
    """A ``FunctionSchema`` from PyTorch's schema syntax, or PyTorch's parse error."""
    tokens = _Tokens(text)
    name, overload = parse_name(tokens)
    if tokens.peek()[0] != "(":
        tokens.expect("eof")
    tokens.expect("(")
    arguments, kwarg_only = [], False
    if not tokens.accept(")"):
        while True:
            if tokens.accept("*"):
                kwarg_only = True
            else:
                arguments.append(_parse_argument(tokens, kwarg_only))
            if not tokens.accept(","):
                tokens.expect(")")
                break
    tokens.expect("arrow")
    returns, as_tuple = _parse_returns(tokens)
    seen_default = False
    for a in arguments:
        if a.has_default:
            seen_default = True
        elif seen_default and not a.kwarg_only:
            raise RuntimeError(f"Non-default positional argument follows default argument. "
                              f"Parameter {a.name} in {text}")
    return FunctionSchema(name, overload, arguments, returns, as_tuple)


def _parse_type(tokens):
    """(base, alias, suffix) of one type."""
    at = tokens.peek()
    base = tokens.expect("ident")[1]
    if base not in BASE_TYPES:
        tokens.fail("\nunknown type specifier. Common valid schema types include Tensor, "
                    "SymInt, int, float, bool, Scalar; for a full list, please see "
                    "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/"
                    "README.md#func :", at)
    alias = None
    if tokens.accept("("):
        alias = tokens.expect("ident")[1]
        if tokens.accept("!"):
            alias += "!"
        tokens.expect(")")
    elif tokens.peek()[0] == "!":
        tokens.next()
        alias = "$0!"
    suffix = ""
    while True:
        if tokens.accept("?"):
            suffix += "?"
        elif tokens.accept("["):
            size = tokens.accept("number")
            tokens.expect("]")
            suffix += f"[{size[1] if size else ''}]"
        else:
            return base, alias, suffix


def _parse_argument(tokens, kwarg_only):
    base, alias, suffix = _parse_type(tokens)
    name = tokens.expect("ident")[1]
    if not tokens.accept("="):
        return Argument(name, base, suffix, alias, kwarg_only=kwarg_only)
    value, text = _parse_default(tokens, base, suffix)
    return Argument(name, base, suffix, alias, value, text, kwarg_only)


def _parse_default(tokens, base, suffix):
    """(Python value, text as PyTorch prints it) of a default."""
    kind, value, _ = tokens.peek()
    if kind == "[":
        tokens.next()
        items = []
        while tokens.peek()[0] != "]":
            if items:
                tokens.expect(",")
            items.append(_parse_default(tokens, base, "")[0])
        tokens.next()
        return items, "[" + ", ".join(_text(base, v) for v in items) + "]"
    if kind == "string":
        tokens.next()
        text = value[1:-1]
        return text, (text if base == "Device" else f'"{text}"')
    if kind == "ident":
        tokens.next()
        if value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[value], value
        if base in ("ScalarType", "Layout", "MemoryFormat"):
            import ember
            found = getattr(ember, value, value)
            name = str(found).split(".")[-1]
            return found, str(SCALAR_TYPE_NUMBERS.get(name, value)) if base == "ScalarType" \
                else value
        tokens.fail("\ninvalid numeric default value:")
    sign = "-" if tokens.accept("-") else ""
    number = tokens.expect("number")[1]
    literal = sign + number
    if base in ("float", "SymFloat") or any(c in number for c in ".eE"):
        value = float(literal)
        return value, format_float(value)
    return int(literal), literal


def _text(base, value):
    if isinstance(value, float):
        return format_float(value)
    return str(value)


def _parse_returns(tokens):
    """The returns and whether they form a tuple."""
    if not tokens.accept("("):
        base, alias, suffix = _parse_type(tokens)
        name = tokens.accept("ident")
        return [Return(base, suffix, alias, name and name[1])], False
    returns = []
    as_tuple = False
    while tokens.peek()[0] != ")":
        if returns:
            tokens.expect(",")
        if tokens.peek()[0] == "(":           # ((Tensor)): a tuple of one
            inner, _ = _parse_returns(tokens)
            returns.extend(inner)
            as_tuple = True
            continue
        base, alias, suffix = _parse_type(tokens)
        name = tokens.accept("ident")
        returns.append(Return(base, suffix, alias, name and name[1]))
    tokens.expect(")")
    return returns, as_tuple or len(returns) != 1
