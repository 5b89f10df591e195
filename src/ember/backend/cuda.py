"""The CUDA backend on CuPy: imported on the first use of a CUDA device, never by CPU code.

Importing this module registers ``cupy.ndarray`` with the dispatcher's lookup tables and
installs an allocator over CuPy's memory pool that tracks peak usage and raises
``ember.cuda.OutOfMemoryError`` with PyTorch's message. Faster kernels for hot ops will be
registered from ``backend/cuda_kernels/`` (see NOTE [CUDA kernel overrides] in docs/cuda.md).
"""

import contextlib
import functools
import weakref

import cupy
import cupyx.scipy.special
from cupy._core import _routines_linalg as _GEMM
import numpy as np

from ember import backend
from ember.cuda import _sync_debug
from ember.cuda.memory import OutOfMemoryError, format_size

__all__ = ["cupy", "special", "to_device", "to_host", "device_guard", "elsewhere",
           "operands_elsewhere", "pin", "is_pinned",
           "defer_check", "raise_deferred",
           "memory_allocated", "max_memory_allocated", "memory_reserved",
           "reset_peak_memory_stats", "empty_cache"]

backend.XP_BY_ARRAY_TYPE[cupy.ndarray] = cupy
backend.SEVERAL_GPUS[0] = cupy.cuda.runtime.getDeviceCount() > 1
special = cupyx.scipy.special

# --- device placement and copies --------------------------------------------------------------


def device_guard(index):
    """A context in which ``index`` is CuPy's current device (None: leave it as it is)."""
    return contextlib.nullcontext() if index is None else cupy.cuda.Device(index)


def elsewhere(array):
    """The index of the GPU holding CuPy ``array`` when it is not the current one, else
    None."""
    index = array.data.device_id
    return None if index == cupy.cuda.runtime.getDevice() else index


def operands_elsewhere(arrays, mismatch):
    """``elsewhere`` of the CuPy arrays among ``arrays``; ``mismatch()`` raises when they
    lie on two GPUs."""
    index = None
    for a in arrays:
        if type(a) is cupy.ndarray:
            here = a.data.device_id
            if index is None:
                index = here
            elif here != index:
                mismatch()
    return None if index is None or index == cupy.cuda.runtime.getDevice() else index


def to_device(array, index, non_blocking=False):
    """A new CuPy array on GPU ``index`` (None: the current GPU) holding ``array``'s values
    (NumPy or CuPy). ``non_blocking`` makes an upload from pinned memory asynchronous on the
    current stream, as PyTorch does; from pageable memory the copy completes before return."""
    with device_guard(index):
        if type(array) is cupy.ndarray:
            moved = array.copy()            # CuPy copies into the current device's memory
            return moved if array.size else _size1_strides(cupy, moved, array)
        order = _dense_order(array)
        if order is not None:               # PyTorch keeps a dense permuted layout
            moved = cupy.asarray(array.transpose(order), blocking=not non_blocking)
            return _size1_strides(cupy, moved.transpose(np.argsort(order)), array)
        return _size1_strides(cupy, cupy.asarray(array, blocking=not non_blocking), array)


def _size1_strides(xp, moved, array):
    """``moved`` (``array``'s values, laid out as it is) with ``array``'s strides on its
    size-1 dims too, which place no element: PyTorch's copy of a dense tensor keeps its
    strides exactly (a (1, 1, 3, 3) channels_last tensor's are (9, 1, 3, 1)), an empty
    one's all (over memory of its own: see _storage_place.born_row_major)."""
    if not array.size and array.ndim:   # (a fresh NumPy or CuPy one's: row-major)
        from ember._storage_place import born_row_major, over_own_memory
        return over_own_memory(moved, born_row_major(array).strides)
    if moved.strides == array.strides or not array.size or 1 not in array.shape \
            or moved.itemsize != array.itemsize or min(array.strides) < 0:
        return moved
    if not (array.flags.c_contiguous or _dense_order(array) is not None):
        return moved                        # (not dense: PyTorch's copy is row-major)
    from ember._memory_format import restrided
    return restrided(xp, moved, array.shape, array.strides)


