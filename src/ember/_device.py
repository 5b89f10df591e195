"""Device objects and the default device (``with ember.device("cuda"):``)."""

import builtins
import operator
import re

__all__ = ["device", "get_default_device", "set_default_device"]

_TYPES = ("cpu", "cuda", "meta")


class device:
    """Where a tensor lives: ``device("cpu")``, ``device("cuda")``, ``device("cuda", 1)``, or
    ``device("meta")`` (shapes and dtypes only, no memory)."""

    __slots__ = ("type", "index")

    def __new__(cls, type, index=None):
        if isinstance(type, device) and index is None:
            return type
        if isinstance(type, int) and not isinstance(type, bool):
            type, index = _accelerator(type), type      # torch.device(0) means cuda:0
        if not isinstance(type, str):
            raise TypeError(f"device(): argument 'type' (position 1) must be str, not "
                            f"{_type_name(type)}")
        if index is None and type in _TYPES:       # the common "cpu"/"cuda": no parsing
            name = type
        else:
            name, index = _parse(type, _checked_index(index))
        self = object.__new__(cls)
        self.type = name
        self.index = index
        return self

    def __eq__(self, other):
        if not isinstance(other, device):
            return NotImplemented       # as torch: device("cpu") == "cpu" is False
        return self.type == other.type and self.index == other.index

    def __lt__(self, other):
        raise TypeError("comparison not implemented")

    __le__ = __gt__ = __ge__ = __lt__

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __reduce__(self):
        if self.index is None:
            return (device, (self.type,))
        return (device, (self.type, self.index))

    def __enter__(self):
        previous = _default[0], _chosen[0]
        set_default_device(self)
        _entered.append(previous)
        return self

    def __exit__(self, *exc):
        if not _entered:
            raise RuntimeError("trying to pop from empty mode stack")
        _default[0], _chosen[0] = _entered.pop()


# "type" or "type:index" with an index of plain digits and no leading zero, as torch parses
_DEVICE_STRING = re.compile(r"([a-zA-Z_]+)(?::([1-9][0-9]*|0))?")


def _type_name(value):
    return "ember.device" if isinstance(value, device) else builtins.type(value).__name__


def _checked_index(index):
    """The index argument as an int (anything with __index__ but bool), or None."""
    if index is None:
        return None
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"device(): argument 'index' (position 2) must be int, not "
                        f"{_type_name(index)}")
    index = operator.index(index)
    if index < 0:
        raise RuntimeError("Device index must not be negative")
    return index


def _parse(string, index):
    """(type, index) from a device string and an optional separate index."""
    if not string:
        raise RuntimeError("Device string must not be empty")
    match = _DEVICE_STRING.fullmatch(string)
    if match is None:
        raise RuntimeError(f"Invalid device string: '{string}'")
    name, digits = match.groups()
    if name not in _TYPES:
        raise RuntimeError(f"Expected one of {', '.join(_TYPES)} device type at start of "
                           f"device string: {string}")
    if digits is not None and index is not None:
        raise RuntimeError(f"type (string) must not include an index because index was "
                           f"passed explicitly: {string}")
    return name, int(digits) if digits is not None else index


CPU = device("cpu")
_default = [CPU]
_chosen = [False]          # whether a default device was set (even cpu), as torch's mode is
_entered = []              # the defaults that `with device(...)` blocks will restore


def get_default_device():
    """The device on which factory functions allocate (cpu unless changed)."""
    return _default[0]


def chosen_default_device():
    """The default device if one was set, else None: with one set, PyTorch also moves the
    tensors and arrays given to ``tensor``/``as_tensor``/``asarray`` to it."""
    return _default[0] if _chosen[0] else None


def set_default_device(device):
    """Make factory functions allocate on ``device`` (None restores cpu)."""
    if device is None:
        _default[0], _chosen[0] = CPU, False
        return
    dev = as_device(device)
    if dev.type == "cuda":
        from ember import backend
        backend.require_cuda()
    _default[0], _chosen[0] = dev, True


def _accelerator(index):
    """The device type a bare index names: cuda, which PyTorch refuses when it has no GPU
    (after refusing a negative index)."""
    from ember import backend
    if index >= 0 and not backend.cuda_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")
    return "cuda"


def as_device(dev):
    """Normalise a device argument (None, str, int or device) to a device; None stays None."""
    if dev is None or type(dev) is device:
        return dev
    return device(dev)
