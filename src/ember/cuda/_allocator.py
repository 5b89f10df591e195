"""The caching allocator's state and raw interface (``torch.cuda.memory``): snapshots, raw
allocations for other libraries, switching caching off, and pinned-memory statistics.

ember's GPU allocator is CuPy's memory pool behind ember's allocation function (see
backend/cuda.py). CuPy tells how many bytes its pool holds and how many are in use on each
GPU, but not where its ``cudaMalloc`` regions lie nor how they are split, so a snapshot
describes each GPU's pool as a whole. Nothing here imports CuPy before CUDA is in use.
"""

import contextlib
import operator
from collections import OrderedDict

from ember import backend
from ember.cuda._common import cupy, index_of

__all__ = ["memory_snapshot", "caching_allocator_alloc", "caching_allocator_delete",
           "caching_allocator_enable", "caching_allocator_disabled", "host_memory_stats",
           "host_memory_stats_as_nested_dict", "reset_peak_host_memory_stats",
           "reset_accumulated_host_memory_stats"]

_RAW = {}                       # address -> the CuPy MemoryPointer caching_allocator_alloc made
_CACHING = {"enabled": True}    # and, while off, "pooled": the allocator to restore


def memory_snapshot(mempool_id=None, include_traces=True):
    """The allocator's segments, as far as CuPy's pool can tell: one per GPU ember has
    allocated on, standing for its whole pool there, with PyTorch's keys ``device``,
    ``total_size`` (reserved bytes), ``allocated_size`` and ``active_size`` (bytes in use),
    ``segment_pool_id`` ((0, 0): ember has only the default pool), ``is_expandable``
    (False), ``frames`` and ``blocks``: the bytes in use ("active_allocated") and the cached
    ones ("inactive"). What CuPy does not tell is left out (``address``, ``stream``,
    ``segment_type``, ``requested_size``); no allocation history is kept, so ``frames`` are
    empty whatever ``include_traces`` says. Empty before CUDA is used and for another pool's
    ``mempool_id``."""
    if not backend.cuda_initialized() or mempool_id not in (None, (0, 0)):
        return []
    cuda = backend.cuda_backend()
    segments = []
    for index in sorted(cuda._PEAK):    # the GPUs ember's allocator has served
        reserved, used = cuda.memory_reserved(index), cuda.memory_allocated(index)
        if not reserved:
            continue
        blocks = [{"size": size, "state": state, "frames": []}
                  for size, state in ((used, "active_allocated"), (reserved - used, "inactive"))
                  if size]
        segments.append({"device": index, "total_size": reserved, "allocated_size": used,
                         "active_size": used, "segment_pool_id": (0, 0),
                         "is_expandable": False, "frames": [], "blocks": blocks})
    return segments


def caching_allocator_alloc(size, device=None, stream=None):
    """``size`` bytes of GPU memory from ember's allocator, for another library: on
    ``device`` (the current GPU by default), for use on ``stream`` (an ember.cuda.Stream or
    a ``cudaStream_t`` as an int; the current stream by default). Returns its address; the
    memory is ember's until ``caching_allocator_delete`` gives it back."""
    from ember.cuda.streams import ExternalStream, Stream, current_stream
    backend.cuda_backend()
    index = index_of(device, optional=False)
    if stream is None:
        stream = current_stream(index)
    elif isinstance(stream, int) and not isinstance(stream, bool):
        stream = ExternalStream(stream, index)
    elif not isinstance(stream, Stream):
        raise TypeError("Invalid type for stream argument, must be `torch.cuda.Stream` or "
                        "`int` representing a pointer to an existing stream")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise TypeError(f"caching_allocator_alloc(): argument 'size' must be a non-negative "
                        f"int, not {size!r}")
    if size == 0:
        return 0
    with cupy().cuda.Device(index), stream:
        memory = cupy().cuda.alloc(size)
    _RAW[memory.ptr] = memory
    return memory.ptr


def caching_allocator_delete(mem_ptr):
    """Give back memory that ``caching_allocator_alloc`` returned (its address); the
    allocator reuses it for the stream it was allocated for. 0 (a null pointer) is ignored."""
    mem_ptr = operator.index(mem_ptr)
    if mem_ptr and _RAW.pop(mem_ptr, None) is None:
        raise RuntimeError(f"invalid device pointer: {mem_ptr:#x}")


def _uncached(size):
    """An allocation of its own, freed to the driver when its last array goes."""
    cuda = cupy().cuda
    return cuda.MemoryPointer(cuda.Memory(size), 0)


def caching_allocator_enable(value=True):
    """Turn ember's caching allocator on (the default) or off. While it is off, each
    allocation is a ``cudaMalloc`` of its own, given back to the driver when its last tensor
    goes; that memory is outside CuPy's pool, so ``memory_allocated`` does not count it and
    ``set_per_process_memory_fraction`` does not cap it. Does nothing before CUDA is used,
    as in PyTorch."""
    value = bool(value)
    if not backend.cuda_initialized() or value == _CACHING["enabled"]:
        return
    cuda = cupy().cuda
    if value:
        cuda.set_allocator(_CACHING.pop("pooled"))
    else:
        _CACHING["pooled"] = cuda.get_allocator()
        cuda.set_allocator(_uncached)
    _CACHING["enabled"] = value


@contextlib.contextmanager
def caching_allocator_disabled():
    """A ``with`` block in which the caching allocator is off (``caching_allocator_enable``)
    and after which it is as before."""
    before = _CACHING["enabled"]
    caching_allocator_enable(False)
    try:
        yield
    finally:
        caching_allocator_enable(before)


def host_memory_stats():
    """Statistics of the pinned (page-locked) host memory allocator under PyTorch's keys:
    none, as CuPy's pinned memory pool keeps none (it counts only its free blocks), so an
    empty OrderedDict, PyTorch's own answer before CUDA is used."""
    return OrderedDict()


def host_memory_stats_as_nested_dict():
    """``host_memory_stats`` as nested dicts: empty (see ``host_memory_stats``)."""
    return {}


def reset_peak_host_memory_stats():
    """Restart the pinned allocator's peak statistics: ember keeps none to restart."""


def reset_accumulated_host_memory_stats():
    """Restart the pinned allocator's cumulative statistics: ember keeps none to restart."""
