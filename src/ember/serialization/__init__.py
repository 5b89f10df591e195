"""ember.save / ember.load: PyTorch's checkpoint format, safe by default (``torch.save``).

Files are PyTorch's zip format (``archive/data.pkl``, ``archive/data/<key>``,
``archive/byteorder``, ``archive/version``), so PyTorch loads what ember saves and the reverse.
Loading runs no code from the file unless ``weights_only=False`` is asked for; saving to a
path is atomic. _pickler.py says how views stay views; _unpickler.py how loading stays safe.
"""

import contextlib
import io
import os
import pickle
import sys
import warnings

import numpy as np

from ember._device import device
from ember.serialization import _legacy
from ember.serialization._atomic import atomic_write as _atomic_write
from ember.serialization._legacy import MAGIC_NUMBER, PROTOCOL_VERSION
from ember.serialization._locations import (
    check_module_version_greater_or_equal, default_restore_location, location_tag, mkdtemp,
    normalize_storage_type, register_package, restore, storage_to_tensor_type,
    validate_cuda_device, validate_hpu_device)
from ember.serialization._names import StorageType
from ember.serialization._options import (
    DEFAULT_PROTOCOL, INT_SIZE, IS_WINDOWS, LONG_SIZE, MAP_PRIVATE, MAP_SHARED, SHORT_SIZE,
    STORAGE_KEY_SEPARATOR, LoadEndianness, SourceChangeWarning, byteorder_without_record,
    get_crc32_options, get_default_load_endianness, get_default_mmap_options, mmap_shared,
    set_crc32_options, set_default_load_endianness, set_default_mmap_options, skip_data,
    skipping_data)
from ember.serialization._pickler import StorageArray, dumps
from ember.serialization._rebuild import (
    LoadedStorage, _torch_globals, allowed_globals, loose_storages_to_ember, unsupported)
from ember.serialization._safe import (
    add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals, user_globals)
from ember.serialization._unpickler import _RERUN as UNSAFE_MESSAGE
from ember.serialization._unpickler import WeightsUnpickler
from ember.serialization._zip import Archive, write_archive

__all__ = ["SourceChangeWarning", "mkdtemp", "register_package",
           "check_module_version_greater_or_equal", "validate_cuda_device",
           "validate_hpu_device", "location_tag", "default_restore_location",
           "normalize_storage_type", "storage_to_tensor_type", "save", "load", "StorageType",
           "LoadEndianness", "get_crc32_options", "set_crc32_options",
           "get_default_load_endianness", "set_default_load_endianness",
           "get_default_mmap_options", "set_default_mmap_options", "clear_safe_globals",
           "get_safe_globals", "add_safe_globals", "safe_globals",
           "get_unsafe_globals_in_checkpoint", "skip_data"]


