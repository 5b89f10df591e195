"""The accelerator's memory statistics and caches (``torch.accelerator.memory``): those of
``ember.cuda.memory``, addressed by device index. Each raises without an accelerator."""

from ember.accelerator._current import index_of, require

__all__ = ["empty_cache", "empty_host_cache", "get_memory_info", "max_memory_allocated",
           "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
           "reset_accumulated_memory_stats", "reset_peak_memory_stats"]


def _memory():
    from ember.cuda import memory
    return memory


def empty_cache():
    """Release the allocator's cached, unused device memory."""
    require()
    _memory().empty_cache()


def empty_host_cache():
    """Release the cached, unused pinned host memory."""
    require()
    from ember import backend
    if backend.cuda_initialized():
        backend.cuda_backend().empty_host_cache()


def get_memory_info(device_index=None, /):
    """(free, total) bytes of the device's memory, as the driver reports them."""
    return _memory().mem_get_info(index_of(device_index))


def memory_allocated(device_index=None, /):
    """Bytes of device memory held by tensors."""
    return _memory().memory_allocated(index_of(device_index))


def max_memory_allocated(device_index=None, /):
    """The peak of ``memory_allocated`` since the start or ``reset_peak_memory_stats``."""
    return _memory().max_memory_allocated(index_of(device_index))


def memory_reserved(device_index=None, /):
    """Bytes the caching allocator holds: in use by tensors or cached."""
    return _memory().memory_reserved(index_of(device_index))


def max_memory_reserved(device_index=None, /):
    """The peak of ``memory_reserved`` since the start or ``reset_peak_memory_stats``."""
    return _memory().max_memory_reserved(index_of(device_index))


def memory_stats(device_index=None, /):
    """The allocator's statistics under PyTorch's key names (``ember.cuda.memory_stats``)."""
    return _memory().memory_stats(index_of(device_index))


def reset_peak_memory_stats(device_index=None, /):
    """Restart peak tracking from the current usage."""
    _memory().reset_peak_memory_stats(index_of(device_index))


def reset_accumulated_memory_stats(device_index=None, /):
    """Restart the allocator's cumulative counters."""
    _memory().reset_accumulated_memory_stats(index_of(device_index))