def _dense_order(array):
    """The dim order that makes a dense but permuted array C-contiguous (None for one that
    is C-contiguous already, or not dense): CuPy would upload it C-contiguous."""
    if array.flags.c_contiguous or array.ndim < 2:
        return None
    order = sorted(range(array.ndim), key=lambda d: -array.strides[d])
    return order if array.transpose(order).flags.c_contiguous else None


def to_host(array, non_blocking=False):
    """A new NumPy array with a CuPy array's values. ``non_blocking`` downloads into pinned
    memory on the current stream and returns before the copy completes (PyTorch's
    ``.to("cpu", non_blocking=True)``): synchronize before reading it."""
    if not non_blocking:
        if _sync_debug.MODE[0]:         # NOTE [Sync debug mode]
            _sync_debug.synchronizing()
        raise_deferred()
        order = _dense_order(array)
        if order is not None:               # PyTorch keeps a dense permuted layout
            host = array.transpose(order).get().transpose(np.argsort(order))
        else:
            host = array.get()
        return _size1_strides(np, host, array)
    return array.get(out=_pinned_empty(array.shape, array.dtype), blocking=False)


def _pinned_empty(shape, dtype):
    size = int(np.prod(shape))
    if size == 0:
        return np.empty(shape, dtype)
    mem = cupy.cuda.alloc_pinned_memory(size * np.dtype(dtype).itemsize)
    return np.frombuffer(mem, dtype, size).reshape(shape)


class _Staging:
    """Pinned host slots for small uploads the host must not wait for (an upload from pageable
    memory runs only after the queued kernels). A slot is written again only after the copy
    that last read it has run, which its event tells (normally long done)."""

    SLOTS, SLOT_BYTES = 16, 1 << 18

    def __init__(self):
        self.slots = [None] * self.SLOTS
        self.turn = 0

    def upload(self, host):
        """``host`` (C-contiguous, at most a slot) on the current device, copied on the
        current stream."""
        i, self.turn = self.turn, (self.turn + 1) % self.SLOTS
        if self.slots[i] is None:
            self.slots[i] = [_pinned_empty((self.SLOT_BYTES,), np.uint8), None]
        memory, copied = self.slots[i]
        if copied is not None:
            copied.synchronize()
        staged = memory[:host.nbytes].view(host.dtype).reshape(host.shape)
        staged[...] = host
        device = cupy.asarray(staged, blocking=False)
        copied = cupy.cuda.Event(disable_timing=True)
        copied.record()
        self.slots[i][1] = copied
        return device


_STAGING = _Staging()


def upload_async(host, index=None):
    """A NumPy array on GPU ``index`` (None: the current one). A small one (a kernel's table)
    goes through pinned memory, so the host does not wait for the GPU; a big one is a plain
    upload."""
    if host.nbytes > _Staging.SLOT_BYTES:
        return to_device(host, index)
    with device_guard(index):
        return _STAGING.upload(np.ascontiguousarray(host))


def pin(array):
    """A copy of a NumPy array in page-locked host memory (CuPy's pinned memory pool)."""
    out = _pinned_empty(array.shape, array.dtype)
    out[...] = array
    return out


def is_pinned(array):
    """Whether a NumPy array's memory comes from CuPy's pinned memory (see ``pin``)."""
    owner = array
    while owner is not None:
        if isinstance(owner, cupy.cuda.PinnedMemoryPointer):
            return True
        owner = owner.obj if isinstance(owner, memoryview) else getattr(owner, "base", None)
    return False


# --- deferred input checks -------------------------------------------------------------------
# NOTE [Deferred device checks]
# Some inputs can only be checked by reading them: an embedding's indices, a loss's class
# targets. On a GPU, reading them means waiting for every queued kernel, a stall in the
# middle of each training step. PyTorch checks them in its kernels instead (a device-side
# assert) and reports the failure at a later CUDA call. ember keeps each check's outcome as
# a flag on the device and reads the flags where the host waits for the device anyway: a
# download (``.item()``, ``.cpu()``, printing), a synchronize, or every ``_MAX_DEFERRED``
# checks. The op itself runs on indices made safe (CuPy's indexing wraps out-of-range
# indices; the Triton kernels clamp them), so nothing reads outside its buffers meanwhile,
# and the error, when it comes, is the one the CPU raises at once.

