"""The only place that knows NumPy from CuPy: maps devices and arrays to array namespaces.

The CUDA backend (``backend/cuda.py``) is imported on the first use of a CUDA device; until
then no CuPy module is loaded, so CPU programs never pay for (or need) it.
"""

import contextlib
import ctypes
import functools
import sys

import numpy as np

from ember._deterministic import STATE as _DETERMINISM
from ember._device import CPU, device
from ember.backend.cpu_memory import keep_freed_memory
from ember.backend.meta import NO_DATA, MetaArray
from ember.backend.numpy_at import numpy_at

__all__ = ["xp_for", "xp_of", "device_of", "special_of", "fft_of", "require_cuda",
           "cuda_available", "cuda_backend", "cuda_initialized", "host_array", "on_device_of",
           "quiet_fp", "loud_fp", "DEVICE_KERNELS", "device_kernel", "accumulate",
           "device_assert", "device_constant", "device_copy", "device_scalar",
           "indexing_checks_bounds", "cudnn_tf32", "matmul_precision_changed",
           "low_precision_product", "combine_at", "bincount", "reads_stall", "SEVERAL_GPUS",
           "gpu_elsewhere", "operands_gpu_elsewhere", "device_guard", "array_from_dlpack",
           "broadcast_view", "ROUNDS_SCALAR_OPERANDS"]

keep_freed_memory()      # NOTE [Page faults on fresh tensors] in cpu_memory.py

# backend/cuda.py adds cupy.ndarray; meta arrays hold no values: ops on them run on NumPy
# stand-ins (ops/_meta.py)
XP_BY_ARRAY_TYPE = {np.ndarray: np, MetaArray: np}
_DEVICE_BY_ARRAY_TYPE = {np.ndarray: CPU, MetaArray: device("meta")}
_CUDA_DEVICES = {}                         # GPU index -> device("cuda", index)
DEVICE_KERNELS = {}     # name -> a fused kernel for GPU arrays (filled by backend/cuda_kernels)
SEVERAL_GPUS = [False]  # set by backend/cuda.py: only then can a GPU array be elsewhere
# PyTorch's CPU kernels round a number operand of a 16-bit float op to that dtype; its CUDA
# kernels read it in float32 (NOTE [Scalars beside 16-bit floats] in ops/_dispatch.py)
ROUNDS_SCALAR_OPERANDS = frozenset({np.ndarray})


def xp_of(array):
    """The array namespace (numpy or cupy) that owns ``array``."""
    return XP_BY_ARRAY_TYPE[type(array)]


def device_of(array):
    """The ember device an array lives on."""
    dev = _DEVICE_BY_ARRAY_TYPE.get(type(array))
    if dev is not None:
        return dev
    index = array.device.id
    dev = _CUDA_DEVICES.get(index)
    if dev is None:
        dev = _CUDA_DEVICES[index] = device("cuda", index)
    return dev


def gpu_elsewhere(array):
    """The index of the GPU holding ``array`` when that is not the current GPU, else None
    (host arrays included): work on it then runs inside ``device_guard(index)``, as PyTorch
    runs an op on its operands' device where CuPy would launch it on the current one."""
    if not SEVERAL_GPUS[0] or type(array) is np.ndarray:
        return None
    return cuda_backend().elsewhere(array)


def operands_gpu_elsewhere(arrays, mismatch):
    """``gpu_elsewhere`` of the GPU arrays among ``arrays`` (None entries and host arrays
    skipped); ``mismatch()`` raises when they lie on two GPUs."""
    if not SEVERAL_GPUS[0]:
        return None
    return cuda_backend().operands_elsewhere(arrays, mismatch)


def device_guard(index):
    """A context in which GPU ``index`` is current (None: nothing changes)."""
    if index is None:
        return contextlib.nullcontext()
    return cuda_backend().device_guard(index)


def on_device_of(host, array):
    """A NumPy array (random draws, masks made on the host) placed where ``array`` lives."""
    if type(array) is MetaArray:
        return MetaArray(host.shape, host.dtype)
    if XP_BY_ARRAY_TYPE.get(type(array), np) is np:
        return host
    return cuda_backend().to_device(host, array.device.id)