def save(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save ``obj`` (tensors, containers, numbers, strings, state_dicts, modules) to ``f``.

    ``f`` is a path or a writable binary file. A path is written atomically: the data goes to
    a temporary file in the same folder, which replaces ``f`` only once complete, so a crash
    mid-save leaves the previous file intact (a killed process may leave a hidden
    ``.<name>.*.tmp`` file beside it). Tensors sharing memory are stored once (views load as
    views, in ember and in PyTorch). ``_use_new_zipfile_serialization=False`` writes
    PyTorch's legacy (pre-1.6) format instead of the zip format.

    Saving a whole ``nn.Module`` pickles its classes by name: loading that file needs
    ``weights_only=False``, which runs code from the file, so share ``state_dict()`` instead.
    """
    if pickle_module is not pickle:
        raise NotImplementedError("ember.save supports only the standard pickle module")
    if not _use_new_zipfile_serialization:      # the pre-1.6 format, for old readers
        if skipping_data():
            raise RuntimeError("Cannot use skip_data=True with "
                               "_use_new_zipfile_serialization=False")
        _write(f, lambda fp: _legacy.save(obj, fp, pickle_protocol))
        return
    data, table = dumps(obj, pickle_protocol)
    records = [("data.pkl", data), (".format_version", b"1"),
               (".storage_alignment", b"64")]
    if not _disable_byteorder_record:
        records.append(("byteorder", sys.byteorder.encode()))
    skip = skipping_data()
    records += [(f"data/{s.key}", s.nbytes if skip else s.data()) for s in table.storages]
    records.append(("version", b"3\n"))
    _write(f, lambda fp: write_archive(fp, records, checksums=bool(get_crc32_options())))


def _write(f, write):
    """Run ``write(file)`` on binary file ``f``, or atomically on the file at path ``f``."""
    if isinstance(f, (str, os.PathLike)):
        _atomic_write(os.fspath(f), write)
    else:
        write(f)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load an object saved with ``ember.save`` or ``torch.save`` from a path or binary file.

    Args:
        map_location: where tensors go: a device or string (``"cpu"``), a dict remapping the
            saved locations (``{"cuda:0": "cpu"}``), or a callable ``(storage, location)``
            returning a storage (or None for the default).
        weights_only: True (the default, unless a ``pickle_module`` is given) builds only
            tensors, numbers, strings, plain containers and globals added with
            ``ember.serialization.add_safe_globals``.
            **``weights_only=False`` runs the pickle as it is, which can execute arbitrary
            code: use it only for files from a source you trust.**
        mmap: memory-map the tensor data (copy-on-write) instead of reading it; ``f`` must be
            a path.

    Raises:
        pickle.UnpicklingError: the pickle names a global that is not allowed (the message
            says which, and how to allow it), or is not a pickle at all.
        RuntimeError: a damaged file (truncated, bad zip, CRC mismatch, missing record), a
            tensor that does not fit its storage, a dtype ember lacks, or a device that is not
            available.
        EOFError: the file is empty.
    """
    if weights_only is None:            # as in PyTorch: an explicit pickle_module opts out
        weights_only = pickle_module is None
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is "
                           "specified")
    if weights_only and pickle_load_args:
        warnings.warn("pickle_load_args only works if `weights_only=False`.", stacklevel=2)
    if not (map_location is None or callable(map_location)
            or isinstance(map_location, (str, device, dict))):
        raise TypeError(f"map_location should be a device, string, dict or callable, got "
                        f"{type(map_location).__name__}")
    # (as in PyTorch, mmap needs a path, not an open file: checked once the format is known)
    path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
    named = f"{f}, " if isinstance(f, str) else ""
    with contextlib.ExitStack() as stack:
        f = _seekable(stack, f)
        start = f.tell()
        magic = f.read(4)
        f.seek(start)
        if magic[:2] == b"PK":
            if mmap and path is None:
                raise ValueError("f must be a file path in order to use the mmap argument")
            return _load_zip(Archive(f), map_location, weights_only, path if mmap else None,
                             pickle_load_args)
        if mmap:
            raise RuntimeError(f"mmap can only be used with files saved with "
                               f"`torch.save({named}_use_new_zipfile_serialization=True), "
                               f"please torch.save your checkpoint with this option in order "
                               f"to use mmap.")

        def make_unpickler(persistent_load):
            return _unpickler(persistent_load, weights_only, pickle_load_args)
        return _legacy.load(f, make_unpickler, map_location, restore, weights_only)


def _seekable(stack, f):
    """``f`` (a path or a binary file) as a seekable binary file, closed with ``stack``."""
    if isinstance(f, (str, os.PathLike)):
        return stack.enter_context(open(f, "rb"))
    if not (hasattr(f, "seekable") and f.seekable()):
        return io.BytesIO(f.read())
    return f


def get_unsafe_globals_in_checkpoint(f):
    """The ``"module.name"`` of each global in zip checkpoint ``f`` (a path or binary file)
    that ``load(weights_only=True)`` would reject: neither allowed by default nor added with
    ``add_safe_globals``. Reads only the pickle's opcodes; runs nothing from the file."""
    with contextlib.ExitStack() as stack:
        f = _seekable(stack, f)
        start = f.tell()
        magic = f.read(2)
        f.seek(start)
        if magic != b"PK":
            raise ValueError("Expected input to be a checkpoint returned by torch.save")
        data = Archive(f).read("data.pkl").tobytes()
    allowed = allowed_globals()
    allowed.update(user_globals())
    found = dict.fromkeys(_globals_in_pickle(data))
    return [name for name in found if name not in allowed]