_DEFERRED = []          # (flag on a GPU, error factory, stream), in the order the checks ran
_MAX_DEFERRED = 64


def defer_check(failed, error):
    """Record a check whose 0-d boolean GPU array ``failed`` raises ``error()`` if true."""
    _DEFERRED.append((failed, error, cupy.cuda.get_current_stream()))
    if len(_DEFERRED) >= _MAX_DEFERRED:
        raise_deferred()


def raise_deferred():
    """Read the recorded checks' flags (one download per GPU) and raise the first failure."""
    if not _DEFERRED:
        return
    checks = _DEFERRED[:]
    _DEFERRED.clear()
    current = cupy.cuda.get_current_stream()
    for stream in {stream for _, _, stream in checks if stream != current}:
        stream.synchronize()            # a flag computed on another stream must be done
    by_device = {}
    for i, (failed, _, _) in enumerate(checks):
        by_device.setdefault(failed.device.id, []).append(i)
    hits = [False] * len(checks)
    for index, positions in by_device.items():
        with device_guard(index):
            flags = cupy.stack([checks[i][0] for i in positions]).get()
        for i, hit in zip(positions, flags):
            hits[i] = hit
    for hit, (failed, error, _) in zip(hits, checks):
        if hit:
            with device_guard(failed.device.id):    # the message may look at the operands
                exc = error()
            raise exc


# --- memory statistics and out-of-memory errors -----------------------------------------------

_POOL = cupy.get_default_memory_pool()
_PEAK = {}                      # device id -> the most bytes in use since the last reset


def _malloc(size):
    """CuPy's pool allocation, recording the peak and rewording out-of-memory errors."""
    if _AWAITING:
        release_finished()
    try:
        mem = _POOL.malloc(size)
    except cupy.cuda.memory.OutOfMemoryError:
        raise _out_of_memory(size) from None
    used = _POOL.used_bytes()
    dev = mem.device_id
    if used > _PEAK.get(dev, 0):
        _PEAK[dev] = used
    return mem


def _out_of_memory(size):
    dev = cupy.cuda.runtime.getDevice()
    free, total = cupy.cuda.runtime.memGetInfo()
    used, reserved = _POOL.used_bytes(), _POOL.total_bytes()
    limit = _POOL.get_limit()
    capped = (f" ember may hold {format_size(limit)} of it "
              f"(set_per_process_memory_fraction).") if limit else ""
    return OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate {format_size(size)}. GPU {dev} has a total "
        f"capacity of {format_size(total)} of which {format_size(free)} is free.{capped} Of "
        f"the allocated memory {format_size(used)} is allocated by ember, and "
        f"{format_size(reserved - used)} is reserved by ember but unallocated. Freeing cached "
        f"blocks with ember.cuda.empty_cache() may help.")


cupy.cuda.set_allocator(_malloc)


# NOTE [Recorded streams]: CuPy's pool hands a freed block to the next allocation on the
# stream that allocated it. A tensor also used on another stream (a prefetching loader's
# batch, copied on a side stream and read on the main one) must outlive the work queued
# there: ``keep_for_streams`` holds its array after the tensor dies until events recorded
# on those streams at that moment have completed, as PyTorch's allocator does.
_AWAITING = []                  # (events, array): freed arrays that streams may still read


def keep_for_streams(owner, array, streams):
    """Hold ``array`` once ``owner`` (a tensor) is gone, until the work queued on
    ``streams`` (CuPy streams) by then has completed."""
    weakref.finalize(owner, _await, array, tuple(streams)).atexit = False   # CUDA may be gone


def _await(array, streams):
    _AWAITING.append(([stream.record() for stream in streams], array))


def release_finished():
    """Let go of the held arrays whose streams have finished with them."""
    _AWAITING[:] = [(events, array) for events, array in _AWAITING
                    if not all(event.done for event in events)]


