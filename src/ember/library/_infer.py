"""``infer_schema``: a schema string from a type-annotated function, as PyTorch writes it."""

import collections.abc
import inspect
import types
import typing

from ember._device import device as _device
from ember._dtype import dtype as _dtype
from ember._tensor import Tensor

__all__ = ["infer_schema"]

_ELEMENTS = {Tensor: "Tensor", int: "SymInt", float: "float", bool: "bool", str: "str",
             _dtype: "ScalarType", _device: "Device"}
_NUMBER = frozenset((int, float, bool))
_SEQUENCES = (list, collections.abc.Sequence)
# the types that may also be Optional, and the lists that exist (``str`` has none)
_MAY_BE_OPTIONAL = {"Tensor", "SymInt", "float", "bool", "str", "Scalar", "ScalarType",
                    "Device", "SymInt[]", "float[]", "bool[]"}
_LISTS = {"Tensor", "Tensor?", "SymInt", "float", "bool", "Scalar"}
_RETURNS = {"Tensor", "Tensor[]", "SymInt", "float", "bool", "Scalar"}
VALID_PARAMETERS = ("Tensor, Optional[Tensor], Sequence[Tensor], Sequence[Optional[Tensor]], "
                    "int, float, bool (each also Optional or a Sequence, and a Sequence of "
                    "them Optional), str, Optional[str], Union[int, float, bool] (also Optional "
                    "or a Sequence), dtype, Optional[dtype], device, Optional[device]")
VALID_RETURNS = "Tensor, list[Tensor], int, float, bool, Union[int, float, bool]"


def _union_members(annotation):
    """The members of a Union (``X | Y`` or ``typing.Union``), else None."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return None


def _schema_type(annotation, *, returns=False):
    """The schema type of an annotation, or None where PyTorch has none."""
    members = _union_members(annotation)
    optional = False
    if members is not None:
        rest = tuple(m for m in members if m is not type(None))
        optional = len(rest) < len(members)
        if frozenset(rest) == _NUMBER and len(rest) == 3:
            core = "Scalar"
        elif len(rest) == 1:
            core = _schema_type(rest[0])
        else:
            return None
    else:
        core = _plain_type(annotation)
    if core is None:
        return None
    if returns:
        return core if core in _RETURNS and not optional else None
    if optional:
        return core + "?" if core in _MAY_BE_OPTIONAL else None
    return core


def _plain_type(annotation):
    if annotation in _ELEMENTS:
        return _ELEMENTS[annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in _SEQUENCES and len(args) == 1:
        element = _schema_type(args[0])
        if element in _LISTS:
            return element + "[]" if element != "Tensor?" else "Tensor?[]"
    return None


def _resolve(annotation, fn):
    """A string annotation evaluated where the function was written."""
    if not isinstance(annotation, str):
        return annotation
    import ember
    scope = {"Tensor": Tensor, "torch": ember, "ember": ember, "typing": typing}
    scope.update(getattr(fn, "__globals__", {}))
    return eval(annotation, scope)          # noqa: S307  (an annotation, as typing does)


def _default_text(value):
    """A default as PyTorch writes it in a schema, or None where it has no spelling."""
    if value is None or isinstance(value, (bool, int, float)):
        return str(value)
    if isinstance(value, (str, _device)):
        return f'"{value}"'
    if isinstance(value, _dtype):
        return str(value).split(".")[-1]
    return None


def infer_schema(prototype_function, /, *, mutates_args, op_name=None, tags=()):
    """The schema string of a type-annotated function (``(Tensor x, SymInt n) -> Tensor``)."""
    signature = inspect.signature(prototype_function)

    def error(what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {signature})")

    if isinstance(mutates_args, str):
        if mutates_args != "unknown":
            raise ValueError("mutates_args must either be a sequence of the names of the "
                             "arguments that are mutated or the string 'unknown'. ")
        mutated = None
    else:
        mutated = set(mutates_args)
    parts, seen_kwarg_only, found = [], False, set()
    for index, (name, param) in enumerate(signature.parameters.items()):
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            error("We do not support positional-only args, varargs, or varkwargs.")
        if param.kind is param.KEYWORD_ONLY and not seen_kwarg_only:
            parts.append("*")
            seen_kwarg_only = True
        if param.annotation is inspect.Parameter.empty:
            error(f"Parameter {name} must have a type annotation.")
        try:
            annotation = _resolve(param.annotation, prototype_function)
        except Exception as exc:        # noqa: BLE001  (any failure to evaluate it)
            error(f"Unsupported type annotation {param.annotation}. It is not a type. "
                  f"({exc}). If you are using 'from __future__ import annotations', note "
                  f"that annotations are evaluated lazily as strings; make sure all types "
                  f"referenced in annotations are importable at module scope, not only "
                  f"inside a local function.")
        kind = _schema_type(annotation)
        if kind is None:
            error(f"Parameter {name} has unsupported type {annotation}. The valid types "
                  f"are: {VALID_PARAMETERS}.")
        writes = name in mutated if mutated is not None else kind.startswith("Tensor")
        if writes:
            if not kind.startswith("Tensor"):
                error(f"Parameter {name} is in mutable_args but only Tensors or collections "
                      f"of Tensors can be mutated")
            kind = f"Tensor(a{index}!){kind[len('Tensor'):]}"
            found.add(name)
        text = f"{kind} {name}"
        if param.default is not inspect.Parameter.empty:
            default = _default_text(param.default)
            if default is None:
                error(f"Parameter {name} has an unsupported default value type "
                      f"{type(param.default)}. Please file an issue on GitHub so we can "
                      f"prioritize this.")
            text += f"={default}"
        parts.append(text)
    if mutated is not None and mutated - found:
        error(f"{mutated - found} in mutates_args were not found in the custom op's "
              f"signature. mutates_args should contain the names of all args that the custom "
              f"op mutates, or just the string 'unknown' if you don't know.")
    returns = _returns_text(signature.return_annotation, prototype_function, error)
    return f"{op_name or ''}({', '.join(parts)}) -> {returns}"


def _returns_text(annotation, fn, error):
    if annotation is inspect.Signature.empty:
        error("No return type annotation was provided. Please add one.")
    annotation = _resolve(annotation, fn)
    if annotation is None or annotation is type(None):
        return "()"
    if typing.get_origin(annotation) is tuple:
        items = typing.get_args(annotation)
        texts = [_schema_type(a, returns=True) for a in items]
        if not items or Ellipsis in items or None in texts:
            error(f"Return has unsupported type {annotation}. The valid types are: "
                  f"{VALID_RETURNS}.")
        if len(texts) == 1:
            return f"(({texts[0]}))"
        return "(" + ", ".join(texts) + ")"
    text = _schema_type(annotation, returns=True)
    if text is None or (typing.get_origin(annotation) is collections.abc.Sequence):
        error(f"Return has unsupported type {annotation}. The valid types are: "
              f"{VALID_RETURNS}.")
    return text
