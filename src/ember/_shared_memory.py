"""CPU tensors in shared memory (``Tensor.share_memory_``), and how they cross processes.

NOTE [Shared-memory segments]
A shared tensor's memory is a ``multiprocessing.shared_memory.SharedMemory`` segment, so it
works with every start method (fork inherits the mapping; spawn and queues attach by name).
A ``_Segment`` owns the SharedMemory object; the flat ``SegmentArray`` over the segment's
bytes (through a ctypes array holding the ``_Segment``) is in the base chain of every array
over the segment, so the segment lives while any of them does. When the ``_Segment`` goes,
a ``weakref.finalize`` closes the mapping and, in the process that created the segment,
unlinks its name; when a process ends (the main one, or a multiprocessing child, which a
fork leaves through ``os._exit``), it unlinks the names it made and still holds, so nothing
stays in /dev/shm. Each process keeps one ``SegmentArray`` per segment name (attaching twice
to a name gives the same memory back).

Tensors travel through multiprocessing (Process arguments under spawn, ``Queue.put``) by
``ForkingPickler``: a shared tensor is reduced to the segment's name, dtype, shape, byte
strides and byte offset, and the receiver attaches to the same memory. Plain ``pickle``
and ``ember.save`` still write the bytes (as PyTorch's do), since a name means nothing once
the creator has released its segment. The creator must keep the tensor alive until the
receiver has attached (PyTorch asks the same of CUDA tensors sent to other processes).
"""

import ctypes
import multiprocessing.reduction
import os
import pickle
import weakref
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from ember._storage import extent
from ember._conj_view import memory, set_memory
from ember._storage_place import _storage_root
from ember.serialization._pickler import StorageArray

__all__ = ["share", "is_shared", "segment_of"]


class SegmentArray(StorageArray):
    """The flat bytes of one shared-memory segment: the base of every array over it."""


class _Segment:
    """Owns one SharedMemory segment: closes (and in its creator unlinks) it when it goes."""

    def __init__(self, shm):
        # not at exit: arrays over the mapping may still be read then (see _unlink_at_exit)
        weakref.finalize(self, _release, shm).atexit = False


# the SegmentArray of each segment this process uses, by name
_segments = weakref.WeakValueDictionary()
# name -> (SharedMemory, creator pid) of the segments made here and not unlinked yet; a forked
# child inherits its parent's entries, and only the creator unlinks
_created = {}
_exit_hook_pid = [None]


def _release(shm):
    shm.close()
    _unlink(shm.name)


def _unlink(name):
    entry = _created.pop(name, None)
    if entry is None or entry[1] != os.getpid():
        return
    shm = entry[0]
    if os.name != "posix":
        shm.unlink()
        return
    from multiprocessing import resource_tracker
    # a child sharing our resource tracker may have unregistered the name (see _attach):
    # register it again, so that unlink's own unregister finds it there
    resource_tracker.register("/" + name, "shared_memory")
    try:
        shm.unlink()
    except FileNotFoundError:
        resource_tracker.unregister("/" + name, "shared_memory")


def _unlink_at_exit():
    for name in list(_created):
        _unlink(name)


def _watch_exit():
    # multiprocessing runs its finalizers when the main process exits and when a child
    # process ends (a forked child leaves through os._exit, past atexit); each process
    # registers its own (a Finalize does nothing in a process forked after it was made)
    if _exit_hook_pid[0] != os.getpid():
        from multiprocessing import util
        util.Finalize(None, _unlink_at_exit, exitpriority=0)
        _exit_hook_pid[0] = os.getpid()


def _segment_array(shm, created):
    # the array reads a ctypes view at the segment's raw address, not a buffer export of
    # shm.buf: an export would make the finalizer's close() fail
    address = ctypes.addressof(ctypes.c_char.from_buffer(shm.buf))
    raw = (ctypes.c_ubyte * shm.size).from_address(address)
    raw.segment = _Segment(shm)
    if created:
        _watch_exit()
        _created[shm.name] = (shm, os.getpid())
    seg = np.ndarray.__new__(SegmentArray, (shm.size,), np.uint8, buffer=raw)
    seg.name = shm.name
    _segments[shm.name] = seg
    return seg


def _allocate(nbytes):
    return _segment_array(SharedMemory(create=True, size=max(nbytes, 1)), True)


def _attach(name):
    seg = _segments.get(name)
    if seg is not None:
        return seg
    shm = SharedMemory(name=name)
    if os.name == "posix":
        # Python < 3.13 registers every attached segment with the resource tracker, which
        # unlinks what is still registered when its processes exit: a child with a tracker
        # of its own (forked before the parent's tracker started, or a process started
        # apart) would unlink the creator's segment when it exits. The creator unlinks it.
        from multiprocessing import resource_tracker
        resource_tracker.unregister("/" + shm.name, "shared_memory")
    return _segment_array(shm, False)


def _address(array):
    return array.__array_interface__["data"][0]


def segment_of(array):
    """The SegmentArray an array's memory lies in, or None."""
    obj = array
    while obj is not None:
        if isinstance(obj, SegmentArray):
            return obj
        obj = getattr(obj, "base", None)
    return None


def is_shared(t):
    """Whether tensor ``t``'s memory is shared (always for CUDA tensors, as in PyTorch)."""
    if type(t._data) is not np.ndarray:
        return True
    return segment_of(t._data) is not None


def _over(seg, like, offset):
    """A plain array with ``like``'s shape, dtype and strides at byte ``offset`` of ``seg``."""
    return np.ndarray(like.shape, like.dtype, buffer=seg, offset=offset, strides=like.strides)


def share(t):
    """Move tensor ``t``'s memory (that of its view root) into a new shared segment."""
    _register(type(t))
    if type(t._data) is not np.ndarray or is_shared(t):
        return
    root = _storage_root(t)
    old = root._data
    lo, hi = extent(old)
    seg = _allocate(hi - lo)
    new = _over(seg, old, _address(old) - lo)
    np.copyto(new, old, casting="no")
    root._data = new
    if root is not t:       # (a conjugate view's memory, not its values)
        mine = memory(t)
        set_memory(t, _over(seg, mine, _address(mine) - lo))


# ----- crossing processes ---------------------------------------------------------------------

def _rebuild(cls, name, dtype, shape, strides, offset, requires_grad):
    from ember._tensor import _make
    seg = _attach(name)
    t = _make(np.ndarray(shape, dtype, buffer=seg, offset=offset, strides=strides), cls)
    t._requires_grad = requires_grad
    _register(cls)
    return t


def _reduce(t):
    array = t._data
    seg = segment_of(array) if type(array) is np.ndarray else None
    if seg is None:
        return t.__reduce_ex__(pickle.DEFAULT_PROTOCOL)
    if t.requires_grad and t._grad_fn is not None:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries.  If you just want to "
            "transfer the data, call detach() on the tensor before serializing (e.g., "
            "putting it on the queue).")
    return (_rebuild, (type(t), seg.name, array.dtype, array.shape, array.strides,
                       _address(array) - _address(seg), t.requires_grad))


_registered = set()


def _register(cls):
    # ForkingPickler looks reducers up by exact type
    if cls not in _registered:
        multiprocessing.reduction.ForkingPickler.register(cls, _reduce)
        _registered.add(cls)


def _register_defaults():
    from ember._tensor import Tensor
    from ember.nn.parameter import Parameter
    _register(Tensor)          # views of shared Parameters are plain Tensors
    _register(Parameter)


_register_defaults()
