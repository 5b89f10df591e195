"""The weights-only unpickler: a small pickle interpreter that builds only plain containers,
numbers, strings, tensors and allow-listed globals, and never imports or runs anything else.

The standard unpickler would call whatever a file names (``os.system``, say); this one looks
every global up in an allow-list and refuses the rest with a message naming the global and
``ember.serialization.add_safe_globals``. It is a loop over opcodes with its own stack, so a
hostile or damaged file can only make it raise ``UnpicklingError`` (or a RuntimeError from a
tensor that does not fit its storage).
"""

import _compat_pickle
import pickle
import struct
from collections import Counter, OrderedDict

from ember._tensor import Tensor

UnpicklingError = pickle.UnpicklingError

_PREFIX = (
    "Weights only load failed. Re-running `ember.load` with `weights_only` set to `False` will "
    "likely succeed, but it can result in arbitrary code execution. Do it only if you got the "
    "file from a trusted source.\n")
_SUFFIX = ("\n\nCheck the documentation of ember.load to learn more about types accepted by "
           "default with weights_only.")
BLOCKED_MODULES = ("sys", "os", "posix", "nt", "subprocess", "builtins.eval", "shutil",
                   "socket", "importlib", "runpy", "pty", "ctypes", "code", "pickle")

_NEWOBJ_OK = (OrderedDict, Counter, set, frozenset, complex, bytearray)


def _fail(message):
    return UnpicklingError(_PREFIX + message + _SUFFIX)


def _rejected(module, name):
    full = f"{module}.{name}"
    blocked = next((m for m in BLOCKED_MODULES if full == m or module == m
                    or module.startswith(m + ".")), None)
    if blocked is not None:
        return _fail(f"Trying to load unsupported GLOBAL {full} whose module {module} is "
                     f"blocked.")
    return _fail(
        f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please use "
        f"`ember.serialization.add_safe_globals([{full}])` or the "
        f"`ember.serialization.safe_globals([{full}])` context manager to allowlist this "
        f"global if you trust this class/function.")


def _compat(module, name):
    # protocol-2 pickles written by Python 3 use Python 2 names (__builtin__.set)
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


_OP = {name: getattr(pickle, name)[0] for name in (
    "MARK", "STOP", "POP", "POP_MARK", "DUP", "FLOAT", "INT", "BININT", "BININT1", "LONG",
    "BININT2", "NONE", "PERSID", "BINPERSID", "REDUCE", "STRING", "BINSTRING",
    "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "APPEND", "BUILD", "GLOBAL", "DICT",
    "EMPTY_DICT", "APPENDS", "GET", "BINGET", "LIST", "EMPTY_LIST", "PUT", "BINPUT",
    "LONG_BINPUT", "SETITEM", "TUPLE", "EMPTY_TUPLE", "SETITEMS", "BINFLOAT", "PROTO",
    "NEWOBJ", "TUPLE1", "TUPLE2", "TUPLE3", "NEWTRUE", "NEWFALSE", "LONG1", "LONG4",
    "BINBYTES", "SHORT_BINBYTES", "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES8",
    "EMPTY_SET", "ADDITEMS", "FROZENSET", "STACK_GLOBAL", "MEMOIZE", "FRAME", "BYTEARRAY8",
    "LONG_BINGET")}
globals().update((f"_{k}", v) for k, v in _OP.items())


