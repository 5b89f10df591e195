"""torch.serialization's small public names: constants and the options of save and load."""

import enum
import mmap as _mmap
import struct
import sys
import threading

DEFAULT_PROTOCOL = 2
STORAGE_KEY_SEPARATOR = ","
LONG_SIZE = struct.Struct("=l").size
INT_SIZE = struct.Struct("=i").size
SHORT_SIZE = struct.Struct("=h").size
IS_WINDOWS = sys.platform == "win32"
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


# --- CRC-32s, skipped data, byte order ---------------------------------------------------------

_CRC32 = [True]


def set_crc32_options(compute_crc32):
    """Whether ``save`` computes each record's CRC-32 (True, the default) or writes 0 (faster;
    ``load`` then checks nothing for those records, and other zip tools may complain)."""
    _CRC32[0] = compute_crc32


def get_crc32_options():
    """Whether ``save`` computes each record's CRC-32 (``set_crc32_options``)."""
    return _CRC32[0]


_state = threading.local()


class skip_data:
    """Within this context ``save`` writes every storage's record without its data (zeros,
    CRC-32 0), and ``load`` builds storages of the right sizes without reading theirs
    (uninitialised memory): for writing a checkpoint's layout first and its data later.
    ``materialize_fake_tensors`` is accepted for PyTorch's signature (ember has no fake
    tensors)."""

    def __init__(self, materialize_fake_tensors=False):
        self.materialize_fake_tensors = materialize_fake_tensors

    def __enter__(self):
        self._previous = skipping_data()
        _state.skip_data = True

    def __exit__(self, *exc):
        _state.skip_data = self._previous


def skipping_data():
    """Whether a ``skip_data`` context is active on this thread."""
    return getattr(_state, "skip_data", False)


class LoadEndianness(enum.Enum):
    """The byte order ``load`` assumes for a checkpoint that has no ``byteorder`` record."""
    NATIVE = 1
    LITTLE = 2
    BIG = 3


_LOAD_ENDIANNESS = [None]


def get_default_load_endianness():
    """The byte order assumed for checkpoints without a byteorder record (None: little)."""
    return _LOAD_ENDIANNESS[0]


def set_default_load_endianness(endianness):
    """Set the byte order assumed for checkpoints without a byteorder record: a
    ``LoadEndianness``, or None for the default (little-endian)."""
    if endianness is not None and not isinstance(endianness, LoadEndianness):
        raise TypeError("Invalid argument type in function set_default_load_endianness")
    _LOAD_ENDIANNESS[0] = endianness


def byteorder_without_record():
    """The byte order of a checkpoint that has no byteorder record."""
    choice = _LOAD_ENDIANNESS[0]
    if choice is LoadEndianness.NATIVE:
        return sys.byteorder
    return "big" if choice is LoadEndianness.BIG else "little"