def device_kernel(array, name):
    """The fused GPU kernel registered as ``name`` when ``array`` lives on a GPU, else None."""
    return None if type(array) is np.ndarray else DEVICE_KERNELS.get(name)


def accumulate(xp, name, x, axis):
    """``xp.<name>.accumulate(x, axis=axis)`` (a running maximum, minimum, logaddexp ...).
    CuPy's ufuncs accumulate only add and multiply: on a GPU the others run as a log-step scan
    (each of log2(n) passes combines every element with the one ``shift`` before it)."""
    ufunc = getattr(xp, name)
    if xp is np or name in ("add", "multiply"):
        return ufunc.accumulate(x, axis=axis)
    out = xp.moveaxis(x, axis, 0).copy()
    shift = 1
    while shift < out.shape[0]:
        out[shift:] = ufunc(out[shift:], out[:-shift])      # from the previous pass's values
        shift *= 2
    return xp.moveaxis(out, 0, axis)


def combine_at(xp, ufunc, target, index, values):
    """``ufunc.at(target, index, values)``: values landing on one element combine in turn.
    On a GPU, products (CuPy has no ``multiply.at``) and, under
    ``use_deterministic_algorithms(True)``, float sums take an ordered path
    (``ordered_sums``) instead of atomics, so reruns agree to the bit."""
    if xp is np:
        numpy_at(ufunc, target, index, values)
    elif ufunc is np.multiply or (ufunc is np.add and _DETERMINISM.enabled
                                  and target.dtype.kind not in "biu"):
        from ember.backend.ordered_sums import ordered_at
        ordered_at(xp, ufunc, target, index, values)
    else:
        getattr(xp, ufunc.__name__).at(target, index, values)


def bincount(xp, flat, weights=None, minlength=0):
    """``xp.bincount``; weighted sums run-to-run identical on a GPU in deterministic mode."""
    if weights is None or xp is np or not _DETERMINISM.enabled:
        return xp.bincount(flat, weights, minlength=minlength)
    out = xp.zeros(max(minlength, int(flat.max()) + 1 if flat.size else 0), np.float64)
    combine_at(xp, np.add, out, flat, weights.astype(np.float64))
    return out


def host_array(array):
    """``array`` as a NumPy array: itself, or a copy of a GPU array's values."""
    if type(array) is np.ndarray:
        return array
    if type(array) is MetaArray:
        raise NotImplementedError(NO_DATA)
    return cuda_backend().to_host(array)


_DLPACK_GPU = {2, 13}           # kDLCUDA, kDLCUDAManaged (kDLCUDAHost, 3, is host memory)


class _HostCapsule:
    """A legacy DLPack capsule (``to_dlpack``'s) presented as a host producer to NumPy."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return 1, 0


def array_from_dlpack(producer):
    """The array behind a DLPack producer (an object with ``__dlpack__``, or a capsule),
    sharing its memory: a NumPy array for host memory, a CuPy one for a GPU's."""
    if hasattr(producer, "__dlpack_device__"):
        if int(producer.__dlpack_device__()[0]) in _DLPACK_GPU:
            return cuda_backend().cupy.from_dlpack(producer)
        return np.from_dlpack(producer)
    try:
        return _writable(np.from_dlpack(_HostCapsule(producer)))
    except (BufferError, RuntimeError, TypeError):
        if not cuda_available():
            raise
    return cuda_backend().cupy.from_dlpack(producer)   # a capsule of GPU memory


def _writable(array):
    """NumPy marks an array from a legacy capsule read-only, since such a capsule cannot say;
    PyTorch's tensors from one are writable: a writable array over the same memory."""
    if array.flags.writeable or not array.size or min(array.strides, default=0) < 0:
        return array
    span = sum((n - 1) * s for n, s in zip(array.shape, array.strides)) + array.itemsize
    memory = (ctypes.c_byte * span).from_address(array.ctypes.data)
    memory.owner = array                # keeps the capsule's memory alive
    return np.ndarray(array.shape, array.dtype, memory, strides=array.strides)