class WeightsUnpickler:
    """Unpickle ``file`` allowing only ``allowed`` globals ("module.name" -> object)."""

    def __init__(self, file, allowed, persistent_load):
        self._file = file
        self._allowed = allowed
        self._allowed_ids = {id(v) for v in allowed.values()}
        self._persistent_load = persistent_load

    def _read(self, n):
        data = self._file.read(n)
        if len(data) != n:
            raise _fail("the pickle data was truncated")
        return data

    def _readline(self):
        line = self._file.readline()
        if not line.endswith(b"\n"):
            raise _fail("the pickle data was truncated")
        return line[:-1]

    def _global(self, module, name):
        module, name = _compat(module, name)
        obj = self._allowed.get(f"{module}.{name}")
        if obj is None:
            from ember.serialization._rebuild import unsupported
            err = unsupported(module, name)
            raise err if err is not None else _rejected(module, name)
        return obj

    def load(self):
        """The unpickled object."""
        try:
            return self._load()
        except (UnpicklingError, RuntimeError):
            raise
        except (IndexError, KeyError, struct.error) as e:
            raise _fail(f"invalid pickle data ({type(e).__name__}: {e})") from e
        except Exception as e:                  # an allowed callable rejected its arguments
            raise _fail(f"{type(e).__name__}: {e}") from e

    def _load(self):
        read, readline = self._read, self._readline
        stack, metastack, memo = [], [], {}

        def pop_mark():
            nonlocal stack
            items = stack
            stack = metastack.pop()
            return items

        while True:
            op = read(1)[0]
            if op == _BINPUT:
                memo[read(1)[0]] = stack[-1]
            elif op == _BINGET:
                stack.append(memo[read(1)[0]])
            elif op == _MARK:
                metastack.append(stack)
                stack = []
            elif op == _BININT1:
                stack.append(read(1)[0])
            elif op == _BINUNICODE:
                stack.append(str(read(struct.unpack("<I", read(4))[0]), "utf-8"))
            elif op == _SHORT_BINUNICODE:
                stack.append(str(read(read(1)[0]), "utf-8"))
            elif op == _TUPLE:
                items = pop_mark()          # rebinds stack: append after
                stack.append(tuple(items))
            elif op == _EMPTY_TUPLE:
                stack.append(())
            elif op == _TUPLE1:
                stack[-1] = (stack[-1],)
            elif op == _TUPLE2:
                stack[-2:] = [tuple(stack[-2:])]
            elif op == _TUPLE3:
                stack[-3:] = [tuple(stack[-3:])]
            elif op in (_NEWTRUE, _NEWFALSE):
                stack.append(op == _NEWTRUE)
            elif op == _NONE:
                stack.append(None)
            elif op == _BINPERSID:
                stack.append(self._persistent_load(stack.pop()))
            elif op == _REDUCE:
                args = stack.pop()
                func = stack[-1]
                if id(func) not in self._allowed_ids or not callable(func):
                    raise _fail(f"Trying to call reduce for unrecognized function {func!r}")
                if not isinstance(args, tuple):
                    raise _fail("REDUCE arguments must be a tuple")
                stack[-1] = func(*args)
            elif op == _GLOBAL:
                module = str(readline(), "utf-8")
                stack.append(self._global(module, str(readline(), "utf-8")))
            elif op == _STACK_GLOBAL:
                name, module = stack.pop(), stack.pop()
                if type(name) is not str or type(module) is not str:
                    raise _fail("STACK_GLOBAL requires str")
                stack.append(self._global(module, name))
            elif op == _EMPTY_DICT:
                stack.append({})
            elif op == _EMPTY_LIST:
                stack.append([])
            elif op == _EMPTY_SET:
                stack.append(set())
            elif op == _SETITEM:
                value, key = stack.pop(), stack.pop()
                _setitem(stack[-1], key, value)
            elif op == _SETITEMS:
                items = pop_mark()
                target = stack[-1]
                for i in range(0, len(items) - 1, 2):
                    _setitem(target, items[i], items[i + 1])
            elif op == _APPEND:
                _extend(stack[-2], [stack.pop()])
            elif op == _APPENDS:
                items = pop_mark()
                _extend(stack[-1], items)
            elif op == _ADDITEMS:
                items = pop_mark()
                if type(stack[-1]) is not set:
                    raise _fail("ADDITEMS requires a set")
                stack[-1].update(items)
            elif op == _LIST:
                items = pop_mark()
                stack.append(items)
            elif op == _DICT:
                items = pop_mark()
                d = {}
                for i in range(0, len(items) - 1, 2):
                    d[items[i]] = items[i + 1]
                stack.append(d)
            elif op == _FROZENSET:
                items = pop_mark()
                stack.append(frozenset(items))
            elif op == _BUILD:
                state = stack.pop()
                _build(stack[-1], state, self._allowed_ids)
            elif op == _NEWOBJ:
                args = stack.pop()
                cls = stack.pop()
                if id(cls) not in self._allowed_ids or not isinstance(cls, type) or not (
                        issubclass(cls, _NEWOBJ_OK) or cls.__module__ not in ("builtins",)):
                    raise _fail(f"Trying to instantiate unrecognized class {cls!r}")
                if not isinstance(args, tuple):
                    raise _fail("NEWOBJ arguments must be a tuple")
                stack.append(cls.__new__(cls, *args))
            elif op == _BININT:
                stack.append(struct.unpack("<i", read(4))[0])
            elif op == _BININT2:
                stack.append(struct.unpack("<H", read(2))[0])
            elif op == _BINFLOAT:
                stack.append(struct.unpack(">d", read(8))[0])
            elif op == _LONG1:
                stack.append(int.from_bytes(read(read(1)[0]), "little", signed=True))
            elif op == _LONG4:
                n = struct.unpack("<i", read(4))[0]
                if n < 0:
                    raise _fail("LONG pickle has negative byte count")
                stack.append(int.from_bytes(read(n), "little", signed=True))
            elif op in (_INT, _LONG):
                text = readline().rstrip(b"L")
                value = {b"00": False, b"01": True}.get(text)
                stack.append(int(text) if value is None else value)
            elif op == _FLOAT:
                stack.append(float(readline()))
            elif op == _BINBYTES:
                stack.append(read(struct.unpack("<I", read(4))[0]))
            elif op == _SHORT_BINBYTES:
                stack.append(read(read(1)[0]))
            elif op == _BINBYTES8:
                stack.append(read(struct.unpack("<Q", read(8))[0]))
            elif op == _BYTEARRAY8:
                stack.append(bytearray(read(struct.unpack("<Q", read(8))[0])))
            elif op == _BINUNICODE8:
                stack.append(str(read(struct.unpack("<Q", read(8))[0]), "utf-8"))
            elif op == _UNICODE:
                stack.append(str(readline(), "raw-unicode-escape"))
            elif op in (_BINSTRING, _SHORT_BINSTRING):
                n = read(1)[0] if op == _SHORT_BINSTRING else struct.unpack("<i", read(4))[0]
                if n < 0:
                    raise _fail("BINSTRING pickle has negative byte count")
                stack.append(str(read(n), "ascii"))
            elif op == _LONG_BINPUT:
                memo[struct.unpack("<I", read(4))[0]] = stack[-1]
            elif op == _LONG_BINGET:
                stack.append(memo[struct.unpack("<I", read(4))[0]])
            elif op == _PUT:
                memo[int(readline())] = stack[-1]
            elif op == _GET:
                stack.append(memo[int(readline())])
            elif op == _MEMOIZE:
                memo[len(memo)] = stack[-1]
            elif op == _POP:
                if stack:
                    stack.pop()
                else:
                    pop_mark()
            elif op == _POP_MARK:
                pop_mark()
            elif op == _DUP:
                stack.append(stack[-1])
            elif op == _PROTO:
                if read(1)[0] > pickle.HIGHEST_PROTOCOL:
                    raise _fail("unsupported pickle protocol")
            elif op == _FRAME:
                read(8)
            elif op == _STOP:
                if len(stack) != 1 or metastack:
                    raise _fail("the pickle stack is not empty at STOP")
                return stack[0]
            else:
                raise _fail(f"Unsupported operand {op}")


