"""How worker processes hand large tensors to the main process without pickling their
bytes through a pipe.

A worker pickles each batch with a reducer that writes every large CPU tensor's bytes to a
file in a RAM filesystem (``/dev/shm``) and pickles only the file's name. The main process
maps the file (copy-on-write, so the tensor is writable and nothing is copied) and unlinks
it at once: the pages live exactly as long as the tensor. Files of a loader iterator share
a name prefix, so whatever is still in flight when it shuts down is removed by one glob.

See NOTE [ Shared memory free space ] for the fallback when /dev/shm is small.
"""

import errno
import glob
import io
import mmap
import os
import pickle
import shutil
import tempfile
import warnings

import numpy as np

from ember._storage_place import _placement
from ember._tensor import Tensor, _make

__all__ = ["Transport", "loads"]

SHARE_THRESHOLD = 64 * 1024      # smaller tensors travel inside the pickle
_MIN_FREE = 256 * 2 ** 20

# NOTE [ Shared memory free space ]
# Containers often mount a 64 MiB /dev/shm. Writing past it through a memory map kills the
# process with SIGBUS; ember writes files with os.write instead, which fails with ENOSPC,
# and checks the free space when a loader starts: below _MIN_FREE it uses the temporary
# directory (disk-backed, slower, safe) and says so once.
_warned = False


def shared_directory():
    """The directory workers share batches through: /dev/shm if it has room, else the
    temporary directory (with a one-time warning)."""
    global _warned
    try:
        free = shutil.disk_usage("/dev/shm").free
    except OSError:
        free = 0
    if free >= _MIN_FREE:
        return "/dev/shm"
    if not _warned:
        _warned = True
        warnings.warn(f"DataLoader: the shared-memory filesystem /dev/shm has only "
                      f"{free // 2 ** 20} MiB free, so workers will pass batches through "
                      f"files in {tempfile.gettempdir()} instead (slower). Give the machine "
                      f"or container more shared memory (e.g. docker run --shm-size=2g).",
                      RuntimeWarning, stacklevel=4)
    return tempfile.gettempdir()


class Transport:
    """One loader iterator's files: ``<directory>/<prefix><worker>-<n>``."""

    def __init__(self, directory, prefix):
        self.directory = directory
        self.prefix = prefix

    def pickler_for(self, worker_id):
        """A function pickling an object with its large tensors moved to files."""
        return _Dumps(os.path.join(self.directory, f"{self.prefix}{worker_id}-"))

    def cleanup(self):
        """Remove every file of this iterator still on disk (batches never received)."""
        for path in glob.glob(os.path.join(glob.escape(self.directory),
                                           glob.escape(self.prefix) + "*")):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


class _Dumps:
    """Picklable (it travels to the worker) and callable: ``dumps(obj) -> bytes``."""

    def __init__(self, stem):
        self.stem = stem
        self.count = 0

    def __call__(self, obj):
        buf = io.BytesIO()
        _SharingPickler(buf, self).dump(obj)
        return buf.getvalue()

    def next_path(self):
        self.count += 1
        return f"{self.stem}{self.count}"


class _SharingPickler(pickle.Pickler):
    def __init__(self, file, dumps):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.dumps = dumps

    def reducer_override(self, x):
        if (isinstance(x, Tensor) and type(x._data) is np.ndarray
                and x._data.nbytes >= SHARE_THRESHOLD):
            path = self.dumps.next_path()
            if _write(path, x._data):
                return _rebuild, (path, x._data.shape, x._data.dtype, x.requires_grad, type(x))
        if isinstance(x, Tensor) and type(x).__reduce_ex__ is Tensor.__reduce_ex__ \
                and _placement(x) is not None:
            # a small sample may view a large dataset tensor: send its elements, not the
            # whole memory plain pickling sends (to keep views views)
            return _make_own, (type(x), np.ascontiguousarray(x._data), x.requires_grad)
        return NotImplemented


def _make_own(cls, array, requires_grad):
    """A tensor of subclass ``cls`` over ``array``."""
    t = _make(array, cls)
    t._requires_grad = requires_grad
    return t


def _write(path, array):
    """Write ``array``'s bytes to a new file; False (and no file) if the disk is full."""
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        view = memoryview(data)
        while len(view):
            view = view[os.write(fd, view):]
    except OSError as e:
        os.close(fd)
        _unlink(path)
        if e.errno != errno.ENOSPC:
            raise
        _no_space(path)
        return False
    os.close(fd)
    return True


def _no_space(path):
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"DataLoader worker: no space left in {os.path.dirname(path)}; large "
                      f"batches are being pickled through the pipe instead (slower).",
                      RuntimeWarning)


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _rebuild(path, shape, dtype, requires_grad, cls):
    """Map a worker's file as a tensor's memory and unlink the file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        nbytes = os.fstat(fd).st_size
        memory = mmap.mmap(fd, nbytes, access=mmap.ACCESS_COPY) if nbytes else b""
    finally:
        os.close(fd)
        _unlink(path)
    array = np.frombuffer(memory, dtype=np.uint8, count=nbytes).view(dtype).reshape(shape)
    t = _make(array, cls)
    t._requires_grad = requires_grad
    return t


def loads(data):
    """Unpickle what a worker's pickler produced (mapping and unlinking its files)."""
    return pickle.loads(data)
