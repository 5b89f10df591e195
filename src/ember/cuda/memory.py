"""GPU memory statistics over CuPy's memory pool (``torch.cuda.memory``).

Before the CUDA backend is first used (and on machines without CUDA) the statistics are 0
and ``empty_cache`` does nothing, as in PyTorch; nothing here imports CuPy by itself.
"""

from ember import backend
from ember.cuda._common import index_of

__all__ = ["OutOfMemoryError", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "empty_cache",
           "mem_get_info", "format_size"]


class OutOfMemoryError(RuntimeError):
    """A GPU allocation failed (``torch.cuda.OutOfMemoryError``)."""


def format_size(nbytes):
    """A byte count as PyTorch's memory messages write it: "512 bytes", "20.00 MiB"."""
    for limit, unit in ((2 ** 10, None), (2 ** 20, "KiB"), (2 ** 30, "MiB")):
        if nbytes <= limit:
            return f"{nbytes} bytes" if unit is None else f"{nbytes / (limit >> 10):.2f} {unit}"
    return f"{nbytes / 2 ** 30:.2f} GiB"


def _stat(name, device):
    if not backend.cuda_initialized():
        return 0
    return getattr(backend.cuda_backend(), name)(index_of(device))


def memory_allocated(device=None):
    """Bytes of GPU memory held by tensors on ``device`` (the current GPU by default)."""
    return _stat("memory_allocated", device)


def max_memory_allocated(device=None):
    """The peak of ``memory_allocated`` since the start or ``reset_peak_memory_stats``."""
    return _stat("max_memory_allocated", device)


def memory_reserved(device=None):
    """Bytes the caching allocator holds on ``device``: in use by tensors or cached."""
    return _stat("memory_reserved", device)


def reset_peak_memory_stats(device=None):
    """Restart peak tracking (``max_memory_allocated``) from the current usage."""
    backend.cuda_backend().reset_peak_memory_stats(index_of(device))


reset_max_memory_allocated = reset_peak_memory_stats


def empty_cache():
    """Release cached, unused GPU (and pinned host) memory back to the driver."""
    if backend.cuda_initialized():
        backend.cuda_backend().empty_cache()


def mem_get_info(device=None):
    """(free, total) bytes of ``device``'s memory as the driver reports them."""
    from ember.cuda._common import cupy
    with cupy().cuda.Device(index_of(device, optional=False)):
        return cupy().cuda.runtime.memGetInfo()
