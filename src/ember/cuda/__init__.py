"""ember.cuda: GPUs through CuPy (``torch.cuda``).

``is_available``, ``device_count``, ``is_bf16_supported``, seeding, memory statistics and
snapshots, the caching switch and ``empty_cache`` work on any machine (False, 0, empty,
no-ops); everything else needs CuPy and a GPU and raises ember's "not compiled with CUDA"
error without them. CuPy is imported on the first call that needs it. ``ember.cuda.amp``
(PyTorch's deprecated autocast aliases), ``ember.cuda.comm`` (copies across GPUs),
``ember.cuda.nvtx`` (profiler ranges) and ``ember.cuda.profiler`` (starting and stopping a
profiler's collection) load on first use.
"""

import importlib

from ember import backend as _backend
from ember._legacy_types import CUDA_TYPES as _LEGACY_TYPES
from ember.cuda._allocator import (caching_allocator_alloc, caching_allocator_delete,
                                   caching_allocator_disabled, caching_allocator_enable,
                                   host_memory_stats, host_memory_stats_as_nested_dict,
                                   memory_snapshot, reset_accumulated_host_memory_stats,
                                   reset_peak_host_memory_stats)
from ember.cuda._common import cupy as _cupy, index_of as _index, is_initialized
from ember.cuda._nvml import (clock_rate, device_memory_used, list_gpu_processes,
                              memory_usage, power_draw, temperature, utilization)
from ember.cuda.memory import (AcceleratorError, OutOfMemoryError, empty_cache,
                               get_allocator_backend, get_per_process_memory_fraction,
                               max_memory_allocated, max_memory_cached, max_memory_reserved,
                               mem_get_info,
                               memory_allocated, memory_cached, memory_reserved, memory_stats,
                               memory_stats_as_nested_dict, memory_summary,
                               reset_accumulated_memory_stats, reset_max_memory_allocated,
                               reset_max_memory_cached, reset_peak_memory_stats,
                               set_per_process_memory_fraction)
from ember.cuda.random import (get_rng_state, get_rng_state_all, initial_seed, manual_seed,
                               manual_seed_all, seed, seed_all, set_rng_state,
                               set_rng_state_all)
from ember.cuda.streams import (Event, ExternalStream, Stream, StreamContext, current_stream,
                                default_stream, is_current_stream_capturing, set_stream,
                                stream)
from ember.cuda._sync_debug import get_sync_debug_mode, set_sync_debug_mode

__all__ = [
    "is_available", "device_count", "is_initialized", "init", "current_device", "set_device",
    "device", "device_of", "get_device_name", "get_device_properties",
    "get_device_capability", "can_device_access_peer", "get_arch_list", "ipc_collect",
    "synchronize", "Stream", "Event", "StreamContext", "stream",
    "current_stream", "default_stream", "set_stream", "manual_seed", "manual_seed_all",
    "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "get_rng_state_all", "set_rng_state_all", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "empty_cache", "mem_get_info", "memory_stats",
    "memory_summary", "memory_cached", "max_memory_cached", "set_per_process_memory_fraction",
    "get_per_process_memory_fraction", "OutOfMemoryError", "AcceleratorError",
    "is_bf16_supported", "amp", "comm", "nvtx", *_LEGACY_TYPES,
    "ExternalStream", "is_current_stream_capturing", "reset_max_memory_cached",
    "reset_accumulated_memory_stats", "get_allocator_backend", "memory_stats_as_nested_dict",
    "utilization", "memory_usage", "temperature", "power_draw", "clock_rate",
    "device_memory_used", "list_gpu_processes", "is_tf32_supported", "get_gencode_flags",
    "current_blas_handle", "CudaError", "check_error", "has_half", "has_magma",
    "default_generators", "get_stream_from_external", "memory_snapshot",
    "caching_allocator_alloc", "caching_allocator_delete", "caching_allocator_enable",
    "caching_allocator_disabled", "host_memory_stats", "host_memory_stats_as_nested_dict",
    "reset_peak_host_memory_stats", "reset_accumulated_host_memory_stats",
    "set_sync_debug_mode", "get_sync_debug_mode", "current_solver_handle",
    "DeferredCudaCallError", "cudaStatus", "profiler", "sparse",
]

has_half = True
has_magma = False

globals().update(_LEGACY_TYPES)     # ember.cuda.FloatTensor, ... (PyTorch's legacy types)


def is_available():
    """True when a CUDA device can be used."""
    return _backend.cuda_available()


def device_count():
    """The number of usable CUDA devices (0 without CuPy)."""
    if not is_available():
        return 0
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def is_bf16_supported(including_emulation=True):
    """Whether the current GPU supports bfloat16: natively from compute capability 8.0
    (Ampere); ``including_emulation`` counts older GPUs too, on which CuPy emulates
    bfloat16 arithmetic. False without CUDA."""
    if not is_available():
        return False
    return including_emulation or get_device_capability()[0] >= 8


def is_tf32_supported():
    """Whether the current GPU has TF32 tensor cores (compute capability 8.0, Ampere, and
    later); False without CUDA."""
    return is_available() and get_device_capability()[0] >= 8


class CudaError(RuntimeError):
    """A CUDA runtime call failed (``torch.cuda.CudaError``): the message is CUDA's."""

    def __init__(self, code):
        self.code = code
        super().__init__(str(_cupy().cuda.runtime.CUDARuntimeError(code)))


