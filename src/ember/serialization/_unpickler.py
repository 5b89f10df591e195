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

# PyTorch 2.13's wording: a global that add_safe_globals could allow gets the two-options form
_RERUN = (
    "In PyTorch 2.6, we changed the default value of the `weights_only` argument in "
    "`torch.load` from `False` to `True`; `ember.load` has the same default. Re-running "
    "`ember.load` with `weights_only` set to `False` will likely succeed, but it can result in "
    "arbitrary code execution. Do it only if you got the file from a trusted source.")
_PREFIX = f"Weights only load failed. {_RERUN}\n\n\n"
_PREFIX_ALLOWABLE = (
    "Weights only load failed. This file can still be loaded, to do so you have two options, "
    "\x1b[1mdo those steps only if you trust the source of the checkpoint\x1b[0m. \n\t(1) "
    f"{_RERUN}\n\t(2) Alternatively, to load with `weights_only=True` please check the "
    "recommended steps in the following error message.\n\tWeightsUnpickler error: ")
_SUFFIX = ("\n\nCheck the documentation of ember.load to learn more about types accepted by "
           "default with weights_only.")
BLOCKED_MODULES = ("sys", "os", "posix", "nt", "subprocess", "builtins.eval", "shutil",
                   "socket", "importlib", "runpy", "pty", "ctypes", "code", "pickle")

_NEWOBJ_OK = (OrderedDict, Counter, set, frozenset, complex, bytearray)


def _is_tensor_class(obj):
    # allowed as a name (``_rebuild_from_type_v2`` takes the class), never called: the legacy
    # constructor would allocate whatever size the file asks for
    return isinstance(obj, type) and issubclass(obj, Tensor)


def _fail(message, allowable=False):
    return UnpicklingError((_PREFIX_ALLOWABLE if allowable else _PREFIX) + message + _SUFFIX)


def _rejected(module, name):
    full = f"{module}.{name}"
    blocked = next((m for m in BLOCKED_MODULES if full == m or module == m
                    or module.startswith(m + ".")), None)
    if blocked is not None:
        return _fail(f"Trying to load unsupported GLOBAL {full} whose module {module} is "
                     f"blocked.")
    if module == "builtins":
        full = name         # as Python spells it in add_safe_globals([slice])
    return _fail(
        f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please use "
        f"`ember.serialization.add_safe_globals([{full}])` or the "
        f"`ember.serialization.safe_globals([{full}])` context manager to allowlist this "
        f"global if you trust this class/function.", allowable=True)


def _compat(module, name):
    # protocol-2 pickles written by Python 3 use Python 2 names (__builtin__.set)
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


# opcode bytes, as ints
_MARK = pickle.MARK[0]
_STOP = pickle.STOP[0]
_POP = pickle.POP[0]
_POP_MARK = pickle.POP_MARK[0]
_DUP = pickle.DUP[0]
_FLOAT = pickle.FLOAT[0]
_INT = pickle.INT[0]
_BININT = pickle.BININT[0]
_BININT1 = pickle.BININT1[0]
_LONG = pickle.LONG[0]
_BININT2 = pickle.BININT2[0]
_NONE = pickle.NONE[0]
_PERSID = pickle.PERSID[0]
_BINPERSID = pickle.BINPERSID[0]
_REDUCE = pickle.REDUCE[0]
_STRING = pickle.STRING[0]
_BINSTRING = pickle.BINSTRING[0]
_SHORT_BINSTRING = pickle.SHORT_BINSTRING[0]
_UNICODE = pickle.UNICODE[0]
_BINUNICODE = pickle.BINUNICODE[0]
_APPEND = pickle.APPEND[0]
_BUILD = pickle.BUILD[0]
_GLOBAL = pickle.GLOBAL[0]
_DICT = pickle.DICT[0]
_EMPTY_DICT = pickle.EMPTY_DICT[0]
_APPENDS = pickle.APPENDS[0]
_GET = pickle.GET[0]
_BINGET = pickle.BINGET[0]
_LIST = pickle.LIST[0]
_EMPTY_LIST = pickle.EMPTY_LIST[0]
_PUT = pickle.PUT[0]
_BINPUT = pickle.BINPUT[0]
_LONG_BINPUT = pickle.LONG_BINPUT[0]
_SETITEM = pickle.SETITEM[0]
_TUPLE = pickle.TUPLE[0]
_EMPTY_TUPLE = pickle.EMPTY_TUPLE[0]
_SETITEMS = pickle.SETITEMS[0]
_BINFLOAT = pickle.BINFLOAT[0]
_PROTO = pickle.PROTO[0]
_NEWOBJ = pickle.NEWOBJ[0]
_TUPLE1 = pickle.TUPLE1[0]
_TUPLE2 = pickle.TUPLE2[0]
_TUPLE3 = pickle.TUPLE3[0]
_NEWTRUE = pickle.NEWTRUE[0]
_NEWFALSE = pickle.NEWFALSE[0]
_LONG1 = pickle.LONG1[0]
_LONG4 = pickle.LONG4[0]
_BINBYTES = pickle.BINBYTES[0]
_SHORT_BINBYTES = pickle.SHORT_BINBYTES[0]
_SHORT_BINUNICODE = pickle.SHORT_BINUNICODE[0]
_BINUNICODE8 = pickle.BINUNICODE8[0]
_BINBYTES8 = pickle.BINBYTES8[0]
_EMPTY_SET = pickle.EMPTY_SET[0]
_ADDITEMS = pickle.ADDITEMS[0]
_FROZENSET = pickle.FROZENSET[0]
_STACK_GLOBAL = pickle.STACK_GLOBAL[0]
_MEMOIZE = pickle.MEMOIZE[0]
_FRAME = pickle.FRAME[0]
_BYTEARRAY8 = pickle.BYTEARRAY8[0]
_LONG_BINGET = pickle.LONG_BINGET[0]


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
            elif op == _PERSID:         # (protocol 0: the id as a line of text)
                stack.append(self._persistent_load(str(readline(), "ascii")))
            elif op == _REDUCE:
                args = stack.pop()
                func = stack[-1]
                if (id(func) not in self._allowed_ids or not callable(func)
                        or _is_tensor_class(func)):
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
                if (id(cls) not in self._allowed_ids or not isinstance(cls, type)
                        or _is_tensor_class(cls)
                        or not (cls in _NEWOBJ_OK or cls.__module__ != "builtins")):
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