def _globals_in_pickle(data):
    """The "module.name" of each GLOBAL / STACK_GLOBAL in pickle ``data``, in order."""
    import pickletools
    from ember.serialization._unpickler import _compat
    pushed, memo = [], {}       # the last values pushed (strings, else None); the memo
    for opcode, arg, _ in pickletools.genops(data):
        name = opcode.name
        if name in ("GLOBAL", "INST"):
            yield ".".join(_compat(*arg.split(" ", 1)))
        elif name == "STACK_GLOBAL" and len(pushed) >= 2 and None not in pushed[-2:]:
            yield ".".join(_compat(*pushed[-2:]))
        elif name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
            memo[len(memo) if name == "MEMOIZE" else arg] = pushed[-1] if pushed else None
            continue
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(arg))
            continue
        elif name in ("FRAME", "PROTO"):
            continue
        pushed.append(arg if isinstance(arg, str) and "UNICODE" in name else None)
        del pushed[:-2]


def _unpickler(persistent_load, weights_only, pickle_load_args):
    """A factory: file -> object with ``load()``, safe or full as asked."""
    if weights_only:
        allowed = allowed_globals()
        allowed.update(user_globals())
        return lambda file: WeightsUnpickler(file, allowed, persistent_load)
    return lambda file: _FullUnpickler(file, persistent_load, **pickle_load_args)


class _FullUnpickler(pickle.Unpickler):
    """The standard unpickler (runs whatever the file says) mapping PyTorch's names to ember."""

    def __init__(self, file, persistent_load, **kwargs):
        kwargs.setdefault("encoding", "utf-8")
        super().__init__(file, **kwargs)
        self._torch = _torch_globals()
        self.persistent_load = persistent_load

    def find_class(self, module, name):
        obj = self._torch.get(f"{module}.{name}")
        if obj is not None:
            return obj
        err = unsupported(module, name)
        if err is not None:
            raise err
        if module == "torch" or module.startswith("torch."):
            import importlib
            with contextlib.suppress(ImportError, AttributeError):
                return getattr(importlib.import_module("ember" + module[5:]), name)
        return super().find_class(module, name)


def _load_zip(archive, map_location, weights_only, mmap_path, pickle_load_args):
    byteorder = archive.read("byteorder").tobytes().decode(errors="replace") \
        if archive.has_record("byteorder") else byteorder_without_record()
    if byteorder not in ("little", "big"):
        raise RuntimeError(f"Unknown endianness type: {byteorder}")
    whole = archive.memmap(mmap_path, mmap_shared()) if mmap_path is not None else None
    skip = skipping_data()
    loaded = {}

    def persistent_load(pid):
        stype, key, location, numel = _check_pid(pid)
        if key in loaded:
            return loaded[key].typed(stype.dtype)
        record = f"data/{key}"
        expected = numel * (1 if stype.dtype is None else stype.dtype.itemsize)
        if skip:
            flat = np.empty(expected, np.uint8)
        else:
            flat = archive.mmap(record, whole) if whole is not None else archive.read(record)
        if flat.nbytes != expected:
            raise RuntimeError(f"PytorchStreamReader: record {record} holds {flat.nbytes} "
                               f"bytes but its storage needs {expected}; the checkpoint "
                               f"file is corrupted")
        if byteorder != sys.byteorder and stype.dtype is not None and stype.dtype.itemsize > 1:
            flat = flat.view(stype.dtype.np).byteswap().view(np.uint8)
        storage = LoadedStorage(flat.view(StorageArray), stype.dtype, device("cpu"))
        loaded[key] = restore(storage, location, map_location)
        return loaded[key]

    pkl = io.BytesIO(archive.read("data.pkl").tobytes())
    result = _unpickler(persistent_load, weights_only, pickle_load_args)(pkl).load()
    return loose_storages_to_ember(result)


def _check_pid(pid):
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
            and isinstance(pid[1], StorageType) and isinstance(pid[2], str)
            and isinstance(pid[3], str) and type(pid[4]) is int and pid[4] >= 0):
        raise _legacy._bad(pid)
    return pid[1:]