class DeferredCudaCallError(Exception):
    """A call queued until CUDA started failed then (``torch.cuda.DeferredCudaCallError``;
    ember queues none, so it never raises one: the class is there for ``except`` clauses)."""


class cudaStatus:  # noqa: N801  (PyTorch's name)
    """The ``cudaError_t`` values PyTorch names: success and "not ready"."""

    SUCCESS = 0
    ERROR_NOT_READY = 34


def check_error(res):
    """Raise CudaError unless ``res`` (a ``cudaError_t``) is success (0)."""
    if res != 0:
        raise CudaError(res)


_LAZY = ("amp", "comm", "nvtx", "profiler", "sparse", "default_generators")  # resolved on first use


def __getattr__(name):
    if name in ("amp", "comm", "nvtx", "profiler", "sparse"):
        return importlib.import_module(f"ember.cuda.{name}")
    if name == "default_generators":    # one per GPU; none without CUDA
        from ember.cuda.random import default_generator
        return tuple(default_generator(i) for i in range(device_count()))
    raise AttributeError(f"module 'ember.cuda' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def get_stream_from_external(data_ptr, device=None):
    """A Stream over a ``cudaStream_t`` another library made (``ExternalStream``); ember
    neither owns nor destroys it."""
    return ExternalStream(data_ptr, device)


def init():
    """Load the CUDA backend now (it loads on first use anyway)."""
    _backend.cuda_backend()


def current_device():
    """The index of the current GPU."""
    return _cupy().cuda.runtime.getDevice()


def set_device(device):
    """Make ``device`` the current GPU (a negative index does nothing, as in PyTorch)."""
    index = _index(device)
    if index is not None and index >= 0:
        _cupy().cuda.runtime.setDevice(index)


class device:
    """``with ember.cuda.device(1):`` makes GPU 1 current inside the block."""

    def __init__(self, device):
        self.idx = _index(device)
        self._prev = None

    def __enter__(self):
        if self.idx is not None and self.idx >= 0:
            self._prev = current_device()
            if self._prev != self.idx:
                set_device(self.idx)

    def __exit__(self, *exc):
        if self._prev is not None and self._prev != self.idx:
            set_device(self._prev)
        self._prev = None


class device_of(device):
    """``with ember.cuda.device_of(t):`` makes ``t``'s GPU current (no-op for CPU tensors)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


class _CudaDeviceProperties:
    """A GPU's properties, with PyTorch's field names (``get_device_properties``)."""

    def __init__(self, props):
        name = props["name"]
        self.name = name.decode() if isinstance(name, bytes) else name
        self.major = props["major"]
        self.minor = props["minor"]
        self.total_memory = props["totalGlobalMem"]
        self.multi_processor_count = props["multiProcessorCount"]
        self.L2_cache_size = props.get("l2CacheSize", 0)
        self.warp_size = props.get("warpSize", 32)
        self.is_integrated = bool(props.get("integrated", 0))
        self.is_multi_gpu_board = bool(props.get("isMultiGpuBoard", 0))

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // 2 ** 20}MB, "
                f"multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size // 2 ** 20}MB)")


def get_device_properties(device=None):
    """The properties (name, capability, memory, SM count) of ``device``."""
    index = _index(device, optional=False)
    return _CudaDeviceProperties(_cupy().cuda.runtime.getDeviceProperties(index))


def get_device_name(device=None):
    """The GPU's marketing name, e.g. "NVIDIA H200"."""
    return get_device_properties(device).name


def get_device_capability(device=None):
    """The GPU's compute capability as (major, minor)."""
    props = get_device_properties(device)
    return props.major, props.minor


def can_device_access_peer(device, peer_device):
    """Whether GPU ``device`` can read and write ``peer_device``'s memory directly."""
    _backend.require_cuda()
    index, peer = _index(device, optional=False), _index(peer_device, optional=False)
    count = device_count()
    for i in (index, peer):
        if not 0 <= i < count:
            raise AssertionError("Invalid device id")
    return bool(_cupy().cuda.runtime.deviceCanAccessPeer(index, peer))


def get_arch_list():
    """The architectures ember's GPU code is built for: CuPy and Triton compile for each
    GPU present when first used, so those GPUs' ("sm_90" ...); empty without CUDA."""
    if not is_available():
        return []
    return sorted({"sm_{}{}".format(*get_device_capability(i)) for i in range(device_count())})


def ipc_collect():
    """Release GPU memory shared with other processes that they have let go (ember shares
    none through CUDA IPC, so there is nothing to release)."""
    _backend.require_cuda()


def get_gencode_flags():
    """The nvcc ``-gencode`` flags of ``get_arch_list()``'s architectures."""
    return " ".join(f"-gencode compute=compute_{arch[3:]},code={arch}"
                    for arch in get_arch_list())


def current_blas_handle():
    """The current GPU's cuBLAS handle (``cublasHandle_t``) as an int."""
    return _cupy().cuda.device.get_cublas_handle()


def current_solver_handle():
    """The current GPU's cuSOLVER dense handle (``cusolverDnHandle_t``) as an int."""
    return _cupy().cuda.device.get_cusolver_handle()


def synchronize(device=None):
    """Wait until all queued work on ``device`` (the current GPU) has finished; raises the
    error of an op's input check that failed meanwhile (NOTE [Deferred device checks])."""
    _cupy().cuda.Device(_index(device, optional=False)).synchronize()
    _backend.cuda_backend().raise_deferred()