def broadcast_view(xp, array, shape, strides=None):
    """``array`` broadcast to ``shape`` as a view that writes through, as an expanded tensor
    does in PyTorch (NumPy makes broadcast views read-only; CuPy's are writable).
    ``strides``: the view's byte strides when the caller knows them (a broadcast's: 0 along
    the dims it repeats); a NumPy array laid out row-major is then viewed directly."""
    if xp is np and (array.ndim == 0 or strides is not None and type(array) is np.ndarray
                     and array.size and array.flags.c_contiguous):
        # one value repeated (a full reduction's gradient), or a row-major array's memory
        # read with the strides given: 0.3 us against broadcast_to's 3 (a view of the array
        # itself: writable where it is, as PyTorch's expanded tensors are)
        return np.ndarray(shape, array.dtype, array, 0,
                          (0,) * len(shape) if strides is None else strides)
    view = xp.broadcast_to(array, shape)
    if xp is np and array.flags.writeable:
        view.flags.writeable = True
    return view


def reads_stall(xp):
    """Whether reading an array value of ``xp`` on the host waits for the device (a GPU's
    queue of kernels): there, ops take a branch-free path over one that reads the data to
    choose (whether a NaN occurs, whether a sum underflows)."""
    return xp is not np


def indexing_checks_bounds(xp):
    """Whether ``xp``'s integer-array indexing raises IndexError on an out-of-range entry
    (NumPy) rather than wrapping it around (CuPy, whose ops then need their own check)."""
    return xp is np


def device_scalar(xp, value):
    """``value`` (a NumPy scalar or 0-d array) as a 0-d array of its dtype on ``xp``'s
    device. A GPU's is filled by a kernel: copying it from host memory would wait for the
    device."""
    value = np.asarray(value)
    if xp is np:
        return value
    # 16-bit floats pass as Python floats (exact): ml_dtypes scalars are no kernel argument
    low = value.dtype.kind in "fV" and value.dtype.itemsize <= 2
    return xp.full((), float(value) if low else value[()], dtype=value.dtype)


def device_assert(failed, error):
    """Raise ``error()`` when the boolean scalar ``failed`` (an op's input check) is true.
    A host value is checked at once; a GPU's is checked the next time the host waits for the
    device anyway (NOTE [Deferred device checks] in backend/cuda.py), so checking an op's
    input never stalls the GPU's queue."""
    if type(failed) is np.ndarray or isinstance(failed, (bool, np.bool_)):
        if failed:
            raise error()
    else:
        cuda_backend().defer_check(failed, error)


_CACHE = {}             # (device, key) -> what device_constant or device_copy keeps
_MAX_CACHED = 512


def _cached(dev, key, build):
    hit = _CACHE.get((dev, key))
    if hit is None:
        if len(_CACHE) >= _MAX_CACHED:
            _CACHE.clear()
        hit = _CACHE[(dev, key)] = build()
    return hit


def device_constant(like, key, make):
    """The NumPy array (or tuple of them) ``make()`` builds for ``key`` (index tables, small
    matrices derived from a geometry), on ``like``'s device: built and uploaded once per
    device and kept, so a GPU op reuses it rather than uploading it (and waiting for the
    copy) on every call. Callers must not write to it."""
    dev = device_of(like)

    def build():
        made = make()
        return tuple(_placed(a, dev) for a in made) if type(made) is tuple else \
            _placed(made, dev)
    return _cached(dev, key, build)


def device_copy(like, host, dtype):
    """``host`` (a NumPy array nobody writes to, or a view of one) as ``dtype`` on ``like``'s
    device: on the CPU a cast at most; on a GPU an upload made once and kept. The cache
    holds the memory's owner, so its address keeps naming the same values."""
    if type(like) is np.ndarray:
        return host.astype(dtype, copy=False)
    dev = device_of(like)
    owner = host if host.base is None else host.base
    key = ("copy", id(owner), host.__array_interface__["data"][0], host.shape, host.strides,
           np.dtype(dtype).str)
    return _cached(dev, key, lambda: (owner, _placed(host.astype(dtype), dev)))[1]


def _placed(host, dev):
    if dev is CPU:
        host.flags.writeable = False
        return host
    return cuda_backend().upload_async(host, dev.index)     # a table: no wait for the GPU


def xp_for(dev):
    """The array namespace for an ember device."""
    if dev.type != "cuda":
        return np                   # meta tensors are made from NumPy stand-ins
    return cuda_backend().cupy


def special_of(xp):
    """scipy.special (with cpu_math's fast float32 erf) for numpy, cupyx.scipy.special for
    cupy."""
    if xp is not np:
        return cuda_backend().special
    return _cpu_special()


