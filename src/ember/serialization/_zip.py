"""PyTorch's checkpoint container: a zip of stored (uncompressed) records under one folder,
each record's data aligned to 64 bytes so storages can be memory-mapped in place."""

import os
import struct
import zipfile
import zlib

import numpy as np

from ember.serialization import _crc

ALIGNMENT = 64
_LOCAL_HEADER = struct.Struct("<4s22sHH")       # signature, fixed fields, name and extra lengths


def _corrupt(message):
    return RuntimeError(
        f"PytorchStreamReader failed {message}. If you are seeing this error, there is a high "
        f"likelihood that your checkpoint file is corrupted. This can happen if the checkpoint "
        f"was not saved properly, was transferred incorrectly, or the file was modified after "
        f"saving.")


# the records are written as PyTorch's writer writes them: no local CRC or sizes (bit 3: a
# descriptor after the data holds them), UTF-8 names (bit 11), data aligned by an "FB" extra
# field of "Z"s; zip64 fields where a size or offset does not fit 32 bits
_FLAGS = 0x0808
_VERSION, _VERSION_ZIP64 = 20, 45
_DOS_DATE = (1 << 5) | 1                         # 1980-01-01, so equal saves give equal files
_ZIP64_LIMIT = 0xFFFFFFFF                        # this and above needs a zip64 field
_MARK = 0xFFFFFFFF                               # "see the zip64 field" in a 32-bit field
_ENTRIES_LIMIT = 0xFFFF                          # this many records or more needs zip64
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_DESCRIPTOR, _DESCRIPTOR_ZIP64 = struct.Struct("<IIII"), struct.Struct("<IIQQ")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_END = struct.Struct("<IHHHHIIH")
_END_ZIP64 = struct.Struct("<IQHHIIQQQQ")
_LOCATOR_ZIP64 = struct.Struct("<IIQI")


def write_archive(f, records, prefix="archive", checksums=True):
    """Write ``(name, data)`` records into a zip at binary file ``f``, data aligned to 64
    bytes. ``data`` is bytes-like, or an int: a record of that many bytes whose data is
    skipped (zeros, CRC-32 0). ``checksums=False`` writes CRC-32 0 for every record, as
    PyTorch does under ``set_crc32_options(False)``."""
    writer = _Writer(f)
    for name, data in records:
        # the worker threads checksum the record while it is written
        crc = _crc.start(memoryview(data).cast("B")) \
            if checksums and not isinstance(data, int) else None
        writer.record(f"{prefix}/{name}".encode(), data, crc)
    writer.finish()


class _Writer:
    """A streaming zip writer for stored records (it never seeks back)."""

    def __init__(self, f):
        self._f = f
        self._pos = 0                           # offsets count from the archive's start
        self._entries = []                      # (name, crc, size, header offset)

    def _write(self, data):
        self._f.write(data)
        self._pos += len(data)

    def record(self, name, data, checksum=None):
        """Write one record: local header, data, data descriptor. ``checksum`` is the
        record's started CRC-32 (``_crc.start``); None writes 0."""
        skipped = isinstance(data, int)
        size = data if skipped else len(data)
        zip64 = size >= _ZIP64_LIMIT
        extra = struct.pack("<HHQQ", 1, 16, 0, 0) if zip64 else b""
        pad = -(self._pos + _LOCAL.size + len(name) + len(extra) + 4) % ALIGNMENT
        extra += struct.pack("<2sH", b"FB", pad) + b"Z" * pad
        offset = self._pos
        self._write(_LOCAL.pack(0x04034B50, _VERSION_ZIP64 if zip64 else _VERSION, _FLAGS, 0,
                                0, _DOS_DATE, 0, _MARK if zip64 else 0,
                                _MARK if zip64 else 0, len(name), len(extra)) + name + extra)
        if skipped:
            self._skip(size)
        else:
            self._write(memoryview(data).cast("B"))
        crc = 0 if checksum is None else checksum.value()
        descriptor = _DESCRIPTOR_ZIP64 if zip64 else _DESCRIPTOR
        self._write(descriptor.pack(0x08074B50, crc, size, size))
        self._entries.append((name, crc, size, offset))

    def _skip(self, size):
        zeros = bytes(min(size, _crc.SLICE))
        for start in range(0, size, len(zeros) or 1):
            self._write(zeros[:size - start])

    def finish(self):
        """Write the central directory and the end records."""
        directory_offset = self._pos
        for name, crc, size, offset in self._entries:
            self._write_central(name, crc, size, offset)
        count, directory_size = len(self._entries), self._pos - directory_offset
        if (count >= _ENTRIES_LIMIT or directory_size >= _ZIP64_LIMIT
                or directory_offset >= _ZIP64_LIMIT):
            end64 = self._pos
            self._write(_END_ZIP64.pack(0x06064B50, _END_ZIP64.size - 12, _VERSION_ZIP64,
                                        _VERSION_ZIP64, 0, 0, count, count, directory_size,
                                        directory_offset))
            self._write(_LOCATOR_ZIP64.pack(0x07064B50, 0, end64, 1))
        fits = [value if value < _ZIP64_LIMIT else _MARK
                for value in (directory_size, directory_offset)]
        entries = count if count < _ENTRIES_LIMIT else 0xFFFF
        self._write(_END.pack(0x06054B50, 0, 0, entries, entries, *fits, 0))

    def _write_central(self, name, crc, size, offset):
        fields = (size, size, offset)                   # uncompressed, compressed, offset
        big = [value for value in fields if value >= _ZIP64_LIMIT]
        extra = struct.pack(f"<HH{len(big)}Q", 1, 8 * len(big), *big) if big else b""
        size32, _, offset32 = (value if value < _ZIP64_LIMIT else _MARK for value in fields)
        self._write(_CENTRAL.pack(
            0x02014B50, _VERSION_ZIP64 if big else _VERSION,
            _VERSION_ZIP64 if big else _VERSION, _FLAGS, 0, 0, _DOS_DATE, crc,
            size32, size32, len(name), len(extra), 0, 0, 0, 0, offset32) + name + extra)


def _read_checked(f, out, name, expected_crc):
    """Fill ``out`` from ``f`` and check its CRC-32 (checksummed slice by slice on the worker
    threads while the next slices are read). A CRC-32 of 0 is not checked: PyTorch writes
    0 when told not to compute them (``set_crc32_options(False)``, ``skip_data``)."""
    if not expected_crc or len(out) <= _crc.SLICE:
        if f.readinto(out) != len(out):
            raise _corrupt(f"reading file {name}: file read failed")
        crc = zlib.crc32(out) if expected_crc else 0
    else:
        checksum = _crc.SlicedCrc()
        for piece in _crc.slices(out):
            if f.readinto(piece) != len(piece):
                raise _corrupt(f"reading file {name}: file read failed")
            checksum.add(piece)
        crc = checksum.value()
    if crc != expected_crc:
        raise _corrupt(f"reading file {name}: CRC-32 mismatch")


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
        except NotImplementedError as e:    # a damaged central directory's version field
            raise _corrupt(f"reading zip archive: {e}") from e
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
        _read_checked(self._f, memoryview(buf), name, info.CRC)
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