def memory_allocated(index):
    """Bytes held by live arrays on GPU ``index``."""
    with device_guard(index):
        return _POOL.used_bytes()


def max_memory_allocated(index):
    """The peak of ``memory_allocated`` since startup or the last reset."""
    with device_guard(index):
        return max(_PEAK.get(cupy.cuda.runtime.getDevice(), 0), _POOL.used_bytes())


def memory_reserved(index):
    """Bytes CuPy's pool holds on GPU ``index`` (in use or cached)."""
    with device_guard(index):
        return _POOL.total_bytes()


def reset_peak_memory_stats(index):
    """Restart peak tracking on GPU ``index`` from the current usage."""
    with device_guard(index):
        _PEAK[cupy.cuda.runtime.getDevice()] = _POOL.used_bytes()


def limit_memory(index, fraction):
    """Cap CuPy's pool on GPU ``index`` at ``fraction`` of the GPU's memory (1: no cap)."""
    with device_guard(index):
        _POOL.set_limit(fraction=fraction if fraction < 1 else None)


# NOTE [TF32]: PyTorch lets float32 convolutions use TF32 tensor cores by default
# (``backends.cudnn.allow_tf32``) and float32 matrix products only when asked
# (``backends.cuda.matmul.allow_tf32``, ``set_float32_matmul_precision``). CuPy has one switch
# for all its float32 products, the compute type: it rests at the matmul setting, and the
# ops PyTorch runs in cuDNN (convolutions, the recurrent layers' time steps) hold it at the
# cuDNN one while they run. TF32 keeps float32's range with a 10-bit mantissa, for several
# times the GEMM speed.

def _tf32_capable():
    return int(cupy.cuda.Device().compute_capability) >= 80     # Ampere and later


def float32_gemms(tf32):
    """Let CuPy's float32 matrix products use TF32 tensor cores (``tf32``) or keep them in
    full precision, on every GPU; returns whether TF32 was on. GPUs before Ampere always
    keep full precision."""
    wanted = _GEMM.COMPUTE_TYPE_TF32 if tf32 and _tf32_capable() else \
        _GEMM.COMPUTE_TYPE_DEFAULT
    before = _GEMM.get_compute_type(np.float32)
    if before != wanted:
        _GEMM.set_compute_type(np.float32, wanted)
    return before == _GEMM.COMPUTE_TYPE_TF32


def tf32_gemms_on():
    """Whether float32 matrix products may use TF32 here and now (the kernels' own products
    follow CuPy's switch)."""
    return _GEMM.get_compute_type(np.float32) == _GEMM.COMPUTE_TYPE_TF32


@contextlib.contextmanager
def tf32_gemms(allowed):
    """A context in which float32 matrix products use TF32 as ``allowed`` says."""
    before = float32_gemms(allowed)
    try:
        yield
    finally:
        float32_gemms(before)


def linalg_checked():
    """A context in which cupy.linalg raises LinAlgError on a singular (or not
    positive-definite) matrix, as NumPy does; unchecked, CuPy returns NaNs."""
    return cupyx.errstate(linalg="raise")


def empty_cache():
    """Return cached, unused blocks (device and pinned host memory) to the driver."""
    _POOL.free_all_blocks()
    empty_host_cache()


def empty_host_cache():
    """Return cached, unused pinned host memory to the driver."""
    cupy.get_default_pinned_memory_pool().free_all_blocks()


@functools.cache
def allocatable_dtypes(index):
    """The set of ember dtypes whose arrays CuPy can allocate on GPU ``index``, tried once."""
    from ember import _dtype
    found = set()
    with cupy.cuda.Device(index):
        for dtype in _dtype.ALL_DTYPES:
            try:
                cupy.empty(1, dtype.np)
            except (TypeError, ValueError, NotImplementedError):
                continue
            found.add(dtype)
    return frozenset(found)


from ember.backend import cuda_kernels  # noqa: E402
from ember.backends import _precision  # noqa: E402

cuda_kernels.load(cupy)
float32_gemms(_precision.allow_tf32())
