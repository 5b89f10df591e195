"""GPU memory statistics over CuPy's memory pool (``torch.cuda.memory``).

Before the CUDA backend is first used (and on machines without CUDA) the statistics are 0
and ``empty_cache`` does nothing, as in PyTorch; nothing here imports CuPy by itself. The
snapshot, the raw allocations and the caching switch are in _allocator.py.
"""

import warnings
from collections import OrderedDict

from ember import backend
from ember.cuda._allocator import (caching_allocator_alloc, caching_allocator_delete,
                                   caching_allocator_disabled, caching_allocator_enable,
                                   host_memory_stats, host_memory_stats_as_nested_dict,
                                   memory_snapshot, reset_accumulated_host_memory_stats,
                                   reset_peak_host_memory_stats)
from ember.cuda._common import index_of, is_initialized
from ember.cuda._nvml import list_gpu_processes

__all__ = ["OutOfMemoryError", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated",
           "empty_cache", "mem_get_info", "memory_stats", "memory_summary", "memory_cached",
           "max_memory_cached", "set_per_process_memory_fraction",
           "get_per_process_memory_fraction", "format_size", "reset_max_memory_cached",
           "reset_accumulated_memory_stats", "get_allocator_backend",
           "memory_stats_as_nested_dict", "memory_snapshot", "caching_allocator_alloc",
           "caching_allocator_delete", "caching_allocator_enable", "caching_allocator_disabled",
           "host_memory_stats", "host_memory_stats_as_nested_dict",
           "reset_peak_host_memory_stats", "reset_accumulated_host_memory_stats",
           "is_initialized", "list_gpu_processes"]

# NOTE [Peak reserved memory]: CuPy's pool only grows on allocation and only shrinks when its
# cached blocks are freed, which ember does in empty_cache; recording the reserved bytes there
# (and at reset_peak_memory_stats) makes max(recorded, current) the peak since the last reset.
# CuPy also frees its cache by itself to retry an allocation that ran out of memory; a peak
# before such a retry is missed.
_PEAK_RESERVED = {}             # GPU index -> reserved bytes at the last empty_cache or reset
_FRACTION = {}                  # GPU index -> set_per_process_memory_fraction's cap


class OutOfMemoryError(RuntimeError):
    """A GPU allocation failed (``torch.cuda.OutOfMemoryError``)."""


class AcceleratorError(RuntimeError):
    """Exception raised while executing on device (``torch.AcceleratorError``)."""


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


def max_memory_reserved(device=None):
    """The peak of ``memory_reserved`` since the start or ``reset_peak_memory_stats``
    (NOTE [Peak reserved memory])."""
    if not backend.cuda_initialized():
        return 0
    index = index_of(device, optional=False)
    return max(_PEAK_RESERVED.get(index, 0), memory_reserved(index))


def reset_peak_memory_stats(device=None):
    """Restart peak tracking (``max_memory_allocated``, ``max_memory_reserved``) from the
    current usage."""
    cuda = backend.cuda_backend()
    index = index_of(device, optional=False)
    cuda.reset_peak_memory_stats(index)
    _PEAK_RESERVED[index] = cuda.memory_reserved(index)


reset_max_memory_allocated = reset_peak_memory_stats


def reset_max_memory_cached(device=None):
    """Deprecated: ``reset_peak_memory_stats``."""
    warnings.warn("torch.cuda.reset_max_memory_cached now calls "
                  "torch.cuda.reset_peak_memory_stats, which resets /all/ peak memory stats.",
                  FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None):
    """Restart the cumulative counters of ``memory_stats``: ember's allocator (CuPy's pool)
    keeps none, so there is nothing to restart."""
    backend.require_cuda()
    index_of(device, optional=False)


def get_allocator_backend():
    """The GPU allocator in use: "native", a caching pool (CuPy's, here) rather than
    ``cudaMallocAsync``."""
    return "native"


def empty_cache():
    """Release cached, unused GPU (and pinned host) memory back to the driver."""
    if backend.cuda_initialized():
        index = index_of(None, optional=False)
        _PEAK_RESERVED[index] = max_memory_reserved(index)
        backend.cuda_backend().empty_cache()


def set_per_process_memory_fraction(fraction, device=None):
    """Let ember's allocator hold at most ``fraction`` (0 to 1) of ``device``'s memory; an
    allocation past it raises OutOfMemoryError."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    backend.require_cuda()
    index = index_of(device, optional=False)
    backend.cuda_backend().limit_memory(index, fraction)
    _FRACTION[index] = fraction


def get_per_process_memory_fraction(device=None):
    """The fraction of ``device``'s memory ember's allocator may hold (1.0 unless set)."""
    backend.require_cuda()
    return _FRACTION.get(index_of(device, optional=False), 1.0)


def memory_stats(device=None):
    """The statistics ember's allocator keeps for ``device``, under PyTorch's key names:
    ``{allocated,reserved}_bytes.all.{current,peak}`` (an empty OrderedDict before CUDA is
    used, or without it). PyTorch's other keys (per-pool splits, allocation counts,
    cumulative totals) are not tracked by CuPy's pool, so they are absent."""
    if not backend.cuda_initialized():
        return OrderedDict()
    index = index_of(device, optional=False)
    stats = {"allocated_bytes.all.current": memory_allocated(index),
             "allocated_bytes.all.peak": max_memory_allocated(index),
             "reserved_bytes.all.current": memory_reserved(index),
             "reserved_bytes.all.peak": max_memory_reserved(index)}
    return OrderedDict(sorted(stats.items()))


def memory_stats_as_nested_dict(device=None):
    """``memory_stats`` with its dotted keys as nested dicts (``["allocated_bytes"]["all"]
    ["peak"]``)."""
    nested = {}
    for key, value in memory_stats(device).items():
        *path, last = key.split(".")
        table = nested
        for part in path:
            table = table.setdefault(part, {})
        table[last] = value
    return nested


def memory_summary(device=None, abbreviated=False):
    """A printable table of ``device``'s current and peak allocated and reserved memory
    (``abbreviated`` is accepted: the table is short already)."""
    stats = memory_stats(device)
    index = index_of(device, optional=False) if stats else index_of(device) or 0
    rows = [("Allocated memory", "allocated_bytes"), ("GPU reserved memory", "reserved_bytes")]
    rule = "|" + "-" * 75 + "|"
    lines = ["|" + "=" * 75 + "|",
             f"|{f'ember CUDA memory summary, device ID {index}':^75}|", rule,
             f"|{'Metric':^23}|{'Cur Usage':^25}|{'Peak Usage':^25}|", rule]
    for title, key in rows:
        current, peak = (format_size(stats.get(f"{key}.all.{m}", 0)) for m in ("current", "peak"))
        lines.append(f"| {title:<22}|{current:>24} |{peak:>24} |")
    lines.append("|" + "=" * 75 + "|")
    return "\n".join(lines) + "\n"


def memory_cached(device=None):
    """Deprecated name of ``memory_reserved``."""
    warnings.warn("`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`",
                  FutureWarning, stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device=None):
    """Deprecated name of ``max_memory_reserved``."""
    warnings.warn("`torch.cuda.max_memory_cached` has been renamed to "
                  "`torch.cuda.max_memory_reserved`", FutureWarning, stacklevel=2)
    return max_memory_reserved(device)


def mem_get_info(device=None):
    """(free, total) bytes of ``device``'s memory as the driver reports them."""
    from ember.cuda._common import cupy
    with cupy().cuda.Device(index_of(device, optional=False)):
        return cupy().cuda.runtime.memGetInfo()
