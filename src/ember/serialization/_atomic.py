"""Atomic saves: the data goes to a temporary file beside the target, is made durable
(fsync), and only then replaces the target, so a crash mid-save leaves the old file intact.

The fsync at the end waits for the disk. To keep that wait short, the disk writes of the data
already written are started every few MB while more is written (Linux's sync_file_range,
which starts write-back without waiting for it), so the disk works alongside the writer.
"""

import contextlib
import ctypes
import functools
import os
import sys
import tempfile

WRITEBACK_STEP = 8 << 20                # start the disk writes every this many bytes
_SYNC_FILE_RANGE_WRITE = 2              # start write-back of the dirty pages; do not wait


def atomic_write(path, write):
    """Run ``write(file)`` on a temporary binary file that then replaces the file at
    ``path`` (keeping its permissions), or is removed if ``write`` raises."""
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise RuntimeError(f"Parent directory {folder} does not exist.")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fp:
            write(_EarlyWriteback(fp))
            fp.flush()
            os.fsync(fp.fileno())
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):      # make the rename itself durable
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class _EarlyWriteback:
    """Binary file ``fp`` whose ``write`` starts the disk writes of each ``WRITEBACK_STEP``
    bytes written (where the system can)."""

    def __init__(self, fp):
        self._fp, self._fp_write = fp, fp.write
        self._unstarted = 0                     # bytes written since the last start
        self._started_to = 0                    # the file offset write-back was started to

    def write(self, data):
        """Write bytes-like ``data``; return the number of bytes written."""
        if len(data) > WRITEBACK_STEP:
            return self._write_in_steps(memoryview(data).cast("B"))
        n = self._fp_write(data)
        self._unstarted += n
        if self._unstarted >= WRITEBACK_STEP:
            self._start_writeback()
        return n

    def _write_in_steps(self, view):
        for start in range(0, len(view), WRITEBACK_STEP):
            self.write(view[start:start + WRITEBACK_STEP])
        return len(view)

    def _start_writeback(self):
        start_writeback = _sync_file_range()
        if start_writeback is not None:
            self._fp.flush()
            # nbytes 0 means "to the end of the file"; a failure is ignored: it only hints the
            # kernel, and the closing fsync still makes the file durable
            start_writeback(self._fp.fileno(), self._started_to, 0, _SYNC_FILE_RANGE_WRITE)
            self._started_to = self._fp.tell()
        self._unstarted = 0

    def __getattr__(self, name):
        return getattr(self._fp, name)


@functools.cache
def _sync_file_range():
    """libc's ``sync_file_range`` (Linux), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _file_mode(path):
    """The permissions a saved file gets: the replaced file's, else 0o666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    try:
        with open("/proc/self/status") as status:
            umask = next(int(line.split()[1], 8) for line in status
                         if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask
