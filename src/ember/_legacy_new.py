"""The legacy constructors: ``Tensor(2, 3)``, ``Tensor(data)``, the typed ones
(``FloatTensor(...)``, see ``_legacy_types.py``) and ``x.new(...)``, with the errors of
PyTorch's argument parser for them."""

import numbers

import numpy as np

from ember import _dtype as D
from ember._creation import _place, _target, _warn_read_only
from ember._from_data import _from_data
from ember._sizes import _size
from ember._tensor import Size, Tensor, _make

_HEAP_TYPE = 1 << 9          # Py_TPFLAGS_HEAPTYPE


def legacy_new(args, dtype, device, cls=Tensor, name="new", given=None):
    """The legacy constructors' forms (``Tensor(2, 3)``, ``FloatTensor(data)``,
    ``x.new(...)``): nothing (an empty tensor), sizes (zeros, as ember's ``empty``), a tensor
    of ``dtype`` on ``device``'s type (itself), or data; made as ``cls``. ``given`` is the
    device the caller passed, checked against ``device``'s type as PyTorch's parser does."""
    if given is not None:
        device = _checked_device(args, device, given, name)
    _, dev = _target(device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return _legacy_from_tensor(args[0], dtype, dev, cls, name)
    # a size is ints; bools pass for ints but the first (a lone bool is data, refused)
    sizes = args and type(args[0]) is not bool and all(isinstance(a, numbers.Integral)
                                                       for a in args)
    if not args or sizes or (len(args) == 1 and isinstance(args[0], Size)):
        arr = np.zeros(_size(args) if args else (0,), dtype.np)
    elif len(args) == 1:
        data = args[0]
        if data is None or isinstance(data, (numbers.Number, np.generic)) and \
                not isinstance(data, str):
            raise TypeError(f"new(): data must be a sequence (got {_c_type_name(data)})")
        _warn_read_only(data)
        arr = _from_data(data, dtype)
    else:
        raise _legacy_arguments_error(args)
    return _make(_place(arr, dev), cls)


def _checked_device(args, expected, given, name):
    """A legacy constructor's ``device=``: of the type it makes (its default tensor type's,
    its own, or ``x``'s for ``x.new``), and never with a tensor to alias."""
    if len(args) == 1 and isinstance(args[0], Tensor):
        if name == "new":
            raise RuntimeError("Legacy tensor new of the form tensor.new(tensor, device=device) "
                               "is not supported.  Use torch.as_tensor(...) instead.")
        raise RuntimeError("Legacy tensor constructor of the form torch.Tensor(tensor, "
                           "device=device) is not supported.  Use torch.tensor(...) or "
                           "torch.as_tensor(...) instead.")
    from ember._device import as_device
    want, dev = as_device(expected).type, as_device(given)
    if dev.type != want:
        raise RuntimeError(f"legacy constructor expects device type: {want} but device type: "
                           f"{dev.type} was passed")
    return dev


def _c_type_name(x):
    """The name PyTorch's argument parser gives the type of ``x`` (Python's C name for it: a
    class defined in Python goes by its bare name)."""
    kind = type(x)
    if kind.__module__ == "builtins" or kind.__flags__ & _HEAP_TYPE:
        return kind.__name__
    return f"{kind.__module__}.{kind.__name__}"


def _legacy_from_tensor(given, dtype, dev, cls, name):
    """``Tensor(t)``: an alias of ``t`` (a view of all of it) whatever its dtype; a typed
    constructor's (and ``x.new(t)``'s) wants its dtype and device."""
    if name != "Tensor" and (given.dtype is not dtype or given.device.type != dev.type):
        from ember.ops._out_dtypes import _C_NAMES
        rest = ("layout=Strided, requires_grad=false (default), pinned_memory=false (default), "
                "memory_format=(nullopt))")
        raise TypeError(f"expected TensorOptions(dtype={_C_NAMES[dtype]}, device={dev}, {rest} "
                        f"(got TensorOptions(dtype={_C_NAMES[given.dtype]}, device="
                        f"{given.device}, {rest})")
    from ember.ops.conversion import _alias
    alias = _alias(given)
    return alias if cls is Tensor or type(given) is cls else alias.as_subclass(cls)


def _legacy_arguments_error(args):
    """PyTorch's error for several arguments that are no size: at the first that is not an
    int, or, when the first is not one, for the whole call (its parser explains two
    arguments by the first overload, three by the last two, more by none)."""
    if type(args[0]) is not bool and isinstance(args[0], numbers.Integral):
        pos, bad = next((i, a) for i, a in enumerate(args) if not isinstance(a, numbers.Integral))
        return TypeError(f"new(): argument 'size' failed to unpack the object at pos {pos + 1} "
                         f"with error \"type must be tuple of ints,but got "
                         f"{_c_type_name(bad)}\"")
    why = ("      didn't match because some of the arguments have invalid types: ("
           + ", ".join(f"!{_described(a)}!" for a in args) + ")\n")
    first, last = (why, "") if len(args) == 2 else ("", why) if len(args) == 3 else ("", "")
    return TypeError(
        f"new() received an invalid combination of arguments - got "
        f"({', '.join(_c_type_name(a) for a in args)}), but expected one of:\n"
        f" * (*, torch.device device = None)\n{first}"
        f" * (torch.Storage storage)\n * (Tensor other)\n"
        f" * (tuple of ints size, *, torch.device device = None)\n{last}"
        f" * (object data, *, torch.device device = None)\n{last}")


def _described(x):
    """An argument as PyTorch's parser describes it: ``list of [int, int]``."""
    if type(x) is list:
        return f"list of [{', '.join(_c_type_name(e) for e in x)}]"
    if type(x) is tuple:
        inner = ", ".join(_c_type_name(e) for e in x)
        return f"tuple of ({inner}{',' if len(x) == 1 else ''})"
    return _c_type_name(x)


# the device of the default tensor type: "cuda" after set_default_tensor_type(a cuda type)
DEFAULT_TYPE_DEVICE = ["cpu"]


def legacy_tensor_new(cls, args, kwargs):
    """``Tensor()``, ``Tensor(2, 3)`` and ``Tensor(data)``: the legacy float constructor."""
    device = kwargs.pop("device", None)
    if "size" in kwargs:
        args = fold_size(args, kwargs.pop("size"))
    if kwargs:
        raise TypeError(f"Tensor(): unexpected keyword arguments {sorted(kwargs)}")
    # the default tensor type's device, as PyTorch's: set_default_device and `with
    # device(...)` move the factory functions, not this constructor
    return legacy_new(args, D.get_default_dtype(), DEFAULT_TYPE_DEVICE[0], cls, "Tensor",
                      device)


NO_SIZE = object()      # (``size=`` not given)


def _new(self, *args, device=None, size=NO_SIZE):
    """The legacy constructor with this tensor's dtype and device: ``x.new(2, 3)``,
    ``x.new(data)``, ``x.new()``, ``x.new(size=(2, 3))``."""
    if size is not NO_SIZE:
        args = fold_size(args, size)
    return legacy_new(args, self.dtype, self.device, given=device)


Tensor.new = _new


def fold_size(args, size, sparse=False):
    """The positional arguments of a legacy constructor given ``size=`` (``Tensor(size=(2,
    3))``, a sparse type's ``(indices, values, size=...)``): PyTorch's parser takes the
    keyword for the size of the overload that has one."""
    ints = isinstance(size, (tuple, list)) and all(
        isinstance(s, numbers.Integral) and type(s) is not bool for s in size)
    takes = (2,) if sparse else (0,)
    if sparse and len(args) == 3 and isinstance(args[0], Tensor):
        raise TypeError("new() got multiple values for argument 'size'")
    if ints and (len(args) in takes and (not args or isinstance(args[0], Tensor)) or
                 sparse and not args):
        return (*args, Size(size)) if args else (Size(size),)
    keyword = f"size={_c_type_name(size)}" + ("" if args else ", ")   # (sic, PyTorch's)
    raise combination_error([*(_c_type_name(a) for a in args), keyword], sparse)


def combination_error(got, sparse):
    """PyTorch's parser's error for arguments (described by ``got``) that match no form of a
    legacy constructor (a dense one's, or a sparse one's)."""
    got = ", ".join(got)
    if sparse:
        forms = (" * (*, torch.device device = None)\n"
                 " * (Tensor indices, Tensor values, *, torch.device device = None)\n"
                 " * (Tensor indices, Tensor values, tuple of ints size, *, torch.device "
                 "device = None)\n * (tuple of ints size, *, torch.device device = None)\n")
    else:
        forms = (" * (*, torch.device device = None)\n * (torch.Storage storage)\n"
                 " * (Tensor other)\n * (tuple of ints size, *, torch.device device = None)\n"
                 " * (object data, *, torch.device device = None)\n")
    return TypeError(f"new() received an invalid combination of arguments - got ({got}), but "
                     f"expected one of:\n{forms}")
