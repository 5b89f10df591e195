"""Device objects and the default device (``with ember.device("cuda"):``)."""

__all__ = ["device", "get_default_device", "set_default_device"]

_TYPES = ("cpu", "cuda", "meta")


class device:
    """Where a tensor lives: ``device("cpu")``, ``device("cuda")``, ``device("cuda", 1)``, or
    ``device("meta")`` (shapes and dtypes only, no memory)."""

    __slots__ = ("type", "index", "_previous")

    def __new__(cls, type, index=None):
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device object")
            return type
        if isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type          # torch.device(0) means cuda:0
        if not isinstance(type, str):
            raise TypeError(f"device(): expected a string or device, got {type!r}")
        name = type
        if ":" in name:
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index "
                                   f"was passed explicitly: {name}")
            name, _, idx = name.partition(":")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(idx)
        if name not in _TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(_TYPES)} device type at start of device string: "
                f"{type}")
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError(f"Device index must not be negative, got {index}")
        self = object.__new__(cls)
        self.type = name
        self.index = index
        self._previous = []
        return self

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return (isinstance(other, device) and self.type == other.type
                and self.index == other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __reduce__(self):
        return (device, (self.type, self.index))

    def __enter__(self):
        previous = _default[0]
        set_default_device(self)
        self._previous.append(previous)
        return self

    def __exit__(self, *exc):
        _default[0] = self._previous.pop()


CPU = device("cpu")
_default = [CPU]


def get_default_device():
    """The device on which factory functions allocate (cpu unless changed)."""
    return _default[0]


def set_default_device(device):
    """Make factory functions allocate on ``device`` (None restores cpu)."""
    if device is None:
        _default[0] = CPU
        return
    dev = as_device(device)
    if dev.type == "cuda":
        from ember import backend
        backend.require_cuda()
    _default[0] = dev


def as_device(dev):
    """Normalise a device argument (None, str, int or device) to a device; None stays None."""
    if dev is None or type(dev) is device:
        return dev
    return device(dev)
