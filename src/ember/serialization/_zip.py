"""PyTorch's checkpoint container: a zip of stored (uncompressed) records under one folder,
each record's data aligned to 64 bytes so storages can be memory-mapped in place."""

import os
import struct
import zipfile
import zlib

import numpy as np

ALIGNMENT = 64
_LOCAL_HEADER = struct.Struct("<4s22sHH")       # signature, fixed fields, name and extra lengths
_ZIP64_EXTRA = 20                                # zipfile adds it to big records' local headers


def _corrupt(message):
    return RuntimeError(
        f"PytorchStreamReader failed {message}. If you are seeing this error, there is a high "
        f"likelihood that your checkpoint file is corrupted. This can happen if the checkpoint "
        f"was not saved properly, was transferred incorrectly, or the file was modified after "
        f"saving.")


def write_archive(f, records, prefix="archive"):
    """Write ``(name, bytes-like)`` records into a zip at ``f``, data aligned to 64 bytes."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, data in records:
            data = memoryview(data).cast("B")
            info = zipfile.ZipInfo(f"{prefix}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.file_size = len(data)
            zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT
            start = (zf.fp.tell() + _LOCAL_HEADER.size + len(info.filename.encode()) + 4
                     + (_ZIP64_EXTRA if zip64 else 0))
            pad = -start % ALIGNMENT
            info.extra = struct.pack("<2sH", b"FB", pad) + b"Z" * pad   # as PyTorch pads
            with zf.open(info, "w", force_zip64=zip64) as out:
                out.write(data)


_CHUNK = 1 << 20
_crc_thread = {}        # pid -> executor: a forked child (DataLoader worker) makes its own


def _read_with_crc(f, out, name):
    """Fill ``out`` from ``f`` and return its CRC-32. Big records are checksummed a chunk at a
    time on a helper thread while the next chunk is read (both release the GIL): this makes
    checked reads ~1.4x faster than reading, then checksumming."""
    if len(out) <= _CHUNK:
        if f.readinto(out) != len(out):
            raise _corrupt(f"reading file {name}: file read failed")
        return zlib.crc32(out)
    pool = _crc_thread.get(os.getpid())
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor
        pool = _crc_thread[os.getpid()] = ThreadPoolExecutor(1, thread_name_prefix="ember-crc")
    crc, pending = 0, None
    for pos in range(0, len(out), _CHUNK):
        chunk = out[pos:pos + _CHUNK]
        if f.readinto(chunk) != len(chunk):
            raise _corrupt(f"reading file {name}: file read failed")
        if pending is not None:
            crc = pending.result()
        pending = pool.submit(zlib.crc32, chunk, crc)
    return pending.result()


class Archive:
    """Read access to the records of a checkpoint zip opened from a seekable binary file."""

    def __init__(self, f):
        self._f = f
        try:
            self._zip = zipfile.ZipFile(f)
            names = self._zip.namelist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError,
                struct.error, UnicodeDecodeError) as e:
            raise _corrupt("reading zip archive: failed finding central directory") from e
        if not names or "/" not in names[0]:
            raise _corrupt("reading zip archive: no records found")
        self.prefix = names[0].split("/", 1)[0]
        f.seek(0, os.SEEK_END)
        self._size = f.tell()

    def has_record(self, name):
        return f"{self.prefix}/{name}" in self._zip.NameToInfo

    def _info(self, name):
        info = self._zip.NameToInfo.get(f"{self.prefix}/{name}")
        if info is None:
            raise RuntimeError(f"PytorchStreamReader failed locating file {name}: file not found")
        return info

    def _data_offset(self, name, info):
        if not 0 <= info.header_offset <= self._size - _LOCAL_HEADER.size:
            raise _corrupt(f"reading file {name}: bad local file header offset")
        self._f.seek(info.header_offset)
        header = self._f.read(_LOCAL_HEADER.size)
        if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            raise _corrupt(f"reading file {name}: bad local file header")
        _, _, name_len, extra_len = _LOCAL_HEADER.unpack(header)
        start = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len
        if start + info.file_size > self._size:
            raise _corrupt(f"reading file {name}: the record runs past the end of the file")
        return start

    def read(self, name):
        """The bytes of one record (CRC-checked), writable."""
        info = self._info(name)
        if info.compress_type != zipfile.ZIP_STORED:
            try:
                return np.frombuffer(bytearray(self._zip.read(info)), np.uint8)
            except Exception as e:          # zipfile's errors vary with the damage
                raise _corrupt(f"reading file {name}: {e}") from e
        start = self._data_offset(name, info)
        buf = np.empty(info.file_size, np.uint8)       # not zero-filled: read over at once
        self._f.seek(start)
        if _read_with_crc(self._f, memoryview(buf), name) != info.CRC:
            raise _corrupt(f"reading file {name}: CRC-32 mismatch")
        return buf

    def mmap(self, name, whole):
        """One stored record as a slice of ``whole``, a memory map of the entire file."""
        info = self._info(name)
        if info.compress_type != zipfile.ZIP_STORED:
            raise RuntimeError(f"ember.load(mmap=True): record {name} is compressed; only "
                               f"stored records can be memory-mapped")
        start = self._data_offset(name, info)
        return whole[start:start + info.file_size]

    def memmap(self, path, shared=False):
        """A memory map of the whole file: copy-on-write (writes never reach the file), or
        ``shared`` (writes do, as with ``mmap.MAP_SHARED``)."""
        return np.memmap(path, dtype=np.uint8, mode="r+" if shared else "c")
