"""PyTorch's legacy (before 1.6) checkpoint format: consecutive pickles, then raw storages.

The file holds a magic number, a protocol version and a sys-info dict (three small pickles),
the object's pickle (storages as persistent ids), a pickled list of storage keys, and for each
key an int64 element count followed by the storage's bytes. Storages are allocated while the
object is unpickled and filled afterwards, so the tensors built meanwhile see the data.
"""

import os
import pickle
import struct
import sys

import numpy as np

from ember._device import device
from ember.serialization._names import StorageType
from ember.serialization._pickler import StorageArray, dumps
from ember.serialization._rebuild import (LoadedStorage, bytes_read_later,
                                          loose_storages_to_ember, run_pending)
from ember.serialization._unpickler import WeightsUnpickler

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001


def save(obj, f, protocol):
    """Write ``obj`` to binary file ``f`` in the legacy format (``torch.save(...,
    _use_new_zipfile_serialization=False)``)."""
    info = {"protocol_version": PROTOCOL_VERSION, "little_endian": sys.byteorder == "little",
            "type_sizes": {"short": 2, "int": 4, "long": 4}}
    for header in (MAGIC_NUMBER, PROTOCOL_VERSION, info):
        pickle.dump(header, f, protocol=protocol)
    data, table = dumps(obj, protocol, pid_suffix=(None,))     # persistent ids: a view slot
    f.write(data)
    pickle.dump([s.key for s in table.storages], f, protocol=protocol)
    for s in table.storages:
        f.write(struct.pack("=q", s.pid()[4]))     # the count its persistent id names
        f.write(s.data())


def _plain(f):
    # the header pickles hold only numbers, strings and dicts: no globals allowed
    return WeightsUnpickler(f, {}, _no_persistent_ids).load()


def _no_persistent_ids(pid):
    raise pickle.UnpicklingError(f"unexpected persistent id in checkpoint header: {pid!r}")


def _bad(pid):
    hint = ("; it was saved with pickle_protocol=0, which writes storage references as "
            "text that no loader can read (PyTorch's neither): save with a protocol of 1 or "
            "more") if isinstance(pid, str) and pid.startswith("('storage'") else ""
    return pickle.UnpicklingError(f"invalid storage reference in checkpoint: {pid!r}{hint}")


def _itemsize(dtype):
    return 1 if dtype is None else dtype.itemsize


def load(f, make_unpickler, map_location, restore, weights_only):
    """The object of a legacy checkpoint read from seekable binary file ``f``."""
    start = f.tell()
    f.seek(0, os.SEEK_END)
    end = f.tell()
    f.seek(start + 257)
    is_tar = f.read(5) == b"ustar"
    f.seek(start)
    if is_tar:
        raise RuntimeError("ember.load: this checkpoint uses PyTorch's tar format (PyTorch "
                           "0.1.x), which ember cannot read; load it in PyTorch and re-save it "
                           "with torch.save")
    first = f.read(1)
    f.seek(start)
    if not first:
        raise EOFError("ember.load: the file is empty")      # PyTorch's type: EOFError
    if first not in (b"\x80", b"L"):      # (pickle protocols 2-5; 0 and 1 write a LONG)
        raise pickle.UnpicklingError(
            f"ember.load: not a PyTorch checkpoint (invalid load key, {first!r}); expected a "
            f"zip archive or a legacy pickle")
    if _plain(f) != MAGIC_NUMBER:
        raise RuntimeError("Invalid magic number; corrupt file?")
    version = _plain(f)
    if version != PROTOCOL_VERSION:
        raise RuntimeError(f"Invalid protocol version: {version!r}")
    info = _plain(f)
    little = info.get("little_endian", True) if isinstance(info, dict) else True
    roots = {}                  # key -> LoadedStorage over zeroed bytes, filled below

    def persistent_load(pid):
        if not isinstance(pid, tuple) or not pid:
            raise _bad(pid)
        if pid[0] == "module" and len(pid) > 1 and not weights_only:
            return pid[1]       # a class saved with its source: PyTorch returns it as is
        if pid[0] != "storage" or len(pid) != 6:
            raise _bad(pid)
        _, stype, key, location, numel, view = pid
        if not (isinstance(stype, StorageType) and isinstance(key, str)
                and isinstance(location, str) and type(numel) is int and numel >= 0):
            raise _bad(pid)
        item = _itemsize(stype.dtype)      # untyped storages (uint16, float8) count bytes
        if key not in roots:
            if numel * item > end - f.tell():
                raise RuntimeError(f"ember.load: storage {key} needs {numel * item} bytes but "
                                   f"the file is truncated")
            flat = np.zeros(numel * item, np.uint8).view(StorageArray)
            roots[key] = restore(LoadedStorage(flat, stype.dtype, device("cpu")), location,
                                 map_location)
        root = roots[key].typed(stype.dtype)
        if view is None:
            return root
        if not (isinstance(view, tuple) and len(view) == 3 and type(view[1]) is int
                and type(view[2]) is int and 0 <= view[1] and view[2] >= 0):
            raise _bad(pid)
        part = root.bytes[view[1] * item:(view[1] + view[2]) * item]
        return LoadedStorage(part, root.dtype, root.device)

    with bytes_read_later() as pending:
        result = loose_storages_to_ember(make_unpickler(persistent_load)(f).load())
        _read_storages(f, roots, little)
        run_pending(pending)
    return result


def _read_storages(f, roots, little):
    """Fill the storages allocated while unpickling from the data that follows the pickle."""
    keys = _plain(f)
    if not isinstance(keys, list):
        raise pickle.UnpicklingError("invalid storage key list in checkpoint")
    for key in keys:
        storage = roots.get(key)
        if storage is None:
            raise RuntimeError(f"ember.load: storage {key!r} listed but never used")
        header = f.read(8)
        if len(header) != 8:
            raise RuntimeError(f"ember.load: the file is truncated (storage {key})")
        count = struct.unpack("<q" if little else ">q", header)[0]
        dest = storage.bytes
        item = _itemsize(storage.dtype)
        if count * item != dest.nbytes:
            raise RuntimeError(f"ember.load: storage {key} holds {count} elements, expected "
                               f"{dest.nbytes // item}; the file is corrupted")
        if f.readinto(memoryview(dest)) != dest.nbytes:
            raise RuntimeError(f"ember.load: the file is truncated (storage {key})")
        if not little and item > 1:     # (an untyped storage's element type is unknown here)
            dest.view(storage.dtype.np).byteswap(inplace=True)