@functools.cache
def _cpu_special():
    import scipy.special

    from ember.backend.cpu_math import CpuSpecial
    return CpuSpecial(scipy.special)


@functools.cache
def fft_of(xp):
    """The FFT functions for ``xp``'s arrays: SciPy's for NumPy (NumPy 2.4 runs unnormalized
    single-precision transforms through double-precision buffers, 10-20x slower; SciPy's
    same pocketfft does not), cupy.fft for CuPy."""
    if xp is np:
        import scipy.fft
        return scipy.fft
    return xp.fft


@functools.cache
def cuda_available():
    """True when CuPy is importable and sees at least one GPU (checked once per process)."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:           # no CuPy, no driver or no device: all mean "not available"
        return False


def require_cuda():
    """Raise PyTorch's "not compiled with CUDA" error unless CUDA can be used."""
    if not cuda_available():
        raise RuntimeError(
            "ember not compiled with CUDA enabled: CuPy is not installed or sees no GPU "
            "(install ember's 'cuda' extra on a machine with an NVIDIA driver)")


def cuda_backend():
    """The CUDA backend module, loaded (with CuPy) on first use; raises without CUDA."""
    module = sys.modules.get("ember.backend.cuda")
    if module is None:
        require_cuda()
        from ember.backend import cuda as module
    return module


def cudnn_tf32(xp):
    """A context for the matrix products of the ops PyTorch runs through cuDNN (convolutions,
    recurrent layers): on a GPU, float32 ones use TF32 tensor cores as cuDNN's switch permits
    (NOTE [TF32] in backend/cuda.py; on by default, as in PyTorch); nothing on the CPU."""
    if xp is np:
        return contextlib.nullcontext()
    from ember.backends import _precision, cudnn
    return cuda_backend().tf32_gemms(cudnn.allow_tf32 if cudnn.enabled
                                     else _precision.allow_tf32())


_UPCAST_PRODUCTS = set()       # (array type, dtype) whose native 16-bit products failed


def low_precision_product(xp, a, b, float32_sums=False):
    """``a @ b`` of float16/bfloat16 matrices, accumulated in float32 and rounded to their
    dtype, as PyTorch computes them. A GPU multiplies them natively (cuBLAS with float32
    accumulation, on tensor cores); NumPy has no such product, so the CPU multiplies float32
    copies, as does a GPU whose CuPy turns the dtype down. ``float32_sums``: return those
    copies' float32 product unrounded, for a caller that adds to it first (a native product
    comes rounded)."""
    key = (type(a), a.dtype)
    if xp is not np and key not in _UPCAST_PRODUCTS:
        try:
            return xp.matmul(a, b).astype(a.dtype, copy=False)
        except Exception as e:      # however this CuPy refuses the dtype; not out of memory
            from ember.cuda.memory import OutOfMemoryError
            if isinstance(e, OutOfMemoryError):
                raise
            _UPCAST_PRODUCTS.add(key)
    out = xp.matmul(a.astype(np.float32), b.astype(np.float32))
    return out if float32_sums else out.astype(a.dtype)


def matmul_precision_changed(tf32):
    """Apply a new float32 matmul precision (``tf32``: TF32 allowed) to the GPUs in use."""
    if cuda_initialized():
        cuda_backend().float32_gemms(tf32)


def cuda_initialized():
    """Whether the CUDA backend has been loaded (nothing of CUDA has been used otherwise)."""
    return "ember.backend.cuda" in sys.modules


def _fp_silencer():
    """Functions that switch NumPy's floating-point warnings off and back on.

    PyTorch returns inf/nan silently where NumPy warns (log(0), 0/0). np.errstate costs about
    2 us a call; setting its context variable directly costs 0.2 us, so use it when present.
    """
    try:
        from numpy._core._ufunc_config import _extobj_contextvar as var
        with np.errstate(all="ignore"):
            silent = var.get()
        from functools import partial
        return partial(var.set, silent), var.reset
    except (ImportError, AttributeError):
        def enter():
            state = np.errstate(all="ignore")
            state.__enter__()
            return state
        return enter, (lambda state: state.__exit__(None, None, None))


quiet_fp, loud_fp = _fp_silencer()