def _setitem(target, key, value):
    if type(target) not in (dict, OrderedDict, Counter):
        raise _fail(f"Can only SETITEM on a dict, got {type(target).__name__}")
    target[key] = value


def _extend(target, items):
    if type(target) is not list:
        raise _fail(f"Can only APPEND to a list, got {type(target).__name__}")
    target.extend(items)


def _build(obj, state, allowed_ids):
    from ember.serialization._rebuild import _set_state
    cls = type(obj)
    if isinstance(obj, Tensor):
        _set_state(obj, state)          # attributes only, never Tensor's own fields
    elif cls in (OrderedDict, Counter) or (id(cls) in allowed_ids
                                            and cls.__module__ != "builtins"):
        setstate = getattr(cls, "__setstate__", None)
        if setstate is not None and setstate is not getattr(object, "__setstate__", None):
            obj.__setstate__(state)
            return
        if isinstance(state, tuple) and len(state) == 2:
            state, slots = state
            for key, value in (slots or {}).items():
                setattr(obj, key, value)
        if state:
            if not isinstance(state, dict):
                raise _fail(f"invalid state for {cls.__name__}")
            obj.__dict__.update(state)
    else:
        raise _fail(f"Can only build Tensor, Parameter, OrderedDict or types allowlisted via "
                    f"add_safe_globals, but got {cls}")
