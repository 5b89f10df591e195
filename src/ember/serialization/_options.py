"""torch.serialization's small public names: constants, mmap options, restore helpers."""

import mmap as _mmap

DEFAULT_PROTOCOL = 2
MAP_PRIVATE = _mmap.MAP_PRIVATE
MAP_SHARED = _mmap.MAP_SHARED

_MMAP_FLAGS = [MAP_PRIVATE]


class SourceChangeWarning(Warning):
    """Warned by PyTorch when a pickled module's source changed; here for code filtering it."""


class set_default_mmap_options:
    """Set the flags ``load(mmap=True)`` maps files with (``MAP_PRIVATE``, the default:
    writes stay in memory; ``MAP_SHARED``: writes reach the file), as a call or a
    ``with`` block that restores the previous flags.

    A file changed through a shared map no longer matches the CRC-32s its zip records
    hold: ember (unlike PyTorch) checks them when it reads records, so load such a file
    with ``mmap=True`` again, or re-save it.
    """

    def __init__(self, flags):
        if flags != MAP_PRIVATE and flags != MAP_SHARED:
            raise ValueError("Invalid argument in function set_default_mmap_options, expected "
                             f"mmap.MAP_PRIVATE or mmap.MAP_SHARED, but got {flags}")
        self.prev = _MMAP_FLAGS[0]
        _MMAP_FLAGS[0] = flags

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _MMAP_FLAGS[0] = self.prev


def get_default_mmap_options():
    """The flags ``load(mmap=True)`` maps files with (``mmap.MAP_PRIVATE`` by default)."""
    return _MMAP_FLAGS[0]


def mmap_shared():
    return _MMAP_FLAGS[0] == MAP_SHARED
